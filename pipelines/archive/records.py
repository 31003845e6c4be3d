"""Archive stage 1, the rows of a range (:func:`decode_range`: one per TCP record with its flow,
a note per record outside any flow, a summary), and stage 2's way back to the bytes of a pcap
record given by its offset (:class:`RecordReader`, :func:`fill_records`)."""

from __future__ import annotations

import json
import os
import struct
from collections import OrderedDict
from typing import Iterable, Iterator

from amqp_dissect.capture.netparse import TruncatedPacket, parse_segment
from amqp_dissect.clock import ClockPoints
from amqp_dissect.errors import DissectError, UnsupportedLinkType
from amqp_dissect.shard import Stage1Rows, Stage1Scan, flow_name

from .inputs import Range
from .ranges import MergeScan, RangeScan, pcap_header


# stage-1 row kinds
KIND_TCP = 0  # a record that reaches TCP reassembly (a segment, or a snaplen-truncated one)
KIND_NOTE = 1  # a record outside any flow that produces an event (a packet note): only its time matters
KIND_SUMMARY = 2  # one per range: counts, timestamps, offsets, damage (meta: JSON)

STAGE1_COLUMNS = ("rid", "idx", "ts", "linktype", "data", "orig_len", "flow", "kind", "pos", "caplen", "meta",
                  "file")
FLOW_TOP = 64  # flows per range whose record counts the range summary carries (stage-2 balancing)
FLOW_TRACK = 1 << 16  # distinct flows a range counts (later new flows are not counted: bounded memory)


# --------------------------------------------------------------------------- stage 1


def decode_range(rng: Range) -> Iterator[tuple]:
    """Stage-1 rows of one range, or of an overlap group merged (see :data:`STAGE1_COLUMNS`; ``file``:
    the file the record is in); the last is the summary.

    Counts in the summary: ``tcp`` (records reaching TCP reassembly),
    ``packet_errors`` (records the link/IP/TCP parser rejected), ``unsupported``
    ({linktype: records}).  Indexes in the range (packet number = the range's
    offset + index + 1), so that the driver needs no pass over the rows:
    ``last_tcp`` (the last TCP record), ``last_error`` ([index, time] of the last
    record the parser rejected), ``first_unsupported`` ({linktype: [index, time]}).
    ``flows``: [[flow key, TCP records], ...] of the range's :data:`FLOW_TOP`
    largest flows, largest first (among the first :data:`FLOW_TRACK` flows seen;
    for balancing the flows over the stage-2 tasks).  ``clock``: the records of the range the
    capture's clock watch needs, [index, time, time before or None] (:class:`~amqp_dissect.clock.ClockPoints`:
    the first two, each step back and the one after it: as many as the steps).  A file that cannot be opened or is not a capture gives a summary
    with ``open_error`` / ``format_error`` and no records.
    """
    scan = MergeScan(rng) if rng.group else RangeScan(rng)
    rid = rng.rid
    tcp = 0
    errors = 0
    unsupported: dict[int, int] = {}
    first_unsupported: dict[str, list] = {}
    last_tcp = None
    last_error = None
    flows: dict[str, int] = {}
    names: dict[tuple, str] = {}  # a segment's endpoints -> its flow name (making one costs as much as parsing)
    meta_extra: dict = {}
    parse = parse_segment
    clock = ClockPoints()  # the records the capture's clock watch needs (the driver replays them)
    keep = clock.add
    try:
        for rec in scan.records():
            keep(rec.index, rec.ts)
            lt = rec.linktype
            try:
                seg = parse(lt, rec.data)
            except UnsupportedLinkType:
                if lt not in unsupported:
                    unsupported[lt] = 0
                    first_unsupported[str(lt)] = [rec.index, rec.ts]
                    yield (rid, rec.index, rec.ts, lt, None, rec.orig_len, None, KIND_NOTE, None, None, "unsupported",
                           scan.file)
                unsupported[lt] += 1
                continue
            except TruncatedPacket as e:
                seg = e.segment
            except DissectError:
                errors += 1
                last_error = [rec.index, rec.ts]
                yield (rid, rec.index, rec.ts, lt, None, rec.orig_len, None, KIND_NOTE, None, None, "error",
                       scan.file)
                continue
            if seg is None:
                continue
            tcp += 1
            last_tcp = rec.index
            ends = (seg[0], seg[1], seg[2], seg[3])
            key = names.get(ends)
            if key is None:
                if len(names) >= FLOW_TRACK:
                    names.clear()
                key = names[ends] = flow_name(seg)
            n = flows.get(key)
            if n is not None:
                flows[key] = n + 1
            elif len(flows) < FLOW_TRACK:
                flows[key] = 1
            pos = scan.pos
            if pos is None:  # gzip, pcapng: the row carries the record
                yield (rid, rec.index, rec.ts, lt, rec.data, rec.orig_len, key, KIND_TCP, None, None, None, scan.file)
            else:  # stage 2 reads it from the file (only offsets travel)
                yield (rid, rec.index, rec.ts, lt, None, rec.orig_len, key, KIND_TCP, pos, len(rec.data), None,
                       scan.file)
    except (OSError, DissectError) as e:
        meta_extra.update(_opening_error(scan, e))
    yield _summary_row(rid, scan, tcp, errors, unsupported, first_unsupported, last_tcp, last_error, flows, clock,
                       meta_extra)


def decode_batches(rng: Range, size: int, max_bytes: int) -> Iterator:
    """:func:`decode_range`'s rows of a range that is not a merged group, by column: its records go
    through the compiled stage-1 loop (:meth:`RangeScan.batches`) into
    :class:`~amqp_dissect.shard.Stage1Rows` of at most ``size`` rows (a batch ends too at the row
    whose record brings the bytes its rows carry to ``max_bytes``), given in order; the last item
    is the summary row, the tuple :func:`decode_range` ends with.  The rows and the summary are
    :func:`decode_range`'s (``tests/spark/test_stage1_scan.py``)."""
    if rng.group:
        raise ValueError("decode_batches: a merged group is read by decode_range")
    scan = RangeScan(rng)
    sc = Stage1Scan(ClockPoints(), FLOW_TRACK)
    meta_extra: dict = {}
    try:
        yield from scan.batches(sc, lambda carry: Stage1Rows(size, max_bytes, carry))
    except (OSError, DissectError) as e:
        meta_extra.update(_opening_error(scan, e))
    yield _summary_row(rng.rid, scan, sc.tcp, sc.errors, sc.unsupported, sc.first_unsupported, sc.last_tcp,
                       sc.last_error, sc.flows, sc.clock, meta_extra)


def _opening_error(scan, e: OSError | DissectError) -> dict:
    """The summary's entry for a range whose file could not be read (``open_error``: missing or
    unreadable; ``format_error``: a CaptureError while opening, not a capture)."""
    if isinstance(e, FileNotFoundError):
        return {"open_error": f"{scan.current}: no such file"}
    if isinstance(e, DissectError):
        return {"format_error": f"{scan.current}: {e}"}
    return {"open_error": f"{scan.current}: cannot open: {e.strerror or e}"}


def _summary_row(rid, scan, tcp, errors, unsupported, first_unsupported, last_tcp, last_error, flows, clock,
                 meta_extra) -> tuple:
    """A range's summary row (see :func:`decode_range`)."""
    meta = scan.summary()
    meta.update(tcp=tcp, packet_errors=errors, unsupported={str(k): v for k, v in unsupported.items()},
                last_tcp=last_tcp, last_error=last_error, first_unsupported=first_unsupported,
                flows=sorted(flows.items(), key=lambda kv: (-kv[1], kv[0]))[:FLOW_TOP], clock=clock.points,
                **meta_extra)
    return (rid, -1, None, None, None, None, None, KIND_SUMMARY, None, None, json.dumps(meta), None)


class CaptureChanged(Exception):
    """A file read again in stage 2 no longer holds, at an offset, the record stage 1 read there."""


class RecordReader:
    """Reads records of uncompressed pcap files again by the offset of their header (stage 2).

    A flow's records in a file come in increasing offsets, so the reader keeps a window of
    each open file (:data:`WINDOW` bytes read at once, from the record asked for on) and
    serves the records that fall in it from memory: one ``pread`` per window, not per record
    (a record larger than the window is read alone).  The header must still give the time,
    captured and original length that stage 1 saw, else :class:`CaptureChanged` (a ring
    buffer of tcpdump files overwritten during the job, say).  At most ``max_open`` files are
    kept open (least recently used closed first), so the reader holds at most ``max_open``
    windows."""

    WINDOW = 256 << 10

    def __init__(self, paths, max_open: int = 64, window: int | None = None):
        self.paths = paths
        self.max_open = max_open
        self.window = window or self.WINDOW
        # file index -> [fd, header unpack, divisor, header length, window bytes, window offset]
        self._open: OrderedDict = OrderedDict()

    def _file(self, file: int):
        h = self._open.get(file)
        if h is not None:
            self._open.move_to_end(file)
            return h
        path = self.paths[file]
        fd = os.open(path, os.O_RDONLY)
        hdr = pcap_header(os.pread(fd, 24, 0))
        if hdr is None:
            os.close(fd)
            raise CaptureChanged(f"{path}: changed while it was read (no longer a pcap file)")
        h = [fd, struct.Struct("<IIII" if hdr.little_endian else ">IIII").unpack_from,
             1 if hdr.nanosecond else 1000, hdr.record_header, b"", 0]
        self._open[file] = h
        while len(self._open) > self.max_open:
            os.close(self._open.popitem(last=False)[1][0])
        return h

    def read(self, file: int, pos: int, caplen: int, ts: int, orig_len: int) -> bytes:
        """The captured bytes of the record whose header is at ``pos`` in file ``file``."""
        h = self._file(file)
        hl = h[3]
        end = hl + caplen
        buf = h[4]
        rel = pos - h[5]
        if rel < 0 or rel + end > len(buf):  # not in the window: the next window starts here
            buf = os.pread(h[0], max(self.window, end), pos)
            h[4], h[5] = buf, pos
            rel = 0
        if rel + end <= len(buf):
            sec, frac, cl, orig = h[1](buf, rel)
            if cl == caplen and orig == orig_len and sec * 1_000_000_000 + frac * h[2] == ts:
                return buf[rel + hl:rel + end]
        raise CaptureChanged(f"{self.paths[file]}: changed while it was read (the record at byte {pos} differs)")

    def close(self) -> None:
        while self._open:
            os.close(self._open.popitem()[1][0])


def fill_records(rows: Iterable[tuple], reader: RecordReader) -> Iterator[tuple]:
    """Stage-2 rows ``(flow, packet, ts, linktype, data, orig_len, file, pos, caplen)`` as
    FlowRunner takes them, ``(flow, packet, ts, linktype, data, orig_len)``: a record given
    by offset (``data`` None) is read from its file."""
    read = reader.read
    for flow, packet, ts, lt, data, orig, file, pos, caplen in rows:
        if data is None and pos is not None:
            data = read(file, pos, caplen, ts, orig)
        yield (flow, packet, ts, lt, data, orig)
