"""``report --format html`` on hostile values (issue 29): any field of any performative absent,
null, of the wrong type or described by an unknown descriptor, and capture times a date cannot be
written for.  The page is made (exit status not 1, no internal error), each value is shown as
what it is, and no coordinate of the SVG is ``nan`` / ``inf``.

The named reproducers of the issue are built here: a close whose error is a delivery state (the
``KeyError: 'condition'``), and captures whose times are in the year 58862 (1.8e12 s) and at
1.8e18 s.
"""

from __future__ import annotations

import math
import re

import pytest

import fuzzgen as F
from amqp_dissect.amqp import _spec
from amqp_dissect.amqp.framing import Frame
from amqp_dissect.cli.main import EXIT_INTERNAL, main
from amqp_dissect.dissect import Dissector
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.amqp.values import short_value
from amqp_dissect.render.html import _utc, render_html, valid_time
from amqp_dissect.results.plots import plot_data
from amqp_dissect.results.report import build_report
from amqp_dissect.results.series import SeriesAnalyzer, _ladder_record

# values of every sort a field can hold where a performative wants another
ODD = {
    "null": None,
    "string": ("string", "boom", 0),
    "long string": ("string", "x" * 5000, 0),
    "binary": ("binary", b"\x00\xff" * 3000, 0),
    "delivery state": F.performative("accepted", []),
    "error without condition": F.performative("error", []),
    "error with a uint condition": F.performative("error", [("uint", 5, 0)]),
    "unknown descriptor": ("described", (("ulong", 0x1234, 0), ("list", [("string", "x", 0)], 0)), 0),
    "unknown symbol descriptor": ("described", (("symbol", "x:y", 0), ("string", "z", 0)), 0),
    "map": ("map", [(("string", "a", 0), ("string", "b", 0))], 0),
    "list": ("list", [("uint", 1, 0), ("null", None, 0)], 0),
    "timestamp": ("timestamp", -2**63, 0),
    "double nan": ("double", math.nan, 0),
    "uuid": ("uuid", bytes(16), 0),
}


def _capture(streams, path, t0=1_700_000_000.0, pcapng=False):
    """A pcap (pcapng past 32-bit seconds; in whole seconds past 2**64 microseconds) of one
    connection carrying ``streams``."""
    conv = F._conversation_class()(client=("10.0.0.1", 40000), server=("10.0.0.2", 5672), t0=t0, dt=0.001,
                                   mss=1460, acks=False)
    conv.handshake()
    for d, b in streams:
        conv.send(d, b)
    conv.close(0)
    recs = conv.records
    if pcapng or recs[-1][0] >= 2**32:
        res = 0 if recs[-1][0] * 1e6 >= 2**64 else None  # (if_tsresol 0: seconds)
        data = F.write_pcapng([(ts, d) for ts, _lt, d in recs], res)
    else:
        data = F.write_pcap(recs)
    path.write_bytes(data)
    return path


def _opened():
    s = [(0, F.HEADER_AMQP), (1, F.HEADER_AMQP)]
    for d in (0, 1):
        s.append((d, F.frame_bytes(F.encode(F.performative("open", [("string", f"c{d}", 0)])))))
    return s


def _html(capsys, path, tmp_path) -> str:
    out = tmp_path / "page.html"
    rc = main(["report", "-T", "html", "-o", str(out), str(path)])
    err = capsys.readouterr().err
    assert rc != EXIT_INTERNAL and "internal error" not in err, err
    page = out.read_text()
    assert page.endswith("</html>\n")
    _no_bad_numbers(page)
    return page


def _no_bad_numbers(page: str):
    for attr in re.findall(r'\b(?:x|y|x1|x2|y1|y2|width|height|d)="([^"]*)"', page):
        assert "nan" not in attr.lower() and "inf" not in attr.lower(), attr


def _label(page: str, performative: str) -> str:
    return re.search(rf'class="frame-label"><title>[^<]*</title>({performative} [^<]*)</text>', page).group(1)


@pytest.mark.parametrize("what", sorted(ODD))
@pytest.mark.parametrize("performative", ["close", "end", "detach"])
def test_an_error_field_of_any_type_is_shown_as_what_it_is(capsys, tmp_path, what, performative):
    node = ODD[what]
    if performative == "close":
        frame = F.performative("close", [node])
    elif performative == "end":
        frame = F.performative("end", [node])
    else:
        frame = F.performative("detach", [("uint", 0, 0), ("boolean", True, 0), node])
    s = _opened()
    if performative != "close":
        s += [(0, F.frame_bytes(F.encode(F.performative("begin", [None, ("uint", 0, 0), ("uint", 9, 0),
                                                                  ("uint", 9, 0)]))))]
    s.append((0, F.frame_bytes(F.encode(frame))))
    page = _html(capsys, _capture(s, tmp_path / "in.pcap"), tmp_path)
    text = main(["report", str(tmp_path / "in.pcap")])  # (the text report: as before, no failure)
    assert text != EXIT_INTERNAL
    label = _label(page, performative)
    # the decoded value, as the frames printer shows it (amqp.values.short_value)
    ev = next(e for e in _events(tmp_path / "in.pcap") if type(e) is Frame and e.name == performative)
    value = ev.performative.field("error")
    if value is None:
        assert "error" not in label
    elif what == "error with a uint condition":
        assert "error (condition 5)" in label
    elif what == "error without condition":
        assert "error (no condition)" in label
    else:
        assert f"error (not an error: {short_value(None, value, 40)})".replace("'", "&#x27;") in label


def _events(path):
    d = Dissector()
    out = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            out += d.feed(rec)
    return out + d.finish()


def test_every_field_of_every_performative_of_any_type(tmp_path):
    """Each field of each performative of the spec, in turn, holding each odd value: the ladder
    record is made (text bounded), and the whole page too (one connection per value)."""
    names = [name for name, entry in _spec.COMPOSITES.items() if "frame" in entry[2]]  # the performatives
    assert len(names) == 9
    for what, node in ODD.items():
        s = _opened()
        for name in names:
            for i in range(len(_spec.COMPOSITES[name][6])):
                fields = [None] * i + [node]
                s.append((0, F.frame_bytes(F.encode(F.performative(name, fields)), 1 + i % 3)))
        path = _capture(s, tmp_path / "all.pcap")
        an = SeriesAnalyzer(ladder_frames=10_000)
        for ev in _events(path):
            if type(ev) is Frame:
                rec = _ladder_record(ev)
                for v in rec["fields"].values():
                    assert not isinstance(v, str) or len(v) <= 200, (what, ev.name, v[:50])
            an.feed(ev)
        an.finish(None)
        page = render_html(build_report(an), plot_data(an))
        assert page.endswith("</html>\n")
        _no_bad_numbers(page)


@pytest.mark.parametrize("t0, pcapng, shown", [
    (1.8e12, True, "invalid time (1.8e+12 s since 1970)"),  # the year 58862
    (1.8e18, True, "invalid time (1.8e+18 s since 1970)"),
    (0.0, False, "1970-01-01 00:00:00.000 UTC"),
])
def test_capture_times_a_date_cannot_be_written_for(capsys, tmp_path, t0, pcapng, shown):
    s = _opened() + [(0, F.frame_bytes(F.encode(F.performative("close", []))))]
    page = _html(capsys, _capture(s, tmp_path / "t.pcap", t0=t0, pcapng=pcapng), tmp_path)
    sub = re.search(r'<p class="sub">(.*?)</p>', page).group(1)
    assert shown in sub


@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf, -1e20, 1.8e18, 1.8e12, 2.6e11])
def test_out_of_range_times_are_shown_invalid(ts):
    assert not valid_time(ts)
    assert _utc(ts).startswith("invalid time (")


def test_plot_documents_with_times_out_of_range_draw_no_nan(tmp_path):
    s = _opened()
    s += [(0, F.frame_bytes(F.encode(F.performative("begin", [None, ("uint", 0, 0), ("uint", 9, 0),
                                                               ("uint", 9, 0)]))))]
    path = _capture(s + [(0, F.frame_bytes(F.encode(F.performative("close", []))))], tmp_path / "p.pcap")
    an = SeriesAnalyzer()
    for ev in _events(path):
        an.feed(ev)
    an.finish(None)
    rep = build_report(an)
    for start, end in ((math.nan, math.nan), (math.inf, None), (-1e300, 1e300), (1.8e18, 1.8e18 + 1), (None, None)):
        plots = plot_data(an)
        plots["start"], plots["end"] = start, end
        for lad in plots["ladder"]:
            for fr in lad["frames"]:
                fr["time"] = start
        page = render_html(rep, plots)
        _no_bad_numbers(page)
        assert page.endswith("</html>\n")


@pytest.mark.parametrize("ticks, tsoffset", [(2**64 - 200, None), (0, -(2**63))], ids=["2^64 s", "-2^63 s"])
def test_a_real_capture_at_the_ends_of_pcapng_time_draws(capsys, tmp_path, ticks, tsoffset):
    """The outcomes sample in pcapng with second ticks near 2**64 s, or offset to -2**63 s: times a
    float holds only to the nearest few thousand seconds (every axis would have no width: was a
    ZeroDivisionError); the page is drawn and says the times are invalid."""
    import os

    import pcapbuild as pb

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "samples", "outcomes.pcap"), "rb") as f:
        recs = list(open_capture(f))
    blocks = [pb.pcapng_shb(), pb.pcapng_idb(1, 0, tsoffset=tsoffset)]
    blocks += [pb.pcapng_epb(0, ticks + i, r.data) for i, r in enumerate(recs)]
    path = tmp_path / "far.pcapng"
    path.write_bytes(b"".join(blocks))
    page = _html(capsys, str(path), tmp_path)
    assert page.endswith("</html>\n")
    _no_bad_numbers(page)
    assert "invalid time (" in page


def test_a_scale_over_an_interval_a_float_cannot_split_has_a_width():
    from amqp_dissect.render.html import _Scale

    for lo in (1.8e19, -9.2e18, 2.0**60):
        sc = _Scale(lo, lo, 0, 100)
        assert sc.hi > sc.lo and math.isfinite(sc(lo))
