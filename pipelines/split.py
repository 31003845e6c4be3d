"""Write a capture as a rotated series of pcap files, like ``tcpdump -C`` / ``-G`` would.

    from amqp_dissect.pipelines.split import split_capture
    paths = split_capture("big.pcap", "out/", packets=10000)          # or bytes=..., seconds=...
    # out/big_00000.pcap, out/big_00001.pcap, ...  (gzip=True: .pcap.gz)

pcap input (plain or gzip) is copied record by record, byte for byte (file
header and record headers unchanged), so reading the parts in order gives
exactly the records, timestamps and link type of the original.  pcapng input
is converted to nanosecond pcap (timestamps kept to the nanosecond, from the
reader's exact times); a change of link type starts a new file, since a pcap
file has one link type.  ``-`` reads standard input (nothing seeks).
"""

from __future__ import annotations

import collections
import gzip
import os
import struct
import sys
from typing import Iterator

from amqp_dissect.capture.pcap import MAX_RECORD, _Prefixed, open_capture
from amqp_dissect.errors import CaptureError

from .archive import pcap_header

_GZ = b"\x1f\x8b"


class SplitResult(list):
    """The paths written (a list), plus ``records`` and ``error`` (damage that ended reading)."""

    records = 0
    error: str | None = None


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
    """(file header, iterator of (ts, raw record bytes, linktype), error holder) for pcap."""
    hdr = first4 + f.read(20)
    ph = pcap_header(hdr)
    if ph is None:
        raise CaptureError("not a pcap capture with a valid file header")
    hl = ph.record_header
    unpack = struct.Struct("<IIII" if ph.little_endian else ">IIII").unpack_from
    div = 1e9 if ph.nanosecond else 1e6
    err: list = []

    def records():
        off = 24
        while True:
            h = f.read(hl)
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
            if len(data) < caplen:
                err.append(f"capture truncated: last record at byte offset {off} is incomplete")
                return
            off += hl + caplen
            yield sec + frac / div, h + data, ph.linktype

    return hdr, records(), err


def _pcap_header(linktype: int, nanosecond: bool, snaplen: int = 262144) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B23C4D if nanosecond else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)


def _converted(reader, nanosecond: bool) -> Iterator[tuple[float, bytes, int]]:
    """pcap records of a pcapng reader's packets, times to the nanosecond (the reader's exact
    times: a float of epoch seconds cannot hold them) or the microsecond."""
    reader.exact = exact = collections.deque(maxlen=1)
    div = 1 if nanosecond else 1000
    for rec in reader:
        sec, frac = divmod(exact[-1][1] // div, 1_000_000_000 // div)
        yield rec.ts, struct.pack("<IIII", sec, frac, len(rec.data), rec.orig_len) + rec.data, rec.linktype


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
                  seconds: float | None = None, gzip_output: bool = False, name: str | None = None) -> SplitResult:
    """Split ``path`` into ``out_dir/NAME_00000.pcap[.gz]``, ... (exactly one of ``packets``
    (records per file), ``bytes`` (file size limit, as tcpdump -C: a file gets at least one
    record), ``seconds`` (a new file once a record is ``seconds`` past the file's first)).
    Raises OSError / CaptureError when the input cannot be read; damage found partway
    ends the split and is reported in ``result.error``."""
    given = [x for x in (packets, bytes, seconds) if x is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of packets, bytes, seconds")
    if any(x <= 0 for x in given):
        raise ValueError("the split size must be positive")
    os.makedirs(out_dir, exist_ok=True)
    stem = name or _stem(path)
    result = SplitResult()
    # nothing seeks: standard input (``-``) or a pipe is read like a file, its first bytes replayed
    raw = sys.stdin.buffer if path == STDIN else open(path, "rb")
    try:
        seen = _Kept(raw.read)  # the bytes read to find the format, given again to the pcapng reader
        head = seen.read(4)
        if head[:2] == _GZ:
            f = gzip.GzipFile(fileobj=_Prefixed(head, seen.read), mode="rb")
            first4 = f.read(4)
        else:
            f, first4 = seen, head
        consumed = seen.kept()  # (and keep no more)
        err: list = []
        if first4 == b"\x0a\x0d\x0d\x0a":
            reader = open_capture(_Prefixed(consumed, raw.read))  # (gzip handled there too)
            records = _converted(reader, True)
            file_header = None
        else:
            file_header, records, err = _raw_pcap(f, first4)
            reader = None
        out = None
        count = 0
        size = 0
        start_ts = None
        cur_lt = None
        index = 0
        try:
            for ts, rec, lt in records:
                rotate = out is None or lt != cur_lt
                if not rotate:
                    if packets is not None:
                        rotate = count >= packets
                    elif bytes is not None:
                        rotate = size + len(rec) > bytes and count > 0
                    else:
                        rotate = ts >= start_ts + seconds
                if rotate:
                    if out is not None:
                        out.close()
                    fname = f"{stem}_{index:05d}.pcap" + (".gz" if gzip_output else "")
                    fpath = os.path.join(out_dir, fname)
                    out = gzip.open(fpath, "wb") if gzip_output else open(fpath, "wb")
                    hdr = file_header if file_header is not None else _pcap_header(lt, True)
                    out.write(hdr)
                    result.append(fpath)
                    index += 1
                    count = 0
                    size = len(hdr)
                    start_ts = ts
                    cur_lt = lt
                out.write(rec)
                count += 1
                size += len(rec)
                result.records += 1
        finally:
            if out is not None:
                out.close()
        if err:
            result.error = err[0]
        elif reader is not None and reader.error is not None:
            result.error = str(reader.error)
    finally:
        if raw is not sys.stdin.buffer:
            raw.close()
    return result
