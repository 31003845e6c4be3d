"""Streaming TCP reassembly: Segment in, StreamOpened/Data/Gap/Closed out.

Pure Python, no IO; all state is plain objects, dicts and lists (picklable).

Connections
-----------
A connection is identified by its 4-tuple.  The *client* is the sender of a
SYN without ACK (or the receiver of a SYN/ACK when the SYN was not captured).
Without a handshake (capture joined mid-connection) roles come from evidence
(:func:`role_evidence`), never from which packet happened to be captured first:
the side whose port is in ``server_ports`` is the server; otherwise the side
with the lower port, when that port is below 1024 (a well-known port), or when
only the other port is in the ephemeral range (from EPHEMERAL_MIN, 32768:
Linux's default range starts there, IANA's at 49152).  Without such evidence the
sender of the first packet is taken as the client and the roles are
``"unknown"``; the dissector may then settle them from the AMQP protocol
headers (or, on AMQP ports only, the first open) and call :meth:`TcpReassembler.swap_roles`.  ``conn`` ids are ``"<client>-<server>"`` with
:func:`amqp_dissect.events.endpoint` (``"127.0.0.1:40000-127.0.0.1:5672"``,
``"[::1]:40000-[::1]:5672"``); a later connection with the same id (4-tuple
reused after a close, an idle timeout or an eviction) gets ``"#2"``, ``"#3"``...

A packet without SYN and without payload (a pure ACK, a FIN or RST) on an
unknown 4-tuple does not open a connection: it carries no data, and the next
data packet opens it just the same.

Sequence space
--------------
Each direction keeps ``pos``, an *unwrapped* (64-bit, never wrapping) position
of the next expected byte; incoming 32-bit sequence numbers are mapped to it
with a signed modular distance, so wraparound needs no special cases.
Out-of-order data (Wireshark: "out-of-order", "previous segment not captured")
is kept in a sorted list of non-overlapping pieces (first copy of a byte wins;
a later copy is a retransmission), each with the time and number of the packet
that carried it.  Holes are reported as StreamGap with the exact
sequence-space size when they cannot be filled any more: the peer acknowledged
bytes past the hole and the reorder window closed without them (below), the
per-direction buffer exceeded ``max_buffered`` bytes (or MAX_PIECES pieces), a
FIN or RST was seen beyond the hole, the connection went idle, was evicted, or
:meth:`TcpReassembler.finish` was called.  Bytes acknowledged before any later
byte was captured are such a hole too (the next byte expected is then the one
after the acknowledged ones).

Reorder window
--------------
An ACK past a hole says the missing bytes were sent, not that the capture lost
them: a multi-queue NIC captures adjacent packets swapped (the ACK first, the
segment it acknowledges one packet later).  So the hole is declared lost only
when ``reorder_packets`` (REORDER_PACKETS) further packets of the connection,
or ``reorder_seconds`` (REORDER_SECONDS) of capture time, passed without the
missing bytes; a late segment inside the window fills it.  While the window is
open, the events of the direction that acknowledged the hole are queued behind
it (they may answer the missing bytes: a disposition of a transfer) and follow
the filled (or declared) bytes.  When both directions have such a hole, both
buffer behind it, and their bytes are released merged by packet number (each
direction in its own order), as the capture saw them.  A segment with SYN, FIN
or RST closes the window at once (holes still open become gaps).  A connection
without such a hole pays one attribute test per packet.

Stamps
------
StreamData carries the time and number of the packet that carried its bytes,
however long they were held (so a frame is reported at the packet of its last
byte, Wireshark's rule for reassembled PDUs); StreamGap those of the packet
that carried the first byte after the hole, or of the packet that declared it
when no later byte was captured, or, when the peer's ACK proved the hole and
that packet came first, those of the ACKing packet (Wireshark's "ACKed segment
that wasn't captured"): the lost bytes were sent before it, so a later event is
never put before the loss in time.  Other events carry ``ts``/``packet`` of the
packet whose arrival made them happen (for a timeout sweep, the packet being
fed when the sweep ran).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict

from ..errors import WARN, ExpertNote
from ..times import ns
from ..events import (
    ACK,
    FIN,
    RST,
    SNAP_CUT,
    SYN,
    PacketNote,
    Segment,
    StreamClosed,
    StreamData,
    StreamGap,
    StreamOpened,
    endpoint,
)

MASK = 0xFFFFFFFF
HALF = 0x80000000
EPHEMERAL_MIN = 32768  # client ports from here (Linux: 32768-60999; IANA, Windows, macOS: 49152-65535)
# Out-of-order pieces kept per direction, besides the byte bound: keeps the
# per-insert list work (and per-piece overhead) bounded against floods of tiny
# segments.  4 MiB of full-size segments is ~2900 pieces.
MAX_PIECES = 8192
# The reorder window (see the module docstring): a hole the peer acknowledged is declared lost
# only when this many further packets of the connection, or this much capture time, passed
# without the missing bytes.
REORDER_PACKETS = 16
REORDER_SECONDS = 0.5
# A connection idle this many seconds of capture time is expired (its state freed, said in the
# report): the default of every runner's idle_timeout, written here only.
IDLE_TIMEOUT = 900.0
# One direction captured: a direction none of whose packets is in the capture while the other's ACKs
# moved on this many times (each a segment or SYN / FIN of the unseen side acknowledged) is declared
# missing at once; a direction still without a packet when the connection ends is declared then.
ONE_WAY_ACKS = 3
#: the group of the PacketNote that says one direction of a connection is not in the capture
#: (``extra["missing"]``: the direction, 0 the client's, 1 the server's)
ONE_DIRECTION = "one-direction"

# a direction's nxt before its first segment, and once closed (every sequence number is >= 0); its isn
# while no SYN of it was seen
NOT_STARTED = -2
CLOSED_DIR = -1
NO_SYN = -1

_OPEN = 0
_IGNORED = 1
_CLOSED = 2  # both FINs or RST seen: kept for a grace period to absorb late packets


class _Dir:
    """One direction of a connection."""

    __slots__ = ("pos", "nxt", "isn", "starts", "datas", "stamps", "buffered", "cuts")

    def __init__(self) -> None:
        self.pos = 0  # unwrapped position of the next expected byte
        # pos & MASK (NOT_STARTED: not initialised yet; CLOSED_DIR: closed: FIN delivered, or the connection);
        # C integers in the compiled build, as pos, isn and buffered (no int object per direction)
        self.nxt = NOT_STARTED
        self.isn = NO_SYN  # sequence number of this direction's SYN, if seen
        # out-of-order pieces: unwrapped starts (sorted) and their bytes; None while there are none
        # (most directions never hold one: a connection that is only a SYN costs no lists)
        self.starts: list[int] | None = None
        self.datas: list[bytes] | None = None
        # the time and packet number of the segment that carried each piece (its stamp when
        # delivered), flat: [ts0, packet0, ts1, packet1, ...]
        self.stamps: list | None = None
        self.buffered = 0
        # bytes the snap length cut off the end of buffered (out-of-order) segments: unwrapped start
        # -> (end, time, packet), given as not captured when the stream reaches them; None while none
        self.cuts: dict | None = None

    def free_buffers(self) -> None:
        """Its out-of-order pieces and cuts dropped (its connection ignored or closed)."""
        self.starts = None
        self.datas = None
        self.stamps = None
        self.buffered = 0
        self.cuts = None


# a connection's ack_moves while it has seen no ACK number (see _Conn)
NO_ACK = -1


class _Conn:
    """One connection: a few words.  A SYN-only (half-open) connection is this object, its key and
    one direction; the other direction is made at its first segment."""

    __slots__ = ("id", "key", "cd", "d0", "d1", "state", "last_ts", "fins", "held", "ack_first", "ack_mark",
                 "ack_moves", "missing", "older", "newer")

    def __init__(self, cid: str, key: str, cd: int, ts: int) -> None:
        self.id = cid
        self.key = key  # its key in the tables (see TcpReassembler.feed): one for both directions
        self.cd = cd  # the direction (0: client to server) of the key's first endpoint
        self.d0: _Dir | None = None  # client -> server, made at its first segment
        self.d1: _Dir | None = None  # server -> client
        self.state = _OPEN
        self.last_ts = ts
        self.fins = 0  # bit per direction that sent a FIN (used while ignored)
        self.held: _Hold | None = None  # the reorder window, while one is open
        # while only one direction has packets: the ACK numbers it sent, the first and the latest, and how
        # often it moved on (see ONE_WAY_ACKS; NO_ACK: none yet, as for a SYN-only connection).  C integers
        # of the connection in the compiled build (issue 40: no object of their own)
        self.ack_first = 0
        self.ack_mark = 0
        self.ack_moves = NO_ACK
        self.missing = -1  # the direction declared not captured (see ONE_DIRECTION), or -1
        # the keys of the open (or ignored) connections active just before it and just after it (None: it is the
        # least / most recently active): see _ActivityOrder
        self.older: str | None = None
        self.newer: str | None = None


class _Hold:
    """An open reorder window of a connection (see the module docstring)."""

    __slots__ = ("queue", "left", "end", "hole", "fin", "rst")

    def __init__(self, left: int, end: int) -> None:
        # the events of segments of a direction without such a hole, queued (they may answer the
        # missing bytes): (direction, unwrapped position its ACK reached in the other direction or
        # -1, packet, events)
        self.queue: list = []
        self.left = left  # packets of the connection left in the window
        self.end = end  # capture time at which the window closes
        # per direction, the unwrapped position up to which the peer acknowledged bytes not
        # delivered yet (the hole the window waits on), or -1
        self.hole = [-1, -1]
        # per direction, a FIN captured in the window: (unwrapped position, time, packet), or None
        self.fin = [None, None]
        self.rst = None  # a RST captured in the window: (direction, time, packet)


def _covered(D: _Dir) -> int:
    """Where the bytes of ``D`` held contiguously from its next expected byte end."""
    pos = D.pos
    starts = D.starts
    if starts:
        datas = D.datas
        cuts = D.cuts
        for i in range(len(starts)):
            s = starts[i]
            if s > pos:
                break
            e = s + len(datas[i])
            if e > pos:
                pos = e
            if cuts is not None and pos in cuts:  # (bytes the snap length cut off: not a hole)
                pos = cuts[pos][0]
    return pos


def _note_cut(D: _Dir, cut: int, end: int, ts: int, packet: int) -> None:
    """Bytes [``cut``, ``end``) the snap length cut off a segment the stream has not reached:
    kept (bounded, as the pieces) until :meth:`TcpReassembler._drain` reaches them."""
    cuts = D.cuts
    if cuts is None:
        cuts = D.cuts = {}
    elif len(cuts) >= MAX_PIECES:
        return  # (then a gap as any other)
    old = cuts.get(cut)
    if old is None or old[0] < end:
        cuts[cut] = (end, ts, packet)


def _passed_cuts(D: _Dir, pos: int) -> None:
    """Forget the cuts the stream passed (their rest, when it stands inside one, stays)."""
    cuts = D.cuts
    for c in [c for c in cuts if c < pos]:
        e, cts, cpk = cuts.pop(c)
        if e > pos and pos not in cuts:
            cuts[pos] = (e, cts, cpk)
    if not cuts:
        D.cuts = None


def _server_is_dst(sport: int, dport: int, server_ports) -> int:
    """Without a SYN: 1 if the receiver of a segment from ``sport`` to ``dport`` is the server, 0
    if its sender is, -1 when the ports say nothing (see :func:`role_evidence`)."""
    a = sport in server_ports
    b = dport in server_ports
    if a != b:
        return 1 if b else 0
    if sport != dport:
        if (sport < 1024 or dport < 1024) or ((sport >= EPHEMERAL_MIN) != (dport >= EPHEMERAL_MIN)):
            return 1 if dport < sport else 0
    return -1


def role_evidence(client_port: int, server_port: int, server_ports) -> str:
    """What says which side of a connection seen without its SYN is the server: ``"port"`` (its
    port is an AMQP port, or one given with --port, and the other's is not), ``"well-known port"``
    (below 1024, the other's not), ``"ephemeral port"`` (only the client's is from
    EPHEMERAL_MIN), or ``"unknown"`` (the first sender was taken as the client)."""
    if _server_is_dst(client_port, server_port, server_ports) < 0:
        return "unknown"
    if (client_port in server_ports) != (server_port in server_ports):
        return "port"
    if client_port < 1024 or server_port < 1024:
        return "well-known port"
    return "ephemeral port"


def renamed(ev, cid: str):
    """The event ``ev`` of a connection whose roles were swapped (:meth:`TcpReassembler.swap_roles`):
    connection id ``cid``, direction flipped."""
    cls = type(ev)
    if cls is StreamData:
        return StreamData(cid, 1 - ev.direction, ev.data, ev.ts, ev.packet)
    if cls is StreamGap:
        return StreamGap(cid, 1 - ev.direction, ev.size, ev.ts, ev.packet)
    if cls is StreamClosed:
        return StreamClosed(cid, ev.direction if ev.direction < 0 else 1 - ev.direction, ev.kind, ev.ts, ev.packet)
    if cls is PacketNote:
        extra = ev.extra
        if ev.note.group == ONE_DIRECTION:
            extra = {**extra, "missing": 1 - extra["missing"]}
        return PacketNote(ev.packet, ev.ts, ev.note, cid, extra)
    return ev


def _get_dir(conn: _Conn, d: int) -> _Dir:
    """Direction ``d`` of ``conn``, made on first use."""
    D = conn.d1 if d else conn.d0
    if D is None:
        D = _Dir()
        if d:
            conn.d1 = D
        else:
            conn.d0 = D
    return D


def _first_ack(conn: _Conn, ack: int) -> None:
    """The first ACK number a connection of one direction with packets sent (see _unseen_acked)."""
    conn.ack_first = ack
    conn.ack_mark = ack
    conn.ack_moves = 0


def _unseen_acked(conn: _Conn, d: int, ack: int, ts: int, packet: int, out: list) -> None:
    """A segment of direction ``d`` with an ACK while the other direction has no packet in the
    capture: ONE_WAY_ACKS moves of the ACK number declare that direction missing."""
    if conn.ack_moves == NO_ACK:
        _first_ack(conn, ack)
        return
    if ((ack - conn.ack_mark + HALF) & MASK) - HALF <= 0:
        return
    conn.ack_mark = ack
    conn.ack_moves += 1
    if conn.ack_moves >= ONE_WAY_ACKS:
        _one_way(conn, 1 - d, ts, packet, out)


def _one_way(conn: _Conn, m: int, ts: int, packet: int, out: list) -> None:
    """Declare direction ``m`` of ``conn`` not captured: a PacketNote (group ONE_DIRECTION)
    saying why."""
    conn.missing = m
    if conn.ack_moves > 0:
        who, other = ("client", "server") if m == 0 else ("server", "client")
        acked = ((conn.ack_mark - conn.ack_first + HALF) & MASK) - HALF
        why = (f"the {other}'s ACKs acknowledge {acked:,} bytes of the {who} ({conn.ack_moves} times moved on) "
               f"and none of its packets was captured")
    else:  # (the same words for every such connection: one note and one extra, shared)
        out.append(PacketNote(packet, ts, _UNSEEN_NOTES[m], conn.id, _MISSING_EXTRAS[m]))
        return
    out.append(PacketNote(packet, ts, ExpertNote(WARN, ONE_DIRECTION, f"one direction captured: {why}"),
                          conn.id, {"missing": m}))


# the note and the extra of a direction none of whose packets was captured, the other's ACKs never moved on,
# per missing direction: one object each for all such connections (read only, as every note and extra once
# made; issue 40: thousands of connections that sent a header alone end with one each, all at once)
_UNSEEN_NOTES = tuple(
    ExpertNote(WARN, ONE_DIRECTION, f"one direction captured: no packet of the {who} in the capture, only the {other}'s")
    for who, other in (("client", "server"), ("server", "client")))
_MISSING_EXTRAS = ({"missing": 0}, {"missing": 1})


def _merge_in_capture_order(a: list | None, b: list | None, out: list) -> None:
    """Append the events of two directions to ``out``, each list in its own order, interleaved
    by the number of the packet that carried them (the earlier packet first)."""
    if not a or not b:
        if a:
            out.extend(a)
        elif b:
            out.extend(b)
        return
    i = 0
    j = 0
    na = len(a)
    nb = len(b)
    while i < na and j < nb:
        if b[j].packet < a[i].packet:
            out.append(b[j])
            j += 1
        else:
            out.append(a[i])
            i += 1
    out.extend(a[i:])
    out.extend(b[j:])


def buffer_piece(D: _Dir, a: int, data: bytes, ts: int, packet: int) -> None:
    """Buffer out-of-order bytes [a, a+len), stamped ``ts``/``packet``; bytes already buffered win."""
    starts = D.starts
    datas = D.datas
    stamps = D.stamps
    if starts is None:
        starts = D.starts = []
        datas = D.datas = []
        stamps = D.stamps = []
    b = a + len(data)
    i = bisect_right(starts, a) - 1
    if i >= 0:
        pe = starts[i] + len(datas[i])
        if pe > a:
            if pe >= b:
                return
            data = data[pe - a :]
            a = pe
    i += 1
    n = len(starts)
    while a < b:
        if i < n and starts[i] < b:
            ns = starts[i]
            if ns > a:
                starts.insert(i, a)
                datas.insert(i, data[: ns - a])
                stamps[2 * i:2 * i] = (ts, packet)
                D.buffered += ns - a
                i += 1
                n += 1
            ne = ns + len(datas[i])
            if ne >= b:
                return
            data = data[ne - a :]
            a = ne
            i += 1
        else:
            starts.insert(i, a)
            datas.insert(i, data)
            stamps[2 * i:2 * i] = (ts, packet)
            D.buffered += b - a
            return


def _held_ack(conn: _Conn, H: _Hold, d: int, ack: int) -> int:
    """The unwrapped position an ACK of direction ``d`` reached in the other direction while the reorder
    window ``H`` is open (-1 when that direction has no byte yet); a hole of it acknowledged further
    grows to there."""
    O = conn.d0 if d else conn.d1
    if O is None or O.nxt < 0:
        return -1
    apos = O.pos + (((ack - O.nxt + HALF) & MASK) - HALF)
    hole = H.hole
    if apos > O.pos and apos > hole[1 - d]:
        hole[1 - d] = apos
    return apos


def _waiting(conn: _Conn, H: _Hold) -> bool:
    """Whether the reorder window ``H`` still waits for bytes: a hole of a direction not closed yet,
    neither covered by the bytes held nor ended by a FIN kept in the window."""
    hole = H.hole
    for x in (0, 1):
        if hole[x] >= 0:
            X = conn.d1 if x else conn.d0
            if X.nxt == CLOSED_DIR:
                continue
            c = _covered(X)
            f = H.fin[x]
            if c >= hole[x] or (f is not None and c >= f[0] and hole[x] <= f[0] + 1):  # (+1: the FIN's)
                continue
            return True
    return False


def _server_endpoint(cache: dict, ip, port) -> str:
    """The endpoint text of a server: one string for all its connections (``cache``: a reassembler's, bounded)."""
    k = (ip, port)
    e = cache.get(k)
    if e is None:
        if len(cache) >= 1024:
            cache.clear()
        e = cache[k] = endpoint(ip, port)
    return e


class _ActivityOrder:
    """The open (and ignored) connections of a reassembler's table in order of activity: linked from the key
    of the least recently active (``oldest``) to that of the most (``newest``) through their fields older /
    newer (issue 40: two words a connection, not an ordered dict's node; keys, not the connections, so a
    pickle of many connections stays flat).  ``table`` is the reassembler's dict of connections by key."""

    __slots__ = ("table", "oldest", "newest")

    def __init__(self, table: dict) -> None:
        self.table = table
        self.oldest: str | None = None
        self.newest: str | None = None

    def touch(self, conn: _Conn) -> None:
        """A packet of ``conn`` (not the most recently active): it is now."""
        self.unlink(conn)
        self.link_newest(conn)

    def link_newest(self, conn: _Conn) -> None:
        """``conn`` (in the table, not linked) at the newest end."""
        last = self.newest
        conn.older = last
        conn.newer = None
        if last is None:
            self.oldest = conn.key
        else:
            O = self.table[last]
            O.newer = conn.key
        self.newest = conn.key

    def unlink(self, conn: _Conn) -> None:
        """``conn`` out of the order (its neighbours linked)."""
        older = conn.older
        newer = conn.newer
        if older is None:
            self.oldest = newer
        else:
            O = self.table[older]
            O.newer = newer
        if newer is None:
            self.newest = older
        else:
            O = self.table[newer]
            O.older = older
        conn.older = None
        conn.newer = None


class TcpReassembler:
    """Per-direction in-order delivery of TCP payload, with gaps as events.

    ``feed`` one :class:`Segment` per packet (in capture order) and get a list
    of events; ``finish`` at the end.  See the module docstring.
    """

    def __init__(
        self,
        server_ports: frozenset[int] = frozenset({5672, 5671}),
        max_buffered: int = 4 * 1024 * 1024,
        idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = 100_000,
        close_grace: float = 60.0,
        sweep_interval: float = 1.0,
        reorder_packets: int = REORDER_PACKETS,
        reorder_seconds: float = REORDER_SECONDS,
    ) -> None:
        # the durations are given in seconds and kept in nanoseconds, the unit of every ``ts``
        self.server_ports = frozenset(server_ports)
        self.reorder_packets = reorder_packets
        self.reorder_seconds = ns(reorder_seconds)  # (nanoseconds, despite the name: the option's)
        self.max_buffered = max_buffered
        self.idle_timeout = ns(idle_timeout)
        self.max_connections = max_connections
        self.close_grace = ns(close_grace)
        sweep = ns(sweep_interval)
        self.sweep_interval = min(sweep, self.idle_timeout, self.close_grace) if close_grace > 0 else sweep
        # connection key (_key) -> connection: open and ignored ones (in _order), closed ones kept for late packets
        self._table: dict[str, _Conn] = {}
        self._order = _ActivityOrder(self._table)
        self._closed: OrderedDict[str, _Conn] = OrderedDict()
        # base id -> number of connections that used it, but the one open now: while a connection is open its
        # entry in _by_id (its id, "#n" from the second) says so, and its number is written here when it leaves
        # (_untrack; issue 40: one dict entry per open connection, not two)
        self._ids: dict[str, int] = {}
        self._by_id: dict[str, _Conn] = {}  # open (and ignored) connections by id, in order of opening
        self._endpoints: dict[tuple, str] = {}  # (ip, port) -> endpoint text of recent servers (shared)
        self._next_sweep: int | None = None
        self._last_ts = 0
        self._last_packet = 0

    # ------------------------------------------------------------------ API
    @property
    def open_connections(self) -> int:
        """Connections tracked and not closed (including ignored ones)."""
        return len(self._table)

    @property
    def tracked_tuples(self) -> int:
        """Connection keys held (1 per open, ignored or closing connection)."""
        return len(self._table) + len(self._closed)

    def buffered_bytes(self) -> int:
        """Out-of-order bytes held, over all connections."""
        return sum(D.buffered for c in self._table.values() for D in (c.d0, c.d1) if D is not None)

    def ignore(self, conn: str) -> None:
        """Stop tracking ``conn``: free its buffers; later packets are dropped
        without events until it closes and its 4-tuple is reused."""
        c = self._by_id.get(conn)
        if c is not None and c.state == _OPEN:
            c.state = _IGNORED
            for D in (c.d0, c.d1):
                if D is not None:
                    D.free_buffers()
            c.held = None

    def swap_roles(self, conn: str) -> str | None:
        """The client of open connection ``conn`` is its server and the other way round (evidence
        found above TCP: see dissect.py): the connection gets the id of the swapped endpoints, its
        directions are exchanged, and the events it still holds are renamed (:func:`renamed`).
        Returns the new id (None if ``conn`` is not open)."""
        c = self._by_id.get(conn)
        if c is None or c.state != _OPEN:
            return None
        client, server = conn.split("#", 1)[0].split("-")
        base = f"{server}-{client}"
        n = self._ids.get(base, 0) + 1
        cid = base if n == 1 else f"{base}#{n}"
        self._untrack(conn)
        self._by_id[cid] = c
        c.id = cid
        c.cd ^= 1
        c.d0, c.d1 = c.d1, c.d0
        if c.missing >= 0:
            c.missing = 1 - c.missing
        H = c.held
        if H is not None:
            H.hole.reverse()
            H.queue = [(1 - d, apos, pk, [renamed(e, cid) for e in evs]) for d, apos, pk, evs in H.queue]
        return cid

    def feed(self, seg: Segment, ts: int, packet: int, wire_len: int | None = None) -> list:
        """Process one segment; return the events it causes.

        ``wire_len``: payload length on the wire when the capture truncated
        the payload (see netparse.TruncatedPacket); the uncaptured rest is
        reported as a gap.
        """
        self._last_ts = ts
        self._last_packet = packet
        out: list = []
        if self._next_sweep is None:
            self._next_sweep = ts + self.sweep_interval
        elif ts >= self._next_sweep:
            self._sweep(ts, packet, out)
            self._next_sweep = ts + self.sweep_interval
        # unpacked once: indexing a NamedTuple from compiled code goes through a Python-level __getitem__
        src, dst, sport, dport, sseq, ack, flags, payload, _v = seg
        # the connection key, the same for both directions: the endpoint with the lower port (or
        # address, when the ports are equal) first, both ports in one int, in one text (issue 40: no tuple
        # holding an address text of its own per connection); flip: the sender is second
        if sport < dport or (sport == dport and src <= dst):
            key = f"{src} {dst} {(sport << 16) | dport}"
            flip = 0
        else:
            key = f"{dst} {src} {(dport << 16) | sport}"
            flip = 1
        conn = self._table.get(key)
        if conn is None:
            self._untracked(seg, key, flip, ts, packet, wire_len, out)
            return out
        if ts - conn.last_ts > self.idle_timeout:
            self._expire(conn, ts, packet, out, "idle")
            self._new_conn(seg, key, flip, ts, packet, wire_len, out)
            return out
        conn.last_ts = ts
        if conn.newer is not None:
            self._order.touch(conn)
        d = conn.cd ^ flip
        if conn.state != _OPEN:
            self._ignored_segment(conn, seg, key, flip, d, ts, packet, wire_len, out)
            return out
        if conn.held is not None and self._held_segment(conn, d, seg, ts, packet, wire_len, out):
            return out
        if d:
            D = conn.d1
            O = conn.d0
        else:
            D = conn.d0
            O = conn.d1
        if flags & ACK and self._ack_taken(conn, d, O, seg, ack, ts, packet, wire_len, out):
            return out
        if D is None:
            D = _get_dir(conn, d)
        # fast path: in-order data, nothing buffered, no SYN/FIN/RST
        elif D.nxt == sseq and not (flags & 7) and not D.buffered and wire_len is None:
            if payload:
                n = len(payload)
                D.pos += n
                # (below 2**32 the same number: one int object for both, not two, in pure Python)
                D.nxt = D.pos if D.pos <= MASK else D.pos & MASK
                out.append(StreamData(conn.id, d, payload, ts, packet))
            return out
        self._slow_segment(conn, d, D, seg, key, flip, ts, packet, wire_len, out)
        return out

    def _untracked(self, seg: Segment, key: str, flip: int, ts: int, packet: int, wire_len: int | None,
                   out: list) -> None:
        """A segment of a 4-tuple not open: a new connection, unless it is a late packet of one closed
        within the grace period (dropped; a new SYN opens a new connection)."""
        conn = self._closed.get(key)
        if conn is not None:
            flags = seg[6]
            D = conn.d1 if conn.cd ^ flip else conn.d0
            if not ((flags & SYN and not flags & ACK and (D is None or D.isn != seg[4]))
                    or ts - conn.last_ts > self.close_grace):
                return
            self._unlink(conn)
        self._new_conn(seg, key, flip, ts, packet, wire_len, out)

    def _ignored_segment(self, conn: _Conn, seg: Segment, key: str, flip: int, d: int, ts: int, packet: int,
                         wire_len: int | None, out: list) -> None:
        """A segment of an ignored connection: no events, but its end (FINs, RST) or reuse (a new SYN)."""
        flags = seg[6]
        D = conn.d1 if d else conn.d0
        if flags & SYN and not flags & ACK and D is not None and D.isn != seg[4] and D.nxt != NOT_STARTED:
            self._reused(conn, seg, key, flip, ts, packet, wire_len, out)
        elif flags & RST:
            self._retire(conn, ts)
        elif flags & FIN:
            conn.fins |= 1 << d
            if conn.fins == 3:
                self._retire(conn, ts)

    def _held_segment(self, conn: _Conn, d: int, seg: Segment, ts: int, packet: int, wire_len: int | None,
                      out: list) -> bool:
        """A segment while the reorder window is open: True when the window took it (see _held_feed);
        a SYN closes the window first (False: the segment goes on as any other)."""
        if not seg[6] & SYN:
            self._held_feed(conn, d, seg, ts, packet, wire_len, out)
            return True
        self._declare(conn, ts, packet, out)
        if conn.state != _OPEN:  # (its FINs were both in the window)
            out.extend(self.feed(seg, ts, packet, wire_len))
            return True
        return False

    def _ack_taken(self, conn: _Conn, d: int, O: _Dir, seg: Segment, ack: int, ts: int, packet: int,
                   wire_len: int | None, out: list) -> bool:
        """The ACK number ``ack`` of a segment of direction ``d``, its peer ``O`` (None: no packet of
        it yet, see _unseen_acked): True when the reorder window took the segment (see _peer_acked)."""
        if O is None:
            if conn.missing < 0:
                _unseen_acked(conn, d, seg[5], ts, packet, out)
            return False
        # the peer's bytes this segment acknowledges were sent: any of them not captured by the end of
        # the reorder window are lost
        onxt = O.nxt
        return onxt >= 0 and onxt != ack and self._peer_acked(conn, d, O, seg, ack - onxt, ts, packet, wire_len, out)

    def _slow_segment(self, conn: _Conn, d: int, D: _Dir, seg: Segment, key: str, flip: int, ts: int, packet: int,
                      wire_len: int | None, out: list) -> None:
        """A segment of an open connection off the fast path: a new SYN (the 4-tuple reused), a FIN
        captured before bytes it follows (see _fin_early), or any other (_segment)."""
        flags = seg[6]
        if flags & SYN and not flags & ACK and D.isn != seg[4] and D.nxt != NOT_STARTED:
            self._reused(conn, seg, key, flip, ts, packet, wire_len, out)
        elif not ((flags & 7) == FIN and self._fin_early(conn, d, D, seg, ts, packet, wire_len, out)):
            self._segment(conn, d, D, seg, ts, packet, wire_len, out)

    def _peer_acked(self, conn: _Conn, d: int, O: _Dir, seg: Segment, moved: int, ts: int, packet: int,
                    wire_len: int | None, out: list) -> bool:
        """The segment's ACK moved ``moved`` (a 32-bit difference) from the next byte expected of
        the peer ``O``: bytes acknowledged and not captured yet open the reorder window (True: the
        window took the segment), or, for a SYN or without a window, are lost at once."""
        dist = ((moved + HALF) & MASK) - HALF
        if dist <= 0:
            return False
        if not seg[6] & SYN and self.reorder_packets > 0:
            conn.held = _Hold(self.reorder_packets + 1, ts + self.reorder_seconds)  # (this packet counts too)
            self._held_feed(conn, d, seg, ts, packet, wire_len, out)
            return True
        self._drain(conn, 1 - d, O, ts, packet, out, O.pos + dist)
        return False

    def _fin_early(self, conn: _Conn, d: int, D: _Dir, seg: Segment, ts: int, packet: int, wire_len: int | None,
                   out: list) -> bool:
        """A FIN (without SYN or RST) captured before bytes it follows: they were sent; the reorder
        window waits for them (True: it took the segment)."""
        if self.reorder_packets <= 0 or D.nxt < 0:
            return False
        start = D.pos + (((seg[4] - D.nxt + HALF) & MASK) - HALF)
        if start <= _covered(D):
            return False
        conn.held = _Hold(self.reorder_packets + 1, ts + self.reorder_seconds)
        conn.held.hole[d] = start
        self._held_feed(conn, d, seg, ts, packet, wire_len, out)
        return True

    def sweep(self, ts: int, packet: int) -> list:
        """Expire connections idle for longer than ``idle_timeout`` as of ``ts``.

        ``feed`` does this by itself; a caller replaying the sweeps that other
        traffic of the same capture would have driven (the Spark job, which sees
        one flow at a time) calls it directly.
        """
        out: list = []
        self._sweep(ts, packet, out)
        return out

    def drive_sweeps_externally(self) -> None:
        """Switch off the idle sweep :meth:`feed` runs by itself: the caller runs :meth:`sweep` at
        the ticks of a clock over more records than this reassembler sees (a shard of a capture:
        see :mod:`amqp_dissect.shard`)."""
        self._next_sweep = float("inf")

    @property
    def has_open_connections(self) -> bool:
        return bool(self._table)

    def finish(self, ts: int | None = None, packet: int | None = None) -> list:
        """End of capture: flush pending gaps and data, close every open connection
        with StreamClosed(kind "end", direction -1).  The reassembler is empty afterwards.

        ``packet``: the capture's last packet number, when later packets of the
        capture were not fed here (default: the last packet fed)."""
        out: list = []
        for evs in self.finishing(ts, packet):
            out.extend(evs)
        return out

    def finishing(self, ts: int | None = None, packet: int | None = None):
        """:meth:`finish` a connection at a time, in order of opening: the lists of events whose concatenation
        is finish's, each connection forgotten before its list is handed on (issue 40: the end of 100,000 open
        connections holds one connection's events and state at a time, not all of them at once).  The
        reassembler is empty once the last is taken."""
        if ts is None:
            ts = self._last_ts
        packet = self._last_packet if packet is None else max(packet, self._last_packet)
        for conn in list(self._by_id.values()):  # (in order of opening)
            out: list = []
            if conn.state == _OPEN:
                self._flush_all(conn, ts, packet, out)
                if conn.state == _OPEN:  # (not closed by FINs held in a reorder window)
                    out.append(StreamClosed(conn.id, -1, "end", ts, packet))
            self._untrack(conn.id)
            self._unlink(conn)
            if out:
                yield out
        self._closed.clear()
        self._table.clear()
        # (emptied by pops, _by_id kept a table the size of the most connections open at once: about 10 MB
        # for 200,000, held after the end for nothing)
        self._by_id = {}
        self._order.oldest = self._order.newest = None

    def forget_ended(self) -> None:
        """After :meth:`finish`, for a reassembler that is fed no more: the numbers of the ended connections'
        ids (``#n`` of a reused 4-tuple) let go, one dict entry per connection of the capture (200,000
        connections: about 10 MB).  Fed again, a reused 4-tuple would get an id of the capture again."""
        self._ids = {}

    # ----------------------------------------------------------- connections
    def _new_conn(self, seg: Segment, key: str, flip: int, ts: int, packet: int, wire_len: int | None,
                  out: list) -> None:
        src, dst, sport, dport = seg[0], seg[1], seg[2], seg[3]
        flags = seg[6]
        if flags & SYN:
            syn = True
            client_is_src = not flags & ACK  # SYN: sender is the client; SYN/ACK: receiver is
        else:
            if not seg[7] and wire_len is None:
                return  # pure ACK / FIN / RST of an unknown connection: nothing to deliver
            if flags & RST:
                return
            syn = False
            client_is_src = _server_is_dst(sport, dport, self.server_ports) != 0  # (unknown: the sender)
        if len(self._table) >= self.max_connections:
            self._evict(ts, packet, out)
        if client_is_src:
            client, server = endpoint(src, sport), _server_endpoint(self._endpoints, dst, dport)
            d = 0
        else:
            client, server = endpoint(dst, dport), _server_endpoint(self._endpoints, src, sport)
            d = 1
        base = f"{client}-{server}"
        n = self._ids.get(base, 0) + 1  # (none of this base is open: it would be this 4-tuple's, ended)
        cid = base if n == 1 else f"{base}#{n}"
        conn = _Conn(cid, key, d ^ flip, ts)
        if flags & ACK:
            _first_ack(conn, seg[5])
        self._table[key] = conn
        self._order.link_newest(conn)
        self._by_id[cid] = conn
        out.append(StreamOpened(cid, client, server, ts, packet, syn))
        self._segment(conn, d, _get_dir(conn, d), seg, ts, packet, wire_len, out)

    def _reused(self, conn: _Conn, seg: Segment, key: str, flip: int, ts: int, packet: int,
                wire_len: int | None, out: list) -> None:
        """A new SYN on a connection believed open: the 4-tuple was reused."""
        if conn.state == _OPEN:
            self._flush_all(conn, ts, packet, out)
        if conn.state == _OPEN:
            why = f"new SYN on open connection {conn.id}: 4-tuple reused; the previous connection ends here"
            out.append(PacketNote(packet, ts, ExpertNote(WARN, "sequence", why), conn.id))
            out.append(StreamClosed(conn.id, -1, "end", ts, packet))
        self._untrack(conn.id)
        self._unlink(conn)
        self._new_conn(seg, key, flip, ts, packet, wire_len, out)

    def _untrack(self, cid: str) -> None:
        """The connection ``cid`` is no longer open (ended, expired, renamed, or the capture's end): its number
        among the connections of its base id is kept in _ids from now."""
        if self._by_id.pop(cid, None) is not None:
            base, _, num = cid.partition("#")
            self._ids[base] = int(num) if num else 1

    def _unlink(self, conn: _Conn) -> None:
        k = conn.key
        if self._table.get(k) is conn:
            self._order.unlink(conn)
            del self._table[k]
        if self._closed.get(k) is conn:
            del self._closed[k]

    def _retire(self, conn: _Conn, ts: int) -> None:
        """Connection closed: free its buffers, keep it a while for late packets."""
        self._untrack(conn.id)
        self._unlink(conn)
        for D in (conn.d0, conn.d1):
            if D is not None:
                D.free_buffers()
                D.nxt = CLOSED_DIR
        conn.held = None
        conn.state = _CLOSED
        conn.last_ts = ts  # (closed: the time it closed)
        if self.close_grace > 0 and len(self._closed) < self.max_connections:
            self._closed[conn.key] = conn

    def _expire(self, conn: _Conn, ts: int, packet: int, out: list, kind: str) -> None:
        """Close an open (or ignored) connection without FIN/RST and forget it."""
        if conn.state == _OPEN:
            self._flush_all(conn, ts, packet, out)
            if conn.state == _OPEN:
                out.append(StreamClosed(conn.id, -1, kind, ts, packet))
        self._untrack(conn.id)
        self._unlink(conn)

    def _evict(self, ts: int, packet: int, out: list) -> None:
        conn = self._table[self._order.oldest]
        was_open = conn.state == _OPEN
        self._expire(conn, ts, packet, out, "idle")
        if was_open:
            why = (f"more than {self.max_connections} open TCP connections: stopped tracking the least recently "
                   f"active one, {conn.id}")
            out.append(PacketNote(packet, ts, ExpertNote(WARN, "reassembly", why), conn.id))

    def _sweep(self, ts: int, packet: int, out: list) -> None:
        limit = ts - self.idle_timeout
        opened = self._table
        order = self._order
        while order.oldest is not None:
            conn = opened[order.oldest]
            if conn.last_ts >= limit:
                break
            self._expire(conn, ts, packet, out, "idle")
        limit = ts - self.close_grace
        closed = self._closed
        while closed:
            conn = next(iter(closed.values()))
            if conn.last_ts >= limit:
                break
            self._unlink(conn)

    # -------------------------------------------------------------- segments
    def _segment(
        self, conn: _Conn, d: int, D: _Dir, seg: Segment, ts: int, packet: int, wire_len: int | None, out: list
    ) -> None:
        flags = seg[6]
        seq = seg[4]
        if flags & RST:
            self._flush_all(conn, ts, packet, out)
            out.append(StreamClosed(conn.id, d, "rst", ts, packet))
            self._retire(conn, ts)
            return
        if D.nxt == CLOSED_DIR:
            return  # after this direction's FIN: retransmissions only
        if flags & SYN:
            if D.nxt == NOT_STARTED:
                D.isn = seq
            seq = (seq + 1) & MASK
        if D.nxt == NOT_STARTED:  # first segment of this direction: start here
            D.pos = seq
            D.nxt = seq
        payload = seg[7]
        plen = len(payload)
        length = plen if wire_len is None or wire_len < plen else wire_len
        pos = D.pos
        start = pos + (((seq - D.nxt + HALF) & MASK) - HALF)  # unwrapped position of seq
        if plen:
            if start <= pos:
                skip = pos - start
                if skip < plen:
                    if D.buffered and start + plen > D.starts[0]:
                        # overlaps buffered bytes: deliver up to them, merge the rest into
                        # the buffer (bytes already buffered win), then drain
                        first = D.starts[0]
                        out.append(StreamData(conn.id, d, payload[skip : first - start], ts, packet))
                        buffer_piece(D, first, payload[first - start :], ts, packet)
                        D.pos = first
                    else:
                        out.append(StreamData(conn.id, d, payload[skip:] if skip else payload, ts, packet))
                        D.pos = pos = start + plen
                    D.nxt = D.pos & MASK
                if D.buffered and (conn.held is None or conn.held.hole[d] < 0):  # (else: see _release)
                    self._drain(conn, d, D, ts, packet, out, None)
            else:
                buffer_piece(D, start, payload, ts, packet)
                if D.buffered > self.max_buffered or len(D.starts) > MAX_PIECES:
                    while D.buffered > self.max_buffered or len(D.starts) > MAX_PIECES:
                        self._drain(conn, d, D, ts, packet, out, D.starts[0])
        if length > plen:
            if start <= D.pos < start + length:
                # payload cut by the capture (snap length) and its captured part is delivered: the
                # rest was on the wire (not lost) and is not captured
                self._cut(conn, d, D, start + plen, start + length, ts, packet, out)
            elif start > D.pos:  # (buffered: not captured when the stream reaches it)
                _note_cut(D, start + plen, start + length, ts, packet)
        if flags & FIN:
            self._fin(conn, d, D, start + length, ts, packet, out)

    def _cut(self, conn: _Conn, d: int, D: _Dir, cut: int, end: int, ts: int, packet: int, out: list) -> None:
        """The bytes [``cut``, ``end``) of a segment were on the wire and the capture cut them off:
        one StreamGap with cause SNAP_CUT (not loss) for those the stream has not passed, when its
        captured part is delivered and nothing is buffered in the cut; else (bytes buffered in it) a
        gap as any other (the stream's holes and the cut cannot be told apart)."""
        pos = D.pos
        if pos < cut or (D.buffered and D.starts[0] < end):
            _note_cut(D, cut if cut > pos else pos, end, ts, packet)
            self._drain(conn, d, D, ts, packet, out, None)
            return
        out.append(StreamGap(conn.id, d, end - pos, ts, packet, SNAP_CUT))
        D.pos = end
        D.nxt = end & MASK
        if D.buffered:  # (pieces the cut made contiguous)
            self._drain(conn, d, D, ts, packet, out, None)

    def _fin(self, conn: _Conn, d: int, D: _Dir, fin: int, ts: int, packet: int, out: list) -> None:
        """Direction ``d`` ends at unwrapped position ``fin`` (its FIN's): holes before it are lost."""
        if fin > D.pos:
            self._drain(conn, d, D, ts, packet, out, fin)
        out.append(StreamClosed(conn.id, d, "fin", ts, packet))
        D.starts = None
        D.datas = None
        D.stamps = None
        D.buffered = 0
        D.cuts = None
        D.pos = fin + 1
        D.nxt = CLOSED_DIR
        conn.fins |= 1 << d
        if conn.fins == 3:
            self._retire(conn, ts)

    def _drain(self, conn: _Conn, d: int, D: _Dir, ts: int, packet: int, out: list, force: int | None,
               stop: int | None = None, before: int = 0) -> None:
        """Deliver buffered pieces that became contiguous, each stamped with the packet that carried
        it; holes before ``force`` (an unwrapped position) are given up and reported as gaps, each
        stamped with the packet that carried the first byte after it (where Wireshark says
        "previous segment not captured"), or ``ts``/``packet`` when none was captured.  ``stop``:
        only the pieces that start before it or were captured before packet ``before``."""
        starts = D.starts
        datas = D.datas
        stamps = D.stamps
        pos = D.pos
        i = 0
        n = 0 if starts is None else len(starts)
        removed = 0
        cid = conn.id
        while True:
            if i < n and starts[i] <= pos and (stop is None or starts[i] < stop
                                                     or stamps[2 * i + 1] < before):
                s = starts[i]
                data = datas[i]
                removed += len(data)
                e = s + len(data)
                if e > pos:
                    out.append(StreamData(cid, d, data[pos - s :] if s < pos else data,
                                          stamps[2 * i], stamps[2 * i + 1]))
                    pos = e
                i += 1
                continue
            cuts = D.cuts
            if cuts is not None and pos in cuts:  # bytes the snap length cut off: not captured, not lost
                e, cts, cpk = cuts.pop(pos)
                target = starts[i] if i < n and starts[i] < e else e
                if e > target:
                    cuts[target] = (e, cts, cpk)
                out.append(StreamGap(cid, d, target - pos, cts, cpk, SNAP_CUT))
                pos = target
                continue
            if force is not None and pos < force:
                if i < n and starts[i] < force:
                    target = starts[i]
                    out.append(StreamGap(cid, d, target - pos, stamps[2 * i], stamps[2 * i + 1]))
                else:
                    target = force
                    out.append(StreamGap(cid, d, target - pos, ts, packet))
                pos = target
                continue
            break
        if i:
            del starts[:i]
            del datas[:i]
            del stamps[: 2 * i]
            D.buffered -= removed
        D.pos = pos
        D.nxt = pos & MASK
        if D.cuts is not None:
            _passed_cuts(D, pos)

    def _held_feed(self, conn: _Conn, d: int, seg: Segment, ts: int, packet: int, wire_len: int | None,
                   out: list) -> None:
        """A segment without SYN while the reorder window ``conn.held`` is open.  A
        direction with a hole the peer acknowledged delivers the bytes that fill it and buffers the
        rest; the other direction's events are queued, with the position its ACK reached, behind
        the missing bytes (they may answer them).  The window ends when every such hole is
        covered, or is declared lost after ``reorder_packets`` packets of the connection or
        ``reorder_seconds`` of capture time."""
        H = conn.held
        D = _get_dir(conn, d)
        apos = _held_ack(conn, H, d, seg[5]) if seg[6] & ACK else -1
        if seg[6] & RST:  # kept until the window ends (it may have overtaken what it answers)
            if H.rst is None:
                H.rst = (d, ts, packet)
        elif seg[6] & FIN:
            seg = self._held_fin(conn, H, d, D, seg, ts, packet, wire_len, out)
            if seg is None:
                return
        if seg[6] & RST:
            pass
        elif H.hole[d] >= 0:
            self._segment(conn, d, D, seg, ts, packet, wire_len, out)
        else:
            evs: list = []
            self._segment(conn, d, D, seg, ts, packet, wire_len, evs)
            if evs:
                H.queue.append((d, apos, packet, evs))
        if conn.held is not H:
            return  # (closed by the segment: see _flush_all)
        if not _waiting(conn, H):
            self._release(conn, ts, packet, out, False)
            return
        H.left -= 1
        if H.left <= 0 or ts >= H.end:
            self._release(conn, ts, packet, out, True)

    def _held_fin(self, conn: _Conn, H: _Hold, d: int, D: _Dir, seg: Segment, ts: int, packet: int,
                  wire_len: int | None, out: list):
        """A FIN of direction ``d`` in the reorder window: kept until the window ends (it may have overtaken
        bytes it follows; the bytes before it were sent), and the segment without it returned, to go on
        with.  On a direction's first segment, or after its FIN, the window ends first and the segment is
        taken whole here: None."""
        if D.nxt < 0:
            self._release(conn, ts, packet, out, True)
            if conn.state == _OPEN:
                self._segment(conn, d, D, seg, ts, packet, wire_len, out)
            return None
        plen = len(seg[7])
        length = plen if wire_len is None or wire_len < plen else wire_len
        start = D.pos + (((seg[4] - D.nxt + HALF) & MASK) - HALF)
        fin = start + length
        hole = H.hole
        if H.fin[d] is None:
            H.fin[d] = (fin, ts, packet)
            if (hole[d] >= 0 or start > _covered(D)) and fin > hole[d]:
                hole[d] = fin  # (the bytes before a FIN were sent)
        return seg._replace(flags=seg[6] & ~FIN)

    def _declare(self, conn: _Conn, ts: int, packet: int, out: list) -> None:
        """Close the reorder window now: the holes still waited for are lost."""
        self._release(conn, ts, packet, out, True)

    def _release(self, conn: _Conn, ts: int, packet: int, out: list, lost: bool) -> None:
        """End of the reorder window: the bytes buffered behind each hole (with gaps for the holes
        when ``lost``) and the queued events, merged: before each queued segment's events, the
        bytes its ACK covered and those captured before it."""
        H = conn.held
        conn.held = None
        hole = H.hole
        for e, apos, epk, evs in H.queue:
            x = 1 - e
            X = conn.d1 if x else conn.d0
            h = hole[x]
            if h >= 0 and X is not None and X.nxt != CLOSED_DIR:
                force = None
                if lost:
                    force = apos if apos < h else h
                k = len(out)
                self._drain(conn, x, X, ts, packet, out, force, apos, epk)
                if lost:  # a gap the queued segment's ACK proves: its bytes were sent before it
                    first = evs[0]
                    for g in out[k:]:
                        if type(g) is StreamGap and g.ts > first.ts:
                            g.ts = first.ts
                            g.packet = first.packet
            out.extend(evs)
        # both directions may hold bytes behind a hole: drained apart, delivered merged in capture
        # order, so a reply never reaches the model before what it answers
        behind: list = [None, None]
        for x in (0, 1):
            h = hole[x]
            X = conn.d1 if x else conn.d0
            if h >= 0 and X is not None and X.nxt != CLOSED_DIR:
                f = H.fin[x]
                if f is not None and h > f[0]:
                    h = f[0]  # (the FIN's own sequence number is not a byte)
                evs = []
                self._drain(conn, x, X, ts, packet, evs, h if lost else None)
                behind[x] = evs
        _merge_in_capture_order(behind[0], behind[1], out)
        for x in (0, 1):
            f = H.fin[x]
            X = conn.d1 if x else conn.d0
            if f is not None and X.nxt != CLOSED_DIR and conn.state == _OPEN:
                self._fin(conn, x, X, f[0], f[1], f[2], out)
        r = H.rst
        if r is not None and conn.state == _OPEN:
            self._flush_all(conn, ts, packet, out)
            out.append(StreamClosed(conn.id, r[0], "rst", r[1], r[2]))
            self._retire(conn, r[1])

    def _flush_all(self, conn: _Conn, ts: int, packet: int, out: list) -> None:
        """Give up every hole of both directions: gaps + buffered data.  (Called when the
        connection ends: a direction without any packet by then is declared missing.)"""
        if conn.missing < 0 and (conn.d0 is None) != (conn.d1 is None) and conn.ack_moves != NO_ACK:
            # (an ACK number says the unseen side sent something: a SYN alone, never answered, is no such case)
            _one_way(conn, 0 if conn.d0 is None else 1, ts, packet, out)
        if conn.held is not None:
            self._declare(conn, ts, packet, out)
        behind: list = [None, None]
        for d in (0, 1):
            D = conn.d1 if d else conn.d0
            if D is not None and D.buffered and D.nxt != CLOSED_DIR:
                evs = []
                self._drain(conn, d, D, ts, packet, evs, D.starts[-1] + len(D.datas[-1]))
                behind[d] = evs
        _merge_in_capture_order(behind[0], behind[1], out)
