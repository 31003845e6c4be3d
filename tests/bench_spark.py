#!/usr/bin/env python3
"""Benchmark of the Spark archive job (a script, not a test).

    python tests/bench_spark.py [--connections 24] [--messages 3000] [--parts 16]
                                [--split-size 8m] [--work /tmp/amqp-bench-spark] [--keep]

Builds one capture of real proton-encoded AMQP traffic (tests/benchmark.py's
``build_capture``: interleaved connections, acks on) and a rotated copy of it
(``amqp_dissect.pipelines.split``, ``--parts`` files, connections spanning them), then times:

* the single-process path (``amqp_dissect.pipelines.local.analyze``) on the capture,
* the Spark job with local[1] and local[2] on the rotated archive (one stage-1
  task per file),
* the Spark job on the single capture read whole (one stage-1 task) and split
  into ``--split-size`` byte ranges, with local[2].

Times exclude the Spark session start (reported apart, cold) and follow one
warm-up run on the samples per session.  Prints a table and one JSON line.
The machine is shared and noisy: compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]


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
    a = ap.parse_args(argv)

    from benchmark import build_capture

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.pipelines.local import analyze
    from amqp_dissect.pipelines.spark import parse_size, run_archive, spark_session
    from amqp_dissect.pipelines.split import split_capture

    os.makedirs(a.work, exist_ok=True)
    cap = os.path.join(a.work, "capture.pcap")
    rot = os.path.join(a.work, "rotated")
    base = os.path.join(a.work, "base.pcap")
    t_build, _ = timed(lambda: build_capture(base, a.connections, a.messages))
    repeat(base, cap, a.copies)
    os.remove(base)
    info = {"bytes": os.path.getsize(cap)}
    with open(cap, "rb") as f:
        records = sum(1 for _ in open_capture(f))
    shutil.rmtree(rot, ignore_errors=True)
    per = -(-records // a.parts)
    parts = split_capture(cap, rot, packets=per)
    print(f"capture: {records} records, {info['bytes'] / 1e6:.1f} MB ({t_build:.0f} s to build); "
          f"rotated: {len(parts)} files of {per} records", flush=True)

    rows = []

    def row(name, secs, extra=None):
        rows.append({"run": name, "seconds": round(secs, 2), "records_per_s": round(records / secs),
                     **(extra or {})})
        print(f"  {name:<44} {secs:8.2f} s {records / secs:12,.0f} records/s  {extra or ''}", flush=True)

    secs, an = timed(lambda: analyze(cap))
    deliveries = len(an.deliveries)
    row("single process (amqp_dissect.pipelines.local.analyze)", secs, {"deliveries": deliveries})

    split_size = parse_size(a.split_size)
    sessions = {}
    for master in ("local[1]", "local[2]"):
        t_start, spark = timed(lambda: spark_session(master=master, conf=[("spark.sql.shuffle.partitions", "8")]))
        sessions[master] = round(t_start, 2)
        run_archive(spark, [os.path.join(ROOT, "samples")], os.path.join(a.work, "warmup"))  # JIT, workers
        cases = [(f"spark {master}, rotated archive ({len(parts)} files)", [rot], 0)]
        if master == "local[2]":
            cases += [("spark local[2], one file read whole", [cap], 0),
                      (f"spark local[2], one file in {a.split_size} ranges", [cap], split_size)]
        for name, paths, split in cases:
            out = os.path.join(a.work, "out")
            secs, res = timed(lambda: run_archive(spark, paths, out, split_size=split, partitions=8))
            assert res["counts"]["deliveries"] == deliveries, (res["counts"], deliveries)
            row(name, secs, {"ranges": res["stats"]["ranges"], "timings": res["stats"]["timings"]})
        spark.stop()
    print(json.dumps({"records": records, "bytes": info["bytes"], "files": len(parts),
                      "session_start_s": sessions, "runs": rows}))
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
