"""The messages command and API on a real capture with its client's truth (samples/outcomes: a
sender and a receiver that accepts, rejects, releases (redelivered) and modifies), -Y on the
table's columns, the formats and the registry's dtypes."""

from __future__ import annotations

import json
import os
from collections import Counter

import pyarrow.parquet as pq
import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main
from amqp_dissect.results.schema import names
from amqp_dissect.results.tables import arrow_schema, pandas_dtypes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def truth():
    with open(os.path.join(SAMPLES, "outcomes.truth.json"), encoding="utf-8") as f:
        t = json.load(f)
    sent = next(lk for lk in t["links"] if lk["role"] == "sender")
    got = next(lk for lk in t["links"] if lk["role"] == "receiver")
    return sent, got


def jsonl(capsys, *args):
    rc, out, err = run(capsys, "messages", OUTCOMES, "-T", "jsonl", *args)
    assert rc == EXIT_OK, err
    return [json.loads(line) for line in out.splitlines()]


def test_every_message_of_the_client_truth(capsys, truth):
    sent, got = truth
    rows = {r["message_id"]: r for r in jsonl(capsys)}
    assert set(rows) == {d["message_id"] for d in sent["deliveries"]}
    received = Counter(d["message_id"] for d in got["deliveries"])
    last_outcome = {d["message_id"]: d["outcome"] for d in got["deliveries"]}
    redelivered = {d["message_id"] for d in got["deliveries"] if d["redelivered"]}
    for d in sent["deliveries"]:
        r = rows[d["message_id"]]
        assert (r["message_id_type"], r["matched_by"], r["publishes"]) == ("string", "message-id", 1)
        assert r["producer_link"] == sent["name"] and r["producer_outcome"] == d["outcome"]
        assert r["consumers"] == 1 and r["deliveries"] == received[d["message_id"]]
        [c] = r["consumer_deliveries"]
        assert c["link"] == got["name"] and c["outcome"] == last_outcome[d["message_id"]]
        assert r["state"] == ("delivered twice" if d["message_id"] in redelivered else "delivered")
        assert r["redeliveries_by_repeat"] == received[d["message_id"]] - 1
        # the broker holds the message before the consumer gets it; the outcome comes after the transfer
        assert 0 < r["residence"] == r["residence_max"] <= r["end_to_end"] == r["end_to_end_max"]
        assert r["producer_time"] < r["first_consumer_time"]


def test_display_filter_on_columns(capsys, truth):
    _, got = truth
    twice = jsonl(capsys, "-Y", 'state == "delivered twice" and residence > 0')
    assert {r["message_id"] for r in twice} == {d["message_id"] for d in got["deliveries"] if d["redelivered"]}
    assert jsonl(capsys, "-Y", "consumer_deliveries contains \"rejected\"") == [
        r for r in jsonl(capsys) if r["consumer_deliveries"][0]["outcome"] == "rejected"]
    assert len(jsonl(capsys, "-Y", "message_id == null")) == 0
    rc, _, err = run(capsys, "messages", OUTCOMES, "-Y", "stat == 1")
    assert rc == EXIT_USAGE and "no column 'stat'" in err and "Traceback" not in err


@pytest.mark.parametrize("fmt", ["csv", "parquet", "table"])
def test_formats(capsys, tmp_path, fmt):
    out = tmp_path / f"m.{fmt}"
    rc, text, err = run(capsys, "messages", OUTCOMES, "-T", fmt, "-o", out)
    assert rc == EXIT_OK, err
    if fmt == "parquet":
        assert pq.read_schema(out).remove_metadata() == arrow_schema("messages").remove_metadata()
        df = pq.read_table(out).to_pandas()
        assert dict(df.dtypes) == pandas_dtypes("messages") and len(df) == 9
    elif fmt == "csv":
        lines = out.read_text().splitlines()
        assert lines[0] == ",".join(names("messages")) and len(lines) == 10
    else:
        assert out.read_text().splitlines()[0].split()[:3] == ["first_time", "address", "message_id"]


def test_pandas_api(truth):
    import amqp_dissect

    t = amqp_dissect.analyze(OUTCOMES, tables=["messages", "deliveries"], messages=True)
    m = t.messages
    import pandas as pd

    from amqp_dissect.pipelines.api import categorical_columns

    cats = set(categorical_columns("messages"))  # (the API's categoricals; the rest as the Parquet's)
    assert list(m.columns) == names("messages") and cats
    assert {c: t for c, t in m.dtypes.items() if c not in cats} == \
        {c: t for c, t in pandas_dtypes("messages").items() if c not in cats}
    assert all(isinstance(m[c].dtype, pd.CategoricalDtype) for c in cats)
    # the per-consumer detail is the deliveries table joined on message_id
    d = t.deliveries
    per_id = d[d["sender_side"] == "server"].groupby("message_id").size()
    assert dict(per_id) == dict(zip(m["message_id"], m["deliveries"]))
    only = amqp_dissect.analyze(OUTCOMES, tables="messages", columns=["message_id", "state"]).messages
    assert list(only.columns) == ["message_id", "state"] and len(only) == 9
    batches = list(amqp_dissect.iter_batches(OUTCOMES, "messages", batch_rows=4))
    assert [len(b) for b in batches] == [4, 4, 1] and batches[0].schema == arrow_schema("messages")
    both = amqp_dissect.analyze(OUTCOMES, tables=["requests", "messages"])  # (one reading gives both)
    assert list(both) == ["requests", "messages"] and both.messages.equals(m)
