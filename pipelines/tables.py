"""Tables shared by the CLI, the notebook API and the Spark jobs.

Rows come from :class:`dissector.analytics.Analyzer` as plain dicts; the column
registry (:mod:`pipelines.schema`) fixes every table's columns, their order and
their types, and :mod:`pipelines.typed` turns rows into DataFrames, Arrow batches
and files by it.  Every table has the same columns and dtypes for every capture,
an empty one included: times are ``datetime64[us, UTC]``, durations and latencies
float64 seconds (NaN when unknown), ids and counts nullable integers (``Int64``),
flags nullable booleans, text ``string``, nested values JSON text.
"""

from __future__ import annotations

from .schema import REGISTRY, TABLES, Column
from .typed import SchemaError, check_rows, record_batch, to_frame, write_table

__all__ = ["TABLES", "to_frame", "write_table", "record_batch", "check_rows", "SchemaError", "describe_columns",
           "flat_for_export"]


def describe_columns(table: str) -> list[Column]:
    """(name, type, meaning) of every column of ``table``."""
    return list(REGISTRY[table])


def flat_for_export(df):
    """Kept for callers of the old API: nested cells are JSON text in every frame now."""
    return df
