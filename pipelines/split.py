"""Write a capture as a rotated series of pcap files, like ``tcpdump -C`` / ``-G`` would.

    from amqp_dissect.pipelines.split import split_capture
    paths = split_capture("big.pcap", "out/", packets=10000)          # or bytes=..., seconds=...
    # out/big_00000.pcap, out/big_00001.pcap, ...  (gzip=True: .pcap.gz)

pcap input (plain or gzip) is copied record by record, byte for byte (file
header and record headers unchanged), so reading the parts in order gives
exactly the records, timestamps and link type of the original.  pcapng input
is converted to nanosecond pcap (timestamps kept to the nanosecond, possibly not
to the last bit of the float the pcapng reader computes); a change of link type starts a new file, since a pcap
file has one link type.
"""

from __future__ import annotations

import gzip
import math
import os
import struct
from typing import Iterator

from amqp_dissect.capture.pcap import MAX_RECORD, open_capture
from amqp_dissect.errors import CaptureError

from .archive import pcap_header

_GZ = b"\x1f\x8b"


class SplitResult(list):
    """The paths written (a list), plus ``records`` and ``error`` (damage that ended reading)."""

    records = 0
    error: str | None = None


def _stem(path: str) -> str:
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
    units = 1_000_000_000 if nanosecond else 1_000_000
    for rec in reader:
        ts = rec.ts
        sec = math.floor(ts)
        frac = round((ts - sec) * units)
        if frac >= units:
            sec, frac = sec + 1, frac - units
        yield ts, struct.pack("<IIII", sec, frac, len(rec.data), rec.orig_len) + rec.data, rec.linktype


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
    with open(path, "rb") as raw:
        head = raw.read(4)
        raw.seek(0)
        f = gzip.GzipFile(fileobj=raw, mode="rb") if head[:2] == _GZ else raw
        first4 = f.read(4)
        err: list = []
        if first4 == b"\x0a\x0d\x0d\x0a":
            raw.seek(0)
            reader = open_capture(raw)  # gzip handled there too
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
    return result
