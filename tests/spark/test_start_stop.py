"""The ``archive`` command's start and end (issue 26): the JVM starts while the driver imports
what it needs, and the command ends its JVM before it exits (nothing of it left holding the
command's output)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "outcomes.pcap")


def _python(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, **kw)


def test_sizes_are_parsed_without_importing_the_job():
    # the CLI checks --split-size before the JVM starts: a light module, not the job's
    got = _python("""
        import sys
        from amqp_dissect.pipelines.spark_runtime.fs import parse_size
        from amqp_dissect.pipelines import spark
        assert parse_size("64m") == 64 << 20 and spark.parse_size("1k") == 1024 and parse_size("4096") == 4096
        print(sorted(m for m in ("amqp_dissect.pipelines.spark.job", "pyspark.sql", "pandas") if m in sys.modules))
    """)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "[]"


def test_the_session_starts_before_the_drivers_imports_and_its_failure_is_raised_in_the_command(tmp_path):
    # the session (the JVM) is started in a thread first; pandas (pyspark's converters import it),
    # the job and its steps are imported meanwhile; what the start raises reaches the command
    got = _python(f"""
        import sys
        from amqp_dissect.pipelines.spark_runtime import session

        def spark_session(**kw):
            print("at the session's start:", sorted(m for m in ("pandas", "amqp_dissect.pipelines.spark.job")
                                                   if m in sys.modules), flush=True)
            raise RuntimeError("no JVM today")

        session.spark_session = spark_session
        from amqp_dissect.cli import main as m
        rc = m.main(["archive", {SAMPLE!r}, "--out", {str(tmp_path / "out")!r}])
        print("exit", rc, "; then imported:", "amqp_dissect.pipelines.spark.job" in sys.modules)
    """)
    assert got.returncode == 0, got.stderr
    # (the archive directory's plan first: made before Spark starts, as --dry-run's)
    assert got.stdout.splitlines() == ["files: 1 new, 0 unchanged, 0 changed, 0 vanished",
                                       "run: full, over all 1 file(s) (the archive's first run)",
                                       "at the session's start: []", "exit 1 ; then imported: True"]
    assert "no JVM today" in got.stderr
    assert not (tmp_path / "out").exists()


def test_archive_ends_its_jvm_before_it_exits_and_runs_the_atexit_handlers(tmp_path):
    # before, the JVM exited only once the command had (its stdin pipe closed), still holding the
    # command's stdout: a reader of the output waited for it.  Now nothing holds it at the exit,
    # and the stop prints no stack trace (the accumulator server's end of file)
    # (the console entry, with an atexit handler of its caller's: the command's quick exit runs it)
    entry = ("import atexit, sys; atexit.register(print, 'atexit ran', file=sys.stderr); "
             "from amqp_dissect.cli.main import entry; entry()")
    p = subprocess.Popen([sys.executable, "-c", entry, "archive", "--master", "local[2]", SAMPLE,
                          "--out", str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    fd = p.stdout.fileno()
    os.set_blocking(fd, False)
    out = b""
    while p.poll() is None:  # (the output is a few lines: the pipe never fills)
        time.sleep(0.05)
    rc = p.returncode
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break  # end of file: no process holds the pipe any more
            out += chunk
    except BlockingIOError:
        pytest.fail("a process of the command (its JVM) still holds its stdout after it exited")
    err = p.stderr.read().decode()
    assert rc == 0, err
    assert b"tables: connections" in out
    assert "Traceback" not in err and "Exception" not in err, err
    assert err.splitlines()[-1:] == ["atexit ran"], err


def test_a_session_after_one_stopped_with_its_jvm_starts_a_new_jvm():
    got = _python("""
        from amqp_dissect.pipelines.spark_runtime import session
        from pyspark import SparkContext

        s = session.spark_session(master="local[1]")
        assert s.sparkContext.parallelize(range(4), 2).map(lambda x: x + 1).sum() == 10
        proc = SparkContext._gateway.proc
        session.stop_session(s, end_jvm=True)
        assert proc.poll() is not None and SparkContext._gateway is None
        s = session.spark_session(master="local[1]")
        assert SparkContext._gateway.proc is not proc
        assert s.sparkContext.parallelize(range(4), 2).map(lambda x: x * 2).sum() == 12
        session.stop_session(s, end_jvm=True)
        print("ok")
    """)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "ok"
    assert "Traceback" not in got.stderr, got.stderr


def test_the_command_in_a_fresh_process_writes_what_the_job_writes_on_a_made_session(spark, tmp_path, capsys):
    # a fresh process runs its job's first steps while the JVM still makes the SparkSession
    # (PendingSession): the same tables and summaries, row for row, as a run on a session made first
    import pandas as pd

    from amqp_dissect.cli import main as m
    from amqp_dissect.pipelines.spark import SUMMARIES, TABLES

    files = [os.path.join(ROOT, "samples", n) for n in ("outcomes.pcap", "drain.pcap")]
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", "local[2]", *files,
                          "--out", str(tmp_path / "fresh")], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert got.returncode == 0, got.stderr
    assert m.main(["archive", *files, "--out", str(tmp_path / "made")]) == 0
    capsys.readouterr()
    for name in TABLES + SUMMARIES:
        a, b = pd.read_parquet(tmp_path / "fresh" / name), pd.read_parquet(tmp_path / "made" / name)
        pd.testing.assert_frame_equal(a, b, obj=name)


def test_a_pending_session_takes_settings_until_it_is_made_then_hands_everything_to_it():
    from amqp_dissect.pipelines.spark_runtime.session import PendingSession

    class Conf(dict):
        def set(self, k, v):
            self[k] = v

        def unset(self, k):
            self.pop(k, None)

    class Context:
        def getConf(self):
            return Conf({"spark.sql.x": "from the builder"})

    class Session:
        conf = Conf({"spark.sql.x": "from the builder", "spark.sql.gone": "1"})
        read = "the reader"

    made = Session()
    p = PendingSession(Context(), lambda: made)
    assert p.conf.get("spark.sql.x") == "from the builder" and p.conf.get("spark.sql.y", "d") == "d"
    p.conf.set("spark.sql.y", 7)
    p.conf.unset("spark.sql.gone")
    assert p.conf.get("spark.sql.y") == "7" and p.conf.get("spark.sql.gone") is None
    assert made.conf == {"spark.sql.x": "from the builder", "spark.sql.gone": "1"}  # (not made yet: nothing sent)
    p.made(made)
    assert made.conf == {"spark.sql.x": "from the builder", "spark.sql.y": "7"}
    p.conf.set("spark.sql.z", "1")
    assert made.conf["spark.sql.z"] == "1" and p.read == "the reader" and p.sparkContext is not None


def test_a_pending_session_is_asked_for_before_it_is_awaited_and_stops_its_context_alone_when_never_asked():
    from amqp_dissect.pipelines.spark_runtime.session import PendingSession

    calls = []

    class Context:
        def stop(self):
            calls.append("context stopped")

    class Session:
        read = "the reader"
        conf = None

        def stop(self):
            calls.append("session stopped")

    made = Session()
    # never asked for: the thread is released, the context alone is stopped, no session awaited
    p = PendingSession(Context(), lambda: calls.append("awaited") or made, need=lambda: calls.append("asked"),
                       release=lambda: calls.append("released"))
    assert p.sparkContext is not None and calls == []
    p.stop()
    assert calls == ["released", "context stopped"]
    # asked for (any attribute but the context and conf): asked, then awaited; its stop is the session's
    calls.clear()
    p = PendingSession(Context(), lambda: calls.append("awaited") or made, need=lambda: calls.append("asked"),
                       release=lambda: calls.append("released"))
    assert p.read == "the reader"
    p.stop()
    assert calls == ["asked", "awaited", "asked", "awaited", "session stopped"]


def test_the_command_on_local_files_never_makes_a_spark_session_and_ends_the_thread_that_would(tmp_path):
    # the job's local path needs the SparkContext only: the SparkSession (about 1.5 core-seconds
    # of the JVM's, in the job's first step) is never made, and the stop ends the waiting thread
    got = _python(f"""
        import sys, threading
        from pyspark.sql import SparkSession

        made = []
        real = SparkSession.__init__
        def init(self, *a, **k):
            made.append(1)
            real(self, *a, **k)
        SparkSession.__init__ = init
        from amqp_dissect.cli import common, main as m
        common.exit_quickly = lambda: None  # (this process goes on after the command)
        rc = m.main(["archive", "--master", "local[1]", {SAMPLE!r}, "--out", {str(tmp_path / "out")!r}])
        threads = [t.name for t in threading.enumerate() if t.name == "amqp-dissect-session-start"]
        for t in threading.enumerate():
            if t.name == "amqp-dissect-session-start":
                t.join(timeout=30)
        print("exit", rc, "sessions made", len(made), "thread alive",
              any(t.is_alive() for t in threading.enumerate() if t.name == "amqp-dissect-session-start"))
    """)
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[-1] == "exit 0 sessions made 0 thread alive False", got.stdout + got.stderr
    assert (tmp_path / "out" / "deliveries").is_dir() and (tmp_path / "out" / "latency_by_link").is_dir()
    assert "Traceback" not in got.stderr, got.stderr
