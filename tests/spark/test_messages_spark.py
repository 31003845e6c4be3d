"""The messages table on Spark (pipelines/spark/messages.py: DataFrame operations) gives the single
process's rows: on real captures read as one capture set through read_captures, and on synthetic
deliveries with the corner cases (typed ids, digests, publish missing, repeats, dead-lettering,
broker to broker, unknown sides)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pandas as pd

from sparkneeds import require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

import amqp_dissect  # noqa: E402
from amqp_dissect.results.messages import message_rows  # noqa: E402
from amqp_dissect.results.schema import TIME, columns  # noqa: E402
from amqp_dissect.results.tables import to_frame  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURES = [os.path.join(ROOT, "samples", f"{n}.pcap") for n in ("outcomes", "multi_session", "presettled")]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
T0 = 1_700_000_000_000_000_000
US = 1000


def _cells(df: pd.DataFrame, c: str, typ: str) -> list:
    s = df[c]
    if typ == TIME:
        s = pd.to_datetime(s, utc=True)
    vals = s.astype(object).where(s.notna(), None).tolist()
    if c in ("consumer_deliveries", "packets"):  # (Spark's JSON is compact: the same values)
        vals = [None if v is None else json.loads(v) for v in vals]
    return vals


def _same(sp: pd.DataFrame, lp: pd.DataFrame) -> None:
    assert list(sp.columns) == list(lp.columns) and len(sp) == len(lp)
    for c in columns("messages"):
        assert _cells(sp, c.name, c.type) == _cells(lp, c.name, c.type), c.name


def _row(conn, side, key, t_us, *, typ="string", digest=False, outcome="accepted", ot_us=None, link_index=0,
         dc=0, ma=None):
    return {"connection": conn, "link": f"{conn}/{link_index}", "link_index": link_index, "address": "q",
            "sender_side": side, "first_time": T0 + t_us * US, "first_packet": t_us,
            "outcome": outcome, "outcome_time": None if ot_us is None else T0 + ot_us * US,
            "outcome_packet": None if ot_us is None else ot_us, "header_delivery_count": dc,
            "message_id": None if digest else key, "message_id_type": None if digest else typ,
            "bare_digest": key if digest else None, "message_annotations": ma, "application_properties": None}


SYNTHETIC = [
    _row("P", "client", "5", 1), _row("P", "client", "5", 2, typ="ulong"),
    _row("C", "server", "5", 30, typ="ulong", ot_us=40), _row("C2", "server", "5", 35, typ="ulong", ot_us=90,
                                                              link_index=1),
    _row("P", "client", "d", 3, digest=True), _row("P", "client", "d", 4, digest=True),
    _row("C", "server", "d", 50, digest=True, ot_us=51), _row("C", "server", "d", 52, digest=True),
    _row("C", "server", "only-consumed", 60),
    _row("C", "server", "r", 70, outcome="released", ot_us=71), _row("C", "server", "r", 80, ot_us=81, dc=1),
    _row("P", "client", "r", 5),
    _row("C", "server", "x", 90, ma=json.dumps({"x-first-death-reason": "expired"})),
    _row("B2B", "client", "5", 20, typ="ulong"), _row("U", None, "u", 95),
]
LINKS = [{"connection": c, "link_index": i, "sender_side": s, "role": None}
         for c, i, s in (("P", 0, "client"), ("C", 0, "server"), ("C2", 1, "server"), ("B2B", 0, "client"))]
CONNS = [{"connection": "P", "container_id_client": "app", "container_id_server": "broker"},
         {"connection": "C", "container_id_client": "app2", "container_id_server": "broker"},
         {"connection": "B2B", "container_id_client": "broker", "container_id_server": "broker-2"}]


def _df(spark, rows, cols: dict):
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(n, t, True) for n, t in cols.items()])
    conv = [{k: (EPOCH + timedelta(microseconds=v // 1000) if isinstance(cols[k], T.TimestampType) and v is not None
                 else v) for k, v in r.items() if k in cols} for r in rows]
    return spark.createDataFrame([tuple(r.get(n) for n in cols) for r in conv], schema)


def test_spark_messages_are_the_single_process_rows(spark):
    from pyspark.sql import types as T

    from amqp_dissect.pipelines.spark.messages import messages_frame
    from amqp_dissect.spark import read_captures

    # real captures, one capture set
    t = read_captures(spark, CAPTURES, tables=["messages"], summaries=False)
    try:
        lp = amqp_dissect.analyze(CAPTURES, tables="messages").messages
        assert len(lp) == 9 + 9 + 20
        _same(t["messages"].toPandas(), lp)
        assert t.counts["messages"] == len(lp)
    finally:
        t.close()
    # synthetic corner cases
    S, L, TS = T.StringType(), T.LongType(), T.TimestampType()
    d = _df(spark, SYNTHETIC, {"connection": S, "link": S, "link_index": L, "address": S, "sender_side": S,
                               "first_time": TS, "first_packet": L, "outcome": S, "outcome_time": TS,
                               "outcome_packet": L, "header_delivery_count": L, "message_id": S,
                               "message_id_type": S, "bare_digest": S, "message_annotations": S,
                               "application_properties": S})
    lk = _df(spark, LINKS, {"connection": S, "link_index": L, "sender_side": S, "role": S})
    cn = _df(spark, CONNS, {"connection": S, "container_id_client": S, "container_id_server": S})
    want = to_frame(message_rows(SYNTHETIC, LINKS, CONNS), "messages")
    assert set(want["state"]) == {"delivered", "published, never delivered in the capture", "delivered twice",
                                  "delivered, publish not in the capture", "dead-lettered / expired", "unknown"}
    _same(messages_frame(spark, d, lk, cn).toPandas(), want)
