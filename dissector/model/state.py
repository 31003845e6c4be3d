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
from ..amqp.spec import COMPOSITES, choice_name
# the value readers, under the names the tracker calls them by
from ..amqp.values import (STATE_DECLARED, STATE_MODIFIED, STATE_PLAIN, STATE_RECEIVED, STATE_REJECTED,
                           error_info, terminus_info)
from ..amqp.values import read_binary as _bin, read_bool as _bool, read_choice as _choice
from ..amqp.values import read_composite as _composite, read_delivery_state as _delivery_state_value
from ..amqp.values import read_hex as _hex, read_plain as _plain, read_str as _str, read_symbols as _symbols
from ..amqp.values import read_uint as _uint, read_ulong as _ulong, read_ushort as _ushort
from ..amqp.values import delivery_state_plan as _state_plan
# the rooms (what other layers import from this module is re-exported: see __all__ below)
from .serial import (SERIAL_BITS, SERIAL_HALF, SERIAL_MASK, SERIAL_MOD, grant_left, serial_add, serial_diff,
                     serial_in_range, serial_lt, serial_range_len)
from .transitions import (CONNECTION_INPUTS, CONNECTION_STATES, CONNECTION_TRANSITIONS, LINK_INPUTS, LINK_STATES,
                          LINK_TRANSITIONS, SESSION_INPUTS, SESSION_STATES, SESSION_TRANSITIONS, SIDES, UNKNOWN)
from .transitions import LINK_HANDLE_ASSIGNED as _LINK_HANDLE_ASSIGNED
from .transitions import SESSION_CHANNEL_ASSIGNED as _SESSION_CHANNEL_ASSIGNED
from .machine import CONNECTION_MACHINE, LINK_MACHINE, MACHINES, SESSION_MACHINE, Endpoints, Machine
from .delivery import _Delivery
from .deliveries import (STORE_COLUMNS, DeliveryTable, compact_rows, link_deliveries, store_columns, store_delivery,
                         store_values)
from .stats import (TERMINAL_OUTCOMES, TERMINAL_OUTCOMES_ORDER, DeliveryStats, Latencies, add_link_stats,
                    seconds_between)
from .stalls import AT_ONCE, IDLE_ENDS, Stall

__all__ = [
    "AT_ONCE", "CONNECTION_INPUTS", "CONNECTION_MACHINE", "CONNECTION_STATES", "CONNECTION_TRANSITIONS",
    "DeliveryStats", "DeliveryTable", "Endpoints", "IDLE_ENDS", "LINK_INPUTS", "LINK_MACHINE", "LINK_STATES",
    "LINK_TRANSITIONS", "Latencies", "MACHINES", "Machine", "SERIAL_BITS", "SERIAL_MASK", "SERIAL_MOD",
    "SESSION_INPUTS", "SESSION_MACHINE", "SESSION_STATES", "SESSION_TRANSITIONS", "SIDES", "STORE_COLUMNS", "Stall",
    "StateTracker", "TERMINAL_OUTCOMES", "TERMINAL_OUTCOMES_ORDER", "UNKNOWN", "add_link_stats", "compact_rows",
    "error_info", "grant_left", "link_deliveries", "seconds_between", "serial_add", "serial_diff",
    "serial_in_range", "serial_lt", "serial_range_len", "store_columns", "store_delivery", "store_values",
    "terminus_info",
]

_HALF = SERIAL_HALF


def __getattr__(name: str):
    """The re-exported names a compiled build takes from the rooms by ``cimport`` (C calls), which
    are then not attributes of this module: looked up in their room (PEP 562)."""
    from . import deliveries, delivery, machine, serial, stats

    for room in (serial, machine, delivery, deliveries, stats):
        if name in room.__dict__ and name in __all__ + ["_Delivery"]:
            return room.__dict__[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# what _apply_state reads beyond a delivery state's name (C integers when compiled: see state.pxd)
_K_PLAIN, _K_RECEIVED, _K_REJECTED, _K_MODIFIED, _K_DECLARED = (STATE_PLAIN, STATE_RECEIVED, STATE_REJECTED,
                                                                 STATE_MODIFIED, STATE_DECLARED)


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


class _Link:
    __slots__ = (
        "conn", "session", "index", "name", "handle", "state", "attach", "detach", "sender_dir",
        "known", "guessed", "unknown", "initial_dc", "dc", "limit", "limit_prev", "pending_credit", "got_credit",
        "available", "avail_base", "drain", "echo", "last_flow", "flows", "stall", "drain_stall", "after_stall",
        "partial", "live", "stats", "n_deliveries", "coordinator", "transfers", "terminated", "credit_lost",
        "compacted", "reordered",
    )

    def __init__(self, conn, session, index, name, known):
        self.conn = conn
        self.session = session
        self.index = index
        self.name = name
        self.handle = [None, None]
        self.state = Endpoints(LINK_MACHINE, "DETACHED" if known else UNKNOWN)
        self.attach = [None, None]
        self.detach = [None, None]
        self.sender_dir = None
        self.known = known
        self.guessed = [False, False]
        self.unknown: list[str] = []
        self.initial_dc = None
        self.dc = None
        self.limit = None
        self.limit_prev = None  # the delivery-limit before the receiver's latest flow
        self.pending_credit = None
        self.got_credit = False
        self.available = None
        self.avail_base = 0
        self.drain = False
        self.echo = False
        self.last_flow = [None, None]
        self.flows = [0, 0]
        self.stall = None
        self.drain_stall = None
        self.after_stall = None  # the last stall that ended, until the sender's next transfer
        self.partial = None
        self.live: dict[int, _Delivery] = {}  # seq -> delivery not folded yet (unsettled or settling)
        self.stats = DeliveryStats()  # the folded deliveries
        self.n_deliveries = 0
        self.coordinator = False
        self.transfers = 0
        self.terminated = None
        self.credit_lost = False  # bytes of the receiver were lost since its last flow: credit unknown
        self.compacted = 0  # deliveries of this link in the CompactStores of its session's tables
        self.reordered = False  # live is not in first-transfer order any more (see link_deliveries)

    def credit(self):
        """link-credit ``limit - dc``: unsigned 32-bit, measured from the receiver's last grant
        (``grant_left``); negative when the sender went beyond it; None when unknown (the sender's
        delivery-count is behind the receiver's: transfers the capture lost)."""
        if self.dc is None or self.limit is None:
            return None
        lf = self.last_flow[1 - self.sender_dir] if self.sender_dir is not None else None
        if lf is None or lf[1] is None:
            return serial_diff(self.limit, self.dc)
        return grant_left(self.limit, lf[1], self.dc)

    def beyond_credit(self) -> bool:
        """No credit under the receiver's latest *and* previous limit (the latest may be in flight)."""
        cr = self.credit()
        if cr is None or cr > 0:
            return False
        return self.limit_prev is None or serial_diff(self.limit_prev, self.dc) <= 0

    def note_unknown(self, what: str):
        if what not in self.unknown:
            self.unknown.append(what)


class _Session:
    __slots__ = (
        "conn", "index", "channel", "initiator", "state", "begin", "end", "known", "guessed",
        "unknown", "init_noid", "noid", "win_limit", "win_prev", "pending_iw", "win_stall", "after_win", "transfers",
        "flows",
        "handles", "links", "deliveries",
        "late_dispositions",
        "unseen_dispositions", "touch_budget",
        "terminated", "last_iw",
        "last_ow",
    )

    def __init__(self, conn, index, initiator, known):
        self.conn = conn
        self.index = index
        self.channel = [None, None]
        self.initiator = initiator
        self.state = Endpoints(SESSION_MACHINE, "UNMAPPED" if known else UNKNOWN)
        self.begin = [None, None]
        self.end = [None, None]
        self.known = known
        self.guessed = [False, False]
        self.unknown: list[str] = []
        self.init_noid = [None, None]
        self.noid = [None, None]
        self.win_limit = [None, None]  # for transfers sent by d
        self.win_prev = [None, None]  # the window limit before the receiving peer's latest begin/flow
        self.pending_iw = [None, None]
        self.win_stall = [None, None]
        self.after_win = [None, None]  # per sender: the window stall that ended last, until its next transfer
        self.transfers = [0, 0]
        self.flows = [0, 0]
        self.handles = ({}, {})  # per peer: output handle -> _Link
        self.links: list[_Link] = []
        self.deliveries = (DeliveryTable(self, 0), DeliveryTable(self, 1))  # per sending peer, not folded yet
        self.late_dispositions = 0  # disposition entries for deliveries already folded (settled earlier)
        self.touch_budget = DISPOSITION_TOUCH_BASE  # see DISPOSITION_TOUCH_BASE
        self.unseen_dispositions = 0
        self.terminated = None
        self.last_iw = [None, None]
        self.last_ow = [None, None]

    def riw(self, d):
        """remote-incoming-window of sending peer d (None if unknown): unsigned 32-bit, from the
        receiving peer's last incoming-window (:func:`grant_left`)."""
        if self.win_limit[d] is None or self.noid[d] is None:
            return None
        iw = self.last_iw[1 - d]
        if iw is None:
            return serial_diff(self.win_limit[d], self.noid[d])
        return grant_left(self.win_limit[d], iw, self.noid[d])

    def beyond_window(self, d) -> bool:
        """No window under the peer's latest *and* previous announcement (the latest may be in flight)."""
        riw = self.riw(d)
        if riw is None or riw > 0:
            return False
        return self.win_prev[d] is None or serial_diff(self.win_prev[d], self.noid[d]) <= 0

    def note_unknown(self, what: str):
        if what not in self.unknown:
            self.unknown.append(what)


class _ConnBase:
    """A connection as the TCP layer shows it, until its first AMQP byte (see _Conn).

    A connection that never carries one (a SYN alone, a scan, a TLS stream that is not read)
    stays this object for the rest of the run: its AMQP state is the class's shared, empty,
    immutable defaults below (a write to one raises, and the tracker reports it as an internal
    error: never a silent change to all)."""

    __slots__ = (
        "id", "client", "server", "syn_seen", "known_start", "lossy", "tls", "state",
        "transport_end", "transport_time", "fins", "first_ts", "first_packet", "last_ts", "last_packet",
        "seq", "tls_undecrypted", "tls_reason", "gaps",
    )

    # the AMQP state of a connection that carried no AMQP byte (a _Conn has its own)
    events = 0  # protocol headers and frames
    unknown = ()  # what could not be known
    inferred = None  # what the frames after a loss showed that the lost ones had set up
    headers = _EMPTY_PAIR
    header_keys = _EMPTY_PAIR
    sasl = False
    sasl_mechanisms = None
    sasl_mechanism = None
    sasl_hostname = None
    sasl_outcome = None
    sasl_time = None
    sasl_frames = _ZERO_PAIR
    open = _NONE_PAIR
    close = _NONE_PAIR
    sessions = ()
    links = ()
    chan = _EMPTY_MAPS
    pending = _EMPTY_MAPS
    idle = _NONE_PAIR
    idle_ref = _NONE_PAIR
    last_frame = _NONE_PAIR
    frames = _ZERO_PAIR
    heartbeats = _ZERO_PAIR
    txns = _EMPTY_MAP
    negotiation = None
    stalls = ()
    frame_counts = _EMPTY_MAPS
    placeholders = None

    def __init__(self, cid, client, server, syn_seen):
        self.id = cid
        self.client = client
        self.server = server
        self.syn_seen = syn_seen
        self.known_start = syn_seen
        self.lossy = False
        self.tls = False
        self.tls_undecrypted = None  # TLS bytes not decrypted (no key log, or records that failed)
        self.tls_reason = None  # the note that says why
        self.transport_end = None
        self.transport_time = None
        self.fins = None  # directions that sent a FIN (a set, from the first)
        self.first_ts = None
        self.first_packet = None
        self.last_ts = None
        self.last_packet = None
        # None until the first loss: [gaps client->server, gaps server->client, bytes missing c->s, s->c,
        # bytes skipped to resynchronise c->s, s->c, time of the latest loss c->s, s->c, bytes before the
        # capture c->s, s->c]
        self.gaps = None
        self.seq = 0
        self.state = _START_ENDPOINTS if syn_seen else _UNKNOWN_ENDPOINTS

    def peer(self, d):
        return self.client if d == 0 else self.server

    def note_loss(self, d: int, missing: int, skipped: int, ts, before: bool = False) -> None:
        """Bytes peer d sent were lost: ``missing`` in a gap, ``skipped`` to resynchronise, or
        (``before``) sent before the capture started."""
        g = self.gaps
        if g is None:
            g = self.gaps = [0, 0, 0, 0, 0, 0, None, None, False, False]
        if missing:
            g[d] += 1
            g[2 + d] += missing
        g[4 + d] += skipped
        g[6 + d] = ts
        if before:
            g[8 + d] = True

    def lost(self, d: int) -> bool:
        """Frames peer d sent may be missing from the capture (a gap, or a capture that did not
        see the connection start)."""
        if not self.known_start:
            return True
        g = self.gaps
        return g is not None and bool(g[d] or g[4 + d] or g[8 + d])


class _Conn(_ConnBase):
    """A connection that carried an AMQP byte (a protocol header or a frame): its AMQP state
    proper, made from the _ConnBase the connection was until then (StateTracker._amqp)."""

    __slots__ = (
        "events", "unknown", "inferred", "headers", "header_keys", "sasl", "sasl_mechanisms",
        "sasl_mechanism", "sasl_hostname", "sasl_outcome", "sasl_time", "sasl_frames", "open", "close",
        "sessions", "links", "chan", "pending", "idle", "idle_ref", "last_frame", "frames", "heartbeats",
        "txns", "negotiation", "stalls", "frame_counts", "placeholders",
    )

    def __init__(self, b: _ConnBase):
        self.id = b.id
        self.client = b.client
        self.server = b.server
        self.syn_seen = b.syn_seen
        self.known_start = b.known_start
        self.lossy = b.lossy
        self.tls = b.tls
        self.tls_undecrypted = b.tls_undecrypted
        self.tls_reason = b.tls_reason
        self.transport_end = b.transport_end
        self.transport_time = b.transport_time
        self.fins = b.fins
        self.first_ts = b.first_ts
        self.first_packet = b.first_packet
        self.last_ts = b.last_ts
        self.last_packet = b.last_packet
        self.gaps = b.gaps
        self.seq = b.seq
        self.events = 0
        self.inferred = None  # what the frames after a loss showed that the lost ones had set up (texts)
        self.unknown = ()  # what could not be known (a list from the first)
        self.state = Endpoints(CONNECTION_MACHINE, "START" if b.syn_seen else UNKNOWN)
        self.sasl = False
        self.sasl_mechanisms = None
        self.sasl_mechanism = None
        self.sasl_hostname = None
        self.sasl_outcome = None
        self.sasl_time = None
        self.negotiation = None
        self.headers = ([], [])
        self.header_keys = ([], [])
        self.sasl_frames = [0, 0]
        self.open = [None, None]
        self.close = [None, None]
        self.sessions: list[_Session] = []
        self.links: list[_Link] = []
        self.chan = ({}, {})  # per peer: outgoing channel -> _Session
        self.pending = ({}, {})  # per peer: channel of its begin awaiting the reply -> _Session
        self.idle = [None, None]  # idle-time-out (seconds) peer d must respect (announced by 1-d)
        self.idle_ref = [None, None]
        self.last_frame = [None, None]
        self.frames = [0, 0]
        self.heartbeats = [0, 0]
        self.txns: dict = {}  # txn-id bytes/hex -> _Txn
        self.stalls: list[Stall] = []
        self.frame_counts = ({}, {})  # per peer: performative name ("empty" for heartbeats) -> frames
        # None until the first placeholder: [sessions made, links made, the overflow session or None,
        # {session index: its overflow link}] (see UNKNOWN_SESSIONS_MAX)
        self.placeholders = None

    def note_unknown(self, what: str):
        if what not in self.unknown:
            if not self.unknown:
                self.unknown = []
            self.unknown.append(what)

    def note_inferred(self, what: str):
        if self.inferred is None:
            self.inferred = []
        if what not in self.inferred:
            self.inferred.append(what)


class _Txn:
    __slots__ = (
        "conn", "link", "txn_id", "global_id", "declare", "declare_outcome", "declare_error",
        "declared", "discharge", "fail", "discharge_outcome", "discharge_error", "discharged",
        "enlisted", "merged_into",
    )

    def __init__(self, conn, link):
        self.conn = conn
        self.link = link
        self.txn_id = None
        self.global_id = None
        self.declare = None  # _Delivery
        self.declare_outcome = None
        self.declare_error = None
        self.declared = None  # (ts, packet)
        self.discharge = None
        self.fail = None
        self.discharge_outcome = None
        self.discharge_error = None
        self.discharged = None
        # (link, delivery-id, how) of each delivery enlisted: ids, not the deliveries (they are folded
        # and forgotten when settled, whatever their transaction)
        self.enlisted: list = []
        self.merged_into = None  # the _Txn this one's enlisted deliveries went to (see _coordinator_outcome)


# --------------------------------------------------------------------------- tracker


class StateTracker:
    """Consumes Dissector events; keeps the protocol state of every connection."""

    def __init__(self):
        self.connections: dict[str, _Conn] = {}
        # connections of another protocol than AMQP 1.0 (an AMQP 0-9-1 / 0-10 ... protocol header in either
        # direction): taken out of ``connections`` (they are no AMQP 1.0 connection), counted and named
        self.others: dict = {}
        # connection id -> what is known of another protocol's connection: {"protocol", "headers_client",
        # "headers_server", "bytes_client", "bytes_server", "time", "packet"} (the first header's); kept
        # here, not on every connection (a half-open connection stays small)
        self.other_info: dict = {}
        self.stalls: list[Stall] = []
        self.violations: list[dict] = []
        self.frame_errors: list[dict] = []
        self.transactions: list[_Txn] = []
        self.first_ts = None
        self.last_ts = None
        self.end_ts = None
        self.finished = False
        self.internal_errors: list[str] = []  # bugs met while analysing (each also a violation row)
        self._seq = 0  # deliveries seen
        self._settling: deque = deque()  # deliveries settled by one peer, folded FOLD_LAG settlements later
        self.fold_lag = FOLD_LAG
        # (connection id, granting peer) -> credit / window violations waiting for that peer's next
        # frame: a gap before it means the grant they rest on may have been lost (see _hold)
        self._held: dict = {}
        # (connection, kind, side, message, origin) -> [rows like it, the row adding up those past
        # REPEAT_KEEP or None, its last packet]
        self._repeats: dict = {}
        self._placeholders = 0  # placeholder sessions and links made (see PLACEHOLDERS_MAX)

    # -- input ----------------------------------------------------------------

    def feed(self, event) -> None:
        try:
            cls = type(event)
            if cls is Frame:
                self._frame(event)
            elif cls is ProtocolHeader:
                self._header(event)
            elif cls is StreamOpened:
                self._opened(event)
            elif cls is StreamClosed:
                self._closed(event)
            elif cls is StreamNote:
                self._stream_note(event)
            elif cls is OtherProtocolNote:
                self._other_note(event)
        except Exception as e:  # a bug: reported (and the run ends with exit 1), never fatal for the rest
            self.internal_errors.append(f"{type(event).__name__} at packet {getattr(event, 'packet', None)}: "
                                        f"{type(e).__name__}: {e}")
            self.violations.append({
                "connection": getattr(event, "conn", None), "packet": getattr(event, "packet", None),
                "time": getattr(event, "ts", None), "channel": getattr(event, "channel", None),
                "kind": "internal-error", "severity": "error",
                "message": f"analyzer error on {type(event).__name__}: {type(e).__name__}: {e}",
                "side": None, "link": None, "handle": None, "delivery_id": None, "origin": "analyzer",
            })

    def finish(self, end_ts: float | None = None) -> None:
        """End of the capture: remember its end time and check trailing idle gaps."""
        if end_ts is None:
            end_ts = self.last_ts
        self.end_ts = end_ts
        if self.finished:
            return
        self.finished = True
        # no frame follows the capture's end: the settled deliveries waiting out the fold lag are final
        q = self._settling
        while q:
            x = q.popleft()
            if not x.folded and self.fold_lag is not None:
                self._fold(x)
        for c in self.connections.values():
            if self._held:  # no gap came after them: the grants they rest on were all seen
                self._release(c, 0)
                self._release(c, 1)
            end = c.transport_time if c.transport_time is not None else end_ts
            if end is None:
                continue
            for d in (0, 1):
                t = c.idle[d]
                ref = c.idle_ref[d]
                if not t or ref is None or c.close[d] is not None:
                    continue
                if end - ref > t:
                    self._violation(
                        c, d, None, "idle-timeout", "warn",
                        f"no frame from the {SIDES[d]} for {(end - ref) / NS:.3f} s up to the end of the "
                        f"{'connection' if c.transport_time is not None else 'capture'}; the {SIDES[1 - d]}'s "
                        f"idle-time-out is {t / 1_000_000:g} ms",
                        ts=end, packet=c.last_packet,
                    )

    # -- folding settled deliveries ------------------------------------------------------

    def _settled(self, dlv) -> None:
        """``dlv`` was settled by a peer.  Once complete and settled by both peers it is folded at
        once; settled by one, it is folded ``fold_lag`` settlements later, so a disposition of the
        other peer that crossed on the wire still finds it (memory stays bounded either way)."""
        link = dlv.link
        if dlv.folded or link.partial is dlv or self.fold_lag is None:  # None: never fold (tests' oracle)
            return
        if dlv.snd_settled is not None and dlv.rcv_settled is not None:
            self._fold(dlv)
            return
        q = self._settling
        q.append(dlv)
        while len(q) > self.fold_lag:
            x = q.popleft()
            if not x.folded:
                self._fold(x)

    def fold_lagged(self, lag: int, popped: int, k_hi, k_mid, k_lo) -> int:
        """(``-j``: see :meth:`~amqp_dissect.pipelines.parallel.FlowWorker._folds`) Take what the
        lag queue holds beyond ``lag`` settlements, oldest first, folding each delivery not
        folded yet; each fold gets the key ``(-1, 0, its settlement's position)`` appended to
        ``k_hi``, ``k_mid``, ``k_lo``, the position counting from ``popped`` (settlements taken
        before).  Returns ``popped`` plus the settlements taken."""
        q = self._settling
        while len(q) > lag:
            x = q.popleft()
            if not x.folded:
                self._fold(x)
                k_hi.append(-1)
                k_mid.append(0)
                k_lo.append(popped)
            popped += 1
        return popped

    def _fold(self, dlv) -> None:
        """Count ``dlv`` into its link's :class:`DeliveryStats` and forget it."""
        dlv.folded = True
        link = dlv.link
        live = link.live
        live.pop(dlv.seq, None)
        if not live:  # a dict keeps the room it once needed: give it back (a long capture has many links)
            live.clear()
        s = dlv.session
        sender = dlv.direction
        table = s.deliveries[sender]
        table.forget(dlv)
        self._on_fold(dlv)
        link.stats.add(dlv)
        dlv.payload = None

    def _on_fold(self, dlv) -> None:
        """Hook: ``dlv`` is final and about to be forgotten (the Analyzer makes its table row)."""

    # -- helpers ----------------------------------------------------------------

    def _amqp(self, b) -> _Conn:
        """The connection's first protocol header or frame: it becomes a _Conn, with AMQP state."""
        c = _Conn(b)
        self.connections[c.id] = c
        return c

    def _conn(self, ev, client=None, server=None, syn_seen=False):
        c = self.connections.get(ev.conn)
        if c is None and self.others:
            c = self.others.get(ev.conn)
        if c is None:
            if client is None:
                d = getattr(ev, "direction", 0)
                src, dst = getattr(ev, "src", None), getattr(ev, "dst", None)
                client, server = (src, dst) if d != 1 else (dst, src)
            c = _ConnBase(ev.conn, client, server, syn_seen)
            c.seq = len(self.connections)
            self.connections[ev.conn] = c
        ts = getattr(ev, "ts", None)
        pkt = getattr(ev, "packet", None)
        if ts is not None:
            if c.first_ts is None:
                c.first_ts = ts
                c.first_packet = pkt
            c.last_ts = ts
            c.last_packet = pkt if pkt is not None else c.last_packet
            if self.first_ts is None:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        return c

    def _violation(self, c, d, f, kind, severity, message, channel=None, link=None, handle=None,
                   delivery_id=None, ts=None, packet=None, origin="state"):
        key = (c.id, kind, d, message, origin)
        rep = self._repeats.get(key)
        if rep is None:
            if len(self._repeats) >= VIOLATIONS_LISTED:
                self._violation_past_listed(c, d, f, kind, severity, message, channel, ts, packet, origin)
                return
            self._repeats[key] = [1, None, None]
        elif rep[0] < REPEAT_KEEP:
            rep[0] += 1
        else:  # a flood of this finding: one row adds up those past REPEAT_KEEP
            rep[0] += 1
            row = rep[1]
            last = packet if packet is not None else (f.packet if f is not None else None)
            rep[2] = last
            if row is None:
                self._violation_row(c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts,
                                    packet, origin)
                row = rep[1] = self.violations[-1]
            row["count"] = rep[0] - REPEAT_KEEP
            row["message"] = (f"{message} [{rep[0] - REPEAT_KEEP:,} more like it after the first {REPEAT_KEEP} "
                              f"(this packet to packet {last}), added up in this row]")
            return
        self._violation_row(c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts, packet, origin)

    def _violation_past_listed(self, c, d, f, kind, severity, message, channel, ts, packet, origin):
        """A new finding once VIOLATIONS_LISTED are listed: added up in the row of its connection,
        kind, side and origin (made by the first such finding, whose message it quotes)."""
        key = (c.id, kind, d, origin)
        rep = self._repeats.get(key)
        last = packet if packet is not None else (f.packet if f is not None else None)
        if rep is None:
            self._violation_row(c, d, f, kind, severity, message, channel, None, None, None, ts, packet, origin)
            rep = self._repeats[key] = [0, self.violations[-1], message]
        rep[0] += 1
        rep[1]["count"] = rep[0]
        rep[1]["message"] = (f"{rep[0]:,} {kind} findings from this packet to packet {last}, not listed one by one: "
                             f"the capture's first {VIOLATIONS_LISTED:,} distinct findings are; the first of them: "
                             f"{rep[2]}")

    def _violation_row(self, c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts, packet,
                       origin):
        self.violations.append({
            "connection": c.id,
            "packet": packet if packet is not None else (f.packet if f is not None else None),
            "time": ts if ts is not None else (f.ts if f is not None else None),
            "channel": channel if channel is not None else (f.channel if f is not None else None),
            "kind": kind,
            "severity": severity,
            "message": message,
            "side": SIDES[d] if d in (0, 1) else None,
            "link": link,
            "handle": handle,
            "delivery_id": delivery_id,
            "origin": origin,
            "count": 1,
        })

    def _hold(self, c, g, d, f, kind, message, link=None, handle=None, delivery_id=None):
        """A credit / window violation of sender ``d``: it rests on the latest grant of peer ``g``,
        so it waits for ``g``'s next frame (or FIN, or the capture's end).  A TCP gap of ``g``
        noticed before that (the gap is only seen at the next segment) may have held a flow granting
        more: then the violation came from state the gap made unknown and is dropped (:meth:`_drop`)."""
        n = len(self.violations)
        self._violation(c, d, f, kind, "warn", message, link=link, handle=handle, delivery_id=delivery_id)
        if len(self.violations) != n + 1:  # (not a new row of its own: nothing to hold)
            return
        key = (c.id, g)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = []
        if len(held) < HOLD_MAX:
            held.append(self.violations.pop())

    def _release(self, c, g) -> None:
        held = self._held.pop((c.id, g), None)
        if held:
            self.violations.extend(held)

    def _drop(self, c, g) -> None:
        held = self._held.pop((c.id, g), None)
        if held:
            c.note_unknown(f"credit / window checks before a gap of the {SIDES[g]}")

    def _error(self, c, d, f, scope, err, s=None, link=None):
        row = {
            "connection": c.id,
            "session": s.index if s is not None else None,
            "channel": f.channel if scope != "connection" else None,
            "link": link.name if link is not None else None,
            "handle": link.handle[d] if link is not None else None,
            "delivery_id": None,
            "scope": scope,
            "condition": err["condition"],
            "description": err["description"],
            "info": err["info"],
            "packet": f.packet,
            "time": f.ts,
            "side": SIDES[d],
            "source": "frame",
            "count": None,
        }
        self.frame_errors.append(row)

    def _strict(self, c, s=None) -> bool:
        """May an unknown channel / handle / delivery be called a violation here?"""
        if c.lossy or not c.known_start:
            return False
        return s is None or s.known

    # -- TCP / stream events ------------------------------------------------------

    def _opened(self, ev: StreamOpened):
        c = self.connections.get(ev.conn)
        if c is None:
            c = self._conn(ev, ev.client, ev.server, ev.syn_seen)
        else:
            c.client, c.server = ev.client, ev.server
            self._conn(ev)

    def _closed(self, ev: StreamClosed):
        c = self.connections.get(ev.conn)
        if c is None and self.others:
            c = self.others.get(ev.conn)
        if c is None:
            return
        self._conn(ev)
        if self._held:  # a FIN (or the end) of that side with no gap before it: its grants were all seen
            for g in ((ev.direction,) if ev.kind == "fin" and ev.direction in (0, 1) else (0, 1)):
                self._release(c, g)
        if ev.kind == "fin":
            if c.fins is None:
                c.fins = set()
            c.fins.add(ev.direction)
            if len(c.fins) < 2:
                return
        elif ev.kind == "end":
            return  # end of the capture, not of the connection
        if c.transport_end is None:
            c.transport_end = "fin" if ev.kind == "fin" else ev.kind
            c.transport_time = ev.ts
            if ev.kind in ("fin", "rst"):
                for st in c.stalls:
                    st.close(ev.ts, ev.packet, "transport")
                for s in c.sessions:
                    if s.terminated is None:
                        s.terminated = "transport"
                for link in c.links:
                    if link.terminated is None:
                        link.terminated = "transport"

    def _stream_note(self, ev: StreamNote):
        c = self._conn(ev)
        group = ev.note.group
        if group in ("reassembly", "framing", "sequence"):
            c.lossy = True  # a gap, a resynchronisation or a mid-stream start: frames may be missing
            if group == "reassembly" and ev.skipped:  # a TCP gap: ev.skipped bytes never captured
                c.note_loss(ev.direction, ev.skipped, 0, ev.ts)
                self._lost_grants(c, ev.direction)
                self._drop(c, ev.direction)
            elif group == "framing" and ev.skipped:  # bytes skipped to find the next frame header,
                c.note_loss(ev.direction, 0, ev.skipped, ev.ts)  # or held by a frame never completed
                self._drop(c, ev.direction)
            if group == "framing" and ev.note.severity == "error":  # a frame header that cannot be
                msg = ev.note.message
                self._violation(c, ev.direction, None, "frame-size" if "frame size" in msg else "framing",
                                "error", msg, ts=ev.ts, packet=ev.packet, channel=None, origin="framing")
            elif group == "sequence" and ev.direction is not None:  # the direction started mid-stream
                c.note_loss(ev.direction, 0, 0, ev.ts, before=True)
                self._lost_grants(c, ev.direction)
        elif group == "roles":  # no SYN and no evidence of which side is the client (dissect.py)
            if type(c) is not _Conn:
                c = self._amqp(c)
            c.note_unknown("client/server roles")
        elif group == "role-evidence":  # no SYN: the first bytes said who the client is (dissect.py)
            if type(c) is not _Conn:
                c = self._amqp(c)
            c.note_inferred(ev.note.message.split(":", 1)[0])
        if "TLS" in ev.note.message:
            c.tls = True
        if ev.note.group == "tls" and ev.skipped:  # encrypted bytes that could not be read
            c.tls_undecrypted = (c.tls_undecrypted or 0) + ev.skipped
            c.tls_reason = ev.note.message

    @staticmethod
    def _lost_grants(c, g):
        """Bytes peer ``g`` sent were lost: a flow among them may have granted link credit or
        session window to the other peer, so those limits are unknown (no credit or window
        violation, no stall) until ``g``'s next flow says them again.  (Lost transfers of ``g``
        only make its counts lag, which can hide a violation but never invent one.)"""
        for link in c.links:
            if link.sender_dir != g and link.detach[0] is None and link.detach[1] is None:
                # g is the receiver, or the roles are not known yet
                link.credit_lost = True
                link.note_unknown("link-credit after a gap")
        for s in c.sessions:
            if s.win_limit[1 - g] is not None:
                s.win_limit[1 - g] = None
                s.win_prev[1 - g] = None
                s.note_unknown("incoming-window after a gap")

    # -- protocol headers --------------------------------------------------------------

    def _other_header(self, h: ProtocolHeader):
        """A protocol header of another protocol than AMQP 1.0 (AMQP 0-9-1, 0-10, ...), or any header
        on such a connection: it is that protocol's connection, not decoded (the framing layer skips its
        bytes), no AMQP 1.0 connection: moved to ``others``."""
        c = self._conn(h)
        other = self.other_info.get(c.id)
        if other is None:
            if self._spoke_amqp10(c):
                # after AMQP 1.0 frames: it stays an AMQP 1.0 connection, whose rest is not decoded
                c.headers[h.direction].append(h.name)
                self._violation(c, h.direction, None, "protocol-header", "warn",
                                f"{h.name} protocol header after AMQP 1.0 frames: the rest of the connection "
                                "is not decoded", ts=h.ts, packet=h.packet, origin="framing", channel=None)
                return
            # (the AMQP 1.0 headers before it stay listed: a 1.0 header answered by another protocol's)
            other = self.other_info[c.id] = {
                "protocol": h.name, "headers_client": list(c.headers[0]), "headers_server": list(c.headers[1]),
                "bytes_client": None, "bytes_server": None, "time": h.ts, "packet": h.packet}
            self.connections.pop(c.id, None)
            self.others[c.id] = c
        other["headers_client" if h.direction == 0 else "headers_server"].append(h.name)

    @staticmethod
    def _spoke_amqp10(c) -> bool:
        """The connection carried AMQP 1.0 or SASL frames (a protocol header alone is not enough: a
        peer that answers it with another protocol's header refuses it)."""
        return type(c) is _Conn and bool(c.frames[0] or c.frames[1] or c.sasl_frames[0] or c.sasl_frames[1]
                                         or c.sessions or c.links)

    def _other_note(self, ev: OtherProtocolNote):
        c = self._conn(ev)
        other = self.other_info.get(c.id)
        if other is None and self._spoke_amqp10(c):
            return  # an AMQP 1.0 connection with another protocol's header in it (a violation, _other_header)
        if other is None:  # (the framing layer says a header first)
            other = self.other_info[c.id] = {"protocol": ev.protocol, "headers_client": [], "headers_server": [],
                                             "time": ev.ts, "packet": ev.packet}
            self.connections.pop(c.id, None)
            self.others[c.id] = c
        other["bytes_client"], other["bytes_server"] = ev.bytes

    def _header(self, h: ProtocolHeader):
        c = self._conn(h)
        if h.is_other or (self.other_info and c.id in self.other_info):
            self._other_header(h)
            return
        if type(c) is not _Conn:
            c = self._amqp(c)
        if c.events == 0 and not c.lossy and h.direction == 0:
            # the client's header first: nothing came before it (the server answers it); a server's
            # header first leaves the client's start unseen
            c.known_start = True
            if c.state == [UNKNOWN, UNKNOWN]:
                c.state = Endpoints(CONNECTION_MACHINE, "START")
        c.events += 1
        d = h.direction
        for n in h.notes:
            if n.severity in ("warn", "error"):
                self._violation(c, d, None, "protocol-header", n.severity, n.message, ts=h.ts, packet=h.packet,
                                origin="framing", channel=None)
        key = (h.protocol_id, tuple(h.version), h.name)  # (the name: for the notes; it follows from the rest)
        c.headers[d].append(h.name)
        c.header_keys[d].append(key)
        k = len(c.header_keys[d]) - 1
        other = c.header_keys[1 - d][k] if k < len(c.header_keys[1 - d]) else None
        mismatch = other is not None and other != key
        g = c.gaps
        if mismatch and g is not None and (c.lost(d) or c.lost(1 - d)):
            # headers were lost: align with a later header of the peer that this one answers (d's
            # lost headers), or take the peer's matching header as lost (the peer's answer missing)
            theirs = c.header_keys[1 - d]
            j = next((i for i in range(k + 1, len(theirs)) if theirs[i] == key), None)
            if j is None and c.lost(d):
                j = k + 1  # d's header that answered the peer's k-th is the one lost
            if j is not None and c.lost(d):
                for i in range(k, j):
                    c.header_keys[d].insert(i, theirs[i])
                    c.note_inferred(f"the {SIDES[d]}'s protocol header {theirs[i][2]} was lost "
                                    f"(from its {h.name} answering the {SIDES[1 - d]}'s)")
                mismatch = False
                other = key
            elif c.lost(1 - d):
                theirs.insert(k, key)
                c.note_inferred(f"the {SIDES[1 - d]}'s protocol header {h.name} was lost "
                                f"(the {SIDES[d]}'s {h.name} is answered by what follows)")
                mismatch = False
                other = key
        if mismatch:
            c.negotiation = (f"{SIDES[1 - d]} sent {other[2]}, {SIDES[d]} answered {h.name}")
            self._violation(c, d, None, "protocol-header", "warn",
                            f"protocol header mismatch: {c.negotiation}", ts=h.ts, packet=h.packet)
        if h.protocol_id == PROTO_TLS:
            c.tls = True
        if h.protocol_id == PROTO_SASL:
            c.sasl = True
        if mismatch and PROTO_AMQP in (h.protocol_id, other[0]):
            # a header refused by the peer's own (Figure 2.8: protocol id rejected): both endpoints end
            self._conn_step(c, d, "S:HDR!=R:HDR", "R:HDR!=S:HDR", None, ts=h.ts, packet=h.packet)
        elif h.protocol_id == PROTO_AMQP and (other is None or other[0] == PROTO_AMQP):
            s_in = "S:HDR!=R:HDR" if mismatch else "S:HDR"
            r_in = "R:HDR!=S:HDR" if mismatch else "R:HDR"
            self._conn_step(c, d, s_in, r_in, None, ts=h.ts, packet=h.packet)

    # -- state steps -------------------------------------------------------------

    def _lossy_step(self, c, ep, d, s_in, r_in, what, where):
        """``ep.advance(d, s_in, r_in)`` on a connection that lost bytes: a step the table refuses is
        first explained by frames the capture lost (from a direction with a gap), which are taken
        and said ("inferred"); only what no lost frame explains is a violation."""
        saved = (list(ep.codes), list(ep.queue[0]), list(ep.queue[1]))
        msgs = ep.advance(d, s_in, r_in)
        if not msgs:
            return msgs
        g = c.gaps
        senders = [p for p in (0, 1) if c.lost(p)]
        ep.codes[0], ep.codes[1] = saved[0]
        ep.queue[0][:] = saved[1]
        ep.queue[1][:] = saved[2]
        path = ep.recover(d, s_in, r_in, senders) if senders else None
        if path:
            for p, name in path:
                c.note_inferred(f"the {SIDES[p]}'s {name} of {where} was lost (from the {SIDES[d]}'s {what})")
        return ep.advance(d, s_in, r_in)

    def _conn_step(self, c, d, s_in, r_in, f, ts=None, packet=None, what=None):
        if c.gaps is not None:
            msgs = self._lossy_step(c, c.state, d, s_in, r_in, what or s_in[2:].lower(), "the connection")
        else:
            msgs = c.state.advance(d, s_in, r_in)
        if msgs:
            self._violation(c, d, f, "state", "warn",
                            f"{what or s_in[2:].lower()} from the {SIDES[d]}: " + "; ".join(msgs),
                            ts=ts, packet=packet)

    def _session_step(self, s, d, x, f, what):
        c = s.conn
        if c.gaps is not None:
            msgs = self._lossy_step(c, s.state, d, "S:" + x, "R:" + ("END" if x == "END(error)" else x), what,
                                    f"session {s.index}")
        elif x == "FRAME":
            msgs = s.state.frame(d)
        else:
            msgs = s.state.advance(d, "S:" + x, "R:" + ("END" if x == "END(error)" else x))
        if msgs:
            self._violation(c, d, f, "state", "warn", f"{what} from the {SIDES[d]} on session {s.index}: "
                            + "; ".join(msgs))

    def _link_step(self, link, d, x, f, what):
        c = link.conn
        if c.gaps is not None:
            msgs = self._lossy_step(c, link.state, d, "S:" + x, "R:" + x, what,
                                    f"link {link.name!r}" if link.name is not None else f"link {link.index}")
        else:
            msgs = link.state.frame(d) if x == "FRAME" else link.state.advance(d, "S:" + x, "R:" + x)
        if msgs:
            self._violation(c, d, f, "state", "warn",
                            f"{what} from the {SIDES[d]} on link {link.name!r}: " + "; ".join(msgs),
                            link=link.name, handle=link.handle[d])

    # -- frames ------------------------------------------------------------------

    def _frame(self, f: Frame):
        c0 = self.connections.get(f.conn)
        ts = f.ts
        if type(c0) is not _Conn:  # the connection's first AMQP byte (or first event)
            c = self._amqp(self._conn(f))
            if not c.syn_seen:
                c.note_unknown("connection start")
        elif ts is None or c0.first_ts is None:
            c = self._conn(f)
        else:  # _conn's bookkeeping, inlined for the common case
            c = c0
            c.last_ts = ts
            if f.packet is not None:
                c.last_packet = f.packet
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        c.events += 1
        d = f.direction
        if self._held:  # d's frame came with no gap before it: the grants of d were all seen
            self._release(c, d)
        if f.notes:
            for n in f.notes:
                if n.severity in ("warn", "error") and n.group in ("protocol", "malformed", "budget"):
                    kind = "frame-size" if "max-frame-size" in n.message else n.group
                    self._violation(c, d, f, kind, n.severity, n.message, origin="framing")
        name = f.pname  # None: a heartbeat, or a body that is not a known performative
        heartbeat = name is None and f.type != FRAME_SASL and f.size == f.doff * 4
        # the hot performatives are read from f.fields; the others from the decoded Composite
        p = None if name in _FIELD_HANDLERS else f.performative
        key = name or ("empty" if heartbeat else "(undecoded)")
        fc = c.frame_counts[d]
        fc[key] = fc.get(key, 0) + 1
        if f.type == FRAME_SASL:
            c.sasl_frames[d] += 1
            if name is not None:
                self._sasl(c, d, f, p, name)
            return
        c.frames[d] += 1
        # idle time-out: frames sent by d must come within the idle-time-out the peer announced
        t = c.idle[d]
        ref = c.idle_ref[d]
        if t and ref is not None and c.close[d] is None and f.ts - ref > t and (
                c.gaps is None or c.gaps[6 + d] is None or c.gaps[6 + d] < ref):  # (a frame may have been lost)
            self._violation(c, d, f, "idle-timeout", "warn",
                            f"no frame from the {SIDES[d]} for {(f.ts - ref) / NS:.3f} s; the {SIDES[1 - d]}'s "
                            f"idle-time-out is {t / 1_000_000:g} ms")
        c.idle_ref[d] = f.ts
        c.last_frame[d] = f.ts
        if heartbeat:
            c.heartbeats[d] += 1
        level = _CONN_LEVEL.get(name, 0)  # (one look-up, not two string compares per frame)
        if level == 1:
            self._conn_step(c, d, "S:OPEN", "R:OPEN", f)
            self._open(c, d, f, p)
        elif level == 2:
            err = error_info(p.field("error"))
            self._conn_step(c, d, "S:CLOSE(error)" if err else "S:CLOSE", "R:CLOSE", f, what="close")
            self._close(c, d, f, err)
        else:
            if c.gaps is not None:
                msgs = self._lossy_step(c, c.state, d, "S:FRAME", "R:FRAME", name or "frame", "the connection")
            else:
                msgs = c.state.frame(d)
            if msgs:
                self._violation(c, d, f, "state", "warn",
                                f"{name or ('empty frame' if f.kind == 'heartbeat' else 'frame')} from the "
                                f"{SIDES[d]}: " + "; ".join(msgs))
            handlers = _HANDLERS  # (a typed dict when compiled: a C look-up)
            handler = handlers.get(name)
            if handler is None:
                return
            # the hot three called directly (a typed call when compiled), unless a test replaced them
            if handler is _H_TRANSFER:
                self._transfer(c, d, f, p)
            elif handler is _H_DISPOSITION:
                self._disposition(c, d, f, p)
            elif handler is _H_FLOW:
                self._flow(c, d, f, p)
            else:
                handler(self, c, d, f, p)

    def _sasl(self, c, d, f, p, name):
        c.sasl = True
        if name == "sasl-mechanisms":
            c.sasl_mechanisms = _symbols(p.field("sasl-server-mechanisms"))
        elif name == "sasl-init":
            m = p.field("mechanism")
            c.sasl_mechanism = str(m) if isinstance(m, str) else _plain(m)
            c.sasl_hostname = _str(p.field("hostname"))
        elif name == "sasl-outcome":
            c.sasl_outcome = _uint(p.field("code"), 0xFF)
            c.sasl_time = f.ts

    def _open(self, c, d, f, p):
        idle = _uint(p.field("idle-time-out"))
        info = {
            "time": f.ts,
            "packet": f.packet,
            "container_id": _str(p.field("container-id")),
            "hostname": _str(p.field("hostname")),
            "max_frame_size": _plain(p.effective("max-frame-size")),
            "max_frame_size_default": p.is_default("max-frame-size"),
            "channel_max": _plain(p.effective("channel-max")),
            "channel_max_default": p.is_default("channel-max"),
            "idle_time_out": idle,
            "offered_capabilities": _symbols(p.field("offered-capabilities")),
            "desired_capabilities": _symbols(p.field("desired-capabilities")),
            "properties": _plain(p.field("properties")),
        }
        if c.open[d] is not None:
            self._violation(c, d, f, "state", "warn", f"second open from the {SIDES[d]}")
        c.open[d] = info
        # d announced idle-time-out: the other peer (1-d) must send at least that often from now on
        if idle:
            c.idle[1 - d] = idle * 1_000_000  # (milliseconds: kept in nanoseconds, as every time)
            c.idle_ref[1 - d] = f.ts

    def _close(self, c, d, f, err):
        if c.close[d] is None:
            c.close[d] = {"time": f.ts, "packet": f.packet, "error": err}
        if err:
            self._error(c, d, f, "connection", err)
        for st in c.stalls:
            st.close(f.ts, f.packet, "close")
        for s in c.sessions:
            if s.terminated is None:
                s.terminated = "close"
        for link in c.links:
            if link.terminated is None:
                link.terminated = "close"

    # -- sessions ------------------------------------------------------------------

    def _new_session(self, c, initiator, known) -> _Session:
        s = _Session(c, len(c.sessions), initiator, known)
        c.sessions.append(s)
        return s

    def _session_for(self, c, d, f, what) -> _Session:
        ch = f.channel
        chans = c.chan[d]  # (a typed dict when compiled: a C look-up)
        s = chans.get(ch)
        if s is not None:
            return s
        ph = c.placeholders
        if ph is None:
            ph = c.placeholders = [0, 0, None, {}]
        if ph[0] >= UNKNOWN_SESSIONS_MAX or self._placeholders >= PLACEHOLDERS_MAX:
            return self._overflow_session(c, d, f, what, ph)
        if self._strict(c):
            self._violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on channel {ch}: no begin from the {SIDES[d]} on that channel")
        pend = c.pending[1 - d]
        if pend:
            # the peer's begin is waiting for its answer: d's begin that answered it was lost (the one on
            # the same channel number, else the only one waiting)
            s = pend.get(ch)
            if s is None and len(pend) == 1:
                s = next(iter(pend.values()))
            if s is not None:
                del pend[s.channel[1 - d]]
                s.channel[d] = ch
                c.chan[d][ch] = s
                s.note_unknown(f"begin ({SIDES[d]})")
                c.note_inferred(f"session {s.index}: the {SIDES[d]}'s begin on channel {ch} (from its {what}), "
                                f"answering the {SIDES[1 - d]}'s begin on channel {s.channel[1 - d]}")
                self._session_step(s, d, "BEGIN", f, what)
                return s
        s = self._new_session(c, None, False)
        ph[0] += 1
        self._placeholders += 1
        s.note_unknown("begin")
        s.channel[d] = ch
        c.chan[d][ch] = s
        if ch not in c.chan[1 - d] and ch not in c.pending[1 - d]:
            s.channel[1 - d] = ch
            c.chan[1 - d][ch] = s
            s.guessed[1 - d] = True
            s.note_unknown("channel-mapping-guessed")
        return s

    def _overflow_session(self, c, d, f, what, ph) -> _Session:
        """A frame on a channel without begin past the cap of placeholder sessions: the connection's
        one overflow session (not mapped to any channel number), made with a note."""
        s = ph[2]
        if s is None:
            s = ph[2] = self._new_session(c, None, False)
            s.note_unknown("begin")
            s.note_unknown("channel")
            cap = (f"{UNKNOWN_SESSIONS_MAX} per connection" if ph[0] >= UNKNOWN_SESSIONS_MAX
                   else f"{PLACEHOLDERS_MAX} sessions and links in all")
            c.note_unknown(f"sessions on channels without begin beyond the cap ({cap}): merged into session "
                           f"{s.index}")
            self._violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on channel {f.channel}: more channels without begin than "
                            f"the cap ({cap}); frames on such channels from now on go to session {s.index}, "
                            f"which stands for them all")
        elif self._strict(c):
            self._violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on a channel without begin, beyond the cap (counted in "
                            f"session {s.index})")
        return s

    def _check_channel_max(self, c, d, f):
        peer = c.open[1 - d]
        if peer is not None and isinstance(peer["channel_max"], int) and f.channel > peer["channel_max"]:
            self._violation(c, d, f, "channel-max", "warn",
                            f"channel {f.channel} beyond the {SIDES[1 - d]}'s channel-max {peer['channel_max']}")

    def _begin(self, c, d, f, p):
        ch = f.channel
        rc = p.field("remote-channel")
        rc = _ushort(rc)
        self._check_channel_max(c, d, f)
        old = c.chan[d].get(ch)
        g = c.gaps
        if (old is not None and old.state[d] in _SESSION_CHANNEL_ASSIGNED and not (old.guessed[d] and old.begin[d] is None)
                and c.lost(d)):
            # d lost bytes: its end of the old session was among them
            before = old.state[d]
            old.state.advance(d, "S:END", "R:END")
            if old.state[d] != before:
                c.note_inferred(f"the {SIDES[d]}'s end of session {old.index} was lost "
                                f"(from its begin on the same channel {ch})")
                if old.terminated is None:
                    old.terminated = "end (lost)"
        if old is not None and old.state[d] in _SESSION_CHANNEL_ASSIGNED and not (
                old.guessed[d] and old.begin[d] is None):
            self._violation(c, d, f, "channel-in-use", "warn",
                            f"begin from the {SIDES[d]} on channel {ch}, which is still in use by session {old.index}")
        if old is not None and old.guessed[d]:
            old.channel[d] = None
        s = None
        if rc is None:
            s = self._new_session(c, d, True)
            c.pending[d][ch] = s
        else:
            s = c.pending[1 - d].pop(rc, None)
            if s is None:
                cand = c.chan[1 - d].get(rc)
                if cand is not None and cand.begin[d] is None and cand.channel[d] in (None, ch) and (
                        not cand.known or cand.guessed[d]):
                    s = cand
                    if s.channel[d] is not None and c.chan[d].get(s.channel[d]) is s and s.channel[d] != ch:
                        del c.chan[d][s.channel[d]]
                else:
                    if self._strict(c):
                        self._violation(c, d, f, "unknown-channel", "warn",
                                        f"begin from the {SIDES[d]} answers remote-channel {rc}: "
                                        f"no begin from the {SIDES[1 - d]} on that channel is waiting")
                    s = self._new_session(c, 1 - d, False)
                    s.channel[1 - d] = rc
                    c.chan[1 - d][rc] = s
                    s.note_unknown(f"begin ({SIDES[1 - d]})")
            s.guessed[d] = False
            if s.initiator is None:
                s.initiator = 1 - d
        s.channel[d] = ch
        c.chan[d][ch] = s
        noid = _uint(p.field("next-outgoing-id"))
        iw = _uint(p.field("incoming-window"))
        ow = _uint(p.field("outgoing-window"))
        s.begin[d] = {
            "time": f.ts,
            "packet": f.packet,
            "remote_channel": rc,
            "next_outgoing_id": noid,
            "incoming_window": iw,
            "outgoing_window": ow,
            "handle_max": _plain(p.effective("handle-max")),
            "handle_max_default": p.is_default("handle-max"),
            "offered_capabilities": _symbols(p.field("offered-capabilities")),
            "desired_capabilities": _symbols(p.field("desired-capabilities")),
            "properties": _plain(p.field("properties")),
        }
        s.last_iw[d] = iw
        s.last_ow[d] = ow
        if noid is not None:
            s.init_noid[d] = noid
            s.noid[d] = noid
            if s.pending_iw[d] is not None and s.win_limit[d] is None:
                s.win_limit[d] = serial_add(noid, s.pending_iw[d])
        if iw is not None:
            self._window(s, 1 - d, None, iw, f, from_begin=True)
        self._session_step(s, d, "BEGIN", f, "begin")

    def _end(self, c, d, f, p):
        s = self._session_for(c, d, f, "end")
        err = error_info(p.field("error"))
        first = s.end[0] is None and s.end[1] is None
        if s.end[d] is None:
            s.end[d] = {"time": f.ts, "packet": f.packet, "error": err}
        self._session_step(s, d, "END(error)" if err else "END", f, "end")
        if err:
            self._error(c, d, f, "session", err, s=s)
        if first:
            for st in c.stalls:
                if st.session is s:
                    st.close(f.ts, f.packet, "end")
            if s.terminated is None:
                s.terminated = "end"
            for link in s.links:
                if link.terminated is None:
                    link.terminated = "end"
        for e in (0, 1):
            if c.pending[e].get(s.channel[e]) is s:
                del c.pending[e][s.channel[e]]  # ended before the begin was answered

    def _window(self, s, sender, nii, iw, f, from_begin=False):
        """The receiving peer (1-sender) announced next-incoming-id / incoming-window."""
        base = nii if nii is not None else s.init_noid[sender]
        if base is None:
            s.pending_iw[sender] = iw
            return
        s.win_prev[sender] = s.win_limit[sender]
        s.win_limit[sender] = serial_add(base, iw)
        riw = s.riw(sender)
        st = s.win_stall[sender]
        if riw is None:
            return
        if st is not None and riw > 0:
            st.close(f.ts, f.packet, "flow")
            s.win_stall[sender] = None
        elif st is None and riw <= 0 and not from_begin and s.transfers[sender] > 0:
            self._open_stall(s.conn, s, None, sender, "session-window", f)

    def _open_stall(self, c, s, link, d, kind, f) -> Stall:
        # a delivery still being sent when the link-credit ran out (it used the last credit, or the
        # receiver lowered it meanwhile): the sender is busy, the stall begins at its last frame
        busy = link.partial if kind == "link-credit" else None
        st = Stall(c, s, link, d, kind, f.ts, f.packet, busy)
        if busy is None:
            self.stalls.append(st)
            c.stalls.append(st)
        if kind == "session-window":
            s.win_stall[d] = st
        elif kind == "drain":
            link.drain_stall = st
        else:
            link.stall = st
        if link is not None and kind != "session-window" and link.available is not None:
            # what is left of the sender's last available; less than 0: that report is out of date
            left = link.available - (link.n_deliveries - link.avail_base)
            if left >= 0:
                st.saw_available(left, f.ts, f.packet)
        return st

    def _stall_begins(self, link, st, f):
        """The delivery that used up the credit is complete (or aborted): the stall begins."""
        st.busy = None
        if st.end is None and self._sender_active(link):
            st.start = f.ts
            st.start_packet = f.packet
            self.stalls.append(st)
            link.conn.stalls.append(st)
        else:
            link.stall = None

    # -- links -------------------------------------------------------------------

    def _new_link(self, c, s, name, known) -> _Link:
        link = _Link(c, s, len(c.links), name, known)
        s.links.append(link)
        c.links.append(link)
        return link

    def _link_for(self, c, s, d, h, f, what) -> _Link:
        hs = s.handles[d]  # (a typed dict when compiled: a C look-up)
        link = hs.get(h)
        g = c.gaps
        if link is not None:
            if g is None or link.detach[d] is None or not c.lost(d):
                return link
            # d detached that link and lost bytes since: the handle is a new link's, whose attach was lost
        ph = c.placeholders
        if ph is None:
            ph = c.placeholders = [0, 0, None, {}]
        if ph[1] >= UNKNOWN_LINKS_MAX or self._placeholders >= PLACEHOLDERS_MAX or s is ph[2]:
            # past the cap (before the search for a lost attach below: a walk of the session's links)
            return self._overflow_link(c, s, d, h, f, what, ph)
        if self._strict(c, s):
            self._violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on handle {h}: no attach from the {SIDES[d]} with that handle",
                            handle=h)
        if c.lost(d):
            # d's attach was lost: it answered the peer's attach still waiting for one (the one on the same
            # handle number, else the only one waiting)
            cands = [x for x in s.links if x.attach[1 - d] is not None and x.attach[d] is None
                     and x.handle[d] is None and x.detach[1 - d] is None
                     and (what != "transfer" or x.sender_dir is None or x.sender_dir == d)]
            pick = [x for x in cands if x.handle[1 - d] == h]
            if len(pick) == 1 or len(cands) == 1:
                link = pick[0] if len(pick) == 1 else cands[0]
                link.handle[d] = h
                s.handles[d][h] = link
                link.note_unknown(f"attach ({SIDES[d]})")
                return link  # the caller's step infers the lost attach, and says so
        ph[1] += 1
        self._placeholders += 1
        link = self._new_link(c, s, None, False)
        link.note_unknown("attach")
        link.note_unknown("name")
        link.note_unknown("address")
        link.handle[d] = h
        s.handles[d][h] = link
        if h is not None and h not in s.handles[1 - d]:
            link.handle[1 - d] = h
            s.handles[1 - d][h] = link
            link.guessed[1 - d] = True
            link.note_unknown("handle-mapping-guessed")
        return link

    def _overflow_link(self, c, s, d, h, f, what, ph) -> _Link:
        """A frame on a handle without attach past the cap of placeholder links (or in the overflow
        session): the session's one overflow link (not mapped to any handle), made with a note."""
        link = ph[3].get(s.index)
        if link is None:
            link = ph[3][s.index] = self._new_link(c, s, None, False)
            for what_not in ("attach", "name", "address", "handle"):
                link.note_unknown(what_not)
            cap = (f"{UNKNOWN_LINKS_MAX} per connection" if ph[1] >= UNKNOWN_LINKS_MAX
                   else f"{PLACEHOLDERS_MAX} sessions and links in all" if self._placeholders >= PLACEHOLDERS_MAX
                   else "a session standing for channels beyond the cap")
            s.note_unknown(f"links on handles without attach beyond the cap ({cap}): merged into link {link.index}")
            self._violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on handle {h}: more handles without attach than the cap "
                            f"({cap}); frames on such handles of this session from now on go to link {link.index}, "
                            f"which stands for them all")
        elif self._strict(c, s):
            self._violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on a handle without attach, beyond the cap (counted in link "
                            f"{link.index})")
        return link

    def _attach(self, c, d, f, p):
        s = self._session_for(c, d, f, "attach")
        self._session_step(s, d, "FRAME", f, "attach")
        name = _str(p.field("name"))
        h = _uint(p.field("handle"))
        role = _bool(p.field("role"))
        link = None
        for cand in reversed(s.links):
            if (cand.name == name and cand.attach[d] is None and cand.attach[1 - d] is not None
                    and cand.state[d] in ("ATTACH_RCVD", "DETACH_RCVD")  # answered, maybe after a pipelined detach
                    and (role is None or cand.attach[1 - d]["role"] is None or cand.attach[1 - d]["role"] != role)):
                link = cand
                break
        if link is None:
            old = s.handles[d].get(h)
            sdir = None if role is None else (d if role is False else 1 - d)
            if (old is not None and not old.known and old.attach[d] is None and old.name is None
                    and old.detach[d] is None
                    and (sdir is None or old.sender_dir is None or old.sender_dir == sdir)):
                # a placeholder made from frames seen before this attach (mid-connection join); one
                # whose frames went the other way was an earlier link on the same handle, whose detach
                # fell before the capture (or was captured: a placeholder d detached is finished): this
                # attach starts a new link
                link = old
                link.name = name
            else:
                link = self._new_link(c, s, name, True)
        old = s.handles[d].get(h)
        g = c.gaps
        if (old is not None and old is not link and old.state[d] in _LINK_HANDLE_ASSIGNED and not old.guessed[d]
                and c.lost(d)):
            # d lost bytes: its detach of the old link was among them
            before = old.state[d]
            old.state.advance(d, "S:DETACH", "R:DETACH")
            if old.state[d] != before:
                c.note_inferred(f"the {SIDES[d]}'s detach of link {old.name!r} was lost "
                                f"(from its attach {name!r} on the same handle {h})")
                if old.terminated is None:
                    old.terminated = "detach (lost)"
        if old is not None and old is not link and old.state[d] in _LINK_HANDLE_ASSIGNED and not old.guessed[d]:
            self._violation(c, d, f, "handle-in-use", "warn",
                            f"attach {name!r} from the {SIDES[d]} uses handle {h}, still attached to "
                            f"link {old.name!r}", link=name, handle=h)
        if old is not None and old is not link and old.guessed[d]:
            old.handle[d] = None
        hb = s.begin[1 - d]
        if hb is not None and h is not None and isinstance(hb["handle_max"], int) and h > hb["handle_max"]:
            self._violation(c, d, f, "handle-max", "warn",
                            f"handle {h} beyond the {SIDES[1 - d]}'s handle-max {hb['handle_max']}", link=name,
                            handle=h)
        s.handles[d][h] = link
        link.handle[d] = h
        link.guessed[d] = False
        src = p.field("source")
        tgt = p.field("target")
        unsettled = p.field("unsettled")
        info = {
            "time": f.ts,
            "packet": f.packet,
            "role": role,
            "snd_settle_mode": _choice(p, "snd-settle-mode", "sender-settle-mode"),
            "snd_settle_mode_default": p.is_default("snd-settle-mode"),
            "rcv_settle_mode": _choice(p, "rcv-settle-mode", "receiver-settle-mode"),
            "rcv_settle_mode_default": p.is_default("rcv-settle-mode"),
            "source": terminus_info(src),
            "target": terminus_info(tgt),
            "source_null": src is None or src is ABSENT,
            "target_null": tgt is None or tgt is ABSENT,
            "unsettled": len(unsettled) if isinstance(unsettled, dict) else None,
            "incomplete_unsettled": p.effective("incomplete-unsettled") is True,
            "initial_delivery_count": _uint(p.field("initial-delivery-count")),
            "max_message_size": _ulong(p.field("max-message-size")),
            "offered_capabilities": _symbols(p.field("offered-capabilities")),
            "desired_capabilities": _symbols(p.field("desired-capabilities")),
            "properties": _plain(p.field("properties")),
        }
        if link.attach[d] is not None:
            self._violation(c, d, f, "state", "warn", f"second attach of link {name!r} from the {SIDES[d]}",
                            link=name, handle=h)
        link.attach[d] = info
        if _composite(tgt, "coordinator") is not None:
            link.coordinator = True
        sdir = None if role is None else (d if role is False else 1 - d)
        if link.sender_dir is None:
            link.sender_dir = sdir
        elif sdir is not None and sdir != link.sender_dir:
            self._violation(c, d, f, "role", "warn",
                            f"attach {name!r} from the {SIDES[d]}: role {'receiver' if role else 'sender'} "
                            f"conflicts with the peer's attach", link=name, handle=h)
        self._link_step(link, d, "ATTACH", f, "attach")
        if sdir == d:
            idc = info["initial_delivery_count"]
            if idc is None:
                self._violation(c, d, f, "protocol", "warn",
                                f"attach {name!r} from the sender without initial-delivery-count", link=name, handle=h)
            else:
                link.initial_dc = idc
                if link.dc is None:
                    link.dc = idc
                if link.pending_credit is not None:
                    link.limit = serial_add(idc, link.pending_credit)
                    link.pending_credit = None
                elif link.limit is None:
                    link.limit = idc
                if link.attach[1 - d] is None and c.lost(1 - d):
                    # the receiver's attach, and perhaps its flow, were lost: its credit is not known
                    link.credit_lost = True
                    link.note_unknown("link-credit after a gap")
            self._credit_check(link, f)

    def _detach(self, c, d, f, p):
        s = self._session_for(c, d, f, "detach")
        self._session_step(s, d, "FRAME", f, "detach")
        h = _uint(p.field("handle"))
        link = self._link_for(c, s, d, h, f, "detach")
        err = error_info(p.field("error"))
        first = link.detach[0] is None and link.detach[1] is None
        if link.detach[d] is None:
            link.detach[d] = {"time": f.ts, "packet": f.packet, "closed": p.effective("closed") is True, "error": err}
        self._link_step(link, d, "DETACH", f, "detach")
        if err:
            self._error(c, d, f, "link", err, s=s, link=link)
        if first:
            for st in (link.stall, link.drain_stall):
                if st is not None:
                    st.close(f.ts, f.packet, "detach")
            link.stall = link.drain_stall = None
            if link.terminated is None:
                link.terminated = "detach"
            dlv = link.partial
            link.partial = None
            if dlv is not None and dlv.settled is not None:
                self._settled(dlv)

    def _sender_active(self, link) -> bool:
        s = link.session
        c = link.conn
        return (link.detach[0] is None and link.detach[1] is None and s.end[0] is None and s.end[1] is None
                and c.close[0] is None and c.close[1] is None and link.terminated is None)

    def _credit_check(self, link, f):
        cr = link.credit()
        if cr is None or link.credit_lost:  # (credit_lost: a flow granting credit may have been lost)
            return
        if cr > 0:
            link.got_credit = True
            if link.stall is not None:
                link.stall.close(f.ts, f.packet, "flow" if f.pname == "flow" else (f.name or "frame"))
                link.stall = None
            return
        if link.drain_stall is not None and f.pname == "transfer":
            link.drain_stall.close(f.ts, f.packet, "transfer")
            link.drain_stall = None
        if link.stall is None and self._sender_active(link) and link.sender_dir is not None:
            kind = "initial-credit" if not link.got_credit and link.n_deliveries == 0 else "link-credit"
            self._open_stall(link.conn, link.session, link, link.sender_dir, kind, f)

    def _replay_flows(self, link):
        """A link whose sender became known late (mid-connection): use the receiver's last flow."""
        r = 1 - link.sender_dir
        lf = link.last_flow[r]
        if lf is not None and link.limit is None:
            dc, lc = lf[0], lf[1]
            if dc is not None and lc is not None:
                link.limit = serial_add(dc, lc)
                if link.dc is None:
                    link.dc = dc
                    link.note_unknown("delivery-count")
        sf = link.last_flow[link.sender_dir]
        if sf is not None:
            if sf[0] is not None and link.dc is None:
                link.dc = sf[0]
            if sf[2] is not None:
                link.available = sf[2]
                link.avail_base = link.n_deliveries

    def _flow(self, c, d, f, p):
        s = self._session_for(c, d, f, "flow")
        self._session_step(s, d, "FRAME", f, "flow")
        s.flows[d] += 1
        v = f.fields
        nii = _uint(v[F_NII])
        iw = _uint(v[F_IW])
        noid = _uint(v[F_NOID])
        ow = _uint(v[F_OW])
        s.last_iw[d] = iw
        s.last_ow[d] = ow
        if noid is not None:
            if s.noid[d] is None:
                if s.begin[d] is None:
                    s.note_unknown("next-outgoing-id")
                s.noid[d] = noid
            elif c.gaps is not None and s.noid[d] != noid and c.lost(d):
                # d's transfers lost in a gap: its own count says where it is
                s.noid[d] = noid
                c.note_inferred(f"the {SIDES[d]}'s next-outgoing-id re-synchronised from its flow after a gap")
        if nii is not None and c.gaps is not None and c.lost(1 - d):
            sn = s.noid[1 - d]
            if sn is not None and serial_diff(sn, nii) < 0:  # the receiver counted transfers the capture lost
                s.noid[1 - d] = nii
                c.note_inferred(f"the {SIDES[1 - d]}'s next-outgoing-id re-synchronised from the {SIDES[d]}'s "
                                f"next-incoming-id after a gap")
        if iw is not None:
            self._window(s, 1 - d, nii, iw, f)
        h = _uint(v[F_HANDLE])
        if h is None:
            return
        link = self._link_for(c, s, d, h, f, "flow")
        self._link_step(link, d, "FRAME", f, "flow")
        dc = _uint(v[F_DC])
        lc = _uint(v[F_LC])
        av = _uint(v[F_AVAILABLE])
        drain = v[F_DRAIN] is True  # default false
        link.echo = v[F_ECHO] is True
        link.last_flow[d] = (dc, lc, av, drain)
        link.flows[d] += 1
        if link.sender_dir is None:
            return
        if d == link.sender_dir:
            if dc is not None:
                if link.dc is None:
                    link.note_unknown("delivery-count")
                link.dc = dc
            if link.limit is None and lc is not None and link.dc is not None:
                link.limit = serial_add(link.dc, lc)
            if av is not None:
                link.available = av
                link.avail_base = link.n_deliveries
                for st in (link.stall, link.drain_stall):
                    if st is not None:
                        st.saw_available(av, f.ts, f.packet)
            if link.drain_stall is not None:
                link.drain_stall.close(f.ts, f.packet, "flow")
                link.drain_stall = None
                cr = link.credit()
                if av == 0 and cr is not None and cr > 0:
                    self._violation(c, d, f, "drain", "warn",
                                    f"drain answer from the {SIDES[d]} on link {link.name!r} with available 0 leaves "
                                    f"link-credit {cr}: delivery-count not advanced to consume the credit",
                                    link=link.name, handle=h)
        else:
            if (dc is not None and link.dc is not None and c.gaps is not None and c.lost(link.sender_dir)
                    and serial_diff(link.dc, dc) < 0):
                # the receiver counted deliveries whose transfers the capture lost
                link.dc = dc
                c.note_inferred(f"the {SIDES[link.sender_dir]}'s delivery-count re-synchronised from the "
                                f"{SIDES[d]}'s flow after a gap")
            if lc is not None:
                base = dc if dc is not None else link.initial_dc
                if base is None:
                    link.pending_credit = lc
                else:
                    link.limit_prev = link.limit
                    link.limit = serial_add(base, lc)
                    link.credit_lost = False
                    if link.dc is None and dc is not None and not link.known:
                        # joined mid-link: assume the sender is where the receiver thinks it is
                        link.dc = dc
                        link.note_unknown("delivery-count")
            link.drain = drain
            if drain and link.drain_stall is None and self._sender_active(link):
                self._open_stall(c, s, link, link.sender_dir, "drain", f)
            elif not drain and link.drain_stall is not None:
                link.drain_stall.close(f.ts, f.packet, "cancelled")
                link.drain_stall = None
        self._credit_check(link, f)

    def _transfer(self, c, d, f, p):
        s = self._session_for(c, d, f, "transfer")
        self._session_step(s, d, "FRAME", f, "transfer")
        v = f.fields
        h = v[T_HANDLE]
        if type(h) is not int or not 0 <= h <= SERIAL_MASK:
            h = _uint(h)
        link = self._link_for(c, s, d, h, f, "transfer")
        self._link_step(link, d, "FRAME", f, "transfer")
        if link.sender_dir is not None and link.sender_dir != d and link.guessed[d] and h is not None:
            # d's handle was guessed to be this link (it was the peer's with the same number): it is
            # another link, whose attach the capture did not show
            link.guessed[d] = False
            link.handle[d] = None
            del s.handles[d][h]
            link = self._link_for(c, s, d, h, f, "transfer")
        if link.sender_dir is None:
            link.sender_dir = d
            self._replay_flows(link)
        elif link.sender_dir != d:
            self._violation(c, d, f, "role", "warn",
                            f"transfer from the {SIDES[d]} on link {link.name!r}, whose sender is the "
                            f"{SIDES[link.sender_dir]}", link=link.name, handle=h)
        # session window (riw / beyond_window inlined: this is the hottest path)
        noid = s.noid[d]
        wl = s.win_limit[d]
        riw = None  # (unsigned: a window of 2**31-1 or more never wraps negative)
        if noid is not None:
            if wl is not None:
                iw = s.last_iw[1 - d]
                riw = serial_diff(wl, noid) if iw is None else grant_left(wl, iw, noid)
                if riw is None and c.gaps is not None:
                    # d's count is behind the receiver's: its transfers were lost; re-synchronised
                    noid = (wl - iw) & SERIAL_MASK
                    riw = iw
                    c.note_inferred(f"the {SIDES[d]}'s next-outgoing-id re-synchronised from the "
                                    f"{SIDES[1 - d]}'s next-incoming-id after a gap")
                if riw is not None:
                    if riw <= 0 and (s.win_prev[d] is None or serial_diff(s.win_prev[d], noid) <= 0):
                        self._hold(c, 1 - d, d, f, "session-window",
                                   f"transfer from the {SIDES[d]} beyond the {SIDES[1 - d]}'s incoming-window "
                                   f"(remote-incoming-window {riw})", link=link.name, handle=h)
                    riw -= 1
            noid = s.noid[d] = serial_add(noid, 1)
        s.transfers[d] += 1
        link.transfers += 1
        if link.after_stall is not None:  # the first transfer after a stall of this link ended
            link.after_stall.next_ts = f.ts
            link.after_stall = None
        if s.after_win[d] is not None:
            s.after_win[d].next_ts = f.ts
            s.after_win[d] = None
        did = v[T_DELIVERY_ID]
        if type(did) is not int or not 0 <= did <= SERIAL_MASK:
            did = _uint(did)
        dlv = link.partial
        if dlv is not None and did is not None and dlv.delivery_id is not None and did != dlv.delivery_id:
            dlv = None  # a new delivery although the previous one said more=true (noted by the framing layer)
        if dlv is None:
            if did is None:
                did = s.deliveries[d].next_id
                if self._strict(c, s) and link.known:
                    self._violation(c, d, f, "protocol", "warn",
                                    "first transfer of a delivery without delivery-id", link=link.name, handle=h)
            dlv = _Delivery.__new__(_Delivery)
            dlv._init(link, s, d, did, _bin(v[T_DELIVERY_TAG]), f.ts, f.first_packet)
            self._seq += 1
            dlv.seq = self._seq
            link.live[dlv.seq] = dlv
            if did is not None:
                table = s.deliveries[d]
                table.add(did, dlv)
                s.touch_budget += DISPOSITION_TOUCHES_PER_DELIVERY
            rsm = v[T_RCV_SETTLE_MODE]
            if rsm is not None and rsm is not ABSENT:
                dlv.rcv_settle_mode = choice_name("receiver-settle-mode", rsm)
            if link.coordinator:
                dlv.payload = []
            # link credit: consumed by the first transfer of each delivery
            dc = link.dc
            if dc is not None and c.gaps is not None and link.limit is not None and link.credit() is None:
                # d's delivery-count is behind the receiver's: deliveries the capture lost
                lf = link.last_flow[1 - d]
                if lf is not None and lf[1] is not None:
                    dc = link.dc = (link.limit - lf[1]) & SERIAL_MASK
                    c.note_inferred(f"the {SIDES[d]}'s delivery-count re-synchronised from the {SIDES[1 - d]}'s "
                                    f"flow after a gap")
            if dc is not None:
                if link.limit is not None and link.beyond_credit() and not link.credit_lost:
                    self._hold(c, 1 - d, d, f, "credit",
                               f"transfer from the {SIDES[d]} on link {link.name!r} beyond its link-credit "
                               f"(delivery-count {dc}, credit {link.credit()})", link=link.name, handle=h,
                               delivery_id=did)
                link.dc = serial_add(dc, 1)
            link.n_deliveries += 1
        dlv.frames += 1
        dlv.size += f.payload_size
        dlv.last_ts = f.ts
        dlv.last_packet = f.packet
        if dlv.payload is not None:
            dlv.payload.append(f.payload)
        if v[T_SETTLED] is True and dlv.snd_settled is None:
            dlv.settle("sender", f.ts, f.packet)
            dlv.presettled = True
        if v[T_RESUME] is True:
            dlv.resumed = True
        state = v[T_STATE]
        if state is not None and state is not ABSENT:
            state = _delivery_state_value(state)
            if state is not None:
                self._delivery_state(dlv, "sender", state, f)
        aborted = v[T_ABORTED] is True
        more = v[T_MORE] is True
        if aborted:
            dlv.aborted = True
        if aborted or not more:
            link.partial = None
            dlv.complete = not aborted
            if link.stall is not None and link.stall.busy is dlv:
                self._stall_begins(link, link.stall, f)
            if link.coordinator and not aborted:
                self._coordinator_message(c, link, dlv, f)
            dlv.payload = None
            if dlv.settled is not None:
                self._settled(dlv)
        else:
            link.partial = dlv
        # session window exhausted by this transfer?
        if riw is not None and riw <= 0 and s.win_stall[d] is None:
            self._open_stall(c, s, link, d, "session-window", f)
        self._credit_check(link, f)
        table = s.deliveries[d]
        if table.due():  # many unsettled: the plain ones to the compact store
            table.compact()

    # -- deliveries ----------------------------------------------------------------

    def _disposition(self, c, d, f, p):
        s = self._session_for(c, d, f, "disposition")
        self._session_step(s, d, "FRAME", f, "disposition")
        v = f.fields
        role = _bool(v[D_ROLE])
        first = _uint(v[D_FIRST])
        if role is None or first is None:
            return
        last = _uint(v[D_LAST])
        if last is None:
            last = first
        by = "receiver" if role else "sender"
        sender = 1 - d if role else d
        table = s.deliveries[sender]
        n = serial_range_len(first, last)
        if n > _HALF:
            self._violation(c, d, f, "protocol", "warn",
                            f"disposition from the {SIDES[d]}: last {last} precedes first {first}")
            n, last = 1, first
        if n <= 16:
            hits = table.find_each(first, n)
        else:  # a wide range: the deliveries in it, found by bisection (cost: those it touches)
            most = table.range_count(first, n)
            if most > s.touch_budget:
                self._violation(c, d, f, "budget", "warn",
                                f"disposition ({by}) from the {SIDES[d]} not applied: the deliveries it covers are "
                                f"more than the session's disposition budget has left ({DISPOSITION_TOUCH_BASE:,} "
                                f"+ {DISPOSITION_TOUCHES_PER_DELIVERY} per delivery transferred, spent by earlier "
                                f"ranges)", delivery_id=first)
                s.note_unknown("dispositions past the session's budget (not applied)")
                return
            hits = table.in_range(first, n)
            s.touch_budget -= most
        missing = n - len(hits)
        if missing:
            late = table.folded_in_range(first, last) - len(hits)
            if late > 0:
                s.late_dispositions += late
                missing -= late
        settled = v[D_SETTLED] is True
        state = _delivery_state_value(v[D_STATE])
        plan = None if state is None else _state_plan(state)  # (once for the range)
        for dlv in hits:
            dlv.dispositions[d] += 1
            if plan is not None:
                self._apply_state(dlv, by, plan, f)
            if settled:
                dlv.settle(by, f.ts, f.packet)
                self._settled(dlv)
        if missing:
            rng = f"{first}" if first == last else f"{first}..{last}"
            if self._strict(c, s):
                self._violation(c, d, f, "unknown-delivery", "warn",
                                f"disposition ({by}) from the {SIDES[d]} for delivery-id {rng}: "
                                f"{missing} of {n} never transferred by the {SIDES[sender]}",
                                delivery_id=first)
            else:
                s.unseen_dispositions += missing
                s.note_unknown("deliveries before the capture")

    def _delivery_state(self, dlv, by, state: Composite, f):
        """``state`` (a delivery-state Composite) sent by ``by`` ("sender" / "receiver") in frame ``f``,
        applied to ``dlv``."""
        self._apply_state(dlv, by, _state_plan(state), f)

    def _apply_state(self, dlv, by, plan: tuple, f):
        """A delivery state's :func:`_state_plan` applied to ``dlv`` (a disposition's range shares one plan)."""
        name, transactional, txn, state, terminal, kind = plan
        if transactional:
            self._enlist(dlv, txn, by, f)
        if not terminal:
            if kind == _K_RECEIVED:
                sn = _uint(state.field("section-number"))
                so = _ulong(state.field("section-offset"))
                dlv.received_state = f"section {sn} offset {so}"
            return
        rcv = by == "receiver"  # (by: "sender" or "receiver")
        if not rcv:
            dlv.sender_state = name
            if dlv.outcome is not None:
                return
        elif dlv.outcome is not None and dlv.outcome_by == "receiver":
            return
        dlv.outcome = name
        dlv.outcome_by = by
        if rcv:
            dlv.outcome_ts = f.ts
            dlv.outcome_packet = f.packet
        if kind == _K_REJECTED:
            dlv.outcome_error = error_info(state.field("error"))
        elif kind == _K_MODIFIED:
            dlv.delivery_failed = _bool(state.effective("delivery-failed"))
            dlv.undeliverable_here = _bool(state.effective("undeliverable-here"))
        elif kind == _K_DECLARED:
            tid = state.field("txn-id")
            dlv.txn_id = _hex(tid)
        link = dlv.link
        if link.coordinator and rcv:
            self._coordinator_outcome(dlv, name, state, f)

    # -- transactions ------------------------------------------------------------------

    def _enlist(self, dlv, txn_id, by, f):
        key = _hex(txn_id)
        if key is None:
            return
        dlv.txn_id = key
        c = dlv.link.conn
        t = c.txns.get(key)
        if t is None:
            t = _Txn(c, None)
            t.txn_id = key
            c.txns[key] = t
            self.transactions.append(t)
        e = dlv.enlisted_in
        while e is not None and e.merged_into is not None:
            e = e.merged_into
        if e is not t:
            dlv.enlisted_in = t
            t.enlisted.append((dlv.link, dlv.delivery_id, "transfer" if by == "sender" else "disposition"))

    def _coordinator_message(self, c, link, dlv, f):
        if dlv.payload is None:  # no bytes kept (the delivery was already complete): nothing to decode
            return
        try:
            data = b"".join(dlv.payload)
            # (elements in proportion to the message's bytes, as the framing layer budgets a connection)
            sections = decode_all(data, max_elements=ELEMENT_BUDGET_BASE + ELEMENTS_PER_BYTE * len(data))
        except DissectError as e:
            self._violation(c, dlv.direction, f, "malformed", "warn",
                            f"coordinator message on link {link.name!r} does not decode: {e}", link=link.name)
            return
        body = None
        for sec in sections:
            if isinstance(sec, Described) and sec.name == "amqp-value":
                body = sec.value
        body = _composite(body, "declare", "discharge")
        if body is None:
            self._violation(c, dlv.direction, f, "protocol", "warn",
                            f"message on coordinator link {link.name!r} is neither declare nor discharge",
                            link=link.name, delivery_id=dlv.delivery_id)
            return
        if body.spec.name == "declare":
            t = _Txn(c, link)
            t.declare = dlv
            t.global_id = _plain(body.field("global-id"))
            self.transactions.append(t)
            dlv.sender_state = "declare"
            dlv.txn = t
        else:
            key = _hex(body.field("txn-id"))
            t = c.txns.get(key)
            if t is None:
                t = _Txn(c, link)
                t.txn_id = key
                c.txns[key] = t
                self.transactions.append(t)
                if self._strict(c, link.session):
                    self._violation(c, dlv.direction, f, "unknown-transaction", "warn",
                                    f"discharge of txn-id {key}, which was never declared", link=link.name,
                                    delivery_id=dlv.delivery_id)
            t.link = t.link or link
            t.discharge = dlv
            t.fail = _bool(body.effective("fail"))
            dlv.txn_id = key
            dlv.txn = t
            dlv.sender_state = "discharge"

    def _coordinator_outcome(self, dlv, name, state, f):
        c = dlv.link.conn
        t = dlv.txn
        if t is None:
            return
        if t.declare is dlv:
            t.declare_outcome = name
            t.declared = (f.ts, f.packet)
            if name == "declared":
                key = dlv.txn_id
                t.txn_id = key
                old = c.txns.get(key)
                if old is not None and old is not t and old.declare is None:
                    # deliveries enlisted before the declared outcome was seen
                    t.enlisted.extend(old.enlisted)
                    old.merged_into = t  # (its deliveries are enlisted in t now)
                    if old in self.transactions:
                        self.transactions.remove(old)
                c.txns[key] = t
            elif name == "rejected":
                t.declare_error = dlv.outcome_error
            return
        if t.discharge is dlv:
            t.discharge_outcome = name
            t.discharged = (f.ts, f.packet)
            if name == "rejected":
                t.discharge_error = dlv.outcome_error


_FIELD_HANDLERS = frozenset({"transfer", "flow", "disposition"})  # handlers that read f.fields only
_CONN_LEVEL = {"open": 1, "close": 2}  # the connection's own performatives, which _frame handles first

_HANDLERS = {
    "begin": StateTracker._begin,
    "end": StateTracker._end,
    "attach": StateTracker._attach,
    "detach": StateTracker._detach,
    "flow": getattr(StateTracker, "_flow"),  # the method object (compiled: not a C function pointer)
    "transfer": getattr(StateTracker, "_transfer"),  # the method object (compiled: not a C function pointer)
    "disposition": getattr(StateTracker, "_disposition"),  # the method object (compiled: not a C function pointer)
}
_H_TRANSFER = _HANDLERS["transfer"]
_H_DISPOSITION = _HANDLERS["disposition"]
_H_FLOW = _HANDLERS["flow"]

