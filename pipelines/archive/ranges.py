"""Archive byte ranges: where a range of a pcap file starts (:func:`find_boundary`, the first of
a chain of plausible record headers) and the records of a range (:class:`RangeScan`) or of an
overlap group of files merged in time order (:class:`MergeScan`)."""

from __future__ import annotations

import heapq
import json
import struct
from typing import Iterator, NamedTuple

from amqp_dissect.capture.keylog import DSB_TLS_KEY_LOG
from amqp_dissect.capture.pcap import (MAX_RECORD, ByteSource, PcapHeader, open_capture, parse_pcap_header,
                                       pcap_records)
from amqp_dissect.errors import CaptureError
from amqp_dissect.events import CaptureRecord
from amqp_dissect.shard import S1_FULL, S1_STOP, Stage1Rows, Stage1Scan, stage1_fill

from .inputs import Range


CHAIN = 8  # consecutive plausible record headers needed to accept a range's first record


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


def _plain_pcap_header(f):
    """The pcap header of the file ``f`` (left at its start), or None: gzip, pcapng, not a capture."""
    head = f.read(24)
    f.seek(0)
    return pcap_header(head) if head[:2] != b"\x1f\x8b" else None


class SplitRecords(NamedTuple):
    """A range's records read from a boundary of a plain pcap, and the reader's status (its bytes
    read, the damage that stopped it)."""

    records: Iterator[CaptureRecord]
    status: _Status


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
            hdr = _plain_pcap_header(f)
            if hdr is None or (rng.part == 0 and rng.end is None):
                if rng.part != 0:
                    self.skipped = True  # gzip / pcapng / unknown: part 0 reads the whole file
                    return
                yield from self._whole(f, hdr)
                return
            split = self._split_records(f, hdr)
            if split is None:
                return
            status = split.status
            stop = rng.end
            for rec in split.records:
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

    def batches(self, sc: Stage1Scan, new_rows) -> Iterator[Stage1Rows]:
        """The range's rows by column: its records through the compiled stage-1 loop
        (:func:`~amqp_dissect.shard.stage1_fill`), which keeps its counts in ``sc`` (a
        :class:`~amqp_dissect.shard.Stage1Scan`, its reader's facts copied here at the end) and
        fills the batches ``new_rows(carry)`` makes (:class:`~amqp_dissect.shard.Stage1Rows`;
        ``carry``: the rows carry their records), each given when full and the last when the
        records end.  The same records, facts and reading as :meth:`records` (which stays the
        record-by-record way, for :class:`MergeScan`)."""
        rng = self.range
        try:
            with open(rng.path, "rb") as f:
                hdr = _plain_pcap_header(f)
                if hdr is None or (rng.part == 0 and rng.end is None):
                    if rng.part != 0:
                        self.skipped = True  # gzip / pcapng / unknown: part 0 reads the whole file
                        return
                    reader = open_capture(f)
                    self.format = reader.format
                    self.whole = True
                    self.first_offset = sc.first_offset = 0
                    # an uncompressed pcap: its rows give their records by offset
                    plain = hdr is not None and reader.format == "pcap" and not reader.compressed
                    sc.shift = 1  # (the reader numbers from 1)
                    yield from _fill(sc, iter(reader), -1, plain, new_rows)
                    self.end_offset = reader.bytes_read
                    if reader.error is not None:
                        self.error = str(reader.error)
                    self.keylog = "".join(data.decode("utf-8", "replace") + "\n" for stype, data in reader.secrets
                                          if stype == DSB_TLS_KEY_LOG)
                    return
                split = self._split_records(f, hdr)
                if split is None:
                    return
                status = split.status
                sc.shift = 0
                why = yield from _fill(sc, split.records, rng.end if rng.end is not None else -1, True, new_rows)
                if why == S1_STOP:
                    self.end_offset = sc.end_offset
                    return
                self.end_offset = status.bytes_read
                if status.error is not None:
                    self.error = str(status.error)
        finally:
            self.count = sc.count
            self.first_ts, self.last_ts, self.max_ts = sc.first_ts, sc.last_ts, sc.max_ts
            if sc.first_offset is not None:
                self.first_offset = sc.first_offset

    def _split_records(self, f, hdr) -> SplitRecords | None:
        """The records of a plain pcap's range read from its first record header on (``format``
        "pcap"), or None when the range holds no record start."""
        self.format = "pcap"
        first = self._first_record(f, hdr)
        if first is None:
            return None
        status = _Status(first)
        records = pcap_records(ByteSource(f.read, b"", base=first), hdr.little_endian, hdr.nanosecond, hdr.linktype,
                               first_index=0, record_header=hdr.record_header, status=status)
        return SplitRecords(records, status)

    def _first_record(self, f, hdr) -> int | None:
        """The offset of the range's first record header, ``f`` left there: the file's first (24) for
        part 0, else the first boundary :func:`find_boundary` accepts (``rejected``: the false
        candidates before it).  None when the range holds no record start (``end_offset``: its end)."""
        rng = self.range
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
                return None
        f.seek(first)
        return first

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
    :meth:`amqp_dissect.pipelines.runs.local.CaptureSource._merged` reads a set: record by record,
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


def _fill(sc: Stage1Scan, records, stop: int, offsets: bool, new_rows) -> Iterator[Stage1Rows]:
    """:func:`~amqp_dissect.shard.stage1_fill` over ``records`` a batch at a time (see
    :meth:`RangeScan.batches`); returns what it stopped at (``S1_END`` or ``S1_STOP``).  A batch
    an exception interrupts is given before the exception goes on (the rows read before it)."""
    while True:
        out = new_rows(not offsets)
        try:
            why = stage1_fill(sc, records, out, stop, offsets)
        except BaseException:
            if out.n:
                out.trim()
                yield out
            raise
        if out.n:
            if out.n < out.size:
                out.trim()
            yield out
        if why != S1_FULL:
            return why
