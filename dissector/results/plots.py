"""The data behind the plots of ``amqp-dissect report --format html`` (rendered by
:mod:`amqp_dissect.render.html`): a JSON-able document, bounded in size whatever the capture.

    an = SeriesAnalyzer()             # results.series: an Analyzer that keeps the time series
    ... feed events, an.finish() ...
    doc = plot_data(an)

``doc``:

* ``start`` / ``end``: capture times (epoch seconds) the time axes run over;
* ``links``: the :data:`PLOT_LINKS` links with most stalls and deliveries (in table order), each
  with its identity (connection, session, channel, link, link_index, address, sender, receiver),
  ``deliveries``, ``outcomes`` ({accepted, rejected, released, modified, declared, none}),
  ``latency`` (settlement latency: count, p50, p90, p99, max, ``histogram`` {edges, counts,
  zeros, negative, log}, ``cdf`` [[seconds, fraction], ...]), ``credit`` and ``window`` (the series of
  :class:`~amqp_dissect.results.series.Series` as dicts: buckets [time, min, max, last], or None
  when not kept), ``stalls`` (spans of this link's stalls and of its session's window stalls: kind,
  start, end, duration, count, fraction, open, start_packet, end_packet: one per stall up to
  :data:`EXACT_SPANS`, else per kind the stalled share (``fraction``) of each of :data:`SPAN_BINS`
  slices of the capture, so a plot never gets more spans than it has pixels) and ``stalls_total``;
* ``links_total``, ``links_not_shown``;
* ``stalls``: the stall timeline's spans (as a link's ``stalls``, with lane and label),
  in ``stall_lanes`` (a lane per link, or per session and sender for session-window stalls, at
  most :data:`TIMELINE_LANES`: those with most stalled time); ``stalls_total``;
* ``ladder``: the first frames of the first connections (see SeriesAnalyzer.ladder), each with
  client and server;
* ``notes``: what was cut or approximated, in words.

Idle periods (``Stall.idle()``) are not stalls: no ``stalls_total`` counts them; a link's ``idle``
(spans as its ``stalls``, kind ``idle``) and ``idle_total`` draw them apart.  A link's ``rate``
(SeriesAnalyzer.rate_series: t0, width, total, per bucket count, mean and max latency) gives the
throughput and latency over time; ``handle`` is the sender's handle (``handle_client``,
``handle_server``: as each peer numbered the link).

Histogram bins are logarithmic (a zero latency, a pre-settled single-frame delivery, is counted
apart in ``zeros``, a negative one, from timestamps out of order in the capture, in
``negative``); linear only for a single value; the CDF is
exact (a point per distinct latency) up to :data:`CDF_POINTS` points, then those at evenly
spaced ranks.
"""

from __future__ import annotations

from ..times import seconds

import math
from itertools import accumulate

from ..amqp.spec import OUTCOMES

PLOT_LINKS = 12  # links with plots
HIST_BINS = 30
CDF_POINTS = 400
TIMELINE_LANES = 24  # links / sessions in the stall timeline
EXACT_SPANS = 200  # stalls of a link drawn one by one; more are drawn as the stalled share of each slice
SPAN_BINS = 500  # slices of the capture (about 2 px each in the plots)


def histogram(keys, counts, bins: int = HIST_BINS) -> dict | None:
    """Bins of sorted distinct values ``keys`` with multiplicities ``counts``."""
    if not keys:
        return None
    zeros = sum(c for k, c in zip(keys, counts) if k == 0)
    negative = sum(c for k, c in zip(keys, counts) if k < 0)  # timestamps out of order in the capture
    pos = [(k, c) for k, c in zip(keys, counts) if k > 0]
    if not pos:
        return {"edges": [0.0, 1e-6], "counts": [0], "zeros": zeros, "negative": negative, "log": False}
    lo, hi = pos[0][0], pos[-1][0]
    log = hi > lo  # logarithmic bins by default (latencies spread over decades); one value: linear
    if hi == lo:  # one value: in the middle of a few bins around it
        edges = [lo * (0.8 + 0.04 * i) for i in range(11)]
    elif log:
        a, b = math.log10(lo), math.log10(hi)
        edges = [10 ** (a + (b - a) * i / bins) for i in range(bins + 1)]
    else:
        lo_edge = 0.0 if lo < (hi - lo) else lo
        edges = [lo_edge + (hi - lo_edge) * i / bins for i in range(bins + 1)]
    edges[0] = min(edges[0], lo)
    edges[-1] = max(edges[-1], hi)
    n = len(edges) - 1
    out = [0] * n
    j = 0
    for k, c in pos:
        while j < n - 1 and k >= edges[j + 1]:
            j += 1
        out[j] += c
    return {"edges": edges, "counts": out, "zeros": zeros, "negative": negative, "log": log}


def cdf(keys, counts, points: int = CDF_POINTS) -> list:
    """[[value, fraction of values <= value], ...] at each distinct value, or at ``points`` of them
    (evenly spaced ranks, the last one always kept)."""
    if not keys:
        return []
    ends = list(accumulate(counts))
    n = ends[-1]
    idx = range(len(keys))
    if len(keys) > points:
        step = (len(keys) - 1) / (points - 1)
        idx = sorted({round(i * step) for i in range(points)})
    return [[float(keys[i]), ends[i] / n] for i in idx]


def _latency(stats) -> dict:
    from .percentiles import summarize

    lat = stats.latency
    keys, counts = lat.distinct()
    s = summarize(lat)
    return {"count": s["count"], "p50": s["p50"], "p90": s["p90"], "p99": s["p99"], "max": s["max"],
            "histogram": histogram(keys, counts), "cdf": cdf(keys, counts)}


def _time_range(an, conns: list) -> tuple:
    """(start, end) of the plots, float seconds: the first connection's first packet to the
    capture's end (the capture's integer nanoseconds divided once, here)."""
    starts = [c.first_ts for c in conns if c.first_ts is not None]
    start = min(starts) if starts else None
    end = an._end()
    if end is None:
        end = start
    return seconds(start), seconds(end)


def _owner(st):
    """What a stall is drawn under: its link, or its session's window in its direction."""
    return id(st.link) if st.link is not None else ("s", id(st.session), st.direction)


def _stalls_by_owner(stalls) -> tuple:
    """({owner: stalls}, {owner: idle periods}) (:func:`_owner`), in the stalls' order."""
    stalls_of: dict = {}
    idle_of: dict = {}
    for st in stalls:
        (idle_of if st.idle() else stalls_of).setdefault(_owner(st), []).append(st)
    return stalls_of, idle_of


class _SpanDrawer:
    """Stalls of one link (or session) to draw, over the capture from ``start`` to ``end``."""

    def __init__(self, an, start, end):
        self.an = an
        self.start = start
        self.end = end
        self.span = (end - start) if start is not None and end is not None else 0.0

    def idle(self, periods) -> list:
        """Idle periods of one link or session, drawn as stalls are (see :meth:`spans`), kind ``idle``."""
        out = self.spans(periods)
        for d in out:
            d["kind"] = "idle"
        return out

    def spans(self, stalls) -> list:
        """Each stall (``fraction`` 1) while there are at most :data:`EXACT_SPANS`; beyond that, per
        kind, the share of each of :data:`SPAN_BINS` equal slices of the capture spent stalled
        (``fraction``), ``count`` the stalls starting in it."""
        stalls = sorted(stalls, key=lambda x: (x.start, x.start_packet or 0))
        if len(stalls) <= EXACT_SPANS or self.span <= 0:
            return [self._exact(st) for st in stalls]
        width = self.span / SPAN_BINS
        bins: dict = {}  # (kind, bin) -> span dict
        for st in stalls:
            self._bin(bins, st, width)
        out = sorted(bins.values(), key=lambda d: d["start"])
        for d in out:
            d["fraction"] = min(1.0, d["duration"] / width)
        return out

    def _exact(self, st) -> dict:
        end = seconds(st.end) if st.end is not None else self.end
        return {"kind": st.kind, "start": seconds(st.start), "end": end,
                "duration": self.an.stall_duration(st) or 0.0, "count": 1, "fraction": 1.0, "open": st.end is None,
                "start_packet": st.start_packet, "end_packet": st.end_packet}

    def _bin(self, bins: dict, st, width: float) -> None:
        """Add stall ``st`` to the slices it covers."""
        start = self.start
        e = seconds(st.end) if st.end is not None else self.end
        s0 = seconds(st.start)
        a = min(SPAN_BINS - 1, max(0, int((s0 - start) / width)))
        first = True
        while True:
            b0 = start + a * width
            b1 = b0 + width
            d = bins.get((st.kind, a))
            if d is None:
                d = bins[(st.kind, a)] = {"kind": st.kind, "start": b0, "end": b1, "duration": 0.0, "count": 0,
                                          "fraction": 0.0, "open": False, "start_packet": st.start_packet,
                                          "end_packet": st.end_packet}
            d["duration"] += max(0.0, min(e, b1) - max(s0, b0))
            d["end_packet"] = st.end_packet
            d["open"] = d["open"] or st.end is None
            if first:
                d["count"] += 1
                first = False
            if e <= b1 or a >= SPAN_BINS - 1:
                break
            a += 1


def _ranked_links(an, conns: list, stalls_of: dict) -> list:
    """Every link, in capture order: ((stalled, deliveries, stalls), order, connection, link, stats)."""
    ranked = []
    all_links = [(c, link) for c in conns for link in c.links]
    for order, (c, link) in enumerate(all_links):
        st = an.link_stats(link)
        n_stalls = len(stalls_of.get(id(link), ()))
        ranked.append(((n_stalls > 0, st.deliveries, n_stalls), order, c, link, st))
    return ranked


def _own(of: dict, link) -> list:
    """The stalls (or idle periods) of ``link``, and of its session's window in its direction."""
    sd = link.sender_dir
    own = list(of.get(id(link), ()))
    if sd is not None:
        own += of.get(("s", id(link.session), sd), ())
    return own


def _maybe(series) -> dict | None:
    return series.to_dict() if series is not None else None


def _link_plot(an, c, link, st, stalls_of: dict, idle_of: dict, drawer: _SpanDrawer) -> dict:
    """The plot data of one link: its deliveries, outcomes, latency, credit, window, stalls, rate."""
    credit_of = getattr(an, "credit_series", None)
    window_of = getattr(an, "window_series", None)
    rate_of = getattr(an, "rate_series", None)
    sd = link.sender_dir
    s = link.session
    outcomes = {k: st.outcomes.get(k, 0) for k in OUTCOMES}
    outcomes["none"] = st.no_outcome
    own = _own(stalls_of, link)
    own.sort(key=lambda x: x.start)
    idle = _own(idle_of, link)
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "link": link.name,
        "link_index": link.index,
        # the handle as each peer numbered it (the sender's is the link's handle)
        "handle": link.handle[sd] if sd is not None else None,
        "handle_client": link.handle[0],
        "handle_server": link.handle[1],
        "address": an._link_address(link),
        "sender": c.peer(sd) if sd is not None else None,
        "receiver": c.peer(1 - sd) if sd is not None else None,
        "deliveries": st.deliveries,
        "deliveries_lost_whole": link.lost_whole,  # (lost whole in the capture's gaps: not in deliveries)
        "outcomes": outcomes,
        "latency": _latency(st),
        "credit": _maybe(credit_of(link) if credit_of is not None else None),
        "window": _maybe(window_of(s, sd) if window_of is not None and sd is not None else None),
        "stalls": drawer.spans(own),
        "stalls_total": len(own),
        "idle": drawer.idle(idle),
        "idle_total": len(idle),
        "rate": _maybe(rate_of(link) if rate_of is not None else None),
    }


def _link_notes(an, links: list, n_links: int, n_interesting: int, max_links: int) -> list:
    """The notes on the links drawn: those without plots, those without series, merged buckets."""
    notes = []
    not_shown = n_links - len(links)
    if not_shown:
        idle = n_links - n_interesting
        notes.append(f"{not_shown} of {n_links} links have no plots"
                     + (f" ({idle} without deliveries or stalls)" if idle else "")
                     + (f"; plots for the {max_links} links with most stalls and deliveries"
                        if n_interesting > max_links else ""))
    for what, n in (("links", getattr(an, "links_without_series", 0)),
                    ("sessions", getattr(an, "sessions_without_series", 0))):
        if n:
            notes.append(f"{n} {what} got no credit / window series (series are kept for the first ones only)")
    if any(_merged_series(lk["credit"]) or _merged_series(lk["window"]) for lk in links):
        notes.append("credit / window series with many changes are drawn from merged buckets "
                     "(each keeps its min, max and last value)")
    return notes


def _merged_series(series: dict | None) -> bool:
    return bool(series and not series["exact"])


def _lane_of(st) -> tuple:
    """(key, label) of the timeline lane of a stall: its link, or its session's window in its direction."""
    c, s = st.conn, st.session
    if st.link is not None:
        label = f"{st.link.name} ({c.id})" if st.link.name is not None else f"link {st.link.index} ({c.id})"
        return ("l", c.seq, st.link.index), label
    side = ("client", "server")[st.direction] if st.direction in (0, 1) else "unknown side"
    return ("s", c.seq, s.index, st.direction), f"session {s.index} window, {side} sending ({c.id})"


def _lanes(an, stalls: list) -> dict:
    """The stall timeline's lanes: key -> {"label", "stalls", "seconds"}."""
    by_lane: dict = {}
    for st in stalls:
        key, label = _lane_of(st)
        lane = by_lane.get(key)
        if lane is None:
            lane = by_lane[key] = {"label": label, "stalls": [], "seconds": 0.0}
        lane["stalls"].append(st)
        lane["seconds"] += an.stall_duration(st) or 0.0
    return by_lane


def _timeline(kept: list, drawer: _SpanDrawer) -> tuple:
    """(the spans of the ``kept`` lanes, the lanes' labels)."""
    timeline = []
    lane_labels = []
    for i, (_, lane) in enumerate(kept):
        lane_labels.append(lane["label"])
        for d in drawer.spans(lane["stalls"]):
            d.update({"lane": i, "label": lane["label"]})
            timeline.append(d)
    return timeline, lane_labels


def _binned(spans) -> bool:
    return any(d["fraction"] < 1.0 or d["count"] != 1 for d in spans)


def _timeline_notes(kept: list, by_lane: dict, total: int, timeline: list, links: list, idle_periods: int) -> list:
    """The notes on the stall timeline, the binned spans and the idle periods."""
    notes = []
    if len(by_lane) > len(kept):
        shown = sum(len(lane["stalls"]) for _, lane in kept)
        notes.append(f"the stall timeline shows {len(kept)} of {len(by_lane)} links and sessions that stalled "
                     f"({shown} of {total} stalls), those with the most stalled time")
    if _binned(timeline) or any(_binned(lk["stalls"]) for lk in links):
        notes.append(f"where a link stalled more than {EXACT_SPANS} times, its stalls are drawn as the share of "
                     f"each 1/{SPAN_BINS} of the capture spent stalled (the height of the span)")
    if idle_periods:
        notes.append(f"{idle_periods:,} idle period{'s' if idle_periods != 1 else ''} (credit gone with nothing "
                     f"waiting) are drawn in grey under the credit and window plots, apart from the stalls: "
                     f"they are not stalls (stalls table, idle = true)")
    return notes


def _ladder(an) -> list:
    """The ladder diagrams' frames, each with its connection's client and server."""
    ladder = []
    for lad in (an.ladder() if hasattr(an, "ladder") else ()):
        c = an.connections.get(lad["connection"])
        ladder.append({**lad, "client": c.client if c is not None else None,
                       "server": c.server if c is not None else None})
    return ladder


def plot_data(an, max_links: int = PLOT_LINKS) -> dict:
    """The plot document of an Analyzer (a SeriesAnalyzer for the credit / window series)."""
    conns = list(an.connections.values())
    start, end = _time_range(an, conns)
    drawer = _SpanDrawer(an, start, end)
    # idle periods (the sender had nothing waiting) are not stalls: drawn apart, in grey
    stalls = [st for st in an.stalls if not st.idle()]
    stalls_of, idle_of = _stalls_by_owner(an.stalls)
    ranked = _ranked_links(an, conns, stalls_of)
    interesting = [r for r in ranked if r[0][1] or r[0][2]]
    chosen = sorted(sorted(interesting, key=lambda r: r[0], reverse=True)[:max_links], key=lambda r: r[1])
    links = [_link_plot(an, c, link, st, stalls_of, idle_of, drawer) for _, _, c, link, st in chosen]
    notes = _link_notes(an, links, len(ranked), len(interesting), max_links)
    # the stall timeline: a lane per link (or session), the lanes with most stalled time
    by_lane = _lanes(an, stalls)
    kept = sorted(sorted(by_lane.items(), key=lambda kv: -kv[1]["seconds"])[:TIMELINE_LANES], key=lambda kv: kv[0])
    timeline, lane_labels = _timeline(kept, drawer)
    notes += _timeline_notes(kept, by_lane, len(stalls), timeline, links, len(an.stalls) - len(stalls))
    return {
        "start": start,
        "end": end,
        "links": links,
        "links_total": len(ranked),
        "links_not_shown": len(ranked) - len(links),
        "stalls": timeline,
        "stall_lanes": lane_labels,
        "stalls_total": len(stalls),
        "ladder": _ladder(an),
        "notes": notes,
    }
