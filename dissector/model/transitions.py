"""The endpoint state machines of a connection, a session and a link, as data.

Each table maps ``(state, input) -> (action, next_state)``; a pair not in a table is a
protocol violation (reported by the tracker, the endpoint keeps its state).  ``action`` is
``None`` or a label of the transition (``"pipelined"``: allowed before the peer answered;
``"discard"``: frame arriving in DISCARDING, which the endpoint silently drops; ``"assumed"``:
first sight of an endpoint whose earlier state is unknown; ``"crossed"``: a frame that crossed
our own end/detach on the wire).  The states, inputs and the additions to the spec's figures
are described in :mod:`amqp_dissect.model.state`.  :mod:`amqp_dissect.model.machine` runs them.
"""

from __future__ import annotations

# pseudo state of an endpoint whose beginning the capture did not see (not a spec state)
UNKNOWN = "UNKNOWN"

CONNECTION_STATES = (
    "START", "HDR_RCVD", "HDR_SENT", "HDR_EXCH", "OPEN_PIPE", "OC_PIPE", "OPEN_RCVD", "OPEN_SENT",
    "CLOSE_PIPE", "OPENED", "CLOSE_RCVD", "CLOSE_SENT", "DISCARDING", "END",
)
CONNECTION_INPUTS = (
    "S:HDR", "R:HDR", "S:HDR!=R:HDR", "R:HDR!=S:HDR", "S:OPEN", "R:OPEN",
    "S:CLOSE", "S:CLOSE(error)", "R:CLOSE", "S:FRAME", "R:FRAME",
)
CONNECTION_TRANSITIONS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("START", "S:HDR"): (None, "HDR_SENT"),
    ("START", "R:HDR"): (None, "HDR_RCVD"),
    ("HDR_RCVD", "S:HDR"): (None, "HDR_EXCH"),
    ("HDR_RCVD", "S:HDR!=R:HDR"): (None, "END"),
    ("HDR_SENT", "R:HDR"): (None, "HDR_EXCH"),
    ("HDR_SENT", "R:HDR!=S:HDR"): (None, "END"),
    ("HDR_SENT", "S:OPEN"): (None, "OPEN_PIPE"),
    ("HDR_EXCH", "S:OPEN"): (None, "OPEN_SENT"),
    ("HDR_EXCH", "R:OPEN"): (None, "OPEN_RCVD"),
    ("OPEN_PIPE", "R:HDR"): (None, "OPEN_SENT"),
    ("OPEN_PIPE", "R:HDR!=S:HDR"): (None, "END"),
    ("OPEN_PIPE", "S:FRAME"): ("pipelined", "OPEN_PIPE"),
    ("OPEN_PIPE", "S:CLOSE"): (None, "OC_PIPE"),
    ("OPEN_PIPE", "S:CLOSE(error)"): (None, "OC_PIPE"),
    ("OC_PIPE", "R:HDR"): (None, "CLOSE_PIPE"),
    ("OC_PIPE", "R:HDR!=S:HDR"): (None, "END"),
    ("OPEN_RCVD", "S:OPEN"): (None, "OPENED"),
    ("OPEN_RCVD", "R:FRAME"): (None, "OPEN_RCVD"),
    ("OPEN_RCVD", "R:CLOSE"): ("pipelined", "CLOSE_RCVD"),
    ("OPEN_SENT", "R:OPEN"): (None, "OPENED"),
    ("OPEN_SENT", "S:FRAME"): ("pipelined", "OPEN_SENT"),
    ("OPEN_SENT", "S:CLOSE"): (None, "CLOSE_PIPE"),
    ("OPEN_SENT", "S:CLOSE(error)"): (None, "CLOSE_PIPE"),
    ("CLOSE_PIPE", "R:OPEN"): (None, "CLOSE_SENT"),
    ("OPENED", "S:FRAME"): (None, "OPENED"),
    ("OPENED", "R:FRAME"): (None, "OPENED"),
    ("OPENED", "S:CLOSE"): (None, "CLOSE_SENT"),
    ("OPENED", "S:CLOSE(error)"): (None, "DISCARDING"),
    ("OPENED", "R:CLOSE"): (None, "CLOSE_RCVD"),
    ("CLOSE_RCVD", "S:OPEN"): ("pipelined", "CLOSE_RCVD"),
    ("CLOSE_RCVD", "S:FRAME"): (None, "CLOSE_RCVD"),
    ("CLOSE_RCVD", "S:CLOSE"): (None, "END"),
    ("CLOSE_RCVD", "S:CLOSE(error)"): (None, "END"),
    ("CLOSE_SENT", "R:FRAME"): (None, "CLOSE_SENT"),
    ("CLOSE_SENT", "R:CLOSE"): (None, "END"),
    ("DISCARDING", "R:FRAME"): ("discard", "DISCARDING"),
    ("DISCARDING", "R:CLOSE"): (None, "END"),
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

SESSION_STATES = ("UNMAPPED", "BEGIN_SENT", "BEGIN_RCVD", "MAPPED", "END_SENT", "END_RCVD", "DISCARDING")
SESSION_INPUTS = ("S:BEGIN", "R:BEGIN", "S:END", "S:END(error)", "R:END", "S:FRAME", "R:FRAME")
SESSION_TRANSITIONS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("UNMAPPED", "S:BEGIN"): (None, "BEGIN_SENT"),
    ("UNMAPPED", "R:BEGIN"): (None, "BEGIN_RCVD"),
    ("BEGIN_SENT", "R:BEGIN"): (None, "MAPPED"),
    ("BEGIN_SENT", "S:FRAME"): ("pipelined", "BEGIN_SENT"),
    ("BEGIN_SENT", "S:END"): ("pipelined", "END_SENT"),
    ("BEGIN_SENT", "S:END(error)"): ("pipelined", "DISCARDING"),
    ("BEGIN_RCVD", "S:BEGIN"): (None, "MAPPED"),
    ("BEGIN_RCVD", "R:FRAME"): (None, "BEGIN_RCVD"),
    ("BEGIN_RCVD", "R:END"): ("pipelined", "END_RCVD"),
    ("MAPPED", "S:FRAME"): (None, "MAPPED"),
    ("MAPPED", "R:FRAME"): (None, "MAPPED"),
    ("MAPPED", "S:END"): (None, "END_SENT"),
    ("MAPPED", "S:END(error)"): (None, "DISCARDING"),
    ("MAPPED", "R:END"): (None, "END_RCVD"),
    ("END_SENT", "R:FRAME"): (None, "END_SENT"),
    ("END_SENT", "R:BEGIN"): ("crossed", "END_SENT"),
    ("END_SENT", "R:END"): (None, "UNMAPPED"),
    ("DISCARDING", "R:FRAME"): ("discard", "DISCARDING"),
    ("DISCARDING", "R:BEGIN"): ("crossed", "DISCARDING"),
    ("DISCARDING", "R:END"): (None, "UNMAPPED"),
    ("END_RCVD", "S:BEGIN"): ("crossed", "END_RCVD"),
    ("END_RCVD", "S:FRAME"): (None, "END_RCVD"),
    ("END_RCVD", "S:END"): (None, "UNMAPPED"),
    ("END_RCVD", "S:END(error)"): (None, "UNMAPPED"),
    (UNKNOWN, "S:BEGIN"): (None, "BEGIN_SENT"),
    (UNKNOWN, "R:BEGIN"): (None, "BEGIN_RCVD"),
    (UNKNOWN, "S:FRAME"): ("assumed", "MAPPED"),
    (UNKNOWN, "R:FRAME"): ("assumed", "MAPPED"),
    (UNKNOWN, "S:END"): ("assumed", "END_SENT"),
    (UNKNOWN, "S:END(error)"): ("assumed", "DISCARDING"),
    (UNKNOWN, "R:END"): ("assumed", "END_RCVD"),
}

LINK_STATES = ("DETACHED", "ATTACH_SENT", "ATTACH_RCVD", "ATTACHED", "DETACH_SENT", "DETACH_RCVD")
LINK_INPUTS = ("S:ATTACH", "R:ATTACH", "S:DETACH", "R:DETACH", "S:FRAME", "R:FRAME")
LINK_TRANSITIONS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("DETACHED", "S:ATTACH"): (None, "ATTACH_SENT"),
    ("DETACHED", "R:ATTACH"): (None, "ATTACH_RCVD"),
    ("ATTACH_SENT", "R:ATTACH"): (None, "ATTACHED"),
    ("ATTACH_SENT", "S:FRAME"): ("pipelined", "ATTACH_SENT"),
    ("ATTACH_SENT", "S:DETACH"): ("pipelined", "DETACH_SENT"),
    ("ATTACH_RCVD", "S:ATTACH"): (None, "ATTACHED"),
    ("ATTACH_RCVD", "R:FRAME"): (None, "ATTACH_RCVD"),
    ("ATTACH_RCVD", "R:DETACH"): ("pipelined", "DETACH_RCVD"),
    ("ATTACHED", "S:FRAME"): (None, "ATTACHED"),
    ("ATTACHED", "R:FRAME"): (None, "ATTACHED"),
    ("ATTACHED", "S:DETACH"): (None, "DETACH_SENT"),
    ("ATTACHED", "R:DETACH"): (None, "DETACH_RCVD"),
    ("DETACH_SENT", "R:FRAME"): (None, "DETACH_SENT"),
    ("DETACH_SENT", "R:ATTACH"): ("crossed", "DETACH_SENT"),
    ("DETACH_SENT", "R:DETACH"): (None, "DETACHED"),
    ("DETACH_RCVD", "S:FRAME"): (None, "DETACH_RCVD"),
    ("DETACH_RCVD", "S:ATTACH"): ("crossed", "DETACH_RCVD"),
    ("DETACH_RCVD", "S:DETACH"): (None, "DETACHED"),
    (UNKNOWN, "S:ATTACH"): (None, "ATTACH_SENT"),
    (UNKNOWN, "R:ATTACH"): (None, "ATTACH_RCVD"),
    (UNKNOWN, "S:FRAME"): ("assumed", "ATTACHED"),
    (UNKNOWN, "R:FRAME"): ("assumed", "ATTACHED"),
    (UNKNOWN, "S:DETACH"): ("assumed", "DETACH_SENT"),
    (UNKNOWN, "R:DETACH"): ("assumed", "DETACH_RCVD"),
}


#: the peers by direction: 0 is the client (the TCP initiator), 1 the server
SIDES = ("client", "server")

# output handle (channel) still assigned at the endpoint in these states
LINK_HANDLE_ASSIGNED = frozenset({"ATTACH_SENT", "ATTACHED", "DETACH_RCVD", UNKNOWN})
SESSION_CHANNEL_ASSIGNED = frozenset({"BEGIN_SENT", "MAPPED", "END_RCVD", UNKNOWN})
