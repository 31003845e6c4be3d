"""Captures of tunnelled traffic (issue 39, item 4): every sample capture, each packet wrapped in
a tunnel (four samples in every kind, the others in one kind each, see PAIRS), of the tunnels tshark
decodes by default (tests/support/pcapbuild.py ``tunnel_pcap``: VXLAN, Geneve,
GRE with key / sequence number / checksum, GRE transparent Ethernet bridging, ERSPAN II and III,
IPv4 / IPv6 in IPv4 and in IPv6, an MPLS label stack, VXLAN inside GRE).

Oracles we did not write: the plain capture's own report and tables (the tunnel changes nothing
but the file name and its bytes), and tshark, which decodes the same tunnels by itself and must
count the same AMQP frames per packet in the tunnelled capture as in the plain one, and as ours.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

import amqp_dissect
from amqp_dissect.capture.netparse import (MAX_TUNNEL_DEPTH, MalformedPacket, UnreadTunnel, describe_packet,
                                            parse_segment)
from amqp_dissect.cli.main import main
from amqp_dissect.events import CaptureRecord

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
import pcapbuild as pb  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap"))
                 + glob.glob(os.path.join(ROOT, "samples", "messages", "*.pcap"))
                 + glob.glob(os.path.join(ROOT, "samples", "loss", "*.pcap")))
NAMES = [os.path.splitext(os.path.relpath(p, os.path.join(ROOT, "samples")))[0] for p in SAMPLES]
KINDS = pb.TUNNEL_KINDS
# every tunnel kind on the samples whose shapes differ most (an ordinary exchange, IPv6 inside, gaps,
# a message over many segments); every other sample in one kind, the kinds taken in turn: the
# tunnel's parsing does not depend on what the inner stream carries, so the full product (230 pairs,
# minutes of every CI pass) would test the same code again
EVERY_KIND = ("outcomes", "ipv6", "loss/kernel_loss", "large_message")
PAIRS = [(name, kind) for name in EVERY_KIND for kind in KINDS] + [
    (name, KINDS[i % len(KINDS)]) for i, name in enumerate(n for n in NAMES if n not in EVERY_KIND)]
PAIR_IDS = [f"{name}-{kind}" for name, kind in PAIRS]
TABLES = ("deliveries", "links", "violations", "errors", "connections", "sessions")
needs_tshark = pytest.mark.skipif(not shutil.which("tshark"), reason="tshark is not installed")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("tunnels")


def _sample(name: str) -> str:
    return os.path.join(ROOT, "samples", f"{name}.pcap")


def _tunnelled(folder, name: str, kind: str) -> str:
    path = folder / f"{name.replace('/', '_')}.{kind}.pcap"
    if not path.exists():
        pb.tunnel_pcap(_sample(name), str(path), kind)
    return str(path)


_PLAIN: dict = {}


def _plain(name: str, what: str, make):
    key = (name, what)
    if key not in _PLAIN:
        _PLAIN[key] = make(_sample(name))
    return _PLAIN[key]


def _report(path: str, out, *extra) -> dict:
    assert main(["report", path, "-T", "json", "-o", str(out), *extra]) == 0
    with open(out) as f:
        rep = json.load(f)
    cap = rep.pop("capture")  # what the set-up changes: the file and its bytes
    rep["capture_rest"] = {k: v for k, v in cap.items() if k not in ("files", "bytes")}
    return rep


@pytest.mark.parametrize("name,kind", PAIRS, ids=PAIR_IDS)
def test_tunnelled_capture_gives_the_plain_captures_report_and_tables(name, kind, folder, tmp_path):
    path = _tunnelled(folder, name, kind)
    plain = _plain(name, "tables", amqp_dissect.analyze)
    tunnelled = amqp_dissect.analyze(path)
    assert len(plain["connections"]) > 0
    for table in TABLES:
        assert tunnelled[table].equals(plain[table]), table
    plain_report = _plain(name, "report", lambda p: _report(p, tmp_path / "plain.json"))
    assert _report(path, tmp_path / "tunnelled.json") == plain_report


@pytest.mark.parametrize("kind", KINDS)
def test_tunnelled_capture_with_two_workers_gives_the_plain_report(kind, folder, tmp_path):
    for name in ("outcomes", "messages/topic_fanout", "loss/kernel_loss"):
        plain = _plain(name, "report -j 2", lambda p: _report(p, tmp_path / "plain.json", "-j", "2"))
        assert _report(_tunnelled(folder, name, kind), tmp_path / "j2.json", "-j", "2") == plain, name


def _tshark_frames(path: str) -> Counter:
    """AMQP frames (protocol headers included) per packet number, as tshark decodes them."""
    out = subprocess.run(["tshark", "-n", "-r", path, "-Y", "amqp", "-T", "fields", "-E", "occurrence=a",
                          "-e", "frame.number", "-e", "amqp.length", "-e", "amqp.init.protocol"],
                         capture_output=True, text=True, check=True).stdout
    frames: Counter = Counter()
    for line in out.splitlines():
        number, lengths, headers = (line.split("\t") + ["", ""])[:3]
        frames[int(number)] += len([x for x in lengths.split(",") if x]) + len([x for x in headers.split(",") if x])
    return frames


def _our_frames(path: str, capsys) -> Counter:
    capsys.readouterr()
    assert main(["frames", "-T", "fields", "-e", "frame.number", path]) == 0
    return Counter(int(x) for x in capsys.readouterr().out.split())


@needs_tshark
@pytest.mark.parametrize("name,kind", PAIRS, ids=PAIR_IDS)
def test_tshark_counts_the_same_amqp_frames_in_the_tunnelled_capture(name, kind, folder, capsys):
    path = _tunnelled(folder, name, kind)
    theirs = _tshark_frames(path)
    ours = _our_frames(path, capsys)
    plain_theirs = _plain(name, "tshark", _tshark_frames)
    assert theirs == plain_theirs  # tshark reads the tunnel: the writer wraps what it should
    assert sum(theirs.values()) > 0
    assert ours == _our_frames(_sample(name), capsys)
    if plain_theirs == _our_frames(_sample(name), capsys):  # (not the loss capture: tshark and we differ on gaps)
        assert ours == theirs


# --------------------------------------------------------------------------- the parser itself


def _tcp_frame():
    return pb.ethernet_frame(pb.tcp_packet("10.1.0.1", "10.1.0.2", 40000, 5672, seq=7, payload=b"AMQP\x00\x01\x00\x00"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_tunnel_kind_gives_the_inner_segment(kind):
    plain = parse_segment(1, _tcp_frame())
    seg = parse_segment(1, pb.tunnel_frame(kind, _tcp_frame(), seq=3))
    assert seg == plain and seg.src_ip == "10.1.0.1" and seg.payload == b"AMQP\x00\x01\x00\x00"


def test_ipv6_inner_packet_in_ipv4_and_in_ipv6():
    frame = pb.ethernet_frame(pb.tcp_packet("fd00::1", "fd00::2", 40000, 5672, payload=b"x"))
    for kind in ("ipip", "ip6tnl", "gre", "mpls"):
        assert parse_segment(1, pb.tunnel_frame(kind, frame)) == parse_segment(1, frame), kind


def _nested(depth: int) -> bytes:
    frame = _tcp_frame()
    for _ in range(depth):
        frame = pb.tunnel_frame("gre_eth", frame)
    return frame


def test_nesting_is_bounded_deeper_is_a_note_not_a_loop():
    assert parse_segment(1, _nested(MAX_TUNNEL_DEPTH)).dport == 5672
    with pytest.raises(MalformedPacket, match="nested more than"):
        parse_segment(1, _nested(MAX_TUNNEL_DEPTH + 1))
    layers = describe_packet(CaptureRecord(1, 0, 1, _nested(MAX_TUNNEL_DEPTH + 1), 0, 0))
    assert layers[-1][0].startswith("[Malformed Packet: tunnels nested more than")


def test_truncated_tunnel_headers_are_malformed_packets():
    frame = pb.tunnel_frame("gre", _tcp_frame())
    with pytest.raises(MalformedPacket):
        parse_segment(1, frame[:14 + 20 + 6])  # GRE header with key and sequence number, cut
    mpls = pb.tunnel_frame("mpls", _tcp_frame())
    with pytest.raises(MalformedPacket):
        parse_segment(1, mpls[:16])


def test_udp_on_other_ports_and_pptp_gre_are_not_tunnels():
    inner = _tcp_frame()
    assert parse_segment(1, pb.ethernet_frame(pb.udp_packet("10.0.0.1", "10.0.0.2", 5000, 53, inner))) is None
    gre_v1 = b"\x30\x01\x88\x0b" + b"\x00" * 8 + inner  # enhanced GRE (PPTP, version 1)
    with pytest.raises(UnreadTunnel, match="GRE version 1"):
        parse_segment(1, pb._outer_ip(47, gre_v1))


def test_first_fragment_of_a_tunnel_packet_is_an_ip_fragment_note():
    from amqp_dissect.capture.netparse import IPFragment

    gre = pb._gre(0x0800, pb.tcp_packet("10.1.0.1", "10.1.0.2", 40000, 5672, payload=b"y" * 40))
    first = pb.ethernet_frame(pb._ip_wrap(pb.OUTER_V4[0], pb.OUTER_V4[1], 47, gre, frag=0x2000))
    with pytest.raises(IPFragment, match="tunnel"):
        parse_segment(1, first)
    later = pb.ethernet_frame(pb._ip_wrap(pb.OUTER_V4[0], pb.OUTER_V4[1], 47, gre, frag=0x0005))
    assert parse_segment(1, later) is None


# --------------------------------------------------------------------------- -V: the tunnel layers


_TITLES = {  # the tunnel layers' titles as tshark 4.0 names them, in order
    "vxlan": ["User Datagram Protocol", "Virtual eXtensible Local Area Network", "Ethernet II"],
    "geneve": ["User Datagram Protocol", "Generic Network Virtualization Encapsulation", "Ethernet II"],
    "gre": ["Generic Routing Encapsulation (IP)", "Internet Protocol Version 4"],
    "gre_eth": ["Generic Routing Encapsulation (Transparent Ethernet bridging)", "Ethernet II"],
    "erspan2": ["Generic Routing Encapsulation (ERSPAN)", "Encapsulated Remote Switch Packet ANalysis Type II",
                "Ethernet II"],
    "erspan3": ["Generic Routing Encapsulation (ERSPAN III)", "Encapsulated Remote Switch Packet ANalysis Type III",
                "Ethernet II"],
    "ipip": ["Internet Protocol Version 4", "Internet Protocol Version 4"],
    "ip6tnl": ["Internet Protocol Version 6", "Internet Protocol Version 4"],
    "mpls": ["MultiProtocol Label Switching Header", "MultiProtocol Label Switching Header",
             "Internet Protocol Version 4"],
    "gre_vxlan": ["Generic Routing Encapsulation (Transparent Ethernet bridging)", "Ethernet II",
                  "Internet Protocol Version 4", "User Datagram Protocol", "Virtual eXtensible Local Area Network"],
}


def _tshark_titles(path: str) -> list[str]:
    out = subprocess.run(["tshark", "-n", "-r", path, "-c", "1", "-V"], capture_output=True, text=True,
                         check=True).stdout
    return [line.split(",")[0] for line in out.splitlines() if line[:1].isupper()]


@needs_tshark
@pytest.mark.parametrize("kind", KINDS)
def test_detail_view_shows_the_tunnel_layers_as_tshark(kind, folder):
    path = _tunnelled(folder, "outcomes", kind)
    with open(path, "rb") as f:
        record = next(iter(amqp_dissect.capture.pcap.open_capture(f)))
    ours = [t.split(",")[0] for t, _ in describe_packet(record)]
    assert ours == _tshark_titles(path)  # the first packet (a SYN): every layer, tshark's name, tshark's order
    rest = iter(ours)
    assert all(any(title == t for t in rest) for title in _TITLES[kind]), ours


# --------------------------------------------------------------------------- why nothing was decoded


def _wrapped(path: str, wrap) -> None:
    """The outcomes sample with every packet's IP packet wrapped by ``wrap(ip_bytes, i)`` (an outer frame)."""
    with open(_sample("outcomes"), "rb") as f, open(path, "wb") as out:
        w = pb.PcapWriter(out)
        for i, (ts, lt, data) in enumerate(pb.read_pcap_records(f)):
            w.write(ts, wrap(pb.inner_ip(data, lt), i))


def _text_json_html(path: str, tmp_path, *extra) -> tuple[str, dict, str]:
    out = []
    for fmt in ("text", "json", "html"):
        target = tmp_path / f"report.{fmt}"
        assert main(["report", path, "-T", fmt, "-o", str(target), *extra]) == 0
        out.append(target.read_text())
    return out[0], json.loads(out[1]), out[2]


def test_a_tunnel_that_is_not_read_is_said_in_all_three_forms_and_with_two_workers(tmp_path):
    # an experimental GRE protocol type (0x88b5, IEEE local experimental) carrying the IP packets: tshark
    # does not decode it either, and nothing of AMQP may be claimed from it
    path = str(tmp_path / "gre_88b5.pcap")
    _wrapped(path, lambda ip_bytes, i: pb._outer_ip(47, pb._gre(0x88B5, ip_bytes), seq=i))
    assert sum(_tshark_frames(path).values()) == 0 if shutil.which("tshark") else True
    line = ("not decoded: 49 packets in a tunnel that is not read (GRE protocol 0x88b5; first at packet 1): "
            "any TCP inside, AMQP or not, is not seen")
    text, rep, html = _text_json_html(path, tmp_path)
    assert line in text.splitlines()
    assert "connections 0," in text
    assert rep["capture"]["tunnels_not_read"] == [{"tunnel": "GRE protocol 0x88b5", "packets": 49, "first_packet": 1}]
    assert line in html
    _, rep2, _ = _text_json_html(path, tmp_path, "-j", "2")
    assert rep2["capture"]["tunnels_not_read"] == rep["capture"]["tunnels_not_read"]


def test_l2tp_is_named_as_a_tunnel_that_is_not_read(tmp_path):
    import struct

    path = str(tmp_path / "l2tp.pcap")
    _wrapped(path, lambda ip_bytes, i: pb.ethernet_frame(pb.udp_packet(
        pb.OUTER_V4[0], pb.OUTER_V4[1], 1701, 1701, struct.pack("!HHH", 2, 1, 1) + b"\xff\x03\x00\x21" + ip_bytes)))
    text, rep, _ = _text_json_html(path, tmp_path)
    assert [t["tunnel"] for t in rep["capture"]["tunnels_not_read"]] == ["L2TP (UDP 1701)"]
    assert rep["summary"]["connections"] == 0


def test_plain_and_read_tunnels_say_no_tunnel_not_read(folder, tmp_path):
    for path in (_sample("outcomes"), _tunnelled(folder, "outcomes", "gre_vxlan")):
        text, rep, _ = _text_json_html(path, tmp_path)
        assert "tunnels_not_read" not in rep["capture"] and "not decoded" not in text


def test_http_on_the_amqp_port_is_named_not_amqp(tmp_path):
    conv = pb.TcpConversation.from_exchange(
        [(0, b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n"), (1, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")],
        client=("10.0.0.1", 40000), server=("10.0.0.2", 5672))
    path = tmp_path / "http.pcap"
    path.write_bytes(conv.pcap())
    text, rep, html = _text_json_html(str(path), tmp_path)
    assert rep["summary"]["connections"] == 0 and rep["summary"]["other_connections"] == 1
    assert [o["protocol"] for o in rep["other_protocols"]] == ["HTTP"]
    assert "not AMQP 1.0 (not decoded): 1 connection (HTTP 1)" in text
    assert "lost in the capture" not in text  # (before: 'lossy', '27 bytes not decoded', 'open not visible')
    assert "HTTP (not decoded)" in html
    if shutil.which("tshark"):
        assert sum(_tshark_frames(str(path)).values()) == 0


def test_tls_without_keys_on_the_amqp_port_says_why_nothing_is_decoded(tmp_path):
    hello = b"\x16\x03\x01\x00\x2e\x01\x00\x00\x2a\x03\x03" + bytes(range(32)) + b"\x00\x00\x02\x13\x01\x01\x00"
    server = b"\x16\x03\x03\x00\x10\x02" + b"\x00" * 15 + b"\x17\x03\x03\x00\x20" + b"\xaa" * 32
    conv = pb.TcpConversation.from_exchange([(0, hello), (1, server), (0, b"\x17\x03\x03\x00\x20" + b"\xbb" * 32)],
                                            client=("10.0.0.1", 40000), server=("10.0.0.2", 5671))
    path = tmp_path / "tls.pcap"
    path.write_bytes(conv.pcap())
    text, rep, html = _text_json_html(str(path), tmp_path)
    (c,) = rep["connections"]
    line = (f"not decoded: 1 connection in TLS that could not be decrypted ({c['tls_undecrypted_bytes']:,} bytes; "
            f"first 10.0.0.1:40000-10.0.0.2:5671): give the TLS key log with --keylog FILE (or SSLKEYLOGFILE)")
    assert c["tls_undecrypted_bytes"] == len(hello) + len(server) + 37
    assert line in text.splitlines() and line in html


def test_fragments_of_a_tunnel_over_ipv6():
    from amqp_dissect.capture.netparse import IPFragment

    gre = pb._gre(0x0800, pb.tcp_packet("10.1.0.1", "10.1.0.2", 40000, 5672, payload=b"z" * 40))
    for offset_field, more in ((0x0001, True), (0x0010, False)):  # (offset in 8-byte units << 3) | M
        frag_header = bytes([47, 0]) + offset_field.to_bytes(2, "big") + b"\x00\x00\x00\x07"
        packet = pb._ip_wrap(pb.OUTER_V6[0], pb.OUTER_V6[1], 44, gre, ext_headers=frag_header, ext_first=44)
        frame = pb.ethernet_frame(packet)
        if more:  # the first fragment: a note, not a silent drop
            with pytest.raises(IPFragment, match="tunnel"):
                parse_segment(1, frame)
        else:  # a later fragment: no tunnel header in it
            assert parse_segment(1, frame) is None
