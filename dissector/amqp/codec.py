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
# Decoded elements are budgeted per connection too (issue 8): a connection may decode
# ELEMENT_BUDGET_BASE elements plus ELEMENTS_PER_BYTE for each byte of its frames, over its whole
# life (the framing layer keeps the account, amqp_dissect.amqp.framing).  Every element of a real
# encoding but a zero-width one takes at least one byte, so only zero-width arrays (a few bytes
# standing for up to MAX_ZERO_WIDTH_ELEMENTS values each) can spend it: what a connection costs
# to decode stays in proportion to its bytes, whatever they hold.
ELEMENT_BUDGET_BASE = 4096
ELEMENTS_PER_BYTE = 16

_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

# How a constructor's body is read: one small number ("kind") per constructor code, derived
# from the constructor table generated from types.xml (see _build_tables); Reader._body
# branches on it.  Integer values are read big-endian over the constructor's width.
_K_INVALID = 0
_K_CONST = 1  # zero-width encodings (null, true, false, uint0, ulong0): the value is _CONST[code]
_K_LIST0 = 2  # zero-width empty list: a fresh list each time
_K_BOOL = 3
_K_UNSIGNED = 4  # ubyte, ushort, uint, ulong (1 to 8 bytes): _CLASS[code](value)
_K_SIGNED = 5  # byte, short, int, long, timestamp: _CLASS[code](two's complement value)
_K_FLOAT = 6
_K_DOUBLE = 7
_K_RAW = 8  # decimal32/64/128: _CLASS[code](raw bytes)
_K_CHAR = 9
_K_UUID = 10
_K_BINARY = 11
_K_STRING = 12
_K_SYMBOL = 13
_K_LIST = 14
_K_MAP = 15
_K_ARRAY = 16

# Zero-width encodings: the value is implied by the constructor's encoding name.
_ZERO_VALUES = {
    "null": None,
    "true": True,
    "false": False,
    "uint0": UInt(0),
    "ulong0": ULong(0),
}

# primitive type -> (kind, value class, the width the type must have or None for any)
_FIXED_TYPES = {
    "boolean": (_K_BOOL, None, 1),
    "ubyte": (_K_UNSIGNED, UByte, None),
    "ushort": (_K_UNSIGNED, UShort, None),
    "uint": (_K_UNSIGNED, UInt, None),
    "ulong": (_K_UNSIGNED, ULong, None),
    "byte": (_K_SIGNED, Byte, None),
    "short": (_K_SIGNED, Short, None),
    "int": (_K_SIGNED, Int, None),
    "long": (_K_SIGNED, Long, None),
    "timestamp": (_K_SIGNED, Timestamp, None),
    "float": (_K_FLOAT, Float, 4),
    "double": (_K_DOUBLE, None, 8),
    "decimal32": (_K_RAW, Decimal32, None),
    "decimal64": (_K_RAW, Decimal64, None),
    "decimal128": (_K_RAW, Decimal128, None),
    "char": (_K_CHAR, None, 4),
    "uuid": (_K_UUID, None, 16),
}
_VARIABLE_TYPES = {"binary": _K_BINARY, "string": _K_STRING, "symbol": _K_SYMBOL}


def _build_tables():
    """(kind per code, width per code, value class or constant per code, type name per code)."""
    kinds = bytearray(256)
    widths = bytearray(256)
    extra = [None] * 256
    names = [None] * 256
    for code, entry in enumerate(_spec.CONSTRUCTORS):
        if entry is None:
            continue
        tname, ename, category, width = entry
        names[code] = tname
        widths[code] = width
        if category == "fixed" and width == 0:
            if ename == "list0":
                kinds[code] = _K_LIST0
            else:
                kinds[code] = _K_CONST
                extra[code] = _ZERO_VALUES[ename]
        elif category == "fixed":
            kind, cls, need_width = _FIXED_TYPES[tname]
            if need_width is not None and width != need_width or width > 16:  # pragma: no cover
                raise RuntimeError(f"unexpected width {width} for {tname}")
            kinds[code] = kind
            extra[code] = cls
        elif category == "variable":
            kinds[code] = _VARIABLE_TYPES[tname]
        elif category == "compound":
            kinds[code] = _K_LIST if tname == "list" else _K_MAP
        elif category == "array":
            kinds[code] = _K_ARRAY
        else:  # pragma: no cover - the XML defines only these categories
            raise RuntimeError(f"unknown encoding category {category!r}")
        if category != "fixed" and width not in (1, 4):  # pragma: no cover
            raise RuntimeError(f"unexpected size width {width} for {ename}")
    return bytes(kinds), bytes(widths), tuple(extra), tuple(names)


_KIND, _WIDTH, _CLASS, _TYPE_NAME = _build_tables()

# small-ulong descriptors (00 53 XX): cached descriptor values and the spec types they name
_SMALL_ULONGS = tuple(ULong(i) for i in range(256))
_SMALL_SPECS = tuple(BY_DESCRIPTOR.get(i) for i in range(256))
_SMALL_COMPOSITES = tuple(s if s.__class__ is CompositeSpec else None for s in _SMALL_SPECS)


class Reader:
    """A bounded cursor over a bytes-like buffer; every read checks what remains.

    ``pos`` and ``end`` are offsets in ``buf``.  A ``bytes`` buffer is read in place; any
    other buffer (a bytearray that the framing layer trims later, a memoryview) is read
    from a copy of ``buf[pos:end]``.
    """

    __slots__ = ("buf", "data", "base", "p", "lim", "depth", "max_depth", "elements_left")

    def __init__(
        self,
        buf,
        pos: int = 0,
        end: int | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_elements: int = DEFAULT_MAX_ELEMENTS,
    ):
        n = len(buf)
        if end is None or end > n:
            end = n
        self.buf = buf
        if type(buf) is bytes:
            self.data = buf
            self.base = 0
            self.p = pos
            self.lim = end
        else:
            self.data = bytes(buf[pos:end])
            self.base = pos
            self.p = 0
            self.lim = end - pos
        self.depth = 0
        self.max_depth = max_depth
        self.elements_left = max_elements

    @property
    def pos(self) -> int:
        return self.base + self.p

    @pos.setter
    def pos(self, value: int) -> None:
        self.p = value - self.base

    @property
    def end(self) -> int:
        return self.base + self.lim

    @end.setter
    def end(self, value: int) -> None:
        self.lim = value - self.base

    @property
    def remaining(self) -> int:
        return self.lim - self.p

    def _need(self, n):
        """Reserve ``n`` bytes; return their start in ``data``.  Raises DecodeError if short."""
        p = self.p
        if n > self.lim - p:
            raise DecodeError(f"need {n} bytes at offset {self.base + p}, only {self.lim - p} remain")
        self.p = p + n
        return p

    def need(self, n: int) -> int:
        """Reserve ``n`` bytes; return the start offset in ``buf``.  Raises DecodeError if short."""
        return self.base + self._need(n)

    def take(self, n: int) -> bytes:
        p = self._need(n)
        return self.data[p : p + n]

    def _u8(self):
        p = self.p
        if p >= self.lim:
            raise DecodeError(f"need 1 byte at offset {self.base + p}, none remain")
        self.p = p + 1
        return self.data[p]

    def u8(self) -> int:
        return self._u8()

    def _u32(self):
        p = self._need(4)
        return uint_at(self.data, p, 4)

    def u32(self) -> int:
        return self._u32()

    def _count(self, n) -> None:
        self.elements_left -= n
        if self.elements_left < 0:
            raise LimitExceeded("element count cap exceeded")

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"nesting deeper than {self.max_depth}")

    # -- values ---------------------------------------------------------------

    def value(self):
        """Decode one value (constructor + body)."""
        p = self.p
        if p >= self.lim:
            raise DecodeError(f"need 1 byte at offset {self.base + p}, none remain")
        code = self.data[p]
        self.p = p + 1
        if code == 0:
            return self._described()
        return self._body(code)

    def _described(self):
        self.depth += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"nesting deeper than {self.max_depth}")
        try:
            p = self.p
            if p + 1 < self.lim and self.data[p] == 0x53:
                # fast path for the common small-ulong descriptor (00 53 XX)
                code = self.data[p + 1]
                self.p = p + 2
                value = self.value()
                spec = _SMALL_COMPOSITES[code]
                if spec is not None and type(value) is list:
                    return _composite(spec, value, _SMALL_ULONGS[code])
                return make_described(_SMALL_ULONGS[code], value)
            descriptor = self.value()
            value = self.value()
        finally:
            self.depth -= 1
        return make_described(descriptor, value)

    def _body(self, code):
        """The value of constructor ``code`` whose body starts at the cursor."""
        kind = _KIND[code]
        if kind == _K_UNSIGNED:
            width = _WIDTH[code]
            p = self.p
            if width > self.lim - p:
                raise DecodeError(f"need {width} bytes at offset {self.base + p}, only {self.lim - p} remain")
            self.p = p + width
            return _CLASS[code](uint_at(self.data, p, width))
        if kind == _K_STRING or kind == _K_SYMBOL or kind == _K_BINARY:
            return self._variable(code, kind)
        if kind == _K_CONST:
            return _CLASS[code]
        if kind == _K_LIST:
            return self._list(_WIDTH[code])
        if kind == _K_LIST0:
            return []
        if kind == _K_MAP:
            return self._map(_WIDTH[code])
        if kind == _K_INVALID:
            raise DecodeError(f"invalid constructor 0x{code:02x} at offset {self.base + self.p - 1}")
        if kind == _K_ARRAY:
            return self._array(_WIDTH[code])
        return self._fixed(code, kind)

    def _variable(self, code, kind):
        """The binary, string or symbol of constructor ``code`` (reader kind ``kind``) whose
        length starts at the cursor."""
        if _WIDTH[code] == 1:
            n = self._u8()
        else:
            n = self._u32()
        p = self.p
        if n > self.lim - p:
            raise DecodeError(f"need {n} bytes at offset {self.base + p}, only {self.lim - p} remain")
        self.p = p + n
        if kind == _K_BINARY:
            return self.data[p : p + n]
        if kind == _K_STRING:
            try:
                return self.data[p : p + n].decode("utf-8")
            except UnicodeDecodeError as e:
                raise DecodeError(f"invalid UTF-8 in string: {e}") from None
        try:
            return Symbol(self.data[p : p + n].decode("ascii"))
        except UnicodeDecodeError:
            raise DecodeError("symbol is not ASCII") from None

    def _fixed(self, code, kind):
        """The fixed-width value (not an unsigned integer: a boolean, signed integer, float,
        decimal, char, timestamp or uuid) of constructor ``code`` (reader kind ``kind``) whose
        body starts at the cursor."""
        width = _WIDTH[code]
        p = self.p
        if width > self.lim - p:
            raise DecodeError(f"need {width} bytes at offset {self.base + p}, only {self.lim - p} remain")
        self.p = p + width
        data = self.data
        if kind == _K_BOOL:
            b = data[p]
            if b > 1:
                raise DecodeError(f"boolean byte 0x{b:02x} is neither 0x00 nor 0x01")
            return b == 1
        if kind == _K_SIGNED:
            return _CLASS[code](int_at(data, p, width))
        if kind == _K_DOUBLE:
            return _F64.unpack_from(data, p)[0]
        if kind == _K_FLOAT:
            return Float(_F32.unpack_from(data, p)[0])
        if kind == _K_RAW:
            return _CLASS[code](data[p : p + width])
        if kind == _K_CHAR:
            cp = uint_at(data, p, 4)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise DecodeError(f"char U+{cp:X} is not a Unicode scalar value")
            return Char(chr(cp))
        # _K_UUID
        return _uuid.UUID(bytes=data[p : p + 16])

    def _compound_header(self, width):
        """Read size and count of a compound/array; returns (count, end in ``data``)."""
        if width == 1:
            size = self._u8()
            if size < 1:
                raise DecodeError("compound size smaller than its count field")
            end = self.p + size
            if end > self.lim:
                raise DecodeError(f"compound size {size} exceeds the {self.lim - self.p} bytes remaining")
            count = self._u8()
        else:
            size = self._u32()
            if size < 4:
                raise DecodeError("compound size smaller than its count field")
            end = self.p + size
            if end > self.lim:
                raise DecodeError(f"compound size {size} exceeds the {self.lim - self.p} bytes remaining")
            count = self._u32()
        return count, end

    def _list(self, width):
        count, end = self._compound_header(width)
        if count > end - self.p:  # every element takes at least one byte
            raise DecodeError(f"list count {count} larger than its {end - self.p} bytes")
        self._count(count)
        self._enter()
        saved_lim = self.lim
        self.lim = end
        items = []
        try:
            for i in range(count):
                items.append(self.value())
        finally:
            self.lim = saved_lim
            self.depth -= 1
        if self.p != end:
            raise DecodeError(f"list of {count} elements left {end - self.p} bytes unused")
        return items

    def _map(self, width):
        count, end = self._compound_header(width)
        if count % 2:
            raise DecodeError(f"map with an odd number of elements ({count})")
        if count > end - self.p:
            raise DecodeError(f"map count {count} larger than its {end - self.p} bytes")
        self._count(count)
        self._enter()
        saved_lim = self.lim
        self.lim = end
        out = Map.__new__(Map)  # (no __init__ call: an empty dict)
        out.pairs = None
        pairs = []
        try:
            for i in range(count // 2):
                k = self.value()
                v = self.value()
                pairs.append((k, v))
                try:
                    out[k] = v
                except TypeError:
                    out[freeze(k)] = v
        finally:
            self.lim = saved_lim
            self.depth -= 1
        if self.p != end:
            raise DecodeError(f"map of {count} elements left {end - self.p} bytes unused")
        if len(out) != len(pairs):  # keys equal in Python, distinct in AMQP
            out.pairs = pairs
        return out

    def _array(self, width):
        count, end = self._compound_header(width)
        self._count(count)
        self._enter()
        saved_lim = self.lim
        self.lim = end
        descriptor = None
        items = []
        try:
            code = self._u8()
            if code == 0:
                self._enter()
                try:
                    descriptor = self.value()
                finally:
                    self.depth -= 1
                code = self._u8()
                if code == 0:
                    raise DecodeError("nested described array element constructor")
            kind = _KIND[code]
            if kind == _K_INVALID:
                raise DecodeError(f"invalid array element constructor 0x{code:02x}")
            if _WIDTH[code] == 0:
                if count > MAX_ZERO_WIDTH_ELEMENTS:
                    raise LimitExceeded(f"array of {count} zero-width elements (cap {MAX_ZERO_WIDTH_ELEMENTS})")
            elif count > end - self.p:
                raise DecodeError(f"array count {count} larger than its {end - self.p} bytes")
            for i in range(count):
                items.append(self._body(code))
        finally:
            self.lim = saved_lim
            self.depth -= 1
        if self.p != end:
            raise DecodeError(f"array of {count} elements left {end - self.p} bytes unused")
        if descriptor is not None:
            return Array([make_described(descriptor, v) for v in items], _TYPE_NAME[code], descriptor)
        return Array(items, _TYPE_NAME[code])


def uint_at(data, p, width):
    """The unsigned big-endian integer of ``width`` bytes at ``data[p]``."""
    v = 0
    for i in range(width):
        v = (v << 8) | data[p + i]
    return v


def int_at(data, p, width):
    """The two's complement big-endian integer of ``width`` bytes at ``data[p]``."""
    v = data[p]
    if v > 127:
        v -= 256
    for i in range(1, width):
        v = v * 256 + data[p + i]
    return v


def _composite(spec, value, descriptor):
    c = Composite.__new__(Composite)
    c.descriptor = descriptor
    c.value = value
    c.name = spec.name
    c.spec = spec
    return c


def _described(descriptor, value, name):
    d = Described.__new__(Described)
    d.descriptor = descriptor
    d.value = value
    d.name = name
    return d


def make_described(descriptor, value):
    # only a ulong or a symbol descriptor names a spec type
    spec = BY_DESCRIPTOR.get(descriptor) if type(descriptor) is ULong or type(descriptor) is Symbol else None
    if spec is not None:
        if spec.__class__ is CompositeSpec and type(value) is list:
            return _composite(spec, value, descriptor)
        return _described(descriptor, value, spec.name)
    return _described(descriptor, value, None)


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
    while r.p < r.lim:
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
    "ELEMENTS_PER_BYTE",
    "ELEMENT_BUDGET_BASE",
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
