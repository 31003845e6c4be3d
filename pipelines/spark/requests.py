"""The requests table on Spark: ``read_captures(spark, paths, tables=[..., "requests"])["requests"]``.

A request and its reply are on different connections (flows) and matched across the whole
capture: the deliveries that can be a request or a reply (a reply-to, a correlation-id, or an
``operation`` property) are few, so their columns are brought to the driver, matched there by
the single process's :class:`~amqp_dissect.results.requests.RequestMatcher` with the links
table, and the rows made a DataFrame with the registry's Spark schema.  Spark's times are
microseconds: the round trips are those of the microsecond times.
"""

from __future__ import annotations

from datetime import datetime, timezone

from amqp_dissect.results.requests import REQUEST_FIELDS, RequestMatcher
from amqp_dissect.results.schema import TIME, columns

from amqp_dissect.pipelines.runs.requests import LINK_KEYS as _LINK_FIELDS  # (the links' columns the matcher reads)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ns(t):
    """A Spark timestamp (a datetime) as integer nanoseconds since the epoch."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    d = t - _EPOCH
    return (d.days * 86400 + d.seconds) * 1_000_000_000 + d.microseconds * 1000


def _dt(ns):
    if ns is None:
        return None
    from datetime import timedelta

    return _EPOCH + timedelta(microseconds=ns // 1000)


def _plain(row, times) -> dict:
    d = row.asDict()
    for k in times:
        if k in d:
            d[k] = _ns(d[k])
    return d


def requests_frame(spark, deliveries, links, capture_end_ns: int | None = None, clock_steps=()):
    """The requests DataFrame of the deliveries and links DataFrames (those of ``read_captures``);
    ``clock_steps``: the capture's (``CaptureTables.clock_steps``), a round trip across one unknown."""
    from amqp_dissect.results.tables import spark_schema

    matcher = RequestMatcher()
    if clock_steps:
        from amqp_dissect.clock import ClockWatch

        matcher.clock = ClockWatch.of(clock_steps)
    _feed_requests(matcher, deliveries)
    link_rows = [_plain(r, ("attach_time", "attached_time", "detach_time"))
                 for r in links.select(*[c for c in _LINK_FIELDS if c in links.columns]).toLocalIterator()]
    if capture_end_ns is None:
        capture_end_ns = _capture_end(deliveries, links)
    rows = matcher.rows(link_rows, capture_end_ns)
    return spark.createDataFrame(_spark_rows(rows), schema=spark_schema("requests"))


def _feed_requests(matcher: RequestMatcher, deliveries) -> None:
    """The deliveries that may be requests or replies (a reply-to, a correlation id, an
    "operation" property), then the links' last transfer times (from every delivery, one row
    per link)."""
    from pyspark.sql import functions as F

    have = set(deliveries.columns)
    wanted = [c for c in REQUEST_FIELDS if c in have]
    cond = F.lit(False)
    for c in ("reply_to", "correlation_id"):
        if c in have:
            cond = cond | F.col(c).isNotNull()
    if "application_properties" in have:
        cond = cond | F.col("application_properties").contains('"operation"')
    d_times = ("first_time", "last_time")
    for r in deliveries.where(cond).select(*wanted).toLocalIterator():
        matcher.add(_plain(r, d_times))
    last = deliveries.groupBy("connection", "link_index").agg(F.max("last_time").alias("last_time"))
    for r in last.toLocalIterator():
        if r["last_time"] is not None:
            matcher.transfer(r["connection"], r["link_index"], _ns(r["last_time"]))


def _capture_end(deliveries, links) -> int | None:
    """The latest detach or delivery time (nanoseconds), when the capture's end is not given."""
    from pyspark.sql import functions as F

    ends = [x for x in ((_ns(r[0]) if r[0] is not None else None)
                        for r in [links.agg(F.max("detach_time")).collect()[0],
                                  deliveries.agg(F.max("last_time")).collect()[0]]) if x is not None]
    return max(ends) if ends else None


def _spark_rows(rows: list[dict]) -> list[tuple]:
    """The requests' row dicts as tuples of the registry's columns, in Spark's types (times as
    datetimes, json cells as text)."""
    import json

    cols = columns("requests")
    out = []
    for r in rows:
        vals = []
        for c in cols:
            v = r.get(c.name)
            if c.type == TIME:
                v = _dt(v)
            elif c.type == "json" and v is not None:
                v = json.dumps(v, sort_keys=True, ensure_ascii=False)
            vals.append(v)
        out.append(tuple(vals))
    return out
