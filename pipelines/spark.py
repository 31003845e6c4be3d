"""Spark batch analysis of capture archives, on the same sans-IO core as ``amqp_dissect.pipelines.local``.

    from amqp_dissect.pipelines.spark import spark_session, run_archive
    spark = spark_session()                       # local[*] unless master= / spark-submit says otherwise
    result = run_archive(spark, ["captures/"], "out/")   # parquet tables under out/
    result["counts"]["deliveries"]

or ``spark-submit pipelines/spark.py PATH... --out DIR`` (the project's code is
shipped to the executors as a zip), or ``amqp-dissect archive PATH... --out DIR``.

Stages (details in :mod:`amqp_dissect.pipelines.archive`):

1. one task per file or pcap byte range: executors open the files, emit one
   row per TCP record (range id, index in range, time, raw record, flow key)
   and a summary per range; written to ``DIR/_work/seg`` (parquet).
2. driver: from the summaries only, check that the ranges of split files
   chain, order the files as ``CaptureSource`` orders a capture set (first
   record time, then name with its numbers by value), and prefix-sum the
   record counts into packet numbers.  Files whose times overlap form overlap
   groups: each is read again by one stage-1 task that merges its files record
   by record (``archive.MergeScan``) and numbers them in that order, as
   ``CaptureSource`` merges a set; the other files stay parallel.
3. rows of TCP records with their global packet number, ``repartition`` by
   flow key (unordered endpoint pair), ``sortWithinPartitions(flow, packet)``,
   ``mapInArrow``: a Dissector + Analyzer per flow, streaming over the sorted
   rows; rows of the result tables go to ``DIR/_work/rows`` (with a local
   work directory each task writes its files there itself, pyarrow).
4. the few flows whose result depends on the rest of the capture are run
   again with the missing facts: flows idle longer than the idle timeout
   (the single-process reassembler expires them at its once-a-second sweep,
   which runs on any record: the sweep times are computed in one task from
   the records' times), and flows whose rows depend on the analyzer's end
   time (open stalls, idle-time-out checks) when that time (the last record
   that produced an event) differs from the time they were run with.
5. tables ``connections``, ``links``, ``deliveries``, ``stalls`` (and
   ``frames`` with ``frames=True``), each cut into ranges of its output order,
   and the summaries ``latency_by_link``, ``latency_by_address``,
   ``latency_by_window``, ``outcomes``, ``stalls_by_link``,
   ``stalls_by_address``.  With a local output directory Python tasks do both
   from the files (each range's task reads the stage-2 chunks it needs; one task
   per summary reads the written tables), one Spark job each; otherwise Spark
   moves the chunks to the range tasks and computes the summaries
   (:func:`summary_frame`) through its writers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

if __package__ in (None, ""):  # spark-submit pipelines/spark.py: import the installed package, not siblings
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # no top-level 'archive', 'split'...

from amqp_dissect.pipelines.archive import (  # noqa: E402
    DEFAULT_SPLIT_SIZE,
    KIND_NOTE,
    KIND_SUMMARY,
    KIND_TCP,
    FlowParams,
    FlowRunner,
    ROW_TABLES,
    CaptureChanged,
    InputError,
    Range,
    RecordReader,
    balance_flows,
    capture_ends,
    decode_range,
    end_sensitive,
    expand_inputs,
    fill_records,
    group_ranges,
    layout,
    set_gaps_of,
    plan_ranges,
    range_bounds,
    sorted_range,
    sorted_range_table,
    write_range,
)
from amqp_dissect.pipelines.local import read_keylog  # noqa: E402
from amqp_dissect.amqp.spec import OUTCOMES  # noqa: E402
from amqp_dissect.results.tables import spark_schema  # noqa: E402

TABLES = ("connections", "links", "deliveries", "stalls")
STAGE2_COLUMNS = ("flow", "packet", "ts", "linktype", "data", "orig_len", "file", "pos", "caplen")
SUMMARIES = ("latency_by_link", "latency_by_address", "latency_by_window", "outcomes", "stalls_by_link",
             "stalls_by_address")
DEFAULT_WINDOW = 60.0
PERCENTILES = (50, 90, 99)
OUTPUT_THREADS = 4  # tables (then summaries) written at once, each by its own Spark jobs
TABLE_PART_ROWS = 100_000  # rows of a table one task sorts and writes, at most (about)

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
                  quiet: bool = True, ship: bool = True, jvm_options: str = JVM_OPTIONS):
    """A SparkSession: ``master`` (default local[*], or what spark-submit set), extra
    ``conf`` pairs, memory settings; logging at ERROR and no progress bars when
    ``quiet``; the project's packages shipped to the executors when ``ship``;
    ``jvm_options`` for the driver and executor JVMs (unless ``conf`` sets their
    extraJavaOptions; a driver already running, under spark-submit, keeps its own)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ and not _conf_has(conf, "spark.master"):
        b = b.master("local[*]")
    driver_opts = [jvm_options] if jvm_options else []
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
    if quiet:
        # the JVM inherits stderr when it starts: send what it prints (JVM notices, Spark
        # errors) to a log file instead of the terminal; our own stderr is restored
        global SPARK_LOG
        SPARK_LOG = os.path.join(tempfile.gettempdir(), f"amqp-dissect-spark-{os.getpid()}.log")
        sys.stderr.flush()
        saved = os.dup(2)
        fd = os.open(SPARK_LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.dup2(fd, 2)
            spark = b.getOrCreate()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(fd)
    else:
        spark = b.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    if ship:
        ship_code(spark)
    return spark


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
def _sql_conf(spark, **settings: str):
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
_STAGE2_CONF = {"spark__sql__execution__arrow__maxRecordsPerBatch": "1000",
                "spark__sql__parquet__columnarReaderBatchSize": "1024"}
# times are written as Parquet TIMESTAMP(MICROS, UTC) (not Spark's legacy INT96), like the local tables
_TS_CONF = {"spark__sql__parquet__outputTimestampType": "TIMESTAMP_MICROS"}
_TABLES_CONF = {"spark__sql__execution__arrow__maxRecordsPerBatch": "16",
                "spark__sql__parquet__columnarReaderBatchSize": "64", **_TS_CONF}


# --------------------------------------------------------------------------- schemas


def _types():
    from pyspark.sql import types as T

    return T


def stage1_schema():
    T = _types()
    return T.StructType([
        T.StructField("rid", T.IntegerType()), T.StructField("idx", T.LongType()),
        T.StructField("ts", T.LongType()), T.StructField("linktype", T.IntegerType()),
        T.StructField("data", T.BinaryType()), T.StructField("orig_len", T.LongType()),
        T.StructField("flow", T.StringType()), T.StructField("kind", T.ByteType()),
        T.StructField("pos", T.LongType()), T.StructField("caplen", T.IntegerType()),
        T.StructField("meta", T.StringType()), T.StructField("file", T.IntegerType()),
    ])


def rows_schema():
    T = _types()
    return T.StructType([
        T.StructField("table", T.StringType()), T.StructField("flow", T.StringType()),
        T.StructField("k1", T.LongType()), T.StructField("k2", T.LongType()),
        T.StructField("n", T.LongType()), T.StructField("hk1", T.LongType()),
        T.StructField("hflow", T.StringType()), T.StructField("hk2", T.LongType()),
        T.StructField("blob", T.BinaryType()),
    ])


def table_schema(table: str):
    """The Spark schema of an output table, from the column registry (times as
    TimestampType, JSON columns as strings, ulong as decimal(20, 0))."""
    return spark_schema(table)


def _arrow_schema(spark_schema):
    import pyarrow as pa

    m = {"StringType": pa.string(), "LongType": pa.int64(), "DoubleType": pa.float64(),
         "BooleanType": pa.bool_(), "IntegerType": pa.int32(), "BinaryType": pa.binary(), "ByteType": pa.int8()}
    return pa.schema([pa.field(f.name, m[type(f.dataType).__name__]) for f in spark_schema.fields])


# --------------------------------------------------------------------------- executor functions


def _batches(rows, arrow_schema, size: int = 2048, max_bytes: int = 32 << 20):
    """Group tuples into Arrow record batches of at most ``size`` rows / ~``max_bytes``."""
    import pyarrow as pa

    names = arrow_schema.names
    buf = []
    nbytes = 0
    for r in rows:
        buf.append(r)
        for v in r:
            if isinstance(v, (bytes, str)):
                nbytes += len(v)
        if len(buf) >= size or nbytes >= max_bytes:
            cols = list(zip(*buf))
            yield pa.RecordBatch.from_arrays([pa.array(c, type=arrow_schema.field(n).type)
                                              for c, n in zip(cols, names)], schema=arrow_schema)
            buf = []
            nbytes = 0
    if buf:
        cols = list(zip(*buf))
        yield pa.RecordBatch.from_arrays([pa.array(c, type=arrow_schema.field(n).type)
                                          for c, n in zip(cols, names)], schema=arrow_schema)


def _stage1_fn(arrow_schema, directory: str | None = None):
    """Stage-1 rows of each range; with ``directory``, each task writes its range's rows to
    ``directory`` itself (:func:`_write_seg`) and gives the summary row only."""
    def fn(batches):
        for batch in batches:
            for t in zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns))):
                rng = Range(*t)
                if directory is None:
                    yield from _batches(decode_range(rng), arrow_schema)
                else:
                    yield pa_batch([_write_seg(directory, rng, arrow_schema)], arrow_schema)
    return fn


SEG_FILE = "part-{:06d}.parquet"  # stage-1 rows of range (rid) i, written by its task


def _write_seg(directory: str, rng: Range, arrow_schema) -> tuple:
    """Write the stage-1 rows of ``rng`` (all but the summary) to ``directory/part-<rid>.parquet``
    with pyarrow, streaming in batches (uncompressed: only offsets and flow keys, read once);
    through a temporary name and a rename, so that a task run again replaces its file.
    Returns the summary row.  The JVM never converts or encodes these rows."""
    import pyarrow.parquet as pq

    summary = []

    def records():
        for row in decode_range(rng):
            if row[7] == KIND_SUMMARY:
                summary.append(row)
            else:
                yield row
    path = os.path.join(directory, SEG_FILE.format(rng.rid))
    tmp = os.path.join(directory, f".{SEG_FILE.format(rng.rid)}.{os.getpid()}.tmp")
    with pq.ParquetWriter(tmp, arrow_schema, compression="none") as w:
        for b in _batches(records(), arrow_schema):
            w.write_batch(b)
    os.replace(tmp, path)
    return summary[0]


def _rows_of(batches, names):
    for batch in batches:
        cols = [batch.column(n).to_pylist() for n in names]
        yield from zip(*cols)


def _stage2_fn(params_bc, arrow_schema, directory: str | None = None):
    """Stage-2 rows of the flows of a partition; with ``directory``, the task writes them there
    itself (:func:`_write_rows`) and gives no rows."""
    def fn(batches):
        params = params_bc.value
        runner = FlowRunner(params)
        reader = RecordReader(params.files)

        def rows():
            try:
                yield from runner.run(fill_records(_rows_of(batches, STAGE2_COLUMNS), reader))
            except CaptureChanged as e:  # the driver reports it (see _facts)
                yield ("_flow", "", 0, 0, 1, 0, "", 0, pickle.dumps({"error": str(e)}, 5))
        try:
            if directory is None:
                yield from _batches(rows(), arrow_schema, size=1000)
            else:
                from pyspark import TaskContext

                _write_rows(directory, TaskContext.get().partitionId(), rows(), arrow_schema)
        finally:
            reader.close()
    return fn


ROWS_FILE = "part-{:05d}-direct.parquet"  # stage-2 rows of a table by the task of partition i


def _write_rows(directory: str, part: int, rows, arrow_schema, size: int = 1000, max_bytes: int = 1 << 20) -> None:
    """Write stage-2 rows (table first) as Spark's ``partitionBy("table")`` lays them out:
    ``directory/table=<name>/part-<partition>-direct.parquet`` without the table column,
    uncompressed (the chunks are compressed already), in row groups of at most ``size`` rows
    or about ``max_bytes`` (a table task reads only the row groups that hold its chunks),
    through temporary names renamed at the end, so that a task run again replaces its files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(list(arrow_schema)[1:])
    writers: dict = {}
    bufs: dict = {}
    sizes: dict = {}

    def flush(t):
        buf = bufs.pop(t, None)
        sizes.pop(t, None)
        if not buf:
            return
        if t not in writers:
            d = os.path.join(directory, f"table={t}")
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, f".{ROWS_FILE.format(part)}.{os.getpid()}.tmp")
            writers[t] = (pq.ParquetWriter(tmp, schema, compression="none"), tmp, os.path.join(d, ROWS_FILE.format(part)))
        cols = list(zip(*buf))
        writers[t][0].write_batch(pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)],
                                                             schema=schema))
    try:
        for r in rows:
            t = r[0]
            bufs.setdefault(t, []).append(r[1:])
            sizes[t] = sizes.get(t, 0) + sum(len(v) for v in r[1:] if isinstance(v, (bytes, str)))
            if len(bufs[t]) >= size or sizes[t] >= max_bytes:
                flush(t)
        for t in list(bufs):
            flush(t)
    finally:
        for w, _, _ in writers.values():
            w.close()
    for _, tmp, path in writers.values():
        os.replace(tmp, path)


def pa_batch(rows, arrow_schema):
    """One Arrow record batch of the tuples ``rows``."""
    return next(_batches(rows, arrow_schema))


def _range_fn(bounds, excluded, table: str | None = None, directory: str | None = None):
    """Rows of ranges of a table, sorted (:func:`sorted_range`); with ``directory``, each
    task writes its range's Parquet file itself (:func:`write_range`) and gives one row,
    ``(range, rows written)``."""
    def fn(batches):
        first = []

        def chunks():
            for batch in batches:
                cols = [batch.column(c).to_pylist() for c in ("layer", "r", "blob")]
                if not first and cols[1]:
                    first.append(cols[1][0])
                yield from zip(*cols)
        if directory is None:
            yield from sorted_range(chunks(), bounds, excluded)
            return
        import pyarrow as pa

        t = sorted_range_table(chunks(), bounds, excluded)
        if first:  # a partition holds one range (range i is partition i); an empty one writes nothing
            n = write_range(directory, table, first[0], t)
            yield pa.RecordBatch.from_arrays([pa.array([first[0]], pa.int32()), pa.array([n], pa.int64())],
                                             names=["r", "rows"])
    return fn


def _meta_fn(arrow_schema):
    import pyarrow as pa

    def fn(batches):
        for batch in batches:
            rows = []
            for flow, blob in zip(batch.column("flow").to_pylist(), batch.column("blob").to_pylist()):
                m = pickle.loads(blob)
                if "error" in m:  # a stage-2 task that could not finish: no flow
                    rows.append({"flow": flow, "error": m["error"]})
                    continue
                rows.append({"flow": flow, "last_packet": m["last_packet"], "last_ts": m["last_ts"],
                             "needs_ticks": m["needs_ticks"], "open_stalls": m["open_stalls"],
                             "idle": json.dumps(m["idle"]), "packets": m["packets"],
                             "connections": m["connections"], "error": None,
                             **{"rows_" + t: m["rows"][t] for t in ROW_TABLES}})
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)
    return fn


def _sensitive_fn(a, b):
    import pyarrow as pa

    schema = pa.schema([pa.field("flow", pa.string())])

    def fn(batches):
        for batch in batches:
            out = []
            for flow, opened, idle in zip(batch.column("flow").to_pylist(), batch.column("open_stalls").to_pylist(),
                                          batch.column("idle").to_pylist()):
                if end_sensitive({"open_stalls": opened, "idle": json.loads(idle)}, a, b):
                    out.append(flow)
            yield pa.RecordBatch.from_arrays([pa.array(out, pa.string())], schema=schema)
    return fn


def _ticks_fn(interval: int):
    """``interval``: nanoseconds, as every capture time."""
    import numpy as np
    import pyarrow as pa

    schema = pa.schema([pa.field("packet", pa.int64()), pa.field("ts", pa.int64())])

    def fn(batches):
        nxt = None
        carry = np.iinfo(np.int64).min
        for batch in batches:
            pk = batch.column("packet").to_numpy(zero_copy_only=False)
            ts = batch.column("ts").to_numpy(zero_copy_only=False).astype(np.int64)
            if not len(ts):
                continue
            i = 0
            if nxt is None:
                nxt = int(ts[0]) + interval
                carry = ts[0]
                i = 1
            # the sweep runs at the first record whose time reaches the armed time; every
            # earlier record is below it, so a running maximum finds it by bisection
            cm = np.maximum.accumulate(np.concatenate(([carry], ts)))[1:]
            out_p, out_t = [], []
            while True:
                j = int(np.searchsorted(cm, nxt, side="left"))
                if j < i:
                    j = i
                if j >= len(ts):
                    break
                out_p.append(int(pk[j]))
                out_t.append(int(ts[j]))
                nxt = int(ts[j]) + interval
                i = j + 1
            carry = cm[-1]
            if out_p:
                yield pa.RecordBatch.from_arrays([pa.array(out_p, pa.int64()), pa.array(out_t, pa.int64())],
                                                 schema=schema)
    return fn


# --------------------------------------------------------------------------- the job


def _uri(path: str) -> str:
    if urlparse(path).scheme and not os.path.isabs(path):
        return path
    return "file://" + os.path.abspath(path)


def _local(uri: str) -> str | None:
    u = urlparse(uri)
    return u.path if u.scheme in ("", "file") else None


def run_archive(spark, paths, out: str, *, split_size: int = DEFAULT_SPLIT_SIZE, window: float = DEFAULT_WINDOW,
                frames: bool = False, partitions: int | None = None, ports=(), keep_work: bool = False,
                idle_timeout: float = 900.0, keylog=None) -> dict:
    """Analyse the captures under ``paths`` as one continuous capture; write parquet tables
    under ``out``.  Returns a dict: ``counts``, ``tables`` (name -> path), ``files`` (in
    capture order), ``errors`` ((path, damage) pairs), ``stats`` (ranges, false
    boundary candidates, reruns, seconds).  Raises :class:`InputError` for bad paths."""
    t0 = time.time()
    if keylog is not None and not isinstance(keylog, str):  # a KeyLog (the CLI's --keylog): shipped as text
        keylog = keylog.text()
    files = expand_inputs(paths)
    nparts = partitions or max(2, spark.sparkContext.defaultParallelism * 2)
    # files are read in at least as many tasks as stage 2 has (default: as many as cores),
    # so that every stage keeps all the cores busy
    with _sql_conf(spark, spark__sql__files__minPartitionNum=str(nparts)):
        return _run(spark, files, out, t0=t0, nparts=nparts, split_size=split_size, window=window, frames=frames,
                    ports=ports, keep_work=keep_work, idle_timeout=idle_timeout, keylog=keylog)


def _run(spark, files, out, *, t0, nparts, split_size, window, frames, ports, keep_work, idle_timeout,
         keylog) -> dict:
    from pyspark.sql import functions as F

    out_uri = _uri(out)
    work = out_uri.rstrip("/") + "/_work"
    stats: dict = {"files": len(files)}
    marks: dict = {}
    tick = [time.time()]

    def mark(name):
        now = time.time()
        marks[name] = round(now - tick[0], 3)
        tick[0] = now

    # ---- stage 1: decode files / byte ranges on the executors
    ranges = plan_ranges(files, split_size)
    seg_paths = [work + "/seg"]
    summaries = _stage1(spark, ranges, seg_paths[0])
    lay = layout(files, summaries)
    stats["ranges_planned"] = len(ranges)
    stats["redo_files"] = [files[i] for i in lay.redo]
    if lay.redo:  # split ranges that did not chain (damage or a false boundary): read those files whole
        again = [r for r in plan_ranges(files, split_size, first_rid=len(ranges), whole=lay.redo)
                 if r.file in set(lay.redo)]
        seg_paths.append(work + "/seg_redo")
        extra = _stage1(spark, again, seg_paths[1])
        redo = set(lay.redo)
        summaries = [s for s in summaries if s["file"] not in redo] + extra
        lay = layout(files, summaries)
    for _ in range(3):  # (one pass; a group found again after it would be read again with its neighbours)
        if lay.fatal or not lay.groups:
            break
        # files whose times overlap: each group read whole and merged record by record by one task
        # (as the single-process reader merges a set), numbered in that order
        grouped = {fi for g in lay.groups for fi, _ in g}
        again = group_ranges(files, lay.groups, max(s["rid"] for s in summaries) + 1)
        seg_paths.append(work + f"/seg_merged{len(seg_paths)}")
        extra = _stage1(spark, again, seg_paths[-1])
        summaries = [s for s in summaries
                     if s["file"] not in grouped and not grouped.intersection(s.get("group") or ())] + extra
        lay = layout(files, summaries)
    if lay.fatal:
        kind, msg = lay.fatal[0]
        raise InputError("missing" if kind == "open" else "format", msg)
    mark("stage1")
    stats["merged_groups"] = [[files[fi] for fi in g] for g in lay.merged]
    stats.update(ranges=lay.ranges_used, rejected_boundaries=lay.rejected, records=lay.records,
                 tcp_records=lay.tcp_records, packet_errors=lay.packet_errors, unsupported=lay.unsupported)

    # ---- packet numbers: prefix sums of the per-range counts; the capture's ends from the
    # summaries (no pass over the rows)
    seg = spark.read.schema(stage1_schema()).parquet(*seg_paths)
    # (each row names its file: the rows of a merged group come from several)
    offs = spark.createDataFrame(sorted(lay.offsets.items()), "rid int, off long")
    numbered = seg.where(F.col("kind") != KIND_SUMMARY).join(F.broadcast(offs), "rid").withColumn(
        "packet", F.col("off") + F.col("idx") + F.lit(1))
    tcp = numbered.where(F.col("kind") == KIND_TCP).select(*STAGE2_COLUMNS)
    last_tcp, last_note = capture_ends(summaries, lay.offsets)
    G = lay.last_ts
    # key logs embedded in pcapng files (Decryption Secrets Blocks) join the one given
    embedded = "".join(s.get("keylog") or "" for s in summaries)
    if embedded:
        keylog = (keylog + "\n" if keylog else "") + embedded
    mark("numbering")
    base = FlowParams(ports=tuple(ports), last_ts=G, last_tcp_packet=last_tcp, end_ts=G, frames=frames,
                      idle_timeout=idle_timeout, keylog=keylog, files=tuple(files))

    # ---- stage 2: per-flow runs, the largest flows spread evenly over the tasks
    rows_path = work + "/rows0"
    plan = balance_flows(summaries, lay.offsets, nparts, lay.tcp_records)
    _stage2(spark, tcp, base, nparts, rows_path, plan)
    mark("stage2")
    # layers of stage-2 results: (rows, [flow DataFrames a later layer ran again]); the same
    # flows as Python sets for the tables step (reruns concern few flows)
    layers = [(_read_rows(spark, rows_path), [])]
    layer_paths = [rows_path]
    excluded: list[set] = [set()]

    def rerun(flows: list, params: FlowParams, path: str) -> None:
        fdf = spark.createDataFrame([(f,) for f in flows], "flow string")
        _stage2(spark, tcp.join(F.broadcast(fdf), "flow", "left_semi"), params, nparts, path)
        for (_, ex), exs in zip(layers, excluded):
            ex.append(fdf)
            exs.update(flows)
        layers.append((_read_rows(spark, path), []))
        layer_paths.append(path)
        excluded.append(set())

    # the flows' facts: one pass over their "_flow" rows per layer state, kept (a row per
    # flow) for the questions that follow, each then a pass over the cached rows only
    cached: list = []

    def current_meta():
        m = _meta_rows(layers).persist()
        cached.append(m)
        return m

    meta = current_meta()
    facts = _facts(meta)
    reruns = {"ticks": 0, "end": 0}
    ticks = None
    if facts["needs_ticks"]:
        need = [r.flow for r in meta.where(F.col("needs_ticks")).select("flow").collect()]
        tk = tcp.select("packet", "ts").repartition(1).sortWithinPartitions("packet").mapInArrow(
            _ticks_fn(1_000_000_000), "packet long, ts long")
        ticks = tuple((r.packet, r.ts) for r in tk.collect())
        rerun(need, FlowParams(**{**base.__dict__, "ticks": ticks}), work + "/rows_ticks")
        reruns["ticks"] = len(need)
        meta = current_meta()
        facts = _facts(meta)
    # the single-process Analyzer is finished at the time of the last record that produced an event
    best = None
    for cand in ((facts["last_packet"], facts["last_ts"]), last_note):
        if cand is not None and cand[0] is not None and (best is None or cand[0] > best[0]):
            best = cand
    E = best[1] if best is not None else None
    if E != G:
        sens = [r.flow for r in meta.mapInArrow(_sensitive_fn(G, E), "flow string").collect()]
        if sens:
            rerun(sens, FlowParams(**{**base.__dict__, "ticks": ticks, "end_ts": E}), work + "/rows_end")
            reruns["end"] = len(sens)
            facts = _facts(_meta_rows(layers))
    for m in cached:
        m.unpersist()
    mark("reruns")
    stats["reruns"] = reruns
    stats["end_ts"] = E
    stats["flows"] = facts["flows"]
    counts = {t: facts["rows"][t] for t in TABLES + (("frames",) if frames else ())}

    # ---- tables, then the summaries read back from them: each a few concurrent Spark jobs
    # (one Python thread each), so that the small ones fill the cores the large ones leave idle
    out_base = out_uri.rstrip("/")
    written = {t: out_base + "/" + t for t in counts}
    layer_dirs = [_direct_dir(p) for p in layer_paths]
    if None not in layer_dirs and None not in [_direct_dir(u) for u in written.values()]:
        # local files: tasks read their range's chunks straight from the stage-2 files (no
        # shuffle), in one job for all the tables
        _write_tables_local(spark, layer_dirs, excluded, counts, {t: _direct_dir(u) for t, u in written.items()},
                            nparts)
        bounds = None
    else:
        bounds = _table_bounds(layers, counts, nparts)

    def write_table(t):
        directory = _direct_dir(written[t])
        if directory is None:  # not a local path: Spark's writer
            _table(spark, layers, t, bounds[t], excluded).write.mode("overwrite").parquet(written[t])
            return
        # the tasks write the files themselves (pyarrow: a fraction of the JVM's cost)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        got = _table(spark, layers, t, bounds[t], excluded, directory).collect()
        if sum(r.rows for r in got) != counts[t]:  # each row in exactly one range
            raise RuntimeError(f"table {t}: {sum(r.rows for r in got)} rows written of {counts[t]}")
        if not got:  # no rows at all: one file with the columns
            write_range(directory, t, 0, None)
        open(os.path.join(directory, "_SUCCESS"), "wb").close()

    if bounds is not None:
        with _sql_conf(spark, **_TABLES_CONF):
            _concurrently(write_table, sorted(counts, key=lambda t: -counts[t]))  # the largest first
    mark("tables")
    tables = {t: spark.read.schema(table_schema(t)).parquet(written[t]) for t in TABLES}
    written.update({name: out_base + "/" + name for name in SUMMARIES})

    local_out = _direct_dir(out_base)
    if local_out is not None:  # Python tasks read the tables' files and write the summaries
        write_summaries_local(spark, tables, local_out, window)
    else:
        def write_summary(name):
            summary_frame(name, tables, window).write.mode("overwrite").parquet(written[name])

        with _sql_conf(spark, **_TS_CONF):
            _concurrently(write_summary, SUMMARIES)
    mark("summaries")
    stats["timings"] = marks
    if not keep_work:
        local = _local(work)
        if local:
            shutil.rmtree(local, ignore_errors=True)
    stats["seconds"] = round(time.time() - t0, 3)
    return {"counts": counts, "tables": written, "files": lay.order, "errors": lay.errors, "stats": stats,
            "out": out_uri, "order": set_order(lay, len(files)), "gaps": set_gaps_of(lay.spans)}


def set_order(lay, nfiles: int) -> str | None:
    """What the summary says of the order a set of files was read in (None for one file)."""
    if nfiles < 2:
        return None
    text = "merged by time: files by their first packet's time, packets interleaved where they overlap"
    if lay.merged:
        n = sum(len(g) for g in lay.merged)
        text += (f" ({n} files overlap in time, in {len(lay.merged)} group(s): each group read merged by one task;"
                 " the other files read in parallel)")
    return text


def _stage1(spark, ranges: list[Range], path: str) -> list[dict]:
    """Stage 1 over ``ranges`` (the largest first: the job waits for its last task), rows to
    ``path``; returns the ranges' summaries.  A local ``path`` (:func:`_direct_dir`): each task
    writes its range's file there itself and only the summaries come back, in the same job;
    otherwise Spark's writer, then a job reading the summaries back."""
    from pyspark.sql import functions as F

    T = _types()
    rschema = T.StructType([
        T.StructField("rid", T.IntegerType()), T.StructField("file", T.IntegerType()),
        T.StructField("path", T.StringType()), T.StructField("part", T.IntegerType()),
        T.StructField("start", T.LongType()), T.StructField("end", T.LongType()),
        T.StructField("size", T.LongType()), T.StructField("group", T.StringType()),
    ])
    order = sorted(ranges, key=lambda r: -(((r.size or 0) if r.end is None else r.end) - r.start))
    rdd = spark.sparkContext.parallelize([r.as_tuple() for r in order], max(1, len(order)))
    schema = stage1_schema()
    directory = _direct_dir(path)
    df = spark.createDataFrame(rdd, rschema).mapInArrow(_stage1_fn(_arrow_schema(schema), directory), schema)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        metas = [json.loads(r.meta) for r in df.select("meta").collect()]
        open(os.path.join(directory, "_SUCCESS"), "wb").close()
        return metas
    df.write.mode("overwrite").parquet(path)
    seg = spark.read.schema(stage1_schema()).parquet(path)
    return [json.loads(r.meta) for r in seg.where(F.col("kind") == KIND_SUMMARY).select("meta").collect()]


def _stage2(spark, tcp, params: FlowParams, nparts: int, path: str, plan: dict | None = None) -> None:
    """Rows of the flows in ``tcp`` through :class:`FlowRunner`, ``nparts`` tasks, written
    to ``path`` by table.  ``plan`` (flow -> task, :func:`balance_flows`) places those
    flows; the others go where hash partitioning by flow puts them."""
    from pyspark.sql import functions as F

    schema = rows_schema()
    bc = spark.sparkContext.broadcast(params)
    if plan:
        keys = partition_keys(spark, nparts)
        m = spark.createDataFrame(sorted((f, keys[i]) for f, i in plan.items()), "flow string, _pkey long")
        hashed = F.element_at(F.array(*[F.lit(k).cast("long") for k in keys]),
                              F.expr(f"pmod(hash(flow), {nparts})") + 1)
        parted = (tcp.join(F.broadcast(m), "flow", "left")
                  .withColumn("_pkey", F.coalesce(F.col("_pkey"), hashed)).repartition(nparts, "_pkey"))
    else:
        parted = tcp.repartition(nparts, "flow")
    directory = _direct_dir(path)
    df = parted.sortWithinPartitions("flow", "packet").select(*STAGE2_COLUMNS).mapInArrow(
        _stage2_fn(bc, _arrow_schema(schema), directory), schema)
    with _sql_conf(spark, **_STAGE2_CONF):  # the chunks are compressed already (batch_ipc)
        if directory is not None:  # the tasks write their files themselves (pyarrow), no rows come back
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            df.collect()
            open(os.path.join(directory, "_SUCCESS"), "wb").close()
            return
        df.write.mode("overwrite").partitionBy("table").option("compression", "uncompressed").parquet(path)


_PARTITION_KEYS: dict = {}


def partition_keys(spark, n: int) -> list[int]:
    """For each i in 0..n-1 a long that hash partitioning into n partitions
    (``repartition(n, col)``: ``pmod(hash(col), n)``) sends to partition i, found with
    Spark's own ``hash``; once per Spark application and n."""
    from pyspark.sql import functions as F

    key = (spark.sparkContext.applicationId, n)
    if key not in _PARTITION_KEYS:
        found: dict[int, int] = {}
        lo = 0
        while len(found) < n:
            hi = lo + 64 * n
            rows = spark.range(lo, hi, 1, 1).select(F.expr(f"pmod(hash(id), {n})").alias("p"), "id").collect()
            for r in rows:
                found.setdefault(r.p, r.id)
            lo = hi
        _PARTITION_KEYS[key] = [found[i] for i in range(n)]
    return _PARTITION_KEYS[key]


def _concurrently(fn, items, threads: int | None = None) -> None:
    """``fn(item)`` for every item, in a pool of threads (each submits its own Spark jobs;
    items start in the order given); the first exception is raised once all have ended."""
    items = list(items)
    with ThreadPoolExecutor(threads or OUTPUT_THREADS) as pool:
        futures = [pool.submit(fn, it) for it in items]
    for f in futures:
        f.result()


def _read_rows(spark, path: str):
    return spark.read.schema(rows_schema()).parquet(path)


def _meta(rows):
    T = _types()
    schema = T.StructType([
        T.StructField("flow", T.StringType()), T.StructField("last_packet", T.LongType()),
        T.StructField("last_ts", T.LongType()), T.StructField("needs_ticks", T.BooleanType()),
        T.StructField("open_stalls", T.LongType()), T.StructField("idle", T.StringType()),
        T.StructField("packets", T.LongType()), T.StructField("connections", T.LongType()),
        T.StructField("error", T.StringType()),
    ] + [T.StructField("rows_" + t, T.LongType()) for t in ROW_TABLES])
    from pyspark.sql import functions as F

    return rows.where(F.col("table") == "_flow").select("flow", "blob").mapInArrow(
        _meta_fn(_arrow_schema(schema)), schema)


def _facts(meta) -> dict:
    """What the driver needs of the flows' facts, in one Spark job: the number of flows,
    of flows that need the global idle sweeps, the last record that produced an event
    (packet, time) and the rows of each table.  A stage-2 task that found a file changed
    under it (:class:`CaptureChanged`) left its message: :class:`InputError`."""
    from pyspark.sql import functions as F

    r = meta.agg(F.count(F.when(F.col("error").isNull(), 1)).alias("flows"),
                 F.sum(F.col("needs_ticks").cast("long")).alias("needs_ticks"),
                 F.max("last_packet").alias("last_packet"), F.max_by("last_ts", "last_packet").alias("last_ts"),
                 F.min("error").alias("error"),
                 *[F.sum("rows_" + t).alias("rows_" + t) for t in ROW_TABLES]).collect()[0]
    if r.error is not None:
        raise InputError("format", r.error)
    return {"flows": r.flows, "needs_ticks": r.needs_ticks or 0, "last_packet": r.last_packet,
            "last_ts": r.last_ts, "rows": {t: r["rows_" + t] or 0 for t in ROW_TABLES}}


def _table_bounds(layers, counts: dict, nparts: int) -> dict:
    """table -> range boundaries (:func:`range_bounds`) of its rows in output order, from
    the smallest key and size of each stage-2 chunk (one Spark job reading five columns).
    A table of at most :data:`TABLE_PART_ROWS` rows is one range; a larger one is cut into
    a multiple of ``nparts`` ranges of at most about that many rows (a task sorts one
    range in memory)."""
    from pyspark.sql import functions as F

    parts = {t: 1 if n <= TABLE_PART_ROWS else nparts * -(-n // (TABLE_PART_ROWS * nparts))
             for t, n in counts.items()}
    big = sorted(t for t, p in parts.items() if p > 1)
    out = {t: [] for t in counts}
    if not big:
        return out
    df = None
    for rows, _ in layers:  # chunks of flows a rerun replaced count too: the bounds only balance
        d = rows.where(F.col("table").isin(big)).select("table", "k1", "flow", "k2", "n")
        df = d if df is None else df.unionByName(d)
    chunks: dict = {t: [] for t in big}
    for r in df.collect():
        chunks[r.table].append(((r.k1, r.flow, r.k2), r.n))
    for t in big:
        out[t] = range_bounds(chunks[t], parts[t])
    return out


def _direct_dir(uri: str) -> str | None:
    """The local directory the table tasks write ``uri`` to themselves, or None (Spark's
    writer: a remote file system).  A local output directory, like the input paths, must be
    the same path on every executor."""
    return _local(uri)


def _table(spark, layers, table: str, bounds: list, excluded: list, directory: str | None = None):
    """A result table from the stage-2 chunks, in single-process order (connection first
    seen, then row): each chunk goes to the ranges of ``bounds`` its keys overlap (range
    ``i`` to partition ``i``, by the keys of :func:`partition_keys`), where
    :func:`sorted_range` keeps its rows of that range, minus the flows a later layer ran
    again (``excluded[layer]``), and sorts them.  Spark names the files by partition (and
    with ``directory`` each task writes ``part-<range>.parquet`` there itself, giving
    ``(range, rows)``), so read in name order they hold the rows in order.  Only the chunks move between tasks:
    no shuffle of rows, no sampling pass."""
    from pyspark.sql import functions as F

    chunks = None
    for li, (rows, _) in enumerate(layers):
        d = rows.where(F.col("table") == table).select(F.lit(li).alias("layer"), "k1", "flow", "k2", "hk1", "hflow",
                                                       "hk2", "blob")
        chunks = d if chunks is None else chunks.unionByName(d)
    if bounds:
        def rank(k1, flow, k2):  # the range of a key: the number of boundaries at or below it
            r = F.lit(0)
            for b1, bf, b2 in bounds:
                past = (k1 > F.lit(b1)) | ((k1 == F.lit(b1)) & ((flow > F.lit(bf)) | ((flow == F.lit(bf)) & (k2 >= F.lit(b2)))))
                r = r + past.cast("int")
            return r

        n = len(bounds) + 1
        keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(spark, n)])
        chunks = chunks.withColumn("r", F.explode(F.sequence(rank(F.col("k1"), F.col("flow"), F.col("k2")),
                                                            rank(F.col("hk1"), F.col("hflow"), F.col("hk2")))))
        chunks = chunks.repartition(n, F.element_at(keys, F.col("r") + 1))
    else:
        chunks = chunks.withColumn("r", F.lit(0)).repartition(1)
    chunks = chunks.select("layer", "r", "blob")
    if directory is not None:
        return chunks.mapInArrow(_range_fn(bounds, excluded, table, directory), "r int, rows long")
    return chunks.mapInArrow(_range_fn(bounds, excluded), table_schema(table))


def _meta_rows(layers):
    """The "_flow" rows of the current result: each layer minus the flows rerun later."""
    from pyspark.sql import functions as F

    out = None
    for rows, excluded in layers:
        df = rows.where(F.col("table") == "_flow")
        for ex in excluded:
            df = df.join(ex, "flow", "left_anti")
        out = df if out is None else out.unionByName(df)
    return _meta(out)


# --------------------------------------------------------------------------- tables from local files


def _chunk_files(layer_dirs: list, table: str):
    """(layer, path) of the stage-2 files holding chunks of ``table``, layer by layer, in name order."""
    for li, d in enumerate(layer_dirs):
        td = os.path.join(d, f"table={table}")
        if os.path.isdir(td):
            for f in sorted(os.listdir(td)):
                if f.endswith(".parquet") and not f.startswith((".", "_")):
                    yield li, os.path.join(td, f)


def _local_table_bounds(layer_dirs: list, counts: dict, nparts: int) -> dict:
    """:func:`_table_bounds` from the local stage-2 files (pyarrow, on the driver: a few
    columns of one row per chunk)."""
    import pyarrow.parquet as pq

    parts = {t: 1 if n <= TABLE_PART_ROWS else nparts * -(-n // (TABLE_PART_ROWS * nparts))
             for t, n in counts.items()}
    out: dict = {t: [] for t in counts}
    for t, p in parts.items():
        if p > 1:
            chunks = []
            for _, path in _chunk_files(layer_dirs, t):
                k = pq.read_table(path, columns=["k1", "flow", "k2", "n"], use_threads=False)
                chunks += [((a, b, c), n) for a, b, c, n in zip(*(k.column(i).to_pylist() for i in range(4)))]
            out[t] = range_bounds(chunks, p)
    return out


def _range_chunks(layer_dirs: list, table: str, bounds: list, r: int):
    """``(layer, r, blob)`` of the stage-2 chunks of ``table`` whose keys overlap range ``r`` of
    ``bounds`` (a key's range: the number of boundaries at or below it), read from the local
    files: the keys of every chunk, then the blobs of the row groups that hold wanted ones."""
    import bisect

    import pyarrow.parquet as pq

    for li, path in _chunk_files(layer_dirs, table):
        pf = pq.ParquetFile(path)
        k = pf.read(columns=["k1", "flow", "k2", "hk1", "hflow", "hk2"], use_threads=False)
        want = [i for i, (a, b, c, d, e, f) in enumerate(zip(*(k.column(j).to_pylist() for j in range(6))))
                if bisect.bisect_right(bounds, (a, b, c)) <= r <= bisect.bisect_right(bounds, (d, e, f))]
        if not want:
            continue
        starts = [0]
        for g in range(pf.metadata.num_row_groups):
            starts.append(starts[-1] + pf.metadata.row_group(g).num_rows)
        by_group: dict = {}
        for i in want:
            by_group.setdefault(bisect.bisect_right(starts, i) - 1, []).append(i)
        for g, idx in sorted(by_group.items()):
            blobs = pf.read_row_group(g, columns=["blob"], use_threads=False).column(0)
            for i in idx:
                yield li, r, blobs[i - starts[g]].as_py()


def _tables_task(layer_dirs: list, bounds: dict, excluded: list, out_dirs: dict):
    def fn(items):
        for table, r in items:
            t = sorted_range_table(_range_chunks(layer_dirs, table, bounds[table], r), bounds[table], excluded)
            yield table, r, write_range(out_dirs[table], table, r, t)
    return fn


def _write_tables_local(spark, layer_dirs: list, excluded: list, counts: dict, out_dirs: dict, nparts: int) -> None:
    """Every table's ranges written by one task each (:func:`_range_chunks`,
    :func:`sorted_range_table`, :func:`write_range`), in one Spark job, the largest ranges
    first; an empty table gets one file with its columns."""
    bounds = _local_table_bounds(layer_dirs, counts, nparts)
    items = sorted(((t, r) for t in counts for r in range(len(bounds[t]) + 1)),
                   key=lambda it: (-counts[it[0]] / (len(bounds[it[0]]) + 1), it))
    for t in counts:
        shutil.rmtree(out_dirs[t], ignore_errors=True)
        os.makedirs(out_dirs[t])
    got = spark.sparkContext.parallelize(items, len(items)).mapPartitions(
        _tables_task(layer_dirs, bounds, excluded, out_dirs)).collect()
    for t in counts:
        n = sum(rows for table, _, rows in got if table == t)
        if n != counts[t]:  # each row in exactly one range
            raise RuntimeError(f"table {t}: {n} rows written of {counts[t]}")
        open(os.path.join(out_dirs[t], "_SUCCESS"), "wb").close()


# --------------------------------------------------------------------------- summaries


def _lat_aggs(col: str = "settlement_latency"):
    from pyspark.sql import functions as F

    pct = F.expr(f"percentile({col}, array({', '.join(str(p / 100) for p in PERCENTILES)}))")
    return [
        F.count(col).alias("count"),
        pct.alias("_pct"),
        F.max(col).alias("max"),
        F.min(col).alias("min"),
        F.avg(col).alias("mean"),
    ]


def _unpack_pct(df):
    from pyspark.sql import functions as F

    for i, p in enumerate(PERCENTILES):
        df = df.withColumn(f"p{p}", F.col("_pct").getItem(i))
    return df.drop("_pct")


def _sorted(df, *cols):
    """``df`` sorted by ``cols`` in one partition (one output file): summaries are small (a
    row per link, address, window...), and ``orderBy`` would cost a sampling job."""
    return df.repartition(1).sortWithinPartitions(*cols)


def summary_frame(name: str, tables: dict, window: float = DEFAULT_WINDOW):
    """The summary DataFrame ``name`` (one of :data:`SUMMARIES`), computed in Spark from the
    table DataFrames (percentiles: Spark's exact ``percentile``, linear interpolation like
    numpy's default)."""
    from pyspark.sql import functions as F

    d = tables["deliveries"]
    links = tables["links"]
    stalls = tables["stalls"]
    stat_cols = ["count"] + [f"p{p}" for p in PERCENTILES] + ["max", "min", "mean"]

    if name == "latency_by_link":
        lk = links.select("connection", "session", "channel", F.col("name").alias("link"), "link_index", "address")
        per_link = _unpack_pct(d.groupBy("connection", "link_index").agg(*_lat_aggs()))
        return _sorted(lk.join(per_link, ["connection", "link_index"], "left")
                       .withColumn("count", F.coalesce(F.col("count"), F.lit(0)))
                       .select("connection", "session", "channel", "link", "link_index", "address", *stat_cols),
                       F.col("p99").desc_nulls_last(), "connection", "link_index")
    if name == "latency_by_address":
        addrs = links.select("address").distinct()
        per_addr = _unpack_pct(d.groupBy(F.col("address").alias("_a")).agg(*_lat_aggs()))
        return _sorted(addrs.join(per_addr, addrs["address"].eqNullSafe(per_addr["_a"]), "left")
                       .withColumn("count", F.coalesce(F.col("count"), F.lit(0)))
                       .select("address", *stat_cols),
                       F.col("p99").desc_nulls_last(), "address")
    if name == "latency_by_window":
        wus = round(float(window) * 1_000_000)  # windows in whole microseconds since the epoch, exactly
        win = d.withColumn("_wstart", F.floor(F.expr("unix_micros(first_time)") / F.lit(wus)) * F.lit(wus))
        outcome_cols = [F.sum(F.when(F.col("outcome") == o, 1).otherwise(0)).alias(o) for o in OUTCOMES]
        return _sorted(_unpack_pct(win.groupBy("_wstart").agg(
            F.count(F.lit(1)).alias("deliveries"), *_lat_aggs(), *outcome_cols,
            F.sum(F.when(F.col("settled_time").isNull(), 1).otherwise(0)).alias("unsettled")))
            .withColumn("window_start", F.expr("timestamp_micros(CAST(_wstart AS BIGINT))"))
            .withColumn("window_end", F.expr(f"timestamp_micros(CAST(_wstart AS BIGINT) + {wus})"))
            .select("window_start", "window_end", "deliveries", *stat_cols, *OUTCOMES, "unsettled"),
            "window_start")
    if name == "outcomes":
        return _sorted(d.groupBy("address", "outcome").agg(
            F.count(F.lit(1)).alias("deliveries"),
            F.sum(F.when(F.col("presettled"), 1).otherwise(0)).alias("presettled"),
            F.sum(F.when(F.col("settled_time").isNull(), 1).otherwise(0)).alias("unsettled")),
            "address", "outcome")
    kinds = ("link-credit", "initial-credit", "drain", "session-window")
    # idle periods (idle = true) are rows of the stalls table but not stalls: counted apart
    real = ~F.col("idle")
    stall_aggs = [F.sum(F.when(real, 1).otherwise(0)).alias("stalls"),
                  F.coalesce(F.sum(F.when(real, F.col("duration"))), F.lit(0.0)).alias("stalled_seconds"),
                  F.max(F.when(real, F.col("duration"))).alias("longest"),
                  F.sum(F.when(real & F.col("open"), 1).otherwise(0)).alias("open")] + [
        F.sum(F.when(real & (F.col("kind") == k), 1).otherwise(0)).alias(k.replace("-", "_")) for k in kinds] + [
        F.sum(F.when(F.col("idle"), 1).otherwise(0)).alias("idle_periods"),
        F.coalesce(F.sum(F.when(F.col("idle"), F.col("duration"))), F.lit(0.0)).alias("idle_seconds")]
    if name == "stalls_by_link":
        return _sorted(stalls.groupBy("connection", "channel", "link", "link_index").agg(*stall_aggs),
                       F.col("stalled_seconds").desc_nulls_last(), "connection")
    if name == "stalls_by_address":
        la = links.select("connection", "link_index", "address")
        return _sorted(stalls.join(la, ["connection", "link_index"], "left").groupBy("address").agg(*stall_aggs),
                       F.col("stalled_seconds").desc_nulls_last())
    raise ValueError(f"unknown summary {name!r}")


def summaries_frames(tables: dict, window: float = DEFAULT_WINDOW) -> dict:
    """All the summary DataFrames (see :func:`summary_frame`)."""
    return {name: summary_frame(name, tables, window) for name in SUMMARIES}


# --------------------------------------------------------------------------- summaries in Python tasks
#
# With a local output directory the summaries are computed by Python tasks straight from the
# written tables (pyarrow + numpy, one task per summary, one Spark job): the same definitions
# as :func:`summary_frame` (which a remote output still goes through), without 22 small JVM
# jobs scanning the tables again.  Each task writes ``part-00000.parquet`` with the schema
# Spark gives the summary (:func:`summary_frame`'s, nullability included).


def _spark_to_arrow(spark_schema):
    """A pyarrow schema for a Spark StructType of summary columns (flat, nullability kept)."""
    import pyarrow as pa

    m = {"StringType": pa.string(), "LongType": pa.int64(), "DoubleType": pa.float64(),
         "BooleanType": pa.bool_(), "IntegerType": pa.int32(), "TimestampType": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, m[type(f.dataType).__name__], nullable=f.nullable)
                      for f in spark_schema.fields])


def _lat_stats(values) -> dict:
    """count, percentiles (Spark's ``percentile``: position p * (n - 1), linear interpolation
    between the neighbours), max, min, mean of the non-null ``values`` (a numpy array)."""
    import numpy as np

    n = len(values)
    if not n:
        return {"count": 0, **{f"p{p}": None for p in PERCENTILES}, "max": None, "min": None, "mean": None}
    v = np.sort(values, kind="stable")
    out = {"count": n}
    for p in PERCENTILES:
        pos = p / 100 * (n - 1)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        out[f"p{p}"] = float(v[lo]) if lo == hi else float((hi - pos) * v[lo] + (pos - lo) * v[hi])
    out["max"] = float(v[-1])
    out["min"] = float(v[0])
    out["mean"] = float(np.add.reduce(values)) / n
    return out


def _keys_of(t, cols) -> list:
    """The rows of columns ``cols`` of Arrow table ``t`` as tuples."""
    return list(zip(*(t.column(c).to_pylist() for c in cols))) if t.num_rows else []


def _group_lat(t, keys) -> dict:
    """key tuple -> :func:`_lat_stats` of the non-null settlement latencies of the group (groups
    with none are absent)."""
    import numpy as np
    import pyarrow.compute as pc

    t = t.select([*keys, "settlement_latency"]).filter(pc.is_valid(t.column("settlement_latency")))
    if not t.num_rows:
        return {}
    g = t.group_by(list(keys), use_threads=False).aggregate([("settlement_latency", "list")])
    lists = g.column("settlement_latency_list").combine_chunks()
    offs = lists.offsets.to_numpy()
    vals = lists.values.to_numpy(zero_copy_only=False)
    return {k: _lat_stats(vals[offs[i]:offs[i + 1]]) for i, k in enumerate(_keys_of(g, keys))}


def _group_sums(t, keys, cols: dict, max_cols: dict | None = None) -> dict:
    """key tuple -> {name: sum} (and {name: max}) over the groups of ``t`` by ``keys``; ``cols``
    name -> Arrow array (sum of an empty or all-null group: None), plus ``_rows`` (rows)."""
    import pyarrow as pa

    if not t.num_rows:
        return {}
    tb = pa.table({**{k: t.column(k) for k in keys}, **{f"s_{n}": a for n, a in cols.items()},
                   **{f"m_{n}": a for n, a in (max_cols or {}).items()}})
    aggs = [(f"s_{n}", "sum") for n in cols] + [(f"m_{n}", "max") for n in (max_cols or {})] + [([], "count_all")]
    g = tb.group_by(list(keys), use_threads=False).aggregate(aggs)
    out = {}
    names = [f"s_{n}_sum" for n in cols] + [f"m_{n}_max" for n in (max_cols or {})]
    labels = list(cols) + list(max_cols or {})
    vals = [g.column(c).to_pylist() for c in names]
    rows = g.column("count_all").to_pylist()
    for i, k in enumerate(_keys_of(g, keys)):
        d = {lab: v[i] for lab, v in zip(labels, vals)}
        d["_rows"] = rows[i]
        out[k] = d
    return out


def _flag(a):
    """``when(cond, 1).otherwise(0)`` of a boolean Arrow array (null counts as false)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.fill_null(a, False), pa.int64())


def _asc(v):  # Spark's ascending order: nulls first, NaN after every number
    if v is None:
        return (0, 0, 0)
    if isinstance(v, float) and v != v:
        return (1, 1, 0)
    return (1, 0, v)


def _desc_nulls_last(v):
    if v is None:
        return (1, 0, 0)
    if isinstance(v, float) and v != v:
        return (0, 0, 0)
    return (0, 1, -v)


SUMMARY_READS = {  # the table columns each summary reads
    "latency_by_link": {"links": ("connection", "session", "channel", "name", "link_index", "address"),
                        "deliveries": ("connection", "link_index", "settlement_latency")},
    "latency_by_address": {"links": ("address",), "deliveries": ("address", "settlement_latency")},
    "latency_by_window": {"deliveries": ("first_time", "settlement_latency", "outcome", "settled_time")},
    "outcomes": {"deliveries": ("address", "outcome", "presettled", "settled_time")},
    "stalls_by_link": {"stalls": ("connection", "channel", "link", "link_index", "idle", "duration", "open", "kind")},
    "stalls_by_address": {"stalls": ("connection", "link_index", "idle", "duration", "open", "kind"),
                          "links": ("connection", "link_index", "address")},
}
_STALL_KINDS = ("link-credit", "initial-credit", "drain", "session-window")


def _stall_rows(s, keys) -> dict:
    """key tuple -> the stall columns of :func:`summary_frame` (idle periods counted apart)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    idle = s.column("idle")
    real = pc.invert(idle)  # null stays null: neither a stall nor an idle period
    real_f = pc.fill_null(real, False)
    idle_f = pc.fill_null(idle, False)
    dur = s.column("duration")
    none = pa.scalar(None, pa.float64())
    cols = {"stalls": _flag(real), "stalled_seconds": pc.if_else(real_f, dur, none),
            "open": _flag(pc.and_kleene(real, s.column("open"))),
            **{k.replace("-", "_"): _flag(pc.and_kleene(real, pc.equal(s.column("kind"), k))) for k in _STALL_KINDS},
            "idle_periods": _flag(idle), "idle_seconds": pc.if_else(idle_f, dur, none)}
    g = _group_sums(s, keys, cols, {"longest": pc.if_else(real_f, dur, none)})
    out = {}
    for k, d in g.items():
        out[k] = {"stalls": d["stalls"], "stalled_seconds": d["stalled_seconds"] if d["stalled_seconds"] is not None
                  else 0.0, "longest": d["longest"], "open": d["open"],
                  **{c.replace("-", "_"): d[c.replace("-", "_")] for c in _STALL_KINDS},
                  "idle_periods": d["idle_periods"],
                  "idle_seconds": d["idle_seconds"] if d["idle_seconds"] is not None else 0.0}
    return out


def summary_rows(name: str, read, window: float = DEFAULT_WINDOW) -> list[dict]:
    """The rows of summary ``name`` in output order, computed in Python from the tables
    (``read(table, columns)`` -> Arrow table): what :func:`summary_frame` computes in Spark."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    stats = ["count"] + [f"p{p}" for p in PERCENTILES] + ["max", "min", "mean"]
    empty = _lat_stats(np.empty(0))
    cols = SUMMARY_READS[name]
    t = {tb: read(tb, list(c)) for tb, c in cols.items()}
    if name == "latency_by_link":
        per = _group_lat(t["deliveries"], ("connection", "link_index"))
        rows = []
        for c, s, ch, n, li, a in _keys_of(t["links"], cols["links"]):
            st = per.get((c, li), empty) if c is not None and li is not None else empty
            rows.append({"connection": c, "session": s, "channel": ch, "link": n, "link_index": li, "address": a,
                         **st})
        rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["connection"]), _asc(r["link_index"]),
                                 _asc(r["session"]), _asc(r["channel"]), _asc(r["link"]), _asc(r["address"])))
        return rows
    if name == "latency_by_address":
        per = _group_lat(t["deliveries"], ("address",))
        addrs = set(t["links"].column("address").to_pylist())
        rows = [{"address": a, **per.get((a,), empty)} for a in addrs]
        rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["address"])))
        return rows
    if name == "latency_by_window":
        d = t["deliveries"]
        wus = round(float(window) * 1_000_000)
        ft = d.column("first_time")
        us = pc.cast(ft, pa.int64())
        if ft.type.unit == "ns":  # (the registry's nanoseconds; Spark's tables hold microseconds)
            us = pa.array(np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 1000), pa.int64(),
                          mask=~pc.is_valid(us).to_numpy(zero_copy_only=False))
        # floor(micros / window) * window, in doubles then longs like Spark's expression
        f = np.floor(pc.cast(us, pa.float64()).to_numpy(zero_copy_only=False) / float(wus))
        valid = pc.is_valid(us).to_numpy(zero_copy_only=False)
        start = pa.array(np.where(valid, f, 0).astype(np.int64) * wus, pa.int64(), mask=~valid)
        d = d.append_column("_wstart", start)
        lat = _group_lat(d, ("_wstart",))
        oc = d.column("outcome")
        sums = _group_sums(d, ("_wstart",), {**{o: _flag(pc.equal(oc, o)) for o in OUTCOMES},
                                             "unsettled": _flag(pc.is_null(d.column("settled_time")))})
        rows = []
        for (w,), sm in sums.items():
            ts = None if w is None else _utc_micros(w)
            te = None if w is None else _utc_micros(w + wus)
            rows.append({"window_start": ts, "window_end": te, "deliveries": sm["_rows"],
                         **lat.get((w,), empty), **{o: sm[o] for o in OUTCOMES}, "unsettled": sm["unsettled"],
                         "_w": w})
        rows.sort(key=lambda r: _asc(r["_w"]))
        return rows
    if name == "outcomes":
        d = t["deliveries"]
        sums = _group_sums(d, ("address", "outcome"), {"presettled": _flag(d.column("presettled")),
                                                        "unsettled": _flag(pc.is_null(d.column("settled_time")))})
        rows = [{"address": a, "outcome": o, "deliveries": sm["_rows"], "presettled": sm["presettled"],
                 "unsettled": sm["unsettled"]} for (a, o), sm in sums.items()]
        rows.sort(key=lambda r: (_asc(r["address"]), _asc(r["outcome"])))
        return rows
    if name == "stalls_by_link":
        keys = ("connection", "channel", "link", "link_index")
        rows = [dict(zip(keys, k), **v) for k, v in _stall_rows(t["stalls"], keys).items()]
        rows.sort(key=lambda r: (_desc_nulls_last(r["stalled_seconds"]), _asc(r["connection"]), _asc(r["channel"]),
                                 _asc(r["link_index"]), _asc(r["link"])))
        return rows
    if name == "stalls_by_address":
        s = t["stalls"]
        la: dict = {}  # (connection, link_index) -> addresses: the links table's key, so one each
        for c, li, a in _keys_of(t["links"], ("connection", "link_index", "address")):
            if c is not None and li is not None:
                la.setdefault((c, li), []).append(a)
        idx, addr = [], []
        for i, (c, li) in enumerate(_keys_of(s, ("connection", "link_index"))):
            for a in la.get((c, li), [None]):  # a left join: unmatched stalls under a null address
                idx.append(i)
                addr.append(a)
        s = s.take(pa.array(idx, pa.int64())).append_column("address", pa.array(addr, pa.string()))
        rows = [{"address": k[0], **v} for k, v in _stall_rows(s, ("address",)).items()]
        rows.sort(key=lambda r: (_desc_nulls_last(r["stalled_seconds"]), _asc(r["address"])))
        return rows
    raise ValueError(f"unknown summary {name!r}")


def _utc_micros(us: int):
    import datetime as dt

    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)


def _read_local_table(directory: str):
    def read(table: str, columns: list):
        import pyarrow.parquet as pq

        return pq.read_table(os.path.join(directory, table), columns=columns, use_threads=False)
    return read


def write_summary_file(directory: str, rows: list[dict], schema) -> int:
    """Write the summary ``rows`` to ``directory/part-00000.parquet`` (schema ``schema``, snappy),
    through a temporary name, and ``_SUCCESS``; returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    t = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    path = os.path.join(directory, "part-00000.parquet")
    tmp = os.path.join(directory, f".part-00000.parquet.{os.getpid()}.tmp")
    pq.write_table(t, tmp, compression="snappy")
    os.replace(tmp, path)
    open(os.path.join(directory, "_SUCCESS"), "wb").close()
    return t.num_rows


def _summaries_task(tables_dir: str, window: float, schemas: dict):
    def fn(names):
        for name in names:
            rows = summary_rows(name, _read_local_table(tables_dir), window)
            yield name, write_summary_file(os.path.join(tables_dir, name), rows, schemas[name])
    return fn


def write_summaries_local(spark, tables: dict, directory: str, window: float = DEFAULT_WINDOW) -> dict:
    """The summaries of the tables under the local ``directory``, computed and written there by
    Python tasks (one per summary, one Spark job); returns name -> rows."""
    schemas = {name: _spark_to_arrow(summary_frame(name, tables, window).schema) for name in SUMMARIES}
    order = list(SUMMARIES)  # those over the deliveries first: the job waits for its last task
    rdd = spark.sparkContext.parallelize(order, len(order))
    return dict(rdd.mapPartitions(_summaries_task(directory, window, schemas)).collect())


# --------------------------------------------------------------------------- spark-submit entry


def parse_size(text: str) -> int:
    """'64m', '1g', '4096', '512k' -> bytes."""
    t = str(text).strip().lower().rstrip("b").rstrip("i")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/spark.py",
                                 description="Spark analysis of capture archives (see pipelines/spark.py)")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--master")
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--split-size", default=str(DEFAULT_SPLIT_SIZE))
    ap.add_argument("--window", type=float, default=DEFAULT_WINDOW)
    ap.add_argument("--frames", action="store_true")
    ap.add_argument("--port", type=int, action="append", default=[])
    ap.add_argument("--keylog", help="TLS key log file (default: $SSLKEYLOGFILE)")
    a = ap.parse_args(argv)
    conf = [tuple(c.split("=", 1)) for c in a.conf]
    try:
        files = expand_inputs(a.paths)
    except InputError as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return 3 if e.code == "missing" else 4
    del files
    spark = spark_session(master=a.master, conf=conf)
    try:
        res = run_archive(spark, a.paths, a.out, split_size=parse_size(a.split_size), window=a.window,
                          frames=a.frames, partitions=a.partitions, ports=a.port,
                          keylog=read_keylog(a.keylog))
    except InputError as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return 3 if e.code == "missing" else 4
    finally:
        pass
    print(json.dumps({"counts": res["counts"], "tables": res["tables"], "stats": res["stats"],
                      "errors": res["errors"], "files": res["files"], "order": res["order"],
                      "gaps": res["gaps"]}, default=str))
    spark.stop()
    return 5 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
