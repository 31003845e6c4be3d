"""The columnar table path: deliveries streamed as Arrow batches built column by column, and the
csv / jsonl text made a column at a time.

Oracles:
- the row path (``analytics.delivery_row``, one dict per delivery, itself checked against the
  unfolded analysis in test_folding.py) for the batches built from delivery objects;
- pandas' ``DataFrame.to_csv`` (the csv module underneath) for the csv text;
- Python's ``json.dumps`` for the jsonl text;
- ``pyarrow.Schema.from_pandas`` for the pandas metadata of the Parquet schemas.
"""

from __future__ import annotations

import glob
import io
import json
import math
import os
import subprocess
import sys
import tracemalloc

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from proton import Message

from eventkeys import analyze_file
from live_rows import LiveRows
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream
from amqp_dissect.pipelines.writers.tables import write_batches, write_table
from amqp_dissect.results import schema
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.results.schema import REGISTRY, TABLES, columns
from amqp_dissect.results.tables import (
    arrow_schema, batch_frame, columns_batch, csv_text, jsonl_text, pandas_dtypes, record_batch, text_times)
from pcapbuild import TcpConversation, write_pcap
from protonpump import Pump

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
ROWS = {"connections": "connection_rows", "sessions": "session_rows", "links": "link_rows",
        "deliveries": "delivery_rows", "stalls": "stall_rows", "transactions": "transaction_rows",
        "violations": "violation_rows", "errors": "error_rows"}


def _proton_capture(tmp_path, messages: int):
    """Real proton traffic: one sender link, ``messages`` deliveries settled by the receiver, as a pcap."""
    p = Pump(server_credit=200, server_max_frame=16384)
    snd = p.sender("q")
    p.run()
    for i in range(messages):
        p.send(snd, Message(body=f"m{i}", properties={"k": "a,b\"c\nd"}))
        if i % 50 == 49:
            p.run()
    p.run()
    p.close()
    conv = TcpConversation.from_exchange(p.chunks, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.0001, acks=False)
    path = tmp_path / f"proton-{messages}.pcap"
    path.write_bytes(conv.pcap())
    return path


def _row_stream(path, fold_lag=None):
    """The deliveries table through the row path: (rows in stream order)."""
    ready: list = []
    an = Analyzer(rows=False, delivery_sink=lambda row, key: ready.append(row))
    if fold_lag is not None:
        an.fold_lag = fold_lag
    d = Dissector()
    last = None
    with open(path, "rb") as f:
        for rec in open_capture(f):
            for ev in d.feed(rec):
                an.feed(ev)
            last = rec.ts
    for ev in d.finish():
        an.feed(ev)
    an.finish(last)
    return ready + [row for _, row in an.live_deliveries()]


def _column_stream(path, batch_rows, fold_lag=None):
    stream = DeliveryStream(CaptureSource(path))
    if fold_lag is None:
        return list(stream.batches(batch_rows))
    # the stream makes its Analyzer when iterated: one with this fold lag
    from amqp_dissect.pipelines.runs import local

    class Lagged(Analyzer):
        def __init__(self, *a, **k):
            Analyzer.__init__(self, *a, **k)
            self.fold_lag = fold_lag

    orig = local.Analyzer
    local.Analyzer = Lagged
    try:
        return list(stream.batches(batch_rows))
    finally:
        local.Analyzer = orig


def _same_table(batches, rows):
    got = pa.Table.from_batches(batches, schema=arrow_schema("deliveries"))
    want = pa.Table.from_batches([record_batch(rows, "deliveries")], schema=arrow_schema("deliveries"))
    assert got.num_rows == want.num_rows
    for name in got.column_names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    assert got.equals(want)


# --------------------------------------------------------------------------- batches from delivery objects


@pytest.mark.parametrize("path", SAMPLES, ids=os.path.basename)
@pytest.mark.parametrize("lag", [None, 0, 3])
def test_column_batches_are_the_row_tables(path, lag):
    rows = _row_stream(path, lag)
    batches = _column_stream(path, 4, lag)
    assert all(len(b) <= 4 for b in batches)
    _same_table(batches, rows)


def test_column_batches_of_a_long_proton_stream(tmp_path):
    path = _proton_capture(tmp_path, 1200)
    rows = _row_stream(path, 100)
    batches = _column_stream(path, 256, 100)
    assert len(rows) == 1200 and len(batches) == 5
    assert [len(b) for b in batches] == [256, 256, 256, 256, 176]
    _same_table(batches, rows)


def test_empty_delivery_columns_make_an_empty_batch():
    an = Analyzer(rows=False)
    b = columns_batch("deliveries", *an.delivery_columns([]))
    assert len(b) == 0 and b.schema.equals(arrow_schema("deliveries"))


def test_delivery_columns_are_the_row_cells():
    """Cell for cell, before Arrow: the Python values of delivery_columns are the row dicts'."""
    for path in SAMPLES:
        folded: list = []
        an = Analyzer(rows=False, fold_out=folded)
        an.fold_lag = 1
        analyze_file(path, an)
        ds = folded + an.live()
        cols, idx, ctx = an.delivery_columns(ds)
        assert set(cols) | set(ctx) == set(schema.names("deliveries"))
        for i, dl in enumerate(ds):
            row = an._row(dl)
            for name, want in row.items():
                got = cols[name][i] if name in cols else ctx[name][idx[i]]
                assert got == want and type(got) is type(want), (os.path.basename(path), name, got, want)


# --------------------------------------------------------------------------- csv and jsonl text


def _old_csv(batch, table):
    """The oracle: pandas' to_csv of the typed batch with ISO times."""
    buf = io.StringIO()
    batch_frame(text_times(batch, table)).to_csv(buf, header=False, index=False)
    return buf.getvalue()


def _old_jsonl(batch, table, raw=None):
    """The oracle: json.dumps of each row dict (nested json columns as values)."""
    dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode
    t = text_times(batch, table)
    cols = []
    for i, c in enumerate(columns(table)):
        cols.append(raw[c.name] if raw is not None and c.name in raw else t.column(i).to_pylist())
    keys = [c.name for c in columns(table)]
    return "".join(dumps(dict(zip(keys, cells))) + "\n" for cells in zip(*cols))


TRICKY_TEXT = ["plain", "a,b", 'say "hi"', "two\nlines", "cr\ronly", "tab\there", " lead", "trail ", "", None,
               "é ünïcödé 🚀", "back\\slash", "nul\x00byte", "ctl\x1f\x01", "\u2028sep", "'single'", "#hash",
               '","', "\\\"", "\x7f", "end,\n"]
TRICKY_FLOAT = [1e-05, 1.0, 0.1, 1e16, 1.5e-4, 1.2345678901234568e+17, None, 2.0 ** -30, 1e300, -0.0, 5e-324,
                1e22, 0.00020003318786621094, 123.456, -7.25, 3.0, 1e-7, 9007199254740993.0, 0.5, 2.5, 1 / 3]
TRICKY_INT = [0, -1, 2 ** 63 - 1, -(2 ** 63), None, 42, 7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]
TRICKY_BOOL = [True, False, None] * 7
TRICKY_TIME = [1_700_000_000.0, 1_700_000_000.123456, None, 0.0, 1e-6, 1_700_000_000.9999995, 86399.5,
               951782400.25, 4102444800.0, 1.5, 2.5, 3.5, 1_700_000_000.0000005, 1_700_000_000.0000015,
               None, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def _tricky_stalls_rows():
    n = len(TRICKY_TEXT)
    rows = []
    for i in range(n):
        rows.append({"connection": TRICKY_TEXT[i], "channel": TRICKY_INT[i], "link": TRICKY_TEXT[-1 - i],
                     "kind": TRICKY_TEXT[(i + 3) % n], "start": TRICKY_TIME[i], "end": TRICKY_TIME[-1 - i],
                     "duration": TRICKY_FLOAT[i], "waiting": TRICKY_BOOL[i], "session": TRICKY_INT[-1 - i],
                     "link_index": i, "handle": None, "sender_side": "client", "sender": TRICKY_TEXT[(i + 7) % n],
                     "start_packet": i, "end_packet": None, "ended_by": TRICKY_TEXT[(i + 11) % n],
                     "open": TRICKY_BOOL[-1 - i]})
    return rows


def test_csv_text_is_what_pandas_writes():
    rows = _tricky_stalls_rows()
    b = record_batch(rows, "stalls")
    assert csv_text(b, "stalls") == _old_csv(b, "stalls")
    # infinite and huge values, through the float column
    rows[0]["duration"], rows[1]["duration"] = math.inf, -math.inf
    b = record_batch(rows, "stalls")
    assert csv_text(b, "stalls") == _old_csv(b, "stalls")


def test_jsonl_text_is_what_json_dumps_writes():
    rows = _tricky_stalls_rows()
    b = record_batch(rows, "stalls")
    got = jsonl_text(b, "stalls")
    assert got == _old_jsonl(b, "stalls")
    assert [json.loads(x)["connection"] for x in got.split("\n")[:-1]] == TRICKY_TEXT


def _analyzed(path):
    return analyze_file(path)


def _transaction_analyzer():
    """Hand-built frames with a declared and a committed transaction (no sample has one)."""
    from proton import Described, symbol
    from test_state import Script, _coordinator_payload, comp
    from amqp_dissect.amqp.codec import Symbol, UInt

    s = Script()
    s.open_both()
    s.begin_both()
    s.frame(0, "attach", name="txn", handle=UInt(0), role=False, source=comp("source"),
            target=comp("coordinator", capabilities=[Symbol("amqp:local-transactions")]),
            initial_delivery_count=UInt(0))
    s.frame(1, "attach", name="txn", handle=UInt(0), role=True, source=comp("source"), target=comp("coordinator"))
    s.flow(1, handle=0, dc=0, credit=10)
    s.transfer(handle=0, did=0, payload=_coordinator_payload(Described(symbol("amqp:declare:list"), [])))
    s.disposition(first=0, state=comp("declared", txn_id=b"tx-1"))
    return s.done()


@pytest.fixture(scope="module")
def analyzers():
    return [_analyzed(p) for p in SAMPLES] + [_transaction_analyzer()]


@pytest.mark.parametrize("table", TABLES)
def test_csv_and_jsonl_of_every_sample_table(analyzers, table):
    checked = 0
    for an in analyzers:
        rows = getattr(an, ROWS[table])()
        b = record_batch(rows, table)
        assert csv_text(b, table) == _old_csv(b, table), table
        raw = {c.name: [r[c.name] for r in rows] for c in columns(table) if c.type == schema.JSON}
        assert jsonl_text(b, table, raw) == _old_jsonl(b, table, raw), table
        checked += len(rows)
    assert checked > 0


def test_the_writers_write_what_the_oracles_write(tmp_path):
    rows = _tricky_stalls_rows()
    for fmt, oracle in (("csv", _old_csv), ("jsonl", _old_jsonl)):
        buf = io.StringIO()
        assert write_table(rows, "stalls", fmt, buf, batch_rows=5) == len(rows)
        want = "".join(oracle(record_batch(rows[i:i + 5], "stalls"), "stalls") for i in range(0, len(rows), 5))
        header = ",".join(schema.names("stalls")) + "\n" if fmt == "csv" else ""
        assert buf.getvalue() == header + want
        buf = io.StringIO()
        assert write_batches([record_batch(rows, "stalls")], "stalls", fmt, buf) == len(rows)
        assert buf.getvalue() == header + oracle(record_batch(rows, "stalls"), "stalls")


def test_write_table_holds_a_few_row_dicts_and_writes_what_one_conversion_writes(tmp_path):
    """Issue 40: the row dicts of a wide table (3 to 5 KB each) are converted a few hundred at a
    time, not a batch of 8192 at once.  Oracle for the bytes: one conversion (``record_batch``) of
    each batch of rows, written by pyarrow's ParquetWriter and by the csv / jsonl text of it."""
    from amqp_dissect.pipelines.writers import tables as writers

    base = _tricky_stalls_rows()
    live = LiveRows(base)

    n, per = 5000, 2000
    plain = [dict(base[i % len(base)]) for i in range(n)]
    oracle = [record_batch(plain[i:i + per], "stalls") for i in range(0, n, per)]
    for fmt in ("csv", "jsonl"):
        live.reset()
        buf = io.StringIO()
        assert write_table(live.rows(n), "stalls", fmt, buf, batch_rows=per) == n
        assert live.most <= writers.ROW_DICTS + 1, (fmt, live.most)
        head = ",".join(schema.names("stalls")) + "\n" if fmt == "csv" else ""
        raws = [{c.name: [r[c.name] for r in plain[i:i + per]] for c in columns("stalls") if c.type == schema.JSON}
                for i in range(0, n, per)]
        text = csv_text if fmt == "csv" else (lambda b, t, raw=None: jsonl_text(b, t, raw))
        want = "".join(text(b, "stalls", *([raw] if fmt == "jsonl" else [])) for b, raw in zip(oracle, raws))
        assert buf.getvalue() == head + want, fmt
    live.reset()
    got, want = tmp_path / "got.parquet", tmp_path / "want.parquet"
    assert write_table(live.rows(n), "stalls", "parquet", str(got), batch_rows=per) == n
    assert live.most <= writers.ROW_DICTS + 1, live.most
    with pq.ParquetWriter(str(want), arrow_schema("stalls")) as w:
        for b in oracle:
            w.write_table(pa.Table.from_batches([b], schema=arrow_schema("stalls")))
    assert got.read_bytes() == want.read_bytes()


# --------------------------------------------------------------------------- parquet row groups on a thread


def _stall_batches(n_batches):
    rows = _tricky_stalls_rows()
    return [record_batch(rows, "stalls") for _ in range(n_batches)], len(rows)


def test_parquet_row_groups_written_on_a_thread_are_the_file_one_thread_writes(tmp_path):
    """The oracle: pyarrow's ParquetWriter fed the same row groups in the caller's thread."""
    batches, per = _stall_batches(7)
    schema_ = arrow_schema("stalls")
    want = tmp_path / "want.parquet"
    with pq.ParquetWriter(str(want), schema_) as w:
        for i in range(0, 7, 2):  # groups of at least 2 batches' rows
            w.write_table(pa.Table.from_batches(batches[i:i + 2], schema=schema_))
    got = tmp_path / "got.parquet"
    assert write_batches(batches, "stalls", "parquet", str(got), group_rows=2 * per) == 7 * per
    assert got.read_bytes() == want.read_bytes()
    assert pq.ParquetFile(str(got)).num_row_groups == 4


def test_a_parquet_row_group_that_fails_on_the_thread_fails_the_write(tmp_path, monkeypatch):
    import threading

    batches, per = _stall_batches(6)
    calls = []
    real = pq.ParquetWriter.write_table

    def failing(self, table, *a, **k):
        calls.append(threading.current_thread().name)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(self, table, *a, **k)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", failing)
    before = threading.active_count()
    with pytest.raises(OSError, match="No space left"):
        write_batches(batches, "stalls", "parquet", str(tmp_path / "x.parquet"), group_rows=per)
    assert calls[:2] == ["parquet-row-groups"] * 2 and len(calls) == 2  # nothing written after the failure
    assert threading.active_count() == before


def test_a_failing_batch_stream_stops_the_parquet_thread(tmp_path):
    import threading

    batches, per = _stall_batches(3)

    def stream():
        yield from batches
        raise RuntimeError("the analysis failed")

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="the analysis failed"):
        write_batches(stream(), "stalls", "parquet", str(tmp_path / "x.parquet"), group_rows=per)
    assert threading.active_count() == before


# --------------------------------------------------------------------------- parquet without pandas


@pytest.mark.parametrize("table", list(REGISTRY))
def test_parquet_pandas_metadata_is_what_pyarrow_makes_from_pandas(table):
    """But for one word: pyarrow writes a text column of either storage as numpy_type "string"
    (read back as ``string[python]``); ours say "string[pyarrow]", the registry's dtype, so that
    ``pandas.read_parquet`` gives the Arrow-backed strings back (checked in the next test)."""
    arrow_str = pd.StringDtype("pyarrow")
    dtypes = {n: ("string" if d == arrow_str else d) for n, d in pandas_dtypes(table).items()}
    empty = pd.DataFrame({n: pd.Series([], dtype=d) for n, d in dtypes.items()})
    want = json.loads(pa.Schema.from_pandas(empty, preserve_index=False).metadata[b"pandas"])
    for c in want["columns"]:
        if c["numpy_type"] == "string":
            c["numpy_type"] = "string[pyarrow]"
    got = json.loads(arrow_schema(table).metadata[b"pandas"])
    assert got == want


def test_table_commands_load_no_pandas(tmp_path):
    """csv / jsonl / parquet output never imports pandas (memory and start-up time)."""
    sample = os.path.join(ROOT, "samples", "outcomes.pcap")
    code = (
        "import sys\n"
        "from amqp_dissect.cli.main import main\n"
        "for table in ('deliveries', 'links', 'stalls', 'connections'):\n"
        "    for fmt in ('csv', 'jsonl', 'parquet'):\n"
        f"        rc = main([table, {sample!r}, '-T', fmt, '-o', {str(tmp_path)!r} + '/' + table + '.' + fmt])\n"
        "        assert rc == 0, (table, fmt, rc)\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    back = pd.read_parquet(tmp_path / "deliveries.parquet")
    assert dict(back.dtypes) == pandas_dtypes("deliveries")
    assert len(back) == len(pd.read_csv(tmp_path / "deliveries.csv")) > 0


# --------------------------------------------------------------------------- flat memory


def test_streamed_batches_hold_one_batch_of_deliveries(tmp_path):
    """Python memory of the streamed deliveries table does not grow with the number of deliveries."""
    small = _proton_capture(tmp_path, 600)
    big = _proton_capture(tmp_path, 3000)

    from amqp_dissect.pipelines.runs import local

    class Lagged(Analyzer):
        def __init__(self, *a, **k):
            Analyzer.__init__(self, *a, **k)
            self.fold_lag = 100

    def peak(path):
        stream = DeliveryStream(CaptureSource(path))
        orig = local.Analyzer
        local.Analyzer = Lagged
        tracemalloc.start()
        try:
            n = 0
            for b in stream.batches(200):
                n += len(b)
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            local.Analyzer = orig
        return top, n

    p1, n1 = peak(small)
    p2, n2 = peak(big)
    assert (n1, n2) == (600, 3000)
    # the 2,400 extra deliveries cost their folded latencies (16 bytes each) and nothing else
    # that grows; allow 100 bytes a delivery for allocator noise
    assert p2 - p1 < 100 * (n2 - n1), (p1, p2)


def test_iso_times_are_numpys_iso_text():
    """The oracle: numpy's datetime_as_string of the same microseconds, plus "Z"."""
    import random

    import numpy as np

    from amqp_dissect.results.tables import iso_times

    rng = random.Random(7)
    ts_type = pa.timestamp("us", tz="UTC")
    cases = [
        [0, -1, 1, None, 1_700_000_000_123_456, -86_400_000_001, 253402300799999999, 253402300800000000],
        [rng.randrange(-10 ** 17, 10 ** 17) for _ in range(3000)],
        [1_700_000_000_000_000 + rng.randrange(0, 10 ** 8) for _ in range(3000)],
        [None if rng.random() < 0.3 else 1_700_000_000_000_000 + rng.randrange(0, 10 ** 8) for _ in range(3000)],
        [None, None],
        [],
    ]
    for us in cases:
        arr = pa.array(us, pa.int64()).cast(ts_type)
        want = [None if v is None else str(np.datetime_as_string(np.datetime64(v, "us"), unit="us")) + "Z"
                for v in us]
        assert iso_times(arr).to_pylist() == want
        assert iso_times(arr.slice(1)).to_pylist() == want[1:]
