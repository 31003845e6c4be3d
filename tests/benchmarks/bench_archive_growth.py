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

    python tests/benchmarks/bench_archive_growth.py --archive /tmp/amqp-bench/c2-m75000.pcap --rotate 8
    python tests/benchmarks/bench_archive_growth.py --archive /tmp/amqp-bench/c2-m75000.pcap --rotate 8 --copies 4
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


STAGES = re.compile(r"^time per stage: (.*)$", re.M)


def archive(files: list, out: str, env: dict | None = None) -> tuple[float, int, dict]:
    """One ``archive`` command: (wall seconds, its exit status, its seconds per stage)."""
    t = time.perf_counter()
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", "local[2]", *files,
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
    return took, got.returncode, stages


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
    got["load (1 min) at the round's end"] = os.getloadavg()[0]
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
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one, removed; the "
                                                   "repeated capture is kept in a given one)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="archive-growth-")
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
        names = list(rounds[0]["stages"][run])
        print(f"    {run}: " + ", ".join(
            f"{n} {statistics.median([r['stages'][run].get(n, 0.0) for r in rounds]):.2f}" for n in names))
    print(f"  increment / fresh: {med['increment'] / med['fresh']:.2f}x" + (
        f"; resumed / fresh: {med['resumed'] / med['fresh']:.2f}x" if "resumed" in med else ""))


if __name__ == "__main__":
    main()
