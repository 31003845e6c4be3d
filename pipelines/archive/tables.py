"""Archive output tables: the rows' Arrow schemas with their output-order keys, the chunks that
travel between the stages (Arrow IPC), a range of a table sorted (:func:`sorted_range`) and
written (:func:`write_range`)."""

from __future__ import annotations

import json
import os
from typing import Iterable

from amqp_dissect.results.schema import columns as _registry_columns


# --------------------------------------------------------------------------- output tables


def table_columns(table: str) -> list[tuple[str, str]]:
    """(column, type) of an output table, from the column registry (:mod:`amqp_dissect.results.schema`):
    the columns and order of ``amqp_dissect.results.tables.to_frame``."""
    return [(c.name, c.type) for c in _registry_columns(table)]


def frame_row(d: dict) -> dict:
    """A frames-table row: the leading fields of ``frames --format jsonl`` plus the whole line."""
    row = {k: d.get(k) for k, _ in table_columns("frames") if k != "json"}
    row["time"] = d.get("time_ns")  # (the exact time: integer nanoseconds)
    row["json"] = json.dumps(d, ensure_ascii=False, allow_nan=False)
    return row


def arrow_schema(table: str):
    """The Arrow schema of a result table's chunks: its registry columns (as Spark takes
    them), then _flow, _k1, _k2."""
    import pyarrow as pa

    from amqp_dissect.results.tables import arrow_schema as registry_schema

    fields = list(registry_schema(table, spark=True))
    fields += [pa.field("_flow", pa.string()), pa.field("_k1", pa.int64()), pa.field("_k2", pa.int64())]
    return pa.schema(fields)


def rows_batch(table: str, rows: list[dict], flows: list, k1: list, k2: list):
    """Row dicts as an Arrow record batch with the registry's types (times as UTC
    timestamps, JSON columns as text, NaN as null; keys outside the table dropped)."""
    import pyarrow as pa

    from amqp_dissect.results.tables import record_batch

    b = record_batch(rows, table, spark=True)
    arrays = b.columns + [pa.array(flows, pa.string()), pa.array(k1, pa.int64()), pa.array(k2, pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(table))


def batch_ipc(batch) -> bytes:
    """An Arrow IPC stream of ``batch`` (or of a list of batches of one schema), LZ4-compressed as
    one frame (a chunk of a stage-2 table shrinks about ninefold: less for the JVM to copy, write
    and shuffle, and for a local work directory to hold), its uncompressed size first (8 bytes,
    little-endian), in the calling thread (a chunk's buffers are small: Arrow's thread pool cost
    more than it gave, and the task's core is its own).  Not the IPC format's own compression,
    which compresses every buffer of every column as a frame of its own: reading a chunk back
    paid a frame's set-up per buffer (the x8 archive's deliveries: 1.1 to 1.5 CPU s against
    0.8 s for the same chunks as one frame each)."""
    import pyarrow as pa

    batches = batch if isinstance(batch, list) else [batch]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batches[0].schema, options=pa.ipc.IpcWriteOptions(use_threads=False)) as w:
        for b in batches:
            w.write_batch(b)
    raw = sink.getvalue()
    return raw.size.to_bytes(8, "little") + pa.compress(raw, codec="lz4", asbytes=True)


def ipc_batches(blob: bytes):
    """The record batches of a :func:`batch_ipc` blob, decompressed in the calling thread (with
    Arrow's thread pool, a chunk's small buffers took four times the CPU)."""
    import pyarrow as pa

    raw = pa.decompress(memoryview(blob)[8:], decompressed_size=int.from_bytes(blob[:8], "little"), codec="lz4")
    return pa.ipc.open_stream(raw, options=pa.ipc.IpcReadOptions(use_threads=False)).read_all().to_batches()


def _at_or_past(t, bound):
    """Mask of the rows of Arrow table ``t`` whose key (_k1, _flow, _k2) is >= ``bound``."""
    import pyarrow.compute as pc

    b1, bf, b2 = bound
    k1, fl, k2 = t["_k1"], t["_flow"], t["_k2"]
    return pc.or_(pc.greater(k1, b1), pc.and_(pc.equal(k1, b1), pc.or_(
        pc.greater(fl, bf), pc.and_(pc.equal(fl, bf), pc.greater_equal(k2, b2)))))


def sorted_range_table(chunks: Iterable[tuple[int, int, bytes]], bounds: list, excluded: list):
    """The rows of one output range of a table, sorted, as an Arrow table (None without
    rows): ``chunks`` are ``(layer, range, blob)`` (stage-2 chunks, each sent to every
    range its keys overlap); a chunk's rows outside its range of ``bounds``
    (:func:`range_bounds`), or of a flow in ``excluded[layer]`` (flows a later layer ran
    again), are dropped; the others are sorted by (_k1, _flow, _k2) and returned without
    those keys.  Holds the range's rows (the job makes ranges of about
    ``TABLE_PART_ROWS`` rows)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    drop = {}
    for layer, r, blob in chunks:
        for b in ipc_batches(blob):
            t = pa.Table.from_batches([b])
            mask = None
            if r > 0:
                mask = _at_or_past(t, bounds[r - 1])
            if r < len(bounds):
                below = pc.invert(_at_or_past(t, bounds[r]))
                mask = below if mask is None else pc.and_(mask, below)
            ex = excluded[layer] if layer < len(excluded) else None
            if ex:
                if layer not in drop:
                    drop[layer] = pa.array(sorted(ex), pa.string())
                keep = pc.invert(pc.is_in(t["_flow"], value_set=drop[layer]))
                mask = keep if mask is None else pc.and_(mask, keep)
            if mask is not None and not pc.all(mask, skip_nulls=False).as_py():  # (every row kept: no copy)
                t = t.filter(mask)
            if t.num_rows:
                parts.append(t)
    if not parts:
        return None
    t = pa.concat_tables(parts)
    order = pc.sort_indices(t, sort_keys=[("_k1", "ascending"), ("_flow", "ascending"), ("_k2", "ascending")])
    return in_order(t, order).drop_columns(["_flow", "_k1", "_k2"])


#: rows per run of the sort, on average, at or above which the sorted table is made of the runs (slices of
#: the table, then one copy of each column) rather than by a take of every row: a range's chunks come
#: sorted, each flow's rows in a few long runs
RUN_ROWS = 64


def in_order(t, order):
    """Arrow table ``t`` with its rows in the order of ``order`` (its sort indices, an Arrow array):
    ``t`` itself when already in order; else, when the order is a few long runs of rows that follow one
    another in ``t`` (:data:`RUN_ROWS`), those runs sliced and each column copied once (a range's
    chunks: the sort interleaves a few flows' sorted chunks); else ``t.take(order)``.  The same rows,
    in one chunk per column either way."""
    import numpy as np
    import pyarrow as pa

    a = order.to_numpy()
    if not len(a):
        return t
    breaks = np.flatnonzero(np.diff(a) != 1) + 1
    if not len(breaks) and a[0] == 0:  # (0, 1, 2, ...: rows already in order, the usual case of a range: no copy)
        return t
    if (len(breaks) + 1) * RUN_ROWS > len(a):
        return t.take(order)
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(a)]))
    return pa.concat_tables([t.slice(int(a[s]), int(e - s)) for s, e in zip(starts, ends)]).combine_chunks()


def sorted_range(chunks: Iterable[tuple[int, int, bytes]], bounds: list, excluded: list, batch_rows: int = 4096):
    """:func:`sorted_range_table` as record batches of at most ``batch_rows`` rows."""
    t = sorted_range_table(chunks, bounds, excluded)
    if t is not None:
        yield from t.to_batches(max_chunksize=batch_rows)


_ARCHIVE_SCHEMAS: dict = {}


def archive_schema(table: str):
    """The Parquet schema of an archive table: the CLI's own (``--format parquet``: the registry's
    Arrow schema, ulong as uint64, which Spark reads as decimal(20, 0)) but for the times, in UTC
    microseconds (Spark's TimestampType cannot read nanoseconds), with the CLI's pandas metadata,
    whose time columns name the pandas dtype ``datetime64[ns, UTC]``: ``pandas.read_parquet`` gives
    exactly the dtypes of the CLI's Parquet (nullable Int64, boolean, string, nanosecond times)."""
    s = _ARCHIVE_SCHEMAS.get(table)
    if s is None:
        import pyarrow as pa

        from amqp_dissect.results.tables import arrow_schema as registry_schema

        cli = registry_schema(table)
        fields = [pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) else f
                  for f in cli]
        s = _ARCHIVE_SCHEMAS[table] = pa.schema(fields, metadata=_pandas_meta_ns(cli.metadata))
    return s


def _pandas_meta_ns(metadata: dict) -> dict:
    """pyarrow's pandas metadata with the pandas dtype of every time column spelled
    ``datetime64[ns, UTC]`` (an extension dtype: pyarrow converts the microseconds to it)."""
    meta = json.loads(metadata[b"pandas"])
    for c in meta["columns"]:
        if c.get("pandas_type") == "datetimetz":
            c["numpy_type"] = "datetime64[ns, UTC]"
    return {b"pandas": json.dumps(meta).encode("utf-8")}


def pandas_metadata(schema, nullable_ints: bool = True) -> dict:
    """pandas metadata for an Arrow ``schema`` of plain columns (the summaries): strings as
    pandas ``string``, longs as nullable ``Int64``, times as ``datetime64[ns, UTC]``."""
    import pyarrow as pa

    cols = []
    for f in schema:
        if pa.types.is_timestamp(f.type):
            pt, nt, md = "datetimetz", "datetime64[ns, UTC]", {"timezone": "UTC"}
        elif pa.types.is_string(f.type):
            pt, nt, md = "unicode", "string", None
        elif pa.types.is_integer(f.type):
            pt, nt, md = "int64", "Int64" if nullable_ints else "int64", None
        elif pa.types.is_boolean(f.type):
            pt, nt, md = "bool", "boolean", None
        else:
            pt, nt, md = "float64", "float64", None
        cols.append({"name": f.name, "field_name": f.name, "pandas_type": pt, "numpy_type": nt, "metadata": md})
    meta = {"index_columns": [], "column_indexes": [], "columns": cols, "attributes": {},
            "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": installed_pandas_version()}
    return {b"pandas": json.dumps(meta).encode("utf-8")}


def installed_pandas_version():
    from amqp_dissect.results.tables import installed_pandas_version as version

    return version()


def to_archive(t, table: str):
    """Arrow table ``t`` of chunk columns (Spark types) in the archive's schema (:func:`archive_schema`)."""
    import pyarrow as pa

    schema = archive_schema(table)
    if t.schema.equals(schema, check_metadata=False):
        return pa.Table.from_batches(t.to_batches(), schema=schema)
    return t.cast(schema)


RANGE_FILE = "part-{:05d}.parquet"  # file of range i of a table written by its task (name order = row order)
ROW_GROUP_ROWS = 65536


def parquet_bytes(t, **options) -> bytes:
    """The Parquet file of Arrow table ``t`` (``pq.write_table`` options), in memory."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, **options)
    return sink.getvalue().to_pybytes()


def range_file(table: str, t) -> tuple[int, bytes]:
    """(rows, the Parquet file's bytes) of the sorted rows ``t`` (an Arrow table, or None) of a
    range of ``table``: the file :func:`write_range` writes, for a file system the task cannot
    write itself (the driver copies it there through Hadoop's FileSystem)."""
    schema = archive_schema(table)
    t = schema.empty_table() if t is None else to_archive(t, table)
    return t.num_rows, parquet_bytes(t, row_group_size=ROW_GROUP_ROWS, compression="snappy")


def write_range(directory: str, table: str, r: int, t) -> int:
    """Write the sorted rows ``t`` (an Arrow table, or None) of range ``r`` of ``table`` to
    ``directory/part-<r>.parquet`` in the archive's schema (:func:`archive_schema`: snappy, UTC
    microsecond timestamps, pandas metadata); through a temporary name and a rename, so that a
    task run again replaces its file.  Returns the rows written."""
    import pyarrow.parquet as pq

    schema = archive_schema(table)
    t = schema.empty_table() if t is None else to_archive(t, table)
    path = os.path.join(directory, RANGE_FILE.format(r))
    tmp = os.path.join(directory, f".{RANGE_FILE.format(r)}.{os.getpid()}.tmp")
    pq.write_table(t, tmp, row_group_size=ROW_GROUP_ROWS, compression="snappy")
    os.replace(tmp, path)
    return t.num_rows
