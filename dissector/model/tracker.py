"""The tracker: consumes the Dissector's events and dispatches each to the room of its rule.

:class:`StateTracker` (re-exported by :mod:`amqp_dissect.model.state`, whose docstring describes
the model) keeps the connections (found by id, their first / last times) and owns the ledger of
findings (:class:`~.findings.Recorder`) and one object per rule room, each in its own module, none
importing this one: :mod:`.connection` (protocol headers, SASL, open / close, idle time-out, gaps
and the transport's end), :mod:`.sessions` (begin / end, the session window), :mod:`.links`
(attach / detach / flow, link credit), :mod:`.transfers`, :mod:`.settlement` (disposition,
outcomes, folding), :mod:`.transactions`, :mod:`.stall_rules`.  It makes them, hands each the
ledger and the rooms it calls, and then only dispatches: a TCP / stream event to the connection
room, a frame to the connection room and then to the room of its performative, a peer's frame or
the capture's end to the ledger (held credit / window findings released).  The tracker is also the
rooms' :class:`~.hooks.Hooks` (a subclass hears of folded deliveries, credit checks and windows).
Link credit, the session window and loss records are objects of their own (:mod:`.credit`,
:mod:`.window`, :mod:`.loss`) the entities (:mod:`.entities`) hold.
"""

from __future__ import annotations

from ..amqp.framing import FRAME_SASL, Frame, NotCapturedNote, OtherProtocolNote, ProtocolHeader, StreamNote
from ..capture.tcp import ONE_DIRECTION
from ..events import PacketNote, StreamClosed, StreamOpened
from .connection import ConnectionRules
from .entities import Connection, ConnectionBase
from .findings import Recorder
from .hooks import Hooks
from .links import LinkRules
from .sessions import SessionRules
from .settlement import SettlementRules
from .stall_rules import StallRules
from .transactions import TransactionRules
from .transfers import TransferRules


class StateTracker(Hooks):
    """Consumes Dissector events; keeps the protocol state of every connection."""

    def __init__(self):
        self.connections: dict = {}  # connection id -> ConnectionBase / Connection
        # connections of another protocol than AMQP 1.0 (an AMQP 0-9-1 / 0-10 ... protocol header in either
        # direction): taken out of ``connections`` (they are no AMQP 1.0 connection), counted and named
        self.others: dict = {}
        # connection id -> what is known of another protocol's connection: {"protocol", "headers_client",
        # "headers_server", "bytes_client", "bytes_server", "time", "packet"} (the first header's); kept
        # here, not on every connection (a half-open connection stays small)
        self.other_info: dict = {}
        self.first_ts = None
        self.last_ts = None
        self.end_ts = None
        self.finished = False
        # the ledger and the rooms (each given the ledger and the rooms it calls; none knows the tracker
        # but as the Hooks it hears of)
        ledger = self.ledger = Recorder()
        self.stall_rules = StallRules()
        self.transaction_rules = TransactionRules(ledger)
        self.connection_rules = ConnectionRules(ledger, self.connections, self.others, self.other_info)
        self.session_rules = SessionRules(ledger, self.stall_rules, self)
        self.settlement_rules = SettlementRules(ledger, self.session_rules, self.transaction_rules, self)
        self.link_rules = LinkRules(ledger, self.session_rules, self.settlement_rules, self.stall_rules, self)
        self.transfer_rules = TransferRules(ledger, self.session_rules, self.link_rules, self.settlement_rules,
                                            self.stall_rules, self.transaction_rules)
        # what the run found and measured, as the readers of a tracker know them (the rooms' own lists)
        self.violations = ledger.violations
        self.frame_errors = ledger.frame_errors
        self.internal_errors = ledger.internal_errors
        self._repeats = ledger._repeats
        self.stalls = self.stall_rules.stalls
        self.transactions = self.transaction_rules.transactions
        self._settling = self.settlement_rules.settling
        # the performative name of the last frame and what it is (see _name_kind): frames of one name
        # come in runs, so the three look-ups by name are made once a run, not once a frame
        self._kind_name = None
        self._kind_fields = False
        self._kind_code = _K_NONE
        # the connection whose times _frame_conn set last, the time and packet objects it was given and
        # the two fields as they were then (see _frame_conn: the frames of one packet set them once)
        self._seen_c = None
        self._seen_ts = None
        self._seen_packet = None
        self._seen_t = 0
        self._seen_p = 0

    @property
    def fold_lag(self):
        """Settlements a delivery settled by one peer waits before it is folded (None: never fold)."""
        return self.settlement_rules.fold_lag

    @fold_lag.setter
    def fold_lag(self, lag):
        self.settlement_rules.fold_lag = lag

    def fold_lagged(self, lag: int, popped: int, k_hi, k_mid, k_lo) -> int:
        """(``-j``) See :meth:`SettlementRules.fold_lagged`."""
        return self.settlement_rules.fold_lagged(lag, popped, k_hi, k_mid, k_lo)

    def feed(self, event) -> None:
        try:
            cls = type(event)
            if cls is Frame:
                self._frame(event)
            elif cls is ProtocolHeader:
                self.connection_rules.header(self._conn(event), event)
            elif cls is StreamOpened:
                self._opened(event)
            elif cls is StreamClosed:
                self._closed(event)
            elif cls is StreamNote:
                self.connection_rules.stream_note(self._conn(event), event)
            elif cls is NotCapturedNote:
                self.connection_rules.not_captured(self._conn(event), event)
            elif cls is OtherProtocolNote:
                self.connection_rules.other_note(self._conn(event), event)
            elif cls is PacketNote:
                if event.note.group == ONE_DIRECTION and event.conn in self.connections:
                    self.connection_rules.one_way(self._conn(event), event)
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
        settlement = self.settlement_rules
        q = settlement.settling
        while q:
            x = q.popleft()
            if not x.folded and settlement.fold_lag is not None:
                settlement.fold(x)
        ledger = self.ledger
        for c in self.connections.values():
            if ledger._held:  # no gap came after them: the grants they rest on were all seen
                ledger.release(c, 0)
                ledger.release(c, 1)
            self.connection_rules.idle_at_end(c, end_ts)

    def _conn(self, ev, client=None, server=None, syn_seen=False):
        c = self.connections.get(ev.conn)
        if c is None and self.others:
            c = self.others.get(ev.conn)
        if c is None:
            if client is None:
                d = getattr(ev, "direction", 0)
                src, dst = getattr(ev, "src", None), getattr(ev, "dst", None)
                client, server = (src, dst) if d != 1 else (dst, src)
            c = ConnectionBase(ev.conn, client, server, syn_seen)
            c.seq = len(self.connections)
            self.connection_rules.put_connection(ev.conn, c)
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
        self.connection_rules.closed(c, ev)

    def _frame(self, f: Frame):
        c = self._frame_conn(f)
        if type(c.last_frame) is tuple:  # its first frame (it kept the shared defaults until now)
            c.framed()
        c.events += 1
        d = f.direction
        if self.ledger._held:  # d's frame came with no gap before it: the grants of d were all seen
            self.ledger.release(c, d)
        name = f.pname  # None: a heartbeat, or a body that is not a known performative
        heartbeat = name is None and f.type != FRAME_SASL and f.size == f.doff * 4
        if name is not self._kind_name:
            self._name_kind(name)
        # the hot performatives are read from f.fields; the others from the decoded Composite
        p = None if self._kind_fields else f.performative
        if self.connection_rules.frame(c, d, f, p, name, heartbeat):
            self._dispatch(c, d, f, p, name)

    def _name_kind(self, name) -> None:
        """What the performative ``name`` is, remembered until a frame of another name: read from
        f.fields or not, and its room (one of the hot three, another, none)."""
        handler = _HANDLERS.get(name)
        self._kind_name = name
        self._kind_fields = name in _FIELD_HANDLERS
        self._kind_code = (_K_NONE if handler is None else _K_TRANSFER if handler is _H_TRANSFER
                           else _K_DISPOSITION if handler is _H_DISPOSITION else _K_FLOW if handler is _H_FLOW
                           else _K_OTHER)

    def _frame_conn(self, f):
        """The connection of frame ``f``, its times updated (a Connection from its first AMQP byte)."""
        c0 = self.connection_rules.frame_connection(f.conn)  # (connections.get, the last one remembered)
        ts = f.ts
        if type(c0) is not Connection:  # the connection's first AMQP byte (or first event)
            c = self.connection_rules.amqp(self._conn(f))
            if not c.syn_seen and not c.told_before_frames:
                c.note_unknown("connection start")
        elif ts is None or c0._no_first_ts():
            c = self._conn(f)
        else:  # _conn's bookkeeping, inlined for the common case
            c = c0
            packet = f.packet
            # the frames of one packet share its time and packet objects: c._seen (last_ts, and
            # last_packet unless None: one C call, not two setattrs) once a packet.  Skipped only when
            # the call would change nothing: the same connection, given the same two objects (ints
            # are immutable), its two fields still what that call left and nothing kept aside
            if (c is not self._seen_c or ts is not self._seen_ts or packet is not self._seen_packet
                    or c._last_ts != self._seen_t or c._last_packet != self._seen_p or c._big is not None):
                c._seen(ts, packet)
                if c._big is None:
                    self._seen_c = c
                    self._seen_ts = ts
                    self._seen_packet = packet
                    self._seen_t = c._last_ts
                    self._seen_p = c._last_packet
                else:
                    self._seen_c = None
            # (the frames of one packet share its time object: compared once a packet, not once a frame)
            if ts is not self.last_ts and (self.last_ts is None or ts > self.last_ts):
                self.last_ts = ts
        return c

    def _dispatch(self, c, d, f, p, name):
        """A frame of a session (not the connection's own): the room of its performative."""
        if name is not self._kind_name:  # (_frame has looked it up: only a direct call comes here)
            self._name_kind(name)
        code = self._kind_code
        # the hot three called directly (a typed call when compiled), unless a test replaced them
        if code == _K_TRANSFER:
            self.transfer_rules.transfer(c, d, f, p)
        elif code == _K_DISPOSITION:
            self.settlement_rules.disposition(c, d, f, p)
        elif code == _K_FLOW:
            self.link_rules.flow(c, d, f, p)
        elif code == _K_OTHER:
            _HANDLERS[name](self, c, d, f, p)


def _begin(t, c, d, f, p):
    t.session_rules.begin(c, d, f, p)


def _end(t, c, d, f, p):
    t.session_rules.end(c, d, f, p)


def _attach(t, c, d, f, p):
    t.link_rules.attach(c, d, f, p)


def _detach(t, c, d, f, p):
    t.link_rules.detach(c, d, f, p)


def _flow(t, c, d, f, p):
    t.link_rules.flow(c, d, f, p)


def _transfer(t, c, d, f, p):
    t.transfer_rules.transfer(c, d, f, p)


def _disposition(t, c, d, f, p):
    t.settlement_rules.disposition(c, d, f, p)


_FIELD_HANDLERS = frozenset({"transfer", "flow", "disposition"})  # handlers that read f.fields only

# performative -> its room: handler(tracker, connection, direction, frame, performative)
_HANDLERS = {
    "begin": _begin,
    "end": _end,
    "attach": _attach,
    "detach": _detach,
    "flow": _flow,
    "transfer": _transfer,
    "disposition": _disposition,
}
_H_TRANSFER = _HANDLERS["transfer"]
_H_DISPOSITION = _HANDLERS["disposition"]
_H_FLOW = _HANDLERS["flow"]
# what a performative name is to _dispatch (StateTracker._kind_code)
_K_NONE = 0
_K_TRANSFER = 1
_K_DISPOSITION = 2
_K_FLOW = 3
_K_OTHER = 4
