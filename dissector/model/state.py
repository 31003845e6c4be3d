"""AMQP 1.0 protocol state of both directions of every connection (sans-IO).

:class:`StateTracker` is fed the events of :class:`amqp_dissect.dissect.Dissector`
(``StreamOpened``, ``StreamClosed``, ``ProtocolHeader``, ``Frame``,
``StreamNote``; anything else is ignored) and builds a model of what happened:
connections, sessions, links, deliveries, transactions, credit stalls,
protocol violations and errors.  :mod:`amqp_dissect.results.analytics` turns that model
into tables (``Analyzer``) and statistics.

The model's rooms (this module holds the entities and the tracker, and re-exports the names
other layers import from here): :mod:`~amqp_dissect.model.serial` (serial-number arithmetic),
:mod:`~amqp_dissect.model.transitions` (the state tables, data only),
:mod:`~amqp_dissect.model.machine` (``Machine``, ``Endpoints``),
:mod:`~amqp_dissect.model.delivery` (one delivery), :mod:`~amqp_dissect.model.deliveries`
(``DeliveryTable``: a session's deliveries per sending peer, with their compact store),
:mod:`~amqp_dissect.model.stats` (``DeliveryStats``, ``Latencies``),
:mod:`~amqp_dissect.model.stalls` (``Stall``); the value readers are in
:mod:`amqp_dissect.amqp.values`.

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
(:mod:`amqp_dissect.model.serial`) delivery-id, delivery-count and transfer-id are RFC 1982
serial numbers with 32 bits: :func:`serial_add`, :func:`serial_diff`, :func:`serial_lt`,
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
``Recorder.hold``); channel / handle / delivery-id / txn-id never introduced;
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

from collections import deque

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
from ..amqp.values import (STATE_DECLARED, STATE_MODIFIED, STATE_PLAIN, STATE_RECEIVED, STATE_REJECTED,
                           error_info, terminus_info)
# the rooms below this module (__all__: what it re-exports as plain attributes; what state.pxd cimports
# from a room, a C call when compiled, is imported from that room itself)
from .serial import (SERIAL_BITS, SERIAL_HALF, SERIAL_MASK, SERIAL_MOD, grant_left, serial_add, serial_diff,
                     serial_in_range, serial_lt, serial_range_len)
from .transitions import (CONNECTION_INPUTS, CONNECTION_STATES, CONNECTION_TRANSITIONS, LINK_INPUTS, LINK_STATES,
                          LINK_TRANSITIONS, SESSION_INPUTS, SESSION_STATES, SESSION_TRANSITIONS, SIDES, UNKNOWN)
from .machine import CONNECTION_MACHINE, LINK_MACHINE, MACHINES, SESSION_MACHINE, Endpoints, Machine
from .deliveries import (STORE_COLUMNS, DeliveryTable, compact_rows, link_deliveries, store_columns, store_delivery,
                         store_values)
from .stats import (TERMINAL_OUTCOMES, TERMINAL_OUTCOMES_ORDER, DeliveryStats, Latencies, add_link_stats,
                    seconds_between)
from .stalls import AT_ONCE, IDLE_ENDS, Stall

__all__ = [
    "AT_ONCE", "CONNECTION_INPUTS", "CONNECTION_MACHINE", "CONNECTION_STATES", "CONNECTION_TRANSITIONS",
    "IDLE_ENDS", "LINK_INPUTS", "LINK_MACHINE", "LINK_STATES", "LINK_TRANSITIONS", "MACHINES", "SERIAL_BITS",
    "SERIAL_MASK", "SERIAL_MOD", "SESSION_INPUTS", "SESSION_MACHINE", "SESSION_STATES", "SESSION_TRANSITIONS",
    "SIDES", "STORE_COLUMNS", "Stall", "TERMINAL_OUTCOMES", "TERMINAL_OUTCOMES_ORDER", "UNKNOWN", "add_link_stats",
    "compact_rows", "error_info", "link_deliveries", "seconds_between", "store_columns", "store_delivery",
    "store_values", "terminus_info",
]

_HALF = SERIAL_HALF


# what _apply_state reads beyond a delivery state's name (C integers when compiled: see state.pxd)
KIND_PLAIN, KIND_RECEIVED, KIND_REJECTED, KIND_MODIFIED, KIND_DECLARED = (STATE_PLAIN, STATE_RECEIVED, STATE_REJECTED,
                                                                 STATE_MODIFIED, STATE_DECLARED)


# field indices of the hot performatives, generated from the spec XML (frame.fields is the
# performative's field values in spec order, ABSENT beyond the encoded list)
from ..amqp._spec import (TRANSFER_HANDLE as T_HANDLE, TRANSFER_DELIVERY_ID as T_DELIVERY_ID,  # noqa: E402
                          TRANSFER_DELIVERY_TAG as T_DELIVERY_TAG, TRANSFER_SETTLED as T_SETTLED,
                          TRANSFER_MORE as T_MORE, TRANSFER_RCV_SETTLE_MODE as T_RCV_SETTLE_MODE,
                          TRANSFER_STATE as T_STATE, TRANSFER_RESUME as T_RESUME, TRANSFER_ABORTED as T_ABORTED)
from ..amqp._spec import (FLOW_NEXT_INCOMING_ID as F_NII, FLOW_INCOMING_WINDOW as F_IW,  # noqa: E402
                          FLOW_NEXT_OUTGOING_ID as F_NOID, FLOW_OUTGOING_WINDOW as F_OW, FLOW_HANDLE as F_HANDLE,
                          FLOW_DELIVERY_COUNT as F_DC, FLOW_LINK_CREDIT as F_LC, FLOW_AVAILABLE as F_AVAILABLE,
                          FLOW_DRAIN as F_DRAIN, FLOW_ECHO as F_ECHO)
from ..amqp._spec import (DISPOSITION_ROLE as D_ROLE, DISPOSITION_FIRST as D_FIRST,  # noqa: E402
                          DISPOSITION_LAST as D_LAST, DISPOSITION_SETTLED as D_SETTLED, DISPOSITION_STATE as D_STATE)

# what a connection holds before its first AMQP byte (ConnectionBase): shared, immutable (a write to
# one raises, and the tracker reports it as an internal error: never a silent change to all)
NONE_PAIR = (None, None)
ZERO_PAIR = (0, 0)
EMPTY_PAIR = ((), ())


class _ReadOnlyDict(dict):
    """An empty dict that refuses writes (a shared default; picklable, unlike a mappingproxy)."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("shared read-only dict")

    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = _refuse


EMPTY_MAP = _ReadOnlyDict()
EMPTY_MAPS = (EMPTY_MAP, EMPTY_MAP)


class SharedEndpoints(Endpoints):
    """The connection state of every connection without frames whose endpoints are in one pair of states
    with no input waiting (a connection that sent a protocol header and nothing more, as many do: issue 40),
    one object (:func:`shared_endpoints`).  Read only: ConnectionRules.conn_step steps a copy of its own
    (:func:`own_endpoints`) and a Connection has its own from its first frame.  Pickled as the key of
    the one object, which unpickling gives back (a checkpoint keeps it shared, never a copy written as own)."""

    __slots__ = ()

    def __reduce__(self):
        return shared_endpoints, (self.codes[0], self.codes[1])


# (client's state code, server's) -> its SharedEndpoints of the connection machine (bounded: its states squared)
_SHARED_ENDPOINTS: dict = {}


def shared_endpoints(c0: int, c1: int) -> SharedEndpoints:
    """The one SharedEndpoints of the connection machine in state codes ``c0`` (client), ``c1`` (server)."""
    ep = _SHARED_ENDPOINTS.get((c0, c1))
    if ep is None:
        ep = SharedEndpoints(CONNECTION_MACHINE, UNKNOWN)
        ep.codes[0] = c0
        ep.codes[1] = c1
        _SHARED_ENDPOINTS[(c0, c1)] = ep
    return ep


def own_endpoints(ep: Endpoints) -> Endpoints:
    """``ep`` when it is a connection's own, else (shared) a copy of its own, to step."""
    if type(ep) is Endpoints:
        return ep
    own = Endpoints(ep.machine, UNKNOWN)
    own.codes[0] = ep.codes[0]
    own.codes[1] = ep.codes[1]
    return own


def shared_again(ep: Endpoints) -> Endpoints:
    """The shared object for the states of ``ep`` when no input waits at either endpoint (else ``ep``)."""
    if type(ep) is not Endpoints or ep.machine is not CONNECTION_MACHINE:
        return ep
    q = ep.queue
    if q[0] or q[1]:
        return ep
    return shared_endpoints(ep.codes[0], ep.codes[1])


# the connection state of a connection that carried no AMQP byte (read only: a Connection has its own)
START_ENDPOINTS = shared_endpoints(CONNECTION_MACHINE.codes["START"], CONNECTION_MACHINE.codes["START"])
UNKNOWN_ENDPOINTS = shared_endpoints(CONNECTION_MACHINE.codes[UNKNOWN], CONNECTION_MACHINE.codes[UNKNOWN])

# settled deliveries kept (per tracker) before they are folded: a disposition of the other peer
# that crossed the settling frame on the wire still finds its delivery within this many settlements
FOLD_LAG = 16384
#: credit / window violations held per connection and granting peer until that peer's next frame
#: (see Recorder.hold); beyond this many they are reported at once
HOLD_MAX = 4096

#: unsettled deliveries whose delivery-tag a link keeps to find a tag repeated among them (part 2,
#: 2.6.12), and delivery-ids kept per tag; past either the check is not made for the ones beyond (said
#: in the link's unknown list): a link costs a bounded amount (a dict entry a tag, as the compact
#: store holds a row with its tag for each unsettled delivery anyway)
TAGS_MAX = 16384
TAG_IDS_MAX = 64

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
