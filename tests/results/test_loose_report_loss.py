"""The report's counts on a capture with real loss (issue 24, "report header on loss").

``samples/loss/kernel_loss.pcap`` was taken with ``tcpdump -B 1`` under a flood: the kernel
dropped packets.  Its truth file (the proton client's own record) is the oracle: every delivery
of both links really was settled with an outcome, so a delivery the capture shows unsettled is
one whose settlement was in the lost bytes.  The report must count those apart, as "outcome
unknown (lost in capture)", never as unsettled and never as "none" (no outcome); the
deliveries table says the same of each of them (``unsettled_at`` ``lost-in-capture``).
"""

from __future__ import annotations

import json
import os

import pytest

from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report
from amqp_dissect.results.schema import REGISTRY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOSS = os.path.join(ROOT, "samples", "loss", "kernel_loss.pcap")
LOST = "outcome unknown (lost in capture)"


def _truth():
    with open(os.path.join(ROOT, "samples", "loss", "kernel_loss.truth.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def real():
    return read_analysis(LOSS)


@pytest.fixture(scope="module")
def report(real):
    return build_report(real.analyzer)


def test_the_truth_says_every_delivery_was_settled_with_an_outcome():
    t = _truth()
    for link in t["links"]:
        assert all(d["outcome"] is not None for d in link["deliveries"])
    assert t["capture_stats"]["packets_dropped_by_kernel"] > 0


def test_summary_counts_the_lost_apart_from_unsettled_and_none(real, report):
    rows = real.analyzer.delivery_rows()
    lost_rows = [r for r in rows if r["unsettled_at"] == "lost-in-capture"]
    assert lost_rows  # the capture did lose settlements: the rule is exercised
    s = report["summary"]
    assert s["deliveries"] == len(rows)
    assert s["lost_in_capture"] == len(lost_rows)
    # the truth: every delivery was settled with an outcome, so none is unsettled or without one
    assert s["unsettled"] == 0
    assert "none" not in s["outcomes"]
    # the outcomes seen plus the unknown ones are all the deliveries
    assert sum(s["outcomes"].values()) + s["lost_in_capture"] == s["deliveries"]
    by_outcome = {}
    for r in rows:
        if r["outcome"]:
            by_outcome[r["outcome"]] = by_outcome.get(r["outcome"], 0) + 1
    assert s["outcomes"] == by_outcome
    assert s["errors"] == 0


def test_each_link_session_and_connection_names_its_lost(real, report):
    rows = real.analyzer.delivery_rows()
    (c,) = report["connections"]
    (sess,) = c["sessions"]
    total = 0
    for lk in sess["links"]:
        mine = [r for r in rows if r["link"] == lk["name"]]
        lost = sum(1 for r in mine if r["unsettled_at"] == "lost-in-capture")
        assert lk["lost_in_capture"] == lost
        assert lk["unsettled"] == 0 and lk["outcomes"]["no_outcome"] == 0
        assert sum(lk["outcomes"].values()) + lost == lk["deliveries"] == len(mine)
        total += lost
    assert total > 0
    assert sess["lost_in_capture"] == c["lost_in_capture"] == total
    assert sess["unsettled"] == 0


def test_text_and_html_headers_name_the_lost(report):
    text = render_text(report)
    s = report["summary"]
    head = [line for line in text.splitlines() if line.startswith("connections ")][0]
    assert f"{LOST} {s['lost_in_capture']:,}" in head  # (counts with thousands separators)
    assert head.endswith("unsettled 0")
    assert " none " not in head
    link_lines = [line.strip() for line in text.splitlines() if line.strip().startswith("deliveries ")]
    assert any(f"none 0, {LOST} " in line for line in link_lines)


def test_html_summary_cards(tmp_path, report):
    out = tmp_path / "r.html"
    assert main(["report", "-T", "html", "-o", str(out), LOSS]) == 0
    page = out.read_text()
    n = report["summary"]["lost_in_capture"]
    assert f"<b>{n:,}</b><span>{LOST}</span>" in page
    assert "<b>0</b><span>unsettled</span>" in page
    assert "outcomes: accepted" in page and f"{LOST} {n:,}</p>" in page


def test_the_same_counts_with_two_processes(tmp_path, report):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["report", "-T", "json", "-o", str(one), LOSS]) == 0
    assert main(["report", "-T", "json", "-j", "2", "-o", str(two), LOSS]) == 0
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["summary"] == b["summary"]
    assert a["summary"]["lost_in_capture"] == report["summary"]["lost_in_capture"]
    assert a["connections"] == b["connections"]


def test_without_loss_nothing_is_lost_and_unsettled_stays_unsettled(tmp_path):
    """A capture cut short (no gap: the end of the capture is not loss) keeps its unsettled
    deliveries unsettled: their settlement is after the capture, not in lost bytes."""
    import shutil
    import subprocess

    editcap = shutil.which("editcap")
    if editcap is None and not os.environ.get("CI"):
        pytest.skip("editcap is not installed (tests/install-deps.sh)")
    src = os.path.join(ROOT, "samples", "outcomes.pcap")
    whole = build_report(read_analysis(src).analyzer)
    assert whole["summary"]["lost_in_capture"] == 0 and whole["summary"]["unsettled"] == 0
    assert LOST not in render_text(whole)
    cut = tmp_path / "cut.pcap"
    subprocess.run([editcap, "-r", src, str(cut), "1-30"], check=True, capture_output=True)
    an = read_analysis(str(cut)).analyzer
    rows = an.delivery_rows()
    unsettled = [r for r in rows if r["unsettled_at"] is not None]
    assert unsettled and all(r["unsettled_at"] == "capture-end" for r in unsettled)
    rep = build_report(an)
    assert rep["summary"]["lost_in_capture"] == 0
    assert rep["summary"]["unsettled"] == len(unsettled)
    assert rep["summary"]["outcomes"]["none"] == len(unsettled)
    assert LOST not in render_text(rep)


def test_the_documented_columns_agree():
    """The deliveries table documents ``lost-in-capture``; the links table's ``unsettled`` and
    ``no_outcome`` and the sessions table's ``unsettled`` count every delivery the capture left
    unsettled: the report's entries add ``lost_in_capture`` and count those apart (docs/definitions.md)."""
    cols = {c.name: c for c in REGISTRY["deliveries"]}
    assert "lost-in-capture" in cols["unsettled_at"].meaning
    with open(os.path.join(ROOT, "docs", "definitions.md"), encoding="utf-8") as f:
        definitions = f.read()
    assert "lost_in_capture" in definitions
