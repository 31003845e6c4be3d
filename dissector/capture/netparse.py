"""Link / IP / TCP header parsing: a struct fast path, plus a verbose describer.

:func:`parse_segment` is the hot path (one call per packet): plain ``struct``
unpacks and slicing, no per-packet objects except the returned
:class:`~amqp_dissect.events.Segment`.  It returns ``None`` for packets that are
not TCP (ARP, UDP, ICMP, 802.3/LLC, ...) and raises a
:class:`~amqp_dissect.errors.DissectError` subclass when it cannot say:

* :class:`MalformedPacket` - a link / IP / TCP header is truncated or invalid;
* :class:`TruncatedPacket` (a MalformedPacket) - the headers are fine but the
  capture cut the TCP payload short (snaplen).  ``exc.segment`` holds the
  segment with the captured part of the payload and ``exc.wire_len`` the
  payload length on the wire; ``TcpReassembler.feed(exc.segment, ts, packet,
  wire_len=exc.wire_len)`` reports the missing bytes as a gap;
* :class:`IPFragment` - a fragment of a fragmented IPv4/IPv6 packet carrying
  TCP (IP reassembly is not done);
* :class:`~amqp_dissect.errors.UnsupportedLinkType` - a link type not listed in
  :data:`SUPPORTED_LINKTYPES` (:func:`check_linktype` checks one up front).

Tunnels are read as tshark reads them by default (VXLAN on UDP 4789, Geneve on 6081, GRE
with its options: IPv4, IPv6, MPLS, transparent Ethernet bridging, ERSPAN I/II/III; IPv4 and
IPv6 in IP; MPLS label stacks), off the fast path: only an IP packet that is not TCP and whose
protocol (or UDP port) is a tunnel's goes there, nested at most :data:`MAX_TUNNEL_DEPTH` deep
(deeper: MalformedPacket).  A tunnel not read (L2TP, GTP-U, an unknown GRE protocol, ...)
raises :class:`UnreadTunnel` (a DissectError), which the Dissector counts per tunnel.

:func:`describe_packet` renders Wireshark-style layer summaries for ``-V``
output; it is not on the hot path and never raises.
"""

from __future__ import annotations

import datetime as _dt
import struct

from ..errors import DissectError, UnsupportedLinkType
from ..events import CaptureRecord, Segment
from ..times import decimal

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
DLT_RAW_12 = 12  # DLT_RAW on most BSDs / Linux
DLT_RAW_14 = 14  # DLT_RAW on OpenBSD

SUPPORTED_LINKTYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW,
        DLT_RAW_12,
        DLT_RAW_14,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_LINUX_SLL2,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
    }
)

LINKTYPE_NAMES = {
    LINKTYPE_NULL: "BSD loopback (NULL)",
    LINKTYPE_ETHERNET: "Ethernet",
    LINKTYPE_RAW: "Raw IP",
    DLT_RAW_12: "Raw IP",
    DLT_RAW_14: "Raw IP",
    LINKTYPE_LOOP: "OpenBSD loopback (LOOP)",
    LINKTYPE_LINUX_SLL: "Linux cooked-mode capture v1",
    LINKTYPE_LINUX_SLL2: "Linux cooked-mode capture v2",
    LINKTYPE_IPV4: "Raw IPv4",
    LINKTYPE_IPV6: "Raw IPv6",
}

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
VLAN_TPIDS = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})

# tunnels (decoded as tshark decodes them by default; see :func:`_tunnel`)
ETH_TEB = 0x6558  # transparent Ethernet bridging: an Ethernet frame follows (GRE, Geneve)
ETH_MPLS = 0x8847
ETH_MPLS_MULTICAST = 0x8848
ETH_ERSPAN_II = 0x88BE  # ERSPAN type I (no GRE sequence number) or II
ETH_ERSPAN_III = 0x22EB
UDP_VXLAN = 4789
UDP_GENEVE = 6081
IP_IN_IP = 4  # IPv4 in IP
IP_IPV6 = 41  # IPv6 in IP
IP_GRE = 47
IP_UDP = 17
_TUNNEL_PROTOS = frozenset({IP_IN_IP, IP_IPV6, IP_GRE, IP_UDP})
MAX_TUNNEL_DEPTH = 8  # tunnels in tunnels: deeper than this, the packet is a note, not decoded
# UDP ports of tunnels tshark does not decode without being asked (nor this parser): named, so that a
# capture of them says why nothing in it is decoded
UNREAD_UDP_TUNNELS = {
    1701: "L2TP (UDP 1701)",
    2152: "GTP-U (UDP 2152)",
    4790: "VXLAN-GPE (UDP 4790)",
    6635: "MPLS in UDP (UDP 6635)",
    8472: "VXLAN on UDP 8472 (the Linux kernel's and flannel's port; tshark decodes it with -d udp.port==8472,vxlan)",
}
_UDP_TUNNEL_PORTS = frozenset({UDP_VXLAN, UDP_GENEVE, *UNREAD_UDP_TUNNELS})
_GRE_READ = frozenset({ETH_IPV4, ETH_IPV6, ETH_TEB, ETH_ERSPAN_II, ETH_ERSPAN_III, ETH_MPLS, ETH_MPLS_MULTICAST}
                      | VLAN_TPIDS)

# address families seen in NULL / LOOP headers
_AF_INET = frozenset({2})
_AF_INET6 = frozenset({10, 24, 28, 30})  # Linux, BSD, FreeBSD, Darwin

_IPV6_EXT = frozenset({0, 43, 44, 51, 60})


class MalformedPacket(DissectError):
    """A link, IP or TCP header that is truncated or invalid."""


class TruncatedPacket(MalformedPacket):
    """TCP payload cut short by the capture (snaplen); headers were parsed.

    ``segment`` has the captured part of the payload, ``wire_len`` the full
    payload length according to the IP header.
    """

    group = "capture"

    def __init__(self, message: str, segment: Segment, wire_len: int):
        super().__init__(message)
        self.segment = segment
        self.wire_len = wire_len


class UnreadTunnel(DissectError):
    """A packet in a tunnel this parser does not read (``tunnel``: its name, e.g. "GRE protocol
    0x880b" or "L2TP (UDP 1701)"): what it carries, TCP or not, is not seen."""

    group = "capture"

    def __init__(self, tunnel: str):
        super().__init__(f"a packet in a tunnel that is not read ({tunnel}): what it carries is not decoded")
        self.tunnel = tunnel


class IPFragment(DissectError):
    """A fragment of a fragmented IP packet that carries TCP (not reassembled)."""

    group = "reassembly"


# ---------------------------------------------------------------------------
# address text cache

# (bounded: a scan of many addresses refills it, each address costs its text once per fill, and
# the memory per connection does not include it)
_ADDR: dict[bytes, str] = {}
_ADDR_MAX = 4096


def _addr_text(raw: bytes) -> str:
    if len(_ADDR) >= _ADDR_MAX:
        _ADDR.clear()
    if len(raw) == 4:  # (what inet_ntop writes; socket is imported only for IPv6: start-up)
        s = f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    else:
        import socket
        s = socket.inet_ntop(socket.AF_INET6, raw)
    _ADDR[raw] = s
    return s


def addr_text(raw: bytes) -> str:
    """Text form of a 4- or 16-byte address (cached)."""
    return _ADDR.get(raw) or _addr_text(raw)


# the IPv4 fast path's source and destination, as one 8-byte key -> (source text, destination text):
# one slice and one look-up per packet (bounded as _ADDR)
_PAIRS: dict[bytes, tuple] = {}


def _pair_text(raw: bytes) -> tuple:
    if len(_PAIRS) >= _ADDR_MAX:
        _PAIRS.clear()
    a = raw[:4]
    b = raw[4:]
    t = (_ADDR.get(a) or _addr_text(a), _ADDR.get(b) or _addr_text(b))
    _PAIRS[raw] = t
    return t


# ---------------------------------------------------------------------------
# fast path

_IP4 = struct.Struct("!BxHHHxB2x4s4s").unpack_from  # vihl, total, id, frag, proto, src, dst
_IP6 = struct.Struct("!IHBx16s16s").unpack_from  # vtcfl, plen, nxt, src, dst
_TCP = struct.Struct("!HHIIH").unpack_from  # sport, dport, seq, ack, off/flags
_IP4TCP = struct.Struct("!BxH2xHxB2x4s4sHHIIH").unpack_from  # IPv4 without options + TCP, 34 bytes
_new_segment = tuple.__new__


def check_linktype(linktype: int) -> None:
    """Raise UnsupportedLinkType unless ``linktype`` is supported (check once per
    interface, e.g. over ``reader.linktypes``, instead of per packet)."""
    if linktype not in SUPPORTED_LINKTYPES:
        raise UnsupportedLinkType(
            f"unsupported link-layer type {linktype} (supported: "
            + ", ".join(str(t) for t in sorted(SUPPORTED_LINKTYPES))
            + ")"
        )


def parse_segment(linktype: int, data: bytes) -> Segment | None:
    """The TCP segment in one captured packet, or None if it carries no TCP.

    Raises MalformedPacket / TruncatedPacket / IPFragment / UnsupportedLinkType
    (all DissectError) as described in the module docstring.
    """
    if type(data) is not bytes:  # (bytearray, memoryview ...) the parsers read bytes (typed when compiled)
        data = bytes(data)
    if linktype == 1:
        if len(data) < 14:
            raise MalformedPacket(f"Ethernet header truncated ({len(data)} of 14 bytes)")
        et = (data[12] << 8) | data[13]
        if et == ETH_IPV4:
            return _ipv4(data, 14)
        return _ether_payload(data, 14, et)
    return _other_link(linktype, data)


def _other_link(linktype: int, data: bytes) -> Segment | None:
    """:func:`parse_segment` for the link types that are not Ethernet."""
    if linktype == LINKTYPE_LINUX_SLL:
        return _cooked(data, 16, 14, "Linux cooked (SLL)")
    if linktype == LINKTYPE_LINUX_SLL2:
        return _cooked(data, 20, 0, "Linux cooked v2 (SLL2)")
    if linktype in (LINKTYPE_RAW, DLT_RAW_12, DLT_RAW_14):
        if not data:
            raise MalformedPacket("raw IP packet is empty")
        v = data[0] >> 4
        if v == 4:
            return _ipv4(data, 0)
        if v == 6:
            return _ipv6(data, 0)
        raise MalformedPacket(f"raw IP packet has IP version {v}")
    if linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
        return _loopback(linktype, data)
    if linktype == LINKTYPE_IPV4:
        return _ipv4(data, 0)
    if linktype == LINKTYPE_IPV6:
        return _ipv6(data, 0)
    check_linktype(linktype)
    raise UnsupportedLinkType(f"unsupported link-layer type {linktype}")  # not reached


def _cooked(data: bytes, hl: int, et_at: int, what: str) -> Segment | None:
    """A Linux cooked capture header (``hl`` bytes, its protocol type at ``et_at``): its payload."""
    if len(data) < hl:
        raise MalformedPacket(f"{what} header truncated ({len(data)} of {hl} bytes)")
    et = (data[et_at] << 8) | data[et_at + 1]
    if et == ETH_IPV4:
        return _ipv4(data, hl)
    return _ether_payload(data, hl, et)


def _loopback(linktype: int, data: bytes) -> Segment | None:
    """A BSD loopback header (NULL: the address family in the capturing host's byte order,
    either; LOOP: big-endian): its IPv4 or IPv6 payload, None for another family."""
    if len(data) < 4:
        raise MalformedPacket(f"loopback header truncated ({len(data)} of 4 bytes)")
    if linktype == LINKTYPE_LOOP:
        fam = int.from_bytes(data[:4], "big")
    else:  # host byte order of the capturing machine: either
        fam = int.from_bytes(data[:4], "little")
        if fam > 0xFFFF:
            fam = int.from_bytes(data[:4], "big")
    if fam in _AF_INET:
        return _ipv4(data, 4)
    if fam in _AF_INET6:
        return _ipv6(data, 4)
    return None


def _ether_payload(data: bytes, off: int, et: int, depth: int = 0) -> Segment | None:
    """Dispatch on an EtherType, skipping any number of VLAN tags (``depth``: the tunnels around)."""
    n = len(data)
    while et in VLAN_TPIDS:
        if n - off < 4:
            raise MalformedPacket(f"VLAN tag truncated ({n - off} of 4 bytes)")
        et = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if et == ETH_IPV4:
        return _ipv4(data, off, depth)
    if et == ETH_IPV6:
        return _ipv6(data, off, depth)
    if et == ETH_MPLS or et == ETH_MPLS_MULTICAST:
        return _mpls(data, off, _deeper(depth))
    return None


def _ipv4(data: bytes, off: int, depth: int = 0) -> Segment | None:
    n = len(data)
    if n - off >= 40:
        # common case, read byte by byte (typed when compiled): 20-byte IPv4 header, unfragmented
        # TCP, complete
        vihl = data[off]
        proto = data[off + 9]
        frag = (data[off + 6] << 8) | data[off + 7]
        offflags = (data[off + 32] << 8) | data[off + 33]
        if vihl == 0x45 and proto == 6 and not frag & 0x3FFF and offflags >= 0x5000:
            total = (data[off + 2] << 8) | data[off + 3]
            end = off + total
            ps = off + 20 + ((offflags >> 12) << 2)
            if ps <= end <= n:
                pairs = _PAIRS
                key = data[off + 12 : off + 20]
                ab = pairs.get(key)
                if ab is None:
                    ab = _pair_text(key)
                sport = (data[off + 20] << 8) | data[off + 21]
                dport = (data[off + 22] << 8) | data[off + 23]
                seq = data[off + 24]  # widened before the shifts (a C int would overflow when compiled)
                seq = (seq << 24) | (data[off + 25] << 16) | (data[off + 26] << 8) | data[off + 27]
                ack = data[off + 28]
                ack = (ack << 24) | (data[off + 29] << 16) | (data[off + 30] << 8) | data[off + 31]
                return _new_segment(
                    Segment,
                    (
                        ab[0],
                        ab[1],
                        sport,
                        dport,
                        seq,
                        ack,
                        offflags & 0x1FF,
                        data[ps:end],
                        4,
                    ),
                )
    return _ipv4_general(data, off, depth)


def _ipv4_general(data: bytes, off: int, depth: int) -> Segment | None:
    """:func:`_ipv4` for any IPv4 packet (its fast path reads only the common one): checked header,
    options, TSO lengths, fragments, tunnels."""
    n = len(data)
    if n - off < 20:
        raise MalformedPacket(f"IPv4 header truncated ({n - off} of 20 bytes)")
    vihl, total, ident, frag, proto, src, dst = _IP4(data, off)
    if vihl >> 4 != 4:
        raise MalformedPacket(f"IPv4 header has version {vihl >> 4}")
    ihl = (vihl & 15) << 2
    if ihl < 20:
        raise MalformedPacket(f"IPv4 header length {ihl} is less than 20")
    if proto != 6:
        return _ipv4_not_tcp(data, off, ihl, total, frag, proto, depth)
    if frag & 0x3FFF:
        raise IPFragment(
            f"IPv4 fragment of a TCP packet (id 0x{ident:04x}, offset {(frag & 0x1FFF) * 8}, "
            f"more fragments: {'yes' if frag & 0x2000 else 'no'}): IP reassembly is not supported"
        )
    if total == 0:  # TSO / offloaded packet captured on the sender: trust the capture
        end = n
    else:
        if total < ihl:
            raise MalformedPacket(f"IPv4 total length {total} is less than its header length {ihl}")
        end = off + total
    return _tcp(
        data,
        off + ihl,
        end,
        _ADDR.get(src) or _addr_text(src),
        _ADDR.get(dst) or _addr_text(dst),
        4,
    )


def _ipv4_not_tcp(data: bytes, off: int, ihl: int, total: int, frag: int, proto: int, depth: int) -> Segment | None:
    """An IPv4 packet that is not TCP: the TCP inside a tunnel it may be, else None."""
    if proto == IP_UDP:  # (a UDP packet on no tunnel's port ends here, at the cost of two look-ups)
        n = len(data)
        u = off + ihl
        if n - u < 4 or (((data[u] << 8) | data[u + 1]) not in _UDP_TUNNEL_PORTS
                         and ((data[u + 2] << 8) | data[u + 3]) not in _UDP_TUNNEL_PORTS):
            return None
    elif proto not in _TUNNEL_PROTOS:
        return None
    return _tunnel4(data, off, ihl, total, frag, proto, depth)


def _ipv6(data: bytes, off: int, depth: int = 0) -> Segment | None:
    n = len(data)
    if n - off < 40:
        raise MalformedPacket(f"IPv6 header truncated ({n - off} of 40 bytes)")
    vtcfl, plen, nxt, src, dst = _IP6(data, off)
    if vtcfl >> 28 != 6:
        raise MalformedPacket(f"IPv6 header has version {vtcfl >> 28}")
    p = off + 40
    end = p + plen if plen else n  # 0: jumbogram or offloaded: trust the capture
    lim = end if end < n else n
    fragment = None
    while nxt in _IPV6_EXT:
        if lim - p < 8:
            raise MalformedPacket(f"IPv6 extension header {nxt} truncated ({lim - p} bytes left)")
        if nxt == 44:
            fo = (data[p + 2] << 8) | data[p + 3]
            if fo & 0xFFF9:  # offset or M bit: a real fragment (else an atomic fragment)
                fragment = (fo & 0xFFF8, fo & 1, int.from_bytes(data[p + 4 : p + 8], "big"))
                if fo & 0xFFF8:
                    # not the first fragment: what follows is payload, not headers
                    nxt = data[p]
                    break
            hl = 8
        elif nxt == 51:
            hl = (data[p + 1] + 2) * 4
        else:
            hl = (data[p + 1] + 1) * 8
        if p + hl > end:
            raise MalformedPacket(f"IPv6 extension header {nxt} ({hl} bytes) exceeds the payload length")
        nxt = data[p]
        p += hl
    if nxt != 6:
        if nxt in _TUNNEL_PROTOS:
            if fragment is not None:
                if fragment[0]:  # not the first fragment: no tunnel header here
                    return None
                return _fragment_of_tunnel(data, p, end, nxt, depth, f"IPv6 fragment (id 0x{fragment[2]:08x})")
            return _tunnel(data, p, end, nxt, depth)
        return None
    if fragment is not None:
        offset, more, ident = fragment
        raise IPFragment(
            f"IPv6 fragment of a TCP packet (id 0x{ident:08x}, offset {offset}, "
            f"more fragments: {'yes' if more else 'no'}): IP reassembly is not supported"
        )
    return _tcp(data, p, end, _ADDR.get(src) or _addr_text(src), _ADDR.get(dst) or _addr_text(dst), 6)


# ---------------------------------------------------------------------------
# tunnels (off the fast path: an IP packet that is not TCP comes here only when its protocol is one
# of _TUNNEL_PROTOS)


def _deeper(depth: int) -> int:
    """``depth`` + 1: one more tunnel around the packet; a MalformedPacket beyond MAX_TUNNEL_DEPTH."""
    if depth >= MAX_TUNNEL_DEPTH:
        raise MalformedPacket(f"tunnels nested more than {MAX_TUNNEL_DEPTH} deep: the packet is not decoded")
    return depth + 1


def _tunnel4(data: bytes, off: int, ihl: int, total: int, frag: int, proto: int, depth: int) -> Segment | None:
    """The TCP segment inside the tunnel an IPv4 packet carries (IP in IP, GRE, VXLAN, Geneve), or None."""
    if total and total < ihl:
        raise MalformedPacket(f"IPv4 total length {total} is less than its header length {ihl}")
    end = off + total if total else len(data)
    if frag & 0x1FFF:  # not the first fragment: no tunnel header here
        return None
    if frag & 0x2000:
        return _fragment_of_tunnel(data, off + ihl, end, proto, depth, f"IPv4 fragment (id 0x{_IP4(data, off)[2]:04x})")
    return _tunnel(data, off + ihl, end, proto, depth)


def _fragment_of_tunnel(data: bytes, p: int, end: int, proto: int, depth: int, what: str) -> None:
    """The first fragment of a tunnel packet: an IPFragment when the tunnel carries TCP (or what it
    carries is cut short), else None."""
    try:
        seg = _tunnel(data, p, end, proto, depth)
    except MalformedPacket:  # (cut by the fragmentation, most likely: what it carries is not whole)
        seg = True
    except UnreadTunnel:
        seg = None
    if seg is None:
        return None
    raise IPFragment(f"{what} of a tunnel packet that carries TCP or is cut by the fragmentation: what it "
                     "carries is not decoded (IP reassembly is not supported)")


def _tunnel(data: bytes, p: int, end: int, proto: int, depth: int) -> Segment | None:
    """The TCP segment inside the IP payload ``data[p:end]`` of protocol ``proto`` (4, 41, 47, 17)."""
    depth = _deeper(depth)
    if proto == IP_IN_IP:
        return _ipv4(data, p, depth)
    if proto == IP_IPV6:
        return _ipv6(data, p, depth)
    lim = end if end < len(data) else len(data)
    if proto == IP_GRE:
        return _gre(data, p, lim, depth)
    return _udp_tunnel(data, p, lim, depth)


def _udp_tunnel(data: bytes, p: int, lim: int, depth: int) -> Segment | None:
    """VXLAN (UDP port 4789) or Geneve (6081), by either port, the lower first as tshark tries them."""
    if lim - p < 16:
        return None
    sport = (data[p] << 8) | data[p + 1]
    dport = (data[p + 2] << 8) | data[p + 3]
    for port in ((sport, dport) if sport < dport else (dport, sport)):
        if port == UDP_VXLAN:  # 8-byte header, then an Ethernet frame
            return _ethernet(data, p + 16, depth)
        if port == UDP_GENEVE:
            q = p + 8
            if data[q] >> 6:  # a version tshark does not read either
                raise UnreadTunnel(f"Geneve version {data[q] >> 6}")
            et = (data[q + 2] << 8) | data[q + 3]
            q += 8 + ((data[q] & 0x3F) << 2)
            if q > lim:
                raise MalformedPacket(f"Geneve options exceed the packet ({lim - p - 16} bytes after the header)")
            if et == ETH_TEB:
                return _ethernet(data, q, depth)
            return _ether_payload(data, q, et, depth)
        name = UNREAD_UDP_TUNNELS.get(port)
        if name is not None:
            raise UnreadTunnel(name)
    return None


def _ethernet(data: bytes, off: int, depth: int) -> Segment | None:
    """An Ethernet frame inside a tunnel."""
    if len(data) - off < 14:
        raise MalformedPacket(f"tunnelled Ethernet header truncated ({max(len(data) - off, 0)} of 14 bytes)")
    return _ether_payload(data, off + 14, (data[off + 12] << 8) | data[off + 13], depth)


def _gre(data: bytes, p: int, lim: int, depth: int) -> Segment | None:
    """GRE (version 0; checksum, key and sequence number options) and what it carries: IPv4, IPv6,
    MPLS, Ethernet (transparent Ethernet bridging), ERSPAN types I, II and III."""
    if lim - p < 4:
        raise MalformedPacket(f"GRE header truncated ({lim - p} of 4 bytes)")
    flags = (data[p] << 8) | data[p + 1]
    et = (data[p + 2] << 8) | data[p + 3]
    if flags & 0x4007:  # version 1 (PPTP) or source routing: not read
        raise UnreadTunnel(f"GRE version {flags & 7}" + (" with source routing" if flags & 0x4000 else ""))
    q = p + 4 + (4 if flags & 0x8000 else 0) + (4 if flags & 0x2000 else 0) + (4 if flags & 0x1000 else 0)
    if q > lim:
        raise MalformedPacket(f"GRE header truncated ({lim - p} of {q - p} bytes)")
    if et == ETH_TEB:
        return _ethernet(data, q, depth)
    if et == ETH_ERSPAN_II or et == ETH_ERSPAN_III:
        if et == ETH_ERSPAN_II and not flags & 0x1000:  # type I: no ERSPAN header
            return _ethernet(data, q, depth)
        return _erspan(data, q, lim, depth)
    if et not in _GRE_READ:
        raise UnreadTunnel(f"GRE protocol 0x{et:04x}")
    return _ether_payload(data, q, et, depth)


def _erspan(data: bytes, q: int, lim: int, depth: int) -> Segment | None:
    """ERSPAN type II (8-byte header) or III (12 bytes, and 8 more with the O bit), by its version
    field; then the mirrored Ethernet frame."""
    if lim - q < 12:
        raise MalformedPacket(f"ERSPAN header truncated ({lim - q} bytes)")
    version = data[q] >> 4
    if version == 1:
        return _ethernet(data, q + 8, depth)
    if version == 2:
        if data[q + 10] & 0x7C:  # frame type other than Ethernet (FT, 5 bits)
            raise UnreadTunnel(f"ERSPAN type III frame type {(data[q + 10] >> 2) & 0x1F}")
        return _ethernet(data, q + (20 if data[q + 11] & 1 else 12), depth)
    raise UnreadTunnel(f"ERSPAN version {version}")


def _mpls(data: bytes, off: int, depth: int) -> Segment | None:
    """An MPLS label stack down to its bottom-of-stack bit, then IPv4 / IPv6 by the first nibble."""
    n = len(data)
    while True:
        if n - off < 4:
            raise MalformedPacket(f"MPLS label stack truncated ({max(n - off, 0)} of 4 bytes)")
        bottom = data[off + 2] & 1
        off += 4
        if bottom:
            break
    if n <= off:
        return None
    v = data[off] >> 4
    if v == 4:
        return _ipv4(data, off, depth)
    if v == 6:
        return _ipv6(data, off, depth)
    return None


def _tcp(data: bytes, t: int, end: int, src: str, dst: str, version: int) -> Segment:
    n = len(data)
    if end - t < 20:
        raise MalformedPacket(f"TCP header truncated by the IP length ({end - t} of 20 bytes)")
    if n - t < 20:
        raise MalformedPacket(f"TCP header truncated by the capture ({n - t} of 20 bytes)")
    sport, dport, seq, ack, offflags = _TCP(data, t)
    hl = (offflags >> 12) << 2
    if hl < 20:
        raise MalformedPacket(f"TCP header length {hl} is less than 20")
    ps = t + hl
    if ps > end:
        raise MalformedPacket(f"TCP header length {hl} exceeds the IP payload ({end - t} bytes)")
    if end <= n:
        return _new_segment(Segment, (src, dst, sport, dport, seq, ack, offflags & 0x1FF, data[ps:end], version))
    if ps > n:
        raise MalformedPacket(f"TCP header truncated by the capture ({n - t} of {hl} bytes)")
    seg = _new_segment(Segment, (src, dst, sport, dport, seq, ack, offflags & 0x1FF, data[ps:n], version))
    raise TruncatedPacket(
        f"TCP payload truncated by the capture: {n - ps} of {end - ps} bytes captured", seg, end - ps
    )


# ---------------------------------------------------------------------------
# verbose description (not hot)

_ETHERTYPE_NAMES = {
    0x0800: "IPv4",
    0x86DD: "IPv6",
    0x0806: "ARP",
    0x8100: "802.1Q Virtual LAN",
    0x88A8: "802.1ad Provider Bridge (Q-in-Q)",
    0x9100: "802.1QinQ (0x9100)",
    0x9200: "802.1QinQ (0x9200)",
    0x8847: "MPLS label switched packet",
    0x8848: "MPLS multicast label switched packet",
    0x6558: "Transparent Ethernet bridging",
    0x88BE: "ERSPAN",
    0x22EB: "ERSPAN III",
    0x88CC: "802.1 Link Layer Discovery Protocol (LLDP)",
}
_IP_PROTO_NAMES = {1: "ICMP", 2: "IGMP", 4: "IPIP", 6: "TCP", 17: "UDP", 41: "IPv6", 47: "Generic Routing Encapsulation",
                   50: "ESP", 51: "AH", 58: "ICMPv6", 132: "SCTP"}
_GRE_PROTOCOL_NAMES = {0x0800: "IP"}  # (GRE names IPv4 so; other protocol types by their EtherType name)
_IPV6_EXT_NAMES = {0: "IPv6 Hop-by-Hop Option", 43: "Routing Header for IPv6", 44: "Fragment Header for IPv6",
                   51: "Authentication Header", 60: "Destination Options for IPv6"}
_TCP_FLAG_NAMES = ((0x001, "FIN"), (0x002, "SYN"), (0x004, "RST"), (0x008, "PSH"), (0x010, "ACK"), (0x020, "URG"),
                   (0x040, "ECE"), (0x080, "CWR"), (0x100, "AE"))
_SLL_PKTTYPES = {0: "Unicast to us", 1: "Broadcast", 2: "Multicast", 3: "Unicast to another host", 4: "Sent by us"}


_MACS: dict[bytes, str] = {}


def _mac(b: bytes) -> str:
    s = _MACS.get(b)
    if s is None:
        if len(_MACS) >= 4096:
            _MACS.clear()
        s = _MACS[bytes(b)] = ":".join(f"{x:02x}" for x in b)
    return s


def _ethertype(et: int) -> str:
    return f"{_ETHERTYPE_NAMES.get(et, 'Unknown')} (0x{et:04x})"


def tcp_flags_text(flags: int) -> str:
    """'0x018 (PSH, ACK)' as in Wireshark."""
    names = [name for bit, name in _TCP_FLAG_NAMES if flags & bit]
    return f"0x{flags:03x} ({', '.join(names) if names else '<None>'})"


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_SECONDS: dict[int, str] = {}  # whole second since the epoch -> its date and time text


def _time_text(ts: int, digits: int = 6) -> str:
    """A capture time (nanoseconds) as UTC date and time text, to ``digits`` decimals (truncated)."""
    try:
        sec, frac = divmod(ts, 1_000_000_000)
        text = _SECONDS.get(sec)
        if text is None:
            if len(_SECONDS) >= 4096:
                _SECONDS.clear()
            text = _SECONDS[sec] = (_EPOCH + _dt.timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{frac // 10 ** (9 - digits):0{digits}d} UTC"
    except (OverflowError, ValueError):
        return f"(out of range: {ts!r})"


def frame_layer(record: CaptureRecord, digits: int | None = None) -> tuple[str, list[str]]:
    """The Frame layer of ``-V`` (Wireshark's first layer): sizes, link type and times, exact
    (``digits`` decimals; by default six, nine for a time with a part finer than a microsecond)."""
    if digits is None:
        digits = 9 if record.ts % 1000 else 6
    caplen = len(record.data)
    wire = record.orig_len
    lt = record.linktype
    return (
        f"Frame {record.index}: {wire} bytes on wire ({wire * 8} bits), "
        f"{caplen} bytes captured ({caplen * 8} bits)",
        [
            f"Interface id: {record.interface}",
            f"Encapsulation type: {LINKTYPE_NAMES.get(lt, 'Unknown')} ({lt})",
            f"Arrival Time: {_time_text(record.ts, digits)}",
            f"Epoch Time: {decimal(record.ts, digits)} seconds",
            f"Frame Number: {record.index}",
            f"Frame Length: {wire} bytes ({wire * 8} bits)",
            f"Capture Length: {caplen} bytes ({caplen * 8} bits)",
        ],
    )


def describe_packet(record: CaptureRecord) -> list[tuple[str, list[str]]]:
    """Wireshark-style (title, detail lines) per layer of one packet, for ``-V``.

    Sequence / acknowledgement numbers are the raw (absolute) values.  Never
    raises: a problem ends the list with a "[Malformed Packet: ...]" layer.
    """
    data = record.data
    lt = record.linktype
    layers: list[tuple[str, list[str]]] = [frame_layer(record)]
    try:
        _describe_link(lt, data, layers)
    except (DissectError, IndexError, struct.error, ValueError) as exc:
        layers.append((f"[Malformed Packet: {exc}]", []))
    return layers


def _need(data: bytes, off: int, n: int, what: str) -> None:
    if len(data) - off < n:
        raise MalformedPacket(f"{what} truncated ({max(len(data) - off, 0)} of {n} bytes)")


def _describe_link(lt: int, data: bytes, layers: list) -> None:
    if lt == LINKTYPE_ETHERNET:
        _describe_ethernet(data, 0, layers, 0)
    elif lt == LINKTYPE_LINUX_SLL:
        _need(data, 0, 16, "Linux cooked capture header")
        ptype, hatype, halen = struct.unpack_from("!HHH", data, 0)
        et = (data[14] << 8) | data[15]
        addr = data[6 : 6 + min(halen, 8)]
        layers.append(("Linux cooked capture v1", [
            f"Packet type: {_SLL_PKTTYPES.get(ptype, 'Unknown')} ({ptype})",
            f"Link-layer address type: {hatype}",
            f"Link-layer address length: {halen}",
            f"Source: {_mac(addr)}",
            f"Protocol: {_ethertype(et)}",
        ]))
        _describe_ethertype(data, 16, et, layers)
    elif lt == LINKTYPE_LINUX_SLL2:
        _need(data, 0, 20, "Linux cooked capture v2 header")
        et, _res, ifindex, hatype, ptype, halen = struct.unpack_from("!HHiHBB", data, 0)
        addr = data[12 : 12 + min(halen, 8)]
        layers.append(("Linux cooked capture v2", [
            f"Protocol: {_ethertype(et)}",
            f"Interface index: {ifindex}",
            f"Link-layer address type: {hatype}",
            f"Packet type: {_SLL_PKTTYPES.get(ptype, 'Unknown')} ({ptype})",
            f"Link-layer address length: {halen}",
            f"Source: {_mac(addr)}",
        ]))
        _describe_ethertype(data, 20, et, layers)
    elif lt in (LINKTYPE_NULL, LINKTYPE_LOOP):
        _need(data, 0, 4, "Null/Loopback header")
        if lt == LINKTYPE_LOOP:
            fam = int.from_bytes(data[:4], "big")
        else:
            fam = int.from_bytes(data[:4], "little")
            if fam > 0xFFFF:
                fam = int.from_bytes(data[:4], "big")
        name = "IP" if fam in _AF_INET else "IPv6" if fam in _AF_INET6 else "Unknown"
        layers.append(("Null/Loopback", [f"Family: {name} ({fam})"]))
        if fam in _AF_INET:
            _describe_ipv4(data, 4, layers)
        elif fam in _AF_INET6:
            _describe_ipv6(data, 4, layers)
        else:
            _describe_data(data, 4, layers)
    elif lt in (LINKTYPE_RAW, DLT_RAW_12, DLT_RAW_14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        layers.append(("Raw packet data", ["No link information available"]))
        _need(data, 0, 1, "IP header")
        v = data[0] >> 4
        if v == 4:
            _describe_ipv4(data, 0, layers)
        elif v == 6:
            _describe_ipv6(data, 0, layers)
        else:
            raise MalformedPacket(f"IP version {v}")
    else:
        layers.append((f"Unsupported link-layer type {lt}", []))
        _describe_data(data, 0, layers)


def _describe_ethernet(data: bytes, off: int, layers: list, depth: int) -> None:
    _need(data, off, 14, "Ethernet header")
    dst, src, et = data[off : off + 6], data[off + 6 : off + 12], (data[off + 12] << 8) | data[off + 13]
    if et < 0x0600:
        layers.append((f"IEEE 802.3 Ethernet, Src: {_mac(src)}, Dst: {_mac(dst)}",
                       [f"Destination: {_mac(dst)}", f"Source: {_mac(src)}", f"Length: {et}"]))
        _describe_data(data, off + 14, layers)
        return
    layers.append((f"Ethernet II, Src: {_mac(src)}, Dst: {_mac(dst)}",
                   [f"Destination: {_mac(dst)}", f"Source: {_mac(src)}", f"Type: {_ethertype(et)}"]))
    _describe_ethertype(data, off + 14, et, layers, depth)


def _describe_ethertype(data: bytes, off: int, et: int, layers: list, depth: int = 0) -> None:
    while et in VLAN_TPIDS:
        _need(data, off, 4, "VLAN tag")
        tci, inner = struct.unpack_from("!HH", data, off)
        title = "802.1Q Virtual LAN" if et == 0x8100 else "IEEE 802.1ad"
        layers.append((f"{title}, PRI: {tci >> 13}, DEI: {(tci >> 12) & 1}, ID: {tci & 0xFFF}", [
            f"Priority: {tci >> 13}",
            f"DEI: {(tci >> 12) & 1}",
            f"ID: {tci & 0xFFF}",
            f"Type: {_ethertype(inner)}",
        ]))
        et = inner
        off += 4
    if et == ETH_IPV4:
        _describe_ipv4(data, off, layers, depth)
    elif et == ETH_IPV6:
        _describe_ipv6(data, off, layers, depth)
    elif et == ETH_MPLS or et == ETH_MPLS_MULTICAST:
        _describe_mpls(data, off, layers, _deeper(depth))
    else:
        _describe_data(data, off, layers)


def _describe_ipv4(data: bytes, off: int, layers: list, depth: int = 0) -> None:
    _need(data, off, 20, "IPv4 header")
    vihl, tos, total, ident, frag, ttl, proto, csum = struct.unpack_from("!BBHHHBBH", data, off)
    src = addr_text(data[off + 12 : off + 16])
    dst = addr_text(data[off + 16 : off + 20])
    ihl = (vihl & 15) * 4
    flags = frag >> 13
    fl = [n for b, n in ((2, "Don't fragment"), (1, "More fragments")) if flags & b]
    pname = _IP_PROTO_NAMES.get(proto, "Unknown")
    layers.append((f"Internet Protocol Version 4, Src: {src}, Dst: {dst}", [
        f"Version: {vihl >> 4}",
        f"Header Length: {ihl} bytes ({vihl & 15})",
        f"Differentiated Services Field: 0x{tos:02x}",
        f"Total Length: {total}",
        f"Identification: 0x{ident:04x} ({ident})",
        f"Flags: 0x{flags:x}" + (f", {', '.join(fl)}" if fl else ""),
        f"Fragment Offset: {(frag & 0x1FFF) * 8}",
        f"Time to Live: {ttl}",
        f"Protocol: {pname} ({proto})",
        f"Header Checksum: 0x{csum:04x} [validation disabled]",
        f"Source Address: {src}",
        f"Destination Address: {dst}",
    ]))
    if vihl >> 4 != 4 or ihl < 20:
        raise MalformedPacket(f"bad IPv4 version/header length (0x{vihl:02x})")
    end = off + total if total else len(data)
    if frag & 0x1FFF:
        layers.append((f"Data ({max(min(end, len(data)) - off - ihl, 0)} bytes, IPv4 fragment)", []))
        return
    _describe_transport(data, off + ihl, end, proto, layers, depth)


def _describe_ipv6(data: bytes, off: int, layers: list, depth: int = 0) -> None:
    _need(data, off, 40, "IPv6 header")
    vtcfl, plen, nxt, hlim = struct.unpack_from("!IHBB", data, off)
    src = addr_text(data[off + 8 : off + 24])
    dst = addr_text(data[off + 24 : off + 40])
    details = [
        f"Version: {vtcfl >> 28}",
        f"Traffic Class: 0x{(vtcfl >> 20) & 0xFF:02x}",
        f"Flow Label: 0x{vtcfl & 0xFFFFF:05x}",
        f"Payload Length: {plen}",
        f"Next Header: {_IP_PROTO_NAMES.get(nxt, _IPV6_EXT_NAMES.get(nxt, 'Unknown'))} ({nxt})",
        f"Hop Limit: {hlim}",
        f"Source Address: {src}",
        f"Destination Address: {dst}",
    ]
    layers.append((f"Internet Protocol Version 6, Src: {src}, Dst: {dst}", details))
    p = off + 40
    end = p + plen if plen else len(data)
    while nxt in _IPV6_EXT:
        _need(data, p, 8, "IPv6 extension header")
        name = _IPV6_EXT_NAMES[nxt]
        if nxt == 44:
            fo = (data[p + 2] << 8) | data[p + 3]
            ident = int.from_bytes(data[p + 4 : p + 8], "big")
            details.append(f"{name}: offset {fo & 0xFFF8}, more fragments: {'yes' if fo & 1 else 'no'}, "
                           f"id 0x{ident:08x}")
            if fo & 0xFFF8:
                layers.append((f"Data ({max(min(end, len(data)) - p - 8, 0)} bytes, IPv6 fragment)", []))
                return
            hl = 8
        elif nxt == 51:
            hl = (data[p + 1] + 2) * 4
            details.append(f"{name}: {hl} bytes")
        else:
            hl = (data[p + 1] + 1) * 8
            details.append(f"{name}: {hl} bytes")
        nxt = data[p]
        p += hl
    _describe_transport(data, p, end, nxt, layers, depth)


def _describe_transport(data: bytes, t: int, end: int, proto: int, layers: list, depth: int = 0) -> None:
    cap_end = min(end, len(data))
    if proto == 6:
        _need(data, t, 20, "TCP header")
        sport, dport, seq, ack, offflags, win, csum, urp = struct.unpack_from("!HHIIHHHH", data, t)
        hl = (offflags >> 12) * 4
        flags = offflags & 0xFFF
        plen = max(end - t - hl, 0)
        title = f"Transmission Control Protocol, Src Port: {sport}, Dst Port: {dport}, Seq: {seq} (raw)"
        if flags & 0x10:
            title += f", Ack: {ack} (raw)"
        title += f", Len: {plen}"
        details = [
            f"Source Port: {sport}",
            f"Destination Port: {dport}",
            f"TCP Segment Len: {plen}",
            f"Sequence Number (raw): {seq}",
            f"Acknowledgment Number (raw): {ack}",
            f"Header Length: {hl} bytes ({offflags >> 12})",
            f"Flags: {tcp_flags_text(flags)}",
            f"Window: {win}",
            f"Checksum: 0x{csum:04x} [unverified]",
            f"Urgent Pointer: {urp}",
        ]
        if hl > 20:
            details.append(f"Options: ({hl - 20} bytes)")
        captured = max(cap_end - t - hl, 0)
        if plen:
            details.append(f"TCP payload ({plen} bytes)" + ("" if captured >= plen else f", {captured} captured"))
        layers.append((title, details))
        if hl < 20:
            raise MalformedPacket(f"TCP header length {hl} is less than 20")
    elif proto == 17:
        _need(data, t, 8, "UDP header")
        sport, dport, ulen, csum = struct.unpack_from("!HHHH", data, t)
        layers.append((f"User Datagram Protocol, Src Port: {sport}, Dst Port: {dport}", [
            f"Source Port: {sport}", f"Destination Port: {dport}", f"Length: {ulen}",
            f"Checksum: 0x{csum:04x} [unverified]"]))
        for port in ((sport, dport) if sport < dport else (dport, sport)):
            if port == UDP_VXLAN or port == UDP_GENEVE:
                _describe_udp_tunnel(data[:cap_end], t + 8, port, layers, _deeper(depth))
                return
        _describe_data(data[:cap_end], t + 8, layers)
    elif proto == IP_IN_IP:
        _describe_ipv4(data, t, layers, _deeper(depth))
    elif proto == IP_IPV6:
        _describe_ipv6(data, t, layers, _deeper(depth))
    elif proto == IP_GRE:
        _describe_gre(data[:cap_end], t, layers, _deeper(depth))
    else:
        _describe_data(data[:cap_end], t, layers)


def _describe_udp_tunnel(data: bytes, p: int, port: int, layers: list, depth: int) -> None:
    """The VXLAN or Geneve header at ``data[p:]`` and the frame it carries."""
    _need(data, p, 8, "VXLAN header" if port == UDP_VXLAN else "Geneve header")
    if port == UDP_VXLAN:
        flags, policy, word = struct.unpack_from("!HHI", data, p)
        layers.append(("Virtual eXtensible Local Area Network", [
            f"Flags: 0x{flags:04x}" + (", VXLAN Network ID (VNI)" if flags & 0x0800 else ""),
            f"Group Policy ID: {policy}",
            f"VXLAN Network Identifier (VNI): {word >> 8}",
            f"Reserved: {word & 0xFF}",
        ]))
        _describe_ethernet(data, p + 8, layers, depth)
        return
    verlen, flags, et, word = struct.unpack_from("!BBHI", data, p)
    optlen = (verlen & 0x3F) * 4
    details = [
        f"Version: {verlen >> 6}",
        f"Length: {optlen + 8} bytes",
        f"Flags: 0x{flags:02x}",
        f"Protocol Type: {_ethertype(et)}",
        f"Virtual Network Identifier (VNI): 0x{word >> 8:06x} ({word >> 8})",
        f"Reserved: 0x{word & 0xFF:02x}",
    ]
    if optlen:
        details.append(f"Options: ({optlen} bytes)")
    layers.append((f"Generic Network Virtualization Encapsulation, VNI: 0x{word >> 8:06x}", details))
    _need(data, p, 8 + optlen, "Geneve options")
    if et == ETH_TEB:
        _describe_ethernet(data, p + 8 + optlen, layers, depth)
    else:
        _describe_ethertype(data, p + 8 + optlen, et, layers, depth)


def _describe_gre(data: bytes, p: int, layers: list, depth: int) -> None:
    """The GRE header at ``data[p:]`` (its options), then what it carries."""
    _need(data, p, 4, "GRE header")
    flags, et = struct.unpack_from("!HH", data, p)
    name = _GRE_PROTOCOL_NAMES.get(et) or _ETHERTYPE_NAMES.get(et, "Unknown")
    details = [f"Flags and Version: 0x{flags:04x}", f"Protocol Type: {name} (0x{et:04x})"]
    q = p + 4
    if flags & 0xC000:
        _need(data, q, 4, "GRE checksum")
        csum, offset = struct.unpack_from("!HH", data, q)
        details += [f"Checksum: 0x{csum:04x} [unverified]", f"Offset: {offset}"]
        q += 4
    for bit, what in ((0x2000, "Key"), (0x1000, "Sequence Number")):
        if flags & bit:
            _need(data, q, 4, f"GRE {what.lower()}")
            value = int.from_bytes(data[q : q + 4], "big")
            details.append(f"Key: 0x{value:08x}" if bit == 0x2000 else f"Sequence Number: {value}")
            q += 4
    layers.append((f"Generic Routing Encapsulation ({name})", details))
    if flags & 0x4007:  # source routing or version 1 (PPTP): not read
        _describe_data(data, q, layers)
    elif et == ETH_TEB:
        _describe_ethernet(data, q, layers, depth)
    elif et == ETH_ERSPAN_II or et == ETH_ERSPAN_III:
        _describe_erspan(data, q, et == ETH_ERSPAN_II and not flags & 0x1000, layers, depth)
    else:
        _describe_ethertype(data, q, et, layers, depth)


_ERSPAN_TITLE = "Encapsulated Remote Switch Packet ANalysis"


def _describe_erspan(data: bytes, q: int, type_one: bool, layers: list, depth: int) -> None:
    """An ERSPAN header (type I: none; II; III) and the mirrored frame."""
    if type_one:
        layers.append((f"{_ERSPAN_TITLE} Type I", []))
        _describe_ethernet(data, q, layers, depth)
        return
    _need(data, q, 8, "ERSPAN header")
    w0, w1 = struct.unpack_from("!II", data, q)
    version = w0 >> 28
    common = [f"Vlan: {(w0 >> 16) & 0xFFF}", f"COS: {(w0 >> 13) & 7}", f"Truncated: {(w0 >> 10) & 1}",
              f"SpanID: {w0 & 0x3FF}"]
    if version == 1:
        layers.append((f"{_ERSPAN_TITLE} Type II", ["Version: Type II (1)", *common, f"Index: {w1 & 0xFFFFF}"]))
        _describe_ethernet(data, q + 8, layers, depth)
        return
    if version != 2:
        layers.append((f"{_ERSPAN_TITLE}", [f"Version: Unknown ({version})"]))
        _describe_data(data, q, layers)
        return
    _need(data, q, 12, "ERSPAN type III header")
    sgt, w2 = struct.unpack_from("!HH", data, q + 8)
    frame_type = (w2 >> 10) & 0x1F
    layers.append((f"{_ERSPAN_TITLE} Type III", [
        "Version: Type III (2)", *common, f"Timestamp: {w1}", f"Security Group Tag: {sgt}",
        f"Frame Type: {'Ethernet' if frame_type == 0 else 'Unknown'} ({frame_type})",
        f"Hardware ID: {(w2 >> 4) & 0x3F}", f"Direction: {'Egress' if w2 & 8 else 'Ingress'}",
        f"Optional Sub headers: {w2 & 1}",
    ]))
    if frame_type:
        _describe_data(data, q + 12, layers)
    else:
        _describe_ethernet(data, q + (20 if w2 & 1 else 12), layers, depth)


def _describe_mpls(data: bytes, off: int, layers: list, depth: int) -> None:
    """Each MPLS label of the stack, then IPv4 / IPv6 by the first nibble (as tshark guesses)."""
    while True:
        _need(data, off, 4, "MPLS label")
        (word,) = struct.unpack_from("!I", data, off)
        label, exp, bottom, ttl = word >> 12, (word >> 9) & 7, (word >> 8) & 1, word & 0xFF
        layers.append((f"MultiProtocol Label Switching Header, Label: {label}, Exp: {exp}, S: {bottom}, TTL: {ttl}", [
            f"MPLS Label: {label} (0x{label:05x})", f"MPLS Experimental Bits: {exp}",
            f"MPLS Bottom Of Label Stack: {bottom}", f"MPLS TTL: {ttl}",
        ]))
        off += 4
        if bottom:
            break
    v = data[off] >> 4 if off < len(data) else 0
    if v == 4:
        _describe_ipv4(data, off, layers, depth)
    elif v == 6:
        _describe_ipv6(data, off, layers, depth)
    else:
        _describe_data(data, off, layers)


def _describe_data(data: bytes, off: int, layers: list) -> None:
    n = len(data) - off
    if n > 0:
        layers.append((f"Data ({n} bytes)", []))
