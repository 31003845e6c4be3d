"""The suite's folders mirror the package: capture, amqp, model, results, cli, spark, pipelines;
the fuzzers and benchmarks have their own (fuzz, benchmarks), the helpers they share are in
support.  The folders are not packages: pytest imports every test module by its file name (so
file names stay unique across the folders), and this file puts support/ and every test folder on
sys.path, so that ``import pcapbuild`` or ``from test_state import Script`` works in a file run on
its own as in the whole suite.  Scripts run directly (tests/benchmarks/benchmark.py,
tests/fuzz/fuzz_run.py, ...) put the folders they need on sys.path themselves."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FOLDERS = ("support", "capture", "amqp", "model", "results", "cli", "spark", "pipelines", "fuzz", "benchmarks")
for p in (ROOT, *(os.path.join(HERE, f) for f in reversed(FOLDERS))):
    if p not in sys.path:
        sys.path.insert(0, p)


import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n``, with ``--dist loadgroup``, as pyproject.toml sets it) each file's
    tests run in one worker, so a module fixture (a TLS capture, a browser, a generated capture) is
    made once; every test of the Spark session fixture runs in one worker, so one JVM starts."""
    for item in items:
        group = "spark" if "spark" in getattr(item, "fixturenames", ()) else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (local[2]), for every test that needs Spark."""
    from amqp_dissect.pipelines.spark import spark_session

    s = spark_session(master="local[2]", conf=[("spark.sql.shuffle.partitions", "4"),
                                               ("spark.default.parallelism", "4")])
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def _signal_state_of_the_test_stays_its_own():
    """Put back the SIGCHLD handler and the signal wakeup fd a test changed.  An asyncio event loop
    (pyshark's tshark subprocesses, an asyncio child watcher) can leave both behind, pointing at
    the loop's closed self-pipe; a later test that forks (``-j N``) then gets Python's "Exception
    ignored when trying to write to the signal wakeup fd" on its stderr at every child's exit."""
    import signal

    handler = signal.getsignal(signal.SIGCHLD)
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    yield
    if signal.getsignal(signal.SIGCHLD) is not handler:
        signal.signal(signal.SIGCHLD, handler if handler is not None else signal.SIG_DFL)
    signal.set_wakeup_fd(fd)


@pytest.fixture
def parallel_runs(monkeypatch):
    """The process counts of the runs that went through ``-j``'s workers (so a test knows -j was
    not a fallback to one process)."""
    from amqp_dissect.pipelines.runs import parallel

    calls = []
    real = parallel.run_workers

    def counted(n, *a, **kw):
        calls.append(n)
        return real(n, *a, **kw)

    monkeypatch.setattr(parallel, "run_workers", counted)
    return calls
