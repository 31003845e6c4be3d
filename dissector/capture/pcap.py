"""Capture file reader: pcap and pcapng, optionally gzip-compressed.

Sans-IO: :func:`open_capture` receives an already-open *binary* file object
(a real file, ``sys.stdin.buffer``, ``io.BytesIO``...) and never opens,
seeks or closes anything itself.  Only ``read(n)`` is used, so non-seekable
streams work.

Reading is chunked (:data:`CHUNK` bytes at a time) and every length field is
checked against :data:`MAX_RECORD` before anything is read for it, so a
hostile length never allocates more than that.

Problems found while *opening* (unknown magic, bad file header) raise
:class:`~amqp_dissect.errors.CaptureError`.  Problems found *during iteration*
(a truncated last record, a corrupted block, a broken gzip tail) never raise:
iteration stops after the last complete record and :attr:`CaptureReader.error`
holds a :class:`CaptureError` that describes what went wrong and where.

The pcap record loop lives in :func:`pcap_records`, which works on a
:class:`ByteSource`; a later Spark job can build a ``ByteSource`` over a byte
range (``ByteSource.from_bytes``) that starts on a record boundary and reuse
the loop unchanged.
"""

from __future__ import annotations

import struct
import zlib
from collections import namedtuple
from typing import Callable, Iterator

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..errors import CaptureError
from ..events import CaptureRecord
from .gunzip import GunzipStream

CHUNK = 1 << 20  # bytes per read() call
MAX_RECORD = 256 << 20  # refuse any record / block larger than this

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAP_MAGIC_MODIFIED = 0xA1B2CD34  # Alexey Kuznetzov's patched libpcap (24-byte records)

# a pcap file header: byte order, time resolution, record header size (16, or 24 for the
# "modified" format), link type (without the FCS bits), snaplen
PcapHeader = namedtuple("PcapHeader", "little_endian nanosecond record_header linktype snaplen")


def parse_pcap_header(hdr: bytes) -> PcapHeader:
    """The pcap file header at the start of ``hdr`` (at least 24 bytes); CaptureError when it is
    not one (another magic) or not version 2."""
    for order, little in (("<", True), (">", False)):
        (m,) = struct.unpack_from(order + "I", hdr, 0)
        if m in (PCAP_MAGIC_US, PCAP_MAGIC_NS, PCAP_MAGIC_MODIFIED):
            _, vmaj, vmin, _zone, _sigfigs, snaplen, network = struct.unpack_from(order + "IHHiIII", hdr, 0)
            if vmaj != 2:
                raise CaptureError(f"unsupported pcap version {vmaj}.{vmin}")
            # (upper bits of the link type: FCS information)
            return PcapHeader(little, m == PCAP_MAGIC_NS, 24 if m == PCAP_MAGIC_MODIFIED else 16,
                              network & 0xFFFF, snaplen)
    raise CaptureError(f"not a pcap or pcapng capture (magic {hdr[:4].hex()})")
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BOM = 0x1A2B3C4D

_BT_IDB = 1
_BT_PB = 2  # obsolete Packet Block
_BT_SPB = 3
_BT_EPB = 6
_BT_DSB = 10  # Decryption Secrets Block

_OPT_IF_TSRESOL = 9
_OPT_IF_TSOFFSET = 14

# what a broken gzip stream raises (gzip.BadGzipFile is an OSError)
_GZIP_ERRORS = (EOFError, OSError, zlib.error)


class ByteSource:
    """A growable window over a byte stream, filled by ``read`` in chunks.

    ``buf[pos:]`` are the bytes not consumed yet; ``base`` is the stream
    offset of ``buf[0]`` (so ``base + pos`` is the offset of the next unread
    byte of the *uncompressed* stream).  ``stream_error`` is set (and
    ``eof`` becomes True) when the underlying reader failed, e.g. a
    corrupted gzip member: everything read before the failure is still used.
    """

    __slots__ = ("_read", "_catch", "buf", "pos", "base", "eof", "stream_error")

    def __init__(
        self,
        read: Callable[[int], bytes] | None,
        initial: bytes = b"",
        base: int = 0,
        catch: tuple[type[BaseException], ...] = (),
    ):
        self._read = read
        self._catch = catch  # exceptions of `read` that mean "the stream is broken here"
        self.buf = initial
        self.pos = 0
        self.base = base
        self.eof = read is None
        self.stream_error: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes, base: int = 0) -> "ByteSource":
        """A source over bytes already in memory (e.g. one split of a file)."""
        return cls(None, bytes(data), base)

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def available(self) -> int:
        return len(self.buf) - self.pos

    def fill(self, need: int) -> bool:
        """Make at least ``need`` unread bytes available in ``buf[pos:]``.

        Drops the consumed prefix (so ``pos`` becomes 0) and reads chunks until
        enough bytes are there.  Returns False on end of stream (the bytes that
        were there stay available).  ``need`` must already be bounded by the
        caller (records are checked against MAX_RECORD first).
        """
        rest = self.buf[self.pos :] if self.pos else self.buf
        self.base += self.pos
        self.pos = 0
        have = len(rest)
        if have >= need:
            self.buf = rest
            return True
        parts = [rest]
        read = self._read
        while have < need and not self.eof:
            try:
                chunk = read(CHUNK)
            except self._catch as exc:
                self.eof = True
                self.stream_error = f"{type(exc).__name__}: {exc}"
                break
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = parts[0] if len(parts) == 1 else b"".join(parts)
        return have >= need

    def read_exact(self, n: int) -> bytes | None:
        """Consume exactly n bytes, or None (nothing consumed) at end of stream."""
        if len(self.buf) - self.pos < n and not self.fill(n):
            return None
        p = self.pos
        self.pos = p + n
        return self.buf[p : p + n]


def _gzip_damage(src: ByteSource) -> str:
    """What broke a gzip stream, and where: the byte of the decompressed stream where the data
    ends (the compressed offset is not known exactly: the decompressor reads ahead)."""
    where = src.base + len(src.buf)
    err = src.stream_error or ""
    what = "gzip data truncated" if err.startswith("EOFError") else "gzip data corrupt"
    return f"{what} at byte {where} of the decompressed stream ({err})"


def _truncated(src: ByteSource, what: str, start: int, need: int) -> CaptureError:
    have = src.base + len(src.buf) - start
    if src.stream_error:
        return CaptureError(f"{_gzip_damage(src)}: the last {what} at byte offset {start} is incomplete "
                            f"(needs {need} bytes, has {have})")
    return CaptureError(
        f"capture truncated: last {what} at byte offset {start} is incomplete (needs {need} bytes, has {have})")


def _stream_error(src: ByteSource) -> CaptureError:
    return CaptureError(f"{_gzip_damage(src)}; the records before it were read")


def pcap_records(
    src: ByteSource,
    little_endian: bool,
    nanosecond: bool,
    linktype: int,
    first_index: int = 1,
    record_header: int = 16,
    status: "CaptureReader | None" = None,
) -> "PcapRecords":
    """The records of a pcap stream positioned on a record boundary (an iterator).

    ``record_header`` is 16 for standard pcap (24 for the "modified" format).
    At the end, ``status.error`` (if a status object is given) is set to a
    CaptureError when the stream ended inside a record or a length field is
    hostile; ``status.bytes_read`` tracks the consumed offset: while a record is
    handled it is the offset of that record's header.
    """
    return PcapRecords(src, little_endian, nanosecond, linktype, first_index, record_header, status)


_GATE_SLOTS = 64  # (2 ** 6: the top 6 bits of a hash pick one; pcap.pxd sizes the arrays)


def _u32le(p: bytes, i: int) -> int:
    """The little-endian unsigned 32-bit integer at ``p[i:i + 4]``."""
    v = p[i + 3]
    v = (v << 8) | p[i + 2]
    v = (v << 8) | p[i + 1]
    return (v << 8) | p[i]


def _u32be(p: bytes, i: int) -> int:
    """The big-endian unsigned 32-bit integer at ``p[i:i + 4]``."""
    v = p[i]
    v = (v << 8) | p[i + 1]
    v = (v << 8) | p[i + 2]
    return (v << 8) | p[i + 3]


class FlowGate:
    """What the reader of a ``-j N`` worker needs to drop the records of the other workers'
    flows unread (see :mod:`amqp_dissect.pipelines.runs.parallel` and
    :func:`~amqp_dissect.shard.pump_shard`, which owns the rest of the loop).

    ``owner``: both directions' 4-tuple bytes (IPv4 source and destination address, source and
    destination port) -> [worker, last packet fed]; ``loads``: captured bytes per worker;
    ``w``: this worker; ``armed`` / ``nxt``: the idle sweep's state (a record at or past
    ``nxt`` may tick it, so the reader hands it on).  The reader drops a record only when all of
    this holds: its quick look reads an Ethernet / Linux cooked IPv4 TCP record without IP
    options or fragmentation, its flow is known and another worker's, and the sweep is armed
    and not due, and the record is not behind the one before nor ``hold`` set (the clock watch
    reads those: :mod:`amqp_dissect.clock`); it then adds its size to ``loads`` and counts it in ``skipped``.  ``ts``
    (``seen``: any) is the time of the last record read, dropped or handed on."""

    __slots__ = ("owner", "loads", "w", "armed", "nxt", "ts", "seen", "skipped", "hold", "ka", "kb", "kw")

    def __init__(self, owner: dict, loads: list, w: int):
        self.owner = owner
        self.loads = loads
        self.w = w
        self.armed = False
        self.nxt = 0
        self.ts = 0
        self.seen = False
        self.skipped = 0
        self.hold = False  # the clock watch waits for the next record (see amqp_dissect.clock): hand it on
        # a cache of flows already placed, _GATE_SLOTS slots (a flow keeps its worker): each
        # slot's 4-tuple as two integers (bytes 0-7, and bytes 8-11 with bit 32 set: 0 is empty)
        # and its worker
        if not cython.compiled:  # (compiled: C arrays, zeroed with the object)
            self.ka = [0] * _GATE_SLOTS
            self.kb = [0] * _GATE_SLOTS
            self.kw = [0] * _GATE_SLOTS


class PcapRecords:
    """Iterator of the :class:`CaptureRecord` of a pcap record stream (see :func:`pcap_records`).

    ``gate``: a :class:`FlowGate`, or None to yield every record; set it at any point of the
    iteration (the records already yielded are not read again)."""

    def __init__(self, src: ByteSource, little_endian: bool, nanosecond: bool, linktype: int,
                 first_index: int = 1, record_header: int = 16, status=None):
        self.src = src
        self.le = bool(little_endian)
        # exact times (tshark's -t at the capture's resolution): (index, nanoseconds, digits) of each
        # record, into ``status.exact`` when set (read at the first record: it may be set after this)
        self.exact = None
        self.started = False
        self.scale = 1 if nanosecond else 1000
        self.digits = 9 if nanosecond else 6
        self.hl = record_header
        self.linktype = linktype
        # where the quick look of a gate finds the ethertype (Ethernet, Linux cooked), else -1
        self.base = 12 if linktype == 1 else (14 if linktype == 113 else -1)
        self.index = first_index
        self.buf = src.buf
        self.pos = src.pos
        self.sbase = src.base  # (src.base as of the last fill: it changes only there)
        self.status = status
        self.done = False
        self.gate = None

    def __iter__(self):
        return self

    def __next__(self) -> CaptureRecord:
        rec = self._next()
        if rec is None:
            raise StopIteration
        return rec

    def _next(self) -> CaptureRecord | None:
        """The next record, or None at the end."""
        if self.done:
            return None
        if not self.started:
            self.started = True
            self.exact = getattr(self.status, "exact", None)
        src = self.src
        status = self.status
        buf = self.buf
        pos = self.pos
        end = len(buf)
        hl = self.hl
        if status is not None:
            status.bytes_read = self.sbase + pos
        while True:
            if end - pos < hl:
                ok = self._fill(pos, hl)
                pos, buf = self.pos, self.buf
                end = len(buf)
                if not ok:
                    if src.available():
                        self._end(pos, _truncated(src, "record header", src.offset, hl))
                    elif src.stream_error:
                        self._end(pos, _stream_error(src))
                    else:
                        self._end(pos, None)
                    return None
            if self.le:
                sec = _u32le(buf, pos)
                frac = _u32le(buf, pos + 4)
                caplen = _u32le(buf, pos + 8)
                orig = _u32le(buf, pos + 12)
            else:
                sec = _u32be(buf, pos)
                frac = _u32be(buf, pos + 4)
                caplen = _u32be(buf, pos + 8)
                orig = _u32be(buf, pos + 12)
            nxt = pos + hl + caplen
            if nxt > end:
                if caplen > MAX_RECORD:
                    self._end(pos, CaptureError(
                        f"pcap record at byte offset {src.base + pos} has captured length {caplen} "
                        f"(more than the {MAX_RECORD}-byte limit): corrupted or hostile capture"
                    ))
                    return None
                ok = self._fill(pos, hl + caplen)
                pos, buf = self.pos, self.buf
                end = len(buf)
                if not ok:
                    self._end(pos, _truncated(src, "record", src.offset, hl + caplen))
                    return None
                nxt = pos + hl + caplen
            index = self.index
            ts = sec * 1_000_000_000 + frac * self.scale
            if self.exact is not None:
                self.exact.append((index, ts, self.digits))
            self.index = index + 1
            gate = self.gate
            if gate is not None and self._dropped(gate, buf, pos + hl, caplen, ts):
                pos = nxt
                continue
            self.pos = nxt
            rec = CaptureRecord.__new__(CaptureRecord)
            rec.index = index
            rec.ts = ts
            rec.linktype = self.linktype
            p = buf
            rec.data = p[pos + hl : nxt]
            rec.orig_len = orig
            rec.interface = 0
            return rec

    def _fill(self, pos: int, need: int) -> bool:
        """``src.fill(need)`` for the record at ``pos``: the window then starts there
        (``self.pos``, ``self.buf`` and ``self.sbase`` follow the source).  False at the end of
        the stream (what is left stays in the window)."""
        src = self.src
        src.pos = pos
        ok = src.fill(need)
        self.pos = src.pos
        self.buf = src.buf
        self.sbase = src.base
        return ok

    def _dropped(self, gate: FlowGate, p: bytes, start: int, caplen: int, ts: int) -> bool:
        """Whether the record at ``p[start:start + caplen]`` is one the gate drops (see
        :class:`FlowGate`); if so it is accounted there."""
        base = self.base
        if base < 0 or caplen < base + 42 or not gate.armed or ts >= gate.nxt:
            return False
        if ts < gate.ts or gate.hold:  # (behind the record before, or the one after such: the clock watch reads it)
            return False
        q = start + base
        if not (p[q] == 8 and p[q + 1] == 0 and p[q + 2] == 0x45 and (p[q + 8] & 0xBF) == 0 and p[q + 9] == 0
                and p[q + 11] == 6):
            return False
        m32 = 0xFFFFFFFF  # (the constants as typed locals: compiled, the arithmetic stays in C)
        bit32 = 0x100000000
        mul = 2654435761
        a = _u32le(p, q + 14) | (_u32le(p, q + 18) << 32)
        b = _u32le(p, q + 22) | bit32
        # the slot: a multiplicative hash of the addresses (xor: they may be equal) and both
        # ports in order (so a flow's two directions differ); its top 6 bits (_GATE_SLOTS = 64)
        h = ((((a ^ (a >> 32) ^ b) & m32) * mul) & m32) >> 26
        if gate.ka[h] == a and gate.kb[h] == b:
            o = gate.kw[h]
        else:
            ent = gate.owner.get(p[q + 14 : q + 26])
            if ent is None:
                return False
            o = ent[0]
            gate.ka[h] = a
            gate.kb[h] = b
            gate.kw[h] = o
        if o == gate.w:
            return False
        gate.loads[o] += caplen
        gate.skipped += 1
        gate.ts = ts
        gate.seen = True
        return True

    def _end(self, pos: int, error) -> None:
        self.done = True
        src = self.src
        src.pos = pos
        self.pos = pos
        status = self.status
        if status is not None:
            status.bytes_read = src.base + pos
            status.error = error


def _pcapng_structs(bo: str):
    """unpack_from functions for a byte order: block header, EPB fields, u32, PB fields."""
    return (
        struct.Struct(bo + "II").unpack_from,
        struct.Struct(bo + "IIIII").unpack_from,
        struct.Struct(bo + "I").unpack_from,
        struct.Struct(bo + "HHIIII").unpack_from,
    )


_FILLED = object()  # (_fill_block_head: the bytes are there)


def _fill_block_head(src: ByteSource):
    """Fill the 12 bytes of the next pcapng block's header: _FILLED, else the end of the
    stream's error (None at a clean end)."""
    if src.fill(12):
        return _FILLED
    if len(src.buf) - src.pos:
        return _truncated(src, "block", src.offset, 12)
    if src.stream_error:
        return _stream_error(src)
    return None


def _bad_block_len(blen):
    """Is this pcapng block length impossible (short, not a multiple of 4, beyond the bound)?"""
    return blen < 12 or (blen & 3) != 0 or blen > MAX_RECORD


def _check_trailer(u32, buf, src: ByteSource, pos: int, blen) -> None:
    """A pcapng block's trailing length must repeat its leading one."""
    trail = u32(buf, pos + blen - 4)[0]
    if trail != blen:
        raise CaptureError(
            f"pcapng block at byte offset {src.base + pos}: trailing length "
            f"{trail} does not match leading length {blen}"
        )


def _epb_fields(epb, buf, src: ByteSource, pos: int, blen, n_ifaces: int) -> tuple:
    """An enhanced packet block's interface, timestamp (high, low), captured and original
    lengths, checked against the block and the section's interfaces."""
    if blen < 32:
        raise CaptureError(f"pcapng enhanced packet block at byte offset {src.base + pos} is too short")
    fields = epb(buf, pos + 8)
    if fields[3] > blen - 32:
        raise CaptureError(
            f"pcapng enhanced packet block at byte offset {src.base + pos}: captured length "
            f"{fields[3]} exceeds the block ({blen} bytes)"
        )
    if fields[0] >= n_ifaces:
        raise CaptureError(
            f"pcapng packet block at byte offset {src.base + pos} refers to undefined "
            f"interface {fields[0]}"
        )
    return fields


def _pb_fields(pb, buf, src: ByteSource, pos: int, blen, n_ifaces: int) -> tuple:
    """The same fields of an (obsolete) packet block, checked the same way."""
    if blen < 32:
        raise CaptureError(f"pcapng packet block at byte offset {src.base + pos} is too short")
    iface, _drops, hi, lo, caplen, orig = pb(buf, pos + 8)
    if caplen > blen - 32 or iface >= n_ifaces:
        raise CaptureError(f"pcapng packet block at byte offset {src.base + pos} is malformed")
    return iface, hi, lo, caplen, orig


class _Interface:
    __slots__ = ("linktype", "divisor", "offset", "snaplen", "digits")

    def __init__(self, linktype: int, divisor: int, offset: int, snaplen: int):
        self.linktype = linktype
        self.divisor = divisor
        self.offset = offset
        self.snaplen = snaplen
        self.digits = resolution_digits(divisor)

    def nanoseconds(self, ticks: int) -> int:
        """A timestamp of this interface (ticks since its offset) in nanoseconds."""
        return ticks * 1_000_000_000 // self.divisor + self.offset * 1_000_000_000


def resolution_digits(divisor: int) -> int:
    """The decimal digits of a time resolution of 1/divisor second, as tshark prints them
    (10^-3: 3, 10^-6: 6, 10^-9 or finer: 9; 2^-n: the digits that resolve it, at most 9)."""
    digits = 0
    while 10 ** digits < divisor and digits < 9:
        digits += 1
    return digits


def _parse_idb_options(body: bytes, pos: int, end: int, bo: str) -> tuple[int, int]:
    """(divisor, tsoffset) from the options of an IDB body."""
    divisor = 1_000_000
    tsoffset = 0
    while pos + 4 <= end:
        code, olen = struct.unpack_from(bo + "HH", body, pos)
        pos += 4
        if code == 0:
            break
        if pos + olen > end:
            break
        if code == _OPT_IF_TSRESOL and olen >= 1:
            v = body[pos]
            if v & 0x80:
                e = v & 0x7F
                if e > 64:
                    raise CaptureError(f"pcapng if_tsresol 2^-{e} is out of range")
                divisor = 1 << e
            else:
                if v > 19:
                    raise CaptureError(f"pcapng if_tsresol 10^-{v} is out of range")
                divisor = 10**v
        elif code == _OPT_IF_TSOFFSET and olen >= 8:
            (tsoffset,) = struct.unpack_from(bo + "q", body, pos)
        pos += (olen + 3) & ~3
    return divisor, tsoffset


class CaptureReader:
    """Iterator of :class:`CaptureRecord` over a pcap / pcapng stream.

    Attributes: ``format`` ("pcap" | "pcapng"), ``compressed`` (gzip),
    ``nanosecond`` (pcap ns magic), ``linktypes`` (interface id -> link type,
    grows while a pcapng is read; pcapng interface ids are numbered across
    sections, so the second section's first interface gets the next free id),
    ``error`` (None, or the CaptureError that ended iteration early),
    ``bytes_read`` (offset reached in the uncompressed stream), ``snaplen``,
    ``secrets`` (the (secrets type, data) of the pcapng Decryption Secrets Blocks read so
    far).  ``on_secrets``: set it to a callable (secrets type, data) to hear of each such
    block when it is read, before the packets that follow it.
    """

    def __init__(self, src: ByteSource, compressed: bool):
        self._src = src
        self.compressed = compressed
        self.error: CaptureError | None = None
        self.bytes_read = 0
        self.nanosecond = False
        self.linktypes: dict[int, int] = {}
        self.snaplen = 0
        self.secrets: list[tuple[int, bytes]] = []
        self.on_secrets = None
        # set before iterating: a deque that gets (index, exact time in ns, decimal digits of the
        # record's time resolution) for each record, which the float ``ts`` cannot hold to the ns
        self.exact = None
        magic = src.buf[:4]
        if magic == b"\x0a\x0d\x0d\x0a":
            self.format = "pcapng"
            bo = self._read_shb()
            self._leading_idbs(bo)
            self._gen = self._pcapng_records(bo)
        else:
            self.format = "pcap"
            self._gen = self._open_pcap()

    # -- iteration ---------------------------------------------------------
    def __iter__(self) -> Iterator[CaptureRecord]:
        return self._gen

    def __next__(self) -> CaptureRecord:
        return next(self._gen)

    def set_gate(self, gate: FlowGate | None) -> None:
        """Have a pcap reader drop the records ``gate`` places in other workers' flows (see
        :class:`FlowGate`) from the next record on; a pcapng reader reads every record."""
        if isinstance(self._gen, PcapRecords):
            self._gen.gate = gate

    # -- pcap ----------------------------------------------------------------
    def _open_pcap(self) -> Iterator[CaptureRecord]:
        src = self._src
        hdr = src.read_exact(24)
        if hdr is None:
            if src.stream_error:
                raise CaptureError(f"{_gzip_damage(src)}: in the pcap file header")
            raise CaptureError(f"pcap file header truncated ({src.available()} of 24 bytes)")
        ph = parse_pcap_header(hdr)
        self.nanosecond = ph.nanosecond
        self.snaplen = ph.snaplen
        linktype = ph.linktype
        self.linktypes[0] = linktype
        self.bytes_read = 24
        return pcap_records(
            src,
            ph.little_endian,
            self.nanosecond,
            linktype,
            record_header=ph.record_header,
            status=self,
        )

    # -- pcapng --------------------------------------------------------------
    def _read_shb(self) -> str:
        """Read the first Section Header Block; returns the byte order ('<' or '>')."""
        src = self._src
        start = src.offset
        if not src.fill(12):
            if src.stream_error:
                raise CaptureError(f"{_gzip_damage(src)}: in the pcapng section header")
            raise CaptureError(f"pcapng section header truncated ({src.available()} bytes)")
        bo = self._shb_byte_order(src.buf, src.pos)
        (blen,) = struct.unpack_from(bo + "I", src.buf, src.pos + 4)
        self._check_block_len(blen, start, 28)
        body = src.read_exact(blen)
        if body is None:
            if src.stream_error:
                raise CaptureError(f"{_gzip_damage(src)}: in the pcapng section header")
            raise CaptureError(
                f"pcapng section header truncated (needs {blen} bytes, has {src.available()})"
            )
        self._shb(body, bo, start)
        self.bytes_read = src.offset
        return bo

    @staticmethod
    def _shb_byte_order(buf: bytes, pos: int) -> str:
        (bom,) = struct.unpack_from("<I", buf, pos + 8)
        if bom == PCAPNG_BOM:
            return "<"
        if bom == 0x4D3C2B1A:
            return ">"
        raise CaptureError(f"pcapng section header has a bad byte-order magic ({buf[pos + 8:pos + 12].hex()})")

    @staticmethod
    def _check_block_len(blen: int, start: int, minimum: int) -> None:
        if blen < minimum or blen % 4:
            raise CaptureError(f"pcapng block at byte offset {start} has an invalid length {blen}")
        if blen > MAX_RECORD:
            raise CaptureError(
                f"pcapng block at byte offset {start} has length {blen} "
                f"(more than the {MAX_RECORD}-byte limit): corrupted or hostile capture"
            )

    def _shb(self, block: bytes, bo: str, start: int) -> None:
        vmaj, vmin = struct.unpack_from(bo + "HH", block, 12)
        if vmaj != 1:
            raise CaptureError(f"pcapng section at byte offset {start} has unsupported version {vmaj}.{vmin}")
        (trail,) = struct.unpack_from(bo + "I", block, len(block) - 4)
        if trail != len(block):
            raise CaptureError(f"pcapng section header at byte offset {start}: length fields do not match")
        self._section: list[_Interface] = []

    def _idb(self, buf: bytes, pos: int, blen: int, bo: str, start: int) -> None:
        if blen < 20:
            raise CaptureError(f"pcapng interface description block at byte offset {start} is too short")
        linktype, _res, snaplen = struct.unpack_from(bo + "HHI", buf, pos + 8)
        divisor, tsoffset = _parse_idb_options(buf, pos + 16, pos + blen - 4, bo)
        ifaces = self._section
        if not ifaces:
            self._first_iface = len(self.linktypes)
        self.linktypes[self._first_iface + len(ifaces)] = linktype
        ifaces.append(_Interface(linktype, divisor, tsoffset, snaplen))
        if not self.snaplen:
            self.snaplen = snaplen

    def _leading_idbs(self, bo: str) -> None:
        """Read the interface descriptions that follow the first section header, so
        ``linktypes`` is known before iteration (later IDBs are read while iterating)."""
        src = self._src
        hdr = struct.Struct(bo + "II")
        while src.available() >= 12 or src.fill(12):
            start = src.offset
            btype, blen = hdr.unpack_from(src.buf, src.pos)
            if btype != _BT_IDB:
                return
            self._check_block_len(blen, start, 20)
            if src.available() < blen and not src.fill(blen):
                return  # truncated: reported by the iteration
            buf, pos = src.buf, src.pos
            (trail,) = struct.unpack_from(bo + "I", buf, pos + blen - 4)
            if trail != blen:
                raise CaptureError(f"pcapng block at byte offset {start}: trailing length {trail} "
                                   f"does not match leading length {blen}")
            self._idb(buf, pos, blen, bo, start)
            src.pos = pos + blen
            self.bytes_read = src.offset

    def _pcapng_records(self, bo: str) -> Iterator[CaptureRecord]:
        """The packets of a pcapng stream as CaptureRecords, block by block (interface, section and
        secrets blocks read on the way; other block types skipped); a damaged or cut stream ends
        them and its error is kept in ``error``."""
        src = self._src
        index = 1
        rec = CaptureRecord
        hdr, epb, u32, pb = _pcapng_structs(bo)
        ifaces = self._section
        last_ts = 0
        exact = self.exact
        last_exact = (0, 6)
        error = None
        buf = src.buf
        pos = src.pos
        end = len(buf)
        try:
            while True:
                if end - pos < 12:
                    src.pos = pos
                    filled = _fill_block_head(src)
                    buf, pos = src.buf, src.pos
                    end = len(buf)
                    if filled is not _FILLED:
                        error = filled
                        break
                btype, blen = hdr(buf, pos)
                if btype == PCAPNG_SHB:
                    bo = self._shb_byte_order(buf, pos)
                    hdr, epb, u32, pb = _pcapng_structs(bo)
                    (blen,) = u32(buf, pos + 4)
                    self._check_block_len(blen, src.base + pos, 28)
                elif _bad_block_len(blen):
                    self._check_block_len(blen, src.base + pos, 12)
                if end - pos < blen:
                    src.pos = pos
                    ok = src.fill(blen)
                    buf, pos = src.buf, src.pos
                    end = len(buf)
                    if not ok:
                        error = _truncated(src, "block", src.offset, blen)
                        break
                nxt = pos + blen
                _check_trailer(u32, buf, src, pos, blen)
                if btype == _BT_EPB or btype == _BT_PB:
                    if btype == _BT_EPB:
                        iface, hi, lo, caplen, orig = _epb_fields(epb, buf, src, pos, blen, len(ifaces))
                    else:
                        iface, hi, lo, caplen, orig = _pb_fields(pb, buf, src, pos, blen, len(ifaces))
                    itf = ifaces[iface]
                    last_ts = itf.nanoseconds((hi << 32) | lo)
                    if exact is not None:
                        last_exact = (last_ts, itf.digits)
                        exact.append((index,) + last_exact)
                    yield rec(index, last_ts, itf.linktype, buf[pos + 28 : pos + 28 + caplen], orig,
                              self._first_iface + iface)
                    index += 1
                elif btype == _BT_SPB:
                    r = self._spb_record(buf, pos, blen, u32, ifaces, index, last_ts)
                    if exact is not None:
                        exact.append((index,) + last_exact)
                    yield r
                    index += 1
                else:
                    self._other_block(btype, buf, pos, blen, bo, u32)
                    ifaces = self._section  # (a new section has its own interfaces)
                pos = nxt
                self.bytes_read = src.base + pos
        except CaptureError as exc:
            error = exc
        src.pos = pos
        self.bytes_read = src.offset
        self.error = error

    def _spb_record(self, buf, pos: int, blen: int, u32, ifaces: list, index: int, last_ts: int) -> CaptureRecord:
        """The packet of a simple packet block (of the section's first interface; no timestamp: the
        one before, ``last_ts``)."""
        if blen < 16:
            raise CaptureError(f"pcapng simple packet block at byte offset {self._src.base + pos} is too short")
        if not ifaces:
            raise CaptureError(
                f"pcapng simple packet block at byte offset {self._src.base + pos} before any interface "
                "description"
            )
        (orig,) = u32(buf, pos + 8)
        itf = ifaces[0]
        caplen = min(orig, blen - 16)
        if itf.snaplen:
            caplen = min(caplen, itf.snaplen)
        return CaptureRecord(index, last_ts, itf.linktype, buf[pos + 12 : pos + 12 + caplen], orig, self._first_iface)

    def _other_block(self, btype: int, buf, pos: int, blen: int, bo: str, u32) -> None:
        """A block that is not a packet's: an interface description, a section header, decryption
        secrets; any other block type (NRB, ISB, custom, ...) is skipped."""
        start = self._src.base + pos
        if btype == _BT_IDB:
            self._idb(buf, pos, blen, bo, start)
        elif btype == PCAPNG_SHB:
            self._shb(buf[pos:pos + blen], bo, start)
        elif btype == _BT_DSB:
            self._dsb(buf, pos, blen, u32)

    _first_iface = 0

    def digits(self) -> int:
        """Decimal digits of the timestamps of the interfaces (or pcap file) seen so far: the
        finest of them (6 before any)."""
        if self.format == "pcap":
            return 9 if self.nanosecond else 6
        return max((i.digits for i in getattr(self, "_section", ())), default=6)

    def _dsb(self, buf, pos: int, blen: int, u32) -> None:
        if blen < 20:
            raise CaptureError(f"pcapng decryption secrets block at byte offset {self._src.base + pos} is too short")
        (stype,) = u32(buf, pos + 8)
        (slen,) = u32(buf, pos + 12)
        if slen > blen - 20:
            raise CaptureError(f"pcapng decryption secrets block at byte offset {self._src.base + pos}: "
                               f"secrets length {slen} exceeds the block ({blen} bytes)")
        data = bytes(buf[pos + 16 : pos + 16 + slen])
        self.secrets.append((stype, data))
        if self.on_secrets is not None:
            self.on_secrets(stype, data)


def open_capture(fileobj) -> CaptureReader:
    """Sniff the format of an open binary file object and return a reader.

    gzip (1f 8b) is unwrapped with :class:`~.gunzip.GunzipStream` and sniffed again.
    Raises CaptureError when the stream is neither pcap nor pcapng, or when
    its file / first section header is bad.
    """
    read = fileobj.read
    head = read_upto(read, 4)
    compressed = False
    catch: tuple[type[BaseException], ...] = ()
    if head[:2] == b"\x1f\x8b":
        compressed = True
        # small steps: a corrupt block loses little of what came before it, and says where it is
        gz = GunzipStream(PrefixedFile(head, read).read)
        read = gz.read
        catch = _GZIP_ERRORS
        try:
            head = read_upto(read, 4)
        except _GZIP_ERRORS as exc:
            what = "truncated" if isinstance(exc, EOFError) else "corrupt"
            raise CaptureError(f"gzip data {what} at byte {gz.offset} of the decompressed stream "
                               f"({type(exc).__name__}: {exc}): {too_little_decompressed(gz.offset)}") from None
    if len(head) < 4:
        raise CaptureError(f"not a pcap or pcapng capture (only {len(head)} bytes)")
    if head not in (
        b"\x0a\x0d\x0d\x0a",
        b"\xd4\xc3\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\x3c\x4d",
        b"\x34\xcd\xb2\xa1",
        b"\xa1\xb2\xcd\x34",
    ):
        raise CaptureError(f"not a pcap or pcapng capture (magic {head.hex()})")
    src = ByteSource(read, head, catch=catch)
    return CaptureReader(src, compressed)


def too_little_decompressed(n: int) -> str:
    """What a gzip stream that broke before a capture's first 4 bytes gave (every reader says it so)."""
    return "nothing could be decompressed" if n == 0 else f"only {n} byte(s) could be decompressed"


def read_upto(read, n: int) -> bytes:
    parts = []
    have = 0
    while have < n:
        chunk = read(n - have)
        if not chunk:
            break
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


class PrefixedFile:
    """A read-only stream that replays bytes already consumed, then the rest."""

    def __init__(self, prefix: bytes, read):
        self._prefix = prefix
        self._read = read
        self.mode = "rb"

    def read(self, n: int = -1) -> bytes:
        p = self._prefix
        if p:
            if n is None or n < 0:
                self._prefix = b""
                return p + self._read()
            head = p[:n]
            self._prefix = p[n:]
            if len(head) < n:
                more = self._read(n - len(head))
                if more:
                    head += more
            return head
        return self._read(n)
