"""The progress line (cli/progress.py): its figures come from the reader's own counters and the
time since the reading started, and its first frame already shows them (no placeholders)."""

import os
import re
import subprocess
import sys
import types
from pathlib import Path

from amqp_dissect.cli.progress import Progress, figures
from ptyrun import run_with_stderr_on_a_terminal

ROOT = Path(__file__).resolve().parents[2]
LARGE = ROOT / "samples" / "large_message.pcap"


class _Source:
    """A stand-in CaptureSource: the counters the progress line reads."""

    def __init__(self, packets, position, total, current="cap.pcap"):
        self.dissector = types.SimpleNamespace(packets=packets)
        self._position = position
        self._total = total
        self.current = current
        self.paths = [current]

    def position(self):
        return self._position

    def total_bytes(self):
        return self._total


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_rate_counts_from_the_start_of_the_reading_not_the_display():
    """The reported case: 66,704 packets read in 2.32 s, the display appearing after 2 s.  The
    rate is 66,704 / 2.32 = 28,752 packets/s; dividing by the 0.32 s since the display appeared
    gave 206,979 (wrong by the factor 2.32 / 0.32)."""
    clock = _Clock(100.0)
    p = Progress(_Source(66_704, 5_000_000, 10_000_000), clock=clock)
    with p:  # not a terminal here: no thread, the counters only
        clock.t = 102.32
        s = p.sample()
    assert s["rate"] == f"{66_704 / 2.32:,.0f}" == "28,752"
    assert s["elapsed"] == "0:00:02"
    # half the bytes in 2.32 s: as long again left
    assert s["left"] == "0:00:02"
    assert s["completed"] == 5_000_000 and s["total"] == 10_000_000
    assert s["description"] == "reading cap.pcap"


def test_no_placeholders_before_anything_is_known():
    """Before a byte is read or for a stream (no total), the values say ``unknown`` or count
    from zero; never a bare ``-``."""
    f = figures(0, 0, 1000, 0.0)
    assert f == {"rate": "unknown", "elapsed": "0:00:00", "left": "unknown"}
    f = figures(10, 500, None, 1.0)
    assert f == {"rate": "10", "elapsed": "0:00:01", "left": "unknown"}
    f = figures(3_000_000, 250, 1000, 3725.0)  # a quarter read in 1:02:05: three times that left
    assert f == {"rate": "805", "elapsed": "1:02:05", "left": "3:06:15"}
    # the description names the file before the reader has set ``current``
    src = _Source(0, 0, 1000, current=None)
    src.paths = ["a.pcap"]
    clock = _Clock(5.0)
    p = Progress(src, clock=clock)
    with p:
        assert p.sample()["description"] == "reading a.pcap"


def _terminal_run(args, env):
    rc, _, tty = run_with_stderr_on_a_terminal([sys.executable, "-m", "amqp_dissect.cli"] + args, ROOT, env)
    return rc, tty


def test_first_frames_have_real_values(tmp_path):
    """Every frame drawn on the terminal (the first included) shows a rate, the elapsed time and
    the time left as numbers or ``unknown``: no ``-`` or ``-:--:--`` placeholders (rich's own
    rate and time-left columns, which need several samples, drew them in the first frames)."""
    big = tmp_path / "big.pcap"
    subprocess.run(["mergecap", "-a", "-F", "pcap", "-w", str(big)] + [str(LARGE)] * 20, check=True)
    rc, tty = _terminal_run(["report", str(big)], {"AMQP_DISSECT_PROGRESS_AFTER": "0", "COLUMNS": "240"})
    assert rc == 0
    frames = re.findall(r"(\S+) packets/s (\d+:\d\d:\d\d) left (\S+)", tty)
    assert frames, tty
    for rate, _elapsed, left in frames:
        assert re.fullmatch(r"[\d,]+|unknown", rate), rate
        assert re.fullmatch(r"\d+:\d\d:\d\d|unknown", left), left
    assert "-:--:--" not in tty
    assert not re.search(r"\s-\s+packets/s", tty)
