"""Where the archive's stage 2 spends its CPU, against the single process (a script, not a test).

Runs the archive job once on ``local[2]`` over a capture set, keeping its stage-1 files and the
arguments its stage-2 job got; then, in this process, runs stage 2's tasks outside Spark (one
after the other, one Arrow thread and the workers' GC, as in a worker), layer by layer: the record
index alone (``task_record_batches``), with the records' bytes (``fill_batches``), the flows' analysis
and chunks (``FlowRunner.run``), and the rows' files (``_write_rows``); and the single process's
parts over the same files: the pcap read, the dissector's loop, the analysis, the deliveries'
Arrow batches.  Prints the CPU seconds (``time.process_time()``) of each, ``--repeat`` rounds
alternated, and the load average.

    python tests/benchmarks/bench_stage2_cpu.py 'DIR/trace.pcap*' [--repeat 2]

``--loop N --before FLOWS_PY``: instead of the layers, task 0's first ``N`` records (read into
memory once) through ``FlowRunner.run`` of this tree and of another ``flows.py`` (say the base
commit's, ``git show BASE:pipelines/archive/flows.py``), alternated ``--repeat`` rounds.

(DIR: e.g. ``bench_spark.py --archive X --rotate 8 --keep --work W`` leaves ``W/rotated``.)
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", help="a glob of the capture files (one set)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds (default 2)")
    ap.add_argument("--loop", type=int, default=0, help="task 0's first N records, this tree against --before")
    ap.add_argument("--before", help="a flows.py to run against this tree's (with --loop)")
    a = ap.parse_args()
    sys.path.insert(0, ROOT)
    import pyarrow as pa

    from amqp_dissect.pipelines import analysis_gc
    from amqp_dissect.pipelines.archive import FlowRunner, RecordReader, fill_batches
    from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream
    from amqp_dissect.pipelines.spark import job, run_archive
    from amqp_dissect.pipelines.spark.stages import (_with_markers, _write_rows, rows_schema, spark_arrow_schema,
                                                     task_record_batches)
    from amqp_dissect.pipelines.spark_runtime.session import spark_session, stop_session
    from amqp_dissect.results.analytics import Analyzer

    files = sorted(glob.glob(a.captures))
    work = tempfile.mkdtemp(prefix="stage2-cpu-")
    got: dict = {}
    orig = job._stage2_direct

    def keep_args(spark, seg_files, offsets, params, nparts, path, plan, only, meter, step, markers=()):
        if step == "stage2":
            got.update(seg_files=seg_files, offsets=dict(offsets), params=params, nparts=nparts, plan=dict(plan or {}),
                       only=only, markers=tuple(markers))
        return orig(spark, seg_files, offsets, params, nparts, path, plan, only, meter, step, markers)
    job._stage2_direct = keep_args
    spark = spark_session(master="local[2]")
    try:
        r = run_archive(spark, files, os.path.join(work, "out"), keep_work=True)
    finally:
        job._stage2_direct = orig
        stop_session(spark)
    print(f"the job: tasks' CPU per step {r['stats'].get('cpu')}; {r['counts']}", flush=True)
    if not got:
        sys.exit("stage 2 did not read the stage-1 files itself (a remote work directory, or records that travel "
                 "whole): nothing to measure here")
    analysis_gc()
    pa.set_cpu_count(1)
    params, nparts = got["params"], got["nparts"]
    schema = spark_arrow_schema(rows_schema())

    def batches(part):
        return task_record_batches(got["seg_files"], got["offsets"], part, nparts, got["plan"], got["only"])

    def records(part, reader):  # (the task's rows as FlowRunner takes them: stage2_direct_fn's)
        return _with_markers(fill_batches(batches(part), reader), got["markers"], part, nparts, got["plan"],
                             got["only"])

    def stage2(layer):
        for part in range(nparts):
            reader = RecordReader(params.files)
            try:
                if layer == "records":
                    for _ in batches(part):
                        pass
                elif layer == "bytes":
                    for _ in records(part, reader):
                        pass
                elif layer == "run":
                    for _ in FlowRunner(params).run(records(part, reader)):
                        pass
                else:
                    d = os.path.join(work, "rows")
                    shutil.rmtree(d, ignore_errors=True)
                    os.makedirs(d)
                    _write_rows(d, part, FlowRunner(params).run(records(part, reader)), schema)
            finally:
                reader.close()

    def single(layer):
        src = CaptureSource(files)
        if layer == "read":
            for _ in src.records():
                pass
        elif layer == "dissect":
            src.drive(lambda ev: None)
        elif layer == "analyse":
            folded: list = []
            an = Analyzer(rows=False, fold_out=folded, redeliveries=False)

            def sink(ev, feed=an.feed):
                feed(ev)
                if len(folded) >= 8192:
                    folded.clear()
            src.drive(sink)
        else:
            for _ in DeliveryStream(src).batches(8192, keep_connections=False):
                pass
    if a.loop:
        loop_ab(a, params, lambda reader: records(0, reader), RecordReader, FlowRunner)
        shutil.rmtree(work, ignore_errors=True)
        return
    steps = [("stage 2: the record index (task_record_batches)", stage2, "records"),
             ("stage 2: + the records' bytes (fill_batches)", stage2, "bytes"),
             ("stage 2: + the analysis and the chunks (FlowRunner.run)", stage2, "run"),
             ("stage 2: + the rows' files (_write_rows): a task", stage2, "write"),
             ("single: the pcap read", single, "read"),
             ("single: + the dissector (pump)", single, "dissect"),
             ("single: + the analysis", single, "analyse"),
             ("single: + the deliveries' batches", single, "batches")]
    try:
        for i in range(a.repeat):
            for label, fn, layer in steps:
                t = time.process_time()
                fn(layer)
                print(f"  round {i + 1}  {label:<58} {time.process_time() - t:7.2f} CPU s  "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def loop_ab(a, params, records, RecordReader, FlowRunner) -> None:
    """``--loop``: task 0's first records through two FlowRunners, alternated."""
    import importlib.util
    import itertools

    spec = importlib.util.spec_from_file_location("amqp_dissect.pipelines.archive._flows_before", a.before)
    before = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = before
    spec.loader.exec_module(before)
    reader = RecordReader(params.files)
    rows = list(itertools.islice(records(reader), a.loop))
    reader.close()
    got: dict = {"before": [], "after": []}
    for i in range(a.repeat):
        for name in (("before", "after") if i % 2 == 0 else ("after", "before")):
            runner = (before.FlowRunner if name == "before" else FlowRunner)(params)
            t = time.process_time()
            for _ in runner.run(iter(rows)):
                pass
            got[name].append(time.process_time() - t)
            print(f"  round {i + 1}  {name:<6} {len(rows)} records {got[name][-1]:7.2f} CPU s  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    for name, v in got.items():
        v.sort()
        print(f"  {name}: median {(v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2:.2f} CPU s", flush=True)


if __name__ == "__main__":
    main()
