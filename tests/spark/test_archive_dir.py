"""The archive directory of ``amqp-dissect archive IN... --out DIR`` (issue 43, output side): tables
partitioned by the UTC day of each row's own time, read as one dataset by Spark, pyarrow and
pandas; a manifest of the input files that refuses a changed or vanished file (exit 2, DIR
untouched); ``--dry-run``; a run killed with SIGKILL at several steps leaves DIR as the last run
left it, and running it again equals one uninterrupted run; ``--full`` equals a fresh run; a run
with nothing new changes nothing.

Inputs: real captures rotated with ``editcap -c`` (connections and deliveries span the cuts), one
of them shifted with ``editcap -t`` so that it runs across a UTC midnight.  Oracles: the single
process's analysis of the whole set (rows and cells), the rows' own times (their day), and a
fresh run over the whole set."""

from __future__ import annotations

import datetime
import glob
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.dataset as ds
import pytest

from archive_sets import (SAMPLES, as_set, assert_same_archive, copy_set, dataset, first_time,  # noqa: E402
                          rotated_set)
from sparkneeds import cells, require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

from amqp_dissect.pipelines.archive.directory import (DATE_COLUMNS, KILL_AT, MANIFEST, NULL_DATE,  # noqa: E402
                                                      ArchiveDir, archive_dataset, read_archive_pandas)
from amqp_dissect.pipelines.spark.api import read_archive  # noqa: E402
from amqp_dissect.pipelines.runs.local import read_analysis  # noqa: E402
from amqp_dissect.pipelines.spark.archive_dir import run_archive_dir, table_rows  # noqa: E402
from amqp_dissect.pipelines.spark.summaries import SUMMARIES  # noqa: E402
from amqp_dissect.results.schema import TABLES, names  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = dict(partitions=3, messages=True)  # (every run reads the messages: the deliveries' message_id)


@pytest.fixture(scope="module")
def rotated(tmp_path_factory) -> list:
    return rotated_set(tmp_path_factory.mktemp("rotated"))


@pytest.fixture(scope="module")
def fresh(spark, rotated, tmp_path_factory) -> str:
    """One run over the whole set into an empty directory."""
    out = str(tmp_path_factory.mktemp("fresh") / "archive")
    res = run_archive_dir(spark, rotated, out, **JOB)
    assert res["run"] == 1 and res["plan"].full
    return out


def _snapshot(out: str) -> dict:
    """Every file and link under ``out`` with its size and modification time (and link targets)."""
    got = {}
    for d, dirs, files in os.walk(out):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            got[os.path.relpath(p, out)] = (st.st_size, st.st_mtime_ns, os.readlink(p) if os.path.islink(p) else None)
    return got


def _day(ts) -> str:
    if ts is None or pd.isna(ts):
        return None
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=int(pd.Timestamp(ts).value // 86_400_000_000_000))
            ).isoformat()


def _row_day(row, table: str) -> str:
    """The UTC day of the first non-null of the table's time columns, or the null partition."""
    for c in DATE_COLUMNS[table]:
        day = _day(row[c])
        if day is not None:
            return day
    return NULL_DATE


def test_a_row_without_a_time_goes_to_the_day_its_connection_began():
    """A link only inferred after a loss has no attach or detach time: its connection's day (the
    rule docs/archives-spark.md states); without that either, Hive's null partition."""
    import pyarrow as pa

    from amqp_dissect.pipelines.spark.tables import row_days

    ts = pa.timestamp("us", tz="UTC")
    t = pa.table({"connection": ["a", "a", "b", "c"],
                  "attach_time": pa.array([86_400_000_000 * 3 + 5, None, None, None], ts),
                  "attached_time": pa.array([None, None, None, -1], ts),
                  "detach_time": pa.array([None, 86_400_000_000 * 5, None, None], ts)})
    days = row_days(t, DATE_COLUMNS["links"], {"b": "2026-11-22"})
    assert days == ["1970-01-04", "1970-01-06", "2026-11-22", "1969-12-31"]
    assert row_days(t.slice(2, 1), DATE_COLUMNS["links"], {}) == [NULL_DATE]


def test_the_partitions_found_by_column_are_each_rows_own_day():
    """day_partitions (numpy over the columns) gives every row the day a row-by-row reading gives
    (the oracle: the first time of the row's columns, else its connection's day, else Hive's null
    partition), its names sorted and distinct; every row timed and of one day: no codes (the range
    written whole)."""
    import datetime
    import random

    import pyarrow as pa

    from amqp_dissect.pipelines.spark.tables import DAY_MICROS, day_partitions

    ts = pa.timestamp("us", tz="UTC")
    epoch = datetime.date(1970, 1, 1)
    rng = random.Random(11)
    for n in (1, 2, 50, 3000):
        for spread in (0, 1, 4):
            base = rng.choice([0, -3, 19_700]) * DAY_MICROS
            cols = {c: [None if rng.random() < 0.3 else base + rng.randrange(-spread * DAY_MICROS, (spread + 1) * DAY_MICROS)
                        for _ in range(n)] for c in ("attach_time", "attached_time", "detach_time")}
            conns = [rng.choice("abcd") for _ in range(n)]
            known = {"a": "2026-11-22", "b": "1999-01-01"}
            t = pa.table({"connection": conns, **{c: pa.array(v, ts) for c, v in cols.items()}})
            want = []
            for i in range(n):
                us = next((cols[c][i] for c in ("attach_time", "attached_time", "detach_time") if cols[c][i] is not None),
                          None)
                want.append((epoch + datetime.timedelta(days=us // DAY_MICROS)).isoformat() if us is not None
                            else known.get(conns[i], NULL_DATE))
            got = day_partitions(t, DATE_COLUMNS["links"], known)
            assert got.names == sorted(set(want))
            assert (got.names * n if got.codes is None else [got.names[c] for c in got.codes.tolist()]) == want
            timed = all(any(cols[c][i] is not None for c in cols) for i in range(n))
            assert got.codes is None if timed and len(set(want)) == 1 else len(set(want)) == 1 or got.codes is not None


def test_tables_are_partitioned_by_the_day_of_their_rows_and_read_whole_by_spark_pyarrow_pandas(spark, rotated,
                                                                                               fresh):
    local = read_analysis(rotated, messages=True)
    days_seen = set()
    for t in TABLES:
        table_dir = os.path.join(fresh, t)
        assert os.path.islink(table_dir)  # (into the published version)
        lp = local_frame = getattr(local, t)
        for f in glob.glob(os.path.join(table_dir, "**", "*.parquet"), recursive=True):
            if len(lp):
                assert os.path.basename(os.path.dirname(f)).startswith("date="), f
            else:  # a table without rows: one file of its columns, no day
                assert f == os.path.join(table_dir, "part-empty.parquet")
        # the single process's rows, stable-sorted by their day: the archive's order read whole
        days = [_row_day(r, t) for _, r in lp.iterrows()]
        local_frame = lp.assign(_day=days).sort_values("_day", kind="stable").drop(columns="_day")
        local_frame = local_frame.reset_index(drop=True)
        pdf = pd.read_parquet(table_dir)
        arrow = dataset(fresh, t)
        sdf = spark.read.parquet("file://" + table_dir)
        assert list(pdf.columns) == list(arrow.columns) == list(sdf.columns) == names(t) + ["date"] * bool(len(lp)), t
        assert len(pdf) == len(arrow) == sdf.count() == len(local_frame), t
        for c in names(t):
            assert cells(pdf[c]) == cells(local_frame[c]), (t, c)
            assert cells(arrow[c]) == cells(local_frame[c]), (t, c)
        # each row in the partition of its own time's UTC day
        if not len(lp):
            continue
        got_days = [NULL_DATE if pd.isna(d) else str(d) for d in pdf["date"]]
        assert got_days == sorted(days), t
        spark_days = sorted(NULL_DATE if r.date is None else r.date.isoformat() for r in sdf.select("date").collect())
        assert spark_days == sorted(days), t
        days_seen.update(days)
    assert {"2026-11-22", "2026-11-23", "2026-11-24"} <= days_seen  # (a capture across midnight)
    for name in SUMMARIES:  # whole, not partitioned
        assert not glob.glob(os.path.join(fresh, name, "date=*"))
        assert len(pd.read_parquet(os.path.join(fresh, name)).columns) > 2
    # the readers of an archive, and the queries docs/archives-spark.md shows: one day, one address,
    # one message-id
    ld = local.deliveries
    on_day = [_row_day(r, "deliveries") == "2026-11-23" for _, r in ld.iterrows()]
    assert 0 < sum(on_day) < len(ld)
    t = read_archive(spark, fresh)
    assert set(t) == set(TABLES) | set(SUMMARIES)
    assert t["deliveries"].where("date = '2026-11-23'").count() == sum(on_day)
    d = archive_dataset(fresh, "deliveries")
    assert d.to_table(filter=ds.field("date") == datetime.date(2026, 11, 23)).num_rows == sum(on_day)
    address = ld.address.dropna().iloc[-1]
    got = read_archive_pandas(fresh, "deliveries", columns=["delivery_id", "date"],
                              filter=ds.field("address") == address)
    assert len(got) == int((ld.address == address).sum()) > 0
    mid = ld.message_id.dropna().iloc[-1]
    assert t["deliveries"].where(t["deliveries"].message_id == mid).count() == int((ld.message_id == mid).sum()) > 0
    assert spark.sql(f"select count(*) n from parquet.`file://{fresh}/deliveries` where date = '2026-11-23'"
                     ).collect()[0].n == sum(on_day)


@pytest.fixture(scope="module")
def grown(spark, rotated, tmp_path_factory):
    """An archive grown in two runs (4 files, then all 8), over its own copies of the files."""
    base = tmp_path_factory.mktemp("grown")
    files = copy_set(rotated, base / "set")
    out = str(base / "archive")
    first = run_archive_dir(spark, files[:4], out, **JOB)
    first["digests in progress"] = _digests_in_progress(out, 1)  # (its version goes with the next run)
    second = run_archive_dir(spark, files, out, **JOB)
    return out, files, first, second


def test_a_set_grown_in_two_runs_equals_one_run_and_a_run_with_nothing_new_changes_nothing(spark, grown, fresh):
    out, files, first, second = grown
    assert [len(first["plan"].new), len(second["plan"].new), len(second["plan"].unchanged)] == [4, 4, 4]
    assert second["run"] == 2
    # the cut falls inside a multi-frame message whose digest (--messages) was in progress: the
    # first run carried its flow with the bytes that digest had taken (HeldDigest); the second run
    # is a full one all the same, and says why: its new files (by name) go back in time
    assert first["carried"] == 1 and first["checkpoint_bytes"] > 0
    assert first["digests in progress"] > 0  # (a scan's digest mid-message in the saved state)
    assert not second["resumed"] and "starts before the last record" in second["plan"].why_full
    assert_same_archive(out, fresh)
    manifest = ArchiveDir(out).manifest()
    assert [r["run"] for r in manifest["runs"]] == [1, 2]
    assert sorted(f["path"] for f in manifest["files"]) == sorted(files)
    assert os.listdir(os.path.join(out, "_archive", "versions")) == ["run-000002"]  # (the one before removed)
    before = _snapshot(out)
    again = run_archive_dir(spark, files, out, **JOB)
    assert again["run"] is None and not again["plan"].new and len(again["plan"].unchanged) == 8
    assert _snapshot(out) == before


def _digests_in_progress(out: str, run: int) -> int:
    """The message digests in progress (a HeldDigest with its bytes) in the carried flows' states of
    the checkpoint of run ``run`` of the archive ``out`` (read before the next run removes its version)."""
    from amqp_dissect.pipelines.archive.checkpoint import Checkpoint
    from amqp_dissect.pipelines.archive.directory import CHECKPOINT

    version = os.path.join(out, "_archive", "versions", f"run-{run:06d}")
    if not os.path.isdir(version):
        return -1
    cp = Checkpoint.load(os.path.join(version, CHECKPOINT))
    return sum(blob.count(b"HeldDigest") for blob in cp.flows.values())


def _cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", "local[2]",
                           "--partitions", "3", "--messages", *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_a_changed_or_vanished_file_or_other_options_are_refused_and_dry_run_writes_nothing(grown, tmp_path,
                                                                                           capsys):
    from amqp_dissect.cli import main as m

    out, files, _, _ = grown
    before = _snapshot(out)
    # a changed file: its content (same size and time) -> exit 2 naming it, DIR untouched
    victim = files[6]
    st = os.stat(victim)
    data = open(victim, "rb").read()
    with open(victim, "r+b") as f:
        f.seek(len(data) - 1)
        f.write(bytes([data[-1] ^ 0xFF]))
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert m.main(["archive", *files, "--out", out, "--messages"]) == m.EXIT_USAGE
    o, e = capsys.readouterr()
    assert e.count("\n") == 1 and victim in e and "changed" in e and f"changed: {victim} (content differs)" in o
    with open(victim, "wb") as f:
        f.write(data)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    # a vanished file -> exit 2 naming it
    assert m.main(["archive", *files[:3], *files[4:], "--out", out, "--messages"]) == m.EXIT_USAGE
    o, e = capsys.readouterr()
    assert e.count("\n") == 1 and files[3] in e and f"vanished: {files[3]}" in o
    # other options -> exit 2, telling to use --full
    assert m.main(["archive", *files, "--out", out, "--messages", "--frames"]) == m.EXIT_USAGE
    assert "--full" in capsys.readouterr().err
    assert _snapshot(out) == before
    # --dry-run: the plan, nothing written (a new file, and --full)
    extra = copy_set([os.path.join(SAMPLES, "drain.pcap")], os.path.dirname(files[0]))
    try:
        assert m.main(["archive", *files, *extra, "--out", out, "--messages", "--dry-run"]) == m.EXIT_OK
        o = capsys.readouterr().out
        assert "files: 1 new, 8 unchanged, 0 changed, 0 vanished" in o and "run: " in o and "--dry-run" in o
        assert m.main(["archive", *files, *extra, "--out", out, "--dry-run", "--full"]) == m.EXIT_OK
        o = capsys.readouterr().out
        assert "files: 1 new, 8 unchanged, 0 changed, 0 vanished" in o and "run: full, over all 9 file(s) (--full)" in o
    finally:
        os.unlink(extra[0])
    assert _snapshot(out) == before
    empty = str(tmp_path / "never")
    assert m.main(["archive", *files, "--out", empty, "--dry-run"]) == m.EXIT_OK
    assert "files: 8 new" in capsys.readouterr().out and not os.path.exists(empty)


KILLED_AT = ("analysed", "staged", "partitioned", "summaries", "versioned", "published")  # (the run's order)


def test_a_run_killed_at_each_step_leaves_the_last_run_and_running_again_equals_one_run(spark, rotated, fresh,
                                                                                     tmp_path):
    """An archive of the first half of the set (one run) grown by the whole set, the run killed
    (SIGKILL of the command's process) at each step in turn, each kill in the run that runs again
    after the one before: until the commit, DIR stays as the committed run left it, file for file
    (the killed run's files aside, in staging, which the next run clears); killed after the commit,
    DIR is the new run's (that run ran again after a kill before the commit, and went to its end:
    it equals one uninterrupted run); run once more, it finds nothing new."""
    files = rotated  # (read only: the archive names them)
    out = str(tmp_path / "archive")
    run_archive_dir(spark, files[:4], out, **JOB)
    committed = _snapshot(out)
    tables = {t: as_set(dataset(out, t)) for t in TABLES + SUMMARIES}
    for step in KILLED_AT:
        got = _cli(*files, "--out", out, env={KILL_AT: step})
        assert got.returncode == -9, (step, got.stderr[-2000:])
        assert os.path.isdir(os.path.join(out, "_archive", "staging")), step  # (the killed run's files, aside)
        if step == "published":  # killed after the commit: DIR is the new run's
            assert_same_archive(out, fresh)
            continue
        now = _snapshot(out)  # DIR as the last committed run left it, file for file
        assert {k: v for k, v in now.items() if k.startswith(os.path.join("_archive", "current"))
                or not k.startswith("_archive")} == \
               {k: v for k, v in committed.items() if k.startswith(os.path.join("_archive", "current"))
                or not k.startswith("_archive")}, step
        for t, df in tables.items():
            pd.testing.assert_frame_equal(as_set(dataset(out, t)), df, obj=f"{step}: {t}")
    again = run_archive_dir(spark, files, out, **JOB)
    assert again["run"] is None  # (the run killed after its commit was whole)
    assert_same_archive(out, fresh)
    assert not os.path.exists(os.path.join(out, "_archive", "staging"))
    assert len(os.listdir(os.path.join(out, "_archive", "versions"))) == 1


def test_full_equals_a_fresh_run_and_the_command_says_what_it_did(spark, grown, fresh, capsys):
    from amqp_dissect.cli import main as m

    out, files, _, _ = grown
    assert m.main(["archive", *files, "--out", out, "--full", "--messages", "--partitions", "3"]) == m.EXIT_OK
    o = capsys.readouterr().out
    assert o.startswith("files: 0 new, 8 unchanged, 0 changed, 0 vanished\nrun: full, over all 8 file(s) (--full)\n")
    assert re.search(r"\nrun 3: full, over all 8 input\(s\) \(--full\); 0 flow\(s\) carried over to the next run, "
                     r"checkpoint \d+ bytes\n", o)
    assert "\nrows written by this run: connections 2, sessions 2, links 4, deliveries " in o
    assert "\ntime per stage: start in " in o and ", plan in " in o and ", checkpoint in " in o
    assert ", stage1 in " in o and ", partition in " in o and ", publish in " in o
    assert "\ntables: connections 2, " in o
    assert_same_archive(out, fresh)
    assert os.listdir(os.path.join(out, "_archive", "versions")) == ["run-000003"]
    assert os.path.exists(os.path.join(out, "_archive", "versions", "run-000003", MANIFEST))


@pytest.fixture(scope="module")
def fresh_plain(spark, rotated, tmp_path_factory) -> str:
    """One run over the whole set into an empty directory, without --messages."""
    out = str(tmp_path_factory.mktemp("fresh_plain") / "archive")
    run_archive_dir(spark, rotated, out, partitions=3)
    return out


@pytest.mark.parametrize("steps", [3, 8])
def test_a_set_grown_in_three_and_eight_runs_goes_on_from_each_checkpoint_and_equals_one_run(spark, rotated,
                                                                                           fresh_plain, tmp_path,
                                                                                           steps):
    """Without --messages (no digest in progress at a cut): every run after the first continues
    from the checkpoint of the one before, decoding its new files only, and the archive equals
    one fresh run over the whole set."""
    job = dict(partitions=3)
    fresh = fresh_plain
    files = sorted(copy_set(rotated, tmp_path / "set"), key=first_time)  # (the set grows in time)
    out = str(tmp_path / "archive")
    cuts = [len(files) * (i + 1) // steps for i in range(steps)]
    results, table_jobs, partition_jobs, summary_jobs, after_done = [], [], [], [], []
    for n in cuts:
        counted = _jobs_per_step(spark)
        done_at: list = []  # (the jobs run when the run said it needs Spark no more: the command stops it there)
        with counted as jobs:
            results.append(run_archive_dir(spark, files[:n], out, spark_done=lambda: done_at.append(counted._count()),
                                           **job))
        table_jobs.append(jobs["tables"])
        partition_jobs.append(jobs["partition"])
        summary_jobs.append(jobs["summaries"])
        after_done.append([counted._count() - c for c in done_at])
        # the rows it says the published tables hold (counted by the analysis) are the files' own
        assert results[-1]["counts"] == table_rows(out, list(results[-1]["counts"]))
    assert [r["resumed"] for r in results] == [False] + [True] * (steps - 1), [r["plan"].why_full for r in results]
    assert any(r["carried"] for r in results[:-1])  # (connections ran on across the cuts)
    # with a local master, a run's final and provisional rows (flows carried over) are written by
    # the run's own process (no Spark job), as a run's rows that are all final
    assert spark.sparkContext.master.startswith("local[")
    assert table_jobs == [0] * steps, (table_jobs, [r["carried"] for r in results])
    # partitioned by day at once: no job of its own partitions them
    assert partition_jobs == [0] * steps, partition_jobs
    # the summaries are computed by the run's own process too (no Spark job), after it said, once
    # and after its last Spark job (stage 2's, or its reruns'), that it needs Spark no more
    assert summary_jobs == [0] * steps, summary_jobs
    assert after_done == [[0]] * steps, after_done
    assert [len(r["plan"].new) for r in results] == [b - a for a, b in zip([0] + cuts, cuts)]
    assert_same_archive(out, fresh)




def test_the_summaries_a_run_computes_itself_are_the_files_the_tasks_write(spark, fresh_plain, tmp_path):
    """A run of an archive directory computes its summaries in its own process (two threads); the
    Spark tasks of write_summaries_local (what a local run_archive output uses) write the same
    files, byte for byte, from the same tables."""
    from amqp_dissect.pipelines.spark.summaries import write_summaries_local

    version = os.path.realpath(os.path.join(fresh_plain, "_archive", "current"))
    copy = str(tmp_path / "version")
    shutil.copytree(version, copy)
    for name in SUMMARIES:
        shutil.rmtree(os.path.join(copy, name))
    rows = write_summaries_local(spark, copy)
    assert sorted(rows) == sorted(SUMMARIES) and sum(rows.values()) > 0
    for name in SUMMARIES:
        with open(os.path.join(version, name, "part-00000.parquet"), "rb") as a, \
                open(os.path.join(copy, name, "part-00000.parquet"), "rb") as b:
            assert a.read() == b.read(), name


def test_the_tables_a_run_writes_itself_are_the_files_the_tasks_write(spark, rotated, tmp_path):
    """With a local master a run of an archive directory writes its tables partitioned by day in
    its own process (write_dated_tables_here, two threads); the Spark tasks of
    write_dated_tables_local (other masters) write the same files, byte for byte, with the same
    rows, from the same stage-2 rows: here a run over the first files of the set, whose carried
    connections' rows are written apart (provisional)."""
    import time

    from amqp_dissect.capture.tcp import IDLE_TIMEOUT
    from amqp_dissect.pipelines.archive import DEFAULT_SPLIT_SIZE
    from amqp_dissect.pipelines.spark.job import _direct_dir, analyse
    from amqp_dissect.pipelines.spark.tables import (run_connection_days, write_dated_tables_here,
                                                     write_dated_tables_local)

    files = sorted(rotated, key=first_time)[:5]
    done = analyse(spark, files, "file://" + str(tmp_path / "work"), t0=time.time(), split_size=DEFAULT_SPLIT_SIZE,
                   frames=False, partitions=3, ports=(), idle_timeout=IDLE_TIMEOUT, keylog=None, messages=True)
    here, tasks = str(tmp_path / "here"), str(tmp_path / "tasks")
    try:
        assert done.carried  # (connections run on across the cut: provisional rows)
        dirs = [_direct_dir(p) for p in done.layer_paths]
        days = run_connection_days(dirs, done.excluded, done.counts, done.nparts)
        by_here = write_dated_tables_here(dirs, done.excluded, done.counts, done.nparts, here, 1, True, days, 2)
        by_tasks = write_dated_tables_local(spark, dirs, done.excluded, done.counts, done.nparts, tasks, 1, True, days)
    finally:
        done.cleanup(False)
    assert by_here == by_tasks and sum(by_here[0].values()) > 0 and sum(by_here[1].values()) > 0

    def tree(root):
        return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
    assert tree(here) == tree(tasks) and any(n.endswith(".provisional.parquet") for n in tree(here))
    for name in tree(here):
        with open(os.path.join(here, name), "rb") as a, open(os.path.join(tasks, name), "rb") as b:
            assert a.read() == b.read(), name


class _jobs_per_step:
    """``with _jobs_per_step(spark) as jobs``: step name -> the Spark jobs that ran in it (the
    step's end marked by the job's clock, :data:`~amqp_dissect.pipelines.spark.job.MARK_HOOKS`;
    jobs counted by Spark's status tracker)."""

    def __init__(self, spark):
        self.tracker = spark.sparkContext.statusTracker()
        self.jobs: dict = {}

    def _count(self) -> int:  # (job ids count up from 0; the tracker keeps the last thousand)
        return max(self.tracker.getJobIdsForGroup(), default=-1) + 1

    def _hook(self, name: str) -> None:
        now = self._count()
        self.jobs[name] = self.jobs.get(name, 0) + now - self._last
        self._last = now

    def __enter__(self) -> dict:
        from amqp_dissect.pipelines.spark import job

        self._last = self._count()
        job.MARK_HOOKS.append(self._hook)
        return self.jobs

    def __exit__(self, *exc) -> None:
        from amqp_dissect.pipelines.spark import job

        job.MARK_HOOKS.remove(self._hook)


def test_the_checkpoint_loaded_while_the_jvm_starts_is_taken_only_while_its_files_are_the_same(grown, tmp_path):
    """The command loads the committed run's checkpoint while the JVM starts (prefetch_checkpoint);
    the run takes that one only if the checkpoint's files are still those it was loaded from, and
    loads them again otherwise (a run published in between)."""
    import types

    from amqp_dissect.pipelines.spark import archive_dir as A

    out = str(tmp_path / "archive")
    shutil.copytree(grown[0], out, symlinks=True)
    archive = ArchiveDir(out)
    plan = types.SimpleNamespace(manifest=archive.manifest(), full=False, why_full=None)
    A.prefetch_checkpoint(out)
    assert len(A._PREFETCHED) == 1
    ready = next(iter(A._PREFETCHED.values()))
    assert A._load_checkpoint(plan, archive) is ready and not A._PREFETCHED  # (taken once)
    again = A._load_checkpoint(plan, archive)
    assert again is not ready and again.files == ready.files
    A.prefetch_checkpoint(out)
    ready = next(iter(A._PREFETCHED.values()))
    where = os.path.join(archive.current_version(), plan.manifest["checkpoint"])
    name = sorted(os.listdir(where))[0]
    st = os.stat(os.path.join(where, name))
    os.utime(os.path.join(where, name), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    fresh_load = A._load_checkpoint(plan, archive)
    assert fresh_load is not ready and fresh_load.files == ready.files
    A._PREFETCHED.clear()
