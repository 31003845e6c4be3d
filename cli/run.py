"""A capture run of the CLI: the inputs of a command (files, standard input, or the live capture
of ``-i``) read through a CaptureSource, whose failures become one line on stderr and an exit
code (cli/common.py), and the exit status once the output is written."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from amqp_dissect.errors import CaptureError
from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

from .common import EXIT_DAMAGED, EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Fail, load_keylog
from .habits import capture_inputs, check_output
from .option_values import AUTO_JOBS_MAX, AUTO_JOBS_MIN_BYTES


def capture_or_live(captures, read, iface, bpf, count, autostop, write):
    """The files (or stdin) to read, or the live capture of -i (cli/live.py, loaded for it only)."""
    if iface is None:
        if bpf or autostop or write:
            from .live import open_live

            open_live(iface, bpf, count, autostop, write)  # (says which option needs -i)
        return capture_inputs(captures, read)
    from .live import open_live

    if captures or read:
        raise Fail(EXIT_USAGE, "-i captures live: give no capture file with it")
    check_output(write)
    return open_live(iface, bpf, count, autostop, write)


class CaptureRun:
    """A CaptureSource whose failures become one line on stderr and an exit code."""

    def __init__(self, inputs, ports: list[int], messages: bool = False, keylog=None,
                 tls_records: list | None = None, limit: int | None = None):
        if isinstance(inputs, (str, Path)):
            inputs = [str(inputs)]
        self.live = inputs if getattr(inputs, "is_live", False) else None  # -i: dumpcap's pipe (a LiveCapture)
        inputs = [inputs] if self.live is not None else inputs
        self.inputs = list(inputs)
        self.path = self.live.name if self.live is not None else self.inputs[0]
        # keylog: the KeyLog of --keylog (load_keylog), made by the command
        self.source = CaptureSource(self.inputs, ports=ports, messages=messages, keylog=keylog,
                                    tls_records=tls_records, limit=limit)
        self.tls_records = tls_records
        self.dissector = self.source.dissector

    def again(self) -> "CaptureRun":
        """A new run of the same capture (after a failure of ``-j``: made again by one process),
        with its key log opened again: the failed run's dissector may have added the capture's
        own secrets (pcapng Decryption Secrets Blocks) to it."""
        keylog = self.source.keylog
        if keylog is not None and getattr(keylog, "path", None) is not None:
            keylog = load_keylog(keylog.path)
        return CaptureRun(self.inputs, list(self.source.ports), keylog=keylog, limit=self.source.limit)

    @contextmanager
    def _reading(self):
        """Failures to open or read the capture, as one line and an exit code."""
        for p in self.inputs:
            if isinstance(p, str) and p != "-" and os.path.isdir(p):
                raise Fail(EXIT_OPEN, f"{p}: is a directory, not a capture file")
        from .progress import Progress

        try:
            with Progress(self.source):
                yield
        except FileNotFoundError:
            raise Fail(EXIT_OPEN, f"{self._current}: no such file") from None
        except CaptureError as e:
            raise Fail(EXIT_FORMAT, f"{self._current}: {e}") from None
        except OSError as e:
            raise Fail(EXIT_OPEN, f"{self._current}: cannot open: {e.strerror or e}") from None

    @property
    def _current(self) -> str:
        return self.source.current or self.path

    def events(self) -> Iterator[tuple[object, object]]:
        """(record, event) pairs; record is the packet that produced the event (None at the end)."""
        with self._reading():
            yield from self.source.events()

    def drive(self, sink):
        """Every event to ``sink(event)`` (see CaptureSource.drive); the last record's time."""
        with self._reading():
            return self.source.drive(sink)

    def drive_chunks(self, sink, chunk: int = 0):
        """CaptureSource.drive_chunks, with the same failures as :meth:`events`."""
        with self._reading():
            yield from self.source.drive_chunks(sink, chunk)

    @property
    def last_ts(self):
        return self.source.last_ts

    def finish_status(self, analyzer=None) -> int:
        """The exit code once everything is written (the reason on stderr): a live capture that
        failed, then internal errors (bugs), then damage, then no packet of a supported link type."""
        for check in (self._live_failure, lambda: _bugs(analyzer), self._damage, self._no_linktype):
            status = check()
            if status is not None:
                return status
        return EXIT_OK

    def _live_failure(self) -> int | None:
        if self.live is None:
            return None
        self.live.close()
        why = self.live.failure()
        if why is None:
            return None
        print(f"amqp-dissect: -i: {why}", file=sys.stderr)
        return EXIT_OPEN

    def _damage(self) -> int | None:
        if not self.source.errors:
            return None
        path, err = self.source.errors[0]
        print(f"amqp-dissect: {path}: {err}", file=sys.stderr)
        return EXIT_DAMAGED

    def _no_linktype(self) -> int | None:
        d = self.dissector
        if not (d.packets and d.unsupported_linktypes and d.tcp_packets == 0
                and sum(d.unsupported_linktypes.values()) == d.packets):
            return None
        lts = ", ".join(str(x) for x in sorted(d.unsupported_linktypes))
        print(f"amqp-dissect: {', '.join(map(str, self.source.paths))}: unsupported link type {lts}: no packet could "
              "be decoded", file=sys.stderr)
        return EXIT_FORMAT

    def analyze(self, **options):
        """Run the capture through the state/analytics layer (options: see ``run_analysis``)."""
        return run_analysis(Checked(self), **options)


class Checked:
    """Adapter: a CaptureRun seen as a CaptureSource (events with exit-code mapping)."""

    def __init__(self, run: CaptureRun):
        self.run = run
        self.errors = run.source.errors
        self.dissector = run.dissector

    def events(self):
        return self.run.events()

    def drive(self, sink):
        return self.run.drive(sink)

    def drive_chunks(self, sink, chunk: int = 0):
        return self.run.drive_chunks(sink, chunk)

    @property
    def last_ts(self):
        return self.run.last_ts


def _bugs(analyzer) -> int | None:
    """Exit 1 when the analysis met internal errors (bugs), the first one said."""
    bugs = analyzer.internal_errors if analyzer is not None else ()
    if not bugs:
        return None
    more = f" (and {len(bugs) - 1} more: see the internal-error violations)" if len(bugs) > 1 else ""
    print(f"amqp-dissect: internal error: {bugs[0]}{more} (a bug; the output above is complete otherwise)",
          file=sys.stderr)
    return EXIT_INTERNAL


def parallel_ok(run: CaptureRun) -> bool:
    """Whether -j N can split this run: files read again by each process (not stdin, not -i)."""
    from amqp_dissect.pipelines.runs.parallel import splittable

    return run.live is None and splittable(run.inputs)


# AUTO_JOBS_MAX, AUTO_JOBS_MIN_BYTES: declared with -j (cli/options.py), whose help says them


def jobs_for(run: CaptureRun, jobs: int) -> int:
    """The processes ``-j JOBS`` asks for; ``0`` asks for one per idle CPU (those this
    process may use, less the other tasks running at the moment: :func:`_busy`), at most
    :data:`AUTO_JOBS_MAX`, when the run's files hold :data:`AUTO_JOBS_MIN_BYTES` or more (one
    otherwise, and for standard input and live captures).  Processes on busy CPUs would only take
    turns with what runs there: slower than one."""
    if jobs:
        return jobs
    if not parallel_ok(run):
        return 1
    try:
        size = sum(os.path.getsize(os.fspath(p)) for p in run.inputs)
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    except OSError:
        return 1
    if size < AUTO_JOBS_MIN_BYTES:
        return 1
    return max(1, min(cpus - _busy(), AUTO_JOBS_MAX))


def _busy(reads: int = 3) -> int:
    """Tasks running or runnable besides this process: the least of a few looks at Linux's
    /proc/loadavg a millisecond apart (one look may catch a task that runs for an instant);
    0 where unknown."""
    least = None
    for i in range(reads):
        if i:
            time.sleep(0.001)
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        least = running if least is None else min(least, running)
    return max(0, least - 1)


class ParallelAttempt(NamedTuple):
    """What ``-j`` made of a command's output: written, with its exit status; or the exception it
    met (a bug), for the output to be made again by one process."""

    status: int | None = None
    failure: Exception | None = None


def run_status(run: CaptureRun, analyzer, failed, jobs: int) -> int:
    """``run.finish_status``; after a failure of ``-j`` (``failed``: its exception; the output was
    then made by one process) an internal error, exit 1."""
    status = run.finish_status(analyzer)
    if failed is None:
        return status
    print(f"amqp-dissect: internal error: -j {jobs}: {type(failed).__name__}: {failed} (a bug; the output "
          f"was made by one process and is complete)", file=sys.stderr)
    return EXIT_INTERNAL
