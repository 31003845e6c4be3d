"""Archive stage 1's compiled loop (``amqp_dissect.shard.stage1_fill``, through
``decode_batches`` and ``stages._rows_batch``) against the record-by-record way
(``decode_range``, its tuples made Arrow batches by ``stages._batches``): on every sample and test
capture, whole and cut in byte ranges, and on captures made here from them (pcapng with a second
interface of a link type the parser does not know, gzip, a record the parser rejects, a record
cut short by the file's end, a whole file of an unsupported link type), the same rows, the same
summary and the same Arrow batches, cut at the same rows.  No Spark session."""

from __future__ import annotations

import glob
import json
import os
import sys

import pyarrow as pa
import pytest

from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.pipelines import archive as ar
from amqp_dissect.pipelines.archive.records import decode_batches
from amqp_dissect.pipelines.spark import stages

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))

CAPTURES = sorted(p for pat in ("samples/**/*.pcap", "samples/**/*.pcap.gz", "samples/**/*.pcapng",
                                "tests/data/**/*.pcap", "tests/data/**/*.pcap.gz", "tests/data/**/*.pcapng")
                  for p in glob.glob(os.path.join(ROOT, pat), recursive=True))


def _schema():
    return pa.schema([("rid", pa.int32()), ("idx", pa.int64()), ("ts", pa.int64()), ("linktype", pa.int32()),
                      ("data", pa.binary()), ("orig_len", pa.int64()), ("flow", pa.string()), ("kind", pa.int8()),
                      ("pos", pa.int64()), ("caplen", pa.int32()), ("meta", pa.string()), ("file", pa.int32())])


def _tuples(b, rid: int, file: int) -> list:
    """The rows of a Stage1Rows batch as decode_range's tuples (read from its columns)."""
    notes = dict(b.notes)
    rows = []
    for i in range(b.n):
        note = notes.get(i)
        data = b.data[i] if b.data is not None else None
        offset = b.data is None and note is None
        rows.append((rid, b.idx[i], b.ts[i], b.linktype[i], data, b.orig_len[i], b.flow[i], b.kind[i],
                     b.pos[i] if offset else None, b.caplen[i] if offset else None, note, file))
    return rows


def _compare(rng, size: int = stages.SEG_BATCH_ROWS, max_bytes: int = 32 << 20) -> int:
    """decode_batches against decode_range on one range: rows, summary, Arrow batches (cut where
    stages._batches cuts decode_range's rows).  Returns the number of rows."""
    old = list(ar.decode_range(rng))
    got = list(decode_batches(rng, size, max_bytes))
    assert got and type(got[-1]) is tuple
    summary, batches = got[-1], got[:-1]
    assert summary[:10] == old[-1][:10] and summary[11:] == old[-1][11:]
    assert json.loads(summary[10]) == json.loads(old[-1][10])
    rows = [r for b in batches for r in _tuples(b, rng.rid, rng.file)]
    assert rows == old[:-1]
    for b in batches:
        assert 0 < b.n <= size
    schema = _schema()
    want = list(stages._batches(iter(old[:-1]), schema, size=size, max_bytes=max_bytes,
                                sized=(stages._SEG_DATA,)))
    mine = [stages._rows_batch(b, schema, rng.rid, rng.file) for b in batches]
    assert len(mine) == len(want)
    for m, w in zip(mine, want):
        m.validate(full=True)
        assert m.equals(w)
    return len(rows)


@pytest.mark.parametrize("cap", CAPTURES, ids=lambda p: os.path.relpath(p, ROOT))
def test_whole_file_rows_are_decode_ranges(cap):
    (rng,) = ar.plan_ranges([cap], 0)
    assert _compare(rng) > 0
    _compare(rng, size=7, max_bytes=1500)  # (batches cut by rows and by the bytes they carry)


@pytest.mark.parametrize("cap", [c for c in CAPTURES if not c.endswith(".gz")][:12],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_byte_ranges_rows_are_decode_ranges(cap):
    size = os.path.getsize(cap)
    ranges = ar.plan_ranges([cap], max(4096, size // 5))
    assert len(ranges) > 1 or size <= 4096
    n = 0
    for rng in ranges:
        n += _compare(rng)
        _compare(rng, size=5, max_bytes=1 << 20)
    (whole,) = ar.plan_ranges([cap], 0)
    assert n == _compare(whole)  # (each record in one range)


def _records(cap: str) -> list:
    with open(cap, "rb") as f:
        return [(r.ts / 1e9, r.data) for r in open_capture(f)]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Captures made from a sample: every damage and format the rows' paths know."""
    from pcapbuild import LINKTYPE_ETHERNET, gzip_bytes, write_pcap, write_pcapng

    d = tmp_path_factory.mktemp("stage1")
    recs = _records(os.path.join(ROOT, "samples", "outcomes.pcap"))
    out = {}

    def put(name, data):
        p = d / name
        p.write_bytes(data)
        out[name] = str(p)
    plain = write_pcap([(ts, LINKTYPE_ETHERNET, data) for ts, data in recs])
    put("plain.pcap", plain)
    put("plain.pcap.gz", gzip_bytes(plain))
    # every fifth record on an interface of a link type the parser does not know
    put("two_ifaces.pcapng", write_pcapng([(ts, 1 if i % 5 == 4 else 0, data) for i, (ts, data) in enumerate(recs)],
                                          interfaces=((LINKTYPE_ETHERNET, None), (147, None))))
    # records the parser rejects (a short Ethernet header, an IPv4 header with a bad length),
    # one time step back, and the last record cut by the end of the file
    bad = [(ts, LINKTYPE_ETHERNET, data) for ts, data in recs]
    bad.insert(3, (recs[3][0], LINKTYPE_ETHERNET, b"\x00" * 9))
    bad.insert(9, (recs[9][0], LINKTYPE_ETHERNET, recs[9][1][:14] + b"\x45\x00\x00\x08" + recs[9][1][18:]))
    bad.insert(12, (recs[12][0] - 5.0, LINKTYPE_ETHERNET, recs[12][1]))
    put("damaged.pcap", write_pcap(bad)[:-7])
    put("unsupported.pcap", write_pcap([(ts, 147, data) for ts, data in recs], linktype=147))
    return out


@pytest.mark.parametrize("name", ["plain.pcap", "plain.pcap.gz", "two_ifaces.pcapng", "damaged.pcap",
                                  "unsupported.pcap"])
def test_made_captures_rows_are_decode_ranges(made, name):
    cap = made[name]
    (rng,) = ar.plan_ranges([cap], 0)
    _compare(rng)
    _compare(rng, size=3, max_bytes=400)
    meta = json.loads(list(ar.decode_range(rng))[-1][10])
    if name == "damaged.pcap":
        assert meta["packet_errors"] == 2 and meta["error"]  # (the oracle: what was made above)
    if name in ("two_ifaces.pcapng", "unsupported.pcap"):
        assert meta["unsupported"].get("147", 0) > 0
    if not name.endswith(".gz") and name != "two_ifaces.pcapng":
        for rng in ar.plan_ranges([cap], 2048):
            _compare(rng)


def test_a_missing_file_and_a_file_that_is_no_capture(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all" * 10)
    for path in (str(tmp_path / "missing.pcap"), str(junk)):
        rng = ar.Range(0, 0, path, 0, 0, None, 200)
        _compare(rng)
