"""Real AMQP 1.0 byte streams from python-qpid-proton, without a broker or sockets.

Two proton engines (a client and a server Transport) are wired back to back;
:class:`Pump` moves bytes between them and records every chunk with its
direction, so tests get genuine proton-encoded traffic (SASL, open, begin,
attach, flow, transfer split by max-frame-size, disposition, detach, end,
close) and know exactly what was sent.

    p = Pump(server_max_frame=512)
    snd = p.sender("q")
    p.run()
    p.send(snd, Message(body=b"x" * 3000))
    p.run()
    p.close()
    p.chunks   # [(direction, bytes), ...]  direction 0 = client -> server
"""

from __future__ import annotations

from proton import SASL, Collector, Connection, Event, Message, Transport


class Pump:
    def __init__(
        self,
        client_max_frame: int | None = None,
        server_max_frame: int | None = None,
        sasl: str | None = "ANONYMOUS",
        server_credit: int = 10,
        server_outcome: str = "accept",
        server_settle: bool = True,
    ):
        self.chunks: list[tuple[int, bytes]] = []
        self.client = Connection()
        self.client.container = "pump-client"
        self.server = Connection()
        self.server.container = "pump-server"
        self.ctr = Transport()
        self.str = Transport(Transport.SERVER)
        if client_max_frame:
            self.ctr.max_frame_size = client_max_frame
        if server_max_frame:
            self.str.max_frame_size = server_max_frame
        if sasl:
            cs = self.ctr.sasl()
            cs.allowed_mechs(sasl)
            ss = self.str.sasl()
            ss.allowed_mechs(sasl)
            ss.done(SASL.OK)
        self.ctr.bind(self.client)
        self.str.bind(self.server)
        self.scoll = Collector()
        self.server.collect(self.scoll)
        self.ccoll = Collector()
        self.client.collect(self.ccoll)
        self.server_credit = server_credit
        self.server_outcome = server_outcome
        self.server_settle = server_settle
        self.received: list[bytes] = []  # messages the server received
        self.aborted = 0  # deliveries the server saw aborted
        self._tags = 0
        self.client_received: list[bytes] = []
        self.client_outcomes: list = []
        self.client.open()
        self.session = self.client.session()
        self.session.open()

    # -- client side helpers -------------------------------------------------------

    def sender(self, address: str, name: str | None = None, settled: bool = False, session=None):
        ssn = session or self.session
        snd = ssn.sender(name or f"sender-{address}")
        snd.target.address = address
        if settled:
            snd.snd_settle_mode = snd.SND_SETTLED
        snd.open()
        return snd

    def receiver(self, address: str, name: str | None = None, credit: int = 0, session=None):
        ssn = session or self.session
        rcv = ssn.receiver(name or f"receiver-{address}")
        rcv.source.address = address
        rcv.open()
        if credit:
            rcv.flow(credit)
        return rcv

    def send(self, snd, message: Message | bytes, tag: bytes | None = None, settle: bool = False):
        body = message if isinstance(message, bytes) else message.encode()
        self._tags += 1
        d = snd.delivery(tag or f"tag-{self._tags}".encode())
        snd.send(body)
        snd.advance()
        if settle:
            d.settle()
        return d

    def server_send(self, address: str, messages: list[bytes]):
        """Queue messages on the server's sender link for ``address`` (a client receiver)."""
        self.run()
        for link in self._server_links():
            if link.is_sender and link.source.address == address:
                for i, m in enumerate(messages):
                    link.delivery(f"srv-{i}".encode())
                    link.send(m)
                    link.advance()
        self.run()

    def _server_links(self):
        link = self.server.link_head(0)
        while link:
            yield link
            link = link.next(0)

    def close(self):
        self.client.close()
        self.run()

    # -- engine --------------------------------------------------------------------

    def run(self, rounds: int = 1000):
        for _ in range(rounds):
            moved = False
            for src, dst, i in ((self.ctr, self.str, 0), (self.str, self.ctr, 1)):
                n = src.pending()
                if n > 0:
                    b = src.peek(n)
                    src.pop(n)
                    dst.push(b)
                    self.chunks.append((i, bytes(b)))
                    moved = True
            moved |= self._server_events()
            moved |= self._client_events()
            if not moved:
                return

    def _server_events(self) -> bool:
        any_ = False
        while self.scoll.peek():
            any_ = True
            e = self.scoll.peek()
            t = e.type
            if t == Event.CONNECTION_REMOTE_OPEN:
                e.connection.open()
            elif t == Event.SESSION_REMOTE_OPEN:
                e.session.open()
            elif t == Event.LINK_REMOTE_OPEN:
                link = e.link
                if link.is_receiver:
                    link.target.copy(link.remote_target)
                    link.open()
                    if self.server_credit:
                        link.flow(self.server_credit)
                else:
                    link.source.copy(link.remote_source)
                    link.open()
            elif t == Event.DELIVERY:
                link = e.delivery.link
                if link.is_receiver:
                    self._server_receive(link)
            elif t == Event.LINK_REMOTE_CLOSE:
                e.link.close()
            elif t == Event.SESSION_REMOTE_CLOSE:
                e.session.close()
            elif t == Event.CONNECTION_REMOTE_CLOSE:
                e.connection.close()
            self.scoll.pop()
        return any_

    def _server_receive(self, link) -> None:
        outcomes = {"accept": 36, "reject": 37, "release": 38, "modify": 39}
        while link.current is not None:
            d = link.current
            if d.aborted:
                self.aborted += 1
                link.advance()
                d.settle()
                continue
            if not d.readable or d.partial:
                return
            self.received.append(bytes(link.recv(d.pending)))
            d.update(outcomes[self.server_outcome])
            link.advance()  # before settle: settling the current delivery also advances
            if self.server_settle:
                d.settle()
            if self.server_credit and link.credit == 0:
                link.flow(self.server_credit)

    def _client_events(self) -> bool:
        any_ = False
        while self.ccoll.peek():
            any_ = True
            e = self.ccoll.peek()
            if e.type == Event.DELIVERY:
                d = e.delivery
                link = d.link
                if link.is_receiver:
                    while link.current is not None and link.current.readable and not link.current.partial:
                        cur = link.current
                        self.client_received.append(bytes(link.recv(cur.pending)))
                        cur.update(cur.ACCEPTED)
                        link.advance()
                        cur.settle()
                elif link.is_sender and d.remote_state:
                    self.client_outcomes.append(d.remote_state)
                    if not d.settled:
                        d.settle()
            self.ccoll.pop()
        return any_

    def stream(self, direction: int) -> bytes:
        return b"".join(b for d, b in self.chunks if d == direction)
