#!/usr/bin/env python3
"""Make the twin captures: two tcpdumps at once on the loopback on the same traffic.

Usage::

    python samples/twins/make_twins.py [--out samples/twins] [--only NAME ...] [--lossy-buffer KIB]

For every pair, ``<name>.pcap.gz`` is taken with a large kernel buffer (``tcpdump -B 65536``: it drops
nothing) and ``<name>.lossy.pcap.gz`` at the same time with a tiny one (``-B 1``): the kernel drops
packets of the lossy twin only.  ``<name>.truth.json`` holds what the client itself sent, received and
settled (never anything read from a capture) and, in ``capture_stats``, tcpdump's own counts of both twins
("packets captured", "received by filter", "dropped by kernel").  The clients (``proton_twin.py``,
``rhea_twin.js`` and ``uamqp_twin.py``) run the same scenario (``twin_plan.py``) as far as the library and
the broker allow (samples/README.md says where they differ).  Brokers: RabbitMQ as ``samples/generate.py``
handles it (its private node, or an AMQP 1.0 broker already on 127.0.0.1:5672), and for the ``_protonc``
pairs the broker example of Qpid Proton C (``apt-get install libqpid-proton11-dev-examples
libqpid-proton11-dev``), built here with gcc and run on 127.0.0.1:5673.  tcpdump and clean-up are those of
``generate.py``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "messages"))
sys.path.insert(0, str(HERE))
import generate as base  # noqa: E402  (samples/generate.py: Broker, Capture, log, tool_versions)
import twin_plan as plan  # noqa: E402

LOSSLESS_ARGS = ["-B", "65536", "-s", "0"]
RABBITMQ_PORT = base.AMQP_PORT


PROTON_BROKER_PORT = 5673  # the Proton C example broker listens here (RabbitMQ keeps 5672)
PROTON_BROKER_SOURCE = Path("/usr/share/proton/examples/c")  # Debian: libqpid-proton11-dev-examples


@dataclass
class TwinPair:
    name: str
    client: str  # "proton", "rhea" or "uamqp"
    description: str
    broker: str = "rabbitmq"  # or "proton-c": the Proton C example broker (SASL ANONYMOUS, settles all it sends)
    client_args: tuple = ()  # more arguments for the client (a burst: --small N)


PAIRS = [
    TwinPair("proton_rabbitmq", "proton", "python-qpid-proton against RabbitMQ 3.10"),
    TwinPair("rhea_rabbitmq", "rhea", "rhea 3 (node) against RabbitMQ 3.10"),
    TwinPair("proton_rabbitmq_burst", "proton", "python-qpid-proton against RabbitMQ 3.10, a burst of 6,000 small "
             "messages (RabbitMQ lets a sender send 65,535 at once)", client_args=("--small", "6000")),
    TwinPair("proton_protonc", "proton", "python-qpid-proton against the Qpid Proton C 0.37 example broker",
             "proton-c"),
    TwinPair("rhea_protonc", "rhea", "rhea 3 (node) against the Qpid Proton C 0.37 example broker", "proton-c"),
    TwinPair("uamqp_protonc", "uamqp", "uamqp 1.6 (Azure's C uAMQP) against the Qpid Proton C 0.37 example broker",
             "proton-c"),
]


class ProtonCBroker:
    """The broker example of Qpid Proton C, built with gcc from the Debian examples package and run in the
    work folder on 127.0.0.1:PROTON_BROKER_PORT; stopped by pid."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        exe = self.workdir / "proton-c-broker"
        if not exe.exists():
            for f in ("broker.c", "thread.h"):
                shutil.copy(PROTON_BROKER_SOURCE / f, self.workdir / f)
            libdir = Path("/usr/lib/x86_64-linux-gnu")
            subprocess.run(["gcc", "-O1", "-o", str(exe), str(self.workdir / "broker.c"), "-lqpid-proton",
                            str(next(libdir.glob("libqpid-proton-proactor.so.*"))), "-lpthread"], check=True)
        self.proc = subprocess.Popen([str(exe), "127.0.0.1", str(PROTON_BROKER_PORT)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        lines = []  # (it first says it has no TLS certificate: the pairs use none)
        while not lines or "listening" not in lines[-1]:
            lines.append(self.proc.stdout.readline())
            if not lines[-1]:
                raise RuntimeError(f"the Proton C broker did not start: {''.join(lines)}")
        base.log(f"Started the Proton C example broker (pid {self.proc.pid}) on 127.0.0.1:{PROTON_BROKER_PORT}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            base.log(f"Stopped the Proton C example broker (pid {self.proc.pid})")
            self.proc = None


def client_command(pair: TwinPair, queue: str, truth_out: Path) -> tuple[list[str], dict]:
    if pair.broker == "rabbitmq":
        args = ["127.0.0.1", str(base.AMQP_PORT), f"/queue/{queue}", str(truth_out)]
    else:
        args = ["127.0.0.1", str(PROTON_BROKER_PORT), queue, str(truth_out), "--anonymous"]
    args += pair.client_args
    if pair.client == "proton":
        return [sys.executable, str(HERE / "proton_twin.py"), *args], dict(os.environ)
    if pair.client == "uamqp":
        return [sys.executable, str(HERE / "uamqp_twin.py"), *args], dict(os.environ)
    from other_stacks import _node_path  # npm install rhea into the work folder when NODE_PATH has none
    return ["node", str(HERE / "rhea_twin.js"), *args], dict(os.environ, NODE_PATH=_node_path(truth_out.parent))


def gzip_to(src: Path, dest: Path) -> None:
    with open(src, "rb") as f, gzip.GzipFile(dest, "wb", mtime=0) as g:
        shutil.copyfileobj(f, g)


def run_pair(pair: TwinPair, broker, out: Path, workdir: Path, tools: dict, lossy_kib: int) -> dict:
    base.log(f"== twin pair {pair.name}")
    queue = f"amqpdissect.twins.{pair.name}"
    if pair.broker == "rabbitmq":
        broker.delete_queues([queue])
    # (Capture filters on generate.py's AMQP_PORT: the Proton C broker's pairs are captured on its port)
    base.AMQP_PORT = PROTON_BROKER_PORT if pair.broker == "proton-c" else RABBITMQ_PORT
    lossless = base.Capture(workdir, pair.name, LOSSLESS_ARGS)
    lossy = base.Capture(workdir, pair.name + ".lossy", ["-B", str(lossy_kib), "-s", "0"])
    lossless.start()
    lossy.start()
    raw = workdir / f"{pair.name}.client.json"
    cmd, env = client_command(pair, queue, raw)
    try:
        r = subprocess.run(cmd, env=env, timeout=120, capture_output=True, text=True)
    finally:
        time.sleep(base.SETTLE_DELAY + 2.0)  # tcpdump -w hands packets over in blocks: wait for the last ones
        lossy.stop()
        lossless.stop()
        base.AMQP_PORT = RABBITMQ_PORT
    if r.returncode != 0:
        raise RuntimeError(f"{pair.name}: client failed: {r.stdout}{r.stderr}")
    truth = json.loads(raw.read_text())
    if "totals" not in truth:  # (rhea_twin.js writes the per-link records only: sum them as proton_twin.py does)
        plan.finish_truth(truth)
    truth.update({
        "schema": "twins/1", "name": pair.name, "description": pair.description,
        "capture": f"{pair.name}.pcap.gz", "lossy_capture": f"{pair.name}.lossy.pcap.gz",
        "capture_stats": {
            "lossless": {"tcpdump_args": LOSSLESS_ARGS, **lossless.stats},
            "lossy": {"tcpdump_args": lossy.extra_args, **lossy.stats},
        },
        "tools": tools,
    })
    out.mkdir(parents=True, exist_ok=True)
    gzip_to(lossless.pcap, out / truth["capture"])
    gzip_to(lossy.pcap, out / truth["lossy_capture"])
    (out / f"{pair.name}.truth.json").write_text(json.dumps(truth, separators=(",", ":")) + "\n")
    st = truth["capture_stats"]
    base.log(f"  wrote {pair.name}: lossless {st['lossless']}, lossy {st['lossy']}")
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE), help="output directory (default: samples/twins/)")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=[p.name for p in PAIRS])
    ap.add_argument("--lossy-buffer", type=int, default=1, metavar="KIB", help="tcpdump -B of the lossy twin")
    args = ap.parse_args(argv)
    base.check_requirements()
    tools = base.tool_versions()
    workdir = Path(tempfile.mkdtemp(prefix="amqpdissect-twins-"))
    workdir.chmod(0o777)  # tcpdump drops root privileges to user tcpdump before writing
    pairs = [p for p in PAIRS if not args.only or p.name in args.only]
    brokers = {"rabbitmq": base.Broker(), "proton-c": ProtonCBroker(workdir)}
    try:
        for kind in dict.fromkeys(p.broker for p in pairs):
            brokers[kind].start()
        for pair in pairs:
            run_pair(pair, brokers[pair.broker], Path(args.out), workdir, tools, args.lossy_buffer)
    finally:
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
