"""Run a command with its stderr on a pseudo-terminal (stdout piped), as a user's terminal would."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading


def run_with_stderr_on_a_terminal(cmd, cwd, env):
    """Return (exit code, stdout bytes, what the terminal got as text)."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env={**os.environ, **env})
    os.close(slave)
    seen = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        seen += data
    out = p.stdout.read()
    p.wait()
    os.close(master)
    return p.returncode, out, seen.decode("utf-8", "replace")


class TerminalText:
    """What the terminal of :func:`stderr_on_a_terminal` got, as text without its ANSI escapes (set at
    the block's end)."""

    text = ""


@contextlib.contextmanager
def stderr_on_a_terminal(monkeypatch):
    """In this process: ``sys.stderr`` on a pseudo-terminal for the block (put back at its end), read by a
    thread; ``with stderr_on_a_terminal(monkeypatch) as shown: ...`` then ``shown.text``."""
    import pty

    master, slave = pty.openpty()
    seen: list = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            seen.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    tty = os.fdopen(slave, "w", buffering=1)
    before = sys.stderr
    monkeypatch.setattr(sys, "stderr", tty)
    shown = TerminalText()
    try:
        yield shown
    finally:
        monkeypatch.setattr(sys, "stderr", before)
        tty.close()
        reader.join(timeout=5)
        os.close(master)
        shown.text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(seen).decode("utf-8", "replace"))
