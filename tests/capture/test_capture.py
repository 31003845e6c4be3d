"""Capture reader: formats, byte orders, resolutions, gzip, truncation, hostile input.

Captures are written with dpkt's pcap/pcapng classes (tests/support/pcapbuild.py) and
the records read back are compared with what was written.
"""

from __future__ import annotations

from decimal import Decimal

import gzip
import io
import struct
import tracemalloc

import dpkt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp_dissect.capture.pcap import MAX_RECORD, CaptureReader, open_capture
from amqp_dissect.errors import CaptureError, DissectError
from amqp_dissect.events import CaptureRecord

import pcapbuild as pb  # tests/support (conftest.py puts it on sys.path)

NS = 1_000_000_000  # capture times are integer nanoseconds
T0 = 1_763_794_935


def _packets(n=5, linktype=pb.LINKTYPE_ETHERNET):
    out = []
    for i in range(n):
        ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 5672, seq=i * 10, payload=bytes([i]) * (i * 7))
        out.append(pb.frame(linktype, ip_bytes))
    return out


def _read_all(data: bytes) -> tuple[CaptureReader, list[CaptureRecord]]:
    reader = open_capture(io.BytesIO(data))
    return reader, list(reader)


class _NonSeekable(io.RawIOBase):
    """A stream without seek/tell (like a pipe), returning short reads."""

    def __init__(self, data: bytes, step: int = 7):
        self._data = data
        self._pos = 0
        self._step = step

    def readable(self):
        return True

    def read(self, n=-1):
        if n is None or n < 0:
            n = len(self._data)
        n = min(n, self._step)
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        return chunk

    def seekable(self):
        return False


# ----------------------------------------------------------------------------- pcap
@pytest.mark.parametrize("little_endian", [True, False])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_all_variants(little_endian, nano):
    pkts = _packets(6)
    units = 10**9 if nano else 10**6
    stamps = [(T0 + i, (123_456_789 if nano else 123_456) + i) for i in range(len(pkts))]
    data = pb.write_pcap(
        [(ts, pb.LINKTYPE_ETHERNET, p) for ts, p in zip(stamps, pkts)], nano=nano, little_endian=little_endian
    )
    reader, recs = _read_all(data)
    assert reader.error is None
    assert reader.format == "pcap"
    assert reader.compressed is False
    assert reader.nanosecond is nano
    assert reader.linktypes == {0: pb.LINKTYPE_ETHERNET}
    assert reader.bytes_read == len(data)
    assert [r.index for r in recs] == list(range(1, len(pkts) + 1))
    assert [r.data for r in recs] == pkts
    assert [r.orig_len for r in recs] == [len(p) for p in pkts]
    for r, (sec, frac) in zip(recs, stamps):
        assert r.linktype == pb.LINKTYPE_ETHERNET
        assert r.interface == 0
        # exact: integer nanoseconds
        assert r.ts == sec * NS + frac * (NS // units)


def test_pcap_matches_dpkt_reader():
    pkts = _packets(8)
    data = pb.write_pcap([(T0 + i * 0.25, pb.LINKTYPE_ETHERNET, p) for i, p in enumerate(pkts)])
    _, recs = _read_all(data)
    oracle = list(dpkt.pcap.Reader(io.BytesIO(data)))
    assert [(r.ts, r.data) for r in recs] == [(round(Decimal(str(ts)) * NS), buf) for ts, buf in oracle]


def test_pcap_written_by_dpkt_writer_with_other_linktype():
    out = io.BytesIO()
    w = dpkt.pcap.Writer(out, linktype=pb.LINKTYPE_LINUX_SLL, nano=True)
    pkts = _packets(3, pb.LINKTYPE_LINUX_SLL)
    for i, p in enumerate(pkts):
        w.writepkt(p, ts=T0 + i)
    reader, recs = _read_all(out.getvalue())
    assert reader.nanosecond
    assert [r.linktype for r in recs] == [pb.LINKTYPE_LINUX_SLL] * 3
    assert [r.ts for r in recs] == [(T0 + i) * NS for i in range(3)]


def test_pcap_large_records_span_read_chunks():
    big = [pb.frame(1, pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=bytes([i]) * 60000)) for i in range(40)]
    data = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(big)])
    assert len(data) > 2 * (1 << 20)
    reader, recs = _read_all(data)
    assert reader.error is None
    assert [r.data for r in recs] == big


def test_non_seekable_stream_with_short_reads():
    pkts = _packets(4)
    data = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    reader = open_capture(_NonSeekable(data))
    assert [r.data for r in reader] == pkts
    assert reader.error is None
    reader = open_capture(_NonSeekable(pb.gzip_bytes(data)))
    assert [r.data for r in reader] == pkts


def test_modified_pcap_24_byte_record_headers():
    pkts = _packets(3)
    out = struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
    for i, p in enumerate(pkts):
        out += struct.pack("<IIII", T0 + i, 500_000, len(p), len(p)) + struct.pack("<IHBx", 2, 0x0800, 0) + p
    reader, recs = _read_all(out)
    assert reader.error is None and not reader.nanosecond
    assert [r.data for r in recs] == pkts
    assert [r.ts for r in recs] == [(T0 + i) * NS + NS // 2 for i in range(3)]


def test_pcap_empty_capture_header_only():
    reader, recs = _read_all(pb.write_pcap([], linktype=1))
    assert recs == [] and reader.error is None


# --------------------------------------------------------------------------- pcapng
@pytest.mark.parametrize("little_endian", [True, False])
def test_pcapng_two_interfaces_different_linktype_and_tsresol(little_endian):
    eth = _packets(3, pb.LINKTYPE_ETHERNET)
    raw = _packets(3, pb.LINKTYPE_RAW)
    interfaces = ((pb.LINKTYPE_ETHERNET, None), (pb.LINKTYPE_RAW, 9))  # µs default, ns
    records = []
    for i in range(3):
        records.append(((T0 + i, 654_321), 0, eth[i]))
        records.append(((T0 + i, 987_654_321), 1, raw[i]))
    data = pb.write_pcapng(records, interfaces=interfaces, little_endian=little_endian)
    reader = open_capture(io.BytesIO(data))
    # interfaces right after the section header are known before iterating
    assert reader.linktypes == {0: pb.LINKTYPE_ETHERNET, 1: pb.LINKTYPE_RAW}
    recs = list(reader)
    assert reader.error is None
    assert reader.format == "pcapng"
    assert reader.linktypes == {0: pb.LINKTYPE_ETHERNET, 1: pb.LINKTYPE_RAW}
    assert reader.bytes_read == len(data)
    assert [r.index for r in recs] == list(range(1, 7))
    assert [r.data for r in recs] == [d for _, _, d in records]
    assert [r.interface for r in recs] == [0, 1] * 3
    assert [r.linktype for r in recs] == [pb.LINKTYPE_ETHERNET, pb.LINKTYPE_RAW] * 3
    for r, ((sec, frac), iface, _) in zip(recs, records):
        units = 10**6 if iface == 0 else 10**9
        assert r.ts == sec * NS + frac * (NS // units)


def test_pcapng_matches_dpkt_reader_default_resolution():
    pkts = _packets(5)
    out = io.BytesIO()
    w = dpkt.pcapng.Writer(out)
    for i, p in enumerate(pkts):
        w.writepkt(p, ts=T0 + i * 0.001)
    _, recs = _read_all(out.getvalue())
    oracle = list(dpkt.pcapng.Reader(io.BytesIO(out.getvalue())))
    assert len(recs) == len(oracle) == 5
    for r, (ts, buf) in zip(recs, oracle):
        assert r.data == buf
        assert r.ts == round(Decimal(str(ts)) * 1_000_000) * 1000  # (dpkt's writer: microseconds)


def test_pcapng_power_of_two_resolution_and_tsoffset():
    pkt = _packets(1)[0]
    blocks = [
        pb.pcapng_shb(),
        pb.pcapng_idb(1, 0x80 | 20, tsoffset=100),  # 2^-20 s ticks, +100 s
        pb.pcapng_epb(0, (T0 << 20) + (1 << 19), pkt),  # T0 + 0.5 s
    ]
    reader, recs = _read_all(b"".join(blocks))
    assert reader.error is None
    assert recs[0].ts == (T0 + 100) * NS + NS // 2


def test_pcapng_simple_packet_blocks_and_skipped_blocks():
    pkts = _packets(4)
    nrb = pb.pcapng_block(4, struct.pack("<HH", 0, 0))  # name resolution block, end of records only
    isb = pb.pcapng_block(5, struct.pack("<III", 0, 0, 0))  # interface statistics
    custom = pb.pcapng_block(0x00000BAD, struct.pack("<I", 32473) + b"hello")
    dsb = pb.pcapng_block(0x0000000A, b"\x00" * 12)
    records = [
        ((T0, 250_000), 0, pkts[0]),
        nrb,
        (None, 0, pkts[1]),  # SPB: takes the last timestamp
        custom,
        ((T0 + 1, 0), 0, pkts[2]),
        isb,
        dsb,
        (None, 0, pkts[3]),
    ]
    data = pb.write_pcapng(records, simple={2, 7})
    reader, recs = _read_all(data)
    assert reader.error is None
    assert [r.data for r in recs] == pkts
    assert [r.index for r in recs] == [1, 2, 3, 4]
    assert [r.ts for r in recs] == [T0 * NS + NS // 4, T0 * NS + NS // 4, (T0 + 1) * NS, (T0 + 1) * NS]
    assert [r.interface for r in recs] == [0, 0, 0, 0]


def test_pcapng_spb_before_any_timestamp_uses_zero():
    pkt = _packets(1)[0]
    data = pb.write_pcapng([(None, 0, pkt)], simple={0})
    _, recs = _read_all(data)
    assert recs[0].ts == 0 and recs[0].data == pkt and recs[0].orig_len == len(pkt)


def test_pcapng_multiple_sections_reset_interfaces():
    eth = _packets(2, pb.LINKTYPE_ETHERNET)
    sll = _packets(2, pb.LINKTYPE_LINUX_SLL)
    first = pb.write_pcapng([((T0, 0), 0, eth[0]), ((T0, 1), 0, eth[1])])
    # second section, big-endian, its interface 0 is SLL with ms resolution
    second = b"".join(
        [
            pb.pcapng_shb(little_endian=False),
            pb.pcapng_idb(pb.LINKTYPE_LINUX_SLL, 3, little_endian=False),
            pb.pcapng_epb(0, T0 * 1000 + 5, sll[0], little_endian=False),
            pb.pcapng_epb(0, T0 * 1000 + 6, sll[1], little_endian=False),
        ]
    )
    reader, recs = _read_all(first + second)
    assert reader.error is None
    assert [r.data for r in recs] == eth + sll
    assert [r.linktype for r in recs] == [1, 1, 113, 113]
    # interfaces are numbered across sections
    assert [r.interface for r in recs] == [0, 0, 1, 1]
    assert reader.linktypes == {0: 1, 1: 113}
    assert recs[2].ts == T0 * NS + 5_000_000


def test_pcapng_undefined_interface_stops_with_error():
    pkt = _packets(1)[0]
    data = pb.write_pcapng([((T0, 0), 0, pkt)]) + pb.pcapng_epb(3, 0, pkt)
    reader, recs = _read_all(data)
    assert len(recs) == 1
    assert isinstance(reader.error, CaptureError)
    assert "interface 3" in str(reader.error)


# ------------------------------------------------------------------------------ gzip
@pytest.mark.parametrize("kind", ["pcap", "pcap-ns-be", "pcapng"])
def test_gzip_compressed(kind):
    pkts = _packets(5)
    if kind == "pcap":
        raw = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    elif kind == "pcap-ns-be":
        raw = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)], nano=True, little_endian=False)
    else:
        raw = pb.write_pcapng([(T0 + i, 0, p) for i, p in enumerate(pkts)])
    reader, recs = _read_all(pb.gzip_bytes(raw))
    assert reader.compressed is True
    assert reader.format == ("pcapng" if kind == "pcapng" else "pcap")
    assert reader.error is None
    assert [r.data for r in recs] == pkts
    assert [r.ts for r in recs] == [(T0 + i) * NS for i in range(5)]
    assert reader.bytes_read == len(raw)


def test_gzip_corrupted_tail_keeps_complete_records():
    pkts = _packets(200)
    raw = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    comp = gzip.compress(raw, compresslevel=1)
    broken = comp[: len(comp) - 40]  # cut inside the deflate stream / trailer
    reader, recs = _read_all(broken)
    assert isinstance(reader.error, CaptureError)
    assert len(recs) < len(pkts)
    assert [r.data for r in recs] == pkts[: len(recs)]


def test_gzip_bad_crc_reported_after_records():
    pkts = _packets(3)
    raw = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    comp = bytearray(gzip.compress(raw))
    comp[-8] ^= 0xFF  # CRC32 of the trailer
    reader, recs = _read_all(bytes(comp))
    assert [r.data for r in recs] == pkts
    assert isinstance(reader.error, CaptureError)
    assert "compressed stream" in str(reader.error)


def test_gzip_of_garbage_raises():
    with pytest.raises(CaptureError, match="not a pcap or pcapng"):
        open_capture(io.BytesIO(gzip.compress(b"this is not a capture")))


def test_broken_gzip_header_raises_capture_error():
    with pytest.raises(CaptureError):
        open_capture(io.BytesIO(b"\x1f\x8b\x08\x00garbage garbage garbage"))


# ------------------------------------------------------------------ truncation, garbage
@pytest.mark.parametrize("cut", [1, 10, 16, 30])
def test_pcap_truncated_last_record(cut):
    pkts = _packets(4)
    data = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    last_start = len(data) - 16 - len(pkts[-1])
    truncated = data[: last_start + cut]
    reader, recs = _read_all(truncated)
    assert [r.data for r in recs] == pkts[:3]
    assert isinstance(reader.error, CaptureError)
    msg = str(reader.error)
    assert "truncated" in msg
    assert f"byte offset {last_start}" in msg
    assert f"has {cut}" in msg
    assert reader.bytes_read == last_start


def test_pcapng_truncated_last_block():
    pkts = _packets(3)
    data = pb.write_pcapng([(T0 + i, 0, p) for i, p in enumerate(pkts)])
    reader, recs = _read_all(data[:-6])
    assert [r.data for r in recs] == pkts[:2]
    assert isinstance(reader.error, CaptureError)
    assert "truncated" in str(reader.error)


def test_iteration_never_raises_on_truncation():
    pkts = _packets(3)
    data = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
    reader = open_capture(io.BytesIO(data[:-5]))
    got = []
    for rec in reader:  # must not raise
        got.append(rec)
    assert len(got) == 2 and reader.error is not None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"hello world, this is not a capture file at all",
        b"\x00" * 64,
        b"\xd4\xc3\xb2\xa1\x02\x00",  # pcap magic, header cut
        b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x00\x00\x00\x00" + b"\x00" * 16,  # bad byte-order magic
    ],
)
def test_garbage_raises_capture_error(data):
    with pytest.raises(CaptureError):
        open_capture(io.BytesIO(data))


def test_garbage_message_names_magic():
    with pytest.raises(CaptureError, match=r"not a pcap or pcapng capture \(magic 68656c6c\)"):
        open_capture(io.BytesIO(b"hello world"))


def test_capture_error_is_dissect_error():
    assert issubclass(CaptureError, DissectError)


@pytest.mark.parametrize("little_endian", [True, False])
def test_hostile_pcap_record_length_does_not_allocate(little_endian):
    pkts = _packets(2)
    data = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)], little_endian=little_endian)
    bo = "<" if little_endian else ">"
    hostile = data + struct.pack(bo + "IIII", T0, 0, 0xFFFFFFF0, 0xFFFFFFF0) + b"\x00" * 100
    tracemalloc.start()
    try:
        reader, recs = _read_all(hostile)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r.data for r in recs] == pkts
    assert isinstance(reader.error, CaptureError)
    assert str(0xFFFFFFF0) in str(reader.error)
    assert peak < 64 << 20


def test_hostile_record_length_just_above_cap():
    data = pb.write_pcap([], linktype=1) + struct.pack("<IIII", T0, 0, MAX_RECORD + 1, 10)
    reader, recs = _read_all(data)
    assert recs == [] and isinstance(reader.error, CaptureError)


def test_record_longer_than_file_is_truncation_not_allocation():
    data = pb.write_pcap([], linktype=1) + struct.pack("<IIII", T0, 0, 50 << 20, 10) + b"abc"
    tracemalloc.start()
    try:
        reader, recs = _read_all(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert recs == [] and "truncated" in str(reader.error)
    assert peak < 16 << 20


def test_hostile_pcapng_block_length():
    pkt = _packets(1)[0]
    data = pb.write_pcapng([(T0, 0, pkt)]) + struct.pack("<II", 6, 0xFFFFFFF0) + b"\x00" * 40
    reader, recs = _read_all(data)
    assert [r.data for r in recs] == [pkt]
    assert isinstance(reader.error, CaptureError)
    assert "limit" in str(reader.error)


@pytest.mark.parametrize("blen", [0, 8, 13])
def test_pcapng_invalid_block_length(blen):
    pkt = _packets(1)[0]
    data = pb.write_pcapng([(T0, 0, pkt)]) + struct.pack("<II", 6, blen) + b"\x00" * 40
    reader, recs = _read_all(data)
    assert len(recs) == 1
    assert "invalid length" in str(reader.error)


@pytest.mark.parametrize("btype", [2, 3, 6, 1, 0x0A0D0D0A])
@pytest.mark.parametrize("blen", [12, 16, 20, 24, 28])
def test_pcapng_short_blocks_at_end_of_file(btype, blen):
    pkt = _packets(1)[0]
    block = struct.pack("<II", btype, blen) + b"\x00" * (blen - 12) + struct.pack("<I", blen)
    reader, recs = _read_all(pb.write_pcapng([(T0, 0, pkt)]) + block)  # must not raise
    assert [r.data for r in recs][:1] == [pkt]
    assert reader.error is None or isinstance(reader.error, CaptureError)


def test_pcapng_epb_caplen_beyond_block():
    pkt = _packets(1)[0]
    epb = bytearray(pb.pcapng_epb(0, 0, pkt))
    struct.pack_into("<I", epb, 20, 4000)  # caplen
    data = pb.write_pcapng([]) + bytes(epb)
    reader, recs = _read_all(data)
    assert recs == [] and "exceeds the block" in str(reader.error)


def test_pcapng_length_mismatch_is_reported():
    pkt = _packets(1)[0]
    epb = bytearray(pb.pcapng_epb(0, 0, pkt))
    struct.pack_into("<I", epb, len(epb) - 4, len(epb) + 4)
    reader, recs = _read_all(pb.write_pcapng([]) + bytes(epb))
    assert recs == [] and "does not match" in str(reader.error)


# ------------------------------------------------------------------------------ fuzz
_FUZZ_BASES = {}


def _fuzz_base(kind):
    if kind not in _FUZZ_BASES:
        pkts = _packets(4)
        if kind == "pcap":
            _FUZZ_BASES[kind] = pb.write_pcap([(T0 + i, 1, p) for i, p in enumerate(pkts)])
        elif kind == "pcapng":
            _FUZZ_BASES[kind] = pb.write_pcapng(
                [(T0 + i, i % 2, p) for i, p in enumerate(pkts)], interfaces=((1, None), (101, 9)), simple={3}
            )
        else:
            _FUZZ_BASES[kind] = pb.gzip_bytes(_fuzz_base("pcap"))
    return _FUZZ_BASES[kind]


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["pcap", "pcapng", "gzip"]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 10_000),
)
def test_fuzzed_captures_only_raise_capture_error_at_open(kind, edits, cut):
    data = bytearray(_fuzz_base(kind))
    for off, val in edits:
        data[off % len(data)] = val
    data = bytes(data[: max(cut, 1)]) if cut < len(data) else bytes(data)
    try:
        reader = open_capture(io.BytesIO(data))
    except CaptureError:
        return
    for rec in reader:  # iteration itself never raises
        assert isinstance(rec, CaptureRecord)
        assert len(rec.data) <= MAX_RECORD
    assert reader.error is None or isinstance(reader.error, CaptureError)


@pytest.mark.parametrize("nano,little_endian", [(True, True), (True, False), (False, True)])
def test_exact_times_set_after_opening_get_every_record(nano, little_endian):
    """``reader.exact`` (a deque, set after open_capture and before the first record, as the CLI
    does for tshark's -t at the capture's precision) gets each record's (index, time in ns,
    digits), to the nanosecond a float time cannot hold."""
    import collections
    import io

    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    from amqp_dissect.capture.pcap import open_capture

    pkt = ethernet_frame(tcp_packet("10.0.0.1", "10.0.0.2", 40000, 5672, payload=b"x"))
    times = [(1_700_000_000, 123_456_789), (1_700_000_001, 1), (1_700_000_002, 999_999_999)]
    if not nano:
        times = [(s, f // 1000) for s, f in times]
    blob = write_pcap([(t, 1, pkt) for t in times], nano=nano, little_endian=little_endian)
    reader = open_capture(io.BytesIO(blob))
    reader.exact = collections.deque(maxlen=10)
    records = list(reader)
    unit = 1 if nano else 1000
    assert list(reader.exact) == [(i + 1, s * 1_000_000_000 + f * unit, 9 if nano else 6)
                                  for i, (s, f) in enumerate(times)]
    assert [r.index for r in records] == [1, 2, 3]
