"""Message-layer samples made by other AMQP 1.0 stacks than proton (run by scenarios.py).

* ``rhea_request_reply``: two rhea (npm) clients in one node process, ``rhea_scenario.js``;
  the node script writes the truth.  rhea is looked up with ``NODE_PATH``; when it is not found
  it is installed with ``npm install rhea`` into the temporary work folder (needs the npm registry).
* ``azure_cbs``: the Azure SDK's own AMQP stack (``azure.servicebus._pyamqp`` from PyPI
  ``azure-servicebus``) doing claims-based-security put-tokens: once against RabbitMQ (which has no
  ``$cbs`` node: whatever it answers is recorded), then twice against ``cbs_responder.py``, a small
  proton server on 127.0.0.2:5672 that answers put-tokens (202, or 401 for a token it refuses).
  The tokens are made up (``made-up-token...``), never a real secret.  Needs
  ``pip install azure-servicebus`` in the interpreter that runs the script.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import generate as base
import scenarios as sc_mod

HERE = Path(__file__).resolve().parent
SCHEMA = sc_mod.SCHEMA


def _node_path(workdir: Path) -> str:
    """A NODE_PATH where ``require('rhea')`` works: the caller's, or a fresh npm install."""
    env = dict(os.environ)
    probe = subprocess.run(["node", "-e", "require('rhea'); require('debug')"], env=env, capture_output=True)
    if probe.returncode == 0:
        return env.get("NODE_PATH", "")
    dest = workdir / "node"
    dest.mkdir(exist_ok=True)
    base.log("  rhea not found on NODE_PATH: npm install rhea (into the temporary work folder)")
    subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(dest), "rhea"],
                   check=True, timeout=300)
    return str(dest / "node_modules")


def run_rhea(sc, broker: base.Broker, out: Path, workdir: Path, tools: dict) -> dict:
    base.log(f"== scenario {sc.name}")
    if not shutil.which("node"):
        raise RuntimeError("rhea_request_reply needs node and npm: apt-get install -y nodejs npm")
    node_path = _node_path(workdir)
    broker.delete_queues(sc.queues)
    cap = base.Capture(workdir, sc.name)
    cap.start()
    raw = workdir / "rhea.truth.json"
    try:
        env = dict(os.environ, NODE_PATH=node_path)
        r = subprocess.run(["node", str(HERE / "rhea_scenario.js"), str(raw)], env=env, timeout=60,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"rhea scenario failed: {r.stdout}{r.stderr}")
    finally:
        time.sleep(base.SETTLE_DELAY + 1.0)
        cap.stop()
    rt = json.loads(raw.read_text())
    after = broker.list_queues()
    truth = {
        "schema": SCHEMA, "schema_version": base.SCHEMA_VERSION, "name": sc.name, "capture": f"{sc.name}.pcap",
        "description": sc.description, "client_stack": f"rhea {rt.pop('rhea_version')} on node {rt.pop('node_version')}",
        "server": f"127.0.0.1:{base.AMQP_PORT}", "sasl_mechanism": "PLAIN",
        "connection_count": len(rt["connections"]), "link_count": len(rt["links"]), **rt,
        "broker_queues_after": None if after is None else {k: v for k, v in sorted(after.items()) if k in sc.queues},
        "tools": {**tools, "rhea": None},
    }
    truth["tools"]["rhea"] = truth["client_stack"]
    truth["notes"] = sc.notes + truth["notes"]
    return sc_mod.write(out, sc.name, cap, truth)


# --------------------------------------------------------------------------
# the Azure SDK's AMQP stack and $cbs
# --------------------------------------------------------------------------

_FRAME_LOG = re.compile(r"^(->|<-) (\w+?)Frame\(")
# an error in a frame the SDK read: <- EndFrame(error=[b'amqp:...', b'description', ...])
_ERROR_LOG = re.compile(r"^<- (End|Close|Detach)Frame\((?:handle=(\d+), closed=\w+, )?error=\[b'((?:[^'\\]|\\.)*)'"
                        r"(?:, b'((?:[^'\\]|\\.)*)')?")


def _unbytes(text: str) -> str:
    """The text of a bytes repr the SDK logged (b'...' with escapes)."""
    return ast.literal_eval("b'" + text + "'").decode("utf-8", "replace")


_ATTACH_LOG = re.compile(r"^-> AttachFrame\(name='([^']*)', handle=(\d+), role=(True|False),.*?"
                         r"source=Source\(address=(?:'([^']*)'|None).*?target=Target\(address=(?:'([^']*)'|None)")


class _FrameLog(logging.Handler):
    """The SDK's own network trace (network_trace=True): every frame it writes and reads, in order."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record) -> None:
        self.lines.append((record.created, record.getMessage()))

    def take(self) -> tuple[list[str], list[str], list[dict], list[dict], dict]:
        sent, received, cbs, links = [], [], [], []
        errors: dict = {"session_errors": [], "connection_error": None, "detach_errors": []}
        for t, line in self.lines:
            e = _ERROR_LOG.match(line)
            if e:
                err = {"condition": _unbytes(e.group(3)), "description": _unbytes(e.group(4)) if e.group(4) else None}
                if e.group(1) == "End":
                    errors["session_errors"].append(err)
                elif e.group(1) == "Close":
                    errors["connection_error"] = err
                else:
                    errors["detach_errors"].append({"handle": int(e.group(2)), **err})
            m = _FRAME_LOG.match(line)
            a = _ATTACH_LOG.match(line)
            if a:
                links.append({"name": a.group(1), "handle": int(a.group(2)),
                              "role": "receiver" if a.group(3) == "True" else "sender",
                              "source": a.group(4), "target": a.group(5), "t_attach": round(t, 6)})
            if m:
                name = re.sub(r"(?<!^)([A-Z])", r"-\1", m.group(2)).lower()
                (sent if m.group(1) == "->" else received).append(name)
            elif line.startswith("CBS"):
                cbs.append({"t": round(t, 6), "log": line[:300]})
        self.lines = []
        return sent, received, cbs, links, errors


def _counts(names: list[str]) -> dict:
    out: dict = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def run_azure(sc, broker: base.Broker, out: Path, workdir: Path, tools: dict) -> dict | None:
    base.log(f"== scenario {sc.name}")
    try:
        from azure.servicebus import __version__ as sb_version
        from azure.servicebus._pyamqp.authentication import AccessToken, JWTTokenAuth
        from azure.servicebus._pyamqp.client import AMQPClient, SendClient
        from azure.servicebus._pyamqp.message import Message, Properties
    except ImportError:
        base.log("  skipped: needs the Azure SDK's AMQP stack: pip install azure-servicebus")
        return None
    responder_out = workdir / "responder.json"
    responder_host = "127.0.0.2"
    cap = base.Capture(workdir, sc.name)
    cap.start()
    enforce = ["--enforce-expiry"] if any(p[5] for p in AZURE_PLANS[sc.name]) else []
    resp = subprocess.Popen([sys.executable, str(HERE / "cbs_responder.py"), "--host", responder_host,
                             "--out", str(responder_out), "--seconds", "60", *enforce],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base.log(f"  started cbs_responder.py (pid {resp.pid}) on {responder_host}:{base.AMQP_PORT}")
    line = resp.stdout.readline()
    if "listening" not in line:
        resp.kill()
        raise RuntimeError(f"cbs_responder did not start: {line}")
    flog = _FrameLog()
    lg = logging.getLogger("azure.servicebus._pyamqp")
    lg.setLevel(logging.DEBUG)
    lg.addHandler(flog)
    lg.propagate = False
    clients = []
    plans = AZURE_PLANS[sc.name]
    try:
        for i, (cid, host, token, n_msgs, lifetime, outlive) in enumerate(plans):
            host = responder_host if host == "responder" else host
            server = f"{host}:{base.AMQP_PORT}"
            audience = f"amqp://{server}/amqpdissect-entity"
            expires_on = int(time.time()) + lifetime
            rec = {"index": i, "container_id": cid, "server": server, "sasl_mechanism": None,
                   "frames_logged": "AMQP frames only (the SDK's network trace does not log SASL frames)",
                   "token": {"token": token, "token_type": "jwt", "audience": audience, "expires_on": expires_on},
                   "t_open": round(time.time(), 6), "t_closed": None, "put_token": None, "exception": None,
                   "messages_sent": [], "notes": []}
            auth = JWTTokenAuth(audience, audience, lambda token=token, e=expires_on: AccessToken(token, e),
                                token_type=b"jwt")
            kw = dict(auth=auth, use_tls=False, network_trace=True, auth_timeout=3, client_name=cid)
            client = SendClient(server, "amqpdissect-entity", **kw) if n_msgs else AMQPClient(server, **kw)
            mech = getattr(auth.sasl, "mechanism", None)
            rec["sasl_mechanism"] = mech.decode() if isinstance(mech, bytes) else mech
            t0 = time.time()
            try:
                client.open()
                ready = False
                while time.time() - t0 < 4.0:
                    if client.client_ready():
                        ready = True
                        break
                rec["client_ready"] = ready
                if not ready:
                    rec["notes"].append("the client was not ready after 4 s (no put-token answer)")
                for k in range(1, n_msgs + 1 if ready else 1):
                    mid = f"azure-msg-{k}"
                    t = round(time.time(), 6)
                    client.send_message(Message(value=f"azure message {k}", properties=Properties(message_id=mid),
                                                application_properties={"n": k}))
                    rec["messages_sent"].append({"message_id": {"type": "string", "value": mid}, "t_sent": t,
                                                 "outcome": "accepted", "t_outcome": round(time.time(), 6),
                                                 "address": "amqpdissect-entity"})
                if outlive and ready:
                    # keep the link past the token's expiry, then read what arrived and send once more
                    time.sleep(max(0.0, expires_on + 1.0 - time.time()))
                    rec["t_read_after_expiry"] = round(time.time(), 6)
                    try:
                        for _ in range(3):
                            client._connection.listen(wait=0.2)  # the SDK reads its socket
                    except Exception as exc:  # noqa: BLE001
                        rec["read_exception"] = {"type": type(exc).__name__, "message": str(exc)[:500]}
                    mid = "azure-msg-after-expiry"
                    rec["late_send"] = {"message_id": {"type": "string", "value": mid}, "t": round(time.time(), 6)}
                    client.send_message(Message(value="after expiry", properties=Properties(message_id=mid)))
                    rec["late_send"]["outcome"] = "accepted"
            except Exception as exc:  # noqa: BLE001 - what the SDK raised is part of the record
                rec["exception"] = {"type": type(exc).__name__, "message": str(exc)[:500]}
            finally:
                try:
                    client.close()
                except Exception as exc:  # noqa: BLE001
                    rec["notes"].append(f"close raised {type(exc).__name__}: {exc}")
                rec["t_closed"] = round(time.time(), 6)
            sent, received, cbs, links, errors = flog.take()
            rec["links"] = links
            rec.update(errors)
            rec["frames_sent"], rec["frames_received"] = sent, received
            rec["frame_counts_sent"], rec["frame_counts_received"] = _counts(sent), _counts(received)
            rec["cbs_log"] = cbs
            for c in cbs:
                m = re.search(r"status code: (\d+), status_description: b?'([^']*)'", c["log"])
                if m:
                    rec["put_token"] = {"status_code": int(m.group(1)), "status_description": m.group(2), "t": c["t"]}
            clients.append(rec)
            time.sleep(0.3)
    finally:
        lg.removeHandler(flog)
        resp.send_signal(signal.SIGTERM)
        try:
            resp.wait(timeout=10)
        except subprocess.TimeoutExpired:
            base._terminate_pid(resp.pid, "cbs_responder")
        base.log(f"  stopped cbs_responder.py (pid {resp.pid})")
        time.sleep(base.SETTLE_DELAY + 1.0)
        cap.stop()
    responder = json.loads(responder_out.read_text()) if responder_out.exists() else None
    truth = {
        "schema": SCHEMA, "schema_version": base.SCHEMA_VERSION, "name": sc.name, "capture": f"{sc.name}.pcap",
        "description": sc.description, "client_stack": f"azure-servicebus {sb_version} (_pyamqp)",
        "connection_count": len(clients), "connections": clients, "responder": responder, "notes": list(sc.notes),
        "tools": {**tools, "azure_servicebus": sb_version},
    }
    return sc_mod.write(out, sc.name, cap, truth)


# per scenario: (container-id, host or "responder", token, messages after the put-token,
#                token lifetime in s, keep the link past the token's expiry)
AZURE_PLANS = {
    "azure_cbs": [
        ("amqp-dissect-azure-cbs-rabbitmq", "127.0.0.1", "made-up-token-for-rabbitmq", 0, 600, False),
        ("amqp-dissect-azure-cbs-accepted", "responder", "made-up-token-accepted", 2, 600, False),
        ("amqp-dissect-azure-cbs-refused", "responder", "made-up-token-refuse-me", 0, 600, False),
    ],
    "azure_cbs_expiry": [
        ("amqp-dissect-azure-cbs-expiry", "responder", "made-up-token-short-lived", 1, 3, True),
    ],
}

OTHER_SCENARIOS = [
    sc_mod.MScenario(
        "rhea_request_reply",
        "Two rhea (npm) clients in one node process. 'amqp-dissect-rhea-service' consumes "
        "/queue/amqpdissect.rhea.service and answers on /queue/amqpdissect.rhea.replies with correlation_id = "
        "the request's message_id (same AMQP type) and message_id rhea-reply-N; 'amqp-dissect-rhea-client' "
        "sends 6 requests (message ids string, ulong, uuid, binary in turn) with reply_to the reply queue and "
        "accepts the replies. Request 4 is answered twice (a duplicate reply, -dup2), request 5 is accepted and "
        "never answered. Then both connections close.",
        lambda: None, ["amqpdissect.rhea.service", "amqpdissect.rhea.replies"], runner=run_rhea),
    sc_mod.MScenario(
        "azure_cbs",
        "The Azure SDK's own AMQP stack (azure-servicebus' _pyamqp), plain AMQP without TLS, three connections "
        "one after the other, each doing a claims-based-security put-token (JWT type, a made-up token) on a "
        "$cbs request/response link pair. Connection 0 goes to RabbitMQ (127.0.0.1), which has no $cbs node; "
        "connections 1 and 2 go to cbs_responder.py, a small proton server on 127.0.0.2:5672 that answers "
        "put-tokens: connection 1's token is accepted (status-code 202), and it then attaches a sender to "
        "amqpdissect-entity and sends 2 messages; connection 2's token is refused (401) and the SDK raises "
        "TokenAuthFailure. The SDK authenticates each connection with SASL ANONYMOUS (its CBS credential); its "
        "network trace logs AMQP frames but not SASL frames, so the truth's frame lists start at open.",
        lambda: None, [], runner=run_azure),
    sc_mod.MScenario(
        "azure_cbs_expiry",
        "The Azure SDK's _pyamqp against cbs_responder.py started with --enforce-expiry: one connection puts a "
        "made-up token that expires 3 s later (202), attaches a sender to amqpdissect-entity and sends 1 message, "
        "then keeps the link past the token's expiry. At the expiry the responder detaches the link with "
        "amqp:link:detach-forced ('the token for ... expired'), as a token-checking service does. 1 s after the "
        "expiry the client reads its socket, tries one more send (the SDK raises TokenExpired by itself) and "
        "closes.",
        lambda: None, [], runner=run_azure),
]
