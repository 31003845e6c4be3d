"""The six archive summaries (:data:`SUMMARIES`), defined once: :func:`summary_rows` computes a
summary's rows in Python (pyarrow + numpy) from the table columns it reads
(:data:`SUMMARY_READS`), into the columns of :func:`summary_schema`.  With a local output
directory Python tasks read the written tables and write the summaries
(:func:`write_summaries_local`: one Spark job of a task per slot; a run of an archive directory
computes them in its own process, :func:`write_summaries_here`); otherwise Spark brings
each summary's columns to one task that runs the same function and writes through Spark's
writer (:func:`summary_frame`)."""

from __future__ import annotations

import os
import shutil

from amqp_dissect.amqp.spec import OUTCOMES
from amqp_dissect.pipelines.options import DEFAULT_WINDOW  # noqa: F401  (declared with the archive's options; also this module's name)
from amqp_dissect.results.percentiles import percentile


SUMMARIES = ("latency_by_link", "latency_by_address", "latency_by_window", "outcomes", "stalls_by_link",
             "stalls_by_address")
PERCENTILES = (50, 90, 99)
_STALL_KINDS = ("link-credit", "initial-credit", "drain", "session-window")

# --------------------------------------------------------------------------- the columns
#
# Each summary's columns, in order: (name, type, nullable, meaning); the types "string", "long",
# "double", "time" (UTC microseconds).  Group keys come first; _STATS are the latency statistics,
# _STALL the stall columns.  docs/archives-spark.md's summary tables are made from these
# (:func:`markdown`; a test compares).

_LAT = "settlement latency (first transfer to settlement) of those deliveries, {q}, seconds"
_STATS = [("count", "long", False, "deliveries with a settlement latency (settled and seen from their first transfer)")] + [
    (f"p{p}", "double", True, _LAT.format(q=f"{p}th percentile (linear interpolation)")) for p in PERCENTILES] + [
    ("max", "double", True, _LAT.format(q="largest")), ("min", "double", True, _LAT.format(q="smallest")),
    ("mean", "double", True, _LAT.format(q="mean"))]
_STALL = [("stalls", "long", True, "stalls (stalls-table rows with idle false)"),
          ("stalled_seconds", "double", False, "sum of the stalls' durations (an open stall: to the capture's end), "
                                                "seconds"),
          ("longest", "double", True, "longest stall, seconds"),
          ("open", "long", True, "stalls still open at the capture's end")] + [
    (k.replace("-", "_"), "long", True, f"stalls of kind {k}") for k in _STALL_KINDS] + [
    ("idle_periods", "long", True, "idle periods (stalls-table rows with idle true)"),
    ("idle_seconds", "double", False, "sum of the idle periods' durations, seconds")]
_CONN = ("connection", "string", True, "connection id (as the tables)")
_LINK = [("link", "string", True, "link name"), ("link_index", "long", True, "index of the link in its connection")]
SUMMARY_COLUMNS = {
    "latency_by_link": [_CONN, ("session", "long", True, "index of the session in its connection"),
                        ("channel", "long", True, "the session's channel"), *_LINK,
                        ("address", "string", True, "the link's address (see the links table)"),
                        *_STATS],
    "latency_by_address": [("address", "string", True, "a links-table address (every one, null included)"),
                           *_STATS],
    "latency_by_window": [("window_start", "time", True, "start of the window (first transfer times floored to "
                                                          "--window seconds since the epoch), UTC"),
                          ("window_end", "time", True, "end of the window (start + --window), UTC"),
                          ("deliveries", "long", False, "deliveries whose first transfer is in the window"),
                          *_STATS, *[(o, "long", True, f"deliveries of the window with outcome {o}") for o in OUTCOMES],
                          ("unsettled", "long", True, "deliveries of the window never settled in the capture")],
    "outcomes": [("address", "string", True, "the delivery's link address"),
                 ("outcome", "string", True, "the deliveries-table outcome"),
                 ("deliveries", "long", False, "deliveries of that address and outcome"),
                 ("presettled", "long", True, "of them sent settled"),
                 ("unsettled", "long", True, "of them never settled in the capture")],
    "stalls_by_link": [_CONN, ("channel", "long", True, "the session's channel"), *_LINK, *_STALL],
    "stalls_by_address": [("address", "string", True, "the stalled link's address (null: no link, or unknown)"),
                          *_STALL],
}
SUMMARY_INTRO = {
    "latency_by_link": "One row per link of the links table, its deliveries' settlement latency; by p99 "
                       "descending (nulls last), then connection, link_index.",
    "latency_by_address": "One row per link address, the settlement latency of the deliveries on links of that "
                          "address; by p99 descending (nulls last), then address.",
    "latency_by_window": "One row per window of first-transfer time (`--window` seconds, default 60) with "
                         "deliveries; in time order.",
    "outcomes": "One row per address and outcome; by address, outcome.",
    "stalls_by_link": "One row per link (or session, for session-window stalls) with stall-table rows; by "
                      "stalled_seconds descending, then connection, channel, link_index.",
    "stalls_by_address": "One row per link address with stall-table rows; by stalled_seconds descending, then "
                         "address.",
}


def markdown() -> str:
    """The summaries' column tables of docs/archives-spark.md (between the ``summaries:begin`` /
    ``summaries:end`` markers)."""
    names = {"string": "string", "long": "int64", "double": "float64", "time": "timestamp[us, UTC]"}
    out = []
    for name in SUMMARIES:
        cols = SUMMARY_COLUMNS[name]
        out.append(f"**{name}** ({len(cols)} columns). {SUMMARY_INTRO[name]}\n")
        out.append("| column | type | meaning |\n| --- | --- | --- |")
        for c, t, n, meaning in cols:
            out.append(f"| {c} | {names[t]}{'' if n else ' (never null)'} | {meaning} |")
        out.append("")
    return "\n".join(out)


def summary_schema(name: str):
    """The Arrow schema of summary ``name`` (the Parquet files' own, nullability included), with
    pandas metadata (:func:`~amqp_dissect.pipelines.archive.pandas_metadata`: ``pandas.read_parquet``
    gives string, nullable Int64, float64 and ``datetime64[ns, UTC]`` columns)."""
    import pyarrow as pa

    from amqp_dissect.pipelines.archive import pandas_metadata

    types = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(),
             "time": pa.timestamp("us", tz="UTC")}
    schema = pa.schema([pa.field(c, types[t], nullable=n) for c, t, n, _ in SUMMARY_COLUMNS[name]])
    return schema.with_metadata(pandas_metadata(schema))


def summary_spark_schema(name: str):
    """The Spark schema of summary ``name``."""
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType(), "time": T.TimestampType()}
    return T.StructType([T.StructField(c, types[t], n) for c, t, n, _ in SUMMARY_COLUMNS[name]])


# --------------------------------------------------------------------------- the rows


def _lat_stats(values) -> dict:
    """count, percentiles (:func:`~amqp_dissect.results.percentiles.percentile`, ``spark_rounding``:
    as the summaries always were), max, min, mean of the non-null ``values`` (a numpy array)."""
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
def _stall_rows(s, keys) -> dict:
    """key tuple -> the stall columns (idle periods counted apart: rows of the stalls table, not
    stalls)."""
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
    """The rows of summary ``name`` in output order, computed from the tables (``read(table,
    columns)`` -> Arrow table of those columns; see :data:`SUMMARY_READS`): dicts with the
    columns of :data:`SUMMARY_COLUMNS` (and maybe more).  Latency statistics:
    :func:`_lat_stats`; orders: Spark's (nulls first ascending, last descending, NaN above every
    number)."""
    import numpy as np

    cols = SUMMARY_READS[name]
    t = {tb: read(tb, list(c)) for tb, c in cols.items()}
    rows_of = _SUMMARY_ROWS.get(name)
    if rows_of is None:
        raise ValueError(f"unknown summary {name!r}")
    return rows_of(t, _lat_stats(np.empty(0)), window)


def _latency_by_link(t: dict, empty: dict, window: float) -> list[dict]:
    per = _group_lat(t["deliveries"], ("connection", "link_index"))
    rows = []
    for c, s, ch, n, li, a in _keys_of(t["links"], SUMMARY_READS["latency_by_link"]["links"]):
        st = per.get((c, li), empty) if c is not None and li is not None else empty
        rows.append({"connection": c, "session": s, "channel": ch, "link": n, "link_index": li, "address": a,
                     **st})
    rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["connection"]), _asc(r["link_index"]),
                             _asc(r["session"]), _asc(r["channel"]), _asc(r["link"]), _asc(r["address"])))
    return rows


def _latency_by_address(t: dict, empty: dict, window: float) -> list[dict]:
    per = _group_lat(t["deliveries"], ("address",))
    addrs = set(t["links"].column("address").to_pylist())
    rows = [{"address": a, **per.get((a,), empty)} for a in addrs]
    rows.sort(key=lambda r: (_desc_nulls_last(r["p99"]), _asc(r["address"])))
    return rows


def _window_starts(d, wus: int):
    """Each delivery's window start (microseconds; null without a first time): floor(micros /
    window) * window, in doubles then longs like Spark's expression."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ft = d.column("first_time")
    us = pc.cast(ft, pa.int64())
    if ft.type.unit == "ns":  # (the registry's nanoseconds; Spark's tables hold microseconds)
        us = pa.array(np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), 1000), pa.int64(),
                      mask=~pc.is_valid(us).to_numpy(zero_copy_only=False))
    f = np.floor(pc.cast(us, pa.float64()).to_numpy(zero_copy_only=False) / float(wus))
    valid = pc.is_valid(us).to_numpy(zero_copy_only=False)
    return pa.array(np.where(valid, f, 0).astype(np.int64) * wus, pa.int64(), mask=~valid)


def _latency_by_window(t: dict, empty: dict, window: float) -> list[dict]:
    import pyarrow.compute as pc

    d = t["deliveries"]
    wus = round(float(window) * 1_000_000)
    d = d.append_column("_wstart", _window_starts(d, wus))
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


def _outcomes(t: dict, empty: dict, window: float) -> list[dict]:
    import pyarrow.compute as pc

    d = t["deliveries"]
    sums = _group_sums(d, ("address", "outcome"), {"presettled": _flag(d.column("presettled")),
                                                    "unsettled": _flag(pc.is_null(d.column("settled_time")))})
    rows = [{"address": a, "outcome": o, "deliveries": sm["_rows"], "presettled": sm["presettled"],
             "unsettled": sm["unsettled"]} for (a, o), sm in sums.items()]
    rows.sort(key=lambda r: (_asc(r["address"]), _asc(r["outcome"])))
    return rows


def _stalls_by_link(t: dict, empty: dict, window: float) -> list[dict]:
    keys = ("connection", "channel", "link", "link_index")
    rows = [dict(zip(keys, k), **v) for k, v in _stall_rows(t["stalls"], keys).items()]
    rows.sort(key=lambda r: (_desc_nulls_last(r["stalled_seconds"]), _asc(r["connection"]), _asc(r["channel"]),
                             _asc(r["link_index"]), _asc(r["link"])))
    return rows


def _stalls_by_address(t: dict, empty: dict, window: float) -> list[dict]:
    import pyarrow as pa

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


# each summary's rows, from the tables it reads (SUMMARY_READS), the empty latency statistics and the window
_SUMMARY_ROWS = {"latency_by_link": _latency_by_link, "latency_by_address": _latency_by_address,
                 "latency_by_window": _latency_by_window, "outcomes": _outcomes,
                 "stalls_by_link": _stalls_by_link, "stalls_by_address": _stalls_by_address}


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


def _summaries_task(tables_dir: str, window: float):
    def fn(tasks):
        for names in tasks:  # (a task's summaries: pack_tasks)
            for name in names:
                rows = summary_rows(name, _read_local_table(tables_dir), window)
                yield name, write_summary_file(os.path.join(tables_dir, name), rows, summary_schema(name))
    return fn


def write_summaries_local(spark, directory: str, window: float = DEFAULT_WINDOW, meter=None) -> dict:
    """The summaries of the tables under the local ``directory``, computed and written there by
    Python tasks (one Spark job, a task per task slot: those that read the deliveries weigh more,
    the others share their tasks); returns name -> rows."""
    from .stages import metered, pack_tasks

    tasks = pack_tasks(list(SUMMARIES), lambda name: 4 if "deliveries" in SUMMARY_READS[name] else 1,
                       spark.sparkContext.defaultParallelism)
    rdd = spark.sparkContext.parallelize(tasks, len(tasks))

    return dict(rdd.mapPartitions(metered(meter, "summaries", _summaries_task(directory, window))).collect())


def write_summaries_here(directory: str, window: float = DEFAULT_WINDOW, threads: int = 2) -> tuple[dict, float]:
    """The summaries of the tables under the local ``directory``, computed and written by this
    process (no Spark job: what :func:`write_summaries_local`'s tasks do, in ``threads`` threads
    packed as its tasks are; Arrow's reads and group-bys run outside the GIL), so that a run of an
    archive directory needs Spark no more once its tables are written (its session's stop and the
    JVM's exit go on meanwhile).  Returns (name -> rows, this process's CPU seconds spent: what the
    run's ``cpu`` figures count for the step)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from .stages import pack_tasks

    cpu = time.process_time()
    tasks = pack_tasks(list(SUMMARIES), lambda name: 4 if "deliveries" in SUMMARY_READS[name] else 1, max(1, threads))
    run = _summaries_task(directory, window)
    if len(tasks) == 1:
        got = dict(run(tasks))
    else:
        with ThreadPoolExecutor(len(tasks), thread_name_prefix="amqp-dissect-summaries") as pool:
            got = {k: v for part in pool.map(lambda names: list(run([names])), tasks) for k, v in part}
    return got, time.process_time() - cpu


def _arrow_of(spark_schema):
    """A pyarrow schema for a flat Spark StructType of table columns (nullability kept)."""
    import pyarrow as pa

    m = {"StringType": pa.string(), "LongType": pa.int64(), "DoubleType": pa.float64(),
         "BooleanType": pa.bool_(), "IntegerType": pa.int32(), "TimestampType": pa.timestamp("us", tz="UTC")}
    return pa.schema([pa.field(f.name, m[type(f.dataType).__name__], nullable=f.nullable)
                      for f in spark_schema.fields])


def _summary_fn(name: str, window: float, reads: dict, as_file: bool = False):
    """The task of :func:`summary_frame`: the tagged rows of every table the summary reads in,
    :func:`summary_rows` out (``reads``: table -> the Arrow schema of its columns, for a table
    without rows)."""

    def fn(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        got: dict = {t: [] for t in reads}
        for b in batches:
            tag = b.column("_table")
            for t, schema in reads.items():
                part = b.filter(pc.equal(tag, t))
                if part.num_rows:
                    got[t].append(pa.table([part.column(f"{t}__{f.name}") for f in schema],
                                           names=[f.name for f in schema]))
        tables = {t: pa.concat_tables(got[t]) if got[t] else reads[t].empty_table() for t in reads}
        rows = summary_rows(name, lambda t, cols: tables[t].select(cols), window)
        schema = summary_schema(name)
        out = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)
        if as_file:  # the Parquet file itself (the schema's nullability and pandas metadata kept)
            from amqp_dissect.pipelines.archive import parquet_bytes

            yield pa.RecordBatch.from_arrays([pa.array([out.num_rows], pa.int64()),
                                              pa.array([parquet_bytes(out, compression="snappy")], pa.binary())],
                                             names=["rows", "data"])
            return
        yield from out.to_batches(max_chunksize=4096)
    return fn


def summary_frame(name: str, tables: dict, window: float = DEFAULT_WINDOW, meter=None, as_file: bool = False):
    """The summary DataFrame ``name`` (one of :data:`SUMMARIES`) of the table DataFrames
    ``tables``: the columns it reads brought to one task (one partition, so one file in order),
    which runs :func:`summary_rows`."""
    from pyspark.sql import functions as F

    reads, parts = {}, []
    for t, cols in SUMMARY_READS[name].items():
        df = tables[t].select(*[F.col(c).alias(f"{t}__{c}") for c in cols])
        reads[t] = _arrow_of(tables[t].select(*cols).schema)
        parts.append(df.withColumn("_table", F.lit(t)))
    df = parts[0]
    for more in parts[1:]:
        df = df.unionByName(more, allowMissingColumns=True)
    from .stages import metered

    if as_file:  # one row: (rows, the Parquet file's bytes), for a driver to write (run_archive, remote output)
        return df.repartition(1).mapInArrow(metered(meter, "summaries", _summary_fn(name, window, reads, True)),
                                            "rows long, data binary")
    return df.repartition(1).mapInArrow(metered(meter, "summaries", _summary_fn(name, window, reads)),
                                        summary_spark_schema(name))


def summaries_frames(tables: dict, window: float = DEFAULT_WINDOW) -> dict:
    """All the summary DataFrames (see :func:`summary_frame`)."""
    return {name: summary_frame(name, tables, window) for name in SUMMARIES}


if __name__ == "__main__":  # python -m amqp_dissect.pipelines.spark.summaries: the docs' summary tables
    print(markdown())
