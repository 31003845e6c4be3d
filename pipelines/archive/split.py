"""Write a capture as a rotated series of pcap files, like ``tcpdump -C`` / ``-G`` would.

    from amqp_dissect.pipelines.archive.split import split_capture
    paths = split_capture("big.pcap", "out/", packets=10000)          # or bytes=..., seconds=...
    # out/big_00000.pcap, out/big_00001.pcap, ...  (gzip=True: .pcap.gz)

pcap input (plain or gzip) is copied record by record, byte for byte (file
header and record headers unchanged), so reading the parts in order gives
exactly the records, timestamps and link type of the original.  pcapng input
is converted to nanosecond pcap (timestamps kept to the nanosecond, from the
reader's exact times); a change of link type starts a new file, since a pcap
file has one link type.  ``-`` reads standard input (nothing seeks).

A pcap record holds its time as unsigned 32-bit seconds (1970 to 2106): a pcapng time outside
that range is written clamped to it, and counted (``result.clamped``).  Damage (a truncated
record, a corrupt or truncated gzip stream) ends the split after the last whole record; it is
reported in ``result.error``, never raised.  The parts of an earlier split of the same name in
the folder are refused (``force``: removed first), so the folder never mixes two splits.
"""

from __future__ import annotations

import collections
import gzip
import os
import re
import struct
import sys
import zlib
from typing import Iterable, Iterator, NamedTuple

from amqp_dissect.capture.gunzip import GunzipStream
from amqp_dissect.capture.pcap import MAX_RECORD, PrefixedFile, read_upto, open_capture, too_little_decompressed
from amqp_dissect.errors import CaptureError

from .ranges import pcap_header

_GZ = b"\x1f\x8b"
_GZIP_ERRORS = (EOFError, OSError, zlib.error)  # what a broken gzip stream raises (BadGzipFile is an OSError)
_U32 = 0xFFFFFFFF


class SplitResult(list):
    """The paths written (a list), plus ``records``, ``error`` (damage that ended reading) and
    ``clamped`` (records whose time a pcap record cannot hold, written clamped to 1970..2106)."""

    records = 0
    error: str | None = None
    clamped = 0


class SplitExists(FileExistsError):
    """The output folder holds parts of an earlier split of the same name (``parts``: their paths)."""

    def __init__(self, out_dir: str, parts: list):
        self.parts = parts
        super().__init__(f"{out_dir} holds {len(parts)} part(s) of an earlier split "
                         f"({os.path.basename(parts[0])} ...)")


class _SafeRead:
    """``read(n)`` of a (gzip) stream made of calls to ``read`` (which may return fewer bytes:
    gzip's ``read1``), that stops, instead of raising, where the stream is damaged: the bytes
    before the damage are returned, and ``error`` says what and at which byte of the
    decompressed stream."""

    def __init__(self, read, catch: tuple = _GZIP_ERRORS):
        self._read = read
        self._catch = catch
        self.offset = 0
        self.error: str | None = None

    def read(self, n: int) -> bytes:
        parts = []
        have = 0
        while have < n and self.error is None:
            try:
                data = self._read(n - have)
            except self._catch as exc:
                what = "truncated" if isinstance(exc, EOFError) else "corrupt"
                self.error = (f"gzip data {what} at byte {self.offset + have} of the decompressed stream "
                              f"({type(exc).__name__}: {exc})")
                break
            if not data:
                break
            parts.append(data)
            have += len(data)
        self.offset += have
        return parts[0] if len(parts) == 1 else b"".join(parts)


STDIN = "-"


def _stem(path: str) -> str:
    if path == STDIN:
        return "stdin"
    name = os.path.basename(path)
    for ext in (".gz", ".pcapng", ".pcap", ".cap"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name or "capture"


def _raw_pcap(f, first4: bytes) -> tuple[bytes, Iterator[tuple[float, bytes, int]], list]:
    """(file header, iterator of (ts, raw record bytes, linktype), error holder) for pcap
    (``f``: a :class:`_SafeRead`, whose damage ends the records)."""
    hdr = first4 + f.read(20)
    ph = pcap_header(hdr)
    if ph is None:
        if f.error:
            raise CaptureError(f"{f.error}: in the pcap file header")
        raise CaptureError("not a pcap capture with a valid file header")
    hl = ph.record_header
    unpack = struct.Struct("<IIII" if ph.little_endian else ">IIII").unpack_from
    scale = 1 if ph.nanosecond else 1000
    err: list = []

    def records():
        off = 24
        while True:
            h = f.read(hl)
            if f.error and len(h) < hl:
                err.append(f"{f.error}: the records before byte offset {off} were split")
                return
            if not h:
                return
            if len(h) < hl:
                err.append(f"capture truncated: last record header at byte offset {off} is incomplete")
                return
            sec, frac, caplen, _orig = unpack(h, 0)
            if caplen > MAX_RECORD:
                err.append(f"pcap record at byte offset {off} has captured length {caplen}: corrupted")
                return
            data = f.read(caplen)
            if f.error and len(data) < caplen:
                err.append(f"{f.error}: the records before byte offset {off} were split")
                return
            if len(data) < caplen:
                err.append(f"capture truncated: last record at byte offset {off} is incomplete")
                return
            off += hl + caplen
            yield sec * 1_000_000_000 + frac * scale, h + data, ph.linktype

    return hdr, records(), err


def _pcap_header(linktype: int, nanosecond: bool, snaplen: int = 262144) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B23C4D if nanosecond else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)


def pcap_time(ns: int, nanosecond: bool) -> tuple[int, int, bool]:
    """(seconds, fraction, clamped) of a pcap record header for a time of ``ns`` nanoseconds
    since the epoch: a time before 1970 or past 2106 (which 32 unsigned bits of seconds cannot
    hold) is clamped to the first or last time a record holds, and said so."""
    div = 1 if nanosecond else 1000
    units = 1_000_000_000 // div
    sec, frac = divmod(ns // div, units)
    if sec < 0:
        return 0, 0, True
    if sec > _U32:
        return _U32, units - 1, True
    return sec, frac, False


def _converted(reader, nanosecond: bool, result: SplitResult) -> Iterator[tuple[float, bytes, int]]:
    """pcap records of a pcapng reader's packets, times to the nanosecond (the reader's exact
    times: a float of epoch seconds cannot hold them) or the microsecond; a time a pcap record
    cannot hold is clamped (counted in ``result.clamped``)."""
    reader.exact = exact = collections.deque(maxlen=1)
    for rec in reader:
        sec, frac, clamped = pcap_time(exact[-1][1], nanosecond)
        if clamped:
            result.clamped += 1
        orig = min(rec.orig_len, _U32)
        yield rec.ts, struct.pack("<IIII", sec, frac, len(rec.data), orig) + rec.data, rec.linktype


_PART = re.compile(r"_\d{5}\.pcap(\.gz)?$")


def split_parts(out_dir: str, stem: str) -> list:
    """The parts of a split named ``stem`` in ``out_dir`` (``STEM_00000.pcap[.gz]`` ...), sorted."""
    try:
        names = os.listdir(out_dir)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(out_dir, n) for n in names
                  if n.startswith(stem) and _PART.fullmatch(n[len(stem):]))


class _Kept:
    """A reader that keeps what it reads until :meth:`kept` is called; then just reads."""

    def __init__(self, read):
        self._read = read
        self._parts: list | None = []

    def read(self, n: int = -1) -> bytes:
        data = self._read(n)
        if self._parts is not None:
            self._parts.append(data)
        return data

    def kept(self) -> bytes:
        data = b"".join(self._parts or ())
        self._parts = None
        return data


def split_capture(path: str, out_dir: str, *, packets: int | None = None, bytes: int | None = None,
                  seconds: float | None = None, gzip_output: bool = False, name: str | None = None,
                  force: bool = False) -> SplitResult:
    """Split ``path`` into ``out_dir/NAME_00000.pcap[.gz]``, ... (exactly one of ``packets``
    (records per file), ``bytes`` (file size limit, as tcpdump -C: a file gets at least one
    record), ``seconds`` (a new file once a record is ``seconds`` past the file's first)).
    Raises OSError / CaptureError when the input cannot be read; damage found partway
    ends the split and is reported in ``result.error``.  Raises :class:`SplitExists` when
    ``out_dir`` holds parts of an earlier split of that name, unless ``force`` (they are
    removed first)."""
    rule = _Rotation(packets, bytes, seconds)
    os.makedirs(out_dir, exist_ok=True)
    stem = name or _stem(path)
    _remove_old_parts(out_dir, stem, force)
    result = SplitResult()
    # nothing seeks: standard input (``-``) or a pipe is read like a file, its first bytes replayed
    raw = sys.stdin.buffer if path == STDIN else open(path, "rb")
    try:
        source = _open_records(raw, result)
        parts = _Parts(out_dir, stem, gzip_output, source.file_header, result)
        try:
            for ts, rec, lt in source.records:
                if parts.out is None or lt != parts.linktype or rule.due(parts, ts, rec):
                    parts.start(ts, lt)
                parts.write(rec)
        finally:
            parts.close()
        if source.errors:
            result.error = source.errors[0]
        elif source.reader is not None and source.reader.error is not None:
            result.error = str(source.reader.error)
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()
    return result


class _Rotation:
    """When a part is full: ``packets`` records, ``bytes`` of file (a part gets at least one
    record), or a record ``seconds`` past the part's first (exactly one of the three)."""

    def __init__(self, packets: int | None, bytes: int | None, seconds: float | None):
        given = [x for x in (packets, bytes, seconds) if x is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of packets, bytes, seconds")
        if any(x <= 0 for x in given):
            raise ValueError("the split size must be positive")
        self.packets = packets
        self.bytes = bytes
        self.span_ns = None if seconds is None else round(seconds * 1_000_000_000)

    def due(self, part: "_Parts", ts: int, rec: bytes) -> bool:
        if self.packets is not None:
            return part.count >= self.packets
        if self.bytes is not None:
            return part.size + len(rec) > self.bytes and part.count > 0
        return ts >= part.start_ts + self.span_ns


def _remove_old_parts(out_dir: str, stem: str, force: bool) -> None:
    """The parts of an earlier split of that name: :class:`SplitExists`, or removed (``force``)."""
    old = split_parts(out_dir, stem)
    if old and not force:
        raise SplitExists(out_dir, old)
    for p in old:
        os.remove(p)


class _Source(NamedTuple):
    """The records of the capture being split: (ts, record bytes, link type) each."""

    records: Iterable
    file_header: bytes | None  # a pcap file's own header (each part starts with it), None for pcapng
    reader: object  # the pcapng reader (its ``error`` at the end), None for pcap
    errors: list  # damage found reading a pcap file


def _open_records(raw, result: SplitResult) -> _Source:
    """The capture's format from its first bytes (gzip, pcapng or pcap), and its records."""
    seen = _Kept(raw.read)  # the bytes read to find the format, given again to the pcapng reader
    head = read_upto(seen.read, 4)  # (a pipe may give fewer bytes than asked)
    if head[:2] == _GZ:
        f = _SafeRead(GunzipStream(PrefixedFile(head, seen.read).read).read)  # (as the capture reader reads it)
        first4 = f.read(4)
        if f.error is not None and len(first4) < 4:  # (said as the capture reader says it)
            raise CaptureError(f"{f.error}: {too_little_decompressed(len(first4))}")
    else:
        f, first4 = _SafeRead(seen.read, ()), head
    consumed = seen.kept()  # (and keep no more)
    if first4 == b"\x0a\x0d\x0d\x0a":
        reader = open_capture(PrefixedFile(consumed, raw.read))  # (gzip handled there too)
        return _Source(_converted(reader, True, result), None, reader, [])
    file_header, records, err = _raw_pcap(f, first4)
    return _Source(records, file_header, None, err)


class _Parts:
    """The part files written so far, the last one open (``out``) with its count, size, first
    time and link type."""

    def __init__(self, out_dir: str, stem: str, gzip_output: bool, file_header: bytes | None, result: SplitResult):
        self.out_dir = out_dir
        self.stem = stem
        self.gzip_output = gzip_output
        self.file_header = file_header
        self.result = result
        self.out = None
        self.index = 0
        self.count = 0
        self.size = 0
        self.start_ts = None
        self.linktype = None

    def start(self, ts: int, lt: int) -> None:
        """Close the part open, open the next one (its header written)."""
        if self.out is not None:
            self.out.close()
        fname = f"{self.stem}_{self.index:05d}.pcap" + (".gz" if self.gzip_output else "")
        fpath = os.path.join(self.out_dir, fname)
        self.out = gzip.open(fpath, "wb") if self.gzip_output else open(fpath, "wb")
        hdr = self.file_header if self.file_header is not None else _pcap_header(lt, True)
        self.out.write(hdr)
        self.result.append(fpath)
        self.index += 1
        self.count = 0
        self.size = len(hdr)
        self.start_ts = ts
        self.linktype = lt

    def write(self, rec: bytes) -> None:
        self.out.write(rec)
        self.count += 1
        self.size += len(rec)
        self.result.records += 1

    def close(self) -> None:
        if self.out is not None:
            self.out.close()
