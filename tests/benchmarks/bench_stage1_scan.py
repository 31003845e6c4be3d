"""Archive stage 1's work outside Spark (a script, not a test): each range's ``stages._write_seg``
(the rows, their Arrow batches, the sort by flow, the Parquet file) with this tree's ``stages.py``
and with another one loaded beside it (``--before``: the base commit's, ``git show
COMMIT:pipelines/spark/stages.py > OLD``), alternated, the order swapped each round, process CPU
seconds per pass (``pa.set_cpu_count(1)``, as in the tasks); the two passes' files must be the same
bytes.  ``--one MODE``: one range for callgrind (the first ``--split`` bytes of the first file):
``none`` (imports and the plan only), ``new`` / ``old`` (the range once), ``new2`` / ``old2`` (twice:
the second pass is the range's cost without first-use imports)::

    python tests/benchmarks/bench_stage1_scan.py "ROT/trace.pcap*" --before OLD --rounds 4
    env -u PYTHONDONTWRITEBYTECODE PYTHONHASHSEED=0 valgrind --tool=callgrind \\
        python tests/benchmarks/bench_stage1_scan.py "ROT/trace.pcap*" --before OLD --one new2
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import importlib.util
import os
import shutil
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", help="a glob of the capture files")
    ap.add_argument("--before", help="another stages.py (the base commit's)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--one", choices=("none", "new", "old", "new2", "old2"))
    ap.add_argument("--split", type=int, default=8 << 20, help="--one: the range's size (bytes)")
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet  # noqa: F401

    from amqp_dissect.pipelines import archive as ar
    from amqp_dissect.pipelines.spark import stages

    pa.set_cpu_count(1)
    old = None
    if args.before:
        spec = importlib.util.spec_from_file_location("stages_before", args.before)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    schema = pa.schema([("rid", pa.int32()), ("idx", pa.int64()), ("ts", pa.int64()), ("linktype", pa.int32()),
                        ("data", pa.binary()), ("orig_len", pa.int64()), ("flow", pa.string()),
                        ("kind", pa.int8()), ("pos", pa.int64()), ("caplen", pa.int32()), ("meta", pa.string()),
                        ("file", pa.int32())])
    files = sorted(glob.glob(args.files))
    work = tempfile.mkdtemp(prefix="bench-stage1-")
    try:
        if args.one:
            rng = ar.plan_ranges(files[:1], args.split)[0]
            if args.one != "none":
                fn = (old if args.one.startswith("old") else stages)._write_seg
                for _ in range(2 if args.one.endswith("2") else 1):
                    fn(work, rng, schema)
            return 0
        ranges = ar.plan_ranges(files)
        runs = [("this tree", stages._write_seg)] + ([("before", old._write_seg)] if old else [])
        for rnd in range(args.rounds):
            for name, fn in (runs if rnd % 2 else runs[::-1]):
                d = os.path.join(work, name.replace(" ", "_"))
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
                t = time.process_time()
                for r in ranges:
                    fn(d, r, schema)
                print(f"round {rnd} {name}: {time.process_time() - t:.2f} CPU s ({len(ranges)} ranges; "
                      f"load {os.getloadavg()[0]:.1f})", flush=True)
        if old:
            a, b = (os.path.join(work, n.replace(" ", "_")) for n, _ in runs)
            same = not filecmp.dircmp(a, b).diff_files and sorted(os.listdir(a)) == sorted(os.listdir(b))
            print("the stage-1 files:", "the same bytes" if same else "DIFFERENT")
            return 0 if same else 1
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
