"""Protocol state layer: state tables, serial-number arithmetic, hand-built frame streams.

Oracles: the state names are read from the spec text itself; the hand-built
streams are written here frame by frame, so the expected deliveries, stalls and
violations follow from how each stream was constructed (not from our output).
"""

from __future__ import annotations

import json
import os
import pickle
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.amqp.framing import Frame, ProtocolHeader
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.amqp.codec import Composite, Symbol, UInt
from amqp_dissect.events import StreamClosed, StreamOpened
from amqp_dissect.amqp.spec import COMPOSITES
from amqp_dissect.model.machine import CONNECTION_MACHINE, LINK_MACHINE, MACHINES, SESSION_MACHINE, Endpoints
from amqp_dissect.model.serial import serial_add, serial_diff, serial_in_range, serial_lt, serial_range_len
from amqp_dissect.model.transitions import UNKNOWN

TOP = 2**32

# --------------------------------------------------------------------------- spec text oracle

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "amqp-spec", "seeds",
                    "amqp-core-transport-v1.0.txt")


def _spec_states(start: str, end: str) -> list[str]:
    with open(SPEC, encoding="utf-8") as fh:
        text = fh.read()
    # the section body, not the table of contents: headings start a line there
    i = text.index("\n" + start + "\n")
    section = text[i:text.index(end, i)]
    return [line.strip() for line in section.splitlines() if re.fullmatch(r"[A-Z][A-Z_]+", line.strip())]


@pytest.mark.skipif(
    not os.path.exists(SPEC) and not os.environ.get("CI"),
    reason=f"spec text {SPEC} not beside this clone (CI always has it: there this test runs and fails)",
)
def test_state_names_are_the_specs():
    conn = _spec_states("2.4.6 Connection States", "2.4.7 Connection State Diagram")
    sess = _spec_states("2.5.5 Session States", "Figure 2.25")
    assert conn and sess
    assert set(CONNECTION_MACHINE.states) == set(conn)
    assert set(SESSION_MACHINE.states) == set(sess)


def test_tables_use_only_declared_states_and_inputs():
    for m in MACHINES:
        names = set(m.states) | {UNKNOWN}
        for (state, inp), (action, nxt) in m.transitions.items():
            assert state in names and nxt in names, (m.name, state, nxt)
            assert inp in m.inputs, (m.name, inp)
            assert action in (None, "pipelined", "discard", "assumed", "crossed")
        assert m.initial in m.states
        # every spec state can be reached from the initial state
        seen, todo = {m.initial}, [m.initial]
        while todo:
            s = todo.pop()
            for (a, _), (_, b) in m.transitions.items():
                if a == s and b not in seen:
                    seen.add(b)
                    todo.append(b)
        assert set(m.states) <= seen, (m.name, set(m.states) - seen)


# Every (state, input) pair against the spec's figures and text: tests/model/test_state_spec.py


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_random_input_sequences_never_raise(machine, data):
    start = data.draw(st.sampled_from((*machine.states, UNKNOWN)))
    ep = Endpoints(machine, start)
    xs = sorted({i[2:] for i in machine.inputs})
    valid = set(machine.states) | {UNKNOWN}
    for _ in range(data.draw(st.integers(0, 30))):
        d = data.draw(st.integers(0, 1))
        x = data.draw(st.sampled_from(xs))
        s_in = "S:" + x
        r_in = "R:" + x.replace("(error)", "")
        if r_in not in machine.inputs:
            r_in = "R:" + x.split("!=")[0]
        msgs = ep.advance(d, s_in, r_in)
        assert all(isinstance(m, str) and m for m in msgs)
        assert ep[0] in valid and ep[1] in valid


def _walk(machine, steps, start=None):
    ep = Endpoints(machine, start or machine.initial)
    out = []
    for d, x in steps:
        r = "R:" + x.replace("(error)", "")
        out += ep.advance(d, "S:" + x, r)
    return ep, out


def test_connection_happy_path_and_pipelining():
    # Figures 2.14 and 2.16: both sides send header and open, then close
    ep, bad = _walk(CONNECTION_MACHINE, [(0, "HDR"), (1, "HDR"), (0, "OPEN"), (1, "OPEN"),
                                         (0, "FRAME"), (1, "FRAME"), (0, "CLOSE"), (1, "CLOSE")])
    assert bad == [] and ep.state == ["END", "END"]
    # the client pipelines header, open and a begin before the server said anything:
    # the server endpoint processes open and begin after its own header
    ep, bad = _walk(CONNECTION_MACHINE, [(0, "HDR"), (0, "OPEN"), (0, "FRAME"), (1, "HDR"), (1, "OPEN")])
    assert bad == [] and ep.state == ["OPENED", "OPENED"]
    # close with an error: DISCARDING until the peer's close
    ep, bad = _walk(CONNECTION_MACHINE, [(0, "HDR"), (1, "HDR"), (0, "OPEN"), (1, "OPEN"), (1, "CLOSE(error)")])
    assert ep.state == ["CLOSE_RCVD", "DISCARDING"] and bad == []


def test_connection_frame_after_close_is_a_violation():
    ep, bad = _walk(CONNECTION_MACHINE, [(0, "HDR"), (1, "HDR"), (0, "OPEN"), (1, "OPEN"), (0, "CLOSE"),
                                         (0, "FRAME")])
    assert ep.state[0] == "CLOSE_SENT"
    assert any("S:FRAME not allowed in connection state CLOSE_SENT" in m for m in bad)


def test_session_simultaneous_end():
    # Figure 2.23: both ends cross on the wire
    ep, bad = _walk(SESSION_MACHINE, [(0, "BEGIN"), (1, "BEGIN"), (0, "END"), (1, "END")])
    assert bad == [] and ep.state == ["UNMAPPED", "UNMAPPED"]
    ep, bad = _walk(SESSION_MACHINE, [(0, "BEGIN"), (1, "BEGIN"), (0, "END(error)"), (1, "FRAME"), (1, "END")])
    assert bad == [] and ep.state == ["UNMAPPED", "UNMAPPED"]


def test_link_refusal_sequence():
    # Figure 2.28: attach, attach with null target, detach, detach
    ep, bad = _walk(LINK_MACHINE, [(0, "ATTACH"), (1, "ATTACH"), (1, "DETACH"), (0, "DETACH")])
    assert bad == [] and ep.state == ["DETACHED", "DETACHED"]
    ep, bad = _walk(LINK_MACHINE, [(0, "ATTACH"), (1, "ATTACH"), (0, "DETACH"), (0, "FRAME")])
    assert any("DETACH_SENT" in m for m in bad)


# --------------------------------------------------------------------------- serial numbers


def test_serial_arithmetic_wraps():
    assert serial_add(TOP - 1, 1) == 0
    assert serial_add(TOP - 2, 5) == 3
    assert serial_diff(1, TOP - 1) == 2
    assert serial_diff(TOP - 1, 1) == -2
    assert serial_lt(TOP - 1, 0) and not serial_lt(0, TOP - 1)
    assert serial_range_len(TOP - 2, 1) == 4
    assert serial_in_range(0, TOP - 2, 1) and serial_in_range(TOP - 1, TOP - 2, 1)
    assert not serial_in_range(2, TOP - 2, 1) and not serial_in_range(TOP - 3, TOP - 2, 1)


@given(st.integers(0, TOP - 1), st.integers(-(2**31) + 1, 2**31 - 1))
def test_serial_diff_inverts_add(a, n):
    assert serial_diff(serial_add(a, n), a) == n
    assert serial_lt(a, serial_add(a, n)) == (n > 0)


# --------------------------------------------------------------------------- hand-built streams

CLIENT, SERVER = "10.0.0.1:40000", "10.0.0.2:5672"


def comp(type_name: str, **fields) -> Composite:
    """A composite with the given fields (python_names, '_' for '-'), absent after the last one given."""
    spec = COMPOSITES[type_name]
    given_ = {k.replace("_", "-"): v for k, v in fields.items()}
    unknown = set(given_) - set(spec.index)
    assert not unknown, unknown
    last = max((spec.index[k] for k in given_), default=-1)
    return Composite(spec, [given_.get(f.name) for f in spec.fields[: last + 1]])


def err(cond: str, desc: str | None = None) -> Composite:
    return comp("error", condition=Symbol(cond), description=desc)


NS = 1_000_000_000


class Script:
    """Feeds hand-built events into an Analyzer (or another tracker), one packet per frame, 10 ms apart."""

    def __init__(self, syn=True, headers=True, conn="c1", t0=1000.0, dt=0.01, tracker=Analyzer):
        self.a = tracker()
        self.conn = conn
        self.t = round(t0 * NS)  # (seconds given; every event time is integer nanoseconds)
        self.dt = round(dt * NS)
        self.packet = 0
        self.a.feed(StreamOpened(conn, CLIENT, SERVER, self.t, 1, syn))
        self.packet = 1
        if headers:
            self.header(0)
            self.header(1)

    def tick(self, dt=None):
        self.packet += 1
        self.t += self.dt if dt is None else round(dt * NS)
        return self.packet, self.t

    def header(self, d, pid=0):
        p, t = self.tick()
        src, dst = (CLIENT, SERVER) if d == 0 else (SERVER, CLIENT)
        self.a.feed(ProtocolHeader(self.conn, d, src, dst, p, t, pid, (1, 0, 0)))

    def frame(self, d, perf, channel=0, payload=b"", dt=None, **fields) -> Frame:
        p, t = self.tick(dt)
        src, dst = (CLIENT, SERVER) if d == 0 else (SERVER, CLIENT)
        f = Frame(self.conn, d, src, dst, p, t, p, 8 + 10 + len(payload), 2, 0, channel)
        if perf:
            f.set_performative(comp(perf, **fields), payload)
        else:
            f.size = 8
        self.a.feed(f)
        return f

    def heartbeat(self, d, dt=None):
        return self.frame(d, None, dt=dt)

    # common sequences
    def open_both(self, client_idle=None, server_idle=None):
        self.frame(0, "open", container_id="client", idle_time_out=client_idle)
        self.frame(1, "open", container_id="server", idle_time_out=server_idle)

    def begin_both(self, ch_client=0, ch_server=0, noid=(0, 0), window=(1000, 1000)):
        self.frame(0, "begin", channel=ch_client, next_outgoing_id=UInt(noid[0]), incoming_window=window[0],
                   outgoing_window=1000)
        self.frame(1, "begin", channel=ch_server, remote_channel=ch_client, next_outgoing_id=UInt(noid[1]),
                   incoming_window=window[1], outgoing_window=1000)

    def attach_sender(self, name="L", handle=0, ch=(0, 0), idc=0, address="q"):
        """Client sender link; the server answers with its attach."""
        self.frame(0, "attach", channel=ch[0], name=name, handle=UInt(handle), role=False,
                   source=comp("source", address="src"), target=comp("target", address=address),
                   initial_delivery_count=UInt(idc))
        self.frame(1, "attach", channel=ch[1], name=name, handle=UInt(handle), role=True,
                   source=comp("source", address="src"), target=comp("target", address=address))

    def flow(self, d, ch=0, handle=0, dc=None, credit=None, drain=None, available=None, nii=None, iw=1000,
             noid=0):
        return self.frame(d, "flow", channel=ch, next_incoming_id=nii, incoming_window=iw, next_outgoing_id=noid,
                          outgoing_window=1000, handle=UInt(handle), delivery_count=dc, link_credit=credit,
                          available=available, drain=drain)

    def transfer(self, d=0, ch=0, handle=0, did=None, tag=None, more=None, settled=None, payload=b"msg", **kw):
        return self.frame(d, "transfer", channel=ch, payload=payload, handle=UInt(handle),
                          delivery_id=None if did is None else UInt(did),
                          delivery_tag=tag if tag is not None else (b"t%d" % (did or 0)), message_format=0,
                          settled=settled, more=more, **kw)

    def disposition(self, d=1, ch=0, first=0, last=None, settled=True, state="accepted", role=None):
        st_ = comp(state) if isinstance(state, str) else state
        return self.frame(d, "disposition", channel=ch, role=(d == 1) if role is None else role, first=UInt(first),
                          last=None if last is None else UInt(last), settled=settled, state=st_)

    def done(self, end_ts=None):
        self.a.finish(end_ts)
        return self.a


def kinds(a, **match):
    return [v["kind"] for v in a.violation_rows() if all(v.get(k) == x for k, x in match.items())]


def test_delivery_id_wraparound_and_disposition_range_across_the_wrap():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=10)
    ids = [TOP - 2, TOP - 1, 0, 1]
    sent = [s.transfer(did=i, tag=b"tag%d" % n) for n, i in enumerate(ids)]
    # one disposition covers 2**32-2 .. 1, i.e. the four deliveries across the wrap
    disp = s.disposition(first=TOP - 2, last=1, state="accepted")
    a = s.done()
    assert a.violation_rows() == []
    rows = a.delivery_rows()
    assert [r["delivery_id"] for r in rows] == ids
    assert [r["delivery_tag"] for r in rows] == [(b"tag%d" % n).hex() for n in range(4)]
    for r, f in zip(rows, sent):
        assert r["outcome"] == "accepted" and r["settled_by"] == "receiver"
        assert r["settled_packet"] == disp.packet
        assert r["settlement_latency"] == (disp.ts - f.ts) / NS
    link = a.link_rows()[0]
    assert link["deliveries"] == 4 and link["accepted"] == 4 and link["unsettled"] == 0


def test_disposition_range_only_covers_its_ids():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=10)
    for i in (TOP - 2, TOP - 1, 0, 1):
        s.transfer(did=i)
    s.disposition(first=TOP - 1, last=0, state="released")
    s.disposition(first=5, last=6, state="accepted")  # never transferred
    a = s.done()
    out = {r["delivery_id"]: r["outcome"] for r in a.delivery_rows()}
    assert out == {TOP - 2: "", TOP - 1: "released", 0: "released", 1: ""}
    assert kinds(a) == ["unknown-delivery"]


def test_delivery_count_wraparound_credit_and_stall():
    s = Script()
    s.open_both()
    s.begin_both()
    idc = TOP - 2
    s.attach_sender(idc=idc)
    grant = s.flow(1, dc=UInt(idc), credit=UInt(3))
    t1 = s.transfer(did=0)  # delivery-count 2**32-2 -> 2**32-1
    t2 = s.transfer(did=1)  # -> 0 (wrapped)
    t3 = s.transfer(did=2)  # -> 1: credit exhausted by this transfer
    s.transfer(did=3)  # beyond credit
    restore = s.flow(1, dc=UInt(1), credit=UInt(2))  # the receiver saw 3 (of 4): limit 1 + 2 = 3
    a = s.done()
    assert kinds(a) == ["credit"]
    v = a.violation_rows()[0]
    assert v["delivery_id"] == 3 and v["side"] == "client"
    stalls = a.stall_rows()
    assert [x["kind"] for x in stalls] == ["initial-credit", "link-credit"]
    init, st_ = stalls
    assert init["end_packet"] == grant.packet
    assert st_["start_packet"] == t3.packet and st_["end_packet"] == restore.packet
    assert st_["duration"] == (restore.ts - t3.ts) / NS and st_["open"] is False
    assert t1.packet < t2.packet < t3.packet
    link = a.link_rows()[0]
    # sender's delivery-count after 4 deliveries from 2**32-2 is 2; limit 1 + 2 = 3: credit 1
    assert link["delivery_count"] == 2 and link["link_credit"] == 1 and link["initial_delivery_count"] == idc


def test_credit_lowered_while_a_transfer_is_in_flight_is_tolerated_once():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=5)
    s.transfer(did=0)
    s.flow(1, dc=1, credit=0)  # "stop" ...
    s.transfer(did=1)  # ... crossed this transfer on the wire: no violation
    s.flow(1, dc=2, credit=0)  # the receiver confirms the stop after seeing the transfer
    late = s.transfer(did=2)  # now the sender has had the stop: beyond credit
    a = s.done()
    assert [(v["kind"], v["packet"]) for v in a.violation_rows()] == [("credit", late.packet)]


def test_framing_notes_on_frames_become_violations():
    from amqp_dissect.errors import ExpertNote

    s = Script()
    s.open_both()
    s.begin_both()
    p, t = s.tick()
    f = Frame("c1", 0, CLIENT, SERVER, p, t, p, 600, 2, 0, 0)
    f.set_performative(comp("flow", incoming_window=10, next_outgoing_id=0, outgoing_window=10))
    # what amqp_dissect.amqp.framing notes on a frame larger than the peer's max-frame-size
    f.notes.append(ExpertNote("warn", "protocol", "frame of 600 bytes exceeds the peer's max-frame-size 512"))
    f.notes.append(ExpertNote("chat", "reassembly", "not a violation"))
    s.a.feed(f)
    a = s.done()
    assert [(v["kind"], v["origin"], v["packet"], v["side"]) for v in a.violation_rows()] == [
        ("frame-size", "framing", p, "client")]


def test_the_model_does_not_import_the_layers_above_it():
    # layering: capture -> amqp -> model -> results -> render; the model imports neither
    # the results nor the presentation layer (nor pandas), so it can run anywhere
    import subprocess
    import sys

    code = ("import sys, amqp_dissect.model.state; "
            "print(sorted(m for m in sys.modules if m.startswith(('amqp_dissect.results', 'amqp_dissect.render', "
            "'amqp_dissect.pipelines', 'amqp_dissect.cli', 'pandas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_events_are_ignored():
    from amqp_dissect.events import PacketNote
    from amqp_dissect.errors import ExpertNote

    a = Analyzer()
    a.feed(object())
    a.feed(PacketNote(1, 1.0, ExpertNote("warn", "capture", "x")))
    a.finish()
    assert a.connection_rows() == [] and a.violation_rows() == [] and a.summary()["connections"] == 0


def test_session_window_wraparound_stall_and_violation():
    s = Script()
    s.open_both()
    # the client's transfer-ids start just below the wrap; the server's incoming-window is 2
    s.begin_both(noid=(TOP - 1, 0), window=(1000, 2))
    s.attach_sender()
    s.flow(1, dc=0, credit=10, nii=UInt(TOP - 1), iw=2)
    s.transfer(did=0)  # transfer-id 2**32-1
    t2 = s.transfer(did=1)  # transfer-id 0: window exhausted
    s.transfer(did=2)  # beyond the incoming-window
    reopen = s.flow(1, dc=3, credit=10, nii=UInt(2), iw=5)
    a = s.done()
    assert kinds(a) == ["session-window"]
    sw = [x for x in a.stall_rows() if x["kind"] == "session-window"]
    assert len(sw) == 1
    assert sw[0]["start_packet"] == t2.packet and sw[0]["end_packet"] == reopen.packet
    row = a.session_rows()[0]
    assert row["next_outgoing_id_final_client"] == 2 and row["remote_incoming_window_client"] == 5


def test_channel_mapping_with_different_channels():
    s = Script()
    s.open_both()
    # session A: client channel 3, server channel 7; session B: client 7, server 3
    s.begin_both(ch_client=3, ch_server=7)
    s.begin_both(ch_client=7, ch_server=3)
    s.attach_sender(name="A", handle=0, ch=(3, 7), address="qa")
    s.attach_sender(name="B", handle=0, ch=(7, 3), address="qb")
    s.flow(1, ch=7, handle=0, dc=0, credit=1)  # credit for A (server channel 7)
    s.flow(1, ch=3, handle=0, dc=0, credit=2)  # credit for B (server channel 3)
    s.transfer(ch=3, did=0)  # A
    s.transfer(ch=7, did=0)  # B
    s.transfer(ch=7, did=1)  # B
    s.disposition(ch=7, first=0)  # server settles A's delivery 0 on A's server channel
    s.disposition(ch=3, first=0, last=1, state="rejected")  # and B's two
    a = s.done()
    assert a.violation_rows() == []
    sessions = a.session_rows()
    assert [(x["channel_client"], x["channel_server"]) for x in sessions] == [(3, 7), (7, 3)]
    assert [x["initiator"] for x in sessions] == ["client", "client"]
    links = {x["name"]: x for x in a.link_rows()}
    assert links["A"]["address"] == "qa" and links["A"]["accepted"] == 1 and links["A"]["deliveries"] == 1
    assert links["B"]["address"] == "qb" and links["B"]["rejected"] == 2 and links["B"]["deliveries"] == 2
    assert links["A"]["session"] == 0 and links["B"]["session"] == 1
    # A got credit 1 and used it: one link-credit stall; B got 2 and used both: one too
    st_ = [(x["link"], x["kind"]) for x in a.stall_rows()]
    assert st_.count(("A", "link-credit")) == 1 and st_.count(("B", "link-credit")) == 1


def _mid_stream(s: Script):
    """Frames of a session/link whose begin and attach happened before the capture."""
    s.flow(1, ch=0, handle=2, dc=UInt(40), credit=UInt(2), nii=UInt(100), iw=100, noid=50)
    t1 = s.transfer(d=0, ch=0, handle=2, did=500)
    t2 = s.transfer(d=0, ch=0, handle=2, did=501)
    s.disposition(d=1, ch=0, first=490, last=501)  # 490..499 were transferred before the capture
    return t1, t2


def test_mid_connection_join_gives_unknown_entries_not_exceptions():
    s = Script(syn=False, headers=False)
    _mid_stream(s)
    a = s.done()
    assert a.violation_rows() == []
    conn = a.connection_rows()[0]
    assert conn["mid_connection"] is True and conn["state"] == {"client": "OPENED", "server": "OPENED"}
    assert "open (client)" in conn["unknown"] and "open (server)" in conn["unknown"]
    sess = a.session_rows()[0]
    assert "begin" in sess["unknown"] and sess["state_client"] == "MAPPED"
    assert sess["unseen_dispositions"] == 10
    link = a.link_rows()[0]
    assert link["name"] is None and link["handle"] == 2 and link["sender_side"] == "client"
    assert {"attach", "name", "address"} <= set(link["unknown"])
    assert link["state_client"] == "ATTACHED" and link["address"] is None
    assert link["deliveries"] == 2 and link["accepted"] == 2
    # the receiver's delivery-count 40 + credit 2 = limit 42; the sender reached it: a stall
    assert [x["kind"] for x in a.stall_rows()] == ["link-credit"]


def test_same_frames_in_a_connection_seen_from_the_start_are_violations():
    s = Script()
    s.open_both()
    _mid_stream(s)
    a = s.done()
    # one violation for the channel without begin; what happens on it is then "unknown", not more violations
    assert kinds(a) == ["unknown-channel"]
    s = Script()
    s.open_both()
    s.begin_both()
    _mid_stream(s)
    a = s.done()
    assert kinds(a) == ["unknown-handle", "unknown-delivery"]


def test_state_violations_are_reported_and_survived():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=5)
    s.frame(0, "detach", handle=UInt(0), closed=True)
    s.transfer(did=0)  # after our own detach
    s.frame(1, "detach", handle=UInt(0), closed=True, error=err("amqp:link:detach-forced", "bye"))
    s.frame(0, "close")
    s.frame(0, "end")  # after close
    s.frame(1, "close", error=err("amqp:connection:forced"))
    a = s.done()
    msgs = [v["message"] for v in a.violation_rows() if v["kind"] == "state"]
    assert any("transfer" in m and "DETACH_SENT" in m for m in msgs)
    assert any("end" in m and "CLOSE_SENT" in m for m in msgs)
    errs = {(e["scope"], e["condition"], e["side"]) for e in a.error_rows() if e["source"] == "frame"}
    assert errs == {("link", "amqp:link:detach-forced", "server"), ("connection", "amqp:connection:forced", "server")}
    conn = a.connection_rows()[0]
    assert conn["close_error"] == "amqp:connection:forced" and conn["closed_by"] == "client"
    link = a.link_rows()[0]
    assert link["detach_error"] == "amqp:link:detach-forced" and link["detached_by"] == "client"


def test_idle_timeout_violation():
    s = Script()
    s.open_both(server_idle=UInt(1000))  # the client must send at least every 1 s
    s.begin_both()
    s.heartbeat(0, dt=0.6)
    s.heartbeat(0, dt=0.6)
    late = s.heartbeat(0, dt=1.5)  # 1.5 s after the last client frame
    s.heartbeat(1, dt=0.5)
    for _ in range(8):  # the client announced no idle-time-out: the server may be silent for 4 s
        s.heartbeat(0, dt=0.5)
    s.heartbeat(1, dt=0.5)
    a = s.done()
    idle = [v for v in a.violation_rows() if v["kind"] == "idle-timeout"]
    assert [(v["packet"], v["side"]) for v in idle] == [(late.packet, "client")]
    # at the end of the capture the client has been silent for 5 s
    s2 = Script()
    s2.open_both(server_idle=UInt(1000))
    s2.heartbeat(1, dt=5.0)
    a2 = s2.done()
    assert [v["side"] for v in a2.violation_rows() if v["kind"] == "idle-timeout"] == ["client"]


def test_settlement_by_both_and_outcome_details():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=5)
    t0 = s.transfer(did=0, more=True)
    s.transfer(did=0, more=True)
    s.transfer(payload=b"end")  # continuation without delivery-id
    s.disposition(first=0, settled=False, state=comp("received", section_number=UInt(0), section_offset=12))
    out = s.disposition(first=0, settled=False,
                        state=comp("modified", delivery_failed=True, undeliverable_here=False))
    fin = s.disposition(d=0, first=0, settled=True, state="accepted", role=False)
    s.transfer(did=1, settled=True)  # pre-settled
    t2 = s.transfer(did=2)
    s.disposition(first=2, state=comp("rejected", error=err("amqp:precondition-failed", "no")))
    s.transfer(did=3, aborted=True)
    t4 = s.transfer(did=4)
    rcv = s.disposition(first=4, settled=True, state="released")
    s.disposition(d=0, first=4, settled=True, role=False, state="released")  # the sender confirms later
    a = s.done()
    assert a.violation_rows() == []
    rows = {r["delivery_id"]: r for r in a.delivery_rows()}
    r0 = rows[0]
    assert r0["frames"] == 3 and r0["message_size"] == 9 and r0["first_packet"] == t0.packet
    assert r0["received_state"] == "section 0 offset 12"
    assert r0["outcome"] == "modified" and r0["delivery_failed"] is True and r0["undeliverable_here"] is False
    assert r0["outcome_packet"] == out.packet and r0["outcome_latency"] == (out.ts - t0.ts) / NS
    assert r0["settled_by"] == "sender" and r0["settled_packet"] == fin.packet
    assert rows[1]["presettled"] is True and rows[1]["settled_by"] == "sender" and rows[1]["settlement_latency"] == 0
    assert rows[2]["outcome"] == "rejected" and rows[2]["outcome_error"] == "amqp:precondition-failed"
    assert rows[2]["settlement_latency"] > 0 and rows[2]["first_packet"] == t2.packet
    assert rows[3]["aborted"] is True and rows[3]["settled_by"] == "" and rows[3]["unsettled_at"] == "capture-end"
    r4 = rows[4]
    assert r4["settled_by"] == "both" and r4["settled_packet"] == rcv.packet
    assert r4["settlement_latency"] == (rcv.ts - t4.ts) / NS and r4["outcome"] == "released"
    errs = [e for e in a.error_rows() if e["condition"] == "unsettled-at-capture-end"]
    assert [e["delivery_id"] for e in errs] == [3]


def _coordinator_payload(body) -> bytes:
    from proton import Message

    return Message(body=body).encode()


def test_transactions_declare_enlist_discharge():
    from proton import Described, symbol

    s = Script()
    s.open_both()
    s.begin_both()
    s.frame(0, "attach", name="txn", handle=UInt(0), role=False, source=comp("source"),
            target=comp("coordinator", capabilities=[Symbol("amqp:local-transactions")]),
            initial_delivery_count=UInt(0))
    s.frame(1, "attach", name="txn", handle=UInt(0), role=True, source=comp("source"),
            target=comp("coordinator"))
    s.flow(1, handle=0, dc=0, credit=10)
    s.attach_sender(name="work", handle=1)
    s.flow(1, handle=1, dc=0, credit=10)
    decl = s.transfer(handle=0, did=0, payload=_coordinator_payload(Described(symbol("amqp:declare:list"), [])))
    declared = s.disposition(first=0, state=comp("declared", txn_id=b"tx-1"))
    s.transfer(handle=1, did=1, state=comp("transactional-state", txn_id=b"tx-1"))
    s.transfer(handle=1, did=2, state=comp("transactional-state", txn_id=b"tx-1"))
    s.disposition(first=1, last=2, state=comp("transactional-state", txn_id=b"tx-1", outcome=comp("accepted")))
    s.transfer(handle=0, did=3, payload=_coordinator_payload(
        Described(symbol("amqp:discharge:list"), [b"tx-1", False])))
    s.disposition(first=3, state="accepted")
    a = s.done()
    assert a.violation_rows() == []
    txns = a.transaction_rows()
    assert len(txns) == 1
    t = txns[0]
    assert t["txn_id"] == b"tx-1".hex() and t["coordinator"] == "txn" and t["state"] == "committed"
    assert t["declare_packet"] == decl.packet and t["declared_packet"] == declared.packet and t["fail"] is False
    assert sorted(x["delivery_id"] for x in t["enlisted"]) == [1, 2] and t["deliveries"] == 2
    rows = {r["delivery_id"]: r for r in a.delivery_rows()}
    assert rows[0]["outcome"] == "declared" and rows[1]["txn_id"] == b"tx-1".hex()
    assert rows[1]["outcome"] == "accepted"
    assert {x["name"]: x["coordinator"] for x in a.link_rows()} == {"txn": True, "work": False}


def test_transport_reset_closes_stalls_and_marks_unsettled():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=1)
    s.transfer(did=0)
    p, t = s.tick()
    s.a.feed(StreamClosed("c1", 1, "rst", t, p))
    a = s.done()
    st_ = [x for x in a.stall_rows() if x["kind"] == "link-credit"][0]
    assert st_["ended_by"] == "transport" and st_["end_packet"] == p
    assert a.delivery_rows()[0]["unsettled_at"] == "transport"
    assert [e["condition"] for e in a.error_rows()] == ["unsettled-at-transport-end"]


def test_open_stall_at_capture_end_and_drain():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(0, dc=0, credit=0, available=3)  # the sender says it has 3 messages
    s.flow(1, dc=0, credit=1)
    t = s.transfer(did=0)
    drain = s.flow(1, dc=1, credit=2, drain=True)
    answer = s.flow(0, dc=3, credit=0, available=0, drain=True)  # drained: delivery-count advanced by 2
    a = s.done(end_ts=s.t + 10 * NS)
    assert a.violation_rows() == []
    st_ = a.stall_rows()
    assert [x["kind"] for x in st_] == ["initial-credit", "link-credit", "drain", "link-credit"]
    assert st_[1]["start_packet"] == t.packet and st_[1]["waiting"] is True  # 3 available - 1 sent
    assert st_[2]["start_packet"] == drain.packet and st_[2]["end_packet"] == answer.packet
    last = st_[3]
    assert last["open"] is True and last["end"] is None and last["duration"] == pytest.approx(10.0)
    assert last["start_packet"] == answer.packet and last["waiting"] is False


def test_analyzer_pickles_midstream_and_rows_are_json():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=3)
    s.transfer(did=0)
    a2 = pickle.loads(pickle.dumps(s.a))
    f = s.disposition(first=0)
    a2.feed(f)  # the copy goes on from where it was pickled
    a2.finish()
    a = s.done()
    for name in ("connection_rows", "session_rows", "link_rows", "delivery_rows", "stall_rows",
                 "transaction_rows", "violation_rows", "error_rows"):
        rows = getattr(a, name)()
        assert json.loads(json.dumps(rows)) == rows
        assert getattr(a2, name)() == rows
    assert a2.delivery_rows()[0]["outcome"] == "accepted"


# --------------------------------------------------------------------------- fuzz

_u32 = st.one_of(st.integers(0, 5), st.integers(TOP - 3, TOP - 1), st.integers(0, TOP - 1))
_junk = st.one_of(st.none(), st.booleans(), st.text(max_size=3), st.binary(max_size=3), st.integers(-5, 2**64))
_val = st.one_of(_u32, _junk)
_FIELDS = {
    name: [f.name.replace("-", "_") for f in COMPOSITES[name].fields]
    for name in ("open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close")
}


@st.composite
def _frames(draw):
    name = draw(st.sampled_from(sorted(_FIELDS) + [None]))
    d = draw(st.integers(0, 1))
    ch = draw(st.integers(0, 3))
    fields = {}
    if name:
        for fname in draw(st.lists(st.sampled_from(_FIELDS[name]), max_size=6, unique=True)):
            if fname in ("state", "source", "target", "error"):
                v = draw(st.sampled_from([None, comp("accepted"), comp("target", address="x"), comp("coordinator"),
                                          comp("error", condition=Symbol("x")), comp("received"),
                                          comp("transactional-state", txn_id=b"t")]))
            elif fname in ("role", "settled", "more", "drain", "aborted", "closed"):
                v = draw(st.one_of(st.booleans(), _junk))
            else:
                v = draw(_val)
            fields[fname] = v
    return d, name, ch, fields, draw(st.binary(max_size=4))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(_frames(), max_size=40), st.booleans())
def test_any_frame_sequence_is_survived(syn, frames, headers):
    s = Script(syn=syn, headers=headers)
    for d, name, ch, fields, payload in frames:
        if name is None:
            s.heartbeat(d)
        else:
            s.frame(d, name, channel=ch, payload=payload, **fields)
    a = s.done()
    assert not [v for v in a.violation_rows() if v["kind"] == "internal-error"], a.violation_rows()
    for name in ("connection_rows", "session_rows", "link_rows", "delivery_rows", "stall_rows",
                 "transaction_rows", "violation_rows", "error_rows"):
        json.dumps(getattr(a, name)())
    for by in ("link", "address", "connection"):
        json.dumps(a.latency_summary(by))
    valid = {m.name: set(m.states) | {UNKNOWN} for m in MACHINES}
    for c in a.connection_rows():
        assert {c["state_client"], c["state_server"]} <= valid["connection"]
    for x in a.session_rows():
        assert {x["state_client"], x["state_server"]} <= valid["session"]
    for x in a.link_rows():
        assert {x["state_client"], x["state_server"]} <= valid["link"]
