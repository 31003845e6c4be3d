"""The local executors' worker daemon forked from a zygote that imported its modules while the
JVM started (issue 26: the first Python job waited about 0.9 s for the daemon's imports).  The
daemon's launcher is run here as the JVM runs it (``python -m amqp_dissect.pipelines.spark_runtime.daemon``
with pipes for stdin and stdout): pyspark's daemon answers with its port either way; with a
zygote it is the zygote's child and the launcher imported nothing heavy; without one, or with
an environment the zygote was not started with, the launcher runs the daemon itself."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time

import pytest

from sparkneeds import require_spark

require_spark()

from amqp_dissect.pipelines.spark_runtime import zygote as Z  # noqa: E402


def _children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(name))
    return found


def _gone(pid: int, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def zygote(tmp_path):
    path = str(tmp_path / "s")
    env = dict(os.environ, PYTHONHASHSEED="0")
    p = subprocess.Popen([sys.executable, "-c", "from amqp_dissect.pipelines.spark_runtime.zygote import serve; serve()", path],
                         stdin=subprocess.PIPE, env=env, start_new_session=True)
    end = time.monotonic() + 60
    while not os.path.exists(path):
        assert p.poll() is None and time.monotonic() < end, "the zygote did not start"
        time.sleep(0.02)
    yield path, p
    p.stdin.close()
    assert p.wait(timeout=60) == 0  # (the driver's pipe closed: the zygote ends)
    assert not os.path.exists(path)


# the launcher, as the JVM runs it, reporting the modules it imported when it ends
LAUNCHER = ("import gc, runpy, sys, atexit; "
            "atexit.register(lambda: open(sys.argv[1], 'w').write(' '.join(sorted(sys.modules)))); "
            "atexit.register(lambda: open(sys.argv[1] + '.frozen', 'w').write(str(gc.get_freeze_count()))); "
            "runpy.run_module('amqp_dissect.pipelines.spark_runtime.daemon', run_name='__main__')")


def _launch(tmp_path, env):
    mods = tmp_path / "modules"
    p = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(mods)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         env=env)
    port = struct.unpack("!i", p.stdout.read(4))[0]  # what pyspark's daemon writes first
    assert 0 < port < 65536
    return p, mods


def test_the_daemon_is_forked_from_the_zygote_and_ends_with_the_jvms_pipe(zygote, tmp_path):
    path, z = zygote
    env = dict(os.environ, PYTHONHASHSEED="0", **{Z.ENV: path})
    p, mods = _launch(tmp_path, env)
    daemons = _children(z.pid)
    assert len(daemons) == 1  # the daemon serving the launcher's pipes
    p.stdin.close()  # the JVM closes the daemon's stdin to stop it
    assert p.wait(timeout=60) == 0
    assert _gone(daemons[0])
    imported = set(mods.read_text().split())
    # the launcher imported neither the tasks' modules nor pyspark: the zygote had
    assert "amqp_dissect.pipelines.spark_runtime.zygote" in imported
    assert not {"pyarrow", "pyspark", "amqp_dissect.pipelines.spark.stages", "amqp_dissect.dissect"} & imported


def test_a_sigterm_to_the_launcher_stops_the_daemon(zygote, tmp_path):
    path, z = zygote
    env = dict(os.environ, PYTHONHASHSEED="0", **{Z.ENV: path})
    p, _ = _launch(tmp_path, env)
    daemons = _children(z.pid)
    assert len(daemons) == 1
    p.send_signal(signal.SIGTERM)  # what the JVM's stopDaemon does
    p.wait(timeout=60)
    assert _gone(daemons[0])
    p.stdin.close()


@pytest.mark.parametrize("case", ["another hash seed", "no zygote"])
def test_the_launcher_runs_the_daemon_itself_when_the_zygote_cannot(zygote, tmp_path, case):
    path, z = zygote
    if case == "another hash seed":  # (a child of the zygote would hash strings differently)
        env = dict(os.environ, PYTHONHASHSEED="1", **{Z.ENV: path})
    else:
        env = dict(os.environ, PYTHONHASHSEED="0", **{Z.ENV: str(tmp_path / "none")})
    p, mods = _launch(tmp_path, env)
    assert _children(z.pid) == [] or case == "no zygote" and all(_gone(c, 0) for c in _children(z.pid))
    p.stdin.close()
    p.wait(timeout=60)  # (pyspark's daemon ends with 1 on its way out, whatever stopped it)
    imported = set(mods.read_text().split())
    assert {"pyspark.daemon", "amqp_dissect.pipelines.spark.stages"} <= imported  # (the preload, in the launcher)
    # the launcher that forks the workers froze what it preloaded, as the zygote does (below)
    assert int((tmp_path / "modules.frozen").read_text()) >= 0.9 * _preloaded_objects()


def test_the_spark_package_imports_its_modules_when_first_used():
    # the daemon's launcher is a module of the package: importing the package imports none of
    # the job's modules (nor pyspark), and every exported name is still there
    code = ("import sys, amqp_dissect.pipelines.spark as S; a = sorted(m for m in sys.modules if m.startswith('pyspark')); "
            "names = [getattr(S, n) for n in S.__all__]; import amqp_dissect.spark as A; "
            "print(len(a), int(all(getattr(A, n) is getattr(S, n) for n in S.__all__)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["0", "1"], out.stderr


def test_the_zygote_answers_the_sessions_install_probe():
    # spark_session asks a worker-like process where amqp_dissect is imported from and what is
    # compiled (executors_share_install); the zygote answers first instead of a process of its own
    code = ("import json, os, amqp_dissect; from amqp_dissect.pipelines.spark_runtime import zygote as Z, session as S; "
            "Z.start(); S._start_probe(); asked = S._PENDING_PROBE[0]; answer = S._probe_answer(); "
            "print(json.dumps([asked is not None and not hasattr(asked, 'communicate'), list(answer), "
            "[os.path.realpath(amqp_dissect.__path__[0]), sorted(amqp_dissect.compiled_modules())]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != Z.ENV})
    from_zygote, answer, own = json.loads(out.stdout.strip().splitlines()[-1])
    assert from_zygote and answer == own, out.stderr


def test_the_sessions_workers_come_from_its_zygote(spark):
    # the test run's session (spark_session, local[2]) started a zygote before its JVM: the
    # workers' daemon is the zygote's child, and the JVM named the zygote's socket to it
    assert Z.zygote_pid() is not None
    env = Z.ENV

    def _daemon_of_this_worker(_rows):  # (a local function: pickled by value for the workers)
        import os

        yield os.getppid(), os.environ.get(env)

    found = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_daemon_of_this_worker).collect()
    assert {path for _, path in found} == {Z._STARTED[0][0]}
    for daemon, _ in found:
        with open(f"/proc/{daemon}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == Z.zygote_pid()


def _preloaded_objects() -> int:
    """The objects the collector tracks in a fresh process of this interpreter once the daemon's
    preload is done (and nothing frozen)."""
    code = ("import gc; from amqp_dissect.pipelines.spark_runtime.preload import preload; preload(); gc.collect(); "
            "print(len(gc.get_objects()), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONHASHSEED="0"))
    tracked, frozen = map(int, out.stdout.split())
    assert frozen == 0 and tracked > 10_000, out.stderr
    return tracked


def test_the_workers_collector_skips_the_preloaded_heap(spark):
    # pyspark's daemon runs a full gc.collect() in a reused worker after every task: the objects
    # the zygote preloaded (pyarrow, pandas, pyspark, the dissector) are frozen before the forks,
    # so that collection walks only what the tasks left, not the preload's heap
    def _collector_of_this_worker(_rows):  # (a local function: pickled by value for the workers)
        import gc

        gc.collect()
        yield gc.get_freeze_count(), len(gc.get_objects())

    preloaded = _preloaded_objects()
    found = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_collector_of_this_worker).collect()
    for frozen, tracked in found:
        assert frozen >= 0.9 * preloaded, (frozen, preloaded)
        assert tracked < preloaded, (tracked, preloaded)  # (unfrozen, it would walk the preload and more)
