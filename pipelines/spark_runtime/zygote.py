"""The session's zygote: the local executors' Python daemon, imported ahead of time.

Spark starts its Python worker daemon (:mod:`.daemon`) when the first Python task of the session
is submitted, and every task waits for that daemon's imports (about 0.9 s on a two-core machine,
on one core while the other waits: stage 1's first tasks).  :func:`start` runs, before the JVM
starts, a process that imports the same modules (:data:`.preload.PRELOAD`) while the JVM boots,
then listens on a Unix socket (in a private temporary folder, named to the JVM and so to the
daemon's launcher by ``AMQP_DISSECT_SPARK_ZYGOTE``).  The launcher (:func:`hand_over`) sends it
its stdin, stdout and stderr (the JVM's pipes), its environment and its working folder; the
zygote forks a child that takes them and runs pyspark's daemon, already imported.  The launcher
stays the JVM's handle on it: a SIGTERM is passed on, and it exits when the daemon does.

Nothing is handed over unless the child would be what the launcher would have been: the same
interpreter and the environment variables decided at an interpreter's start or at
``amqp_dissect``'s import (:data:`SAME`); otherwise, or without an answer, the launcher imports the
modules itself, as before (``AMQP_DISSECT_SPARK_ZYGOTE=0`` turns the zygote off).  The zygote
ends when the driver process does (its stdin is a pipe from the driver) and is in a session of
its own (a terminal's Ctrl-C goes to the driver).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

ENV = "AMQP_DISSECT_SPARK_ZYGOTE"  # the zygote's socket, for the daemon's launcher
# what must be equal between the launcher and the zygote for a forked child to be what the
# launcher would have become: set when an interpreter starts or when amqp_dissect is imported
SAME = ("PYTHONHASHSEED", "AMQP_DISSECT_PURE_PYTHON", "PYTHONOPTIMIZE", "PYTHONSAFEPATH")
HANDOFF_TIMEOUT = 120.0  # the launcher's wait for the zygote's answer (it may still be importing)
MAX_MESSAGE = 1 << 20  # the launcher's environment and folder, as JSON

_STARTED: list = []  # the zygote of this driver process (one: the JVM's environment is set once)


# --------------------------------------------------------------------------- the driver's side


def start() -> str | None:
    """Start this driver process's zygote (once) and name its socket in ``os.environ`` (for the
    JVM about to start); returns the socket's path, or None when it could not be started."""
    import subprocess
    import tempfile

    if _STARTED:
        return _STARTED[0][0]
    if os.environ.get(ENV) == "0":  # (turned off: the daemon imports its modules itself)
        return None
    try:
        folder = tempfile.mkdtemp(prefix="amqp-dissect-zygote-")
        path = os.path.join(folder, "s")
        env = dict(os.environ)
        # the hash seed Spark gives its Python workers (SparkContext's environment)
        env.setdefault("PYTHONHASHSEED", "0")
        p = subprocess.Popen([sys.executable, "-c", "from amqp_dissect.pipelines.spark_runtime.zygote import serve; serve()",
                              path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=env, start_new_session=True)
    except OSError:
        return None
    _STARTED.append((path, p))
    os.environ[ENV] = path
    return path


def take_probe():
    """The zygote's stdout, once per driver process (its first line answers the install probe of
    :func:`.session.executors_share_install`), or None."""
    if not _STARTED or _STARTED[0][1].stdout is None:
        return None
    out, _STARTED[0][1].stdout = _STARTED[0][1].stdout, None
    return out


def zygote_pid() -> int | None:
    """The pid of this driver process's zygote (its daemons and their workers are its children), or None."""
    return _STARTED[0][1].pid if _STARTED else None


def serve() -> None:
    """The zygote's main loop (``sys.argv[1]``: its socket): listen, import, then fork a daemon
    for each launcher until the driver's pipe closes."""
    import select

    path = sys.argv[1]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)  # before importing: a launcher that comes early waits instead of falling back
    listener.listen(8)
    # first, the session's question to a worker-like process (where amqp_dissect is imported from,
    # what is compiled: .session.executors_share_install), on stdout, in one line
    try:
        import amqp_dissect

        line = json.dumps([os.path.realpath(amqp_dissect.__path__[0]), sorted(amqp_dissect.compiled_modules())])
    except Exception:
        line = "null"
    try:
        os.write(1, (line + "\n").encode())
    except OSError:
        pass
    from .preload import freeze, preload

    preload()
    freeze()  # (the daemon and its workers forked from here: see .preload)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # (the daemons are reaped by the kernel)
    try:
        while True:
            ready = select.select([listener, 0], [], [])[0]
            if 0 in ready and not os.read(0, 4096):
                return  # the driver is gone
            if listener in ready:
                conn, _ = listener.accept()
                try:
                    pid = os.fork()
                except OSError:
                    conn.close()
                    continue
                if pid == 0:
                    listener.close()
                    _child(conn)  # (never returns)
                conn.close()
    finally:
        for f in (lambda: os.remove(path), lambda: os.rmdir(os.path.dirname(path))):
            try:
                f()
            except OSError:
                pass


def _child(conn: socket.socket) -> None:
    """In the zygote's child: take the launcher's pipes, environment and folder, then run pyspark's
    daemon; or say no and exit."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # (pyspark's daemon makes its own process group)
        msg, fds, _flags, _addr = socket.recv_fds(conn, MAX_MESSAGE, 3)
        info = json.loads(msg.decode())
        env = info["env"]
        if len(fds) != 3 or info["executable"] != sys.executable or any(env.get(k) != os.environ.get(k) for k in SAME):
            conn.sendall(b"no\n")
            os._exit(0)
        conn.sendall(f"ok {os.getpid()}\n".encode())
        if conn.recv(3) != b"go\n":  # the launcher gave up waiting: it runs the daemon itself
            os._exit(0)
        conn.close()
        for f in (sys.stdout, sys.stderr):
            f.flush()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, "r", closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
        os.chdir(info["cwd"])
        os.environ.clear()
        os.environ.update(env)
        # what the launcher's interpreter put on sys.path from PYTHONPATH (e.g. shipped files)
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.path[1:1] = extra
        from pyspark import daemon

        code = 0
        daemon.manager()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)


# --------------------------------------------------------------------------- the launcher's side


def hand_over(path: str) -> int | None:
    """In the daemon's launcher (run by the JVM): have the zygote at ``path`` fork the daemon
    with this process's pipes, environment and folder; wait for it, passing a SIGTERM on.
    Returns the exit code for this process, or None when the zygote did not take it over (no
    zygote, a different environment, no answer in time): then this process runs the daemon."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(HANDOFF_TIMEOUT)
        s.connect(path)
        info = {"env": dict(os.environ), "cwd": os.getcwd(), "executable": sys.executable}
        socket.send_fds(s, [json.dumps(info).encode()], [0, 1, 2])
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < 64:
            chunk = s.recv(64)
            if not chunk:
                break
            answer += chunk
        words = answer.split()
        if len(words) != 2 or words[0] != b"ok":
            return None
        pid = int(words[1])
        # from "go" on the daemon is the zygote's child and this process the JVM's handle on it: a
        # SIGTERM goes on to it from then (set before: the daemon may answer the JVM, and the JVM
        # stop it, before this process runs again)
        signal.signal(signal.SIGTERM, lambda *_: _stop(pid))
        s.sendall(b"go\n")
    except (OSError, ValueError):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (no hand-over: this process runs the daemon)
        return None
    finally:
        s.close()
    _wait(pid)
    return 0


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
    os._exit(0)


def _wait(pid: int) -> None:
    """Until process ``pid`` (not a child of this one) has ended."""
    import select
    import time

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        while True:
            try:
                select.select([fd], [], [])
                return
            except InterruptedError:
                continue
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except OSError:
            pass
        time.sleep(0.5)
