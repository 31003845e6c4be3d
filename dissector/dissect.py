"""The sans-IO pipeline: capture records in, AMQP events out.

    d = Dissector()
    for record in records:            # amqp_dissect.capture.pcap.open_capture(f), or any CaptureRecord source
        for event in d.feed(record):
            ...
    for event in d.finish():
        ...

Events are the ones of :mod:`amqp_dissect.amqp.framing` (ProtocolHeader, Frame,
StreamNote) plus, from the TCP layer, StreamOpened / StreamClosed / PacketNote
for connections found to carry AMQP.

A TCP connection is AMQP when either port is one of ``ports`` (5672 and 5671 by
default; ``--port`` adds more), or when either direction starts with an
``AMQP`` protocol header, or (joined mid-stream: no SYN) when either direction
holds a run of AMQP frames whose sizes chain across segments (:func:`_frame_runs`).  Connections on AMQP ports are decoded even when the
capture joins them mid-stream (the decoder resynchronises on a frame header).

Client and server: the TCP layer's (the SYN, else the ports: tcp.role_evidence).  A connection
on other ports seen without its SYN is settled by its protocol headers before anything of it is
routed (:meth:`Dissector._roles`; the TCP layer swaps the roles when they say the other way).
So is a connection whose ports are both AMQP ports (5672 <-> 5671, or both given with --port),
seen without its SYN: held until both sides' first bytes are seen (up to _ROLE_HOLD_BYTES bytes
in at most _ROLE_HOLD_EVENTS segments), it
is settled by its protocol headers, else by its first open, and a "role-evidence" note says
which; it is decoded whatever its bytes.  With no evidence at all the connection gets a "roles"
note and the analysis lists the roles as unknown.

``keylog`` (a :class:`~amqp_dissect.capture.keylog.KeyLog` or key log text; pcapng
Decryption Secrets Blocks reach it through :meth:`Dissector.add_secrets`) turns on
TLS decryption: connections are then kept behind a
:class:`~amqp_dissect.capture.layers.LayeredConnection` until their first bytes
show whether they are TLS, and a TLS stream on any port is decoded when its
ClientHello random is in the key log.
"""

from __future__ import annotations

from typing import NamedTuple

from .amqp.framing import DEFAULT_MAX_FRAME_BYTES, AmqpConnection, StreamNote, headers_only, with_headers
from .errors import NOTE, WARN, DissectError, ExpertNote, UnsupportedLinkType
from .clock import ClockWatch
from .events import SNAP_CUT, NotCaptured, PacketNote, StreamClosed, StreamData, StreamGap, StreamOpened
from .capture.netparse import TruncatedPacket, UnreadTunnel, parse_segment
from .amqp.spec import AMQP_PORT, AMQPS_PORT, COMPOSITES
from .capture.tcp import IDLE_TIMEOUT, TcpReassembler, renamed, role_evidence
from .capture.keylog import KeyLog
from .capture.layers import Layered, LayeredConnection, Sniffing, client_layers, looks_like_tls, tls_client_random

DEFAULT_PORTS = frozenset({AMQP_PORT, AMQPS_PORT})


class Pumped(NamedTuple):
    """What one call of :meth:`Dissector.pump` did."""

    records: int  # records read (fewer than the limit asked: the records ran out)
    last_ts: int | None  # the time of the last record that made an event (None: no record did)

_TLS_UNSEEN_KEPT = 20  # TLS streams not decrypted on other ports: the first ones kept by name
_PROBE_BYTES = 8  # bytes needed to decide whether a stream starts with a protocol header
# a connection found to be AMQP by one side's protocol header, seen without its SYN, waits for this
# many events at most for the other side's first bytes (which settle the roles: see _roles)
_ROLE_PROBE_EVENTS = 16


# ``Dissector.connections`` value of a connection on an AMQP port that carried no byte yet: a str, the
# client endpoint text of its StreamOpened (``type(c) is str`` tests it).  The decoder made at its first
# byte (_materialize) takes that text: the analysis holds the same object, not a second copy (issue 40).
# A connection whose bytes so far are its protocol headers alone keeps no decoder either: its value is then an
# int, what the headers said (framing.headers_only: 2 bits per direction, a small int, no object of its own);
# the decoder is made again from it (framing.with_headers) at the next byte, gap or end (issue 40).


def _endpoints(conn: str) -> tuple:
    """The client and server endpoint texts in a connection id of the TCP layer ('client-server',
    '#n' added for a reused 4-tuple; endpoint texts hold no '-' nor '#')."""
    client, server = conn.split("#", 1)[0].split("-")
    shared = _SERVER_TEXTS.get(server)  # (the few servers of a capture: one text each, not one per connection)
    if shared is not None:
        return client, shared
    if len(_SERVER_TEXTS) < SERVER_TEXTS_SHARED:
        _SERVER_TEXTS[server] = server
    return client, server


# server endpoint text -> itself: the decoders' server texts, shared (at most SERVER_TEXTS_SHARED of them)
_SERVER_TEXTS: dict = {}
SERVER_TEXTS_SHARED = 4096


# what the first bytes of a connection on other ports say (Dissector._first_bytes)
_UNDECIDED, _AMQP, _NOT_AMQP, _TLS_KEYED, _TLS_UNKEYED, _WAIT = range(6)

class _Probe:
    """A connection on a non-AMQP port whose first bytes are not known yet; or (``amqp_port``) one
    on AMQP ports only (both its ports are AMQP or --port ports), seen without its SYN, whose
    client and server its first bytes may settle (see :meth:`Dissector._roles`)."""

    __slots__ = ("opened", "data", "amqp_port", "held", "order", "notes")

    def __init__(self, opened: StreamOpened, amqp_port: bool = False):
        self.opened = opened
        self.data = ([], [])  # buffered StreamData per direction
        self.amqp_port = amqp_port
        self.held = 0  # bytes in data
        # the TCP layer's notes on it (one direction captured), routed with its bytes; and the direction
        # of each buffered StreamData, in the order they came (None until the first: a probe that never
        # gets a byte, a SYN-only connection, costs no list)
        self.notes = None
        self.order = None

    def in_order(self) -> list:
        """The buffered StreamData in the order the reassembler released them (both directions
        interleaved as they came: a server's protocol header and open seen after a join must reach
        the decoder before the client's later frames, as on an AMQP port)."""
        nxt = [0, 0]
        out = []
        for d in self.order or ():
            out.append(self.data[d][nxt[d]])
            nxt[d] += 1
        return out


class Dissector:
    def __init__(
        self,
        ports=DEFAULT_PORTS,
        extra_ports=(),
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout: float = IDLE_TIMEOUT,
        messages: bool = True,
        keylog=None,
        tls_records: list | None = None,
        payloads: bool = False,
    ):
        self.ports = frozenset(ports) | frozenset(extra_ports)
        self.max_frame_bytes = max_frame_bytes
        self.messages = messages  # reassemble messages of multi-frame deliveries (see AmqpConnection)
        self.payloads = payloads  # every transfer frame keeps its payload (the model reads the messages)
        self.tcp = TcpReassembler(server_ports=self.ports, idle_timeout=idle_timeout)
        self.connections: dict[str, AmqpConnection] = {}
        self._probes: dict[str, _Probe] = {}
        self._opened: dict[str, StreamOpened] = {}
        self._fins: dict[str, set] = {}  # directions that sent a FIN, per open connection
        self.packets = 0
        self.tcp_packets = 0
        self.last_ts = None
        self.clock = ClockWatch()  # steps back of the capture clock (None: the caller watches it, as -j does)
        self.unsupported_linktypes: dict[int, int] = {}  # linktype -> packets
        self.packet_errors = 0
        self.amqp_connections = 0
        # TLS: a KeyLog (or key log text) turns on decryption; tls_records collects the stream layers' records
        # for -V (TlsRecord, WsFrame), each shown under the packet that completed it
        self.keylog = KeyLog(keylog) if isinstance(keylog, (str, bytes)) else keylog
        self.tls_records = tls_records
        self._renamed: dict = {}  # old id -> new id of connections whose roles were swapped (see _roles)
        # files missing from a numbered capture set (see missing_files): one dict each, and the
        # positions its connections' directions had reached when the merge crossed the last one
        self.holes: list = []
        self._hole_snap = None
        self._snap_cut = None  # the cause of the gaps of bytes the snap length cut off (NotCaptured)
        # TLS streams on ports that are not AMQP's, not decrypted (no key log, or their ClientHello
        # random not in it): whether they carry AMQP is unknown; counted, the first few kept
        self.tls_unseen_count = 0
        self.tls_unseen: list = []
        # packets in tunnels the parser does not read (netparse.UnreadTunnel): tunnel -> [packets, first packet]
        self.unread_tunnels: dict = {}

    # -- input ------------------------------------------------------------------

    def feed(self, record) -> list:
        """Process one capture record (anything with index, ts, linktype, data)."""
        self.packets += 1
        ts = record.ts
        last = self.last_ts
        self.last_ts = ts
        clock = self.clock
        if clock is not None and last is not None and (ts < last or clock.pending):
            clock.see(record.index, ts, last)  # (rare: a record behind the one before, and the next)
        try:
            seg = parse_segment(record.linktype, record.data)
        except UnsupportedLinkType:
            lt = record.linktype
            first = lt not in self.unsupported_linktypes
            self.unsupported_linktypes[lt] = self.unsupported_linktypes.get(lt, 0) + 1
            if first:
                return [PacketNote(record.index, record.ts,
                                   ExpertNote(WARN, "capture", f"unsupported link type {lt}: packets skipped"))]
            return []
        except UnreadTunnel as e:
            return self._unread_tunnel(record, e)
        except TruncatedPacket as e:
            # snaplen cut the payload: reassemble what was captured; the rest is not captured (not a gap)
            self.tcp_packets += 1
            note = PacketNote(record.index, record.ts, ExpertNote(WARN, e.group, str(e)))
            snap = len(record.data)  # (a cut packet's capture length is the snap length)
            if self._snap_cut is None or self._snap_cut.snap_length != snap:
                self._snap_cut = NotCaptured(snap)
            return [note] + self._route(self.tcp.feed(e.segment, record.ts, record.index, wire_len=e.wire_len))
        except DissectError as e:
            self.packet_errors += 1
            return [PacketNote(record.index, record.ts, ExpertNote(WARN, e.group, str(e)))]
        if seg is None:
            return []
        self.tcp_packets += 1
        return self._route(self.tcp.feed(seg, record.ts, record.index))

    def _unread_tunnel(self, record, e) -> list:
        """A packet in a tunnel not read: counted per tunnel (``unread_tunnels``: name -> [packets,
        first packet]), a note at its first packet only."""
        seen = self.unread_tunnels.get(e.tunnel)
        if seen is not None:
            seen[0] += 1
            return []
        self.unread_tunnels[e.tunnel] = [1, record.index]
        return [PacketNote(record.index, record.ts, ExpertNote(WARN, e.group, str(e)))]

    def pump(self, records, sink, offset: int = 0, limit: int = 0) -> Pumped:
        """Every record of ``records`` through :meth:`feed`, each event handed to ``sink(event)``
        (an Analyzer's ``feed``, say), packet numbers shifted by ``offset``: the per-packet loop of
        a whole capture in one call (compiled, it runs in C).  ``limit`` > 0: stop after that many
        records (an iterator of records goes on from there at the next call).  Returns the records
        read and the time of the last record that made an event (:class:`Pumped`)."""
        n = 0
        last_ts = None
        for record in records:
            if offset:
                record.index += offset
            events = self.feed(record)
            if events:
                for ev in events:
                    sink(ev)
                last_ts = record.ts
            n += 1
            if n == limit:
                break
        return Pumped(n, last_ts)

    def add_secrets(self, secrets_type: int, data: bytes) -> None:
        """Secrets from a pcapng Decryption Secrets Block (the capture reader's ``on_secrets``)."""
        if self.keylog is None:
            self.keylog = KeyLog()
        self.keylog.add_dsb(secrets_type, data)

    def sweep_idle(self, ts: int, packet: int) -> list:
        """Expire idle connections as of ``ts`` (see :meth:`TcpReassembler.sweep`), routed."""
        return self._route(self.tcp.sweep(ts, packet))

    def finish(self, last_ts: int | None = None, last_packet: int | None = None) -> list:
        """End of input: flush reassembly and report unfinished frames and deliveries.

        ``last_ts`` / ``last_packet``: the end of the whole capture, when this
        Dissector saw only part of it (one flow, in the Spark job)."""
        out: list = []
        for evs in self.finishing(last_ts, last_packet):
            out.extend(evs)
        return out

    def finishing(self, last_ts: int | None = None, last_packet: int | None = None):
        """:meth:`finish` a TCP connection at a time: the lists of events whose concatenation is finish's, the
        TCP layer's state of each connection freed before its events are handed on (issue 40: see
        TcpReassembler.finishing).  While a connection is probed (its decision may rename it, and its events
        routed after the rename follow all the others), the TCP layer's events are routed as one list."""
        if last_ts is not None:
            self.last_ts = last_ts
        if self._probes:
            yield self._route(self.tcp.finish(self.last_ts, last_packet))
        else:
            for evs in self.tcp.finishing(self.last_ts, last_packet):
                yield self._route(evs)
        out: list = []
        for probe_id in list(self._probes):
            self._decide(probe_id, out, final=True)
        for conn, c in list(self.connections.items()):
            if type(c) is str or type(c) is int:
                c = self._materialize(conn, c)
            out.extend(c.finish(self.last_ts, None))
        self.connections.clear()
        yield out

    def missing_files(self, names: list, ts_from, ts_to, packet: int) -> None:
        """The shell's word that the files ``names`` of a numbered capture set (``tcpdump -C``
        names, say) are missing: the records between ``ts_from`` (the last of the file before) and
        ``ts_to`` (``packet``, the first of the file after, fed next) are not in the input.  A TCP
        gap of a direction that delivered nothing since then spans the missing files: its note
        says so ("in the missing file ...") and it is counted in ``holes`` (per connection:
        [gaps, bytes] from the client, then from the server); it is still a gap (never filled,
        the state after it unknown as after loss)."""
        hole = {"missing": list(names), "from": ts_from, "to": ts_to, "packet": packet, "connections": {}}
        self.holes.append(hole)
        snap = {}
        for tc in self.tcp._by_id.values():
            if tc.d0 is not None:
                snap[(tc.id, 0)] = tc.d0.pos
            if tc.d1 is not None:
                snap[(tc.id, 1)] = tc.d1.pos
        self._hole_snap = (hole, snap)

    def _in_missing_file(self, ev: StreamGap, events: list, notes: list) -> list:
        """``notes`` (of the gap ``ev``, routed from ``events``), said to be in the missing files
        when the gap starts where its direction stood when the merge crossed them."""
        hole, snap = self._hole_snap
        key = (ev.conn, ev.direction)
        at = snap.get(key)
        if at is None or ev.packet is None or ev.packet < hole["packet"]:
            return notes
        del snap[key]  # (its first gap after the crossing, or none, spans the missing files)
        if not self._gap_starts_at(ev, events, at):
            return notes  # bytes of this direction came after the crossing: not the missing files'
        counts = hole["connections"].setdefault(ev.conn, [0, 0, 0, 0])
        counts[2 * ev.direction] += 1
        counts[2 * ev.direction + 1] += ev.size
        return [_in_missing_note(n, hole["missing"]) for n in notes]

    def _gap_starts_at(self, ev: StreamGap, events: list, at: int) -> bool:
        """Does the gap ``ev`` (routed from ``events``) start at stream position ``at`` of its
        direction?  Where the direction stands now, less the gap and what followed it in
        ``events``; a direction the TCP layer no longer tracks is taken to."""
        tc = self.tcp._by_id.get(ev.conn)
        D = None if tc is None else (tc.d1 if ev.direction else tc.d0)
        if D is None:
            return True
        rest = 0
        seen = False
        for e in events:
            if e is ev:
                seen = True
            if seen and (type(e) is StreamData or type(e) is StreamGap) and e.conn == ev.conn \
                    and e.direction == ev.direction:
                rest += len(e.data) if type(e) is StreamData else e.size
        return D.pos - rest == at

    # -- routing ----------------------------------------------------------------

    def _route(self, events: list) -> list:
        """The TCP layer's ``events`` routed: each connection's bytes, gaps and end to its decoder
        (or its probe while it is not known to be AMQP), its notes kept beside them."""
        if not events:
            return events
        out: list = []
        later: list = []
        conns = self.connections
        for ev in events:
            cls = type(ev)
            if cls is StreamData:
                c = conns.get(ev.conn)
                if type(c) is AmqpConnection:  # (typed when compiled: a C call)
                    ac = c
                    out.extend(ac.feed(ev.direction, ev.data, ev.ts, ev.packet))
                else:
                    self._route_data(ev, c, out, later)
            elif cls is StreamGap:
                self._route_gap(ev, events, out, later)
            elif cls is StreamOpened:
                self._opened_stream(ev, out)
            elif cls is StreamClosed:
                self._route_closed(ev, out, later)
            elif cls is PacketNote:
                self._route_note(ev, out, later)
        if later:  # (events of a connection renamed while this list was routed)
            self._renamed.clear()
            out.extend(self._route(later))
        return out

    def _route_data(self, ev: StreamData, c, out: list, later: list):
        """Bytes of a connection whose decoder ``c`` is not a plain AmqpConnection: a pending one
        (made now), a layered or sniffing one, none yet (its probe holds them), or renamed."""
        if c is not None:
            if type(c) is str or type(c) is int:  # the first byte of a connection opened on an AMQP port, or
                self._pending_data(ev, c, out)    # the first after its protocol headers
                return
            out.extend(c.feed(ev.direction, ev.data, ev.ts, ev.packet))
        elif ev.conn in self._probes:
            self._probe_data(ev, out)
        elif ev.conn in self._renamed:
            later.append(renamed(ev, self._renamed[ev.conn]))

    def _route_gap(self, ev: StreamGap, events: list, out: list, later: list):
        """A gap of a connection (routed from ``events``): to its decoder, whose notes say it (in
        the missing files of a capture set when it is there); a probed connection is decided now."""
        c = self.connections.get(ev.conn)
        if c is not None:
            if type(c) is str or type(c) is int:
                c = self._materialize(ev.conn, c)
            if ev.cause is SNAP_CUT:  # (bytes the snap length cut off: not lost)
                ev.cause = self._snap_cut if self._snap_cut is not None else ev.cause
                notes = c.gap(ev.direction, ev.size, ev.ts, ev.packet, ev.cause)
            else:
                notes = c.gap(ev.direction, ev.size, ev.ts, ev.packet)
            if self._hole_snap is not None and ev.cause is None:  # (a capture set missing files)
                notes = self._in_missing_file(ev, events, notes)
            out.extend(notes)
        elif ev.conn in self._probes:
            amqp_port = self._probes[ev.conn].amqp_port
            self._decide(ev.conn, out, final=True)
            if amqp_port:  # (decoded whatever its bytes: the gap follows what was held)
                later.append(renamed(ev, self._renamed[ev.conn]) if ev.conn in self._renamed else ev)
        elif ev.conn in self._renamed:
            later.append(renamed(ev, self._renamed[ev.conn]))

    def _route_closed(self, ev: StreamClosed, out: list, later: list):
        """The end of a direction or of a connection: a probed one is decided; at both FINs, a
        RST, an idle time-out or the end, its decoder finishes and its state is freed."""
        conn = ev.conn
        if conn in self._probes:
            self._decide(conn, out, final=True)
        if conn in self._renamed:
            later.append(renamed(ev, self._renamed[conn]))
            return
        c = self.connections.get(conn)
        if c is None:
            return
        out.append(ev)
        if ev.kind == "fin":
            fins = self._fins.setdefault(conn, set())
            fins.add(ev.direction)
            if len(fins) < 2:
                return
        if type(c) is str or type(c) is int:  # (no byte or headers alone came: what it would say, from a fresh decoder)
            c = self._materialize(conn, c)
        out.extend(c.finish(ev.ts, ev.packet))
        self.connections.pop(conn, None)  # (a TLS stream found not AMQP at its finish is gone already)
        self._opened.pop(conn, None)
        self._fins.pop(conn, None)

    def _route_note(self, ev: PacketNote, out: list, later: list):
        """A note of the TCP layer: kept when it is of no connection or of a decoded one, held by
        the probe of a connection not known to be AMQP yet."""
        if ev.conn is None or ev.conn in self.connections:
            out.append(ev)
        elif ev.conn in self._probes:
            probe = self._probes[ev.conn]
            if probe.notes is None:
                probe.notes = []
            probe.notes.append(ev)
        elif ev.conn in self._renamed:
            later.append(renamed(ev, self._renamed[ev.conn]))

    def _opened_stream(self, ev: StreamOpened, out: list) -> None:
        if _port(ev.client) in self.ports or _port(ev.server) in self.ports:
            # the decoder (and its WebSocket sniffing) is made at the connection's first byte: a
            # connection that never carries one (a SYN alone, a scan) costs an entry, not a decoder
            # (nor its event: the decoder's endpoints are those in the connection id)
            if not ev.syn_seen and role_evidence(_port(ev.client), _port(ev.server), self.ports) == "unknown":
                # both ports are AMQP ports and no SYN: its first bytes may say who the client is
                self._probes[ev.conn] = _Probe(ev, amqp_port=True)
                return
            self.connections[ev.conn] = ev.client
            self.amqp_connections += 1
            out.append(ev)
        else:
            self._probes[ev.conn] = _Probe(ev)

    def _pending_data(self, ev: StreamData, pending, out: list) -> None:
        """Bytes of a connection without a decoder (``pending``: its client text, or the int of its headers):
        one made and fed; given up again when all it then holds is protocol headers (a connection that sends
        its header and nothing more, as many do, keeps an int: issue 40)."""
        conn = ev.conn
        c = self._materialize(conn, pending)
        out.extend(c.feed(ev.direction, ev.data, ev.ts, ev.packet))
        code = headers_only(self.connections.get(conn))
        if code:
            self.connections[conn] = code

    def _materialize(self, conn: str, client):
        """The decoder of a connection opened on an AMQP port (its ``client`` text until its first byte; the
        int of its protocol headers while they are all it sent: see _pending_data)."""
        if type(client) is int:  # (the bare decoder it was: its first bytes settled WebSocket and TLS already)
            text, server = _endpoints(conn)
            c = AmqpConnection(conn, text, server, max_frame_bytes=self.max_frame_bytes, messages=self.messages)
            if self.payloads:
                c.keep_payloads = True
            self.connections[conn] = with_headers(c, client)
            return c
        server = _endpoints(conn)[1]
        ev = StreamOpened(conn, client, server, None, None, False)
        c = self._decoder(ev)
        self.connections[conn] = c
        s = Sniffing(self.connections, conn, c, self.tls_records)  # WebSocket?
        self.connections[conn] = s
        return s

    def _decoder(self, ev: StreamOpened, verify: bool = False, layers=None):
        c = AmqpConnection(ev.conn, ev.client, ev.server, max_frame_bytes=self.max_frame_bytes,
                           messages=self.messages)
        if self.payloads:
            c.keep_payloads = True
        if layers:  # a WebSocket found by the probe of a connection on another port
            c = Layered(layers, c)
        elif self.keylog is not None:  # TLS may be decrypted: look at the first bytes of each direction
            # verify: TLS on a port that is not AMQP's: shown once the decrypted stream is AMQP
            c = LayeredConnection(c, self.keylog, self.tls_records, table=self.connections,
                                  verify=[ev] if verify else None, on_reject=self._not_amqp)
        return c

    def _start(self, ev: StreamOpened, out: list, verify: bool = False, layers=None) -> AmqpConnection:
        c = self._decoder(ev, verify, layers)
        self.connections[ev.conn] = c
        self._opened[ev.conn] = ev
        self.amqp_connections += 1
        if not verify:
            out.append(ev)
        return c

    def _not_amqp(self, conn: str) -> None:
        """A decrypted stream that is not AMQP (see LayeredConnection): forget the connection."""
        if self.connections.pop(conn, None) is not None:
            self.amqp_connections -= 1
        self._opened.pop(conn, None)
        self._fins.pop(conn, None)
        self.tcp.ignore(conn)

    def _probe_data(self, ev: StreamData, out: list) -> None:
        probe = self._probes[ev.conn]
        probe.data[ev.direction].append(ev)
        if probe.order is None:
            probe.order = bytearray()
        probe.order.append(ev.direction)
        probe.held += len(ev.data)
        if probe.amqp_port:  # (held bytes only: its bytes are decoded whatever they are)
            if probe.held >= _PROBE_BYTES:
                self._decide(ev.conn, out, final=False)
            return
        got = sum(len(e.data) for e in probe.data[ev.direction])
        if got >= _PROBE_BYTES:
            self._decide(ev.conn, out, final=False)

    def _decide(self, conn: str, out: list, final: bool) -> None:
        """Whether a probed connection carries AMQP, once its first bytes say (or ``final``): its
        held bytes then routed to a new decoder, or the connection ignored."""
        probe = self._probes[conn]
        if probe.amqp_port:
            self._decide_amqp_port(probe, out, final)
            return
        start = self._first_bytes(probe, final)
        if start == _WAIT:
            return
        if start == _NOT_AMQP and not probe.opened.syn_seen:
            # joined mid-stream: no protocol header to see; a run of AMQP frames may say it (one direction is enough)
            start = _by_frame_run(probe, final, self.max_frame_bytes)
            if start == _WAIT:
                return
        layers = None
        if start == _NOT_AMQP or start == _UNDECIDED:  # an upgrade to a WebSocket carrying AMQP? (layers.py)
            layers = client_layers(conn, b"".join(e.data for e in probe.data[0]), bool(probe.data[1]), final,
                                   self.tls_records)
            if layers is None:
                return
            if layers:
                start = _AMQP
        if start == _UNDECIDED and not final:
            return
        tls = start == _TLS_KEYED or start == _TLS_UNKEYED
        if start == _AMQP or start == _TLS_KEYED:
            self._accept(probe, out, final, tls, layers)
        else:
            self._reject(probe)

    def _reject(self, probe: _Probe) -> None:
        """A probed connection found not to carry AMQP (or not known to): ignored from now on; a
        TLS stream not decrypted is said to have been there."""
        conn = probe.opened.conn
        del self._probes[conn]
        self.tcp.ignore(conn)
        if probe.data[0] and looks_like_tls(b"".join(e.data for e in probe.data[0])[:_PROBE_BYTES]):
            self._tls_unseen(probe)

    def _first_bytes(self, probe: _Probe, final: bool) -> int:
        """What the first bytes of a probed connection on other ports say: _AMQP (a protocol header
        starts a stream), _NOT_AMQP (a stream starts with other bytes), _UNDECIDED (too few bytes),
        a TLS stream whose ClientHello random is in the key log (_TLS_KEYED, decoded: TLS on any
        port) or not (_TLS_UNKEYED), or _WAIT (the ClientHello not whole yet)."""
        start = _UNDECIDED
        for evs in probe.data:
            head = b"".join(e.data for e in evs)[:_PROBE_BYTES]
            if head.startswith(b"AMQP"):
                return _AMQP
            if self.keylog is not None and looks_like_tls(head) and evs is probe.data[0]:
                random = tls_client_random(b"".join(e.data for e in evs)[:43])
                if random is None:
                    return _TLS_UNKEYED if final else _WAIT
                return _TLS_KEYED if random in self.keylog else _TLS_UNKEYED
            if len(head) >= 4 or (head and not b"AMQP".startswith(head)):
                start = _NOT_AMQP
        return start

    def _accept(self, probe: _Probe, out: list, final: bool, tls: bool, layers) -> None:
        """A probed connection on other ports found to carry AMQP (a TLS one: ``tls``; under a
        WebSocket: ``layers``): its roles settled when no SYN was seen (:meth:`_roles`), then a
        decoder started and fed what was held, the TCP layer's notes between its bytes."""
        conn = probe.opened.conn
        note = None
        if not tls and not layers and not probe.opened.syn_seen:
            r = self._roles(probe, final)
            if r is None:
                return  # waiting for the other side's first bytes
            if r == "swap":
                conn = self._swap(probe)
            elif r == "unknown":
                note = _roles_note(probe.opened, "no protocol header settles them and the ports say nothing")
        del self._probes[conn]
        c = self._start(probe.opened, out, verify=tls, layers=layers)
        if note is not None:
            out.append(note)
        notes = _probe_notes(probe, conn)
        for e in probe.in_order():
            if notes:
                _notes_before(notes, e.packet, out)
            out.extend(c.feed(e.direction, e.data, e.ts, e.packet))
        out.extend(notes)

    def _tls_unseen(self, probe) -> None:
        """A TLS stream on a port that is not AMQP's that cannot be decrypted: say it was there."""
        self.tls_unseen_count += 1
        if len(self.tls_unseen) < _TLS_UNSEEN_KEPT:
            ev = probe.data[0][0]
            self.tls_unseen.append({
                "connection": probe.opened.conn, "client": probe.opened.client, "server": probe.opened.server,
                "packet": ev.packet, "time": ev.ts,
                "why": "no key log" if self.keylog is None else "its ClientHello random is not in the key log"})

    def _decide_amqp_port(self, probe: _Probe, out: list, final: bool) -> None:
        """A connection on AMQP ports only, without its SYN (an ``amqp_port`` probe): decoded
        whatever its first bytes; they only settle client and server (:meth:`_amqp_port_roles`) before
        anything of it is routed, and the evidence used is said in a note (or that none was)."""
        r = self._amqp_port_roles(probe, final)
        if r is None:
            return  # waiting for the other side's first bytes
        why, evidence = r
        conn = probe.opened.conn
        if why == "swap":
            conn = self._swap(probe)
        del self._probes[conn]
        opened = probe.opened
        self.connections[conn] = opened.client
        self.amqp_connections += 1
        out.append(opened)
        if why == "unknown":
            out.append(_roles_note(opened, "both ports are AMQP ports and neither a protocol header nor an open "
                                            "at the start of both streams settles them"))
        else:
            out.append(_evidence_note(opened, evidence))
        notes = _probe_notes(probe, conn)
        held = sorted([e for evs in probe.data for e in evs], key=lambda e: e.packet)  # (in capture order)
        for e in held:
            if notes:
                _notes_before(notes, e.packet, out)
            c = self.connections[conn]
            if type(c) is str or type(c) is int:
                c = self._materialize(conn, c)
            out.extend(c.feed(e.direction, e.data, e.ts, e.packet))
        out.extend(notes)

    def _roles(self, probe: _Probe, final: bool):
        """Client and server of a connection on other ports, seen without its SYN and found to be
        AMQP by a protocol header (:func:`_header_client`).  That evidence wins over the ports' (an
        ephemeral port, see tcp.role_evidence).  Returns "keep", "swap", "unknown" (nothing says),
        or None to wait for the other side's first bytes."""
        client = _header_client(probe)
        if client == _NO_CLIENT:
            if not final and _any_header(probe) and len(probe.data[0]) + len(probe.data[1]) < _ROLE_PROBE_EVENTS:
                return None
            opened = probe.opened
            if role_evidence(_port(opened.client), _port(opened.server), self.ports) == "unknown":
                return "unknown"
            return "keep"
        return "swap" if client == 1 else "keep"

    def _amqp_port_roles(self, probe: _Probe, final: bool):
        """Client and server of a connection on AMQP ports only, seen without its SYN (an
        ``amqp_port`` probe): by its protocol headers (:func:`_header_client`), else, when neither
        stream starts with one, by its first open (:func:`_open_client`).  Returns ("keep" or
        "swap", the evidence used), ("unknown", None), or None to wait for more first bytes."""
        client = _header_client(probe)
        headers = _any_header(probe)
        evidence = "protocol headers"
        if client == _NO_CLIENT and not headers:
            client = _open_client(probe, final)
            if client == _WAIT_CLIENT:
                return None
            evidence = "first open"
        if client != _NO_CLIENT:
            return ("swap" if client == 1 else "keep"), evidence
        if not final and headers and _may_hold(probe):
            return None
        return "unknown", None

    def _swap(self, probe: _Probe) -> str:
        """Exchange client and server of a probed connection (nothing of it was routed yet):
        returns its new id."""
        old = probe.opened
        cid = self.tcp.swap_roles(old.conn)
        if cid is None:  # (closed already: rename here only)
            client, server = _endpoints(old.conn)
            cid = f"{server}-{client}"
        probe.opened = StreamOpened(cid, old.server, old.client, old.ts, old.packet, old.syn_seen)
        probe.data = tuple([renamed(e, cid) for e in evs] for evs in reversed(probe.data))
        if probe.order is not None:
            probe.order = bytearray(1 - d for d in probe.order)
        self._probes[cid] = probe
        del self._probes[old.conn]
        if len(self._renamed) > 1024:
            self._renamed.clear()
        self._renamed[old.conn] = cid
        return cid


def _in_missing_note(n, missing: list):
    """The note ``n`` of a gap in the missing files ``missing`` of a capture set: a reassembly
    note that skipped bytes says where they went; any other note is kept as it is."""
    if type(n) is not StreamNote or n.note.group != "reassembly" or not n.skipped:
        return n
    what = "file" if len(missing) == 1 else "files"
    msg = n.note.message.replace(
        "(TCP gap)", f"(TCP gap) in the missing {what} {', '.join(missing)} of the set, not lost on the wire", 1)
    return StreamNote(n.conn, n.direction, n.src, n.dst, n.packet, n.ts,
                      ExpertNote(n.note.severity, n.note.group, msg), n.skipped)

def _probe_notes(probe: _Probe, conn: str) -> list:
    """The TCP layer's notes on a probed connection, to be routed once it is found AMQP (under its
    id ``conn``, the roles swapped when they were), in the order they came."""
    return [n if n.conn == conn else renamed(n, conn) for n in probe.notes or ()]


def _notes_before(notes: list, packet: int, out: list) -> None:
    """Move to ``out`` the first ``notes`` made at or before ``packet``: a note of the TCP layer
    (one direction captured) reaches the decoder between the bytes it came between, as on an AMQP
    port (it came before the bytes of its own packet)."""
    n = 0
    while n < len(notes) and notes[n].packet is not None and notes[n].packet <= packet:
        n += 1
    if n:
        out.extend(notes[:n])
        del notes[:n]


def _roles_note(ev: StreamOpened, why: str) -> StreamNote:
    """The expert note of a connection whose client and server the capture does not show."""
    return StreamNote(ev.conn, 0, ev.client, ev.server, ev.packet, ev.ts,
                      ExpertNote(NOTE, "roles", f"client and server unknown: no SYN captured, {why}; "
                                                f"the sender of the first packet captured, {ev.client}, "
                                                "is taken as the client"))


# a connection on AMQP ports only, without its SYN, waits for the other side's first bytes (which
# settle the roles: see Dissector._roles) while it holds fewer bytes than this
_ROLE_HOLD_BYTES = 65536
_ROLE_HOLD_EVENTS = 4096  # (and this many segments: tiny ones cost an object each)


def _may_hold(probe: _Probe) -> bool:
    """May an ``amqp_port`` probe hold more while it waits for the other side's first bytes?"""
    return probe.held < _ROLE_HOLD_BYTES and len(probe.data[0]) + len(probe.data[1]) < _ROLE_HOLD_EVENTS


# SASL performatives by descriptor code (spec 5.3.3), and who sends each: 0 the client, 1 the server
_SASL_SENDER = {0x40: 1, 0x41: 0, 0x42: 1, 0x43: 0, 0x44: 1}


def _sasl_sender(head: bytes) -> int:
    """Who sends the SASL frame that follows the 8-byte SASL protocol header at the start of
    ``head`` (0 the client, 1 the server), or -1 when the bytes do not say (no SASL header, the
    frame not there yet, not a SASL frame)."""
    if len(head) < 16 or head[4] != 3:  # (protocol id 3: SASL)
        return -1
    doff = head[12]
    at = 8 + doff * 4
    if head[13] != 1 or doff < 2 or len(head) < at + 3 or head[at] != 0 or head[at + 1] != 0x53:
        return -1
    return _SASL_SENDER.get(head[at + 2], -1)


def _head(evs: list, n: int) -> bytes:
    """The first ``n`` bytes (or fewer) of the StreamData ``evs``."""
    out = b""
    for e in evs:
        out += e.data
        if len(out) >= n:
            break
    return out[:n]


_OPEN_CODE = COMPOSITES["open"].descriptor_code
_OPEN_PROBE_BYTES = 64  # bytes of a stream's start looked at for an open frame


def _starts_with_frame(head: bytes) -> bool:
    """Do these first bytes of a stream start with an AMQP frame header (size >= 8, doff >= 2, the
    header inside the size, type 0)?"""
    if len(head) < 8:
        return False
    size = int.from_bytes(head[0:4], "big")
    doff = head[4]
    return size >= 8 and doff >= 2 and doff * 4 <= size and head[5] == 0


def _judged(head: bytes) -> bool:
    """Are these first bytes of a stream enough to tell whether it starts with an open?"""
    if len(head) >= _OPEN_PROBE_BYTES:
        return True
    if len(head) < 8:
        return False
    if not _starts_with_frame(head):
        return True
    return len(head) >= min(int.from_bytes(head[0:4], "big"), head[4] * 4 + 10)


def _starts_with_open(head: bytes) -> bool:
    """Do these first bytes of a stream start with an AMQP frame whose body is an open (its
    descriptor code, as a smallulong or a ulong)?"""
    if not _starts_with_frame(head):
        return False
    b = head[head[4] * 4:]
    if len(b) >= 3 and b[0] == 0 and b[1] == 0x53:
        return b[2] == _OPEN_CODE
    if len(b) >= 10 and b[0] == 0 and b[1] == 0x80:
        return int.from_bytes(b[2:10], "big") == _OPEN_CODE
    return False


# A connection on other ports joined mid-stream (no SYN, no protocol header) is AMQP when one
# direction holds a run of AMQP frames: each frame header well-formed (size, doff >= 2, type 0),
# each body a performative, the sizes chaining from one frame to the next across segments
_PERFORMATIVES = frozenset(c.descriptor_code for c in COMPOSITES.values() if "frame" in c.provides)
_RUN_FRAMES = 3  # performatives a run needs
_RUN_STARTS = 8  # segment starts tried as the start of a run (a join may fall inside a frame)
_RUN_HOLD_BYTES = 262144  # bytes of one direction held at most while a run is looked for
_RUN_HOLD_EVENTS = 1024  # (and segments: tiny ones cost an object each)

_BROKEN, _MORE, _FOUND = 0, 1, 2


def _frame_runs(probe: _Probe, final: bool, max_frame: int):
    """Does a direction of a probed connection (joined mid-stream) hold a run of AMQP frames?
    True (one does), False (neither does nor may), or None (not known yet: wait for more bytes)."""
    waiting = False
    for evs in probe.data:
        if not evs:
            continue
        found = _frame_run(evs, max_frame)
        if found == _FOUND:
            return True
        if found == _MORE:
            waiting = True
    return None if waiting and not final else False


def _by_frame_run(probe: _Probe, final: bool, max_frame: int) -> int:
    """What a run of AMQP frames says of a probed connection joined mid-stream (:func:`_frame_runs`):
    _AMQP, _NOT_AMQP, or _WAIT for more bytes."""
    run = _frame_runs(probe, final, max_frame)
    if run is None:
        return _WAIT
    return _AMQP if run else _NOT_AMQP


def _frame_run(evs: list, max_frame: int) -> int:
    """_FOUND when the StreamData ``evs`` of one direction, from one of its first segments' starts,
    hold a run of _RUN_FRAMES performatives whose sizes chain into a later segment; _MORE when one
    may still (more bytes needed, within the bounds); else _BROKEN."""
    if len(evs) >= _RUN_HOLD_EVENTS:
        return _BROKEN
    parts = []
    held = 0
    for e in evs:
        parts.append(e.data)
        held += len(e.data)
        if held >= _RUN_HOLD_BYTES:
            break
    buf = b"".join(parts)
    more = False
    start = 0
    for e in evs[:_RUN_STARTS]:
        end = start + len(e.data)
        found = _run_from(buf, start, end, max_frame)
        if found == _FOUND:
            return _FOUND
        more = more or found == _MORE
        start = end
        if start >= len(buf):
            break
    if len(buf) >= _RUN_HOLD_BYTES:
        return _BROKEN
    return _MORE if more or len(evs) < _RUN_STARTS else _BROKEN


def _run_from(buf: bytes, at: int, segment_end: int, max_frame: int) -> int:
    """Frames from offset ``at`` of ``buf`` (a segment's start; the segment ends at ``segment_end``):
    _FOUND (a run of _RUN_FRAMES performatives, a frame header in a later segment among them),
    _MORE (well-formed as far as the bytes go) or _BROKEN."""
    n = 0
    while at + 8 <= len(buf):
        size = int.from_bytes(buf[at:at + 4], "big")
        doff = buf[at + 4]
        if size < 8 or size > max_frame or doff < 2 or doff * 4 > size or buf[at + 5] != 0:
            return _BROKEN
        if size > doff * 4:  # (an empty frame, a heartbeat, has no body)
            code = _descriptor(buf[at + doff * 4:min(at + size, at + doff * 4 + 10)])
            if code < 0:
                return _MORE if at + size > len(buf) else _BROKEN
            if code not in _PERFORMATIVES:
                return _BROKEN
            n += 1
        if n >= _RUN_FRAMES and at >= segment_end:
            return _FOUND
        at += size
    return _MORE


def _descriptor(body: bytes) -> int:
    """The descriptor code at the start of a frame body (a smallulong or a ulong), -1 when the
    bytes do not hold it all, -2 when they start with something else."""
    if len(body) < 3:
        return -1 if not body or body[0] == 0 else -2
    if body[0] != 0 or body[1] not in (0x53, 0x80):
        return -2
    if body[1] == 0x53:
        return body[2]
    return int.from_bytes(body[2:10], "big") if len(body) >= 10 else -1


# the client's direction (0 or 1) as the first bytes of the streams tell it, or: they do not say; they may once more come
_NO_CLIENT = -1
_WAIT_CLIENT = -2


def _first_sender(data: tuple) -> int:
    """The direction whose first held bytes came first (both directions hold some)."""
    return 0 if data[0][0].packet <= data[1][0].packet else 1


def _marked_client(data: tuple, marked: list, answered: list, ordered: bool) -> int:
    """The client's direction by a mark the client sends first (a protocol header, an open) at the
    streams' starts: both streams start with it, its earlier sender; one starts with it and the
    other with other bytes (``answered``: its own mark was before the capture; ``ordered``: and
    those came after the mark), the other one.  _NO_CLIENT when the marks do not say."""
    if marked[0] and marked[1]:
        return _first_sender(data)
    for k in (0, 1):
        if marked[k] and answered[1 - k] and (not ordered or data[1 - k][0].packet > data[k][0].packet):
            return 1 - k
    return _NO_CLIENT


def _any_header(probe: _Probe) -> bool:
    """Does either held stream start with a protocol header?"""
    return _head(probe.data[0], 4) == b"AMQP" or _head(probe.data[1], 4) == b"AMQP"


def _header_client(probe: _Probe) -> int:
    """The client's direction by the protocol headers (the client sends its header first and the
    server answers): when both headers were captured the first one's sender is the client, and when
    only one side's stream starts with a header while the other's starts with something else (its
    header was before the capture), the header's sender is the server.  One stream only (one
    direction captured, or the other's first bytes not come yet): the SASL frame after its header
    says whose it is (sasl-mechanisms comes from the server).  _NO_CLIENT when they do not say."""
    heads = [_head(evs, _PROBE_BYTES) for evs in probe.data]
    hdr = [h.startswith(b"AMQP") for h in heads]
    other = [bool(h) and not b"AMQP".startswith(h[:4]) for h in heads]
    client = _marked_client(probe.data, hdr, other, False)
    if client == _NO_CLIENT and hdr[0] != hdr[1] and not (heads[0] and heads[1]):
        k = 1 if hdr[1] else 0
        sender = _sasl_sender(_head(probe.data[k], 24))
        if sender >= 0:
            client = k if sender == 0 else 1 - k
    return client


def _open_client(probe: _Probe, final: bool) -> int:
    """The client's direction by the first open of a connection on AMQP ports with no protocol
    header (the client opens first): both streams start with an open, the earlier one's sender;
    one starts with an open and the other with other frames after it, the other's open was before
    the capture, so it is the client.  _WAIT_CLIENT while the first bytes may still say."""
    heads = [_head(evs, _OPEN_PROBE_BYTES) for evs in probe.data]
    if not final and not (_judged(heads[0]) and _judged(heads[1])) and _may_hold(probe):
        return _WAIT_CLIENT
    opens = [_starts_with_open(h) for h in heads]
    frames = [_starts_with_frame(h) for h in heads]
    return _marked_client(probe.data, opens, frames, True)


_EVIDENCE = {
    "protocol headers": "the client sends its protocol header first, and a header answered by other bytes is the "
                       "server's",
    "first open": "the client sends the first open, and an open answered by other frames (whose own open was before "
            "the capture) is the server's",
}


def _evidence_note(ev: StreamOpened, evidence: str) -> StreamNote:
    """The note of a connection on AMQP ports only, seen without its SYN, whose client and server its
    first bytes settled: which evidence was used."""
    return StreamNote(ev.conn, 0, ev.client, ev.server, ev.packet, ev.ts,
                      ExpertNote(NOTE, "role-evidence", f"client and server from the {evidence} (no SYN captured, both "
                                                        f"ports are AMQP ports): {_EVIDENCE[evidence]}"))


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])
