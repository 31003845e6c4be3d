"""Frames after a hole are reported at the packet that carried their last byte (issue 24 item 3),
checked against tshark packet by packet.

tshark reports a reassembled PDU at the segment that completed it.  Each sample gets three
packets deleted (three seeds; the same as ``editcap IN OUT N1 N2 N3``, written here with dpkt),
and ``tshark -T fields -e frame.number -e amqp.performative`` is compared with our frames: at every
packet where tshark decodes AMQP performatives, ours are the same ones, in the same order.  (After
some holes tshark waits for the missing bytes and decodes nothing more of that direction; we
resynchronise and go on, so packets tshark leaves empty are not compared.)
tests/data/plain_send_receive_deleted_8_10_28.pcap was made with ``editcap -F pcap
samples/plain_send_receive.pcap tests/data/plain_send_receive_deleted_8_10_28.pcap 8 10 28``; on
it every packet agrees both ways.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import subprocess

import dpkt
import pytest

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.amqp.spec import COMPOSITES
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples")
NAMES = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(SAMPLES, "*.pcap")))


@pytest.fixture(scope="module", autouse=True)
def _tshark():
    if shutil.which("tshark") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but tshark is not installed; tests/install-deps.sh installs it", pytrace=False)
        pytest.skip("tshark is not installed: the oracle of these tests")


def ours(path):
    """packet -> the descriptor codes of the AMQP performatives we report at it, in order."""
    d = Dissector()
    evs = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            evs += d.feed(rec)
    evs += d.finish()
    out: dict = {}
    for ev in evs:
        if isinstance(ev, Frame) and ev.type == 0 and ev.pname:
            out.setdefault(ev.packet, []).append(COMPOSITES[ev.pname].descriptor_code)
    return out


def tshark(path):
    r = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.number", "-e", "amqp.performative"],
                       capture_output=True, text=True, timeout=120, check=True)
    out: dict = {}
    for line in r.stdout.splitlines():
        n, _, perf = line.partition("\t")
        if perf:
            out[int(n)] = [int(x) for x in perf.split(",")]
    return out


def delete(src, dst, numbers):
    """``editcap src dst N...``: the capture without packets ``numbers`` (1-based)."""
    with open(src, "rb") as f:
        r = dpkt.pcap.Reader(f)
        packets = list(r)
        lt = r.datalink()
    with open(dst, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=lt)
        for i, (ts, buf) in enumerate(packets, 1):
            if i not in numbers:
                w.writepkt(buf, ts)
    return len(packets)


@pytest.mark.parametrize("name", NAMES)
def test_frames_after_holes_are_where_tshark_reports_them(name, tmp_path):
    src = os.path.join(SAMPLES, name + ".pcap")
    with open(src, "rb") as f:
        n = len(list(dpkt.pcap.Reader(f)))
    compared = 0
    for seed in range(3):
        gone = set(random.Random(seed).sample(range(5, n + 1), min(3, n - 4)))
        p = str(tmp_path / f"deleted{seed}.pcap")
        delete(src, p, gone)
        a, b = ours(p), tshark(p)
        wrong = {k: (a.get(k), v) for k, v in b.items() if a.get(k) != v}
        assert not wrong, (sorted(gone), wrong)  # packet: (ours, tshark's)
        compared += len(b)
    assert compared > 0 or not tshark(src)  # (sasl_auth_failure has no AMQP performative at all)


def test_the_kept_capture_agrees_on_every_packet():
    p = os.path.join(os.path.dirname(HERE), "data", "plain_send_receive_deleted_8_10_28.pcap")
    a, b = ours(p), tshark(p)
    assert a == b
    # the transfers the server sent behind the hole (packet 28 of the sample deleted): at their own
    # packets, not at the client's ACK that declared the hole
    assert [k for k, v in sorted(b.items()) if 20 in v and k >= 25] == list(range(25, 33))
