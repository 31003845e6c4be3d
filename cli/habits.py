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


def _clock(ts: float, utc: bool, date: bool) -> str:
    fmt = "%Y-%m-%d %H:%M:%S.%f" if date else "%H:%M:%S.%f"
    try:
        t = _dt.datetime.fromtimestamp(ts, _dt.timezone.utc) if utc else _dt.datetime.fromtimestamp(ts)
        return t.strftime(fmt)
    except (OverflowError, ValueError, OSError):
        return f"{ts:.6f}"


def time_text(mode: TimeFormat, source):
    """The time column's text as a function of a packet time, for ``-t mode``; None for ``r``
    (the renderer's own fast path: seconds since the capture's first packet).  ``source``: the
    CaptureSource (its ``prev_ts`` for ``d``)."""
    if mode is TimeFormat.r:
        return None
    if mode is TimeFormat.e:
        return lambda ts: f"{ts:.6f}"
    if mode in (TimeFormat.a, TimeFormat.ad, TimeFormat.u, TimeFormat.ud):
        utc = mode in (TimeFormat.u, TimeFormat.ud)
        date = mode in (TimeFormat.ad, TimeFormat.ud)
        return lambda ts: _clock(ts, utc, date)
    if mode is TimeFormat.d:
        source.track_prev = True

        def delta(ts):
            prev = source.prev_ts
            return "%11.6f" % (ts - prev if prev is not None else 0.0)
        return delta
    last = [None]

    def delta_displayed(ts):
        prev = last[0]
        last[0] = ts
        return "%11.6f" % (ts - prev if prev is not None else 0.0)
    return delta_displayed


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


def text_table(df, table: str, cols: list[str]) -> str:
    """The human table of ``df`` (registry columns): the chosen columns, times as UTC date and
    time, durations and latencies in seconds with microseconds."""
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
    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 10_000,
                           "display.max_colwidth", 48):
        return out.to_string(index=False) + "\n"


def _times(col):
    """UTC date-time text; a time beyond the years 1-9999 as its epoch seconds, said so (the
    writer's own conversion)."""
    from amqp_dissect.pipelines.write import _time_text

    return _time_text(col)
