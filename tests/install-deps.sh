#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine:
# tshark (Wireshark's dissector, used through pyshark as an oracle) and the
# project with its test extra in the venv .venv (install.sh).  Safe to run again: it skips
# what is present.  Then: .venv/bin/python -m pytest -q
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if ! command -v tshark >/dev/null 2>&1; then
  echo "installing tshark (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq tshark >/dev/null
fi
# tcpdump and editcap: tests/capture/test_tls.py and tests/capture/test_websocket.py capture real TLS and
# WebSocket traffic on the loopback (as root, or with CAP_NET_RAW), and test_tls.py injects
# key logs into pcapng files
if ! command -v tcpdump >/dev/null 2>&1 || ! command -v editcap >/dev/null 2>&1; then
  echo "installing tcpdump and editcap (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq tcpdump wireshark-common >/dev/null
fi
# chromium: tests/results/test_html_report.py renders the HTML report in headless Chromium and checks
# the screenshot and the DOM
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "installing chromium (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
fi
# a Java runtime: pyspark runs Spark in a JVM (tests/spark, the archive command's tests)
if ! command -v java >/dev/null 2>&1; then
  echo "installing a Java runtime (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq default-jre-headless >/dev/null
fi
# A C compiler and Python's headers let the editable install compile the hot modules
# with Cython (a build requirement pip fetches); without them it still installs, as
# pure Python, and tests/cli/test_compiled.py fails under CI.
if ! command -v cc >/dev/null 2>&1 || ! python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  echo "installing a C compiler and Python headers (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq gcc python3-dev >/dev/null
fi
# the project with everything the tests import, in its own venv (.venv: see install.sh)
bash install.sh test
