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

def _t(x):
    return None if x is None else x[0]


def _p(x):
    return None if x is None else x[1]


def _lost_after(c, ts) -> bool:
    """Did either peer of connection ``c`` lose bytes (a TCP gap, bytes skipped to resynchronise)
    noticed after time ``ts``?  Then a frame sent after ``ts`` (a settling disposition, an end, a
    detach) may be among them."""
    loss = c.loss
    if loss is None or ts is None:
        return False
    return loss.lost_after(0, ts) or loss.lost_after(1, ts)


def _unknown_by_cut(c, ts) -> bool:
    """Is a delivery of ``c`` first transferred at ``ts``, whose outcome is unknown (:func:`_lost_after`),
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


def connection_row(an, c) -> dict:
    """The connections-table row of one connection (a ``an.connections`` value)."""
    o, cl = c.open, c.close
    first_open = min((x for x in o if x is not None), key=lambda x: an.time_key(x), default=None)
    closes = [(e, x) for e, x in enumerate(cl) if x is not None]
    first_close = min(closes, key=lambda ex: an.time_key(ex[1]), default=None)
    err_close = next((x for _, x in sorted(closes, key=lambda ex: an.time_key(ex[1])) if x["error"]), None)
    _key, violations_of, errors_of = _by_connection(an)
    errors = [
        {"condition": e["condition"], "description": e["description"], "scope": e["scope"],
         "side": e["side"], "channel": e["channel"], "link": e["link"]}
        for e in errors_of.get(c.id, ())
    ]
    unknown = list(c.unknown)
    if not c.known_start or c.lossy:
        for e in (0, 1):
            if o[e] is None and cl[e] is None:
                unknown.append(f"open ({SIDES[e]})")
        if not c.known_start and not c.sasl:
            unknown.append("sasl")
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
        "container_id_client": o[0]["container_id"] if o[0] else None,
        "container_id_server": o[1]["container_id"] if o[1] else None,
        "hostname": o[0]["hostname"] if o[0] else None,
    }
    for key in ("max_frame_size", "channel_max"):
        for e in (0, 1):
            row[f"{key}_{SIDES[e]}"] = o[e][key] if o[e] else None
            row[f"{key}_{SIDES[e]}_default"] = o[e][f"{key}_default"] if o[e] else None
    for e in (0, 1):
        row[f"idle_time_out_{SIDES[e]}"] = o[e]["idle_time_out"] if o[e] else None
    row.update({
        "open_time": first_open["time"] if first_open else None,
        "open_time_client": o[0]["time"] if o[0] else None,
        "open_time_server": o[1]["time"] if o[1] else None,
        "close_time": first_close[1]["time"] if first_close else None,
        "close_time_client": cl[0]["time"] if cl[0] else None,
        "close_time_server": cl[1]["time"] if cl[1] else None,
        "closed_by": _first_by(c, cl, first_close, c.last_frame),
        "close_error": err_close["error"]["condition"] if err_close else None,
        "close_description": err_close["error"]["description"] if err_close else None,
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
        "unknown": unknown,
    })
    loss = c.loss
    for e in (0, 1):
        row[f"gaps_{SIDES[e]}"] = loss.gaps[e] if loss is not None else 0
        row[f"gap_bytes_{SIDES[e]}"] = loss.missing[e] if loss is not None else 0
        row[f"undecoded_bytes_{SIDES[e]}"] = loss.skipped[e] if loss is not None else 0
    row["inferred"] = list(c.inferred or ())
    for e in (0, 1):
        row[f"not_captured_bytes_{SIDES[e]}"] = loss.cut[e] if loss is not None else 0
    row["snap_length"] = loss.snap_length if loss is not None else None
    return row


# -- sessions ------------------------------------------------------------------------------------

def session_rows(an) -> list[dict]:
    return [row for c in an.connections.values() for row in an.connection_session_rows(c)]


def connection_session_rows(an, c) -> list[dict]:
    """The sessions-table rows of one connection."""
    rows = []
    for s in c.sessions:
        b, en = s.begin, s.end
        firstb = min((x for x in b if x is not None), key=lambda x: an.time_key(x), default=None)
        ends = [(e, x) for e, x in enumerate(en) if x is not None]
        first_end = min(ends, key=lambda ex: an.time_key(ex[1]), default=None)
        err_end = next((x for _, x in sorted(ends, key=lambda ex: an.time_key(ex[1])) if x["error"]), None)
        lstats = [an.link_stats(link) for link in s.links]
        row = {
            "connection": c.id,
            "session": s.index,
            "channel": an._session_channel(s),
            "channel_client": s.channel[0],
            "channel_server": s.channel[1],
            "initiator": _side(s.initiator),
            "begin_time": firstb["time"] if firstb else None,
            "begin_packet": firstb["packet"] if firstb else None,
        }
        for e in (0, 1):
            side = SIDES[e]
            row[f"begin_time_{side}"] = b[e]["time"] if b[e] else None
        for key in ("next_outgoing_id", "incoming_window", "outgoing_window", "handle_max"):
            for e in (0, 1):
                row[f"{key}_{SIDES[e]}"] = b[e][key] if b[e] else None
        for e in (0, 1):
            side = SIDES[e]
            row[f"handle_max_{side}_default"] = b[e]["handle_max_default"] if b[e] else None
        for e in (0, 1):
            side = SIDES[e]
            row[f"next_outgoing_id_final_{side}"] = s.noid[e]
            row[f"incoming_window_last_{side}"] = s.last_iw[e]
            row[f"outgoing_window_last_{side}"] = s.last_ow[e]
            row[f"remote_incoming_window_{side}"] = s.riw(e)
            row[f"transfers_{side}"] = s.transfers[e]
            row[f"flows_{side}"] = s.flows[e]
        row.update({
            "end_time": first_end[1]["time"] if first_end else None,
            "end_time_client": en[0]["time"] if en[0] else None,
            "end_time_server": en[1]["time"] if en[1] else None,
            "ended_by": _first_by(c, en, first_end, [x["time"] if x else None for x in s.begin]),
            "end_error": err_end["error"]["condition"] if err_end else None,
            "end_description": err_end["error"]["description"] if err_end else None,
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
        })
        rows.append(row)
    return rows


# -- links ---------------------------------------------------------------------------------------

def link_rows(an) -> list[dict]:
    return [row for c in an.connections.values() for row in an.connection_link_rows(c)]


def connection_link_rows(an, c) -> list[dict]:
    """The links-table rows of one connection."""
    return [link_row(an, c, link) for link in c.links]


def link_row(an, c, link) -> dict:
    s = link.session
    sd = link.sender_dir
    a = link.attach
    snd_att = a[sd] if sd is not None and a[sd] is not None else None
    rcv_att = a[1 - sd] if sd is not None and a[1 - sd] is not None else None
    any_att = snd_att or rcv_att or a[0] or a[1]
    src, tgt = an._termini(link)
    sm_att = snd_att or rcv_att or any_att
    rm_att = rcv_att or snd_att or any_att
    attaches = [x for x in a if x is not None]
    detaches = [(e, x) for e, x in enumerate(link.detach) if x is not None]
    first_det = min(detaches, key=lambda ex: an.time_key(ex[1]), default=None)
    err_det = next((x for _, x in sorted(detaches, key=lambda ex: an.time_key(ex[1])) if x["error"]), None)
    refused = False
    if len(attaches) == 2:
        second = max((0, 1), key=lambda e: (an.time_key(a[e]), e))
        if sd is not None:
            # the answering attach: the sender answers with a null source, the receiver with a null target
            refused = a[second]["source_null"] if second == sd else a[second]["target_null"]
    st = an.link_stats(link)
    ls = summarize(st.latency)
    os_ = summarize(st.outcome_latency)
    stalls = [st for st in c.stalls if st.link is link and not st.idle()]
    unknown = list(link.unknown)
    if link.known or a[0] or a[1]:
        if sd is None:
            unknown.append("role")
    if an._link_address(link) is None and "address" not in unknown and not link.coordinator:
        if not attaches:
            unknown.append("address")
    outcomes = {k: st.outcomes[k] for k in OUTCOMES}
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "link_index": link.index,
        "name": link.name,
        "handle": link.handle[sd] if sd is not None else (link.handle[0] if link.handle[0] is not None
                                                          else link.handle[1]),
        "handle_client": link.handle[0],
        "handle_server": link.handle[1],
        "role": None if sd is None else ("sender" if sd == 0 else "receiver"),
        "sender_side": _side(sd),
        "sender": c.peer(sd) if sd is not None else None,
        "receiver": c.peer(1 - sd) if sd is not None else None,
        "address": an._link_address(link),
        "source": src.get("address") if src else None,
        "target": tgt.get("address") if tgt else None,
        "source_terminus": src,
        "target_terminus": tgt,
        "coordinator": link.coordinator,
        "refused": bool(refused),
        "snd_settle_mode": sm_att["snd_settle_mode"] if sm_att else None,
        "snd_settle_mode_default": sm_att["snd_settle_mode_default"] if sm_att else None,
        "rcv_settle_mode": rm_att["rcv_settle_mode"] if rm_att else None,
        "rcv_settle_mode_default": rm_att["rcv_settle_mode_default"] if rm_att else None,
        "initial_delivery_count": link.initial_dc,
        "delivery_count": link.dc,
        "link_credit": link.credit() if not link.link_credit.count_low else None,  # (a bound only: unknown)
        "available": link.available,
        "drain": link.drain,
        "echo": link.echo,
        "max_message_size": (rcv_att or snd_att or {}).get("max_message_size"),
        "attach_time": _time_of(min(attaches, key=an.time_key, default=None)),
        "attached_time": _time_of(max(attaches, key=an.time_key, default=None)) if len(attaches) == 2 else None,
        "detach_time": first_det[1]["time"] if first_det else None,
        "detached_by": _first_by(c, link.detach, first_det,
                                 [x["time"] if x else None for x in link.attach]),
        "detach_closed": first_det[1]["closed"] if first_det else None,
        "detach_error": err_det["error"]["condition"] if err_det else None,
        "detach_description": err_det["error"]["description"] if err_det else None,
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
        "latency_p50": ls["p50"],
        "latency_p90": ls["p90"],
        "latency_p99": ls["p99"],
        "latency_max": ls["max"],
        "outcome_latency_p50": os_["p50"],
        "outcome_latency_p90": os_["p90"],
        "outcome_latency_p99": os_["p99"],
        "outcome_latency_max": os_["max"],
        "stalls": len(stalls),
        "stalled_seconds": _stalled_sum([an.stall_seconds(st) for st in stalls]),
        "unknown": unknown,
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

def transaction_rows(an) -> list[dict]:
    rows = []
    for t in an.transactions:
        link = t.link
        s = link.session if link is not None else None
        dec, dis = t.declare, t.discharge
        if dec is not None and t.declare_outcome is None:
            state = "declaring"
        elif dec is not None and t.declare_outcome != "declared":
            state = "declare-failed"
        elif dis is None:
            state = "declared" if dec is not None else "unknown"
        elif t.discharge_outcome is None:
            state = "discharging"
        elif t.discharge_outcome == "accepted":
            state = "rolled-back" if t.fail else "committed"
        else:
            state = "discharge-failed"
        rows.append({
            "connection": t.conn.id,
            "session": s.index if s is not None else None,
            "channel": an._session_channel(s) if s is not None else None,
            "coordinator": link.name if link is not None else None,
            "txn_id": t.txn_id,
            "global_id": t.global_id,
            "declare_delivery_id": dec.delivery_id if dec else None,
            "declare_time": dec.first_ts if dec else None,
            "declare_packet": dec.first_packet if dec else None,
            "declare_outcome": t.declare_outcome,
            "declared_time": _t(t.declared),
            "declared_packet": _p(t.declared),
            "declare_error": (t.declare_error or {}).get("condition"),
            "discharge_delivery_id": dis.delivery_id if dis else None,
            "discharge_time": dis.first_ts if dis else None,
            "discharge_packet": dis.first_packet if dis else None,
            "fail": t.fail,
            "discharge_outcome": t.discharge_outcome,
            "discharge_error": (t.discharge_error or {}).get("condition"),
            "discharged_time": _t(t.discharged),
            "state": state,
            "deliveries": len(t.enlisted),
            "enlisted": [{"link": link.name, "delivery_id": did, "how": how}
                         for link, did, how in t.enlisted],
        })
    return rows


# -- violations / errors -------------------------------------------------------------------------

def violation_rows(an) -> list[dict]:
    return [dict(v) for v in an.violations]


def error_rows(an) -> list[dict]:
    rows = [dict(e) for e in an.frame_errors]
    for c in an.connections.values():
        per_conn: dict = {}
        for link in c.links:
            s = link.session
            unsettled = link.compacted  # (a compacted delivery is unsettled)
            for d in link.live.values():
                if d.settled is None:
                    unsettled += 1
            if unsettled and c.loss is not None:
                # a delivery whose settlement may have been in lost bytes has an unknown outcome
                # ("lost-in-capture" in the deliveries table): not an error
                unsettled -= _count_lost(c, link)
            if not unsettled:
                continue
            base = {"connection": c.id, "session": s.index, "channel": an._session_channel(s),
                    "link": link.name, "handle": link.handle[link.sender_dir] if link.sender_dir is not None
                    else None, "info": None, "source": "analysis"}
            if link.terminated == "detach":
                det = min((x for x in link.detach if x is not None), key=lambda x: an.time_key(x))
                rows.append({**base, "delivery_id": None, "scope": "link", "condition": "unsettled-at-detach",
                             "description": f"{unsettled} deliveries unsettled when the link was detached",
                             "packet": det["packet"], "time": det["time"],
                             "side": _side(link.detach.index(det)), "count": unsettled})
            elif link.terminated == "end":
                en = min((x for x in s.end if x is not None), key=lambda x: an.time_key(x))
                rows.append({**base, "delivery_id": None, "scope": "session", "condition": "unsettled-at-end",
                             "description": f"{unsettled} deliveries unsettled when the session ended",
                             "packet": en["packet"], "time": en["time"], "side": _side(s.end.index(en)),
                             "count": unsettled})
            elif link.terminated in ("close", "transport"):
                per_conn[link.terminated] = per_conn.get(link.terminated, 0) + unsettled
            else:
                for d in link_deliveries(link):
                    if d.settled is not None or (c.loss is not None and _lost_after(c, d.first_ts)):
                        continue
                    rows.append({**base, "delivery_id": d.delivery_id, "scope": "delivery",
                                 "condition": "unsettled-at-capture-end",
                                 "description": f"delivery {d.delivery_id} not settled at the end of the capture",
                                 "packet": d.first_packet, "time": d.first_ts, "side": SIDES[d.direction],
                                 "count": 1})
        for how, n in per_conn.items():
            if how == "close":
                cl = min((x for x in c.close if x is not None), key=lambda x: an.time_key(x))
                packet, ts, side = cl["packet"], cl["time"], _side(c.close.index(cl))
            else:
                packet, ts, side = None, c.transport_time, None
            rows.append({"connection": c.id, "session": None, "channel": None, "link": None, "handle": None,
                         "delivery_id": None, "scope": "connection", "condition": f"unsettled-at-{how}"
                         if how == "close" else "unsettled-at-transport-end",
                         "description": f"{n} deliveries unsettled when the connection "
                         + ("was closed" if how == "close" else "ended (TCP)"),
                         "info": None, "packet": packet, "time": ts, "side": side, "source": "analysis",
                         "count": n})
    return rows


# -- helpers -------------------------------------------------------------------------------------

def _side(d):
    return SIDES[d] if d in (0, 1) else None


def _side_lost_after(c, e, ts) -> bool:
    """Did peer ``e`` of ``c`` lose bytes noticed after ``ts`` (None: at any time)?"""
    return c.loss is not None and c.loss.lost_after(e, ts)


def _count_lost(c, link) -> int:
    """How many unsettled deliveries of ``link`` (live or compacted) have an unknown outcome: their
    settlement may have been in bytes lost after their first transfer (see :func:`_lost_after`)."""
    n = 0
    for d in link.live.values():
        if d.settled is None and _lost_after(c, d.first_ts):
            n += 1
    for _sender, st, rows in compact_rows(link):
        ft = st.first_ts
        n += sum([1 for i in rows if _lost_after(c, ft[i])])
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


