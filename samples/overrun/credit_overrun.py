"""A receiver that grants credit again while its earlier grant is in use, against RabbitMQ 3.10
(issue 39: "RabbitMQ 3.10 sends past the receiver's link-credit").

The sender puts N small messages on a queue; the receiver grants 10 credits, then after every
message it receives grants 1 more (proton sends a flow with its delivery-count and the
credit it has left plus 10: the receiver's limit, delivery-count + link-credit, only goes up).
It records, itself, every grant (its delivery-count and link-credit as it sent them, and the
time) and every message it received (its place, the time, and the limit it had set by then), in
the truth JSON: the transfers the broker sent beyond the receiver's highest limit are counted
from that record, not from the capture.

    tcpdump -i lo -U -w raw.pcap 'tcp port 5672' &   # (then keep this connection's stream only)
    python credit_overrun.py credit_overrun.truth.json [N]
"""

from __future__ import annotations

import json
import sys
import time

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

QUEUE = "/queue/amqpdissect.rules.overrun"
CONTAINER = "amqp-dissect-credit-overrun"
EVERY = 1  # a grant of this many more after every this many messages received


class Overrun(MessagingHandler):
    def __init__(self, n: int):
        super().__init__(prefetch=0, auto_accept=False)
        self.n = n
        self.sent = 0
        self.accepted = 0
        self.received = []
        self.grants = []
        self.conn = None

    def on_start(self, event):
        self.conn = event.container.connect("amqp://guest:guest@127.0.0.1:5672", allowed_mechs="PLAIN")
        self.rcv = event.container.create_receiver(self.conn, QUEUE, name="overrun-receiver")
        self.snd = event.container.create_sender(self.conn, QUEUE, name="overrun-sender")
        self._grant(self.rcv, 10)

    def _grant(self, link, n):
        link.flow(n)  # proton: credit += n, a flow with its delivery-count and credit goes out
        dc = len(self.received)
        self.grants.append({"delivery_count": dc, "link_credit": link.credit, "limit": dc + link.credit,
                            "time": time.time()})

    def on_sendable(self, event):
        while event.sender.credit and self.sent < self.n:
            event.sender.send(Message(id=f"overrun-{self.sent}", body=f"m{self.sent}"))
            self.sent += 1

    def on_message(self, event):
        i = len(self.received)
        limit = max(g["limit"] for g in self.grants)
        self.received.append({"index": i, "message_id": event.message.id, "time": time.time(),
                              "limit_by_then": limit, "beyond_limit": i >= limit})
        self.accept(event.delivery)
        if len(self.received) >= self.n:
            event.connection.close()
        elif len(self.received) % EVERY == 0:
            self._grant(self.rcv, EVERY)

    def on_accepted(self, event):
        self.accepted += 1


def main() -> None:
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    h = Overrun(n)
    c = Container(h)
    c.container_id = CONTAINER
    c.run()
    truth = {"container_id": CONTAINER, "queue": QUEUE, "messages_sent": h.sent, "sender_accepted": h.accepted,
             "deliveries_received": len(h.received), "credit_grants": h.grants, "received": h.received,
             "beyond_limit": sum(1 for r in h.received if r["beyond_limit"])}
    with open(out, "w") as f:
        json.dump(truth, f, indent=1)
    print(json.dumps({k: truth[k] for k in ("messages_sent", "deliveries_received", "beyond_limit")}))


if __name__ == "__main__":
    main()
