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


def wanted() -> bool:
    try:
        return sys.stderr.isatty() and not os.environ.get("AMQP_DISSECT_NO_PROGRESS")
    except (AttributeError, ValueError):
        return False


class Progress:
    """``with Progress(source): ...`` around the reading of a CaptureSource."""

    def __init__(self, source, label: str = "reading"):
        self.source = source
        self.label = label
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        if wanted():
            self._thread = threading.Thread(target=self._run, name="amqp-dissect-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
        return False

    def _run(self) -> None:
        try:
            after = float(os.environ.get("AMQP_DISSECT_PROGRESS_AFTER", _AFTER))
        except ValueError:
            after = _AFTER
        if self._stop.wait(after):
            return
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress as Bar, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        src = self.source
        total = src.total_bytes()
        bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                  TextColumn("{task.fields[rate]} packets/s"), TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(file=sys.stderr), transient=True)
        import time

        t0 = time.monotonic()
        with bar:
            task = bar.add_task(self.label, total=total, rate="-")
            while True:
                done = self._stop.wait(_EVERY)
                packets = src.dissector.packets
                dt = time.monotonic() - t0
                rate = f"{packets / dt:,.0f}" if dt > 0 else "-"
                bar.update(task, completed=src.position(), rate=rate, description=f"{self.label} {src.current or ''}")
                if done:
                    bar.refresh()
                    return
