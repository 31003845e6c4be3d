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
from typing import NamedTuple

from ..amqp.spec import OUTCOMES
from ..model.deliveries import compact_rows
from . import diagnoses as _diagnoses
from .rows import connection_lost_after, unknown_by_cut

NOTABLE = 10  # rows per "notable" list
LISTED_CONNECTIONS = 100  # connections the report describes one by one (the others are added up)
DELIVERY_KEYS = ("connection", "channel", "link", "delivery_id", "delivery_tag", "sender", "first_time",
                 "first_packet", "frames", "message_size", "presettled", "aborted", "settled_by",
                 "settled_time", "settled_packet", "outcome", "outcome_error", "outcome_packet", "settlement_latency",
                 "unsettled_at")


class LostCounts(NamedTuple):
    """Deliveries whose outcome is unknown (:func:`_lost_counts`, :func:`lost_totals`)."""

    unknown: int  # left unsettled while bytes were lost or cut off after their first transfer
    no_outcome: int  # of those, without an outcome
    cut: int  # of those, unknown for a cut of the snap length only


_NO_LOST = LostCounts(0, 0, 0)


class Problems(NamedTuple):
    """The violations, errors and transactions of an Analyzer (:func:`_problem_rows`)."""

    violations: list  # violation rows
    errors: list  # error rows (frame errors first)
    transactions: list  # transaction rows
    violations_of: dict  # connection id -> violations
    errors_of: dict  # connection id -> its error rows
    problems: dict  # connection id -> violations + errors


class StallSums(NamedTuple):
    """What :func:`_stall_sums` adds up: per connection and in total (None: unknown, a clock step)."""

    count: dict  # connection id -> stalls
    seconds: dict  # connection id -> stalled seconds
    stalled: object  # stalled seconds in total
    idle: object  # idle seconds in total
    real: list  # the items of the stalls that are not idle, in capture order


class StallPart(NamedTuple):
    """One stall of a ``-j N`` worker's part, in its place in the whole capture."""

    key: tuple  # its place in the whole capture
    connection: object  # connection id
    seconds: object  # its length (None: unknown)
    idle: bool  # an idle period, not a stall


class LongestStallPart(NamedTuple):
    """One of a worker's longest stalls, with its report row."""

    seconds: object  # its length (None: unknown)
    key: tuple  # its place in the whole capture
    row: dict  # the report's row


class ConnectionPart(NamedTuple):
    """One connection of a worker's part: what the merge needs to list it or add it up."""

    key: tuple  # its place in the whole capture
    interest: tuple  # how much it has to show (:func:`_connection_interest`)
    connection: object  # connection id
    sessions: int
    links: int
    deliveries: int
    without_amqp: bool  # no AMQP frame and no protocol header


class LatencyPart(NamedTuple):
    """The latencies of the links of one address in a worker."""

    key: tuple  # the place of the address's first link in the capture
    address: object
    latencies: object  # Latencies


def _by_connection(rows: list) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["connection"], []).append(r)
    return out


def _violations_by_connection(violations: list) -> dict:
    """Connection id -> its violations (a row repeated word for word counts its ``count``)."""
    violations_of: dict = {}
    for v in violations:
        violations_of[v["connection"]] = violations_of.get(v["connection"], 0) + (v.get("count") or 1)
    return violations_of


def _problem_rows(an) -> Problems:
    """The violations, errors and transactions of an Analyzer, and per connection."""
    violations = an.violation_rows()
    errors = an.error_rows()
    txns = an.transaction_rows()
    violations_of = _violations_by_connection(violations)
    errors_of = _by_connection(errors)
    problems = dict(violations_of)
    for cid, rows in errors_of.items():
        problems[cid] = problems.get(cid, 0) + len(rows)
    return Problems(violations, errors, txns, violations_of, errors_of, problems)


def _lost_counts(c, link) -> LostCounts:
    """The deliveries of ``link`` on connection ``c`` whose outcome is unknown: left unsettled while bytes were lost or
    cut off after their first transfer (``unsettled_at`` ``lost-in-capture`` or ``not-captured`` in
    the deliveries table; no error row).  The report counts them apart, never as unsettled or "none"."""
    if c.loss is None:
        return _NO_LOST
    n = m = cut = 0
    for d in link.live.values():
        if d.settled is None and connection_lost_after(c, d.first_ts):
            n += 1
            if d.outcome is None:
                m += 1
            if unknown_by_cut(c, d.first_ts):
                cut += 1
    for _sender, st, rows in compact_rows(link):  # (a compacted delivery: unsettled, no outcome)
        ft = st.first_ts
        k = sum([1 for i in rows if connection_lost_after(c, ft[i])])
        n += k
        m += k
        cut += sum([1 for i in rows if connection_lost_after(c, ft[i]) and unknown_by_cut(c, ft[i])])
    return LostCounts(n, m, cut)


def lost_totals(an) -> LostCounts:
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
    return LostCounts(n, m, cut)


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
        out["unknown_outcomes"] += sum(_lost_counts(c, link).unknown for link in c.links)
    return out


def summary_outcomes(outcomes: dict, lost: LostCounts) -> dict:
    """The summary's outcome counts: "none" without the deliveries whose outcome is unknown."""
    out = dict(outcomes)
    if lost.no_outcome and out.get("none"):
        out["none"] -= lost.no_outcome
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
        for lk, lk_lost in ((lk, lost[i]) for i, lk in enumerate(links) if lk.get("session") == s.get("session")):
            n_lost = lk_lost.unknown
            s_lost += n_lost
            s_cut += lk_lost.cut
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
                    "outcome_not_captured": lk_lost.cut,  # (of lost_in_capture: unknown for a cut, not loss)
                    "outcomes": {**_pick(lk, *OUTCOMES), "no_outcome": lk["no_outcome"] - lk_lost.no_outcome},
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
            "lost_in_capture": sum(x.unknown for x in lost),
            "outcome_not_captured": sum(x.cut for x in lost),
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


def _without_amqp(c) -> bool:
    """No AMQP frame and no protocol header on connection ``c``."""
    return not (c.frames[0] or c.frames[1] or c.headers[0] or c.headers[1])


def _no_more() -> dict:
    """The counts of the connections not listed (``connections_more``), none yet."""
    return {"connections": 0, "sessions": 0, "links": 0, "deliveries": 0, "violations": 0, "errors": 0,
            "without_amqp": 0}


def _add_more(more: dict, cid, sessions: int, links: int, deliveries: int, without_amqp: bool,
              prob: Problems) -> None:
    """Add one connection not listed to ``more`` (:func:`_no_more`)."""
    more["connections"] += 1
    more["sessions"] += sessions
    more["links"] += links
    more["deliveries"] += deliveries
    more["violations"] += prob.violations_of.get(cid, 0)
    more["errors"] += len(prob.errors_of.get(cid, ()))
    if without_amqp:
        more["without_amqp"] += 1


def _more_connections(an, listed: list, prob: Problems) -> dict | None:
    """What the connections of ``an`` not ``listed`` add up to (one pass, no rows); None if all are."""
    if len(listed) >= len(an.connections):
        return None
    shown = {id(c) for c in listed}
    more = _no_more()
    for c in an.connections.values():
        if id(c) not in shown:
            _add_more(more, c.id, len(c.sessions), len(c.links),
                      sum(an.link_stats(link).deliveries for link in c.links), _without_amqp(c), prob)
    return more


def _problem_summary(prob: Problems, capture_errors) -> dict:
    """The summary's counts of violations, errors, transactions and the capture's errors."""
    return {
        "violations": sum(v.get("count") or 1 for v in prob.violations),
        "errors": len(prob.errors),
        "transactions": len(prob.transactions),
        "capture_errors": list(capture_errors),
    }


def _stall_summary(sums: StallSums, n_stalls: int) -> dict:
    """The summary's stalls and idle periods, of ``n_stalls`` in all."""
    return {
        "stalls": len(sums.real),
        "stalled_seconds": sums.stalled,
        "idle_periods": n_stalls - len(sums.real),
        "idle_seconds": sums.idle,
    }


def _outcome_summary(totals: dict, lost: LostCounts) -> dict:
    """The summary's outcomes and unsettled: without the deliveries whose outcome is unknown
    (``lost_in_capture``)."""
    return {
        "outcomes": summary_outcomes(totals["outcomes"], lost),
        "unsettled": totals["unsettled"] - lost.unknown,
        "lost_in_capture": lost.unknown,
        "outcome_not_captured": lost.cut,
    }


def _connection_totals(an) -> tuple:
    """(sessions, links, presettled deliveries) over every connection of ``an``, listed or not."""
    n_sessions = n_links = presettled = 0
    for c in an.connections.values():
        n_sessions += len(c.sessions)
        n_links += len(c.links)
        presettled += sum(an.link_stats(link).presettled for link in c.links)
    return n_sessions, n_links, presettled


def build_report(an, capture_errors=(), capture: dict | None = None) -> dict:
    """The report document; ``capture``: the inputs, first and last packet times (epoch
    seconds), packets, bytes and duration (``CaptureSource.capture_info()``), its header.

    Bounded in the number of connections: their rows are made for the listed connections only
    (:func:`listed_connections`); the others are counted in ``connections_more``."""
    # stalls: counted and summed from the Stall objects, rows made only for the longest (a long
    # capture has many, and the report shows a few)
    sums = _stall_sums((st.conn.id, an.stall_seconds(st), st.idle(), st) for st in an.stalls)
    prob = _problem_rows(an)
    listed = listed_connections(an, prob.problems)
    n_sessions, n_links, presettled = _connection_totals(an)
    out_conns = [_connection_entry(an, conn, sums.count, sums.seconds, prob.violations_of, prob.errors_of)
                 for conn in listed]
    more = _more_connections(an, listed, prob)
    _add_missing_files(out_conns, capture)
    notable = an.notable_deliveries()
    longest = [an.stall_row(st)
               for st in heapq.nlargest(NOTABLE, sums.real, key=lambda st: an.stall_duration(st) or 0.0)]
    totals = an.delivery_totals()
    lost = lost_totals(an)
    return {
        "capture": _copy(capture),
        "summary": {
            "connections": len(an.connections),
            "sessions": n_sessions,
            "links": n_links,
            "deliveries": totals["deliveries"],
            "deliveries_lost_whole": lost_whole_total(an),
            "deliveries_not_captured": not_captured_total(an),
            **_outcome_summary(totals, lost),
            "one_direction": one_direction_totals(an),
            **_stall_summary(sums, len(an.stalls)),
            **_problem_summary(prob, capture_errors),
            "other_connections": len(an.others),
        },
        "latency_by_address": an.latency_summary(by="address"),
        "connections": out_conns,
        **_more_entry(more),
        # connections of another protocol (AMQP 0-9-1, 0-10, ...): named, counted, not decoded
        "other_protocols": an.other_rows(limit=LISTED_CONNECTIONS),
        "transactions": prob.transactions,
        "violations": prob.violations,
        "notable_deliveries": _notable_entry(notable["slowest_settlement"], notable["not_accepted"],
                                             notable["not_accepted_count"], presettled),
        "longest_stalls": longest,
        "more_stalls": len(sums.real) - len(longest),
        "diagnoses": _diagnoses.diagnose(an),
    }


def _copy(capture: dict | None) -> dict | None:
    return dict(capture) if capture is not None else None


def _more_entry(more: dict | None) -> dict:
    """The report's ``connections_more`` (only when some connections are not listed)."""
    return {"connections_more": more} if more is not None else {}


def _notable_entry(slowest, not_accepted, not_accepted_count: int, presettled: int) -> dict:
    """The report's ``notable_deliveries``: their rows with the report's keys."""
    return {
        "slowest_settlement": [_pick(d, *DELIVERY_KEYS) for d in slowest],
        "not_accepted": [_pick(d, *DELIVERY_KEYS) for d in not_accepted],
        "not_accepted_count": not_accepted_count,
        "presettled": presettled,
    }


# --------------------------------------------------------------------------- -j N: partial reports


def _plus(a, b):
    """a + b, None (unknown) when either is."""
    return None if a is None or b is None else a + b


def _stall_sums(stalls) -> StallSums:
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
    return StallSums(stall_count, stall_secs, stalled, idle_total, real)


def _longest_stall_parts(an, stalls: list) -> list:
    """The worker's ``NOTABLE`` longest stalls (not idle), longest first, with their rows."""
    real = [(part, st) for part, st in zip(stalls, an.stalls) if not part.idle]
    top = sorted(real, key=lambda x: (-(x[0].seconds or 0.0), x[0].key))[:NOTABLE]
    return [LongestStallPart(part.seconds, part.key, an.stall_row(st)) for part, st in top]


def _connection_parts(an, k_conn: dict, problems: dict) -> tuple:
    """(a ConnectionPart per connection of the worker, the presettled deliveries of them all)."""
    conns = []
    presettled = 0
    for c in an.connections.values():
        deliveries = sum(an.link_stats(link).deliveries for link in c.links)
        presettled += sum(an.link_stats(link).presettled for link in c.links)
        conns.append(ConnectionPart(k_conn[c.id], _connection_interest(an, c, problems), c.id, len(c.sessions),
                                    len(c.links), deliveries, _without_amqp(c)))
    return conns, presettled


def _candidate_entries(an, conns: list, sums: StallSums, prob: Problems) -> dict:
    """The entries of the connections this worker would list: the global listing is among them."""
    cand = heapq.nsmallest(LISTED_CONNECTIONS, ((tuple(-x for x in c.interest), c.key, c.connection)
                                                for c in conns))
    return {cid: _connection_entry(an, an.connections[cid], sums.count, sums.seconds, prob.violations_of,
                                   prob.errors_of)
            for _, _, cid in cand}


def _latency_parts(an) -> list:
    """Latency by address: the first link of each address in capture order, and the latencies of
    all its links (a LatencyPart per address)."""
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
    return [LatencyPart(k, addr, v) for addr, (k, v) in lat.items()]


def _keyed_notable(an) -> dict:
    """The notable deliveries, each row with its latency and its table order over the capture."""
    plain_row = an._row

    def keyed_row(d):
        r = plain_row(d)
        r["_order"] = an._order(d)
        r["_lat"] = d.settled[0] - d.first_ts if d.settled is not None else None
        return r

    an._row = keyed_row
    try:
        return an.notable_deliveries()
    finally:
        del an._row


def _worker_capture_parts(d) -> dict:
    """What the worker's dissector ``d`` (None: none) saw of the capture: its connections' TCP gaps
    in files missing from the capture set, the TLS streams on other ports it could not decrypt,
    and the packets in tunnels the parser does not read (shard 0 feeds them)."""
    holes = getattr(d, "holes", None) or ()
    unread = getattr(d, "unread_tunnels", None) or {}
    return {
        "holes": [{"missing": list(h["missing"]), "connections": {c: list(v) for c, v in h["connections"].items()}}
                  for h in holes],
        "tls_unseen": [getattr(d, "tls_unseen_count", 0), [dict(x) for x in getattr(d, "tls_unseen", None) or ()]],
        "unread_tunnels": {k: list(v) for k, v in unread.items()},
    }


def partial_report(an, keys) -> dict:
    """What one worker of ``-j N`` (:mod:`amqp_dissect.pipelines.runs.parallel`) adds to the report:
    ``keys`` (its FlowWorker) gives each listed item its place in the whole capture.  The flows
    of a connection are all in one worker, so everything per connection is complete here;
    :func:`merge_reports` puts the workers' parts together into :func:`build_report`'s document."""
    from .analytics import NOT_ACCEPTED

    k_conn = keys.k_conn
    stalls = [StallPart(k, st.conn.id, an.stall_seconds(st), st.idle()) for st, k in zip(an.stalls, keys.k_stall)]
    sums = _stall_sums((s.connection, s.seconds, s.idle, None) for s in stalls)
    longest = _longest_stall_parts(an, stalls)
    prob = _problem_rows(an)
    nfe = len(an.frame_errors)
    conns, presettled = _connection_parts(an, k_conn, prob.problems)
    entries = _candidate_entries(an, conns, sums, prob)
    latency = _latency_parts(an)
    notable = _keyed_notable(an)
    totals = an.delivery_totals()
    return {
        "stalls": stalls,
        "longest": longest,
        "violations": list(zip(keys.k_viol, prob.violations)),
        "frame_errors": list(zip(keys.k_ferr, prob.errors[:nfe])),
        "analysis_errors": [((k_conn[r["connection"]], i), r) for i, r in enumerate(prob.errors[nfe:])],
        "transactions": list(zip(keys.k_txn, prob.transactions)),
        "connections": conns,
        "entries": entries,
        "presettled": presettled,
        "latency": latency,
        "slowest": notable["slowest_settlement"],
        "not_accepted": notable["not_accepted"][:NOT_ACCEPTED],
        "not_accepted_count": notable["not_accepted_count"],
        "totals": totals,
        "lost": lost_totals(an),
        "lost_whole": lost_whole_total(an),
        "not_captured": not_captured_total(an),
        "one_direction": one_direction_totals(an),
        "others": an.other_rows(limit=LISTED_CONNECTIONS),
        "others_count": len(an.others),
        "diagnoses": _diagnoses.diagnose_part(an, k_conn),
        **_worker_capture_parts(getattr(keys, "d", None)),
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


def _merged(parts: list, name: str) -> list:
    """The workers' ``(key, item)`` lists ``name``: their items in the order of their keys."""
    return [x for _, x in heapq.merge(*[p[name] for p in parts], key=lambda kx: kx[0])]


def _listed_of_parts(conns: list) -> list:
    """The ids of the connections the report lists (of ConnectionParts in capture order): all up to
    ``LISTED_CONNECTIONS``, beyond, those with the most to show, in capture order."""
    if len(conns) <= LISTED_CONNECTIONS:
        return [c.connection for c in conns]
    top = heapq.nsmallest(LISTED_CONNECTIONS, ((tuple(-x for x in c.interest), c.key, c.connection) for c in conns))
    return [cid for _, _, cid in sorted(top, key=lambda t: t[1])]


def _more_of_parts(conns: list, listed: list, prob: Problems) -> dict | None:
    """What the ConnectionParts not ``listed`` add up to; None if all are listed."""
    if len(listed) >= len(conns):
        return None
    shown = set(listed)
    more = _no_more()
    for c in conns:
        if c.connection not in shown:
            _add_more(more, c.connection, c.sessions, c.links, c.deliveries, c.without_amqp, prob)
    return more


def _with_worker_gaps(capture: dict | None, parts: list) -> dict | None:
    """``capture`` with the workers' TCP gaps in the missing files, per connection (each worker has
    its flows')."""
    if capture is None or not capture.get("gaps"):
        return capture
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
    return capture


def _with_worker_tls(capture: dict | None, parts: list) -> dict | None:
    """``capture`` with the workers' TLS streams not decrypted, in place of the reading process's own count."""
    seen = [p["tls_unseen"] for p in parts if "tls_unseen" in p]
    if capture is None or not seen:
        return capture
    capture = dict(capture)
    capture.pop("tls_not_decrypted", None)
    n = sum(count for count, _ in seen)
    if n:
        first = sorted((x for _, streams in seen for x in streams), key=lambda x: (x["packet"], x["connection"]))
        capture["tls_not_decrypted"] = {"streams": n, "first": first[:20]}  # (as many as a dissector keeps)
    return capture


def _with_worker_tunnels(capture: dict | None, parts: list) -> dict | None:
    """``capture`` with the workers' packets in tunnels not read, in place of the reading process's own count."""
    if capture is None or not any("unread_tunnels" in p for p in parts):
        return capture
    capture = dict(capture)
    capture.pop("tunnels_not_read", None)
    unread = tunnels_not_read([p["unread_tunnels"] for p in parts if p.get("unread_tunnels")])
    if unread:
        capture["tunnels_not_read"] = unread
    return capture


def _merged_latency(parts: list) -> list:
    """The report's ``latency_by_address`` from the workers' LatencyParts."""
    from ..model.stats import Latencies
    from .analytics import summarize

    groups: dict = {}
    for part in sorted((x for p in parts for x in p["latency"]), key=lambda x: x.key):
        g = groups.get(part.address)
        if g is None:
            g = groups[part.address] = Latencies()
        g.extend(part.latencies)
    return [{"address": addr, **summarize(vals)} for addr, vals in groups.items()]


def _merged_totals(parts: list) -> dict:
    """:meth:`Analyzer.delivery_totals` over the workers: deliveries, unsettled, outcomes."""
    from ..model.stats import TERMINAL_OUTCOMES_ORDER

    counts: dict = {}
    for p in parts:
        for k, n in p["totals"]["outcomes"].items():
            counts[k] = counts.get(k, 0) + n
    outcomes = {k: counts[k] for k in TERMINAL_OUTCOMES_ORDER if counts.get(k)}
    if counts.get("none"):
        outcomes["none"] = counts["none"]
    return {"deliveries": sum(p["totals"]["deliveries"] for p in parts),
            "unsettled": sum(p["totals"]["unsettled"] for p in parts), "outcomes": outcomes}


def _merged_lost(parts: list) -> LostCounts:
    """The workers' LostCounts added up."""
    return LostCounts(sum(p["lost"].unknown for p in parts), sum(p["lost"].no_outcome for p in parts),
                      sum(p["lost"].cut for p in parts))


def _merged_notable(parts: list) -> dict:
    """The report's ``notable_deliveries`` from the workers' keyed rows."""
    from .analytics import NOT_ACCEPTED

    slowest = sorted((r for p in parts for r in p["slowest"]), key=lambda r: (-r["_lat"], r["_order"]))[:NOTABLE]
    not_accepted = sorted((r for p in parts for r in p["not_accepted"]), key=lambda r: r["_order"])[:NOT_ACCEPTED]
    return _notable_entry(slowest, not_accepted, sum(p["not_accepted_count"] for p in parts),
                          sum(p["presettled"] for p in parts))


def _merged_delivery_summary(parts: list) -> dict:
    """The summary's deliveries, outcomes and unknown outcomes over the workers."""
    totals = _merged_totals(parts)
    return {
        "deliveries": totals["deliveries"],
        "deliveries_lost_whole": sum(p.get("lost_whole", 0) for p in parts),
        "deliveries_not_captured": sum(p.get("not_captured", 0) for p in parts),
        **_outcome_summary(totals, _merged_lost(parts)),
        "one_direction": {k: sum(p["one_direction"][k] for p in parts) for k in ONE_DIRECTION_KEYS},
    }


def merge_reports(parts: list, capture_errors=(), capture: dict | None = None) -> dict:
    """:func:`build_report`'s document from the workers' :func:`partial_report` parts."""
    stalls = heapq.merge(*[p["stalls"] for p in parts], key=lambda s: s.key)
    sums = _stall_sums((s.connection, s.seconds, s.idle, None) for s in stalls)
    longest = sorted((x for p in parts for x in p["longest"]), key=lambda x: (-(x.seconds or 0.0), x.key))[:NOTABLE]
    violations = _merged(parts, "violations")
    errors = _merged(parts, "frame_errors") + _merged(parts, "analysis_errors")
    prob = Problems(violations, errors, _merged(parts, "transactions"), _violations_by_connection(violations),
                    _by_connection(errors), {})
    conns = sorted((c for p in parts for c in p["connections"]), key=lambda c: c.key)
    entries = {}
    for p in parts:
        entries.update(p["entries"])
    listed = _listed_of_parts(conns)
    out_conns = [entries[cid] for cid in listed]
    capture = _with_worker_gaps(capture, parts)
    _add_missing_files(out_conns, capture)
    capture = _with_worker_tunnels(_with_worker_tls(capture, parts), parts)
    return {
        "capture": _copy(capture),
        "summary": {
            "connections": len(conns),
            "sessions": sum(c.sessions for c in conns),
            "links": sum(c.links for c in conns),
            **_merged_delivery_summary(parts),
            **_stall_summary(sums, sum(len(p["stalls"]) for p in parts)),
            **_problem_summary(prob, capture_errors),
            "other_connections": sum(p.get("others_count", 0) for p in parts),
        },
        "latency_by_address": _merged_latency(parts),
        "connections": out_conns,
        **_more_entry(_more_of_parts(conns, listed, prob)),
        "other_protocols": sorted((o for p in parts for o in p.get("others", ())),
                                  key=lambda o: (o["first_packet"] or 0, o["connection"]))[:LISTED_CONNECTIONS],
        "transactions": prob.transactions,
        "violations": violations,
        "notable_deliveries": _merged_notable(parts),
        "longest_stalls": [x.row for x in longest],
        "more_stalls": len(sums.real) - len(longest),
        "diagnoses": _diagnoses.merge_parts([p["diagnoses"] for p in parts if p.get("diagnoses")]),
    }
