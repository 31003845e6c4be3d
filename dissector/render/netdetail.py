"""The network layers of ``frames -V`` (Ethernet II, IPv4 / IPv6, TCP) decoded with dpkt, in
the words and layout of tshark's ``-V`` tree (bit patterns, DSCP / ECN names, TCP flags and
options), from a packet's bytes only (sans-IO).

Only the detail view uses this: the hot path decodes packets with ``struct``
(:mod:`amqp_dissect.capture.netparse`).  :func:`packet_layers` starts from netparse's own
description (``describe_packet``: the Frame layer, every link type, malformed packets) and
puts dpkt's Ethernet II, IP and TCP layers in place of netparse's where dpkt decodes them
(a truncated or malformed header, IP options dpkt refuses ...: netparse's stay).  Values
tshark computes from conversation state (relative sequence numbers, bracketed analysis lines)
are not shown.
"""

from __future__ import annotations

import struct

from amqp_dissect.capture.netparse import describe_packet, frame_layer

LINKTYPE_ETHERNET = 1

# IP payload offset per link type of the frames netparse reads (Ethernet: 14, or after VLAN tags)
_IP_OFFSET = {0: 4, 108: 4, 101: 0, 12: 0, 14: 0, 228: 0, 229: 0, 113: 16, 276: 20}

_DSCP = {  # codepoint: (tshark's short name, long name)
    0: ("CS0", "Default"), 1: ("LE", "Lower Effort"),
    8: ("CS1", "Class Selector 1"), 16: ("CS2", "Class Selector 2"), 24: ("CS3", "Class Selector 3"),
    32: ("CS4", "Class Selector 4"), 40: ("CS5", "Class Selector 5"), 48: ("CS6", "Class Selector 6"),
    56: ("CS7", "Class Selector 7"),
    10: ("AF11", "Assured Forwarding 11"), 12: ("AF12", "Assured Forwarding 12"), 14: ("AF13", "Assured Forwarding 13"),
    18: ("AF21", "Assured Forwarding 21"), 20: ("AF22", "Assured Forwarding 22"), 22: ("AF23", "Assured Forwarding 23"),
    26: ("AF31", "Assured Forwarding 31"), 28: ("AF32", "Assured Forwarding 32"), 30: ("AF33", "Assured Forwarding 33"),
    34: ("AF41", "Assured Forwarding 41"), 36: ("AF42", "Assured Forwarding 42"), 38: ("AF43", "Assured Forwarding 43"),
    44: ("VOICE-ADMIT", "Voice Admit"), 46: ("EF PHB", "Expedited Forwarding"),
}
_ECN = {0: ("Not-ECT", "Not ECN-Capable Transport"), 1: ("ECT(1)", "ECN-Capable Transport codepoint '01'"),
        2: ("ECT(0)", "ECN-Capable Transport codepoint '10'"), 3: ("CE", "Congestion Experienced")}
_IP_PROTOCOLS = {6: "TCP", 17: "UDP", 1: "ICMP", 58: "ICMPv6", 132: "SCTP"}
_ETHERTYPES = {0x0800: "IPv4", 0x86DD: "IPv6", 0x0806: "ARP", 0x8100: "802.1Q Virtual LAN"}
_TCP_FLAGS = (  # (bit, the Flags line's name, the sub-line's name)
    (0x800, None, "Reserved"), (0x100, "AE", "Accurate ECN"), (0x080, "CWR", "Congestion Window Reduced"),
    (0x040, "ECE", "ECN-Echo"), (0x020, "URG", "Urgent"), (0x010, "ACK", "Acknowledgment"),
    (0x008, "PSH", "Push"), (0x004, "RST", "Reset"), (0x002, "SYN", "Syn"), (0x001, "FIN", "Fin"),
)
_FLAG_ORDER = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR", "AE")


def bits(value: int, mask: int, width: int) -> str:
    """tshark's bit pattern of a field: the ``width`` bits of its storage, the ``mask`` ones
    shown (``0100 ....``), groups of four."""
    out = []
    for i in range(width - 1, -1, -1):
        b = 1 << i
        out.append(("1" if value & b else "0") if mask & b else ".")
        if i and i % 4 == 0:
            out.append(" ")
    return "".join(out)


def _set(flag: bool) -> str:
    return "Set" if flag else "Not set"


def _mac(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


def _ethertype(t: int) -> str:
    return f"{_ETHERTYPES.get(t, 'Unknown')} (0x{t:04x})"


def _ds_lines(tc: int, width: int, shift: int) -> tuple[str, list[str]]:
    """The DSCP / ECN summary and its two sub-lines (IPv4: the TOS byte; IPv6: within 32 bits)."""
    dscp, ecn = tc >> 2, tc & 3
    short, long = _DSCP.get(dscp, ("Unknown", "Unknown"))
    summary = f"(DSCP: {short}, ECN: {_ECN[ecn][0]})"
    return summary, [
        f"    {bits(tc << shift, 0xFC << shift, width)} = Differentiated Services Codepoint: {long} ({dscp})",
        f"    {bits(tc << shift, 0x03 << shift, width)} = Explicit Congestion Notification: {_ECN[ecn][1]} ({ecn})",
    ]


def ethernet_layer(eth) -> tuple[str, list[str]]:
    dst, src = bytes(eth.dst), bytes(eth.src)
    lines = []
    for name, addr in (("Destination", dst), ("Source", src)):
        lg, ig = addr[0] & 2, addr[0] & 1
        lines += [
            f"{name}: {_mac(addr)}",
            f"    Address: {_mac(addr)}",
            f"    {bits(addr[0] << 16, 0x020000, 24)} = LG bit: "
            + ("Locally administered address (this is NOT the factory default)" if lg
               else "Globally unique address (factory default)"),
            f"    {bits(addr[0] << 16, 0x010000, 24)} = IG bit: "
            + ("Group address (multicast/broadcast)" if ig else "Individual address (unicast)"),
        ]
    lines.append(f"Type: {_ethertype(eth.type)}")
    return f"Ethernet II, Src: {_mac(src)}, Dst: {_mac(dst)}", lines


def ipv4_layer(ip) -> tuple[str, list[str]]:
    import socket

    src, dst = socket.inet_ntoa(ip.src), socket.inet_ntoa(ip.dst)
    first = (ip.v << 4) | ip.hl
    summary, ds = _ds_lines(ip.tos, 8, 0)
    flags = (ip.rf << 2) | (ip.df << 1) | ip.mf
    names = [n for bit, n in ((2, "Reserved"), (1, "Don't fragment"), (0, "More fragments")) if flags >> bit & 1]
    frag16 = (flags << 13) | ip.offset
    proto = ip.p
    return f"Internet Protocol Version 4, Src: {src}, Dst: {dst}", [
        f"{bits(first, 0xF0, 8)} = Version: {ip.v}",
        f"{bits(first, 0x0F, 8)} = Header Length: {ip.hl * 4} bytes ({ip.hl})",
        f"Differentiated Services Field: 0x{ip.tos:02x} {summary}",
        *ds,
        f"Total Length: {ip.len}",
        f"Identification: 0x{ip.id:04x} ({ip.id})",
        f"{bits(flags << 5, 0xE0, 8)} = Flags: 0x{flags:x}" + (f", {', '.join(names)}" if names else ""),
        f"    {bits(flags << 5, 0x80, 8)} = Reserved bit: {_set(ip.rf)}",
        f"    {bits(flags << 5, 0x40, 8)} = Don't fragment: {_set(ip.df)}",
        f"    {bits(flags << 5, 0x20, 8)} = More fragments: {_set(ip.mf)}",
        f"{bits(frag16, 0x1FFF, 16)} = Fragment Offset: {ip.offset * 8}",
        f"Time to Live: {ip.ttl}",
        f"Protocol: {_IP_PROTOCOLS.get(proto, 'Unknown')} ({proto})",
        f"Header Checksum: 0x{ip.sum:04x} [validation disabled]",
        f"Source Address: {src}",
        f"Destination Address: {dst}",
    ]


def ipv6_layer(ip6) -> tuple[str, list[str]]:
    import socket

    src, dst = socket.inet_ntop(socket.AF_INET6, ip6.src), socket.inet_ntop(socket.AF_INET6, ip6.dst)
    word = (ip6.v << 28) | (ip6.fc << 20) | ip6.flow
    summary, ds = _ds_lines(ip6.fc, 32, 20)
    nxt = ip6.nxt
    return f"Internet Protocol Version 6, Src: {src}, Dst: {dst}", [
        f"{bits(word >> 24, 0xF0, 8)} = Version: {ip6.v}",
        f"{bits(word, 0x0FF00000, 32)} = Traffic Class: 0x{ip6.fc:02x} {summary}",
        *ds,
        f"{bits(word & 0xFFFFFF, 0x0FFFFF, 24)} = Flow Label: 0x{ip6.flow:05x}",
        f"Payload Length: {ip6.plen}",
        f"Next Header: {_IP_PROTOCOLS.get(nxt, 'Unknown')} ({nxt})",
        f"Hop Limit: {ip6.hlim}",
        f"Source Address: {src}",
        f"Destination Address: {dst}",
    ]


_OPTION_NAMES = {2: "Maximum segment size", 3: "Window scale", 4: "SACK permitted", 5: "SACK", 8: "Timestamps",
                 19: "TCP MD5 signature", 28: "User Timeout", 29: "TCP Authentication Option", 30: "Multipath TCP",
                 34: "TCP Fast Open Cookie"}


def _walk_options(opts: bytes, out: list[str]):
    """Yield (kind, data) of each well-formed TCP option.  An option whose length byte is missing, below
    2 or past the end of the options ends the walk, with tshark's note appended to ``out`` (dpkt's
    ``parse_opts`` yields None for the first and cuts the data short for the others)."""
    i, end = 0, len(opts)
    while i < end:
        kind = opts[i]
        if kind <= 1:  # end of options list, no-operation: one byte
            yield kind, b""
            i += 1
            continue
        name = _OPTION_NAMES.get(kind, f"Unknown ({kind})")
        if i + 1 >= end:
            problem = f"{name} (length byte past end of options)"
        elif opts[i + 1] < 2:
            problem = f"{name} (with too-short option length = {opts[i + 1]} bytes)"
        elif i + opts[i + 1] > end:
            problem = f"{name} (option length = {opts[i + 1]} bytes says option goes past end of options)"
        else:
            yield kind, bytes(opts[i + 2:i + opts[i + 1]])
            i += opts[i + 1]
            continue
        out += [f"    {problem}", f"        [Expert Info (Note/Sequence): {problem}]"]
        return


def _option_lines(opts: bytes) -> list[str]:
    """The Options line (its size and the names of the options) and the lines of each option, in
    tshark's words."""
    import dpkt

    names: list[str] = []
    out: list[str] = []
    for kind, data in _walk_options(opts, out):
        n = len(data) + 2
        if kind == dpkt.tcp.TCP_OPT_NOP:
            names.append("No-Operation (NOP)")
            out += ["    TCP Option - No-Operation (NOP)", "        Kind: No-Operation (1)"]
        elif kind == dpkt.tcp.TCP_OPT_EOL:
            names.append("End of Option List (EOL)")
            out += ["    TCP Option - End of Option List (EOL)", "        Kind: End of Option List (0)"]
        elif kind == dpkt.tcp.TCP_OPT_MSS and len(data) == 2:
            (mss,) = struct.unpack("!H", data)
            names.append("Maximum segment size")
            out += [f"    TCP Option - Maximum segment size: {mss} bytes", "        Kind: Maximum Segment Size (2)",
                    f"        Length: {n}", f"        MSS Value: {mss}"]
        elif kind == dpkt.tcp.TCP_OPT_WSCALE and len(data) == 1:
            shift = data[0]
            names.append("Window scale")
            out += [f"    TCP Option - Window scale: {shift} (multiply by {1 << min(shift, 14)})",
                    "        Kind: Window Scale (3)", f"        Length: {n}", f"        Shift count: {shift}"]
        elif kind == dpkt.tcp.TCP_OPT_SACKOK and not data:
            names.append("SACK permitted")
            out += ["    TCP Option - SACK permitted", "        Kind: SACK Permitted (4)", f"        Length: {n}"]
        elif kind == dpkt.tcp.TCP_OPT_TIMESTAMP and len(data) == 8:
            tsval, tsecr = struct.unpack("!II", data)
            names.append("Timestamps")
            out += [f"    TCP Option - Timestamps: TSval {tsval}, TSecr {tsecr}", "        Kind: Time Stamp Option (8)",
                    f"        Length: {n}", f"        Timestamp value: {tsval}",
                    f"        Timestamp echo reply: {tsecr}"]
        elif kind == dpkt.tcp.TCP_OPT_SACK and data and len(data) % 8 == 0:
            # (tshark shows the edges relative to the connection's first sequence number: raw here)
            edges = struct.unpack(f"!{len(data) // 4}I", data)
            names.append("SACK")
            out += ["    TCP Option - SACK " + " ".join(f"{a}-{b}" for a, b in zip(edges[::2], edges[1::2]))
                    + " (raw)", "        Kind: SACK (5)", f"        Length: {n}"]
        else:
            names.append(f"Unknown ({kind})")
            out += [f"    TCP Option - Unknown ({kind})", f"        Length: {n}"]
    return [f"Options: ({len(opts)} bytes)" + "".join(", " + x for x in names)] + out


def tcp_layer(tcp, payload: int) -> tuple[str, list[str]]:
    flags = tcp._off_flags & 0x0FFF  # (dpkt's ``flags`` is the low 8 bits; AE and the reserved bits are above)
    shown = [name for bit, name, _ in _TCP_FLAGS if name and flags & bit]
    shown.sort(key=_FLAG_ORDER.index)
    lines = [
        f"Source Port: {tcp.sport}",
        f"Destination Port: {tcp.dport}",
        f"[TCP Segment Len: {payload}]",
        f"Sequence Number (raw): {tcp.seq}",
        f"Acknowledgment number (raw): {tcp.ack}",
        f"{bits(tcp.off << 4, 0xF0, 8)} = Header Length: {tcp.off * 4} bytes ({tcp.off})",
        f"Flags: 0x{flags:03x}" + (f" ({', '.join(shown)})" if shown else ""),
    ]
    for bit, _name, long in _TCP_FLAGS:
        mask = 0xE00 if bit == 0x800 else bit
        lines.append(f"    {bits(flags, mask, 12)} = {long}: {_set(flags & mask)}")
    lines += [f"Window: {tcp.win}", f"Checksum: 0x{tcp.sum:04x} [unverified]", f"Urgent Pointer: {tcp.urp}"]
    if tcp.opts:
        lines += _option_lines(bytes(tcp.opts))
    if payload:
        lines.append(f"TCP payload ({payload} byte{'s' if payload != 1 else ''})")
    return (f"Transmission Control Protocol, Src Port: {tcp.sport}, Dst Port: {tcp.dport}, "
            f"Seq: {tcp.seq} (raw), Ack: {tcp.ack} (raw), Len: {payload}"), lines


# --------------------------------------------------------------------------- per packet
#
# dpkt decodes each new header shape (the bytes that stay the same along a flow: addresses, ports,
# TOS, TTL, flags ...) into its lines once; a packet of a known shape gets the cached lines with
# its own numbers (lengths, identification, sequence numbers, checksums) read with struct, and its
# TCP options decoded by dpkt.  The detail view of a large capture so costs a few microseconds a
# packet more than netparse's plainer one.

_SHAPES: dict = {}
_MAX_SHAPES = 4096
_V4 = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIHHHH")


def _shape(key, build):
    got = _SHAPES.get(key)
    if got is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        got = _SHAPES[key] = build()
    return got


def _template(title_lines: tuple[str, list[str]], *prefixes: str) -> tuple[str, list, tuple[int, ...]]:
    """(title, lines, the index of the line starting with each prefix): the varying lines' places."""
    title, lines = title_lines
    where = []
    for p in prefixes:
        where.append(next(i for i, x in enumerate(lines) if x.startswith(p)))
    return title, lines, tuple(where)


def _ipv4_shape(data: bytes, off: int, hl: int):
    import dpkt

    return _template(ipv4_layer(dpkt.ip.IP(data[off:off + hl])), "Total Length:", "Identification:",
                     "Header Checksum:")


def _ipv6_shape(data: bytes, off: int):
    import dpkt

    return _template(ipv6_layer(dpkt.ip6.IP6(data[off:off + 40])), "Payload Length:")


def _tcp_shape(data: bytes, t: int):
    import dpkt

    title, lines = tcp_layer(dpkt.tcp.TCP(data[t:t + 20]), 0)  # (the options: per packet)
    cut = next(i for i, x in enumerate(lines) if x.startswith("Urgent Pointer:"))
    lines = lines[:cut]
    where = tuple(next(i for i, x in enumerate(lines) if x.startswith(p))
                  for p in ("[TCP Segment Len:", "Sequence Number (raw):", "Acknowledgment number (raw):", "Window:",
                            "Checksum:"))
    return lines, where


_OPTIONS: dict = {}


def _options(opts: bytes) -> list[str]:
    got = _OPTIONS.get(opts)
    if got is None:
        got = _option_lines(opts)
        if b"\x08\x0a" not in opts:  # (timestamps change with every packet: not kept)
            if len(_OPTIONS) >= _MAX_SHAPES:
                _OPTIONS.clear()
            _OPTIONS[opts] = got
    return got


def _net_layers(data: bytes, off: int) -> list | None:
    """The IP and TCP layers of the IP packet at ``data[off:]`` (None when it is not a whole,
    unfragmented IPv4 / IPv6 header followed by a whole TCP header: netparse describes it)."""
    n = len(data)
    if n < off + 20:
        return None
    version = data[off] >> 4
    if version == 4:
        vhl, _tos, total, ident, frag, _ttl, proto, csum, _s, _d = _V4.unpack_from(data, off)
        hl = (vhl & 0x0F) * 4
        if proto != 6 or frag & 0x3FFF or hl < 20 or n < off + hl + 20:
            return None
        title, lines, (i_len, i_id, i_sum) = _shape(
            (4, data[off:off + 2], data[off + 6:off + 10], data[off + 12:off + 20], hl),
            lambda: _ipv4_shape(data, off, hl))
        lines = lines[:]
        lines[i_len] = f"Total Length: {total}"
        lines[i_id] = f"Identification: 0x{ident:04x} ({ident})"
        lines[i_sum] = f"Header Checksum: 0x{csum:04x} [validation disabled]"
        t = off + hl
        end = off + total
    elif version == 6:
        if n < off + 60 or data[off + 6] != 6:
            return None
        (plen,) = struct.unpack_from("!H", data, off + 4)
        title, lines, (i_len,) = _shape((6, data[off:off + 4], data[off + 6:off + 40]),
                                        lambda: _ipv6_shape(data, off))
        lines = lines[:]
        lines[i_len] = f"Payload Length: {plen}"
        t = off + 40
        end = t + plen
    else:
        return None
    sport, dport, seq, ack, offflags, win, tsum, urp = _TCP.unpack_from(data, t)
    thl = (offflags >> 12) * 4
    if thl < 20 or n < t + thl:
        return None
    tlines, (i_len, i_seq, i_ack, i_win, i_sum) = _shape((data[t:t + 4], offflags), lambda: _tcp_shape(data, t))
    payload = max(min(end, n) - t - thl, 0)
    tlines = tlines[:]
    tlines[i_len] = f"[TCP Segment Len: {payload}]"
    tlines[i_seq] = f"Sequence Number (raw): {seq}"
    tlines[i_ack] = f"Acknowledgment number (raw): {ack}"
    tlines[i_win] = f"Window: {win}"
    tlines[i_sum] = f"Checksum: 0x{tsum:04x} [unverified]"
    tlines.append(f"Urgent Pointer: {urp}")
    if thl > 20:
        tlines += _options(bytes(data[t + 20:t + thl]))
    if payload:
        tlines.append(f"TCP payload ({payload} byte{'s' if payload != 1 else ''})")
    ttitle = (f"Transmission Control Protocol, Src Port: {sport}, Dst Port: {dport}, "
              f"Seq: {seq} (raw), Ack: {ack} (raw), Len: {payload}")
    return [(title, lines), (ttitle, tlines)]


def _ethernet(data: bytes):
    import dpkt

    return _shape(data[:14], lambda: ethernet_layer(dpkt.ethernet.Ethernet(bytes(data[:14]))))


def packet_layers(record) -> list[tuple[str, list[str]]]:
    """(title, lines) per layer of ``record`` for ``frames -V``: Frame, then Ethernet II / IP /
    TCP in tshark's words (dpkt), or netparse's description (other link layers, other
    protocols, fragments, truncated headers) with dpkt's IP / TCP layers in place of its own
    where they decode."""
    data = record.data
    lt = record.linktype
    try:
        if lt == LINKTYPE_ETHERNET:
            if len(data) >= 14 and data[12:14] in (b"\x08\x00", b"\x86\xdd"):
                net = _net_layers(data, 14)
                if net is not None:
                    return [frame_layer(record), _ethernet(data)] + net
        elif lt in _IP_OFFSET:
            net = _net_layers(data, _IP_OFFSET[lt])
            if net is not None:
                layers = describe_packet(record)
                for title, lines in net:
                    head = title.split(",", 1)[0]
                    for i, (t, _) in enumerate(layers):
                        if t.split(",", 1)[0] == head:
                            layers[i] = (title, lines)
                            break
                return layers
    except Exception as e:  # a header dpkt refuses: netparse says what it can (anything else is a bug)
        import dpkt

        if not isinstance(e, (dpkt.Error, struct.error, ValueError, IndexError, StopIteration)):
            raise
    return describe_packet(record)
