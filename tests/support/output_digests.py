"""Digests of every output on every sample: the check that a redesign changed no behaviour.

Runs the CLI (in this interpreter, as a subprocess per command) on each bundled sample, the
test-data captures, and optionally more captures (``--extra``, e.g. the benchmark's), in every
output format: ``report`` (text, json, html), ``frames`` (lines, ``-V``, jsonl, ``-T fields``),
and every table command as table, csv, jsonl and parquet.  Prints one line per output::

    <md5>  <command>

Record the lines before a change (``--save before.txt``) and compare after (``--check
before.txt``): the check prints every output whose digest moved and exits 1 if one did.
Parquet files are compared by their bytes (the writer is deterministic: same rows, same
schema, same metadata).  The expected digests are never committed: they are the program's
own output, recorded on the revision one compares against.

    python tests/support/output_digests.py --save /somewhere/before.txt
    ... change the code ...
    python tests/support/output_digests.py --check /somewhere/before.txt
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TABLES = ("deliveries", "links", "stalls", "connections", "sessions", "transactions", "violations", "errors")
TABLE_FORMATS = ("table", "csv", "jsonl", "parquet")


def captures(extra: list[str]) -> list[str]:
    found = sorted(glob.glob(os.path.join(ROOT, "samples", "**", "*.pcap*"), recursive=True))
    found += sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.pcap*")))
    return found + list(extra)


def commands(cap: str, quick: bool) -> list[list[str]]:
    out = [["report", cap], ["report", "-T", "json", cap], ["report", "-T", "html", cap],
           ["frames", cap], ["frames", "-T", "jsonl", cap],
           ["frames", "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "amqp.performative",
            "-e", "delivery-id", cap]]
    if not quick:
        out.append(["frames", "-V", cap])
    for t in TABLES:
        for fmt in TABLE_FORMATS:
            out.append([t, "-T", fmt, cap])
    return out


def label(cmd: list[str]) -> str:
    """The output's name.  The names are the ones recorded when ``-f`` was the output format of
    report and the tables (it is the capture filter now, ``-T`` the format everywhere): a digest
    saved then still names the same output (``frames -f jsonl`` named a usage error then)."""
    words = [_rel(a) for a in cmd]
    if len(words) > 2 and words[1] == "-T" and words[2] != "fields":
        words[1] = "-f"
    return " ".join(words)


def _rel(a: str) -> str:
    """A path inside the checkout relative to it (the report prints the path it was given: the
    digests of two checkouts in other folders stay comparable)."""
    return os.path.relpath(a, ROOT) if os.path.isabs(a) and a.startswith(ROOT + os.sep) else a


# the build line of the HTML page ("compiled (N modules)" / "pure Python") says how the program ran,
# not what it found: the same in both modes and whatever the number of compiled modules
_BUILD = re.compile(rb"compiled \(\d+ modules\)|pure Python")


def run_one(cmd: list[str], tmp: str) -> tuple[str, str]:
    args = [_rel(a) for a in cmd]
    path = None
    if "parquet" in args:
        path = os.path.join(tmp, hashlib.md5(label(cmd).encode()).hexdigest() + ".parquet")
        args += ["-o", path]
    if args[0] == "report" and "html" in args:
        path = os.path.join(tmp, hashlib.md5(label(cmd).encode()).hexdigest() + ".html")
        args += ["-o", path]
    p = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", *args], capture_output=True, cwd=ROOT)
    h = hashlib.md5()
    h.update(b"rc=%d\n" % p.returncode)
    h.update(p.stdout)
    h.update(b"\0stderr\0")
    h.update(p.stderr)
    if path is not None and os.path.exists(path):
        with open(path, "rb") as fh:
            data = fh.read()
        if path.endswith(".html"):
            data = _BUILD.sub(b"BUILD", data)
        h.update(b"\0file\0" + data)
        os.unlink(path)
    return h.hexdigest(), label(cmd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", help="write the digests here")
    ap.add_argument("--check", help="compare with digests saved before; exit 1 on a difference")
    ap.add_argument("--extra", action="append", default=[], help="another capture (repeatable)")
    ap.add_argument("--quick", action="store_true", help="leave out frames -V on the --extra captures")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="commands run at once (default 2)")
    a = ap.parse_args()
    todo = []
    for cap in captures(a.extra):
        todo += commands(cap, a.quick and cap in a.extra)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(a.jobs) as pool:
        lines = [f"{d}  {lab}" for d, lab in pool.map(lambda c: run_one(c, tmp), todo)]
    text = "\n".join(lines) + "\n"
    if a.save:
        with open(a.save, "w") as fh:
            fh.write(text)
    if not a.check:
        if not a.save:
            sys.stdout.write(text)
        print(f"{len(lines)} outputs", file=sys.stderr)
        return 0
    with open(a.check) as fh:
        before = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in fh if line.strip())
    now = dict(reversed(line.split("  ", 1)) for line in lines)
    moved = [k for k in now if k in before and before[k] != now[k]]
    missing = [k for k in before if k not in now]
    for k in moved:
        print(f"changed: {k}")
    for k in missing:
        print(f"not run now: {k}")
    print(f"{len(now)} outputs, {len(moved)} changed, {len(missing)} not run", file=sys.stderr)
    return 1 if moved or missing else 0


if __name__ == "__main__":
    sys.exit(main())
