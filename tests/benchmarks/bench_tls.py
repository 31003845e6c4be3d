#!/usr/bin/env python3
"""Benchmark: the cost of TLS decryption (a script, not a test).

    python tests/benchmarks/bench_tls.py [--sample samples/large_message.pcap] [--repeat 5] [--tls 1.2|1.3]
                              [--suite TLS_AES_128_GCM_SHA256 | --cipher ECDHE-RSA-AES128-GCM-SHA256]

Makes a TLS capture of the sample's AMQP stream on the loopback (tests/support/tlscap.py:
needs root and tcpdump), then times the Dissector over

* the plain sample,
* the plain sample with an (unrelated) key log given: plain streams must not get slower,
* the TLS capture decrypted with its key log,

each read into memory once and dissected ``--number`` times per repeat (best of
``--repeat``, process CPU time).  Prints a table and one JSON line with the
times per AMQP frame and the ratio decrypted / plain.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))  # tlscap


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", default=os.path.join(ROOT, "samples", "large_message.pcap"))
    ap.add_argument("--tls", default="1.3")
    ap.add_argument("--suite")
    ap.add_argument("--cipher")
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)

    import tlscap
    import amqp_dissect
    from amqp_dissect.amqp.framing import Frame
    from amqp_dissect.capture.keylog import KeyLog
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector

    with tempfile.TemporaryDirectory() as tmp:
        pcap, keys = os.path.join(tmp, "tls.pcap"), os.path.join(tmp, "tls.keys")
        tlscap.make_capture(a.sample, pcap, keys, tls=a.tls, suite=a.suite, cipher=a.cipher)
        with open(keys) as f:
            keylog = KeyLog(f.read())
        with open(pcap, "rb") as f:
            tls_records = list(open_capture(f))
    with open(a.sample, "rb") as f:
        plain_records = list(open_capture(f))
    port = tlscap_port(tls_records)

    def once(records, kl, ports=()):
        d = Dissector(keylog=kl, extra_ports=ports)
        frames = 0
        for r in records:
            for ev in d.feed(r):
                frames += type(ev) is Frame
        for ev in d.finish():
            frames += type(ev) is Frame
        return frames

    def best(records, kl, ports=()):
        frames = once(records, kl, ports)
        times = []
        for _ in range(a.repeat):
            t0 = time.process_time()
            for _ in range(a.number):
                once(records, kl, ports)
            times.append((time.process_time() - t0) / a.number)
        return min(times), frames

    plain, n_plain = best(plain_records, None)
    plain_kl, _ = best(plain_records, keylog)
    dec, n_dec = best(tls_records, keylog, (port,))
    assert n_plain == n_dec, (n_plain, n_dec)
    mode = "compiled" if amqp_dissect.compiled_modules() else "pure Python"
    rows = [("plain", plain), ("plain, key log given", plain_kl), ("TLS decrypted", dec)]
    print(f"{os.path.basename(a.sample)}: {n_plain} AMQP frames, {len(plain_records)} plain / "
          f"{len(tls_records)} TLS packets ({mode})")
    for name, t in rows:
        print(f"  {name:22s} {t * 1e3:9.3f} ms per pass  {t / n_plain * 1e6:8.2f} us/frame  x{t / plain:.2f}")
    print(json.dumps({"sample": os.path.basename(a.sample), "frames": n_plain, "plain_s": plain,
                      "plain_keylog_s": plain_kl, "decrypted_s": dec, "ratio": dec / plain,
                      "tls": a.tls, "suite": a.suite or a.cipher}))


def tlscap_port(records) -> int:
    from amqp_dissect.capture.netparse import parse_segment

    for r in records:
        seg = parse_segment(r.linktype, r.data)
        if seg is not None:
            return seg.dport
    raise SystemExit("empty TLS capture")


if __name__ == "__main__":
    main()
