#!/usr/bin/env python3
"""Benchmark of the performative scanner (a script, not a test).

    python tests/benchmarks/bench_scan.py [--number 20000] [--repeat 5]

Takes the first transfer, flow and disposition body (and a transfer carrying a
delivery state, when there is one) of the sample captures and times, per call:

* ``codec.Reader(body, 0, len(body)).value()`` -- the generic decoder,
* ``scan.scan_performative(body, 0, len(body))`` -- the scanner,

with timeit (best of ``--repeat``, CPU time of the process, which a busy
machine disturbs less than wall-clock time).  Whichever ``amqp_dissect.amqp.scan`` is importable
is timed: the pure-Python module, or a compiled one if it shadows it.  Prints a
table and one JSON line.  The machine is shared and noisy: compare ratios
measured in one run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, ROOT]

from amqp_dissect.amqp import framing as amqp, codec, scan  # noqa: E402
from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.dissect import Dissector  # noqa: E402


def sample_bodies() -> dict:
    """name -> raw body bytes of a typical frame of that performative, from samples/*.pcap."""
    bodies: list = []
    original = amqp.Reader

    class Recording(original):
        __slots__ = ()

        def __init__(self, buf, pos=0, end=None, **kw):
            super().__init__(buf, pos, end, **kw)
            bodies.append(bytes(buf[pos:end]))

    found: dict = {}
    amqp.Reader = Recording
    try:
        for path in sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap"))):
            bodies.clear()
            d = Dissector()
            events = []
            with open(path, "rb") as f:
                for rec in open_capture(f):
                    events.extend(d.feed(rec))
            events.extend(d.finish())
            frames = [e for e in events if isinstance(e, amqp.Frame) and e.size > e.doff * 4]
            for fr, body in zip(frames, bodies):
                name = fr.name
                if name not in ("transfer", "flow", "disposition"):
                    continue
                perf_end = scan.scan_performative(body, 0, len(body))[2]
                key = name
                if name == "transfer" and fr.performative.field("state") not in (None, codec.ABSENT):
                    key = "transfer+state"
                if name == "disposition" and fr.performative.field("state") not in (None, codec.ABSENT):
                    state = fr.performative.field("state")
                    key = f"disposition {state.spec.name}"
                found.setdefault(key, (path, body, perf_end))
    finally:
        amqp.Reader = original
    return found


def best_us(fn, number: int, repeat: int) -> float:
    """Microseconds of CPU time per call, best of ``repeat`` runs of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    Reader = codec.Reader
    scan_performative = scan.scan_performative
    rows = []
    for key, (path, body, perf_end) in sorted(sample_bodies().items()):
        n = len(body)

        def generic(body=body, n=n):
            return Reader(body, 0, n).value()

        def scanned(body=body, n=n):
            return scan_performative(body, 0, n)

        tg = best_us(generic, args.number, args.repeat)
        ts = best_us(scanned, args.number, args.repeat)
        rows.append({"frame": key, "sample": os.path.basename(path), "body_bytes": n,
                     "performative_bytes": perf_end, "generic_us": round(tg, 3), "scan_us": round(ts, 3),
                     "speedup": round(tg / ts, 2)})  # fmt: skip
    print(f"scanner: {scan.__file__}")
    print(f"{'frame':28} {'bytes':>6} {'generic us':>11} {'scan us':>8} {'x':>6}")
    for r in rows:
        print(f"{r['frame']:28} {r['performative_bytes']:>6} {r['generic_us']:>11.2f} {r['scan_us']:>8.2f} "
              f"{r['speedup']:>6.1f}")  # fmt: skip
    print(json.dumps({"scanner": os.path.basename(scan.__file__), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
