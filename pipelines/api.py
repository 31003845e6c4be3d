"""The Python API: the tables of a capture as pandas DataFrames or Arrow batches.

The one façade of the package for notebooks and scripts, reached as ``amqp_dissect.analyze`` and
``amqp_dissect.iter_batches`` (the core package imports this module only when one is asked for)::

    import amqp_dissect

    t = amqp_dissect.analyze("capture.pcap")                   # every table
    t.deliveries, t.links, t["stalls"]                         # pandas DataFrames
    t = amqp_dissect.analyze(paths, tables=["deliveries"], columns=["link", "outcome", "latency"])
    for batch in amqp_dissect.iter_batches("big.pcap"):        # pyarrow RecordBatches, memory flat
        ...

The DataFrames are made from the Arrow batches the CLI writes as Parquet (the same cells, the
same schema), converted once with the registry's dtypes: pandas categoricals for the text columns
whose values repeat (the registry's ``categorical`` columns: connection, link, peers, address,
outcome ...; Arrow dictionaries, ``pd.CategoricalDtype``), Arrow-backed strings (``string[pyarrow]``)
for the other text columns, nullable integers (``Int64``, ``UInt64``), ``boolean``, ``float64`` and
``datetime64[ns, UTC]``: what ``pandas.read_parquet`` gives of the CLI's Parquet file when it is
asked for those columns as dictionaries (``read_dictionary=categorical_columns(table)``; the file
itself keeps plain string columns, which Parquet dictionary-encodes anyway, so that Spark and other
readers see text).

The API needs the ``pandas`` extra (pandas and pyarrow; ``iter_batches`` without ``pandas=True``
only pyarrow, the ``parquet`` extra): without it, :func:`analyze` and :func:`iter_batches` raise
:class:`MissingExtra` (an ``ImportError``) whose message names the extra, in one line.

The deliveries are made as the CLI's ``deliveries -T parquet`` makes them: column by column from
the folded deliveries, a small batch at a time as they become final, so the capture is read once
and what is held is the Arrow table being built (a list of chunks per column, see
:class:`ColumnChunks`), then converted to pandas a column at a time.  The other tables are the
analyzer's rows once the capture is read (all eight tables come from one reading).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Sequence

from amqp_dissect.results.schema import MESSAGE_TABLES, TABLES, names

from .keylogfile import open_keylog
from .runs.local import CaptureSource, DeliveryStream

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = ["analyze", "iter_batches", "Tables", "categorical_columns", "MissingExtra"]


class MissingExtra(ImportError):
    """The API was called in an install without the extra it needs (the light install: the CLI
    alone).  The message names the extra: ``amqp_dissect.analyze needs the pandas extra (pandas is
    not installed): pip install 'amqp-dissect[pandas]'``."""


def _need(what: str, extra: str, modules: tuple[str, ...]) -> None:
    from importlib.util import find_spec

    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        raise MissingExtra(f"amqp_dissect.{what} needs the {extra} extra ({' and '.join(missing)} "
                           f"{'is' if len(missing) == 1 else 'are'} not installed): "
                           f"pip install 'amqp-dissect[{extra}]'", name=missing[0])


def categorical_columns(table: str) -> list[str]:
    """The columns of ``table`` the DataFrames hold as pandas categoricals (the registry's
    ``categorical`` text columns), in the registry's order: also what to ask ``pandas.read_parquet``
    of the CLI's Parquet (``read_dictionary=``) for the same dtypes."""
    from amqp_dissect.results.schema import columns

    return [c.name for c in columns(table) if c.categorical]

# table -> the Analyzer's method giving its rows (the deliveries: DeliveryStream's batches)
_ROWS = {"connections": "connection_rows", "sessions": "session_rows", "links": "link_rows",
         "stalls": "stall_rows", "transactions": "transaction_rows", "violations": "violation_rows",
         "errors": "error_rows"}

# rows of the batches iter_batches gives (a few MB of Arrow for the deliveries table)
BATCH_ROWS = 65_536
# rows of the other tables converted at a time (as the CLI's write_table: the same batches)
ROW_CHUNK = 8192
# deliveries folded into Arrow at a time (as the CLI's stream: each waits as an object for its batch)
_STREAM_ROWS = 2048


class Tables(Mapping):
    """The tables of one analysis: ``t.deliveries`` or ``t["deliveries"]`` (a DataFrame), for the
    tables asked for (``list(t)``).  ``capture``: the inputs, first and last packet times,
    packets, bytes and duration; ``capture_errors``: the damage met reading them (a truncated
    tail ...), as ``"file: what"`` lines; :meth:`report`: the document of ``report --format
    json``; ``internal_errors``: failures of the analysis itself (bugs; the CLI exits 1 on
    them), each also a row of the violations table."""

    def __init__(self, frames: dict, source: CaptureSource, analyzer):
        self._frames = frames
        self._source = source
        self._analyzer = analyzer
        self.capture = source.capture_info()
        self.capture_errors = [f"{p}: {e}" for p, e in source.errors]
        # errors of the analysis itself (bugs: each is also an internal-error violation row)
        self.internal_errors = list(getattr(analyzer, "internal_errors", ()) or ())

    def __getitem__(self, table: str) -> "pd.DataFrame":
        return self._frames[table]

    def __iter__(self):
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    def __getattr__(self, table: str) -> "pd.DataFrame":
        frames = self.__dict__.get("_frames")
        if frames is not None and table in frames:
            return frames[table]
        if table in TABLES + MESSAGE_TABLES:
            raise AttributeError(f"the {table} table was not asked for (analyze(..., tables=[...]))")
        raise AttributeError(table)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._frames))

    def __repr__(self) -> str:
        cap = self.capture
        files = cap.get("files") or []
        where = (files[0] if len(files) == 1 else f"{len(files)} files") if files else "a capture"
        shape = ", ".join(f"{t} {len(df)}x{len(df.columns)}" for t, df in self._frames.items())
        return f"<Tables of {where}: {cap.get('packets')} packets; {shape}>"

    def report(self) -> dict:
        """The document of ``amqp-dissect report --format json`` for the same capture."""
        from amqp_dissect.results.report import build_report

        return build_report(self._analyzer, capture_errors=self.capture_errors)


def _tables(tables) -> list[str]:
    if tables is None:
        return list(TABLES)
    asked = [tables] if isinstance(tables, str) else list(tables)
    unknown = [t for t in asked if t not in TABLES + MESSAGE_TABLES]
    if unknown:
        raise ValueError(f"no table {', '.join(map(repr, unknown))}: the tables are "
                         f"{', '.join(TABLES + MESSAGE_TABLES)}")
    return list(dict.fromkeys(asked))


def _columns(columns, tables: list[str]) -> dict:
    """table -> the column names to keep, in the registry's order (None: every column).
    ``columns``: names (each table keeps those it has; a name no table asked for has is an
    error), or a mapping table -> names."""
    if columns is None:
        return {t: None for t in tables}
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(columns, Mapping):
        return _columns_by_table(columns, tables)
    want = list(columns)
    known = set().union(*(names(t) for t in tables))
    unknown = [c for c in want if c not in known]
    if unknown:
        raise ValueError(f"no column {', '.join(map(repr, unknown))} in the table(s) {', '.join(tables)}")
    return {t: [c for c in names(t) if c in set(want)] for t in tables}


def _columns_by_table(columns: Mapping, tables: list[str]) -> dict:
    """:func:`_columns` of a mapping table -> names (a table it does not name keeps every column)."""
    extra = [t for t in columns if t not in tables]
    if extra:
        raise ValueError(f"columns= names tables not asked for: {', '.join(map(repr, extra))}")
    return {t: _table_columns(t, columns.get(t)) for t in tables}


def _table_columns(table: str, want) -> list[str] | None:
    """The columns of ``table`` to keep, of the names ``want`` (a name or names; None: every column)."""
    if want is None:
        return None
    want = [want] if isinstance(want, str) else list(want)
    unknown = [c for c in want if c not in names(table)]
    if unknown:
        raise ValueError(f"the {table} table has no column {', '.join(map(repr, unknown))}")
    return [c for c in names(table) if c in set(want)]


@contextmanager
def _few_collections():
    """While a capture is read: the collector's thresholds the CLI runs with (an analysis makes
    millions of short-lived objects and keeps the open deliveries; collecting them every 700
    allocations costs about a tenth of the time), the caller's put back after."""
    before = gc.get_threshold()
    gc.set_threshold(20_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _source(paths, ports, keylog) -> CaptureSource:
    return CaptureSource(paths, ports=tuple(ports or ()), keylog=open_keylog(keylog))


def _wants_messages(keep, messages: bool = False) -> bool:
    """The messages are read (the deliveries' message columns; else they are null): asked with
    ``messages=True``, or ``columns=`` names one of them (``keep`` None: every column, not asked)."""
    from amqp_dissect.amqp.message import MESSAGE_COLUMNS

    return bool(messages) or (keep is not None and any(c in MESSAGE_COLUMNS for c in keep))


def _delivery_batches(source: CaptureSource, keep, stream: DeliveryStream | None = None, messages: bool = False):
    """The deliveries table of ``source`` as the CLI's stream makes it, small batches, the columns
    ``keep`` (None: all)."""
    stream = stream or DeliveryStream(source, messages=_wants_messages(keep, messages))
    for b in stream.batches(_STREAM_ROWS):
        yield b if keep is None else b.select(keep)


def _row_batches(rows, table: str, keep, batch_rows: int):
    """Rows of a table as record batches of ``batch_rows`` rows (the CLI's conversion)."""
    import itertools

    from amqp_dissect.results.tables import record_batch

    it = iter(rows)
    while True:
        chunk = list(itertools.islice(it, batch_rows))
        if not chunk:
            return
        b = record_batch(chunk, table)
        yield b if keep is None else b.select(keep)


def _schema(table: str, keep):
    from amqp_dissect.results.tables import arrow_schema

    import pyarrow as pa

    s = arrow_schema(table)
    if keep is None:
        return s
    return pa.schema([s.field(c) for c in keep], metadata=_kept_metadata(s, keep))


def _kept_metadata(schema, keep) -> dict:
    """The pandas metadata of ``schema`` for the columns ``keep`` (their dtypes in to_pandas)."""
    import json

    meta = json.loads(schema.metadata[b"pandas"])
    meta["columns"] = [c for c in meta["columns"] if c["name"] in set(keep)]
    return {b"pandas": json.dumps(meta).encode("utf-8")}


def _rebatch(batches, schema, batch_rows: int):
    """Small record batches gathered into batches of ``batch_rows`` rows (the last one shorter)."""
    import pyarrow as pa

    pending, n = [], 0
    for b in batches:
        if not len(b):
            continue
        pending.append(b)
        n += len(b)
        while n >= batch_rows:
            t = pa.Table.from_batches(pending, schema=schema)
            head = t.slice(0, batch_rows).combine_chunks().to_batches()
            yield head[0] if head else pa.RecordBatch.from_pylist([], schema=schema)
            rest = t.slice(batch_rows)
            pending, n = (rest.combine_chunks().to_batches() if len(rest) else []), len(rest)
    if n:
        yield pa.Table.from_batches(pending, schema=schema).combine_chunks().to_batches()[0]


def _encoded(t, table: str):
    """The table or batch ``t`` with the categorical columns of ``table`` as Arrow dictionaries (the
    others as they are), without pandas metadata (it names string[pyarrow] for every text column;
    the types_mapper gives the other dtypes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cats = set(categorical_columns(table))
    names = t.schema.names
    cols = [pc.dictionary_encode(t.column(i)) if n in cats and not pa.types.is_dictionary(t.schema.field(i).type)
            else t.column(i) for i, n in enumerate(names)]
    if isinstance(t, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(cols, names=names)
    return pa.Table.from_arrays(cols, names=names)


def _frame(table_or_batch, table: str) -> "pd.DataFrame":
    """Arrow to pandas with the registry's dtypes (results.tables.batch_frame's mapping; the
    categorical columns dictionary-encoded first, unless they are already), the Arrow buffers
    released as the columns are converted."""
    import pyarrow as pa

    from amqp_dissect.results.tables import pandas_types_mapper

    t = table_or_batch if isinstance(table_or_batch, pa.Table) else pa.Table.from_batches([table_or_batch])
    t = _encoded(t, table).unify_dictionaries()
    return t.to_pandas(types_mapper=pandas_types_mapper(), split_blocks=True, self_destruct=True)


class ColumnChunks:
    """A table gathered from record batches as one list of Arrow chunks per column (no batch is
    kept), converted to pandas a column at a time by :meth:`frame`.

    Memory: a column of a batch in which every cell is null is one all-null array of its type and
    length shared by every such column and batch (Arrow arrays are immutable; the deliveries table
    has some thirty columns null in every row when the messages are not read); :meth:`frame` frees
    each column's chunks once its pandas column is made, so the Arrow chunks and the DataFrame's
    columns are never both held whole (pyarrow's ``Table.to_pandas`` keeps every column's Arrow
    data until its last extension column is converted)."""

    def __init__(self, schema: "pa.Schema"):
        self.schema = schema
        self.chunks: list = [[] for _ in schema.names]  # per column: its Arrow chunks (None once converted)
        self._nulls: dict = {}  # (column type, length) -> the all-null array shared by the batches

    def _null(self, typ, n: int):
        arr = self._nulls.get((typ, n))
        if arr is None:
            import pyarrow as pa

            arr = self._nulls[(typ, n)] = pa.nulls(n, typ)
        return arr

    def add(self, batch: "pa.RecordBatch") -> None:
        """One batch of the schema's columns (its arrays kept, the batch itself not)."""
        n = len(batch)
        if not n:
            return
        for held, col in zip(self.chunks, batch.columns):
            held.append(self._null(col.type, n) if col.null_count == n else col)

    def frame(self) -> "pd.DataFrame":
        """The DataFrame (the registry's dtypes, as :func:`_frame` gives them); the chunks are
        given up as their columns are made (a second call is an error)."""
        import pandas as pd
        import pyarrow as pa

        from amqp_dissect.results.tables import pandas_types_mapper

        mapper = pandas_types_mapper()
        cols = {}
        for i, field in enumerate(self.schema):
            held, self.chunks[i] = self.chunks[i], None
            if pa.types.is_string(field.type):
                cols[field.name] = pd.Series(self._text(held, mapper(field.type)), name=field.name, copy=False)
                continue
            one = pa.Table.from_arrays([pa.chunked_array(held, field.type)], names=[field.name])
            del held
            if pa.types.is_dictionary(field.type):
                one = one.unify_dictionaries()
            cols[field.name] = one.to_pandas(types_mapper=mapper, split_blocks=True,
                                             self_destruct=True)[field.name]
            del one
        self._nulls.clear()
        return pd.DataFrame(cols, columns=self.schema.names, copy=False)

    def _text(self, held: list, dtype):
        """A text column's pandas array (``string[pyarrow]``), its chunks given as the Arrow type
        that dtype holds (``large_string`` since pandas 2.2, which casts what it is given): cast
        here one by one, each shared all-null chunk cast once for every column that has it."""
        import pyarrow as pa

        storage = pa.array(dtype.__from_arrow__(pa.array([], pa.string()))).type
        for j, chunk in enumerate(held):
            if chunk.type != storage:
                shared = chunk is self._nulls.get((chunk.type, len(chunk)))
                held[j] = self._null(storage, len(chunk)) if shared else chunk.cast(storage)
        return dtype.__from_arrow__(pa.chunked_array(held, storage))


def iter_batches(paths, table: str = "deliveries", *, ports: Iterable[int] = (), keylog=None,
                 columns: Sequence[str] | None = None, batch_rows: int = BATCH_ROWS,
                 pandas: bool = False, messages: bool = False) -> Iterator["pa.RecordBatch | pd.DataFrame"]:
    """One table of a capture as a stream of pyarrow RecordBatches of ``batch_rows`` rows (the last
    one shorter; none for an empty table), or, with ``pandas=True``, DataFrame chunks of the
    same rows and the dtypes of :func:`analyze`.

    The deliveries come as they become final (the open ones at the end), so memory stays flat
    however long the capture: a batch in Arrow and the deliveries still open.  The other tables
    are known once the capture is read, then given in batches.  ``paths``, ``ports``,
    ``keylog``, ``messages``: as :func:`analyze`; ``columns``: the column names to keep."""
    if pandas:
        _need("iter_batches", "pandas", ("pandas", "pyarrow"))
    else:
        _need("iter_batches", "parquet", ("pyarrow",))
    if table not in TABLES + MESSAGE_TABLES:
        raise ValueError(f"no table {table!r}: the tables are {', '.join(TABLES + MESSAGE_TABLES)}")
    if batch_rows < 1:
        raise ValueError("batch_rows must be at least 1")
    keep = _columns(columns, [table])[table]
    source = _source(paths, ports, keylog)
    return _iter(source, table, keep, batch_rows, pandas, messages)


def _iter(source, table, keep, batch_rows, pandas, messages=False):
    schema = _schema(table, keep)
    if table == "requests":  # (the message fields read: only when asked for)
        from amqp_dissect.pipelines.runs.requests import request_table

        with _few_collections():
            rows, _ = request_table(source)
        small = _row_batches(rows, table, keep, batch_rows)
    elif table == "messages":
        from amqp_dissect.pipelines.runs.messages import message_table

        with _few_collections():
            rows = message_table(source)[0]
        small = _row_batches(rows, table, keep, batch_rows)
    elif table == "deliveries":
        small = _delivery_batches(source, keep, messages=messages)
    else:
        from amqp_dissect.pipelines.runs.local import run_analysis

        with _few_collections():
            an = run_analysis(source, rows=False).analyzer
        method = _ROWS[table]
        rows = (getattr(an, "iter_" + method, None) or getattr(an, method))()
        small = _row_batches(rows, table, keep, batch_rows)
    for b in _rebatch(small, schema, batch_rows):
        yield _frame(b, table) if pandas else b


def analyze(paths, *, ports: Iterable[int] = (), keylog=None, tables: str | Sequence[str] | None = None,
            columns: Sequence[str] | Mapping[str, Sequence[str]] | None = None, messages: bool = False) -> Tables:
    """The tables of a capture as pandas DataFrames, from one reading of it.

    ``paths``: a path, an open binary file object (``io.BytesIO``, a pipe: nothing seeks),
    ``"-"`` for standard input, or a list of these (several files are one capture, merged in time
    order, as the CLI reads them).  ``ports``: more TCP ports to decode as AMQP (``--port``).
    ``keylog``: a TLS key log, as a path (``str`` or ``os.PathLike``, read as the CLI's
    ``--keylog`` reads it) or a :class:`~amqp_dissect.capture.keylog.KeyLog`
    (``KeyLog.from_text(text)`` for key log text at hand).  ``tables``: a table name or names
    (default: all eight, :data:`amqp_dissect.results.schema.TABLES`; ``"messages"`` and
    ``"requests"`` are made only when asked for: they read the messages).  ``columns``: the column
    names to keep (each table keeps those it has), or a mapping table -> names.  ``messages``:
    read every delivery's message, for the deliveries' message columns (message_id, subject,
    application_properties, ...: null without it, unless ``columns`` names one of them; reading
    them costs several times the analysis).

    Returns :class:`Tables`.  A capture that cannot be opened or read raises ``OSError`` or
    :class:`~amqp_dissect.errors.CaptureError`; damage found partway is in ``capture_errors``.
    Without pandas or pyarrow installed: :class:`MissingExtra` (the pandas extra)."""
    _need("analyze", "pandas", ("pandas", "pyarrow"))
    import pyarrow as pa

    from amqp_dissect.pipelines.runs.local import run_analysis

    want = _tables(tables)
    keep = _columns(columns, want)
    source = _source(paths, ports, keylog)
    frames: dict = {}
    extra: dict = {}  # the message tables' rows
    if any(t in want for t in MESSAGE_TABLES):  # (one reading: the deliveries with their message fields, then matched)
        from amqp_dissect.pipelines.runs.messages import message_tables_of_stream
        from amqp_dissect.pipelines.runs.requests import message_stream

        stream = message_stream(source)
        with _few_collections():
            extra, rows_of = message_tables_of_stream(stream, want, keep_deliveries="deliveries" in want)
        an = stream.analyzer
        if "deliveries" in want:
            batches = list(_row_batches(rows_of, "deliveries", keep["deliveries"], ROW_CHUNK))
            frames["deliveries"] = _frame(pa.Table.from_batches(batches, schema=_schema("deliveries",
                                                                                       keep["deliveries"])),
                                          "deliveries")
    elif "deliveries" in want:
        stream = DeliveryStream(source, messages=_wants_messages(keep["deliveries"], messages))
        # the small batches kept as column chunks (each one's categorical columns dictionary-encoded as
        # it comes, its all-null columns one shared array), then converted a column at a time, each
        # column's chunks freed once converted: the peak is the DataFrame's columns and one column
        empty = _encoded(_schema("deliveries", keep["deliveries"]).empty_table(), "deliveries")
        chunks = ColumnChunks(empty.schema)
        with _few_collections():
            for b in _delivery_batches(source, keep["deliveries"], stream):
                chunks.add(_encoded(b, "deliveries"))
        frames["deliveries"] = chunks.frame()
        del chunks
        an = stream.analyzer
    else:
        with _few_collections():
            an = run_analysis(source, rows=False).analyzer
    for t in want:
        if t == "deliveries":
            continue
        rows = extra[t] if t in extra else getattr(an, _ROWS[t])()
        batches = list(_row_batches(rows, t, keep[t], ROW_CHUNK))
        frames[t] = _frame(pa.Table.from_batches(batches, schema=_schema(t, keep[t])), t)
    frames = {t: frames[t] for t in want}
    return Tables(frames, source, an)
