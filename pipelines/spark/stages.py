"""The archive job's Spark schemas and the functions its tasks run (``mapInArrow`` /
``mapPartitions``): stage 1 per range, stage 2 per flow partition, the table ranges, the
flows' facts, the sweep ticks (the sharding contract's clock)."""

from __future__ import annotations

import json
import os
import pickle
from array import array

from amqp_dissect.pipelines.archive import (KIND_SUMMARY, KIND_TCP, FlowRunner, ROW_TABLES, CaptureChanged, Range,
                                            RecordReader, STAGE1_COLUMNS, decode_range, end_sensitive, fill_batches, range_file, sorted_range,
                                            sorted_range_table, write_range)
from amqp_dissect.pipelines.archive.records import decode_batches
from amqp_dissect.pipelines.archive.tables import in_order
from amqp_dissect.results.tables import spark_schema
from amqp_dissect.shard import sweep_ticks


STAGE2_COLUMNS = ("flow", "packet", "ts", "linktype", "data", "orig_len", "file", "pos", "caplen")


# --------------------------------------------------------------------------- schemas


def spark_types():
    from pyspark.sql import types as T

    return T


def stage1_schema():
    T = spark_types()
    return T.StructType([
        T.StructField("rid", T.IntegerType()), T.StructField("idx", T.LongType()),
        T.StructField("ts", T.LongType()), T.StructField("linktype", T.IntegerType()),
        T.StructField("data", T.BinaryType()), T.StructField("orig_len", T.LongType()),
        T.StructField("flow", T.StringType()), T.StructField("kind", T.ByteType()),
        T.StructField("pos", T.LongType()), T.StructField("caplen", T.IntegerType()),
        T.StructField("meta", T.StringType()), T.StructField("file", T.IntegerType()),
    ])


def rows_schema():
    T = spark_types()
    return T.StructType([
        T.StructField("table", T.StringType()), T.StructField("flow", T.StringType()),
        T.StructField("k1", T.LongType()), T.StructField("k2", T.LongType()),
        T.StructField("n", T.LongType()), T.StructField("hk1", T.LongType()),
        T.StructField("hflow", T.StringType()), T.StructField("hk2", T.LongType()),
        T.StructField("blob", T.BinaryType()),
        T.StructField("provisional", T.BooleanType()),  # rows a carried flow made at its finish (FlowRunner.run)
    ])


def table_schema(table: str):
    """The Spark schema of an output table, from the column registry (times as
    TimestampType, JSON columns as strings, ulong as decimal(20, 0))."""
    return spark_schema(table)


def spark_arrow_schema(spark_schema):
    import pyarrow as pa

    m = {"StringType": pa.string(), "LongType": pa.int64(), "DoubleType": pa.float64(),
         "BooleanType": pa.bool_(), "IntegerType": pa.int32(), "BinaryType": pa.binary(), "ByteType": pa.int8()}
    return pa.schema([pa.field(f.name, m[type(f.dataType).__name__]) for f in spark_schema.fields])


# --------------------------------------------------------------------------- task CPU, profiles

PROFILE_ENV = "AMQP_DISSECT_SPARK_PROFILE"  # a directory: each task writes its cProfile there


class Meter:
    """The CPU seconds the Python tasks of each step spend (``time.process_time()`` of the
    worker, from the task's first call to its last row: decoding, row conversion, Arrow and
    pickle serialization of what it reads and gives), summed by a Spark accumulator per step;
    and, when :data:`PROFILE_ENV` names a directory (read on the driver), one cProfile file per
    task there, ``<step>-<partition>-<pid>.prof``."""

    def __init__(self, spark):
        self._sc = spark.sparkContext
        self._acc: dict = {}
        self._here: dict = {}
        self.profile_dir = os.environ.get(PROFILE_ENV) or None
        if self.profile_dir:
            os.makedirs(self.profile_dir, exist_ok=True)

    def wrap(self, step: str, fn):
        """``fn`` (an iterator of batches or rows to an iterator) measured as part of ``step``."""
        acc = self._acc.get(step)
        if acc is None:
            acc = self._acc[step] = self._sc.accumulator(0.0)
        return _metered(fn, acc, step, self.profile_dir)

    def add(self, step: str, seconds: float) -> None:
        """CPU seconds the driver itself spent on ``step`` (work done in its own process, not in tasks)."""
        self._here[step] = self._here.get(step, 0.0) + seconds

    def seconds(self) -> dict:
        """step -> CPU seconds of its Python tasks so far (on the driver, after the actions), and of
        the driver's own work on it (:meth:`add`)."""
        out = {k: a.value for k, a in self._acc.items()}
        for k, v in self._here.items():
            out[k] = out.get(k, 0.0) + v
        return {k: round(v, 3) for k, v in out.items()}


_WORKER_SET: list = []  # this worker process is set up for the job's tasks (_worker_setup)


def _worker_setup() -> None:
    """Once per Python worker (it runs many tasks): its garbage collector set as the CLI's
    processes set theirs (:func:`~amqp_dissect.pipelines.analysis_gc`), and Arrow's thread pool
    the size of the cores Spark gives a task (``spark.task.cpus``, 1 by default): the other
    cores run other tasks, and Arrow's hand-offs for a task's small buffers cost more than
    they gave (reading a stage-2 chunk: four times the CPU)."""
    if _WORKER_SET:
        return
    import pyarrow as pa

    from amqp_dissect.pipelines import analysis_gc

    analysis_gc()
    cpus = 1
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        cpus = int(ctx.cpus()) if ctx is not None else 1
    except Exception:  # (an older pyspark without TaskContext.cpus: one core a task)
        pass
    pa.set_cpu_count(max(1, cpus))
    _WORKER_SET.append(True)


# test hook: the first attempt of the first task of each step named here (comma-separated) loses
# its Python worker (SIGKILL) after its first result, as an executor lost half way; Spark runs the
# task again
LOSE_TASK_AT = "AMQP_DISSECT_ARCHIVE_LOSE_TASK"


def _loses_its_worker(step: str) -> bool:
    if step not in os.environ.get(LOSE_TASK_AT, "").split(","):
        return False
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0


def _lost_after_first(results, step: str):
    import signal

    for out in results:
        yield out
        mark = os.environ.get(LOSE_TASK_AT + "_MARK")  # (a file the hook leaves, a line per step: the test knows it ran)
        if mark:
            with open(mark, "a") as f:
                f.write(step + "\n")
        os.kill(os.getpid(), signal.SIGKILL)


def _metered(fn, acc, step: str, profile_dir):
    import time

    def run(it):
        _worker_setup()
        prof = None
        if profile_dir:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t = time.process_time()
        try:
            yield from (_lost_after_first(fn(it), step) if _loses_its_worker(step) else fn(it))
        finally:
            acc.add(time.process_time() - t)
            if prof is not None:
                prof.disable()
                from pyspark import TaskContext

                ctx = TaskContext.get()
                part = ctx.partitionId() if ctx is not None else 0
                prof.dump_stats(os.path.join(profile_dir, f"{step}-{part:05d}-{os.getpid()}.prof"))
    return run


def metered(meter, step: str, fn):
    """``meter.wrap(step, fn)``, or ``fn`` itself without a meter."""
    return fn if meter is None else meter.wrap(step, fn)


def pack_tasks(items, weight, n: int) -> list[list]:
    """``items`` packed into at most ``n`` tasks of about the same weight (``weight(item)``):
    the heaviest first, each to the lightest task so far (the last task to finish is a light
    one); a task's items in that order, empty tasks left out.  A Python task costs Spark a
    fixed time (its launch, the worker's round trips: tens of ms), so small items share one."""
    import heapq

    n = max(1, min(len(items), n))
    loads = [(0, i) for i in range(n)]
    bins: list[list] = [[] for _ in range(n)]
    for it in sorted(items, key=weight, reverse=True):
        load, i = heapq.heappop(loads)
        bins[i].append(it)
        heapq.heappush(loads, (load + max(1, weight(it)), i))
    return [b for b in bins if b]


# --------------------------------------------------------------------------- executor functions


def _batches(rows, arrow_schema, size: int = 2048, max_bytes: int = 32 << 20, sized: tuple | None = None):
    """Group tuples into Arrow record batches of at most ``size`` rows / ~``max_bytes``: the
    bytes of every bytes or str value, or with ``sized`` of the values at those positions only
    (the columns that can be large: no test of every value of every row)."""
    import pyarrow as pa

    names = arrow_schema.names
    types = [arrow_schema.field(n).type for n in names]

    def batch(buf):
        return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(zip(*buf), types)],
                                          schema=arrow_schema)
    buf = []
    nbytes = 0
    for r in rows:
        buf.append(r)
        if sized is None:
            for v in r:
                if isinstance(v, (bytes, str)):
                    nbytes += len(v)
        else:
            for i in sized:
                v = r[i]
                if v is not None:
                    nbytes += len(v)
        if len(buf) >= size or nbytes >= max_bytes:
            yield batch(buf)
            buf = []
            nbytes = 0
    if buf:
        yield batch(buf)


def stage1_fn(arrow_schema, directory: str | None = None):
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
SEG_BATCH_ROWS = 8192  # stage-1 rows per Arrow batch (and Parquet row group) of a range's file
SEG_MAX_BYTES = 32 << 20  # a batch's carried records (gzip, pcapng) end it at this many bytes
_SEG_DATA = STAGE1_COLUMNS.index("data")  # the stage-1 rows' column of a record's bytes (when they travel whole)


def stage1_direct_fn(arrow_schema, directory: str):
    """Stage 1 as a plain Python task (``mapPartitions`` over lists of range tuples, a task's
    ranges: ``job.stage1_tasks``): each range's rows written to ``directory``
    (:func:`_write_seg`), its summary (JSON text) given back.  No DataFrame: no query planning,
    no Arrow conversion in the JVM."""
    def fn(items):
        for task in items:
            for t in task:
                yield _write_seg(directory, Range(*t), arrow_schema)[10]
    return fn


SEG_SORT_ROWS = 1 << 20  # stage-1 rows of records given by offset a task sorts by flow at once (about 60 MB)


def _write_seg(directory: str, rng: Range, arrow_schema) -> tuple:
    """Write the stage-1 rows of ``rng`` (all but the summary) to ``directory/part-<rid>.parquet``
    with pyarrow (uncompressed: only offsets and flow keys, read once); through a temporary name
    and a rename, so that a task run again replaces its file.  Returns the summary row.  The JVM
    never converts or encodes these rows.

    Rows of records given by offset (about 60 bytes each) are written sorted by flow, up to
    :data:`SEG_SORT_ROWS` at a time, in row groups of :data:`SEG_BATCH_ROWS`: a row group then
    mostly holds one flow, and a stage-2 task skips those of flows it does not run
    (:func:`task_record_batches`, by the row group's statistics).  Rows that carry their record (gzip,
    pcapng) stream out in the order read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    summary = []

    def records():  # (a merged group: decode_range's tuples, rare)
        for row in decode_range(rng):
            if row[7] == KIND_SUMMARY:
                summary.append(row)
            else:
                yield row

    def columns():  # (a file or a byte range: the compiled loop's batches by column)
        for b in decode_batches(rng, SEG_BATCH_ROWS, SEG_MAX_BYTES):
            if type(b) is tuple:
                summary.append(b)
            else:
                yield _rows_batch(b, arrow_schema, rng.rid, rng.file)
    path = os.path.join(directory, SEG_FILE.format(rng.rid))
    tmp = os.path.join(directory, f".{SEG_FILE.format(rng.rid)}.{os.getpid()}.tmp")
    held: list | None = []  # rows of records given by offset, not yet written (None: the range's carry theirs)
    n = 0

    def write_held():
        if held:
            w.write_table(_by_flow(pa.Table.from_batches(held, schema=arrow_schema)), row_group_size=SEG_BATCH_ROWS)
            held.clear()
    with pq.ParquetWriter(tmp, arrow_schema, compression="none") as w:
        # (the rows' only large values are records that travel whole; the others are small or
        # None: only those are counted, in batches of SEG_BATCH_ROWS)
        batches = (_batches(records(), arrow_schema, size=SEG_BATCH_ROWS, max_bytes=SEG_MAX_BYTES, sized=(_SEG_DATA,))
                   if rng.group else columns())
        for b in batches:
            if held is not None and b.column(_SEG_DATA).null_count == b.num_rows:
                held.append(b)
                n += b.num_rows
                if n >= SEG_SORT_ROWS:
                    write_held()
                    n = 0
                continue
            write_held()
            held = None
            w.write_batch(b)
        write_held()
    os.replace(tmp, path)
    return summary[0]


def _rows_batch(b, arrow_schema, rid: int, file: int):
    """The Arrow batch of a range's :class:`~amqp_dissect.shard.Stage1Rows` (trimmed): the
    same rows as :func:`_batches` makes of :func:`decode_range`'s tuples, each column made whole
    (the integer columns from the arrays' buffers)."""
    import pyarrow as pa

    n = b.n

    def ints(a, t):
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(a)])
    i64, i32 = pa.int64(), pa.int32()
    notes = b.notes
    if b.data is not None:
        data = pa.array(b.data, pa.binary())
        pos, caplen = pa.nulls(n, i64), pa.nulls(n, i32)
    else:
        data = pa.nulls(n, pa.binary())
        if notes:  # (a note's offset is null)
            at = {i for i, _ in notes}
            pos = pa.array([None if i in at else v for i, v in enumerate(b.pos)], i64)
            caplen = pa.array([None if i in at else v for i, v in enumerate(b.caplen)], i32)
        else:
            pos, caplen = ints(b.pos, i64), ints(b.caplen, i32)
    if notes:
        meta = [None] * n
        for i, text in notes:
            meta[i] = text
        meta = pa.array(meta, pa.string())
    else:
        meta = pa.nulls(n, pa.string())
    cols = {"rid": ints(array("i", [rid]) * n, i32), "idx": ints(b.idx, i64), "ts": ints(b.ts, i64),
            "linktype": ints(b.linktype, i32), "data": data, "orig_len": ints(b.orig_len, i64),
            "flow": pa.array(b.flow, pa.string()), "kind": ints(b.kind, pa.int8()), "pos": pos, "caplen": caplen,
            "meta": meta, "file": ints(array("i", [file]) * n, i32)}
    return pa.RecordBatch.from_arrays([cols[c] for c in STAGE1_COLUMNS], schema=arrow_schema)


def _by_flow(t):
    """Stage-1 rows (in the order read) sorted by flow, each flow's rows in their order (a stable
    sort on the rank of each row's flow among the flow names: integers, not strings), the rows
    without a flow last."""
    import numpy as np
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(t.column("flow")).combine_chunks()
    names = enc.dictionary.to_pylist()
    rank = np.empty(len(names) + 1, dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    rank[len(names)] = len(names)
    codes = pc.fill_null(enc.indices, len(names)).to_numpy(zero_copy_only=False)
    return t.take(np.argsort(rank[codes], kind="stable"))


def stage2_fn(params_bc, arrow_schema, directory: str | None = None):
    """Stage-2 rows of the flows of a partition; with ``directory``, the task writes them there
    itself (:func:`_write_rows`) and gives no rows."""
    def fn(batches):
        params = params_bc.value
        runner = FlowRunner(params)
        reader = RecordReader(params.files)

        def rows():
            try:
                yield from runner.run(fill_batches(batches, reader))
            except CaptureChanged as e:  # the driver reports it (see _facts)
                yield ("_flow", "", 0, 0, 1, 0, "", 0, pickle.dumps({"error": str(e)}, 5), False)
        try:
            if directory is None:
                yield from _batches(rows(), arrow_schema, size=1000)
            else:
                from pyspark import TaskContext

                _write_rows(directory, TaskContext.get().partitionId(), rows(), arrow_schema)
        finally:
            reader.close()
    return fn


def flow_task(flow: str, nparts: int) -> int:
    """The stage-2 task of a flow the plan does not place, when the tasks read the stage-1
    files themselves (:func:`stage2_direct_fn`): a stable hash of its name."""
    import zlib

    return zlib.crc32(flow.encode("utf-8")) % nparts


_SEG_READ = ("rid", "idx", "ts", "linktype", "data", "orig_len", "flow", "kind", "pos", "caplen", "file")


def task_record_batches(seg_files: list, offsets: dict, part: int, nparts: int, plan: dict, only=None):
    """The stage-2 rows ``(flow, packet, ts, linktype, data, orig_len, file, pos, caplen)`` of task
    ``part`` of ``nparts``, read from the local stage-1 files ``seg_files``, sorted by flow then
    packet (what Spark's shuffle and sort give the task otherwise): the TCP records of the ranges
    in ``offsets`` (range id -> packets before it) whose flow the ``plan`` (flow -> task) puts
    in this task, the others by :func:`flow_task`; with ``only``, of those flows alone.  Holds the
    task's record index in Arrow form (about 60 bytes a record: pcap records travel as offsets;
    the job takes this path only while that stays small, see ``DIRECT_STAGE2_BYTES``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    off = np.zeros(max(offsets, default=0) + 1, dtype=np.int64)
    valid = np.zeros(len(off), dtype=bool)
    for rid, o in offsets.items():
        off[rid], valid[rid] = o, True
    mine: dict = {}
    pieces = []

    def is_mine(f):
        m = mine.get(f)
        if m is None:
            task = plan.get(f)
            if task is None:
                task = flow_task(f, nparts)
            m = mine[f] = task == part and (only is None or f in only)
        return m
    for path in seg_files:
        pf = pq.ParquetFile(path)
        groups = _groups_of(pf.metadata, is_mine)
        if not groups:
            continue
        t = pf.read_row_groups(groups, columns=list(_SEG_READ), use_threads=False)
        if not t.num_rows:
            continue
        # (each filter copies every column it keeps: made only when it drops a row)
        tcp = pc.equal(t["kind"], KIND_TCP)
        if not pc.all(tcp).as_py():
            t = t.filter(tcp)
        numbered = valid[t["rid"].to_numpy()]
        if not numbered.all():
            t = t.filter(pa.array(numbered))
        if not t.num_rows:
            continue
        flows = pc.dictionary_encode(t["flow"]).combine_chunks()
        keep = np.array([is_mine(f) for f in flows.dictionary.to_pylist()], dtype=bool)
        if not keep.all():
            t = t.filter(pa.array(keep[flows.indices.to_numpy(zero_copy_only=False)]))
        if not t.num_rows:
            continue
        packet = off[t["rid"].to_numpy()] + t["idx"].to_numpy() + 1
        pieces.append(pa.table({"flow": t["flow"], "packet": packet, "ts": t["ts"], "linktype": t["linktype"],
                                "data": t["data"], "orig_len": t["orig_len"], "file": t["file"], "pos": t["pos"],
                                "caplen": t["caplen"]}))
    if not pieces:
        return
    t = pa.concat_tables(pieces)
    del pieces
    # (a file's rows come sorted by flow and packet, the files in packet order: a task's rows are a few
    # runs, often one, put in order without a take of every row)
    t = in_order(t, pc.sort_indices(t, sort_keys=[("flow", "ascending"), ("packet", "ascending")]))
    yield from t.to_batches(max_chunksize=4096)


def task_records(seg_files: list, offsets: dict, part: int, nparts: int, plan: dict, only=None):
    """The rows of :func:`task_record_batches` one by one, as tuples."""
    for b in task_record_batches(seg_files, offsets, part, nparts, plan, only):
        yield from zip(*(b.column(i).to_pylist() for i in range(b.num_columns)))


_SEG_FLOW = STAGE1_COLUMNS.index("flow")


def _groups_of(meta, is_mine) -> list[int]:
    """The row groups of a stage-1 file (``meta``: its Parquet metadata) that may hold records of a
    flow ``is_mine``: all but those whose statistics show one flow only (its rows sorted by flow,
    :func:`_write_seg`), not mine (rows without a flow: not TCP records)."""
    out = []
    for i in range(meta.num_row_groups):
        st = meta.row_group(i).column(_SEG_FLOW).statistics
        if st is not None and st.has_min_max and st.min == st.max and not is_mine(st.min):
            continue
        out.append(i)
    return out


def marker_row(flow: str) -> tuple:
    """A stage-2 row that only names ``flow`` (packet 0, no record): a flow carried from an earlier
    run is run (continued, finished) though it has no new record (:class:`FlowRunner`)."""
    return (flow, 0, 0, 0, None, 0, None, None, None)


def _with_markers(recs, markers, part: int, nparts: int, plan: dict, only):
    """``recs`` (sorted by flow, packet) with the marker rows of the carried flows ``markers`` that
    task ``part`` runs (placed as :func:`task_record_batches` places flows) merged in."""
    import heapq

    mine = [marker_row(f)[:6] for f in sorted(markers)  # (as fill_batches gives rows: no record's place)
            if (plan.get(f) if plan.get(f) is not None else flow_task(f, nparts)) == part
            and (only is None or f in only)]
    if not mine:
        return recs
    return heapq.merge(mine, recs, key=lambda r: (r[0], r[1]))


def stage2_direct_fn(params_bc, seg_files: list, offsets: dict, nparts: int, plan: dict, only, arrow_schema,
                      directory: str, markers=()):
    """Stage 2 as a plain Python task per partition number (``mapPartitions``): its records read
    from the stage-1 files (:func:`task_record_batches`: no shuffle, no JVM in between), run
    (:class:`FlowRunner`), the rows written to ``directory`` (:func:`_write_rows`).  ``markers``:
    the flows carried from an earlier run (each run, with or without new records)."""
    def fn(parts):
        params = params_bc.value
        for part in parts:
            runner = FlowRunner(params)
            reader = RecordReader(params.files)

            def rows():
                try:
                    recs = fill_batches(task_record_batches(seg_files, offsets, part, nparts, plan, only), reader)
                    yield from runner.run(_with_markers(recs, markers, part, nparts, plan, only))
                except CaptureChanged as e:  # the driver reports it (see _facts)
                    yield ("_flow", "", 0, 0, 1, 0, "", 0, pickle.dumps({"error": str(e)}, 5), False)
            try:
                _write_rows(directory, part, rows(), arrow_schema)
            finally:
                reader.close()
            yield part
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


def range_fn(bounds, excluded, table: str | None = None, directory: str | None = None, as_file: bool = False):
    """Rows of ranges of a table, sorted (:func:`sorted_range`); with ``directory``, each
    task writes its range's Parquet file itself (:func:`write_range`) and gives one row,
    ``(range, rows written)``; with ``as_file``, each task gives ``(range, rows, Parquet file bytes)``
    (:func:`range_file`: the archive's schema and pandas metadata) for the driver to write."""
    def fn(batches):
        first = []

        def chunks():
            for batch in batches:
                cols = [batch.column(c).to_pylist() for c in ("layer", "r", "blob")]
                if not first and cols[1]:
                    first.append(cols[1][0])
                yield from zip(*cols)
        if directory is None and not as_file:
            yield from sorted_range(chunks(), bounds, excluded)
            return
        import pyarrow as pa

        t = sorted_range_table(chunks(), bounds, excluded)
        if as_file:
            if first:
                n, blob = range_file(table, t)
                yield pa.RecordBatch.from_arrays([pa.array([first[0]], pa.int32()), pa.array([n], pa.int64()),
                                                  pa.array([blob], pa.binary())], names=["r", "rows", "data"])
            return
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


def sensitive_fn(a, b):
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


def ticks_fn(interval: int, start=None, state_row: bool = False):
    """The idle sweep's ticks over the (packet, ts) batches of every TCP record in packet order
    (one task): the sharding contract's clock (:func:`~amqp_dissect.shard.sweep_ticks`).
    ``interval``: nanoseconds, as every capture time."""
    import pyarrow as pa

    schema = pa.schema([pa.field("packet", pa.int64()), pa.field("ts", pa.int64())])

    def fn(batches):
        state = start
        for batch in batches:
            ticks, state = sweep_ticks(zip(batch.column("packet").to_pylist(), batch.column("ts").to_pylist()),
                                       interval, state)
            if ticks:
                yield pa.RecordBatch.from_arrays([pa.array([t[0] for t in ticks], pa.int64()),
                                                  pa.array([t[1] for t in ticks], pa.int64())], schema=schema)
        if state_row:  # (the clock's state after the records: packet -1)
            yield pa.RecordBatch.from_arrays([pa.array([-1], pa.int64()), pa.array([state], pa.int64())], schema=schema)
    return fn


def ticks_direct_fn(seg_files: list, offsets: dict, interval: int, start=None, state_row: bool = False):
    """:func:`ticks_fn` in one plain Python task over the local stage-1 files: the (packet, ts)
    of every TCP record of the ranges in ``offsets``, in packet order (16 bytes a record).
    ``start``: the clock's state after the records before these (an earlier run's); with
    ``state_row``, the last item given is ``(-1, state)``: the clock's state after these (None:
    never armed)."""
    def fn(_items):
        import numpy as np
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        packets, times = [], []
        for path in seg_files:
            t = pq.read_table(path, columns=["rid", "idx", "ts", "kind"], use_threads=False)
            t = t.filter(pc.equal(t["kind"], KIND_TCP))
            rid = t["rid"].to_numpy()
            use = np.array([r in offsets for r in range(int(rid.max()) + 1)], dtype=bool)[rid] if len(rid) else rid
            if not len(rid) or not use.any():
                continue
            off = np.array([offsets.get(r, 0) for r in range(int(rid.max()) + 1)], dtype=np.int64)
            packets.append((off[rid] + t["idx"].to_numpy() + 1)[use])
            times.append(t["ts"].to_numpy()[use])
        if not packets:
            if state_row:
                yield (-1, start)
            return
        pk, ts = np.concatenate(packets), np.concatenate(times)
        order = np.argsort(pk, kind="stable")
        ticks, due = sweep_ticks(zip(pk[order].tolist(), ts[order].tolist()), interval, start)
        yield from ticks
        if state_row:
            yield (-1, due)
    return fn


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


def read_rows(spark, path: str):
    return spark.read.schema(rows_schema()).parquet(path)


def meta_frame(rows):
    T = spark_types()
    schema = T.StructType([
        T.StructField("flow", T.StringType()), T.StructField("last_packet", T.LongType()),
        T.StructField("last_ts", T.LongType()), T.StructField("needs_ticks", T.BooleanType()),
        T.StructField("open_stalls", T.LongType()), T.StructField("idle", T.StringType()),
        T.StructField("packets", T.LongType()), T.StructField("connections", T.LongType()),
        T.StructField("error", T.StringType()),
    ] + [T.StructField("rows_" + t, T.LongType()) for t in ROW_TABLES])
    from pyspark.sql import functions as F

    return rows.where(F.col("table") == "_flow").select("flow", "blob").mapInArrow(
        _meta_fn(spark_arrow_schema(schema)), schema)
