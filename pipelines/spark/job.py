"""The archive job (:func:`run_archive`): stage 1, the driver's layout, stage 2 and its reruns,
then the tables and summaries (see the package docstring)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, NamedTuple
from urllib.parse import urlparse

from amqp_dissect.pipelines.archive import (DEFAULT_SPLIT_SIZE, KIND_SUMMARY, KIND_TCP, FlowParams, ROW_TABLES,
                                            end_sensitive,
                                            InputError, Range, RANGE_FILE, balance_flows, capture_ends, clock_steps,
                                            expand_inputs,
                                            range_file,
                                            group_ranges, layout, set_gaps_of, plan_ranges, write_range)

from amqp_dissect.pipelines.archive.checkpoint import (CannotContinue, Checkpoint, merge_closed,
                                                       run_options)
from amqp_dissect.capture.tcp import IDLE_TIMEOUT
from amqp_dissect.results.schema import TABLES as REGISTRY_TABLES

from amqp_dissect.pipelines.spark_runtime.session import STAGE2_CONF, TABLES_CONF, TS_CONF, sql_conf
from .stages import (STAGE2_COLUMNS, Meter, metered, pack_tasks, spark_arrow_schema, read_rows, sensitive_fn, stage1_direct_fn,
                     stage1_fn, stage2_direct_fn, stage2_fn, ticks_direct_fn, ticks_fn, marker_row,
                     spark_types, partition_keys, rows_schema, stage1_schema, table_schema)
from .summaries import DEFAULT_WINDOW, SUMMARIES, summary_frame, write_summaries_local
from .tables import meta_rows, make_table, table_bounds, write_split_tables_local, write_tables_local
from .increments import (RowChunk, check_new_files, check_reused_flows, chunk_rows, latest_record_time,  # noqa: F401
                         row_chunks, set_files, whole_set_order)


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
                idle_timeout: float = IDLE_TIMEOUT, keylog=None, messages: bool = False,
                resume: Checkpoint | None = None) -> dict:
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
                    ports=ports, idle_timeout=idle_timeout, keylog=keylog, messages=messages, resume=resume)
    try:
        _write_outputs(spark, done, out_uri, window)
    finally:
        done.cleanup(keep_work)
    done.stats["seconds"] = round(time.time() - t0, 3)
    return {"counts": done.counts, "tables": done.written, "files": done.files, "errors": done.errors,
            "stats": done.stats, "out": out_uri, "order": done.order, "gaps": done.gaps,
            "clock_steps": done.clock_steps}


def analyse(spark, paths, work: str, *, t0, split_size, frames, partitions, ports, idle_timeout, keylog,
             messages: bool = False, resume: Checkpoint | None = None, checkpoint: bool = True) -> AnalysedRun:
    """Stages 1 and 2 and their reruns, the rows under ``work``: what the tables and summaries
    are made of (see :class:`_Run`).

    ``resume``: the checkpoint an earlier run over the files before ``paths`` left
    (:mod:`~amqp_dissect.pipelines.archive.checkpoint`); ``paths`` are then only the new files, and
    the result is the rest of one run over them all: the rows the carried flows make at their
    finish (and the earlier run's provisional ones) again, the set's facts (files, errors, gaps,
    clock steps) of the whole set.  Raises :class:`CannotContinue` before anything is written when
    that cannot be exact.  ``checkpoint``: keep what a next run needs (``AnalysedRun.checkpoint``)."""
    from amqp_dissect.pipelines.spark_runtime.fs import resolve_inputs

    if keylog is not None and not isinstance(keylog, str):  # a KeyLog (the CLI's --keylog): shipped as text
        keylog = keylog.text()
    options = run_options(ports=ports, idle_timeout=idle_timeout, frames=frames, messages=messages, keylog=keylog)
    if resume is not None and resume.unsaved:
        raise CannotContinue(f"the run before could not keep a flow's state: {resume.unsaved}")
    if resume is not None and resume.options != options:
        differ = sorted(k for k in options if options[k] != resume.options.get(k))
        raise CannotContinue(f"the options differ from the earlier runs' ({', '.join(differ)})")
    files, names, staged = resolve_inputs(spark, paths, work)
    nparts = partitions or max(2, spark.sparkContext.defaultParallelism * 2)
    # files are read in at least as many tasks as stage 2 has (default: as many as cores),
    # so that every stage keeps all the cores busy
    try:
        with sql_conf(spark, spark__sql__files__minPartitionNum=str(nparts)):
            done = _Run(spark, files, work, t0=t0, nparts=nparts, split_size=split_size, frames=frames,
                        ports=ports, idle_timeout=idle_timeout, keylog=keylog, messages=messages,
                        resume=resume, checkpoint=options if checkpoint else None).run()
    except BaseException:
        _remove_work(work, staged)
        raise
    if names:  # inputs copied from a remote file system: the results name them by their URIs
        done.files = [names.get(f, f) for f in done.files]
        done.errors = [(names.get(f, f), e) for f, e in done.errors]
        if done.checkpoint is not None:
            cp = done.checkpoint
            for f in cp.files:
                f.path = names.get(f.path, f.path)
            cp.errors = [(names.get(f, f), e) for f, e in cp.errors]
            cp.merged = [[names.get(f, f) for f in g] for g in cp.merged]
    done.cleanup = lambda keep=False: None if keep else _remove_work(work, staged)
    return done


def _remove_work(work: str, staged: str | None) -> None:
    for d in (_local(work), staged):
        if d:
            shutil.rmtree(d, ignore_errors=True)


@dataclass
class AnalysedRun:
    """What stages 1 and 2 and their reruns made (:func:`analyse`): the rows the tables and summaries are
    made of, and what the run found out on the way."""
    layers: list  # (rows' DataFrame or None until a Spark step needs it, [flow DataFrames a later layer ran again])
    layer_paths: list  # the stage-2 rows of each layer
    excluded: list  # per layer: the flows a later layer ran again (Python sets)
    counts: dict  # table -> its rows
    stats: dict
    clock: StepClock
    meter: Meter
    nparts: int
    files: list  # in capture order
    errors: list  # (path, damage) pairs
    order: str | None
    gaps: list
    clock_steps: list  # the steps back of the capture's clock (as the report's capture["clock_steps"])
    cleanup: Callable = lambda keep=False: None  # removes the work directory (keep: not)
    # what a next run over later files needs to continue (analyse(..., checkpoint=True)); files,
    # errors, order, gaps and clock_steps above are those of the whole set (the earlier runs' too)
    checkpoint: Checkpoint | None = None
    carried: frozenset = frozenset()  # the flows in that checkpoint
    set_counts: dict = field(default_factory=dict)  # table -> rows of one run over the whole set
    written: dict = field(default_factory=dict)  # name -> URI of the tables and summaries written

    def mark(self, name: str) -> None:
        self.clock.mark(name)


class StepClock:
    """The seconds each step of the job took (``marks``: step name -> seconds since the step before,
    summed over the times it was marked)."""

    def __init__(self, t0: float):
        self.marks: dict = {}
        self._tick = t0

    def mark(self, name: str) -> None:
        now = time.time()
        # (a step marked twice adds up: the tables of a run that carries flows, final then provisional)
        self.marks[name] = round(self.marks.get(name, 0.0) + now - self._tick, 3)
        self._tick = now
        for hook in MARK_HOOKS:
            hook(name)


class _Run:
    """Stages 1 and 2 and their reruns, step by step (:meth:`run`):

    1. :meth:`decode_ranges`: files / byte ranges decoded on the executors; the files whose ranges did
       not chain read again whole, the groups of files whose times overlap read again merged;
    2. :meth:`number`: packet numbers (prefix sums of the per-range counts), the capture's ends, the
       flows' parameters;
    3. :meth:`run_flows`: per-flow runs, the largest flows spread evenly over the tasks;
    4. :meth:`rerun_ticks`, :meth:`rerun_at_end`: the flows run again with what only the whole capture
       knows (the capture's ticks; the time the single-process Analyzer is finished at)."""

    def __init__(self, spark, files, work, *, t0, nparts, split_size, frames, ports, idle_timeout, keylog,
                 messages: bool = False, resume: Checkpoint | None = None, checkpoint: dict | None = None):
        self.spark, self.files, self.work, self.nparts, self.split_size = spark, files, work, nparts, split_size
        # the earlier runs' checkpoint to continue, and the options of the one to make (None: none)
        self.resume, self.options = resume, checkpoint
        self.carried_in = resume.flows if resume is not None else {}
        self.tick_due = resume.tick_due if resume is not None else None
        self.frames, self.ports, self.idle_timeout, self.keylog, self.messages = (
            frames, ports, idle_timeout, keylog, messages)
        self.stats: dict = {"files": len(files)}
        self.clock = StepClock(t0)
        self.meter = Meter(spark)
        self.seg_paths = [work + "/seg"]
        self._tcp_df = None
        # layers of stage-2 results: (rows, [flow DataFrames a later layer ran again]); the same
        # flows as Python sets for the tables step (reruns concern few flows).  The rows' DataFrame
        # is made when a Spark step first needs it (_layer_frames): the local path never does (the
        # first DataFrame of a session costs the JVM a fifth of a second of planning set-up)
        self.layers: list = [(None, [])]
        self.layer_paths = [work + "/rows0"]
        self.excluded: list[set] = [set()]
        self.cached: list = []
        # the flows' facts: one pass over their "_flow" rows per layer state, kept (a row per
        # flow) for the questions that follow.  A local work directory: read by the driver from
        # the stage-2 files (one small row per flow; no Spark job); otherwise cached in Spark, each
        # question then a pass over the cached rows only
        self.local_meta = _direct_dir(self.layer_paths[0]) is not None
        # (the clock's state they start from, the capture's ticks being read by this process while stage 2 runs: a Future)
        self._ticks_ahead: tuple | None = None

    def run(self) -> AnalysedRun:
        self.decode_ranges()
        if self.resume is not None:
            check_new_files(self.resume, self.lay.spans, self.files)
            self.lay.offsets = {rid: off + self.resume.records for rid, off in self.lay.offsets.items()}
        self.clock.mark("stage1")
        self.number()
        self.clock.mark("numbering")
        self.run_flows()
        self.clock.mark("stage2")
        meta, facts = self._facts_now()
        if self.resume is not None:
            check_reused_flows(self.resume, self._flows_of(meta))
        reruns = {"ticks": 0, "end": 0}
        ticks = None
        if facts["needs_ticks"]:
            ticks, reruns["ticks"] = self.rerun_ticks(meta)
            meta, facts = self._facts_now()
        analysis_end = self._analysis_end(facts)
        if analysis_end != self.capture_end:
            reruns["end"] = self.rerun_at_end(meta, ticks, analysis_end)
            if reruns["end"]:
                meta = self._current_meta()
                facts = self._facts_of(meta)
        cp = None
        if self.options is not None:
            if ticks is None:
                ticks = self._all_ticks()
            cp = self._checkpoint(facts, ticks)
        for m in self.cached:
            m.unpersist()
        self.clock.mark("reruns")
        self.stats["reruns"] = reruns
        self.stats["end_ts"] = analysis_end
        self.stats["flows"] = facts["flows"]
        self.stats["carried_in"] = len(self.carried_in)  # flows continued from the checkpoint given
        if cp is not None:  # flows left for the next run, and what the checkpoint weighs
            self.stats["carried_out"] = len(cp.flows)
            self.stats["checkpoint_bytes"] = cp.size_bytes()
        return self._result(facts, cp)

    # ---- stage 1

    def decode_ranges(self) -> None:
        """Stage 1: the files' byte ranges decoded on the executors, laid out (``self.lay``)."""
        files = self.files
        ranges = plan_ranges(files, self.split_size)
        self.summaries = _stage1(self.spark, ranges, self.seg_paths[0], self.meter)
        self.lay = layout(files, self.summaries)
        self.stats["ranges_planned"] = len(ranges)
        self.stats["redo_files"] = [files[i] for i in self.lay.redo]
        if self.lay.redo:
            self._redo_unchained(len(ranges))
        for _ in range(3):  # (one pass; a group found again after it would be read again with its neighbours)
            if self.lay.fatal or not self.lay.groups:
                break
            self._merge_overlapping()
        lay = self.lay
        if lay.fatal:
            kind, msg = lay.fatal[0]
            raise InputError("missing" if kind == "open" else "format", msg)
        self.stats["merged_groups"] = [[files[fi] for fi in g] for g in lay.merged]
        self.stats.update(ranges=lay.ranges_used, rejected_boundaries=lay.rejected, records=lay.records,
                          tcp_records=lay.tcp_records, packet_errors=lay.packet_errors, unsupported=lay.unsupported)

    def _redo_unchained(self, first_rid: int) -> None:
        """Split ranges that did not chain (damage or a false boundary): those files read whole."""
        redo = set(self.lay.redo)
        again = [r for r in plan_ranges(self.files, self.split_size, first_rid=first_rid, whole=self.lay.redo)
                 if r.file in redo]
        self.seg_paths.append(self.work + "/seg_redo")
        extra = _stage1(self.spark, again, self.seg_paths[1], self.meter)
        self.summaries = [s for s in self.summaries if s["file"] not in redo] + extra
        self.lay = layout(self.files, self.summaries)

    def _merge_overlapping(self) -> None:
        """Files whose times overlap: each group read whole and merged record by record by one task (as
        the single-process reader merges a set), numbered in that order."""
        groups = self.lay.groups
        grouped = {fi for g in groups for fi, _ in g}
        again = group_ranges(self.files, groups, max(s["rid"] for s in self.summaries) + 1)
        self.seg_paths.append(self.work + f"/seg_merged{len(self.seg_paths)}")
        extra = _stage1(self.spark, again, self.seg_paths[-1], self.meter)
        self.summaries = [s for s in self.summaries
                          if s["file"] not in grouped and not grouped.intersection(s.get("group") or ())] + extra
        self.lay = layout(self.files, self.summaries)

    # ---- numbering

    def number(self) -> None:
        """Packet numbers: prefix sums of the per-range counts; the capture's ends from the summaries (no
        pass over the rows); the flows' parameters (``self.base``)."""
        summaries, lay = self.summaries, self.lay
        # stage 2 reads the local stage-1 files itself while a task's record index stays small
        self.seg_files = _seg_files(self.seg_paths, self.nparts)
        last_tcp, self.last_note = capture_ends(summaries, lay.offsets)
        cp = self.resume
        from amqp_dissect.clock import ClockWatch

        self.watch = pickle.loads(pickle.dumps(cp.clock_watch)) if cp is not None else ClockWatch()
        # (the single process's watch, over the ranges' kept records)
        self.steps = clock_steps(summaries, lay.offsets, self.watch, cp.last_ts if cp is not None else None)
        self.capture_end = lay.last_ts  # (the last record's time; the Analyzer's end may be earlier: analysis_end)
        if cp is not None:
            last_tcp = max(last_tcp, cp.last_tcp_packet)
            if self.capture_end is None:
                self.capture_end = cp.last_ts
        self.last_tcp = last_tcp
        # key logs embedded in pcapng files (Decryption Secrets Blocks) join the one given
        keylog = self.keylog
        embedded = (cp.keylog if cp is not None else "") + "".join(s.get("keylog") or "" for s in summaries)
        self.embedded = embedded
        if embedded:
            keylog = (keylog + "\n" if keylog else "") + embedded
        self.base = FlowParams(ports=tuple(self.ports), last_ts=self.capture_end, last_tcp_packet=last_tcp,
                               end_ts=self.capture_end, frames=self.frames, idle_timeout=self.idle_timeout,
                               keylog=keylog, files=tuple(self.files), messages=self.messages,
                               clock_steps=tuple(self.steps), carried=self.carried_in or None,
                               checkpoint=self.options is not None)

    def tcp(self):
        """The numbered TCP record rows as a DataFrame (built when a Spark step needs them)."""
        from pyspark.sql import functions as F

        if self._tcp_df is None:
            seg = self.spark.read.schema(stage1_schema()).parquet(*self.seg_paths)
            # (each row names its file: the rows of a merged group come from several)
            offs = self.spark.createDataFrame(sorted(self.lay.offsets.items()), "rid int, off long")
            numbered = seg.where(F.col("kind") != KIND_SUMMARY).join(F.broadcast(offs), "rid").withColumn(
                "packet", F.col("off") + F.col("idx") + F.lit(1))
            self._tcp_df = numbered.where(F.col("kind") == KIND_TCP).select(*STAGE2_COLUMNS)
        return self._tcp_df

    # ---- stage 2 and its reruns

    def run_flows(self) -> None:
        """Stage 2: per-flow runs, the largest flows spread evenly over the tasks."""
        self.plan = balance_flows(self.summaries, self.lay.offsets, self.nparts, self.lay.tcp_records)
        if self.seg_files is not None and self.options is not None:
            # (a checkpoint needs the capture's ticks: this process reads them from the stage-1 files
            # while the executors run stage 2, where a task of their own would follow it)
            from concurrent.futures import ThreadPoolExecutor

            ahead = ThreadPoolExecutor(1, thread_name_prefix="amqp-dissect-ticks")
            self._ticks_ahead = (self.tick_due, ahead.submit(self._ticks_here, self.tick_due))
            ahead.shutdown(wait=False)
        if self.seg_files is not None:
            _stage2_direct(self.spark, self.seg_files, self.lay.offsets, self.base, self.nparts, self.layer_paths[0],
                           self.plan, None, self.meter, "stage2", self.carried_in)
        else:
            _stage2(self.spark, self._flow_records(), self.base, self.nparts, self.layer_paths[0], self.plan,
                    meter=self.meter)
        self.stats["stage2_direct"] = self.seg_files is not None

    def _rerun(self, flows: list, params: FlowParams, path: str) -> None:
        """Run ``flows`` again with ``params``, their rows a new layer under ``path``."""
        from pyspark.sql import functions as F

        spark = self.spark
        fdf = None if self.local_meta else spark.createDataFrame([(f,) for f in flows], "flow string")
        if self.seg_files is not None:
            _stage2_direct(spark, self.seg_files, self.lay.offsets, params, self.nparts, path, self.plan, set(flows),
                           self.meter, "reruns", self.carried_in)
        else:
            fdf = fdf if fdf is not None else spark.createDataFrame([(f,) for f in flows], "flow string")
            _stage2(spark, self._flow_records().join(F.broadcast(fdf), "flow", "left_semi"), params, self.nparts, path,
                    meter=self.meter, step="reruns")
        for (_, ex), exs in zip(self.layers, self.excluded):
            if fdf is not None:  # (for the facts read by Spark jobs: meta_rows)
                ex.append(fdf)
            exs.update(flows)
        self.layers.append((None, []))
        self.layer_paths.append(path)
        self.excluded.append(set())

    def _current_meta(self):
        if self.local_meta:
            return _local_metas([_direct_dir(p) for p in self.layer_paths], self.excluded)
        m = meta_rows(_layer_frames(self.spark, self.layers, self.layer_paths)).persist()
        self.cached.append(m)
        return m

    def _facts_of(self, meta) -> dict:
        return _local_facts(meta) if self.local_meta else _facts(meta)

    def _facts_now(self) -> tuple:
        meta = self._current_meta()
        return meta, self._facts_of(meta)

    def rerun_ticks(self, meta) -> tuple[tuple, int]:
        """The flows that need the capture's ticks run again with them -> (the ticks, how many flows)."""
        from pyspark.sql import functions as F

        if self.local_meta:
            need = [f for f, m in meta if "error" not in m and m["needs_ticks"]]
        else:
            need = [r.flow for r in meta.where(F.col("needs_ticks")).select("flow").collect()]
        ticks = self._all_ticks()
        self._rerun(need, FlowParams(**{**self.base.__dict__, "ticks": ticks}), self.work + "/rows_ticks")
        return ticks, len(need)

    def _all_ticks(self) -> tuple:
        """The capture's (packet, ts) ticks a flow of this run may need: an earlier run's after its
        carried flows' last records, then this run's (:meth:`_ticks`)."""
        return (self.resume.ticks if self.resume is not None else ()) + self._ticks()

    def _ticks(self) -> tuple:
        """The capture's (packet, ts) ticks over this run's records, read by one Python task
        (continuing an earlier run's clock); the clock's state after them in ``tick_due``."""
        spark, meter, start = self.spark, self.meter, self.tick_due
        if self._ticks_ahead is not None and self._ticks_ahead[0] == start:
            got = self._ticks_ahead[1].result()
        elif self.seg_files is not None:  # one Python task reads the stage-1 files
            fn = metered(meter, "reruns", ticks_direct_fn(self.seg_files, dict(self.lay.offsets), 1_000_000_000,
                                                          start, True))
            got = spark.sparkContext.parallelize([0], 1).mapPartitions(fn).collect()
        else:
            tk = self.tcp().select("packet", "ts").repartition(1).sortWithinPartitions("packet").mapInArrow(
                metered(meter, "reruns", ticks_fn(1_000_000_000, start, True)), "packet long, ts long")
            got = [(r.packet, r.ts) for r in tk.collect()]
        due = [ts for pk, ts in got if pk == -1]  # (the clock's state after the records)
        if due:
            self.tick_due = due[-1]
        return tuple((pk, ts) for pk, ts in got if pk != -1)

    def _ticks_here(self, start) -> list:
        """What the ticks' task gives (:func:`~.stages.ticks_direct_fn`, from the clock's state
        ``start``), read by this process from the local stage-1 files; its CPU counted for the
        reruns step."""
        cpu = time.thread_time()
        got = list(ticks_direct_fn(self.seg_files, dict(self.lay.offsets), 1_000_000_000, start, True)(None))
        self.meter.add("reruns", time.thread_time() - cpu)
        return got

    def _flow_records(self):
        """The numbered TCP record rows (:meth:`tcp`) and a row naming each flow carried from an
        earlier run (:func:`~.stages.marker_row`): stage 2's input through Spark's shuffle."""
        if not self.carried_in:
            return self.tcp()
        schema = ("flow string, packet long, ts long, linktype int, data binary, orig_len long, file int, "
                  "pos long, caplen int")
        markers = self.spark.createDataFrame([marker_row(f) for f in sorted(self.carried_in)], schema)
        return self.tcp().unionByName(markers)

    def _flows_of(self, meta) -> list:
        """The flows of the current result (their "_flow" rows)."""
        if self.local_meta:
            return [f for f, m in meta if "error" not in m]
        return [r.flow for r in meta.where("error is null").select("flow").collect()]

    def _table_rows(self, table: str) -> list:
        """(flow, blob) of the "_flow" or "_state" rows of the current result: each layer's minus
        the flows a later layer ran again."""
        dirs = [_direct_dir(p) for p in self.layer_paths]
        if None not in dirs:
            return _local_rows(dirs, self.excluded, table)
        from pyspark.sql import functions as F

        out = []
        for li, (rows, _) in enumerate(_layer_frames(self.spark, self.layers, self.layer_paths)):
            ex = self.excluded[li]
            out += [(r.flow, r.blob) for r in rows.where(F.col("table") == table).select("flow", "blob").collect()
                    if r.flow not in ex]
        return out

    def _checkpoint(self, facts: dict, ticks: tuple) -> Checkpoint:
        """What this run leaves for the next (:class:`Checkpoint`): the set so far and the flows
        whose rows could still change with later records."""
        cp, lay = self.resume, self.lay
        metas = [(f, pickle.loads(b)) for f, b in self._table_rows("_flow")]
        metas = [(f, m) for f, m in metas if "error" not in m]
        states = dict(self._table_rows("_state"))
        carried = [(f, m) for f, m in metas if m.get("carried")]
        firsts = [m["prev_packet"] for _, m in carried if m["prev_packet"] is not None]
        final = dict(cp.final_counts) if cp is not None else {}
        for _, m in metas:
            prov = m.get("provisional") or {}
            for t, n in m["rows"].items():
                final[t] = final.get(t, 0) + n - prov.get(t, 0)
        files = set_files(self.files, self.summaries, lay)
        return Checkpoint(
            options=self.options, files=(cp.files if cp is not None else []) + files,
            records=(cp.records if cp is not None else 0) + lay.records,
            tcp_records=(cp.tcp_records if cp is not None else 0) + lay.tcp_records,
            last_ts=self.capture_end, top_ts=latest_record_time(cp, self.summaries, lay.offsets),
            last_tcp_packet=self.last_tcp, last_event=self._last_event(facts),
            tick_due=self.tick_due,
            ticks=tuple(t for t in ticks if t[0] > min(firsts)) if firsts else (),
            clock_watch=self.watch,
            errors=(cp.errors if cp is not None else []) + list(lay.errors),
            merged=(cp.merged if cp is not None else []) + [[self.files[fi] for fi in g] for g in lay.merged],
            keylog=self.embedded, final_counts=final,
            flows={f: states[f] for f, _ in carried},
            closed=merge_closed(cp.closed if cp is not None else (), [f for f, m in metas if not m.get("carried")]),
            runs=(cp.runs + 1) if cp is not None else 1,
            unsaved=next((f"{f}: {m['unsaved']}" for f, m in sorted(carried) if m.get("unsaved")), None))

    def _analysis_end(self, facts: dict):
        """The time the single-process Analyzer is finished at: that of the last record that produced an
        event."""
        best = self._last_event(facts)
        return best[1] if best is not None else None

    def _last_event(self, facts: dict) -> tuple | None:
        """(packet, ts) of the set's last record that produced an event (an earlier run's too)."""
        best = None
        earlier = self.resume.last_event if self.resume is not None else None
        for cand in ((facts["last_packet"], facts["last_ts"]), self.last_note, earlier):
            if cand is not None and cand[0] is not None and (best is None or cand[0] > best[0]):
                best = cand
        return best

    def rerun_at_end(self, meta, ticks, analysis_end) -> int:
        """The flows whose rows depend on the time the analysis ends run again with ``analysis_end`` ->
        how many."""
        capture_end = self.capture_end
        if self.local_meta:
            sens = [f for f, m in meta if "error" not in m and end_sensitive(m, capture_end, analysis_end)]
        else:
            sens = [r.flow for r in meta.mapInArrow(sensitive_fn(capture_end, analysis_end),
                                                    "flow string").collect()]
        if sens:
            self._rerun(sens, FlowParams(**{**self.base.__dict__, "ticks": ticks, "end_ts": analysis_end}),
                        self.work + "/rows_end")
        return len(sens)

    def _result(self, facts: dict, cp: Checkpoint | None) -> AnalysedRun:
        lay = self.lay
        counts = {t: facts["rows"][t] for t in TABLES + (("frames",) if self.frames else ())}
        old = self.resume
        if old is None:
            files, errors, spans, order = lay.order, lay.errors, lay.spans, set_order(lay, len(self.files))
        else:  # the whole set's
            files, spans = whole_set_order(old, lay)
            rank = {f: i for i, f in enumerate(files)}
            errors = sorted(old.errors + list(lay.errors), key=lambda e: rank.get(e[0], len(rank)))
            merged = SimpleNamespace(merged=old.merged + list(lay.merged))
            order = set_order(merged, len(old.files) + len(self.files))
        set_counts = {t: n + (old.final_counts.get(t, 0) if old is not None else 0) for t, n in counts.items()}
        return AnalysedRun(layers=self.layers, layer_paths=self.layer_paths, excluded=self.excluded, counts=counts,
                           stats=self.stats, clock=self.clock, meter=self.meter, nparts=self.nparts,
                           files=files, errors=errors, order=order,
                           gaps=set_gaps_of(spans), clock_steps=[st.as_dict() for st in self.steps],
                           checkpoint=cp, carried=cp.carried if cp is not None else frozenset(),
                           set_counts=set_counts)


def table_frames(spark, done: AnalysedRun, tables=None, bounds: dict | None = None) -> dict:
    """name -> the DataFrame of each result table (``tables``: which; default every one the run
    counted), in single-process order, read lazily from the stage-2 rows of ``done``
    (:func:`analyse`): the registry's columns and Spark types."""
    counts = done.counts
    names = [t for t in (tables or counts) if t in counts]
    layers = _layer_frames(spark, done.layers, done.layer_paths)
    if bounds is None:
        bounds = table_bounds(layers, {t: counts[t] for t in names}, done.nparts)
    return {t: make_table(spark, layers, t, bounds[t], done.excluded) for t in names}


def _layer_frames(spark, layers: list, layer_paths: list) -> list:
    """``layers`` with the DataFrame of every layer's stage-2 rows made (in place), for the steps
    that run Spark over them."""
    for i, (rows, ex) in enumerate(layers):
        if rows is None:
            layers[i] = (read_rows(spark, layer_paths[i]), ex)
    return layers


def write_tables(spark, done: AnalysedRun, out_uri: str, provisional: bool | None = None) -> dict | None:
    """The tables of ``done`` written flat under ``out_uri``, without the summaries (an archive
    directory computes them over every run's rows: pipelines/spark/archive_dir.py).
    ``provisional`` (True/False; a local ``out_uri`` and work directory only): only the rows
    that are (not) provisional, the rows the flows carried to the next run made at their
    finish; then returns table -> rows written."""
    return _write_outputs(spark, done, out_uri, DEFAULT_WINDOW, summaries=False, provisional=provisional)


def write_split_tables(spark, done: AnalysedRun, final_dir: str, provisional_dir: str) -> tuple[dict, dict]:
    """The tables of ``done`` written flat, its final rows under the local folder ``final_dir``, its
    provisional ones (those the flows carried to the next run made at their finish) under
    ``provisional_dir``: the files of :func:`write_tables` with ``provisional`` False, then True,
    in one Spark job (a local work directory only).  Returns (table -> final rows, table ->
    provisional rows)."""
    layer_dirs = [_direct_dir(p) for p in done.layer_paths]
    if None in layer_dirs:
        raise ValueError("the final and provisional rows are written apart from a local work directory only")
    got = write_split_tables_local(spark, layer_dirs, done.excluded, done.counts,
                                   {t: os.path.join(final_dir, t) for t in done.counts},
                                   {t: os.path.join(provisional_dir, t) for t in done.counts},
                                   done.nparts, meter=done.meter)
    done.mark("tables")
    return got


def write_dated_run_tables(spark, done: AnalysedRun, version: str, run: int, previous: str | None = None,
                           spark_done: Callable | None = None):
    """The tables of ``done`` written straight under the local folder ``version`` partitioned by
    day, no flat files, the rows of the flows carried to the next run apart, when there are any;
    ``previous``: the version whose rows the run keeps (its connections' days count).  With a
    local master, by this process (:func:`~.tables.write_dated_tables_here`: no Spark job; the
    executors are this machine's cores), ``spark_done`` (the run needs Spark no more) called
    before; otherwise in one Spark job (:func:`~.tables.write_dated_tables_local`).  Returns table
    -> rows written, or None when the work directory is not local (then the tables are written
    flat and again by day, and ``spark_done`` is not called)."""
    from .tables import run_connection_days, write_dated_tables_here, write_dated_tables_local

    layer_dirs = [_direct_dir(p) for p in done.layer_paths]
    if None in layer_dirs:
        return None
    days = run_connection_days(layer_dirs, done.excluded, done.counts, done.nparts, previous)
    sc = spark.sparkContext
    if local_master(sc.master):
        slots = sc.defaultParallelism
        if spark_done is not None:
            spark_done()
        final, provisional = write_dated_tables_here(layer_dirs, done.excluded, done.counts, done.nparts, version,
                                                     run, bool(done.carried), days, slots, meter=done.meter)
    else:
        final, provisional = write_dated_tables_local(spark, layer_dirs, done.excluded, done.counts, done.nparts,
                                                      version, run, bool(done.carried), days, meter=done.meter)
    done.mark("tables")
    return {t: final[t] + provisional[t] for t in done.counts}


def local_master(master: str) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM on this machine (``local``,
    ``local[N]``, ``local[*]``, ``local[N,F]``; not ``local-cluster[...]`` nor a cluster's URL):
    then a step whose work is Arrow's may as well run in the driver's own process."""
    return master == "local" or master.startswith("local[")


def _write_outputs(spark, done: AnalysedRun, out_uri: str, window: float, summaries: bool = True,
                   provisional: bool | None = None) -> dict | None:
    """The tables and the summaries of ``done`` written under ``out_uri`` (``done.written``:
    name -> URI); without ``summaries``, the tables only (an archive directory computes its
    summaries over every run's rows: pipelines/spark/archive_dir.py); ``provisional``: see
    :func:`write_tables` (returns the rows written then)."""
    layers, layer_paths, excluded = done.layers, done.layer_paths, done.excluded
    counts, nparts, mark = done.counts, done.nparts, done.mark

    # ---- tables, then the summaries read back from them: each a few concurrent Spark jobs
    # (one Python thread each), so that the small ones fill the cores the large ones leave idle
    out_base = out_uri.rstrip("/")
    written = {t: out_base + "/" + t for t in counts}
    layer_dirs = [_direct_dir(p) for p in layer_paths]
    if None not in layer_dirs and None not in [_direct_dir(u) for u in written.values()]:
        # local files: tasks read their range's chunks straight from the stage-2 files (no
        # shuffle), in one job for all the tables
        rows = write_tables_local(spark, layer_dirs, excluded, counts, {t: _direct_dir(u) for t, u in written.items()},
                                  nparts, meter=done.meter, provisional=provisional)
        bounds = None
    elif provisional is not None:
        raise ValueError("the final and provisional rows are written apart from a local work directory only")
    else:
        layers = _layer_frames(spark, layers, layer_paths)
        bounds = table_bounds(layers, counts, nparts)

    def write_table(t):
        directory = _direct_dir(written[t])
        if directory is None:  # not a local path: the tasks make the files, the driver copies them there
            from amqp_dissect.pipelines.spark_runtime.fs import write_files

            df = make_table(spark, layers, t, bounds[t], excluded, meter=done.meter, as_file=True)
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
        got = make_table(spark, layers, t, bounds[t], excluded, directory, meter=done.meter).collect()
        if sum(r.rows for r in got) != counts[t]:  # each row in exactly one range
            raise RuntimeError(f"table {t}: {sum(r.rows for r in got)} rows written of {counts[t]}")
        if not got:  # no rows at all: one file with the columns
            write_range(directory, t, 0, None)
        open(os.path.join(directory, "_SUCCESS"), "wb").close()

    if bounds is not None:
        with sql_conf(spark, **TABLES_CONF):
            _concurrently(write_table, sorted(counts, key=lambda t: -counts[t]))  # the largest first
    mark("tables")
    if not summaries:
        done.written = written
        return rows if provisional is not None else None
    written.update({name: out_base + "/" + name for name in SUMMARIES})

    local_out = _direct_dir(out_base)
    if local_out is not None:  # Python tasks read the tables' files and write the summaries
        write_summaries_local(spark, local_out, window, meter=done.meter)
    else:  # (the DataFrames of the written tables only here: each is a listing and a plan in the JVM)
        tables = {t: spark.read.schema(table_schema(t)).parquet(written[t]) for t in ("links", "deliveries", "stalls")}

        def write_summary(name):
            from amqp_dissect.pipelines.spark_runtime.fs import write_files

            blob = summary_frame(name, tables, window, meter=done.meter, as_file=True).collect()[0].data
            write_files(spark, written[name], [("part-00000.parquet", blob)])

        with sql_conf(spark, **TS_CONF):
            _concurrently(write_summary, SUMMARIES)
    mark("summaries")
    done.stats["timings"] = done.clock.marks
    done.stats["cpu"] = done.meter.seconds()
    done.written = written


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
                   only, meter, step: str, markers=()) -> None:
    """Stage 2 (or a rerun of the flows ``only``) in ``nparts`` plain Python tasks that read their
    flows' records from the local stage-1 files (:func:`~.stages.task_record_batches`) and write their
    rows to the local directory ``path``: one Spark job without a shuffle; the same rows as
    :func:`_stage2`."""
    directory = _direct_dir(path)
    bc = spark.sparkContext.broadcast(params)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    fn = stage2_direct_fn(bc, seg_files, dict(offsets), nparts, dict(plan or {}), only,
                           spark_arrow_schema(rows_schema()), directory, tuple(sorted(markers)))
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


def _local_rows(layer_dirs: list, excluded: list, table: str) -> list:
    """(flow, blob) of the rows of ``table`` ("_flow", "_state") of the current result, read by the
    driver from the local stage-2 files (each layer's minus the flows a later layer ran again)."""
    import pyarrow.parquet as pq

    out = []
    for li, d in enumerate(layer_dirs):
        td = os.path.join(d, f"table={table}")
        if not os.path.isdir(td):
            continue
        for name in sorted(os.listdir(td)):
            if name.endswith(".parquet") and not name.startswith((".", "_")):
                t = pq.read_table(os.path.join(td, name), columns=["flow", "blob"], use_threads=False)
                out += [(f, b) for f, b in zip(t.column("flow").to_pylist(), t.column("blob").to_pylist())
                        if f not in excluded[li]]
    return out












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

