"""Turn decoded events into JSON-able dicts, one-line summaries and detail trees.

JSON value conventions (documented in docs/filters.md):

* binary -> lowercase hex string; decimal32/64/128 -> hex of their raw bits;
* symbol, string, char -> string; uuid -> its canonical text;
* timestamp -> integer milliseconds since the epoch;
* float/double -> number (NaN and infinities as the strings "NaN", "Infinity", "-Infinity");
* map -> object whose keys are the JSON text of non-string keys;
* a composite inside a value -> object with "@type" and its present fields;
* other described values -> {"@descriptor": ..., "@value": ...} ("@type" when the spec names it);
* fields of a restricted type with choices (role, settle modes, sasl code, ...) -> the choice name.

Absent fields are left out; an explicit null is ``null``; spec defaults of fields
left absent/null are listed under ``"defaults"`` (never mixed into ``"fields"``).
"""

from __future__ import annotations

import datetime as _dt

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.framing import FRAME_SASL, Frame, ProtocolHeader, StreamNote
from .netdetail import packet_layers
from ..events import PacketNote
from ..times import delta
from ..amqp.codec import (
    ABSENT,
    Array, Byte, Composite, Described, Int, Long, Map, Short, Symbol, Timestamp, UByte, UInt, ULong, UShort,
    amqp_type_of,
)
from ..amqp import _spec
from ..amqp.codec import DEFAULT_MAX_DEPTH, DEFAULT_MAX_ELEMENTS, Reader
from ..amqp.spec import BY_DESCRIPTOR, CHOICES, COMPOSITES, CompositeSpec, FieldSpec, choice_name
from ..errors import DissectError
from ..amqp.values import field_json, json_value, short_value

if not cython.compiled:  # (compiled: C functions, cimported in the .pxd)
    from ..amqp.codec import int_at, uint_at

_SHOWN = (Frame, ProtocolHeader, StreamNote, PacketNote)  # the events that have a frames line

# --------------------------------------------------------------------------- JSON


# The functions below give the JSON of values.json_value / composite_fields / composite_defaults
# (the conventions' one definition) with the common cases inline: plain leaves, composites
# through a per-spec layout, maps with string keys; everything else goes to values.json_value.

_JSON_LAYOUTS: dict = {}  # composite name -> (spec, fields, (field type has choices, ...), defaults)
_IMMUTABLE = (type(None), bool, int, float, str)


def _json_layout(spec) -> tuple:
    hit = _JSON_LAYOUTS.get(spec.name)
    if hit is not None and hit[0] is spec:
        return hit
    fields = spec.fields
    choices = tuple(f.type in CHOICES for f in fields)
    # (index, name, JSON of the default or the FieldSpec when that JSON is not immutable)
    defaults = []
    for i, f in enumerate(fields):
        if f.has_default:
            j = field_json(f, f.default)
            defaults.append((i, f.name, j if type(j) in _IMMUTABLE else f, type(j) not in _IMMUTABLE))
    hit = (spec, fields, choices, tuple(defaults))
    if len(_JSON_LAYOUTS) < 4096:
        _JSON_LAYOUTS[spec.name] = hit
    return hit


def _fields_json(c) -> dict:
    """``values.composite_fields(c)``."""
    _, fields, choices, _ = _json_layout(c.spec)
    out = {}
    values = c.value
    n = len(values)
    nf = len(fields)
    for i in range(n if n < nf else nf):
        v = values[i]
        if v is None:
            out[fields[i].name] = None
        elif choices[i]:
            out[fields[i].name] = field_json(fields[i], v)
        else:
            out[fields[i].name] = _json(v)
    if n > nf:
        out["@extra"] = [json_value(x) for x in values[nf:]]
    return out


def _defaults_json(c) -> dict:
    """``values.composite_defaults(c)``."""
    _, _, _, defaults = _json_layout(c.spec)
    out = {}
    values = c.value
    n = len(values)
    for i, name, j, computed in defaults:
        if i >= n or values[i] is None:
            out[name] = field_json(j, j.default) if computed else j
    return out


def _json(v):
    """``values.json_value(v)``."""
    t = type(v)
    if t is str or t is int or t is bool or v is None:
        return v
    if t in _PLAIN_INTS or t is Timestamp:
        return int(v)
    if t is Symbol:
        return str(v)
    if t is bytes:
        return v.hex()
    if t is Composite:
        d = {"@type": v.spec.name}
        d.update(_fields_json(v))
        return d
    if t is Map:
        d = {}
        for k, x in v.items():
            if type(k) is str or type(k) is Symbol:
                d[str(k)] = _json(x)
            else:  # a key that is not a string: the general rules
                return json_value(v)
        return d
    if t is list:
        return [_json(x) for x in v]
    return json_value(v)


def message_json(sections: list) -> dict:
    """Message sections keyed by section name; body sections are lists (one item per section)."""
    out: dict = {}
    for s in sections:
        if isinstance(s, Composite):
            out[s.spec.name] = _fields_json(s)
        elif isinstance(s, Described) and s.name:
            if s.name in ("data", "amqp-sequence"):
                out.setdefault(s.name, []).append(_json(s.value))
            else:
                out[s.name] = _json(s.value)
        else:
            out.setdefault("unknown-sections", []).append(_json(s))
    return out


def event_json(ev) -> dict | None:
    """The JSON object of a header, frame or stream note (None for other events)."""
    if isinstance(ev, Frame):
        return _frame_json(ev)
    if isinstance(ev, ProtocolHeader):
        return _header_json(ev)
    if isinstance(ev, StreamNote):
        return _note_json(ev)
    return None


def _frame_json(ev) -> dict:
    """:func:`event_json` of a frame."""
    d = _event_head(ev)
    d["channel"] = ev.channel
    d["type"] = ev.kind
    d["performative"] = ev.name
    d["fields"] = {}
    d["size"] = ev.size
    d["doff"] = ev.doff
    if ev.first_packet != ev.packet:
        d["first_packet"] = ev.first_packet
    p = ev.performative
    if isinstance(p, Composite):
        d["fields"] = _fields_json(p)
        defaults = _defaults_json(p)
        if defaults:
            d["defaults"] = defaults
    elif isinstance(p, Described):
        d["fields"] = {"@descriptor": json_value(p.descriptor), "@value": json_value(p.value)}
    if ev.name == "transfer":
        d["payload_size"] = len(ev.payload)
    dl = ev.delivery
    if dl is not None:
        _delivery_json_into(d, ev, dl)
    if ev.notes:
        d["notes"] = [n.as_dict() for n in ev.notes]
    return d


def _delivery_json_into(d: dict, ev, dl) -> None:
    """Add to ``d`` (the JSON object of frame ``ev``) what ``ev``'s delivery ``dl`` tells: its frames,
    size, first packet, and its message (or why there is none)."""
    d["delivery_frames"] = dl.frames
    d["message_size"] = dl.message_size
    if dl.first_packet != ev.packet:
        d["delivery_first_packet"] = dl.first_packet
    if dl.aborted:
        d["aborted"] = True
    else:
        sections = dl.sections()
        if sections is not None:
            d["message"] = message_json(sections)
        elif dl.error:
            d["message_error"] = dl.error


def _header_json(ev) -> dict:
    """:func:`event_json` of a protocol header."""
    d = _event_head(ev)
    d["channel"] = None
    d["type"] = "header"
    d["performative"] = None
    d["fields"] = {"protocol": ev.name, "protocol-id": ev.protocol_id, "version": ".".join(map(str, ev.version))}
    if ev.notes:
        d["notes"] = [n.as_dict() for n in ev.notes]
    return d


def _note_json(ev) -> dict:
    """:func:`event_json` of a stream note."""
    d = _event_head(ev)
    d["channel"] = None
    d["type"] = "note"
    d["performative"] = None
    d["fields"] = {}
    d["notes"] = [ev.note.as_dict()]
    d["skipped"] = ev.skipped
    return d


def _event_head(ev) -> dict:
    """The keys every event's JSON object starts with, in this order: its packet, its time (epoch
    seconds, the nearest float; and exact, in integer nanoseconds), its endpoints, its connection."""
    return {
        "packet": ev.packet,
        "time": None if ev.ts is None else ev.ts / 1_000_000_000,
        "time_ns": ev.ts,
        "src": ev.src,
        "dst": ev.dst,
        "connection": ev.conn,
    }


# --------------------------------------------------------------------------- summary

_KEY_FIELDS = {
    "open": ("container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out"),
    "begin": ("remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max"),
    "attach": ("name", "handle", "role", "snd-settle-mode", "rcv-settle-mode", "source", "target",
               "initial-delivery-count"),
    "flow": ("handle", "delivery-count", "link-credit", "available", "drain", "echo", "next-incoming-id",
             "incoming-window", "next-outgoing-id", "outgoing-window"),
    "transfer": ("handle", "delivery-id", "delivery-tag", "message-format", "settled", "more", "state",
                 "resume", "aborted"),
    "disposition": ("role", "first", "last", "settled", "state"),
    "detach": ("handle", "closed", "error"),
    "end": ("error",),
    "close": ("error",),
    "sasl-mechanisms": ("sasl-server-mechanisms",),
    "sasl-init": ("mechanism", "hostname"),
    "sasl-challenge": (),
    "sasl-response": (),
    "sasl-outcome": ("code",),
}


class _SummaryField:
    """One key field of a performative's summary: its ``index`` in the field list, ``"name="``,
    its FieldSpec, ``plain`` (an integer value is shown as a number: the type has no choices) and
    ``star`` (the field's type is "*")."""

    __slots__ = ("index", "name_eq", "spec", "plain", "star")

    def __init__(self, index: int, name_eq: str, spec: FieldSpec, plain: bool, star: bool):
        self.index = index
        self.name_eq = name_eq
        self.spec = spec
        self.plain = plain
        self.star = star


def _summary_fields():
    """performative -> (:class:`_SummaryField`, ...) of its key fields."""
    out = {}
    for perf, names in _KEY_FIELDS.items():
        spec = COMPOSITES[perf]
        fields = []
        for n in names:
            f = spec.fields[spec.index[n]]
            fields.append(_SummaryField(spec.index[n], n + "=", f, CHOICES.get(f.type) is None, f.type == "*"))
        out[perf] = tuple(fields)
    return out


_SUMMARY_FIELDS = _summary_fields()
_PLAIN_INTS = frozenset({UByte, UShort, UInt, ULong, Byte, Short, Int, Long})
_INT_TEXTS = tuple(str(i) for i in range(256))  # the text of the small integers (handles, formats, ...)


def frame_summary(ev) -> str:
    """Info text of a header or frame, in the spirit of tshark's Info column."""
    if type(ev) is not Frame:
        if isinstance(ev, ProtocolHeader):
            return f"Protocol-Header {ev.name}"
        if isinstance(ev, StreamNote):
            return f"[{ev.note.severity}] {ev.note.message}"
        return _summary_text(ev)  # (a frame-like object: its kind and performative)
    out = []
    _summary_into(out, ev)
    return "".join(out)


def _summary_text(ev) -> str:
    if ev.kind == "heartbeat":
        return "(empty frame: heartbeat)"
    p = ev.performative
    if p is None:
        return "(undecodable frame)"
    if not isinstance(p, Composite):
        return f"described {p.descriptor!r}"
    out = []
    _fields_into(out, p.spec.name, p.value)
    return "".join(out)


def _summary_into(out: list, fr) -> None:
    """Append the pieces of ``frame_summary(fr)`` (``fr`` a Frame) to ``out``."""
    if fr.type != FRAME_SASL and fr.size == fr.doff * 4:
        out.append("(empty frame: heartbeat)")
        return
    if fr._performative is None and fr.pname is not None:
        # scanned (transfer, flow, disposition): plain values, a delivery state by its name
        pname, values = fr.pname, fr.fields
    else:
        p = fr.performative
        if p is None:
            out.append("(undecodable frame)")
            return
        if not isinstance(p, Composite):
            out.append(f"described {p.descriptor!r}")
            return
        pname, values = p.spec.name, p.value
    _fields_into(out, pname, values)
    if pname == "transfer":
        out.append(" payload=")
        out.append(str(fr.payload_size))
    dl = fr.delivery
    if dl is not None:
        if dl.aborted:
            out.append(f" [aborted after {dl.frames} frames]")
        elif dl.frames > 1:
            out.append(f" [message reassembled: {dl.frames} frames, {dl.message_size} bytes]")


def _fields_into(out: list, pname: str, values) -> None:
    """``pname(name=value, ...)``: the performative's summary fields that are present."""
    out.append(pname)
    out.append("(")
    sep = ""
    n = len(values)
    fields = _SUMMARY_FIELDS.get(pname)
    if fields is None:
        fields = ()
    for sf in fields:
        i = sf.index
        if i >= n:
            continue
        v = values[i]
        if v is None or v is ABSENT:
            continue
        out.append(sep)
        out.append(sf.name_eq)
        sep = ", "
        t = type(v)
        if sf.plain:  # a type without choices: the common values inline, as short_value shows them
            if t is int:  # the common case: counts, ids, windows, handles
                out.append(_INT_TEXTS[v] if 0 <= v < 256 else str(v))
                continue
            if t in _PLAIN_INTS:
                out.append(str(int(v)))
                continue
            if t is bool:
                out.append("true" if v else "false")
                continue
            if t is bytes:
                out.append("0x" + (v.hex() if len(v) <= 30 else v[:30].hex() + "…"))
                continue
        if sf.star and t is str:
            out.append(v + "()")  # a scanned delivery state: an empty list of that composite
        else:
            out.append(short_value(sf.spec, v))
    out.append(")")


_KIND_LAYER = {"header": "AMQP", "amqp": "AMQP", "sasl": "SASL", "heartbeat": "AMQP", "note": "----"}


class SummaryLines:
    """The ``frames`` lines of a capture's events, times relative to ``t0``.

    Keeps what repeats from line to line (the packet and time column of the frames of one
    packet, the peers and channel column of a direction) so a line costs little more than
    its performative's fields."""

    __slots__ = ("t0", "time_text", "errors", "chunk", "begin", "_packet", "_ts", "_head", "_peers", "_lead",
                 "_lead_head", "_lead_peers")

    def __init__(self, t0: int, time_text=None, errors: str = "strict"):
        self.t0 = t0
        # time_text(ts, packet) -> the time column's text (tshark's -t formats, at the capture's
        # resolution); None: seconds since t0, to the microsecond
        self.time_text = time_text
        self.errors = errors  # the error handler of the UTF-8 that add_utf8 writes (the output's)
        self.chunk = []  # what add_line appends
        # None, or begin(self), called once before the first add_line: sets t0 and time_text when
        # they are known only once reading started
        self.begin = None
        self._packet = None
        self._ts = None
        self._head = ""
        self._peers = {}
        self._lead = b""  # add_utf8: the UTF-8 of the last head and peers, and the two texts
        self._lead_head = None
        self._lead_peers = None

    def line(self, ev) -> str | None:
        """The ``frames`` line of an event (None for events that have none): packet, time since
        ``t0``, peers, layer, channel, the performative's summary and the notes worth showing."""
        if type(ev) is not Frame or ev.packet is None or ev.ts is None:
            return summary_line(ev, self.t0, self.time_text)
        fr = ev
        peers = self._head_peers(fr)
        out = [self._head, peers]
        _summary_into(out, fr)
        _notes_into(out, fr.notes)
        return "".join(out).rstrip()

    def add_utf8(self, chunk: list, ev) -> None:
        """Append ``line(ev)`` and a newline to ``chunk`` as UTF-8 (nothing for an event without a
        line), in pieces: the head and peers (their bytes made once for the frames of one packet
        and direction), the rest of the line, the newline.  The rest is mostly ASCII: built as
        text apart from the peers' arrow, it is copied, not widened, and its UTF-8 is a copy."""
        if type(ev) is not Frame or ev.packet is None or ev.ts is None:
            text = summary_line(ev, self.t0, self.time_text)
            if text is not None:
                chunk.append(text.encode("utf-8", self.errors))
                chunk.append(b"\n")
            return
        fr = ev
        peers = self._head_peers(fr)
        if peers is not self._lead_peers or self._head is not self._lead_head:
            self._lead_head = self._head
            self._lead_peers = peers
            self._lead = (self._head + peers).encode("utf-8", self.errors)
        out = []
        _summary_into(out, fr)
        _notes_into(out, fr.notes)
        chunk.append(self._lead)
        # (the rest always has a character other than white space: its rstrip is the line's)
        chunk.append("".join(out).rstrip().encode("utf-8", self.errors))
        chunk.append(b"\n")

    def add_line(self, ev) -> None:
        """``add_utf8(self.chunk, ev)``: the sink of a loop that hands the events over one by one
        (the dissector's pump, which runs in C when compiled)."""
        begin = self.begin
        if begin is not None:
            self.begin = None
            begin(self)
        self.add_utf8(self.chunk, ev)

    def _head_peers(self, fr) -> str:
        """The peers column of frame ``fr`` (packet and time known), with :attr:`_head` made its
        packet and time column."""
        packet = fr.packet
        ts = fr.ts
        if packet != self._packet or ts != self._ts:
            self._packet = packet
            self._ts = ts
            if self.time_text is None:
                self._head = "%6d %s " % (packet, _rel(ts - self.t0))
            else:
                self._head = "%6d %s " % (packet, self.time_text(ts, packet))
        key = (fr.src, fr.dst, fr.type, fr.channel)
        peers = self._peers.get(key)
        if peers is None:
            channel = fr.channel
            ch = f"ch {channel:<3}" if channel is not None else "      "
            peers = f"{fr.src} → {fr.dst} {_KIND_LAYER[fr.kind]} {ch} "
            if len(self._peers) >= 65536:  # many connections and channels: start over
                self._peers.clear()
            self._peers[key] = peers
        return peers


def _notes_into(out: list, notes) -> None:
    """Append the notes worth showing of a frame's line (not the chat) to ``out``."""
    if notes:
        out.append("  ")
        out.append(" ".join([f"[{n.severity}: {n.message}]" for n in notes if n.severity != "chat"]))


def _rel(ns: int) -> str:
    """Seconds since the first packet (nanoseconds in), six decimals, right-aligned in 11 columns;
    exact: the digits of the integer, not of a float (``"%11s" % delta(ns, 6)``)."""
    if ns >= 0:  # (the common case, without a call: the whole seconds right-aligned in the 4 columns
        # before the point, the microseconds truncated)
        us = ns // 1000
        return "%4d.%06d" % (us // 1_000_000, us % 1_000_000)
    return "%11s" % delta(ns, 6)


def summary_line(ev, t0: int, time_text=None) -> str | None:
    """The ``frames`` line of an event (None for events that have none): packet, time since
    ``t0`` (or ``time_text(ts, packet)``), peers, layer, channel, the performative's summary and the
    notes worth showing."""
    if isinstance(ev, PacketNote):
        t = _rel(ev.ts - t0) if time_text is None else time_text(ev.ts, ev.packet)
        return f"{ev.packet:>6} {t} [{ev.note.severity}] {ev.note.message}"
    if not isinstance(ev, _SHOWN):
        return None
    channel = getattr(ev, "channel", None)
    ch = f"ch {channel:<3}" if channel is not None else "      "
    packet = ev.packet if ev.packet is not None else "end"
    if time_text is not None and ev.ts is not None:
        ts = time_text(ev.ts, ev.packet)
    else:
        ts = _rel(ev.ts - t0) if ev.ts is not None else _rel(0)
    line = f"{packet:>6} {ts} {ev.src} → {ev.dst} {_KIND_LAYER[ev.kind]} {ch} {frame_summary(ev)}"
    notes = getattr(ev, "notes", None)
    if notes:
        line += "  " + " ".join(f"[{n.severity}: {n.message}]" for n in notes if n.severity != "chat")
    return line.rstrip()


# --------------------------------------------------------------------------- detail tree


def _fmt_ts(ts: float) -> str:
    """UTC date and time of epoch seconds ``ts``; outside the years 1–9999 (what a datetime
    holds) it says so, and the caller shows the raw number beside it."""
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    except (OverflowError, ValueError, OSError):
        return "beyond the years 1-9999 a datetime holds"


_PADS = tuple("    " * i for i in range(64))

# leaf values the tree shows in one line without looking further: type -> AMQP type name
_LEAF_TYPES = {
    type(None): "null", bool: "boolean", str: "string", Symbol: "symbol", bytes: "binary",
    UByte: "ubyte", UShort: "ushort", UInt: "uint", ULong: "ulong", Byte: "byte", Short: "short", Int: "int",
    Long: "long",
}


def value_lines(label: str, v, indent: int, f: FieldSpec | None = None, default: bool = False) -> list[str]:
    """Lines of a value in the detail tree: 'label (type): value' with children indented."""
    out: list[str] = []
    _value_into(out, label, v, indent, f, default, _choice_type(f))
    return _lines(out)


def _choice_type(f) -> str | None:
    """The restricted type of field ``f`` whose values have names (CHOICES), else None."""
    return f.type if f is not None and f.type in CHOICES else None


def _value_into(out: list, label, v, indent, f, default, ctype) -> None:
    """Append the lines of ``value_lines(label, v, indent, f, default)`` to ``out`` (``ctype``:
    :func:`_choice_type` of ``f``, looked up once per field by the composite layouts)."""
    pad = _PADS[indent] if indent < 64 else "    " * indent
    t = type(v)
    tname = _LEAF_TYPES.get(t)
    if tname is not None:  # the common leaves, shown as the general case below would
        if default and f is not None and f.primitive != "*":
            tname = f.primitive
        text = _leaf_text(v, t)
        if ctype is not None and v is not None:
            name = choice_name(ctype, v)
            if name is not None:
                text = f"{name} ({v if t is not bool else str(v).lower()})"
        out.append(f"{pad}{label} ({tname}): {text} [default]" if default else f"{pad}{label} ({tname}): {text}")
        return
    mark = " [default]" if default else ""
    if isinstance(v, (Described, list, dict)):
        _container_into(out, pad, label, v, indent, mark)
    else:
        _scalar_into(out, pad, label, v, f, default, ctype, mark)


def _container_into(out: list, pad: str, label, v, indent, mark: str) -> None:
    """:func:`_value_into` of a described value, composite, array, list or map: its line, then
    its children's one indent deeper (``mark``: a default's mark, shown by a composite)."""
    if isinstance(v, Composite):
        out.append(f"{pad}{label} ({v.spec.name}, descriptor {_desc_text(v.descriptor)}){mark}")
        _composite_into(out, v, indent + 1)
        return
    if isinstance(v, Described):
        out.append(f"{pad}{label} ({v.name or 'described'}, descriptor {_desc_text(v.descriptor)})")
        _value_into(out, "value", v.value, indent + 1, None, False, None)
        return
    if isinstance(v, dict):
        _map_into(out, pad, label, v, indent)
        return
    if isinstance(v, Array):
        out.append(f"{pad}{label} (array of {len(v)} {v.element_type})")
    else:
        out.append(f"{pad}{label} (list of {len(v)})")
    for i, x in enumerate(v):
        _value_into(out, f"[{i}]", x, indent + 1, None, False, None)


def _map_into(out: list, pad: str, label, v, indent) -> None:
    """:func:`_value_into` of a map: its line, then one child per pair labelled by its key."""
    out.append(f"{pad}{label} (map of {len(v)})")
    for k, x in v.items():
        if type(k) is str or type(k) is Symbol:  # short_value(None, k) of a string key
            key = str(k)
            key = repr(key if len(key) <= 60 else key[:60] + "…")
        else:
            key = short_value(None, k)
        _value_into(out, key, x, indent + 1, None, False, None)


def _scalar_into(out: list, pad: str, label, v, f, default, ctype, mark: str) -> None:
    """:func:`_value_into` of a value that is neither a common leaf nor a container (a float,
    uuid, timestamp, char, decimal ...): one line."""
    # a default comes from the spec tables as a plain Python value: its type is the field's
    t = f.primitive if default and f is not None and f.primitive != "*" else amqp_type_of(v)
    text = short_value(None, v, limit=120)
    if ctype is not None and v is not None:
        name = choice_name(ctype, v)
        if name is not None:
            text = f"{name} ({v if not isinstance(v, bool) else str(v).lower()})"
    if isinstance(v, Timestamp):
        text = f"{int(v)} ({_fmt_ts(int(v) / 1000.0)})"
    out.append(f"{pad}{label} ({t}): {text}{mark}")


_DESC_TEXTS: dict = {}  # ulong descriptor -> its text


def _desc_text(d) -> str:
    if type(d) is ULong:
        text = _DESC_TEXTS.get(d)
        if text is None:
            text = f"0x{d >> 32:08x}:0x{d & 0xFFFFFFFF:08x}"
            if len(_DESC_TEXTS) < 4096:  # the spec's descriptors, and a few others
                _DESC_TEXTS[d] = text
        return text
    if isinstance(d, int) and not isinstance(d, bool):
        return f"0x{d >> 32:08x}:0x{d & 0xFFFFFFFF:08x}"
    return repr(str(d)) if isinstance(d, str) else repr(d)


class _CompositeLayout:
    """What the tree of a composite of one spec at one indent looks up once, per field: its
    FieldSpec, name, :func:`_choice_type`, the line(s) of its default (one string, the lines
    joined by newlines) or None, its null line, and the start of its line for each leaf type
    (``"    name (uint): "``), so that a present leaf value costs one concatenation."""

    __slots__ = ("spec", "nf", "fields", "names", "ctypes", "defaults", "nulls", "heads")

    def __init__(self, spec, indent: int):
        pad = _PADS[indent] if indent < 64 else "    " * indent
        self.spec = spec
        self.fields = tuple(spec.fields)
        self.nf = len(self.fields)
        self.names = tuple(f.name for f in self.fields)
        self.ctypes = tuple(_choice_type(f) for f in self.fields)
        self.defaults = tuple(
            "\n".join(value_lines(f.name, f.default, indent, f, default=True)) if f.has_default else None
            for f in self.fields)
        self.nulls = tuple(f"{pad}{f.name}: null" for f in self.fields)
        self.heads = tuple({t: f"{pad}{f.name} ({tname}): " for t, tname in _LEAF_TYPES.items()}
                           for f in self.fields)


_COMPOSITE_LAYOUTS: list = [{} for _ in range(16)]  # per indent below 16: composite name -> _CompositeLayout
_DEEP_LAYOUTS: dict = {}  # (composite name, indent) -> _CompositeLayout, for the rare deeper ones


def _composite_layout(spec, indent: int) -> _CompositeLayout:
    """The :class:`_CompositeLayout` of ``spec`` at ``indent`` (made once)."""
    table = _COMPOSITE_LAYOUTS[indent] if indent < 16 else _DEEP_LAYOUTS
    key = spec.name if indent < 16 else (spec.name, indent)
    hit = table.get(key)
    if hit is not None and hit.spec is spec:
        return hit
    layout = _CompositeLayout(spec, indent)
    if len(table) < 4096:
        table[key] = layout
    return layout


def _lines(out: list) -> list[str]:
    """``out`` with its multi-line items (the tree appends some lines joined) split: one line an item."""
    return "\n".join(out).split("\n") if out else out


def composite_lines(c: Composite, indent: int) -> list[str]:
    out: list[str] = []
    _composite_into(out, c, indent)
    return _lines(out)


def _leaf_text(v, t) -> str:
    """The text of leaf value ``v`` (of type ``t``, one of :data:`_LEAF_TYPES`) in the tree."""
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is bytes:
        return "0x" + (v.hex() if len(v) <= 60 else v[:60].hex() + "…")
    if t is str or t is Symbol:  # (a Symbol's repr is its string's)
        return repr(v) if len(v) <= 120 else repr(str(v)[:120] + "…")
    if 0 <= v < 256:  # (the integer types: int's own digits, none has a str of its own)
        return _INT_TEXTS[v]
    return str(v)


def _composite_into(out: list, c, indent) -> None:
    """Append the lines of ``composite_lines(c, indent)`` to ``out`` (some items several lines)."""
    layout = _composite_layout(c.spec, indent)
    values = c.value
    n = len(values)
    nf = layout.nf
    ctypes = layout.ctypes
    for i in range(nf):
        if i < n:
            v = values[i]
            if v is not None:
                if ctypes[i] is None:
                    t = type(v)
                    heads = layout.heads[i]
                    head = heads.get(t)
                    if head is not None:  # a leaf: its line's start is ready
                        out.append(head + _leaf_text(v, t))
                        continue
                _value_into(out, layout.names[i], v, indent, layout.fields[i], False, ctypes[i])
                continue
        d = layout.defaults[i]
        if d is not None:
            out.append(d)
        elif i < n:
            out.append(layout.nulls[i])
    for j in range(nf, n):
        _value_into(out, f"[extra element {j}]", values[j], indent, None, False, None)


_AMQP_TITLES: dict = {}  # (src, dst, channel, doff, type) -> _frame_head_tail of such a frame
_TYPE_LINES = {0: "    Type: AMQP (0)", 1: "    Type: SASL (1)"}


def _frame_head_tail(fr) -> tuple:
    """The first lines of a frame's tree, the title to Channel, as the text before its length
    and the text after it."""
    head = f"Advanced Message Queuing Protocol, {fr.src} -> {fr.dst}, channel {fr.channel}\n    Length: "
    type_line = _TYPE_LINES.get(fr.type) if type(fr.type) is int else None
    if type_line is None:
        type_line = f"    Type: {fr.type} ({fr.type})"
    return head, f"\n    Doff: {fr.doff}\n{type_line}\n    Channel: {fr.channel}"


def frame_detail(ev) -> list[str]:
    """The AMQP part of the detail tree of one header or frame."""
    out: list[str] = []
    frame_detail_into(out, ev)
    return _lines(out)


def frame_detail_into(out: list, ev) -> None:
    """Append the lines of ``frame_detail(ev)`` to ``out``."""
    if type(ev) is Frame:
        _frame_tree_into(out, ev)
        return
    if isinstance(ev, ProtocolHeader):
        out.append("Advanced Message Queuing Protocol")
        out.append(f"    Protocol-Header: {ev.name}")
        out.append(f"    Protocol-ID: {ev.protocol_id}")
        out.append(f"    Version: {'.'.join(map(str, ev.version))}")
    elif isinstance(ev, StreamNote):
        out.append("Advanced Message Queuing Protocol (stream)")
        out.append(f"    [Expert Info ({ev.note.severity}/{ev.note.group}): {ev.note.message}]")
        return
    else:
        _frame_tree_into(out, ev)  # (a Frame's subclass)
        return
    for n in ev.notes:
        out.append(f"    [Expert Info ({n.severity}/{n.group}): {n.message}]")


def _frame_tree_into(out: list, fr) -> None:
    """The lines of ``frame_detail(fr)`` of a frame (its fields read from its C struct when compiled)."""
    # the title, Length, Doff, Type and Channel lines as one item: all but the length made once
    key = (fr.src, fr.dst, fr.channel, fr.doff, fr.type)
    head_tail = _AMQP_TITLES.get(key)
    if head_tail is None:
        head_tail = _frame_head_tail(fr)
        if len(_AMQP_TITLES) >= 65536:  # many connections and channels: start over
            _AMQP_TITLES.clear()
        _AMQP_TITLES[key] = head_tail
    out.append(f"{head_tail[0]}{fr.size}{head_tail[1]}")
    if fr.ext:
        out.append(f"    Extended header: {fr.ext.hex()}")
    if fr.first_packet != fr.packet:
        out.append(f"    [Frame starts in packet {fr.first_packet}]")
    if fr.type != FRAME_SASL and fr.size == fr.doff * 4:  # (kind "heartbeat")
        out.append("    Empty frame (heartbeat)")
    else:
        _performative_into(out, fr)
    pname = fr.pname
    if pname is None:
        pname = fr.name
    if pname == "transfer":
        out.append(f"    Payload: {len(fr.payload)} bytes")
    dl = fr.delivery
    if dl is not None:
        if dl.aborted:
            out.append(f"    [Delivery aborted after {dl.frames} frames]")
        else:
            if dl.frames > 1:
                out.append(f"    Message ({dl.message_size} bytes, reassembled from {dl.frames} frames "
                           f"starting in packet {dl.first_packet})")
            else:
                out.append(f"    Message ({dl.message_size} bytes)")
            _sections_into(out, dl)
    for n in fr.notes:
        out.append(f"    [Expert Info ({n.severity}/{n.group}): {n.message}]")


def _performative_into(out: list, fr) -> None:
    """The performative's lines of frame ``fr``'s tree (not a heartbeat): a scanned one (transfer,
    flow, disposition: not decoded yet) straight from its encoding where :class:`_TreeWalk` reads
    it, else from the decoded performative."""
    body = fr._perf_body
    if fr._performative is None and type(body) is bytes:
        mark = len(out)
        if _TreeWalk(body, out, DEFAULT_MAX_ELEMENTS).performative():
            return
        del out[mark:]
    p = fr.performative
    if isinstance(p, Composite):
        c = p
        out.append(f"    Performative: {c.spec.name} (descriptor {_desc_text(c.descriptor)})")
        _composite_into(out, c, 2)
    elif isinstance(p, Described):
        _value_into(out, "Described", p, 1, None, False, None)


def _sections_into(out: list, dl) -> None:
    """The lines of the message sections of delivery ``dl`` (not aborted), or why there are none.
    Not decoded yet, they come straight from the message's encoding where :class:`_TreeWalk` reads
    it: it spends the connection's element budget as ``dl.sections()`` would."""
    if dl._sections is None and dl._error is None and dl.cut is None and not dl.incomplete \
            and type(dl.payload) is bytes:
        budget = dl.budget
        cap = DEFAULT_MAX_ELEMENTS
        if budget is not None and budget[0] < cap:
            cap = max(budget[0], 0)
        mark = len(out)
        walk = _TreeWalk(dl.payload, out, cap)
        if walk.sections():
            if budget is not None:
                budget[0] -= walk.elements
                dl.budget = None  # (spent: were it decoded again, it would not be spent twice)
            return
        del out[mark:]  # (what it could not read: decoded, its error said as before)
    sections = dl.sections()
    if sections is None:
        out.append(f"        [{dl.error}]")
        return
    for s in sections:
        _section_into(out, s)


def _section_into(out: list, s) -> None:
    """The lines of decoded message section ``s``."""
    if isinstance(s, Composite):
        c = s
        out.append(f"        {c.spec.name} (descriptor {_desc_text(c.descriptor)})")
        _composite_into(out, c, 3)
    elif isinstance(s, Described):
        _value_into(out, s.name or "section", s.value, 2, None, False, None)
    else:
        _value_into(out, "section", s, 2, None, False, None)


# --------------------------------------------------------------------------- the tree from the encoding

# How the tree walk reads a constructor: one small number per code, from the constructor table
# generated from types.xml (_spec.CONSTRUCTORS).  _W_OTHER: decoded by a Reader, shown by _value_into.
_W_OTHER = 0
_W_NULL = 1
_W_TRUE = 2
_W_FALSE = 3
_W_BOOL = 4  # one byte, 0 or 1
_W_ZERO = 5  # uint0, ulong0
_W_UNSIGNED = 6
_W_SIGNED = 7
_W_BINARY = 8
_W_STRING = 9
_W_SYMBOL = 10
_W_LIST = 11
_W_MAP = 12
_W_TIMESTAMP = 13


def _walk_tables() -> tuple:
    """(walk kind per code, width per code, the decoded value's class per code for the leaves of
    :data:`_LEAF_TYPES` else None, its AMQP type name per code)."""
    by_name = {tname: cls for cls, tname in _LEAF_TYPES.items()}
    simple = {"null": _W_NULL, "list": _W_LIST, "map": _W_MAP, "timestamp": _W_TIMESTAMP, "binary": _W_BINARY,
              "string": _W_STRING, "symbol": _W_SYMBOL}
    zero = {"true": _W_TRUE, "false": _W_FALSE, "uint0": _W_ZERO, "ulong0": _W_ZERO, "boolean": _W_BOOL}
    kinds = bytearray(256)
    widths = bytearray(256)
    classes = [None] * 256
    names = [None] * 256
    for code, entry in enumerate(_spec.CONSTRUCTORS):
        if entry is None:
            continue
        tname, ename, category, width = entry
        if tname in ("ubyte", "ushort", "uint", "ulong"):
            kind = _W_ZERO if width == 0 else _W_UNSIGNED
        elif tname in ("byte", "short", "int", "long"):
            kind = _W_SIGNED
        elif tname == "boolean":
            kind = zero[ename]
        else:
            kind = simple.get(tname, _W_OTHER)
        kinds[code] = kind
        widths[code] = width
        classes[code] = by_name.get(tname) if kind != _W_OTHER else None
        names[code] = tname
    return bytes(kinds), bytes(widths), tuple(classes), tuple(names)


_W_KIND, _W_WIDTH, _W_CLASS, _W_TNAME = _walk_tables()
# small-ulong descriptors (00 53 XX): the composite each names, else the restricted type's name
_W_COMPOSITES = tuple(s if isinstance(s, CompositeSpec) else None for s in (BY_DESCRIPTOR.get(i) for i in range(256)))
_W_NAMES = tuple(None if s is None or isinstance(s, CompositeSpec) else s.name
                 for s in (BY_DESCRIPTOR.get(i) for i in range(256)))
_W_TITLES = tuple(None if s is None else f"{s.name} (descriptor {_desc_text(ULong(i))})"
                  for i, s in enumerate(_W_COMPOSITES))
_W_PERFORMATIVES = tuple(None if t is None else "    Performative: " + t for t in _W_TITLES)
_W_SECTIONS = tuple(None if t is None else "        " + t for t in _W_TITLES)
_W_LAYOUTS = [None] * (16 * 256)  # indent * 256 + descriptor code -> _CompositeLayout, made once
_W_INNER = tuple(None if s is None else f" ({s.name}, descriptor {_desc_text(ULong(i))})"  # (a field's value)
                 for i, s in enumerate(_W_COMPOSITES))


def _quoted(data, p, n, symbol, limit):
    """``repr`` of the string (or symbol) of the ``n`` bytes at ``data[p]``, cut to ``limit``
    characters and an ellipsis as the tree cuts it; None when the bytes are not its encoding."""
    buf = data  # (compiled: its bytes read in place)
    plain = True
    for i in range(p, p + n):
        b = buf[i]
        if b < 0x20 or b > 0x7E or b == 0x27 or b == 0x5C:  # (repr would escape, or quote otherwise)
            plain = False
            break
    if plain:
        if n <= limit:
            s = data[p:p + n].decode("ascii")
            return f"'{s}'"
        s = data[p:p + limit].decode("ascii")
        return f"'{s}…'"
    try:
        s = data[p:p + n].decode("ascii" if symbol else "utf-8")
    except UnicodeDecodeError:
        return None
    return repr(s) if len(s) <= limit else repr(s[:limit] + "…")


class _TreeWalk:
    """The detail tree of an encoded performative or message read straight from its bytes (``data``,
    from ``p`` to ``lim``), its lines appended to ``out``: the leaves (null, booleans, integers,
    binaries, strings, symbols, timestamps), composites with a small-ulong descriptor and maps with
    string keys are shown as they are read, without a decoded value; any other value is decoded by
    a :class:`Reader` and shown by :func:`_value_into`, as before.  ``elements`` counts what the
    Reader would count, against ``cap``.  A method returns False where the encoding is not valid or
    a cap is met: the caller then drops the lines and shows the decoded values (errors and all), so
    the text is the same either way."""

    __slots__ = ("data", "p", "lim", "out", "elements", "cap", "depth", "inner")

    def __init__(self, data: bytes, out: list, cap: int):
        self.data = data
        self.p = 0
        self.lim = len(data)
        self.out = out
        self.elements = 0
        self.cap = cap
        self.depth = 0
        self.inner = 0  # the end of the list or map whose header was read last

    def performative(self) -> bool:
        """The performative's lines (a composite with a small-ulong descriptor)."""
        data = self.data
        if self.lim < 4 or data[0] != 0 or data[1] != 0x53:
            return False
        code = data[2]
        spec = _W_COMPOSITES[code]
        if spec is None or _W_KIND[data[3]] != _W_LIST:
            return False
        self.out.append(_W_PERFORMATIVES[code])
        self.p = 3
        self.depth = 1
        return self.composite(code, 2)

    def sections(self) -> bool:
        """The message sections' lines, as :func:`_section_into` shows each decoded."""
        data = self.data
        while self.p < self.lim:
            p = self.p
            self.depth = 1
            if data[p] == 0 and p + 3 < self.lim and data[p + 1] == 0x53:
                code = data[p + 2]
                spec = _W_COMPOSITES[code]
                if spec is not None:
                    if _W_KIND[data[p + 3]] == _W_LIST:
                        self.out.append(_W_SECTIONS[code])
                        self.p = p + 3
                        if not self.composite(code, 3):
                            return False
                        continue
                else:
                    name = _W_NAMES[code]
                    self.p = p + 3
                    if not self.value("section" if name is None else name, 2, None, None):
                        return False
                    continue
            self.depth = 0
            if not self._decoded_section():
                return False
        return True

    def _decoded_section(self) -> bool:
        """A section read by a Reader, shown by :func:`_section_into`."""
        try:
            r = Reader(self.data, self.p, self.lim, DEFAULT_MAX_DEPTH, self.cap - self.elements)
            s = r.value()
        except DissectError:
            return False
        self.elements = self.cap - r.elements_left
        self.p = r.pos
        _section_into(self.out, s)
        return True

    def _header(self, code) -> int:
        """The count of the list or map of constructor ``code`` (its byte read), with its end in
        ``inner`` and the cursor at its first element; -1 where a Reader would fail or count past
        the cap."""
        data = self.data
        p = self.p
        lim = self.lim
        if _W_WIDTH[code] == 0:
            self.inner = p
            return 0
        if _W_WIDTH[code] == 1:
            if p + 2 > lim:
                return -1
            size = data[p]
            end = p + 1 + size
            count = data[p + 1]
            p += 2
            if size < 1:
                return -1
        else:
            if p + 8 > lim:
                return -1
            size = uint_at(data, p, 4)
            end = p + 4 + size
            count = uint_at(data, p + 4, 4)
            p += 8
            if size < 4:
                return -1
        if end > lim or count > end - p:
            return -1
        self.elements += count
        if self.elements > self.cap:
            return -1
        self.p = p
        self.inner = end
        return count

    def composite(self, dcode, indent) -> bool:
        """The fields of the composite of small-ulong descriptor ``dcode`` (its list at the cursor),
        as :func:`_composite_into` shows them at ``indent``."""
        data = self.data
        code = data[self.p]  # (a list constructor: the caller looked)
        self.p += 1
        count = self._header(code)
        layout = _W_LAYOUTS[indent * 256 + dcode] if indent < 16 else None
        if layout is None:
            layout = _composite_layout(_W_COMPOSITES[dcode], indent)
            if indent < 16:
                _W_LAYOUTS[indent * 256 + dcode] = layout
        nf = layout.nf
        if count < 0 or count > nf or self.depth >= _WALK_DEPTH:  # (extra elements: decoded)
            return False
        self.depth += 1
        end = self.inner
        saved = self.lim
        self.lim = end
        out = self.out
        ctypes = layout.ctypes
        for i in range(nf):
            if i < count:
                if self.p >= end:
                    return False
                code = data[self.p]
                if code != 0x40:
                    if ctypes[i] is None:
                        heads = layout.heads[i]
                        head = heads.get(_W_CLASS[code])
                        if head is not None:  # a leaf: its line's start is ready
                            text = self._leaf(code)
                            if text is None:
                                return False
                            out.append(head + text)
                            continue
                    if not self.value(layout.names[i], indent, layout.fields[i], ctypes[i]):
                        return False
                    continue
                self.p += 1
            d = layout.defaults[i]
            if d is not None:
                out.append(d)
            elif i < count:
                out.append(layout.nulls[i])
        if self.p != end:
            return False
        self.lim = saved
        self.depth -= 1
        return True

    def value(self, label, indent, f, ctype) -> bool:
        """The line(s) of the value at the cursor, as ``_value_into(out, label, v, indent, f, False,
        ctype)`` shows it decoded."""
        if self.p >= self.lim:
            return False
        data = self.data
        code = data[self.p]
        kind = _W_KIND[code]
        if _W_CLASS[code] is not None and (ctype is None or kind < _W_BINARY):
            text = self._leaf(code)
            if text is None:
                return False
            if ctype is not None and kind != _W_NULL:  # a choice's name, its value beside it
                name = choice_name(ctype, text == "true" if kind < _W_ZERO else int(text))
                if name is not None:
                    text = f"{name} ({text})"
            pad = _PADS[indent] if indent < 64 else "    " * indent
            self.out.append(f"{pad}{label} ({_W_TNAME[code]}): {text}")
            return True
        if ctype is None:
            if kind == _W_MAP:
                return self._map(label, indent)
            if kind == _W_TIMESTAMP:
                return self._timestamp(label, indent)
        p = self.p
        if code == 0 and p + 3 < self.lim and data[p + 1] == 0x53:
            dcode = data[p + 2]
            if _W_COMPOSITES[dcode] is not None and _W_KIND[data[p + 3]] == _W_LIST and self.depth < _WALK_DEPTH:
                pad = _PADS[indent] if indent < 64 else "    " * indent
                self.out.append(f"{pad}{label}{_W_INNER[dcode]}")
                self.p = p + 3
                self.depth += 1
                if not self.composite(dcode, indent + 1):
                    return False
                self.depth -= 1
                return True
        return self._decoded(label, indent, f, ctype)

    def _decoded(self, label, indent, f, ctype) -> bool:
        """The value at the cursor read by a Reader, shown by :func:`_value_into`."""
        try:
            r = Reader(self.data, self.p, self.lim, DEFAULT_MAX_DEPTH - self.depth, self.cap - self.elements)
            v = r.value()
        except DissectError:
            return False
        self.elements = self.cap - r.elements_left
        self.p = r.pos
        _value_into(self.out, label, v, indent, f, False, ctype)
        return True

    def _leaf(self, code):
        """The text of the leaf of constructor ``code`` at the cursor (as :func:`_leaf_text`), the
        cursor moved past it; None where a Reader would fail."""
        kind = _W_KIND[code]
        data = self.data
        p = self.p + 1
        lim = self.lim
        width = _W_WIDTH[code]
        if p + width > lim:
            return None
        if kind == _W_UNSIGNED:
            self.p = p + width
            u = uint_at(data, p, width)
            return _INT_TEXTS[u] if u < 256 else f"{u}"
        if kind == _W_SIGNED:
            self.p = p + width
            s = int_at(data, p, width)
            return _INT_TEXTS[s] if 0 <= s < 256 else f"{s}"
        if kind == _W_BINARY or kind == _W_STRING or kind == _W_SYMBOL:
            n = data[p] if width == 1 else uint_at(data, p, 4)
            p += width
            if n > lim - p:
                return None
            self.p = p + n
            if kind == _W_BINARY:
                return "0x" + (data[p:p + n].hex() if n <= 60 else data[p:p + 60].hex() + "…")
            return _quoted(data, p, n, kind == _W_SYMBOL, 120)
        self.p = p + width
        if kind == _W_TRUE:
            return "true"
        if kind == _W_FALSE:
            return "false"
        if kind == _W_ZERO:
            return "0"
        if kind == _W_BOOL:
            b = data[p]
            return "true" if b == 1 else "false" if b == 0 else None
        return "null"  # (_W_NULL)

    def _timestamp(self, label, indent) -> bool:
        """A timestamp's line, as :func:`_scalar_into` shows it."""
        p = self.p + 1
        if p + 8 > self.lim:
            return False
        self.p = p + 8
        ms = int_at(self.data, p, 8)
        pad = _PADS[indent] if indent < 64 else "    " * indent
        self.out.append(f"{pad}{label} (timestamp): {ms} ({_fmt_ts(ms / 1000.0)})")
        return True

    def _map(self, label, indent) -> bool:
        """A map whose keys are strings or symbols, as :func:`_map_into` shows it (another map:
        decoded)."""
        data = self.data
        start = self.p
        code = data[start]
        self.p = start + 1
        elements = self.elements
        count = self._header(code)
        if count < 0 or count % 2 or self.depth >= _WALK_DEPTH:
            return False
        end = self.inner
        out = self.out
        mark = len(out)
        out.append("")  # (the title: the number of distinct keys is known at the end)
        self.depth += 1
        saved = self.lim
        self.lim = end
        keys = set() if count > 2 else None
        for _ in range(count // 2):
            if self.p >= end:
                return False
            kcode = data[self.p]
            kind = _W_KIND[kcode]
            if kind != _W_STRING and kind != _W_SYMBOL:
                del out[mark:]  # (keys of other types: the decoded map)
                self.p = start
                self.lim = saved
                self.depth -= 1
                self.elements = elements
                return self._decoded(label, indent, None, None)
            width = _W_WIDTH[kcode]
            p = self.p + 1
            if p + width > end:
                return False
            n = data[p] if width == 1 else uint_at(data, p, 4)
            p += width
            if n > end - p:
                return False
            key = _quoted(data, p, n, kind == _W_SYMBOL, 60)
            if key is None:
                return False
            if keys is not None:
                keys.add(data[p:p + n])
            self.p = p + n
            if not self.value(key, indent + 1, None, None):
                return False
        if self.p != end:
            return False
        self.lim = saved
        self.depth -= 1
        pad = _PADS[indent] if indent < 64 else "    " * indent
        out[mark] = f"{pad}{label} (map of {count // 2 if keys is None else len(keys)})"
        return True


_WALK_DEPTH = 32  # nesting the walk reads itself (a Reader takes 48): deeper, the decoded values


class DetailLines:
    """The ``frames -V`` text of a capture's events, in order: before the first event of each
    packet its layers (:func:`~amqp_dissect.render.netdetail.packet_layers`: netparse's, with
    dpkt's Ethernet II / IP / TCP detail as tshark shows it), then the
    AMQP tree of each header, frame and note."""

    __slots__ = ("_last_packet", "layer_records", "internal_errors", "only_amqp")

    def __init__(self, layer_records: list | None = None):
        self._last_packet = None
        self.only_amqp = False  # -O amqp: each layer of the packet as its title line only (tshark's -O)
        self.internal_errors: list = []  # bugs met describing packets (the CLI then exits 1)
        # records of the stream layers (TLS records, WebSocket frames) as the layers make them:
        # each shows under the packet that completed it, after the packet's own layers
        self.layer_records = layer_records

    def add(self, out: list, record, ev) -> None:
        """Append the lines of ``ev`` (produced by ``record``, None at the end) to ``out``."""
        if not isinstance(ev, _SHOWN):
            return
        if record is not None and record.index != self._last_packet:
            self._last_packet = record.index
            out.append("")
            try:
                layers = packet_layers(record)
            except Exception as e:  # a bug (packet_layers never raises): said in place and kept, so
                # the frames go on and the run ends with exit 1
                self.internal_errors.append(f"describing packet {record.index}: {type(e).__name__}: {e}")
                layers = [(f"Frame {record.index}: (could not describe: {type(e).__name__}: {e})", [])]
            only = self.only_amqp
            for title, lines in layers:  # the title, then its lines indented: one string per layer
                out.append(title + "\n    " + "\n    ".join(lines) if lines and not only else title)
            if self.layer_records:
                self._layer_records(out, record.index, only)
        elif record is None and self._last_packet != "end":
            self._last_packet = "end"
            out.append("")
            out.append("[end of capture]")
        if isinstance(ev, PacketNote):
            out.append(f"[Expert Info ({ev.note.severity}/{ev.note.group}): {ev.note.message}]")
            return
        frame_detail_into(out, ev)

    def _layer_records(self, out: list, packet: int, only: bool = False) -> None:
        """The stream-layer records packet ``packet`` completed, under their layer's title
        ("Transport Layer Security", "WebSocket"), as Wireshark's tree shows them."""
        records = self.layer_records
        mine = [r for r in records if r.packet == packet]
        records[:] = [r for r in records if r.packet is not None and r.packet > packet]
        title = None
        for r in mine:
            t = getattr(r, "layer", "Transport Layer Security")
            if t != title:
                out.append(t)
                title = t
            if not only:
                out.append("    " + r.describe())
