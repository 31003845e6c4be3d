"""Decoded AMQP values as plain JSON-able Python values (the conventions are in
:mod:`amqp_dissect.render.frames` and docs/filters.md).

Used by the model (terminus addresses, error info, ...) and by the renderers, so
it lives with the codec, below both.

The value readers (``read_*``, :func:`error_info`, :func:`terminus_info`, the delivery-state
readers) take a decoded field value and give it back if it is of the expected type (and range),
else None: what a frame carries is checked where the model reads it, never trusted.  Compiled
with the model (``values.pxd``), the hot ones are C functions the tracker calls through cimport.
"""

from __future__ import annotations

import json
import math
import uuid as _uuid

from .codec import ABSENT, Composite, Described
from .spec import COMPOSITES, OUTCOMES, FieldSpec, choice_name


def json_value(v):
    if v is None or v is True or v is False:
        return v
    if isinstance(v, Composite):
        d = {"@type": v.spec.name}
        d.update(composite_fields(v))
        return d
    if isinstance(v, Described):
        d = {"@type": v.name} if v.name else {"@descriptor": json_value(v.descriptor)}
        d["@value"] = json_value(v.value)
        return d
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return float(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {_key(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, _uuid.UUID):
        return str(v)
    return str(v)


def _key(k) -> str:
    if isinstance(k, str):
        return str(k)
    return json.dumps(json_value(k), sort_keys=True)


def field_json(f: FieldSpec, v):
    if v is None:
        return None
    if not isinstance(v, (list, dict, Described)):
        name = choice_name(f.type, v)
        if name is not None:
            return name
    return json_value(v)


def composite_fields(c: Composite) -> dict:
    out = {f.name: field_json(f, v) for f, v in c.items()}
    extra = c.extra()
    if extra:
        out["@extra"] = [json_value(x) for x in extra]
    return out


def composite_defaults(c: Composite) -> dict:
    n = len(c.value)
    return {
        f.name: field_json(f, f.default)
        for i, f in enumerate(c.spec.fields)
        if f.has_default and (i >= n or c.value[i] is None)
    }


# --------------------------------------------------------------------------- value readers

UINT_MAX = 0xFFFFFFFF
_TERMINAL_OUTCOMES = frozenset(OUTCOMES)


def read_uint(v, top: int = UINT_MAX):
    """An unsigned integer of at most ``top`` (a uint by default), else None."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= top:
        return int(v)
    return None


def read_ushort(v):
    return read_uint(v, 0xFFFF)


def read_ulong(v):
    return read_uint(v, (1 << 64) - 1)


def read_bool(v):
    return v if v is True or v is False else None


def read_str(v):
    return str(v) if isinstance(v, str) else None


def read_binary(v):
    if type(v) is bytes:
        return v
    return bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else None


def read_hex(v):
    if v is None or v is ABSENT:
        return None
    b = read_binary(v)
    if b is not None:
        return b.hex()
    return str(json_value(v))


def read_symbols(v) -> list | None:
    if v is None or v is ABSENT:
        return None
    if isinstance(v, (list, tuple)):
        return [str(x) if isinstance(x, str) else json_value(x) for x in v]
    if isinstance(v, str):
        return [str(v)]
    return [json_value(v)]


def read_plain(v):
    """A JSON-able value (None for absent)."""
    if v is ABSENT:
        return None
    return json_value(v)


def read_composite(v, *names):
    return v if isinstance(v, Composite) and (not names or v.spec.name in names) else None


def read_choice(c: Composite, field: str, type_name: str):
    v = c.effective(field)
    name = choice_name(type_name, v)
    if name is not None:
        return name
    return read_plain(v)


def error_info(v) -> dict | None:
    """``{"condition", "description", "info"}`` of an ``error`` composite (None if absent/null)."""
    if v is None or v is ABSENT:
        return None
    c = read_composite(v, "error")
    if c is None:
        return {"condition": "(malformed error)", "description": None, "info": read_plain(v)}
    cond = c.field("condition")
    return {
        "condition": str(cond) if isinstance(cond, str) else read_plain(cond),
        "description": read_str(c.field("description")),
        "info": read_plain(c.field("info")),
    }


def terminus_info(v) -> dict | None:
    """A source / target / coordinator as a plain dict (None when null / absent)."""
    if v is None or v is ABSENT:
        return None
    c = read_composite(v)
    if c is None:
        return {"type": getattr(v, "name", None) or "unknown", "address": None, "value": read_plain(v)}
    name = c.spec.name
    d: dict = {"type": name}
    if name == "coordinator":
        d["address"] = None
        d["capabilities"] = read_symbols(c.field("capabilities"))
        return d
    if name not in ("source", "target"):
        d["address"] = None
        d["value"] = read_plain(v)
        return d
    addr = c.field("address")
    if addr is None or addr is ABSENT:
        d["address"] = None
    elif isinstance(addr, str):
        d["address"] = str(addr)
    else:  # not a string (a list, a map, binary ...): its text, as the tables show it, so it stays a key
        v = read_plain(addr)
        d["address"] = json.dumps(v, default=str) if isinstance(v, (list, dict)) else str(v)
    d["durable"] = read_choice(c, "durable", "terminus-durability")
    d["durable_default"] = c.is_default("durable")
    d["expiry_policy"] = read_choice(c, "expiry-policy", "terminus-expiry-policy")
    d["expiry_policy_default"] = c.is_default("expiry-policy")
    d["timeout"] = read_plain(c.effective("timeout"))
    d["dynamic"] = c.effective("dynamic") is True
    d["capabilities"] = read_symbols(c.field("capabilities"))
    if name == "source":
        f = c.field("filter")
        d["filter"] = None if f is None or f is ABSENT else read_plain(f)
        dm = c.field("distribution-mode")
        d["distribution_mode"] = None if dm is None or dm is ABSENT else read_plain(dm)
        d["default_outcome"] = read_plain(c.field("default-outcome"))
        d["outcomes"] = read_symbols(c.field("outcomes"))
    return d


# --------------------------------------------------------------------------- delivery states

# delivery states the scanner reports by name (an empty list): the composite they stand for
_EMPTY_STATES = {n: Composite(COMPOSITES[n], []) for n in COMPOSITES if "delivery-state" in COMPOSITES[n].provides}


def read_delivery_state(v):
    """A transfer's / disposition's state field as a Composite (None when absent, null or not a state)."""
    if type(v) is str:
        return _EMPTY_STATES.get(v)
    return v if isinstance(v, Composite) else None


def delivery_state_plan(state: Composite) -> tuple:
    """What a delivery state says, read once: (outcome or state name (None for a transactional
    state without an outcome), transactional?, txn-id, the state (the inner outcome of a
    transactional one), terminal outcome?, what more to read of it: one of the STATE_* codes)."""
    name = state.spec.name
    transactional = name == "transactional-state"
    txn = None
    if transactional:
        txn = state.field("txn-id")
        inner = state.field("outcome")
        state = inner if isinstance(inner, Composite) else None
        name = state.spec.name if state is not None else None
    return (name, transactional, txn, state, name in _TERMINAL_OUTCOMES, _STATE_KIND.get(name, STATE_PLAIN))


# what the model reads beyond a delivery state's name (a code, not a string compare per delivery)
STATE_PLAIN, STATE_RECEIVED, STATE_REJECTED, STATE_MODIFIED, STATE_DECLARED = 0, 1, 2, 3, 4
_STATE_KIND = {"received": STATE_RECEIVED, "rejected": STATE_REJECTED, "modified": STATE_MODIFIED,
               "declared": STATE_DECLARED}


def short_value(f: FieldSpec | None, v, limit: int = 60) -> str:
    """A value in one short line (choices by name, long strings and binaries cut at ``limit``):
    how the frames summary and the findings show it."""
    if v is None:
        return "null"
    if f is not None and not isinstance(v, (list, dict, Described)):
        name = choice_name(f.type, v)
        if name is not None:
            return name
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, Composite):
        return _short_composite(v)
    if isinstance(v, Described):
        return f"{v.name or v.descriptor}:{short_value(None, v.value)}"
    if isinstance(v, (bytes, bytearray)):
        return _short_binary(bytes(v), limit)
    if isinstance(v, str):
        s = str(v)
        return repr(s if len(s) <= limit else s[:limit] + "…")
    if isinstance(v, list):
        return _short_list(v)
    if isinstance(v, dict):
        return _short_map(v)
    return str(v)


def _short_composite(v: Composite) -> str:
    """:func:`short_value` of a composite: a terminus by its address, an error by its condition and
    description, any other by its fields."""
    if v.spec.name in ("source", "target"):
        addr = v.field("address")
        return f"{v.spec.name}({'' if not addr else addr})"
    if v.spec.name == "error":
        desc = v.field("description")
        cond = v.field("condition")
        # one line: a broker's description may span several (tshark shows them as \n)
        desc = str(desc).replace("\r", "\\r").replace("\n", "\\n") if desc else desc
        return f"error({cond}{': ' + desc if desc else ''})"
    inner = ", ".join(f"{fs.name}={short_value(fs, x)}" for fs, x in v.items())
    return f"{v.spec.name}({inner})"


def _short_binary(s: bytes, limit: int) -> str:
    """:func:`short_value` of a binary: its hex, cut after ``limit // 2`` bytes."""
    text = s.hex() if len(s) <= limit // 2 else s[: limit // 2].hex() + "…"
    return f"0x{text}"


def _short_list(v: list) -> str:
    """:func:`short_value` of a list: its first 8 elements."""
    return "[" + ", ".join(short_value(None, x) for x in v[:8]) + (", …" if len(v) > 8 else "") + "]"


def _short_map(v: dict) -> str:
    """:func:`short_value` of a map: its first 6 pairs."""
    return "{" + ", ".join(f"{short_value(None, k)}: {short_value(None, x)}" for k, x in list(v.items())[:6]) + (
        ", …" if len(v) > 6 else "") + "}"
