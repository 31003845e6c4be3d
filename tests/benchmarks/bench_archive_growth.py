"""Benchmark of an archive directory that grows (issue 43; a script, not a test).

A capture is cut into ``--rotate`` files (``editcap -c``: connections run on across the cuts),
then ``amqp-dissect archive --master local[2]`` runs, each a process of its own, timed as a whole
(wall seconds, the JVM's start included):

* ``fresh``: every file into an empty directory;
* ``first half``: the first half of the files into a second directory;
* ``increment``: the whole set into that directory (the second half decoded, from the first
  half's checkpoint);
* ``killed``: into a third directory grown by its first half, the whole set run and killed
  (SIGKILL, the job's test hook) at ``--kill-at``; then ``resumed``: the same run again.

Prints the times (medians of ``--repeat`` rounds), each command's time per stage (its own
``time per stage`` line: ``start`` the plan and the JVM's and Spark's start, ``plan`` and
``checkpoint`` the run's own plan and its checkpoint's load, then the job's steps; ``rest`` the rest
of the command's wall time: the interpreter's start and imports, the end), the checkpoint's bytes after each run, the increment's
and the resumed run's ratio to the fresh run, and checks that the three directories hold the same
rows (pyarrow datasets, rows as sets).  Before the first round it makes sure every command maps
the driver JVM's class archive (:func:`class_archive_ready`).

``--no-kill``: the fresh run, the first half and the increment only.  ``--copies N`` makes the set N times larger to show how the ratio goes with the archive's size:
the capture repeated N times one after the other (copy k's times shifted past copy k-1's end, its
client ports moved by 100 k: new connections, as a broker's clients reconnect), cut into
``--rotate`` x N files; the increment is again the second half.

``--curve 1,2,4,8``: the curve over archive sizes, each size (copies) as ``--copies`` would run it
(``--no-kill`` implied; ``--repeat`` rounds per size, the sizes alternated round by round so that
each sees about the same load), then a line per size (the fresh run, the increment, their ratio,
the JVM's and Spark's ``start`` of each) and a straight line fitted to each run's wall time over the
sizes (seconds = fixed + per copy x copies, least squares): the fixed cost below which the ratio
does not fall, and from which size the fits put the ratio at or under 0.65 and 0.60.

    python tests/benchmarks/bench_archive_growth.py --archive /tmp/amqp-bench/c2-m75000.pcap --rotate 8
    python tests/benchmarks/bench_archive_growth.py --archive /tmp/amqp-bench/c2-m75000.pcap --rotate 8 --copies 4
    python tests/benchmarks/bench_archive_growth.py --archive /tmp/amqp-bench/c2-m75000.pcap --rotate 8 --curve 1,2,4,8
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILL_AT = "AMQP_DISSECT_ARCHIVE_KILL_AT"


def cut(capture: str, parts: int, into: str) -> list:
    """``capture`` cut into ``parts`` files of about as many packets each (editcap -c), in time order."""
    out = subprocess.run(["capinfos", "-c", "-M", capture], capture_output=True, text=True, check=True).stdout
    packets = int(out.strip().splitlines()[-1].split()[-1])
    os.makedirs(into, exist_ok=True)
    subprocess.run(["editcap", "-c", str(-(-packets // parts)), capture, os.path.join(into, "part.pcap")],
                   check=True, capture_output=True)
    return sorted(glob.glob(os.path.join(into, "part_*.pcap")))


def copies(capture: str, n: int, into: str) -> str:
    """``capture`` repeated ``n`` times in one file under ``into`` (made once, then reused): copy k
    shifted in time past copy k-1's end (plus a second), its client ports (all but the AMQP ones)
    moved by 100 k (tests/support/pcapbuild.retarget_tcp: fresh checksums)."""
    if n == 1:
        return capture
    out = os.path.join(into, f"{os.path.basename(capture)}.x{n}.pcap")
    if os.path.exists(out):
        return out
    sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
    from pcapbuild import PcapWriter, read_pcap_records, retarget_tcp

    with open(capture, "rb") as f:
        recs = list(read_pcap_records(f))
    units = 10**6 if all(frac < 10**6 for (_, frac), _, _ in recs) else 10**9
    first, last = (recs[0][0][0] * units + recs[0][0][1]), (recs[-1][0][0] * units + recs[-1][0][1])
    shift = last - first + units
    os.makedirs(into, exist_ok=True)
    with open(out + ".tmp", "wb") as f:
        w = PcapWriter(f, recs[0][1], nano=units == 10**9)
        for k in range(n):
            ports = {p: p + 100 * k for p in range(1024, 65536 - 100 * n) if p not in (5671, 5672)} if k else {}
            for (sec, frac), lt, data in recs:
                t = sec * units + frac + k * shift
                w.write((t // units, t % units), retarget_tcp(data, lt, ports) if k else data)
    os.replace(out + ".tmp", out)
    return out


LOAD_AT_END = "load (1 min) at the round's end"
STAGES = re.compile(r"^time per stage: (.*)$", re.M)


TIMELINE: list = []  # [folder]: --timeline, each command's Spark event log goes under it


def archive(files: list, out: str, env: dict | None = None) -> tuple[float, int, dict]:
    """One ``archive`` command: (wall seconds, its exit status, its seconds per stage)."""
    conf = []
    if TIMELINE:
        log = os.path.join(TIMELINE[0], "current")
        shutil.rmtree(log, ignore_errors=True)
        os.makedirs(log)
        conf = ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{log}"]
    t = time.perf_counter()
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", "local[2]", *conf, *files,
                          "--out", out], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    took = time.perf_counter() - t
    if got.returncode not in (0, -9):
        sys.exit(f"archive failed ({got.returncode}): {got.stderr[-2000:]}")
    stages: dict = {}
    m = STAGES.search(got.stdout)
    if m:
        for part in m.group(1).split(", "):
            name, secs = part.rsplit(" in ", 1)
            stages[name] = float(secs.rstrip(" s"))
        stages["rest"] = round(took - sum(stages.values()), 2)
    if TIMELINE and got.returncode == 0:
        stages["timeline"] = spark_timeline(os.path.join(TIMELINE[0], "current"))
    return took, got.returncode, stages


def _event_lines(folder: str):
    """The JSON events of the Spark event log(s) under ``folder`` (zstd-compressed, Spark's default
    codec, read by the ``zstd`` command)."""
    for d, _, names in os.walk(folder):
        for name in sorted(names):
            if not name.startswith("events_") and not name.startswith("local-"):
                continue
            path = os.path.join(d, name)
            if name.endswith(".zstd"):
                text = subprocess.run(["zstd", "-dc", path], capture_output=True, text=True, check=True).stdout
            else:
                with open(path) as f:
                    text = f.read()
            for line in text.splitlines():
                if line.strip():
                    yield json.loads(line)


def spark_timeline(folder: str) -> list:
    """Each Spark job of a command, from its event log (``--timeline``): (its start after the
    SparkContext's, its wall seconds, its tasks, the seconds from its submission to its first task's
    launch, the mean run seconds of the tasks each Python worker ran first and of the others, the
    seconds from its last task's end to the job's end)."""
    t0, jobs, tasks = None, {}, {}
    for e in _event_lines(folder):
        kind = e["Event"]
        if kind == "SparkListenerApplicationStart":
            t0 = e["Timestamp"]
        elif kind == "SparkListenerJobStart":
            jobs[e["Job ID"]] = {"start": e["Submission Time"], "stages": e["Stage IDs"]}
        elif kind == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            ti = e["Task Info"]
            tasks.setdefault(e["Stage ID"], []).append((ti["Launch Time"], ti["Finish Time"],
                                                       (e.get("Task Metrics") or {}).get("Executor Run Time", 0)))
    out = []
    slots = 2  # (local[2]: the first wave is the first task of each of the two task slots)
    for j in sorted(jobs):
        job = jobs[j]
        ts = sorted(t for st in job["stages"] for t in tasks.get(st, ()))
        if not ts or "end" not in job:
            continue
        first, later = ts[:slots], ts[slots:]
        out.append({"job": j, "at": (job["start"] - (t0 or job["start"])) / 1000,
                    "seconds": (job["end"] - job["start"]) / 1000, "tasks": len(ts),
                    "to first task": (ts[0][0] - job["start"]) / 1000,
                    "first wave run": sum(r for _, _, r in first) / len(first) / 1000,
                    "later run": (sum(r for _, _, r in later) / len(later) / 1000) if later else None,
                    "after last task": (job["end"] - max(f for _, f, _ in ts)) / 1000})
    return out


def checkpoint_bytes(out: str) -> int:
    """The checkpoint's bytes of the published run of ``out`` (its manifest's figure)."""
    with open(os.path.join(out, "_archive", "current", "manifest.json")) as f:
        runs = json.load(f)["runs"]
    return int(runs[-1].get("checkpoint_bytes") or 0)


def same_rows(a: str, b: str) -> bool:
    """Whether the archives ``a`` and ``b`` hold the same rows in every table, as multisets (each
    row's 64-bit hash of its cells' text, sorted: a large archive's rows are not held as tuples)."""
    import numpy as np
    import pandas as pd
    import pyarrow.dataset as ds

    from amqp_dissect.results.schema import TABLES

    for t in TABLES:
        ha, hb = (np.sort(pd.util.hash_pandas_object(ds.dataset(os.path.join(d, t), partitioning="hive").to_table()
                                                     .to_pandas().astype(str), index=False).to_numpy())
                  for d in (a, b))
        if not np.array_equal(ha, hb):
            return False
    return True


def class_archive_ready(files: list, work: str, settle: float = 180.0) -> str:
    """Make sure every timed command maps the driver JVM's class archive (``class_archive_options``
    in pipelines/spark_runtime/session.py): without one, the first command's JVM writes it as it
    exits (seconds, counted in that command's time) and the commands of the next minute, until the
    file has settled, start without any; both in the first round only, so that its ratio was not
    the next rounds' (a first round of 0.43x and a second of 0.62x at 4x).  When there is none, one
    untimed command over the first file writes it, then this waits until a session would map it.
    Returns what it found, for the report."""
    from amqp_dissect.pipelines.spark_runtime import session as S

    S._launcher_environment()  # (SPARK_HOME, as a command finds it)

    def mapped() -> bool:
        return any(o.startswith("-XX:SharedArchiveFile=") for o in S.class_archive_options())

    if os.environ.get(S.CDS_ENV, "1") == "0":
        return "class archive: off (AMQP_DISSECT_SPARK_CDS=0)"
    if mapped():
        return "class archive: mapped by every command"
    t = time.perf_counter()
    archive(files[:1], os.path.join(work, "class-archive-warm-up"))
    shutil.rmtree(os.path.join(work, "class-archive-warm-up"), ignore_errors=True)
    while not mapped() and time.perf_counter() - t < settle:
        time.sleep(5)
    return (f"class archive: written by an untimed command first, then mapped by every command "
            f"({time.perf_counter() - t:.0f} s)" if mapped() else "class archive: NOT mapped (none settled in time)")


def one_round(files: list, work: str, kill_at: str, check: bool = True, kill: bool = True) -> dict:
    half = files[:len(files) // 2]
    dirs = {k: os.path.join(work, k) for k in ("fresh", "grown", "killed")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
    got, stages = {}, {}
    got["fresh"], _, stages["fresh"] = archive(files, dirs["fresh"])
    got["first half"], _, stages["first half"] = archive(half, dirs["grown"])
    got["checkpoint after the first half"] = checkpoint_bytes(dirs["grown"])
    got["increment"], _, stages["increment"] = archive(files, dirs["grown"])
    got["checkpoint after the whole set"] = checkpoint_bytes(dirs["grown"])
    got["increment / fresh"] = got["increment"] / got["fresh"]
    got[LOAD_AT_END] = os.getloadavg()[0]
    if not kill:
        if check:
            got["same rows"] = same_rows(dirs["fresh"], dirs["grown"])
        got["stages"] = stages
        return got
    archive(half, dirs["killed"])
    got["killed"], status, _ = archive(files, dirs["killed"], {KILL_AT: kill_at})
    if status != -9:
        sys.exit(f"the run was not killed at {kill_at!r}")
    got["resumed"], _, stages["resumed"] = archive(files, dirs["killed"])
    if check:
        got["same rows"] = same_rows(dirs["fresh"], dirs["grown"]) and same_rows(dirs["fresh"], dirs["killed"])
    got["stages"] = stages
    return got


def fit_line(xs: list, ys: list) -> tuple[float, float]:
    """(fixed, per unit) of the least-squares line ``y = fixed + per unit x`` through the points."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def size_for_ratio(fresh: tuple, increment: tuple, ratio: float) -> float | None:
    """The copies from which the fitted increment is at most ``ratio`` times the fitted fresh run
    (``fresh``, ``increment``: (fixed, per copy) of :func:`fit_line`), or None when never."""
    (ff, fw), (fi, iw) = fresh, increment
    if iw - ratio * fw >= 0:  # (the ratio only falls toward iw / fw, which is above ``ratio``)
        return 0.0 if fi <= ratio * ff else None
    return max(0.0, (fi - ratio * ff) / (ratio * fw - iw))


def curve(a, work: str) -> None:
    """``--curve``: the ratio of the increment to the fresh run over archive sizes (see above)."""
    sizes = [int(x) for x in a.curve.split(",") if x.strip()]
    load_before = os.getloadavg()
    sets = {}
    for n in sizes:
        capture = copies(a.archive, n, work)
        shutil.rmtree(os.path.join(work, f"set-x{n}"), ignore_errors=True)
        sets[n] = cut(capture, a.rotate * n, os.path.join(work, f"set-x{n}"))
    cds = class_archive_ready(sets[sizes[0]], work)
    rounds: dict = {n: [] for n in sizes}
    for _ in range(a.repeat):
        for n in sizes:
            rounds[n].append(one_round(sets[n], os.path.join(work, f"x{n}"), a.kill_at, not a.no_check, kill=False))
    print(f"{a.archive}: the curve over archive sizes, {a.rotate} files per copy; medians of {a.repeat} round(s) per "
          "size (sizes alternated), wall seconds of whole commands")
    print(f"  {cds}")
    print("  load average (1, 5, 15 min) before / after: " + " / ".join(
        ", ".join(f"{x:.1f}" for x in load) for load in (load_before, os.getloadavg())))
    med: dict = {}
    for n in sizes:
        rs = rounds[n]
        m = med[n] = {k: statistics.median([r[k] for r in rs]) for k in ("fresh", "increment")}
        start = {run: statistics.median([r["stages"][run].get("start", 0.0) for r in rs])
                 for run in ("fresh", "increment")}
        same = "" if a.no_check else f"; same rows: {all(r['same rows'] for r in rs)}"
        print(f"  {n}x ({len(sets[n])} files): fresh {m['fresh']:.2f} s, increment {m['increment']:.2f} s, "
              f"increment / fresh {m['increment'] / m['fresh']:.2f}x (rounds "
              + ", ".join(f"{r['increment / fresh']:.2f}" for r in rs)
              + f"); start {start['fresh']:.2f} / {start['increment']:.2f} s; load at the rounds' ends "
              + ", ".join(f"{r[LOAD_AT_END]:.1f}" for r in rs) + same)
    if len(sizes) < 2:
        return
    fresh = fit_line(sizes, [med[n]["fresh"] for n in sizes])
    inc = fit_line(sizes, [med[n]["increment"] for n in sizes])
    print(f"  fitted: fresh {fresh[0]:.2f} s + {fresh[1]:.2f} s per copy; increment {inc[0]:.2f} s + {inc[1]:.2f} s "
          f"per copy (the variable part {inc[1] / fresh[1]:.2f} of the fresh run's)" if fresh[1] else "")
    for goal in (0.65, 0.60):
        at = size_for_ratio(fresh, inc, goal)
        print(f"  increment / fresh <= {goal:.2f} from about " + (f"{at:.1f}x" if at is not None else
                                                                   "no size (the variable parts' ratio is above it)"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--archive", required=True, help="the capture to cut")
    ap.add_argument("--rotate", type=int, default=8, help="files to cut it into (default 8)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; medians reported")
    ap.add_argument("--kill-at", default="partitioned",
                    help="the step the killed run is killed after (analysed, staged, partitioned, summaries, "
                         "versioned, published; default partitioned)")
    ap.add_argument("--no-check", action="store_true", help="do not compare the three directories' rows")
    ap.add_argument("--no-kill", action="store_true", help="only the fresh run and the increment (no killed and "
                                                             "resumed run)")
    ap.add_argument("--copies", type=int, default=1,
                    help="the capture repeated this many times, new connections each (default 1; see above)")
    ap.add_argument("--timeline", action="store_true",
                    help="Spark's event log for each command, its jobs and their tasks' waves printed (see "
                         "spark_timeline)")
    ap.add_argument("--curve", default=None, metavar="N,N,...",
                    help="the ratio over archive sizes: these copies (e.g. 1,2,4,8), --no-kill implied (see above)")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one, removed; the "
                                                   "repeated capture is kept in a given one)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="archive-growth-")
    if a.timeline:
        TIMELINE.append(os.path.join(work, "event-logs"))
    if a.curve:
        try:
            curve(a, work)
        finally:
            if a.work is None:
                shutil.rmtree(work, ignore_errors=True)
        return
    load_before = os.getloadavg()
    try:
        capture = copies(a.archive, a.copies, work)
        shutil.rmtree(os.path.join(work, "set"), ignore_errors=True)
        files = cut(capture, a.rotate * a.copies, os.path.join(work, "set"))
        cds = class_archive_ready(files, work)
        rounds = [one_round(files, work, a.kill_at, not a.no_check, not a.no_kill) for _ in range(a.repeat)]
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{a.archive}{f' x {a.copies}' if a.copies > 1 else ''}: {len(files)} files; medians of {a.repeat} "
          "round(s), wall seconds of whole commands")
    print(f"  {cds}")
    print("  load average (1, 5, 15 min) before / after: " + " / ".join(
        ", ".join(f"{x:.1f}" for x in load) for load in (load_before, os.getloadavg())))
    for key in rounds[0]:
        if key == "stages":
            continue
        vals = [r[key] for r in rounds]
        if isinstance(vals[0], bool):
            print(f"  {key}: {all(vals)}")
        elif key.startswith(("increment /", "load")):
            print(f"  {key}, each round: " + ", ".join(f"{v:.2f}" for v in vals))
        elif key.startswith("checkpoint"):
            print(f"  {key}: {int(statistics.median(vals))} bytes")
        else:
            print(f"  {key}: {statistics.median(vals):.2f} s")
    med = {k: statistics.median([r[k] for r in rounds]) for k in ("fresh", "increment", "resumed") if k in rounds[0]}
    print("  seconds per stage (medians; rest: the command's wall time outside its stages):")
    for run in rounds[0]["stages"]:
        names = [n for n in rounds[0]["stages"][run] if n != "timeline"]
        print(f"    {run}: " + ", ".join(
            f"{n} {statistics.median([r['stages'][run].get(n, 0.0) for r in rounds]):.2f}" for n in names))
    print(f"  increment / fresh: {med['increment'] / med['fresh']:.2f}x" + (
        f"; resumed / fresh: {med['resumed'] / med['fresh']:.2f}x" if "resumed" in med else ""))
    if TIMELINE:
        print_timelines(rounds)


def print_timelines(rounds: list) -> None:
    """``--timeline``: each command's Spark jobs, round by round (see :func:`spark_timeline`)."""
    print("  Spark jobs (from each command's event log; seconds; first wave: the mean run time of the tasks "
          "each task slot ran first, later: of the others):")
    for i, r in enumerate(rounds, 1):
        for run, st in r["stages"].items():
            for j in st.get("timeline") or ():
                later = "-" if j["later run"] is None else f"{j['later run']:.3f}"
                print(f"    round {i} {run}: job {j['job']} at {j['at']:.2f}, {j['seconds']:.3f} s, "
                      f"{j['tasks']} tasks, first task after {j['to first task']:.3f}, run first wave {j['first wave run']:.3f} / later "
                      f"{later}, end after the last task {j['after last task']:.3f}")


if __name__ == "__main__":
    main()
