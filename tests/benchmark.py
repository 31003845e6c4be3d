#!/usr/bin/env python3
"""Throughput benchmark: amqp-dissect vs tshark on the same capture, in the same run.

    python tests/benchmark.py [--connections 20] [--messages 2000] [--repeat 3] [--out /tmp/amqp-bench.pcap]

Builds a capture of real proton-encoded AMQP 1.0 traffic (``tests/protonpump.py``
engines carried over TCP by ``tests/pcapbuild.py``; transfers, flows and
dispositions dominate, as in real captures), then times:

* capture reading only (records/s),
* reading + link/IP/TCP fast path,
* the full sans-IO pipeline (reassembly + AMQP framing + performative decoding),
* the CLI writing JSON lines (every frame and message decoded) to /dev/null,
* ``tshark -r`` with the AMQP dissector writing one field per frame to /dev/null,
* ``tshark -r`` with no dissection output (read + dissect, quiet).

Prints a table and one JSON line with the numbers.  This is a benchmark, not a
test: the machine is shared and noisy, so compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.dissect import Dissector  # noqa: E402
from amqp_dissect.capture.netparse import parse_segment  # noqa: E402


def build_capture(path: str, connections: int, messages: int) -> dict:
    from proton import Message

    from pcapbuild import TcpConversation, write_pcap
    from protonpump import Pump

    records = []
    for c in range(connections):
        p = Pump(server_credit=100, server_max_frame=16384)
        snd = p.sender(f"queue-{c}")
        p.run()
        for i in range(messages):
            p.send(snd, Message(body=f"payload {i:08d} " + "x" * 60, properties={"seq": i}))
            if i % 10 == 9:
                p.run()
        p.run()
        p.close()
        conv = TcpConversation.from_exchange(
            p.chunks,
            client=("10.0.0.1", 40000 + c),
            server=("10.0.0.2", 5672),
            t0=1_700_000_000.0 + c * 0.0003,
            dt=0.0001,
            acks=True,
        )
        records.extend(conv.records)
    records.sort(key=lambda r: r[0])
    with open(path, "wb") as f:
        f.write(write_pcap(records))
    return {"packets": len(records), "bytes": os.path.getsize(path)}


def best_of(n: int, fn):
    best = None
    result = None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, result


def read_only(path):
    with open(path, "rb") as f:
        return sum(1 for _ in open_capture(f))


def read_parse(path):
    n = 0
    with open(path, "rb") as f:
        for r in open_capture(f):
            if parse_segment(r.linktype, r.data) is not None:
                n += 1
    return n


def full_pipeline(path):
    d = Dissector()
    frames = 0
    with open(path, "rb") as f:
        for r in open_capture(f):
            for ev in d.feed(r):
                if getattr(ev, "performative", None) is not None:
                    frames += 1
    d.finish()
    return frames


def run_cmd(cmd):
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="/tmp/amqp-bench.pcap")
    ap.add_argument("--reuse", action="store_true", help="reuse an existing --out capture")
    args = ap.parse_args()

    if not (args.reuse and os.path.exists(args.out)):
        t = time.perf_counter()
        info = build_capture(args.out, args.connections, args.messages)
        print(f"built {args.out}: {info['packets']} packets, {info['bytes'] / 1e6:.1f} MB "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    packets = read_only(args.out)
    rows = {}
    rows["read"] = best_of(args.repeat, lambda: read_only(args.out))
    rows["read+parse"] = best_of(args.repeat, lambda: read_parse(args.out))
    rows["pipeline"] = best_of(args.repeat, lambda: full_pipeline(args.out))
    frames = rows["pipeline"][1]
    cli = [sys.executable, "-m", "amqp_dissect.cli", "frames", args.out, "--format", "jsonl"]
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        rows["cli jsonl"] = best_of(args.repeat, lambda: run_cmd(cli))
        rows["cli text"] = best_of(args.repeat, lambda: run_cmd(cli[:-2]))
    finally:
        os.chdir(old)
    tshark = shutil.which("tshark")
    if tshark:
        rows["tshark fields"] = best_of(
            args.repeat, lambda: run_cmd([tshark, "-r", args.out, "-Y", "amqp", "-T", "fields", "-e", "amqp.performative"])
        )
        rows["tshark summary"] = best_of(args.repeat, lambda: run_cmd([tshark, "-r", args.out]))
        rows["tshark -T json"] = best_of(args.repeat, lambda: run_cmd([tshark, "-r", args.out, "-Y", "amqp", "-T", "json"]))
    out = {"packets": packets, "amqp_frames": frames, "file_mb": round(os.path.getsize(args.out) / 1e6, 2)}
    print(f"{'stage':<16} {'seconds':>8} {'packets/s':>11} {'frames/s':>10}")
    for name, (secs, _) in rows.items():
        print(f"{name:<16} {secs:>8.3f} {packets / secs:>11,.0f} {frames / secs:>10,.0f}")
        out[name.replace(" ", "_").replace("+", "_") + "_s"] = round(secs, 3)
    if tshark:
        for ours in ("pipeline", "cli jsonl", "cli text"):
            for theirs in ("tshark fields", "tshark summary", "tshark -T json"):
                ratio = rows[theirs][0] / rows[ours][0]
                print(f"speed of {ours} relative to {theirs}: {ratio:.2f}x")
                out[f"ratio_{ours}_vs_{theirs}".replace(" ", "_").replace("-", "")] = round(ratio, 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
