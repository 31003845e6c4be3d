"""Captures for ``amqp-dissect compare`` that the samples do not provide: real proton traffic
(tests/support/protonpump.py) with frames re-encoded by hand, written as pcap by tests/support/pcapbuild.py.

* ``descriptor_ulong``: every attach's descriptor as a full ulong (``00 80`` + 8 bytes) instead
  of a small ulong (``00 53 12``); the spec allows both.
* ``descriptor_symbol``: every attach's descriptor as its symbol (``00 a3 10 amqp:attach:list``).
* ``types`` (:func:`build_types`): a value of every AMQP type in application-properties and
  bodies, with the spellings Wireshark writes its own way (inf, NaN, uuids, timestamps, chars,
  +-DBL_MAX and long strings it cuts) and the values it cannot show (decimals; a zero-length
  binary, on which Wireshark 4.0 fails an assertion and stops decoding the packet).
* ``echo_wrong_type`` (:func:`build_wrong_type`): the server's first flow gets an ``echo`` field
  encoded as smalluint 7 where the spec wants a boolean: a deliberate disagreement (Wireshark
  shows ``True``, we show the value on the wire and a type violation), explained by no known
  Wireshark defect.
"""

from __future__ import annotations

import struct
from pathlib import Path

from proton import Message

from amqp_dissect.amqp.spec import BY_DESCRIPTOR, COMPOSITES
from pcapbuild import TcpConversation, write_pcap
from protonpump import Pump

ATTACH = COMPOSITES["attach"].descriptor_code & 0xFF
FLOW = COMPOSITES["flow"].descriptor_code & 0xFF


def _frames(chunk: bytes) -> list[bytes]:
    """A chunk of one side's output split into protocol headers and frames (proton writes whole ones)."""
    out, pos = [], 0
    while pos < len(chunk):
        if chunk[pos:pos + 4] == b"AMQP":
            out.append(chunk[pos:pos + 8])
            pos += 8
            continue
        size = struct.unpack_from(">I", chunk, pos)[0]
        out.append(chunk[pos:pos + size])
        pos += size
    assert pos == len(chunk), "a chunk ends inside a frame"
    return out


def _body(frame: bytes) -> tuple[int, bytes] | None:
    if frame[:4] == b"AMQP" or len(frame) <= 8:
        return None
    doff = frame[4] * 4
    return doff, frame[doff:]


def _with_body(frame: bytes, doff: int, body: bytes) -> bytes:
    return struct.pack(">I", doff + len(body)) + frame[4:doff] + body


def _descriptor_as(form: str):
    def rewrite(direction: int, frame: bytes) -> bytes:
        b = _body(frame)
        if b is None or b[1][:3] != bytes([0x00, 0x53, ATTACH]):
            return frame
        doff, body = b
        if form == "ulong":
            desc = b"\x00\x80" + struct.pack(">Q", ATTACH)
        else:
            sym = BY_DESCRIPTOR[ATTACH].descriptor_symbol.encode()
            desc = b"\x00\xa3" + bytes([len(sym)]) + sym
        return _with_body(frame, doff, desc + body[3:])
    return rewrite


def _echo_wrong_type():
    done = []

    def rewrite(direction: int, frame: bytes) -> bytes:
        b = _body(frame)
        if done or direction != 1 or b is None or b[1][:4] != bytes([0x00, 0x53, FLOW, 0xC0]):
            return frame
        doff, body = b
        size, count = body[4], body[5]
        elements = body[6:5 + size]
        # fill the fields up to echo (index 9) with nulls, then echo as smalluint 7
        pad = 9 - count
        assert pad >= 0, "the flow already carries an echo field"
        new = elements + b"\x40" * pad + b"\x52\x07"
        done.append(True)
        return _with_body(frame, doff, body[:4] + bytes([len(new) + 1, 10]) + new + body[5 + size:])
    return rewrite


def _build(path: Path, rewrite) -> Path:
    p = Pump()
    snd = p.sender("q1")
    p.run()
    for i in range(2):
        p.send(snd, Message(body=f"message {i}"))
    p.run()
    p.close()
    exchange = [(d, b"".join(rewrite(d, f) for f in _frames(chunk))) for d, chunk in p.chunks]
    conv = TcpConversation.from_exchange(exchange, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.001)
    path.write_bytes(write_pcap(conv.records))
    return path


def build_all(folder: Path) -> dict[str, Path]:
    """The captures showing known Wireshark defects: name -> path."""
    folder = Path(folder)
    return {
        "descriptor_ulong": _build(folder / "descriptor_ulong.pcap", _descriptor_as("ulong")),
        "descriptor_symbol": _build(folder / "descriptor_symbol.pcap", _descriptor_as("symbol")),
        "types": build_types(folder),
        "ulong_ids": build_ulong_ids(folder),
        **public_like(),
    }


ULONG_IDS = (5, 7005, 2**40 + 3)


def build_ulong_ids(folder: Path) -> Path:
    """``ulong_ids.pcap``: message-id and correlation-id as ulong 5 (smallulong), 7005 and 2^40+3 (8-byte
    ulong, as samples/messages/request_reply.pcap holds them; Wireshark 4.0 shows their upper 32 bits)."""
    from proton import ulong

    p = Pump()
    snd = p.sender("ids")
    p.run()
    for v in ULONG_IDS:
        p.send(snd, Message(body="x", id=ulong(v), correlation_id=ulong(v)))
        p.run()
    p.close()
    conv = TcpConversation.from_exchange(list(p.chunks), client=("10.0.0.1", 40002), server=("10.0.0.2", 5672))
    path = Path(folder) / "ulong_ids.pcap"
    path.write_bytes(write_pcap(conv.records))
    return path


def public_like() -> dict[str, Path]:
    """The committed captures like those other projects publish (tests/data/compare/README.md): a type test
    (zero-length binary with frames after it in its packet, described bodies) and described filter values;
    and the sample outside samples/*.pcap whose defect no other capture shows (a gap that cut a frame)."""
    data = Path(__file__).resolve().parents[1] / "data" / "compare"
    samples = Path(__file__).resolve().parents[2] / "samples"
    return {"qpid_types": data / "qpid_types.pcap", "qpid_selector": data / "qpid_selector.pcap",
            "kernel_loss": samples / "loss" / "kernel_loss.pcap"}


def build_wrong_type(folder: Path) -> Path:
    """The capture with the deliberate, unexplained disagreement."""
    return _build(Path(folder) / "echo_wrong_type.pcap", _echo_wrong_type())


# --------------------------------------------------------------------------- values of every type

DBL_MAX = 1.7976931348623157e308


def type_messages() -> list:
    """Messages whose application-properties, annotations and bodies hold a value of every AMQP type,
    with the spellings Wireshark writes its own way: inf / -inf / NaN floats and doubles, +-DBL_MAX,
    uuids, timestamps (epoch, before 1970, far future), chars, long strings Wireshark cuts, and
    zero-length strings, symbols and binaries."""
    import uuid

    from proton import (char, decimal32, decimal64, float32, int32, symbol, timestamp, ubyte, uint, ulong,
                        ushort, byte, short)

    long_text = "".join(chr(0x41 + i % 26) for i in range(600))
    props = {
        "f-inf": float32(float("inf")), "f-ninf": float32(float("-inf")), "f-nan": float32(float("nan")),
        "f-one": float32(1.5), "d-inf": float("inf"), "d-ninf": float("-inf"), "d-nan": float("nan"),
        "d-max": DBL_MAX, "d-nmax": -DBL_MAX, "d-tiny": 5e-324, "d-pi": 3.141592653589793,
        "uuid": uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
        "ts-epoch": timestamp(0), "ts-ms": timestamp(1_700_000_000_123), "ts-neg": timestamp(-86_400_000),
        "ts-far": timestamp(253_402_300_799_000),
        "char": char("é"), "long-text": long_text, "empty-text": "", "empty-sym": symbol(""),
        "empty-bin": b"", "bin": b"\x00\x01\xfe\xff",
        "ubyte": ubyte(255), "ushort": ushort(65535), "uint": uint(4294967295), "ulong": ulong(2 ** 64 - 1),
        "byte": byte(-128), "short": short(-32768), "int": int32(-2 ** 31), "long": -2 ** 63,
        "true": True, "false": False, "null": None,
        "dec32": decimal32(0x22500001), "dec64": decimal64(0x2238000000000001),
        "dec128": decimal128(b"\x22\x08" + b"\x00" * 13 + b"\x01"),
    }
    from proton import Message
    msgs = [Message(body=f"all types {i}", properties={k: v}) for i, (k, v) in enumerate(props.items())]
    msgs.append(Message(body=uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")))
    msgs.append(Message(body=float("nan")))
    msgs.append(Message(body=""))
    msgs.append(Message(body=b""))
    msgs.append(Message(body=long_text))
    msgs.append(Message(body=timestamp(1_700_000_000_123), subject="", creation_time=1_700_000_000.5))
    return msgs


def decimal128(b: bytes):
    from proton import decimal128 as d128
    return d128(b)


def build_types(folder: Path) -> Path:
    """``types.pcap``: a value of every type (:func:`type_messages`), one per message."""
    p = Pump()
    snd = p.sender("types")
    p.run()
    for m in type_messages():
        p.send(snd, m)
        p.run()
    p.close()
    conv = TcpConversation.from_exchange(list(p.chunks), client=("10.0.0.1", 40001), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.001)
    path = Path(folder) / "types.pcap"
    path.write_bytes(write_pcap(conv.records))
    return path
