"""The report's messages section (``rep["messages"]``): counts per state, per address the messages,
fan-out, residence and end-to-end p50 / p90 / max with their histograms (logarithmic bins, as the
other latency plots), the unmatched messages named with their packets, and a few journeys
(producer -> broker -> consumers) for the HTML page.

Sans-IO: made from the messages table's rows and the :class:`~amqp_dissect.results.messages.MessageMatcher`
that made them (its deliveries give the journeys' times).  Bounded: at most :data:`ADDRESSES`
addresses, :data:`UNMATCHED` messages named per state and :data:`JOURNEYS` journeys; the report's
matcher keeps at most :data:`REPORT_MESSAGES` message keys (the messages command matches all).
"""

from __future__ import annotations

from .messages import (CLOCK_STEP_NOTE, DEAD, DELIVERED, PUBLISH_MISSING, PUBLISHED, STATES, TWICE, UNKNOWN,
                       MessageDelivery, MessageMatcher)
from .percentiles import percentile
from .plots import histogram

__all__ = ["REPORT_MESSAGES", "messages_section", "report_matcher"]

REPORT_MESSAGES = 200_000  # message keys the report's matcher keeps (memory stays bounded)
ADDRESSES = 20
UNMATCHED = 20
JOURNEYS = 6
JOURNEY_CONSUMERS = 8


def report_matcher() -> MessageMatcher:
    return MessageMatcher(max_messages=REPORT_MESSAGES)


def _stats(values: list) -> dict:
    xs = sorted(values)
    if not xs:
        return {"count": 0, "p50": None, "p90": None, "max": None, "histogram": None}
    keys, counts = [], []
    for v in xs:
        if keys and keys[-1] == v:
            counts[-1] += 1
        else:
            keys.append(v)
            counts.append(1)
    return {"count": len(xs), "p50": percentile(xs, 50, presorted=True), "p90": percentile(xs, 90, presorted=True),
            "max": xs[-1], "histogram": histogram(keys, counts)}


def _name(r: dict) -> dict:
    return {"message_id": r["message_id"], "message_id_type": r["message_id_type"], "bare_digest": r["bare_digest"]}


def _key(r: dict):
    if r["matched_by"] == "message-id":
        return ("message-id", r["message_id_type"], r["message_id"])
    return ("digest", None, r["bare_digest"])


def _hop(d: MessageDelivery, role: str) -> dict:
    return {"role": role, "connection": d.connection, "link": d.link, "link_index": d.link_index,
            "address": d.address, "time": d.first_time, "packet": d.first_packet, "outcome": d.outcome,
            "outcome_time": d.outcome_time, "outcome_packet": d.outcome_packet}


def _journey(r: dict, why: str, matcher: MessageMatcher) -> dict | None:
    m = matcher.messages.get(_key(r))
    if m is None:
        return None
    prod_key = (r["producer_connection"], r["producer_link_index"], r["producer_packet"])
    hops = []
    for d in sorted(m.deliveries, key=lambda d: (d.first_time is None, d.first_time or 0, d.first_packet or 0)):
        if (d.connection, d.link_index, d.first_packet) == prod_key:
            hops.append(_hop(d, "producer"))
    seen = 0
    for c in r["consumer_deliveries"]:
        if "more" in c:
            continue
        for d in m.deliveries:
            if (d.connection, d.link_index) == (c["connection"], c["link_index"]) and seen < JOURNEY_CONSUMERS:
                hops.append(_hop(d, "consumer"))
                seen += 1
    hops.sort(key=lambda h: (h["time"] is None, h["time"] or 0, h["packet"] or 0))
    return {"why": why, **_name(r), "state": r["state"], "address": r["address"], "end_to_end": r["end_to_end_max"],
            "residence": r["residence_max"], "residence_first": r["residence"], "end_to_end_first": r["end_to_end"],
            "hops": hops, "consumers": r["consumers"]}


def _address_entry(address) -> dict:
    return {"address": address, "messages": 0, "consumers": 0, "fan_out_max": 0, "residence": [], "end_to_end": [],
            "clock_step": 0}


def _add_to_address(a: dict, r: dict) -> None:
    """Add message row ``r`` to its address's entry ``a`` (:func:`_address_entry`)."""
    a["messages"] += 1
    a["consumers"] += r["consumers"]
    a["fan_out_max"] = max(a["fan_out_max"], r["consumers"])
    if r["residence"] is not None:
        a["residence"].append(r["residence"])
    if r["end_to_end"] is not None:
        a["end_to_end"].append(r["end_to_end"])
    if CLOCK_STEP_NOTE in (r["note"] or ""):  # (its residence / end to end across a clock step: unknown)
        a["clock_step"] += 1


def _address_out(a: dict) -> dict:
    """The section's entry of one address: its messages, fan-out, residence and end to end."""
    out = {"address": a["address"], "messages": a["messages"], "fan_out_mean": a["consumers"] / a["messages"],
           "fan_out_max": a["fan_out_max"], "residence": _stats(a["residence"]), "end_to_end": _stats(a["end_to_end"])}
    if a["clock_step"]:  # messages whose residence or end to end is unknown (a clock step): not in the stats
        out["clock_step"] = a["clock_step"]
    return out


def _picked(journeys: list, r: dict) -> bool:
    """Message row ``r`` is already among ``journeys``."""
    return any(j is not None and (j["message_id"], j["bare_digest"]) == (r["message_id"], r["bare_digest"])
               for j in journeys)


def _journeys(rows: list, matcher: MessageMatcher) -> list:
    """The journeys: the slowest end to end, the never delivered, the delivered twice (a message
    drawn once: the first reason it was picked for)."""
    journeys = []
    slow = sorted((r for r in rows if r["end_to_end_max"] is not None), key=lambda r: -r["end_to_end_max"])
    for r in slow[:JOURNEYS // 2]:
        journeys.append(_journey(r, "slowest end to end", matcher))
    for state, why in ((PUBLISHED, "never delivered"), (TWICE, "delivered twice"), (DEAD, "dead-lettered / expired")):
        if len(journeys) >= JOURNEYS:
            continue
        r = next((r for r in rows if r["state"] == state and not _picked(journeys, r)), None)
        if r is not None:
            journeys.append(_journey(r, why, matcher))
    seen, unique = set(), []
    for j in journeys:
        if j is not None and (j["message_id"], j["message_id_type"], j["bare_digest"]) not in seen:
            seen.add((j["message_id"], j["message_id_type"], j["bare_digest"]))
            unique.append(j)
    return unique


def messages_section(rows: list, matcher: MessageMatcher) -> dict:
    """The section of the messages table's ``rows`` (made by ``matcher``)."""
    states = {s: 0 for s in STATES}
    by_addr: dict = {}
    unmatched: dict = {s: [] for s in (PUBLISHED, PUBLISH_MISSING, TWICE, DEAD, UNKNOWN)}
    for r in rows:
        states[r["state"]] = states.get(r["state"], 0) + 1
        a = by_addr.get(r["address"])
        if a is None:
            a = by_addr[r["address"]] = _address_entry(r["address"])
        _add_to_address(a, r)
        lst = unmatched.get(r["state"])
        if lst is not None and len(lst) < UNMATCHED:
            lst.append({**_name(r), "address": r["address"], "packets": r["packets"], "evidence": r["state_evidence"],
                        "first_time": r["first_time"]})
    addresses = sorted(by_addr.values(), key=lambda a: (-a["messages"], a["address"] or ""))
    return {
        "messages": len(rows),
        "states": {k: v for k, v in states.items() if v or k in (DELIVERED,)},
        "unkeyed_deliveries": matcher.unkeyed,
        "dropped_deliveries": matcher.dropped,
        "key_limit": matcher.max_messages,
        "addresses": [_address_out(a) for a in addresses[:ADDRESSES]],
        "more_addresses": max(0, len(addresses) - ADDRESSES),
        "unmatched": {k: v for k, v in unmatched.items() if v},
        "unmatched_counts": {k: states.get(k, 0) for k, v in unmatched.items() if v},
        "journeys": _journeys(rows, matcher),
    }
