#!/usr/bin/env python3
"""The twin scenario's client written with uamqp (run by make_twins.py): Azure's C uAMQP library
(azure-uamqp-c, an AMQP 1.0 implementation of its own, not Proton) under its Python binding.

Usage: ``uamqp_twin.py HOST PORT QUEUE_ADDRESS TRUTH_OUT [--anonymous]``

The same plan as ``proton_twin.py`` (``twin_plan.py``), with what this library allows:

- uamqp's Python binding opens TLS only.  The C library has a plain socket transport (``socketio``) with the
  same leading configuration fields as the TLS one: ``PlainSocket`` puts the socket transport in the place
  of the TLS one, so the library itself speaks plain AMQP on the socket (no relay in between).
- Windows 500 and 10 but never 1, and no big messages: see ``window`` and ``N_BIG`` below.
- The receiver's credit is the library's: uAMQP grants its ``max_link_credit`` at attach and again each
  time the credit it counts reaches 0 (its link code counts one per transfer frame, not per delivery).
  The client sets ``max_link_credit`` to the plan's window before the grant it feeds; the grants
  themselves (``credit_grants``) are read from the library's own frame trace (its ``-> [FLOW]`` lines,
  which come to the ``uamqp.c_uamqp`` logger), not modelled.
- Against RabbitMQ 3.10 it cannot run (samples/README.md): the pair uses the Proton C example broker.
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import re
import sys
import time

import uamqp
from uamqp import authentication, c_uamqp
from uamqp.address import Source, Target
from uamqp.message import Message, MessageProperties
from uamqp.receiver import MessageReceiver
from uamqp.sender import MessageSender

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twin_plan as plan  # noqa: E402

_IO_DESCRIPTION_OFFSET = 24  # IOInterfaceDescription: PyObject_HEAD (16 bytes), vtable pointer, then the C pointer


class PlainSocket:
    """uAMQP's plain socket transport in the place of its TLS one (for the SASL classes below)."""

    def set_tlsio(self, hostname, port):
        lib = ctypes.CDLL(c_uamqp.__file__)
        lib.socketio_get_interface_description.restype = ctypes.c_void_p
        lib.platform_get_default_tlsio.restype = ctypes.c_void_p
        desc = c_uamqp.get_default_tlsio()
        slot = ctypes.c_void_p.from_address(id(desc) + _IO_DESCRIPTION_OFFSET)
        if slot.value != lib.platform_get_default_tlsio():
            raise RuntimeError("this uamqp build does not lay out IOInterfaceDescription as expected")
        slot.value = lib.socketio_get_interface_description()
        config = c_uamqp.TLSIOConfig()  # hostname, port, then NULL: a SOCKETIO_CONFIG with no accepted socket
        config.hostname = hostname
        config.port = int(port)
        self._underlying_xio = c_uamqp.xio_from_tlsioconfig(desc, config)
        self.sasl_client = authentication.common._SASLClient(self._underlying_xio, self.sasl)
        self.consumed = False


class PlainSocketSASLPlain(PlainSocket, authentication.SASLPlain):
    pass


class PlainSocketSASLAnonymous(PlainSocket, authentication.SASLAnonymous):
    pass


def window(received: int) -> int:
    """The plan's credit windows, but never 1: uAMQP's flows carry a delivery-count one less than the
    transfers it has received, so a grant of 1 gives the broker no credit and the link stalls."""
    return max(plan.window(received), MIN_WINDOW)


MIN_WINDOW = 10
# No big messages: uAMQP splits a message by the peer's max-frame-size but checks each frame it sends against
# its own (512): to a broker that announces none (the Proton C example broker) a 3000-byte message fails to
# send ("Encoded frame size exceeds the maximum allowed frame size").  The big sender attaches and sends nothing.
N_BIG = 0


class TwinClient:
    def __init__(self, host: str, port: int, address: str, anonymous: bool, trace: "TraceLines") -> None:
        self.trace = trace
        self.truth = plan.new_truth(f"uamqp {uamqp.__version__}", host, port, address,
                                    "ANONYMOUS" if anonymous else "PLAIN")
        self.links = {l["name"]: l for l in self.truth["links"]}
        self.address = address
        self.seen: set[str] = set()
        self.accepted = 0
        self.settled = {"twin-sender": 0, "twin-big-sender": 0}
        self.big_queued = False
        self.in_flight: list[Message] = []
        self.done = False
        if anonymous:
            sasl = PlainSocketSASLAnonymous(host.encode(), port=port)
        else:
            sasl = PlainSocketSASLPlain(host.encode(), b"guest", b"guest", port=port)
        self.conn = uamqp.Connection(host.encode(), sasl, container_id="amqp-dissect-twins-uamqp",
                                     max_frame_size=plan.MAX_FRAME_SIZE, debug=True)
        self.truth["connections"][0]["t_connect"] = time.time()
        self.session = uamqp.Session(self.conn, incoming_window=100000, outgoing_window=100000)
        self.snd = MessageSender(self.session, "twin-sender", Target(address), name="twin-sender")
        self.big = MessageSender(self.session, "twin-big-sender", Target(address), name="twin-big-sender")
        self.rcv = MessageReceiver(self.session, Source(address), "twin-receiver", self.on_message,
                                   name="twin-receiver", prefetch=window(0))
        first = uamqp.constants.ReceiverSettleMode.ReceiveAndDelete  # rcv-settle-mode first: RabbitMQ refuses second
        for link in (self.snd, self.big, self.rcv):
            link.receive_settle_mode = first  # (the link's attach field only: the receiver still settles each one)
            link.open()

    def queue(self, name: str, total: int) -> None:
        sender = self.snd if name == "twin-sender" else self.big
        rec = self.links[name]
        for i in range(1, total + 1):
            mid, body = plan.message(name, i)
            msg = Message(body, properties=MessageProperties(message_id=mid))
            rec["messages_sent"] += 1
            rec["deliveries"].append({"message_id": mid, "body_size": len(body), "outcome": None})
            self.in_flight.append(msg)  # (the library calls back into it when settled: keep it alive)
            sender.send(msg, self.on_sent(name, i - 1))

    def on_sent(self, name: str, idx: int):
        def settled(message, result, error=None, **_details) -> None:
            rec = self.links[name]
            outcome = "accepted" if result == c_uamqp.MESSAGE_SEND_OK else f"send result {result} {error!r}"
            rec["deliveries"][idx]["outcome"] = outcome
            rec["outcomes"][outcome] = rec["outcomes"].get(outcome, 0) + 1
            self.settled[name] += 1
        return settled

    def on_message(self, message) -> None:
        rec = self.links["twin-receiver"]
        mid = message.properties.message_id
        mid = mid.decode() if isinstance(mid, bytes) else str(mid)
        redelivered = mid in self.seen
        self.seen.add(mid)
        outcome = plan.receiver_outcome(mid, redelivered, False, rec["deliveries_received"])
        presettled = self.trace.last_transfer_settled(self.rcv_handle())
        if presettled:  # the broker sent it settled: no redelivery to ask for; the library answers accepted
            outcome = "accepted"
        rec["deliveries_received"] += 1
        body = b"".join(message.get_data())
        tag = message.delivery_tag
        rec["deliveries"].append({"message_id": mid, "delivery_tag": bytes(tag).hex() if tag else None,
                                  "body_size": len(body), "redelivered": redelivered, "outcome": outcome,
                                  "settled_by_broker": presettled})
        rec["outcomes"][outcome] += 1
        if outcome == "accepted":
            message.accept()  # (settled by the broker or not, the library sends a settled disposition: accepted)
            self.accepted += 1
        else:
            message.release()
        # the library grants max_link_credit when its count reaches 0: make it the plan's next window
        self.rcv._link.set_prefetch_count(window(rec["deliveries_received"]))

    def rcv_handle(self) -> int:
        return 2  # the library numbers the handles of a session in the order the links attach

    def run(self) -> None:
        self.queue("twin-sender", plan.N_SMALL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            self.conn.work()
            if not self.big_queued and self.settled["twin-sender"] == plan.N_SMALL:
                self.big_queued = True
                self.queue("twin-big-sender", N_BIG)
            if self.accepted == plan.N_SMALL + N_BIG and self.settled["twin-big-sender"] == N_BIG:
                self.done = True
                break
        for link in (self.snd, self.big, self.rcv):
            link.close()
        self.session.destroy()
        self.conn.destroy()
        self.truth["connections"][0]["t_closed"] = time.time()


FLOW_OUT = re.compile(r"-> \[FLOW\]\* \{(?:[^,{}]*,){4}(\d+),[^,{}]*,(\d+)")  # handle (5th), link-credit (7th)


def credit_grants_from_trace(trace: str, handle: int) -> list[int]:
    return [int(m.group(2)) for m in FLOW_OUT.finditer(trace) if int(m.group(1)) == handle]


class TraceLines(logging.Handler):
    """The library's frame trace (its ``->``/``<-`` lines come to the ``uamqp.c_uamqp`` logger)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def last_transfer_settled(self, handle: int) -> bool:
        """Whether the last transfer frame received on the link came settled (read while its message is
        handed over: the frame is the last one traced)."""
        for line in reversed(self.lines):
            m = TRANSFER_IN.search(line)
            if m and int(m.group(1)) == handle:
                return m.group(2) == "true"
        return False


TRANSFER_IN = re.compile(r"<- \[TRANSFER\]\* \{(\d+),\d+,<[^>]*>,[^,{}]*,(true|false)")  # handle, settled


def main() -> int:
    host, port, address, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    trace = TraceLines()
    logger = logging.getLogger("uamqp.c_uamqp")
    logger.setLevel(logging.INFO)
    logger.addHandler(trace)
    logger.propagate = False
    client = TwinClient(host, port, address, "--anonymous" in sys.argv[5:], trace)
    client.run()
    rcv = client.truth["links"][2]
    text = "\n".join(trace.lines)
    rcv["credit_grants"] = credit_grants_from_trace(text, client.rcv_handle())
    if any(d["settled_by_broker"] for d in rcv["deliveries"]):
        client.truth["notes"].append("the broker sent deliveries settled (settled_by_broker); uAMQP still answers "
                                     "each with a settled disposition, accepted: their outcome here")
    plan.finish_truth(client.truth)
    with open(out, "w") as f:
        json.dump(client.truth, f, separators=(",", ":"))
    return 0 if client.done else 1


if __name__ == "__main__":
    sys.exit(main())
