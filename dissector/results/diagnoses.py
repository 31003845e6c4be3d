"""Diagnoses of the report (issue 28): answers to the questions users bring to a capture, each
with its evidence and the packets that show it.

* **starved**: a receiver at link credit 0 (its credit used up, or none granted yet) while the
  sender showed messages waiting: its flow said available > 0, or another link to the same
  address carried transfers during the interval (messages arriving at the node, or given to
  another consumer) while this one had none.
* **ends**: why each link, session and connection ended: the frame that ended it first (detach,
  end, close) with its side and error condition (the condition's type from the spec's tables:
  amqp-error, connection-error, session-error, link-error; another name is said to be none of
  them), the answer, or the transport's end, the end of the capture, or "unknown" when the end
  may have been in bytes the capture lost; and what came just before it: each side's last frame
  (that ended nothing) and how long before.
* **idle**: the idle-time-out each side asked for, the longest silence of each side (no frame of
  any kind, heartbeats included) against the other side's demand, and a close (or the transport's
  end) that followed a silence beyond it.  A silence in which the side lost bytes is unknown (a
  frame may have been there); one that runs into the capture's end is "unknown beyond".
* **peers**: a peer that breaks the protocol, in plain words: who (its address, container-id,
  and the product, version and platform its open's properties name), which rule (the spec's
  section), how often (repeats added up as the violations table adds them), on which links, and the
  first packets.  Made from the violations (each already waited for what loss or a frame in flight
  could change: a credit finding waits for the granting peer's next frame); a credit finding
  convicts its sender only on a link whose receiver never lowered its limit (delivery-count +
  link-credit): a lower grant the sender had not seen yet may explain it, and then it is said so.
  The analyzer's own findings (budget, internal errors) are not a peer's.
* **redeliveries**: the same message (message-id with its type, else the digest of the bare
  message) released or modified twice or more, or delivered with a header delivery-count of 2 or
  more, with its deliveries and packets.  Only when the messages were read (the deliveries'
  message fields); else the report says it was not checked.

:class:`FoldWatch` is what the Analyzer calls for each delivery it folds (one call per delivery):
it keeps, bounded, the transfer activity of each link (for the starvation's second evidence) and
the deliveries of messages released, modified or redelivered.  :func:`diagnose` reads it and the
model at the end.  Everything is per connection except the two cross-link checks, which see the
connections of one analyzer (with ``-j N``, those of one worker).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from ..amqp import _spec
from ..model.deliveries import compact_rows, link_deliveries
from ..model.stats import FIRST_NS, NsCache
from ..model.transitions import SIDES

#: transfers of a link closer than this (ns) are one interval of activity
MERGE = 10_000_000
#: activity intervals kept per link; beyond, the link's activity is unknown (not coarsened)
INTERVALS_MAX = 512
#: links whose activity is kept
LINKS_MAX = 4096
#: messages released / modified / redelivered that are followed; deliveries kept per message
MESSAGES_MAX = 10_000
DELIVERIES_PER_MESSAGE = 8
#: entries per list of the document (the rest are counted)
LISTED = 200
#: a message released or modified this many times (or with this header delivery-count) is a loop
LOOP_MIN = 2

# the error conditions the spec names: condition symbol -> (its restricted type, the choice name)
CONDITIONS = {
    value: (name, choice)
    for name, r in _spec.RESTRICTED.items() if "error-condition" in (r[3] or ())
    for value, choice in (r[7] or ())
}


def condition_type(cond) -> str | None:
    """The spec's type of an error condition (``link-error`` ...), None when the spec names it not."""
    got = CONDITIONS.get(cond) if isinstance(cond, str) else None
    return got[0] if got else None


# the ends of the last interval of FoldWatch.fold, read as C integers (first-transfer times: the
# same objects fold after fold)
_LO_NS = NsCache()
_HI_NS = NsCache()


class FoldWatch:
    """Fed each folded delivery (:meth:`fold`): per link, intervals of transfer activity (bounded),
    and the deliveries of messages released, modified or redelivered (bounded)."""

    __slots__ = ("activity", "full", "links_over", "messages", "messages_over", "read", "reading", "_link", "_last")

    def __init__(self, reading: bool = True):
        self.activity: dict = {}  # link -> [[first, last], ...] of its first-transfer times
        self.full: set = set()  # links whose intervals overflowed: activity unknown
        self.links_over = 0
        self.messages: dict = {}  # identity -> [released or modified, deliveries, first rows]
        self.messages_over = 0
        self.read = False  # a delivery with its message read was seen
        self.reading = reading  # messages may be read (else no delivery has one: not looked at)
        self._link = None  # the link of the last fold, and its last interval (folds come in runs)
        self._last = None

    def fold(self, d) -> None:
        ft = d.first_ts
        if ft is not None:
            last = self._last
            first = FIRST_NS
            lo_c = _LO_NS
            hi_c = _HI_NS
            if (d.link is self._link and last is not None and first.read(ft) and lo_c.read(last[0])
                    and hi_c.read(last[1])):
                # (integer nanoseconds within 62 bits: C integers when compiled, see diagnoses.pxd, each
                # read once: the times are the same objects fold after fold, see NsCache; a time
                # beyond them, years past 2116, takes the Python integers of _fold_big)
                t = first.ns
                lo = lo_c.ns
                hi = hi_c.ns
                merge = MERGE
                if lo - merge <= t <= hi + merge:
                    if t > hi:
                        last[1] = ft
                    elif t < lo:
                        last[0] = ft
                else:
                    self._interval(d.link, ft)
            elif d.link is self._link and last is not None:
                self._fold_big(d, ft, last)
            else:
                self._interval(d.link, ft)
        return self._fold_message(d)

    def _fold_big(self, d, ft, last) -> None:
        """:meth:`fold`'s interval step in Python numbers (times not integers, or beyond C's)."""
        if last[0] - MERGE <= ft <= last[1] + MERGE:
            if ft > last[1]:
                last[1] = ft
            elif ft < last[0]:
                last[0] = ft
        else:
            self._interval(d.link, ft)

    def _fold_message(self, d) -> None:
        if self.reading:
            m = d.message
            if m is not None:
                self.read = True
                self._message(d, m)

    def _interval(self, link, t) -> None:
        iv = self.activity.get(link)
        self._link = link
        if iv is None:
            if len(self.activity) >= LINKS_MAX:
                self.links_over += 1
                self._last = None
            else:
                self._last = [t, t]
                self.activity[link] = [self._last]
            return
        last = iv[-1]
        if last[0] - MERGE <= t <= last[1] + MERGE:
            if t > last[1]:
                last[1] = t
            elif t < last[0]:
                last[0] = t
            self._last = last
        elif len(iv) < INTERVALS_MAX:
            self._last = [t, t]
            iv.append(self._last)
        else:
            self.full.add(link)
            self._last = None

    def _message(self, d, m, messages=None) -> None:
        if messages is None:
            messages = self.messages
        if d.outcome not in ("released", "modified") and getattr(m, "header", 0) is None:
            return  # (no header: delivery-count 0, the default)
        cells = _cells(d)
        if cells is None:
            return
        hdc = cells.get("header_delivery_count")
        if d.outcome not in ("released", "modified") and not (isinstance(hdc, int) and hdc > 0):
            return
        if cells.get("message_id") is not None:
            key = ("message-id", cells.get("message_id_type"), cells.get("message_id"))
        elif cells.get("bare_digest") is not None:
            key = ("bare-digest", None, cells.get("bare_digest"))
        else:
            return
        got = messages.get(key)
        if got is None:
            if len(messages) >= MESSAGES_MAX:
                self.messages_over += 1
                return
            got = messages[key] = [0, 0, []]  # released or modified, deliveries in all, rows
        if d.outcome in ("released", "modified"):
            got[0] += 1
        got[1] += 1
        if len(got[2]) < DELIVERIES_PER_MESSAGE:
            link = d.link
            got[2].append({
                "connection": link.conn.id, "link": link.name, "delivery_id": d.delivery_id,
                "first_time": d.first_ts, "first_packet": d.first_packet, "outcome": d.outcome or None,
                "outcome_packet": d.outcome_packet, "header_delivery_count": hdc,
            })


def _cells(d) -> dict | None:
    """The message fields of a delivery (h-msgfields' columns), None when not read."""
    try:
        from ..amqp.message import MESSAGE_COLUMNS, delivery_cells
    except ImportError:  # (a build without the message fields)
        return None
    return dict(zip(MESSAGE_COLUMNS, delivery_cells(d)))


# --------------------------------------------------------------------------- helpers


def _first_of(pair, an=None) -> int | None:
    """The side whose record (a dict with "time" and "packet") came first in time; None when neither."""
    a, b = pair
    if a is None and b is None:
        return None
    if b is None:
        return 0
    if a is None:
        return 1
    # (first in time: the capture's order of the two directions may be swapped; packets break ties)
    if an is not None and a["time"] is not None and b["time"] is not None and an.spans_step(a["packet"], b["packet"]):
        return 0 if (a["packet"] or 0) <= (b["packet"] or 0) else 1  # (across a clock step: the capture's order)
    ka = (a["time"] is None, a["time"] or 0, a["packet"] or 0)
    kb = (b["time"] is None, b["time"] or 0, b["packet"] or 0)
    return 0 if ka <= kb else 1


def pair_packets(pair, an=None) -> dict | None:
    """``{"side", "time", "packet", "answer_packet", "answer_time"}`` of an open / begin / attach /
    detach / end / close pair of records: the first, and the other side's (None: not seen)."""
    d = _first_of(pair, an)
    if d is None:
        return None
    first, other = pair[d], pair[1 - d]
    return {"side": SIDES[d], "time": first["time"], "packet": first["packet"],
            "answer_time": other["time"] if other else None, "answer_packet": other["packet"] if other else None}


def _known(an, since, since_packet, until, until_packet):
    """``until - since`` (ns), or None when unknown: the capture clock stepped between the two packets
    (``an``'s clock, see amqp_dissect.clock) or the times are out of order."""
    if since is None or until is None or until < since:
        return None
    if an is not None and an.spans_step(since_packet, until_packet):
        return None
    return until - since


def _before(c, d, name, rec, channel, an=None) -> dict | None:
    """What each side sent last before ``d``'s ``name`` frame (record ``rec``), from the notes
    ConnectionRules keeps: ``{"client": {...} | None, "server": ...}`` (``before`` None: unknown,
    a clock step)."""
    notes = c.end_notes
    if not notes or rec is None:
        return None
    got = notes.get((d, name, rec["packet"], channel))
    if got is None:
        for k, v in notes.items():
            if k is not None and k[0] == d and k[1] == name and k[2] == rec["packet"]:
                got = v
                break
    if got is None:
        return None
    out = {}
    for side, last in ((d, got[0]), (1 - d, got[1])):
        if last is None:
            out[SIDES[side]] = None
            continue
        ts, packet, frame = last
        lost = c.loss is not None and c.loss.lost_after(side, ts) and (c.loss.last[side] or 0) <= rec["time"]
        out[SIDES[side]] = {"frame": frame, "packet": packet, "time": ts,
                            "before": _known(an, ts, packet, rec["time"], rec["packet"]), "lost_since": bool(lost)}
    return out


def _last_before(c, last_act, ts, an=None) -> dict:
    """Each side's last frame (that ended nothing) before time ``ts``, as :func:`_before` gives it."""
    out = {}
    for side in (0, 1):
        last = last_act[side]
        if last is None:
            out[SIDES[side]] = None
            continue
        lost = c.loss is not None and c.loss.lost_after(side, last[0])
        out[SIDES[side]] = {"frame": last[2], "packet": last[1], "time": last[0],
                            "before": _known(an, last[0], last[1], ts, c.last_packet), "lost_since": bool(lost)}
    return out


def _error(rec) -> dict:
    err = (rec or {}).get("error")
    if not err:
        return {"condition": None, "condition_type": None, "description": None}
    cond = err.get("condition")
    return {"condition": cond, "condition_type": condition_type(cond), "description": err.get("description")}


def _lost_end(c, sides, after) -> list:
    """Sides among ``sides`` that lost bytes after time ``after`` (None: at any time): their end
    frame may have been among them."""
    if c.loss is None:  # (bytes sent before the capture began hold no end of what began in it)
        return []
    return [SIDES[d] for d in sides if c.loss.lost_after(d, after)]


def _answer(c, d, other, first_seen) -> dict:
    """The answer to side ``d``'s close / end / detach: its packet and time, its error, and when
    it is not seen, why it may be missing."""
    e = {"answer_packet": other["packet"] if other else None, "answer_time": other["time"] if other else None}
    if other is not None and other.get("error"):
        e["answer_error"] = _error(other)
    if other is None:
        lost = _lost_end(c, (1 - d,), first_seen)
        if c.one_way == 1 - d:
            e["answer"] = "unknown: one direction captured (it may have come first)"
        else:
            e["answer"] = ("unknown: lost in a capture gap (it may have come first)" if lost else "not seen")
    return e


def _ended_without_frame(an, c, scope, e: dict, why, first_seen) -> dict:
    """How a connection / session / link ended that no close / end / detach of its own ended:
    its session's or connection's, its transport's, unknown (lost bytes), or open at the end."""
    if why is not None and why.endswith("(lost)"):
        e.update({"how": "unknown", "why": f"its {why.split()[0]} was lost in a capture gap"})
        return e
    lost = _lost_end(c, (0, 1), first_seen)
    if why in ("end", "close", "detach"):
        e.update({"how": why, "why": f"with its {'session' if why == 'end' else 'connection'}"})
    elif why == "transport" or c.transport_end is not None:
        e.update({"how": f"transport {c.transport_end or 'end'}", "time": c.transport_time,
                  "packet": c.last_packet})
        if scope == "connection" and c.transport_time is not None:
            e["before"] = _last_before(c, c.last_act, c.transport_time, an)
    elif lost:
        e.update({"how": "unknown", "why": f"the {' and '.join(lost)} lost bytes in a capture gap: its end "
                                           "may have been there"})
    else:
        e.update({"how": "open at the capture's end"})
    if lost and e["how"] != "unknown":
        e["lost_sides"] = lost
    return e


def _end_entry(an, c, scope, pair, name, channel_of, terminated, first_seen) -> dict:
    """How one connection / session / link ended (see the module docstring)."""
    d = _first_of(pair, an)
    e: dict = {"scope": scope}
    if d is None:
        return _ended_without_frame(an, c, scope, e, terminated, first_seen)
    rec = pair[d]
    e.update({"how": name, "side": SIDES[d], "time": rec["time"], "packet": rec["packet"], **_error(rec)})
    e.update(_answer(c, d, pair[1 - d], first_seen))
    e["before"] = _before(c, d, name, rec, channel_of(d), an)
    return e


def ends(an, conns) -> list:
    out = []
    for c in conns:
        if not (c.frames[0] or c.frames[1]):
            continue
        ce = _end_entry(an, c, "connection", c.close, "close", lambda d: None, None, c.first_ts)
        ce["connection"] = c.id
        out.append(ce)
        for s in c.sessions:
            se = _end_entry(an, c, "session", s.end, "end", lambda d, s=s: s.channel[d], s.terminated,
                            (s.begin[0] or s.begin[1] or {}).get("time"))
            se.update({"connection": c.id, "session": s.index, "channel": s.channel[0] if s.channel[0] is not None
                       else s.channel[1]})
            out.append(se)
            for link in s.links:
                le = _end_entry(an, c, "link", link.detach, "detach",
                                lambda d, s=s: s.channel[d], link.terminated,
                                (link.attach[0] or link.attach[1] or {}).get("time"))
                closed = [x.get("closed") for x in link.detach if x is not None]
                le.update({"connection": c.id, "session": s.index, "link": link.name,
                           "address": an._link_address(link), "closed": any(closed) if closed else None})
                out.append(le)
    return out


# --------------------------------------------------------------------------- idle time-out


def _silence_item(c, d, demand, end_ts) -> dict:
    """Side ``d``'s longest silence (:class:`~amqp_dissect.model.entities.Silence`) and, when
    longer, its trailing one: from its last frame to its close, the transport's end, or the
    capture's end."""
    sil = c.silence[d]
    item = {"demand": demand, "longest": sil.longest if sil.end is not None else None,
            "from_time": sil.start, "from_packet": sil.start_packet, "to_time": sil.end,
            "to_packet": sil.end_packet, "unknown_silences": sil.unknown}
    last = c.last_frame[d]
    if last is None or c.close[d] is not None:
        return item
    if c.transport_time is not None:
        tail, beyond = c.transport_time - last, None
    else:
        tail, beyond = end_ts - last if end_ts is not None else None, "capture end"
    if c.loss is not None and c.loss.lost_after(d, last):
        beyond = "capture gap"
    if tail is not None and (item["longest"] is None or tail > item["longest"]):
        item["trailing"] = {"length": tail, "from_time": last, "unknown_beyond": beyond}
    return item


def _expired_by_close(an, c, d) -> dict | None:
    """The close of side ``d`` after a silence of the other side beyond the demand it had to
    respect (None: none)."""
    rec = c.close[d]
    bef = _before(c, d, "close", rec, None, an)
    peer = (bef or {}).get(SIDES[1 - d])
    demand = c.idle[1 - d]
    if peer is None or not demand or peer["before"] is None or peer["before"] <= demand:
        return None
    err = _error(rec)
    return {
        "closed_by": SIDES[d], "silent": SIDES[1 - d], "silence": peer["before"], "demand": demand,
        "last_frame_packet": peer["packet"], "close_packet": rec["packet"], "close_time": rec["time"],
        **err, "names_idle": bool(err["description"] and "idle" in str(err["description"]).lower()),
        "lost_since": peer["lost_since"],
    }


def _expired_by_transport(c) -> dict | None:
    """The transport's end after a silence of a side beyond its demand (None: none)."""
    for d2 in (0, 1):
        last, demand = c.last_frame[d2], c.idle[d2]
        if last is not None and demand and c.transport_time - last > demand:
            return {"closed_by": None, "transport_end": c.transport_end, "silent": SIDES[d2],
                    "silence": c.transport_time - last, "demand": demand, "close_packet": None,
                    "transport_time": c.transport_time, "transport_packet": c.last_packet,
                    "lost_since": bool(c.loss is not None and c.loss.lost_after(d2, last))}
    return None


def _expired(an, c, stepped: bool) -> dict | None:
    """A close (or the transport's end) after a silence beyond the demand of its sender."""
    d = _first_of(c.close, an)
    if d is not None:
        return _expired_by_close(an, c, d)
    if c.transport_time is not None and not stepped:  # (the silence to the transport's end may span the step: unknown)
        return _expired_by_transport(c)
    return None


def _idle_entry(an, c, end_ts) -> dict:
    """The idle-time-out entry of one connection that sent an open."""
    asked = [(c.open[d] or {}).get("idle_time_out") if c.open[d] is not None else None for d in (0, 1)]
    e: dict = {"connection": c.id, "idle_time_out_client": asked[0], "idle_time_out_server": asked[1]}
    stepped = an.conn_spans_step(c)  # silences across the clock step are unknown: the longest too
    for d in (0, 1):
        demand = c.idle[d]  # (ns: what d must respect, asked by the other side)
        if stepped:
            item = {"demand": demand, "longest": None, "clock_step": True, "unknown_silences": c.silence[d].unknown}
        else:
            item = _silence_item(c, d, demand, end_ts)
        item["beyond_demand"] = bool(demand and item["longest"] is not None and item["longest"] > demand)
        e[SIDES[d]] = item
    expired = _expired(an, c, stepped)
    if expired is not None:
        e["expired"] = expired
    return e


def idle(an, conns) -> list:
    out = []
    end_ts = an._end()
    for c in conns:
        if c.open[0] is None and c.open[1] is None:
            continue
        e = _idle_entry(an, c, end_ts)
        if any(e[SIDES[x]]["demand"] for x in (0, 1)) or "expired" in e:
            out.append(e)
    return out


# --------------------------------------------------------------------------- starvation


def _sends_from(link):
    return link.sender_dir


def _links_by_address(an) -> dict:
    """Address -> the links to or from it, in capture order."""
    by_addr: dict = {}
    for c in an.connections.values():
        for link in c.links:
            a = an._link_address(link)
            if a is not None:
                by_addr.setdefault(a, []).append(link)
    return by_addr


def _may_starve(st, shown: set) -> bool:
    """A credit stall of a link of a connection shown, with a start, and no bytes lost since it
    began (a flow granting credit may have been among them)."""
    if st.link is None or st.kind not in ("link-credit", "initial-credit") or id(st.conn) not in shown:
        return False
    if st.start is None:
        return False
    loss = st.conn.loss
    return loss is None or not any(loss.lost_after(d, st.start) for d in (0, 1))


def _starvation_interval(an, st, end) -> dict:
    """One interval at credit 0 of a receiver (its end ``end``: the stall's, else the capture's)."""
    link = st.link
    return {"connection": st.conn.id, "session": st.session.index, "link": link.name,
            "address": an._link_address(link), "receiver": st.conn.peer(1 - st.direction),
            "receiver_side": SIDES[1 - st.direction], "kind": st.kind, "since": st.start,
            "since_packet": st.start_packet, "until": st.end, "until_packet": st.end_packet,
            "ended_by": st.ended_by,
            "duration": _known(an, st.start, st.start_packet, end,
                               st.end_packet if st.end is not None else float("inf")),
            "credit_exhausted_packet": st.exhausted_packet}


def _other_links_active(st, e: dict, end, others, watch, cache: dict, ev: list) -> None:
    """Add to ``ev`` the other links of the address that carried a transfer while the receiver was
    at credit 0 (messages arriving at the node, or another consumer served): at most 4 items."""
    for other in others:
        if other is st.link:
            continue
        hit = _active(other, st.start, end, watch, cache)
        if hit:
            towards_node = other.sender_dir is not None and other.sender_dir != st.direction
            ev.append({"kind": "arriving" if towards_node else "other-consumer",
                       "connection": other.conn.id, "link": other.name, "time": hit})
            if len(ev) >= 4:
                break


def _starvation_evidence(st, e: dict, end, by_addr: dict, watch, cache: dict) -> list:
    """What shows messages were waiting: the sender's available, other links of the address."""
    ev = []
    seen = st.avail_seen
    if seen is not None:
        ev.append({"kind": "available" if not seen[3] else "available-left", "available": seen[0],
                   "time": seen[1], "packet": seen[2]})
    if e["address"] is not None and e["duration"] is not None and e["duration"] > MERGE:
        _other_links_active(st, e, end, by_addr.get(e["address"], ()), watch, cache, ev)
    return ev


def _shows_waiting(st, ev: list) -> bool:
    """The evidence shows messages waiting: some, and unless the sender said none were available,
    an available count or messages arriving."""
    if not ev:
        return False
    if st.avail is not False:
        return True
    return any(x["kind"].startswith("available") for x in ev) or any(x["kind"] == "arriving" for x in ev)


def starved(an, conns, watch) -> list:
    """Receivers at credit 0 while the sender showed messages waiting (see the module docstring)."""
    by_addr = _links_by_address(an)
    shown = {id(c) for c in conns}
    cache: dict = {}
    out = []
    for st in an.stalls:
        if not _may_starve(st, shown):
            continue
        end = st.end if st.end is not None else an._end()
        e = _starvation_interval(an, st, end)
        ev = _starvation_evidence(st, e, end, by_addr, watch, cache)
        if _shows_waiting(st, ev):
            e["evidence"] = ev
            out.append(e)
    return _per_link(out)


#: intervals of one link listed in its starvation entry (the others are counted)
INTERVALS_LISTED = 20


def _per_link(items: list) -> list:
    """Starvation intervals grouped per link (in the order of their first): how often, how long in
    all, the longest, and the first INTERVALS_LISTED intervals."""
    links: dict = {}
    for e in items:
        k = (e["connection"], e["session"], e["link"])
        g = links.get(k)
        iv = {x: e[x] for x in ("since", "since_packet", "until", "until_packet", "ended_by", "duration",
                                "credit_exhausted_packet", "evidence", "kind")}
        if g is None:
            g = links[k] = {x: e[x] for x in ("connection", "session", "link", "address", "receiver", "receiver_side")}
            g.update({"times": 0, "total": 0, "longest": iv, "intervals": []})
        g["times"] += 1
        g["total"] += e["duration"] or 0
        if (e["duration"] or 0) > (g["longest"]["duration"] or 0):
            g["longest"] = iv
        if len(g["intervals"]) < INTERVALS_LISTED:
            g["intervals"].append(iv)
    return list(links.values())


def _active(link, start, end, watch, cache):
    """A first-transfer time of ``link`` strictly between ``start`` and ``end`` (the watch's
    intervals of folded deliveries, and the deliveries not folded), or None.  ``cache``: link ->
    (interval starts, running max of their ends, times of the deliveries not folded), sorted once."""
    got = cache.get(link)
    if got is None:
        ivs = sorted(watch.activity.get(link, ())) if watch is not None and link not in watch.full else []
        starts = [a for a, _ in ivs]
        ends = []
        top = None
        for _, b in ivs:
            top = b if top is None or b > top else top
            ends.append(top)
        ts = [d.first_ts for d in link_deliveries(link) if d.first_ts is not None]
        for _sender, st, rows in compact_rows(link):
            ft = st.first_ts
            ts.extend(ft[i] for i in rows)
        ts.sort()
        got = cache[link] = (starts, ends, ts)
    starts, ends, ts = got
    i = bisect_left(starts, end) - 1  # the last interval that began before the end
    if i >= 0 and ends[i] > start:
        if starts[i] > start:
            return starts[i]
        # (an interval began before the stall and went on into it: a transfer at its end, or, when it
        # spans the stall, transfers at most MERGE apart across a stall longer than that)
        return ends[i] if ends[i] < end else start
    k = bisect_right(ts, start)
    if k < len(ts) and ts[k] < end:
        return ts[k]
    return None


# --------------------------------------------------------------------------- redeliveries


def redeliveries(an, watch) -> dict:
    if watch is None:
        return {"checked": False, "loops": []}
    # the deliveries not folded (the watch saw them not), added to a copy: diagnose() may be called again
    messages = {k: [v[0], v[1], list(v[2])] for k, v in watch.messages.items()}
    read = watch.read
    for link in (lk for c in an.connections.values() for lk in c.links):
        for d in link_deliveries(link):
            if getattr(d, "message", None) is not None:
                read = True
                watch._message(d, d.message, messages)
    loops = []
    for (kind, typ, ident), (n, total, rows) in messages.items():
        hdc = max((r["header_delivery_count"] or 0 for r in rows), default=0)
        if n >= LOOP_MIN or hdc >= LOOP_MIN:
            loops.append({"identity": kind, "id_type": typ, "id": ident, "released_or_modified": n,
                          "deliveries": total, "max_header_delivery_count": hdc, "first": rows})
    loops.sort(key=lambda x: (-x["released_or_modified"], x["first"][0]["first_time"] or 0))
    return {"checked": read, "loops": loops, "messages_over": watch.messages_over}


# --------------------------------------------------------------------------- peers breaking the protocol

#: violation kind -> (the spec's section, its title, what the peer did, in plain words)
RULES = {
    "credit": ("part 2, 2.6.7", "Flow Control", "sent transfers beyond the link-credit its receiver granted"),
    "session-window": ("part 2, 2.5.6", "Session Flow Control",
                       "sent transfers beyond the incoming-window of the other side's session"),
    "drain": ("part 2, 2.6.7", "Flow Control", "answered a drain without using up the credit"),
    "delivery-tag": ("part 2, 2.6.12", "Transferring A Message",
                     "repeated a delivery-tag among the unsettled deliveries of a link"),
    "state": ("part 2, 2.4.6, 2.5.5 and 2.6", "Connection States, Session States, Links",
              "sent a frame its connection, session or link state does not allow"),
    "idle-timeout": ("part 2, 2.4.5", "Idle Timeout Of A Connection",
                     "stayed silent longer than the idle-time-out the other side asked for"),
    "frame-size": ("part 2, 2.7.1", "Open", "sent frames larger than the other side's max-frame-size"),
    "channel-max": ("part 2, 2.7.1", "Open", "used a channel above the other side's channel-max"),
    "channel-in-use": ("part 2, 2.5.1", "Establishing A Session", "began a session on a channel in use"),
    "handle-max": ("part 2, 2.7.2", "Begin", "used a handle above the other side's handle-max"),
    "handle-in-use": ("part 2, 2.6.2", "Link Handles", "attached a link on a handle in use"),
    "role": ("part 2, 2.7.3", "Attach", "sent frames that contradict its role on a link"),
    "unknown-channel": ("part 2, 2.5.1", "Establishing A Session", "sent frames on a channel no session uses"),
    "unknown-handle": ("part 2, 2.6.2", "Link Handles", "sent frames on a handle no link uses"),
    "unknown-delivery": ("part 2, 2.7.6", "Disposition", "settled or gave outcomes to deliveries never sent"),
    "protocol": ("part 2, 2.7", "Performatives", "sent a performative with fields the spec does not allow"),
    "malformed": ("part 1", "Types", "sent bytes that do not decode as AMQP types"),
    "protocol-header": ("part 2, 2.2", "Version Negotiation", "sent a protocol header the spec does not allow"),
}
#: links named and first packets given per peer and rule
PEER_LINKS = 8
PEER_PACKETS = 5


def _peer(c, side: str) -> dict:
    """Who a side of connection ``c`` is: address, container-id, and what its open's properties say."""
    d = 0 if side == "client" else 1
    o = c.open[d] if c.open is not None else None
    props = (o or {}).get("properties") or {}
    props = props if isinstance(props, dict) else {}
    return {"peer": c.peer(d), "container_id": (o or {}).get("container_id"),
            **{k: (str(props[k]) if props.get(k) is not None else None) for k in ("product", "version", "platform")}}


def _lowered(c) -> dict:
    """link name -> times its receiver lowered its delivery-limit (links of ``c`` that did)."""
    out: dict = {}
    for link in c.links:
        n = link.link_credit.lowered
        if n:
            out[link.name] = out.get(link.name, 0) + n
    return out


def _peer_entry(c, side: str, kind: str, rows: list, lowered: dict) -> dict:
    section, title, what = RULES[kind]
    links = list(dict.fromkeys(r["link"] for r in rows if r.get("link") is not None))
    e = {"connection": c.id, "side": side, **_peer(c, side), "kind": kind, "rule": what, "section": section,
         "section_title": title, "count": sum(r.get("count") or 1 for r in rows), "rows": len(rows),
         "links": links[:PEER_LINKS], "links_more": max(0, len(links) - PEER_LINKS),
         "packets": sorted({r["packet"] for r in rows if r.get("packet") is not None})[:PEER_PACKETS],
         "packets_more": max(0, len({r["packet"] for r in rows if r.get("packet") is not None}) - PEER_PACKETS),
         "first_time": min((r["time"] for r in rows if r.get("time") is not None), default=None),
         "convicted": True, "doubt": None}
    if kind == "credit":
        doubt = [name for name in links if lowered.get(name)]
        if doubt:
            e["convicted"] = False
            e["doubt"] = (f"the receiver lowered its limit (delivery-count + link-credit) on link"
                          f"{'s' if len(doubt) > 1 else ''} {', '.join(repr(x) for x in doubt[:PEER_LINKS])}: "
                          f"a lower grant the sender had not seen yet may explain it")
        else:
            e["doubt"] = None
            e["evidence"] = ("the receiver's limit (delivery-count + link-credit) never went down on "
                             + ("this link" if len(links) == 1 else "these links")
                             + ": no grant in flight explains it")
    return e


def peers(an, conns) -> list:
    """The peers of ``conns`` that broke a rule of the protocol: one entry per connection, side and
    rule (see the module docstring)."""
    want = {c.id: c for c in conns}
    groups: dict = {}  # (connection id, side, kind) -> rows, in capture order
    for v in an.violations:
        c = want.get(v["connection"])
        if c is None or v.get("kind") not in RULES or v.get("origin") == "analyzer" or v.get("side") is None:
            continue
        key = (v["connection"], v["side"], v["kind"])
        rows = groups.get(key)
        if rows is None:
            rows = groups[key] = []
        rows.append(v)
    out = []
    lowered: dict = {}
    for (cid, side, kind), rows in groups.items():
        c = want[cid]
        if kind == "credit" and cid not in lowered:
            lowered[cid] = _lowered(c)
        out.append(_peer_entry(c, side, kind, rows, lowered.get(cid) or {}))
    return out


# --------------------------------------------------------------------------- the document


KINDS = ("starved", "ends", "idle", "peers")


def _by_connection(an, conns) -> dict:
    """connection id -> {"starved", "ends", "idle"}: the diagnoses of each of ``conns`` that has one."""
    watch = getattr(an, "watch", None)
    out: dict = {}  # (only the connections with a diagnosis: no dict per connection of a capture of many)
    for kind, entries in (("starved", starved(an, conns, watch)), ("ends", ends(an, conns)), ("idle", idle(an, conns)),
                          ("peers", peers(an, conns))):
        for e in entries:
            cid = e["connection"]
            part = out.get(cid)
            if part is None:
                part = out[cid] = {k: [] for k in KINDS}
            part[kind].append(e)
    return out


def _assemble(per_conn, redeliv: dict) -> dict:
    """The document from the per-connection lists, in connection order."""
    lists = {k: [e for part in per_conn for e in part[k]] for k in KINDS}
    troubled = []
    clean: dict = {}
    for e in lists["ends"]:
        if e["scope"] != "connection" and str(e.get("how", "")).startswith("transport") and not e.get("lost_sides"):
            k = (e["scope"], "transport")  # (said once, on its connection's line)
            clean[k] = clean.get(k, 0) + 1
        elif (e.get("condition") or e.get("how") == "unknown" or e.get("answer") or e.get("answer_error")
                or str(e.get("how", "")).startswith("transport")):
            troubled.append(e)
        else:
            k = (e["scope"], e["how"])
            clean[k] = clean.get(k, 0) + 1
    out: dict = {}
    for k, items in (("starved", lists["starved"]), ("ends", troubled), ("idle", lists["idle"]),
                     ("peers", lists["peers"])):
        out[k] = items[:LISTED]
        out[k + "_more"] = max(0, len(items) - LISTED)
    out["ends_clean"] = [{"scope": s, "how": h, "count": n} for (s, h), n in clean.items()]
    out["redeliveries"] = redeliv
    return out


def diagnose(an, conns=None) -> dict:
    """The report's ``diagnoses`` (see the module docstring) for ``conns`` (default: every connection)."""
    if conns is None:
        conns = list(an.connections.values())
    per = _by_connection(an, conns)
    return _assemble([per[c.id] for c in conns if c.id in per], redeliveries(an, getattr(an, "watch", None)))


def diagnose_part(an, k_conn) -> dict:
    """What one ``-j N`` worker adds: each of its connections' diagnoses with its key (``k_conn``),
    and its redeliveries (a message seen by two workers is counted in each: said in the docs)."""
    per = _by_connection(an, list(an.connections.values()))
    return {"connections": [(k_conn[cid], part) for cid, part in per.items()],
            "redeliveries": redeliveries(an, getattr(an, "watch", None))}


def merge_parts(parts: list) -> dict:
    """:func:`diagnose`'s document from the workers' :func:`diagnose_part` parts."""
    per = [part for _, part in sorted((x for p in parts for x in p["connections"]), key=lambda x: x[0])]
    loops = sorted((x for p in parts for x in p["redeliveries"]["loops"]),
                   key=lambda x: (-x["released_or_modified"], x["first"][0]["first_time"] or 0))
    red = {"checked": any(p["redeliveries"]["checked"] for p in parts), "loops": loops,
           "messages_over": sum(p["redeliveries"].get("messages_over", 0) for p in parts)}
    return _assemble(per, red)


def lifecycle(conn, entry: dict, an=None) -> None:
    """Give a report's connection entry (and its sessions and links, in the model's order) the
    packets of their open / begin / attach and close / end / detach (issue 27)."""
    entry["open_packets"] = pair_packets(conn.open, an)
    entry["close_packets"] = pair_packets(conn.close, an)
    for s, se in zip(conn.sessions, entry.get("sessions") or ()):
        se["begin_packets"] = pair_packets(s.begin, an)
        se["end_packets"] = pair_packets(s.end, an)
        bp = se["begin_packets"]
        if conn.one_way >= 0 and bp is not None and bp["answer_packet"] is None:
            # one direction captured: a begin with a remote-channel answers one of the peer's, which
            # began the session; one without began it
            if s.begin[1 - conn.one_way]["remote_channel"] is not None:
                bp["answer_of"] = SIDES[conn.one_way]
            else:
                bp["initiates"] = True
        les = se.get("links") or ()
        for i, link in enumerate(s.links):
            le = les[i] if i < len(les) and les[i].get("name") == link.name else next(
                (x for x in les if x.get("name") == link.name and "attach_packets" not in x), None)
            if le is not None:
                le["attach_packets"] = pair_packets(link.attach, an)
                le["detach_packets"] = pair_packets(link.detach, an)
    if conn.one_way >= 0:  # which side came first is unknown: the other side's frames were not captured
        for p in _pairs_of(entry):
            p["not_captured"] = SIDES[conn.one_way]


def _pairs_of(entry: dict) -> list:
    """The open / close, begin / end and attach / detach pairs of a connection entry (those seen)."""
    out = [entry.get("open_packets"), entry.get("close_packets")]
    for se in entry.get("sessions") or ():
        out += [se.get("begin_packets"), se.get("end_packets")]
        for le in se.get("links") or ():
            out += [le.get("attach_packets"), le.get("detach_packets")]
    return [p for p in out if p]
