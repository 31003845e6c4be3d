"""Benchmark of an archive directory's tables step alone (a script, not a test): the same run's
stage-2 rows written by day by Spark's Python tasks (``write_dated_tables_local``, what a run with
a cluster master does) and by this process (``write_dated_tables_here``, with a local master), in
two threads and in one, alternated round by round on one ``local[2]`` session.

Prints, per way, each round's wall seconds, the CPU seconds of the step (the tasks' own, from the
job's meter; or this process's) and the load average (1 min) at the round's end.

    python tests/benchmarks/bench_archive_tables.py 'DIR/*.pcap' [--repeat 3]

(DIR: e.g. the 4x set ``bench_archive_growth.py --copies 4 --work W`` cuts, ``W/set``.)
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
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    a = ap.parse_args()
    sys.path.insert(0, ROOT)
    from amqp_dissect.capture.tcp import IDLE_TIMEOUT
    from amqp_dissect.pipelines.archive import DEFAULT_SPLIT_SIZE
    from amqp_dissect.pipelines.spark.job import _direct_dir, analyse
    from amqp_dissect.pipelines.spark.stages import Meter
    from amqp_dissect.pipelines.spark.tables import (run_connection_days, write_dated_tables_here,
                                                     write_dated_tables_local)
    from amqp_dissect.pipelines.spark_runtime.session import spark_session, stop_session

    files = sorted(glob.glob(a.captures))
    spark = spark_session(master="local[2]")
    work = tempfile.mkdtemp(prefix="archive-tables-")
    try:
        done = analyse(spark, files, "file://" + work + "/work", t0=time.time(), split_size=DEFAULT_SPLIT_SIZE,
                       frames=False, partitions=None, ports=(), idle_timeout=IDLE_TIMEOUT, keylog=None)
        dirs = [_direct_dir(p) for p in done.layer_paths]
        days = run_connection_days(dirs, done.excluded, done.counts, done.nparts)
        split = bool(done.carried)
        got: dict = {}
        for i in range(a.repeat):
            for way in ("Spark tasks", "here, 2 threads", "here, 1 thread"):
                out = os.path.join(work, f"out-{i}")
                meter = Meter(spark)
                t = time.perf_counter()
                if way == "Spark tasks":
                    write_dated_tables_local(spark, dirs, done.excluded, done.counts, done.nparts, out, 1, split, days,
                                             meter=meter)
                else:
                    write_dated_tables_here(dirs, done.excluded, done.counts, done.nparts, out, 1, split, days,
                                            2 if "2" in way else 1, meter=meter)
                got.setdefault(way, []).append((time.perf_counter() - t, meter.seconds().get("tables", 0.0),
                                                os.getloadavg()[0]))
                shutil.rmtree(out)
        done.cleanup(False)
    finally:
        stop_session(spark, end_jvm=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.captures}: {len(files)} files; the tables step, {a.repeat} round(s) alternated")
    for way, rounds in got.items():
        print(f"  {way}: wall " + ", ".join(f"{w:.2f}" for w, _, _ in rounds) + " s; CPU "
              + ", ".join(f"{c:.2f}" for _, c, _ in rounds) + " s; load " + ", ".join(f"{x:.1f}" for _, _, x in rounds))


if __name__ == "__main__":
    main()
