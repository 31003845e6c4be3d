"""AMQP over WebSocket (dissector/capture/websocket.py and its place in the Dissector).

Oracles: the handshakes and frames of the unit tests are made by the ``websockets``
package's sans-IO protocol objects (their own encoder, masking and permessage-deflate);
only the protocol violations it refuses to produce are built by hand from RFC 6455's
layout.  The capture tests replay the TCP streams of the real samples through a real
``websockets`` client and server on the loopback, captured by tcpdump (tests/support/wsreplay.py),
and compare what we decode with what we decode from the plain sample: the same frames
(performative, channel, every field) in each direction and the same delivery counts.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys

import pytest
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, ServerPerMessageDeflateFactory
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol
from websockets.uri import parse_uri
from websockets.utils import apply_mask
import websockets.frames

from amqp_dissect.amqp.framing import Frame as AmqpFrame, ProtocolHeader, StreamNote
from amqp_dissect.amqp.framing import AmqpConnection
from amqp_dissect.capture.layers import InnerSniff, Layered
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.capture import websocket as websocket_module
from amqp_dissect.capture.websocket import WebSocketLayer, sniff, unmask
from amqp_dissect.dissect import Dissector
from amqp_dissect.events import PacketNote, StreamData, StreamGap
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.frames import event_json, summary_line

import wsreplay
from eventkeys import run_pipeline
from pcapbuild import TcpConversation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
CONN = "10.0.0.1:40000-10.0.0.2:443"


# --------------------------------------------------------------------------- peers


class _SeededKeys:
    """Stands for the ``secrets`` module in websockets.frames: masking keys from a seeded generator."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def token_bytes(self, n):
        return self.rng.randbytes(n)


@pytest.fixture(autouse=True)
def seeded_masks(monkeypatch):
    """Reproducible masking keys (the encoder draws them from ``secrets``)."""
    monkeypatch.setattr(websockets.frames, "secrets", _SeededKeys(1))
    return monkeypatch


class Peers:
    """A websockets client and server joined by hand: ``c2s`` / ``s2c`` return the bytes each sent."""

    def __init__(self, subprotocols=("amqp",), server_subprotocols=("amqp",), deflate=False, path="/amqp"):
        cext = [ClientPerMessageDeflateFactory()] if deflate else None
        sext = [ServerPerMessageDeflateFactory()] if deflate else None
        self.client = ClientProtocol(parse_uri(f"ws://broker.example{path}"),
                                     subprotocols=[Subprotocol(s) for s in subprotocols] or None, extensions=cext)
        self.server = ServerProtocol(subprotocols=[Subprotocol(s) for s in server_subprotocols] or None,
                                     extensions=sext)
        req = self.client.connect()
        self.client.send_request(req)
        self.request = self.c2s()
        self.server.receive_data(self.request)
        (r,) = self.server.events_received()
        resp = self.server.accept(r)
        self.server.send_response(resp)
        self.response = self.s2c()
        self.client.receive_data(self.response)

    def c2s(self) -> bytes:
        return b"".join(self.client.data_to_send())

    def s2c(self) -> bytes:
        return b"".join(self.server.data_to_send())


def run(layer, steps):
    """Feed (direction, bytes) / (direction, 'gap', n) steps; packets numbered from 1."""
    out = []
    for i, step in enumerate(steps, 1):
        if len(step) == 3:
            out += layer.gap(step[0], step[2], float(i), i)
        else:
            out += layer.feed(step[0], step[1], float(i), i)
    return out + layer.finish(float(len(steps) + 1), len(steps) + 1)


def inner(events, direction):
    return b"".join(e.data for e in events if type(e) is StreamData and e.direction == direction)


def notes(events, severity=None):
    return [e.note.message for e in events if type(e) is PacketNote and severity in (None, e.note.severity)]


def handshake(p: Peers):
    return [(0, p.request), (1, p.response)]


# --------------------------------------------------------------------------- sniff


def test_sniff_real_request():
    p = Peers()
    assert sniff(p.request) is True
    for n in (1, 3, 4, 20, len(p.request) - 1):
        assert sniff(p.request[:n]) is None, n
    assert sniff(b"AMQP\x00\x01\x00\x00") is False
    assert sniff(b"\x16\x03\x01\x02\x00") is False
    assert sniff(b"G") is None and sniff(b"GX") is False
    # the working-draft name Azure uses, case aside
    assert sniff(Peers(subprotocols=("AMQPWSB10",), server_subprotocols=("AMQPWSB10",)).request) is True
    # a WebSocket for another protocol, and a plain GET
    assert sniff(Peers(subprotocols=("mqtt",), server_subprotocols=("mqtt",)).request) is False
    assert sniff(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is False
    # headers that never end are not held beyond the cap
    assert sniff(b"GET / HTTP/1.1\r\nX: " + b"a" * 20000) is False


# --------------------------------------------------------------------------- frames


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 200_000])
@pytest.mark.parametrize("split", ["whole", "bytewise", "odd"])
def test_length_forms_and_masking(size, split):
    p = Peers()
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    p.client.send_binary(payload)
    c = p.c2s()
    p.server.send_binary(payload[::-1])
    s = p.s2c()
    # the header form the encoder chose: 7, 16 or 64-bit length, masked from the client only
    form = c[1] & 0x7F
    assert c[1] & 0x80 and not s[1] & 0x80
    assert form == (size if size < 126 else 126 if size < 65536 else 127)
    steps = handshake(p)
    if split == "whole":
        steps += [(0, c), (1, s)]
    elif split == "bytewise" and size < 70000:
        steps += [(0, c[i : i + 1]) for i in range(len(c))] + [(1, s[i : i + 1]) for i in range(len(s))]
    else:
        steps += [(0, c[i : i + 1001]) for i in range(0, len(c), 1001)] + [(1, s[i : i + 7]) for i in range(0, len(s), 7)]
    ev = run(WebSocketLayer(CONN), steps)
    assert inner(ev, 0) == payload
    assert inner(ev, 1) == payload[::-1]
    assert notes(ev, "warn") == []
    assert notes(ev)[:2] == ["WebSocket upgrade GET /amqp, subprotocol amqp",
                             "WebSocket 101 Switching Protocols, subprotocol amqp"]


def test_unmask_matches_the_encoder():
    data = os.urandom(1003)
    key = os.urandom(4)
    full = apply_mask(data, key)
    for off in (0, 1, 2, 3, 5, 1000):
        assert unmask(data[off:], key, off & 3) == full[off:]
    assert unmask(b"", key) == b""


def test_fragmented_messages_pings_and_close():
    p = Peers()
    p.client.send_binary(b"AMQP", fin=False)
    p.client.send_ping(b"hello")
    p.client.send_continuation(b"\x00\x01", fin=False)
    p.client.send_continuation(b"\x00\x00", fin=True)
    p.client.send_binary(b"second")
    p.client.send_close(1000, "bye")
    c = p.c2s()
    p.server.receive_data(c)
    p.server.events_received()
    s = p.s2c()  # the pong and the close echo
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, c), (1, s)])
    assert inner(ev, 0) == b"AMQP\x00\x01\x00\x00second"
    assert inner(ev, 1) == b""
    assert notes(ev)[2:] == [
        "WebSocket ping from the client, 5 bytes",
        "WebSocket close from the client 1000 'bye'",
        "WebSocket pong from the server, 5 bytes",
        "WebSocket close from the server 1000 'bye'",
    ]
    assert notes(ev, "warn") == []


def test_close_codes_and_text():
    p = Peers()
    p.client.send_text("héllo".encode())
    p.client.send_text(b"part", fin=False)
    p.client.send_continuation(b"2", fin=True)
    p.client.send_close()  # no status code
    p.server.send_close(1011, "internal")
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, p.c2s()), (1, p.s2c())])
    assert inner(ev, 0) == b""
    assert notes(ev)[2:] == [
        "WebSocket text message, 6 bytes (AMQP uses binary messages; not decoded)",
        "WebSocket text message, 5 bytes in 2 frames (AMQP uses binary messages; not decoded)",
        "WebSocket close from the client (no status code)",
        "WebSocket close from the server 1011 'internal'",
    ]


# --------------------------------------------------------------------------- violations (built by hand)


def raw(b0: int, payload: bytes, mask: bytes | None = None, length_form: int | None = None) -> bytes:
    """A frame laid out as RFC 6455 section 5.2 draws it (for what the encoder refuses to make)."""
    n = len(payload)
    form = length_form if length_form is not None else (n if n < 126 else 126 if n < 65536 else 127)
    b1 = form | (0x80 if mask else 0)
    head = bytes([b0, b1])
    if form == 126:
        head += struct.pack("!H", n)
    elif form == 127:
        head += struct.pack("!Q", n)
    if mask:
        head += mask
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + payload


KEY = b"\x11\x22\x33\x44"


def test_violations_are_warnings():
    p = Peers()
    c = b"".join([
        raw(0x82, b"unmasked"),  # a client frame must be masked
        raw(0xC2, b"rsv1", KEY),  # RSV1 without permessage-deflate
        raw(0x83, b"reserved", KEY),  # reserved data opcode 3: skipped
        raw(0x8B, b"", KEY),  # reserved control opcode 0xB
        raw(0x89, b"x" * 126, KEY),  # ping longer than 125
        raw(0x09, b"frag", KEY),  # fragmented ping
        raw(0x80, b"cont", KEY),  # continuation with no message
        raw(0x02, b"A", KEY), raw(0x82, b"B", KEY),  # a new message inside a fragmented one
        raw(0x82, b"C", KEY, length_form=126),  # 1 byte in the 16-bit form
    ])
    s = raw(0x82, b"masked", KEY)  # a server frame must not be masked
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, c), (1, s)])
    assert inner(ev, 0) == b"unmaskedrsv1contABC"
    assert inner(ev, 1) == b"masked"
    assert notes(ev, "warn") == [
        "unmasked WebSocket frame from the client (further ones in this direction not reported)",
        "WebSocket client frame with reserved bits 100 set and no extension that defines them",
        "WebSocket client frame with reserved data opcode 0x3 (8 bytes skipped)",
        "WebSocket client frame with reserved control opcode 0xb (0 bytes skipped)",
        "WebSocket ping frame 126 bytes (at most 125)",
        "WebSocket ping frame fragmented",
        "WebSocket continuation frame from the client without a message in progress; taken as binary",
        "WebSocket binary frame from the client inside an unfinished fragmented binary message (1 frames)",
        "WebSocket binary frame length 1 not in its shortest encoding (further ones in this direction not reported)",
        "masked WebSocket frame from the server (further ones in this direction not reported)",
    ]
    # the fragmented ping (4 bytes, within the limit) is still shown; the oversized one is not held
    assert "WebSocket ping from the client, 4 bytes" in notes(ev, "chat")


def test_refused_upgrade_is_not_amqp():
    p = Peers()
    resp = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nno!"
    frames = raw(0x82, b"AMQP\x00\x01\x00\x00", KEY)
    ev = run(WebSocketLayer(CONN), [(0, p.request), (1, resp), (0, frames)])
    assert inner(ev, 0) == b""
    assert notes(ev)[1:] == ["WebSocket upgrade refused: HTTP 403 Forbidden; the connection is not AMQP"]


def test_other_subprotocol_chosen():
    p = Peers(subprotocols=("amqp", "mqtt"), server_subprotocols=("mqtt",))
    p.client.send_binary(b"AMQP\x00\x01\x00\x00")
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, p.c2s())])
    assert inner(ev, 0) == b""
    assert notes(ev, "warn") == ["WebSocket 101 Switching Protocols, subprotocol mqtt: not AMQP; the connection is "
                                 "ignored"]


def test_bad_accept_key():
    p = Peers()
    bad = p.response.replace(p.response.split(b"Sec-WebSocket-Accept: ")[1][:28], b"A" * 27 + b"=")
    ev = run(WebSocketLayer(CONN), [(0, p.request), (1, bad)])
    (w,) = notes(ev, "warn")
    assert "does not match the key" in w


# --------------------------------------------------------------------------- permessage-deflate


def test_permessage_deflate(monkeypatch):
    # 100,000 zero bytes inflate from about 100: past the inflation budget of a direction (64 KiB +
    # 3x the compressed bytes), which tests/capture/test_ws_bomb.py tests; here every byte is decoded
    monkeypatch.setattr(websocket_module, "INFLATE_FLOOR", 1 << 20)
    p = Peers(deflate=True)
    assert b"permessage-deflate" in p.response
    msgs = [b"AMQP\x00\x01\x00\x00" * 50, os.urandom(3000), b"\x00" * 100_000, b"tail"]
    for m in msgs:
        p.client.send_binary(m)
        p.server.send_binary(m[::-1])
    c, s = p.c2s(), p.s2c()
    assert c[0] & 0x40  # compressed (RSV1)
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, c[i : i + 500]) for i in range(0, len(c), 500)] + [(1, s)])
    assert inner(ev, 0) == b"".join(msgs)
    assert inner(ev, 1) == b"".join(m[::-1] for m in msgs)
    assert notes(ev, "warn") == []


# --------------------------------------------------------------------------- gaps


def test_gap_inside_a_payload_keeps_the_framing():
    p = Peers()
    payload = bytes(range(256)) * 20
    p.client.send_binary(payload)
    p.client.send_binary(b"after")
    c = p.c2s()
    hlen = 8  # 2 + 16-bit length + mask key
    cut = hlen + 1000
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, c[:cut]), (0, "gap", 333), (0, c[cut + 333 :])])
    gaps = [e for e in ev if type(e) is StreamGap]
    assert [(g.direction, g.size) for g in gaps] == [(0, 333)]
    assert inner(ev, 0) == payload[:1000] + payload[1333:] + b"after"
    assert notes(ev, "warn") == []


def _gap_across_frames(payload):
    p = Peers()
    msgs = [payload(i, 50 + 37 * i) for i in range(12)]
    for m in msgs:
        p.client.send_binary(m)
    c = p.c2s()
    # frame boundaries: 2 bytes, a 16-bit length from 126 bytes on, the 4-byte mask key, the payload
    ends = []
    pos = 0
    for m in msgs:
        pos += 6 + (2 if len(m) >= 126 else 0) + len(m)
        ends.append(pos)
    assert ends[-1] == len(c)
    lost_from = ends[2] + 10  # inside frame 3 (a 16-bit length: 2 payload bytes got through) ...
    lost_to = ends[4] + 3  # ... to inside frame 5's header
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, c[:lost_from]), (0, "gap", lost_to - lost_from),
                                                    (0, c[lost_to:])])
    return msgs, ends, lost_from, lost_to, ev


def test_gap_across_frames_resynchronises():
    msgs, ends, lost_from, lost_to, ev = _gap_across_frames(lambda i, n: bytes([i]) * n)
    data = inner(ev, 0)
    # everything up to the gap, then frames 6.. after the resynchronisation
    assert data == b"".join(msgs[:3]) + msgs[3][:2] + b"".join(msgs[6:])
    gaps = [e.size for e in ev if type(e) is StreamGap]
    assert gaps == [lost_to - lost_from]
    skipped = ends[5] - lost_to
    assert notes(ev, "warn") == [f"WebSocket resynchronised on a frame header after skipping {skipped} bytes"]


@pytest.mark.parametrize("kind", ["random", "zeros"])
def test_resynchronisation_over_many_keys(seeded_masks, kind):
    """Over 300 masking-key draws: the frames after the gap always come out whole and in order;
    the resynchronisation lands exactly on the first whole frame nearly always (a false header
    joining the real chain, with at most 125 bytes of payload, is the documented exception)."""
    rng = random.Random(7)
    exact = 0
    for seed in range(300):
        seeded_masks.setattr(websockets.frames, "secrets", _SeededKeys(seed))
        payload = (lambda i, n: rng.randbytes(n)) if kind == "random" else (lambda i, n: bytes(n))
        msgs, ends, lost_from, lost_to, ev = _gap_across_frames(payload)
        data = inner(ev, 0)
        head = b"".join(msgs[:3]) + msgs[3][:2]
        tail = b"".join(msgs[6:])
        assert data.startswith(head) and data.endswith(tail)
        assert len(data) - len(head) - len(tail) <= 125
        exact += data == head + tail
    assert exact >= 290


def test_impossible_length_resynchronises():
    """A 64-bit length with its top bit set is no frame: warning, a scan, and the inner stream is
    told it lost what was skipped; a continuation right after the scan is the rest of a message."""
    p = Peers()
    bad = bytes([0x82, 0xFF]) + struct.pack("!Q", (1 << 63) | 5) + KEY + b"junkjunk"
    keys = [b"\x01\x02\x03\x04", b"\x05\x06\x07\x08", b"\x09\x0a\x0b\x0c", b"\x0d\x0e\x0f\x10"]
    after = raw(0x80, b"tail", keys[0]) + b"".join(raw(0x82, b"m%d" % i, keys[i]) for i in (1, 2, 3))
    ev = run(WebSocketLayer(CONN), handshake(p) + [(0, raw(0x82, b"first", KEY) + bad + after)])
    assert inner(ev, 0) == b"firsttailm1m2m3"
    assert [(e.direction, e.size) for e in ev if type(e) is StreamGap] == [(0, len(bad))]
    assert notes(ev, "warn") == [
        "WebSocket frame length 0x8000000000000005 has its most significant bit set; resynchronising",
        f"WebSocket resynchronised on a frame header after skipping {len(bad)} bytes",
    ]


def test_gap_during_the_response():
    p = Peers()
    p.server.send_binary(b"x" * 40)
    p.server.send_binary(b"y" * 40)
    p.server.send_binary(b"z" * 40)
    s = p.s2c()
    ev = run(WebSocketLayer(CONN), [(0, p.request), (1, p.response[:20]), (1, "gap", 30), (1, s)])
    assert inner(ev, 1) == b"x" * 40 + b"y" * 40 + b"z" * 40
    assert [e.size for e in ev if type(e) is StreamGap] == [30]


# --------------------------------------------------------------------------- in the Dissector (hand-made TCP)


@pytest.mark.parametrize("port", [8080, 5672])
def test_dissector_refused_upgrade(port):
    """A refused upgrade, on a port found by sniffing and on an AMQP port: notes, no AMQP."""
    p = Peers()
    conv = TcpConversation.from_exchange(
        [(0, p.request), (1, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
         (0, raw(0x82, b"AMQP\x00\x01\x00\x00", KEY))],
        client=("10.0.0.1", 40000), server=("10.0.0.2", port))
    ev = run_pipeline(conv.pcap())
    assert not [e for e in ev if isinstance(e, (AmqpFrame, ProtocolHeader, StreamNote))]
    assert notes(ev) == ["WebSocket upgrade GET /amqp, subprotocol amqp",
                         "WebSocket upgrade refused: HTTP 404 Not Found; the connection is not AMQP"]


@pytest.mark.parametrize("port", [8080, 5672])
def test_dissector_plain_http_is_not_websocket(port):
    """A plain HTTP GET: ignored on another port, named HTTP (another protocol, not decoded) on an AMQP port."""
    conv = TcpConversation.from_exchange(
        [(0, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), (1, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")],
        client=("10.0.0.1", 40000), server=("10.0.0.2", port))
    ev = run_pipeline(conv.pcap())
    assert not any("WebSocket" in m for m in notes(ev))
    assert bool([e for e in ev if isinstance(e, StreamNote)]) is (port == 5672)
    assert [e.protocol for e in ev if type(e).__name__ == "OtherProtocolNote"] == (["HTTP"] if port == 5672 else [])


# --------------------------------------------------------------------------- nesting (WebSocket inside another layer)


class _XorLayer:
    """A stand-in for TLS: its 'plaintext' is the TCP payload XOR 0x5A, passed on in 7-byte pieces."""

    name = "xor"

    def __init__(self, conn):
        self.conn = conn

    def feed(self, direction, data, ts, packet):
        plain = bytes(b ^ 0x5A for b in data)
        return [StreamData(self.conn, direction, plain[i : i + 7], ts, packet) for i in range(0, len(plain), 7)]

    def gap(self, direction, size, ts, packet):
        return [StreamGap(self.conn, direction, size, ts, packet)]

    def finish(self, ts, packet):
        return []


@pytest.mark.parametrize("websocket", [True, False])
def test_inner_sniff_under_another_layer(websocket):
    """Layered([outer, InnerSniff], amqp) decodes a sample's streams like AmqpConnection on the plain bytes."""
    (_, steps), *_ = wsreplay.tcp_streams(os.path.join(SAMPLES, "outcomes.pcap"))

    def frames(chain_steps, make):
        amqp = AmqpConnection(CONN, "10.0.0.1:40000", "10.0.0.2:443")
        conn = make(amqp)
        ev = []
        for k, (d, data) in enumerate(chain_steps, 1):
            ev += conn.feed(d, data, float(k), k)
        ev += conn.finish(None, None)
        return [(e.direction, event_json(e)["fields"]) for e in ev if isinstance(e, (AmqpFrame, ProtocolHeader))], ev

    want, _ = frames(steps, lambda a: a)
    wire = wsreplay.wrap(steps) if websocket else steps
    xored = [(d, bytes(b ^ 0x5A for b in data)) for d, data in wire]
    got, ev = frames(xored, lambda a: Layered([_XorLayer(CONN), InnerSniff(CONN)], a))
    assert len(want) > 40 and got == want
    assert ("WebSocket upgrade GET /amqp, subprotocol amqp" in notes(ev)) is websocket


# --------------------------------------------------------------------------- real captures


SAMPLE_NAMES = sorted(f[:-5] for f in os.listdir(SAMPLES) if f.endswith(".pcap"))


def _frames_by_conn(events):
    """Per connection (in order of first frame): [(direction, decoded header/frame)] without addresses/times."""
    conns: dict = {}
    for e in events:
        if isinstance(e, (AmqpFrame, ProtocolHeader)):
            j = event_json(e)
            for k in ("packet", "time", "time_ns", "first_packet", "delivery_first_packet", "src", "dst", "connection"):
                j.pop(k, None)
            conns.setdefault(e.conn, []).append((e.direction, j))
    return list(conns.values())


def _events(path, ports=()):
    d = Dissector(extra_ports=ports)
    ev = []
    with open(path, "rb") as f:
        for r in open_capture(f):
            ev += d.feed(r)
    return ev + d.finish()


def _counts(path):
    """The report's delivery counts per link, and each delivery's fate, keyed without addresses."""
    a = read_analysis(path)
    cols = ["deliveries", "accepted", "rejected", "released", "modified", "unsettled", "presettled", "aborted",
            "transfers", "messages_bytes", "no_outcome"]
    links = sorted((r["name"], r["role"], tuple(str(r[c]) for c in cols)) for _, r in a.links.iterrows())
    dcols = ["link", "delivery_id", "delivery_tag", "frames", "message_size", "presettled", "aborted", "settled_by",
             "outcome", "complete"]
    deliveries = sorted(tuple(str(r[c]) for c in dcols) for _, r in a.deliveries.iterrows())
    return links, deliveries


def _against_tshark(path, sample, ev):
    """Wireshark's WebSocket dissector on the same capture (decoded as HTTP on its port, which it
    then follows into WebSocket): its frames' payload lengths add up to our inner stream per
    direction, and its control frames are our notes."""
    opened = [e for e in ev if type(e).__name__ == "StreamOpened"]
    port = int(opened[0].server.rsplit(":", 1)[1])
    res = subprocess.run(
        ["tshark", "-r", path, "-d", f"tcp.port=={port},http", "-Y", "websocket", "-T", "fields",
         "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tcp.dstport", "-e", "websocket.opcode",
         "-e", "websocket.mask", "-e", "websocket.payload_length", "-e", "websocket.payload_length_ext_16",
         "-e", "websocket.payload_length_ext_64", "-e", "websocket.payload.close.status_code",
         "-e", "websocket.payload.close.reason"],
        capture_output=True, text=True, check=True)
    data = [0, 0]
    control = []
    frames = 0
    for line in res.stdout.splitlines():
        dport, ops, masks, l7s, l16s, l64s, codes, reasons = (line.split("\t") + [""] * 8)[:8]
        # one TCP segment may carry several frames: the fields are lists
        cols = [c.split("|") for c in (ops, masks, l7s)]
        l16 = iter(l16s.split("|") if l16s else [])
        l64 = iter(l64s.split("|") if l64s else [])
        code = iter(codes.split("|") if codes else [])
        reason = iter(reasons.split("|") if reasons else [])
        d = 0 if int(dport) == port else 1
        for op, mask, l7 in zip(*cols):
            frames += 1
            n = int(l7)
            n = int(next(l16)) if n == 126 else int(next(l64)) if n == 127 else n
            assert (mask in ("1", "True")) is (d == 0)
            op = int(op)
            side = "client" if d == 0 else "server"
            if op in (0, 2):
                data[d] += n
            elif op == 8:
                control.append(f"WebSocket close from the {side} {next(code)} {next(reason, '')!r}")
            elif op in (9, 10):
                control.append(f"WebSocket {'ping' if op == 9 else 'pong'} from the {side}, {n} bytes")
    assert frames > 0
    # our layer on the same TCP streams (split by dpkt): exactly the plain sample's bytes, as many as tshark saw
    ours = [0, 0]
    for (_, wire), (_, plain) in zip(wsreplay.tcp_streams(path), wsreplay.tcp_streams(sample), strict=True):
        layer_ev = run(WebSocketLayer(CONN), wire)
        for d in (0, 1):
            assert inner(layer_ev, d) == b"".join(c for dd, c in plain if dd == d)
            ours[d] += len(inner(layer_ev, d))
    assert ours == data
    mine = [m for m in notes(ev) if m.startswith(("WebSocket close", "WebSocket ping", "WebSocket pong"))]
    assert sorted(mine) == sorted(control)


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    """Every sample replayed over WebSocket (and a few with permessage-deflate), captured by tcpdump."""
    out = {}
    base = tmp_path_factory.mktemp("ws")
    for name in SAMPLE_NAMES:
        src = os.path.join(SAMPLES, name + ".pcap")
        for deflate in (False, True) if name in ("outcomes", "large_message", "ipv6") else (False,):
            dst = str(base / f"{name}{'-deflate' if deflate else ''}.pcap")
            out[(name, deflate)] = (dst, wsreplay.replay(src, dst, deflate=deflate))
    return out


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_wrapped_sample_decodes_like_the_plain_one(wrapped, name):
    src = os.path.join(SAMPLES, name + ".pcap")
    plain = _frames_by_conn(_events(src))
    assert plain and all(plain)
    plain_counts = _counts(src)
    for (n, deflate), (path, counts) in wrapped.items():
        if n != name:
            continue
        assert counts["messages"] > 0 and counts["connections"] == len(plain)
        ev = _events(path)
        assert _frames_by_conn(ev) == plain, (name, deflate)
        assert _counts(path) == plain_counts, (name, deflate)
        msgs = notes(ev)
        assert msgs.count("WebSocket upgrade GET /amqp, subprotocol amqp") == len(plain)
        assert sum(m.startswith("WebSocket 101 Switching Protocols, subprotocol amqp") for m in msgs) == len(plain)
        assert sum(m.startswith("WebSocket ping from the") for m in msgs) == counts["pings"]
        assert sum(m.startswith("WebSocket pong from the") for m in msgs) == counts["pings"]
        assert msgs.count("WebSocket close from the client 1000 'replay done'") == len(plain)
        assert notes(ev, "warn") == []
        if not deflate:
            _against_tshark(path, src, ev)
        # the same through --port (a connection on a forced port is sniffed too)
        port = int(next(e for e in ev if type(e).__name__ == "StreamOpened").server.rsplit(":", 1)[1])
        assert _frames_by_conn(_events(path, ports=(port,))) == plain


def test_wrapped_capture_in_frames_output(wrapped):
    path, _ = wrapped[("outcomes", False)]
    ev = _events(path)
    t0 = min(e.ts for e in ev if getattr(e, "ts", None) is not None)
    lines = [summary_line(e, t0) for e in ev]
    text = "\n".join(x for x in lines if x)
    assert "WebSocket upgrade GET /amqp, subprotocol amqp" in text
    assert "attach" in text and "transfer" in text


def test_gap_in_a_wrapped_capture(wrapped, tmp_path):
    """A client segment dropped from a real capture: no crash, a gap, then frames again."""
    import io

    from pcapbuild import read_pcap_records, write_pcap

    path, _ = wrapped[("large_message", False)]
    with open(path, "rb") as f:
        records = list(read_pcap_records(f))
    # drop the biggest client->server segment (inside the large message)
    import dpkt

    tcps = [dpkt.ethernet.Ethernet(d).data.data for _, _, d in records]
    server_port = next(t.dport for t in tcps if t.flags & dpkt.tcp.TH_SYN)
    _, drop = max((len(t.data), i) for i, t in enumerate(tcps) if t.dport == server_port)
    kept = records[:drop] + records[drop + 1 :]
    data = write_pcap([(ts, lt, d) for ts, lt, d in kept])
    d = Dissector()
    ev = []
    for r in open_capture(io.BytesIO(data)):
        ev += d.feed(r)
    ev += d.finish()
    plain = _frames_by_conn(_events(os.path.join(SAMPLES, "large_message.pcap")))[0]
    got = _frames_by_conn(ev)[0]
    client = [f for dr, f in got if dr == 0]
    plain_client = [f for dr, f in plain if dr == 0]
    # the server's direction lost nothing; the client's lost part of the large message, then
    # decodes again: its last frames (the transfers after the gap, detach, end, close) are the plain ones
    assert [f for dr, f in got if dr == 1] == [f for dr, f in plain if dr == 1]
    assert client[-3:] == plain_client[-3:]
    assert len(client) < len(plain_client)
    assert all(f in plain_client for f in client if f.get("performative") != "transfer")
    # the AMQP stream lost the segment's bytes (the frames' headers lost with them, if any, are
    # not counted in the estimate: a resynchronisation says so)
    stream_notes = [e.note.message for e in ev if isinstance(e, StreamNote) and e.direction == 0]
    assert f"{len(tcps[drop].data)} bytes missing from the capture (TCP gap)" in stream_notes
    assert all(m.startswith("WebSocket resynchronised on a frame header") for m in notes(ev, "warn"))


# --------------------------------------------------------------------------- properties


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    messages=st.lists(st.tuples(st.binary(max_size=300), st.integers(1, 4), st.booleans()), max_size=12),
    cuts=st.lists(st.integers(1, 400), max_size=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_split_gives_the_same_stream(messages, cuts, seed):
    """However TCP cut the bytes, the inner stream and the notes are those of the whole feed."""
    websockets.frames.secrets = _SeededKeys(seed)  # restored by the autouse fixture
    p = Peers()
    want = b""
    for data, parts, ping in messages:
        if ping:
            p.client.send_ping(b"p")
        step = max(1, len(data) // parts)
        pieces = [data[i : i + step] for i in range(0, len(data), step)] or [b""]
        for k, piece in enumerate(pieces):
            last = k == len(pieces) - 1
            if k == 0:
                p.client.send_binary(piece, fin=last)
            else:
                p.client.send_continuation(piece, fin=last)
        want += data
    wire = p.c2s()
    whole = run(WebSocketLayer(CONN), handshake(p) + [(0, wire)])
    steps, pos = [], 0
    for c in cuts:
        steps.append((0, wire[pos : pos + c]))
        pos += c
    steps.append((0, wire[pos:]))
    split = run(WebSocketLayer(CONN), handshake(p) + [s for s in steps if s[1]])
    assert inner(whole, 0) == inner(split, 0) == want
    assert notes(whole) == notes(split)
    assert notes(whole, "warn") == []


@settings(max_examples=60, deadline=None)
@given(junk=st.binary(max_size=3000), gap_at=st.integers(0, 3000), gap=st.integers(1, 5000), client=st.booleans())
def test_garbage_never_raises(junk, gap_at, gap, client):
    """Arbitrary bytes and gaps after a handshake: events, never an exception; the held bytes stay bounded."""
    p = Peers()
    layer = WebSocketLayer(CONN)
    d = 0 if client else 1
    ev = run(layer, handshake(p) + [(d, junk[:gap_at]), (d, "gap", gap), (d, junk[gap_at:]), (d, junk)])
    assert all(type(e) in (StreamData, StreamGap, PacketNote) for e in ev)
    assert all(len(x.buf) == 0 for x in layer.dirs)  # finish released everything


def test_websocket_inside_tls_decodes_like_the_plain_sample(tmp_path):
    """amqps over wss: a real TLS 1.3 server and client (OpenSSL, with a key log) carry the
    WebSocket that carries a sample's AMQP; decrypted with the key log, the frames and the
    deliveries are the plain sample's, and without it nothing is decoded."""
    import ssl

    from tlscap import make_cert

    from amqp_dissect.capture.netparse import parse_segment

    cert, key = make_cert(str(tmp_path))
    keys = str(tmp_path / "keys.txt")
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(cert, key)
    cli = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cli.check_hostname = False
    cli.verify_mode = ssl.CERT_NONE
    cli.keylog_filename = keys
    src = os.path.join(SAMPLES, "outcomes.pcap")
    dst = str(tmp_path / "wss.pcap")
    counts = wsreplay.replay(src, dst, tls=(srv, cli))
    plain = _frames_by_conn(_events(src))
    with open(dst, "rb") as f:
        first = next(iter(open_capture(f)))
    port = parse_segment(first.linktype, first.data).dport  # the client's SYN: the server's port
    with open(keys) as f:
        keylog = f.read()

    def events(keylog):
        d = Dissector(extra_ports=(port,), keylog=keylog)
        ev = []
        with open(dst, "rb") as f:
            for r in open_capture(f):
                ev += d.feed(r)
        return ev + d.finish()

    ev = events(keylog)
    assert counts["connections"] == len(plain)
    assert _frames_by_conn(ev) == plain
    # inside TLS the layers' notes are the connection's StreamNotes
    msgs = [e.note.message for e in ev if type(e).__name__ == "StreamNote"]
    assert msgs.count("WebSocket upgrade GET /amqp, subprotocol amqp") == len(plain)
    assert any(m.startswith("TLS") for m in msgs)
    assert [e.note for e in ev if type(e).__name__ == "StreamNote" and e.note.severity in ("warn", "error")] == []
    assert _frames_by_conn(events(None)) == []  # no keys: nothing of the AMQP inside shows


def test_websocket_frames_for_the_detail_tree(wrapped):
    """``frames -V`` shows each WebSocket frame header as Wireshark's "WebSocket" layer: the
    records (direction, opcode, length) are tshark's frames, in order; the CLI prints them."""
    path, _ = wrapped[("outcomes", False)]
    records: list = []
    d = Dissector(tls_records=records)
    ev = []
    with open(path, "rb") as f:
        for r in open_capture(f):
            ev += d.feed(r)
    ev += d.finish()
    port = int(next(e for e in ev if type(e).__name__ == "StreamOpened").server.rsplit(":", 1)[1])
    res = subprocess.run(
        ["tshark", "-r", path, "-d", f"tcp.port=={port},http", "-Y", "websocket", "-T", "fields",
         "-E", "occurrence=a", "-E", "aggregator=|", "-e", "tcp.dstport", "-e", "websocket.opcode",
         "-e", "websocket.payload_length", "-e", "websocket.payload_length_ext_16",
         "-e", "websocket.payload_length_ext_64"],
        capture_output=True, text=True, check=True)
    theirs = []
    for line in res.stdout.splitlines():
        dport, ops, l7s, l16s, l64s = (line.split("\t") + [""] * 5)[:5]
        l16 = iter(l16s.split("|") if l16s else [])
        l64 = iter(l64s.split("|") if l64s else [])
        for op, l7 in zip(ops.split("|"), l7s.split("|")):
            n = int(l7)
            n = int(next(l16)) if n == 126 else int(next(l64)) if n == 127 else n
            theirs.append((0 if int(dport) == port else 1, int(op), n))
    ours = [(r.direction, r.opcode, r.length) for r in records if r.layer == "WebSocket"]
    assert ours == theirs and len(ours) > 10
    out = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "frames", "-V", path], capture_output=True, text=True, check=True).stdout
    assert out.count("\nWebSocket\n") > 0
    assert "    Fin: True, Opcode: Binary (2), Mask: True, Payload length: 8" in out  # the client's AMQP header
