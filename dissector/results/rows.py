"""The table rows of an :class:`~amqp_dissect.results.analytics.Analyzer` other than the deliveries:
connections, sessions, links, stalls, transactions, violations and errors (the columns are described
in :mod:`amqp_dissect.results.analytics`).

Plain functions of the analyzer (``connection_row(an, c)``); the Analyzer's methods of the same
names call them.  They run once per table or per connection, link, stall: the per-delivery work
(the deliveries table, the notable deliveries) stays in the Analyzer.
"""

from __future__ import annotations

import math

from ..amqp.spec import OUTCOMES, choice_name
from ..model.deliveries import compact_rows, link_deliveries
from ..model.transitions import SIDES
from .percentiles import summarize

__all__ = [
    "connection_rows", "other_rows", "iter_connection_rows", "connection_row", "session_rows",
    "connection_session_rows", "link_rows", "connection_link_rows", "link_row", "stall_rows", "stall_row",
    "transaction_rows", "violation_rows", "error_rows",
]


# -- connections --------------------------------------------------------------------------------

def time_of(x):
    return None if x is None else x[0]


def packet_of(x):
    return None if x is None else x[1]


def connection_lost_after(c, ts) -> bool:
    """Did either peer of connection ``c`` lose bytes (a TCP gap, bytes skipped to resynchronise)
    noticed after time ``ts``?  Then a frame sent after ``ts`` (a settling disposition, an end, a
    detach) may be among them."""
    loss = c.loss
    if loss is None or ts is None:
        return False
    return loss.lost_after(0, ts) or loss.lost_after(1, ts)


def unknown_by_cut(c, ts) -> bool:
    """Is a delivery of ``c`` first transferred at ``ts``, whose outcome is unknown (:func:`connection_lost_after`),
    unknown for a cut of the snap length only (no gap after ``ts``, both directions captured)?"""
    loss = c.loss
    return (loss is not None and c.one_way < 0
            and not (loss.lost_in_gap_after(0, ts) or loss.lost_in_gap_after(1, ts)))


def connection_rows(an) -> list[dict]:
    return [an.connection_row(c) for c in an.connections.values()]


def other_rows(an, limit: int | None = None) -> list[dict]:
    """The connections of another protocol than AMQP 1.0 (``an.others``: a protocol header of AMQP
    0-9-1, 0-10, ... in either direction), not decoded: protocol (the first such header's name),
    the protocol headers each side sent, the bytes each side sent (headers included), first and
    last packet, transport end.  ``limit``: the first ones only."""
    rows = []
    for c in an.others.values():
        if limit is not None and len(rows) >= limit:
            break
        o = an.other_info[c.id]
        rows.append({
            "connection": c.id, "client": c.client, "server": c.server, "protocol": o["protocol"],
            "decoded": False,
            "protocol_headers_client": list(o["headers_client"]),
            "protocol_headers_server": list(o["headers_server"]),
            "bytes_client": o.get("bytes_client"), "bytes_server": o.get("bytes_server"),
            "first_time": c.first_ts, "first_packet": c.first_packet,
            "last_time": c.last_ts, "last_packet": c.last_packet, "transport_end": c.transport_end,
        })
    return rows


def iter_connection_rows(an):
    """:func:`connection_rows` one at a time (a writer that streams them holds a batch of rows,
    not one per connection)."""
    for c in an.connections.values():
        yield an.connection_row(c)


def _by_connection(an) -> tuple:
    """Violation counts and frame errors by connection id, indexed once (and again only when
    either list has grown): a connection's row does not scan every violation."""
    key = (len(an.violations), len(an.frame_errors))
    idx = getattr(an, "_conn_index", None)
    if idx is None or idx[0] != key:
        counts: dict = {}
        for v in an.violations:
            cid = v["connection"]
            counts[cid] = counts.get(cid, 0) + (v.get("count") or 1)
        errors: dict = {}
        for e in an.frame_errors:
            errors.setdefault(e["connection"], []).append(e)
        idx = an._conn_index = (key, counts, errors)
    return idx


#: expert-note groups of the stream layers whose notes say what a connection is wrapped in
LAYER_GROUPS = ("tls", "websocket")
_NO_LAYERS = {"tls_version": None, "tls_cipher": None, "websocket": False, "ws_path": None}


def layer_fact(facts: dict, conn: str, message: str) -> None:
    """Keep in ``facts[conn]`` what a TLS or WebSocket layer's note says about the connection:
    the TLS version and cipher suite of its handshake (``TLS handshake: TLS 1.3,
    TLS_AES_256_GCM_SHA384; ...``, dissector/capture/tls.py) and the path of an AMQP WebSocket
    upgrade (``WebSocket upgrade GET /amqp, subprotocol amqp``, dissector/capture/websocket.py;
    not one it ignores as not AMQP).  The first of each is kept."""
    if message.startswith("TLS handshake: "):
        parts = message[len("TLS handshake: "):].split(";")[0].split(", ")
        f = facts.setdefault(conn, dict(_NO_LAYERS))
        if f["tls_version"] is None and len(parts) >= 2:
            f["tls_version"] = parts[0]
            f["tls_cipher"] = parts[1]
    elif message.startswith("WebSocket upgrade GET ") and "not an AMQP WebSocket" not in message:
        f = facts.setdefault(conn, dict(_NO_LAYERS))
        if not f["websocket"]:
            f["websocket"] = True
            f["ws_path"] = message[len("WebSocket upgrade GET "):].rsplit(", subprotocol ", 1)[0]


def _field(rec, key):
    """``rec[key]``, None when there is no record."""
    return rec[key] if rec else None


def _first_and_failed(an, pair) -> tuple:
    """(the first of a close / end / detach pair as (side, record), the first of them with an
    error), each None when none."""
    found = [(e, x) for e, x in enumerate(pair) if x is not None]
    first = min(found, key=lambda ex: an.time_key(ex[1]), default=None)
    failed = next((x for _, x in sorted(found, key=lambda ex: an.time_key(ex[1])) if x["error"]), None)
    return first, failed


def _error_of(failed, what: str) -> dict:
    """The ``<what>_error`` and ``<what>_description`` columns of the first record with an error."""
    err = failed["error"] if failed else None
    return {f"{what}_error": _field(err, "condition"), f"{what}_description": _field(err, "description")}


def _connection_unknown(c) -> list:
    """What is not known of a connection: its own list, and the opens and SASL a capture that
    started mid-connection or lost bytes may not hold."""
    unknown = list(c.unknown)
    if not c.known_start or c.lossy:
        for e in (0, 1):
            if c.open[e] is None and c.close[e] is None:
                unknown.append(f"open ({SIDES[e]})")
        if not c.known_start and not c.sasl:
            unknown.append("sasl")
    return unknown


def _open_columns(o) -> dict:
    """The columns of each side's open: max-frame-size, channel-max (and whether defaulted), idle time-out."""
    row = {}
    for key in ("max_frame_size", "channel_max"):
        for e in (0, 1):
            row[f"{key}_{SIDES[e]}"] = _field(o[e], key)
            row[f"{key}_{SIDES[e]}_default"] = _field(o[e], f"{key}_default")
    for e in (0, 1):
        row[f"idle_time_out_{SIDES[e]}"] = _field(o[e], "idle_time_out")
    return row


def _loss_columns(loss) -> dict:
    """Per side: the TCP gaps, the bytes they missed, the bytes skipped undecoded (0: no loss)."""
    row = {}
    for e in (0, 1):
        row[f"gaps_{SIDES[e]}"] = loss.gaps[e] if loss is not None else 0
        row[f"gap_bytes_{SIDES[e]}"] = loss.missing[e] if loss is not None else 0
        row[f"undecoded_bytes_{SIDES[e]}"] = loss.skipped[e] if loss is not None else 0
    return row


def _cut_columns(loss) -> dict:
    """Per side the bytes the snap length cut off, and the snap length (None: no cut)."""
    if loss is None:
        return {"not_captured_bytes_client": 0, "not_captured_bytes_server": 0, "snap_length": None}
    return {"not_captured_bytes_client": loss.cut[0], "not_captured_bytes_server": loss.cut[1],
            "snap_length": loss.snap_length}


def connection_row(an, c) -> dict:
    """The connections-table row of one connection (a ``an.connections`` value)."""
    o, cl = c.open, c.close
    first_open = min((x for x in o if x is not None), key=lambda x: an.time_key(x), default=None)
    first_close, err_close = _first_and_failed(an, cl)
    _key, violations_of, errors_of = _by_connection(an)
    errors = [
        {"condition": e["condition"], "description": e["description"], "scope": e["scope"],
         "side": e["side"], "channel": e["channel"], "link": e["link"]}
        for e in errors_of.get(c.id, ())
    ]
    row = {
        "connection": c.id,
        "client": c.client,
        "server": c.server,
        "syn_seen": c.syn_seen,
        "mid_connection": not c.known_start,
        "lossy": c.lossy,
        "missing_direction": SIDES[c.one_way] if c.one_way >= 0 else None,
        "tls": c.tls,
        "tls_undecrypted_bytes": c.tls_undecrypted,
        "tls_note": c.tls_reason,
        **getattr(an, "layer_facts", {}).get(c.id, _NO_LAYERS),
        "protocol_headers_client": list(c.headers[0]),
        "protocol_headers_server": list(c.headers[1]),
        "negotiation": c.negotiation,
        "sasl": c.sasl,
        "sasl_mechanisms": c.sasl_mechanisms,
        "sasl_mechanism": c.sasl_mechanism,
        "sasl_hostname": c.sasl_hostname,
        "sasl_outcome": _sasl_code(c.sasl_outcome),
        "sasl_outcome_code": c.sasl_outcome,
        "sasl_frames_client": c.sasl_frames[0],
        "sasl_frames_server": c.sasl_frames[1],
        "container_id_client": _field(o[0], "container_id"),
        "container_id_server": _field(o[1], "container_id"),
        "hostname": _field(o[0], "hostname"),
        **_open_columns(o),
        "open_time": _field(first_open, "time"),
        "open_time_client": _field(o[0], "time"),
        "open_time_server": _field(o[1], "time"),
        "close_time": first_close[1]["time"] if first_close else None,
        "close_time_client": _field(cl[0], "time"),
        "close_time_server": _field(cl[1], "time"),
        "closed_by": _first_by(c, cl, first_close, c.last_frame),
        **_error_of(err_close, "close"),
        "errors": errors,
        "sessions": len(c.sessions),
        "links": len(c.links),
        "deliveries": sum(an.link_stats(link).deliveries for link in c.links),
        "frames_client": c.frames[0],
        "frames_server": c.frames[1],
        "frame_counts_client": dict(c.frame_counts[0]),
        "frame_counts_server": dict(c.frame_counts[1]),
        "heartbeats_client": c.heartbeats[0],
        "heartbeats_server": c.heartbeats[1],
        "state": {"client": c.state[0], "server": c.state[1]},
        "state_client": c.state[0],
        "state_server": c.state[1],
        "transport_end": c.transport_end,
        "transport_end_time": c.transport_time,
        "first_time": c.first_ts,
        "last_time": c.last_ts,
        "first_packet": c.first_packet,
        "last_packet": c.last_packet,
        "violations": violations_of.get(c.id, 0),
        "stalls": sum(1 for st in c.stalls if not st.idle()),
        "unknown": _connection_unknown(c),
        **_loss_columns(c.loss),
        "inferred": list(c.inferred or ()),
        **_cut_columns(c.loss),
    }
    return row


# -- sessions ------------------------------------------------------------------------------------

def session_rows(an) -> list[dict]:
    return [row for c in an.connections.values() for row in an.connection_session_rows(c)]


def connection_session_rows(an, c) -> list[dict]:
    """The sessions-table rows of one connection."""
    return [_session_row(an, c, s) for s in c.sessions]


def _begin_columns(b) -> dict:
    """The columns of each side's begin: its time, its fields, whether handle-max was defaulted."""
    row = {}
    for e in (0, 1):
        row[f"begin_time_{SIDES[e]}"] = _field(b[e], "time")
    for key in ("next_outgoing_id", "incoming_window", "outgoing_window", "handle_max"):
        for e in (0, 1):
            row[f"{key}_{SIDES[e]}"] = _field(b[e], key)
    for e in (0, 1):
        row[f"handle_max_{SIDES[e]}_default"] = _field(b[e], "handle_max_default")
    return row


def _window_columns(s) -> dict:
    """Per side: the session's last window values, its transfers and flows."""
    row = {}
    for e in (0, 1):
        side = SIDES[e]
        row[f"next_outgoing_id_final_{side}"] = s.noid[e]
        row[f"incoming_window_last_{side}"] = s.last_iw[e]
        row[f"outgoing_window_last_{side}"] = s.last_ow[e]
        row[f"remote_incoming_window_{side}"] = s.riw(e)
        row[f"transfers_{side}"] = s.transfers[e]
        row[f"flows_{side}"] = s.flows[e]
    return row


def _session_row(an, c, s) -> dict:
    """The sessions-table row of session ``s`` of connection ``c``."""
    b, en = s.begin, s.end
    firstb = min((x for x in b if x is not None), key=lambda x: an.time_key(x), default=None)
    first_end, err_end = _first_and_failed(an, en)
    lstats = [an.link_stats(link) for link in s.links]
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "channel_client": s.channel[0],
        "channel_server": s.channel[1],
        "initiator": _side(s.initiator),
        "begin_time": _field(firstb, "time"),
        "begin_packet": _field(firstb, "packet"),
        **_begin_columns(b),
        **_window_columns(s),
        "end_time": first_end[1]["time"] if first_end else None,
        "end_time_client": _field(en[0], "time"),
        "end_time_server": _field(en[1], "time"),
        "ended_by": _first_by(c, en, first_end, [_field(x, "time") for x in s.begin]),
        **_error_of(err_end, "end"),
        "terminated": s.terminated,
        "state_client": s.state[0],
        "state_server": s.state[1],
        "links": len(s.links),
        "deliveries": sum(x.deliveries for x in lstats),
        "unsettled": sum(x.unsettled for x in lstats),
        "unseen_dispositions": s.unseen_dispositions,
        "late_dispositions": s.late_dispositions,
        "deliveries_lost_whole": s.lost_whole,
        "deliveries_not_captured": s.not_captured,
        "unknown": list(s.unknown),
        "not_captured_outcomes": dict(s.cut_outcomes) if s.cut_outcomes else None,
    }


# -- links ---------------------------------------------------------------------------------------

def link_rows(an) -> list[dict]:
    return [row for c in an.connections.values() for row in an.connection_link_rows(c)]


def connection_link_rows(an, c) -> list[dict]:
    """The links-table rows of one connection."""
    return [link_row(an, c, link) for link in c.links]


def _link_refused(an, a, sd) -> bool:
    """Was the link refused: the answering attach (the later of two) has a null source (the sender
    answering) or a null target (the receiver)."""
    if a[0] is None or a[1] is None or sd is None:
        return False
    second = max((0, 1), key=lambda e: (an.time_key(a[e]), e))
    return bool(a[second]["source_null"] if second == sd else a[second]["target_null"])


def _link_unknown(an, link, sd, attaches: list) -> list:
    """What is not known of a link: its own list, its role (attached, sender not known), its
    address (no attach seen)."""
    unknown = list(link.unknown)
    if (link.known or link.attach[0] or link.attach[1]) and sd is None:
        unknown.append("role")
    if not attaches and an._link_address(link) is None and "address" not in unknown and not link.coordinator:
        unknown.append("address")
    return unknown


def _link_handle(link, sd):
    """The link's handle: the sender's; its sender not known, the first peer's that has one."""
    h = link.handle
    if sd is not None:
        return h[sd]
    return h[0] if h[0] is not None else h[1]


def _role_columns(c, sd) -> dict:
    if sd is None:
        return {"role": None, "sender_side": None, "sender": None, "receiver": None}
    return {"role": "sender" if sd == 0 else "receiver", "sender_side": _side(sd), "sender": c.peer(sd),
            "receiver": c.peer(1 - sd)}


def _settle_mode_columns(a, sd) -> dict:
    """The settle modes: the sender's snd-settle-mode and the receiver's rcv-settle-mode (either
    attach when one is missing), and the max-message-size the receiver (else the sender) asked."""
    snd_att = a[sd] if sd is not None else None
    rcv_att = a[1 - sd] if sd is not None else None
    any_att = snd_att or rcv_att or a[0] or a[1]
    sm_att = snd_att or rcv_att or any_att
    rm_att = rcv_att or snd_att or any_att
    return {
        "snd_settle_mode": _field(sm_att, "snd_settle_mode"),
        "snd_settle_mode_default": _field(sm_att, "snd_settle_mode_default"),
        "rcv_settle_mode": _field(rm_att, "rcv_settle_mode"),
        "rcv_settle_mode_default": _field(rm_att, "rcv_settle_mode_default"),
    }, (rcv_att or snd_att or {}).get("max_message_size")


def _latency_columns(prefix: str, latencies) -> dict:
    ls = summarize(latencies)
    return {f"{prefix}_p50": ls["p50"], f"{prefix}_p90": ls["p90"], f"{prefix}_p99": ls["p99"],
            f"{prefix}_max": ls["max"]}


def _detach_columns(an, c, link) -> dict:
    first_det, err_det = _first_and_failed(an, link.detach)
    return {
        "detach_time": first_det[1]["time"] if first_det else None,
        "detached_by": _first_by(c, link.detach, first_det, [_field(x, "time") for x in link.attach]),
        "detach_closed": first_det[1]["closed"] if first_det else None,
        **_error_of(err_det, "detach"),
    }


def _termini_columns(src, tgt) -> dict:
    return {"source": src.get("address") if src else None, "target": tgt.get("address") if tgt else None,
            "source_terminus": src, "target_terminus": tgt}


def link_row(an, c, link) -> dict:
    s = link.session
    sd = link.sender_dir
    a = link.attach
    src, tgt = an._termini(link)
    settle_modes, max_message_size = _settle_mode_columns(a, sd)
    attaches = [x for x in a if x is not None]
    st = an.link_stats(link)
    stalls = [x for x in c.stalls if x.link is link and not x.idle()]
    outcomes = {k: st.outcomes[k] for k in OUTCOMES}
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "link_index": link.index,
        "name": link.name,
        "handle": _link_handle(link, sd),
        "handle_client": link.handle[0],
        "handle_server": link.handle[1],
        **_role_columns(c, sd),
        "address": an._link_address(link),
        **_termini_columns(src, tgt),
        "coordinator": link.coordinator,
        "refused": _link_refused(an, a, sd),
        **settle_modes,
        "initial_delivery_count": link.initial_dc,
        "delivery_count": link.dc,
        "link_credit": link.credit() if not link.link_credit.count_low else None,  # (a bound only: unknown)
        "available": link.available,
        "drain": link.drain,
        "echo": link.echo,
        "max_message_size": max_message_size,
        "attach_time": _time_of(min(attaches, key=an.time_key, default=None)),
        "attached_time": _time_of(max(attaches, key=an.time_key, default=None)) if len(attaches) == 2 else None,
        **_detach_columns(an, c, link),
        "terminated": link.terminated,
        "state_client": link.state[0],
        "state_server": link.state[1],
        "transfers": link.transfers,
        "deliveries": st.deliveries,
        "messages_bytes": st.bytes,
        **outcomes,
        "no_outcome": st.no_outcome,
        "unsettled": st.unsettled,
        "presettled": st.presettled,
        "aborted": st.aborted,
        "resumed": st.resumed,
        "deliveries_lost_whole": link.lost_whole,
        "deliveries_not_captured": link.not_captured,
        **_latency_columns("latency", st.latency),
        **_latency_columns("outcome_latency", st.outcome_latency),
        "stalls": len(stalls),
        "stalled_seconds": _stalled_sum([an.stall_seconds(x) for x in stalls]),
        "unknown": _link_unknown(an, link, sd, attaches),
    }


# -- stalls --------------------------------------------------------------------------------------

def _time_of(rec):
    return rec["time"] if rec is not None else None


def _stalled_sum(secs: list):
    """The sum of stall durations, None (unknown: a clock step) when one is."""
    return None if None in secs else math.fsum(secs)


def stall_rows(an) -> list[dict]:
    return [an.stall_row(st) for st in an.stalls]


def stall_row(an, st) -> dict:
    """The stalls-table row of one Stall (of :attr:`stalls`)."""
    c, s, link = st.conn, st.session, st.link
    waiting, evidence = st.waiting()
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "link": link.name if link is not None else None,
        "link_index": link.index if link is not None else None,
        "handle": link.handle[st.direction] if link is not None else None,
        "kind": st.kind,
        "sender_side": SIDES[st.direction],
        "sender": c.peer(st.direction),
        "start": st.start,
        "end": st.end,
        "duration": an._stall_duration(st),
        "start_packet": st.start_packet,
        "end_packet": st.end_packet,
        "ended_by": st.ended_by,
        "waiting": waiting,
        "waiting_evidence": evidence,
        "idle": st.idle(),
        "credit_exhausted_at": st.exhausted,
        "credit_exhausted_packet": st.exhausted_packet,
        "open": st.end is None,
    }


# -- transactions --------------------------------------------------------------------------------

def _transaction_state(t) -> str:
    """Where a transaction got to: declaring, declare-failed, declared, discharging, committed,
    rolled-back, discharge-failed, or unknown (neither declare nor discharge seen)."""
    dec, dis = t.declare, t.discharge
    if dec is not None and t.declare_outcome is None:
        return "declaring"
    if dec is not None and t.declare_outcome != "declared":
        return "declare-failed"
    if dis is None:
        return "declared" if dec is not None else "unknown"
    if t.discharge_outcome is None:
        return "discharging"
    if t.discharge_outcome == "accepted":
        return "rolled-back" if t.fail else "committed"
    return "discharge-failed"


def _transfer_columns(what: str, d) -> dict:
    """The ``<what>_delivery_id``, ``<what>_time`` and ``<what>_packet`` of a declare / discharge transfer."""
    if not d:
        return {f"{what}_delivery_id": None, f"{what}_time": None, f"{what}_packet": None}
    return {f"{what}_delivery_id": d.delivery_id, f"{what}_time": d.first_ts, f"{what}_packet": d.first_packet}


def _transaction_row(an, t) -> dict:
    """The transactions-table row of one transaction."""
    link = t.link
    s = link.session if link is not None else None
    return {
        "connection": t.conn.id,
        "session": s.index if s is not None else None,
        "channel": an._session_channel(s) if s is not None else None,
        "coordinator": link.name if link is not None else None,
        "txn_id": t.txn_id,
        "global_id": t.global_id,
        **_transfer_columns("declare", t.declare),
        "declare_outcome": t.declare_outcome,
        "declared_time": time_of(t.declared),
        "declared_packet": packet_of(t.declared),
        "declare_error": (t.declare_error or {}).get("condition"),
        **_transfer_columns("discharge", t.discharge),
        "fail": t.fail,
        "discharge_outcome": t.discharge_outcome,
        "discharge_error": (t.discharge_error or {}).get("condition"),
        "discharged_time": time_of(t.discharged),
        "state": _transaction_state(t),
        "deliveries": len(t.enlisted),
        "enlisted": [{"link": lk.name, "delivery_id": did, "how": how} for lk, did, how in t.enlisted],
    }


def transaction_rows(an) -> list[dict]:
    return [_transaction_row(an, t) for t in an.transactions]


# -- violations / errors -------------------------------------------------------------------------

def violation_rows(an) -> list[dict]:
    return [dict(v) for v in an.violations]


def _unsettled_known(c, link) -> int:
    """The unsettled deliveries of ``link`` (live or compacted) whose outcome is not unknown: a
    delivery whose settlement may have been in lost bytes has an unknown outcome
    ("lost-in-capture" in the deliveries table): not an error."""
    unsettled = link.compacted  # (a compacted delivery is unsettled)
    for d in link.live.values():
        if d.settled is None:
            unsettled += 1
    if unsettled and c.loss is not None:
        unsettled -= _count_lost(c, link)
    return unsettled


def _first_record(an, pair):
    """The first (by time) of a pair of records, and its side."""
    rec = min((x for x in pair if x is not None), key=lambda x: an.time_key(x))
    return rec, _side(pair.index(rec))


def _unsettled_at_end_rows(an, c, link, base: dict, unsettled: int) -> list:
    """The error rows of a link with ``unsettled`` deliveries: at its detach, at its session's end,
    or one per delivery at the capture's end."""
    if link.terminated == "detach":
        det, side = _first_record(an, link.detach)
        return [{**base, "delivery_id": None, "scope": "link", "condition": "unsettled-at-detach",
                 "description": f"{unsettled} deliveries unsettled when the link was detached",
                 "packet": det["packet"], "time": det["time"], "side": side, "count": unsettled}]
    if link.terminated == "end":
        en, side = _first_record(an, link.session.end)
        return [{**base, "delivery_id": None, "scope": "session", "condition": "unsettled-at-end",
                 "description": f"{unsettled} deliveries unsettled when the session ended",
                 "packet": en["packet"], "time": en["time"], "side": side, "count": unsettled}]
    return [{**base, "delivery_id": d.delivery_id, "scope": "delivery", "condition": "unsettled-at-capture-end",
             "description": f"delivery {d.delivery_id} not settled at the end of the capture",
             "packet": d.first_packet, "time": d.first_ts, "side": SIDES[d.direction], "count": 1}
            for d in link_deliveries(link)
            if d.settled is None and not (c.loss is not None and connection_lost_after(c, d.first_ts))]


def _unsettled_at_connection_end_row(an, c, how: str, n: int) -> dict:
    """The error row of ``n`` deliveries unsettled when connection ``c`` was closed (``how``
    "close") or its TCP connection ended ("transport")."""
    if how == "close":
        cl, side = _first_record(an, c.close)
        packet, ts, condition, ended = cl["packet"], cl["time"], "unsettled-at-close", "was closed"
    else:
        packet, ts, side, condition, ended = None, c.transport_time, None, "unsettled-at-transport-end", "ended (TCP)"
    return {"connection": c.id, "session": None, "channel": None, "link": None, "handle": None,
            "delivery_id": None, "scope": "connection", "condition": condition,
            "description": f"{n} deliveries unsettled when the connection " + ended,
            "info": None, "packet": packet, "time": ts, "side": side, "source": "analysis", "count": n}


def _connection_error_rows(an, c) -> list:
    """The analysis's error rows of connection ``c``: deliveries left unsettled."""
    rows = []
    per_conn: dict = {}
    for link in c.links:
        unsettled = _unsettled_known(c, link)
        if not unsettled:
            continue
        if link.terminated in ("close", "transport"):
            per_conn[link.terminated] = per_conn.get(link.terminated, 0) + unsettled
            continue
        s = link.session
        base = {"connection": c.id, "session": s.index, "channel": an._session_channel(s),
                "link": link.name, "handle": link.handle[link.sender_dir] if link.sender_dir is not None
                else None, "info": None, "source": "analysis"}
        rows += _unsettled_at_end_rows(an, c, link, base, unsettled)
    for how, n in per_conn.items():
        rows.append(_unsettled_at_connection_end_row(an, c, how, n))
    return rows


def error_rows(an) -> list[dict]:
    rows = [dict(e) for e in an.frame_errors]
    for c in an.connections.values():
        rows += _connection_error_rows(an, c)
    return rows


# -- helpers -------------------------------------------------------------------------------------

def _side(d):
    return SIDES[d] if d in (0, 1) else None


def _side_lost_after(c, e, ts) -> bool:
    """Did peer ``e`` of ``c`` lose bytes noticed after ``ts`` (None: at any time)?"""
    return c.loss is not None and c.loss.lost_after(e, ts)


def _count_lost(c, link) -> int:
    """How many unsettled deliveries of ``link`` (live or compacted) have an unknown outcome: their
    settlement may have been in bytes lost after their first transfer (see :func:`connection_lost_after`)."""
    n = 0
    for d in link.live.values():
        if d.settled is None and connection_lost_after(c, d.first_ts):
            n += 1
    for _sender, st, rows in compact_rows(link):
        ft = st.first_ts
        n += sum([1 for i in rows if connection_lost_after(c, ft[i])])
    return n


def _first_by(c, pair, first, since) -> str:
    """Who sent the first of a close / end / detach pair (``first``: (side, dict) or None): that
    side, or "unknown" when the other side's is missing and bytes it sent after ``since[e]`` (its
    last frame, begin or attach) were lost: its close / end / detach may have been among them,
    before the one seen."""
    if first is None:
        return ""
    e = 1 - first[0]
    if pair[e] is None and _side_lost_after(c, e, since[e] if since is not None else None):
        return "unknown"
    return SIDES[first[0]]


def _sasl_code(code):
    if code is None:
        return None
    return choice_name("sasl-code", code) or str(code)


