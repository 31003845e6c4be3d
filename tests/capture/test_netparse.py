"""parse_segment fast path against dpkt as the oracle; describe_packet output."""

from __future__ import annotations

import socket
import struct

import dpkt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.errors import DissectError, UnsupportedLinkType
from amqp_dissect.events import CaptureRecord, Segment
from amqp_dissect.capture.netparse import (
    IPFragment,
    MalformedPacket,
    TruncatedPacket,
    check_linktype,
    describe_packet,
    parse_segment,
    tcp_flags_text,
)

import pcapbuild as pb  # tests/support (conftest.py puts it on sys.path)

LINKTYPES = [
    pb.LINKTYPE_ETHERNET,
    pb.LINKTYPE_LINUX_SLL,
    pb.LINKTYPE_LINUX_SLL2,
    pb.LINKTYPE_NULL,
    pb.LINKTYPE_LOOP,
    pb.LINKTYPE_RAW,
    12,
    14,
]


# --------------------------------------------------------------------------- oracle
def dpkt_ip_layer(linktype: int, data: bytes):
    """The dpkt IP/IP6 object for a frame, decoded by dpkt only."""
    if linktype == pb.LINKTYPE_ETHERNET:
        return dpkt.ethernet.Ethernet(data).data
    if linktype == pb.LINKTYPE_LINUX_SLL:
        return dpkt.sll.SLL(data).data
    if linktype == pb.LINKTYPE_LINUX_SLL2:
        return dpkt.sll2.SLL2(data).data
    if linktype in (pb.LINKTYPE_NULL, pb.LINKTYPE_LOOP):
        return dpkt.loopback.Loopback(data).data
    if data[0] >> 4 == 6:
        return dpkt.ip6.IP6(data)
    return dpkt.ip.IP(data)


def dpkt_segment(linktype: int, data: bytes) -> Segment:
    ipl = dpkt_ip_layer(linktype, data)
    t = ipl.data
    assert isinstance(t, dpkt.tcp.TCP), type(t)
    fam = socket.AF_INET6 if isinstance(ipl, dpkt.ip6.IP6) else socket.AF_INET
    return Segment(
        socket.inet_ntop(fam, ipl.src),
        socket.inet_ntop(fam, ipl.dst),
        t.sport,
        t.dport,
        t.seq,
        t.ack,
        t.flags,
        bytes(t.data),
        6 if fam == socket.AF_INET6 else 4,
    )


ipv4 = st.builds(lambda b: socket.inet_ntop(socket.AF_INET, b), st.binary(min_size=4, max_size=4))
ipv6 = st.builds(lambda b: socket.inet_ntop(socket.AF_INET6, b), st.binary(min_size=16, max_size=16))
ports = st.integers(0, 65535)
u32 = st.integers(0, 2**32 - 1)
flags = st.integers(0, 0x1FF)
payloads = st.binary(max_size=300)
tcp_options = st.sampled_from([b"", b"\x01\x01\x01\x01", b"\x02\x04\x05\xb4\x01\x03\x03\x07", b"\x01" * 40])


@st.composite
def tcp_ip_packets(draw):
    v6 = draw(st.booleans())
    addr = ipv6 if v6 else ipv4
    return pb.tcp_packet(
        draw(addr),
        draw(addr),
        draw(ports),
        draw(ports),
        seq=draw(u32),
        ack=draw(u32),
        flags=draw(flags),
        payload=draw(payloads),
        win=draw(ports),
        options=draw(tcp_options),
    )


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(linktype=st.sampled_from(LINKTYPES), ip_bytes=tcp_ip_packets(), null_le=st.booleans())
def test_parse_segment_matches_dpkt(linktype, ip_bytes, null_le):
    kw = {"little_endian": null_le} if linktype == pb.LINKTYPE_NULL else {}
    data = pb.frame(linktype, ip_bytes, **kw)
    assert parse_segment(linktype, data) == dpkt_segment(linktype, data)


@settings(max_examples=100)
@given(ip_bytes=tcp_ip_packets(), vlans=st.lists(st.integers(0, 4095), min_size=1, max_size=2),
       tpid=st.sampled_from([None, 0x8100, 0x88A8, 0x9100]))
def test_vlan_and_qinq_match_dpkt(ip_bytes, vlans, tpid):
    data = pb.ethernet_frame(ip_bytes, vlans=vlans, tpid=tpid)
    assert parse_segment(1, data) == dpkt_segment(1, data)


def test_three_stacked_vlan_tags():
    ip_bytes = pb.tcp_packet("10.1.1.1", "10.2.2.2", 40000, 5672, seq=7, ack=9, flags=0x18, payload=b"AMQP")
    data = pb.ethernet_frame(ip_bytes, vlans=[10, 20, 30], tpid=0x88A8)
    assert data.count(b"\x81\x00") >= 2
    assert parse_segment(1, data) == dpkt_segment(pb.LINKTYPE_RAW, ip_bytes)


@pytest.mark.parametrize("linktype", [pb.LINKTYPE_IPV4, pb.LINKTYPE_IPV6])
def test_linktype_ipv4_ipv6(linktype):
    src, dst = ("10.0.0.1", "10.0.0.2") if linktype == pb.LINKTYPE_IPV4 else ("::1", "2001:db8::1")
    ip_bytes = pb.tcp_packet(src, dst, 1234, 5672, seq=1, payload=b"xyz")
    assert parse_segment(linktype, ip_bytes) == dpkt_segment(pb.LINKTYPE_RAW, ip_bytes)


@pytest.mark.parametrize("family", [2, 24, 28, 30])
@pytest.mark.parametrize("little_endian", [True, False])
def test_null_families_either_byte_order(family, little_endian):
    v6 = family != 2
    ip_bytes = pb.tcp_packet("::1" if v6 else "127.0.0.1", "::1" if v6 else "127.0.0.1", 40000, 5672, payload=b"x")
    data = pb.null_frame(ip_bytes, little_endian=little_endian, family=family)
    seg = parse_segment(pb.LINKTYPE_NULL, data)
    assert seg == dpkt_segment(pb.LINKTYPE_RAW, ip_bytes)
    assert seg.src_ip == ("::1" if v6 else "127.0.0.1")
    assert seg.ip_version == (6 if v6 else 4)


def test_ipv6_text_is_compressed():
    ip_bytes = pb.tcp_packet("2001:0db8:0000:0000:0000:0000:0000:0001", "fe80::1:2", 1, 2)
    seg = parse_segment(pb.LINKTYPE_RAW, ip_bytes)
    assert (seg.src_ip, seg.dst_ip) == ("2001:db8::1", "fe80::1:2")


# --------------------------------------------------------------------- trimming, ext hdrs
@settings(max_examples=50)
@given(payload=st.binary(max_size=5), pad=st.integers(0, 40))
def test_ethernet_padding_and_fcs_trimmed(payload, pad):
    ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=payload)
    data = pb.ethernet_frame(ip_bytes, pad_to=60) + b"\xde\xad\xbe\xef"[: pad % 5] + b"\x00" * pad
    seg = parse_segment(1, data)
    assert seg.payload == payload
    assert seg == dpkt_segment(1, data)


def test_ipv4_options_skipped():
    ip_bytes = bytearray(pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"data"))
    # insert 8 bytes of IP options (NOPs + EOL) and fix IHL / total length
    opts = b"\x01\x01\x01\x01\x01\x01\x01\x00"
    pkt = bytes(ip_bytes[:20]) + opts + bytes(ip_bytes[20:])
    pkt = bytes([0x47]) + pkt[1:2] + struct.pack("!H", len(pkt)) + pkt[4:]
    seg = parse_segment(pb.LINKTYPE_RAW, pkt)
    assert seg.payload == b"data"
    assert seg == dpkt_segment(pb.LINKTYPE_RAW, pkt)


HBH = b"\x3c\x00" + b"\x01\x04\x00\x00\x00\x00"  # hop-by-hop -> next: dest opts (60), PadN
DST = b"\x2b\x00" + b"\x01\x04\x00\x00\x00\x00"  # dest opts -> next: routing (43)
RTG = b"\x06\x00" + b"\x00\x00\x00\x00\x00\x00"  # routing type 0, segments left 0 -> TCP


@pytest.mark.parametrize(
    "first,exts",
    [
        (0, HBH[:0] + b"\x06\x00" + b"\x01\x04\x00\x00\x00\x00"),
        (0, HBH + DST + RTG),
        (60, b"\x06\x01" + b"\x01\x0c" + b"\x00" * 12),  # dest opts, 16 bytes
        (44, b"\x06\x00\x00\x00\x12\x34\x56\x78"),  # atomic fragment: offset 0, M=0
    ],
)
def test_ipv6_extension_headers(first, exts):
    ip_bytes = pb.tcp_packet("2001:db8::1", "2001:db8::2", 40000, 5672, seq=5, payload=b"AMQP",
                             ext_headers=exts, ext_first=first)
    seg = parse_segment(pb.LINKTYPE_RAW, ip_bytes)
    assert seg.payload == b"AMQP"
    assert seg == dpkt_segment(pb.LINKTYPE_RAW, ip_bytes)
    eth = pb.ethernet_frame(ip_bytes)
    assert parse_segment(1, eth) == seg


def test_ipv6_non_tcp_returns_none():
    u = pb.udp_packet("2001:db8::1", "2001:db8::2", 53, 53, b"dns")
    assert parse_segment(pb.LINKTYPE_RAW, u) is None
    no_next = pb.tcp_packet("::1", "::1", 1, 2, ext_headers=b"\x3b\x00" + b"\x01\x04" + b"\x00" * 4, ext_first=0)
    assert parse_segment(pb.LINKTYPE_RAW, no_next) is None


def test_non_tcp_returns_none():
    assert parse_segment(1, pb.ethernet_frame(pb.udp_packet("10.0.0.1", "10.0.0.2", 1, 2, b"x"))) is None
    arp = pb.ethernet_frame(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20, ethertype=0x0806)
    assert parse_segment(1, arp) is None
    llc = pb.DST_MAC + pb.SRC_MAC + struct.pack("!H", 10) + b"\xaa" * 46
    assert parse_segment(1, llc) is None
    assert parse_segment(pb.LINKTYPE_NULL, struct.pack("<I", 7) + b"\x00" * 40) is None


# ----------------------------------------------------------------------------- fragments
def test_ipv4_fragments_raise_ipfragment():
    first = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x" * 32, frag=0x2000, ident=0x1234)
    with pytest.raises(IPFragment, match="0x1234") as ei:
        parse_segment(pb.LINKTYPE_RAW, first)
    assert isinstance(ei.value, DissectError)
    later = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x" * 32, frag=0x0003)
    with pytest.raises(IPFragment, match="offset 24"):
        parse_segment(pb.LINKTYPE_RAW, later)
    # DF alone is not a fragment
    df = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"ok", frag=0x4000)
    assert parse_segment(pb.LINKTYPE_RAW, df).payload == b"ok"
    # a UDP fragment is simply not TCP
    u = bytearray(pb.udp_packet("10.0.0.1", "10.0.0.2", 1, 2, b"x"))
    u[6] |= 0x20
    assert parse_segment(pb.LINKTYPE_RAW, bytes(u)) is None


@pytest.mark.parametrize("fo", [0x0001, 0x0008, 0x0009])  # M only, offset 8, offset 8 + M
def test_ipv6_fragments_raise_ipfragment(fo):
    frag = b"\x06\x00" + struct.pack("!H", fo) + b"\xca\xfe\x00\x01"
    pkt = pb.tcp_packet("2001:db8::1", "2001:db8::2", 1, 2, payload=b"x" * 16, ext_headers=frag, ext_first=44)
    with pytest.raises(IPFragment, match="cafe0001"):
        parse_segment(pb.LINKTYPE_RAW, pkt)


# ------------------------------------------------------------------------ malformed input
@pytest.mark.parametrize("linktype", LINKTYPES)
def test_every_truncation_raises_dissect_error_or_parses(linktype):
    ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 5672, payload=b"0123456789",
                             options=b"\x01\x01\x01\x01")
    data = pb.frame(linktype, ip_bytes)
    full = parse_segment(linktype, data)
    for cut in range(len(data)):
        try:
            seg = parse_segment(linktype, data[:cut])
        except TruncatedPacket as exc:
            assert exc.segment.payload == full.payload[: len(exc.segment.payload)]
            assert exc.wire_len == len(full.payload)
        except MalformedPacket:
            pass
        else:
            raise AssertionError(f"cut at {cut} parsed as {seg}")


def test_truncated_payload_carries_partial_segment():
    ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 5672, seq=77, payload=b"A" * 100)
    data = pb.ethernet_frame(ip_bytes)[:96]  # snaplen 96
    with pytest.raises(TruncatedPacket, match="42 of 100") as ei:
        parse_segment(1, data)
    assert ei.value.segment.seq == 77
    assert ei.value.segment.payload == b"A" * 42
    assert ei.value.wire_len == 100


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda b: b"\x55" + b[1:], "version 5"),
        (lambda b: b"\x44" + b[1:], "header length 16"),
        (lambda b: b[:2] + struct.pack("!H", 10) + b[4:], "total length 10"),
        (lambda b: b[:2] + struct.pack("!H", 30) + b[4:], "TCP header truncated by the IP length"),
        (lambda b: b[:32] + b"\x40" + b[33:], "TCP header length 16"),
        (lambda b: b[:32] + b"\xf0" + b[33:], "TCP header length 60 exceeds"),
    ],
)
def test_malformed_ipv4_tcp(mutate, message):
    ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"abcd")
    with pytest.raises(MalformedPacket, match=message):
        parse_segment(pb.LINKTYPE_IPV4, mutate(ip_bytes))


def test_malformed_ipv6():
    pkt = pb.tcp_packet("::1", "::1", 1, 2, payload=b"abcd")
    with pytest.raises(MalformedPacket, match="version 4"):
        parse_segment(pb.LINKTYPE_IPV6, b"\x40" + pkt[1:])
    long_ext = pb.tcp_packet("::1", "::1", 1, 2, ext_headers=b"\x06\x09" + b"\x00" * 6, ext_first=60)
    with pytest.raises(MalformedPacket, match="exceeds"):
        parse_segment(pb.LINKTYPE_IPV6, long_ext)


def test_raw_ip_bad_version():
    with pytest.raises(MalformedPacket, match="IP version 7"):
        parse_segment(pb.LINKTYPE_RAW, b"\x70" + b"\x00" * 30)
    with pytest.raises(MalformedPacket):
        parse_segment(pb.LINKTYPE_RAW, b"")


def test_tso_zero_total_length_uses_captured_length():
    pkt = bytearray(pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"offloaded"))
    pkt[2:4] = b"\x00\x00"
    assert parse_segment(pb.LINKTYPE_RAW, bytes(pkt)).payload == b"offloaded"


@pytest.mark.parametrize("linktype", [2, 9, 105, 127, 65535])
def test_unsupported_linktype(linktype):
    with pytest.raises(UnsupportedLinkType, match=str(linktype)):
        parse_segment(linktype, b"\x00" * 60)
    with pytest.raises(UnsupportedLinkType):
        check_linktype(linktype)


@pytest.mark.parametrize("linktype", LINKTYPES + [pb.LINKTYPE_IPV4, pb.LINKTYPE_IPV6])
def test_check_linktype_accepts_supported(linktype):
    check_linktype(linktype)


@settings(max_examples=300)
@given(linktype=st.sampled_from(LINKTYPES + [pb.LINKTYPE_IPV4, pb.LINKTYPE_IPV6]), data=st.binary(max_size=120))
def test_random_bytes_only_raise_dissect_errors(linktype, data):
    try:
        seg = parse_segment(linktype, data)
    except DissectError:
        return
    assert seg is None or isinstance(seg, Segment)


def test_address_cache_is_bounded(monkeypatch):
    import amqp_dissect.capture.netparse as np

    monkeypatch.setattr(np, "_ADDR_MAX", 50)
    for i in range(200):
        pkt = pb.tcp_packet(f"10.0.{i // 250}.{i % 250}", "10.9.9.9", 1, 2)
        seg = parse_segment(pb.LINKTYPE_RAW, pkt)
        assert (seg.src_ip, seg.dst_ip) == (f"10.0.{i // 250}.{i % 250}", "10.9.9.9")
    assert len(np._ADDR) <= 51
    assert len(np._PAIRS) <= 51  # (the fast path's source-and-destination cache)


# -------------------------------------------------------------------------- describe
def _rec(linktype, data, index=12, ts=1_763_794_935_123_456_000):
    return CaptureRecord(index, ts, linktype, data, len(data), 0)


def test_describe_ethernet_vlan_ipv4_tcp():
    ip_bytes = pb.tcp_packet("127.0.0.1", "127.0.0.1", 40000, 5672, seq=1, ack=1, flags=0x18, payload=b"AMQP\0\1\0\0",
                             ident=0x1234)
    data = pb.ethernet_frame(ip_bytes, vlans=[100])
    layers = describe_packet(_rec(1, data))
    titles = [t for t, _ in layers]
    n = len(data)
    assert titles == [
        f"Frame 12: {n} bytes on wire ({n * 8} bits), {n} bytes captured ({n * 8} bits)",
        "Ethernet II, Src: 02:00:00:00:00:01, Dst: 02:00:00:00:00:02",
        "802.1Q Virtual LAN, PRI: 0, DEI: 0, ID: 100",
        "Internet Protocol Version 4, Src: 127.0.0.1, Dst: 127.0.0.1",
        "Transmission Control Protocol, Src Port: 40000, Dst Port: 5672, Seq: 1 (raw), Ack: 1 (raw), Len: 8",
    ]
    frame_lines = layers[0][1]
    assert "Arrival Time: 2025-11-22 07:02:15.123456 UTC" in frame_lines
    assert "Epoch Time: 1763794935.123456 seconds" in frame_lines
    ip_lines = layers[3][1]
    assert "Identification: 0x1234 (4660)" in ip_lines
    assert "Time to Live: 64" in ip_lines
    assert "Protocol: TCP (6)" in ip_lines
    assert f"Total Length: {len(ip_bytes)}" in ip_lines
    tcp_lines = layers[4][1]
    assert "Flags: 0x018 (PSH, ACK)" in tcp_lines
    assert "Sequence Number (raw): 1" in tcp_lines


@pytest.mark.parametrize(
    "linktype,title",
    [
        (pb.LINKTYPE_LINUX_SLL, "Linux cooked capture v1"),
        (pb.LINKTYPE_LINUX_SLL2, "Linux cooked capture v2"),
        (pb.LINKTYPE_NULL, "Null/Loopback"),
        (pb.LINKTYPE_LOOP, "Null/Loopback"),
        (pb.LINKTYPE_RAW, "Raw packet data"),
    ],
)
def test_describe_other_links_ipv6(linktype, title):
    ip_bytes = pb.tcp_packet("::1", "::1", 40000, 5672, flags=0x02, ext_headers=HBH[:0] + b"\x06\x00" + b"\x01\x04"
                             + b"\x00" * 4, ext_first=0)
    layers = describe_packet(_rec(linktype, pb.frame(linktype, ip_bytes)))
    titles = [t for t, _ in layers]
    assert titles[1] == title
    assert titles[2] == "Internet Protocol Version 6, Src: ::1, Dst: ::1"
    assert titles[3] == "Transmission Control Protocol, Src Port: 40000, Dst Port: 5672, Seq: 0 (raw), Len: 0"
    assert any("Hop-by-Hop" in line for line in layers[2][1])
    assert "Flags: 0x002 (SYN)" in layers[3][1]


@settings(max_examples=200)
@given(linktype=st.sampled_from(LINKTYPES + [2, 229]), data=st.binary(max_size=100))
def test_describe_never_raises(linktype, data):
    layers = describe_packet(_rec(linktype, data))
    assert layers[0][0].startswith("Frame 12:")
    assert all(isinstance(t, str) and isinstance(lines, list) for t, lines in layers)


def test_describe_truncated_marks_malformed():
    ip_bytes = pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x")
    layers = describe_packet(_rec(1, pb.ethernet_frame(ip_bytes)[:30]))
    assert layers[-1][0].startswith("[Malformed Packet:")


def test_tcp_flags_text():
    assert tcp_flags_text(0x011) == "0x011 (FIN, ACK)"
    assert tcp_flags_text(0x012) == "0x012 (SYN, ACK)"
    assert tcp_flags_text(0) == "0x000 (<None>)"


@given(st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16))
@settings(max_examples=300)
def test_address_text_is_inet_ntop(raw):
    # the oracle: the C library's inet_ntop (the IPv4 text is written without it: start-up)
    from amqp_dissect.capture.netparse import _ADDR, addr_text

    _ADDR.clear()
    want = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
    assert addr_text(raw) == want
    assert addr_text(raw) == want  # (cached)
