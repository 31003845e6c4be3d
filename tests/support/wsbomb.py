#!/usr/bin/env python3
"""A permessage-deflate bomb: AMQP over WebSocket whose compressed messages inflate without limit.

    python tests/support/wsbomb.py OUT.pcap [--kb 322] [--messages 1] [--zeros]

The client upgrades to WebSocket with ``permessage-deflate`` (handshake written here from
RFC 6455 and RFC 7692: the accept key is SHA-1 of the key and the GUID), then sends binary
messages with RSV1 set whose payload is raw DEFLATE of a repeated pattern at about the best
ratio DEFLATE allows (about 1,030:1): ``--kb`` kilobytes of compressed data in all, split over
``--messages`` messages, each message over frames of at most 16 KB, each frame in its own TCP
segment.  The inflated bytes are the AMQP protocol header and then empty AMQP frames (8 bytes
each: about 40 million in a 322 KB capture) or, with ``--zeros``, an AMQP frame header
announcing a frame as large as the 32-bit size allows and then zero bytes.  The builder is a
function (:func:`bomb_capture`) that tests import to make the same traffic at small scale.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

from pcapbuild import TcpConversation  # noqa: E402

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KEY = base64.b64encode(b"amqp-dissect-bom")  # 16 bytes, as the RFC asks


def _request(path: str = "/$servicebus/websocket") -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: broker.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {KEY.decode()}\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: amqp\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n").encode()


def _response() -> bytes:
    accept = base64.b64encode(hashlib.sha1(KEY + GUID).digest()).decode()
    return ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: amqp\r\n"
            "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n").encode()


def ws_frame(payload: bytes, *, opcode: int, fin: bool, rsv1: bool, rng: random.Random) -> bytes:
    """One masked (client) frame."""
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = bytes([b0, 0x80 | n])
    elif n < 65536:
        head = bytes([b0, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, 0x80 | 127]) + n.to_bytes(8, "big")
    key = rng.randbytes(4)
    mask = (key * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big") if n else b""
    return head + key + masked


EMPTY_FRAME = b"\x00\x00\x00\x08\x02\x00\x00\x00"  # an AMQP frame with no body (a heartbeat)


def deflated_zeros(compressed_bytes: int, lead: bytes = b"", unit: bytes = b"\x00") -> bytes:
    """Raw DEFLATE (no zlib header, no final 00 00 ff ff) of ``lead`` and then ``unit`` repeated
    (zero bytes by default), about ``compressed_bytes`` long."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [z.compress(lead)]
    size = len(out[0])
    zeros = unit * ((1 << 20) // len(unit))
    while size < compressed_bytes:
        piece = z.compress(zeros)
        out.append(piece)
        size += len(piece)
    out.append(z.flush(zlib.Z_SYNC_FLUSH))
    data = b"".join(out)
    assert data.endswith(b"\x00\x00\xff\xff")
    return data[:-4]


def bomb_capture(kb: float = 322, messages: int = 1, frame_bytes: int = 16384, seed: int = 1,
                 zeros: bool = False) -> bytes:
    """The pcap bytes (see the module doc)."""
    rng = random.Random(seed)
    conv = TcpConversation(client=("10.0.0.1", 40000), server=("10.0.0.2", 443), mss=65000)
    conv.handshake()
    conv.send(0, _request())
    conv.send(1, _response())
    per_message = max(1, int(kb * 1024) // messages)
    for m in range(messages):
        if zeros:
            lead, unit = (b"AMQP\x00\x01\x00\x00" + b"\xff\xff\xff\xf0\x02\x00\x00\x00" if m == 0 else b""), b"\x00"
        else:
            lead, unit = (b"AMQP\x00\x01\x00\x00" if m == 0 else b""), EMPTY_FRAME
        # a fresh DEFLATE stream per message: valid with and without context takeover (its
        # blocks refer only to their own output; a sync flush ends each without a final block)
        data = deflated_zeros(per_message, lead, unit)
        chunks = [data[i:i + frame_bytes] for i in range(0, len(data), frame_bytes)] or [b""]
        for i, chunk in enumerate(chunks):
            conv.send(0, ws_frame(chunk, opcode=2 if i == 0 else 0, fin=i == len(chunks) - 1, rsv1=i == 0, rng=rng))
    conv.close()
    return conv.pcap()


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--kb", type=float, default=322)
    ap.add_argument("--messages", type=int, default=1)
    ap.add_argument("--zeros", action="store_true")
    a = ap.parse_args(argv)
    with open(a.out, "wb") as f:
        f.write(bomb_capture(a.kb, a.messages, zeros=a.zeros))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
