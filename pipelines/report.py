"""The ``amqp-dissect report``: one document, rendered as text or JSON.

The document is a connection -> session -> link tree (peers, container-ids,
addresses, settle modes, deliveries by outcome, latency percentiles, stall
counts and stalled time, errors), the protocol violations, and the notable
deliveries (slowest settlements, non-accepted outcomes, unsettled) and the
longest stalls.
"""

from __future__ import annotations

import datetime as _dt

NOTABLE = 10  # rows per "notable" list


def _pick(row: dict, *keys) -> dict:
    return {k: row.get(k) for k in keys}


def build_report(an, capture_errors=()) -> dict:
    conns = an.connection_rows()
    sessions = an.session_rows()
    links = an.link_rows()
    deliveries = an.delivery_rows()
    stalls = an.stall_rows()
    violations = an.violation_rows()
    errors = an.error_rows()
    txns = an.transaction_rows()

    out_conns = []
    for c in conns:
        cid = c["connection"]
        c_sessions = []
        for s in (s for s in sessions if s["connection"] == cid):
            s_links = []
            for lk in (lk for lk in links if lk["connection"] == cid and lk.get("session") == s.get("session")):
                s_links.append(
                    {
                        **_pick(lk, "name", "handle", "role", "sender", "receiver", "address", "source", "target",
                                "snd_settle_mode", "snd_settle_mode_default", "rcv_settle_mode",
                                "rcv_settle_mode_default", "coordinator", "refused", "deliveries", "presettled",
                                "unsettled", "aborted", "detach_error", "detach_description", "unknown"),
                        "outcomes": _pick(lk, "accepted", "rejected", "released", "modified", "declared", "no_outcome"),
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
                            "end_error", "end_description", "deliveries", "unsettled", "unknown"),
                    "links": s_links,
                }
            )
        c_stalls = [st for st in stalls if st["connection"] == cid]
        out_conns.append(
            {
                **_pick(c, "connection", "client", "server", "container_id_client", "container_id_server",
                        "hostname", "sasl_mechanism", "sasl_outcome", "max_frame_size_client",
                        "max_frame_size_server", "idle_time_out_client", "idle_time_out_server", "open_time",
                        "close_time", "closed_by", "close_error", "close_description", "transport_end",
                        "mid_connection", "lossy", "tls", "unknown"),
                "deliveries": c.get("deliveries"),
                "stalls": len(c_stalls),
                "stalled_seconds": sum(st["duration"] or 0.0 for st in c_stalls),
                "violations": sum(1 for v in violations if v["connection"] == cid),
                "errors": [e for e in errors if e["connection"] == cid],
                "sessions": c_sessions,
            }
        )

    def lat(d):
        return d.get("settlement_latency")

    slowest = sorted((d for d in deliveries if lat(d) is not None), key=lat, reverse=True)[:NOTABLE]
    not_accepted = [d for d in deliveries if d.get("outcome") not in ("accepted", "declared")][: NOTABLE * 5]
    delivery_keys = ("connection", "channel", "link", "delivery_id", "delivery_tag", "sender", "first_time",
                     "first_packet", "frames", "message_size", "presettled", "aborted", "settled_by",
                     "settled_time", "outcome", "outcome_error", "settlement_latency", "unsettled_at")
    longest = sorted(stalls, key=lambda s: s.get("duration") or 0.0, reverse=True)[:NOTABLE]
    outcome_totals: dict = {}
    for d in deliveries:
        key = d.get("outcome") or "none"
        outcome_totals[key] = outcome_totals.get(key, 0) + 1
    return {
        "summary": {
            "connections": len(conns),
            "sessions": len(sessions),
            "links": len(links),
            "deliveries": len(deliveries),
            "outcomes": outcome_totals,
            "unsettled": sum(1 for d in deliveries if not d.get("settled_by")),
            "stalls": len(stalls),
            "stalled_seconds": sum(s["duration"] or 0.0 for s in stalls),
            "violations": len(violations),
            "errors": len(errors),
            "transactions": len(txns),
            "capture_errors": list(capture_errors),
        },
        "latency_by_address": an.latency_summary(by="address"),
        "connections": out_conns,
        "transactions": txns,
        "violations": violations,
        "notable_deliveries": {
            "slowest_settlement": [_pick(d, *delivery_keys) for d in slowest],
            "not_accepted": [_pick(d, *delivery_keys) for d in not_accepted],
        },
        "longest_stalls": longest,
    }


# --------------------------------------------------------------------------- text


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:.3f} ms"


def _t(x) -> str:
    if x is None:
        return "-"
    return _dt.datetime.fromtimestamp(x, _dt.timezone.utc).strftime("%H:%M:%S.%f")


def _one_line(text, limit: int = 160) -> str:
    """Descriptions can be long and multi-line (brokers dump internal state): one line."""
    if text is None:
        return ""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def _v(x) -> str:
    return "-" if x is None else str(x)


def _q(x) -> str:
    """A name, quoted; '(unknown)' when the capture did not show it."""
    return "(unknown)" if x is None else repr(x)


def _default(value, is_default) -> str:
    return f"{value} (default)" if is_default else f"{value}"


def render_text(rep: dict) -> str:
    s = rep["summary"]
    lines = [
        "AMQP 1.0 capture report",
        "=======================",
        f"connections {s['connections']}, sessions {s['sessions']}, links {s['links']}, "
        f"deliveries {s['deliveries']} ({', '.join(f'{k} {v}' for k, v in sorted(s['outcomes'].items())) or 'none'}), "
        f"unsettled {s['unsettled']}",
        f"stalls {s['stalls']} ({s['stalled_seconds']:.3f} s stalled), violations {s['violations']}, "
        f"errors {s['errors']}, transactions {s['transactions']}",
    ]
    for ce in s["capture_errors"]:
        lines.append(f"capture damaged: {ce}")
    for c in rep["connections"]:
        lines.append("")
        lines.append(f"Connection {c['connection']}")
        lines.append(f"  client {c['client']}  container-id {_q(c['container_id_client'])}")
        lines.append(f"  server {c['server']}  container-id {_q(c['container_id_server'])}")
        sasl = c["sasl_mechanism"]
        if sasl or c["sasl_outcome"]:
            lines.append(f"  SASL {sasl or '-'} -> {c['sasl_outcome'] or '-'}")
        lines.append(
            f"  max-frame-size client {_v(c['max_frame_size_client'])} / server {_v(c['max_frame_size_server'])}, "
            f"idle-time-out client {_v(c['idle_time_out_client'])} / server {_v(c['idle_time_out_server'])} ms"
        )
        flags = [k for k in ("mid_connection", "lossy", "tls") if c.get(k)]
        if flags:
            lines.append(f"  note: {', '.join(flags)}")
        if c.get("unknown"):
            lines.append(f"  not visible in the capture: {', '.join(map(str, c['unknown']))}")
        lines.append(
            f"  opened {_t(c['open_time'])}, closed {_t(c['close_time'])} by {c['closed_by'] or '-'}"
            f", transport end {c['transport_end'] or '-'}; deliveries {c['deliveries']}, stalls {c['stalls']} "
            f"({c['stalled_seconds']:.3f} s), violations {c['violations']}"
        )
        for sess in c["sessions"]:
            lines.append(
                f"  Session {sess['session']}: channel client {sess['channel_client']} <-> server "
                f"{sess['channel_server']}, deliveries {sess['deliveries']}, unsettled {sess['unsettled']}"
                + (f", ended with {sess['end_error']}: {_one_line(sess['end_description'])}" if sess.get("end_error") else "")
            )
            for lk in sess["links"]:
                o = lk["outcomes"]
                lines.append(
                    f"    Link {_q(lk['name'])} handle {_v(lk['handle'])}: {lk['sender'] or '?'} -> {lk['receiver'] or '?'}"
                    f"  address {lk['address'] or '?'}"
                )
                lines.append(
                    f"      snd-settle-mode {_default(_v(lk['snd_settle_mode']), lk['snd_settle_mode_default'])}, "
                    f"rcv-settle-mode {_default(_v(lk['rcv_settle_mode']), lk['rcv_settle_mode_default'])}"
                    + (", coordinator" if lk.get("coordinator") else "")
                    + (", refused by the peer" if lk.get("refused") else "")
                )
                lines.append(
                    f"      deliveries {lk['deliveries']}: accepted {o['accepted']}, rejected {o['rejected']}, "
                    f"released {o['released']}, modified {o['modified']}, none {o['no_outcome']}; presettled "
                    f"{lk['presettled']}, unsettled {lk['unsettled']}, aborted {lk['aborted']}"
                )
                la = lk["latency"]
                if la["latency_max"] is not None:
                    lines.append(
                        f"      settlement latency p50 {_ms(la['latency_p50'])}, p90 {_ms(la['latency_p90'])}, "
                        f"p99 {_ms(la['latency_p99'])}, max {_ms(la['latency_max'])}"
                    )
                if lk["stalls"]:
                    lines.append(f"      stalls {lk['stalls']} ({lk['stalled_seconds']:.3f} s)")
                if lk.get("detach_error"):
                    lines.append(f"      detached with {lk['detach_error']}: {_one_line(lk['detach_description'])}")
                if lk.get("unknown"):
                    lines.append(f"      not visible in the capture: {', '.join(map(str, lk['unknown']))}")
        if c["errors"]:
            lines.append("  Errors:")
            for e in c["errors"]:
                where = e["scope"] + (f" {_q(e['link'])}" if e.get("link") else "")
                lines.append(
                    f"    {where}: {e['condition']}"
                    + (f": {_one_line(e['description'])}" if e.get("description") else "")
                    + (f" (x{e['count']})" if (e.get("count") or 1) > 1 else "")
                    + (f" [packet {e['packet']}]" if e.get("packet") else "")
                )
    if rep["violations"]:
        lines.append("")
        lines.append("Protocol violations")
        for v in rep["violations"][:50]:
            lines.append(f"  packet {v['packet']} {v['connection']} ch {_v(v['channel'])}: [{v['kind']}] {_one_line(v['message'])}")
        if len(rep["violations"]) > 50:
            lines.append(f"  ... {len(rep['violations']) - 50} more (--format json lists all)")
    nd = rep["notable_deliveries"]
    if nd["slowest_settlement"]:
        lines.append("")
        lines.append("Slowest settlements")
        for d in nd["slowest_settlement"]:
            lines.append(
                f"  {_ms(d['settlement_latency']):>12}  delivery {d['delivery_id']} on {_q(d['link'])} "
                f"({d['frames']} frames, {d['message_size']} bytes) outcome {d['outcome'] or '-'}, "
                f"settled by {d['settled_by'] or '-'}  [packet {d['first_packet']}]"
            )
    if nd["not_accepted"]:
        lines.append("")
        lines.append("Deliveries not accepted")
        for d in nd["not_accepted"]:
            state = d["outcome"] or ("unsettled at " + d["unsettled_at"] if d.get("unsettled_at") else "no outcome")
            lines.append(
                f"  delivery {d['delivery_id']} on {_q(d['link'])}: {state}"
                + (f" ({d['outcome_error']})" if d.get("outcome_error") else "")
                + (" aborted" if d.get("aborted") else "")
                + f"  [packet {d['first_packet']}]"
            )
    if rep["longest_stalls"]:
        lines.append("")
        lines.append("Longest stalls")
        for st in rep["longest_stalls"]:
            lines.append(
                f"  {_ms(st['duration']):>12}  {st['kind']:<15} link {_q(st['link'])} ch {_v(st['channel'])} "
                f"from packet {st['start_packet']} to {st['end_packet'] if st['end_packet'] else 'end (open)'}"
                + ("" if st.get("waiting") is None else f", messages waiting: {'yes' if st['waiting'] else 'no'}")
            )
    return "\n".join(lines) + "\n"
