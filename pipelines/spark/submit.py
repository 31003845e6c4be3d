"""``spark-submit``'s entry of the archive job (``python -m amqp_dissect.pipelines.spark``)."""

from __future__ import annotations

import argparse
import json
import sys

from amqp_dissect.pipelines.archive import DEFAULT_SPLIT_SIZE, InputError, expand_inputs
from amqp_dissect.pipelines.keylogfile import open_keylog

from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path, parse_size  # noqa: F401  (parse_size: also this module's name)
from .job import run_archive
from amqp_dissect.pipelines.spark_runtime.session import spark_session, stop_session
from .summaries import DEFAULT_WINDOW


# --------------------------------------------------------------------------- spark-submit entry


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pipelines/spark/__main__.py",
                                 description="Spark analysis of capture archives (see amqp_dissect.pipelines.spark)")
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--master")
    ap.add_argument("--conf", action="append", default=[])
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--split-size", default=str(DEFAULT_SPLIT_SIZE))
    ap.add_argument("--window", type=float, default=DEFAULT_WINDOW)
    ap.add_argument("--frames", action="store_true")
    ap.add_argument("--port", type=int, action="append", default=[])
    ap.add_argument("--keylog", help="TLS key log file (default: $SSLKEYLOGFILE)")
    a = ap.parse_args(argv)
    conf = [tuple(c.split("=", 1)) for c in a.conf]
    local = [local_path(p) for p in a.paths if is_local(p)]  # (URIs: checked once Spark runs, before any work)
    try:
        if local:
            expand_inputs(local)
    except InputError as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return 3 if e.code == "missing" else 4
    spark = spark_session(master=a.master, conf=conf)
    try:
        res = run_archive(spark, a.paths, a.out, split_size=parse_size(a.split_size), window=a.window,
                          frames=a.frames, partitions=a.partitions, ports=a.port,
                          keylog=_keylog_text(a.keylog))
    except InputError as e:  # (exit codes as amqp-dissect archive's)
        print(f"amqp-dissect: {e}", file=sys.stderr)
        stop_session(spark)
        return 3 if e.code in ("missing", "connector") else 4
    print(json.dumps({"counts": res["counts"], "tables": res["tables"], "stats": res["stats"],
                      "errors": res["errors"], "files": res["files"], "order": res["order"],
                      "gaps": res["gaps"]}, default=str))
    stop_session(spark)
    return 5 if res["errors"] else 0


def _keylog_text(path) -> str | None:
    """The secrets of key log ``path`` (default: the file ``$SSLKEYLOGFILE`` names) as the text
    shipped to the executors; None without a key log."""
    kl = open_keylog(path, environment=True)
    return None if kl is None else kl.text()
