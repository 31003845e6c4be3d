"""``--columns`` in every format (issue 27): csv, jsonl and parquet with ``--columns`` hold exactly
those columns, in that order, with the values the whole table holds (the oracle: the whole
table, written without ``--columns``, read back and cut to the columns)."""

from __future__ import annotations

import csv
import io
import json
import os

import pyarrow.parquet as pq
import pytest

from amqp_dissect.cli.habits import default_columns
from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
CASES = [("deliveries", "delivery_id,outcome,first_time,settlement_latency,delivery_tag,presettled"),
         ("deliveries", "+outcome_error"), ("links", "name,source_terminus,deliveries,latency_p50,drain"),
         ("errors", "all"), ("stalls", "kind,duration")]


def run(capsys, *args) -> str:
    rc = main(list(args))
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    return out


def _cols(table, spec):
    from amqp_dissect.cli.habits import pick_columns

    return pick_columns(table, spec)


@pytest.mark.parametrize("table, spec", CASES)
def test_csv_columns_are_the_whole_tables(capsys, table, spec):
    cols = _cols(table, spec)
    whole = list(csv.DictReader(io.StringIO(run(capsys, table, "-T", "csv", OUTCOMES))))
    text = run(capsys, table, "-T", "csv", "--columns", spec, OUTCOMES)
    got = list(csv.reader(io.StringIO(text)))
    assert got[0] == cols
    assert got[1:] == [[r[c] for c in cols] for r in whole]
    assert len(whole) > 0 or table == "errors"


@pytest.mark.parametrize("table, spec", CASES)
def test_jsonl_columns_are_the_whole_tables(capsys, table, spec):
    cols = _cols(table, spec)
    whole = [json.loads(line) for line in run(capsys, table, "-T", "jsonl", OUTCOMES).splitlines()]
    got = [json.loads(line) for line in run(capsys, table, "-T", "jsonl", "--columns", spec, OUTCOMES).splitlines()]
    assert [list(g) for g in got] == [cols] * len(whole)
    assert got == [{c: r[c] for c in cols} for r in whole]


@pytest.mark.parametrize("table, spec", CASES)
def test_parquet_columns_are_the_whole_tables(capsys, tmp_path, table, spec):
    cols = _cols(table, spec)
    run(capsys, table, "-T", "parquet", "-o", str(tmp_path / "all.parquet"), OUTCOMES)
    run(capsys, table, "-T", "parquet", "--columns", spec, "-o", str(tmp_path / "some.parquet"), OUTCOMES)
    whole, some = pq.read_table(tmp_path / "all.parquet"), pq.read_table(tmp_path / "some.parquet")
    assert some.schema.names == cols
    assert some.equals(whole.select(cols))


def test_columns_default_and_unknown(capsys):
    out = run(capsys, "deliveries", "-T", "csv", "--columns", "+delivery_tag", OUTCOMES)
    assert out.splitlines()[0].split(",") == default_columns("deliveries") + ["delivery_tag"]
    rc = main(["links", "-T", "jsonl", "--columns", "nope", OUTCOMES])
    _out, err = capsys.readouterr()
    assert rc == EXIT_USAGE and "--columns: links has no column 'nope'" in err
