"""Build test captures with dpkt's packet classes and writers (code we did not write).

Packets
-------
``tcp_packet(src, dst, sport, dport, *, seq=0, ack=0, flags=ACK, payload=b"", win=65535,
options=b"", ttl=64, ident=1, ext_headers=b"", ext_first=None, frag=0) -> bytes``
    One IPv4 or IPv6 packet (chosen by the address text) carrying a TCP segment,
    built with ``dpkt.ip.IP`` / ``dpkt.ip6.IP6`` / ``dpkt.tcp.TCP`` (checksums and
    lengths filled in by dpkt).  ``ext_headers`` (IPv6 only) are raw extension
    header bytes inserted after the fixed header, ``ext_first`` their first
    header type (``nxt`` of the fixed header); the last one's ``nxt`` must be 6.
    ``frag`` (IPv4 only) is the raw flags/fragment-offset field (0x2000 = MF).
``udp_packet(src, dst, sport, dport, payload=b"") -> bytes``

Link layers (take the IP packet bytes, return the frame bytes)
    ``ethernet_frame(ip, *, vlans=(), tpid=None, src_mac=..., dst_mac=..., pad_to=0, ethertype=None)``
        ``vlans`` is a sequence of VLAN ids (outermost first); 1-2 tags use dpkt's
        VLANtag8021Q, deeper stacks are built by hand; ``tpid`` is the outer tag's
        TPID (0x8100 default; e.g. 0x88a8 or 0x9100 for QinQ).  ``pad_to`` pads
        the frame with zero bytes (Ethernet minimum is 60).
    ``sll_frame(ip, pkttype=0)``, ``sll2_frame(ip, pkttype=0, ifindex=1)`` (dpkt.sll / dpkt.sll2)
    ``null_frame(ip, little_endian=True, family=None)`` (BSD loopback, AF in host order),
    ``loop_frame(ip)`` (network order), raw: the IP bytes themselves.
    ``frame(linktype, ip, **kw)`` dispatches on a LINKTYPE_* value.

Capture files (all return bytes; wrap in ``io.BytesIO`` to read)
    ``write_pcap(records, *, nano=False, little_endian=True, snaplen=65535, linktype=None)``
        ``records``: ``(ts, linktype, data)`` (or ``(ts, data)`` with ``linktype=``).
        ``ts``: float seconds or ``(sec, frac)`` with frac in µs / ns.  Headers are
        dpkt's ``pcap.FileHdr`` / ``PktHdr`` classes (LE or BE variants).
    ``write_pcapng(records, *, interfaces=((1, None),), little_endian=True, simple=())``
        ``records``: ``(ts, iface, data)``; ``interfaces``: ``(linktype, tsresol)``
        pairs (tsresol None = default µs; ``0x80 | n`` = 2^-n); ``simple``: indices
        of records written as Simple Packet Blocks (interface 0, no timestamp).
        Records may also be raw block bytes (from ``pcapng_block``/``pcapng_shb``...),
        written verbatim, e.g. to add NRB/ISB/custom blocks or a second section.
        Blocks come from dpkt's ``pcapng`` classes, SPB and generic blocks by hand.
    ``gzip_bytes(data)``

Streaming (large captures without holding them in memory)
    ``PcapWriter(f, linktype=1, *, nano=False, little_endian=True, snaplen=65535)``
        ``.write(ts, data)`` appends one record to the open binary file ``f``
        (same headers and ``ts`` forms as ``write_pcap``); ``.count`` records written.
    ``read_pcap_records(f)`` yields ``(ts, linktype, data)`` from a classic pcap
        (dpkt's ``pcap.Reader``; ``ts`` as ``(sec, frac)`` in the file's units).
    ``retarget_tcp(data, linktype, port_map)`` returns the frame with its TCP
        ports mapped through ``port_map`` (a dict; unmapped ports stay), the
        packet re-serialised by dpkt with fresh IP and TCP checksums.
    ``repeat_pcap(src, dst, copies, *, server_ports=(5672,), port_step=None, gap=1.0)``
        writes ``copies`` back-to-back replays of the TCP traffic in pcap file
        ``src`` to ``dst``: replay ``i`` moves every client port (a TCP port not in
        ``server_ports``) up by ``i * port_step`` (default: the span of the client
        ports) and every timestamp later by ``i * (duration + gap)``, so the result
        holds ``copies`` times as many distinct TCP connections.  Streams record by
        record; returns ``{"packets", "copies", "port_step", "time_step"}``.

TcpConversation
---------------
Produces the packets of one TCP connection with consistent seq/ack numbers so
tests can carry arbitrary (AMQP) bytes over TCP::

    conv = TcpConversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                           linktype=1, t0=1_700_000_000.0, dt=0.001,
                           client_isn=1000, server_isn=5000, mss=1460, acks=False)
    conv.handshake()                      # SYN, SYN/ACK, ACK
    conv.send(0, b"AMQP\\x00\\x01\\x00\\x00")  # 0 = client->server, 1 = server->client
    conv.send(1, b"AMQP\\x00\\x01\\x00\\x00")  # split into mss-sized segments
    conv.close()                          # FIN from the client, FIN/ACK back, last ACK
    data = conv.pcap()                    # or conv.pcapng(), or use conv.records

    TcpConversation.from_exchange([(0, b"..."), (1, b"...")], **kw)  # handshake+sends+close

``records`` is a list of ``(ts, linktype, frame_bytes)`` (feed it to
``write_pcap``/``write_pcapng`` or merge several conversations, sorted by ts);
``segments`` is the parallel list of ``(direction, seq, ack, flags, payload)``.
``packet(direction, flags, payload=b"", seq=None, ack=None, advance=True)``
adds one hand-made segment (e.g. RST, keep-alive, retransmission);
``rst(direction)`` adds an RST.  ``next_seq[d]`` is the next sequence number of
direction d; ``conn_id`` is the id TcpReassembler gives the connection
(``"10.0.0.1:40000-10.0.0.2:5672"``) when it is the first one on its 4-tuple.
With ``acks=True`` every data segment is followed by a pure ACK from the
receiver.  IPv6 is used when the addresses contain ':'.
"""

from __future__ import annotations

import gzip
import io
import socket
import struct
from decimal import Decimal

from dpkt import ethernet, ip, ip6, pcap, pcapng, sll, sll2, tcp, udp

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276

SRC_MAC = b"\x02\x00\x00\x00\x00\x01"
DST_MAC = b"\x02\x00\x00\x00\x00\x02"


def _is6(addr: str) -> bool:
    return ":" in addr


def _pton(addr: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6 if _is6(addr) else socket.AF_INET, addr)


# --------------------------------------------------------------------------- packets
def _ip_wrap(src: str, dst: str, proto: int, l4, *, ttl=64, ident=1, ext_headers=b"", ext_first=None, frag=0) -> bytes:
    if _is6(src):
        if ext_headers:
            # dpkt fills the TCP checksum only without extension headers; compute it on a
            # header-less copy first (the pseudo header does not include extension headers)
            bytes(ip6.IP6(src=_pton(src), dst=_pton(dst), nxt=proto, hlim=ttl, plen=len(bytes(l4)), data=l4))
            body = ext_headers + bytes(l4)
            pkt = ip6.IP6(src=_pton(src), dst=_pton(dst), nxt=ext_first, hlim=ttl, plen=len(body))
            return pkt.pack_hdr() + body
        body = l4
        pkt = ip6.IP6(src=_pton(src), dst=_pton(dst), nxt=proto, hlim=ttl, plen=len(bytes(l4)), data=body)
        return bytes(pkt)
    pkt = ip.IP(src=_pton(src), dst=_pton(dst), p=proto, ttl=ttl, id=ident, _flags_offset=frag, data=l4)
    pkt.len = len(pkt)
    return bytes(pkt)


def tcp_packet(
    src: str,
    dst: str,
    sport: int,
    dport: int,
    *,
    seq: int = 0,
    ack: int = 0,
    flags: int = ACK,
    payload: bytes = b"",
    win: int = 65535,
    options: bytes = b"",
    ttl: int = 64,
    ident: int = 1,
    ext_headers: bytes = b"",
    ext_first: int | None = None,
    frag: int = 0,
) -> bytes:
    """An IPv4/IPv6 packet with a TCP segment, built by dpkt (see module doc)."""
    seg = tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, win=win, opts=options, data=payload)
    seg.off = (20 + len(options)) // 4
    return _ip_wrap(src, dst, 6, seg, ttl=ttl, ident=ident, ext_headers=ext_headers, ext_first=ext_first, frag=frag)


def udp_packet(src: str, dst: str, sport: int, dport: int, payload: bytes = b"") -> bytes:
    u = udp.UDP(sport=sport, dport=dport, data=payload)
    u.ulen = len(u)
    return _ip_wrap(src, dst, 17, u)


# --------------------------------------------------------------------------- link layers
def _ethertype_of(ip_bytes: bytes) -> int:
    return ethernet.ETH_TYPE_IP6 if ip_bytes[:1] and ip_bytes[0] >> 4 == 6 else ethernet.ETH_TYPE_IP


def ethernet_frame(
    ip_bytes: bytes,
    *,
    vlans=(),
    tpid: int | None = None,
    src_mac: bytes = SRC_MAC,
    dst_mac: bytes = DST_MAC,
    pad_to: int = 0,
    ethertype: int | None = None,
) -> bytes:
    et = _ethertype_of(ip_bytes) if ethertype is None else ethertype
    vlans = list(vlans)
    if len(vlans) > 2:
        # dpkt packs at most two tags: build the stack by hand
        outer = tpid or 0x8100
        out = dst_mac + src_mac + struct.pack("!H", outer)
        for i, vid in enumerate(vlans):
            inner = et if i == len(vlans) - 1 else 0x8100
            out += struct.pack("!HH", vid & 0xFFF, inner)
        frame_bytes = out + ip_bytes
    else:
        eth = ethernet.Ethernet(src=src_mac, dst=dst_mac, type=et, data=ip_bytes)
        if vlans:
            eth.vlan_tags = [ethernet.VLANtag8021Q(id=v, pri=0, cfi=0, type=et) for v in vlans]
            eth.type = tpid or (ethernet.ETH_TYPE_8021Q if len(vlans) == 1 else ethernet.ETH_TYPE_8021AD)
            for t in eth.vlan_tags:
                t.type = et
        frame_bytes = bytes(eth)
        if vlans:
            # dpkt cannot infer the inner type from raw bytes: set it explicitly
            hdr = 14
            for i in range(len(vlans)):
                inner = et if i == len(vlans) - 1 else ethernet.ETH_TYPE_8021Q
                off = hdr + 4 * i + 2
                frame_bytes = frame_bytes[:off] + struct.pack("!H", inner) + frame_bytes[off + 2 :]
    if pad_to and len(frame_bytes) < pad_to:
        frame_bytes += b"\x00" * (pad_to - len(frame_bytes))
    return frame_bytes


def sll_frame(ip_bytes: bytes, pkttype: int = 0, addr: bytes = SRC_MAC) -> bytes:
    return bytes(sll.SLL(type=pkttype, hrd=1, hlen=6, hdr=addr + b"\x00\x00", ethtype=_ethertype_of(ip_bytes),
                         data=ip_bytes))


def sll2_frame(ip_bytes: bytes, pkttype: int = 0, ifindex: int = 1, addr: bytes = SRC_MAC) -> bytes:
    return bytes(sll2.SLL2(ethtype=_ethertype_of(ip_bytes), intindex=ifindex, hrd=1, type=pkttype, hlen=6,
                           hdr=addr + b"\x00\x00", data=ip_bytes))


def null_frame(ip_bytes: bytes, little_endian: bool = True, family: int | None = None) -> bytes:
    if family is None:
        family = 24 if ip_bytes[0] >> 4 == 6 else 2
    return struct.pack("<I" if little_endian else ">I", family) + ip_bytes


def loop_frame(ip_bytes: bytes, family: int | None = None) -> bytes:
    if family is None:
        family = 24 if ip_bytes[0] >> 4 == 6 else 2
    return struct.pack(">I", family) + ip_bytes


def frame(linktype: int, ip_bytes: bytes, **kw) -> bytes:
    """Wrap an IP packet for a LINKTYPE_* value (kw go to the wrapper)."""
    if linktype == LINKTYPE_ETHERNET:
        return ethernet_frame(ip_bytes, **kw)
    if linktype == LINKTYPE_LINUX_SLL:
        return sll_frame(ip_bytes, **kw)
    if linktype == LINKTYPE_LINUX_SLL2:
        return sll2_frame(ip_bytes, **kw)
    if linktype == LINKTYPE_NULL:
        return null_frame(ip_bytes, **kw)
    if linktype == LINKTYPE_LOOP:
        return loop_frame(ip_bytes, **kw)
    if linktype in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return ip_bytes
    raise ValueError(f"no wrapper for linktype {linktype}")


# --------------------------------------------------------------------------- files
def _split_ts(ts, units: int) -> tuple[int, int]:
    if isinstance(ts, tuple):
        return ts
    d = Decimal(repr(ts)) if isinstance(ts, float) else Decimal(ts)
    ticks = int((d * units).to_integral_value())
    return ticks // units, ticks % units


def write_pcap(records, *, nano: bool = False, little_endian: bool = True, snaplen: int = 65535, linktype=None) -> bytes:
    recs = [r if len(r) == 3 else (r[0], linktype, r[1]) for r in records]
    if linktype is None:
        linktype = recs[0][1] if recs else LINKTYPE_ETHERNET
    magic = pcap.TCPDUMP_MAGIC_NANO if nano else pcap.TCPDUMP_MAGIC
    fh_cls, ph_cls = (pcap.LEFileHdr, pcap.LEPktHdr) if little_endian else (pcap.FileHdr, pcap.PktHdr)
    out = io.BytesIO()
    out.write(bytes(fh_cls(magic=magic, snaplen=snaplen, linktype=linktype)))
    units = 10**9 if nano else 10**6
    for ts, _lt, data in recs:
        sec, frac = _split_ts(ts, units)
        out.write(bytes(ph_cls(tv_sec=sec, tv_usec=frac, caplen=len(data), len=len(data))))
        out.write(data)
    return out.getvalue()


def _cls(name: str, little_endian: bool):
    return getattr(pcapng, name + ("LE" if little_endian else ""))


def pcapng_shb(little_endian: bool = True) -> bytes:
    return bytes(_cls("SectionHeaderBlock", little_endian)())


def pcapng_idb(linktype: int, tsresol: int | None = None, *, little_endian: bool = True, snaplen: int = 65535,
               tsoffset: int | None = None) -> bytes:
    opt = _cls("PcapngOption", little_endian)
    opts = []
    if tsresol is not None:
        opts.append(opt(code=pcapng.PCAPNG_OPT_IF_TSRESOL, data=bytes([tsresol])))
    if tsoffset is not None:
        opts.append(opt(code=pcapng.PCAPNG_OPT_IF_TSOFFSET, data=struct.pack("<q" if little_endian else ">q", tsoffset)))
    if opts:
        opts.append(opt(code=pcapng.PCAPNG_OPT_ENDOFOPT))
        return bytes(_cls("InterfaceDescriptionBlock", little_endian)(linktype=linktype, snaplen=snaplen, opts=opts))
    return bytes(_cls("InterfaceDescriptionBlock", little_endian)(linktype=linktype, snaplen=snaplen))


def tsresol_units(tsresol: int | None) -> int:
    if tsresol is None:
        return 10**6
    return 1 << (tsresol & 0x7F) if tsresol & 0x80 else 10**tsresol


def pcapng_epb(iface: int, ticks: int, data: bytes, *, little_endian: bool = True) -> bytes:
    return bytes(_cls("EnhancedPacketBlock", little_endian)(iface_id=iface, ts_high=ticks >> 32,
                                                            ts_low=ticks & 0xFFFFFFFF, pkt_data=data))


def pcapng_block(btype: int, body: bytes, *, little_endian: bool = True) -> bytes:
    body = body + b"\x00" * (-len(body) % 4)
    bo = "<" if little_endian else ">"
    n = 12 + len(body)
    return struct.pack(bo + "II", btype, n) + body + struct.pack(bo + "I", n)


def pcapng_spb(data: bytes, *, little_endian: bool = True, orig_len: int | None = None) -> bytes:
    bo = "<" if little_endian else ">"
    return pcapng_block(pcapng.PCAPNG_BT_SPB, struct.pack(bo + "I", len(data) if orig_len is None else orig_len)
                        + data, little_endian=little_endian)


def write_pcapng(records, *, interfaces=((LINKTYPE_ETHERNET, None),), little_endian: bool = True, simple=()) -> bytes:
    out = io.BytesIO()
    out.write(pcapng_shb(little_endian))
    for lt, res in interfaces:
        out.write(pcapng_idb(lt, res, little_endian=little_endian))
    simple = set(simple)
    for i, r in enumerate(records):
        if isinstance(r, (bytes, bytearray)):
            out.write(r)
            continue
        ts, iface, data = r
        if i in simple:
            out.write(pcapng_spb(data, little_endian=little_endian))
            continue
        units = tsresol_units(interfaces[iface][1])
        sec, frac = _split_ts(ts, units)
        out.write(pcapng_epb(iface, sec * units + frac, data, little_endian=little_endian))
    return out.getvalue()


def nanosecond_copy(src: bytes, extra) -> bytes:
    """A little-endian microsecond pcap ``src`` as a nanosecond pcap whose record ``i`` (from 0)
    is ``extra(i)`` nanoseconds (0 to 999) later: times a float of epoch seconds cannot hold."""
    (magic,) = struct.unpack_from("<I", src, 0)
    assert magic == 0xA1B2C3D4  # (a little-endian microsecond pcap)
    (_, _, _, _, snaplen, linktype) = struct.unpack_from("<HHiIII", src, 4)
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype)]
    pos, i = 24, 0
    while pos < len(src):
        sec, usec, caplen, orig = struct.unpack_from("<IIII", src, pos)
        data = src[pos + 16: pos + 16 + caplen]
        pos += 16 + caplen
        parts.append(struct.pack("<IIII", sec, usec * 1000 + extra(i), caplen, orig) + data)
        i += 1
    return b"".join(parts)


def nanosecond_captures(src_path: str, directory, extra, editcap: str = "editcap") -> tuple[str, str]:
    """(pcap, pcapng) in ``directory``: :func:`nanosecond_copy` of the capture at ``src_path``, and
    the same as pcapng (``editcap -F pcapng``: an interface with if_tsresol 10^-9)."""
    import os
    import subprocess

    with open(src_path, "rb") as f:
        src = f.read()
    pcap, ng = os.path.join(directory, "ns.pcap"), os.path.join(directory, "ns.pcapng")
    with open(pcap, "wb") as f:
        f.write(nanosecond_copy(src, extra))
    subprocess.run([editcap, "-F", "pcapng", pcap, ng], check=True, capture_output=True)
    return pcap, ng


def gzip_bytes(data: bytes) -> bytes:
    return gzip.compress(data)


# --------------------------------------------------------------------------- conversations
class TcpConversation:
    """Packets of one TCP connection with consistent seq/ack (see the module doc)."""

    def __init__(
        self,
        client=("10.0.0.1", 40000),
        server=("10.0.0.2", 5672),
        *,
        linktype: int = LINKTYPE_ETHERNET,
        t0: float = 1_700_000_000.0,
        dt: float = 0.001,
        client_isn: int = 1000,
        server_isn: int = 5000,
        mss: int = 1460,
        acks: bool = False,
        frame_kw: dict | None = None,
    ):
        self.ends = (tuple(client), tuple(server))
        self.linktype = linktype
        self.t = t0
        self.dt = dt
        self.isn = [client_isn & 0xFFFFFFFF, server_isn & 0xFFFFFFFF]
        self.next_seq = [client_isn & 0xFFFFFFFF, server_isn & 0xFFFFFFFF]
        self.mss = mss
        self.acks = acks
        self.frame_kw = frame_kw or {}
        self.records: list[tuple[float, int, bytes]] = []
        self.segments: list[tuple[int, int, int, int, bytes]] = []
        self._synced = [False, False]

    @property
    def conn_id(self) -> str:
        def ep(a):
            return f"[{a[0]}]:{a[1]}" if ":" in a[0] else f"{a[0]}:{a[1]}"

        return f"{ep(self.ends[0])}-{ep(self.ends[1])}"

    def packet(self, direction: int, flags: int, payload: bytes = b"", seq: int | None = None,
               ack: int | None = None, advance: bool = True) -> bytes:
        """Add one segment from ``direction``; returns its frame bytes."""
        (sip, sp), (dip, dp) = self.ends[direction], self.ends[1 - direction]
        if seq is None:
            seq = self.next_seq[direction]
        if ack is None:
            ack = self.next_seq[1 - direction] if flags & ACK else 0
        pkt = tcp_packet(sip, dip, sp, dp, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF, flags=flags, payload=payload)
        fr = frame(self.linktype, pkt, **self.frame_kw)
        self.records.append((self.t, self.linktype, fr))
        self.segments.append((direction, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, flags, payload))
        self.t += self.dt
        if advance:
            n = len(payload) + (1 if flags & SYN else 0) + (1 if flags & FIN else 0)
            self.next_seq[direction] = (seq + n) & 0xFFFFFFFF
        return fr

    def handshake(self) -> "TcpConversation":
        self.packet(0, SYN)
        self.packet(1, SYN | ACK)
        self.packet(0, ACK)
        return self

    def send(self, direction: int, data: bytes, flags: int = PSH | ACK, mss: int | None = None) -> "TcpConversation":
        mss = mss or self.mss
        for i in range(0, len(data), mss):
            self.packet(direction, flags, data[i : i + mss])
            if self.acks:
                self.packet(1 - direction, ACK)
        return self

    def close(self, initiator: int = 0) -> "TcpConversation":
        self.packet(initiator, FIN | ACK)
        self.packet(1 - initiator, FIN | ACK)
        self.packet(initiator, ACK)
        return self

    def rst(self, direction: int = 0) -> "TcpConversation":
        self.packet(direction, RST | ACK)
        return self

    def pcap(self, **kw) -> bytes:
        return write_pcap(self.records, **kw)

    def pcapng(self, **kw) -> bytes:
        return write_pcapng([(ts, 0, data) for ts, _lt, data in self.records],
                            interfaces=((self.linktype, None),), **kw)

    @classmethod
    def from_exchange(cls, exchange, *, close: bool = True, **kw) -> "TcpConversation":
        conv = cls(**kw)
        conv.handshake()
        for direction, data in exchange:
            conv.send(direction, data)
        if close:
            conv.close()
        return conv


# --------------------------------------------------------------------------- streaming
class PcapWriter:
    """Classic pcap written one record at a time to an open binary file (see the module doc)."""

    def __init__(self, f, linktype: int = LINKTYPE_ETHERNET, *, nano: bool = False, little_endian: bool = True,
                 snaplen: int = 65535):
        self.f = f
        self.linktype = linktype
        self.units = 10**9 if nano else 10**6
        self._ph = pcap.LEPktHdr if little_endian else pcap.PktHdr
        fh = pcap.LEFileHdr if little_endian else pcap.FileHdr
        magic = pcap.TCPDUMP_MAGIC_NANO if nano else pcap.TCPDUMP_MAGIC
        f.write(bytes(fh(magic=magic, snaplen=snaplen, linktype=linktype)))
        self.count = 0

    def write(self, ts, data: bytes) -> None:
        sec, frac = _split_ts(ts, self.units)
        self.f.write(bytes(self._ph(tv_sec=sec, tv_usec=frac, caplen=len(data), len=len(data))))
        self.f.write(data)
        self.count += 1


def read_pcap_records(f):
    """Yield ``(ts, linktype, data)`` from a classic pcap file, ``ts`` as ``(sec, frac)``."""
    r = pcap.Reader(f)
    units = 10**9 if r._divisor == 1e9 else 10**6
    lt = r.datalink()
    for ts, data in r:
        ticks = round(ts * units)
        yield (ticks // units, ticks % units), lt, data


def _ip_layer(pkt):
    return pkt.data if isinstance(pkt, ethernet.Ethernet) else pkt


def _decode_frame(data: bytes, linktype: int):
    if linktype == LINKTYPE_ETHERNET:
        return ethernet.Ethernet(data)
    if linktype in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return ip6.IP6(data) if data[:1] and data[0] >> 4 == 6 else ip.IP(data)
    raise ValueError(f"retarget_tcp: linktype {linktype} not supported")


def retarget_tcp(data: bytes, linktype: int, port_map: dict) -> bytes:
    """The frame with its TCP ports mapped through ``port_map`` and fresh checksums (dpkt)."""
    pkt = _decode_frame(data, linktype)
    net = _ip_layer(pkt)
    seg = getattr(net, "data", None)
    if not isinstance(seg, tcp.TCP):
        return data
    sport, dport = port_map.get(seg.sport, seg.sport), port_map.get(seg.dport, seg.dport)
    if (sport, dport) == (seg.sport, seg.dport):
        return data
    seg.sport, seg.dport = sport, dport
    seg.sum = 0  # dpkt fills a zero TCP checksum when packing the IP layer
    if isinstance(net, ip.IP):
        net.sum = 0  # (for IPv4 only together with a zero header checksum)
    return bytes(pkt)


def _tcp_ports(data: bytes, linktype: int):
    seg = getattr(_ip_layer(_decode_frame(data, linktype)), "data", None)
    return (seg.sport, seg.dport) if isinstance(seg, tcp.TCP) else None


def repeat_pcap(src: str, dst: str, copies: int, *, server_ports=(5672,), port_step: int | None = None,
                gap: float = 1.0) -> dict:
    """Write ``copies`` back-to-back replays of pcap ``src`` on new client ports (see the module doc)."""
    servers = set(server_ports)
    with open(src, "rb") as f:
        r = pcap.Reader(f)
        nano, linktype = r._divisor == 1e9, r.datalink()
    units = 10**9 if nano else 10**6
    first = last = None
    clients = set()
    with open(src, "rb") as f:
        for (sec, frac), lt, data in read_pcap_records(f):
            t = sec * units + frac
            first = t if first is None else first
            last = t
            ports = _tcp_ports(data, lt)
            if ports:
                clients.update(p for p in ports if p not in servers)
    if first is None:
        raise ValueError(f"{src}: no packets")
    if port_step is None:
        port_step = (max(clients) - min(clients) + 1) if clients else 0
    if clients and max(clients) + (copies - 1) * port_step > 0xFFFF:
        raise ValueError(f"{copies} copies of client ports {min(clients)}..{max(clients)} overflow 65535")
    step = last - first + round(gap * units)
    with open(dst, "wb") as out:
        w = PcapWriter(out, linktype, nano=nano)
        for i in range(copies):
            port_map = {p: p + i * port_step for p in clients}
            with open(src, "rb") as f:
                for (sec, frac), lt, data in read_pcap_records(f):
                    t = sec * units + frac + i * step
                    w.write((t // units, t % units), retarget_tcp(data, lt, port_map) if i else data)
    return {"packets": w.count, "copies": copies, "port_step": port_step, "time_step": step / units}


# --------------------------------------------------------------------------- tunnels
# Every frame of a capture wrapped in a tunnel, as a capture on a tunnel endpoint or a mirror port
# holds it: an outer Ethernet and IP header (plausible addresses), then the tunnel's own header
# (laid out from its RFC: VXLAN 7348, Geneve 8926, GRE 2784/2890, MPLS 3032, ERSPAN as in the
# Linux kernel's erspan headers) and the original frame or IP packet.

TUNNEL_KINDS = ("vxlan", "geneve", "gre", "gre_eth", "erspan2", "erspan3", "ipip", "ip6tnl", "mpls", "gre_vxlan")
OUTER_V4 = ("198.51.100.11", "198.51.100.12")
OUTER_V6 = ("2001:db8:100::11", "2001:db8:100::12")
TUNNEL_MAC_A = b"\x02\x00\x5e\x00\x01\x01"
TUNNEL_MAC_B = b"\x02\x00\x5e\x00\x01\x02"


def inner_ethernet(data: bytes, linktype: int) -> bytes:
    """The frame as an Ethernet frame (an IP packet gets an Ethernet header)."""
    return data if linktype == LINKTYPE_ETHERNET else ethernet_frame(inner_ip(data, linktype))


def inner_ip(data: bytes, linktype: int) -> bytes:
    """The IP packet of a frame (Ethernet without VLAN tags, or raw IP)."""
    if linktype == LINKTYPE_ETHERNET:
        if data[12:14] not in (b"\x08\x00", b"\x86\xdd"):
            raise ValueError("inner_ip: an Ethernet frame without IP")
        return data[14:]
    if linktype in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return data
    raise ValueError(f"inner_ip: linktype {linktype} not supported")


def _outer_eth(payload: bytes, ethertype: int) -> bytes:
    return TUNNEL_MAC_B + TUNNEL_MAC_A + struct.pack("!H", ethertype) + payload


def _outer_ip(proto: int, payload: bytes, v6: bool = False, seq: int = 0) -> bytes:
    src, dst = OUTER_V6 if v6 else OUTER_V4
    return _outer_eth(_ip_wrap(src, dst, proto, payload, ident=seq & 0xFFFF),
                      ethernet.ETH_TYPE_IP6 if v6 else ethernet.ETH_TYPE_IP)


def _outer_udp(dport: int, payload: bytes, seq: int) -> bytes:
    # the source port from the inner flow, as VXLAN/Geneve endpoints pick it (RFC 7348 section 5)
    u = udp.UDP(sport=49152 + (sum(payload[26:38]) & 0x3FFF), dport=dport, data=payload)
    u.ulen = len(u)
    return _outer_ip(17, bytes(u), seq=seq)


def _gre(protocol: int, payload: bytes, *, key=None, seq=None, checksum=False) -> bytes:
    flags = (0x8000 if checksum else 0) | (0x2000 if key is not None else 0) | (0x1000 if seq is not None else 0)
    out = struct.pack("!HH", flags, protocol)
    if checksum:
        out += b"\x00\x00\x00\x00"  # (checksum 0 and reserved: tshark does not check it by default)
    if key is not None:
        out += struct.pack("!I", key)
    if seq is not None:
        out += struct.pack("!I", seq & 0xFFFFFFFF)
    return out + payload


def tunnel_frame(kind: str, data: bytes, linktype: int = LINKTYPE_ETHERNET, seq: int = 0) -> bytes:
    """One frame wrapped in the tunnel ``kind`` (one of TUNNEL_KINDS) as an outer Ethernet frame;
    ``seq``: the packet's number (GRE sequence numbers, outer IP ids)."""
    if kind == "vxlan":  # flags I, VNI 100
        return _outer_udp(4789, struct.pack("!II", 0x08000000, 100 << 8) + inner_ethernet(data, linktype), seq)
    if kind == "geneve":  # one 8-byte option (class 0x0102, type 0x80), VNI 200, Ethernet
        option = struct.pack("!HBB", 0x0102, 0x80, 1) + b"\x00\x00\x00\x2a"
        head = struct.pack("!BBHI", len(option) // 4, 0, 0x6558, 200 << 8)
        return _outer_udp(6081, head + option + inner_ethernet(data, linktype), seq)
    if kind == "gre":  # key and sequence number, the IP packet
        ip_bytes = inner_ip(data, linktype)
        return _outer_ip(47, _gre(_ethertype_of(ip_bytes), ip_bytes, key=0x1234, seq=seq), seq=seq)
    if kind == "gre_eth":  # transparent Ethernet bridging, checksum present and key
        return _outer_ip(47, _gre(0x6558, inner_ethernet(data, linktype), key=7, checksum=True), seq=seq)
    if kind == "erspan2":  # version 1, VLAN 0, session 5, index 0
        head = struct.pack("!II", (1 << 28) | 5, 0)
        return _outer_ip(47, _gre(0x88BE, head + inner_ethernet(data, linktype), seq=seq), seq=seq)
    if kind == "erspan3":  # version 2, session 6, timestamp, hardware id 1, Ethernet frames
        head = struct.pack("!IIHH", (2 << 28) | 6, seq * 100, 0, 1 << 4)
        return _outer_ip(47, _gre(0x22EB, head + inner_ethernet(data, linktype), seq=seq), seq=seq)
    if kind == "ipip":  # IPv4 in IPv4 (4) or IPv6 in IPv4 (41)
        ip_bytes = inner_ip(data, linktype)
        return _outer_ip(41 if ip_bytes[0] >> 4 == 6 else 4, ip_bytes, seq=seq)
    if kind == "ip6tnl":  # IPv4 or IPv6 in IPv6
        ip_bytes = inner_ip(data, linktype)
        return _outer_ip(41 if ip_bytes[0] >> 4 == 6 else 4, ip_bytes, v6=True)
    if kind == "mpls":  # two labels (16, then 1000 with the bottom-of-stack bit), TTL 64
        labels = struct.pack("!II", (16 << 12) | 64, (1000 << 12) | 0x100 | 64)
        return _outer_eth(labels + inner_ip(data, linktype), 0x8847)
    if kind == "gre_vxlan":  # VXLAN inside GRE: two tunnels deep
        inner = tunnel_frame("vxlan", data, linktype, seq)
        return _outer_ip(47, _gre(0x6558, inner, key=9), seq=seq)
    raise ValueError(f"unknown tunnel kind {kind!r}")


def tunnel_pcap(src: str, dst: str, kind: str) -> int:
    """Pcap ``src`` with every frame wrapped in the tunnel ``kind`` (:func:`tunnel_frame`), written
    to ``dst`` (Ethernet link type, the source's timestamps and resolution); returns the count."""
    with open(src, "rb") as f:
        r = pcap.Reader(f)
        nano = r._divisor == 1e9
    with open(src, "rb") as f, open(dst, "wb") as out:
        w = PcapWriter(out, LINKTYPE_ETHERNET, nano=nano, snaplen=262144)
        for i, (ts, lt, data) in enumerate(read_pcap_records(f)):
            w.write(ts, tunnel_frame(kind, data, lt, seq=i + 1))
    return w.count


# --------------------------------------------------------------------------- clock steps
def stepped_capture(src: str, shift: str, out: str) -> int:
    """``src`` split at its middle packet, the second half shifted by ``shift`` seconds (editcap's
    ``-t``: a clock step when negative), written to ``out`` (pcap) by Wireshark's own editcap and
    mergecap; returns the middle packet's number (1-based: the first of the shifted half)."""
    import os
    import subprocess

    with open(src, "rb") as f:
        n = sum(1 for _ in pcap.Reader(f))
    mid = (n + 1) // 2
    a, b, b2 = out + ".a", out + ".b", out + ".b2"
    subprocess.run(["editcap", "-F", "pcap", "-r", src, a, f"1-{mid - 1}"], check=True)
    subprocess.run(["editcap", "-F", "pcap", "-r", src, b, f"{mid}-{n}"], check=True)
    subprocess.run(["editcap", "-F", "pcap", "-t", shift, b, b2], check=True)
    subprocess.run(["mergecap", "-F", "pcap", "-a", "-w", out, a, b2], check=True)
    for f in (a, b, b2):
        os.remove(f)
    return mid
