"""Stream layers stacked under an AMQP connection, as the Dissector holds them (sans-IO).

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
"""

from __future__ import annotations

from ..events import StreamData, StreamGap
from .websocket import MAX_HTTP_BYTES, WebSocketLayer, sniff as ws_sniff


def client_layers(conn: str, client: bytes, server_spoke: bool, final: bool):
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
    return [WebSocketLayer(conn)] if ws else []


class Layered:
    """An AmqpConnection behind stream layers (outermost first)."""

    __slots__ = ("layers", "amqp")

    def __init__(self, layers: list, amqp):
        self.layers = layers
        self.amqp = amqp

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        return self._down(1, self.layers[0].feed(direction, data, ts, packet))

    def gap(self, direction: int, size: int, ts: float, packet: int) -> list:
        return self._down(1, self.layers[0].gap(direction, size, ts, packet))

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
                res = inner.gap(ev.direction, ev.size, ev.ts, ev.packet)
            else:
                out.append(ev)
                continue
            if i < len(self.layers):
                res = self._down(i + 1, res)
            out.extend(res)
        return out


class Sniffing:
    """Stands for a connection on an AMQP port until its client's first bytes are known."""

    __slots__ = ("conns", "conn", "amqp", "held", "client", "server_spoke", "target")

    def __init__(self, conns: dict, conn: str, amqp):
        self.conns = conns
        self.conn = conn
        self.amqp = amqp
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

    def gap(self, direction: int, size: int, ts: float, packet: int) -> list:
        self.held.append((True, direction, size, ts, packet))
        return self._settle(True)

    def finish(self, ts, packet) -> list:
        out = self._settle(True)
        return out + self.target.finish(ts, packet)

    def _settle(self, final: bool) -> list:
        if self.target is not None:  # decided already (a stale reference fed again)
            return []
        layers = client_layers(self.conn, self.client, self.server_spoke, final)
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

    def __init__(self, conn: str):
        self.conn = conn
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

    def gap(self, direction: int, size: int, ts: float, packet: int) -> list:
        if self.decided:
            if self.layer is None:
                return [StreamGap(self.conn, direction, size, ts, packet)]
            return self.layer.gap(direction, size, ts, packet)
        self.held.append(StreamGap(self.conn, direction, size, ts, packet))
        return self._settle(True)

    def finish(self, ts, packet) -> list:
        out = [] if self.decided else self._settle(True)
        if self.layer is not None:
            out.extend(self.layer.finish(ts, packet))
        return out

    def _settle(self, final: bool) -> list:
        layers = client_layers(self.conn, self.client, self.server_spoke, final)
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
                out.extend(self.layer.gap(ev.direction, ev.size, ev.ts, ev.packet))
        return out
