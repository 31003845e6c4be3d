"""The Spark session of the archive job (:func:`spark_session`: quiet logs, JVM options) and
the package shipped to its executors (:func:`ship_code`)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import zipfile

from amqp_dissect.pipelines.options import DEFAULT_MASTER


_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


# --------------------------------------------------------------------------- session


# JIT of the driver and executor JVMs: C1 only.  The job's own work is Python; its JVMs only move
# bytes between Parquet files, shuffles and Arrow, and in a fresh JVM the C2 compiler spent about
# 20 s of CPU per bench run (a quarter of the job's CPU, on the cores the tasks need) to speed up
# that glue by about 4 s.  The parallel collector instead of G1: G1's concurrent marking and
# refinement threads cost about 2.5 s of CPU per bench run next to the tasks (the parallel
# collector about 0.6 s), which one task slot leaves on the idle core but two slots pay for.
# A conf pair for spark.driver/executor.extraJavaOptions replaces this.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"


def spark_session(master: str | None = None, conf=(), driver_memory: str | None = None,
                  executor_memory: str | None = None, app_name: str = "amqp-dissect-archive",
                  quiet: bool = True, ship: bool = True, jvm_options: str = JVM_OPTIONS, on_context=None):
    """A SparkSession: ``master`` (default local[*], or what spark-submit set), extra
    ``conf`` pairs, memory settings; logging at ERROR and no progress bars when
    ``quiet``; the project's packages shipped to the executors when ``ship``;
    ``jvm_options`` for the driver and executor JVMs (unless ``conf`` sets their
    extraJavaOptions; a driver already running, under spark-submit, keeps its own).

    ``on_context``: called with the SparkContext as soon as it runs (its code shipped, its log
    level set), before the SparkSession is made: the JVM's SparkSession takes about a second
    more to make (Spark SQL's classes and settings), which a caller on another thread can spend
    on work that needs only the SparkContext (:class:`PendingSession`)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    _launcher_environment()
    b, local = _with_master(SparkSession.builder.appName(app_name), master, conf)
    if local and not _conf_has(conf, "spark.python.daemon.module"):
        b = _with_local_daemon(b)
    b = _with_settings(b, conf, jvm_options, quiet, driver_memory, executor_memory)
    if ship and local and os.environ.get("PYSPARK_PYTHON") == sys.executable:
        # the question ship_code asks (do the workers import this very install?) is asked of one
        # Python process started now, while the JVM starts (see executors_share_install)
        _start_probe()
    early = on_context is not None and _classic(b)
    sc, spark = _quietly(lambda: _start(b, early)) if quiet else _start(b, early)
    if quiet:
        sc.setLogLevel("ERROR")
    if ship:
        ship_code(_ContextOnly(sc))
    if on_context is not None:
        on_context(sc)
    return spark if spark is not None else b.getOrCreate()


def _launcher_environment() -> None:
    """What spark-submit's launcher is told by the environment: where Spark is, and a light JVM."""
    if "SPARK_HOME" not in os.environ and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # spark-submit's scripts otherwise start a Python process (find_spark_home.py) to find it
        with contextlib.suppress(Exception):
            from pyspark.find_spark_home import _find_spark_home

            os.environ["SPARK_HOME"] = _find_spark_home()
    if "SPARK_LAUNCHER_OPTS" not in os.environ:
        # the small JVM spark-submit starts first to build the real command line: C1 only, one GC thread
        os.environ["SPARK_LAUNCHER_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _with_master(b, master: str | None, conf):
    """The builder with its master (default local[*] unless spark-submit or ``conf`` set one),
    and whether the executors are local."""
    if master:
        return b.master(master), master.startswith("local")
    if "PYSPARK_GATEWAY_PORT" not in os.environ and not _conf_has(conf, "spark.master"):
        return b.master(DEFAULT_MASTER), True
    return b, False


def _with_local_daemon(b):
    """Local executors run this interpreter: their Python workers are forked from a daemon that
    imported the tasks' modules once (.daemon), whose imports a zygote makes while the JVM starts
    (.zygote)."""
    b = b.config("spark.python.daemon.module", "amqp_dissect.pipelines.spark_runtime.daemon")
    if "PYSPARK_GATEWAY_PORT" not in os.environ and os.environ.get("PYSPARK_PYTHON") == sys.executable:
        from .zygote import start

        start()
    return b


def _with_settings(b, conf, jvm_options: str, quiet: bool, driver_memory: str | None, executor_memory: str | None):
    """The session's settings (SESSION_CONF), the JVMs' options, the log and progress settings
    when ``quiet``, the memory settings, then the caller's ``conf`` pairs."""
    for key, value in SESSION_CONF:  # (each replaced by a conf pair of the same key)
        if not _conf_has(conf, key):
            b = b.config(key, value)
    driver_opts = [jvm_options] if jvm_options else []
    if "PYSPARK_GATEWAY_PORT" not in os.environ and not _conf_has(conf, "spark.driver.extraJavaOptions"):
        driver_opts += class_archive_options(jvm_options)
    if quiet:
        b = b.config("spark.ui.showConsoleProgress", "false")
        log4j = os.path.join(tempfile.gettempdir(), "amqp-dissect-log4j2.properties")
        with open(log4j, "w") as f:
            f.write(_LOG4J)
        driver_opts.append(f"-Dlog4j2.configurationFile=file:{log4j}")
    if driver_opts and not _conf_has(conf, "spark.driver.extraJavaOptions"):
        b = b.config("spark.driver.extraJavaOptions", " ".join(driver_opts))
    if jvm_options and not _conf_has(conf, "spark.executor.extraJavaOptions"):
        b = b.config("spark.executor.extraJavaOptions", jvm_options)
    if driver_memory:
        b = b.config("spark.driver.memory", driver_memory)
    if executor_memory:
        b = b.config("spark.executor.memory", executor_memory)
    for k, v in conf:
        b = b.config(k, v)
    return b


def _start(b, early: bool):
    """(SparkContext, SparkSession or None): with ``early``, the context only (what
    builder.getOrCreate does first, in its classic mode), else the session."""
    if early:
        from pyspark import SparkConf, SparkContext

        sconf = SparkConf()
        for k, v in b._options.items():
            sconf.set(k, v)
        return SparkContext.getOrCreate(sconf), None
    spark = b.getOrCreate()
    return spark.sparkContext, spark


def _quietly(start):
    """``start()`` with the JVM's stderr (inherited when it starts: JVM notices, Spark errors)
    sent to a log file (SPARK_LOG) instead of the terminal; our own stderr is restored."""
    global SPARK_LOG
    SPARK_LOG = os.path.join(tempfile.gettempdir(), f"amqp-dissect-spark-{os.getpid()}.log")
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(SPARK_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 2)
        return start()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def finish_spark_log(ok: bool) -> str | None:
    """The end of the log :func:`_quietly` opened for the JVM this process started: removed after
    a run that went well (``ok``; the JVM has exited, or holds a file no one will read); kept
    after one that failed, and its path returned for the error to name it.  None when there is
    no such log (the session was not started quiet, or an earlier call ended it)."""
    global SPARK_LOG
    path, SPARK_LOG = SPARK_LOG, None
    if path is None or not os.path.exists(path):
        return None
    if ok:
        with contextlib.suppress(OSError):
            os.remove(path)
        return None
    return path


class _ContextOnly:
    """What :func:`ship_code` reads of a session: its SparkContext."""

    def __init__(self, sc):
        self.sparkContext = sc


def _classic(builder) -> bool:
    """Would ``builder.getOrCreate()`` make a classic session on a new SparkContext (no Spark
    Connect, no session yet)?  Then :func:`spark_session` may make the context first."""
    from pyspark.sql import SparkSession

    opts = builder._options
    mode = str(opts.get("spark.api.mode", os.environ.get("SPARK_API_MODE", ""))).lower()
    return (SparkSession._instantiatedSession is None and mode in ("", "classic")
            and not any(k in os.environ for k in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"))
            and "spark.remote" not in opts)


_UNSET = object()


class PendingSession:
    """A SparkSession that another thread makes (:func:`spark_session` with ``on_context``):
    ``sparkContext`` now; ``conf`` takes settings now (applied to the session when it is made;
    read from the context's settings meanwhile); any other attribute asks for the session
    (``need``) and waits for it.  The archive job's local path uses only these, so its steps
    run without it: with ``need``, the thread makes the session only when asked (the JVM's
    SparkSession costs a core about a second and a half, in the job's first step), and
    :meth:`stop` stops the context alone when nothing asked (``release`` tells the thread)."""

    def __init__(self, sc, wait, need=None, release=None):
        import threading

        self.sparkContext = sc
        self._wait = wait  # () -> the SparkSession (blocks until it is made; raises its failure)
        self._need = need  # () -> None: the session is wanted (the thread may wait for this)
        self._release = release  # () -> None: the session will never be wanted
        self._lock = threading.Lock()
        self._session = None
        self._overrides: dict = {}
        self.conf = _PendingConf(self)

    def made(self, spark) -> None:
        """The session is made (called by the thread that made it): the settings given meanwhile
        are applied to it, and from now on everything goes to it."""
        with self._lock:
            for k, v in self._overrides.items():
                if v is _UNSET:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
            self._overrides.clear()
            self._session = spark
            self.conf = spark.conf

    def session(self):
        if self._need is not None:
            self._need()
        spark = self._wait()
        if self._session is None:  # (made() runs before the waiter is released; this is a safety net)
            self.made(spark)
        return self._session

    def stop(self) -> None:
        """The session stopped; when none was asked for (and it is made only when asked), the
        SparkContext alone, the thread that would have made the session told not to."""
        with self._lock:
            made = self._session is not None
        if made or self._release is None:
            self.session().stop()
            return
        self._release()
        self.sparkContext.stop()

    def __getattr__(self, name):
        return getattr(self.session(), name)


class _PendingConf:
    def __init__(self, pending: PendingSession):
        self._p = pending

    def set(self, key: str, value) -> None:
        with self._p._lock:
            if self._p._session is None:
                self._p._overrides[key] = str(value)
                return
        self._p._session.conf.set(key, value)

    def unset(self, key: str) -> None:
        with self._p._lock:
            if self._p._session is None:
                self._p._overrides[key] = _UNSET
                return
        self._p._session.conf.unset(key)

    def get(self, key: str, default=None):
        with self._p._lock:
            if self._p._session is None:
                v = self._p._overrides.get(key)
                if v is _UNSET:
                    return default
                if v is not None:
                    return v
                # (a session's settings start as its context's: the builder's options)
                return self._p.sparkContext.getConf().get(key, default)
        return self._p._session.conf.get(key, default)


def stop_session(spark, end_jvm: bool = False) -> None:
    """``spark.stop()`` without its wait for the accumulator server: pyspark's server thread
    serves the JVM's one connection in a loop that looks at its shutdown flag once a second,
    and ``SparkContext.stop`` waits for that loop (measured: 0.92 of the 0.95 s a stop took, at
    the end of every ``archive`` run).  The JVM side stops as usual (no task runs any more, so
    no update is lost); the server is shut down by a daemon thread that ends within that second
    (or with the process), with the same calls pyspark makes.

    ``end_jvm``: also end the driver JVM this process started (the CLI's last step), and wait for
    it.  Without it pyspark keeps the JVM for a next session and it exits only once this process
    has (when its stdin pipe closes), after the interpreter's own teardown; closing that pipe
    here lets the JVM's exit (its shutdown hooks) overlap what this process does after the stop.
    The next session of this process, if any, starts a new JVM."""
    import threading

    sc = spark.sparkContext
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        sc._accumulatorServer = None  # (SparkContext.stop then skips its waiting shutdown)
        # the JVM may go before the server's loop sees its flag: its end of file is no error then
        server.handle_error = lambda *_: None
    try:
        spark.stop()
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="amqp-dissect-accumulator-stop", daemon=True).start()
        if end_jvm:
            end_driver_jvm()


JVM_EXIT_TIMEOUT = 120.0  # end_driver_jvm's wait for the JVM (the first session writes its class archive then)


def end_driver_jvm(wait: bool = True) -> None:
    """End the driver JVM pyspark started for this process, once no SparkContext runs on it:
    Py4J's connections closed and the JVM's stdin pipe (pyspark's gateway ends at its end of
    file), then, with ``wait``, its exit waited for, at most :data:`JVM_EXIT_TIMEOUT` seconds (the
    JVM of a session that writes the class archive, :func:`class_archive_options`, writes it as it
    exits: it is never killed, a cut archive file would be taken for a whole one)."""
    from pyspark import SparkContext

    gw = SparkContext._gateway
    proc = getattr(gw, "proc", None)
    if gw is None or proc is None or SparkContext._active_spark_context is not None:
        return  # (no JVM of ours, e.g. under spark-submit; or a context still runs on it)
    SparkContext._gateway = None  # (a next session launches its own)
    SparkContext._jvm = None
    with contextlib.suppress(Exception):
        gw.shutdown()
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.close()
    if wait:
        import subprocess

        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(JVM_EXIT_TIMEOUT)


# Spark settings of the job's session that cut its fixed cost (each replaced by a conf pair of the
# same key): no web UI (its Jetty server and the listeners that feed it start with every session and
# cost CPU on every task event, for a batch job nobody watches; a user who wants it passes
# --conf spark.ui.enabled=true).
SESSION_CONF = (("spark.ui.enabled", "false"),)

_PROBE = ("import json, os, amqp_dissect; print(json.dumps([os.path.realpath(amqp_dissect.__path__[0]), "
          "sorted(amqp_dissect.compiled_modules())]))")
_PENDING_PROBE: list = []  # the probe process spark_session started beside the JVM, not yet asked


def _start_probe() -> None:
    import subprocess

    from .zygote import take_probe

    out = take_probe()
    if out is not None:  # the zygote started for this session answers the question first (.zygote)
        _PENDING_PROBE[:] = [out]
        return
    try:
        _PENDING_PROBE[:] = [subprocess.Popen([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL, text=True)]
    except OSError:  # (no probe: executors_share_install asks again)
        _PENDING_PROBE[:] = []


def _probe_answer():
    """(where, compiled) from a worker-like process of this interpreter: the one spark_session
    started, else a new one; raises when there is no answer."""
    import json
    import subprocess

    if _PENDING_PROBE and not hasattr(_PENDING_PROBE[0], "communicate"):  # the zygote's stdout
        import select

        f = _PENDING_PROBE.pop()
        try:
            if not select.select([f], [], [], 120)[0]:
                raise TimeoutError("no answer from the zygote")
            out = f.readline()
        finally:
            f.close()
    elif _PENDING_PROBE:
        p = _PENDING_PROBE.pop()
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
    else:
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120).stdout
    where, compiled = json.loads(out.strip().splitlines()[-1])
    return where, compiled


# --------------------------------------------------------------------------- the driver JVM's class archive

CDS_ENV = "AMQP_DISSECT_SPARK_CDS"  # "0": no class archive (see class_archive_options)
CDS_SETTLE_SECONDS = 60  # an archive file left by a run that ended this long ago is complete


def _cds_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "amqp-dissect")


def _cds_key(jvm_options: str) -> str | None:
    """What a class archive depends on: the java binary, Spark's jars, the JVM options."""
    import hashlib
    import shutil

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    home = os.environ.get("SPARK_HOME")
    if not java or not home or not os.path.isdir(os.path.join(home, "jars")):
        return None
    java = os.path.realpath(java)
    jars = os.path.join(home, "jars")
    parts = [java, str(os.stat(java).st_mtime_ns), os.path.realpath(jars), str(os.stat(jars).st_mtime_ns),
             str(len(os.listdir(jars))), jvm_options or "", sys.executable]
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:16]


def class_archive_options(jvm_options: str = JVM_OPTIONS) -> list[str]:
    """Options of the driver JVM for a dynamic class-data-sharing archive of the classes Spark
    loads (JDK 13+): the first session writes it when its JVM exits
    (``-XX:ArchiveClassesAtExit``, about 150 MB under ``$XDG_CACHE_HOME/amqp-dissect``, default
    ``~/.cache``), the next ones map it (``-XX:SharedArchiveFile``) and start in about half the
    time (the JVM reads its classes already parsed and verified instead of from Spark's jars).
    The archive's name holds what it depends on (the java binary, Spark's jars, the JVM options),
    so an update writes a new one; a file the JVM cannot use is ignored by it (its warning goes
    to the JVM's log, with the JVM's other warnings: ``-Xlog`` to stderr); it is mapped at the
    address it was written for (:data:`CDS_AT_ITS_ADDRESS`).  ``[]`` when
    ``AMQP_DISSECT_SPARK_CDS=0``, or without a writable cache directory or a java binary."""
    if os.environ.get(CDS_ENV, "1") == "0":
        return []
    import glob
    import time

    try:
        key = _cds_key(jvm_options)
        if key is None:
            return []
        d = _cds_dir()
        os.makedirs(d, exist_ok=True)
        final = os.path.join(d, f"spark-{key}.jsa")
        # an archive an earlier run wrote (its process gone, the file settled) becomes the archive,
        # or is removed when there is one already
        for tmp in sorted(glob.glob(final + ".*.tmp")):
            pid = int(tmp.rsplit(".", 2)[-2])
            if _alive(pid) or time.time() - os.path.getmtime(tmp) < CDS_SETTLE_SECONDS:
                continue
            if os.path.getsize(tmp) and not os.path.exists(final):
                os.replace(tmp, final)
            else:
                os.remove(tmp)
        log = ["-Xlog:disable", "-Xlog:all=warning:stderr"]  # (JVM warnings never on our stdout)
        if os.path.exists(final):
            return log + [f"-XX:SharedArchiveFile={final}", *CDS_AT_ITS_ADDRESS]
        if glob.glob(final + ".*.tmp"):  # another run is writing it
            return log
        return log + [f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp"]
    except (OSError, ValueError):
        return []


# The class archive mapped at the address it was written for (HotSpot's ArchiveRelocationMode=0,
# a diagnostic option; JDK 14+, ignored by a JVM without it): the JDK 17 here maps it elsewhere
# by default (mode 1, an address chosen at random each start) and then patches every pointer in
# it, which took 0.13 to 0.25 s of the driver JVM's start at load 8 to 12 (its -Xlog:cds, from the
# archive's space reserved to the archive mapped; 0.001 s at its own address) and writes to the
# whole mapping.  The
# archive's classes then sit at the same address in every run (what the JDK's default archive
# did before mode 1); AMQP_DISSECT_SPARK_CDS=0 maps no archive at all.
CDS_AT_ITS_ADDRESS = ("-XX:+IgnoreUnrecognizedVMOptions", "-XX:+UnlockDiagnosticVMOptions",
                      "-XX:ArchiveRelocationMode=0")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _conf_has(conf, key: str) -> bool:
    return any(k == key for k, _ in conf)


_SHIPPED: dict[str, str] = {}
SPARK_LOG: str | None = None  # where the JVM's stderr goes when the session was started quiet


def _probe_package(_rows):
    """On an executor: where ``amqp_dissect`` is imported from, and which modules are compiled."""
    try:
        import amqp_dissect
    except ImportError:
        return [(None, ())]
    return [(os.path.realpath(amqp_dissect.__path__[0]), tuple(amqp_dissect.compiled_modules()))]


def executors_share_install(spark) -> bool:
    """Do the executors import this very ``amqp_dissect`` (the same files, e.g. local mode with
    the driver's interpreter, or a shared install)?  Then nothing is shipped and they run the
    compiled modules too; a zip of sources would shadow them (addPyFile goes first on sys.path)."""
    import amqp_dissect

    sc = spark.sparkContext
    if sc.master.startswith("local") and os.environ.get("PYSPARK_PYTHON") == sys.executable:
        # local mode with this very interpreter (what spark_session sets up): a worker is this
        # interpreter started with this environment, so ask one such process instead of a Spark job
        try:
            where, compiled = _probe_answer()
            return (where == os.path.realpath(amqp_dissect.__path__[0])
                    and set(compiled) == set(amqp_dissect.compiled_modules()))
        except Exception:  # (no answer: ask the executors)
            pass
    try:
        where, compiled = sc.parallelize([0], 1).mapPartitions(_probe_package).collect()[0]
    except Exception:  # an executor that cannot even run the probe: ship the sources
        return False
    return where == os.path.realpath(amqp_dissect.__path__[0]) and set(compiled) == set(amqp_dissect.compiled_modules())


def ship_code(spark) -> str | None:
    """Make ``amqp_dissect`` importable on the executors, once per SparkContext: nothing to do
    when they import the driver's own install (:func:`executors_share_install`: compiled modules
    stay compiled); otherwise zip the package (the core and the pipelines, as Python sources: the
    pure-Python twins run there) and ``addPyFile`` it.  Returns the zip's path, or None."""
    import amqp_dissect
    import amqp_dissect.pipelines

    sc = spark.sparkContext
    key = sc.applicationId
    if key in _SHIPPED:
        return _SHIPPED[key]
    if executors_share_install(spark):
        _SHIPPED[key] = None
        return None
    fd, path = tempfile.mkstemp(prefix="amqp_dissect_", suffix=".zip")
    os.close(fd)
    trees = [(amqp_dissect.__path__[0], "amqp_dissect"),
             (amqp_dissect.pipelines.__path__[0], "amqp_dissect/pipelines")]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for top, arc in trees:
            for dirpath, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in files:
                    if name.endswith((".py", ".xml")):
                        full = os.path.join(dirpath, name)
                        z.write(full, os.path.join(arc, os.path.relpath(full, top)))
    sc.addPyFile(path)
    _SHIPPED[key] = path
    return path


@contextlib.contextmanager
def sql_conf(spark, **settings: str):
    """Set SQL confs (dots written as __) for the actions run inside the block only."""
    old = {}
    for k, v in settings.items():
        key = k.replace("__", ".")
        old[key] = spark.conf.get(key, None)
        spark.conf.set(key, v)
    try:
        yield
    finally:
        for key, v in old.items():
            if v is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, v)


# rows of stage 1 carry whole packets and rows of stage 2 whole Arrow chunks: the stages
# that read them use small batches (only there: small batches elsewhere slow Spark down)
STAGE2_CONF = {"spark__sql__execution__arrow__maxRecordsPerBatch": "1000",
                "spark__sql__parquet__columnarReaderBatchSize": "1024"}
# times are written as Parquet TIMESTAMP(MICROS, UTC) (not Spark's legacy INT96), like the local tables
TS_CONF = {"spark__sql__parquet__outputTimestampType": "TIMESTAMP_MICROS"}
TABLES_CONF = {"spark__sql__execution__arrow__maxRecordsPerBatch": "16",
                "spark__sql__parquet__columnarReaderBatchSize": "64", **TS_CONF}
