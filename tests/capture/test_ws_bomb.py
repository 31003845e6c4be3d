"""permessage-deflate bombs (issue 29): inflation is capped per message and per direction.

Oracles: zlib itself inflates the same compressed bytes in the test (what the message really
holds); the ``websockets`` package compresses the messages of the window test (its own
permessage-deflate, with and without context takeover).  What we pass on plus what we hold back
must be exactly what zlib inflates, the bytes passed on must be its prefix, and the same stream fed
frame by frame and byte by byte must be cut at the same byte.
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory, ServerPerMessageDeflateFactory
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from amqp_dissect.capture import websocket as ws
from amqp_dissect.capture.websocket import WebSocketLayer
from amqp_dissect.events import PacketNote, StreamData, StreamGap

import wsbomb

CONN = "10.0.0.1:40000-10.0.0.2:443"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bomb_stream(compressed: int, frame_bytes: int = 16384):
    """(client bytes after the upgrade, the compressed payload) of one bomb message."""
    rng = random.Random(7)
    data = wsbomb.deflated_zeros(compressed, b"AMQP\x00\x01\x00\x00")
    chunks = [data[i:i + frame_bytes] for i in range(0, len(data), frame_bytes)]
    frames = b"".join(wsbomb.ws_frame(c, opcode=2 if i == 0 else 0, fin=i == len(chunks) - 1, rsv1=i == 0, rng=rng)
                      for i, c in enumerate(chunks))
    return frames, data


def _feed(layer, steps):
    """Feed (direction, bytes) steps, packets numbered from 1; the events and the largest inner
    output of one feed."""
    out, peak = [], 0
    for i, (direction, data) in enumerate(steps, 1):
        ev = layer.feed(direction, data, float(i), i)
        peak = max(peak, sum(len(e.data) for e in ev if type(e) is StreamData))
        out += ev
    return out + layer.finish(float(len(steps) + 1), len(steps) + 1), peak


def _account(events, direction=0):
    """(bytes passed on, [(gap size, cause)]) of one direction, in order of the inner stream."""
    data, gaps = [], []
    for e in events:
        if type(e) is StreamData and e.direction == direction:
            data.append(e.data)
        elif type(e) is StreamGap and e.direction == direction:
            gaps.append((e.size, e.cause))
    return b"".join(data), gaps


def _notes(events):
    return [e.note.message for e in events if type(e) is PacketNote]


def _handshake():
    return [(0, wsbomb._request()), (1, wsbomb._response())]


@pytest.mark.parametrize("bytewise", [False, True], ids=["by-frame", "byte-by-byte"])
def test_bomb_is_cut_at_the_budget_and_accounted(bytewise):
    frames, data = _bomb_stream(20_000)  # zeros after the AMQP header
    truth = zlib.decompressobj(-15).decompress(data + b"\x00\x00\xff\xff")  # what the message holds
    assert len(truth) > 10 * (ws.INFLATE_FLOOR + ws.INFLATE_RATIO * len(data))  # a bomb indeed
    if bytewise:
        steps = _handshake() + [(0, frames[i:i + 1]) for i in range(len(frames))]
    else:
        steps = _handshake() + [(0, frames[i:i + 16400]) for i in range(0, len(frames), 16400)]
    events, peak = _feed(WebSocketLayer(CONN), steps)
    passed, gaps = _account(events)
    assert passed == truth[:len(passed)]  # a prefix of the real content, nothing made up
    # the budget when the first frame (16,384 compressed bytes) is spent; once cut, the message stays cut
    assert len(passed) == ws.INFLATE_FLOOR + ws.INFLATE_RATIO * 16384
    # held back: inflated and dropped up to DISCARD_FLOOR + DISCARD_RATIO x the message's compressed
    # bytes (the first frame's, credited at its header), then the rest not inflated, counted
    held = ws.DISCARD_FLOOR + ws.DISCARD_RATIO * 16384
    ((size, cause),) = gaps
    skipped = int(cause.rsplit("the last ", 1)[1].split(" of them")[0].replace(",", ""))
    assert cause == f"held back by the WebSocket inflation cap; the last {skipped:,} of them compressed, not inflated"
    assert size == held + skipped
    assert len(data) - 16384 < skipped < len(data)  # the rest of the first frame and all of the second
    assert len(passed) + held < len(truth)
    assert peak <= ws.INFLATE_FLOOR + ws.INFLATE_RATIO * 16400  # per feed: never the whole bomb
    text = "\n".join(_notes(events))
    assert "inflates beyond the client's inflation budget" in text
    assert (f"{len(passed):,} inflated bytes decoded, {held:,} held back by the cap, then {skipped:,} compressed "
            f"bytes not inflated (beyond {ws.DISCARD_RATIO}x its compressed size)") in text
    assert "compression window of the client lost" in text


def test_cut_is_the_same_fed_whole_and_byte_by_byte():
    frames, data = _bomb_stream(9_000, frame_bytes=1000)
    steps_whole = _handshake() + [(0, frames)]
    steps_bytes = _handshake() + [(0, frames[i:i + 1]) for i in range(len(frames))]
    a = _account(_feed(WebSocketLayer(CONN), steps_whole)[0])
    b = _account(_feed(WebSocketLayer(CONN), steps_bytes)[0])
    assert a[0] == b[0]  # the bytes passed on
    # the held-back bytes inflated and dropped are the same; the compressed ones not inflated after
    # them may differ by the byte zlib had taken in when the discard budget ran out
    (sa, ca), (sb, cb) = a[1][0], b[1][0]
    skip_a, skip_b = (int(c.rsplit("the last ", 1)[1].split(" of them")[0].replace(",", "")) for c in (ca, cb))
    assert len(a[1]) == len(b[1]) == 1 and sa - skip_a == sb - skip_b and abs(skip_a - skip_b) <= 1


class _Peers:
    """A websockets client and server with permessage-deflate, joined by hand."""

    def __init__(self, no_context: bool):
        cext = [ClientPerMessageDeflateFactory(client_no_context_takeover=no_context)]
        sext = [ServerPerMessageDeflateFactory()]
        self.client = ClientProtocol(parse_uri("ws://broker.example/amqp"), subprotocols=[Subprotocol("amqp")],
                                     extensions=cext)
        self.server = ServerProtocol(subprotocols=[Subprotocol("amqp")], extensions=sext)
        self.client.send_request(self.client.connect())
        self.request = b"".join(self.client.data_to_send())
        self.server.receive_data(self.request)
        (r,) = self.server.events_received()
        self.server.send_response(self.server.accept(r))
        self.response = b"".join(self.server.data_to_send())
        self.client.receive_data(self.response)


@pytest.mark.parametrize("no_context", [False, True], ids=["context-takeover", "no-context-takeover"])
def test_message_cap_keeps_the_window_for_the_next_message(monkeypatch, no_context):
    monkeypatch.setattr(ws, "MAX_INFLATED_MESSAGE", 100_000)
    monkeypatch.setattr(ws, "INFLATE_FLOOR", 1 << 30)  # only the per-message cap acts here
    p = _Peers(no_context)
    big = bytes(range(256)) * 2000  # 512,000 bytes: cut after 100,000
    after = b"AMQP\x00\x01\x00\x00" + b"the message after the cut refers back to the window " * 40
    for m in (big, after, after):
        p.client.send_binary(m)
    c = b"".join(p.client.data_to_send())
    assert c[0] & 0x40  # compressed
    events, _ = _feed(WebSocketLayer(CONN), [(0, p.request), (1, p.response), (0, c)])
    passed, gaps = _account(events)
    assert passed == big[:100_000] + after + after
    assert gaps == [(len(big) - 100_000, "held back by the WebSocket inflation cap")]
    text = "\n".join(_notes(events))
    assert "inflates beyond the cap of 100,000 inflated bytes per message" in text


def test_many_cut_messages_are_counted_not_listed(monkeypatch):
    monkeypatch.setattr(ws, "MAX_INFLATED_MESSAGE", 1000)
    monkeypatch.setattr(ws, "INFLATE_FLOOR", 1 << 30)
    p = _Peers(False)
    for i in range(50):
        p.client.send_binary(bytes([i]) * 5000)
    events, _ = _feed(WebSocketLayer(CONN), [(0, p.request), (1, p.response), (0, b"".join(p.client.data_to_send()))])
    passed, gaps = _account(events)
    assert passed == b"".join(bytes([i]) * 1000 for i in range(50))
    assert gaps == [(4000, "held back by the WebSocket inflation cap")] * 50
    notes = _notes(events)
    assert len(notes) == 2 + 3  # the upgrade, the 101, the first cut in full (two notes), one count at the end
    assert notes[-1] == "49 more compressed messages from the client cut by the inflation caps: 196,000 inflated bytes held back"


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("messages,zeros", [(1, False), (8, False), (1, True)],
                         ids=["empty-frames", "empty-frames-8-messages", "zeros"])
def test_bomb_capture_stays_small(tmp_path, messages, zeros):
    """The issue's reproducer (322 KB that inflate to about 330 MB, 40 million empty AMQP frames;
    before the caps, 24 GB and the kernel's OOM killer): every command that decodes it runs within
    a 3 GB address space, exit 0."""
    cap = tmp_path / "bomb.pcap"
    cap.write_bytes(wsbomb.bomb_capture(322, messages, zeros=zeros))
    assert cap.stat().st_size < 400_000
    for args in (["report"], ["frames"], ["deliveries", "--format", "csv", "-o", str(tmp_path / "d.csv")]):
        r = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", *args, str(cap)], capture_output=True, text=True,
                           preexec_fn=_limit_memory, timeout=600)
        assert r.returncode == 0, (args, r.stderr[-2000:])
        assert "Traceback" not in r.stderr
        if args == ["report"]:
            assert "bytes not decoded" in r.stdout
        if args == ["frames"]:
            assert "held back by the cap" in r.stdout
            assert "not decoded (held back by the WebSocket inflation cap" in r.stdout


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(0, 40_000), st.integers(0, 255), st.booleans()), min_size=1, max_size=6),
       cap=st.integers(1, 50_000), floor=st.integers(0, 60_000), ratio=st.integers(0, 40),
       no_context=st.booleans(), cuts=st.lists(st.integers(1, 3000), min_size=1, max_size=20))
def test_any_caps_and_any_split_account_for_every_byte(monkeypatch, sizes, cap, floor, ratio, no_context, cuts):
    """Whatever the caps and however TCP cuts the stream: each message's bytes passed on are the
    prefix of what it really holds (zlib's word), the rest is one gap of exactly that size, and
    nothing else reaches the AMQP layer."""
    monkeypatch.setattr(ws, "MAX_INFLATED_MESSAGE", cap)
    monkeypatch.setattr(ws, "INFLATE_FLOOR", floor)
    monkeypatch.setattr(ws, "INFLATE_RATIO", ratio)
    p = _Peers(no_context)
    msgs = [bytes([b]) * n if same else random.Random(n).randbytes(n) for n, b, same in sizes]
    wire = []
    for m in msgs:  # one frame per message (under 64 KB: credited whole at its header)
        p.client.send_binary(m)
        wire.append(b"".join(p.client.data_to_send()))
    c = b"".join(wire)
    steps, i, k = [(0, p.request), (1, p.response)], 0, 0
    while i < len(c):
        steps.append((0, c[i:i + cuts[k % len(cuts)]]))
        i += cuts[k % len(cuts)]
        k += 1
    events, _ = _feed(WebSocketLayer(CONN), steps)
    got = [(type(e).__name__, e.data if type(e) is StreamData else (e.size, e.cause))
           for e in events if type(e) in (StreamData, StreamGap) and e.direction == 0]
    # the model: each message passes min(its size, the room left) bytes, the rest is one gap
    want, zipped, unzipped = [], 0, 0
    for m, frame in zip(msgs, wire):
        ln = frame[1] & 0x7F
        ln = int.from_bytes(frame[2:4], "big") if ln == 126 else int.from_bytes(frame[2:10], "big") if ln == 127 else ln
        zipped += ln
        passed = min(len(m), max(0, min(cap, floor + ratio * zipped - unzipped)))
        unzipped += passed
        if passed:
            want.append(m[:passed])
        if passed < len(m):
            want.append((len(m) - passed, "held back by the WebSocket inflation cap"))
    data = b"".join(x for kind, x in got if kind == "StreamData")
    assert data == b"".join(x for x in want if type(x) is bytes)
    # the gaps fall between the right bytes: the stream as (bytes so far, gap) marks
    marks, n = [], 0
    for kind, x in got:
        if kind == "StreamData":
            n += len(x)
        else:
            marks.append((n, x))
    want_marks, n = [], 0
    for x in want:
        if type(x) is bytes:
            n += len(x)
        else:
            want_marks.append((n, x))
    assert marks == want_marks


@pytest.mark.parametrize("no_context", [False, True], ids=["context-takeover", "no-context-takeover"])
def test_past_the_discard_budget_the_window_is_lost_with_context_takeover(monkeypatch, no_context):
    """A message that a cap cut and that inflates beyond DISCARD_RATIO x its compressed size is not
    inflated to its end: with context takeover the direction's window is then lost (later compressed
    messages are gaps, said once); without it, the next message has a window of its own."""
    monkeypatch.setattr(ws, "MAX_INFLATED_MESSAGE", 1000)
    monkeypatch.setattr(ws, "INFLATE_FLOOR", 1 << 30)
    monkeypatch.setattr(ws, "DISCARD_FLOOR", 0)
    monkeypatch.setattr(ws, "DISCARD_RATIO", 2)
    p = _Peers(no_context)
    after = b"AMQP\x00\x01\x00\x00 the next message"
    p.client.send_binary(b"\x00" * 500_000)
    p.client.send_binary(after)
    events, _ = _feed(WebSocketLayer(CONN), [(0, p.request), (1, p.response), (0, b"".join(p.client.data_to_send()))])
    passed, gaps = _account(events)
    text = "\n".join(_notes(events))
    assert gaps[0][1].startswith("held back by the WebSocket inflation cap; the last ")
    if no_context:
        assert passed == b"\x00" * 1000 + after and len(gaps) == 1
        assert "window" not in text
    else:
        assert passed == b"\x00" * 1000 and len(gaps) == 2 and gaps[1][1] is None
        assert "compression window of the client lost after a message not inflated to its end" in text
