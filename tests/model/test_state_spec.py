"""The protocol state machines against the AMQP 1.0 specification's figures and text.

Oracles, all written here from the spec text (shared/amqp-spec/seeds/amqp-core-transport-v1.0.txt
beside the clone), never from the tables under test:

* the arrows of Figure 2.18 "Connection State Diagram" (2.4.7) and the rows of Figure 2.19
  "Connection State Table", checked word for word against the text;
* the arrows of Figure 2.25 "State Transitions" and the session state definitions of 2.5.5;
* for links, what 2.6.2-2.6.6 describe.  The spec has no link state diagram and no link
  state names: DETACHED, ATTACH_SENT, ATTACH_RCVD, ATTACHED, DETACH_SENT, DETACH_RCVD are
  ours, named after the session's states;
* the spec's example sequences (Figures 2.14-2.17, 2.21-2.24, 2.27, 2.28, 2.32-2.34 and the
  text around them), fed as frames through the state tracker: the resulting endpoint states
  are the ones the figures name, with no violation.

Every table entry that is not a spec transition must be one of the additions listed here,
each with its reason, so an accidental new entry fails.
"""

from __future__ import annotations

import os
import re

import pytest

# The state machines and the tracker under test: the only import of them in this file.
from amqp_dissect.model.state import (
    CONNECTION_TRANSITIONS,
    LINK_TRANSITIONS,
    MACHINES,
    SESSION_TRANSITIONS,
    UNKNOWN,
)
from amqp_dissect.model.tracker import StateTracker
from amqp_dissect.amqp.framing import ProtocolHeader
from amqp_dissect.amqp.codec import UInt
from test_state import CLIENT, SERVER, Script, comp, err

MACHINE = {m.name: m for m in MACHINES}

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "amqp-spec", "seeds",
                    "amqp-core-transport-v1.0.txt")


def _spec_text() -> str:
    if not os.path.exists(SPEC):
        message = f"spec text {SPEC} not beside this clone (CI always has it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with open(SPEC, encoding="utf-8") as fh:
        return fh.read()


def _section(text: str, start: str, end: str) -> str:
    """A section's body (not the table of contents: headings start a line there)."""
    i = text.index("\n" + start + "\n")
    return text[i:text.index(end, i)]


# =========================================================================== connection

# Figure 2.18 "Connection State Diagram" (2.4.7), one entry per arrow, labels as in the figure:
# (from, label, to).  R:HDR[!=S:HDR] / S:HDR[!=R:HDR] are a header that differs from the
# peer's.  "CLOSE_SENT*" is the figure's footnote: "* Also could be DISCARDING if an error
# condition triggered the CLOSE".
FIGURE_2_18 = [
    ("START", "R:HDR", "HDR_RCVD"),
    ("START", "S:HDR", "HDR_SENT"),
    ("HDR_RCVD", "S:HDR", "HDR_EXCH"),
    ("HDR_RCVD", "S:HDR[!=R:HDR]", "END"),  # the arrow down the left edge
    ("HDR_SENT", "R:HDR", "HDR_EXCH"),
    ("HDR_SENT", "S:OPEN", "OPEN_PIPE"),
    ("HDR_SENT", "R:HDR[!=S:HDR]", "END"),  # the arrow along the top and down the right edge
    ("HDR_EXCH", "R:OPEN", "OPEN_RCVD"),
    ("HDR_EXCH", "S:OPEN", "OPEN_SENT"),
    ("OPEN_PIPE", "R:HDR", "OPEN_SENT"),
    ("OPEN_PIPE", "S:CLOSE", "OC_PIPE"),
    ("OPEN_PIPE", "R:HDR[!=S:HDR]", "END"),  # joins the right edge
    ("OPEN_RCVD", "S:OPEN", "OPENED"),
    ("OPEN_SENT", "R:OPEN", "OPENED"),
    ("OPEN_SENT", "S:CLOSE", "CLOSE_PIPE"),
    ("OC_PIPE", "R:HDR", "CLOSE_PIPE"),
    ("CLOSE_PIPE", "R:OPEN", "CLOSE_SENT*"),
    ("OPENED", "R:CLOSE", "CLOSE_RCVD"),
    ("OPENED", "S:CLOSE", "CLOSE_SENT*"),
    ("CLOSE_RCVD", "S:CLOSE", "END"),
    ("CLOSE_SENT*", "R:CLOSE", "END"),
]

# Figure 2.19 "Connection State Table": state, legal sends, legal receives, connection action.
# "*" = any frames, "-" = no frames, "**" = any frame known a priori to conform to the peer's
# capabilities and limitations (the pipelined frames of 2.4.2).
FIGURE_2_19 = [
    ("START", "HDR", "HDR", ""),
    ("HDR_RCVD", "HDR", "OPEN", ""),
    ("HDR_SENT", "OPEN", "HDR", ""),
    ("HDR_EXCH", "OPEN", "OPEN", ""),
    ("OPEN_RCVD", "OPEN", "*", ""),
    ("OPEN_SENT", "**", "OPEN", ""),
    ("OPEN_PIPE", "**", "HDR", ""),
    ("CLOSE_PIPE", "-", "OPEN", "TCP Close for Write"),
    ("OC_PIPE", "-", "HDR", "TCP Close for Write"),
    ("OPENED", "*", "*", ""),
    ("CLOSE_RCVD", "*", "-", "TCP Close for Read"),
    ("CLOSE_SENT", "-", "*", "TCP Close for Write"),
    ("DISCARDING", "-", "*", "TCP Close for Write"),
    ("END", "-", "-", "TCP Close"),
]

# Our inputs tell a close carrying an error ("S:CLOSE(error)") from one without; "S:FRAME" /
# "R:FRAME" are all other frames, heartbeats included.
CONNECTION_ADDITIONS = {
    # The figure draws the mismatched-header arrow to END from HDR_SENT and OPEN_PIPE only; OC_PIPE
    # waits for the peer's header just the same (Figure 2.19: legal receive HDR).
    ("OC_PIPE", "R:HDR!=S:HDR"): (None, "END"),
    # A peer that opens and closes in one batch (2.4.3: close "MUST [be sent] on channel 0 if
    # pipelined in a single batch with the corresponding open"; the way a connection is refused):
    # its close reaches the other endpoint in OPEN_RCVD, where Figure 2.19 allows any receive, and
    # that endpoint still sends its open in CLOSE_RCVD, where Figure 2.19 allows any send.
    ("OPEN_RCVD", "R:CLOSE"): ("pipelined", "CLOSE_RCVD"),
    ("CLOSE_RCVD", "S:OPEN"): ("pipelined", "CLOSE_RCVD"),
    # UNKNOWN (not a spec state): an endpoint whose start the capture missed; its first frame
    # moves it to the state that frame implies.
    (UNKNOWN, "S:HDR"): (None, "HDR_SENT"),
    (UNKNOWN, "R:HDR"): (None, "HDR_RCVD"),
    (UNKNOWN, "S:OPEN"): ("assumed", "OPEN_SENT"),
    (UNKNOWN, "R:OPEN"): ("assumed", "OPEN_RCVD"),
    (UNKNOWN, "S:FRAME"): ("assumed", "OPENED"),
    (UNKNOWN, "R:FRAME"): ("assumed", "OPENED"),
    (UNKNOWN, "S:CLOSE"): ("assumed", "CLOSE_SENT"),
    (UNKNOWN, "S:CLOSE(error)"): ("assumed", "DISCARDING"),
    (UNKNOWN, "R:CLOSE"): ("assumed", "CLOSE_RCVD"),
}


def _connection_spec_edges() -> dict[tuple[str, str], set[str]]:
    """Figure 2.18 in our inputs: (state, input) -> the allowed targets."""
    edges: dict[tuple[str, str], set[str]] = {}
    for a, label, b in FIGURE_2_18:
        inputs = {"S:CLOSE": ["S:CLOSE", "S:CLOSE(error)"], "R:HDR[!=S:HDR]": ["R:HDR!=S:HDR"],
                  "S:HDR[!=R:HDR]": ["S:HDR!=R:HDR"]}.get(label, [label])
        for src in (["CLOSE_SENT", "DISCARDING"] if a == "CLOSE_SENT*" else [a]):
            for inp in inputs:
                if b != "CLOSE_SENT*":
                    to = {b}
                elif inp == "S:CLOSE":
                    to = {"CLOSE_SENT"}
                elif inp == "S:CLOSE(error)":
                    to = {"DISCARDING"}
                else:
                    # CLOSE_PIPE -R:OPEN->: the close was sent earlier, with or without an error.
                    # Our machine does not remember which and always takes CLOSE_SENT.
                    to = {"CLOSE_SENT", "DISCARDING"}
                edges[(src, inp)] = to
    return edges


def _connection_frame_loops() -> dict[tuple[str, str], tuple[str | None, str]]:
    """Figure 2.19: any frame may be sent ("*", "**") / received ("*") without a state change."""
    loops = {}
    for state, sends, receives, _ in FIGURE_2_19:
        if sends in ("*", "**"):
            loops[(state, "S:FRAME")] = ("pipelined" if sends == "**" else None, state)
        if receives == "*":
            # DISCARDING: "any incoming frames on the connection MUST be silently discarded"
            loops[(state, "R:FRAME")] = ("discard" if state == "DISCARDING" else None, state)
    return loops


def test_figure_2_19_transcription_is_the_spec_text():
    text = _spec_text()
    table = _section(text, "Figure 2.19: Connection State Table", "\n2.5 Sessions")
    rows = " ".join(" ".join(x for x in row if x) for row in FIGURE_2_19)
    assert "=" * 20 + " " + rows + " * = any frames - = no frames ** = any frame known a priori" in table
    states = [line.strip() for line in _section(text, "2.4.6 Connection States", "2.4.7 Connection State Diagram")
              .splitlines() if re.fullmatch(r"[A-Z][A-Z_]+", line.strip())]
    assert len(states) == 14 and sorted(r[0] for r in FIGURE_2_19) == sorted(states)
    figure = _section(text, "Figure 2.18: Connection State Diagram", "Figure 2.19")
    for a, label, b in FIGURE_2_18:
        for name in (a, label, b):
            assert name.rstrip("*") in figure, name


def test_connection_table_has_every_spec_transition():
    table = CONNECTION_TRANSITIONS
    for key, targets in _connection_spec_edges().items():
        assert key in table, f"Figure 2.18 arrow {key} missing"
        assert table[key][1] in targets, (key, table[key], targets)
    for key, (action, state) in _connection_frame_loops().items():
        assert table.get(key) == (action, state), f"Figure 2.19 allows {key}: {table.get(key)}"


def test_connection_table_has_nothing_but_spec_transitions_and_listed_additions():
    spec = set(_connection_spec_edges()) | set(_connection_frame_loops())
    for key, entry in CONNECTION_TRANSITIONS.items():
        if key in spec:
            continue
        assert key in CONNECTION_ADDITIONS, f"{key} -> {entry} is neither in the spec nor a listed addition"
        assert entry == CONNECTION_ADDITIONS[key], key
    assert set(CONNECTION_ADDITIONS) <= set(CONNECTION_TRANSITIONS)
    assert not set(CONNECTION_ADDITIONS) & spec


def test_connection_table_sends_and_receives_only_what_figure_2_19_allows():
    legal = {state: (sends, receives) for state, sends, receives, _ in FIGURE_2_19}
    assert set(legal) == set(MACHINE["connection"].states)
    for (state, inp) in CONNECTION_TRANSITIONS:
        if state == UNKNOWN:
            continue
        sends, receives = legal[state]
        allowed = sends if inp.startswith("S:") else receives
        token = re.match(r"[SR]:([A-Z]+)", inp).group(1)  # HDR, OPEN, CLOSE or FRAME
        if allowed in ("*", "**"):
            assert token != "HDR", (state, inp)  # "*" is any *frame*; a header is not one
        else:
            assert token == allowed, (state, inp, allowed)


# =========================================================================== session

# Figure 2.25 "State Transitions" (2.5.5), one entry per arrow.
FIGURE_2_25 = [
    ("UNMAPPED", "S:BEGIN", "BEGIN_SENT"),
    ("UNMAPPED", "R:BEGIN", "BEGIN_RCVD"),
    ("BEGIN_SENT", "R:BEGIN", "MAPPED"),
    ("BEGIN_RCVD", "S:BEGIN", "MAPPED"),
    ("MAPPED", "S:END(error)", "DISCARDING"),
    ("MAPPED", "S:END", "END_SENT"),
    ("MAPPED", "R:END", "END_RCVD"),
    ("DISCARDING", "R:END", "UNMAPPED"),
    ("END_SENT", "R:END", "UNMAPPED"),
    ("END_RCVD", "S:END", "UNMAPPED"),
]

# The session state definitions of 2.5.5: may the endpoint send / receive frames (other than
# begin and end, i.e. attach, flow, transfer, disposition, detach) in the state?
SESSION_STATES_2_5_5 = {
    "UNMAPPED": (False, False, "In this state an endpoint cannot send or receive frames."),
    "BEGIN_SENT": (True, False, "In this state the endpoint may send frames but cannot receive them."),
    "BEGIN_RCVD": (False, True, "The endpoint may receive frames, but cannot send them."),
    "MAPPED": (True, True, "The endpoint may both send and receive frames."),
    "END_SENT": (False, True, "The endpoint may receive frames, but cannot send them."),
    "END_RCVD": (True, False, "The endpoint may send frames, but cannot receive them."),
    "DISCARDING": (False, True, "any incoming frames on the session MUST be silently discarded"),
}

SESSION_ADDITIONS = {
    # An end pipelined right after the begin, before the peer's begin arrived (the spec's figures
    # do not show it; nothing in 2.5 forbids it): BEGIN_SENT ends like MAPPED does, and the peer,
    # which has received the begin but not answered it yet, receives the end.
    ("BEGIN_SENT", "S:END"): ("pipelined", "END_SENT"),
    ("BEGIN_SENT", "S:END(error)"): ("pipelined", "DISCARDING"),
    ("BEGIN_RCVD", "R:END"): ("pipelined", "END_RCVD"),
    # The peer's begin answering that begin then crosses the end on the wire.
    ("END_SENT", "R:BEGIN"): ("crossed", "END_SENT"),
    ("DISCARDING", "R:BEGIN"): ("crossed", "DISCARDING"),
    ("END_RCVD", "S:BEGIN"): ("crossed", "END_RCVD"),
    # UNKNOWN (not a spec state): a session whose begin the capture missed.
    (UNKNOWN, "S:BEGIN"): (None, "BEGIN_SENT"),
    (UNKNOWN, "R:BEGIN"): (None, "BEGIN_RCVD"),
    (UNKNOWN, "S:FRAME"): ("assumed", "MAPPED"),
    (UNKNOWN, "R:FRAME"): ("assumed", "MAPPED"),
    (UNKNOWN, "S:END"): ("assumed", "END_SENT"),
    (UNKNOWN, "S:END(error)"): ("assumed", "DISCARDING"),
    (UNKNOWN, "R:END"): ("assumed", "END_RCVD"),
}


def _session_spec_edges() -> dict[tuple[str, str], set[str]]:
    """Figure 2.25 in our inputs.  An S:END arrow is also taken by an end carrying an error, except
    from MAPPED, where the figure draws S:END(error) as an arrow of its own."""
    edges = {}
    explicit = {(a, label) for a, label, _ in FIGURE_2_25}
    for a, label, b in FIGURE_2_25:
        edges[(a, label)] = {b}
        if label == "S:END" and (a, "S:END(error)") not in explicit:
            edges[(a, "S:END(error)")] = {b}
    return edges


def _session_frame_loops() -> dict[tuple[str, str], str | None]:
    """2.5.5: frames sent / received without a state change; the value is the required action, if any."""
    loops = {}
    for state, (send, receive, _) in SESSION_STATES_2_5_5.items():
        if send:
            loops[(state, "S:FRAME")] = None
        if receive:
            loops[(state, "R:FRAME")] = "discard" if state == "DISCARDING" else None
    return loops


def test_session_transcription_is_the_spec_text():
    section = _section(_spec_text(), "2.5.5 Session States", "2.5.6 Session Flow Control")
    names = list(SESSION_STATES_2_5_5)  # in the order the section defines them
    for i, (state, (_, _, quote)) in enumerate(SESSION_STATES_2_5_5.items()):
        body = _section(section, state, "\n" + (names[i + 1] if i + 1 < len(names) else "Figure 2.25"))
        assert quote in " ".join(body.split()), (state, quote)
    figure = section[section.index("Figure 2.25"):]
    for a, label, b in FIGURE_2_25:
        for name in (a, label, b):
            assert name in figure, name


def test_session_table_has_every_spec_transition():
    for key, targets in _session_spec_edges().items():
        assert key in SESSION_TRANSITIONS, f"Figure 2.25 arrow {key} missing"
        assert SESSION_TRANSITIONS[key][1] in targets, (key, SESSION_TRANSITIONS[key])
    for (state, inp), action in _session_frame_loops().items():
        entry = SESSION_TRANSITIONS.get((state, inp))
        assert entry is not None and entry[1] == state, f"2.5.5 allows {inp} in {state}: {entry}"
        if action:
            assert entry[0] == action, (state, inp, entry)


def test_session_table_has_nothing_but_spec_transitions_and_listed_additions():
    spec = set(_session_spec_edges()) | set(_session_frame_loops())
    for key, entry in SESSION_TRANSITIONS.items():
        if key in spec:
            continue
        assert key in SESSION_ADDITIONS, f"{key} -> {entry} is neither in the spec nor a listed addition"
        assert entry == SESSION_ADDITIONS[key], key
    assert set(SESSION_ADDITIONS) <= set(SESSION_TRANSITIONS)
    assert not set(SESSION_ADDITIONS) & spec


def test_session_frames_only_where_2_5_5_allows_them():
    for (state, inp) in SESSION_TRANSITIONS:
        if state == UNKNOWN or not inp.endswith(":FRAME"):
            continue
        send, receive, quote = SESSION_STATES_2_5_5[state]
        assert (send if inp.startswith("S:") else receive), (state, inp, quote)


# =========================================================================== link

# The spec has no link state diagram and names no link states (2.6 describes handles being
# assigned and unassigned).  Our names follow the session's; the transitions below are what the
# text of 2.6.2-2.6.6 describes, with the sentence they come from.
LINK_TEXT = [
    # 2.6.3: a link is established "by creating a link endpoint ..., assigning it to an unused
    # handle, and sending an attach frame"
    ("DETACHED", "S:ATTACH", "ATTACH_SENT"),
    # 2.6.3: "On receipt of the attach, the remote session endpoint creates a corresponding link endpoint"
    ("DETACHED", "R:ATTACH", "ATTACH_RCVD"),
    # 2.6.2: "a link is considered to be attached when the link endpoint exists and has both input
    # and output handles assigned"
    ("ATTACH_SENT", "R:ATTACH", "ATTACHED"),
    # 2.6.3: "The link endpoint is then mapped to an unused handle, and an attach frame is issued"
    ("ATTACH_RCVD", "S:ATTACH", "ATTACHED"),
    # 2.6.4: "A session endpoint can choose to unmap its output handle for a link. In this case, the
    # endpoint MUST send a detach frame"; Figure 2.32: the partner "*detach input handle*"
    ("ATTACHED", "S:DETACH", "DETACH_SENT"),
    ("ATTACHED", "R:DETACH", "DETACH_RCVD"),
    # 2.6.4: "Should both endpoints do this, the link may return to a fully detached state."
    ("DETACH_SENT", "R:DETACH", "DETACHED"),
    ("DETACH_RCVD", "S:DETACH", "DETACHED"),
    # 2.6.2: "A link can be considered half attached (or half detached) when only one of the input
    # or output handles is assigned": frames go out on an assigned output handle and come in on an
    # assigned input handle (flow, transfer; disposition refers to deliveries, not handles).
    ("ATTACHED", "S:FRAME", "ATTACHED"),
    ("ATTACHED", "R:FRAME", "ATTACHED"),
    ("ATTACH_SENT", "S:FRAME", "ATTACH_SENT"),  # output handle only
    ("ATTACH_RCVD", "R:FRAME", "ATTACH_RCVD"),  # input handle only
    ("DETACH_SENT", "R:FRAME", "DETACH_SENT"),  # input handle only
    ("DETACH_RCVD", "S:FRAME", "DETACH_RCVD"),  # output handle only
]

LINK_ADDITIONS = {
    # Pipelined detach: an endpoint detaches before the peer's attach arrived (2.6.4 lets an
    # endpoint unmap its output handle at any time); the peer receives it after the attach it has
    # not answered yet, answers, and detaches in turn.
    ("ATTACH_SENT", "S:DETACH"): ("pipelined", "DETACH_SENT"),
    ("ATTACH_RCVD", "R:DETACH"): ("pipelined", "DETACH_RCVD"),
    # ... so the answering attach crosses that detach on the wire (also 2.6.6: "the partner MUST
    # signal that it has closed the link by reattaching and then sending a closing detach").
    ("DETACH_SENT", "R:ATTACH"): ("crossed", "DETACH_SENT"),
    ("DETACH_RCVD", "S:ATTACH"): ("crossed", "DETACH_RCVD"),
    # UNKNOWN (not a spec state): a link whose attach the capture missed.
    (UNKNOWN, "S:ATTACH"): (None, "ATTACH_SENT"),
    (UNKNOWN, "R:ATTACH"): (None, "ATTACH_RCVD"),
    (UNKNOWN, "S:FRAME"): ("assumed", "ATTACHED"),
    (UNKNOWN, "R:FRAME"): ("assumed", "ATTACHED"),
    (UNKNOWN, "S:DETACH"): ("assumed", "DETACH_SENT"),
    (UNKNOWN, "R:DETACH"): ("assumed", "DETACH_RCVD"),
}


def test_link_text_quotes_are_the_spec_text():
    text = " ".join(_section(_spec_text(), "2.6.2 Link Handles", "2.6.7 Flow Control").split())
    for quote in (
        "assigning it to an unused handle, and sending an attach frame",
        "On receipt of the attach, the remote session endpoint creates a corresponding link endpoint",
        "a link is considered to be attached when the link endpoint exists and has both input and output "
        "handles assigned",
        "The link endpoint is then mapped to an unused handle, and an attach frame is issued",
        "A session endpoint can choose to unmap its output handle for a link. In this case, the endpoint "
        "MUST send a detach frame",
        "Should both endpoints do this, the link may return to a fully detached state.",
        "A link can be considered half attached (or half detached) when only one of the input or output "
        "handles is assigned.",
        "the partner MUST signal that it has closed the link by reattaching and then sending a closing detach",
    ):
        assert quote in text, quote
    # and no state names: the link states are ours
    assert not re.search(r"\b(ATTACH_SENT|ATTACH_RCVD|DETACH_SENT|DETACH_RCVD)\b", _spec_text())


def test_link_table_has_every_transition_the_text_describes():
    for a, inp, b in LINK_TEXT:
        assert LINK_TRANSITIONS.get((a, inp), (None, None))[1] == b, (a, inp, b, LINK_TRANSITIONS.get((a, inp)))


def test_link_table_has_nothing_but_described_transitions_and_listed_additions():
    described = {(a, inp) for a, inp, _ in LINK_TEXT}
    for key, entry in LINK_TRANSITIONS.items():
        if key in described:
            continue
        assert key in LINK_ADDITIONS, f"{key} -> {entry} is neither described by 2.6 nor a listed addition"
        assert entry == LINK_ADDITIONS[key], key
    assert set(LINK_ADDITIONS) <= set(LINK_TRANSITIONS)
    assert not set(LINK_ADDITIONS) & described


# =========================================================================== every pair, through step()


def _expected(machine_name: str) -> dict[tuple[str, str], set[str]]:
    """(state, input) -> allowed targets, from the spec transcriptions and the listed additions."""
    if machine_name == "connection":
        out = dict(_connection_spec_edges())
        out.update({k: {v[1]} for k, v in _connection_frame_loops().items()})
        out.update({k: {v[1]} for k, v in CONNECTION_ADDITIONS.items()})
    elif machine_name == "session":
        out = dict(_session_spec_edges())
        out.update({k: {k[0]} for k in _session_frame_loops()})
        out.update({k: {v[1]} for k, v in SESSION_ADDITIONS.items()})
    else:
        out = {(a, inp): {b} for a, inp, b in LINK_TEXT}
        out.update({k: {v[1]} for k, v in LINK_ADDITIONS.items()})
    return out


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_step_follows_the_spec_and_flags_everything_else(machine):
    expected = _expected(machine.name)
    for state in (*machine.states, UNKNOWN):
        for inp in machine.inputs:
            _, nxt, bad = machine.step(state, inp)
            if (state, inp) in expected:
                assert bad is None and nxt in expected[(state, inp)], (machine.name, state, inp, nxt, bad)
            else:
                assert bad and state in bad and inp in bad and nxt == state, (machine.name, state, inp)


# =========================================================================== the spec's examples, as frames


def states(t: StateTracker, conn: str = "c1") -> dict:
    """Endpoint states [client, server] of the connection, its sessions and its links."""
    c = t.connections[conn]
    return {
        "connection": [c.state[0], c.state[1]],
        "sessions": [[s.state[0], s.state[1]] for s in c.sessions],
        "links": [[x.state[0], x.state[1]] for x in c.links],
    }


def script(headers: bool = False) -> Script:
    return Script(headers=headers, tracker=StateTracker)


def opened() -> Script:
    s = script()
    s.header(0)
    s.header(1)
    s.open_both()
    return s


def mapped() -> Script:
    s = opened()
    s.begin_both()
    return s


def no_violations(s: Script):
    s.a.finish()
    assert s.a.violations == [], s.a.violations


def test_figures_2_14_and_2_16_synchronous_open_and_close():
    s = script()
    steps = [
        (lambda: s.header(0), ["HDR_SENT", "HDR_RCVD"]),
        (lambda: s.header(1), ["HDR_EXCH", "HDR_EXCH"]),
        (lambda: s.frame(0, "open", container_id="client"), ["OPEN_SENT", "OPEN_RCVD"]),
        (lambda: s.frame(1, "open", container_id="server"), ["OPENED", "OPENED"]),
        (lambda: s.heartbeat(0), ["OPENED", "OPENED"]),
        (lambda: s.frame(0, "close"), ["CLOSE_SENT", "CLOSE_RCVD"]),
        (lambda: s.frame(1, "close"), ["END", "END"]),
    ]
    for send, want in steps:
        send()
        assert states(s.a)["connection"] == want
    no_violations(s)


def test_figure_2_15_pipelined_open():
    # the client sends header, open and a pipelined frame (a begin) before anything arrives
    s = script()
    s.header(0)
    s.frame(0, "open", container_id="client")
    assert states(s.a)["connection"] == ["OPEN_PIPE", "HDR_RCVD"]
    s.frame(0, "begin", next_outgoing_id=UInt(0), incoming_window=100, outgoing_window=100)
    assert states(s.a)["connection"] == ["OPEN_PIPE", "HDR_RCVD"]
    # the server processes the open and the begin only after its own header
    s.header(1)
    assert states(s.a)["connection"] == ["OPEN_SENT", "OPEN_RCVD"]
    s.frame(1, "open", container_id="server")
    s.frame(1, "begin", remote_channel=0, next_outgoing_id=UInt(0), incoming_window=100, outgoing_window=100)
    assert states(s.a) == {"connection": ["OPENED", "OPENED"], "sessions": [["MAPPED", "MAPPED"]], "links": []}
    no_violations(s)


def test_figure_2_15_both_sides_pipeline():
    # both peers send header, open and a frame before reading anything (the two halves of the figure)
    s = script()
    s.header(0)
    s.frame(0, "open", container_id="client")
    s.frame(0, "begin", next_outgoing_id=UInt(0), incoming_window=100, outgoing_window=100)
    s.header(1)
    s.frame(1, "open", container_id="server")
    s.frame(1, "begin", channel=0, next_outgoing_id=UInt(0), incoming_window=100, outgoing_window=100)
    assert states(s.a)["connection"] == ["OPENED", "OPENED"]
    no_violations(s)


def test_figure_2_17_simultaneous_close_with_errors():
    s = opened()
    s.frame(0, "close", error=err("amqp:connection:forced"))
    assert states(s.a)["connection"] == ["DISCARDING", "CLOSE_RCVD"]
    s.frame(1, "close", error=err("amqp:internal-error"))  # sent before the client's close arrived
    assert states(s.a)["connection"] == ["END", "END"]
    no_violations(s)


def test_close_sent_with_error_discards_incoming_frames():
    # 2.4.6 DISCARDING: "any incoming frames on the connection MUST be silently discarded until the
    # peer's close frame is received"
    s = mapped()
    s.frame(1, "close", error=err("amqp:connection:framing-error"))
    s.heartbeat(0)  # the client had not seen the close yet
    s.frame(0, "end")
    assert states(s.a)["connection"] == ["CLOSE_RCVD", "DISCARDING"]
    s.frame(0, "close")
    assert states(s.a)["connection"] == ["END", "END"]
    no_violations(s)


def test_open_and_close_pipelined_in_one_batch():
    # 2.4.3: a close "MUST [be sent] on channel 0 if pipelined in a single batch with the
    # corresponding open" -- OC_PIPE then CLOSE_PIPE on the sender's side (Figure 2.18)
    s = script()
    s.header(1)  # a server that refuses: header, open, close, all before the client's header
    s.frame(1, "open", container_id="server")
    s.frame(1, "close", error=err("amqp:unauthorized-access"))
    assert states(s.a)["connection"] == ["HDR_RCVD", "OC_PIPE"]
    s.header(0)
    assert states(s.a)["connection"][1] == "CLOSE_PIPE"
    s.frame(0, "open", container_id="client")
    assert states(s.a)["connection"] == ["CLOSE_RCVD", "CLOSE_SENT"]
    s.frame(0, "close")
    assert states(s.a)["connection"] == ["END", "END"]
    no_violations(s)


def test_figure_2_7_version_rejected_ends_both_endpoints():
    # Figure 2.7 (2): the client asks for AMQP 1.1.0, the server answers with the 1.0.0 it supports
    s = script()
    p, t = s.tick()
    s.a.feed(ProtocolHeader("c1", 0, CLIENT, SERVER, p, t, 0, (1, 1, 0)))
    assert states(s.a)["connection"] == ["HDR_SENT", "HDR_RCVD"]
    s.header(1)
    assert states(s.a)["connection"] == ["END", "END"]
    s.a.finish()
    assert [v["kind"] for v in s.a.violations if v["kind"] == "state"] == []


def test_figure_2_8_protocol_id_rejected_ends_both_endpoints():
    # Figure 2.8: the client asks for plain AMQP (protocol id 0); the server requires SASL (id 3),
    # answers with its SASL header and closes.  Figure 2.18: R:HDR[!=S:HDR] / S:HDR[!=R:HDR] -> END.
    s = script()
    s.header(0)
    s.header(1, pid=3)
    assert states(s.a)["connection"] == ["END", "END"]


def test_figures_2_21_and_2_22_begin_and_end():
    s = opened()
    s.frame(0, "begin", channel=3, next_outgoing_id=UInt(0), incoming_window=100, outgoing_window=100)
    assert states(s.a)["sessions"] == [["BEGIN_SENT", "BEGIN_RCVD"]]
    s.frame(1, "begin", channel=7, remote_channel=3, next_outgoing_id=UInt(0), incoming_window=100,
            outgoing_window=100)
    assert states(s.a)["sessions"] == [["MAPPED", "MAPPED"]]
    s.frame(0, "end", channel=3)
    assert states(s.a)["sessions"] == [["END_SENT", "END_RCVD"]]
    s.frame(1, "end", channel=7)
    assert states(s.a)["sessions"] == [["UNMAPPED", "UNMAPPED"]]
    no_violations(s)


def test_figure_2_23_simultaneous_end():
    s = mapped()
    s.frame(1, "end", error=err("amqp:session:window-violation"))
    s.frame(0, "end", error=err("amqp:session:errant-link"))  # crossed the server's end
    assert states(s.a)["sessions"] == [["UNMAPPED", "UNMAPPED"]]
    no_violations(s)


def test_figure_2_24_session_error_discards_until_end():
    s = mapped()
    flow = dict(next_incoming_id=UInt(0), incoming_window=100, next_outgoing_id=UInt(0), outgoing_window=100)
    s.frame(0, "flow", **flow)  # FRAME 1
    s.frame(0, "flow", **flow)  # FRAME 2
    s.frame(1, "end", error=err("amqp:internal-error"))  # crosses FRAME 3
    assert states(s.a)["sessions"] == [["END_RCVD", "DISCARDING"]]
    s.frame(0, "flow", **flow)  # FRAME 3: *discarded*
    assert states(s.a)["sessions"] == [["END_RCVD", "DISCARDING"]]
    s.frame(0, "end")
    assert states(s.a)["sessions"] == [["UNMAPPED", "UNMAPPED"]]
    no_violations(s)


def _attach(s: Script, d: int, handle: int, target: bool = True, **kw):
    """Figure 2.27's attaches: the client is the sender (role=false), the server the receiver."""
    return s.frame(d, "attach", name="N", handle=UInt(handle), role=d == 1, source=comp("source", address="A"),
                   target=comp("target", address="B") if target else None,
                   initial_delivery_count=UInt(0) if d == 0 else None, **kw)


def test_figure_2_27_establishing_a_link():
    s = mapped()
    _attach(s, 0, 1)
    assert states(s.a)["links"] == [["ATTACH_SENT", "ATTACH_RCVD"]]
    _attach(s, 1, 2)
    assert states(s.a)["links"] == [["ATTACHED", "ATTACHED"]]
    no_violations(s)


def test_figure_2_28_refusing_a_link():
    s = mapped()
    _attach(s, 0, 1)
    _attach(s, 1, 2, target=False)  # target=-: no terminus; the partner detaches at once
    s.frame(1, "detach", handle=UInt(2), closed=True)
    assert states(s.a)["links"] == [["DETACH_RCVD", "DETACH_SENT"]]
    s.frame(0, "detach", handle=UInt(1), closed=True)
    assert states(s.a)["links"] == [["DETACHED", "DETACHED"]]
    no_violations(s)


@pytest.mark.parametrize("closed", [None, True], ids=["2.32-detach", "2.34-close"])
def test_figures_2_32_and_2_34_detaching_and_closing_a_link(closed):
    s = mapped()
    _attach(s, 0, 1)
    _attach(s, 1, 2)
    s.flow(1, handle=2, dc=UInt(0), credit=UInt(5))  # *use link*
    s.transfer(handle=1, did=0)
    s.disposition(first=0)
    s.frame(0, "detach", handle=UInt(1), closed=closed)
    assert states(s.a)["links"] == [["DETACH_SENT", "DETACH_RCVD"]]
    s.frame(1, "detach", handle=UInt(2), closed=closed)
    assert states(s.a)["links"] == [["DETACHED", "DETACHED"]]
    no_violations(s)


def test_pipelined_detach():
    # the client attaches and detaches before the server's attach arrived; the server answers
    # the attach, then the detach
    s = mapped()
    _attach(s, 0, 1)
    s.frame(0, "detach", handle=UInt(1), closed=True)
    assert states(s.a)["links"] == [["DETACH_SENT", "DETACH_RCVD"]]
    _attach(s, 1, 2)
    s.frame(1, "detach", handle=UInt(2), closed=True)
    assert states(s.a)["links"] == [["DETACHED", "DETACHED"]]
    no_violations(s)


def test_frames_crossing_a_detach():
    # 2.6.2 half detached: the server's flow was on the wire when the client's detach arrived
    s = mapped()
    _attach(s, 0, 1)
    _attach(s, 1, 2)
    s.frame(0, "detach", handle=UInt(1))
    s.flow(1, handle=2, dc=UInt(0), credit=UInt(5))
    assert states(s.a)["links"] == [["DETACH_SENT", "DETACH_RCVD"]]
    s.frame(1, "detach", handle=UInt(2))
    assert states(s.a)["links"] == [["DETACHED", "DETACHED"]]
    no_violations(s)


def test_2_6_6_closing_detach_crossing_a_non_closing_one():
    # "one peer may send a closing detach while its partner is sending a non-closing detach. In
    # this case, the partner MUST signal that it has closed the link by reattaching and then
    # sending a closing detach."  The peer answers that attach like any (2.6.3) and detaches.
    s = mapped()
    _attach(s, 0, 1)
    _attach(s, 1, 2)
    s.frame(0, "detach", handle=UInt(1), closed=True)
    s.frame(1, "detach", handle=UInt(2), closed=False)
    assert states(s.a)["links"][-1] == ["DETACHED", "DETACHED"]
    _attach(s, 1, 2)
    s.frame(1, "detach", handle=UInt(2), closed=True)
    _attach(s, 0, 1)
    s.frame(0, "detach", handle=UInt(1), closed=True)
    assert all(x == ["DETACHED", "DETACHED"] for x in states(s.a)["links"]), states(s.a)["links"]
    no_violations(s)


def test_figure_2_33_updating_link_state():
    # The peer detaches and re-attaches at once with updated termini; the partner's detach
    # crosses the re-attach on the wire, then the partner re-attaches too.
    s = mapped()
    _attach(s, 0, 1)
    _attach(s, 1, 2)
    s.frame(0, "detach", handle=UInt(1))
    _attach(s, 0, 1)  # ATTACH(name=N, handle=1, source=A', target=B'), before the partner's detach
    s.frame(1, "detach", handle=UInt(2))
    _attach(s, 1, 2)
    # "(1) At this point the link is updated and attached."  We keep one link record per
    # attachment: the first one ended detached on both sides.
    assert states(s.a)["links"] == [["DETACHED", "DETACHED"], ["ATTACHED", "ATTACHED"]]
    no_violations(s)
