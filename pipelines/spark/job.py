"""The archive job (:func:`run_archive`): stage 1, the driver's layout, stage 2 and its reruns,
then the tables and summaries (see the package docstring)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

from amqp_dissect.pipelines.archive import (DEFAULT_SPLIT_SIZE, KIND_SUMMARY, KIND_TCP, FlowParams, ROW_TABLES,
                                            end_sensitive,
                                            InputError, Range, RANGE_FILE, balance_flows, capture_ends, clock_steps,
                                            expand_inputs,
                                            range_file,
                                            group_ranges, layout, set_gaps_of, plan_ranges, write_range)

from amqp_dissect.capture.tcp import IDLE_TIMEOUT
from amqp_dissect.results.schema import TABLES as REGISTRY_TABLES

from amqp_dissect.pipelines.spark_runtime.session import STAGE2_CONF, TABLES_CONF, TS_CONF, sql_conf
from .stages import (STAGE2_COLUMNS, Meter, metered, pack_tasks, spark_arrow_schema, read_rows, sensitive_fn, stage1_direct_fn,
                     stage1_fn, stage2_direct_fn, stage2_fn, ticks_direct_fn, ticks_fn,
                     spark_types, partition_keys, rows_schema, stage1_schema, table_schema)
from .summaries import DEFAULT_WINDOW, SUMMARIES, summary_frame, write_summaries_local
from .tables import meta_rows, make_table, table_bounds, write_tables_local


TABLES = REGISTRY_TABLES  # the registry's eight: connections, sessions, links, deliveries, stalls, transactions,
#                          violations, errors (and frames on request)
OUTPUT_THREADS = 4  # tables (then summaries) written at once, each by its own Spark jobs
MARK_HOOKS: list = []  # callables(step name) run as each step ends (the benchmark samples CPU time there)


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
                idle_timeout: float = IDLE_TIMEOUT, keylog=None) -> dict:
    """Analyse the captures under ``paths`` as one continuous capture; write parquet tables
    under ``out`` (a path or any Hadoop URI).  Returns a dict: ``counts``, ``tables`` (name
    -> URI), ``files`` (in capture order), ``errors`` ((path, damage) pairs), ``stats``
    (ranges, false boundary candidates, reruns, seconds), ``clock_steps`` (the steps back of the
    capture's clock, as the report's ``capture["clock_steps"]``).  Raises :class:`InputError` for
    bad paths (a scheme without its connector, code "connector": :mod:`.fs`), before any work."""
    from amqp_dissect.pipelines.spark_runtime.fs import check_output

    t0 = time.time()
    out_uri = check_output(spark, out)
    work = out_uri.rstrip("/") + "/_work"
    done = analyse(spark, paths, work, t0=t0, split_size=split_size, frames=frames, partitions=partitions,
                    ports=ports, idle_timeout=idle_timeout, keylog=keylog)
    try:
        _write_outputs(spark, done, out_uri, window)
    finally:
        done["cleanup"](keep_work)
    done["stats"]["seconds"] = round(time.time() - t0, 3)
    return {"counts": done["counts"], "tables": done["written"], "files": done["files"], "errors": done["errors"],
            "stats": done["stats"], "out": out_uri, "order": done["order"], "gaps": done["gaps"],
            "clock_steps": done["clock_steps"]}


def analyse(spark, paths, work: str, *, t0, split_size, frames, partitions, ports, idle_timeout, keylog,
             messages: bool = False) -> dict:
    """Stages 1 and 2 and their reruns, the rows under ``work``: what the tables and summaries
    are made of (see :func:`_run`)."""
    from amqp_dissect.pipelines.spark_runtime.fs import resolve_inputs

    if keylog is not None and not isinstance(keylog, str):  # a KeyLog (the CLI's --keylog): shipped as text
        keylog = keylog.text()
    files, names, staged = resolve_inputs(spark, paths, work)
    nparts = partitions or max(2, spark.sparkContext.defaultParallelism * 2)
    # files are read in at least as many tasks as stage 2 has (default: as many as cores),
    # so that every stage keeps all the cores busy
    try:
        with sql_conf(spark, spark__sql__files__minPartitionNum=str(nparts)):
            done = _run(spark, files, work, t0=t0, nparts=nparts, split_size=split_size, frames=frames,
                        ports=ports, idle_timeout=idle_timeout, keylog=keylog, messages=messages)
    except BaseException:
        _remove_work(work, staged)
        raise
    if names:  # inputs copied from a remote file system: the results name them by their URIs
        done["files"] = [names.get(f, f) for f in done["files"]]
        done["errors"] = [(names.get(f, f), e) for f, e in done["errors"]]
    done["cleanup"] = lambda keep=False: None if keep else _remove_work(work, staged)
    return done


def _remove_work(work: str, staged: str | None) -> None:
    for d in (_local(work), staged):
        if d:
            shutil.rmtree(d, ignore_errors=True)


def _run(spark, files, work, *, t0, nparts, split_size, frames, ports, idle_timeout, keylog,
         messages: bool = False) -> dict:
    from pyspark.sql import functions as F

    stats: dict = {"files": len(files)}
    marks: dict = {}
    tick = [t0]

    meter = Meter(spark)

    def mark(name):
        now = time.time()
        marks[name] = round(now - tick[0], 3)
        tick[0] = now
        for hook in MARK_HOOKS:
            hook(name)
    # ---- stage 1: decode files / byte ranges on the executors
    ranges = plan_ranges(files, split_size)
    seg_paths = [work + "/seg"]
    summaries = _stage1(spark, ranges, seg_paths[0], meter)
    lay = layout(files, summaries)
    stats["ranges_planned"] = len(ranges)
    stats["redo_files"] = [files[i] for i in lay.redo]
    if lay.redo:  # split ranges that did not chain (damage or a false boundary): read those files whole
        again = [r for r in plan_ranges(files, split_size, first_rid=len(ranges), whole=lay.redo)
                 if r.file in set(lay.redo)]
        seg_paths.append(work + "/seg_redo")
        extra = _stage1(spark, again, seg_paths[1], meter)
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
        extra = _stage1(spark, again, seg_paths[-1], meter)
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
    tcp_df: list = []

    def tcp():
        """The numbered TCP record rows as a DataFrame (built when a Spark step needs them)."""
        if not tcp_df:
            seg = spark.read.schema(stage1_schema()).parquet(*seg_paths)
            # (each row names its file: the rows of a merged group come from several)
            offs = spark.createDataFrame(sorted(lay.offsets.items()), "rid int, off long")
            numbered = seg.where(F.col("kind") != KIND_SUMMARY).join(F.broadcast(offs), "rid").withColumn(
                "packet", F.col("off") + F.col("idx") + F.lit(1))
            tcp_df.append(numbered.where(F.col("kind") == KIND_TCP).select(*STAGE2_COLUMNS))
        return tcp_df[0]

    # stage 2 reads the local stage-1 files itself while a task's record index stays small
    seg_files = _seg_files(seg_paths, nparts)
    last_tcp, last_note = capture_ends(summaries, lay.offsets)
    steps = clock_steps(summaries, lay.offsets)  # (the single process's watch, over the ranges' kept records)
    capture_end = lay.last_ts  # (the last record's time; the Analyzer's end may be earlier: analysis_end)
    # key logs embedded in pcapng files (Decryption Secrets Blocks) join the one given
    embedded = "".join(s.get("keylog") or "" for s in summaries)
    if embedded:
        keylog = (keylog + "\n" if keylog else "") + embedded
    mark("numbering")
    base = FlowParams(ports=tuple(ports), last_ts=capture_end, last_tcp_packet=last_tcp, end_ts=capture_end,
                      frames=frames, idle_timeout=idle_timeout, keylog=keylog, files=tuple(files),
                      messages=messages, clock_steps=tuple(steps))

    # ---- stage 2: per-flow runs, the largest flows spread evenly over the tasks
    rows_path = work + "/rows0"
    plan = balance_flows(summaries, lay.offsets, nparts, lay.tcp_records)
    if seg_files is not None:
        _stage2_direct(spark, seg_files, lay.offsets, base, nparts, rows_path, plan, None, meter, "stage2")
    else:
        _stage2(spark, tcp(), base, nparts, rows_path, plan, meter=meter)
    stats["stage2_direct"] = seg_files is not None
    mark("stage2")
    # layers of stage-2 results: (rows, [flow DataFrames a later layer ran again]); the same
    # flows as Python sets for the tables step (reruns concern few flows).  The rows' DataFrame
    # is made when a Spark step first needs it (_layer_frames): the local path never does (the
    # first DataFrame of a session costs the JVM a fifth of a second of planning set-up)
    layers = [(None, [])]
    layer_paths = [rows_path]
    excluded: list[set] = [set()]

    def rerun(flows: list, params: FlowParams, path: str) -> None:
        fdf = None if local_meta else spark.createDataFrame([(f,) for f in flows], "flow string")
        if seg_files is not None:
            _stage2_direct(spark, seg_files, lay.offsets, params, nparts, path, plan, set(flows), meter, "reruns")
        else:
            fdf = fdf if fdf is not None else spark.createDataFrame([(f,) for f in flows], "flow string")
            _stage2(spark, tcp().join(F.broadcast(fdf), "flow", "left_semi"), params, nparts, path, meter=meter,
                    step="reruns")
        for (_, ex), exs in zip(layers, excluded):
            if fdf is not None:  # (for the facts read by Spark jobs: meta_rows)
                ex.append(fdf)
            exs.update(flows)
        layers.append((None, []))
        layer_paths.append(path)
        excluded.append(set())

    # the flows' facts: one pass over their "_flow" rows per layer state, kept (a row per
    # flow) for the questions that follow.  A local work directory: read by the driver from
    # the stage-2 files (one small row per flow; no Spark job); otherwise cached in Spark, each
    # question then a pass over the cached rows only
    cached: list = []
    local_meta = all(_direct_dir(p) is not None for p in [rows_path])

    def current_meta():
        if local_meta:
            return _local_metas([_direct_dir(p) for p in layer_paths], excluded)
        m = meta_rows(_layer_frames(spark, layers, layer_paths)).persist()
        cached.append(m)
        return m

    def facts_of(meta):
        return _local_facts(meta) if local_meta else _facts(meta)

    meta = current_meta()
    facts = facts_of(meta)
    reruns = {"ticks": 0, "end": 0}
    ticks = None
    if facts["needs_ticks"]:
        if local_meta:
            need = [f for f, m in meta if "error" not in m and m["needs_ticks"]]
        else:
            need = [r.flow for r in meta.where(F.col("needs_ticks")).select("flow").collect()]
        if seg_files is not None:  # one Python task reads the stage-1 files
            fn = metered(meter, "reruns", ticks_direct_fn(seg_files, dict(lay.offsets), 1_000_000_000))
            ticks = tuple(spark.sparkContext.parallelize([0], 1).mapPartitions(fn).collect())
        else:
            tk = tcp().select("packet", "ts").repartition(1).sortWithinPartitions("packet").mapInArrow(
                metered(meter, "reruns", ticks_fn(1_000_000_000)), "packet long, ts long")
            ticks = tuple((r.packet, r.ts) for r in tk.collect())
        rerun(need, FlowParams(**{**base.__dict__, "ticks": ticks}), work + "/rows_ticks")
        reruns["ticks"] = len(need)
        meta = current_meta()
        facts = facts_of(meta)
    # the single-process Analyzer is finished at the time of the last record that produced an event
    best = None
    for cand in ((facts["last_packet"], facts["last_ts"]), last_note):
        if cand is not None and cand[0] is not None and (best is None or cand[0] > best[0]):
            best = cand
    analysis_end = best[1] if best is not None else None
    if analysis_end != capture_end:
        if local_meta:
            sens = [f for f, m in meta if "error" not in m and end_sensitive(m, capture_end, analysis_end)]
        else:
            sens = [r.flow for r in meta.mapInArrow(sensitive_fn(capture_end, analysis_end),
                                                    "flow string").collect()]
        if sens:
            rerun(sens, FlowParams(**{**base.__dict__, "ticks": ticks, "end_ts": analysis_end}), work + "/rows_end")
            reruns["end"] = len(sens)
            facts = facts_of(current_meta())
    for m in cached:
        m.unpersist()
    mark("reruns")
    stats["reruns"] = reruns
    stats["end_ts"] = analysis_end
    stats["flows"] = facts["flows"]
    counts = {t: facts["rows"][t] for t in TABLES + (("frames",) if frames else ())}
    return {"layers": layers, "layer_paths": layer_paths, "excluded": excluded, "counts": counts, "stats": stats,
            "marks": marks, "mark": mark, "meter": meter, "nparts": nparts, "files": lay.order, "errors": lay.errors,
            "order": set_order(lay, len(files)), "gaps": set_gaps_of(lay.spans),
            "clock_steps": [st.as_dict() for st in steps]}


def table_frames(spark, done: dict, tables=None, bounds: dict | None = None) -> dict:
    """name -> the DataFrame of each result table (``tables``: which; default every one the run
    counted), in single-process order, read lazily from the stage-2 rows of ``done``
    (:func:`analyse`): the registry's columns and Spark types."""
    counts = done["counts"]
    names = [t for t in (tables or counts) if t in counts]
    layers = _layer_frames(spark, done["layers"], done["layer_paths"])
    if bounds is None:
        bounds = table_bounds(layers, {t: counts[t] for t in names}, done["nparts"])
    return {t: make_table(spark, layers, t, bounds[t], done["excluded"]) for t in names}


def _layer_frames(spark, layers: list, layer_paths: list) -> list:
    """``layers`` with the DataFrame of every layer's stage-2 rows made (in place), for the steps
    that run Spark over them."""
    for i, (rows, ex) in enumerate(layers):
        if rows is None:
            layers[i] = (read_rows(spark, layer_paths[i]), ex)
    return layers


def _write_outputs(spark, done: dict, out_uri: str, window: float) -> None:
    """The tables and the summaries of ``done`` written under ``out_uri`` (``done["written"]``:
    name -> URI)."""
    layers, layer_paths, excluded = done["layers"], done["layer_paths"], done["excluded"]
    counts, nparts, mark = done["counts"], done["nparts"], done["mark"]

    # ---- tables, then the summaries read back from them: each a few concurrent Spark jobs
    # (one Python thread each), so that the small ones fill the cores the large ones leave idle
    out_base = out_uri.rstrip("/")
    written = {t: out_base + "/" + t for t in counts}
    layer_dirs = [_direct_dir(p) for p in layer_paths]
    if None not in layer_dirs and None not in [_direct_dir(u) for u in written.values()]:
        # local files: tasks read their range's chunks straight from the stage-2 files (no
        # shuffle), in one job for all the tables
        write_tables_local(spark, layer_dirs, excluded, counts, {t: _direct_dir(u) for t, u in written.items()},
                            nparts, meter=done["meter"])
        bounds = None
    else:
        layers = _layer_frames(spark, layers, layer_paths)
        bounds = table_bounds(layers, counts, nparts)

    def write_table(t):
        directory = _direct_dir(written[t])
        if directory is None:  # not a local path: the tasks make the files, the driver copies them there
            from amqp_dissect.pipelines.spark_runtime.fs import write_files

            df = make_table(spark, layers, t, bounds[t], excluded, meter=done["meter"], as_file=True)
            rows = [0]

            def files():
                for r in _in_waves(spark, df):
                    rows[0] += r.rows
                    yield RANGE_FILE.format(r.r), r.data
                if not rows[0]:  # no rows at all: one file with the columns
                    yield RANGE_FILE.format(0), range_file(t, None)[1]
            write_files(spark, written[t], files())
            if rows[0] != counts[t]:
                raise RuntimeError(f"table {t}: {rows[0]} rows written of {counts[t]}")
            return
        # the tasks write the files themselves (pyarrow: a fraction of the JVM's cost)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        got = make_table(spark, layers, t, bounds[t], excluded, directory, meter=done["meter"]).collect()
        if sum(r.rows for r in got) != counts[t]:  # each row in exactly one range
            raise RuntimeError(f"table {t}: {sum(r.rows for r in got)} rows written of {counts[t]}")
        if not got:  # no rows at all: one file with the columns
            write_range(directory, t, 0, None)
        open(os.path.join(directory, "_SUCCESS"), "wb").close()

    if bounds is not None:
        with sql_conf(spark, **TABLES_CONF):
            _concurrently(write_table, sorted(counts, key=lambda t: -counts[t]))  # the largest first
    mark("tables")
    written.update({name: out_base + "/" + name for name in SUMMARIES})

    local_out = _direct_dir(out_base)
    if local_out is not None:  # Python tasks read the tables' files and write the summaries
        write_summaries_local(spark, local_out, window, meter=done["meter"])
    else:  # (the DataFrames of the written tables only here: each is a listing and a plan in the JVM)
        tables = {t: spark.read.schema(table_schema(t)).parquet(written[t]) for t in ("links", "deliveries", "stalls")}

        def write_summary(name):
            from amqp_dissect.pipelines.spark_runtime.fs import write_files

            blob = summary_frame(name, tables, window, meter=done["meter"], as_file=True).collect()[0].data
            write_files(spark, written[name], [("part-00000.parquet", blob)])

        with sql_conf(spark, **TS_CONF):
            _concurrently(write_summary, SUMMARIES)
    mark("summaries")
    done["stats"]["timings"] = done["marks"]
    done["stats"]["cpu"] = done["meter"].seconds()
    done["written"] = written


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


def _stage1(spark, ranges: list[Range], path: str, meter=None) -> list[dict]:
    """Stage 1 over ``ranges`` (the largest first: the job waits for its last task), rows to
    ``path``; returns the ranges' summaries.  A local ``path`` (:func:`_direct_dir`): each task
    writes its range's file there itself and only the summaries come back, in the same job;
    otherwise Spark's writer, then a job reading the summaries back."""
    from pyspark.sql import functions as F

    T = spark_types()
    rschema = T.StructType([
        T.StructField("rid", T.IntegerType()), T.StructField("file", T.IntegerType()),
        T.StructField("path", T.StringType()), T.StructField("part", T.IntegerType()),
        T.StructField("start", T.LongType()), T.StructField("end", T.LongType()),
        T.StructField("size", T.LongType()), T.StructField("group", T.StringType()),
    ])
    order = sorted(ranges, key=_range_bytes, reverse=True)
    schema = stage1_schema()
    directory = _direct_dir(path)
    if directory is not None:  # plain Python tasks write the rows and give the summaries
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        fn = metered(meter, "stage1", stage1_direct_fn(spark_arrow_schema(schema), directory))
        bins = stage1_tasks(order, spark.sparkContext.defaultParallelism)
        rdd = spark.sparkContext.parallelize(bins, len(bins))
        metas = [json.loads(m) for m in rdd.mapPartitions(fn).collect()]
        open(os.path.join(directory, "_SUCCESS"), "wb").close()
        return metas
    bins = stage1_tasks(order, spark.sparkContext.defaultParallelism)
    rdd = spark.sparkContext.parallelize(bins, len(bins)).flatMap(lambda task: task)
    df = spark.createDataFrame(rdd, rschema).mapInArrow(metered(meter, "stage1", stage1_fn(spark_arrow_schema(schema), directory)),
                                                         schema)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        metas = [json.loads(r.meta) for r in df.select("meta").collect()]
        open(os.path.join(directory, "_SUCCESS"), "wb").close()
        return metas
    df.write.mode("overwrite").parquet(path)
    seg = spark.read.schema(stage1_schema()).parquet(path)
    return [json.loads(r.meta) for r in seg.where(F.col("kind") == KIND_SUMMARY).select("meta").collect()]


STAGE1_TASKS_PER_SLOT = 4  # stage-1 tasks per task slot, at most (many small files or ranges: fewer tasks)


def _range_bytes(r: Range) -> int:
    return ((r.size or 0) if r.end is None else r.end) - r.start


def stage1_tasks(ranges: list[Range], slots: int) -> list[list[tuple]]:
    """The ranges of stage 1 (largest first) as the tasks that read them: one task per range up
    to :data:`STAGE1_TASKS_PER_SLOT` tasks per task slot, beyond that the ranges packed into that
    many tasks of about the same bytes (largest first, each to the lightest task), so that a set
    of many small files does not pay a task's fixed cost per file, and the last task to finish is
    a small one."""
    bins = pack_tasks(list(ranges), _range_bytes, STAGE1_TASKS_PER_SLOT * max(1, slots))
    return [[r.as_tuple() for r in b] for b in bins]


def _stage2(spark, tcp, params: FlowParams, nparts: int, path: str, plan: dict | None = None, meter=None,
            step: str = "stage2") -> None:
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
        metered(meter, step, stage2_fn(bc, spark_arrow_schema(schema), directory)), schema)
    with sql_conf(spark, **STAGE2_CONF):  # the chunks are compressed already (batch_ipc)
        if directory is not None:  # the tasks write their files themselves (pyarrow), no rows come back
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            df.collect()
            open(os.path.join(directory, "_SUCCESS"), "wb").close()
            return
        df.write.mode("overwrite").partitionBy("table").option("compression", "uncompressed").parquet(path)


DIRECT_STAGE2_BYTES = 512 << 20  # a stage-2 task that reads the stage-1 files itself holds about
#                                 its share of them (sorted, in Arrow form): above this, Spark's shuffle


def _seg_files(seg_paths: list, nparts: int) -> list | None:
    """The local stage-1 files stage 2 reads itself (:func:`_stage2_direct`), or None: a work
    directory on a remote file system, or files whose share per task (twice the even share,
    for the skew of large flows) exceeds :data:`DIRECT_STAGE2_BYTES` (records that travel whole:
    gzip, pcapng), which go through Spark's shuffle and sort, spilling to disk as it needs."""
    out = []
    for p in seg_paths:
        d = _direct_dir(p)
        if d is None:
            return None
        out += [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".parquet") and not n.startswith(".")]
    size = sum(os.path.getsize(f) for f in out)
    return out if 2 * size / nparts <= DIRECT_STAGE2_BYTES else None


def _stage2_direct(spark, seg_files: list, offsets: dict, params: FlowParams, nparts: int, path: str, plan: dict,
                   only, meter, step: str) -> None:
    """Stage 2 (or a rerun of the flows ``only``) in ``nparts`` plain Python tasks that read their
    flows' records from the local stage-1 files (:func:`~.stages.task_records`) and write their
    rows to the local directory ``path``: one Spark job without a shuffle; the same rows as
    :func:`_stage2`."""
    directory = _direct_dir(path)
    bc = spark.sparkContext.broadcast(params)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    fn = stage2_direct_fn(bc, seg_files, dict(offsets), nparts, dict(plan or {}), only,
                           spark_arrow_schema(rows_schema()), directory)
    spark.sparkContext.parallelize(range(nparts), nparts).mapPartitions(metered(meter, step, fn)).collect()
    open(os.path.join(directory, "_SUCCESS"), "wb").close()


def _in_waves(spark, df):
    """The rows of ``df``, its partitions computed a wave at a time, four per task slot the
    cluster has, per Spark job (the driver holds one wave's rows: a few Parquet files of about
    ``TABLE_PART_ROWS`` rows each; fewer, larger waves would make fewer jobs)."""
    sc = spark.sparkContext
    rdd = df.rdd
    n = rdd.getNumPartitions()
    wave = max(4, 4 * sc.defaultParallelism)
    for lo in range(0, n, wave):
        yield from sc.runJob(rdd, lambda it: list(it), list(range(lo, min(n, lo + wave))))


def _concurrently(fn, items, threads: int | None = None) -> None:
    """``fn(item)`` for every item, in a pool of threads (each submits its own Spark jobs;
    items start in the order given); the first exception is raised once all have ended."""
    items = list(items)
    with ThreadPoolExecutor(threads or OUTPUT_THREADS) as pool:
        futures = [pool.submit(fn, it) for it in items]
    for f in futures:
        f.result()


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


def _local_metas(layer_dirs: list, excluded: list) -> list:
    """(flow, facts) of every flow of the current result, read by the driver from the local
    stage-2 files (the "_flow" rows of each layer minus the flows a later layer ran again)."""
    import pyarrow.parquet as pq

    out = []
    for li, d in enumerate(layer_dirs):
        td = os.path.join(d, "table=_flow")
        if not os.path.isdir(td):
            continue
        ex = excluded[li]
        for name in sorted(os.listdir(td)):
            if name.endswith(".parquet") and not name.startswith((".", "_")):
                t = pq.read_table(os.path.join(td, name), columns=["flow", "blob"], use_threads=False)
                for flow, blob in zip(t.column("flow").to_pylist(), t.column("blob").to_pylist()):
                    if flow not in ex:
                        out.append((flow, pickle.loads(blob)))
    return out


def _local_facts(metas: list) -> dict:
    """:func:`_facts` of the flows' facts read by :func:`_local_metas`."""
    errors = [m["error"] for _, m in metas if "error" in m]
    if errors:
        raise InputError("format", min(errors))
    ok = [m for _, m in metas]
    last = max(((m["last_packet"], m["last_ts"]) for m in ok if m["last_packet"] is not None),
               key=lambda x: x[0], default=(None, None))
    return {"flows": len(ok), "needs_ticks": sum(1 for m in ok if m["needs_ticks"]), "last_packet": last[0],
            "last_ts": last[1], "rows": {t: sum(m["rows"][t] for m in ok) for t in ROW_TABLES}}


def _direct_dir(uri: str) -> str | None:
    """The local directory the table tasks write ``uri`` to themselves, or None (Spark's
    writer: a remote file system).  A local output directory, like the input paths, must be
    the same path on every executor."""
    return _local(uri)
