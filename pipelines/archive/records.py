"""Archive stage 1, the rows of a range (:func:`decode_range`: one per TCP record with its flow,
a note per record outside any flow, a summary), and stage 2's way back to the bytes of a pcap
record given by its offset (:class:`RecordReader`, :func:`fill_batches`)."""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from typing import Iterable, Iterator, NamedTuple

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

    A batch of records is read a file at a time, in increasing offsets (a flow's records in a file
    come so), a window at a time: :data:`WINDOW` bytes from the first record not yet read, one
    ``pread`` for every record that starts in it (a record larger than the window is read whole).
    Every header must still give the time, captured and original length that stage 1 saw, else
    :class:`CaptureChanged` (a ring buffer of tcpdump files overwritten during the job, say); the
    headers of a window are checked by column (numpy).  At most ``max_open`` files are kept open
    (least recently used closed first)."""

    WINDOW = 256 << 10

    def __init__(self, paths, max_open: int = 64, window: int | None = None):
        self.paths = paths
        self.max_open = max_open
        self.window = window or self.WINDOW
        self._open: OrderedDict = OrderedDict()  # file index -> PcapFile

    def _file(self, file: int) -> "PcapFile":
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
        h = self._open[file] = PcapFile(fd, "<u4" if hdr.little_endian else ">u4", 1 if hdr.nanosecond else 1000,
                                        hdr.record_header)
        while len(self._open) > self.max_open:
            os.close(self._open.popitem(last=False)[1].fd)
        return h

    def read(self, file: int, pos: int, caplen: int, ts: int, orig_len: int) -> bytes:
        """The captured bytes of the record whose header is at ``pos`` in file ``file``."""
        import numpy as np

        return self.read_many(*(np.array([v], np.int64) for v in (file, pos, caplen, ts, orig_len)))[0]

    def read_many(self, file, pos, caplen, ts, orig_len) -> list[bytes]:
        """The captured bytes of records given by column (numpy int64 arrays, a record per
        position: its file, the offset of its header, its captured length, time in nanoseconds and
        original length), in that order."""
        import numpy as np

        out: list = [None] * len(pos)
        for f in np.unique(file).tolist():
            rows = np.flatnonzero(file == f)
            rows = rows[np.argsort(pos[rows], kind="stable")]
            h = self._file(f)
            at = pos[rows]
            ends = at + h.header + caplen[rows]
            i = 0
            while i < len(rows):
                start = int(at[i])
                j = max(i + 1, int(np.searchsorted(at, start + self.window, "left")))
                buf = os.pread(h.fd, int(ends[i:j].max()) - start, start)
                self._check(f, h, buf, start, at[i:j], rows[i:j], caplen, ts, orig_len)
                got = [buf[a:b] for a, b in zip((at[i:j] - start + h.header).tolist(), (ends[i:j] - start).tolist())]
                first = int(rows[i])
                if int(rows[j - 1]) - first == j - i - 1:  # (rows that follow one another: the usual batch)
                    out[first:first + j - i] = got
                else:
                    for row, data in zip(rows[i:j].tolist(), got):
                        out[row] = data
                i = j
        return out

    def _check(self, f: int, h: "PcapFile", buf: bytes, start: int, at, rows, caplen, ts, orig_len) -> None:
        """Raise :class:`CaptureChanged` unless each record at an offset of ``at`` (``buf``: file
        ``f``'s bytes from offset ``start``) is whole and its header gives the lengths and time of
        its row (``rows``) of ``caplen``, ``ts`` and ``orig_len``."""
        import numpy as np

        rel = at - start
        whole = rel + h.header + caplen[rows] <= len(buf)
        same = whole.copy()
        if whole.any():
            mine = rows[whole]
            head = np.frombuffer(buf, np.uint8)[rel[whole][:, None] + np.arange(16)].view(h.words).astype(np.int64)
            same[whole] = ((head[:, 2] == caplen[mine]) & (head[:, 3] == orig_len[mine])
                           & (head[:, 0] * 1_000_000_000 + head[:, 1] * h.divisor == ts[mine]))
        if not same.all():
            raise CaptureChanged(f"{self.paths[f]}: changed while it was read (the record at byte "
                                 f"{int(at[np.argmin(same)])} differs)")

    def close(self) -> None:
        while self._open:
            os.close(self._open.popitem()[1].fd)


class PcapFile(NamedTuple):
    """An open pcap file of a :class:`RecordReader`."""

    fd: int
    words: str  # numpy's type of its headers' 32-bit words (byte order)
    divisor: int  # nanoseconds per unit of a header's fraction of a second
    header: int  # bytes of a record header


def fill_batches(batches: Iterable, reader: RecordReader) -> Iterator[tuple]:
    """Stage-2 rows as FlowRunner takes them, ``(flow, packet, ts, linktype, data, orig_len)``, from
    Arrow record batches of the columns ``flow, packet, ts, linktype, data, orig_len, file, pos,
    caplen``: a record given by offset (``data`` null, ``pos`` not) is read from its file, a batch's
    at once (:meth:`RecordReader.read_many`)."""
    from itertools import chain

    return chain.from_iterable(filled_rows(b, reader) for b in batches)


def filled_rows(b, reader: RecordReader) -> Iterator[tuple]:
    """The rows of one batch of :func:`fill_batches`."""
    import numpy as np
    import pyarrow.compute as pc

    by_offset = pc.and_(pc.is_null(b.column("data")), pc.is_valid(b.column("pos")))
    if not by_offset.true_count:
        data = b.column("data").to_pylist()
    else:
        rows = np.flatnonzero(by_offset.to_numpy(zero_copy_only=False))
        cols = [pc.fill_null(b.column(n), 0).to_numpy(zero_copy_only=False)[rows].astype(np.int64)
                for n in ("file", "pos", "caplen", "ts", "orig_len")]
        if len(rows) == b.num_rows:  # (every record by offset: the usual batch)
            data = reader.read_many(*cols)
        else:
            data = b.column("data").to_pylist()
            for row, d in zip(rows.tolist(), reader.read_many(*cols)):
                data[row] = d
    return zip(*(b.column(n).to_pylist() for n in ("flow", "packet", "ts", "linktype")), data,
               b.column("orig_len").to_pylist())
