"""Writing tables to files: csv, jsonl and parquet streamed in batches, or the text table.

The conversions (registry types, UTC times, csv / jsonl text) are :mod:`amqp_dissect.results.tables`';
this module only opens files and writes batches, so memory stays flat whatever the number of
rows.  Neither pandas nor a dict per row is on the csv / jsonl / parquet path of
:func:`write_batches`; :func:`write_table` takes row dicts (the small tables).
"""

from __future__ import annotations

import io
import itertools
import os
import sys
from contextlib import contextmanager
from typing import Iterable

from amqp_dissect.results.schema import JSON, TIME, columns
from amqp_dissect.times import decimal
from amqp_dissect.results.tables import FORMATS, arrow_schema, csv_bytes, csv_header, jsonl_bytes, record_batch, to_frame

# rows converted and written at a time (and the Parquet row group size): one batch (its cells,
# Arrow arrays and text) is the writer's whole memory, a few MB for the deliveries table
BATCH_ROWS = 8192
# deliveries converted at a time by the CLI's stream (DeliveryStream.batches): each folded delivery
# object waits for its batch, about 1.5 KB apiece
STREAM_ROWS = 2048


@contextmanager
def lean_arrow():
    """Within: pyarrow allocates with the system allocator and behaves as if pandas were not
    installed (unless pandas is already loaded).  The CLI's table commands write in here.

    - The first ``pyarrow.array()`` call of a process imports pandas (if it is installed) only to
      ask whether its argument is a pandas object; the table writers never pass one, and that
      import costs about 0.3 s and 40 MB, more than writing a table.  pyarrow takes the failed
      import as "no pandas" for that probe; a later pandas conversion (``to_pandas``) imports it
      then.  A library caller that hands pandas objects to ``pyarrow.array`` afterwards should not
      use this.
    - pyarrow's default allocator keeps freed batches for reuse: about 15 MB more peak memory
      when one batch after another is built and dropped."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    blocker = None
    if "pandas" not in sys.modules:
        blocker = _NoPandas()
        sys.meta_path.insert(0, blocker)
    try:
        yield
    finally:
        if blocker is not None:
            sys.meta_path.remove(blocker)
        pa.set_memory_pool(pool)


class _NoPandas:
    """A meta-path finder for which pandas is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError(f"{name} is not loaded while a table is written", name=name)
        return None


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
        self.binary = binary
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
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "table":
        sink = _Sink(out, binary=False)
        try:
            rows = rows if isinstance(rows, list) else list(rows)
            return _write_text(to_frame(rows, table), table, sink.f, raw_times(rows, table))
        finally:
            sink.close()
    json_cols = [c.name for c in columns(table) if c.type == JSON] if fmt == "jsonl" else []

    def batches():
        for chunk in _chunks(rows, batch_rows):
            raw = {n: [r.get(n) for r in chunk] for n in json_cols} if json_cols else None
            yield record_batch(chunk, table), raw

    return _write(batches(), table, fmt, out, batch_rows)


def write_batches(batches: Iterable, table: str, fmt: str, out=None, group_rows: int = BATCH_ROWS) -> int:
    """Write a table given as Arrow record batches of its registry schema (e.g.
    :meth:`amqp_dissect.pipelines.local.DeliveryStream.batches`) to ``out`` as ``fmt``, one batch
    at a time (``table``: all of them, as one text table; ``parquet``: gathered into row groups of
    at least ``group_rows`` rows).  Returns the number of rows written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "table":
        import pyarrow as pa

        from amqp_dissect.results.tables import batch_frame

        sink = _Sink(out, binary=False)
        try:
            whole = pa.Table.from_batches(list(batches), schema=arrow_schema(table))
            return _write_text(batch_frame(whole), table, sink.f)
        finally:
            sink.close()
    return _write(((b, None) for b in batches), table, fmt, out, group_rows)


def _write(pairs, table, fmt, out, group_rows: int = BATCH_ROWS) -> int:
    """``pairs``: (record batch, raw json-column cells or None)."""
    if fmt == "parquet":
        return _write_parquet(pairs, table, out, group_rows)
    if out is None:  # stdout: its bytes under the text layer when it has them
        binary = hasattr(sys.stdout, "buffer")
        if binary:
            sys.stdout.flush()
    else:
        binary = not isinstance(out, io.TextIOBase)
    sink = _Sink(out, binary=binary)
    emit = sink.f.write if sink.binary else (lambda data: sink.f.write(str(data, "utf-8")))
    try:
        if fmt == "csv":
            return _write_csv(pairs, table, emit)
        return _write_jsonl(pairs, table, emit)
    finally:
        sink.close()


def _write_parquet(pairs, table, out, group_rows) -> int:
    """Row groups of at least ``group_rows`` rows (smaller batches are gathered: Arrow holds a row in
    a few hundred bytes, so the stream converts deliveries in small batches to keep few objects).

    The row groups are encoded by a second thread (:class:`_GroupWriter`; Arrow's Parquet writer
    works without the GIL) while this one makes the next: the same calls in the same order, so the
    same file, with at most two row groups waiting."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if out is None:
        raise ValueError("parquet needs an output file")
    n = 0
    target = os.fspath(out) if isinstance(out, (str, os.PathLike)) else out
    schema = arrow_schema(table)
    with pq.ParquetWriter(target, schema) as w:
        gw = _GroupWriter(w.write_table)
        try:
            pending: list = []
            rows = 0
            for batch, _ in pairs:
                if len(batch):
                    pending.append(batch)
                    rows += len(batch)
                if rows >= group_rows:
                    gw.put(pa.Table.from_batches(pending, schema=schema))
                    n += rows
                    pending, rows = [], 0
            if rows:
                gw.put(pa.Table.from_batches(pending, schema=schema))
                n += rows
        except BaseException:
            gw.close(drop=True)
            raise
        gw.close()
    return n


class _GroupWriter:
    """``write(table)`` called in order on a thread of its own; ``put`` waits while two tables are
    queued; an exception of ``write`` is raised again by the next ``put`` or by ``close``, which
    waits for the queue to empty (``drop``: after a failure of the caller, what waits is not
    written and nothing is raised)."""

    def __init__(self, write):
        import queue
        import threading

        self._write = write
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="parquet-row-groups", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            t = self._q.get()
            if t is None:
                return
            if self._error is None and not self._stop:
                try:
                    self._write(t)
                except BaseException as e:  # noqa: BLE001 (handed to the caller's thread)
                    self._error = e

    def put(self, table) -> None:
        if self._error is not None:
            raise self._error
        self._q.put(table)

    def close(self, drop: bool = False) -> None:
        self._stop = drop
        self._q.put(None)
        self._thread.join()
        if self._error is not None and not drop:
            raise self._error


def _write_csv(pairs, table, emit) -> int:
    n = 0
    emit(memoryview(csv_header(table).encode("utf-8")))
    for batch, _ in pairs:
        emit(csv_bytes(batch, table))
        n += len(batch)
    return n


def _write_jsonl(pairs, table, emit) -> int:
    n = 0
    for batch, raw in pairs:
        emit(jsonl_bytes(batch, table, raw))
        n += len(batch)
    return n


_TIME_TEXT = "%Y-%m-%d %H:%M:%S.%f"


def epoch_text(ns: int) -> str:
    """A time no typed column holds (outside the years 1677 to 2262 of a 64-bit count of
    nanoseconds), as the text tables write it: its epoch seconds, exactly."""
    return f"{decimal(ns, 9 if ns % 1000 else 6)} (epoch s, beyond the years a datetime holds)"


def _time_text(col):
    """A time column as UTC date-time text: microseconds, and the nanosecond digits of a time
    that has them."""
    text = col.dt.strftime(_TIME_TEXT)
    nano = col.dt.nanosecond.fillna(0).astype("int64")
    if nano.any():  # (a nanosecond capture's time: its nine digits)
        text = text.where(nano == 0, text + nano.map("{:03d}".format))
    return text


def raw_times(rows: list, table: str) -> dict:
    """{(row, column): nanoseconds} of the time cells outside the 64-bit range (null in the typed
    columns: the text table writes them as raw epoch seconds, as the report does)."""
    from amqp_dissect.results.tables import TIME_END, TIME_MIN

    names = [c.name for c in columns(table) if c.type == TIME]
    out = {}
    for i, r in enumerate(rows):
        for n in names:
            v = r.get(n)
            if type(v) is int and not TIME_MIN <= v < TIME_END:
                out[(i, n)] = v
    return out


def _write_text(df, table, f, raw: dict | None = None) -> int:
    """The human table: every column, times as UTC datetimes (``raw``: the cells outside the years
    a datetime holds, as their epoch seconds)."""
    import pandas as pd

    if not len(df):
        f.write("(no rows)\n")
        return 0
    for c in columns(table):
        if c.type == TIME:
            df[c.name] = _time_text(df[c.name])
    for (i, n), v in (raw or {}).items():
        if n in df.columns:
            col = df[n].astype(object)
            col.iloc[i] = epoch_text(v)
            df[n] = col
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250,
                           "display.max_colwidth", 40):
        f.write(df.to_string(index=False) + "\n")
    return len(df)
