"""Bounded, hostile and malformed input for :mod:`amqp_dissect.amqp.codec`.

Whatever the bytes, decoding either returns a value or raises
:class:`~amqp_dissect.errors.DecodeError` (``LimitExceeded`` is one); nothing
else may escape, and hostile length or count fields must not make the decoder
allocate memory in proportion to what they claim.

Valid encodings come from proton (the generators of ``test_codec_proton``),
re-encoded into narrow and wide forms; the malformed ones are written by hand
from the encoding rules of the AMQP 1.0 types section.
"""

from __future__ import annotations

import importlib.util
import struct
import sys
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.amqp.codec import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENTS,
    Array,
    Described,
    decode,
    decode_all,
)
from amqp_dissect.errors import DecodeError, LimitExceeded


def _sibling(name: str):
    """The helpers of a sibling test module, whatever pytest's import mode."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


P = _sibling("test_codec_proton")

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MB = 1 << 20


def decodes_or_decode_error(data: bytes):
    """Decode ``data``; only DecodeError may be raised.  Returns the value or the error."""
    try:
        return decode(data)
    except DecodeError as e:
        return e


def peak_allocation(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# valid encodings: proton's, and the narrowest / widest re-encodings of them
ENCODINGS = st.tuples(P.VALUES, st.sampled_from(["keep", "narrow", "wide"])).map(
    lambda t: P.transcode(P.proton_encode(t[0]), t[1])
)


def _prefix_lengths(n: int) -> list[int]:
    if n <= 400:
        return list(range(n))
    return sorted(set(range(200)) | set(range(n - 200, n)) | set(range(0, n, 7)))


# --------------------------------------------------------------------------- truncation and garbage


@SETTINGS
@given(ENCODINGS)
def test_every_prefix_of_a_valid_encoding_raises_decode_error(data):
    decode(data)  # the whole encoding is valid
    for n in _prefix_lengths(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:n])


@SETTINGS
@given(ENCODINGS, st.binary(min_size=1, max_size=8))
def test_trailing_bytes_after_a_value_raise_decode_error(data, extra):
    with pytest.raises(DecodeError):
        decode(data + extra)


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_raise_nothing_but_decode_error(data):
    decodes_or_decode_error(data)
    try:
        decode_all(data)
    except DecodeError:
        pass


@SETTINGS
@given(ENCODINGS, st.data())
def test_mutated_valid_encodings_raise_nothing_but_decode_error(data, draw):
    buf = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        i = draw.draw(st.integers(0, len(buf) - 1))
        buf[i] = draw.draw(st.sampled_from([0x00, 0x01, 0x40, 0x45, 0x7F, 0x80, 0xFF, buf[i] ^ 0xFF]))
    decodes_or_decode_error(bytes(buf))


@SETTINGS
@given(st.lists(st.sampled_from(
    [b"\x00", b"\x40", b"\x45", b"\x53\x10", b"\xa3\x01a", b"\xc0\x01\x00", b"\xc1\x03\x02",
     b"\xc0\x03\x01", b"\xe0\x02\x01", b"\xe0\x03\x02\x00", b"\xf0\x00\x00\x00\x05\x00\x00\x00\x02",
     b"\x56\x01", b"\x73\x00\x00\x00\x41", b"\x41", b"\x98" + bytes(16), b"\xd1\x00\x00\x00\x04"]
), max_size=12))  # fmt: skip
def test_structured_garbage_raises_nothing_but_decode_error(pieces):
    decodes_or_decode_error(b"".join(pieces))


# --------------------------------------------------------------------------- hostile lengths and counts

HUGE = 0xFFFFFFFF


@pytest.mark.parametrize(
    "data",
    [
        b"\xb1" + struct.pack(">I", HUGE) + b"abc",  # str32
        b"\xb0" + struct.pack(">I", HUGE) + b"abc",  # vbin32
        b"\xb3" + struct.pack(">I", HUGE) + b"abc",  # sym32
        b"\xd0" + struct.pack(">II", HUGE, 1) + b"\x40",  # list32 size
        b"\xd1" + struct.pack(">II", HUGE, 2) + b"\x40\x40",  # map32 size
        b"\xf0" + struct.pack(">II", HUGE, 1) + b"\x40",  # array32 size
        b"\xd0" + struct.pack(">II", 5, HUGE) + b"\x40",  # list32 count
        b"\xd1" + struct.pack(">II", 6, HUGE - 1) + b"\x40\x40",  # map32 count
        b"\xf0" + struct.pack(">II", 6, HUGE) + b"\x70\x00",  # array32 count, 4-byte elements
        b"\xf0" + struct.pack(">II", 6, HUGE) + b"\xa1\x00",  # array32 count, str8 elements
        b"\xf0" + struct.pack(">II", 6, HUGE) + b"\xc0\x01",  # array32 count, list8 elements
        b"\xa1\xff" + b"x" * 10,  # str8 longer than the buffer
        b"\xc0\xff\x01\x40",  # list8 size beyond the buffer
        b"\xc0\x02\xff\x40",  # list8 count beyond its size
        b"\xe0\x02\xff\x50",  # array8 of 255 ubytes in no bytes at all
    ],
    ids=lambda d: d[:10].hex(),
)
def test_hostile_lengths_raise_decode_error_without_allocating(data):
    peak = peak_allocation(lambda: pytest.raises(DecodeError, decode, data))
    assert peak < 2 * MB


@pytest.mark.parametrize(
    "element",
    [b"\x40", b"\x41", b"\x42", b"\x43", b"\x44", b"\x45", b"\x00\x53\x10\x45", b"\x00\xa3\x01x\x40"],
    ids=["null", "true", "false", "uint0", "ulong0", "list0", "described-list0", "described-null"],
)
@pytest.mark.parametrize("count", [2**31, HUGE, DEFAULT_MAX_ELEMENTS + 1])
def test_arrays_of_zero_width_elements_hit_the_element_cap(element, count):
    """array32 of 2**31 zero-width elements: 14 bytes claiming billions of values."""
    body = struct.pack(">I", count) + element
    data = b"\xf0" + struct.pack(">I", len(body)) + body
    peak = peak_allocation(lambda: pytest.raises(LimitExceeded, decode, data))
    assert peak < 4 * MB


@pytest.mark.parametrize("element", [b"\x40", b"\x00\x53\x10\x45"], ids=["null", "described-list0"])
def test_a_few_bytes_of_zero_width_array_do_not_cost_a_hundred_megabytes(element):
    """A 10-13 byte array32 holding as many zero-width elements as the element cap allows.

    The element cap (DEFAULT_MAX_ELEMENTS) lets this through: the decoder then
    builds a million objects -- 16 MB for nulls, ~130 MB for described list0
    (a fresh list and a Composite each) -- from a dozen bytes of input.  Either
    a lower cap for zero-width elements (LimitExceeded) or a compact result is
    fine; allocating this much for it is not.
    """
    body = struct.pack(">I", DEFAULT_MAX_ELEMENTS) + element
    data = b"\xf0" + struct.pack(">I", len(body)) + body
    peak = peak_allocation(lambda: decodes_or_decode_error(data))
    assert peak < 8 * MB, f"{len(data)} bytes of input allocated {peak / MB:.0f} MB"


def test_zero_width_array_within_the_cap_decodes_exactly():
    body = struct.pack(">I", 1000) + b"\x43"
    v = decode(b"\xf0" + struct.pack(">I", len(body)) + body)
    assert v.element_type == "uint" and len(v) == 1000 and set(v) == {0}
    assert decode(b"\xe0\x02\xff\x40") == [None] * 255


def test_the_element_cap_counts_across_nested_compounds():
    inner = b"\xe0\x02\xc8\x40"  # array8 of 200 nulls
    data = b"\xc0" + bytes([1 + 5 * len(inner), 5]) + inner * 5  # list8 of five of them
    assert len(decode(data, max_elements=1005)) == 5
    with pytest.raises(LimitExceeded):
        decode(data, max_elements=999)


# --------------------------------------------------------------------------- nesting


def _nested_lists(depth: int) -> bytes:
    """list32 of one list32 of ... of list0 (``depth`` list32 levels)."""
    pieces, inner = [], 1
    for _ in range(depth):
        pieces.append(b"\xd0" + struct.pack(">II", inner + 4, 1))
        inner += 9
    return b"".join(reversed(pieces)) + b"\x45"


def _nested_maps(depth: int) -> bytes:
    """map32 {null: map32 {null: ... {null: null}}} (``depth`` maps)."""
    pieces, inner = [], 1
    for _ in range(depth):
        pieces.append(b"\xd1" + struct.pack(">II", inner + 5, 2) + b"\x40")
        inner += 10
    return b"".join(reversed(pieces)) + b"\x40"


def _nested_arrays(depth: int) -> bytes:
    """array32 of one array32 of ... of an empty array of ubyte (``depth`` arrays).

    An array's elements are written without their (shared) constructor, so each
    level is: size, count 1, element constructor 0xf0, then the inner array's body.
    """
    pieces, inner = [], 9  # the innermost body: size 5, count 0, constructor 0x50
    for _ in range(depth - 1):
        pieces.append(struct.pack(">II", inner + 5, 1) + b"\xf0")
        inner += 9
    return b"\xf0" + b"".join(reversed(pieces)) + struct.pack(">II", 5, 0) + b"\x50"


def _nested_described(depth: int) -> bytes:
    """described(1, described(1, ... null)): values nested ``depth`` deep."""
    return b"\x00\x53\x01" * depth + b"\x40"


def _nested_descriptors(depth: int) -> bytes:
    """A described value whose descriptor is described, ``depth`` levels deep."""
    return b"\x00" * depth + b"\x53\x01" + b"\x40" * depth


def _walk_lists(v, depth):
    for _ in range(depth):
        assert isinstance(v, list) and len(v) == 1
        v = v[0]
    assert v == [] and not isinstance(v, Array)


def _walk_maps(v, depth):
    for _ in range(depth):
        assert isinstance(v, dict) and list(v) == [None]
        v = v[None]
    assert v is None


def _walk_arrays(v, depth):
    for _ in range(depth - 1):
        assert isinstance(v, Array) and v.element_type == "array" and len(v) == 1
        v = v[0]
    assert isinstance(v, Array) and v.element_type == "ubyte" and len(v) == 0


def _walk_described(v, depth):
    for _ in range(depth):
        assert isinstance(v, Described) and v.descriptor == 1
        v = v.value
    assert v is None


def _walk_descriptors(v, depth):
    for _ in range(depth - 1):
        assert isinstance(v, Described) and v.value is None
        v = v.descriptor
    assert isinstance(v, Described) and v.descriptor == 1 and v.value is None


NESTERS = {
    "lists": (_nested_lists, _walk_lists),
    "maps": (_nested_maps, _walk_maps),
    "arrays": (_nested_arrays, _walk_arrays),
    "described": (_nested_described, _walk_described),
    "descriptors": (_nested_descriptors, _walk_descriptors),
}


@pytest.mark.parametrize("kind", sorted(NESTERS))
@pytest.mark.parametrize("cap", [1, 5, 20])
def test_nesting_up_to_the_cap_decodes_and_one_more_level_raises(kind, cap):
    nest, walk = NESTERS[kind]
    walk(decode(nest(cap), max_depth=cap), cap)
    with pytest.raises(LimitExceeded):
        decode(nest(cap + 1), max_depth=cap)


@pytest.mark.parametrize("kind", sorted(NESTERS))
def test_very_deep_nesting_raises_limit_exceeded_not_recursion_error(kind):
    nest, walk = NESTERS[kind]
    walk(decode(nest(DEFAULT_MAX_DEPTH)), DEFAULT_MAX_DEPTH)  # the default cap itself is fine
    with pytest.raises(LimitExceeded):
        decode(nest(DEFAULT_MAX_DEPTH + 1))
    with pytest.raises(LimitExceeded):
        decode(nest(5_000))


# --------------------------------------------------------------------------- malformed values


def _xml_constructor_codes() -> set[int]:
    ns = "{http://www.amqp.org/schema/amqp.xsd}"
    root = ET.parse(P.XML_DIR / "types.xml").getroot()
    return {int(e.get("code"), 16) for e in root.iter(f"{ns}encoding")}


@pytest.mark.parametrize("code", sorted(set(range(1, 256)) - _xml_constructor_codes()))
def test_constructors_types_xml_does_not_define_raise_decode_error(code):
    for tail in (b"", b"\x00" * 20):
        with pytest.raises(DecodeError):
            decode(bytes([code]) + tail)
    with pytest.raises(DecodeError):  # also as an array's element constructor
        decode(b"\xe0\x03\x01" + bytes([code, 0]))


@pytest.mark.parametrize(
    "data",
    [
        b"\xa1\x02\xc3\x28",  # str8: invalid UTF-8
        b"\xb1\x00\x00\x00\x01\xff",  # str32: invalid UTF-8
        b"\xa1\x03\xed\xa0\x80",  # str8: an encoded surrogate
        b"\xa1\x01\xc3",  # str8: truncated multi-byte sequence
        b"\xa3\x01\xe9",  # sym8: not ASCII
        b"\xb3\x00\x00\x00\x02\xc3\xa9",  # sym32: UTF-8 but not ASCII
        b"\x56\x02",  # boolean byte 0x02
        b"\x56\xff",
        b"\xe0\x04\x02\x56\x01\x02",  # ... inside an array
        b"\x73\x00\x11\x00\x00",  # char U+110000
        b"\x73\xff\xff\xff\xff",
        b"\x73\x00\x00\xd8\x00",  # char: a surrogate
        b"\xc1\x03\x01\x40\x40",  # map8 with an odd count
        b"\xd1\x00\x00\x00\x07\x00\x00\x00\x03\x40\x40\x40",  # map32 with an odd count
        b"\xc0\x03\x01\x40\x40",  # list8: one element, one byte of its size left over
        b"\xc0\x02\x02\x40\x40",  # list8: two elements, the second outside its size
        b"\xd0\x00\x00\x00\x06\x00\x00\x00\x01\x40\x40",  # list32 with a byte left over
        b"\xe0\x04\x01\x50\x01\x02",  # array8 with a byte left over
        b"\xe0\x03\x02\x50\x01",  # array8 with an element outside its size
        b"\xc0\x00",  # list8 size smaller than its count field
        b"\xd0\x00\x00\x00\x03\x00\x00\x00",  # list32 size smaller than its count field
        b"\xe0\x01\x00",  # array8 without an element constructor
        b"\x00",  # a descriptor constructor and nothing else
        b"\x00\x53\x10",  # a descriptor without its value
        b"\x40\x40",  # two values where one is expected
        b"",
    ],
    ids=lambda d: d.hex() or "empty",
)
def test_malformed_values_raise_decode_error(data):
    with pytest.raises(DecodeError):
        decode(data)


@pytest.mark.parametrize(
    "key",
    [
        b"\x00\x45\x40",  # described null with a list0 descriptor
        b"\x00\xc1\x01\x00\x40",  # described null with an empty map descriptor
        b"\x00\xc0\x02\x01\x45\xa1\x01k",  # described string with a list descriptor
    ],
    ids=["list-descriptor", "map-descriptor", "list-of-list-descriptor"],
)
def test_map_key_described_with_an_unhashable_descriptor(key):
    """A map key that is a described value whose descriptor is a list or a map.

    Odd but well-formed (a descriptor may be any value); it must decode, or at
    worst raise DecodeError -- never TypeError ("unhashable type").
    """
    body = bytes([2]) + key + b"\x52\x07"
    data = b"\xc1" + bytes([len(body)]) + body
    v = decodes_or_decode_error(data)
    assert not isinstance(v, DecodeError), v
    [(k, value)] = v.items()
    assert value == 7
