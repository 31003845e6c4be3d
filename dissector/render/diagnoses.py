"""The report's diagnoses (:mod:`amqp_dissect.results.diagnoses`) as text lines and HTML.

Each line names the packets of what it reports: ``[packet 17]`` when one packet shows it, else
the first and the answer (``[end packet 17, answered at packet 19]``)."""

from __future__ import annotations

from . import escape as _e
from ..times import clock

NS = 1_000_000_000


def _dur(ns) -> str:
    """A duration (ns) in the unit that reads best: ``100.738 ms``, ``3.502 s``."""
    if ns is None:  # (a duration across a step of the capture clock)
        return "unknown (clock step)"
    s = ns / NS
    return f"{s * 1000:.3f} ms" if s < 1 else f"{s:.3f} s"


def _ms_asked(ms) -> str:
    return "none" if ms is None else f"{ms:,} ms"


def _t(x, digits) -> str:
    return "-" if x is None else clock(x, digits)


def _pk(first, what: str = "", answer=None, answered: str = "answered") -> str:
    """``[packet 17]``, ``[end packet 17, answered at packet 19]`` (nothing for no packet)."""
    if first is None:
        return ""
    head = f"{what} packet {first}" if what else f"packet {first}"
    if answer is not None and answer != first:
        return f"[{head}, {answered} at packet {answer}]"
    return f"[{head}]"


def _one(text, limit: int = 160) -> str:
    if text is None:
        return ""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def _cond(e: dict) -> str:
    if not e.get("condition"):
        return "without error"
    typ = e.get("condition_type")
    return (f"with {e['condition']} ({typ if typ else 'not a condition the spec names'})"
            + (f": {_one(e['description'])}" if e.get("description") else ""))


def _before(b: dict | None) -> str:
    """What each side sent last before an end."""
    if not b:
        return ""
    parts = []
    for side in ("client", "server"):
        x = b.get(side)
        if x is None:
            continue
        frame = "heartbeat" if x["frame"] == "empty" else x["frame"]
        parts.append(f"the {side}'s {frame} {_dur(x['before'])} before [packet {x['packet']}]"
                     + (" (then bytes of the " + side + " were lost: later frames unknown)" if x.get("lost_since") else ""))
    return "; after " + ", ".join(parts) if parts else ""


def _what(e: dict) -> str:
    if e["scope"] == "connection":
        return f"connection {e['connection']}"
    if e["scope"] == "session":
        return f"session {e['session']} (ch {e.get('channel') if e.get('channel') is not None else '-'}) of {e['connection']}"
    return f"link {e['link']!r} of {e['connection']}" + (f" (address {e['address']})" if e.get("address") else "")


_HOW = {"close": "with its connection", "end": "with its session"}
_OWN = {"connection": "close", "session": "end", "link": "detach"}
_DONE = {"close": "closed", "end": "ended", "detach": "detached"}


def end_line(e: dict) -> str:
    how = e.get("how")
    if how in ("detach", "end", "close") and e.get("side"):
        line = (f"{_what(e)}: {_DONE[how]} by the {e['side']} {_cond(e)}  "
                + _pk(e.get("packet"), how, e.get("answer_packet")))
        if e.get("answer"):
            line += f"; the answer {e['answer']}"
        if e.get("answer_error"):
            line += f"; answered {_cond(e['answer_error'])}"
        if e.get("closed") is False and e["scope"] == "link":
            line += "; closed=false (the link may be resumed)"
        return line + _before(e.get("before"))
    if how == "unknown":
        return f"{_what(e)}: unknown ({e.get('why')})"
    if how and how.startswith("transport"):
        return (f"{_what(e)}: no {'close' if e['scope'] == 'connection' else 'end frame'}: the {how}"
                + (f"  [packet {e['packet']}]" if e.get("packet") else "")
                + (f"; the {' and '.join(e['lost_sides'])} lost bytes before: an end frame may be among them"
                   if e.get("lost_sides") else "")
                + _before(e.get("before")))
    return f"{_what(e)}: {_HOW.get(how, how)}"


def _silence_text(side: str, s: dict) -> str:
    """The longest silence of one side, then the silence from its last frame to the end (when any)."""
    line = f"  longest silence of the {side}: "
    if s.get("longest") is not None:
        line += (f"{_dur(s['longest'])} "
                 + (f"[packets {s['from_packet']} to {s['to_packet']}]" if s.get("from_packet") is not None
                    else f"[to packet {s['to_packet']}]"))
    tr = s.get("trailing")
    if tr:
        line += ("; then " if s.get("longest") is not None else "") + (
            f"{_dur(tr['length'])} from its last frame to "
            + (f"the {tr['unknown_beyond']} (unknown beyond)" if tr.get("unknown_beyond") else "the transport's end"))
    return line


def _demand_text(side: str, other: str, s: dict) -> str:
    """What the other side asked of this one's silences, and how many of them are unknown (lost bytes)."""
    demand = s.get("demand")
    if demand:
        text = (f"; the {other} asked for a frame within {_dur(demand)}"
                + (": beyond it" if s.get("beyond_demand") else ""))
    else:
        text = f"; the {other} asked for no idle time-out"
    if s.get("unknown_silences"):
        text += (f"; {s['unknown_silences']:,} silence{'s' if s['unknown_silences'] != 1 else ''} longer than that unknown "
                 f"(bytes of the {side} were lost in {'them' if s['unknown_silences'] != 1 else 'it'})")
    return text


def _side_silence_line(side: str, other: str, s: dict) -> str:
    """One side's line of the idle time-out diagnosis."""
    if s.get("clock_step"):
        return f"  longest silence of the {side}: unknown (clock step)"
    if s.get("longest") is None and not s.get("trailing"):
        return f"  {side}: no silence measured (fewer than two frames)"
    return _silence_text(side, s) + _demand_text(side, other, s)


def _expired_line(ex: dict) -> str:
    """The idle time-out that expired: the close that followed the silence, or the transport's end."""
    lost = " (bytes of the silent side were lost since: its silence is unknown)" if ex.get("lost_since") else ""
    if ex.get("closed_by"):
        return (f"  idle time-out: the {ex['closed_by']} closed {_dur(ex['silence'])} after the {ex['silent']}'s "
                f"last frame, beyond the {_dur(ex['demand'])} it asked for, {_cond(ex)}"
                + (" (the description names the idle time-out)" if ex.get("names_idle") else "")
                + f"  [last frame packet {ex['last_frame_packet']}, close packet {ex['close_packet']}]"
                + lost)
    return (f"  idle time-out: the transport ended ({ex.get('transport_end') or 'end'}) "
            f"{_dur(ex['silence'])} after the {ex['silent']}'s last frame, beyond the {_dur(ex['demand'])} "
            f"asked of it, with no close  [packet {ex.get('transport_packet')}]"
            + lost)


def idle_lines(x: dict) -> list[str]:
    out = [f"{x['connection']}: idle-time-out asked by the client {_ms_asked(x['idle_time_out_client'])}, "
           f"by the server {_ms_asked(x['idle_time_out_server'])}"]
    for side, other in (("client", "server"), ("server", "client")):
        out.append(_side_silence_line(side, other, x[side]))
    if x.get("expired"):
        out.append(_expired_line(x["expired"]))
    return out


def _evidence(iv: dict, digits: int) -> str:
    ev = []
    for v in iv.get("evidence") or ():
        if v["kind"] == "available":
            ev.append(f"the sender's flow said available {v['available']:,} [packet {v['packet']}]")
        elif v["kind"] == "available-left":
            ev.append(f"{v['available']:,} left of the available its last flow said, when the credit ran out "
                      f"[packet {v['packet']}]")
        elif v["kind"] == "arriving":
            ev.append(f"transfers arrived at the address on link {v['link']!r} of {v['connection']} "
                      f"at {_t(v['time'], digits)}")
        else:
            ev.append(f"link {v['link']!r} of {v['connection']} got transfers from the address "
                      f"at {_t(v['time'], digits)}")
    return "; ".join(ev)


def _interval(iv: dict, digits: int) -> str:
    until = iv.get("until_packet")
    if until is None:
        end = "to the capture's end"
    elif iv.get("ended_by") == "flow":
        end = f"credit again at packet {until}"
    else:
        end = f"ended by {iv.get('ended_by') or 'end'} at packet {until}"
    return (f"{_dur(iv['duration'])} from {_t(iv['since'], digits)}: {_evidence(iv, digits)}  "
            f"[since packet {iv['since_packet']}, {end}]")


def starved_line(x: dict, digits: int) -> str:
    head = (f"link {x['link']!r} of {x['connection']} (receiver the {x['receiver_side']} {x['receiver']}"
            + (f", address {x['address']}" if x.get("address") else "") + "): credit 0 while messages waited ")
    if x["times"] == 1:
        return head + _interval(x["longest"], digits)
    return head + (f"{x['times']:,} times, {_dur(x['total'])} in all; the longest "
                   + _interval(x["longest"], digits))


def redelivery_line(x: dict) -> str:
    ident = f"message-id {x['id']!r} ({x['id_type']})" if x["identity"] == "message-id" else f"message (bare digest {x['id']})"
    rows = x.get("first") or ()
    dl = ", ".join(f"{r['link']!r} delivery {r['delivery_id']} {r['outcome'] or 'no outcome'} "
                   + _pk(r.get("first_packet"), "transfer", r.get("outcome_packet"), r.get("outcome") or "settled")
                   for r in rows[:4])
    return (f"{ident}: released or modified {x['released_or_modified']:,} times in {x['deliveries']:,} deliveries"
            + (f", header delivery-count up to {x['max_header_delivery_count']}" if x.get("max_header_delivery_count") else "")
            + f": {dl}" + (", …" if len(rows) > 4 or x["deliveries"] > len(rows) else ""))


def _clean(scope: str, how: str) -> str:
    """How entities ended without error: ``closed``, ``with their connection``, ..."""
    if how == _OWN.get(scope):
        return _DONE[how]
    if how == "close":
        return "with their connection"
    if how == "end":
        return "with their session"
    if how == "transport":
        return "with their connection's transport end (no end frame)"
    return how


#: connections whose idle time-out lines the text shows in full (beyond: only those with something to say)
IDLE_SHOWN = 10


def _notable(x: dict) -> bool:
    """A connection's idle time-out worth its lines: an expiry, a silence beyond what was asked, or
    silences unknown."""
    if x.get("expired"):
        return True
    for side in ("client", "server"):
        s = x[side]
        tr = s.get("trailing") or {}
        if s.get("beyond_demand") or s.get("unknown_silences") or (
                s.get("demand") and tr.get("length") is not None and tr["length"] > s["demand"]):
            return True
    return False


def _who(x: dict) -> str:
    """A peer in plain words: ``the server 127.0.0.1:5672 (container-id 'rabbit@vm', RabbitMQ 3.10.8 on Erlang/OTP 25)``."""
    said = [f"container-id {x['container_id']!r}" if x.get("container_id") is not None else "container-id unknown"]
    product = " ".join(v for v in (x.get("product"), x.get("version")) if v)
    if product:
        said.append(product + (f" on {x['platform']}" if x.get("platform") else ""))
    return f"the {x['side']} {x['peer']} ({', '.join(said)})"


def peer_line(x: dict) -> str:
    """One peer that broke one rule: who, what, the spec's section, how often, where, the first packets."""
    n = x["count"]
    links = x.get("links") or []
    where = ""
    if links:
        where = (f" on link{'s' if len(links) + (x.get('links_more') or 0) > 1 else ''} "
                 + ", ".join(repr(k) for k in links) + (f" and {x['links_more']:,} more" if x.get("links_more") else ""))
    pk = x.get("packets") or []
    line = (f"{_who(x)} {x['rule']} ({x['section']} {x['section_title']}): {n:,} time{'s' if n != 1 else ''}{where}"
            f" of {x['connection']}")
    if x.get("evidence"):
        line += f"; {x['evidence']}"
    if x.get("doubt"):
        line += f"; not proven: {x['doubt']}"
    if pk:
        line += f"  [packet{'s' if len(pk) > 1 else ''} {', '.join(str(p) for p in pk)}{', …' if x.get('packets_more') else ''}]"
    return line


def _more_line(n, indent: str = "    ") -> list[str]:
    """"… and N more (--format json)" of a list shown in part (nothing for none)."""
    return [f"{indent}… and {n:,} more (--format json)"] if n else []


def _starved_lines(dg: dict, digits: int) -> list[str]:
    """The "Receivers starved" diagnosis."""
    out = ["  Receivers starved (credit 0 while messages waited)" + ("" if dg["starved"] else ": none")]
    out.extend("    " + starved_line(x, digits) for x in dg["starved"])
    out.extend(_more_line(dg.get("starved_more")))
    return out


def _ends_lines(dg: dict) -> list[str]:
    """The "Why links, sessions and connections ended" diagnosis, with the count of clean ends."""
    out = ["  Why links, sessions and connections ended" + ("" if dg["ends"] else ": no error, no lost end")]
    out.extend("    " + end_line(e) for e in dg["ends"])
    out.extend(_more_line(dg.get("ends_more")))
    if dg.get("ends_clean"):
        out.append("    without error: " + ", ".join(
            f"{c['scope'] + 's' if c['count'] != 1 else c['scope']} {c['count']:,} {_clean(c['scope'], c['how'])}"
            for c in dg["ends_clean"]))
    return out


def _peers_lines(dg: dict) -> list[str]:
    """The "Peers breaking the protocol" diagnosis (nothing in a document of before this diagnosis)."""
    if "peers" not in dg:
        return []
    out = ["  Peers breaking the protocol" + ("" if dg["peers"] else ": none found")]
    out.extend("    " + peer_line(x) for x in dg["peers"])
    out.extend(_more_line(dg.get("peers_more")))
    return out


def _idle_section_lines(dg: dict) -> list[str]:
    """The "Idle time-out" diagnosis: every connection when few, else the notable ones, and how many more."""
    out = ["  Idle time-out" + ("" if dg["idle"] else ": none asked")]
    shown = dg["idle"] if len(dg["idle"]) <= IDLE_SHOWN else [x for x in dg["idle"] if _notable(x)][:IDLE_SHOWN]
    for x in shown:
        out.extend("    " + line for line in idle_lines(x))
    rest = len(dg["idle"]) - len(shown) + (dg.get("idle_more") or 0)
    if rest:
        out.append(f"    … and {rest:,} more connection{'s' if rest != 1 else ''} "
                   + ("(--format json)" if dg.get("idle_more") or sum(map(_notable, dg["idle"])) > sum(map(_notable, shown))
                      else "whose silences all stayed within what was asked (--format json)"))
    return out


def _redelivery_lines(dg: dict) -> list[str]:
    """The "Redelivery loops" diagnosis, or that it was not checked."""
    red = dg.get("redeliveries") or {}
    if not red.get("checked"):
        return ["  Redelivery loops: not checked (the messages were not read: report --messages reads them)"]
    out = ["  Redelivery loops (a message released or modified twice or more)" + ("" if red["loops"] else ": none")]
    out.extend("    " + redelivery_line(x) for x in red["loops"][:50])
    out.extend(_more_line(len(red["loops"]) - 50 if len(red["loops"]) > 50 else 0))
    return out


def diagnosis_lines(dg: dict | None, digits: int = 6) -> list[str]:
    """The report's "Diagnoses" section as text."""
    if not dg:
        return []
    return ["", "Diagnoses", *_starved_lines(dg, digits), *_ends_lines(dg), *_peers_lines(dg),
            *_idle_section_lines(dg), *_redelivery_lines(dg)]


def diagnoses_html(dg: dict | None, digits: int = 6) -> str:
    """The diagnoses as an HTML section (one list per diagnosis)."""
    if not dg:
        return ""
    lines = diagnosis_lines(dg, digits)[2:]
    out = ['<h2 id="diagnoses">Diagnoses</h2><section class="card"><ul class="notes">']
    for line in lines:
        if line.startswith("    "):
            out.append(f"<li>{_e(line.strip())}</li>")
        else:
            out.append(f"</ul><h3>{_e(line.strip())}</h3><ul class=\"notes\">")
    out.append("</ul></section>")
    return "".join(out)
