"""A growing capture set analysed in steps equals one run over all of it (issue 43, the analysis side).

A capture cut into 8 rotated files (``editcap -c``: connections span the cuts) is analysed once
whole, and in 2, 3 and 8 steps, each step given only its new files and the checkpoint the step
before left (saved and loaded from disk).  The rule: the final rows of every step plus the
provisional rows of the last step equal the rows of the one run, per table, as multisets; the
set's facts (files, errors, gaps, clock steps, order, rows per table) equal too.  The oracle is the
one run over the whole set, which tests/spark/test_spark.py holds to the single-process reader.
Captures of several stacks: proton (multiframe_credit_one, a proton-pumped many-delivery capture
made as tests/benchmarks/benchmark.py makes its captures), rhea (rhea_request_reply), the Azure
SDK (azure_cbs), a lossy capture (kernel_loss) and one whose rows depend on the rest of the
capture (an idle sweep driven by later traffic across a cut, an open stall, the analysis end
before the last record: test_spark's _global_capture).  A set that cannot be continued exactly
(a finished flow used again, a new file back in time, other options) raises CannotContinue."""

from __future__ import annotations

import collections
import glob
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest

from sparkneeds import require_spark  # noqa: E402

require_spark()

from amqp_dissect.pipelines.archive.checkpoint import CannotContinue, Checkpoint  # noqa: E402
from amqp_dissect.pipelines.spark.job import TABLES, analyse, chunk_rows, row_chunks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
STEPS = {2: [4, 8], 3: [3, 6, 8], 8: list(range(1, 9))}  # the 8 files' cut points of each way


# --------------------------------------------------------------------------- helpers


def _module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def rotate(src: str, n: int, directory) -> list[str]:
    """``src`` cut into ``n`` files of about the same number of packets (``editcap -c``), in order."""
    os.makedirs(directory, exist_ok=True)
    out = subprocess.run(["capinfos", "-c", "-M", src], check=True, capture_output=True, text=True).stdout
    total = int(out.split()[-1])
    subprocess.run(["editcap", "-c", str(math.ceil(total / n)), src, os.path.join(directory, "part.pcap")],
                   check=True, capture_output=True)
    files = sorted(glob.glob(os.path.join(directory, "part*.pcap")))
    assert len(files) == n
    return files


def run(spark, paths, work, resume=None, frames=True, idle_timeout=900, messages=False):
    shutil.rmtree(work, ignore_errors=True)
    return analyse(spark, [str(p) for p in paths], str(work), t0=time.time(), split_size=64 << 20, frames=frames,
                   partitions=None, ports=(), idle_timeout=idle_timeout, keylog=None, resume=resume,
                   messages=messages)


def rows(done, which: str) -> dict:
    """table -> Counter of its rows (as JSON text) of ``done``: "final", "provisional" or "all"."""
    out = {}
    for t in TABLES + ("frames",):
        final, prov = row_chunks(done, t)
        chunks = {"final": final, "provisional": prov, "all": final + prov}[which]
        tb = chunk_rows(done, t, chunks) if chunks else None
        out[t] = collections.Counter(json.dumps(r, sort_keys=True, default=str)
                                     for r in (tb.to_pylist() if tb is not None else []))
    return out


def facts(done) -> dict:
    return {"files": done.files, "errors": done.errors, "gaps": done.gaps, "clock_steps": done.clock_steps,
            "order": done.order}


def in_steps(spark, files, cuts, tmp_path, drop_carried: bool = False, messages: bool = False):
    """The set ``files`` analysed in steps ending at ``cuts`` (each step resumed from the checkpoint the
    one before saved): (final rows of every step + provisional rows of the last, the last run, the
    checkpoints' (size, carried flows, message digests in progress held) after each step)."""
    got = {t: collections.Counter() for t in TABLES + ("frames",)}
    cp = None
    lo = 0
    sizes = []
    for i, hi in enumerate(cuts):
        done = run(spark, files[lo:hi], tmp_path / "work", resume=cp, messages=messages)
        for t, c in rows(done, "final").items():
            got[t] += c
        if i == len(cuts) - 1:
            for t, c in rows(done, "provisional").items():
                got[t] += c
        d = tmp_path / f"cp{i}"
        done.checkpoint.save(str(d))
        cp = Checkpoint.load(str(d))
        sizes.append((done.checkpoint.size_bytes(), len(done.carried),
                      sum(blob.count(b"HeldDigest") for blob in cp.flows.values())))
        if drop_carried and cp.flows:
            cp.flows.pop(sorted(cp.flows)[0])
        done.cleanup()
        lo = hi
    return got, done, sizes


class OneRun:
    """What the tests read of one run over a whole set (the oracle): the set's files, the rows,
    the facts, the counts, the flows carried at the end, the checkpoint's size, the stats."""

    def __init__(self, files, whole):
        self.files = files
        self.want = rows(whole, "all")
        self.facts = facts(whole)
        self.counts = whole.counts
        self.carried = whole.carried
        self.checkpoint_bytes = whole.checkpoint.size_bytes()
        self.stats = whole.stats


@pytest.fixture(scope="module")
def one_run(spark, tmp_path_factory):
    """``one_run(src)``: ``src`` rotated into 8 files and analysed whole once per module (the
    oracle the tests of ``src`` share); ``one_run.steps(src, cuts)``: the same set in steps ending
    at ``cuts``, once per module too (:func:`in_steps`' rows and checkpoint sizes; its last run's
    facts, counts and carried flows)."""
    runs: dict = {}
    steps: dict = {}

    def get(src: str) -> OneRun:
        if src not in runs:
            d = tmp_path_factory.mktemp("one_run")
            files = rotate(src, 8, d / "set")
            whole = run(spark, files, d / "work")
            runs[src] = OneRun(files, whole)
            whole.cleanup()
        return runs[src]

    def in_steps_once(src: str, cuts) -> tuple:
        key = (src, tuple(cuts))
        if key not in steps:
            got, last, sizes = in_steps(spark, get(src).files, cuts, tmp_path_factory.mktemp("steps"))
            steps[key] = (got, facts(last), last.set_counts, last.carried, sizes)
        return steps[key]

    get.steps = in_steps_once
    return get


def assert_steps_equal_one_run(one_run, src):
    one = one_run(src)
    want = one.want
    assert sum(map(len, want.values())) > 0
    carried_at_cuts = 0
    for n, cuts in STEPS.items():
        got, last_facts, set_counts, carried, sizes = one_run.steps(src, cuts)
        for t in want:
            assert got[t] == want[t], (n, t, list((want[t] - got[t]).elements())[:1],
                                       list((got[t] - want[t]).elements())[:1])
        assert last_facts == one.facts, n
        assert set_counts == one.counts, n
        assert carried == one.carried, n
        carried_at_cuts += sum(s[1] for s in sizes[:-1])
    return one, carried_at_cuts


# --------------------------------------------------------------------------- the set in steps


@pytest.fixture(scope="module")
def proton_flood(tmp_path_factory):
    """A long-running many-delivery proton capture (2 connections, 1500 messages each: about 2,000
    packets), made as the benchmark makes its captures."""
    bench = _module(os.path.join(ROOT, "tests", "benchmarks", "benchmark.py"), "_bench_for_increments")
    path = str(tmp_path_factory.mktemp("flood") / "proton_flood.pcap")
    bench.build_capture(path, 2, 1500, shape="acked")
    return path


@pytest.fixture(scope="module")
def global_capture(tmp_path_factory):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    spark_tests = _module(os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_spark.py"),
                          "_spark_tests_for_increments")
    path = str(tmp_path_factory.mktemp("global") / "global.pcap")
    spark_tests._global_capture(path)
    return path


@pytest.mark.parametrize("sample", ["multiframe_credit_one.pcap", "messages/rhea_request_reply.pcap",
                                    "messages/azure_cbs.pcap", "loss/kernel_loss.pcap"])
def test_a_set_in_2_3_and_8_steps_equals_one_run_spark(one_run, sample):
    whole, carried = assert_steps_equal_one_run(one_run, os.path.join(SAMPLES, sample))
    assert carried > 0  # (connections span the cuts: the steps carried flows)


def test_many_deliveries_open_at_the_cuts_spark(one_run, proton_flood):
    whole, carried = assert_steps_equal_one_run(one_run, proton_flood)
    assert carried > 0
    assert sum(whole.counts.values()) > 3000


def test_sweeps_stalls_and_the_analysis_end_across_cuts_spark(one_run, global_capture):
    """The idle sweep that expires the first connection is driven by traffic in a later file, its
    stall stays open, the analysis ends before the last record: the ticks, the clock's state and
    the end reruns continue across the runs."""
    whole, carried = assert_steps_equal_one_run(one_run, global_capture)
    assert whole.stats["reruns"]["ticks"] >= 1 and whole.stats["reruns"]["end"] >= 1
    assert carried > 0 and whole.carried  # (two flows still open at the set's end)


def test_messages_with_a_multi_frame_message_in_progress_at_the_cuts_continue_and_equal_one_run_spark(spark,
                                                                                                   tmp_path):
    """--messages, the set cut inside multi-frame messages (proton's multiframe_credit_one: messages
    of several transfers): each step continues from the checkpoint the one before saved, whose
    carried flow holds the digest in progress with the bytes it took (HeldDigest), and the rows
    (the bare-message digests among them) equal one run's."""
    files = rotate(os.path.join(SAMPLES, "multiframe_credit_one.pcap"), 8, tmp_path / "set")
    whole = run(spark, files, tmp_path / "work", messages=True)
    want = rows(whole, "all")
    whole.cleanup()
    assert any('"bare_digest": "' in r for r in want["deliveries"])
    in_progress = 0
    for n, cuts in STEPS.items():
        got, last, sizes = in_steps(spark, files, cuts, tmp_path, messages=True)
        for t in want:
            assert got[t] == want[t], (n, t, list((want[t] - got[t]).elements())[:1],
                                       list((got[t] - want[t]).elements())[:1])
        assert last.set_counts == whole.counts, n
        in_progress += sum(s[2] for s in sizes[:-1])
    assert in_progress > 0  # (the case: some cut fell inside a message whose digest was in progress)


def test_the_check_fails_when_the_checkpoint_loses_a_carried_flow_spark(spark, one_run, tmp_path):
    """The comparison above can fail: a checkpoint without one of its carried flows gives other rows."""
    whole = one_run(os.path.join(SAMPLES, "multiframe_credit_one.pcap"))
    got, _, _ = in_steps(spark, whole.files, STEPS[2], tmp_path, drop_carried=True)
    assert any(got[t] != whole.want[t] for t in whole.want)


def test_checkpoint_size_follows_the_open_flows_not_the_set_spark(one_run):
    """A set whose flows all end: the checkpoint after 8 steps is the size of the one after one run
    (the set's files and 8 bytes per finished flow), whatever the steps carried between."""
    src = os.path.join(SAMPLES, "messages/rhea_request_reply.pcap")
    whole = one_run(src)
    one = whole.checkpoint_bytes
    assert not whole.carried
    *_, sizes = one_run.steps(src, STEPS[8])
    assert any(s[1] for s in sizes)
    assert abs(sizes[-1][0] - one) < 64 and sizes[-1][1] == 0
    assert max(s[0] for s in sizes if s[1] == 0) < 4096


# --------------------------------------------------------------------------- cannot continue


def _shifted(src: str, dst, seconds: float) -> str:
    subprocess.run(["editcap", "-t", str(seconds), src, str(dst)], check=True, capture_output=True)
    return str(dst)


def test_a_finished_flow_used_again_cannot_continue_spark(spark, tmp_path):
    """The same conversation an hour later (same addresses and ports): one run names it a reused
    connection (#2); a run resumed after the first one finished it cannot, and says so."""
    src = os.path.join(SAMPLES, "plain_send_receive.pcap")
    a = tmp_path / "a.pcap"
    shutil.copy(src, a)
    b = _shifted(src, tmp_path / "b.pcap", 3600)
    first = run(spark, [a], tmp_path / "work")
    assert not first.carried
    with pytest.raises(CannotContinue, match="ended in an earlier run"):
        run(spark, [b], tmp_path / "work", resume=first.checkpoint)
    first.cleanup()


def test_a_new_file_back_in_time_cannot_continue_spark(spark, tmp_path):
    src = os.path.join(SAMPLES, "credit_one.pcap")
    later = _shifted(src, tmp_path / "later.pcap", 86400)
    files = rotate(src, 2, tmp_path / "set")  # (a day before)
    first = run(spark, [later], tmp_path / "work")
    with pytest.raises(CannotContinue, match="starts before the last record"):
        run(spark, files[:1], tmp_path / "work", resume=first.checkpoint)
    with pytest.raises(CannotContinue, match="read by an earlier run"):
        run(spark, [later], tmp_path / "work", resume=first.checkpoint)
    with pytest.raises(CannotContinue, match="options differ"):
        run(spark, files[1:], tmp_path / "work", resume=first.checkpoint, idle_timeout=60)
    first.cleanup()


def test_the_sweep_clock_continues_at_a_cut_on_the_idle_gap_spark(spark, tmp_path, global_capture):
    """A cut right at the 1000 s gap: the new run's first record is where the capture's sweep clock
    ticks (and expires the idle connection); it ticks there only if the clock's state carries over."""
    d = tmp_path / "set"
    d.mkdir()
    subprocess.run(["editcap", "-c", "28", global_capture, str(d / "part.pcap")], check=True, capture_output=True)
    files = sorted(glob.glob(str(d / "part*.pcap")))
    assert len(files) == 3
    whole = run(spark, files, tmp_path / "work")
    want = rows(whole, "all")
    got, last, _ = in_steps(spark, files, [1, 3], tmp_path)
    assert got == want
    assert facts(last) == facts(whole)


def test_a_clock_step_in_an_earlier_run_spark(spark, tmp_path):
    """heartbeat with its clock stepped back 0.5 s half way (tests/support/pcapbuild.stepped_capture),
    cut at the first record after the step that is past every time before it (a cut inside the
    overlap would change the set's order: that new file cannot continue): the step, found in the
    first run, and the durations across it of the connection carried over, as one run has them."""
    import pcapbuild

    from amqp_dissect.capture.pcap import open_capture

    src = str(tmp_path / "heartbeat_stepped.pcap")
    mid = pcapbuild.stepped_capture(os.path.join(SAMPLES, "heartbeat.pcap"), "-0.5", src)
    with open(src, "rb") as f:
        ts = [r.ts for r in open_capture(f)]
    cut = next(j for j in range(mid + 1, len(ts)) if ts[j] >= max(ts[:j]))  # (0-based: packet cut + 1)
    d = tmp_path / "set"
    d.mkdir()
    files = [str(d / "a.pcap"), str(d / "b.pcap")]
    subprocess.run(["editcap", "-r", src, files[0], f"1-{cut}"], check=True, capture_output=True)
    subprocess.run(["editcap", "-r", src, files[1], f"{cut + 1}-{len(ts)}"], check=True, capture_output=True)
    whole = run(spark, files, tmp_path / "work")
    assert [s["packet"] for s in whole.clock_steps] == [mid]
    want = rows(whole, "all")
    got, last, sizes = in_steps(spark, files, [1, 2], tmp_path)
    assert sizes[0][1] == 1  # (the connection spans the cut)
    assert got == want
    assert facts(last) == facts(whole)
    with pytest.raises(CannotContinue, match="starts before"):  # (a cut inside the overlap)
        in_steps(spark, _cut_at(src, mid, tmp_path), [1, 2], tmp_path)


def _cut_at(src: str, packet: int, tmp_path) -> list[str]:
    d = tmp_path / f"at{packet}"
    d.mkdir()
    out = [str(d / "a.pcap"), str(d / "b.pcap")]
    subprocess.run(["editcap", "-r", src, out[0], f"1-{packet}"], check=True, capture_output=True)
    subprocess.run(["editcap", "-r", src, out[1], f"{packet + 1}-1000000"], check=True, capture_output=True)
    return out


def test_steps_through_sparks_shuffle_equal_one_run_spark(spark, one_run, tmp_path, global_capture, monkeypatch):
    """Stage 2 through Spark's shuffle and sort (records that travel whole, above DIRECT_STAGE2_BYTES):
    the carried flows' rows join the records there, the ticks come from a Spark job; the steps
    equal the one run of the set (made the direct way: the two ways make the same rows)."""
    from amqp_dissect.pipelines.spark import job

    whole = one_run(global_capture)
    monkeypatch.setattr(job, "DIRECT_STAGE2_BYTES", 0)
    got, last, sizes = in_steps(spark, whole.files, STEPS[2], tmp_path)
    assert last.stats["stage2_direct"] is False
    assert got == whole.want and facts(last) == whole.facts
    assert any(s[1] for s in sizes[:-1])


def test_the_samples_as_one_set_in_steps_spark(spark, tmp_path):
    """samples/ and samples/messages/ (proton, rhea, the Azure SDK; 22 files, each its own capture) as
    one set, cut between files in 2 and 3 steps: the rows, the order and the facts of one run."""
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.pipelines import archive as ar

    paths = sorted(glob.glob(os.path.join(SAMPLES, "*.pcap"))) + sorted(glob.glob(os.path.join(SAMPLES, "messages",
                                                                                              "*.pcap")))

    def first(ip):
        with open(ip[1], "rb") as f:
            r = next(iter(open_capture(f)), None)
        return ar.set_key(ip[1], r.ts if r is not None else None, ip[0])
    files = [p for _, p in sorted(enumerate(paths), key=first)]
    whole = run(spark, files, tmp_path / "work")
    want = rows(whole, "all")
    n = len(files)
    for cuts in ([n // 2, n], [n // 3, 2 * n // 3, n]):
        got, last, _ = in_steps(spark, files, cuts, tmp_path)
        assert got == want, cuts
        assert facts(last) == facts(whole) and last.set_counts == whole.counts, cuts
