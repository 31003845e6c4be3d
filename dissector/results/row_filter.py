"""Display filters (``-Y``) over the rows of a result table: the frames' filter language
(:mod:`amqp_dissect.filter`) with the table's columns as its fields.

    keep = compile_row_filter('state == "delivered twice" and residence > 0.5', "messages")
    rows = [r for r in rows if keep(r)]

A column's field has the kind of its registry type: numbers (``int64``, ``uint64``,
``float64``), booleans, strings, and times as exact decimal seconds since the epoch
(``first_time > 1795332659.9``); a ``json`` column is its JSON text (``contains`` and
``matches`` search it).  A null cell is null (``col == null``), and ``col`` alone is true when the
cell is not null.  Sans-IO and pure: rows in, a predicate out; a filter naming no column of the
table raises :class:`~amqp_dissect.filter.FilterError` (one line, with the column it is at).
"""

from __future__ import annotations

import difflib
import json
from decimal import Decimal

from .. import filter as _flt
from .schema import BOOL, FLOAT, INT, JSON, TIME, UINT64, columns

__all__ = ["compile_row_filter"]

_KIND = {INT: _flt.NUM, UINT64: _flt.NUM, FLOAT: _flt.NUM, BOOL: _flt.BOOL, TIME: _flt.NUM}
_NS = Decimal(1_000_000_000)


def _getter(name: str, typ: str):
    if typ == TIME:
        def get(row, ctx):
            v = row.get(name)
            return None if not isinstance(v, int) or isinstance(v, bool) else Decimal(v) / _NS
    elif typ == JSON:
        def get(row, ctx):
            v = row.get(name)
            if v is None or isinstance(v, str):
                return v
            return json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)
    else:
        def get(row, ctx):
            return row.get(name)
    return get


def _fields(table: str) -> dict:
    return {c.name: _flt.Field(c.name, _KIND.get(c.type, _flt.STR), _getter(c.name, c.type), c.meaning)
            for c in columns(table)}


def compile_row_filter(text: str, table: str):
    """The predicate ``row -> bool`` of the filter ``text`` over ``table``'s columns."""
    fields = _fields(table)

    def lookup(name, full="", column=1):
        f = fields.get(name) or fields.get(name.replace("-", "_"))
        if f is not None:
            return f
        close = difflib.get_close_matches(name, list(fields), n=1) if len(name) <= 64 else None
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = name if len(name) <= 120 else name[:120] + "..."
        raise _flt.FilterError(full or name, column, f"the {table} table has no column {shown!r}{hint}")

    parsed = _flt.parse_filter(text, lookup)
    pred = parsed.predicate

    def keep(row) -> bool:
        try:
            return bool(pred(row, None))
        except (TypeError, ValueError, ArithmeticError):  # (a cell of another type than its column's)
            return False
    keep.notes = parsed.notes  # (what the user should know about the filter: one line each)
    return keep
