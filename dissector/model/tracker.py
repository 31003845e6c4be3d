"""The tracker: consumes the Dissector's events and dispatches each frame to the room of its rule.

:class:`StateTracker` (re-exported by :mod:`amqp_dissect.model.state`, whose docstring describes
the model) keeps the connections and handles what belongs to the connection itself: TCP / stream
events, protocol headers, SASL, open / close, the idle time-out.  Every other performative goes to
its room, each a class the tracker is built from, each in its own module (lowest first):
:mod:`.findings` (violations and errors recorded), :mod:`.stall_rules`, :mod:`.transactions`,
:mod:`.sessions` (begin / end), :mod:`.settlement` (disposition, outcomes, folding), :mod:`.links`
(attach / detach / flow), :mod:`.transfers`.  Link credit, the session window and loss records
are objects of their own (:mod:`.credit`, :mod:`.window`, :mod:`.loss`) the entities
(:mod:`.entities`) hold; they return what they find and the rooms record it.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.framing import (FRAME_SASL, PROTO_AMQP, PROTO_SASL, PROTO_TLS, Frame, OtherProtocolNote, ProtocolHeader,
                             StreamNote)
from ..events import StreamClosed, StreamOpened
from ..times import NS
from .entities import _Conn, _ConnBase
from .state import (CONNECTION_MACHINE, SIDES, UNKNOWN, Endpoints, _plain, _str, _symbols, error_info)
from .transfers import Transfers

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from .state import (_uint)


class StateTracker(Transfers):
    """Consumes Dissector events; keeps the protocol state of every connection."""

    def __init__(self):
        super().__init__()
        self.connections: dict = {}  # connection id -> _ConnBase / _Conn
        # connections of another protocol than AMQP 1.0 (an AMQP 0-9-1 / 0-10 ... protocol header in either
        # direction): taken out of ``connections`` (they are no AMQP 1.0 connection), counted and named
        self.others: dict = {}
        # connection id -> what is known of another protocol's connection: {"protocol", "headers_client",
        # "headers_server", "bytes_client", "bytes_server", "time", "packet"} (the first header's); kept
        # here, not on every connection (a half-open connection stays small)
        self.other_info: dict = {}
        self.first_ts = None
        self.last_ts = None
        self.end_ts = None
        self.finished = False

    def feed(self, event) -> None:
        try:
            cls = type(event)
            if cls is Frame:
                self._frame(event)
            elif cls is ProtocolHeader:
                self._header(event)
            elif cls is StreamOpened:
                self._opened(event)
            elif cls is StreamClosed:
                self._closed(event)
            elif cls is StreamNote:
                self._stream_note(event)
            elif cls is OtherProtocolNote:
                self._other_note(event)
        except Exception as e:  # a bug: reported (and the run ends with exit 1), never fatal for the rest
            self.internal_errors.append(f"{type(event).__name__} at packet {getattr(event, 'packet', None)}: "
                                        f"{type(e).__name__}: {e}")
            self.violations.append({
                "connection": getattr(event, "conn", None), "packet": getattr(event, "packet", None),
                "time": getattr(event, "ts", None), "channel": getattr(event, "channel", None),
                "kind": "internal-error", "severity": "error",
                "message": f"analyzer error on {type(event).__name__}: {type(e).__name__}: {e}",
                "side": None, "link": None, "handle": None, "delivery_id": None, "origin": "analyzer",
            })

    def finish(self, end_ts: float | None = None) -> None:
        """End of the capture: remember its end time and check trailing idle gaps."""
        if end_ts is None:
            end_ts = self.last_ts
        self.end_ts = end_ts
        if self.finished:
            return
        self.finished = True
        # no frame follows the capture's end: the settled deliveries waiting out the fold lag are final
        q = self._settling
        while q:
            x = q.popleft()
            if not x.folded and self.fold_lag is not None:
                self._fold(x)
        for c in self.connections.values():
            if self._held:  # no gap came after them: the grants they rest on were all seen
                self._release(c, 0)
                self._release(c, 1)
            end = c.transport_time if c.transport_time is not None else end_ts
            if end is None:
                continue
            for d in (0, 1):
                t = c.idle[d]
                ref = c.idle_ref[d]
                if not t or ref is None or c.close[d] is not None:
                    continue
                if end - ref > t:
                    self._violation(
                        c, d, None, "idle-timeout", "warn",
                        f"no frame from the {SIDES[d]} for {(end - ref) / NS:.3f} s up to the end of the "
                        f"{'connection' if c.transport_time is not None else 'capture'}; the {SIDES[1 - d]}'s "
                        f"idle-time-out is {t / 1_000_000:g} ms",
                        ts=end, packet=c.last_packet,
                    )

    def _amqp(self, b) -> _Conn:
        """The connection's first protocol header or frame: it becomes a _Conn, with AMQP state."""
        c = _Conn(b)
        self.connections[c.id] = c
        return c

    def _conn(self, ev, client=None, server=None, syn_seen=False):
        c = self.connections.get(ev.conn)
        if c is None and self.others:
            c = self.others.get(ev.conn)
        if c is None:
            if client is None:
                d = getattr(ev, "direction", 0)
                src, dst = getattr(ev, "src", None), getattr(ev, "dst", None)
                client, server = (src, dst) if d != 1 else (dst, src)
            c = _ConnBase(ev.conn, client, server, syn_seen)
            c.seq = len(self.connections)
            self.connections[ev.conn] = c
        ts = getattr(ev, "ts", None)
        pkt = getattr(ev, "packet", None)
        if ts is not None:
            if c.first_ts is None:
                c.first_ts = ts
                c.first_packet = pkt
            c.last_ts = ts
            c.last_packet = pkt if pkt is not None else c.last_packet
            if self.first_ts is None:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        return c

    def _opened(self, ev: StreamOpened):
        c = self.connections.get(ev.conn)
        if c is None:
            c = self._conn(ev, ev.client, ev.server, ev.syn_seen)
        else:
            c.client, c.server = ev.client, ev.server
            self._conn(ev)

    def _closed(self, ev: StreamClosed):
        c = self.connections.get(ev.conn)
        if c is None and self.others:
            c = self.others.get(ev.conn)
        if c is None:
            return
        self._conn(ev)
        if self._held:  # a FIN (or the end) of that side with no gap before it: its grants were all seen
            for g in ((ev.direction,) if ev.kind == "fin" and ev.direction in (0, 1) else (0, 1)):
                self._release(c, g)
        if ev.kind == "fin":
            if c.fins is None:
                c.fins = set()
            c.fins.add(ev.direction)
            if len(c.fins) < 2:
                return
        elif ev.kind == "end":
            return  # end of the capture, not of the connection
        if c.transport_end is None:
            c.transport_end = "fin" if ev.kind == "fin" else ev.kind
            c.transport_time = ev.ts
            if ev.kind in ("fin", "rst"):
                _end_everything(c, ev.ts, ev.packet, "transport")

    def _stream_note(self, ev: StreamNote):
        c = self._conn(ev)
        group = ev.note.group
        if group in ("reassembly", "framing", "sequence"):
            c.lossy = True  # a gap, a resynchronisation or a mid-stream start: frames may be missing
            if group == "reassembly" and ev.skipped:  # a TCP gap: ev.skipped bytes never captured
                c.note_loss(ev.direction, ev.skipped, 0, ev.ts)
                self._lost_grants(c, ev.direction)
                self._drop(c, ev.direction)
            elif group == "framing" and ev.skipped:  # bytes skipped to find the next frame header,
                c.note_loss(ev.direction, 0, ev.skipped, ev.ts)  # or held by a frame never completed
                self._drop(c, ev.direction)
            if group == "framing" and ev.note.severity == "error":  # a frame header that cannot be
                msg = ev.note.message
                self._violation(c, ev.direction, None, "frame-size" if "frame size" in msg else "framing",
                                "error", msg, ts=ev.ts, packet=ev.packet, channel=None, origin="framing")
            elif group == "sequence" and ev.direction is not None:  # the direction started mid-stream
                c.note_loss(ev.direction, 0, 0, ev.ts, before=True)
                self._lost_grants(c, ev.direction)
        elif group == "roles":  # no SYN and no evidence of which side is the client (dissect.py)
            if type(c) is not _Conn:
                c = self._amqp(c)
            c.note_unknown("client/server roles")
        elif group == "role-evidence":  # no SYN: the first bytes said who the client is (dissect.py)
            if type(c) is not _Conn:
                c = self._amqp(c)
            c.note_inferred(ev.note.message.split(":", 1)[0])
        if "TLS" in ev.note.message:
            c.tls = True
        if ev.note.group == "tls" and ev.skipped:  # encrypted bytes that could not be read
            c.tls_undecrypted = (c.tls_undecrypted or 0) + ev.skipped
            c.tls_reason = ev.note.message

    @staticmethod
    def _lost_grants(c, g):
        """Bytes peer ``g`` sent were lost: a flow among them may have granted link credit or
        session window to the other peer, so those limits are unknown (no credit or window
        violation, no stall) until ``g``'s next flow says them again.  (Lost transfers of ``g``
        only make its counts lag, which can hide a violation but never invent one.)"""
        for link in c.links:
            if link.sender_dir != g and link.detach[0] is None and link.detach[1] is None:
                # g is the receiver, or the roles are not known yet
                link.link_credit.lost = True
                link.note_unknown("link-credit after a gap")
        for s in c.sessions:
            if s.window.forget(1 - g):
                s.note_unknown("incoming-window after a gap")

    def _other_header(self, h: ProtocolHeader):
        """A protocol header of another protocol than AMQP 1.0 (AMQP 0-9-1, 0-10, ...), or any header
        on such a connection: it is that protocol's connection, not decoded (the framing layer skips its
        bytes), no AMQP 1.0 connection: moved to ``others``."""
        c = self._conn(h)
        other = self.other_info.get(c.id)
        if other is None:
            if self._spoke_amqp10(c):
                # after AMQP 1.0 frames: it stays an AMQP 1.0 connection, whose rest is not decoded
                c.headers[h.direction].append(h.name)
                self._violation(c, h.direction, None, "protocol-header", "warn",
                                f"{h.name} protocol header after AMQP 1.0 frames: the rest of the connection "
                                "is not decoded", ts=h.ts, packet=h.packet, origin="framing", channel=None)
                return
            # (the AMQP 1.0 headers before it stay listed: a 1.0 header answered by another protocol's)
            other = self.other_info[c.id] = {
                "protocol": h.name, "headers_client": list(c.headers[0]), "headers_server": list(c.headers[1]),
                "bytes_client": None, "bytes_server": None, "time": h.ts, "packet": h.packet}
            self.connections.pop(c.id, None)
            self.others[c.id] = c
        other["headers_client" if h.direction == 0 else "headers_server"].append(h.name)

    @staticmethod
    def _spoke_amqp10(c) -> bool:
        """The connection carried AMQP 1.0 or SASL frames (a protocol header alone is not enough: a
        peer that answers it with another protocol's header refuses it)."""
        return type(c) is _Conn and bool(c.frames[0] or c.frames[1] or c.sasl_frames[0] or c.sasl_frames[1]
                                         or c.sessions or c.links)

    def _other_note(self, ev: OtherProtocolNote):
        c = self._conn(ev)
        other = self.other_info.get(c.id)
        if other is None and self._spoke_amqp10(c):
            return  # an AMQP 1.0 connection with another protocol's header in it (a violation, _other_header)
        if other is None:  # (the framing layer says a header first)
            other = self.other_info[c.id] = {"protocol": ev.protocol, "headers_client": [], "headers_server": [],
                                             "time": ev.ts, "packet": ev.packet}
            self.connections.pop(c.id, None)
            self.others[c.id] = c
        other["bytes_client"], other["bytes_server"] = ev.bytes

    def _header(self, h: ProtocolHeader):
        c = self._conn(h)
        if h.is_other or (self.other_info and c.id in self.other_info):
            self._other_header(h)
            return
        if type(c) is not _Conn:
            c = self._amqp(c)
        if c.events == 0 and not c.lossy and h.direction == 0:
            # the client's header first: nothing came before it (the server answers it); a server's
            # header first leaves the client's start unseen
            c.known_start = True
            if c.state == [UNKNOWN, UNKNOWN]:
                c.state = Endpoints(CONNECTION_MACHINE, "START")
        c.events += 1
        d = h.direction
        for n in h.notes:
            if n.severity in ("warn", "error"):
                self._violation(c, d, None, "protocol-header", n.severity, n.message, ts=h.ts, packet=h.packet,
                                origin="framing", channel=None)
        key = (h.protocol_id, tuple(h.version), h.name)  # (the name: for the notes; it follows from the rest)
        c.headers[d].append(h.name)
        c.header_keys[d].append(key)
        k = len(c.header_keys[d]) - 1
        other = c.header_keys[1 - d][k] if k < len(c.header_keys[1 - d]) else None
        mismatch = other is not None and other != key
        if mismatch and c.loss is not None and (c.lost(d) or c.lost(1 - d)) and self._headers_lost(c, d, h, key, k):
            mismatch = False
            other = key
        if mismatch:
            c.negotiation = (f"{SIDES[1 - d]} sent {other[2]}, {SIDES[d]} answered {h.name}")
            self._violation(c, d, None, "protocol-header", "warn",
                            f"protocol header mismatch: {c.negotiation}", ts=h.ts, packet=h.packet)
        self._header_step(c, d, h, mismatch, other)

    def _header_step(self, c, d, h, mismatch, other):
        """The layer a protocol header starts, and its step on the connection's machine (AMQP headers)."""
        if h.protocol_id == PROTO_TLS:
            c.tls = True
        if h.protocol_id == PROTO_SASL:
            c.sasl = True
        if mismatch and PROTO_AMQP in (h.protocol_id, other[0]):
            # a header refused by the peer's own (Figure 2.8: protocol id rejected): both endpoints end
            self._conn_step(c, d, "S:HDR!=R:HDR", "R:HDR!=S:HDR", None, ts=h.ts, packet=h.packet)
        elif h.protocol_id == PROTO_AMQP and (other is None or other[0] == PROTO_AMQP):
            s_in = "S:HDR!=R:HDR" if mismatch else "S:HDR"
            r_in = "R:HDR!=S:HDR" if mismatch else "R:HDR"
            self._conn_step(c, d, s_in, r_in, None, ts=h.ts, packet=h.packet)

    @staticmethod
    def _headers_lost(c, d, h, key, k) -> bool:
        """d's k-th protocol header ``key`` differs from the peer's k-th after a loss: headers were
        lost.  Align with a later header of the peer that this one answers (d's lost headers), or take
        the peer's matching header as lost (the peer's answer missing).  True when they were."""
        theirs = c.header_keys[1 - d]
        j = next((i for i in range(k + 1, len(theirs)) if theirs[i] == key), None)
        if j is None and c.lost(d):
            j = k + 1  # d's header that answered the peer's k-th is the one lost
        if j is not None and c.lost(d):
            for i in range(k, j):
                c.header_keys[d].insert(i, theirs[i])
                c.note_inferred(f"the {SIDES[d]}'s protocol header {theirs[i][2]} was lost "
                                f"(from its {h.name} answering the {SIDES[1 - d]}'s)")
            return True
        if c.lost(1 - d):
            theirs.insert(k, key)
            c.note_inferred(f"the {SIDES[1 - d]}'s protocol header {h.name} was lost "
                            f"(the {SIDES[d]}'s {h.name} is answered by what follows)")
            return True
        return False

    def _frame(self, f: Frame):
        c = self._frame_conn(f)
        c.events += 1
        d = f.direction
        if self._held:  # d's frame came with no gap before it: the grants of d were all seen
            self._release(c, d)
        if f.notes:
            for n in f.notes:
                if n.severity in ("warn", "error") and n.group in ("protocol", "malformed", "budget"):
                    kind = "frame-size" if "max-frame-size" in n.message else n.group
                    self._violation(c, d, f, kind, n.severity, n.message, origin="framing")
        name = f.pname  # None: a heartbeat, or a body that is not a known performative
        heartbeat = name is None and f.type != FRAME_SASL and f.size == f.doff * 4
        # the hot performatives are read from f.fields; the others from the decoded Composite
        p = None if name in _FIELD_HANDLERS else f.performative
        key = name or ("empty" if heartbeat else "(undecoded)")
        fc = c.frame_counts[d]
        fc[key] = fc.get(key, 0) + 1
        if f.type == FRAME_SASL:
            c.sasl_frames[d] += 1
            if name is not None:
                self._sasl(c, d, f, p, name)
            return
        c.frames[d] += 1
        self._idle_check(c, d, f)
        c.idle_ref[d] = f.ts
        c.last_frame[d] = f.ts
        if heartbeat:
            c.heartbeats[d] += 1
        level = _CONN_LEVEL.get(name, 0)  # (one look-up, not two string compares per frame)
        if level == 1:
            self._conn_step(c, d, "S:OPEN", "R:OPEN", f)
            self._open(c, d, f, p)
        elif level == 2:
            err = error_info(p.field("error"))
            self._conn_step(c, d, "S:CLOSE(error)" if err else "S:CLOSE", "R:CLOSE", f, what="close")
            self._close(c, d, f, err)
        else:
            self._dispatch(c, d, f, p, name)

    def _frame_conn(self, f):
        """The connection of frame ``f``, its times updated (a _Conn from its first AMQP byte)."""
        c0 = self.connections.get(f.conn)
        ts = f.ts
        if type(c0) is not _Conn:  # the connection's first AMQP byte (or first event)
            c = self._amqp(self._conn(f))
            if not c.syn_seen:
                c.note_unknown("connection start")
        elif ts is None or c0.first_ts is None:
            c = self._conn(f)
        else:  # _conn's bookkeeping, inlined for the common case
            c = c0
            c.last_ts = ts
            if f.packet is not None:
                c.last_packet = f.packet
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts
        return c

    def _idle_check(self, c, d, f):
        """Frames sent by d must come within the idle-time-out the peer announced."""
        t = c.idle[d]
        ref = c.idle_ref[d]
        if t and ref is not None and c.close[d] is None and f.ts - ref > t and (
                c.loss is None or c.loss.last[d] is None or c.loss.last[d] < ref):  # (a frame may have been lost)
            self._violation(c, d, f, "idle-timeout", "warn",
                            f"no frame from the {SIDES[d]} for {(f.ts - ref) / NS:.3f} s; the {SIDES[1 - d]}'s "
                            f"idle-time-out is {t / 1_000_000:g} ms")

    def _dispatch(self, c, d, f, p, name):
        """A frame of a session (not the connection's own): its step on the connection's machine,
        then the room of its performative."""
        if c.loss is not None:
            msgs = self._lossy_step(c, c.state, d, "S:FRAME", "R:FRAME", name or "frame", "the connection")
        else:
            msgs = c.state.frame(d)
        if msgs:
            self._violation(c, d, f, "state", "warn",
                            f"{name or ('empty frame' if f.kind == 'heartbeat' else 'frame')} from the "
                            f"{SIDES[d]}: " + "; ".join(msgs))
        handlers = _HANDLERS  # (a typed dict when compiled: a C look-up)
        handler = handlers.get(name)
        if handler is None:
            return
        # the hot three called directly (a typed call when compiled), unless a test replaced them
        if handler is _H_TRANSFER:
            self._transfer(c, d, f, p)
        elif handler is _H_DISPOSITION:
            self._disposition(c, d, f, p)
        elif handler is _H_FLOW:
            self._flow(c, d, f, p)
        else:
            handler(self, c, d, f, p)

    def _sasl(self, c, d, f, p, name):
        c.sasl = True
        if name == "sasl-mechanisms":
            c.sasl_mechanisms = _symbols(p.field("sasl-server-mechanisms"))
        elif name == "sasl-init":
            m = p.field("mechanism")
            c.sasl_mechanism = str(m) if isinstance(m, str) else _plain(m)
            c.sasl_hostname = _str(p.field("hostname"))
        elif name == "sasl-outcome":
            c.sasl_outcome = _uint(p.field("code"), 0xFF)
            c.sasl_time = f.ts

    def _open(self, c, d, f, p):
        idle = _uint(p.field("idle-time-out"))
        info = {
            "time": f.ts,
            "packet": f.packet,
            "container_id": _str(p.field("container-id")),
            "hostname": _str(p.field("hostname")),
            "max_frame_size": _plain(p.effective("max-frame-size")),
            "max_frame_size_default": p.is_default("max-frame-size"),
            "channel_max": _plain(p.effective("channel-max")),
            "channel_max_default": p.is_default("channel-max"),
            "idle_time_out": idle,
            "offered_capabilities": _symbols(p.field("offered-capabilities")),
            "desired_capabilities": _symbols(p.field("desired-capabilities")),
            "properties": _plain(p.field("properties")),
        }
        if c.open[d] is not None:
            self._violation(c, d, f, "state", "warn", f"second open from the {SIDES[d]}")
        c.open[d] = info
        # d announced idle-time-out: the other peer (1-d) must send at least that often from now on
        if idle:
            c.idle[1 - d] = idle * 1_000_000  # (milliseconds: kept in nanoseconds, as every time)
            c.idle_ref[1 - d] = f.ts

    def _close(self, c, d, f, err):
        if c.close[d] is None:
            c.close[d] = {"time": f.ts, "packet": f.packet, "error": err}
        if err:
            self._error(c, d, f, "connection", err)
        _end_everything(c, f.ts, f.packet, "close")


_FIELD_HANDLERS = frozenset({"transfer", "flow", "disposition"})  # handlers that read f.fields only
_CONN_LEVEL = {"open": 1, "close": 2}  # the connection's own performatives, which _frame handles first

_HANDLERS = {
    "begin": StateTracker._begin,
    "end": StateTracker._end,
    "attach": StateTracker._attach,
    "detach": StateTracker._detach,
    "flow": getattr(StateTracker, "_flow"),  # the method object (compiled: not a C function pointer)
    "transfer": getattr(StateTracker, "_transfer"),  # the method object (compiled: not a C function pointer)
    "disposition": getattr(StateTracker, "_disposition"),  # the method object (compiled: not a C function pointer)
}
_H_TRANSFER = _HANDLERS["transfer"]
_H_DISPOSITION = _HANDLERS["disposition"]
_H_FLOW = _HANDLERS["flow"]


def _end_everything(c, ts, packet, why) -> None:
    """The connection ended (``why``: "close", "transport"): its open stalls close, and its sessions
    and links not terminated yet are terminated by it."""
    for st in c.stalls:
        st.close(ts, packet, why)
    for s in c.sessions:
        if s.terminated is None:
            s.terminated = why
    for link in c.links:
        if link.terminated is None:
            link.terminated = why
