#!/usr/bin/env python3
"""Real captures of the *message layer* (issue 28), each with the clients' own records as truth.

Usage::

    python samples/messages/scenarios.py [--out samples/messages] [--only NAME ...] [--list]
    python samples/generate.py --messages [--only NAME ...]      # the same, from the main script

Every scenario is one ``tcpdump -i lo`` capture on port 5672 (``<name>.pcap``) and one truth
file (``<name>.truth.json``) written by the clients themselves (never derived from the
capture).  The broker, tcpdump, the proton client machinery and the base truth schema
(connections, frames, links, deliveries) come from ``samples/generate.py``; this script adds
what the message layer needs: typed message and correlation ids, the properties, application
properties and annotations each side set or saw, the header as the consumer saw it, and the
client's own clock (``time.time()``, the clock tcpdump stamps packets with) for every send,
receipt, outcome and settlement.  The fields are documented in ``samples/README.md``.

What it starts and stops: a private RabbitMQ node (or an AMQP 1.0 broker already listening
on 127.0.0.1:5672 is used and left alone), one tcpdump per scenario, stopped by pid.  The
idle-timeout scenario pauses the broker it started (SIGSTOP, by pid) for a bounded time and
always resumes it (SIGCONT), also on error; it is skipped with a message when the broker is not
ours.  Bounded: every scenario has a timeout (``AMQPDISSECT_TIMEOUT``, default 30 s) and a
fixed number of messages.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import generate as base  # noqa: E402  (samples/generate.py)

try:
    from proton import Condition, Delivery, Message, symbol, ulong
except ImportError:  # reported by base.check_requirements()
    pass

SCHEMA = "messages/1"
SCENARIO_TIMEOUT = base.SCENARIO_TIMEOUT


def now() -> float:
    return round(time.time(), 6)


# --------------------------------------------------------------------------
# typed values for the truth file
# --------------------------------------------------------------------------


def typed_id(v: Any) -> dict | None:
    """A message-id / correlation-id as {"type", "value"}: the four AMQP id types kept apart."""
    if v is None:
        return None
    if isinstance(v, uuid.UUID):
        return {"type": "uuid", "value": str(v)}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"type": "binary", "value": bytes(v).hex()}
    if isinstance(v, bool):
        raise TypeError("bool id")
    if isinstance(v, int):
        return {"type": "ulong", "value": int(v)}
    if isinstance(v, str):
        return {"type": "string", "value": str(v)}
    raise TypeError(type(v))


def plain(v: Any) -> Any:
    """A JSON value of an application property / annotation (binary as hex, uuid as text)."""
    if v is None or isinstance(v, (bool, int, float)):
        return v if not isinstance(v, int) or isinstance(v, bool) else int(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return repr(v)


def plain_map(m: dict | None) -> dict | None:
    if m is None:
        return None
    return {str(k): plain(v) for k, v in m.items()}


def msg_fields(msg) -> dict:
    """What a proton Message carries, as the truth records it (sender: as set; receiver: as decoded)."""
    return {
        "message_id": typed_id(msg.id),
        "correlation_id": typed_id(msg.correlation_id),
        "user_id": bytes(msg.user_id).decode("utf-8", "replace") if msg.user_id else None,
        "to": msg.address,
        "subject": msg.subject,
        "reply_to": msg.reply_to,
        "content_type": str(msg.content_type) if msg.content_type else None,
        "group_id": msg.group_id,
        "application_properties": plain_map(msg.properties),
        "message_annotations": plain_map(msg.annotations),
        "header": {"durable": bool(msg.durable), "priority": int(msg.priority), "ttl_s": msg.ttl or None,
                   "first_acquirer": bool(msg.first_acquirer), "delivery_count": int(msg.delivery_count)},
    }


# --------------------------------------------------------------------------
# proton client with message-level records
# --------------------------------------------------------------------------


class MsgClient(base.ScenarioClient):
    """generate.ScenarioClient plus typed ids, message fields and client-side times per delivery."""

    broker: base.Broker | None = None

    def __init__(self) -> None:
        super().__init__()
        self.conn_extra: dict[int, dict] = {}
        self.events: list[dict] = []  # scenario timeline: {"t", "what", ...}
        self._procs: list = []

    # -- timeline ----------------------------------------------------------
    def mark(self, what: str, **kw) -> None:
        self.events.append({"t": now(), "what": what, **kw})

    # -- connections: frame times ------------------------------------------
    def on_connection_bound(self, event) -> None:
        super().on_connection_bound(event)
        rec = getattr(event.connection, "_dissect_rec", None)
        if rec is None:
            return
        ex = self.conn_extra.setdefault(rec.index, {"t_connect": None, "t_remote_open": None, "t_closed": None,
                                                    "t_last_frame_sent": None, "t_last_frame_received": None,
                                                    "closed_by": None})
        ex["t_connect"] = now()
        inner = event.transport.tracer

        def tracer(t, msg, rec=rec, ex=ex, inner=inner):
            inner(t, msg)
            s = msg.strip()
            if s.startswith("FRAME:") and ("->" in s[:12] or "<-" in s[:12]):
                ex["t_last_frame_sent" if "->" in s[:12] else "t_last_frame_received"] = now()
        event.transport.tracer = tracer

    def on_connection_remote_open(self, event) -> None:
        super().on_connection_remote_open(event)
        self.conn_extra[self.rec_of(event.connection).index]["t_remote_open"] = now()

    def on_connection_remote_close(self, event) -> None:
        super().on_connection_remote_close(event)
        ex = self.conn_extra[self.rec_of(event.connection).index]
        if ex["closed_by"] is None:
            ex["closed_by"] = "client" if event.connection.state & event.connection.LOCAL_CLOSED else "broker"

    def connect(self, container_id: str, virtual_host: str | None = None, **kw):
        if virtual_host is None:
            return super().connect(container_id, **kw)
        orig = self.container.connect

        def with_vhost(url, **ckw):
            return orig(url, virtual_host=virtual_host, **ckw)
        self.container.connect = with_vhost
        try:
            return super().connect(container_id, **kw)
        finally:
            self.container.connect = orig

    def close_conn(self, conn) -> None:
        ex = self.conn_extra.get(self.rec_of(conn).index)
        if ex is not None and ex["closed_by"] is None:
            ex["closed_by"] = "client"
        conn.close()

    def connection_finished(self, conn) -> None:
        rec = getattr(conn, "_dissect_rec", None)
        if rec is not None and rec.index in self.conn_extra and self.conn_extra[rec.index]["t_closed"] is None:
            self.conn_extra[rec.index]["t_closed"] = now()
        super().connection_finished(conn)

    # -- links -------------------------------------------------------------
    def on_link_remote_open(self, event) -> None:
        super().on_link_remote_open(event)
        rec = self._link_rec.get(event.link.name)
        if rec is not None:
            rec.extra["t_attached"] = now()
            src = event.link.remote_source.address if event.link.is_receiver else None
            tgt = event.link.remote_target.address if event.link.is_sender else None
            rec.extra["remote_address"] = src if event.link.is_receiver else tgt

    def _remote_detach(self, event, closed: bool) -> None:
        rec = self._link_rec.get(event.link.name)
        if rec is not None and "t_detached_by_broker" not in rec.extra and not (event.link.state & event.link.LOCAL_CLOSED):
            rec.extra["t_detached_by_broker"] = now()
        super()._remote_detach(event, closed)

    def close_link(self, link) -> None:
        self.lrec(link).extra.setdefault("t_detach_sent", now())
        super().close_link(link)

    def grant(self, rcv, n: int, drain: bool = False) -> None:
        super().grant(rcv, n, drain)
        self.lrec(rcv).extra.setdefault("credit_grant_times", []).append(now())

    # -- sending -----------------------------------------------------------
    def send_msg(self, snd, msg, tag: str | None = None) -> dict:
        rec = self.lrec(snd)
        data = msg.encode()
        tag = tag or str(rec.messages_sent + 1)
        dlv = snd.delivery(tag)
        snd.stream(data)
        snd.advance()
        body = msg.body
        d = {"message_id": None, "delivery_tag": tag.encode().hex(),
             "body_size": base._body_size(body) if body is not None else 0, "encoded_size": len(data),
             "presettled": False, "outcome": None, "redelivered": False}
        d.update(msg_fields(msg))
        d["t_sent"] = now()
        d["t_outcome"] = None
        rec.deliveries.append(d)
        rec.messages_sent += 1
        rec.body_sizes.append(d["body_size"])
        rec.encoded_sizes.append(len(data))
        dlv._dissect_rec = d
        return d

    def on_delivery(self, event) -> None:
        dlv = event.delivery
        d0 = getattr(dlv, "_dissect_rec", None)
        before = d0["outcome"] if d0 else None
        super().on_delivery(event)
        d = getattr(dlv, "_dissect_rec", None)
        if d is None:
            return
        if dlv.link.is_sender:
            if before is None and d["outcome"] is not None:
                d["t_outcome"] = now()
                if d["outcome"] == "rejected" and dlv.remote.condition is not None:
                    d["error"] = base._cond(dlv.remote.condition)
        elif "t_first_transfer" not in d:
            d["t_first_transfer"] = now()  # proton saw the delivery complete (one transfer here)

    # -- receiving ---------------------------------------------------------
    def on_message(self, event) -> None:
        dlv = event.delivery
        d = dlv._dissect_rec
        msg = event.message
        d.update(msg_fields(msg))
        d["body_size"] = base._body_size(msg.body) if msg.body is not None else 0
        d["redelivered"] = (msg.first_acquirer is False) or bool(msg.delivery_count)
        d["t_received"] = d.pop("t_first_transfer", now())
        d["t_settled"] = None
        self.lrec(dlv.link).body_sizes.append(d["body_size"])
        self.message(event, msg, dlv)

    def settle_receiver(self, dlv, outcome: str, condition=None, failed: bool = False,
                        undeliverable: bool = False) -> None:
        super().settle_receiver(dlv, outcome, condition, failed, undeliverable)
        dlv._dissect_rec["t_settled"] = now()

    # -- helper processes (rabbitmqctl) run without blocking the reactor ------
    def run_async(self, argv: list[str], then: Callable[[subprocess.CompletedProcess], None]) -> None:
        p = subprocess.Popen(argv, env=self.broker.env if self.broker else None, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self._procs.append(p)
        self.mark("command", argv=argv[-3:] if len(argv) > 3 else argv)

        def poll(p=p):
            if p.poll() is None:
                self.after(0.1, poll)
                return
            out = p.stdout.read()
            then(subprocess.CompletedProcess(argv, p.returncode, out, ""))
        self.after(0.1, poll)

    def ctl_argv(self, *args: str) -> list[str]:
        assert self.broker is not None
        if self.broker.started:
            return [base._rabbit_tool("rabbitmqctl"), "-n", base.NODE_NAME, *args]
        return ["rabbitmqctl", *args]


def tq(name: str) -> str:
    return f"amqpdissect.{name}"


# --------------------------------------------------------------------------
# 1. topic fan-out
# --------------------------------------------------------------------------

FANOUT_KEY = "amqpdissect.fanout"
FANOUT_ADDR = f"/topic/{FANOUT_KEY}"


def fanout_id(i: int):
    """Message i (1..20): ids of every AMQP id type, and three messages without any id."""
    if i in (6, 13, 20):
        return None
    k = i % 4
    if k == 1:
        return f"fanout-{i:02d}"
    if k == 2:
        return ulong(1000 + i)
    if k == 3:
        return uuid.UUID(int=(0x28 << 96) + i)
    return bytes([0xF0, 0x0D, i])


class TopicFanout(MsgClient):
    N = 20
    CONSUMERS = 3

    def start(self) -> None:
        self.cons = []
        for k in range(1, self.CONSUMERS + 1):
            c = self.connect(f"amqp-dissect-fanout-consumer-{k}")
            s = self.session(c)
            r = self.receiver(s, f"fanout-consumer-{k}", FANOUT_ADDR)
            self.grant(r, self.N)
            self.cons.append(r)
        self.attached = 0
        self.received = {r.name: 0 for r in self.cons}
        self.snd = None
        self.sent = self.settled = 0

    def on_link_remote_open(self, event) -> None:
        super().on_link_remote_open(event)
        if event.link in self.cons:
            self.attached += 1
            if self.attached == self.CONSUMERS:
                self.mark("all consumers attached")
                c = self.connect("amqp-dissect-fanout-producer")
                self.snd = self.sender(self.session(c), "fanout-producer", FANOUT_ADDR)

    def on_sendable(self, event) -> None:
        if event.link != self.snd:
            return
        while self.snd.credit and self.sent < self.N:
            self.sent += 1
            i = self.sent
            kind = type(fanout_id(i)).__name__ if fanout_id(i) is not None else "none"
            msg = Message(id=fanout_id(i), body=f"fan-out message {i:02d}", subject=f"fanout.subject.{i % 3}",
                          content_type="text/plain",
                          properties={"seq": i, "id_kind": kind, "even": i % 2 == 0},
                          annotations={symbol("x-opt-amqpdissect-seq"): i} if i % 5 else None)
            self.send_msg(self.snd, msg)

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == self.snd:
            self.snd.session.close()
        elif link in self.cons:
            link.session.close()

    def on_session_closed(self, event) -> None:
        self.close_conn(event.connection)

    def message(self, event, msg, dlv) -> None:
        self.settle_receiver(dlv, "accepted")
        self.received[dlv.link.name] += 1
        if self.received[dlv.link.name] == self.N:
            self.close_link(dlv.link)


# --------------------------------------------------------------------------
# 2. request / reply
# --------------------------------------------------------------------------

RR_SERVICE = f"/queue/{tq('rr.service')}"
RR_REPLIES = f"/queue/{tq('rr.replies')}"


def rr_id(i: int):
    if i <= 4:
        return f"req-{i:02d}"
    if i <= 7:
        return ulong(7000 + i)
    if i <= 9:
        return uuid.UUID(int=(0xA0 << 96) + i)
    return b"req\x00" + bytes([i])


class RequestReply(MsgClient):
    N = 10
    UNANSWERED = 7  # the service takes request 7 (accepts it) but never replies

    def start(self) -> None:
        self.req_conn = self.connect("amqp-dissect-rr-requester")
        # the dynamic reply node in a session of its own: a broker that refuses it may end the session
        self.dyn_ssn = self.session(self.req_conn)
        self.dyn = self.dyn_ssn.receiver("rr-replies-dynamic")
        self.dyn.source.dynamic = True
        self._new_link(self.dyn, "receiver", None)
        self.lrec(self.dyn).extra["dynamic"] = True
        self.dyn.open()
        self.req_ssn = self.session(self.req_conn)
        self.named = self.receiver(self.req_ssn, "rr-replies-named", RR_REPLIES)
        self.grant(self.named, self.N)
        self.grant(self.dyn, self.N)
        self.dyn_refused = None
        self.attached: set = set()
        self.dyn_addr = None
        self.svc_conn = self.svc_in = self.req_snd = None
        self.replies_to_send: dict[str, list] = {}
        self.reply_senders: dict[str, Any] = {}
        self.sent = 0
        self.replies = 0
        self.closing = False
        self.after(8.0, self._close)  # if the one unanswered request is the only thing left

    def on_link_remote_open(self, event) -> None:
        super().on_link_remote_open(event)
        link = event.link
        if link == self.dyn:
            self.dyn_addr = link.remote_source.address
            self.lrec(link).address = self.dyn_addr
        if link in (self.named, self.dyn):
            self.attached.add(link.name)
            self._maybe_service()
        elif link == self.svc_in:
            self.req_snd = self.sender(self.req_ssn, "rr-requests", RR_SERVICE)

    def on_session_remote_close(self, event) -> None:
        super().on_session_remote_close(event)
        if event.session == self.dyn_ssn:
            self.dyn_refused = base._cond(event.session.remote_condition)
            self.mark("dynamic reply node refused: the broker ended its session", error=self.dyn_refused)
            self.notes.append(f"the broker refused the dynamic reply node: {self.dyn_refused}; "
                              "every request has reply-to the named queue")
            self._maybe_service()

    def _maybe_service(self) -> None:
        ready = self.named.name in self.attached and (self.dyn.name in self.attached or self.dyn_refused)
        if ready and self.svc_conn is None:
            self.svc_conn = self.connect("amqp-dissect-rr-service")
            self.svc_ssn = self.session(self.svc_conn)
            self.svc_in = self.receiver(self.svc_ssn, "rr-service-in", RR_SERVICE)
            self.grant(self.svc_in, self.N)

    def on_sendable(self, event) -> None:
        link = event.link
        if link == self.req_snd:
            while link.credit and self.sent < self.N:
                self.sent += 1
                i = self.sent
                reply_to = RR_REPLIES if (i % 2 or not self.dyn_addr) else self.dyn_addr
                msg = Message(id=rr_id(i), body=f"request {i:02d}", reply_to=reply_to, address=RR_SERVICE,
                              subject="rr.request", properties={"op": "echo", "n": i})
                self.send_msg(link, msg)
        else:
            for addr, snd in self.reply_senders.items():
                if snd == link:
                    pend = self.replies_to_send[addr]
                    while link.credit and pend:
                        self.send_msg(link, pend.pop(0))

    def message(self, event, msg, dlv) -> None:
        link = dlv.link
        self.settle_receiver(dlv, "accepted")
        if link == self.svc_in:
            n = msg.properties.get("n")
            if n == self.UNANSWERED:
                self.notes.append(f"request {n} (message-id {typed_id(msg.id)}) was accepted by the service "
                                  "and deliberately never answered")
                dlv._dissect_rec["answered"] = False
                return
            dlv._dissect_rec["answered"] = True
            reply = Message(id=f"reply-{n:02d}", correlation_id=msg.id, address=msg.reply_to, body=f"reply {n:02d}",
                            subject="rr.reply", properties={"n": n})
            addr = msg.reply_to
            self.replies_to_send.setdefault(addr, []).append(reply)
            if addr not in self.reply_senders:
                name = "rr-service-reply-named" if addr == RR_REPLIES else "rr-service-reply-dynamic"
                self.reply_senders[addr] = self.sender(self.svc_ssn, name, addr)
            else:
                snd = self.reply_senders[addr]
                pend = self.replies_to_send[addr]
                while snd.credit and pend:
                    self.send_msg(snd, pend.pop(0))
        else:
            self.replies += 1
            if self.replies == self.N - 1:
                self.after(0.5, self._close)

    def _close(self) -> None:
        if self.closing:
            return
        self.closing = True
        for c in (self.svc_conn, self.req_conn):
            if c is not None:
                self.close_conn(c)


# --------------------------------------------------------------------------
# 3. redeliveries: released several times, modified
# --------------------------------------------------------------------------

REDELIVER_Q = tq("redeliveries")
REDELIVER_PLAN = {
    # message-id -> the client's settlement of each delivery of it, in order; then accepted
    "redeliver-A": [("released",), ("released",), ("released",)],
    "redeliver-B": [("modified", True, False), ("modified", False, False)],
    "redeliver-C": [("modified", True, True)],
}


class Redeliveries(MsgClient):
    def __init__(self, queue_addr: str) -> None:
        super().__init__()
        self.qaddr = queue_addr

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-redeliveries")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "redeliver-sender", self.qaddr)
        self.sent = self.settled = 0
        self.seen: dict[str, int] = {}
        self.rcv = None
        self.rcv_n = 0
        self.phase = "send"
        self.last_activity = time.monotonic()

    def on_sendable(self, event) -> None:
        if event.link != self.snd or self.phase != "send":
            return
        while self.snd.credit and self.sent < len(REDELIVER_PLAN):
            mid = list(REDELIVER_PLAN)[self.sent]
            self.sent += 1
            self.send_msg(self.snd, Message(id=mid, body=f"{mid} body", durable=True,
                                            properties={"plan": json.dumps(REDELIVER_PLAN[mid])}))

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == len(REDELIVER_PLAN):
                self.phase = "receive"
                self.close_link(self.snd)
                self.new_receiver()

    def new_receiver(self) -> None:
        self.rcv_n += 1
        if self.rcv_n > 1:
            self.ssn = self.session(self.conn)
        self.rcv = self.receiver(self.ssn, f"redeliver-receiver-{self.rcv_n}", self.qaddr)
        self.grant(self.rcv, 1)
        self._watch()

    def _watch(self) -> None:
        # no delivery for 1.5 s after our last grant: the queue has nothing more for us
        t0 = self.last_activity = time.monotonic()

        def check(t0=t0):
            if self.phase == "receive" and self.last_activity == t0:
                self.mark("no more deliveries", receiver=self.rcv.name)
                self._close()
        self.after(1.5, check)

    def message(self, event, msg, dlv) -> None:
        mid = msg.id
        k = self.seen.get(mid, 0)
        self.seen[mid] = k + 1
        plan = REDELIVER_PLAN.get(mid, [])
        step = plan[k] if k < len(plan) else ("accepted",)
        if step[0] == "modified":
            self.settle_receiver(dlv, "modified", failed=step[1], undeliverable=step[2])
        else:
            self.settle_receiver(dlv, step[0])
        dlv._dissect_rec["delivery_of_message"] = k + 1
        if self.rcv.state & self.rcv.LOCAL_ACTIVE:
            self.grant(self.rcv, 1)
            self._watch()

    def on_session_remote_close(self, event) -> None:
        super().on_session_remote_close(event)
        self.mark("broker ended the session", error=base._cond(event.session.remote_condition))
        # the broker refused an outcome by ending the session: go on in a new session
        if self.phase == "receive" and self.rcv_n < 6:
            self.after(0.2, self.new_receiver)

    def _close(self) -> None:
        if self.phase == "closing":
            return
        self.phase = "closing"
        if self.rcv is not None and self.rcv.state & self.rcv.LOCAL_ACTIVE:
            self.close_link(self.rcv)
        self.after(0.3, lambda: self.close_conn(self.conn))


# --------------------------------------------------------------------------
# 4. idle-timeout expiry
# --------------------------------------------------------------------------


class IdleExpiry(MsgClient):
    """We ask for idle-time-out 1000 ms (proton heartbeat 2 s); the broker is paused (SIGSTOP) for
    PAUSE seconds, so it sends nothing; proton's local idle timeout fires after 2 s of silence and
    it closes the connection with amqp:resource-limit-exceeded.  Then SIGCONT."""
    HEARTBEAT = 2.0
    PAUSE = 4.0

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-idle-expiry", heartbeat=self.HEARTBEAT)
        self.ssn = self.session(self.conn)
        self.rcv = self.receiver(self.ssn, "idle-receiver", f"/queue/{tq('idle_expiry')}")
        self.grant(self.rcv, 1)
        self.paused = False
        self.resumed = False
        self.closed = False

    def on_link_opened(self, event) -> None:
        if event.link == self.rcv:
            self.after(1.5, self._pause)

    def _pause(self) -> None:
        pid = self.broker.beam_pid
        os.kill(pid, signal.SIGSTOP)
        self.paused = True
        self.mark("broker paused (SIGSTOP)", pid=pid)
        self.after(self.PAUSE, self._resume)

    def _resume(self) -> None:
        if self.paused and not self.resumed:
            os.kill(self.broker.beam_pid, signal.SIGCONT)
            self.resumed = True
            self.mark("broker resumed (SIGCONT)")
        # give the broker a moment to read what we sent and answer, then end
        self.after(1.5, self._end)

    def _end(self) -> None:
        if not self.closed and not (self.conn.state & self.conn.LOCAL_CLOSED):
            self.close_conn(self.conn)
        self.after(0.5, self.finish)

    def on_transport_error(self, event) -> None:
        super().on_transport_error(event)
        c = event.transport.condition
        self.mark("transport error", condition=base._cond(c))
        ex = self.conn_extra[0]
        ex["closed_by"] = "client"
        ex["close_reason"] = base._cond(c)

    def connection_done(self, conn, rec) -> None:
        self.closed = True  # finish() comes after the broker was resumed

    def resume_now(self) -> None:
        """Safety net (also on error): never leave the broker paused."""
        if self.paused and not self.resumed:
            os.kill(self.broker.beam_pid, signal.SIGCONT)
            self.resumed = True


# --------------------------------------------------------------------------
# 5. forced detach / forced close
# --------------------------------------------------------------------------

FORCED_Q = tq("forced")
FORBIDDEN_Q = tq("forbidden")
FORCED_VHOST = "amqpdissect-forced"
LIMITED_USER = ("amqpdissect-limited", "made-up-password")


def forced_setup(broker: base.Broker) -> None:
    """A user that may only touch amqpdissect.allowed.* and a vhost that the scenario deletes."""
    broker.ctl("add_vhost", FORCED_VHOST, check=False)
    broker.ctl("set_permissions", "-p", FORCED_VHOST, "guest", ".*", ".*", ".*", check=False)
    broker.ctl("add_user", *LIMITED_USER, check=False)
    broker.ctl("set_permissions", LIMITED_USER[0], r"^amqpdissect\.allowed.*", r"^amqpdissect\.allowed.*",
               r"^amqpdissect\.allowed.*", check=False)


def forced_teardown(broker: base.Broker) -> None:
    broker.ctl("delete_user", LIMITED_USER[0], check=False)
    broker.ctl("delete_vhost", FORCED_VHOST, check=False)


class Forced(MsgClient):
    """Three connections one after the other, each ended by the broker's side."""

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-forced-detach")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "forced-sender", f"/queue/{FORCED_Q}")
        self.sent = self.settled = 0
        self.rcv = None
        self.step = "send"
        self.conn1 = self.conn2 = None

    def on_sendable(self, event) -> None:
        if event.link == self.snd and self.step == "send":
            while self.snd.credit and self.sent < 3:
                self.sent += 1
                self.send_msg(self.snd, Message(id=f"forced-{self.sent}", body=f"forced {self.sent}"))
        elif event.link == getattr(self, "fsnd", None) and self.step == "forbidden":
            self.step = "forbidden-sent"
            self.send_msg(self.fsnd, Message(id="forbidden-1", body="to a queue this user may not write"))

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == 3:
                self.step = "consume"
                self.close_link(self.snd)
                self.rcv = self.receiver(self.ssn, "forced-consumer", f"/amq/queue/{FORCED_Q}")
                self.grant(self.rcv, 1)

    def message(self, event, msg, dlv) -> None:
        self.settle_receiver(dlv, "accepted")
        if self.step == "consume":
            self.step = "delete-queue"
            self.after(0.3, lambda: self.run_async(self.ctl_argv("delete_queue", FORCED_Q), self._deleted))

    def _deleted(self, r) -> None:
        self.mark("queue deleted by rabbitmqctl", queue=FORCED_Q, rc=r.returncode)
        self.after(1.5, self._missing_attach)

    def _missing_attach(self) -> None:
        self.step = "missing"
        self.ssn2 = self.session(self.conn)
        self.miss = self.receiver(self.ssn2, "forced-missing-node", f"/amq/queue/{FORCED_Q}")
        self.grant(self.miss, 1)
        self.after(3.0, lambda: self.conn.state & self.conn.LOCAL_ACTIVE and self.close_conn(self.conn))

    def _unauthorized(self) -> None:
        self.step = "forbidden"
        self.conn1 = self.connect("amqp-dissect-forced-unauthorized", user=LIMITED_USER[0], password=LIMITED_USER[1])
        s = self.session(self.conn1)
        self.fsnd = self.sender(s, "forbidden-sender", f"/queue/{FORBIDDEN_Q}")
        self.after(3.0, lambda: self.conn1.state & self.conn1.LOCAL_ACTIVE and self.close_conn(self.conn1))

    def _vhost(self) -> None:
        self.step = "vhost"
        self.conn2 = self.connect("amqp-dissect-forced-vhost", virtual_host=f"vhost:{FORCED_VHOST}")
        s = self.session(self.conn2)
        self.vrcv = self.receiver(s, "forced-vhost-receiver", f"/queue/{tq('forced_vhost')}")
        self.grant(self.vrcv, 1)
        self.after(5.0, lambda: self.conn2.state & self.conn2.LOCAL_ACTIVE and self.close_conn(self.conn2))

    def on_link_remote_open(self, event) -> None:
        super().on_link_remote_open(event)
        if event.link == getattr(self, "vrcv", None):
            self.after(0.3, lambda: self.run_async(self.ctl_argv("delete_vhost", FORCED_VHOST),
                                                   lambda r: self.mark("vhost deleted by rabbitmqctl",
                                                                       vhost=FORCED_VHOST, rc=r.returncode)))

    def on_session_remote_close(self, event) -> None:
        super().on_session_remote_close(event)
        self.mark("broker ended a session", error=base._cond(event.session.remote_condition))

    def on_transport_error(self, event) -> None:
        super().on_transport_error(event)
        self.mark("transport error", condition=base._cond(event.transport.condition))

    def connection_done(self, conn, rec) -> None:
        ex = self.conn_extra.get(rec.index)
        if ex is not None and ex["closed_by"] is None:
            ex["closed_by"] = "broker (socket)" if rec.transport_error else "broker"
        if rec.index == 0:
            self.after(0.3, self._unauthorized)
        elif rec.index == 1:
            self.after(0.3, self._vhost)
        else:
            self.finish()


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------


@dataclass
class MScenario:
    name: str
    description: str
    make: Callable[[], MsgClient]
    queues: list[str]
    needs_own_broker: bool = False
    notes: list[str] = field(default_factory=list)
    runner: Callable | None = None  # a scenario not driven by proton (another stack): its own runner
    setup: Callable | None = None  # broker preparation (rabbitmqctl), before the capture starts
    teardown: Callable | None = None


def build_truth(sc: MScenario, client: MsgClient, after, tools: dict) -> dict:
    bsc = base.Scenario(sc.name, sc.description, lambda: None, sc.queues, notes=sc.notes)
    t = base.build_truth(bsc, client, after, tools)
    t["schema"] = SCHEMA
    t["client_stack"] = "python-qpid-proton " + tools.get("python_qpid_proton", "?")
    for c in t["connections"]:
        c.update(client.conn_extra.get(c["index"], {}))
    t["timeline"] = client.events
    return t


def run_proton(sc: MScenario, broker: base.Broker, out: Path, workdir: Path, tools: dict) -> dict | None:
    base.log(f"== scenario {sc.name}")
    if sc.needs_own_broker and not broker.started:
        base.log(f"  skipped: {sc.name} pauses the broker, and the running broker is not ours")
        return None
    broker.delete_queues(sc.queues)
    if sc.setup:
        sc.setup(broker)
    cap = base.Capture(workdir, sc.name)
    cap.start()
    client = sc.make()
    client.broker = broker
    try:
        base.Container(client).run()
    finally:
        if isinstance(client, IdleExpiry):
            client.resume_now()
        time.sleep(base.SETTLE_DELAY + 1.0)
        cap.stop()
        if sc.teardown:
            sc.teardown(broker)
    if client.failed:
        raise RuntimeError(f"scenario {sc.name}: {client.failed}")
    after = broker.list_queues()
    if after is not None:
        after = {k: v for k, v in sorted(after.items()) if k in sc.queues}
    truth = build_truth(sc, client, after, tools)
    return write(out, sc.name, cap, truth)


def write(out: Path, name: str, cap: base.Capture, truth: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cap.pcap, out / f"{name}.pcap")
    (out / f"{name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    size = (out / f"{name}.pcap").stat().st_size
    base.log(f"  wrote {name}.pcap ({size} bytes) and {name}.truth.json")
    return truth


SCENARIOS: list[MScenario] = [
    MScenario(
        "topic_fanout",
        f"One producer and three consumers, each on its own connection, on RabbitMQ's topic address "
        f"{FANOUT_ADDR} (amq.topic, routing key {FANOUT_KEY}; each consumer gets its own temporary queue "
        "bound to it). Consumers grant 20 credits and accept everything. Once all three are attached the "
        "producer sends 20 messages with amqp-value string bodies, subjects, application properties "
        "(seq, id_kind, even) and, on 16 of them, a message annotation x-opt-amqpdissect-seq. Message ids: "
        "string, ulong, uuid and binary in turn, and messages 6, 13 and 20 without a message-id. "
        "Everything detaches, ends and closes.",
        lambda: TopicFanout(), []),
    MScenario(
        "request_reply",
        f"A requester connection with a named reply queue ({RR_REPLIES}) and a dynamic reply node "
        f"(source dynamic=true, the broker names it), and a service connection consuming {RR_SERVICE}. "
        "The requester sends 10 requests (message ids: string, ulong, uuid, binary), odd ones with reply-to "
        "the named queue, even ones with reply-to the dynamic node. The service accepts each and answers with "
        "message-id reply-NN and correlation-id = the request's message-id (same type) on a sender per "
        "reply-to address; request 7 is accepted but never answered. The requester accepts the 9 replies, "
        "then both connections close.",
        lambda: RequestReply(), [tq("rr.service"), tq("rr.replies")]),
    MScenario(
        "redeliveries",
        f"A sender puts 3 durable messages (redeliver-A/B/C) on /queue/{REDELIVER_Q}. A receiver with credit 1 "
        "(one more after each settlement) releases A three times and then accepts it; settles B as "
        "modified(delivery-failed=true), then modified(delivery-failed=false), then accepts; and C as "
        "modified(delivery-failed=true, undeliverable-here=true), then accepts. RabbitMQ 3.10 refuses "
        "'modified' by ending the session (amqp:invalid-field): the client then begins a new session with a "
        "new receiver (redeliver-receiver-N) and goes on; each delivery records the header "
        "(first-acquirer, delivery-count) as the client saw it.",
        lambda: Redeliveries(f"/queue/{REDELIVER_Q}"), [REDELIVER_Q]),
    MScenario(
        "idle_timeout",
        "A connection with idle-time-out 1000 ms in our open (proton heartbeat 2 s) and a receiver attached. "
        f"1.5 s after the attach the broker process is paused (SIGSTOP of the beam.smp we started) for "
        f"{IdleExpiry.PAUSE:.0f} s, so it sends nothing, not even empty frames; proton's idle timer (2 s without "
        "a frame) fires and the client closes the connection with amqp:resource-limit-exceeded "
        "'local-idle-timeout expired' and drops the socket. Then the broker is resumed (SIGCONT).",
        lambda: IdleExpiry(), [tq("idle_expiry")], needs_own_broker=True),
    MScenario(
        "forced",
        "Three connections, one after the other, each ended from the broker's side. Connection 0 "
        f"('amqp-dissect-forced-detach'): a sender puts 3 messages on /queue/{FORCED_Q}; receiver "
        f"'forced-consumer' from /amq/queue/{FORCED_Q} takes one (credit 1) and then the queue is deleted under "
        "it (rabbitmqctl delete_queue); 1.5 s later a new session attaches 'forced-missing-node' to the deleted "
        f"queue. Connection 1 ('amqp-dissect-forced-unauthorized', user {LIMITED_USER[0]}, allowed only "
        f"amqpdissect.allowed.*) attaches a sender to /queue/{FORBIDDEN_Q} and sends one message. Connection 2 "
        f"('amqp-dissect-forced-vhost', open hostname vhost:{FORCED_VHOST}) attaches a receiver, and the vhost "
        "is deleted under it (rabbitmqctl delete_vhost). What the broker sent (detach/end/close errors, or a "
        "socket closed without a close frame) is recorded as each client saw it.",
        lambda: Forced(), [FORCED_Q, FORBIDDEN_Q], setup=forced_setup, teardown=forced_teardown),
]


def main(argv: list[str] | None = None, broker: base.Broker | None = None, more: list | None = None) -> int:
    """Make the captures; ``more``: the other stacks' scenarios (other_stacks.OTHER_SCENARIOS:
    samples/generate.py --messages gives them; this file run alone makes the proton ones)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE), help="output directory (default: samples/messages/)")
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    every = SCENARIOS + list(more or ())
    if args.list:
        for sc in every:
            print(f"{sc.name}: {sc.description}")
        return 0
    names = {sc.name for sc in every}
    if args.only and set(args.only) - names:
        ap.error(f"unknown scenario(s) {sorted(set(args.only) - names)}; known: {sorted(names)}")
    selected = [sc for sc in every if not args.only or sc.name in args.only]
    base.check_requirements()
    out = Path(args.out)
    tools = base.tool_versions()
    workdir = Path(tempfile.mkdtemp(prefix="amqpdissect-capture-"))
    workdir.chmod(0o777)
    own = broker is None
    broker = broker or base.Broker()
    try:
        if own:
            broker.start()
        for sc in selected:
            if sc.runner is not None:
                sc.runner(sc, broker, out, workdir, tools)
            else:
                run_proton(sc, broker, out, workdir, tools)
    finally:
        if own:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    sys.exit(main())
