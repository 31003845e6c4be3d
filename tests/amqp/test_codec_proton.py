"""Differential tests: :mod:`amqp_dissect.amqp.codec` against python-qpid-proton's codec.

The oracle is always proton: values are built with proton's ``Data`` ``put_*``
API (or as proton ``Message`` objects), encoded by proton, and what *proton*
decodes from those bytes (walked node by node with ``Data.next()/type()``) is
compared with what our decoder returns.  Both sides are turned into the same
normalized ``(amqp type, value)`` tree, so the AMQP type of every node is
checked, not only the Python value.  Floats are compared bit for bit.

Proton's ``Data`` encoder always writes list32/map32/array32 and the smallest
scalar forms, so the test also re-encodes proton's bytes with a small
transcoder of its own ("narrow": the smallest encoding of every node, list0,
uint0, true/false, list8/map8/array8, sym8 ...; "wide": the largest, 0x80
descriptors, list32 ...).  Proton decodes every re-encoding too, and must find
the same tree: that keeps the transcoder honest and proton stays the oracle.

Names and defaults of the spec's composites are read from the XML with
ElementTree here, never from the generated module.
"""

from __future__ import annotations

import functools
import struct
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proton
from proton import Data, Message

from amqp_dissect.amqp.codec import (
    ABSENT,
    Array,
    Composite,
    Described,
    amqp_type_of,
    decode,
    decode_all,
)

REPO = Path(__file__).resolve().parents[2]
XML_DIR = REPO / "dissector" / "amqp" / "spec"
NS = "{http://www.amqp.org/schema/amqp.xsd}"

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --------------------------------------------------------------------------- the XML, read here


def _xml_types() -> dict[str, ET.Element]:
    out = {}
    for path in sorted(XML_DIR.glob("*.xml")):
        for t in ET.parse(path).getroot().iter(f"{NS}type"):
            out[t.get("name")] = t
    return out


XML_TYPES = _xml_types()
XML_COMPOSITES = {n: t for n, t in XML_TYPES.items() if t.get("class") == "composite"}


def _descriptor_code(text: str) -> int:
    hi, lo = text.split(":")
    return (int(hi, 16) << 32) | int(lo, 16)


XML_BY_CODE: dict[int, str] = {}
XML_BY_SYMBOL: dict[str, str] = {}
XML_SYMBOL_OF: dict[str, str] = {}
XML_CODE_OF: dict[str, int] = {}
for _name, _t in XML_TYPES.items():
    _d = _t.find(f"{NS}descriptor")
    if _d is not None:
        XML_BY_CODE[_descriptor_code(_d.get("code"))] = _name
        XML_BY_SYMBOL[_d.get("name")] = _name
        XML_SYMBOL_OF[_name] = _d.get("name")
        XML_CODE_OF[_name] = _descriptor_code(_d.get("code"))

XML_PROVIDERS: dict[str, list[str]] = {}
for _name, _t in XML_TYPES.items():
    for _p in (_t.get("provides") or "").split(","):
        if _p.strip():
            XML_PROVIDERS.setdefault(_p.strip(), []).append(_name)

INT_TYPES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"}


def xml_primitive(type_name: str) -> str:
    seen = set()
    while type_name in XML_TYPES and XML_TYPES[type_name].get("class") == "restricted":
        if type_name in seen:
            break
        seen.add(type_name)
        type_name = XML_TYPES[type_name].get("source")
    return type_name


def xml_default(field: ET.Element):
    """The wire value of a field's default, worked out from the XML alone."""
    text = field.get("default")
    if text is None:
        return None
    t = field.get("type")
    while t in XML_TYPES and XML_TYPES[t].get("class") == "restricted":
        choice = {c.get("name"): c.get("value") for c in XML_TYPES[t].findall(f"{NS}choice")}
        if text in choice:
            text = choice[text]
            break
        t = XML_TYPES[t].get("source")
    prim = xml_primitive(field.get("type"))
    if prim == "boolean":
        return {"true": True, "false": False}[text]
    if prim in INT_TYPES:
        return int(text)
    return text


def xml_fields(name: str) -> list[ET.Element]:
    return XML_COMPOSITES[name].findall(f"{NS}field")


# --------------------------------------------------------------------------- normalized trees

PN_NAME = {
    Data.NULL: "null",
    Data.BOOL: "boolean",
    Data.UBYTE: "ubyte",
    Data.USHORT: "ushort",
    Data.UINT: "uint",
    Data.ULONG: "ulong",
    Data.BYTE: "byte",
    Data.SHORT: "short",
    Data.INT: "int",
    Data.LONG: "long",
    Data.FLOAT: "float",
    Data.DOUBLE: "double",
    Data.DECIMAL32: "decimal32",
    Data.DECIMAL64: "decimal64",
    Data.DECIMAL128: "decimal128",
    Data.CHAR: "char",
    Data.TIMESTAMP: "timestamp",
    Data.UUID: "uuid",
    Data.BINARY: "binary",
    Data.STRING: "string",
    Data.SYMBOL: "symbol",
    Data.DESCRIBED: "described",
    Data.ARRAY: "array",
    Data.LIST: "list",
    Data.MAP: "map",
}
PN_CODE = {v: k for k, v in PN_NAME.items()}


def expected_described(desc, value) -> tuple[str, bool]:
    """(type name, is a Composite) the spec gives a described value, from the XML."""
    name = None
    if desc[0] == "ulong":
        name = XML_BY_CODE.get(desc[1])
    elif desc[0] == "symbol":
        name = XML_BY_SYMBOL.get(desc[1])
    if name is None:
        return "described", False
    return name, name in XML_COMPOSITES and value[0] == "list"


def _pn_scalar(d: Data, name: str):
    if name == "null":
        return None
    if name == "float":
        return struct.pack(">f", d.get_float())
    if name == "double":
        return struct.pack(">d", d.get_double())
    if name == "decimal32":
        return int(d.get_decimal32()).to_bytes(4, "big")
    if name == "decimal64":
        return int(d.get_decimal64()).to_bytes(8, "big")
    if name == "decimal128":
        return bytes(d.get_decimal128())
    if name in INT_TYPES or name == "timestamp":
        return int(getattr(d, f"get_{name}")())
    if name == "boolean":
        return bool(d.get_bool())
    if name in ("char", "string", "symbol"):
        return str(getattr(d, f"get_{name}")())
    if name == "binary":
        return bytes(d.get_binary())
    if name == "uuid":
        return d.get_uuid()
    raise AssertionError(name)


def pn_node(d: Data):
    """Normalize the node proton's cursor is on."""
    name = PN_NAME[d.type()]
    if name == "list":
        n = d.get_list()
        d.enter()
        items = []
        for _ in range(n):
            assert d.next() is not None
            items.append(pn_node(d))
        d.exit()
        return ("list", tuple(items))
    if name == "map":
        n = d.get_map()
        d.enter()
        flat = []
        for _ in range(n):
            assert d.next() is not None
            flat.append(pn_node(d))
        d.exit()
        return ("map", tuple(zip(flat[0::2], flat[1::2])))
    if name == "array":
        count, described, etype = d.get_array()
        d.enter()
        desc = None
        if described:
            assert d.next() is not None
            desc = pn_node(d)
        items = []
        for _ in range(count):
            assert d.next() is not None
            items.append(pn_node(d))
        d.exit()
        if desc is not None:
            items = [("elem", *expected_described(desc, i), i) for i in items]
        return ("array", PN_NAME[etype], desc, tuple(items))
    if name == "described":
        d.enter()
        assert d.next() is not None
        desc = pn_node(d)
        assert d.next() is not None
        value = pn_node(d)
        d.exit()
        return ("described", *expected_described(desc, value), desc, value)
    return (name, _pn_scalar(d, name))


def pn_decode_all(data: bytes) -> list:
    """Proton's reading of a sequence of encoded values."""
    out = []
    pos = 0
    while pos < len(data):
        d = Data()
        n = d.decode(data[pos:])
        assert n > 0
        pos += n
        d.rewind()
        assert d.next() is not None
        out.append(pn_node(d))
    return out


def our_node(v):
    """Normalize a value our decoder returned (types from ``amqp_type_of``)."""
    t = amqp_type_of(v)
    if isinstance(v, Described):
        return ("described", t, isinstance(v, Composite), our_node(v.descriptor), our_node(v.value))
    if isinstance(v, Array):
        desc = None if v.descriptor is None else our_node(v.descriptor)
        items = []
        for e in v:
            if desc is None:
                items.append(our_node(e))
            else:
                assert isinstance(e, Described), e
                assert our_node(e.descriptor) == desc
                items.append(("elem", amqp_type_of(e), isinstance(e, Composite), our_node(e.value)))
        assert t == "array"
        return ("array", v.element_type, desc, tuple(items))
    if isinstance(v, dict):
        assert t == "map"
        return ("map", tuple((our_node(k), our_node(x)) for k, x in v.items()))
    if isinstance(v, list):
        assert t == "list"
        return ("list", tuple(our_node(x) for x in v))
    if t == "null":
        assert v is None
        return ("null", None)
    if t == "boolean":
        return ("boolean", v)
    if t == "float":
        return ("float", struct.pack(">f", v))
    if t == "double":
        assert type(v) is float
        return ("double", struct.pack(">d", v))
    if t in INT_TYPES or t == "timestamp":
        assert isinstance(v, int)
        return (t, int(v))
    if t in ("decimal32", "decimal64", "decimal128"):
        return (t, bytes(v))
    if t in ("char", "string", "symbol"):
        assert isinstance(v, str)
        return (t, str(v))
    if t == "binary":
        return (t, bytes(v))
    if t == "uuid":
        assert isinstance(v, uuid.UUID)
        return (t, v)
    raise AssertionError(f"unexpected type {t!r} for {v!r}")


# --------------------------------------------------------------------------- the test's own transcoder

_FIXED_WIDTH = {0x4: 0, 0x5: 1, 0x6: 2, 0x7: 4, 0x8: 8, 0x9: 16}
_NUM_FAMILY = {
    0x43: "uint", 0x52: "uint", 0x70: "uint",
    0x44: "ulong", 0x53: "ulong", 0x80: "ulong",
    0x54: "int", 0x71: "int",
    0x55: "long", 0x81: "long",
    0x41: "bool", 0x42: "bool", 0x56: "bool",
}  # fmt: skip
_WIDEST = {"uint": 0x70, "ulong": 0x80, "int": 0x71, "long": 0x81, "bool": 0x56}
_VAR_CODES = {0xA0: (0xA0, 0xB0), 0xB0: (0xA0, 0xB0), 0xA1: (0xA1, 0xB1), 0xB1: (0xA1, 0xB1),
              0xA3: (0xA3, 0xB3), 0xB3: (0xA3, 0xB3)}  # fmt: skip


def _parse(buf: bytes, pos: int):
    code = buf[pos]
    pos += 1
    if code == 0:
        desc, pos = _parse(buf, pos)
        value, pos = _parse(buf, pos)
        return ("described", desc, value), pos
    return _parse_body(code, buf, pos)


def _parse_body(code: int, buf: bytes, pos: int):
    hi = code >> 4
    if code in _NUM_FAMILY:
        w = _FIXED_WIDTH[hi]
        raw = buf[pos : pos + w]
        if code in (0x41, 0x42, 0x43, 0x44):
            v = {0x41: True, 0x42: False}.get(code, 0)
        elif code == 0x56:
            assert raw[0] in (0, 1)
            v = raw[0] == 1
        else:
            v = int.from_bytes(raw, "big", signed=_NUM_FAMILY[code] in ("int", "long"))
        return ("num", code, v), pos + w
    if code == 0x45:
        return ("list", code, []), pos
    if hi in _FIXED_WIDTH:
        w = _FIXED_WIDTH[hi]
        return ("raw", code, bytes(buf[pos : pos + w])), pos + w
    w = 1 if hi in (0xA, 0xC, 0xE) else 4
    n = int.from_bytes(buf[pos : pos + w], "big")
    pos += w
    if hi in (0xA, 0xB):
        return ("var", code, bytes(buf[pos : pos + n])), pos + n
    end = pos + n
    count = int.from_bytes(buf[pos : pos + w], "big")
    pos += w
    if hi in (0xC, 0xD):
        items = []
        for _ in range(count):
            item, pos = _parse(buf, pos)
            items.append(item)
        assert pos == end
        return ("list" if code in (0xC0, 0xD0) else "map", code, items), pos
    desc = None
    if buf[pos] == 0:
        desc, pos = _parse(buf, pos + 1)
    ecode = buf[pos]
    pos += 1
    items = []
    for _ in range(count):
        item, pos = _parse_body(ecode, buf, pos)
        items.append(item)
    assert pos == end
    return ("array", code, desc, ecode, items), pos


def _content(node, mode: str) -> tuple[int, bytes]:
    if node[0] in ("list", "map"):
        return len(node[2]), b"".join(_emit(i, mode) for i in node[2])
    _, _, desc, ecode, items = node
    c = _choose(ecode, items, mode)
    ctor = (b"\x00" + _emit(desc, mode) if desc is not None else b"") + bytes([c])
    return len(items), ctor + b"".join(_body(c, i, mode) for i in items)


def _choose(code: int, nodes: list, mode: str) -> int:
    """The constructor for ``nodes`` (all of ``code``'s family) in ``mode``."""
    if mode == "keep":
        return code
    if code in _NUM_FAMILY:
        fam = _NUM_FAMILY[code]
        if mode == "wide":
            return _WIDEST[fam]
        vals = [n[2] for n in nodes]
        if fam == "bool":
            return 0x41 if all(vals) else 0x42 if not any(vals) else 0x56
        if fam in ("uint", "ulong"):
            zero, small, big = (0x43, 0x52, 0x70) if fam == "uint" else (0x44, 0x53, 0x80)
            return zero if all(v == 0 for v in vals) else small if all(v < 256 for v in vals) else big
        small, big = (0x54, 0x71) if fam == "int" else (0x55, 0x81)
        return small if all(-128 <= v <= 127 for v in vals) else big
    if code in _VAR_CODES:
        small, big = _VAR_CODES[code]
        if mode == "narrow" and all(len(n[2]) <= 255 for n in nodes):
            return small
        return big
    if code in (0x45, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0):
        small, big = {0x45: (0xC0, 0xD0), 0xC0: (0xC0, 0xD0), 0xD0: (0xC0, 0xD0),
                      0xC1: (0xC1, 0xD1), 0xD1: (0xC1, 0xD1),
                      0xE0: (0xE0, 0xF0), 0xF0: (0xE0, 0xF0)}[code]  # fmt: skip
        if mode == "wide":
            return big
        if small == 0xC0 and all(not n[2] for n in nodes):
            return 0x45
        for n in nodes:
            count, content = _content(n, mode)
            if count > 255 or len(content) + 1 > 255:
                return big
        return small
    return code


def _body(code: int, node, mode: str) -> bytes:
    kind = node[0]
    if kind == "num":
        v = node[2]
        if code in (0x41, 0x42, 0x43, 0x44):
            return b""
        if code == 0x56:
            return bytes([1 if v else 0])
        width = _FIXED_WIDTH[code >> 4]
        return v.to_bytes(width, "big", signed=_NUM_FAMILY[code] in ("int", "long"))
    if kind == "raw":
        return node[2]
    if kind == "var":
        data = node[2]
        return (bytes([len(data)]) if code < 0xB0 else struct.pack(">I", len(data))) + data
    if code == 0x45:
        return b""
    count, content = _content(node, mode)
    if code in (0xC0, 0xC1, 0xE0):
        return bytes([len(content) + 1, count]) + content
    return struct.pack(">II", len(content) + 4, count) + content


def _emit(node, mode: str) -> bytes:
    if node[0] == "described":
        return b"\x00" + _emit(node[1], mode) + _emit(node[2], mode)
    code = _choose(node[1], [node], mode)
    return bytes([code]) + _body(code, node, mode)


def transcode(data: bytes, mode: str) -> bytes:
    """Re-encode a sequence of values: ``keep``, ``narrow`` or ``wide`` constructors."""
    out = []
    pos = 0
    while pos < len(data):
        node, pos = _parse(data, pos)
        out.append(_emit(node, mode))
    return b"".join(out)


def constructors_used(data: bytes) -> set[int]:
    """Every constructor byte in an encoding (element constructors included)."""
    used: set[int] = set()

    def walk(node):
        if node[0] == "described":
            walk(node[1])
            walk(node[2])
            return
        used.add(node[1])
        if node[0] in ("list", "map"):
            for i in node[2]:
                walk(i)
        elif node[0] == "array":
            if node[2] is not None:
                walk(node[2])
            used.add(node[3])
            for i in node[4]:
                walk(i)

    pos = 0
    while pos < len(data):
        node, pos = _parse(data, pos)
        walk(node)
    return used


# --------------------------------------------------------------------------- proton value strategies

_ASCII = st.characters(min_codepoint=0, max_codepoint=127)
_CHAR = st.characters(blacklist_categories=("Cs",))


def _long_text(alphabet):
    return st.builds(lambda c, n: c * n, alphabet, st.integers(256, 600))


def _int_range(lo: int, hi: int):
    """Integers in [lo, hi], leaning on the edges of the range and around zero."""
    edges = sorted(v for v in {lo, hi, lo + 1, hi - 1, 0, 1, -1} if lo <= v <= hi)
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


SCALARS = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": _int_range(0, 0xFF),
    "ushort": _int_range(0, 0xFFFF),
    "uint": st.one_of(_int_range(0, 2**32 - 1), st.integers(0, 0xFF), st.sampled_from([0xFF, 0x100, 2**31])),
    "ulong": st.one_of(
        _int_range(0, 2**64 - 1), st.integers(0, 0xFF), st.sampled_from([0x100, 2**63, 2**63 + 1])
    ),
    "byte": _int_range(-128, 127),
    "short": _int_range(-(2**15), 2**15 - 1),
    "int": st.one_of(_int_range(-(2**31), 2**31 - 1), st.integers(-128, 127), st.sampled_from([-129, 128])),
    "long": st.one_of(_int_range(-(2**63), 2**63 - 1), st.integers(-128, 127), st.sampled_from([-129, 128])),
    "float": st.floats(width=32),
    "double": st.floats(),
    "decimal32": st.integers(0, 2**32 - 1),
    "decimal64": st.integers(0, 2**64 - 1),
    "decimal128": st.binary(min_size=16, max_size=16),
    "char": _CHAR,
    "timestamp": _int_range(-(2**63), 2**63 - 1),
    "uuid": st.uuids(),
    "binary": st.one_of(
        st.binary(max_size=16),
        st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3), st.integers(256, 600)),
    ),
    "string": st.one_of(st.text(_CHAR, max_size=16), _long_text(_CHAR)),
    "symbol": st.one_of(st.text(_ASCII, max_size=16), _long_text(_ASCII)),
}
_PUT = {k: f"put_{k}" for k in SCALARS}
_PUT["boolean"] = "put_bool"


def scalar_of(kind: str):
    return SCALARS[kind].map(lambda v, k=kind: (k, v))


SCALAR_NODES = st.one_of(*[scalar_of(k) for k in SCALARS])

SPEC_CODES = sorted(XML_BY_CODE)
SPEC_SYMBOLS = sorted(XML_BY_SYMBOL)
DESCRIPTORS = st.one_of(
    st.sampled_from(SPEC_CODES).map(lambda c: ("ulong", c)),
    st.sampled_from(SPEC_SYMBOLS).map(lambda s: ("symbol", s)),
    st.sampled_from([0, 1, 0xFF, 0x100, 0x0000_0137_0000_0001, 2**64 - 1]).map(lambda c: ("ulong", c)),
    st.integers(0, 2**64 - 1).map(lambda c: ("ulong", c)),
    st.text(_ASCII, max_size=24).map(lambda s: ("symbol", s)),
)


def python_key(node):
    """What a map key becomes in Python on our side (for keys Python would merge)."""
    kind, v = node
    if kind == "float":
        return struct.unpack(">f", struct.pack(">f", v))[0]
    if kind in ("decimal32", "decimal64"):
        return v.to_bytes(4 if kind == "decimal32" else 8, "big")
    return v


def maps_of(values):
    pairs = st.lists(st.tuples(SCALAR_NODES, values), max_size=4, unique_by=lambda kv: python_key(kv[0]))
    return pairs.map(lambda ps: ("map", ps))


def arrays_of(children):
    scalar_arrays = st.sampled_from(sorted(SCALARS)).flatmap(
        lambda k: st.lists(scalar_of(k), max_size=4).map(lambda xs: ("array", (k, None, xs)))
    )

    def of_kind(kind):
        if kind in SCALARS:
            elems = scalar_of(kind)
        elif kind == "list":
            elems = st.lists(children, max_size=3).map(lambda xs: ("list", xs))
        elif kind == "map":
            elems = maps_of(children)
        else:
            elems = scalar_arrays
        return st.tuples(st.one_of(st.none(), DESCRIPTORS), st.lists(elems, max_size=4)).map(
            lambda t: ("array", (kind, t[0], t[1]))
        )

    return st.sampled_from(sorted(SCALARS) + ["list", "map", "array"]).flatmap(of_kind)


VALUES = st.recursive(
    SCALAR_NODES,
    lambda children: st.one_of(
        st.lists(children, max_size=5).map(lambda xs: ("list", xs)),
        maps_of(children),
        arrays_of(children),
        # proton 0.40's decoder drops the list element that follows a described value
        # whose value is itself described (c0 09 02 00 53 10 00 53 10 40 40 comes out
        # as a one-element list), so proton cannot be the oracle for such values: they
        # are left out here and test_described_of_described_inside_a_list covers them.
        st.tuples(DESCRIPTORS, children.filter(lambda n: n[0] != "described")).map(
            lambda t: ("described", t)
        ),
    ),
    max_leaves=12,
)


def put_node(d: Data, node) -> None:
    kind, v = node
    if kind == "null":
        d.put_null()
    elif kind in SCALARS:
        getattr(d, _PUT[kind])(v)
    elif kind == "list":
        d.put_list()
        d.enter()
        for x in v:
            put_node(d, x)
        d.exit()
    elif kind == "map":
        d.put_map()
        d.enter()
        for k, x in v:
            put_node(d, k)
            put_node(d, x)
        d.exit()
    elif kind == "described":
        d.put_described()
        d.enter()
        put_node(d, v[0])
        put_node(d, v[1])
        d.exit()
    elif kind == "array":
        ekind, desc, elems = v
        d.put_array(desc is not None, PN_CODE[ekind])
        d.enter()
        if desc is not None:
            put_node(d, desc)
        for e in elems:
            put_node(d, e)
        d.exit()
    else:
        raise AssertionError(kind)


def proton_encode(*nodes) -> bytes:
    d = Data()
    for n in nodes:
        put_node(d, n)
    return d.encode()


def check_against_proton(data: bytes) -> list:
    """Proton's and our reading of ``data`` (all encodings) must be the same tree."""
    expected = pn_decode_all(data)
    assert [our_node(v) for v in decode_all(data)] == expected
    return expected


# --------------------------------------------------------------------------- generic values


@SETTINGS
@given(VALUES)
def test_values_decode_as_proton_decodes_them(node):
    data = proton_encode(node)
    assert transcode(data, "keep") == data  # the test's transcoder reads proton's bytes exactly
    expected = pn_decode_all(data)
    assert len(expected) == 1
    assert our_node(decode(data)) == expected[0]
    for mode in ("narrow", "wide"):
        again = transcode(data, mode)
        assert pn_decode_all(again) == expected, mode  # proton reads the re-encoding the same way
        assert our_node(decode(again)) == expected[0], mode


@SETTINGS
@given(st.lists(VALUES, min_size=1, max_size=4))
def test_value_sequences_decode_in_order(nodes):
    data = proton_encode(*nodes)
    assert len(check_against_proton(data)) == len(nodes)


def _all_constructors_corpus() -> list:
    big = "x" * 300
    elems = [("uint", 7), ("ulong", 2**40), ("int", -5)]
    return [
        ("list", [(k, v) for k, v in [
            ("null", None), ("boolean", True), ("boolean", False), ("ubyte", 200), ("ushort", 60000),
            ("uint", 0), ("uint", 5), ("uint", 2**31), ("ulong", 0), ("ulong", 9), ("ulong", 2**63),
            ("byte", -3), ("short", -300), ("int", -7), ("int", 2**30), ("long", -9), ("long", 2**40),
            ("float", 1.5), ("double", -2.25), ("decimal32", 1), ("decimal64", 2),
            ("decimal128", bytes(range(16))), ("char", "\u00e9"), ("timestamp", 1_700_000_000_000),
            ("uuid", uuid.UUID(int=12345)), ("binary", b"ab"), ("binary", big.encode()),
            ("string", "s"), ("string", big), ("symbol", "y"), ("symbol", big),
        ]]),  # fmt: skip
        ("list", [
            ("list", []), ("list", [("string", big)]),
            ("map", []), ("map", [(("string", big), ("null", None))]),
        ]),  # fmt: skip
        ("list", [("ubyte", i % 256) for i in range(300)]),
        ("map", [(("uint", i), ("boolean", i % 2 == 0)) for i in range(200)]),
        ("array", ("boolean", None, [("boolean", True)] * 3)),
        ("array", ("boolean", None, [("boolean", False)] * 3)),
        ("array", ("boolean", None, [("boolean", False), ("boolean", True)])),
        ("array", ("uint", None, [("uint", 0)] * 2)),
        ("array", ("ulong", None, [("ulong", 0)] * 2)),
        ("array", ("list", None, [("list", [])] * 2)),
        ("array", ("ubyte", None, [("ubyte", i % 256) for i in range(300)])),
        ("array", ("array", None, [("array", (k, None, [(k, v)])) for k, v in elems])),
        ("array", ("list", ("ulong", 0x70), [("list", [("boolean", True)]), ("list", [])])),
        ("array", ("symbol", ("symbol", "amqp:foo"), [("symbol", "a"), ("symbol", big)])),
        ("described", (("ulong", 0x10), ("list", [("string", "c")]))),
        ("described", (("ulong", 0), ("null", None))),
        ("described", (("symbol", big), ("null", None))),
    ]


def test_every_constructor_of_types_xml_is_exercised():
    codes_in_xml = {
        int(e.get("code"), 16)
        for t in XML_TYPES.values()
        if t.get("class") == "primitive"
        for e in t.findall(f"{NS}encoding")
    }
    assert len(codes_in_xml) == 39
    corpus = proton_encode(*_all_constructors_corpus())
    seen: set[int] = set()
    for mode in ("keep", "narrow", "wide"):
        data = transcode(corpus, mode)
        seen |= constructors_used(data)
        check_against_proton(data)
    assert codes_in_xml - seen == set()


def test_proton_writes_32_bit_forms_for_long_strings_and_the_8_bit_forms_are_read_too():
    long = "\u00fc" * 200  # 400 bytes of UTF-8
    data = proton_encode(("string", long), ("symbol", "s" * 256), ("binary", b"\x00" * 256))
    assert [data[0], data[405], data[405 + 5 + 256]] == [0xB1, 0xB3, 0xB0]
    check_against_proton(data)


def test_described_of_described_inside_a_list():
    """A described value whose value is described again, as the first of two list items.

    Proton 0.40 cannot be the oracle here (it reads one element), so the
    expected tree is spelled out from the encoding rules.
    """
    data = bytes.fromhex("c0 09 02 00 53 10 00 53 10 40 40")
    v = decode(data)
    assert len(v) == 2 and v[1] is None
    outer = v[0]
    assert (amqp_type_of(outer.descriptor), outer.descriptor) == ("ulong", 0x10)
    inner = outer.value
    assert isinstance(inner, Described)
    assert (amqp_type_of(inner.descriptor), inner.descriptor, inner.value) == ("ulong", 0x10, None)


# --------------------------------------------------------------------------- bugs: map keys, descriptor types


@pytest.mark.parametrize(
    "keys",
    [
        [("ubyte", 1), ("ulong", 1)],
        [("string", "k"), ("symbol", "k")],
        [("boolean", True), ("int", 1)],
        [("char", "a"), ("string", "a")],
        [("binary", b"\x00\x00\x00\x01"), ("decimal32", 1)],
        [("double", 0.0), ("double", -0.0)],
    ],
    ids=["ubyte-ulong", "string-symbol", "true-int", "char-string", "binary-decimal32", "zero-negzero"],
)
def test_map_keys_equal_in_python_but_distinct_in_amqp_are_all_kept(keys):
    """AMQP map keys of different types (or different bits) are different keys.

    Proton reads both entries; a dissector must show both, not silently merge
    them because ``UByte(1) == ULong(1)`` / ``Symbol("k") == "k"`` in Python.
    """
    node = ("map", [(k, ("uint", i)) for i, k in enumerate(keys)])
    data = proton_encode(node)
    assert len(pn_decode_all(data)[0][1]) == 2
    check_against_proton(data)


@pytest.mark.parametrize(
    "descriptor",
    [("uint", 0x10), ("long", 0x10), ("ubyte", 0x10), ("timestamp", 0x10), ("string", "amqp:open:list")],
)
def test_only_ulong_and_symbol_descriptors_name_spec_types(descriptor):
    """The spec's descriptors are a ulong code or a symbol; a uint 0x10 is not ``open``."""
    data = proton_encode(("described", (descriptor, ("list", [("string", "c")]))))
    [pn] = pn_decode_all(data)
    assert pn[1:3] == ("described", False)
    v = decode(data)
    assert amqp_type_of(v) == "described"
    assert not isinstance(v, Composite)
    check_against_proton(data)


# --------------------------------------------------------------------------- performatives and composites


def _field_value(field: ET.Element, depth: int):
    ftype = field.get("type")
    requires = field.get("requires")
    if ftype in XML_COMPOSITES:
        single = composite_node(ftype, depth + 1) if depth < 2 else st.just(("null", None))
    elif ftype == "*":
        providers = XML_PROVIDERS.get(requires, [])
        options = []
        for p in providers:
            if p in XML_COMPOSITES:
                if depth < 2:
                    options.append(composite_node(p, depth + 1))
            else:
                options.append(scalar_of(xml_primitive(p)) if xml_primitive(p) in SCALARS else SCALAR_NODES)
        single = st.one_of(*options) if options else SCALAR_NODES
    else:
        prim = xml_primitive(ftype)
        if prim in SCALARS:
            single = scalar_of(prim)
        elif prim == "map":
            single = maps_of(SCALAR_NODES)
        elif prim == "list":
            single = st.lists(SCALAR_NODES, max_size=3).map(lambda xs: ("list", xs))
        else:
            single = SCALAR_NODES
        if field.get("multiple") == "true" and prim in SCALARS:
            single = st.one_of(
                single,
                st.lists(scalar_of(prim), max_size=3).map(lambda xs, p=prim: ("array", (p, None, xs))),
            )
    return st.one_of(st.just(("null", None)), single)


@functools.lru_cache(maxsize=None)
def composite_node(name: str, depth: int = 0):
    fields = xml_fields(name)
    return st.tuples(
        st.tuples(*[_field_value(f, depth) for f in fields]) if fields else st.just(()),
        st.integers(0, len(fields)),
    ).map(lambda t: ("described", (("ulong", XML_CODE_OF[name]), ("list", list(t[0][: t[1]])))))


PERFORMATIVES = [n for n, t in XML_COMPOSITES.items() if "frame" in (t.get("provides") or "").split(",")]


@SETTINGS
@given(st.sampled_from(sorted(XML_COMPOSITES)).flatmap(lambda n: st.tuples(st.just(n), composite_node(n))))
def test_composites_in_every_descriptor_form(case):
    name, node = case
    code, sym = XML_CODE_OF[name], XML_SYMBOL_OF[name].encode("ascii")
    values = node[1][1][1]
    data = proton_encode(node)
    assert data[:3] == bytes([0x00, 0x53, code])  # proton writes smallulong descriptors
    body = data[3:]
    forms = {
        "smallulong": (data, ("ulong", code)),
        "ulong": (b"\x00\x80" + code.to_bytes(8, "big") + body, ("ulong", code)),
        "sym8": (b"\x00\xa3" + bytes([len(sym)]) + sym + body, ("symbol", sym.decode())),
        "sym32": (b"\x00\xb3" + struct.pack(">I", len(sym)) + sym + body, ("symbol", sym.decode())),
        "proton-symbol": (proton_encode(("described", (("symbol", sym.decode()), node[1][1]))),
                          ("symbol", sym.decode())),
    }  # fmt: skip
    [reference] = pn_decode_all(data)
    assert reference[1:3] == (name, True)
    pn_fields = reference[4][1]
    fields = xml_fields(name)
    for form, (encoded, desc) in forms.items():
        [pn] = pn_decode_all(encoded)
        assert pn[3] == desc, form  # proton sees the descriptor we meant
        assert pn[4] == reference[4], form
        v = decode(encoded)
        assert isinstance(v, Composite), form
        assert amqp_type_of(v) == name
        assert our_node(v.descriptor) == desc
        assert our_node(v) == pn, form
        for i, f in enumerate(fields):
            fname = f.get("name")
            got = v.field(fname)
            default = xml_default(f)
            if i >= len(values):
                assert got is ABSENT, (form, fname)
            elif values[i][0] == "null":
                assert got is None, (form, fname)
            else:
                assert our_node(got) == pn_fields[i], (form, fname)
            eff = v.effective(fname)
            if i >= len(values) or values[i][0] == "null":
                assert eff == default and type(eff) is type(default), (form, fname, eff, default)
                assert v.is_default(fname) == (default is not None)
            else:
                assert our_node(eff) == pn_fields[i]
                assert not v.is_default(fname)


def test_there_are_nine_performatives_and_all_are_recognized_in_three_forms():
    assert sorted(PERFORMATIVES) == sorted(
        ["open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close"]
    )
    for name in PERFORMATIVES:
        code = XML_CODE_OF[name]
        assert 0x10 <= code <= 0x18
        sym = XML_SYMBOL_OF[name]
        body = proton_encode(("list", [("null", None)]))
        for desc in (b"\x53" + bytes([code]), b"\x80" + code.to_bytes(8, "big"),
                     b"\xa3" + bytes([len(sym)]) + sym.encode()):  # fmt: skip
            v = decode(b"\x00" + desc + body)
            assert isinstance(v, Composite) and v.spec.name == name
            assert v.field(xml_fields(name)[0].get("name")) is None
            last = xml_fields(name)[-1].get("name")
            assert v.field(last) is (None if len(xml_fields(name)) == 1 else ABSENT)


def test_open_absent_null_and_value():
    """open(container-id="c", hostname=null, max-frame-size=512), the rest absent."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_symbol("amqp:open:list")
    d.put_list()
    d.enter()
    d.put_string("c")
    d.put_null()
    d.put_uint(512)
    d.put_null()
    d.exit()
    d.exit()
    v = decode(d.encode())
    fields = {f.get("name"): f for f in xml_fields("open")}
    assert v.field("container-id") == "c"
    assert v.field("hostname") is None
    assert v.field("max-frame-size") == 512 and amqp_type_of(v.field("max-frame-size")) == "uint"
    assert v.field("channel-max") is None
    assert v.effective("channel-max") == xml_default(fields["channel-max"]) == 65535
    assert v.field("idle-time-out") is ABSENT
    assert v.effective("idle-time-out") is None
    assert v.field("properties") is ABSENT
    assert v.effective("max-frame-size") == 512


def test_attach_defaults_come_from_choice_names_in_the_xml():
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(XML_CODE_OF["attach"])
    d.put_list()
    d.enter()
    d.put_string("link")
    d.put_uint(0)
    d.put_bool(False)
    d.exit()
    d.exit()
    v = decode(d.encode())
    fields = {f.get("name"): f for f in xml_fields("attach")}
    assert fields["snd-settle-mode"].get("default") == "mixed"
    assert v.field("snd-settle-mode") is ABSENT
    assert v.effective("snd-settle-mode") == xml_default(fields["snd-settle-mode"]) == 2
    assert v.effective("rcv-settle-mode") == xml_default(fields["rcv-settle-mode"]) == 0
    assert v.effective("incomplete-unsettled") is False
    assert v.field("role") is False


# --------------------------------------------------------------------------- messages

_PROTON_CLASSES = [
    (proton.ubyte, "ubyte"),
    (proton.ushort, "ushort"),
    (proton.uint, "uint"),
    (proton.ulong, "ulong"),
    (proton.byte, "byte"),
    (proton.short, "short"),
    (proton.int32, "int"),
    (proton.timestamp, "timestamp"),
    (proton.char, "char"),
    (proton.symbol, "symbol"),
]


def obj_node(o):
    """Normalize a proton Python object (what the Message attributes hold)."""
    if o is None:
        return ("null", None)
    if isinstance(o, bool):
        return ("boolean", o)
    for cls, name in _PROTON_CLASSES:
        if isinstance(o, cls):
            return (name, int(o) if isinstance(o, int) else str(o))
    if isinstance(o, proton.float32):
        return ("float", struct.pack(">f", o))
    if isinstance(o, int):
        return ("long", o)
    if isinstance(o, float):
        return ("double", struct.pack(">d", o))
    if isinstance(o, str):
        return ("string", o)
    if isinstance(o, bytes):
        return ("binary", o)
    if isinstance(o, uuid.UUID):
        return ("uuid", o)
    if isinstance(o, dict):
        return ("map", tuple((obj_node(k), obj_node(v)) for k, v in o.items()))
    if isinstance(o, list):
        return ("list", tuple(obj_node(x) for x in o))
    raise AssertionError(type(o))


_OBJ = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(_CHAR, max_size=12),
    st.binary(max_size=12),
    st.integers(0, 2**32 - 1).map(proton.uint),
    st.integers(0, 2**64 - 1).map(proton.ulong),
    st.integers(-(2**31), 2**31 - 1).map(proton.int32),
    st.text(_ASCII, max_size=12).map(proton.symbol),
    st.integers(-(2**63), 2**63 - 1).map(proton.timestamp),
    st.uuids(),
)
_SYM_KEYS = st.text(_ASCII, min_size=1, max_size=10).map(proton.symbol)
_MESSAGE_ID = st.one_of(
    st.integers(0, 2**64 - 1).map(proton.ulong),
    st.uuids(),
    st.binary(max_size=16),
    st.text(_CHAR, max_size=16),
)
_TEXT = st.text(_CHAR, max_size=20)
MESSAGE_ATTRS = st.fixed_dictionaries(
    {},
    optional={
        "durable": st.booleans(),
        "priority": st.integers(0, 255),
        "ttl": st.integers(1, 2**32 - 1).map(lambda ms: ms / 1000),
        "first_acquirer": st.booleans(),
        "delivery_count": st.integers(0, 2**32 - 1),
        "id": _MESSAGE_ID,
        "user_id": st.binary(min_size=1, max_size=16),
        "address": _TEXT,
        "subject": _TEXT,
        "reply_to": _TEXT,
        "correlation_id": _MESSAGE_ID,
        "content_type": st.text(_ASCII, min_size=1, max_size=20),
        "content_encoding": st.text(_ASCII, min_size=1, max_size=20),
        "expiry_time": st.integers(1, 2**41).map(lambda ms: ms / 1000),
        "creation_time": st.integers(1, 2**41).map(lambda ms: ms / 1000),
        "group_id": _TEXT,
        "group_sequence": st.integers(0, 2**31 - 1),
        "reply_to_group_id": _TEXT,
        "properties": st.dictionaries(st.text(_CHAR, max_size=10), _OBJ, min_size=1, max_size=4),
        "annotations": st.dictionaries(_SYM_KEYS, _OBJ, min_size=1, max_size=4),
        "instructions": st.dictionaries(_SYM_KEYS, _OBJ, min_size=1, max_size=4),
    },
)
MESSAGE_BODY = st.one_of(
    st.none(),
    st.binary(max_size=300).map(lambda b: ("data", b)),
    st.lists(_OBJ, max_size=4).map(lambda xs: ("amqp-sequence", xs)),
    st.one_of(
        _OBJ.filter(lambda v: v is not None),
        st.lists(_OBJ, max_size=3),
        st.dictionaries(st.text(max_size=4), _OBJ, max_size=3),
    ).map(lambda v: ("amqp-value", v)),
)
FOOTER = st.one_of(st.none(), st.dictionaries(_SYM_KEYS, _OBJ, min_size=1, max_size=3))

SECTION_ORDER = [
    "header", "delivery-annotations", "message-annotations", "properties",
    "application-properties", "data", "amqp-sequence", "amqp-value", "footer",
]  # fmt: skip


def _ms(seconds) -> int | None:
    return round(seconds * 1000) if seconds else None


@SETTINGS
@given(MESSAGE_ATTRS, MESSAGE_BODY, FOOTER)
def test_proton_messages_decode_into_their_sections(attrs, body, footer):
    m = Message()
    for k, v in attrs.items():
        setattr(m, k, v)
    if body is not None:
        m.inferred = body[0] != "amqp-value"
        m.body = body[1]
    data = m.encode()
    if footer is not None:
        d = Data()
        d.put_described()
        d.enter()
        d.put_ulong(XML_CODE_OF["footer"])
        d.put_object(footer)
        d.exit()
        data += d.encode()

    sections = decode_all(data)
    assert [our_node(s) for s in sections] == pn_decode_all(data)
    names = [amqp_type_of(s) for s in sections]
    assert all(isinstance(s, Described) for s in sections)
    assert names == sorted(names, key=SECTION_ORDER.index), names
    assert len(set(names)) == len(names)
    by_name = dict(zip(names, sections))
    for s in sections:  # the descriptor names the section as the XML does
        assert XML_BY_CODE[s.descriptor] == amqp_type_of(s)

    header = by_name.get("header")
    if header is not None:
        assert isinstance(header, Composite)
        assert header.effective("durable") is m.durable
        assert header.effective("priority") == m.priority
        assert header.effective("ttl") == _ms(m.ttl)
        assert header.effective("first-acquirer") is m.first_acquirer
        assert header.effective("delivery-count") == m.delivery_count
    else:
        assert (m.durable, m.priority, m.ttl, m.first_acquirer, m.delivery_count) == (False, 4, 0, False, 0)

    props = by_name.get("properties")
    # (field, Message attribute); an attribute not set must come out null or absent
    # (proton's getters return placeholders such as symbol('None') or 0 when unset).
    attr_of = {
        "message-id": "id", "user-id": "user_id", "to": "address", "subject": "subject",
        "reply-to": "reply_to", "correlation-id": "correlation_id", "content-type": "content_type",
        "content-encoding": "content_encoding", "absolute-expiry-time": "expiry_time",
        "creation-time": "creation_time", "group-id": "group_id", "group-sequence": "group_sequence",
        "reply-to-group-id": "reply_to_group_id",
    }  # fmt: skip
    expect_props = {f: getattr(m, a) if a in attrs else None for f, a in attr_of.items()}
    for f in ("absolute-expiry-time", "creation-time"):
        expect_props[f] = _ms(expect_props[f])
    for f in ("message-id", "correlation-id"):
        if isinstance(expect_props[f], memoryview):  # proton hands binary ids out as memoryview
            expect_props[f] = bytes(expect_props[f])
    # proton writes group-sequence whenever a group-id is set (and may leave out 0);
    # its getter says 0 for "not set", so null and 0 are the same to the attribute.
    expect_props.pop("group-sequence")
    gs = props.effective("group-sequence") if props is not None else None
    if gs is not None:
        assert amqp_type_of(gs) == "uint"
    assert (0 if gs is None else gs) == m.group_sequence
    types = {
        "user-id": "binary", "to": "string", "subject": "string", "reply-to": "string",
        "content-type": "symbol", "content-encoding": "symbol", "absolute-expiry-time": "timestamp",
        "creation-time": "timestamp", "group-id": "string", "group-sequence": "uint",
        "reply-to-group-id": "string",
    }  # fmt: skip
    if props is None:
        assert all(v is None for v in expect_props.values())
    else:
        assert isinstance(props, Composite)
        for fname, want in expect_props.items():
            got = props.effective(fname)
            if want is None:
                assert got is None, fname
                continue
            if fname in ("message-id", "correlation-id"):
                # proton returns a ulong id as a plain int ("int (unsigned)" in its docs)
                want_type = {int: "ulong", proton.ulong: "ulong", uuid.UUID: "uuid", bytes: "binary",
                             str: "string"}[type(want)]  # fmt: skip
            else:
                want_type = types[fname]
            assert (amqp_type_of(got), got) == (want_type, want), fname

    for section, attr in (
        ("delivery-annotations", m.instructions),
        ("message-annotations", m.annotations),
        ("application-properties", m.properties),
    ):
        if attr:
            assert our_node(by_name[section].value) == obj_node(dict(attr)), section
        else:
            assert section not in by_name

    body_sections = [n for n in names if n in ("data", "amqp-sequence", "amqp-value")]
    if body is None:
        assert body_sections == []
    else:
        assert body_sections == [body[0]]
        got = by_name[body[0]].value
        if body[0] == "data":
            assert (amqp_type_of(got), got) == ("binary", m.body)
        else:
            assert our_node(got) == obj_node(m.body)

    if footer is not None:
        assert names[-1] == "footer"
        assert our_node(sections[-1].value) == obj_node(footer)
    else:
        assert "footer" not in names
