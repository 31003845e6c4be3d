"""The requests table: request/reply pairs, AMQP management (``$management``) and claims-based
security (``$cbs`` put-token) operations, matched from the deliveries table's message fields.

Sans-IO: :class:`RequestMatcher` is fed delivery rows (dicts with the deliveries table's columns,
the message fields among them: ``message_id``, ``correlation_id``, ``reply_to``, ``to``,
``application_properties``, ``body_size``, ...) in any order, keeps only the few that can be a
request or a reply (as small tuples), and the last transfer time of every link; then
:meth:`RequestMatcher.rows` takes the links table's rows and the capture's end and gives one row
per request (the registry's ``requests`` columns).

The rules (docs/definitions.md, "Requests and replies"):

* a **request** is a message with a reply-to, or a message carrying an application property
  ``operation`` sent to a well-known service node (an address whose last part is ``$management``
  or ``$cbs``);
* its **reply** is a later message whose correlation-id equals the request's message-id
  (``matched_by`` "message-id"), or else the request's own correlation-id ("correlation-id"), of
  the same AMQP type, delivered on a link whose source or target address is the request's
  reply-to (or whose ``to`` is): a dynamic reply node's address is the one the broker gave in its
  attach, which is the link's source in the links table;
* a message passes a broker twice (the publisher's transfer, then the broker's to a consumer):
  the request's time is its publisher's transfer (the client sending it), its reply's time the
  transfer that brought the reply to the requester's connection (else the first seen);
  ``round_trip`` is the difference of the integer times, divided once;
* a put-token's token (the message body) is never read, printed nor stored: only its size.

Bounded: at most :data:`MAX_CANDIDATES` candidate messages are kept (the rest are counted in
``dropped``), one integer per link, and the application properties already bounded by the
deliveries table.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import NamedTuple

from amqp_dissect.times import NS, seconds

from .messages import json_map

__all__ = ["RequestMatcher", "RequestCandidate", "request_rows", "requests_summary", "SERVICE_NODES", "STATUSES", "MAX_CANDIDATES"]

#: the last part of a well-known service node's address -> the service's name in the table
SERVICE_NODES = {"$management": "$management", "$cbs": "$cbs"}

ANSWERED, NO_REPLY, ORPHAN, TWICE = ("answered", "no reply in the capture", "reply without request",
                                     "answered twice")
STATUSES = (ANSWERED, NO_REPLY, ORPHAN, TWICE)

#: requests with one id looked at to match a copy or a reply (the latest; ids reused more are
#: matched among their latest uses only)
_SCAN = 64

#: candidate messages kept (a request or a reply each); more are counted in ``dropped``
MAX_CANDIDATES = 1_000_000



class RequestCandidate(NamedTuple):
    """What the matcher keeps of a delivery that can be a request or a reply: the delivery row's
    fields of these names (one per candidate: a tuple, small)."""

    connection: object
    link: object
    link_index: object
    sender_side: object
    address: object
    first_time: object
    last_time: object
    first_packet: object
    last_packet: object
    outcome: object
    message_id: object
    message_id_type: object
    correlation_id: object
    correlation_id_type: object
    reply_to: object
    to: object
    application_properties: object
    body_size: object
    body_kind: object
    delivery_id: object


# the delivery row's fields a candidate keeps, in this order
REQUEST_FIELDS = RequestCandidate._fields
_new_candidate = tuple.__new__  # (a candidate per delivery kept: made without the keyword-checking __new__)


def service_of(address) -> str | None:
    """``$management`` or ``$cbs`` when ``address``'s last part (after the last ``/``) names one."""
    if not address or not isinstance(address, str):
        return None
    return SERVICE_NODES.get(address.rstrip("/").rsplit("/", 1)[-1])


# application properties as a dict (the row may hold JSON text); {} when absent or not a map
_props = json_map


def _plain(value):
    """A property value without a type wrapper ({"type": ..., "value": ...} as some JSON writers give)."""
    if isinstance(value, dict) and "value" in value:
        return value["value"]
    return value


def _first(props: dict, *keys):
    for k in keys:
        if k in props:
            return _plain(props[k])
    return None


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


#: an integer expiration below this is seconds since the epoch (the Azure SDK's put-token), at or
#: above it milliseconds (an AMQP timestamp: 10^11 ms is 1973, 10^11 s the year 5138)
_SECONDS_BELOW = 10**11


def expiry_ns(value, typ: str | None = None) -> tuple[int | None, str | None]:
    """(nanoseconds since the epoch, None) of a put-token's ``expiration``, or (None, why).

    An AMQP timestamp is milliseconds since the epoch; an integer or a number below 10^11 is
    seconds since the epoch (what the Azure SDK sends), 10^11 and above milliseconds; ISO 8601
    text is read as such (UTC when it names no zone)."""
    typ = (value.get("type") if isinstance(value, dict) else typ) or None
    value = _plain(value)
    if value is None:
        return None, "no expiration"
    if isinstance(value, bool):
        return None, f"expiration not understood: {value!r}"
    if typ == "timestamp" and isinstance(value, int):
        return value * 1_000_000, None
    if isinstance(value, int):
        return (value * NS if abs(value) < _SECONDS_BELOW else value * 1_000_000), None
    if isinstance(value, float):
        return (round(value * NS) if abs(value) < _SECONDS_BELOW else round(value * 1_000_000)), None
    if isinstance(value, str):
        n = _int(value)
        if n is not None:
            return expiry_ns(n)
        try:
            t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None, f"expiration not understood: {value[:60]!r}"
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        delta = t - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86400 + delta.seconds) * NS + delta.microseconds * 1000, None
    return None, f"expiration not understood: {_text(value)[:60]!r}"


def _node(address) -> str:
    """An address or an audience as a node path: without scheme and host, without the slashes
    around it (``sb://ns.example/queue/`` and ``/queue`` are both ``queue``)."""
    a = address or ""
    if "://" in a:
        a = a.split("://", 1)[1]
        a = a.split("/", 1)[1] if "/" in a else ""
    return a.strip("/")


def covers(audience, address) -> bool:
    """True when a token for ``audience`` covers a link to ``address``: the same node, a node
    below it (``queue/Subscriptions/s``), or any node for an audience naming only the host."""
    aud, node = _node(audience), _node(address)
    if service_of(address):
        return False
    if not aud:
        return bool(address)
    return node == aud or node.startswith(aud + "/")


def _time_order(c) -> tuple:
    """Candidates in capture order (then connection, link and delivery-id: one order whatever the
    order they were fed in, by one process or several)."""
    return (c.first_time if c.first_time is not None else -1, c.first_packet if c.first_packet is not None else -1,
            str(c.connection), c.link_index if c.link_index is not None else -1, c.delivery_id if c.delivery_id is not None else -1)


class _Request:
    """One row being made: the request's sightings (the publisher's transfer, the broker's to the
    responder) and its reply's."""

    __slots__ = ("sent", "delivered", "replies", "matched_by", "orphan", "notes")

    def __init__(self, sent=None, delivered=None, orphan=False):
        self.sent = sent            # the publisher's transfer (a candidate tuple), or None
        self.delivered = delivered  # the transfer to the responder (broker to client), or None
        self.replies: list = []     # (candidate, address matched) of the reply
        self.matched_by = None
        self.orphan = orphan
        self.notes: list = []

    @property
    def first(self):
        return self.sent or self.delivered


def _cbs_links_unused(links: dict, used: set) -> list[dict]:
    """Per connection, its links to ``$cbs`` that carried no request and were refused, or never
    attached by the peer: no put-token went through them (a token line of the report)."""
    out: dict = {}
    for (conn, idx), lr in sorted(links.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] if kv[0][1] is not None else -1)):
        if (conn, idx) in used or not any(service_of(lr.get(k)) == "$cbs" for k in ("address", "source", "target")):
            continue
        if lr.get("refused"):
            why = "refused by the peer"
        elif lr.get("attach_time") is not None and lr.get("attached_time", 0) is None:
            why = "never attached by the peer" + (f" (ended by {lr['terminated']})" if lr.get("terminated") else "")
        else:
            continue
        e = out.setdefault((conn, why), {"connection": conn, "why": why, "links": [], "time": lr.get("attach_time")})
        e["links"].append(lr.get("name"))
    return list(out.values())


def _is_request(c: RequestCandidate) -> bool:
    """A candidate with a reply-to, or an operation to a service node, is a request."""
    return c.reply_to is not None or (
        "operation" in _props(c.application_properties) and bool(service_of(c.address) or service_of(c.to)))


class _Found:
    """What :meth:`RequestMatcher.rows` has found so far, in capture order."""

    __slots__ = ("links", "by_mid", "by_cid", "reply_addrs", "out", "orphans")

    def __init__(self, links: dict):
        self.links = links
        self.by_mid: dict = {}   # (type, message-id) -> requests, latest last
        self.by_cid: dict = {}   # (type, correlation-id) -> requests, latest last
        self.reply_addrs: set = set()  # every reply-to seen on a request
        self.out: list[_Request] = []
        self.orphans: dict = {}  # (correlation key, reply address) -> the row of a reply without request

    def link_addrs(self, c: RequestCandidate) -> set:
        """The addresses of ``c``'s link (source, target) and of ``c`` (address, to)."""
        lr = self.links.get((c.connection, c.link_index)) or {}
        return {a for a in (lr.get("source"), lr.get("target"), c.address, c.to) if a}

    def request(self, c: RequestCandidate, mkey, ckey) -> None:
        """A new request: its row, found again by its message-id and correlation-id."""
        req = _Request(sent=c) if c.sender_side != "server" else _Request(delivered=c)
        if c.sender_side == "server":
            req.notes.append("its publisher's transfer is not in the capture: the time is the "
                             "transfer to the responder")
        self.out.append(req)
        if mkey is not None:
            self.by_mid.setdefault(mkey, []).append(req)
        if ckey is not None:
            self.by_cid.setdefault(ckey, []).append(req)
        if c.reply_to is not None:
            self.reply_addrs.add(c.reply_to)

    def orphan_reply(self, c: RequestCandidate, ckey) -> None:
        """A reply without request: a correlation-id on a reply address, a service node's link or
        with a status code (one row per correlation key and reply address)."""
        props = _props(c.application_properties)
        addrs = self.link_addrs(c)
        reply_addrs = self.reply_addrs
        if not (addrs & reply_addrs or any(service_of(a) for a in addrs)
                or _first(props, "statusCode", "status-code") is not None):
            return
        where = sorted(addrs & reply_addrs) or sorted(a for a in addrs if service_of(a)) or sorted(addrs)
        okey = (ckey, where[0] if where else None)
        row = self.orphans.get(okey)
        if row is None:
            row = self.orphans[okey] = _Request(orphan=True)
            self.out.append(row)
        row.replies.append((c, True))


def _put_token_times(out: list) -> dict:
    """(connection, audience) -> the times of its put-tokens (what renews a token)."""
    tokens: dict = {}
    for r in out:
        f = r.first
        if f is None or f.first_time is None:
            continue
        p = _props(f.application_properties)
        if (_text(_first(p, "operation")) or "").lower() == "put-token":
            tokens.setdefault((f.connection, _text(_first(p, "name"))), []).append(f.first_time)
    return tokens


def _status(r: _Request, finals: list) -> str:
    if r.orphan:
        return ORPHAN
    if not finals:
        return NO_REPLY
    return TWICE if len(finals) > 1 else ANSWERED


def _address_and_service(req, reply, links: dict) -> tuple:
    """(the request's address, the service it went to): a reply without request, the service of its link."""
    address = None
    if req is not None:
        address = req.address or req.to
    service = service_of(address) or (service_of(req.to) if req is not None else None)
    if req is None and reply is not None:
        lr = links.get((reply.connection, reply.link_index)) or {}
        service = next((service_of(a) for a in (lr.get("source"), lr.get("target"), reply.address)
                        if service_of(a)), None)
    return address, service


def _reply_address(req, reply, links: dict):
    """Where the reply went: the request's reply-to when its link reaches it, else its link's."""
    if reply is None:
        return None
    lr = links.get((reply.connection, reply.link_index)) or {}
    if req is not None and req.reply_to is not None and req.reply_to in {lr.get("source"), lr.get("target"),
                                                                         reply.address, reply.to}:
        return req.reply_to
    return reply.address or lr.get("target") or reply.to


_NO_CANDIDATE = RequestCandidate(*([None] * len(RequestCandidate._fields)))
_NO_TOKEN = {"token_type": None, "token_audience": None, "token_expiry_time": None, "token_size": None,
             "token_refused": None, "token_outlived": None, "token_links": None, "token_note": None}


class RequestMatcher:
    """Feed delivery rows (:meth:`add`), then :meth:`rows` the requests table (and ``cbs_links``:
    the ``$cbs`` links no put-token went through, refused or never attached)."""

    def __init__(self, max_candidates: int = MAX_CANDIDATES):
        self.cbs_links: list = []
        self.max_candidates = max_candidates
        self._cands: list = []
        self._last_transfer: dict = {}  # (connection, link_index) -> last transfer time
        self.dropped = 0
        self.clock = None  # the capture's clock steps (amqp_dissect.clock.ClockWatch), or None

    def transfer(self, connection, link_index, t) -> None:
        """A transfer at ``t`` on a link (its last one is evidence that the link outlived a token)."""
        key = (connection, link_index)
        old = self._last_transfer.get(key)
        if old is None or t > old:
            self._last_transfer[key] = t

    def add(self, row: dict) -> None:
        """One delivery row: kept when it can be a request or a reply."""
        t = row.get("last_time")
        if t is not None:
            self.transfer(row.get("connection"), row.get("link_index"), t)
        if row.get("reply_to") is None and row.get("correlation_id") is None:
            props = _props(row.get("application_properties"))
            if "operation" not in props or not (service_of(row.get("address")) or service_of(row.get("to"))):
                return
        if len(self._cands) >= self.max_candidates:
            self.dropped += 1
            return
        self._cands.append(_new_candidate(RequestCandidate, [row.get(f) for f in REQUEST_FIELDS]))

    def part(self) -> dict:
        """What this matcher holds, to be merged with other processes' (:meth:`merge`): plain data."""
        return {"cands": list(self._cands), "last": dict(self._last_transfer), "dropped": self.dropped}

    def merge(self, part: dict) -> None:
        """Add another matcher's :meth:`part` (the ``-j`` workers': each read other connections)."""
        for c in part["cands"]:
            if len(self._cands) >= self.max_candidates:
                self.dropped += 1
            else:
                self._cands.append(_new_candidate(RequestCandidate, c))
        for (conn, idx), t in part["last"].items():
            self.transfer(conn, idx, t)
        self.dropped += part["dropped"]

    def add_all(self, rows) -> "RequestMatcher":
        for r in rows:
            self.add(r)
        return self

    # ------------------------------------------------------------------ matching

    def rows(self, link_rows=(), capture_end: int | None = None) -> list[dict]:
        """The requests table's rows, in the order of the request's time (a reply without request:
        its reply's).  ``link_rows``: the links table (source, target, refused, attach and
        detach times); ``capture_end``: the time of the capture's last packet (whether a link
        was still attached at a token's expiry)."""
        links = {(r.get("connection"), r.get("link_index")): r for r in link_rows}
        found = _Found(links)
        for c in self._sorted_candidates():
            self._match(found, c)
        out = found.out
        by_conn: dict = {}
        for key, lr in links.items():
            by_conn.setdefault(key[0], []).append((key[1], lr))
        used = {(r.first.connection, r.first.link_index) for r in out if r.first is not None}
        self.cbs_links = _cbs_links_unused(links, used)
        return [self._row(r, links, capture_end, (_put_token_times(out), by_conn)) for r in out]

    def _sorted_candidates(self) -> list:
        """The candidates in capture order (after a step back of the capture clock: its epochs first)."""
        clock = self.clock
        if clock is not None and clock.steps:
            return sorted(self._cands, key=lambda c: (clock.epoch(c.first_packet),) + _time_order(c))
        return sorted(self._cands, key=_time_order)

    def _match(self, found: "_Found", c: RequestCandidate) -> None:
        """Candidate ``c``, in capture order: a copy of a request, a reply, a new request, or a reply
        without request."""
        mkey = (c.message_id_type, c.message_id) if c.message_id is not None else None
        ckey = (c.correlation_id_type, c.correlation_id) if c.correlation_id is not None else None
        is_request = _is_request(c)
        # 1. the same request seen again on another connection (a broker passing it on)
        if is_request and mkey is not None:
            hop = self._copy_of(found.by_mid.get(mkey), c)
            if hop is not None:
                hop.delivered = c
                return
        # 2. a reply to a request seen before
        if ckey is not None:
            hit = self._reply_of(found.by_mid.get(ckey), c, found.link_addrs, "message-id")
            if hit is None:
                hit = self._reply_of(found.by_cid.get(ckey), c, found.link_addrs, "correlation-id")
            if hit is not None:
                return
        # 3. a new request
        if is_request:
            found.request(c, mkey, ckey)
        # 4. a reply without request
        elif ckey is not None:
            found.orphan_reply(c, ckey)

    @staticmethod
    def _copy_of(reqs, c):
        """The request ``c`` copies (the same message-id and reply-to, first seen on another
        connection, not yet passed on), or None."""
        if not reqs:
            return None
        for r in reversed(reqs[-_SCAN:]):
            f = r.first
            if (r.delivered is None and f.reply_to == c.reply_to and f.connection != c.connection
                    and (f.correlation_id, f.correlation_id_type) == (c.correlation_id, c.correlation_id_type) and not r.replies):
                return r
        return None

    @staticmethod
    def _reply_of(reqs, c, link_addrs, how):
        """Match ``c`` as a reply to the latest of ``reqs`` sent before it whose reply-to it
        reaches (or, for a request without reply-to, on its connection); the request or None."""
        if not reqs:
            return None
        for r in reversed(reqs[-_SCAN:]):
            f = r.first
            if f is c:
                continue
            if f.reply_to is not None:
                ok = f.reply_to in link_addrs(c)
            else:
                ok = c.connection == f.connection
            if not ok:
                continue
            if r.matched_by is None:
                r.matched_by = how
            r.replies.append((c, True))
            return r
        return None

    # ------------------------------------------------------------------ the row

    def _final_replies(self, r: _Request) -> list:
        """The reply's sightings that count: those brought to the requester's connection, else
        those a broker delivered (its side server), else all."""
        reps = [c for c, _ in r.replies]
        if r.orphan or not reps:
            return reps
        conn = r.first.connection
        mine = [c for c in reps if c.connection == conn and c.sender_side == "server"] or [c for c in reps if c.connection == conn]
        if mine:
            return mine
        return [c for c in reps if c.sender_side == "server"] or reps

    def _row(self, r: _Request, links: dict, capture_end, index) -> dict:
        req = r.first
        finals = self._final_replies(r)
        reply = finals[0] if finals else None
        rq = req if req is not None else _NO_CANDIDATE  # (its columns None)
        rp = reply if reply is not None else _NO_CANDIDATE
        rprops = _props(req.application_properties) if req is not None else {}
        aprops = _props(reply.application_properties) if reply is not None else {}
        address, service = _address_and_service(req, reply, links)
        operation = _text(_first(rprops, "operation"))
        code = _int(_first(aprops, "statusCode", "status-code"))
        row = {
            "request_id": _text(rq.message_id),
            "request_id_type": rq.message_id_type if rq.message_id is not None else None,
            "request_correlation_id": _text(rq.correlation_id),
            "request_correlation_id_type": rq.correlation_id_type if rq.correlation_id is not None else None,
            "correlation_id": _text(rp.correlation_id),
            "correlation_id_type": rp.correlation_id_type,
            "matched_by": r.matched_by,
            "status": _status(r, finals),
            "replies": len(finals),
            "service": service,
            "operation": operation,
            "operation_type": _text(_first(rprops, "type")),
            "operation_name": _text(_first(rprops, "name")),
            "locales": _text(_first(rprops, "locales")),
            "status_code": code,
            "status_description": _text(_first(aprops, "statusDescription", "status-description")),
            "request_address": address,
            "reply_to": rq.reply_to,
            "reply_address": _reply_address(req, reply, links),
            "request_connection": rq.connection,
            "request_link": rq.link,
            "request_link_index": rq.link_index,
            "responder_connection": r.delivered.connection if (r.delivered is not None and r.sent is not None) else None,
            "reply_connection": rp.connection,
            "reply_link": rp.link,
            "reply_link_index": rp.link_index,
            "request_time": rq.first_time,
            "reply_time": rp.last_time,
            "round_trip": self._round_trip(req, reply),
            "request_packet": rq.first_packet,
            "reply_packet": rp.last_packet,
            "reply_packets": [c.last_packet for c in finals],
            "request_outcome": rq.outcome,
            "request_properties": rprops or None,
            "reply_properties": aprops or None,
            **_NO_TOKEN,
            "note": None,
        }
        if service == "$cbs" and req is not None and (operation or "").lower() == "put-token":
            self._token(row, r, req, rprops, code, links, capture_end, index)
        notes = list(r.notes)
        if row["token_note"]:
            notes.append(row["token_note"])
        row["note"] = "; ".join(notes) or None
        return row

    def _round_trip(self, req, reply):
        """Seconds from the request's first transfer to the reply's last; None when unknown (across a
        step of the capture clock, or out of order: never negative)."""
        if req is None or reply is None or req.first_time is None or reply.last_time is None:
            return None
        stepped = self.clock is not None and self.clock.spans(req.first_packet, reply.last_packet)
        if not stepped and reply.last_time >= req.first_time:
            return seconds(reply.last_time - req.first_time)
        return None

    # ------------------------------------------------------------------ put-token

    def _token(self, row, r, req, props, code, links, capture_end, index) -> None:
        audience = _text(_first(props, "name"))
        raw = props.get("expiration")
        expiry, why = expiry_ns(raw)
        row["token_type"] = _text(_first(props, "type"))
        row["token_audience"] = audience
        row["token_expiry_time"] = expiry
        row["token_size"] = req.body_size
        lr = links.get((req.connection, req.link_index)) or {}
        notes = []
        refused = None
        if lr.get("refused"):
            refused, _ = True, notes.append("refused: the $cbs link was refused")
        elif row["status"] == NO_REPLY:
            refused, _ = True, notes.append("refused: no reply in the capture")
        elif code is not None and code >= 400:
            desc = row["status_description"]
            refused, _ = True, notes.append(f"refused: status {code}" + (f" {desc}" if desc else ""))
        elif code is not None:
            refused = False
        row["token_refused"] = refused
        if why and raw is not None:
            notes.append(why)
        if expiry is not None and refused is False and audience is not None:
            outlived = self._outlived(req, audience, expiry, capture_end, index)
            row["token_outlived"] = bool(outlived)
            if outlived:
                row["token_links"] = outlived
                names = ", ".join(f"{o['link']} ({o['evidence']})" for o in outlived[:5])
                more = f" and {len(outlived) - 5} more" if len(outlived) > 5 else ""
                notes.append(f"outlived by {len(outlived)} link(s): {names}{more}")
        row["token_note"] = "; ".join(notes) or None

    def _outlived(self, req, audience, expiry, capture_end, index) -> list:
        """The links of the put-token's connection to the audience's node still attached, or
        transferring, after ``expiry``, when no newer put-token for the audience was sent on the
        connection by then."""
        tokens, by_conn = index
        conn = req.connection
        if req.first_time is None:
            return []
        if any(req.first_time < t <= expiry for t in tokens.get((conn, audience), ())):
            return []  # renewed before it expired
        out = []
        for idx, lr in by_conn.get(conn, ()):
            c = conn
            if not covers(audience, lr.get("address")):
                continue
            attach, detach = lr.get("attach_time"), lr.get("detach_time")
            if attach is None or attach > expiry:
                continue  # (attached after the expiry: under a newer token, or none)
            last = self._last_transfer.get((c, idx))
            if last is not None and last > expiry:
                evidence = f"transfer {seconds(last - expiry):.6f} s after the expiry"
            elif detach is not None and detach > expiry:
                evidence = f"detached {seconds(detach - expiry):.6f} s after the expiry"
            elif detach is None and capture_end is not None and capture_end > expiry:
                evidence = "still attached at the end of the capture"
            else:
                continue
            out.append({"link": lr.get("name"), "link_index": idx, "address": lr.get("address"),
                        "evidence": evidence})
        return out


def request_rows(delivery_rows, link_rows=(), capture_end: int | None = None) -> list[dict]:
    """The requests table of ``delivery_rows`` (with their message fields) and the links table."""
    return RequestMatcher().add_all(delivery_rows).rows(link_rows, capture_end)


# --------------------------------------------------------------------------- the report's section

#: addresses, unanswered requests and token lines listed in the report (the rest counted)
LISTED = 20


def requests_summary(rows: list[dict], dropped: int = 0, cbs_links=()) -> dict:
    """The report's ``requests`` section of the requests table's rows: per address (the node a
    request went to) the requests, answered ones and round-trip percentiles; the requests without
    reply (named, with their packets); the replies without request; the token lines, and the
    ``$cbs`` links without put-token (``cbs_links``: :attr:`RequestMatcher.cbs_links`)."""
    from .percentiles import percentile

    by: dict = {}
    counts = {s: 0 for s in STATUSES}
    unanswered, tokens = [], []
    for r in rows:
        counts[r["status"]] += 1
        if r["status"] == ORPHAN:
            continue
        a = by.setdefault(r["request_address"], {"address": r["request_address"], "service": r["service"],
                                                 "requests": 0, "answered": 0, "trips": []})
        a["requests"] += 1
        if r["status"] in (ANSWERED, TWICE):
            a["answered"] += 1
            if r["round_trip"] is not None:
                a["trips"].append(r["round_trip"])
        if r["status"] == NO_REPLY:
            unanswered.append({k: r[k] for k in ("request_id", "request_id_type", "request_address",
                                                 "request_connection", "request_link", "request_time",
                                                 "request_packet", "operation")})
        if r["token_note"]:
            tokens.append({"kind": "refused" if r["token_refused"] else "outlived",
                           **{k: r[k] for k in ("token_type", "token_audience", "token_expiry_time", "token_size",
                                                "status_code", "status_description", "request_connection",
                                                "request_time", "request_packet", "token_links", "token_note")}})
    addresses = []
    for a in sorted(by.values(), key=lambda a: (-a["requests"], str(a["address"]))):
        trips = sorted(a.pop("trips"))
        a["round_trip_p50"] = percentile(trips, 50, presorted=True)
        a["round_trip_p90"] = percentile(trips, 90, presorted=True)
        a["round_trip_max"] = trips[-1] if trips else None
        addresses.append(a)
    return {
        "requests": sum(n for s, n in counts.items() if s != ORPHAN),
        "answered": counts[ANSWERED] + counts[TWICE],
        "no_reply": counts[NO_REPLY],
        "answered_twice": counts[TWICE],
        "replies_without_request": counts[ORPHAN],
        "by_address": addresses[:LISTED],
        "more_addresses": max(0, len(addresses) - LISTED),
        "unanswered": unanswered[:LISTED],
        "more_unanswered": max(0, len(unanswered) - LISTED),
        "tokens": tokens[:LISTED],
        # the $cbs links no put-token went through: refused, or never attached by the peer
        "cbs_links": list(cbs_links)[:LISTED],
        "more_tokens": max(0, len(tokens) - LISTED),
        "not_matched": dropped,
    }
