"""The Python API (``amqp_dissect.analyze``, ``amqp_dissect.iter_batches``; pipelines/api.py).

Oracles: the CLI's Parquet files read back by ``pandas.read_parquet`` (the API's DataFrames have
the same values and the same dtypes, table by table, when read_parquet is asked for the categorical
columns as dictionaries; plain, it gives them as strings of the same values); the plain sample a TLS capture replays
(decrypted with a key log given as a path, the same deliveries); Python's import system (the core
package imports no pipeline until the API is asked for)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pytest

import amqp_dissect
from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.api import categorical_columns
from amqp_dissect.results.schema import TABLES, columns, names

from test_tls import captures  # noqa: F401  (the fixture making TLS captures)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
# a few shapes: outcomes of every kind and a stall, several sessions, multi-frame deliveries,
# a capture with kernel loss (deliveries whose outcome is unknown), another protocol
CAPTURES = ["outcomes.pcap", "multi_session.pcap", "large_message.pcap", "loss/kernel_loss.pcap",
            "attach_errors.pcap"]


def _cli_parquet(capture: str, table: str, out) -> pd.DataFrame:
    rc = main([table, capture, "-T", "parquet", "-o", str(out)])
    assert rc == 0, (table, capture, rc)
    return pd.read_parquet(out, read_dictionary=categorical_columns(table))


@pytest.mark.parametrize("name", CAPTURES)
def test_every_table_equals_the_clis_parquet_values_and_dtypes(name, tmp_path):
    capture = os.path.join(SAMPLES, name)
    got = amqp_dissect.analyze(capture)
    assert list(got) == list(TABLES)
    rows = 0
    for table in TABLES:
        want = _cli_parquet(capture, table, tmp_path / f"{table}.parquet")
        df = got[table]
        assert dict(df.dtypes) == dict(want.dtypes), table
        pd.testing.assert_frame_equal(df, want, check_exact=True)
        # the file read plainly: the same values, the categorical columns as Arrow strings
        plain = pd.read_parquet(tmp_path / f"{table}.parquet")
        cats = categorical_columns(table)
        assert all(plain[c].dtype == pd.StringDtype("pyarrow") for c in cats), table
        assert {c for c in df if df[c].dtype != plain[c].dtype} == set(cats), table
        pd.testing.assert_frame_equal(df.astype({c: pd.StringDtype("pyarrow") for c in cats}), plain,
                                      check_exact=True)
        rows += len(df)
    assert rows > 0  # (rows were compared)


def test_the_categorical_columns_are_the_registrys_repeated_text_columns():
    got = amqp_dissect.analyze(os.path.join(SAMPLES, "multi_session.pcap"))
    for table in TABLES:
        df = got[table]
        for c in columns(table):
            if c.categorical:
                assert isinstance(df[c.name].dtype, pd.CategoricalDtype), (table, c.name)
                assert not df[c.name].cat.ordered
            elif c.type in ("string", "json"):
                assert df[c.name].dtype == pd.StringDtype("pyarrow"), (table, c.name)
    d = got.deliveries
    assert {"connection", "link", "address", "sender", "outcome", "settled_by"} <= set(categorical_columns("deliveries"))
    assert "delivery_tag" not in categorical_columns("deliveries")  # (one per delivery: no repeats)
    # a categorical holds each value once: as many categories as distinct values, codes per row
    for c in ("connection", "link", "outcome"):
        assert len(d[c].cat.categories) == d[c].nunique(dropna=True) < len(d)
        assert d[c].isna().sum() == (d[c].cat.codes == -1).sum()


def test_the_dtypes_are_arrow_strings_nullable_ints_and_utc_times():
    df = amqp_dissect.analyze(os.path.join(SAMPLES, "outcomes.pcap"), tables="deliveries").deliveries
    assert df["delivery_tag"].dtype == pd.StringDtype("pyarrow")
    assert isinstance(df["link"].dtype, pd.CategoricalDtype)
    assert df["delivery_id"].dtype == pd.UInt64Dtype() or df["delivery_id"].dtype == pd.Int64Dtype()
    assert df["first_time"].dtype == pd.DatetimeTZDtype("ns", "UTC")
    assert str(df["first_time"].dt.tz) == "UTC"
    assert not any(d == object for d in df.dtypes)  # no column of Python objects


def test_tables_and_columns_select_what_is_made(tmp_path):
    capture = os.path.join(SAMPLES, "outcomes.pcap")
    full = amqp_dissect.analyze(capture)
    some = amqp_dissect.analyze(capture, tables=["links", "deliveries"],
                                columns=["link", "outcome", "settlement_latency", "name"])
    assert list(some) == ["links", "deliveries"]
    assert list(some.deliveries.columns) == ["link", "outcome", "settlement_latency"]  # the registry's order
    assert list(some.links.columns) == ["name"]
    pd.testing.assert_frame_equal(some.deliveries, full.deliveries[["link", "outcome", "settlement_latency"]])
    pd.testing.assert_frame_equal(some.links, full.links[["name"]])
    per = amqp_dissect.analyze(capture, tables=["links", "stalls"], columns={"links": ["name", "address"]})
    assert list(per.links.columns) == ["name", "address"] and list(per.stalls.columns) == names("stalls")
    with pytest.raises(AttributeError, match="not asked for"):
        some.stalls
    with pytest.raises(ValueError, match="no table 'delivery'"):
        amqp_dissect.analyze(capture, tables="delivery")
    with pytest.raises(ValueError, match="no column 'latency'"):
        amqp_dissect.analyze(capture, tables="deliveries", columns=["latency"])
    with pytest.raises(ValueError, match="not asked for"):
        amqp_dissect.analyze(capture, tables="links", columns={"stalls": ["kind"]})


@pytest.mark.parametrize("table", ["deliveries", "links", "stalls"])
def test_iter_batches_gives_the_table_in_batches_of_at_most_batch_rows(table):
    capture = os.path.join(SAMPLES, "multi_session.pcap")
    whole = amqp_dissect.analyze(capture, tables=table)[table]
    assert len(whole) > 3
    batches = list(amqp_dissect.iter_batches(capture, table, batch_rows=3))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert [len(b) for b in batches[:-1]] == [3] * (len(batches) - 1) and 0 < len(batches[-1]) <= 3
    back = pa.Table.from_batches(batches).to_pandas(types_mapper=pd.ArrowDtype)
    assert len(back) == len(whole)
    chunks = list(amqp_dissect.iter_batches(capture, table, batch_rows=3, pandas=True))
    # (each chunk's categoricals have the categories of its rows: glued, they are cast back)
    glued = pd.concat(chunks, ignore_index=True)
    glued = glued.astype({c: whole[c].dtype for c in categorical_columns(table)})
    pd.testing.assert_frame_equal(glued, whole, check_exact=True)
    cols = names(table)[:2]
    picked = list(amqp_dissect.iter_batches(capture, table, columns=cols))
    assert [b.schema.names for b in picked] == [cols] * len(picked)


def test_a_stream_is_read_once():
    with open(os.path.join(SAMPLES, "outcomes.pcap"), "rb") as f:
        data = f.read()
    got = amqp_dissect.analyze(io.BytesIO(data), tables="deliveries")
    want = amqp_dissect.analyze(os.path.join(SAMPLES, "outcomes.pcap"), tables="deliveries")
    pd.testing.assert_frame_equal(got.deliveries, want.deliveries)


def test_the_core_package_imports_the_api_only_when_asked():
    code = ("import sys, amqp_dissect\n"
            "print(sorted(m for m in sys.modules if m.startswith(('amqp_dissect.pipelines', 'pandas', 'pyarrow'))))\n"
            "f = amqp_dissect.analyze\n"
            "print('amqp_dissect.pipelines.api' in sys.modules, f.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "[]"
    assert second == "True amqp_dissect.pipelines.api"
    with pytest.raises(AttributeError):
        amqp_dissect.no_such_name  # noqa: B018


@pytest.mark.parametrize("hidden, call, extra", [
    ("pandas", "analyze(CAPTURE)", "pandas"),
    ("pyarrow", "analyze(CAPTURE)", "pandas"),
    ("pandas", "iter_batches(CAPTURE, pandas=True)", "pandas"),
    ("pyarrow", "iter_batches(CAPTURE)", "parquet"),
])
def test_without_its_extra_the_api_names_it_in_one_line(hidden, call, extra):
    """An install without pandas (or pyarrow), as the light install (tests/cli/test_install.py
    installs one for real): the call raises MissingExtra, an ImportError naming the extra."""
    code = (f"import sys\nsys.modules[{hidden!r}] = None  # (as if not installed)\n"
            "import amqp_dissect\n"
            f"CAPTURE = {os.path.join(SAMPLES, 'outcomes.pcap')!r}\n"
            f"try:\n    amqp_dissect.{call}\n"
            "except ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"MissingExtra amqp_dissect.{call.split('(')[0]} needs the {extra} extra ({hidden} is not installed): "
        f"pip install 'amqp-dissect[{extra}]'"]


# --------------------------------------------------------------------------- key logs


def test_a_key_log_path_decrypts_as_the_plain_sample_reads(captures, tmp_path):  # noqa: F811
    """A key log given as a path string (once taken as key log text, which found nothing)."""
    from amqp_dissect.pipelines.runs.local import read_analysis as local_analyze

    cap = captures("tls13-aes256gcm")
    plain = amqp_dissect.analyze(str(cap.sample), tables="deliveries", columns=["delivery_id", "outcome", "message_size"])
    assert len(plain.deliveries) > 0
    for keylog in (str(cap.keys), cap.keys, amqp_dissect.KeyLog.from_text(cap.keys.read_text())):
        got = amqp_dissect.analyze(str(cap.pcap), keylog=keylog, tables="deliveries",
                                   columns=["delivery_id", "outcome", "message_size"])
        pd.testing.assert_frame_equal(got.deliveries, plain.deliveries)
        # the older entry point takes the same key logs
        assert len(local_analyze(str(cap.pcap), keylog=keylog).deliveries) == len(plain.deliveries)
    without = amqp_dissect.analyze(str(cap.pcap), tables="deliveries")
    assert len(without.deliveries) == 0


def test_key_log_text_is_taken_only_through_from_text(tmp_path):
    capture = os.path.join(SAMPLES, "outcomes.pcap")
    line = "CLIENT_RANDOM " + "00" * 32 + " " + "11" * 48
    with pytest.raises(TypeError, match="KeyLog.from_text"):
        amqp_dissect.analyze(capture, keylog=line + "\n")
    with pytest.raises(TypeError, match="KeyLog.from_text"):
        amqp_dissect.analyze(capture, keylog=line)
    with pytest.raises(TypeError, match="KeyLog.from_text"):
        amqp_dissect.analyze(capture, keylog=line.encode())
    with pytest.raises(FileNotFoundError):
        amqp_dissect.analyze(capture, keylog=str(tmp_path / "no-such-keys.txt"))
    kl = amqp_dissect.KeyLog.from_text(line)
    assert bytes(32) in kl
    assert len(amqp_dissect.analyze(capture, keylog=kl, tables="deliveries").deliveries) > 0


def test_damage_is_told_as_the_cli_tells_it_and_the_readable_part_is_analysed(tmp_path, capsys):
    whole = os.path.join(SAMPLES, "outcomes.pcap")
    cut = tmp_path / "cut.pcap"
    with open(whole, "rb") as f:
        cut.write_bytes(f.read(5000))
    got = amqp_dissect.analyze(str(cut))
    assert len(got.capture_errors) == 1
    rc = main(["deliveries", str(cut), "-T", "parquet", "-o", str(tmp_path / "d.parquet")])
    assert rc == 5  # the CLI's "capture damaged partway"
    assert got.capture_errors[0] in capsys.readouterr().err
    pd.testing.assert_frame_equal(got.deliveries, pd.read_parquet(tmp_path / "d.parquet",
                                                                  read_dictionary=categorical_columns("deliveries")))
    assert 0 < len(got.deliveries) < len(amqp_dissect.analyze(whole, tables="deliveries").deliveries)
    with pytest.raises(FileNotFoundError):
        amqp_dissect.analyze(str(tmp_path / "missing.pcap"))


def test_iter_batches_holds_a_batch_not_the_table(tmp_path, monkeypatch):
    """Memory of a streamed table does not grow with its rows: Python's (tracemalloc) grows by the
    folded latencies only (as the CLI's stream, tests/results/test_tables_stream.py), Arrow's (its
    pool's bytes, read at each batch) stays that of a batch or two."""
    import tracemalloc

    from amqp_dissect.pipelines import api
    from test_tables_stream import _proton_capture

    from amqp_dissect.pipelines.runs import local
    from amqp_dissect.results.analytics import Analyzer

    class Lagged(Analyzer):  # (deliveries folded 100 behind, not some thousands: seen at this size)
        def __init__(self, *a, **k):
            Analyzer.__init__(self, *a, **k)
            self.fold_lag = 100

    monkeypatch.setattr(local, "Analyzer", Lagged)
    monkeypatch.setattr(api, "_STREAM_ROWS", 50)
    small, big = _proton_capture(tmp_path, 600), _proton_capture(tmp_path, 3000)

    def peaks(path):
        arrow = 0
        n = 0
        tracemalloc.start()
        try:
            for b in amqp_dissect.iter_batches(path, batch_rows=100):
                n += len(b)
                del b
                arrow = max(arrow, pa.total_allocated_bytes())
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return top, arrow, n

    p1, a1, n1 = peaks(small)
    p2, a2, n2 = peaks(big)
    assert (n1, n2) == (600, 3000)
    assert p2 - p1 < 100 * (n2 - n1), (p1, p2)
    assert a2 - a1 < 20 * (n2 - n1), (a1, a2)  # (the whole table: some 300 bytes a row)


def _every_sample() -> list[str]:
    out = []
    for d, _, files in os.walk(SAMPLES):
        out += [os.path.relpath(os.path.join(d, f), SAMPLES) for f in files if ".pcap" in f]
    return sorted(out)


@pytest.mark.parametrize("name", _every_sample())
def test_the_deliveries_frame_is_the_clis_parquet_on_every_sample(name, tmp_path):
    """The deliveries DataFrame (made a column at a time, all-null chunks shared) has the values and
    dtypes of the CLI's Parquet file read back by pandas, and of pyarrow's own conversion of the
    stream's batches gathered as one table; its columns are not consolidated into 2-D blocks."""
    from amqp_dissect.pipelines import api

    capture = os.path.join(SAMPLES, name)
    got = amqp_dissect.analyze(capture, tables="deliveries").deliveries
    want = _cli_parquet(capture, "deliveries", tmp_path / "d.parquet")
    assert dict(got.dtypes) == dict(want.dtypes)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    source = api._source(capture, (), None)
    small = [api._encoded(b, "deliveries") for b in api._delivery_batches(source, None)]
    if small:
        whole = pa.Table.from_batches(small).to_pandas(types_mapper=pd.ArrowDtype)  # (no mapping of ours)
        assert len(whole) == len(got) and list(whole.columns) == names("deliveries")
        with_ours = api._frame(pa.Table.from_batches(small), "deliveries")
        pd.testing.assert_frame_equal(got, with_ours, check_exact=True)
    assert got._mgr.nblocks == len(got.columns)


def test_the_deliveries_frame_frees_each_columns_arrow_chunks_as_it_converts_it(monkeypatch):
    """The Arrow chunks of the stream and the DataFrame's columns are never both held whole: each
    column is converted on its own, after the Arrow chunks of the columns before it are freed
    (pandas holds its nullable integers in NumPy arrays of its own).  Read at every call of the
    types mapper (once per column converted): Arrow's allocated bytes fall, before the last
    column, by at least half what the integer columns' chunks held (the times' and floats'
    NumPy arrays come from Arrow's pool: they offset the rest).  (A conversion of the whole table
    asks the mapper for every column before it converts one: the bytes would not move.)"""
    from amqp_dissect.results import tables

    capture = os.path.join(SAMPLES, "twins", "proton_rabbitmq_burst.pcap.gz")
    seen: list = []
    real = tables.pandas_types_mapper

    def spying():
        get = real()

        def mapper(typ):
            seen.append((typ, pa.total_allocated_bytes()))
            return get(typ)
        return mapper

    monkeypatch.setattr(tables, "pandas_types_mapper", spying)
    df = amqp_dissect.analyze(capture, tables="deliveries").deliveries
    assert len(df) > 10_000
    assert len(seen) >= len(df.columns)  # (asked once per column at least)
    ints = [c for c in df.columns if df[c].dtype in (pd.Int64Dtype(), pd.UInt64Dtype()) and df[c].notna().all()]
    assert len(ints) >= 10
    int_chunks = 8 * len(df) * len(ints)  # (their Arrow values; no validity bitmap: no nulls)
    assert seen[0][1] - min(b for _, b in seen) >= int_chunks // 2, (seen[0][1], min(b for _, b in seen), int_chunks)


def test_all_null_column_chunks_share_one_array():
    """A column that is null in every row of a batch costs no buffers of its own: every such chunk of a
    type and length is one array (the deliveries' message columns when the messages are not read)."""
    from amqp_dissect.pipelines import api

    capture = os.path.join(SAMPLES, "twins", "proton_rabbitmq_burst.pcap.gz")
    source = api._source(capture, (), None)
    schema = api._encoded(api._schema("deliveries", None).empty_table(), "deliveries").schema
    held = api.ColumnChunks(schema)
    for b in api._delivery_batches(source, None):
        held.add(api._encoded(b, "deliveries"))
    null_chunks = [c for col in held.chunks for c in col if c.null_count == len(c)]
    assert len(null_chunks) > 20 * len(held.chunks[0])  # (the message columns of every batch at least)
    distinct = {(c.type, len(c)) for c in null_chunks}
    buffers = {(b.address, b.size) for c in null_chunks for b in c.buffers() if b is not None}
    assert len(buffers) <= 3 * len(distinct)  # (a validity bitmap, offsets or values, a dictionary's own)
    assert sum(len(col) for col in held.chunks) == len(held.chunks) * len(held.chunks[0])
    df = held.frame()
    assert held.chunks == [None] * len(schema)  # (given up)
    messages_read = [c for c in ("message_id", "subject", "body_size") if df[c].notna().any()]
    assert messages_read == []
    pd.testing.assert_frame_equal(df, amqp_dissect.analyze(capture, tables="deliveries").deliveries, check_exact=True)


@pytest.mark.parametrize("name", [n for n in _every_sample() if n.startswith("messages" + os.sep)])
def test_the_deliveries_frame_with_the_messages_is_the_clis_parquet(name, tmp_path):
    """With the messages read (their columns not null), the same: the CLI's ``deliveries --messages``
    Parquet read back."""
    capture = os.path.join(SAMPLES, name)
    got = amqp_dissect.analyze(capture, tables="deliveries", messages=True).deliveries
    out = tmp_path / "d.parquet"
    assert main(["deliveries", capture, "--messages", "-T", "parquet", "-o", str(out)]) == 0
    want = pd.read_parquet(out, read_dictionary=categorical_columns("deliveries"))
    assert dict(got.dtypes) == dict(want.dtypes)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    if len(got):
        assert got["message_read"].notna().any()
