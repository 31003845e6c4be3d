"""``amqp-dissect archive`` (Spark analysis of capture archives) and ``amqp-dissect split``.

Registered on the typer app by ``register(app)`` (called by cli/main.py); exit codes
and failures come from cli/common.py.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from amqp_dissect.pipelines.exits import input_error_exit
from amqp_dissect.pipelines.options import ARCHIVE_OPTIONS, ARCHIVE_PATHS_HELP, spark_settings

from . import common
from .common import EXIT_DAMAGED, EXIT_OK, Fail, load_keylog
from .options import MAX_COUNT, declared_parameter, parse_size_option, seconds_option, with_parameters


def _fail(code_name: str, message: str) -> Fail:
    return Fail(getattr(common, code_name), message)


def archive(paths, out, master, conf, packages, executor_memory, driver_memory, partitions, split_size, window,
            frames, messages, port, full, dry_run, keylog):
    """Analyse an archive of captures (rotated, daily folders, gzip) with Spark: parquet tables
    connections, sessions, links, deliveries, stalls, transactions, violations, errors (+ frames),
    partitioned by day, and latency / outcome / stall summaries.  Run again with the same --out on
    a set that has grown, it adds the new files (a changed or vanished file is refused)."""
    # pyspark first (it starts the JVM); pyarrow and pandas, the rest of the extra, are imported
    # while the JVM starts (_Starting)
    entered = time.time()
    size = parse_size_option("--split-size", split_size, least=0)  # (a usage error before the JVM starts)
    common.need_extra("archive", "spark", ("pyspark",))
    pairs = _spark_settings(conf)
    if packages:
        pairs.append(("spark.jars.packages", packages))
    files = _local_files(paths)
    keylog = load_keylog(keylog, notes=False)  # (its secrets are shipped to the executors as text)
    _check_out(out)
    plan = _plan_directory(out, paths, files, full, dry_run,
                           dict(ports=port, frames=frames, window=window, messages=messages))

    from pyspark.sql import SparkSession

    own = SparkSession.getActiveSession() is None  # (a session of this process is left running)
    spark = _session(dict(master=master, conf=pairs, driver_memory=driver_memory, executor_memory=executor_memory),
                     own, out if plan is not None and not plan.full else None)
    started = time.time()
    ending = _EarlyEnd(spark) if own and plan is not None else None
    try:
        res = _run_job(spark, files, dict(paths=paths, out=str(out), split_size=size, window=window, frames=frames,
                                          partitions=partitions, ports=port or [], keylog=keylog, messages=messages),
                       directory=plan is not None, full=full, ending=ending)
    except BaseException as e:
        raise _ended(spark, own, e, ending) from None
    if res.get("stats", {}).get("timings"):  # (the plan and the JVM's and Spark's start, before the job's steps)
        res["stats"]["timings"] = {"start": round(started - entered, 3), **res["stats"]["timings"]}
    try:
        _print_summary(spark, res, len(files))
    except BaseException as e:
        raise _ended(spark, own, e, ending) from None
    _ended(spark, own, None, ending)  # (stopped once the summary is read back; the JVM too: this process ends)
    for path, err in res["errors"]:
        print(f"amqp-dissect: {path}: {err}", file=sys.stderr)
    raise typer.Exit(EXIT_DAMAGED if res["errors"] else EXIT_OK)


def _ended(spark, own: bool, error: BaseException | None = None, ending: "_EarlyEnd | None" = None
           ) -> BaseException | None:
    """The end of the job's Spark session when ``own`` (this process started it; the JVM too: this
    process ends): after a run that went well (no ``error``) the JVM's log is removed; after a
    failure it is kept, and the error to raise names it (a one-line failure: the same line with the
    log's path, the session stopped; any other exception, a bug: the line cli.main prints for one,
    unless AMQP_DISSECT_DEBUG asks for its traceback; a KeyboardInterrupt as it is).  ``ending``:
    the stop the run may have begun already (:class:`_EarlyEnd`), waited for here instead."""
    if not own:
        return error
    from amqp_dissect.pipelines.spark_runtime.session import finish_spark_log, stop_session

    if error is None or isinstance(error, Fail):  # (any other exception ends the process, and the JVM with its pipe)
        if ending is not None and ending.begun():
            ending.wait(raise_error=error is None)  # (the JVM has exited: its log is whole)
        else:
            stop_session(spark, end_jvm=True)
    if error is None:
        common.exit_quickly()
        finish_spark_log(True)
        return None
    log = finish_spark_log(False)
    if log is None or not isinstance(error, Exception) or os.environ.get("AMQP_DISSECT_DEBUG"):
        return error
    if isinstance(error, Fail):
        return Fail(error.code, f"{error} (Spark's log: {log})")
    return Fail(common.EXIT_INTERNAL, f"internal error: {type(error).__name__}: {error} (a bug; "
                                      f"AMQP_DISSECT_DEBUG=1 shows details; Spark's log: {log})")


# typer reads archive's parameters from the archive job's declarations (shared with spark-submit's entry)
with_parameters(archive, [inspect.Parameter("paths", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            annotation=Annotated[List[str], typer.Argument(help=ARCHIVE_PATHS_HELP)])]
                + [declared_parameter(option) for option in ARCHIVE_OPTIONS])


def _local_files(paths: list[str]) -> list[str]:
    """The capture files of the local ``paths`` (URIs are checked once Spark runs, before any
    work); a path missing or not a capture: one line and exit 3 or 4."""
    from amqp_dissect.pipelines.archive import InputError, expand_inputs
    from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path

    local = [local_path(p) for p in paths if is_local(p)]
    try:
        return expand_inputs(local) if local else []
    except InputError as e:
        raise Fail(input_error_exit(e.code), str(e)) from None


def _plan_directory(out: str, paths: list, files: list, full: bool, dry_run: bool, options: dict):
    """The plan of a run into the archive directory ``--out`` (a local path), printed, before any
    Spark: a changed or vanished file or other options: one line and exit 2; ``--dry-run`` or
    nothing new: exit 0 here, nothing written.  None for a Hadoop URI ``--out`` (a whole run,
    written as before)."""
    from amqp_dissect.capture.tcp import IDLE_TIMEOUT
    from amqp_dissect.pipelines.archive.directory import ArchiveDir, Refused, option_values, plan_run
    from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path

    if not is_local(out):
        if dry_run:
            print(f"run: full, over {len(files)} local file(s) and every file of "
                  f"{len([p for p in paths if not is_local(p)])} URI(s), the tables of {out} replaced "
                  "(a Hadoop URI --out is written whole by every run)")
            raise typer.Exit(EXIT_OK)
        return None
    remote = [p for p in paths if not is_local(p)]
    try:
        plan = plan_run(ArchiveDir(local_path(out)), files, option_values(idle_timeout=IDLE_TIMEOUT, **options), full,
                        remote)
    except Refused as e:
        raise _fail("EXIT_USAGE", str(e)) from None
    for line in plan.lines():
        print(line)
    if plan.refusal():
        raise _fail("EXIT_USAGE", plan.refusal())
    if dry_run or plan.nothing_new:
        if dry_run and not plan.nothing_new:
            print(f"(--dry-run: nothing run, nothing written to {out})")
        raise typer.Exit(EXIT_OK)
    sys.stdout.flush()
    return plan


def _check_out(out: str) -> None:
    """``--out``: a local path that exists must be a directory (one line and exit 2)."""
    from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path

    if is_local(out) and os.path.exists(local_path(out)) and not os.path.isdir(local_path(out)):
        raise _fail("EXIT_USAGE", f"--out {out}: exists and is not a directory")


def _session(settings: dict, own: bool, resumes: str | None = None):
    """The Spark session of the job (started in the background when ``own``: no session of this
    process runs; the driver's imports are made meanwhile, and the checkpoint of the archive
    directory ``resumes``, a run that continues, is loaded); the spark extra checked whole while
    the JVM starts (one line and exit 6, the session stopped, without it)."""
    from amqp_dissect.pipelines import spark as sj

    starting = _Starting(settings, background=own)
    missing = common.missing_extra("spark")  # (imported now, while the JVM starts)
    _job_imports()
    if resumes is not None and own and not missing:
        from amqp_dissect.pipelines.spark.archive_dir import prefetch_checkpoint
        from amqp_dissect.pipelines.spark_runtime.fs import local_path

        prefetch_checkpoint(local_path(resumes))
    spark = starting.session()
    if missing:
        if own:
            sj.stop_session(spark, end_jvm=True)
            sj.finish_spark_log(True)  # (the line below says all there is to say)
        common.need_extra("archive", "spark")  # (its one line and exit code)
    return spark


def _run_job(spark, files: list[str], job: dict, directory: bool = False, full: bool = False,
             ending: "_EarlyEnd | None" = None) -> dict:
    """The archive job (``job``: run_archive's arguments; ``directory``: a run of the archive
    directory ``--out``) with its progress on stderr; an input that cannot be read (a path
    missing, a scheme without its connector, not a capture): one line and exit 3 or 4; a run
    the archive refuses (a file changed since the plan): one line and exit 2.  ``ending``: begun
    by a run of the archive directory once it needs Spark no more (:class:`_EarlyEnd`)."""
    from amqp_dissect.pipelines.archive import InputError
    from amqp_dissect.pipelines.archive.directory import Refused
    from amqp_dissect.pipelines import spark as sj

    from .progress import SparkProgress

    try:
        with SparkProgress(spark.sparkContext, sum(_file_size(f) for f in files)) as progress:
            if directory:
                from amqp_dissect.pipelines.spark.archive_dir import run_archive_dir

                done = None if ending is None else (lambda: ending.begin(progress))
                return run_archive_dir(spark, full=full, spark_done=done, **job)
            return sj.run_archive(spark, **job)
    except InputError as e:
        raise Fail(input_error_exit(e.code), str(e)) from None
    except Refused as e:
        raise Fail(common.EXIT_USAGE, str(e)) from None


class _EarlyEnd:
    """The end of the session this process started (the SparkContext stopped, then the driver JVM's
    exit waited for: ``stop_session(end_jvm=True)``), begun in a thread of its own by a run of an
    archive directory as soon as it needs Spark no more (after the tables step), so that the JVM's
    stop and exit go on while the run computes its summaries (in this process), saves its
    checkpoint, publishes and the command prints its summary (which reads the local summary files
    with pyarrow, not Spark); :func:`_ended` waits for it.  The progress display is stopped first (it polls the context)."""

    def __init__(self, spark):
        self._spark = spark
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def begin(self, progress=None) -> None:
        if self._thread is not None:
            return
        if progress is not None:
            progress.__exit__(None, None, None)
        self._thread = threading.Thread(target=self._stop, name="amqp-dissect-session-stop", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        from amqp_dissect.pipelines.spark_runtime.session import stop_session

        try:
            stop_session(self._spark, end_jvm=True)
        except BaseException as e:  # (raised again by wait, in the command's thread)
            self._error = e

    def begun(self) -> bool:
        return self._thread is not None

    def wait(self, raise_error: bool = True) -> None:
        self._thread.join()
        if self._error is not None and raise_error:
            raise self._error


class _Starting:
    """The Spark session, started in a thread of its own when ``background`` (the JVM's start takes
    seconds in which this process only waits for it: the driver's imports are made meanwhile),
    else here and now (a session of this process exists already: getOrCreate returns it).
    ``session()`` returns it as soon as its SparkContext runs (a :class:`PendingSession`: the
    thread makes the SparkSession only once something asks for it, since the job's local steps
    need only the context; stopping it unasked stops the context and ends the thread), or
    raises what the start raised."""

    def __init__(self, settings: dict, background: bool):
        from amqp_dissect.pipelines.spark_runtime.session import PendingSession, spark_session

        self._result: list = []
        self._pending: list = []
        if not background:
            self._result.append((spark_session(**settings), None))
            self._thread = None
            return
        ready = threading.Event()
        made = threading.Event()
        wanted = threading.Event()  # the session is asked for (or, with self._unwanted, never will be)
        self._unwanted = False

        def wait():
            made.wait()
            spark, error = self._result[0]
            if error is not None:
                raise error
            return spark

        def release():
            self._unwanted = True
            wanted.set()

        def on_context(sc):
            # the job's local steps need only the context: the session is made when asked for
            self._pending.append(PendingSession(sc, wait, need=wanted.set, release=release))
            ready.set()
            wanted.wait()
            if self._unwanted:
                raise _Unwanted

        def run():
            try:
                spark = spark_session(**settings, on_context=on_context)
                for p in self._pending:
                    p.made(spark)
                self._result.append((spark, None))
            except BaseException as e:  # (raised again in the caller's thread)
                self._result.append((None, e))
            finally:
                made.set()
                ready.set()

        self._ready = ready
        # (a daemon thread: a Ctrl-C in the main thread ends the process, and with it the JVM's pipe)
        self._thread = threading.Thread(target=run, name="amqp-dissect-session-start", daemon=True)
        self._thread.start()

    def session(self):
        if self._thread is None:
            return self._result[0][0]
        self._ready.wait()
        if self._pending:
            return self._pending[0]
        self._thread.join()
        spark, error = self._result[0]
        if error is not None:
            raise error
        return spark


class _Unwanted(Exception):
    """Ends the session's thread when the job stopped without asking for the session."""


def _job_imports() -> None:
    """What the driver imports after the session is up (the job, its steps, the summaries' and the
    summary lines' readers), imported while the JVM starts: pyspark's own imports at the session's start
    (``pyspark.testing.utils``, which a Py4J argument converter imports, and with it pandas) first,
    so that the session's thread finds them done rather than both threads importing at once."""
    import importlib

    for name in ("pyspark.testing.utils", "amqp_dissect.pipelines.spark.job", "amqp_dissect.pipelines.spark_runtime.fs",
                 "pyarrow.parquet", "amqp_dissect.cli.progress",
                 # (the summaries, which a run of an archive directory computes in this process)
                 "pyarrow.dataset", "pyarrow.acero", "pyarrow.pandas_compat"):
        try:
            importlib.import_module(name)
        except ImportError:  # (imported again where it is used: the error shows there)
            pass


def _spark_settings(conf: list[str] | None) -> list[tuple[str, str]]:
    """``--conf KEY=VALUE`` options as (key, value) pairs (one line and exit 2 for one without ``=``)."""
    try:
        return spark_settings(conf)
    except ValueError as e:
        raise Fail(common.EXIT_USAGE, str(e)) from None


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _print_summary(spark, res: dict, nfiles: int) -> None:
    st, c = res["stats"], res["counts"]
    w = sys.stdout.write
    w(f"files: {nfiles} ({st['ranges']} ranges read; {st['records']} records, {st['tcp_records']} TCP, "
      f"{st['flows']} flows) in {st['seconds']:.1f} s\n")
    if res.get("order"):  # a set: the order read and the files missing from it, as the report's header says them
        from amqp_dissect.render.report import capture_lines

        for line in capture_lines({"files": res["files"], "order": res["order"], "gaps": res.get("gaps")}):
            if line.startswith(("order: ", "gap in the set: ")):
                w(line + "\n")
    if res.get("clock_steps"):  # steps back of the capture clock, as the report's header says them
        from amqp_dissect.render.report import clock_step_line

        for step in res["clock_steps"]:
            w(clock_step_line(step) + "\n")
    if st.get("redo_files"):
        w(f"read whole after the byte ranges did not chain: {len(st['redo_files'])} file(s)\n")
    if res.get("run") is not None:  # a run of an archive directory: what it did
        _print_run(res)
    w("tables: " + ", ".join(f"{t} {n}" for t, n in c.items()) + f"  -> {res['out']}\n")
    summaries = [t for t in res["tables"] if t not in c]
    w("summaries: " + ", ".join(summaries) + "\n")
    top = _top_latency(spark, res["tables"]["latency_by_link"])
    if top:
        w("highest settlement latency p99 by link (seconds):\n")
        w(f"  {'connection':<44} {'link':<24} {'count':>7} {'p50':>10} {'p90':>10} {'p99':>10} {'max':>10}\n")
        for r in top:
            w(f"  {str(r['connection'])[:44]:<44} {str(r['link'])[:24]:<24} {r['count']:>7} "
              + " ".join(f"{r[k]:>10.6f}" for k in ("p50", "p90", "p99", "max")) + "\n")
    else:
        w("no settled deliveries\n")


def _print_run(res: dict) -> None:
    """What a run of an archive directory did: continued or full, the flows carried over, the
    checkpoint's size, the rows it wrote, the seconds per stage."""
    w = sys.stdout.write
    plan = res["plan"]
    how = (f"continued from the checkpoint over {len(plan.new)} new file(s)" if res["resumed"]
           else f"full, over all {len(plan.paths)} input(s) ({plan.why_full})")
    w(f"run {res['run']}: {how}; {res['carried']} flow(s) carried over to the next run, checkpoint "
      f"{res['checkpoint_bytes']} bytes\n")
    w("rows written by this run: " + ", ".join(f"{t} {n}" for t, n in res["new_rows"].items()) + "\n")
    timings = res["stats"].get("timings") or {}
    w("time per stage: " + ", ".join(f"{k} in {v:.1f} s" for k, v in timings.items()) + "\n")


def _top_latency(spark, uri: str, n: int = 5) -> list[dict]:
    from urllib.parse import urlparse

    u = urlparse(uri)
    if u.scheme in ("", "file") and os.path.isdir(u.path):
        # (pyarrow, not pandas: a few rows, and pandas' import alone cost the driver about a second)
        import pyarrow.parquet as pq

        rows = pq.read_table(u.path, columns=["connection", "link", "count", "p50", "p90", "p99", "max"]).to_pylist()
        rows = [r for r in rows if r["count"] is not None and r["count"] > 0]
        # p99 descending then connection ascending, nulls last in each (as pandas sorts them), stable
        rows.sort(key=lambda r: (r["connection"] is None, r["connection"] or ""))
        rows.sort(key=lambda r: (0, -r["p99"]) if r["p99"] is not None and r["p99"] == r["p99"] else (1, 0.0))
        return rows[:n]
    rows = spark.read.parquet(uri).where("count > 0").limit(n).collect()
    return [r.asDict() for r in rows]


def split(
    capture: str = typer.Argument(..., help="pcap or pcapng file, optionally gzip-compressed; - for standard input"),
    out: Path = typer.Option(..., "--out", "-o", help="directory for the parts"),
    packets: Optional[int] = typer.Option(None, "--packets", min=1, max=MAX_COUNT, help="records per file"),
    size: Optional[str] = typer.Option(None, "--bytes", help="file size limit (bytes, or with k/m/g), like tcpdump -C"),
    seconds: Optional[float] = seconds_option(None, "--seconds", least=0.000001,
                                              help="a new file every N seconds of capture time, like tcpdump -G"),
    gzip_output: bool = typer.Option(False, "--gzip", help="gzip-compress the parts (.pcap.gz)"),
    name: Optional[str] = typer.Option(None, "--name", help="file name prefix (default: the capture's name)"),
    force: bool = typer.Option(False, "--force", help="remove the parts of an earlier split of the same name "
                                                      "in --out first (without it, the split refuses)"),
):
    """Write a capture as rotated pcap files NAME_00000.pcap, NAME_00001.pcap, ... (in order)."""
    from amqp_dissect.pipelines.archive.split import split_capture

    if sum(x is not None for x in (packets, size, seconds)) != 1:
        raise _fail("EXIT_USAGE", "give exactly one of --packets, --bytes, --seconds")
    nbytes = _part_bytes(size)
    if capture != "-" and os.path.isdir(capture):
        raise _fail("EXIT_OPEN", f"{capture}: is a directory, not a capture file")
    _parts_folder(out)
    with _split_failures(capture, out):
        res = split_capture(capture, str(out), packets=packets, bytes=nbytes, seconds=seconds,
                            gzip_output=gzip_output, name=name, force=force)
    print(f"{res.records} records -> {len(res)} files in {out}" + (f" ({os.path.basename(res[0])} ... "
                                                                  f"{os.path.basename(res[-1])})" if res else ""))
    if res.clamped:
        print(f"amqp-dissect: {capture}: {res.clamped} record(s) have a time a pcap file cannot hold "
              "(before 1970 or after 2106): written clamped to that range", file=sys.stderr)
    if res.error:
        print(f"amqp-dissect: {capture}: {res.error}", file=sys.stderr)
        raise typer.Exit(EXIT_DAMAGED)
    raise typer.Exit(EXIT_OK)


def _part_bytes(size: str | None) -> int | None:
    """``--bytes``: a positive size (bytes, or with k/m/g), or None without the option."""
    if size is None:
        return None
    return parse_size_option("--bytes", size)


def _parts_folder(out: Path) -> None:
    """``--out``: made if missing; it must be writable."""
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise _fail("EXIT_OPEN", f"--out {out}: cannot create the directory: {e.strerror or e}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise _fail("EXIT_OPEN", f"--out {out}: cannot write in the directory: permission denied")


@contextmanager
def _split_failures(capture: str, out: Path):
    """The failures of a split as one line and an exit code: parts of an earlier split in the way,
    the capture missing, unreadable or not a capture, a part that cannot be written."""
    from amqp_dissect.errors import CaptureError
    from amqp_dissect.pipelines.archive.split import SplitExists

    try:
        yield
    except SplitExists as e:
        raise _fail("EXIT_USAGE", f"--out {out}: holds {len(e.parts)} part(s) of an earlier split "
                                  f"({os.path.basename(e.parts[0])} ...): give --force to remove them, "
                                  "or another --out or --name") from None
    except FileNotFoundError:
        raise _fail("EXIT_OPEN", f"{capture}: no such file") from None
    except CaptureError as e:
        raise _fail("EXIT_FORMAT", f"{capture}: {e}") from None
    except OSError as e:
        if e.filename is not None and os.fspath(e.filename) != str(capture):  # an output part
            raise _fail("EXIT_OPEN", f"{e.filename}: cannot write: {e.strerror or e}") from None
        raise _fail("EXIT_OPEN", f"{capture}: cannot open: {e.strerror or e}") from None


def register(app: typer.Typer) -> None:
    """Add the ``archive`` and ``split`` commands to the amqp-dissect typer app."""
    app.command(name="archive")(archive)
    app.command(name="split")(split)
