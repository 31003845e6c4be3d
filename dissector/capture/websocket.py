"""AMQP over WebSocket (RFC 6455), sans-IO: the HTTP upgrade and the frames around the AMQP stream.

Detection
---------
:func:`sniff` looks at the first bytes of a client direction: an HTTP/1.1 ``GET`` whose
headers carry ``Upgrade: websocket`` and a ``Sec-WebSocket-Protocol`` offering ``amqp``
(the OASIS WebSocket binding; ``AMQPWSB10``, the name of its working draft that Azure
Service Bus and Event Hubs use, is accepted too).  It returns ``None`` while the headers
are incomplete (at most :data:`MAX_HTTP_BYTES`), then ``True`` or ``False``.

WebSocketLayer
--------------
One per TCP connection, the stream-layer interface of the Dissector (``feed`` / ``gap`` /
``finish`` returning :class:`StreamData`, :class:`StreamGap` and :class:`PacketNote` events
in stream order).  It reads the client's upgrade request and the server's response (notes
``WebSocket upgrade GET /path, subprotocol amqp`` and ``WebSocket 101 Switching Protocols
...``; any other status, or a subprotocol other than AMQP, is a note and the connection is
not AMQP: the rest of both directions is ignored), then the frames:

* 7, 16 and 64-bit payload lengths; client frames are unmasked (the mask applied to a
  whole chunk at once, as one big-integer XOR); payloads are passed on as they arrive, a
  frame is never buffered whole, so memory stays bounded whatever the frame size;
* binary messages, fragmented (continuation frames) or not, become the inner AMQP stream;
  with ``permessage-deflate`` negotiated in the handshake, compressed messages are
  inflated, within caps per message and per direction (a deflate bomb is cut, said in a
  note, and the bytes held back reach the AMQP layer as a gap; see MAX_INFLATED_MESSAGE);
* text messages, ping, pong and close (status code and reason) become notes;
* protocol violations are warnings: an unmasked client frame or a masked server frame,
  reserved bits without an extension, reserved opcodes, a control frame longer than 125
  bytes or fragmented, a continuation without a message, a data frame inside a fragmented
  message, a non-minimal length encoding, data after a close.

Capture gaps
------------
A gap inside the payload of a frame whose header was seen is exact: the frame's length
says how much of the frame is left, the mask offset advances by the gap, and the inner
stream gets a :class:`StreamGap` of the same size (for a binary message) without losing
the framing.  A gap that reaches past the end of the current frame (or hits a header)
loses the frame boundaries: the inner stream gets a StreamGap of the best estimate (the
TCP gap plus the rest of the frame), and the layer resynchronises.  It scans the bytes
after the gap for a *plausible* frame header -- reserved bits clear (RSV1 allowed on data
frames when permessage-deflate is on), a known opcode, the MASK bit the direction must use
(set for the client, clear for the server), the shortest length encoding, a control frame
final and at most 125 bytes, a data frame not empty (but for an empty final continuation
after the first) -- and accepts it only when the
:data:`RESYNC_CHAIN` - 1 headers that follow it at the offsets the lengths give are plausible
too, with a different masking key each (a client draws a fresh key per frame; a masked run of
equal bytes repeats one) and data frames that make messages (FIN and continuations agree), or when a chain of two or more frames ends exactly at the end of the
bytes received so far (TCP segments usually end at a frame end).  A scan that finds no
confirmed candidate holds the bytes from its first unconfirmed one until more arrive.  What
remains possible is a false header, in the bytes just before the first real one, whose length
leads exactly onto the real chain (measured: about 1 gap in 300 with random payloads); its
payload, at most 125 bytes, then reaches the AMQP layer, which is resynchronising after the
StreamGap anyway.  A candidate whose chain cannot be checked within :data:`MAX_RESYNC_BYTES` is
dropped and the scan goes on; the bytes skipped are reported in a note when the scan
succeeds.  With permessage-deflate and context takeover, compressed messages after a gap
cannot be inflated (the shared window was lost): each becomes a StreamGap.
"""

from __future__ import annotations

import base64
import re
import zlib

from ..errors import CHAT, NOTE, WARN, ExpertNote
from ..events import PacketNote, StreamData, StreamGap

GROUP = "websocket"
MAX_HTTP_BYTES = 16384  # cap on an HTTP request or response header block
MAX_RESYNC_BYTES = 1 << 20  # longest run of bytes held while checking a resynchronisation candidate
RESYNC_CHAIN = 4  # plausible frame headers in a row that confirm a resynchronisation candidate
MAX_INFLATE_CHUNK = 1 << 20  # most inflated bytes produced per zlib call (deflate bombs stay bounded)
# permessage-deflate output passed on to the AMQP layer: at most MAX_INFLATED_MESSAGE bytes of one
# message and, per direction, at most INFLATE_FLOOR + INFLATE_RATIO x the compressed payload bytes so
# far (a frame's first FRAME_CREDIT bytes are counted at its header, so the cut falls at the same byte
# however TCP splits the frame).  DEFLATE inflates up to about 1,030-fold: a few hundred KB would
# otherwise become gigabytes of frames.  The ratio keeps the cost per captured byte within the
# bound for any input: the costliest AMQP content (empty frames: ``frames --format jsonl`` on them)
# costs up to about 4.6x an ordinary capture's CPU per byte, times 3 is under 20x.  What a cap holds back is still inflated, in
# MAX_INFLATE_CHUNK pieces that are dropped (memory stays flat, and the shared compression window
# stays whole for the next message; but see DISCARD_RATIO), counted, and reported when the message
# ends: a note, and a StreamGap of that size whose cause says the bytes were held back, not lost.
MAX_INFLATED_MESSAGE = 64 << 20
INFLATE_FLOOR = 1 << 16
INFLATE_RATIO = 3
FRAME_CREDIT = 1 << 16
# What a cap holds back is inflated and dropped only up to DISCARD_FLOOR + DISCARD_RATIO x the
# message's compressed bytes (keeping the window costs the inflation: a bomb's 1,030-fold would cost
# 1,030 bytes of zlib work per byte); past that the rest of the message is not inflated, its
# compressed bytes are counted, and with context takeover the direction's window is lost.
DISCARD_FLOOR = 1 << 20
DISCARD_RATIO = 64
AMQP_SUBPROTOCOLS = frozenset({"amqp", "amqpwsb10"})  # compared case-insensitively
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_DEFLATE_TAIL = b"\x00\x00\xff\xff"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
_OP_NAMES = {OP_CONT: "continuation", OP_TEXT: "text", OP_BINARY: "binary", OP_CLOSE: "close",
             OP_PING: "ping", OP_PONG: "pong"}

# per-direction states
_HTTP, _FRAMES, _RESYNC, _OFF = 0, 1, 2, 3
# what the payload of the current frame is for
_P_BINARY, _P_TEXT, _P_CONTROL, _P_SKIP = 0, 1, 2, 3

# first two bytes of a resynchronisation candidate: FIN/RSV1 + data or control opcode, then the MASK bit
_CAND_FIRST = rb"[\x00-\x02\x40-\x42\x80-\x82\xc0-\xc2\x88-\x8a]"
_CANDIDATE = (re.compile(_CAND_FIRST + rb"[\x80-\xff]", re.S),  # client frames are masked
              re.compile(_CAND_FIRST + rb"[\x00-\x7f]", re.S))  # server frames are not


# --------------------------------------------------------------------------- HTTP


def _parse_http(block: bytes):
    """(start line, {lower-case name: value, repeated headers joined by ', '}) of a header block."""
    lines = block.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            continue
        name = name.strip().lower()
        value = value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return lines[0], headers


def _tokens(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def _is_upgrade(headers: dict) -> bool:
    return any(t.lower() == "websocket" for t in _tokens(headers.get("upgrade")))


def _amqp_offered(headers: dict) -> list[str]:
    return [t for t in _tokens(headers.get("sec-websocket-protocol")) if t.lower() in AMQP_SUBPROTOCOLS]


def sniff(data: bytes) -> bool | None:
    """Does a client direction starting with ``data`` open a WebSocket carrying AMQP?

    ``None``: not enough bytes yet to say."""
    head = bytes(data[:4])
    if head != b"GET "[: len(head)]:
        return False
    if len(head) < 4:
        return None
    end = bytes(data[:MAX_HTTP_BYTES]).find(b"\r\n\r\n")
    if end < 0:
        return None if len(data) < MAX_HTTP_BYTES else False
    start, headers = _parse_http(bytes(data[:end]))
    if not start.endswith(" HTTP/1.1") or not _is_upgrade(headers):
        return False
    return bool(_amqp_offered(headers))


# --------------------------------------------------------------------------- frames


def unmask(chunk, key: bytes, offset: int = 0) -> bytes:
    """``chunk`` XOR the 4-byte masking ``key`` repeated, starting ``offset`` bytes into the key."""
    n = len(chunk)
    if not n:
        return b""
    if offset:
        key = key[offset:] + key[:offset]
    pad = (key * ((n >> 2) + 1))[:n]
    return (int.from_bytes(chunk, "little") ^ int.from_bytes(pad, "little")).to_bytes(n, "little")


def _header(buf, i: int, n: int):
    """(b0, b1, header length, payload length, mask key or None) of the frame header at ``i``,
    or None when fewer than the header's bytes are available."""
    if n - i < 2:
        return None
    b0 = buf[i]
    b1 = buf[i + 1]
    ln = b1 & 0x7F
    hlen = 2
    if ln == 126:
        hlen = 4
    elif ln == 127:
        hlen = 10
    masked = b1 & 0x80
    if masked:
        hlen += 4
    if n - i < hlen:
        return None
    if ln == 126:
        ln = (buf[i + 2] << 8) | buf[i + 3]
    elif ln == 127:
        ln = int.from_bytes(buf[i + 2 : i + 10], "big")
    key = bytes(buf[i + hlen - 4 : i + hlen]) if masked else None
    return b0, b1, hlen, ln, key


def _minimal(b1: int, ln: int) -> bool:
    form = b1 & 0x7F
    if form == 126:
        return ln >= 126
    if form == 127:
        return 0xFFFF < ln < (1 << 63)
    return True


class _Dir:
    __slots__ = (
        "state", "buf", "client", "remaining", "key", "key_off", "payload", "opcode", "fin",
        "ctrl", "msg_op", "msg_len", "msg_frames", "msg_compressed", "msg_broken", "closed",
        "inflater", "inflate_lost", "skipped", "resync_packet", "warned", "error_gap", "after_resync",
        "msg_inflated", "msg_cut", "msg_zipped", "msg_skipped", "zipped", "precredit", "unzipped", "cut_messages",
        "cut_bytes",
    )

    def __init__(self, client: bool):
        self.state = _HTTP
        self.buf = bytearray()
        self.client = client
        self.remaining = 0  # payload bytes of the current frame still to come
        self.key = None  # masking key of the current frame
        self.key_off = 0
        self.payload = _P_SKIP
        self.opcode = 0
        self.fin = True
        self.ctrl = bytearray()  # payload of the current control frame
        self.msg_op = None  # opcode of the message in progress (None: between messages)
        self.msg_len = 0
        self.msg_frames = 0
        self.msg_compressed = False
        self.msg_broken = False
        self.closed = False
        self.inflater = None
        self.inflate_lost = False  # a gap broke the shared compression window
        self.skipped = 0
        self.resync_packet = None
        self.error_gap = False  # sync lost on a malformed header (no TCP gap told the inner stream)
        self.after_resync = False  # a continuation may come first: its message began before the loss
        self.warned: set = set()
        self.msg_inflated = 0  # inflated bytes of the current message passed on
        self.msg_cut = 0  # inflated bytes of the current message held back by a cap
        self.msg_zipped = 0  # compressed bytes of the current message credited (as ``zipped``)
        self.msg_skipped = -1  # compressed bytes of the message not inflated past DISCARD_RATIO (-1: none)
        self.zipped = 0  # compressed payload bytes of this direction credited to its inflation budget
        self.precredit = 0  # bytes of the current frame credited at its header and not yet arrived
        self.unzipped = 0  # inflated bytes of this direction passed on
        self.cut_messages = 0  # messages a cap cut, after the first (which has its own note)
        self.cut_bytes = 0  # inflated bytes those held back


_OPCODES = {0: "Continuation", 1: "Text", 2: "Binary", 8: "Connection Close", 9: "Ping", 10: "Pong"}


class WsFrame:
    """One WebSocket frame header, for ``frames -V`` (the "WebSocket" layer of Wireshark's tree)."""

    __slots__ = ("direction", "fin", "opcode", "rsv", "masked", "length", "packet")
    layer = "WebSocket"

    def __init__(self, direction, fin, opcode, rsv, masked, length, packet):
        self.direction = direction
        self.fin = fin
        self.opcode = opcode
        self.rsv = rsv
        self.masked = masked
        self.length = length
        self.packet = packet

    def describe(self) -> str:
        op = _OPCODES.get(self.opcode, "Reserved")
        rsv = f", RSV {self.rsv >> 4:03b}" if self.rsv else ""
        return (f"Fin: {self.fin}, Opcode: {op} ({self.opcode}){rsv}, Mask: {self.masked}, "
                f"Payload length: {self.length}")


class WebSocketLayer:
    """The WebSocket layer of one TCP connection (see the module docstring).

    ``records``: a list to append a :class:`WsFrame` to for each frame header (``frames -V``)."""

    name = "websocket"

    def __init__(self, conn: str, client_direction: int = 0, records: list | None = None):
        self.conn = conn
        self.records = records
        self.client_direction = client_direction
        self.dirs = (_Dir(client_direction == 0), _Dir(client_direction == 1))
        self.key = None  # Sec-WebSocket-Key of the request
        self.path = None
        self.offered: list[str] = []
        self.subprotocol = None  # chosen by the server
        self.deflate = False  # permessage-deflate negotiated
        self.no_context = [False, False]  # per direction: a fresh compression window per message
        self.accepted = None  # True after a 101, False after a refusal, None before the response
        self.frames = [0, 0]
        self.messages = [0, 0]
        self._last = None  # the StreamData the current feed is adding payloads to
        self._parts: list = []

    # -- interface --------------------------------------------------------------------

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        d = self.dirs[direction]
        out: list = []
        if d.state == _OFF or not data:
            return out
        if d.buf:
            d.buf += data
            work = d.buf
        else:
            work = data
        n = len(work)
        pos = 0
        if d.state == _HTTP:
            pos = self._http(direction, d, work, n, ts, packet, out)
            if pos < 0:  # incomplete headers
                if d.state == _HTTP and not d.buf:
                    d.buf = bytearray(work)
                return out
        while True:
            if d.state == _RESYNC:
                pos = self._resync(direction, d, work, pos, n, ts, packet, out)
            if d.state != _FRAMES:
                break
            pos = self._frames(direction, d, work, pos, n, ts, packet, out)
            if d.state != _RESYNC:
                break
        if d.state == _OFF:
            d.buf = bytearray()
        elif pos >= n:
            if d.buf:
                d.buf = bytearray()
        elif work is d.buf:
            del d.buf[:pos]
        else:
            d.buf = bytearray(memoryview(work)[pos:])
        if self._last is not None:
            self._seal()
        return out

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        d = self.dirs[direction]
        out: list = []
        if d.state == _OFF:
            return out
        if d.state == _HTTP:
            if d.client:  # the layer was made from a complete request: cannot happen, be safe
                d.state = _OFF
                return out
            self._note(out, packet, ts, WARN, f"{size} bytes missing from the capture before the end of the "
                                               "server's upgrade response; resynchronising on frames")
            d.buf = bytearray()
            self._lose_sync(d, packet)
            out.append(StreamGap(self.conn, direction, size, ts, packet))
            return out
        if d.state == _FRAMES and not d.buf and d.remaining and size <= d.remaining:
            # inside a payload whose length is known: the framing survives
            d.remaining -= size
            d.key_off = (d.key_off + size) & 3
            if d.payload == _P_BINARY:
                d.msg_len += size
                if d.msg_compressed:
                    self._break_inflate(d, direction, size, ts, packet, out)
                else:
                    out.append(StreamGap(self.conn, direction, size, ts, packet))
            elif d.payload == _P_CONTROL:
                d.payload = _P_SKIP
                self._note(out, packet, ts, WARN, f"{size} bytes of a {_OP_NAMES[d.opcode]} frame missing "
                                                   "from the capture")
            if not d.remaining:
                self._frame_end(direction, d, ts, packet, out)
            return out
        # the frame boundaries are lost
        inner = size
        if d.state == _FRAMES and d.remaining and d.payload != _P_BINARY:
            inner = max(size - d.remaining, 0)
        self._end_cut(d, direction, ts, packet, out)
        if self.deflate and not self.no_context[direction]:
            self._inflate_lost(d)  # compressed bytes may have been lost with the window they share
        self._lose_sync(d, packet)
        d.skipped += len(d.buf)
        d.buf = bytearray()
        if inner:
            out.append(StreamGap(self.conn, direction, inner, ts, packet))
        return out

    def finish(self, ts: float | None, packet: int | None) -> list:
        out: list = []
        for direction, d in enumerate(self.dirs):
            self._end_cut(d, direction, ts, packet, out)
            if d.cut_messages > 1:
                side = "client" if d.client else "server"
                self._note(out, packet, ts, WARN, f"{d.cut_messages - 1:,} more compressed messages from the {side} "
                                                   f"cut by the inflation caps: {d.cut_bytes:,} inflated bytes held back")
            if d.state == _RESYNC:
                skipped = d.skipped + len(d.buf)
                if skipped:
                    self._note(out, packet, ts, WARN, f"stream ends while resynchronising: {skipped} bytes skipped")
            elif d.state == _FRAMES:
                if d.remaining or d.buf:
                    self._note(out, packet, ts, WARN, f"stream ends inside a {_OP_NAMES.get(d.opcode, 'reserved')} "
                                                       f"frame: {d.remaining or len(d.buf)} bytes missing")
                elif d.msg_op is not None:
                    self._note(out, packet, ts, WARN, f"stream ends inside a fragmented {_OP_NAMES[d.msg_op]} message "
                                                       f"({d.msg_frames} frames, {d.msg_len} bytes)")
            elif d.state == _HTTP and d.buf and not d.client:
                self._note(out, packet, ts, WARN, f"stream ends inside the server's upgrade response "
                                                   f"({len(d.buf)} bytes)")
            d.buf = bytearray()
            d.state = _OFF
        return out

    # -- HTTP -------------------------------------------------------------------------

    def _http(self, direction, d, work, n, ts, packet, out) -> int:
        end = bytes(work[:MAX_HTTP_BYTES]).find(b"\r\n\r\n")
        if end < 0:
            if n >= MAX_HTTP_BYTES:
                self._note(out, packet, ts, WARN, f"HTTP header block longer than {MAX_HTTP_BYTES} bytes: "
                                                   "not a WebSocket upgrade; stream ignored")
                self._off(out)
            return -1
        start, headers = _parse_http(bytes(work[:end]))
        if d.client:
            self._request(start, headers, ts, packet, out)
        else:
            self._response(start, headers, ts, packet, out)
        if d.state == _HTTP:
            d.state = _FRAMES
        return end + 4

    def _request(self, start, headers, ts, packet, out):
        parts = start.split(" ")
        self.path = parts[1] if len(parts) > 2 else ""
        self.key = headers.get("sec-websocket-key")
        self.offered = _tokens(headers.get("sec-websocket-protocol"))
        amqp = _amqp_offered(headers)
        msg = f"WebSocket upgrade GET {self.path}, subprotocol {', '.join(self.offered) or '(none)'}"
        if not amqp or not _is_upgrade(headers):
            self._note(out, packet, ts, WARN, msg + ": not an AMQP WebSocket; stream ignored")
            self._off(out)
            return
        version = headers.get("sec-websocket-version")
        if version != "13":
            msg += f" [Sec-WebSocket-Version {version!r}, expected '13']"
        self._note(out, packet, ts, CHAT, msg)

    def _response(self, start, headers, ts, packet, out):
        parts = start.split(" ", 2)
        status = parts[1] if len(parts) > 1 else ""
        reason = parts[2] if len(parts) > 2 else ""
        if status != "101":
            self.accepted = False
            self._note(out, packet, ts, WARN, f"WebSocket upgrade refused: HTTP {status} {reason}".rstrip()
                       + "; the connection is not AMQP")
            self._off(out)
            return
        self.accepted = True
        self.subprotocol = headers.get("sec-websocket-protocol")
        problems = []
        if not _is_upgrade(headers):
            problems.append("no 'Upgrade: websocket'")
        accept = headers.get("sec-websocket-accept")
        if self.key is not None and accept is not None:
            import hashlib  # (here: its OpenSSL load is start-up cost every run would pay)

            want = base64.b64encode(hashlib.sha1(self.key.encode("latin-1") + _GUID).digest()).decode()
            if accept != want:
                problems.append(f"Sec-WebSocket-Accept {accept!r} does not match the key (expected {want!r})")
        ext = self._extensions(headers.get("sec-websocket-extensions"))
        msg = f"WebSocket {status} {reason}".rstrip() + f", subprotocol {self.subprotocol or '(none)'}"
        if ext:
            msg += f", extensions {ext}"
        if self.subprotocol is None:
            problems.append("the server chose no subprotocol; decoding as AMQP anyway")
        elif self.subprotocol.lower() not in AMQP_SUBPROTOCOLS:
            self._note(out, packet, ts, WARN, msg + ": not AMQP; the connection is ignored")
            self._off(out)
            return
        elif self.subprotocol not in self.offered:
            problems.append("a subprotocol the client did not offer")
        if problems:
            self._note(out, packet, ts, WARN, msg + " [" + "; ".join(problems) + "]")
        else:
            self._note(out, packet, ts, CHAT, msg)

    def _extensions(self, value: str | None) -> str:
        if not value:
            return ""
        for ext in value.split(","):
            params = [p.strip().lower() for p in ext.split(";")]
            if params[0] == "permessage-deflate":
                self.deflate = True
                c = self.client_direction
                self.no_context[c] = "client_no_context_takeover" in params
                self.no_context[1 - c] = "server_no_context_takeover" in params
        return value.strip()

    def _off(self, out):
        for d in self.dirs:
            d.state = _OFF
            d.buf = bytearray()

    # -- frames -----------------------------------------------------------------------

    def _frames(self, direction, d, work, pos, n, ts, packet, out) -> int:
        mv = None
        while d.state == _FRAMES:
            if d.remaining:
                take = n - pos
                if take <= 0:
                    break
                if take > d.remaining:
                    take = d.remaining
                if mv is None:
                    mv = memoryview(work)
                self._payload(direction, d, mv[pos : pos + take], ts, packet, out)
                pos += take
                d.remaining -= take
                if d.remaining:
                    break
                self._frame_end(direction, d, ts, packet, out)
                continue
            h = _header(work, pos, n)
            if h is None:
                break
            b0, b1, hlen, ln, key = h
            if not self._frame_start(direction, d, b0, b1, ln, key, ts, packet, out):
                # lost sync (a length no frame can have): scan from the next byte
                self._end_cut(d, direction, ts, packet, out)
                self._lose_sync(d, packet)
                d.skipped = 1
                d.error_gap = True
                return pos + 1
            pos += hlen
            if not ln:
                self._frame_end(direction, d, ts, packet, out)
        return pos

    def _warn(self, out, packet, ts, msg, once_key=None, d=None):
        if once_key is not None:
            if once_key in d.warned:
                return
            d.warned.add(once_key)
            msg += " (further ones in this direction not reported)"
        self._note(out, packet, ts, WARN, msg)

    def _frame_start(self, direction, d, b0, b1, ln, key, ts, packet, out) -> bool:
        if (b1 & 0x7F) == 127 and ln >> 63:
            self._warn(out, packet, ts, f"WebSocket frame length {ln:#x} has its most significant bit set; "
                                        "resynchronising")
            return False
        self.frames[direction] += 1
        op = b0 & 0x0F
        fin = bool(b0 & 0x80)
        rsv = b0 & 0x70
        if self.records is not None:
            self.records.append(WsFrame(direction, fin, op, rsv, key is not None, ln, packet))
        side = "client" if d.client else "server"
        d.opcode = op
        d.fin = fin
        d.key = key
        d.key_off = 0
        d.remaining = ln
        compressed = self._header_checks(d, op, b1, rsv, ln, key, side, ts, packet, out)
        if op >= 8:
            self._control_start(d, op, fin, ln, side, ts, packet, out)
        elif op not in _OP_NAMES:
            self._warn(out, packet, ts, f"WebSocket {side} frame with reserved data opcode {op:#x} "
                                        f"({ln} bytes skipped)")
            d.payload = _P_SKIP
        else:
            self._data_start(direction, d, op, ln, compressed, side, ts, packet, out)
        return True

    def _header_checks(self, d, op, b1, rsv, ln, key, side, ts, packet, out) -> bool:
        """The warnings a frame header earns (masking, length encoding, reserved bits); is the
        frame compressed (permessage-deflate's RSV1 on a data frame)?"""
        if d.client and key is None:
            self._warn(out, packet, ts, "unmasked WebSocket frame from the client", "unmasked", d)
        elif not d.client and key is not None:
            self._warn(out, packet, ts, "masked WebSocket frame from the server", "masked", d)
        if not _minimal(b1, ln):
            self._warn(out, packet, ts, f"WebSocket {_OP_NAMES.get(op, 'reserved')} frame length {ln} "
                                        "not in its shortest encoding", "minimal", d)
        if not rsv:
            return False
        if rsv == 0x40 and self.deflate and op in (OP_TEXT, OP_BINARY):
            return True
        self._warn(out, packet, ts, f"WebSocket {side} frame with reserved bits {rsv >> 4:03b} set "
                                    "and no extension that defines them")
        return False

    def _control_start(self, d, op, fin, ln, side, ts, packet, out) -> None:
        """A control frame's header (close, ping, pong; a reserved control opcode is skipped)."""
        if op not in _OP_NAMES:
            self._warn(out, packet, ts, f"WebSocket {side} frame with reserved control opcode {op:#x} "
                                        f"({ln} bytes skipped)")
            d.payload = _P_SKIP
            return
        bad = []
        if ln > 125:
            bad.append(f"{ln} bytes (at most 125)")
        if not fin:
            bad.append("fragmented")
        if bad:
            self._warn(out, packet, ts, f"WebSocket {_OP_NAMES[op]} frame {' and '.join(bad)}")
        d.payload = _P_CONTROL
        d.ctrl = bytearray()
        if ln > 125:
            d.payload = _P_SKIP  # shown, not held

    def _data_start(self, direction, d, op, ln, compressed, side, ts, packet, out) -> None:
        """A data frame's header: the first or a continuation frame of a message."""
        if d.closed:
            self._warn(out, packet, ts, f"WebSocket {_OP_NAMES[op]} frame after the {side}'s close frame",
                       "after-close", d)
        after_resync = d.after_resync
        d.after_resync = False
        if op == OP_CONT:
            if d.msg_op is None and after_resync:  # its message began in the bytes lost
                self._message_start(direction, d, OP_BINARY, False)
            elif d.msg_op is None:
                self._warn(out, packet, ts, f"WebSocket continuation frame from the {side} without a message "
                                            "in progress; taken as binary")
                self._message_start(direction, d, OP_BINARY, False)
        else:
            if d.msg_op is not None:
                self._warn(out, packet, ts, f"WebSocket {_OP_NAMES[op]} frame from the {side} inside an unfinished "
                                            f"fragmented {_OP_NAMES[d.msg_op]} message ({d.msg_frames} frames)")
                self._end_cut(d, direction, ts, packet, out)
            self._message_start(direction, d, op, compressed)
        d.msg_frames += 1
        d.payload = _P_BINARY if d.msg_op == OP_BINARY else _P_TEXT
        if d.msg_compressed and d.payload == _P_BINARY:
            # the inflation budget grows by a frame's first FRAME_CREDIT bytes at its header (the
            # same however TCP cuts the frame), by the rest as it arrives
            d.precredit = min(ln, FRAME_CREDIT)
            d.zipped += d.precredit
            d.msg_zipped += d.precredit

    def _message_start(self, direction, d, op, compressed):
        d.msg_op = op
        d.msg_len = 0
        d.msg_frames = 0
        d.msg_compressed = compressed
        d.msg_broken = False
        d.msg_inflated = 0
        d.msg_cut = 0
        d.msg_zipped = 0
        d.msg_skipped = -1
        if compressed and op == OP_BINARY and not d.inflate_lost:
            if d.inflater is None or self.no_context[direction]:
                d.inflater = zlib.decompressobj(-15)

    def _payload(self, direction, d, chunk, ts, packet, out):
        kind = d.payload
        if kind == _P_SKIP:
            return
        if d.key is not None:
            data = unmask(chunk, d.key, d.key_off)
            d.key_off = (d.key_off + len(chunk)) & 3
        else:
            data = bytes(chunk)
        if kind == _P_BINARY:
            d.msg_len += len(data)
            if d.msg_compressed:
                early = min(len(data), d.precredit)
                d.precredit -= early
                d.zipped += len(data) - early
                d.msg_zipped += len(data) - early
                self._inflate(d, direction, data, ts, packet, out)
            else:
                self._data(out, direction, data, ts, packet)
        elif kind == _P_TEXT:
            d.msg_len += len(data)
        else:
            d.ctrl += data

    def _data(self, out, direction, data, ts, packet):
        """Pass inner bytes on: the payloads of consecutive frames of one feed make one StreamData."""
        last = self._last
        if last is not None and out and out[-1] is last:
            self._parts.append(data)
            return
        self._seal()
        last = self._last = StreamData(self.conn, direction, data, ts, packet)
        self._parts = [data]
        out.append(last)

    def _seal(self):
        if len(self._parts) > 1:
            self._last.data = b"".join(self._parts)
        self._parts = []
        self._last = None

    def _frame_end(self, direction, d, ts, packet, out):
        op = d.opcode
        if op >= 8:
            if d.payload == _P_CONTROL:
                self._control(direction, d, op, bytes(d.ctrl), ts, packet, out)
            d.ctrl = bytearray()
            return
        if d.payload == _P_SKIP or not d.fin:
            return
        # the last frame of a message
        self.messages[direction] += 1
        if d.msg_op == OP_TEXT:
            frag = f" in {d.msg_frames} frames" if d.msg_frames > 1 else ""
            self._note(out, packet, ts, NOTE, f"WebSocket text message, {d.msg_len} bytes{frag} (AMQP uses binary "
                                              "messages; not decoded)")
        elif d.msg_compressed:
            self._inflate(d, direction, _DEFLATE_TAIL, ts, packet, out)
            if d.msg_cut:
                self._end_cut(d, direction, ts, packet, out)
        d.msg_op = None
        d.msg_compressed = False

    def _control(self, direction, d, op, payload, ts, packet, out):
        side = "client" if d.client else "server"
        if op == OP_PING:
            self._note(out, packet, ts, CHAT, f"WebSocket ping from the {side}, {len(payload)} bytes")
        elif op == OP_PONG:
            self._note(out, packet, ts, CHAT, f"WebSocket pong from the {side}, {len(payload)} bytes")
        else:
            sev = CHAT
            if not payload:
                msg = f"WebSocket close from the {side} (no status code)"
            elif len(payload) == 1:
                msg = f"WebSocket close from the {side} with a 1-byte body (a status code has 2)"
                sev = WARN
            else:
                code = int.from_bytes(payload[:2], "big")
                try:
                    reason = payload[2:].decode("utf-8")
                except UnicodeDecodeError:
                    reason = payload[2:].decode("latin-1")
                    sev = WARN
                msg = f"WebSocket close from the {side} {code} {reason!r}"
                if code not in (1000, 1001):
                    sev = NOTE
                if code < 1000 or code in (1004, 1005, 1006, 1015) or 1016 <= code < 3000 or code >= 5000:
                    msg += " [status code not allowed in a close frame]"
                    sev = WARN
            if d.closed:
                msg += " [second close frame]"
                sev = WARN
            d.closed = True
            self._note(out, packet, ts, sev, msg)

    # -- permessage-deflate -------------------------------------------------------------

    def _inflate(self, d, direction, data, ts, packet, out):
        if d.msg_broken or d.inflate_lost or d.inflater is None:
            if d.inflate_lost:
                self._warn(out, packet, ts, "WebSocket compressed message after a capture gap: the shared "
                                            "compression window was lost, the message cannot be inflated",
                           "inflate-lost", d)
            if data is not _DEFLATE_TAIL:
                out.append(StreamGap(self.conn, direction, len(data), ts, packet))
            return
        if d.msg_skipped >= 0:  # past the discard budget: not inflated, counted
            if data is not _DEFLATE_TAIL:
                d.msg_skipped += len(data)
            return
        z = d.inflater
        try:
            while True:
                room = min(MAX_INFLATED_MESSAGE - d.msg_inflated, INFLATE_FLOOR + INFLATE_RATIO * d.zipped - d.unzipped)
                if d.msg_cut or room <= 0:  # held back by a cap: inflated (the window stays whole), dropped
                    left = DISCARD_FLOOR + DISCARD_RATIO * d.msg_zipped - d.msg_cut
                    if left <= 0:  # ... up to the discard budget
                        d.msg_skipped = 0 if data is _DEFLATE_TAIL else len(data)
                        break
                    piece = z.decompress(data, min(MAX_INFLATE_CHUNK, left))
                    if d.msg_cut == 0 and piece:
                        self._start_cut(d, direction, ts, packet, out)
                    d.msg_cut += len(piece)
                else:
                    piece = z.decompress(data, min(MAX_INFLATE_CHUNK, room))
                    if piece:
                        d.msg_inflated += len(piece)
                        d.unzipped += len(piece)
                        self._data(out, direction, piece, ts, packet)
                data = z.unconsumed_tail
                if not data:
                    break
        except zlib.error as e:
            self._end_cut(d, direction, ts, packet, out)
            self._warn(out, packet, ts, f"WebSocket compressed message cannot be inflated ({e}); "
                                        "the rest of the compressed stream is lost")
            d.msg_broken = True
            if not self.no_context[direction]:
                self._inflate_lost(d)
            out.append(StreamGap(self.conn, direction, len(data), ts, packet))

    def _start_cut(self, d, direction, ts, packet, out):
        """A cap holds back the rest of the current message: said once per direction in full,
        then counted (see ``finish``)."""
        d.cut_messages += 1
        if d.cut_messages > 1:
            return
        side = "client" if d.client else "server"
        if d.msg_inflated >= MAX_INFLATED_MESSAGE:
            why = f"the cap of {MAX_INFLATED_MESSAGE:,} inflated bytes per message"
        else:
            why = (f"the {side}'s inflation budget ({INFLATE_FLOOR:,} bytes + {INFLATE_RATIO}x its "
                   f"{d.zipped:,} compressed bytes so far)")
        self._note(out, packet, ts, WARN, f"WebSocket compressed message from the {side} inflates beyond {why}: "
                                           "the rest of the message is not decoded (a permessage-deflate bomb?)")

    def _end_cut(self, d, direction, ts, packet, out):
        """The message a cap cut has ended or broken off: the bytes held back are a gap of the inner
        stream (inflated ones, and the compressed ones past the discard budget)."""
        if not d.msg_cut:
            return
        side = "client" if d.client else "server"
        skipped = d.msg_skipped
        if d.cut_messages == 1:
            msg = (f"WebSocket compressed message from the {side}: {d.msg_inflated:,} inflated bytes decoded, "
                   f"{d.msg_cut:,} held back by the cap")
            if skipped >= 0:
                msg += f", then {skipped:,} compressed bytes not inflated (beyond {DISCARD_RATIO}x its compressed size)"
            self._note(out, packet, ts, WARN, msg)
        else:
            d.cut_bytes += d.msg_cut
        size, cause = d.msg_cut, "held back by the WebSocket inflation cap"
        if skipped > 0:
            size += skipped
            cause += f"; the last {skipped:,} of them compressed, not inflated"
        out.append(StreamGap(self.conn, direction, size, ts, packet, cause))
        d.msg_cut = 0
        if skipped >= 0:
            d.msg_skipped = -1
            d.msg_broken = True
            if not self.no_context[direction]:  # the window is not whole any more
                self._warn(out, packet, ts, f"WebSocket compression window of the {side} lost after a message "
                                            "not inflated to its end: later compressed messages cannot be inflated",
                           "window-cap", d)
                self._inflate_lost(d)

    def _break_inflate(self, d, direction, size, ts, packet, out):
        self._end_cut(d, direction, ts, packet, out)
        out.append(StreamGap(self.conn, direction, size, ts, packet))
        d.msg_broken = True
        if not self.no_context[direction]:
            self._inflate_lost(d)

    def _inflate_lost(self, d):
        if not d.inflate_lost:
            d.inflate_lost = True
            d.inflater = None

    # -- resynchronisation --------------------------------------------------------------

    def _lose_sync(self, d, packet):
        if d.state != _RESYNC:  # (a gap while scanning adds to the scan)
            d.skipped = 0
            d.resync_packet = packet
        d.state = _RESYNC
        d.remaining = 0
        d.msg_op = None
        d.msg_compressed = False

    def _plausible(self, d, buf, i, n, first=True):
        """(header length, payload length, mask key) of a plausible frame header at ``i``;
        None when it is not one; ``...`` when the buffer ends before its header does.
        Only a later frame of a chain may be an empty final continuation (some clients end
        each fragmented message with one)."""
        h = _header(buf, i, n)
        if h is None:
            return ...
        b0, b1, hlen, ln, key = h
        if (key is not None) != d.client or not _minimal(b1, ln):
            return None
        op = b0 & 0x0F
        rsv = b0 & 0x70
        if op >= 8:
            if op > OP_PONG or rsv or not b0 & 0x80 or ln > 125:
                return None
        else:
            if op > OP_BINARY or not ln and (first or b0 != 0x80):
                return None
            if rsv and (rsv != 0x40 or not self.deflate or op == OP_CONT):
                return None
        return hlen, ln, key

    def _resync(self, direction, d, work, pos, n, ts, packet, out) -> int:
        pattern = _CANDIDATE[0 if d.client else 1]
        i = pos
        pending = None  # the first candidate that more bytes may confirm
        while True:
            m = pattern.search(work, i)
            if m is None:
                break
            i = m.start()
            verdict = self._confirm(d, work, i, n)
            if verdict is True:
                d.skipped += i - pos
                self._note(out, d.resync_packet if packet is None else packet, ts, WARN,
                           f"WebSocket resynchronised on a frame header after skipping {d.skipped} bytes")
                if d.error_gap:  # the inner stream lost about what was skipped
                    out.append(StreamGap(self.conn, direction, d.skipped, ts, packet))
                    d.error_gap = False
                d.skipped = 0
                d.state = _FRAMES
                d.after_resync = True
                return i
            if verdict is None and pending is None:
                pending = i
            i += 1
        if pending is not None:  # hold the bytes from there until more arrive
            d.skipped += pending - pos
            return pending
        # keep the last byte: it may start a candidate
        keep = n - 1 if n > pos else n
        d.skipped += max(keep - pos, 0)
        return max(keep, pos)

    def _confirm(self, d, buf, i, n):
        """True: a chain of plausible frames starts at ``i``; False: it does not; None: not known yet.

        The chain is the candidate and the :data:`RESYNC_CHAIN` - 1 frames its lengths lead to;
        consecutive masking keys must differ (a client draws a fresh key per frame, while
        masked runs of equal bytes repeat one), and the data frames must make messages (a
        continuation only after a frame without FIN, a text or binary frame only after FIN)."""
        j = i
        last_key = None
        in_message = None  # unknown before the first data frame
        for depth in range(RESYNC_CHAIN):
            p = self._plausible(d, buf, j, n, not depth)
            if p is None:
                return False
            if p is not ...:
                b0 = buf[j]
                op = b0 & 0x0F
                if op < 8:  # a continuation only inside a message, a new message only outside one
                    if in_message is not None and in_message != (op == OP_CONT):
                        return False
                    in_message = not b0 & 0x80
            if p is ...:
                if j == n and depth >= 2:
                    return True  # two frames or more end exactly where the bytes received so far end
                return None if n - i < MAX_RESYNC_BYTES else False
            if p[2] is not None:
                if p[2] == last_key:
                    return False
                last_key = p[2]
            j += p[0] + p[1]
            if j > n:
                return None if j - i <= MAX_RESYNC_BYTES else False
        return True

    # -- notes ------------------------------------------------------------------------

    def _note(self, out, packet, ts, severity, message):
        out.append(PacketNote(packet, ts, ExpertNote(severity, GROUP, message), conn=self.conn))
