"""Issue 24, item 4: times are exact integers from the reader to every output.

Oracles: tshark's own ``frame.time_epoch`` (the capture's digits, as Wireshark reads them) for
every packet of a microsecond pcap, a nanosecond pcap and a nanosecond pcapng whose times have
nanoseconds a float of epoch seconds cannot hold; the deliveries table's times and latencies
are checked against tshark's times of the packets the table names (its first, settled and
outcome packets), differences taken on Python's decimals."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal

import pytest
from pcapbuild import nanosecond_captures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
TSHARK = shutil.which("tshark")
EDITCAP = shutil.which("editcap")
# skipped (with the reason) only outside CI: under CI they run and fail without the tools
needs_tshark = pytest.mark.skipif((TSHARK is None or EDITCAP is None) and not os.environ.get("CI"),
                                  reason="tshark / editcap are not installed (tests/install-deps.sh installs them)")
CLI = [sys.executable, "-m", "amqp_dissect.cli"]
NS = 1_000_000_000


def cli(*args) -> str:
    r = subprocess.run(CLI + [str(a) for a in args], capture_output=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """outcomes.pcap as it is (microseconds), as a nanosecond pcap whose times carry 1..999 ns
    more, and that as pcapng (editcap: an interface with if_tsresol 10^-9)."""
    ns_pcap, ns_pcapng = nanosecond_captures(OUTCOMES, tmp_path_factory.mktemp("exact"),
                                             lambda i: (i * 389 + 7) % 1000, EDITCAP or "editcap")
    return {"us": OUTCOMES, "ns-pcap": str(ns_pcap), "ns-pcapng": str(ns_pcapng)}


def _tshark_times(path) -> dict:
    """packet -> tshark's frame.time_epoch text."""
    r = subprocess.run([TSHARK or "tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e",
                        "frame.time_epoch"], capture_output=True, text=True, check=True)
    out = {}
    for line in r.stdout.splitlines():
        n, t = line.split("\t")
        out[int(n)] = t
    return out


def _ns(text: str) -> int:
    return int(Decimal(text) * NS)


@needs_tshark
@pytest.mark.parametrize("kind", ["us", "ns-pcap", "ns-pcapng"])
def test_every_packet_time_is_tsharks_to_the_last_digit(captures, kind):
    from amqp_dissect.capture.pcap import open_capture

    theirs = _tshark_times(captures[kind])
    with open(captures[kind], "rb") as f:
        ours = {rec.index: rec.ts for rec in open_capture(f)}
    assert set(ours) == set(theirs)
    for n, t in theirs.items():
        assert type(ours[n]) is int and ours[n] == _ns(t), (n, ours[n], t)
    # and as -T fields prints them: tshark's text, digit for digit
    fields = cli("frames", "-T", "fields", "-e", "packet", "-e", "frame.time_epoch", captures[kind])
    for line in fields.splitlines():
        n, t = line.split("\t")
        assert t == theirs[int(n)], (n, t, theirs[int(n)])


@needs_tshark
@pytest.mark.parametrize("kind", ["us", "ns-pcap", "ns-pcapng"])
def test_table_times_and_latencies_are_exact(captures, kind, tmp_path):
    """Every time column of the deliveries table is the time tshark gives the packet the table
    names beside it, to the nanosecond (Parquet: typed timestamp[ns, UTC]); every latency is the
    float nearest the exact decimal difference of those times."""
    import pyarrow.parquet as pq

    theirs = _tshark_times(captures[kind])
    out = tmp_path / "d.parquet"
    cli("deliveries", "--format", "parquet", "-o", out, captures[kind])
    t = pq.read_table(out)
    assert str(t.schema.field("first_time").type) == "timestamp[ns, tz=UTC]"
    rows = t.to_pylist()
    ints = t.select(["first_time", "settled_time", "outcome_time"]).cast(
        __import__("pyarrow").schema([("first_time", "int64"), ("settled_time", "int64"),
                                      ("outcome_time", "int64")])).to_pylist()
    assert rows
    for r, tn in zip(rows, ints):
        assert tn["first_time"] == _ns(theirs[r["first_packet"]])
        if r["settled_packet"] is not None:
            assert tn["settled_time"] == _ns(theirs[r["settled_packet"]])
            exact = Decimal(theirs[r["settled_packet"]]) - Decimal(theirs[r["first_packet"]])
            assert r["settlement_latency"] == float(exact), (r["settlement_latency"], exact)
        if r["outcome_packet"] is not None:
            exact = Decimal(theirs[r["outcome_packet"]]) - Decimal(theirs[r["first_packet"]])
            assert r["outcome_latency"] == float(exact)
    # csv: the latency as the float's shortest text (no binary noise) and the ISO times with the
    # capture's digits
    text = cli("deliveries", "--format", "csv", captures[kind])
    head, *lines = text.splitlines()
    cols = head.split(",")
    for line, r in zip(lines, rows):
        cells = dict(zip(cols, line.split(",")))  # (no quoted commas in these columns of this sample)
        assert cells["first_time"].endswith("Z")
        frac = cells["first_time"][:-1].split(".")[1]
        want = theirs[r["first_packet"]].split(".")[1]  # (tshark: nine digits)
        digits = 6 if kind == "us" or want.endswith("000") else 9
        assert frac == want[:digits]
        if r["settled_packet"] is not None:
            assert cells["settlement_latency"] == repr(r["settlement_latency"])
            assert len(cells["settlement_latency"]) <= 12  # e.g. 0.000892, never 0.00089192390441895


def test_a_latency_is_the_difference_of_integers():
    """Two times a double cannot tell apart at epoch scale (1 ns apart near 1.8e9 s) still give
    a latency of one nanosecond, and 796 µs is 0.000796 exactly as a decimal reads it."""
    from amqp_dissect.times import decimal, seconds

    t1 = 1_795_332_659_930_830_000
    assert float(t1 / NS) == float((t1 + 1) / NS)  # (what a float of epoch seconds would lose)
    assert seconds((t1 + 1) - t1) == 1e-9
    assert seconds((t1 + 796_000) - t1) == 0.000796
    assert decimal(t1, 9) == "1795332659.930830000" and decimal(t1, 6) == "1795332659.930830"
    assert decimal(-1_500_000_000, 9) == "-1.500000000"


@needs_tshark
def test_report_header_and_jsonl_carry_the_exact_times(captures):
    theirs = _tshark_times(captures["ns-pcapng"])
    first, last = min(theirs), max(theirs)
    rep = json.loads(cli("report", "--format", "json", captures["ns-pcapng"]))
    cap = rep["capture"]
    assert cap["start"] == _ns(theirs[first]) and cap["end"] == _ns(theirs[last]) and cap["digits"] == 9
    text = cli("report", captures["ns-pcapng"])
    head = next(x for x in text.splitlines() if x.startswith("capture: "))
    assert theirs[first].split(".")[1] in head and theirs[last].split(".")[1] in head
    for line in io.StringIO(cli("frames", "--format", "jsonl", captures["ns-pcapng"])):
        o = json.loads(line)
        if o.get("packet") is not None and o.get("time_ns") is not None:
            assert o["time_ns"] == _ns(theirs[o["packet"]])
            assert o["time"] == float(Decimal(theirs[o["packet"]]))


@needs_tshark
@pytest.mark.parametrize("kind", ["us", "ns-pcapng"])
def test_verbose_frame_layer_times_are_exact(captures, kind):
    """``frames -V``: each packet's Epoch Time is tshark's, to its last non-zero digit group (six
    decimals for a microsecond time, nine for one with nanoseconds)."""
    theirs = _tshark_times(captures[kind])
    packet = None
    seen = 0
    for line in cli("frames", "-V", captures[kind]).splitlines():
        if line.startswith("Frame ") and ":" in line:
            packet = int(line.split()[1].rstrip(":"))
        elif line.strip().startswith("Epoch Time: "):
            text = line.strip()[len("Epoch Time: "):].split()[0]
            want = theirs[packet]
            assert text == (want[:-3] if want.endswith("000") else want), (packet, text, want)
            seen += 1
    assert seen > 0
