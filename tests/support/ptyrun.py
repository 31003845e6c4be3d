"""Run a command with its stderr on a pseudo-terminal (stdout piped), as a user's terminal would."""

from __future__ import annotations

import os
import subprocess


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
