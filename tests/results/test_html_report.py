"""``amqp-dissect report --format html``: the bounded series behind it, the plot data against
independent oracles (the samples' ground truth, numpy, the plain Analyzer), and the page itself
rendered by headless Chromium (pixels of every plot's colours, and the DOM)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_OPEN, main
from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
from amqp_dissect.render.html import COLOURS, render_html
from amqp_dissect.results.plots import cdf, histogram, plot_data
from amqp_dissect.results.report import build_report
from amqp_dissect.results.series import Series, SeriesAnalyzer

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.pcap"))


def sample(name: str) -> Path:
    return ROOT / "samples" / f"{name}.pcap"


def truth(name: str) -> dict:
    return json.loads((ROOT / "samples" / f"{name}.truth.json").read_text())


def series_analysis(name: str, **kw) -> SeriesAnalyzer:
    an = SeriesAnalyzer(**kw)
    src = CaptureSource([sample(name)])
    an.finish(src.drive(an.feed))
    return an


def link_named(an, name):
    return next(lk for c in an.connections.values() for lk in c.links if lk.name == name)


# --------------------------------------------------------------------------- Series


def test_series_is_exact_while_small():
    s = Series(cap=16)
    pts = [(0.0, 5), (1.0, 5), (2.0, 3), (3.0, 0), (4.0, 0), (5.0, 7)]
    for t, v in pts:
        s.add(round(t * 1_000_000_000), v)  # (capture times: integer nanoseconds; kept as seconds)
    # repeats are not change points
    assert s.exact and s.points == 4
    assert [(t, lo, hi, last) for t, lo, hi, last in s.buckets()] == [
        (0.0, 5, 5, 5), (2.0, 3, 3, 3), (3.0, 0, 0, 0), (5.0, 7, 7, 7)]


@pytest.mark.parametrize("cap", [2, 8, 64, 512])
def test_series_stays_bounded_and_keeps_extremes(cap):
    rng = random.Random(cap)
    s = Series(cap=cap)
    values = []
    t = 0
    for _ in range(20_000):
        t += rng.randrange(1, 1_000_000_000)  # (nanoseconds)
        v = rng.choice([0, rng.randint(1, 1000)])
        if not values or v != values[-1][1]:
            values.append((t / 1_000_000_000, v))  # (the series keeps seconds)
        s.add(t, v)
    bk = s.buckets()
    assert len(bk) <= cap + 1 and s.points == len(values)
    # every point is inside exactly one bucket: counts, extremes and the last value survive merging
    assert min(b[1] for b in bk) == min(v for _, v in values)
    assert max(b[2] for b in bk) == max(v for _, v in values)
    assert bk[-1][3] == values[-1][1] and bk[0][0] == values[0][0]
    times = [b[0] for b in bk]
    assert times == sorted(times)
    # each bucket's min / max are those of the raw points from its time to the next bucket's
    starts = times + [float("inf")]
    for i, (t0, lo, hi, _) in enumerate(bk):
        inside = [v for tt, v in values if t0 <= tt < starts[i + 1]]
        assert inside and min(inside) == lo and max(inside) == hi


# --------------------------------------------------------------------------- the analysis


@pytest.mark.parametrize("pcap", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_series_analyzer_changes_no_result(pcap):
    """Oracle: the plain Analyzer.  Keeping the series must not change a number of the report."""
    def report(cls):
        a = run_analysis(CaptureSource([pcap]), rows=False, analyzer_class=cls)
        return json.dumps(build_report(a.analyzer, a.capture_errors), sort_keys=True, default=str)

    from amqp_dissect.results.analytics import Analyzer
    assert report(SeriesAnalyzer) == report(Analyzer)


def test_credit_series_follows_the_grants():
    """credit_one: the receiver grants credit 1 five times (ground truth); the broker's sender
    link's credit goes 1 -> 0 after each transfer, and every credit stall is drawn at credit 0."""
    t = truth("credit_one")
    grants = next(lk for lk in t["links"] if lk["name"] == "credit-receiver")["credit_grants"]
    an = series_analysis("credit_one")
    link = link_named(an, "credit-receiver")
    s = an.credit_series(link)
    assert s is not None and s.exact
    values = [b[3] for b in s.buckets()]
    assert set(values) == {0, 1}
    assert max(values) == max(grants)
    rises = sum(1 for a, b in zip([0] + values, values) if b > a)
    assert rises == len(grants)
    # during each stall of the link the series says 0
    for st in (x for x in an.stalls if x.link is link):
        before = [b for b in s.buckets() if b[0] <= st.start]
        assert before and before[-1][3] == 0


def test_credit_series_maximum_is_the_largest_grant():
    t = truth("outcomes")
    grants = next(lk for lk in t["links"] if lk["name"] == "outcomes-receiver")["credit_grants"]
    an = series_analysis("outcomes")
    s = an.credit_series(link_named(an, "outcomes-receiver"))
    assert max(b[2] for b in s.buckets()) == max(grants)


def test_window_series_starts_at_the_announced_window():
    """The first window value of a session is the receiving peer's begin incoming-window (read
    here from the frames' JSON)."""
    an = series_analysis("plain_send_receive")
    c = next(iter(an.connections.values()))
    s0 = c.sessions[0]
    w = an.window_series(s0, 0)  # the client sends
    assert w is not None
    begins = [json.loads(line) for line in _jsonl("plain_send_receive")]
    server_begin = next(j for j in begins if j.get("performative") == "begin" and j["src"].endswith(":5672"))
    iw = server_begin["fields"]["incoming-window"]
    assert w.buckets()[0][3] == iw and max(b[2] for b in w.buckets()) <= iw
    assert min(b[1] for b in w.buckets()) < iw  # the transfers used some of it


def _jsonl(name):
    out = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "frames", "--format", "jsonl", str(sample(name))], capture_output=True,
                         text=True, check=True).stdout
    return out.splitlines()


def test_ladder_counts_every_frame_and_stays_bounded():
    """Oracle: the client's own frame log (ground truth) plus the 4 protocol headers."""
    t = truth("credit_one")
    c = t["connections"][0]
    expected = len(c["frames_sent"]) + len(c["frames_received"]) + len(c["protocol_headers_sent"]) + len(
        c["protocol_headers_received"])
    an = series_analysis("credit_one", ladder_frames=7)
    (lad,) = an.ladder()
    assert lad["total"] == expected
    assert len(lad["frames"]) == 7
    sent = [f for f in lad["frames"] if f["side"] == "client" and f["kind"] != "header"]
    assert [f["performative"] for f in sent] == [x.split(":")[0] for x in c["frames_sent"][:len(sent)]]


def test_series_bounded_on_a_long_link():
    an = series_analysis("large_message", series_points=8)
    for c in an.connections.values():
        for link in c.links:
            s = an.credit_series(link)
            if s is not None:
                assert len(s.buckets()) <= 9
    assert an.links_without_series == 0


def test_series_for_the_first_links_only():
    an = series_analysis("multi_session", series_links=2, series_sessions=1)
    kept = [lk for c in an.connections.values() for lk in c.links if an.credit_series(lk) is not None]
    assert len(kept) == 2 and an.links_without_series >= 1
    doc = plot_data(an)
    assert any("no credit / window series" in n for n in doc["notes"])


# --------------------------------------------------------------------------- plot data


def test_histogram_and_cdf_against_numpy():
    rng = np.random.default_rng(7)
    raw = np.round(np.concatenate([rng.lognormal(-7, 1.5, 3000), np.zeros(17)]), 7)
    keys, counts = np.unique(raw, return_counts=True)
    h = histogram(list(keys), list(counts), bins=25)
    assert h["log"] and h["zeros"] == 17
    pos = raw[raw > 0]
    expected, _ = np.histogram(pos, bins=np.array(h["edges"]))
    assert list(expected) == h["counts"]
    pts = cdf(list(keys), list(counts), points=50)
    assert len(pts) <= 50 and pts[-1] == [float(keys[-1]), 1.0]
    for x, frac in pts:
        assert frac == pytest.approx(np.mean(raw <= x))


def test_histogram_counts_negative_latencies_apart():
    h = histogram([-0.002, 0.0, 0.001, 0.002], [1, 2, 3, 4], bins=4)
    assert h["negative"] == 1 and h["zeros"] == 2 and sum(h["counts"]) == 7


def test_histogram_logarithmic_by_default():
    """Log bins even when the latencies span less than a decade (the bins' edges are then evenly
    spaced in log10, checked against numpy's); a single value gets linear bins around it."""
    keys, counts = [0.0004, 0.0005, 0.0009], [3, 1, 2]
    h = histogram(keys, counts, bins=10)
    assert h["log"] and sum(h["counts"]) == 6
    assert np.allclose(np.diff(np.log10(h["edges"])), np.log10(0.0009 / 0.0004) / 10)
    expected, _ = np.histogram(np.repeat(keys, counts), bins=np.array(h["edges"]))
    assert list(expected) == h["counts"]
    one = histogram([0.002], [5], bins=10)
    assert not one["log"] and sum(one["counts"]) == 5


@pytest.mark.parametrize("name", ["outcomes", "credit_one", "multi_session", "presettled"])
def test_plot_data_per_link_against_truth(name):
    t = truth(name)
    an = series_analysis(name)
    doc = plot_data(an)
    json.dumps(doc, allow_nan=False)  # JSON as it is
    by_name = {lk["link"]: lk for lk in doc["links"]}
    for lk in t["links"]:
        n = lk["messages_sent"] or lk["deliveries_received"]
        if not n:
            continue
        got = by_name[lk["name"]]
        assert got["deliveries"] == n
        if lk["role"] == "receiver":  # the outcomes the client applied (for a sender: what the broker said)
            for k, v in lk["outcomes"].items():
                assert got["outcomes"][k] == v, (lk["name"], k)
        h = got["latency"]["histogram"]
        settled = got["latency"]["count"]
        assert (sum(h["counts"]) + h["zeros"] if h else 0) == settled
        if settled:
            assert got["latency"]["cdf"][-1][1] == 1.0


# --------------------------------------------------------------------------- CLI


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_html_to_file_and_stdout(capsys, tmp_path):
    out_file = tmp_path / "r.html"
    rc, out, err = run(capsys, "report", sample("outcomes"), "--format", "html", "-o", out_file)
    assert rc == EXIT_OK, err
    assert out == ""
    page = out_file.read_text()
    rc, out2, err = run(capsys, "report", sample("outcomes"), "-T", "html")
    assert rc == EXIT_OK and out2.startswith("<!DOCTYPE html>")
    # self-contained: nothing fetched (no script, stylesheet, image or font from elsewhere)
    for p in (page, out2):
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", p)
        assert "<script" not in p and "@import" not in p and "url(" not in p


def test_cli_bad_output_path(capsys, tmp_path):
    rc, out, err = run(capsys, "report", sample("outcomes"), "-T", "html", "-o", tmp_path / "no" / "such" / "r.html")
    assert rc == EXIT_OPEN
    assert len(err.strip().splitlines()) == 1 and "cannot write" in err


def test_cli_text_and_json_to_file(capsys, tmp_path):
    rc, out, err = run(capsys, "report", sample("outcomes"), "-T", "json", "-o", tmp_path / "r.json")
    assert rc == EXIT_OK and out == ""
    rc, text, err = run(capsys, "report", sample("outcomes"), "-T", "json")
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(text)


# --------------------------------------------------------------------------- in a browser


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI is set but chromium is missing; tests/install-deps.sh installs it", pytrace=False)
    pytest.skip("chromium is not installed (apt-get install -y chromium, or bash tests/install-deps.sh)")


def _chromium(args: list, tmp: Path, timeout=120) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-extensions", f"--user-data-dir={tmp / 'profile'}",
           # offline: any request the page made would fail
           "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def read_png(path: Path) -> np.ndarray:
    """RGB pixels of an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, hdr
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.int32)
    prev = np.zeros(w * bpp, dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        cur = line.copy()
        if f == 1:
            for i in range(bpp, w * bpp):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif f == 2:
            cur = (line + prev) & 255
        elif f == 3:
            for i in range(w * bpp):
                left = cur[i - bpp] if i >= bpp else 0
                cur[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(w * bpp):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[:, :, :3].astype(np.uint8)


def _rgb(hex_colour: str) -> tuple:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """outcomes.pcap and credit_one.pcap as HTML pages, their screenshots and DOMs."""
    chromium()
    tmp = tmp_path_factory.mktemp("html")
    out = {}
    for name in ("outcomes", "credit_one"):
        page = tmp / f"{name}.html"
        assert main(["report", str(sample(name)), "-T", "html", "-o", str(page)]) == EXIT_OK
        png = tmp / f"{name}.png"
        r = _chromium([f"--screenshot={png}", "--window-size=1300,4200", page.as_uri()], tmp)
        assert png.exists(), r.stderr[-2000:]
        dom = _chromium(["--dump-dom", page.as_uri()], tmp).stdout
        out[name] = (page, read_png(png), dom)
    return out


def _where(pixels: np.ndarray, colour: str) -> np.ndarray:
    return np.argwhere(np.all(pixels == np.array(_rgb(colour), dtype=np.uint8), axis=2))


@pytest.mark.parametrize("name, colours", [
    ("outcomes", ["histogram", "cdf", "credit", "window", "accepted", "rejected", "released", "modified",
                  "to-server", "to-client"]),
    ("credit_one", ["histogram", "cdf", "credit", "window", "accepted", "stall-span", "stall-mark", "link-credit",
                    "to-server", "to-client"]),
])
def test_browser_draws_every_plot(rendered, name, colours):
    _, pixels, _ = rendered[name]
    missing = {}
    for c in colours:
        n = len(_where(pixels, COLOURS[c]))
        if n < 20:
            missing[c] = n
    assert not missing, f"plots not drawn in the screenshot (pixels of their colour): {missing}"


def test_browser_layout_order(rendered):
    """Top to bottom: latency plots and outcomes, then credit, then the stall timeline, then the ladder."""
    _, pixels, _ = rendered["credit_one"]

    def top(c):
        return int(_where(pixels, COLOURS[c])[:, 0].min())

    assert top("histogram") < top("credit") < top("link-credit") < top("to-server")
    # the histogram, CDF and outcomes of the first link sit side by side
    rows = {c: top(c) for c in ("histogram", "cdf", "accepted")}
    assert max(rows.values()) - min(rows.values()) < 150, rows
    cols = {c: int(_where(pixels, COLOURS[c])[:, 1].min()) for c in ("histogram", "cdf", "accepted")}
    assert cols["histogram"] < cols["cdf"] < cols["accepted"], cols


def test_browser_dom_has_the_plots(rendered):
    page, _, dom = rendered["outcomes"]
    kinds = re.findall(r'<svg [^>]*data-plot="([a-z]+)"', dom)
    links = plot_data(series_analysis("outcomes"))["links"]
    for kind in ("histogram", "cdf", "outcomes", "credit", "window"):
        assert kinds.count(kind) == len(links), kind
    assert kinds.count("stall") == 1 and kinds.count("ladder") >= 1
    # the outcome bars carry the counts the ground truth has for the receiver link
    t = next(lk for lk in truth("outcomes")["links"] if lk["name"] == "outcomes-receiver")
    i = [lk["link"] for lk in links].index("outcomes-receiver")
    svg = re.search(rf'<svg [^>]*id="outcomes-{i}".*?</svg>', dom, re.S).group(0)
    bars = dict(re.findall(r'data-outcome="([a-z]+)" data-count="(\d+)"', svg))
    assert {k: int(v) for k, v in bars.items()} == {k: v for k, v in t["outcomes"].items() if v}


def test_render_html_of_an_empty_capture(tmp_path):
    an = SeriesAnalyzer()
    an.finish()
    page = render_html(build_report(an), plot_data(an))
    assert "no link carried a delivery" in page and "no stalls" in page


# --------------------------------------------------------------------------- issue 27: readable plots


def _svg(page: str, plot_id: str) -> str:
    return re.search(rf'<svg [^>]*id="{plot_id}".*?</svg>', page, re.S).group(0)


def _texts(svg: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", t) for t in re.findall(r"<text [^>]*>(.*?)</text>", svg, re.S)]


UNITS = {"µs": 1e-6, "ms": 1e-3, "s": 1.0}


@pytest.mark.parametrize("name", ["outcomes", "credit_one"])
def test_axes_are_in_the_unit_of_their_ticks(name):
    """Every latency and time axis names one unit and its ticks are plain numbers of it: the
    ticks, read in that unit, fall inside the data's range (the histogram's edges, the capture's
    span), so "99" under "µs" is 99 µs, never 99 seconds."""
    an = series_analysis(name)
    doc = plot_data(an)
    page = render_html(build_report(an), doc)
    span = doc["end"] - doc["start"]
    for i, lk in enumerate(doc["links"]):
        h = lk["latency"]["histogram"]
        for plot_id, lo, hi in ((f"histogram-{i}", h["edges"][0], h["edges"][-1]),
                                (f"credit-{i}", 0.0, span), (f"throughput-{i}", 0.0, span)):
            texts = _texts(_svg(page, plot_id))
            (label,) = [t for t in texts if t.startswith(("settlement latency, ", "time since the capture start, "))]
            unit = UNITS[label.split(", ")[1].split(" ")[0]]
            assert "seconds" not in " ".join(texts)
            ticks = [float(t) for t in texts if re.fullmatch(r"-?[\d.]+(e-?\d+)?", t)]
            xticks = [t * unit for t in ticks if lo * 0.999 <= t * unit <= hi * 1.001 + 1e-12]
            assert xticks, (plot_id, label, texts)
            # the tick values are of the size of the data: in another unit they would be off by 10^3
            assert max(xticks) >= (hi - lo) / 50 or hi == lo


def test_the_handle_as_the_peer_numbered_it():
    """outcomes-receiver is the connection's second link (link_index 1) and both peers attached it
    with handle 0 (tshark's attach frames): the page says handle 0, never the index."""
    rows = subprocess.run(["tshark", "-r", str(sample("outcomes")), "-Y", "amqp.performative == 18",
                           "-T", "fields", "-e", "amqp.performative.arguments.name",
                           "-e", "amqp.performative.arguments.handle"], capture_output=True, text=True,
                          check=True).stdout
    handles = {tuple(line.split("\t")) for line in rows.splitlines()}
    # (a packet holding the attach and a flow lists both frames' handles: all of them are the link's here)
    (h,) = {x for name, handle in handles if name == "outcomes-receiver" for x in handle.split(",")}
    an = series_analysis("outcomes")
    doc = plot_data(an)
    page = render_html(build_report(an), doc)
    i = [lk["link"] for lk in doc["links"]].index("outcomes-receiver")
    assert doc["links"][i]["link_index"] != int(h)
    head = re.search(rf'<section class="card link" id="link-{i}"><h3>(.*?)</h3>', page).group(1)
    assert f"), handle {h}</span>" in head and "index" not in head


def test_dense_stalls_are_a_share_of_time_not_shading(monkeypatch):
    """A link with more stalls than are drawn one by one: no full-height shading in its credit
    plot, but one row of bars above it, each as high as the share of its slice spent stalled
    (the plot data's fraction, checked bar by bar)."""
    import amqp_dissect.results.plots as plots

    monkeypatch.setattr(plots, "EXACT_SPANS", 0)
    an = series_analysis("credit_one")
    doc = plots.plot_data(an)
    page = render_html(build_report(an), doc)
    i, lk = next((i, lk) for i, lk in enumerate(doc["links"]) if lk["stalls"])
    svg = _svg(page, f"credit-{i}")
    assert 'class="stall"' not in svg
    d = re.search(r'<path d="([^"]*)" fill="[^"]*" shape-rendering="crispEdges" class="stall-share"', svg).group(1)
    heights = [float(v) for v in re.findall(r"v([\d.]+)h", d)]
    spans = [s for s in lk["stalls"] if s["kind"] != "session-window"]
    assert len(heights) == len(spans)
    for hgt, s in zip(heights, spans):
        assert hgt == pytest.approx(max(1.5, 12 * s["fraction"]), abs=0.06)


def test_idle_periods_drawn_apart_from_stalls():
    """outcomes-receiver's two intervals at credit 0 are idle periods (the stalls table says
    idle): drawn in their own grey row of the credit plot, not shaded as stalls."""
    an = series_analysis("outcomes")
    idle = [st for st in an.stalls if st.idle() and st.link is not None and st.link.name == "outcomes-receiver"]
    assert len(idle) == 2
    doc = plot_data(an)
    page = render_html(build_report(an), doc)
    i = [lk["link"] for lk in doc["links"]].index("outcomes-receiver")
    lk = doc["links"][i]
    assert lk["idle_total"] == 2 and len(lk["idle"]) == 2
    svg = _svg(page, f"credit-{i}")
    d = re.search(r'<path d="([^"]*)" fill="#c7c7c7" shape-rendering="crispEdges" class="idle"', svg).group(1)
    assert d.count("M") == 2
    assert 'class="stall"' not in svg


@pytest.mark.parametrize("name", ["outcomes", "credit_one", "multi_session"])
def test_throughput_and_latency_over_time_per_link(name):
    """Each link with deliveries gets a throughput and a latency-over-time plot; the settlements
    counted over time are the link's settled deliveries (the truth's count for a link whose
    deliveries all settled), and the latency per bucket stays within the link's min and max."""
    an = series_analysis(name)
    doc = plot_data(an)
    page = render_html(build_report(an), doc)
    t = {lk["name"]: lk for lk in truth(name)["links"]}
    for i, lk in enumerate(doc["links"]):
        assert f'id="throughput-{i}"' in page and f'id="latency-{i}"' in page
        rate, lat = lk["rate"], lk["latency"]
        assert rate["total"] == lat["count"] == sum(rate["count"])
        tl = t.get(lk["link"])
        if tl is not None and not tl.get("unsettled_at_end"):
            assert rate["total"] == (tl["messages_sent"] or tl["deliveries_received"]) - (tl.get("presettled") or 0)
        for m, mx in zip(rate["mean"], rate["max"]):
            if m is not None:
                assert 0 <= m <= mx <= lat["max"] + 1e-12
        assert rate["width"] > 0 and len(rate["count"]) <= 512
