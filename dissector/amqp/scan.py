"""Fast scanners for the hot performatives: transfer, flow and disposition.

:func:`scan_performative` reads a frame body holding one of the performatives
listed in :data:`amqp_dissect.amqp._spec.SCAN_LAYOUTS` into a flat tuple of plain Python
values, without building :class:`~amqp_dissect.amqp.codec.Composite` objects.  Anything
it does not recognise, or anything unusual, makes it return ``None``: the caller
then decodes the body with the generic decoder (``codec.Reader(...).value()``),
which produces the expert notes.

    res = scan_performative(buf, body, end)
    if res is None:
        ...  # generic path
    else:
        code, values, perf_end = res

``code``
    the performative's numeric descriptor code (also when the descriptor was
    written as a symbol).
``values``
    a tuple with one entry per field of the spec, in spec order
    (``SCAN_LAYOUTS[name][3]`` names them):

    * ``ABSENT`` (:data:`amqp_dissect.amqp.codec.ABSENT`) -- beyond the encoded list's count;
    * ``None`` -- an explicit null;
    * ``int`` for the integer types (uint, ulong, ubyte, handle, sequence-no, ...,
      and timestamp, in ms), ``bool`` for booleans, ``bytes`` for binary (delivery-tag), ``str`` for
      string and symbol.  Restricted types with choices (role, settle modes) are
      their wire values;
    * a delivery ``state`` (a ``*`` field requiring ``delivery-state``): the
      composite's name (``"accepted"``, ``"released"`` ...) when it is a described
      empty list of a delivery-state composite that has no mandatory field;
      otherwise (fields present, or an empty ``received``/``declared``/...) a
      :class:`Span`;
    * any other field that is not a plain value (a ``*`` field, a map such as the
      properties of flow, an array for a multiple field, float, uuid ...): a
      :class:`Span`.

``perf_end``
    the offset right after the performative: a transfer's payload starts there.
    For the other performatives bytes between ``perf_end`` and ``end`` are left
    for the caller to report.

``None`` is returned when the body is not one of these performatives, when it
is truncated or malformed in any way the generic decoder would reject, when a
field holds a value of another type than the spec's, when the list has more
elements than the spec has fields, when a ``state`` is not a described list of
a delivery-state composite, and when a mandatory field is absent or null.  A
result that is not ``None`` therefore means the generic decoder reads the same
values from these bytes and ``_check_mandatory`` has nothing to say.

Span
    ``Span(start, stop)``: the byte range of one encoded value in ``buf``.
    Its content has been validated as the generic decoder would (bounds, sizes,
    counts, UTF-8, depth and element caps), so ``span.decode(buf)`` --
    ``codec.Reader(buf, start, stop).value()`` -- returns the value the generic
    decoder gives the field and does not raise.  The offsets refer to the
    buffer passed in: decode (or copy ``buf[start:stop]``) before that buffer
    changes.

Implementation
    Each field of a layout has a 256-entry *action* table indexed by the
    constructor byte: the reader kind of a constructor of the field's primitive
    (``R_*``), ``R_NULL`` for null, ``A_SLOW`` for a described state or a value
    read as a Span, and ``A_DECLINE`` for anything else.  All tables are built at
    import from the generated ones (:data:`_spec.CONSTRUCTORS`,
    :data:`_spec.PRIMITIVE_CODES`, :data:`_spec.PROVIDERS`,
    :data:`_spec.COMPOSITES`, :data:`_spec.SCAN_LAYOUTS`); no encoding is typed
    here.  Spans and non-empty states are validated by ``_skip``, which follows
    the generic decoder's rules and caps (``codec.DEFAULT_MAX_DEPTH``,
    ``DEFAULT_MAX_ELEMENTS``, ``MAX_ZERO_WIDTH_ELEMENTS``) without building values.

    The module is written so that Cython can compile it unchanged: plain
    module-level functions, local variables, no closures, ``bytes``/``bytearray``
    indexing and ``struct.unpack_from``.  ``scan.pxd`` (augmenting declarations,
    ignored by Python) types the hot loop's locals when it is compiled.  Accepts
    ``bytes``, ``bytearray`` and ``memoryview`` buffers.
"""

from __future__ import annotations

import struct

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from . import _spec
from .codec import ABSENT, DEFAULT_MAX_DEPTH, DEFAULT_MAX_ELEMENTS, MAX_ZERO_WIDTH_ELEMENTS, Reader
from .spec import COMPOSITES

__all__ = ["ABSENT", "SCAN_LAYOUTS", "ScanResult", "Span", "field_names", "scan_into", "scan_performative"]

SCAN_LAYOUTS = _spec.SCAN_LAYOUTS

_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_U32X2 = struct.Struct(">II")


class Span:
    """The byte range ``[start, stop)`` of one encoded value, decoded lazily."""

    __slots__ = ("start", "stop")

    def __init__(self, start: int, stop: int):
        self.start = start
        self.stop = stop

    def decode(self, buf):
        """The value, as the generic decoder reads it."""
        return Reader(buf, self.start, self.stop).value()

    def __eq__(self, other):
        return type(other) is Span and self.start == other.start and self.stop == other.stop

    def __hash__(self):
        return hash((Span, self.start, self.stop))

    def __repr__(self):
        return f"Span({self.start}, {self.stop})"

    def __reduce__(self):
        return (Span, (self.start, self.stop))


# --------------------------------------------------------------------------- tables (from _spec)

# How a constructor's body becomes a plain value ("reader kinds").
R_INVALID = 0
R_NULL = 1
R_TRUE = 2
R_FALSE = 3
R_ZERO = 4
R_U8 = 5
R_S8 = 6
R_BOOL8 = 7
R_U16 = 8
R_S16 = 9
R_U32 = 10
R_S32 = 11
R_U64 = 12
R_S64 = 13
R_BIN = 14
R_STR = 15
R_SYM = 16
R_OTHER = 17  # no plain value: read as a Span

# How the skipper validates a constructor's body ("body kinds").
B_INVALID = 0
B_FIXED = 1
B_BOOL8 = 2
B_CHAR = 3
B_BIN = 4
B_STR = 5
B_SYM = 6
B_LIST = 7
B_MAP = 8
B_ARRAY = 9

# Field actions beyond the reader kinds (see _actions).
A_DECLINE = 0  # not the field's type: scan_performative returns None
A_SLOW = 20  # a delivery state or a Span

# Field kinds.
F_PLAIN = 0  # a primitive with a plain Python value
F_STATE = 1  # "*" requiring delivery-state
F_ANY = 2  # any other "*": a Span
F_SPAN = 3  # a primitive without a plain value (map, list, float ...): a Span

_PLAIN_FIXED = {
    ("boolean", 1): R_BOOL8,
    ("ubyte", 1): R_U8,
    ("uint", 1): R_U8,
    ("ulong", 1): R_U8,
    ("byte", 1): R_S8,
    ("int", 1): R_S8,
    ("long", 1): R_S8,
    ("ushort", 2): R_U16,
    ("short", 2): R_S16,
    ("uint", 4): R_U32,
    ("int", 4): R_S32,
    ("ulong", 8): R_U64,
    ("long", 8): R_S64,
    ("timestamp", 8): R_S64,
}
_ZERO_WIDTH = {"null": R_NULL, "true": R_TRUE, "false": R_FALSE, "uint0": R_ZERO, "ulong0": R_ZERO}
_VARIABLE = {"binary": (R_BIN, B_BIN), "string": (R_STR, B_STR), "symbol": (R_SYM, B_SYM)}


def _build_code_tables():
    types = {}  # primitive name -> small int id
    for name in _spec.PRIMITIVE_CODES:
        types[name] = len(types) + 1
    rkind = [R_INVALID] * 256
    bkind = [B_INVALID] * 256
    width = [0] * 256
    ctype = [0] * 256
    for code in range(256):
        entry = _spec.CONSTRUCTORS[code]
        if entry is None:
            continue
        tname, ename, category, w = entry
        ctype[code] = types[tname]
        width[code] = w
        if category == "fixed":
            if w == 0:
                rkind[code] = _ZERO_WIDTH.get(ename, R_OTHER)
                bkind[code] = B_FIXED
            else:
                rkind[code] = _PLAIN_FIXED.get((tname, w), R_OTHER)
                bkind[code] = B_BOOL8 if tname == "boolean" else B_CHAR if tname == "char" else B_FIXED
        elif category == "variable":
            rkind[code], bkind[code] = _VARIABLE[tname]
        elif category == "compound":
            rkind[code] = R_OTHER
            bkind[code] = B_LIST if tname == "list" else B_MAP
        elif category == "array":
            rkind[code] = R_OTHER
            bkind[code] = B_ARRAY
        else:  # pragma: no cover - the XML defines only these categories
            raise RuntimeError(f"unknown encoding category {category!r}")
    return types, tuple(rkind), tuple(bkind), tuple(width), tuple(ctype)


_TYPE_IDS, _RKIND, _BKIND, _WIDTH, _CTYPE = _build_code_tables()
# scan_performative spells these kinds as literals
assert (R_NULL, R_TRUE, R_FALSE, R_ZERO, R_U8, R_BOOL8, R_U32, R_BIN, A_DECLINE, A_SLOW) == (
    1, 2, 3, 4, 5, 7, 10, 14, 0, 20
)
_ARRAY_TYPE = _TYPE_IDS["array"]
_LIST_TYPE = _TYPE_IDS["list"]


def _plain_primitive(prim: str) -> bool:
    codes = _spec.PRIMITIVE_CODES.get(prim)
    return bool(codes) and all(_RKIND[c] not in (R_OTHER, R_INVALID, R_NULL) for c in codes)


# Delivery-state composites: descriptor -> (name, may be an empty list).
def _build_states():
    by_code = {}
    by_symbol = {}
    for name in _spec.PROVIDERS.get("delivery-state", ()):
        c = COMPOSITES.get(name)
        if c is None:
            continue
        no_mandatory = not any(f.mandatory for f in c.fields)
        by_code[c.descriptor_code] = (name, no_mandatory)
        by_symbol[c.descriptor_symbol.encode("ascii")] = (name, no_mandatory)
    return by_code, by_symbol


_STATE_BY_CODE, _STATE_BY_SYMBOL = _build_states()
# 00 53 XX 45: the name of an empty delivery state that may be empty, by XX
_EMPTY_STATE_SMALL = tuple(
    st[0] if st is not None and st[1] else None for st in (_STATE_BY_CODE.get(i) for i in range(256))
)


def _actions(kind: int, prim: int, multiple: bool) -> tuple:
    """A field's action per constructor byte: its reader kind, A_DECLINE or A_SLOW."""
    acts = []
    for c in range(256):
        ct = _CTYPE[c]
        if _RKIND[c] == R_NULL:
            a = R_NULL
        elif c == 0:  # a described value
            a = A_SLOW if kind == F_STATE or kind == F_ANY else A_DECLINE
        elif ct == 0 or kind == F_STATE:
            a = A_DECLINE
        elif kind == F_ANY or (multiple and ct == _ARRAY_TYPE):
            a = A_SLOW
        elif ct != prim:
            a = A_DECLINE
        else:
            a = _RKIND[c] if kind == F_PLAIN else A_SLOW
        acts.append(a)
    return tuple(acts)


def _build_layouts():
    by_code = {}
    by_symbol = {}
    cache = {}
    for name, (dcode, dsym, nfields, fields) in SCAN_LAYOUTS.items():
        kinds = []
        actions = []
        mandatory = []
        for fname, index, ftype, prim, requires, mand, multiple, default in fields:
            if prim == "*":
                kind = F_STATE if requires == "delivery-state" else F_ANY
                prim_id = 0
            else:
                kind = F_PLAIN if _plain_primitive(prim) else F_SPAN
                prim_id = _TYPE_IDS[prim]
            key = (kind, prim_id, bool(multiple))
            if key not in cache:
                cache[key] = _actions(*key)
            kinds.append(kind)
            actions.append(cache[key])
            if mand:
                mandatory.append(index)
        layout = (dcode, nfields, tuple(kinds), tuple(actions), tuple(mandatory), (ABSENT,) * nfields, name)
        by_code[dcode] = layout
        by_symbol[dsym.encode("ascii")] = layout
    small = tuple(by_code.get(i) for i in range(256))
    return by_code, by_symbol, small


_LAYOUT_BY_CODE, _LAYOUT_BY_SYMBOL, _LAYOUT_SMALL = _build_layouts()


def field_names(code: int) -> tuple:
    """The field names of the scanned performative with descriptor ``code``."""
    for name in SCAN_LAYOUTS:
        c = COMPOSITES[name]
        if c.descriptor_code == code:
            return tuple(f.name for f in c.fields)
    raise KeyError(code)


# --------------------------------------------------------------------------- the validating skipper


def _skip(buf, p: int, end: int, depth: int, budget: list) -> int:
    """Validate the value at ``p`` (read at nesting ``depth``); its end, or -1."""
    if p >= end:
        return -1
    c = buf[p]
    if c == 0:
        depth += 1
        if depth > DEFAULT_MAX_DEPTH:
            return -1
        p = _skip(buf, p + 1, end, depth, budget)
        if p < 0:
            return -1
        return _skip(buf, p, end, depth, budget)
    return _skip_body(buf, c, p + 1, end, depth, budget)


def _skip_body(buf, c: int, p: int, end: int, depth: int, budget: list) -> int:
    """Validate the body of constructor ``c`` at ``p``; its end, or -1."""
    k = _BKIND[c]
    w = _WIDTH[c]
    if k == B_FIXED:
        p += w
        return p if p <= end else -1
    if k == B_BOOL8:
        if p >= end or buf[p] > 1:
            return -1
        return p + 1
    if k == B_CHAR:
        if end - p < 4:
            return -1
        cp = _U32.unpack_from(buf, p)[0]
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            return -1
        return p + 4
    if k == B_BIN or k == B_STR or k == B_SYM:
        return _skip_variable(buf, k, w, p, end)
    if k == B_INVALID:
        return -1
    return _skip_compound(buf, k, w, p, end, depth, budget)


def _skip_variable(buf, k: int, w: int, p: int, end: int) -> int:
    """Validate binary, string (UTF-8) or symbol (ASCII) bytes with a ``w``-byte length at ``p``."""
    if w == 1:
        if p >= end:
            return -1
        n = buf[p]
        p += 1
    else:
        if end - p < 4:
            return -1
        n = _U32.unpack_from(buf, p)[0]
        p += 4
    q = p + n
    if q > end:
        return -1
    if k == B_STR:
        try:
            bytes(buf[p:q]).decode("utf-8")
        except UnicodeDecodeError:
            return -1
    elif k == B_SYM:
        try:
            bytes(buf[p:q]).decode("ascii")
        except UnicodeDecodeError:
            return -1
    return q


def _skip_compound(buf, k: int, w: int, p: int, end: int, depth: int, budget: list) -> int:
    """Validate a list, map or array body (``w``-byte size and count) at ``p``: its elements are
    charged to ``budget`` and read one level deeper than ``depth``."""
    if w == 1:
        if p >= end:
            return -1
        size = buf[p]
        p += 1
        if size < 1:
            return -1
        cend = p + size
        if cend > end:
            return -1
        count = buf[p]
        p += 1
    else:
        if end - p < 4:
            return -1
        size = _U32.unpack_from(buf, p)[0]
        p += 4
        if size < 4:
            return -1
        cend = p + size
        if cend > end:
            return -1
        count = _U32.unpack_from(buf, p)[0]
        p += 4
    if k == B_MAP and count % 2:
        return -1
    if k != B_ARRAY and count > cend - p:
        return -1
    budget[0] -= count
    if budget[0] < 0:
        return -1
    depth += 1
    if depth > DEFAULT_MAX_DEPTH:
        return -1
    if k == B_ARRAY:
        return _skip_array(buf, count, p, cend, depth, budget)
    for _ in range(count):
        p = _skip(buf, p, cend, depth, budget)
        if p < 0:
            return -1
    return p if p == cend else -1


def _skip_array(buf, count: int, p: int, cend: int, depth: int, budget: list) -> int:
    """Validate an array's element constructor at ``p``, then its ``count`` bodies up to ``cend``."""
    if p >= cend:
        return -1
    ec = buf[p]
    p += 1
    if ec == 0:
        if depth + 1 > DEFAULT_MAX_DEPTH:
            return -1
        p = _skip(buf, p, cend, depth + 1, budget)
        if p < 0 or p >= cend:
            return -1
        ec = buf[p]
        p += 1
        if ec == 0:
            return -1
    if _BKIND[ec] == B_INVALID:
        return -1
    if _BKIND[ec] == B_FIXED and _WIDTH[ec] == 0:
        if count > MAX_ZERO_WIDTH_ELEMENTS:
            return -1
    elif count > cend - p:
        return -1
    for _ in range(count):
        p = _skip_body(buf, ec, p, cend, depth, budget)
        if p < 0:
            return -1
    return p if p == cend else -1


# --------------------------------------------------------------------------- delivery state


def _described_at(buf, q: int, end: int, by_code: dict, by_symbol: dict):
    """The entry of ``by_code`` (a descriptor written as a small ulong or a ulong) or of ``by_symbol``
    (written as a symbol) named by the descriptor whose constructor is at ``q``:
    ``(entry or None, position after the descriptor)``, or None when it is none of these or cut."""
    if q >= end:
        return None
    c = buf[q]
    if c == 0x53:
        if end - q < 2:
            return None
        return by_code.get(buf[q + 1]), q + 2
    if c == 0x80:
        if end - q < 9:
            return None
        return by_code.get(_U64.unpack_from(buf, q + 1)[0]), q + 9
    if c == 0xA3:
        if end - q < 2:
            return None
        r = q + 2 + buf[q + 1]
        if r > end:
            return None
        return by_symbol.get(bytes(buf[q + 2 : r])), r
    if c == 0xB3:
        if end - q < 5:
            return None
        r = q + 5 + _U32.unpack_from(buf, q + 1)[0]
        if r > end:
            return None
        return by_symbol.get(bytes(buf[q + 5 : r])), r
    return None


def _state(buf, p: int, end: int, budget: list):
    """A delivery state at ``p`` (constructor 0x00): (value, end) or None."""
    found = _described_at(buf, p + 1, end, _STATE_BY_CODE, _STATE_BY_SYMBOL)
    if found is None:
        return None
    st, q = found
    if st is None or q >= end:
        return None
    if _CTYPE[buf[q]] != _LIST_TYPE:
        return None
    if st[1]:
        r = _empty_list_end(buf, q, end)
        if r >= 0:
            return st[0], r
    # the descriptor was read at depth 3 (performative described 1, its list 2)
    stop = _skip(buf, p, end, 2, budget)
    if stop < 0:
        return None
    return Span(p, stop), stop


def _empty_list_end(buf, q: int, end: int) -> int:
    """The end of the list at ``q`` when it is empty (in any of its three encodings), else -1."""
    c = buf[q]
    if c == 0x45:
        return q + 1
    if c == 0xC0 and end - q >= 3 and buf[q + 1] == 1 and buf[q + 2] == 0:
        return q + 3
    if c == 0xD0 and end - q >= 9 and _U32X2.unpack_from(buf, q + 1) == (4, 0):
        return q + 9
    return -1


# --------------------------------------------------------------------------- the scanner


def buffer_bytes(buf: bytearray, a: int, b: int) -> bytes:
    """``bytes(buf[a:b])``; compiled, copied once straight from the buffer (no bytearray slice in
    between).  The framing layer copies payloads with it too."""
    if not cython.compiled:
        return bytes(buf[a:b])
    return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(buf) + a, b - a)


class ScanResult:
    """What a scan found besides the fields (:func:`scan_into` fills it): the performative's
    descriptor ``code`` and ``name``, ``perf_end`` (the offset after the performative),
    ``count`` (the fields its list encodes: those after are ABSENT) and ``spans`` (a field was
    read as a :class:`Span`: decode it before the buffer changes).  One object reused frame after
    frame: no result tuple per frame."""

    __slots__ = ("code", "name", "perf_end", "count", "spans")

    def __init__(self):
        self.code = 0
        self.name = None
        self.perf_end = 0
        self.count = 0
        self.spans = False


def scan_performative(buf, pos, end, budget=None):
    """Scan a transfer/flow/disposition at ``buf[pos:end]``: ``(code, values, perf_end)`` or None.

    ``budget``: a one-element list, the elements the scan may validate (compound and array
    counts, as the generic decoder counts them); the scan takes what it walks from
    ``budget[0]`` (below zero: it declined for want of budget).  None: ``DEFAULT_MAX_ELEMENTS``.
    """
    if type(buf) is not bytearray:  # the framing layer's buffers are bytearrays (typed when compiled)
        buf = bytearray(buf)
    if budget is None:
        budget = [DEFAULT_MAX_ELEMENTS]
    res = ScanResult()
    values = _scan(buf, pos, end, budget, res)
    if values is None:
        return None
    return res.code, values, res.perf_end


def scan_into(buf, pos, end, budget, res):
    """:func:`scan_performative` for the framing layer: the values tuple (or None), the rest in
    ``res`` (a :class:`ScanResult`); ``buf`` a bytearray, ``budget`` a one-element list."""
    return _scan(buf, pos, end, budget, res)


def _put(values, i, v) -> None:
    """``values[i] = v``.  Compiled, ``values`` is the result tuple itself, made with empty slots
    and filled once per slot in field order (nobody else holds it yet); plain Python, a list."""
    if cython.compiled:
        Py_INCREF(v)
        PyTuple_SET_ITEM(values, i, v)
    else:
        values[i] = v


def _scan(buf, pos, end, budget, res):
    """:func:`scan_into`: the performative's layout from its descriptor, then its list."""
    n = len(buf)
    if end > n:
        end = n
    p = pos
    if end - p < 3 or buf[p] != 0:
        return None
    if buf[p + 1] == 0x53:
        layout = _LAYOUT_SMALL[buf[p + 2]]
        p += 3
    else:  # a descriptor as a ulong or a symbol
        found = _described_at(buf, p + 1, end, _LAYOUT_BY_CODE, _LAYOUT_BY_SYMBOL)
        if found is None:
            return None
        layout, p = found
    if layout is None:
        return None
    p = _list_start(buf, p, end, layout[1], res)
    if p < 0:
        return None
    return _scan_fields(buf, p, layout, budget, res)


def _list_start(buf, p: int, end: int, nfields: int, res) -> int:
    """Read the header of the performative's list at ``p``: its first element's offset, its count in
    ``res.count`` and its end in ``res.perf_end``; -1 when it is not a list of at most ``nfields``
    elements or is cut."""
    if p >= end:
        return -1
    c = buf[p]
    p += 1
    if c == 0xC0:
        if end - p < 2:
            return -1
        lend = p + 1 + buf[p]
        if lend == p + 1 or lend > end:
            return -1
        count = buf[p + 1]
        p += 2
    elif c == 0x45:
        count = 0
        lend = p
    elif c == 0xD0:
        if end - p < 8:
            return -1
        size, count = _U32X2.unpack_from(buf, p)
        if size < 4:
            return -1
        lend = p + 4 + size
        if lend > end:
            return -1
        p += 8
    else:
        return -1
    if count > nfields or count > lend - p:
        return -1
    res.count = count
    res.perf_end = lend
    return p


def _scan_fields(buf, p: int, layout: tuple, budget: list, res):
    """The values of the ``res.count`` fields of ``layout`` from ``p`` to ``res.perf_end``
    (the rest ABSENT; ``res`` filled), or None."""
    # The reader kinds are written as literals in this loop (see R_* above): a module
    # constant is a dictionary lookup per use, in CPython and in Cython alike.
    code, nfields, kinds, actions, mandatory, absent, pname = layout
    count = res.count
    lend = res.perf_end
    if cython.compiled:  # the tuple itself, its slots set in field order (absent ones at the end)
        values = PyTuple_New(nfields)
    else:
        values = list(absent)
    spans = False
    charged = False  # the list's count taken from the budget (only when a Span or state is walked)
    for i in range(count):
        if p >= lend:
            return None
        c = buf[p]
        row = actions[i]
        a = row[c]
        p += 1
        if a != 20:  # a plain value, or A_DECLINE
            p = _read_plain(buf, c, a, p, lend, values, i)
            if p < 0:
                return None
            continue
        # A_SLOW: a delivery state or a Span
        p -= 1
        state = kinds[i] == F_STATE
        # the usual case in one step: 00 53 XX 45, an empty accepted/released/...
        name = _empty_state_name(buf, p, lend, state)
        if name is not None:
            _put(values, i, name)
            p += 4
            continue
        if not charged:
            budget[0] -= count
            charged = True
        p = _walked(buf, p, lend, state, values, i, budget)
        if p < 0:
            return None
        if not state or type(values[i]) is Span:
            spans = True
    if p != lend or not _complete(values, count, nfields, mandatory):
        return None
    res.code = code
    res.name = pname
    res.spans = spans
    return values if cython.compiled else tuple(values)


def _read_plain(buf, c: int, a: int, p: int, end: int, values, i: int) -> int:
    """Store the plain value of reader kind ``a`` (constructor ``c``, its body at ``p``) in
    ``values[i]``: its end, or -1 (A_DECLINE, or the value is cut or invalid)."""
    if a == 5:  # R_U8
        if p >= end:
            return -1
        _put(values, i, buf[p])
        return p + 1
    if a == 1:  # R_NULL
        _put(values, i, None)
        return p
    if a == 4:  # R_ZERO
        _put(values, i, 0)
        return p
    if a == 2:  # R_TRUE
        _put(values, i, True)
        return p
    if a == 3:  # R_FALSE
        _put(values, i, False)
        return p
    if a == 14:  # R_BIN
        return _read_binary(buf, c, p, end, values, i)
    if a == 10:  # R_U32
        if end - p < 4:
            return -1
        u = buf[p]
        u = (u << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]
        _put(values, i, u)
        return p + 4
    if a == 7:  # R_BOOL8
        if p >= end or buf[p] > 1:
            return -1
        _put(values, i, buf[p] == 1)
        return p + 1
    if a == 0:  # A_DECLINE
        return -1
    return _plain(buf, c, a, p, end, values, i)  # the rarer plain kinds


def _sized_end(buf, one_byte: bool, p: int, end: int) -> int:
    """The end of the sized value whose length (one byte when ``one_byte``, else four) is at
    ``p``, or -1 when the length or the value does not fit before ``end``."""
    if one_byte:
        if p >= end:
            return -1
        q = p + 1 + buf[p]
    else:
        if end - p < 4:
            return -1
        q = p + 4 + _U32.unpack_from(buf, p)[0]
    return q if q <= end else -1


def _read_binary(buf, c: int, p: int, end: int, values, i: int) -> int:
    """Store the binary of constructor ``c`` (its length at ``p``) in ``values[i]``: its end, or -1."""
    q = _sized_end(buf, c == 0xA0, p, end)
    if q < 0:
        return -1
    _put(values, i, buffer_bytes(buf, p + 1 if c == 0xA0 else p + 4, q))
    return q


def _empty_state_name(buf, p: int, end: int, state: bool):
    """The name of the empty delivery state written ``00 53 XX 45`` at ``p`` when ``state`` (the
    field is a delivery state) and XX is a state that may be empty, else None."""
    if state and p + 3 < end and buf[p + 1] == 0x53 and buf[p + 3] == 0x45:
        return _EMPTY_STATE_SMALL[buf[p + 2]]
    return None


def _complete(values, count: int, nfields: int, mandatory: tuple) -> bool:
    """Fill the ``nfields - count`` absent fields (compiled: the slots after ``count``); False when
    a mandatory field is absent or null."""
    if cython.compiled:
        for i in range(count, nfields):
            _put(values, i, ABSENT)
    for m in mandatory:
        if m >= count or values[m] is None:
            return False
    return True


def _walked(buf, p: int, end: int, state: bool, values, i: int, budget: list) -> int:
    """A field read by walking it: a delivery state (``state``) or a Span; stored in ``values[i]``.
    Its end, or -1."""
    if state:
        st = _state(buf, p, end, budget)
        if st is None:
            return -1
        _put(values, i, st[0])
        return st[1]
    q = _skip(buf, p, end, 2, budget)
    if q < 0:
        return -1
    _put(values, i, Span(p, q))
    return q


def _plain(buf, c: int, k: int, p: int, end: int, values, i: int) -> int:
    """The rarer plain kinds: store the value at ``p`` in ``values[i]``; its end, or -1."""
    if k == R_U64:
        if end - p < 8:
            return -1
        _put(values, i, _U64.unpack_from(buf, p)[0])
        return p + 8
    if k == R_S8:
        if p >= end:
            return -1
        b = buf[p]
        _put(values, i, b - 256 if b > 127 else b)
        return p + 1
    if k == R_U16:
        if end - p < 2:
            return -1
        _put(values, i, _U16.unpack_from(buf, p)[0])
        return p + 2
    if k == R_S16:
        if end - p < 2:
            return -1
        _put(values, i, _I16.unpack_from(buf, p)[0])
        return p + 2
    if k == R_S32:
        if end - p < 4:
            return -1
        _put(values, i, _I32.unpack_from(buf, p)[0])
        return p + 4
    if k == R_S64:
        if end - p < 8:
            return -1
        _put(values, i, _I64.unpack_from(buf, p)[0])
        return p + 8
    if k == R_STR or k == R_SYM:
        return _plain_text(buf, c, k, p, end, values, i)
    return -1  # pragma: no cover - _plain_primitive admits only the kinds above


def _plain_text(buf, c: int, k: int, p: int, end: int, values, i: int) -> int:
    """Store the string (``k`` R_STR, UTF-8) or symbol (R_SYM, ASCII) of constructor ``c`` (its
    length at ``p``) in ``values[i]``: its end, or -1."""
    one_byte = _WIDTH[c] == 1
    q = _sized_end(buf, one_byte, p, end)
    if q < 0:
        return -1
    p += 1 if one_byte else 4
    try:
        _put(values, i, bytes(buf[p:q]).decode("utf-8" if k == R_STR else "ascii"))
    except UnicodeDecodeError:
        return -1
    return q
