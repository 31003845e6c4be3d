"""One direction only (issue 39, item 2): a SPAN port that sees one side, a ``dst port 5672``
filter, asymmetric routing.

The variants are derived from every sample with tshark (``-Y 'tcp.dstport==P'``: the client's
packets only; ``-Y 'tcp.srcport==P'``: the server's), and the oracle is the report of the plain
capture, which we did not write for this: the variant's violations and errors are among the plain
capture's (the same rule, frame time and peer), every delivery the captured side sent is there,
each outcome is the plain capture's or "unknown (one direction captured)", and the report says,
for each connection, which direction is missing.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest

from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap"))
                 + glob.glob(os.path.join(ROOT, "samples", "messages", "*.pcap"))
                 + [os.path.join(ROOT, "samples", "loss", "kernel_loss.pcap")])
DATA = os.path.join(ROOT, "tests", "data")
# (capture, its AMQP port, --port): the samples; on port 6000, with the handshake (found by its
# protocol headers), and joined mid-stream with the client on port 20000 (--port 6000: the
# client's stream starts after its protocol header)
CASES = ([(p, 5672, ()) for p in SAMPLES] + [(os.path.join(DATA, "outcomes_port6000.pcap"), 6000, ())]
         + [(os.path.join(DATA, "multi_session_port6000_client20000_midstream.pcap"), 6000, (6000,))])
# the direction kept -> the side whose packets are missing
KEPT = {"dst": "server", "src": "client"}
ONE_WAY = "one-direction-captured"

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def _name(case) -> str:
    return os.path.basename(case[0]).rsplit(".", 1)[0]


def _variant(tmp_path_factory, path: str, port: int, kept: str) -> str:
    out = tmp_path_factory.mktemp("oneway") / f"{os.path.basename(path)}.{kept}.pcap"
    subprocess.run(["tshark", "-r", path, "-Y", f"tcp.{kept}port=={port}", "-w", str(out)],
                   check=True, capture_output=True)
    return str(out)


_plain_cache: dict = {}


def _plain(path: str, ports=()):
    an = _plain_cache.get((path, ports))
    if an is None:
        an = _plain_cache[(path, ports)] = read_analysis(path, ports=ports).analyzer
    return an


def _violation_keys(an) -> set:
    return {(v["connection"], v["kind"], v["side"], v["time"]) for v in an.violations}


def _error_keys(an) -> set:
    return {(e["connection"], e["condition"], e["side"], e["time"]) for e in an.error_rows()}


def _deliveries(an, side: str) -> dict:
    return {(r["connection"], r["link"], r["delivery_id"], r["first_time"]): r
            for r in an.delivery_rows() if r["sender_side"] == side}


@pytest.fixture(scope="module", params=CASES, ids=_name)
def case(request):
    return request.param


@pytest.mark.parametrize("kept", ["dst", "src"])
def test_one_way_variant_against_the_plain_capture(tmp_path_factory, case, kept):
    path, port, ports = case
    plain = _plain(path, ports)
    assert all(r["missing_direction"] is None for r in plain.connection_rows())  # both captured: nothing said
    variant = _variant(tmp_path_factory, path, port, kept)
    an = read_analysis(variant, ports=ports).analyzer
    missing = KEPT[kept]
    captured = "client" if missing == "server" else "server"
    rows = an.connection_rows()
    assert rows  # the captured side's connections are all there ...
    assert {r["connection"] for r in rows} <= {r["connection"] for r in plain.connection_rows()}
    for r in rows:  # ... each said to miss the other direction
        assert r["missing_direction"] == missing, r["connection"]
    # nothing is a violation or an error for want of the other side: what is found, the plain
    # capture found too (the same rule, frame and peer)
    assert _violation_keys(an) <= _violation_keys(plain)
    assert _error_keys(an) <= _error_keys(plain)
    # every delivery the captured side sent, none of the other side's
    mine, theirs = _deliveries(an, captured), _deliveries(plain, captured)
    assert mine.keys() == theirs.keys()
    assert not _deliveries(an, missing)
    for k, d in mine.items():
        p = theirs[k]
        if d["outcome"] != p["outcome"]:
            assert not d["outcome"] and d["unsettled_at"] == ONE_WAY, (k, d["outcome"], p["outcome"])
        assert d["unsettled_at"] in (None, ONE_WAY, p["unsettled_at"])
    # the captured side's frames, all decoded
    for r in rows:
        pr = next(x for x in plain.connection_rows() if x["connection"] == r["connection"])
        assert r[f"frames_{captured}"] == pr[f"frames_{captured}"]
        assert r[f"frames_{missing}"] == 0


def test_the_report_says_which_direction_is_missing(tmp_path_factory):
    path = os.path.join(ROOT, "samples", "plain_send_receive.pcap")
    for kept, missing in KEPT.items():
        an = read_analysis(_variant(tmp_path_factory, path, 5672, kept)).analyzer
        rep = build_report(an)
        od = rep["summary"]["one_direction"]
        assert od["connections"] == 1 and od[f"{missing}_missing"] == 1
        assert od["unknown_outcomes"] == 10  # the 10 deliveries of the sample, sent by either side
        assert rep["summary"]["unsettled"] == 0 and rep["summary"]["violations"] == 0
        assert [c["missing_direction"] for c in rep["connections"]] == [missing]
        text = render_text(rep)
        assert "one direction captured: 1 connection" in text
        assert f"none of the {missing}'s packets is in the capture" in text
        assert "outcome unknown (one direction captured) 10" in text
        assert "unsettled at" not in text


def test_the_html_page_says_it(tmp_path_factory, tmp_path, capsys):
    path = os.path.join(ROOT, "samples", "plain_send_receive.pcap")
    variant = _variant(tmp_path_factory, path, 5672, "src")
    out = tmp_path / "r.html"
    assert main(["report", "-T", "html", "-o", str(out), variant]) == 0
    page = out.read_text()
    assert "one direction captured: 1 connection" in page
    assert "none of the client&#x27;s packets" in page or "none of the client's packets" in page


def test_the_session_begun_by_the_missing_side_is_inferred(tmp_path_factory):
    """The server's begin carries remote-channel: it answers a begin of the client's, not captured."""
    path = os.path.join(ROOT, "samples", "plain_send_receive.pcap")
    an = read_analysis(_variant(tmp_path_factory, path, 5672, "src")).analyzer
    text = render_text(build_report(an))
    assert "begun by the client (inferred: its begin not captured, the server's begin" in text
    assert "begun by the server" not in text
    # the client's packets only: its begin has no remote-channel, so it began the session; who
    # attached first is not known
    an = read_analysis(_variant(tmp_path_factory, path, 5672, "dst")).analyzer
    text = render_text(build_report(an))
    assert "begun by the client [begin packet 7, the server's not captured]" in text
    assert "attached: by the client or the server (unknown)" in text


@pytest.mark.parametrize("kept", ["dst", "src"])
def test_the_same_with_two_workers(tmp_path_factory, capsys, kept):
    path = os.path.join(ROOT, "samples", "messages", "topic_fanout.pcap")  # (four connections)
    variant = _variant(tmp_path_factory, path, 5672, kept)
    docs = []
    for jobs in ("1", "2"):
        assert main(["report", "-T", "json", "-j", jobs, variant]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    one, two = docs
    assert one["summary"] == two["summary"]
    assert one["summary"]["one_direction"]["connections"] == 4
    assert [c["missing_direction"] for c in one["connections"]] == [c["missing_direction"] for c in two["connections"]]
    assert one["connections"] == two["connections"]


def test_the_note_says_why(tmp_path_factory, capsys):
    """The frames listing carries the TCP layer's note: what showed the direction missing."""
    path = os.path.join(ROOT, "samples", "plain_send_receive.pcap")
    variant = _variant(tmp_path_factory, path, 5672, "dst")
    assert main(["frames", variant]) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if "one direction captured" in line]
    assert len(notes) == 1
    assert "the client's ACKs acknowledge" in notes[0] and "of the server" in notes[0]


def test_roles_of_one_stream_from_its_sasl_frame(tmp_path_factory):
    """Joined mid-stream on port 6000 (no --port), the client on port 20000 (no port says which is
    the server), the server's packets only: its stream starts with the SASL protocol header and
    sasl-mechanisms, which only a server sends."""
    path = os.path.join(DATA, "multi_session_port6000_client20000_midstream.pcap")
    an = read_analysis(_variant(tmp_path_factory, path, 6000, "src")).analyzer
    rows = an.connection_rows()
    assert [(r["client"], r["server"], r["missing_direction"]) for r in rows] == [
        ("127.0.0.1:20000", "127.0.0.1:6000", "client")]
    plain = _plain(path)
    assert [(r["client"], r["server"]) for r in plain.connection_rows()] == [("127.0.0.1:20000", "127.0.0.1:6000")]
    assert not an.violations
