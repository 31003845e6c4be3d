#!/usr/bin/env python3
"""A small claims-based-security (``$cbs``) responder: a proton server for the azure_cbs sample.

RabbitMQ has no ``$cbs`` node, so the Azure SDK's put-token needs something that answers it.
This process listens on HOST:5672 (a loopback address other than the broker's, e.g. 127.0.0.2),
accepts every attach (answering with the node address the client asked for), grants credit, and
answers each put-token on ``$cbs`` with a response carrying ``correlation-id`` = the request's
``message-id`` and ``status-code`` 202 (``"Accepted"``), or 401 when the token contains the word
``refuse``.  Messages sent to any other node are accepted.  With ``--enforce-expiry``, when a token
it accepted expires, it detaches every other link of that connection with
``amqp:link:detach-forced`` (as a token-checking service does when a link outlives its token).  On SIGTERM (or after ``--seconds``)
it writes what it received and answered, with its own clock, to ``--out`` and exits.

    python samples/messages/cbs_responder.py --host 127.0.0.2 --out responder.json --seconds 30
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


def now() -> float:
    return round(time.time(), 6)


def _plain(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, uuid.UUID):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


class _Call:
    def __init__(self, fn) -> None:
        self.fn = fn

    def on_timer_task(self, event) -> None:
        self.fn()


class Responder(MessagingHandler):
    def __init__(self, url: str, seconds: float, enforce_expiry: bool = False) -> None:
        super().__init__(prefetch=10, auto_accept=False)
        self.url, self.seconds, self.enforce_expiry = url, seconds, enforce_expiry
        self.records = {"listen": url, "connections": [], "attaches": [], "put_tokens": [], "other_messages": [],
                        "forced_detaches": []}
        self.senders: dict = {}  # connection -> sender link attached to $cbs (the client's response link)

    def on_start(self, event) -> None:
        self.container = event.container
        self.acceptor = event.container.listen(self.url)
        event.container.schedule(self.seconds, self)
        print(f"cbs_responder listening on {self.url}", flush=True)

    def on_timer_task(self, event) -> None:
        self.stop()

    def _expire(self, conn, audience: str) -> None:
        from proton import Condition
        for link in list(self._links(conn)):
            if link.state & link.LOCAL_ACTIVE and link.remote_target.address != "$cbs" \
                    and link.remote_source.address != "$cbs":
                link.condition = Condition("amqp:link:detach-forced", f"the token for {audience} expired")
                link.close()
                self.records["forced_detaches"].append({"t": now(), "link": link.name,
                                                        "condition": "amqp:link:detach-forced",
                                                        "description": f"the token for {audience} expired"})

    @staticmethod
    def _links(conn):
        link = conn.link_head(0)
        while link:
            yield link
            link = link.next(0)

    def stop(self) -> None:
        self.acceptor.close()
        for c in list(self.senders):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - already closed
                pass
        self.container.stop()

    def on_connection_opening(self, event) -> None:
        c = event.connection
        self.records["connections"].append({"t_open": now(), "remote_container_id": c.remote_container,
                                            "remote_hostname": c.remote_hostname})
        c.container = "amqp-dissect-cbs-responder"

    def on_link_opening(self, event) -> None:
        link = event.link
        if link.is_sender:
            addr = link.remote_source.address
            link.source.address = addr
            link.target.address = link.remote_target.address
            if addr == "$cbs":
                self.senders[link.connection] = link
        else:
            addr = link.remote_target.address
            link.target.address = addr
            link.source.address = link.remote_source.address
        self.records["attaches"].append({"t": now(), "name": link.name, "client_role": "receiver" if link.is_sender
                                         else "sender", "address": addr})

    def on_message(self, event) -> None:
        msg, dlv = event.message, event.delivery
        target = dlv.link.remote_target.address
        props = dict(msg.properties or {})
        if target != "$cbs":
            self.records["other_messages"].append({"t": now(), "address": target, "message_id": _plain(msg.id)})
            self.accept(dlv)
            return
        token = _plain(msg.body)
        refuse = isinstance(token, str) and "refuse" in token
        code, desc = (401, "Unauthorized: the made-up token is refused") if refuse else (202, "Accepted")
        rec = {"t_request": now(), "message_id": _plain(msg.id), "message_id_type": type(msg.id).__name__,
               "reply_to": msg.reply_to, "operation": _plain(props.get("operation")), "name": _plain(props.get("name")),
               "type": _plain(props.get("type")), "expiration": _plain(props.get("expiration")),
               "token_length": len(token) if isinstance(token, str) else None,
               "status_code": code, "status_description": desc, "t_response": None}
        self.accept(dlv)
        exp = props.get("expiration")
        if self.enforce_expiry and code == 202 and isinstance(exp, int):
            delay = max(0.0, exp / 1000.0 - time.time())
            rec["expiry_enforced_in_s"] = round(delay, 3)
            conn, audience = dlv.link.connection, _plain(props.get("name"))
            self.container.schedule(delay, _Call(lambda: self._expire(conn, audience)))
        snd = self.senders.get(dlv.link.connection)
        if snd is not None:
            reply = Message(correlation_id=msg.id, address=msg.reply_to, body=None,
                            properties={"status-code": code, "status-description": desc})
            snd.send(reply)
            rec["t_response"] = now()
        self.records["put_tokens"].append(rec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.2")
    ap.add_argument("--port", type=int, default=5672)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--enforce-expiry", action="store_true")
    args = ap.parse_args()
    h = Responder(f"{args.host}:{args.port}", args.seconds, args.enforce_expiry)
    cont = Container(h)
    cont.sasl_enabled = False  # the SDK's plain-AMQP connection sends the AMQP header, no SASL layer

    def term(*_):
        h.stop()
    signal.signal(signal.SIGTERM, term)
    try:
        cont.run()
    finally:
        with open(args.out, "w") as f:
            json.dump(h.records, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
