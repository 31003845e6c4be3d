"""Wireshark's side of ``compare``: the AMQP layers tshark shows (PDML through
:class:`pyshark.FileCapture`), rebuilt into trees from the fields' byte ranges and normalised
into frame records (:func:`wireshark_frames`) that :mod:`amqp_dissect.pipelines.wireshark.compare`
holds against ours."""

from __future__ import annotations

import calendar
import logging
import os
import re
from dataclasses import dataclass, field


# --------------------------------------------------------------------------- Wireshark side

P = "amqp.performative.arguments."

# Wireshark field -> (our spec field name, how its value is read)
#   uint: decimal ``show``; bool: ``show`` 0/1; str: the UTF-8 bytes (``value``);
#   bytes: hex of ``value``; choice: name in the showname, "mixed (2)" -> mixed;
#   compound: array/list/map items below it; time: 8-byte ms timestamp; guid: ``show``
WS_FIELDS = {
    P + "containerId": ("container-id", "str"),
    P + "hostname": ("hostname", "str"),
    P + "maxFrameSize": ("max-frame-size", "uint"),
    P + "channelMax": ("channel-max", "uint"),
    P + "idleTimeout": ("idle-time-out", "uint"),
    P + "outgoingLocales": ("outgoing-locales", "compound"),
    P + "outgoingLocales_sym": ("outgoing-locales", "str"),
    P + "incomingLocales": ("incoming-locales", "compound"),
    P + "incomingLocales_sym": ("incoming-locales", "str"),
    "amqp.arguments.offeredCapabilities": ("offered-capabilities", "compound"),
    "amqp.arguments.offeredCapabilities_sym": ("offered-capabilities", "str"),
    P + "desiredCapabilities": ("desired-capabilities", "compound"),
    P + "desiredCapabilities_sym": ("desired-capabilities", "str"),
    P + "properties": ("properties", "compound"),
    P + "nextIncomingId": ("next-incoming-id", "uint"),
    P + "deliveryCount": ("delivery-count", "uint"),  # flow, and the message header
    P + "linkCredit": ("link-credit", "uint"),
    P + "available": ("available", "uint"),
    P + "drain": ("drain", "bool"),
    P + "echo": ("echo", "bool"),
    P + "deliveryId": ("delivery-id", "uint"),
    P + "deliveryTag": ("delivery-tag", "bytes"),
    P + "messageFormat": ("message-format", "uint"),
    P + "settled": ("settled", "bool"),
    P + "more": ("more", "bool"),
    P + "state": ("state", "compound"),
    P + "resume": ("resume", "bool"),
    P + "aborted": ("aborted", "bool"),
    P + "batchable": ("batchable", "bool"),
    P + "first": ("first", "uint"),
    P + "last": ("last", "uint"),
    P + "closed": ("closed", "bool"),
    P + "remoteChannel": ("remote-channel", "uint"),
    P + "nextOutgoingId": ("next-outgoing-id", "uint"),
    P + "incomingWindow": ("incoming-window", "uint"),
    P + "outgoingWindow": ("outgoing-window", "uint"),
    P + "handleMax": ("handle-max", "uint"),
    P + "name": ("name", "str"),
    P + "handle": ("handle", "uint"),
    P + "role": ("role", "choice"),
    P + "sndSettleMode": ("snd-settle-mode", "choice"),
    P + "rcvSettleMode": ("rcv-settle-mode", "choice"),
    P + "unsettled": ("unsettled", "compound"),
    P + "incompleteUnsettled": ("incomplete-unsettled", "bool"),
    P + "initDeliveryCount": ("initial-delivery-count", "uint"),
    P + "maxMessageSize": ("max-message-size", "uint"),
    P + "address": ("address", "compound"),
    P + "address.string": ("address", "str"),
    P + "source.string": ("source", "str"),
    P + "target.string": ("target", "str"),
    P + "terminusDurable": ("durable", "choice"),
    "amqp.properties.expiryPolicy": ("expiry-policy", "str"),
    "amqp.properties.timeout": ("timeout", "uint"),
    "amqp.properties.dynamic": ("dynamic", "bool"),
    "amqp.properties.dynamicNodeProperties": ("dynamic-node-properties", "compound"),
    "amqp.properties.distributionMode": ("distribution-mode", "str"),
    "amqp.properties.filter": ("filter", "compound"),
    "amqp.properties.defaultOutcome": ("default-outcome", "compound"),
    "amqp.properties.outcomes": ("outcomes", "compound"),
    "amqp.properties.outcomes_sym": ("outcomes", "str"),
    "amqp.properties.capabilities": ("capabilities", "compound"),
    "amqp.properties.capabilities_sym": ("capabilities", "str"),
    "amqp.error.condition": ("condition", "str"),
    "amqp.error.description": ("description", "str"),
    "amqp.error.info": ("info", "compound"),
    "amqp.received.sectionNumber": ("section-number", "uint"),
    "amqp.received.sectionOffset": ("section-offset", "uint"),
    "amqp.modified.deliveryFailed": ("delivery-failed", "bool"),
    "amqp.modified.undeliverableHere": ("undeliverable-here", "bool"),
    "amqp.tx.arguments.globalId": ("global-id", "compound"),
    "amqp.tx.arguments.txnId": ("txn-id", "bytes"),
    "amqp.tx.arguments.fail": ("fail", "bool"),
    "amqp.tx.arguments.outcome": ("outcome", "compound"),
    "amqp.sasl.mechanisms": ("sasl-server-mechanisms", "compound"),
    "amqp.sasl.mechanisms_sym": ("sasl-server-mechanisms", "str"),
    "amqp.sasl.mechanism": ("mechanism", "str"),
    "amqp.sasl.initResponse": ("initial-response", "bytes"),
    "amqp.sasl.challenge": ("challenge", "bytes"),
    "amqp.sasl.response": ("response", "bytes"),
    "amqp.sasl.saslCode": ("code", "choice"),
    "amqp.sasl.addData": ("additional-data", "bytes"),
    # message header and properties sections
    "amqp.message.durable": ("durable", "bool"),
    "amqp.message.priority": ("priority", "uint"),
    "amqp.message.ttl": ("ttl", "uint"),
    "amqp.message.firstAcquirer": ("first-acquirer", "bool"),
    "amqp.message.messageId": ("message-id", "compound"),
    "amqp.message.messageId.uint": ("message-id", "uint"),
    "amqp.message.messageId.string": ("message-id", "str"),
    "amqp.message.messageId.bytes": ("message-id", "bytes"),
    "amqp.message.messageId.guid": ("message-id", "guid"),
    "amqp.message.userId": ("user-id", "bytes"),
    "amqp.message.to": ("to", "compound"),
    "amqp.message.to.string": ("to", "str"),
    "amqp.message.subject": ("subject", "str"),
    "amqp.message.replyTo": ("reply-to", "compound"),
    "amqp.message.replyTo.string": ("reply-to", "str"),
    "amqp.message.correlationId": ("correlation-id", "compound"),
    "amqp.message.correlationId.uint": ("correlation-id", "uint"),
    "amqp.message.correlationId.string": ("correlation-id", "str"),
    "amqp.message.correlationId.bytes": ("correlation-id", "bytes"),
    "amqp.message.correlationId.guid": ("correlation-id", "guid"),
    "amqp.message.contentType": ("content-type", "str"),
    "amqp.message.contentEncoding": ("content-encoding", "str"),
    "amqp.message.expiryTime": ("absolute-expiry-time", "time"),
    "amqp.message.creationTime": ("creation-time", "time"),
    "amqp.message.groupId": ("group-id", "str"),
    "amqp.message.groupSequence": ("group-sequence", "uint"),
    "amqp.message.replyToGroupId": ("reply-to-group-id", "str"),
}

# Wireshark fields that stand for a described composite value: the field is named
# after the value's type, not after the performative field that holds it.
WS_DESCRIBED = {
    P + "source": "source",
    P + "target": "target",
    P + "error": "error",
    "amqp.tx.coordinator": "coordinator",
    "amqp.tx.declare": "declare",
    "amqp.tx.discharge": "discharge",
    "amqp.tx.declared": "declared",
    "amqp.tx.transactionalState": "transactional-state",
    "amqp.delivery-state.received": "received",
    "amqp.delivery-state.accepted": "accepted",
    "amqp.delivery-state.rejected": "rejected",
    "amqp.delivery-state.released": "released",
    "amqp.delivery-state.modified": "modified",
    "amqp.lifetime-policy.deleteOnClose": "delete-on-close",
    "amqp.lifetime-policy.deleteOnNoLinks": "delete-on-no-links",
    "amqp.lifetime-policy.deleteOnNoMessages": "delete-on-no-messages",
    "amqp.lifetime-policy.deleteOnNoLinksOrMessages": "delete-on-no-links-or-messages",
}

_OUTCOMES = {"received", "accepted", "rejected", "released", "modified", "declared", "transactional-state"}


def _described_field(parent_type: str, value_type: str) -> str:
    """Which field of ``parent_type`` holds a described value of ``value_type``."""
    if value_type in ("source", "target", "error"):
        return value_type
    if value_type == "coordinator":
        return "target"
    if value_type in _OUTCOMES:
        return "default-outcome" if parent_type == "source" else "state"
    return f"@{value_type}"  # not a performative field: shows up as a disagreement


# message sections at the top level of an AMQP layer
WS_SECTIONS = {
    "amqp.header": ("header", "composite"),
    "amqp.deliveryAnnotations": ("delivery-annotations", "map"),
    "amqp.messageAnnotations": ("message-annotations", "map"),
    "amqp.properties": ("properties", "composite"),
    "amqp.applicationProperties": ("application-properties", "map"),
    "amqp.data": ("data", "data"),
    "amqp.sequence": ("amqp-sequence", "sequence"),
    "amqp.value": ("amqp-value", "value"),
    "amqp.footer": ("footer", "map"),
}

WS_FRAME_HEADER = {"amqp.length", "amqp.doff", "amqp.type", "amqp.channel", "amqp.performative", "amqp.sasl.method",
                   "amqp.method.arguments"}

SEVERITY_ERROR = 0x00800000


@dataclass
class WsNode:
    name: str
    showname: str
    show: str
    value: str
    pos: int
    size: int
    children: list = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.pos + self.size

    @property
    def label(self) -> str:
        """The showname after 'Label: '."""
        s = self.showname or ""
        return s.split(": ", 1)[1] if ": " in s else ""


@dataclass
class WsFrame:
    packet: int
    index: int
    record: dict
    errors: list  # Wireshark's error-level expert messages and malformed/dissector-bug markers
    endpoints: frozenset = frozenset()  # the packet's two "ip:port" ends (as our connection ids write them)


def _layer_fields(layer) -> list:
    """All PDML fields of one pyshark layer (pyshark keeps them by name; all repeats included)."""
    by_name = getattr(layer, "_all_fields", None)  # pyshark 0.6 XmlLayer: full field name -> container
    if isinstance(by_name, dict):
        containers = list(by_name.values())
    else:  # public API (field names are sanitised: 'amqp.' dropped, '.' -> '_')
        containers = [layer.get_field(name) for name in layer.field_names]
    out = []
    for container in containers:
        if container is not None:
            out.extend(container.all_fields)
    return out


def _int_attr(text) -> int | None:
    """A PDML attribute that holds a number (pos, size, severity), or None when the field has none."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _build_tree(fields: list) -> list[WsNode]:
    """Rebuild the layer's field tree from byte ranges: a field belongs to the closest
    preceding field whose [pos, pos+size) contains it.  A field PDML writes without a position
    is left out: Wireshark's "data" dissector, called by its AMQP 0-9-1 dissector for a content
    body of a media type it has no dissector for, is written as ``<field name="data" value=...>``
    with no pos and no size (its bytes are in its children ``data.data`` / ``data.len``, which
    have them)."""
    nodes = []
    for i, f in enumerate(fields):
        pos, size = _int_attr(f.pos), _int_attr(f.size)
        if pos is None:
            continue
        size = size or 0
        nodes.append((pos, -size, i, WsNode(f.name, f.showname or "", f.show or "", f.raw_value or "", pos, size)))
    nodes.sort(key=lambda t: t[:3])
    roots: list[WsNode] = []
    stack: list[WsNode] = []
    for _, _, _, n in nodes:
        while stack and not (stack[-1].pos <= n.pos and n.end <= stack[-1].end and stack[-1].size > 0):
            stack.pop()
        (stack[-1].children if stack else roots).append(n)
        stack.append(n)
    return roots


def _split_layer(layer):
    """-> (tree of the AMQP fields, error-level expert messages)."""
    fields = _layer_fields(layer)
    expert_text: set[str] = set()
    errors = []
    msgs = [f for f in fields if f.name == "_ws.expert.message"]
    sevs = [f for f in fields if f.name == "_ws.expert.severity"]
    for m, s in zip(msgs, sevs):
        expert_text.add(m.show)
        if (_int_attr(s.show) or 0) >= SEVERITY_ERROR:
            errors.append(m.show)
    amqp_fields = [f for f in fields
                   if not f.name.startswith("_ws.") and not (f.showname in expert_text and _int_attr(f.size) == 0)]
    return _build_tree(amqp_fields), errors


def _malformed_messages(layer) -> list[str]:
    out = []
    for f in _layer_fields(layer):
        if f.name == "_ws.expert.message":
            out.append(f.show)
        elif f.name == "_ws.malformed.dissector_bug":
            out.append(f.showname or f.show)
    return out or ["Malformed Packet"]


# -- values


def _str_value(n: WsNode) -> str:
    if n.value:
        try:
            return bytes.fromhex(n.value).decode("utf-8")
        except ValueError:
            pass
    return n.show


def _choice_value(n: WsNode) -> str:
    return re.sub(r" \(\d+\)$", "", n.label)


class Misshown:
    """A number Wireshark shows other than its own field's bytes say (``show`` against PDML's ``value``, the
    bytes of the number: a 2-, 4- or 8-byte field).  compare holds ours against both (see ws-ulong-id-high-32-bits)."""

    __slots__ = ("shown", "wire")

    def __init__(self, shown: int, wire: int):
        self.shown, self.wire = shown, wire

    def __repr__(self):
        return f"<shown {self.shown}, on the wire {self.wire}>"


def _uint(n: WsNode):
    if not n.show.isdigit():
        return f"<uint {n.show!r}>"
    shown = int(n.show)
    if n.size in (2, 4, 8) and len(n.value) == 2 * n.size:  # (1 byte: may be the uint0 constructor itself)
        try:
            wire = int(n.value, 16)
        except ValueError:
            return shown
        if wire != shown:
            return Misshown(shown, wire)
    return shown


def _scalar(n: WsNode, kind: str):
    if kind == "uint":
        return _uint(n)
    if kind == "bool":
        return n.show in ("1", "True", "true")
    if kind == "str":
        return _str_value(n)
    if kind == "bytes":
        return (n.value or n.show.replace(":", "")).lower()
    if kind == "choice":
        return _choice_value(n)
    if kind == "guid":
        return n.show.lower()
    if kind == "time":
        if len(n.value) == 16:
            return int(n.value, 16)
        return f"<time {n.show}>"
    raise AssertionError(kind)


_ITEM = re.compile(r"^(?P<label>.*?) ?\((?P<type>[a-z0-9-]+(?: of \d+ elements?)?)\)(?:: (?P<value>.*))?$", re.S)
_INT_TYPES = {"ubyte", "ushort", "uint", "smalluint", "uint0", "ulong", "smallulong", "ulong0",
              "byte", "short", "int", "smallint", "long", "smalllong"}
_STR_TYPES = {"str8-utf8", "str32-utf8", "sym8", "sym32", "string", "symbol"}
_BIN_TYPES = {"vbin8", "vbin32", "binary"}


_CUT_MARK = "[truncated]"  # PDML's prefix of a showname it cut (at 240 characters)
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                       "Dec"), 1)}
_WS_TIME = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}), (?P<year>\d{4}) "
                      r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<frac>\d{1,9}))?$")


def ws_timestamp_ms(text: str):
    """Wireshark's text of an AMQP timestamp ("Nov 14, 2023 22:13:20.123000000", UTC: tshark runs with
    TZ=UTC here) -> milliseconds since the epoch, or None when it is not that form."""
    m = _WS_TIME.match(text.strip())
    if m is None or m.group("mon") not in _MONTHS:
        return None
    secs = calendar.timegm((int(m.group("year")), _MONTHS[m.group("mon")], int(m.group("day")),
                            int(m.group("h")), int(m.group("m")), int(m.group("s")), 0, 0, 0))
    frac = (m.group("frac") or "0").ljust(9, "0")
    return secs * 1000 + int(frac) // 1_000_000


def _parse_item(n: WsNode):
    """-> (label, value) of an array/list/map item, from its showname "label (type): value"."""
    if n.name in WS_DESCRIBED:
        t = WS_DESCRIBED[n.name]
        return t, _composite(n, t)
    show = n.showname
    cut = show.lstrip().startswith(_CUT_MARK)
    if cut:  # the value's text is a prefix of Wireshark's
        show = show.lstrip()[len(_CUT_MARK):]
    m = _ITEM.match(show)
    if m is None:
        return n.showname, f"<unparsed {n.showname!r}>"
    label, typ, text = m.group("label"), m.group("type"), m.group("value")
    if cut and text is not None and " of " not in typ:
        return label, CutFrame(text.lower() if typ in _BIN_TYPES else text)
    if " of " in typ:
        kind = typ.split(" ", 1)[0]
        return label, _items(n, as_map=(kind == "map"))
    if text is None:
        return label, _untexted_value(typ)
    return label, _typed_value(typ, text)


def _untexted_value(typ: str):
    """The value of an item Wireshark shows with a type and no text: null, true, false."""
    if typ == "null":
        return None
    if typ in ("true", "false"):
        return typ == "true"
    return f"<{typ}>"


def _typed_value(typ: str, text: str):
    """An item's value from its type and Wireshark's text of it; "<type text>" when it is not read."""
    if typ in _INT_TYPES:
        return _number(int, typ, text)
    if typ in _STR_TYPES:
        return Truncatable(text)
    if typ in _BIN_TYPES:
        return Truncatable(text.lower())
    if typ in ("bool", "boolean", "true", "false"):
        return text.strip().lower() in ("true", "1")
    if typ in ("float", "double"):
        return _number(float, typ, text)  # (Python reads Wireshark's inf, -inf and nan too)
    if typ == "uuid":  # Wireshark: 8-4-4-4-12 hex digits, as ours
        return text.strip().lower()
    if typ == "char":
        return text
    if typ == "timestamp":
        ms = ws_timestamp_ms(text)
        return ms if ms is not None else f"<{typ} {text}>"
    return f"<{typ} {text}>"  # decimal32/64/128: Wireshark says "(not supported)" (see KNOWN)


def _number(read, typ: str, text: str):
    """Wireshark's text of a number read by ``read`` (int, float), or "<type text>" when it is none."""
    try:
        return read(text)
    except ValueError:
        return f"<{typ} {text}>"


class Truncatable(str):
    """A text value from a showname: Wireshark cuts long ones and ends them with '…'."""


class CutFrame(str):
    """The start of a value's text: its showname was cut (PDML's " [truncated]" prefix)."""


def _items(n: WsNode, as_map: bool):
    if as_map:
        return {label: v for label, v in (_parse_item(c) for c in n.children)}
    return [v for _, v in (_parse_item(c) for c in n.children)]


def _compound(n: WsNode):
    m = _ITEM.match(n.showname)
    if m and m.group("type").startswith("map"):
        return _items(n, as_map=True)
    if m and " of " in m.group("type"):
        return _items(n, as_map=False)
    if len(n.children) == 1 and n.children[0].name in WS_DESCRIBED:
        return _parse_item(n.children[0])[1]
    return {"@unparsed": n.showname}


def _composite(n: WsNode, type_name: str) -> dict:
    d = {"@type": type_name}
    d.update(_arguments(n.children, type_name))
    return d


def _arguments(children: list, parent_type: str) -> dict:
    out: dict = {}
    for c in children:
        if c.name in WS_DESCRIBED:
            t = WS_DESCRIBED[c.name]
            key, value = _described_field(parent_type, t), _composite(c, t)
        elif c.name in WS_FIELDS:
            key, kind = WS_FIELDS[c.name]
            value = _compound(c) if kind == "compound" else _scalar(c, kind)
        else:
            key, value = f"@unmapped:{c.name}", c.showname
        if key in out:
            key = f"{key}@dup"
        out[key] = value
    return out


def _ws_record(tree: list[WsNode]) -> dict:
    top = {}
    for n in tree:
        top.setdefault(n.name, n)
    if _other_protocol(top):
        # Wireshark's AMQP 0-9-1 / 0-10 / 0-8 dissector (its protocol header has id_major / id_minor, its
        # frames no doff): another protocol, not compared (see compare_capture)
        return {"kind": "other-protocol"}
    if "amqp.init.protocol" in top:
        return _header_record(top)
    rec: dict = {
        "size": int(top["amqp.length"].show),
        "doff": int(top["amqp.doff"].show),
        "channel": int(top["amqp.channel"].show),
    }
    frame_end = top["amqp.length"].pos + rec["size"]
    ftype = int(top["amqp.type"].show)
    perf = top.get("amqp.performative") or top.get("amqp.sasl.method")
    if perf is None:
        rec["kind"] = "heartbeat" if rec["size"] == rec["doff"] * 4 and ftype == 0 else f"type-{ftype}-empty"
        rec["performative"] = None
        return rec
    rec["kind"] = {0: "amqp", 1: "sasl"}.get(ftype, f"type-{ftype}")
    rec["performative"] = _choice_value(perf).replace(".", "-")
    rec["descriptor"] = int(perf.show)
    args = top.get("amqp.method.arguments")
    rec["fields"] = _arguments(args.children, rec["performative"]) if args is not None else {}
    message = _message(tree, frame_end)
    if message:
        rec["message"] = message
    return rec


def _other_protocol(top: dict) -> bool:
    """Whether a layer's top fields (name -> first node) are those of Wireshark's dissector of another AMQP
    version: a protocol header without an id, or a frame without a doff or a length."""
    if "amqp.init.protocol" in top:
        return "amqp.init.id" not in top
    return "amqp.doff" not in top or "amqp.length" not in top


def _header_record(top: dict) -> dict:
    """The record of a protocol header Wireshark shows."""
    return {
        "kind": "header",
        "fields": {
            "protocol-id": int(top["amqp.init.id"].show),
            "version": ".".join(top[f"amqp.init.version_{p}"].show for p in ("major", "minor", "revision")),
        },
    }


def _message(tree: list[WsNode], frame_end: int) -> dict:
    """The message sections Wireshark shows in a frame (those whole within it), and what it shows
    there that is no section (under "@unparsed")."""
    message: dict = {}
    for n in tree:
        if n.name in WS_FRAME_HEADER:
            continue
        if n.name not in WS_SECTIONS:
            message.setdefault("@unparsed", []).append(_parse_item(n)[1] if n.name == "amqp.list" else n.showname)
        elif n.end <= frame_end:  # (else cut by the end of the frame: not a whole section)
            _add_section(message, n)
    return message


def _add_section(message: dict, n: WsNode) -> None:
    """Add a message section Wireshark shows to ``message``."""
    key, how = WS_SECTIONS[n.name]
    if how == "composite":
        message[key] = _arguments(n.children, key)
    elif how == "map":
        message[key] = _items(n, as_map=True)
    elif how == "data":
        message.setdefault(key, []).append((n.value or n.show.replace(":", "")).lower())
    elif how == "sequence":
        message.setdefault(key, []).append(_items(n, as_map=False))
    else:  # amqp-value: "AMQP-Value (type): value", or a compound with items below
        message[key] = _parse_item(n)[1]


def _endpoints(pkt) -> frozenset:
    """The two ends of a packet's TCP connection, written as our connection ids write them."""
    try:
        tcp = pkt.tcp
        if hasattr(pkt, "ipv6"):
            return frozenset((f"[{pkt.ipv6.src}]:{tcp.srcport}", f"[{pkt.ipv6.dst}]:{tcp.dstport}"))
        return frozenset((f"{pkt.ip.src}:{tcp.srcport}", f"{pkt.ip.dst}:{tcp.dstport}"))
    except AttributeError:
        return frozenset()


def wireshark_frames(pcap, attempts: int = 3, ports=(), keylog_file=None) -> dict[int, list[WsFrame]]:
    """packet number -> the AMQP layers Wireshark shows in it, in order (via pyshark).  A tshark
    process that dies (seen once on a loaded machine: exit 255 with no error of its own) is run
    again, up to ``attempts`` times; what it decodes is never retried into agreement."""
    from pyshark.capture.capture import TSharkCrashException

    for attempt in range(attempts):
        try:
            return _wireshark_frames_once(pcap, ports, keylog_file)
        except TSharkCrashException:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _wireshark_frames_once(pcap, ports=(), keylog_file=None) -> dict[int, list[WsFrame]]:
    import pyshark

    tz = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"  # tshark writes timestamps in local time: UTC here (ws_timestamp_ms)
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addFilter(_lost_exit_status)
    try:
        return _read_ws(pyshark, pcap, ports, keylog_file)
    finally:
        asyncio_log.removeFilter(_lost_exit_status)
        if tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = tz


def _read_ws(pyshark, pcap, ports, keylog_file) -> dict[int, list[WsFrame]]:
    cap = pyshark.FileCapture(str(pcap), display_filter="amqp", keep_packets=False,
                              decode_as={f"tcp.port=={p}": "amqp" for p in ports} or None,
                              override_prefs={"tls.keylog_file": str(keylog_file)} if keylog_file else None)
    out: dict[int, list[WsFrame]] = {}
    try:
        for pkt in cap:
            number = int(pkt.number)
            frames = out.setdefault(number, [])
            ends = _endpoints(pkt)
            for layer in pkt.layers:
                if layer.layer_name == "amqp":
                    tree, errors = _split_layer(layer)
                    frames.append(WsFrame(number, len(frames), _ws_record(tree), errors, ends))
                elif layer.layer_name == "_ws.malformed" and frames:
                    frames[-1].errors.extend(_malformed_messages(layer))
    finally:
        _close(cap)
    return out


def _lost_exit_status(record: logging.LogRecord) -> bool:
    """asyncio's child watcher warns on stderr when it cannot read tshark's exit status ("Unknown
    child process pid N, will report returncode 255"); pyshark then reports a crash, which
    :func:`wireshark_frames` meets by running tshark again: the warning is not the user's to read."""
    return not record.getMessage().startswith("Unknown child process pid")


def _close(cap) -> None:
    """Stop the capture's tshark.  When pyshark finds its tshark dead at close (exit 255; on a
    loaded machine asyncio's child watcher can lose the exit status and report 255 too), it raises
    before forgetting the process, and its ``__del__`` would close again and print the same
    exception as an unraisable traceback when the object is collected: the process is forgotten
    here, and the exception goes on to :func:`wireshark_frames`, which runs tshark again."""
    try:
        cap.close()
    except Exception:
        cap._running_processes.clear()  # pyshark keeps no public way to drop a dead process
        raise
