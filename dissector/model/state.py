"""AMQP 1.0 protocol state of both directions of every connection (sans-IO).

:class:`StateTracker` is fed the events of :class:`amqp_dissect.dissect.Dissector`
(``StreamOpened``, ``StreamClosed``, ``ProtocolHeader``, ``Frame``,
``StreamNote``; anything else is ignored) and builds a model of what happened:
connections, sessions, links, deliveries, transactions, credit stalls,
protocol violations and errors.  :mod:`amqp_dissect.results.analytics` turns that model
into tables (``Analyzer``) and statistics.

Endpoints and state machines
----------------------------
The capture sees both peers, so every connection, session and link has *two*
endpoint state machines, one per peer, indexed by direction: ``0`` is the
client (the TCP initiator), ``1`` the server.  A frame sent by peer ``d`` is the
input ``S:<X>`` ("sent") for endpoint ``d`` and ``R:<X>`` ("received") for
endpoint ``1 - d`` -- the labels of the spec's state diagrams.

The machines are data: ``CONNECTION_TRANSITIONS``, ``SESSION_TRANSITIONS`` and
``LINK_TRANSITIONS`` map ``(state, input) -> (action, next_state)``.  A pair that
is not in a table is a protocol violation: it is reported (violation kind
``"state"``) and the endpoint keeps its state; nothing raises.  ``action`` is
``None`` or a label of the transition (``"pipelined"``: allowed before the peer
answered; ``"discard"``: frame arriving in DISCARDING, which the endpoint
silently drops; ``"assumed"``: first sight of an endpoint whose earlier state is
unknown; ``"crossed"``: a frame that crossed our own end/detach on the wire).

* Connection (spec 2.4.6/2.4.7, Figure 2.18/2.19): states START, HDR_RCVD,
  HDR_SENT, HDR_EXCH, OPEN_PIPE, OC_PIPE, OPEN_RCVD, OPEN_SENT, CLOSE_PIPE,
  OPENED, CLOSE_RCVD, CLOSE_SENT, DISCARDING, END.  Inputs ``S:HDR``, ``R:HDR``,
  ``S:HDR!=R:HDR`` / ``R:HDR!=S:HDR`` (a header that differs from the peer's),
  ``S:OPEN``, ``R:OPEN``, ``S:CLOSE``, ``S:CLOSE(error)`` (close carrying an
  error: leads to DISCARDING from OPENED), ``R:CLOSE``, ``S:FRAME``, ``R:FRAME``
  (any other frame, heartbeats included).  Only AMQP-layer headers (protocol id
  0) drive it; the SASL layer before it is recorded separately (mechanisms,
  mechanism, outcome code).  Not in the figure but allowed by its state table
  ("legal receives: *" in OPEN_RCVD): ``(OPEN_RCVD, R:CLOSE) -> CLOSE_RCVD`` and
  ``(CLOSE_RCVD, S:OPEN)``, so that a peer may open-and-close pipelined (the way
  a connection is refused).
* Session (2.5.5, Figure 2.25): UNMAPPED, BEGIN_SENT, BEGIN_RCVD, MAPPED,
  END_SENT, END_RCVD, DISCARDING.  Inputs ``S:BEGIN``, ``R:BEGIN``, ``S:END``,
  ``S:END(error)``, ``R:END``, ``S:FRAME``, ``R:FRAME`` (attach, flow, transfer,
  disposition, detach on the session's channel).  Additions to the figure:
  an end pipelined after a begin (BEGIN_SENT -S:END-> END_SENT, the peer's
  BEGIN_RCVD -R:END-> END_RCVD, and the begin reply crossing it).
* Link (the spec names no link states and draws no link diagram: these states are
  ours, named like the session's, with transitions from the attach / detach
  exchanges of 2.6.2-2.6.6 and Figure 2.33): DETACHED, ATTACH_SENT, ATTACH_RCVD,
  ATTACHED, DETACH_SENT, DETACH_RCVD.  Inputs ``S:ATTACH``, ``R:ATTACH``,
  ``S:DETACH``, ``R:DETACH``, ``S:FRAME``, ``R:FRAME`` (flow / transfer on the
  link's handle).

What the capture shows is not exactly what each endpoint saw: a frame sent by
``d`` passes the capture point *after* ``d`` wrote it but *before* ``1 - d`` reads
it.  So an endpoint's ``S:`` inputs are in order with what it had processed,
while its ``R:`` inputs may be seen early.  :class:`Endpoints` therefore
applies an ``R:`` input that its table does not allow yet, but that a later own
send could make legal (``Machine.deferrable``, derived from the table), only
after that send -- like bytes waiting in a receive buffer.  Example: a client
pipelines header, open and begin; the server endpoint sees ``R:OPEN`` in
HDR_RCVD and processes it after its own ``S:HDR`` (HDR_EXCH -> OPEN_RCVD).

Every machine also has the pseudo state ``UNKNOWN`` (not a spec state): the
state of an endpoint whose beginning the capture did not see (it joined
mid-connection, or a capture gap lost frames).  The first frame moves it to the
state that frame implies (usually OPENED / MAPPED / ATTACHED, action
``"assumed"``); what could not be known is listed in the ``unknown`` column of
the row (e.g. ``"address"``, ``"name"``, ``"begin"``).

Mid-connection joins
--------------------
A connection whose first event is a ``StreamOpened`` with a SYN or a protocol
header is *known from the start*; then a frame on a channel without begin, a
handle without attach or a disposition for a delivery-id never transferred is
a violation.  Otherwise (no SYN, or a TCP gap / resynchronisation happened:
the connection is *lossy*) such frames create placeholder sessions / links in
state UNKNOWN instead.  A placeholder made after a violation is treated like a
mid-connection one, so one unknown channel gives one violation, not one more
per handle and delivery-id used on it.  A placeholder's peer-side channel (handle) is guessed to
be the same number when that number is free on the other side (most peers
allocate the lowest free number); ``"channel-mapping-guessed"`` /
``"handle-mapping-guessed"`` is then listed in ``unknown``.

Serial numbers
--------------
delivery-id, delivery-count and transfer-id are RFC 1982 serial numbers with 32
bits: :func:`serial_add`, :func:`serial_diff`, :func:`serial_lt`,
:func:`serial_in_range`.  ``serial_diff(a, b)`` is ``a - b`` as a signed number
in ``[-2**31, 2**31)``; RFC 1982 leaves the comparison of numbers exactly 2**31
apart undefined, here it counts as "less than".  Link-credit and incoming-window are
unsigned 32-bit amounts: what is left of one is measured from the start of the grant
(:func:`grant_left`), so a window of 2**31-1 or more never wraps negative.

Flow control (2.5.6, 2.6.7)
---------------------------
Per link the model keeps the sender's delivery-count ``dc`` and the
*delivery-limit* ``limit`` set by the receiver (``delivery-count_rcv +
link-credit_rcv``; with no delivery-count in the receiver's flow, the
initial-delivery-count of the sender's attach).  The sender's link-credit is
``serial_diff(limit, dc)``.  Each delivery (at its first transfer frame)
increments ``dc``; a sender flow sets ``dc`` from its delivery-count (a drain
answer advances it).  Per session and sending peer ``d`` the model keeps
next-outgoing-id (incremented per transfer *frame*) and the window limit
``next-incoming-id_peer + incoming-window_peer`` from the peer's last begin/flow
(the peer's begin, and a flow without next-incoming-id, use d's
initial-outgoing-id); remote-incoming-window is ``serial_diff(window_limit,
next-outgoing-id)``.

Stalls
------
A :class:`Stall` is an interval in which a sender had to wait for its peer:

* ``"initial-credit"``: from the sender's attach (link-credit 0) to the first
  frame that gives it credit.  No stall when the receiver's credit arrived
  before the sender's attach.
* ``"link-credit"``: the link-credit ran out (``exhausted``: the transfer that
  used the last credit, a receiver flow lowering credit to 0, or a sender flow
  that advanced delivery-count, e.g. a drain answer).  The stall *begins* when
  the sender has finished the delivery that used up the credit (its last
  frame, more=false, or its abort: until then the sender is busy sending, not
  blocked), or when a message is first known to be waiting, whichever is later
  (a sender flow with available > 0 after it had shown none).  It ends at the
  frame that makes the credit > 0 again (normally the receiver's flow).  When
  the credit comes back before that delivery's last frame there is no stall.
* ``"drain"``: from a receiver flow with drain=true to the sender's next flow
  on that link (its answer), or to the transfer that consumed the last credit,
  or to a receiver flow with drain=false (``ended_by`` "cancelled").
* ``"session-window"``: a peer's remote-incoming-window reached 0 through its
  transfers (or through the receiving peer's flow after transfers were sent):
  from that frame (a window counts frames, so the frame that used it up is
  finished) to the receiving peer's flow that reopened the window.

A stall is also ended by the first detach of its link, the first end of its
session, the first close of its connection (``ended_by`` "detach" / "end" /
"close") or a TCP reset / both FINs ("transport"); one still going at the end
of the capture is *open*.

Waiting (:meth:`Stall.waiting`): True / False with evidence "available" when
the sender said so: what is left of its last available at the start (the value
it reported minus the deliveries since; fewer than the deliveries since: that
report is out of date, nothing is known), then every available it reports in a
flow during the stall (True if any is > 0).  Otherwise True with evidence
"transfer" when its first transfer after the end came within :data:`AT_ONCE`;
otherwise unknown (None, evidence "none").  :meth:`Stall.idle`: an *idle
period*, not a stall, when the sender showed nothing waiting (waiting False),
or when nothing shows it either way and the interval ended at detach, end,
close, the transport's end or the end of the capture with no transfer after
it.  Drain stalls are never idle.

Other checks: transfer beyond link-credit; transfer beyond the peer's
incoming-window (both only when the transfer is beyond the receiver's latest
*and* its previous limit: the latest flow may still have been in flight towards
the sender when it sent; and only once the granting peer's next frame, FIN or the
end shows no gap of its bytes before it, since a lost flow may have granted more:
``StateTracker._hold``); channel / handle / delivery-id / txn-id never introduced;
channel or handle still in use; channel-max / handle-max exceeded; conflicting
roles; a drain answer (sender flow after a drain request) that reports
available 0 but leaves link-credit > 0 (2.6.7: the sender MUST advance
delivery-count until link-credit is zero); a side that sent no frame for longer
than the idle-time-out announced by the other side's open (checked at each
frame and at the end of the capture / connection); expert notes of groups
"protocol" and "malformed" that the framing layer put on frames (frame larger
than max-frame-size, missing mandatory field, ...) are taken over.

Settlement (2.6.12)
-------------------
A delivery is settled on the wire by the sender (a transfer with settled=true
-- "presettled" -- or a disposition role=sender settled=true) or by the receiver
(a disposition role=receiver settled=true).  Once one peer announces settlement
the other forgets the delivery without a frame of its own, so the delivery ends
at the *first* settling frame of either peer: ``settled_time`` is that frame's
time and ``settled_by`` says which peers announced settlement ("sender",
"receiver", "both", "" = never).  The *outcome* is the receiver's first terminal
delivery state (accepted, rejected, released, modified, declared, also inside a
transactional-state), else a terminal state the sender announced;
``outcome_time`` is the time of the receiver's frame carrying it.
"""

from __future__ import annotations

import json
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
import heapq

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.framing import (FRAME_SASL, PROTO_AMQP, PROTO_SASL, PROTO_TLS, Frame, OtherProtocolNote, ProtocolHeader,
                             StreamNote)
from ..amqp.codec import ABSENT, ELEMENT_BUDGET_BASE, ELEMENTS_PER_BYTE, Composite, Described, decode_all
from ..errors import DissectError
from ..events import StreamClosed, StreamOpened
from ..times import NS
from ..amqp.values import json_value
from ..amqp.spec import COMPOSITES, OUTCOMES, choice_name

# --------------------------------------------------------------------------- serial numbers

SERIAL_BITS = 32
SERIAL_MOD = 1 << SERIAL_BITS
SERIAL_MASK = SERIAL_MOD - 1
_HALF = 1 << (SERIAL_BITS - 1)


# the same three numbers for the serial functions: C constants when compiled (see state.pxd)
_M32 = SERIAL_MASK
_MOD32 = SERIAL_MOD
_HALF32 = _HALF


def serial_add(s: int, n: int = 1) -> int:
    """``s + n`` in 32-bit serial-number space."""
    return (s + n) & _M32


def serial_diff(a: int, b: int) -> int:
    """``a - b`` as a signed distance in ``[-2**31, 2**31)`` (RFC 1982)."""
    d = (a - b) & _M32
    return d - _MOD32 if d >= _HALF32 else d


def serial_lt(a: int, b: int) -> bool:
    """``a < b`` in serial-number arithmetic."""
    return serial_diff(a, b) < 0


def serial_range_len(first: int, last: int) -> int:
    """Number of serial numbers in ``first..last`` (inclusive, wrapping)."""
    return ((last - first) & _M32) + 1


def serial_in_range(x: int, first: int, last: int) -> bool:
    """Is ``x`` within ``first..last`` (inclusive, wrapping at 2**32)?"""
    return ((x - first) & _M32) <= ((last - first) & _M32)


def grant_left(limit: int, size: int, count: int):
    """What is left of a grant of ``size`` (an unsigned 32-bit link-credit or incoming-window)
    ending at the serial number ``limit``, once the counter has reached ``count``: ``size`` minus
    how far ``count`` went past the grant's start ``limit - size``, as a plain integer (never
    wrapped: a window of 2**31-1 or more stays positive; negative: ``count`` went beyond the grant).
    None when ``count`` is behind the grant's start: the receiver counted frames the capture lost,
    so what is left is unknown."""
    used = serial_diff(count, (limit - size) & _M32)
    if used < 0:
        return None
    return size - used


# --------------------------------------------------------------------------- state machines

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


EXPLAIN_MEMO_MAX = 4096  # answers Machine.explain keeps


class Machine:
    """A state machine given as data: ``(state, input) -> (action, next_state)``.

    The table is written with names (the spec's); it runs on integers: every state (and
    ``UNKNOWN``) and every input gets a code, and ``table[state * len(inputs) + input]`` is
    ``(action, next state code)`` or None.  :meth:`step` takes and gives names (for people and
    tests), :meth:`step_code` codes (for :class:`Endpoints`).

    ``deferrable`` is derived from the table: the ``(state, R:input)`` pairs not in
    the table for which some state reachable by the endpoint's own sends
    (``S:`` transitions only) accepts the input.  The capture sees a received
    frame *before* the endpoint processes it (never after), so such an input
    may simply still wait in the endpoint's receive buffer: see :class:`Endpoints`.
    """

    __slots__ = ("name", "states", "inputs", "transitions", "initial", "deferrable", "steady",
                 "names", "codes", "in_codes", "table", "defer", "steady_code", "s_frame", "r_frame", "moves",
                 "explained")

    def __init__(self, name: str, states: tuple, inputs: tuple, transitions: dict, initial: str):
        self.name = name
        self.states = states
        self.inputs = inputs
        self.transitions = transitions
        self.initial = initial
        # the state in which any other frame, sent or received, changes nothing (OPENED, MAPPED,
        # ATTACHED): derived from the table, it lets the hot path skip the lookups
        steady = [st for st in states if transitions.get((st, "S:FRAME")) == (None, st)
                  and transitions.get((st, "R:FRAME")) == (None, st)]
        self.steady = steady[0] if len(steady) == 1 else None
        self.deferrable = frozenset(
            (st, inp)
            for st in (*states, UNKNOWN)
            for inp in inputs
            if inp.startswith("R:") and (st, inp) not in transitions
            and any((t, inp) in transitions for t in self._send_reachable(st))
        )
        # the integer form
        self.names = (*states, UNKNOWN)
        self.codes = {n: i for i, n in enumerate(self.names)}
        self.in_codes = {n: i for i, n in enumerate(inputs)}
        ni = len(inputs)
        table = [None] * (len(self.names) * ni)
        for (st, inp), (action, nxt) in transitions.items():
            table[self.codes[st] * ni + self.in_codes[inp]] = (action, self.codes[nxt])
        self.table = tuple(table)
        self.defer = tuple((self.names[k // ni], inputs[k % ni]) in self.deferrable for k in range(len(table)))
        self.steady_code = -1 if self.steady is None else self.codes[self.steady]
        self.s_frame = self.in_codes["S:FRAME"]
        self.r_frame = self.in_codes["R:FRAME"]
        # the frames a capture can lose that change states: (name, S: input code, R: input code),
        # derived from the inputs (an "S:x" whose receiving side is "R:x", "(error)" not told apart)
        self.explained: dict = {}  # explain's answers (see there)
        self.moves = tuple(
            (inp[2:].lower(), self.in_codes[inp], self.in_codes["R:" + inp[2:].replace("(error)", "")])
            for inp in inputs
            if inp.startswith("S:") and inp != "S:FRAME" and "!=" not in inp
            and "R:" + inp[2:].replace("(error)", "") in self.in_codes
        )

    def _send_reachable(self, state: str) -> set:
        seen = {state}
        todo = [state]
        while todo:
            st = todo.pop()
            for (a, inp), (_, b) in self.transitions.items():
                if a == st and inp.startswith("S:") and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    def step(self, state: str, inp: str) -> tuple[str | None, str, str | None]:
        """``(action, next_state, violation)``; on a violation the state is kept."""
        action, nxt, bad = self.step_code(self.codes[state], self.in_codes.get(inp, -1), inp)
        return action, self.names[nxt], bad

    def explain(self, codes, d: int, s_ic: int, r_ic: int, senders, depth: int = 3):
        """:meth:`_explain`, remembered: it depends on the endpoint states and the inputs only, and a
        flood of one frame on a connection with a gap asks the same question at every frame."""
        key = (codes[0], codes[1], d, s_ic, r_ic, tuple(senders), depth)
        memo = self.explained
        path = memo.get(key, memo)
        if path is memo:
            path = self._explain(codes, d, s_ic, r_ic, senders, depth)
            if len(memo) >= EXPLAIN_MEMO_MAX:  # (bounded: the states and inputs are few anyway)
                memo.clear()
            memo[key] = path
        return None if path is None else list(path)

    def _explain(self, codes, d: int, s_ic: int, r_ic: int, senders, depth: int = 3):
        """The shortest sequence (at most ``depth``) of frames sent by the peers in ``senders`` and
        not captured that makes peer ``d`` sending ``s_ic`` (and peer ``1-d`` receiving ``r_ic``)
        legal from the endpoint states ``codes``: ``[(peer, frame name), ...]`` (empty when
        already legal), or None.  A lost frame is one the table allows at both endpoints."""
        ni = len(self.inputs)
        table = self.table

        def ok(cs) -> bool:
            if s_ic < 0 or table[cs[d] * ni + s_ic] is None:
                return False
            if r_ic < 0:
                return True
            t = table[cs[d] * ni + s_ic]
            mine = list(cs)
            mine[d] = t[1]
            k = mine[1 - d] * ni + r_ic
            return table[k] is not None or self.defer[k]

        start = (codes[0], codes[1])
        if ok(start):
            return []
        seen = {start}
        level = [(start, [])]
        for _ in range(depth):
            nxt_level = []
            for cs, path in level:
                for p in senders:
                    for name, si, ri in self.moves:
                        a = table[cs[p] * ni + si]
                        b = table[cs[1 - p] * ni + ri]
                        if a is None or b is None:
                            continue
                        n = [0, 0]
                        n[p] = a[1]
                        n[1 - p] = b[1]
                        t = (n[0], n[1])
                        if t in seen:
                            continue
                        seen.add(t)
                        way = path + [(p, name)]
                        if ok(t):
                            return way
                        nxt_level.append((t, way))
            level = nxt_level
        return None

    def step_code(self, sc: int, ic: int, inp=None) -> tuple:
        """:meth:`step` on codes: ``(action, next state code, violation text or None)``; ``ic`` -1
        is an input outside the machine's (named ``inp``)."""
        t = self.table[sc * len(self.inputs) + ic] if ic >= 0 else None
        if t is None:
            return None, sc, f"{self.inputs[ic] if ic >= 0 else inp} not allowed in {self.name} state {self.names[sc]}"
        return t[0], t[1], None


_NO_MSGS: list = []

# field indices of the hot performatives, from the generated spec tables (frame.fields is the
# performative's field values in spec order, ABSENT beyond the encoded list)
_TI = COMPOSITES["transfer"].index
T_HANDLE, T_DELIVERY_ID, T_DELIVERY_TAG, T_SETTLED, T_MORE, T_RCV_SETTLE_MODE, T_STATE, T_RESUME, T_ABORTED = (
    _TI["handle"], _TI["delivery-id"], _TI["delivery-tag"], _TI["settled"], _TI["more"], _TI["rcv-settle-mode"],
    _TI["state"], _TI["resume"], _TI["aborted"])
_FI = COMPOSITES["flow"].index
F_NII, F_IW, F_NOID, F_OW, F_HANDLE, F_DC, F_LC, F_AVAILABLE, F_DRAIN, F_ECHO = (
    _FI["next-incoming-id"], _FI["incoming-window"], _FI["next-outgoing-id"], _FI["outgoing-window"], _FI["handle"],
    _FI["delivery-count"], _FI["link-credit"], _FI["available"], _FI["drain"], _FI["echo"])
_DI = COMPOSITES["disposition"].index
D_ROLE, D_FIRST, D_LAST, D_SETTLED, D_STATE = (
    _DI["role"], _DI["first"], _DI["last"], _DI["settled"], _DI["state"])
# delivery states the scanner reports by name (an empty list): the composite they stand for
_EMPTY_STATES = {n: Composite(COMPOSITES[n], []) for n in COMPOSITES if "delivery-state" in COMPOSITES[n].provides}


def _delivery_state_value(v):
    """A transfer's / disposition's state field as a Composite (None when absent, null or not a state)."""
    if type(v) is str:
        return _EMPTY_STATES.get(v)
    return v if isinstance(v, Composite) else None


def _state_plan(state: Composite) -> tuple:
    """What a delivery state says, read once: (outcome or state name (None for a transactional
    state without an outcome), transactional?, txn-id, the state (the inner outcome of a
    transactional one), terminal outcome?, what more to read of it: one of the _K_* codes)."""
    name = state.spec.name
    transactional = name == "transactional-state"
    txn = None
    if transactional:
        txn = state.field("txn-id")
        inner = state.field("outcome")
        state = inner if isinstance(inner, Composite) else None
        name = state.spec.name if state is not None else None
    return (name, transactional, txn, state, name in TERMINAL_OUTCOMES, _STATE_KIND.get(name, _K_PLAIN))


# what _apply_state reads beyond a delivery state's name (a code, not a string compare per delivery)
_K_PLAIN, _K_RECEIVED, _K_REJECTED, _K_MODIFIED, _K_DECLARED = 0, 1, 2, 3, 4
_STATE_KIND = {"received": _K_RECEIVED, "rejected": _K_REJECTED, "modified": _K_MODIFIED, "declared": _K_DECLARED}


class Endpoints:
    """The two endpoint states of one connection / session / link, with receive buffers.

    ``advance(d, x)``: peer ``d`` sent ``x``.  Endpoint ``d`` takes ``S:x`` at once
    (what it sent shows the state it was in).  Endpoint ``1-d`` takes ``R:x``: if
    the table allows it now it is applied; if not, but the endpoint's own later
    sends can make it legal (``Machine.deferrable``), it waits in a FIFO receive
    buffer, like bytes not read yet, and is retried after each ``S:`` transition
    of that endpoint; inputs behind a waiting one wait too.  Everything else is
    a violation (returned as messages; the state is kept).

    States and inputs are held as the machine's integer codes; indexing (``ep[0]``),
    :attr:`state` and :meth:`waiting` give names.
    """

    __slots__ = ("machine", "codes", "queue")

    def __init__(self, machine: Machine, state: str):
        self.machine = machine
        c = machine.codes[state]
        self.codes = [c, c]
        self.queue = ([], [])  # input codes received and not processable yet, per endpoint

    @property
    def state(self) -> list[str]:
        names = self.machine.names
        return [names[self.codes[0]], names[self.codes[1]]]

    def __getitem__(self, e):
        return self.machine.names[self.codes[e]]

    def __setitem__(self, e, value):
        self.codes[e] = self.machine.codes[value]

    def __eq__(self, other):
        return self.state == list(other)

    def advance(self, d: int, s_in: str, r_in: str) -> list[str]:
        ic = self.machine.in_codes
        return self.advance_codes(d, ic.get(s_in, -1), ic.get(r_in, -1), s_in, r_in)

    def advance_codes(self, d: int, s_ic: int, r_ic: int, s_in=None, r_in=None) -> list[str]:
        """:meth:`advance` with input codes (-1: an input outside the machine's, named by
        ``s_in`` / ``r_in``: a violation, never queued)."""
        m = self.machine
        codes = self.codes
        msgs: list[str] = []
        _, nxt, bad = m.step_code(codes[d], s_ic, s_in)
        if bad:
            msgs.append(f"{SIDES[d]} endpoint: {bad}")
        else:
            codes[d] = nxt
            self._drain(d, msgs)
        e = 1 - d
        q = self.queue[e]
        if q and r_ic >= 0:
            q.append(r_ic)
            return msgs
        _, nxt, bad = m.step_code(codes[e], r_ic, r_in)
        if not bad:
            codes[e] = nxt
        elif r_ic >= 0 and m.defer[codes[e] * len(m.inputs) + r_ic]:
            q.append(r_ic)
        else:
            msgs.append(f"{SIDES[e]} endpoint: {bad}")
        return msgs

    def frame(self, d: int) -> list[str]:
        """``advance(d, "S:FRAME", "R:FRAME")``, without the lookups when both endpoints are steady."""
        codes = self.codes
        m = self.machine
        steady = m.steady_code
        if codes[0] == steady and codes[1] == steady and not self.queue[0] and not self.queue[1]:
            return _NO_MSGS
        return self.advance_codes(d, m.s_frame, m.r_frame)

    def _drain(self, e: int, msgs: list) -> None:
        q = self.queue[e]
        m = self.machine
        codes = self.codes
        while q:
            ic = q[0]
            _, nxt, bad = m.step_code(codes[e], ic)
            if not bad:
                codes[e] = nxt
            elif m.defer[codes[e] * len(m.inputs) + ic]:
                return
            else:
                msgs.append(f"{SIDES[e]} endpoint: {bad} (received earlier, not processable)")
            q.pop(0)

    def recover(self, d: int, s_in: str, r_in: str, senders) -> list | None:
        """Frames of the peers in ``senders`` were lost from the capture: if some lost frames
        (:meth:`Machine.explain`) make ``advance(d, s_in, r_in)`` legal, take them  as if they had
        been captured) and return them as ``[(peer, frame name), ...]``; else None and nothing changes."""
        m = self.machine
        path = m.explain(self.codes, d, m.in_codes.get(s_in, -1), m.in_codes.get(r_in, -1), senders)
        if not path:
            return None
        for p, name in path:
            for mv, si, ri in m.moves:
                if mv == name:
                    self.advance_codes(p, si, ri)  # as if captured (inputs waiting are taken up as usual)
                    break
        return path

    def waiting(self, e: int) -> list[str]:
        """Received inputs endpoint e has not been able to process (yet)."""
        inputs = self.machine.inputs
        return [inputs[i] for i in self.queue[e]]


CONNECTION_MACHINE = Machine("connection", CONNECTION_STATES, CONNECTION_INPUTS, CONNECTION_TRANSITIONS, "START")
SESSION_MACHINE = Machine("session", SESSION_STATES, SESSION_INPUTS, SESSION_TRANSITIONS, "UNMAPPED")
LINK_MACHINE = Machine("link", LINK_STATES, LINK_INPUTS, LINK_TRANSITIONS, "DETACHED")
MACHINES = (CONNECTION_MACHINE, SESSION_MACHINE, LINK_MACHINE)

# what a connection holds before its first AMQP byte (_ConnBase): shared, immutable (a write to
# one raises, and the tracker reports it as an internal error: never a silent change to all)
_NONE_PAIR = (None, None)
_ZERO_PAIR = (0, 0)
_EMPTY_PAIR = ((), ())


class _ReadOnlyDict(dict):
    """An empty dict that refuses writes (a shared default; picklable, unlike a mappingproxy)."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("shared read-only dict")

    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = _refuse


_EMPTY_MAP = _ReadOnlyDict()
_EMPTY_MAPS = (_EMPTY_MAP, _EMPTY_MAP)
# the connection state of a connection that carried no AMQP byte (read only: a _Conn has its own)
_START_ENDPOINTS = Endpoints(CONNECTION_MACHINE, "START")
_UNKNOWN_ENDPOINTS = Endpoints(CONNECTION_MACHINE, UNKNOWN)

# output handle still assigned at the endpoint in these states
_LINK_HANDLE_ASSIGNED = frozenset({"ATTACH_SENT", "ATTACHED", "DETACH_RCVD", UNKNOWN})
_SESSION_CHANNEL_ASSIGNED = frozenset({"BEGIN_SENT", "MAPPED", "END_RCVD", UNKNOWN})

# settled deliveries kept (per tracker) before they are folded: a disposition of the other peer
# that crossed the settling frame on the wire still finds its delivery within this many settlements
FOLD_LAG = 16384
#: credit / window violations held per connection and granting peer until that peer's next frame
#: (see StateTracker._hold); beyond this many they are reported at once
HOLD_MAX = 4096

# identical violations (same connection, kind, side, message and origin: a flood of one finding) are
# listed one by one up to REPEAT_KEEP; past it one more row stands for the rest, its message saying
# how many and the last packet (its packet and time are the first of them), so a flood costs a bounded amount
REPEAT_KEEP = 100
# distinct findings the tracker lists in all; past it, findings of a new message are added up in one
# row per connection, kind, side and origin (a flood of findings that all differ: one per frame of a
# few bytes would otherwise cost a row of about a kilobyte each)
VIOLATIONS_LISTED = 50_000

# placeholder sessions (a channel without begin) and links (a handle without attach) made per
# connection, and per tracker; past a cap, frames on further unknown channels go to one overflow
# session of the connection, on further unknown handles to one overflow link of the session (each
# made once, with a note): an unknown channel or handle costs a bounded amount
UNKNOWN_SESSIONS_MAX = 256
UNKNOWN_LINKS_MAX = 1024
PLACEHOLDERS_MAX = 16384

# deliveries that the disposition ranges (of more than 16 ids) of a session may touch in all: a base,
# and more per delivery transferred in the session.  A range that would touch more than what is left
# is not applied (a "budget" violation; the session's unknown says so): a disposition's cost does not
# grow with the deliveries it covers past that (issue 29: a range 0..2**31-1 sent again and again)
DISPOSITION_TOUCH_BASE = 1 << 16
DISPOSITION_TOUCHES_PER_DELIVERY = 16

TERMINAL_OUTCOMES_ORDER = OUTCOMES  # accepted, rejected, released, modified, declared (from the spec)
TERMINAL_OUTCOMES = frozenset(OUTCOMES)
SIDES = ("client", "server")

# --------------------------------------------------------------------------- value helpers


def _uint(v, top: int = SERIAL_MASK):
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= top:
        return int(v)
    return None


def _ushort(v):
    return _uint(v, 0xFFFF)


def _ulong(v):
    return _uint(v, (1 << 64) - 1)


def _bool(v):
    return v if v is True or v is False else None


def _str(v):
    return str(v) if isinstance(v, str) else None


def _bin(v):
    if type(v) is bytes:
        return v
    return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else None


def _hex(v):
    if v is None or v is ABSENT:
        return None
    b = _bin(v)
    if b is not None:
        return b.hex()
    return str(json_value(v))


def _symbols(v) -> list | None:
    if v is None or v is ABSENT:
        return None
    if isinstance(v, (list, tuple)):
        return [str(x) if isinstance(x, str) else json_value(x) for x in v]
    if isinstance(v, str):
        return [str(v)]
    return [json_value(v)]


def _plain(v):
    """A JSON-able value (None for absent)."""
    if v is ABSENT:
        return None
    return json_value(v)


def _composite(v, *names):
    return v if isinstance(v, Composite) and (not names or v.spec.name in names) else None


def _choice(c: Composite, field: str, type_name: str):
    v = c.effective(field)
    name = choice_name(type_name, v)
    if name is not None:
        return name
    return _plain(v)


def error_info(v) -> dict | None:
    """``{"condition", "description", "info"}`` of an ``error`` composite (None if absent/null)."""
    if v is None or v is ABSENT:
        return None
    c = _composite(v, "error")
    if c is None:
        return {"condition": "(malformed error)", "description": None, "info": _plain(v)}
    cond = c.field("condition")
    return {
        "condition": str(cond) if isinstance(cond, str) else _plain(cond),
        "description": _str(c.field("description")),
        "info": _plain(c.field("info")),
    }


def terminus_info(v) -> dict | None:
    """A source / target / coordinator as a plain dict (None when null / absent)."""
    if v is None or v is ABSENT:
        return None
    c = _composite(v)
    if c is None:
        return {"type": getattr(v, "name", None) or "unknown", "address": None, "value": _plain(v)}
    name = c.spec.name
    d: dict = {"type": name}
    if name == "coordinator":
        d["address"] = None
        d["capabilities"] = _symbols(c.field("capabilities"))
        return d
    if name not in ("source", "target"):
        d["address"] = None
        d["value"] = _plain(v)
        return d
    addr = c.field("address")
    if addr is None or addr is ABSENT:
        d["address"] = None
    elif isinstance(addr, str):
        d["address"] = str(addr)
    else:  # not a string (a list, a map, binary ...): its text, as the tables show it, so it stays a key
        v = _plain(addr)
        d["address"] = json.dumps(v, default=str) if isinstance(v, (list, dict)) else str(v)
    d["durable"] = _choice(c, "durable", "terminus-durability")
    d["durable_default"] = c.is_default("durable")
    d["expiry_policy"] = _choice(c, "expiry-policy", "terminus-expiry-policy")
    d["expiry_policy_default"] = c.is_default("expiry-policy")
    d["timeout"] = _plain(c.effective("timeout"))
    d["dynamic"] = c.effective("dynamic") is True
    d["capabilities"] = _symbols(c.field("capabilities"))
    if name == "source":
        f = c.field("filter")
        d["filter"] = None if f is None or f is ABSENT else _plain(f)
        dm = c.field("distribution-mode")
        d["distribution_mode"] = None if dm is None or dm is ABSENT else _plain(dm)
        d["default_outcome"] = _plain(c.field("default-outcome"))
        d["outcomes"] = _symbols(c.field("outcomes"))
    return d


# --------------------------------------------------------------------------- model


def _order_add(s, d, did) -> None:
    """``did`` is new in ``s.deliveries[d]``: add it to the ordered ids (``s.did_order[d]``), kept
    only once a wide disposition range asked for them (most sessions never send one)."""
    order = s.did_order[d]
    if order is None:
        return
    off = serial_diff(did, s.first_did[d])
    if cython.compiled:  # (the array's buffer read and grown in C: no int objects, no method call)
        k = len(order)
        if k == 0 or off > order.data.as_longlongs[k - 1]:
            _carray.resize_smart(order, k + 1)
            order.data.as_longlongs[k] = off
            return
    elif not order or off > order[-1]:
        order.append(off)  # ids come in order: the usual case
        return
    i = bisect_left(order, off)
    if i == len(order) or order[i] != off:
        order.insert(i, off)


def _order_rebuild(s, d) -> None:
    """Drop the folded ids from ``s.did_order[d]`` (they outnumber the live ones)."""
    base = s.first_did[d]
    offs = [serial_diff(k, base) for k in s.deliveries[d]]
    offs.sort()
    s.did_order[d] = array("q", offs)
    s.did_dead[d] = 0


def _in_range(s, sender, first, n) -> list:
    """The deliveries of ``s.deliveries[sender]`` whose ids are ``first .. first+n-1``, in id order.
    Bisects the ordered ids and drops the folded ones it meets: the cost is in proportion to the
    deliveries touched (each folded id is met once)."""
    table = s.deliveries[sender]
    hits = []
    if s.compact[sender] is not None:
        return _in_range_compact(s, sender, first, n)
    if not table:
        return hits
    order = s.did_order[sender]
    if order is None:  # the first wide range since the table was last empty: order its ids now
        _order_rebuild(s, sender)
        order = s.did_order[sender]
    base = s.first_did[sender]
    a = serial_diff(first, base)
    b = a + n - 1
    dead = 0
    if b >= _HALF:  # the range wraps past the ids' serial half-range from the first: two pieces
        dead += _collect(order, table, base, a, _HALF - 1, hits)
        dead += _collect(order, table, base, -_HALF, b - SERIAL_MOD, hits)
    else:
        dead += _collect(order, table, base, a, b, hits)
    if dead:
        s.did_dead[sender] = max(0, s.did_dead[sender] - dead)
    return hits


def _range_count(s, sender, first, n) -> int:
    """At most how many deliveries of ``s.deliveries[sender]`` and its compact store have ids
    ``first .. first+n-1`` (bisections of the ordered ids: folded ones not dropped yet count too)."""
    table = s.deliveries[sender]
    st = s.compact[sender]
    if not table and st is None:
        return 0
    if table and s.did_order[sender] is None:
        _order_rebuild(s, sender)
    base = s.first_did[sender]
    a = serial_diff(first, base)
    b = a + n - 1
    pieces = [(a, _HALF - 1), (-_HALF, b - SERIAL_MOD)] if b >= _HALF else [(a, b)]
    order = s.did_order[sender] if table else None
    k = 0
    for lo, hi in pieces:
        if order is not None:
            k += bisect_right(order, hi) - bisect_left(order, lo)
        if st is not None:
            k += bisect_right(st.offs, hi) - bisect_left(st.offs, lo)
    return k


def _in_range_compact(s, sender, first, n) -> list:
    """:func:`_in_range` of a session with compacted deliveries: those of the table and those of the
    store (made objects again), merged in id order."""
    base = s.first_did[sender]
    a = serial_diff(first, base)
    b = a + n - 1
    pieces = [(a, _HALF - 1), (-_HALF, b - SERIAL_MOD)] if b >= _HALF else [(a, b)]
    hits = []
    if s.did_order[sender] is None and s.deliveries[sender]:
        _order_rebuild(s, sender)  # (ordered on the first wide range, as in _in_range)
    for lo, hi in pieces:
        got = []
        order = s.did_order[sender]
        table = s.deliveries[sender]
        if order is not None and table:
            dead = _collect(order, table, base, lo, hi, got)
            if dead:
                s.did_dead[sender] = max(0, s.did_dead[sender] - dead)
        rows = _store_range(s, sender, lo, hi)
        if not rows:
            hits.extend(got)
            continue
        merged = [(serial_diff(x.delivery_id, base), x.seq, x) for x in got]
        for off, _i in rows:
            st = s.compact[sender]
            j = st.find(off)  # (positions move when an expansion rebuilds the store)
            if j >= 0:
                x = _expand(s, sender, j)
                merged.append((off, x.seq, x))
        merged.sort(key=lambda t: (t[0], t[1]))
        hits.extend(t[2] for t in merged)
    return hits


def _collect(order, table, base, a, b, hits) -> int:
    """Append the deliveries at offsets ``a .. b`` of ``order`` to ``hits``; drop (and count) the
    offsets whose delivery was folded."""
    lo = bisect_left(order, a)
    hi = bisect_right(order, b)
    dead = 0
    tbl = table if cython.compiled and type(table) is dict else None  # (C look-ups; tests count a mapping's)
    for i in range(lo, hi):
        if cython.compiled:  # (the offset read from the array's buffer: a C integer)
            k = (base + order.data.as_longlongs[i]) & _M32
            x = tbl.get(k) if tbl is not None else table.get(k)
        else:
            x = table.get((base + order[i]) & SERIAL_MASK)
        if x is None:
            dead += 1
        else:
            hits.append(x)
    if dead:
        order[lo:hi] = array("q", [order[i] for i in range(lo, hi) if (base + order[i]) & SERIAL_MASK in table])
    return dead


# --------------------------------------------------------------------------- compact deliveries

# A session's table of unsettled deliveries of one sending peer holds objects up to COMPACT_AT of
# them; beyond, the plain ones (single state: complete or still one frame, unsettled, no disposition,
# no outcome, no transaction) move to a _Compact store, 60-odd bytes each instead of 500, and come
# back as objects when a disposition names them (or, for reading, as short-lived copies).
COMPACT_AT = 4096
COMPACT_KEEP = 1024  # the newest deliveries of the table stay objects (the ones a disposition names next)
_RSM_CODES = {None: 0, "first": 1, "second": 2}
_RSM_NAMES = (None, "first", "second")
_CF_COMPLETE = 1
_CF_RESUMED = 2
_CF_NO_TAG = 4
_CF_DEAD = 8  # expanded (an object again) or superseded: not a delivery of the store any more
_CF_HIDDEN = 16  # a later delivery took its delivery-id: still a row, no longer found by id
_CF_RSM = 5  # bits 5-6: receiver-settle-mode code
_TAG_MAX = 64


class _Compact:
    """Struct-of-arrays of one session's compacted deliveries of one sending peer, in id order:
    offsets of their delivery-ids from the session's first id of that peer (``_Session.first_did``),
    first-transfer order (``seq``), times, packets, frames, bytes, flags, link, tag."""

    __slots__ = ("offs", "seq", "first_ts", "last_ts", "first_packet", "last_packet", "frames", "size",
                 "flags", "link", "tag_end", "tags", "dead", "by_link")

    def __init__(self):
        self.offs = array("q")
        self.seq = array("q")
        self.first_ts = array("q")  # (nanoseconds: a time beyond the 64-bit range stays an object)
        self.last_ts = array("q")
        self.first_packet = array("q")
        self.last_packet = array("q")
        self.frames = array("i")
        self.size = array("q")
        self.flags = array("B")
        self.link = array("i")  # the link's index in its connection (_Conn.links)
        self.tag_end = array("q")  # each tag is tags[tag_end[i-1]:tag_end[i]] (tags may be out of order)
        self.tags = bytearray()
        self.dead = 0
        # link index -> rows of its live deliveries (made by compact_rows in one walk of the store for
        # every link; None again when the store changes)
        self.by_link = None

    def __len__(self) -> int:
        return len(self.offs)

    def find(self, off) -> int:
        """Position of the live, findable delivery at id offset ``off``, or -1."""
        offs = self.offs
        n = len(offs)
        i = bisect_left(offs, off)
        while i < n and offs[i] == off:
            if not self.flags[i] & (_CF_DEAD | _CF_HIDDEN):
                return i
            i += 1
        return -1

    def tag(self, i):
        if self.flags[i] & _CF_NO_TAG:
            return None
        a = self.tag_end[i - 1] if i else 0
        return bytes(self.tags[a:self.tag_end[i]])


_TS_CAP = 1 << 63  # the times a store's int64 columns hold (nanoseconds: the years 1677 to 2262)


def _compactable(x, link) -> bool:
    return (x.settled is None and x.outcome is None and x.outcome_by is None and x.outcome_error is None
            and x.received_state is None and x.txn_id is None and x.sender_state is None and x.txn is None
            and x.enlisted_in is None and x.payload is None and not x.aborted and not x.folded
            and x.delivery_failed is None and x.undeliverable_here is None and x.dispositions[0] == 0
            and x.dispositions[1] == 0 and link.partial is not x and not link.coordinator
            and x.rcv_settle_mode in _RSM_CODES and type(x.first_ts) is int and type(x.last_ts) is int
            and -_TS_CAP <= x.first_ts < _TS_CAP and -_TS_CAP <= x.last_ts < _TS_CAP
            and type(x.first_packet) is int and type(x.last_packet) is int and 0 <= x.frames < 2**31
            and 0 <= x.size < 2**62 and link.index < 2**31 and (x.tag is None or len(x.tag) <= _TAG_MAX))


def _compact(s, d) -> None:
    """Move the plain deliveries of ``s.deliveries[d]`` but the newest COMPACT_KEEP to the store."""
    table = s.deliveries[d]
    base = s.first_did[d]
    keep = len(table) - COMPACT_KEEP
    moving = []
    for did, x in table.items():
        if keep <= 0:
            break
        keep -= 1
        if _compactable(x, x.link):
            moving.append((serial_diff(did, base), x))
    s.compact_at[d] = max(COMPACT_AT, 2 * (len(table) - len(moving)))
    if not moving:  # (deliveries with dispositions or outcomes, waiting for settlement: no store)
        return
    st = s.compact[d]
    if st is None:
        st = s.compact[d] = _Compact()
    moving.sort(key=lambda ox: ox[0])
    # rows in id order: appended when beyond the store's last id (the usual case), else rebuilt
    if moving and len(st.offs) and moving[0][0] <= st.offs[-1]:
        rows = [(st.offs[i], i) for i in range(len(st.offs))] + [(o, x) for o, x in moving]
        _store_rebuild(s, d, rows)
    else:
        for o, x in moving:
            _store_append(st, o, x)
    for _o, x in moving:
        del table[x.delivery_id]
        link = x.link
        del link.live[x.seq]
        link.compacted += 1
        link.reordered = True
    s.did_order[d] = None  # (ordered again by the next wide range)
    s.did_dead[d] = 0


def _store_append(st, o, x) -> None:
    st.by_link = None
    st.offs.append(o)
    st.seq.append(x.seq)
    st.first_ts.append(x.first_ts)
    st.last_ts.append(x.last_ts)
    st.first_packet.append(x.first_packet)
    st.last_packet.append(x.last_packet)
    st.frames.append(x.frames)
    st.size.append(x.size)
    fl = _RSM_CODES[x.rcv_settle_mode] << _CF_RSM
    if x.complete:
        fl |= _CF_COMPLETE
    if x.resumed:
        fl |= _CF_RESUMED
    if x.tag is None:
        fl |= _CF_NO_TAG
    else:
        st.tags += x.tag
    st.flags.append(fl)
    st.link.append(x.link.index)
    st.tag_end.append(len(st.tags))


def _store_rebuild(s, d, rows) -> None:
    """``s.compact[d]`` made again from ``rows``: (offset, position in the old store or a delivery),
    in id order; dead rows dropped."""
    old = s.compact[d]
    st = s.compact[d] = _Compact()
    rows.sort(key=lambda r: r[0])
    for o, r in rows:
        if type(r) is int:
            fl = old.flags[r]
            if fl & _CF_DEAD:
                continue
            st.offs.append(o)
            for name in ("seq", "first_ts", "last_ts", "first_packet", "last_packet", "frames", "size", "flags",
                         "link"):
                getattr(st, name).append(getattr(old, name)[r])
            if not fl & _CF_NO_TAG:
                st.tags += old.tag(r)
            st.tag_end.append(len(st.tags))
        else:
            _store_append(st, o, r)
    if not len(st.offs):
        s.compact[d] = None


def _store_delivery(s, d, st, i):
    """The delivery at row ``i`` of ``st`` (``s.compact[d]``) as a fresh object (not in any table)."""
    c = s.conn
    link = c.links[st.link[i]]
    fl = st.flags[i]
    x = _Delivery.__new__(_Delivery)
    x._init(link, s, d, (s.first_did[d] + st.offs[i]) & SERIAL_MASK, st.tag(i), st.first_ts[i], st.first_packet[i])
    x.last_ts = st.last_ts[i]
    x.last_packet = st.last_packet[i]
    x.frames = st.frames[i]
    x.size = st.size[i]
    x.complete = bool(fl & _CF_COMPLETE)
    x.resumed = bool(fl & _CF_RESUMED)
    x.rcv_settle_mode = _RSM_NAMES[(fl >> _CF_RSM) & 3]
    x.seq = st.seq[i]
    return x


def _expand(s, d, i):
    """Row ``i`` of ``s.compact[d]`` becomes an object again, back in the session's table and its
    link's live deliveries (a disposition names it)."""
    st = s.compact[d]
    x = _store_delivery(s, d, st, i)
    st.flags[i] |= _CF_DEAD
    st.dead += 1
    st.by_link = None
    link = x.link
    link.compacted -= 1
    link.reordered = True
    link.live[x.seq] = x  # (out of seq order: readers sort a link that was compacted)
    s.deliveries[d][x.delivery_id] = x
    _order_add(s, d, x.delivery_id)
    if st.dead * 2 > len(st.offs):
        _store_rebuild(s, d, [(st.offs[k], k) for k in range(len(st.offs))])
    return x


def _store_hide(s, d, did) -> None:
    """A new delivery took ``did``: the compacted one with that id is no longer found by it."""
    st = s.compact[d]
    i = st.find(serial_diff(did, s.first_did[d]))
    if i >= 0:
        st.flags[i] |= _CF_HIDDEN


def _store_range(s, d, a, b) -> list:
    """Offsets and rows (offset, i) of the findable compacted deliveries at offsets a..b whose ids are
    not in the session's table (the table holds the latest delivery of an id)."""
    st = s.compact[d]
    offs = st.offs
    flags = st.flags
    table = s.deliveries[d]
    base = s.first_did[d]
    out = []
    for i in range(bisect_left(offs, a), bisect_right(offs, b)):
        if not flags[i] & (_CF_DEAD | _CF_HIDDEN) and (base + offs[i]) & SERIAL_MASK not in table:
            out.append((offs[i], i))
    return out


def link_deliveries(link):
    """The link's deliveries not folded yet, in first-transfer order (an iterator): its objects, and
    copies of those compacted (made one at a time, for reading: changing them changes nothing)."""
    if not link.compacted and not link.reordered:
        return iter(list(link.live.values()))
    return _link_deliveries(link)


def compact_rows(link) -> list:
    """The link's compacted deliveries, read from the columns: ``[(d, store, rows)]`` per sending
    peer ``d`` with any, ``rows`` their positions in ``store`` (``s.compact[d]``) in first-transfer
    order.  The one walk of the stores: readers take what they need from the columns, and make a
    delivery object (:func:`store_delivery`) only for one they keep."""
    out = []
    if not link.compacted:
        return out
    s = link.session
    idx = link.index
    for d in (0, 1):
        st = s.compact[d]
        if st is None:
            continue
        by_link = st.by_link
        if by_link is None:  # one walk of the store for all its links (a session may have many)
            by_link = st.by_link = {}
            li = st.link
            flags = st.flags
            for i in range(len(st.offs)):
                if not flags[i] & _CF_DEAD:
                    r = by_link.get(li[i])
                    if r is None:
                        r = by_link[li[i]] = array("l")
                    r.append(i)
        rows = by_link.get(idx)
        if rows:
            seq = st.seq
            if any(seq[rows[k - 1]] > seq[rows[k]] for k in range(1, len(rows))):
                rows = array("l", sorted(rows, key=seq.__getitem__))
            else:
                rows = array("l", rows)  # (a copy: the caller's)
            out.append((d, st, rows))
    return out


def store_delivery(link, d, st, i):
    """Row ``i`` of the store ``st`` of ``link``'s session and peer ``d`` as a fresh delivery object."""
    return _store_delivery(link.session, d, st, i)


def store_values(link, d, st, i) -> tuple:
    """What row ``i`` of the store ``st`` (``link``'s session, peer ``d``) holds, without an object:
    (delivery-id, tag, first_ts, last_ts, first_packet, last_packet, frames, size, complete, resumed,
    rcv_settle_mode); the rest of a compacted delivery is as :meth:`_Delivery._init` leaves it."""
    fl = st.flags[i]
    return ((link.session.first_did[d] + st.offs[i]) & SERIAL_MASK, st.tag(i), st.first_ts[i], st.last_ts[i],
            st.first_packet[i], st.last_packet[i], st.frames[i], st.size[i], bool(fl & _CF_COMPLETE),
            bool(fl & _CF_RESUMED), _RSM_NAMES[(fl >> _CF_RSM) & 3])


#: the columns :func:`store_columns` gives (what a compacted delivery holds of its own; the rest of
#: it is as :meth:`_Delivery._init` leaves it, the same for every compacted delivery of a link)
STORE_COLUMNS = ("delivery_id", "delivery_tag", "first_time", "last_time", "first_packet", "last_packet", "frames",
                 "message_size", "complete", "resumed", "rcv_settle_mode")


def store_columns(link, d, st, rows) -> list:
    """The cells of the compacted deliveries at ``rows`` of the store ``st`` (``link``'s session, peer
    ``d``) by column, in the order of :data:`STORE_COLUMNS`, read from the store's arrays (no object
    per delivery): the values :func:`store_values` gives row by row, the tag as hex text."""
    n = len(rows)
    if n and rows[n - 1] - rows[0] == n - 1 and rows == array("l", range(rows[0], rows[0] + n)):
        a, b = rows[0], rows[0] + n  # a run of the store (the usual case): slices
        offs = st.offs[a:b]
        first_ts = st.first_ts[a:b].tolist()
        last_ts = st.last_ts[a:b].tolist()
        first_packet = st.first_packet[a:b].tolist()
        last_packet = st.last_packet[a:b].tolist()
        frames = st.frames[a:b].tolist()
        size = st.size[a:b].tolist()
        flags = st.flags[a:b]
    else:
        o, ft, lt, fp, lp, fr, sz, fl = (st.offs, st.first_ts, st.last_ts, st.first_packet, st.last_packet, st.frames,
                                         st.size, st.flags)
        offs = [o[i] for i in rows]
        first_ts = [ft[i] for i in rows]
        last_ts = [lt[i] for i in rows]
        first_packet = [fp[i] for i in rows]
        last_packet = [lp[i] for i in rows]
        frames = [fr[i] for i in rows]
        size = [sz[i] for i in rows]
        flags = [fl[i] for i in rows]
    base = link.session.first_did[d]
    ids = [(base + off) & SERIAL_MASK for off in offs]
    tag_end = st.tag_end
    tags = st.tags
    tag_col = []
    for k in range(n):
        if flags[k] & _CF_NO_TAG:
            tag_col.append(None)
        else:
            i = rows[k]
            tag_col.append(tags[tag_end[i - 1] if i else 0:tag_end[i]].hex())
    complete = [(f & _CF_COMPLETE) != 0 for f in flags]
    resumed = [(f & _CF_RESUMED) != 0 for f in flags]
    rsm = [_RSM_NAMES[(f >> _CF_RSM) & 3] for f in flags]
    return [ids, tag_col, first_ts, last_ts, first_packet, last_packet, frames, size, complete, resumed, rsm]


def _link_deliveries(link):
    streams = [sorted(link.live.values(), key=_by_seq)]
    s = link.session
    for d, st, rows in compact_rows(link):
        streams.append(_store_rows(s, d, st, rows))
    return heapq.merge(*streams, key=_by_seq)


def _store_rows(s, d, st, rows):
    for i in rows:
        yield _store_delivery(s, d, st, i)


def add_link_stats(stats, link) -> None:
    """Add the link's deliveries not folded yet to ``stats`` (a copy of ``link.stats``): its objects
    in first-transfer order, and its compacted ones from their columns (a compacted delivery is
    unsettled, without outcome, latency, abort or presettlement: counts and bytes only)."""
    live = link.live.values()
    for x in (sorted(live, key=_by_seq) if link.reordered else live):
        stats.add(x)
    for _d, st, rows in compact_rows(link):
        size = st.size
        flags = st.flags
        n = len(rows)
        stats.deliveries += n
        stats.no_outcome += n
        stats.unsettled += n
        stats.bytes += sum([size[i] for i in rows])
        stats.resumed += sum([1 for i in rows if flags[i] & _CF_RESUMED])


def _by_seq(x):
    return x.seq


#: a transfer of the sender at most this long (nanoseconds: 10 ms) after the frame that ended a
#: stall shows that the sender was waiting to send (when no available says so)
AT_ONCE = 10_000_000
#: how a stall ends that, with nothing else to go by, makes it an idle period
IDLE_ENDS = ("detach", "end", "close", "transport")


class Stall:
    """An interval in which a sender could not send (see "Stalls" in the module docstring).

    ``exhausted`` / ``exhausted_packet``: the frame that used up the credit (or window).
    ``start`` / ``start_packet``: when the stall began: the last frame of the delivery that used
    up the credit (None while that delivery is still being sent: ``busy`` is it), or later, the
    sender's flow that first showed a message waiting after it had shown none.
    ``avail``: True / False when the sender's available showed messages waiting / none (None: it
    never said), ``next_ts``: time of the sender's first transfer after the end (link, or
    session for a session-window stall)."""
    __slots__ = (
        "conn", "session", "link", "direction", "kind", "start", "start_packet",
        "end", "end_packet", "ended_by", "exhausted", "exhausted_packet", "busy", "avail", "next_ts",
    )

    def __init__(self, conn, session, link, direction, kind, ts, packet, busy=None):
        self.conn = conn
        self.session = session
        self.link = link  # _Link or None (session-window stall without a transfer)
        self.direction = direction  # the sending peer
        self.kind = kind
        self.exhausted = ts
        self.exhausted_packet = packet
        self.busy = busy
        self.start = ts if busy is None else None
        self.start_packet = packet if busy is None else None
        self.end = None
        self.end_packet = None
        self.ended_by = None
        self.avail = None
        self.next_ts = None

    def close(self, ts, packet, ended_by):
        if self.end is None:
            self.end = ts
            self.end_packet = packet
            self.ended_by = ended_by
            if self.start is not None:  # (a busy one never began: it is dropped)
                if self.kind == "session-window":
                    self.session.after_win[self.direction] = self
                elif self.link is not None:
                    self.link.after_stall = self

    def saw_available(self, av, ts, packet):
        """The sender's available (reported in a flow, or left of it at the start) during the stall."""
        if self.end is not None:
            return
        if av > 0:
            if self.avail is False and self.start is not None and ts > self.start:
                # it had shown nothing waiting: the stall begins when a message is known to wait
                self.start = ts
                self.start_packet = packet
            self.avail = True
        elif self.avail is None:
            self.avail = False

    def waiting(self):
        """(waiting, evidence): True / False from the sender's available ("available"); True when
        its first transfer after the end came within AT_ONCE ("transfer"); else (None, "none")."""
        if self.avail is not None:
            return self.avail, "available"
        if self.next_ts is not None and self.end is not None and self.next_ts - self.end <= AT_ONCE:
            return True, "transfer"
        return None, "none"

    def idle(self) -> bool:
        """An idle period, not a stall: the sender showed nothing waiting, or (nothing showing either
        way) it ended at detach / end / close / transport end / the end of the capture with no
        transfer after it.  A drain stall is never idle."""
        if self.kind == "drain":
            return False
        w = self.waiting()[0]
        if w is not None:
            return not w
        return self.next_ts is None and (self.end is None or self.ended_by in IDLE_ENDS)


class _Delivery:
    __slots__ = (
        "link", "session", "direction", "delivery_id", "tag", "first_ts", "first_packet", "last_ts",
        "last_packet", "frames", "size", "complete", "presettled", "aborted", "resumed",
        "snd_settled", "rcv_settled", "outcome", "outcome_by", "outcome_ts", "outcome_packet",
        "outcome_error", "delivery_failed", "undeliverable_here", "received_state", "txn_id",
        "dispositions", "rcv_settle_mode", "payload", "sender_state", "settled", "txn", "enlisted_in",
        "seq", "folded",
    )

    def __init__(self, link, session, direction, delivery_id, tag, ts, packet):
        self._init(link, session, direction, delivery_id, tag, ts, packet)

    def _init(self, link, session, direction, delivery_id, tag, ts, packet):
        # (the transfer path makes deliveries with _Delivery.__new__ and this: a C call when compiled)
        self.link = link
        self.session = session
        self.direction = direction  # the sending peer
        self.delivery_id = delivery_id
        self.tag = tag
        self.first_ts = ts
        self.first_packet = packet
        self.last_ts = ts
        self.last_packet = packet
        self.frames = 0
        self.size = 0
        self.complete = False
        self.presettled = False
        self.aborted = False
        self.resumed = False
        self.snd_settled = None  # (ts, packet)
        self.rcv_settled = None
        self.outcome = None
        self.outcome_by = None
        self.outcome_ts = None
        self.outcome_packet = None
        self.outcome_error = None  # error dict of a rejected outcome
        self.delivery_failed = None
        self.undeliverable_here = None
        self.received_state = None
        self.txn_id = None
        self.dispositions = [0, 0]  # dispositions covering it, per sending peer
        self.rcv_settle_mode = None
        self.payload = None  # list of bytes, kept for coordinator links only
        self.sender_state = None
        self.settled = None  # (ts, packet) of the first settling frame of either peer
        self.txn = None  # _Txn of a declare / discharge on a coordinator link
        self.enlisted_in = None  # _Txn whose work this delivery is part of
        self.seq = 0  # order of first transfers over the whole capture
        self.folded = False  # counted into its link's DeliveryStats and forgotten

    def settle(self, by: str, ts, packet):
        """``by`` ("sender"/"receiver") announced settlement in the frame at ts/packet."""
        if by == "sender":
            if self.snd_settled is None:
                self.snd_settled = (ts, packet)
        elif self.rcv_settled is None:
            self.rcv_settled = (ts, packet)
        if self.settled is None:
            self.settled = (ts, packet)


# values a Latencies column keeps in its array before it folds the repeated ones into counts
LATENCY_FOLD = 4096


class Latencies:
    """A column of latencies (seconds) with exact percentiles in bounded room.

    Values go to a typed array (8 bytes each).  When it holds ``fold_at`` values, they are
    folded into counts of distinct values, if that is smaller: latencies are differences of
    capture timestamps (microseconds, mostly), so a long capture repeats the same few thousand
    values, and memory follows the distinct values, not the deliveries.  Where values rarely
    repeat, they stay in the array (and the next try is at twice the size).  Percentiles and
    the mean read values and counts alike: the same numbers as from the plain list of values.
    """

    __slots__ = ("values", "counts", "n", "fold_at")

    def __init__(self, fold_at: int = LATENCY_FOLD):
        self.values = array("d")
        self.counts: dict = {}  # value -> how many times (the folded part)
        self.n = 0
        self.fold_at = fold_at

    def __len__(self) -> int:
        return self.n

    def append(self, x: float) -> None:
        if cython.compiled:  # straight into the array's buffer: no float object, no argument parsing
            k = len(self.values)
            _carray.resize_smart(self.values, k + 1)
            self.values.data.as_doubles[k] = x
        else:
            self.values.append(x)
        self.n += 1
        if len(self.values) >= self.fold_at:
            self._fold()

    def extend(self, other: "Latencies") -> None:
        self.values.extend(other.values)
        counts = self.counts
        for v, c in other.counts.items():
            counts[v] = counts.get(v, 0) + c
        self.n += other.n

    def copy(self) -> "Latencies":
        c = Latencies(self.fold_at)
        c.extend(self)
        return c

    def _fold(self) -> None:
        if cython.compiled and self._fold_hashed():
            return
        fresh: dict = {}
        for v in self.values:
            fresh[v] = fresh.get(v, 0) + 1
        counts = self.counts
        distinct = len(counts)
        for v in fresh:
            if v not in counts:
                distinct += 1
        # a distinct value costs about 100 bytes in the dict, a value 8 in the array
        if distinct * 12 <= self.n:
            for v, c in fresh.items():
                counts[v] = counts.get(v, 0) + c
            self.values = array("d")
        else:  # mostly distinct: keep the array
            self.fold_at = 2 * len(self.values)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def _fold_hashed(self) -> bool:
        """:meth:`_fold` without a Python object per value (what the compiled build runs): the
        values are counted in an open-addressing table of typed arrays keyed by their 8 bytes, and
        only the distinct values become floats, for the counts.  The same counts as the dict fold,
        in another order (every reader sorts them).  False, having changed nothing, when a value is
        NaN: the dict fold keeps each NaN apart, so it does that one."""
        values = self.values
        m = len(values)
        size = 16
        while size < 2 * m:
            size <<= 1
        mask = size - 1
        vals = values
        bits = memoryview(values).cast("B").cast("q")  # the same 8 bytes as integers, for the hash
        at = array("q", bytes(8 * size))  # slot -> 1 + index of the value's first occurrence (0: empty)
        cnt = array("q", bytes(8 * size))  # slot -> how many times
        for i in range(m):
            v = vals[i]
            if v != v:
                return False
            b = bits[i] if v != 0.0 else 0  # -0.0 == 0.0, as in a dict
            u = b ^ (b >> 29)
            u = u * 0x5BD1E995
            h = (u ^ (u >> 32)) & mask
            while True:
                a = at[h]
                if a == 0:
                    at[h] = i + 1
                    cnt[h] = 1
                    break
                if vals[a - 1] == v:
                    cnt[h] += 1
                    break
                h = (h + 1) & mask
        counts = self.counts
        distinct = len(counts)
        for h in range(size):
            if at[h] and vals[at[h] - 1] not in counts:
                distinct += 1
        if distinct * 12 <= self.n:  # as in _fold
            for h in range(size):
                if at[h]:
                    v = vals[at[h] - 1]
                    counts[v] = counts.get(v, 0) + cnt[h]
            self.values = array("d")
        else:
            self.fold_at = 2 * m
        return True

    def distinct(self) -> tuple:
        """(sorted distinct values, how many of each)."""
        counts = dict(self.counts)
        for v in self.values:
            counts[v] = counts.get(v, 0) + 1
        keys = sorted(counts)
        return keys, [counts[k] for k in keys]


def _seconds(t, t0) -> float:
    """``(t - t0) / NS``: seconds between two integer-nanosecond times.  Compiled, on C integers
    when both fit in 63 bits (no int object, no division call per latency): Python divides two
    integers below 2**53 as doubles, one correctly rounded division, so the float is the same."""
    if cython.compiled and type(t) is int and type(t0) is int:
        try:
            a = t
            b = t0
        except OverflowError:  # (beyond 64 bits)
            return (t - t0) / NS
        # (shifts, not literals: the comparisons stay in C)
        if ((a >> 62) == 0 or (a >> 62) == -1) and ((b >> 62) == 0 or (b >> 62) == -1):
            d = a - b  # (no overflow: both within +-2**62)
            if (d >> 53) == 0 or (d >> 53) == -1:  # within +-2**53: exact as a double
                return cython.cast(cython.double, d) / 1e9
    return (t - t0) / NS


class DeliveryStats:
    """What the deliveries of one link add up to: counts by outcome and flag, bytes, and the
    settlement / outcome latencies (:class:`Latencies`: percentiles stay exact, room bounded).

    Settled deliveries are folded in here and forgotten (see :meth:`StateTracker._fold`); the
    deliveries still open are added on top when a table is read (:meth:`copy` then :meth:`add`).
    """

    __slots__ = ("deliveries", "bytes", "outcomes", "no_outcome", "unsettled", "presettled", "aborted",
                 "resumed", "latency", "outcome_latency")

    def __init__(self):
        self.deliveries = 0
        self.bytes = 0
        self.outcomes = dict.fromkeys(TERMINAL_OUTCOMES_ORDER, 0)
        self.no_outcome = 0
        self.unsettled = 0
        self.presettled = 0
        self.aborted = 0
        self.resumed = 0
        self.latency = Latencies()  # settled time - first transfer time, seconds
        self.outcome_latency = Latencies()  # receiver's terminal outcome time - first transfer time

    def add(self, d: "_Delivery") -> None:
        self.deliveries += 1
        self.bytes += d.size
        o = d.outcome
        if o is None:
            self.no_outcome += 1
        else:
            n = self.outcomes.get(o)  # (one look-up, not two)
            if n is not None:
                self.outcomes[o] = n + 1
        if d.settled is None:
            self.unsettled += 1
        else:
            self.latency.append(_seconds(d.settled[0], d.first_ts))  # (the integers' difference, then seconds)
        if d.outcome_ts is not None:
            self.outcome_latency.append(_seconds(d.outcome_ts, d.first_ts))
        if d.presettled:
            self.presettled += 1
        if d.aborted:
            self.aborted += 1
        if d.resumed:
            self.resumed += 1

    def copy(self) -> "DeliveryStats":
        c = DeliveryStats()
        for k in self.__slots__:
            v = getattr(self, k)
            setattr(c, k, dict(v) if isinstance(v, dict) else v.copy() if isinstance(v, Latencies) else v)
        return c

# --------------------------------------------------------------------------- the rooms below

# The entities (entities.py), link credit (credit.py), the session window (window.py), loss records
# (loss.py), transactions (transactions.py) and the tracker's rooms (findings, stall_rules, sessions,
# settlement, links, transfers) down to StateTracker (tracker.py) import from this module; their
# names stay importable from here, loaded on first use (no import cycle).
_MOVED = {
    "StateTracker": "tracker", "_HANDLERS": "tracker", "_FIELD_HANDLERS": "tracker", "_CONN_LEVEL": "tracker",
    "_Link": "entities", "_Session": "entities", "_ConnBase": "entities", "_Conn": "entities",
    "_Txn": "transactions", "LinkCredit": "credit", "SessionWindow": "window", "LossRecord": "loss",
}


def __getattr__(name):
    room = _MOVED.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    package = __name__.rpartition(".")[0]
    return getattr(importlib.import_module(package + "." + room), name)
