"""AMQP 1.0 type-system decoder.

Dispatch is by the 256-entry constructor table generated from ``types.xml``
(:data:`amqp_dissect.amqp._spec.CONSTRUCTORS`): each entry's *category* and *width*
select how the body is read, its *type* selects the Python value made.

Values
------
=================  ==========================================
AMQP type          Python value
=================  ==========================================
null               ``None``
boolean            ``bool``
ubyte .. long      :class:`UByte` .. :class:`Long` (int subclasses)
float / double     :class:`Float` (float subclass) / ``float``
decimal32/64/128   :class:`Decimal32` / 64 / 128 (bytes subclasses, raw IEEE 754-2008 bits)
char               :class:`Char` (str subclass of length 1)
timestamp          :class:`Timestamp` (int subclass: ms since the epoch)
uuid               ``uuid.UUID``
binary             ``bytes``
string             ``str``
symbol             :class:`Symbol` (str subclass)
list               ``list``
map                :class:`Map` (a dict; unhashable keys are frozen, see :func:`freeze`)
array              :class:`Array` (list subclass with the element type)
described          :class:`Composite` for a composite the spec defines,
                   :class:`Described` otherwise (restricted spec types carry their name,
                   unknown descriptors keep descriptor and raw value)
=================  ==========================================

Every read is bounds-checked by :class:`Reader`; nesting depth and element
counts are capped, so hostile length fields cannot allocate large amounts of
memory.  Problems raise :class:`~amqp_dissect.errors.DecodeError`.
"""

from __future__ import annotations

import struct
import uuid as _uuid

from . import _spec
from ..errors import DecodeError, LimitExceeded
from .spec import BY_DESCRIPTOR, CompositeSpec, FieldSpec

# --------------------------------------------------------------------------- values


class UByte(int):
    __slots__ = ()
    amqp_type = "ubyte"


class UShort(int):
    __slots__ = ()
    amqp_type = "ushort"


class UInt(int):
    __slots__ = ()
    amqp_type = "uint"


class ULong(int):
    __slots__ = ()
    amqp_type = "ulong"


class Byte(int):
    __slots__ = ()
    amqp_type = "byte"


class Short(int):
    __slots__ = ()
    amqp_type = "short"


class Int(int):
    __slots__ = ()
    amqp_type = "int"


class Long(int):
    __slots__ = ()
    amqp_type = "long"


class Timestamp(int):
    """Milliseconds since the Unix epoch."""

    __slots__ = ()
    amqp_type = "timestamp"


class Float(float):
    """A 32-bit IEEE 754 float (value widened to a Python float)."""

    __slots__ = ()
    amqp_type = "float"


class Decimal32(bytes):
    amqp_type = "decimal32"


class Decimal64(bytes):
    amqp_type = "decimal64"


class Decimal128(bytes):
    amqp_type = "decimal128"


class Char(str):
    __slots__ = ()
    amqp_type = "char"


class Symbol(str):
    __slots__ = ()
    amqp_type = "symbol"


class Array(list):
    """An AMQP array: all elements share one constructor."""

    __slots__ = ("element_type", "descriptor")

    def __init__(self, items=(), element_type: str = "null", descriptor=None):
        super().__init__(items)
        self.element_type = element_type
        self.descriptor = descriptor

    def __reduce__(self):
        return (Array, (list(self), self.element_type, self.descriptor))

    def __repr__(self):
        return f"Array({self.element_type}, {list.__repr__(self)})"


class Map(dict):
    """An AMQP map.  A dict for lookups; ``items()`` yields the entries as on the wire.

    AMQP keys that Python considers equal (``UByte(1)`` and ``ULong(1)``, a string and a
    symbol with the same text, ...) are distinct on the wire: when they occur, every
    wire entry is kept in ``pairs`` and ``items()`` returns those.
    """

    __slots__ = ("pairs",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pairs = None

    def items(self):
        return self.pairs if self.pairs is not None else dict.items(self)

    def __reduce__(self):
        return (_rebuild_map, (list(self.items()),))


def _rebuild_map(pairs):
    m = Map()
    for k, v in pairs:
        try:
            m[k] = v
        except TypeError:
            m[freeze(k)] = v
    if len(m) != len(pairs):
        m.pairs = list(pairs)
    return m


class _Absent:
    """A field not present in the encoded list (distinct from an explicit null)."""

    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "ABSENT"

    def __bool__(self):
        return False

    def __reduce__(self):
        return (_Absent, ())


ABSENT = _Absent()


class Described:
    """A described value: a restricted spec type (``name`` set) or an unknown descriptor."""

    __slots__ = ("descriptor", "value", "name")

    def __init__(self, descriptor, value, name: str | None = None):
        self.descriptor = descriptor
        self.value = value
        self.name = name

    def __eq__(self, other):
        return (
            isinstance(other, Described)
            and type(other) is type(self)
            and self.descriptor == other.descriptor
            and self.value == other.value
        )

    def __hash__(self):
        return hash((freeze(self.descriptor), freeze(self.value)))

    def __repr__(self):
        label = self.name or f"descriptor={self.descriptor!r}"
        return f"Described({label}, {self.value!r})"

    def __reduce__(self):
        return (Described, (self.descriptor, self.value, self.name))


class Composite(Described):
    """A composite type of the spec (performative, section, delivery state ...).

    ``value`` is the list as encoded: fields beyond its length are *absent*
    (``field()`` returns :data:`ABSENT`), a ``None`` in it is an explicit null.
    Defaults are not filled in here; :meth:`effective` applies them.
    """

    __slots__ = ("spec",)

    def __init__(self, spec: CompositeSpec, value: list, descriptor=None):
        super().__init__(spec.descriptor_code if descriptor is None else descriptor, value, spec.name)
        self.spec = spec

    def field(self, name: str):
        i = self.spec.index[name]
        v = self.value
        return v[i] if i < len(v) else ABSENT

    def effective(self, name: str):
        """The field's value, or the spec default when it is absent or null."""
        i = self.spec.index[name]
        v = self.value
        if i < len(v) and v[i] is not None:
            return v[i]
        return self.spec.fields[i].default

    def is_default(self, name: str) -> bool:
        i = self.spec.index[name]
        v = self.value
        return self.spec.fields[i].has_default and (i >= len(v) or v[i] is None)

    def items(self):
        """(FieldSpec, value) for each field present in the encoding (nulls included)."""
        return zip(self.spec.fields, self.value)

    def extra(self) -> list:
        """Encoded elements beyond the fields the spec defines."""
        return self.value[len(self.spec.fields):]

    def __repr__(self):
        parts = ", ".join(f"{f.name}={v!r}" for f, v in self.items())
        return f"{self.spec.name}({parts})"

    def __reduce__(self):
        return (_rebuild_composite, (self.spec.name, self.value, self.descriptor))


def _rebuild_composite(name, value, descriptor):
    from .spec import COMPOSITES

    return Composite(COMPOSITES[name], value, descriptor)


def freeze(value):
    """A hashable stand-in for an unhashable map key (lists, maps)."""
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((freeze(k), freeze(v)) for k, v in value.items())
    return value


def amqp_type_of(value) -> str:
    """The AMQP type name of a decoded value."""
    t = getattr(value, "amqp_type", None)
    if t:
        return t
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, Composite):
        return value.spec.name
    if isinstance(value, Described):
        return value.name or "described"
    if isinstance(value, Array):
        return "array"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, _uuid.UUID):
        return "uuid"
    if isinstance(value, int):
        return "long"
    return type(value).__name__


# --------------------------------------------------------------------------- reader

DEFAULT_MAX_DEPTH = 48
DEFAULT_MAX_ELEMENTS = 1_000_000
# An array of zero-width elements (null, true, uint0, list0 ...) costs no bytes per
# element on the wire; cap it separately so a few bytes cannot cost a lot of memory.
MAX_ZERO_WIDTH_ELEMENTS = 65536

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


class Reader:
    """A bounded cursor over a bytes-like buffer; every read checks what remains."""

    __slots__ = ("buf", "pos", "end", "depth", "max_depth", "elements_left")

    def __init__(
        self,
        buf,
        pos: int = 0,
        end: int | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_elements: int = DEFAULT_MAX_ELEMENTS,
    ):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else min(end, len(buf))
        self.depth = 0
        self.max_depth = max_depth
        self.elements_left = max_elements

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int) -> int:
        """Reserve ``n`` bytes; return the start offset.  Raises DecodeError if short."""
        p = self.pos
        if n > self.end - p:
            raise DecodeError(f"need {n} bytes at offset {p}, only {self.end - p} remain")
        self.pos = p + n
        return p

    def take(self, n: int) -> bytes:
        p = self.need(n)
        return bytes(self.buf[p : p + n])

    def u8(self) -> int:
        p = self.pos
        if p >= self.end:
            raise DecodeError(f"need 1 byte at offset {p}, none remain")
        self.pos = p + 1
        return self.buf[p]

    def u32(self) -> int:
        return _U32.unpack_from(self.buf, self.need(4))[0]

    def _count(self, n: int) -> None:
        self.elements_left -= n
        if self.elements_left < 0:
            raise LimitExceeded("element count cap exceeded")

    # -- values ---------------------------------------------------------------

    def value(self):
        """Decode one value (constructor + body)."""
        p = self.pos
        if p >= self.end:
            raise DecodeError(f"need 1 byte at offset {p}, none remain")
        code = self.buf[p]
        self.pos = p + 1
        if code == 0:
            return self._described()
        f = _BODY[code]
        if f is None:
            raise DecodeError(f"invalid constructor 0x{code:02x} at offset {self.pos - 1}")
        return f(self)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"nesting deeper than {self.max_depth}")

    def _described(self):
        self.depth += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"nesting deeper than {self.max_depth}")
        try:
            p = self.pos
            if p + 1 < self.end and self.buf[p] == 0x53:
                # fast path for the common small-ulong descriptor (00 53 XX)
                code = self.buf[p + 1]
                self.pos = p + 2
                value = self.value()
                spec = _SMALL_SPECS[code]
                if spec is not None and type(value) is list and spec.__class__ is CompositeSpec:
                    return Composite(spec, value, _SMALL_ULONGS[code])
                return make_described(_SMALL_ULONGS[code], value)
            descriptor = self.value()
            value = self.value()
        finally:
            self.depth -= 1
        return make_described(descriptor, value)

    def element_constructor(self):
        """An array's element constructor: (body reader, type name, width, descriptor)."""
        code = self.u8()
        descriptor = None
        if code == 0:
            self._enter()
            try:
                descriptor = self.value()
            finally:
                self.depth -= 1
            code = self.u8()
            if code == 0:
                raise DecodeError("nested described array element constructor")
        f = _BODY[code]
        if f is None:
            raise DecodeError(f"invalid array element constructor 0x{code:02x}")
        tname, _, _, width = _spec.CONSTRUCTORS[code]
        return f, tname, width, descriptor


def make_described(descriptor, value):
    # only a ulong or a symbol descriptor names a spec type
    spec = BY_DESCRIPTOR.get(descriptor) if type(descriptor) in (ULong, Symbol) else None
    if spec is not None:
        if isinstance(spec, CompositeSpec) and type(value) is list:
            return Composite(spec, value, descriptor)
        return Described(descriptor, value, spec.name)
    return Described(descriptor, value, None)


# --------------------------------------------------------------------------- bodies


def _fixed(width: int, make):
    def body(r: Reader):
        p = r.pos
        if width > r.end - p:
            raise DecodeError(f"need {width} bytes at offset {p}, only {r.end - p} remain")
        r.pos = p + width
        return make(r.buf, p)

    return body


def _const(v):
    def body(r: Reader):
        return v

    return body


def _variable(width: int, make):
    unpack = {1: None, 4: _U32.unpack_from}[width]

    def body(r: Reader):
        if unpack is None:
            n = r.u8()
        else:
            n = unpack(r.buf, r.need(4))[0]
        p = r.pos
        if n > r.end - p:
            raise DecodeError(f"need {n} bytes at offset {p}, only {r.end - p} remain")
        r.pos = p + n
        return make(r.buf[p : p + n])

    return body


def _utf8(b) -> str:
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"invalid UTF-8 in string: {e}") from None


def _symbol(b) -> Symbol:
    try:
        return Symbol(bytes(b).decode("ascii"))
    except UnicodeDecodeError:
        raise DecodeError("symbol is not ASCII") from None


def _compound_header(r: Reader, width: int) -> tuple[int, int]:
    """Read size and count of a compound/array; returns (count, end offset)."""
    if width == 1:
        size = r.u8()
        if size < 1:
            raise DecodeError("compound size smaller than its count field")
        end = r.pos + size
        if end > r.end:
            raise DecodeError(f"compound size {size} exceeds the {r.end - r.pos} bytes remaining")
        count = r.u8()
    else:
        size = r.u32()
        if size < 4:
            raise DecodeError("compound size smaller than its count field")
        end = r.pos + size
        if end > r.end:
            raise DecodeError(f"compound size {size} exceeds the {r.end - r.pos} bytes remaining")
        count = r.u32()
    return count, end


def _list(width: int):
    def body(r: Reader):
        count, end = _compound_header(r, width)
        if count > end - r.pos:  # every element takes at least one byte
            raise DecodeError(f"list count {count} larger than its {end - r.pos} bytes")
        r._count(count)
        r._enter()
        saved_end = r.end
        r.end = end
        try:
            items = [r.value() for _ in range(count)]
        finally:
            r.end = saved_end
            r.depth -= 1
        if r.pos != end:
            raise DecodeError(f"list of {count} elements left {end - r.pos} bytes unused")
        return items

    return body


def _map(width: int):
    def body(r: Reader):
        count, end = _compound_header(r, width)
        if count % 2:
            raise DecodeError(f"map with an odd number of elements ({count})")
        if count > end - r.pos:
            raise DecodeError(f"map count {count} larger than its {end - r.pos} bytes")
        r._count(count)
        r._enter()
        saved_end = r.end
        r.end = end
        out = Map()
        pairs = []
        try:
            for _ in range(count // 2):
                k = r.value()
                v = r.value()
                pairs.append((k, v))
                try:
                    out[k] = v
                except TypeError:
                    out[freeze(k)] = v
        finally:
            r.end = saved_end
            r.depth -= 1
        if r.pos != end:
            raise DecodeError(f"map of {count} elements left {end - r.pos} bytes unused")
        if len(out) != len(pairs):  # keys equal in Python, distinct in AMQP
            out.pairs = pairs
        return out

    return body


def _array(width: int):
    def body(r: Reader):
        count, end = _compound_header(r, width)
        r._count(count)
        r._enter()
        saved_end = r.end
        r.end = end
        try:
            f, etype, ewidth, descriptor = r.element_constructor()
            if ewidth == 0:
                if count > MAX_ZERO_WIDTH_ELEMENTS:
                    raise LimitExceeded(f"array of {count} zero-width elements (cap {MAX_ZERO_WIDTH_ELEMENTS})")
            elif count > end - r.pos:
                raise DecodeError(f"array count {count} larger than its {end - r.pos} bytes")
            items = [f(r) for _ in range(count)]
        finally:
            r.end = saved_end
            r.depth -= 1
        if r.pos != end:
            raise DecodeError(f"array of {count} elements left {end - r.pos} bytes unused")
        if descriptor is not None:
            items = [make_described(descriptor, v) for v in items]
            return Array(items, etype, descriptor)
        return Array(items, etype)

    return body


def _u(cls, st):
    return lambda b, p: cls(st.unpack_from(b, p)[0])


# How each primitive type's fixed-width body becomes a value, per width.
_FIXED_MAKERS = {
    ("boolean", 1): lambda b, p: _bool_byte(b[p]),
    ("ubyte", 1): lambda b, p: UByte(b[p]),
    ("byte", 1): lambda b, p: Byte(b[p] - 256 if b[p] > 127 else b[p]),
    ("ushort", 2): _u(UShort, _U16),
    ("short", 2): _u(Short, _I16),
    ("uint", 1): lambda b, p: UInt(b[p]),
    ("uint", 4): _u(UInt, _U32),
    ("ulong", 1): lambda b, p: ULong(b[p]),
    ("ulong", 8): _u(ULong, _U64),
    ("int", 1): lambda b, p: Int(b[p] - 256 if b[p] > 127 else b[p]),
    ("int", 4): _u(Int, _I32),
    ("long", 1): lambda b, p: Long(b[p] - 256 if b[p] > 127 else b[p]),
    ("long", 8): _u(Long, _I64),
    ("float", 4): _u(Float, _F32),
    ("double", 8): lambda b, p: _F64.unpack_from(b, p)[0],
    ("decimal32", 4): lambda b, p: Decimal32(b[p : p + 4]),
    ("decimal64", 8): lambda b, p: Decimal64(b[p : p + 8]),
    ("decimal128", 16): lambda b, p: Decimal128(b[p : p + 16]),
    ("char", 4): lambda b, p: _char(_U32.unpack_from(b, p)[0]),
    ("timestamp", 8): _u(Timestamp, _I64),
    ("uuid", 16): lambda b, p: _uuid.UUID(bytes=bytes(b[p : p + 16])),
}

# Zero-width encodings: the value is implied by the constructor's encoding name.
_ZERO_VALUES = {
    "null": None,
    "true": True,
    "false": False,
    "uint0": UInt(0),
    "ulong0": ULong(0),
    "list0": [],
}

_VARIABLE_MAKERS = {
    "binary": bytes,
    "string": _utf8,
    "symbol": _symbol,
}


def _bool_byte(v: int) -> bool:
    if v > 1:
        raise DecodeError(f"boolean byte 0x{v:02x} is neither 0x00 nor 0x01")
    return v == 1


def _char(cp: int) -> Char:
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise DecodeError(f"char U+{cp:X} is not a Unicode scalar value")
    return Char(chr(cp))


def _list0_body(r: Reader):
    return []


def _build_body_table():
    table = [None] * 256
    for code, entry in enumerate(_spec.CONSTRUCTORS):
        if entry is None:
            continue
        tname, ename, category, width = entry
        if category == "fixed" and width == 0:
            if ename == "list0":
                table[code] = _list0_body  # a fresh list each time
            else:
                table[code] = _const(_ZERO_VALUES[ename])
        elif category == "fixed":
            table[code] = _fixed(width, _FIXED_MAKERS[(tname, width)])
        elif category == "variable":
            table[code] = _variable(width, _VARIABLE_MAKERS[tname])
        elif category == "compound":
            table[code] = _list(width) if tname == "list" else _map(width)
        elif category == "array":
            table[code] = _array(width)
        else:  # pragma: no cover - the XML defines only these categories
            raise RuntimeError(f"unknown encoding category {category!r}")
    return tuple(table)


_BODY = _build_body_table()

# small-ulong descriptors (00 53 XX): cached descriptor values and the spec types they name
_SMALL_ULONGS = tuple(ULong(i) for i in range(256))
_SMALL_SPECS = tuple(BY_DESCRIPTOR.get(i) for i in range(256))


# --------------------------------------------------------------------------- API


def decode(data, max_depth: int = DEFAULT_MAX_DEPTH, max_elements: int = DEFAULT_MAX_ELEMENTS):
    """Decode exactly one value occupying all of ``data``."""
    r = Reader(data, max_depth=max_depth, max_elements=max_elements)
    v = r.value()
    if r.pos != r.end:
        raise DecodeError(f"{r.end - r.pos} bytes left after the value")
    return v


def decode_all(data, max_depth: int = DEFAULT_MAX_DEPTH, max_elements: int = DEFAULT_MAX_ELEMENTS) -> list:
    """Decode a sequence of values filling ``data`` (e.g. message sections)."""
    r = Reader(data, max_depth=max_depth, max_elements=max_elements)
    out = []
    while r.pos < r.end:
        out.append(r.value())
    return out


def decode_one(data, pos: int = 0):
    """Decode one value at ``pos``; returns (value, next position)."""
    r = Reader(data, pos)
    v = r.value()
    return v, r.pos


__all__ = [
    "ABSENT",
    "Array",
    "Byte",
    "Char",
    "Composite",
    "Decimal128",
    "Decimal32",
    "Decimal64",
    "Described",
    "FieldSpec",
    "Float",
    "Int",
    "Long",
    "Map",
    "Reader",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "amqp_type_of",
    "decode",
    "decode_all",
    "decode_one",
    "freeze",
]
