"""Clock steps (issue 39 item 5) in the archive: the single process is the oracle.

Captures made here from the samples, as tests/capture/test_clock_steps.py makes them: a sample
with its clock stepped back 5 s half way (split in small byte ranges, so that the step and the
record confirming it can lie in two ranges' tasks), and a set of two hosts' files whose clocks
differ (host A's file stepped back 5 s, host B's capture of other traffic, its clock set to start
inside host A's file: the set is merged by time).  For each, ``run_archive`` gives the steps the
single process names (``capture["clock_steps"]``) and every table row for row, cell for cell: the
durations across a step null where the single process nulls them, the others its values.

The messages and requests tables of a stepped messages sample (``read_captures``) are the single
process's too: a residence or end to end across the step null, the row's note saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from decimal import Decimal

import pandas as pd
import pytest

import pcapbuild  # noqa: E402
from sparkneeds import assert_archive_tables_are, cells, require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

import amqp_dissect  # noqa: E402
from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis  # noqa: E402
from amqp_dissect.results.messages import CLOCK_STEP_NOTE  # noqa: E402
from amqp_dissect.results.schema import TIME, columns  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors")
NS = 1_000_000_000

pytestmark = pytest.mark.skipif(not os.environ.get("CI") and not all(shutil.which(t) for t in (
    "editcap", "mergecap", "capinfos", "tshark")),
                                reason="editcap / mergecap / capinfos / tshark are not installed")


def _sample(name: str) -> str:
    return os.path.join(ROOT, "samples", name + ".pcap")


def _epochs(path) -> list[int]:
    out = subprocess.run(["tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch"], check=True,
                         capture_output=True, text=True).stdout
    return [int(Decimal(x) * NS) for x in out.split()]


def _same_tables(out: str, local) -> int:
    """The archive's tables under ``out`` against the single process's; the durations it nulled."""
    nulled = 0
    assert_archive_tables_are(out, local, TABLES)
    d = local.deliveries
    nulled += int((d["settled_packet"].notna() & d["settlement_latency"].isna()).sum())
    return nulled


def _same_messages(sp: pd.DataFrame, lp: pd.DataFrame) -> None:
    import json

    assert list(sp.columns) == list(lp.columns) and len(sp) == len(lp)
    for c in columns("messages"):
        a, b = sp[c.name], lp[c.name]
        if c.type == TIME:
            a, b = pd.to_datetime(a, utc=True), pd.to_datetime(b, utc=True)
        a, b = cells(a), cells(b)
        if c.name in ("consumer_deliveries", "packets"):  # (Spark's JSON is compact: the same values)
            a = [None if v is None else json.loads(v) for v in a]
            b = [None if v is None else json.loads(v) for v in b]
        assert a == b, c.name


def test_the_archive_finds_the_steps_and_nulls_what_the_single_process_nulls(spark, tmp_path):
    from amqp_dissect.pipelines.spark import run_archive

    # one file, a 5 s step back half way, read in byte ranges of 1 KB
    one = str(tmp_path / "credit_idle_stepped.pcap")
    mid = pcapbuild.stepped_capture(_sample("credit_idle"), "-5", one)
    local = run_analysis(CaptureSource([one]))
    steps = local.capture["clock_steps"]
    assert [s["packet"] for s in steps] == [mid]
    res = run_archive(spark, [one], str(tmp_path / "one"), split_size=1024, partitions=3)
    assert res["stats"]["ranges"] > 2  # (the step and its confirming record: the ranges' tasks tell the driver)
    assert res["clock_steps"] == steps
    assert _same_tables(str(tmp_path / "one"), local) > 0  # (latencies across the step: null in both)

    # two hosts' files whose clocks differ: host A's stepped back 5 s, host B's starting inside it
    host_a = str(tmp_path / "host_a.pcap")
    pcapbuild.stepped_capture(_sample("outcomes"), "-5", host_a)
    host_b = str(tmp_path / "host_b.pcap")
    src = _sample("drain")
    shift = Decimal(_epochs(host_a)[0] + NS // 5 - _epochs(src)[0]) / NS
    subprocess.run(["editcap", "-F", "pcap", "-t", str(shift), src, host_b], check=True)
    local = run_analysis(CaptureSource([host_a, host_b]))
    assert local.capture.get("order", "").startswith("merged by time")
    steps = local.capture["clock_steps"]
    assert steps
    res = run_archive(spark, [host_b, host_a], str(tmp_path / "two"), split_size=2048, partitions=3)
    assert res["clock_steps"] == steps
    _same_tables(str(tmp_path / "two"), local)

    # messages and requests of a stepped messages sample: a residence / end to end / round trip
    # across the step null, as the single process has it
    from amqp_dissect.spark import read_captures

    msg = str(tmp_path / "rhea_stepped.pcap")
    mid = pcapbuild.stepped_capture(_sample("messages/rhea_request_reply"), "-5", msg)
    want = amqp_dissect.analyze([msg], tables=["messages", "requests"])
    t = read_captures(spark, [msg], tables=["messages", "requests"], summaries=False)
    try:
        assert [s["packet"] for s in t.clock_steps] == [mid]
        sp = t["messages"].toPandas()
        _same_messages(sp, want.messages)
        assert (want.messages["note"].fillna("").str.contains(CLOCK_STEP_NOTE, regex=False)).any()
        rq = t["requests"].toPandas()
        assert len(rq) == len(want.requests)
        for c in ("request_packet", "reply_packet", "round_trip"):
            assert [None if v is None else float(v) for v in cells(rq[c])] == [
                None if v is None else float(v) for v in cells(want.requests[c])], c
        assert want.requests["round_trip"].isna().any() and want.requests["reply_packet"].notna().any()
    finally:
        t.close()
