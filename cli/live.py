"""Live capture (``-i IFACE``): dumpcap writes pcap to a pipe, the streaming capture reader
consumes it.  ``-f`` (BPF), ``-c``, ``-a duration:S`` go to dumpcap; ``-w FILE`` keeps the raw
packets as read.  Ctrl-C stops dumpcap, the pipe ends, and the run finishes as at the end of a
file (the report comes then)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading

from .common import EXIT_OPEN, EXIT_USAGE, Fail
from amqp_dissect.pipelines.options import MAX_SECONDS


def parse_autostop(values: list[str] | None) -> float | None:
    """``-a duration:S`` (tshark's autostop condition; the only one taken)."""
    duration = None
    for v in values or []:
        key, _, val = v.partition(":")
        if key != "duration":
            raise Fail(EXIT_USAGE, f"-a {v}: only duration:SECONDS is supported")
        try:
            duration = float(val)
        except ValueError:
            raise Fail(EXIT_USAGE, f"-a {v}: expected duration:SECONDS") from None
        if not 0 < duration <= MAX_SECONDS:  # (NaN too)
            raise Fail(EXIT_USAGE, f"-a {v}: the duration must be a positive number of seconds, at most "
                                   f"{MAX_SECONDS:.0f}")
    return duration


class LiveCapture:
    """dumpcap capturing on ``iface`` to a pipe; :attr:`stream` is what the capture reader reads."""

    is_live = True  # (what a CaptureRun reads live: cli/run.py tells it so, without loading this module)

    def __init__(self, iface: str, bpf: str | None = None, count: int | None = None,
                 duration: float | None = None, write: str | None = None):
        exe = shutil.which("dumpcap")
        if exe is None:
            raise Fail(EXIT_USAGE, "-i needs dumpcap (Wireshark's capture program; apt-get install wireshark-common)")
        cmd = [exe, "-i", iface, "-P", "-w", "-", "-q"]
        if bpf:
            cmd += ["-f", bpf]
        if count:
            cmd += ["-c", str(count)]
        if duration:
            cmd += ["-a", f"duration:{max(1, round(duration))}"]
        self.raw = None
        if write is not None:
            try:
                self.raw = open(write, "wb")
            except OSError as e:
                raise Fail(EXIT_OPEN, f"{write}: cannot write: {e.strerror or e}") from None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.name = f"{iface} (live)"
        self.errors: list[str] = []
        self._err = threading.Thread(target=self._stderr, daemon=True)
        self._err.start()
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._interrupt)

    def _stderr(self) -> None:
        """dumpcap's messages: "Capturing on ..." goes to our stderr (as tshark says it), errors are kept."""
        for line in self.proc.stderr:
            text = line.decode("utf-8", "replace").rstrip()
            if not text:
                continue
            if text.startswith("Capturing on"):
                print(text, file=sys.stderr, flush=True)
            elif "Packets captured" not in text and "Packets received" not in text:
                self.errors.append(text)

    def _interrupt(self, signum, frame) -> None:
        """Ctrl-C: stop dumpcap; the pipe ends and the run finishes normally."""
        try:
            self.proc.send_signal(signal.SIGINT)
        except OSError:
            pass

    def read(self, n: int = -1) -> bytes:
        out = self.proc.stdout
        data = out.read() if n is None or n < 0 else out.read1(n)
        if data and self.raw is not None:
            self.raw.write(data)
        return data

    def close(self) -> int:
        """Wait for dumpcap; restore Ctrl-C; its exit status."""
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self._err.join(timeout=2)
        if self.raw is not None:
            self.raw.close()
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None
        return rc

    def failure(self) -> str | None:
        """dumpcap's complaint when it failed (no such interface, no permission ...)."""
        if self.proc.returncode not in (0, None, -signal.SIGINT) and self.errors:
            return self.errors[-1]
        return None


def open_live(iface, bpf, count, autostop, write) -> LiveCapture:
    if bpf and not iface:
        raise Fail(EXIT_USAGE, "a capture filter (-f / --capture-filter) needs -i IFACE")
    if write and not iface:
        raise Fail(EXIT_USAGE, "-w FILE needs -i IFACE (it keeps the packets of a live capture)")
    if autostop and not iface:
        raise Fail(EXIT_USAGE, "-a needs -i IFACE")
    return LiveCapture(iface, bpf, count, parse_autostop(autostop), write)
