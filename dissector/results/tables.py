"""The typed layer: analyzer rows (plain dicts) -> Arrow batches, pandas DataFrames, files.

Everything here follows the column registry of :mod:`amqp_dissect.results.schema`: a table
always has exactly the registry's columns, in its order, with its types, whatever
the capture holds (an empty capture included).  Row keys outside the registry are
not turned into columns; :func:`check_rows` reports them (tests call it).

    to_frame(rows, "deliveries")                      # pandas, registry dtypes
    record_batch(rows, "deliveries")                  # pyarrow RecordBatch, registry schema
    arrow_schema("links"), pandas_dtypes("links"), spark_schema("links")

Conversions: times (float epoch seconds in the rows) become ``timestamp[us, UTC]``
(rounded to the microsecond, half to even); ``json`` cells become JSON text
(sorted keys); NaN floats become null.  In csv and jsonl output, times are ISO 8601
UTC strings (``2024-05-01T12:00:00.123456Z``); jsonl keeps nested cells as JSON
values rather than text.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from .schema import REGISTRY, BOOL, FLOAT, INT, JSON, STRING, TIME, UINT64, columns, names

__all__ = [
    "SchemaError", "arrow_type", "arrow_schema", "pandas_dtypes", "spark_schema", "record_batch", "to_frame",
    "check_rows", "FORMATS", "iso_times", "text_times", "fits", "misfits", "batch_frame", "describe_columns",
]

FORMATS = ("table", "csv", "jsonl", "parquet")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TS = pa.timestamp("us", tz="UTC")

_ARROW = {STRING: pa.string(), JSON: pa.string(), INT: pa.int64(), UINT64: pa.uint64(), BOOL: pa.bool_(),
          FLOAT: pa.float64(), TIME: _TS}
# Spark has no unsigned integers: a ulong column is a decimal(20, 0) there
_ARROW_SPARK = {**_ARROW, UINT64: pa.decimal128(20, 0)}


class SchemaError(ValueError):
    """Rows that do not fit the registry (a bug in the producer or the registry)."""


# --------------------------------------------------------------------------- schemas


def arrow_type(typ: str, spark: bool = False) -> pa.DataType:
    return (_ARROW_SPARK if spark else _ARROW)[typ]


def pandas_dtypes(table: str) -> dict:
    """column -> pandas dtype of the table's DataFrame."""
    import pandas as pd

    m = {STRING: pd.StringDtype(), JSON: pd.StringDtype(), INT: pd.Int64Dtype(), UINT64: pd.UInt64Dtype(),
         BOOL: pd.BooleanDtype(), FLOAT: "float64", TIME: pd.DatetimeTZDtype("us", "UTC")}
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


def _pandas_metadata(table: str) -> dict:
    import pandas as pd

    empty = pd.DataFrame({n: pd.Series([], dtype=d) for n, d in pandas_dtypes(table).items()})
    return pa.Schema.from_pandas(empty, preserve_index=False).metadata


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
    return any(v.__class__ is bool for v in vals)  # pyarrow would take True as 1.0


def _time_array(vals: list) -> pa.Array:
    try:
        if _has_bool(vals):
            raise TypeError
        secs = pa.array(vals, pa.float64(), from_pandas=True)
        us = pc.round(pc.multiply(secs, 1_000_000.0), ndigits=0, round_mode="half_to_even")
        return us.cast(pa.int64()).cast(_TS)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([_to_us(v) for v in vals], pa.int64()).cast(_TS)


def _to_us(v) -> int | None:
    """Microseconds since the epoch of a time cell (float seconds, or a datetime)."""
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return (v - _EPOCH) // timedelta(microseconds=1)
    if v is None or _is_nan(v) or not fits(v, TIME):
        return None
    us = round(float(v) * 1_000_000) if abs(v) < 1e12 else None  # beyond year 33658: not a capture time
    return us


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
    if typ in (FLOAT, TIME):
        return isinstance(v, (int, float)) and not isinstance(v, bool) or (typ == TIME and isinstance(v, datetime))
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


def column_array(vals: list, typ: str, spark: bool = False) -> pa.Array:
    """One column's raw row values as an Arrow array of the registry type."""
    t = arrow_type(typ, spark)
    if typ == TIME:
        return _time_array(vals)
    if typ == JSON:
        return pa.array([_json_text(v) for v in vals], t)
    try:
        if typ == FLOAT and _has_bool(vals):
            raise TypeError
        return pa.array(vals, t, from_pandas=(typ == FLOAT))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        return pa.array([_coerce(v, typ) for v in vals], t, from_pandas=(typ == FLOAT))


def record_batch(rows: list[dict], table: str, spark: bool = False) -> pa.RecordBatch:
    """Rows as one Arrow record batch with the table's registry schema (keys outside it
    ignored; a cell of the wrong Python type: see :func:`fits`)."""
    arrays = [column_array([r.get(c.name) for r in rows], c.type, spark) for c in columns(table)]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(table, spark))


def misfits(rows: Iterable[dict], table: str) -> list[tuple[int, str, object]]:
    """(row index, column, value) of every cell whose Python type does not fit its column."""
    cols = columns(table)
    return [(i, c.name, r.get(c.name)) for i, r in enumerate(rows) for c in cols if not fits(r.get(c.name), c.type)]


def _types_mapper():
    import pandas as pd

    m = {pa.string(): pd.StringDtype(), pa.int64(): pd.Int64Dtype(), pa.uint64(): pd.UInt64Dtype(),
         pa.bool_(): pd.BooleanDtype()}
    return m.get


def batch_frame(batch: pa.RecordBatch):
    """An Arrow batch of a table as a pandas DataFrame with the registry dtypes."""
    return pa.Table.from_batches([batch]).to_pandas(types_mapper=_types_mapper())


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


def iso_times(arr: pa.Array) -> pa.Array:
    """A timestamp[us] array as ISO 8601 UTC text (``...T12:00:00.123456Z``), nulls kept."""
    import numpy as np

    us = pc.fill_null(arr.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    text = pa.array(np.datetime_as_string(us.astype("datetime64[us]"), unit="us"), pa.string())
    text = pc.binary_join_element_wise(text, pa.scalar("Z"), "")
    return pc.if_else(pc.is_valid(arr), text, pa.scalar(None, pa.string()))


def describe_columns(table: str) -> list:
    """(name, type, meaning) of every column of ``table``."""
    return list(REGISTRY[table])
