"""Clock steps (issue 39 item 5): every sample with its capture clock stepped half way.

Each sample (samples/*.pcap, samples/messages/*.pcap) is split at its middle packet with
``editcap -r``, the second half shifted with ``editcap -t`` (-5 s and -0.5 s: a step back, as an
NTP step or the files of two hosts give; +3600 s: a jump forward) and the halves put back
together with ``mergecap -a``.  The oracle is the plain sample:

* a step back is named, in the report's header and on the connection it hit, at the middle
  packet, with its size: the shift applied plus the plain capture's time between the two
  packets around it (tshark's ``frame.time_epoch`` of the plain sample, exactly);
* the deliveries, outcomes, violations and errors are the plain sample's (what does not
  depend on time is equal);
* every duration and latency is the plain sample's or null (unknown: clock step), never another
  number and never negative; every time is the capture's own (the plain one, shifted after the
  step);
* ``-j 2`` gives the single process's report;
* a step forward cannot be told from a pause (docs/definitions.md, "Clock steps"): it is not
  claimed, and a duration across it is the plain one plus the jump, exactly.

Backward jitter (packets written out of order, each with its own time) is no step: the kept
capture with ten adjacent swaps (tests/capture/test_reorder.py) names none.
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import shutil
import subprocess
from decimal import Decimal

import pandas as pd
import pcapbuild
import pytest

from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap"))
                 + glob.glob(os.path.join(ROOT, "samples", "messages", "*.pcap")))
NAMES = [os.path.relpath(p, os.path.join(ROOT, "samples"))[:-5] for p in SAMPLES]
TOOLS = all(shutil.which(t) for t in ("editcap", "mergecap", "capinfos", "tshark"))
needs_tools = pytest.mark.skipif(not TOOLS and not os.environ.get("CI"),
                                 reason="editcap / mergecap / capinfos / tshark are not installed")
NS = 1_000_000_000
BACK = ("-5", "-0.5")


@functools.cache
def _epochs(path) -> list[int]:
    """tshark's frame.time_epoch of every packet, as integer nanoseconds (read once per file: the
    samples' are asked for by each shift's test)."""
    out = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch"], check=True,
                         capture_output=True, text=True).stdout
    return [int(Decimal(x) * NS) for x in out.split()]


def stepped(src: str, shift: str, out: str) -> int:
    """``src`` with its second half shifted by ``shift`` seconds (pcapbuild.stepped_capture)."""
    return pcapbuild.stepped_capture(src, shift, out)


@pytest.fixture(scope="module")
def plain():
    cache = {}

    def get(name):
        if name not in cache:
            path = os.path.join(ROOT, "samples", name + ".pcap")
            cache[name] = (path, read_analysis(path))
        return cache[name]
    return get


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clock")
    cache = {}

    def get(name, shift):
        if (name, shift) not in cache:
            src = os.path.join(ROOT, "samples", name + ".pcap")
            out = str(folder / (name.replace("/", "_") + f"_{shift}.pcap"))
            mid = stepped(src, shift, out)
            cache[name, shift] = (out, mid, read_analysis(out))
        return cache[name, shift]
    return get


DURATION_WORDS = ("latency", "duration", "seconds", "residence", "end_to_end", "round_trip")


# columns that say what a time difference showed: unknown (their value here) across a step
UNKNOWN_ACROSS = {"waiting": None, "waiting_evidence": "none"}


def _kind(df: pd.DataFrame, col: str) -> str:
    """"time" (a datetime column), "duration" (float seconds by its name) or "other"."""
    if pd.api.types.is_datetime64_any_dtype(df[col]):
        return "time"
    if any(w in col for w in DURATION_WORDS) and pd.api.types.is_float_dtype(df[col]):
        return "duration"
    return "other"


def _null(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NaT or (
        not isinstance(x, (list, dict, str)) and pd.isna(x))


def _rows(df: pd.DataFrame) -> list[dict]:
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _check_table(table: str, want: pd.DataFrame, got: pd.DataFrame, shift_ns: int, mid: int, back: bool):
    """The stepped table against the plain one: same rows; columns without time equal; each
    duration the plain one or null (a step back) or the plain one plus the jump (forward); never
    negative; each time the plain one, or shifted."""
    assert len(got) == len(want), table
    assert list(got.columns) == list(want.columns)
    nulled = 0
    kinds = {col: _kind(want, col) for col in want.columns}
    assert any(k != "other" for k in kinds.values()), table
    for i, (w, g) in enumerate(zip(_rows(want), _rows(got))):
        for col in want.columns:
            a, b = w[col], g[col]
            kind = kinds[col]
            if kind == "other":
                if col in UNKNOWN_ACROSS and b == UNKNOWN_ACROSS[col]:
                    continue  # (what time differences show, unknown across the step)
                assert a == b or (_null(a) and _null(b)), (table, i, col, a, b)
            elif kind == "duration":
                if _null(b):
                    nulled += not _null(a)
                    continue
                assert b >= 0, (table, i, col, b)
                if back:
                    assert b == a, (table, i, col, a, b)
                else:
                    assert b == a or math.isclose(b, a + shift_ns / NS, rel_tol=0, abs_tol=1e-9), (table, i, col, a, b)
            else:  # a time: the capture's own
                if _null(a) or _null(b):
                    assert _null(a) and _null(b), (table, i, col, a, b)
                    continue
                ta, tb = pd.Timestamp(a).value, pd.Timestamp(b).value
                assert tb in (ta, ta + shift_ns), (table, i, col, a, b)
    return nulled


def _sorted(df: pd.DataFrame, keys) -> pd.DataFrame:
    return df.sort_values([k for k in keys if k in df.columns], kind="stable").reset_index(drop=True)


@needs_tools
@pytest.mark.parametrize("shift", BACK)
@pytest.mark.parametrize("name", NAMES)
def test_a_step_back_is_named_with_its_size_and_packet(name, shift, plain, variant):
    path, _ = plain(name)
    out, mid, got = variant(name, shift)
    t = _epochs(path)
    want_size = t[mid - 1] + int(Decimal(shift) * NS) - t[mid - 2]  # (packets mid - 1 and mid, 1-based)
    steps = got.capture["clock_steps"]
    assert [s["packet"] for s in steps] == [mid]
    assert steps[0]["time"] - steps[0]["before"] == want_size
    assert steps[0]["size"] == want_size / NS
    assert got.capture["duration"] is None and got.capture["duration_unknown"] == "unknown (clock step)"
    rep = build_report(got.analyzer, capture=got.capture)
    text = render_text(rep)
    size = f"{-want_size // NS}.{(-want_size % NS) // 1000:06d}"
    assert f"clock stepped back {size} s at packet {mid}" in text
    # on the connections it hit: those with packets on both sides of it
    hit = [c for c in rep["connections"] if c.get("clock_steps")]
    for c in hit:
        assert [s["packet"] for s in c["clock_steps"]] == [mid]
    conns = got.connections
    spanning = conns[(conns["first_packet"] < mid) & (conns["last_packet"] >= mid)]["connection"].tolist()
    listed = {c["connection"] for c in rep["connections"]}
    assert sorted(c["connection"] for c in hit) == sorted(c for c in spanning if c in listed)


@needs_tools
@pytest.mark.parametrize("shift", BACK)
@pytest.mark.parametrize("name", NAMES)
def test_a_step_back_changes_no_finding_and_no_duration(name, shift, plain, variant):
    _, want = plain(name)
    _, mid, got = variant(name, shift)
    shift_ns = int(Decimal(shift) * NS)
    d = _sorted(got.deliveries, ["connection", "link_index", "delivery_id"])
    _check_table("deliveries", _sorted(want.deliveries, ["connection", "link_index", "delivery_id"]), d,
                 shift_ns, mid, True)
    # a latency is unknown exactly when its transfer and its settlement are on either side of the step
    settled = d["settled_packet"].notna()
    spans = settled & (d["first_packet"] < mid) & (d["settled_packet"] >= mid)
    assert d.loc[spans, "settlement_latency"].isna().all()
    assert d.loc[settled & ~spans, "settlement_latency"].notna().all()
    _check_table("links", want.links, got.links, shift_ns, mid, True)
    _check_table("stalls", want.stalls, got.stalls, shift_ns, mid, True)
    _check_table("sessions", want.sessions, got.sessions, shift_ns, mid, True)
    _check_table("connections", want.connections, got.connections, shift_ns, mid, True)
    assert sorted(got.violations["message"]) == sorted(want.violations["message"])
    assert len(got.errors) == len(want.errors)


@needs_tools
@pytest.mark.parametrize("name", ["credit_idle"])
def test_a_step_back_nulls_what_spans_it(name, variant):
    """A stepped capture where deliveries and a stall span the step: unknown, in the tables and the report."""
    _, mid, got = variant(name, "-5")
    d = got.deliveries
    spans = (d["first_packet"] < mid) & (d["settled_packet"] >= mid)
    assert spans.any()
    assert d.loc[spans, "settlement_latency"].isna().all()
    assert not d.loc[~spans & d["settled_packet"].notna(), "settlement_latency"].isna().any()
    st = got.stalls
    assert st.loc[(st["start_packet"] < mid) & (st["end_packet"] >= mid), "duration"].isna().any()
    assert got.links["latency_max"].isna().all() and got.links["stalled_seconds"].isna().any()
    rep = build_report(got.analyzer, capture=got.capture)
    text = render_text(rep)
    assert "unknown (clock step)" in text
    assert "-" + "0." not in text.replace("--", "")  # (no negative number of seconds in the report)


@needs_tools
@pytest.mark.parametrize("name", ["credit_idle", "outcomes", "messages/azure_cbs"])
def test_two_processes_give_the_report_and_tables_of_one(name, variant, tmp_path, parallel_runs):
    out, mid, _ = variant(name, "-5")
    for args in (["report", "-T", "json"], ["report"], ["deliveries", "-T", "csv"], ["stalls", "-T", "csv"]):
        got = []
        for jobs in ("1", "2"):
            dest = tmp_path / f"{args[0]}-{jobs}-{len(os.listdir(tmp_path))}"
            assert main(args + ["-j", jobs, out, "-o", str(dest)]) == 0
            got.append(dest.read_bytes())
        assert got[0] == got[1], args
        if args[-1] == "json":
            assert [s["packet"] for s in json.loads(got[0])["capture"]["clock_steps"]] == [mid]
    assert parallel_runs


@needs_tools
def test_the_html_report_names_the_step(variant, tmp_path):
    out, mid, _ = variant("credit_idle", "-5")
    dest = tmp_path / "r.html"
    assert main(["report", "-T", "html", out, "-o", str(dest)]) == 0
    page = dest.read_text()
    assert f'<p class="notes clock-step"><b>clock stepped back 4.999908 s at packet {mid}' in page
    assert "<b>unknown (clock step)</b><span>stalled" in page
    assert "settlement latency unknown (clock step) ·" in page


@needs_tools
@pytest.mark.parametrize("name", NAMES)
def test_a_jump_forward_is_a_pause(name, plain, variant):
    """+3600 s: not claimed as a step; with the reassembler's idle timeout past the jump, the same
    findings, and every duration the plain one or the plain one plus the jump, never negative."""
    _, want = plain(name)
    out, mid, got = variant(name, "3600")
    assert "clock_steps" not in got.capture
    assert got.capture["duration"] > 3600
    # (the default 900 s idle timeout of the reassembly ends a connection silent for longer: a pause)
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    src = CaptureSource([out], dissector=Dissector(idle_timeout=7200.0))
    an = run_analysis(src)
    _check_table("deliveries", _sorted(want.deliveries, ["connection", "link_index", "delivery_id"]),
                 _sorted(an.deliveries, ["connection", "link_index", "delivery_id"]), 3600 * NS, mid, False)
    _check_table("stalls", want.stalls, an.stalls, 3600 * NS, mid, False)


def test_backward_jitter_is_no_step():
    """Ten adjacent packets swapped (each with its own time; tests/capture/test_reorder.py): no step."""
    got = read_analysis(os.path.join(ROOT, "tests", "data", "plain_send_receive_10swaps.pcap"))
    assert "clock_steps" not in got.capture
    assert got.capture["duration"] is not None


def test_the_rule_of_a_step():
    from amqp_dissect.clock import STEP_MIN_NS, ClockWatch

    def steps(times):
        w = ClockWatch()
        prev = None
        for i, t in enumerate(times, 1):
            if prev is not None and (t < prev or w.pending):
                w.see(i, t, prev)
            prev = t
        return [(s.packet, s.size) for s in w.steps]

    s = NS
    assert steps([10 * s, 11 * s, 6 * s, 7 * s]) == [(3, -5 * s)]  # back, and stays back
    assert steps([10 * s, 11 * s, 6 * s, 12 * s]) == []  # one late packet: its neighbours in order
    assert steps([10 * s, 11 * s, 11 * s - STEP_MIN_NS, 11 * s - STEP_MIN_NS]) == []  # jitter: not more than the minimum
    assert steps([10 * s, 11 * s, 11 * s - STEP_MIN_NS - 1, 11 * s - STEP_MIN_NS]) == [(3, -STEP_MIN_NS - 1)]
    assert steps([10 * s, 11 * s, 6 * s]) == []  # at the last packet: not claimed
    assert steps([10 * s, 11 * s, 6 * s, 7 * s, 3 * s, 4 * s]) == [(3, -5 * s), (5, -4 * s)]
    w = ClockWatch()
    w.see(3, 6 * s, 11 * s)
    w.see(4, 7 * s, 6 * s)
    assert w.spans(2, 3) and w.spans(1, 4) and not w.spans(3, 4) and not w.spans(1, 2) and not w.spans(None, 4)


MESSAGE_SAMPLES = [n for n in NAMES if n.startswith("messages/")]


@needs_tools
@pytest.mark.parametrize("name", MESSAGE_SAMPLES)
def test_round_trips_are_the_plain_ones_or_unknown(name, variant, tmp_path):
    """The requests table of a stepped capture: the plain rows, each round trip the plain one or
    null (its request and reply on either side of the step), never negative."""
    out, mid, _ = variant(name, "-5")
    tables = []
    for path in (os.path.join(ROOT, "samples", name + ".pcap"), out):
        dest = tmp_path / f"r{len(tables)}.csv"
        assert main(["requests", "-T", "csv", path, "-o", str(dest)]) == 0
        tables.append(pd.read_csv(dest))
    want, got = tables
    assert len(got) == len(want)
    for w, g in zip(_rows(want), _rows(got)):
        assert g["request_packet"] == w["request_packet"] and g["reply_packet"] == w["reply_packet"]
        across = (g["request_packet"] is not None and g["reply_packet"] is not None
                  and g["request_packet"] < mid <= g["reply_packet"])
        if across:
            assert g["round_trip"] is None
        else:
            assert g["round_trip"] == w["round_trip"]


def _archive_steps(files: list, split_size: int) -> list:
    """The steps the archive's driver finds (pipelines/archive: the ranges' kept records replayed
    in the capture's order), its stage 1 run here range by range (no Spark)."""
    from amqp_dissect.pipelines.archive import clock_steps, decode_range, group_ranges, layout, plan_ranges

    def summaries(ranges):
        return [json.loads(list(decode_range(r))[-1][10]) for r in ranges]

    sums = summaries(plan_ranges(files, split_size))
    lay = layout(files, sums)
    if lay.groups:  # (files whose times overlap: read merged, as the archive reads them)
        grouped = {fi for g in lay.groups for fi, _ in g}
        sums = [s for s in sums if s["file"] not in grouped] + summaries(
            group_ranges(files, lay.groups, max(s["rid"] for s in sums) + 1))
        lay = layout(files, sums)
    return [s.as_dict() for s in clock_steps(sums, lay.offsets)]


@needs_tools
@pytest.mark.parametrize("shift", BACK)
@pytest.mark.parametrize("name", NAMES)
def test_the_archive_finds_the_steps_of_the_single_process(name, shift, variant):
    """Read whole or in byte ranges of 2 KB (the step and the record confirming it in two ranges'
    tasks), the archive's driver names the single process's steps."""
    out, mid, got = variant(name, shift)
    for split in (1 << 30, 2048):
        assert _archive_steps([out], split) == got.capture["clock_steps"], split


@needs_tools
def test_the_archive_finds_the_steps_of_a_set_of_two_hosts(variant, tmp_path):
    """Host A's file stepped back 5 s, host B's capture starting inside it (its clock another):
    merged by time, the single process's steps."""
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    host_a, _, _ = variant("outcomes", "-5")
    found = []
    for other in ("drain", "messages/rhea_request_reply"):
        src = os.path.join(ROOT, "samples", other + ".pcap")
        host_b = str(tmp_path / (other.replace("/", "_") + ".pcap"))
        shift = Decimal(_epochs(host_a)[0] + NS // 5 - _epochs(src)[0]) / NS
        subprocess.run(["editcap", "-F", "pcap", "-t", str(shift), src, host_b], check=True)
        want = run_analysis(CaptureSource([host_a, host_b])).capture
        assert want["order"].startswith("merged by time")
        found += want["clock_steps"]
        for split in (1 << 30, 2048):
            assert _archive_steps([host_b, host_a], split) == want["clock_steps"], (other, split)
    assert found


def _packets_of(row: dict) -> list:
    """The packets of a messages row's consumers (first transfer, outcome)."""
    out = []
    for c in row["consumer_deliveries"] or ():
        out += [c.get("first_packet"), c.get("outcome_packet")]
    return [p for p in out if p is not None]


@needs_tools
@pytest.mark.parametrize("shift", BACK)
@pytest.mark.parametrize("name", MESSAGE_SAMPLES)
def test_residence_and_end_to_end_are_the_plain_ones_or_unknown(name, shift, variant):
    """The messages table of a stepped capture: the plain rows; each residence / end to end the
    plain one, or null when the producer's transfer and a consumer's packet lie on either side of
    the step (the row's note then says so); never another number."""
    from amqp_dissect.pipelines.runs.local import CaptureSource
    from amqp_dissect.pipelines.runs.messages import message_table
    from amqp_dissect.results.messages import CLOCK_STEP_NOTE

    out, mid, _ = variant(name, shift)
    want = message_table(CaptureSource([os.path.join(ROOT, "samples", name + ".pcap")]))[0]
    got = message_table(CaptureSource([out]))[0]
    assert len(got) == len(want)
    key = ("message_id", "message_id_type", "bare_digest")
    want = {tuple(r[k] for k in key): r for r in want}
    for g in got:
        w = want[tuple(g[k] for k in key)]
        assert g["producer_packet"] == w["producer_packet"] and g["consumers"] == w["consumers"]
        p = w["producer_packet"]
        sides = {pk >= mid for pk in _packets_of(w) + ([p] if p is not None else [])}
        unknown = 0
        for col in ("residence", "residence_max", "end_to_end", "end_to_end_max"):
            if g[col] == w[col]:
                continue
            assert g[col] is None and len(sides) == 2, (col, w[col], g[col], p, mid)
            unknown += 1
        noted = CLOCK_STEP_NOTE in (g["note"] or "")
        assert noted or not unknown, g["note"]
        assert not noted or any(g[c] is None for c in ("residence", "residence_max", "end_to_end", "end_to_end_max"))
        assert (g["note"] or "").replace("; " + CLOCK_STEP_NOTE, "").replace(CLOCK_STEP_NOTE, "") == (w["note"] or "")
    assert sum(CLOCK_STEP_NOTE in (g["note"] or "") for g in got) == sum(
        1 for g in got if any(g[c] is None and want[tuple(g[k] for k in key)][c] is not None
                              for c in ("residence", "residence_max", "end_to_end", "end_to_end_max")))


@needs_tools
@pytest.mark.parametrize("name", MESSAGE_SAMPLES)
def test_the_api_matches_requests_as_the_requests_command(name, variant, tmp_path):
    """``amqp_dissect.analyze(..., tables=["messages", "requests"])`` of a stepped capture: the
    requests command's rows (requests meet their replies in the capture's order across the step)."""
    import amqp_dissect

    out, _, _ = variant(name, "-5")
    dest = tmp_path / "r.csv"
    assert main(["requests", "-T", "csv", out, "-o", str(dest)]) == 0
    want = pd.read_csv(dest)
    got = amqp_dissect.analyze([out], tables=["messages", "requests"]).requests
    assert len(got) == len(want)
    for col in ("request_packet", "reply_packet", "round_trip"):
        assert [None if _null(v) else float(v) for v in got[col]] == [
            None if _null(v) else float(v) for v in want[col]], col


@needs_tools
def test_the_report_says_which_messages_the_step_made_unknown(variant, tmp_path, parallel_runs):
    """The report's messages section (text, JSON, HTML; one process and two): per address, the
    messages whose residence or end to end the step made unknown (the messages table's notes)."""
    from amqp_dissect.pipelines.runs.local import CaptureSource
    from amqp_dissect.pipelines.runs.messages import message_table
    from amqp_dissect.results.messages import CLOCK_STEP_NOTE

    out, _, _ = variant("messages/rhea_request_reply", "-5")
    rows = message_table(CaptureSource([out]))[0]
    want: dict = {}
    for r in rows:
        if CLOCK_STEP_NOTE in (r["note"] or ""):
            want[r["address"]] = want.get(r["address"], 0) + 1
    assert want
    docs = []
    for jobs in ("1", "2"):
        dest = tmp_path / f"r{jobs}.json"
        assert main(["report", "--messages", "-T", "json", "-j", jobs, out, "-o", str(dest)]) == 0
        docs.append(dest.read_bytes())
    assert docs[0] == docs[1] and parallel_runs
    addrs = json.loads(docs[0])["messages"]["addresses"]
    assert {a["address"]: a["clock_step"] for a in addrs if a.get("clock_step")} == want
    for fmt in ("text", "html"):
        dest = tmp_path / f"r.{fmt}"
        assert main(["report", "--messages", "-T", fmt, out, "-o", str(dest)]) == 0
        page = dest.read_text()
        for address, n in want.items():
            said = f"{n} message{'s' if n != 1 else ''} unknown (clock step)"
            assert said in page, (fmt, said)


def test_the_kept_records_of_parts_find_the_steps_of_every_record():
    """A capture cut into parts (the archive's byte ranges, files): each part's kept records
    (ClockPoints), replayed part after part, give the steps of a watch fed every record; what is
    kept grows with the steps, not with the records (backward jitter of more than 0.1 s, however
    often, keeps nothing past each part's first two records)."""
    import random

    from amqp_dissect.clock import ClockPoints, ClockWatch

    def every(times):
        w = ClockWatch()
        for i in range(1, len(times)):
            if times[i] < times[i - 1] or w.pending:
                w.see(i + 1, times[i], times[i - 1])
        return w.steps

    def by_parts(times, cuts):
        w = ClockWatch()
        prev = None
        kept = 0
        for a, b in zip([0] + cuts, cuts + [len(times)]):
            pts = ClockPoints()
            for i in range(a, b):
                pts.add(i - a, times[i])
            kept += len(pts.points)
            w.replay([(a + 1 + idx, ts, before) for idx, ts, before in pts.points], prev)
            prev = pts.last if b > a else prev
        return w.steps, kept

    rng = random.Random(39)
    for _ in range(400):
        n = rng.randrange(1, 60)
        t, times = 100 * NS, []
        for _ in range(n):
            t += rng.choice((NS // 100, NS // 3, -NS // 20, -NS // 5, -2 * NS, 3 * NS))
            times.append(t)
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randrange(0, 6)))) if n > 1 else []
        assert by_parts(times, cuts)[0] == every(times), (times, cuts)
    # late records every other one (each 0.2 s behind its predecessor, the next one back in order): no step, little kept
    times = [k * NS + (0 if k % 2 else -NS // 5 - NS) for k in range(10_000)]
    steps, kept = by_parts(times, [5_000])
    assert steps == every(times) == [] and kept <= 8


def test_the_archive_command_names_the_steps(tmp_path, capsys):
    """The archive command's summary lines name each step as the report's header does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from amqp_dissect.cli.archive import _print_summary
    from amqp_dissect.render.report import clock_step_line

    lat = tmp_path / "latency_by_link"
    lat.mkdir()
    pq.write_table(pa.table({c: pa.array([], pa.float64() if c[0] in "pm" else pa.string()) for c in
                             ("connection", "link", "count", "p50", "p90", "p99", "max")}), lat / "part-0.parquet")
    step = {"packet": 25, "time": 1_700_000_000 * NS, "before": 1_700_000_005 * NS, "size": -5.0}
    res = {"stats": {"ranges": 3, "records": 50, "tcp_records": 50, "flows": 1, "seconds": 1.0},
           "counts": {"deliveries": 3}, "tables": {"deliveries": "x", "latency_by_link": str(lat)}, "out": "o",
           "files": ["a.pcap"], "order": None, "gaps": [], "clock_steps": [step]}
    _print_summary(None, res, 1)
    out = capsys.readouterr().out
    assert clock_step_line(step) + "\n" in out
    assert "clock stepped back 5.000000 s at packet 25" in out
