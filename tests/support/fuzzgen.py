"""Fuzz input generators and the whole-product oracle (issue 8).

One set of generators serves two drivers:

* hypothesis (tests/fuzz/test_fuzz.py): ``values()``, ``frames()``, ``conversations()``,
  ``mutations()`` are strategies; shrinking works because every choice is a hypothesis draw;
* tests/fuzz/fuzz_run.py: the same generator functions driven by ``random.Random`` (millions of inputs).

A generator takes a *source* ``r`` with ``int(lo, hi)``, ``bool(p)``, ``choice(seq)``,
``bytes(lo, hi)``, ``text(lo, hi, ascii)``, ``float()``.

Values are trees of ``(kind, value, form)`` nodes covering every type of the AMQP type system
(described values, arrays, nested lists and maps, timestamps over the whole int64 range) plus
invalid encodings (``raw`` bytes, compounds whose size or count lies, bad UTF-8, chars beyond
Unicode).  Valid trees are encoded by python-qpid-proton's codec (``proton.Data``); trees it
cannot encode, by the minimal encoder here.  Frames are the performatives of the generated spec
tables (``amqp_dissect.amqp._spec``) with fields filled with values of any type; conversations are
sequences of header/open/begin/attach/flow/transfer/disposition/detach/end/close with random
orders, channels, handles and ids; captures are built with tests/support/pcapbuild.py (dpkt).

Key logs (issue 29): ``keylog(r, lines)`` makes a hostile key log from a capture's real lines
(damaged lines of every kind, wrong secrets, over-long lines, huge, ``/dev/zero``-like);
``cut_capture`` cuts a capture short.

``check(path)`` feeds a capture through the paths of every CLI command (``report --format html``
included; ``Checker(keylog=FILE)``: each with ``--keylog FILE``), in-process, and returns
the failures: any exception outside :class:`amqp_dissect.errors.DissectError`'s family (the CLI's
exit 1), an internal-error violation or note, or a finish status of exit 1.
"""

from __future__ import annotations

import io
import math
import os
import random
import struct
import sys
import time
import uuid
from contextlib import redirect_stderr

from proton import Data

from amqp_dissect.amqp import _spec

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples")

# --------------------------------------------------------------------------- sources


class RandomSource:
    """Choices from ``random.Random`` (fuzz_run.py)."""

    def __init__(self, seed):
        self.rnd = random.Random(seed)

    def int(self, lo, hi):
        return self.rnd.randint(lo, hi)

    def bool(self, p=0.5):
        return self.rnd.random() < p

    def choice(self, seq):
        return seq[self.rnd.randrange(len(seq))]

    def bytes(self, lo, hi):
        return self.rnd.randbytes(self.rnd.randint(lo, hi))

    def text(self, lo, hi, ascii=False):
        n = self.rnd.randint(lo, hi)
        top = 0x7E if ascii else self.rnd.choice((0x7E, 0xFF, 0xFFFF, 0x10FFFF))
        out = []
        for _ in range(n):
            c = self.rnd.randint(0x20 if ascii else 0, top)
            out.append(chr(c if not 0xD800 <= c <= 0xDFFF else 0xFFFD))
        return "".join(out)

    def float(self):
        k = self.rnd.random()
        if k < 0.2:
            return self.rnd.choice((0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, -5e-324))
        return struct.unpack("<d", self.rnd.randbytes(8))[0]


class HypothesisSource:
    """Choices drawn from hypothesis (``draw`` of a ``st.composite``)."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def int(self, lo, hi):
        return self.draw(self.st.integers(lo, hi))

    def bool(self, p=0.5):
        # biased like RandomSource: an integer below p of a 0..99 range
        return self.draw(self.st.integers(0, 99)) < int(p * 100)

    def choice(self, seq):
        return self.draw(self.st.sampled_from(seq))

    def bytes(self, lo, hi):
        return self.draw(self.st.binary(min_size=lo, max_size=hi))

    def text(self, lo, hi, ascii=False):
        st = self.st
        alphabet = st.characters(min_codepoint=0x20, max_codepoint=0x7E) if ascii else \
            st.characters(blacklist_categories=("Cs",))
        return self.draw(st.text(alphabet=alphabet, min_size=lo, max_size=hi))

    def float(self):
        return self.draw(self.st.floats(allow_nan=True, allow_infinity=True))


# --------------------------------------------------------------------------- values

FIXED = ("null", "boolean", "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "float",
         "double", "decimal32", "decimal64", "decimal128", "char", "timestamp", "uuid")
VARIABLE = ("binary", "string", "symbol")
COMPOUND = ("list", "map", "array")
PRIMITIVES = FIXED + VARIABLE + COMPOUND  # every primitive type of the type system
assert set(PRIMITIVES) == set(_spec.PRIMITIVE_CODES), "the type system changed: update the generators"

_RANGES = {"ubyte": (0, 2**8 - 1), "ushort": (0, 2**16 - 1), "uint": (0, 2**32 - 1), "ulong": (0, 2**64 - 1),
           "byte": (-2**7, 2**7 - 1), "short": (-2**15, 2**15 - 1), "int": (-2**31, 2**31 - 1),
           "long": (-2**63, 2**63 - 1), "timestamp": (-2**63, 2**63 - 1)}


def _int_in(r, lo, hi):
    k = r.int(0, 9)
    if k < 4:  # small: what real fields hold, and values that collide
        return max(lo, min(hi, r.int(0, 5)))
    if k < 6:
        return r.choice((lo, hi, max(lo, min(hi, 0)), max(lo, min(hi, 255)), max(lo, min(hi, 256))))
    return r.int(lo, hi)


def primitive(r, kind, depth=2):
    """A valid value of primitive ``kind``."""
    if kind == "null":
        return ("null", None, 0)
    if kind == "boolean":
        return ("boolean", r.bool(), r.int(0, 1))
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        if kind == "timestamp" and r.bool(0.3):  # beyond the years a datetime holds
            return ("timestamp", r.choice((2**62, -(2**62), 2**63 - 1, -2**63, 253402300800000)), 0)
        return (kind, _int_in(r, lo, hi), r.int(0, 1))
    if kind in ("float", "double"):
        return (kind, r.float(), 0)
    if kind == "decimal32":
        return (kind, r.int(0, 2**32 - 1), 0)
    if kind == "decimal64":
        return (kind, r.int(0, 2**64 - 1), 0)
    if kind in ("decimal128", "uuid"):
        return (kind, r.bytes(16, 16), 0)
    if kind == "char":
        c = r.int(0, 0x10FFFF)
        return ("char", c if not 0xD800 <= c <= 0xDFFF else 0x41, 0)
    if kind == "binary":
        return ("binary", r.bytes(0, 20) if r.bool(0.9) else r.bytes(250, 300), r.int(0, 1))
    if kind == "string":
        return ("string", r.text(0, 12), r.int(0, 1))
    if kind == "symbol":
        return ("symbol", r.text(0, 12, ascii=True), r.int(0, 1))
    if kind == "list":
        return ("list", [value(r, depth - 1) for _ in range(r.int(0, 3 if depth > 0 else 0))], r.int(0, 2))
    if kind == "map":
        n = r.int(0, 3 if depth > 0 else 0)
        return ("map", [(value(r, depth - 1), value(r, depth - 1)) for _ in range(n)], r.int(0, 1))
    if kind == "array":
        return array(r, depth)
    raise ValueError(kind)


def array(r, depth=2):
    """An array: one element kind, optionally described (the descriptor shared by every element)."""
    kinds = FIXED + VARIABLE + (("list", "map", "array") if depth > 0 else ())
    ek = r.choice(kinds)
    n = r.int(0, 4)
    elems = [primitive(r, ek, depth - 1) for _ in range(n)]
    desc = descriptor(r) if r.bool(0.2) else None
    return ("array", (ek, desc, elems), r.int(0, 1))


def descriptor(r):
    k = r.int(0, 3)
    if k == 0:
        return ("symbol", r.choice(tuple(_spec.SYMBOLIC_DESCRIPTORS)), 0)
    if k == 1:
        return ("ulong", r.choice(tuple(_spec.DESCRIPTORS)), r.int(0, 1))
    return ("ulong", _int_in(r, 0, 2**64 - 1), r.int(0, 1)) if k == 2 else value(r, 0)


def invalid(r, depth=1):
    """An encoding no proton would write: the minimal encoder's."""
    k = r.int(0, 6)
    if k == 0:
        return ("raw", r.bytes(0, 12), 0)
    if k == 1:  # a compound whose size or count lies
        code = r.choice((0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0))
        items = [value(r, depth - 1) for _ in range(r.int(0, 3))]
        return ("lying", (code, r.choice((0, 1, 2, 255, 2**31, 2**32 - 1, r.int(0, 64))),
                          r.choice((0, 1, 2, 255, 2**32 - 1, r.int(0, 64)))), items)
    if k == 2:
        return ("badutf8", r.bytes(1, 8) + b"\xff", r.int(0, 1))
    if k == 3:
        return ("badchar", r.int(0x110000, 2**32 - 1), 0)
    if k == 4:  # a constructor the type system does not have
        free = [c for c in range(1, 256) if _spec.CONSTRUCTORS[c] is None]
        return ("raw", bytes([r.choice(free)]) + r.bytes(0, 4), 0)
    if k == 5:  # nested zero-width arrays: many elements from few bytes (three deep: at most 32 wide,
        # 32,768 nulls in 9 KB; 255 wide would be 16.6M nulls in 585 KB, each such input costing a
        # few hundred times a typical one: the element budget has its own tests at that scale)
        depth = r.int(1, 3)
        return ("raw", _zero_width_arrays(depth, r.int(1, 255 if depth < 3 else 32)), 0)
    return ("truncated", value(r, depth), r.int(1, 4))


def _zero_width_arrays(depth, n):
    """array32 of ``n`` array32 of ... of ``n`` nulls: n**depth elements in about 9*n**(depth-1) bytes."""
    elem, ctor = b"", b"\x40"  # a null: no bytes after the shared constructor
    for _ in range(depth):
        body = struct.pack(">I", n) + ctor + elem * n
        elem, ctor = struct.pack(">I", len(body)) + body, b"\xf0"
    return ctor + elem


def value(r, depth=2, valid_only=False):
    """A value of any type (or, rarely, an invalid encoding)."""
    k = r.int(0, 19)
    if k == 0 and depth > 0:
        return ("described", (descriptor(r), value(r, depth - 1, valid_only)), 0)
    if k == 1 and not valid_only:
        return invalid(r, depth)
    kinds = PRIMITIVES if depth > 0 else FIXED + VARIABLE
    return primitive(r, r.choice(kinds), depth)


# ------------------------------------------------------------------ encoding: proton, then ours

_PT = {"null": Data.NULL, "boolean": Data.BOOL, "ubyte": Data.UBYTE, "ushort": Data.USHORT, "uint": Data.UINT,
       "ulong": Data.ULONG, "byte": Data.BYTE, "short": Data.SHORT, "int": Data.INT, "long": Data.LONG,
       "float": Data.FLOAT, "double": Data.DOUBLE, "decimal32": Data.DECIMAL32, "decimal64": Data.DECIMAL64,
       "decimal128": Data.DECIMAL128, "char": Data.CHAR, "timestamp": Data.TIMESTAMP, "uuid": Data.UUID,
       "binary": Data.BINARY, "string": Data.STRING, "symbol": Data.SYMBOL, "list": Data.LIST, "map": Data.MAP,
       "array": Data.ARRAY}


class NotProton(Exception):
    pass


def _put(d: Data, node) -> None:
    kind, v, _form = node
    if kind == "null":
        d.put_null()
    elif kind == "boolean":
        d.put_bool(v)
    elif kind in ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "timestamp",
                  "decimal32", "decimal64", "double", "binary", "string"):
        getattr(d, "put_" + kind)(v)
    elif kind == "float":
        d.put_float(struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) and abs(v) < 3e38 else v)
    elif kind == "decimal128":
        d.put_decimal128(v)
    elif kind == "char":
        d.put_char(chr(v))
    elif kind == "uuid":
        d.put_uuid(uuid.UUID(bytes=v))
    elif kind == "symbol":
        d.put_symbol(v)
    elif kind == "list":
        d.put_list()
        d.enter()
        for x in v:
            _put(d, x)
        d.exit()
    elif kind == "map":
        d.put_map()
        d.enter()
        for a, b in v:
            _put(d, a)
            _put(d, b)
        d.exit()
    elif kind == "array":
        ek, desc, elems = v
        d.put_array(desc is not None, _PT[ek])
        d.enter()
        if desc is not None:
            _put(d, desc)
        for x in elems:
            _put(d, x)
        d.exit()
    elif kind == "described":
        d.put_described()
        d.enter()
        _put(d, v[0])
        _put(d, v[1])
        d.exit()
    else:
        raise NotProton(kind)


def proton_encode(node) -> bytes:
    d = Data()
    _put(d, node)
    return d.encode()


def encode(node) -> bytes:
    """proton's encoding of ``node`` where it has one, else the minimal encoder's."""
    try:
        return proton_encode(node)
    except NotProton:
        return own_encode(node)
    except Exception:  # e.g. a value proton refuses (an odd code point): ours writes it
        return own_encode(node)


def _fixed_body(kind, v):
    if kind == "boolean":
        return b"\x01" if v else b"\x00"
    fmt = {"ubyte": ">B", "ushort": ">H", "uint": ">I", "ulong": ">Q", "byte": ">b", "short": ">h", "int": ">i",
           "long": ">q", "timestamp": ">q", "float": ">f", "double": ">d", "decimal32": ">I", "decimal64": ">Q",
           "char": ">I"}.get(kind)
    if kind == "float":
        return struct.pack(">f", v) if not (math.isfinite(v) and abs(v) > 3.4e38) else struct.pack(">f", math.inf)
    if fmt:
        return struct.pack(fmt, v)
    if kind in ("decimal128", "uuid"):
        return v
    return b""


_FIXED_CODE = {"null": 0x40, "boolean": 0x56, "ubyte": 0x50, "ushort": 0x60, "uint": 0x70, "ulong": 0x80,
               "byte": 0x51, "short": 0x61, "int": 0x71, "long": 0x81, "float": 0x72, "double": 0x82,
               "decimal32": 0x74, "decimal64": 0x84, "decimal128": 0x94, "char": 0x73, "timestamp": 0x83,
               "uuid": 0x98}
_VAR_CODE = {"binary": (0xA0, 0xB0), "string": (0xA1, 0xB1), "symbol": (0xA3, 0xB3)}


def _var_bytes(kind, v):
    if kind == "binary":
        return v
    return v.encode("utf-8", "surrogatepass") if kind == "string" else v.encode("latin-1", "replace")


def own_encode(node) -> bytes:
    """The minimal encoder: any node, valid or not, with the forms the node asks for."""
    kind, v, form = node
    if kind == "raw":
        return v
    if kind == "truncated":
        b = own_encode(v)
        return b[: max(1, len(b) - form)]
    if kind == "badutf8":
        return bytes([0xA1, len(v)]) + v if form == 0 and len(v) < 256 else b"\xb1" + struct.pack(">I", len(v)) + v
    if kind == "badchar":
        return b"\x73" + struct.pack(">I", v)
    if kind == "lying":
        code, size, count = v
        body = b"".join(own_encode(x) for x in form)
        if code in (0xC0, 0xC1, 0xE0):
            return bytes([code, size & 0xFF, count & 0xFF]) + body
        return bytes([code]) + struct.pack(">II", size & 0xFFFFFFFF, count & 0xFFFFFFFF) + body
    if kind == "described":
        return b"\x00" + own_encode(v[0]) + own_encode(v[1])
    if kind == "boolean" and form == 0:
        return b"\x41" if v else b"\x42"
    if kind in ("uint", "ulong") and form == 0 and 0 <= v < 256:
        return bytes([0x52 if kind == "uint" else 0x53, v]) if v else (b"\x43" if kind == "uint" else b"\x44")
    if kind in ("int", "long") and form == 0 and -128 <= v < 128:
        return bytes([0x54 if kind == "int" else 0x55]) + struct.pack(">b", v)
    if kind in _FIXED_CODE:
        return bytes([_FIXED_CODE[kind]]) + _fixed_body(kind, v)
    if kind in _VAR_CODE:
        b = _var_bytes(kind, v)
        small, wide = _VAR_CODE[kind]
        if form == 0 and len(b) < 256:
            return bytes([small, len(b)]) + b
        return bytes([wide]) + struct.pack(">I", len(b)) + b
    if kind == "list":
        if not v and form == 0:
            return b"\x45"
        body = b"".join(own_encode(x) for x in v)
        return _compound(0xC0, 0xD0, form, len(v), body)
    if kind == "map":
        body = b"".join(own_encode(a) + own_encode(b) for a, b in v)
        return _compound(0xC1, 0xD1, form, 2 * len(v), body)
    if kind == "array":
        return _compound(0xE0, 0xF0, form, len(v[2]), _array_body(v))
    raise ValueError(kind)


def _compound(small, wide, form, count, body):
    if form == 0 and len(body) + 1 < 256 and count < 256:
        return bytes([small, len(body) + 1, count]) + body
    return bytes([wide]) + struct.pack(">II", len(body) + 4, count) + body


def _array_body(v) -> bytes:
    """Element constructor (after the shared descriptor) and the elements without constructors."""
    ek, desc, elems = v
    pre = b"\x00" + own_encode(desc) if desc is not None else b""
    if ek in _FIXED_CODE:
        return pre + bytes([_FIXED_CODE[ek]]) + b"".join(_fixed_body(ek, e[1]) for e in elems)
    if ek in _VAR_CODE:
        return pre + bytes([_VAR_CODE[ek][1]]) + b"".join(
            struct.pack(">I", len(b)) + b for b in (_var_bytes(ek, e[1]) for e in elems))
    if ek == "list":
        parts = [b"".join(own_encode(x) for x in e[1]) for e in elems]
        return pre + b"\xd0" + b"".join(struct.pack(">II", len(p) + 4, len(e[1])) + p for p, e in zip(parts, elems))
    if ek == "map":
        parts = [b"".join(own_encode(a) + own_encode(b) for a, b in e[1]) for e in elems]
        return pre + b"\xd1" + b"".join(struct.pack(">II", len(p) + 4, 2 * len(e[1])) + p
                                        for p, e in zip(parts, elems))
    parts = [_array_body(e[1]) for e in elems]  # arrays of arrays
    return pre + b"\xf0" + b"".join(struct.pack(">II", len(p) + 4, len(e[1][2])) + p for p, e in zip(parts, elems))


# --------------------------------------------------------------------------- frames (from the spec)

PERFORMATIVES = _spec.PROVIDERS["frame"]
SASL_FRAMES = _spec.PROVIDERS["sasl-frame"]
CODE = {name: entry[5] for name, entry in _spec.COMPOSITES.items()}


def typed(r, ftype, primitive_name, requires, multiple, depth=2):
    """A value of a field's declared type (composite, restricted choice, archetype provider)."""
    if multiple and r.bool(0.5):
        prim = primitive_name if primitive_name in _PT and primitive_name not in COMPOUND else "symbol"
        return ("array", (prim, None, [typed(r, ftype, primitive_name, requires, False, depth)
                                       for _ in range(r.int(0, 3))]), r.int(0, 1))
    if requires and depth > 0:
        providers = _spec.PROVIDERS.get(requires, ())
        if providers:
            name = r.choice(providers)
            if name in _spec.COMPOSITES:
                return composite(r, name, depth - 1)
            rs = _spec.RESTRICTED[name]
            return typed(r, name, rs[2], None, False, depth - 1)
    if ftype in _spec.COMPOSITES and depth > 0:
        return composite(r, ftype, depth - 1)
    rs = _spec.RESTRICTED.get(ftype)
    if rs is not None and rs[7] and r.bool(0.7):
        wire = r.choice(rs[7])[0]
        prim = rs[2]
        return (prim, wire, 0) if prim != "boolean" else ("boolean", wire, 0)
    if rs is not None and rs[5] is not None and r.bool(0.5):  # a described restricted type (sections)
        return ("described", (("ulong", rs[6], 0), typed(r, rs[1], rs[2], None, False, depth - 1)), 0)
    if primitive_name in _PT:
        return primitive(r, primitive_name, min(depth, 1))
    return value(r, min(depth, 1))


def fields_of(r, name, depth=2, wrong=0.15):
    """Field values of composite ``name`` from its spec entry: typed, null, absent, or any value."""
    specs = _spec.COMPOSITES[name][6]
    out = []
    for fname, ftype, prim, requires, mandatory, multiple, _hd, _d in specs:
        k = r.int(0, 99)
        if k < int(wrong * 100):
            out.append(value(r, 1))  # a value of any type
        elif k < 30 and not mandatory:
            out.append(("null", None, 0))
        else:
            out.append(typed(r, ftype, prim, requires, multiple, depth))
    if r.bool(0.3):  # trailing fields absent
        out = out[: r.int(0, len(out))]
    if r.bool(0.05):  # more fields than the spec has
        out += [value(r, 1) for _ in range(r.int(1, 3))]
    return out


def composite(r, name, depth=2, wrong=0.15):
    entry = _spec.COMPOSITES[name]
    desc = ("ulong", entry[5], r.int(0, 1)) if r.bool(0.85) else ("symbol", entry[4], 0)
    body = ("list", fields_of(r, name, depth, wrong), r.int(0, 2))
    return ("described", (desc, body), 0)


def performative(name, fields):
    """The described list of performative ``name`` with these field nodes (None = null)."""
    items = [("null", None, 0) if f is None else f for f in fields]
    return ("described", (("ulong", CODE[name], 0), ("list", items, 0)), 0)


def frame_bytes(body: bytes, channel=0, ftype=0, doff=2, ext=b"", size=None) -> bytes:
    n = 8 + len(ext) + len(body) if size is None else size
    return struct.pack(">IBBH", n & 0xFFFFFFFF, doff, ftype, channel) + ext + body


def any_frame(r):
    """One frame of any performative (AMQP or SASL) from the spec, with fields of any type."""
    sasl = r.bool(0.2)
    name = r.choice(SASL_FRAMES if sasl else PERFORMATIVES)
    body = encode(composite(r, name))
    if name == "transfer" and r.bool(0.7):
        body += message(r)
    if r.bool(0.05):
        return frame_bytes(body, r.int(0, 3), 1 if sasl else 0, r.choice((0, 1, 2, 3, 255)), b"", r.choice((
            0, 7, 8, 9, 2**31, 2**32 - 1)))
    return frame_bytes(body, r.choice((0, 0, 1, 2, 65535)), 1 if sasl else 0)


# --------------------------------------------------------------------------- messages

SECTIONS = ("header", "delivery-annotations", "message-annotations", "properties", "application-properties",
            "data", "amqp-sequence", "amqp-value", "footer")


def section(r, name):
    if name in _spec.COMPOSITES:
        return composite(r, name, 1, wrong=0.1)
    rs = _spec.RESTRICTED[name]
    if rs[2] == "map":
        v = ("map", [(primitive(r, r.choice(("symbol", "string", "ulong"))), value(r, 1))
                     for _ in range(r.int(0, 3))], 0)
    elif rs[2] == "binary":
        v = primitive(r, "binary")
    elif rs[2] == "list":
        v = primitive(r, "list")
    else:
        v = value(r, 2)
    if r.bool(0.1):
        v = value(r, 1)
    return ("described", (("ulong", rs[6], 0), v), 0)


def message(r) -> bytes:
    if r.bool(0.1):
        return r.bytes(0, 40)
    if r.bool(0.1):
        return encode(value(r, 2))
    names = [n for n in SECTIONS if r.bool(0.35)]
    if not names:
        names = ["amqp-value"]
    if r.bool(0.1):
        names = [r.choice(SECTIONS) for _ in range(r.int(1, 4))]  # any order, repeats
    return b"".join(encode(section(r, n)) for n in names)


# --------------------------------------------------------------------------- conversations

HEADER_AMQP = b"AMQP\x00\x01\x00\x00"
HEADER_SASL = b"AMQP\x03\x01\x00\x00"


def _u(r, pool):
    """A small integer from ``pool`` (so handles, channels and ids collide), rarely any uint."""
    return ("uint", r.choice(pool) if r.bool(0.9) else _int_in(r, 0, 2**32 - 1), r.int(0, 1))


def _maybe_wrong(r, fields, p=0.08):
    """Each field, rarely, replaced by a value of any type, or the list cut short."""
    out = [value(r, 1) if r.bool(p) else f for f in fields]
    if r.bool(0.05):
        out = out[: r.int(0, len(out))]
    return out


def conversation(r):
    """[(direction, bytes)]: the byte streams of one AMQP connection, frame by frame."""
    out = []
    if r.bool(0.15):  # SASL first
        out += [(0, HEADER_SASL), (1, HEADER_SASL)]
        out.append((1, frame_bytes(encode(composite(r, "sasl-mechanisms", wrong=0.05)), 0, 1)))
        out.append((0, frame_bytes(encode(composite(r, "sasl-init", wrong=0.05)), 0, 1)))
        out.append((1, frame_bytes(encode(performative("sasl-outcome", [("ubyte", r.choice((0, 0, 1, 4)), 0)])),
                                   0, 1)))
    if r.bool(0.95):
        out += [(0, HEADER_AMQP), (1, HEADER_AMQP)] if r.bool(0.9) else [(r.int(0, 1), r.choice((
            HEADER_AMQP, HEADER_SASL, b"AMQP\x02\x01\x00\x00", b"AMQP\x00\x01\x00\x01", b"HTTP/1.1"))), ]
    for d in (0, 1):
        if r.bool(0.9):
            f = [("string", f"c{d}", 0), None, ("uint", r.choice((512, 4096, 65536, 2**32 - 1)), 0),
                 ("ushort", r.choice((0, 1, 2, 65535)), 0)]
            out.append((d, frame_bytes(encode(performative("open", _maybe_wrong(r, f))))))
    for i in range(r.int(0, 25)):
        d = r.int(0, 1)
        ch = r.choice(CHANNELS)
        out += step(r, r.choice(OPS), d, ch, i + 1)
    return out


CHANNELS, HANDLES, IDS = (0, 1, 2), (0, 1, 2, 3), (0, 1, 2, 3, 4, 5)
OPS = ("begin", "begin", "attach", "attach", "flow", "transfer", "transfer", "transfer", "multi",
       "disposition", "disposition", "detach", "end", "close", "empty", "any", "garbage")


def step(r, op, d, ch, tag) -> list:
    """[(direction, bytes)]: the frames of one step ``op`` of a conversation (a performative with
    plausible fields, now and then one of any type; a multi-frame transfer; any frame; garbage)."""
    chans, handles, ids = CHANNELS, HANDLES, IDS
    out = []
    if op == "begin":
        f = [("ushort", r.choice(chans), 0) if d == 1 or r.bool(0.1) else None, _u(r, ids),
             _u(r, (0, 1, 10, 2**31)), _u(r, (0, 1, 10, 2**31)), _u(r, handles)]
    elif op == "attach":
        term = [composite(r, "source", 1, 0.05), composite(r, "target", 1, 0.05)]
        if r.bool(0.1):
            term[1] = composite(r, "coordinator", 1, 0.05)
        f = [("string", r.choice(("a", "b", "c")), 0), _u(r, handles), ("boolean", r.bool(), 0),
             ("ubyte", r.int(0, 2), 0) if r.bool(0.5) else None, ("ubyte", r.int(0, 1), 0) if r.bool(0.3) else None,
             term[0], term[1], None, None, _u(r, ids) if r.bool(0.7) else None]
    elif op == "flow":
        f = [_u(r, ids), _u(r, (0, 1, 10)), _u(r, ids), _u(r, (0, 1, 10)), _u(r, handles), _u(r, ids),
             _u(r, (0, 1, 2, 100)), None, ("boolean", r.bool(0.2), 0), ("boolean", r.bool(0.2), 0)]
        if r.bool(0.3):
            f = f[:4]
    elif op in ("transfer", "multi"):
        settled = ("boolean", r.bool(0.3), 0) if r.bool(0.5) else None
        f = [_u(r, handles), _u(r, ids), ("binary", b"t%d" % tag, 0), ("uint", 0, 0), settled]
        payload = message(r)
        if op == "multi" and len(payload) > 1:
            cut = sorted({r.int(1, len(payload) - 1) for _ in range(r.int(1, 3))})
            parts = [payload[a:b] for a, b in zip([0] + cut, cut + [len(payload)])]
            for i, part in enumerate(parts):
                ff = f if i == 0 else ([f[0]] + [None] * 4 if r.bool(0.8) else f)
                more = ("boolean", i < len(parts) - 1, 0)
                ab = ("boolean", True, 0) if r.bool(0.05) else None
                out.append((d, frame_bytes(encode(performative("transfer", _maybe_wrong(
                    r, ff + [None, more, None, None, None, ab]))) + part, ch)))
            return out
        return [(d, frame_bytes(encode(performative("transfer", _maybe_wrong(r, f))) + payload, ch))]
    elif op == "disposition":
        state = composite(r, r.choice(_spec.PROVIDERS["delivery-state"]), 1, 0.05) if r.bool(0.8) else None
        f = [("boolean", r.bool(), 0), _u(r, ids), _u(r, ids) if r.bool(0.4) else None,
             ("boolean", r.bool(0.7), 0), state]
    elif op == "detach":
        f = [_u(r, handles), ("boolean", r.bool(), 0), composite(r, "error", 1, 0.1) if r.bool(0.2) else None]
    elif op in ("end", "close"):
        f = [composite(r, "error", 1, 0.1) if r.bool(0.3) else None]
    elif op == "empty":
        return [(d, frame_bytes(b"", ch))]
    elif op == "any":
        return [(d, any_frame(r))]
    else:
        return [(d, r.bytes(1, 30))]
    return [(d, frame_bytes(encode(performative(op, _maybe_wrong(r, f))), ch))]


def _perf(r, name, fields, channel=0, payload=b"", wrong=0.03):
    return frame_bytes(encode(performative(name, _maybe_wrong(r, fields, wrong))) + payload, channel)


def _outcome(r, txn=None):
    name = r.choice(("accepted", "accepted", "accepted", "rejected", "released", "modified", "received"))
    st = composite(r, name, 1, 0.02) if name != "accepted" else performative("accepted", [])
    if txn is not None and r.bool(0.5):
        return performative("transactional-state", [("binary", txn, 0), st])
    return st


def coherent(r):
    """[(direction, bytes)]: a conversation that follows the protocol (sessions begun both ways,
    links attached both ways, credit, transfers with consecutive delivery ids, some of them
    multi-frame, dispositions by the receiver, transactions on a coordinator link, detach, end,
    close), then damaged: frames dropped, duplicated or moved, now and then a field of any type."""
    out = [(0, HEADER_AMQP), (1, HEADER_AMQP)]
    mfs = r.choice((512, 4096, 65536, None))
    for d in (0, 1):
        out.append((d, _perf(r, "open", [("string", f"c{d}", 0), None, ("uint", mfs, 0) if mfs else None])))
    txns = []
    for s in range(r.int(1, 2)):
        ch = (s, r.choice((0, 1, 2, 7)))  # the client's and the server's channel
        nxt = [r.choice((0, 1, 2**32 - 2)), r.choice((0, 5, 2**32 - 1))]  # next delivery id per direction
        win = r.choice((2, 100, 2**31))
        out.append((0, _perf(r, "begin", [None, ("uint", nxt[0], 0), ("uint", win, 0), ("uint", win, 0)], ch[0])))
        out.append((1, _perf(r, "begin", [("ushort", ch[0], 0), ("uint", nxt[1], 0), ("uint", win, 0),
                                           ("uint", win, 0)], ch[1])))
        links = []
        for h in range(r.int(1, 3)):
            sender = r.int(0, 1)  # the side that sends on this link
            coord = sender == 0 and r.bool(0.25)
            name = ("string", f"l{s}.{h}", 0)
            target = performative("coordinator", []) if coord else composite(r, "target", 1, 0.02)
            for d in (0, 1):
                role = ("boolean", d != sender, 0)
                f = [name, ("uint", h, 0), role, ("ubyte", r.int(0, 2), 0) if r.bool(0.5) else None,
                     ("ubyte", r.int(0, 1), 0) if r.bool(0.3) else None, composite(r, "source", 1, 0.02), target,
                     None, None, ("uint", 0, 0) if d == sender else None]
                out.append((d, _perf(r, "attach", f, ch[d])))
            links.append((h, sender, coord))
        for _ in range(r.int(0, 12)):
            h, sender, coord = r.choice(links)
            recv = 1 - sender
            if r.bool(0.3):
                out.append((recv, _perf(r, "flow", [("uint", nxt[recv], 0), ("uint", win, 0), ("uint", nxt[sender], 0),
                                                    ("uint", win, 0), ("uint", h, 0), ("uint", 0, 0),
                                                    ("uint", r.choice((0, 1, 10, 100)), 0), None,
                                                    ("boolean", r.bool(0.1), 0)], ch[recv])))
            did = nxt[sender]
            nxt[sender] = (nxt[sender] + 1) & 0xFFFFFFFF
            settled = r.bool(0.2)
            state = None
            if coord:
                if txns and r.bool(0.4):
                    body = performative("discharge", [("binary", r.choice(txns), 0), ("boolean", r.bool(0.3), 0)])
                else:
                    body = performative("declare", [])
                payload = encode(("described", (("ulong", 0x77, 0), body), 0))
            else:
                payload = message(r)
                if txns and r.bool(0.4):
                    state = performative("transactional-state", [("binary", r.choice(txns), 0)])
            f = [("uint", h, 0), ("uint", did, 0), ("binary", b"d%d" % did, 0), ("uint", 0, 0),
                 ("boolean", settled, 0), None, None, state]
            if r.bool(0.2) and len(payload) > 1:  # multi-frame
                cut = r.int(1, len(payload) - 1)
                out.append((sender, _perf(r, "transfer", f[:5] + [("boolean", True, 0)], ch[sender], payload[:cut])))
                more = [("uint", h, 0)] + [None] * 4 + [("boolean", False, 0)]
                out.append((sender, _perf(r, "transfer", more, ch[sender], payload[cut:])))
            else:
                out.append((sender, _perf(r, "transfer", f, ch[sender], payload)))
            if not settled and r.bool(0.8):
                if coord and r.bool(0.8):
                    txn = b"x%d" % r.int(0, 3)
                    txns.append(txn)
                    st = performative("declared", [("binary", txn, 0)])
                else:
                    st = _outcome(r, r.choice(txns) if txns else None)
                last = ("uint", (did + r.int(0, 2)) & 0xFFFFFFFF, 0) if r.bool(0.2) else None
                out.append((recv, _perf(r, "disposition", [("boolean", True, 0), ("uint", did, 0), last,
                                                           ("boolean", r.bool(0.8), 0), st], ch[recv])))
        for h, sender, coord in links:
            if r.bool(0.7):
                for d in (0, 1):
                    out.append((d, _perf(r, "detach", [("uint", h, 0), ("boolean", True, 0)], ch[d])))
        if r.bool(0.7):
            for d in (0, 1):
                out.append((d, _perf(r, "end", [], ch[d])))
    if r.bool(0.7):
        for d in (0, 1):
            out.append((d, _perf(r, "close", [composite(r, "error", 1, 0.05)] if r.bool(0.1) else [])))
    for _ in range(r.int(0, 3) if r.bool(0.5) else 0):  # damage: frames lost, repeated, moved
        i = r.int(2, len(out) - 1)
        k = r.int(0, 2)
        if k == 0:
            del out[i]
        elif k == 1:
            out.insert(i, out[i])
        else:
            out.insert(min(len(out), i + r.int(1, 5)), out.pop(i))
    return out


# --------------------------------------------------------------------------- captures

def _pcapbuild():
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import pcapbuild

    return pcapbuild


def _csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``: the one's complement sum of its 16-bit words is
    the number the bytes spell modulo 0xFFFF (0x10000 = 1 modulo 0xFFFF), 0xFFFF for a nonzero sum
    the modulo makes 0."""
    if len(data) & 1:
        data += b"\x00"
    s = int.from_bytes(data, "big") % 0xFFFF
    if s == 0 and any(data):
        s = 0xFFFF
    return ~s & 0xFFFF


_PKT = struct.Struct("!BBHHHBBH4s4sHHIIHHHH")  # IPv4 header (20 bytes), then TCP header (20 bytes)


def tcp_ipv4_ethernet(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int,
                      payload: bytes) -> bytes:
    """The Ethernet frame of an IPv4 packet carrying a TCP segment, byte for byte what
    tests/support/pcapbuild.py builds with dpkt (``frame(1, tcp_packet(...))``; tests/fuzz/test_fuzz.py compares
    them), without dpkt's per-packet objects: fuzz_run.py builds millions of these."""
    n = 40 + len(payload)
    ip_sum = _csum(_PKT.pack(0x45, 0, n, 1, 0, 64, 6, 0, src, dst, 0, 0, 0, 0, 0, 0, 0, 0)[:20])
    pseudo = src + dst + struct.pack("!BBH", 0, 6, 20 + len(payload))
    tcp_sum = _csum(pseudo + struct.pack("!HHIIHHHH", sport, dport, seq, ack, 0x5000 | flags, 65535, 0, 0) + payload)
    return _ETH + _PKT.pack(0x45, 0, n, 1, 0, 64, 6, ip_sum, src, dst, sport, dport, seq, ack, 0x5000 | flags,
                            65535, tcp_sum, 0) + payload


_ETH = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"  # dst, src MAC, IPv4


def _conversation_class():
    """pcapbuild.TcpConversation whose IPv4-over-Ethernet packets are built by
    :func:`tcp_ipv4_ethernet` (same bytes, about 20x less CPU than dpkt's objects)."""
    global _FastConversation
    if _FastConversation is None:
        pb = _pcapbuild()

        class FastConversation(pb.TcpConversation):
            def packet(self, direction, flags, payload=b"", seq=None, ack=None, advance=True):
                (sip, sp), (dip, dp) = self.ends[direction], self.ends[1 - direction]
                if self.linktype != pb.LINKTYPE_ETHERNET or self.frame_kw or ":" in sip:
                    return super().packet(direction, flags, payload, seq, ack, advance)
                if seq is None:
                    seq = self.next_seq[direction]
                if ack is None:
                    ack = self.next_seq[1 - direction] if flags & pb.ACK else 0
                seq &= 0xFFFFFFFF
                ack &= 0xFFFFFFFF
                fr = tcp_ipv4_ethernet(pb._pton(sip), pb._pton(dip), sp, dp, seq, ack, flags, payload)
                self.records.append((self.t, self.linktype, fr))
                self.segments.append((direction, seq, ack, flags, payload))
                self.t += self.dt
                if advance:
                    n = len(payload) + (1 if flags & pb.SYN else 0) + (1 if flags & pb.FIN else 0)
                    self.next_seq[direction] = (seq + n) & 0xFFFFFFFF
                return fr

        _FastConversation = FastConversation
    return _FastConversation


_FastConversation = None


def write_pcap(records, nano=False, linktype=None) -> bytes:
    """``pcapbuild.write_pcap(records, nano=nano, linktype=linktype)`` (little-endian, snap length
    65535), byte for byte (tests/fuzz/test_fuzz.py compares them), the record headers packed here
    instead of by one dpkt object each."""
    pb = _pcapbuild()
    recs = [r if len(r) == 3 else (r[0], linktype, r[1]) for r in records]
    if linktype is None:
        linktype = recs[0][1] if recs else pb.LINKTYPE_ETHERNET
    units = 10**9 if nano else 10**6
    out = [struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)]
    rec = struct.Struct("<IIII").pack
    split = pb._split_ts
    for ts, _lt, data in recs:
        sec, frac = split(ts, units)
        out.append(rec(sec, frac, len(data), len(data)))
        out.append(data)
    return b"".join(out)


def write_pcapng(records, res=None) -> bytes:
    """``pcapbuild.write_pcapng([(ts, 0, data) ...], interfaces=((1, res),))``, byte for byte, the
    Enhanced Packet Blocks packed here."""
    pb = _pcapbuild()
    out = [pb.pcapng_shb(), pb.pcapng_idb(pb.LINKTYPE_ETHERNET, res)]
    units = pb.tsresol_units(res)
    split = pb._split_ts
    hdr = struct.Struct("<IIIIIII").pack
    for ts, data in records:
        sec, frac = split(ts, units)
        ticks = sec * units + frac
        pad = -len(data) % 4
        n = 32 + len(data) + pad
        out.append(hdr(6, n, 0, ticks >> 32, ticks & 0xFFFFFFFF, len(data), len(data)))
        out.append(data + b"\x00" * pad + struct.pack("<I", n))
    return b"".join(out)


def capture(r, streams=None, keep=None) -> bytes:
    """A pcap or pcapng capture of one or two generated conversations (or of ``streams``).
    ``keep``: a list that gets the capture's records and whether it is pcapng."""
    pb = _pcapbuild()
    conv_cls = _conversation_class()
    convs = []
    for i in range(1 if streams is not None or r.bool(0.85) else 2):
        s = streams if streams is not None else (coherent(r) if r.bool(0.5) else conversation(r))
        t0 = r.choice((1_700_000_000.0, 1_700_000_000.0, 0.0, 1.8e12, 4_000_000_000.0))
        mss = r.choice((1460, 1460, 1460, 1460, 17, 64, 300)) if r.bool(0.95) else 3
        c = conv_cls(client=("10.0.0.1", 40000 + i), server=("10.0.0.2", r.choice((5672, 5672, 5671))),
                     t0=t0 + i * 0.0005, dt=r.choice((0.001, 0.001, 0.0, 100.0)), mss=mss, acks=r.bool(0.2))
        if r.bool(0.9):
            c.handshake()
        for d, b in s:
            # 3-byte segments for one frame in ten (a frame split across many segments, a header
            # split inside its size field): all of a 20 KB conversation would be 7,000 packets
            c.send(d, b, mss=1460 if mss == 3 and r.bool(0.9) else None)
        k = r.int(0, 9)
        if k < 6:
            c.close(r.int(0, 1))
        elif k < 7:
            c.rst(r.int(0, 1))
        convs.append(c)
    records = sorted((rec for c in convs for rec in c.records), key=lambda x: x[0])
    if r.bool(0.25) or records and records[-1][0] >= 2**32:  # (pcap's seconds are 32 bits)
        res = r.choice((None, 6, 9, 0x80 | 20))
        if records and records[-1][0] * pb.tsresol_units(res) >= 2**63:
            res = None
        if keep is not None:
            keep += [records, True]
        return write_pcapng([(ts, data) for ts, _lt, data in records], res)
    if keep is not None:
        keep += [records, False]
    return write_pcap(records, nano=r.bool(0.2))


def frame_capture(r) -> bytes:
    """Headers, opens and one to three frames of any performative with fields of any type."""
    streams = [(0, HEADER_AMQP), (1, HEADER_AMQP)]
    for d in (0, 1):
        streams.append((d, frame_bytes(encode(performative("open", [("string", f"c{d}", 0)])))))
    for _ in range(r.int(1, 3)):
        streams.append((r.int(0, 1), any_frame(r)))
    return capture(r, streams)


# --------------------------------------------------------------------------- mutation corpus

def samples() -> list[str]:
    return sorted(os.path.join(SAMPLES, n) for n in os.listdir(SAMPLES) if ".pcap" in n)


_SAMPLE_BYTES: dict = {}
_SAMPLE_RECORDS: dict = {}


def _sample(path):
    if path not in _SAMPLE_BYTES:
        with open(path, "rb") as f:
            _SAMPLE_BYTES[path] = f.read()
    return _SAMPLE_BYTES[path]


def _records(path):
    if path not in _SAMPLE_RECORDS:
        pb = _pcapbuild()
        with open(path, "rb") as f:
            _SAMPLE_RECORDS[path] = list(pb.read_pcap_records(f))
    return _SAMPLE_RECORDS[path]


def mutate_bytes(r, data: bytes, other: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(r.int(1, 4)):
        k = r.int(0, 5)
        if not b:
            break
        i = r.int(0, len(b) - 1)
        if k == 0:  # bit flips
            b[i] ^= 1 << r.int(0, 7)
        elif k == 1:
            b[i] = r.choice((0, 0xFF, 0x7F, 0x80, 0x40, 0x45, 0xE0, 0xF0, 0x00))
        elif k == 2:
            b[i:i] = r.bytes(1, 8)
        elif k == 3:
            del b[i: i + r.int(1, 16)]
        elif k == 4:  # truncation
            del b[i:]
        else:  # splice of two samples
            j = r.int(0, len(other))
            b[i:] = other[j:]
    return bytes(b)


def mutate_packets(r, records):
    """Segments dropped, duplicated, reordered, their payload bytes changed, or cut (snap length)."""
    recs = list(records)
    for _ in range(r.int(1, 4)):
        if not recs:
            break
        i = r.int(0, len(recs) - 1)
        k = r.int(0, 5)
        if k == 0:
            del recs[i]
        elif k == 1:
            recs.insert(i, recs[i])
        elif k == 2:
            j = min(len(recs) - 1, i + r.int(1, 30))
            recs.insert(j, recs.pop(i))
        elif k == 3:  # the capture joined mid-stream
            recs = recs[i:]
        elif k == 4:  # a byte of a packet changed (TCP payload mostly: past the 54-byte headers)
            ts, lt, data = recs[i]
            if data:
                b = bytearray(data)
                j = r.int(min(54, len(b) - 1), len(b) - 1)
                b[j] ^= 1 << r.int(0, 7)
                recs[i] = (ts, lt, bytes(b))
        else:  # the packet cut short
            ts, lt, data = recs[i]
            recs[i] = (ts, lt, data[: r.int(0, len(data))])
    return recs


def mutation(r) -> bytes:
    """One damaged capture made from the samples."""
    paths = samples()
    path = r.choice(paths)
    if r.bool(0.5):
        pb = _pcapbuild()
        recs = mutate_packets(r, _records(path))
        if not recs:
            recs = _records(path)[:1]
        lt = recs[0][1]
        return write_pcap([(t, l, d) for t, l, d in recs], linktype=lt)
    return mutate_bytes(r, _sample(path), _sample(r.choice(paths)))


# --------------------------------------------------------------------------- kinds of input

KINDS = ("conversation", "frame", "mutation", "mutated-conversation")
# the kinds a default run drew from before issue 29 added kinds (the journals and reproducers of
# seeds 2027-2029): ``generate(r, r.choice(FIRST_KINDS))`` makes those inputs again
FIRST_KINDS = KINDS


def generate(r, kind=None) -> tuple[str, bytes]:
    kind = kind or r.choice(KINDS)
    if kind == "conversation":
        return kind, capture(r)
    if kind == "frame":
        return kind, frame_capture(r)
    if kind == "mutation":
        return kind, mutation(r)
    if kind == "state-scale":
        return kind, state_scale(r)
    if kind == "websocket":
        return kind, websocket_capture(r)
    if kind == IDLE_KIND:
        return kind, idle_connections(r)
    if kind == GZIP_KIND:
        return kind, gzip_damage(r)
    keep = []
    data = capture(r, keep=keep)
    return kind, mutate_bytes(r, data, data) if r.bool(0.3) else _mutated_capture(r, data, *keep)


def _mutated_capture(r, data: bytes, records, pcapng: bool) -> bytes:
    """The capture's packets dropped, duplicated, moved, changed or cut, written as a pcap (a
    pcapng capture: its bytes mutated instead)."""
    if pcapng or not records:
        return mutate_bytes(r, data, data)
    recs = mutate_packets(r, records) or records[:1]
    return write_pcap(recs, linktype=recs[0][1])


# --------------------------------------------------------------------------- key logs (issue 29)

KEYLOG_LABELS = ("CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                 "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0", "EXPORTER_SECRET", "RSA", "client_random")


def _keylog_line(r, lines: list) -> bytes:
    """One line of a hostile key log: a real line of ``lines`` (bytes, no line end) as it is or
    with wrong secrets, or damaged; a line of a random label and random; junk."""
    k = r.int(0, 13)
    real = r.choice(lines) if lines else b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48
    parts = real.split()
    if k <= 2 or len(parts) != 3:
        return real
    label, random, secret = parts
    if k == 3:  # wrong secret, right size: zeros, a bit flipped, random bytes
        how = r.int(0, 2)
        if how == 0:
            secret = b"0" * len(secret)
        elif how == 1:
            secret = secret[:-1] + (b"0" if secret[-1:] != b"0" else b"1")
        else:
            secret = r.bytes(len(secret) // 2, len(secret) // 2).hex().encode()
        return b" ".join((label, random, secret))
    if k == 4:  # a secret or random of another size
        return b" ".join((label, random[: r.int(0, len(random))], secret[: r.int(0, len(secret) + 4)] + b"00" * r.int(0, 4)))
    if k == 5:  # not hex
        i = r.int(0, len(secret) - 1)
        return b" ".join((label, random, secret[:i] + r.choice((b"g", b"-", b"\xff", b"\x00", b" ")) + secret[i + 1:]))
    if k == 6:  # fields missing or added
        return b" ".join((parts + [secret])[: r.choice((0, 1, 2, 4))])
    if k == 7:  # another label, a random not in the capture
        return b" ".join((r.choice(KEYLOG_LABELS).encode(), r.bytes(32, 32).hex().encode(), secret))
    if k == 8:
        return b"#" + r.text(0, 40, ascii=True).encode()
    if k == 9:  # over-long
        return real + b" " + b"a" * r.choice((1000, 1100, 5000, 70000))
    if k == 10:  # carriage returns, tabs, leading blanks
        return r.choice((b"  ", b"\t", b"")) + real.replace(b" ", r.choice((b"\t", b"  ", b" "))) + b"\r"
    if k == 11:
        return r.bytes(0, 200).replace(b"\n", b"")
    if k == 12:
        return r.text(0, 80).encode("utf-8", "replace").replace(b"\n", b"")
    return b""


def keylog(r, lines: list) -> bytes:
    """A hostile key log built from the real lines ``lines`` of a capture's key log (bytes, no
    line ends): every line damaged or not, real lines with wrong secrets, junk, over-long lines;
    now and then a huge one (many lines of randoms not in the capture, the real ones among them,
    or a run of NULs past MAX_RUN, as ``/dev/zero``)."""
    out = [_keylog_line(r, lines) for _ in range(r.int(0, 30))]
    if r.bool(0.3):
        out += [bytes(lines[i]) for i in range(len(lines)) if r.bool(0.7)]
    k = r.int(0, 19)
    if k == 0:  # huge: 20,000 lines of other randoms around the real ones
        fill = [b"CLIENT_RANDOM " + r.bytes(32, 32).hex().encode() + b" " + b"11" * 48 for _ in range(200)]
        out = fill * 50 + out + fill * 50
    elif k == 1:  # a NUL run longer than MAX_RUN, without a line end
        out.append(bytes((1 << 20) + r.int(1, 5000)))
    order = list(range(len(out)))
    for i in range(len(order) - 1, 0, -1) if r.bool(0.3) else ():
        j = r.int(0, i)
        order[i], order[j] = order[j], order[i]
    end = r.choice((b"\n", b"\n", b"\r\n"))
    text = end.join(out[i] for i in order)
    return text + (end if r.bool(0.8) else b"")


def cut_capture(r, data: bytes) -> bytes:
    """A capture cut short (at any byte), or as it is."""
    if r.bool(0.4):
        return data
    return data[: r.int(24, max(24, len(data) - 1))]


# --------------------------------------------------------------------------- state at scale (issue 29)

def _hostile():
    benchmarks = os.path.join(os.path.dirname(HERE), "benchmarks")
    if benchmarks not in sys.path:
        sys.path.insert(0, benchmarks)
    import bench_hostile

    return bench_hostile


def state_scale(r) -> bytes:
    """One connection that makes the state model pay per object or per range: transfers on many
    handles never attached or channels never begun (random numbers, some more=true), wide disposition
    ranges over many unsettled deliveries (random bounds, settling or not, repeated), or a flood of
    one frame before open.  Sizes up to a few thousand frames (tens of KB)."""
    B = _hostile()
    conv = B.TcpConversation(mss=r.choice((1460, 65000)))
    conv.handshake()
    shape = r.choice(("handles", "channels", "dispositions", "flood", "mixed"))
    setup = B.setup_exchange()
    n = r.int(1, 3000) if r.bool(0.7) else r.int(1, 30)
    out = []
    if shape == "flood":
        out += setup[:2]
        frame = r.choice((B.empty_frame(r.int(0, 3)), B.transfer_on(0, 0), B.disposition_frame(0, 5)))
        out.append((r.int(0, 1), frame * n))
    else:
        out += setup[:6] if shape in ("handles", "channels") else setup
        body = []
        if shape in ("handles", "mixed"):
            top = r.choice((n, 2**16, 2**32 - 1))
            body += [B.transfer_on(r.int(0, top), r.int(0, 2 * n), more=r.bool(0.3)) for _ in range(n)]
        if shape in ("channels", "mixed"):
            body += [B.frame(B.transfer_on(r.int(0, 3), i)[8:], channel=r.int(1, 65535)) for i in range(n)]
        if shape in ("dispositions", "mixed"):
            body += [B.transfer_frame(i) for i in range(n)]
        out.append((0, b"".join(body)))
        if shape in ("dispositions", "mixed"):
            ranges = []
            for _ in range(r.int(1, 3000)):
                first = r.choice((0, r.int(0, n), r.int(0, 2**32 - 1)))
                last = r.choice((2**31 - 1, first + r.int(0, 2 * n), r.int(0, 2**32 - 1))) & 0xFFFFFFFF
                ranges.append(B.disposition_frame(first, last, settled=r.bool(0.2)))
            if r.bool(0.3):  # the shape: one range over every delivery, again and again, not settling
                ranges = [B.disposition_frame(0, 2**31 - 1)] * len(ranges)
            out.append((1, b"".join(ranges)))
    for d, data in out:
        conv.send(d, data)
    conv.close()
    return conv.pcap()


KINDS = KINDS + ("state-scale",)


# --------------------------------------------------------------------------- AMQP over WebSocket (issue 29)

def _ws_frame(r, payload: bytes, opcode: int, fin: bool, rsv: int, client: bool) -> bytes:
    """One WebSocket frame (RFC 6455's layout): masked from the client, now and then a header
    that breaks a rule (the wrong mask bit, a long length form for a short payload)."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | rsv | opcode
    masked = client if r.bool(0.97) else not client
    form = 0 if n < 126 else 1 if n < 65536 else 2
    if r.bool(0.03):
        form = min(2, form + 1)  # not the shortest length encoding
    b1 = 0x80 if masked else 0
    head = bytes([b0, b1 | n]) if form == 0 else bytes([b0, b1 | 126]) + n.to_bytes(2, "big") if form == 1 \
        else bytes([b0, b1 | 127]) + n.to_bytes(8, "big")
    if not masked:
        return head + payload
    key = r.bytes(4, 4)
    mask = (key * (n // 4 + 1))[:n]
    return head + key + (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(n, "big")


def websocket_capture(r) -> bytes:
    """A generated conversation carried over WebSocket (the upgrade, then binary messages cut into
    frames at random, permessage-deflate or not, with or without context takeover), with now and then
    pings, text and close frames, a broken frame header, a message that inflates far beyond what it
    carries (a deflate bomb), or a compressed message the window cannot inflate."""
    import base64
    import hashlib
    import zlib

    deflate = r.bool(0.6)
    no_context = deflate and r.bool(0.3)
    key = base64.b64encode(r.bytes(16, 16))
    ext = "Sec-WebSocket-Extensions: permessage-deflate" + ("; client_no_context_takeover" if no_context else "")
    req = (f"GET /amqp HTTP/1.1\r\nHost: broker\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: amqp\r\n"
           + (ext + "\r\n" if deflate else "") + "\r\n").encode()
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()
    resp = (f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: amqp\r\n"
            + ("Sec-WebSocket-Extensions: permessage-deflate" + ("; client_no_context_takeover" if no_context else "")
               + "\r\n" if deflate else "") + "\r\n").encode()
    zs = [zlib.compressobj(6, zlib.DEFLATED, -15), zlib.compressobj(6, zlib.DEFLATED, -15)]
    out = [(0, req), (1, resp)]
    for d, data in (coherent(r) if r.bool(0.5) else conversation(r)):
        client = d == 0
        if deflate and r.bool(0.03):  # a bomb: zeros or empty AMQP frames at DEFLATE's best ratio
            unit = r.choice((b"\x00", b"\x00\x00\x00\x08\x02\x00\x00\x00"))
            bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
            body = bomb.compress(unit * (r.int(1, 4000) * 1024 // len(unit))) + bomb.flush(zlib.Z_SYNC_FLUSH)
            out.append((d, _ws_frame(r, body[:-4], 2, True, 0x40, client)))
            continue
        if deflate and r.bool(0.8):
            z = zs[d] if not (client and no_context) else zlib.compressobj(6, zlib.DEFLATED, -15)
            payload = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
            payload = payload[:-4] if r.bool(0.97) else r.bytes(1, 40)  # now and then not DEFLATE at all
            rsv = 0x40
        else:
            payload, rsv = data, 0
        cuts = sorted({0, len(payload)} | {r.int(0, len(payload)) for _ in range(r.int(0, 3))})
        for i in range(len(cuts) - 1):
            part = payload[cuts[i]:cuts[i + 1]]
            out.append((d, _ws_frame(r, part, 2 if i == 0 else 0, i == len(cuts) - 2, rsv if i == 0 else 0, client)))
        if r.bool(0.05):
            out.append((d, _ws_frame(r, r.bytes(0, 125), r.choice((1, 8, 9, 10, 3, 11)), True, 0, client)))
        if r.bool(0.01):
            out.append((d, bytes([r.int(0, 255), r.int(0, 255)]) + r.bytes(0, 12)))  # a broken header
    port = r.choice((80, 443, 5672, 9000))
    c = _conversation_class()(client=("10.0.0.1", 40000), server=("10.0.0.2", port),
                              mss=r.choice((1460, 1460, 300, 65000)))
    c.handshake()
    for d, b in out:
        c.send(d, b)
    c.close(r.int(0, 1))
    return write_pcap(c.records)


KINDS = KINDS + ("websocket",)

# --------------------------------------------------------------------------- hypothesis strategies

def _strategy(fn):
    from hypothesis import strategies as st

    return st.composite(lambda draw: fn(HypothesisSource(draw)))()


def values():
    return _strategy(lambda r: value(r, 3))


def frames():
    return _strategy(frame_capture)


def conversations():
    return _strategy(capture)


def mutations():
    return _strategy(mutation)


def websocket_captures():
    return _strategy(websocket_capture)


def coherent_captures():
    """Captures of structure-aware conversations (``coherent``), damaged now and then."""
    return _strategy(lambda r: capture(r, streams=coherent(r)))


def keylogs(lines: list):
    return _strategy(lambda r: (keylog(r, lines), r.int(0, 2**31)))


# --------------------------------------------------------------------------- the oracle

COMMANDS = ("frames", "frames -V", "frames --format jsonl", "report", "report --format json")
TABLES = ("deliveries", "links", "stalls", "connections", "sessions", "transactions", "violations", "errors")
TABLE_METHODS = {"links": "link_rows", "stalls": "stall_rows", "connections": "connection_rows",
                 "sessions": "session_rows", "transactions": "transaction_rows", "violations": "violation_rows",
                 "errors": "error_rows"}


class Failure(Exception):
    pass


class _Replay:
    """The part of a CaptureRun that the frames printers read (``events``, ``live``,
    ``tls_records``), replaying the (record, event) pairs of one decode: ``frames -V`` and
    ``frames --format jsonl`` decode with the same options (messages in full; -V's TLS record list
    only collects the records it shows), so one decode feeds both printers (tests/fuzz/test_fuzz.py
    compares the outputs with two separate runs)."""

    live = None

    def __init__(self, pairs, tls_records):
        self.pairs = pairs
        self.tls_records = tls_records

    def events(self):
        return iter(self.pairs)


def _traceback(name, e) -> str:
    import traceback

    return f"{name}: {type(e).__name__}: {e}\n{traceback.format_exc()}"


class Checker:
    """The oracle of :func:`check` for many inputs in a row.

    ``batch`` > 1 gathers the table rows (and the deliveries' record batches) of up to ``batch``
    inputs and writes each table once per format through the same writers (``write_table``,
    ``write_batches``: a row's cells do not depend on the other rows of its batch; the writers'
    fixed cost per call, a few ms per table, is then paid once per ``batch`` inputs).  A write that
    fails is retried input by input to name the inputs that make it fail.  :meth:`check` returns
    the failures found at once; :meth:`flush` writes what is gathered and returns
    ``{key: failures}`` of the inputs whose tables failed (a failure that needs several inputs
    together is given to each of them)."""

    def __init__(self, formats=("csv", "jsonl"), batch: int = 1, html: bool = True, keylog=None):
        self.html = html  # report --format html too (its own decode, with the time series)
        self.keylog = keylog  # --keylog FILE for every command (a path), or None
        self.formats = tuple(formats)
        self.batch = batch
        self.pending: list = []  # (key, {table: rows}, [deliveries record batches])
        self.cpu: dict = {}  # CPU seconds of each path of the last check (fuzz_run.py's cost check)

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.batch

    def check(self, path: str, key=None) -> list[str]:
        """The failures of capture ``path`` through every command's path, in-process (the
        functions the commands call).  The oracle is the CLI's own exit-1 rule: an
        exception outside the DissectError family, an analyzer internal error (an internal-error
        violation row), or a finish status of EXIT_INTERNAL (-V: a packet it could not describe,
        a bug, makes it exit 1)."""
        import json

        from amqp_dissect.cli.common import load_keylog
        from amqp_dissect.cli.frames_command import _print_jsonl, _print_summary, _print_verbose
        from amqp_dissect.cli.run import CaptureRun, Checked
        from amqp_dissect.cli.common import EXIT_INTERNAL, Fail
        from amqp_dissect.pipelines.runs.local import DeliveryStream
        from amqp_dissect.render.report import render_text
        from amqp_dissect.results.report import build_report
        from pathlib import Path

        p = Path(path)
        failures = []
        err = io.StringIO()
        tables: dict = {}
        deliveries: list = []

        cpu = self.cpu = {}

        def step(name, fn):
            t0 = time.process_time()
            try:
                with redirect_stderr(err):
                    rc = fn()
                if rc == EXIT_INTERNAL:
                    failures.append(f"{name}: exit 1: {err.getvalue().strip()}")
            except Fail:
                pass  # exit 3 / 4: not a capture this tool reads (a user-facing line, not a bug)
            except Exception as e:  # the CLI would print "internal error" and exit 1
                failures.append(_traceback(name, e))
            finally:
                cpu[name] = cpu.get(name, 0.0) + time.process_time() - t0

        def frames_summary():
            run = CaptureRun(p, [], messages="summary", keylog=load_keylog(self.keylog))
            _print_summary(run, io.StringIO())
            return run.finish_status()

        def frames_full():
            # one decode (messages in full) replayed through the -V printer and the jsonl printer
            t0 = time.process_time()
            with redirect_stderr(err):  # (the key log's damaged lines are told on stderr)
                run = CaptureRun(p, [], messages=True, tls_records=[], keylog=load_keylog(self.keylog))
            pairs, stop = [], None
            try:
                with redirect_stderr(err):
                    for pair in run.events():
                        pairs.append(pair)
            except Exception as e:  # raised in both commands, after the frames before it
                stop = e
            replay = _Replay(pairs, run.tls_records)
            cpu["frames decode"] = time.process_time() - t0

            def verbose():
                detail = _print_verbose(replay, io.StringIO())
                if stop is not None:
                    raise stop
                return run.finish_status(detail if hasattr(detail, "internal_errors") else None)

            def jsonl():
                _print_jsonl(replay, io.StringIO())
                if stop is not None:
                    raise stop
                return run.finish_status()

            step("frames -V", verbose)
            step("frames --format jsonl", jsonl)

        def analysis():
            run = CaptureRun(p, [], keylog=load_keylog(self.keylog))
            a = run.analyze(rows=False)
            an = a.analyzer
            rep = build_report(an, capture_errors=a.capture_errors)
            render_text(rep)
            # report --format json: json.dumps(rep, indent=2, ...); the same options without the
            # indent (which only adds whitespace) take the C encoder, raising for the same values
            json.dumps(rep, ensure_ascii=False, allow_nan=False, default=str)
            for table, method in TABLE_METHODS.items():
                tables[table] = list(getattr(an, method)())
            bad = [v for v in an.violations if v.get("kind") == "internal-error"]
            if bad and not an.internal_errors:
                failures.append(f"report: internal-error rows without exit 1: {bad[0]}")
            return run.finish_status(an)

        def html():
            # report --format html: the SeriesAnalyzer's decode, the plot document and the page
            from amqp_dissect.cli.report_html import analyze_for_report

            run = CaptureRun(p, [], keylog=load_keylog(self.keylog))
            analysis, _, page = analyze_for_report(run, html=True, version="fuzz")
            if not page.endswith("</html>\n"):
                failures.append("report --format html: the page is cut short")
            return run.finish_status(analysis.analyzer)

        def delivery_stream():
            # the deliveries command's stream; its batches do not depend on the format written
            run = CaptureRun(p, [], keylog=load_keylog(self.keylog))
            stream = DeliveryStream(Checked(run))
            for b in stream.batches(2048):
                deliveries.append(b)
            return run.finish_status(stream.analyzer)

        step("frames", frames_summary)
        frames_full()
        step("report", analysis)
        if self.html:
            step("report --format html", html)
        step("deliveries", delivery_stream)
        self.pending.append((key, tables, deliveries))
        if self.batch <= 1:
            failures += self.flush().get(key, [])
        return failures

    def flush(self) -> dict:
        """Write the gathered tables (each table once per format); ``{key: failures}``."""
        from amqp_dissect.pipelines.writers.tables import lean_arrow

        pending, self.pending = self.pending, []
        out: dict = {}
        if not pending:
            return out
        with lean_arrow():
            for table in TABLE_METHODS:
                for fmt in self.formats:
                    self._write(pending, out, f"{table} --format {fmt}",
                                lambda group: _write_rows(table, fmt, [r for _, t, _ in group for r in t.get(table, ())]))
            for fmt in self.formats:
                self._write(pending, out, f"deliveries --format {fmt}",
                            lambda group: _write_deliveries(fmt, [b for _, _, d in group for b in d]))
        return out

    @staticmethod
    def _write(pending, out, name, write):
        try:
            write(pending)
            return
        except Exception as e:
            if len(pending) == 1:
                out.setdefault(pending[0][0], []).append(_traceback(name, e))
                return
            whole = _traceback(name, e)
        alone = []
        for item in pending:
            try:
                write([item])
            except Exception as e:
                alone.append(item[0])
                out.setdefault(item[0], []).append(_traceback(name, e))
        if not alone:  # only the inputs together fail: each of them gets the failure
            for item in pending:
                out.setdefault(item[0], []).append(f"(with the {len(pending)} inputs of its batch) {whole}")


def _write_rows(table, fmt, rows):
    from amqp_dissect.pipelines.writers.tables import write_table

    write_table(rows, table, fmt, io.BytesIO() if fmt != "table" else io.StringIO())


def _write_deliveries(fmt, batches, out=None):
    """The deliveries' record batches of many inputs (a batch or more each), joined into batches of
    the stream's size (2048 rows) and written by ``write_batches``: a batch's text has a fixed cost
    of a few ms, whatever its rows."""
    import pyarrow as pa

    from amqp_dissect.pipelines.writers.tables import STREAM_ROWS, write_batches
    from amqp_dissect.results.tables import arrow_schema

    if len(batches) > 1:
        whole = pa.Table.from_batches(batches, schema=arrow_schema("deliveries")).combine_chunks()
        batches = whole.to_batches(max_chunksize=STREAM_ROWS)
    if out is None:
        out = io.BytesIO() if fmt != "table" else io.StringIO()
    write_batches(batches, "deliveries", fmt, out)


def check(path: str, formats=("csv", "jsonl")) -> list[str]:
    """The failures of capture ``path`` through every command's path (see :meth:`Checker.check`),
    every table written at once."""
    return Checker(formats).check(path)


# --------------------------------------------------------------------------- split (issue 29)
#
# ``split`` reads pcap records raw (copied byte for byte) and pcapng through the capture reader,
# gzip through its own decompressor: its inputs are whole files mutated as they are stored, the
# compressed bytes of a gzip one (corrupt and truncated deflate streams, bad trailers).  The kind
# is not in KINDS (inputs of the other kinds stay what they were for a seed): tests/fuzz/fuzz_run.py
# ``--kinds split`` runs it, and test_fuzz.py's split tests.

SPLIT_KIND = "split"


def split_input(r) -> bytes:
    """A sample as plain pcap, pcapng (microsecond or nanosecond ticks; sometimes times no pcap
    record holds: ticks anywhere in 64 bits, a time offset anywhere in int64) or either
    gzip-compressed, then (mostly) mutated as a whole file."""
    import gzip

    pb = _pcapbuild()
    recs = _records(r.choice(samples()))
    form = r.choice(("pcap", "pcapng", "pcap.gz", "pcapng.gz"))
    if form.startswith("pcapng"):
        res = r.choice((None, 9))
        units = pb.tsresol_units(res)
        far = r.bool(0.3)
        offset = r.int(-(1 << 63), (1 << 63) - 1) if far and r.bool(0.5) else None
        blocks = [pb.pcapng_shb(), pb.pcapng_idb(recs[0][1], res, tsoffset=offset)]
        for ts, _lt, data in recs:
            sec, frac = pb._split_ts(ts, units)
            ticks = sec * units + frac
            if far and offset is None and r.bool(0.5):
                ticks = r.int(0, (1 << 64) - 1)
            blocks.append(pb.pcapng_epb(0, ticks, data))
        data = b"".join(blocks)
    else:
        data = write_pcap(recs, nano=r.bool(0.3), linktype=recs[0][1])
    if form.endswith(".gz"):
        data = gzip.compress(data, compresslevel=r.int(1, 9), mtime=0)
    if r.bool(0.85):
        data = mutate_bytes(r, data, data)
    return data


def check_split(path: str, out_dir: str) -> list[str]:
    """The failures of ``amqp-dissect split`` on capture ``path`` (parts written to ``out_dir``),
    by packets, by bytes into gzip parts, and by seconds: the command function called as the CLI
    calls it, so an exception (click would turn an EOFError into a silent exit 130) is a failure,
    as are exit 1, 130, a non-zero exit without a message, and a part that does not read back
    whole (or the records in the parts not the count split printed)."""
    from pathlib import Path

    import typer

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.cli import archive
    from amqp_dissect.cli.common import Fail
    import glob
    import shutil

    failures = []
    runs = (("--packets 7", dict(packets=7)), ("--bytes 3000 --gzip", dict(size="3000", gzip_output=True)),
            ("--seconds 0.05", dict(seconds=0.05)))
    for name, opts in runs:
        what = f"split {name}"
        kw = dict(packets=None, size=None, seconds=None, gzip_output=False, name="part")
        kw.update(opts)
        shutil.rmtree(out_dir, ignore_errors=True)
        out, err = io.StringIO(), io.StringIO()
        from contextlib import redirect_stdout

        try:
            with redirect_stdout(out), redirect_stderr(err):
                archive.split(capture=path, out=Path(out_dir), **kw)
            rc = 0
        except typer.Exit as e:
            rc = e.exit_code
        except Fail as e:
            rc = e.code
            err.write(str(e))
        except Exception as e:
            failures.append(_traceback(what, e))
            continue
        text = err.getvalue().strip()
        if rc in (1, 130) or "internal error" in text or (rc and not text):
            failures.append(f"{what}: exit {rc}: {text or '(no message)'}")
            continue
        if rc not in (0, 5):
            continue  # not a capture split reads: one line, exit 3 or 4
        total = 0
        for part in sorted(glob.glob(os.path.join(out_dir, "part_*.pcap*"))):
            try:
                with open(part, "rb") as f:
                    reader = open_capture(f)
                    total += sum(1 for _ in reader)
                if reader.error is not None:
                    failures.append(f"{what}: part {os.path.basename(part)} does not read back: {reader.error}")
            except Exception as e:
                failures.append(_traceback(f"{what}: reading part {os.path.basename(part)}", e))
        said = out.getvalue().split(" records", 1)[0]
        if not said.isdigit() or int(said) != total:
            failures.append(f"{what}: printed {out.getvalue().strip()!r}, the parts hold {total} records")
    return failures


# --------------------------------------------------------------------------- issue 40: idle connections, damaged gzip, option values

IDLE_KIND = "idle-connections"
GZIP_KIND = "gzip-damage"
OPTION_KIND = "option-values"
_SYN, _ACK, _PSH, _FIN, _RST = 0x02, 0x10, 0x08, 0x01, 0x04
_HEADERS = (b"AMQP\x00\x01\x00\x00", b"AMQP\x03\x01\x00\x00", b"AMQP\x02\x01\x00\x00", b"AMQP\x00\x00\x09\x01")


def _idle_packets(r, client: bytes, server: bytes, sport: int, dport: int, shape: str) -> list:
    """The packets of one connection that carries no AMQP frame, in ``shape``."""
    seq, peer = r.int(0, 2**32 - 1), r.int(0, 2**32 - 1)
    pkts = [(client, server, sport, dport, seq, 0, _SYN, b"")]
    if shape == "syn":
        return pkts
    pkts += [(server, client, dport, sport, peer, seq + 1, _SYN | _ACK, b""),
             (client, server, sport, dport, seq + 1, peer + 1, _ACK, b"")]
    if shape in ("header", "headers"):
        head = r.choice(_HEADERS)
        pkts.append((client, server, sport, dport, seq + 1, peer + 1, _PSH | _ACK, head))
        if shape == "headers":
            pkts.append((server, client, dport, sport, peer + 1, seq + 9, _PSH | _ACK, head))
    if r.bool(0.2):
        pkts.append((client, server, sport, dport, seq + 9, peer + 1, r.choice((_FIN | _ACK, _RST)), b""))
    return pkts


def idle_connections(r) -> bytes:
    """Many connections that carry no AMQP frame (issue 40: the memory an open connection costs):
    each only a SYN, a handshake, the 8-byte protocol header from the client, or the header both
    ways; some closed, most left open; the shapes mixed or all one; client ports from a few
    addresses, sometimes reused; packets in order or interleaved.  Up to a few thousand connections."""
    n = r.int(1, 3000) if r.bool(0.3) else r.int(1, 200)
    shapes = ("syn", "handshake", "header", "headers")
    one = r.choice(shapes) if r.bool(0.5) else None
    port = r.choice((5672, 5671, r.int(1, 65535)))
    clients = [bytes([10, 0, r.int(0, 255), r.int(1, 254)]) for _ in range(r.int(1, 8))]
    server = bytes([10, 1, 0, 1])
    conns = []
    for i in range(n):
        sport = 1024 + (i % 64000) if r.bool(0.9) else r.int(1, 65535)
        conns.append(_idle_packets(r, r.choice(clients), server, sport, port, one or r.choice(shapes)))
    if r.bool(0.5):  # interleaved: every connection's first packet, then every second one ...
        order = [c[k] for k in range(max(len(c) for c in conns)) for c in conns if k < len(c)]
    else:
        order = [p for c in conns for p in c]
    t = 1_700_000_000.0 + r.int(0, 10**6)
    step = r.choice((0.0, 1e-6, 0.001, 1.0))
    return write_pcap([(t + i * step, 1, tcp_ipv4_ethernet(*p)) for i, p in enumerate(order)])


def gzip_damage(r) -> bytes:
    """A sample gzip-compressed (any level, sometimes two members), then damaged once: a byte of a
    deflate block flipped, the header's flags, method or magic changed, the trailer's CRC or size
    changed, cut at any byte, or garbage after the member."""
    import gzip

    plain = _sample(r.choice(samples()))
    if plain[:2] == b"\x1f\x8b":
        plain = gzip.decompress(plain)
    gz = gzip.compress(plain, compresslevel=r.int(1, 9), mtime=0)
    if r.bool(0.2):
        gz += gzip.compress(plain[: r.int(0, len(plain))], compresslevel=r.int(1, 9), mtime=0)
    damage = r.choice(("block", "header", "crc", "size", "cut", "garbage", "none"))
    b = bytearray(gz)
    if damage == "block":
        b[r.int(10, len(b) - 9)] ^= r.int(1, 255)
    elif damage == "header":
        b[r.int(0, 9)] ^= r.int(1, 255)
    elif damage in ("crc", "size"):
        b[len(b) - (8 if damage == "crc" else 4) + r.int(0, 3)] ^= r.int(1, 255)
    elif damage == "cut":
        b = b[: r.int(1, len(b) - 1)]
    elif damage == "garbage":
        b += r.bytes(1, 64)
    return bytes(b)


_DAMAGE_AT = None


def check_gzip_agreement(path: str, out_dir: str) -> list[str]:
    """The readers of a (damaged) gzip capture agree on where the damage is: the capture reader
    (report, frames, the tables, -j, the archive's file reader) and split's own pcap reader say the
    same decompressed byte and compressed bytes, or neither says any."""
    import re
    import shutil

    global _DAMAGE_AT
    if _DAMAGE_AT is None:
        _DAMAGE_AT = re.compile(r"gzip data \w+ at byte \d+ of the decompressed stream \(.*\)\)")
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.errors import CaptureError
    from amqp_dissect.pipelines.archive.split import split_capture

    said = []
    try:
        with open(path, "rb") as f:
            reader = open_capture(f)
            for _ in reader:
                pass
            said.append(str(reader.error or ""))
    except CaptureError as e:
        said.append(str(e))
    shutil.rmtree(out_dir, ignore_errors=True)
    try:
        res = split_capture(path, out_dir, packets=1000, name="part")
        said.append(str(res.error or ""))
    except CaptureError as e:
        said.append(str(e))
    places = [m.group(0) if m else None for m in map(_DAMAGE_AT.search, said)]
    if places[0] != places[1]:
        return [f"gzip damage: the capture reader says {said[0]!r}, split says {said[1]!r}"]
    return []


_NUMERIC_OPTIONS: list = []


def numeric_options() -> list:
    """(command, option) of every option of every command whose value is a number (from the click
    commands the typer app builds), and the sizes typed as text."""
    if not _NUMERIC_OPTIONS:
        import typer

        from amqp_dissect.cli.typer_app import app

        for name, command in sorted(typer.main.get_command(app).commands.items()):
            for p in command.params:
                kinds = {c.__name__ for c in type(p.type).__mro__}
                if getattr(p, "param_type_name", "") == "option" and kinds & {"IntParamType", "FloatParamType"}:
                    _NUMERIC_OPTIONS.append((name, max(p.opts, key=len)))
        _NUMERIC_OPTIONS.extend([("split", "--bytes"), ("archive", "--split-size")])
    return _NUMERIC_OPTIONS


def hostile_number(r) -> str:
    """A number as a user may type it: non-finite, huge, tiny, negative, zero, past 64 bits, with a
    size letter, in other notations, or not quite a number."""
    shape = r.choice(("special", "int", "float", "digits", "odd"))
    if shape == "special":
        text = r.choice(("inf", "-inf", "+inf", "nan", "-nan", "NaN", "Infinity", "0", "-0", "1", "-1"))
    elif shape == "int":
        text = str(r.choice((1, -1)) * r.int(0, 2 ** r.choice((8, 16, 31, 32, 63, 64, 65, 128, 1000))))
    elif shape == "float":
        text = f"{r.choice((1, -1)) * r.float()!r}" if r.bool(0.5) else f"{r.int(-9, 9)}e{r.int(-400, 400)}"
    elif shape == "digits":
        text = "9" * r.int(1, 5000)
    else:
        text = r.choice(("0x10", "1_000", " 5", "5 ", "1e", "--1", "", "0.0.1", "٣", "1" * 20 + ".5"))
    return text + (r.choice(("k", "m", "g", "t", "K", "b", "x")) if r.bool(0.15) else "")


def option_value_run(r, capture: str, out_dir: str):
    """(command, option, value, argv): one numeric option of one command with a hostile value."""
    command, option = r.choice(numeric_options())
    value = hostile_number(r)
    given = [f"{option}={value}"]
    if command == "split":
        rotate = [] if option in ("--packets", "--seconds", "--bytes") else ["--packets", "5"]
        argv = ["split", capture, "--out", out_dir, "--force", *rotate, *given]
    else:
        argv = [command, capture, *given]
    return command, option, value, argv


def option_capture() -> bytes:
    """The capture the option-values kind runs its commands on (small: the options are the input)."""
    return _sample(os.path.join(SAMPLES, "credit_one.pcap"))


def check_option_value(r, capture: str, out_dir: str) -> list[str]:
    """A command run in-process with a hostile value of one numeric option: exit 0 (used) or 2 with
    one line on stderr (refused), never exit 1, a traceback or an internal error.  ``archive`` and
    ``compare`` stop before Spark and tshark start (where the options have all been taken)."""
    import typer

    from amqp_dissect.cli import archive as archive_cli
    from amqp_dissect.cli import compare as compare_cli
    from amqp_dissect.cli.main import main

    command, option, value, argv = option_value_run(r, capture, out_dir)
    what = f"{command} {option}={value[:40]!r}"

    def stop(*_a, **_kw):
        raise typer.Exit(0)

    saved = archive_cli._Starting, compare_cli.need_extra
    archive_cli._Starting = compare_cli.need_extra = stop
    import multiprocessing

    # (fuzz_run -j: a worker is a daemon process, which may not start -j's processes as the CLI does)
    config = multiprocessing.current_process()._config
    daemon = config.pop("daemon", None)
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stdout

    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(argv)
    except BaseException as e:  # noqa: BLE001  (anything that escapes main is a failure)
        return [_traceback(what, e)]
    finally:
        archive_cli._Starting, compare_cli.need_extra = saved
        if daemon is not None:
            config["daemon"] = daemon
    text = err.getvalue()
    if rc not in (0, 2) or "internal error" in text or "Traceback" in text:
        return [f"{what}: exit {rc}: {text.strip()[:500]}"]
    if rc == 2 and text.count("\n") != 1:
        return [f"{what}: exit 2 with {text.count(chr(10))} lines on stderr: {text.strip()[:500]}"]
    return []


KINDS = KINDS + (IDLE_KIND, GZIP_KIND)  # (option-values and split: named with --kinds)

