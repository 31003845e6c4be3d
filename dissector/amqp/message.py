"""The message of a delivery, scanned as its transfer frames pass (spec 3.2): the fields of the
deliveries table's message columns.

:class:`MessageScan` is fed the payload of each transfer frame of one delivery, in order.  It
walks the sections without decoding the body: the header, delivery-annotations,
message-annotations, properties and application-properties sections are decoded (with the
codec's bounded :class:`~amqp_dissect.amqp.codec.Reader`) when they lie within the first
:data:`PREFIX_CAP` bytes of the message; the body sections (data, amqp-sequence, amqp-value) are
typed and sized from their encoding's size fields, the footer named.  A digest of the bare message
(properties, application-properties and the body: the part intermediaries may not change) is
computed over every frame as the bytes pass.  Memory per delivery: the bytes of one section head or
of one section being read (at most :data:`PREFIX_CAP`), held until it is complete and freed then,
the digest's state, and what was read (bounded: :data:`MAX_KEYS` keys per map,
:data:`MAX_VALUE_CHARS` characters per value).

Section names, descriptor codes and order, the header and properties field indices and the
header's defaults come from the generated tables (:mod:`amqp_dissect.amqp._spec`).
"""

from __future__ import annotations

try:  # (hashlib's own blake2b, without hashlib's import of OpenSSL's digests: a few ms of every start)
    from _blake2 import blake2b as _blake2b
except ImportError:  # (a Python built without it)
    from hashlib import blake2b as _blake2b
import json

from . import _spec
from ..errors import DissectError
from .codec import ABSENT, Composite, Described, Reader, Symbol, Timestamp, amqp_type_of
from .values import json_value

__all__ = ["MessageScan", "MESSAGE_COLUMNS", "SECTION_NAMES", "PREFIX_CAP", "message_cells", "empty_cells",
           "HeldDigest", "HELD_DIGEST_CAP", "keep_digested_bytes"]

#: bytes at the start of a message its header, annotations and properties are read from
PREFIX_CAP = 65536
#: the longest section head (descriptor, constructor, size) accepted
HEAD_CAP = 512
#: keys of a map column kept, characters of a value's JSON text kept
MAX_KEYS = 64
MAX_VALUE_CHARS = 256
#: elements the decoder may read in one section (codec.Reader's cap)
MAX_ELEMENTS = 16384
_DEPTH = 16  # nesting of described descriptors a section head may have

# --------------------------------------------------------------------------- the spec's tables

SECTION_NAMES = {code: name for name, code, _sym, _src in _spec.MESSAGE_SECTIONS}
_SYMBOLIC = {sym: code for _name, code, sym, _src in _spec.MESSAGE_SECTIONS}
_ORDER = {code: i for i, (_n, code, _s, _t) in enumerate(_spec.MESSAGE_SECTIONS)}
_HEADER_ORDER = _ORDER[_spec.DESCRIPTOR_HEADER]
_HEADER = _spec.DESCRIPTOR_HEADER
_DA = _spec.DESCRIPTOR_DELIVERY_ANNOTATIONS
_MA = _spec.DESCRIPTOR_MESSAGE_ANNOTATIONS
_PROPERTIES = _spec.DESCRIPTOR_PROPERTIES
_AP = _spec.DESCRIPTOR_APPLICATION_PROPERTIES
_FOOTER = _spec.DESCRIPTOR_FOOTER
_BODY = (_spec.DESCRIPTOR_DATA, _spec.DESCRIPTOR_AMQP_SEQUENCE, _spec.DESCRIPTOR_AMQP_VALUE)
_READ = (_HEADER, _DA, _MA, _PROPERTIES, _AP)  # decoded
_BARE = (_PROPERTIES, _AP) + _BODY  # digested
_BARE_ORDERS = frozenset(_ORDER[c] for c in _BARE)

# header fields: (column, index, the spec's default (None: none))
_HEADER_FIELDS = tuple(
    (fname.replace("-", "_") if fname != "delivery-count" else "header_delivery_count", i,
     default if has_default else None, fname)
    for i, (fname, _t, _p, _r, _m, _mu, has_default, default) in enumerate(_spec.COMPOSITES["header"][6]))

# the message columns of the deliveries table, in order
MESSAGE_COLUMNS = (
    "message_id", "message_id_type", "correlation_id", "correlation_id_type", "user_id", "to", "subject",
    "reply_to", "content_type", "content_encoding", "absolute_expiry_time", "creation_time", "group_id",
    "group_sequence", "reply_to_group_id", "durable", "priority", "ttl", "first_acquirer",
    "header_delivery_count", "header_defaults", "delivery_annotations", "message_annotations",
    "application_properties", "body_kind", "body_size", "message_sections", "bare_digest", "message_read",
)
_N = len(MESSAGE_COLUMNS)
_EMPTY = (None,) * _N

# the properties fields' indices (the generated constants)
_NPROPS = len(_spec.COMPOSITES["properties"][6])
_MESSAGE_ID = _spec.PROPERTIES_MESSAGE_ID
_USER_ID = _spec.PROPERTIES_USER_ID
_TO = _spec.PROPERTIES_TO
_SUBJECT = _spec.PROPERTIES_SUBJECT
_REPLY_TO = _spec.PROPERTIES_REPLY_TO
_CORRELATION_ID = _spec.PROPERTIES_CORRELATION_ID
_CONTENT_TYPE = _spec.PROPERTIES_CONTENT_TYPE
_CONTENT_ENCODING = _spec.PROPERTIES_CONTENT_ENCODING
_EXPIRY = _spec.PROPERTIES_ABSOLUTE_EXPIRY_TIME
_CREATION = _spec.PROPERTIES_CREATION_TIME
_GROUP_ID = _spec.PROPERTIES_GROUP_ID
_GROUP_SEQUENCE = _spec.PROPERTIES_GROUP_SEQUENCE
_REPLY_TO_GROUP_ID = _spec.PROPERTIES_REPLY_TO_GROUP_ID
_NO_PROPS = (None,) * 15
_NO_HEADER = (None,) * 6


def empty_cells() -> tuple:
    """The message cells of a delivery whose message was not read (not asked)."""
    return _EMPTY


def _text(v):
    """A properties field as text: a string or symbol as it is, binary as hex, another type as
    its JSON text (the spec's type is a string here: the value says what it was)."""
    if v is None:
        return None
    t = type(v)
    if t is str or t is Symbol:
        return str(v)
    if t is bytes:
        return v.hex()
    return json.dumps(json_value(v), sort_keys=True)


def _id(v):
    """A message-id / correlation-id: (text, type) — ulong as decimal, uuid canonical, binary as
    hex, string as it is (another type: its JSON text and its AMQP type name)."""
    if v is None:
        return None, None
    t = amqp_type_of(v)
    if t == "ulong":
        return str(int(v)), t
    if t == "uuid":
        return str(v), t
    if t == "binary":
        return bytes(v).hex(), t
    if t == "string":
        return str(v), t
    return _text(v), t


def _ms_ns(v):
    """A timestamp (milliseconds) as nanoseconds since the epoch (None when not a timestamp)."""
    if type(v) is Timestamp or (isinstance(v, int) and not isinstance(v, bool)):
        return int(v) * 1_000_000
    return None


def _int(v):
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    return None


def _bool(v):
    return v if v is True or v is False else None


def bounded_map(m) -> dict:
    """A map section as a JSON object, bounded: the first MAX_KEYS keys, each value's JSON text at
    most MAX_VALUE_CHARS characters (a longer one is cut: its text, cut, as a string); what was cut
    is said in ``"@cut"``: ``{"keys": keys left out, "values": [keys whose value was cut]}``."""
    out: dict = {}
    if not isinstance(m, dict):  # (a section that is not a map: its value, as JSON)
        return {"@value": json_value(m)}
    left = 0
    cut = []
    for k, x in m.items():
        if len(out) >= MAX_KEYS:
            left += 1
            continue
        key = str(k) if isinstance(k, str) else json.dumps(json_value(k), sort_keys=True)
        if len(key) > MAX_VALUE_CHARS:
            key = key[:MAX_VALUE_CHARS]
            cut.append(key)
        v = json_value(x)
        if not (v is None or type(v) is bool or type(v) is int or type(v) is float):
            s = v if type(v) is str else json.dumps(v, sort_keys=True, ensure_ascii=False)
            if len(s) > MAX_VALUE_CHARS:
                v = s[:MAX_VALUE_CHARS]
                cut.append(key)
        out[key] = v
    if left or cut:
        out["@cut"] = {"keys": left, "values": cut}
    return out


# --------------------------------------------------------------------------- walking the encoding

_CONSTRUCTORS = _spec.CONSTRUCTORS
_NEED = -1  # (section_length: more bytes needed)


def _value_length(buf, p: int, end: int, depth: int) -> int:
    """Encoded length of the value at ``p`` (constructor included), from its constructor and size
    field only; _NEED when ``buf[p:end]`` is too short to tell.  Raises DissectError when the
    constructor is not one the spec defines."""
    if p >= end:
        return _NEED
    code = buf[p]
    if code == 0:  # described: descriptor then value
        if depth > _DEPTH:
            raise DissectError(f"descriptors nested deeper than {_DEPTH}")
        n = _value_length(buf, p + 1, end, depth + 1)
        if n < 0:
            return n
        m = _value_length(buf, p + 1 + n, end, depth + 1)
        if m < 0:
            return m
        return 1 + n + m
    enc = _CONSTRUCTORS[code]
    if enc is None:
        raise DissectError(f"unknown constructor 0x{code:02x}")
    cat = enc[2]
    w = enc[3]
    if cat == "fixed":
        return 1 + w
    if p + 1 + w > end:
        return _NEED
    if w == 1:
        size = buf[p + 1]
    else:
        size = int.from_bytes(buf[p + 1:p + 5], "big")
    return 1 + w + size


def _section_head(buf, p: int, end: int):
    """(descriptor code or None, section length) of the section at ``p``; (None, _NEED) when the
    bytes do not tell yet.  Raises DissectError when it is not a described value."""
    if p >= end:
        return None, _NEED
    if buf[p] != 0:
        raise DissectError(f"a section is a described value: constructor 0x{buf[p]:02x}")
    q = p + 1
    if q >= end:
        return None, _NEED
    c = buf[q]
    code = None
    if c == 0x53:
        if q + 1 >= end:
            return None, _NEED
        code = buf[q + 1]
    elif c == 0x80:
        if q + 9 > end:
            return None, _NEED
        code = int.from_bytes(buf[q + 1:q + 9], "big")
    elif c == 0x44:
        code = 0
    elif c == 0xa3 or c == 0xb3:
        n = _value_length(buf, q, end, 0)
        if n < 0:
            return None, _NEED
        w = 1 if c == 0xa3 else 4
        if q + n > end:
            return None, _NEED
        sym = bytes(buf[q + 1 + w:q + n]).decode("ascii", "replace")
        code = _SYMBOLIC.get(sym, -1)
    n = _value_length(buf, q, end, 0)
    if n < 0:
        return None, _NEED
    m = _value_length(buf, q + n, end, 0)
    if m < 0:
        return None, _NEED
    return code, 1 + n + m


# --------------------------------------------------------------------------- a digest a checkpoint keeps

#: bytes of one message's bare part a :class:`HeldDigest` keeps, at most (beyond: it cannot be saved)
HELD_DIGEST_CAP = 4 * 1024 * 1024


class HeldDigest:
    """BLAKE2b-128 over a message's bare bytes (as the scan's own digest) that also keeps the bytes
    it was given, up to :data:`HELD_DIGEST_CAP`: hashlib's digest gives out no state, so a flow's
    state with a message in progress at the end of an archive run is saved as these bytes and the
    digest made again from them when it is loaded (the same BLAKE2b of the same bytes).  Made
    instead of the plain digest only while :func:`keep_digested_bytes` is on (a run that keeps a
    checkpoint); the bytes are freed when the message ends (the scan keeps the hex text then)."""

    __slots__ = ("h", "held")

    def __init__(self):
        self.h = _blake2b(digest_size=16)
        self.held = bytearray()  # None once more than HELD_DIGEST_CAP bytes came

    def update(self, data) -> None:
        self.h.update(data)
        held = self.held
        if held is not None:
            if len(held) + len(data) > HELD_DIGEST_CAP:
                self.held = None
            else:
                held += data

    def hexdigest(self) -> str:
        return self.h.hexdigest()

    def __getstate__(self):
        if self.held is None:
            import pickle

            raise pickle.PicklingError(f"a message was in progress at the end of the run with more than "
                                       f"{HELD_DIGEST_CAP} bytes digested (its digest cannot be saved)")
        return bytes(self.held)

    def __setstate__(self, held) -> None:
        self.h = _blake2b(digest_size=16)
        self.h.update(held)
        self.held = bytearray(held)


_new_digest = _blake2b  # what a scan digests with (keep_digested_bytes)


def keep_digested_bytes(on: bool) -> None:
    """Scans made from now on in this process digest with :class:`HeldDigest` (``on``: a run that
    keeps a checkpoint, whose flows' states must pickle) or hashlib's BLAKE2b alone (the default:
    nothing kept, no cost)."""
    global _new_digest
    _new_digest = HeldDigest if on else _blake2b


def _digest():
    d = _new_digest
    return d() if d is HeldDigest else d(digest_size=16)


# --------------------------------------------------------------------------- the scan


class MessageScan:
    """The scan of one delivery's message (see the module docstring).  :meth:`feed` each frame's
    payload; :meth:`end` at its last frame (``how``: None, "aborted" or "lost");
    :meth:`cells` gives the message columns."""

    __slots__ = ("pos", "held", "want", "skip", "digest", "last", "sections", "body_kind", "body_size",
                 "props", "header", "da", "ma", "ap", "status", "done", "lost_mark", "truncated")

    def __getstate__(self):
        """Pickled (an archive's checkpoint keeps a flow's state) unless the bare message's digest is
        in progress with hashlib's BLAKE2b alone, which gives out no state to save and go on from
        later (a :class:`HeldDigest` saves the bytes it digested)."""
        if self.digest is not None and type(self.digest) is not str and type(self.digest) is not HeldDigest:
            import pickle

            raise pickle.PicklingError("a message was in progress at the end of the run (its digest cannot be saved)")
        return None, {k: getattr(self, k) for k in self.__slots__ if hasattr(self, k)}

    def __init__(self, lost_mark=0):
        self.pos = 0  # message bytes consumed
        self.held = None  # bytearray: the start of a section head or of a section being read
        self.want = 0  # bytes of the section being read (0: a head is being read)
        self.skip = 0  # bytes of the current section still to pass over (not read)
        self.digest = None  # BLAKE2b-128 (hashlib's, or a HeldDigest) over the bare message's bytes
        self.last = -1  # order of the last section seen
        self.sections = []
        self.body_kind = None
        self.body_size = 0
        self.props = None  # the properties section's fields (list), once read
        self.header = None
        self.da = None
        self.ma = None
        self.ap = None
        self.status = None  # None while reading; "read", "lost", "aborted", "malformed: ..."
        self.done = False
        self.lost_mark = lost_mark  # the connection's loss count when the first frame came (the caller's)
        self.truncated = False

    # -- bytes in ---------------------------------------------------------------------------

    def feed(self, data) -> None:
        """The payload (bytes) of the delivery's next transfer frame."""
        if self.done or self.status is not None:
            return
        try:
            self._feed(data)
        except DissectError as e:
            self._fail(str(e))

    def _fail(self, why: str) -> None:
        self.status = "malformed: " + why
        self.held = None
        self.digest = None
        self.skip = 0

    def _feed(self, data) -> None:
        held = self.held
        if held is not None and not self.want:  # a section head spans frames: go on from its start
            self.held = None
            data = bytes(held) + bytes(data)
        n = len(data)
        i = 0
        while i < n:
            k = self.skip
            if k:  # a section passed over (digested when it is part of the bare message)
                if k > n - i:
                    k = n - i
                if self.digest is not None and self._bare():
                    self.digest.update(memoryview(data)[i:i + k])
                self.skip -= k
                i += k
                self.pos += k
                continue
            if self.want:  # a section to read spans frames: gather its bytes
                held = self.held
                take = self.want - len(held)
                if take > n - i:
                    take = n - i
                held += data[i:i + take]
                i += take
                if len(held) == self.want:
                    self.held = None
                    self._read(held, 0, len(held))
                continue
            code, length = _section_head(data, i, n)
            if length < 0:
                if n - i >= HEAD_CAP:
                    raise DissectError(f"a section head longer than {HEAD_CAP} bytes")
                self.held = bytearray(data[i:n])
                return
            i += self._section(code, length, data, i, n)

    def _bare(self) -> bool:
        return self.last in _BARE_ORDERS

    def _section(self, code, length: int, buf, p: int, end: int) -> int:
        """A section of ``length`` bytes starts at ``buf[p]`` (``end``: the bytes in hand); returns
        the bytes of ``buf`` consumed."""
        order = _ORDER.get(code)
        if order is None:
            raise DissectError(f"unknown section descriptor {code!r}")
        if order < self.last or (order == self.last and code not in _BODY):
            before = _spec.MESSAGE_SECTIONS[self.last][0]
            raise DissectError(f"{SECTION_NAMES[code]} section after the {before} section")
        if code in _BODY and self.body_kind is not None and _ORDER[code] != self.last:
            raise DissectError(f"{SECTION_NAMES[code]} section after a {self.body_kind} body")
        if code == _spec.DESCRIPTOR_AMQP_VALUE and self.body_kind is not None:
            raise DissectError("a second amqp-value section")
        self.last = order
        self.sections.append(SECTION_NAMES[code])
        if code in _BODY:
            if self.body_kind is None:
                self.body_kind = SECTION_NAMES[code]
            self.body_size += length
        if code in _BARE and self.digest is None and self.status is None:
            self.digest = _digest()
        if code in _READ:
            if self.pos + length > PREFIX_CAP:
                self.truncated = True  # beyond the prefix: named and sized, not read
            elif end - p >= length:
                self._read(buf, p, p + length)
                return length
            else:
                self.held = bytearray(buf[p:end])
                self.want = length
                return end - p
        # passed over: the bytes in hand now, the rest as they come
        self.skip = length
        return 0

    def _read(self, buf, p: int, end: int) -> None:
        """Decode the section at ``buf[p:end]`` (complete)."""
        self.want = 0
        if self.digest is not None and self._bare():
            self.digest.update(memoryview(buf)[p:end])
        self.pos += end - p
        r = Reader(buf, p, end, max_depth=32, max_elements=MAX_ELEMENTS)
        v = r.value()
        code = _spec.MESSAGE_SECTIONS[self.last][1]
        inner = v.value if isinstance(v, Described) else None
        if code == _HEADER or code == _PROPERTIES:
            if not isinstance(v, Composite) or type(inner) is not list:
                raise DissectError(f"the {SECTION_NAMES[code]} section is not a list")
            if code == _HEADER:
                self.header = inner
            else:
                self.props = inner
        else:
            if inner is not None and not isinstance(inner, dict):
                raise DissectError(f"the {SECTION_NAMES[code]} section is not a map")
            m = bounded_map(inner) if inner is not None else None
            if code == _DA:
                self.da = m
            elif code == _MA:
                self.ma = m
            else:
                self.ap = m

    # -- the end ----------------------------------------------------------------------------

    def end(self, how=None) -> None:
        """The delivery's last frame came (``how``: None), it was aborted ("aborted") or bytes of it
        were lost ("lost").  The held bytes are freed; the digest becomes its hex text."""
        if self.done:
            return
        self.done = True
        if self.status is None:
            if how is not None:
                self.status = how
            elif self.held is not None or self.skip:
                left = self.skip or (self.want - len(self.held) if self.want else 0)
                name = self.sections[-1] if self.sections and (self.skip or self.want) else "a"
                self.status = (f"malformed: the message ends inside the {name} section ({left} bytes short)"
                               if left else "malformed: the message ends inside a section head")
            elif not self.sections:
                self.status = "malformed: no section"
            else:
                self.status = "truncated" if self.truncated else "read"
        self.held = None
        if self.status in ("read", "truncated") and self.digest is not None:
            self.digest = self.digest.hexdigest()
        else:
            self.digest = None

    def cells(self, pending=None) -> tuple:
        """The message columns (see :data:`MESSAGE_COLUMNS`, in its order).  ``pending``: what to
        say of a scan that never ended (the delivery's last frame was not seen): "incomplete" or
        "lost"."""
        status = self.status
        done = self.done
        if not done:
            status = pending or "incomplete"
        whole = done and (status == "read" or status == "truncated")
        kind = self.body_kind
        if kind is None and whole:
            kind = "none"
        digest = self.digest if done and type(self.digest) is str else None
        props = _NO_PROPS if self.props is None else _props_cells(self.props)
        h = self.header
        # the header's fields: the value; absent or null in a present header, or no header section
        # in a message read past where it would be: the spec's default, named in header_defaults
        if h is not None or self.last > _HEADER_ORDER or whole:
            header = _header_cells(h)
        else:
            header = _NO_HEADER
        return props + header + (self.da, self.ma, self.ap, kind, self.body_size, list(self.sections), digest,
                                 status)


def _props_cells(p: list) -> tuple:
    """The properties section's cells (``p``: its fields, the trailing absent ones left out)."""
    if len(p) < _NPROPS:
        p = p + [None] * (_NPROPS - len(p))
    mid, mtype = _id(p[_MESSAGE_ID])
    cid, ctype = _id(p[_CORRELATION_ID])
    return (mid, mtype, cid, ctype, _text(p[_USER_ID]), _text(p[_TO]), _text(p[_SUBJECT]),
            _text(p[_REPLY_TO]), _text(p[_CONTENT_TYPE]), _text(p[_CONTENT_ENCODING]),
            _ms_ns(p[_EXPIRY]), _ms_ns(p[_CREATION]), _text(p[_GROUP_ID]), _int(p[_GROUP_SEQUENCE]),
            _text(p[_REPLY_TO_GROUP_ID]))


def _header_cells(h) -> tuple:
    """The header section's cells (``h``: its fields, or None when the message has no header):
    each field's value, or (absent or null) the spec's default, named in the last cell."""
    vals = []
    defaults = []
    n = len(h) if h is not None else 0
    for col, i, default, fname in _HEADER_FIELDS:
        v = h[i] if i < n else None
        if v is None:
            if default is not None:
                defaults.append(fname)
            v = default
        vals.append(_bool(v) if col == "durable" or col == "first_acquirer" else _int(v))
    return (vals[0], vals[1], vals[2], vals[3], vals[4], defaults)


def message_cells(scan, pending=None) -> tuple:
    """The message cells of a delivery's scan (``None``: not read, every cell null)."""
    if scan is None:
        return _EMPTY
    return scan.cells(pending)


# --------------------------------------------------------------------------- the model's hook

_T_DELIVERY_ID = _spec.TRANSFER_DELIVERY_ID
_T_MORE = _spec.TRANSFER_MORE
_T_ABORTED = _spec.TRANSFER_ABORTED


def _loss_mark(c, d) -> int:
    """How much peer ``d`` of connection ``c`` has lost so far (TCP gaps and resynchronisations):
    a delivery whose frames saw this change lost bytes in between."""
    loss = c.loss
    if loss is None:
        return 0
    return loss.gaps[d] + loss.skipped[d]


class MessageReader:
    """The switch: a tracker whose transfer room holds one (``TransferRules.messages``) scans the
    message of every delivery into ``DeliveryRecord.message`` (a :class:`MessageScan`).  The frames
    must carry their payload (``Dissector(payloads=True)``)."""

    __slots__ = ("scans",)

    def __init__(self):
        self.scans = 0  # deliveries scanned

    def transfer(self, c, d, f, dlv) -> None:
        """A transfer frame ``f`` of delivery ``dlv`` (sent by peer ``d`` of connection ``c``)."""
        scan = dlv.message
        v = f.fields
        if scan is None:
            scan = dlv.message = MessageScan(_loss_mark(c, d))
            self.scans += 1
            did = v[_T_DELIVERY_ID]
            if (did is None or did is ABSENT) and c.loss is not None:
                scan.end("lost")  # its first frames were lost, or sent before the capture began
        elif scan.done:
            return
        elif c.loss is not None and scan.lost_mark != _loss_mark(c, d):
            scan.end("lost")  # frames of it were lost in between: what was read before stays
            return
        if f.cut is not None:  # its payload cut off by the snap length: "not captured (snap length N)"
            scan.end(str(f.cut))
            return
        scan.feed(f.payload)
        if v[_T_ABORTED] is True:
            scan.end("aborted")
        elif v[_T_MORE] is not True:
            scan.end()


def delivery_cells(dlv) -> tuple:
    """The message cells of a delivery object (every cell null when its message was not read); a
    scan whose last frame never came says "lost" when its peer lost bytes since its first frame,
    else "incomplete"."""
    scan = dlv.message
    if scan is None:
        return _EMPTY
    if scan.done:
        return scan.cells()
    link = dlv.link
    c = link.conn if link is not None else None
    lost = c is not None and c.loss is not None and scan.lost_mark != _loss_mark(c, dlv.direction)
    return scan.cells("lost" if lost else "incomplete")
