"""The connection's own rules (spec 2.2 - 2.4): protocol headers, SASL, open / close, the idle
time-out, the connection machine's steps, and what a TCP gap, a mid-stream start or the transport's
end does to the connection's state.

:class:`ConnectionRules` is a room of its own: it writes what it finds into the ledger the tracker
gave it, and moves a connection of another protocol out of the tracker's ``connections`` into its
``others`` (the two dicts it was given).  The tracker finds the connection of an event and hands both
here; a frame of a session goes on to the session, link, transfer and settlement rooms.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from sys import intern as _intern

from ..amqp.framing import FRAME_SASL, PROTO_AMQP, PROTO_SASL, PROTO_TLS, NotCapturedNote
from ..times import NS
from .entities import Connection, ConnectionBase, ConnectionHeaders
from .findings import Recorder
from .machine import Endpoints
from .loss import one_way_record
from .state import START_ENDPOINTS, own_endpoints, shared_again
from .transitions import SIDES, UNKNOWN
# the value readers (amqp/values.py), under the names this room calls them by
from ..amqp.values import error_info, read_plain as _plain, read_str as _str, read_symbols as _symbols
from .steps import after_missing, lossy_step, missing_how

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from ..amqp.values import read_uint as _uint

# the connection's own performatives, which frame() handles first (3: detach and end, frames of a
# session whose last frames before them frame() notes)
_CONN_LEVEL = {"open": 1, "close": 2, "detach": 3, "end": 3}
#: detach / end / close frames per connection whose preceding frames are noted (the rest are counted)
END_NOTES_MAX = 256


class ConnectionRules:
    """Headers, SASL, open / close, idle time-out, gaps (see the module docstring)."""

    def __init__(self, ledger: Recorder, connections: dict, others: dict, other_info: dict):
        self.ledger = ledger
        self.connections = connections  # (the tracker's: connection id -> ConnectionBase / ConnectionHeaders / Connection)
        self.others = others  # (the tracker's: connections of another protocol)
        self.other_info = other_info  # (the tracker's: connection id -> what is known of that protocol)
        # the performative name of the last frame and its _CONN_LEVEL: looked up once a run of frames of
        # one name, not once a frame
        self._level_name = None
        self._level = 0
        # frame_connection's cache: the connection id object of the last frame and its Connection (None /
        # None: empty), cleared by every change of ``connections`` (put_connection, drop_connection)
        self._cid = None
        self._cconn = None

    def frame_connection(self, cid):
        """``connections.get(cid)``, the last Connection remembered: the frames of one connection come in
        runs, so most frames compare one object (the framing layer's connection id, the same object for
        every frame of a connection), not hash and look up one.  Only a Connection is remembered."""
        if cid is self._cid and cid is not None:
            return self._cconn
        c = self.connections.get(cid)
        if type(c) is Connection:
            self._cid = cid
            self._cconn = c
        return c

    def put_connection(self, cid, c) -> None:
        """``connections[cid] = c`` (the one way the tracker's connections gain or change an entry)."""
        self.connections[cid] = c
        self._cid = None
        self._cconn = None

    def drop_connection(self, cid) -> None:
        """``connections.pop(cid, None)`` (the one way the tracker's connections lose an entry)."""
        self.connections.pop(cid, None)
        self._cid = None
        self._cconn = None

    def amqp(self, b) -> Connection:
        """The connection's first frame: it becomes a Connection, with the AMQP state of its frames."""
        c = Connection(b)
        self.put_connection(c.id, c)
        return c

    def own_state(self, c):
        """``c`` with fields of its own to write: a ConnectionBase (its loss and TLS flags, its FINs and its AMQP
        state the class's shared defaults) becomes a ConnectionHeaders, in the tracker's dict that holds it."""
        if type(c) is not ConnectionBase:
            return c
        own = ConnectionHeaders(c)
        if self.connections.get(c.id) is c:
            self.put_connection(c.id, own)
        elif self.others.get(c.id) is c:
            self.others[c.id] = own
        return own

    def told(self, c):
        """``c`` with fields of its own (:meth:`own_state`), spoken of as an AMQP connection before its
        first frame (a protocol header, the roles notes, the one-direction note): its first frame adds
        no "connection start" to what is unknown."""
        c = self.own_state(c)
        if type(c) is ConnectionHeaders:
            c.told_before_frames = True
        return c

    # -- frames --------------------------------------------------------------------------

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def frame(self, c, d, f, p, name, heartbeat) -> bool:
        """Frame ``f`` of ``d``: its notes, counts, the idle time-out, SASL, open / close and the
        connection machine's step.  True: a frame of a session, for the session's rooms.  (Compiled
        without bounds checks: ``d`` is a direction, 0 or 1, and the lists it indexes are the
        connection's pairs.)"""
        if f.notes:
            self.framing_violations(c, d, f)
        key = name or ("empty" if heartbeat else "(undecoded)")
        c.count_frame(d, key)
        if f.type == FRAME_SASL:
            self.sasl_frame(c, d, f, p, name)
            return False
        if d:  # (two C counters when compiled: no int object per frame; read as the list c.frames)
            c._frames1 += 1
        else:
            c._frames0 += 1
        # (the connection's own lists since its first frame, Connection.framed: list locals when
        # compiled, so each index is a C list access, not a generic item call)
        if c.idle[d]:
            self.idle_check(c, d, f)
        if name is not self._level_name:  # (one look-up a run of one name, not two string compares per frame)
            self._level = _CONN_LEVEL.get(name, 0)
            self._level_name = name
        level = self._level
        ts = f.ts
        last_frame = c.last_frame
        ref = last_frame[d]
        # the longest silence of d (no frame of any kind): the diagnoses' idle time-out (the frames of one
        # packet share its time object: no silence, as longest is never below 0, and no subtraction)
        if ref is not None and ref is not ts:
            sil = c.silence[d]
            if ts - ref > sil.longest:
                self.longer_silence(c, d, f, ref, sil)
        if level >= 2:  # detach, end, close: what each side sent last before it (the diagnoses' ends)
            self.note_end(c, d, f, name)
        else:
            last_act = c.last_act
            act = last_act[d]
            packet = f.packet
            # (the same three objects as the frame before it, of the same packet and name: that tuple)
            if act is None or act[0] is not ts or act[1] is not packet or act[2] is not key:
                last_act[d] = (ts, packet, key)
        # (the frames of one packet share its time object: each list written once a packet, as a
        # write of a list item is a generic call when compiled and a read is a C access)
        idle_ref = c.idle_ref
        if idle_ref[d] is not ts:
            idle_ref[d] = ts
        if ref is not ts:
            last_frame[d] = ts
        if heartbeat:
            frames = c.heartbeats
            frames[d] += 1
        if level == 1 or level == 2:
            self.open_or_close(c, d, f, p, level)
            return False
        self.session_frame(c, d, f, name)
        return True

    def open_or_close(self, c, d, f, p, level):
        """An open (``level`` 1) or close (2) of ``d``: the connection machine's step and what it
        says.  (A method of its own: the per-frame path above stays short, in the instruction cache.)"""
        if level == 1:
            self.conn_step(c, d, "S:OPEN", "R:OPEN", f)
            self.open(c, d, f, p)
        else:
            err = error_info(p.field("error"))
            self.conn_step(c, d, "S:CLOSE(error)" if err else "S:CLOSE", "R:CLOSE", f, what="close")
            self.close(c, d, f, err)

    def sasl_frame(self, c, d, f, p, name):
        """SASL frame ``f`` of ``d`` (``name`` None: not decoded): counted, and its step of the SASL exchange."""
        c.sasl_frames[d] += 1
        if name is not None:
            self.sasl(c, d, f, p, name)

    def framing_violations(self, c, d, f):
        """The framing layer's notes on frame ``f`` of ``d`` that are violations, recorded."""
        for n in f.notes:
            if n.severity in ("warn", "error") and n.group in ("protocol", "malformed", "budget"):
                kind = "frame-size" if "max-frame-size" in n.message else n.group
                self.ledger.violation(c, d, f, kind, n.severity, n.message, origin="framing")

    def longer_silence(self, c, d, f, ref, sil):
        """Frame ``f`` of ``d`` ends a silence longer than its longest (``sil``), since ``ref``: the
        new longest, or one more unknown when bytes of ``d`` were lost in it (a frame may have been
        there)."""
        if c.loss is not None and c.loss.last[d] is not None and c.loss.last[d] >= ref:
            sil.unknown += 1
            return
        sil.longest = f.ts - ref
        sil.start = ref
        sil.end = f.ts
        sil.end_packet = f.packet
        la = c.last_act[d]
        sil.start_packet = la[1] if la is not None and la[0] == ref else None

    def note_end(self, c, d, f, name):
        """A detach, end or close of ``d``: the last frame of each side that ended nothing before it."""
        notes = c.end_notes
        if notes is None:
            notes = c.end_notes = {}
        if len(notes) < END_NOTES_MAX:
            notes[(d, name, f.packet, f.channel)] = (c.last_act[d], c.last_act[1 - d])
        else:
            notes[None] = notes.get(None, 0) + 1

    def session_frame(self, c, d, f, name):
        """A frame of a session (not the connection's own): its step on the connection's machine."""
        if c.loss is not None:
            msgs = lossy_step(c, c.state, d, "S:FRAME", "R:FRAME", name or "frame", "the connection")
        else:
            msgs = c.state.frame(d)
        if msgs:
            self.ledger.violation(c, d, f, "state", "warn",
                                  f"{name or ('empty frame' if f.kind == 'heartbeat' else 'frame')} from the "
                                  f"{SIDES[d]}: " + "; ".join(msgs))

    def conn_step(self, c, d, s_in, r_in, f, ts=None, packet=None, what=None):
        ep = c.state
        if type(ep) is not Endpoints:  # (shared by connections without frames: a copy of its own to step)
            ep = c.state = own_endpoints(ep)
        if c.loss is not None:
            msgs = lossy_step(c, ep, d, s_in, r_in, what or s_in[2:].lower(), "the connection")
        else:
            msgs = ep.advance(d, s_in, r_in)
        if type(c) is ConnectionHeaders:  # (no frame yet: the one object of its states, issue 40)
            c.state = shared_again(ep)
        if msgs:
            self.ledger.violation(c, d, f, "state", "warn",
                                  f"{what or s_in[2:].lower()} from the {SIDES[d]}: " + "; ".join(msgs),
                                  ts=ts, packet=packet)

    def idle_check(self, c, d, f):
        """Frames sent by d must come within the idle-time-out the peer announced."""
        t = c.idle[d]
        ref = c.idle_ref[d]
        if t and ref is not None and c.close[d] is None and c.one_way != d and f.ts - ref > t and (
                c.loss is None or c.loss.last[d] is None or c.loss.last[d] < ref):  # (a frame may have been lost)
            self.ledger.violation(c, d, f, "idle-timeout", "warn",
                                  f"no frame from the {SIDES[d]} for {(f.ts - ref) / NS:.3f} s; the "
                                  f"{SIDES[1 - d]}'s idle-time-out is {t / 1_000_000:g} ms")

    def idle_at_end(self, c, end_ts) -> None:
        """The capture's end (or the connection's, when its transport ended): trailing idle gaps."""
        end = c.transport_time if c.transport_time is not None else end_ts
        if end is None:
            return
        for d in (0, 1):
            t = c.idle[d]
            ref = c.idle_ref[d]
            if not t or ref is None or c.close[d] is not None or c.one_way == d:
                continue
            if end - ref > t:
                self.ledger.violation(
                    c, d, None, "idle-timeout", "warn",
                    f"no frame from the {SIDES[d]} for {(end - ref) / NS:.3f} s up to the end of the "
                    f"{'connection' if c.transport_time is not None else 'capture'}; the {SIDES[1 - d]}'s "
                    f"idle-time-out is {t / 1_000_000:g} ms",
                    ts=end, packet=c.last_packet,
                )

    def sasl(self, c, d, f, p, name):
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

    def open(self, c, d, f, p):
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
            self.ledger.violation(c, d, f, "state", "warn", f"second open from the {SIDES[d]}")
        c.open[d] = info
        # d announced idle-time-out: the other peer (1-d) must send at least that often from now on
        if idle:
            c.idle[1 - d] = idle * 1_000_000  # (milliseconds: kept in nanoseconds, as every time)
            c.idle_ref[1 - d] = f.ts

    def close(self, c, d, f, err):
        if c.close[d] is None:
            c.close[d] = {"time": f.ts, "packet": f.packet, "error": err}
        if err:
            self.ledger.error(c, d, f, "connection", err)
        end_everything(c, f.ts, f.packet, "close")

    # -- protocol headers ----------------------------------------------------------------

    def header(self, c, h):
        """Protocol header ``h`` on connection ``c``."""
        if h.is_other or (self.other_info and c.id in self.other_info):
            self.other_header(c, h)
            return
        c = self.told(c)  # (its first header: its header state)
        if c.events == 0 and not c.lossy and h.direction == 0:
            # the client's header first: nothing came before it (the server answers it); a server's
            # header first leaves the client's start unseen
            c.known_start = True
            if c.state == [UNKNOWN, UNKNOWN]:
                c.state = START_ENDPOINTS
        c.events += 1
        d = h.direction
        for n in h.notes:
            if n.severity in ("warn", "error"):
                self.ledger.violation(c, d, None, "protocol-header", n.severity, n.message, ts=h.ts,
                                      packet=h.packet, origin="framing", channel=None)
        key = header_key(h)
        c.headers = appended(c.headers, d, key[2])
        c.header_keys = appended(c.header_keys, d, key)
        k = len(c.header_keys[d]) - 1
        other = c.header_keys[1 - d][k] if k < len(c.header_keys[1 - d]) else None
        mismatch = other is not None and other != key
        if mismatch and c.loss is not None and (c.lost(d) or c.lost(1 - d)) and headers_lost(c, d, h, key, k):
            mismatch = False
            other = key
        if mismatch:
            c.negotiation = (f"{SIDES[1 - d]} sent {other[2]}, {SIDES[d]} answered {h.name}")
            self.ledger.violation(c, d, None, "protocol-header", "warn",
                                  f"protocol header mismatch: {c.negotiation}", ts=h.ts, packet=h.packet)
        self.header_step(c, d, h, mismatch, other)

    def header_step(self, c, d, h, mismatch, other):
        """The layer a protocol header starts, and its step on the connection's machine (AMQP headers)."""
        if h.protocol_id == PROTO_TLS:
            c.tls = True
        if h.protocol_id == PROTO_SASL:
            c.sasl = True
        if mismatch and PROTO_AMQP in (h.protocol_id, other[0]):
            # a header refused by the peer's own (Figure 2.8: protocol id rejected): both endpoints end
            self.conn_step(c, d, "S:HDR!=R:HDR", "R:HDR!=S:HDR", None, ts=h.ts, packet=h.packet)
        elif h.protocol_id == PROTO_AMQP and (other is None or other[0] == PROTO_AMQP):
            s_in = "S:HDR!=R:HDR" if mismatch else "S:HDR"
            r_in = "R:HDR!=S:HDR" if mismatch else "R:HDR"
            self.conn_step(c, d, s_in, r_in, None, ts=h.ts, packet=h.packet)

    def other_header(self, c, h):
        """A protocol header of another protocol than AMQP 1.0 (AMQP 0-9-1, 0-10, ...), or any header
        on such a connection: it is that protocol's connection, not decoded (the framing layer skips its
        bytes), no AMQP 1.0 connection: moved to ``others``."""
        other = self.other_info.get(c.id)
        if other is None:
            if spoke_amqp10(c):
                # after AMQP 1.0 frames: it stays an AMQP 1.0 connection, whose rest is not decoded
                c.headers = appended(c.headers, h.direction, h.name)
                self.ledger.violation(c, h.direction, None, "protocol-header", "warn",
                                      f"{h.name} protocol header after AMQP 1.0 frames: the rest of the "
                                      "connection is not decoded", ts=h.ts, packet=h.packet, origin="framing",
                                      channel=None)
                return
            # (the AMQP 1.0 headers before it stay listed: a 1.0 header answered by another protocol's)
            other = self.other_info[c.id] = {
                "protocol": h.name, "headers_client": list(c.headers[0]), "headers_server": list(c.headers[1]),
                "bytes_client": None, "bytes_server": None, "time": h.ts, "packet": h.packet}
            self.drop_connection(c.id)
            self.others[c.id] = c
        other["headers_client" if h.direction == 0 else "headers_server"].append(h.name)

    def other_note(self, c, ev):
        """The framing layer's count of another protocol's bytes on connection ``c``."""
        other = self.other_info.get(c.id)
        if other is None and spoke_amqp10(c):
            return  # an AMQP 1.0 connection with another protocol's header in it (a violation, other_header)
        if other is None:  # (the framing layer says a header first)
            other = self.other_info[c.id] = {"protocol": ev.protocol, "headers_client": [], "headers_server": [],
                                             "time": ev.ts, "packet": ev.packet}
            self.drop_connection(c.id)
            self.others[c.id] = c
        other["bytes_client"], other["bytes_server"] = ev.bytes

    # -- the transport -------------------------------------------------------------------

    def stream_note(self, c, ev):
        """A note of the byte stream (a gap, a resynchronisation, a mid-stream start, roles, TLS)."""
        group = ev.note.group
        if group in ("reassembly", "framing", "sequence"):
            c = self.own_state(c)
            c.lossy = True  # a gap, a resynchronisation or a mid-stream start: frames may be missing
            if group == "reassembly" and ev.skipped:  # a TCP gap: ev.skipped bytes never captured
                c.note_loss(ev.direction, ev.skipped, 0, ev.ts)
                lost_grants(c, ev.direction)
                self.ledger.drop(c, ev.direction)
            elif group == "framing" and ev.skipped:  # bytes skipped to find the next frame header,
                c.note_loss(ev.direction, 0, ev.skipped, ev.ts)  # or held by a frame never completed
                self.ledger.drop(c, ev.direction)
            if group == "framing" and ev.note.severity == "error":  # a frame header that cannot be
                msg = ev.note.message
                self.ledger.violation(c, ev.direction, None, "frame-size" if "frame size" in msg else "framing",
                                      "error", msg, ts=ev.ts, packet=ev.packet, channel=None, origin="framing")
            elif group == "sequence" and ev.direction is not None:  # the direction started mid-stream
                c.note_loss(ev.direction, 0, 0, ev.ts, before=True)
                lost_grants(c, ev.direction)
        elif group == "snaplen":  # bytes the snap length cut off (not loss), or skipped behind such a cut
            self.not_captured(c, ev)
        elif group == "roles":  # no SYN and no evidence of which side is the client (dissect.py)
            c = self.told(c)
            c.note_unknown("client/server roles")
        elif group == "role-evidence":  # no SYN: the first bytes said who the client is (dissect.py)
            c = self.told(c)
            c.note_inferred(ev.note.message.split(":", 1)[0])
        if "TLS" in ev.note.message:
            c = self.own_state(c)
            c.tls = True
        if ev.note.group == "tls" and ev.skipped:  # encrypted bytes that could not be read
            c = self.own_state(c)
            c.tls_undecrypted = (c.tls_undecrypted or 0) + ev.skipped
            c.tls_reason = ev.note.message

    def one_way(self, c, ev):
        """One direction of ``c`` is not in the capture (the TCP layer's note: the other's ACKs
        acknowledge bytes never captured, or no packet of it by the connection's end).  Everything
        that needs that peer's frames becomes unknown: its frames count as lost from the start
        (machines infer its steps, and say so), the credit and window it grants are unknown, the
        outcomes and settlements it would send are unknown, and what was found for want of its
        frames before the note is taken back."""
        m = ev.extra["missing"]
        if c.one_way >= 0:
            return
        c = self.told(c)  # (before its first AMQP byte: the header state is enough, its frames' is shared)
        c.one_way = m
        c.lossy = True
        if c.loss is None:  # (its first loss: the record of the connections noted at the same time, issue 40)
            c.loss = one_way_record(m, ev.ts)
        else:
            c.own_loss().note_absent(m)
        lost_grants(c, m)
        self.ledger.forget(c)
        c.note_unknown(f"the {SIDES[m]}'s frames (one direction captured)")

    def not_captured(self, c, ev):
        """Bytes of peer ``ev.direction`` the snap length cut off (a NotCapturedNote: counted, apart
        from loss), or captured bytes skipped to find a frame header behind such a cut.  When frames
        may be among them, what they would have said is unknown, as after a gap: no finding needs
        them (principle 7), and nothing of it is loss."""
        d = ev.direction
        if c.loss is None:
            c.note_loss(d, 0, 0, ev.ts)  # (makes the record; nothing lost)
            c.loss.forget_last(d)
        hidden = ev.hidden if type(ev) is NotCapturedNote else True
        c.own_loss().note_cut(d, ev.skipped if type(ev) is NotCapturedNote else 0, hidden,
                        ev.snap_length if type(ev) is NotCapturedNote else None, ev.ts)
        if hidden:
            lost_grants(c, d)
            self.ledger.drop(c, d)

    def closed(self, c, ev):
        """A FIN or RST of the transport (or the capture's end) on connection ``c``."""
        if self.ledger._held:  # a FIN (or the end) of that side with no gap before it: its grants were all seen
            for g in ((ev.direction,) if ev.kind == "fin" and ev.direction in (0, 1) else (0, 1)):
                self.ledger.release(c, g)
        if ev.kind == "fin":
            c = self.own_state(c)
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
                end_everything(c, ev.ts, ev.packet, "transport")


def lost_grants(c, g):
    """Bytes peer ``g`` sent were lost: a flow among them may have granted link credit or
    session window to the other peer, so those limits are unknown (no credit or window
    violation, no stall) until ``g``'s next flow says them again.  (Lost transfers of ``g``
    only make its counts lag, which can hide a violation but never invent one.)"""
    for link in c.links:
        if link.sender_dir != g and link.detach[0] is None and link.detach[1] is None:
            # g is the receiver, or the roles are not known yet
            link.link_credit.lost = True
            link.note_unknown("link-credit after " + after_missing(c, g))
    for s in c.sessions:
        if s.window.forget(1 - g):
            s.note_unknown("incoming-window after " + after_missing(c, g))


def spoke_amqp10(c) -> bool:
    """The connection carried AMQP 1.0 or SASL frames (a protocol header alone is not enough: a
    peer that answers it with another protocol's header refuses it)."""
    return type(c) is Connection and bool(c.frames[0] or c.frames[1] or c.sasl_frames[0] or c.sasl_frames[1]
                                     or c.sessions or c.links)


# (protocol id, version) -> the key of that protocol header (header_key): one object for every connection
# that sent it, for the first HEADER_KEYS_SHARED kinds of header of the run (a hostile capture may send more)
_HEADER_KEYS: dict = {}
HEADER_KEYS_SHARED = 64


def appended(pair: tuple, d: int, item) -> tuple:
    """``pair`` (per direction: a tuple, shared, while it holds at most HEADERS_SHARED_MAX items; a list
    of the connection's own beyond) with ``item`` appended to direction ``d``'s.  Pairs of tuples are
    shared by the connections that sent the same headers (the first HEADER_PAIRS_SHARED of the run):
    a connection that sent only its protocol header holds none of its own."""
    own = pair[d]
    if type(own) is list:
        own.append(item)
        return pair
    if len(own) < HEADERS_SHARED_MAX:
        grown = own + (item,)
    else:
        grown = list(own)
        grown.append(item)
    new = (grown, pair[1]) if d == 0 else (pair[0], grown)
    if type(grown) is tuple and type(new[1 - d]) is tuple:
        shared = _HEADER_PAIRS.get(new)
        if shared is not None:
            return shared
        if len(_HEADER_PAIRS) < HEADER_PAIRS_SHARED:
            _HEADER_PAIRS[new] = new
    return new


# a pair of header tuples -> itself (appended): one object for every connection that sent the same headers
_HEADER_PAIRS: dict = {}
HEADER_PAIRS_SHARED = 256
HEADERS_SHARED_MAX = 4


def header_key(h) -> tuple:
    """(protocol id, version, name) of protocol header ``h`` (the name: for the notes; it follows from
    the rest), shared by the connections that sent the same header."""
    version = tuple(h.version)
    key = _HEADER_KEYS.get((h.protocol_id, version))
    if key is None:
        key = (h.protocol_id, version, _intern(h.name))
        if len(_HEADER_KEYS) < HEADER_KEYS_SHARED:
            _HEADER_KEYS[(h.protocol_id, version)] = key
    return key


def headers_lost(c, d, h, key, k) -> bool:
    """d's k-th protocol header ``key`` differs from the peer's k-th after a loss: headers were
    lost.  Align with a later header of the peer that this one answers (d's lost headers), or take
    the peer's matching header as lost (the peer's answer missing).  True when they were."""
    c.header_keys = (list(c.header_keys[0]), list(c.header_keys[1]))  # (the connection's own: changed below)
    theirs = c.header_keys[1 - d]
    j = next((i for i in range(k + 1, len(theirs)) if theirs[i] == key), None)
    if j is None and c.lost(d):
        j = k + 1  # d's header that answered the peer's k-th is the one lost
    if j is not None and c.lost(d):
        for i in range(k, j):
            c.header_keys[d].insert(i, theirs[i])
            c.note_inferred(f"the {SIDES[d]}'s protocol header {theirs[i][2]} was {missing_how(c, d)} "
                            f"(from its {h.name} answering the {SIDES[1 - d]}'s)")
        return True
    if c.lost(1 - d):
        theirs.insert(k, key)
        c.note_inferred(f"the {SIDES[1 - d]}'s protocol header {h.name} was {missing_how(c, 1 - d)} "
                        f"(the {SIDES[d]}'s {h.name} is answered by what follows)")
        return True
    return False


def end_everything(c, ts, packet, why) -> None:
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
