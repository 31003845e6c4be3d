#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine:
# tshark (Wireshark's dissector, used through pyshark as an oracle) and the
# project with its test extras.  Safe to run again: it skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
if ! command -v tshark >/dev/null 2>&1; then
  echo "installing tshark (apt-get)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq tshark >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e ".[test]"
