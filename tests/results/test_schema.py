"""The column registry and the typed tables: one schema per table, whatever the capture.

Oracles: the registry itself (dissector/results/schema.py, written by hand from the row
definitions) for columns and types; dpkt reading the raw pcap record headers
for times (a delivery's first_time is the capture time of its first packet);
pandas / pyarrow reading back the files written.
"""

from __future__ import annotations

import glob
import io
import json
import os
import re
from datetime import datetime, timedelta, timezone

import dpkt
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.amqp.codec import Symbol, UInt
from pcapbuild import write_pcap
from amqp_dissect.results import schema
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.results.schema import REGISTRY, TABLES, names, time_columns
from amqp_dissect.pipelines.writers.tables import write_table
from amqp_dissect.results.tables import SchemaError, check_rows, fits, pandas_dtypes, record_batch, to_frame
from test_state import Script, _coordinator_payload, _frames, comp  # hand-built frame streams

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
ROWS = {"connections": "connection_rows", "sessions": "session_rows", "links": "link_rows",
        "deliveries": "delivery_rows", "stalls": "stall_rows", "transactions": "transaction_rows",
        "violations": "violation_rows", "errors": "error_rows"}
UTC_US = "datetime64[ns, UTC]"  # (the tables keep the capture's integer nanoseconds)


def assert_typed(df: pd.DataFrame, table: str) -> None:
    """Exactly the registry's columns, in its order, with its dtypes."""
    assert list(df.columns) == names(table), table
    want = pandas_dtypes(table)
    got = dict(df.dtypes)
    assert got == want, {c: (got[c], want[c]) for c in want if got.get(c) != want[c]}


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def analyses():
    assert len(SAMPLES) >= 10
    return {os.path.basename(p)[:-5]: read_analysis(p) for p in SAMPLES}


@pytest.fixture
def empty_pcap(tmp_path):
    p = tmp_path / "empty.pcap"
    p.write_bytes(write_pcap([], linktype=1))
    return p


# --------------------------------------------------------------------------- the registry


def test_registry_is_well_formed():
    assert set(TABLES) | set(schema.MESSAGE_TABLES) | {"frames"} == set(REGISTRY)
    for table, cols in REGISTRY.items():
        assert len({c.name for c in cols}) == len(cols), table
        assert all(c.type in schema.TYPES and c.meaning for c in cols), table
    # the columns that are times by their name are typed as times, and only those
    for table in TABLES + schema.MESSAGE_TABLES:
        for c in REGISTRY[table]:
            is_time = (c.name in ("time", "start", "end", "credit_exhausted_at")
                       or re.search(r"_time(_client|_server)?$", c.name) is not None)
            assert (c.type == schema.TIME) == is_time, (table, c.name)


def test_documented_tables_are_the_registry():
    with open(os.path.join(ROOT, "docs", "tables.md"), encoding="utf-8") as f:
        text = f.read()
    assert schema.readme_section(text) == schema.markdown(), (
        "docs/tables.md column tables are out of date: run python -m amqp_dissect.results.schema --update docs/tables.md")
    for table in TABLES:
        assert f"**{table}**" in schema.readme_section(text)


def _documented_types() -> dict:
    """{type: (pandas, Parquet, Spark)} of the types table of docs/tables.md (section Types)."""
    with open(os.path.join(ROOT, "docs", "tables.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Types\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    assert rows[0] == ["type", "pandas", "Parquet", "Spark"]
    return {r[0]: tuple(r[1:]) for r in rows[2:]}


def test_documented_types_are_what_the_code_makes():
    """The types table of docs/tables.md against what the code makes of each registry type: the
    pandas dtype of the DataFrames, the Parquet type pyarrow writes (read back from a file), the
    Spark type of the Spark schema."""
    from amqp_dissect.results.tables import arrow_schema, arrow_type, spark_schema

    documented = _documented_types()
    assert list(documented) == list(schema.TYPES)
    one = {}  # type -> (table, column) of a column of that type
    for table in REGISTRY:
        for c in REGISTRY[table]:
            one.setdefault(c.type, (table, c.name))
    assert set(one) == set(schema.TYPES)
    units = {"nanoseconds": "NANOS", "microseconds": "MICROS", "milliseconds": "MILLIS"}
    for typ, (pandas_doc, parquet_doc, spark_doc) in documented.items():
        table, name = one[typ]
        assert re.match(r"`([^`]+)`", pandas_doc).group(1) == str(pandas_dtypes(table)[name]), typ
        buf = io.BytesIO()
        pq.write_table(arrow_schema(table).empty_table(), buf)
        buf.seek(0)
        col = pq.ParquetFile(buf).schema.column(names(table).index(name))
        logical = json.loads(col.logical_type.to_json())
        if logical["Type"] == "String":
            written = "string"
        elif logical["Type"] == "Int":
            written = ("int" if logical["isSigned"] else "uint") + str(logical["bitWidth"])
        elif logical["Type"] == "Timestamp":
            written = f"TIMESTAMP({units[logical['timeUnit']]}, {'UTC' if logical['isAdjustedToUTC'] else 'local'})"
        else:
            assert logical["Type"] == "None", logical
            written = col.physical_type.lower()
        assert parquet_doc.split(" (")[0] == written, typ
        field = spark_schema(table)[name].dataType
        assert spark_doc.split(" (")[0] == str(field).replace("()", ""), typ
        if typ == schema.TIME:  # Spark keeps microseconds: the Spark schema's Arrow twin says so
            assert spark_doc.endswith("(microseconds)") and arrow_type(typ, spark=True).unit == "us"


# --------------------------------------------------------------------------- every sample


def test_every_table_of_every_sample_has_the_registry_schema(analyses):
    filled = {t: 0 for t in TABLES}
    for name, a in analyses.items():
        for t in TABLES:
            rows = getattr(a.analyzer, ROWS[t])()
            check_rows(rows, t)  # no key outside the registry, none missing
            df = getattr(a, t)
            assert_typed(df, t)
            assert len(df) == len(rows)
            filled[t] += len(rows)
    # the samples exercise every table but transactions (see the test below)
    assert all(filled[t] for t in TABLES if t != "transactions"), filled


def test_transaction_rows_fit_the_registry():
    from proton import Described, symbol

    s = Script()
    s.open_both()
    s.begin_both()
    s.frame(0, "attach", name="txn", handle=UInt(0), role=False, source=comp("source"),
            target=comp("coordinator", capabilities=[Symbol("amqp:local-transactions")]),
            initial_delivery_count=UInt(0))
    s.frame(1, "attach", name="txn", handle=UInt(0), role=True, source=comp("source"), target=comp("coordinator"))
    s.flow(1, handle=0, dc=0, credit=10)
    decl = s.transfer(handle=0, did=0, payload=_coordinator_payload(Described(symbol("amqp:declare:list"), [])))
    s.disposition(first=0, state=comp("declared", txn_id=b"tx-1"))
    a = s.done()
    rows = a.transaction_rows()
    assert len(rows) == 1
    check_rows(rows, "transactions")
    df = to_frame(rows, "transactions")
    assert_typed(df, "transactions")
    assert df.loc[0, "declare_time"] == pd.Timestamp(decl.ts, unit="ns", tz="UTC")
    assert json.loads(df.loc[0, "enlisted"]) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(_frames(), max_size=30))
def test_rows_of_any_frame_sequence_fit_the_registry(syn, frames):
    s = Script(syn=syn)
    for d, name, ch, fields, payload in frames:
        if name is None:
            s.heartbeat(d)
        else:
            s.frame(d, name, channel=ch, payload=payload, **fields)
    a = s.done()
    for t in TABLES:
        rows = getattr(a, ROWS[t])()
        check_rows(rows, t)
        batch = record_batch(rows, t)  # never fails, whatever the frames held
        assert batch.num_rows == len(rows)
        for i, c in enumerate(REGISTRY[t]):
            if c.type in (schema.TIME, schema.JSON):
                continue
            for v, got in zip((r[c.name] for r in rows), batch.column(i).to_pylist()):
                if fits(v, c.type):  # a cell of the column's type is kept as it is
                    assert got == v, (t, c.name, v, got)
                else:  # a malformed field passed through: text in a string column, else null
                    text = json.dumps(v, default=str) if isinstance(v, (list, dict)) else str(v)
                    assert got == (text if c.type == schema.STRING else None), (t, c.name, v, got)


def test_unknown_row_keys_are_reported_not_added():
    row = {c: None for c in names("stalls")}
    with pytest.raises(SchemaError, match="bogus"):
        check_rows([{**row, "bogus": 1}], "stalls")
    with pytest.raises(SchemaError, match="kind"):
        check_rows([{k: v for k, v in row.items() if k != "kind"}], "stalls")
    df = to_frame([{**row, "bogus": 1}], "stalls")
    assert_typed(df, "stalls")


# --------------------------------------------------------------------------- empty capture


def test_empty_capture_has_the_same_schema(empty_pcap):
    a = read_analysis(empty_pcap)
    for t in TABLES:
        df = getattr(a, t)
        assert len(df) == 0
        assert_typed(df, t)


@pytest.mark.parametrize("table", TABLES)
def test_empty_capture_files_have_the_same_schema(capsys, tmp_path, empty_pcap, table):
    rc, out, err = run(capsys, table, empty_pcap, "--format", "csv")
    assert rc == EXIT_OK, err
    assert out == ",".join(names(table)) + "\n"
    rc, out, err = run(capsys, table, empty_pcap, "--format", "jsonl")
    assert rc == EXIT_OK and out == ""
    pq_file = tmp_path / f"{table}.parquet"
    rc, out, err = run(capsys, table, empty_pcap, "--format", "parquet", "--output", pq_file)
    assert rc == EXIT_OK, err
    back = pd.read_parquet(pq_file)
    assert len(back) == 0
    assert_typed(back, table)


# --------------------------------------------------------------------------- parquet folders


def test_parquet_folder_of_several_captures_keeps_the_types(capsys, tmp_path, analyses, empty_pcap):
    """Captures whose time columns are all null in one and filled in another, and an empty one,
    written to one folder: read back as one frame with the registry's dtypes."""
    folder = tmp_path / "deliveries"
    folder.mkdir()
    picked = []
    for name, a in analyses.items():
        d = a.deliveries
        if len(d) and d.sender_settled_time.isna().all():
            picked.append(name)
            break
    for name, a in analyses.items():
        if a.deliveries.sender_settled_time.notna().any():
            picked.append(name)
            break
    assert len(picked) == 2, "samples with and without sender_settled_time"
    for name in picked:
        rc, _, err = run(capsys, "deliveries", os.path.join(ROOT, "samples", name + ".pcap"), "-T", "parquet",
                         "-o", folder / f"{name}.parquet")
        assert rc == EXIT_OK, err
    rc, _, err = run(capsys, "deliveries", empty_pcap, "-T", "parquet", "-o", folder / "empty.parquet")
    assert rc == EXIT_OK, err
    for t in ("links", "stalls", "connections"):
        (tmp_path / t).mkdir()
        for name in picked:
            write_table(getattr(analyses[name].analyzer, ROWS[t])(), t, "parquet", tmp_path / t / f"{name}.parquet")
    back = pd.read_parquet(folder)
    assert_typed(back, "deliveries")
    assert str(back.first_time.dtype) == UTC_US
    want = pd.concat([analyses[n].deliveries for n in picked], ignore_index=True)
    key = ["connection", "link_index", "delivery_id", "first_packet"]
    got = back.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want)
    for t in ("links", "stalls", "connections"):
        assert_typed(pd.read_parquet(tmp_path / t), t)
    # the file's own schema: times are Parquet timestamps adjusted to UTC
    f = pq.ParquetFile(folder / f"{picked[0]}.parquet")
    col = f.schema.column(names("deliveries").index("first_time"))
    assert col.logical_type.type == "TIMESTAMP" and '"isAdjustedToUTC":true' in col.logical_type.to_json()


# --------------------------------------------------------------------------- times against the pcap


def pcap_times(path) -> dict[int, datetime]:
    """1-based record number -> capture time, from the record headers as dpkt parses them."""
    with open(path, "rb") as f:
        data = f.read()
    fh = dpkt.pcap.LEFileHdr(data[:24]) if data[:4] == b"\xd4\xc3\xb2\xa1" else dpkt.pcap.FileHdr(data[:24])
    assert fh.magic == dpkt.pcap.TCPDUMP_MAGIC  # microsecond pcap
    hdr_cls = dpkt.pcap.LEPktHdr if data[:4] == b"\xd4\xc3\xb2\xa1" else dpkt.pcap.PktHdr
    out = {}
    off, n = 24, 0
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    while off < len(data):
        h = hdr_cls(data[off:off + 16])
        n += 1
        out[n] = epoch + timedelta(seconds=h.tv_sec, microseconds=h.tv_usec)
        off += 16 + h.caplen
    return out


PACKET_OF = {
    "deliveries": {"first_time": "first_packet", "last_time": "last_packet", "settled_time": "settled_packet",
                   "outcome_time": "outcome_packet"},
    "stalls": {"start": "start_packet", "end": "end_packet"},
    "connections": {"first_time": "first_packet", "last_time": "last_packet"},
    "sessions": {"begin_time": "begin_packet"},
    "errors": {"time": "packet"},
}


def test_times_are_the_capture_times_of_their_packets(analyses):
    checked = 0
    for name, a in analyses.items():
        times = pcap_times(os.path.join(ROOT, "samples", name + ".pcap"))
        for t, pairs in PACKET_OF.items():
            df = getattr(a, t)
            if t == "errors":
                df = df[df.source == "frame"]
            for tcol, pcol in pairs.items():
                assert str(df[tcol].dtype) == UTC_US
                for ts, pk in zip(df[tcol], df[pcol]):
                    if pd.isna(pk):
                        assert pd.isna(ts), (name, t, tcol)
                        continue
                    assert ts.to_pydatetime() == times[int(pk)], (name, t, tcol, pk)
                    checked += 1
    assert checked > 500


def test_csv_and_jsonl_times_are_the_parquet_instants(analyses, tmp_path):
    a = analyses["outcomes"]
    rows = a.analyzer.delivery_rows()
    buf = io.StringIO()
    write_table(rows, "deliveries", "jsonl", buf)
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    buf = io.StringIO()
    write_table(rows, "deliveries", "csv", buf)
    csv = pd.read_csv(io.StringIO(buf.getvalue()), dtype=str, keep_default_na=False)
    df = a.deliveries
    for c in time_columns("deliveries"):
        for i, ts in enumerate(df[c]):
            want = None if pd.isna(ts) else ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            assert lines[i][c] == want
            assert csv[c][i] == (want or "")
            if want:
                assert datetime.fromisoformat(want) == ts.to_pydatetime()


# --------------------------------------------------------------------------- streaming writer


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_small_batches_write_the_same_file(analyses, tmp_path, fmt):
    rows = [r for a in analyses.values() for r in a.analyzer.delivery_rows()]
    assert len(rows) > 50
    one, many = tmp_path / f"one.{fmt}", tmp_path / f"many.{fmt}"
    assert write_table(iter(rows), "deliveries", fmt, one) == len(rows)
    assert write_table((r for r in rows), "deliveries", fmt, many, batch_rows=7) == len(rows)
    if fmt == "parquet":
        assert pq.ParquetFile(many).metadata.num_row_groups > 1
        pd.testing.assert_frame_equal(pd.read_parquet(one), pd.read_parquet(many))
        pd.testing.assert_frame_equal(pd.read_parquet(many), to_frame(rows, "deliveries"))
    else:
        assert one.read_text() == many.read_text()
        if fmt == "csv":
            assert one.read_text().count("connection,channel,") == 1


def test_json_columns_are_json_text_in_frames_and_values_in_jsonl(analyses):
    a = analyses["outcomes"]
    rows = a.analyzer.connection_rows()
    df = a.connections
    for c in (c.name for c in REGISTRY["connections"] if c.type == schema.JSON):
        for i, r in enumerate(rows):
            assert (json.loads(df[c][i]) if pd.notna(df[c][i]) else None) == r[c]
    buf = io.StringIO()
    write_table(rows, "connections", "jsonl", buf)
    got = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [g["errors"] for g in got] == [r["errors"] for r in rows]
    assert [g["protocol_headers_client"] for g in got] == [r["protocol_headers_client"] for r in rows]
