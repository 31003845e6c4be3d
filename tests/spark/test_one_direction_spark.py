"""One direction captured (issue 39, item 2) in the archive: the one-way variants of a sample give
the single-process tables row for row, ``missing_direction`` of the connections table and
``unsettled_at`` ``one-direction-captured`` of the deliveries included."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from sparkneeds import assert_archive_tables_are, require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

from amqp_dissect.pipelines.runs.local import read_analysis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors")

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


@pytest.mark.parametrize("kept,missing", [("dst", "server"), ("src", "client")])
def test_one_way_tables_in_the_archive_are_the_single_process_ones(spark, tmp_path, kept, missing):
    from amqp_dissect.pipelines.spark import run_archive

    sample = os.path.join(ROOT, "samples", "messages", "topic_fanout.pcap")  # (four connections)
    cap = tmp_path / f"oneway.{kept}.pcap"
    subprocess.run(["tshark", "-r", sample, "-Y", f"tcp.{kept}port==5672", "-w", str(cap)],
                   check=True, capture_output=True)
    out = tmp_path / "out"
    run_archive(spark, [str(cap)], str(out), partitions=3)
    a = read_analysis(str(cap))
    assert a.connections.missing_direction.tolist() == [missing] * 4
    assert set(a.deliveries.unsettled_at.dropna()) == {"one-direction-captured"}
    assert_archive_tables_are(str(out), a, TABLES)
