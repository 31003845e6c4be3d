#!/usr/bin/env python3
"""The fixed cost of a Spark job on a local session (a script, not a test).

    python tests/benchmarks/bench_spark_jobs.py [--master 'local[2]'] [--jobs 4] [--tasks 8] [--rounds 1]

Each round starts a fresh session (``spark_session``: the zygote, the JVM, the context), then runs
``--jobs`` jobs of ``--tasks`` empty Python tasks one after the other, and prints one JSON line:
the session's start, each job's wall time, the time from the job's submission to its first and last
task, the CPU its Python workers spent per task (their ``os.times()``, read by the tasks
themselves: what a task costs a worker beyond its own code, e.g. the daemon's collection after
each task) and, after the last job, each worker's memory (``/proc/self/smaps_rollup``: private
dirty and proportional set size, MB).  Alternate it with a tree to compare against, and give the
machine's load (``uptime``) beside the figures: wall times on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _empty_task(_rows):
    import os
    import time

    t = os.times()
    yield os.getpid(), t.user + t.system, time.time()


def _memory(_rows):
    import os

    mb = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Pss", "Private_Dirty"):
                mb[key] = int(value.split()[0]) / 1024
    yield os.getpid(), mb


def one_round(master: str, jobs: int, tasks: int) -> dict:
    from amqp_dissect.pipelines.spark import spark_session, stop_session

    t = time.perf_counter()
    spark = spark_session(master=master)
    out = {"session_s": round(time.perf_counter() - t, 3), "jobs": []}
    sc = spark.sparkContext
    try:
        seen: dict = {}  # worker pid -> (its CPU seconds, tasks run) at its last task
        for _ in range(jobs):
            t0 = time.time()
            got = sc.parallelize(range(tasks), tasks).mapPartitions(_empty_task).collect()
            wall = time.time() - t0
            cpu, n = 0.0, 0
            for pid, c, _ts in sorted(got, key=lambda r: r[2]):
                if pid in seen:  # (a worker's CPU between two of its tasks: one task and what follows it)
                    cpu += c - seen[pid]
                    n += 1
                seen[pid] = c
            out["jobs"].append({"wall_s": round(wall, 3), "first_task_s": round(min(r[2] for r in got) - t0, 3),
                                "last_task_s": round(max(r[2] for r in got) - t0, 3),
                                "worker_cpu_ms_per_task": round(1000 * cpu / n, 1) if n else None,
                                "workers": len({r[0] for r in got})})
        mem = dict(sc.parallelize(range(tasks), tasks).mapPartitions(_memory).collect())
        out["worker_memory_mb"] = {str(pid): {k: round(v, 1) for k, v in m.items()} for pid, m in sorted(mem.items())}
    finally:
        stop_session(spark, end_jvm=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1, help="fresh sessions, one after the other (fresh processes)")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # (one round, in this process)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(one_round(a.master, a.jobs, a.tasks)), flush=True)
        return 0
    import subprocess

    for _ in range(a.rounds):
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", "--master", a.master,
                            "--jobs", str(a.jobs), "--tasks", str(a.tasks)], capture_output=True, text=True, cwd=ROOT)
        line = (r.stdout.strip().splitlines() or ["{}"])[-1]
        print(json.dumps({"load": float(load), **json.loads(line)}), flush=True)
        if r.returncode:
            sys.stderr.write(r.stderr)
            return r.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
