"""The hot modules' final extension types (``@cython.final`` in their ``.pxd``) and what Cython 3.3
cannot build for them.

A final type's methods are called directly (a C call, not through the type's vtable), which is why
the per-frame types are final (docs/performance.md, "The tenth round").  Two declarations break
the build of such a type, each found when it was made final:

- a method of a final type returning ``long long`` with an error value (``except? -1``,
  ``except -1``): Cython 3.3 writes the value's suffix twice in the direct calls of some modules
  (``-1LLLL``, which gcc refuses), depending on which modules the same build worker translated
  before; the module then stays pure Python;
- the decorator on a forward declaration (``cdef class X`` without a body): Cython crashes.

Such a method takes ``except *`` instead (the caller checks for an exception after each call).
CI's compiled pass also fails when any hot module stays pure Python (tests/cli/test_compiled.py);
this test names the cause before a build is tried.
"""

from __future__ import annotations

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PXDS = sorted(glob.glob(os.path.join(ROOT, "dissector", "**", "*.pxd"), recursive=True))
CLASS = re.compile(r"cdef class (\w+)")
LONG_LONG_WITH_VALUE = re.compile(r"^\s+c?p?def\s+(inline\s+)?(unsigned\s+)?long long\s+\w+\(.*\)\s*except\??\s*-?\d")


def final_types(path: str) -> dict[str, list[str]]:
    """Each final type of the .pxd at ``path``, with the lines of its body (a forward declaration:
    the name with None)."""
    types: dict = {}
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        m = CLASS.match(line)
        if not m or i == 0 or lines[i - 1].strip() != "@cython.final":
            continue
        if not line.rstrip().endswith(":"):
            types[m.group(1)] = None
            continue
        body = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and not nxt[0].isspace():
                break
            body.append(nxt)
        types[m.group(1)] = body
    return types


def test_the_per_frame_types_are_final():
    found = {name for path in PXDS for name in final_types(path)}
    # (the types each frame's path goes through: made final, not to lose it in an edit)
    for name in ("Frame", "AmqpConnection", "TcpReassembler", "ConnectionRules", "TransferRules", "LinkRules",
                 "SessionRules", "DeliveryRecord", "LiveDeliveries", "DeliveryTable", "Connection", "Session",
                 "Link", "LinkCredit", "Dissector", "SweepClock"):
        assert name in found, f"{name} is no longer final"


def test_no_final_type_has_a_declaration_cython_cannot_build():
    bad = []
    for path in PXDS:
        for name, body in final_types(path).items():
            where = os.path.relpath(path, ROOT)
            if body is None:
                bad.append(f"{where}: the forward declaration of {name} is decorated final")
                continue
            bad.extend(f"{where}: {name}: {line.strip()}" for line in body if LONG_LONG_WITH_VALUE.match(line))
    assert not bad, "final types with declarations Cython 3.3 cannot build (see this file):\n" + "\n".join(bad)


def test_the_check_finds_what_it_looks_for(tmp_path):
    # (the two patterns, in a .pxd written here: the check above would pass on a tree without them
    # only if it can find them)
    p = tmp_path / "x.pxd"
    p.write_text("import cython\n\n@cython.final\ncdef class A\n\n@cython.final\ncdef class B:\n"
                 "    cdef long long f(self, Py_ssize_t d) except? -1\n    cdef long long g(self) except *\n"
                 "\ncdef class C:\n    cdef long long h(self) except? -1\n", encoding="utf-8")
    types = final_types(str(p))
    assert types["A"] is None
    assert [line.strip() for line in types["B"] if LONG_LONG_WITH_VALUE.match(line)] == \
        ["cdef long long f(self, Py_ssize_t d) except? -1"]
    assert "C" not in types
