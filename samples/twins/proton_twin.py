#!/usr/bin/env python3
"""The twin scenario's client written with python-qpid-proton (run by make_twins.py).

Usage: ``proton_twin.py HOST PORT QUEUE_ADDRESS TRUTH_OUT [--modified] [--anonymous] [--small N]``

One connection (max-frame-size 512, SASL PLAIN guest/guest), one session, three links attached at once:
``twin-sender`` (small messages), ``twin-big-sender`` (bodies of BIG_SIZE bytes, 7 transfer frames each at
max-frame-size 512) and ``twin-receiver``, all on the same queue.  The receiver grants credit in windows
(WINDOWS: 500, then 10, then 1; a new window only when the credit is used up), at window 1 releases every RELEASE_EVERY-th
first-time delivery (the broker redelivers it and the client then accepts it); with ``--modified`` every
MODIFY_EVERY-th first-time delivery is settled modified(delivery-failed) instead.  The truth file lists what
this client sent, received and settled, never anything read from a capture.  With ``--anonymous`` it
logs in with SASL ANONYMOUS (the Proton C example broker offers no other).  A delivery the broker sent
settled (the Proton C example broker settles all it sends) has no outcome (``null``): the client only
settles it locally, and it is never released nor redelivered.
"""
from __future__ import annotations

import json
import os
import sys
import time

from proton import Message, Delivery
from proton.handlers import MessagingHandler
from proton.reactor import Container

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twin_plan as plan  # noqa: E402


class TwinClient(MessagingHandler):
    def __init__(self, host: str, port: int, address: str, use_modified: bool, anonymous: bool = False) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.url = f"amqp://{host}:{port}" if anonymous else f"amqp://guest:guest@{host}:{port}"
        self.mechs = "ANONYMOUS" if anonymous else "PLAIN"
        self.address = address
        self.use_modified = use_modified
        self.truth = plan.new_truth("python-qpid-proton", host, port, address, self.mechs)
        self.seen: set[str] = set()
        self.accepted_ids: set[str] = set()
        self.sent = {"twin-sender": 0, "twin-big-sender": 0}
        self.done = False

    def on_start(self, event) -> None:
        self.truth["connections"][0]["t_connect"] = time.time()
        conn = event.container.connect(self.url, allowed_mechs=self.mechs, max_frame_size=plan.MAX_FRAME_SIZE,
                                       container_id="amqp-dissect-twins-proton")
        self.ssn = conn.session()
        self.ssn.open()
        self.snd = event.container.create_sender(self.ssn, self.address, name="twin-sender")
        self.big = event.container.create_sender(self.ssn, self.address, name="twin-big-sender")
        self.rcv = event.container.create_receiver(self.ssn, self.address, name="twin-receiver")
        self.links = {l["name"]: l for l in self.truth["links"]}
        self.grant()

    def grant(self) -> None:
        n = plan.window(self.links["twin-receiver"]["deliveries_received"])
        self.links["twin-receiver"]["credit_grants"].append(n)
        self.rcv.flow(n)

    def on_sendable(self, event) -> None:
        link = event.link
        name = link.name
        total = plan.N_SMALL if name == "twin-sender" else plan.N_BIG
        if name == "twin-big-sender" and self.sent["twin-sender"] < plan.N_SMALL:
            return  # the big messages go after the small ones: they arrive at credit window 1
        while link.credit and self.sent.get(name, total) < total:
            i = self.sent[name] = self.sent[name] + 1
            mid, body = plan.message(name, i)
            dlv = link.send(Message(id=mid, body=body))
            dlv.mid = mid
            rec = self.links[name]
            rec["messages_sent"] += 1
            rec["deliveries"].append({"message_id": mid, "body_size": len(body), "outcome": None})
        if name == "twin-sender" and self.sent[name] == total and self.big.credit:
            self.on_sendable(type("E", (), {"link": self.big})())

    def on_settled(self, event) -> None:
        link = event.link
        if link.name not in self.sent:
            return
        outcome = plan.OUTCOMES.get(event.delivery.remote_state, str(event.delivery.remote_state))
        rec = self.links[link.name]
        idx = int(event.delivery.mid.rsplit("-", 1)[1]) - 1
        rec["deliveries"][idx]["outcome"] = outcome
        rec["outcomes"][outcome] = rec["outcomes"].get(outcome, 0) + 1

    def on_message(self, event) -> None:
        dlv, msg = event.delivery, event.message
        rec = self.links["twin-receiver"]
        mid = str(msg.id)
        redelivered = mid in self.seen
        self.seen.add(mid)
        outcome = plan.receiver_outcome(mid, redelivered, self.use_modified, rec["deliveries_received"])
        if dlv.settled:  # the broker sent it settled: there is no outcome to give, nor a redelivery to ask for
            outcome = None
        rec["deliveries_received"] += 1
        body = msg.body if isinstance(msg.body, (bytes, str)) else b""
        rec["deliveries"].append({"message_id": mid, "delivery_tag": plan.tag_hex(dlv), "body_size": len(body),
                                  "redelivered": redelivered, "outcome": outcome})
        if outcome:
            rec["outcomes"][outcome] += 1
        if outcome is None:
            dlv.settle()
            self.accepted_ids.add(mid)
        elif outcome == "accepted":
            self.accept(dlv)
            self.accepted_ids.add(mid)
        elif outcome == "released":
            self.release(dlv, delivered=False)
        else:
            dlv.local.failed = True
            dlv.update(Delivery.MODIFIED)
            dlv.settle()
        if len(self.accepted_ids) == plan.N_SMALL + plan.N_BIG:
            self.finish()
        elif self.rcv.credit == 0:
            self.grant()

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        for l in (self.snd, self.big, self.rcv):
            l.close()
        self.ssn.close()
        self.ssn.connection.close()

    def on_connection_closed(self, event) -> None:
        self.truth["connections"][0]["t_closed"] = time.time()

    def on_transport_error(self, event) -> None:
        cond = event.transport.condition
        self.truth["notes"].append(f"transport error {cond.name if cond else None}")


def main() -> int:
    host, port, address, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if "--small" in sys.argv[5:]:  # a burst: this many small messages (the rest of the plan unchanged)
        plan.N_SMALL = int(sys.argv[sys.argv.index("--small") + 1])
    client = TwinClient(host, port, address, "--modified" in sys.argv[5:], "--anonymous" in sys.argv[5:])
    Container(client).run()
    plan.finish_truth(client.truth)
    with open(out, "w") as f:
        json.dump(client.truth, f, separators=(",", ":"))
    return 0 if client.done else 1


if __name__ == "__main__":
    sys.exit(main())
