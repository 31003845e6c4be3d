"""Stream layers in front of an AmqpConnection (sans-IO): TLS and WebSocket.

A stream layer (:class:`~amqp_dissect.capture.tls.TlsLayer`,
:class:`~amqp_dissect.capture.websocket.WebSocketLayer`) turns the TCP payload of a
connection into the inner stream: ``feed`` / ``gap`` / ``finish`` return StreamData /
StreamGap of the inner stream and PacketNotes, in stream order.  The stand-ins below take
the place of an AmqpConnection in ``Dissector.connections`` (same ``feed`` / ``gap`` /
``finish``), and put the bare AmqpConnection back once a stream is known to be plain, so a
plain connection costs one dict lookup per segment and nothing more.

WebSocket (:class:`Sniffing`, :class:`Layered`, :class:`InnerSniff`)
--------------------------------------------------------------------
Stream layers stacked under an AMQP connection, as the Dissector holds them (sans-IO).

A stream layer (WebSocket; TLS) turns the TCP payload of a connection into the inner
stream: ``feed`` / ``gap`` / ``finish`` return StreamData / StreamGap of the inner stream and
PacketNotes, in stream order.  Two stand-ins take the place of an AmqpConnection in
``Dissector.connections`` (same ``feed`` / ``gap`` / ``finish`` methods), so a connection
without a layer still costs one dict lookup per segment and nothing more:

* :class:`Layered` feeds the TCP bytes through its layers, outermost first, and the inner
  stream to the AmqpConnection;
* :class:`Sniffing` holds the first bytes of a connection on an AMQP port (``--port``
  included) until the client's first bytes say whether a layer wraps the stream, then puts
  the AmqpConnection, or a Layered chain, in its place and replays what it held.

:class:`InnerSniff` is the same decision as a layer, for a stream found inside another
layer (WebSocket inside TLS): ``Layered([tls_layer, InnerSniff(conn)], amqp)``.

TLS (:class:`LayeredConnection`)
--------------------------------
:class:`LayeredConnection` has the ``feed`` / ``gap`` / ``finish`` interface of
:class:`~amqp_dissect.amqp.framing.AmqpConnection`, so the Dissector keeps it
in its connection table in place of the bare decoder.  It looks at the first
bytes of each direction:

- a TLS handshake record (``0x16 0x03``): the direction goes through a
  :class:`~amqp_dissect.capture.tls.TlsLayer` (one per connection), whose
  decrypted bytes feed the AMQP decoder;
- the AMQP TLS protocol header (``AMQP 2 1 0 0``): the header goes to the AMQP
  decoder (it shows as a protocol header), the rest of the direction through the
  TLS layer, and the decrypted stream starts again with a protocol header;
- anything else: plain AMQP.  Once both directions are plain the Dissector
  swaps the bare AmqpConnection back in (``plain`` is set), so plain streams pay
  nothing after their first bytes.

A TLS stream found on a port that is not an AMQP port (by its ClientHello random)
is held back (``verify``): its events, StreamOpened first, are released once the
decrypted stream starts with an ``AMQP`` protocol header; if it starts with
anything else, ``on_reject`` is called (the Dissector forgets the connection)
and nothing of it is shown (nor when it ends before any decrypted byte).

The layer's notes become StreamNotes of the connection (group "tls"), so that
they show in ``frames`` and mark the connection as TLS in the tables.

Chained: TLS outside, WebSocket inside (amqps over ``wss``): the decrypted stream of a
:class:`LayeredConnection` goes through an :class:`InnerSniff`, which finds a WebSocket
upgrade in it as :class:`Sniffing` does in plain TCP.
"""

from __future__ import annotations



from ..events import PacketNote, StreamData, StreamGap
from .websocket import MAX_HTTP_BYTES, WebSocketLayer, sniff as ws_sniff


def client_layers(conn: str, client: bytes, server_spoke: bool, final: bool, records: list | None = None):
    """The layers a connection needs, from the first bytes of its client direction (and
    whether the server has sent anything yet): a list (empty: plain AMQP), or None while
    undecided.  Nothing is held for long: the client's first 4 bytes settle any stream that
    does not start with ``GET ``, and an upgrade request is decided at its blank line, at
    :data:`~amqp_dissect.capture.websocket.MAX_HTTP_BYTES`, or when the server speaks."""
    if not client:
        return [] if server_spoke or final else None
    ws = ws_sniff(client[:MAX_HTTP_BYTES])
    if ws is None:  # an HTTP server answers only a whole request: the server speaking settles it too
        return [] if final or server_spoke else None
    return [WebSocketLayer(conn, records=records)] if ws else []


class Layered:
    """An AmqpConnection behind stream layers (outermost first)."""

    __slots__ = ("layers", "amqp")

    def __init__(self, layers: list, amqp):
        self.layers = layers
        self.amqp = amqp

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        return self._down(1, self.layers[0].feed(direction, data, ts, packet))

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        return self._down(1, self.layers[0].gap(direction, size, ts, packet, cause))

    def finish(self, ts, packet) -> list:
        out: list = []
        for i, layer in enumerate(self.layers):
            out.extend(self._down(i + 1, layer.finish(ts, packet)))
        out.extend(self.amqp.finish(ts, packet))
        return out

    def _down(self, i: int, events: list) -> list:
        """Pass a layer's output to layer ``i`` (the AMQP connection after the last)."""
        if not events:
            return events
        inner = self.layers[i] if i < len(self.layers) else self.amqp
        out: list = []
        for ev in events:
            cls = type(ev)
            if cls is StreamData:
                res = inner.feed(ev.direction, ev.data, ev.ts, ev.packet)
            elif cls is StreamGap:
                res = inner.gap(ev.direction, ev.size, ev.ts, ev.packet, ev.cause)
            else:
                out.append(ev)
                continue
            if i < len(self.layers):
                res = self._down(i + 1, res)
            out.extend(res)
        return out


class Sniffing:
    """Stands for a connection on an AMQP port until its client's first bytes are known."""

    __slots__ = ("conns", "conn", "amqp", "held", "client", "server_spoke", "target", "records")

    def __init__(self, conns: dict, conn: str, amqp, records: list | None = None):
        self.conns = conns
        self.conn = conn
        self.amqp = amqp
        self.records = records  # WebSocket frame records for -V (or None)
        self.held: list = []  # (is_gap, direction, data or size, ts, packet), in order
        self.client = b""  # the client's bytes before any gap
        self.server_spoke = False
        self.target = None  # the AmqpConnection or Layered chain, once decided

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        self.held.append((False, direction, data, ts, packet))
        if direction == 0:
            self.client += data
        else:
            self.server_spoke = True
        return self._settle(False)

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        self.held.append((True, direction, size, ts, packet))
        return self._settle(True)

    def finish(self, ts, packet) -> list:
        out = self._settle(True)
        return out + self.target.finish(ts, packet)

    def _settle(self, final: bool) -> list:
        if self.target is not None:  # decided already (a stale reference fed again)
            return []
        layers = client_layers(self.conn, self.client, self.server_spoke, final, self.records)
        if layers is None:
            return []
        target = self.target = Layered(layers, self.amqp) if layers else self.amqp
        if self.conns.get(self.conn) is self:
            self.conns[self.conn] = target
        out: list = []
        for is_gap, direction, x, ts, packet in self.held:
            out.extend(target.gap(direction, x, ts, packet) if is_gap else target.feed(direction, x, ts, packet))
        self.held = []
        return out


class InnerSniff:
    """A stream layer that decides, from the first client bytes of the stream it is fed (the
    plaintext of a TLS layer, say), whether a WebSocket wraps the AMQP inside: then it hands
    everything to a :class:`~amqp_dissect.capture.websocket.WebSocketLayer`, otherwise it
    passes the stream through unchanged.  Chain it after TLS: ``Layered([tls, InnerSniff(conn)], amqp)``."""

    name = "sniff"

    def __init__(self, conn: str, records: list | None = None):
        self.conn = conn
        self.records = records  # WebSocket frame records for -V (or None)
        self.layer = None  # the WebSocketLayer, once decided
        self.decided = False
        self.held: list = []
        self.client = b""
        self.server_spoke = False

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        if self.decided:
            if self.layer is None:
                return [StreamData(self.conn, direction, data, ts, packet)]
            return self.layer.feed(direction, data, ts, packet)
        self.held.append(StreamData(self.conn, direction, data, ts, packet))
        if direction == 0:
            self.client += data
        else:
            self.server_spoke = True
        return self._settle(False)

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        if self.decided:
            if self.layer is None:
                return [StreamGap(self.conn, direction, size, ts, packet, cause)]
            return self.layer.gap(direction, size, ts, packet, cause)
        self.held.append(StreamGap(self.conn, direction, size, ts, packet, cause))
        return self._settle(True)

    def finish(self, ts, packet) -> list:
        out = [] if self.decided else self._settle(True)
        if self.layer is not None:
            out.extend(self.layer.finish(ts, packet))
        return out

    def _settle(self, final: bool) -> list:
        layers = client_layers(self.conn, self.client, self.server_spoke, final, self.records)
        if layers is None:
            return []
        self.decided = True
        self.layer = layers[0] if layers else None
        held, self.held, self.client = self.held, [], b""
        if self.layer is None:
            return held
        out: list = []
        for ev in held:
            if type(ev) is StreamData:
                out.extend(self.layer.feed(ev.direction, ev.data, ev.ts, ev.packet))
            else:
                out.extend(self.layer.gap(ev.direction, ev.size, ev.ts, ev.packet, ev.cause))
        return out


# --------------------------------------------------------------------------- TLS




_SNIFF = 0
_PLAIN = 1
_LAYER = 2

TLS_HEADER = b"AMQP\x02"


def tls_client_random(head: bytes) -> bytes | None:
    """The ClientHello random of a stream that starts with a TLS handshake record, if present."""
    if len(head) >= 43 and head[0] == 0x16 and head[1] == 0x03 and head[5] == 1:
        return bytes(head[11:43])
    return None


def looks_like_tls(head: bytes) -> bool:
    return len(head) >= 3 and head[0] == 0x16 and head[1] == 0x03 and head[2] <= 4


class LayeredConnection:
    """An AmqpConnection behind a TLS layer chosen from each direction's first bytes."""

    def __init__(self, amqp, keylog, records: list | None = None, table: dict | None = None,
                 verify: list | None = None, on_reject=None):
        self.amqp = amqp
        self.held = verify  # events held until the inner stream shows an AMQP header (None: not held)
        self.on_reject = on_reject
        self.inner_head = bytearray()
        self.table = table  # the Dissector's connection table: the bare decoder replaces us once plain
        self.conn = amqp.conn
        self.keylog = keylog
        self.records = records  # TlsRecord log for -V (or None)
        self.layer = None  # the TlsLayer, once a direction shows TLS
        self.sniff = None  # the InnerSniff after it: a WebSocket inside the TLS (wss)?
        self.state = [_SNIFF, _SNIFF]
        self.head = (bytearray(), bytearray())
        self.plain = False  # both directions plain: the Dissector may use the bare AmqpConnection

    def __getattr__(self, name):  # frames, tls, ... of the AMQP decoder
        if name.startswith("__") or name == "amqp":  # (unpickling looks names up before amqp is set)
            raise AttributeError(name)
        return getattr(self.amqp, name)

    # -- interface --------------------------------------------------------------

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        if self.held is not None:
            return self._hold(self._feed(direction, data, ts, packet))
        return self._feed(direction, data, ts, packet)

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        if self.held is not None:
            return self._hold(self._gap(direction, size, ts, packet, cause))
        return self._gap(direction, size, ts, packet, cause)

    def finish(self, ts: float | None = None, packet: int | None = None) -> list:
        out = self._finish(ts, packet)
        if self.held is not None:  # no inner bytes at all: nothing shows it is AMQP
            self.held = None
            if self.on_reject is not None:
                self.on_reject(self.conn)
            return []
        return out

    def _hold(self, out: list) -> list:
        if self.held is None:
            return out
        self.held += out
        if self.layer is not None and self.layer.wrong_keys:
            # the key log's secrets for its ClientHello do not decrypt it: whether it is AMQP is
            # unknown, shown (with the TLS notes) rather than dropped
            out, self.held = self.held, None
            return out
        head = self.inner_head
        if len(head) >= 4 or (head and not b"AMQP".startswith(bytes(head))):
            if head.startswith(b"GET ") and self.sniff is not None:
                # an HTTP request: AMQP only if it upgrades to a WebSocket carrying AMQP
                if not self.sniff.decided:
                    return []
                accepted = self.sniff.layer is not None
            else:
                accepted = head.startswith(b"AMQP")
            if accepted:
                out, self.held = self.held, None
                return out
            self.held = None
            if self.on_reject is not None:
                self.on_reject(self.conn)
        return []

    def _feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        st = self.state[direction]
        if st == _LAYER:
            return self._inner(direction, self.layer.feed(direction, data, ts, packet))
        if st == _PLAIN:
            return self.amqp.feed(direction, data, ts, packet)
        head = self.head[direction]
        head += data
        return self._sniff(direction, ts, packet, final=False)

    def _gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        out: list = []
        if self.state[direction] == _SNIFF:
            out = self._sniff(direction, ts, packet, final=True)
        if self.state[direction] == _LAYER:
            return out + self._inner(direction, self.layer.gap(direction, size, ts, packet, cause))
        return out + self.amqp.gap(direction, size, ts, packet, cause)

    def _finish(self, ts: float | None = None, packet: int | None = None) -> list:
        out: list = []
        for direction in (0, 1):
            if self.state[direction] == _SNIFF and self.head[direction]:
                out += self._sniff(direction, ts, packet, final=True)
        if self.layer is not None:
            out += self._inner(0, self.layer.finish(ts, packet))
        if self.sniff is not None:
            out += self._inner(0, self.sniff.finish(ts, packet), sniffed=True)
        out += self.amqp.finish(ts, packet)
        return out

    # -- internals ----------------------------------------------------------------

    def _sniff(self, direction: int, ts, packet, final: bool) -> list:
        head = self.head[direction]
        n = len(head)
        if n >= 2 and head[0] == 0x16 and head[1] == 0x03:
            return self._to_layer(direction, bytes(head), ts, packet, [])
        if n < 5 and TLS_HEADER.startswith(bytes(head)) and not final:
            return []
        if n >= 5 and head[:5] == TLS_HEADER:
            if n < 8 and not final:
                return []
            out = self.amqp.feed(direction, bytes(head[:8]), ts, packet)
            if n < 8:
                self._done(direction, _PLAIN)
                return out
            self.amqp.restart(direction)
            return self._to_layer(direction, bytes(head[8:]), ts, packet, out)
        data = bytes(head)
        self._done(direction, _PLAIN)
        return self.amqp.feed(direction, data, ts, packet) if data else []

    def _done(self, direction: int, state: int) -> None:
        self.state[direction] = state
        self.head[direction].clear()
        if self.state[0] == _PLAIN and self.state[1] == _PLAIN:
            self.plain = True
            if self.table is not None and self.table.get(self.conn) is self:
                self.table[self.conn] = self.amqp

    def _to_layer(self, direction: int, data: bytes, ts, packet, out: list) -> list:
        if self.layer is None:
            from .tls import TlsLayer  # imports cryptography: only when a stream is TLS

            self.layer = TlsLayer(self.conn, self.keylog, records=self.records)
            self.sniff = InnerSniff(self.conn, self.records)
        self._done(direction, _LAYER)
        if data:
            out += self._inner(direction, self.layer.feed(direction, data, ts, packet))
        return out

    def _inner(self, direction: int, events: list, sniffed: bool = False) -> list:
        """The TLS layer's output (``sniffed``: the InnerSniff's) on its way to the AMQP decoder."""
        if not events:
            return events
        out: list = []
        amqp = self.amqp
        for ev in events:
            cls = type(ev)
            if cls is StreamData:
                if not sniffed:
                    if self.held is not None and len(self.inner_head) < 8:
                        self.inner_head += ev.data[: 8 - len(self.inner_head)]
                    out.extend(self._inner(direction, self.sniff.feed(ev.direction, ev.data, ev.ts, ev.packet),
                                           sniffed=True))
                    continue
                out.extend(amqp.feed(ev.direction, ev.data, ev.ts, ev.packet))
            elif cls is StreamGap:
                if not sniffed:
                    out.extend(self._inner(direction, self.sniff.gap(ev.direction, ev.size, ev.ts, ev.packet, ev.cause),
                                           sniffed=True))
                    continue
                out.extend(amqp.gap(ev.direction, ev.size, ev.ts, ev.packet, ev.cause))
            elif cls is PacketNote:
                skipped = ev.extra.get("undecrypted", 0) if ev.extra else 0  # TLS bytes not decrypted
                out.append(amqp.layer_note(direction, ev.packet, ev.ts, ev.note, skipped))
            else:
                out.append(ev)
        return out
