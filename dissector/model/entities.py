"""The entities of the model: a link, a session, a connection (as TCP shows it, then with its AMQP
state).  They hold data and the small rules of their own fields; the rules of link credit, the
session window and loss are objects of their own (:mod:`.credit`, :mod:`.window`, :mod:`.loss`)
each entity holds one of.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .credit import LinkCredit
from .loss import LossRecord
from .deliveries import DeliveryTable
from .delivery import LiveDeliveries
from .machine import LINK_MACHINE, SESSION_MACHINE, Endpoints
from .state import (DISPOSITION_TOUCH_BASE, EMPTY_MAP, EMPTY_MAPS, EMPTY_PAIR, NONE_PAIR, START_ENDPOINTS, own_endpoints,
                    UNKNOWN_ENDPOINTS, ZERO_PAIR)
from .stats import DeliveryStats
from .steps import after_missing
from .transitions import SIDES, UNKNOWN
from .window import SessionWindow


# a C integer field's "not a C integer here" (None, or a value kept in the connection's _big): the smallest
# 64-bit integer, which no time, packet number or ordinal is (ConnectionBase.first_ts ...)
INT_MAX = (1 << 63) - 1
NO_INT = -INT_MAX - 1


class Silence:
    """The longest silence of one peer of a connection (no frame of any kind), for the diagnoses'
    idle time-out: ``longest`` (ns, 0 until a second frame), its ``start`` and ``end`` (times),
    ``end_packet`` (the frame that ended it), ``start_packet`` (the frame that began it; None if
    that frame ended something), and ``unknown``: the silences a loss of that peer's bytes made
    unknown (a frame may have been there).  ConnectionRules.frame writes it, per frame."""

    __slots__ = ("longest", "start", "end", "end_packet", "unknown", "start_packet")

    def __init__(self):
        self.longest = 0
        self.start = None
        self.end = None
        self.end_packet = None
        self.unknown = 0
        self.start_packet = None


class Link:
    __slots__ = (
        "conn", "session", "index", "name", "handle", "state", "attach", "detach", "sender_dir",
        "known", "guessed", "unknown", "link_credit",
        "available", "avail_base", "drain", "echo", "last_flow", "flows", "stall", "drain_stall", "after_stall",
        "partial", "live", "stats", "n_deliveries", "coordinator", "transfers", "terminated",
        "compacted", "reordered", "lost_whole", "not_captured", "tags", "tag_repeats",
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
        self.link_credit = LinkCredit()  # the link's credit: its rules (credit.py)
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
        self.live = LiveDeliveries()  # the deliveries not folded yet (unsettled or settling)
        self.stats = DeliveryStats()  # the folded deliveries
        self.n_deliveries = 0
        self.coordinator = False
        self.transfers = 0
        self.terminated = None
        self.compacted = 0  # deliveries of this link in its session's _Compact stores
        self.reordered = False  # live is not in first-transfer order any more (see link_deliveries)
        self.lost_whole = 0  # deliveries of this link lost whole in gaps (from the delivery-ids around them)
        self.not_captured = 0  # deliveries of this link whose transfers the snap length cut off whole (the same way)
        # delivery-tag -> the delivery-id (or a list of them) of its unsettled deliveries (TAGS_MAX
        # tags at most; None until the first), and tag -> [violation row, ids, count] of a repeated one
        self.tags = None
        self.tag_repeats = None

    def credit(self):
        """link-credit (:meth:`LinkCredit.left` from the receiver's last grant; None when unknown)."""
        return self.link_credit.left(1 - self.sender_dir if self.sender_dir is not None else -1)

    def beyond_credit(self) -> bool:
        """No credit under the receiver's latest *and* previous limit (the latest may be in flight)."""
        return self.link_credit.beyond(1 - self.sender_dir if self.sender_dir is not None else -1)

    @property
    def dc(self):
        """The sender's delivery-count (None: not known, or only a lower bound after a gap)."""
        lcr = self.link_credit
        return None if lcr.count_low else lcr.count

    @property
    def initial_dc(self):
        """The sender's initial-delivery-count (None: not known)."""
        return self.link_credit.initial

    @property
    def credit_lost(self) -> bool:
        """Bytes of the receiver were lost since its last flow: the credit is unknown."""
        return self.link_credit.lost

    def note_unknown(self, what: str):
        if what not in self.unknown:
            self.unknown.append(what)

    def untag(self, tag, did) -> None:
        """Delivery ``did`` with delivery-tag ``tag`` is settled (or aborted): its tag is free again."""
        tags = self.tags
        held = tags.pop(tag, None)  # (one look-up for the usual tag, held by this delivery alone)
        if held is None:
            return
        if type(held) is list:
            if did in held:
                held.remove(did)
            if held:
                tags[tag] = held  # (the dict's order is not read: membership only)
        elif held != did:
            tags[tag] = held


class Session:
    __slots__ = (
        "conn", "index", "channel", "initiator", "state", "begin", "end", "known", "guessed",
        "unknown", "window", "win_stall", "after_win", "transfers0", "transfers1",
        "flows",
        "handles", "links", "deliveries",
        "late_dispositions",
        "unseen_dispositions", "touch_budget", "cut_outcomes",
        "terminated", "lost_whole", "last_sender", "loss_mark", "lost_upto", "not_captured", "cut_mark",
        "_hk0", "_hk1", "_hl0", "_hl1",
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
        self.window = SessionWindow()  # the session window: its rules (window.py)
        self.win_stall = [None, None]
        self.after_win = [None, None]  # per sender: the window stall that ended last, until its next transfer
        self.transfers0 = 0  # transfer frames of peer 0 (the client) and of peer 1: two integers, not a
        self.transfers1 = 0  # list whose count is made an int object per frame (see ``transfers``)
        self.flows = [0, 0]
        self.handles = ({}, {})  # per peer: output handle -> Link (changed through map_handle / unmap_handle only)
        # per peer: the handle object of its last frame's link and that link (link_on's cache; None / None:
        # empty), cleared by every change of ``handles``
        self._hk0 = None
        self._hk1 = None
        self._hl0 = None
        self._hl1 = None
        self.links: list[Link] = []
        self.deliveries = (DeliveryTable(self, 0), DeliveryTable(self, 1))  # per sending peer, not folded yet
        self.late_dispositions = 0  # disposition entries for deliveries already folded (settled earlier)
        self.touch_budget = DISPOSITION_TOUCH_BASE  # see DISPOSITION_TOUCH_BASE
        self.unseen_dispositions = 0
        # outcomes the receiver's settling dispositions gave delivery-ids whose transfers the snap
        # length cut off whole: outcome name -> delivery-ids (None until the first)
        self.cut_outcomes = None
        self.terminated = None
        # deliveries lost whole in gaps (their delivery-ids skipped), of either sender; and per
        # sender, the link of its latest delivery and the loss mark (LossRecord.mark) then
        self.lost_whole = 0
        self.last_sender = [None, None]
        self.loss_mark = [0, 0]
        # per sender: the highest delivery-id counted lost whole beyond its latest delivery seen
        # (named by a disposition after a gap), None when none was
        self.lost_upto = [None, None]
        # deliveries whose transfers the snap length cut off whole (counted like lost_whole, not
        # loss), and per sender the cut mark (LossRecord.cut_mark) at its latest delivery
        self.not_captured = 0
        self.cut_mark = [0, 0]

    def link_on(self, d, h):
        """The link on peer ``d``'s handle ``h`` (``handles[d].get(h)``), remembered for the next frame:
        frames of one link come in runs, so most frames compare one object, not hash and look up one.
        (The cache is keyed by the handle object itself: a handle of another object, equal or not,
        is looked up.)"""
        if d:
            if h is self._hk1 and h is not None:
                return self._hl1
            m = self.handles[1]  # (a typed dict when compiled: a C look-up)
            link = m.get(h)
            if link is not None:
                self._hk1 = h
                self._hl1 = link
            return link
        if h is self._hk0 and h is not None:
            return self._hl0
        m = self.handles[0]
        link = m.get(h)
        if link is not None:
            self._hk0 = h
            self._hl0 = link
        return link

    def map_handle(self, d, h, link) -> None:
        """Peer ``d``'s handle ``h`` is ``link`` from now on (the one way ``handles`` gains or changes
        an entry: link_on's cache is cleared)."""
        self.handles[d][h] = link
        self._forget_handles()

    def unmap_handle(self, d, h) -> None:
        """Peer ``d``'s handle ``h`` names no link any more (the one way ``handles`` loses an entry)."""
        del self.handles[d][h]
        self._forget_handles()

    def _forget_handles(self) -> None:
        self._hk0 = None
        self._hk1 = None
        self._hl0 = None
        self._hl1 = None

    @property
    def transfers(self) -> list:
        """Transfer frames per sending peer: ``[transfers0, transfers1]`` (a new list: read only)."""
        return [self.transfers0, self.transfers1]

    def riw(self, d):
        """remote-incoming-window of sending peer d (:meth:`SessionWindow.riw`; None if unknown)."""
        return self.window.riw(d)

    def beyond_window(self, d) -> bool:
        """No window under the peer's latest *and* previous announcement (the latest may be in flight)."""
        return self.window.beyond(d)

    def count_lost_whole(self, d, prev, n, since) -> None:
        """``n`` more deliveries of sender d were lost whole in a gap after its latest delivery, on
        link ``prev`` (None: not known), ``since`` of them in all since that delivery.  They are that
        link's when no other link of the session sends the same way (its delivery-count is ``since``
        past that delivery's); else only the session's (the delivery-count of each link that may
        have sent them is a lower bound)."""
        self.lost_whole += n
        self.conn.note_inferred(f"deliveries of the {SIDES[d]} lost whole in a gap, counted from the "
                                f"delivery-ids around it")
        if prev is not None and not self.other_senders(d, prev):
            prev.lost_whole += n
            prev.link_credit.lost_whole(since, True)
            return
        self.count_unknown_link(d, n, "a gap")

    def count_not_captured(self, d, prev, n, since) -> None:
        """``n`` more deliveries of sender d whose transfers the snap length cut off whole (not loss),
        after its latest delivery, on link ``prev`` (None: not known), ``since`` of them in all since
        that delivery: counted as :meth:`count_lost_whole` counts those lost in a gap."""
        self.not_captured += n
        self.conn.note_inferred(f"deliveries of the {SIDES[d]} whose transfers were not captured (snap length), "
                                f"counted from the delivery-ids around them")
        if prev is not None and not self.other_senders(d, prev):
            prev.not_captured += n
            prev.link_credit.lost_whole(since, True)
            return
        self.count_unknown_link(d, n, after_missing(self.conn, d))

    def count_unknown_link(self, d, n, why) -> None:
        """``n`` deliveries of sender d not in the capture, of no known link: each link of the session
        that may have sent them has a delivery-count that is a lower bound from now on (after ``why``:
        "a gap", or bytes not captured, :func:`after_missing`)."""
        for x in self.links:
            if x.sender_dir == d and x.detach[d] is None:
                x.link_credit.lost_whole(n, False)
                x.note_unknown("delivery-count after " + why)

    def other_senders(self, d, link) -> bool:
        """Another link of this session whose sender is d and that d has not detached."""
        for x in self.links:
            if x is not link and x.sender_dir == d and x.detach[d] is None:
                return True
        return False

    @property
    def noid(self) -> list:
        """next-outgoing-id per sending peer (None: not known)."""
        return self.window.noid

    @property
    def last_iw(self) -> list:
        """incoming-window of each peer's last begin / flow."""
        return self.window.last_iw

    @property
    def last_ow(self) -> list:
        """outgoing-window of each peer's last begin / flow."""
        return self.window.last_ow

    def note_unknown(self, what: str):
        if what not in self.unknown:
            self.unknown.append(what)


class ConnectionBase:
    """A connection as the TCP layer shows it, until its first AMQP byte (see Connection).

    A connection that never carries one (a SYN alone, a scan, a TLS stream that is not read)
    stays this object for the rest of the run: its AMQP state is the class's shared, empty,
    immutable defaults below (a write to one raises, and the tracker reports it as an internal
    error: never a silent change to all)."""

    __slots__ = (
        "id", "client", "server", "syn_seen", "known_start", "state", "transport_end", "transport_time",
        "_first_ts", "_first_packet", "_last_ts", "_last_packet", "_seq", "_big", "loss", "one_way",
    )

    # what a loss, TLS and FINs write: shared defaults too, a ConnectionHeaders' own (ConnectionRules.own_state
    # makes one of a connection without AMQP bytes that loses bytes, carries TLS or sends a FIN)
    lossy = False
    tls = False
    fins = None  # directions that sent a FIN (a set, from the first)
    tls_undecrypted = None  # TLS bytes not decrypted (no key log, or records that failed)
    tls_reason = None  # the note that says why

    # the AMQP state of a connection that carried no AMQP byte (a Connection has its own)
    events = 0  # protocol headers and frames
    unknown = ()  # what could not be known
    inferred = None  # what the frames after a loss showed that the lost ones had set up
    headers = EMPTY_PAIR
    header_keys = EMPTY_PAIR
    sasl = False
    sasl_mechanisms = None
    sasl_mechanism = None
    sasl_hostname = None
    sasl_outcome = None
    sasl_time = None
    sasl_frames = ZERO_PAIR
    open = NONE_PAIR
    close = NONE_PAIR
    sessions = ()
    links = ()
    chan = EMPTY_MAPS
    pending = EMPTY_MAPS
    idle = NONE_PAIR
    idle_ref = NONE_PAIR
    last_frame = NONE_PAIR
    frames = ZERO_PAIR
    heartbeats = ZERO_PAIR
    txns = EMPTY_MAP
    negotiation = None
    stalls = ()
    frame_counts = EMPTY_MAPS
    placeholders = None
    silence = NONE_PAIR
    last_act = NONE_PAIR
    end_notes = None

    def __init__(self, cid, client, server, syn_seen):
        self.id = cid
        self.client = client
        self.server = server
        self.syn_seen = syn_seen
        self.known_start = syn_seen
        self.transport_end = None
        self.transport_time = None
        # (the times, packets and ordinal: C integers behind their properties below, NO_INT for None)
        self._first_ts = NO_INT
        self._first_packet = NO_INT
        self._last_ts = NO_INT
        self._last_packet = NO_INT
        self._seq = 0
        self._big = None  # name -> value of those that are not C integers (None until the first)
        self.loss = None  # a LossRecord from the first loss (loss.py)
        self.one_way = -1  # the peer none of whose packets the capture holds (one direction captured), or -1
        self.state = START_ENDPOINTS if syn_seen else UNKNOWN_ENDPOINTS

    # first_ts, first_packet (of its first event), last_ts, last_packet (of its latest) and seq (its place among
    # the connections, ``-j N``'s workers a key of more than 64 bits): C integers in the compiled build, not an
    # int object each (issue 40: about 150 bytes a connection); a value that is not one (None, a bigger int,
    # another type) is NO_INT in its field and kept as it is in ``_big`` (read back the same)
    def _big_value(self, name):
        big = self._big
        return None if big is None else big.get(name)

    def _keep_big(self, name, value) -> None:
        big = self._big
        if value is None:
            if big is not None:
                big.pop(name, None)
                if not big:
                    self._big = None
            return
        if big is None:
            big = self._big = {}
        big[name] = value

    def _int_field(self, name, value, current):
        """What the C integer field ``name`` (now ``current``) holds once set to ``value``: the value itself
        when it is a C integer, else NO_INT, the value then kept in ``_big``."""
        if type(value) is int:
            try:
                v = value  # (compiled, v is a C integer: the .pxd; a value beyond 64 bits raises here)
            except OverflowError:
                v = NO_INT
            if NO_INT < v <= INT_MAX:  # (compiled: a compare of C integers, no int object made)
                if current == NO_INT and self._big is not None:
                    self._keep_big(name, None)
                return v
        self._keep_big(name, value)
        return NO_INT

    @property
    def first_ts(self):
        return self._big_value("first_ts") if self._first_ts == NO_INT else self._first_ts

    @first_ts.setter
    def first_ts(self, value):
        self._first_ts = self._int_field("first_ts", value, self._first_ts)

    @property
    def first_packet(self):
        return self._big_value("first_packet") if self._first_packet == NO_INT else self._first_packet

    @first_packet.setter
    def first_packet(self, value):
        self._first_packet = self._int_field("first_packet", value, self._first_packet)

    @property
    def last_ts(self):
        return self._big_value("last_ts") if self._last_ts == NO_INT else self._last_ts

    @last_ts.setter
    def last_ts(self, value):
        self._last_ts = self._int_field("last_ts", value, self._last_ts)

    @property
    def last_packet(self):
        return self._big_value("last_packet") if self._last_packet == NO_INT else self._last_packet

    @last_packet.setter
    def last_packet(self, value):
        self._last_packet = self._int_field("last_packet", value, self._last_packet)

    @property
    def seq(self):
        return self._big_value("seq") if self._seq == NO_INT else self._seq

    @seq.setter
    def seq(self, value):
        self._seq = self._int_field("seq", value, self._seq)

    def _seen(self, ts, packet) -> None:
        """``last_ts = ts`` and, unless ``packet`` is None, ``last_packet = packet``: the two setters in one
        call, the tracker's bookkeeping of each frame (compiled, a C call on the C fields: no attribute
        look-up through the properties)."""
        if type(ts) is int and type(packet) is int and self._big is None:
            # the usual case, in one step: both C integers, nothing kept aside
            if cython.compiled:  # (each converted by one C call that tells a value beyond 64 bits by a
                # flag, not an exception: no try, whose saving of the exception state cost most of the call)
                t = PyLong_AsLongLongAndOverflow(ts, cython.address(over_t))
                p = PyLong_AsLongLongAndOverflow(packet, cython.address(over_p))
                if over_t == 0 and over_p == 0 and t != NO_INT and p != NO_INT:
                    self._last_ts = t
                    self._last_packet = p
                    return
            else:
                try:
                    t = ts
                    p = packet
                except OverflowError:  # (as compiled: a value beyond 64 bits takes the general way below)
                    t = p = NO_INT
                if NO_INT < t <= INT_MAX and NO_INT < p <= INT_MAX:
                    self._last_ts = t
                    self._last_packet = p
                    return
        self._last_ts = self._int_field("last_ts", ts, self._last_ts)
        if packet is not None:
            self._last_packet = self._int_field("last_packet", packet, self._last_packet)

    def _no_first_ts(self) -> bool:
        """``first_ts is None`` (no int object made for the question)."""
        return self._first_ts == NO_INT and self._big_value("first_ts") is None

    def peer(self, d):
        return self.client if d == 0 else self.server

    def note_loss(self, d: int, missing: int, skipped: int, ts, before: bool = False) -> None:
        """Bytes peer d sent were lost: ``missing`` in a gap, ``skipped`` to resynchronise, or
        (``before``) sent before the capture started."""
        self.own_loss().note(d, missing, skipped, ts, before)

    def own_loss(self):
        """The connection's loss record to write to: a new one if it has none, a copy of its own if it holds one
        shared by many connections (loss.one_way_record)."""
        loss = self.loss
        if loss is None:
            loss = self.loss = LossRecord()
        elif loss.shared:
            loss = self.loss = loss.copy()
        return loss

    def lost(self, d: int) -> bool:
        """Frames peer d sent may be missing from the capture (a gap, or a capture that did not
        see the connection start)."""
        if not self.known_start:
            return True
        return self.loss is not None and self.loss.lost(d)


class ConnectionHeaders(ConnectionBase):
    """A connection whose AMQP bytes so far are protocol headers (or none, but that lost bytes,
    carried TLS or sent a FIN): its header state (events, the headers and their keys, SASL, a
    mismatch), its loss and TLS flags, its FINs and its own connection machine, the AMQP state of its
    frames still the class's shared defaults (a connection that sends a header and nothing more, as
    many do, holds no more than this).  It becomes a Connection at its first frame (StateTracker._frame_conn)."""

    __slots__ = ("events", "unknown", "inferred", "headers", "header_keys", "sasl", "negotiation",
                 "lossy", "tls", "fins", "tls_undecrypted", "tls_reason", "told_before_frames")

    def __init__(self, b: ConnectionBase):
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
        self._first_ts = b._first_ts
        self._first_packet = b._first_packet
        self._last_ts = b._last_ts
        self._last_packet = b._last_packet
        self._seq = b._seq
        self._big = None if b._big is None else dict(b._big)
        self.loss = b.loss
        self.one_way = b.one_way
        # (b's own when b is one: a connection's header state is handed on whole at its first frame)
        self.events = b.events
        self.inferred = b.inferred  # what the frames after a loss showed that the lost ones had set up (texts)
        self.unknown = b.unknown  # what could not be known (a list from the first)
        self.sasl = b.sasl
        self.negotiation = b.negotiation
        # per peer: its protocol headers (names) and their keys (ConnectionRules.header): shared tuples
        # while few, see connection.appended
        self.headers = b.headers
        self.header_keys = b.header_keys
        # (a shared SharedEndpoints while it has no frame and no input waits: ConnectionRules.conn_step steps a
        # copy of its own, and shares the result again; issue 40)
        self.state = b.state
        if isinstance(b, ConnectionHeaders):
            self.told_before_frames = b.told_before_frames
        else:
            # True once a protocol header, the roles notes or the one-direction note spoke of it before
            # its first frame (ConnectionRules.told): its start is then theirs to tell, and its first
            # frame adds no "connection start" to what is unknown (StateTracker._frame_conn)
            self.told_before_frames = False

    def note_unknown(self, what: str):
        unknown = self.unknown
        if what in unknown:
            return
        if not unknown:  # (the first: a tuple shared by the connections that say the same, as many do)
            self.unknown = one_text(what)
            return
        if type(unknown) is not list:
            unknown = self.unknown = list(unknown)
        unknown.append(what)

    def note_inferred(self, what: str):
        if self.inferred is None:
            self.inferred = []
        if what not in self.inferred:
            self.inferred.append(what)


# text -> (text,): the one-text tuples of the connections' first "unknown" lines (one_text)
_ONE_TEXTS: dict = {}
ONE_TEXTS_SHARED = 256


def one_text(text: str) -> tuple:
    """``(text,)``, one object for every connection whose first unknown line is ``text`` (the first
    ONE_TEXTS_SHARED texts of the run: a hostile capture may make more)."""
    one = _ONE_TEXTS.get(text)
    if one is None:
        one = (text,)
        if len(_ONE_TEXTS) < ONE_TEXTS_SHARED:
            _ONE_TEXTS[text] = one
    return one


class Connection(ConnectionHeaders):
    """A connection that carried an AMQP frame: its AMQP state proper, made from the ConnectionBase or
    ConnectionHeaders the connection was until then (StateTracker._frame_conn, ConnectionRules.amqp)."""

    __slots__ = (
        "sasl_mechanisms",
        "sasl_mechanism", "sasl_hostname", "sasl_outcome", "sasl_time", "sasl_frames", "open", "close",
        "sessions", "links", "chan", "pending", "idle", "idle_ref", "last_frame", "_frames0", "_frames1", "heartbeats",
        "txns", "stalls", "_frame_counts", "_fc_key0", "_fc_key1", "_fc_run0", "_fc_run1",
        "placeholders", "silence", "last_act", "end_notes", "_ck0", "_ck1", "_cs0", "_cs1",
    )

    def __init__(self, b: ConnectionBase):
        ConnectionHeaders.__init__(self, b)
        self.state = own_endpoints(self.state)  # (its own from its first frame: the frames step it in place)
        self.sasl_mechanisms = None
        self.sasl_mechanism = None
        self.sasl_hostname = None
        self.sasl_outcome = None
        self.sasl_time = None
        # the state of the frames: the shared, immutable defaults of a ConnectionBase until the first
        # frame (a connection that sent protocol headers only keeps none of its own: see framed())
        self.sasl_frames = ZERO_PAIR
        self.open = NONE_PAIR
        self.close = NONE_PAIR
        self.sessions = ()
        self.links = ()
        self.chan = EMPTY_MAPS
        self.pending = EMPTY_MAPS
        self.idle = NONE_PAIR
        self.idle_ref = NONE_PAIR
        self.last_frame = NONE_PAIR
        self._frames0 = 0  # the frames of each peer (no SASL frames): C integers behind ``frames``
        self._frames1 = 0
        self.heartbeats = ZERO_PAIR
        self.txns = EMPTY_MAP
        self.stalls = ()
        self._frame_counts = EMPTY_MAPS
        # per peer: the name of its last frame and the frames of that name counted since, not yet in
        # the dict (frames of one name come in runs: a C count per frame, see count_frame)
        self._fc_key0 = None
        self._fc_key1 = None
        self._fc_run0 = 0
        self._fc_run1 = 0
        # None until the first placeholder: [sessions made, links made, the overflow session or None,
        # {session index: its overflow link}] (see UNKNOWN_SESSIONS_MAX)
        self.placeholders = None
        self.silence = NONE_PAIR
        self.last_act = NONE_PAIR
        self.end_notes = None  # {(peer, name, packet, channel): (own last_act, peer's last_act)} of detach/end/close
        # per peer: the channel of its last session frame and that session (session_on's cache; -1 / None:
        # empty), cleared by every change of ``chan``
        self._ck0 = -1
        self._ck1 = -1
        self._cs0 = None
        self._cs1 = None

    @property
    def frames(self) -> list:
        """Frames per peer, SASL frames not counted: ``[_frames0, _frames1]`` (a new list: C integers in the
        compiled build, counted with no int object per frame, see ConnectionRules.frame)."""
        return [self._frames0, self._frames1]

    @frames.setter
    def frames(self, value) -> None:
        self._frames0, self._frames1 = value

    def session_on(self, d, ch):
        """The session on peer ``d``'s channel ``ch`` (an int: ``chan[d].get(ch)``), remembered for the next
        frame: the frames of one session come in runs, so most frames compare two integers, not hash and
        look up one."""
        if d:
            if ch == self._ck1:
                return self._cs1
            m = self.chan[1]  # (a typed dict when compiled: a C look-up)
            s = m.get(ch)
            if s is not None:
                self._ck1 = ch
                self._cs1 = s
            return s
        if ch == self._ck0:
            return self._cs0
        m = self.chan[0]
        s = m.get(ch)
        if s is not None:
            self._ck0 = ch
            self._cs0 = s
        return s

    def map_channel(self, d, ch, s) -> None:
        """Peer ``d``'s channel ``ch`` is session ``s`` from now on (the one way ``chan`` gains or changes
        an entry: session_on's cache is cleared)."""
        self.chan[d][ch] = s
        self._forget_channels()

    def unmap_channel(self, d, ch) -> None:
        """Peer ``d``'s channel ``ch`` names no session any more (the one way ``chan`` loses an entry)."""
        del self.chan[d][ch]
        self._forget_channels()

    def _forget_channels(self) -> None:
        self._ck0 = -1
        self._ck1 = -1
        self._cs0 = None
        self._cs1 = None

    def framed(self) -> None:
        """The connection's first frame (the tracker calls this once, before the frame): its own
        state of the frames, made now."""
        self.sasl_frames = [0, 0]
        self.open = [None, None]
        self.close = [None, None]
        self.sessions: list[Session] = []
        self.links: list[Link] = []
        self.chan = ({}, {})  # per peer: outgoing channel -> Session (changed through map_channel / unmap_channel only)
        self._forget_channels()
        self.pending = ({}, {})  # per peer: channel of its begin awaiting the reply -> Session
        self.idle = [None, None]  # idle-time-out (seconds) peer d must respect (announced by 1-d)
        self.idle_ref = [None, None]
        self.last_frame = [None, None]
        self.heartbeats = [0, 0]
        self.txns: dict = {}  # txn-id bytes/hex -> _Txn
        self.stalls: list = []  # Stall
        self._frame_counts = ({}, {})  # per peer: performative name ("empty" for heartbeats) -> frames
        self.silence = (Silence(), Silence())  # per peer: its longest silence (ConnectionRules.frame)
        self.last_act = [None, None]  # per peer: (time, packet, name) of its last frame that ended nothing

    @property
    def frame_counts(self) -> tuple:
        """Per peer: performative name ("empty" for heartbeats) -> frames (the runs counted so far
        added first)."""
        self._fc_flush(0)
        self._fc_flush(1)
        return self._frame_counts

    def count_frame(self, d, key) -> None:
        """One more frame named ``key`` from peer ``d``: a C count while the name repeats; a new name
        goes into the dict at once (its order is that of first frames, as before the runs)."""
        if d == 0:
            if key is self._fc_key0:
                self._fc_run0 += 1
                return
        elif key is self._fc_key1:
            self._fc_run1 += 1
            return
        self._fc_flush(d)
        fc = self._frame_counts[d]
        fc[key] = fc.get(key, 0) + 1
        if d == 0:
            self._fc_key0 = key
        else:
            self._fc_key1 = key

    def _fc_flush(self, d) -> None:
        """The run of peer ``d`` added to its dict."""
        if d == 0:
            run = self._fc_run0
            if run:
                fc = self._frame_counts[0]
                fc[self._fc_key0] += run
                self._fc_run0 = 0
        else:
            run = self._fc_run1
            if run:
                fc = self._frame_counts[1]
                fc[self._fc_key1] += run
                self._fc_run1 = 0

