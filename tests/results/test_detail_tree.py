"""The ``frames -V`` tree of a frame (render.frames.frame_detail): the parts it makes once and
reuses (each frame's first lines, each composite's per-field layout) show each frame's own
values, whatever frames came before it."""

from __future__ import annotations

from proton import Data, symbol

from amqp_dissect.amqp.codec import decode
from amqp_dissect.amqp.framing import Frame
from amqp_dissect.render.frames import composite_lines, frame_detail


def _encode(put) -> bytes:
    d = Data()
    put(d)
    return d.encode()


def _frame(size: int, doff: int, ftype: int, channel: int, src="10.0.0.1:5672", dst="10.0.0.2:40000") -> Frame:
    fr = Frame.__new__(Frame)
    fr._init(None, 0, src, dst, 1, 0, 1, size, doff, ftype, channel)
    fr.ext = bytes((doff - 2) * 4)
    return fr


def _transfer(handle: int, delivery_id: int, tag: bytes, settled: bool):
    return decode(_encode(lambda d: (
        d.put_described(), d.enter(), d.put_ulong(0x14), d.put_list(), d.enter(),
        d.put_uint(handle), d.put_uint(delivery_id), d.put_binary(tag), d.put_uint(0), d.put_bool(settled),
        d.exit(), d.exit())))


def test_each_frame_shows_its_own_header_fields_on_a_channel_seen_before():
    # heartbeats (size = doff * 4) on one connection and channel, the header fields differing
    frames = [(8, 2, 0), (12, 3, 0), (8, 2, 1), (16, 4, 1), (8, 2, 0)]
    for size, doff, ftype in frames:
        lines = frame_detail(_frame(size, doff, ftype, 0))
        assert lines[:5] == [
            "Advanced Message Queuing Protocol, 10.0.0.1:5672 -> 10.0.0.2:40000, channel 0",
            f"    Length: {size}",
            f"    Doff: {doff}",
            "    Type: " + ("AMQP (0)" if ftype == 0 else "SASL (1)"),
            "    Channel: 0",
        ]
        assert ("    Extended header: " + "00" * (doff - 2) * 4 in lines) == (doff > 2)
    other = frame_detail(_frame(8, 2, 0, 7, src="10.0.0.3:1", dst="10.0.0.4:2"))
    assert other[0] == "Advanced Message Queuing Protocol, 10.0.0.3:1 -> 10.0.0.4:2, channel 7"
    assert other[4] == "    Channel: 7"


def test_each_transfer_shows_its_own_field_values():
    for handle, delivery_id, tag, settled in [(0, 1, b"a", False), (7, 4294967295, b"\x00\xff" * 40, True)]:
        fr = _frame(64, 2, 0, 1)
        fr.set_performative(_transfer(handle, delivery_id, tag, settled))
        lines = frame_detail(fr)
        tag_text = "0x" + (tag.hex() if len(tag) <= 60 else tag[:60].hex() + "…")
        assert "    Performative: transfer (descriptor 0x00000000:0x00000014)" in lines
        for line in (f"        handle (uint): {handle}", f"        delivery-id (uint): {delivery_id}",
                     f"        delivery-tag (binary): {tag_text}", "        message-format (uint): 0",
                     f"        settled (boolean): {'true' if settled else 'false'}",
                     "        more (boolean): false [default]"):
            assert line in lines, line
        assert all("\n" not in x for x in lines)  # one line an item


def test_string_and_symbol_leaves_are_their_repr_cut_at_120_characters():
    long = "x'\"\\é" * 40  # quotes, a backslash and a non-ASCII letter: repr's escapes
    v = decode(_encode(lambda d: (
        d.put_described(), d.enter(), d.put_ulong(0x73), d.put_list(), d.enter(),
        d.put_binary(b"id"), d.put_binary(b"u"), d.put_string(long), d.put_string("short"),
        d.put_symbol(symbol("s'ym")), d.exit(), d.exit())))
    lines = composite_lines(v, 1)
    assert f"    to (string): {long[:120] + '…'!r}" in lines
    assert "    subject (string): 'short'" in lines
    assert f"    reply-to (symbol): {'s' + chr(39) + 'ym'!r}" in lines


def test_a_composite_deeper_than_the_indent_table_is_indented_alike():
    v = decode(_encode(lambda d: (
        d.put_described(), d.enter(), d.put_ulong(0x70), d.put_list(), d.enter(), d.put_bool(True),
        d.exit(), d.exit())))
    base = composite_lines(v, 0)
    assert base[0] == "durable (boolean): true"
    for indent in (15, 16, 17, 40, 70):
        assert composite_lines(v, indent) == ["    " * indent + x for x in base]
