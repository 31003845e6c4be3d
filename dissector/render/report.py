"""The ``amqp-dissect report`` document as text."""

from __future__ import annotations

from ..times import clock, date, delta
from ..clock import CLOCK_STEP
from .diagnoses import diagnosis_lines


# --------------------------------------------------------------------------- text


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:.3f} ms"


def _stalled(x) -> str:
    """The header's stalled time; None: unknown (a clock step within a stall)."""
    return "stalled time " + CLOCK_STEP if x is None else f"{x:.3f} s stalled"


def _secs(x) -> str:
    """Seconds of a sum of durations; None: unknown (a clock step within one of them)."""
    return "time " + CLOCK_STEP if x is None else f"{x:.3f} s"


def _t(x, digits: int = 6) -> str:
    """A time (integer nanoseconds) as UTC time of day, to the capture's resolution."""
    return "-" if x is None else clock(x, digits)


def _one_line(text, limit: int = 160) -> str:
    """Descriptions can be long and multi-line (brokers dump internal state): one line."""
    if text is None:
        return ""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def _v(x) -> str:
    return "-" if x is None else str(x)


def _n(x) -> str:
    """A count, with thousands separators (``300,000``): the one format of counts in the report."""
    return "-" if x is None else f"{x:,}" if isinstance(x, int) else str(x)


def _plural(n, word: str, words: str | None = None) -> str:
    """``1 frame``, ``2 frames``, ``1,500 frames``."""
    return f"{_n(n)} {word if n == 1 else (words or word + 's')}"


def _ids(ids: list) -> str:
    """Delivery ids of folded lines: ``0 to 9`` when they follow one another, else listed (the
    first five)."""
    if len(ids) > 2 and all(isinstance(i, int) for i in ids) and ids == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]} to {ids[-1]}"
    shown = ", ".join(_v(i) for i in ids[:5])
    return shown + (", …" if len(ids) > 5 else "")


def _fold(items: list, key, line) -> list[str]:
    """Lines of ``items`` with those that would say the same thing but for their delivery id
    folded into one: ``key(item)`` is what must be equal (consecutive items only, the order
    kept), ``line(item, ids)`` the text of a group (``ids``: the delivery ids of the group)."""
    out: list[str] = []
    group: list = []
    for it in items:
        if group and key(group[-1]) != key(it):
            out.append(line(group[0], [g.get("delivery_id") for g in group]))
            group = []
        group.append(it)
    if group:
        out.append(line(group[0], [g.get("delivery_id") for g in group]))
    return out


def _deliveries(ids: list) -> str:
    """``delivery 3`` or, folded, ``10 deliveries 0 to 9``."""
    return f"delivery {_v(ids[0])}" if len(ids) == 1 else f"{len(ids):,} deliveries {_ids(ids)}"


def _packets(d: dict, done: str, done_packet) -> str:
    """``[packet 29]`` when the transfer and what settled it are in one packet, else
    ``[transfer packet 29, rejected at packet 31]``."""
    first = d.get("first_packet")
    if done_packet is None or done_packet == first:
        return f"[packet {_v(first)}]"
    return f"[transfer packet {_v(first)}, {done} at packet {done_packet}]"


def _pair(p: dict | None, what: str) -> str:
    """`` [open packet 6, answered at packet 7]`` of an open / begin / attach / close / end / detach
    pair (:func:`amqp_dissect.results.diagnoses.pair_packets`): the first frame and its answer;
    nothing when neither was seen."""
    if not p:
        return ""
    if p.get("not_captured"):  # one direction captured
        return f" [{what} packet {p['packet']}, the {p['not_captured']}'s not captured]"
    if p.get("answer_packet") is None:
        return f" [{what} packet {p['packet']}, no answer seen]"
    if p["answer_packet"] == p["packet"]:
        return f" [{what} packets {p['packet']}]"
    return f" [{what} packet {p['packet']}, answered at packet {p['answer_packet']}]"


def _lifeline(x: dict, k_open: str, opened: str, w_open: str, k_close: str, closed: str, w_close: str) -> str:
    """``, begun by the client [begin packet 8, answered at packet 9], ended by the server [...]``."""
    out = ""
    o, c = x.get(k_open), x.get(k_close)
    if o:
        if o.get("answer_of"):  # one direction captured: the begin seen answers the peer's
            out += (f", {opened} by the {o['answer_of']} (inferred: its {w_open} not captured, the {o['side']}'s "
                    f"{w_open} [packet {o['packet']}] answers it)")
        elif o.get("not_captured") and not o.get("initiates"):
            out += f", {opened}: by the {o['side']} or the {o['not_captured']} (unknown){_pair(o, w_open)}"
        else:
            out += f", {opened} by the {o['side']}{_pair(o, w_open)}"
    if c:
        if c.get("not_captured"):
            out += f", {closed}: by the {c['side']} or the {c['not_captured']} (unknown){_pair(c, w_close)}"
        else:
            out += f", {closed} by the {c['side']}{_pair(c, w_close)}"
    return out


def tls_not_decrypted_line(t: dict) -> str:
    """The header's line for TLS streams on ports that are not AMQP's that could not be decrypted
    (``capture["tls_not_decrypted"]``): they may carry AMQP; whether they do is unknown."""
    n = t["streams"]
    first = (t.get("first") or [{}])[0]
    why = first.get("why") or "no key log"
    return (f"TLS not decrypted: {_plural(n, 'stream')} on ports that are not AMQP ports ({why}; first "
            f"{first.get('connection', '?')} at packet {_v(first.get('packet'))}): whether "
            f"{'it carries' if n == 1 else 'they carry'} AMQP is unknown; give the TLS key log with --keylog FILE "
            f"(or SSLKEYLOGFILE), and --port PORT for AMQP on another port")


def tunnel_not_read_line(t: dict) -> str:
    """The header's line for packets in a tunnel the parser does not read
    (``capture["tunnels_not_read"]``): what they carry, AMQP or not, is not seen."""
    return (f"not decoded: {_plural(t['packets'], 'packet')} in a tunnel that is not read ({t['tunnel']}; "
            f"first at packet {_v(t['first_packet'])}): any TCP inside, AMQP or not, is not seen")


def tls_without_keys_line(rep: dict) -> str | None:
    """The summary's line for connections whose TLS could not be decrypted (the listed
    connections' ``tls_undecrypted_bytes``): why what they carry is not decoded; None if none."""
    conns = [c for c in rep.get("connections") or () if c.get("tls_undecrypted_bytes")]
    if not conns:
        return None
    n = sum(c["tls_undecrypted_bytes"] for c in conns)
    return (f"not decoded: {_plural(len(conns), 'connection')} in TLS that could not be decrypted ({_n(n)} bytes; "
            f"first {conns[0]['connection']}): give the TLS key log with --keylog FILE (or SSLKEYLOGFILE)")


def layer_names(c: dict) -> list[str]:
    """What wraps the connection's AMQP: TLS (version, cipher) and WebSocket (path)."""
    out = []
    if c.get("tls"):
        if c.get("tls_version"):
            out.append(f"TLS {c['tls_version'].replace('TLS ', '')}, {c.get('tls_cipher') or 'cipher unknown'}")
        else:
            out.append("TLS (version and cipher unknown: give --keylog to parse the handshake)")
    if c.get("websocket"):
        out.append(f"WebSocket GET {c.get('ws_path') or '/'}")
    return out


def _q(x) -> str:
    """A name, quoted; '(unknown)' when the capture did not show it."""
    return "(unknown)" if x is None else repr(x)


def _default(value, is_default) -> str:
    return f"{value} (default)" if is_default else f"{value}"


def _date(x, digits: int = 6) -> str:
    return "-" if x is None else date(x, digits)


def not_captured_text(c: dict) -> str:
    """The bytes of a connection the capture's snap length cut off (not loss)."""
    n = c.get("snap_length")
    return (f"not captured (snap length {'unknown' if n is None else n}): "
            f"from the client {_n(c.get('not_captured_bytes_client') or 0)} bytes; "
            f"from the server {_n(c.get('not_captured_bytes_server') or 0)} bytes (not loss)")


def cut_outcomes_text(sess: dict) -> str:
    """The outcomes of a session's deliveries whose transfers the snap length cut off whole."""
    oc = sess["not_captured_outcomes"]
    return ("deliveries whose transfers were not captured (snap length), outcomes from the dispositions: "
            + ", ".join(f"{k} {_n(v)}" for k, v in sorted(oc.items())))


def _files(names) -> str:
    names = list(names)
    return ("file " if len(names) == 1 else "files ") + ", ".join(names)


def missing_file_line(g: dict, digits: int = 6) -> str:
    """The header's line of files missing from a numbered capture set (``capture["gaps"]``): when,
    and the TCP gaps that fall in them (gaps still, not loss on the wire)."""
    conns = g.get("connections") or {}
    n = sum(v[0] + v[2] for v in conns.values())
    size = sum(v[1] + v[3] for v in conns.values())
    if n:
        falls = (f"{n} TCP gap{'s' if n != 1 else ''} ({size:,} bytes) of {len(conns)} "
                 f"connection{'s' if len(conns) != 1 else ''} fall in it, not loss on the wire")
    else:
        falls = "no TCP gap falls in it"
    return (f"{_files(g['missing'])} of the set {'is' if len(g['missing']) == 1 else 'are'} missing "
            f"(between {_date(g['from'], digits)} and {_date(g['to'], digits)}, after {g['after']}, before {g['before']}): "
            + falls)


def _span(cap: dict, digits: int) -> str:
    """The capture's duration, exactly: the difference of its integer times, to its digits."""
    start, end = cap.get("start"), cap.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return delta(end - start, digits)
    return f"{cap['duration']:.{digits}f}"


def clock_step_line(st: dict, digits: int = 6) -> str:
    """A step back of the capture clock (``capture["clock_steps"]``, see amqp_dissect.clock)."""
    return (f"clock stepped back {delta(st['before'] - st['time'], digits)} s at packet {st['packet']:,} "
            f"(from {_date(st['before'], digits)} to {_date(st['time'], digits)}): "
            "durations across it are unknown (clock step)")


def capture_lines(cap: dict | None) -> list[str]:
    """The header: what was read, from when to when."""
    if not cap:
        return []
    files = ["(standard input)" if f == "-" else f for f in cap.get("files") or ()]
    dur = cap.get("duration")
    digits = cap.get("digits", 6)
    return [
        ("files: " if len(files) > 1 else "file: ") + (", ".join(files) or "-"),
        *((f"order: {cap['order']}",) if cap.get("order") else ()),
        *(missing_file_line(g, digits) for g in cap.get("gaps") or ()),
        f"capture: {_date(cap.get('start'), digits)} to {_date(cap.get('end'), digits)}"
        + (f" ({_span(cap, digits)} s)" if dur is not None else "")
        + (f", duration {cap['duration_unknown']}" if cap.get("duration_unknown") else ""),
        *(clock_step_line(st, digits) for st in cap.get("clock_steps") or ()),
        f"packets {cap.get('packets', 0):,}, bytes {cap.get('bytes', 0):,}",
        *((tls_not_decrypted_line(cap["tls_not_decrypted"]),) if cap.get("tls_not_decrypted") else ()),
        *(tunnel_not_read_line(t) for t in cap.get("tunnels_not_read") or ()),
    ]


_EVIDENCE = {"available": "the sender's available", "transfer": "a transfer followed at once"}


def _waiting(st: dict) -> str:
    """", messages waiting: yes (evidence)" for a stall row; nothing when unknown."""
    if st.get("waiting") is None:
        return ""
    ev = _EVIDENCE.get(st.get("waiting_evidence"))
    return f", messages waiting: {'yes' if st['waiting'] else 'no'}" + (f" ({ev})" if ev else "")


LOST = "outcome unknown (lost in capture)"
ONE_WAY = "outcome unknown (one direction captured)"
NOT_CAPTURED = "outcome unknown (not captured)"


def unknown_outcome_parts(x: dict, one_way: int = 0) -> list:
    """(label, count) of the deliveries of a summary, connection, session or link entry whose outcome
    is unknown, by cause: bytes lost in a gap (LOST), bytes the snap length cut off (NOT_CAPTURED),
    one direction captured (``one_way`` of them); none for 0."""
    unknown = (x.get("lost_in_capture") or 0) - one_way
    cut = min(x.get("outcome_not_captured") or 0, max(unknown, 0))
    return [(k, n) for k, n in ((LOST, unknown - cut), (NOT_CAPTURED, cut), (ONE_WAY, one_way)) if n > 0]


def one_direction_line(od: dict) -> str:
    """The header's line for the connections of which one direction only was captured
    (``summary["one_direction"]``); empty when there are none."""
    if not od or not od.get("connections"):
        return ""
    sides = [f"the {side}'s packets missing in {_n(od[f'{side}_missing'])}" for side in ("client", "server")
             if od.get(f"{side}_missing")]
    return (f"one direction captured: {_plural(od['connections'], 'connection')} ({', '.join(sides)}); what needs "
            f"the other side (outcomes, settlement, latency, credit, its answers) is unknown, never a violation; "
            f"{_n(od['unknown_outcomes'])} deliveries with their outcome unknown")


def _outcome_counts(s: dict) -> str:
    """The summary's deliveries by outcome, those whose outcome is unknown (their settlement may
    have been in bytes the capture lost) named apart: never "none", never unsettled."""
    parts = [f"{k} {_n(v)}" for k, v in sorted(s["outcomes"].items())]
    one_way = (s.get("one_direction") or {}).get("unknown_outcomes") or 0
    parts += [f"{k} {_n(n)}" for k, n in unknown_outcome_parts(s, one_way)]
    return ", ".join(parts) or "none"


def unseen_parts(x: dict) -> list:
    """The deliveries of an entry that are not in the capture, as ["C not captured", "L in lost bytes"]
    (those the snap length cut off whole, those lost whole in gaps; none for 0)."""
    nc, lw = x.get("deliveries_not_captured"), x.get("deliveries_lost_whole")
    return ([f"{_n(nc)} not captured"] if nc else []) + ([f"{_n(lw)} in lost bytes"] if lw else [])


def unseen_count(x: dict) -> int:
    """Deliveries of an entry not in the capture (not captured + lost whole)."""
    return (x.get("deliveries_not_captured") or 0) + (x.get("deliveries_lost_whole") or 0)


def _seen_and_lost(x: dict) -> str:
    """"N" deliveries of a summary, connection, session or link entry; "N (S seen, C not captured,
    L in lost bytes)" when the delivery-ids say C more were cut off whole by the snap length and L
    more were lost whole in the capture's gaps."""
    n, more = x.get("deliveries") or 0, unseen_parts(x)
    return f"{_n(n + unseen_count(x))} ({', '.join([f'{_n(n)} seen', *more])})" if more else _n(n)


def _summary_deliveries(s: dict) -> str:
    """The summary's "N (outcomes)", or "N (S seen: outcomes; C not captured, L in lost bytes)" with
    deliveries not in the capture."""
    more = unseen_parts(s)
    if not more:
        return f"{_n(s['deliveries'])} ({_outcome_counts(s)})"
    return (f"{_n(s['deliveries'] + unseen_count(s))} ({_n(s['deliveries'])} seen: {_outcome_counts(s)}; "
            f"{', '.join(more)})")


def _lost(x: dict, one_way: bool = False) -> str:
    """", outcome unknown (lost in capture) N" of a connection, session or link entry (``one_way``: of
    a connection of which one direction only was captured); nothing for 0."""
    n = x.get("lost_in_capture") or 0
    return "".join(f", {k} {_n(m)}" for k, m in unknown_outcome_parts(x, n if one_way else 0))


def _summary_lines(rep: dict, digits: int) -> list:
    """The report's head: the capture, the counts, and what of the capture could not be read as AMQP 1.0."""
    s = rep["summary"]
    lines = [
        "AMQP 1.0 capture report",
        "=======================",
        *capture_lines(rep.get("capture")),
        f"connections {_n(s['connections'])}, sessions {_n(s['sessions'])}, links {_n(s['links'])}, "
        f"deliveries {_summary_deliveries(s)}, unsettled {_n(s['unsettled'])}",
        f"stalls {_n(s['stalls'])} ({_stalled(s['stalled_seconds'])})"
        + (f", idle periods {_n(s['idle_periods'])} ({_secs(s['idle_seconds'])})" if s.get("idle_periods") else "")
        + f", violations {_n(s['violations'])}, errors {_n(s['errors'])}, transactions {_n(s['transactions'])}",
    ]
    if one_direction_line(s.get("one_direction")):
        lines.append(one_direction_line(s["one_direction"]))
    if s.get("other_connections"):
        lines.append(_other_connections_line(rep, s["other_connections"]))
    if tls_without_keys_line(rep):
        lines.append(tls_without_keys_line(rep))
    for ce in s["capture_errors"]:
        lines.append(f"capture damaged: {ce}")
    return lines


def _other_connections_line(rep: dict, n: int) -> str:
    """"not AMQP 1.0 (not decoded): N connections (protocol count, ...)"."""
    by: dict = {}
    for o in rep.get("other_protocols") or ():
        by[o["protocol"]] = by.get(o["protocol"], 0) + 1
    return (f"not AMQP 1.0 (not decoded): {_plural(n, 'connection')} ("
            + ", ".join(f"{k} {_n(v)}" for k, v in by.items())
            + (", ..." if sum(by.values()) < n else "") + ")")


def _other_protocol_lines(o: dict) -> list:
    """The block of one connection of another protocol (not decoded)."""
    return [
        "",
        f"Connection {o['connection']}: {o['protocol']} (not decoded)",
        f"  protocol headers: client {', '.join(o['protocol_headers_client']) or '-'}, "
        f"server {', '.join(o['protocol_headers_server']) or '-'}",
        f"  bytes from the client {_n(o['bytes_client'])}, from the server {_n(o['bytes_server'])} "
        f"(protocol headers included); packets {o['first_packet']} to {o['last_packet']}, "
        f"transport end {o['transport_end'] or '-'}",
    ]


def _connection_head_lines(c: dict, digits: int) -> list:
    """A connection's peers, SASL, open parameters, notes, clock steps and layers."""
    lines = [
        "",
        f"Connection {c['connection']}",
        f"  client {c['client']}  container-id {_q(c['container_id_client'])}",
        f"  server {c['server']}  container-id {_q(c['container_id_server'])}",
    ]
    sasl = c["sasl_mechanism"]
    if sasl or c["sasl_outcome"]:
        lines.append(f"  SASL {sasl or '-'} -> {c['sasl_outcome'] or '-'}")
    lines.append(
        f"  max-frame-size client {_v(c['max_frame_size_client'])} / server {_v(c['max_frame_size_server'])}, "
        f"idle-time-out client {_v(c['idle_time_out_client'])} / server {_v(c['idle_time_out_server'])} ms"
    )
    flags = [k for k in ("mid_connection", "lossy") if c.get(k)]
    if flags:
        lines.append(f"  note: {', '.join(flags)}")
    if c.get("missing_direction"):
        lines.append(f"  one direction captured: none of the {c['missing_direction']}'s packets is in the capture; "
                     f"what needs its frames (outcomes, settlement, credit, its answers) is unknown")
    for st in c.get("clock_steps") or ():
        lines.append("  " + clock_step_line(st, digits))
    layers = layer_names(c)
    if layers:
        lines.append(f"  over {'; '.join(layers)}")
    if c.get("tls_undecrypted_bytes"):
        lines.append(f"  {c.get('tls_note') or 'TLS'} ({_n(c['tls_undecrypted_bytes'])} bytes not decrypted in all)")
    return lines


def _connection_loss_lines(c: dict) -> list:
    """What of a connection the capture lacks: files missing from the set, gaps, cut bytes, the unknown and
    the inferred."""
    lines = []
    lost = [[side, c.get(f"gaps_{side}") or 0, c.get(f"gap_bytes_{side}") or 0,
             c.get(f"undecoded_bytes_{side}") or 0] for side in ("client", "server")]
    for m in c.get("missing_files") or ():  # (gaps of files missing from the set: not loss)
        for x in lost:
            x[1] -= m[f"gaps_{x[0]}"]
            x[2] -= m[f"gap_bytes_{x[0]}"]
        lines.append(f"  in the missing {_files(m['missing'])} of the set: " + "; ".join(
            f"from the {side} {_plural(m[f'gaps_{side}'], 'gap')} "
            f"({_n(m[f'gap_bytes_{side}'])} bytes)" for side in ("client", "server")))
    if any(n or b or k for _, n, b, k in lost):
        lines.append("  lost in the capture: " + "; ".join(
            f"from the {side} {_plural(n, 'gap')} ({_n(b)} bytes)"
            + (f", {_n(k)} bytes not decoded" if k else "") for side, n, b, k in lost))
    if c.get("not_captured_bytes_client") or c.get("not_captured_bytes_server"):
        lines.append(f"  {not_captured_text(c)}")
    if c.get("unknown"):
        lines.append(f"  not visible in the capture: {', '.join(map(str, c['unknown']))}")
    for what in c.get("inferred") or ():
        lines.append(f"  inferred: {what}")
    return lines


def _connection_life_line(c: dict, digits: int, one_way: bool) -> str:
    """A connection's open, close, transport end and totals."""
    return (
        f"  opened {_t(c['open_time'], digits)}{_pair(c.get('open_packets'), 'open')}, "
        f"closed {_t(c['close_time'], digits)} by {c['closed_by'] or '-'}{_pair(c.get('close_packets'), 'close')}"
        f", transport end {c['transport_end'] or '-'}; deliveries {_seen_and_lost(c)}{_lost(c, one_way)}, "
        f"stalls {_n(c['stalls'])} ({_secs(c['stalled_seconds'])}), violations {_n(c['violations'])}"
    )


def _session_lines(sess: dict, c: dict, one_way: bool) -> list:
    """A session's line, its cut outcomes and its links."""
    lines = [
        f"  Session {sess['session']}: channel client {sess['channel_client']} <-> server "
        f"{sess['channel_server']}{_lifeline(sess, 'begin_packets', 'begun', 'begin', 'end_packets', 'ended', 'end')}"
        f", deliveries {_seen_and_lost(sess)}, unsettled {_n(sess['unsettled'])}{_lost(sess, one_way)}"
        + (f", ended with {sess['end_error']}: {_one_line(sess['end_description'])}" if sess.get("end_error") else "")
    ]
    if sess.get("not_captured_outcomes"):
        lines.append(f"    {cut_outcomes_text(sess)}")
    for lk in sess["links"]:
        lines.extend(_link_lines(lk, c, one_way))
    return lines


def _link_lines(lk: dict, c: dict, one_way: bool) -> list:
    """A link's lines: peers and address, settle modes, life, deliveries and outcomes, then
    _link_detail_lines."""
    o = lk["outcomes"]
    lines = [
        f"    Link {_q(lk['name'])} handle {_v(lk['handle'])}: {lk['sender'] or '?'} -> {lk['receiver'] or '?'}"
        f"  address {lk['address'] or '?'}",
        f"      snd-settle-mode {_default(_v(lk['snd_settle_mode']), lk['snd_settle_mode_default'])}, "
        f"rcv-settle-mode {_default(_v(lk['rcv_settle_mode']), lk['rcv_settle_mode_default'])}"
        + (", coordinator" if lk.get("coordinator") else "")
        + (", refused by the peer" if lk.get("refused") else ""),
    ]
    life = _lifeline(lk, "attach_packets", "attached", "attach", "detach_packets", "detached", "detach")
    if life:
        lines.append("     " + life[1:])
    lines.append(
        f"      deliveries {_seen_and_lost(lk)}: accepted {_n(o['accepted'])}, rejected {_n(o['rejected'])}, "
        f"released {_n(o['released'])}, modified {_n(o['modified'])}, none {_n(o['no_outcome'])}{_lost(lk, one_way)}; "
        f"presettled {_n(lk['presettled'])}, unsettled {_n(lk['unsettled'])}, aborted {_n(lk['aborted'])}"
    )
    lines.extend(_link_detail_lines(lk, c))
    return lines


def _link_detail_lines(lk: dict, c: dict) -> list:
    """A link's settlement latency, stalls, detach error and what of it is not visible."""
    lines = []
    la = lk["latency"]
    if la["latency_max"] is not None:
        lines.append(
            f"      settlement latency p50 {_ms(la['latency_p50'])}, p90 {_ms(la['latency_p90'])}, "
            f"p99 {_ms(la['latency_p99'])}, max {_ms(la['latency_max'])}"
        )
    elif c.get("clock_steps") and (lk.get("deliveries") or 0) > (lk.get("unsettled") or 0):
        lines.append(f"      settlement latency {CLOCK_STEP}")
    if lk["stalls"]:
        lines.append(f"      stalls {_n(lk['stalls'])} ({_secs(lk['stalled_seconds'])})")
    if lk.get("detach_error"):
        lines.append(f"      detached with {lk['detach_error']}: {_one_line(lk['detach_description'])}")
    if lk.get("unknown"):
        lines.append(f"      not visible in the capture: {', '.join(map(str, lk['unknown']))}")
    return lines


def _connection_error_lines(errors: list) -> list:
    """A connection's "Errors:" block (nothing when it has none)."""
    if not errors:
        return []
    lines = ["  Errors:"]
    for e in errors:
        where = e["scope"] + (f" {_q(e['link'])}" if e.get("link") else "")
        lines.append(
            f"    {where}: {e['condition']}"
            + (f": {_one_line(e['description'])}" if e.get("description") else "")
            + (f" (x{_n(e['count'])})" if (e.get("count") or 1) > 1 else "")
            + (f" [packet {e['packet']}]" if e.get("packet") else "")
        )
    return lines


def _connection_lines(c: dict, digits: int) -> list:
    """The whole block of one AMQP connection: head, loss, life, sessions (with links), errors."""
    one_way = bool(c.get("missing_direction"))
    lines = _connection_head_lines(c, digits)
    lines.extend(_connection_loss_lines(c))
    lines.append(_connection_life_line(c, digits, one_way))
    for sess in c["sessions"]:
        lines.extend(_session_lines(sess, c, one_way))
    lines.extend(_connection_error_lines(c["errors"]))
    return lines


def _more_connections_lines(more) -> list:
    """The "... and N more connections" line of a report that lists only the first connections."""
    if not more:
        return []
    return [
        "",
        f"... and {more['connections']:,} more connections (see `amqp-dissect connections`): "
        f"sessions {more['sessions']:,}, links {more['links']:,}, deliveries {more['deliveries']:,}, "
        f"violations {more['violations']:,}, errors {more['errors']:,}; "
        f"{more['without_amqp']:,} carried no AMQP frame",
    ]


def _violation_lines(violations: list) -> list:
    """The "Protocol violations" section: the first 50, and how many more."""
    if not violations:
        return []
    lines = ["", "Protocol violations"]
    for v in violations[:50]:
        lines.append(f"  packet {v['packet']} {v['connection']} ch {_v(v['channel'])}: [{v['kind']}] {_one_line(v['message'])}")
    if len(violations) > 50:
        lines.append(f"  ... {_n(len(violations) - 50)} more (--format json lists all)")
    return lines


def _same_but_ids(d: dict) -> tuple:
    """What folds notable deliveries into one line: everything but their ids and tags."""
    return tuple(v for k, v in d.items() if k not in ("delivery_id", "delivery_tag"))


def _slowest_line(d: dict, ids: list) -> str:
    """One (folded) line of the "Slowest settlements" section."""
    return (f"  {_ms(d['settlement_latency']):>12}  {_deliveries(ids)} on {_q(d['link'])} "
            f"({_plural(d['frames'], 'frame')}, {_n(d['message_size'])} bytes"
            f"{' each' if len(ids) > 1 else ''}) outcome {d['outcome'] or '-'}, "
            f"settled by {d['settled_by'] or '-'}  {_packets(d, 'settled', d.get('settled_packet'))}")


def _slowest_lines(slowest: list) -> list:
    """The "Slowest settlements" section."""
    if not slowest:
        return []
    return ["", "Slowest settlements", *_fold(slowest, _same_but_ids, _slowest_line)]


# the state said of a delivery without an outcome, by why it is unsettled at the end (unsettled_at)
_UNSETTLED_STATES = {"lost-in-capture": LOST, "one-direction-captured": ONE_WAY, "not-captured": NOT_CAPTURED}


def _not_accepted_state(d: dict) -> str:
    """A not-accepted delivery's outcome, or why it has none."""
    ua = d.get("unsettled_at")
    if d["outcome"]:
        return d["outcome"]
    if ua in _UNSETTLED_STATES:
        return _UNSETTLED_STATES[ua]
    return "unsettled at " + ua if ua else "no outcome"


def _not_accepted_line(d: dict, ids: list) -> str:
    """One (folded) line of the "Deliveries not accepted" section."""
    return (f"  {_deliveries(ids)} on {_q(d['link'])}: {_not_accepted_state(d)}"
            + (f" ({d['outcome_error']})" if d.get("outcome_error") else "")
            + (" aborted" if d.get("aborted") else "")
            + "  " + _packets(d, d["outcome"] or "settled", d.get("outcome_packet") if d["outcome"]
                              else d.get("settled_packet")))


def _not_accepted_lines(nd: dict) -> list:
    """The "Deliveries not accepted" section, with the count of presettled ones."""
    presettled = nd.get("presettled") or 0
    if not (nd["not_accepted"] or presettled):
        return []
    # only deliveries that expected an outcome; presettled (at-most-once) ones have none by design
    lines = ["", "Deliveries not accepted", *_fold(nd["not_accepted"], _same_but_ids, _not_accepted_line)]
    more = (nd.get("not_accepted_count") or 0) - len(nd["not_accepted"])
    if more > 0:
        lines.append(f"  … and {_n(more)} more (see `deliveries`)")
    if not nd["not_accepted"]:
        lines.append("  none")
    if presettled:
        lines.append(f"  presettled (at-most-once): {_n(presettled)}")
    return lines


def _longest_stall_line(st: dict) -> str:
    """One line of the "Longest stalls" section."""
    return (
        f"  {_ms(st['duration']) if st['duration'] is not None else CLOCK_STEP:>12}  {st['kind']:<15} link {_q(st['link'])} ch {_v(st['channel'])} "
        f"from packet {st['start_packet']} to {st['end_packet'] if st['end_packet'] else 'end (open)'}"
        + _waiting(st)
        + (f" (credit ran out at packet {st['credit_exhausted_packet']})"
           if st.get("credit_exhausted_packet") not in (None, st["start_packet"]) else "")
    )


def _longest_stall_lines(rep: dict) -> list:
    """The "Longest stalls" section, and how many more."""
    if not rep["longest_stalls"]:
        return []
    lines = ["", "Longest stalls", *map(_longest_stall_line, rep["longest_stalls"])]
    if rep.get("more_stalls"):
        lines.append(f"  … and {_n(rep['more_stalls'])} more (see `stalls`)")
    return lines


def render_text(rep: dict) -> str:
    digits = (rep.get("capture") or {}).get("digits", 6)
    lines = _summary_lines(rep, digits)
    for o in rep.get("other_protocols") or ():
        lines.extend(_other_protocol_lines(o))
    for c in rep["connections"]:
        lines.extend(_connection_lines(c, digits))
    lines.extend(_more_connections_lines(rep.get("connections_more")))
    lines.extend(_violation_lines(rep["violations"]))
    lines.extend(_slowest_lines(rep["notable_deliveries"]["slowest_settlement"]))
    lines.extend(_not_accepted_lines(rep["notable_deliveries"]))
    lines.extend(_longest_stall_lines(rep))
    lines.extend(diagnosis_lines(rep.get("diagnoses"), digits))
    if rep.get("requests"):  # (report --messages: the requests section, its own module)
        from .requests import request_lines

        lines.extend(request_lines(rep["requests"], digits))
    if rep.get("messages"):  # (and the messages section: render/messages.py)
        from .messages import text_lines as _message_lines

        lines.extend(_message_lines(rep))
    return "\n".join(lines) + "\n"
