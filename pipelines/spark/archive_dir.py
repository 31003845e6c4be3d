"""An archive directory that grows run by run (issue 43): :func:`run_archive_dir`, the job of
``amqp-dissect archive IN... --out DIR`` for a local ``DIR`` (a Hadoop URI output is written whole
by :func:`.job.run_archive`, as before).

A run plans (:func:`~amqp_dissect.pipelines.archive.directory.plan_run`: the input files new,
unchanged, changed, vanished against the committed manifest; a changed or vanished file or other
options refuse the run, nothing written), analyses (:func:`_analyse_run`: continued from the
checkpoint of the run before over the new files only, or a full run over every file that says
why), writes the run's final and provisional rows partitioned by day into the new version in its
staging directory, straight from the tables step (flat, then again by day, when the work
directory is not local), the final files of the version before it kept as hard links when the
run continued from its checkpoint, computes the summaries over the whole version (in this process,
once Spark is needed no more), and publishes it
(:meth:`~amqp_dissect.pipelines.archive.directory.ArchiveDir.publish`: one atomic rename)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass

from amqp_dissect.capture.tcp import IDLE_TIMEOUT
from amqp_dissect.pipelines.archive import DEFAULT_SPLIT_SIZE, InputError
from amqp_dissect.pipelines.archive.directory import (CHECKPOINT, NO_CHECKPOINT, ArchiveDir, Plan, Refused, manifest_of,
                                                      option_values, plan_run, reach)

from .summaries import DEFAULT_WINDOW, SUMMARIES, write_summaries_here


@dataclass
class RunAnalysis:
    """What :func:`_analyse_run` made: the analysed run (its rows), whether it continued from the
    checkpoint of the run before, the flows it carried over to the next run, and its checkpoint
    (an object with ``save(directory)`` and ``size_bytes()``, or None)."""

    done: object
    resumed: bool
    carried: int
    checkpoint: object | None
    started: float = 0.0  # when the analysis began (time.time(); the checkpoint, when loaded, was before)


def _analyse_run(spark, plan: Plan, archive: ArchiveDir, work: str, **analysis) -> RunAnalysis:
    """The analysis of a run (the ONE place the analysis side's checkpoint interface is used):
    continued from the checkpoint of the committed run over the new files only, or (a full run:
    ``--full``, the first run, no checkpoint, or the checkpoint cannot be continued from, which
    ``plan.why_full`` then says) from nothing over every file."""
    from .job import analyse

    resume = None
    if not plan.full:
        resume = _load_checkpoint(plan, archive)
    analysis["t0"] = time.time()  # (the analysis' steps timed from here: the checkpoint's load is a step of its own)
    if resume is not None:
        from amqp_dissect.pipelines.archive.checkpoint import CannotContinue

        try:
            done = analyse(spark, [f.path for f in plan.new], work, resume=resume, **analysis)
        except CannotContinue as e:
            plan.full, plan.why_full = True, f"cannot continue from the checkpoint: {e}"
            resume = None
        except Exception as e:  # (one raised in a Spark task comes back wrapped: its text names it)
            why = _cannot_continue_in(e)
            if why is None:
                raise
            plan.full, plan.why_full = True, f"cannot continue from the checkpoint: {why}"
            resume = None
    if resume is None:
        done = analyse(spark, plan.paths, work, **analysis)
    return RunAnalysis(done=done, resumed=resume is not None, carried=len(done.carried), checkpoint=done.checkpoint,
                       started=analysis["t0"])


def _write_run_tables(spark, got: RunAnalysis, flat: str, provisional: str) -> str | None:
    """The run's tables written flat under ``flat`` (its final rows), and its provisional rows (those
    of the flows carried over, which the next run makes again) under ``provisional``: returns that
    folder, or None when every row is final (nothing carried over).  The other place (with
    :func:`_analyse_run`) the analysis side's interface is used: its final and provisional rows."""
    from .job import write_split_tables, write_tables

    done = got.done
    if not got.carried:
        write_tables(spark, done, "file://" + flat)
        return None
    write_split_tables(spark, done, flat, provisional)  # (one job; each row in exactly one of the two: checked)
    return provisional


def _write_version_tables(spark, got: RunAnalysis, version: str, run: int, previous: str | None, flat: str,
                          provisional: str, spark_done=None) -> dict:
    """The run's tables written into its new ``version``, partitioned by day: straight from the
    tables step when the work directory is local (by this process with a local master, calling
    ``spark_done`` first; else one Spark job), else flat under ``flat`` (and ``provisional``) and
    again by day.  Returns table -> rows written (final and provisional)."""
    from . import tables as T
    from .job import write_dated_run_tables

    new_rows = write_dated_run_tables(spark, got.done, version, run, previous, spark_done)
    if new_rows is not None:
        reach("staged")  # (the tables are staged and partitioned at once)
        return new_rows
    prov = _write_run_tables(spark, got, flat, provisional)
    reach("staged")
    return T.write_dated_tables(spark, flat, version, run, list(got.done.counts), prov, meter=got.done.meter,
                                previous=previous)


def _cannot_continue_in(error: Exception) -> str | None:
    """The reason of a :class:`CannotContinue` raised in a Spark task (the driver gets it as the
    task's error text), or None for any other error."""
    import re

    m = re.search(r"CannotContinue: (.+)", str(error))
    return m.group(1).strip() if m else None


def _load_checkpoint(plan: Plan, archive: ArchiveDir):
    """The committed run's checkpoint (the one :func:`prefetch_checkpoint` loaded, when it is the
    same files), or None with ``plan`` made a full run saying why."""
    from amqp_dissect.pipelines.archive.checkpoint import CannotContinue, Checkpoint

    where = (plan.manifest or {}).get("checkpoint")
    if not where:
        plan.full, plan.why_full = True, NO_CHECKPOINT
        return None
    path = os.path.join(archive.current_version(), where)
    ready = _PREFETCHED.pop(_files_key(path), None)
    if ready is not None:
        return ready
    try:
        return Checkpoint.load(path)
    except CannotContinue as e:
        plan.full, plan.why_full = True, f"cannot continue from the checkpoint: {e}"
        return None


_PREFETCHED: dict = {}  # _files_key of a checkpoint's directory -> the Checkpoint loaded from it


def _files_key(directory: str) -> tuple | None:
    """What says a checkpoint's files are the ones loaded before: each file's name, size,
    modification time and inode (None when the directory cannot be read)."""
    try:
        return (os.path.realpath(directory),) + tuple(
            (e.name, st.st_size, st.st_mtime_ns, st.st_ino)
            for e in sorted(os.scandir(directory), key=lambda e: e.name) for st in (e.stat(),))
    except OSError:
        return None


def prefetch_checkpoint(out: str) -> None:
    """Load the checkpoint of the archive ``out``'s committed run now (the command does this while
    the JVM starts), for the run's :func:`_load_checkpoint` to take when its files are still the
    same (the run locks the archive after this: another run may have published in between);
    any failure is left for that load to meet and report."""
    from amqp_dissect.pipelines.archive.checkpoint import Checkpoint

    try:
        archive = ArchiveDir(out)
        where = (archive.manifest() or {}).get("checkpoint")
        if not where:
            return
        path = os.path.join(archive.current_version(), where)
        key = _files_key(path)
        cp = Checkpoint.load(path)
        if key is not None and _files_key(path) == key:
            _PREFETCHED.clear()
            _PREFETCHED[key] = cp
    except Exception:  # (the run's own load says what is wrong)
        return


def run_archive_dir(spark, paths, out: str, *, full: bool = False, split_size: int = DEFAULT_SPLIT_SIZE,
                    window: float = DEFAULT_WINDOW, frames: bool = False, partitions: int | None = None, ports=(),
                    idle_timeout: float = IDLE_TIMEOUT, keylog=None, messages: bool = False,
                    spark_done=None) -> dict:
    """One run of the archive directory ``out`` (a local path) over the capture files of ``paths``
    (local: the whole set, grown since the last run).  Returns :func:`.job.run_archive`'s dict plus
    ``plan`` (:class:`Plan`), ``run`` (its number), ``resumed``, ``carried`` (flows carried over),
    ``checkpoint_bytes``, ``new_rows`` (table -> rows this run wrote).  Raises :class:`Refused`
    (nothing written) or :class:`InputError`.

    ``spark_done``: called (no argument) once the run needs Spark no more, after its last Spark
    job (the tables step's) and before what is left of it (the summaries, computed in this process
    from the written tables; the checkpoint's save, the publication): the command begins the
    session's stop and the JVM's exit there, beside that rest."""
    from amqp_dissect.pipelines.archive import expand_inputs
    from amqp_dissect.pipelines.spark_runtime.fs import is_local, local_path

    t0 = time.time()
    local = [local_path(p) for p in paths if is_local(p)]
    files = expand_inputs(local) if local else []
    remote = [p for p in paths if not is_local(p)]
    if remote:  # (checked before any work: one line for a scheme without its connector)
        from amqp_dissect.pipelines.spark_runtime.fs import check_uri

        for uri in remote:
            check_uri(spark, uri, must_exist=True)
    archive = ArchiveDir(local_path(out))
    options = option_values(ports=ports, frames=frames, window=window, idle_timeout=idle_timeout, messages=messages)
    archive.lock()
    try:
        archive.clean_stale()
        plan = plan_run(archive, files, options, full, remote)
        refusal = plan.refusal()
        if refusal:
            raise Refused(refusal)
        if plan.nothing_new:
            return _unchanged(archive, plan, t0)
        return _run(spark, archive, plan, options, t0, dict(split_size=split_size, frames=frames,
                                                             partitions=partitions, ports=ports,
                                                             idle_timeout=idle_timeout, keylog=keylog,
                                                             messages=messages), window, spark_done)
    finally:
        archive.unlock()


def _run(spark, archive: ArchiveDir, plan: Plan, options: dict, t0: float, analysis: dict, window: float,
         spark_done=None) -> dict:
    """A run that writes: analysed, staged, partitioned, summarised, published (``spark_done``: see
    :func:`run_archive_dir`)."""
    from . import tables as T

    run = archive.next_run(plan.manifest)
    staging = archive.staging(run)
    work, flat, version = (os.path.join(staging, n) for n in ("work", "flat", "version"))
    planned = time.time()
    got = _analyse_run(spark, plan, archive, "file://" + work + "/_work", **analysis)
    done = got.done
    # (the steps before the analysis': the plan, from the run's start; the checkpoint's load)
    done.clock.marks = {"plan": round(planned - t0, 3), "checkpoint": round(got.started - planned, 3),
                        **done.clock.marks}
    reach("analysed")
    tables = list(done.counts)
    previous = archive.current_version() if got.resumed else None
    os.makedirs(version)
    kept = T.keep_final_files(previous, version, tables) if got.resumed else 0
    ended: list = []

    def needs_spark_no_more() -> None:  # (said once: with a local master, before the tables step)
        if spark_done is not None and not ended:
            ended.append(True)
            spark_done()
    try:
        new_rows = _write_version_tables(spark, got, version, run, previous, flat, os.path.join(staging, "provisional"),
                                         needs_spark_no_more)
    finally:
        done.cleanup(False)
    done.mark("partition")
    reach("partitioned")
    needs_spark_no_more()  # (no Spark job from here on: the summaries, the checkpoint, the manifest, files)
    _, cpu = write_summaries_here(version, window)
    done.meter.add("summaries", cpu)
    done.mark("summaries")
    reach("summaries")
    checkpoint, size = _save_checkpoint(got, version)
    stats = {"files": len(plan.files), "new_files": len(plan.new), "resumed": got.resumed, "carried": got.carried,
             "checkpoint_bytes": size, "kept_files": kept, "new_rows": new_rows,
             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    names = tables + list(SUMMARIES)
    archive.publish(version, run, manifest_of(plan, run, options, stats, checkpoint), names)
    done.mark("publish")
    shutil.rmtree(os.path.join(archive.staging_root), ignore_errors=True)
    done.stats["timings"] = done.clock.marks
    done.stats["cpu"] = done.meter.seconds()
    done.stats["seconds"] = round(time.time() - t0, 3)
    return _result(archive, plan, run, done, got, size, new_rows, names)


def _save_checkpoint(got: RunAnalysis, version: str) -> tuple:
    """The run's checkpoint saved in its version: (its place in the version, bytes), or (None, 0)."""
    if got.checkpoint is None:
        return None, 0
    got.checkpoint.save(os.path.join(version, CHECKPOINT))
    return CHECKPOINT, int(got.checkpoint.size_bytes())


def _result(archive: ArchiveDir, plan: Plan, run: int, done, got: RunAnalysis, size: int, new_rows: dict,
            names: list) -> dict:
    base = "file://" + archive.root
    # (the published tables' rows: every run's final rows and this run's provisional ones, which the
    # analysis counts, set_counts; not a walk over every file of the archive)
    counts = {t: done.set_counts[t] for t in new_rows}
    return {"counts": counts, "tables": {n: base + "/" + n for n in names},
            "files": done.files, "errors": done.errors, "stats": done.stats, "out": base, "order": done.order,
            "gaps": done.gaps, "clock_steps": done.clock_steps, "plan": plan, "run": run, "resumed": got.resumed,
            "carried": got.carried, "checkpoint_bytes": size, "new_rows": new_rows}


def _unchanged(archive: ArchiveDir, plan: Plan, t0: float) -> dict:
    """The result of a run that finds nothing new (nothing written)."""
    base = "file://" + archive.root
    return {"plan": plan, "run": None, "out": base, "errors": [], "stats": {"seconds": round(time.time() - t0, 3)},
            "counts": {}, "tables": {}, "files": [f.path for f in plan.files]}


def table_rows(root: str, tables: list) -> dict:
    """table -> rows of the published archive ``root`` (from the Parquet files' footers)."""
    import pyarrow.parquet as pq

    out = {}
    for t in tables:
        n = 0
        for d, _, files in os.walk(os.path.join(root, t), followlinks=True):
            for name in files:
                if name.endswith(".parquet") and not name.startswith((".", "_")):
                    n += pq.ParquetFile(os.path.join(d, name)).metadata.num_rows
        out[t] = n
    return out


__all__ = ["run_archive_dir", "RunAnalysis", "Refused", "InputError", "table_rows"]  # (InputError: raised here)
