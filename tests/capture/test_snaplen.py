"""Captures with a snap length (``tcpdump -s N``: headers only), derived from every sample with
``editcap -s N``.  The oracle is the plain capture: the bytes the snap length cut off are "not
captured (snap length N)", never a gap, never loss; no violation or error the plain capture lacks;
a transfer whose performative was captured is a delivery with the plain capture's outcome and
message size, its message "not captured"."""

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

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap"))
                 + glob.glob(os.path.join(ROOT, "samples", "messages", "*.pcap")))
SNAPS = (96, 128, 200, 300)
EDITCAP = shutil.which("editcap")

pytestmark = pytest.mark.skipif(EDITCAP is None, reason="editcap (wireshark-common) is not installed")

# Variants where a frame the cut hid still ends in a finding the plain capture lacks (none known: a
# lost open pipelined before the peer's header is explained, a link whose receiver's attach and flows
# were cut makes no credit finding)
KNOWN_EXTRA: set = set()


def _name(path):
    return os.path.basename(path)[:-len(".pcap")]


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """(sample name, snap length) -> path of the derived capture."""
    d = tmp_path_factory.mktemp("snaplen")
    out = {}
    for p in SAMPLES:
        for n in SNAPS:
            q = str(d / f"{_name(p)}.s{n}.pcap")
            subprocess.run([EDITCAP, "-s", str(n), p, q], check=True)
            out[(_name(p), n)] = q
    return out


_reports: dict = {}
_ids: dict = {}


def _report(path):
    if path not in _reports:
        a = read_analysis(path)
        _reports[path] = (a, build_report(a.analyzer))
    return _reports[path][1]


def _delivery_ids(path):
    """(connection, session, sender side) -> the delivery-ids of the capture's deliveries table."""
    if path not in _ids:
        _report(path)
        out: dict = {}
        for r in _reports[path][0].analyzer.delivery_rows():
            out.setdefault((r["connection"], r["session"], r["sender_side"]), set()).add(r["delivery_id"])
        _ids[path] = out
    return _ids[path]


def _kinds(rep):
    return {(v.get("kind"), v.get("side")) for v in rep.get("violations") or ()}


def _errors(rep):
    return {(e.get("condition"), e.get("scope")) for e in rep.get("errors") or ()}


def _cut(c):
    return (c.get("not_captured_bytes_client") or 0) + (c.get("not_captured_bytes_server") or 0)


CASES = [(_name(p), n) for p in SAMPLES for n in SNAPS]


@pytest.mark.parametrize("name,snap", CASES, ids=[f"{a}-s{b}" for a, b in CASES])
def test_the_cut_is_not_captured_never_a_gap(variants, name, snap):
    plain = _report(next(p for p in SAMPLES if _name(p) == name))
    rep = _report(variants[(name, snap)])
    by_id = {c["connection"]: c for c in plain["connections"]}
    text = render_text(rep)
    assert "lost in the capture" not in text
    for c in rep["connections"]:
        p = by_id[c["connection"]]
        for side in ("client", "server"):
            assert c[f"gaps_{side}"] == p[f"gaps_{side}"] == 0
            assert c[f"gap_bytes_{side}"] == 0
        if _cut(c):
            assert c["snap_length"] == snap
            assert f"not captured (snap length {snap})" in text
    assert rep["summary"]["connections"] == plain["summary"]["connections"]
    assert rep["summary"]["deliveries"] <= plain["summary"]["deliveries"]


@pytest.mark.parametrize("name,snap", CASES, ids=[f"{a}-s{b}" for a, b in CASES])
def test_no_violation_or_error_the_plain_capture_lacks(variants, name, snap, request):
    if (name, snap) in KNOWN_EXTRA:
        request.applymarker(pytest.mark.xfail(strict=True, reason="known: a finding behind a hidden frame"))
    plain = _report(next(p for p in SAMPLES if _name(p) == name))
    rep = _report(variants[(name, snap)])
    assert _kinds(rep) <= _kinds(plain)
    assert _errors(rep) <= _errors(plain)
    assert rep["summary"]["violations"] <= plain["summary"]["violations"]




def test_a_transfer_cut_after_its_performative_is_a_delivery_with_the_plain_outcome(variants, tmp_path):
    """outcomes.pcap, packet 19: two transfers of the sender link in one 611-byte packet, cut at
    134 bytes: delivery 1's performative was captured, its message was not; the server's
    disposition (packet 21, captured whole) settles it."""
    sample = os.path.join(ROOT, "samples", "outcomes.pcap")
    rows = {}
    for key, path in (("plain", sample), ("cut", variants[("outcomes", 200)])):
        out = tmp_path / f"{key}.jsonl"
        assert main(["deliveries", "--messages", "-T", "jsonl", "-o", str(out), path]) == 0
        data = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        rows[key] = {(r["link"], r["delivery_id"]): r for r in data}
    cut = rows["cut"][("outcomes-sender", 1)]
    plain = rows["plain"][("outcomes-sender", 1)]
    assert cut["first_packet"] == plain["first_packet"] == 19
    assert cut["outcome"] == plain["outcome"] == "accepted"
    assert cut["message_size"] == plain["message_size"]
    assert cut["message_read"] == "not captured (snap length 200)"
    assert plain["message_read"] == "read"
    assert cut["message_id"] is None and plain["message_id"] is not None


def test_a_message_of_many_frames_cut_in_each_counts_once(variants):
    """large_message.pcap: each message's transfer frames span many packets, each cut: the
    deliveries and their outcomes are the plain capture's."""
    plain = _report(os.path.join(ROOT, "samples", "large_message.pcap"))
    for snap in (200, 300):
        rep = _report(variants[("large_message", snap)])
        assert rep["summary"]["deliveries"] == plain["summary"]["deliveries"]
        assert rep["summary"]["outcomes"] == plain["summary"]["outcomes"]


def test_two_processes_say_the_same(variants, tmp_path):
    path = variants[("plain_send_receive", 200)]
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["report", "-T", "json", "-o", str(one), path]) == 0
    assert main(["report", "-T", "json", "-j", "2", "-o", str(two), path]) == 0
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["summary"] == b["summary"]
    assert a["connections"] == b["connections"]
    assert any(_cut(c) for c in a["connections"])


def test_html_says_not_captured(variants, tmp_path):
    out = tmp_path / "r.html"
    assert main(["report", "-T", "html", "-o", str(out), variants[("outcomes", 200)]]) == 0
    assert "not captured (snap length 200)" in out.read_text()


@pytest.mark.parametrize("name,snap", CASES, ids=[f"{a}-s{b}" for a, b in CASES])
def test_outcomes_are_the_plain_captures_or_unknown(variants, name, snap):
    """Each outcome, counted over the deliveries found and those whose transfers the snap length cut
    off whole (their outcomes from the receiver's dispositions), is never more than the plain
    capture has: an outcome found is one the plain capture has, the rest are unknown."""
    plain = _report(next(p for p in SAMPLES if _name(p) == name))
    rep = _report(variants[(name, snap)])
    counts = dict(rep["summary"]["outcomes"])
    for c in rep["connections"]:
        for s in c["sessions"]:
            for k, v in (s.get("not_captured_outcomes") or {}).items():
                counts[k] = counts.get(k, 0) + v
    for k, v in counts.items():
        if k != "none":
            assert v <= plain["summary"]["outcomes"].get(k, 0), k


def test_the_outcomes_of_transfers_cut_off_whole_come_from_the_dispositions(variants):
    """outcomes.pcap, packet 19: the transfers of deliveries 2 to 8 of the sender link are cut off
    whole; the server's disposition (first 1, last 8, accepted, packet 21) was captured: with the
    two deliveries found, the link's nine accepted of the plain capture."""
    plain = _report(os.path.join(ROOT, "samples", "outcomes.pcap"))
    rep = _report(variants[("outcomes", 200)])
    sender = [lk for c in plain["connections"] for s in c["sessions"] for lk in s["links"]
              if lk["name"] == "outcomes-sender"][0]
    found = [lk for c in rep["connections"] for s in c["sessions"] for lk in s["links"]
             if lk["name"] == "outcomes-sender"][0]
    cut = rep["connections"][0]["sessions"][0]["not_captured_outcomes"]
    assert found["outcomes"]["accepted"] + cut["accepted"] == sender["outcomes"]["accepted"] == 9
    assert "outcomes from the dispositions: accepted 7" in render_text(rep)


@pytest.mark.parametrize("snap", SNAPS)
def test_real_loss_stays_loss_with_a_snap_length(tmp_path, snap):
    """samples/loss/kernel_loss.pcap (kernel drops) cut with a snap length: its gaps are the plain
    capture's, byte for byte (a cut next to a real hole, or on a segment held behind it, is
    neither hidden in the loss nor added to it)."""
    sample = os.path.join(ROOT, "samples", "loss", "kernel_loss.pcap")
    cut = str(tmp_path / f"kernel_loss.s{snap}.pcap")
    subprocess.run([EDITCAP, "-s", str(snap), sample, cut], check=True)
    plain, rep = _report(sample), _report(cut)
    keys = ("gaps_client", "gaps_server", "gap_bytes_client", "gap_bytes_server")
    assert [[c[k] for k in keys] for c in rep["connections"]] == [[c[k] for k in keys] for c in plain["connections"]]
    assert sum(c["gaps_server"] for c in plain["connections"]) > 0
    assert all(_cut(c) for c in rep["connections"])
    assert _kinds(rep) <= _kinds(plain) and _errors(rep) <= _errors(plain)


def _unseen(x):
    return (x.get("deliveries_not_captured") or 0) + (x.get("deliveries_lost_whole") or 0)


@pytest.mark.parametrize("name,snap", CASES, ids=[f"{a}-s{b}" for a, b in CASES])
def test_deliveries_not_captured_are_counted(variants, name, snap):
    """The plain capture's deliveries table is the oracle: per connection, each of its deliveries
    the cut variant did not see, whose delivery-id lies between two ids the variant saw (same
    session and sender), is counted (not captured, or lost whole); and seen + counted never
    exceeds the plain capture's deliveries (per connection, session and link, and in all)."""
    src = next(p for p in SAMPLES if _name(p) == name)
    plain, rep = _report(src), _report(variants[(name, snap)])
    plain_ids, cut_ids = _delivery_ids(src), _delivery_ids(variants[(name, snap)])
    assert plain["summary"]["deliveries_not_captured"] == 0  # (nothing cut, nothing counted)
    by_id = {c["connection"]: c for c in plain["connections"]}
    for c in rep["connections"]:
        bracketed = 0
        for key, ids in plain_ids.items():
            seen = cut_ids.get(key) if key[0] == c["connection"] else None
            if seen:
                bracketed += sum(1 for i in ids - seen if min(seen) < i < max(seen))
        assert _unseen(c) >= bracketed, c["connection"]
        assert c["deliveries"] + _unseen(c) <= by_id[c["connection"]]["deliveries"]
        plain_sessions = {s["session"]: s for s in by_id[c["connection"]]["sessions"]}
        for s in c["sessions"]:
            if s["session"] in plain_sessions:
                assert s["deliveries"] + _unseen(s) <= plain_sessions[s["session"]]["deliveries"]
    total = rep["summary"]["deliveries"] + _unseen(rep["summary"])
    assert total <= plain["summary"]["deliveries"]
    if all(min(cut_ids.get(k) or {-1}) <= min(v) and max(cut_ids.get(k) or {-1}) >= max(v)
           for k, v in plain_ids.items()):
        # (the first and last delivery of every session and sender seen: the ids around say all)
        assert total == plain["summary"]["deliveries"]


def test_not_captured_figures_on_outcomes(variants):
    """outcomes.pcap cut at 200 bytes: 8 deliveries seen; the 12 others of the plain capture's 20
    were cut off whole (none lost: no gap): 7 on the sender link (its disposition names 2..8), 5 on
    the receiver link (the delivery-ids around them)."""
    plain = _report(os.path.join(ROOT, "samples", "outcomes.pcap"))
    rep = _report(variants[("outcomes", 200)])
    s = rep["summary"]
    assert s["deliveries"] + s["deliveries_not_captured"] == plain["summary"]["deliveries"] == 20
    assert s["deliveries_lost_whole"] == 0
    links = {lk["name"]: lk for c in rep["connections"] for ss in c["sessions"] for lk in ss["links"]}
    plinks = {lk["name"]: lk for c in plain["connections"] for ss in c["sessions"] for lk in ss["links"]}
    for n in ("outcomes-sender", "outcomes-receiver"):
        assert links[n]["deliveries"] + links[n]["deliveries_not_captured"] == plinks[n]["deliveries"], n
    text = render_text(rep)
    assert f"deliveries 20 ({s['deliveries']} seen: " in text and "; 12 not captured)" in text


def test_not_captured_in_json_html_and_two_processes(variants, tmp_path):
    path = variants[("outcomes", 200)]
    one, two, page = tmp_path / "one.json", tmp_path / "two.json", tmp_path / "r.html"
    assert main(["report", "-T", "json", "-o", str(one), path]) == 0
    assert main(["report", "-T", "json", "-j", "2", "-o", str(two), path]) == 0
    assert main(["report", "-T", "html", "-o", str(page), path]) == 0
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["summary"]["deliveries_not_captured"] == 12
    assert a["summary"] == b["summary"] and a["connections"] == b["connections"]
    html = page.read_text()
    assert "deliveries not captured" in html and "outcome unknown (not captured)" in html
    assert "lost in capture" not in html


def test_a_cut_reads_not_captured_never_lost(variants):
    """outcomes.pcap cut at 200 bytes has no gap: the deliveries left unknown read "outcome unknown
    (not captured)", the frames inferred "was not captured (snap length 200)", never loss."""
    rep = _report(variants[("outcomes", 200)])
    text = render_text(rep)
    assert rep["summary"]["lost_in_capture"] == rep["summary"]["outcome_not_captured"] > 0
    assert "outcome unknown (not captured)" in text
    assert "lost in capture" not in text
    assert " was lost " not in text
    assert "was not captured (snap length 200)" in text
    assert "after a gap" not in text  # counts re-synchronised after bytes the snap length cut, not a gap
    assert "re-synchronised from its flow after bytes not captured (snap length 200)" in text
    rows = _reports[variants[("outcomes", 200)]][0].analyzer.delivery_rows()
    assert {r["unsettled_at"] for r in rows if not r["outcome"]} == {"not-captured"}


@pytest.mark.parametrize("snap", (128, 200))
def test_a_gap_and_a_cut_keep_their_causes(tmp_path, snap):
    """kernel_loss.pcap (kernel drops) cut with a snap length: both causes occur; the deliveries
    whose settlement a gap may have held still read "lost in capture", apart from those only a cut
    left unknown; the deliveries counted from the ids never exceed the plain capture's."""
    sample = os.path.join(ROOT, "samples", "loss", "kernel_loss.pcap")
    cut = str(tmp_path / f"kernel_loss.s{snap}.pcap")
    subprocess.run([EDITCAP, "-s", str(snap), sample, cut], check=True)
    plain, rep = _report(sample), _report(cut)
    s = rep["summary"]
    assert s["deliveries_not_captured"] > 0 and s["deliveries_lost_whole"] > 0
    assert s["deliveries"] + _unseen(s) <= plain["summary"]["deliveries"] + plain["summary"]["deliveries_lost_whole"]
    assert s["lost_in_capture"] > s["outcome_not_captured"]
    text = render_text(rep)
    assert "outcome unknown (lost in capture)" in text
    assert "not captured, " in text and " in lost bytes)" in text
