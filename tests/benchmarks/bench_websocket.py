"""Benchmark: AMQP over WebSocket against the same AMQP over plain TCP (not a test).

    python tests/benchmarks/bench_websocket.py [--copies N] [--sample NAME]

Builds two captures in memory from the TCP streams of a sample (default large_message),
repeated on N connections: the plain streams, and the same chunks as WebSocket binary
messages (handshake, masked client frames, made by the ``websockets`` package's sans-IO
protocol objects).  Prints the Dissector's time and throughput for both (best of 3), the
ratio, and the WebSocket layer alone on the wrapped client and server bytes.  Set
AMQP_DISSECT_PURE_PYTHON=1 to measure the pure-Python core.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))


import amqp_dissect  # noqa: E402
from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.capture.websocket import WebSocketLayer  # noqa: E402
from amqp_dissect.dissect import Dissector  # noqa: E402
from pcapbuild import TcpConversation, write_pcap  # noqa: E402
from wsreplay import tcp_streams, wrap  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def capture(exchanges) -> bytes:
    records = []
    for i, ex in enumerate(exchanges):
        conv = TcpConversation.from_exchange(ex, client=("10.0.0.1", 20000 + i), server=("10.0.0.2", 8080),
                                             t0=1_700_000_000.0 + i, dt=0.00001, mss=65000)
        records += conv.records
    return write_pcap(records)


def run(data: bytes, ports=()) -> tuple[float, int]:
    best = None
    frames = 0
    for _ in range(3):
        t = time.perf_counter()
        d = Dissector(extra_ports=ports)
        n = 0
        for r in open_capture(io.BytesIO(data)):
            n += len(d.feed(r))
        n += len(d.finish())
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
        frames = n
    return best, frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--sample", default="large_message")
    a = ap.parse_args()
    (version, steps), *_ = tcp_streams(os.path.join(ROOT, "samples", a.sample + ".pcap"))
    wrapped = wrap(steps)
    plain = capture([steps] * a.copies)
    ws = capture([wrapped] * a.copies)
    print(f"mode: {'pure' if amqp_dissect.pure_python_forced() else 'compiled'}; {a.copies} connections of {a.sample}")
    tp, np_ = run(plain, ports=(8080,))
    tw, nw = run(ws)
    mb = sum(len(c) for _, c in steps) * a.copies / 1e6
    print(f"plain     {len(plain) / 1e6:7.1f} MB capture  {tp:6.3f} s  {mb / tp:6.1f} MB/s of AMQP  {np_} events")
    print(f"websocket {len(ws) / 1e6:7.1f} MB capture  {tw:6.3f} s  {mb / tw:6.1f} MB/s of AMQP  {nw} events")
    print(f"websocket / plain time: {tw / tp:.2f}")
    # the layer alone
    c2s = b"".join(c for d, c in wrapped if d == 0)
    s2c = b"".join(c for d, c in wrapped if d == 1)
    t = time.perf_counter()
    for i in range(a.copies):
        layer = WebSocketLayer("x")
        for k in range(0, len(c2s), 65000):
            layer.feed(0, c2s[k : k + 65000], 0.0, 1)
        for k in range(0, len(s2c), 65000):
            layer.feed(1, s2c[k : k + 65000], 0.0, 1)
        layer.finish(0.0, 1)
    dt = time.perf_counter() - t
    print(f"WebSocketLayer alone: {(len(c2s) + len(s2c)) * a.copies / 1e6 / dt:.1f} MB/s of frames")


if __name__ == "__main__":
    main()
