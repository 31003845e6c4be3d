"""AMQP 1.0 framing: protocol headers, frames, performatives, multi-frame deliveries.

Sans-IO: :class:`AmqpConnection` is fed the in-order bytes of each direction
of one TCP connection (and gap notifications) and returns events:
:class:`ProtocolHeader`, :class:`Frame` and :class:`StreamNote`.

* Protocol headers ``AMQP <id> <major> <minor> <revision>``: id 0 (AMQP),
  2 (TLS: the rest of the stream is encrypted and skipped), 3 (SASL).  A header of
  another protocol (AMQP 0-9-1 / 0-10 / 0-9 / 0-8, or any version but 1.0.0) in either
  direction makes the whole connection another protocol's: both directions are
  skipped (a header the other side sends first is still shown), no frame is looked
  for, and at its end one :class:`OtherProtocolNote` names the protocol and counts
  the bytes of each direction.
* Frames: 8-byte header (size, doff, type, channel), extended header, body.
  An empty body is a heartbeat.  The body's performative is decoded with
  :mod:`amqp_dissect.amqp.codec`; the rest of a transfer body is its payload.
* A frame larger than the peer's max-frame-size gets an expert note; an
  implausible header (size < 8, doff < 2, size beyond the hard cap, ...) makes the
  decoder resynchronise on the next plausible frame header, reporting how many
  bytes it skipped.  After a capture gap it resynchronises the same way.
* A delivery split over several transfer frames (``more=true``) is reassembled;
  the frame that completes (or aborts) it carries a :class:`Delivery`.  Its
  message is decoded lazily (:meth:`Delivery.sections`).
"""

from __future__ import annotations

import struct

from ._spec import TRANSFER_ABORTED, TRANSFER_DELIVERY_ID, TRANSFER_DELIVERY_TAG, TRANSFER_HANDLE, TRANSFER_MORE
from .codec import (ABSENT, DEFAULT_MAX_ELEMENTS, ELEMENT_BUDGET_BASE, ELEMENTS_PER_BYTE,
                    Array, Composite, Described, Reader, amqp_type_of)
from .scan import SCAN_LAYOUTS, ScanResult, Span, buffer_bytes, scan_into
from ..errors import CHAT, ERROR, NOTE, WARN, DissectError, ExpertNote
from ..events import NotCaptured
from .spec import COMPOSITES, PERFORMATIVES, SASL_FRAMES

_HDR = struct.Struct(">IBBH")
_U64 = struct.Struct(">Q")

PROTO_AMQP = 0
PROTO_TLS = 2
PROTO_SASL = 3
PROTOCOL_NAMES = {PROTO_AMQP: "AMQP", PROTO_TLS: "TLS", PROTO_SASL: "SASL"}

FRAME_AMQP = 0
FRAME_SASL = 1

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024  # hard cap on what is buffered for one frame
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # cap on a reassembled message kept in memory


_PERF_CODES = frozenset(COMPOSITES[n].descriptor_code for n in PERFORMATIVES)
_SASL_CODES = frozenset(COMPOSITES[n].descriptor_code for n in SASL_FRAMES)
_PERF_SYMBOLS = {COMPOSITES[n].descriptor_symbol.encode(): n for n in PERFORMATIVES}
_SASL_SYMBOLS = {COMPOSITES[n].descriptor_symbol.encode(): n for n in SASL_FRAMES}


# --------------------------------------------------------------------------- events


# transfer, flow and disposition bodies are read by the scanner (scan.py) when True; the tests set it
# False to send every body through the generic decoder (Reader)
SCAN_HOT = True

_NO_NOTES = ()  # the notes of a frame without any


class ProtocolHeader:
    """An 8-byte protocol header: ``AMQP`` + protocol id + version."""

    __slots__ = ("conn", "direction", "src", "dst", "packet", "ts", "protocol_id", "version", "notes")

    def __init__(self, conn, direction, src, dst, packet, ts, protocol_id, version):
        self.conn = conn
        self.direction = direction
        self.src = src
        self.dst = dst
        self.packet = packet
        self.ts = ts
        self.protocol_id = protocol_id
        self.version = version
        self.notes: list[ExpertNote] = []

    @property
    def kind(self) -> str:
        return "header"

    @property
    def is_amqp10(self) -> bool:
        return self.version == (1, 0, 0) and self.protocol_id in PROTOCOL_NAMES

    @property
    def is_other(self) -> bool:
        """Another protocol's header (AMQP 0-9-1, 0-10, 0-9, 0-8: major version 0, or protocol id
        1), not one of the AMQP 1.x family: an AMQP 1.1 header is version negotiation in AMQP 1.0's
        own terms (its section 2.2), a 0-9-1 header another protocol."""
        return not (self.protocol_id in PROTOCOL_NAMES and self.version[0] >= 1)

    @property
    def name(self) -> str:
        if self.is_amqp10:
            return f"{PROTOCOL_NAMES[self.protocol_id]} {'.'.join(map(str, self.version))}"
        return _legacy_name(self.protocol_id, self.version)

    def __repr__(self):
        return f"ProtocolHeader({self.name}, packet={self.packet})"


def _legacy_name(pid: int, version: tuple) -> str:
    major, minor, rev = version
    if pid == 0 and (major, minor, rev) == (0, 9, 1):
        return "AMQP 0-9-1"
    if pid == 1 and (major, minor) == (1, 0) and rev in (9, 10):
        return f"AMQP 0-{rev}"
    if pid == 1 and (major, minor) == (1, 8):
        return "AMQP 0-8"
    if pid == 1 and (major, minor) == (1, 9):
        return "AMQP 0-9"
    return f"AMQP protocol id {pid} version {major}.{minor}.{rev}"


class Delivery:
    """A message reassembled from the transfer frames of one delivery."""

    __slots__ = (
        "channel",
        "handle",
        "delivery_id",
        "delivery_tag",
        "first_packet",
        "first_ts",
        "last_packet",
        "last_ts",
        "frames",
        "message_size",
        "payload",
        "aborted",
        "incomplete",
        "_sections",
        "_error",
        "budget",
        "cut",
    )

    def __init__(self, channel, handle, delivery_id, delivery_tag, packet, ts):
        self.channel = channel
        self.handle = handle
        self.delivery_id = delivery_id
        self.delivery_tag = delivery_tag
        self.first_packet = packet
        self.first_ts = ts
        self.last_packet = packet
        self.last_ts = ts
        self.frames = 0
        self.message_size = 0
        self.payload: list | bytes | None = []
        self.aborted = False
        self.incomplete = False  # part of it fell into a capture gap
        self._sections = None
        self._error = None
        self.budget = None  # the connection's element budget (AmqpConnection.budget), None: no budget
        self.cut = None  # a NotCaptured when the snap length cut bytes of its message off

    def sections(self):
        """The decoded message sections (list), or None if not decodable (see ``error``).
        Decoding spends the connection's element budget (:attr:`AmqpConnection.budget`)."""
        if self._sections is None and self._error is None:
            if self.aborted:
                self._error = "delivery aborted: no message"
            elif self.cut is not None:
                self._error = f"message {self.cut}"
            elif self.incomplete or self.payload is None:
                self._error = "message incomplete (capture gap or size cap): not decoded"
            else:
                budget = self.budget
                cap = DEFAULT_MAX_ELEMENTS
                if budget is not None and budget[0] < cap:
                    cap = max(budget[0], 0)
                r = Reader(self.payload, max_elements=cap)
                sections = []
                try:
                    while r.remaining:
                        sections.append(r.value())
                except DissectError as e:
                    if r.elements_left < 0 and cap < DEFAULT_MAX_ELEMENTS:
                        self._error = f"message not decoded: {_budget_text(budget, cap)}"
                    else:
                        self._error = f"malformed message: {e}"
                else:
                    self._sections = sections
                if budget is not None:
                    budget[0] -= cap - r.elements_left if r.elements_left >= 0 else cap
        return self._sections

    @property
    def error(self) -> str | None:
        self.sections()
        return self._error

    def __repr__(self):
        return (
            f"Delivery(id={self.delivery_id}, frames={self.frames}, size={self.message_size}, "
            f"aborted={self.aborted})"
        )


class Frame:
    """One AMQP or SASL frame (or heartbeat)."""

    __slots__ = (
        "conn",
        "direction",
        "src",
        "dst",
        "packet",
        "ts",
        "first_packet",
        "size",
        "doff",
        "type",
        "channel",
        "ext",
        "pname",
        "_performative",
        "_perf_body",
        "payload",
        "payload_size",
        "fields",
        "notes",
        "delivery",
        "raw",
        "cut",
    )

    def __init__(self, conn, direction, src, dst, packet, ts, first_packet, size, doff, ftype, channel):
        self._init(conn, direction, src, dst, packet, ts, first_packet, size, doff, ftype, channel)
        self.notes = []

    def _init(self, conn, direction, src, dst, packet, ts, first_packet, size, doff, ftype, channel):
        # (the framing loop makes frames with Frame.__new__ and this: a C call when compiled)
        self.conn = conn
        self.direction = direction
        self.src = src
        self.dst = dst
        self.packet = packet
        self.ts = ts
        self.first_packet = first_packet
        self.size = size
        self.doff = doff
        self.type = ftype
        self.channel = channel
        self.ext = b""
        self.pname: str | None = None  # the performative's spec name ('open', 'transfer', ...)
        self._performative: Composite | Described | None = None
        self._perf_body: bytes | None = None  # encoded performative, decoded when first asked for
        self.payload = b""
        self.payload_size = 0  # transfer frames: payload bytes
        self.fields = ()  # the performative's field values in spec order, ABSENT beyond the encoded list
        self.notes = _NO_NOTES  # a list once the first note is added (add_note): most frames have none
        self.delivery: Delivery | None = None
        self.cut = None  # a transfer whose payload the snap length cut off: its NotCaptured

    def add_note(self, note: ExpertNote) -> None:
        """Add an expert note (``notes`` is an empty tuple until the first)."""
        if self.notes:
            self.notes.append(note)
        else:
            self.notes = [note]

    @property
    def performative(self) -> Composite | Described | None:
        """The performative as a decoded Composite (the hot performatives were only scanned: their
        encoding is decoded here, when a renderer asks for it)."""
        p = self._performative
        if p is None and self._perf_body is not None:
            p = self._performative = Reader(self._perf_body, 0, len(self._perf_body)).value()
        return p

    @performative.setter
    def performative(self, perf) -> None:
        self._performative = perf
        self._perf_body = None
        self.pname = perf.spec.name if isinstance(perf, Composite) else None

    def set_performative(self, perf, payload: bytes = b"") -> None:
        """The decoded performative (a Composite) and, for a transfer, its payload."""
        self.performative = perf
        v = perf.value
        pad = len(perf.spec.fields) - len(v)
        self.fields = v + [ABSENT] * pad if pad > 0 else v
        self.payload = payload
        self.payload_size = len(payload)

    @property
    def kind(self) -> str:
        if self.type == FRAME_SASL:
            return "sasl"
        if self.size == self.doff * 4:
            return "heartbeat"
        return "amqp"

    @property
    def name(self) -> str | None:
        """The performative's spec name ('open', 'transfer', 'sasl-init', ...)."""
        if self.pname is not None:
            return self.pname
        p = self._performative
        return p.name if p is not None else None

    def __repr__(self):
        return f"Frame({self.kind}, ch={self.channel}, {self.performative!r}, packet={self.packet})"


class StreamNote:
    """An expert note about a stream position that belongs to no frame."""

    __slots__ = ("conn", "direction", "src", "dst", "packet", "ts", "note", "skipped")

    def __init__(self, conn, direction, src, dst, packet, ts, note, skipped=0):
        self.conn = conn
        self.direction = direction
        self.src = src
        self.dst = dst
        self.packet = packet
        self.ts = ts
        self.note = note
        self.skipped = skipped

    kind = "note"

    def __repr__(self):
        return f"StreamNote({self.note}, packet={self.packet})"


class OtherProtocolNote(StreamNote):
    """The one note of a connection that speaks another protocol than AMQP 1.0 (a protocol header of
    AMQP 0-9-1, 0-10, ... in either direction): ``protocol`` its name (the first such header's),
    ``bytes`` (client, server): the bytes of each direction, protocol headers included."""

    __slots__ = ("protocol", "bytes")

    def __init__(self, conn, direction, src, dst, packet, ts, note, protocol, nbytes):
        StreamNote.__init__(self, conn, direction, src, dst, packet, ts, note, 0)
        self.protocol = protocol
        self.bytes = nbytes

    def __repr__(self):
        return f"OtherProtocolNote({self.protocol}, bytes={self.bytes}, packet={self.packet})"


class NotCapturedNote(StreamNote):
    """Bytes of a direction that were on the wire and that the capture's snap length cut off
    (``skipped``: how many; ``snap_length``: the capture length of the cut packets, None if not
    known); ``hidden``: True when the cut may hold whole frames (their headers were cut too, so
    frames of the peer may be missing: "unknown", never loss)."""

    __slots__ = ("snap_length", "hidden")

    def __init__(self, conn, direction, src, dst, packet, ts, note, skipped, snap_length, hidden):
        StreamNote.__init__(self, conn, direction, src, dst, packet, ts, note, skipped)
        self.snap_length = snap_length
        self.hidden = hidden

    def __repr__(self):
        return f"NotCapturedNote({self.skipped} bytes, hidden={self.hidden}, packet={self.packet})"


# --------------------------------------------------------------------------- stream decoder

# Direction modes
# the first 4 bytes of an HTTP/1.x request (the methods) or response: a stream that starts so is HTTP
_HTTP_STARTS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC", b"HTTP")
_M_START = 0  # nothing seen yet: expect a protocol header
_M_FRAMES = 1  # frames (and possibly a further protocol header)
_M_RESYNC = 2  # looking for the next plausible frame header
_M_OPAQUE = 3  # encrypted or not AMQP 1.0: skip everything


_NO_PARTIALS: dict = {}  # (read, never written: a direction without deliveries being reassembled)
# the buffer of a direction that holds no byte since its protocol header (read and cleared, never written:
# a connection that sent only its header keeps no buffer of its own; see AmqpConnection.feed)
_NO_BYTES = bytearray()


class _Direction:
    """Framing state of one direction of a connection."""

    __slots__ = (
        "index",
        "src",
        "dst",
        "peer_max",
        "buf",
        "mode",
        "protocol",
        "first_packet",
        "skipped",
        "skip_start_packet",
        "partials",
        "opaque_bytes",
        "lost",
        "cut_skip",
        "cut_resync",
    )

    def __init__(self, index, src, dst):
        self.index = index
        self.src = src
        self.dst = dst
        self.buf = _NO_BYTES  # (its own bytearray from the first bytes it keeps: see AmqpConnection.feed)
        self.mode = _M_START
        self.peer_max = -1  # the max-frame-size the peer announced (its open), -1 while none
        self.protocol = None  # PROTO_AMQP / PROTO_SASL after a header
        self.first_packet = None  # packet that brought the first byte of the buffered frame
        self.skipped = 0
        self.skip_start_packet = None
        self.partials = None  # (channel, handle) -> Delivery being reassembled (a dict from the first)
        self.opaque_bytes = 0
        self.lost = False  # a gap lost bytes of this direction
        self.cut_skip = 0  # bytes still to come of a frame the snap length cut (skipped, not decoded)
        self.cut_resync = False  # resynchronising because of such a cut (not a gap): what it skips is not loss


class AmqpConnection:
    """Framing decoder for both directions of one TCP connection.

    ``client``/``server`` are "ip:port" strings; direction 0 is client -> server.
    ``expect_header`` False means the capture may join mid-connection: if the
    stream does not start with a protocol header the decoder resynchronises
    instead of treating it as not AMQP.
    """

    # (the fields of the compiled build's extension type: no instance dict in pure Python either)
    __slots__ = ("conn", "client", "server", "dir0", "dir1", "max_frame_bytes", "max_message_bytes", "messages",
                 "bodies", "announced_max_frame", "tls", "keep_payloads", "keep_raw", "frames", "other",
                 "_other_said", "budget", "scan_budget", "scan_res")

    def __init__(
        self,
        conn: str,
        client: str,
        server: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        messages: bool = True,
    ):
        self.conn = conn
        self.client = client
        self.server = server
        # the framing state of each direction, made at its first byte (direction_state): a connection
        # whose server never sent a byte keeps one (two fields, not a list: issue 40)
        self.dir0 = None
        self.dir1 = None
        self.max_frame_bytes = max_frame_bytes
        self.max_message_bytes = max_message_bytes
        # frames are shown (frames, -V, jsonl)?  Then multi-frame deliveries are reassembled into
        # messages (frame.delivery) and scanned performatives keep their encoding for a full decode
        # (frame.performative).  The analysis alone needs neither: it reads frame.fields and tracks
        # deliveries in the model.  messages="summary": frames are shown as one-line summaries, which
        # need a delivery's frame count and size but no encoded bodies (no payload kept).
        self.messages = messages
        self.bodies = bool(messages) and messages != "summary"
        # messages="raw" (frames -x): as True, and each frame keeps its bytes (frame.raw)
        self.keep_raw = messages == "raw"
        # max-frame-size each side announced in its open (limits frames sent *to* it)
        self.announced_max_frame = None  # [client's, server's] from the first open (None until then)
        self.frames = 0
        self.tls = False
        self.other = None  # the name of the other protocol (not AMQP 1.0) the connection speaks
        self._other_said = None  # the byte counts its note said (_other_end)
        # the analysis reads transfer payloads only on transaction coordinator links: they are copied
        # once an attach on this connection targets a coordinator (the frames are shown: always)
        self.keep_payloads = self.bodies
        # decoded elements this connection may still spend: ELEMENT_BUDGET_BASE, plus ELEMENTS_PER_BYTE
        # per byte of each frame when it arrives (codec.py); a one-element list, shared with the
        # deliveries whose messages are decoded later (Delivery.sections) and lent to the scanner
        # (both made at the first frame with a body: a connection without one keeps neither)
        self.budget = None
        self.scan_budget = None  # the scanner's while the budget exceeds that (_frame)
        self.scan_res = None  # what the scanner found besides the fields (one object, made at the first frame, reused)

    def direction_state(self, direction: int) -> _Direction:
        """The framing state of ``direction`` (made at its first use)."""
        if direction:
            d = self.dir1
            if d is None:
                d = self.dir1 = _Direction(1, self.server, self.client)
        else:
            d = self.dir0
            if d is None:
                d = self.dir0 = _Direction(0, self.client, self.server)
        return d

    def both_directions(self) -> tuple:
        """The framing state of both directions (made now if a direction had none)."""
        return self.direction_state(0), self.direction_state(1)

    # -- public ---------------------------------------------------------------

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        d = self.dir1 if direction else self.dir0
        if d is None:
            d = self.direction_state(direction)
        if d.mode == _M_OPAQUE:
            d.opaque_bytes += len(data)
            return []
        if d.cut_skip:  # the captured bytes of a frame the snap length cut: decoded at the cut
            n = len(data)
            if n <= d.cut_skip:
                d.cut_skip -= n
                return []
            data = data[d.cut_skip:]
            d.cut_skip = 0
        out: list = []
        if not d.buf:
            d.first_packet = packet
            if d.buf is _NO_BYTES:
                self._first_bytes(d, data, ts, packet, out)
                return out
        d.buf += data
        self._process(d, ts, packet, out)
        return out

    def _first_bytes(self, d: _Direction, data: bytes, ts, packet, out: list) -> None:
        """Bytes for a direction without a buffer of its own: it gets one; given back after the protocol
        header of a stream that sent nothing more (issue 40: a connection of headers alone keeps no buffer)."""
        header = d.mode == _M_START
        d.buf = bytearray(data)
        self._process(d, ts, packet, out)
        if header and not d.buf:
            d.buf = _NO_BYTES

    def restart(self, direction: int) -> None:
        """The stream of ``direction`` starts again with a protocol header (the decrypted
        stream after the AMQP TLS header, see amqp_dissect.capture.layers)."""
        d = self.direction_state(direction)
        d.mode = _M_START
        d.protocol = None
        d.buf.clear()

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        """``size`` bytes of this direction are missing from the capture (``cause`` None), or
        were held back by an outer layer (``cause`` says why: they count as not decoded)."""
        d = self.direction_state(direction)
        if d.mode == _M_OPAQUE:
            return []
        if type(cause) is NotCaptured:
            return self._cut(d, size, ts, packet, cause)
        d.cut_skip = 0
        d.cut_resync = False
        out: list = []
        lost = len(d.buf)
        d.buf.clear()
        for part in (d.partials or _NO_PARTIALS).values():
            part.incomplete = True
        d.lost = True
        msg = f"{size} bytes missing from the capture (TCP gap)" if cause is None else f"{size} bytes not decoded ({cause})"
        if lost:
            msg += f"; {lost} buffered bytes of an unfinished frame discarded"
        out.append(self._note(d, packet, ts, WARN, "reassembly" if cause is None else "framing", msg, size))
        if d.mode in (_M_FRAMES, _M_START):
            d.mode = _M_RESYNC
            d.skipped = 0
            d.skip_start_packet = packet
        return out

    def finish(self, ts: float | None = None, packet: int | None = None) -> list:
        """End of the capture or connection: report what is left unfinished."""
        out: list = []
        if self.other is not None:
            return self._other_end(ts, packet, out)
        for d in self.both_directions():
            if d.mode == _M_OPAQUE:
                if self.tls and d.opaque_bytes:
                    out.append(self._note(d, packet, ts, NOTE, "tls",
                                          f"TLS: {d.opaque_bytes} encrypted bytes from the {('client', 'server')[d.index]} "
                                          "not decrypted (no key log: see --keylog)", d.opaque_bytes))
                continue
            if d.buf:
                msg = f"stream ends inside a frame: {len(d.buf)} bytes of an unfinished frame"
                held = len(d.buf)
                group = "framing"
                if d.mode == _M_RESYNC:
                    d.skipped += len(d.buf)
                    msg = f"stream ends while resynchronising: {d.skipped} bytes skipped"
                    held = d.skipped
                    if d.cut_resync:  # (behind a cut of the snap length: not loss)
                        group = "snaplen"
                        msg += " (behind bytes the snap length cut off)"
                out.append(self._note(d, packet, ts, WARN if group == "framing" else CHAT, group, msg, held))
                d.buf.clear()
            for part in (d.partials or _NO_PARTIALS).values():
                if part.cut is not None:  # (its last frames may be among those the snap length cut off)
                    out.append(self._note(d, packet, ts, CHAT, "snaplen",
                                          f"delivery {part.delivery_id} on channel {part.channel} handle "
                                          f"{part.handle}: {part.frames} transfer frames seen, its last frames "
                                          f"{part.cut}"))
                    continue
                out.append(
                    self._note(
                        d, packet, ts, WARN, "sequence",
                        f"delivery {part.delivery_id} on channel {part.channel} handle {part.handle} "
                        f"unfinished: {part.frames} transfer frames, more=true on the last",
                    )
                )
            d.partials = None
        return out

    # -- internals --------------------------------------------------------------

    def _cut(self, d: _Direction, size: int, ts: float, packet: int, cause) -> list:
        """``size`` bytes of this direction were on the wire and the snap length cut them off.  The
        frame they cut is found by its size (its header was captured): its performative is decoded
        when it was captured whole (a transfer: a delivery whose message was not captured), and the
        bytes of the frame that follow are skipped.  Bytes past the frame's end (frames whose headers
        were cut too), or a cut frame header, end in a resynchronisation on the next captured frame
        header.  Nothing of it is loss."""
        out: list = []
        hidden = False  # frame headers were cut: resynchronise
        unseen = False  # a frame whose performative was cut
        skip = d.cut_skip
        buf = d.buf
        if skip:  # (inside a frame cut before)
            if size <= skip:
                d.cut_skip = skip - size
            else:
                d.cut_skip = 0
                hidden = True
        elif d.mode == _M_FRAMES and len(buf) >= 8:
            have = len(buf)
            fsize = (buf[0] << 24) | (buf[1] << 16) | (buf[2] << 8) | buf[3]
            first = d.first_packet if d.first_packet is not None else packet
            unseen = not self._cut_frame(d, fsize, have, ts, packet, first, cause, out)
            buf.clear()
            d.first_packet = None
            if have + size < fsize:
                d.cut_skip = fsize - have - size
            elif have + size > fsize:
                hidden = True
        elif d.mode == _M_FRAMES or d.mode == _M_RESYNC or d.mode == _M_START:
            hidden = True
        if hidden or unseen:
            for part in (d.partials or _NO_PARTIALS).values():  # (their frames may be among the cut ones)
                part.incomplete = True
                part.cut = cause
        if hidden:
            buf.clear()
            d.first_packet = None
            if d.mode == _M_FRAMES:
                d.mode = _M_RESYNC
                d.skipped = 0
                d.skip_start_packet = packet
                d.cut_resync = True
        msg = f"{size} bytes {cause}"
        if hidden:
            msg += ": frames in them not seen"
        elif unseen:
            msg += ": a frame's performative among them"
        note = ExpertNote(CHAT, "snaplen", msg)
        out.append(NotCapturedNote(self.conn, d.index, d.src, d.dst, packet, ts, note, size,
                                   cause.snap_length, hidden or unseen))
        return out

    def _cut_frame(self, d: _Direction, fsize: int, have: int, ts: float, packet: int, first, cause,
                   out: list) -> bool:
        """The frame at the start of ``d.buf`` (``have`` of its ``fsize`` bytes captured, its header
        checked by :meth:`_process`): a transfer whose performative was captured whole becomes a
        Frame whose payload (``payload_size`` its size on the wire) was not captured; any other
        frame is not decoded (its performative is its whole body, and the cut took part of it).  True
        when the frame was decoded."""
        buf = d.buf
        doff = buf[4]
        ftype = buf[5]
        channel = (buf[6] << 8) | buf[7]
        body = doff * 4
        if ftype != FRAME_AMQP or body >= have:
            return False
        r = Reader(bytes(buf[body:have]), max_elements=DEFAULT_MAX_ELEMENTS)
        try:
            perf = r.value()
        except DissectError:
            return False
        if not isinstance(perf, Composite) or perf.spec.name != "transfer":
            return False
        frame = Frame(self.conn, d.index, d.src, d.dst, packet, ts, first, fsize, doff, ftype, channel)
        if doff > 2:
            frame.ext = bytes(buf[8:body])
        frame.performative = perf
        v = perf.value
        pad = len(perf.spec.fields) - len(v)
        frame.fields = v + [ABSENT] * pad if pad > 0 else v
        frame.payload_size = fsize - body - r.pos
        frame.cut = cause
        frame.add_note(ExpertNote(CHAT, "snaplen", f"payload of {frame.payload_size} bytes {cause}"))
        self.frames += 1
        if self.messages:
            self._transfer(d, frame, frame.fields)
        out.append(frame)
        return True

    def _other_end(self, ts, packet, out: list) -> list:
        """finish() of a connection of another protocol: its one note, with each direction's bytes
        (once: the bytes that follow are counted again and said at the next finish only if any)."""
        nbytes = []
        for d in self.both_directions():
            nbytes.append(d.opaque_bytes + len(d.buf))
            d.buf.clear()
            d.partials = None
        if nbytes == self._other_said:
            return out
        self._other_said = nbytes
        c = self.dir0
        note = ExpertNote(NOTE, "protocol", f"{self.other} (not decoded): {nbytes[0]} bytes from the client, "
                                            f"{nbytes[1]} bytes from the server (protocol headers included)")
        out.append(OtherProtocolNote(self.conn, 0, c.src, c.dst, packet, ts, note, self.other, tuple(nbytes)))
        return out

    def _become_other(self, name: str) -> None:
        """A header of another protocol: the connection is that protocol's, both directions skipped
        (a direction that has not started yet may still show its own protocol header)."""
        self.other = name
        self._other_said = None
        for d in self.both_directions():
            if d.mode != _M_START:
                d.opaque_bytes += len(d.buf)
                d.buf.clear()
                d.partials = None
                d.mode = _M_OPAQUE

    def _note(self, d: _Direction, packet, ts, severity: str, group: str, message: str, skipped: int = 0) -> StreamNote:
        return StreamNote(self.conn, d.index, d.src, d.dst, packet, ts, ExpertNote(severity, group, message), skipped)

    def layer_note(self, direction: int, packet, ts, note, skipped: int = 0) -> StreamNote:
        """A note of a layer under this decoder (TLS, WebSocket: ``note`` an ExpertNote) as a
        StreamNote of this connection and ``direction`` (``skipped``: bytes the layer could not pass up)."""
        d = self.direction_state(direction)
        return StreamNote(self.conn, direction, d.src, d.dst, packet, ts, note, skipped)

    def _process(self, d: _Direction, ts: float, packet: int, out: list) -> None:
        buf = d.buf
        maxf = self.max_frame_bytes  # (a C integer when compiled: no int compared per frame)
        pos = 0
        n = len(buf)
        while pos < n:
            mode = d.mode
            if mode == _M_OPAQUE:
                d.opaque_bytes += n - pos
                pos = n
                break
            if mode == _M_RESYNC:
                pos = self._resync(d, pos, ts, packet, out)
                if d.mode == _M_RESYNC:  # no frame header found yet: wait for more bytes
                    break
                continue
            if mode == _M_START and n - pos < 8:
                break
            # protocol header?
            if buf[pos] == 0x41 and buf.startswith(b"AMQP", pos):
                if n - pos < 8:
                    break
                self._header(d, bytes(buf[pos : pos + 8]), ts, packet, out)
                pos += 8
                continue
            if mode == _M_START:
                self._no_header(d, pos, ts, packet, out)
                continue
            # a frame
            if n - pos < 8:
                break
            size = buf[pos]  # widened before the shift (a C int would overflow when compiled)
            size = (size << 24) | (buf[pos + 1] << 16) | (buf[pos + 2] << 8) | buf[pos + 3]
            doff = buf[pos + 4]
            ftype = buf[pos + 5]
            channel = (buf[pos + 6] << 8) | buf[pos + 7]
            bad = None
            if size < 8:
                bad = f"frame size {size} is smaller than the 8-byte frame header"
            elif doff < 2:
                bad = f"data offset {doff} is smaller than 2"
            elif doff * 4 > size:
                bad = f"data offset {doff} ({doff * 4} bytes) beyond the frame size {size}"
            elif size > maxf:
                bad = f"frame size {size} beyond the {self.max_frame_bytes}-byte cap"
            elif ftype not in (FRAME_AMQP, FRAME_SASL):
                bad = f"unknown frame type {ftype}"
            elif d.peer_max >= 0 and size > d.peer_max:
                # beyond what the peer accepts: a frame only if a performative follows (it is decoded,
                # with a frame-size note); else not waited for, as it would swallow the frames
                # behind it as its body
                ok = _descriptor_ok(buf, pos + doff * 4, n, ftype)
                if ok is None:
                    break
                if not ok:
                    bad = (f"frame size {size} exceeds the peer's max-frame-size "
                           f"{self.announced_max_frame[1 - d.index]} and no performative follows the header")
            if bad is not None:
                out.append(self._note(d, packet, ts, ERROR, "framing", bad))
                d.mode = _M_RESYNC
                d.skipped = 1
                pos += 1
                continue
            if n - pos < size:
                break
            first = d.first_packet if pos == 0 and d.first_packet is not None else packet
            frame = Frame.__new__(Frame)
            frame._init(self.conn, d.index, d.src, d.dst, packet, ts, first, size, doff, ftype, channel)
            if doff > 2:
                frame.ext = bytes(buf[pos + 8 : pos + doff * 4])
            if self.keep_raw:
                frame.raw = bytes(buf[pos : pos + size])
            self._frame(d, frame, buf, pos + doff * 4, pos + size)
            out.append(frame)
            pos += size
        if pos:
            del buf[:pos]
            d.first_packet = packet if buf else None

    def _resync(self, d: _Direction, pos: int, ts: float, packet: int, out: list) -> int:
        """Look for the next plausible frame header at or after ``pos``; the position to go on from.
        The direction stays in resync mode when none is found yet (more bytes are needed)."""
        buf = d.buf
        n = len(buf)
        found = _find_frame(buf, pos, self.max_frame_bytes)
        if found is None:
            # keep a tail that could still hold the start of a header
            keep = min(n - pos, 64)
            d.skipped += n - pos - keep
            return n - keep
        if found < 0:  # need more bytes to decide about a candidate
            cand = -found - 1
            d.skipped += cand - pos
            return cand
        d.skipped += found - pos
        if d.skipped:  # (a frame header right after a gap: nothing skipped, nothing to say)
            out.append(
                self._note(d, packet, ts, NOTE, "snaplen" if d.cut_resync else "framing",
                           f"resynchronised on a frame header after skipping {d.skipped} bytes"
                           + (" (behind bytes the snap length cut off)" if d.cut_resync else ""), d.skipped)
            )
        d.skipped = 0
        d.cut_resync = False
        d.mode = _M_FRAMES
        if d.protocol is None:
            d.protocol = PROTO_AMQP
        return found

    def _no_header(self, d: _Direction, pos: int, ts: float, packet: int, out: list) -> None:
        """A stream that does not start with a protocol header: the other protocol's, TLS without
        one (AMQPS), or a capture that joined mid-connection (look for a frame header)."""
        buf = d.buf
        if self.other is not None:  # the peer spoke another protocol first: not decoded either
            d.mode = _M_OPAQUE
            return
        if buf[pos:pos + 4] in _HTTP_STARTS:  # HTTP on an AMQP port (a request, or a response)
            self._become_other("HTTP")
            d.mode = _M_OPAQUE
            return
        if buf[pos] == 0x16 and buf[pos + 1] == 0x03:
            d.mode = _M_OPAQUE
            self.tls = True
            out.append(self._note(d, packet, ts, NOTE, "protocol",
                                  "TLS record without AMQP header (AMQPS): encrypted, skipped"))
            return
        # joined mid-connection: find the first frame
        d.mode = _M_RESYNC
        d.lost = True
        d.skip_start_packet = packet
        out.append(
            self._note(d, packet, ts, NOTE, "sequence", "stream does not start with a protocol header "
                       "(capture joined mid-connection?): looking for a frame header")
        )

    def _header(self, d: _Direction, raw: bytes, ts: float, packet: int, out: list) -> None:
        pid = raw[4]
        version = (raw[5], raw[6], raw[7])
        hdr = ProtocolHeader(self.conn, d.index, d.src, d.dst, packet, ts, pid, version)
        out.append(hdr)
        if pid != PROTO_TLS or not hdr.is_amqp10:
            d.opaque_bytes += 8  # (read only on a connection of another protocol: see _other_end)
        if self.other is not None or hdr.is_other:
            if self.other is None:
                self._become_other(hdr.name)
            d.mode = _M_OPAQUE
            return
        if not hdr.is_amqp10:  # an AMQP 1.x version this dissector does not decode (version negotiation)
            hdr.notes.append(ExpertNote(WARN, "protocol", f"{hdr.name} is not AMQP 1.0: rest of the stream skipped"))
            d.mode = _M_OPAQUE
            return
        if pid == PROTO_TLS:
            hdr.notes.append(ExpertNote(NOTE, "protocol", "TLS negotiated: the rest of the stream is encrypted"))
            self.tls = True
            d.mode = _M_OPAQUE
            return
        d.protocol = pid
        d.mode = _M_FRAMES

    def _frame(self, d: _Direction, frame: Frame, buf, body: int, end: int) -> None:
        self.frames += 1
        peer_max = d.peer_max
        fsize = frame.size
        if peer_max >= 0 and fsize > peer_max:
            frame.add_note(
                ExpertNote(WARN, "protocol", f"frame of {frame.size} bytes exceeds the peer's max-frame-size {peer_max}")
            )
        if d.protocol == PROTO_SASL and frame.type == FRAME_AMQP and body < end:
            self._amqp_in_sasl(d, frame)
        if body == end:
            if frame.type == FRAME_SASL:
                frame.add_note(ExpertNote(WARN, "protocol", "empty SASL frame"))
            return  # heartbeat
        budget = self.budget
        if budget is None:
            budget = self.budget = [ELEMENT_BUDGET_BASE]
        maxe = DEFAULT_MAX_ELEMENTS  # (typed locals when compiled: the arithmetic below makes no ints)
        per = ELEMENTS_PER_BYTE
        left = budget[0]
        left += per * fsize
        cap = left if left < maxe else maxe
        if frame.type == FRAME_AMQP:
            values = None
            if SCAN_HOT:
                res = self.scan_res
                if res is None:
                    res = self.scan_res = ScanResult()
                if cap == maxe:
                    # budget to spare (the usual case): the scanner charges a list that holds the cap
                    # until a scan spends from it (most do not), so no int is made per frame
                    sb = self.scan_budget
                    if sb is None:
                        sb = self.scan_budget = [DEFAULT_MAX_ELEMENTS]
                    values = scan_into(buf, body, end, sb, res)
                    spent = sb[0]
                    spent = maxe - spent
                    if spent:
                        sb[0] = maxe
                else:
                    budget[0] = cap
                    values = scan_into(buf, body, end, budget, res)
                    spent = budget[0]
                    spent = cap - spent
                if spent:
                    left -= spent if spent < cap else cap
                    cap = left if left < maxe else maxe
            if values is not None:  # a well-formed transfer, flow or disposition: no Composite tree
                budget[0] = left
                perf_end = res.perf_end
                if res.spans:  # decode now: the buffer is trimmed after this pass
                    values = tuple([x.decode(buf) if type(x) is Span else x for x in values])
                name = frame.pname = res.name
                frame.fields = values
                if self.bodies:  # frames are shown: keep the encoding for a full decode (-V, jsonl)
                    frame._perf_body = buffer_bytes(buf, body, perf_end)
                if name == "transfer":
                    if self.keep_payloads:
                        frame.payload = buffer_bytes(buf, perf_end, end)
                    frame.payload_size = end - perf_end
                    if self.messages:
                        self._transfer(d, frame, values)
                elif perf_end != end:
                    frame.add_note(
                        ExpertNote(WARN, "malformed", f"{end - perf_end} bytes after the {name} performative"))
                return
        self._decode(d, frame, buf, body, end, left, cap)

    def _amqp_in_sasl(self, d: _Direction, frame: Frame) -> None:
        """An AMQP frame (with a body) while the direction is in the SASL layer."""
        if d.lost:  # the AMQP protocol header that ends the SASL layer was lost in a gap
            d.protocol = PROTO_AMQP
            frame.add_note(ExpertNote(NOTE, "sequence", "AMQP frame after a gap in the SASL layer: "
                                      "the AMQP protocol header was lost (inferred)"))
        else:
            frame.add_note(ExpertNote(WARN, "protocol", "AMQP frame in the SASL layer"))

    def _decode(self, d: _Direction, frame: Frame, buf, body: int, end: int, left: int, cap: int) -> None:
        """The generic path of a frame body (any performative the scanner did not read): decode it
        with the Reader within ``cap`` elements (``left``: the connection's budget with this frame's
        share), check it against the spec and note what the connection learns from it."""
        budget = self.budget
        r = Reader(buf, body, end, max_elements=cap)
        try:
            perf = r.value()
        except DissectError as e:
            if r.elements_left < 0 and cap < DEFAULT_MAX_ELEMENTS:
                budget[0] = left - cap
                frame.add_note(ExpertNote(ERROR, "budget", f"frame body not decoded: {_budget_text(budget, cap)}"))
            else:
                budget[0] = left - (cap - r.elements_left if r.elements_left >= 0 else cap)
                frame.add_note(ExpertNote(ERROR, "malformed", f"frame body does not parse: {e}"))
            return
        budget[0] = left - (cap - r.elements_left)
        frame.performative = perf if isinstance(perf, Described) else None  # sets pname too
        if not isinstance(perf, Composite):
            what = perf.descriptor if isinstance(perf, Described) else type(perf).__name__
            frame.add_note(ExpertNote(ERROR, "malformed", f"frame body is not a known performative ({what!r})"))
            return
        name = perf.spec.name
        v = perf.value
        pad = len(perf.spec.fields) - len(v)
        frame.fields = v + [ABSENT] * pad if pad > 0 else v
        expected = PERFORMATIVES if frame.type == FRAME_AMQP else SASL_FRAMES
        if name not in expected:
            frame.add_note(
                ExpertNote(ERROR, "protocol", f"{name} is not a {'performative' if frame.type == 0 else 'SASL frame'}")
            )
        missing: list = []
        _check_mandatory(perf, missing)
        for n in missing:
            frame.add_note(n)
        if name == "transfer":
            if self.keep_payloads:
                frame.payload = buffer_bytes(buf, r.pos, end)
            frame.payload_size = end - r.pos
            if self.messages:
                self._transfer(d, frame, frame.fields)
        elif r.pos != end:
            frame.add_note(ExpertNote(WARN, "malformed", f"{end - r.pos} bytes after the {name} performative"))
        if name == "open" or name == "attach":
            self._learn(d, perf, name)

    def _learn(self, d: _Direction, perf: Composite, name: str) -> None:
        """What the framing layer takes from an open (the max-frame-size its sender accepts) or an
        attach (a link to a transaction coordinator: payloads are kept, the model reads them)."""
        if name == "open":
            mfs = perf.effective("max-frame-size")
            if isinstance(mfs, int) and not isinstance(mfs, bool) and 0 <= mfs <= 0xFFFFFFFF:  # (a uint)
                if self.announced_max_frame is None:
                    self.announced_max_frame = [None, None]
                self.announced_max_frame[d.index] = mfs
                self.direction_state(1 - d.index).peer_max = mfs  # (what the other direction's frames must fit)
        elif name == "attach" and not self.keep_payloads and not self.messages:
            target = perf.field("target")
            if isinstance(target, Composite) and target.spec.name == "coordinator":
                self.keep_payloads = True

    def _transfer(self, d: _Direction, frame: Frame, v) -> None:
        """Reassembly of a delivery's message; ``v``: the transfer's fields (ABSENT-padded)."""
        handle = v[TRANSFER_HANDLE]
        if not isinstance(handle, int):  # malformed (a list, a map ...): still a key, never unhashable
            handle = ABSENT if handle is ABSENT or handle is None else repr(handle)
        key = (frame.channel, handle)
        part = d.partials.get(key) if d.partials is not None else None
        did = v[TRANSFER_DELIVERY_ID]
        if did is ABSENT:
            did = None
        if part is not None and part.cut is not None and did is not None and did != part.delivery_id:
            del d.partials[key]  # (its last frames were cut off by the snap length: this is the next delivery)
            part = None
        if part is None:
            tag = v[TRANSFER_DELIVERY_TAG]
            if tag is ABSENT:
                tag = None
            part = Delivery(frame.channel, handle, did, tag or None, frame.first_packet, frame.ts)
            part.budget = self.budget
            if not self.bodies:  # summaries: frames and size only
                part.payload = None
            if did is None:
                frame.add_note(
                    ExpertNote(WARN, "sequence", "first transfer of a delivery without delivery-id "
                               "(continuation of a delivery that started before the capture?)")
                )
                part.incomplete = True
            if d.partials is None:
                d.partials = {}
            d.partials[key] = part
        elif did is not None and part.delivery_id is not None and did != part.delivery_id:
            frame.add_note(
                ExpertNote(WARN, "sequence", f"delivery-id {did} differs from {part.delivery_id} of the delivery in progress")
            )
        part.frames += 1
        payload = frame.payload
        if frame.cut is not None:
            part.cut = frame.cut
        part.message_size += frame.payload_size
        part.last_packet = frame.packet
        part.last_ts = frame.ts
        if part.payload is not None:
            if part.message_size > self.max_message_bytes:
                part.payload = None
                frame.add_note(ExpertNote(NOTE, "reassembly",
                                              f"message larger than {self.max_message_bytes} bytes: not kept"))
            else:
                part.payload.append(payload)
        aborted = v[TRANSFER_ABORTED] is True
        if aborted or v[TRANSFER_MORE] is not True:
            del d.partials[key]
            part.aborted = aborted
            if part.payload is not None:
                part.payload = b"".join(part.payload) if part.frames > 1 else payload
            frame.delivery = part
            if aborted:
                frame.add_note(ExpertNote(NOTE, "sequence", f"delivery aborted after {part.frames} frames"))
            elif part.frames > 1:
                frame.add_note(
                    ExpertNote(CHAT, "reassembly",
                               f"message reassembled from {part.frames} transfer frames ({part.message_size} bytes)")
                )


# -- a connection of protocol headers alone, in its smallest form (issue 40: memory per idle connection) ------
# Per direction, 2 bits: 0 no byte, HEADER_AMQP / HEADER_SASL its AMQP 1.0.0 protocol header and nothing else.
HEADER_AMQP = 1
HEADER_SASL = 2


def _header_code(d: _Direction) -> int:
    """HEADER_AMQP / HEADER_SASL when direction ``d`` is exactly what an AMQP 1.0.0 (or SASL) protocol
    header alone leaves (nothing buffered, noted, skipped or lost), else 0."""
    if (d.mode != _M_FRAMES or d.buf is not _NO_BYTES or d.opaque_bytes != 8 or d.first_packet is not None
            or d.partials is not None or d.skipped != 0 or d.skip_start_packet is not None or d.lost
            or d.cut_skip != 0 or d.cut_resync or d.peer_max != -1):
        return 0
    if d.protocol == PROTO_AMQP:
        return HEADER_AMQP
    return HEADER_SASL if d.protocol == PROTO_SASL else 0


def headers_only(c) -> int:
    """The state of decoder ``c`` as a small int when all it holds is the protocol headers its directions
    sent (2 bits per direction, see HEADER_AMQP): :func:`with_headers` on a fresh decoder makes the same
    state again.  0 when ``c`` holds anything more (a frame, a note, a partial byte, a TLS or other protocol)."""
    if type(c) is not AmqpConnection:
        return 0
    if (c.frames or c.other is not None or c.tls or c.announced_max_frame is not None or c.budget is not None
            or c.scan_res is not None):
        return 0
    code = 0
    if c.dir0 is not None:
        code = _header_code(c.dir0)
        if not code:
            return 0
    if c.dir1 is not None:
        h = _header_code(c.dir1)
        if not h:
            return 0
        code |= h << 2
    return code


def with_headers(c: AmqpConnection, code: int) -> AmqpConnection:
    """Fresh decoder ``c`` given the state :func:`headers_only` said in ``code`` (each direction that sent a
    header: past it, waiting for its first frame)."""
    for i in (0, 1):
        h = (code >> (2 * i)) & 3
        if h:
            d = c.direction_state(i)
            d.mode = _M_FRAMES
            d.protocol = PROTO_AMQP if h == HEADER_AMQP else PROTO_SASL
            d.opaque_bytes = 8
    return c


def _budget_text(budget, cap) -> str:
    """Why a decode stopped for want of element budget (an expert note's text)."""
    return (f"it holds more than the {cap} elements left of this connection's decoding budget "
            f"({ELEMENT_BUDGET_BASE} plus {ELEMENTS_PER_BYTE} per byte of its frames; arrays of "
            f"zero-width elements cost elements without bytes)")


def _check_mandatory(perf: Composite, notes: list) -> None:
    """Mandatory fields present, and every field's value of the type the spec gives it (from the
    generated tables: the field's primitive type, the composite it names, or the archetype a
    ``*`` field requires; an array where the field is multiple)."""
    v = perf.value
    n = len(v)
    for i, f in enumerate(perf.spec.fields):
        x = v[i] if i < n else None
        if x is None:
            if f.mandatory:
                notes.append(ExpertNote(WARN, "protocol", f"mandatory field {f.name} of {perf.spec.name} is missing"))
            continue
        if not _type_ok(f, x):
            notes.append(ExpertNote(WARN, "protocol", f"field {f.name} of {perf.spec.name} holds a "
                                    f"{amqp_type_of(x)}; the spec's type is {f.requires or f.type}"))


def _type_ok(f, x) -> bool:
    if f.multiple and isinstance(x, Array):
        return all(_type_ok_one(f, e) for e in x)
    return _type_ok_one(f, x)


def _type_ok_one(f, x) -> bool:
    if f.type == "*":  # a composite providing the required archetype (or one we do not know)
        if isinstance(x, Composite):
            return f.requires in x.spec.provides
        return isinstance(x, Described) and not isinstance(x, Composite)
    if f.primitive in COMPOSITES:  # a field typed by a composite (error)
        return isinstance(x, Composite) and x.spec.name == f.primitive or (
            isinstance(x, Described) and not isinstance(x, Composite))
    return amqp_type_of(x) == f.primitive


# --------------------------------------------------------------------------- resync


def _descriptor_ok(buf, p: int, end: int, ftype: int):
    """Is there a performative descriptor at ``p``?  True/False, or None if more bytes are needed."""
    if end - p < 3:
        return None
    if buf[p] != 0:
        return False
    c = buf[p + 1]
    codes = _PERF_CODES if ftype == FRAME_AMQP else _SASL_CODES
    if c == 0x53:
        return buf[p + 2] in codes
    if c == 0x80:
        if end - p < 10:
            return None
        return _U64.unpack_from(buf, p + 2)[0] in codes
    if c == 0xA3:
        ln = buf[p + 2]
        if end - p < 3 + ln:
            return None
        symbols = _PERF_SYMBOLS if ftype == FRAME_AMQP else _SASL_SYMBOLS
        return bytes(buf[p + 3 : p + 3 + ln]) in symbols
    return False


def _plausible(buf, i: int, n: int, cap: int):
    """True/False for a frame header at i, None if more bytes are needed to decide."""
    if n - i < 8:
        return None
    size, doff, ftype, _ = _HDR.unpack_from(buf, i)
    if size < 8 or doff < 2 or ftype > 1 or doff * 4 > size or size > cap:
        return False
    if size == doff * 4:  # heartbeat: only the canonical empty frame
        return ftype == 0 and size == 8
    return _descriptor_ok(buf, i + doff * 4, n, ftype)


def _find_frame(buf, start: int, cap: int):
    """Offset of the next plausible frame header at or after ``start``.

    Returns None if there is none, or ``-(i+1)`` if a candidate at ``i`` needs
    more bytes.  Candidates come from a byte search for descriptor starts
    (``00 53``, ``00 80``, ``00 a3``) and the canonical heartbeat, so scanning
    garbage costs a few ``bytes.find`` calls, not a Python loop per byte.
    """
    n = len(buf)
    best = None
    pending = None
    # the first heartbeat bounds the search: a descriptor at j starts a frame at j - 16 at the
    # earliest, so none after hb + 16 can come before it (without the bound, a run of frames each
    # resynchronised on -- empty frames past a tiny max-frame-size -- scanned the rest of the buffer
    # for each one: quadratic)
    hb = buf.find(b"\x00\x00\x00\x08\x02\x00", start)
    end = n if hb == -1 else min(n, hb + 18)
    for pat in (b"\x00\x53", b"\x00\x80", b"\x00\xa3"):
        j = buf.find(pat, start + 8, end)
        while j != -1 and (best is None or j - 16 < best):
            for doff in (2, 3, 4):
                i = j - 4 * doff
                if i < start or (best is not None and i >= best):
                    continue
                ok = _plausible(buf, i, n, cap)
                if ok:
                    best = i
                elif ok is None and (pending is None or i < pending):
                    pending = i
            j = buf.find(pat, j + 1, end)
    if hb != -1 and (best is None or hb < best):
        best = hb
    if pending is not None and (best is None or pending < best):
        return -(pending + 1)
    return best
