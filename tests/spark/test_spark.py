"""The Spark archive job agrees with the single-process path (amqp_dissect.pipelines.runs.local) on the same files.

One SparkSession (local[2]) for the whole file.  Compared column by column,
exactly: connections, links, deliveries, stalls (and frames), on the samples
together, on the samples cut into rotated files (some gzipped), on a capture
read through the byte-range splitter, and on a capture whose results depend on
the rest of the capture (a connection expired by the idle sweep that other
traffic drives, the end time the analyzer is finished with).  The Spark
summaries are checked against pandas/numpy on the single-process tables.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import struct

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from sparkneeds import require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.render.frames import event_json  # noqa: E402
from amqp_dissect.pipelines import archive as ar  # noqa: E402
from amqp_dissect.pipelines.runs.local import CaptureSource, read_analysis  # noqa: E402
from amqp_dissect.pipelines.archive.split import split_capture  # noqa: E402


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
# the complete AMQP 1.0 samples (samples/loss/ and samples/other-protocols/ hold a lossy capture and
# an AMQP 0-9-1 one: an archive of the folder reads them too, so the tests name the files)
SAMPLE_FILES = sorted(glob.glob(os.path.join(SAMPLES, "*.pcap")))
TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors")


# --------------------------------------------------------------------------- helpers


def capture_order(paths):
    """Files as one capture set: by first record time, then path, its numbers by value (what the
    job promises; the single-process reader orders a set so too)."""
    def key(ip):
        i, p = ip
        with open(p, "rb") as f:
            r = next(iter(open_capture(f)), None)
        return ar.set_key(os.path.abspath(p), r.ts if r is not None else None, i)
    return [p for _, p in sorted(enumerate(paths), key=key)]


def _meta_of(rows) -> dict:
    """The summary of a range (its last stage-1 row)."""
    last = list(rows)[-1]
    assert last[ar.STAGE1_COLUMNS.index("kind")] == ar.KIND_SUMMARY
    return json.loads(last[ar.STAGE1_COLUMNS.index("meta")])


def _layout(files, split):
    """Stage 1 without Spark: the ranges' summaries, then the overlap groups read merged, as the
    job does; returns (summaries, layout)."""
    summaries = [_meta_of(ar.decode_range(r)) for r in ar.plan_ranges(files, split)]
    lay = ar.layout(files, summaries)
    if lay.groups:
        grouped = {fi for g in lay.groups for fi, _ in g}
        extra = [_meta_of(ar.decode_range(r))
                 for r in ar.group_ranges(files, lay.groups, max(s["rid"] for s in summaries) + 1)]
        summaries = [s for s in summaries if s["file"] not in grouped] + extra
        lay = ar.layout(files, summaries)
        assert lay.groups == []
    return summaries, lay


def _cells(s: pd.Series) -> list:
    return s.astype(object).where(s.notna(), None).tolist()


def assert_same_tables(out: str, paths) -> "object":
    """Every table of the archive under ``out`` equals the single-process one row for row, in
    order, with the CLI's pandas dtypes (the archive's pandas metadata; times held in
    microseconds: the samples are microsecond captures)."""
    a = read_analysis(capture_order(paths))
    for t in TABLES:
        sp = pd.read_parquet(os.path.join(out, t))
        lp = getattr(a, t)
        assert list(sp.columns) == list(lp.columns), t
        assert sp.dtypes.to_dict() == lp.dtypes.to_dict(), t
        assert len(sp) == len(lp), t
        for c in lp.columns:
            assert _cells(sp[c]) == _cells(lp[c]), (t, c)
    return a


def _desc_then_asc(df, desc: str, *asc: str) -> bool:
    """Are the rows of ``df`` in order by ``desc`` descending (nulls last), then ``asc``
    ascending (nulls first)?  The documented order of the summaries."""
    def key(r):
        v = r[desc] if desc else 0
        return ((1, 0) if pd.isna(v) else (0, -v),) + tuple((0, "") if pd.isna(r[c]) else (1, r[c]) for c in asc)
    keys = [key(r) for _, r in df.iterrows()]
    return keys == sorted(keys)


def assert_summaries(out: str, a, window: float = 60.0) -> None:
    """Summaries == pandas / numpy on the single-process tables, in the documented row order."""
    d = a.deliveries
    rd = lambda name: pd.read_parquet(os.path.join(out, name))  # noqa: E731
    assert _desc_then_asc(rd("latency_by_link"), "p99", "connection", "link_index")
    assert _desc_then_asc(rd("latency_by_address"), "p99", "address")
    assert rd("latency_by_window").window_start.is_monotonic_increasing
    assert _desc_then_asc(rd("outcomes"), None, "address", "outcome")
    assert _desc_then_asc(rd("stalls_by_link"), "stalled_seconds", "connection")
    assert _desc_then_asc(rd("stalls_by_address"), "stalled_seconds")

    def check_stats(row, lats):
        lats = np.asarray([x for x in lats if x == x], dtype=float)
        assert row["count"] == len(lats)
        if len(lats):
            want = np.percentile(lats, [50, 90, 99])
            got = [row["p50"], row["p90"], row["p99"]]
            assert np.allclose(got, want, rtol=1e-12, atol=1e-12)
            assert row["max"] == lats.max() and row["min"] == lats.min()
            assert np.isclose(row["mean"], lats.mean(), rtol=1e-9)
        else:
            assert pd.isna(row["p50"]) and pd.isna(row["max"])

    lbl = rd("latency_by_link")
    assert len(lbl) == len(a.links)
    for _, row in lbl.iterrows():
        sel = d[(d.connection == row["connection"]) & (d.link_index == row["link_index"])]
        check_stats(row, sel.settlement_latency.tolist())
    # the analyzer's own per-link percentiles agree too
    links = a.links.set_index(["connection", "link_index"])
    for _, row in lbl.iterrows():
        lk = links.loc[(row["connection"], row["link_index"])]
        if row["count"]:
            assert np.isclose(row["p99"], lk["latency_p99"], rtol=1e-12)

    lba = rd("latency_by_address")
    assert sorted(_cells(lba.address), key=str) == sorted(_cells(pd.Series(a.links.address.unique())), key=str)
    for _, row in lba.iterrows():
        sel = d[d.address.isna()] if pd.isna(row["address"]) else d[d.address == row["address"]]
        check_stats(row, sel.settlement_latency.tolist())

    lbw = rd("latency_by_window")
    # the tasks' files carry pandas metadata (nanosecond dtype); Spark's writer's (a remote output) not
    meta = pq.read_schema(glob.glob(os.path.join(out, "latency_by_window", "*.parquet"))[0]).metadata or {}
    unit = "ns" if b"pandas" in meta else "us"
    assert str(lbw.window_start.dtype) == str(lbw.window_end.dtype) == f"datetime64[{unit}, UTC]"
    wus = round(window * 1_000_000)
    us = (d.first_time - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
    w = pd.to_datetime((us // wus) * wus, unit="us", utc=True)
    assert sorted(lbw.window_start.tolist()) == sorted(w.unique().tolist())
    for _, row in lbw.iterrows():
        sel = d[w == row["window_start"]]
        assert row["deliveries"] == len(sel)
        assert row["accepted"] == (sel.outcome == "accepted").sum()
        check_stats(row, sel.settlement_latency.tolist())

    oc = rd("outcomes")
    want = d.groupby([d.address.fillna("<none>"), d.outcome.fillna("<none>")]).size()
    got = oc.set_index([oc.address.fillna("<none>"), oc.outcome.fillna("<none>")])["deliveries"]
    assert got.sort_index().to_dict() == want.sort_index().to_dict()

    s = a.stalls
    sbl = rd("stalls_by_link")
    assert sbl.stalls.sum() == (~s.idle).sum()
    assert sbl.idle_periods.sum() == s.idle.sum()
    for _, row in sbl.iterrows():
        sel = s[(s.connection == row["connection"])
                & ((s.link_index == row["link_index"]) if pd.notna(row["link_index"]) else s.link_index.isna())
                & (s.channel == row["channel"])]
        assert row["stalls"] == (~sel.idle).sum()
        assert row["idle_periods"] == sel.idle.sum()
        assert np.isclose(row["stalled_seconds"], sel[~sel.idle].duration.sum(), rtol=1e-9)
        assert np.isclose(row["idle_seconds"], sel[sel.idle].duration.sum(), rtol=1e-9)
        if pd.notna(row["link_index"]):
            lk = links.loc[(row["connection"], row["link_index"])]
            assert row["stalls"] == lk["stalls"]
            assert np.isclose(row["stalled_seconds"], lk["stalled_seconds"], rtol=1e-9)
    sba = rd("stalls_by_address")
    assert sba.stalls.sum() == (~s.idle).sum()
    assert sba.idle_periods.sum() == s.idle.sum()


def expected_frames(paths) -> list[dict]:
    out = []
    for _, ev in CaptureSource(capture_order(paths), messages=True).events():
        d = event_json(ev)
        if d is not None:
            out.append(json.loads(json.dumps(d, ensure_ascii=False, allow_nan=False)))
    return out


# --------------------------------------------------------------------------- fixtures


# the ``spark`` session fixture is in conftest.py (one Spark session for the whole test run)


def _run(spark, paths, out, **kw):
    from amqp_dissect.pipelines.spark import run_archive

    kw.setdefault("partitions", 3)
    return run_archive(spark, paths, str(out), **kw)


def _seconds(recs):
    """(ts, linktype, data) records with their integer-nanosecond times as float seconds, for the
    capture writers of tests/support/pcapbuild.py (microsecond captures: exact to the microsecond)."""
    return [(ts / 1_000_000_000, lt, data) for ts, lt, data in recs]


def _records(path):
    with open(path, "rb") as f:
        return [(r.ts, r.linktype, r.data) for r in open_capture(f)]


# --------------------------------------------------------------------------- no Spark needed


def test_table_columns_are_the_single_process_columns():
    a = read_analysis(SAMPLE_FILES)
    for t in TABLES:
        assert list(getattr(a, t).columns) == [c for c, _ in ar.table_columns(t)], t


@pytest.mark.parametrize("split", [700, 4096, 30000])
def test_byte_ranges_chain_and_count_every_record(split):
    files = SAMPLE_FILES
    ranges = ar.plan_ranges(files, split)
    assert len(ranges) > len(files)
    summaries = [_meta_of(ar.decode_range(r)) for r in ranges]
    lay = ar.layout(files, summaries)
    assert lay.redo == [] and lay.errors == []
    assert lay.records == sum(len(_records(f)) for f in files)
    assert lay.order == capture_order(files)


def test_chained_headers_reject_a_lone_plausible_header(tmp_path):
    """A payload holding one valid-looking record header is not taken for a boundary."""
    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    t0 = 1_700_000_000
    fake = struct.pack("<IIII", t0, 0, 8, 8) + b"\xff" * 24
    recs = []
    for i in range(40):
        pkt = tcp_packet("10.0.0.1", "10.0.0.2", 40000, 80, seq=1000 + i * 400, payload=fake * 10)
        recs.append((t0 + i * 0.01, 1, ethernet_frame(pkt)))
    p = tmp_path / "fake.pcap"
    p.write_bytes(write_pcap(recs))
    ranges = ar.plan_ranges([str(p)], 1000)
    summaries = [_meta_of(ar.decode_range(r)) for r in ranges]
    assert sum(s["rejected"] for s in summaries) > 0
    lay = ar.layout([str(p)], summaries)
    assert lay.redo == [] and lay.records == 40


def test_sweep_ticks_in_batches_equal_one_pass():
    import pyarrow as pa

    from amqp_dissect.pipelines.spark.stages import ticks_fn

    rng = np.random.default_rng(7)
    ts = (np.cumsum(rng.exponential(0.3, 3000)) * 1e9).astype(np.int64) + 10**18  # (integer nanoseconds)
    ts[100] -= 5 * 10**9  # out of order records are allowed
    ts[2000] += 3 * 10**9
    pk = np.arange(1, len(ts) + 1)
    want, _ = ar.sweep_ticks(zip(pk.tolist(), ts.tolist()))
    batches = [pa.RecordBatch.from_arrays([pa.array(pk[i:i + 700]), pa.array(ts[i:i + 700])], ["packet", "ts"])
               for i in range(0, len(ts), 700)]
    got = [(p, t) for b in ticks_fn(1_000_000_000)(iter(batches)) for p, t in zip(b.column(0).to_pylist(),
                                                                            b.column(1).to_pylist())]
    assert got == want and len(want) > 100


def _sequential_ends(paths):
    """Oracle for capture_ends: the files read as one capture by the single-process reader
    (a set merged in time order), records numbered from 1, each classified by the packet parser."""
    from amqp_dissect.capture.netparse import TruncatedPacket, parse_segment
    from amqp_dissect.errors import DissectError, UnsupportedLinkType

    n = last_tcp = 0
    note = None
    unsupported = {}
    for rec in CaptureSource(list(paths)).records():
        n += 1
        assert rec.index == n
        try:
            seg = parse_segment(rec.linktype, rec.data)
        except UnsupportedLinkType:
            unsupported.setdefault(rec.linktype, (n, rec.ts))
            continue
        except TruncatedPacket as e:
            seg = e.segment
        except DissectError:
            note = (n, rec.ts)
            continue
        if seg is not None:
            last_tcp = n
    for cand in unsupported.values():
        if note is None or cand[0] > note[0]:
            note = cand
    return last_tcp, note


def _odd_captures(tmp_path):
    """The global capture (a malformed packet, then non-AMQP TCP), and two files of a link
    type the parser does not support, timed inside it (overlap groups, read merged)."""
    from pcapbuild import write_pcap

    g = tmp_path / "global.pcap"
    _global_capture(g)
    recs = _seconds(_records(str(g)))
    mid = recs[len(recs) // 2][0]
    out = [str(g)]
    for i, lt in enumerate((9, 105)):
        u = tmp_path / f"user{i}.pcap"
        u.write_bytes(write_pcap([(mid + i + k * 0.1, lt, b"\x00" * 40) for k in range(5)], linktype=lt))
        out.append(str(u))
    return out


@pytest.mark.parametrize("split", [0, 700, 4096])
def test_capture_ends_and_flow_sizes_from_the_range_summaries(tmp_path, split):
    """The driver takes the last TCP record and the last note from the range summaries, not
    from a pass over the rows: they agree with reading the files in order, and each range's
    flow sizes with its own rows."""
    from collections import Counter

    files = SAMPLE_FILES + _odd_captures(tmp_path)
    ranges = ar.plan_ranges(files, split)
    summaries = []
    for r in ranges:
        rows = list(ar.decode_range(r))
        meta = _meta_of(rows)
        summaries.append(meta)
        sizes = Counter(row[6] for row in rows if row[7] == ar.KIND_TCP)
        assert [tuple(x) for x in meta["flows"]] == sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:ar.FLOW_TOP]
    summaries, lay = _layout(files, split)
    assert lay.redo == []
    # the odd ones overlap: the global capture spans samples' times too, the others lie inside it
    assert len(lay.merged) == 1 and set(files[len(SAMPLE_FILES):]) <= {files[i] for i in lay.merged[0]}
    last_tcp, note = ar.capture_ends(summaries, lay.offsets)
    want_tcp, want_note = _sequential_ends(files)
    assert last_tcp == want_tcp and last_tcp > 0
    assert note == want_note and note is not None
    assert lay.unsupported == {"9": 5, "105": 5}


def test_overlap_groups_are_numbered_as_the_single_process_merges_a_set(tmp_path):
    """Without Spark: the overlap groups' merged reads (MergeScan) give each record the packet
    number the single-process reader gives it (CaptureSource on the set: the oracle, itself
    checked against mergecap in test_capture_sets.py), with equal times going to the file first
    in the set's order, a damaged file read up to its damage, a file without records last; the
    order, the damage and the set's gaps are the single process's."""
    from pcapbuild import LINKTYPE_ETHERNET, frame, tcp_packet, write_pcap

    base = frame(LINKTYPE_ETHERNET, tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x"))
    t = 1_700_000_000.0

    def write(name, times, tag):
        (tmp_path / name).write_bytes(write_pcap([(ts, 1, base + tag + str(i).encode()) for i, ts in enumerate(times)]))
        return str(tmp_path / name)

    (tmp_path / "empty.pcap").write_bytes(write_pcap([], linktype=LINKTYPE_ETHERNET))
    cut = write("cut.pcap", [t + i for i in range(0, 10, 2)], b"c")
    (tmp_path / "cut.pcap").write_bytes((tmp_path / "cut.pcap").read_bytes()[:-5])
    whole = write("whole.pcap", [t + i for i in range(1, 10, 2)], b"w")  # overlaps cut.pcap
    a = write("cap.pcap9", [t + 20, t + 21, t + 22], b"a")  # the same first time as b: by name, 9 before 10
    b = write("cap.pcap10", [t + 20, t + 22, t + 23], b"b")
    c = write("cap.pcap2", [t + 22, t + 22], b"c")
    files = [c, str(tmp_path / "empty.pcap"), b, whole, cut, a]
    summaries, lay = _layout(files, 0)
    src = CaptureSource(files)
    want = [(r.index, r.data) for r in src.records()]
    assert [[files[i] for i in g] for g in lay.merged] == [[cut, whole], [a, b, c]]
    reader = ar.RecordReader(files)
    got = []
    for s in summaries:
        if s.get("group"):
            rng = ar.group_ranges(files, [[(fi, first) for fi, first, _, _ in s["members"]]], s["rid"])[0]
            for row in list(ar.decode_range(rng))[:-1]:
                packet = lay.offsets[s["rid"]] + row[1] + 1
                got.append((packet, reader.read(row[11], row[8], row[9], row[2], row[5])))
    reader.close()
    assert sorted(got) == want and len(want) == 17
    info = src.capture_info()
    assert lay.order == info["files"] and lay.records == len(want)
    assert lay.errors == [(p, str(e)) for p, e in src.errors] and lay.errors[0][0] == cut
    gaps = [{k: v for k, v in g.items() if k != "connections"} for g in info["gaps"]]  # (the TCP gaps in them: stage 2's)
    assert ar.set_gaps_of(lay.spans) == gaps and len(gaps) == 1  # cap.pcap3 ... cap.pcap8


def _mixed_formats(tmp_path):
    """Samples as plain pcap, gzip and pcapng (nanosecond pcap among them)."""
    from pcapbuild import gzip_bytes, write_pcap, write_pcapng

    recs = _seconds(_records(os.path.join(SAMPLES, "credit_one.pcap")))
    gz = tmp_path / "credit.pcap.gz"
    gz.write_bytes(gzip_bytes(open(os.path.join(SAMPLES, "credit_one.pcap"), "rb").read()))
    ng = tmp_path / "heartbeat.pcapng"
    ng.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in _seconds(_records(os.path.join(SAMPLES, "heartbeat.pcap")))]))
    ns = tmp_path / "credit_ns.pcap"
    ns.write_bytes(write_pcap([(ts + 5000, lt, data) for ts, lt, data in recs], nano=True))
    return [os.path.join(SAMPLES, "ipv6.pcap"), os.path.join(SAMPLES, "large_message.pcap"), str(gz), str(ng), str(ns)]


@pytest.mark.parametrize("split", [0, 4096])
def test_pcap_records_travel_as_offsets_and_read_back(tmp_path, split):
    """Stage 1 sends the offset of each record of an uncompressed pcap (no bytes), the bytes of
    gzip and pcapng records; stage 2 reads the same bytes back (oracle: the capture reader)."""
    files = _mixed_formats(tmp_path)
    want = {i: _records(f) for i, f in enumerate(files)}
    reader = ar.RecordReader(files)
    seen = {"pos": 0, "data": 0}
    before = {}  # file -> records in its earlier ranges (a range numbers its records from 0)
    ranges = ar.plan_ranges(files, split)
    assert len(ranges) > len(files) or split == 0
    for r in ranges:
        rows = list(ar.decode_range(r))
        base = before.get(r.file, 0)
        for rid, idx, ts, lt, data, orig, flow, kind, pos, caplen, _, file in rows[:-1]:
            if kind != ar.KIND_TCP:
                continue
            plain = not files[r.file].endswith((".gz", ".pcapng"))
            assert (pos is not None) == plain and (data is None) == plain
            assert file == r.file
            if plain:
                data = reader.read(r.file, pos, caplen, ts, orig)
            assert (ts, lt, data) == want[r.file][base + idx]
            seen["pos" if plain else "data"] += 1
        before[r.file] = base + _meta_of(rows)["count"]
    reader.close()
    assert seen["pos"] > 100 and seen["data"] > 20
    assert before == {i: len(w) for i, w in want.items()}


def _interleaved(path, names):
    """One pcap of the records of several samples taken in turn (one flow each), times increasing."""
    from pcapbuild import write_pcap

    recs = [_records(os.path.join(SAMPLES, n)) for n in names]
    out = []
    for i in range(max(map(len, recs))):
        for r in recs:
            if i < len(r):
                out.append((1_700_000_000 + len(out) / 1000, r[i][1], r[i][2]))
    path.write_bytes(write_pcap(out))
    return str(path)


@pytest.mark.parametrize("nparts,sort_rows", [(2, None), (3, None), (3, 40)])
def test_stage1_files_hold_one_flow_per_row_group_and_stage2_tasks_read_only_their_own(tmp_path, monkeypatch,
                                                                                        nparts, sort_rows):
    """Stage 1 writes the rows of records given by offset sorted by flow, so that a row group
    mostly holds one flow; a stage-2 task skips the row groups of flows it does not run, and
    still gets all of its own records, sorted by flow then packet (oracle: every row of the
    stage-1 files, assigned to tasks by flow_task and sorted).  ``sort_rows``: the rows a task
    sorts at once, made small (then each run of that many rows is sorted, not the file)."""
    from amqp_dissect.pipelines.spark import stages

    monkeypatch.setattr(stages, "SEG_BATCH_ROWS", 16)
    if sort_rows:
        monkeypatch.setattr(stages, "SEG_SORT_ROWS", sort_rows)
    files = [_interleaved(tmp_path / "three.pcap", ("outcomes.pcap", "drain.pcap", "credit_one.pcap")),
             os.path.join(SAMPLES, "heartbeat.pcap")]
    seg = tmp_path / "seg"
    seg.mkdir()
    schema = stages.spark_arrow_schema(stages.stage1_schema())
    metas = [json.loads(stages._write_seg(str(seg), r, schema)[10]) for r in ar.plan_ranges(files, 0)]
    offsets = ar.layout(files, metas).offsets
    seg_files = sorted(str(p) for p in seg.glob("*.parquet"))
    rows = []
    for f in seg_files:
        t = pq.read_table(f).to_pylist()
        flows = [r["flow"] for r in t if r["flow"] is not None]
        # (rows without a flow, not TCP, last; the three flows of the first file interleaved)
        assert flows == sorted(flows) or (sort_rows and f == seg_files[0])
        for r in t:
            if r["kind"] == ar.KIND_TCP:
                rows.append((r["flow"], offsets[r["rid"]] + r["idx"] + 1, r["ts"], r["linktype"], r["data"],
                             r["orig_len"], r["file"], r["pos"], r["caplen"]))
    assert len({r[0] for r in rows}) == 4 and all(r[7] is not None and r[4] is None for r in rows)
    groups = {f: pq.ParquetFile(f).metadata.num_row_groups for f in seg_files}
    read = []
    real = stages._groups_of
    monkeypatch.setattr(stages, "_groups_of", lambda meta, is_mine: read.append(real(meta, is_mine)) or read[-1])
    total = 0
    for part in range(nparts):
        want = sorted(r for r in rows if stages.flow_task(r[0], nparts) == part)
        got = list(stages.task_records(seg_files, offsets, part, nparts, {}))
        assert got == want
        total += len(got)
    assert total == len(rows)
    # each task read fewer row groups than the files hold (the three-flow file's groups hold one flow)
    per_task = [sum(len(g) for g in read[i * len(seg_files):(i + 1) * len(seg_files)]) for i in range(nparts)]
    assert all(n < sum(groups.values()) for n in per_task), (per_task, groups)


@pytest.mark.parametrize("window", [1, 700, 4096, None])
def test_record_reader_windows_give_each_record_in_any_order(tmp_path, window):
    """The reader serves records from a window of the file read at once (one pread per window):
    forward, backward, shuffled and with two files interleaved, every record is the capture
    reader's (the oracle), whatever the window's size (1 byte: a pread per record)."""
    import random

    files = [f for f in _mixed_formats(tmp_path) if not f.endswith((".gz", ".pcapng"))]
    asks = []
    for r in ar.plan_ranges(files, 0):
        recs = _records(files[r.file])
        for row in ar.decode_range(r):
            if row[7] == ar.KIND_TCP:
                asks.append(((row[11], row[8], row[9], row[2], row[5]), recs[row[1]][2]))
    assert len({a[0][0] for a in asks}) == len(files) >= 3 and len(asks) > 100
    shuffled = asks[:]
    random.Random(7).shuffle(shuffled)
    for order in (asks, asks[::-1], shuffled):
        reader = ar.RecordReader(files, max_open=2, window=window)  # (fewer open files than files)
        assert [reader.read(*a) for a, _ in order] == [want for _, want in order]
        # a batch at once, as stage 2 reads them: by column, each file's records a window at a time
        assert reader.read_many(*(np.array([a[k] for a, _ in order], np.int64) for k in range(5))) == [
            want for _, want in order]
        reader.close()


def test_stage2_rows_come_from_batches_with_their_records_read_by_offset_or_carried(tmp_path):
    """fill_batches gives FlowRunner's rows from Arrow batches: the bytes of a record given by offset
    read from its file, a record's own bytes (gzip, pcapng) as they are, a row naming a flow only
    (no record) without bytes; the oracle is the capture reader's records."""
    import pyarrow as pa

    files = _mixed_formats(tmp_path)
    rows, want = [], []
    for r in ar.plan_ranges(files, 0):
        recs = _records(files[r.file])
        for rid, idx, ts, lt, data, orig, flow, kind, pos, caplen, _, file in list(ar.decode_range(r))[:-1]:
            if kind == ar.KIND_TCP:
                rows.append((flow, len(rows) + 1, ts, lt, data, orig, file, pos, caplen))
                want.append((flow, len(want) + 1, ts, lt, recs[idx][2], orig))
    rows.append(("only a flow", 0, 0, 0, None, 0, None, None, None))
    want.append(("only a flow", 0, 0, 0, None, 0))
    assert any(r[4] is None for r in rows[:-1]) and any(r[4] is not None for r in rows)  # (both ways)
    names = ("flow", "packet", "ts", "linktype", "data", "orig_len", "file", "pos", "caplen")
    types = (pa.string(), pa.int64(), pa.int64(), pa.int32(), pa.binary(), pa.int64(), pa.int32(), pa.int64(),
             pa.int64())
    t = pa.table({n: pa.array([r[i] for r in rows], ty) for i, (n, ty) in enumerate(zip(names, types))})
    for size in (1, 7, len(rows)):
        reader = ar.RecordReader(files)
        assert list(ar.fill_batches(t.to_batches(max_chunksize=size), reader)) == want, size
        reader.close()


def test_record_reader_notices_a_changed_file(tmp_path):
    import shutil as sh

    p = tmp_path / "c.pcap"
    sh.copy(os.path.join(SAMPLES, "credit_one.pcap"), p)
    rows = [row for row in ar.decode_range(ar.plan_ranges([str(p)], 0)[0]) if row[7] == ar.KIND_TCP]
    _, _, ts, _, _, orig, _, _, pos, caplen, _, _ = rows[5]
    reader = ar.RecordReader([str(p)])
    assert reader.read(0, pos, caplen, ts, orig) == _records(str(p))[rows[5][1]][2]
    reader.close()
    data = bytearray(p.read_bytes())
    data[pos] ^= 1  # the record's seconds
    p.write_bytes(bytes(data))
    with pytest.raises(ar.CaptureChanged, match=f"c.pcap: changed while it was read .*byte {pos}"):
        ar.RecordReader([str(p)]).read(0, pos, caplen, ts, orig)
    at = [np.array([0] * len(rows), np.int64)] + [np.array([r[k] for r in rows], np.int64) for k in (8, 9, 2, 5)]
    with pytest.raises(ar.CaptureChanged, match=f"c.pcap: changed while it was read .*byte {pos} differs"):
        ar.RecordReader([str(p)]).read_many(*at)  # (a batch: the one record that changed named)
    p.write_bytes(bytes(data[:pos + 20]))  # cut short
    with pytest.raises(ar.CaptureChanged):
        ar.RecordReader([str(p)]).read(0, pos, caplen, ts, orig)
    p.write_bytes(b"\x00" * 100)  # no longer a pcap
    with pytest.raises(ar.CaptureChanged, match="no longer a pcap"):
        ar.RecordReader([str(p)]).read(0, pos, caplen, ts, orig)


def test_stage1_packs_many_small_ranges_into_a_few_tasks_of_even_bytes():
    """Up to STAGE1_TASKS_PER_SLOT tasks per slot, one range each; beyond that the ranges are
    packed, every range in exactly one task, the tasks' bytes within the largest range of each
    other (longest first)."""
    from amqp_dissect.pipelines.spark import job

    def rng(i, size):
        return ar.Range(i, i, f"f{i}", 0, 0, None, size)

    few = [rng(i, 1000 * (i + 1)) for i in range(5)]
    assert sorted(len(t) for t in job.stage1_tasks(few, 2)) == [1] * 5
    sizes = [(37 * i) % 1000 + 1 for i in range(300)]
    many = [rng(i, n) for i, n in enumerate(sizes)]
    tasks = job.stage1_tasks(many, 2)
    assert len(tasks) == 2 * job.STAGE1_TASKS_PER_SLOT
    assert sorted(t[0] for task in tasks for t in task) == list(range(300))
    loads = [sum(ar.Range(*t).size for t in task) for task in tasks]
    assert max(loads) - min(loads) <= max(sizes)
    assert job.stage1_tasks(many[:1], 8) == [[many[0].as_tuple()]]


def test_the_tables_and_summaries_steps_pack_their_small_items_into_a_task_per_slot_or_two():
    """The tables step's ranges (by rows) and the summaries (those over the deliveries heavier)
    share tasks: every item in exactly one task, at most TABLE_TASKS_PER_SLOT tasks per slot
    (summaries: one per slot), each large range of the deliveries in a task of its own."""
    from amqp_dissect.pipelines.spark import stages, summaries, tables

    counts = {"deliveries": 300_000, "links": 16, "connections": 8, "stalls": 40, "errors": 0}
    ranges = {"deliveries": 4, "links": 1, "connections": 1, "stalls": 1, "errors": 1}
    items = [(t, r) for t in counts for r in range(ranges[t])]
    tasks = stages.pack_tasks(items, lambda it: counts[it[0]] // ranges[it[0]], tables.TABLE_TASKS_PER_SLOT * 2)
    assert len(tasks) == 4 and sorted(it for task in tasks for it in task) == sorted(items)
    assert sorted(sum(t == "deliveries" for t, _ in task) for task in tasks) == [1, 1, 1, 1]
    assert len(stages.pack_tasks(items, lambda it: 1, 100)) == len(items)  # (never more tasks than items)
    for slots in (1, 2, 3, 8):
        got = stages.pack_tasks(list(summaries.SUMMARIES), lambda n: 4 if "deliveries" in summaries.SUMMARY_READS[n]
                                else 1, slots)
        assert len(got) == min(slots, len(summaries.SUMMARIES))
        assert sorted(n for task in got for n in task) == sorted(summaries.SUMMARIES)


def test_balance_flows_evens_out_the_tasks():
    from collections import Counter

    # the benchmark's shape: 24 flows of the same size, spread over the ranges; hash
    # partitioning into 8 tasks gives some 4 flows and some 1, the plan 3 each
    summaries = [{"rid": r, "flows": [[f"10.0.0.{i}:1|10.0.0.9:5672", 100] for i in range(24) if i % 3 != r]}
                 for r in range(3)]
    plan = ar.balance_flows(summaries, {0: 0, 1: 10, 2: 20}, 8, 24 * 200)
    assert sorted(Counter(plan.values()).values()) == [3] * 8
    assert len(plan) == 24
    # unequal flows: every counted flow placed, no task above the even share plus the largest flow
    rng = np.random.default_rng(3)
    sizes = {f"f{i}": int(rng.pareto(1.2) * 1000) + 1 for i in range(300)}
    summaries = [{"rid": 0, "flows": sorted(sizes.items())[:150]}, {"rid": 1, "flows": sorted(sizes.items())[150:]},
                 {"rid": 2, "flows": [["not-in-the-capture", 10 ** 9]]}]
    total = sum(sizes.values()) + 5000  # flows no summary counts
    plan = ar.balance_flows(summaries, {0: 0, 1: 100}, 7, total)
    assert set(plan) == set(sizes)
    loads = [5000 / 7] * 7
    for f, i in plan.items():
        loads[i] += sizes[f]
    assert max(loads) <= total / 7 + max(sizes.values())
    assert max(loads) - min(loads) <= max(sizes.values())


def test_range_bounds_cut_even_ranges():
    from bisect import bisect_right

    rng = np.random.default_rng(11)
    for parts in (1, 2, 3, 8):
        chunks = [((int(rng.integers(0, 50)), f"f{int(rng.integers(0, 4))}", int(rng.integers(0, 10 ** 6))),
                   int(rng.integers(1, 1025))) for _ in range(400)]
        bounds = ar.range_bounds(chunks, parts)
        assert bounds == sorted(set(bounds)) and len(bounds) <= parts - 1
        got = [0] * (len(bounds) + 1)
        for key, n in chunks:
            got[bisect_right(bounds, key)] += n
        total = sum(n for _, n in chunks)
        assert len(got) == parts
        assert max(got) <= total / parts + max(n for _, n in chunks)
    # one key repeated everywhere: one range
    assert ar.range_bounds([((5, "f", 1), 100)] * 10, 4) == []
    assert ar.range_bounds([], 4) == []


# --------------------------------------------------------------------------- Spark


def test_partition_keys_route_rows_to_their_partition(spark):
    """The keys the job partitions by land in partition i of repartition(n, key), by Spark's own placement."""
    from pyspark.sql import functions as F

    from amqp_dissect.pipelines.spark import partition_keys

    for n in (1, 2, 5, 8):
        keys = partition_keys(spark, n)
        df = spark.createDataFrame([(k, i) for i, k in enumerate(keys)] * 3, "k long, i long")
        got = df.repartition(n, "k").select(F.spark_partition_id().alias("p"), "i").collect()
        assert all(r.p == r.i for r in got) and len({r.i for r in got}) == n


@pytest.mark.parametrize("writer", ["tasks", "spark"])
def test_tables_are_written_in_single_process_order(spark, tmp_path, monkeypatch, writer):
    """Tables large enough are written by several tasks, each a range of the output order:
    read back in file-name order (as pandas does), every table equals the single-process
    one row for row, unsorted; the stage-2 tasks hold the flows the plan gave them.  Both
    writers: the tasks' own Parquet files (a local output directory) and Spark's writer
    (what a remote output gets)."""
    from amqp_dissect.pipelines import spark as sj
    from amqp_dissect.pipelines.spark import job
    from amqp_dissect.pipelines.spark import tables as table_writer

    monkeypatch.setattr(table_writer, "TABLE_PART_ROWS", 40)
    if writer == "spark":
        monkeypatch.setattr(job, "_direct_dir", lambda uri: None)
    out = tmp_path / "out"
    res = _run(spark, SAMPLE_FILES, out, frames=True, partitions=3, keep_work=True)
    assert res["files"] == capture_order(SAMPLE_FILES)
    # a local work directory: stage 2's tasks read the stage-1 files themselves; else Spark's shuffle
    assert res["stats"]["stage2_direct"] is (writer == "tasks")
    # every step's Python tasks counted their CPU seconds (accumulators)
    assert {"stage1", "stage2", "tables", "summaries"} <= set(res["stats"]["cpu"]) <= {
        "stage1", "stage2", "reruns", "tables", "summaries"}
    assert res["stats"]["cpu"]["stage2"] > 0 and res["stats"]["cpu"]["stage1"] > 0
    a = read_analysis(capture_order(SAMPLE_FILES))
    for t in TABLES:
        sp = pd.read_parquet(out / t)
        lp = getattr(a, t)
        assert len(sp) == len(lp) == res["counts"][t], t
        for c in lp.columns:
            assert _cells(sp[c]) == _cells(lp[c]), (t, c)
    assert res["counts"]["deliveries"] == len(a.deliveries) > 100
    fr = pd.read_parquet(out / "frames")
    assert [json.loads(x) for x in fr.json] == expected_frames(SAMPLE_FILES)
    assert fr.packet.tolist() == [f["packet"] for f in expected_frames(SAMPLE_FILES)]
    for t in ("deliveries", "frames"):  # cut into ranges at chunk (1024 rows) boundaries
        files = [f for f in os.listdir(out / t) if f.endswith(".parquet")]
        assert sum(1 for f in files if len(pd.read_parquet(out / t / f))) > 1, t
        if writer == "tasks":
            assert all(f.startswith("part-") and len(f) == len("part-00000.parquet") for f in files), files
    for t in TABLES:  # the Spark schema, whoever wrote the files
        assert spark.read.parquet(str(out / t)).schema == sj.table_schema(t), t
    # the summaries: Spark's jobs (a remote output) or Python tasks (a local one), same rows and schema
    assert_summaries(str(out), a)
    for name in sj.SUMMARIES:  # Spark reads Parquet columns as nullable: the files' own schema says which are not
        want = sj.summary_spark_schema(name)
        got = spark.read.parquet(str(out / name)).schema
        assert [(f.name, f.dataType) for f in got] == [(f.name, f.dataType) for f in want], name
        got = pq.read_schema(glob.glob(str(out / name / "*.parquet"))[0])
        assert [(f.name, f.nullable) for f in got] == [(f.name, f.nullable) for f in want], name
    # stage 2: the flows the summaries count sit in the task the plan gave them
    seg = pd.read_parquet(out / "_work" / "seg", columns=["kind", "meta"])
    summaries = [json.loads(m) for m in seg[seg.kind == ar.KIND_SUMMARY].meta]
    lay = ar.layout(ar.expand_inputs(SAMPLE_FILES), summaries)
    plan = ar.balance_flows(summaries, lay.offsets, 3, lay.tcp_records)
    flow_dir = out / "_work" / "rows0" / "table=_flow"
    placed = {}
    for f in os.listdir(flow_dir):
        if f.endswith(".parquet"):
            for flow in pd.read_parquet(flow_dir / f, columns=["flow"]).flow:
                placed[flow] = int(f.split("-")[1])
    assert placed and {f: placed[f] for f in plan} == plan




def test_rotated_and_gzipped_files_agree(spark, tmp_path):
    """Every sample cut every 9 records (connections span files), every other file gzipped,
    in nested daily folders: the same numbers as the original captures read in order."""
    parts = []
    for i, f in enumerate(SAMPLE_FILES):
        day = tmp_path / "archive" / f"day{i % 3}"
        parts += split_capture(f, str(day), packets=9, gzip_output=bool(i % 2))
    assert len(parts) > 3 * len(SAMPLE_FILES)
    assert any(p.endswith(".gz") for p in parts)
    cut = next(p for p in parts[len(parts) // 2:] if not p.endswith(".gz"))
    data = open(cut, "rb").read()
    open(cut, "wb").write(data[:-10])  # damaged partway: both paths read it up to the damage
    res = _run(spark, [str(tmp_path / "archive")], tmp_path / "out", window=0.5)
    assert len(res["files"]) == len(parts)
    a = assert_same_tables(str(tmp_path / "out"), parts)
    assert_summaries(str(tmp_path / "out"), a, window=0.5)
    assert [(p, str(e)) for p, e in a.source.errors] == [(cut, res["errors"][0][1])] == res["errors"]


EDITCAP = shutil.which("editcap")
MERGECAP = shutil.which("mergecap")


def _editcap_parts(whole, folder, per_file: int) -> list[str]:
    """``whole`` cut by ``editcap -c per_file``: its parts in order (x_00000_<time>.pcap, ...)."""
    import subprocess

    os.makedirs(folder, exist_ok=True)
    subprocess.run([EDITCAP, "-F", "pcap", "-c", str(per_file), str(whole), os.path.join(folder, "x.pcap")],
                   check=True, capture_output=True)
    return sorted(glob.glob(os.path.join(folder, "x_*.pcap")))


def _mergecap(out, paths) -> str:
    import subprocess

    subprocess.run([MERGECAP, "-F", "pcap", "-w", str(out), *map(str, paths)], check=True, capture_output=True)
    return str(out)


@pytest.mark.skipif((EDITCAP is None or MERGECAP is None) and not os.environ.get("CI"),
                    reason="editcap / mergecap are not installed (tests/install-deps.sh)")
def test_capture_sets_read_as_one_capture_agree(spark, tmp_path):
    """Issue 24 item 1.  (a) A rotated set: the samples as one capture (mergecap), cut with
    ``editcap -c`` and named as ``tcpdump -C`` names its files (cap.pcap, cap.pcap1, ...): in glob,
    reversed and shuffled order the same files and packet numbers, and the job on the shuffled
    set gives the tables and frames of the whole capture.  (b) Captures whose times overlap: the
    first 16 parts interleaved into two files (odd parts, even parts), the later parts kept as
    rotated files; ``mergecap -w`` of the set is the oracle of the merge: the same tables and
    frames (packet numbers), the overlapping pair read merged by one task."""
    import random

    whole = _mergecap(tmp_path / "whole.pcap", SAMPLE_FILES)
    want_records = _records(whole)
    # (a) the rotated set
    parts = _editcap_parts(whole, tmp_path / "cut", 40)
    assert len(parts) > 12
    names = []
    for i, part in enumerate(parts):
        names.append(str(tmp_path / "set" / ("cap.pcap" + (str(i) if i else ""))))
        os.renames(part, names[-1])
    globbed = sorted(names)
    shuffled = list(names)
    random.Random(24).shuffle(shuffled)
    assert globbed != names  # (cap.pcap10 before cap.pcap2)
    plans = {how: _layout(ar.expand_inputs(order), 4096)[1] for how, order in
             (("glob", globbed), ("reversed", globbed[::-1]), ("shuffled", shuffled))}
    for how, lay in plans.items():
        assert lay.order == names and lay.merged == [] and lay.records == len(want_records), how
    out = tmp_path / "out-rotated"
    res = _run(spark, shuffled, out, frames=True, split_size=4096)
    assert res["files"] == names and res["stats"]["merged_groups"] == []
    assert res["order"].startswith("merged by time") and res["gaps"] == []
    a = assert_same_tables(str(out), [whole])
    assert len(a.deliveries) > 100
    fr = pd.read_parquet(out / "frames")
    assert [json.loads(x) for x in fr.json] == expected_frames([whole])

    # (b) overlapping captures: odd and even parts of the first 16, then rotated files
    cut = _editcap_parts(whole, tmp_path / "cut2", 25)
    assert len(cut) > 20
    os.makedirs(tmp_path / "ovl")
    odd = _mergecap(tmp_path / "ovl" / "if1.pcap", cut[0:16:2])
    even = _mergecap(tmp_path / "ovl" / "if2.pcap", cut[1:16:2])
    rest = []
    for i, part in enumerate(cut[16:]):
        rest.append(str(tmp_path / "ovl" / f"rest.pcap{i}"))
        os.rename(part, rest[-1])
    files = [even] + rest[::-1] + [odd]
    merged = _mergecap(tmp_path / "merged.pcap", files)
    assert _records(merged) == want_records  # (mergecap's merge is the whole capture again)
    out = tmp_path / "out-overlap"
    res = _run(spark, files, out, frames=True, split_size=4096)
    fr = pd.read_parquet(out / "frames")
    assert [json.loads(x) for x in fr.json] == expected_frames([merged])
    a = assert_same_tables(str(out), [merged])
    assert res["counts"]["deliveries"] == len(a.deliveries) > 100
    assert res["stats"]["merged_groups"] == [[odd, even]]
    assert res["files"] == [odd, even] + rest
    assert "interleaved where they overlap" in res["order"] and "1 group" in res["order"]


def _fake_header_capture(path, n_messages=60):
    """Real AMQP traffic whose message bodies are full of record-header look-alikes."""
    from proton import Message

    from pcapbuild import TcpConversation, write_pcap
    from protonpump import Pump

    t0 = 1_700_000_000
    fake = struct.pack("<IIII", t0, 500, 8, 8) + b"\xff" * 24
    recs = []
    for c in range(3):
        p = Pump(server_credit=20, server_max_frame=4096)
        snd = p.sender(f"queue-{c}")
        p.run()
        for i in range(n_messages):
            p.send(snd, Message(body=fake * (5 + i % 40)))
            if i % 5 == 4:
                p.run()
        p.run()
        p.close()
        conv = TcpConversation.from_exchange(p.chunks, client=("10.0.0.1", 41000 + c), server=("10.0.0.2", 5672),
                                             t0=t0 + c * 0.05, dt=0.001, acks=True)
        recs.extend(conv.records)
    recs.sort(key=lambda r: r[0])
    with open(path, "wb") as f:
        f.write(write_pcap(recs))


def test_byte_range_split_agrees(spark, tmp_path):
    cap = tmp_path / "big.pcap"
    _fake_header_capture(cap)
    res = _run(spark, [str(cap)], tmp_path / "out", split_size=8192)
    st = res["stats"]
    assert st["ranges"] > 5 and st["redo_files"] == []
    assert st["rejected_boundaries"] > 0
    a = assert_same_tables(str(tmp_path / "out"), [str(cap)])
    assert len(a.deliveries) == 180
    assert_summaries(str(tmp_path / "out"), a)


def _global_capture(path):
    """A capture whose per-flow results depend on the rest of it:

    * credit_one.pcap cut inside a link-credit stall (connection left open, stall open);
    * heartbeat.pcap's traffic 1000 s later: the single-process reassembler's idle sweep,
      driven by that traffic, expires the first connection (idle > 900 s);
    * then a malformed packet (a packet note: the last record that produces an event),
      then non-AMQP TCP traffic: the analyzer's end time is not the last record's time.
    """
    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    a = _seconds(_records(os.path.join(SAMPLES, "credit_one.pcap")))[:28]
    b = _seconds(_records(os.path.join(SAMPLES, "heartbeat.pcap")))
    shift = a[-1][0] + 1000.0 - b[0][0]
    b = [(ts + shift, lt, data) for ts, lt, data in b]
    t = b[-1][0]
    bad = ethernet_frame(b"\x45\x00\x00\x14")  # an IPv4 header cut short
    tail = [(t + 3.0, 1, bad)]
    for i in range(4):
        pkt = tcp_packet("10.9.9.9", "10.9.9.8", 33000, 80, seq=1 + i * 10, payload=b"GET /abc\r\n")
        tail.append((t + 5.0 + i * 0.5, 1, ethernet_frame(pkt)))
    with open(path, "wb") as f:
        f.write(write_pcap(a + b + tail))


def test_results_that_depend_on_the_whole_capture_agree(spark, tmp_path):
    cap = tmp_path / "global.pcap"
    _global_capture(cap)
    res = _run(spark, [str(cap)], tmp_path / "out")
    a = assert_same_tables(str(tmp_path / "out"), [str(cap)])
    assert "idle" in a.connections.transport_end.tolist()
    assert a.stalls.end.isna().any()
    assert res["stats"]["reruns"]["ticks"] >= 1 and res["stats"]["reruns"]["end"] >= 1
    assert res["stats"]["packet_errors"] == 1


def test_a_file_changed_between_the_stages_is_an_input_error(spark, tmp_path, monkeypatch):
    """Stage 2 reads pcap records again at their offsets: a file rewritten after stage 1
    read it (a tcpdump ring buffer wrapping around) stops the job with an InputError that
    names it, not with wrong numbers."""
    import shutil as sh

    from amqp_dissect.pipelines.spark import job

    arch = tmp_path / "arch"
    arch.mkdir()
    for name in ("credit_one.pcap", "heartbeat.pcap"):
        sh.copy(os.path.join(SAMPLES, name), arch / name)
    victim = arch / "heartbeat.pcap"
    stage1 = job._stage1

    def stage1_then_rewrite(*a, **kw):
        summaries = stage1(*a, **kw)
        data = bytearray(victim.read_bytes())
        data[24 + 4] ^= 1  # the first record's microseconds
        victim.write_bytes(bytes(data))
        return summaries

    monkeypatch.setattr(job, "_stage1", stage1_then_rewrite)
    with pytest.raises(ar.InputError, match="heartbeat.pcap: changed while it was read") as e:
        _run(spark, [str(arch)], tmp_path / "out")
    assert e.value.code == "format"


def test_a_capture_without_amqp_gives_empty_tables_with_their_columns(spark, tmp_path):
    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    from amqp_dissect.results.schema import names

    cap = tmp_path / "http.pcap"
    recs = [(1_700_000_000 + i * 0.5, 1, ethernet_frame(tcp_packet("10.9.9.9", "10.9.9.8", 33000, 80, seq=1 + i * 10,
                                                                   payload=b"GET /abc\r\n"))) for i in range(5)]
    cap.write_bytes(write_pcap(recs))
    res = _run(spark, [str(cap)], tmp_path / "out", frames=True)
    assert res["counts"] == {**dict.fromkeys(TABLES, 0), "frames": 0}
    for t in TABLES:
        df = pd.read_parquet(tmp_path / "out" / t)
        assert len(df) == 0 and list(df.columns) == list(names(t)), t
    for name in ("latency_by_link", "outcomes", "frames"):
        assert len(pd.read_parquet(tmp_path / "out" / name)) == 0


def test_cli_archive_writes_parquet(tmp_path, capsys, spark):
    from amqp_dissect.cli import main as m

    out = tmp_path / "cli-out"
    rc = m.main(["archive", *SAMPLE_FILES, "--out", str(out), "--partitions", "2", "--split-size", "20k",
                 "--window", "10"])
    o, e = capsys.readouterr()
    assert rc == 0, e
    local = read_analysis(SAMPLE_FILES)
    assert f"tables: connections {len(local.connections)}," in o and "highest settlement latency" in o
    assert "\norder: merged by time: files by their first packet's time" in o  # (a set: the order used)
    for t in TABLES + ("latency_by_link", "latency_by_address", "latency_by_window", "outcomes",
                       "stalls_by_link", "stalls_by_address"):
        assert len(pd.read_parquet(out / t).columns) > 2
    assert len(pd.read_parquet(out / "deliveries")) == len(local.deliveries)
    assert not os.path.exists(out / "_work")  # (the job's work directory is removed)
    assert m.main(["archive", str(tmp_path / "missing"), "--out", str(out)]) == m.EXIT_OPEN
    (tmp_path / "empty").mkdir()
    assert m.main(["archive", str(tmp_path / "empty"), "--out", str(out)]) == m.EXIT_FORMAT
    assert m.main(["archive", SAMPLES, "--out", str(out), "--conf", "nokeyvalue"]) == m.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("amqp-dissect: ") for line in err)


def test_a_range_is_sorted_whether_its_chunks_come_in_order_or_not():
    """sorted_range_table sorts a range's rows by (_k1, _flow, _k2), keeps the rows of ties in
    chunk order (a stable sort) and skips the copy when they already are in order: the same
    table either way as pyarrow's sort_by (the oracle), with chunks in order, reversed and
    shuffled, and the bounds cutting the range."""
    import random

    import pyarrow as pa

    from amqp_dissect.pipelines.archive import tables as at

    rng = random.Random(3)
    keys = sorted((k1, f"f{rng.randrange(3)}", rng.randrange(4)) for k1 in range(40) for _ in range(3))
    schema = pa.schema([("v", pa.int64()), ("_flow", pa.string()), ("_k1", pa.int64()), ("_k2", pa.int64())])
    batches = []
    for lo in range(0, len(keys), 7):  # chunks of 7 rows, in key order
        part = keys[lo:lo + 7]
        batches.append(pa.RecordBatch.from_arrays([pa.array(range(lo, lo + len(part))),
                                                   pa.array([k[1] for k in part]), pa.array([k[0] for k in part]),
                                                   pa.array([k[2] for k in part])], schema=schema))
    bounds = [keys[30], keys[90]]
    for order in ("in order", "reversed", "shuffled"):
        bs = batches[::-1] if order == "reversed" else rng.sample(batches, len(batches)) if order == "shuffled" \
            else batches
        for r in range(len(bounds) + 1):
            chunks = [(0, r, at.batch_ipc(b)) for b in bs]
            got = at.sorted_range_table(iter(chunks), bounds, [set()])
            whole = pa.Table.from_batches(bs).sort_by([("_k1", "ascending"), ("_flow", "ascending"),
                                                       ("_k2", "ascending")])
            lo = 0 if r == 0 else [tuple(k) for k in zip(whole["_k1"].to_pylist(), whole["_flow"].to_pylist(),
                                                         whole["_k2"].to_pylist())].index(bounds[r - 1])
            hi = whole.num_rows if r == len(bounds) else [
                tuple(k) for k in zip(whole["_k1"].to_pylist(), whole["_flow"].to_pylist(),
                                      whole["_k2"].to_pylist())].index(bounds[r])
            assert got.equals(whole.slice(lo, hi - lo).drop_columns(["_flow", "_k1", "_k2"])), (order, r)


def test_rows_put_in_order_by_runs_or_by_a_take_are_the_rows_a_take_gives():
    """in_order gives the rows of ``t.take(order)`` (the oracle), one chunk per column: for the order
    0, 1, 2, ... (the table itself, no copy), for orders made of a few long runs (slices of the
    table: a range whose sorted chunks of a few flows interleave) and for shuffled ones (a take)."""
    import random

    import pyarrow as pa

    from amqp_dissect.pipelines.archive import tables as at

    rng = random.Random(5)
    for n in (1, 2, 63, 64, 200, 5000):
        t = pa.concat_tables([pa.table({"v": pa.array(range(lo, min(n, lo + 97))),
                                        "s": pa.array([f"r{i}" if i % 5 else None for i in range(lo, min(n, lo + 97))])})
                              for lo in range(0, n, 97)])  # (several chunks, as concat_tables gives)
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randrange(1, 6)))) if n > 1 else []
        runs = [list(range(a, b)) for a, b in zip([0] + cuts, cuts + [n])]
        rng.shuffle(runs)
        shuffled = list(range(n))
        rng.shuffle(shuffled)
        for order in (list(range(n)), [i for run in runs for i in run], shuffled):
            got = at.in_order(t, pa.array(order, pa.uint64()))
            assert got.equals(t.take(pa.array(order))), (n, order[:8])
            if order == list(range(n)):
                assert got is t
            elif (sum(1 for a, b in zip(order, order[1:]) if b != a + 1) + 1) * at.RUN_ROWS <= n:
                assert all(c.num_chunks == 1 for c in got.columns), n  # (made of the runs: each column copied once)


def test_the_python_tasks_collect_garbage_as_the_cli_does_and_use_arrow_threads_for_their_cores_only(spark):
    # the job's tasks set the worker's garbage collector as the CLI's processes do (stage 2 spent
    # about a twentieth of its CPU walking the objects a default collector walks)
    from amqp_dissect.pipelines import ANALYSIS_GC
    from amqp_dissect.pipelines.spark.stages import Meter, metered

    def fn(_items):
        import gc

        import pyarrow as pa

        yield gc.get_threshold(), pa.cpu_count()
    got = spark.sparkContext.parallelize([0, 1], 2).mapPartitions(metered(Meter(spark), "test", fn)).collect()
    # (and Arrow's thread pool the cores of a task: one, spark.task.cpus's default)
    assert got == [(ANALYSIS_GC, 1), (ANALYSIS_GC, 1)]
