"""The Spark session's fixed cost (issue 26): the driver JVM's class archive
(``class_archive_options``): written by the first session, mapped by the next ones, one per
java binary, Spark jars and JVM options; never two writers' files left behind.  No Spark needed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from amqp_dissect.pipelines.spark_runtime import session as S


@pytest.fixture
def cache(tmp_path, monkeypatch):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(S.CDS_ENV, raising=False)
    if S._cds_key(S.JVM_OPTIONS) is None:
        if os.environ.get("CI"):  # (CI has java: tests/install-deps.sh installs it)
            pytest.fail("CI is set but there is no java binary", pytrace=False)
        pytest.skip("no java binary on this machine")
    return tmp_path / "cache" / "amqp-dissect"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _value(opts, flag):
    hits = [o.split("=", 1)[1] for o in opts if o.startswith(flag + "=")]
    return hits[0] if hits else None


def test_the_first_session_writes_the_class_archive_and_the_next_map_it(cache):
    opts = S.class_archive_options()
    assert "-Xlog:disable" in opts and "-Xlog:all=warning:stderr" in opts  # (JVM warnings off our stdout)
    tmp = _value(opts, "-XX:ArchiveClassesAtExit")
    assert tmp and tmp.endswith(f".{os.getpid()}.tmp") and os.path.dirname(tmp) == str(cache)
    # while its writer runs (or the file is fresh), nobody else writes or maps one
    with open(tmp, "wb") as f:
        f.write(b"archive")
    again = S.class_archive_options()
    assert _value(again, "-XX:ArchiveClassesAtExit") is None and _value(again, "-XX:SharedArchiveFile") is None
    # its writer gone and the file settled: it becomes the archive every later session maps
    done = tmp.replace(f".{os.getpid()}.tmp", f".{_dead_pid()}.tmp")
    os.rename(tmp, done)
    old = time.time() - S.CDS_SETTLE_SECONDS - 5
    os.utime(done, (old, old))
    final = _value(S.class_archive_options(), "-XX:SharedArchiveFile")
    assert final and final == done.rsplit(".", 2)[0] and open(final, "rb").read() == b"archive"
    assert os.listdir(cache) == [os.path.basename(final)]
    # a second writer's settled file, once there is an archive: removed
    extra = final + f".{_dead_pid()}.tmp"
    with open(extra, "wb") as f:
        f.write(b"other")
    os.utime(extra, (old, old))
    assert _value(S.class_archive_options(), "-XX:SharedArchiveFile") == final
    assert os.listdir(cache) == [os.path.basename(final)]
    # other JVM options (or another java, other jars): another archive
    assert _value(S.class_archive_options("-XX:+UseSerialGC"), "-XX:ArchiveClassesAtExit")


def test_no_class_archive_when_turned_off_or_without_a_cache(cache, monkeypatch, tmp_path):
    monkeypatch.setenv(S.CDS_ENV, "0")
    assert S.class_archive_options() == []
    monkeypatch.delenv(S.CDS_ENV)
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # (not a directory: no cache)
    assert S.class_archive_options() == []


def test_the_worker_daemon_preloads_what_the_tasks_import():
    # the workers are forked from the daemon: a module the preload misses is imported by each
    # worker in its first task, on the job's critical path.  pyarrow imports pandas (and its
    # pandas shim) at the first pa.array of a Python list, which every stage-1 task makes: about
    # 0.4 CPU s per worker; pq.read_table imports pyarrow.dataset; the table writers ask for
    # pandas' version (importlib.metadata, 0.1 s more when it is imported for that)
    code = ("import sys, amqp_dissect.pipelines.spark_runtime.daemon as D; D.preload(); before = set(sys.modules); "
            "import pyarrow as pa, pyarrow.parquet as pq, os, tempfile; "
            "from amqp_dissect.pipelines.archive import write_range; "
            "from amqp_dissect.pipelines.spark.summaries import summary_schema; "
            "d = tempfile.mkdtemp(); pa.array([1, None]); pa.array(['a']); write_range(d, 'deliveries', 0, None); "
            "summary_schema('outcomes'); pq.read_table(os.path.join(d, 'part-00000.parquet')); "
            "print(sorted(m for m in set(sys.modules) - before if not m.startswith('encodings')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_pandas_version_is_looked_up_once_per_process():
    # (the lookup searches every sys.path entry: about 20 ms a call in a Spark worker)
    code = ("import sys, importlib.metadata as M; from amqp_dissect.results import tables as T; "
            "n = [0]; real = M.version\n"
            "def counted(name):\n n[0] += 1; return real(name)\n"
            "M.version = counted; a = T.installed_pandas_version(); b = T.installed_pandas_version(); "
            "from amqp_dissect.pipelines.archive.tables import installed_pandas_version as A; c = A(); "
            "import pandas; print(n[0], a == b == c == pandas.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["1", "True"], out.stdout + out.stderr


def test_the_archive_summary_ranks_links_as_pandas_does(tmp_path):
    # the CLI's "highest settlement latency" lines read latency_by_link with pyarrow (pandas'
    # import cost the driver about a second); pandas' sort is the oracle: p99 descending, then
    # connection ascending, NaN / null last, rows without a count dropped
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from amqp_dissect.cli.archive import _top_latency

    nan = float("nan")
    rows = {"connection": ["c", "a", "b", "a", None, "d", "e", "b", "f"],
            "link": ["l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8", "l9"],
            "count": [3, 5, 0, 2, 4, 1, 7, 6, None],
            "p50": [0.1] * 9, "p90": [0.2] * 9,
            "p99": [0.5, 0.5, 9.0, None, 0.7, nan, 0.1, 0.5, 3.0],
            "max": [1.0] * 9}
    d = tmp_path / "latency_by_link"
    d.mkdir()
    pq.write_table(pa.table(rows), str(d / "part-00000.parquet"))
    df = pd.read_parquet(d)
    want = df[df["count"] > 0].sort_values(["p99", "connection"], ascending=[False, True]).head(5)
    got = _top_latency(None, str(d))
    assert [r["link"] for r in got] == list(want["link"])
    assert len(got) == 5 and got[0]["link"] == "l5"


def test_stop_session_stops_spark_and_shuts_the_accumulator_server_without_waiting_for_it():
    # pyspark's SparkContext.stop waits for its accumulator server's loop, which looks at its
    # shutdown flag once a second: stop_session stops Spark with the server detached and shuts
    # the server down in a thread of its own (the same call), so the stop does not wait for it
    import threading

    release, shut = threading.Event(), threading.Event()
    seen = {}

    class Server:
        def shutdown(self):  # (blocks like pyspark's, until its loop comes round)
            release.wait(60)
            shut.set()

    class Context:
        _accumulatorServer = Server()

    class Session:
        sparkContext = Context()

        def stop(self):
            seen["server at stop"] = self.sparkContext._accumulatorServer

    S.stop_session(Session())
    assert seen == {"server at stop": None}  # Spark stopped, its context no longer waits for the server
    assert not shut.is_set()  # the shutdown is under way apart, not waited for
    release.set()
    assert shut.wait(60)  # and it does finish
