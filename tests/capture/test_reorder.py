"""Reordering is not loss (issue 24 item 2): the real samples with adjacent packets swapped.

A multi-queue NIC captures some adjacent packets in the wrong order, each with its own time.
Here each sample gets its adjacent pairs swapped (dpkt; each packet keeps its timestamp): every
pair on its own, and ten pairs at once.  The oracle is the unswapped sample: the same
deliveries with the same outcomes and settlement times, no TCP gap, no violation it lacks, and
the report the same.  tests/data/plain_send_receive_10swaps.pcap is one such capture, made by
``python tests/capture/test_reorder.py samples/plain_send_receive.pcap
tests/data/plain_send_receive_10swaps.pcap`` (seed 24).
"""

from __future__ import annotations

import glob
import os
import random
import re
import sys

import dpkt
import pytest

from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples")
NAMES = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(SAMPLES, "*.pcap")))


def _read(path):
    with open(path, "rb") as f:
        r = dpkt.pcap.Reader(f)
        return list(r), r.datalink()


def _write(path, packets, linktype):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=linktype)
        for ts, buf in packets:
            w.writepkt(buf, ts)


def swapped(packets, pairs):
    """``packets`` with each pair (i, i+1) of ``pairs`` (0-based) exchanged, timestamps kept."""
    out = list(packets)
    for i in pairs:
        out[i], out[i + 1] = out[i + 1], out[i]
    return out


def ten_pairs(n, seed):
    """Ten disjoint adjacent pairs of n packets (fewer when n is small), chosen by ``seed``."""
    rnd = random.Random(seed)
    free = list(range(n - 1))
    rnd.shuffle(free)
    used: set = set()
    pairs = []
    for i in free:
        if len(pairs) == 10:
            break
        if i in used or i + 1 in used:
            continue
        used |= {i, i + 1}
        pairs.append(i)
    return sorted(pairs)


def _summary(a):
    """The deliveries (side, link, channel, id, outcome, settled time), the gaps and the violations'
    messages, from the Analyzer's rows of the tables (no DataFrame for each of the hundreds of
    swapped captures a test reads; times as the rows hold them: integer nanoseconds)."""
    an = a.analyzer
    rows = sorted((r["sender_side"], r["link"], r["channel"], r["delivery_id"], r["outcome"] or "",
                   str(r["settled_time"])) for r in an.delivery_rows())
    gaps = sum(c["gaps_client"] + c["gaps_server"] for c in an.connection_rows())
    return rows, gaps, sorted(v["message"] for v in an.violation_rows())


def _report(a, perm=None):
    """The report after its file line; with ``perm`` (swapped position -> original position, 0-based),
    its packet numbers those of the original capture."""
    text = render_text(build_report(a.analyzer)).split("\n", 3)[3]
    if perm is not None:
        def orig(m):
            return str(perm[int(m.group(0)) - 1] + 1)
        text = re.sub(r"(?:(?<=packet )|(?<=packets ))\d+( to \d+)?", lambda m: re.sub(r"\d+", orig, m.group(0)),
                      text)
    return text


@pytest.fixture(scope="module")
def base():
    out = {}
    for n in NAMES:
        a = read_analysis(os.path.join(SAMPLES, n + ".pcap"))
        out[n] = (_summary(a), _report(a))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_every_adjacent_swap_changes_nothing(name, base, tmp_path):
    packets, lt = _read(os.path.join(SAMPLES, name + ".pcap"))
    (rows, gaps, violations), _ = base[name]
    assert gaps == 0
    for i in range(len(packets) - 1):
        p = tmp_path / f"swap{i}.pcap"
        _write(p, swapped(packets, [i]), lt)
        got_rows, got_gaps, got_violations = _summary(read_analysis(str(p)))
        assert got_gaps == 0, i
        assert got_rows == rows, i
        assert got_violations == violations, i


@pytest.mark.parametrize("seed", [24, 7, 1])
@pytest.mark.parametrize("name", NAMES)
def test_ten_adjacent_swaps_give_the_same_report(name, seed, base, tmp_path):
    packets, lt = _read(os.path.join(SAMPLES, name + ".pcap"))
    p = tmp_path / "swapped.pcap"
    pairs = ten_pairs(len(packets), seed)
    _write(p, swapped(packets, pairs), lt)
    a = read_analysis(str(p))
    summary, report = base[name]
    assert _summary(a) == summary
    # the same report, packet numbers mapped back to the original capture's
    assert _report(a, swapped(list(range(len(packets))), pairs)) == report


def test_the_kept_capture_is_the_sample_with_ten_swaps():
    packets, lt = _read(os.path.join(SAMPLES, "plain_send_receive.pcap"))
    kept, _ = _read(os.path.join(os.path.dirname(HERE), "data", "plain_send_receive_10swaps.pcap"))
    want = swapped(packets, ten_pairs(len(packets), 24))
    assert [(ts, bytes(b)) for ts, b in kept] == [(ts, bytes(b)) for ts, b in want]
    assert kept != packets


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    pk, link = _read(src)
    _write(dst, swapped(pk, ten_pairs(len(pk), 24)), link)
    print(f"{dst}: pairs {ten_pairs(len(pk), 24)} (0-based) swapped")
