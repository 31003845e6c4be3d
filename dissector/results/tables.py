"""Table schemas shared by the CLI, the notebook API and the Spark jobs.

Rows come from :class:`amqp_dissect.results.analytics.Analyzer` as plain dicts; here they
become pandas DataFrames with a fixed leading column order and nullable dtypes,
so an empty capture still yields the documented columns.  Columns the analyzer
adds beyond these come after them, in the analyzer's order.

Times are epoch seconds (float64), durations and latencies seconds (float64,
NaN when unknown); ids and counts are nullable integers (``Int64``); flags are
nullable booleans; text is ``string``.
"""

from __future__ import annotations

import json

import pandas as pd

S, I, F, B, O = "string", "Int64", "float64", "boolean", "object"

# table -> ((column, dtype, description), ...): the documented leading columns
SCHEMAS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "deliveries": (
        ("connection", S, "connection id: client-server endpoints ('#n' when a 4-tuple is reused)"),
        ("channel", I, "the session's channel as the client numbers it (sessions: channel_client / channel_server)"),
        ("link", S, "link name"),
        ("handle", I, "link handle on the sender's side"),
        ("delivery_id", I, "delivery-id (serial number)"),
        ("delivery_tag", S, "delivery-tag, hex"),
        ("sender", S, "ip:port of the peer sending the transfers"),
        ("first_time", F, "time of the first transfer frame"),
        ("last_time", F, "time of the last transfer frame"),
        ("frames", I, "transfer frames of the delivery"),
        ("message_size", I, "bytes of the message over all its frames"),
        ("presettled", B, "sent settled (settled=true on the transfer)"),
        ("aborted", B, "aborted by the sender"),
        ("settled_by", S, "sender, receiver, both, or empty"),
        ("settled_time", F, "when the delivery became settled (see README)"),
        ("outcome", S, "terminal outcome: accepted, rejected, released, modified, declared, or empty"),
        ("settlement_latency", F, "settled_time - first_time, seconds"),
    ),
    "links": (
        ("connection", S, "connection id"),
        ("channel", I, "the session's channel as the client numbers it"),
        ("name", S, "link name"),
        ("sender", S, "ip:port of the peer sending transfers on the link"),
        ("source", S, "source address"),
        ("target", S, "target address"),
        ("snd_settle_mode", S, "unsettled, settled or mixed (spec default applied when absent)"),
        ("rcv_settle_mode", S, "first or second (spec default applied when absent)"),
        ("deliveries", I, "deliveries on the link"),
        ("accepted", I, "deliveries with outcome accepted"),
        ("rejected", I, "deliveries with outcome rejected"),
        ("released", I, "deliveries with outcome released"),
        ("modified", I, "deliveries with outcome modified"),
        ("unsettled", I, "deliveries still unsettled at the end"),
        ("latency_p50", F, "settlement latency percentiles (linear interpolation), seconds"),
        ("latency_p90", F, ""),
        ("latency_p99", F, ""),
        ("latency_max", F, ""),
        ("stalls", I, "credit / window / drain stalls on the link"),
        ("stalled_seconds", F, "total stalled time"),
    ),
    "stalls": (
        ("connection", S, "connection id"),
        ("channel", I, "the session's channel as the client numbers it"),
        ("link", S, "link name (empty for session-window stalls without a link)"),
        ("kind", S, "link-credit, initial-credit, session-window or drain"),
        ("start", F, "time the stall began"),
        ("end", F, "time it ended (NaN while still open at the end of the capture)"),
        ("duration", F, "seconds (up to the end of the capture for open stalls)"),
        ("waiting", B, "messages were waiting (available > 0) where the capture shows it"),
    ),
    "connections": (
        ("connection", S, "connection id"),
        ("client", S, "ip:port of the TCP client"),
        ("server", S, "ip:port of the TCP server"),
    ),
}

TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors")


def _jsonable_cell(v):
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def to_frame(rows: list[dict], table: str) -> pd.DataFrame:
    """A DataFrame of ``rows`` with the table's documented columns first, typed."""
    schema = SCHEMAS.get(table, ())
    lead = [c for c, _, _ in schema]
    extra: list[str] = []
    seen = set(lead)
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                extra.append(k)
    df = pd.DataFrame.from_records(rows, columns=lead + extra) if rows else pd.DataFrame(columns=lead + extra)
    for col, dtype, _ in schema:
        df[col] = _convert(df[col], dtype)
    for col in extra:
        s = df[col]
        if s.map(lambda v: isinstance(v, (list, dict))).any():
            continue  # nested values stay objects (JSON text in csv/parquet)
        if s.map(lambda v: isinstance(v, bool)).all() and len(s):
            df[col] = _convert(s, B)
        elif s.map(lambda v: isinstance(v, str) or v is None).all():
            df[col] = _convert(s, S)
    return df


def _convert(s: pd.Series, dtype: str) -> pd.Series:
    if dtype == F:
        return pd.to_numeric(s, errors="coerce").astype("float64")
    if dtype == I:
        return pd.array([None if v is None or (isinstance(v, float) and v != v) else int(v) for v in s], dtype="Int64")
    if dtype == B:
        return pd.array([None if v is None or (isinstance(v, float) and v != v) else bool(v) for v in s], dtype="boolean")
    if dtype == S:
        return pd.array([None if v is None or (isinstance(v, float) and v != v) else str(v) for v in s], dtype="string")
    return s


def flat_for_export(df: pd.DataFrame) -> pd.DataFrame:
    """Nested (list/dict) cells as JSON text, for csv and parquet."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = out[col].map(_jsonable_cell)
    return out


def describe_columns(table: str) -> list[tuple[str, str, str]]:
    return list(SCHEMAS.get(table, ()))
