"""The suite's folders mirror the package: capture, amqp, model, results, cli, spark, pipelines;
the fuzzers and benchmarks have their own (fuzz, benchmarks), the helpers they share are in
support.  The folders are not packages: pytest imports every test module by its file name (so
file names stay unique across the folders), and this file puts support/ and every test folder on
sys.path, so that ``import pcapbuild`` or ``from test_state import Script`` works in a file run on
its own as in the whole suite.  Scripts run directly (tests/benchmarks/benchmark.py,
tests/fuzz/fuzz_run.py, ...) put the folders they need on sys.path themselves."""

import ast
import functools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FOLDERS = ("support", "capture", "amqp", "model", "results", "cli", "spark", "pipelines", "fuzz", "benchmarks")
for p in (ROOT, *(os.path.join(HERE, f) for f in reversed(FOLDERS))):
    if p not in sys.path:
        sys.path.insert(0, p)


import pytest  # noqa: E402


# The groups of tests that take longest, by far, for the few tests they hold: the Spark session's
# (a JVM, then Spark jobs), the install test's (fresh venvs, pip), the benchmark script's smoke run
# (some 50 child processes) and the tests that start JVMs of their own (SESSION_APART, below).  The
# workers are handed whole groups, the biggest first (below): these go first, so that they do not
# come last and leave the other core idle while they end.
LONG_GROUPS = ("spark", "tests/cli/test_install.py", "tests/cli/test_archive_growth.py",
               "tests/spark/test_start_stop.py", "tests/benchmarks/test_benchmark_script.py",
               "tests/spark/test_zygote.py", "tests/spark/test_session.py")


# Files of tests/spark/ most of whose tests need no Spark session of the run's (they test the parts
# that plan or start Spark, and some start a JVM of their own: two tests of test_start_stop.py take
# about 25 s each on an idle machine).  Only their tests that take the session fixture join the
# "spark" group; the others are a group of their own per file, so they run on the other worker
# while the session's group runs (the session's group is the longest: it came last, alone).  None
# of these files has a fixture wider than a test, so nothing is made twice.
SESSION_APART = ("tests/spark/test_spark.py", "tests/spark/test_session.py", "tests/spark/test_start_stop.py",
                 "tests/spark/test_zygote.py")


@functools.lru_cache(maxsize=None)
def session_tests(path: str) -> frozenset:
    """The tests of a test file that take the Spark session fixture, read from its source: a
    test function with a ``spark`` argument, or one with an argument naming a fixture of the same
    file that does (and so on).  pytest_collection_modifyitems checks the result against the
    fixtures pytest resolved."""
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def takes_spark(name: str, seen: frozenset) -> bool:
        if name == "spark":
            return True
        node = functions.get(name)
        return node is not None and any(takes_spark(a.arg, seen | {name}) for a in node.args.args
                                        if a.arg not in seen)

    return frozenset(n for n in functions if n.startswith("test_") and takes_spark(n, frozenset()))


def group_of(nodeid: str) -> str:
    """The group of a test, by its id alone (what pytest-xdist's scheduler sees): "spark" for the
    tests with "spark" in their id (tests/spark/, a file or a test named so: every test of the Spark
    session fixture is, pytest_collection_modifyitems checks it) but the SESSION_APART files' tests
    that do not take the session, else the test's file."""
    path, _, name = nodeid.partition("::")
    if path in SESSION_APART:
        return "spark" if name.split("[", 1)[0] in session_tests(path) else path
    return "spark" if "spark" in nodeid else path


def pytest_configure(config):
    """Under ``--dist loadgroup`` the workers take the groups in the order the tests are collected
    (pytest_collection_modifyitems sets it), not pytest-xdist's own (most tests first)."""
    if getattr(config.option, "dist", "no") == "loadgroup" and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # (optional: a run with -p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` by group_of.  (pytest-xdist 3.8 groups by the ``xdist_group`` mark: its
    worker appends the group to the test's ``_nodeid``, which pytest 9 no longer reads, so every test
    was a group of its own: the Spark session started in both workers, a file's module fixtures
    were made in both.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n``, with ``--dist loadgroup``, as pyproject.toml sets it) each
    group's tests (group_of: a file's, or the Spark session's) run in one worker, so a module
    fixture (a TLS capture, a browser, a generated capture) is made once and one JVM starts.

    The groups are handed to the workers in this order: LONG_GROUPS first, then the others by their
    number of tests, the most first (pytest-xdist's own order); a group's tests keep their order.
    (A worker has ``loadgroup`` set, and its ``dist`` is "no".)"""
    groups: dict[str, list] = {}
    for item in items:
        group = group_of(item.nodeid)
        if "spark" in getattr(item, "fixturenames", ()) and group != "spark":
            raise pytest.UsageError(f"{item.nodeid} uses the Spark session outside its group: put 'spark' in its "
                                   "name, or take the session as an argument (tests/conftest.py: group_of)")
        groups.setdefault(group, []).append(item)
    if getattr(config.option, "loadgroup", False):
        def rank(group):
            return (LONG_GROUPS.index(group) if group in LONG_GROUPS else len(LONG_GROUPS), -len(groups[group]))
        items[:] = [item for group in sorted(groups, key=rank) for item in groups[group]]


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (local[2]), for every test that needs Spark."""
    from amqp_dissect.pipelines.spark import spark_session

    s = spark_session(master="local[2]", conf=[("spark.sql.shuffle.partitions", "4"),
                                               ("spark.default.parallelism", "4")])
    yield s
    s.stop()
    from amqp_dissect.pipelines.spark_runtime.session import finish_spark_log

    finish_spark_log(True)  # (the JVM's log of the test run's session: Spark's failures fail their tests)


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
