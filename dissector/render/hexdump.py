"""``frames -x``: the bytes of each AMQP protocol header and frame as tshark's ``-x`` lays out a
packet's: a line per 16 bytes, the offset in hex, two spaces, the bytes in hex separated by
spaces, three spaces, the bytes as ASCII (``.`` for a byte outside 0x20-0x7e).  tshark dumps the
whole packet; this dumps the AMQP frame (offsets from the frame's first byte)."""

from __future__ import annotations

from amqp_dissect.amqp.framing import Frame, ProtocolHeader

_ASCII = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in range(256))


def hex_lines(data: bytes) -> list[str]:
    """``data`` in tshark's ``-x`` layout, a string per line (no line for no bytes).  The offset has
    4 hex digits, or as many as the last offset needs (Wireshark's rule)."""
    out = []
    digits = max(4, len(f"{len(data) - 1:x}"))
    for off in range(0, len(data), 16):
        row = data[off:off + 16]
        hexes = " ".join(f"{b:02x}" for b in row)
        out.append(f"{off:0{digits}x}  {hexes:<47}   {row.decode('latin-1').translate(_ASCII_TABLE)}")
    return out


_ASCII_TABLE = {i: c for i, c in enumerate(_ASCII)}


def event_bytes(ev) -> bytes | None:
    """The bytes of a protocol header (its 8 bytes, exact: ``AMQP`` + id + version) or of a frame
    read with ``messages="raw"`` (``frame.raw``); None for anything else."""
    if type(ev) is Frame:
        return getattr(ev, "raw", None)
    if isinstance(ev, ProtocolHeader):
        major, minor, revision = ev.version
        return b"AMQP" + bytes((ev.protocol_id & 0xFF, major & 0xFF, minor & 0xFF, revision & 0xFF))
    return None
