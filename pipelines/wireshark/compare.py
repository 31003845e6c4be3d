"""``amqp-dissect compare``: our frames cross-checked against Wireshark's AMQP 1.0 dissector.

tshark is run once on the capture through :class:`pyshark.FileCapture` (PDML output, display
filter ``amqp``).  Every AMQP layer Wireshark shows (protocol headers, SASL frames, AMQP frames,
heartbeats; several per packet, in stream order) is matched to our frame by packet number and
order within the packet, and compared:

* frame kind, channel, size, doff, performative (name and descriptor code);
* every argument Wireshark shows, nested composites (source, target, coordinator, delivery
  states, error) and compound values (arrays, maps) included, with its value normalised (numbers
  as decimal, booleans, binary as hex, settle modes / role / terminus durability / SASL code by
  their choice name);
* the message sections of a transfer (header, annotations, properties, application-properties,
  body);
* and, the other way round, every field we decode with a non-null value must be shown by
  Wireshark;
* Malformed: Wireshark's error-level expert items and "[Malformed Packet]" on a frame against our
  error notes on it.

pyshark flattens the PDML tree of a layer into fields by name; each field keeps its byte offset
and size, so the tree is rebuilt from byte ranges (a field is inside the nearest earlier field
whose range contains it).

Every disagreement is classified against :data:`KNOWN`, the defects of Wireshark's dissector
(4.0) this tool knows about, each with the reason.  A disagreement no entry explains is either a
bug of ours or a Wireshark defect not listed yet.

:data:`KNOWN`: keys of an entry
-------------------------------

Keys of an entry:

``id``
    short name, used in failure messages.
``samples``
    fnmatch pattern on the sample name (file stem), ``"*"`` for every sample.
``packets``
    ``None``, or the exact packet numbers the disagreement occurs in (each must
    occur).
``frames``
    which frames the rule covers, from the vocabulary of :data:`FRAME_CONDITIONS`:

    * ``"any"``: every frame;
    * ``"first-fragment"``: the first transfer frame of a delivery that spans
      several transfer frames (``more=true`` on all but the last);
    * ``"continuation-fragment"``: the other transfer frames of such a delivery
      (including the last one, ``more=false``);
    * ``"long-descriptor"``: a performative whose descriptor is not a small ulong;
    * ``"zero-length-binary"``: a frame whose performative or message holds a binary
      value of zero bytes;
    * ``"not-continuation"``: every frame but a continuation fragment (whose values are
      garbage to Wireshark, see ws-continuation-fragment-as-message).
    * ``"after-ws-assertion"``: a frame Wireshark did not decode because it failed a
      dissector assertion on an earlier frame of the same packet (see
      :func:`stopped_by_assertion`);
    * ``"described-body"``: a frame whose message's amqp-value body is a described value.
    * ``"none-shown-after-gap"``: (``@frames`` only) a packet of which Wireshark shows no AMQP frame,
      all of whose frames (ours) come after bytes lost in their direction.
``paths``
    fnmatch patterns on the disagreeing path of the normalised frame record
    (``fields.<spec field name>...``, ``message.<section>...``, ``@errors`` =
    Wireshark/ours reported a malformed frame or an error-level expert item,
    ``@frames`` = not the same number of AMQP frames in a packet, ``@not-decoded`` = one of
    our frames after the frame Wireshark stopped the packet at).
``ws_errors``
    optional list of fnmatch patterns: Wireshark's error messages on the frame
    that the rule explains; an ``@errors`` disagreement is covered only if every
    one of Wireshark's messages on that frame matches one of them.
``ws_errors_all_paths``
    optional, true: the ``ws_errors`` condition holds for every path, not only ``@errors``
    (Wireshark stopped decoding the frame: what it does not show is explained by its error
    and nothing else).
``ws_values``
    optional list of fnmatch patterns: Wireshark's value (its text) must match one of them
    (on every path but ``@errors``; ``"<not shown>"``: Wireshark shows nothing there).
``every_frame``
    if true, every frame the ``frames`` condition selects (in the samples the
    entry applies to) must actually show a disagreement covered by the entry;
    otherwise at least one disagreement must match.
``why``
    the reason, checked by hand against the captures and tshark 4.0.17.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import math
import os
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from amqp_dissect.amqp import codec
from amqp_dissect.amqp.framing import AmqpConnection, Frame, OtherProtocolNote, ProtocolHeader, StreamNote
from amqp_dissect.amqp.spec import COMPOSITES, descriptor_name
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.events import PacketNote, StreamGap
from amqp_dissect.render.frames import event_json

from .pdml import Misshown, WsFrame, CutFrame, Truncatable, wireshark_frames


# --------------------------------------------------------------------------- the known defects

# Wireshark 4.0 decodes the payload of each transfer frame on its own, as if it
# were a complete message: it does not reassemble a delivery split over several
# transfer frames (the spec's ``more`` flag).  We reassemble the delivery and show
# its message once, attributed (for this comparison) to the delivery's first frame.
#
# Wireshark 4.0 also reads a performative's descriptor as if it were always a
# small ulong (00 53 XX): it takes the third byte of the frame body as the
# performative code.  The spec allows any ulong encoding and the symbolic form.

KNOWN = [
    {
        "id": "ws-first-fragment-cut-section",
        "samples": "*",
        "packets": None,
        "frames": "first-fragment",
        "paths": [
            "@errors",
            "message.data*",
            "message.amqp-value*",
            "message.amqp-sequence*",
            "message.footer*",
        ],
        "ws_errors": ["Malformed Packet (Exception occurred)"],
        "every_frame": True,
        "why": (
            "First transfer frame of a multi-frame delivery (more=true): Wireshark decodes the frame's "
            "payload as a whole message. The sections that fit in the frame (header, annotations, "
            "properties) are decoded correctly and are compared with our reassembled message, but the "
            "body section runs past the end of the frame, so Wireshark throws, omits the body and marks "
            "the packet '[Malformed Packet: AMQP]'. We show the whole body from the reassembled delivery."
        ),
    },
    {
        "id": "ws-continuation-fragment-as-message",
        "samples": "*",
        "packets": None,
        "frames": "continuation-fragment",
        "paths": ["@errors", "message", "message.*"],
        "ws_errors": [
            "Unknown AMQP type * of field *",
            "Malformed Packet (Exception occurred)",
            "Odd number of map items: *",
            "Number of list elements (*) bigger than list size (*)",
            "Number of list elements (*) not matching number of decoded elements (*)",
            "Number of array elements (*) not matching number of decoded elements (*)",
            "*failed assertion*",
        ],
        "every_frame": True,
        "why": (
            "Second and later transfer frames of a multi-frame delivery: their payload is the middle or "
            "end of a data section, not the start of a message. Wireshark still decodes it as message "
            "sections, so it shows garbage top-level 'list-item' values of whatever type the fragment's "
            "bytes happen to name, with expert errors 'Unknown AMQP type N of field \"list-item\"', "
            "'Odd number of map items', 'Number of list elements ... bigger than list size', "
            "'[Malformed Packet: AMQP]' and even a dissector bug (tvbuff.c failed assertion \"len > 0\"). "
            "These frames carry no message of their own: we reassemble the fragments and report the "
            "message once for the whole delivery."
        ),
    },
    {
        "id": "ws-zero-length-binary-assertion",
        "samples": "*",
        "packets": None,
        "frames": "zero-length-binary",
        "paths": ["@errors", "message", "message.*", "fields.*"],
        "ws_errors": ['*tvbuff.c:* failed assertion "len > 0"*'],
        "ws_errors_all_paths": True,
        "ws_values": ["<not shown>", "{}", "[]"],
        "every_frame": False,
        "why": (
            "A binary value of zero bytes (vbin8 0x00, allowed by the spec) in a message section: Wireshark "
            "4.0 asks its tvbuff for a zero-length subset, fails the dissector assertion 'tvbuff.c failed "
            "assertion \"len > 0\"' and stops decoding the packet, so the value and the sections after it "
            "are not shown (the frames after it in the packet neither: ws-assertion-stops-packet). We decode "
            "the empty binary and the rest of the message; what Wireshark did show before it is compared."
        ),
    },
    {
        "id": "ws-assertion-stops-packet",
        "samples": "*",
        "packets": None,
        "frames": "after-ws-assertion",
        "paths": ["@not-decoded"],
        "ws_errors": ["*failed assertion*"],
        "ws_errors_all_paths": True,
        "every_frame": True,
        "why": (
            "The AMQP frames that follow, in the same packet, a frame on which Wireshark failed a dissector "
            "assertion (tvbuff.c 'failed assertion \"len > 0\"', on a zero-length binary: "
            "ws-zero-length-binary-assertion): the assertion is an exception that ends the dissection of the "
            "whole packet, so Wireshark shows no AMQP layer for the rest of the TCP segment (fewer frames in "
            "that packet than there are). Each frame it left out is one disagreement here; the frames before "
            "it in the packet are compared value by value, and the frames of the next packets as usual."
        ),
    },
    {
        "id": "ws-described-value-bare",
        "samples": "*",
        "packets": None,
        "frames": "not-continuation",
        "paths": ["fields.*.@descriptor", "message.*.*.@descriptor", "message.*]*.@descriptor"],
        "ws_values": ["<not shown>"],
        "every_frame": False,
        "why": (
            "A described value inside a map or a list (a source's filter-set: each filter is a described "
            "value, e.g. the selector filters apache.org:selector-filter:string or the JMS selector "
            "0x0000468C00000004): Wireshark 4.0 shows the bare value under the key and writes the "
            "descriptor only into the key's label when it is a symbol ('selector : "
            "apache.org:selector-filter:string'), not at all when it is a ulong (a list item's symbol "
            "descriptor takes the place of its label 'list-item'). compare reads a symbol descriptor from a "
            "map key's label and compares the value under the bare key; a descriptor it cannot read from "
            "Wireshark's text is this disagreement (the value beside it is still compared)."
        ),
    },
    {
        "id": "ws-described-body-unknown-type",
        "samples": "*",
        "packets": None,
        "frames": "described-body",
        "paths": ["@errors", "message.amqp-value", "message.amqp-value.*"],
        "ws_errors": ['Unknown AMQP type 0 (0x0) of field "AMQP-Value"'],
        "every_frame": True,
        "why": (
            "An amqp-value body section whose value is itself a described value (constructor 0x00, allowed "
            "by the spec: any AMQP value): Wireshark 4.0 reads the 0x00 constructor as a type code, reports "
            "'Unknown AMQP type 0 (0x0) of field \"AMQP-Value\"' and shows neither the descriptor nor the "
            "value. The sections before the body are compared as usual."
        ),
    },
    {
        "id": "ws-ulong-id-high-32-bits",
        "samples": "*",
        "packets": None,
        "frames": "not-continuation",
        "paths": ["message.properties.message-id", "message.properties.correlation-id"],
        "ws_values": ["<shown as the high 32 bits *, on the wire *>"],
        "every_frame": False,
        "why": (
            "A message-id or correlation-id of type ulong written in its 8-byte form (0x80): Wireshark 4.0 "
            "shows only the upper 32 bits of the number ('Message-Id: 0' for 7005, 256 for 2^40+3), though "
            "the 8 bytes of its own field (PDML value) hold the whole number. Explained only when our value "
            "is the number those bytes hold; the smallulong form (0x53) is shown right and compared as usual."
        ),
    },
    {
        "id": "ws-reassembly-stuck-after-gap",
        "samples": "*",
        "packets": None,
        "frames": "none-shown-after-gap",
        "paths": ["@frames"],
        "every_frame": False,
        "why": (
            "Packets after bytes lost from the capture in one direction (segments the capture lacks; we report "
            "the gap and its size): when the gap cut an AMQP frame, Wireshark 4.0's TCP reassembly keeps "
            "waiting for the rest of that frame, and takes every later segment of that direction as more of it ('TCP segment of "
            "a reassembled PDU'), so it shows no AMQP frame in them. We find the frame boundaries again after "
            "the gap and decode the frames that follow. Each such packet is one disagreement (its frames are "
            "not compared); a packet where Wireshark shows some frames is not covered."
        ),
    },
    {
        "id": "ws-decimal-not-supported",
        "samples": "*",
        "packets": None,
        "frames": "not-continuation",
        "paths": ["message.*", "fields.*"],
        "ws_values": ["<decimal32 (not supported)>", "<decimal64 (not supported)>", "<decimal128 (not supported)>"],
        "every_frame": False,
        "why": (
            "decimal32, decimal64 and decimal128 values (IEEE 754 decimal floating point): Wireshark 4.0 "
            "shows '(not supported)' instead of the value. We show the value's bytes in hex (as the "
            "encoding is on the wire)."
        ),
    },
    {
        "id": "ws-descriptor-not-smallulong",
        "samples": "*",
        "packets": None,
        "frames": "long-descriptor",
        "paths": ["*"],
        "every_frame": True,
        "why": (
            "A performative whose descriptor is not encoded as a small ulong (00 53 XX) but as a full "
            "ulong (00 80 + 8 bytes) or as its symbol (00 a3 ... 'amqp:attach:list'), both allowed by "
            "the spec (1.2 'descriptor' and 3.2): Wireshark reads the third byte of the frame body as "
            "the performative code without looking at the descriptor's constructor, so it shows "
            "'Unknown AMQP performative 0' for the ulong form and, for the symbol form, the "
            "performative whose code is the symbol's length (16: open) with garbage arguments."
        ),
    },
]


def descriptor_form(frame) -> str | None:
    """How a frame's performative descriptor was encoded: "smallulong" (00 53 XX), "ulong" (any
    other ulong encoding), "symbol", or None (no performative).  The codec hands out one cached
    ULong object per small-ulong code (00 53 XX) and a new one for any other encoding
    (tests/pipelines/test_compare.py checks that this still tells the three forms apart)."""
    if frame.kind == "heartbeat":
        return None
    p = frame.performative
    if p is None:
        return None
    desc = p.descriptor
    if isinstance(desc, str):
        return "symbol"
    if isinstance(desc, int) and 0 <= desc < 256 and desc is _small_descriptor(int(desc)):
        return "smallulong"
    return "ulong"


_SMALL: dict = {}


def _small_descriptor(code: int):
    """The descriptor object the codec gives a small-ulong descriptor ``00 53 code``."""
    d = _SMALL.get(code)
    if d is None:
        d = _SMALL[code] = codec.Reader(bytes([0x00, 0x53, code, 0x45]), 0, 4).value().descriptor
    return d


# --------------------------------------------------------------------------- our side


@dataclass
class OurFrame:
    packet: int
    index: int
    record: dict
    tags: set
    errors: list
    conn: str = ""


def our_frames(pcap, ports=(), keylog=None) -> dict[int, list[OurFrame]]:
    """packet number -> our AMQP frames and protocol headers in it, in order, each as the record
    :func:`compare_frame` compares, tagged with what the known defects need to know."""
    events, taps = _dissect_all(pcap, ports, keylog)
    others = {e.conn: e for e in events if type(e) is OtherProtocolNote}
    websocket = {e.conn for e in events if _is_websocket_note(e)}
    frames = [e for e in events if isinstance(e, (Frame, ProtocolHeader)) and e.conn not in others]
    tags: dict[int, set] = {id(e): set() for e in frames}
    message_of = _tag_fragments(frames, tags)
    for e in _after_gap(events):
        tags[id(e)].add("after-gap")
    for e in frames:
        tags[id(e)].update(_shape_tags(e))

    out: dict[int, list[OurFrame]] = {}
    for e in frames:
        rec, errors = _our_record(e, message_of)
        lst = out.setdefault(e.packet, [])
        lst.append(OurFrame(e.packet, len(lst), rec, tags[id(e)], errors, e.conn))
    if others:
        out[OTHERS] = others  # (compare_capture takes these out)
    if websocket:
        out[WEBSOCKET] = {c: ([e.packet for e in frames if e.conn == c], taps.get(c)) for c in websocket}
    return out


def _is_websocket_note(e) -> bool:
    """Whether the event is the note of a WebSocket found on a connection (its upgrade)."""
    return type(e) is PacketNote and e.note.group == "websocket" and bool(e.conn)


def _dissect_all(pcap, ports, keylog) -> tuple[list, dict]:
    """Every event of the capture, and the WebSocket connections' taps (conn -> :class:`_Tap` or None)."""
    d = Dissector(extra_ports=ports, keylog=keylog)
    events = []
    taps: dict = {}  # WebSocket connection -> the AMQP stream unwrapped from it (_Tap)
    with open(pcap, "rb") as fh:
        reader = open_capture(fh)
        reader.on_secrets = d.add_secrets
        for rec in reader:
            got = d.feed(rec)
            events.extend(got)
            for e in got:  # a WebSocket found (its upgrade note): tap the AMQP stream inside it
                if _is_websocket_note(e) and e.conn not in taps:
                    taps[e.conn] = _tap(d, e.conn)
    events.extend(d.finish())
    return events, taps


def _tag_fragments(frames: list, tags: dict[int, set]) -> dict[int, dict | None]:
    """Tag the transfer frames of deliveries split over several frames ("first-fragment",
    "continuation-fragment") -> id(frame) -> the message to compare on that frame (the whole
    delivery's on its first frame, None on the others)."""
    message_of: dict[int, dict | None] = {}  # id(frame) -> message to compare on that frame
    open_delivery: dict[tuple, list] = {}  # link -> transfer frames of the delivery so far
    for e in frames:
        if not isinstance(e, Frame) or e.name != "transfer":
            continue
        sofar = _delivery_so_far(e, open_delivery)
        if sofar is None or len(sofar) == 1:
            continue
        _tag_delivery(sofar, tags)
        for f in sofar[1:]:
            message_of[id(f)] = None
        message_of[id(sofar[0])] = event_json(e).get("message")
    for frames_left in open_delivery.values():  # capture ends mid-delivery
        _tag_delivery(frames_left, tags)
    return message_of


def _delivery_so_far(e, open_delivery: dict[tuple, list]) -> list | None:
    """Add transfer frame ``e`` to the delivery open on its link -> the delivery's frames if ``e`` ends
    it (its last frame, or aborted), else None (more to come, or a delivery in one frame)."""
    p = e.performative
    link = (e.conn, e.direction, e.channel, p.field("handle"))
    more = p.field("more") is True
    sofar = open_delivery.get(link)
    if sofar is None and not more:
        return None  # a delivery in one frame: its own message
    if sofar is None:
        open_delivery[link] = sofar = []
    sofar.append(e)
    if more and p.field("aborted") is not True:
        return None
    del open_delivery[link]
    return sofar


def _tag_delivery(frames: list, tags: dict[int, set]) -> None:
    """Tag the frames of one delivery: its first and the continuation fragments."""
    tags[id(frames[0])].add("first-fragment")
    for f in frames[1:]:
        tags[id(f)].add("continuation-fragment")


def _shape_tags(e) -> set:
    """The tags of a frame's encoding the known defects select on: "long-descriptor",
    "zero-length-binary", "described-body"."""
    found = set()
    if not isinstance(e, Frame):
        return found
    if descriptor_form(e) not in (None, "smallulong"):
        found.add("long-descriptor")
    if e.kind != "heartbeat" and _zero_length_binary(e):
        found.add("zero-length-binary")
    if e.kind != "heartbeat" and _described_body(e):
        found.add("described-body")
    return found


def _our_record(e, message_of: dict[int, dict | None]) -> tuple[dict, list]:
    """The record :func:`compare_frame` compares for our frame or protocol header, and our error
    notes on it."""
    j = event_json(e)
    errors = [n.message for n in e.notes if n.severity == "error"]
    if isinstance(e, ProtocolHeader):
        return {"kind": "header", "fields": {"protocol-id": e.protocol_id, "version": j["fields"]["version"]}}, errors
    rec = {"size": j["size"], "doff": j["doff"], "channel": j["channel"], "kind": j["type"],
           "performative": j["performative"]}
    if j["performative"] is not None:
        rec["descriptor"] = COMPOSITES[j["performative"]].descriptor_code & 0xFFFFFFFF
        rec["fields"] = j["fields"]
    message = message_of.get(id(e), j.get("message"))
    if message is not None:
        rec["message"] = message
    if j.get("message_error"):
        errors.append(j["message_error"])
    return rec, errors


class _Tap:
    """Stands for the AMQP decoder of a WebSocket connection (inside its Layered stack) and keeps the
    unwrapped AMQP stream, chunk by chunk with its packet, for tshark (:func:`unwrapped_capture`)."""

    def __init__(self, inner, client: str, server: str):
        self.inner = inner
        self.client, self.server = client, server
        self.chunks: list = []  # (direction, data, ts, packet)
        self.whole = True  # False: bytes were lost (a gap): not given to tshark

    def feed(self, direction, data, ts, packet):
        self.chunks.append((direction, bytes(data), ts, packet))
        return self.inner.feed(direction, data, ts, packet)

    def gap(self, direction, size, ts, packet):
        self.whole = False
        return self.inner.gap(direction, size, ts, packet)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _tap(d, conn: str):
    """Put a :class:`_Tap` in front of the AMQP decoder of WebSocket connection ``conn``, if no AMQP byte
    reached it yet (else None: its stream would be incomplete)."""
    stack = d.connections.get(conn)
    stack = getattr(stack, "target", stack)  # (a Sniffing connection: the Layered stack it made)
    inner = getattr(stack, "amqp", None)
    if inner is None or not hasattr(stack, "layers") or not isinstance(inner, AmqpConnection):
        return None
    # (a direction's state is made at its first byte: None, none came yet)
    if inner.frames or any(x is not None and (x.buf or x.mode != 0) for x in (inner.dir0, inner.dir1)):
        return None
    tap = _Tap(inner, inner.client, inner.server)
    stack.amqp = tap
    return tap


def _ip_port(endpoint: str) -> tuple:
    host, port = endpoint.rsplit(":", 1)
    return ipaddress.ip_address(host.strip("[]")), int(port)


def unwrapped_capture(taps: dict, path) -> dict:
    """Write the AMQP streams of the tapped WebSocket connections (conn -> :class:`_Tap`) as plain TCP
    segments (raw IP, no handshake; one segment per chunk, in the original order) to ``path``, for
    tshark to decode as AMQP.  -> synthetic packet number -> the original packet of its bytes."""
    chunks = sorted(((ts, packet, i, conn, direction, data) for conn, tap in taps.items()
                     for i, (direction, data, ts, packet) in enumerate(tap.chunks)), key=lambda c: (c[1], c[0]))
    seq: dict = {}
    where: dict = {}
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 101)]  # LINKTYPE_RAW (IPv4 / IPv6)
    for n, (ts, packet, _, conn, direction, data) in enumerate(chunks, 1):
        tap = taps[conn]
        (sa, sp), (da, dp) = _ip_port(tap.client), _ip_port(tap.server)
        if direction == 1:
            (sa, sp), (da, dp) = (da, dp), (sa, sp)
        k = (conn, direction)
        mine, theirs = seq.get(k, 1), seq.get((conn, 1 - direction), 1)
        seq[k] = (mine + len(data)) & 0xFFFFFFFF
        tcp = struct.pack(">HHIIBBHHH", sp, dp, mine, theirs, 5 << 4, 0x18, 65535, 0, 0) + data
        if sa.version == 4:
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, sa.packed, da.packed)
        else:
            ip = struct.pack(">IHBB16s16s", 6 << 28, len(tcp), 6, 64, sa.packed, da.packed)
        pkt = ip + tcp
        sec, frac = divmod(ts // 1000, 1_000_000)  # (nanoseconds: a microsecond pcap record)
        out.append(struct.pack("<IIII", sec, frac, len(pkt), len(pkt)) + pkt)
        where[n] = packet
    Path(path).write_bytes(b"".join(out))
    return where


OTHERS = -1  # our_frames' key of the connections of other protocols: conn id -> its OtherProtocolNote
WEBSOCKET = -2  # our_frames' key of the AMQP-over-WebSocket connections: conn id -> packets of our frames on it


def _zero_length_binary(frame) -> bool:
    """Whether the frame's performative or the message it completes holds a binary of zero bytes."""
    values = [frame.performative]
    dl = getattr(frame, "delivery", None)
    if dl is not None:
        values.append(dl.sections())
    return any(_has_empty_bytes(v, 0) for v in values)


def _after_gap(events: list) -> list:
    """Our frames that come after bytes lost in their direction of their connection: a StreamGap, or the TCP
    layer's note of bytes missing from the capture (a reassembly StreamNote that skipped bytes), before them."""
    lost: set = set()
    out = []
    for e in events:
        if type(e) is StreamGap or (type(e) is StreamNote and e.note.group == "reassembly" and e.skipped):
            lost.add((e.conn, e.direction))
        elif isinstance(e, Frame) and (e.conn, e.direction) in lost:
            out.append(e)
    return out


def _described_body(frame) -> bool:
    """Whether the message the frame completes has an amqp-value body that is a described value."""
    dl = getattr(frame, "delivery", None)
    sections = dl.sections() if dl is not None else None
    for section in sections or ():
        if (isinstance(section, codec.Described) and descriptor_name(section.descriptor) == "amqp-value"
                and isinstance(section.value, codec.Described)):
            return True
    return False


def _has_empty_bytes(v, depth: int) -> bool:
    if depth > 100:  # (the codec's nesting cap is lower)
        return False
    if isinstance(v, (bytes, bytearray, memoryview)):
        return len(v) == 0
    if isinstance(v, str) or v is None:
        return False
    if isinstance(v, codec.Described):
        return _has_empty_bytes(v.descriptor, depth + 1) or _has_empty_bytes(v.value, depth + 1)
    if isinstance(v, dict):
        return any(_has_empty_bytes(k, depth + 1) or _has_empty_bytes(x, depth + 1) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_has_empty_bytes(x, depth + 1) for x in v)
    return False


# --------------------------------------------------------------------------- comparison


def flatten(obj, prefix: str = "", out: dict | None = None) -> dict:
    """Nested record -> {path: value}; nulls are left out (Wireshark does not show them)."""
    if out is None:
        out = {}
    if isinstance(obj, dict):
        items = [(k, v) for k, v in obj.items() if v is not None]
        if not items and prefix:
            out[prefix] = "{}"
        for k, v in items:
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, list):
        if not obj and prefix:
            out[prefix] = "[]"
        for i, v in enumerate(obj):
            flatten(v, f"{prefix}[{i}]", out)
    elif obj is not None:
        out[prefix] = obj
    return out


_NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}  # how our JSON writes them


def _same(ours, ws) -> bool:
    """Whether our value and Wireshark's are the same value, however each writes it."""
    if isinstance(ws, CutFrame):  # the start of Wireshark's text: ours must start the same
        return _starts_cut_text(ours, ws)
    if isinstance(ws, Truncatable) and ws.endswith("…") and isinstance(ours, str):
        return ours.startswith(ws[:-1])
    if isinstance(ws, float) and isinstance(ours, str) and ours in _NON_FINITE:
        return _same_non_finite(_NON_FINITE[ours], ws)
    if isinstance(ws, bool) or isinstance(ours, bool):
        return type(ws) is type(ours) and ws == ours
    if isinstance(ws, float) and isinstance(ours, (int, float)):
        return abs(ws - ours) <= 1e-6 * max(1.0, abs(ours))
    if isinstance(ws, str) and isinstance(ours, str):
        return str(ws) == str(ours)
    return type(ws) is type(ours) and ws == ours


def _starts_cut_text(ours, ws: CutFrame) -> bool:
    """Whether our value, written as text, starts with the text Wireshark shows of a frame cut short."""
    if isinstance(ours, bool):
        return False
    if isinstance(ours, float) and math.isfinite(ours):
        return f"{ours:f}".startswith(ws) or repr(ours).startswith(ws)
    return str(ours).startswith(ws[:-1] if ws.endswith("…") else ws)


def _same_non_finite(ours: float, ws: float) -> bool:
    """Whether Wireshark's float is our infinity or NaN (NaN equals NaN here)."""
    return math.isnan(ws) if math.isnan(ours) else ws == ours


@dataclass
class Disagreement:
    sample: str
    packet: int
    index: int
    performative: str | None
    path: str
    ours: object
    ws: object
    tags: set
    ws_errors: list = field(default_factory=list)
    known: list = field(default_factory=list)  # ids of the KNOWN entries that explain it

    def __str__(self):
        return (f"{self.sample} packet {self.packet} #{self.index} {self.performative}: {self.path}: "
                f"ours={_short(self.ours)} wireshark={_short(self.ws)}")


def _short(v, n: int = 120) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 1] + "…"


@dataclass
class Report:
    sample: str
    ours_count: int
    ws_count: int
    frames_compared: int = 0
    values_compared: int = 0
    paths: set = field(default_factory=set)  # generalised paths compared (for the summary)
    disagreements: list = field(default_factory=list)
    frames: list = field(default_factory=list)  # (packet, index, tags) of every matched frame
    frames_agreeing: int = 0  # matched frames without any disagreement
    # connections of other protocols (AMQP 0-9-1, 0-10, ...), which amqp-dissect names and does not decode:
    # protocol -> connections, and the AMQP layers Wireshark shows on them (not compared)
    other_protocols: dict = field(default_factory=dict)
    other_layers: int = 0
    # AMQP over WebSocket that tshark does not decode (Wireshark 4.0 has no AMQP dissector for WebSocket
    # payloads): our frames on those connections are not compared, only counted
    websocket_connections: int = 0
    websocket_frames: int = 0
    websocket_unwrapped: tuple = (0, 0)  # WebSocket connections whose AMQP stream tshark decoded unwrapped, its layers

    @property
    def unknown(self) -> list:
        """The disagreements no known Wireshark defect explains."""
        return [d for d in self.disagreements if not d.known]


def _generalise(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _misshown(ours, ws: Misshown):
    """Wireshark's value where it shows a number its field's bytes do not hold: its text naming both when
    ours is the number on the wire (the shown one the upper 32 bits of it: ws-ulong-id-high-32-bits),
    else the number it shows (a disagreement nothing explains)."""
    if not _same(ours, ws.wire):
        return ws.shown
    if ws.shown == ws.wire >> 32:
        return f"<shown as the high 32 bits {ws.shown}, on the wire {ws.wire}>"
    return f"<shown as {ws.shown}, on the wire {ws.wire}>"


def compare_frame(sample: str, ours: OurFrame, ws: WsFrame, report: Report) -> None:
    a, b = flatten(ours.record), flatten(ws.record)
    align_described(a, b)
    perf = ours.record.get("performative") or ours.record.get("kind")

    def disagree(path, o, w):
        report.disagreements.append(
            Disagreement(sample, ours.packet, ours.index, perf, path, o, w, set(ours.tags), list(ws.errors)))

    for path in sorted(set(a) | set(b)):
        o, w = a.get(path, "<absent>"), b.get(path, "<not shown>")
        if isinstance(w, Misshown):  # Wireshark shows a number its bytes do not hold: ours against the bytes
            w = _misshown(o, w)
        if path in a and path in b and _same(o, w):
            report.values_compared += 1
            report.paths.add(_generalise(path))
        else:
            disagree(path, o, w)
    if bool(ours.errors) != bool(ws.errors):
        disagree("@errors", ours.errors or None, ws.errors or None)


def compare_capture(pcap, ports=(), keylog_file=None, name: str | None = None, ws=None, ours=None,
                    keylog=None) -> Report:
    """Our frames against Wireshark's (through pyshark), frame by frame; every disagreement
    classified against :data:`KNOWN`.  ``name``: the capture's name in the report (default: the
    file's stem, which :data:`KNOWN` entries match).  ``ws`` / ``ours``: the two sides, when
    already read (:func:`wireshark_frames`, :func:`our_frames`).  ``keylog``: the KeyLog of
    ``keylog_file`` (the file tshark reads), when the caller made it already."""
    sample = name if name is not None else Path(pcap).stem
    if ours is None:  # first: a file that is no capture fails here, with our message
        ours = _read_ours(pcap, ports, keylog_file, keylog)
    if ws is None:
        ws = wireshark_frames(pcap, ports=ports, keylog_file=keylog_file)
    ours = dict(ours)
    others = ours.pop(OTHERS, {})
    websocket = ours.pop(WEBSOCKET, {})
    ws, other_layers = _without_other_protocols(ws, {frozenset(_ends_of(cid)) for cid in others})
    unwrapped = _add_unwrapped_websocket(ws, websocket)
    skipped = _drop_uncompared_websocket(ours, websocket, unwrapped.ends)
    report = Report(sample, sum(map(len, ours.values())), sum(map(len, ws.values())))
    report.websocket_connections, report.websocket_frames = skipped.connections, skipped.frames
    report.websocket_unwrapped = (unwrapped.connections, unwrapped.layers)
    for note in others.values():
        report.other_protocols[note.protocol] = report.other_protocols.get(note.protocol, 0) + 1
    report.other_layers = other_layers
    for packet in sorted(set(ws) | set(ours)):
        _compare_packet(sample, packet, ours.get(packet, []), ws.get(packet, []), report)
    classify(report)
    return report


def _read_ours(pcap, ports, keylog_file, keylog) -> dict:
    """:func:`our_frames` of the capture, its TLS secrets from ``keylog`` or else ``keylog_file``."""
    if keylog is None and keylog_file:  # read as a stream: only the capture's ClientHello randoms kept
        from amqp_dissect.pipelines.keylogfile import open_keylog

        keylog = open_keylog(keylog_file)
    return our_frames(pcap, ports=ports, keylog=keylog)


def _without_other_protocols(ws: dict, other_ends: set) -> tuple[dict, int]:
    """Wireshark's frames without the layers of other protocols' connections (renumbered in their
    packet), and how many layers were taken out."""
    other_layers = 0
    kept: dict = {}
    for packet, fs in ws.items():
        mine = [f for f in fs if f.record.get("kind") != "other-protocol" and f.endpoints not in other_ends]
        other_layers += len(fs) - len(mine)
        for i, f in enumerate(mine):
            f.index = i
        if mine:
            kept[packet] = mine
    return kept, other_layers


@dataclass(frozen=True)
class UnwrappedWebSocket:
    """What :func:`_add_unwrapped_websocket` added: the connections whose unwrapped AMQP stream tshark
    decoded, the layers it showed on them, and the ends of every connection Wireshark now shows."""
    connections: int
    layers: int
    ends: set


@dataclass(frozen=True)
class SkippedWebSocket:
    """The WebSocket connections not compared (Wireshark shows none of their AMQP), and our frames on them."""
    connections: int
    frames: int


def _add_unwrapped_websocket(ws: dict, websocket: dict) -> UnwrappedWebSocket:
    """Add to Wireshark's frames (in place) those tshark decodes in the AMQP streams we unwrapped from the
    WebSocket connections on which it shows no AMQP.

    tshark 4.0 does not decode AMQP inside WebSocket: it is given the AMQP stream we unwrapped, as plain
    TCP (:func:`unwrapped_capture`), and its frames are put back at the packets that carried their bytes;
    a connection whose stream could not be kept whole is counted, not compared (a tshark that decodes
    AMQP in WebSocket is compared as is)."""
    ws_ends = {f.endpoints for fs in ws.values() for f in fs}
    taps = {cid: tap for cid, (_, tap) in websocket.items()
            if tap is not None and tap.whole and tap.chunks and frozenset(_ends_of(cid)) not in ws_ends}
    layers = 0
    if taps:
        with tempfile.TemporaryDirectory(prefix="amqp-dissect-compare-") as tmp:
            synthetic = os.path.join(tmp, "unwrapped.pcap")
            where = unwrapped_capture(taps, synthetic)
            servers = sorted({_ip_port(t.server)[1] for t in taps.values()})
            got = wireshark_frames(synthetic, ports=tuple(servers))
        for n, fs in sorted(got.items()):
            lst = ws.setdefault(where[n], [])
            for f in fs:
                f.packet, f.index = where[n], len(lst)
                lst.append(f)
                layers += 1
        ws_ends |= {frozenset(_ends_of(cid)) for cid in taps}
    return UnwrappedWebSocket(len(taps), layers, ws_ends)


def _drop_uncompared_websocket(ours: dict, websocket: dict, ws_ends: set) -> SkippedWebSocket:
    """Take out of our frames (in place; renumbered in their packet) those of the WebSocket connections
    Wireshark shows nothing of."""
    skipped = frames = 0
    for cid, (packets, _tap_) in websocket.items():
        if frozenset(_ends_of(cid)) in ws_ends:
            continue
        skipped += 1
        for packet in packets:
            frames += _drop_connection_frames(ours, packet, cid)
    return SkippedWebSocket(skipped, frames)


def _drop_connection_frames(ours: dict, packet: int, cid: str) -> int:
    """Take connection ``cid``'s frames out of our frames of ``packet`` -> how many."""
    lst = ours.get(packet)
    if not lst:
        return 0
    mine = [f for f in lst if f.conn != cid]
    for i, f in enumerate(mine):
        f.index = i
    if mine:
        ours[packet] = mine
    else:
        del ours[packet]
    return len(lst) - len(mine)


def _frame_name(f) -> str | None:
    """A frame's name in a disagreement: its performative, else its kind."""
    return f.record.get("performative") or f.record.get("kind")


def _compare_packet(sample: str, packet: int, o: list, w: list, report: Report) -> None:
    """Compare our frames of one packet with Wireshark's, frame by frame, into ``report``."""
    if len(o) != len(w) and not stopped_by_assertion(o, w):
        report.disagreements.append(_frames_count_disagreement(sample, packet, o, w))
        return
    for of, wf in zip(o, w):
        report.frames_compared += 1
        report.frames.append((packet, of.index, frozenset(of.tags)))
        n = len(report.disagreements)
        compare_frame(sample, of, wf, report)
        if len(report.disagreements) == n:
            report.frames_agreeing += 1
    for of in o[len(w):]:  # (stopped_by_assertion) the frames Wireshark did not decode
        report.disagreements.append(Disagreement(
            sample, packet, of.index, _frame_name(of), "@not-decoded", _frame_name(of), "<not decoded>",
            set(of.tags) | {"after-ws-assertion"}, list(w[-1].errors)))


def _frames_count_disagreement(sample: str, packet: int, o: list, w: list) -> Disagreement:
    """The "@frames" disagreement of a packet in which we and Wireshark find not as many AMQP frames."""
    tags = set().union(*(f.tags for f in o)) if o else set()
    if o and not w and all("after-gap" in f.tags for f in o):
        tags.add("none-shown-after-gap")
    ws_errors = [m for f in w for m in f.errors]
    return Disagreement(sample, packet, 0, None, "@frames", _kinds(o), _kinds(w), tags, ws_errors)


def _kinds(frames: list) -> list:
    """The frames' names in an "@frames" disagreement: each one's performative, else its kind."""
    return [f.record.get("performative") or f.record["kind"] for f in frames]


def stopped_by_assertion(ours: list, ws: list) -> bool:
    """Whether Wireshark shows fewer AMQP frames in a packet than we find because it stopped
    decoding the packet: its frames are the first of ours, and the last of them carries a
    failed dissector assertion (an exception: the rest of the packet is not dissected)."""
    if not 0 < len(ws) < len(ours):
        return False
    return any("failed assertion" in m for m in ws[-1].errors)


def _move_subtree(flat: dict, src: str, dst: str) -> bool:
    """Rename the paths ``src`` and those below it (``src.x``, ``src[i]``) to start with ``dst``."""
    keys = [k for k in flat if k == src or k.startswith((src + ".", src + "["))]
    for k in keys:
        flat[dst + k[len(src):]] = flat.pop(k)
    return bool(keys)


def align_described(ours: dict, ws: dict) -> None:
    """Put Wireshark's form of a described value inside a map or list where ours is (flattened records,
    changed in place).  Ours: ``X.@descriptor`` and ``X.@value...``; Wireshark 4.0 (see
    ws-described-value-bare): the bare value at ``X : descriptor`` (a symbol descriptor, in the key's
    label) or at ``X`` (a ulong descriptor, or a list item).  The value is moved under ``X.@value``, and
    a descriptor read from the label to ``X.@descriptor``, so both are compared; the value is moved only
    when Wireshark shows nothing at ``X.@value`` already."""
    suffix = ".@descriptor"
    roots = sorted((p[: -len(suffix)] for p in ours if p.endswith(suffix)), key=len, reverse=True)
    for root in roots:
        value = root + ".@value"
        if root + suffix in ws or any(k == value or k.startswith((value + ".", value + "[")) for k in ws):
            continue
        descriptor = ours[root + suffix]
        labelled = f"{root} : {descriptor}"
        if isinstance(descriptor, str) and _move_subtree(ws, labelled, value):
            ws[root + suffix] = descriptor  # (the label's text is the descriptor: matched in full above)
            continue
        other = next((k for k in ws if k.startswith(root + " : ")), None)
        if other is not None:  # Wireshark's label names another descriptor: a disagreement, not explained
            ws[root + suffix] = f"<in the label: {other[len(root) + 3:]}>"
        else:
            _move_subtree(ws, root, value)


def _ends_of(conn: str) -> tuple:
    """The client and server ends of one of our connection ids ('client-server', '#n' for a reused
    4-tuple)."""
    return tuple(conn.split("#", 1)[0].split("-", 1))


# --------------------------------------------------------------------------- known disagreements

FRAME_CONDITIONS = {
    "any": lambda tags: True,
    "first-fragment": lambda tags: "first-fragment" in tags,
    "continuation-fragment": lambda tags: "continuation-fragment" in tags,
    "long-descriptor": lambda tags: "long-descriptor" in tags,
    "zero-length-binary": lambda tags: "zero-length-binary" in tags,
    "not-continuation": lambda tags: "continuation-fragment" not in tags,
    "after-ws-assertion": lambda tags: "after-ws-assertion" in tags,
    "described-body": lambda tags: "described-body" in tags,
    "none-shown-after-gap": lambda tags: "none-shown-after-gap" in tags,
}


def entry_covers(entry: dict, d: Disagreement) -> bool:
    """Whether the known defect ``entry`` explains the disagreement ``d``."""
    if not fnmatch.fnmatchcase(d.sample, entry["samples"]):
        return False
    if entry["packets"] is not None and d.packet not in entry["packets"]:
        return False
    if not FRAME_CONDITIONS[entry["frames"]](d.tags):
        return False
    if not any(fnmatch.fnmatchcase(d.path, p) for p in entry["paths"]):
        return False
    if entry.get("ws_values") is not None and d.path != "@errors":
        if not isinstance(d.ws, str) or not any(fnmatch.fnmatchcase(d.ws, p) for p in entry["ws_values"]):
            return False
    if (d.path == "@errors" or entry.get("ws_errors_all_paths")) and entry.get("ws_errors") is not None:
        if not d.ws_errors:
            return False  # the rule explains errors Wireshark reports, not errors only we report
        return all(any(fnmatch.fnmatchcase(m, p) for p in entry["ws_errors"]) for m in d.ws_errors)
    return True


def classify(report: Report, known: list | None = None) -> None:
    """Set each disagreement's ``known`` to the ids of the entries of ``known`` (default
    :data:`KNOWN`) that explain it."""
    for d in report.disagreements:
        d.known = [e["id"] for e in (KNOWN if known is None else known) if entry_covers(e, d)]
