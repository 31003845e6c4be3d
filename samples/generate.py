#!/usr/bin/env python3
"""Regenerate the sample captures of real AMQP 1.0 traffic (and their ground truth).

Usage::

    python samples/generate.py [--out samples] [--only NAME ...] [--list]

For every scenario this script

1. starts ``tcpdump -i lo -U -w <tmp>.pcap 'tcp port 5672'`` (one capture per scenario),
2. runs an AMQP 1.0 client written with python-qpid-proton (in-process, a
   ``proton.reactor.Container``) against RabbitMQ on the loopback,
3. waits a short settle delay, stops tcpdump (SIGINT, by pid) and copies the
   capture to ``<out>/<name>.pcap``,
4. writes ``<out>/<name>.truth.json``: what the *client* did and observed (never
   derived from the capture).

The broker: if nothing listens on 127.0.0.1:5672, the script starts its own
private RabbitMQ node (``amqpdissect@localhost``) from a temporary directory
(own mnesia/log dirs, own config file, own enabled-plugins file with
``rabbitmq_amqp1_0``, own Erlang cookie; it never touches /etc/rabbitmq or
/var/lib/rabbitmq), plus its own ``epmd`` if none is running, and stops both
(``rabbitmqctl shutdown``, then by pid) at the end, also on error.  If an AMQP
1.0 broker already listens on 5672 it is used as it is and left running.

Requirements (checked at start-up)::

    apt-get install -y rabbitmq-server tcpdump
    pip install python-qpid-proton

tcpdump needs root (or CAP_NET_RAW) to capture on ``lo``.

Ground-truth schema (``<name>.truth.json``, ``schema_version`` 1)
------------------------------------------------------------------

Top level:

``schema_version`` (int), ``name`` (str, the scenario), ``capture`` (file name of
the pcap), ``description`` (str), ``server`` ("127.0.0.1:5672" or "[::1]:5672"),
``address_family`` ("ipv4"/"ipv6"), ``sasl_mechanism`` (mechanism the client
used, e.g. "PLAIN", "ANONYMOUS"), ``connection_count`` (int), ``connections``
(list, below), ``link_count`` (int), ``links`` (list, below), ``totals``
(dict, below), ``broker_queues_after`` (dict queue name -> ``{"messages": n}``
as reported by ``rabbitmqctl list_queues`` right after the scenario, or null if
unavailable), ``notes`` (list of str: what happened that a test should know,
e.g. broker quirks), ``tools`` (versions used).

``connections[i]`` (in the order the client opened them, one TCP connection each):

* ``index`` (int), ``container_id`` (str, set by us), ``hostname`` (host we connected
  to, also sent as open.hostname: "127.0.0.1" or "::1")
* ``server`` ("host:port"), ``sasl_mechanism`` (str), ``user`` (str or null)
* ``sasl_outcome`` (int code from sasl-outcome, 0 = ok, 1 = auth failure; null if none)
* ``max_frame_size_requested`` (int: the max-frame-size in our open),
  ``remote_max_frame_size`` (int or null: from the broker's open)
* ``idle_timeout_requested_ms`` (int or null: idle-time-out in our open, null if absent),
  ``remote_idle_timeout_ms`` (int or null: from the broker's open)
* ``remote_container_id`` (str or null), ``remote_product``/``remote_version`` (broker open properties)
* ``opened`` (bool: the broker's open was received)
* ``sessions_begun`` (int: begin frames we sent), ``session_errors`` (list of
  ``{"session": k, "condition": str, "description": str}`` for sessions the broker ended with an error)
* ``connection_error`` (``{"condition", "description"}`` or null: error in the broker's close frame)
* ``transport_error`` (same shape or null: an error proton raised locally, e.g. the SASL
  authentication failure, which is not an AMQP frame on the wire)
* ``frames_sent`` / ``frames_received``: ordered list of every frame the client's
  protocol engine wrote / read on this connection, as ``"performative:channel"``
  strings (``"sasl-init:0"``, ``"open:0"``, ``"transfer:1"``, ``"empty:0"`` for an
  empty/heartbeat frame).  Protocol headers are not frames and are listed in
  ``protocol_headers_sent`` / ``protocol_headers_received`` (``["SASL", "AMQP"]``).
  Each direction of a TCP connection is a FIFO, so these are exactly the frames
  on the wire in that direction, in wire order (``check_with_tshark.py`` verifies
  this against tshark's dissection).
* ``frame_counts_sent`` / ``frame_counts_received``: the same as ``{performative: count}``.

``links[j]`` (in the order the client attached them):

* ``name`` (str), ``role`` ("sender"/"receiver", from the client's side),
  ``connection`` (index), ``session`` (0-based index of the session within its
  connection, in begin order), ``address`` (target address for a sender, source
  address for a receiver; for a coordinator link: null)
* ``snd_settle_mode`` / ``rcv_settle_mode``: requested in our attach
  ("unsettled"/"settled"/"mixed", "first"/"second"); ``remote_snd_settle_mode`` /
  ``remote_rcv_settle_mode`` from the broker's attach (null if it never attached)
* ``attached`` (bool: the broker answered with an attach), ``detached_by``
  ("client", "broker", "session-end", "connection-close"), ``detach_error`` ({condition, description} or null)
* ``messages_sent`` (senders), ``deliveries_received`` (receivers, counting redeliveries)
* ``presettled``: deliveries sent settled (senders) / that arrived already settled (receivers)
* ``outcomes``: ``{"accepted", "rejected", "released", "modified"}`` counts -- for a
  sender the outcomes the broker returned, for a receiver the outcomes the
  client applied
* ``unsettled_at_end``: deliveries that had no outcome when the link ended
* ``body_sizes`` (list of int, bytes of the body payload per delivery: data
  section bytes or UTF-8 bytes of an amqp-value string), ``encoded_sizes``
  (list of int, the full encoded message per delivery as on the wire:
  for a sender what proton encoded, for a receiver what the broker sent)
* ``credit_grants`` (receivers: list of the credit added by each ``flow()`` call
  the client made, in order), ``drain_requests`` (int)
* ``deliveries``: list, per delivery in order: ``{"message_id", "delivery_tag" (hex
  of the tag bytes), "body_size", "encoded_size", "presettled", "outcome", "redelivered"}``
  (``redelivered`` for receivers: the message header said first-acquirer=false or
  delivery-count>0); senders add ``settled_by_broker`` (the broker's disposition had
  settled=true), rejected ones add ``error``, modified ones ``delivery_failed`` and
  ``undeliverable_here`` (the values the client set)
* ``extra``: scenario specific (e.g. drain response) -- dict

``totals`` (sums over all links / connections): ``messages_sent``,
``deliveries_received``, ``sender_outcomes`` and ``receiver_outcomes`` (each
``{"accepted", "rejected", "released", "modified"}``), ``presettled_sent``,
``presettled_received``, ``transfer_frames_sent``, ``transfer_frames_received``
(transfer frames, so a message split over 66 frames counts 66), ``credit_grants``
(number of flow() calls made by receivers).

``tools``: ``python_qpid_proton``, ``tcpdump``, ``rabbitmq_server_package`` (dpkg
version), ``rabbitmq`` (version from the broker's open properties).

What is stable between regenerations: every message-level number (connections,
sessions, links, settle modes, messages, deliveries, outcomes, presettled counts,
body and encoded sizes, credit grants, errors).  What may differ: how many
disposition frames carry the outcomes (proton and RabbitMQ batch ranges
depending on timing), the interleaving of frames of different sessions, the
number of heartbeat frames, TCP segmentation, ports and timestamps.  So a test
must always use the truth file generated together with its capture (they are
committed together), and ``check_with_tshark.py`` verifies the pair.

Environment variables (debugging): ``AMQPDISSECT_TRACE=1`` prints every frame
proton sends/receives, ``AMQPDISSECT_TIMEOUT`` (seconds per scenario, default
30), ``AMQPDISSECT_KEEP_LOGS=DIR`` copies the broker's log files to DIR before
the temporary node directory is removed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

try:
    from proton import Condition, Delivery, Handler, Link, Message, Terminus, Transport
    from proton.handlers import MessagingHandler
    from proton.reactor import Container
except ImportError:  # reported by check_requirements() with the install command
    MessagingHandler = Handler = object  # type: ignore[assignment,misc]
    Container = None  # type: ignore[assignment]

SCHEMA_VERSION = 1
AMQP_PORT = 5672
NODE_NAME = "amqpdissect@localhost"
RABBIT_LIB_BIN = Path("/usr/lib/rabbitmq/bin")
SETTLE_DELAY = 0.5  # seconds between the client's end and stopping tcpdump
SCENARIO_TIMEOUT = float(os.environ.get("AMQPDISSECT_TIMEOUT", "30"))

# --------------------------------------------------------------------------
# requirements
# --------------------------------------------------------------------------


def _rabbit_tool(name: str) -> str | None:
    cand = RABBIT_LIB_BIN / name
    if cand.exists():
        return str(cand)
    return shutil.which(name)


def check_requirements() -> None:
    missing: list[str] = []
    if not _rabbit_tool("rabbitmq-server") or not _rabbit_tool("rabbitmqctl"):
        missing.append("RabbitMQ: apt-get install -y rabbitmq-server")
    if not shutil.which("tcpdump"):
        missing.append("tcpdump: apt-get install -y tcpdump")
    try:
        import proton  # noqa: F401
    except ImportError:
        missing.append("python-qpid-proton: pip install python-qpid-proton")
    if missing:
        print("generate.py: missing requirements, please install:", file=sys.stderr)
        for m in missing:
            print("  " + m, file=sys.stderr)
        sys.exit(2)
    if os.geteuid() != 0:
        print("generate.py: warning: not root; tcpdump needs root or CAP_NET_RAW to capture on lo")


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------
# process helpers
# --------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _terminate_pid(pid: int, what: str, timeout: float = 10.0) -> None:
    if not _pid_alive(pid):
        return
    log(f"  stopping {what} (pid {pid}) with SIGTERM")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return
        time.sleep(0.1)
    log(f"  {what} (pid {pid}) still alive, SIGKILL")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _pids_named(comm: str) -> list[int]:
    """pids whose /proc/PID/comm is exactly `comm` (used to detect a pre-existing epmd)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/comm") as f:
                    if f.read().strip() == comm:
                        out.append(int(d))
            except OSError:
                pass
    return out


def _port_open(host: str, port: int, family: int = socket.AF_INET) -> bool:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _probe_amqp10(host: str, port: int) -> bytes | None:
    """Send the AMQP 1.0 SASL protocol header; return the 8-byte header the server answers."""
    try:
        with socket.create_connection((host, port), timeout=3.0) as s:
            s.sendall(b"AMQP\x03\x01\x00\x00")
            data = b""
            while len(data) < 8:
                chunk = s.recv(8 - len(data))
                if not chunk:
                    break
                data += chunk
            return data
    except OSError:
        return None


# --------------------------------------------------------------------------
# RabbitMQ
# --------------------------------------------------------------------------

RABBIT_CONF = """\
# written by samples/generate.py for a private throw-away node
listeners.tcp.1 = 127.0.0.1:{port}
listeners.tcp.2 = ::1:{port}
cluster_name = amqp-dissect-samples
# SASL ANONYMOUS logs in as this user (the plugin's default is also guest)
amqp1_0.default_user = guest
amqp1_0.default_vhost = /
loopback_users.guest = true
log.file.level = info
log.console = false
"""


class Broker:
    """Our private RabbitMQ node (or an already running broker we only use)."""

    def __init__(self) -> None:
        self.started = False
        self.tmp: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.beam_pid: int | None = None
        self.epmd_proc: subprocess.Popen | None = None
        self.epmd_before: set[int] = set()
        self.env: dict[str, str] = dict(os.environ)
        self.node: str | None = None

    # -- rabbitmqctl -------------------------------------------------------
    def ctl(self, *args: str, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
        if self.started:
            cmd = [_rabbit_tool("rabbitmqctl"), "-n", NODE_NAME, *args]
        else:
            # someone else's broker: the Debian wrapper switches to the rabbitmq user
            cmd = ["rabbitmqctl", *args]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def list_queues(self) -> dict[str, dict[str, int]] | None:
        try:
            r = self.ctl("list_queues", "-q", "--formatter", "json", "name", "messages", timeout=60)
            rows = json.loads(r.stdout or "[]")
            return {row["name"]: {"messages": int(row["messages"])} for row in rows}
        except (subprocess.SubprocessError, ValueError, OSError, KeyError) as exc:
            log(f"  (could not list queues: {exc})")
            return None

    def delete_queues(self, names: list[str]) -> None:
        existing = self.list_queues()
        if existing is None:
            return
        for n in names:
            if n in existing:
                log(f"  deleting leftover queue {n}")
                self.ctl("delete_queue", n, check=False)

    # -- start / stop ------------------------------------------------------
    def start(self) -> None:
        if _port_open("127.0.0.1", AMQP_PORT):
            for pid in _pids_named("beam.smp"):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if NODE_NAME in cmdline:
                    log(f"Note: port {AMQP_PORT} is held by beam.smp pid {pid}, node {NODE_NAME}: started by this "
                        f"script in another (or an interrupted earlier) run; `kill {pid}` stops it if that run is over.")
            hdr = _probe_amqp10("127.0.0.1", AMQP_PORT)
            if hdr and hdr.startswith(b"AMQP\x03\x01"):
                log(f"A broker already listens on 127.0.0.1:{AMQP_PORT} and speaks AMQP 1.0: using it "
                    "(not started by this script, will not be stopped). Captures may differ from the committed "
                    "ones (e.g. broker container-id, ANONYMOUS may be refused).")
                return
            sys.exit(f"Something listens on 127.0.0.1:{AMQP_PORT} but does not speak AMQP 1.0 (answered {hdr!r}). "
                     "If it is RabbitMQ: rabbitmq-plugins enable rabbitmq_amqp1_0 and restart it, or stop it "
                     "(rabbitmqctl stop) so that this script can start its own node.")

        self.tmp = Path(tempfile.mkdtemp(prefix="amqpdissect-rabbit-"))
        home = self.tmp / "home"
        home.mkdir()
        cookie = home / ".erlang.cookie"
        cookie.write_text("AMQPDISSECTSAMPLESCOOKIE")
        cookie.chmod(0o400)
        (self.tmp / "rabbitmq.conf").write_text(RABBIT_CONF.format(port=AMQP_PORT))
        (self.tmp / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
        (self.tmp / "rabbitmq-env.conf").write_text("")
        env = dict(os.environ)
        env.update(
            HOME=str(home),
            RABBITMQ_NODENAME=NODE_NAME,
            RABBITMQ_CONFIG_FILE=str(self.tmp / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(self.tmp / "advanced.config"),
            RABBITMQ_CONF_ENV_FILE=str(self.tmp / "rabbitmq-env.conf"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.tmp / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(self.tmp / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.tmp / "log"),
            RABBITMQ_PID_FILE=str(self.tmp / "rabbit.pid"),
            RABBITMQ_PLUGINS_EXPAND_DIR=str(self.tmp / "plugins-expand"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            ERL_EPMD_ADDRESS="127.0.0.1,::1",
        )
        self.env = env

        self.epmd_before = set(_pids_named("epmd"))
        if not self.epmd_before:
            epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
            if epmd:
                self.epmd_proc = subprocess.Popen([str(epmd)], env=env, stdin=subprocess.DEVNULL,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                  start_new_session=True)
                log(f"Started epmd (pid {self.epmd_proc.pid}, listening on loopback only)")
                time.sleep(0.3)
        else:
            log("epmd is already running (not ours, left alone)")

        self.started = True
        out = open(self.tmp / "server-stdout.log", "wb")
        self.proc = subprocess.Popen([_rabbit_tool("rabbitmq-server")], env=env, cwd=str(self.tmp),
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        out.close()
        log(f"Started RabbitMQ node {NODE_NAME} (wrapper pid {self.proc.pid}) in {self.tmp}, "
            f"AMQP 1.0 on 127.0.0.1:{AMQP_PORT} and [::1]:{AMQP_PORT}")
        r = self.ctl("wait", "--timeout", "90", str(self.tmp / "rabbit.pid"), check=False, timeout=120)
        if r.returncode != 0:
            self._dump_logs()
            raise RuntimeError(f"RabbitMQ did not start: {r.stdout}{r.stderr}")
        self.beam_pid = int((self.tmp / "rabbit.pid").read_text().strip())
        log(f"  RabbitMQ is up (beam.smp pid {self.beam_pid})")

    def _dump_logs(self) -> None:
        if not self.tmp:
            return
        for p in [self.tmp / "server-stdout.log", *sorted((self.tmp / "log").glob("*.log"))]:
            try:
                lines = p.read_text(errors="replace").splitlines()[-30:]
            except OSError:
                continue
            print(f"---- {p} (tail)", file=sys.stderr)
            print("\n".join(lines), file=sys.stderr)

    def stop(self) -> None:
        if not self.started:
            return
        log(f"Stopping RabbitMQ node {NODE_NAME} that we started")
        try:
            self.ctl("shutdown", check=False, timeout=120)
        except subprocess.SubprocessError as exc:
            log(f"  rabbitmqctl shutdown failed: {exc}")
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _terminate_pid(self.proc.pid, "rabbitmq-server wrapper")
                self.proc.wait(timeout=30)
        if self.beam_pid is not None:
            _terminate_pid(self.beam_pid, "beam.smp")
        if self.epmd_proc is not None:
            _terminate_pid(self.epmd_proc.pid, "epmd")
            try:
                self.epmd_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        # an epmd that appeared while our node ran (e.g. `epmd -daemon` spawned by the node or
        # rabbitmqctl because ours was not there yet) is ours too: stop it by pid
        for pid in sorted(set(_pids_named("epmd")) - self.epmd_before):
            _terminate_pid(pid, "epmd (spawned for our node)")
        self.started = False
        ours = [p for p in [self.proc.pid if self.proc else None, self.beam_pid,
                            self.epmd_proc.pid if self.epmd_proc else None] if p]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and _pid_alive(p) for p in ours):
            time.sleep(0.1)
        left = [p for p in ours if _pid_alive(p)]
        if left:
            log(f"  WARNING: processes we started are still alive: {left}")
        keep = os.environ.get("AMQPDISSECT_KEEP_LOGS")
        if keep and self.tmp is not None:
            shutil.copytree(self.tmp / "log", keep, dirs_exist_ok=True)
            log(f"  broker logs copied to {keep}")
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
        log("  RabbitMQ (and our epmd) stopped")


# --------------------------------------------------------------------------
# tcpdump
# --------------------------------------------------------------------------


class Capture:
    def __init__(self, workdir: Path, name: str, extra_args: list[str] | None = None) -> None:
        self.workdir = workdir
        self.name = name
        self.pcap = workdir / f"{name}.pcap"
        self.errfile = workdir / f"{name}.tcpdump.log"
        self.proc: subprocess.Popen | None = None
        self.extra_args = list(extra_args or [])
        self.stats: dict[str, int] = {}  # tcpdump's own counts at exit ("packets dropped by kernel", ...)

    def start(self) -> None:
        err = open(self.errfile, "wb")
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-U", "-n", *self.extra_args, "-w", str(self.pcap), f"tcp port {AMQP_PORT}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        err.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if b"listening on" in self.errfile.read_bytes():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("tcpdump failed: " + self.errfile.read_text(errors="replace"))
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError("tcpdump did not start listening")
        log(f"  started tcpdump (pid {self.proc.pid}) -> {self.pcap.name}")
        time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _terminate_pid(self.proc.pid, "tcpdump")
                self.proc.wait(timeout=10)
        summary = " ".join(l.strip() for l in self.errfile.read_text(errors="replace").splitlines()
                           if "captured" in l or "dropped" in l or "received by filter" in l)
        for m in re.finditer(r"(\d+) packets? (captured|received by filter|dropped by kernel)", summary):
            self.stats["packets_" + m.group(2).replace(" ", "_")] = int(m.group(1))
        log(f"  stopped tcpdump (pid {self.proc.pid}): {summary}")
        self.proc = None


# --------------------------------------------------------------------------
# ground-truth recording
# --------------------------------------------------------------------------

SND_MODES = {0: "unsettled", 1: "settled", 2: "mixed"}
RCV_MODES = {0: "first", 1: "second"}
_FRAME_RE = re.compile(r"^FRAME:\s*(\d+)?\s*(->|<-)\s*(.*)$", re.S)


def outcome_name(state: int | None) -> str | None:
    from proton import Delivery
    return {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
            Delivery.MODIFIED: "modified", Delivery.RECEIVED: "received"}.get(state)


@dataclass
class ConnRec:
    index: int
    container_id: str
    hostname: str
    server: str
    sasl_mechanism: str
    user: str | None
    max_frame_size_requested: int | None = None
    remote_max_frame_size: int | None = None
    idle_timeout_requested_ms: int | None = None
    remote_idle_timeout_ms: int | None = None
    sasl_outcome: int | None = None
    remote_container_id: str | None = None
    remote_product: str | None = None
    remote_version: str | None = None
    opened: bool = False
    sessions_begun: int = 0
    session_errors: list = field(default_factory=list)
    connection_error: dict | None = None
    transport_error: dict | None = None
    protocol_headers_sent: list = field(default_factory=list)
    protocol_headers_received: list = field(default_factory=list)
    frames_sent: list = field(default_factory=list)
    frames_received: list = field(default_factory=list)

    def trace(self, message: str) -> None:
        m = _FRAME_RE.match(message.strip())
        if not m:
            return
        channel, direction, rest = m.groups()
        sent = direction == "->"
        if rest.startswith("@"):
            perf = rest[1:rest.index("(")]
            (self.frames_sent if sent else self.frames_received).append(f"{perf}:{channel or 0}")
            if perf == "sasl-outcome" and not sent:
                mm = re.search(r"code=0x([0-9a-f]+)", rest)
                if mm:
                    self.sasl_outcome = int(mm.group(1), 16)
            if perf == "open":
                mfs = re.search(r"max-frame-size=0x([0-9a-f]+)", rest)
                ito = re.search(r"idle-time-out=0x([0-9a-f]+)", rest)
                if sent:
                    self.max_frame_size_requested = int(mfs.group(1), 16) if mfs else None
                    self.idle_timeout_requested_ms = int(ito.group(1), 16) if ito else None
                else:
                    self.remote_max_frame_size = int(mfs.group(1), 16) if mfs else None
                    self.remote_idle_timeout_ms = int(ito.group(1), 16) if ito else None
        elif rest.startswith("(EMPTY FRAME)"):
            (self.frames_sent if sent else self.frames_received).append(f"empty:{channel or 0}")
        elif rest in ("SASL", "AMQP"):
            (self.protocol_headers_sent if sent else self.protocol_headers_received).append(rest)

    def as_json(self) -> dict:
        d = dict(self.__dict__)
        d["frame_counts_sent"] = dict(collections.Counter(p.split(":")[0] for p in self.frames_sent))
        d["frame_counts_received"] = dict(collections.Counter(p.split(":")[0] for p in self.frames_received))
        order = ["index", "container_id", "hostname", "server", "sasl_mechanism", "user", "sasl_outcome",
                 "max_frame_size_requested", "remote_max_frame_size", "idle_timeout_requested_ms", "remote_idle_timeout_ms",
                 "remote_container_id", "remote_product", "remote_version", "opened", "sessions_begun",
                 "session_errors", "connection_error", "transport_error", "protocol_headers_sent", "protocol_headers_received",
                 "frame_counts_sent", "frame_counts_received", "frames_sent", "frames_received"]
        return {k: d[k] for k in order}


@dataclass
class LinkRec:
    name: str
    role: str
    connection: int
    session: int
    address: str | None
    snd_settle_mode: str
    rcv_settle_mode: str
    remote_snd_settle_mode: str | None = None
    remote_rcv_settle_mode: str | None = None
    attached: bool = False
    detached_by: str | None = None
    detach_error: dict | None = None
    remote_detach_closed: bool | None = None
    messages_sent: int = 0
    deliveries_received: int = 0
    presettled: int = 0
    outcomes: dict = field(default_factory=lambda: {"accepted": 0, "rejected": 0, "released": 0, "modified": 0})
    unsettled_at_end: int = 0
    body_sizes: list = field(default_factory=list)
    encoded_sizes: list = field(default_factory=list)
    credit_grants: list = field(default_factory=list)
    drain_requests: int = 0
    deliveries: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        d = dict(self.__dict__)
        d["unsettled_at_end"] = sum(1 for x in self.deliveries if x["outcome"] is None and not x["presettled"])
        return d


def _cond(c) -> dict | None:
    if c is None:
        return None
    return {"condition": c.name, "description": c.description}


def _body_size(body: Any) -> int:
    if isinstance(body, (bytes, bytearray, memoryview)):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    raise TypeError(type(body))


# --------------------------------------------------------------------------
# proton client base
# --------------------------------------------------------------------------



class _Timer(Handler):
    def __init__(self, fn: Callable[[], None]) -> None:
        super().__init__()
        self.fn = fn

    def on_timer_task(self, event) -> None:
        self.fn()


class ScenarioClient(MessagingHandler):
    """Base class: bookkeeping of connections/sessions/links/deliveries for the truth file."""

    def __init__(self) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True, peer_close_is_error=False)
        self.container: Container | None = None
        self.conns: list[ConnRec] = []
        self.links: list[LinkRec] = []
        self._link_rec: dict[str, LinkRec] = {}
        self.notes: list[str] = []
        self.failed: str | None = None
        self.done = False
        self._tasks: list = []

    # ---- helpers -------------------------------------------------------
    def after(self, delay: float, fn: Callable[[], None]) -> None:
        self._tasks.append(self.container.schedule(delay, _Timer(fn)))

    def connect(self, container_id: str, host: str = "127.0.0.1", mech: str = "PLAIN",
                user: str | None = "guest", password: str | None = "guest",
                max_frame_size: int | None = None, heartbeat: float | None = None):
        hostport = f"[{host}]:{AMQP_PORT}" if ":" in host else f"{host}:{AMQP_PORT}"
        kw: dict[str, Any] = dict(allowed_mechs=mech, container_id=container_id, reconnect=False)
        if user is not None:
            kw.update(user=user, password=password)
        if max_frame_size:
            kw["max_frame_size"] = max_frame_size
        if heartbeat:
            kw["heartbeat"] = heartbeat
        conn = self.container.connect(f"amqp://{hostport}", **kw)
        rec = ConnRec(index=len(self.conns), container_id=container_id, hostname=host, server=hostport,
                      sasl_mechanism=mech, user=user)
        self.conns.append(rec)
        conn._dissect_rec = rec
        return conn

    def rec_of(self, conn) -> ConnRec:
        return conn._dissect_rec

    def session(self, conn):
        rec = self.rec_of(conn)
        ssn = conn.session()
        ssn._dissect_idx = (rec.index, rec.sessions_begun)
        rec.sessions_begun += 1
        ssn.open()
        return ssn

    def _new_link(self, link, role: str, address: str | None) -> LinkRec:
        ci, si = link.session._dissect_idx
        rec = LinkRec(name=link.name, role=role, connection=ci, session=si, address=address,
                      snd_settle_mode=SND_MODES[link.snd_settle_mode], rcv_settle_mode=RCV_MODES[link.rcv_settle_mode])
        self.links.append(rec)
        self._link_rec[link.name] = rec
        return rec

    def sender(self, ssn, name: str, address: str, settled: bool = False):
        snd = ssn.sender(name)
        snd.target.address = address
        if settled:
            snd.snd_settle_mode = Link.SND_SETTLED
        self._new_link(snd, "sender", address)
        snd.open()
        return snd

    def receiver(self, ssn, name: str, address: str, settled: bool = False):
        rcv = ssn.receiver(name)
        rcv.source.address = address
        if settled:
            rcv.snd_settle_mode = Link.SND_SETTLED
        self._new_link(rcv, "receiver", address)
        rcv.open()
        return rcv

    def lrec(self, link) -> LinkRec:
        return self._link_rec[link.name]

    def send(self, snd, body: Any, message_id: str, **msg_kw) -> Any:
        rec = self.lrec(snd)
        msg = Message(id=message_id, body=body, **msg_kw)
        data = msg.encode()
        tag = str(rec.messages_sent + 1)
        dlv = snd.delivery(tag)
        snd.stream(data)
        snd.advance()
        presettled = snd.snd_settle_mode == Link.SND_SETTLED
        d = {"message_id": message_id, "delivery_tag": tag.encode().hex(), "body_size": _body_size(body),
             "encoded_size": len(data), "presettled": presettled, "outcome": None, "redelivered": False}
        rec.deliveries.append(d)
        rec.messages_sent += 1
        rec.body_sizes.append(d["body_size"])
        rec.encoded_sizes.append(len(data))
        if presettled:
            rec.presettled += 1
            dlv.settle()
        else:
            dlv._dissect_rec = d
        return dlv

    def grant(self, rcv, n: int, drain: bool = False) -> None:
        rec = self.lrec(rcv)
        rec.credit_grants.append(n)
        if drain:
            rec.drain_requests += 1
            rcv.drain(n)
        else:
            rcv.flow(n)

    def settle_receiver(self, dlv, outcome: str, condition: Condition | None = None,
                        failed: bool = False, undeliverable: bool = False) -> None:
        d = dlv._dissect_rec
        rec = self.lrec(dlv.link)
        if outcome == "accepted":
            dlv.update(Delivery.ACCEPTED)
        elif outcome == "rejected":
            if condition is not None:
                dlv.local.condition = condition
            dlv.update(Delivery.REJECTED)
        elif outcome == "released":
            dlv.update(Delivery.RELEASED)
        elif outcome == "modified":
            dlv.local.failed = failed
            dlv.local.undeliverable = undeliverable
            dlv.update(Delivery.MODIFIED)
        else:
            raise ValueError(outcome)
        dlv.settle()
        d["outcome"] = outcome
        if outcome == "rejected" and condition is not None:
            d["error"] = {"condition": condition.name, "description": condition.description}
        if outcome == "modified":
            d["delivery_failed"] = failed
            d["undeliverable_here"] = undeliverable
        rec.outcomes[outcome] += 1

    def close_link(self, link) -> None:
        rec = self.lrec(link)
        if rec.detached_by is None:
            rec.detached_by = "client"
        link.close()

    # ---- proton events ---------------------------------------------------
    def on_start(self, event) -> None:
        self.container = event.container
        self.after(SCENARIO_TIMEOUT, self._timeout)
        self.start()

    def start(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _timeout(self) -> None:
        if not self.done:
            self.failed = "scenario timed out"
            self.container.stop()

    def finish(self) -> None:
        """All connections are closed: cancel pending timers so that Container.run() returns."""
        self.done = True
        for t in self._tasks:
            t.cancel()

    def on_connection_bound(self, event) -> None:
        rec = getattr(event.connection, "_dissect_rec", None)
        if rec is None:
            return
        t = event.transport
        t.trace(Transport.TRACE_FRM)
        if os.environ.get("AMQPDISSECT_TRACE"):
            def tracer(_t, msg, rec=rec):
                print(f"    [conn {rec.index}] {msg[:200]}", flush=True)
                rec.trace(msg)
            t.tracer = tracer
        else:
            t.tracer = lambda _t, msg, rec=rec: rec.trace(msg)

    def on_connection_remote_open(self, event) -> None:
        rec = self.rec_of(event.connection)
        c = event.connection
        rec.opened = True
        rec.remote_container_id = c.remote_container
        props = c.remote_properties or {}
        rec.remote_product = str(props.get("product")) if props.get("product") is not None else None
        rec.remote_version = str(props.get("version")) if props.get("version") is not None else None

    def on_link_remote_open(self, event) -> None:
        link = event.link
        rec = self._link_rec.get(link.name)
        if rec is None:
            return
        rec.attached = True
        rec.remote_snd_settle_mode = SND_MODES.get(link.remote_snd_settle_mode)
        rec.remote_rcv_settle_mode = RCV_MODES.get(link.remote_rcv_settle_mode)

    def _remote_detach(self, event, closed: bool) -> None:
        link = event.link
        rec = self._link_rec.get(link.name)
        if rec is None:
            return
        rec.remote_detach_closed = closed
        if rec.detached_by is None:
            rec.detached_by = "broker"
        if link.remote_condition:
            rec.detach_error = _cond(link.remote_condition)
        if link.state & link.LOCAL_CLOSED:
            self.link_finished(link)

    def on_link_remote_close(self, event) -> None:
        self._remote_detach(event, True)

    def on_link_remote_detach(self, event) -> None:
        # RabbitMQ 3.10 answers detach(closed=true) with a detach without closed=true
        self._remote_detach(event, False)

    def link_finished(self, link) -> None:
        """Our detach and the broker's detach have both happened."""

    def on_session_remote_close(self, event) -> None:
        ci, si = event.session._dissect_idx
        if event.session.remote_condition:
            self.conns[ci].session_errors.append({"session": si, **_cond(event.session.remote_condition)})
        for rec in self.links:
            if rec.connection == ci and rec.session == si and rec.detached_by is None:
                rec.detached_by = "session-end"

    def on_connection_remote_close(self, event) -> None:
        rec = self.rec_of(event.connection)
        if event.connection.remote_condition:
            rec.connection_error = _cond(event.connection.remote_condition)

    def on_transport_error(self, event) -> None:
        rec = getattr(event.connection, "_dissect_rec", None) if event.connection else None
        if rec is not None and event.transport.condition:
            rec.transport_error = _cond(event.transport.condition)

    # do not let MessagingHandler close the whole connection on a session/link error
    def on_session_error(self, event) -> None:
        pass

    def on_link_error(self, event) -> None:
        pass

    def on_connection_error(self, event) -> None:
        pass

    def on_delivery(self, event) -> None:
        dlv = event.delivery
        link = dlv.link
        rec = self._link_rec.get(link.name)
        if rec is None:
            return
        if link.is_sender:
            d = getattr(dlv, "_dissect_rec", None)
            if d is not None and d["outcome"] is None and dlv.remote_state:
                name = outcome_name(dlv.remote_state)
                d["outcome"] = name
                if name in rec.outcomes:
                    rec.outcomes[name] += 1
                d["settled_by_broker"] = bool(dlv.settled)
        elif dlv.readable and not dlv.partial and getattr(dlv, "_dissect_rec", None) is None:
            d = {"message_id": None, "delivery_tag": None, "body_size": None, "encoded_size": dlv.pending,
                 "presettled": bool(dlv.settled), "outcome": None, "redelivered": False}
            dlv._dissect_rec = d
            rec.deliveries.append(d)
            rec.deliveries_received += 1
            rec.encoded_sizes.append(dlv.pending)
            if dlv.settled:
                rec.presettled += 1
            try:
                tag = dlv.tag  # proton decodes the tag bytes as UTF-8
                d["delivery_tag"] = (tag if isinstance(tag, (bytes, bytearray)) else tag.encode("utf-8")).hex()
            except UnicodeDecodeError:
                d["delivery_tag"] = None
        # MessagingHandler's child handlers then decode and call on_message / on_accepted

    def on_message(self, event) -> None:
        dlv = event.delivery
        d = dlv._dissect_rec
        msg = event.message
        d["message_id"] = msg.id
        d["body_size"] = _body_size(msg.body)
        d["redelivered"] = (msg.first_acquirer is False) or bool(msg.delivery_count)
        self.lrec(dlv.link).body_sizes.append(d["body_size"])
        self.message(event, msg, dlv)

    def message(self, event, msg, dlv) -> None:  # overridden by receivers
        self.settle_receiver(dlv, "accepted")

    # ---- result ------------------------------------------------------
    def on_connection_closed(self, event) -> None:
        self.connection_finished(event.connection)

    def on_transport_closed(self, event) -> None:
        # SASL failure / socket error: no close handshake
        if event.connection is not None and not (event.connection.state & event.connection.REMOTE_CLOSED):
            self.connection_finished(event.connection)

    def connection_finished(self, conn) -> None:
        rec = getattr(conn, "_dissect_rec", None)
        if rec is None or getattr(rec, "_finished", False):
            return
        rec._finished = True  # type: ignore[attr-defined]
        for lr in self.links:
            if lr.connection == rec.index and lr.detached_by is None:
                lr.detached_by = "connection-close"
        self.connection_done(conn, rec)

    def connection_done(self, conn, rec: ConnRec) -> None:
        if all(getattr(r, "_finished", False) for r in self.conns):
            self.finish()


# --------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------


def q(name: str) -> str:
    return f"amqpdissect.{name}"


def qaddr(name: str) -> str:
    return f"/queue/{q(name)}"


def body_bytes(prefix: str, i: int) -> bytes:
    return f"{prefix} message {i:02d}".encode()


class SendThenReceive(ScenarioClient):
    """Sender sends N messages (waits for all outcomes), detaches; then a receiver gets N."""

    def __init__(self, cid: str, queue: str, count: int, host: str = "127.0.0.1", mech: str = "PLAIN",
                 prefix: str = "msg", presettled_send: bool = False, presettled_recv: bool = False,
                 separate_connections: bool = False, str_bodies: bool = False, credit: int | None = None,
                 max_frame_size: int | None = None, bodies: list | None = None,
                 close_first_connection_directly: bool = False) -> None:
        super().__init__()
        self.cid, self.queue, self.count, self.host, self.mech = cid, queue, count, host, mech
        self.prefix = prefix
        self.presettled_send, self.presettled_recv = presettled_send, presettled_recv
        self.separate = separate_connections
        self.str_bodies = str_bodies
        self.credit = credit if credit is not None else count
        self.max_frame_size = max_frame_size
        self.bodies = bodies
        self.close_first_directly = close_first_connection_directly
        self.sent = 0
        self.settled = 0
        self.received = 0
        self.phase = "send"

    def body(self, i: int):
        if self.bodies is not None:
            return self.bodies[i]
        b = body_bytes(self.prefix, i + 1)
        return b.decode() if self.str_bodies else b

    def _connect(self, suffix: str = ""):
        user = None if self.mech == "ANONYMOUS" else "guest"
        return self.connect(self.cid + suffix, host=self.host, mech=self.mech, user=user,
                            password=None if user is None else "guest", max_frame_size=self.max_frame_size)

    def start(self) -> None:
        self.conn = self._connect("-sender" if self.separate else "")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, f"{self.prefix}-sender", qaddr(self.queue), settled=self.presettled_send)

    def on_sendable(self, event) -> None:
        if event.link != getattr(self, "snd", None) or self.phase != "send":
            return
        while event.sender.credit and self.sent < self.count:
            self.send(event.sender, self.body(self.sent), f"{self.prefix}-{self.sent + 1:02d}")
            self.sent += 1
        if self.presettled_send and self.sent == self.count:
            self.sender_done()

    def on_settled(self, event) -> None:
        if event.link.is_sender and event.link == self.snd:
            self.settled += 1
            if self.settled == self.count:
                self.sender_done()

    def sender_done(self) -> None:
        self.phase = "detach-sender"
        if self.separate:
            if self.close_first_directly:
                self.conn.close()  # no detach / end: implicit by close
            else:
                self.close_link(self.snd)
        else:
            self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == getattr(self, "snd", None) and self.phase == "detach-sender":
            if self.separate:
                self.ssn.close()
            else:
                self.start_receiver(self.conn, self.ssn)
        elif link == getattr(self, "rcv", None):
            self.rcv.session.close()

    def on_session_closed(self, event) -> None:
        event.connection.close()

    def connection_done(self, conn, rec) -> None:
        if self.separate and rec.index == 0:
            c2 = self._connect("-receiver")
            self.rcv_ssn = self.session(c2)
            self.start_receiver(c2, self.rcv_ssn)
        else:
            super().connection_done(conn, rec)

    def start_receiver(self, conn, ssn) -> None:
        self.phase = "receive"
        self.rcv = self.receiver(ssn, f"{self.prefix}-receiver", qaddr(self.queue), settled=self.presettled_recv)
        self.grant(self.rcv, self.credit)

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        expect = self.body(self.received - 1)
        if msg.body != expect:
            self.notes.append(f"delivery {self.received}: unexpected body")
        if not dlv.settled:
            self.settle_receiver(dlv, "accepted")
        self.after_message()

    def after_message(self) -> None:
        if self.received == self.count:
            self.phase = "done"
            self.close_link(self.rcv)


class Outcomes(ScenarioClient):
    N = 9

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-outcomes")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "outcomes-sender", qaddr("outcomes"))
        self.sent = self.settled = 0
        self.first_round: list = []
        self.redelivered: list = []
        self.phase = "send"

    def on_sendable(self, event) -> None:
        if event.link != self.snd or self.phase != "send":
            return
        while event.sender.credit and self.sent < self.N:
            self.sent += 1
            self.send(event.sender, body_bytes("outcomes", self.sent), f"outcomes-{self.sent:02d}")

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.phase = "detach-sender"
                self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == self.snd:
            self.phase = "receive"
            self.rcv = self.receiver(self.ssn, "outcomes-receiver", qaddr("outcomes"))
            self.grant(self.rcv, self.N)

    def message(self, event, msg, dlv) -> None:
        if self.phase == "receive":
            i = len(self.first_round)
            self.first_round.append(dlv)
            if i < 3:
                self.settle_receiver(dlv, "accepted")
            elif i < 5:
                self.settle_receiver(dlv, "rejected", Condition("amqp:precondition-failed",
                                                                 "rejected by amqp-dissect sample"))
            elif i < 7:
                self.settle_receiver(dlv, "released")
            # 7, 8: held unsettled, modified at the end
            if len(self.first_round) == self.N:
                self.phase = "wait-redelivery"
                self.after(0.3, self.ask_redelivery)
        elif self.phase == "redelivery":
            self.redelivered.append(dlv)
            self.settle_receiver(dlv, "accepted")
            if len(self.redelivered) == 2:
                self.phase = "wait-modify"
                self.after(0.3, self.modify)
        else:
            self.notes.append(f"unexpected delivery in phase {self.phase}: {msg.id}")
            self.settle_receiver(dlv, "accepted")

    def ask_redelivery(self) -> None:
        # the two released messages are requeued by RabbitMQ: ask for exactly two more
        self.phase = "redelivery"
        self.grant(self.rcv, 2)
        self.after(3.0, lambda: self.phase == "redelivery" and self.modify())

    def modify(self) -> None:
        if self.phase == "modified":
            return
        self.phase = "modified"
        self.settle_receiver(self.first_round[7], "modified", failed=True, undeliverable=False)
        self.settle_receiver(self.first_round[8], "modified", failed=True, undeliverable=True)
        # RabbitMQ 3.10 ends the session (amqp:invalid-field) on a 'modified' outcome; if it
        # does not, close normally after a moment
        self.after(1.0, lambda: self.phase == "modified" and self._close())

    def _close(self) -> None:
        self.phase = "closing"
        if self.rcv.state & self.rcv.LOCAL_ACTIVE:
            self.close_link(self.rcv)
        if self.ssn.state & self.ssn.LOCAL_ACTIVE:
            self.ssn.close()
        self.conn.close()

    def on_session_remote_close(self, event) -> None:
        super().on_session_remote_close(event)
        if self.phase == "modified":
            self.phase = "closing"
            # EndpointStateHandler answers with end; then close the connection
            self.after(0.1, self.conn.close)


class CreditOne(ScenarioClient):
    N = 5

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-credit-one")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "credit-sender", qaddr("credit_one"))
        self.sent = self.settled = self.received = 0

    def on_sendable(self, event) -> None:
        if event.link != self.snd:
            return
        while event.sender.credit and self.sent < self.N:
            self.sent += 1
            self.send(event.sender, body_bytes("credit", self.sent), f"credit-{self.sent:02d}")

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == self.snd:
            self.rcv = self.receiver(self.ssn, "credit-receiver", qaddr("credit_one"))
            self.grant(self.rcv, 1)
        elif link == getattr(self, "rcv", None):
            self.conn.close()

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        self.settle_receiver(dlv, "accepted")
        if self.received < self.N:
            self.after(0.05, lambda: self.grant(self.rcv, 1))
        else:
            self.after(0.05, lambda: self.close_link(self.rcv))


MULTIFRAME_BODY_SIZE = 48_000


def multiframe_body(i: int) -> bytes:
    """Deterministic MULTIFRAME_BODY_SIZE-byte body of message ``i`` (0-based)."""
    return bytes(0x30 + (j * 7 + i) % 10 for j in range(MULTIFRAME_BODY_SIZE))


class MultiFrameCreditOne(ScenarioClient):
    """Large messages, small frames, credit 1: each delivery is many frames, and the receiver grants the
    next credit as soon as a delivery is complete; after the last one it grants nothing and detaches."""
    N = 3
    MAX_FRAME = 512  # the smallest the spec allows

    def start(self) -> None:
        # made before the connection: the receiver compares and grants without delay
        self.bodies = [multiframe_body(i) for i in range(self.N)]
        self.conn = self.connect("amqp-dissect-multiframe", max_frame_size=self.MAX_FRAME)
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "multiframe-sender", qaddr("multiframe_credit_one"))
        self.sent = self.settled = self.received = 0

    def on_sendable(self, event) -> None:
        if event.link != self.snd:
            return
        while event.sender.credit and self.sent < self.N:
            self.send(event.sender, self.bodies[self.sent], f"multiframe-{self.sent + 1:02d}")
            self.sent += 1

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == self.snd:
            self.rcv = self.receiver(self.ssn, "multiframe-receiver", qaddr("multiframe_credit_one"))
            self.grant(self.rcv, 1)
        elif link == getattr(self, "rcv", None):
            self.ssn.close()

    def on_session_closed(self, event) -> None:
        event.connection.close()

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        if msg.body != self.bodies[self.received - 1]:
            self.notes.append(f"delivery {self.received}: unexpected body")
        self.settle_receiver(dlv, "accepted")
        if self.received < self.N:
            self.grant(self.rcv, 1)  # at once: the broker is not kept waiting by the receiver
        else:
            self.after(0.3, lambda: self.close_link(self.rcv))  # no more credit: the queue is empty


class CreditIdle(ScenarioClient):
    """A receiver that pauses while messages wait, then drains the queue and sits at credit 0."""
    N = 4

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-credit-idle")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "idle-sender", qaddr("credit_idle"))
        self.sent = self.settled = self.received = 0
        self.limit = self.N

    def _send_more(self, snd) -> None:
        while snd.credit and self.sent < self.limit:
            self.sent += 1
            self.send(snd, body_bytes("idle", self.sent), f"idle-{self.sent:02d}")

    def on_sendable(self, event) -> None:
        if event.link == self.snd:
            self._send_more(event.sender)

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.rcv = self.receiver(self.ssn, "idle-receiver", qaddr("credit_idle"))
                self.grant(self.rcv, 2)

    def late_message(self) -> None:
        self.limit = self.N + 1
        self._send_more(self.snd)

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        self.settle_receiver(dlv, "accepted")
        if self.received == 2:
            self.after(0.1, lambda: self.grant(self.rcv, 2))  # a pause with 2 messages waiting
        elif self.received == self.N:
            # the queue is empty: 250 ms at credit 0, then 1 credit (the broker answers available 0),
            # 150 ms later one more message arrives and uses it
            self.after(0.25, lambda: self.grant(self.rcv, 1))
            self.after(0.4, self.late_message)
        elif self.received == self.N + 1:
            self.after(0.25, self.conn.close)  # close without detach or end


class MultiSession(ScenarioClient):
    # queue -> message count; sessions: 0 {a-sender, b-receiver}, 1 {b-sender, a-receiver}, 2 {c-sender, c-receiver}
    COUNTS = {"a": 4, "b": 3, "c": 2}
    LAYOUT = [[("sender", "a"), ("receiver", "b")], [("sender", "b"), ("receiver", "a")],
              [("sender", "c"), ("receiver", "c")]]

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-multi")
        self.sessions = []
        self.snds: dict[str, Any] = {}
        self.rcvs: dict[str, Any] = {}
        for layout in self.LAYOUT:
            ssn = self.session(self.conn)
            self.sessions.append(ssn)
            for role, key in layout:
                if role == "sender":
                    self.snds[key] = self.sender(ssn, f"multi-{key}-sender", qaddr(f"multi_session.{key}"))
                else:
                    r = self.receiver(ssn, f"multi-{key}-receiver", qaddr(f"multi_session.{key}"))
                    self.rcvs[key] = r
                    self.grant(r, self.COUNTS[key])
        self.sent = collections.Counter()
        self.settled = collections.Counter()
        self.got = collections.Counter()
        self.closing = False

    def _key(self, link) -> str:
        return link.name.split("-")[1]

    def on_sendable(self, event) -> None:
        k = self._key(event.link)
        while event.sender.credit and self.sent[k] < self.COUNTS[k]:
            self.sent[k] += 1
            self.send(event.sender, f"multi {k} message {self.sent[k]:02d}", f"multi-{k}-{self.sent[k]:02d}")

    def on_settled(self, event) -> None:
        if event.link.is_sender:
            self.settled[self._key(event.link)] += 1
            self._check()

    def message(self, event, msg, dlv) -> None:
        self.got[self._key(dlv.link)] += 1
        self.settle_receiver(dlv, "accepted")
        self._check()

    def _check(self) -> None:
        if self.closing:
            return
        if self.settled == self.COUNTS and self.got == self.COUNTS:
            self.closing = True
            self.after(0.1, self._close)

    def _close(self) -> None:
        for link in [*self.snds.values(), *self.rcvs.values()]:
            self.close_link(link)
        self.links_open = len(self.snds) + len(self.rcvs)

    def link_finished(self, link) -> None:
        self.links_open -= 1
        if self.links_open == 0:
            for s in self.sessions:
                s.close()
            self.sessions_open = len(self.sessions)

    def on_session_closed(self, event) -> None:
        self.sessions_open -= 1
        if self.sessions_open == 0:
            self.conn.close()


class AttachErrors(ScenarioClient):
    """Three sessions in sequence, each with an attach the broker refuses."""

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-errors")
        self.step = 0
        self.next_step()

    def next_step(self) -> None:
        self.step += 1
        if self.step == 1:
            ssn = self.session(self.conn)
            self.receiver(ssn, "missing-queue-receiver", f"/amq/queue/{q('does_not_exist')}")
        elif self.step == 2:
            ssn = self.session(self.conn)
            self.sender(ssn, "bad-address-sender", "/bogus/amqpdissect")
        elif self.step == 3:
            ssn = self.session(self.conn)
            snd = ssn.sender("txn-coordinator")
            snd.target.type = Terminus.COORDINATOR
            caps = snd.target.capabilities
            caps.put_array(False, caps.SYMBOL)
            caps.enter()
            caps.put_symbol("amqp:local-transactions")
            caps.exit()
            rec = self._new_link(snd, "sender", None)
            rec.extra["target"] = "coordinator"
            rec.extra["capabilities"] = ["amqp:local-transactions"]
            snd.open()
        else:
            self.conn.close()

    def on_session_closed(self, event) -> None:
        self.after(0.1, self.next_step)


class Drain(ScenarioClient):
    """Receive 3 messages with credit 3, then ask for a drain of 5 credits on the now empty queue.

    RabbitMQ 3.10.8 (classic queue) answers the drain flow with a flow echoing drain=true (credit not
    consumed) and then ends the session with amqp:internal-error (function_clause in
    rabbit_classic_queue:handle_event send_drained).  A drain while messages are still being delivered
    crashes its internal channel instead and the connection is reset; that variant is not used here.
    """

    N = 3
    DRAIN_CREDIT = 5

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-drain")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "drain-sender", qaddr("drain"))
        self.sent = self.settled = self.received = 0
        self.rcv = None
        self.flows_after_drain: list = []
        self.closing = False

    def on_sendable(self, event) -> None:
        if event.link != self.snd:
            return
        while event.sender.credit and self.sent < self.N:
            self.sent += 1
            self.send(event.sender, body_bytes("drain", self.sent), f"drain-{self.sent:02d}")

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            if self.settled == self.N:
                self.close_link(self.snd)

    def link_finished(self, link) -> None:
        if link == self.snd:
            self.rcv = self.receiver(self.ssn, "drain-receiver", qaddr("drain"))
            self.grant(self.rcv, self.N)

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        self.settle_receiver(dlv, "accepted")
        if self.received == self.N:
            self.after(0.3, self._drain)

    def _drain(self) -> None:
        self.grant(self.rcv, self.DRAIN_CREDIT, drain=True)
        self.after(2.0, self._close)  # if the broker neither ends the session nor answers

    def on_link_flow(self, event) -> None:
        link = event.link
        if link != self.rcv or not self.lrec(link).drain_requests:
            return
        self.flows_after_drain.append({"after_deliveries": self.received, "credit": link.credit,
                                       "drain_mode": link.drain_mode})
        rec = self.lrec(link)
        rec.extra["drain_flow_events"] = self.flows_after_drain
        rec.extra["credit_after_drain_response"] = link.credit

    def on_session_remote_close(self, event) -> None:
        super().on_session_remote_close(event)
        # the broker ended the session (RabbitMQ 3.10's drain bug): EndpointStateHandler ends ours
        self.after(0.1, self._close)

    def _close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.conn.close()


class SaslFailure(ScenarioClient):
    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-badauth", user="guest", password="wrong-password")



class Heartbeat(ScenarioClient):
    IDLE = 3.5

    def start(self) -> None:
        # proton advertises half of 'heartbeat' as idle-time-out: 4 s -> idle-time-out 2000 ms
        self.conn = self.connect("amqp-dissect-heartbeat", heartbeat=4.0)
        self.ssn = self.session(self.conn)

    def on_connection_opened(self, event) -> None:
        self.after(self.IDLE, self._close)

    def _close(self) -> None:
        self.ssn.close()

    def on_session_closed(self, event) -> None:
        self.conn.close()


# 64 KiB deterministic body for the large message
class KernelLoss(ScenarioClient):
    """A flood of small messages through one queue while tcpdump runs with a tiny kernel buffer.

    Sender and receiver are attached at once on one session; the receiver grants credit for
    all ``N`` messages in one flow (RabbitMQ 3.10 adds the credit of a second flow that arrives
    while the first is being used instead of replacing it, and then really sends beyond the
    credit: a top-up scheme would record that broker violation, not capture loss), accepts
    every message except each 5th, which it rejects, and once everything is settled both links
    detach, the session ends and the connection closes.  The capture loses whatever the
    kernel dropped: the truth file keeps tcpdump's own counts (``capture_stats``).
    """
    N = 3000

    def start(self) -> None:
        self.conn = self.connect("amqp-dissect-kernel-loss")
        self.ssn = self.session(self.conn)
        self.snd = self.sender(self.ssn, "loss-sender", qaddr("kernel_loss"))
        self.rcv = self.receiver(self.ssn, "loss-receiver", qaddr("kernel_loss"))
        self.grant(self.rcv, self.N)
        self.sent = self.settled = self.received = 0
        self.closing = False

    def on_sendable(self, event) -> None:
        if event.link == self.snd:
            while self.snd.credit and self.sent < self.N:
                self.sent += 1
                self.send(self.snd, f"loss {self.sent}".encode(), f"loss-{self.sent}")

    def on_settled(self, event) -> None:
        if event.link == self.snd:
            self.settled += 1
            self._check()

    def message(self, event, msg, dlv) -> None:
        self.received += 1
        if self.received % 5 == 0:
            self.settle_receiver(dlv, "rejected", Condition("amqp:precondition-failed", "every 5th"))
        else:
            self.settle_receiver(dlv, "accepted")
        self._check()

    def _check(self) -> None:
        if not self.closing and self.settled == self.N and self.received == self.N:
            self.closing = True
            self.close_link(self.snd)
            self.close_link(self.rcv)

    def link_finished(self, link) -> None:
        self.finished_links = getattr(self, "finished_links", 0) + 1
        if self.finished_links == 2:
            self.ssn.close()

    def on_session_closed(self, event) -> None:
        event.connection.close()

    def _timeout(self) -> None:
        if not self.done:
            self.notes.append(f"timed out: sent {self.sent}, settled {self.settled}, received {self.received}")
            log("  " + self.notes[-1])
        super()._timeout()


LARGE_BODY = bytes((i * 31 + 7) & 0xFF for i in range(65536))


@dataclass
class Scenario:
    name: str
    description: str
    make: Callable[[], ScenarioClient]
    queues: list[str]
    server: str = f"127.0.0.1:{AMQP_PORT}"
    sasl: str = "PLAIN"
    notes: list[str] = field(default_factory=list)
    tcpdump_args: list[str] = field(default_factory=list)  # e.g. a tiny kernel buffer (-B 1) to lose packets
    subdir: str = ""  # written to <out>/<subdir>/ (lossy captures: loss/, apart from the complete ones)


SCENARIOS: list[Scenario] = [
    Scenario(
        "plain_send_receive",
        "SASL PLAIN guest/guest; one connection, one session. Sender link 'plain-sender' sends 10 unsettled "
        "messages (snd-settle-mode mixed, proton's default) to /queue/amqpdissect.plain_send_receive, all "
        "accepted by the broker; sender detaches. Then receiver link 'plain-receiver' on the same session grants "
        "credit 10, receives the 10 messages and accepts each; detach, end, close.",
        lambda: SendThenReceive("amqp-dissect-plain", "plain_send_receive", 10, prefix="plain"),
        [q("plain_send_receive")]),
    Scenario(
        "anonymous",
        "SASL ANONYMOUS (RabbitMQ maps it to amqp1_0.default_user = guest). Two connections in sequence: "
        "connection 0 ('amqp-dissect-anon-sender') sends 3 messages with amqp-value string bodies and, once all "
        "are accepted, closes the connection directly (no detach/end frames); connection 1 "
        "('amqp-dissect-anon-receiver') receives and accepts the 3, then detach, end, close.",
        lambda: SendThenReceive("amqp-dissect-anon", "anonymous", 3, mech="ANONYMOUS", prefix="anon",
                                separate_connections=True, str_bodies=True, close_first_connection_directly=True),
        [q("anonymous")], sasl="ANONYMOUS"),
    Scenario(
        "presettled",
        "At-most-once: sender link 'presettled-sender' with snd-settle-mode settled sends 20 pre-settled "
        "messages (no dispositions), detaches; receiver 'presettled-receiver' with snd-settle-mode settled "
        "(asks the broker to send pre-settled) grants 20 and receives the 20, which RabbitMQ sends settled.",
        lambda: SendThenReceive("amqp-dissect-presettled", "presettled", 20, prefix="presettled",
                                presettled_send=True, presettled_recv=True),
        [q("presettled")]),
    Scenario(
        "large_message",
        "Connection opened with max-frame-size 1024 (the broker answers with the same). One message with a "
        "65536-byte data body (deterministic bytes (i*31+7) & 0xff) is sent unsettled, split over many transfer "
        "frames (more=true on all but the last), accepted; then received back by 'large-receiver' (the broker "
        "splits its transfer too) and accepted.",
        lambda: SendThenReceive("amqp-dissect-large", "large_message", 1, prefix="large", max_frame_size=1024,
                                bodies=[LARGE_BODY]),
        [q("large_message")]),
    Scenario(
        "outcomes",
        "Sender sends 9 messages, all accepted. Receiver 'outcomes-receiver' (no auto-accept) grants 9 and, in "
        "arrival order, accepts #1-3, rejects #4-5 (error amqp:precondition-failed), releases #6-7, holds #8-9. "
        "After 0.3 s it grants 2 more credits: RabbitMQ redelivers the 2 released messages (first-acquirer=false), "
        "which are accepted. After 0.3 s it settles #8 as modified(delivery-failed) and #9 as "
        "modified(delivery-failed, undeliverable-here): RabbitMQ 3.10 does not support 'modified' and ends the "
        "session with amqp:invalid-field; the client ends its side and closes the connection.",
        lambda: Outcomes(), [q("outcomes")]),
    Scenario(
        "credit_one",
        "5 messages sent and accepted; then receiver 'credit-receiver' with no prefetch grants credit 1, and after "
        "each message accepts it, waits 50 ms and grants 1 more (5 grants in total, a credit stall per message).",
        lambda: CreditOne(), [q("credit_one")]),
    Scenario(
        "multiframe_credit_one",
        f"Connection opened with max-frame-size {MultiFrameCreditOne.MAX_FRAME}. Sender 'multiframe-sender' sends "
        f"{MultiFrameCreditOne.N} messages with {MULTIFRAME_BODY_SIZE}-byte data bodies (ASCII digits "
        "'0' + (j*7 + i) % 10 for message i: Wireshark 4.0 stops dissecting a capture whose transfer payloads "
        "hold binary bodies that look like AMQP encodings), each split over many transfer frames, all accepted; it detaches. Receiver "
        "'multiframe-receiver' on the same session grants credit 1; each time a delivery is complete (its last "
        "frame, more=false) it accepts it and at once grants 1 more credit, so the broker, which sends each "
        "delivery in many frames, uses up its credit at a delivery's first frame and gets new credit just after "
        "its last. After the last message it grants nothing, waits 0.3 s (the queue is empty) and detaches; "
        "end, close.",
        lambda: MultiFrameCreditOne(), [q("multiframe_credit_one")]),
    Scenario(
        "credit_idle",
        "Sender 'idle-sender' sends 4 messages (all accepted) and stays attached. Receiver 'idle-receiver' on "
        "the same session grants credit 2 and gets 2 messages while 2 more wait in the queue; 0.1 s later it "
        "grants 2 and gets the other 2 (the queue is now empty). 0.25 s later it grants 1 credit on the empty "
        "queue (RabbitMQ answers with a flow saying available 0); 0.15 s after that the sender sends a 5th "
        "message, which uses that credit at once. 0.25 s later the client closes the connection (a close "
        "without detach or end).",
        lambda: CreditIdle(), [q("credit_idle")]),
    Scenario(
        "multi_session",
        "One connection, 3 sessions, 6 links attached at once: session 0 {multi-a-sender, multi-b-receiver}, "
        "session 1 {multi-b-sender, multi-a-receiver}, session 2 {multi-c-sender, multi-c-receiver}; queues a/b/c "
        "get 4/3/2 messages (amqp-value strings), receivers grant exactly that credit up front and accept; "
        "then all links detach, all sessions end, close.",
        lambda: MultiSession(),
        [q("multi_session.a"), q("multi_session.b"), q("multi_session.c")]),
    Scenario(
        "ipv6",
        "Like plain_send_receive over IPv6 ([::1]:5672): SASL PLAIN, 3 unsettled messages sent and accepted, "
        "then received and accepted on the same session.",
        lambda: SendThenReceive("amqp-dissect-ipv6", "ipv6", 3, host="::1", prefix="ipv6"),
        [q("ipv6")], server=f"[::1]:{AMQP_PORT}"),
    Scenario(
        "attach_errors",
        "One connection, three sessions one after the other, each with an attach RabbitMQ refuses; RabbitMQ "
        "answers each by ending the session with an error (not with a detach): receiver from "
        "/amq/queue/amqpdissect.does_not_exist (amqp:not-found), sender to /bogus/amqpdissect "
        "(amqp:invalid-field), transaction coordinator link (amqp:not-implemented, RabbitMQ 3.x has no "
        "transactions). Proton reuses channel 0 for every new session.",
        lambda: AttachErrors(), [q("does_not_exist")]),
    Scenario(
        "drain",
        "3 messages sent and accepted; receiver 'drain-receiver' grants credit 3, receives and accepts the 3; "
        "0.3 s later it sends a flow with link-credit 5 and drain=true on the now empty queue. RabbitMQ 3.10.8 "
        "answers with a flow with drain=true that echoes the credit (does not consume it, delivery-count "
        "unchanged), then ends the session with amqp:internal-error (a broker bug in send_drained); the "
        "client ends its session and closes the connection.",
        lambda: Drain(), [q("drain")]),
    Scenario(
        "sasl_auth_failure",
        "SASL PLAIN with a wrong password: the broker answers sasl-outcome code 1 (auth) after about 3 s and "
        "closes the TCP connection; no AMQP open is exchanged.",
        lambda: SaslFailure(), []),
    Scenario(
        "heartbeat",
        "Connection with idle-time-out 2000 ms in our open (proton heartbeat=4 s); session begun and the "
        "connection is idle for 3.5 s, during which RabbitMQ sends empty frames (heartbeats) about every second; "
        "then end, close.",
        lambda: Heartbeat(), []),
    Scenario(
        "kernel_loss",
        f"Real capture loss: tcpdump runs with a 1 KiB kernel buffer (-B 1) while sender 'loss-sender' floods "
        f"{KernelLoss.N} small unsettled messages ('loss N', 6-9 bytes) to one queue and receiver 'loss-receiver' "
        f"on the same session (credit {KernelLoss.N} in one flow) accepts them, rejecting every 5th "
        "(amqp:precondition-failed); then "
        "both links detach, end, close. The kernel drops packets the capture never sees (their number is in "
        "capture_stats.packets_dropped_by_kernel), so frames of any kind are missing from the capture: "
        "the truth lists what the client really sent and received.",
        lambda: KernelLoss(), [q("kernel_loss")], tcpdump_args=["-B", "1", "-s", "0"], subdir="loss"),
]


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------


def tool_versions() -> dict:
    import proton
    v = {"python_qpid_proton": ".".join(map(str, proton.VERSION))}
    try:
        out = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True).stdout
        v["tcpdump"] = out.split("\n")[0].replace("tcpdump version ", "").strip()
    except OSError:
        v["tcpdump"] = None
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"],
                             capture_output=True, text=True).stdout
        v["rabbitmq_server_package"] = out.strip() or None
    except OSError:
        v["rabbitmq_server_package"] = None
    return v


def build_truth(sc: Scenario, client: ScenarioClient, broker_after, tools: dict) -> dict:
    conns = [c.as_json() for c in client.conns]
    links = [l.as_json() for l in client.links]
    snd = [l for l in links if l["role"] == "sender"]
    rcv = [l for l in links if l["role"] == "receiver"]

    def outc(ls):
        return {k: sum(l["outcomes"][k] for l in ls) for k in ("accepted", "rejected", "released", "modified")}

    totals = {
        "messages_sent": sum(l["messages_sent"] for l in snd),
        "deliveries_received": sum(l["deliveries_received"] for l in rcv),
        "sender_outcomes": outc(snd),
        "receiver_outcomes": outc(rcv),
        "presettled_sent": sum(l["presettled"] for l in snd),
        "presettled_received": sum(l["presettled"] for l in rcv),
        "transfer_frames_sent": sum(c["frame_counts_sent"].get("transfer", 0) for c in conns),
        "transfer_frames_received": sum(c["frame_counts_received"].get("transfer", 0) for c in conns),
        "credit_grants": sum(len(l["credit_grants"]) for l in rcv),
    }
    remote_version = next((c["remote_version"] for c in conns if c["remote_version"]), None)
    return {
        "schema_version": SCHEMA_VERSION,
        "name": sc.name,
        "capture": f"{sc.name}.pcap",
        "description": sc.description,
        "server": sc.server,
        "address_family": "ipv6" if sc.server.startswith("[") else "ipv4",
        "sasl_mechanism": sc.sasl,
        "connection_count": len(conns),
        "connections": conns,
        "link_count": len(links),
        "links": links,
        "totals": totals,
        "broker_queues_after": broker_after,
        "notes": sc.notes + client.notes,
        "tools": {**tools, "rabbitmq": remote_version},
    }


def run_scenario(sc: Scenario, broker: Broker, out: Path, workdir: Path, tools: dict) -> dict:
    log(f"== scenario {sc.name}")
    broker.delete_queues(sc.queues)
    cap = Capture(workdir, sc.name, sc.tcpdump_args)
    cap.start()
    client = sc.make()
    try:
        Container(client).run()
    finally:
        time.sleep(SETTLE_DELAY)
        cap.stop()
    if client.failed:
        raise RuntimeError(f"scenario {sc.name}: {client.failed}")
    after = broker.list_queues()
    if after is not None:
        after = {k: v for k, v in sorted(after.items()) if k in sc.queues}
    truth = build_truth(sc, client, after, tools)
    if sc.tcpdump_args:
        truth["capture_stats"] = {"tcpdump_args": sc.tcpdump_args, **cap.stats}
    out = out / sc.subdir if sc.subdir else out
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cap.pcap, out / f"{sc.name}.pcap")
    # (a flood's truth lists thousands of deliveries: written without indentation)
    text = json.dumps(truth, separators=(",", ":")) if sc.tcpdump_args else json.dumps(truth, indent=1)
    (out / f"{sc.name}.truth.json").write_text(text + "\n")
    size = (out / f"{sc.name}.pcap").stat().st_size
    t = truth["totals"]
    log(f"  wrote {sc.name}.pcap ({size} bytes) and {sc.name}.truth.json: connections={truth['connection_count']} "
        f"links={truth['link_count']} sent={t['messages_sent']} received={t['deliveries_received']} "
        f"transfers sent/recv={t['transfer_frames_sent']}/{t['transfer_frames_received']}")
    return truth


# --------------------------------------------------------------------------
# another protocol on the AMQP port: AMQP 0-9-1 (not decoded by amqp-dissect)
# --------------------------------------------------------------------------

OTHER_DIR = "other-protocols"  # under --out: not an AMQP 1.0 sample (the samples' tests read *.pcap only)
AMQP091_QUEUE = "amqpdissect.amqp091"


def generate_amqp091(out: Path, workdir: Path, tools: dict) -> dict:
    """``<out>/other-protocols/amqp091.pcap`` and its truth: RabbitMQ's own protocol, AMQP 0-9-1, on the
    same port as AMQP 1.0.  Connection 0: a real 0-9-1 client (``pika``, BlockingConnection, guest) declares
    a queue, publishes 3 messages, gets and acks them with basic.get, closes.  Connection 1: a raw socket
    sends the AMQP 0-10 protocol header; RabbitMQ answers with the header of the version it speaks (0-9-1)
    and closes the socket.  The capture keeps only these two TCP connections (the broker may have other
    clients on the port: the capture is filtered on our clients' ports afterwards).  Truth: what the
    clients did and read (never the capture), and for connection 1 the bytes written and read."""
    import pika  # only this sample needs it: pip install pika

    log("== other protocol: amqp091")
    cap = Capture(workdir, "amqp091.raw")
    cap.start()
    conns: list[dict] = []
    try:
        params = pika.ConnectionParameters("127.0.0.1", AMQP_PORT, credentials=pika.PlainCredentials("guest", "guest"))
        c = pika.BlockingConnection(params)
        sock = c._impl._transport._sock  # pika keeps its socket there (1.x): the client port, for the filter
        port = sock.getsockname()[1]
        ch = c.channel()
        ch.queue_declare(AMQP091_QUEUE, durable=False, auto_delete=False)
        ch.queue_purge(AMQP091_QUEUE)
        bodies = [f"amqp 0-9-1 message {i}".encode() for i in range(3)]
        for b in bodies:
            ch.basic_publish("", AMQP091_QUEUE, b, pika.BasicProperties(content_type="text/plain"))
        got = []
        while len(got) < len(bodies):
            method, _props, body = ch.basic_get(AMQP091_QUEUE)
            if method is None:
                time.sleep(0.05)
                continue
            got.append(body)
            ch.basic_ack(method.delivery_tag)
        ch.queue_delete(AMQP091_QUEUE)
        server = dict(c._impl.server_properties)
        c.close()
        conns.append({
            "index": 0, "client": "pika " + pika.__version__, "client_port": port,
            "protocol_header_sent": "AMQP 0-9-1",
            "server_product": server.get("product", b"").decode() if isinstance(server.get("product"), bytes)
            else server.get("product"),
            "server_version": server.get("version", b"").decode() if isinstance(server.get("version"), bytes)
            else server.get("version"),
            "messages_published": len(bodies), "messages_got": len(got), "bodies_equal": got == bodies,
        })
        with socket.create_connection(("127.0.0.1", AMQP_PORT), timeout=5.0) as s:
            port = s.getsockname()[1]
            hdr = b"AMQP\x01\x01\x00\x0a"
            s.sendall(hdr)
            answer, reset = b"", False
            while True:
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:  # RabbitMQ may reset the socket after its answer
                    reset = True
                    break
                if not chunk:
                    break
                answer += chunk
        conns.append({
            "index": 1, "client": "raw socket", "client_port": port, "protocol_header_sent": "AMQP 0-10",
            "answer_hex": answer.hex(), "bytes_sent": len(hdr), "bytes_received": len(answer), "reset_by_server": reset,
        })
    finally:
        time.sleep(2.5)  # tcpdump -w hands over packets in blocks (about a second): wait for the last ones
        cap.stop()
    folder = out / OTHER_DIR
    folder.mkdir(parents=True, exist_ok=True)
    flt = " or ".join(f"tcp port {c['client_port']}" for c in conns)
    subprocess.run(["tcpdump", "-n", "-r", str(cap.pcap), "-w", str(folder / "amqp091.pcap"), flt],
                   check=True, capture_output=True)
    truth = {
        "schema_version": SCHEMA_VERSION, "name": "amqp091", "capture": "amqp091.pcap",
        "description": generate_amqp091.__doc__.split("\n\n")[0].replace("\n", " ").replace("    ", " "),
        "server": f"127.0.0.1:{AMQP_PORT}", "connection_count": len(conns), "connections": conns,
        "tools": {**tools, "pika": pika.__version__},
    }
    (folder / "amqp091.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    log(f"  wrote {OTHER_DIR}/amqp091.pcap and amqp091.truth.json: {len(conns)} connections")
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent), help="output directory (default: samples/)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--amqp091", action="store_true",
                    help="only the AMQP 0-9-1 capture (other-protocols/amqp091.pcap; needs pika)")
    ap.add_argument("--messages", action="store_true",
                    help="only the message-layer captures (messages/*.pcap, made by messages/scenarios.py; "
                         "--only then names its scenarios; rhea needs node/npm, azure_cbs pip install azure-servicebus)")
    args = ap.parse_args(argv)
    if args.messages:
        sys.path.insert(0, str(Path(__file__).resolve().parent / "messages"))
        import scenarios as message_scenarios  # samples/messages/scenarios.py
        from other_stacks import OTHER_SCENARIOS  # rhea (node) and the Azure SDK's AMQP stack
        margs = ["--out", str(Path(args.out) / "messages")] + (["--only", *args.only] if args.only else [])
        return message_scenarios.main(margs + (["--list"] if args.list else []), more=OTHER_SCENARIOS)
    if args.list:
        for sc in SCENARIOS:
            print(f"{sc.name}: {sc.description}")
        return 0
    names = {sc.name for sc in SCENARIOS}
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            ap.error(f"unknown scenario(s) {unknown}; known: {sorted(names)}")
    selected = [sc for sc in SCENARIOS if not args.only or sc.name in args.only]
    check_requirements()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tools = tool_versions()
    workdir = Path(tempfile.mkdtemp(prefix="amqpdissect-capture-"))
    workdir.chmod(0o777)  # tcpdump drops root privileges to user tcpdump before writing
    broker = Broker()
    try:
        broker.start()
        if args.amqp091:
            generate_amqp091(out, workdir, tools)
            selected = []
        for sc in selected:
            run_scenario(sc, broker, out, workdir, tools)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"done: {len(selected)} capture(s) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
