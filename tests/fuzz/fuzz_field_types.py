"""Which fields of which performatives take a value of the wrong type silently (issue 8, goal 1:
"any value of any type in any field is a violation or an expert note").

    python tests/fuzz/fuzz_field_types.py

For every field of every performative in the generated spec tables, a capture (built with
tests/support/pcapbuild.py, frames encoded by proton's codec) carries headers, opens, begin and attach both
ways, then that performative with that field holding a value of another type (a list; a string
for list fields).  Prints the (performative, field) pairs for which neither a violation nor an
expert note of the frame names the field, and their count.  Exit 1 when there are any.
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))

import fuzzgen as f  # noqa: E402
import pcapbuild  # noqa: E402
from amqp_dissect.amqp import _spec  # noqa: E402
from amqp_dissect.pipelines.runs.local import CaptureSource, read_analysis  # noqa: E402
from amqp_dissect.render.frames import event_json  # noqa: E402

# the fields each performative needs to mean something (the tested field is set after them)
GOOD = {"open": [("string", "c", 0)], "begin": [None, ("uint", 0, 0), ("uint", 100, 0), ("uint", 100, 0)],
        "attach": [("string", "q2", 0), ("uint", 1, 0), ("boolean", False, 0)],
        "flow": [("uint", 0, 0), ("uint", 100, 0), ("uint", 0, 0), ("uint", 100, 0)],
        "transfer": [("uint", 0, 0), ("uint", 0, 0), ("binary", b"t", 0)],
        "disposition": [("boolean", True, 0), ("uint", 0, 0)], "detach": [("uint", 0, 0)], "end": [], "close": []}


def _prefix():
    s = [(0, f.HEADER_AMQP), (1, f.HEADER_AMQP)]
    for d in (0, 1):
        s.append((d, f.frame_bytes(f.encode(f.performative("open", [("string", f"c{d}", 0)])))))
    s.append((0, f.frame_bytes(f.encode(f.performative("begin", [None, ("uint", 0, 0), ("uint", 100, 0),
                                                                 ("uint", 100, 0)])))))
    s.append((1, f.frame_bytes(f.encode(f.performative("begin", [("ushort", 0, 0), ("uint", 0, 0),
                                                                 ("uint", 100, 0), ("uint", 100, 0)])))))
    for d in (0, 1):
        s.append((d, f.frame_bytes(f.encode(f.performative("attach", [
            ("string", "q", 0), ("uint", 0, 0), ("boolean", d == 1, 0), None, None, f.performative("source", []),
            f.performative("target", []), None, None, ("uint", 0, 0) if d == 0 else None])))))
    return s


def silent_fields() -> list[tuple[str, str]]:
    out = []
    path = os.path.join(tempfile.mkdtemp(prefix="amqp-types-"), "t.pcap")
    for name in _spec.PROVIDERS["frame"]:
        for i, spec in enumerate(_spec.COMPOSITES[name][6]):
            fields = list(GOOD[name]) + [None] * (i + 1 - len(GOOD[name]))
            fields[i] = ("list", [("int", 1, 0)], 0) if spec[2] != "list" else ("string", "x", 0)
            streams = _prefix() + [(0, f.frame_bytes(f.encode(f.performative(name, fields))))]
            with open(path, "wb") as fh:
                fh.write(pcapbuild.TcpConversation.from_exchange(streams).pcap())
            texts = [v["message"] for v in read_analysis(path).analyzer.violations]
            for _, ev in CaptureSource([path]).events():
                j = event_json(ev)
                if j and j.get("performative") == name:
                    texts += [n["message"] for n in j.get("notes") or ()]
            if not any(spec[0] in t for t in texts):
                out.append((name, spec[0]))
    return out


if __name__ == "__main__":
    silent = silent_fields()
    total = sum(len(_spec.COMPOSITES[n][6]) for n in _spec.PROVIDERS["frame"])
    for name, field in silent:
        print(f"{name}.{field}")
    print(f"{len(silent)} of {total} performative fields take a value of the wrong type without a violation or note")
    sys.exit(1 if silent else 0)
