"""amqp_dissect.pipelines.archive.split / ``amqp-dissect split``: rotated pcap parts that read back as the original."""

from __future__ import annotations

import glob
import gzip
import os

import pytest

from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.pipelines.archive.split import split_capture

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
LARGE = os.path.join(ROOT, "samples", "large_message.pcap")


def records(path):
    with open(path, "rb") as f:
        r = open_capture(f)
        out = [(x.ts, x.linktype, x.data, x.orig_len) for x in r]
        assert r.error is None
        return out


def all_records(paths):
    return [r for p in paths for r in records(p)]


@pytest.fixture
def cli():
    from amqp_dissect.cli import main as m

    return m


@pytest.mark.parametrize("gz", [False, True])
def test_split_by_packets_reads_back_identically(tmp_path, gz):
    for sample in SAMPLES:
        parts = split_capture(sample, str(tmp_path / os.path.basename(sample)), packets=7, gzip_output=gz)
        assert parts == sorted(parts) and parts.error is None
        assert all(p.endswith(".pcap.gz" if gz else ".pcap") for p in parts)
        n = len(records(sample))
        assert parts.records == n and len(parts) == -(-n // 7)
        assert [len(records(p)) for p in parts[:-1]] == [7] * (len(parts) - 1)
        assert all_records(parts) == records(sample)
        if gz:
            with open(parts[0], "rb") as f:
                assert f.read(2) == b"\x1f\x8b"


def test_split_by_bytes_like_tcpdump_C(tmp_path):
    parts = split_capture(LARGE, str(tmp_path), bytes=20000)
    assert len(parts) > 3
    for p in parts:
        size = os.path.getsize(p)
        assert size <= 20000 or len(records(p)) == 1  # one record larger than the limit gets a file of its own
    assert all_records(parts) == records(LARGE)


def test_split_by_seconds_like_tcpdump_G(tmp_path):
    sample = os.path.join(ROOT, "samples", "outcomes.pcap")
    parts = split_capture(sample, str(tmp_path), seconds=0.05)
    assert len(parts) > 2
    for p in parts:
        ts = [r[0] for r in records(p)]
        assert max(ts) - min(ts) < 50_000_000  # (nanoseconds)
    assert all_records(parts) == records(sample)


def test_parts_analyse_like_the_original(tmp_path):
    parts = []
    for sample in SAMPLES:
        parts += split_capture(sample, str(tmp_path / os.path.basename(sample)), packets=5)
    a = read_analysis(SAMPLES)
    b = read_analysis(parts)
    for t in ("connections", "links", "deliveries", "stalls"):
        x, y = getattr(a, t), getattr(b, t)
        assert x.astype(str).values.tolist() == y.astype(str).values.tolist(), t


def test_gzip_and_nanosecond_input_copied_byte_for_byte(tmp_path):
    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    recs = [((1_700_000_000 + i, 123_456_789 + i), ethernet_frame(tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, seq=i,
                                                                                payload=b"x" * i)))
            for i in range(10)]
    src = tmp_path / "ns.pcap.gz"
    raw = write_pcap(recs, nano=True, linktype=1)
    src.write_bytes(gzip.compress(raw))
    parts = split_capture(str(src), str(tmp_path / "out"), packets=3)
    assert [os.path.basename(p) for p in parts] == [f"ns_{i:05d}.pcap" for i in range(4)]
    assert all_records(parts) == records(str(src))
    assert b"".join(open(p, "rb").read()[24:] for p in parts) == raw[24:]


def test_pcapng_input_becomes_pcap(tmp_path):
    from pcapbuild import TcpConversation

    conv = TcpConversation.from_exchange([(0, b"AMQP\x00\x01\x00\x00"), (1, b"AMQP\x00\x01\x00\x00")])
    src = tmp_path / "c.pcapng"
    src.write_bytes(conv.pcapng())
    parts = split_capture(str(src), str(tmp_path / "out"), packets=4)
    got, want = all_records(parts), records(str(src))
    assert [r[1:] for r in got] == [r[1:] for r in want]
    assert all(abs(a[0] - b[0]) < 1e-6 for a, b in zip(got, want))
    with open(parts[0], "rb") as f:
        assert open_capture(f).format == "pcap"


def test_damaged_input_keeps_what_was_readable(tmp_path):
    data = open(LARGE, "rb").read()
    src = tmp_path / "cut.pcap"
    src.write_bytes(data[: len(data) - 100])
    parts = split_capture(str(src), str(tmp_path / "out"), packets=10)
    assert parts.error and "truncated" in parts.error
    assert all_records(parts) == records(LARGE)[: parts.records]


def test_cli_split(tmp_path, cli, capsys):
    m = cli
    out = tmp_path / "o"
    assert m.main(["split", LARGE, "--out", str(out), "--packets", "10", "--gzip"]) == m.EXIT_OK
    assert "67 records -> 7 files" in capsys.readouterr().out
    assert sorted(os.listdir(out))[0] == "large_message_00000.pcap.gz"
    assert m.main(["split", LARGE, "--out", str(out), "--bytes", "50k", "--name", "x"]) == m.EXIT_OK
    assert os.path.exists(out / "x_00000.pcap")
    assert m.main(["split", LARGE, "--out", str(out)]) == m.EXIT_USAGE
    assert m.main(["split", LARGE, "--out", str(out), "--packets", "3", "--seconds", "1"]) == m.EXIT_USAGE
    assert m.main(["split", LARGE, "--out", str(out), "--bytes", "lots"]) == m.EXIT_USAGE
    assert m.main(["split", str(tmp_path / "nope.pcap"), "--out", str(out), "--packets", "3"]) == m.EXIT_OPEN
    (tmp_path / "text.pcap").write_text("hello, not a capture\n")
    assert m.main(["split", str(tmp_path / "text.pcap"), "--out", str(out), "--packets", "3"]) == m.EXIT_FORMAT
    data = open(LARGE, "rb").read()
    (tmp_path / "cut.pcap").write_bytes(data[:-50])
    assert m.main(["split", str(tmp_path / "cut.pcap"), "--out", str(out), "--packets", "3"]) == m.EXIT_DAMAGED
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("amqp-dissect: ") for line in err) and len(err) == 6
