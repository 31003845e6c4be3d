"""The sharding contract: how one capture is cut into flows that are analysed apart and put
back in the order of one process.  Used by ``-j N`` (:mod:`amqp_dissect.pipelines.runs.parallel`) and
by the Spark archive job (:mod:`amqp_dissect.pipelines.spark`); sans-IO, like the rest of the core.

The flow
    The unordered pair of a TCP record's endpoints: both directions, and every connection that
    ever used the 4-tuple (``#n`` reuse included), are one flow.  Connection ids are endpoint
    based, so flows are independent but for the clock.  Two spellings of the same flow:
    :func:`flow_name` (text, a column of the Spark job's rows) and :func:`segment_key` /
    :func:`quick_key` (the directed 4-tuple's bytes, looked up with its :func:`reverse_key` as
    the same flow: the ``-j`` read loop, :func:`pump_shard`).

The capture clock
    What ties the flows together is time, kept as one process keeps it: the TCP idle sweep
    ticks over *all* TCP records (:class:`SweepClock`: the first TCP record arms it for
    ``ts + interval``; each TCP record at or past the armed time is a tick and re-arms), and at
    a tick each shard sweeps its own connections (its reassembler's own sweep switched off:
    :meth:`~amqp_dissect.capture.tcp.TcpReassembler.drive_sweeps_externally`).  The end of the
    capture (the last record's time, the last TCP record's number) closes every shard's
    reassembly.  :func:`sweep_ticks` lists the ticks of a sequence of TCP records (the Spark
    driver computes them; a flow replays those between two of its records).

The output order
    Every item one process lists in the order it met it gets a key from the event that made
    it: ``(packet, phase, block, n)``; :data:`PHASE_SWEEP` is an idle sweep at that packet,
    :data:`PHASE_PACKET` the packet itself, :data:`PHASE_CLOSE` and :data:`PHASE_FINISH` the end
    of the capture (packet :data:`END`), :data:`LIVE` the deliveries still open at the end.
    Items of one packet come from one flow, so merging the shards' items by key gives the
    single process' order (:func:`conn_rank`: a connection's key as one integer).
"""

from __future__ import annotations

import socket
import struct
from array import array
from typing import NamedTuple

try:
    import cython
except ImportError:
    from . import _cython_shim as cython

from .capture.netparse import TruncatedPacket, parse_segment
from .capture.pcap import PcapRecords
from .clock import STEP_MIN_NS
from .errors import DissectError, UnsupportedLinkType
from .events import CaptureRecord, StreamOpened, endpoint

END = 1 << 59  # the packet number of the end-of-capture phases (keys stay int64 with it)
PHASE_SWEEP, PHASE_PACKET, PHASE_CLOSE, PHASE_FINISH = 0, 1, 2, 3
LIVE = 4  # the phase of the deliveries still open at the end (after every fold, in table order)


# --------------------------------------------------------------------------- the flow


def flow_name(seg) -> str:
    """The flow of a parsed segment as text: its endpoints, the smaller first (``a|b``)."""
    a = endpoint(seg[0], seg[2])
    b = endpoint(seg[1], seg[3])
    return f"{a}|{b}" if a <= b else f"{b}|{a}"


_PORTS = struct.Struct("!HH").pack


def _ip_bytes(text: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if ":" in text else socket.AF_INET, text)


def segment_key(seg) -> bytes:
    """The directed 4-tuple of a parsed segment as :func:`quick_key` slices it from the bytes:
    source and destination address, then source and destination port."""
    return _ip_bytes(seg[0]) + _ip_bytes(seg[1]) + _PORTS(seg[2], seg[3])


def reverse_key(key: bytes) -> bytes:
    """The other direction's :func:`segment_key`."""
    h = (len(key) - 4) // 2
    return key[h:2 * h] + key[:h] + key[2 * h + 2:] + key[2 * h:2 * h + 2]


def quick_key(linktype, data):
    """The directed 4-tuple bytes of an Ethernet / Linux cooked IPv4 TCP record without IP options
    or fragmentation, read straight from its bytes; None for any other record (the parser
    decides: :func:`is_tcp`, :func:`segment_key`)."""
    base = 12 if linktype == 1 else (14 if linktype == 113 else -1)
    if base < 0 or type(data) is not bytes or len(data) < base + 42:
        return None
    return _quick_key(data, base)


def _quick_key(data: bytes, base):
    p = data
    if (p[base] == 8 and p[base + 1] == 0 and p[base + 2] == 0x45 and (p[base + 8] & 0xBF) == 0
            and p[base + 9] == 0 and p[base + 11] == 6):
        return data[base + 14:base + 26]
    return None


def is_tcp(linktype, data) -> bool:
    """Whether the record reaches TCP reassembly (the parser gives a segment, maybe truncated)."""
    try:
        return parse_segment(linktype, data) is not None
    except TruncatedPacket:
        return True
    except DissectError:
        return False


# --------------------------------------------------------------------------- the capture clock


class SweepClock:
    """The TCP idle sweep's ticks over every TCP record of the capture (see the module
    docstring); ``due``: the time of the next tick, None until the first TCP record arms it."""

    def __init__(self, interval: int, start=None):
        self.interval = interval
        self.due = start

    def tick(self, ts) -> bool:
        """A TCP record at ``ts``: whether the sweep runs at it (arms or re-arms the clock)."""
        nxt = self.due
        if nxt is None:
            self.due = ts + self.interval
            return False
        if ts >= nxt:
            self.due = ts + self.interval
            return True
        return False


def sweep_ticks(packets_ts, interval: int = 1_000_000_000, start=None):
    """The records at which the sweep ticks among these ``(packet, ts)`` pairs (every record
    reaching TCP reassembly, in order; times and ``interval`` in nanoseconds).  ``start``
    continues from a previous call's returned state; returns (ticks, state)."""
    clock = SweepClock(interval, start)
    ticks = [(pk, ts) for pk, ts in packets_ts if clock.tick(ts)]
    return ticks, clock.due


# --------------------------------------------------------------------------- the output order


def conn_rank(key3: tuple, seq: int) -> int:
    """A connection's key as one integer (the state layer orders deliveries by ``(conn.seq, ...)``)."""
    packet, phase, _ = key3
    return (((packet << 2) | phase) << 40) | seq


# --------------------------------------------------------------------------- the -j read loop


def pump_shard(d, records, fw, offset, owner: dict, loads: list, w):
    """The read loop of shard ``w`` (a ``-j`` worker ``fw``: see
    :class:`~amqp_dissect.pipelines.runs.parallel.FlowWorker`) over ``records``, fed to the Dissector
    ``d`` (packet numbers shifted by ``offset``).  Per record: its flow (:func:`quick_key`, else
    ``fw.slow_key``, which handles the records of no flow itself); the clock
    (:func:`_clock`: ``fw.tick`` sweeps); its shard (a new flow goes to ``fw.new_flow``;
    ``owner``: both directions' keys -> [shard, last packet fed], ``loads``: bytes per shard);
    this shard's records fed and their events handed on (:func:`_hand_on`).  The loop's state
    lives in ``fw`` and its :class:`~amqp_dissect.capture.pcap.FlowGate` ``fw.gate`` between
    calls (one per file); a pcap reader given that gate drops the other shards' records it can
    place itself, accounted here.  Returns the number of records read, dropped ones included."""
    n = 0
    tcp = d.tcp
    interval = tcp.sweep_interval
    gate = fw.gate
    dropped = gate.skipped
    last_tcp, last_pk, last_ets = fw.own_last_tcp, fw.last_pk, fw.last_ets
    for rec in records:
        if offset:
            rec.index += offset
        n += 1
        data = rec.data
        lt = rec.linktype
        ts = rec.ts
        if gate.seen and (ts < gate.ts or gate.hold):  # (rare: the clock watch's records)
            _watch(fw, gate, rec.index, ts)
        gate.ts = ts
        gate.seen = True
        key = quick_key(lt, data)
        sure = False
        if key is None:
            found = fw.slow_key(rec)  # (key, sure), or None: not TCP (fed by shard 0 there)
            if found is None:
                continue
            key, sure = found
        if not gate.armed or ts >= gate.nxt:
            _clock(gate, fw, tcp, ts, interval, sure, lt, data, rec.index)
        ent = owner.get(key)
        if ent is None:
            ent = fw.new_flow(key, loads)
        o = ent[0]
        loads[o] += len(data)
        if o != w:
            if w == 0:  # (the counts finish_status reads: a quick-look record counts as TCP)
                d.packets += 1
                d.tcp_packets += 1
            continue
        packet = rec.index
        n_tcp = d.tcp_packets
        evs = d.feed(rec)
        if d.tcp_packets != n_tcp:
            ent[1] = packet
            last_tcp = packet
        if evs:
            last_pk = packet
            last_ets = ts
            _hand_on(fw, evs, ent, packet)
    fw.own_last_tcp, fw.last_pk, fw.last_ets = last_tcp, last_pk, last_ets
    dropped = gate.skipped - dropped  # (the records the reader dropped: see FlowGate)
    if w == 0:
        d.packets += dropped
        d.tcp_packets += dropped
    return n + dropped


def _watch(fw, gate, packet, ts) -> None:
    """A record behind the one before it, or the one after such, to the capture's clock watch
    (:class:`~amqp_dissect.clock.ClockWatch`: every worker reads the same records, so finds the
    same steps); ``gate.hold`` makes the reader hand on the next record when the watch waits."""
    clock = fw.clock
    clock.see(packet, ts, gate.ts)
    gate.hold = clock.pending


def _clock(gate, fw, tcp, ts, interval, sure, lt, data, packet) -> None:
    """:meth:`SweepClock.tick` at a record due to arm or tick the clock, on the gate's state
    (``armed``, ``nxt``: the reader reads them to know which records it may drop): a record the
    quick look took for TCP arms or ticks it only if it is; at a tick this shard sweeps."""
    if sure or is_tcp(lt, data):
        gate.nxt = ts + interval
        if gate.armed:
            if tcp.has_open_connections:
                fw.tick(ts, packet)
        gate.armed = True


def _hand_on(fw, evs: list, ent: list, packet) -> None:
    """This shard's events of one record to its Analyzer ``fw.an``, a new connection's flow noted
    (``fw.opened``), what the Analyzer listed keyed (``fw.key_folds``, ``fw.key_items``)."""
    an = fw.an
    afeed = an.feed
    fold_out = fw.fold_out
    fw.cur = (packet, PHASE_PACKET, 0)
    if fold_out is None:
        for ev in evs:
            if type(ev) is StreamOpened:
                fw.opened(ev, ent)
            afeed(ev)
    else:  # (the folds and settlements of each event keyed in turn)
        settling = an._settling
        for ev in evs:
            if type(ev) is StreamOpened:
                fw.opened(ev, ent)
            afeed(ev)
            if len(fold_out) != fw.folds_keyed or len(settling) != fw.settling_keyed:
                fw.key_folds()
        if len(fold_out) >= fw.fold_batch:
            fw.drain(fw.fold_batch)
    if (len(an.stalls) + len(an.violations) + len(an.frame_errors) + len(an.transactions)
            + len(an.internal_errors) + len(an.connections)) != fw.items_keyed:
        fw.key_items()


# --------------------------------------------------------------------------- the archive's flow loop

# what :func:`pump_flow` stopped at
FLOW_END = 0  # the rows are all read
FLOW_NEXT = 1  # a row of another flow (handed back, not consumed)
FLOW_PAUSE = 2  # rows to hand on: the folded deliveries reached the runner's FOLD_ROWS, or frames rows


class FlowStop(NamedTuple):
    """Where one call of :func:`pump_flow` stopped."""

    why: int  # FLOW_END, FLOW_NEXT or FLOW_PAUSE
    row: tuple | None  # FLOW_NEXT: the first row of another flow, handed back (else None)


def pump_flow(st: dict, flow, row, rows, runner) -> FlowStop:
    """The archive's stage-2 loop over the records of one flow (compiled, it runs in C): each
    record of ``rows`` (an iterator of ``(flow, packet, ts, linktype, data, orig_len)`` sorted by
    flow then packet; ``row``, when not None, the one to take first) fed to the flow's Dissector
    ``st["d"]`` as a :class:`~amqp_dissect.events.CaptureRecord`, its events to the Analyzer's
    ``feed``; between two records further apart than the idle timeout the global sweeps
    (``runner._sweeps``); after a record with events the order keys of the rows it made
    (``runner._stamp``, called only when one of the three stamped lists changed).  ``st``: the
    flow's state (:meth:`~amqp_dissect.pipelines.archive.flows.FlowRunner._start`); ``runner``
    gives ``_idle_ns``, ``FOLD_ROWS`` and ``frames_json`` (:func:`event_json`, or None: no frames
    table).  A row with ``data`` None and packet 0 is a carried flow's marker: skipped.
    Returns a :class:`FlowStop`: :data:`FLOW_END` (``row`` None), :data:`FLOW_NEXT` (``row`` the
    first of another flow), :data:`FLOW_PAUSE` (``row`` None: the folded list or frames rows are due;
    call again to go on)."""
    d = st["d"]
    an = st["an"]
    an_feed = an.feed
    folded = st["folded"]
    stamps = st["stamps"]
    fold_rows = runner.FOLD_ROWS
    idle_ns = runner._idle_ns
    ej = runner.frames_json
    frames = st["frames"] if ej is not None else None
    prev = st["prev"]
    prev_pk = prev_ts = None
    if prev is not None:
        prev_pk, prev_ts = prev
    packets = st["packets"]
    ev_pk = ev_ts = None  # the last record with events since st["last_ev"] was written
    why = FLOW_END
    nxt = None
    while True:
        if row is None:
            row = next(rows, None)
            if row is None:
                break
        f, packet, ts, lt, data, orig = row
        if f != flow:
            why = FLOW_NEXT
            nxt = row
            break
        row = None
        if packet == 0 and data is None:  # (a carried flow's marker: no record)
            continue
        if prev_pk is not None and ts - prev_ts > idle_ns:
            st["gap"] = True
            if ev_pk is not None:  # (the sweeps' events write it too)
                st["last_ev"] = (ev_pk, ev_ts)
                ev_pk = None
            runner._sweeps(st, prev_pk, packet)
        prev_pk = packet
        prev_ts = ts
        packets += 1
        evs = d.feed(_record(packet, ts, lt, data, orig))
        if evs:
            ev_pk = packet
            ev_ts = ts
            for ev in evs:
                an_feed(ev)
            if _stamp_due(an, stamps):
                runner._stamp(st, packet)
            if frames is not None:
                for ev in evs:
                    j = ej(ev)
                    if j is not None:
                        frames.append(j)
        if len(folded) >= fold_rows or (frames is not None and len(frames) != 0):
            why = FLOW_PAUSE
            break
    if prev_pk is not None:
        st["prev"] = (prev_pk, prev_ts)
    st["packets"] = packets
    if ev_pk is not None:
        st["last_ev"] = (ev_pk, ev_ts)
    return FlowStop(why, nxt)


def _record(packet, ts, lt, data, orig):
    """A :class:`~amqp_dissect.events.CaptureRecord` of interface 0 (compiled: its fields set in C,
    not through the type's call and ``__init__``)."""
    r = CaptureRecord.__new__(CaptureRecord)
    r.index = packet
    r.ts = ts
    r.linktype = lt
    r.data = data
    r.orig_len = orig
    r.interface = 0
    return r


def _stamp_due(an, stamps: dict) -> bool:
    """Whether the Analyzer's violations, frame_errors or transactions list holds a row the
    stamps have not keyed (FlowRunner._stamp's own test: a list of the length it saw whose last
    item it keyed has nothing new)."""
    return (_new_in(an.violations, stamps["violations"]) or _new_in(an.frame_errors, stamps["errors"])
            or _new_in(an.transactions, stamps["transactions"]))


def _new_in(lst, seen: list) -> bool:
    n = len(lst)
    return not (n == seen[0] and (n == 0 or id(lst[n - 1]) in seen[1]))


# --------------------------------------------------------------------------- the archive's stage-1 scan

# what :func:`stage1_fill` stopped at
S1_END = 0  # the records are all read
S1_FULL = 1  # the batch is full (its rows, or the bytes of the records its rows carry)
S1_STOP = 2  # a record whose header is at or past the range's stop offset (read, not taken)

S1_TCP, S1_NOTE = 0, 1  # the row kinds a batch holds (the archive's KIND_TCP and KIND_NOTE)


class Stage1Rows:
    """Up to ``size`` stage-1 rows of one range by column, as :func:`stage1_fill` fills them (the
    shell makes an Arrow batch of whole columns, no tuple per row).  ``idx``, ``ts``,
    ``orig_len``, ``pos``: ``array('q')``; ``linktype``, ``caplen``: ``array('i')``; ``kind``:
    ``array('b')``; ``flow``: a list (None for a note); ``data``: None when the rows give their
    records by offset (``pos``, ``caplen``), else a list of the records' bytes (``pos`` and
    ``caplen`` are then not set).  ``notes``: ``[(row, meta text)]`` of the rows that are notes
    (no flow, record or offset: their ``pos`` and ``caplen`` slots hold 0).  ``n``: the rows
    filled; ``nbytes``: the bytes of the records the rows carry.  The batch is full at ``size``
    rows or ``max_bytes`` carried bytes (the row that reaches either is the batch's last).  The
    columns are made at ``size`` slots; :meth:`trim` cuts them to ``n``."""

    __slots__ = ("size", "max_bytes", "n", "nbytes", "idx", "ts", "linktype", "orig_len", "pos", "caplen", "kind",
                 "flow", "data", "notes")

    def __init__(self, size: int, max_bytes: int, carry: bool):
        self.size = size
        self.max_bytes = max_bytes
        self.n = 0
        self.nbytes = 0
        self.idx = array("q", bytes(8 * size))
        self.ts = array("q", bytes(8 * size))
        self.orig_len = array("q", bytes(8 * size))
        self.pos = array("q", bytes(8 * size))
        self.linktype = array("i", bytes(4 * size))
        self.caplen = array("i", bytes(4 * size))
        self.kind = array("b", bytes(size))
        self.flow = [None] * size
        self.data = [None] * size if carry else None
        self.notes = []

    def trim(self) -> None:
        """The columns cut to the rows filled."""
        n = self.n
        for a in (self.idx, self.ts, self.orig_len, self.pos, self.linktype, self.caplen, self.kind, self.flow):
            del a[n:]
        if self.data is not None:
            del self.data[n:]


class Stage1Scan:
    """What a range's scan knows of its records so far (:func:`stage1_fill` keeps it between
    batches): the reader's facts (``count``, ``first_ts``, ``last_ts``, ``max_ts``,
    ``first_offset``; ``end_offset``: the offset of the record a stop left untaken) and the
    summary's (``tcp``, ``errors``, ``last_tcp``, ``last_error``, ``unsupported`` {linktype:
    records}, ``first_unsupported`` {linktype text: [index, time]}, ``flows`` {flow: TCP
    records, at most ``track`` flows}, ``names``: endpoints -> flow name, a cache of at most
    ``track``; ``clock``: a :class:`~amqp_dissect.clock.ClockPoints`).  ``shift``: subtracted
    from each record's index (1: a reader that numbers from 1)."""

    __slots__ = ("shift", "track", "count", "first_ts", "last_ts", "max_ts", "first_offset", "end_offset", "tcp",
                 "errors", "last_tcp", "last_error", "unsupported", "first_unsupported", "flows", "names", "clock")

    def __init__(self, clock, track: int, shift: int = 0):
        self.shift = shift
        self.track = track
        self.count = 0
        self.first_ts = None
        self.last_ts = None
        self.max_ts = None
        self.first_offset = None
        self.end_offset = None
        self.tcp = 0
        self.errors = 0
        self.last_tcp = None
        self.last_error = None
        self.unsupported = {}
        self.first_unsupported = {}
        self.flows = {}
        self.names = {}
        self.clock = clock


def stage1_fill(sc, records, out, stop, offsets) -> int:
    """The archive's stage-1 loop over the records of one range (compiled, it runs in C): each
    record of ``records`` (a :class:`~amqp_dissect.capture.pcap.PcapRecords`, read by C calls,
    or any iterator of :class:`~amqp_dissect.events.CaptureRecord`) counted in ``sc`` (a
    :class:`Stage1Scan`), given to its clock's points, parsed (:func:`parse_segment`) and, when
    it reaches TCP reassembly, made a row of ``out`` (a :class:`Stage1Rows`) with its flow's name
    (the flows counted); a record of an unsupported link type (the first of its type) or one the
    parser rejects is a note row; another is no row.  ``offsets``: the rows give their records
    by the offset of their header (``records`` is then a ``PcapRecords`` of an uncompressed
    file); else ``out`` carries them.  ``stop`` (>= 0, with ``offsets``): the first record whose
    header is at or past it ends the scan untaken (its offset in ``sc.end_offset``).  Returns
    :data:`S1_FULL` (``out`` is full: call again with another), :data:`S1_STOP` or
    :data:`S1_END` (the records are all read)."""
    pr = records if type(records) is PcapRecords else None
    if offsets and pr is None:
        raise TypeError("stage1_fill: rows by offset need a PcapRecords")
    shift = sc.shift
    track = sc.track
    n = out.n
    size = out.size
    nbytes = out.nbytes
    max_bytes = out.max_bytes
    fl = out.flow
    dl = out.data
    carry = dl is not None
    flows = sc.flows
    names = sc.names
    clock = sc.clock
    add = clock.add
    step = STEP_MIN_NS
    ck_next = clock._next
    ck_has = clock.last is not None
    ck_last = 0
    if ck_has:
        ck_last = clock.last
    count = sc.count
    tcp = sc.tcp
    last_tcp = -1
    if sc.last_tcp is not None:
        last_tcp = sc.last_tcp
    last_ts = max_ts = 0
    if count:
        last_ts = sc.last_ts
        max_ts = sc.max_ts
    parse = parse_segment
    why = S1_END
    try:
        while True:
            if pr is not None:
                rec = pr._next()
            else:
                rec = next(records, None)
            if rec is None:
                break
            data = rec.data
            caplen = len(data)
            off = 0
            if offsets:
                off = pr.sbase + pr.pos - pr.hl - caplen  # (the header of the record just read)
                if stop >= 0 and off >= stop:
                    sc.end_offset = off
                    why = S1_STOP
                    break
            idx = rec.index
            idx -= shift
            ts = rec.ts
            if count == 0:
                sc.first_ts = ts
                if sc.first_offset is None:
                    sc.first_offset = off
                max_ts = ts
            elif ts > max_ts:
                max_ts = ts
            last_ts = ts
            count += 1
            # the clock's points (ClockPoints.add, called only when it may keep the record: the
            # first record, one more than its step behind the one before, or one a point waits for)
            if ck_next or not ck_has or ck_last - ts > step:
                if ck_has:
                    clock.last = ck_last
                else:
                    clock.last = None
                add(idx, ts)
                ck_next = clock._next
            ck_last = ts
            ck_has = True
            lt = rec.linktype
            try:
                seg = parse(lt, data)
            except UnsupportedLinkType:
                if lt not in sc.unsupported:
                    sc.unsupported[lt] = 0
                    sc.first_unsupported[str(lt)] = [idx, ts]
                    _s1_note(out, n, idx, ts, lt, rec.orig_len, "unsupported")
                    n += 1
                sc.unsupported[lt] += 1
                if n >= size:
                    why = S1_FULL
                    break
                continue
            except TruncatedPacket as e:
                seg = e.segment
            except DissectError:
                sc.errors += 1
                sc.last_error = [idx, ts]
                _s1_note(out, n, idx, ts, lt, rec.orig_len, "error")
                n += 1
                if n >= size:
                    why = S1_FULL
                    break
                continue
            if seg is None:
                continue
            tcp += 1
            last_tcp = idx
            ends = (seg[0], seg[1], seg[2], seg[3])
            key = names.get(ends)
            if key is None:
                if len(names) >= track:
                    names.clear()
                key = flow_name(seg)
                names[ends] = key
            c = flows.get(key)
            if c is not None:
                flows[key] = c + 1
            elif len(flows) < track:
                flows[key] = 1
            fl[n] = key
            if carry:
                dl[n] = data
                nbytes += caplen
                _s1_put(out, n, idx, ts, lt, rec.orig_len, 0, 0, S1_TCP)
            else:
                _s1_put(out, n, idx, ts, lt, rec.orig_len, off, caplen, S1_TCP)
            n += 1
            if n >= size or nbytes >= max_bytes:
                why = S1_FULL
                break
    finally:
        out.n = n
        out.nbytes = nbytes
        sc.count = count
        sc.tcp = tcp
        if last_tcp >= 0:
            sc.last_tcp = last_tcp
        if count:
            sc.last_ts = last_ts
            sc.max_ts = max_ts
        if ck_has:
            clock.last = ck_last
    return why


def _s1_put(out, n, idx, ts, lt, orig, pos, caplen, kind) -> None:
    """Row ``n``'s integer columns (compiled: written into the arrays' buffers)."""
    if cython.compiled:
        out.idx.data.as_longlongs[n] = idx
        out.ts.data.as_longlongs[n] = ts
        out.orig_len.data.as_longlongs[n] = orig
        out.pos.data.as_longlongs[n] = pos
        out.linktype.data.as_ints[n] = lt
        out.caplen.data.as_ints[n] = caplen
        out.kind.data.as_schars[n] = kind
    else:
        out.idx[n] = idx
        out.ts[n] = ts
        out.orig_len[n] = orig
        out.pos[n] = pos
        out.linktype[n] = lt
        out.caplen[n] = caplen
        out.kind[n] = kind


def _s1_note(out, n, idx, ts, lt, orig, meta) -> None:
    """Row ``n``, a note (no flow, record or offset) saying ``meta``."""
    _s1_put(out, n, idx, ts, lt, orig, 0, 0, S1_NOTE)
    out.flow[n] = None
    if out.data is not None:
        out.data[n] = None
    out.notes.append((n, meta))
