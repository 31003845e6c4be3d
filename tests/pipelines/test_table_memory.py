"""Issue 40: the table commands' memory on captures of many connections that carried no AMQP frame.

Structural bounds, not timings: pyarrow (about 60 MB with numpy, whatever the capture) is not
loaded while the capture is analysed when no row needs it before the analysis' end, so its load
does not add to the analysis' peak; the ``--columns`` writer holds a few hundred row dicts, not a
batch of them.  The captures are bench_hostile's builders' traffic (header-only and SYN-only
connections) at small scale; the oracles are the number of connections we built and the whole
table's own columns.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from live_rows import LiveRows

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
N = 300  # connections of each capture


def _sibling(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, next(HERE.parent.glob(f"*/{name}.py")))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


B = _sibling("bench_hostile")

# In a fresh interpreter: the CLI's command, and whether pyarrow was loaded when each analysis
# ended (the end of the packets of one process, or of a -j worker's flows in this process).
_PROBE = """
import json, sys
from amqp_dissect.pipelines.runs import local, parallel
ends = []
real_chunks = local.CaptureSource.drive_chunks
def drive_chunks(self, sink, chunk=0):
    yield from real_chunks(self, sink, chunk)
    ends.append("pyarrow" in sys.modules)
local.CaptureSource.drive_chunks = drive_chunks
real_finish = parallel.FlowWorker.finish
def finish(self, *a, **kw):
    out = real_finish(self, *a, **kw)
    ends.append("pyarrow" in sys.modules)
    return out
parallel.FlowWorker.finish = finish
from amqp_dissect.cli.main import main
rc = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"rc": rc, "ends": ends, "loaded": "pyarrow" in sys.modules,
               "compute": "pyarrow.compute" in sys.modules}, f)
"""


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("no-frames")
    made = {}
    for kind, records in (("header", B.header_records), ("syn", B.syn_records)):
        made[kind] = str(folder / f"{kind}.pcap")
        B._write(made[kind], records(N))
    return made


COMMANDS = [
    (["deliveries", "-T", "parquet"], "parquet", 0),
    (["deliveries", "-T", "csv"], "csv", 0),
    (["deliveries", "-T", "jsonl"], "jsonl", 0),
    (["deliveries", "-T", "parquet", "--columns", "connection,outcome"], "parquet", 0),
    (["deliveries", "-T", "parquet", "-j", "2"], "parquet", 0),
    (["connections", "-T", "parquet"], "parquet", N),
    (["connections", "-T", "csv"], "csv", N),
    (["connections", "-T", "jsonl"], "jsonl", N),
    (["connections", "-T", "csv", "--columns", "connection,client,server"], "csv", N),
    (["connections", "-T", "csv", "-j", "2"], "csv", N),
]


def _rows_in(path: Path, fmt: str) -> int:
    if fmt == "parquet":
        return pq.read_table(path).num_rows
    lines = path.read_text(encoding="utf-8").splitlines()
    return len(lines) - (fmt == "csv")


@pytest.mark.parametrize("kind", ["header", "syn"])
@pytest.mark.parametrize("args,fmt,rows", COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_pyarrow_is_loaded_after_the_analysis_of_connections_without_frames(tmp_path, captures, kind, args,
                                                                          fmt, rows):
    out, probe = tmp_path / f"out.{fmt}", tmp_path / "probe.json"
    got = subprocess.run([sys.executable, "-c", _PROBE, str(probe), *args, "-o", str(out), captures[kind]],
                         capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert (got.returncode, got.stdout, got.stderr) == (0, "", "")
    seen = json.loads(probe.read_text())
    assert seen["ends"], seen  # (an analysis ended in this process)
    assert not any(seen["ends"]), f"pyarrow loaded before the analysis ended: {seen}"
    assert seen["loaded"]  # (then loaded to write the table)
    assert _rows_in(out, fmt) == rows


def test_columns_hold_a_few_hundred_row_dicts_and_write_the_whole_tables_columns(tmp_path):
    """``--columns`` with csv, jsonl and parquet converts ROW_DICTS row dicts at a time (a
    connections row holds 3 to 5 KB: a batch of 8192 was 30 to 40 MB).  Oracle: the same columns
    of the whole table written without ``--columns``."""
    from amqp_dissect.cli.options import TableFormat
    from amqp_dissect.cli.tables import TableWriter
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    from amqp_dissect.pipelines.writers import tables as writers

    cap = tmp_path / "header.pcap"
    B._write(str(cap), B.header_records(40))
    base = run_analysis(CaptureSource([str(cap)]), rows=False).analyzer.connection_rows()
    live = LiveRows(base)

    n = 3000
    picked = ["connection", "client", "server", "first_time"]
    for fmt in (TableFormat.csv, TableFormat.jsonl, TableFormat.parquet):
        some, whole = tmp_path / f"some.{fmt.value}", tmp_path / f"whole.{fmt.value}"
        live.reset()
        TableWriter("connections", fmt, str(some), ",".join(picked)).rows(live.rows(n))
        assert 0 < live.most <= writers.ROW_DICTS + 1, (fmt, live.most)
        writers.write_table([dict(base[i % len(base)]) for i in range(n)], "connections", fmt.value, str(whole))
        if fmt is TableFormat.parquet:
            assert pq.read_table(some).to_pylist() == pq.read_table(whole).select(picked).to_pylist()
        elif fmt is TableFormat.csv:
            want = [[r[c] for c in picked] for r in csv.DictReader(io.StringIO(whole.read_text()))]
            got = list(csv.reader(io.StringIO(some.read_text())))
            assert got == [picked] + want and len(want) == n
        else:
            want = [{c: json.loads(x)[c] for c in picked} for x in whole.read_text().splitlines()]
            assert [json.loads(x) for x in some.read_text().splitlines()] == want and len(want) == n


def test_a_pyarrow_found_but_broken_is_parquets_one_line_and_exit_6(tmp_path):
    """The parquet extra is found before the work and imported once the first rows are written:
    a pyarrow that is there but fails to import still ends in the extra's one line (exit 6), no
    file, as when it is not installed."""
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('libarrow.so: cannot open shared object file')\n")
    out = tmp_path / "d.parquet"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "deliveries", "-T", "parquet", "-o", str(out),
                          str(ROOT / "samples" / "outcomes.pcap")], capture_output=True, text=True, env=env,
                         timeout=300, cwd=str(ROOT))
    assert (got.returncode, got.stdout, got.stderr) == (6, "", "amqp-dissect deliveries --format parquet: needs the "
                                                               "parquet extra: pip install 'amqp-dissect[parquet]'\n")
    assert not out.exists()


@pytest.mark.parametrize("capture", ["header", "samples/anonymous.pcap", "samples/loss/kernel_loss.pcap",
                                     "samples/messages/azure_cbs.pcap"])
def test_the_connections_table_lets_each_connection_go_once_its_row_is_made(tmp_path, capture):
    """The connections table of one process takes each connection out of the Analyzer as its row
    is made: writing a row group is not on top of the records of every connection.  Oracles: the
    number of connections built (300 header-only ones) or the capture's own connections, and the
    rows the Analyzer makes of them all when it keeps them (``connection_rows``, a run of its own)."""
    from amqp_dissect.cli.tables import drained_connection_rows
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    if capture == "header":
        path = str(tmp_path / "header.pcap")
        B._write(path, B.header_records(N))
    else:
        path = str(ROOT / capture)
    want = run_analysis(CaptureSource([path]), rows=False).analyzer.connection_rows()
    an = run_analysis(CaptureSource([path]), rows=False).analyzer
    total = len(an.connections)
    assert total == len(want) and (capture != "header" or total == N)
    got = []
    for row in drained_connection_rows(an):
        got.append(row)
        assert len(an.connections) == total - len(got)  # (the connection of this row is let go)
    assert got == want and not an.connections


@pytest.mark.parametrize("wide", [False, True], ids=["sample-rows", "pages-over-1MB"])
def test_parquet_row_groups_gathered_from_parts_are_the_file_of_whole_batches(wide, monkeypatch):
    """``write_table`` writes each Parquet row group as the record batches of PARQUET_PART_ROWS rows
    it was made of, by the calling thread (one row group held, not three, no joined copy).  Oracle:
    pyarrow's own ParquetWriter given each row group as one batch of its rows (how the file was
    written before): the same bytes, also when a column chunk of a row group is over the 1 MB page
    size (pages cut within it; a flat and a nested column).  The rows: the connections of proton,
    rhea-with-loss and Azure SDK captures, repeated to 20,000."""
    import io
    import itertools
    import random

    import pyarrow as pa

    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    from amqp_dissect.pipelines.writers import tables as writers
    from amqp_dissect.results.tables import arrow_schema, record_batch

    base = []
    for name in ("anonymous.pcap", "loss/kernel_loss.pcap", "messages/azure_cbs.pcap", "attach_errors.pcap"):
        base += run_analysis(CaptureSource([str(ROOT / "samples" / name)]), rows=False).analyzer.connection_rows()
    n = 20000

    def rows():
        rnd = random.Random(7)
        for i in range(n):
            r = dict(base[i % len(base)])
            if wide:
                r["tls_note"] = f"n{rnd.randrange(10**6)}" * rnd.randrange(1, 60)
                r["errors"] = [{"condition": "amqp:internal-error", "scope": "connection", "side": "client",
                                "description": f"d{rnd.randrange(10**6)}" * rnd.randrange(1, 40),
                                "channel": None, "link": None}] * rnd.randrange(0, 3)
            yield r

    import threading

    groups = []  # (written by this thread, chunks of a column) of each row group
    real_write = pq.ParquetWriter.write_table

    def write_group(self, table, *a, **kw):
        groups.append((threading.current_thread() is threading.main_thread(), table.column(0).num_chunks))
        return real_write(self, table, *a, **kw)

    got = io.BytesIO()
    with monkeypatch.context() as m:
        m.setattr(pq.ParquetWriter, "write_table", write_group)
        assert writers.write_table(rows(), "connections", "parquet", got) == n
    parts = -(-writers.BATCH_ROWS // writers.PARQUET_PART_ROWS)
    assert groups == [(True, parts), (True, parts), (True, -(-(n % writers.BATCH_ROWS) // writers.PARQUET_PART_ROWS))]
    want = io.BytesIO()
    it = rows()
    with pq.ParquetWriter(want, arrow_schema("connections")) as w:
        while chunk := list(itertools.islice(it, writers.BATCH_ROWS)):
            w.write_table(pa.Table.from_batches([record_batch(chunk, "connections")]))
    meta = pq.ParquetFile(io.BytesIO(got.getvalue())).metadata
    assert meta.num_rows == n and meta.num_row_groups == 3
    group = meta.row_group(0)
    biggest = max(group.column(i).total_uncompressed_size for i in range(group.num_columns))
    assert (biggest > 1 << 20) == wide
    assert got.getvalue() == want.getvalue()


@pytest.mark.parametrize("kind", ["header", "syn"])
@pytest.mark.parametrize("table", ["connections", "deliveries"])
def test_the_parquet_tables_do_not_load_pyarrow_compute(tmp_path, captures, kind, table):
    """A Parquet table is written without pyarrow.compute (about 9 MB on top of the write's peak):
    its time columns are views of the nanoseconds, not casts (a cast loads it).  Oracle: the
    number of connections built (the deliveries table of these captures has no row)."""
    out, probe = tmp_path / "out.parquet", tmp_path / "probe.json"
    got = subprocess.run([sys.executable, "-c", _PROBE, str(probe), table, "-T", "parquet", "-o", str(out),
                          captures[kind]], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert (got.returncode, got.stdout, got.stderr) == (0, "", "")
    seen = json.loads(probe.read_text())
    assert seen["loaded"] and not seen["compute"], seen
    assert _rows_in(out, "parquet") == (N if table == "connections" else 0)


def test_time_columns_are_pyarrows_cast_of_the_nanoseconds():
    """The time columns made without pyarrow.compute are the arrays pyarrow's own cast of the
    64-bit nanoseconds to timestamp[ns, UTC] makes (the oracle), the nulls, the range's ends and
    the cells that are not integers (datetimes, a bool, text) included."""
    from datetime import datetime, timezone

    import pyarrow as pa

    from amqp_dissect.results.schema import TIME
    from amqp_dissect.results.tables import TIME_MIN, column_array

    ts = pa.timestamp("ns", tz="UTC")
    ints = [1_700_000_000_123_456_789, None, TIME_MIN, (1 << 63) - 1, 0, -5]
    assert column_array(ints, TIME).equals(pa.array(ints, pa.int64()).cast(ts))
    assert column_array([], TIME).equals(pa.array([], pa.int64()).cast(ts))
    mixed = [datetime(2023, 11, 14, 22, 13, 20, 5, tzinfo=timezone.utc), True, "x", 7, None]
    want = pa.array([1_700_000_000_000_005_000, None, None, 7, None], pa.int64()).cast(ts)
    assert column_array(mixed, TIME).equals(want)


def test_the_tcp_layer_keeps_no_table_of_ended_connections(tmp_path, monkeypatch):
    """After the capture's end the TCP layer holds no dict the size of the connections it saw: its
    open connections' table, emptied one by one, is let go at the end, and a table command lets go
    of the numbers of the ended connections' ids (``forget_ended``) before it writes.  Oracles: the
    number of connections built (300 header-only ones, all open until the end) and an empty dict."""
    from amqp_dissect.cli import run as cli_run
    from amqp_dissect.cli.main import main
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    path = str(tmp_path / "header.pcap")
    B._write(path, B.header_records(N))
    source = CaptureSource([path])
    assert len(run_analysis(source, rows=False).analyzer.connections) == N
    tcp = source.dissector.tcp
    assert (len(tcp._by_id), sys.getsizeof(tcp._by_id)) == (0, sys.getsizeof({}))
    assert len(tcp._ids) == N  # (kept by the reassembler itself: one fed again numbers reused 4-tuples)
    tcp.forget_ended()
    assert tcp._ids == {}

    runs = []
    real_analyze = cli_run.CaptureRun.analyze

    def analyze(self, **options):
        runs.append(self)
        return real_analyze(self, **options)

    monkeypatch.setattr(cli_run.CaptureRun, "analyze", analyze)
    out = tmp_path / "out.csv"
    assert main(["connections", "-T", "csv", "-o", str(out), path]) == 0
    assert _rows_in(out, "csv") == N
    assert len(runs) == 1 and runs[0].dissector.tcp._ids == {}


def test_one_direction_notes_at_the_end_share_one_pair_of_times(tmp_path):
    """The loss records of connections whose server sent nothing (header-only: one direction
    captured) hold one shared pair of times, not one each; a record's later loss is its own.
    Oracles: the number of connections built, and the loss noted by hand on two records."""
    from amqp_dissect.model.loss import LossRecord
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    path = str(tmp_path / "header.pcap")
    B._write(path, B.header_records(N))
    conns = list(run_analysis(CaptureSource([path]), rows=False).analyzer.connections.values())
    assert len(conns) == N and all(c.loss.absent == (False, True) for c in conns)
    assert len({id(c.loss.last) for c in conns}) == 1 and len({id(c.loss.gap_last) for c in conns}) == 1
    assert conns[0].loss.last[0] is None and conns[0].loss.last[1] is not None

    end, later = 1_700_000_000_000_000_000 + 10**9, 1_700_000_000_000_000_000 + 2 * 10**9
    a, b = LossRecord(), LossRecord()
    a.note(1, 0, 0, end, False)
    b.note(1, 0, 0, end, False)
    assert a.last is b.last and a.last == (None, end) and a.gap_last == (None, end)
    a.note(1, 100, 0, later, False)
    a.note(0, 0, 7, end, False)

    def pairs(r):
        return [tuple(p) for p in (r.last, r.gap_last, r.gaps, r.missing, r.skipped)]

    assert pairs(a) == [(end, later), (end, later), (0, 1), (0, 100), (7, 0)]
    assert pairs(b) == [(None, end), (None, end), (0, 0), (0, 0), (0, 0)]
