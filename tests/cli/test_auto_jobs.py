"""``-j 0`` of ``report`` and the tables: a process per idle CPU (at most 4) for capture files of
8 MiB or more, one otherwise; the output is the single process's (the oracle: ``-j 1``).  Not the
default (one process): past the limits of -j's identity the output would depend on the machine."""

from __future__ import annotations

import os

import pytest

from amqp_dissect.cli import run as cli_run
from amqp_dissect.cli.main import main

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples")
MULTI = os.path.join(SAMPLES, "multi_session.pcap")


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _file(tmp_path, name, size):
    p = tmp_path / name
    with open(p, "wb") as f:
        f.truncate(size)  # (sparse: only the size is read)
    return str(p)


def test_the_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(cli_run, "_busy", lambda: 0)
    big = _file(tmp_path, "big.pcap", cli_run.AUTO_JOBS_MIN_BYTES)
    small = _file(tmp_path, "small.pcap", cli_run.AUTO_JOBS_MIN_BYTES - 1)
    half = _file(tmp_path, "half.pcap", cli_run.AUTO_JOBS_MIN_BYTES // 2)

    class Run:  # (what jobs_for reads of a CaptureRun)
        def __init__(self, inputs, live=None):
            self.inputs, self.live = inputs, live

    want = max(1, min(_cpus(), cli_run.AUTO_JOBS_MAX))
    assert cli_run.jobs_for(Run([big]), 0) == want
    assert cli_run.jobs_for(Run([small]), 0) == 1
    assert cli_run.jobs_for(Run([half, half]), 0) == want  # (a capture set: its files together)
    assert cli_run.jobs_for(Run(["-"]), 0) == 1
    assert cli_run.jobs_for(Run([big], live=object()), 0) == 1
    assert cli_run.jobs_for(Run([small]), 3) == 3  # (asked: as asked)
    # CPUs that other tasks keep busy are not counted; never fewer than one process
    monkeypatch.setattr(cli_run, "_busy", lambda: 1)
    assert cli_run.jobs_for(Run([big]), 0) == max(1, min(_cpus() - 1, cli_run.AUTO_JOBS_MAX))
    monkeypatch.setattr(cli_run, "_busy", lambda: 64)
    assert cli_run.jobs_for(Run([big]), 0) == 1
    assert cli_run.jobs_for(Run([big]), 2) == 2


def test_busy_reads_the_running_tasks(monkeypatch):
    import builtins
    import io

    looks = iter(["0.50 0.40 0.30 3/200 999\n", "0.50 0.40 0.30 2/200 999\n", "0.50 0.40 0.30 5/200 999\n"])
    real_open = builtins.open

    def fake_open(path, *a, **kw):
        return io.StringIO(next(looks)) if path == "/proc/loadavg" else real_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", fake_open)
    assert cli_run._busy() == 1  # (the least of three looks, less this process)
    monkeypatch.setattr(builtins, "open", lambda *a, **kw: (_ for _ in ()).throw(OSError("no /proc")))
    assert cli_run._busy() == 0


@pytest.fixture
def workers(monkeypatch, parallel_runs):
    """Two CPUs, two processes at most; the runs through -j's workers (tests/conftest.py)."""
    monkeypatch.setattr(cli_run, "AUTO_JOBS_MAX", 2)
    monkeypatch.setattr(cli_run.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(cli_run, "_busy", lambda: 0)
    return parallel_runs


@pytest.mark.parametrize("args", [["report"], ["report", "-T", "json"], ["links", "-T", "csv"],
                                  ["deliveries", "-T", "jsonl"]])
def test_j0_splits_a_large_file_and_gives_the_same_output(tmp_path, monkeypatch, workers, args):
    suffix = "txt"
    one = tmp_path / f"one.{suffix}"
    assert main(args + ["-j", "1", "-o", str(one), MULTI]) == 0
    assert workers == []
    monkeypatch.setattr(cli_run, "AUTO_JOBS_MIN_BYTES", os.path.getsize(MULTI))
    auto = tmp_path / f"auto.{suffix}"
    assert main(args + ["-o", str(auto), MULTI]) == 0
    assert workers == []  # (the default: one process, whatever the size)
    assert main(args + ["-j", "0", "-o", str(auto), MULTI]) == 0
    assert workers == [2]
    assert auto.read_bytes() == one.read_bytes()


def test_a_small_file_and_html_use_one_process(tmp_path, monkeypatch, workers):
    assert main(["report", "-j", "0", "-o", str(tmp_path / "r.txt"), MULTI]) == 0
    monkeypatch.setattr(cli_run, "AUTO_JOBS_MIN_BYTES", 0)
    assert main(["report", "-j", "0", "-T", "html", "-o", str(tmp_path / "r.html"), MULTI]) == 0
    assert workers == []
