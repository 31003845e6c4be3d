"""Decoded AMQP values as plain JSON-able Python values (the conventions are in
:mod:`amqp_dissect.render.frames` and the README).

Used by the model (terminus addresses, error info, ...) and by the renderers, so
it lives with the codec, below both.
"""

from __future__ import annotations

import json
import math
import uuid as _uuid

from .codec import Composite, Described
from .spec import FieldSpec, choice_name



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
