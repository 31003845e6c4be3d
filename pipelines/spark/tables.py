"""The archive job's output tables, each cut into ranges of its output order: written by Python
tasks from the stage-2 chunk files (a local work directory) or moved by Spark."""

from __future__ import annotations

import os
import shutil
from typing import NamedTuple

from amqp_dissect.pipelines.archive import ROW_GROUP_ROWS, range_bounds, sorted_range_table, write_range

from .stages import meta_frame, range_fn, metered, pack_tasks, partition_keys, table_schema


TABLE_PART_ROWS = 100_000  # rows of a table one task sorts and writes, at most (about)


def table_bounds(layers, counts: dict, nparts: int) -> dict:
    """table -> range boundaries (:func:`range_bounds`) of its rows in output order, from
    the smallest key and size of each stage-2 chunk (one Spark job reading five columns).
    A table of at most :data:`TABLE_PART_ROWS` rows is one range; a larger one is cut into
    a multiple of ``nparts`` ranges of at most about that many rows (a task sorts one
    range in memory)."""
    from pyspark.sql import functions as F

    parts = {t: 1 if n <= TABLE_PART_ROWS else nparts * -(-n // (TABLE_PART_ROWS * nparts))
             for t, n in counts.items()}
    big = sorted(t for t, p in parts.items() if p > 1)
    out = {t: [] for t in counts}
    if not big:
        return out
    df = None
    for rows, _ in layers:  # chunks of flows a rerun replaced count too: the bounds only balance
        d = rows.where(F.col("table").isin(big)).select("table", "k1", "flow", "k2", "n")
        df = d if df is None else df.unionByName(d)
    chunks: dict = {t: [] for t in big}
    for r in df.collect():
        chunks[r.table].append(((r.k1, r.flow, r.k2), r.n))
    for t in big:
        out[t] = range_bounds(chunks[t], parts[t])
    return out


def make_table(spark, layers, table: str, bounds: list, excluded: list, directory: str | None = None, meter=None,
           as_file: bool = False):
    """A result table from the stage-2 chunks, in single-process order (connection first
    seen, then row): each chunk goes to the ranges of ``bounds`` its keys overlap (range
    ``i`` to partition ``i``, by the keys of :func:`partition_keys`), where
    :func:`sorted_range` keeps its rows of that range, minus the flows a later layer ran
    again (``excluded[layer]``), and sorts them.  Spark names the files by partition (and
    with ``directory`` each task writes ``part-<range>.parquet`` there itself, giving
    ``(range, rows)``), so read in name order they hold the rows in order.  Only the chunks move between tasks:
    no shuffle of rows, no sampling pass."""
    from pyspark.sql import functions as F

    chunks = None
    for li, (rows, _) in enumerate(layers):
        d = rows.where(F.col("table") == table).select(F.lit(li).alias("layer"), "k1", "flow", "k2", "hk1", "hflow",
                                                       "hk2", "blob")
        chunks = d if chunks is None else chunks.unionByName(d)
    if bounds:
        def rank(k1, flow, k2):  # the range of a key: the number of boundaries at or below it
            r = F.lit(0)
            for b1, bf, b2 in bounds:
                past = (k1 > F.lit(b1)) | ((k1 == F.lit(b1)) & ((flow > F.lit(bf)) | ((flow == F.lit(bf)) & (k2 >= F.lit(b2)))))
                r = r + past.cast("int")
            return r

        n = len(bounds) + 1
        keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(spark, n)])
        chunks = chunks.withColumn("r", F.explode(F.sequence(rank(F.col("k1"), F.col("flow"), F.col("k2")),
                                                            rank(F.col("hk1"), F.col("hflow"), F.col("hk2")))))
        chunks = chunks.repartition(n, F.element_at(keys, F.col("r") + 1))
    else:
        chunks = chunks.withColumn("r", F.lit(0)).repartition(1)
    chunks = chunks.select("layer", "r", "blob")
    if as_file:  # each range's Parquet file, made by its task (see range_fn)
        return chunks.mapInArrow(metered(meter, "tables", range_fn(bounds, excluded, table, None, True)),
                                 "r int, rows long, data binary")
    if directory is not None:
        return chunks.mapInArrow(metered(meter, "tables", range_fn(bounds, excluded, table, directory)),
                                 "r int, rows long")
    return chunks.mapInArrow(metered(meter, "tables", range_fn(bounds, excluded)), table_schema(table))


def meta_rows(layers):
    """The "_flow" rows of the current result: each layer minus the flows rerun later."""
    from pyspark.sql import functions as F

    out = None
    for rows, excluded in layers:
        df = rows.where(F.col("table") == "_flow")
        for ex in excluded:
            df = df.join(ex, "flow", "left_anti")
        out = df if out is None else out.unionByName(df)
    return meta_frame(out)


# --------------------------------------------------------------------------- tables from local files


def chunk_files(layer_dirs: list, table: str):
    """(layer, path) of the stage-2 files holding chunks of ``table``, layer by layer, in name order."""
    for li, d in enumerate(layer_dirs):
        td = os.path.join(d, f"table={table}")
        if os.path.isdir(td):
            for f in sorted(os.listdir(td)):
                if f.endswith(".parquet") and not f.startswith((".", "_")):
                    yield li, os.path.join(td, f)


def _local_table_bounds(layer_dirs: list, counts: dict, nparts: int) -> dict:
    """:func:`table_bounds` from the local stage-2 files (pyarrow, on the driver: a few
    columns of one row per chunk)."""
    import pyarrow.parquet as pq

    parts = {t: 1 if n <= TABLE_PART_ROWS else nparts * -(-n // (TABLE_PART_ROWS * nparts))
             for t, n in counts.items()}
    out: dict = {t: [] for t in counts}
    for t, p in parts.items():
        if p > 1:
            chunks = []
            for _, path in chunk_files(layer_dirs, t):
                k = pq.read_table(path, columns=["k1", "flow", "k2", "n"], use_threads=False)
                chunks += [((a, b, c), n) for a, b, c, n in zip(*(k.column(i).to_pylist() for i in range(4)))]
            out[t] = range_bounds(chunks, p)
    return out


def _range_chunks(layer_dirs: list, table: str, bounds: list, r: int, provisional: bool | None = None):
    """``(layer, r, blob)`` of the stage-2 chunks of ``table`` whose keys overlap range ``r`` of
    ``bounds`` (a key's range: the number of boundaries at or below it), read from the local
    files: the keys of every chunk, then the blobs of the row groups that hold wanted ones.
    ``provisional``: None every chunk; True or False only the chunks whose rows are (not)
    provisional (rows a carried flow made at its finish: the next run of an archive directory
    makes them again)."""
    for _, chunk in _flagged_range_chunks(layer_dirs, table, bounds, r, provisional is not None, provisional):
        yield chunk


def _flagged_range_chunks(layer_dirs: list, table: str, bounds: list, r: int, flags: bool, only: bool | None = None):
    """``(provisional, (layer, r, blob))`` of the chunks :func:`_range_chunks` reads for range ``r``
    (``provisional``: whether the chunk's rows are provisional; None without ``flags``); with
    ``only`` (True/False, and ``flags``), those whose flag is ``only`` (the others' blobs not read)."""
    import bisect

    import pyarrow.parquet as pq

    names = ["k1", "flow", "k2", "hk1", "hflow", "hk2"]
    for li, path in chunk_files(layer_dirs, table):
        pf = pq.ParquetFile(path)
        k = pf.read(columns=names + (["provisional"] if flags else []), use_threads=False)
        want = [i for i, (a, b, c, d, e, f) in enumerate(zip(*(k.column(j).to_pylist() for j in range(6))))
                if bisect.bisect_right(bounds, (a, b, c)) <= r <= bisect.bisect_right(bounds, (d, e, f))]
        if not want:
            continue
        marks = [bool(x) for x in k.column("provisional").to_pylist()] if flags else None
        if only is not None:
            want = [i for i in want if marks[i] == only]
            if not want:
                continue
        starts = [0]
        for g in range(pf.metadata.num_row_groups):
            starts.append(starts[-1] + pf.metadata.row_group(g).num_rows)
        by_group: dict = {}
        for i in want:
            by_group.setdefault(bisect.bisect_right(starts, i) - 1, []).append(i)
        for g, idx in sorted(by_group.items()):
            blobs = pf.read_row_group(g, columns=["blob"], use_threads=False).column(0)
            for i in idx:
                yield (marks[i] if flags else None), (li, r, blobs[i - starts[g]].as_py())


TABLE_TASKS_PER_SLOT = 2  # tasks of the tables step per task slot, at most (its small ranges share tasks)


def _tables_task(layer_dirs: list, bounds: dict, excluded: list, out_dirs: dict, provisional: bool | None = None):
    def fn(tasks):
        for task in tasks:  # (a task's ranges: pack_tasks)
            for table, r in task:
                t = sorted_range_table(_range_chunks(layer_dirs, table, bounds[table], r, provisional), bounds[table],
                                       excluded)
                yield table, r, write_range(out_dirs[table], table, r, t)
    return fn


def _split_tables_task(layer_dirs: list, bounds: dict, excluded: list, final_dirs: dict, provisional_dirs: dict):
    """A task of :func:`write_split_tables_local`: each of its ranges' chunks read once, the final
    rows written under ``final_dirs``, the provisional ones under ``provisional_dirs``."""
    def fn(tasks):
        for task in tasks:
            for table, r in task:
                parts: dict = {False: [], True: []}
                for flag, chunk in _flagged_range_chunks(layer_dirs, table, bounds[table], r, True):
                    parts[flag].append(chunk)
                for flag, dirs in ((False, final_dirs), (True, provisional_dirs)):
                    t = sorted_range_table(parts.pop(flag), bounds[table], excluded)
                    yield flag, table, r, write_range(dirs[table], table, r, t)
    return fn


def _table_tasks(slots: int, layer_dirs: list, counts: dict, nparts: int) -> tuple:
    """(bounds, tasks) of the tables step: every table's ranges (:func:`_local_table_bounds`)
    packed into at most :data:`TABLE_TASKS_PER_SLOT` tasks per task slot (``slots``: the
    context's ``defaultParallelism``)."""
    bounds = _local_table_bounds(layer_dirs, counts, nparts)
    items = sorted((t, r) for t in counts for r in range(len(bounds[t]) + 1))
    tasks = pack_tasks(items, lambda it: counts[it[0]] // (len(bounds[it[0]]) + 1), TABLE_TASKS_PER_SLOT * slots)
    return bounds, tasks


def _fresh_dirs(dirs) -> None:
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)


def write_tables_local(spark, layer_dirs: list, excluded: list, counts: dict, out_dirs: dict, nparts: int,
                        meter=None, provisional: bool | None = None) -> dict:
    """Every table's ranges written (:func:`_range_chunks`, :func:`sorted_range_table`,
    :func:`write_range`) in one Spark job of at most :data:`TABLE_TASKS_PER_SLOT` tasks per task
    slot, the ranges packed into them by rows (:func:`~.stages.pack_tasks`: the large ranges
    each in a task of its own, the small tables' ranges together instead of a task each); an
    empty table gets one file with its columns.  ``provisional`` (True/False): only the rows that
    are (not) provisional (:func:`_range_chunks`), their counts then not checked against
    ``counts`` (the caller checks the two parts' sum).  Returns table -> rows written."""
    bounds, tasks = _table_tasks(spark.sparkContext.defaultParallelism, layer_dirs, counts, nparts)
    _fresh_dirs(out_dirs[t] for t in counts)
    got = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(
        metered(meter, "tables", _tables_task(layer_dirs, bounds, excluded, out_dirs, provisional))).collect()
    written = {}
    for t in counts:
        n = written[t] = sum(rows for table, _, rows in got if table == t)
        if provisional is None and n != counts[t]:  # each row in exactly one range
            raise RuntimeError(f"table {t}: {n} rows written of {counts[t]}")
        open(os.path.join(out_dirs[t], "_SUCCESS"), "wb").close()
    return written


def write_split_tables_local(spark, layer_dirs: list, excluded: list, counts: dict, final_dirs: dict,
                             provisional_dirs: dict, nparts: int, meter=None) -> tuple[dict, dict]:
    """The final rows of every table under ``final_dirs`` and the provisional ones under
    ``provisional_dirs``, the same files as :func:`write_tables_local` with ``provisional`` False,
    then True, makes, in ONE Spark job that reads each range's chunks once.  Returns (table ->
    final rows written, table -> provisional rows written); each table's two add up to ``counts``
    (checked)."""
    bounds, tasks = _table_tasks(spark.sparkContext.defaultParallelism, layer_dirs, counts, nparts)
    _fresh_dirs([final_dirs[t] for t in counts] + [provisional_dirs[t] for t in counts])
    got = spark.sparkContext.parallelize(tasks, len(tasks)).mapPartitions(
        metered(meter, "tables", _split_tables_task(layer_dirs, bounds, excluded, final_dirs,
                                                     provisional_dirs))).collect()
    written: tuple = ({}, {})
    for t in counts:
        for flag, dirs in ((False, final_dirs), (True, provisional_dirs)):
            written[flag][t] = sum(rows for f, table, _, rows in got if table == t and f == flag)
            open(os.path.join(dirs[t], "_SUCCESS"), "wb").close()
        if written[False][t] + written[True][t] != counts[t]:  # each row in exactly one range and one part
            raise RuntimeError(f"table {t}: {written[False][t]} final and {written[True][t]} provisional rows "
                               f"written of {counts[t]}")
    return written


# --------------------------------------------------------------------------- tables partitioned by day


DAY_MICROS = 86_400_000_000


def _day_names(us) -> list:
    """The UTC day (``YYYY-MM-DD``, or None) of each of the UTC microsecond times ``us`` (an
    Arrow int64 array with nulls)."""
    import datetime

    import numpy as np
    import pyarrow.compute as pc

    valid = pc.is_valid(us).to_numpy(zero_copy_only=False)
    days = np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), DAY_MICROS)
    epoch = datetime.date(1970, 1, 1)
    names = {int(d): (epoch + datetime.timedelta(days=int(d))).isoformat() for d in np.unique(days[valid])}
    return [names[int(d)] if v else None for d, v in zip(days, valid)]


class RowDays(NamedTuple):
    """The partitions of an Arrow table's rows (:func:`day_partitions`)."""

    names: list  # the distinct partitions (``YYYY-MM-DD``, or NULL_DATE), sorted
    codes: object  # numpy array: the index in ``names`` of every row's partition; None: every row in names[0]


def day_partitions(t, columns: tuple, connection_days: dict | None = None) -> RowDays:
    """The partition (``YYYY-MM-DD``, the UTC day) of every row of the Arrow table ``t`` (with
    rows): the day of the first non-null of its ``columns`` (UTC microsecond timestamps); for a
    row whose times are all null (a link only inferred after a loss), the day its connection
    began (``connection_days``: connection -> day); failing that,
    :data:`~..archive.directory.NULL_DATE`.  Computed by column (numpy): only the rows without a
    time are looked at one by one."""
    import datetime

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from amqp_dissect.pipelines.archive.directory import NULL_DATE

    us = None
    for c in columns:
        col = t.column(c).cast(pa.int64())
        us = col if us is None else pc.coalesce(us, col)
    valid = pc.is_valid(us).to_numpy(zero_copy_only=False)
    days = np.floor_divide(pc.fill_null(us, 0).to_numpy(zero_copy_only=False), DAY_MICROS)
    epoch = datetime.date(1970, 1, 1)
    timed = days[valid]
    if len(timed) == len(days) and timed.min() == timed.max():  # (one day: the usual range)
        return RowDays([(epoch + datetime.timedelta(days=int(timed[0]))).isoformat()], None)
    distinct, inverse = np.unique(timed, return_inverse=True)
    names = [(epoch + datetime.timedelta(days=int(d))).isoformat() for d in distinct]
    codes = np.empty(len(days), np.int64)
    codes[valid] = inverse
    untimed = np.flatnonzero(~valid)
    if len(untimed):
        conns = (t.column("connection").take(pa.array(untimed)).to_pylist()
                 if connection_days and "connection" in t.column_names else [None] * len(untimed))
        index = {name: i for i, name in enumerate(names)}
        for row, conn in zip(untimed.tolist(), conns):
            name = (connection_days.get(conn) if conn is not None else None) or NULL_DATE
            if name not in index:
                index[name] = len(names)
                names.append(name)
            codes[row] = index[name]
    rank = sorted(range(len(names)), key=names.__getitem__)  # (names sorted; the codes follow)
    if rank != list(range(len(names))):
        codes = np.argsort(np.array(rank))[codes]
        names = [names[i] for i in rank]
    return RowDays(names, codes)


def row_days(t, columns: tuple, connection_days: dict | None = None) -> list:
    """The partition of every row of the Arrow table ``t`` (:func:`day_partitions`), as a list."""
    if t.num_rows == 0:
        return []
    p = day_partitions(t, columns, connection_days)
    return p.names * t.num_rows if p.codes is None else [p.names[i] for i in p.codes.tolist()]


def connection_days(folders: list) -> dict:
    """connection -> the UTC day of its ``first_time``, from the connections tables' Parquet
    files under ``folders`` (a run's flat table, the kept rows of the version before)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: dict = {}
    for folder in folders:
        for d, _, files in os.walk(folder):
            for name in sorted(files):
                if name.endswith(".parquet") and not name.startswith((".", "_")):
                    t = pq.read_table(os.path.join(d, name), columns=["connection", "first_time"], use_threads=False,
                                      partitioning=None)
                    days = _day_names(t.column("first_time").cast(pa.int64()))
                    out.update((c, day) for c, day in zip(t.column("connection").to_pylist(), days) if day)
    return out


def write_dated(t, table: str, directory: str, stem: str, connection_days: dict | None = None) -> int:
    """Write the rows of ``t`` (a table's Arrow rows in the archive's schema, in order) to
    ``directory/date=DAY/<stem>.parquet``, a file per day of :func:`day_partitions` (rows in their
    order; through a temporary name and a rename: a task run again replaces its files).
    Returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from amqp_dissect.pipelines.archive import ROW_GROUP_ROWS
    from amqp_dissect.pipelines.archive.directory import DATE_COLUMNS

    if t.num_rows == 0:
        return 0
    days = day_partitions(t, DATE_COLUMNS[table], connection_days)
    for i, day in enumerate(days.names):
        part = t if days.codes is None else t.filter(pa.array(days.codes == i))
        folder = os.path.join(directory, f"date={day}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, stem + ".parquet")
        tmp = os.path.join(folder, f".{stem}.{os.getpid()}.tmp")
        pq.write_table(part, tmp, row_group_size=ROW_GROUP_ROWS, compression="snappy")
        os.replace(tmp, path)
    return t.num_rows


def _dated_task(version: str, run: int, days_of):
    def fn(items):
        import pyarrow.parquet as pq

        days = days_of.value
        for table, path, r, suffix in items:
            t = pq.read_table(path, use_threads=False)
            yield table, write_dated(t, table, os.path.join(version, table), f"part-{run:06d}-{r:05d}{suffix}", days)
    return fn


def _flat_items(flat: str, tables: list, suffix: str) -> list:
    """(table, file, range, name suffix) of the flat tables' files under ``flat``."""
    items = []
    for t in tables:
        d = os.path.join(flat, t)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else ():
            if name.endswith(".parquet") and not name.startswith((".", "_")):
                items.append((t, os.path.join(d, name), int(name.split("-")[1].split(".")[0]), suffix))
    return items


#: the file of a table without rows (its columns), in the table's folder itself: no partition
#: folder (a reader infers the type of a partition column from its values; it has none)
EMPTY_FILE = "part-empty.parquet"


PROVISIONAL = ".provisional"  # the name suffix of a file of provisional rows (dropped by the next run)


def write_dated_tables(spark, flat: str, version: str, run: int, tables: list, provisional: str | None = None,
                       meter=None, previous: str | None = None) -> dict:
    """The tables written flat under ``flat`` (``TABLE/part-R.parquet``, in order) written again
    under ``version`` partitioned by day (:func:`write_dated`), a Spark task per file; a table
    without rows in ``version`` (none kept, none new) gets one empty file of its columns.
    ``provisional``: None (every row final) or a second folder of flat tables, the run's
    provisional rows (the next run makes them again: their files are named ``*.provisional.parquet``
    and not kept, :func:`keep_final_files`); ``previous``: the version whose rows
    the run keeps (its connections' days count, :func:`row_days`).  Returns table -> rows written."""
    items = _flat_items(flat, tables, "") + (_flat_items(provisional, tables, PROVISIONAL) if provisional else [])
    got = {t: 0 for t in tables}
    if items:
        from .stages import metered

        # (the days of every connection: this run's final and provisional rows, the kept ones)
        folders = [os.path.join(d, "connections") for d in (flat, provisional, previous) if d]
        days = spark.sparkContext.broadcast(connection_days(folders))
        rdd = spark.sparkContext.parallelize(items, min(len(items), 4 * spark.sparkContext.defaultParallelism))
        for t, n in rdd.mapPartitions(metered(meter, "partition", _dated_task(version, run, days))).collect():
            got[t] += n
    for t in tables:
        _empty_table_file(os.path.join(flat, t), os.path.join(version, t))
    return got


def _empty_table_file(flat_dir: str, table_dir: str) -> None:
    """A table of no rows in its version: one empty file of its columns (readers get them), in
    the table's folder (:data:`EMPTY_FILE`)."""
    for _, _, files in os.walk(table_dir):
        if any(f.endswith(".parquet") and not f.startswith((".", "_")) for f in files):
            return
    source = next(os.path.join(flat_dir, n) for n in sorted(os.listdir(flat_dir))
                  if n.endswith(".parquet") and not n.startswith((".", "_")))
    os.makedirs(table_dir, exist_ok=True)
    shutil.copyfile(source, os.path.join(table_dir, EMPTY_FILE))


# --------------------------------------------------------------------------- the tables written by day at once


def _dated_range(version: str, run: int, table: str, r: int, t, suffix: str, days: dict) -> int:
    """Range ``r`` of ``table`` (its sorted rows ``t``, an Arrow table or None) written under
    ``version`` by day, the files :func:`write_range` then :func:`_dated_task` make of it (the
    same rows in the archive's schema, the same names).  Returns the rows written."""
    from amqp_dissect.pipelines.archive.tables import to_archive

    if t is None or t.num_rows == 0:
        return 0
    return write_dated(to_archive(t, table), table, os.path.join(version, table), f"part-{run:06d}-{r:05d}{suffix}",
                       days)


def _dated_tables_task(layer_dirs: list, bounds: dict, excluded: list, version: str, run: int, days_of,
                       split: bool):
    """A task of :func:`write_dated_tables_local`: each of its ranges' chunks read once, sorted,
    and written by day (with ``split``, the final rows and the provisional ones apart)."""
    def fn(tasks):
        days = days_of.value
        for task in tasks:
            for table, r in task:
                if not split:
                    t = sorted_range_table(_range_chunks(layer_dirs, table, bounds[table], r), bounds[table], excluded)
                    yield False, table, _dated_range(version, run, table, r, t, "", days)
                    continue
                parts: dict = {False: [], True: []}
                for flag, chunk in _flagged_range_chunks(layer_dirs, table, bounds[table], r, True):
                    parts[flag].append(chunk)
                for flag in (False, True):
                    t = sorted_range_table(parts.pop(flag), bounds[table], excluded)
                    yield flag, table, _dated_range(version, run, table, r, t, PROVISIONAL if flag else "", days)
    return fn


def run_connection_days(layer_dirs: list, excluded: list, counts: dict, nparts: int,
                        previous: str | None = None) -> dict:
    """connection -> the UTC day of its ``first_time`` (:func:`connection_days`), of the run's
    connections (read on the driver from the stage-2 files, each range as its task would) and
    of those of the version ``previous`` (the rows a continued run keeps)."""
    import pyarrow as pa

    out: dict = {}
    bounds = _local_table_bounds(layer_dirs, {"connections": counts["connections"]}, nparts)["connections"]
    for r in range(len(bounds) + 1):
        t = sorted_range_table(_range_chunks(layer_dirs, "connections", bounds, r), bounds, excluded)
        if t is not None and t.num_rows:
            days = _day_names(t.column("first_time").cast(pa.int64()))
            out.update((c, day) for c, day in zip(t.column("connection").to_pylist(), days) if day)
    if previous:  # (after the run's own, as write_dated_tables reads them)
        out.update(connection_days([os.path.join(previous, "connections")]))
    return out


def write_dated_tables_local(spark, layer_dirs: list, excluded: list, counts: dict, nparts: int, version: str,
                             run: int, split: bool, days: dict, meter=None) -> tuple[dict, dict]:
    """The run's tables written straight under ``version`` partitioned by day, in ONE Spark job
    (the tables step's: :func:`write_tables_local`'s ranges and tasks), instead of flat files a
    second job then writes again by day (:func:`write_dated_tables`): the same files, the same
    rows.  ``split``: the provisional rows apart (``*.provisional.parquet``, as
    :func:`write_split_tables_local` then :func:`write_dated_tables`); ``days``: connection ->
    day (:func:`run_connection_days`).  A table without rows in ``version`` gets one empty file
    of its columns.  Returns (table -> final rows written, table -> provisional rows written),
    whose sum per table is ``counts`` (checked)."""
    sc = spark.sparkContext
    bounds, tasks = _table_tasks(sc.defaultParallelism, layer_dirs, counts, nparts)
    got = sc.parallelize(tasks, len(tasks)).mapPartitions(
        metered(meter, "tables", _dated_tables_task(layer_dirs, bounds, excluded, version, run, sc.broadcast(days),
                                                     split))).collect()
    return _dated_written(got, counts, version)


def write_dated_tables_here(layer_dirs: list, excluded: list, counts: dict, nparts: int, version: str, run: int,
                            split: bool, days: dict, threads: int, meter=None) -> tuple[dict, dict]:
    """:func:`write_dated_tables_local` made by this process, without a Spark job: the same ranges
    packed into the same tasks (as for ``threads`` task slots), each task run by one of ``threads``
    threads (the work is Arrow's: Parquet reads, sorts, takes and writes, outside the GIL), the
    same files and rows.  A run of an archive directory with a local master writes its tables so
    once stage 2 is done, so that it needs Spark no more from there on (its session's stop and the
    JVM's exit go on meanwhile).  The CPU this process spends on it is counted for the step
    (``meter.add``)."""
    import time
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    import pyarrow as pa

    cpu = time.process_time()
    bounds, tasks = _table_tasks(max(1, threads), layer_dirs, counts, nparts)
    run_task = _dated_tables_task(layer_dirs, bounds, excluded, version, run, SimpleNamespace(value=days), split)
    # (one Arrow thread per task, as in the Spark workers (stages._worker_setup): the threads here
    # are the step's parallelism, and Arrow's pool handing a task's small buffers around costs CPU)
    arrow_threads = pa.cpu_count()
    pa.set_cpu_count(1)
    try:
        if len(tasks) <= 1 or threads <= 1:
            got = [x for task in tasks for x in run_task([task])]
        else:
            with ThreadPoolExecutor(min(threads, len(tasks)), thread_name_prefix="amqp-dissect-tables") as pool:
                got = [x for part in pool.map(lambda task: list(run_task([task])), tasks) for x in part]
    finally:
        pa.set_cpu_count(arrow_threads)
    out = _dated_written(got, counts, version)
    if meter is not None:
        meter.add("tables", time.process_time() - cpu)
    return out


def _dated_written(got: list, counts: dict, version: str) -> tuple[dict, dict]:
    """(table -> final rows written, table -> provisional rows written) of the tables step's
    ``(provisional, table, rows)`` results, checked against ``counts``; a table without rows in
    ``version`` gets one empty file of its columns."""
    from amqp_dissect.pipelines.archive.tables import archive_schema

    written: tuple = ({t: 0 for t in counts}, {t: 0 for t in counts})
    for flag, table, n in got:
        written[flag][table] += n
    for t in counts:
        if written[False][t] + written[True][t] != counts[t]:  # each row in exactly one range and one part
            raise RuntimeError(f"table {t}: {written[False][t]} final and {written[True][t]} provisional rows "
                               f"written of {counts[t]}")
        if not _has_files(os.path.join(version, t)):
            import pyarrow.parquet as pq

            os.makedirs(os.path.join(version, t), exist_ok=True)
            pq.write_table(archive_schema(t).empty_table(), os.path.join(version, t, EMPTY_FILE),
                           row_group_size=ROW_GROUP_ROWS, compression="snappy")
    return written


def _has_files(table_dir: str) -> bool:
    return any(f.endswith(".parquet") and not f.startswith((".", "_")) for _, _, files in os.walk(table_dir)
               for f in files)


def keep_final_files(previous: str, version: str, tables: list) -> int:
    """Hard links in ``version`` to the final files of ``tables`` in the ``previous`` version (not
    its provisional files, which the new run makes again, nor its empty files). Returns how many."""
    n = 0
    for t in tables:
        base = os.path.join(previous, t)
        for d, _, files in os.walk(base):
            for name in files:
                if not name.endswith(".parquet") or name.startswith((".", "_")) or name == EMPTY_FILE \
                        or name.endswith(PROVISIONAL + ".parquet"):
                    continue
                dest = os.path.join(version, t, os.path.relpath(d, base))
                os.makedirs(dest, exist_ok=True)
                os.link(os.path.join(d, name), os.path.join(dest, name))
                n += 1
    return n
