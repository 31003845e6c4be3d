"""``spark-submit``'s entry of the archive job (``python -m amqp_dissect.pipelines.spark``): its
arguments are made from the same declarations as ``amqp-dissect archive``'s options
(:data:`~amqp_dissect.pipelines.options.ARCHIVE_OPTIONS`; those spark-submit has options of its
own for are left to it), and its exit codes are the CLI's (:mod:`amqp_dissect.pipelines.exits`)."""

from __future__ import annotations

import argparse
import json
import sys

from amqp_dissect.pipelines.archive import InputError, expand_inputs
from amqp_dissect.pipelines.archive.directory import Refused
from amqp_dissect.pipelines.exits import EXIT_DAMAGED, EXIT_OK, EXIT_USAGE, input_error_exit
from amqp_dissect.pipelines.keylogfile import open_keylog
from amqp_dissect.pipelines.options import (ARCHIVE_OPTIONS, ARCHIVE_PATHS_HELP, Declared, parse_size_option,
                                            spark_settings)

from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path, parse_size  # noqa: F401  (parse_size: also this module's name)
from .job import run_archive
from amqp_dissect.pipelines.spark_runtime.session import finish_spark_log, spark_session, stop_session


# --------------------------------------------------------------------------- spark-submit entry


def parser() -> argparse.ArgumentParser:
    """The arguments of the entry: the archive's paths, then every declared option spark-submit
    does not take itself."""
    ap = argparse.ArgumentParser(prog="pipelines/spark/__main__.py",
                                 description="Spark analysis of capture archives (see amqp_dissect.pipelines.spark)")
    ap.add_argument("paths", nargs="+", help=ARCHIVE_PATHS_HELP)
    for option in ARCHIVE_OPTIONS:
        if option.submit:
            ap.add_argument(*option.names, dest=option.dest, **_argument(option))
    return ap


def _argument(option: Declared) -> dict:
    """argparse's settings of a declared option."""
    settings = dict(help=option.help.replace("%", "%%"), default=option.default)
    if option.kind is bool:
        return dict(settings, action="store_true")
    if option.kind in (int, float):
        settings["type"] = _number(option)
    if option.repeatable:
        settings.update(action="append", default=[])
    if option.required:
        settings["required"] = True
    return settings


def _number(option: Declared):
    """The type of a number option: its kind, in its range (NaN refused), or argparse's usage error."""
    def number(text: str):
        value = option.kind(text)
        if value != value or (option.least is not None and value < option.least) \
                or (option.most is not None and value > option.most):
            raise argparse.ArgumentTypeError(f"{text}: expected from {option.least} to {option.most}")
        return value
    number.__name__ = option.kind.__name__  # (argparse names the type in its message)
    return number


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    try:
        conf = spark_settings(a.conf)
        split_size = parse_size_option("--split-size", a.split_size, least=0)
    except ValueError as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return EXIT_USAGE
    local = [local_path(p) for p in a.paths if is_local(p)]  # (URIs: checked once Spark runs, before any work)
    try:
        if local:
            expand_inputs(local)
    except InputError as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return input_error_exit(e.code)
    try:
        plan = _plan(a, local)
    except Refused as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return EXIT_USAGE
    early = _before_spark(a, plan)
    if early is not None:
        return early
    spark = spark_session(master=a.master, conf=conf)
    job = dict(split_size=split_size, window=a.window, frames=a.frames, partitions=a.partitions, ports=a.port,
               keylog=_keylog_text(a.keylog), messages=a.messages)
    try:
        res = _run(spark, a, plan, job)
    except (InputError, Refused) as e:  # (exit codes as amqp-dissect archive's)
        stop_session(spark)
        log = finish_spark_log(False)
        print(f"amqp-dissect: {e}" + (f" (Spark's log: {log})" if log else ""), file=sys.stderr)
        return EXIT_USAGE if isinstance(e, Refused) else input_error_exit(e.code)
    print(json.dumps({k: res.get(k) for k in SUMMARY_KEYS if k in res}, default=str))
    stop_session(spark)
    finish_spark_log(True)
    return EXIT_DAMAGED if res["errors"] else EXIT_OK


#: what the entry's JSON summary says of a run (those of an archive directory's run when it is one)
SUMMARY_KEYS = ("counts", "tables", "stats", "errors", "files", "order", "gaps", "run", "resumed", "carried",
                "checkpoint_bytes", "new_rows")


def _before_spark(a, plan) -> int | None:
    """The plan printed (a local ``--out``); the exit code when the run stops before Spark (a
    refusal, ``--dry-run``, nothing new), else None."""
    if plan is None:
        if a.dry_run:
            print(f"run: full, the tables of {a.out} replaced (a Hadoop URI --out is written whole by every run)")
            return EXIT_OK
        return None
    for line in plan.lines():
        print(line)
    if plan.refusal():
        print(f"amqp-dissect: {plan.refusal()}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if a.dry_run or plan.nothing_new else None


def _run(spark, a, plan, job: dict) -> dict:
    """The job: a run of the archive directory (a local ``--out``), else the whole job."""
    if plan is not None:
        from .archive_dir import run_archive_dir

        return run_archive_dir(spark, a.paths, a.out, full=a.full, **job)
    return run_archive(spark, a.paths, a.out, **job)


def _plan(a, local: list):
    """The plan of a run into the archive directory ``--out`` (before Spark), or None for a
    Hadoop URI ``--out`` (written whole, as before)."""
    from amqp_dissect.capture.tcp import IDLE_TIMEOUT
    from amqp_dissect.pipelines.archive.directory import ArchiveDir, option_values, plan_run

    if not is_local(a.out):
        return None
    files = expand_inputs(local) if local else []
    options = option_values(ports=a.port, frames=a.frames, window=a.window, idle_timeout=IDLE_TIMEOUT,
                            messages=a.messages)
    return plan_run(ArchiveDir(local_path(a.out)), files, options, a.full, [p for p in a.paths if not is_local(p)])


def _keylog_text(path) -> str | None:
    """The secrets of key log ``path`` (default: the file ``$SSLKEYLOGFILE`` names) as the text
    shipped to the executors; None without a key log."""
    kl = open_keylog(path, environment=True)
    return None if kl is None else kl.text()
