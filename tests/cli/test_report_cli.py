"""The report and table commands, and the notebook API, on real samples with their truth."""

from __future__ import annotations

import io
import json
import os

import pandas as pd
import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_OPEN, EXIT_USAGE, main
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.results.schema import names, time_columns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")


def sample(name):
    return os.path.join(SAMPLES, f"{name}.pcap")


def truth(name):
    return json.load(open(os.path.join(SAMPLES, f"{name}.truth.json")))


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("table", ["deliveries", "links", "stalls"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "table"])
def test_table_formats_have_documented_columns(capsys, tmp_path, table, fmt):
    out_file = tmp_path / f"t.{fmt}"
    args = [table, sample("outcomes"), "--format", fmt]
    if fmt == "table":  # (its default is a narrow set: every column with --columns all)
        args += ["--columns", "all"]
    if fmt == "parquet":
        args += ["--output", out_file]
    rc, out, err = run(capsys, *args)
    assert rc == EXIT_OK, err
    documented = names(table)
    if fmt == "csv":
        df = pd.read_csv(io.StringIO(out))
    elif fmt == "jsonl":
        df = pd.DataFrame([json.loads(line) for line in out.splitlines()])
    elif fmt == "parquet":
        df = pd.read_parquet(out_file)
    else:
        header = out.splitlines()[0].split()
        assert header == documented
        return
    assert list(df.columns) == documented
    assert len(df) > 0
    if fmt in ("csv", "jsonl"):  # times as ISO 8601 UTC text
        seen = 0
        for c in time_columns(table):
            cells = df[c].dropna().tolist()
            assert all(isinstance(x, str) and x.endswith("Z") and "T" in x for x in cells), (c, cells[:3])
            seen += len(cells)
        assert seen > 0


def test_parquet_needs_output(capsys):
    rc, out, err = run(capsys, "deliveries", sample("outcomes"), "--format", "parquet")
    assert rc == EXIT_USAGE and err.count("\n") == 1


def test_table_command_missing_file(capsys):
    rc, out, err = run(capsys, "links", "/nonexistent.pcap")
    assert rc == EXIT_OPEN and "no such file" in err


def test_outcomes_against_truth():
    t = truth("outcomes")
    a = read_analysis(sample("outcomes"))
    links = a.links.set_index("name")
    for tl in t["links"]:
        row = links.loc[tl["name"]]
        for outcome in ("accepted", "rejected", "released", "modified"):
            assert row[outcome] == tl["outcomes"][outcome], (tl["name"], outcome)
    d = a.deliveries
    rx = d[d["link"] == "outcomes-receiver"]
    assert len(rx) == t["links"][1]["deliveries_received"]
    assert set(d["settled_by"]) <= {"sender", "receiver", "both", ""}
    assert (d["settlement_latency"].dropna() >= 0).all()


def test_credit_one_has_a_stall_per_message():
    t = truth("credit_one")
    receiver = next(link for link in t["links"] if link["role"] == "receiver")
    a = read_analysis(sample("credit_one"))
    st = a.stalls
    credit = st[(st["link"] == receiver["name"]) & (st["kind"] == "link-credit")]
    assert len(credit) == len(receiver["credit_grants"]) == receiver["deliveries_received"]
    # each stall lasts about the 50 ms the consumer waited before granting the next credit
    assert (credit["duration"] > 0.04).all()


def test_presettled_counts():
    t = truth("presettled")
    a = read_analysis(sample("presettled"))
    links = a.links.set_index("name")
    for tl in t["links"]:
        assert links.loc[tl["name"], "presettled"] == tl["presettled"]


def test_large_message_delivery_row():
    t = truth("large_message")
    a = read_analysis(sample("large_message"))
    d = a.deliveries.set_index("link")
    assert d.loc["large-sender", "message_size"] == t["links"][0]["encoded_sizes"][0]
    assert d.loc["large-sender", "frames"] == t["totals"]["transfer_frames_sent"]
    assert d.loc["large-receiver", "frames"] == t["totals"]["transfer_frames_received"]


def test_json_report_has_errors_per_connection(capsys):
    rc, out, err = run(capsys, "report", sample("attach_errors"), "--format", "json")
    assert rc == EXIT_OK
    rep = json.loads(out)
    t = truth("attach_errors")
    conns = rep["connections"]
    assert len(conns) == t["connection_count"]
    conditions = [e["condition"] for c in conns for e in c["errors"] if e["source"] == "frame"]
    expected = [e["condition"] for tc in t["connections"] for e in tc["session_errors"]]
    assert sorted(conditions) == sorted(expected)
    assert all("errors" in c for c in conns)


def test_text_report_tree(capsys):
    rc, out, err = run(capsys, "report", sample("multi_session"))
    assert rc == EXIT_OK
    t = truth("multi_session")
    assert out.count("  Session ") == t["connections"][0]["sessions_begun"]
    assert out.count("    Link ") == t["link_count"]
    for tl in t["links"]:
        assert tl["name"] in out and tl["address"] in out


def test_empty_capture_gives_documented_columns(tmp_path, capsys):
    p = tmp_path / "empty.pcap"
    with open(sample("outcomes"), "rb") as f:
        p.write_bytes(f.read(24))  # the file header only
    rc, out, err = run(capsys, "stalls", p, "--format", "csv")
    assert rc == EXIT_OK
    assert out.strip().split(",") == names("stalls")


def test_report_counts_presettled_deliveries_of_every_connection(capsys):
    """The report's presettled count covers every connection, not only the last one listed: two
    captures read as one (the presettled one first), against the generating scripts' truth."""
    names_ = ["presettled", "outcomes", "credit_one"]
    expect = sum(truth(n)["totals"]["presettled_sent"] + truth(n)["totals"]["presettled_received"] for n in names_)
    assert expect > 0 and truth(names_[-1])["totals"]["presettled_sent"] == 0
    rc, out, err = run(capsys, "report", "--format", "json", *[sample(n) for n in names_])
    assert rc == EXIT_OK, err
    doc = json.loads(out)
    assert len(doc["connections"]) == sum(truth(n)["connection_count"] for n in names_)
    assert doc["notable_deliveries"]["presettled"] == expect
