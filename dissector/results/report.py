"""The ``amqp-dissect report`` document (rendered by :mod:`amqp_dissect.render.report`).

The document is a connection -> session -> link tree (peers, container-ids,
addresses, settle modes, deliveries by outcome, latency percentiles, stall
counts and stalled time, errors), the protocol violations, and the notable
deliveries (slowest settlements, non-accepted outcomes, unsettled) and the
longest stalls.

Stalls and idle periods: an idle period (``Stall.idle()``: the sender showed
nothing waiting, or the interval ended at detach / end / close / the end of
the capture with no transfer after it) is not a stall: it is counted apart
(``idle_periods``, ``idle_seconds``) and never in "Longest stalls".
Deliveries not accepted: those that expected an outcome (not presettled) and
did not get accepted (or declared); presettled (at-most-once) deliveries are
only counted (``presettled``).
"""

from __future__ import annotations

import heapq

from ..amqp.spec import OUTCOMES
from ..model.deliveries import compact_rows
from . import diagnoses as _diagnoses
from .rows import _lost_after, _unknown_by_cut

NOTABLE = 10  # rows per "notable" list
LISTED_CONNECTIONS = 100  # connections the report describes one by one (the others are added up)
DELIVERY_KEYS = ("connection", "channel", "link", "delivery_id", "delivery_tag", "sender", "first_time",
                 "first_packet", "frames", "message_size", "presettled", "aborted", "settled_by",
                 "settled_time", "settled_packet", "outcome", "outcome_error", "outcome_packet", "settlement_latency",
                 "unsettled_at")


def _by_connection(rows: list) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["connection"], []).append(r)
    return out


def _problem_rows(an) -> tuple:
    """(violation rows, error rows, transaction rows, violations per connection, error rows per
    connection, violations and errors per connection) of an Analyzer."""
    violations = an.violation_rows()
    errors = an.error_rows()
    txns = an.transaction_rows()
    violations_of: dict = {}
    for v in violations:
        violations_of[v["connection"]] = violations_of.get(v["connection"], 0) + (v.get("count") or 1)
    errors_of = _by_connection(errors)
    problems = dict(violations_of)
    for cid, rows in errors_of.items():
        problems[cid] = problems.get(cid, 0) + len(rows)
    return violations, errors, txns, violations_of, errors_of, problems


def _lost_counts(c, link) -> tuple:
    """(deliveries, of which without an outcome, of which unknown for a cut of the snap length only)
    of ``link`` on connection ``c`` whose outcome is unknown: left unsettled while bytes were lost or
    cut off after their first transfer (``unsettled_at`` ``lost-in-capture`` or ``not-captured`` in
    the deliveries table; no error row).  The report counts them apart, never as unsettled or "none"."""
    if c.loss is None:
        return 0, 0, 0
    n = m = cut = 0
    for d in link.live.values():
        if d.settled is None and _lost_after(c, d.first_ts):
            n += 1
            if d.outcome is None:
                m += 1
            if _unknown_by_cut(c, d.first_ts):
                cut += 1
    for _sender, st, rows in compact_rows(link):  # (a compacted delivery: unsettled, no outcome)
        ft = st.first_ts
        k = sum([1 for i in rows if _lost_after(c, ft[i])])
        n += k
        m += k
        cut += sum([1 for i in rows if _lost_after(c, ft[i]) and _unknown_by_cut(c, ft[i])])
    return n, m, cut


def lost_totals(an) -> tuple:
    """:func:`_lost_counts` over every connection of ``an``."""
    n = m = cut = 0
    for c in an.connections.values():
        if c.loss is None:
            continue
        for link in c.links:
            a, b, k = _lost_counts(c, link)
            n += a
            m += b
            cut += k
    return n, m, cut


def lost_whole_total(an) -> int:
    """Deliveries lost whole in gaps (their delivery-ids skipped) over every session of ``an``."""
    return sum(s.lost_whole for c in an.connections.values() if c.loss is not None for s in c.sessions)


def not_captured_total(an) -> int:
    """Deliveries whose transfers the snap length cut off whole (their delivery-ids skipped, or named
    by a disposition) over every session of ``an``."""
    return sum(s.not_captured for c in an.connections.values() if c.loss is not None for s in c.sessions)


#: the summary's ``one_direction`` counts (:func:`one_direction_totals`)
ONE_DIRECTION_KEYS = ("connections", "client_missing", "server_missing", "unknown_outcomes")


def one_direction_totals(an) -> dict:
    """The connections of ``an`` of which one direction only was captured, by the side missing, and
    their deliveries whose outcome is therefore unknown (among ``lost_in_capture``)."""
    out = dict.fromkeys(ONE_DIRECTION_KEYS, 0)
    for c in an.connections.values():
        if c.one_way < 0:
            continue
        out["connections"] += 1
        out["client_missing" if c.one_way == 0 else "server_missing"] += 1
        out["unknown_outcomes"] += sum(_lost_counts(c, link)[0] for link in c.links)
    return out


def summary_outcomes(outcomes: dict, lost: tuple) -> dict:
    """The summary's outcome counts: "none" without the deliveries whose outcome is unknown."""
    out = dict(outcomes)
    if lost[1] and out.get("none"):
        out["none"] -= lost[1]
        if not out["none"]:
            del out["none"]
    return out


def _add_missing_files(entries: list, capture: dict | None) -> None:
    """Give each connection entry the TCP gaps that fall in files missing from its capture set
    (``capture["gaps"]``, from :meth:`CaptureSource.capture_info`): ``missing_files``, a list of
    ``{"missing": [names], "gaps_client", "gap_bytes_client", "gaps_server", "gap_bytes_server"}``.
    They are among its ``gaps_*`` / ``gap_bytes_*`` (still gaps), not loss on the wire."""
    if not capture or not capture.get("gaps"):
        return
    by_id = {e["connection"]: e for e in entries}
    for g in capture["gaps"]:
        for cid, (n0, b0, n1, b1) in (g.get("connections") or {}).items():
            e = by_id.get(cid)
            if e is not None:
                e.setdefault("missing_files", []).append({"missing": list(g["missing"]), "gaps_client": n0,
                                                          "gap_bytes_client": b0, "gaps_server": n1,
                                                          "gap_bytes_server": b1})


def _pick(row: dict, *keys) -> dict:
    return {k: row.get(k) for k in keys}


def _connection_interest(an, c, problems: dict) -> tuple:
    """How much a connection has to show, highest first when the report cannot list them all:
    its violations and errors, then its deliveries, then its AMQP frames."""
    return (problems.get(c.id, 0), sum(an.link_stats(link).deliveries for link in c.links),
            c.frames[0] + c.frames[1])


def listed_connections(an, problems: dict, limit: int = LISTED_CONNECTIONS) -> list:
    """The connections (``an.connections`` values) the report lists, in capture order: all of them
    up to ``limit``; beyond, the ``limit`` with the most to show (:func:`_connection_interest`,
    capture order among equals).  ``problems``: connection id -> violations + errors."""
    conns = an.connections
    if len(conns) <= limit:
        return list(conns.values())
    top = heapq.nsmallest(limit, ((tuple(-x for x in _connection_interest(an, c, problems)), i, c)
                                  for i, c in enumerate(conns.values())), key=lambda t: t[:2])
    return [t[2] for t in sorted(top, key=lambda t: t[1])]


def _connection_entry(an, conn, stall_count: dict, stall_secs: dict, violations_of: dict, errors_of: dict) -> dict:
    """The report's entry of one connection (an ``an.connections`` value): its row, sessions and links."""
    c = an.connection_row(conn)
    cid = c["connection"]
    links = an.connection_link_rows(conn)
    lost = [_lost_counts(conn, link) for link in conn.links]  # (links: in conn.links order)
    c_sessions = []
    for s in an.connection_session_rows(conn):
        s_links = []
        s_lost = s_cut = 0
        for lk, (n_lost, n_lost_none, n_cut) in ((lk, lost[i]) for i, lk in enumerate(links)
                                                 if lk.get("session") == s.get("session")):
            s_lost += n_lost
            s_cut += n_cut
            s_links.append(
                {
                    **_pick(lk, "name", "handle", "role", "sender", "receiver", "address", "source", "target",
                            "snd_settle_mode", "snd_settle_mode_default", "rcv_settle_mode",
                            "rcv_settle_mode_default", "coordinator", "refused", "deliveries", "presettled",
                            "aborted", "detach_error", "detach_description", "unknown", "deliveries_lost_whole",
                            "deliveries_not_captured"),
                    # unsettled: without the deliveries whose outcome is unknown (lost_in_capture)
                    "unsettled": lk["unsettled"] - n_lost,
                    "lost_in_capture": n_lost,
                    "outcome_not_captured": n_cut,  # (of lost_in_capture: unknown for a cut, not loss)
                    "outcomes": {**_pick(lk, *OUTCOMES), "no_outcome": lk["no_outcome"] - n_lost_none},
                    "latency": _pick(lk, "latency_p50", "latency_p90", "latency_p99", "latency_max"),
                    "outcome_latency": _pick(lk, "outcome_latency_p50", "outcome_latency_p90",
                                             "outcome_latency_p99", "outcome_latency_max"),
                    "stalls": lk.get("stalls"),
                    "stalled_seconds": lk.get("stalled_seconds"),
                }
            )
        c_sessions.append(
            {
                **_pick(s, "session", "channel_client", "channel_server", "begin_time", "end_time", "ended_by",
                        "end_error", "end_description", "deliveries", "unknown", "deliveries_lost_whole",
                        "not_captured_outcomes", "deliveries_not_captured"),
                "unsettled": s["unsettled"] - s_lost,
                "lost_in_capture": s_lost,
                "outcome_not_captured": s_cut,
                "links": s_links,
            }
        )
    entry = (
        {
            **_pick(c, "connection", "client", "server", "container_id_client", "container_id_server",
                    "hostname", "sasl_mechanism", "sasl_outcome", "max_frame_size_client",
                    "max_frame_size_server", "idle_time_out_client", "idle_time_out_server", "open_time",
                    "close_time", "closed_by", "close_error", "close_description", "transport_end",
                    "mid_connection", "lossy", "missing_direction", "tls", "tls_undecrypted_bytes", "tls_note", "tls_version",
                    "tls_cipher", "websocket", "ws_path", "unknown",
                    "gaps_client", "gaps_server", "gap_bytes_client", "gap_bytes_server",
                    "undecoded_bytes_client", "undecoded_bytes_server", "inferred",
                    "not_captured_bytes_client", "not_captured_bytes_server", "snap_length"),
            "deliveries": c.get("deliveries"),
            "deliveries_lost_whole": sum(x["deliveries_lost_whole"] or 0 for x in c_sessions),
            "deliveries_not_captured": sum(x["deliveries_not_captured"] or 0 for x in c_sessions),
            "lost_in_capture": sum(x[0] for x in lost),
            "outcome_not_captured": sum(x[2] for x in lost),
            "stalls": stall_count.get(cid, 0),
            "stalled_seconds": stall_secs.get(cid, 0),
            "violations": violations_of.get(cid, 0),
            "errors": errors_of.get(cid, []),
            "sessions": c_sessions,
        }
    )
    clock = getattr(an, "clock", None)
    if clock is not None and clock.steps:  # the capture clock stepped back during this connection
        steps = clock.steps_within(getattr(conn, "first_packet", None), getattr(conn, "last_packet", None))
        if steps:
            entry["clock_steps"] = [st.as_dict() for st in steps]
    _diagnoses.lifecycle(conn, entry, an)  # (the packets of each open / close, begin / end, attach / detach)
    return entry


def build_report(an, capture_errors=(), capture: dict | None = None) -> dict:
    """The report document; ``capture``: the inputs, first and last packet times (epoch
    seconds), packets, bytes and duration (``CaptureSource.capture_info()``), its header.

    Bounded in the number of connections: their rows are made for the listed connections only
    (:func:`listed_connections`); the others are counted in ``connections_more``."""
    # stalls: counted and summed from the Stall objects, rows made only for the longest (a long
    # capture has many, and the report shows a few)
    stall_count, stall_secs, stalled, idle_total, real = _stall_sums(  # (real: the stalls that are not idle)
        (st.conn.id, an.stall_seconds(st), st.idle(), st) for st in an.stalls)
    violations, errors, txns, violations_of, errors_of, problems = _problem_rows(an)
    listed = listed_connections(an, problems)
    out_conns = []
    n_sessions = n_links = presettled = 0
    for c in an.connections.values():
        n_sessions += len(c.sessions)
        n_links += len(c.links)
        presettled += sum(an.link_stats(link).presettled for link in c.links)  # (every link, listed or not)
    for conn in listed:
        out_conns.append(_connection_entry(an, conn, stall_count, stall_secs, violations_of, errors_of))
    more = None
    if len(listed) < len(an.connections):
        # what the connections not listed add up to (one pass, no rows)
        shown = {id(c) for c in listed}
        more = {"connections": 0, "sessions": 0, "links": 0, "deliveries": 0, "violations": 0, "errors": 0,
                "without_amqp": 0}
        for c in an.connections.values():
            if id(c) in shown:
                continue
            more["connections"] += 1
            more["sessions"] += len(c.sessions)
            more["links"] += len(c.links)
            more["deliveries"] += sum(an.link_stats(link).deliveries for link in c.links)
            more["violations"] += violations_of.get(c.id, 0)
            more["errors"] += len(errors_of.get(c.id, ()))
            if not (c.frames[0] or c.frames[1] or c.headers[0] or c.headers[1]):
                more["without_amqp"] += 1

    _add_missing_files(out_conns, capture)
    notable = an.notable_deliveries()
    longest = [an.stall_row(st)
               for st in heapq.nlargest(NOTABLE, real, key=lambda st: an.stall_duration(st) or 0.0)]
    totals = an.delivery_totals()
    lost = lost_totals(an)
    return {
        "capture": dict(capture) if capture is not None else None,
        "summary": {
            "connections": len(an.connections),
            "sessions": n_sessions,
            "links": n_links,
            "deliveries": totals["deliveries"],
            "deliveries_lost_whole": lost_whole_total(an),
            "deliveries_not_captured": not_captured_total(an),
            # outcomes and unsettled: without the deliveries whose outcome is unknown (lost_in_capture)
            "outcomes": summary_outcomes(totals["outcomes"], lost),
            "unsettled": totals["unsettled"] - lost[0],
            "lost_in_capture": lost[0],
            "outcome_not_captured": lost[2],
            "one_direction": one_direction_totals(an),
            "stalls": len(real),
            "stalled_seconds": stalled,
            "idle_periods": len(an.stalls) - len(real),
            "idle_seconds": idle_total,
            "violations": sum(v.get("count") or 1 for v in violations),
            "errors": len(errors),
            "transactions": len(txns),
            "capture_errors": list(capture_errors),
            "other_connections": len(an.others),
        },
        "latency_by_address": an.latency_summary(by="address"),
        "connections": out_conns,
        **({"connections_more": more} if more is not None else {}),
        # connections of another protocol (AMQP 0-9-1, 0-10, ...): named, counted, not decoded
        "other_protocols": an.other_rows(limit=LISTED_CONNECTIONS),
        "transactions": txns,
        "violations": violations,
        "notable_deliveries": {
            "slowest_settlement": [_pick(d, *DELIVERY_KEYS) for d in notable["slowest_settlement"]],
            "not_accepted": [_pick(d, *DELIVERY_KEYS) for d in notable["not_accepted"]],
            "not_accepted_count": notable["not_accepted_count"],
            "presettled": presettled,
        },
        "longest_stalls": longest,
        "more_stalls": len(real) - len(longest),
        "diagnoses": _diagnoses.diagnose(an),
    }


# --------------------------------------------------------------------------- -j N: partial reports


def _plus(a, b):
    """a + b, None (unknown) when either is."""
    return None if a is None or b is None else a + b


def _stall_sums(stalls):
    """Per connection counts and seconds, totals and the real stalls of ``(cid, duration, idle, x)``
    items in capture order, as :func:`build_report` adds them up."""
    stall_count: dict = {}
    stall_secs: dict = {}
    stalled = 0
    idle_total = 0
    real = []
    for cid, d, idle, x in stalls:  # (d None: unknown, a clock step: the sums it enters are unknown)
        if idle:
            idle_total = _plus(idle_total, d)
            continue
        real.append(x)
        stall_count[cid] = stall_count.get(cid, 0) + 1
        stall_secs[cid] = _plus(stall_secs.get(cid, 0), d)
        stalled = _plus(stalled, d)
    return stall_count, stall_secs, stalled, idle_total, real


def partial_report(an, keys) -> dict:
    """What one worker of ``-j N`` (:mod:`amqp_dissect.pipelines.runs.parallel`) adds to the report:
    ``keys`` (its FlowWorker) gives each listed item its place in the whole capture.  The flows
    of a connection are all in one worker, so everything per connection is complete here;
    :func:`merge_reports` puts the workers' parts together into :func:`build_report`'s document."""
    from .analytics import NOT_ACCEPTED

    k_conn = keys.k_conn
    stalls = []  # (key, cid, duration, idle)
    for st, k in zip(an.stalls, keys.k_stall):
        stalls.append((k, st.conn.id, an.stall_seconds(st), st.idle()))
    stall_count, stall_secs, _, _, real_keys = _stall_sums((cid, d, idle, (k, d)) for k, cid, d, idle in stalls)
    real_st = [st for st, (k, cid, d, idle) in zip(an.stalls, stalls) if not idle]
    top = sorted(zip(real_keys, real_st), key=lambda x: (-(x[0][1] or 0.0), x[0][0]))[:NOTABLE]
    longest = [(d, k, an.stall_row(st)) for (k, d), st in top]
    violations, errors, txns, violations_of, errors_of, problems = _problem_rows(an)
    nfe = len(an.frame_errors)
    conns = []  # (key, interest, cid, sessions, links, deliveries, without amqp)
    presettled = 0
    for c in an.connections.values():
        deliveries = sum(an.link_stats(link).deliveries for link in c.links)
        presettled += sum(an.link_stats(link).presettled for link in c.links)
        conns.append((k_conn[c.id], _connection_interest(an, c, problems), c.id, len(c.sessions), len(c.links),
                      deliveries, not (c.frames[0] or c.frames[1] or c.headers[0] or c.headers[1])))
    # the connections this worker would list: the global listing is among them
    cand = heapq.nsmallest(LISTED_CONNECTIONS, ((tuple(-x for x in interest), key, cid)
                                                for key, interest, cid, *_ in conns))
    entries = {cid: _connection_entry(an, an.connections[cid], stall_count, stall_secs, violations_of, errors_of)
               for _, _, cid in cand}
    # latency by address: the first link of each address in capture order, and its latencies
    lat: dict = {}
    for c in an.connections.values():
        for pos, link in enumerate(c.links):
            addr = an._link_address(link)
            got = lat.get(addr)
            if got is None:
                got = lat[addr] = [(c.seq, pos), None]
            st = an.link_stats(link)
            if got[1] is None:
                got[1] = st.latency.copy()
            else:
                got[1].extend(st.latency)
    # notable deliveries: each row with its latency and its table order over the capture
    plain_row = an._row

    def keyed_row(d):
        r = plain_row(d)
        r["_order"] = an._order(d)
        r["_lat"] = d.settled[0] - d.first_ts if d.settled is not None else None
        return r

    an._row = keyed_row
    try:
        notable = an.notable_deliveries()
    finally:
        del an._row
    totals = an.delivery_totals()
    return {
        "stalls": stalls,
        "longest": longest,
        "violations": list(zip(keys.k_viol, violations)),
        "frame_errors": list(zip(keys.k_ferr, errors[:nfe])),
        "analysis_errors": [((k_conn[r["connection"]], i), r) for i, r in enumerate(errors[nfe:])],
        "transactions": list(zip(keys.k_txn, txns)),
        "connections": conns,
        "entries": entries,
        "presettled": presettled,
        "latency": [(k, addr, v) for addr, (k, v) in lat.items()],
        "slowest": notable["slowest_settlement"],
        "not_accepted": notable["not_accepted"][:NOT_ACCEPTED],
        "not_accepted_count": notable["not_accepted_count"],
        "totals": totals,
        "lost": lost_totals(an),
        "lost_whole": lost_whole_total(an),
        "not_captured": not_captured_total(an),
        "one_direction": one_direction_totals(an),
        # the TCP gaps of this worker's connections in files missing from the capture set
        "holes": [{"missing": list(h["missing"]), "connections": {c: list(v) for c, v in h["connections"].items()}}
                  for h in (getattr(getattr(keys, "d", None), "holes", None) or ())],
        "others": an.other_rows(limit=LISTED_CONNECTIONS),
        "others_count": len(an.others),
        # TLS streams on other ports this worker's dissector could not decrypt (capture_info's)
        "diagnoses": _diagnoses.diagnose_part(an, k_conn),
        "tls_unseen": [getattr(getattr(keys, "d", None), "tls_unseen_count", 0),
                       [dict(x) for x in getattr(getattr(keys, "d", None), "tls_unseen", None) or ()]],
        # packets in tunnels the parser does not read (this worker's dissector's: shard 0 feeds them)
        "unread_tunnels": {k: list(v) for k, v in (getattr(getattr(keys, "d", None), "unread_tunnels", None)
                                                    or {}).items()},
    }


def tunnels_not_read(counts) -> list:
    """The report's ``capture["tunnels_not_read"]``: one {"tunnel", "packets", "first_packet"} per
    tunnel, in the order of their first packets, from Dissectors' ``unread_tunnels`` (one or more)."""
    merged: dict = {}
    for c in counts:
        for name, (n, first) in c.items():
            m = merged.setdefault(name, [0, first])
            m[0] += n
            m[1] = min(m[1], first)
    return [{"tunnel": name, "packets": n, "first_packet": first}
            for name, (n, first) in sorted(merged.items(), key=lambda kv: (kv[1][1], kv[0]))]


def merge_reports(parts: list, capture_errors=(), capture: dict | None = None) -> dict:
    """:func:`build_report`'s document from the workers' :func:`partial_report` parts."""
    from ..model.stats import TERMINAL_OUTCOMES_ORDER, Latencies
    from .analytics import NOT_ACCEPTED, summarize

    def merged(name):
        return [x for _, x in heapq.merge(*[p[name] for p in parts], key=lambda kx: kx[0])]

    stalls = heapq.merge(*[p["stalls"] for p in parts], key=lambda x: x[0])
    stall_count, stall_secs, stalled, idle_total, real = _stall_sums((cid, d, idle, 1) for _, cid, d, idle in stalls)
    n_stalls = sum(len(p["stalls"]) for p in parts)
    longest = sorted((x for p in parts for x in p["longest"]), key=lambda x: (-(x[0] or 0.0), x[1]))[:NOTABLE]
    violations = merged("violations")
    errors = merged("frame_errors") + merged("analysis_errors")
    txns = merged("transactions")
    conns = sorted((c for p in parts for c in p["connections"]), key=lambda c: c[0])
    entries = {}
    for p in parts:
        entries.update(p["entries"])
    if len(conns) <= LISTED_CONNECTIONS:
        listed = [c[2] for c in conns]
    else:
        top = heapq.nsmallest(LISTED_CONNECTIONS, ((tuple(-x for x in c[1]), c[0], c[2]) for c in conns))
        listed = [cid for _, _, cid in sorted(top, key=lambda t: t[1])]
    out_conns = [entries[cid] for cid in listed]
    if capture is not None and capture.get("gaps"):
        # the workers' TCP gaps in the missing files, per connection (each worker has its flows')
        capture = dict(capture)
        gaps = []
        for g in capture["gaps"]:
            conns_of = dict(g.get("connections") or {})
            for p in parts:
                for h in p.get("holes", ()):
                    if h["missing"] == g["missing"]:
                        conns_of.update(h["connections"])
            gaps.append({**g, "connections": conns_of} if conns_of else g)
        capture["gaps"] = gaps
    _add_missing_files(out_conns, capture)
    if capture is not None and any("tls_unseen" in p for p in parts):
        # the workers' TLS streams not decrypted, in place of the reading process's own count
        capture = dict(capture)
        capture.pop("tls_not_decrypted", None)
        n = sum(p["tls_unseen"][0] for p in parts if "tls_unseen" in p)
        if n:
            first = sorted((x for p in parts if "tls_unseen" in p for x in p["tls_unseen"][1]),
                           key=lambda x: (x["packet"], x["connection"]))
            capture["tls_not_decrypted"] = {"streams": n, "first": first[:20]}  # (as many as a dissector keeps)
    if capture is not None and any("unread_tunnels" in p for p in parts):
        # the workers' packets in tunnels not read, in place of the reading process's own count
        capture = dict(capture)
        capture.pop("tunnels_not_read", None)
        unread = tunnels_not_read([p["unread_tunnels"] for p in parts if p.get("unread_tunnels")])
        if unread:
            capture["tunnels_not_read"] = unread
    violations_of: dict = {}
    for v in violations:
        violations_of[v["connection"]] = violations_of.get(v["connection"], 0) + (v.get("count") or 1)
    errors_of = _by_connection(errors)
    more = None
    if len(listed) < len(conns):
        shown = set(listed)
        more = {"connections": 0, "sessions": 0, "links": 0, "deliveries": 0, "violations": 0, "errors": 0,
                "without_amqp": 0}
        for _, _, cid, ns, nl, nd, bare in conns:
            if cid in shown:
                continue
            more["connections"] += 1
            more["sessions"] += ns
            more["links"] += nl
            more["deliveries"] += nd
            more["violations"] += violations_of.get(cid, 0)
            more["errors"] += len(errors_of.get(cid, ()))
            if bare:
                more["without_amqp"] += 1
    groups: dict = {}
    for k, addr, vals in sorted((x for p in parts for x in p["latency"]), key=lambda x: x[0]):
        g = groups.get(addr)
        if g is None:
            g = groups[addr] = Latencies()
        g.extend(vals)
    latency = [{"address": addr, **summarize(vals)} for addr, vals in groups.items()]
    slowest = sorted((r for p in parts for r in p["slowest"]), key=lambda r: (-r["_lat"], r["_order"]))[:NOTABLE]
    not_accepted = sorted((r for p in parts for r in p["not_accepted"]), key=lambda r: r["_order"])[:NOT_ACCEPTED]
    deliveries = sum(p["totals"]["deliveries"] for p in parts)
    unsettled = sum(p["totals"]["unsettled"] for p in parts)
    counts: dict = {}
    for p in parts:
        for k, n in p["totals"]["outcomes"].items():
            counts[k] = counts.get(k, 0) + n
    outcomes = {k: counts[k] for k in TERMINAL_OUTCOMES_ORDER if counts.get(k)}
    if counts.get("none"):
        outcomes["none"] = counts["none"]
    lost = tuple(sum(p["lost"][i] for p in parts) for i in range(3))
    return {
        "capture": dict(capture) if capture is not None else None,
        "summary": {
            "connections": len(conns),
            "sessions": sum(c[3] for c in conns),
            "links": sum(c[4] for c in conns),
            "deliveries": deliveries,
            "deliveries_lost_whole": sum(p.get("lost_whole", 0) for p in parts),
            "deliveries_not_captured": sum(p.get("not_captured", 0) for p in parts),
            "outcomes": summary_outcomes(outcomes, lost),
            "unsettled": unsettled - lost[0],
            "lost_in_capture": lost[0],
            "outcome_not_captured": lost[2],
            "one_direction": {k: sum(p["one_direction"][k] for p in parts) for k in ONE_DIRECTION_KEYS},
            "stalls": len(real),
            "stalled_seconds": stalled,
            "idle_periods": n_stalls - len(real),
            "idle_seconds": idle_total,
            "violations": sum(v.get("count") or 1 for v in violations),
            "errors": len(errors),
            "transactions": len(txns),
            "capture_errors": list(capture_errors),
            "other_connections": sum(p.get("others_count", 0) for p in parts),
        },
        "latency_by_address": latency,
        "connections": out_conns,
        **({"connections_more": more} if more is not None else {}),
        "other_protocols": sorted((o for p in parts for o in p.get("others", ())),
                                  key=lambda o: (o["first_packet"] or 0, o["connection"]))[:LISTED_CONNECTIONS],
        "transactions": txns,
        "violations": violations,
        "notable_deliveries": {
            "slowest_settlement": [_pick(d, *DELIVERY_KEYS) for d in slowest],
            "not_accepted": [_pick(d, *DELIVERY_KEYS) for d in not_accepted],
            "not_accepted_count": sum(p["not_accepted_count"] for p in parts),
            "presettled": sum(p["presettled"] for p in parts),
        },
        "longest_stalls": [row for _, _, row in longest],
        "more_stalls": len(real) - len(longest),
        "diagnoses": _diagnoses.merge_parts([p["diagnoses"] for p in parts if p.get("diagnoses")]),
    }
