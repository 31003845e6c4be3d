"""The decoder reads a value inside a larger buffer of any kind the same way.

``Reader(buf, pos, end)`` reads a ``bytes`` buffer in place and any other buffer (the
framing layer's bytearray, a memoryview) from a copy of ``buf[pos:end]``; offsets (``pos``,
``end``, ``need()`` and the offsets in error messages) are offsets in ``buf`` either way.
Proton encodes the values (the oracle for what they decode to); each is then read from
inside a buffer with other bytes before and after it, whole and cut short, as bytes,
bytearray and memoryview.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.amqp.codec import Reader, decode
from amqp_dissect.errors import DissectError

from test_codec_proton import VALUES, our_node, pn_decode_all, proton_encode, transcode

KINDS = (bytes, bytearray, memoryview)


def read(buf, pos: int, end: int):
    """('ok', node, reader position) or ('error', exception type, message)."""
    r = Reader(buf, pos, end)
    try:
        v = r.value()
    except DissectError as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", our_node(v), r.pos)


def framed(data: bytes, before: int, after: int):
    """``data`` with ``before`` and ``after`` filler bytes around it (0x45: a list0 constructor,
    so a read that strays outside ``pos..end`` would not fail by chance)."""
    return b"\x45" * before + data + b"\x45" * after


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, st.sampled_from(["keep", "narrow", "wide"]), st.integers(0, 9), st.integers(0, 9), st.data())
def test_a_value_inside_any_buffer_reads_the_same(node, mode, before, after, data):
    enc = transcode(proton_encode(node), mode)
    [expected] = pn_decode_all(enc)
    cut = data.draw(st.integers(0, len(enc)), label="cut")
    buf = framed(enc, before, after)
    whole = [read(kind(buf), before, before + len(enc)) for kind in KINDS]
    assert whole[0] == ("ok", expected, before + len(enc))
    assert whole[1] == whole[0] and whole[2] == whole[0]
    short = [read(kind(buf), before, before + cut) for kind in KINDS]
    assert short[1] == short[0] and short[2] == short[0]
    if cut < len(enc):
        assert short[0][0] == "error"  # an encoding cut short never decodes


@pytest.mark.parametrize("kind", KINDS)
def test_offsets_are_offsets_in_the_buffer(kind):
    buf = kind(b"\x00\x00\x00\xa1\x05ab")  # str8 of 5 bytes at offset 3 with only 2 present
    r = Reader(buf, 3)
    with pytest.raises(DissectError, match="need 5 bytes at offset 5, only 2 remain"):
        r.value()
    r = Reader(kind(b"\x00\x00\xff"), 2)
    with pytest.raises(DissectError, match="invalid constructor 0xff at offset 2"):
        r.value()
    r = Reader(kind(b"\x00\x52\x07\x52\x08\x00"), 1, 5)
    assert (r.pos, r.end, r.remaining) == (1, 5, 4)
    assert r.value() == 7 and r.pos == 3
    assert r.need(1) == 3 and r.pos == 4
    assert r.take(1) == b"\x08" and r.remaining == 0
    r.pos = 1
    assert r.u8() == 0x52 and r.pos == 2


def test_decode_reads_any_buffer():
    enc = proton_encode(("list", [("string", "ab"), ("ulong", 7)]))
    assert [our_node(decode(kind(enc))) for kind in KINDS] == [pn_decode_all(enc)[0]] * 3
