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

from ..amqp.framing import FRAME_SASL, Frame, ProtocolHeader, StreamNote
from .netdetail import packet_layers
from ..events import PacketNote
from ..times import delta
from ..amqp.codec import (
    ABSENT,
    Array, Byte, Composite, Described, Int, Long, Map, Short, Symbol, Timestamp, UByte, UInt, ULong, UShort,
    amqp_type_of,
)
from ..amqp.spec import CHOICES, COMPOSITES, FieldSpec, choice_name
from ..amqp.values import field_json, json_value, short_value

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
        fr = ev  # a Frame (DetailLines shows nothing else): its fields are read from its C struct when compiled
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
        p = fr.performative
        if fr.kind == "heartbeat":
            out.append("    Empty frame (heartbeat)")
        elif isinstance(p, Composite):
            c = p
            out.append(f"    Performative: {c.spec.name} (descriptor {_desc_text(c.descriptor)})")
            _composite_into(out, c, 2)
        elif isinstance(p, Described):
            _value_into(out, "Described", p, 1, None, False, None)
        if fr.name == "transfer":
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
                sections = dl.sections()
                if sections is None:
                    out.append(f"        [{dl.error}]")
                else:
                    for s in sections:
                        if isinstance(s, Composite):
                            c = s
                            out.append(f"        {c.spec.name} (descriptor {_desc_text(c.descriptor)})")
                            _composite_into(out, c, 3)
                        elif isinstance(s, Described):
                            _value_into(out, s.name or "section", s.value, 2, None, False, None)
                        else:
                            _value_into(out, "section", s, 2, None, False, None)
    for n in ev.notes:
        out.append(f"    [Expert Info ({n.severity}/{n.group}): {n.message}]")


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
