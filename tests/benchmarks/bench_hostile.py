#!/usr/bin/env python3
"""Hostile-scale captures (issue 8, goal 3): time, CPU and peak memory of our commands on them.

    python tests/benchmarks/bench_hostile.py                     # every capture, every command, default sizes
    python tests/benchmarks/bench_hostile.py --only zero-width --frames 2000
    python tests/benchmarks/bench_hostile.py --only syn --syns 200000 --only unsettled --deliveries 1000000

Captures (built here, cached in ``--dir`` with their parameters in the name):

``zero-width``
    One connection whose client sends ``--frames`` flow frames of about 180 bytes, each holding
    an array of arrays of 65,536 nulls (zero-width elements: about 1M decoded values per frame
    when nothing budgets them).  The issue's reproducer: 2,000 frames, 362 KB.
``syn``
    ``--syns`` connections that send only a SYN (distinct client addresses and ports).
``header`` (issue 40)
    ``--syns`` connections that send a SYN and then only the 8-byte AMQP protocol header.
``unsettled``
    One connection, one link, ``--deliveries`` transfers never settled (no disposition).
``unknown-handles`` / ``partial-handles`` (issue 29)
    One connection, one session, ``--handles`` transfers each on its own handle never attached
    (partial: each says more=true and the delivery never ends).
``unknown-channels``
    ``--channels`` transfers each on its own channel never begun.
``wide-dispositions``
    ``--wide`` unsettled transfers, then 19/18 as many receiver dispositions of delivery-ids
    0 .. 2**31-1 that do not settle.
``preopen-empty``
    ``--empty`` empty frames after the headers, before any open.
``real``
    Proton traffic (tests/benchmarks/benchmark.py's builder): the per-byte CPU reference.

For each capture and command: wall seconds, CPU seconds (user + system of the child), peak RSS
(MB), exit status, and CPU microseconds per capture byte; with ``real`` in the run, also the
ratio of each capture's CPU per byte to the real capture's.  Prints a markdown table and one
JSON line.  A benchmark, not a test: the machine may be shared (CPU time is steadier than wall).

The builders are functions (``zero_width_frames``, ``syn_capture``, ``unsettled_capture``)
that tests import to build the same traffic at small scale.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SUPPORT = os.path.join(os.path.dirname(HERE), "support")  # the helpers (pcapbuild, protonpump, ...)
sys.path[:0] = [HERE, SUPPORT]

from pcapbuild import ACK, PSH, SYN, PcapWriter, TcpConversation, ethernet_frame, tcp_packet  # noqa: E402

HEADER = b"AMQP\x00\x01\x00\x00"
BUILD_VERSION = 2  # in the cached captures' names: bump when a builder's traffic changes
COMMANDS = {
    "report": ["report", "{cap}"],
    "frames": ["frames", "{cap}"],
    "frames-V": ["frames", "-V", "{cap}"],
    "frames-jsonl": ["frames", "--format", "jsonl", "{cap}"],
    "deliveries-csv": ["deliveries", "--format", "csv", "-o", "{out}.csv", "{cap}"],
    "connections-csv": ["connections", "--format", "csv", "-o", "{out}.csv", "{cap}"],
    "deliveries-parquet": ["deliveries", "-T", "parquet", "-o", "{out}.parquet", "{cap}"],
    "links": ["links", "{cap}"],
    "report-j2": ["report", "-j", "2", "{cap}"],
    "deliveries-parquet-j2": ["deliveries", "-T", "parquet", "-j", "2", "-o", "{out}.parquet", "{cap}"],
    "links-j2": ["links", "-j", "2", "{cap}"],
    "deliveries-jsonl": ["deliveries", "--format", "jsonl", "-o", "{out}.jsonl", "{cap}"],
    "connections": ["connections", "-o", "{out}.txt", "{cap}"],
    "connections-jsonl": ["connections", "--format", "jsonl", "-o", "{out}.jsonl", "{cap}"],
    "connections-parquet": ["connections", "-T", "parquet", "-o", "{out}.parquet", "{cap}"],
    "connections-csv-columns": ["connections", "--format", "csv", "--columns", "connection,client,server",
                                "-o", "{out}.csv", "{cap}"],
    "deliveries-csv-j2": ["deliveries", "--format", "csv", "-j", "2", "-o", "{out}.csv", "{cap}"],
    "connections-csv-j2": ["connections", "--format", "csv", "-j", "2", "-o", "{out}.csv", "{cap}"],
    "connections-parquet-j2": ["connections", "-T", "parquet", "-j", "2", "-o", "{out}.parquet", "{cap}"],
}


# --------------------------------------------------------------------------- encodings (by hand, from the spec)
def frame(body: bytes, channel: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def _list32(items: list[bytes]) -> bytes:
    body = struct.pack(">I", len(items)) + b"".join(items)
    return b"\xd0" + struct.pack(">I", len(body)) + body


def _described(code: int, items: list[bytes]) -> bytes:
    return b"\x00\x53" + bytes([code]) + _list32(items)


def _uint(v: int) -> bytes:
    return b"\x70" + struct.pack(">I", v)


def _str(s: str) -> bytes:
    b = s.encode()
    return b"\xa1" + bytes([len(b)]) + b


NULL, TRUE, FALSE = b"\x40", b"\x41", b"\x42"


def zero_width_array_of_arrays(arrays: int, nulls: int = 65536) -> bytes:
    """array32 of ``arrays`` array32 elements, each ``nulls`` nulls (9 bytes per inner array)."""
    inner = b"".join(struct.pack(">II", 5, nulls) + b"\x40" for _ in range(arrays))
    body = struct.pack(">I", arrays) + b"\xf0" + inner
    return b"\xf0" + struct.pack(">I", len(body)) + body


def zero_width_flow(arrays: int = 18) -> bytes:
    """A flow frame (about 180 bytes) whose next-incoming-id is an array of arrays of nulls."""
    return frame(_described(0x13, [zero_width_array_of_arrays(arrays), _uint(100), _uint(0), _uint(100)]))


def open_frame(container: str) -> bytes:
    return frame(_described(0x10, [_str(container)]))


def begin_frame(remote_channel: int | None) -> bytes:
    rc = NULL if remote_channel is None else b"\x60" + struct.pack(">H", remote_channel)
    return frame(_described(0x11, [rc, _uint(0), _uint(0x7FFFFFFF), _uint(0x7FFFFFFF)]))


def attach_frame(name: str, role_receiver: bool) -> bytes:
    return frame(_described(0x12, [_str(name), _uint(0), TRUE if role_receiver else FALSE, NULL, NULL,
                                   _described(0x28, [_str("q")]), _described(0x29, [_str("q")]), NULL, NULL,
                                   _uint(0)]))


_MSG = b"\x00\x53\x77\xa1\x01x"  # amqp-value "x"


def transfer_frame(delivery_id: int) -> bytes:
    """An unsettled single-frame transfer on handle 0 with a 4-byte tag, ``_MSG`` as its message."""
    return frame(_described(0x14, [b"\x43", _uint(delivery_id), b"\xa0\x04" + struct.pack(">I", delivery_id),
                                   b"\x43", FALSE]) + _MSG)


def transfer_on(handle: int, delivery_id: int, more: bool = False) -> bytes:
    """A single-frame unsettled transfer on ``handle`` (a 1-byte tag), ``_MSG`` as its message;
    ``more``: the delivery's first frame of several (the others never come)."""
    return frame(_described(0x14, [_uint(handle), _uint(delivery_id), b"\xa0\x01x", b"\x43", FALSE,
                                   TRUE if more else FALSE]) + _MSG)


def disposition_frame(first: int, last: int, settled: bool = False) -> bytes:
    """From the receiver: first..last accepted (settled or not)."""
    return frame(_described(0x15, [TRUE, _uint(first), _uint(last), TRUE if settled else FALSE,
                                   b"\x00\x53\x24\x45"]))


def empty_frame(channel: int = 0) -> bytes:
    """An empty frame (a heartbeat when the connection is open)."""
    return struct.pack(">IBBH", 8, 2, 0, channel)


def credit_flow(credit: int = 0x7FFFFFFF) -> bytes:
    """The receiver's flow on handle 0: delivery-count 0, ``credit``."""
    return frame(_described(0x13, [_uint(0), _uint(0x7FFFFFFF), _uint(0), _uint(0x7FFFFFFF), _uint(0), _uint(0),
                                   _uint(credit)]))


def setup_exchange() -> list[tuple[int, bytes]]:
    """Headers, open, begin, attach (client sender, server receiver) and the receiver's credit."""
    return [
        (0, HEADER), (1, HEADER),
        (0, open_frame("client")), (1, open_frame("server")),
        (0, begin_frame(None)), (1, begin_frame(0)),
        (0, attach_frame("link", False)), (1, attach_frame("link", True)),
        (1, credit_flow()),
    ]


# --------------------------------------------------------------------------- captures
def zero_width_conversation(frames: int, per_segment: int = 8, **kw) -> TcpConversation:
    conv = TcpConversation(**kw)
    conv.handshake()
    for d, data in setup_exchange()[:6]:
        conv.send(d, data)
    flow = zero_width_flow()
    for i in range(0, frames, per_segment):
        conv.send(0, flow * min(per_segment, frames - i), mss=65000)
    conv.close()
    return conv


def unsettled_conversation(deliveries: int, per_segment: int = 40, close: bool = True, **kw) -> TcpConversation:
    conv = TcpConversation(**kw)
    conv.handshake()
    for d, data in setup_exchange():
        conv.send(d, data)
    for i in range(0, deliveries, per_segment):
        conv.send(0, b"".join(transfer_frame(j) for j in range(i, min(i + per_segment, deliveries))), mss=65000)
    if close:
        conv.close()
    return conv


def unknown_handles_conversation(handles: int, more: bool = False, per_segment: int = 60,
                                 **kw) -> TcpConversation:
    """Open and begin, then one transfer on each of ``handles`` handles (1, 2, ...) never attached
    (``more``: each the first frame of a delivery that never ends)."""
    conv = TcpConversation(**kw)
    conv.handshake()
    for d, data in setup_exchange()[:6]:
        conv.send(d, data)
    for i in range(0, handles, per_segment):
        conv.send(0, b"".join(transfer_on(j + 1, j, more) for j in range(i, min(i + per_segment, handles))),
                  mss=65000)
    conv.close()
    return conv


def unknown_channels_conversation(channels: int, per_segment: int = 60, **kw) -> TcpConversation:
    """Open and begin on channel 0, then one transfer on each of ``channels`` channels (1, 2, ...)
    never begun."""
    conv = TcpConversation(**kw)
    conv.handshake()
    for d, data in setup_exchange()[:6]:
        conv.send(d, data)
    for i in range(0, channels, per_segment):
        conv.send(0, b"".join(frame(transfer_on(0, j)[8:], channel=(j % 65535) + 1)
                              for j in range(i, min(i + per_segment, channels))), mss=65000)
    conv.close()
    return conv


def wide_dispositions_conversation(deliveries: int, dispositions: int, per_segment: int = 60,
                                   **kw) -> TcpConversation:
    """``deliveries`` unsettled transfers, then ``dispositions`` receiver dispositions each covering
    delivery-ids 0 .. 2**31-1 (accepted, not settling): the issue's disposition amplifier."""
    conv = unsettled_conversation(deliveries, per_segment=per_segment, close=False, **kw)
    wide = disposition_frame(0, 2**31 - 1)
    for i in range(0, dispositions, per_segment):
        conv.send(1, wide * min(per_segment, dispositions - i), mss=65000)
    conv.close()
    return conv


def preopen_empty_conversation(frames: int, per_segment: int = 2000, **kw) -> TcpConversation:
    """Both headers, then ``frames`` empty frames from the client before any open (each a state
    violation)."""
    conv = TcpConversation(**kw)
    conv.handshake()
    conv.send(0, HEADER)
    conv.send(1, HEADER)
    e = empty_frame()
    for i in range(0, frames, per_segment):
        conv.send(0, e * min(per_segment, frames - i), mss=65000)
    conv.close()
    return conv


def syn_records(n: int, t0: float = 1_700_000_000.0):
    """``n`` SYN-only connections: (ts, linktype, frame bytes)."""
    for i in range(n):
        src = f"10.{1 + (i >> 16) % 200}.{(i >> 8) & 255}.{i & 255}"
        pkt = tcp_packet(src, "10.0.0.2", 20000 + i % 40000, 5672, seq=i * 7919, flags=SYN)
        yield t0 + i * 1e-5, 1, ethernet_frame(pkt)


def header_records(n: int, t0: float = 1_700_000_000.0):
    """``n`` connections that send a SYN, then only the AMQP protocol header: (ts, linktype, frame bytes)."""
    for i in range(n):
        src = f"10.{1 + (i >> 16) % 200}.{(i >> 8) & 255}.{i & 255}"
        sport, ts = 20000 + i % 40000, t0 + i * 1e-5
        yield ts, 1, ethernet_frame(tcp_packet(src, "10.0.0.2", sport, 5672, seq=i * 7919, flags=SYN))
        yield ts + 5e-6, 1, ethernet_frame(tcp_packet(src, "10.0.0.2", sport, 5672, seq=i * 7919 + 1, ack=0,
                                                      flags=ACK | PSH, payload=HEADER))


def _write(path: str, records) -> None:
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        w = PcapWriter(f, 1)
        for ts, _lt, data in records:
            w.write(ts, data)
    os.replace(tmp, path)


def ensure(kind: str, n: int, folder: str, log) -> str:
    path = os.path.join(folder, f"{kind}-{n}-v{BUILD_VERSION}.pcap")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    t = time.perf_counter()
    if kind == "zero-width":
        _write(path, zero_width_conversation(n).records)
    elif kind == "unsettled":
        _write(path, unsettled_conversation(n).records)
    elif kind == "syn":
        _write(path, syn_records(n))
    elif kind == "header":
        _write(path, header_records(n))
    elif kind == "unknown-handles":
        _write(path, unknown_handles_conversation(n).records)
    elif kind == "partial-handles":
        _write(path, unknown_handles_conversation(n, more=True).records)
    elif kind == "unknown-channels":
        _write(path, unknown_channels_conversation(n).records)
    elif kind == "wide-dispositions":  # n unsettled deliveries, then n + n // 18 wide dispositions
        _write(path, wide_dispositions_conversation(n, n + n // 18).records)
    elif kind == "preopen-empty":
        _write(path, preopen_empty_conversation(n).records)
    elif kind == "real":
        import benchmark

        benchmark.build_capture(path, 1, n)
    else:
        raise ValueError(kind)
    log(f"built {path} ({os.path.getsize(path) / 1e6:.2f} MB) in {time.perf_counter() - t:.1f} s")
    return path


# --------------------------------------------------------------------------- running
def run_measured(cmd: list[str], env: dict, timeout: float | None) -> dict:
    """Wall, CPU (user+sys) seconds and peak RSS of one child (os.wait4 rusage)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=ROOT, env=env)
    deadline = None if timeout is None else t + timeout
    err = b""
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if deadline is not None and time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read()
    p.stderr.close()
    return {"s": round(wall, 3), "cpu": round(ru.ru_utime + ru.ru_stime, 3), "mb": round(ru.ru_maxrss / 1024, 1),
            "rc": p.returncode, "stderr": err.decode("utf-8", "replace")[-300:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=None,
                    help="captures to run (zero-width, syn, header, unsettled, unknown-handles, partial-handles, "
                         "unknown-channels, wide-dispositions, preopen-empty, real); repeatable; default all")
    ap.add_argument("--frames", type=int, default=2000, help="zero-width flow frames (default 2000)")
    ap.add_argument("--syns", type=int, default=200_000, help="SYN-only connections (default 200000)")
    ap.add_argument("--deliveries", type=int, default=1_000_000, help="unsettled deliveries (default 1000000)")
    ap.add_argument("--handles", type=int, default=36_000,
                    help="transfers on never-attached handles, unknown-handles / partial-handles (default 36000)")
    ap.add_argument("--channels", type=int, default=36_000,
                    help="transfers on never-begun channels, unknown-channels (default 36000)")
    ap.add_argument("--wide", type=int, default=18_000,
                    help="wide-dispositions: unsettled deliveries, then 19/18 as many dispositions of 0..2^31-1 "
                         "(default 18000)")
    ap.add_argument("--empty", type=int, default=1_000_000, help="preopen-empty: empty frames before open "
                                                                    "(default 1000000)")
    ap.add_argument("--messages", type=int, default=20_000, help="messages of the real capture (default 20000)")
    ap.add_argument("--commands", default=None, help=f"comma-separated, from {', '.join(COMMANDS)}")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "amqp-hostile"))
    ap.add_argument("--pure", action="store_true", help="AMQP_DISSECT_PURE_PYTHON=1")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", dest="json_path", default=None)
    args = ap.parse_args(argv)
    state_kinds = ["unknown-handles", "partial-handles", "unknown-channels", "wide-dispositions", "preopen-empty"]
    kinds = args.only or ["real", "zero-width", "syn", "unsettled"] + state_kinds
    size = {"zero-width": args.frames, "syn": args.syns, "header": args.syns, "unsettled": args.deliveries, "real": args.messages,
            "unknown-handles": args.handles, "partial-handles": args.handles, "unknown-channels": args.channels,
            "wide-dispositions": args.wide, "preopen-empty": args.empty}
    default_cmds = {"zero-width": ["report", "frames", "frames-V", "frames-jsonl"],
                    "syn": ["report", "deliveries-csv"], "header": ["report", "deliveries-parquet", "links"],
                    "unsettled": ["report", "deliveries-csv"],
                    **{k: ["report"] for k in state_kinds},
                    "real": ["report", "frames", "frames-V", "frames-jsonl", "deliveries-csv"]}

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    env = dict(os.environ)
    env.pop("AMQP_DISSECT_PURE_PYTHON", None)
    if args.pure:
        env["AMQP_DISSECT_PURE_PYTHON"] = "1"
    rows = []
    tmp = tempfile.mkdtemp(prefix="hostile-")
    for kind in kinds:
        cap = ensure(kind, size[kind], args.dir, log)
        nbytes = os.path.getsize(cap)
        cmds = args.commands.split(",") if args.commands else default_cmds[kind]
        for name in cmds:
            cmd = [sys.executable, "-m", "amqp_dissect.cli"] + [
                a.replace("{cap}", cap).replace("{out}", os.path.join(tmp, "out")) for a in COMMANDS[name]]
            r = run_measured(cmd, env, args.timeout)
            for ext in ("csv", "parquet", "jsonl", "txt"):
                out = os.path.join(tmp, f"out.{ext}")
                if os.path.exists(out):
                    os.remove(out)
            row = {"capture": kind, "n": size[kind], "bytes": nbytes, "command": name, **r,
                   "cpu_us_per_byte": round(r["cpu"] * 1e6 / nbytes, 3)}
            if r["rc"] != 0:
                log(f"{name} on {cap}: exit {r['rc']}: {r['stderr']}")
            rows.append(row)
            log(f"{kind} {name}: {r['s']:.2f} s wall, {r['cpu']:.2f} s CPU, {r['mb']:.0f} MB, exit {r['rc']}")
    real = {r["command"]: r["cpu_us_per_byte"] for r in rows if r["capture"] == "real"}
    for r in rows:
        ref = real.get(r["command"]) or real.get("report")
        r["cpu_per_byte_vs_real"] = round(r["cpu_us_per_byte"] / ref, 2) if ref and r["capture"] != "real" else None
    print("| capture | n | bytes | command | wall s | CPU s | peak MB | exit | CPU µs/byte | vs real |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['capture']} | {r['n']} | {r['bytes']} | {r['command']} | {r['s']:.2f} | {r['cpu']:.2f} | "
              f"{r['mb']:.0f} | {r['rc']} | {r['cpu_us_per_byte']:.3f} | {r['cpu_per_byte_vs_real'] or ''} |")
    for r in rows:
        r.pop("stderr")
    line = json.dumps({"pure": args.pure, "rows": rows})
    print(line)
    if args.json_path:
        with open(args.json_path, "w") as f:
            f.write(line + "\n")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
