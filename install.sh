#!/usr/bin/env bash
# Installs amqp-dissect from this checkout into a venv of its own, .venv (Debian's own Python
# refuses `pip install` outside a venv: externally-managed-environment), then says its version.
#
#   bash install.sh            the CLI: report, frames, split, the tables as text, csv, jsonl (a 60 MB venv)
#   bash install.sh parquet    also -T parquet (pyarrow)
#   bash install.sh pandas     also the Python API, amqp_dissect.analyze (pandas and pyarrow)
#   bash install.sh all        also `archive` (the spark extra) and `compare` (the wireshark extra)
#   bash install.sh test       everything the tests import (tests/install-deps.sh uses this)
#
# Then run it as .venv/bin/amqp-dissect (or activate the venv: . .venv/bin/activate).
# Safe to run again.  On a stock Debian, python3's venv module comes in a package of its own
# (python3-venv), installed here with apt when it is missing.
set -euo pipefail
cd "$(dirname "$0")"
EXTRAS="${1:-}"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "amqp-dissect needs Python 3.11 or newer ($PY is $("$PY" -V 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    echo "installing python3-venv (apt-get)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  # without pip: ensurepip would install pip and a setuptools too old for the build, each byte-compiled
  # (7 s of CPU, before anything else can start); pip comes with the build's requirements below
  "$PY" -m venv --without-pip .venv
fi
TARGET="."
[ -n "$EXTRAS" ] && TARGET=".[$EXTRAS]"
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# The build runs in the venv, not in an environment of pip's own: its requirements (pyproject.toml's
# [build-system] requires: setuptools, Cython) go into the venv first.  Then two things at once: the
# compile of the hot modules in place (setup.py build_ext --inplace: two workers, the two cores) and
# pip installing the project (editable, not compiling) with its dependencies, then the bytecode (one
# process, mostly unpacking).  In sequence, as `pip install -e .` does it, the dependencies and pip's
# build environment kept a core idle before the compile began (see docs/performance.md, the install).
BUILD_REQUIRES=$(.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
mapfile -t BUILD_REQUIRES <<<"$BUILD_REQUIRES"
HAD_CYTHON=$(.venv/bin/python -c 'import importlib.util; print(int(importlib.util.find_spec("Cython") is not None))')
# (not byte-compiled: the build imports a small part of them, and writes that part's bytecode itself)
if .venv/bin/python -c 'import pip' >/dev/null 2>&1; then
  "${PIP[@]}" --no-compile "${BUILD_REQUIRES[@]}"
elif ! "$PY" -m pip --python .venv/bin/python install -q --disable-pip-version-check --no-compile \
    pip "${BUILD_REQUIRES[@]}" >/dev/null 2>&1; then
  # no pip beside $PY, or one older than 22.3 (--python): the venv's own, from ensurepip
  .venv/bin/python -m ensurepip -q
  "${PIP[@]}" --no-compile "${BUILD_REQUIRES[@]}"
fi
# The dependencies of the project and of the extras asked for, read from pyproject.toml (an extra that
# names amqp-dissect[...] brings those extras' too): they are installed by a pip run of their own, with
# build isolation, because a dependency published only as a source archive builds in an environment of
# its own (python-qpid-proton builds its C extension with cffi, which it lists as a build requirement: in
# the venv, where cffi is not yet installed, the build quietly left the extension out and the wheel it
# cached imported nothing).  Only the project itself is built in the venv (--no-build-isolation).
DEPENDENCIES=$(.venv/bin/python - "$EXTRAS" <<'PYTHON'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras, seen, out = project.get("optional-dependencies", {}), set(), list(project.get("dependencies", []))
def add(extra):
    if extra in seen:
        return
    seen.add(extra)
    for requirement in extras[extra]:
        own = re.fullmatch(r"\s*amqp-dissect\s*\[([^\]]*)\]\s*", requirement)
        if own:
            for name in own.group(1).split(","):
                add(name.strip())
        else:
            out.append(requirement)
for extra in filter(None, sys.argv[1].split(",")):
    if extra not in extras:
        sys.exit(f"install.sh: no extra named {extra!r} (pyproject.toml: {', '.join(extras)})")
    add(extra)
print("\n".join(dict.fromkeys(out)))
PYTHON
)
mapfile -t DEPENDENCIES <<<"$DEPENDENCIES"
mkdir -p build
(
  # (their output to build/pip.log, shown if one fails: the newer pip shows setuptools' warnings even with -q)
  if ! "${PIP[@]}" "${DEPENDENCIES[@]}" >build/pip.log 2>&1 \
      || ! AMQP_DISSECT_NO_COMPILE=1 "${PIP[@]}" --no-build-isolation --no-deps -e "$TARGET" >>build/pip.log 2>&1; then
    cat build/pip.log >&2
    exit 1
  fi
  # the bytecode of the project's own modules, written once here: an editable install leaves it to the
  # first run, and where PYTHONDONTWRITEBYTECODE is set (container images often set it) every run would
  # compile every module again (0.25 s of CPU against 0.11 s for `report` on a small capture)
  .venv/bin/python -m compileall -q -j 0 dissector pipelines cli >/dev/null
) &
INSTALLING=$!
# the compile's own output (Cython's, gcc's) goes to build/compile.log; the modules that stay Python
# (no compiler, no Python headers) are counted here, and --version below says what runs
if ! .venv/bin/python setup.py -q build_ext --inplace >build/compile.log 2>&1; then
  echo "amqp-dissect: the build failed (see build/compile.log); it runs as pure Python" >&2
fi
PURE=$(grep -c "^WARNING (amqp-dissect).*stays pure Python" build/compile.log || true)
[ "${PURE:-0}" -gt 0 ] && echo "amqp-dissect: $PURE hot modules stay pure Python (why: build/compile.log)" >&2
wait "$INSTALLING"
# Cython stays only where it was or an extra asks for it (test): a hot module that runs as Python (no
# compiler) imports Cython's shadow module when Cython is installed (14 ms a run), the project's shim
# otherwise
if [ "$HAD_CYTHON" = 0 ] && [[ ",$EXTRAS," != *",test,"* ]]; then
  .venv/bin/python -m pip uninstall -q -y Cython >/dev/null 2>&1 || true
fi
.venv/bin/amqp-dissect --version
