"""The archive directory of ``amqp-dissect archive IN... --out DIR`` (issue 43) where the command runs
as a process of its own: against a standalone Spark cluster (a master and a worker), and with an
executor lost half way through a step of a continued run.  Each test runs the command in a
subprocess (no Spark session in this process: this file runs beside the Spark session's tests).
Inputs: real captures rotated with ``editcap`` (tests/support/archive_sets.py); oracle: one run of
the command over the whole set."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from archive_sets import ROOT, assert_same_archive, copy_set, first_time, rotated_set  # noqa: E402
from sparkneeds import require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)


def _archive(master: str, paths: list, out: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``amqp-dissect archive --master MASTER PATHS --out OUT`` in a process of its own; exit 0."""
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", master,
                          "--partitions", "3", *paths, "--out", out], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})})
    assert got.returncode == 0, got.stderr[-3000:]
    return got


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


@pytest.fixture(scope="module")
def first_five(rotated, tmp_path_factory) -> str:
    """An archive of the set's first five files (one run), which each test below grows in a copy
    of its own (an archive directory names its inputs by path, its own files relative to itself)."""
    out = str(tmp_path_factory.mktemp("first_five") / "archive")
    _archive("local[2,2]", rotated[:5], out)
    return out


@pytest.mark.parametrize("step", ["stage1", "stage2", "tables", "partition"])
def test_an_executor_lost_half_way_through_a_step_is_run_again_and_the_archive_equals_one_run(rotated, fresh_plain,
                                                                                            first_five, tmp_path,
                                                                                            step):
    """A Python worker killed (SIGKILL) after the first result of a task, in the continued run of a
    growing archive: Spark runs the task again (``local[2,2]``: two attempts) and the archive holds
    each row once, as one run."""
    from amqp_dissect.pipelines.spark.stages import LOSE_TASK_AT

    files = rotated  # (read only: the first run's archive names them)
    out = str(tmp_path / "archive")
    shutil.copytree(first_five, out, symlinks=True)
    mark = tmp_path / "lost"
    second = _archive("local[2,2]", files, out, {LOSE_TASK_AT: step, LOSE_TASK_AT + "_MARK": str(mark)})
    assert mark.exists()  # (a worker was lost)
    assert "run 2: continued from the checkpoint" in second.stdout, second.stdout
    assert_same_archive(out, fresh_plain)
