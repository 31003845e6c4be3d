"""The report's requests section (``rep["requests"]``, made by
:func:`amqp_dissect.results.requests.requests_summary`) as text lines and as HTML."""

from __future__ import annotations

from . import escape
from ..times import date


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:.3f} ms"


def _when(ns, digits: int = 6) -> str:
    if ns is None:
        return "?"
    try:
        return date(ns, digits)
    except (ValueError, OverflowError):
        return f"{ns / 1e9:.{digits}f} (epoch seconds)"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _id(u: dict) -> str:
    rid = u.get("request_id")
    if rid is None:
        return "(no message-id)"
    return f"{rid} ({u['request_id_type']})" if u.get("request_id_type") not in (None, "string") else repr(rid)


def token_line(t: dict, digits: int = 6) -> str:
    """One token line: the put-token, its audience, type, expiry, and what went wrong."""
    return (f"put-token for {t['token_audience'] or '?'} ({t['token_type'] or '?'}"
            + (f", {t['token_size']:,} bytes" if t.get("token_size") is not None else "")
            + f", expires {_when(t['token_expiry_time'], digits)})"
            + f" on {t['request_connection']}: {t['token_note']} [packet {t['request_packet']}]")


def cbs_link_line(c: dict) -> str:
    """The line of a connection's $cbs links no put-token went through."""
    names = ", ".join(repr(n) for n in c["links"][:4]) + (", ..." if len(c["links"]) > 4 else "")
    return f"no put-token on {c['connection']}: its $cbs link(s) {names} {c['why']}"


def _requests_head(sec: dict) -> str:
    """The Requests section's title: how many, answered, without reply, answered twice, replies alone."""
    head = [f"{sec['answered']:,} answered"]
    if sec["no_reply"]:
        head.append(f"{sec['no_reply']:,} with no reply in the capture")
    if sec["answered_twice"]:
        head.append(f"{sec['answered_twice']:,} answered twice")
    if sec["replies_without_request"]:
        n = sec["replies_without_request"]
        head.append(f"{n:,} {'reply' if n == 1 else 'replies'} without request")
    return f"Requests ({sec['requests']:,}: {', '.join(head)})"


def _address_line(a: dict) -> str:
    """One address's requests, answers and round trips."""
    svc = f" [{a['service']}]" if a.get("service") and a["service"] != a["address"] else ""
    return (f"  {a['address'] or '?'}{svc}: {_plural(a['requests'], 'request')}, {a['answered']:,} answered"
            + (f"; round trip p50 {_ms(a['round_trip_p50'])}, p90 {_ms(a['round_trip_p90'])}, "
               f"max {_ms(a['round_trip_max'])}" if a["round_trip_max"] is not None else ""))


def _unanswered_line(u: dict, digits: int) -> str:
    """One request with no reply in the capture."""
    return (f"  no reply in the capture: {_id(u)}"
            + (f" {u['operation']}" if u.get("operation") else "")
            + f" to {u['request_address'] or '?'} on {u['request_connection']}, "
            f"sent {_when(u['request_time'], digits)} [packet {u['request_packet']}]")


def _token_lines(sec: dict, digits: int) -> list[str]:
    """The token lines: each put-token, each connection's $cbs links no put-token went through, how many more."""
    lines = ["  token: " + token_line(t, digits) for t in sec["tokens"]]
    lines.extend("  token: " + cbs_link_line(c) for c in sec.get("cbs_links") or ())
    if sec["more_tokens"]:
        lines.append(f"  ... {sec['more_tokens']:,} more token lines (amqp-dissect requests lists all)")
    return lines


def request_lines(sec: dict | None, digits: int = 6) -> list[str]:
    """The text report's Requests section (none without requests)."""
    if not sec or not (sec["requests"] or sec["replies_without_request"] or sec.get("cbs_links")):
        return []
    lines = ["", _requests_head(sec)]
    lines.extend(_address_line(a) for a in sec["by_address"])
    if sec["more_addresses"]:
        lines.append(f"  ... {sec['more_addresses']:,} more addresses (amqp-dissect requests lists all)")
    lines.extend(_unanswered_line(u, digits) for u in sec["unanswered"])
    if sec["more_unanswered"]:
        lines.append(f"  ... {sec['more_unanswered']:,} more without reply (amqp-dissect requests lists all)")
    lines.extend(_token_lines(sec, digits))
    if sec.get("not_matched"):
        lines.append(f"  {sec['not_matched']:,} more candidate messages not matched (past the cap)")
    return lines


def request_html(sec: dict | None) -> str:
    """The HTML page's Requests section (empty text without requests)."""
    if not sec or not (sec["requests"] or sec["replies_without_request"] or sec.get("cbs_links")):
        return ""

    def e(x) -> str:
        return escape("" if x is None else str(x), quote=True)

    out = ['<h2 id="requests">Requests</h2><section class="card">',
           f'<div class="meta">{sec["requests"]:,} requests · {sec["answered"]:,} answered · '
           f'{sec["no_reply"]:,} with no reply in the capture · {sec["answered_twice"]:,} answered twice · '
           f'{sec["replies_without_request"]:,} replies without request</div>']
    if sec["by_address"]:
        out.append('<table><tr><th>address</th><th>service</th><th class="num">requests</th>'
                   '<th class="num">answered</th><th class="num">round trip p50</th><th class="num">p90</th>'
                   '<th class="num">max</th></tr>')
        for a in sec["by_address"]:
            out.append(f'<tr><td>{e(a["address"] or "?")}</td><td>{e(a["service"] or "")}</td>'
                       f'<td class="num">{a["requests"]:,}</td><td class="num">{a["answered"]:,}</td>'
                       f'<td class="num">{e(_ms(a["round_trip_p50"]))}</td>'
                       f'<td class="num">{e(_ms(a["round_trip_p90"]))}</td>'
                       f'<td class="num">{e(_ms(a["round_trip_max"]))}</td></tr>')
        out.append("</table>")
    items = [f"no reply in the capture: {_id(u)} to {u['request_address'] or '?'} on {u['request_connection']} "
             f"[packet {u['request_packet']}]" for u in sec["unanswered"]]
    items += ["token: " + token_line(t) for t in sec["tokens"]]
    items += ["token: " + cbs_link_line(c) for c in sec.get("cbs_links") or ()]
    if items:
        out.append('<ul class="notes">' + "".join(f"<li>{e(x)}</li>" for x in items) + "</ul>")
    out.append("</section>")
    return "".join(out)
