"""Archive analysis, the parts that need no Spark: inputs, byte ranges, per-flow runs, row schemas.

:mod:`amqp_dissect.pipelines.spark` wires these into Spark stages; everything here is plain
Python (files are opened here, never in ``dissector``), so it is tested
without a Spark session and runs unchanged inside executors.

Stage 1 (:func:`decode_range`), one task per file or byte range
    Opens the file itself, reads its records (pcap byte ranges start on a
    record boundary found by :func:`find_boundary`), runs
    ``netparse.parse_segment`` on each record and emits one row per TCP
    record ``(range id, index in range, ts, linktype, data, orig_len, flow
    key)`` plus one summary row per range (record count, first/last
    timestamp, offsets reached, damage).  The flow key is the unordered pair
    of endpoints, so every connection that ever used a 4-tuple (``#n``
    reuse included) lands in one flow.  Records of uncompressed pcap files
    travel as their offset in the file instead of their bytes: stage 2 reads
    them again (:class:`RecordReader`, which checks that the record there is
    still the one stage 1 read); gzip and pcapng records travel whole.
    Files whose times overlap are read again as one range per overlap group
    (:func:`layout`, :func:`group_ranges`): one task merges them record by
    record (:class:`MergeScan`); each row names its file.

Stage 2 (:class:`FlowRunner`), rows of one flow in global packet order
    A :class:`~amqp_dissect.dissect.Dissector` (TCP reassembly + AMQP framing
    routing) and an :class:`~amqp_dissect.results.analytics.Analyzer` for that flow
    alone, fed record by record; the few values that come from the rest of
    the capture (time and number of the last record, the end time the
    analyzer is finished with, the idle-sweep clock) are passed in.

Only paths and byte offsets travel through the driver.
"""

from __future__ import annotations

import glob
import heapq
import json
import os
import pickle
import re
import struct
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Iterator

from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.capture.keylog import DSB_TLS_KEY_LOG, KeyLog
from amqp_dissect.capture.pcap import (MAX_RECORD, ByteSource, PcapHeader, open_capture, parse_pcap_header,
                                       pcap_records)
from amqp_dissect.dissect import Dissector
from amqp_dissect.errors import CaptureError, DissectError, UnsupportedLinkType
from amqp_dissect.events import CaptureRecord, endpoint
from amqp_dissect.times import ns
from amqp_dissect.capture.netparse import TruncatedPacket, parse_segment
from amqp_dissect.render.frames import event_json
from amqp_dissect.pipelines.local import _natural, set_gaps
from amqp_dissect.shard import flow_name, sweep_ticks  # noqa: F401 (sweep_ticks: the driver's)

from amqp_dissect.results.schema import columns as _registry_columns

DEFAULT_SPLIT_SIZE = 64 << 20  # bytes: uncompressed pcap files larger than this are split into ranges
CHAIN = 8  # consecutive plausible record headers needed to accept a range's first record

# file names picked up when a directory is given (tcpdump -C appends digits: x.pcap, x.pcap1, ...)
CAPTURE_NAME = re.compile(r"\.(pcap|pcapng|cap|dmp)\d*(\.gz)?$|\.gz$", re.IGNORECASE)

# stage-1 row kinds
KIND_TCP = 0  # a record that reaches TCP reassembly (a segment, or a snaplen-truncated one)
KIND_NOTE = 1  # a record outside any flow that produces an event (a packet note): only its time matters
KIND_SUMMARY = 2  # one per range: counts, timestamps, offsets, damage (meta: JSON)

STAGE1_COLUMNS = ("rid", "idx", "ts", "linktype", "data", "orig_len", "flow", "kind", "pos", "caplen", "meta",
                  "file")
FLOW_TOP = 64  # flows per range whose record counts the range summary carries (stage-2 balancing)
FLOW_TRACK = 1 << 16  # distinct flows a range counts (later new flows are not counted: bounded memory)


class InputError(Exception):
    """Bad input paths: ``code`` is "missing" (a path does not exist) or "empty" (no capture found)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- inputs


def expand_inputs(paths: Iterable[str]) -> list[str]:
    """Files named by ``paths``: files as given, directories searched recursively for
    capture names (:data:`CAPTURE_NAME`), globs (``*``, ``?``, ``[``, ``**``) expanded.
    Duplicates (same real path) are dropped.  Raises :class:`InputError`."""
    out: list[str] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        rp = os.path.realpath(p)
        if rp not in seen:
            seen.add(rp)
            out.append(os.path.abspath(p))

    def walk(d: str) -> None:
        for root, dirs, files in os.walk(d, followlinks=True):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and CAPTURE_NAME.search(name):
                    add(os.path.join(root, name))

    for p in paths:
        p = os.fspath(p)
        if any(ch in p for ch in "*?["):
            hits = sorted(glob.glob(p, recursive=True))
            if not hits:
                raise InputError("missing", f"{p}: no file matches")
            for h in hits:
                if os.path.isdir(h):
                    walk(h)
                else:
                    add(h)
        elif os.path.isdir(p):
            walk(p)
        elif os.path.exists(p):
            if not os.access(p, os.R_OK):
                raise InputError("missing", f"{p}: cannot open: permission denied")
            add(p)
        else:
            raise InputError("missing", f"{p}: no such file or directory")
    if not out:
        raise InputError("empty", "no capture files found in " + ", ".join(os.fspath(p) for p in paths))
    return out


@dataclass(frozen=True)
class Range:
    """A unit of stage-1 work: a whole file (``end`` None) or the records whose header
    starts in ``[start, end)`` of an uncompressed pcap."""

    rid: int
    file: int  # index in the expanded file list
    path: str
    part: int  # 0-based range number in the file
    start: int
    end: int | None
    size: int
    # an overlap group (see group_ranges): JSON [[file, path, first time], ...] of the files read
    # merged, in the set's order ("" for a file or a byte range of one)
    group: str = ""

    def as_tuple(self) -> tuple:
        return (self.rid, self.file, self.path, self.part, self.start, self.end, self.size, self.group)


def plan_ranges(files: list[str], split_size: int = DEFAULT_SPLIT_SIZE, first_rid: int = 0,
                whole: Iterable[int] = ()) -> list[Range]:
    """Ranges for ``files``: files larger than ``split_size`` whose name does not end in
    ``.gz`` are cut into ``split_size`` byte ranges (a range task that finds gzip or
    pcapng content processes the whole file in part 0 and nothing in the others);
    files whose index is in ``whole`` are never cut."""
    whole = set(whole)
    out: list[Range] = []
    rid = first_rid
    for i, path in enumerate(files):
        size = os.path.getsize(path)
        if split_size > 0 and size > split_size and i not in whole and not path.lower().endswith(".gz"):
            n = -(-size // split_size)
            for part in range(n):
                start = part * split_size
                end = min(size, start + split_size)
                out.append(Range(rid, i, path, part, start, end if part < n - 1 else None, size))
                rid += 1
        else:
            out.append(Range(rid, i, path, 0, 0, None, size))
            rid += 1
    return out


# --------------------------------------------------------------------------- pcap byte ranges


def pcap_header(hdr: bytes) -> PcapHeader | None:
    """The pcap file header in ``hdr`` (24 bytes), or None when it is not one
    (:func:`~amqp_dissect.capture.pcap.parse_pcap_header`)."""
    if len(hdr) < 24:
        return None
    try:
        return parse_pcap_header(hdr)
    except CaptureError:
        return None


def find_boundary(read_at, start: int, end: int, hdr: PcapHeader, size: int, chain: int = CHAIN,
                  ref_sec: int | None = None, window: int = 1 << 20) -> tuple[int | None, int]:
    """The first offset in ``[start, end)`` where ``chain`` consecutive plausible record
    headers follow each other (or fewer, the last ending exactly at ``size``, the
    end of the file).

    ``read_at(offset, n)`` returns up to n bytes of the file at offset (fewer at
    its end).  A header is plausible when its captured length is at most the
    larger of snaplen and 262144 (and MAX_RECORD), its original length is at
    least the captured length, its fraction is below one second, its seconds
    are within a year of ``ref_sec`` (the file's first record, when known) and
    within a day of the previous header of the chain.  Returns
    ``(offset or None, rejected)`` where ``rejected`` counts candidates whose
    own header was plausible but whose chain broke (false boundaries).
    Pure function of the bytes: a candidate for moving into ``amqp_dissect.capture.pcap``.
    """
    hl = hdr.record_header
    unpack = struct.Struct("<IIII" if hdr.little_endian else ">IIII").unpack_from
    limit = min(MAX_RECORD, max(hdr.snaplen, 262144))
    frac_max = 1_000_000_000 if hdr.nanosecond else 1_000_000
    rejected = 0
    buf_off = start
    buf = read_at(start, window + 2 * hl)

    def plausible(b: bytes, p: int, prev_sec):
        sec, frac, caplen, orig = unpack(b, p)
        if caplen > limit or orig < caplen or frac >= frac_max:
            return None
        if prev_sec is not None and abs(sec - prev_sec) > 86400:
            return None
        if ref_sec is not None and abs(sec - ref_sec) > 366 * 86400:
            return None
        return sec, caplen

    def chain_ok(off: int) -> bool:
        prev = None
        local_buf, local_off = buf, buf_off
        for _ in range(chain):
            if off == size:
                return True  # the chain ended exactly at the end of the file
            if off + hl > size:
                return False
            rel = off - local_off
            if rel + hl > len(local_buf):
                local_buf, local_off = read_at(off, 2 * hl), off
                rel = 0
                if len(local_buf) < hl:
                    return False
            got = plausible(local_buf, rel, prev)
            if got is None:
                return False
            prev, caplen = got
            off += hl + caplen
        return True

    pos = start
    while pos < end:
        rel = pos - buf_off
        if rel + hl > len(buf):
            buf_off = pos
            buf = read_at(pos, window + 2 * hl)
            if len(buf) < hl:
                break  # no header fits before the end of the file
            rel = 0
        if plausible(buf, rel, None) is not None:
            if chain_ok(pos):
                return pos, rejected
            rejected += 1
        pos += 1
    return None, rejected


class RangeScan:
    """Reads the records of one :class:`Range`; after iteration the attributes describe it.

    ``format`` ("pcap", "pcapng", "" when skipped), ``whole`` (the whole file was
    read), ``count``, ``first_ts`` / ``last_ts``, ``first_offset`` (offset of the
    first record's header, None when the range holds none), ``end_offset``
    (offset of the first record header at or after the range end, or where
    reading stopped), ``error`` (text of the damage that stopped reading, as
    :class:`~amqp_dissect.capture.pcap.CaptureReader` reports it), ``rejected`` (false
    boundary candidates), ``skipped`` (a non-first range of a file that cannot
    be split).  Opening errors raise (OSError, CaptureError).
    """

    def __init__(self, rng: Range):
        self.range = rng
        self.format = ""
        self.whole = False
        self.count = 0
        self.first_ts = None
        self.last_ts = None
        self.max_ts = None  # the latest time of its records (a file's times need not increase)
        self.file = rng.file  # the file of the record last yielded
        self.current = rng.path  # the file being read (what an opening error names)
        self.first_offset = None
        self.end_offset = None
        self.error = None
        self.rejected = 0
        self.skipped = False
        self.keylog = ""  # TLS key log text of the file's pcapng Decryption Secrets Blocks
        # offset of the header of the record last yielded, when the file can be read again at
        # it (uncompressed pcap): stage 2 reads the record from there (RecordReader)
        self.pos = None

    def records(self) -> Iterator[CaptureRecord]:
        rng = self.range
        with open(rng.path, "rb") as f:
            head = f.read(24)
            f.seek(0)
            hdr = pcap_header(head) if head[:2] != b"\x1f\x8b" else None
            if hdr is None or (rng.part == 0 and rng.end is None):
                if rng.part != 0:
                    self.skipped = True  # gzip / pcapng / unknown: part 0 reads the whole file
                    return
                yield from self._whole(f, hdr)
                return
            self.format = "pcap"
            if rng.part == 0:
                first = 24
            else:
                def read_at(off, n):
                    f.seek(off)
                    return f.read(n)

                h1 = read_at(24, 16)
                ref = struct.unpack_from("<I" if hdr.little_endian else ">I", h1)[0] if len(h1) == 16 else None
                first, self.rejected = find_boundary(read_at, rng.start, rng.end if rng.end is not None else rng.size,
                                                     hdr, rng.size, ref_sec=ref)
                if first is None:
                    self.end_offset = rng.end if rng.end is not None else rng.size
                    return
            f.seek(first)
            src = ByteSource(f.read, b"", base=first)
            status = _Status(first)
            stop = rng.end
            for rec in pcap_records(src, hdr.little_endian, hdr.nanosecond, hdr.linktype, first_index=0,
                                    record_header=hdr.record_header, status=status):
                off = status.bytes_read
                if stop is not None and off >= stop:
                    self.end_offset = off
                    return
                if self.first_offset is None:
                    self.first_offset = off
                    self.first_ts = rec.ts
                self.last_ts = rec.ts
                if self.max_ts is None or rec.ts > self.max_ts:
                    self.max_ts = rec.ts
                self.count += 1
                self.pos = off
                yield rec
            self.end_offset = status.bytes_read
            if status.error is not None:
                self.error = str(status.error)

    def _whole(self, f, hdr) -> Iterator[CaptureRecord]:
        reader = open_capture(f)
        self.format = reader.format
        self.whole = True
        self.first_offset = 0
        # an uncompressed pcap: reader.bytes_read is the offset of the header of the record it yields
        plain = hdr is not None and reader.format == "pcap" and not reader.compressed
        for rec in reader:
            if self.first_ts is None:
                self.first_ts = rec.ts
            self.last_ts = rec.ts
            if self.max_ts is None or rec.ts > self.max_ts:
                self.max_ts = rec.ts
            self.count += 1
            rec.index -= 1
            if plain:
                self.pos = reader.bytes_read
            yield rec
        self.end_offset = reader.bytes_read
        if reader.error is not None:
            self.error = str(reader.error)
        self.keylog = "".join(data.decode("utf-8", "replace") + "\n" for stype, data in reader.secrets
                              if stype == DSB_TLS_KEY_LOG)

    def summary(self) -> dict:
        r = self.range
        return {
            "rid": r.rid, "file": r.file, "path": r.path, "part": r.part, "start": r.start, "end": r.end,
            "size": r.size,
            "format": self.format, "whole": self.whole, "count": self.count, "first_ts": self.first_ts,
            "last_ts": self.last_ts, "max_ts": self.max_ts, "first_offset": self.first_offset,
            "end_offset": self.end_offset,
            "error": self.error, "rejected": self.rejected, "skipped": self.skipped,
            "keylog": self.keylog,
        }


class MergeScan:
    """Reads the files of an overlap group (a :class:`Range` with ``group``) as one capture, as
    :meth:`amqp_dissect.pipelines.local.CaptureSource._merged` reads a set: record by record,
    the earliest next record first, on equal times the file first in the set's order (the
    group's list).  Records are numbered (``index``, from 0) in that merged order.  Each file
    is read whole by a :class:`RangeScan`, opened when the merge reaches its first record
    (the time stage 1 found) and closed at its end: files that follow one another inside the
    group are read one at a time, overlapping ones hold one record each.

    The same interface as :class:`RangeScan` (``records()``, ``pos``, ``file``, ``summary()``);
    the summary covers the group: ``group`` (its file indices), ``members`` ([file, first
    time, last time, records] of each file), ``errors`` ([file, damage] in the order the
    merge finished the files, as the single-process reader reports them)."""

    def __init__(self, rng: Range):
        self.range = rng
        self.members = [tuple(m) for m in json.loads(rng.group)]
        self.count = 0
        self.first_ts = self.last_ts = self.max_ts = None
        self.pos = None
        self.file = None
        self.errors: list = []
        self.keylogs: list = []
        self.facts: dict = {}  # file -> [first time, last time, records]
        self.current = rng.path

    def records(self) -> Iterator[CaptureRecord]:
        members = self.members
        scans: list = [None] * len(members)
        gens: list = [None] * len(members)
        heads: list = [None] * len(members)
        heap = [(first, rank) for rank, (_f, _p, first) in enumerate(members)]
        heapq.heapify(heap)

        def pull(rank):
            rec = next(gens[rank], None)
            if rec is None:
                scan = scans[rank]
                if scan.error is not None:
                    self.errors.append([scan.range.file, scan.error])
                if scan.keylog:
                    self.keylogs.append(scan.keylog)
                gens[rank] = scans[rank] = None
                return None
            heads[rank] = (rec, scans[rank].pos)
            return rec

        try:
            while heap:
                _, rank = heap[0]
                if scans[rank] is None:  # its first record: open it for good
                    file, path, _first = members[rank]
                    self.current = path
                    scans[rank] = RangeScan(Range(self.range.rid, file, path, 0, 0, None, 0))
                    gens[rank] = scans[rank].records()
                    if pull(rank) is None:
                        heapq.heappop(heap)
                        continue
                rec, pos = heads[rank]
                file = members[rank][0]
                nxt = pull(rank)
                if nxt is None:
                    heapq.heappop(heap)
                else:
                    heapq.heapreplace(heap, (nxt.ts, rank))
                rec.index = self.count
                self.count += 1
                self.pos = pos
                self.file = file
                ts = rec.ts
                if self.first_ts is None:
                    self.first_ts = ts
                self.last_ts = ts
                if self.max_ts is None or ts > self.max_ts:
                    self.max_ts = ts
                f = self.facts.get(file)
                if f is None:
                    self.facts[file] = [ts, ts, 1]
                else:
                    f[1] = ts
                    f[2] += 1
                yield rec
        finally:
            for g in gens:
                if g is not None:
                    g.close()

    def summary(self) -> dict:
        r = self.range
        return {
            "rid": r.rid, "file": r.file, "path": r.path, "part": 0, "start": 0, "end": None, "size": r.size,
            "format": "merged", "whole": True, "count": self.count, "first_ts": self.first_ts,
            "last_ts": self.last_ts, "max_ts": self.max_ts, "first_offset": 0, "end_offset": None,
            "error": None, "rejected": 0, "skipped": False, "keylog": "".join(self.keylogs),
            "group": [m[0] for m in self.members],
            "members": [[m[0]] + self.facts.get(m[0], [None, None, 0]) for m in self.members],
            "errors": self.errors,
        }


class _Status:
    """What pcap_records reports progress to (the ``status`` argument)."""

    def __init__(self, offset: int):
        self.bytes_read = offset
        self.error = None


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
    for balancing the flows over the stage-2 tasks).  A file that cannot be opened or is not a capture gives a summary
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
    meta_extra: dict = {}
    parse = parse_segment
    try:
        for rec in scan.records():
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
            key = flow_name(seg)
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
    except FileNotFoundError:
        meta_extra["open_error"] = f"{scan.current}: no such file"
    except DissectError as e:  # CaptureError while opening: not a capture
        meta_extra["format_error"] = f"{scan.current}: {e}"
    except OSError as e:
        meta_extra["open_error"] = f"{scan.current}: cannot open: {e.strerror or e}"
    meta = scan.summary()
    meta.update(tcp=tcp, packet_errors=errors, unsupported={str(k): v for k, v in unsupported.items()},
                last_tcp=last_tcp, last_error=last_error, first_unsupported=first_unsupported,
                flows=sorted(flows.items(), key=lambda kv: (-kv[1], kv[0]))[:FLOW_TOP], **meta_extra)
    yield (rid, -1, None, None, None, None, None, KIND_SUMMARY, None, None, json.dumps(meta), None)


class CaptureChanged(Exception):
    """A file read again in stage 2 no longer holds, at an offset, the record stage 1 read there."""


class RecordReader:
    """Reads records of uncompressed pcap files again by the offset of their header (stage 2).

    Each read is one ``pread`` of header and data; the header must still give the time,
    captured and original length that stage 1 saw, else :class:`CaptureChanged` (a ring
    buffer of tcpdump files overwritten during the job, say).  At most ``max_open``
    files are kept open (least recently used closed first)."""

    def __init__(self, paths, max_open: int = 64):
        self.paths = paths
        self.max_open = max_open
        self._open: OrderedDict = OrderedDict()  # file index -> (fd, header unpack, divisor, header length)

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
        h = (fd, struct.Struct("<IIII" if hdr.little_endian else ">IIII").unpack_from,
             1 if hdr.nanosecond else 1000, hdr.record_header)
        self._open[file] = h
        while len(self._open) > self.max_open:
            os.close(self._open.popitem(last=False)[1][0])
        return h

    def read(self, file: int, pos: int, caplen: int, ts: int, orig_len: int) -> bytes:
        """The captured bytes of the record whose header is at ``pos`` in file ``file``."""
        fd, unpack, scale, hl = self._file(file)
        buf = os.pread(fd, hl + caplen, pos)
        if len(buf) == hl + caplen:
            sec, frac, cl, orig = unpack(buf, 0)
            if cl == caplen and orig == orig_len and sec * 1_000_000_000 + frac * scale == ts:
                return buf[hl:]
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


# --------------------------------------------------------------------------- driver-side planning


@dataclass
class Layout:
    """File order and packet numbering decided from the range summaries."""

    order: list[str]  # files in capture order
    offsets: dict[int, int]  # rid -> packets before its first record (global index = offset + idx + 1)
    valid: set[int]  # rids whose records are part of the capture
    redo: list[int]  # file indices whose ranges disagree: to be read again as one range
    errors: list[tuple[str, str]]  # (path, damage) in capture order, like CaptureSource.errors
    fatal: list[tuple[str, str]]  # (kind "open"/"format", message)
    records: int
    last_ts: int | None  # time of the last record of the capture (nanoseconds)
    ranges_used: int
    rejected: int  # false boundary candidates seen
    tcp_records: int
    packet_errors: int
    unsupported: dict
    # files whose times overlap, not read merged yet: [[(file, first time), ...], ...] in the set's
    # order (group_ranges reads each group as one range); while any is left, offsets number them
    # one after the other, which is not the capture's numbering
    groups: list = None
    merged: list = None  # [[file, ...], ...]: the overlap groups read merged (group summaries)
    spans: list = None  # [(path, first time, last time), ...] of the files with records, in capture order


def set_key(path: str, first, position: int) -> tuple:
    """A file's place in a capture set, as the single-process reader orders one: files with
    records by their first record's time, then by name (its numbers by value), then by
    position; files without records last."""
    return (first is None, first if first is not None else 0, _natural(path), position)


def layout(files: list[str], summaries: list[dict]) -> Layout:
    """Order the files as one capture and number the records like
    :class:`amqp_dissect.pipelines.local.CaptureSource` reads a set: files by their first
    record's time (:func:`set_key`), records merged where files overlap in time.

    Files that follow one another (each file's latest time at or before the next one's first
    time: a rotated set) are concatenated, their ranges numbered by prefix sums.  A run of
    files whose times overlap (a file's first time before the latest time of the files
    before it) is an overlap group: its packet numbers need a merged read, so it is listed in
    ``groups`` until a group summary (:class:`MergeScan`, range made by
    :func:`group_ranges`) stands for its files.

    The ranges of a split file must chain: the offset where range k stopped (the
    first header at or after its end, found by walking records from its own
    first record) must be the first record offset found by the next non-empty
    range; otherwise the file is listed in ``redo``.  After a range reports
    damage, later ranges of that file are not part of the capture (a sequential
    reader stops there too).
    """
    by_file: dict[int, list[dict]] = {}
    merged_sums: list[dict] = []
    for s in summaries:
        if s.get("group"):
            merged_sums.append(s)
        else:
            by_file.setdefault(s["file"], []).append(s)
    in_group = {f for g in merged_sums for f in g["group"]}
    valid: set[int] = set()
    redo: list[int] = []
    fatal: list[tuple[str, str]] = []
    file_err: dict[int, str] = {}
    file_first: dict[int, float | None] = {}
    file_max: dict[int, float | None] = {}
    file_last: dict[int, float | None] = {}
    file_ranges: dict[int, list[dict]] = {}
    rejected = 0
    for fi, ss in by_file.items():
        if fi in in_group:
            continue  # read merged: its group's summary stands for it
        ss.sort(key=lambda s: s["part"])
        rejected += sum(s.get("rejected", 0) for s in ss)
        first = ss[0]
        if "open_error" in first or "format_error" in first:
            fatal.append(("open" if "open_error" in first else "format",
                          first.get("open_error") or first.get("format_error")))
            continue
        used = []
        ok = True
        if first["whole"] or len(ss) == 1:
            used = [first]
        else:
            expect = None  # offset the previous range stopped at
            for s in ss:
                if s.get("open_error") or s.get("format_error"):
                    ok = False
                    break
                if s["first_offset"] is None and s["part"] == 0:
                    expect = s["end_offset"]  # a file without any complete record
                    if s["error"]:
                        used.append(s)
                        break
                    continue
                if s["first_offset"] is None:
                    stop = s["end"] if s["end"] is not None else s["size"]
                    if expect is None or expect < stop:
                        ok = False  # the previous range stopped inside this one, which found no record
                        break
                    continue
                if expect is not None and s["first_offset"] != expect:
                    ok = False
                    break
                used.append(s)
                if s["error"]:
                    break
                expect = s["end_offset"]
        if not ok:
            redo.append(fi)
            continue
        file_ranges[fi] = used
        for s in used:
            valid.add(s["rid"])
            if s["error"] and fi not in file_err:
                file_err[fi] = s["error"]
        counted = [s for s in used if s["count"]]
        file_first[fi] = counted[0]["first_ts"] if counted else None
        file_last[fi] = counted[-1]["last_ts"] if counted else None
        maxes = [s["max_ts"] if s.get("max_ts") is not None else s["last_ts"] for s in counted]
        file_max[fi] = max(maxes) if maxes else None
    # the units of the order: a file (its ranges) or a group read merged (one summary)
    units = [(set_key(files[fi], file_first[fi], fi), "file", fi) for fi in file_ranges]
    for g in merged_sums:
        if g.get("open_error") or g.get("format_error"):
            fatal.append(("open" if g.get("open_error") else "format", g.get("open_error") or g.get("format_error")))
            continue
        valid.add(g["rid"])
        head = g["group"][0]
        units.append((set_key(files[head], g["first_ts"], head), "group", g))
    units.sort(key=lambda u: u[0])
    # overlap groups: runs of files each starting before the latest time of those before it
    # (a record at that very time comes after theirs in the merge too: concatenation is exact)
    groups: list = []
    run: list = []
    run_max = None
    for key, kind, u in units:
        if key[0]:
            break  # files without records: last, in no group
        first, top = (file_first[u], file_max[u]) if kind == "file" else (u["first_ts"], u["max_ts"])
        if run and run_max is not None and first < run_max:
            run.append((kind, u))
        else:
            if len(run) > 1:
                groups.append(run)
            run = [(kind, u)]
            run_max = None
        if top is not None and (run_max is None or top > run_max):
            run_max = top
    if len(run) > 1:
        groups.append(run)
    pending = []
    for run in groups:
        members = []
        for kind, u in run:
            if kind == "file":
                members.append((u, file_first[u]))
            else:  # (a group read merged overlapping another file: not expected; read it again with it)
                members += [(fi, first) for fi, first, _last, _n in u["members"]]
        pending.append(members)
    offsets: dict[int, int] = {}
    total = 0
    last_ts = None
    errors = []
    tcp = perr = 0
    unsupported: dict[str, int] = {}
    order: list[str] = []
    spans: list = []
    merged: list = []
    for _key, kind, u in units:
        sums = file_ranges[u] if kind == "file" else [u]
        for s in sums:
            offsets[s["rid"]] = total
            total += s["count"]
            if s["count"]:
                last_ts = s["last_ts"]
            tcp += s.get("tcp", 0)
            perr += s.get("packet_errors", 0)
            for k, v in (s.get("unsupported") or {}).items():
                unsupported[k] = unsupported.get(k, 0) + v
        if kind == "file":
            order.append(files[u])
            if file_first[u] is not None:
                spans.append((files[u], file_first[u], file_last[u]))
            if u in file_err:
                errors.append((files[u], file_err[u]))
        else:
            merged.append(list(u["group"]))
            for fi, first, last, n in u["members"]:
                order.append(files[fi])
                if n:
                    spans.append((files[fi], first, last))
            errors += [(files[fi], err) for fi, err in u.get("errors") or ()]
    return Layout(order, offsets, valid, redo, errors, fatal, total, last_ts, len(valid), rejected, tcp, perr,
                  unsupported, pending, merged, spans)


def group_ranges(files: list[str], groups: list, first_rid: int) -> list[Range]:
    """One :class:`Range` per overlap group of :attr:`Layout.groups`: its files read whole and
    merged record by record by one task (:class:`MergeScan`)."""
    out = []
    for i, members in enumerate(groups):
        head = members[0][0]
        size = sum(os.path.getsize(files[fi]) for fi, _ in members)
        out.append(Range(first_rid + i, head, files[head], 0, 0, None, size,
                         json.dumps([[fi, files[fi], first] for fi, first in members])))
    return out


def set_gaps_of(spans: list) -> list[dict]:
    """The files missing from a numbered capture set (:func:`amqp_dissect.pipelines.local.set_gaps`),
    from :attr:`Layout.spans`."""
    from types import SimpleNamespace

    return set_gaps([SimpleNamespace(stream=False, name=p, first_ts=a, last_ts=b) for p, a, b in spans])


def capture_ends(summaries: list[dict], offsets: dict[int, int]) -> tuple[int, tuple | None]:
    """From the summaries of the ranges in the capture (``offsets``: :attr:`Layout.offsets`):
    the packet number of the last TCP record (0 without any), and ``(packet, time)`` of
    the last record outside the flows that produces an event (a record the parser
    rejected, or the first record of each unsupported link type), or None."""
    last_tcp = 0
    note = None
    unsupported: dict[str, tuple] = {}
    for s in summaries:
        off = offsets.get(s["rid"])
        if off is None:
            continue
        if s.get("last_tcp") is not None:
            last_tcp = max(last_tcp, off + s["last_tcp"] + 1)
        if s.get("last_error"):
            idx, ts = s["last_error"]
            if note is None or off + idx + 1 > note[0]:
                note = (off + idx + 1, ts)
        for lt, (idx, ts) in (s.get("first_unsupported") or {}).items():
            if lt not in unsupported or off + idx + 1 < unsupported[lt][0]:
                unsupported[lt] = (off + idx + 1, ts)
    for cand in unsupported.values():
        if note is None or cand[0] > note[0]:
            note = cand
    return last_tcp, note


def balance_flows(summaries: list[dict], offsets: dict[int, int], parts: int, total: int,
                  top: int = 4096) -> dict[str, int]:
    """Stage-2 task (0 .. parts-1) of the largest flows, so that the tasks get about the same
    number of TCP records: the flows the range summaries count (``flows``; at most ``top``,
    largest first) go one by one to the least loaded task (longest processing time
    first); the ``total`` records minus theirs (flows no summary counts, hashed over
    the tasks by Spark) are taken as spread evenly.  Hash partitioning alone can put
    several large flows in one task, and the job waits for its slowest task."""
    sizes: dict[str, int] = {}
    for s in summaries:
        if s["rid"] not in offsets:
            continue
        for flow, n in s.get("flows") or ():
            sizes[flow] = sizes.get(flow, 0) + n
    known = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    rest = max(0, total - sum(n for _, n in known))
    loads = [(rest / parts, i) for i in range(parts)]
    heapq.heapify(loads)
    out = {}
    for flow, n in known:
        load, i = heapq.heappop(loads)
        out[flow] = i
        heapq.heappush(loads, (load + n, i))
    return out


def range_bounds(chunks: Iterable[tuple[tuple, int]], parts: int) -> list[tuple]:
    """Boundaries that cut rows sorted by key into at most ``parts`` ranges of about the same
    number of rows, from ``(smallest key, rows)`` of the chunks that hold them (each chunk's
    rows counted at its smallest key).  A row goes to range ``bisect_right(bounds, key)``;
    the result is sorted and without repeats (fewer ranges when keys repeat)."""
    chunks = sorted(chunks)
    total = sum(n for _, n in chunks)
    if parts <= 1 or total == 0:
        return []
    bounds: list[tuple] = []
    acc = 0
    k = 1
    for key, n in chunks:
        if acc >= total * k / parts and key > (bounds[-1] if bounds else chunks[0][0]):
            bounds.append(key)
            while k < parts and acc >= total * k / parts:
                k += 1
            if len(bounds) >= parts - 1:
                break
        acc += n
    return bounds


# --------------------------------------------------------------------------- stage 2: one flow


@dataclass(frozen=True)
class FlowParams:
    """What a flow needs to know about the rest of the capture."""

    ports: tuple = ()
    last_ts: float | None = None  # time of the capture's last record (the Dissector's last_ts at finish)
    last_tcp_packet: int = 0  # index of the capture's last record fed to TCP reassembly
    end_ts: float | None = None  # end time the Analyzer is finished with (see amqp_dissect.pipelines.spark)
    ticks: tuple | None = None  # ((packet, ts), ...) of the global idle sweeps, or None when not computed
    frames: bool = False
    idle_timeout: float = 900.0
    keylog: str | None = None  # TLS key log text, shipped to the executors with the params
    files: tuple = ()  # the input paths, by file index: where stage 2 reads records given by offset


ROW_TABLES = ("connections", "links", "deliveries", "stalls", "frames")  # the tables stage 2 makes rows of
_TABLE_METHODS = (  # deliveries stream out as they become final (FlowRunner._ready_deliveries)
    ("connections", "connection_rows"),
    ("links", "link_rows"),
    ("stalls", "stall_rows"),
)


def _delivery_k2(key: tuple) -> int:
    """A delivery's order within its connection (link, then first transfer) as one integer."""
    _, link_index, seq = key
    return (link_index << 40) | seq


def _tick_packets(ticks):
    return [t[0] for t in ticks] if ticks else []


class FlowRunner:
    """Runs the flows of a partition sorted by (flow, packet); see :meth:`run`."""

    CHUNK_ROWS = 1024  # rows per Arrow chunk of a table in the output (an IPC blob of a few hundred KB)

    def __init__(self, params: FlowParams):
        self.p = params
        self._keylog = KeyLog(params.keylog) if params.keylog else None  # parsed once per runner
        self._tick_pk = _tick_packets(params.ticks)
        self._buf: dict[str, tuple[list, list, list, list]] = {}

    def run(self, rows: Iterable[tuple]) -> Iterator[tuple]:
        """``rows``: ``(flow, packet, ts, linktype, data, orig_len)`` sorted by flow then
        packet.  Yields ``(table, flow, k1, k2, n, hk1, hflow, hk2, blob)``: ``blob`` an Arrow
        IPC chunk of ``n`` rows of ``table`` (columns of :func:`arrow_schema`: the rows with
        their output-order keys ``_flow``, ``_k1``, ``_k2``), ``(k1, flow, k2)`` its smallest
        key, ``(hk1, hflow, hk2)`` its largest;
        table "_flow" carries one flow's facts, pickled (see :meth:`_flow_meta`).  Rows are
        consumed one at a time: nothing of a flow is held but its protocol state."""
        cur = None
        state = None
        frames = self.p.frames
        for row in rows:
            flow = row[0]
            if flow != cur:
                if state is not None:
                    yield from self._finish(cur, state)
                cur = flow
                state = self._start()
            self._feed(state, row)
            if state["ready"]:
                yield from self._ready_deliveries(cur, state)
            if frames and state["frames"]:
                yield from self._frame_rows(cur, state)
        if state is not None:
            yield from self._finish(cur, state)
        for table in list(self._buf):
            yield from self._flush(table)

    def _add(self, table: str, flow: str, row: dict, k1: int, k2: int) -> Iterator[tuple]:
        b = self._buf.get(table)
        if b is None:
            b = self._buf[table] = ([], [], [], [])
        b[0].append(row)
        b[1].append(flow)
        b[2].append(k1)
        b[3].append(k2)
        if len(b[0]) >= self.CHUNK_ROWS:
            yield from self._flush(table)

    def _flush(self, table: str) -> Iterator[tuple]:
        b = self._buf.pop(table, None)
        if b and b[0]:
            # the chunk's smallest and largest output-order keys and its size: the job places
            # the range boundaries of the sorted tables from these (see range_bounds) and sends
            # the chunk to the ranges it overlaps
            keys = list(zip(b[2], b[1], b[3]))
            k1, flow, k2 = min(keys)
            hk1, hflow, hk2 = max(keys)
            yield (table, flow, k1, k2, len(b[0]), hk1, hflow, hk2, batch_ipc(rows_batch(table, *b)))

    def _ready_deliveries(self, flow: str, st: dict) -> Iterator[tuple]:
        """Delivery rows folded so far (final), each with its single-process order."""
        ready = st["ready"]
        items = list(ready)
        ready.clear()
        conns = st["an"].connections
        rows = st["rows"]
        rows["deliveries"] += len(items)
        for row, key in items:
            yield from self._add("deliveries", flow, row, conns[row["connection"]].first_packet or 0, _delivery_k2(key))

    def _frame_rows(self, flow: str, st: dict) -> Iterator[tuple]:
        n = st["nframes"]
        st["rows"]["frames"] += len(st["frames"])
        for fj in st["frames"]:
            yield from self._add("frames", flow, frame_row(fj), fj["packet"] if fj["packet"] is not None else (1 << 62),
                                 n)
            n += 1
        st["nframes"] = n
        st["frames"] = []

    # -- one flow ---------------------------------------------------------------------

    def _start(self) -> dict:
        ready: list = []
        return {
            "d": Dissector(extra_ports=self.p.ports, idle_timeout=self.p.idle_timeout, messages=self.p.frames,
                           keylog=self._keylog),
            # delivery rows stream out as deliveries become final: a flow holds only open ones
            "an": Analyzer(rows=False, delivery_sink=lambda row, key: ready.append((row, key))),
            "ready": ready,
            "last_ev": None,  # (packet, ts) of the last record that produced events
            "prev": None,  # (packet, ts) of the previous record of the flow
            "gap": False,  # an idle gap longer than idle_timeout: the global sweep may matter
            "frames": [],  # frames-table rows not yet yielded
            "nframes": 0,
            "packets": 0,
            "rows": dict.fromkeys(ROW_TABLES, 0),  # rows yielded per table
        }

    def _events(self, st: dict, events: list, packet, ts) -> None:
        if not events:
            return
        if packet is not None:
            st["last_ev"] = (packet, ts)
        an = st["an"]
        for ev in events:
            an.feed(ev)
        if self.p.frames:
            fr = st["frames"]
            for ev in events:
                d = event_json(ev)
                if d is not None:
                    fr.append(d)

    def _sweeps(self, st: dict, after: int, before: int | None) -> None:
        """The global idle sweeps that ran at other flows' records between two of ours."""
        pk = self._tick_pk
        if not pk:
            return
        ticks = self.p.ticks
        d = st["d"]
        i = bisect_right(pk, after)
        j = len(pk) if before is None else bisect_left(pk, before)
        for t in range(i, j):
            tp, tts = ticks[t]
            evs = d.sweep_idle(tts, tp)
            if evs:
                self._events(st, evs, tp, tts)
            if not d.tcp.has_open_connections:
                break

    def _feed(self, st: dict, row: tuple) -> None:
        _, packet, ts, lt, data, orig = row
        prev = st["prev"]
        if prev is not None and ts - prev[1] > ns(self.p.idle_timeout):
            st["gap"] = True
            self._sweeps(st, prev[0], packet)
        st["prev"] = (packet, ts)
        st["packets"] += 1
        evs = st["d"].feed(CaptureRecord(packet, ts, lt, data, orig))
        self._events(st, evs, packet, ts)

    def _finish(self, flow: str, st: dict) -> Iterator[tuple]:
        p = self.p
        d, an = st["d"], st["an"]
        prev = st["prev"]
        if prev is not None and p.last_ts is not None and p.last_ts - prev[1] > ns(p.idle_timeout):
            st["gap"] = True
            self._sweeps(st, prev[0], None)
        # the end of the capture as the single-process run sees it
        self._events(st, d.finish(p.last_ts, p.last_tcp_packet), None, None)
        an.finish(p.end_ts)
        firsts = {cid: c.first_packet for cid, c in an.connections.items()}
        yield from self._ready_deliveries(flow, st)
        counts = st["rows"]
        for key, row in an.live_deliveries():
            k1 = firsts.get(row["connection"])
            counts["deliveries"] += 1
            yield from self._add("deliveries", flow, row, k1 if k1 is not None else 0, _delivery_k2(key))
        for table, method in _TABLE_METHODS:
            for i, row in enumerate(getattr(an, method)()):
                k1 = row["start_packet"] if table == "stalls" else firsts.get(row["connection"])
                counts[table] += 1
                yield from self._add(table, flow, row, k1 if k1 is not None else 0, i)
        yield from self._frame_rows(flow, st)
        yield ("_flow", flow, 0, 0, 1, 0, flow, 0, pickle.dumps(self._flow_meta(st), 5))

    def _flow_meta(self, st: dict) -> dict:
        """Facts the driver needs after the run: the last record that produced events
        (the single-process run finishes its Analyzer at that record's time), whether
        the result depends on the global idle sweep, and on the analyzer's end time
        (open stalls; idle-time-out checks at the end: (reference, timeout) pairs), and
        the rows it gave each table (the job's row counts)."""
        an = st["an"]
        idle = []
        for c in an.connections.values():
            if c.transport_time is not None:
                continue
            for e in (0, 1):
                t, ref = c.idle[e], c.idle_ref[e]
                if t and ref is not None and c.close[e] is None:
                    idle.append((ref, t))
        return {
            "last_packet": st["last_ev"][0] if st["last_ev"] else None,
            "last_ts": st["last_ev"][1] if st["last_ev"] else None,
            "needs_ticks": st["gap"],
            "open_stalls": sum(1 for s in an.stalls if s.end is None),
            "idle": idle,
            "packets": st["packets"],
            "connections": len(an.connections),
            "rows": dict(st["rows"]),
        }


def end_sensitive(meta: dict, a: float | None, b: float | None) -> bool:
    """Would the flow's rows differ between Analyzer.finish(a) and finish(b)?"""
    if a == b:
        return False
    if meta["open_stalls"]:
        return True
    if a is None or b is None:
        return bool(meta["idle"])
    return any((a - ref > t) != (b - ref > t) for ref, t in meta["idle"])


# --------------------------------------------------------------------------- output tables


def table_columns(table: str) -> list[tuple[str, str]]:
    """(column, type) of an output table, from the column registry (:mod:`amqp_dissect.results.schema`):
    the columns and order of ``amqp_dissect.results.tables.to_frame``."""
    return [(c.name, c.type) for c in _registry_columns(table)]


def frame_row(d: dict) -> dict:
    """A frames-table row: the leading fields of ``frames --format jsonl`` plus the whole line."""
    row = {k: d.get(k) for k, _ in table_columns("frames") if k != "json"}
    row["time"] = d.get("time_ns")  # (the exact time: integer nanoseconds)
    row["json"] = json.dumps(d, ensure_ascii=False, allow_nan=False)
    return row


def arrow_schema(table: str):
    """The Arrow schema of a result table's chunks: its registry columns (as Spark takes
    them), then _flow, _k1, _k2."""
    import pyarrow as pa

    from amqp_dissect.results.tables import arrow_schema as registry_schema

    fields = list(registry_schema(table, spark=True))
    fields += [pa.field("_flow", pa.string()), pa.field("_k1", pa.int64()), pa.field("_k2", pa.int64())]
    return pa.schema(fields)


def rows_batch(table: str, rows: list[dict], flows: list, k1: list, k2: list):
    """Row dicts as an Arrow record batch with the registry's types (times as UTC
    timestamps, JSON columns as text, NaN as null; keys outside the table dropped)."""
    import pyarrow as pa

    from amqp_dissect.results.tables import record_batch

    b = record_batch(rows, table, spark=True)
    arrays = b.columns + [pa.array(flows, pa.string()), pa.array(k1, pa.int64()), pa.array(k2, pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(table))


def batch_ipc(batch) -> bytes:
    """An Arrow IPC stream of ``batch``, its buffers LZ4-compressed (a chunk of a stage-2
    table shrinks about fivefold: less for the JVM to copy, write and shuffle)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def ipc_batches(blob: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(blob).read_all().to_batches()


def _at_or_past(t, bound):
    """Mask of the rows of Arrow table ``t`` whose key (_k1, _flow, _k2) is >= ``bound``."""
    import pyarrow.compute as pc

    b1, bf, b2 = bound
    k1, fl, k2 = t["_k1"], t["_flow"], t["_k2"]
    return pc.or_(pc.greater(k1, b1), pc.and_(pc.equal(k1, b1), pc.or_(
        pc.greater(fl, bf), pc.and_(pc.equal(fl, bf), pc.greater_equal(k2, b2)))))


def sorted_range_table(chunks: Iterable[tuple[int, int, bytes]], bounds: list, excluded: list):
    """The rows of one output range of a table, sorted, as an Arrow table (None without
    rows): ``chunks`` are ``(layer, range, blob)`` (stage-2 chunks, each sent to every
    range its keys overlap); a chunk's rows outside its range of ``bounds``
    (:func:`range_bounds`), or of a flow in ``excluded[layer]`` (flows a later layer ran
    again), are dropped; the others are sorted by (_k1, _flow, _k2) and returned without
    those keys.  Holds the range's rows (the job makes ranges of about
    ``TABLE_PART_ROWS`` rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    drop = {}
    for layer, r, blob in chunks:
        for b in ipc_batches(blob):
            t = pa.Table.from_batches([b])
            mask = None
            if r > 0:
                mask = _at_or_past(t, bounds[r - 1])
            if r < len(bounds):
                below = pc.invert(_at_or_past(t, bounds[r]))
                mask = below if mask is None else pc.and_(mask, below)
            ex = excluded[layer] if layer < len(excluded) else None
            if ex:
                if layer not in drop:
                    drop[layer] = pa.array(sorted(ex), pa.string())
                keep = pc.invert(pc.is_in(t["_flow"], value_set=drop[layer]))
                mask = keep if mask is None else pc.and_(mask, keep)
            if mask is not None:
                t = t.filter(mask)
            if t.num_rows:
                parts.append(t)
    if not parts:
        return None
    t = pa.concat_tables(parts).sort_by([("_k1", "ascending"), ("_flow", "ascending"), ("_k2", "ascending")])
    return t.drop_columns(["_flow", "_k1", "_k2"])


def sorted_range(chunks: Iterable[tuple[int, int, bytes]], bounds: list, excluded: list, batch_rows: int = 4096):
    """:func:`sorted_range_table` as record batches of at most ``batch_rows`` rows."""
    t = sorted_range_table(chunks, bounds, excluded)
    if t is not None:
        yield from t.to_batches(max_chunksize=batch_rows)


RANGE_FILE = "part-{:05d}.parquet"  # file of range i of a table written by its task (name order = row order)
ROW_GROUP_ROWS = 65536


def write_range(directory: str, table: str, r: int, t) -> int:
    """Write the sorted rows ``t`` (an Arrow table, or None) of range ``r`` of ``table`` to
    ``directory/part-<r>.parquet`` with the table's Spark-compatible schema (snappy, UTC
    microsecond timestamps, like Spark's own writer here); through a temporary name and a
    rename, so that a task run again replaces its file.  Returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from amqp_dissect.results.tables import arrow_schema as registry_schema

    schema = registry_schema(table, spark=True)
    if t is None:
        t = schema.empty_table()
    path = os.path.join(directory, RANGE_FILE.format(r))
    tmp = os.path.join(directory, f".{RANGE_FILE.format(r)}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_batches(t.to_batches(), schema=schema), tmp, row_group_size=ROW_GROUP_ROWS,
                   compression="snappy")
    os.replace(tmp, path)
    return t.num_rows
