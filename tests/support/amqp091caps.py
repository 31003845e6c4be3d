"""An AMQP 0-9-1 conversation written from the 0-9-1 spec's framing (no broker here), for ``compare`` on
captures of another protocol: ``tests/data/compare/amqp091_fields.pcap`` was made by ``build(path)``.

Frames (type, channel, size, payload, 0xCE): connection.start whose server-properties hold a field table
with every field type (bool, signed/unsigned 8/16/32/64-bit, float, double, decimal, long string, empty
string, byte array, empty byte array, timestamp, void, nested and empty tables, arrays); start-ok, tune,
open, channel.open, queue.declare and basic.consume with that table as arguments; basic.publish and
basic.deliver each with a content header carrying all 14 basic properties (headers: the same table) and a
body, several frames in one TCP segment, heartbeats between them; ack and close.  Bodies are sent as
text/plain, application/octet-stream and with no content-type: Wireshark hands the last two to its "data"
dissector, which PDML writes as ``<field name="data" value=...>`` with no position (the field that made
``compare`` fail with an internal error)."""

from __future__ import annotations

import struct
from pathlib import Path

from pcapbuild import TcpConversation


def shortstr(s: str) -> bytes:
    b = s.encode()
    return bytes([len(b)]) + b


def longstr(b) -> bytes:
    b = b if isinstance(b, bytes) else b.encode()
    return struct.pack(">I", len(b)) + b


_FIXED = {"t": ">B", "b": ">b", "B": ">B", "s": ">h", "u": ">H", "I": ">i", "i": ">I", "l": ">q", "f": ">f",
          "d": ">d", "T": ">Q"}


def field_value(kind: str, v) -> bytes:
    """One field value: its type octet and its encoding."""
    tag = kind.encode()
    if kind in _FIXED:
        return tag + struct.pack(_FIXED[kind], v)
    if kind == "D":
        return tag + struct.pack(">BI", *v)
    if kind in "Sx":
        return tag + longstr(v)
    if kind == "V":
        return tag
    if kind == "F":
        return tag + table(v)
    if kind == "A":
        body = b"".join(field_value(k, x) for k, x in v)
        return tag + struct.pack(">I", len(body)) + body
    raise ValueError(kind)


def table(items) -> bytes:
    body = b"".join(shortstr(name) + field_value(kind, v) for name, kind, v in items)
    return struct.pack(">I", len(body)) + body


EVERY_FIELD = [
    ("bool", "t", 1), ("int8", "b", -5), ("uint8", "B", 200), ("int16", "s", -300), ("uint16", "u", 60000),
    ("int32", "I", -70000), ("uint32", "i", 4000000000), ("int64", "l", -2**40), ("float", "f", 1.5),
    ("double", "d", -2.25), ("decimal", "D", (2, 12345)), ("longstr", "S", "hello"), ("empty", "S", ""),
    ("bytes", "x", b"\x01\x02"), ("emptybytes", "x", b""), ("ts", "T", 1700000000), ("void", "V", None),
    ("table", "F", [("inner", "S", "x"), ("n", "I", 1)]), ("emptytable", "F", []),
    ("array", "A", [("I", 1), ("S", "two"), ("V", None), ("F", [("k", "t", 0)])]), ("emptyarray", "A", []),
]


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def method(channel: int, cls: int, mid: int, args: bytes = b"") -> bytes:
    return frame(1, channel, struct.pack(">HH", cls, mid) + args)


def content(channel: int, body: bytes, content_type: str | None) -> bytes:
    """A content header with every basic property (but content-type when None) and one body frame."""
    flags = 0xFFFC if content_type is not None else 0x7FFC
    props = (shortstr(content_type) if content_type is not None else b"") + shortstr("utf-8") + table(EVERY_FIELD)
    props += bytes([2, 5]) + shortstr("corr") + shortstr("reply") + shortstr("60000") + shortstr("mid")
    props += struct.pack(">Q", 1700000000) + shortstr("type") + shortstr("guest") + shortstr("app")
    props += shortstr("cluster")
    header = frame(2, channel, struct.pack(">HHQH", 60, 0, len(body), flags) + props)
    return header + frame(3, channel, body)


def exchange() -> list[tuple[int, bytes]]:
    """(direction, bytes) of the conversation, one TCP segment each (0 = client)."""
    heartbeat = frame(8, 0, b"")
    publish = method(1, 60, 40, struct.pack(">H", 0) + shortstr("") + shortstr("q") + b"\0")

    def deliver(tag):
        return method(1, 60, 60, shortstr("ctag") + struct.pack(">Q", tag) + b"\0" + shortstr("") + shortstr("q"))

    return [
        (0, b"AMQP\x00\x00\x09\x01"),
        (1, method(0, 10, 10, bytes([0, 9]) + table(EVERY_FIELD) + longstr("PLAIN AMQPLAIN") + longstr("en_US"))),
        (0, method(0, 10, 11, table([("product", "S", "amqp091caps")]) + shortstr("PLAIN")
                   + longstr(b"\0guest\0guest") + shortstr("en_US"))),
        (1, method(0, 10, 30, struct.pack(">HIH", 2047, 131072, 60))),
        (0, method(0, 10, 31, struct.pack(">HIH", 2047, 131072, 60)) + method(0, 10, 40, shortstr("/")
                                                                               + shortstr("") + b"\0")),
        (1, method(0, 10, 41, shortstr(""))),
        (0, method(1, 20, 10, shortstr(""))),
        (1, method(1, 20, 11, longstr(""))),
        (0, method(1, 50, 10, struct.pack(">H", 0) + shortstr("q") + b"\x02" + table(EVERY_FIELD))),
        (1, method(1, 50, 11, shortstr("q") + struct.pack(">II", 0, 0))),
        (0, heartbeat + publish + content(1, b"hello world", "text/plain") + publish
         + content(1, b"\x00\x01\x02binary", "application/octet-stream") + publish
         + content(1, b"no content type", None) + heartbeat),
        (0, method(1, 60, 20, struct.pack(">H", 0) + shortstr("q") + shortstr("") + b"\0" + table(EVERY_FIELD))),
        (1, method(1, 60, 21, shortstr("ctag")) + deliver(1) + content(1, b"hello world", "text/plain")
         + deliver(2) + content(1, b"\x00\x01\x02binary", "application/octet-stream")),
        (1, deliver(3) + content(1, b"no content type", None)),
        (0, method(1, 60, 80, struct.pack(">Q", 3) + b"\x01")),
        (1, heartbeat),
        (0, method(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") + struct.pack(">HH", 0, 0))),
        (1, method(0, 10, 51)),
    ]


def build(path: Path) -> Path:
    conv = TcpConversation.from_exchange(exchange(), client=("10.0.9.1", 40091), server=("10.0.9.2", 5672))
    Path(path).write_bytes(conv.pcap())
    return Path(path)


if __name__ == "__main__":
    import sys

    build(Path(sys.argv[1]))
