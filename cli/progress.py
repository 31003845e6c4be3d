"""Progress on stderr for long runs: bytes read of the total, packets/s, time left (rich).

Shown only while stderr is a terminal, and only once a run has lasted
``AMQP_DISSECT_PROGRESS_AFTER`` seconds (default 2): short runs and piped stderr see nothing.
A thread samples the reader's position a few times a second; the reading loop is not touched.
"""

from __future__ import annotations

import os
import sys
import threading

_AFTER = 2.0  # seconds before the display appears
_EVERY = 0.25  # seconds between samples
_GIVE_UP = 20  # the archive's display ends after this many samples in a row failed (5 s)


def wanted() -> bool:
    try:
        return sys.stderr.isatty() and not os.environ.get("AMQP_DISSECT_NO_PROGRESS")
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    """``h:mm:ss`` of a non-negative number of seconds."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def figures(packets: int, position: int, total: int | None, elapsed: float) -> dict:
    """What the progress line shows, from the reader's own counters: ``packets`` the dissector
    has read and ``position`` the bytes of the input read, ``elapsed`` seconds since the reading
    started (not since the display appeared: a display that shows up after 2 s of a 2.3 s run
    would otherwise divide the run's packets by 0.3 s).  ``rate`` packets/s, ``elapsed`` and
    ``left`` as ``h:mm:ss``; ``left`` is ``unknown`` for a stream (no total) or before a byte
    was read."""
    rate = f"{packets / elapsed:,.0f}" if elapsed > 0 else "unknown"
    if total and position > 0 and elapsed > 0:
        left = _clock(max(0, total - position) * elapsed / position)
    else:
        left = "unknown"
    return {"rate": rate, "elapsed": _clock(max(0.0, elapsed)), "left": left}


class Progress:
    """``with Progress(source): ...`` around the reading of a CaptureSource."""

    def __init__(self, source, label: str = "reading", clock=None):
        import time

        self.source = source
        self.label = label
        self._clock = clock or time.monotonic
        self._t0 = None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        self._t0 = self._clock()  # the reading starts now: the rates count from here
        if wanted():
            self._thread = threading.Thread(target=self._run, name="amqp-dissect-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
        return False

    def sample(self) -> dict:
        """The progress line's values now: ``description``, ``completed`` (bytes read),
        ``total`` (bytes, None for a stream) and the :func:`figures`."""
        src = self.source
        total = src.total_bytes()
        position = src.position()
        name = src.current if src.current is not None else (src.paths[0] if getattr(src, "paths", None) else "")
        out = {"description": f"{self.label} {name}".rstrip(), "completed": position, "total": total}
        out.update(figures(src.dissector.packets, position, total, self._clock() - self._t0))
        return out

    def _run(self) -> None:
        try:
            after = float(os.environ.get("AMQP_DISSECT_PROGRESS_AFTER", _AFTER))
        except ValueError:
            after = _AFTER
        if self._stop.wait(after):
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress as Bar, TextColumn
        from rich.table import Column

        # a long file name is cut, never the figures after it (on an 80-column terminal too)
        name = Column(max_width=24, no_wrap=True, overflow="ellipsis")
        bar = Bar(TextColumn("[bold]{task.description}", table_column=name), BarColumn(bar_width=12), DownloadColumn(),
                  TextColumn("{task.fields[rate]} packets/s"), TextColumn("{task.fields[elapsed]}"),
                  TextColumn("left {task.fields[left]}"), console=Console(file=sys.stderr), transient=True)
        # the first frame shows a sample taken now: no placeholder values
        now = self.sample()
        with bar:
            task = bar.add_task(now.pop("description"), total=now.pop("total"), completed=now.pop("completed"), **now)
            while True:
                done = self._stop.wait(_EVERY)
                now = self.sample()
                bar.update(task, **now)
                if done:
                    bar.refresh()
                    return


# --------------------------------------------------------------------------- archive (Spark)

#: the steps of ``pipelines.spark.run_archive``, by the function the driver is in (innermost first)
_SPARK_STEPS = (
    ("_stage1", "stage 1: reading the captures"),
    ("_stage2", "stage 2: per-flow analysis"),
    ("_stage2_direct", "stage 2: per-flow analysis"),  # (local work: its tasks read the stage-1 files)
    ("write_table", "tables"),
    ("_concurrently", "tables and summaries"),
    ("write_summary", "summaries"),
    ("_run", "numbering, planning"),
    ("run_archive", "starting"),
)
_STEP_LABELS = dict(_SPARK_STEPS)


def spark_step(thread_id: int) -> str:
    """What the driver thread ``thread_id`` is doing in the archive job: its innermost frame in
    the Spark pipeline's steps (``_SPARK_STEPS``), named."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        code = frame.f_code
        label = _STEP_LABELS.get(code.co_name)
        if label is not None and "pipelines" in code.co_filename.replace(os.sep, "/"):
            return label
        frame = frame.f_back
    return "Spark"


def spark_tasks(sc) -> list[tuple[str, int, int, int]]:
    """(stage id, completed tasks, active tasks, tasks) of each active Spark stage (the status
    tracker's view)."""
    tracker = sc.statusTracker()
    out = []
    for sid in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(sid)
        if info is not None:
            out.append((str(sid), info.numCompletedTasks, info.numActiveTasks, info.numTasks))
    return out


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000


class SparkProgress:
    """``with SparkProgress(sc, total_bytes): run_archive(...)``: on stderr (a terminal only, once
    the run lasted ``AMQP_DISSECT_PROGRESS_AFTER`` seconds), the step the driver is in and the
    tasks done / total of the active Spark stages, polled from the status tracker by a thread.
    Stage 1 (the captures read as byte ranges of about equal size) also shows the bytes: the
    share of the total its completed tasks stand for, marked ``~`` (the tracker counts tasks,
    not which ranges they read)."""

    def __init__(self, sc, total_bytes: int | None = None):
        self.sc = sc
        self.total_bytes = total_bytes
        self._stop = threading.Event()
        self._thread = None
        self._driver = threading.get_ident()

    def __enter__(self):
        if wanted():
            self._thread = threading.Thread(target=self._run, name="amqp-dissect-spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
        return False

    def _line(self) -> tuple[str, int | None, int, str]:
        """(description, total tasks or None, completed, details) now."""
        step = spark_step(self._driver)
        stages = spark_tasks(self.sc)
        if not stages:
            return step, None, 0, ""
        done = sum(s[1] for s in stages)
        total = sum(s[3] for s in stages)
        running = sum(s[2] for s in stages)
        details = f"{done}/{total} tasks, {running} running"
        if step.startswith("stage 1") and self.total_bytes and total:
            details += f", ~{_size(self.total_bytes * done / total)} of {_size(self.total_bytes)}"
        ids = ", ".join(s[0] for s in stages)
        return f"{step} (Spark stage{'s' if len(stages) > 1 else ''} {ids})", total, done, details

    def _run(self) -> None:
        try:
            after = float(os.environ.get("AMQP_DISSECT_PROGRESS_AFTER", _AFTER))
        except ValueError:
            after = _AFTER
        if self._stop.wait(after):
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn

        bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[details]}"),
                  TimeElapsedColumn(), console=Console(file=sys.stderr), transient=True)
        with bar:
            task = bar.add_task("archive", total=None, details="")
            failed = 0
            while True:
                try:
                    desc, total, done, details = self._line()
                    failed = 0
                except Exception:
                    # one sample the status tracker could not give (a Py4J call of this thread while the
                    # driver's own are under way) keeps the last line; only a tracker gone for good
                    # (the JVM going away as the run ends) ends the display
                    failed += 1
                    if failed >= _GIVE_UP:
                        return
                else:
                    bar.update(task, description=desc, total=total, completed=done, details=details)
                if self._stop.wait(_EVERY):
                    bar.refresh()
                    return
