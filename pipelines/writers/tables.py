"""Writing tables to files: csv, jsonl and parquet streamed in batches, or the text table.

With pyarrow (the ``parquet`` extra) and numpy, csv and jsonl are made column by column by Arrow
compute (:mod:`amqp_dissect.results.tables`' conversions: registry types, UTC times, csv / jsonl
text) from Arrow batches; without them (the light install: the CLI alone), by the standard
library from the row dicts (:func:`write_rows`), the same bytes.  Parquet needs pyarrow.  This
module only opens files and writes batches, so memory stays flat whatever the number of rows.
Neither pandas nor a dict per row is on the csv / jsonl / parquet path of :func:`write_batches`;
:func:`write_table` takes row dicts (the small tables).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Iterable

from amqp_dissect.results.schema import BOOL, FLOAT, INT, JSON, STRING, TIME, UINT64, columns
from amqp_dissect.times import decimal

FORMATS = ("table", "csv", "jsonl", "parquet")  # (results.tables.FORMATS, without importing pyarrow)


def arrow_ready() -> bool:
    """Whether the Arrow writers can run: pyarrow (the parquet extra) and numpy installed (found,
    not imported).  Without them csv and jsonl are written by the standard library."""
    from importlib.util import find_spec

    return find_spec("pyarrow") is not None and find_spec("numpy") is not None


# rows converted and written at a time (and the Parquet row group size): one batch (its cells,
# Arrow arrays and text) is the writer's whole memory, a few MB for the deliveries table
BATCH_ROWS = 8192
# deliveries converted at a time by the CLI's stream (DeliveryStream.batches): each folded delivery
# object waits for its batch, about 1.5 KB apiece
STREAM_ROWS = 2048
# row dicts converted to Arrow at a time by write_table: a row dict of a wide table holds 3 to 5 KB
# (the connections table's 79 cells), so a batch's 8192 of them would be 30 to 40 MB; the
# converted parts are joined again into the batch of BATCH_ROWS rows the writers take
ROW_DICTS = 512
# rows a batch of csv / jsonl text is made of by write_table: each row's text depends on that row
# alone, and Arrow's intermediate arrays of a batch of 8192 rows of a wide table (a string array per
# column, then their join) are about 25 MB more than of 1024 (parquet keeps BATCH_ROWS: its row groups)
TEXT_ROWS = 1024
# rows of each record batch a Parquet row group of write_table is gathered from: the row group is
# written as these chunks, not joined into one (a join is a second copy of the group); the file is
# the one of the joined batch (tests/pipelines/test_table_memory.py, also with pages cut within a
# column chunk)
PARQUET_PART_ROWS = ROW_DICTS


#: the environment variable by which Arrow picks its default allocator when it first needs one
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


@contextmanager
def lean_arrow():
    """Within: pyarrow allocates with the system allocator and behaves as if pandas were not
    installed (unless pandas is already loaded).  The CLI's table commands write in here.
    pyarrow is not imported here: a table whose first rows come at the end of an analysis loads
    it then, after the analysis' peak of memory rather than on top of it (about 60 MB with
    numpy); if it is first imported within, ``ARROW_DEFAULT_MEMORY_POOL`` (set here, and
    restored on leaving) makes the system allocator its default, which it stays.

    - The first ``pyarrow.array()`` call of a process imports pandas (if it is installed) only to
      ask whether its argument is a pandas object; the table writers never pass one, and that
      import costs about 0.3 s and 40 MB, more than writing a table.  pyarrow takes the failed
      import as "no pandas" for that probe; a later pandas conversion (``to_pandas``) imports it
      then.  A library caller that hands pandas objects to ``pyarrow.array`` afterwards should not
      use this.
    - pyarrow's default allocator keeps freed batches for reuse: about 15 MB more peak memory
      when one batch after another is built and dropped."""
    pool = None
    env = os.environ.get(ARROW_POOL_ENV)
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pool = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())
    else:
        os.environ[ARROW_POOL_ENV] = "system"
    blocker = None
    if "pandas" not in sys.modules:
        blocker = _NoPandas()
        sys.meta_path.insert(0, blocker)
    try:
        yield
    finally:
        if blocker is not None:
            sys.meta_path.remove(blocker)
        if pool is not None:
            pa.set_memory_pool(pool)
        elif env is None:
            os.environ.pop(ARROW_POOL_ENV, None)
        else:
            os.environ[ARROW_POOL_ENV] = env


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
        del chunk  # (the next chunk is made without this one)


def pulled(items: Iterable):
    """``items`` as an iterator whose first item is made already: the work that makes it (an
    analysis up to its first rows, or to its end when there are none) is done before the caller
    goes on, e.g. before it loads pyarrow, which then does not add to that work's peak of memory."""
    it = iter(items)
    first = next(it, _NONE)
    return it if first is _NONE else itertools.chain((first,), it)


_NONE = object()


def converted(rows: Iterable[dict], table: str, batch_rows: int, json_cols: list, dicts: int = ROW_DICTS,
              cols: list[str] | None = None):
    """(record batch of ``batch_rows`` rows, raw json-column cells or None) of the row dicts,
    converted ``dicts`` rows at a time: at most ``dicts`` row dicts are held at once (the caller's
    iterator makes them as they are asked for), not a batch of them.  The batches are those one
    conversion of ``batch_rows`` rows makes (the same cells, one chunk per column).  ``cols``: only
    these columns, in this order (``--columns``): each part is cut to them as it is made, so the
    other columns are never held for a whole batch."""
    import pyarrow as pa

    from amqp_dissect.results.tables import arrow_schema, record_batch

    schema = arrow_schema(table)
    picked = None
    if cols is not None:  # (no pandas metadata: it lists every column)
        picked = [schema.get_field_index(c) for c in cols]
        schema = pa.schema([schema.field(c) for c in cols])
    it = iter(rows)
    while True:
        parts: list = []
        raw: dict | None = {n: [] for n in json_cols} if json_cols else None
        held = 0
        while held < batch_rows:
            chunk = list(itertools.islice(it, min(dicts, batch_rows - held)))
            if not chunk:
                break
            part = record_batch(chunk, table)
            if picked is not None:
                part = pa.RecordBatch.from_arrays([part.column(i) for i in picked], schema=schema)
            parts.append(part)
            if raw is not None:
                for n in json_cols:
                    raw[n].extend(r.get(n) for r in chunk)
            held += len(chunk)
            del chunk, part
        if not parts:
            return
        batch = _joined_batch(parts, schema, pa)
        parts.clear()  # (the parts are not held beside the batch while it is written)
        yield batch, raw
        del batch
        if held < batch_rows:
            return


def _joined_batch(parts: list, schema, pa):
    """Record batches of one schema as one batch (one chunk per column)."""
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts, schema=schema).combine_chunks().to_batches()[0]


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
    ``csv``, ``jsonl`` or ``parquet`` converted ``batch_rows`` rows at a time (csv and jsonl: at
    most TEXT_ROWS; memory stays flat whatever the number of rows), or ``table`` (the CLI's text table, built whole).
    Returns the number of rows written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "table":
        from amqp_dissect.results.tables import to_frame

        sink = _Sink(out, binary=False)
        try:
            rows = rows if isinstance(rows, list) else list(rows)
            return _write_text(to_frame(rows, table), table, sink.f, raw_times(rows, table))
        finally:
            sink.close()
    if fmt != "parquet" and not arrow_ready():
        return write_rows(rows, table, fmt, out)
    if fmt == "parquet":  # (row groups of batch_rows rows, gathered from parts)
        parts = record_parts(rows, table, PARQUET_PART_ROWS, batch_rows)
        return _write_parquet(((p, None) for p in parts), table, out, batch_rows, threaded=False)
    json_cols = [c.name for c in columns(table) if c.type == JSON] if fmt == "jsonl" else []
    return _write(converted(rows, table, min(batch_rows, TEXT_ROWS), json_cols), table, fmt, out, batch_rows)


def record_parts(rows: Iterable[dict], table: str, part_rows: int, group_rows: int):
    """Record batches of at most ``part_rows`` of the row dicts, cut at every ``group_rows`` rows
    (a row group is whole parts), each made once its rows are: at most ``part_rows`` row dicts are
    held, and none while the caller has the batch."""
    from amqp_dissect.results.tables import record_batch

    it = iter(rows)
    in_group = 0
    while True:
        chunk = list(itertools.islice(it, min(part_rows, group_rows - in_group)))
        if not chunk:
            return
        in_group = (in_group + len(chunk)) % group_rows
        part = record_batch(chunk, table)
        del chunk  # (the dicts go before the part is written)
        yield part
        del part


def write_batches(batches: Iterable, table: str, fmt: str, out=None, group_rows: int = BATCH_ROWS) -> int:
    """Write a table given as Arrow record batches of its registry schema (e.g.
    :meth:`amqp_dissect.pipelines.runs.local.DeliveryStream.batches`) to ``out`` as ``fmt``, one batch
    at a time (``table``: all of them, as one text table; ``parquet``: gathered into row groups of
    at least ``group_rows`` rows).  Returns the number of rows written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "table":
        import pyarrow as pa

        from amqp_dissect.results.tables import arrow_schema, batch_frame

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


def _write_parquet(pairs, table, out, group_rows, threaded: bool = True) -> int:
    """Row groups of at least ``group_rows`` rows (smaller batches are gathered: Arrow holds a row in
    a few hundred bytes, so the stream converts deliveries in small batches to keep few objects).

    The row groups are encoded by a second thread (:class:`_GroupWriter`; Arrow's Parquet writer
    works without the GIL) while this one makes the next: the same calls in the same order, so the
    same file, with at most one row group waiting (a row group waits as a table of its rows: about
    5 MB of the connections table's 8,192).  pyarrow is loaded once the first batch is made
    (:func:`pulled`).  ``threaded=False``: each row group written by this thread once its rows
    are made, so one row group is held, not up to three (the one written, the one waiting, the one
    being made): for batches that are costly to hold, as those of the row dicts of
    :func:`write_table` (the connections table's 79 columns)."""
    if out is None:
        raise ValueError("parquet needs an output file")
    pairs = pulled(pairs)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from amqp_dissect.results.tables import arrow_schema

    n = 0
    target = os.fspath(out) if isinstance(out, (str, os.PathLike)) else out
    schema = arrow_schema(table)
    with pq.ParquetWriter(target, schema) as w:
        gw = _GroupWriter(w.write_table) if threaded else _InlineGroups(w.write_table)
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


class _InlineGroups:
    """:class:`_GroupWriter`'s calls, each ``write(table)`` made at once by the calling thread."""

    def __init__(self, write):
        self.put = write

    def close(self, drop: bool = False) -> None:
        """(nothing waits)"""


class _GroupWriter:
    """``write(table)`` called in order on a thread of its own; ``put`` waits while a table is
    queued; an exception of ``write`` is raised again by the next ``put`` or by ``close``, which
    waits for the queue to empty (``drop``: after a failure of the caller, what waits is not
    written and nothing is raised)."""

    def __init__(self, write):
        import queue
        import threading

        self._write = write
        self._q: queue.Queue = queue.Queue(maxsize=1)
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
    pairs = pulled(pairs)  # (pyarrow loaded after the first batch is made)
    from amqp_dissect.results.tables import csv_bytes, csv_header

    n = 0
    emit(memoryview(csv_header(table).encode("utf-8")))
    for batch, _ in pairs:
        emit(csv_bytes(batch, table))
        n += len(batch)
    return n


def _write_jsonl(pairs, table, emit) -> int:
    pairs = pulled(pairs)  # (pyarrow loaded after the first batch is made)
    from amqp_dissect.results.tables import jsonl_bytes

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


def time_column_text(col):
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
            df[c.name] = time_column_text(df[c.name])
    for (i, n), v in (raw or {}).items():
        if n in df.columns:
            col = df[n].astype(object)
            col.iloc[i] = epoch_text(v)
            df[n] = col
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 250,
                           "display.max_colwidth", 40):
        f.write(df.to_string(index=False) + "\n")
    return len(df)


# --------------------------------------------------------------------------- without Arrow
#
# The cells of the row dicts as the typed conversion holds them (results.tables: record_batch, then
# csv_cells / json_cells, or the text table's), one cell at a time by the standard library: what the
# light install (no pyarrow, no numpy, no pandas) writes.  tests/pipelines/test_write_plain.py checks
# them against the Arrow writers, byte for byte.

# the times a table holds (results.tables.TIME_MIN, TIME_END: a 64-bit count of nanoseconds)
TIME_MIN = -(1 << 63) + 1
TIME_END = 1 << 63
_NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INT_RANGE = {INT: (-(1 << 63), (1 << 63) - 1), UINT64: (0, (1 << 64) - 1)}


def _int_cell(v, typ):
    """The integer a cell of an integer column holds, or None (results.tables.fits)."""
    if type(v) is int or isinstance(v, int) and not isinstance(v, bool):
        lo, hi = _INT_RANGE[typ]
        return v if lo <= v <= hi else None
    return None


def _float_cell(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = float(v)
        return None if v != v else v  # (NaN is null)
    return None


def _time_ns(v):
    """Nanoseconds since the epoch of a time cell in the years a table holds, else None."""
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        v = (v - _EPOCH_UTC) // timedelta(microseconds=1) * 1000
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    return v if TIME_MIN <= v < TIME_END else None


def _string_cell(v):
    """A string column's cell: text, or a cell of another type as text (a malformed field)."""
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, default=str) if isinstance(v, (list, dict)) else str(v)


def _json_text(v):
    return None if v is None else json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)


def _clock(ns: int, sep: str) -> str:
    """UTC date and time of ``ns`` with microseconds, and nanoseconds when it has them."""
    sec, frac = divmod(ns, _NS)
    t = _EPOCH + timedelta(seconds=sec)
    text = (f"{t.year:04d}-{t.month:02d}-{t.day:02d}{sep}{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
            f".{frac // 1000:06d}")
    return text + f"{frac % 1000:03d}" if frac % 1000 else text


def iso_time(ns: int) -> str:
    """A time as csv and jsonl write it (results.tables.iso_times): ``2024-05-01T12:00:00.123456Z``."""
    return _clock(ns, "T") + "Z"


def text_time(ns: int) -> str:
    """A time as the text table writes it: ``2024-05-01 12:00:00.123456``."""
    return _clock(ns, " ")


def _int_text(typ: str):
    """cell -> the text of an integer column's cell ("" for null), in the text table and in csv."""
    def cell(v):
        i = _int_cell(v, typ)
        return "" if i is None else str(i)
    return cell


def _bool_text(v) -> str:
    """A boolean cell's text ("" for null), in the text table and in csv."""
    return ("True" if v else "False") if isinstance(v, bool) else ""


def text_cell(typ: str):
    """cell -> its text in the text table, for a column of registry type ``typ`` ("" for null;
    a time outside the years a datetime holds as its epoch seconds)."""
    if typ == STRING:
        return lambda v: _string_cell(v) or ""
    if typ == JSON:
        return lambda v: _json_text(v) or ""
    if typ in (INT, UINT64):
        cell = _int_text(typ)
    elif typ == BOOL:
        cell = _bool_text
    elif typ == FLOAT:
        def cell(v):
            f = _float_cell(v)
            return "" if f is None else f"{f:.6f}"
    elif typ == TIME:
        def cell(v):
            if type(v) is int and not TIME_MIN <= v < TIME_END:
                return epoch_text(v)
            ns = _time_ns(v)
            return "" if ns is None else text_time(ns)
    else:
        raise ValueError(f"no column type {typ!r}")
    return cell


def _csv_quoted(s):
    if s is None:
        return ""
    if "," in s or '"' in s or "\n" in s:
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_cell(typ: str):
    """cell -> its CSV field (results.tables.csv_cells of the typed cell)."""
    if typ == STRING:
        return lambda v: _csv_quoted(_string_cell(v))
    if typ == JSON:
        return lambda v: _csv_quoted(_json_text(v))
    if typ in (INT, UINT64):
        cell = _int_text(typ)
    elif typ == BOOL:
        cell = _bool_text
    elif typ == FLOAT:
        def cell(v):
            f = _float_cell(v)
            return "" if f is None else repr(f)
    elif typ == TIME:
        def cell(v):
            ns = _time_ns(v)
            return "" if ns is None else iso_time(ns)
    else:
        raise ValueError(f"no column type {typ!r}")
    return cell


_JSON_STR = json.encoder.encode_basestring  # (a JSON string as json.dumps writes it with ensure_ascii=False)


def json_cell(typ: str, raw: bool = False):
    """cell -> its JSON value (results.tables.json_cells of the typed cell); ``raw``: a ``json``
    column's cell written as the JSON value it is (key order kept), as write_table writes it,
    rather than its text (sorted keys)."""
    if typ == STRING:
        def cell(v):
            s = _string_cell(v)
            return "null" if s is None else _JSON_STR(s)
    elif typ == JSON:
        if raw:
            return json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=str).encode

        def cell(v):
            s = _json_text(v)
            return "null" if s is None else s
    elif typ in (INT, UINT64):
        def cell(v):
            i = _int_cell(v, typ)
            return "null" if i is None else str(i)
    elif typ == BOOL:
        def cell(v):
            return ("true" if v else "false") if isinstance(v, bool) else "null"
    elif typ == FLOAT:
        def cell(v):
            f = _float_cell(v)
            return "null" if f is None or f in (float("inf"), float("-inf")) else repr(f)
    elif typ == TIME:
        def cell(v):
            ns = _time_ns(v)
            return "null" if ns is None else '"' + iso_time(ns) + '"'
    else:
        raise ValueError(f"no column type {typ!r}")
    return cell


def write_rows(rows: Iterable[dict], table: str, fmt: str, out=None, cols: list[str] | None = None,
               json_raw: bool = True, batch_rows: int = ROW_DICTS) -> int:
    """Write a table's row dicts as ``csv`` or ``jsonl`` with the standard library (no pyarrow):
    the bytes the Arrow writers make of the same rows (:func:`write_table`; ``cols``: the chosen
    columns, in their order, as ``--columns`` writes them, whose ``json`` cells are their text,
    not raw values).  ``batch_rows`` rows are written at a time.  Returns the number of rows."""
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"format must be csv or jsonl here, not {fmt!r}")
    header, lines = _row_text(table, fmt, cols, json_raw)
    if out is None:
        sys.stdout.flush()
    sink, write = _text_sink(out)
    n = 0
    try:
        if header is not None:
            write(header)
        for chunk in _chunks(rows, batch_rows):
            write(lines(chunk))
            n += len(chunk)
    finally:
        if sink is not None:
            sink.close()
    return n


def _row_text(table: str, fmt: str, cols: list[str] | None, json_raw: bool):
    """The header line (csv; None for jsonl) and the function that makes the text of a chunk of
    rows, for :func:`write_rows`."""
    types = {c.name: c.type for c in columns(table)}
    names = list(cols) if cols is not None else list(types)
    if fmt == "csv":
        funcs = [(n, csv_cell(types[n])) for n in names]

        def csv_lines(chunk) -> str:
            return "".join([",".join([f(r.get(c)) for c, f in funcs]) + "\n" for r in chunk])
        return ",".join(names) + "\n", csv_lines
    raw = json_raw and cols is None
    enc = json.JSONEncoder(ensure_ascii=False).encode
    funcs = [(n, json_cell(types[n], raw)) for n in names]
    keys = ["{" + enc(names[0]) + ": "] + [", " + enc(n) + ": " for n in names[1:]] if names else []

    def jsonl_lines(chunk) -> str:
        return "".join(["".join([k + f(r.get(c)) for k, (c, f) in zip(keys, funcs)]) + "}\n" for r in chunk])
    return None, jsonl_lines


def _text_sink(out):
    """Where :func:`write_rows` writes text: (the sink it opened and closes, or None; its write)."""
    if out is None or isinstance(out, (str, os.PathLike)) or isinstance(out, io.TextIOBase):
        sink = _Sink(out, binary=False)
        return sink, sink.f.write

    def write(text, f=out):  # a binary file object
        f.write(text.encode("utf-8"))
    return None, write
