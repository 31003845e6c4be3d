#!/usr/bin/env python3
"""Cross-check the sample captures against their ground truth with tshark (an independent dissector).

Usage::

    python samples/check_with_tshark.py [--dir samples] [NAME ...]

For every ``<name>.pcap`` with a ``<name>.truth.json`` beside it, tshark's AMQP 1.0
dissector splits each TCP connection into frames; per connection and direction
the ordered list of ``"performative:channel"`` must equal the truth's
``frames_sent`` / ``frames_received`` (the client's own protocol-engine log).
Also checked: number of TCP connections, server endpoint, SYN and FIN/RST seen.
Exits 1 on any mismatch.  Needs tshark (apt-get install -y tshark).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

PERFORMATIVES = {16: "open", 17: "begin", 18: "attach", 19: "flow", 20: "transfer", 21: "disposition",
                 22: "detach", 23: "end", 24: "close"}
SASL = {64: "sasl-mechanisms", 65: "sasl-init", 66: "sasl-challenge", 67: "sasl-response", 68: "sasl-outcome"}


def _pairs(pairs):
    return pairs  # keep duplicate keys (one "amqp" layer per frame)


def _get(pairs, key):
    for k, v in pairs:
        if k == key:
            return v
    return None


def tshark_frames(pcap: Path) -> dict:
    """-> {stream: {"client": (ip, port), "server": (ip, port), "c2s": [...], "s2c": [...], "syn": bool, "fin": bool}}"""
    out = subprocess.run(["tshark", "-r", str(pcap), "-T", "json", "-J", "amqp tcp ip ipv6"],
                         capture_output=True, text=True, check=True).stdout
    packets = json.loads(out, object_pairs_hook=_pairs) if out.strip() else []
    streams: dict = {}
    for pkt in packets:
        layers = _get(_get(pkt, "_source"), "layers")
        tcp = _get(layers, "tcp")
        ip = _get(layers, "ip") or _get(layers, "ipv6")
        src = _get(ip, "ip.src") or _get(ip, "ipv6.src")
        dst = _get(ip, "ip.dst") or _get(ip, "ipv6.dst")
        sport, dport = int(_get(tcp, "tcp.srcport")), int(_get(tcp, "tcp.dstport"))
        st = streams.setdefault(int(_get(tcp, "tcp.stream")), {"c2s": [], "s2c": [], "syn": False, "fin": False})
        to_server = dport == 5672
        st["client"] = (src, sport) if to_server else (dst, dport)
        st["server"] = (dst, dport) if to_server else (src, sport)
        flags = int(_get(tcp, "tcp.flags"), 16)
        if flags & 0x02:
            st["syn"] = True
        if flags & 0x05:  # FIN or RST
            st["fin"] = True
        for k, amqp in layers:
            if k != "amqp" or not isinstance(amqp, list):
                continue
            if _get(amqp, "amqp.init.protocol") is not None:
                continue
            length = _get(amqp, "amqp.length")
            if length is None:
                continue
            ch = _get(amqp, "amqp.channel") or "0"
            perf = _get(amqp, "amqp.performative")
            sasl = _get(amqp, "amqp.sasl.method")
            if perf is not None:
                name = PERFORMATIVES.get(int(perf), f"perf-{perf}")
            elif sasl is not None:
                name = SASL.get(int(sasl), f"sasl-{sasl}")
            elif int(length) == 8:
                name = "empty"
            else:
                name = "?"
            st["c2s" if to_server else "s2c"].append(f"{name}:{int(ch)}")
    return streams


def check(pcap: Path, truth_path: Path) -> list[str]:
    truth = json.loads(truth_path.read_text())
    streams = tshark_frames(pcap)
    errors = []
    if len(streams) != truth["connection_count"]:
        errors.append(f"{len(streams)} TCP connections in capture, truth has {truth['connection_count']}")
    for idx, (conn, (sid, st)) in enumerate(zip(truth["connections"], sorted(streams.items()))):
        host, port = st["server"]
        server = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if server != conn["server"]:
            errors.append(f"conn {idx}: server {server} != truth {conn['server']}")
        if not st["syn"] or not st["fin"]:
            errors.append(f"conn {idx}: SYN seen={st['syn']} FIN/RST seen={st['fin']}")
        for direction, key in (("c2s", "frames_sent"), ("s2c", "frames_received")):
            if st[direction] != conn[key]:
                errors.append(f"conn {idx} {key}: tshark {len(st[direction])} frames {st[direction][:12]}... "
                              f"!= truth {len(conn[key])} frames {conn[key][:12]}...")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(Path(__file__).resolve().parent))
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if not shutil.which("tshark"):
        sys.exit("tshark not found: apt-get install -y tshark")
    d = Path(args.dir)
    names = args.names or sorted(p.name[:-len(".truth.json")] for p in d.glob("*.truth.json"))
    bad = 0
    for n in names:
        errs = check(d / f"{n}.pcap", d / f"{n}.truth.json")
        print(f"{n}: {'OK' if not errs else 'MISMATCH'}")
        for e in errs:
            print("   " + e)
        bad += bool(errs)
    print(f"{len(names) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
