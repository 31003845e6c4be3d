"""The options of an archive analysis, declared once as data (name, type, default, help, range):
``amqp-dissect archive`` (cli/archive.py makes them typer parameters) and the spark-submit entry
of the job (:mod:`amqp_dissect.pipelines.spark.submit` makes them argparse arguments) are both
made from :data:`ARCHIVE_OPTIONS`; the layer order keeps the pipelines from importing cli/, so
the declarations live here, where both may import them.  Light: no Spark, no Arrow (the CLI
imports it at start).

Also here, for the same reason: the ranges the CLI's numbers are checked against, the default
byte-range size and time window of the archive job, and the ``--conf KEY=VALUE`` settings' reading.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

#: the most seconds a duration may say (``split --seconds``, ``archive --window``, ``-a duration:``):
#: about 31 years, past any capture's span, and still a 64-bit integer in nanoseconds
MAX_SECONDS = 1e9
#: the most Spark partitions ``archive --partitions`` asks for (Spark counts them in 32 bits; far
#: more tasks than any cluster runs)
MAX_PARTITIONS = 1_000_000
#: the most bytes a size may say (``split --bytes``, ``archive --split-size``): a 64-bit file offset
MAX_SIZE = 2 ** 63 - 1
#: the TCP ports ``--port`` takes
MIN_PORT, MAX_PORT = 1, 65535

DEFAULT_MASTER = "local[*]"  # the Spark master unless spark-submit or --master says otherwise
DEFAULT_SPLIT_SIZE = 64 << 20  # bytes: uncompressed pcap files larger than this are split into ranges
DEFAULT_WINDOW = 60.0  # seconds per row of the latency_by_window summary

PORT_HELP = "also decode this TCP port as AMQP (repeatable)"
KEYLOG_HELP = "TLS key log (NSS format) to decrypt TLS streams; default: the file $SSLKEYLOGFILE names"

_SIZE_SHIFTS = {"t": 40, "g": 30, "m": 20, "k": 10}  # a size's letter: the power of two it multiplies by


def parse_size(text: str) -> int:
    """'64m', '1g', '4096', '512k' -> bytes (ValueError: not a size)."""
    t = str(text).strip().lower().rstrip("b").rstrip("i")
    if t and t[-1] in _SIZE_SHIFTS:
        return int(float(t[:-1]) * (1 << _SIZE_SHIFTS[t[-1]]))
    return int(t)


def size_text(nbytes: int) -> str:
    """A size as a user types it (:func:`parse_size` reads it back): ``64m`` for 64 MiB (the
    largest letter that divides it), else bytes."""
    for letter, shift in _SIZE_SHIFTS.items():
        if nbytes and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{letter}"
    return str(nbytes)


class Declared(NamedTuple):
    """One option of a command line, as data.  ``kind``: ``str``, ``int``, ``float``, ``bool``
    (a flag) or ``Path`` (a local file); ``repeatable``: given again, each value is kept (a list);
    ``least`` / ``most``: the range of a number; ``submit``: the spark-submit entry takes it too
    (False: spark-submit has an option of its own for it)."""

    dest: str
    names: tuple
    kind: type
    help: str
    default: object = None
    required: bool = False
    repeatable: bool = False
    least: float | None = None
    most: float | None = None
    submit: bool = True


ARCHIVE_PATHS_HELP = ("capture files, directories (searched recursively) or globs: local paths or Hadoop URIs "
                      "(file://, hdfs://, s3a://, abfss://, gs://)")

#: the options of the archive job, in the order ``amqp-dissect archive --help`` lists them
ARCHIVE_OPTIONS = (
    Declared("out", ("--out", "-o"), str, "output directory for the parquet tables (a path or a Hadoop URI)",
             required=True),
    Declared("master", ("--master",), str, f"Spark master URL (default {DEFAULT_MASTER})"),
    Declared("conf", ("--conf",), str, "Spark setting KEY=VALUE (repeatable)", repeatable=True),
    Declared("packages", ("--packages",), str, "Maven coordinates of jars to add (comma-separated), e.g. a file "
                                               "system connector: org.apache.hadoop:hadoop-aws:3.4.1", submit=False),
    Declared("executor_memory", ("--executor-memory",), str, "e.g. 4g", submit=False),
    Declared("driver_memory", ("--driver-memory",), str, "e.g. 2g", submit=False),
    Declared("partitions", ("--partitions",), int, "flow partitions of the decoding stage (default 2 x cores)",
             least=1, most=MAX_PARTITIONS),
    Declared("split_size", ("--split-size",), str, "split uncompressed pcap files larger than this into byte "
                                                   "ranges (bytes, or with k/m/g; 0: never split)",
             default=size_text(DEFAULT_SPLIT_SIZE)),
    Declared("window", ("--window",), float, "seconds per row of latency_by_window", default=DEFAULT_WINDOW,
             least=0.001, most=MAX_SECONDS),
    Declared("frames", ("--frames",), bool, "also write the frames table (one row per frame)", default=False),
    Declared("messages", ("--messages",), bool, "read every delivery's message: the deliveries' message columns "
                                                "(message_id, message_size, ...; null without it)", default=False),
    Declared("port", ("--port", "-p"), int, PORT_HELP, repeatable=True, least=MIN_PORT, most=MAX_PORT),
    Declared("full", ("--full",), bool, "recompute the archive directory --out from nothing (its tables "
                                        "replaced at once); without it a run adds the files new since the last run",
             default=False),
    Declared("dry_run", ("--dry-run",), bool, "print the plan (the files new, unchanged, changed, vanished; what "
                                              "would run) without running it", default=False),
    Declared("keylog", ("--keylog",), Path, "TLS key log (NSS format) to decrypt TLS streams, shipped to the "
                                            "executors; default: the file $SSLKEYLOGFILE names"),
)


def parse_size_option(option: str, text: str, least: int = 1) -> int:
    """A size typed as text (bytes, or with k/m/g/t) of ``option``: from ``least`` to :data:`MAX_SIZE`
    bytes, or ValueError (its message names the option)."""
    try:
        nbytes = parse_size(text)
    except (ValueError, OverflowError):  # (not a number; inf)
        nbytes = None
    if nbytes is None or not least <= nbytes <= MAX_SIZE:
        raise ValueError(f"{option} {text!r}: expected a size from {least} byte(s) to 8 EiB, like 100m")
    return nbytes


def spark_settings(conf) -> list:
    """``--conf KEY=VALUE`` options as (key, value) pairs; ValueError (its message names the
    option) for one without ``=``."""
    pairs = []
    for c in conf or []:
        if "=" not in c:
            raise ValueError(f"--conf {c!r}: expected KEY=VALUE")
        k, v = c.split("=", 1)
        pairs.append((k.strip(), v))
    return pairs
