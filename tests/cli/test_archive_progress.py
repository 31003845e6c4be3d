"""The archive's progress display (cli/progress.py's SparkProgress) against a status tracker that
fails: one failed sample keeps the display going, a tracker gone for good ends it.  The tracker is a
stand-in with the two calls of pyspark's StatusTracker the display makes (no Spark here: what is
tested is the display's loop; the display on a real session is test_cli_tshark_more.py's)."""

from __future__ import annotations

import time

from ptyrun import stderr_on_a_terminal

from amqp_dissect.cli import progress


class _Stage:
    def __init__(self, done, active, total):
        self.numCompletedTasks, self.numActiveTasks, self.numTasks = done, active, total


class _Tracker:
    def getActiveStageIds(self):
        return [7]

    def getStageInfo(self, sid):
        return _Stage(1, 1, 3)


class _Context:
    """statusTracker() raises for the first ``failures`` calls (None: always), then answers."""

    def __init__(self, failures):
        self.failures = failures
        self.calls = 0

    def statusTracker(self):
        self.calls += 1
        if self.failures is None or self.calls <= self.failures:
            raise RuntimeError("py4j: an answer from the Java side is empty")
        return _Tracker()


def _shown(monkeypatch, sc, seconds):
    """What a SparkProgress on ``sc`` wrote to a terminal in ``seconds``, and whether its thread was
    still running at the end (before its stop)."""
    monkeypatch.setenv("AMQP_DISSECT_PROGRESS_AFTER", "0")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("AMQP_DISSECT_NO_PROGRESS", raising=False)
    with stderr_on_a_terminal(monkeypatch) as shown:
        with progress.SparkProgress(sc) as display:
            time.sleep(seconds)
            running = display._thread is not None and display._thread.is_alive()
    return shown.text, running


def test_a_failed_sample_keeps_the_display(monkeypatch):
    monkeypatch.setattr(progress, "_EVERY", 0.02)
    sc = _Context(failures=3)
    text, running = _shown(monkeypatch, sc, 1.0)
    assert sc.calls > 3 and running
    assert "1/3 tasks, 1 running" in text and "(Spark stage 7)" in text


def test_a_tracker_gone_for_good_ends_the_display(monkeypatch):
    monkeypatch.setattr(progress, "_EVERY", 0.02)
    monkeypatch.setattr(progress, "_GIVE_UP", 5)
    sc = _Context(failures=None)
    text, running = _shown(monkeypatch, sc, 1.0)
    assert sc.calls == 5 and not running
    assert "tasks" not in text
