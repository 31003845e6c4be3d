"""The messages table: one row per message, matched across connections.

Sans-IO: :class:`MessageMatcher` is fed delivery rows (dicts with the deliveries table's columns,
the message fields among them: ``message_id``, ``message_id_type``, ``bare_digest``,
``header_delivery_count``, ``message_annotations``, ``application_properties``) in any order,
keeps a small tuple per delivery (ids, times, packet numbers: never a payload), then
:meth:`MessageMatcher.rows` takes the links and connections tables' rows and gives one row per
message (the registry's ``messages`` columns).

The rules (docs/definitions.md, "Messages"):

* a message's **key** is its message-id with its AMQP type (a ulong 5 and a string "5" are two
  messages), or, without a message-id, the digest of its bare message (``matched_by``
  "digest"); a delivery with neither (its message not read: aborted, incomplete, not decoded)
  is not in the table (counted in :attr:`MessageMatcher.unkeyed`);
* **who is producer, who is consumer** comes from the side sending the transfers: a client
  sending to the server (the broker) publishes, the server sending to a client delivers to a
  consumer.  A delivery on a connection whose client is itself a broker (its container-id is the
  server's container-id of another connection of the capture) or on a link whose sending side is
  not known is neither: it is counted in ``unknown_role`` with the evidence in ``role_evidence``;
* the **producer's delivery** is the earliest publish of the key; **consumers** are the distinct
  consumer links (connection, link index) that received it;
* **residence** (broker residence time): a consumer's first transfer of the message minus the
  producer's first transfer (the first consumer's, and the largest); **end to end**: a consumer's
  outcome (the terminal outcome of its last delivery of the message) minus the producer's first
  transfer; durations are differences of integer nanoseconds, divided once; a duration whose two
  packets lie on either side of a step back of the capture clock (:mod:`amqp_dissect.clock`:
  the matcher's ``clock``) is unknown (null, the row's ``note`` says so), and "earliest" and
  "latest" go by the capture's order across a step (its epoch first, then the time);
* **redeliveries**: by the header's delivery-count (the largest a consumer delivery carried) and
  by repeats (deliveries of the message to a consumer link that already had it; a key matched by
  digest allows as many as it was published);
* the **state**: "dead-lettered / expired" when a broker annotation or property says so (which one
  in ``state_evidence``), else "delivered, publish not in the capture" (consumers, no publish),
  "published, never delivered in the capture" (a publish, no consumer), "delivered twice"
  (a repeat, a delivery-count above 0, or a delivery after a consumer released or modified it),
  "delivered", or "unknown" (only deliveries of unknown role).

Bounded: at most :data:`MAX_MESSAGES` keys (more are counted in ``dropped``), at most
:data:`MAX_DELIVERIES` deliveries kept per key (more are counted in the row's ``untracked``), and
the ``consumer_deliveries`` JSON lists at most :data:`MAX_LISTED` consumers.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import NamedTuple

from amqp_dissect.clock import CLOCK_STEP
from amqp_dissect.times import NS, seconds

__all__ = ["MessageMatcher", "MessageDelivery", "message_rows", "STATES", "MAX_MESSAGES", "MAX_DELIVERIES", "MAX_LISTED",
           "deadletter_evidence", "CLOCK_STEP_NOTE"]

PUBLISHED, PUBLISH_MISSING, TWICE, DEAD, DELIVERED, UNKNOWN = (
    "published, never delivered in the capture", "delivered, publish not in the capture", "delivered twice",
    "dead-lettered / expired", "delivered", "unknown")
STATES = (DELIVERED, TWICE, PUBLISHED, PUBLISH_MISSING, DEAD, UNKNOWN)

#: message keys kept; more are counted in ``dropped``
MAX_MESSAGES = 1_000_000
#: deliveries kept per key (a hostile capture repeating one id); more are counted in ``untracked``
MAX_DELIVERIES = 64
#: consumers listed in ``consumer_deliveries`` (the count is in ``consumers``)
MAX_LISTED = 16
#: packet numbers listed in ``packets``
MAX_PACKETS = 32

# the broker annotations / properties that say a message was dead-lettered or expired:
# key (lower case) -> (what it says, where it is); the value is quoted in the evidence
#: the row's note when a residence or end-to-end time spans a step of the capture clock
CLOCK_STEP_NOTE = "residence / end to end " + CLOCK_STEP

_DEAD_KEYS = {
    # Azure Service Bus
    "x-opt-deadletter-reason": "dead-lettered",
    "x-opt-deadletter-source": "dead-lettered",
    "deadletterreason": "dead-lettered",
    # RabbitMQ (its AMQP 1.0 annotations of dead-lettering; the reason may say expired)
    "x-first-death-reason": "dead-lettered",
    "x-last-death-reason": "dead-lettered",
    "x-opt-deaths": "dead-lettered",
    "x-death": "dead-lettered",
    # ActiveMQ Artemis (expiry moves a message to the expiry address with these)
    "_amq_actual_expiry": "expired",
    "_amq_orig_reason": "expired",
}


class MessageDelivery(NamedTuple):
    """What the matcher keeps of one delivery of a message (one per delivery: a tuple, small)."""

    connection: object
    link: object  # the link's name
    link_index: object
    address: object
    sender_side: object  # "client", "server" or None (the deliveries table's)
    first_time: object  # ns
    first_packet: object
    outcome: object  # its terminal outcome, None: none
    outcome_time: object
    outcome_packet: object
    delivery_count: object  # the header's delivery-count (an int), None: absent or not an int
    dead: object  # the broker's evidence that the message was dead-lettered or expired, None: none


_new_delivery = tuple.__new__  # (a MessageDelivery per delivery: made without the keyword-checking __new__)


class _Roles(NamedTuple):
    """A message's deliveries by the role of their link (:meth:`MessageMatcher._roles_of`)."""

    producers: list
    consumers: list
    unknown: list
    why_unknown: list  # why each unknown one is


class _Times(NamedTuple):
    """A message's times (:meth:`MessageMatcher._times`), seconds; None: unknown or none."""

    first_consumer: object  # ns, the first consumer's transfer
    residence: object
    residence_max: object
    end_to_end: object
    end_to_end_max: object
    notes: list


def json_map(value) -> dict:
    """A JSON cell (a dict, or JSON text) as a dict; {} when absent or not a map (the messages and
    requests tables read the annotations and application properties with it)."""
    if value is None:
        return {}
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _short(value, limit: int = 60) -> str:
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def deadletter_evidence(row: dict) -> str | None:
    """The first broker annotation / property of a delivery saying its message was dead-lettered or
    expired, as ``"message annotation x-first-death-reason = expired: expired"``; None when none."""
    for where, cell in (("message annotation", row.get("message_annotations")),
                        ("application property", row.get("application_properties"))):
        m = json_map(cell)
        if not m:
            continue
        for key, value in m.items():
            what = _DEAD_KEYS.get(str(key).lower())
            if what is None:
                continue
            text = _short(value)
            if what == "dead-lettered" and "expire" in text.lower():
                what = "expired"
            return f"{what}: {where} {key} = {text}"
    return None


def _iso(ns) -> str | None:
    if ns is None:
        return None
    secs, frac = divmod(ns, NS)
    try:
        day = datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return str(ns)
    return f"{day}.{frac:09d}Z" if frac % 1000 else f"{day}.{frac // 1000:06d}Z"


def _diff(a, b, stepped: bool = False):
    # (negative: times out of order; ``stepped``: a step back of the capture clock between them: unknown)
    return None if a is None or b is None or stepped or a < b else seconds(a - b)


def _no_epoch(packet) -> int:
    return 0


class _Message:
    __slots__ = ("first", "deliveries", "untracked")

    def __init__(self):
        self.first = None  # earliest first_time of its deliveries
        self.deliveries: list = []
        self.untracked = 0


class MessageMatcher:
    """Delivery rows in (:meth:`add`, any order), message rows out (:meth:`rows`)."""

    def __init__(self, max_messages: int = MAX_MESSAGES, max_deliveries: int = MAX_DELIVERIES):
        self.max_messages = max_messages
        self.max_deliveries = max_deliveries
        self.messages: dict = {}
        self.unkeyed = 0  # deliveries without message-id nor digest (message not read)
        self.dropped = 0  # deliveries of keys past max_messages
        self.clock = None  # the capture's clock steps (amqp_dissect.clock.ClockWatch), or None

    def add(self, row: dict) -> None:
        mid = row.get("message_id")
        if mid is not None:
            key = ("message-id", row.get("message_id_type"), mid)
        else:
            digest = row.get("bare_digest")
            if digest is None:
                self.unkeyed += 1
                return
            key = ("digest", None, digest)
        m = self.messages.get(key)
        if m is None:
            if len(self.messages) >= self.max_messages:
                self.dropped += 1
                return
            m = self.messages[key] = _Message()
        first = row.get("first_time")
        if first is not None and (m.first is None or first < m.first):
            m.first = first
        if len(m.deliveries) >= self.max_deliveries:
            m.untracked += 1
            return
        dc = row.get("header_delivery_count")
        m.deliveries.append(_new_delivery(MessageDelivery, (
            row.get("connection"), row.get("link"), row.get("link_index"), row.get("address"),
            row.get("sender_side"), first, row.get("first_packet"), row.get("outcome") or None,
            row.get("outcome_time"), row.get("outcome_packet"),
            dc if isinstance(dc, int) and not isinstance(dc, bool) else None, deadletter_evidence(row))))

    def part(self) -> dict:
        """What this matcher holds, picklable (a ``-j`` worker's share): see :meth:`merge`."""
        return {"messages": [(k, m.first, m.deliveries, m.untracked) for k, m in self.messages.items()],
                "unkeyed": self.unkeyed, "dropped": self.dropped}

    def merge(self, part: dict) -> None:
        """Add another matcher's :meth:`part` (the bounds kept: keys past ``max_messages`` count
        their deliveries in ``dropped``, deliveries past ``max_deliveries`` in ``untracked``)."""
        self.unkeyed += part["unkeyed"]
        self.dropped += part["dropped"]
        for key, first, deliveries, untracked in part["messages"]:
            m = self.messages.get(key)
            if m is None:
                if len(self.messages) >= self.max_messages:
                    self.dropped += len(deliveries) + untracked
                    continue
                m = self.messages[key] = _Message()
            if first is not None and (m.first is None or first < m.first):
                m.first = first
            room = max(0, self.max_deliveries - len(m.deliveries))
            m.deliveries.extend(deliveries[:room])
            m.untracked += untracked + max(0, len(deliveries) - room)

    def add_all(self, rows) -> "MessageMatcher":
        for r in rows:
            self.add(r)
        return self

    # ------------------------------------------------------------------ roles

    @staticmethod
    def _roles(link_rows, connection_rows) -> tuple[dict, dict]:
        """((connection, link_index) -> sender side from the links table, connection -> evidence
        that its client is a broker)."""
        sides = {}
        for lk in link_rows or ():
            side = lk.get("sender_side")
            if side is None and lk.get("role") in ("sender", "receiver"):
                side = "client" if lk["role"] == "sender" else "server"
            sides[(lk.get("connection"), lk.get("link_index"))] = side
        servers: dict = {}
        for c in connection_rows or ():
            cid = c.get("container_id_server")
            if cid:
                servers.setdefault(cid, c.get("connection"))
        brokers = {}
        for c in connection_rows or ():
            cid = c.get("container_id_client")
            other = servers.get(cid) if cid else None
            if other is not None and other != c.get("connection"):
                brokers[c.get("connection")] = (f"connection {c.get('connection')}: its client (container-id "
                                                f"{cid!r}) is the server of connection {other}: broker to broker")
        return sides, brokers

    # ------------------------------------------------------------------ rows

    def rows(self, link_rows=(), connection_rows=()) -> list[dict]:
        sides, brokers = self._roles(link_rows, connection_rows)
        clock = self.clock
        if clock is not None and clock.steps:  # (times compare within an epoch of the capture clock)
            self._epoch, self._stepped = clock.epoch, clock.spans
            for m in self.messages.values():
                m.deliveries.sort(key=self._time_key)
                first = next((d for d in m.deliveries if d.first_time is not None), None)
                m.first = first.first_time if first is not None else m.first
        else:
            self._epoch, self._stepped = _no_epoch, None
        order = sorted(self.messages.items(), key=self._message_order)
        return [self._row(key, m, sides, brokers) for key, m in order]

    def _time_key(self, d):
        return (d.first_time is None, self._epoch(d.first_packet), d.first_time or 0, d.first_packet or 0)

    def _outcome_key(self, d):
        return self._epoch(d.outcome_packet), d.outcome_time

    def _message_order(self, kv):
        """Rows in time order: the message's first transfer (its epoch, its time), its packet, then the key."""
        (how, typ, ident), m = kv
        packets = [d.first_packet for d in m.deliveries if d.first_packet is not None]
        first = min(packets) if packets else 0
        return (m.first is None, self._epoch(first) if packets else 0, m.first or 0, first, how, typ or "",
                str(ident))

    def _span(self, a: tuple | None, b: tuple | None, across: list):
        """``a`` minus ``b`` (each a (time, packet) pair or None) in seconds; None when unknown
        (a step of the capture clock between their packets: one more entry in ``across``)."""
        if a is None or b is None:
            return None
        stepped = self._stepped is not None and self._stepped(b[1], a[1])
        if stepped:
            across.append(a)
        return _diff(a[0], b[0], stepped)

    def _row(self, key, m: _Message, sides: dict, brokers: dict) -> dict:
        how, typ, ident = key
        m.deliveries.sort(key=self._time_key)
        roles = _roles_of(m.deliveries, sides, brokers)
        producers, consumers = roles.producers, roles.consumers
        tkey = self._time_key
        producers.sort(key=tkey)
        consumers.sort(key=tkey)
        prod = producers[0] if producers else None
        groups = _consumer_links(consumers)
        allowed = max(1, len(producers)) if how == "digest" else 1
        repeats = sum(max(0, g[0] - allowed) for g in groups.values())
        dcs = [d.delivery_count for d in consumers if d.delivery_count is not None]
        max_dc = max(dcs) if dcs else None
        times = self._times(prod, consumers, groups)
        notes = times.notes + self._publish_notes(m, how, len(producers))
        after_release = self._after_release(consumers)
        state, evidence = _state(roles, _twice_why(repeats, max_dc, after_release))
        everything = sorted(m.deliveries, key=tkey)
        packets = [d.first_packet for d in everything if d.first_packet is not None]
        return {
            **_key_columns(how, typ, ident),
            "state": state,
            "state_evidence": evidence,
            "address": _message_address(prod, consumers, everything),
            "first_time": m.first,
            "first_packet": min(packets) if packets else None,
            **_producer_columns(prod),
            "publishes": len(producers),
            "consumers": len(groups),
            "deliveries": len(consumers),
            "consumer_deliveries": _listed_consumers(groups),
            "first_consumer_time": times.first_consumer,
            "residence": times.residence,
            "residence_max": times.residence_max,
            "end_to_end": times.end_to_end,
            "end_to_end_max": times.end_to_end_max,
            "redeliveries_by_count": max_dc,
            "redeliveries_by_repeat": repeats,
            "released_or_modified": sum(1 for d in consumers if d.outcome in _RELEASED),
            "unknown_role": len(roles.unknown),
            "role_evidence": "; ".join(dict.fromkeys(roles.why_unknown)) or None,
            "untracked": m.untracked,
            "packets": packets[:MAX_PACKETS] + (["..."] if len(packets) > MAX_PACKETS else []),
            "note": "; ".join(notes) or None,
        }

    def _after_release(self, consumers: list) -> int:
        """Consumer deliveries after one that a consumer released or modified."""
        after_release = 0
        seen_release = None  # (epoch, time) of the earliest released / modified outcome
        epoch = self._epoch
        for d in consumers:
            if seen_release is not None and (epoch(d.first_packet), d.first_time or 0) >= seen_release:
                after_release += 1
            if d.outcome in _RELEASED and d.outcome_time is not None:
                k = self._outcome_key(d)
                seen_release = k if seen_release is None else min(seen_release, k)
        return after_release

    def _times(self, prod, consumers: list, groups: dict) -> _Times:
        """Residence (publish to each consumer link's first transfer) and end to end (publish to a
        consumer's final outcome), first and longest, and the notes on them."""
        tkey = self._time_key
        firsts = sorted((g[1] for g in groups.values() if g[1].first_time is not None), key=tkey)
        first_consumer = firsts[0].first_time if firsts else None
        if prod is None or prod.first_time is None or not firsts:
            return _Times(first_consumer, None, None, None, None, [])
        notes = []
        p = (prod.first_time, prod.first_packet)
        across: list = []
        res_first = self._span((first_consumer, firsts[0].first_packet), p, across)
        res_max = self._span((firsts[-1].first_time, firsts[-1].first_packet), p, across)
        if (self._epoch(firsts[0].first_packet), first_consumer) < (self._epoch(prod.first_packet), prod.first_time):
            notes.append("a consumer's transfer came before the publish (the id was used again?)")
        first_key = min(groups, key=lambda k: tkey(groups[k][1]))
        fo = _final_outcome(consumers, first_key)
        e2e_first = self._span(_outcome_at(fo), p, across)
        outs = [d for d in (_final_outcome(consumers, k) for k in groups) if d is not None]
        last = max(outs, key=self._outcome_key) if outs else None
        e2e_max = self._span(_outcome_at(last), p, across)
        if across:
            notes.append(CLOCK_STEP_NOTE)
        return _Times(first_consumer, res_first, res_max, e2e_first, e2e_max, notes)

    def _publish_notes(self, m: _Message, how: str, publishes: int) -> list:
        """The notes on a message published more than once, or with deliveries not kept."""
        notes = []
        if publishes > 1:
            notes.append(f"published {publishes} times"
                         + (" (identical bare messages without message-id are one row)" if how == "digest" else ""))
        if m.untracked:
            notes.append(f"{m.untracked} more deliveries of this key not kept (past {self.max_deliveries})")
        return notes


_RELEASED = ("released", "modified")


def _roles_of(deliveries: list, sides: dict, brokers: dict) -> _Roles:
    """A message's deliveries as producers (sent by a client), consumers (sent by a server), and
    unknown (a link whose sending side is not known, or a connection between brokers)."""
    roles = _Roles([], [], [], [])
    for d in deliveries:
        conn = d.connection
        if conn in brokers:
            roles.unknown.append(d)
            roles.why_unknown.append(brokers[conn])
            continue
        side = sides.get((conn, d.link_index), d.sender_side) or d.sender_side
        if side == "client":
            roles.producers.append(d)
        elif side == "server":
            roles.consumers.append(d)
        else:
            roles.unknown.append(d)
            roles.why_unknown.append(f"link {d.link!r} of {conn}: the sending side is not known (its attach "
                                     "was not seen)")
    return roles


def _consumer_links(consumers: list) -> dict:
    """Consumer links: (connection, link_index) -> [deliveries, first delivery, last delivery]."""
    groups: dict = {}
    for d in consumers:
        g = groups.get((d.connection, d.link_index))
        if g is None:
            groups[(d.connection, d.link_index)] = [1, d, d]
        else:
            g[0] += 1
            g[2] = d
    return groups


def _outcome_at(d) -> tuple | None:
    """(time, packet) of the outcome of delivery ``d`` (None: no delivery)."""
    return (d.outcome_time, d.outcome_packet) if d else None


def _twice_why(repeats: int, max_dc, after_release: int) -> list:
    """What says a message was delivered twice."""
    why = []
    if repeats:
        why.append(f"{repeats} repeat(s) to the same consumer")
    if max_dc:
        why.append(f"header delivery-count {max_dc}")
    if after_release:
        why.append(f"{after_release} delivery(ies) after a released / modified outcome")
    return why


def _state(roles: _Roles, twice_why: list) -> tuple:
    """(the message's state, its evidence or None)."""
    dead = next((d.dead for d in roles.consumers + roles.producers + roles.unknown if d.dead), None)
    if dead:
        return DEAD, dead
    if not roles.producers and not roles.consumers:
        return UNKNOWN, "; ".join(dict.fromkeys(roles.why_unknown)) or None
    if not roles.producers:
        return PUBLISH_MISSING, None
    if not roles.consumers:
        return PUBLISHED, None
    if twice_why:
        return TWICE, "; ".join(twice_why)
    return DELIVERED, None


def _key_columns(how: str, typ, ident) -> dict:
    """The row's message-id, its type, or its bare message's digest, and how it was matched."""
    by_id = how == "message-id"
    return {
        "message_id": ident if by_id else None,
        "message_id_type": typ if by_id else None,
        "bare_digest": ident if how == "digest" else None,
        "matched_by": how,
    }


def _message_address(prod, consumers: list, everything: list):
    """The producer's address, else the first consumer's, else the first delivery's."""
    if prod:
        return prod.address
    if consumers:
        return consumers[0].address
    return everything[0].address if everything else None


_NO_PRODUCER = {"producer_connection": None, "producer_link": None, "producer_link_index": None,
                "producer_address": None, "producer_time": None, "producer_packet": None, "producer_outcome": None,
                "producer_outcome_time": None}


def _producer_columns(prod) -> dict:
    """The row's columns of the (first) publish."""
    if not prod:
        return _NO_PRODUCER
    return {
        "producer_connection": prod.connection,
        "producer_link": prod.link,
        "producer_link_index": prod.link_index,
        "producer_address": prod.address,
        "producer_time": prod.first_time,
        "producer_packet": prod.first_packet,
        "producer_outcome": prod.outcome,
        "producer_outcome_time": prod.outcome_time,
    }


def _listed_consumers(groups: dict) -> list:
    """The row's ``consumer_deliveries``: the first :data:`MAX_LISTED` consumer links (the count of
    the others after them)."""
    listed = []
    for k, (n, first_d, last_d) in list(groups.items())[:MAX_LISTED]:
        listed.append({"connection": k[0], "link": first_d.link, "link_index": k[1],
                       "address": first_d.address, "first_time": _iso(first_d.first_time),
                       "first_packet": first_d.first_packet, "outcome": last_d.outcome,
                       "outcome_packet": last_d.outcome_packet, "deliveries": n})
    if len(groups) > MAX_LISTED:
        listed.append({"more": len(groups) - MAX_LISTED})
    return listed


def _final_outcome(consumers: list, key):
    """The last delivery to the consumer link ``key`` with a terminal outcome time (None: none)."""
    t = None
    for d in consumers:
        if (d.connection, d.link_index) == key and d.outcome_time is not None:
            t = d
    return t


def message_rows(delivery_rows, link_rows=(), connection_rows=()) -> list[dict]:
    """The messages table of the deliveries, links and connections tables' rows."""
    return MessageMatcher().add_all(delivery_rows).rows(link_rows, connection_rows)
