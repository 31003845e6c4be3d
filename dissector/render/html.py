"""The ``amqp-dissect report --format html`` page: one self-contained file, no script, no network.

Every plot is an inline SVG written here from the report document
(:func:`amqp_dissect.results.report.build_report`) and the plot document
(:func:`amqp_dissect.results.plots.plot_data`):

* per link: settlement-latency histogram and CDF, outcomes, link credit and session window over
  time with the stalls marked;
* a stall timeline (a lane per link);
* a ladder (sequence) diagram of the first frames of the first connections;
* the text report, folded, at the end.

Each plot kind has its own colours (:data:`COLOURS`), drawn solid with crisp edges, so a test can
find every plot in a screenshot by its colour.  Hovering a bar, a stall or a frame shows its
numbers (SVG ``<title>``).
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
from typing import NamedTuple
from html import escape

from .diagnoses import diagnoses_html
from .report import (cut_outcomes_text, layer_names, not_captured_text, clock_step_line, missing_file_line,
                     one_direction_line, render_text, tls_not_decrypted_line, tls_without_keys_line,
                     tunnel_not_read_line, unknown_outcome_parts)

COLOURS = {
    "histogram": "#4c72b0",
    "cdf": "#2e8b57",
    "credit": "#1f77b4",
    "window": "#ff7f0e",
    "stall-span": "#fbd5d5",
    "stall-mark": "#d62728",
    "accepted": "#2ca02c",
    "rejected": "#c62828",
    "released": "#f2a900",
    "modified": "#9467bd",
    "declared": "#17becf",
    "none": "#9e9e9e",
    "initial-credit": "#e377c2",
    "link-credit": "#b71c1c",
    "drain": "#8c564b",
    "session-window": "#bcbd22",
    "to-server": "#3465a4",
    "to-client": "#75507b",
    "throughput": "#4e79a7",
    "latency-mean": "#59a14f",
    "latency-max": "#e15759",
    "idle": "#c7c7c7",
    "grid": "#e6e6e6",
    "axis": "#555555",
}
STALL_KINDS = ("initial-credit", "link-credit", "drain", "session-window")
OUTCOME_ORDER = ("accepted", "rejected", "released", "modified", "declared", "none")

_CSS = """
:root { --fg: #1d1d1f; --muted: #6b6b70; --line: #e3e3e8; --card: #ffffff; --bg: #f5f6f8; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Helvetica, Arial, sans-serif; }
main { max-width: 1260px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 30px 0 10px; }
h3 { font-size: 15px; margin: 0 0 2px; }
.sub { color: var(--muted); margin: 0 0 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0 6px; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 110px; }
.stat b { display: block; font-size: 20px; }
.stat span { color: var(--muted); font-size: 12px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; margin: 12px 0; }
.meta { color: var(--muted); font-size: 12.5px; margin-bottom: 8px; }
.row { display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start; }
svg { display: block; font: 11px -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Helvetica, Arial, sans-serif; }
svg text { fill: #333; }
svg .title { font-size: 12px; font-weight: 600; fill: #222; }
svg .muted { fill: #777; }
table { border-collapse: collapse; width: 100%; background: var(--card); font-size: 12.5px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.notes { color: var(--muted); font-size: 12.5px; }
.legend { display: inline-flex; gap: 14px; font-size: 12px; color: var(--muted); margin: 2px 0 4px; flex-wrap: wrap; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -2px; margin-right: 4px; }
details > summary { cursor: pointer; color: #333; font-weight: 600; margin: 8px 0; }
pre { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px; overflow-x: auto; font-size: 12px; }
.empty { color: var(--muted); font-style: italic; }
"""


# --------------------------------------------------------------------------- formatting


def fmt_seconds(x) -> str:
    """A duration with a unit that suits it: 850 µs, 12.3 ms, 4.20 s."""
    if x is None:
        return "-"
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return _e(x)
    if not math.isfinite(x):
        return f"{x} s"
    a = abs(x)
    if a == 0:
        return "0"
    if a < 1e-3:
        return f"{x * 1e6:.3g} µs"
    if a < 1:
        return f"{x * 1e3:.3g} ms"
    if a < 100:
        return f"{x:.3g} s"
    return f"{x:.0f} s"


def time_unit(span) -> tuple:
    """(factor, unit) for an axis of seconds whose ticks go up to ``span``: the ticks are written
    as plain numbers of that unit and the axis title names it (µs ticks under "µs", not "seconds")."""
    a = abs(span) if isinstance(span, (int, float)) and math.isfinite(span) else 1.0
    if a < 1e-3:
        return 1e6, "µs"
    if a < 1:
        return 1e3, "ms"
    return 1.0, "s"


def unit_fmt(factor: float):
    """A tick formatter for a time axis in the unit of ``factor`` (see :func:`time_unit`)."""
    return lambda v: f"{v * factor:.4g}"


# the times a date can be written for (years 1 to 9999); a capture's clock can say anything
_FIRST_TS = -62135596800.0
_END_TS = 253402300800.0


def valid_time(ts) -> bool:
    """``ts`` (epoch seconds) is a number a date can be written for."""
    return isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts) and \
        _FIRST_TS <= ts < _END_TS


def _utc(ts) -> str:
    if ts is None:
        return "-"
    if not valid_time(ts):
        return f"invalid time ({_num(ts)} s since 1970)"
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    except (OverflowError, ValueError, OSError):
        return f"invalid time ({_num(ts)} s since 1970)"


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def si(v) -> str:
    """An axis number in few characters: 950, 12k, 2.1M, 4.29G."""
    a = abs(v)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:g}"


def _e(x) -> str:
    return escape("" if x is None else str(x), quote=True)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list:
    """About ``n`` round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n)
    if not (math.isfinite(raw) and raw > 0):  # (a span too small, or too large, for a step)
        return [lo, hi]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    v = first
    while v <= hi + step * 1e-9 and len(out) < 50:
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return out


class _Scale:
    """Linear or log10 map from data to pixels."""

    def __init__(self, lo, hi, p0, p1, log=False):
        self.log = log
        if log:
            lo = math.log10(lo) if lo > 0 else 0.0
            hi = math.log10(hi) if hi > 0 else lo + 1
        if not (math.isfinite(lo) and math.isfinite(hi)):  # (no axis from such numbers: a unit one)
            lo, hi = 0.0, 1.0
        if not hi - lo > 0 or not math.isfinite(hi - lo):
            # (lo + 1 is lo itself past 2**53: the step has to be one the float can hold)
            hi = lo + max(1.0, abs(lo) * 2.0 ** -50)
            if not hi - lo > 0 or not math.isfinite(hi - lo):
                lo, hi = 0.0, 1.0
        self.lo, self.hi, self.p0, self.p1 = lo, hi, p0, p1

    def __call__(self, v) -> float:
        if self.log:
            v = math.log10(v) if v > 0 else self.lo
        return self.p0 + (v - self.lo) * (self.p1 - self.p0) / (self.hi - self.lo)

    def ticks(self, n=5) -> list:
        if not self.log:
            return nice_ticks(self.lo, self.hi, n)
        return log_ticks(10 ** self.lo, 10 ** self.hi, n)


def log_ticks(lo: float, hi: float, n: int = 5) -> list:
    """Ticks of a log axis from ``lo`` to ``hi`` (> 0): the powers of ten in it when there are two
    or more; else 1, 2 and 5 times them; else (a span of less than a factor 2 or so) round values
    as on a linear axis."""
    if not (lo > 0 and hi > lo and math.isfinite(lo) and math.isfinite(hi)):
        return [lo] if lo > 0 else [1.0]
    a, b = math.log10(lo), math.log10(hi)
    decades = [10.0 ** k for k in range(math.ceil(a - 1e-9), math.floor(b + 1e-9) + 1)]
    if len(decades) >= 2:
        step = max(1, math.ceil(len(decades) / max(1, n)))
        return decades[::step]
    ones = [m * 10.0 ** k for k in range(math.floor(a) - 1, math.ceil(b) + 1) for m in (1, 2, 5)
            if lo * (1 - 1e-9) <= m * 10.0 ** k <= hi * (1 + 1e-9)]
    if len(ones) >= 2:
        return ones
    return [v for v in nice_ticks(lo, hi, n) if v > 0] or [lo]


def _f(x: float) -> str:
    """A pixel coordinate (a number that is not one is drawn at 0, never written as nan / inf)."""
    return f"{x:.1f}" if math.isfinite(x) else "0.0"


class _Svg:
    def __init__(self, width: int, height: int, plot_id: str, label: str):
        self.w, self.h = width, height
        self.parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                      f'viewBox="0 0 {width} {height}" id="{_e(plot_id)}" data-plot="{_e(plot_id.split("-")[0])}" '
                      f'role="img" aria-label="{_e(label)}">']

    def add(self, s: str) -> None:
        self.parts.append(s)

    def rect(self, x, y, w, h, fill, title=None, cls=None, extra="") -> None:
        t = f"<title>{_e(title)}</title>" if title else ""
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0))}" height="{_f(max(h, 0))}" '
                          f'fill="{fill}" shape-rendering="crispEdges"{c}{extra}>{t}</rect>')

    def line(self, x1, y1, x2, y2, stroke, width=1, dash=None, crisp=True) -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        cr = ' shape-rendering="crispEdges"' if crisp else ""
        self.parts.append(f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}" '
                          f'stroke-width="{width}"{d}{cr}/>')

    def text(self, x, y, s, anchor="start", cls=None, size=None, extra="") -> None:
        c = f' class="{cls}"' if cls else ""
        sz = f' font-size="{size}"' if size else ""
        self.parts.append(f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{c}{sz}{extra}>{_e(s)}</text>')

    def path(self, d: str, stroke, width=2, cls=None) -> None:
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width}" '
                          f'stroke-linejoin="miter" shape-rendering="crispEdges"{c}/>')

    def close(self) -> str:
        return "".join(self.parts) + "</svg>"


def _frame_axes(svg: _Svg, x: _Scale, y: _Scale, left, top, right, bottom, xfmt, yfmt, xlabel=None, ylabel=None,
                yticks=None):
    for v in (yticks if yticks is not None else y.ticks(4)):
        py = y(v)
        svg.line(left, py, right, py, COLOURS["grid"])
        svg.text(left - 5, py + 3.5, yfmt(v), anchor="end", cls="muted")
    for v in x.ticks(5):
        px = x(v)
        if left - 0.5 <= px <= right + 0.5:
            svg.line(px, bottom, px, bottom + 4, COLOURS["axis"])
            svg.text(px, bottom + 15, xfmt(v), anchor="middle", cls="muted")
    svg.line(left, bottom, right, bottom, COLOURS["axis"])
    svg.line(left, top, left, bottom, COLOURS["axis"])
    if xlabel:
        svg.text((left + right) / 2, bottom + 29, xlabel, anchor="middle", cls="muted")
    if ylabel:
        svg.add(f'<text x="12" y="{_f((top + bottom) / 2)}" text-anchor="middle" class="muted" '
                f'transform="rotate(-90 12 {_f((top + bottom) / 2)})">{_e(ylabel)}</text>')


def _empty(svg: _Svg, msg: str) -> str:
    svg.text(svg.w / 2, svg.h / 2, msg, anchor="middle", cls="muted")
    return svg.close()


# --------------------------------------------------------------------------- per-link plots


def latency_histogram(lat: dict, plot_id: str, width=392, height=230) -> str:
    svg = _Svg(width, height, plot_id, "settlement-latency histogram")
    svg.text(10, 16, "Settlement latency: histogram", cls="title")
    h = lat.get("histogram")
    if not h or (sum(h["counts"]) + h["zeros"]) == 0:
        return _empty(svg, "no settled deliveries" if not h or not h.get("negative") else
                      f"{h['negative']} negative latencies only (timestamps out of order)")
    if h.get("negative"):
        svg.text(width - 14, 16, f"{h['negative']} negative (not drawn)", anchor="end", cls="muted")
    left, top, right, bottom = 52, 28, width - 14, height - 42
    zeros = h["zeros"]
    zero_w = 22 if zeros else 0
    edges, counts = h["edges"], h["counts"]
    x = _Scale(edges[0], edges[-1], left + zero_w, right, log=h["log"])
    ymax = max(max(counts), zeros) or 1
    ticks = nice_ticks(0, max(ymax, 4), 4)
    y = _Scale(0, max(ticks[-1], ymax), bottom, top)
    factor, unit = time_unit(max(x.ticks(5) or [edges[-1]]))
    _frame_axes(svg, x, y, left, top, right, bottom, unit_fmt(factor), si,
                xlabel=f"settlement latency, {unit}" + (" (log scale)" if h["log"] else ""),
                ylabel="deliveries", yticks=ticks)
    if zeros:
        svg.rect(left + 3, y(zeros), zero_w - 6, bottom - y(zeros), COLOURS["histogram"],
                 title=f"latency 0: {zeros} deliveries", cls="bar")
        svg.text(left + zero_w / 2, bottom + 15, "0", anchor="middle", cls="muted")
    for i, c in enumerate(counts):
        if not c:
            continue
        x0, x1 = x(edges[i]), x(edges[i + 1])
        svg.rect(x0 + 0.5, y(c), max(1.0, x1 - x0 - 1), bottom - y(c), COLOURS["histogram"],
                 title=f"{fmt_seconds(edges[i])} – {fmt_seconds(edges[i + 1])}: {c} deliveries", cls="bar")
    return svg.close()


def latency_cdf(lat: dict, plot_id: str, width=392, height=230) -> str:
    svg = _Svg(width, height, plot_id, "settlement-latency CDF")
    svg.text(10, 16, "Settlement latency: CDF", cls="title")
    pts = lat.get("cdf") or []
    if not pts:
        return _empty(svg, "no settled deliveries")
    left, top, right, bottom = 52, 28, width - 14, height - 42
    h = lat.get("histogram") or {}
    pos = [p for p in pts if p[0] > 0]
    log = bool(h.get("log")) and len(pos) > 0
    lo = pos[0][0] if log else min(0.0, pts[0][0])
    hi = pts[-1][0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1e-3)
    x = _Scale(lo, hi, left, right, log=log)
    y = _Scale(0, 1, bottom, top)
    factor, unit = time_unit(max(x.ticks(5) or [hi]))
    _frame_axes(svg, x, y, left, top, right, bottom, unit_fmt(factor), lambda v: f"{v:.0%}",
                xlabel=f"settlement latency, {unit}" + (" (log scale)" if log else ""), ylabel="fraction settled",
                yticks=[0, 0.25, 0.5, 0.75, 1])
    for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
        v = lat.get(key)
        if v is not None and (v > 0 or not log):
            px = x(v)
            svg.line(px, top, px, bottom, "#9a9a9a", dash="3,3")
            ty = bottom - 8 - 13 * (2 - [0.5, 0.9, 0.99].index(q))
            if px > right - 90:
                svg.text(px - 4, ty, f"{key} {fmt_seconds(v)}", anchor="end", cls="muted")
            else:
                svg.text(px + 4, ty, f"{key} {fmt_seconds(v)}", cls="muted")
    d = [f"M{_f(left)},{_f(bottom)}"]
    prev_y = bottom
    for v, frac in pts:
        if log and v <= 0:
            prev_y = y(frac)
            d.append(f"L{_f(left)},{_f(prev_y)}")
            continue
        px = x(v)
        d.append(f"L{_f(px)},{_f(prev_y)}")
        prev_y = y(frac)
        d.append(f"L{_f(px)},{_f(prev_y)}")
    d.append(f"L{_f(right)},{_f(prev_y)}")
    svg.path("".join(d), COLOURS["cdf"], 2, cls="cdf")
    return svg.close()


def outcomes_plot(outcomes: dict, plot_id: str, width=356, height=230) -> str:
    svg = _Svg(width, height, plot_id, "outcomes")
    svg.text(10, 16, "Outcomes", cls="title")
    items = [(k, outcomes.get(k, 0)) for k in OUTCOME_ORDER if outcomes.get(k, 0)]
    if not items:
        return _empty(svg, "no deliveries")
    total = sum(n for _, n in items)
    left, right, top = 88, width - 100, 30
    bar_h = min(26, (height - top - 14) / len(items) - 6)
    x = _Scale(0, max(n for _, n in items), left, right)
    for i, (k, n) in enumerate(items):
        yy = top + i * (bar_h + 6)
        svg.text(left - 6, yy + bar_h / 2 + 4, k, anchor="end")
        svg.rect(left, yy, max(2.0, x(n) - left), bar_h, COLOURS[k], title=f"{k}: {n} of {total}", cls="bar",
                 extra=f' data-outcome="{k}" data-count="{n}"')
        svg.text(max(left + 2, x(n)) + 5, yy + bar_h / 2 + 4, f"{n:,}  ({n / total:.0%})", cls="muted")
    return svg.close()


def _series_path(series: dict, x: _Scale, y: _Scale, right) -> str:
    bk = series["buckets"]
    if not bk:
        return ""
    d = []
    prev = None
    for t, lo, hi, last in bk:
        px = x(t)
        if prev is None:
            d.append(f"M{_f(px)},{_f(y(lo if lo == hi else lo))}")
        else:
            d.append(f"L{_f(px)},{_f(y(prev))}")
        if lo != hi:
            d.append(f"L{_f(px)},{_f(y(lo))}L{_f(px)},{_f(y(hi))}")
        d.append(f"L{_f(px)},{_f(y(last))}")
        prev = last
    d.append(f"L{_f(right)},{_f(y(prev))}")
    return "".join(d)


def _band_path(series: dict, x: _Scale, y: _Scale) -> str:
    """The area between each bucket's min and max, from its time to the next bucket's."""
    bk = series["buckets"]
    up, down = [], []
    for j, (t, lo, hi, _last) in enumerate(bk):
        t_next = bk[j + 1][0] if j + 1 < len(bk) else t
        up.append(f"{_f(x(t))},{_f(y(hi))} {_f(x(t_next))},{_f(y(hi))}")
        down.append(f"{_f(x(t_next))},{_f(y(lo))} {_f(x(t))},{_f(y(lo))}")
    return "M" + " L".join(up + down[::-1]) + "Z" if bk else ""


def _stall_tip(st: dict) -> str:
    if st["fraction"] < 1.0 or st["count"] != 1:
        width = st["end"] - st["start"] if st["end"] is not None and st["start"] is not None else None
        return (f"{st['kind']}: {fmt_seconds(st['duration'])} stalled in {fmt_seconds(width)} "
                f"({st['fraction']:.0%}), {st['count']} stall{'s' if st['count'] != 1 else ''} starting here")
    return (f"{st['kind']} stall of {fmt_seconds(st['duration'])}" + (" (still open at the end)" if st["open"] else "")
            + f", packets {st['start_packet']}–{st['end_packet'] if st['end_packet'] else 'end'}")


def _binned_tip(spans: list) -> str:
    n = sum(s["count"] for s in spans)
    secs = sum(s["duration"] for s in spans)
    kinds = sorted({s["kind"] for s in spans})
    return (f"{n:,} {'/'.join(kinds)} stalls, {fmt_seconds(secs)} stalled in all; drawn per slice of the capture, "
            f"as high as the share of the slice spent stalled")


def _strip(svg: _Svg, xt: _Scale, spans: list, y0: float, h: float, colour: str, cls: str, tip: str) -> None:
    """One row of bars under a plot's title: a bar per span (a stall or idle period, or a slice of
    the capture), as high as the share of its width spent so (``fraction``)."""
    d = []
    for st in spans:
        sx0 = xt(st["start"])
        w = max(1.0, xt(st["end"]) - sx0)
        bh = max(1.5, h * min(1.0, st["fraction"]))
        d.append(f"M{_f(sx0)},{_f(y0 + h - bh)}h{_f(w)}v{_f(bh)}h{_f(-w)}z")
    svg.add(f'<path d="{"".join(d)}" fill="{colour}" shape-rendering="crispEdges" class="{cls}">'
            f'<title>{_e(tip)}</title></path>')


def _idle_tip(spans: list) -> str:
    n = sum(s["count"] for s in spans)
    secs = sum(s["duration"] for s in spans)
    return (f"{n:,} idle period{'s' if n != 1 else ''} (credit gone with nothing waiting: not stalls), "
            f"{fmt_seconds(secs)} in all")


_SERIES_TITLES = {"credit": "Link credit of the sender", "window": "Session window (remote-incoming-window of the sender)"}
_STRIP_H = 12  # height of a row of bars above a series plot (binned stalls, idle periods)


def _is_exact(st: dict) -> bool:
    """A stall drawn alone (not a slice of the capture binning several)."""
    return st["fraction"] >= 1.0 and st["count"] == 1


def _strip_rows(svg, xt: _Scale, binned: list, idle: list, left: float, right: float) -> None:
    """The rows of bars above a series plot: the share of each slice spent stalled (many stalls), then
    the idle periods (not stalls), each row labelled."""
    row_y = 24
    if binned:  # many stalls: the share of each slice of the capture spent stalled, above the plot
        svg.text(left - 5, row_y + _STRIP_H - 2, "stalled", anchor="end", cls="muted", size=10)
        svg.rect(left, row_y, right - left, _STRIP_H, "#f7f7f9")
        _strip(svg, xt, binned, row_y, _STRIP_H, COLOURS["stall-mark"], "stall-share",
               _binned_tip(binned))
        row_y += _STRIP_H + 4
    if idle:  # idle periods: not stalls, drawn apart
        svg.text(left - 5, row_y + _STRIP_H - 2, "idle", anchor="end", cls="muted", size=10)
        svg.rect(left, row_y, right - left, _STRIP_H, "#f7f7f9")
        _strip(svg, xt, idle, row_y, _STRIP_H, COLOURS["idle"], "idle", _idle_tip(idle))


def _series_line(svg, series: dict, which: str, xt: _Scale, y: _Scale, right: float) -> None:
    """The series itself (a line; a band from min to max of each bucket when buckets were merged) and the
    count of its changes."""
    if not series["exact"]:  # merged buckets: the range each covered, as a band (no barcode of strokes)
        svg.add(f'<path d="{_band_path(series, xt, y)}" fill="{COLOURS[which]}" fill-opacity="0.45" '
                f'stroke="{COLOURS[which]}" stroke-width="1" class="{which}-band"/>')
    else:
        svg.path(_series_path(series, xt, y, right), COLOURS[which], 2, cls=which)
    note = f"{series['points']:,} changes"
    if not series["exact"]:
        note += f", {series['per_bucket']:,} per bucket (the band: min to max of each)"
    svg.text(right, 16, note, anchor="end", cls="muted")


def _value_scale(series: dict, bottom: float, top: float) -> tuple:
    """The vertical scale of a series plot (from 0, or below when the series goes below) and its ticks."""
    vmax = max(b[2] for b in series["buckets"])
    vmin = min(0.0, min(b[1] for b in series["buckets"]))
    ticks = nice_ticks(vmin, vmax * 1.08 if vmax > vmin else vmin + 1, 4)
    return _Scale(ticks[0], max(ticks[-1], vmax * 1.08), bottom, top), ticks


def _stall_spans(svg, xt: _Scale, exact: list, top: float, bottom: float) -> None:
    """Stalls one by one: a light span under the line."""
    for st in exact:
        sx0 = xt(st["start"])
        sx1 = max(sx0 + 2, xt(st["end"]))
        svg.rect(sx0, top, sx1 - sx0, bottom - top, COLOURS["stall-span"], title=_stall_tip(st), cls="stall")


def _stall_marks(svg, xt: _Scale, exact: list, top: float) -> None:
    """Stalls one by one: a dark mark along the top."""
    for st in exact:
        sx0 = xt(st["start"])
        svg.rect(sx0, top - 5, max(2.0, xt(st["end"]) - sx0), 5, COLOURS["stall-mark"], cls="stall-mark")


def series_plot(series: dict | None, stalls: list, start, end, which: str, plot_id: str, width=1190, height=170,
                idle: list | None = None) -> str:
    """Link credit or session window over time.  Stalls drawn one by one shade the plot; a link
    with more stalls than that (``fraction`` < 1: slices of the capture) gets a row of bars above
    the plot instead, as high as the share of each slice spent stalled, and idle periods (not
    stalls) a grey row of their own."""
    title = _SERIES_TITLES[which]
    shown = [st for st in _drawable(stalls) if (st["kind"] == "session-window") == (which == "window")]
    exact = [st for st in shown if _is_exact(st)]
    binned = [st for st in shown if not _is_exact(st)]
    idle = [st for st in _drawable(idle or ()) if which == "credit"]
    rows = (1 if binned else 0) + (1 if idle else 0)
    height += rows * (_STRIP_H + 4)
    svg = _Svg(width, height, plot_id, title)
    svg.text(10, 16, title, cls="title")
    if series is None or not series["buckets"]:
        return _empty(svg, "not known from the capture")
    left, right, bottom = 64, width - 16, height - 36
    top = 26 + rows * (_STRIP_H + 4)
    t0 = start if start is not None else series["buckets"][0][0]
    t1 = end if end is not None and end > t0 else series["buckets"][-1][0] + 1e-3
    x = _Scale(0, t1 - t0, left, right)
    xt = _Scale(t0, t1, left, right)
    y, ticks = _value_scale(series, bottom, top)
    _stall_spans(svg, xt, exact, top, bottom)
    _strip_rows(svg, xt, binned, idle, left, right)
    _stall_marks(svg, xt, exact, top)
    factor, unit = time_unit(max(x.ticks(5) or [t1 - t0]))
    _frame_axes(svg, x, y, left, top, right, bottom, unit_fmt(factor), si,
                xlabel=f"time since the capture start, {unit}", yticks=ticks)
    _series_line(svg, series, which, xt, y, right)
    return svg.close()


class _RateAxes(NamedTuple):
    """Where a rate plot draws: its box, its scales (``x`` from 0, ``xt`` from the capture's clock),
    the time unit's factor and name, the bucket width and the first bucket's start."""
    left: float
    top: float
    right: float
    bottom: float
    x: _Scale
    xt: _Scale
    factor: float
    unit: str
    width: float
    t0: float


_RATE_TITLES = {"throughput": "Throughput: deliveries settled per second",
                "latency": "Settlement latency over time (mean, max per bucket)"}


def _rate_axes(rate: dict, start, end, half: int, height: int) -> _RateAxes:
    """The box and time scales of a rate plot (the capture's span, at least one bucket)."""
    left, top, right, bottom = 64, 28, half - 14, height - 36
    w = rate["width"]
    t0 = start if start is not None else rate["t0"]
    t1 = end if end is not None and end > t0 else rate["t0"] + w * len(rate["count"])
    t1 = max(t1, t0 + w)
    x = _Scale(0, t1 - t0, left, right)
    xt = _Scale(t0, t1, left, right)
    factor, unit = time_unit(max(x.ticks(4) or [t1 - t0]))
    return _RateAxes(left, top, right, bottom, x, xt, factor, unit, w, rate["t0"])


def _throughput_plot(svg, rate: dict, a: _RateAxes) -> None:
    """Deliveries settled per second, a bar per bucket that settled something."""
    w = a.width
    per_s = [c / w if w > 0 else 0.0 for c in rate["count"]]
    top_v = max(per_s) or 1.0
    ticks = nice_ticks(0, top_v * 1.05, 4)
    y = _Scale(0, max(ticks[-1], top_v), a.bottom, a.top)
    _frame_axes(svg, a.x, y, a.left, a.top, a.right, a.bottom, unit_fmt(a.factor), si,
                xlabel=f"time since the capture start, {a.unit}", ylabel="deliveries/s", yticks=ticks)
    d = []
    for i, v in enumerate(per_s):
        if v <= 0:
            continue
        bx0 = a.xt(a.t0 + i * w)
        bw = max(1.0, a.xt(a.t0 + (i + 1) * w) - bx0)
        d.append(f"M{_f(bx0)},{_f(a.bottom)}h{_f(bw)}V{_f(y(v))}h{_f(-bw)}z")
    tip = f"{rate['total']:,} deliveries settled, in buckets of {fmt_seconds(w)}"
    svg.add(f'<path d="{"".join(d)}" fill="{COLOURS["throughput"]}" shape-rendering="crispEdges" '
            f'class="throughput"><title>{_e(tip)}</title></path>')


def _latency_steps(svg, pts: list, key: str, colour: str, y: _Scale, a: _RateAxes) -> None:
    """The max or mean latency as a step across each bucket that settled something (nothing across
    empty ones), and a mark on each when few."""
    w = a.width
    d = []
    prev = None
    for i, m, mx in pts:
        v = y(mx if key == "max" else m)
        bx0 = a.xt(a.t0 + i * w)
        bw = max(2.0, a.xt(a.t0 + (i + 1) * w) - bx0)
        d.append(f"{'L' if prev == i - 1 else 'M'}{_f(bx0)},{_f(v)}h{_f(bw)}")
        prev = i
    svg.path("".join(d), COLOURS[colour], 1.5, cls=f"latency-{key}")
    if len(pts) <= 100:  # few buckets: a mark on each, so a lone one shows
        for i, m, mx in pts:
            v = y(mx if key == "max" else m)
            px = a.xt(a.t0 + (i + 0.5) * w)
            svg.rect(px - 2.5, v - 2.5, 5, 5, COLOURS[colour], cls=f"latency-{key}-mark")


def _latency_plot(svg, rate: dict, a: _RateAxes) -> None:
    """Settlement latency over time: the max and the mean of each bucket."""
    pts = [(i, m, mx) for i, (m, mx) in enumerate(zip(rate["mean"], rate["max"])) if m is not None]
    top_v = max(mx for _, _, mx in pts) or 1e-6
    lat_factor, lat_unit = time_unit(top_v)
    ticks = nice_ticks(0, top_v * 1.05, 4)
    y = _Scale(0, max(ticks[-1], top_v), a.bottom, a.top)
    _frame_axes(svg, a.x, y, a.left, a.top, a.right, a.bottom, unit_fmt(a.factor), unit_fmt(lat_factor),
                xlabel=f"time since the capture start, {a.unit}", ylabel=f"latency, {lat_unit}", yticks=ticks)
    for key, colour in (("max", "latency-max"), ("mean", "latency-mean")):
        _latency_steps(svg, pts, key, colour, y, a)


def rate_plots(rate: dict | None, start, end, plot_id: str, width=1190, height=170) -> str:
    """Throughput (deliveries settled per second) and settlement latency (mean and max) over time,
    per bucket of the link's :class:`~amqp_dissect.results.series.RateSeries`, side by side."""
    half = (width - 30) // 2  # (two side by side in a card)
    out = []
    for which, draw in (("throughput", _throughput_plot), ("latency", _latency_plot)):
        title = _RATE_TITLES[which]
        svg = _Svg(half, height, f"{which}-{plot_id}", title)
        svg.text(10, 16, title, cls="title")
        if not rate or not rate["count"] or not rate["total"]:
            out.append(_empty(svg, "no settled deliveries"))
            continue
        draw(svg, rate, _rate_axes(rate, start, end, half, height))
        out.append(svg.close())
    return '<div class="row">' + "".join(out) + "</div>"


# --------------------------------------------------------------------------- stall timeline


def _drawable(stalls: list) -> list:
    """The stall spans that have a start and an end to draw."""
    return [s for s in stalls if isinstance(s.get("start"), (int, float)) and isinstance(s.get("end"), (int, float))]


def _colour(kind) -> str:
    return COLOURS.get(kind, COLOURS["none"]) if isinstance(kind, str) else COLOURS["none"]


def _stall_lanes(svg, lanes: list, top: float, left: float, right: float, lane_h: float) -> None:
    """The stall timeline's lanes: every other one shaded, each labelled (cut to 46 characters)."""
    for i, label in enumerate(lanes):
        yy = top + i * lane_h
        if i % 2 == 0:
            svg.rect(left, yy, right - left, lane_h, "#f7f7f9")
        short = label if len(label) <= 46 else label[:45] + "…"
        svg.text(left - 8, yy + lane_h / 2 + 4, short, anchor="end")


def _time_axis(svg, x: _Scale, span: float, top: float, left: float, right: float, bottom: float) -> None:
    """A time axis along the bottom of the stall timeline, with its grid lines up to the top."""
    factor, unit = time_unit(max(x.ticks(8) or [span]))
    for v in x.ticks(8):
        px = x(v)
        svg.line(px, top, px, bottom, COLOURS["grid"])
        svg.text(px, bottom + 15, unit_fmt(factor)(v), anchor="middle", cls="muted")
    svg.line(left, bottom, right, bottom, COLOURS["axis"])
    svg.text((left + right) / 2, bottom + 30, f"time since the capture start, {unit}", anchor="middle", cls="muted")


def _stall_group(svg, x: _Scale, t0, kind, group: list, yy: float, full: float) -> None:
    """The stalls of one kind on one lane: each drawn alone as a bar, the binned ones as bars as high as
    the share of their slice spent stalled."""
    exact = [s for s in group if s["fraction"] >= 1.0 and s["count"] == 1]
    binned = [s for s in group if not (s["fraction"] >= 1.0 and s["count"] == 1)]
    for s in exact:
        x0 = x(s["start"] - t0)
        svg.rect(x0, yy, max(2.0, x(s["end"] - t0) - x0), full, _colour(kind),
                 title=f"{s['label']}: {_stall_tip(s)}", cls="stall-bar", extra=f' data-kind="{_e(kind)}"')
    if not binned:
        return
    d = []
    for s in binned:
        x0 = x(s["start"] - t0)
        w = max(1.0, x(s["end"] - t0) - x0)
        h = max(2.0, full * s["fraction"])
        d.append(f"M{_f(x0)},{_f(yy + full - h)}h{_f(w)}v{_f(h)}h{_f(-w)}z")
    svg.add(f'<path d="{"".join(d)}" fill="{_colour(kind)}" shape-rendering="crispEdges" class="stall-bar" '
            f'data-kind="{_e(kind)}"><title>{_e(group[0]["label"] + ": " + _binned_tip(binned))}</title></path>')


def stall_timeline(plots: dict, plot_id="stall-timeline", width=1190) -> str:
    stalls, lanes = _drawable(plots["stalls"]), plots["stall_lanes"]
    lane_h = 22
    top, left, right = 30, 290, width - 16
    height = top + max(1, len(lanes)) * lane_h + 44
    svg = _Svg(width, height, plot_id, "stall timeline")
    svg.text(10, 16, "Stall timeline", cls="title")
    if not stalls:
        return _empty(svg, "no stalls")
    t0 = plots["start"] if plots["start"] is not None else min(s["start"] for s in stalls)
    t1 = plots["end"] if plots["end"] is not None and plots["end"] > t0 else max(s["end"] for s in stalls) + 1e-3
    x = _Scale(0, t1 - t0, left, right)
    bottom = top + len(lanes) * lane_h
    _stall_lanes(svg, lanes, top, left, right, lane_h)
    _time_axis(svg, x, t1 - t0, top, left, right, bottom)
    groups: dict = {}
    for s in stalls:
        groups.setdefault((s["lane"], s["kind"]), []).append(s)
    for (lane, kind), group in groups.items():
        _stall_group(svg, x, t0, kind, group, top + lane * lane_h + 4, lane_h - 8)
    return svg.close()


# --------------------------------------------------------------------------- ladder


def _frame_label(fr: dict) -> str:
    p = fr["performative"] or fr["kind"]
    f = fr["fields"]
    if fr["kind"] == "heartbeat":
        return "heartbeat (empty frame)"
    if fr["kind"] == "header":
        return p
    bits = [p]
    if fr.get("channel") is not None and fr["kind"] == "amqp":
        bits.append(f"ch {fr['channel']}")
    if p == "attach":
        if "name" in f:
            bits.append(repr(f["name"]))
        if "role" in f:
            bits.append("receiver" if f["role"] is True else "sender")
    for k, short in (("handle", "h"), ("delivery-id", "id"), ("first", "first"), ("last", "last"),
                     ("delivery-count", "dc"), ("link-credit", "credit"), ("incoming-window", "in-win"),
                     ("remote-channel", "remote-ch"), ("mechanism", "mech"), ("code", "code")):
        if k in f and not (p == "attach" and k == "delivery-count"):
            bits.append(f"{short} {f[k]}")
    for flag in ("settled", "more", "drain", "aborted"):
        if f.get(flag) is True:
            bits.append(flag)
    if "state" in f:
        bits.append(str(f["state"]))
    if "error" in f:
        bits.append(f"error {f['error']}")
    return " ".join(bits)


def ladder_plot(lad: dict, t0, plot_id: str, width=1190) -> str:
    frames = lad["frames"]
    row = 22
    top = 58
    height = top + max(1, len(frames)) * row + (40 if lad["total"] > len(frames) else 16)
    svg = _Svg(width, height, plot_id, f"ladder diagram of {lad['connection']}")
    xc, xs = 430, 1010
    svg.text(10, 16, f"Ladder diagram: {lad['connection']}", cls="title")
    svg.text(10, 34, "packet", cls="muted")
    svg.text(70, 34, "time", cls="muted")
    svg.text(xc, 34, f"client {lad.get('client') or ''}", anchor="middle")
    svg.text(xs, 34, f"server {lad.get('server') or ''}", anchor="middle")
    bottom = top + len(frames) * row
    svg.rect(xc - 1, 42, 3, bottom - 42 + 6, "#555555")
    svg.rect(xs - 1, 42, 3, bottom - 42 + 6, "#555555")
    base = t0 if t0 is not None else next((fr["time"] for fr in frames if fr["time"] is not None), 0)
    for i, fr in enumerate(frames):
        yy = top + i * row + 8
        to_server = fr["side"] == "client"
        colour = COLOURS["to-server"] if to_server else COLOURS["to-client"]
        x0, x1 = (xc + 2, xs - 2) if to_server else (xs - 2, xc + 2)
        svg.text(10, yy + 4, str(fr["packet"]), cls="muted")
        if fr["time"] is not None:
            svg.text(70, yy + 4, f"{fr['time'] - base:.6f}", cls="muted")
        label = _frame_label(fr)
        dash = "5,4" if fr["kind"] == "heartbeat" else None
        svg.line(x0, yy, x1, yy, colour, width=2, dash=dash)
        ah = 7 if to_server else -7
        svg.add(f'<path d="M{_f(x1)},{_f(yy)}L{_f(x1 - ah)},{_f(yy - 4.5)}L{_f(x1 - ah)},{_f(yy + 4.5)}Z" '
                f'fill="{colour}" class="arrow"/>')
        svg.add(f'<text x="{_f((xc + xs) / 2)}" y="{_f(yy - 4)}" text-anchor="middle" fill="{colour}" '
                f'class="frame-label"><title>{_e(fr["side"])} → packet {fr["packet"]}</title>{_e(label)}</text>')
    if lad["total"] > len(frames):
        svg.text((xc + xs) / 2, bottom + 22, f"… first {len(frames)} of {lad['total']:,} frames shown",
                 anchor="middle", cls="muted")
    return svg.close()


# --------------------------------------------------------------------------- page


def _legend(items) -> str:
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{COLOURS[k]}"></i>{_e(label)}</span>' for k, label in items) + "</div>"


def _link_deliveries(lk: dict) -> str:
    """A link's deliveries seen, and those the delivery-ids say the snap length cut off whole or were
    lost whole in the capture's gaps."""
    nc, lw = lk.get("deliveries_not_captured"), lk.get("deliveries_lost_whole")
    more = ([f"+{nc:,} not captured"] if nc else []) + ([f"+{lw:,} in lost bytes"] if lw else [])
    return f'{lk["deliveries"]:,}' + (f" ({', '.join(more)})" if more else "")


def _handle(lk: dict) -> str:
    """The link's handle as the peers numbered it: ``handle 0`` (both the same, or one known),
    ``handle client 0, server 1`` when they differ; never the link's index in its connection."""
    hc, hs = lk.get("handle_client"), lk.get("handle_server")
    if hc is None and hs is None:
        return "handle unknown"
    if hc is None or hs is None or hc == hs:
        return f"handle {hc if hc is not None else hs}"
    return f"handle client {hc}, server {hs}"


def _subtitle(rep: dict, plots: dict, source: str | None, version: str | None) -> str:
    """The line under the title: the source, the capture's span, the version."""
    sub = []
    if source:
        sub.append(_e(source))
    cap = rep.get("capture") or {}
    if plots.get("start") is not None:
        span = (cap["duration_unknown"] if cap.get("duration_unknown")  # (the clock stepped back: unknown)
                else fmt_seconds((plots['end'] or 0) - plots['start']))
        sub.append(f"{_utc(plots['start'])} – {_utc(plots['end'])} ({_e(span)})")
    if version:
        sub.append(_e(version))
    return f'<p class="sub">{" · ".join(sub)}</p>'


def _summary_cards(s: dict) -> list:
    """The summary's cards (count and label each) and the outcomes line under them."""
    outcomes = [f"{k} {v:,}" for k, v in sorted(s["outcomes"].items())]
    # (outcome unknown, by cause: never counted as unsettled or "none")
    unknown = unknown_outcome_parts(s, (s.get("one_direction") or {}).get("unknown_outcomes") or 0)
    outcomes += [f"{k} {n:,}" for k, n in unknown]
    outcomes = ", ".join(outcomes) or "none"
    out = ['<div class="cards" id="summary">']
    for label, v in (("connections", s["connections"]), ("sessions", s["sessions"]), ("links", s["links"]),
                     ("deliveries", s["deliveries"]),
                     *((("deliveries not captured", s["deliveries_not_captured"]),)
                       if s.get("deliveries_not_captured") else ()),
                     *((("deliveries in lost bytes", s["deliveries_lost_whole"]),)
                       if s.get("deliveries_lost_whole") else ()),
                     ("unsettled", s["unsettled"]),
                     *((k, n) for k, n in unknown), ("stalls", s["stalls"]),
                     ("stalled", fmt_seconds(s["stalled_seconds"]) if s["stalled_seconds"] is not None
                                  else "unknown (clock step)"), ("violations", s["violations"]),
                     ("errors", s["errors"])):
        out.append(f'<div class="stat"><b>{_e(_num(v))}</b><span>{_e(label)}</span></div>')
    out.append("</div>")
    out.append(f'<p class="sub">outcomes: {_e(outcomes)}</p>')
    return out


def _capture_notes(rep: dict) -> list:
    """The notes on the whole capture: damage, missing files, clock steps, what TLS or tunnels hide, one
    direction captured."""
    s = rep["summary"]
    cap = rep.get("capture") or {}
    out = [f'<p class="notes">capture damaged: {_e(ce)}</p>' for ce in s["capture_errors"]]
    for g in cap.get("gaps") or ():  # files missing from a numbered capture set
        out.append(f'<p class="notes">{_e(missing_file_line(g))}</p>')
    for st in cap.get("clock_steps") or ():  # steps back of the capture clock
        out.append(f'<p class="notes clock-step"><b>{_e(clock_step_line(st, cap.get("digits", 6)))}</b></p>')
    unseen = cap.get("tls_not_decrypted")
    if unseen:  # TLS on other ports without keys: what cannot be seen, said
        out.append(f'<p class="notes" id="tls-not-decrypted"><b>{_e(tls_not_decrypted_line(unseen))}</b></p>')
    if one_direction_line(s.get("one_direction")):  # one direction captured: what cannot be seen, said
        out.append(f'<p class="notes" id="one-direction"><b>{_e(one_direction_line(s["one_direction"]))}</b></p>')
    if tls_without_keys_line(rep):  # TLS on AMQP ports without keys: why nothing of it is decoded
        out.append(f'<p class="notes tls-without-keys"><b>{_e(tls_without_keys_line(rep))}</b></p>')
    for t in cap.get("tunnels_not_read") or ():  # tunnels not read: said
        out.append(f'<p class="notes tunnel-not-read"><b>{_e(tunnel_not_read_line(t))}</b></p>')
    return out


def _connection_notes(c: dict, digits: int) -> list:
    """The notes on one connection: one direction, clock steps, TLS, the inferred, the cut."""
    name = _e(c["connection"])
    out = []
    if c.get("missing_direction"):
        out.append(f'<p class="notes">{name}: one direction captured: none of the '
                   f'{_e(c["missing_direction"])}\'s packets is in the capture</p>')
    for st in c.get("clock_steps") or ():
        out.append(f'<p class="notes clock-step">{name}: {_e(clock_step_line(st, digits))}</p>')
    if c.get("tls_undecrypted_bytes"):
        out.append(f'<p class="notes">{name}: {_e(c.get("tls_note") or "TLS")} '
                   f'({c["tls_undecrypted_bytes"]:,} bytes not decrypted in all)</p>')
    for what in c.get("inferred") or ():  # (as the text's "inferred:" lines of the connection)
        out.append(f'<p class="notes">{name}: inferred: {_e(what)}</p>')
    if c.get("not_captured_bytes_client") or c.get("not_captured_bytes_server"):  # (the snap length)
        out.append(f'<p class="notes">{name}: {_e(not_captured_text(c))}</p>')
    for sess in c.get("sessions") or ():
        if sess.get("not_captured_outcomes"):
            out.append(f'<p class="notes">{name} session {_e(str(sess["session"]))}: '
                       f'{_e(cut_outcomes_text(sess))}</p>')
    return out


def _links_table(links: list) -> list:
    """The "Links" heading and its table, one row a link (or that there is none)."""
    out = ['<h2 id="links">Links</h2>']
    if not links:
        out.append('<p class="empty">no link carried a delivery or stalled</p>')
        return out
    out.append('<table><tr><th>connection</th><th>link</th><th>address</th><th>sender → receiver</th>'
               '<th class="num">deliveries</th><th class="num">p50</th><th class="num">p99</th>'
               '<th class="num">max</th><th class="num">stalls</th></tr>')
    for i, lk in enumerate(links):
        la = lk["latency"]
        out.append(
            f'<tr><td>{_e(lk["connection"])}</td><td><a href="#link-{i}">{_e(lk["link"])}</a></td>'
            f'<td>{_e(lk["address"] or "?")}</td><td>{_e(lk["sender"] or "?")} → {_e(lk["receiver"] or "?")}</td>'
            f'<td class="num">{_link_deliveries(lk)}</td><td class="num">{fmt_seconds(la["p50"])}</td>'
            f'<td class="num">{fmt_seconds(la["p99"])}</td><td class="num">{fmt_seconds(la["max"])}</td>'
            f'<td class="num">{lk["stalls_total"]:,}</td></tr>')
    out.append("</table>")
    return out


_LINK_LEGEND = [("throughput", "deliveries settled/s"), ("latency-mean", "latency, mean"),
                ("latency-max", "latency, max"), ("credit", "link credit"), ("window", "session window"),
                ("stall-span", "stall"), ("stall-mark", "stall (mark; share of time stalled)"),
                ("idle", "idle period (not a stall)")]


def _link_meta(lk: dict, layers: list, clock_stepped: bool) -> list:
    """A link card's meta lines: its layers, address, peers, deliveries, latency, stalls, idle periods."""
    out = []
    if layers:
        out.append(f'<div class="meta">over {_e("; ".join(layers))}</div>')
    la = lk["latency"]
    lat = (f'p50 {fmt_seconds(la["p50"])}, p90 {fmt_seconds(la["p90"])}, p99 {fmt_seconds(la["p99"])}, max '
           f'{fmt_seconds(la["max"])}')
    if la["max"] is None and clock_stepped:  # (the capture clock stepped on its connection)
        lat = "unknown (clock step)"
    out.append(f'<div class="meta">address {_e(lk["address"] or "?")} · {_e(lk["sender"] or "?")} → '
               f'{_e(lk["receiver"] or "?")} · {_link_deliveries(lk)} deliveries · settlement latency '
               f'{lat} · {lk["stalls_total"]:,} stalls'
               + (f' · {lk["idle_total"]:,} idle periods' if lk.get("idle_total") else "") + '</div>')
    return out


def _link_section(i: int, lk: dict, plots: dict, layers: list, clock_stepped: bool) -> list:
    """One link's card: heading, meta, latency and outcome plots, rates, credit and window."""
    out = [f'<section class="card link" id="link-{i}">',
           f"<h3>Link {_e(repr(lk['link']) if lk['link'] is not None else '(name unknown)')} "
           f"<span class=\"meta\">{_e(lk['connection'])}, session {_e(lk['session'])} "
           f"(channel {_e(lk['channel'])}), {_e(_handle(lk))}</span></h3>"]
    out.extend(_link_meta(lk, layers, clock_stepped))
    la = lk["latency"]
    out.append('<div class="row">')
    out.append(latency_histogram(la, f"histogram-{i}"))
    out.append(latency_cdf(la, f"cdf-{i}"))
    out.append(outcomes_plot(lk["outcomes"], f"outcomes-{i}"))
    out.append("</div>")
    out.append(rate_plots(lk.get("rate"), plots["start"], plots["end"], str(i)))
    out.append(_legend(_LINK_LEGEND))
    out.append(series_plot(lk["credit"], lk["stalls"], plots["start"], plots["end"], "credit", f"credit-{i}",
                           idle=lk.get("idle")))
    out.append(series_plot(lk["window"], lk["stalls"], plots["start"], plots["end"], "window", f"window-{i}"))
    out.append("</section>")
    return out


def _link_sections(rep: dict, links: list, plots: dict) -> list:
    """Every link's card, with the layers and clock steps of its connection."""
    connections = rep.get("connections") or ()
    wrapped = {c["connection"]: layer_names(c) for c in connections if layer_names(c)}
    stepped = {c["connection"] for c in connections if c.get("clock_steps")}
    out = []
    for i, lk in enumerate(links):
        out.extend(_link_section(i, lk, plots, wrapped.get(lk["connection"]), lk["connection"] in stepped))
    return out


def _ladder_section(plots: dict) -> list:
    """The "Frames" section: the first connection's ladder open, the others folded."""
    out = ['<h2 id="ladder">Frames</h2>']
    if not plots["ladder"]:
        out.append('<p class="empty">no AMQP frame in the capture</p>')
    for j, lad in enumerate(plots["ladder"]):
        svg = ladder_plot(lad, plots["start"], f"ladder-{j}")
        if j == 0:
            out.append(f'<section class="card">{svg}</section>')
        else:
            out.append(f"<details><summary>Ladder diagram: {_e(lad['connection'])} ({lad['total']:,} frames)</summary>"
                       f'<section class="card">{svg}</section></details>')
    return out


def render_html(rep: dict, plots: dict, title: str = "AMQP 1.0 capture report", source: str | None = None,
                version: str | None = None) -> str:
    digits = (rep.get("capture") or {}).get("digits", 6)
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>",
           f"<h1>{_e(title)}</h1>",
           _subtitle(rep, plots, source, version)]
    out.extend(_summary_cards(rep["summary"]))
    out.extend(_capture_notes(rep))
    for c in rep.get("connections") or ():
        out.extend(_connection_notes(c, digits))

    out.append(diagnoses_html(rep.get("diagnoses"), digits))
    out.extend(_links_table(plots["links"]))
    out.extend(_link_sections(rep, plots["links"], plots))

    from .requests import request_html  # (the requests section: its own module)

    out.append(request_html(rep.get("requests")))
    out.append('<h2 id="stalls">Stalls</h2><section class="card">')
    out.append(_legend([(k, k) for k in STALL_KINDS]))
    out.append(stall_timeline(plots))
    out.append("</section>")

    from .messages import html_section as _messages_section  # (the messages section: render/messages.py)

    out.append(_messages_section(rep, sys.modules[__name__]))  # (its helpers: this module)
    out.extend(_ladder_section(plots))
    if plots["notes"]:
        out.append('<h2 id="notes">Notes</h2><ul class="notes">'
                   + "".join(f"<li>{_e(n)}</li>" for n in plots["notes"]) + "</ul>")
    out.append('<details><summary>Text report</summary><pre>' + _e(render_text(rep)) + "</pre></details>")
    out.append("</main></body></html>\n")
    return "".join(out)
