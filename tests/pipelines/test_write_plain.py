"""The light install's writers (issue 27): without pyarrow and numpy the table commands write csv
and jsonl with the standard library (pipelines/writers/tables.py ``write_rows``) and the text table without
pandas (cli/habits.py).

Oracles: the Arrow writers (``results.tables``: the CLI's csv / jsonl when pyarrow is installed)
on the same rows, byte for byte, through the CLI on every sample and table, and on rows of odd
cells (a cell of the wrong type, NaN, infinities, -0.0, times outside the years a table holds,
datetimes, text with commas, quotes, newlines and tabs); pandas' ``DataFrame.to_string`` (the text
table's layout, :func:`amqp_dissect.cli.habits.text_table`) on the same odd rows."""

from __future__ import annotations

import glob
import io
import math
import os
from datetime import datetime, timezone

import pytest

from amqp_dissect.cli import habits, tables as cli_tables
from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.writers import tables as write
from amqp_dissect.results.schema import BOOL, FLOAT, INT, JSON, STRING, TIME, TABLES, UINT64, columns, names

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "**", "*.pcap*"), recursive=True))
SOME = [os.path.join(ROOT, "samples", n) for n in
        ("outcomes.pcap", "multi_session.pcap", "attach_errors.pcap", "loss/kernel_loss.pcap", "drain.pcap")]


def _cli(args, path, plain: bool, monkeypatch) -> bytes:
    monkeypatch.setattr(cli_tables, "arrow_ready", lambda: not plain)
    rc = main(args + ["-o", str(path)])
    assert rc in (0, 5), (args, rc)
    return path.read_bytes()


def _rows(capture: str) -> dict:
    """table -> the analyzer's rows of ``capture`` (the deliveries as the CLI's stream folds them)."""
    from amqp_dissect.pipelines.api import _ROWS
    from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream

    stream = DeliveryStream(CaptureSource(capture))
    out = {"deliveries": list(stream)}
    for table, method in _ROWS.items():
        out[table] = list(getattr(stream.analyzer, method)())
    return out


@pytest.mark.parametrize("capture", SAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_the_plain_csv_and_jsonl_are_the_arrow_ones(capture):
    made = 0
    for table, rows in _rows(capture).items():
        for fmt in ("csv", "jsonl"):
            arrow = io.BytesIO()
            write.write_table(rows, table, fmt, arrow)  # (pyarrow and numpy are here: the Arrow writers)
            assert _plain_bytes(rows, table, fmt) == arrow.getvalue(), (table, fmt)
            made += len(rows)
    assert made > 0 or "other-protocols" in capture  # (rows were compared)


@pytest.mark.parametrize("capture", SOME[:2], ids=os.path.basename)
def test_the_cli_writes_the_same_csv_and_jsonl_without_arrow(capture, tmp_path, monkeypatch):
    for table in TABLES:
        for fmt in ("csv", "jsonl"):
            args = [table, capture, "-T", fmt]
            assert _cli(args, tmp_path / "p", True, monkeypatch) == _cli(args, tmp_path / "a", False, monkeypatch)


@pytest.mark.parametrize("capture", SOME, ids=os.path.basename)
def test_the_plain_columns_are_the_arrow_ones(capture, tmp_path, monkeypatch):
    for table in TABLES:
        cols = [c.name for c in columns(table)][::-3]  # (some of every type, in another order)
        for fmt in ("csv", "jsonl"):
            args = [table, capture, "-T", fmt, "--columns", ",".join(cols)]
            assert _cli(args, tmp_path / "p", True, monkeypatch) == _cli(args, tmp_path / "a", False, monkeypatch)


# odd cells of each type: what a malformed capture's rows may hold
ODD = {
    STRING: [None, "", "plain", "a,b", 'say "hi"', "two\nlines", "tab\there\r", "é ü 漢", 5, 1.5, True, [1, "x"],
             {"k": 1}, "x" * 60],
    JSON: [None, {"b": 1, "a": [1, 2]}, [], "text", 3, {"z": None, "é": "x,y\n"}, True],
    INT: [None, 0, -5, (1 << 63) - 1, -(1 << 63), 1 << 63, True, 2.0, "7"],
    UINT64: [None, 0, (1 << 64) - 1, 1 << 64, -1, False],
    BOOL: [None, True, False, 1, "True"],
    FLOAT: [None, 0.0, -0.0, 1.5, 1e-7, 1e22, 123456789.123456789, math.nan, math.inf, -math.inf, 3, True, "1.0"],
    TIME: [None, 0, -1, 1_700_000_000_123_456_000, 1_700_000_000_123_456_789, 999, (1 << 63) - 1, 1 << 63,
           -(1 << 63), -(1 << 63) + 1, -(1 << 70), datetime(2024, 5, 1, 12, 0, 0, 123456),
           datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc), True, "2024-01-01", 1.5],
}


def _odd_rows(table: str, n: int = 16) -> list[dict]:
    """``n`` rows of ``table`` whose cells cycle through the odd cells of their column's type."""
    cols = columns(table)
    return [{c.name: ODD[c.type][(i + j) % len(ODD[c.type])] for j, c in enumerate(cols)} for i in range(n)]


def _arrow_bytes(rows, table, fmt) -> bytes:
    out = io.BytesIO()
    write._write(((b, raw) for b, raw in _arrow_pairs(rows, table, fmt)), table, fmt, out)
    return out.getvalue()


def _arrow_pairs(rows, table, fmt):
    from amqp_dissect.results.tables import record_batch

    json_cols = [c.name for c in columns(table) if c.type == JSON] if fmt == "jsonl" else []
    raw = {n: [r.get(n) for r in rows] for n in json_cols} if json_cols else None
    yield record_batch(rows, table), raw


def _plain_bytes(rows, table, fmt, cols=None) -> bytes:
    out = io.BytesIO()
    write.write_rows(rows, table, fmt, out, cols)
    return out.getvalue()


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_odd_cells_are_written_as_the_arrow_writers_write_them(table, fmt):
    rows = _odd_rows(table)
    if fmt == "jsonl":  # (a json cell the encoder refuses, as the Arrow writer refuses it)
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) and
                     columns(table)[names(table).index(k)].type == JSON else v) for k, v in r.items()} for r in rows]
    assert _plain_bytes(rows, table, fmt) == _arrow_bytes(rows, table, fmt)


@pytest.mark.parametrize("table", TABLES)
def test_odd_cells_of_chosen_columns_are_written_as_the_cli_writes_them(table, tmp_path):
    """--columns: the Arrow path's _Projected (json cells as their text, sorted keys)."""
    from amqp_dissect.cli.options import TableFormat

    rows = _odd_rows(table)
    cols = names(table)[1::2]
    for fmt in (TableFormat.csv, TableFormat.jsonl):
        out = cli_tables.TableWriter(table, fmt, str(tmp_path / "a"), ",".join(cols))
        out.arrow = True
        out.rows(rows)
        assert _plain_bytes(rows, table, fmt.value, cols) == (tmp_path / "a").read_bytes()


@pytest.mark.parametrize("table", TABLES)
def test_the_text_table_of_odd_cells_is_pandas_layout(table):
    """The text table without pandas is what pandas' to_string lays out (text_table), byte for byte."""
    from amqp_dissect.results.tables import to_frame

    rows = _odd_rows(table)
    cols = names(table)
    want = habits.text_table(to_frame(rows, table), table, cols, write.raw_times(rows, table))
    assert habits.text_table_rows(rows, table, cols) == want
    assert habits.text_table_rows([], table, cols) == habits.text_table(to_frame([], table), table, cols)


def test_the_time_bounds_are_the_typed_tables():
    from amqp_dissect.results import tables

    assert (write.TIME_MIN, write.TIME_END) == (tables.TIME_MIN, tables.TIME_END)
    assert write.FORMATS == tables.FORMATS


def test_the_cli_tables_need_neither_pandas_nor_numpy_nor_pyarrow(tmp_path):
    """Run as the light install runs them: pyarrow, numpy and pandas cannot be imported.  The text
    table, csv and jsonl are written (the same bytes as with them); parquet names its extra."""
    import subprocess
    import sys

    capture = os.path.join(ROOT, "samples", "outcomes.pcap")
    code = ("import sys\n"
            "for m in ('pyarrow', 'numpy', 'pandas'):\n    sys.modules[m] = None  # (as if not installed)\n"
            "from amqp_dissect.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    for table in ("deliveries", "links"):
        for fmt in ("table", "csv", "jsonl"):
            args = [table, capture, "-T", fmt]
            light = subprocess.run([sys.executable, "-c", code] + args, capture_output=True, timeout=120, cwd=ROOT)
            full = subprocess.run([sys.executable, "-m", "amqp_dissect.cli"] + args, capture_output=True, timeout=120,
                                  cwd=ROOT)
            assert light.returncode == full.returncode == 0, light.stderr
            assert light.stdout == full.stdout and light.stdout.count(b"\n") > 1, (table, fmt)
    got = subprocess.run([sys.executable, "-c", code, "deliveries", capture, "-T", "parquet", "-o",
                          str(tmp_path / "d.parquet")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert got.returncode == 6
    assert got.stderr == ("amqp-dissect deliveries --format parquet: needs the parquet extra: "
                          "pip install 'amqp-dissect[parquet]'\n")
    assert not (tmp_path / "d.parquet").exists()
