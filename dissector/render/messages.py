"""The report's messages section (``rep["messages"]``, made by
:func:`amqp_dissect.results.messages_report.messages_section`) as text lines and as HTML: counts per
state, per address fan-out, residence and end to end, the unmatched messages with their packets,
and (HTML) the journeys of a few messages drawn as a ladder (producer -> broker -> consumers) and
the residence / end-to-end histograms per address (logarithmic bins)."""

from __future__ import annotations

from typing import NamedTuple


_PLOT_ADDRESSES = 4  # addresses with histograms


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:.3f} ms"


def _n(x) -> str:
    return f"{x:,}"


def _ident(u: dict) -> str:
    if u.get("message_id") is not None:
        t = u.get("message_id_type")
        return f"message-id {u['message_id']!r}" + (f" ({t})" if t not in (None, "string") else "")
    return f"digest {(u.get('bare_digest') or '?')[:16]}… (no message-id)"


def _packets(ps) -> str:
    ps = [str(p) for p in ps or ()]
    return ("packet " if len(ps) == 1 else "packets ") + ", ".join(ps) if ps else "no packet"


def _clock_step(a: dict) -> str:
    """An address's messages whose residence or end to end is unknown (a clock step between the
    packets): not in its percentiles."""
    n = a.get("clock_step")
    return f"; {_n(n)} message{'s' if n != 1 else ''} unknown (clock step)" if n else ""


def text_lines(rep: dict) -> list[str]:
    """The section's lines (none when the report has no messages section)."""
    sec = rep.get("messages")
    if not sec:
        return []
    lines = ["", "Messages (matched across connections: see `messages`)"]
    states = ", ".join(f"{k} {_n(v)}" for k, v in sec["states"].items())
    lines.append(f"  {_n(sec['messages'])} messages: {states}")
    if sec.get("unkeyed_deliveries"):
        lines.append(f"  {_n(sec['unkeyed_deliveries'])} deliveries without a message read (no key: not matched)")
    if sec.get("dropped_deliveries"):
        lines.append(f"  {_n(sec['dropped_deliveries'])} deliveries past the report's first {_n(sec['key_limit'])} "
                     "messages not matched (the messages command matches all)")
    for a in sec["addresses"]:
        r, e = a["residence"], a["end_to_end"]
        lines.append(f"  {a['address'] or '(no address)'}: {_n(a['messages'])} messages, fan-out "
                     f"{a['fan_out_mean']:.2f} (max {a['fan_out_max']}); residence p50 {_ms(r['p50'])} p90 "
                     f"{_ms(r['p90'])} max {_ms(r['max'])}; end to end p50 {_ms(e['p50'])} p90 {_ms(e['p90'])} "
                     f"max {_ms(e['max'])}" + _clock_step(a))
    if sec.get("more_addresses"):
        lines.append(f"  … and {_n(sec['more_addresses'])} more addresses")
    for state, items in sec.get("unmatched", {}).items():
        n = sec["unmatched_counts"].get(state, len(items))
        lines.append(f"  {state}: {_n(n)}")
        for u in items:
            lines.append(f"    {_ident(u)} on {u['address'] or '(no address)'}  {_packets(u['packets'])}"
                         + (f"  ({u['evidence']})" if u.get("evidence") else ""))
        if n > len(items):
            lines.append(f"    … and {_n(n - len(items))} more (messages -Y 'state == \"{state}\"')")
    return lines


# --------------------------------------------------------------------------- HTML


def _histogram(H, stats: dict, what: str, plot_id: str, width=392, height=210) -> str:
    svg = H._Svg(width, height, plot_id, f"{what} histogram")
    svg.text(10, 16, f"{what.capitalize()}: histogram", cls="title")
    h = stats.get("histogram")
    if not h or (sum(h["counts"]) + h["zeros"]) == 0:
        return H._empty(svg, "no message with both ends in the capture" if not h or not h.get("negative")
                        else f"{h['negative']} negative only (a consumer before the publish)")
    if h.get("negative"):
        svg.text(width - 14, 16, f"{h['negative']} negative (not drawn)", anchor="end", cls="muted")
    left, top, right, bottom = 52, 28, width - 14, height - 42
    zeros = h["zeros"]
    zero_w = 22 if zeros else 0
    edges, counts = h["edges"], h["counts"]
    x = H._Scale(edges[0], edges[-1], left + zero_w, right, log=h["log"])
    ymax = max(max(counts), zeros) or 1
    ticks = H.nice_ticks(0, max(ymax, 4), 4)
    y = H._Scale(0, max(ticks[-1], ymax), bottom, top)
    factor, unit = H.time_unit(max(x.ticks(5) or [edges[-1]]))
    H._frame_axes(svg, x, y, left, top, right, bottom, H.unit_fmt(factor), H.si,
                  xlabel=f"{what}, {unit}" + (" (log scale)" if h["log"] else ""), ylabel="messages", yticks=ticks)
    colour = H.COLOURS["histogram"]
    if zeros:
        svg.rect(left + 3, y(zeros), zero_w - 6, bottom - y(zeros), colour, title=f"0: {zeros} messages", cls="bar")
    for i, c in enumerate(counts):
        if c:
            x0, x1 = x(edges[i]), x(edges[i + 1])
            svg.rect(x0 + 0.5, y(c), max(1.0, x1 - x0 - 1), bottom - y(c), colour,
                     title=f"{H.fmt_seconds(edges[i])} – {H.fmt_seconds(edges[i + 1])}: {c} messages", cls="bar")
    return svg.close()


class _Arrow(NamedTuple):
    """One frame of a message's journey: when, in which packet, from which lane to which, its label
    and colour."""
    time: int | None
    packet: int | None
    from_x: float
    to_x: float
    label: str
    colour: str


class _ConsumerLanes(NamedTuple):
    """The consumer lanes of a journey: the (connection, link index) of each, in order of first hop,
    the x of each, the step between them and the span they share."""
    keys: list
    x: dict
    step: float
    left: float
    right: float


_LANES = {"producer": 330, "broker": 640}  # x of the producer's and the broker's lanes


def _consumer_lanes(consumers: list, width: int) -> _ConsumerLanes:
    """Where each consumer link's lane goes: one in the middle of the span, more spread over it."""
    cx0, cx1 = 820, width - 90
    ckeys = list(dict.fromkeys((h["connection"], h["link_index"]) for h in consumers))
    step = (cx1 - cx0) / max(1, len(ckeys) - 1) if len(ckeys) > 1 else 0
    cx = {k: (cx0 + cx1) / 2 if len(ckeys) == 1 else cx0 + i * step for i, k in enumerate(ckeys)}
    return _ConsumerLanes(ckeys, cx, step, cx0, cx1)


def _hop_arrows(h: dict, lanes: _ConsumerLanes, to_b: str, to_c: str) -> list:
    """A hop's transfer and, when seen, its outcome back."""
    if h["role"] == "producer":
        px, bx = _LANES["producer"], _LANES["broker"]
        out = [_Arrow(h["time"], h["packet"], px, bx, "transfer (publish)", to_b)]
        if h["outcome_time"] is not None:
            out.append(_Arrow(h["outcome_time"], h["outcome_packet"], bx, px, f"disposition {h['outcome']}", to_c))
        return out
    x = lanes.x[(h["connection"], h["link_index"])]
    out = [_Arrow(h["time"], h["packet"], _LANES["broker"], x, "transfer", to_c)]
    if h["outcome_time"] is not None:
        out.append(_Arrow(h["outcome_time"], h["outcome_packet"], x, _LANES["broker"],
                          f"disposition {h['outcome']}", to_b))
    return out


def _journey_arrows(H, j: dict, lanes: _ConsumerLanes) -> list:
    """Every hop's arrows in time order (those of unknown time last)."""
    to_b, to_c = H.COLOURS["to-server"], H.COLOURS["to-client"]
    events = [e for h in j["hops"] for e in _hop_arrows(h, lanes, to_b, to_c)]
    events.sort(key=lambda e: (e.time is None, e.time or 0, e.packet or 0))
    return events


def _lane_heads(j: dict, consumers: list, lanes: _ConsumerLanes) -> list:
    """The (x, label) of each lane's head: producer, broker, each consumer link (its name cut to fit)."""
    prod = next((h for h in j["hops"] if h["role"] == "producer"), None)
    heads = [(_LANES["producer"], "producer" + (f" {prod['connection']}" if prod else " (not in the capture)")),
             (_LANES["broker"], "broker")]
    names = {(h["connection"], h["link_index"]): h["link"] for h in consumers}
    ckeys = lanes.keys
    room = int((lanes.step or (lanes.right - lanes.left)) / 6.5) if len(ckeys) > 1 else 48
    for k in ckeys:  # (the link's name; its connection on a second line when one consumer)
        name = str(names.get(k) or k[1])
        label = f"consumer {name}" if len(ckeys) == 1 else name  # (names share their start: the end shown)
        heads.append((lanes.x[k], label if len(label) <= room else "…" + label[-max(4, room - 1):]))
    return heads


def _draw_arrow(H, svg, e: _Arrow, yy: float, base) -> None:
    """One arrow of the journey: its packet and time on the left, the line, the head and the label."""
    svg.text(10, yy + 4, str(e.packet if e.packet is not None else "?"), cls="muted")
    if e.time is not None:
        svg.text(62, yy + 4, f"{(e.time - base) / 1e9:.6f}", cls="muted")
    x0, x1, colour = e.from_x, e.to_x, e.colour
    svg.line(x0, yy, x1, yy, colour, width=2)
    ah = 7 if x1 > x0 else -7
    svg.add(f'<path d="M{H._f(x1)},{H._f(yy)}L{H._f(x1 - ah)},{H._f(yy - 4.5)}L{H._f(x1 - ah)},'
            f'{H._f(yy + 4.5)}Z" fill="{colour}" class="arrow"/>')
    svg.add(f'<text x="{H._f((x0 + x1) / 2)}" y="{H._f(yy - 4)}" text-anchor="middle" fill="{colour}" '
            f'class="frame-label"><title>packet {e.packet}</title>{H._e(e.label)}</text>')


def journey_plot(H, j: dict, plot_id: str, width=1190) -> str:
    """One message's journey as a ladder: lanes producer, broker, consumers; each hop's transfer
    (producer -> broker, broker -> consumer) and its outcome back, in time order."""
    consumers = [h for h in j["hops"] if h["role"] == "consumer"]
    lanes = _consumer_lanes(consumers, width)
    events = _journey_arrows(H, j, lanes)
    row, top = 24, 78
    height = top + max(1, len(events)) * row + 20
    svg = H._Svg(width, height, plot_id, f"journey of {_ident(j)}")
    svg.text(10, 16, f"Journey of {_ident(j)}: {j['why']}", cls="title")
    svg.text(10, 34, f"{j['address'] or ''} — state {j['state']}; residence {_ms(j.get('residence_first'))} "
                     f"(largest {_ms(j['residence'])}), end to end {_ms(j.get('end_to_end_first'))} (largest "
                     f"{_ms(j['end_to_end'])}), {j['consumers']} consumer link(s)", cls="muted")
    svg.text(10, 56, "packet", cls="muted")
    svg.text(62, 56, "time", cls="muted")
    heads = _lane_heads(j, consumers, lanes)
    if len(lanes.keys) == 1:
        svg.text(lanes.x[lanes.keys[0]], 44, str(lanes.keys[0][0])[:48], anchor="middle", cls="muted")
    elif lanes.keys:
        svg.text((lanes.left + lanes.right) / 2, 44, "consumers (links)", anchor="middle", cls="muted")
    bottom = top + len(events) * row
    for x, label in heads:
        svg.text(x, 56, label[:48], anchor="middle")
        svg.rect(x - 1, 62, 3, bottom - 62 + 4, "#555555")
    base = next((e.time for e in events if e.time is not None), 0)
    for i, e in enumerate(events):
        _draw_arrow(H, svg, e, top + i * row + 8, base)
    return svg.close()


def html_section(rep: dict, H=None) -> str:
    """The section's HTML ("" when the report has no messages section).  ``H``: the HTML page's
    module (dissector/render/html.py, its escaping and SVG helpers), given by the page that calls
    this, so that this module does not import the page's."""
    sec = rep.get("messages")
    if not sec:
        return ""
    e = H._e
    out = ['<h2 id="messages">Messages</h2><section class="card">',
           f"<p>{_n(sec['messages'])} messages matched across connections (by message-id, else the bare message's "
           "digest): " + e(", ".join(f"{k} {_n(v)}" for k, v in sec["states"].items())) + ".</p>"]
    if sec.get("unkeyed_deliveries"):
        out.append(f'<p class="notes">{_n(sec["unkeyed_deliveries"])} deliveries without a message read '
                   "(no key: not matched)</p>")
    if sec.get("dropped_deliveries"):
        out.append(f'<p class="notes">{_n(sec["dropped_deliveries"])} deliveries past the report\'s first '
                   f'{_n(sec["key_limit"])} messages not matched (the messages command matches all)</p>')
    if sec["addresses"]:
        out.append('<table><tr><th>address</th><th class="num">messages</th><th class="num">fan-out mean / max</th>'
                   '<th class="num">residence p50 / p90 / max</th><th class="num">end to end p50 / p90 / max</th></tr>')
        for a in sec["addresses"]:
            r, x = a["residence"], a["end_to_end"]
            f = H.fmt_seconds
            out.append(f'<tr><td>{e(a["address"] or "(no address)")}</td><td class="num">{_n(a["messages"])}</td>'
                       f'<td class="num">{a["fan_out_mean"]:.2f} / {a["fan_out_max"]}</td>'
                       f'<td class="num">{f(r["p50"])} / {f(r["p90"])} / {f(r["max"])}</td>'
                       f'<td class="num">{f(x["p50"])} / {f(x["p90"])} / {f(x["max"])}{e(_clock_step(a))}</td></tr>')
        out.append("</table>")
        if sec.get("more_addresses"):
            out.append(f'<p class="sub">… and {_n(sec["more_addresses"])} more addresses</p>')
    for state, items in sec.get("unmatched", {}).items():
        n = sec["unmatched_counts"].get(state, len(items))
        out.append(f'<h3>{e(state)}: {_n(n)}</h3><ul class="notes">')
        for u in items:
            out.append(f"<li>{e(_ident(u))} on {e(u['address'] or '(no address)')}, {e(_packets(u['packets']))}"
                       + (f" ({e(u['evidence'])})" if u.get("evidence") else "") + "</li>")
        if n > len(items):
            out.append(f"<li>… and {_n(n - len(items))} more (see <code>messages</code>)</li>")
        out.append("</ul>")
    for i, a in enumerate(sec["addresses"][:_PLOT_ADDRESSES]):
        out.append(f'<h3>{e(a["address"] or "(no address)")}</h3><div class="row">')
        out.append(_histogram(H, a["residence"], "broker residence", f"msg-residence-{i}"))
        out.append(_histogram(H, a["end_to_end"], "end to end", f"msg-e2e-{i}"))
        out.append("</div>")
    for i, j in enumerate(sec.get("journeys") or ()):
        svg = journey_plot(H, j, f"journey-{i}")
        out.append(svg if i == 0 else f"<details><summary>Journey of {e(_ident(j))}: {e(j['why'])}</summary>{svg}"
                                      "</details>")
    out.append("</section>")
    return "".join(out)
