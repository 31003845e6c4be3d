"""``split`` and the readers on damaged input (issue 29): each named reproducer is built here.

No exception escapes ``split`` or a reader: a corrupt or truncated gzip stream ends the split
after the last whole record with the place of the damage (exit 5), a time a pcap record cannot
hold is clamped and said, and the table writers write a time outside the years 1 to 9999 as null
in every format.  A short run of the fuzzer's split kind closes the file.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import sys

import pyarrow.parquet as pq
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))

import fuzzgen  # noqa: E402
import pcapbuild as pb  # noqa: E402

from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.cli.main import main  # noqa: E402
from amqp_dissect.errors import CaptureError  # noqa: E402
from amqp_dissect.pipelines.archive.split import SplitExists, pcap_time, split_capture, split_parts  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
T0 = 1_700_000_000


def _frames(n: int) -> list[bytes]:
    """``n`` TCP frames of 60 random letters (a seeded draw: the deflate stream has Huffman blocks
    that a changed byte breaks)."""
    import random

    rnd = random.Random(29)
    return [pb.frame(pb.LINKTYPE_ETHERNET, pb.tcp_packet("10.0.0.1", "10.0.0.2", 40000, 5672, seq=i * 60,
                                                          payload=bytes(rnd.choice(b"abcdefgh ") for _ in range(60))))
            for i in range(n)]


def _plain(n: int = 1200) -> tuple[bytes, list[bytes]]:
    frames = _frames(n)
    return pb.write_pcap([(T0 + i / 1000, pb.LINKTYPE_ETHERNET, f) for i, f in enumerate(frames)]), frames


def _records(path):
    with open(path, "rb") as f:
        r = open_capture(f)
        out = [(x.ts, x.data) for x in r]
    assert r.error is None
    return out


def _cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# ------------------------------------------------------------------ gzip damage


def _corrupt_gzip() -> bytes:
    """A gzip stream whose deflate data zlib rejects (``Error -3 while decompressing data``) half
    way, with nothing but the capture's own bytes decompressed before: the first byte from the
    middle on whose change does that (zlib fed 1 KB at a time is the judge)."""
    import zlib

    raw, _ = _plain()
    comp = gzip.compress(raw, compresslevel=1, mtime=0)
    for i in range(len(comp) // 2, len(comp) - 8):
        bad = bytearray(comp)
        bad[i] ^= 0xFF
        d = zlib.decompressobj(-15)
        got = b""
        try:
            for j in range(10, len(bad) - 8, 1024):  # (the raw deflate data: no gzip header, trailer)
                got += d.decompress(bytes(bad[j: min(j + 1024, len(bad) - 8)]))
        except zlib.error as e:
            if "Error -3" in str(e) and raw.startswith(got):
                return bytes(bad)
    raise AssertionError("no corrupting byte found")


def test_split_of_a_truncated_gzip_capture_ends_with_the_damage_not_a_silent_130(tmp_path, capsys):
    # was: two parts written, then exit 130 (click took gzip's EOFError for Ctrl-D) with no message
    raw, frames = _plain()
    comp = gzip.compress(raw, compresslevel=1, mtime=0)
    cap = tmp_path / "cut.pcap.gz"
    cap.write_bytes(comp[: len(comp) * 2 // 3])
    rc, out, err = _cli(capsys, "split", "--packets", "300", "-o", str(tmp_path / "out"), str(cap))
    assert rc == 5
    assert "gzip data truncated at byte" in err and "Compressed file ended" in err
    parts = split_parts(str(tmp_path / "out"), "cut")
    assert len(parts) >= 2
    got = [r for p in parts for r in _records(p)]
    assert 0 < len(got) < len(frames)
    assert [d for _, d in got] == frames[: len(got)]  # every whole record before the damage, in order
    assert out.startswith(f"{len(got)} records -> {len(parts)} files")


def test_split_of_a_corrupt_gzip_capture_says_where(tmp_path, capsys):
    # was: "internal error: Error -3 while decompressing data"
    cap = tmp_path / "bad.pcap.gz"
    cap.write_bytes(_corrupt_gzip())
    rc, _, err = _cli(capsys, "split", "--packets", "300", "-o", str(tmp_path / "out"), str(cap))
    assert rc == 5
    assert "gzip data corrupt at byte" in err and "Error -3" in err and "internal error" not in err


class _Trickle:
    """A stream that returns one byte per read (a slow pipe): the decompressor gets the deflate
    data a byte at a time, so what precedes the damage comes out before it."""

    def __init__(self, data: bytes):
        self._f = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._f.read(1 if n is None or n < 0 else min(n, 1))


def _broken_after(head: bytes) -> bytes:
    """A gzip stream that decompresses to ``head`` (a stored deflate block, flushed), then holds a
    block of the reserved type 3: zlib's ``Error -3 ... invalid block type``."""
    import zlib

    c = zlib.compressobj(0, zlib.DEFLATED, -15)
    deflate = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH) + b"\x07" + b"\x00" * 64
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + deflate


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_gzip_stream_corrupt_in_the_file_header_is_not_a_truncated_header(tmp_path, capsys, monkeypatch, fmt):
    # was: "pcap file header truncated (10 of 24 bytes)"
    raw, _ = _plain(3)
    if fmt == "pcapng":
        raw = pb.pcapng_shb() + pb.pcapng_idb(pb.LINKTYPE_ETHERNET)
    data = _broken_after(raw[:10])
    with pytest.raises(CaptureError) as e:
        list(open_capture(_Trickle(data)))
    assert str(e.value).startswith("gzip data corrupt at byte 10 of the decompressed stream")
    assert "invalid block type" in str(e.value) and "file header" in str(e.value) or "section header" in str(e.value)
    # split reads standard input the same way
    monkeypatch.setattr(sys, "stdin", type("Stdin", (), {"buffer": _Trickle(data)})())
    rc, _, err = _cli(capsys, "split", "--packets", "10", "-o", str(tmp_path / "out"), "-")
    assert rc == 4 and "gzip data corrupt at byte 10 of the decompressed stream" in err
    # nothing decompressed at all
    with pytest.raises(CaptureError, match=r"^gzip data corrupt at byte 0 of the decompressed stream"):
        open_capture(_Trickle(_broken_after(b"")))


def test_the_reader_names_gzip_damage_after_records(tmp_path):
    cap = _corrupt_gzip()
    reader = open_capture(io.BytesIO(cap))
    n = sum(1 for _ in reader)
    assert n > 0
    assert "gzip data corrupt at byte" in str(reader.error)


# ------------------------------------------------------------------ times a pcap record cannot hold


def _far_pcapng(ticks_of, tsresol=None, tsoffset=None) -> tuple[bytes, list[bytes]]:
    frames = _frames(5)
    blocks = [pb.pcapng_shb(), pb.pcapng_idb(pb.LINKTYPE_ETHERNET, tsresol, tsoffset=tsoffset)]
    blocks += [pb.pcapng_epb(0, ticks_of(i), f) for i, f in enumerate(frames)]
    return b"".join(blocks), frames


@pytest.mark.parametrize("what,kw,clamped", [
    # year 58862 in microsecond ticks (was: struct.error: 'I' format requires 0 <= number <= 4294967295)
    ("year 58862", dict(ticks_of=lambda i: (1_795_400_000_000 + i) * 10**6), (0xFFFFFFFF, 999_999_999)),
    # 1.8e18 s, ticks of a second
    ("1.8e18 s", dict(ticks_of=lambda i: 1_800_000_000_000_000_000 + i, tsresol=0), (0xFFFFFFFF, 999_999_999)),
    # before 1970: a negative time offset
    ("1653", dict(ticks_of=lambda i: (T0 + i) * 10**6, tsoffset=-10**10), (0, 0)),
])
def test_split_clamps_times_a_pcap_record_cannot_hold(tmp_path, capsys, what, kw, clamped):
    data, frames = _far_pcapng(**kw)
    cap = tmp_path / "far.pcapng"
    cap.write_bytes(data)
    rc, out, err = _cli(capsys, "split", "--packets", "2", "-o", str(tmp_path / "out"), str(cap))
    assert rc == 0, err
    assert "5 record(s) have a time a pcap file cannot hold" in err and "clamped" in err
    parts = split_parts(str(tmp_path / "out"), "far")
    assert len(parts) == 3
    heads = []
    for p in parts:
        raw = open(p, "rb").read()
        assert struct.unpack_from("<I", raw, 0)[0] == 0xA1B23C4D  # nanosecond pcap
        off = 24
        while off < len(raw):
            sec, frac, caplen, _ = struct.unpack_from("<IIII", raw, off)
            heads.append((sec, frac))
            off += 16 + caplen
    assert heads == [clamped] * 5
    assert [d for p in parts for _, d in _records(p)] == frames


def test_pcap_time_clamps_only_outside_its_range():
    assert pcap_time(0, True) == (0, 0, False)
    assert pcap_time((0xFFFFFFFF * 10**9) + 999_999_999, True) == (0xFFFFFFFF, 999_999_999, False)
    assert pcap_time(0xFFFFFFFF * 10**9 + 10**9, True) == (0xFFFFFFFF, 999_999_999, True)
    assert pcap_time(0xFFFFFFFF * 10**9 + 10**9, False) == (0xFFFFFFFF, 999_999, True)
    assert pcap_time(-1, False) == (0, 0, True)
    assert pcap_time(1_700_000_000_123_456_789, False) == (1_700_000_000, 123_456, False)


def _far_amqp(tmp_path, seconds: float) -> str:
    """The outcomes sample moved to ``seconds`` after the epoch (a pcapng of second or microsecond
    ticks)."""
    with open(OUTCOMES, "rb") as f:
        recs = list(open_capture(f))
    t0 = recs[0].ts
    if seconds >= 1e13:  # (beyond 64 bits of microseconds: ticks of a second)
        blocks = [pb.pcapng_shb(), pb.pcapng_idb(1, 0)]
        blocks += [pb.pcapng_epb(0, int(seconds) + i, r.data) for i, r in enumerate(recs)]
    else:
        blocks = [pb.pcapng_shb(), pb.pcapng_idb(1)]
        blocks += [pb.pcapng_epb(0, round(seconds * 1e6) + (r.ts - t0) // 1000, r.data) for r in recs]
    path = str(tmp_path / f"far-{seconds:.0f}.pcapng")
    with open(path, "wb") as f:
        f.write(b"".join(blocks))
    return path


@pytest.mark.parametrize("seconds", [1.8e12, 1.8e18, 253402300790.0, 9_200_000_000.0])
def test_table_writers_write_a_time_outside_the_years_a_typed_column_holds_as_null(tmp_path, capsys, seconds):
    """The tables' times are integer nanoseconds (timestamp[ns, UTC]: the years 1677 to 2262)."""
    path = _far_amqp(tmp_path, seconds)
    inside = seconds * 1_000_000_000 < 2**63
    rc, out, _ = _cli(capsys, "deliveries", "-T", "jsonl", path)
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 20
    if inside:  # year 2261: still a time
        assert all(r["first_time"].startswith("2261-") for r in rows)
        return
    assert all(r["first_time"] is None and r["settled_time"] is None for r in rows)
    assert all(r["settlement_latency"] is not None for r in rows)  # (a difference of times is still known)
    rc, out, _ = _cli(capsys, "deliveries", "-T", "csv", path)
    assert rc == 0
    head, first = out.splitlines()[:2]
    cells = dict(zip(head.split(","), first.split(",")))
    assert cells["first_time"] == "" and cells["settled_time"] == ""
    pq_path = tmp_path / "d.parquet"
    assert main(["deliveries", "-T", "parquet", "-o", str(pq_path), path]) == 0
    table = pq.read_table(pq_path)
    assert table.column("first_time").null_count == table.num_rows == 20
    table.to_pandas()  # (a value out of a datetime's range would raise here)
    # the report and the text table show the raw epoch seconds, said so
    rc, out, _ = _cli(capsys, "report", path)
    assert rc == 0
    if seconds >= 253402300800.0:  # (a date the report cannot write: said so)
        assert "(epoch s, beyond the years a datetime holds)" in out
    else:
        assert "9999-12-31 23:59:" in out
    rc, out, _ = _cli(capsys, "deliveries", path)  # the text table: the raw epoch seconds, said so
    assert rc == 0 and "(epoch s, beyond the years a datetime holds)" in out


# ------------------------------------------------------------------ a folder holding another split


def test_split_refuses_a_folder_holding_parts_of_an_earlier_split(tmp_path, capsys):
    out = str(tmp_path / "out")
    first = split_capture(OUTCOMES, out, packets=5)
    assert len(first) == 10
    foreign = tmp_path / "out" / "other_00000.pcap"  # another name's split: not touched
    foreign.write_bytes(b"x")
    with pytest.raises(SplitExists) as e:
        split_capture(OUTCOMES, out, packets=20)
    assert e.value.parts == list(first)
    rc, _, err = _cli(capsys, "split", "--packets", "20", "-o", out, OUTCOMES)
    assert rc == 2 and "holds 10 part(s) of an earlier split" in err and "--force" in err
    assert split_parts(out, "outcomes") == list(first)  # nothing written, nothing removed
    rc, _, err = _cli(capsys, "split", "--packets", "20", "--force", "-o", out, OUTCOMES)
    assert rc == 0, err
    parts = split_parts(out, "outcomes")
    assert len(parts) == 3  # the ten old parts gone: the folder holds this split only
    assert [r for p in parts for r in _records(p)] == _records(OUTCOMES)
    assert foreign.read_bytes() == b"x"
    assert split_capture(OUTCOMES, out, packets=20, name="again") and split_parts(out, "again")


# ------------------------------------------------------------------ the fuzzer's split kind


def test_the_fuzzer_split_kind_finds_no_failure(tmp_path):
    path = str(tmp_path / "input")
    forms = set()
    for i in range(60):
        r = fuzzgen.RandomSource(f"split-test:{i}")
        data = fuzzgen.split_input(r)
        forms.add(data[:2] == b"\x1f\x8b")
        with open(path, "wb") as f:
            f.write(data)
        problems = fuzzgen.check_split(path, str(tmp_path / "parts"))
        assert problems == [], problems[0]
    assert forms == {True, False}  # (gzip and not)


def test_the_fuzzer_split_check_catches_an_escaping_exception(tmp_path, monkeypatch):
    """The oracle can fail: an exception out of the split is a failure."""
    from amqp_dissect.pipelines.archive import split as split_mod

    def broken(*a, **kw):
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(split_mod, "split_capture", broken)
    problems = fuzzgen.check_split(OUTCOMES, str(tmp_path / "parts"))
    assert len(problems) == 3 and all("EOFError" in p for p in problems)
