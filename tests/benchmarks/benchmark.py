#!/usr/bin/env python3
"""Benchmark amqp-dissect against tshark on real proton traffic, timed in the same run.

Reference run (the reference table of docs/performance.md; issue 7's capture: 150,000 small
messages over 2 connections)::

    python tests/benchmarks/benchmark.py --connections 2 --messages 75000 --repeat 3

Quick smoke run (small capture, seconds)::

    python tests/benchmarks/benchmark.py --quick

What it does
------------
1. Builds a capture of real proton-encoded AMQP 1.0 traffic: ``tests/support/protonpump.py``
   engines (SASL, open, attach, transfers, flows, dispositions, close) carried over
   TCP by ``tests/support/pcapbuild.py``, in three shapes (``--shapes``): ``acked``, the client
   sends rounds of 10 transfers in 1,460-byte segments each ACKed (about 4 frames per data
   segment); ``batched``, rounds of 40 in segments of up to 32,000 bytes with no pure ACKs (about
   20 frames per segment, as proton on the loopback sends them); ``flood``, the broker sends
   rounds of 10 to one receiver, which settles them by ranges and tops its credit up (about 5.5
   frames per segment).  Each capture is cached (``--out``, the others beside it as
   ``<out>-batched.pcap`` / ``<out>-flood.pcap``) with the build parameters in a sidecar
   ``<out>.json``; it is reused when they match, and built in a child process.
2. Runs each of our commands paired with its tshark counterpart, alternating
   ours / tshark ``--repeat`` times, each as a whole process (stdout to /dev/null,
   files to a temporary folder).  Wall time, CPU time (user + system) and the peak RSS of
   that child process (``os.wait4`` rusage) are recorded.  The CPU ratio is the median of the
   per-pair ratios of CPU time ours / tshark, and the goal is judged on it (issue 41: CPU-time
   medians of paired runs); the wall ratio, the same median of wall times, is printed beside it.
3. ``-j N`` (``--jobs``, default 2): ``report`` and the Parquet deliveries table timed with
   ``-j 1``, with ``-j N`` and as N ``-j 1`` processes at once (the machine's ceiling), on the
   capture and on its replays that ``--jobs-scales`` names (``--jobs-scales 1,4``: also on the
   same traffic four times, one bigger capture).
4. Memory scaling: the same traffic replayed K times back to back on new client
   ports with later timestamps (``--scales``, default 1,4,16; see
   ``pcapbuild.repeat_pcap``), and the peak memory of ``report`` and the delivery
   tables on each.
5. The Python API (``--api``, on by default; ``--api none`` skips it): the deliveries DataFrame of
   ``amqp_dissect.analyze(CAPTURE, tables="deliveries")`` in a child process, alternated with the
   CLI's ``deliveries -T parquet`` on each shape's capture; wall time and peak RSS of each, and
   the ratio API / CLI (issue 27's goal: at most 3x the time, at most 400 MB peak).
6. Optionally (``--instructions``) each pair once more under valgrind's callgrind, ours and
   tshark: instruction counts beside the times (the same count on a busy machine).
7. Optionally (``--stages``) the in-process stage timings: capture reading,
   reading + link/IP/TCP parsing, the sans-IO pipeline.

Prints markdown tables and, last, one JSON line with every number.  This is a
benchmark, not a test: the machine may be shared and noisy, so only ratios
measured in one run are compared.

Our command is ``<python> -m amqp_dissect.cli`` run from the repository root, or ``--cmd``
(e.g. ``--cmd amqp-dissect`` for the installed script).  ``--env KEY=VALUE``
passes environment variables to our commands; ``--modes default,pure`` runs each
of our commands twice, the second time with ``AMQP_DISSECT_PURE_PYTHON=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SUPPORT = os.path.join(os.path.dirname(HERE), "support")  # the helpers (pcapbuild, protonpump, ...)

BUILDER_VERSION = 1  # bump when build_capture's traffic changes (invalidates cached captures)
REPEAT_VERSION = 1  # bump when repeat_pcap's output changes

# name -> (our arguments, tshark arguments, speed goal (max ratio) or None); "{cap}" / "{out}" are filled in
PAIRS = {
    # the goals of issue 41, on the CPU-time ratio: report 0.8x, frames (-V, -T jsonl) 1.0x
    "report": (["report", "{cap}"], ["-r", "{cap}", "-Y", "amqp"], 0.8),
    # -j 0: a process per idle CPU (at most 4) on a file of 8 MiB or more
    "report-j0": (["report", "-j", "0", "{cap}"], ["-r", "{cap}", "-Y", "amqp"], None),
    "frames": (["frames", "{cap}"], ["-r", "{cap}", "-Y", "amqp"], 1.0),
    "frames-V": (["frames", "-V", "{cap}"], ["-r", "{cap}", "-Y", "amqp", "-V"], 1.0),
    "frames-jsonl": (["frames", "--format", "jsonl", "{cap}"], ["-r", "{cap}", "-Y", "amqp", "-T", "json"], 1.0),
    "deliveries-parquet": (["deliveries", "--format", "parquet", "-o", "{out}.parquet", "{cap}"],
                           ["-r", "{cap}", "-Y", "amqp"], 1.5),
    "deliveries-csv": (["deliveries", "--format", "csv", "-o", "{out}.csv", "{cap}"],
                       ["-r", "{cap}", "-Y", "amqp"], None),
}
DEFAULT_PAIRS = ["report", "report-j0", "frames", "frames-V", "frames-jsonl", "deliveries-parquet"]

# memory scaling: name -> our arguments
MEMORY_CMDS = {
    "report": ["report", "{cap}"],
    "deliveries-csv": ["deliveries", "--format", "csv", "-o", "{out}.csv", "{cap}"],
    "deliveries-parquet": ["deliveries", "--format", "parquet", "-o", "{out}.parquet", "{cap}"],
}
MEMORY_GOAL_MB = {"report": 150.0}  # peak at every scale; all memory rows must also be flat
FLAT_TOLERANCE = 1.25  # "flat": peak at the largest scale <= this x peak at the smallest

MODES = {"default": {}, "pure": {"AMQP_DISSECT_PURE_PYTHON": "1"}}

QUICK = {"connections": 2, "messages": 300, "scales": "1,2", "repeat": 1}


# --------------------------------------------------------------------------- captures
def _sidecar(path: str) -> str:
    return path + ".json"


def _cached(path: str, params: dict) -> dict | None:
    """The sidecar's content when ``path`` exists and was built with ``params``."""
    try:
        with open(_sidecar(path)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    if meta.get("params") != params or not os.path.exists(path) or os.path.getsize(path) != meta.get("bytes"):
        return None
    return meta


def _save_sidecar(path: str, meta: dict) -> None:
    with open(_sidecar(path), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


class Shape(NamedTuple):
    """How a capture's traffic is batched and cut into TCP segments."""
    batch: int  # messages per proton round (what one pass of the engines moves at once)
    mss: int  # TCP maximum segment size of the capture
    acks: bool  # a pure ACK after every data segment
    flood: bool  # the broker sends to one receiver (else the client sends to the broker)


# capture shapes.  "acked": the client sends rounds of 10 transfers cut at 1,460 bytes, each segment
# ACKed (the reference capture, about 4 AMQP frames per data segment).  "batched": what proton on the
# loopback sends: rounds of 40 transfers in segments of up to 32,000 bytes, the peer's data carrying
# the ACKs (about 20 frames per segment), no pure ACKs: the per-frame cost, not the per-packet cost,
# dominates.  "flood": a broker flooding one receiver with small messages: rounds of 10 transfers from
# the server, the receiver's dispositions (proton gives one range per round) and credit top-ups back
# (about 5.5 frames per segment, as a proton broker sends to a proton receiver).
SHAPES = {"acked": Shape(10, 1460, True, False), "batched": Shape(40, 32000, False, False),
          "flood": Shape(10, 32000, False, True)}
FLOOD_CREDIT = 500  # the flood's receiver grants this much credit, topped up below a fifth of it


def _message(i: int):
    from proton import Message

    return Message(body=f"payload {i:08d} " + "x" * 60, properties={"seq": i})


def _client_sends(address: str, messages: int, batch: int):
    """A proton exchange: the client sends ``messages`` small messages to ``address``, ``batch`` per round."""
    from protonpump import Pump

    p = Pump(server_credit=100, server_max_frame=16384)
    snd = p.sender(address)
    p.run()
    for i in range(messages):
        p.send(snd, _message(i))
        if i % batch == batch - 1:
            p.run()
    p.run()
    p.close()
    return p.chunks


def _broker_floods(address: str, messages: int, batch: int):
    """A proton exchange: the server sends ``messages`` small messages to the client's receiver of ``address``,
    ``batch`` per round; the receiver accepts and settles each and tops its credit up."""
    from protonpump import Pump

    p = Pump(server_max_frame=16384)
    rcv = p.receiver(address, credit=FLOOD_CREDIT)
    p.run()
    link = next(x for x in p._server_links() if x.is_sender)
    for i in range(messages):
        link.delivery(f"d-{i}".encode())
        link.send(_message(i).encode())
        link.advance()
        if i % batch == batch - 1:
            p.run()
            if rcv.credit < FLOOD_CREDIT // 5:
                rcv.flow(FLOOD_CREDIT - rcv.credit)
    p.run()
    p.close()
    return p.chunks


def build_capture(path: str, connections: int, messages: int, shape: str = "acked") -> dict:
    """Proton traffic: ``connections`` connections, each carrying ``messages`` small messages,
    batched and segmented as ``shape`` says (see SHAPES)."""
    how = SHAPES[shape]
    sys.path[:0] = [SUPPORT]
    from pcapbuild import PcapWriter, TcpConversation

    records = []
    for c in range(connections):
        chunks = (_broker_floods if how.flood else _client_sends)(f"queue-{c}", messages, how.batch)
        conv = TcpConversation.from_exchange(
            chunks,
            client=("10.0.0.1", 40000 + c),
            server=("10.0.0.2", 5672),
            t0=1_700_000_000.0 + c * 0.0003,
            dt=0.0001,
            acks=how.acks,
            mss=how.mss,
        )
        records.extend(conv.records)
        del chunks, conv
    records.sort(key=lambda r: r[0])
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        w = PcapWriter(f, records[0][1])
        for ts, _lt, data in records:
            w.write(ts, data)
    os.replace(tmp, path)
    return {"packets": len(records), "bytes": os.path.getsize(path)}


def shape_path(path: str, shape: str) -> str:
    """The capture of another shape beside ``path`` (the "acked" one is ``path`` itself)."""
    if shape == "acked":
        return path
    root, ext = os.path.splitext(path)
    return f"{root}-{shape}{ext}"


def ensure_capture(path: str, connections: int, messages: int, log, shape: str = "acked") -> dict:
    params = {"builder": BUILDER_VERSION, "connections": connections, "messages": messages}
    if shape != "acked":
        params["shape"] = shape
    meta = _cached(path, params)
    if meta is not None:
        log(f"reusing {path} ({meta['packets']} packets, {meta['bytes'] / 1e6:.1f} MB)")
        return {**meta, "path": path, "built": False}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    t = time.perf_counter()
    # built in a child process: a parent grown by the build would lend its peak RSS to every
    # command it starts afterwards (ru_maxrss counts the child's memory before its exec)
    built = subprocess.run([sys.executable, os.path.abspath(__file__), "--build-capture", path, str(connections),
                            str(messages), shape], capture_output=True, text=True)
    if built.returncode:
        raise SystemExit(f"building {path} failed:\n{built.stderr[-3000:]}")
    info = json.loads(built.stdout.strip().splitlines()[-1])
    secs = time.perf_counter() - t
    meta = {"params": params, **info, "build_s": round(secs, 1)}
    _save_sidecar(path, meta)
    log(f"built {path}: {info['packets']} packets, {info['bytes'] / 1e6:.1f} MB in {secs:.1f} s")
    return {**meta, "path": path, "built": True}


def scaled_path(path: str, k: int) -> str:
    root, ext = os.path.splitext(path)
    return f"{root}-x{k}{ext or '.pcap'}"


def ensure_scaled(base: dict, k: int, log) -> dict:
    """``base`` replayed ``k`` times on new client ports (cached like the base capture)."""
    if k == 1:
        return base
    path = scaled_path(base["path"], k)
    params = {"repeat": REPEAT_VERSION, "copies": k, "base": base["params"], "base_bytes": base["bytes"]}
    meta = _cached(path, params)
    if meta is not None:
        log(f"reusing {path} ({meta['packets']} packets, {meta['bytes'] / 1e6:.1f} MB)")
        return {**meta, "path": path, "built": False}
    t = time.perf_counter()
    tmp = path + ".part"
    # built in a child process, as the base capture is (ensure_capture): the replay grows the process
    # that makes it, and every command started after it would report that peak as its own
    built = subprocess.run([sys.executable, os.path.abspath(__file__), "--repeat-capture", base["path"], tmp, str(k)],
                           capture_output=True, text=True)
    if built.returncode:
        raise SystemExit(f"replaying {base['path']} failed:\n{built.stderr[-3000:]}")
    info = json.loads(built.stdout.strip().splitlines()[-1])
    os.replace(tmp, path)
    secs = time.perf_counter() - t
    meta = {"params": params, "packets": info["packets"], "bytes": os.path.getsize(path),
            "port_step": info["port_step"], "time_step": info["time_step"], "build_s": round(secs, 1)}
    _save_sidecar(path, meta)
    log(f"built {path}: {k} x {base['packets']} packets, {meta['bytes'] / 1e6:.1f} MB in {secs:.1f} s")
    return {**meta, "path": path, "built": True}


# --------------------------------------------------------------------------- running
def run_child(cmd: list[str], *, cwd: str | None = None, env: dict | None = None, timeout: float | None = None) -> dict:
    """Run ``cmd`` as a child process; wall seconds, CPU seconds (user + system, the child and the
    children it waited for), peak RSS (MB) of that child, exit status."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd, env=env)
        deadline = None if timeout is None else t + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG if deadline else 0)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
        err.seek(0)
        tail = err.read()[-2000:].decode("utf-8", "replace")
    # ru_maxrss is in KiB on Linux, bytes on macOS
    rss = ru.ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru.ru_maxrss / 1024
    return {"s": wall, "cpu": ru.ru_utime + ru.ru_stime, "mb": rss, "rc": p.returncode, "stderr": tail}


def count_instructions(cmd: list[str], *, cwd: str | None = None, env: dict | None = None) -> int | None:
    """Instructions ``cmd`` executes, counted by valgrind's callgrind (the same count whatever else
    the machine does: what the noisy times cannot say); None without valgrind or on a failed run."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        return None
    with tempfile.TemporaryFile() as err:
        rc = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null"] + cmd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd,
                            env=env).returncode
        err.seek(0)
        tail = err.read()[-4000:].decode("utf-8", "replace")
    found = re.search(r"Collected\s*:\s*([\d,]+)", tail)
    return int(found.group(1).replace(",", "")) if rc == 0 and found else None


def run_children(cmds: list[list[str]], *, cwd: str | None = None, env: dict | None = None) -> dict:
    """Run ``cmds`` at once; wall seconds until the last ends, the largest peak RSS, the first
    non-zero exit status (0 if none)."""
    t = time.perf_counter()
    procs = [subprocess.Popen(c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              cwd=cwd, env=env) for c in cmds]
    rss, rc = 0.0, 0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        rc = rc or p.returncode
        rss = max(rss, ru.ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else ru.ru_maxrss / 1024)
    return {"s": time.perf_counter() - t, "mb": rss, "rc": rc, "stderr": ""}


def _remove_outputs(out: str) -> None:
    """Remove what a command wrote at ``out`` (a file or a Parquet folder, by its ending)."""
    for ext in (".parquet", ".csv", ".jsonl"):
        p = out + ext
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)


def fill(args: list[str], cap: str, out: str) -> list[str]:
    return [a.replace("{cap}", cap).replace("{out}", out) for a in args]


class Runner:
    def __init__(self, ours: list[str], cwd: str | None, env_extra: dict, modes: list[str], tshark: str | None,
                 timeout: float | None, tmpdir: str, log):
        self.ours, self.cwd, self.env_extra, self.modes = ours, cwd, env_extra, modes
        self.tshark, self.timeout, self.tmpdir, self.log = tshark, timeout, tmpdir, log
        self.errors: list[str] = []

    def env(self, mode: str) -> dict:
        env = dict(os.environ)
        env.pop("AMQP_DISSECT_PURE_PYTHON", None)
        # as an installed package runs: Python modules load from their cached bytecode (pip
        # writes it at install time) rather than being compiled again at every start
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.update(self.env_extra)
        env.update(MODES[mode])
        return env

    def run_ours(self, args: list[str], cap: str, mode: str) -> dict:
        out = os.path.join(self.tmpdir, "out")
        cmd = self.ours + fill(args, cap, out)
        r = run_child(cmd, cwd=self.cwd, env=self.env(mode), timeout=self.timeout)
        _remove_outputs(out)
        self._check(cmd, r)
        return r

    def run_ours_together(self, args: list[str], cap: str, mode: str, k: int) -> dict:
        """``k`` copies of one command at once, each with its own output."""
        outs = [os.path.join(self.tmpdir, f"out-{i}") for i in range(k)]
        cmds = [self.ours + fill(args, cap, out) for out in outs]
        r = run_children(cmds, cwd=self.cwd, env=self.env(mode))
        for out in outs:
            _remove_outputs(out)
        self._check(cmds[0], r)
        return r

    def run_tshark(self, args: list[str], cap: str) -> dict:
        cmd = [self.tshark] + fill(args, cap, os.path.join(self.tmpdir, "out"))
        r = run_child(cmd, timeout=self.timeout)
        self._check(cmd, r)
        return r

    def count_ours(self, args: list[str], cap: str, mode: str) -> int | None:
        """Instructions our command executes (callgrind), or None when valgrind is missing."""
        out = os.path.join(self.tmpdir, "out")
        r = count_instructions(self.ours + fill(args, cap, out), cwd=self.cwd, env=self.env(mode))
        _remove_outputs(out)
        return r

    def count_tshark(self, args: list[str], cap: str) -> int | None:
        return count_instructions([self.tshark] + fill(args, cap, os.path.join(self.tmpdir, "out")))

    def _check(self, cmd, r) -> None:
        if r["rc"] != 0:
            msg = f"exit {r['rc']}: {shlex.join(cmd)}\n{r['stderr'].strip()}"
            self.errors.append(msg)
            self.log("FAILED " + msg)


def _med(xs):
    return statistics.median(xs) if xs else None


def _r(x, nd=3):
    return None if x is None else round(x, nd)


def run_pairs(runner: Runner, names: list[str], cap: str, repeat: int, shape: str = "acked",
              instructions: bool = False) -> list[dict]:
    """Each pair timed ``repeat`` times on ``cap``; with ``instructions``, also run once under
    callgrind each (ours in the first mode; commands with -j are not counted: their work is in
    other processes)."""
    rows = []
    for name in names:
        ours_args, th_args, goal = PAIRS[name]
        ours = {m: [] for m in runner.modes}
        theirs = []
        for i in range(repeat):
            for m in runner.modes:
                ours[m].append(runner.run_ours(ours_args, cap, m))
            if runner.tshark:
                theirs.append(runner.run_tshark(th_args, cap))
            runner.log(f"{name} ({shape}) #{i + 1}: " + ", ".join(
                f"{m} {ours[m][-1]['s']:.2f} s (CPU {ours[m][-1]['cpu']:.2f} s)" for m in runner.modes)
                + (f", tshark {theirs[-1]['s']:.2f} s (CPU {theirs[-1]['cpu']:.2f} s)" if theirs else ""))
        for m in runner.modes:
            o = ours[m]
            ok = all(r["rc"] == 0 for r in o) and all(r["rc"] == 0 for r in theirs)
            ratios = [a["s"] / b["s"] for a, b in zip(o, theirs)]
            cpu_ratios = [a["cpu"] / b["cpu"] for a, b in zip(o, theirs) if b["cpu"] > 0]
            cpu_ratio = _med(cpu_ratios)
            rows.append({
                "name": name,
                "shape": shape,
                "mode": m,
                "ours_cmd": shlex.join(runner.ours + fill(ours_args, "CAPTURE", "OUT")),
                "tshark_cmd": shlex.join(["tshark"] + fill(th_args, "CAPTURE", "OUT")),
                "ours_s": [_r(r["s"]) for r in o],
                "tshark_s": [_r(r["s"]) for r in theirs],
                "ours_median_s": _r(_med([r["s"] for r in o])),
                "tshark_median_s": _r(_med([r["s"] for r in theirs])),
                "ratios": [_r(x) for x in ratios],
                "ratio": _r(_med(ratios)),
                "ours_cpu_s": [_r(r["cpu"]) for r in o],
                "tshark_cpu_s": [_r(r["cpu"]) for r in theirs],
                "ours_median_cpu_s": _r(_med([r["cpu"] for r in o])),
                "tshark_median_cpu_s": _r(_med([r["cpu"] for r in theirs])),
                "cpu_ratios": [_r(x) for x in cpu_ratios],
                "cpu_ratio": _r(cpu_ratio),
                "goal": goal,
                "pass": None if (goal is None or cpu_ratio is None) else bool(ok and cpu_ratio <= goal),
                "ours_peak_mb": _r(max(r["mb"] for r in o), 1),
                "tshark_peak_mb": _r(max(r["mb"] for r in theirs), 1) if theirs else None,
                "ok": ok,
            })
        if instructions and "-j" not in ours_args:
            counted = rows[-len(runner.modes)]
            counted["ours_instructions"] = runner.count_ours(ours_args, cap, runner.modes[0])
            counted["tshark_instructions"] = runner.count_tshark(th_args, cap) if runner.tshark else None
            a, b = counted["ours_instructions"], counted["tshark_instructions"]
            counted["instruction_ratio"] = _r(a / b) if a and b else None
            runner.log(f"{name} ({shape}) instructions: ours {a}, tshark {b}")
    return rows


JOBS_PAIRS = ("report", "deliveries-parquet")  # the pairs also timed with -j N against -j 1


def run_jobs(runner: Runner, names: list[str], cap: str, repeat: int, jobs: int, scale: int = 1) -> list[dict]:
    """``-j N`` rows: each command run in turn with ``-j 1``, with ``-j N``, and as N ``-j 1``
    processes at once (same mode).  The speed-up is the median of the per-round ratios (-j 1 time /
    -j N time); the ceiling, the median of N x (-j 1 time) / (time of the N at once): what N cores
    of this machine give N independent copies of the same work (a machine whose cores slow each
    other down, shared caches or a busy host, gives less than N), against which -j N is judged.
    ``scale``: the capture is the base capture replayed that many times (recorded in each row)."""
    rows = []
    for name in names:
        if name not in JOBS_PAIRS:
            continue
        args = PAIRS[name][0]
        for m in runner.modes:
            one, many, together = [], [], []
            for i in range(repeat):
                one.append(runner.run_ours(args[:1] + ["-j", "1"] + args[1:], cap, m))
                many.append(runner.run_ours(args[:1] + ["-j", str(jobs)] + args[1:], cap, m))
                together.append(runner.run_ours_together(args[:1] + ["-j", "1"] + args[1:], cap, m, jobs))
                runner.log(f"{name} ({scale}x) -j 1 / -j {jobs} / {jobs} x -j 1 at once #{i + 1} [{m}]: {one[-1]['s']:.2f} s"
                           f" / {many[-1]['s']:.2f} s / {together[-1]['s']:.2f} s")
            ok = all(r["rc"] == 0 for r in one + many + together)
            ratios = [a["s"] / b["s"] for a, b in zip(one, many)]
            ceilings = [jobs * a["s"] / t["s"] for a, t in zip(one, together)]
            rows.append({
                "name": name, "mode": m, "jobs": jobs, "scale": scale,
                "cmd": shlex.join(runner.ours + fill(args[:1] + ["-j", str(jobs)] + args[1:], "CAPTURE", "OUT")),
                "j1_s": [_r(r["s"]) for r in one], f"j{jobs}_s": [_r(r["s"]) for r in many],
                "j1_median_s": _r(_med([r["s"] for r in one])), "jn_median_s": _r(_med([r["s"] for r in many])),
                "ratios": [_r(x) for x in ratios], "speedup": _r(_med(ratios)), "goal": 1.7,
                "together_s": [_r(r["s"]) for r in together], "ceilings": [_r(x) for x in ceilings],
                "ceiling": _r(_med(ceilings)),
                "pass": bool(ok and ratios and _med(ratios) >= 1.7),
                "j1_peak_mb": _r(max(r["mb"] for r in one), 1), "jn_peak_mb": _r(max(r["mb"] for r in many), 1),
                "ok": ok,
            })
    return rows


def jobs_table(rows: list[dict], show_mode: bool) -> str:
    head = ["command", "capture"] + (["mode"] if show_mode else []) + [
        "-j 1 (median s)", "-j N (median s)", "-j 1 / -j N", "goal", "", "ceiling (N x -j 1 at once)",
        "-j 1 peak MB", "-j N peak MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cmd = r["cmd"].split(" -m amqp_dissect.cli ", 1)[-1].replace(" CAPTURE", "").replace("OUT.", "out.")
        cells = [f"`{cmd}`", f"{r.get('scale', 1)}x"] + ([r["mode"]] if show_mode else []) + [
            _fmt(r["j1_median_s"]), _fmt(r["jn_median_s"]), _fmt(r["speedup"], "{:.2f}x"),
            _fmt(r["goal"], ">= {:.1f}x"), _verdict(r["pass"]) if r["ok"] else "ERROR",
            _fmt(r.get("ceiling"), "{:.2f}x"), _fmt(r["j1_peak_mb"], "{:.0f}"), _fmt(r["jn_peak_mb"], "{:.0f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_memory(runner: Runner, names: list[str], caps: list[dict], with_tshark: bool) -> list[dict]:
    rows = []
    for cap in caps:
        k = cap["params"].get("copies", 1)
        for name in names:
            for m in runner.modes:
                r = runner.run_ours(MEMORY_CMDS[name], cap["path"], m)
                runner.log(f"memory {name} x{k} [{m}]: {r['s']:.2f} s, {r['mb']:.0f} MB")
                rows.append({"name": name, "mode": m, "scale": k, "packets": cap["packets"],
                             "capture_mb": _r(cap["bytes"] / 1e6, 1), "s": _r(r["s"]), "peak_mb": _r(r["mb"], 1),
                             "ok": r["rc"] == 0})
        if with_tshark and runner.tshark:
            r = runner.run_tshark(["-r", "{cap}", "-Y", "amqp"], cap["path"])
            runner.log(f"memory tshark x{k}: {r['s']:.2f} s, {r['mb']:.0f} MB")
            rows.append({"name": "tshark -Y amqp", "mode": "tshark", "scale": k, "packets": cap["packets"],
                         "capture_mb": _r(cap["bytes"] / 1e6, 1), "s": _r(r["s"]), "peak_mb": _r(r["mb"], 1),
                         "ok": r["rc"] == 0})
    return rows


def memory_verdicts(rows: list[dict]) -> list[dict]:
    """Per (command, mode): peaks by scale, flat (largest / smallest scale) and the absolute goal."""
    out = []
    keys = []
    for r in rows:
        if (r["name"], r["mode"]) not in keys:
            keys.append((r["name"], r["mode"]))
    for name, mode in keys:
        rs = sorted((r for r in rows if (r["name"], r["mode"]) == (name, mode)), key=lambda r: r["scale"])
        peaks = {r["scale"]: r["peak_mb"] for r in rs}
        growth = rs[-1]["peak_mb"] / rs[0]["peak_mb"] if rs[0]["peak_mb"] else None
        goal = MEMORY_GOAL_MB.get(name) if mode != "tshark" else None
        flat = None if mode == "tshark" or len(rs) < 2 else growth <= FLAT_TOLERANCE
        checks = [c for c in (flat, None if goal is None else max(peaks.values()) <= goal) if c is not None]
        out.append({"name": name, "mode": mode, "peaks_mb": {str(k): v for k, v in peaks.items()},
                    "growth": _r(growth, 2), "flat": flat, "goal_mb": goal, "ok": all(r["ok"] for r in rs),
                    "pass": (all(checks) and all(r["ok"] for r in rs)) if checks else None})
    return out


# --------------------------------------------------------------------------- in-process stages
# --------------------------------------------------------------------------- the Python API

# the child that makes the deliveries DataFrame (argv[1]: the capture); it prints the rows made
API_CODE = ("import sys, amqp_dissect\n"
            "df = amqp_dissect.analyze(sys.argv[1], tables='deliveries').deliveries\n"
            "print(len(df))\n")
API_GOALS = {"ratio": 3.0, "peak_mb": 400.0}  # issue 27: the DataFrame in <= 3x the CLI's Parquet time, <= 400 MB


def run_api(runner: Runner, caps: dict, repeat: int, python: str = sys.executable) -> list[dict]:
    """Per shape's capture: the API's deliveries DataFrame (a child ``python -c API_CODE``) and the
    CLI's ``deliveries -T parquet``, alternated ``repeat`` times in each mode; wall seconds and
    peak RSS of each child, the median of the per-pair ratios API / CLI."""
    rows = []
    cli_args = MEMORY_CMDS["deliveries-parquet"]
    for shape, c in caps.items():
        for m in runner.modes:
            api, cli = [], []
            for i in range(repeat):
                cli.append(runner.run_ours(cli_args, c["path"], m))
                cmd = [python, "-c", API_CODE, c["path"]]
                r = run_child(cmd, cwd=runner.cwd or ROOT, env=runner.env(m), timeout=runner.timeout)
                runner._check(cmd, r)
                api.append(r)
                runner.log(f"api deliveries ({shape}, {m}) #{i + 1}: api {r['s']:.2f} s {r['mb']:.0f} MB, "
                           f"cli parquet {cli[-1]['s']:.2f} s {cli[-1]['mb']:.0f} MB")
            ratios = [a["s"] / b["s"] for a, b in zip(api, cli)]
            peak = max(r["mb"] for r in api)
            ratio = _med(ratios)
            rows.append({
                "shape": shape, "mode": m, "packets": c["packets"],
                "api_cmd": f"python -c {API_CODE!r} CAPTURE",
                "api_s": [_r(r["s"]) for r in api], "cli_s": [_r(r["s"]) for r in cli],
                "api_median_s": _r(_med([r["s"] for r in api])), "cli_median_s": _r(_med([r["s"] for r in cli])),
                "ratio": _r(ratio), "api_peak_mb": _r(peak, 1), "cli_peak_mb": _r(max(r["mb"] for r in cli), 1),
                "pass": bool(ratio is not None and ratio <= API_GOALS["ratio"] and peak <= API_GOALS["peak_mb"]
                             and all(r["rc"] == 0 for r in api + cli)),
            })
    return rows


def api_table(rows: list[dict], show_mode: bool) -> str:
    head = ("| capture | " + ("mode | " if show_mode else "")
            + "API DataFrame s | CLI parquet s | ratio | API peak MB | CLI peak MB | goal (<= 3x, <= 400 MB) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(f"| {r['shape']} | " + (f"{r['mode']} | " if show_mode else "")
                     + f"{_fmt(r['api_median_s'])} | {_fmt(r['cli_median_s'])} | {_fmt(r['ratio'])} | "
                     f"{_fmt(r['api_peak_mb'], '{:.0f}')} | {_fmt(r['cli_peak_mb'], '{:.0f}')} | "
                     f"{'pass' if r['pass'] else 'FAIL'} |")
    return "\n".join(lines)


def run_stages(path: str, repeat: int) -> dict:
    sys.path[:0] = [HERE, ROOT]
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.capture.netparse import parse_segment

    def read_only():
        with open(path, "rb") as f:
            return sum(1 for _ in open_capture(f))

    def read_parse():
        n = 0
        with open(path, "rb") as f:
            for r in open_capture(f):
                if parse_segment(r.linktype, r.data) is not None:
                    n += 1
        return n

    def pipeline():
        d = Dissector()
        frames = 0
        with open(path, "rb") as f:
            for r in open_capture(f):
                for ev in d.feed(r):
                    if getattr(ev, "performative", None) is not None:
                        frames += 1
        d.finish()
        return frames

    out = {}
    for name, fn in (("read", read_only), ("read+parse", read_parse), ("pipeline", pipeline)):
        best, result = None, None
        for _ in range(repeat):
            t = time.perf_counter()
            result = fn()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        out[name] = {"best_s": _r(best, 6), "count": result}
    out["packets"] = out["read"]["count"]
    out["amqp_frames"] = out["pipeline"]["count"]
    return out


# --------------------------------------------------------------------------- output
def _fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


def _verdict(p):
    return "-" if p is None else ("pass" if p else "FAIL")


def _giga(n):
    return "-" if n is None else f"{n / 1e9:.2f} G"


def speed_table(rows: list[dict], show_mode: bool) -> str:
    show_shape = len({r.get("shape", "acked") for r in rows}) > 1
    show_instr = any("ours_instructions" in r for r in rows)
    head = ["command"] + (["capture"] if show_shape else []) + (["mode"] if show_mode else []) + [
        "ours CPU (median s)", "tshark CPU (median s)", "CPU ratio", "goal", "", "wall ratio", "our peak MB",
        "tshark peak MB"] + (
        ["ours instructions", "tshark instructions", "instruction ratio"] if show_instr else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ours = r["ours_cmd"].split(" -m amqp_dissect.cli ", 1)[-1].replace(" CAPTURE", "").replace("OUT.", "out.")
        th = r["tshark_cmd"].replace(" -r CAPTURE", "")
        cmd = f"`{ours}`"
        cells = [f"{cmd} vs `{th}`"] + ([r.get("shape", "acked")] if show_shape else []) + (
            [r["mode"]] if show_mode else []) + [
            _fmt(r["ours_median_cpu_s"]), _fmt(r["tshark_median_cpu_s"]), _fmt(r["cpu_ratio"], "{:.2f}x"),
            _fmt(r["goal"], "<= {:.1f}x"), _verdict(r["pass"]) if r["ok"] else "ERROR", _fmt(r["ratio"], "{:.2f}x"),
            _fmt(r["ours_peak_mb"], "{:.0f}"), _fmt(r["tshark_peak_mb"], "{:.0f}")] + (
            [_giga(r.get("ours_instructions")), _giga(r.get("tshark_instructions")),
             _fmt(r.get("instruction_ratio"), "{:.2f}x")] if show_instr else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def memory_table(rows: list[dict], verdicts: list[dict], show_mode: bool) -> str:
    scales = sorted({r["scale"] for r in rows})
    head = ["command"] + (["mode"] if show_mode else []) + [f"peak MB x{k}" for k in scales] + [
        f"s x{k}" for k in scales] + ["growth", "goal", ""]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in verdicts:
        rs = {r["scale"]: r for r in rows if (r["name"], r["mode"]) == (v["name"], v["mode"])}
        goal = []
        if v["goal_mb"] is not None:
            goal.append(f"<= {v['goal_mb']:.0f} MB")
        if v["flat"] is not None:
            goal.append(f"flat (<= {FLAT_TOLERANCE}x)")
        cells = [v["name"]] + ([v["mode"]] if show_mode else []) + [
            (_fmt(rs[k]["peak_mb"], "{:.0f}") if rs[k]["ok"] else "ERROR") if k in rs else "-" for k in scales] + [
            _fmt(rs[k]["s"]) if k in rs else "-" for k in scales] + [
            _fmt(v["growth"], "{:.2f}x"), ", ".join(goal) or "-", _verdict(v["pass"]) if v["ok"] else "ERROR"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def tshark_version(tshark: str | None) -> str | None:
    if not tshark:
        return None
    try:
        out = subprocess.run([tshark, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


# --------------------------------------------------------------------------- main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:12]))
    ap.add_argument("--connections", type=int, default=2, help="connections in the capture (default 2)")
    ap.add_argument("--messages", type=int, default=75000, help="messages per connection (default 75000)")
    ap.add_argument("--out", default=None,
                    help="capture path (default /tmp/amqp-bench/c{connections}-m{messages}.pcap); "
                         "reused when its sidecar <out>.json records the same parameters")
    ap.add_argument("--rebuild", action="store_true", help="build the capture even when a cached one matches")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help="capture shapes the pairs run on (comma-separated, from: " + ", ".join(SHAPES) + "; default "
                         "all): the same number of messages batched and segmented differently (see SHAPES); -j, "
                         "memory and stages use the first")
    ap.add_argument("--repeat", type=int, default=3, help="ours/tshark pairs per command (default 3)")
    ap.add_argument("--only", default=None,
                    help="comma-separated pairs to run, from: " + ", ".join(PAIRS) + f" (default: {','.join(DEFAULT_PAIRS)}; "
                         "'none' for no pairs)")
    ap.add_argument("--jobs", default="2",
                    help="also time " + " and ".join(JOBS_PAIRS) + " with -j N against -j 1 (the speed-up "
                         "-j 1 / -j N; default 2; 'none' to skip); only the pairs --only selects")
    ap.add_argument("--jobs-scales", default="1",
                    help="the captures of the -j rows: comma-separated replay counts of the capture (default 1: "
                         "the capture itself; 4: the same traffic four times, one bigger capture)")
    ap.add_argument("--scales", default="1,4,16",
                    help="memory scaling: comma-separated replay counts of the capture ('' or 'none' to skip)")
    ap.add_argument("--memory", default="report,deliveries-csv,deliveries-parquet",
                    help="commands measured on the scaled captures, from: " + ", ".join(MEMORY_CMDS))
    ap.add_argument("--scale-tshark", action="store_true", help="also measure tshark -Y amqp on each scaled capture")
    ap.add_argument("--api", default="deliveries",
                    help="the Python API's deliveries DataFrame against the CLI's parquet, on each shape's capture "
                         "(default; 'none' skips it)")
    ap.add_argument("--instructions", action="store_true",
                    help="also count the instructions of each pair (ours and tshark, once each, under valgrind's "
                         "callgrind: slow, but the same count on a busy machine) and print them beside the times")
    ap.add_argument("--stages", action="store_true", help="also time the in-process stages (read, parse, pipeline)")
    ap.add_argument("--cmd", default=None,
                    help="our command (shell words), e.g. 'amqp-dissect'; default: '<python> -m amqp_dissect.cli' from the repo root")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment for our commands (repeatable), e.g. AMQP_DISSECT_PURE_PYTHON=1")
    ap.add_argument("--modes", default="default",
                    help="comma-separated: default (environment as given), pure (AMQP_DISSECT_PURE_PYTHON=1); "
                         "'default,pure' runs both, paired with the same tshark runs")
    ap.add_argument("--tshark", default=shutil.which("tshark"), help="tshark binary (default: from PATH)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a run is killed")
    ap.add_argument("--json", dest="json_path", default=None, help="also write the JSON result to this file")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: {QUICK['connections']} connections x {QUICK['messages']} messages, "
                         f"scales {QUICK['scales']}, repeat {QUICK['repeat']} (explicit options still win)")
    args = ap.parse_args(argv)
    if args.api not in ("deliveries", "none"):
        ap.error("--api: deliveries or none")
    if args.quick:
        given = set(a.split("=", 1)[0] for a in (argv if argv is not None else sys.argv[1:]) if a.startswith("--"))
        for k, v in QUICK.items():
            if f"--{k}" not in given:
                setattr(args, k, v)
    if args.out is None:
        args.out = os.path.join(tempfile.gettempdir(), "amqp-bench", f"c{args.connections}-m{args.messages}.pcap")
    names = DEFAULT_PAIRS if args.only is None else [n for n in args.only.split(",") if n and n != "none"]
    bad = [n for n in names if n not in PAIRS]
    if bad:
        ap.error(f"unknown pair(s) {', '.join(bad)}; choose from {', '.join(PAIRS)}")
    args.pairs = names
    args.shape_list = [x for x in args.shapes.split(",") if x]
    bad = [x for x in args.shape_list if x not in SHAPES]
    if bad or not args.shape_list:
        ap.error(f"--shapes: choose from {', '.join(SHAPES)}")
    if args.jobs in ("", "none", "0", "1"):
        args.jobs_n = None
    else:
        try:
            args.jobs_n = int(args.jobs)
        except ValueError:
            ap.error("--jobs: a number of processes, or none")
    try:
        args.jobs_scale_list = sorted({int(k) for k in args.jobs_scales.split(",") if k.strip()})
    except ValueError:
        ap.error("--jobs-scales: comma-separated positive integers")
    if not args.jobs_scale_list or any(k < 1 for k in args.jobs_scale_list):
        ap.error("--jobs-scales: comma-separated positive integers")
    args.scale_list = sorted({int(k) for k in args.scales.split(",") if k.strip() and k != "none"})
    if any(k < 1 for k in args.scale_list):
        ap.error("--scales must be positive integers")
    args.memory_list = [n for n in args.memory.split(",") if n and n != "none"]
    bad = [n for n in args.memory_list if n not in MEMORY_CMDS]
    if bad:
        ap.error(f"unknown memory command(s) {', '.join(bad)}; choose from {', '.join(MEMORY_CMDS)}")
    args.mode_list = [m for m in args.modes.split(",") if m]
    bad = [m for m in args.mode_list if m not in MODES]
    if bad or not args.mode_list:
        ap.error(f"--modes: choose from {', '.join(MODES)}")
    env = {}
    for kv in args.env:
        if "=" not in kv:
            ap.error(f"--env expects KEY=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        env[k] = v
    args.env_map = env
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--build-capture"]:  # (internal: ensure_capture's child) PATH CONNECTIONS MESSAGES SHAPE
        path, connections, messages, shape = argv[1:5]
        print(json.dumps(build_capture(path, int(connections), int(messages), shape)))
        return 0
    if argv[:1] == ["--repeat-capture"]:  # (internal: ensure_scaled's child) SOURCE DESTINATION COPIES
        sys.path[:0] = [SUPPORT]
        from pcapbuild import repeat_pcap

        print(json.dumps(repeat_pcap(argv[1], argv[2], int(argv[3]))))
        return 0
    args = parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.rebuild:
        for p in [args.out] + [scaled_path(args.out, k) for k in args.scale_list] + [
                shape_path(args.out, x) for x in args.shape_list]:
            if os.path.exists(_sidecar(p)):
                os.remove(_sidecar(p))
    shaped = {x: ensure_capture(shape_path(args.out, x), args.connections, args.messages, log, x)
              for x in args.shape_list}
    base = shaped[args.shape_list[0]]
    scaled = [ensure_scaled(base, k, log) for k in args.scale_list] if args.memory_list else []

    if args.cmd:
        ours, cwd = shlex.split(args.cmd), None
    else:
        ours, cwd = [sys.executable, "-m", "amqp_dissect.cli"], ROOT
    if not args.tshark:
        log("tshark not found: our commands are timed alone")
    result = {
        "argv": ["tests/benchmarks/benchmark.py"] + (sys.argv[1:] if argv is None else list(argv)),
        "host": {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                 "tshark": tshark_version(args.tshark)},
        "ours": ours if args.cmd else ["python", "-m", "amqp_dissect.cli"],
        "env": args.env_map,
        "modes": args.mode_list,
        "repeat": args.repeat,
        "capture": {k: base[k] for k in ("path", "params", "packets", "bytes", "built")},
        "shapes": {x: {k: c[k] for k in ("path", "params", "packets", "bytes", "built")} for x, c in shaped.items()},
        "scaled": [{k: c[k] for k in ("path", "params", "packets", "bytes", "built")} for c in scaled],
    }
    with tempfile.TemporaryDirectory(prefix="amqp-bench-") as tmp:
        runner = Runner(ours, cwd, args.env_map, args.mode_list, args.tshark, args.timeout, tmp, log)
        pairs = []
        for x, c in shaped.items():
            pairs += run_pairs(runner, args.pairs, c["path"], args.repeat, x, args.instructions)
        jobs = []
        if args.jobs_n:
            for k in args.jobs_scale_list:
                cap = base if k == 1 else ensure_scaled(base, k, log)
                jobs += run_jobs(runner, args.pairs, cap["path"], args.repeat, args.jobs_n, k)
        mem_rows = run_memory(runner, args.memory_list, scaled, args.scale_tshark) if scaled else []
        api_rows = run_api(runner, shaped, args.repeat) if args.api != "none" else []
    verdicts = memory_verdicts(mem_rows) if mem_rows else []
    result["pairs"] = pairs
    result["jobs"] = jobs
    result["memory"] = {"rows": mem_rows, "verdicts": verdicts, "flat_tolerance": FLAT_TOLERANCE}
    result["api"] = {"rows": api_rows, "goals": API_GOALS}
    if args.stages:
        result["stages"] = run_stages(base["path"], args.repeat)
    result["errors"] = runner.errors

    show_mode = len(args.mode_list) > 1
    for x, c in shaped.items():
        print(f"capture ({x}): {c['params']['connections']} connections x {c['params']['messages']} messages, "
              f"{c['packets']} packets, {c['bytes'] / 1e6:.1f} MB; {result['host']['tshark'] or 'no tshark'}; "
              f"{result['host']['cpus']} CPUs")
    print(f"reproduce: python {shlex.join(result['argv'])}")
    if pairs:
        print()
        print(speed_table(pairs, show_mode))
    if jobs:
        print()
        print(jobs_table(jobs, show_mode))
    if mem_rows:
        print()
        print(memory_table(mem_rows, verdicts, show_mode))
    if api_rows:
        print()
        print(api_table(api_rows, show_mode))
    if args.stages:
        st = result["stages"]
        print()
        print(f"| stage | best s | packets/s | AMQP frames/s |\n|---|---|---|---|")
        for name in ("read", "read+parse", "pipeline"):
            s = st[name]["best_s"]
            s = max(s, 1e-6)
            print(f"| {name} | {s:.3f} | {st['packets'] / s:,.0f} | {st['amqp_frames'] / s:,.0f} |")
    print()
    line = json.dumps(result, sort_keys=True)
    if args.json_path:
        with open(args.json_path, "w") as f:
            f.write(line + "\n")
    print(line)
    return 1 if runner.errors else 0


if __name__ == "__main__":
    sys.exit(main())
