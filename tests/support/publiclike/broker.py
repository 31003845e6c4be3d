"""(tests/data/compare/README.md: how qpid_types.pcap and qpid_selector.pcap were made; run by hand, not by the tests.)
A minimal AMQP 1.0 peer on ADDR: accepts every link (echoing the source/target, filter included),
accepts every message it receives, and sends two messages on each link a client receives from."""
import sys
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

ADDR = sys.argv[1]


class Broker(MessagingHandler):
    def __init__(self):
        super().__init__(auto_accept=True)

    def on_start(self, event):
        self.acceptor = event.container.listen(ADDR)

    def on_link_opening(self, event):
        link = event.link
        if link.is_sender:
            link.source.copy(link.remote_source)
        else:
            link.target.copy(link.remote_target)

    def on_sendable(self, event):
        s = event.sender
        if getattr(s, "_sent", False):
            return
        s._sent = True
        for i in range(2):
            s.send(Message(body=f"for {s.source.address} {i}", properties={"n": i}))

    def on_connection_closed(self, event):
        self.acceptor.close()


Container(Broker()).run()
