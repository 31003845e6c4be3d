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
  "$PY" -m venv .venv
fi
TARGET="."
[ -n "$EXTRAS" ] && TARGET=".[$EXTRAS]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$TARGET"
# the bytecode of the project's own modules, written once here: an editable install leaves it to the
# first run, and where PYTHONDONTWRITEBYTECODE is set (container images often set it) every run would
# compile every module again (0.25 s of CPU against 0.11 s for `report` on a small capture)
.venv/bin/python -m compileall -q -j 0 dissector pipelines cli >/dev/null
.venv/bin/amqp-dissect --version
