"""The DataFrame API: :func:`read_captures` (also ``amqp_dissect.spark.read_captures``).

    from amqp_dissect.spark import read_captures
    t = read_captures(spark, ["hdfs:///captures/2026-11-*/"], ports=[5673])
    t["deliveries"].join(t["links"], ["connection", "link_index"]).groupBy("address").count().show()

The captures are decoded when it is called (stage 1, stage 2 and their reruns, as ``archive``
does: the driver needs the files' order and the flows' facts); the tables and summaries are
DataFrames over the rows that left in the work directory, computed when an action asks.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time

from amqp_dissect.capture.tcp import IDLE_TIMEOUT
from amqp_dissect.pipelines.archive import DEFAULT_SPLIT_SIZE

from .summaries import DEFAULT_WINDOW, SUMMARIES, SUMMARY_READS, summary_frame


class CaptureTables(dict):
    """name -> Spark DataFrame: the tables (the registry's columns and Spark types: times as
    ``timestamp``, integers as ``bigint``, ulong as ``decimal(20,0)``, nested cells as JSON text)
    and the summaries.  Also: ``counts`` (rows per table; those of messages and requests counted
    by a Spark job when first read), ``files`` (in capture order),
    ``errors`` ((path, damage) pairs: the files damaged), ``order``, ``gaps``, ``clock_steps`` (the
    steps back of the capture's clock, as the report's ``capture["clock_steps"]``), ``stats``, and
    ``work`` (the directory the DataFrames read; :meth:`close` removes it)."""

    counts: dict
    files: list
    errors: list
    order: str | None
    gaps: list
    clock_steps: list
    stats: dict
    work: str

    def close(self) -> None:
        """Remove the work directory (the DataFrames cannot be computed afterwards)."""
        cleanup = getattr(self, "_cleanup", None)
        if cleanup is not None:
            cleanup(False)
            self._cleanup = None


class _Counts(dict):
    """Rows per table: those the job counted as it decoded, and those of the tables made across
    the flows (messages, requests) counted by a Spark job when first asked (``counts[name]``,
    ``get``, ``items``, ...), not by read_captures itself."""

    def __init__(self, known: dict, frames: dict):
        super().__init__(known)
        self._frames = frames

    def _fill(self):
        for t, df in list(self._frames.items()):
            self[t] = df.count()
            del self._frames[t]

    def __missing__(self, key):
        if key in self._frames:
            n = self[key] = self._frames.pop(key).count()
            return n
        raise KeyError(key)

    def __contains__(self, key):
        return dict.__contains__(self, key) or key in self._frames

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        return dict.__len__(self) + len(self._frames)

    def __eq__(self, other):
        self._fill()
        return dict.__eq__(self, other)

    __hash__ = None

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        self._fill()
        return dict.keys(self)

    def values(self):
        self._fill()
        return dict.values(self)

    def items(self):
        self._fill()
        return dict.items(self)

    def __repr__(self):
        self._fill()
        return dict.__repr__(self)


def _default_work(spark) -> tuple[str, bool]:
    master = spark.sparkContext.master
    if master.startswith("local"):
        d = tempfile.mkdtemp(prefix="amqp-dissect-work-")
        return "file://" + d, True
    raise ValueError("read_captures on a cluster: give work=, a directory every executor reaches "
                     "(hdfs://..., s3a://..., or a shared path), for the decoded rows the DataFrames read")


def read_captures(spark, paths, *, ports=(), keylog=None, tables=None, frames: bool = False,
                  summaries: bool = True, window: float = DEFAULT_WINDOW, split_size: int = DEFAULT_SPLIT_SIZE,
                  partitions: int | None = None, idle_timeout: float = IDLE_TIMEOUT, work: str | None = None,
                  messages: bool = False) -> CaptureTables:
    """The tables of the captures under ``paths`` (files, folders, globs; local paths or any
    Hadoop URI the session can read), read as one continuous capture, as Spark DataFrames.

    ``tables``: the table names wanted (default: connections, sessions, links, deliveries,
    stalls, transactions, violations, errors; plus frames with ``frames=True``); ``summaries``:
    also the summaries (latency_by_link, latency_by_address, latency_by_window (``window``
    seconds), outcomes, stalls_by_link, stalls_by_address).  ``messages``: read every delivery's
    message (the deliveries' message columns; without it they are null; the messages and
    requests tables read them anyway).  ``ports``, ``keylog`` (a KeyLog or
    key log text), ``idle_timeout``: as the single-process commands.  ``work``: where the decoded
    rows go (default: a temporary local directory in local mode, removed at exit or by
    :meth:`CaptureTables.close`; required on a cluster).  Rows of each table come in the
    single-process order.  Raises :class:`~amqp_dissect.pipelines.archive.InputError` for paths
    that cannot be read (before any work)."""
    from .job import analyse, table_frames

    t0 = time.time()
    temporary = False
    if work is None:
        work, temporary = _default_work(spark)
    work = work.rstrip("/") + "/_work"
    wanted = _wanted(tables, frames)
    frames = frames or "frames" in wanted
    try:
        # the messages are read (the deliveries' message columns; else null) when asked, and for
        # the tables made of them
        messages = bool(messages) or "messages" in wanted or "requests" in wanted
        done = analyse(spark, paths, work, t0=t0, split_size=split_size, frames=frames, partitions=partitions,
                        ports=ports, idle_timeout=idle_timeout, keylog=keylog, messages=messages)
    except BaseException:
        if temporary:
            shutil.rmtree(work[len("file://"):-len("/_work")], ignore_errors=True)
        raise
    need = _needed(wanted, summaries)
    frames_of = table_frames(spark, done, [t for t in done.counts if t in need])
    _add_cross_flow_tables(spark, wanted, frames_of, done)
    out = CaptureTables({t: frames_of[t] for t in wanted})
    if summaries:
        for name in SUMMARIES:
            out[name] = summary_frame(name, frames_of, window)
    # (the tables made across the flows are counted when asked: a Spark job each)
    out.counts = _Counts({t: done.counts[t] for t in wanted if t in done.counts},
                         {t: frames_of[t] for t in wanted if t not in done.counts})
    out.files, out.errors, out.order, out.gaps = done.files, done.errors, done.order, done.gaps
    out.clock_steps = done.clock_steps
    done.stats["timings"] = done.clock.marks
    done.stats["cpu"] = done.meter.seconds()  # the Python tasks' CPU seconds by step (decoding)
    done.stats["seconds"] = round(time.time() - t0, 3)
    out.stats = done.stats
    out.work = work
    out._cleanup = _cleanup(done.cleanup, work) if temporary else done.cleanup
    return out


def _wanted(tables, frames: bool) -> list[str]:
    """The table names asked for (default: the analysis tables, and frames with ``frames``)."""
    from .job import TABLES

    wanted = list(tables) if tables is not None else list(TABLES) + (["frames"] if frames else [])
    unknown = [t for t in wanted if t not in TABLES + ("frames", "requests", "messages")]
    if unknown:
        raise ValueError(f"unknown table(s) {unknown}: the tables are {', '.join(TABLES)}, frames")
    return wanted


def _needed(wanted: list[str], summaries: bool) -> set:
    """The job's tables read: those wanted, those the requests and messages tables are made of,
    and those the summaries read."""
    need = set(wanted) - {"requests"} | ({"deliveries", "links"} if "requests" in wanted else set())
    need = need - {"messages"} | ({"deliveries", "links", "connections"} if "messages" in wanted else set())
    if summaries:
        need.update(t for reads in SUMMARY_READS.values() for t in reads)
    return need


def _add_cross_flow_tables(spark, wanted: list[str], frames_of: dict, done) -> None:
    """The requests and messages tables, when wanted: made across the flows from the job's tables (``done``: its
    :class:`.job.AnalysedRun`)."""
    if "requests" in wanted:  # (matched across the flows, on the driver: pipelines/spark/requests.py)
        from .requests import requests_frame
        frames_of["requests"] = requests_frame(spark, frames_of["deliveries"], frames_of["links"],
                                               done.stats.get("end_ts"), done.clock_steps)
    if "messages" in wanted:  # (DataFrame operations across the flows: pipelines/spark/messages.py)
        from .messages import messages_frame
        frames_of["messages"] = messages_frame(spark, frames_of["deliveries"], frames_of["links"],
                                               frames_of["connections"], done.clock_steps)


def _cleanup(inner, work: str):
    """The clean-up of a temporary work directory: the job's, then the directory (also at exit)."""
    base = work[:-len("/_work")]

    def cleanup(keep=False, _inner=inner, _base=base):
        _inner(keep)
        if not keep:
            shutil.rmtree(_base[len("file://"):], ignore_errors=True)
    atexit.register(cleanup)
    return cleanup


def read_archive(spark, directory: str, tables=None) -> dict:
    """The tables and summaries of the archive directory ``directory`` (written by ``amqp-dissect
    archive --out``) as Spark DataFrames, name -> DataFrame, read from its published run (resolved
    once: a run published meanwhile does not mix in).  The tables have their ``date`` column (the
    UTC day of the row, from the folders: a filter on it reads only those days); ``tables``: the
    names wanted (default: every table and summary the run wrote)::

        t = read_archive(spark, "DIR")
        t["deliveries"].where("date = '2026-11-22'").groupBy("outcome").count().show()
    """
    import os

    from amqp_dissect.pipelines.archive.directory import ArchiveDir, published_folder

    version = ArchiveDir(directory).current_version()
    if version is None:
        raise FileNotFoundError(f"{directory}: no archive run published here")
    names = tables or sorted(n for n in os.listdir(version) if os.path.isdir(os.path.join(version, n))
                             and not n.startswith((".", "_")) and n != "checkpoint")
    return {n: spark.read.parquet("file://" + published_folder(directory, n)) for n in names}
