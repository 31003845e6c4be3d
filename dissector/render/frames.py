"""Turn decoded events into JSON-able dicts, one-line summaries and detail trees.

JSON value conventions (documented in the README):

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

from ..amqp.framing import Frame, ProtocolHeader, StreamNote
from ..events import PacketNote
from ..amqp.codec import (
    ABSENT,
    Array, Byte, Composite, Described, Int, Long, Short, Timestamp, UByte, UInt, ULong, UShort, amqp_type_of,
)
from ..amqp.spec import CHOICES, COMPOSITES, FieldSpec, choice_name
from ..amqp.values import composite_defaults, composite_fields, json_value

_SHOWN = (Frame, ProtocolHeader, StreamNote, PacketNote)  # the events that have a frames line

# --------------------------------------------------------------------------- JSON


def message_json(sections: list) -> dict:
    """Message sections keyed by section name; body sections are lists (one item per section)."""
    out: dict = {}
    for s in sections:
        if isinstance(s, Composite):
            out[s.spec.name] = composite_fields(s)
        elif isinstance(s, Described) and s.name:
            if s.name in ("data", "amqp-sequence"):
                out.setdefault(s.name, []).append(json_value(s.value))
            else:
                out[s.name] = json_value(s.value)
        else:
            out.setdefault("unknown-sections", []).append(json_value(s))
    return out


def event_json(ev) -> dict | None:
    """The JSON object of a header, frame or stream note (None for other events)."""
    if isinstance(ev, Frame):
        d = {
            "packet": ev.packet,
            "time": ev.ts,
            "src": ev.src,
            "dst": ev.dst,
            "connection": ev.conn,
            "channel": ev.channel,
            "type": ev.kind,
            "performative": ev.name,
            "fields": {},
            "size": ev.size,
            "doff": ev.doff,
        }
        if ev.first_packet != ev.packet:
            d["first_packet"] = ev.first_packet
        p = ev.performative
        if isinstance(p, Composite):
            d["fields"] = composite_fields(p)
            defaults = composite_defaults(p)
            if defaults:
                d["defaults"] = defaults
        elif isinstance(p, Described):
            d["fields"] = {"@descriptor": json_value(p.descriptor), "@value": json_value(p.value)}
        if ev.name == "transfer":
            d["payload_size"] = len(ev.payload)
        dl = ev.delivery
        if dl is not None:
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
        if ev.notes:
            d["notes"] = [n.as_dict() for n in ev.notes]
        return d
    if isinstance(ev, ProtocolHeader):
        d = {
            "packet": ev.packet,
            "time": ev.ts,
            "src": ev.src,
            "dst": ev.dst,
            "connection": ev.conn,
            "channel": None,
            "type": "header",
            "performative": None,
            "fields": {"protocol": ev.name, "protocol-id": ev.protocol_id, "version": ".".join(map(str, ev.version))},
        }
        if ev.notes:
            d["notes"] = [n.as_dict() for n in ev.notes]
        return d
    if isinstance(ev, StreamNote):
        return {
            "packet": ev.packet,
            "time": ev.ts,
            "src": ev.src,
            "dst": ev.dst,
            "connection": ev.conn,
            "channel": None,
            "type": "note",
            "performative": None,
            "fields": {},
            "notes": [ev.note.as_dict()],
            "skipped": ev.skipped,
        }
    return None


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


def _summary_fields():
    """performative -> ((index, name, FieldSpec, choices or None), ...) of its key fields."""
    out = {}
    for perf, names in _KEY_FIELDS.items():
        spec = COMPOSITES[perf]
        out[perf] = tuple(
            (spec.index[n], n, spec.fields[spec.index[n]], CHOICES.get(spec.fields[spec.index[n]].type)) for n in names
        )
    return out


_SUMMARY_FIELDS = _summary_fields()
_PLAIN_INTS = frozenset({UByte, UShort, UInt, ULong, Byte, Short, Int, Long})


def short_value(f: FieldSpec | None, v, limit: int = 60) -> str:
    if v is None:
        return "null"
    if f is not None and not isinstance(v, (list, dict, Described)):
        name = choice_name(f.type, v)
        if name is not None:
            return name
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, Composite):
        if v.spec.name in ("source", "target"):
            addr = v.field("address")
            return f"{v.spec.name}({'' if not addr else addr})"
        if v.spec.name == "error":
            desc = v.field("description")
            cond = v.field("condition")
            return f"error({cond}{': ' + str(desc) if desc else ''})"
        inner = ", ".join(f"{fs.name}={short_value(fs, x)}" for fs, x in v.items())
        return f"{v.spec.name}({inner})"
    if isinstance(v, Described):
        return f"{v.name or v.descriptor}:{short_value(None, v.value)}"
    if isinstance(v, (bytes, bytearray)):
        s = bytes(v)
        text = s.hex() if len(s) <= limit // 2 else s[: limit // 2].hex() + "…"
        return f"0x{text}"
    if isinstance(v, str):
        s = str(v)
        return repr(s if len(s) <= limit else s[:limit] + "…")
    if isinstance(v, list):
        return "[" + ", ".join(short_value(None, x) for x in v[:8]) + (", …" if len(v) > 8 else "") + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{short_value(None, k)}: {short_value(None, x)}" for k, x in list(v.items())[:6]) + (
            ", …" if len(v) > 6 else "") + "}"
    return str(v)


def frame_summary(ev) -> str:
    """Info text of a header or frame, in the spirit of tshark's Info column."""
    if isinstance(ev, ProtocolHeader):
        return f"Protocol-Header {ev.name}"
    if isinstance(ev, StreamNote):
        return f"[{ev.note.severity}] {ev.note.message}"
    if ev.kind == "heartbeat":
        return "(empty frame: heartbeat)"
    if ev._performative is None and ev.pname is not None:
        # scanned (transfer, flow, disposition): plain values, a delivery state by its name
        pname, values = ev.pname, ev.fields
    else:
        p = ev.performative
        if p is None:
            return "(undecodable frame)"
        if not isinstance(p, Composite):
            return f"described {p.descriptor!r}"
        pname, values = p.spec.name, p.value
    parts = []
    n = len(values)
    for i, name, f, choices in _SUMMARY_FIELDS.get(pname, ()):
        if i >= n:
            continue
        v = values[i]
        if v is None or v is ABSENT:
            continue
        if choices is None and (type(v) is int or type(v) in _PLAIN_INTS):
            parts.append(f"{name}={int(v)}")  # the common case: counts, ids, windows, handles
        elif type(v) is str and f.type == "*":
            parts.append(f"{name}={v}()")  # a scanned delivery state: an empty list of that composite
        else:
            parts.append(f"{name}={short_value(f, v)}")
    text = f"{pname}({', '.join(parts)})"
    if pname == "transfer":
        text += f" payload={ev.payload_size}"
    dl = ev.delivery
    if dl is not None:
        if dl.aborted:
            text += f" [aborted after {dl.frames} frames]"
        elif dl.frames > 1:
            text += f" [message reassembled: {dl.frames} frames, {dl.message_size} bytes]"
    return text


_KIND_LAYER = {"header": "AMQP", "amqp": "AMQP", "sasl": "SASL", "heartbeat": "AMQP", "note": "----"}


def summary_line(ev, t0: float) -> str | None:
    """The ``frames`` line of an event (None for events that have none): packet, time since
    ``t0``, peers, layer, channel, the performative's summary and the notes worth showing."""
    if isinstance(ev, PacketNote):
        return f"{ev.packet:>6} {ev.ts - t0:>11.6f} [{ev.note.severity}] {ev.note.message}"
    if not isinstance(ev, _SHOWN):
        return None
    channel = getattr(ev, "channel", None)
    ch = f"ch {channel:<3}" if channel is not None else "      "
    packet = ev.packet if ev.packet is not None else "end"
    ts = (ev.ts - t0) if ev.ts is not None else 0.0
    line = f"{packet:>6} {ts:>11.6f} {ev.src} → {ev.dst} {_KIND_LAYER[ev.kind]} {ch} {frame_summary(ev)}"
    notes = getattr(ev, "notes", None)
    if notes:
        line += "  " + " ".join(f"[{n.severity}: {n.message}]" for n in notes if n.severity != "chat")
    return line.rstrip()


# --------------------------------------------------------------------------- detail tree


def _fmt_ts(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def value_lines(label: str, v, indent: int, f: FieldSpec | None = None, default: bool = False) -> list[str]:
    """Lines of a value in the detail tree: 'label (type): value' with children indented."""
    pad = "    " * indent
    mark = " [default]" if default else ""
    if isinstance(v, Composite):
        lines = [f"{pad}{label} ({v.spec.name}, descriptor {_desc_text(v.descriptor)}){mark}"]
        lines += composite_lines(v, indent + 1)
        return lines
    if isinstance(v, Described):
        lines = [f"{pad}{label} ({v.name or 'described'}, descriptor {_desc_text(v.descriptor)})"]
        lines += value_lines("value", v.value, indent + 1)
        return lines
    # a default comes from the spec tables as a plain Python value: its type is the field's
    t = f.primitive if default and f is not None and f.primitive != "*" else amqp_type_of(v)
    if isinstance(v, Array):
        lines = [f"{pad}{label} (array of {len(v)} {v.element_type})"]
        for i, x in enumerate(v):
            lines += value_lines(f"[{i}]", x, indent + 1)
        return lines
    if isinstance(v, list):
        lines = [f"{pad}{label} (list of {len(v)})"]
        for i, x in enumerate(v):
            lines += value_lines(f"[{i}]", x, indent + 1)
        return lines
    if isinstance(v, dict):
        lines = [f"{pad}{label} (map of {len(v)})"]
        for k, x in v.items():
            lines += value_lines(f"{short_value(None, k)}", x, indent + 1)
        return lines
    text = short_value(None, v, limit=120)
    if f is not None and v is not None:
        name = choice_name(f.type, v)
        if name is not None:
            text = f"{name} ({v if not isinstance(v, bool) else str(v).lower()})"
    if isinstance(v, Timestamp):
        text = f"{int(v)} ({_fmt_ts(int(v) / 1000.0)})"
    return [f"{pad}{label} ({t}): {text}{mark}"]


def _desc_text(d) -> str:
    if isinstance(d, int) and not isinstance(d, bool):
        return f"0x{d >> 32:08x}:0x{d & 0xFFFFFFFF:08x}"
    return repr(str(d)) if isinstance(d, str) else repr(d)


def composite_lines(c: Composite, indent: int) -> list[str]:
    lines: list[str] = []
    n = len(c.value)
    for i, f in enumerate(c.spec.fields):
        if i < n and c.value[i] is not None:
            lines += value_lines(f.name, c.value[i], indent, f)
        elif f.has_default:
            lines += value_lines(f.name, f.default, indent, f, default=True)
        elif i < n:
            lines.append(f"{'    ' * indent}{f.name}: null")
    for j, x in enumerate(c.extra()):
        lines += value_lines(f"[extra element {n - len(c.extra()) + j}]", x, indent)
    return lines


def frame_detail(ev) -> list[str]:
    """The AMQP part of the detail tree of one header or frame."""
    if isinstance(ev, ProtocolHeader):
        lines = [
            "Advanced Message Queuing Protocol",
            f"    Protocol-Header: {ev.name}",
            f"    Protocol-ID: {ev.protocol_id}",
            f"    Version: {'.'.join(map(str, ev.version))}",
        ]
    elif isinstance(ev, StreamNote):
        lines = ["Advanced Message Queuing Protocol (stream)", f"    [Expert Info ({ev.note.severity}/{ev.note.group}): {ev.note.message}]"]
        return lines
    else:
        type_name = {0: "AMQP", 1: "SASL"}.get(ev.type, str(ev.type))
        lines = [
            f"Advanced Message Queuing Protocol, {ev.src} -> {ev.dst}, channel {ev.channel}",
            f"    Length: {ev.size}",
            f"    Doff: {ev.doff}",
            f"    Type: {type_name} ({ev.type})",
            f"    Channel: {ev.channel}",
        ]
        if ev.ext:
            lines.append(f"    Extended header: {ev.ext.hex()}")
        if ev.first_packet != ev.packet:
            lines.append(f"    [Frame starts in packet {ev.first_packet}]")
        p = ev.performative
        if ev.kind == "heartbeat":
            lines.append("    Empty frame (heartbeat)")
        elif isinstance(p, Composite):
            lines.append(f"    Performative: {p.spec.name} (descriptor {_desc_text(p.descriptor)})")
            lines += composite_lines(p, 2)
        elif isinstance(p, Described):
            lines += value_lines("Described", p, 1)
        if ev.name == "transfer":
            lines.append(f"    Payload: {len(ev.payload)} bytes")
        dl = ev.delivery
        if dl is not None:
            if dl.aborted:
                lines.append(f"    [Delivery aborted after {dl.frames} frames]")
            else:
                lines.append(
                    f"    Message ({dl.message_size} bytes"
                    + (f", reassembled from {dl.frames} frames starting in packet {dl.first_packet}" if dl.frames > 1 else "")
                    + ")"
                )
                sections = dl.sections()
                if sections is None:
                    lines.append(f"        [{dl.error}]")
                else:
                    for s in sections:
                        if isinstance(s, Composite):
                            lines.append(f"        {s.spec.name} (descriptor {_desc_text(s.descriptor)})")
                            lines += composite_lines(s, 3)
                        elif isinstance(s, Described):
                            lines += value_lines(s.name or "section", s.value, 2)
                        else:
                            lines += value_lines("section", s, 2)
    for n in ev.notes:
        lines.append(f"    [Expert Info ({n.severity}/{n.group}): {n.message}]")
    return lines
