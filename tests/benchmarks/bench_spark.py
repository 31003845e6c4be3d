#!/usr/bin/env python3
"""Benchmark of the Spark archive job (a script, not a test).

    python tests/benchmarks/bench_spark.py [--connections 24] [--messages 3000] [--copies 12] [--parts 16]
                                [--split-size 8m] [--work /tmp/amqp-bench-spark] [--keep]
                                [--repeat N] [--only single,rotated,whole,ranges] [--reuse]

Builds one capture of real proton-encoded AMQP traffic (tests/benchmarks/benchmark.py's
``build_capture``: interleaved connections, acks on) and a rotated copy of it
(``amqp_dissect.pipelines.archive.split``, ``--parts`` files, connections spanning them), then times:

* the single-process path (``amqp_dissect.pipelines.runs.local.read_analysis``) on the capture,
* the Spark job with local[1] and local[2] on the rotated archive (one stage-1
  task per file),
* the Spark job on the single capture read whole (one stage-1 task) and split
  into ``--split-size`` byte ranges, with local[2].

``--archive PCAP --rotate N`` instead: the issue-26 comparison on a given capture cut into ``N``
rotated files with ``editcap -c`` (named as ``tcpdump -C`` names them: NAME, NAME1, NAME2, ...):
the wall and CPU time of ``amqp-dissect deliveries --format parquet`` (one process, then ``-j 2``) and
of ``amqp-dissect archive --master local[2]`` on the files (each a fresh process: JVM start
included; the CLI's own "in N s" splits its time into the job and the rest), then the job on
local[1] and on local[2], each in a fresh process (a JVM of its own, cold), with the session
start apart and, per step (stage1, numbering,
stage2, reruns, tables, summaries), its wall time, the CPU seconds of the whole process tree (JVM,
Python workers, driver) and those of the Python tasks alone (``stats["cpu"]``: what the workers'
``time.process_time()`` counted), the local[1]/local[2] ratio per step, and the issue's two
targets (archive at most 2x ``deliveries -j 2``; the decoding stages, stage1 + stage2, at least
1.7x faster on local[2] than on local[1]) as met or not.  With
``AMQP_DISSECT_SPARK_PROFILE=DIR`` each task also writes its cProfile to DIR.

Times exclude the Spark session start (the JVM and its Python workers, reported
apart, cold) and follow one warm-up run on the samples per session.  With
``--repeat N`` the local[1] and local[2] sessions alternate N times (each round
starts a fresh session per master, back to back) and the table gives the median
of each run with the local[2]/local[1] ratio of every round; each run's
``timings`` are the job's own per-stage seconds.  Prints a table and one JSON line.
The machine is shared and noisy: compare ratios from one run.  So each Spark run also
gives its CPU seconds (JVM, Python workers and driver) and each local[1] run a 2-slot
estimate from its Spark event log: every stage's tasks rescheduled on two slots with the
durations they had (longest first), and never below half the run's CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SUPPORT = os.path.join(os.path.dirname(HERE), "support")  # the helpers (pcapbuild, protonpump, ...)
sys.path[:0] = [HERE, SUPPORT, ROOT]


def repeat(src: str, dst: str, copies: int) -> None:
    """Write ``copies`` copies of the pcap ``src`` one after the other (timestamps shifted by the
    traffic's duration + 120 s, so every copy opens new connections on the same 4-tuples)."""
    import struct

    data = open(src, "rb").read()
    hdr, body = data[:24], data[24:]
    recs = []
    pos = 0
    while pos < len(body):
        sec, usec, caplen, orig = struct.unpack_from("<IIII", body, pos)
        recs.append((sec, usec, body[pos + 16 : pos + 16 + caplen], orig))
        pos += 16 + caplen
    span = recs[-1][0] - recs[0][0] + 120  # past the reassembler's 60 s close grace: each copy is a new connection
    with open(dst, "wb") as f:
        f.write(hdr)
        for k in range(copies):
            for sec, usec, payload, orig in recs:
                f.write(struct.pack("<IIII", sec + k * span, usec, len(payload), orig))
                f.write(payload)


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


RUNS = ("single", "rotated", "whole", "ranges")
HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of process ``root`` and its descendants, with the children
    they reaped (Spark's Python workers are children of the JVM's worker daemon)."""
    kids: dict = {}
    own: dict = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()
        kids.setdefault(int(f[1]), []).append(int(p))
        own[int(p)] = sum(int(x) for x in f[11:15]) / HZ
    total, stack = 0.0, [root]
    while stack:
        q = stack.pop()
        total += own.get(q, 0.0)
        stack.extend(kids.get(q, ()))
    return total


def tree_cpus(root: int) -> dict:
    """pid -> CPU seconds of ``root`` and every descendant alive (their own: a child's time moves
    into its parent's when reaped, and summing both would count it twice)."""
    kids: dict = {}
    own: dict = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()
        kids.setdefault(int(f[1]), []).append(int(p))
        own[int(p)] = sum(int(x) for x in f[11:13]) / HZ
    out, stack = {}, [root]
    while stack:
        q = stack.pop()
        out[q] = own.get(q, 0.0)
        stack.extend(kids.get(q, ()))
    return out


def spark_cpu(spark) -> float:
    """CPU seconds so far of the Spark JVM (local mode: driver and executor), its Python workers,
    the zygote they are forked from and this driver process."""
    from amqp_dissect.pipelines.spark_runtime.zygote import zygote_pid

    t = os.times()
    zygote = zygote_pid()  # (the workers' daemon is the zygote's child, not the JVM's)
    return tree_cpu(spark.sparkContext._gateway.proc.pid) + (tree_cpu(zygote) if zygote else 0.0) + t.user + t.system


def makespan(durations, slots: int) -> float:
    """Longest-first list scheduling of task ``durations`` on ``slots`` slots."""
    import heapq

    free = [0.0] * slots
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def event_stages(evdir: str, t0: float, t1: float) -> list:
    """Task durations (s) of each stage that ran between ``t0`` and ``t1`` (epoch seconds), from
    the Spark event log in ``evdir``."""
    stages: dict = {}
    for name in sorted(os.listdir(evdir)):
        path = os.path.join(evdir, name)
        files = [os.path.join(path, x) for x in sorted(os.listdir(path))] if os.path.isdir(path) else [path]
        for fp in files:
            with open(fp) as f:
                for line in f:
                    if '"SparkListenerTaskEnd"' not in line:
                        continue
                    e = json.loads(line)
                    ti = e["Task Info"]
                    if t0 <= ti["Launch Time"] / 1000 and ti["Finish Time"] / 1000 <= t1:
                        stages.setdefault((e["Stage ID"], e["Stage Attempt ID"]), []).append(
                            (ti["Finish Time"] - ti["Launch Time"]) / 1000)
    return list(stages.values())


def two_slot_estimate(wall: float, cpu: float, stages: list) -> float:
    """What a local[1] run of ``wall`` seconds would take on 2 task slots and 2 cores: each
    stage's tasks rescheduled on 2 slots (same durations, longest first; what the stage saves
    comes off the wall time), and never less than half the run's CPU seconds (2 cores)."""
    saved = sum(sum(ds) - makespan(ds, 2) for ds in stages)
    return max(wall - saved, cpu / 2)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _rotated(src: str, folder: str, n: int) -> list[str]:
    """``src`` cut into ``n`` files by ``editcap -c`` (records per file), renamed as ``tcpdump -C``
    names its files: NAME, NAME1, NAME2, ..."""
    import glob
    import subprocess

    from amqp_dissect.capture.pcap import open_capture

    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with open(src, "rb") as f:
        records = sum(1 for _ in open_capture(f))
    tmp = os.path.join(folder, "part.pcap")
    subprocess.run(["editcap", "-F", "pcap", "-c", str(-(-records // n)), src, tmp], check=True)
    parts = sorted(glob.glob(os.path.join(folder, "part_*.pcap")))
    name = os.path.join(folder, "trace.pcap")
    out = []
    for i, p in enumerate(parts):
        dest = name + (str(i) if i else "")
        os.rename(p, dest)
        out.append(dest)
    return out


def _child_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def archive_comparison(a) -> int:
    """``--archive``: see the module docstring."""
    import subprocess

    files = _rotated(a.archive, os.path.join(a.work, "rotated"), a.rotate)
    size = sum(os.path.getsize(f) for f in files)
    print(f"archive: {len(files)} files, {size / 1e6:.1f} MB; load average {os.getloadavg()}", flush=True)
    cli = [sys.executable, "-m", "amqp_dissect.cli"]
    out = os.path.join(a.work, "out")
    res: dict = {"files": len(files), "bytes": size, "load_before": os.getloadavg()}

    def run_cli(key, label, args):
        def run():  # the process tree's CPU sampled while it runs (the JVM is not reaped by its parent)
            seen = {}
            p = subprocess.Popen(cli + args, stdout=subprocess.PIPE, text=True)
            reader = ThreadPoolExecutor(1).submit(p.stdout.read)  # (the pipe drained while it runs)
            while p.poll() is None:
                for q, c in tree_cpus(p.pid).items():
                    seen[q] = max(seen.get(q, 0.0), c)
                time.sleep(0.2)
            if p.returncode:
                raise subprocess.CalledProcessError(p.returncode, args)
            return sum(seen.values()), reader.result()
        c0 = _child_cpu()
        t, (sampled, text) = timed(run)
        cpu = max(sampled, _child_cpu() - c0)
        res[key + "_s"], res[key + "_cpu_s"] = round(t, 2), round(cpu, 2)
        ratio = f"  ({t / res['deliveries_j2_s']:.2f}x)" if "deliveries_j2_s" in res else ""
        print(f"  {label:<40} {t:8.2f} s  CPU {cpu:7.2f} s{ratio}", flush=True)
        m = re.search(r"flows\) in ([0-9.]+) s", text)
        if m:  # archive says how long its job took: the rest is the process's fixed cost
            job_s = float(m.group(1))
            res[key + "_job_s"] = job_s
            print(f"    of which the job {job_s:.2f} s; Python, JVM and session start, summary, stop "
                  f"{t - job_s:.2f} s", flush=True)

    parquet = os.path.join(a.work, "deliveries.parquet")
    run_cli("deliveries_j1", "deliveries --format parquet (one process)",
            ["deliveries", "--format", "parquet", "--output", parquet, *files])
    run_cli("deliveries_j2", "deliveries -j 2 --format parquet", ["deliveries", "-j", "2", "--format", "parquet",
                                                                  "--output", parquet, *files])
    # (a fresh run: an archive directory left in "out" by an earlier run, kept or failed, would make
    # this one an increment over it, or refuse files rotated anew)
    shutil.rmtree(out, ignore_errors=True)
    run_cli("archive_local2", "archive --master local[2]", ["archive", "--master", "local[2]", "--out", out, *files])
    stages, cpus, tree = {}, {}, {}
    for master in ("local[1]", "local[2]"):
        # each master in a fresh Python process: a session started after another one's stop would
        # reuse its JVM (warm, its classes loaded) and start in a fraction of a second
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--job-only", master, "--work", a.work, *files],
                           stdout=subprocess.PIPE, text=True, check=True)
        one = json.loads(r.stdout.strip().splitlines()[-1])
        timings, secs, cpu, t_start = one["timings"], one["seconds"], one["cpu_s"], one["session_s"]
        stages[master], cpus[master], tree[master] = timings, one["tasks_cpu"], one["tree_cpu"]
        res[f"job_{master}_s"], res[f"job_{master}_cpu_s"], res[f"session_{master}_s"] = secs, cpu, t_start
        res[f"spark_jobs_{master}"] = one.get("spark_jobs")
        print(f"  job {master} (fresh process; session {t_start:.1f} s)  {secs:8.2f} s  CPU {cpu:.2f} s; "
              f"{one.get('spark_jobs')} Spark jobs", flush=True)
        print(f"    {'step':<10} {'wall s':>8} {'CPU s':>8} {'tasks CPU s':>12}", flush=True)
        for k in timings:
            print(f"    {k:<10} {timings[k]:8.2f} {tree[master].get(k, float('nan')):8.2f} "
                  f"{cpus[master].get(k, float('nan')):12.2f}", flush=True)
    res["stages"], res["tasks_cpu"], res["tree_cpu"] = stages, cpus, tree
    res["stage_ratio"] = {k: round(stages["local[1]"][k] / max(1e-9, stages["local[2]"][k]), 2)
                          for k in stages["local[1]"]}
    res["load_after"] = os.getloadavg()
    print(f"  local[1] / local[2] per stage: {res['stage_ratio']}; load average {res['load_after']}", flush=True)
    # issue 26's two targets, as measured by this run
    decode = {m: stages[m]["stage1"] + stages[m]["stage2"] for m in stages}
    res["decode_ratio"] = round(decode["local[1]"] / max(1e-9, decode["local[2]"]), 2)
    res["archive_vs_j2"] = round(res["archive_local2_s"] / res["deliveries_j2_s"], 2)
    print(f"  targets: archive local[2] / deliveries -j 2 = {res['archive_vs_j2']}x (at most 2x: "
          f"{'met' if res['archive_vs_j2'] <= 2 else 'not met'}); decoding stages (stage1 + stage2) local[1] / "
          f"local[2] = {decode['local[1]']:.2f} / {decode['local[2]']:.2f} s = {res['decode_ratio']}x (at least "
          f"1.7x: {'met' if res['decode_ratio'] >= 1.7 else 'not met'})", flush=True)
    print(json.dumps(res))
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


def job_only(master: str, files: list, work: str) -> int:
    """``--job-only MASTER FILE...``: one session on ``MASTER`` and one job on the files, in this
    (fresh) process; prints one JSON line: the session start, the job's wall time, its steps' wall
    times, the process tree's CPU seconds per step and the Python tasks' (``stats["cpu"]``)."""
    from amqp_dissect.pipelines.spark import job, run_archive, spark_session, stop_session

    t_start, spark = timed(lambda: spark_session(master=master))
    samples = [spark_cpu(spark)]
    hook = lambda name: samples.append(spark_cpu(spark))  # noqa: E731
    job.MARK_HOOKS.append(hook)
    # (its own output folder, made anew: `archive --out` before it left an archive directory in "out")
    out = os.path.join(work, "job-out")
    shutil.rmtree(out, ignore_errors=True)
    try:
        secs, r = timed(lambda: run_archive(spark, files, out))
    finally:
        job.MARK_HOOKS.remove(hook)
    samples.append(spark_cpu(spark))
    timings = r["stats"]["timings"]
    print(json.dumps({"session_s": round(t_start, 2), "seconds": round(secs, 2),
                      "cpu_s": round(samples[-1] - samples[0], 2), "timings": timings,
                      "tasks_cpu": r["stats"].get("cpu", {}),
                      # (Spark jobs of the session: the job's own, a fresh process has run no other)
                      "spark_jobs": len(spark.sparkContext.statusTracker().getJobIdsForGroup()),
                      "tree_cpu": {k: round(b - a_, 2) for k, a_, b in zip(timings, samples, samples[1:-1])}}))
    stop_session(spark)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--connections", type=int, default=24)
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--copies", type=int, default=12,
                    help="the generated traffic repeated this many times, one after the other "
                         "(same 4-tuples: later copies are '#n' reuses)")
    ap.add_argument("--parts", type=int, default=16)
    ap.add_argument("--split-size", default="8m")
    ap.add_argument("--work", default="/tmp/amqp-bench-spark")
    ap.add_argument("--keep", action="store_true", help="keep the generated captures and outputs")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the captures a previous --keep run built with the same options")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of local[1] then local[2] (fresh sessions each round); medians reported")
    ap.add_argument("--jvm-options", default=None,
                    help="the JVMs' options (default: the job's, amqp_dissect.pipelines.spark.JVM_OPTIONS)")
    ap.add_argument("--only", default=",".join(RUNS),
                    help="comma-separated runs among " + ", ".join(RUNS) + " (default: all)")
    ap.add_argument("--archive", help="a capture to cut into --rotate files (the issue-26 comparison)")
    ap.add_argument("--rotate", type=int, default=8)
    ap.add_argument("--job-only", metavar="MASTER", help=argparse.SUPPRESS)  # (one master's run, in a fresh process)
    ap.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.job_only:
        return job_only(a.job_only, a.files, a.work)
    if a.archive:
        return archive_comparison(a)
    only = set(a.only.split(","))
    if only - set(RUNS):
        ap.error(f"--only: unknown runs {sorted(only - set(RUNS))}")

    from benchmark import build_capture

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.pipelines.runs.local import read_analysis
    from amqp_dissect.pipelines.spark import parse_size, run_archive, spark_session
    from amqp_dissect.pipelines.archive.split import split_capture

    os.makedirs(a.work, exist_ok=True)
    cap = os.path.join(a.work, "capture.pcap")
    rot = os.path.join(a.work, "rotated")
    base = os.path.join(a.work, "base.pcap")
    stamp = os.path.join(a.work, "built.json")
    built = {"connections": a.connections, "messages": a.messages, "copies": a.copies, "parts": a.parts}
    t_build = 0.0
    if a.reuse and os.path.exists(stamp) and json.load(open(stamp)).get("options") == built:
        st = json.load(open(stamp))
        records, parts, per = st["records"], st["files"], st["per"]
    else:
        t_build, _ = timed(lambda: build_capture(base, a.connections, a.messages))
        repeat(base, cap, a.copies)
        os.remove(base)
        with open(cap, "rb") as f:
            records = sum(1 for _ in open_capture(f))
        shutil.rmtree(rot, ignore_errors=True)
        per = -(-records // a.parts)
        parts = split_capture(cap, rot, packets=per)
        with open(stamp, "w") as f:
            json.dump({"options": built, "records": records, "files": list(parts), "per": per}, f)
    info = {"bytes": os.path.getsize(cap)}
    print(f"capture: {records} records, {info['bytes'] / 1e6:.1f} MB ({t_build:.0f} s to build); "
          f"rotated: {len(parts)} files of {per} records", flush=True)

    runs: dict = {}  # name -> list of {"seconds", "timings", ...}

    def row(name, secs, extra=None):
        runs.setdefault(name, []).append({"seconds": round(secs, 2), **(extra or {})})
        print(f"  {name:<44} {secs:8.2f} s {records / secs:12,.0f} records/s  {extra or ''}", flush=True)

    # the single process runs always: every Spark run is checked against its deliveries count
    secs, an = timed(lambda: read_analysis(cap))
    deliveries = len(an.deliveries)
    del an
    if "single" in only:
        row("single process (amqp_dissect.pipelines.runs.local.read_analysis)", secs, {"deliveries": deliveries})

    split_size = parse_size(a.split_size)
    sessions: dict = {}
    masters = [m for m in ("local[1]", "local[2]")
               if "rotated" in only or (m == "local[2]" and only & {"whole", "ranges"})]
    for rnd in range(a.repeat):
        for master in masters:
            evdir = os.path.join(a.work, f"events-{rnd}-{master[6]}")
            shutil.rmtree(evdir, ignore_errors=True)
            os.makedirs(evdir)
            conf = [("spark.sql.shuffle.partitions", "8"), ("spark.eventLog.enabled", "true"),
                    ("spark.eventLog.dir", "file://" + evdir), ("spark.eventLog.compress", "false")]
            jvm = {} if a.jvm_options is None else {"jvm_options": a.jvm_options}
            t_start, spark = timed(lambda: spark_session(master=master, conf=conf, **jvm))
            sessions.setdefault(master, []).append(round(t_start, 2))
            run_archive(spark, [os.path.join(ROOT, "samples")], os.path.join(a.work, "warmup"))  # JIT, workers
            cases = []
            if "rotated" in only:
                cases.append((f"spark {master}, rotated archive ({len(parts)} files)", [rot], 0))
            if master == "local[2]":
                if "whole" in only:
                    cases.append(("spark local[2], one file read whole", [cap], 0))
                if "ranges" in only:
                    cases.append((f"spark local[2], one file in {a.split_size} ranges", [cap], split_size))
            done = []
            for name, paths, split in cases:
                out = os.path.join(a.work, "out")
                c0, e0 = spark_cpu(spark), time.time()
                secs, res = timed(lambda: run_archive(spark, paths, out, split_size=split, partitions=8))
                cpu, e1 = spark_cpu(spark) - c0, time.time()
                assert res["counts"]["deliveries"] == deliveries, (res["counts"], deliveries)
                done.append((name, secs, cpu, e0, e1, {"ranges": res["stats"]["ranges"],
                                                       "timings": res["stats"]["timings"]}))
            spark.stop()  # flushes the event log
            for name, secs, cpu, e0, e1, extra in done:
                extra["cpu_s"] = round(cpu, 2)
                if master == "local[1]":
                    extra["two_slot_s"] = round(two_slot_estimate(secs, cpu, event_stages(evdir, e0, e1)), 2)
                row(name, secs, extra)
            shutil.rmtree(evdir, ignore_errors=True)

    summary = []
    print(f"\nmedians over {a.repeat} round(s):", flush=True)
    for name, rs in runs.items():
        secs = median([r["seconds"] for r in rs])
        st = {}
        for k in rs[0].get("timings", {}):
            st[k] = round(median([r["timings"][k] for r in rs]), 2)
        more = {k: round(median([r[k] for r in rs]), 2) for k in ("cpu_s", "two_slot_s") if k in rs[0]}
        summary.append({"run": name, "seconds": round(secs, 2), "records_per_s": round(records / secs),
                        "all_seconds": [r["seconds"] for r in rs], "timings": st, **more})
        print(f"  {name:<44} {secs:8.2f} s {records / secs:12,.0f} records/s  {more} {st or ''}", flush=True)
    r1 = runs.get(f"spark local[1], rotated archive ({len(parts)} files)")
    r2 = runs.get(f"spark local[2], rotated archive ({len(parts)} files)")
    scaling = None
    if r1 and r2:
        ratios = [x["seconds"] / y["seconds"] for x, y in zip(r1, r2)]
        scaling = {"ratios": [round(x, 3) for x in ratios], "median_ratio": round(median(ratios), 3),
                   "ratio_of_medians": round(median([x["seconds"] for x in r1]) / median([y["seconds"] for y in r2]), 3),
                   "stages": {k: round(median([x["timings"][k] for x in r1]) / max(1e-9, median([y["timings"][k] for y in r2])), 2)
                              for k in r1[0]["timings"]}}
        sims = [x["seconds"] / x["two_slot_s"] for x in r1]
        scaling.update(two_slot_ratios=[round(x, 3) for x in sims], two_slot_median_ratio=round(median(sims), 3),
                       cpu_s={"local[1]": median([x["cpu_s"] for x in r1]), "local[2]": median([y["cpu_s"] for y in r2])})
        print(f"  local[1] / local[2] per round: {scaling['ratios']}; median {scaling['median_ratio']}x, "
              f"ratio of medians {scaling['ratio_of_medians']}x; per stage {scaling['stages']}", flush=True)
        print(f"  local[1] / its 2-slot estimate per round: {scaling['two_slot_ratios']}; median "
              f"{scaling['two_slot_median_ratio']}x; CPU seconds (medians) {scaling['cpu_s']}", flush=True)
    print(json.dumps({"records": records, "bytes": info["bytes"], "files": len(parts), "deliveries": deliveries,
                      "session_start_s": sessions, "runs": summary, "scaling": scaling}))
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
