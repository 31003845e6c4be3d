"""The requests table on Spark (``read_captures(..., tables=[..., "requests"])``) is the single
process's, on the request/reply capture of samples/messages (the single process's table is itself
checked against the clients' records in test_requests_samples.py).  Uses the suite's one Spark
session (the ``spark`` fixture of tests/conftest.py)."""

from __future__ import annotations

import os

import pyarrow as pa

from amqp_dissect.pipelines.runs.local import CaptureSource
from amqp_dissect.pipelines.runs.requests import request_table
from amqp_dissect.results.schema import TIME, columns

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURE = os.path.join(ROOT, "samples", "messages", "request_reply.pcap")


def test_spark_requests_are_the_single_process_ones(spark):
    from amqp_dissect.pipelines.spark import table_schema
    from amqp_dissect.results.tables import spark_schema
    from amqp_dissect.spark import read_captures

    one, _ = request_table(CaptureSource([CAPTURE]))
    t = read_captures(spark, [CAPTURE], tables=["deliveries", "links", "requests"], summaries=False)
    try:
        df = t["requests"]
        assert df.schema == spark_schema("requests")
        got = [r.asDict() for r in df.collect()]
        assert t.counts["requests"] == len(got) == len(one) == 10
        times = {c.name for c in columns("requests") if c.type == TIME}
        for a, b in zip(got, one):
            for c in columns("requests"):
                x, y = a[c.name], b[c.name]
                if c.name in times:  # (Spark keeps microseconds: the capture's are microseconds)
                    assert (x is None and y is None) or pa.scalar(x, pa.timestamp("us", "UTC")).value * 1000 == y, c
                elif c.type == "json":
                    import json

                    assert (json.loads(x) if x is not None else None) == y, c.name
                else:
                    assert x == y, (c.name, x, y)
        assert table_schema("links") == t["links"].schema
    finally:
        t.close()
