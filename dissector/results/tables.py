"""The typed layer: analyzer rows (plain dicts) -> Arrow batches, pandas DataFrames, files.

Everything here follows the column registry of :mod:`amqp_dissect.results.schema`: a table
always has exactly the registry's columns, in its order, with its types, whatever
the capture holds (an empty capture included).  Row keys outside the registry are
not turned into columns; :func:`check_rows` reports them (tests call it).

    to_frame(rows, "deliveries")                      # pandas, registry dtypes
    record_batch(rows, "deliveries")                  # pyarrow RecordBatch, registry schema
    arrow_schema("links"), pandas_dtypes("links"), spark_schema("links")

Conversions: times (integer nanoseconds since the epoch in the rows, exactly as the capture
holds them) become ``timestamp[ns, UTC]`` unchanged; ``json`` cells become JSON text
(sorted keys); NaN floats become null.  In csv and jsonl output, times are ISO 8601
UTC strings, exact (``2024-05-01T12:00:00.123456Z``; nine digits for a time with a part finer
than a microsecond, as a nanosecond capture's);
jsonl keeps nested cells as JSON values rather than text.
"""

from __future__ import annotations

import functools
import json
import json.encoder
import math
from datetime import datetime, timedelta, timezone
from typing import Iterable

import pyarrow as pa

from .schema import REGISTRY, BOOL, FLOAT, INT, JSON, STRING, TIME, UINT64, columns, names


class _Compute:
    """pyarrow.compute, imported at its first use (the text conversions: csv, jsonl, times): the
    Parquet writers do not use it, and loading it costs about 9 MB."""

    def __getattr__(self, name):
        import pyarrow.compute

        return getattr(pyarrow.compute, name)


pc = _Compute()

__all__ = [
    "SchemaError", "arrow_type", "arrow_schema", "pandas_dtypes", "spark_schema", "record_batch", "to_frame",
    "check_rows", "FORMATS", "iso_times", "text_times", "fits", "misfits", "batch_frame", "describe_columns",
    "columns_batch", "csv_cells", "json_cells", "csv_header", "csv_bytes", "csv_text", "jsonl_bytes", "jsonl_text",
]

FORMATS = ("table", "csv", "jsonl", "parquet")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TS = pa.timestamp("ns", tz="UTC")

_ARROW = {STRING: pa.string(), JSON: pa.string(), INT: pa.int64(), UINT64: pa.uint64(), BOOL: pa.bool_(),
          FLOAT: pa.float64(), TIME: _TS}
# Spark has no unsigned integers: a ulong column is a decimal(20, 0) there
_ARROW_SPARK = {**_ARROW, UINT64: pa.decimal128(20, 0)}
# and no nanosecond timestamps (Spark's TimestampType holds microseconds; it cannot read Parquet's
# TIMESTAMP(NANOS)): a time there is the capture's, its nanoseconds below the microsecond dropped
_TS_SPARK = _ARROW_SPARK[TIME] = pa.timestamp("us", tz="UTC")


class SchemaError(ValueError):
    """Rows that do not fit the registry (a bug in the producer or the registry)."""


# --------------------------------------------------------------------------- schemas


def arrow_type(typ: str, spark: bool = False) -> pa.DataType:
    return (_ARROW_SPARK if spark else _ARROW)[typ]


# text columns in pandas are Arrow-backed (``string[pyarrow]``): the Arrow buffers as they are, no
# Python object per cell (the deliveries of a 300k-delivery capture: about a third of the memory of
# ``string[python]``, and no conversion); the Parquet files' pandas metadata names it, so that
# ``pandas.read_parquet`` gives back the same dtype
_STR = "string[pyarrow]"


def pandas_dtypes(table: str) -> dict:
    """column -> pandas dtype of the table's DataFrame."""
    import pandas as pd

    m = {STRING: _STR, JSON: _STR, INT: pd.Int64Dtype(), UINT64: pd.UInt64Dtype(),
         BOOL: pd.BooleanDtype(), FLOAT: "float64", TIME: pd.DatetimeTZDtype("ns", "UTC")}
    return {c.name: pd.api.types.pandas_dtype(m[c.type]) for c in columns(table)}


_SCHEMAS: dict = {}


def arrow_schema(table: str, spark: bool = False) -> pa.Schema:
    """The Arrow (Parquet) schema of a table.  It carries pandas metadata, so that
    ``pandas.read_parquet`` gives back the registry's dtypes (nullable Int64, boolean,
    string).  ``spark=True``: the types Spark accepts (uint64 as decimal(20, 0)), no metadata."""
    key = (table, spark)
    s = _SCHEMAS.get(key)
    if s is None:
        s = pa.schema([pa.field(c.name, arrow_type(c.type, spark)) for c in columns(table)])
        if not spark:
            s = s.with_metadata(_pandas_metadata(table))
        _SCHEMAS[key] = s
    return s


# registry type -> (pandas_type, numpy_type) in pyarrow's pandas metadata for the registry's pandas dtypes
_PANDAS_META = {STRING: ("unicode", _STR), JSON: ("unicode", _STR), INT: ("int64", "Int64"),
                UINT64: ("uint64", "UInt64"), BOOL: ("bool", "boolean"), FLOAT: ("float64", "float64"),
                TIME: ("datetimetz", "datetime64[ns]")}


def _pandas_metadata(table: str) -> dict:
    """The ``pandas`` schema metadata pyarrow writes for a DataFrame of the registry dtypes (what
    ``pa.Schema.from_pandas`` gives; tests compare the two), made without importing pandas: the
    table writers never load it."""
    cols = []
    for c in columns(table):
        pandas_type, numpy_type = _PANDAS_META[c.type]
        cols.append({"name": c.name, "field_name": c.name, "pandas_type": pandas_type, "numpy_type": numpy_type,
                     "metadata": {"timezone": "UTC"} if c.type == TIME else None})
    meta = {"index_columns": [], "column_indexes": [], "columns": cols, "attributes": {},
            "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": installed_pandas_version()}
    return {b"pandas": json.dumps(meta).encode("utf-8")}


@functools.cache
def installed_pandas_version() -> str | None:
    """The installed pandas' version (None without pandas), without importing it; asked once per
    process (cached): the lookup of a distribution's metadata searches every ``sys.path`` entry (in
    Spark's Python workers, pyspark's zip files too: about 20 ms a call), and the archive's table
    and summary writers ask for it per schema."""
    import sys

    pd = sys.modules.get("pandas")
    if pd is not None:
        return pd.__version__
    from importlib.metadata import PackageNotFoundError, version  # (itself an import of 0.1 s and more)

    try:
        return version("pandas")
    except PackageNotFoundError:
        return None


def spark_schema(table: str):
    """The Spark StructType of a table (imports pyspark)."""
    from pyspark.sql import types as T

    m = {STRING: T.StringType(), JSON: T.StringType(), INT: T.LongType(), UINT64: T.DecimalType(20, 0),
         BOOL: T.BooleanType(), FLOAT: T.DoubleType(), TIME: T.TimestampType()}
    return T.StructType([T.StructField(c.name, m[c.type], True) for c in columns(table)])


# --------------------------------------------------------------------------- rows -> arrow


def check_rows(rows: Iterable[dict], table: str) -> None:
    """Raise :class:`SchemaError` if a row has a key outside the registry or lacks one of its
    columns.  The typed conversions ignore unknown keys; tests call this to catch them."""
    want = names(table)
    wanted = set(want)
    for i, r in enumerate(rows):
        keys = set(r)
        if keys != wanted:
            extra = [k for k in r if k not in wanted]
            missing = [k for k in want if k not in keys]
            raise SchemaError(f"{table} row {i}: keys not in the registry {extra}, registry columns missing "
                              f"{missing}")


def _json_text(v):
    return None if v is None else json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)


def _is_nan(v) -> bool:
    return isinstance(v, float) and v != v


def _has_bool(vals: list) -> bool:
    return bool in set(map(type, vals))  # pyarrow would take True as 1.0


# the times a table holds: what a 64-bit count of nanoseconds holds (Arrow's timestamp[ns], pandas'
# datetime64[ns]: the years 1677 to 2262, NaT's value excluded); a time outside them (a corrupt or
# hostile capture's) is written null in every format (csv, jsonl, Parquet), as the text table and
# the report write it as its raw epoch seconds
TIME_MIN = -(1 << 63) + 1  # (nanoseconds since the epoch)
TIME_END = 1 << 63


def _spark_time(arr: pa.Array) -> pa.Array:
    """A timestamp[ns] array as Spark's microseconds (floor: the microsecond a time falls in)."""
    import numpy as np

    ns = arr.cast(pa.int64())
    valid = pc.is_valid(ns).to_numpy(zero_copy_only=False)
    us = np.floor_divide(pc.fill_null(ns, 0).to_numpy(zero_copy_only=False), 1000)
    return pa.array(us, pa.int64(), mask=~valid).cast(_TS_SPARK)


def _time_array(vals: list, checked: bool = False) -> pa.Array:
    try:
        if not checked and _has_bool(vals):
            raise TypeError
        # (integer nanoseconds, as they are; a view of the same buffers: the cast, which is that too,
        # would load pyarrow.compute, about 9 MB that the Parquet writers do not otherwise need)
        return pa.array(vals, pa.int64()).view(_TS)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_to_ns(v) for v in vals], pa.int64()).view(_TS)


def _to_ns(v) -> int | None:
    """Nanoseconds since the epoch of a time cell (integer nanoseconds, or a datetime); None for
    anything else and for a time outside the 64-bit range."""
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        v = (v - _EPOCH) // timedelta(microseconds=1) * 1000
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return v if TIME_MIN <= v < TIME_END else None


_INT_RANGE = {INT: (-(1 << 63), (1 << 63) - 1), UINT64: (0, (1 << 64) - 1)}


def fits(v, typ: str) -> bool:
    """Does a row cell have the Python type a column of ``typ`` holds (None always fits)?"""
    if v is None:
        return True
    if typ in (INT, UINT64):
        lo, hi = _INT_RANGE[typ]
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
    if typ == BOOL:
        return isinstance(v, bool)
    if typ == FLOAT:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if typ == TIME:
        return isinstance(v, int) and not isinstance(v, bool) or isinstance(v, datetime)
    if typ == STRING:
        return isinstance(v, str)
    return True  # json: anything JSON-able


def _coerce(v, typ: str):
    """One cell of a column whose values did not convert in bulk: a value of another type
    (a malformed field passed through by the analyzer) becomes text in a string column,
    null elsewhere."""
    if fits(v, typ):
        return None if _is_nan(v) else v
    if typ == STRING:
        return json.dumps(v, default=str) if isinstance(v, (list, dict)) else str(v)
    return None


def column_array(vals: list, typ: str, spark: bool = False, checked: bool = False) -> pa.Array:
    """One column's raw row values as an Arrow array of the registry type.  ``checked``: the
    caller made every float cell a float (or None), so no cell is a bool that Arrow would take
    for 1.0 or 0.0, and the scan for one is skipped."""
    t = arrow_type(typ, spark)
    if typ == TIME:
        arr = _time_array(vals, checked)
        return _spark_time(arr) if spark else arr
    if typ == JSON:
        n = len(vals)
        if vals.count(None) == n:  # (a column without a value, as most rows' message columns: no call per cell)
            return pa.array([None] * n, t)
        return pa.array([_json_text(v) for v in vals], t)
    try:
        if typ == FLOAT and not checked and _has_bool(vals):
            raise TypeError
        return pa.array(vals, t, from_pandas=(typ == FLOAT))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_coerce(v, typ) for v in vals], t, from_pandas=(typ == FLOAT))


def record_batch(rows: list[dict], table: str, spark: bool = False) -> pa.RecordBatch:
    """Rows as one Arrow record batch with the table's registry schema (keys outside it
    ignored; a cell of the wrong Python type: see :func:`fits`)."""
    arrays = [column_array([r.get(c.name) for r in rows], c.type, spark) for c in columns(table)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(table, spark))


def columns_batch(table: str, cols: dict, ctx_index=None, ctx_cols: dict | None = None,
                  spark: bool = False, checked: bool = False) -> pa.RecordBatch:
    """Cells given by column (``cols``: name -> sequence of row values, as the rows would hold
    them) as one record batch with the table's registry schema: the same batch
    :func:`record_batch` makes of the rows.  ``ctx_cols`` (name -> values) with ``ctx_index`` (one
    position in them per row) give columns whose values repeat over many rows once each (see
    :meth:`amqp_dissect.results.analytics.Analyzer.delivery_columns`).  ``checked``: see
    :func:`column_array`."""
    take = None
    if ctx_cols:
        take = pa.array(ctx_index, pa.int32())
        n = len(take)
    else:
        n = len(next(iter(cols.values()))) if cols else 0
    arrays = []
    for c in columns(table):
        vals = cols.get(c.name)
        if vals is None and ctx_cols and c.name in ctx_cols:
            arrays.append(column_array(ctx_cols[c.name], c.type, spark, checked).take(take))
        else:
            arrays.append(column_array([None] * n if vals is None else vals, c.type, spark, checked))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(table, spark))


def misfits(rows: Iterable[dict], table: str) -> list[tuple[int, str, object]]:
    """(row index, column, value) of every cell whose Python type does not fit its column."""
    cols = columns(table)
    return [(i, c.name, r.get(c.name)) for i, r in enumerate(rows) for c in cols if not fits(r.get(c.name), c.type)]


def pandas_types_mapper():
    import pandas as pd

    m = {pa.string(): pd.StringDtype("pyarrow"), pa.int64(): pd.Int64Dtype(), pa.uint64(): pd.UInt64Dtype(),
         pa.bool_(): pd.BooleanDtype()}
    return m.get


def batch_frame(batch: pa.RecordBatch):
    """An Arrow batch (or table) of a table as a pandas DataFrame with the registry dtypes."""
    t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return t.to_pandas(types_mapper=pandas_types_mapper())


def to_frame(rows: Iterable[dict], table: str):
    """A DataFrame with exactly the table's registry columns, in order, with its dtypes."""
    rows = rows if isinstance(rows, list) else list(rows)
    return batch_frame(record_batch(rows, table))


# --------------------------------------------------------------------------- text times


def text_times(batch: pa.RecordBatch, table: str) -> pa.RecordBatch:
    """The batch with its time columns as ISO 8601 UTC text (vectorised)."""
    arrays = list(batch.columns)
    for i, c in enumerate(columns(table)):
        if c.type == TIME:
            arrays[i] = iso_times(arrays[i])
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


_DIGITS: list = []


def _digits() -> list:
    """".000" ... ".999" and "000" ... "999": the milli- and microsecond digits of a time (made on
    first use: no Arrow array is made at import)."""
    if not _DIGITS:
        _DIGITS.append(pa.array([f".{i:03d}" for i in range(1000)], pa.string()))
        _DIGITS.append(pa.array([f"{i:03d}" for i in range(1000)], pa.string()))
    return _DIGITS


_PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def iso_times(arr: pa.Array) -> pa.Array:
    """A timestamp array (of any unit; the tables' are ns) as ISO 8601 UTC text (``...T12:00:00.123456Z``), nulls kept: six
    decimals, or nine for a time with a part finer than a microsecond (a nanosecond capture's):
    exact, and the same text for a time whatever batch it is written in.  The date and time of day
    are formatted once per distinct second of the array (a capture has few), the fraction by Arrow."""
    import numpy as np

    if arr.null_count == len(arr):
        return pa.nulls(len(arr), pa.string())
    ints = arr.cast(pa.int64())
    if arr.null_count:  # nulls: a time of the array in their place (dropped at the end)
        ints = pc.fill_null(ints, pc.min(ints))
    t = ints.to_numpy(zero_copy_only=False)
    per = _PER_SECOND[arr.type.unit] if pa.types.is_timestamp(arr.type) else 1_000_000_000
    secs, frac = np.divmod(t, per)  # floor: 1969-12-31T23:59:59.999999 for -1 µs
    frac = frac * (1_000_000_000 // per)  # (nanoseconds of the second)
    lo, hi = int(secs.min()), int(secs.max())
    if hi - lo < 4 * len(secs):  # a time span of the capture: every second of it, once
        day_time = np.datetime_as_string((np.arange(hi - lo + 1) + lo).astype("datetime64[s]"), unit="s")
        which = secs - lo
    else:
        uniq, which = np.unique(secs, return_inverse=True)
        day_time = np.datetime_as_string(uniq.astype("datetime64[s]"), unit="s")
    day_time = pa.array(day_time.tolist(), pa.string()).take(pa.array(which.ravel()))
    ms, rest = np.divmod(frac, 1_000_000)
    dot_ms, digits = _digits()
    us3, ns3 = np.divmod(rest, 1000)
    text = pc.binary_join_element_wise(day_time, dot_ms.take(pa.array(ms)), digits.take(pa.array(us3)), "")
    fine = ns3 != 0
    if fine.any():  # (a nanosecond capture's time: its nine digits; each time decides for itself)
        text = pc.if_else(pa.array(fine), pc.binary_join_element_wise(text, digits.take(pa.array(ns3)), ""), text)
    text = pc.binary_join_element_wise(text, pa.scalar("Z"), "")
    if arr.null_count == 0:
        return text
    return pc.if_else(pc.is_valid(arr), text, pa.scalar(None, pa.string()))


# --------------------------------------------------------------------------- csv / jsonl text
#
# Both are made a column at a time with Arrow compute (no Python object per cell): every cell
# becomes its text, then one join per row.  The text is what the csv module (QUOTE_MINIMAL, as
# pandas' to_csv) and json.dumps write.

_LS = pa.large_string()


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _LS)


def _float_texts(arr: pa.Array, null: str, finite_only: bool) -> pa.Array:
    """Python's repr of each float (what csv / json write), ``null`` for nulls (and for inf / nan
    when ``finite_only``: JSON has no such numbers).  repr runs once per distinct value (bit for
    bit: 0.0 and -0.0 differ); the latencies of a capture repeat a lot."""
    import numpy as np

    if len(arr) == 0:
        return pa.array([], _LS)
    bits = pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False).view(np.int64)
    uniq, inv = np.unique(bits, return_inverse=True)
    r = float.__repr__
    vals = uniq.view(np.float64).tolist()
    if finite_only:
        fin = math.isfinite
        texts = [r(v) if fin(v) else null for v in vals]
    else:
        texts = [r(v) for v in vals]
    out = pa.array(texts, _LS).take(pa.array(inv.ravel()))
    if arr.null_count == 0:
        return out
    return pc.if_else(pc.is_valid(arr), out, _s(null))


def _data_bytes(arr: pa.Array) -> bytes:
    """The value bytes of a string array (its whole data buffer: a superset for a slice)."""
    buf = arr.buffers()[2]
    return b"" if buf is None else buf.to_pybytes()


_CSV_SPECIAL = b',"\n'
_JSON_SPECIAL = bytes(range(32)) + b'"\\'


def _has_any(data: bytes, chars: bytes) -> bool:
    return len(data.translate(None, chars)) != len(data)


def _iso_memo(arr: pa.Array, memo: list | None) -> pa.Array:
    """iso_times(arr), reusing the text of an equal time column of the same batch (``memo``:
    (array, text) pairs; in the deliveries table last_time is often first_time, outcome_time
    settled_time)."""
    if memo is None:
        return iso_times(arr)
    for a, text in memo:
        if a.equals(arr):
            return text
    text = iso_times(arr)
    memo.append((arr, text))
    return text


def csv_cells(arr: pa.Array, typ: str, memo: list | None = None) -> pa.Array:
    """One column of a batch as CSV fields (large_string, no nulls): empty for null, True /
    False, integers in decimal, floats as Python's repr, times as ISO 8601 UTC, text quoted
    when it holds a comma, a double quote or a newline (quotes doubled)."""
    if typ == FLOAT:
        return _float_texts(arr, "", False)
    if typ == TIME:
        out = _iso_memo(arr, memo)
    elif typ == BOOL:
        out = pc.if_else(arr, "True", "False")
    elif typ in (INT, UINT64):
        out = arr.cast(pa.string())
    else:
        out = arr
        if _has_any(_data_bytes(arr), _CSV_SPECIAL):
            need = pc.match_substring_regex(arr, '[,"\\n]')
            quoted = pc.binary_join_element_wise('"', pc.replace_substring(arr, '"', '""'), '"', "")
            out = pc.if_else(need, quoted, arr)
    out = out.cast(_LS)
    return out if out.null_count == 0 else pc.fill_null(out, _s(""))


def json_cells(arr: pa.Array, typ: str) -> pa.Array:
    """One column of a batch as JSON values (large_string, no nulls) as json.dumps writes them
    (``ensure_ascii=False``): null, true / false, numbers, quoted and escaped text, times as ISO
    8601 UTC strings.  A ``json`` column (JSON text) is embedded as it is."""
    cells, quote = _json_parts(arr, typ)
    return pc.binary_join_element_wise(_s('"'), cells, _s('"'), _s("")) if quote else cells


def _json_parts(arr: pa.Array, typ: str, memo: list | None = None) -> tuple[pa.Array, bool]:
    """(cells, quote): the JSON values of a column, or with ``quote`` the text that goes between
    double quotes (a column without nulls and nothing to escape: the quotes go into the line)."""
    if typ == FLOAT:
        return _float_texts(arr, "null", True), False
    if typ == BOOL:
        out = pc.if_else(arr, "true", "false")
    elif typ in (INT, UINT64, JSON):
        out = arr.cast(pa.string())
    else:
        if typ == TIME:
            arr = _iso_memo(arr, memo)  # nothing to escape
        elif _has_any(_data_bytes(arr), _JSON_SPECIAL):  # something to escape: the json module does it
            enc = json.encoder.encode_basestring
            out = pa.array([None if v is None else enc(v) for v in arr.to_pylist()], _LS)
            return (out if out.null_count == 0 else pc.fill_null(out, _s("null"))), False
        if arr.null_count == 0:
            return arr.cast(_LS), True
        out = pc.binary_join_element_wise('"', arr, '"', "")
    out = out.cast(_LS)
    return (out if out.null_count == 0 else pc.fill_null(out, _s("null"))), False


def _joined(lines: pa.Array) -> memoryview:
    """The concatenation of a large_string array's values (no nulls) as UTF-8 bytes, straight
    from its buffers."""
    import numpy as np

    if len(lines) == 0:
        return memoryview(b"")
    _, offsets, data = lines.buffers()
    o = np.frombuffer(offsets, dtype=np.int64)
    start, end = int(o[lines.offset]), int(o[lines.offset + len(lines)])
    return memoryview(data)[start:end]


def csv_header(table: str) -> str:
    return ",".join(names(table)) + "\n"


def csv_bytes(batch: pa.RecordBatch, table: str) -> memoryview:
    """The CSV lines of a batch of ``table`` (no header), UTF-8, as pandas' ``to_csv`` writes them."""
    memo: list = []
    cells = [csv_cells(batch.column(i), c.type, memo) for i, c in enumerate(columns(table))]
    if not cells or not len(batch):
        return memoryview(b"")
    cells[-1] = pc.binary_join_element_wise(cells[-1], _s(""), _s("\n"))  # cell + "\n"
    return _joined(pc.binary_join_element_wise(*cells, _s(",")))


def csv_text(batch: pa.RecordBatch, table: str) -> str:
    """:func:`csv_bytes` as text."""
    return str(csv_bytes(batch, table), "utf-8")


def jsonl_bytes(batch: pa.RecordBatch, table: str, raw: dict | None = None) -> memoryview:
    """The JSON lines of a batch of ``table``, UTF-8, one object per row with the registry's keys
    in order, as ``json.dumps(row, ensure_ascii=False)`` writes it.  ``raw`` (column -> cell
    values) gives the ``json`` columns' values as the rows held them, written as JSON values (key
    order kept)."""
    if not len(batch):
        return memoryview(b"")
    enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode
    memo: list = []
    parts = []
    literal = "{"
    for i, c in enumerate(columns(table)):
        if c.type == JSON and raw is not None and c.name in raw:
            cells, quote = pa.array([enc(v) for v in raw[c.name]], _LS), False
        else:
            cells, quote = _json_parts(batch.column(i), c.type, memo)
        literal += enc(c.name) + (': "' if quote else ": ")
        parts.append(_s(literal))
        parts.append(cells)
        literal = '", ' if quote else ", "
    parts.append(_s(literal[:-2] + "}\n"))
    return _joined(pc.binary_join_element_wise(*parts, _s("")))


def jsonl_text(batch: pa.RecordBatch, table: str, raw: dict | None = None) -> str:
    """:func:`jsonl_bytes` as text."""
    return str(jsonl_bytes(batch, table, raw), "utf-8")


def describe_columns(table: str) -> list:
    """(name, type, meaning) of every column of ``table``."""
    return list(REGISTRY[table])
