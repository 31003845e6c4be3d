"""The six archive summaries (:data:`SUMMARIES`), in Spark (:func:`summary_frame`, a remote
output) or in Python tasks from the written tables (:func:`summary_rows`, a local one)."""

from __future__ import annotations

import os
import shutil

from amqp_dissect.amqp.spec import OUTCOMES
from amqp_dissect.results.analytics import percentile
from amqp_dissect.results.tables import spark_schema


SUMMARIES = ("latency_by_link", "latency_by_address", "latency_by_window", "outcomes", "stalls_by_link",
             "stalls_by_address")
DEFAULT_WINDOW = 60.0
PERCENTILES = (50, 90, 99)


# --------------------------------------------------------------------------- summaries


def _lat_aggs(col: str = "settlement_latency"):
    from pyspark.sql import functions as F

    pct = F.expr(f"percentile({col}, array({', '.join(str(p / 100) for p in PERCENTILES)}))")
    return [
        F.count(col).alias("count"),
        pct.alias("_pct"),
        F.max(col).alias("max"),
        F.min(col).alias("min"),
        F.avg(col).alias("mean"),
    ]


def _unpack_pct(df):
    from pyspark.sql import functions as F

    for i, p in enumerate(PERCENTILES):
        df = df.withColumn(f"p{p}", F.col("_pct").getItem(i))
    return df.drop("_pct")


def _sorted(df, *cols):
    """``df`` sorted by ``cols`` in one partition (one output file): summaries are small (a
    row per link, address, window...), and ``orderBy`` would cost a sampling job."""
    return df.repartition(1).sortWithinPartitions(*cols)


def summary_frame(name: str, tables: dict, window: float = DEFAULT_WINDOW):
    """The summary DataFrame ``name`` (one of :data:`SUMMARIES`), computed in Spark from the
    table DataFrames (percentiles: Spark's exact ``percentile``, linear interpolation like
    numpy's default)."""
    from pyspark.sql import functions as F

    d = tables["deliveries"]
    links = tables["links"]
    stalls = tables["stalls"]
    stat_cols = ["count"] + [f"p{p}" for p in PERCENTILES] + ["max", "min", "mean"]

    if name == "latency_by_link":
        lk = links.select("connection", "session", "channel", F.col("name").alias("link"), "link_index", "address")
        per_link = _unpack_pct(d.groupBy("connection", "link_index").agg(*_lat_aggs()))
        return _sorted(lk.join(per_link, ["connection", "link_index"], "left")
                       .withColumn("count", F.coalesce(F.col("count"), F.lit(0)))
                       .select("connection", "session", "channel", "link", "link_index", "address", *stat_cols),
                       F.col("p99").desc_nulls_last(), "connection", "link_index")
    if name == "latency_by_address":
        addrs = links.select("address").distinct()
        per_addr = _unpack_pct(d.groupBy(F.col("address").alias("_a")).agg(*_lat_aggs()))
        return _sorted(addrs.join(per_addr, addrs["address"].eqNullSafe(per_addr["_a"]), "left")
                       .withColumn("count", F.coalesce(F.col("count"), F.lit(0)))
                       .select("address", *stat_cols),
                       F.col("p99").desc_nulls_last(), "address")
    if name == "latency_by_window":
        wus = round(float(window) * 1_000_000)  # windows in whole microseconds since the epoch, exactly
        win = d.withColumn("_wstart", F.floor(F.expr("unix_micros(first_time)") / F.lit(wus)) * F.lit(wus))
        outcome_cols = [F.sum(F.when(F.col("outcome") == o, 1).otherwise(0)).alias(o) for o in OUTCOMES]
        return _sorted(_unpack_pct(win.groupBy("_wstart").agg(
            F.count(F.lit(1)).alias("deliveries"), *_lat_aggs(), *outcome_cols,
            F.sum(F.when(F.col("settled_time").isNull(), 1).otherwise(0)).alias("unsettled")))
            .withColumn("window_start", F.expr("timestamp_micros(CAST(_wstart AS BIGINT))"))
            .withColumn("window_end", F.expr(f"timestamp_micros(CAST(_wstart AS BIGINT) + {wus})"))
            .select("window_start", "window_end", "deliveries", *stat_cols, *OUTCOMES, "unsettled"),
            "window_start")
    if name == "outcomes":
        return _sorted(d.groupBy("address", "outcome").agg(
            F.count(F.lit(1)).alias("deliveries"),
            F.sum(F.when(F.col("presettled"), 1).otherwise(0)).alias("presettled"),
            F.sum(F.when(F.col("settled_time").isNull(), 1).otherwise(0)).alias("unsettled")),
            "address", "outcome")
    kinds = ("link-credit", "initial-credit", "drain", "session-window")
    # idle periods (idle = true) are rows of the stalls table but not stalls: counted apart
    real = ~F.col("idle")
    stall_aggs = [F.sum(F.when(real, 1).otherwise(0)).alias("stalls"),
                  F.coalesce(F.sum(F.when(real, F.col("duration"))), F.lit(0.0)).alias("stalled_seconds"),
                  F.max(F.when(real, F.col("duration"))).alias("longest"),
                  F.sum(F.when(real & F.col("open"), 1).otherwise(0)).alias("open")] + [
        F.sum(F.when(real & (F.col("kind") == k), 1).otherwise(0)).alias(k.replace("-", "_")) for k in kinds] + [
        F.sum(F.when(F.col("idle"), 1).otherwise(0)).alias("idle_periods"),
        F.coalesce(F.sum(F.when(F.col("idle"), F.col("duration"))), F.lit(0.0)).alias("idle_seconds")]
    if name == "stalls_by_link":
        return _sorted(stalls.groupBy("connection", "channel", "link", "link_index").agg(*stall_aggs),
                       F.col("stalled_seconds").desc_nulls_last(), "connection")
    if name == "stalls_by_address":
        la = links.select("connection", "link_index", "address")
        return _sorted(stalls.join(la, ["connection", "link_index"], "left").groupBy("address").agg(*stall_aggs),
                       F.col("stalled_seconds").desc_nulls_last())
    raise ValueError(f"unknown summary {name!r}")


def summaries_frames(tables: dict, window: float = DEFAULT_WINDOW) -> dict:
    """All the summary DataFrames (see :func:`summary_frame`)."""
    return {name: summary_frame(name, tables, window) for name in SUMMARIES}


# --------------------------------------------------------------------------- summaries in Python tasks
#
# With a local output directory the summaries are computed by Python tasks straight from the
# written tables (pyarrow + numpy, one task per summary, one Spark job): the same definitions
# as :func:`summary_frame` (which a remote output still goes through), without 22 small JVM
# jobs scanning the tables again.  Each task writes ``part-00000.parquet`` with the schema
# Spark gives the summary (:func:`summary_frame`'s, nullability included).


def _spark_to_arrow(spark_schema):
    """A pyarrow schema for a Spark StructType of summary columns (flat, nullability kept)."""
    import pyarrow as pa

    m = {"StringType": pa.string(), "LongType": pa.int64(), "DoubleType": pa.float64(),
         "BooleanType": pa.bool_(), "IntegerType": pa.int32(), "TimestampType": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, m[type(f.dataType).__name__], nullable=f.nullable)
                      for f in spark_schema.fields])


def _lat_stats(values) -> dict:
    """count, percentiles (:func:`~amqp_dissect.results.analytics.percentile` rounded as Spark's
    ``percentile``, which :func:`summary_frame` uses), max, min, mean of the non-null ``values``
    (a numpy array)."""
    import numpy as np

    n = len(values)
    if not n:
        return {"count": 0, **{f"p{p}": None for p in PERCENTILES}, "max": None, "min": None, "mean": None}
    v = np.sort(values, kind="stable")
    out = {"count": n}
    for p in PERCENTILES:
        out[f"p{p}"] = float(percentile(v, p, presorted=True, spark_rounding=True))
    out["max"] = float(v[-1])
    out["min"] = float(v[0])
    out["mean"] = float(np.add.reduce(values)) / n
    return out


def _keys_of(t, cols) -> list:
    """The rows of columns ``cols`` of Arrow table ``t`` as tuples."""
    return list(zip(*(t.column(c).to_pylist() for c in cols))) if t.num_rows else []


def _group_lat(t, keys) -> dict:
    """key tuple -> :func:`_lat_stats` of the non-null settlement latencies of the group (groups
    with none are absent)."""
    import numpy as np
    import pyarrow.compute as pc

    t = t.select([*keys, "settlement_latency"]).filter(pc.is_valid(t.column("settlement_latency")))
    if not t.num_rows:
        return {}
    g = t.group_by(list(keys), use_threads=False).aggregate([("settlement_latency", "list")])
    lists = g.column("settlement_latency_list").combine_chunks()
    offs = lists.offsets.to_numpy()
    vals = lists.values.to_numpy(zero_copy_only=False)
    return {k: _lat_stats(vals[offs[i]:offs[i + 1]]) for i, k in enumerate(_keys_of(g, keys))}


def _group_sums(t, keys, cols: dict, max_cols: dict | None = None) -> dict:
    """key tuple -> {name: sum} (and {name: max}) over the groups of ``t`` by ``keys``; ``cols``
    name -> Arrow array (sum of an empty or all-null group: None), plus ``_rows`` (rows)."""
    import pyarrow as pa

    if not t.num_rows:
        return {}
    tb = pa.table({**{k: t.column(k) for k in keys}, **{f"s_{n}": a for n, a in cols.items()},
                   **{f"m_{n}": a for n, a in (max_cols or {}).items()}})
    aggs = [(f"s_{n}", "sum") for n in cols] + [(f"m_{n}", "max") for n in (max_cols or {})] + [([], "count_all")]
    g = tb.group_by(list(keys), use_threads=False).aggregate(aggs)
    out = {}
    names = [f"s_{n}_sum" for n in cols] + [f"m_{n}_max" for n in (max_cols or {})]
    labels = list(cols) + list(max_cols or {})
    vals = [g.column(c).to_pylist() for c in names]
    rows = g.column("count_all").to_pylist()
    for i, k in enumerate(_keys_of(g, keys)):
        d = {lab: v[i] for lab, v in zip(labels, vals)}
        d["_rows"] = rows[i]
        out[k] = d
    return out


def _flag(a):
    """``when(cond, 1).otherwise(0)`` of a boolean Arrow array (null counts as false)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.fill_null(a, False), pa.int64())


def _asc(v):  # Spark's ascending order: nulls first, NaN after every number
    if v is None:
        return (0, 0, 0)
    if isinstance(v, float) and v != v:
        return (1, 1, 0)
    return (1, 0, v)


def _desc_nulls_last(v):
    if v is None:
        return (1, 0, 0)
    if isinstance(v, float) and v != v:
        return (0, 0, 0)
    return (0, 1, -v)


SUMMARY_READS = {  # the table columns each summary reads
    "latency_by_link": {"links": ("connection", "session", "channel", "name", "link_index", "address"),
                        "deliveries": ("connection", "link_index", "settlement_latency")},
    "latency_by_address": {"links": ("address",), "deliveries": ("address", "settlement_latency")},
    "latency_by_window": {"deliveries": ("first_time", "settlement_latency", "outcome", "settled_time")},
    "outcomes": {"deliveries": ("address", "outcome", "presettled", "settled_time")},
    "stalls_by_link": {"stalls": ("connection", "channel", "link", "link_index", "idle", "duration", "open", "kind")},
    "stalls_by_address": {"stalls": ("connection", "link_index", "idle", "duration", "open", "kind"),
                          "links": ("connection", "link_index", "address")},
}
_STALL_KINDS = ("link-credit", "initial-credit", "drain", "session-window")


def _stall_rows(s, keys) -> dict:
    """key tuple -> the stall columns of :func:`summary_frame` (idle periods counted apart)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    idle = s.column("idle")
    real = pc.invert(idle)  # null stays null: neither a stall nor an idle period
    real_f = pc.fill_null(real, False)
    idle_f = pc.fill_null(idle, False)
    dur = s.column("duration")
    none = pa.scalar(None, pa.float64())
    cols = {"stalls": _flag(real), "stalled_seconds": pc.if_else(real_f, dur, none),
            "open": _flag(pc.and_kleene(real, s.column("open"))),
            **{k.replace("-", "_"): _flag(pc.and_kleene(real, pc.equal(s.column("kind"), k))) for k in _STALL_KINDS},
            "idle_periods": _flag(idle), "idle_seconds": pc.if_else(idle_f, dur, none)}
    g = _group_sums(s, keys, cols, {"longest": pc.if_else(real_f, dur, none)})
    out = {}
    for k, d in g.items():
        out[k] = {"stalls": d["stalls"], "stalled_seconds": d["stalled_seconds"] if d["stalled_seconds"] is not None
                  else 0.0, "longest": d["longest"], "open": d["open"],
                  **{c.replace("-", "_"): d[c.replace("-", "_")] for c in _STALL_KINDS},
                  "idle_periods": d["idle_periods"],
                  "idle_seconds": d["idle_seconds"] if d["idle_seconds"] is not None else 0.0}
    return out


def summary_rows(name: str, read, window: float = DEFAULT_WINDOW) -> list[dict]:
    """The rows of summary ``name`` in output order, computed in Python from the tables
    (``read(table, columns)`` -> Arrow table): what :func:`summary_frame` computes in Spark."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    stats = ["count"] + [f"p{p}" for p in PERCENTILES] + ["max", "min", "mean"]
    empty = _lat_stats(np.empty(0))
    cols = SUMMARY_READS[name]
    t = {tb: read(tb, list(c)) for tb, c in cols.items()}
    if name == "latency_by_link":
        per = _group_lat(t["deliveries"], ("connection", "link_index"))
        rows = []
        for c, s, ch, n, li, a in _keys_of(t["links"], cols["links"]):
            st = per.get((c, li), empty) if c is not None and li is not None else empty
            rows.append({"connection": c, "session": s, "channel": ch, "link": n, "link_index": li, "address": a,
                         **st})
        rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["connection"]), _asc(r["link_index"]),
                                 _asc(r["session"]), _asc(r["channel"]), _asc(r["link"]), _asc(r["address"])))
        return rows
    if name == "latency_by_address":
        per = _group_lat(t["deliveries"], ("address",))
        addrs = set(t["links"].column("address").to_pylist())
        rows = [{"address": a, **per.get((a,), empty)} for a in addrs]
        rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["address"])))
        return rows
    if name == "latency_by_window":
        d = t["deliveries"]
        wus = round(float(window) * 1_000_000)
        ft = d.column("first_time")
        us = pc.cast(ft, pa.int64())
        if ft.type.unit == "ns":  # (the registry's nanoseconds; Spark's tables hold microseconds)
            us = pa.array(np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 1000), pa.int64(),
                          mask=~pc.is_valid(us).to_numpy(zero_copy_only=False))
        # floor(micros / window) * window, in doubles then longs like Spark's expression
        f = np.floor(pc.cast(us, pa.float64()).to_numpy(zero_copy_only=False) / float(wus))
        valid = pc.is_valid(us).to_numpy(zero_copy_only=False)
        start = pa.array(np.where(valid, f, 0).astype(np.int64) * wus, pa.int64(), mask=~valid)
        d = d.append_column("_wstart", start)
        lat = _group_lat(d, ("_wstart",))
        oc = d.column("outcome")
        sums = _group_sums(d, ("_wstart",), {**{o: _flag(pc.equal(oc, o)) for o in OUTCOMES},
                                             "unsettled": _flag(pc.is_null(d.column("settled_time")))})
        rows = []
        for (w,), sm in sums.items():
            ts = None if w is None else _utc_micros(w)
            te = None if w is None else _utc_micros(w + wus)
            rows.append({"window_start": ts, "window_end": te, "deliveries": sm["_rows"],
                         **lat.get((w,), empty), **{o: sm[o] for o in OUTCOMES}, "unsettled": sm["unsettled"],
                         "_w": w})
        rows.sort(key=lambda r: _asc(r["_w"]))
        return rows
    if name == "outcomes":
        d = t["deliveries"]
        sums = _group_sums(d, ("address", "outcome"), {"presettled": _flag(d.column("presettled")),
                                                        "unsettled": _flag(pc.is_null(d.column("settled_time")))})
        rows = [{"address": a, "outcome": o, "deliveries": sm["_rows"], "presettled": sm["presettled"],
                 "unsettled": sm["unsettled"]} for (a, o), sm in sums.items()]
        rows.sort(key=lambda r: (_asc(r["address"]), _asc(r["outcome"])))
        return rows
    if name == "stalls_by_link":
        keys = ("connection", "channel", "link", "link_index")
        rows = [dict(zip(keys, k), **v) for k, v in _stall_rows(t["stalls"], keys).items()]
        rows.sort(key=lambda r: (_desc_nulls_last(r["stalled_seconds"]), _asc(r["connection"]), _asc(r["channel"]),
                                 _asc(r["link_index"]), _asc(r["link"])))
        return rows
    if name == "stalls_by_address":
        s = t["stalls"]
        la: dict = {}  # (connection, link_index) -> addresses: the links table's key, so one each
        for c, li, a in _keys_of(t["links"], ("connection", "link_index", "address")):
            if c is not None and li is not None:
                la.setdefault((c, li), []).append(a)
        idx, addr = [], []
        for i, (c, li) in enumerate(_keys_of(s, ("connection", "link_index"))):
            for a in la.get((c, li), [None]):  # a left join: unmatched stalls under a null address
                idx.append(i)
                addr.append(a)
        s = s.take(pa.array(idx, pa.int64())).append_column("address", pa.array(addr, pa.string()))
        rows = [{"address": k[0], **v} for k, v in _stall_rows(s, ("address",)).items()]
        rows.sort(key=lambda r: (_desc_nulls_last(r["stalled_seconds"]), _asc(r["address"])))
        return rows
    raise ValueError(f"unknown summary {name!r}")


def _utc_micros(us: int):
    import datetime as dt

    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)


def _read_local_table(directory: str):
    def read(table: str, columns: list):
        import pyarrow.parquet as pq

        return pq.read_table(os.path.join(directory, table), columns=columns, use_threads=False)
    return read


def write_summary_file(directory: str, rows: list[dict], schema) -> int:
    """Write the summary ``rows`` to ``directory/part-00000.parquet`` (schema ``schema``, snappy),
    through a temporary name, and ``_SUCCESS``; returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    t = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
    path = os.path.join(directory, "part-00000.parquet")
    tmp = os.path.join(directory, f".part-00000.parquet.{os.getpid()}.tmp")
    pq.write_table(t, tmp, compression="snappy")
    os.replace(tmp, path)
    open(os.path.join(directory, "_SUCCESS"), "wb").close()
    return t.num_rows


def _summaries_task(tables_dir: str, window: float, schemas: dict):
    def fn(names):
        for name in names:
            rows = summary_rows(name, _read_local_table(tables_dir), window)
            yield name, write_summary_file(os.path.join(tables_dir, name), rows, schemas[name])
    return fn


def write_summaries_local(spark, tables: dict, directory: str, window: float = DEFAULT_WINDOW) -> dict:
    """The summaries of the tables under the local ``directory``, computed and written there by
    Python tasks (one per summary, one Spark job); returns name -> rows."""
    schemas = {name: _spark_to_arrow(summary_frame(name, tables, window).schema) for name in SUMMARIES}
    order = list(SUMMARIES)  # those over the deliveries first: the job waits for its last task
    rdd = spark.sparkContext.parallelize(order, len(order))
    return dict(rdd.mapPartitions(_summaries_task(directory, window, schemas)).collect())
