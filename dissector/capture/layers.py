"""Stream layers in front of an AmqpConnection (sans-IO).

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
"""

from __future__ import annotations

from ..amqp.framing import StreamNote
from ..events import PacketNote, StreamData, StreamGap

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

    def gap(self, direction: int, size: int, ts: float, packet: int) -> list:
        if self.held is not None:
            return self._hold(self._gap(direction, size, ts, packet))
        return self._gap(direction, size, ts, packet)

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
        head = self.inner_head
        if len(head) >= 4 or (head and not b"AMQP".startswith(bytes(head))):
            if head.startswith(b"AMQP"):
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

    def _gap(self, direction: int, size: int, ts: float, packet: int) -> list:
        out: list = []
        if self.state[direction] == _SNIFF:
            out = self._sniff(direction, ts, packet, final=True)
        if self.state[direction] == _LAYER:
            return out + self._inner(direction, self.layer.gap(direction, size, ts, packet))
        return out + self.amqp.gap(direction, size, ts, packet)

    def _finish(self, ts: float | None = None, packet: int | None = None) -> list:
        out: list = []
        for direction in (0, 1):
            if self.state[direction] == _SNIFF and self.head[direction]:
                out += self._sniff(direction, ts, packet, final=True)
        if self.layer is not None:
            out += self._inner(0, self.layer.finish(ts, packet))
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
        self._done(direction, _LAYER)
        if data:
            out += self._inner(direction, self.layer.feed(direction, data, ts, packet))
        return out

    def _inner(self, direction: int, events: list) -> list:
        if not events:
            return events
        out: list = []
        amqp = self.amqp
        for ev in events:
            cls = type(ev)
            if cls is StreamData:
                if self.held is not None and len(self.inner_head) < 8:
                    self.inner_head += ev.data[: 8 - len(self.inner_head)]
                out.extend(amqp.feed(ev.direction, ev.data, ev.ts, ev.packet))
            elif cls is StreamGap:
                out.extend(amqp.gap(ev.direction, ev.size, ev.ts, ev.packet))
            elif cls is PacketNote:
                d = amqp.dirs[direction]
                out.append(StreamNote(self.conn, direction, d.src, d.dst, ev.packet, ev.ts, ev.note))
            else:
                out.append(ev)
        return out
