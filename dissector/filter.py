"""Display filters (``frames -Y``) and field extraction (``frames -T fields -e``) over frame events.

Sans-IO: a filter is compiled from text once (:func:`compile_filter`) and then asked about each
event a capture produces (:meth:`DisplayFilter.match`).  The grammar is a small subset of
Wireshark's display-filter language::

    expr    := term (("or" | "||") term)*
    term    := factor (("and" | "&&") factor)*
    factor  := ("not" | "!") factor | "(" expr ")" | test
    test    := FIELD [OP VALUE] | FIELD "in" "{" VALUE... "}"
    OP      := == != < > <= >= eq ne lt gt le ge contains matches ~
    VALUE   := "string" | number | true | false | null | bareword

``FIELD`` alone is true when the frame has the field with a non-null value.  A comparison with a
field the frame does not have is false (so is ``!=``: as in Wireshark, ``a != 1`` means "a is
present and is not 1").  A field with several values (a list of symbols, a map's keys) matches
``==`` when one value does and ``!=`` when none does.  ``== null`` matches a field encoded as an
explicit null, which is not the same as absent.  ``matches`` is a case-insensitive regular
expression search, ``contains`` a case-sensitive substring test.

The fields (:data:`FIELDS`) are the frame's own (packet, time, src, dst, connection, channel,
type, performative, size, payload-size, link, outcome, note, severity, protocol) and every field
of every performative and SASL frame by its spec name (delivery-id, handle, link-credit, role,
...).  ``name.sub`` reaches a field of a composite value (``source.address``,
``error.condition``).  ``_`` may stand for ``-`` in names (``delivery_id``).

A filter that does not parse or names what does not exist raises :class:`FilterError`, which
says where (1-based column) and what is wrong, in one line.  Bounded: a filter is at most
:data:`MAX_FILTER_CHARS` characters, nests parentheses and ``not`` at most :data:`MAX_DEPTH` deep,
and its integers fit in 64 bits; a regular expression that ``re`` cannot compile (a repeat count
beyond its limit, too deep) is a :class:`FilterError` too.  A compiled filter evaluates without
recursion along ``and`` / ``or`` chains and never raises on any frame, whatever types its fields hold.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import warnings
from typing import Callable, NamedTuple
from decimal import Decimal, InvalidOperation

from .amqp._spec import ATTACH_HANDLE, ATTACH_NAME, DETACH_HANDLE, FLOW_HANDLE, TRANSFER_HANDLE
from .amqp.codec import ABSENT, Composite, Described, Timestamp
from .amqp.framing import PROTOCOL_NAMES, Frame, ProtocolHeader, StreamNote
from .amqp.spec import CHOICES, COMPOSITES, PERFORMATIVES, SASL_FRAMES, choice_name
from .events import PacketNote

__all__ = ["FilterError", "DisplayFilter", "FrameContext", "FieldPrinter", "compile_filter", "FIELDS"]


MAX_FILTER_CHARS = 65536  # the longest filter text read
MAX_DEPTH = 64  # parentheses and ``not`` nested at most this deep
MAX_LITERAL_CHARS = 1024  # the longest number literal (the text of one; hex bytes are one too)
_INT_LIMIT = 1 << 64  # integers beyond +-2**64 name no AMQP value
_QUOTE_CHARS = 120  # the filter text an error line quotes at most


def _printable(s: str) -> str:
    """``s`` with every control or unprintable character escaped: an error stays one line."""
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


class FilterError(ValueError):
    """A display filter that does not parse, or names an unknown field or value."""

    def __init__(self, text: str, column: int, message: str):
        message = _printable(message)
        super().__init__(f"column {column}: {message}")
        self.text = text
        self.column = column
        self.message = message

    def one_line(self) -> str:
        text = self.text
        if len(text) > _QUOTE_CHARS:
            text = text[:_QUOTE_CHARS] + "..."
        return f"bad display filter {text!r}: column {self.column}: {self.message}"


# --------------------------------------------------------------------------- value kinds

NUM, BOOL, STR, BYTES, CHOICE, ANY, ADDR = "number", "boolean", "string", "bytes", "choice", "any", "address"
_NUM_PRIMITIVES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "float", "double",
                   "timestamp"}

_MISSING = ABSENT  # what an extractor returns for a field the event does not have


class Field:
    """A field the filter and ``-e`` know: its kind, the values it may take (or None), how to get it."""

    __slots__ = ("name", "kind", "get", "choices", "values", "doc", "alias_of", "names")

    def __init__(self, name, kind, get, doc, choices=None, values=None, alias_of=None, names=None):
        self.name = name
        self.kind = kind
        self.get = get  # (event, FrameContext) -> value, None (null) or _MISSING
        self.doc = doc
        self.choices = choices  # spec type with choices (CHOICE kind)
        self.values = values  # the only values an equality may name (performative, type, outcome)
        self.alias_of = alias_of  # a Wireshark name: the field of ours it stands for
        self.names = names  # a number field's value names, as Wireshark spells them ({"transfer": 20})


def _kind_name(ev) -> str | None:
    if type(ev) is Frame:
        return ev.kind
    if isinstance(ev, ProtocolHeader):
        return "header"
    if isinstance(ev, (StreamNote, PacketNote)):
        return "note"
    return None


def _attr(name):
    def get(ev, ctx):
        v = getattr(ev, name, _MISSING)
        return _MISSING if v is None else v
    return get


def _frame_attr(name):
    def get(ev, ctx):
        if type(ev) is not Frame:
            return _MISSING
        v = getattr(ev, name)
        return _MISSING if v is None else v
    return get


def _performative(ev, ctx):
    if type(ev) is not Frame:
        return _MISSING
    n = ev.name
    return _MISSING if n is None else n


def _payload_size(ev, ctx):
    if type(ev) is not Frame or ev.name != "transfer":
        return _MISSING
    return ev.payload_size


def _notes(ev):
    if isinstance(ev, (StreamNote, PacketNote)):
        return [ev.note]
    return list(getattr(ev, "notes", None) or ())


def _note(ev, ctx):
    ns = _notes(ev)
    return [n.message for n in ns] if ns else _MISSING


def _severity(ev, ctx):
    ns = _notes(ev)
    return [n.severity for n in ns] if ns else _MISSING


def _protocol(ev, ctx):
    """AMQP, SASL or TLS by the header's protocol id (tshark: ``amqp.init.id`` 0, 3, 2); a header
    of another id shows its whole name (``AMQP 0-9-1``)."""
    if not isinstance(ev, ProtocolHeader):
        return _MISSING
    name = PROTOCOL_NAMES.get(ev.protocol_id)
    return name if name is not None else ev.name


def _type(ev, ctx):
    k = _kind_name(ev)
    return _MISSING if k is None else k


def _exact_ns(ev, ctx):
    """The event's packet time in nanoseconds (every ``ts`` is), None without a time."""
    return getattr(ev, "ts", None)


_NS = Decimal(10) ** -9


def _time_epoch(ev, ctx):
    """Epoch seconds as an exact decimal (tshark compares times exactly: ``== 0.340787`` works)."""
    ns = _exact_ns(ev, ctx)
    return _MISSING if ns is None else Decimal(ns) * _NS


def _time_relative(ev, ctx):
    ns = _exact_ns(ev, ctx)
    if ns is None or ctx is None:
        return _MISSING
    t0 = ctx.t0
    if t0 is None and ctx.first_time is not None:
        t0 = ctx.first_time()
    if t0 is None:
        return _MISSING
    first = t0
    return Decimal(ns - first) * _NS


def _spec_field(name: str):
    """The extractor of a performative / SASL frame field: its value in the frame's field list."""
    where = {}  # performative -> index of the field
    for p in PERFORMATIVES + SASL_FRAMES:
        idx = COMPOSITES[p].index.get(name)
        if idx is not None:
            where[p] = idx

    def get(ev, ctx):
        if type(ev) is not Frame:
            return _MISSING
        i = where.get(ev.pname)
        if i is None:
            return _MISSING
        values = ev.fields
        if i >= len(values):
            return _MISSING
        v = values[i]
        return _MISSING if v is ABSENT else v
    return get


_state = _spec_field("state")


def _outcome(ev, ctx):
    v = _state(ev, ctx)
    if v is _MISSING or v is None:
        return v
    return _norm(v)


def _link(ev, ctx):
    if type(ev) is not Frame or ctx is None:
        return _MISSING
    name = ctx.link_name(ev)
    return _MISSING if name is None else name


def _build_fields() -> dict:
    fields = {}

    def add(name, kind, get, doc, **kw):
        fields[name] = Field(name, kind, get, doc, **kw)

    add("packet", NUM, _attr("packet"), "number of the packet (capture record) that completed the frame")
    add("time", NUM, _time_epoch, "time of that packet, epoch seconds")
    add("src", STR, _attr("src"), "ip:port of the sender")
    add("dst", STR, _attr("dst"), "ip:port of the receiver")
    add("connection", STR, _attr("conn"), "connection id (client-server endpoints)")
    add("channel", NUM, _frame_attr("channel"), "frame channel")
    add("type", STR, _type, "header, amqp, sasl, heartbeat or note",
        values=("header", "amqp", "sasl", "heartbeat", "note"))
    add("performative", STR, _performative, "performative or SASL frame name",
        values=PERFORMATIVES + SASL_FRAMES)
    add("size", NUM, _frame_attr("size"), "frame size, bytes")
    add("doff", NUM, _frame_attr("doff"), "data offset of the frame, in 4-byte words")
    add("payload-size", NUM, _payload_size, "payload bytes of a transfer")
    add("link", STR, _link, "link name (attach, flow, transfer and detach frames: by handle)")
    add("outcome", STR, _outcome, "delivery state of a transfer or disposition",
        values=tuple(n for n, c in COMPOSITES.items() if "delivery-state" in c.provides))
    add("note", STR, _note, "expert note text")
    add("severity", STR, _severity, "expert note severity")
    add("protocol", STR, _protocol, "protocol of a protocol header (AMQP, SASL, TLS)")
    # tshark's names for the frame's number and times
    add("frame.number", NUM, _attr("packet"), "the same as packet", alias_of="packet")
    add("frame.time_epoch", NUM, _time_epoch, "the same as time", alias_of="time")
    add("frame.time_relative", NUM, _time_relative, "seconds since the first packet of the capture")
    specs = {}
    for p in PERFORMATIVES + SASL_FRAMES:
        for f in COMPOSITES[p].fields:
            specs.setdefault(f.name, f)
    for name, f in specs.items():
        if name in fields:
            continue
        if f.type in CHOICES:
            kind = CHOICE
        elif f.multiple or f.primitive in ("*", "map", "list") or f.primitive in COMPOSITES:
            kind = ANY
        elif f.primitive == "boolean":
            kind = BOOL
        elif f.primitive in _NUM_PRIMITIVES:
            kind = NUM
        elif f.primitive == "binary":
            kind = BYTES
        else:
            kind = STR
        add(name, kind, _spec_field(name), f"the {name} field ({f.type})",
            choices=f.type if kind == CHOICE else None)
    return fields


FIELDS: dict = _build_fields()
_SUB_FIELDS = frozenset(f.name for c in COMPOSITES.values() for f in c.fields)


# --------------------------------------------------------------------------- the message's fields
#
# On the transfer frame that completes a delivery (the one ``frames --format jsonl`` gives its
# ``message``): the decoded sections of the reassembled message.  The sections and the header's and
# properties' fields are the spec's (the generated tables); a map section's keys are any text
# (``application-properties.KEY``, or ``application-properties."KEY"`` for a key with characters a
# field name does not have).

#: the map sections a KEY may follow
MAP_SECTIONS = ("application-properties", "message-annotations", "delivery-annotations", "footer")
MESSAGE_FIELDS: set = set()  # the names of the fields read from a message (frames must decode messages)


def _sections(ev):
    """The decoded sections of the message a frame completes (None: no message, or not decodable)."""
    if type(ev) is not Frame:
        return None
    dl = ev.delivery
    if dl is None or dl.aborted:
        return None
    return dl.sections()


def _section(name: str):
    def get(ev, ctx):
        secs = _sections(ev)
        if secs is None:
            return _MISSING
        for x in secs:
            if isinstance(x, Described) and (x.spec.name if isinstance(x, Composite) else x.name) == name:
                return x
        return _MISSING
    return get


def _section_field(section: str, fname: str):
    """A field of the header or properties section (its encoded value: absent is absent, a default
    is not applied, as with a performative's fields)."""
    sec = _section(section)
    i = COMPOSITES[section].index[fname]

    def get(ev, ctx):
        x = sec(ev, ctx)
        if x is _MISSING or not isinstance(x, Composite):
            return _MISSING
        v = x.value
        if i >= len(v) or v[i] is ABSENT:
            return _MISSING
        return v[i]
    return get


def _map_key(section: str, key: str):
    sec = _section(section)

    def get(ev, ctx):
        x = sec(ev, ctx)
        if x is _MISSING or not isinstance(x.value, dict):
            return _MISSING
        for k, v in x.value.items():
            if isinstance(k, str) and str(k) == key:
                return v
        return _MISSING
    return get


def _id_type(fname: str):
    get = _section_field("properties", fname)

    def type_of(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING or v is None:
            return v
        from .amqp.codec import amqp_type_of

        return amqp_type_of(v)
    return type_of


def _typed_id(fname: str, want: str):
    """Wireshark's ``amqp.message.messageId.string`` ...: the id when it has that type."""
    get = _section_field("properties", fname)
    kind = _id_type(fname)

    def typed(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING or v is None or kind(ev, ctx) != want:
            return _MISSING
        return v
    return typed


def _body_kind(ev, ctx):
    secs = _sections(ev)
    if secs is None:
        return _MISSING
    for x in secs:
        if isinstance(x, Described) and x.name in ("data", "amqp-sequence", "amqp-value"):
            return x.name
    return "none"


def _section_names(ev, ctx):
    secs = _sections(ev)
    if secs is None:
        return _MISSING
    return [(x.spec.name if isinstance(x, Composite) else x.name) or "unknown" for x in secs
            if isinstance(x, Described)]


def _field_kind(f) -> str:
    if f.primitive in ("*", "map", "list") or f.multiple:
        return ANY
    if f.primitive == "boolean":
        return BOOL
    if f.primitive in _NUM_PRIMITIVES:
        return NUM
    if f.primitive == "binary":
        return BYTES
    return STR


def _add_message_fields() -> None:
    def add(name, kind, get, doc):
        FIELDS[name] = Field(name, kind, get, doc)
        MESSAGE_FIELDS.add(name)

    add("message-id", ANY, _section_field("properties", "message-id"),
        "message-id of the message a transfer completes (ulong, uuid, binary or string)")
    add("message-id-type", STR, _id_type("message-id"), "type of message-id: ulong, uuid, binary, string")
    add("correlation-id", ANY, _section_field("properties", "correlation-id"),
        "correlation-id of the message a transfer completes")
    add("correlation-id-type", STR, _id_type("correlation-id"), "type of correlation-id")
    for section in ("header", "properties"):
        for f in COMPOSITES[section].fields:
            add(f"{section}.{f.name}", _field_kind(f), _section_field(section, f.name),
                f"the {f.name} field of the message's {section} section ({f.type})")
    for section in MAP_SECTIONS:
        add(section, ANY, _section(section), f"the message's {section} section (its keys)")
    add("body-kind", STR, _body_kind, "the message's body: data, amqp-sequence, amqp-value or none")
    add("message-sections", STR, _section_names, "the names of the message's sections, in order")


_add_message_fields()


# --------------------------------------------------------------------------- Wireshark's names

# Wireshark 4.0's AMQP 1.0 dissector names a performative's field ``amqp.performative.arguments.``
# + its spec name in camel case (``delivery-id``: ``deliveryId``), but for the names below; a SASL
# frame's ``amqp.sasl.`` + its own.  (Wireshark's names are Wireshark's: typed here, the spec's
# names come from the XML.)
_WS_ARGS = "amqp.performative.arguments."
_WS_RENAMED = {"idle-time-out": _WS_ARGS + "idleTimeout", "initial-delivery-count": _WS_ARGS + "initDeliveryCount",
               "offered-capabilities": "amqp.arguments.offeredCapabilities",
               "sasl-server-mechanisms": "amqp.sasl.mechanisms", "mechanism": "amqp.sasl.mechanism",
               "initial-response": "amqp.sasl.initResponse", "challenge": "amqp.sasl.challenge",
               "response": "amqp.sasl.response", "code": "amqp.sasl.saslCode",
               "additional-data": "amqp.sasl.addData"}
# (not aliased: Wireshark's ``..._sym`` names, e.g. amqp.sasl.mechanisms_sym, are a multiple
# field encoded as one symbol, not an array: an encoding, not a field)
# spec fields whose Wireshark field means something else: no alias (docs/filters.md says why)
WS_NOT_THE_SAME = {
    "state": "tshark 4.0 shows a delivery state as amqp.delivery-state.<name>, not always under "
             "arguments.state",
    "target": "tshark 4.0's arguments.target is absent for a coordinator target (amqp.tx.coordinator)",
    "error": "tshark 4.0's arguments.error is also the error of a rejected delivery state",
}


def _camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(w.capitalize() for w in rest)


def _performative_code(sasl: bool):
    """tshark's ``amqp.performative`` (AMQP frames) or ``amqp.sasl.method`` (SASL frames): the low
    byte of the descriptor code (0x10 open ... 0x18 close, 0x40 sasl-mechanisms ...)."""
    codes = {n: COMPOSITES[n].descriptor_code & 0xFF for n in (SASL_FRAMES if sasl else PERFORMATIVES)}

    def get(ev, ctx):
        if type(ev) is not Frame:
            return _MISSING
        c = codes.get(ev.pname)
        return _MISSING if c is None else c
    return get


def _frame_type(ev, ctx):
    return ev.type if type(ev) is Frame else _MISSING


def _header_part(what: str):
    def get(ev, ctx):
        if not isinstance(ev, ProtocolHeader):
            return _MISSING
        if what == "protocol":
            return "AMQP"  # (tshark: the header's first four bytes)
        if what == "id":
            return ev.protocol_id
        return ev.version[("major", "minor", "revision").index(what)]
    return get


def _endpoint(end: str, part: str, family: int):
    """ip.src / ipv6.dst / tcp.srcport ... of an event's ``ip:port`` (``[ip6]:port``)."""

    def get(ev, ctx):
        v = getattr(ev, end, None)
        if type(v) is not str:
            return _MISSING
        host, _, port = v.rpartition(":")
        six = host.startswith("[")
        if part == "port":
            return int(port) if port.isdigit() else _MISSING
        if six != (family == 6):
            return _MISSING
        return host[1:-1] if six else host
    return get


def _both_addresses(ev, ctx):
    """tshark's arguments.address.string: the source's and the target's address of an attach."""
    out = []
    for name in ("source", "target"):
        v = FIELDS[name].get(ev, ctx)
        if isinstance(v, Composite):
            i = v.spec.index.get("address")
            if i is not None and i < len(v.value) and v.value[i] is not None and v.value[i] is not ABSENT:
                out.append(v.value[i])
    return out if out else _MISSING


def _build_aliases() -> dict:
    """Wireshark's field name -> the Field answering for it (its ``alias_of``: ours)."""
    out = {}

    def alias(tname, ours, kind=None, get=None, doc=None, names=None):
        f = FIELDS[ours] if ours in FIELDS else None
        out[tname] = Field(tname, kind or f.kind, get or f.get, doc or f"Wireshark's name for {ours}",
                           choices=f.choices if f is not None and kind is None else None,
                           values=f.values if f is not None and kind is None else None, alias_of=ours,
                           names=names)

    for name, f in FIELDS.items():
        if not f.doc.startswith(f"the {name} field (") or name in WS_NOT_THE_SAME:
            continue
        tname = _WS_RENAMED.get(name) or _WS_ARGS + _camel(name)
        if f.kind == CHOICE:  # tshark compares and prints the encoded value (role: a boolean), or its name
            alias(tname, name, BOOL if CHOICE_PRIMITIVES.get(f.choices) == "boolean" else NUM, f.get,
                  names={n: code for code, n in CHOICES[f.choices].items()})
        else:
            alias(tname, name)
    alias("frame.number", "packet")
    alias("frame.time_epoch", "time")
    alias("amqp.channel", "channel")
    alias("amqp.length", "size")
    alias("amqp.doff", "doff")
    alias("amqp.performative", "performative", NUM, _performative_code(False),
          "the performative's descriptor code (16 open ... 24 close)",
          names={n: COMPOSITES[n].descriptor_code & 0xFF for n in PERFORMATIVES})
    alias("amqp.sasl.method", "performative", NUM, _performative_code(True),
          "the SASL frame's descriptor code (64 sasl-mechanisms ... 68 sasl-outcome)",
          names={n.replace("sasl-", "sasl.", 1): COMPOSITES[n].descriptor_code & 0xFF for n in SASL_FRAMES})
    alias("amqp.type", "type", NUM, _frame_type, "the frame type: 0 AMQP (heartbeats too), 1 SASL")
    alias("amqp.init.protocol", "protocol", STR, _header_part("protocol"), "AMQP, in every protocol header")
    alias("amqp.init.id", "protocol", NUM, _header_part("id"), "the protocol id of a header: 0 AMQP, 2 TLS, 3 SASL")
    for part in ("major", "minor", "revision"):
        alias(f"amqp.init.version_{part}", "protocol", NUM, _header_part(part), f"the header's {part} version")
    alias(_WS_ARGS + "address.string", "source.address", ANY, _both_addresses,
          "source.address and target.address, both")
    for end in ("src", "dst"):
        alias(f"ip.{end}", end, ADDR, _endpoint(end, "ip", 4), f"the IPv4 address of {end}")
        alias(f"ipv6.{end}", end, ADDR, _endpoint(end, "ip", 6), f"the IPv6 address of {end}")
        alias(f"tcp.{end}port", end, NUM, _endpoint(end, "port", 0), f"the TCP port of {end}")
    # the message's fields (Wireshark 4.0: amqp.message.*; its header fields there too)
    msg = "amqp.message."
    for ws, ours in (("messageId", "message-id"), ("correlationId", "correlation-id")):
        for suffix, amqp_type, kind in (("string", "string", STR), ("uint", "ulong", NUM), ("bytes", "binary", BYTES),
                                        ("guid", "uuid", STR)):
            alias(f"{msg}{ws}.{suffix}", ours, kind, _typed_id(ours, amqp_type), f"{ours} when it is a {amqp_type}")
    # (not aliased: tshark 4.0's amqp.message.messageId, correlationId, to and replyTo themselves, FT_NONE
    # fields it never fills; its expiryTime and creationTime, FT_ABSOLUTE_TIME written as a date)
    for ws, ours in (("userId", "user-id"), ("to.string", "to"), ("subject", "subject"),
                     ("replyTo.string", "reply-to"), ("contentType", "content-type"),
                     ("contentEncoding", "content-encoding"), ("groupId", "group-id"),
                     ("groupSequence", "group-sequence"), ("replyToGroupId", "reply-to-group-id")):
        alias(msg + ws, "properties." + ours)
    for ws, ours in (("durable", "durable"), ("priority", "priority"), ("ttl", "ttl"),
                     ("firstAcquirer", "first-acquirer")):
        alias(msg + ws, "header." + ours)
    return out


CHOICE_PRIMITIVES = {}  # a choice type's primitive type (role: boolean), filled below


def _choice_primitives() -> dict:
    from .amqp.spec import RESTRICTED

    return {n: r.primitive for n, r in RESTRICTED.items() if n in CHOICES}


CHOICE_PRIMITIVES.update(_choice_primitives())
ALIASES: dict = _build_aliases()
FIELDS.update({n: f for n, f in ALIASES.items() if n not in FIELDS})  # (frame.number: in FIELDS already)


def _norm(v):
    """A decoded value as the filter compares it: numbers, str, bytes, bool, or a list of them."""
    t = type(v)
    if v is None or t is bool or t is str or t is int or t is float or t is bytes or t is Decimal:
        return v
    for kind, plain in _PLAIN_KINDS:  # (the AMQP types: subclasses of the plain ones, in this order)
        if isinstance(v, kind):
            return plain(v)
    return _norm_structured(v)


# (AMQP type, the plain value the filter compares): a timestamp is its integer milliseconds
_PLAIN_KINDS = ((Timestamp, int), (bool, bool), (int, int), (float, float), (str, str),
                ((bytes, bytearray, memoryview), bytes))


def _norm_structured(v):
    """:func:`_norm` of a composite (a terminus by its address, an error by its condition, else its
    name), a described value (its name), a map (its keys), a list; anything else as text."""
    if isinstance(v, Composite):
        name = v.spec.name
        if name in ("source", "target"):
            a = v.field("address")
            return None if a is None else _norm(a)
        if name == "error":
            c = v.field("condition")
            return None if c is None else _norm(c)
        return name
    if isinstance(v, Described):
        return v.name or _norm(v.descriptor)
    if isinstance(v, dict):
        return [_norm(k) for k in v]
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return str(v)


def _sub(parent: Field, sub: str) -> Field:
    def get(ev, ctx):
        v = parent.get(ev, ctx)
        if v is _MISSING or v is None or not isinstance(v, Composite):
            return _MISSING
        i = v.spec.index.get(sub)
        if i is None or i >= len(v.value):
            return _MISSING
        return v.value[i]
    return Field(f"{parent.name}.{sub}", ANY, get, f"the {sub} field of {parent.name}")


def lookup(name: str, text: str = "", column: int = 1) -> Field:
    """The field called ``name`` (``_`` for ``-`` allowed; ``a.b`` for a field of a composite)."""
    f = FIELDS.get(name) or FIELDS.get(name.replace("_", "-"))
    if f is not None:
        return f
    head, dot, key = name.partition(".")
    section = head.replace("_", "-")
    if dot and section in MAP_SECTIONS and key:
        if len(key) >= 2 and key[0] == '"' and key[-1] == '"':  # (the quoted form, as -e may give it)
            key = _unescape(key[1:-1])
        f = Field(f"{section}.{key}", ANY, _map_key(section, key), f"the key {key!r} of the message's {section}")
        MESSAGE_FIELDS.add(f.name)
        return f
    if "." in name:
        head, _, sub = name.partition(".")
        parent = FIELDS.get(head) or FIELDS.get(head.replace("_", "-"))
        sub = sub.replace("_", "-")
        if parent is not None and parent.kind == ANY and sub in _SUB_FIELDS:
            return _sub(parent, sub)
    close = difflib.get_close_matches(name, list(FIELDS), n=1) if len(name) <= 64 else None
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    shown = name if len(name) <= _QUOTE_CHARS else name[:_QUOTE_CHARS] + "..."
    raise FilterError(text or name, column, f"unknown field {shown!r}{hint}")


def names_message_field(display_filter: str | None, names) -> bool:
    """Does the filter text or one of the ``-e`` names name a field of the message (then the frames
    must decode their messages)?  Names that are not fields are left to the filter's own errors."""
    words = list(names or ())
    if display_filter:
        try:
            words += [t.text for t in _tokens(display_filter) if t.kind == "word"]
        except FilterError:
            return False
    for w in words:
        try:
            f = lookup(w)
        except FilterError:
            continue
        if f.name in MESSAGE_FIELDS or f.alias_of in MESSAGE_FIELDS:
            return True
    return False


def field_list() -> list[str]:
    """``-G fields``: one line per field of ours, tab-separated as tshark's ``-G fields`` is:
    ``F``, our name, its kind, what it is, and its Wireshark names (comma-separated, or empty)."""
    names: dict = {}
    for tname, f in ALIASES.items():
        for ours in (("source", "target") if f.alias_of == "source.address" else (f.alias_of,)):
            names.setdefault(ours, []).append(tname)
    out = []
    for n, f in FIELDS.items():
        if f.alias_of is None:
            out.append("\t".join(("F", n, f.kind, f.doc, ",".join(sorted(set(names.get(n, ())))))))
    return out


# --------------------------------------------------------------------------- context


# the performatives that name a link by its handle: the handle field's index
_HANDLE_INDEX = {"flow": FLOW_HANDLE, "transfer": TRANSFER_HANDLE, "detach": DETACH_HANDLE}


def _handle(v):
    """A handle value as a key (an int), or None for anything else (a wrong type in a bad frame)."""
    return v if type(v) is int else (int(v) if isinstance(v, int) and not isinstance(v, bool) else None)


class FrameContext:
    """What fields need beyond one event: the capture's first time (``frame.time_relative``:
    ``t0``, or else ``first_time()`` when that is set, e.g. to the reader's first packet time) and
    the link names by handle, learnt from the attach frames (call :meth:`observe` on every event
    in order when ``needs_links``).  Bounded: at most ``MAX_LINKS`` names are kept."""

    MAX_LINKS = 1 << 16

    def __init__(self, t0: float | None = None, first_time=None, exact_time=None, first_exact=None):
        self.t0 = t0
        self.first_time = first_time  # () -> the capture's first packet time (or None), when t0 is None
        # exact times (a nanosecond capture's, which a float cannot hold): (ts, packet) -> (ns, digits)
        # or None, and () -> the first packet's (ns, digits) or None; without them, floats to the µs
        self.exact_time = exact_time
        self.first_exact = first_exact
        self.needs_links = False
        self._links: dict = {}

    def observe(self, ev) -> None:
        if type(ev) is Frame and ev.pname == "attach":
            values = ev.fields
            n = len(values)
            name = values[ATTACH_NAME] if ATTACH_NAME < n else None
            handle = values[ATTACH_HANDLE] if ATTACH_HANDLE < n else None
            handle = _handle(handle)
            if name is not None and name is not ABSENT and handle is not None:
                key = (ev.conn, ev.src, ev.channel, handle)
                links = self._links
                links.pop(key, None)
                if len(links) >= self.MAX_LINKS:
                    del links[next(iter(links))]
                links[key] = str(name)

    def link_name(self, fr) -> str | None:
        if fr.pname == "attach":
            v = fr.fields[ATTACH_NAME] if ATTACH_NAME < len(fr.fields) else None
            return None if v is None or v is ABSENT else str(v)
        i = _HANDLE_INDEX.get(fr.pname)
        if i is None:
            return None
        h = _handle(fr.fields[i]) if i < len(fr.fields) else None
        if h is None:
            return None
        return self._links.get((fr.conn, fr.src, fr.channel, h))


# --------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\[\s\S])*")
  | (?P<badstr>")
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!~(){},])
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w.:/-]))
  | (?P<keyed>(?:application|message|delivery)[-_](?:properties|annotations)\."(?:[^"\\]|\\[\s\S])*"
              |footer\."(?:[^"\\]|\\[\s\S])*")
  | (?P<word>[A-Za-z_0-9:][\w.:/-]*)
""", re.VERBOSE)

_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "contains": "contains",
             "matches": "matches", "~": "matches", "and": "and", "&&": "and", "or": "or", "||": "or",
             "not": "not", "!": "not", "in": "in", "==": "==", "!=": "!=", "<": "<", ">": ">", "<=": "<=",
             ">=": ">="}
_COMPARE = ("==", "!=", "<", ">", "<=", ">=", "contains", "matches")


class _Tok:
    __slots__ = ("kind", "text", "value", "col")

    def __init__(self, kind, text, value, col):
        self.kind, self.text, self.value, self.col = kind, text, value, col


def _unescape(body: str) -> str:
    return re.sub(r"\\([\s\S])", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), body)


def _number(text: str, s: str, col: int):
    """The value of the number literal ``s`` (bounded: its length, and integers to 64 bits)."""
    if len(s) > MAX_LITERAL_CHARS:
        raise FilterError(text, col, f"a number of {len(s)} characters (at most {MAX_LITERAL_CHARS})")
    body = s.lstrip("+-")
    if body[:2].lower() == "0x":
        v = int(body[2:], 16)
        if s.startswith("-"):
            v = -v
    elif any(c in s for c in ".eE"):
        return float(s)
    else:
        v = int(s)
    return v  # (a number field checks its range: hex of a binary field may be longer)


def _tokens(text: str) -> list:
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(text, MAX_FILTER_CHARS + 1,
                          f"a filter of {len(text)} characters (at most {MAX_FILTER_CHARS})")
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = pos + 1
        if m is None:
            hint = " (equality is '==')" if text[pos] == "=" else ""
            raise FilterError(text, col, f"unexpected character {text[pos]!r}{hint}")
        kind = m.lastgroup
        s = m.group()
        pos = m.end()
        if kind == "ws":
            continue
        if kind == "badstr":
            raise FilterError(text, col, "string not closed (a missing '\"')")
        if kind == "str":
            out.append(_Tok("value", s, _unescape(s[1:-1]), col))
        elif kind == "keyed":  # a map section's key, quoted: the field name with the key as it is
            out.append(_Tok("word", s, s, col))
        elif kind == "num":
            out.append(_Tok("value", s, _number(text, s, col), col))
        elif kind == "op":
            word = _WORD_OPS.get(s)
            out.append(_Tok("op" if word else "punct", s, word or s, col))
        else:
            low = s.lower()
            if low in _WORD_OPS:
                out.append(_Tok("op", s, _WORD_OPS[low], col))
            elif low in ("true", "false"):
                out.append(_Tok("value", s, low == "true", col))
            elif low == "null":
                out.append(_Tok("value", s, _NULL, col))
            else:
                out.append(_Tok("word", s, s, col))
    out.append(_Tok("end", "", None, len(text) + 1))
    return out


class _Null:
    def __repr__(self):
        return "null"


_NULL = _Null()


class _Parser:
    def __init__(self, text: str, find_field=None):
        self.text = text
        # name, text, column -> Field (or FilterError): the fields the filter may name (default: the frames')
        self.find_field = find_field or lookup
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0  # parentheses and ``not`` open around the current position
        self.fields: list = []
        self.notes: list = []  # what the user should know about the filter (a regex a future Python reads otherwise)

    def peek(self):
        return self.toks[self.i]

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def fail(self, tok, message):
        raise FilterError(self.text, tok.col, message)

    def parse(self):
        if self.peek().kind == "end":
            self.fail(self.peek(), "empty filter")
        node = self.expr()
        t = self.peek()
        if t.kind != "end":
            if t.text == ")":
                self.fail(t, "')' without a matching '('")
            self.fail(t, f"unexpected {t.text!r} (expected 'and', 'or' or the end)")
        return node

    def expr(self):
        terms = [self.term()]
        while self.peek().kind == "op" and self.peek().value == "or":
            self.take()
            terms.append(self.term())
        return _or(terms)

    def term(self):
        factors = [self.factor()]
        while self.peek().kind == "op" and self.peek().value == "and":
            self.take()
            factors.append(self.factor())
        return _and(factors)

    def nest(self, t):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(t, f"nested more than {MAX_DEPTH} deep (parentheses and 'not')")

    def factor(self):
        t = self.peek()
        if t.kind == "op" and t.value == "not":
            self.take()
            self.nest(t)
            inner = self.factor()
            self.depth -= 1
            return lambda ev, ctx: not inner(ev, ctx)
        if t.kind == "punct" and t.text == "(":
            self.take()
            self.nest(t)
            node = self.expr()
            close = self.peek()
            if not (close.kind == "punct" and close.text == ")"):
                self.fail(close, f"expected ')' to close the '(' at column {t.col}")
            self.take()
            self.depth -= 1
            return node
        if t.kind == "word":
            return self.test()
        if t.kind == "end":
            self.fail(t, "the filter ends where a field was expected")
        self.fail(t, f"expected a field name, not {t.text!r}")

    def test(self):
        ftok = self.take()
        field = self.find_field(ftok.text, self.text, ftok.col)
        self.fields.append(field)
        t = self.peek()
        if t.kind == "op" and t.value in _COMPARE:
            op = self.take()
            vt = self.peek()
            if vt.kind not in ("value", "word"):
                self.fail(vt, f"expected a value after {op.text!r}")
            self.take()
            return _compare(self, field, op, vt)
        if t.kind == "op" and t.value == "in":
            self.take()
            ob = self.peek()
            if not (ob.kind == "punct" and ob.text == "{"):
                self.fail(ob, "expected '{' after 'in'")
            self.take()
            tests = []
            while True:
                vt = self.peek()
                if vt.kind == "punct" and vt.text == "}":
                    self.take()
                    break
                if vt.kind == "punct" and vt.text == ",":
                    self.take()
                    continue
                if vt.kind not in ("value", "word"):
                    self.fail(vt, "expected a value or '}' in the set")
                self.take()
                tests.append(_compare(self, field, _Tok("op", "==", "==", vt.col), vt))
            if not tests:
                self.fail(ob, "empty set")
            return lambda ev, ctx: any(f(ev, ctx) for f in tests)
        get = field.get

        def exists(ev, ctx):
            v = get(ev, ctx)
            return v is not _MISSING and v is not None and v != []
        return exists


def _and(preds: list):
    """All of ``preds`` (a loop, not a nest of closures: a chain of any length costs no stack)."""
    if len(preds) == 1:
        return preds[0]
    preds = tuple(preds)

    def all_of(ev, ctx):
        for p in preds:
            if not p(ev, ctx):
                return False
        return True
    return all_of


def _or(preds: list):
    if len(preds) == 1:
        return preds[0]
    preds = tuple(preds)

    def any_of(ev, ctx):
        for p in preds:
            if p(ev, ctx):
                return True
        return False
    return any_of


def _utf8(s: str) -> bytes:
    """``s`` as UTF-8; a lone surrogate (undecodable bytes of a command line) as its own bytes."""
    try:
        return s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass")


def _hex_bytes(s: str) -> bytes | None:
    h = s[2:] if s[:2].lower() == "0x" else s
    h = h.replace(":", "").replace(" ", "")
    try:
        return bytes.fromhex(h) if h else None
    except ValueError:
        return None


def _regex(p: _Parser, vt: _Tok, lit: str):
    """The compiled regular expression of ``matches``; what ``re`` warns about it (a set a future
    Python reads differently) becomes one note of the filter, never Python's warning text."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        re.purge()  # (a pattern compiled before, from the cache, would say nothing)
        try:
            rx = re.compile(lit, re.IGNORECASE)
        except re.error as e:
            p.fail(vt, f"bad regular expression: {e}")
        except (OverflowError, RecursionError, ValueError) as e:  # a repeat count beyond re's limit, too deep
            p.fail(vt, f"regular expression beyond the limits of Python's re: {e}")
    for w in said[:1]:
        shown = lit if len(lit) <= 60 else lit[:60] + "..."
        why = " ".join(str(w.message).split())
        p.notes.append(f"the regular expression {shown!r} may be read differently by a future Python ({why}): "
                       "escape a literal [ - & ~ | inside [...] with a backslash")
    return rx


def _compare(p: _Parser, field: Field, op: _Tok, vt: _Tok):
    """The predicate of ``field OP value``, with the value checked against the field's kind."""
    opv = op.value
    lit = vt.value
    kind = field.kind
    is_str = vt.kind == "word" or isinstance(lit, str)
    if lit is _NULL:
        return _null_test(p, field, op, vt)
    if opv == "matches":
        return _matches_test(p, field, vt, is_str)
    if opv == "contains":
        return _contains_test(p, field, op, vt, is_str)
    if kind == ADDR:
        return _addr_test(p, field, op, vt)
    if field.names is not None and is_str and kind in (NUM, BOOL):  # a value by Wireshark's name
        if lit not in field.names:
            p.fail(vt, f"{field.name!r} is a number or one of {', '.join(field.names)}, not {vt.text}")
        lit = field.names[lit]
        is_str = False
    if kind == BYTES:
        return _bytes_test(p, field, op, vt, is_str)
    # ordered comparisons and equality
    if kind == NUM:
        lit, conv = _num_literal(p, field, vt, lit, is_str), None
    elif kind == BOOL:
        lit, conv = _bool_literal(p, field, op, vt, lit), None
    elif kind == CHOICE:
        conv = _choice_conv(p, field, vt, lit, is_str)
    else:  # STR or ANY
        lit, conv = _str_literal(p, field, op, vt, lit, is_str), None
    return _value_test(field.get, opv, lit, conv)


def _null_test(p: _Parser, field: Field, op: _Tok, vt: _Tok):
    """``field == null`` / ``!= null``: present and null, present and not null."""
    if op.value not in ("==", "!="):
        p.fail(vt, f"null can only be compared with == or !=, not {op.text!r}")
    want_null = op.value == "=="
    get = field.get

    def null_test(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING:
            return False
        return (v is None) == want_null
    return null_test


def _matches_test(p: _Parser, field: Field, vt: _Tok, is_str: bool):
    """``field matches "regex"`` (a binary value as Latin-1 text)."""
    if not is_str:
        p.fail(vt, "'matches' needs a string (a regular expression)")
    rx = _regex(p, vt, vt.value)

    def one(v):
        if type(v) is bytes:
            v = v.decode("latin-1")
        return type(v) is str and rx.search(v) is not None
    return _any(field.get, one)


def _contains_test(p: _Parser, field: Field, op: _Tok, vt: _Tok, is_str: bool):
    """``field contains value``: a substring, or bytes (hex, UTF-8) in a binary value."""
    kind = field.kind
    lit = vt.value
    if kind in (NUM, BOOL):
        p.fail(op, f"{field.name!r} is a {kind}: 'contains' needs a string field")
    if not is_str:
        lit = str(vt.text)
    needles = [lit]
    if kind in (BYTES, ANY):
        b = _hex_bytes(lit)
        needles = [x for x in (b, _utf8(lit), lit) if x]

    def one(v):
        t = type(v)
        if t is str:
            return lit in v
        if t is bytes:
            return any(type(n) is bytes and n in v for n in needles)
        return False
    return _any(field.get, one)


def _addr_test(p: _Parser, field: Field, op: _Tok, vt: _Tok):
    """An address, or a network (10.0.0.0/8), as tshark compares ip.src."""
    lit = vt.value
    if op.value not in ("==", "!="):
        p.fail(op, f"{field.name!r} is an address: only ==, !=, contains and matches apply")
    try:
        net = ipaddress.ip_network(str(vt.text if not isinstance(lit, str) else lit), strict=False)
    except ValueError:
        p.fail(vt, f"{field.name!r} is an address, not {vt.text}")
    eq = op.value == "=="
    get = field.get

    def addr_test(ev, ctx):
        v = get(ev, ctx)
        if type(v) is not str:
            return False
        try:
            return (ipaddress.ip_address(v) in net) == eq
        except ValueError:
            return False
    return addr_test


def _bytes_test(p: _Parser, field: Field, op: _Tok, vt: _Tok, is_str: bool):
    """A binary field ``==`` / ``!=`` a value given as hex digits or as text (UTF-8)."""
    lit = vt.value if is_str else vt.text  # digits: hex
    cands = {x for x in (_hex_bytes(lit), _utf8(lit)) if x is not None}
    if op.value not in ("==", "!="):
        p.fail(op, f"{field.name!r} is binary: only ==, !=, contains and matches apply")
    eq = op.value == "=="
    get = field.get

    def bytes_test(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING or v is None:
            return False
        v = _norm(v)  # a wrong type in a bad frame (a number, a list) is never equal
        return (type(v) is bytes and v in cands) == eq
    return bytes_test


def _num_literal(p: _Parser, field: Field, vt: _Tok, lit, is_str: bool):
    """The number a numeric field is compared with (a Decimal for the exact times)."""
    if is_str or type(lit) is bool:
        p.fail(vt, f"{field.name!r} is a number, not {vt.text}")
    if field.get is _time_epoch or field.get is _time_relative:  # exact decimal comparisons
        try:
            lit = Decimal(lit) if type(lit) is int else Decimal(vt.text)
        except (InvalidOperation, ValueError):
            lit = Decimal(lit) if lit == lit else lit  # (nan stays a float: never equal)
        if type(lit) is Decimal and not lit.is_finite():
            lit = float(lit)
    if type(lit) is int and not -_INT_LIMIT < lit < _INT_LIMIT:
        s = vt.text
        p.fail(vt, f"{s[:40]}{'...' if len(s) > 40 else ''} is out of range (AMQP integers have at most 64 bits)")
    return lit


def _bool_literal(p: _Parser, field: Field, op: _Tok, vt: _Tok, lit) -> bool:
    if op.value not in ("==", "!="):
        p.fail(op, f"{field.name!r} is a boolean: only == and != apply")
    if type(lit) is not bool and lit not in (0, 1):
        p.fail(vt, f"{field.name!r} is a boolean: true or false, not {vt.text}")
    return bool(lit)


def _choice_conv(p: _Parser, field: Field, vt: _Tok, lit, is_str: bool):
    """A choice field compared with a name: the field's values by their names (None: by number)."""
    if not is_str:
        return None
    names = CHOICES[field.choices]
    if lit not in names.values():
        p.fail(vt, f"{field.name!r} is one of {', '.join(names.values())}, not {vt.text}")
    choices = field.choices

    def conv(v, choices=choices):
        return choice_name(choices, v)
    return conv


def _str_literal(p: _Parser, field: Field, op: _Tok, vt: _Tok, lit, is_str: bool):
    """The value a string (or any) field is compared with; a value the field never has is an error."""
    if field.kind == STR and not is_str:
        lit = vt.text  # 123 as a string field's value: the text
    if field.values is not None and op.value in ("==", "!=") and lit not in field.values:
        close = difflib.get_close_matches(str(lit), list(field.values), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        p.fail(vt, f"{field.name!r} is never {vt.text}{hint}")
    return lit


def _value_test(get, opv: str, lit, conv):
    """The predicate of an ordered comparison or an equality (``!=``: present, and no value equals)."""
    cmp = _OPS[opv]
    norm = _norm

    def one(v):
        if conv is not None:
            v = conv(v)
        else:
            v = norm(v)
        if type(v) is list:
            return any(_cmp_ok(cmp, x, lit) for x in v)
        return _cmp_ok(cmp, v, lit)

    if opv == "!=":  # present, and no value equals
        eq = _OPS["=="]

        def ne(ev, ctx):
            v = get(ev, ctx)
            if v is _MISSING or v is None:
                return False
            v = conv(v) if conv is not None else norm(v)
            vs = v if type(v) is list else [v]
            return bool(vs) and not any(_cmp_ok(eq, x, lit) for x in vs)
        return ne

    def test(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING or v is None:
            return False
        return one(v)
    return test


def _cmp_ok(cmp, v, lit) -> bool:
    if v is None:
        return False
    tv, tl = type(v), type(lit)
    if (tv is str) != (tl is str):  # a string and a number never compare
        return False
    if (tv is bool) != (tl is bool) and cmp is not _OPS["=="] and cmp is not _OPS["!="]:
        return False
    try:
        return cmp(v, lit)
    except (TypeError, ArithmeticError):  # (a decimal time and a NaN)
        return False


def _any(get, one):
    def test(ev, ctx):
        v = get(ev, ctx)
        if v is _MISSING or v is None:
            return False
        v = _norm(v)
        if type(v) is list:
            return any(one(x) for x in v)
        return one(v)
    return test


_OPS = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


class DisplayFilter:
    """A compiled display filter: ``match(event)`` says whether a frames line shows the event.

    ``context``: the :class:`FrameContext` the fields use (link names, the first time); the
    filter feeds it every event it is asked about, so call :meth:`match` on every event in order.
    """

    def __init__(self, text: str, predicate, fields: list, context: FrameContext | None = None,
                 notes: list | None = None):
        self.text = text
        self._pred = predicate
        self.fields = fields
        self.notes = notes or []  # one line each: what the user should know about the filter
        self.context = context if context is not None else FrameContext()
        if any(f.get is _link for f in fields):
            self.context.needs_links = True

    def match(self, ev) -> bool:
        ctx = self.context
        if ctx.needs_links:
            ctx.observe(ev)
        return bool(self._pred(ev, ctx))


class ParsedFilter(NamedTuple):
    """A filter's text parsed: ``predicate(record, ctx) -> value``, the fields it names and the
    notes the user should see (one line each)."""
    predicate: Callable
    fields: list
    notes: list


def parse_filter(text: str, find_field=None) -> ParsedFilter:
    """Parse ``text`` with the fields ``find_field(name, text, column)`` gives (default:
    :func:`lookup`, the frames' fields; a table's columns for a row filter);
    :class:`FilterError` says where it is wrong."""
    p = _Parser(text, find_field)
    pred = p.parse()
    return ParsedFilter(pred, p.fields, p.notes)


def compile_filter(text: str, context: FrameContext | None = None) -> DisplayFilter:
    """Parse ``text``; :class:`FilterError` says where it is wrong."""
    parsed = parse_filter(text)
    return DisplayFilter(text, parsed.predicate, parsed.fields, context, parsed.notes)


# --------------------------------------------------------------------------- -T fields


_ESCAPES = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}  # tshark 4.0's -T fields: these only


def field_text(v) -> str:
    """A field value as ``-T fields`` prints it (tshark's conventions: booleans 1/0, binary as
    plain hex, several values joined by ',', absent and null empty, a newline in a string as
    ``\\n``: one line per frame)."""
    if v is _MISSING or v is None:
        return ""
    v = _norm(v)
    if type(v) is list:
        return ",".join(field_text(x) for x in v)
    if v is True:
        return "1"
    if v is False:
        return "0"
    if type(v) is bytes:
        return v.hex()
    if type(v) is float or type(v) is Decimal:
        return f"{v:.9f}"
    v = str(v)
    return v.translate(_ESCAPES) if ("\n" in v or "\r" in v or "\t" in v) else v


#: tshark's ``-E`` options of ``-T fields`` and the values each takes (None: any one character)
FIELD_OPTIONS = {"header": ("y", "n"), "separator": None, "occurrence": ("f", "l", "a"), "aggregator": None,
                 "quote": ("d", "s", "n"), "bom": ("y", "n")}


def field_options(specs) -> dict:
    """``-E key=value`` texts as keyword arguments of :class:`FieldPrinter` (tshark's meanings:
    ``separator=/t|/s|C`` and ``aggregator=,|/s|C`` take their first character, ``/t`` a tab and
    ``/s`` a space); :class:`ValueError` names the one that is wrong."""
    out: dict = {}
    for spec in specs or ():
        key, eq, value = spec.partition("=")
        if not eq or key not in FIELD_OPTIONS:
            raise ValueError(f"-E {spec}: not a field output option (key=value; the keys: "
                             f"{', '.join(FIELD_OPTIONS)})")
        allowed = FIELD_OPTIONS[key]
        if allowed is not None and value not in allowed:
            raise ValueError(f"-E {spec}: {key} is {' or '.join(allowed)}")
        if allowed is None:
            if not value:
                raise ValueError(f"-E {spec}: {key} needs a character (/t a tab, /s a space)")
            value = {"/t": "\t", "/s": " "}.get(value[:2], value[0])
        out[key] = value
    return out


class FieldPrinter:
    """``-T fields -e NAME ...``: one line per frame event, the fields' values separated by a tab
    (tshark's default ``-E separator=/t``, no quoting, no header).  Choice-typed fields show
    their names (role: sender / receiver).  ``-E`` (:func:`field_options`): ``separator``,
    ``occurrence`` (f, l or a: the first, last or every value of a field with several),
    ``aggregator`` (between them; ``,``), ``quote`` (d, s or n: each non-empty value in double
    or single quotes, or none), ``header`` (y: :meth:`header` is the names' line) and ``bom``."""

    def __init__(self, names: list[str], context: FrameContext | None = None, separator: str = "\t",
                 time_text=None, occurrence: str = "a", aggregator: str = ",", quote: str = "n",
                 header: str = "n", bom: str = "n"):
        # (an unknown name's error quotes it printable and cut short: one line)
        self.names = list(names)
        self.fields = [lookup(n, _printable(n if len(n) <= _QUOTE_CHARS else n[:_QUOTE_CHARS] + "..."), 1)
                       for n in names]
        self.context = context if context is not None else FrameContext()
        self.separator = separator
        self.time_text = time_text  # (event) -> the time column's text, for -e time under -t
        self.occurrence = occurrence
        self.aggregator = aggregator
        self.quote = {"d": '"', "s": "'"}.get(quote, "")
        self.with_header = header == "y"
        self.bom = bom == "y"
        self.plain = occurrence == "a" and aggregator == "," and not self.quote
        if any(f.get is _link for f in self.fields):
            self.context.needs_links = True

    def header(self) -> str:
        """What is written before the lines: ``bom=y`` a UTF-8 byte-order mark, ``header=y`` the
        names' line (tshark's way: the names as given, never quoted); else nothing."""
        bom = "\ufeff" if self.bom else ""
        return bom + (self.separator.join(self.names) + "\n" if self.with_header else "")

    def _values(self, v) -> str:
        """A value with several (a list) by ``occurrence`` and ``aggregator``; quoted if asked."""
        if v is not _MISSING and v is not None:
            v = _norm(v)
            if type(v) is list:
                if v and self.occurrence != "a":
                    v = [v[0] if self.occurrence == "f" else v[-1]]
                text = self.aggregator.join(field_text(x) for x in v)
            else:
                text = field_text(v)
        else:
            text = ""
        q = self.quote
        return f"{q}{text}{q}" if q and text else text

    def line(self, ev) -> str:
        ctx = self.context
        out = []
        plain = self.plain
        for f in self.fields:
            if f.name == "time" and self.time_text is not None and getattr(ev, "ts", None) is not None:
                text = self.time_text(ev)
                out.append(text if plain or not self.quote else f"{self.quote}{text}{self.quote}")
                continue
            v = f.get(ev, ctx)
            if f.kind == CHOICE and v is not _MISSING and v is not None:
                name = choice_name(f.choices, v)
                text = name if name is not None else field_text(v)
                out.append(text if plain or not self.quote or not text else f"{self.quote}{text}{self.quote}")
            elif plain:
                out.append(field_text(v))
            else:
                out.append(self._values(v))
        return self.separator.join(out)
