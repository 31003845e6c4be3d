"""Writing tables to files: csv, jsonl and parquet streamed in batches, or the text table.

The conversions (registry types, UTC times) are :mod:`amqp_dissect.results.tables`'; this
module only opens files and writes batches, so memory stays flat whatever the number of rows.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from typing import Iterable

from amqp_dissect.results.schema import JSON, TIME, columns, names
from amqp_dissect.results.tables import FORMATS, arrow_schema, batch_frame, record_batch, text_times, to_frame

# rows converted and written at a time: a batch of row dicts and its Arrow / pandas copies are
# the writer's whole memory (about 30 MB for the deliveries table)
BATCH_ROWS = 8192


def _chunks(rows: Iterable[dict], n: int):
    it = iter(rows)
    while True:
        chunk = list(itertools.islice(it, n))
        if not chunk:
            return
        yield chunk


class _Sink:
    """A path (opened here and closed after) or an open file object; None is stdout."""

    def __init__(self, out, binary: bool):
        self.own = isinstance(out, (str, os.PathLike))
        if out is None:
            out = sys.stdout.buffer if binary else sys.stdout
        self.f = open(out, "wb" if binary else "w", encoding=None if binary else "utf-8", newline=None) \
            if self.own else out

    def close(self):
        if self.own:
            self.f.close()


def write_table(rows: Iterable[dict], table: str, fmt: str, out=None, batch_rows: int = BATCH_ROWS) -> int:
    """Write a table's rows to ``out`` (a path, an open file, or None for stdout) as ``fmt``:
    ``csv``, ``jsonl`` or ``parquet`` converted ``batch_rows`` rows at a time (memory stays
    flat whatever the number of rows), or ``table`` (the CLI's text table, built whole).
    Returns the number of rows written."""
    if fmt == "parquet":
        return _write_parquet(rows, table, out, batch_rows)
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    sink = _Sink(out, binary=False)
    try:
        if fmt == "csv":
            return _write_csv(rows, table, sink.f, batch_rows)
        if fmt == "jsonl":
            return _write_jsonl(rows, table, sink.f, batch_rows)
        return _write_text(rows, table, sink.f)
    finally:
        sink.close()


def _write_parquet(rows, table, out, batch_rows) -> int:
    import pyarrow.parquet as pq

    if out is None:
        raise ValueError("parquet needs an output file")
    n = 0
    target = os.fspath(out) if isinstance(out, (str, os.PathLike)) else out
    with pq.ParquetWriter(target, arrow_schema(table)) as w:
        for chunk in _chunks(rows, batch_rows):
            w.write_batch(record_batch(chunk, table))
            n += len(chunk)
    return n


def _write_csv(rows, table, f, batch_rows) -> int:
    n = 0
    first = True
    for chunk in _chunks(rows, batch_rows):
        batch_frame(text_times(record_batch(chunk, table), table)).to_csv(f, header=first, index=False)
        first = False
        n += len(chunk)
    if first:
        f.write(",".join(names(table)) + "\n")
    return n


def _write_jsonl(rows, table, f, batch_rows) -> int:
    cols = columns(table)
    keys = [c.name for c in cols]
    dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode
    n = 0
    for chunk in _chunks(rows, batch_rows):
        batch = text_times(record_batch(chunk, table), table)
        values = []
        for i, c in enumerate(cols):
            if c.type == JSON:  # nested cells stay JSON values here (not text)
                values.append([r.get(c.name) for r in chunk])
            else:
                values.append(batch.column(i).to_pylist())
        f.write("".join([dumps(dict(zip(keys, cells))) + "\n" for cells in zip(*values)]))
        n += len(chunk)
    return n


def _write_text(rows, table, f) -> int:
    """The human table: every column, times as UTC datetimes."""
    import pandas as pd

    df = to_frame(rows, table)
    if not len(df):
        f.write("(no rows)\n")
        return 0
    for c in columns(table):
        if c.type == TIME:
            df[c.name] = df[c.name].dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250,
                           "display.max_colwidth", 40):
        f.write(df.to_string(index=False) + "\n")
    return len(df)
