"""The archive directory of ``amqp-dissect archive IN... --out DIR`` (issue 43) where the command runs
as a process of its own: against a standalone Spark cluster (a master and a worker), and with an
executor lost half way through a step of a continued run.  Each test runs the command in a
subprocess (no Spark session in this process: this file runs beside the Spark session's tests).
Inputs: real captures rotated with ``editcap`` (tests/support/archive_sets.py); oracle: one run of
the command over the whole set."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from archive_sets import ROOT, assert_same_archive, copy_set, first_time, rotated_set  # noqa: E402
from sparkneeds import require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)


def _archive(master: str, paths: list, out: str, env: dict | None = None, code: int = 0) -> subprocess.CompletedProcess:
    """``amqp-dissect archive --master MASTER PATHS --out OUT`` in a process of its own; exit
    ``code`` (0), and after a run that went well no log of Spark's left in its temporary folder
    (TMPDIR, one of its own under the out folder's parent)."""
    tmp = os.path.join(os.path.dirname(out), "tmp")
    os.makedirs(tmp, exist_ok=True)
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", master,
                          "--partitions", "3", *paths, "--out", out], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable, "TMPDIR": tmp, **(env or {})})
    assert got.returncode == code, got.stderr[-3000:]
    if code == 0:
        assert _spark_logs(tmp) == [], got.stderr[-3000:]
    return got


def _spark_logs(folder: str) -> list:
    return sorted(n for n in os.listdir(folder) if n.startswith("amqp-dissect-spark-") and n.endswith(".log"))


@pytest.fixture(scope="module")
def rotated(tmp_path_factory) -> list:
    """The set in time order (the order it grows in)."""
    return sorted(rotated_set(tmp_path_factory.mktemp("rotated")), key=first_time)


@pytest.fixture(scope="module")
def fresh_plain(rotated, tmp_path_factory) -> str:
    """One run of the command over the whole set into an empty directory (local[2])."""
    out = str(tmp_path_factory.mktemp("fresh_plain") / "archive")
    _archive("local[2]", rotated, out)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(check, seconds: float, what: str) -> None:
    import time

    end = time.time() + seconds
    while time.time() < end:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {seconds} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone Spark cluster of this machine: a master and one worker of two cores (pyspark's
    own spark-class), stopped by pid at the end."""
    import json
    import urllib.request

    import pyspark

    home = os.path.dirname(pyspark.__file__)
    logs = tmp_path_factory.mktemp("cluster")
    port, ui, wui = _free_port(), _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(logs)}
    spark_class = os.path.join(home, "bin", "spark-class")
    procs = []
    try:
        with open(logs / "master.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                           "--port", str(port), "--webui-port", str(ui)], stdout=log,
                                          stderr=subprocess.STDOUT, env=env))

        def master_up():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    return json.load(r)
            except OSError:
                return None
        _wait_for(master_up, 90, "the standalone master")
        with open(logs / "worker.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker",
                                           f"spark://127.0.0.1:{port}", "--cores", "2", "--memory", "2g",
                                           "--webui-port", str(wui), "--work-dir", str(logs / "work")],
                                          stdout=log, stderr=subprocess.STDOUT, env=env))
        _wait_for(lambda: (master_up() or {}).get("aliveworkers") == 1, 90, "the standalone worker")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_a_standalone_cluster_grows_the_archive_run_by_run_as_one_run(cluster, rotated, tmp_path):
    """The command against a standalone master (executors in a worker of their own): the set grown
    in two runs, the second continued from the first one's checkpoint, equals one run there."""
    files = copy_set(rotated, tmp_path / "set")
    fresh, out = str(tmp_path / "fresh"), str(tmp_path / "archive")
    _archive(cluster, files, fresh)
    first = _archive(cluster, files[:5], out).stdout
    second = _archive(cluster, files, out).stdout
    assert re.search(r"run 1: .*; [1-9]\d* flow\(s\) carried over", first), first
    assert "run 2: continued from the checkpoint over 3 new file(s)" in second, second
    assert_same_archive(out, fresh)


def test_an_executor_lost_half_way_through_each_step_is_run_again_and_the_archive_equals_one_run(rotated, fresh_plain,
                                                                                                tmp_path):
    """A Python worker killed (SIGKILL) after the first result of a task of each step that runs
    Spark tasks (stage 1, stage 2; with a local master the tables are written by day in the
    command's own process), in the continued run of a growing archive: Spark runs each task again
    (``local[2,2]``: two attempts) and the archive holds each row once, as one run."""
    from amqp_dissect.pipelines.spark.stages import LOSE_TASK_AT

    files = rotated  # (read only: the first run's archive names them)
    out = str(tmp_path / "archive")
    _archive("local[2,2]", files[:5], out)
    mark = tmp_path / "lost"
    steps = ["stage1", "stage2"]
    second = _archive("local[2,2]", files, out, {LOSE_TASK_AT: ",".join(steps), LOSE_TASK_AT + "_MARK": str(mark)})
    assert sorted(mark.read_text().split()) == sorted(steps)  # (a worker was lost in each step)
    assert "run 2: continued from the checkpoint" in second.stdout, second.stdout
    assert_same_archive(out, fresh_plain)

def test_spark_log_is_removed_after_a_run_that_went_well_and_kept_and_named_after_one_that_failed(rotated, tmp_path):
    """The JVM's stderr goes to TMPDIR/amqp-dissect-spark-PID.log while the command runs: a run that
    went well removes it (checked by every run above, :func:`_archive`); a run that fails once
    Spark runs (an input on a file system this Spark has no connector for: exit 3, found by Spark)
    keeps it and names it in its one line."""
    out = str(tmp_path / "archive")
    got = _archive("local[1]", [rotated[0], "s3a://amqp-dissect-no-such-bucket/x.pcap"], out, code=3)
    logs = _spark_logs(str(tmp_path / "tmp"))
    assert len(logs) == 1, logs
    log = os.path.join(str(tmp_path / "tmp"), logs[0])
    assert got.stderr.count("\n") == 1 and "s3a://" in got.stderr and got.stderr.rstrip().endswith(
        f"(Spark's log: {log})"), got.stderr
    assert not os.path.exists(os.path.join(out, "connections"))


def test_a_bug_after_spark_started_names_the_kept_log(tmp_path, monkeypatch):
    """The command's end of its session (cli.archive._ended) without a JVM: after a bug (an
    exception that is no Fail) or a one-line failure the log is kept and the line names it;
    without an error it is removed; a session the command did not start is left alone."""
    from amqp_dissect.cli import archive as cli_archive
    from amqp_dissect.cli.common import EXIT_INTERNAL, EXIT_OPEN, Fail
    from amqp_dissect.pipelines.spark_runtime import session

    stopped = []
    monkeypatch.setattr(session, "stop_session", lambda spark, end_jvm=False: stopped.append(end_jvm))
    monkeypatch.delenv("AMQP_DISSECT_DEBUG", raising=False)
    log = tmp_path / "amqp-dissect-spark-1.log"

    def started():
        log.write_text("the JVM's stderr\n")
        monkeypatch.setattr(session, "SPARK_LOG", str(log))

    started()
    err = cli_archive._ended(object(), True, KeyError("k"))
    assert isinstance(err, Fail) and err.code == EXIT_INTERNAL and log.exists()
    assert str(err) == f"internal error: KeyError: 'k' (a bug; AMQP_DISSECT_DEBUG=1 shows details; Spark's log: {log})"
    started()
    err = cli_archive._ended(object(), True, Fail(EXIT_OPEN, "x.pcap: cannot open"))
    assert err.code == EXIT_OPEN and str(err) == f"x.pcap: cannot open (Spark's log: {log})" and log.exists()
    started()
    assert cli_archive._ended(object(), True) is None and not log.exists()
    started()
    assert cli_archive._ended(object(), False) is None and log.exists()
    assert stopped == [True, True]  # (after the Fail and the run that went well; a bug ends the process)
    # a stop the run began itself once it needed Spark no more (cli_archive._EarlyEnd, the progress
    # display closed first) is waited for, not made again; the log kept after a Fail as above
    closed = []

    class Progress:
        def __exit__(self, *exc):
            closed.append(True)

    for error in (None, Fail(EXIT_OPEN, "x.pcap: cannot open")):
        started()
        ending = cli_archive._EarlyEnd(object())
        assert not ending.begun()
        ending.begin(Progress())
        ending.begin(Progress())  # (once)
        err = cli_archive._ended(object(), True, error, ending)
        assert (err is None and not log.exists()) if error is None else (err.code == EXIT_OPEN and log.exists())
    assert stopped == [True] * 4 and closed == [True, True]
