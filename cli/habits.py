"""What the CLI shares with tshark's habits: inputs (``-``, ``-r``, several files), time formats
(``-t``), output paths checked before the work starts, the narrow text tables."""

from __future__ import annotations

import datetime as _dt
import os
from enum import Enum

from .common import EXIT_OPEN, EXIT_USAGE, Fail

STDIN = "-"


def capture_inputs(args: list[str] | None, read: list[str] | None) -> list[str]:
    """The captures of a command: the ``-r FILE`` ones, then the arguments, in order.  ``-`` is
    standard input (once)."""
    inputs = list(read or []) + list(args or [])
    if not inputs:
        raise Fail(EXIT_USAGE, "no capture given: name a file (or several, read as one capture), "
                               "or - for standard input")
    if inputs.count(STDIN) > 1:
        raise Fail(EXIT_USAGE, "standard input (-) can be read only once")
    for p in inputs:
        if p != STDIN and os.path.isdir(p):
            raise Fail(EXIT_OPEN, f"{p}: is a directory, not a capture file")
    return inputs


def check_output(path) -> None:
    """A file the command will write: its directory must exist and be writable, and it must
    not be a directory; else one line and exit 3 before any work."""
    if path is None:
        return
    p = os.fspath(path)
    if os.path.isdir(p):
        raise Fail(EXIT_OPEN, f"{p}: cannot write: is a directory")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        raise Fail(EXIT_OPEN, f"{p}: cannot write: no such directory {parent}")
    if os.path.exists(p) and not os.access(p, os.W_OK) or not os.access(parent, os.W_OK | os.X_OK) \
            and not os.path.exists(p):
        raise Fail(EXIT_OPEN, f"{p}: cannot write: permission denied")


def write_failure(path, e: OSError) -> Fail:
    """An output that failed while written: one line, exit 3."""
    return Fail(EXIT_OPEN, f"{os.fspath(path) if path is not None else 'output'}: cannot write: {e.strerror or e}")


# --------------------------------------------------------------------------- -t


class TimeFormat(str, Enum):
    """tshark's ``-t`` formats."""

    a = "a"  # absolute local time of day
    ad = "ad"  # absolute local date and time
    d = "d"  # delta from the previous captured packet
    dd = "dd"  # delta from the previous displayed line
    e = "e"  # epoch seconds
    r = "r"  # relative to the first packet of the capture (default)
    u = "u"  # UTC time of day
    ud = "ud"  # UTC date and time


_NS = 1_000_000_000


def _seconds_text(ns: int, digits: int) -> str:
    """``ns`` nanoseconds as seconds with ``digits`` decimals (truncated, as tshark does)."""
    sign = "-" if ns < 0 else ""
    sec, frac = divmod(abs(ns), _NS)
    if digits <= 0:
        return f"{sign}{sec}"
    return f"{sign}{sec}.{frac // 10 ** (9 - digits):0{digits}d}"


def _clock(ns: int, digits: int, utc: bool, date: bool) -> str:
    sec, frac = divmod(ns, _NS)
    fmt = "%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S"
    try:
        t = _dt.datetime.fromtimestamp(sec, _dt.timezone.utc) if utc else _dt.datetime.fromtimestamp(sec)
        text = t.strftime(fmt)
    except (OverflowError, ValueError, OSError):
        return _seconds_text(ns, digits)
    return f"{text}.{frac // 10 ** (9 - digits):0{digits}d}" if digits > 0 else text


class TimeColumn:
    """The time column of ``-t MODE`` as tshark prints it: ``column(ts, packet)``.

    Times are whole nanoseconds, printed with the digits of the packet's time resolution (9
    for nanosecond pcap and pcapng interfaces with if_tsresol 10^-9, 6 for microsecond ones,
    3 for milliseconds ...): the reader keeps each recent record's resolution
    (CaptureSource.exact_times); every ``ts`` is integer nanoseconds already."""

    def __init__(self, mode: "TimeFormat", source):
        self.mode = mode
        self.source = source
        self.last = None  # -t dd: the time of the previous line
        self.width = None

    def exact(self, ts, packet) -> tuple[int, int]:
        got = self.source.exact_time(packet)
        if got is not None:
            return got
        return ts, getattr(self.source, "digits", 6)

    def first(self) -> tuple[int, int]:
        src = self.source
        if src.first_exact is not None:
            return src.first_exact
        return (src.first_ts or 0), getattr(src, "digits", 6)

    def __call__(self, ts, packet=None) -> str:
        ns, digits = self.exact(ts, packet)
        mode = self.mode
        if mode is TimeFormat.e:
            return _seconds_text(ns, digits)
        if mode in (TimeFormat.a, TimeFormat.ad, TimeFormat.u, TimeFormat.ud):
            return _clock(ns, digits, mode in (TimeFormat.u, TimeFormat.ud), mode in (TimeFormat.ad, TimeFormat.ud))
        if mode is TimeFormat.r:
            delta = ns - self.first()[0]
        elif mode is TimeFormat.d:
            prev = self.source.exact_time(packet - 1) if packet is not None else None
            if prev is not None:
                delta = ns - prev[0]
            else:
                pts = self.source.prev_ts
                delta = ns - pts if pts is not None else 0
        else:  # dd
            delta = ns - self.last if self.last is not None else 0
            self.last = ns
        return "%*s" % (5 + digits, _seconds_text(delta, digits))


def time_text(mode: TimeFormat, source):
    """The time column's text as a function ``(ts, packet)`` for ``-t mode``; None for ``r`` on
    microsecond captures (the renderer's own fast path: seconds since the capture's first
    packet).  ``source``: the CaptureSource, which keeps the records' exact times (and, for
    ``d``, the previous record's time) from now on.  Call :func:`resolve_time_text` once the
    first record is read."""
    source.exact_times = True
    if mode is TimeFormat.d:
        source.track_prev = True
    return TimeColumn(mode, source)


def resolve_time_text(tt, source):
    """Once reading started: None (the fast path) for ``-t r`` when every input so far is a
    microsecond capture and there is one input, else ``tt``."""
    if isinstance(tt, TimeColumn) and tt.mode is TimeFormat.r and not source.fine and len(source.inputs) == 1:
        return None
    return tt


# --------------------------------------------------------------------------- text tables

#: the columns ``--format table`` shows by default (``--columns`` picks others, ``all`` every one)
DEFAULT_COLUMNS = {
    "connections": ("connection", "container_id_client", "container_id_server", "open_time", "close_time",
                    "closed_by", "close_error", "deliveries"),
    "sessions": ("connection", "session", "channel_client", "channel_server", "begin_time", "end_time",
                 "deliveries", "end_error"),
    "links": ("connection", "name", "handle", "address", "sender", "deliveries", "accepted", "latency_p50",
              "latency_max", "stalls"),
    "deliveries": ("connection", "link", "delivery_id", "first_time", "frames", "message_size", "outcome",
                   "settlement_latency"),
    "stalls": ("connection", "link", "kind", "start", "duration", "start_packet", "end_packet", "waiting", "idle"),
    "transactions": ("connection", "txn_id", "state", "declare_time", "discharge_time", "deliveries"),
    "violations": ("packet", "time", "connection", "channel", "kind", "message"),
    "errors": ("time", "connection", "scope", "link", "condition", "description"),
    "messages": ("first_time", "address", "message_id", "state", "publishes", "consumers", "deliveries",
                 "residence", "end_to_end"),
    "requests": ("request_time", "request_address", "request_id", "status", "round_trip", "service", "operation",
                 "status_code", "token_note"),
}


def default_columns(table: str) -> list[str]:
    from amqp_dissect.results.schema import names

    known = names(table)
    return [c for c in DEFAULT_COLUMNS.get(table, known) if c in known] or known


def pick_columns(table: str, spec: str | None) -> list[str]:
    """``--columns a,b,c`` (or ``all``, or ``+x,y``: the default ones and these) checked against
    the registry."""
    from amqp_dissect.results.schema import names

    known = names(table)
    if spec is None:
        return default_columns(table)
    spec = spec.strip()
    if spec == "all":
        return known
    base = []
    if spec.startswith("+"):
        base = default_columns(table)
        spec = spec[1:]
    wanted = [c.strip() for c in spec.split(",") if c.strip()]
    bad = [c for c in wanted if c not in known]
    if bad:
        raise Fail(EXIT_USAGE, f"--columns: {table} has no column {bad[0]!r} (its columns: {', '.join(known)})")
    if not wanted:
        raise Fail(EXIT_USAGE, "--columns: name at least one column (or all)")
    return base + [c for c in wanted if c not in base]


def text_table(df, table: str, cols: list[str], raw: dict | None = None) -> str:
    """The text table of the DataFrame ``df`` (registry columns, :func:`amqp_dissect.results.tables.to_frame`)
    laid out by pandas (``DataFrame.to_string``): the layout :func:`text_table_chunks` reproduces
    without pandas, kept as its reference (the tests' oracle; needs the pandas extra).  ``raw``
    ({(row, column): nanoseconds}, :func:`amqp_dissect.pipelines.writers.tables.raw_times`): times outside
    the years a datetime holds, null in ``df``, written as their epoch seconds."""
    import pandas as pd

    from amqp_dissect.results.schema import FLOAT, TIME, columns

    if not len(df):
        return "(no rows)\n"
    types = {c.name: c.type for c in columns(table)}
    out = df[cols].copy()
    for c in cols:
        if types[c] == TIME:
            out[c] = _times(out[c])
        elif types[c] == FLOAT:
            out[c] = out[c].map(lambda x: "" if pd.isna(x) else f"{x:.6f}")
    out = out.astype(object).where(out.notna(), "")
    if raw:  # times outside the years a datetime holds: null in the frame
        from amqp_dissect.pipelines.writers.tables import epoch_text

        for (i, n), v in raw.items():
            if n in out.columns:
                out.iloc[i, out.columns.get_loc(n)] = epoch_text(v)
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 10_000,
                           "display.max_colwidth", _MAX_COLWIDTH):
        return out.to_string(index=False) + "\n"


# The CLI's text table is laid out here, without pandas, as pandas' ``DataFrame.to_string(index=False)``
# lays out a frame of text cells (the layout of :func:`text_table`, byte for byte): every cell right
# aligned in its column, as wide as the column's widest cell or its name, one space between columns,
# tabs, carriage returns and newlines in a cell written as \t, \r, \n.  (``to_string`` does not cut
# long cells: it sets ``display.max_colwidth`` to None while it runs; the streamed table's widths
# carried from chunk to chunk count at most _MAX_COLWIDTH characters of a cell, as before.)

_MAX_COLWIDTH = 48  # a streamed chunk's carried column width counts at most this many characters of a cell

_ESCAPES = str.maketrans({"\t": "\\t", "\r": "\\r", "\n": "\\n"})


def _cells(rows: list, table: str, cols: list[str]) -> list[list[str]]:
    """The text of each cell of ``rows`` (row dicts of ``table``), column by column."""
    from amqp_dissect.pipelines.writers.tables import text_cell
    from amqp_dissect.results.schema import columns

    types = {c.name: c.type for c in columns(table)}
    out = []
    for c in cols:
        f = text_cell(types[c])
        out.append([f(r.get(c)) for r in rows])
    return out


def _layout(cols: list[str], cells: list[list[str]], header: bool = True, col_space: dict | None = None) -> str:
    """The lines of a table of text cells (column by column) as ``to_string(index=False)`` lays them
    out (``col_space``: each column's least width)."""
    shown = [[v.translate(_ESCAPES) if "\t" in v or "\r" in v or "\n" in v else v for v in col] for col in cells]
    widths = []
    for c, col in zip(cols, shown):
        w = max(map(len, col), default=0)
        if header:
            w = max(w, len(c))
        if col_space:
            w = max(w, col_space.get(c, 0))
        widths.append(w)
    lines = [" ".join(c.rjust(w) for c, w in zip(cols, widths))] if header else []
    lines.extend(" ".join(v.rjust(w) for v, w in zip(row, widths)) for row in zip(*shown))
    return "\n".join(lines) + "\n"


def text_table_rows(rows: list, table: str, cols: list[str]) -> str:
    """The text table of the row dicts ``rows`` (the chosen columns, times as UTC date and time,
    durations and latencies in seconds with microseconds, times outside the years a datetime holds
    as their epoch seconds): the text :func:`text_table` makes of them with pandas."""
    if not rows:
        return "(no rows)\n"
    return _layout(cols, _cells(rows, table, cols))


#: the text table's look-ahead: a table of at most this many rows is laid out whole (every column
#: as wide as its widest cell); a longer one takes its column widths from these first rows and
#: streams the rest, STREAM_CHUNK rows at a time, widening a column from the chunk where a wider cell
#: first comes (the rows before it are already written)
LOOKAHEAD_ROWS = 10_000
STREAM_CHUNK = 8192


def _widths(cols: list[str], cells: list[list[str]], header: bool) -> dict:
    """The column widths a chunk carries to the next (a cell counts at most _MAX_COLWIDTH)."""
    w = {}
    for c, col in zip(cols, cells):
        longest = max(map(len, col), default=0)
        w[c] = max(min(longest, _MAX_COLWIDTH), len(c) if header else 0)
    return w


def text_table_chunks(rows, table: str, cols: list[str]):
    """The text table of the row dicts ``rows`` (an iterator: consumed as the text is made), as
    texts to write one after the other: one text when the table has at most LOOKAHEAD_ROWS rows
    (the same text as :func:`text_table` of them all), else the first rows laid out as a table
    and the rest in chunks aligned on their widths.  Memory: one chunk of rows.  No pandas."""
    import itertools

    it = iter(rows)
    first = list(itertools.islice(it, LOOKAHEAD_ROWS + 1))
    if len(first) <= LOOKAHEAD_ROWS:
        yield text_table_rows(first, table, cols)
        return
    rest = first[LOOKAHEAD_ROWS:]
    first = first[:LOOKAHEAD_ROWS]
    cells = _cells(first, table, cols)
    widths = _widths(cols, cells, header=True)
    yield _layout(cols, cells)
    del first, cells
    while True:
        chunk = rest + list(itertools.islice(it, STREAM_CHUNK - len(rest)))
        rest = []
        if not chunk:
            return
        cells = _cells(chunk, table, cols)
        got = _widths(cols, cells, header=False)
        widths = {c: max(widths[c], got[c]) for c in cols}
        yield _layout(cols, cells, header=False, col_space=widths)


def _times(col):
    """UTC date-time text; a time beyond the years 1-9999 as its epoch seconds, said so (the
    writer's own conversion)."""
    from amqp_dissect.pipelines.writers.tables import time_column_text

    return time_column_text(col)
