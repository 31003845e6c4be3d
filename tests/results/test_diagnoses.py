"""The report's diagnoses (issue 28) and the packets of its opened / closed lines (issue 27).

Oracles: the samples' ground truth (the clients' own records: credit grants, session errors,
idle-time-outs asked, what was sent before what), tshark's packet numbers of each open, begin,
attach, detach, end and close, and for the corner cases, captures built here whose frames are
encoded by python-qpid-proton's codec (TCP/IP and the file by dpkt, tests/support/pcapbuild.py):
what was built, and when, is the truth.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import pytest
from proton import Data, symbol, uint, ulong

from amqp_dissect.amqp.spec import RESTRICTED
from amqp_dissect.cli.main import main
from pcapbuild import TcpConversation, write_pcap

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
NS = 1_000_000_000


def _run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _json(capsys, pcap, *more) -> dict:
    return json.loads(_run(capsys, "report", pcap, "-T", "json", *more))


def _truth(name: str) -> dict:
    return json.loads((SAMPLES / f"{name}.truth.json").read_text())


# --------------------------------------------------------------------------- frames, built


def _put(d: Data, v) -> None:
    if v is None:
        d.put_null()
    elif isinstance(v, tuple) and v and v[0] == "described":
        d.put_described()
        d.enter()
        d.put_ulong(v[1])
        d.put_list()
        d.enter()
        for x in v[2]:
            _put(d, x)
        d.exit()
        d.exit()
    else:
        d.put_object(v)


def _frame(code: int, fields: list, payload: bytes = b"", channel: int = 0) -> bytes:
    d = Data()
    _put(d, ("described", code, fields))
    body = d.encode() + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


HEARTBEAT = struct.pack(">IBBH", 8, 2, 0, 0)
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DETACH, END, CLOSE = 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17, 0x18
ERROR = 0x1D


def _error(cond: str, desc: str):
    return ("described", ERROR, [symbol(cond), desc])


def _message() -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x77)
    d.put_string("m")
    d.exit()
    return d.encode()


class _Conv:
    """A connection built frame by frame at given times (seconds after t0)."""

    T0 = 1_700_000_000.0

    def __init__(self, port=40000):
        self.c = TcpConversation(client=("10.0.0.1", port), t0=self.T0, dt=0.0)
        self.c.handshake()
        self.send(0, 0.0, b"AMQP\x00\x01\x00\x00")
        self.send(1, 0.0, b"AMQP\x00\x01\x00\x00")

    def send(self, d: int, at: float, data: bytes) -> int:
        """Send ``data`` from ``d`` at ``at`` seconds; returns its packet number (1-based)."""
        self.c.t = self.T0 + at
        self.c.send(d, data)
        return len(self.c.records)

    def lose(self, d: int, data: bytes) -> None:
        """``data`` from ``d`` was sent but the capture lost it (a TCP gap)."""
        self.c.next_seq[d] = (self.c.next_seq[d] + len(data)) & 0xFFFFFFFF

    def open(self, idle_client=None, idle_server=None) -> None:
        self.send(0, 0.01, _frame(OPEN, ["client", None, None, None, None if idle_client is None else uint(idle_client)]))
        self.send(1, 0.02, _frame(OPEN, ["server", None, None, None, None if idle_server is None else uint(idle_server)]))

    def pcap(self, tmp_path, name="built.pcap") -> Path:
        p = tmp_path / name
        p.write_bytes(write_pcap(self.c.records))
        return p


def _receiver_link(cv: _Conv, at: float, address="q1") -> None:
    """A session and a link from the server (sender) to the client (receiver)."""
    cv.send(0, at, _frame(BEGIN, [None, uint(0), uint(1000), uint(1000)]))
    cv.send(1, at + 0.001, _frame(BEGIN, [0, uint(0), uint(1000), uint(1000)]))
    cv.send(0, at + 0.002, _frame(ATTACH, ["rcv", uint(0), True, None, None, ("described", 0x28, [address]), None]))
    cv.send(1, at + 0.003, _frame(ATTACH, ["rcv", uint(0), False, None, None, ("described", 0x28, [address]), None,
                                           None, None, uint(0)]))


def _flow(handle, dc, credit, available=None, nii=0, noid=0) -> bytes:
    return _frame(FLOW, [uint(nii), uint(1000), uint(noid), uint(1000), uint(handle), uint(dc), uint(credit),
                         None if available is None else uint(available)])


def _transfer(handle, did) -> bytes:
    return _frame(TRANSFER, [uint(handle), uint(did), str(did).encode(), uint(0), True], _message())


# --------------------------------------------------------------------------- starvation


@pytest.mark.parametrize("available", [5, 0])
def test_a_receiver_starved_while_the_sender_said_messages_waited(tmp_path, capsys, available):
    cv = _Conv()
    cv.open()
    _receiver_link(cv, 0.1)
    cv.send(0, 0.2, _flow(0, 0, 1))  # credit 1
    used = cv.send(1, 0.21, _transfer(0, 0))  # uses it up
    said = cv.send(1, 0.22, _flow(0, 1, 0, available=available, nii=1, noid=1))
    again = cv.send(0, 0.72, _flow(0, 1, 1, nii=1))  # credit again 0.5 s after the credit ran out
    cv.send(0, 0.8, _frame(CLOSE, []))
    cv.send(1, 0.81, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    st = rep["diagnoses"]["starved"]
    if not available:  # the sender said nothing waited: an idle receiver, not a starved one
        assert st == []
        return
    assert len(st) == 1
    assert (st[0]["link"], st[0]["receiver_side"], st[0]["address"], st[0]["times"]) == ("rcv", "client", "q1", 1)
    x = st[0]["longest"]
    assert st[0]["intervals"] == [x] and st[0]["total"] == x["duration"]
    assert x["since_packet"] == used and x["until_packet"] == again and x["ended_by"] == "flow"
    assert x["duration"] == 510_000_000  # from the transfer that used the credit (0.21 s) to the flow (0.72 s)
    assert x["evidence"] == [{"kind": "available", "available": available, "time": int((cv.T0 + 0.22) * NS),
                              "packet": said}]
    text = _run(capsys, "report", cv.pcap(tmp_path, "t.pcap"))
    assert f"the sender's flow said available {available} [packet {said}]" in text
    assert f"[since packet {used}, credit again at packet {again}]" in text


def test_no_starvation_claimed_across_a_gap_of_the_receiver(tmp_path, capsys):
    """The receiver's bytes in the interval were lost: a flow granting credit may have been there."""
    cv = _Conv()
    cv.open()
    _receiver_link(cv, 0.1)
    cv.send(0, 0.2, _flow(0, 0, 1))
    cv.send(1, 0.21, _transfer(0, 0))
    cv.send(1, 0.22, _flow(0, 1, 0, available=5, nii=1, noid=1))
    cv.lose(0, _flow(0, 1, 1, nii=1))  # (a grant the capture lost)
    cv.send(0, 0.72, _flow(0, 1, 1, nii=1))
    cv.send(0, 0.8, _frame(CLOSE, []))
    cv.send(1, 0.81, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    assert rep["connections"][0]["gaps_client"] == 1
    assert rep["diagnoses"]["starved"] == []


def test_starved_by_transfers_arriving_on_another_link_to_the_address(tmp_path, capsys):
    """No available said; a producer's transfers reach the address while the receiver has credit 0."""
    cv = _Conv()
    cv.open()
    _receiver_link(cv, 0.1, "q2")
    # a producer link on the same session (the client sends to q2)
    cv.send(0, 0.11, _frame(ATTACH, ["snd", uint(1), False, None, None, None, ("described", 0x29, ["q2"]), None,
                                     None, uint(0)]))
    cv.send(1, 0.111, _frame(ATTACH, ["snd", uint(1), True, None, None, None, ("described", 0x29, ["q2"])]))
    cv.send(1, 0.112, _flow(1, 0, 100))
    cv.send(0, 0.2, _flow(0, 0, 1))
    used = cv.send(1, 0.21, _transfer(0, 0))
    arrived = cv.send(0, 0.4, _frame(TRANSFER, [uint(1), uint(0), b"p", uint(0), True], _message()))
    cv.send(0, 0.72, _flow(0, 1, 1, nii=1, noid=1))
    cv.send(1, 0.721, _transfer(0, 1))
    cv.send(0, 0.8, _frame(CLOSE, []))
    cv.send(1, 0.81, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    st = rep["diagnoses"]["starved"]
    assert [(x["link"], x["longest"]["since_packet"]) for x in st] == [("rcv", used)]
    ev = st[0]["longest"]["evidence"]
    assert ev == [{"kind": "arriving", "connection": rep["connections"][0]["connection"], "link": "snd",
                   "time": int((cv.T0 + 0.4) * NS)}], arrived


def test_credit_idle_sample_starved_as_its_truth_says(capsys):
    """credit_idle: the receiver granted 2 while 4 were queued (2 wait: RabbitMQ's available says
    so); later it granted 1 on an empty queue (not starved); the sender waiting for its first
    credit is not a starved receiver."""
    truth = _truth("credit_idle")
    rcv = next(lk for lk in truth["links"] if lk["role"] == "receiver")
    c0 = truth["connections"][0]
    sent = c0["frames_sent"]
    queued = sent[: sent.index("flow:0")].count("transfer:0")  # sent before the receiver's first grant
    rep = _json(capsys, SAMPLES / "credit_idle.pcap")
    st = rep["diagnoses"]["starved"]
    assert [x["link"] for x in st] == [rcv["name"]]
    # (RabbitMQ's flow said available 4 in the packet of the two transfers: 2 were left)
    assert st[0]["times"] == 1
    ev = st[0]["longest"]["evidence"]
    assert [e["kind"] for e in ev] in (["available"], ["available-left"])
    assert ev[0]["available"] == queued - rcv["credit_grants"][0]
    assert st[0]["address"] == rcv["address"]


# --------------------------------------------------------------------------- ends


def _spec_type(cond: str) -> str | None:
    for name, r in RESTRICTED.items():
        if "error-condition" in (r.provides or ()) and cond in (r.choices or {}):
            return name
    return None


@pytest.mark.parametrize("name", ["attach_errors", "drain"])
def test_session_errors_named_with_their_side_as_the_truth_says(capsys, name):
    truth = _truth(name)
    errs = truth["connections"][0]["session_errors"]
    rep = _json(capsys, SAMPLES / f"{name}.pcap")
    got = [e for e in rep["diagnoses"]["ends"] if e["scope"] == "session"]
    # the client's record lists errors it received: the server ended those sessions
    assert [(e["session"], e["side"], e["condition"], e["description"]) for e in got] == [
        (x["session"], "server", x["condition"], x["description"]) for x in errs]
    for e in got:
        assert e["condition_type"] == _spec_type(e["condition"]) == "amqp-error"
        assert e["answer_packet"] is not None and e["answer_packet"] > e["packet"]
    # nothing else ended with an error: the connection closed, links ended with it or detached
    assert [e for e in rep["diagnoses"]["ends"] if e["scope"] != "session"] == []


def test_every_end_is_counted_once(capsys):
    truth = _truth("attach_errors")
    rep = _json(capsys, SAMPLES / "attach_errors.pcap")
    dg = rep["diagnoses"]
    n = {"connection": 0, "session": 0, "link": 0}
    for e in dg["ends"]:
        n[e["scope"]] += 1
    for e in dg["ends_clean"]:
        n[e["scope"]] += e["count"]
    assert n == {"connection": truth["connection_count"], "session": truth["connections"][0]["sessions_begun"],
                 "link": truth["link_count"]}


def test_kernel_loss_no_end_claimed_that_the_truth_denies(capsys):
    """kernel_loss lost frames of the server: every link was detached by the client without
    error (truth); nothing is said ended with an error, and no starvation is made up."""
    truth = _truth("loss/kernel_loss")
    rep = _json(capsys, SAMPLES / "loss" / "kernel_loss.pcap")
    dg = rep["diagnoses"]
    assert all(lk["detach_error"] is None and lk["detached_by"] == "client" for lk in truth["links"])
    assert [e for e in dg["ends"] if e.get("condition")] == []
    clean = {(e["scope"], e["how"]): e["count"] for e in dg["ends_clean"]}
    assert clean.get(("link", "detach")) == truth["link_count"]
    assert dg["starved"] == []
    # the server lost bytes: silences of the server across those gaps are unknown, not measured
    assert dg["idle"][0]["server"]["unknown_silences"] >= 1


def _link_session(cv, at):
    cv.send(0, at, _frame(BEGIN, [None, uint(0), uint(1000), uint(1000)]))
    cv.send(1, at + 0.001, _frame(BEGIN, [0, uint(0), uint(1000), uint(1000)]))
    cv.send(0, at + 0.002, _frame(ATTACH, ["l", uint(0), False, None, None, None, ("described", 0x29, ["q"]), None,
                                          None, uint(0)]))
    cv.send(1, at + 0.003, _frame(ATTACH, ["l", uint(0), True, None, None, None, ("described", 0x29, ["q"])]))


def test_a_forced_detach_named_with_its_side_and_what_came_before(tmp_path, capsys):
    cv = _Conv()
    cv.open()
    _link_session(cv, 0.1)
    last_client = cv.send(0, 0.2, HEARTBEAT)
    det = cv.send(1, 3.2, _frame(DETACH, [uint(0), True, _error("amqp:link:detach-forced", "admin")]))
    ans = cv.send(0, 3.21, _frame(DETACH, [uint(0), True]))
    cv.send(0, 3.3, _frame(CLOSE, []))
    cv.send(1, 3.31, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    e = [x for x in rep["diagnoses"]["ends"] if x["scope"] == "link"]
    assert len(e) == 1
    e = e[0]
    assert (e["side"], e["condition"], e["condition_type"], e["description"]) == (
        "server", "amqp:link:detach-forced", "link-error", "admin")
    assert (e["packet"], e["answer_packet"]) == (det, ans)
    assert e["before"]["client"]["packet"] == last_client
    assert e["before"]["client"]["before"] == 3 * NS
    text = _run(capsys, "report", cv.pcap(tmp_path, "t.pcap"))
    assert (f"detached by the server with amqp:link:detach-forced (link-error): admin  [detach packet {det}, "
            f"answered at packet {ans}]; after the client's heartbeat 3.000 s before [packet {last_client}], "
            f"the server's attach") in text


def test_an_end_lost_in_a_gap_is_unknown(tmp_path, capsys):
    cv = _Conv()
    cv.open()
    _link_session(cv, 0.1)
    det = cv.send(0, 0.3, _frame(DETACH, [uint(0), True]))
    cv.lose(1, _frame(DETACH, [uint(0), True]))  # the server's answer: in a gap
    cv.send(1, 0.4, _frame(END, []))
    cv.send(0, 0.41, _frame(END, []))
    cv.send(0, 0.5, _frame(CLOSE, []))
    cv.send(1, 0.51, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    e = [x for x in rep["diagnoses"]["ends"] if x["scope"] == "link"]
    assert len(e) == 1
    assert (e[0]["side"], e[0]["packet"], e[0]["answer_packet"]) == ("client", det, None)
    assert e[0]["answer"].startswith("unknown")


# --------------------------------------------------------------------------- idle time-out


def test_heartbeat_sample_idle_as_its_truth_says(capsys):
    truth = _truth("heartbeat")["connections"][0]
    rep = _json(capsys, SAMPLES / "heartbeat.pcap")
    (x,) = rep["diagnoses"]["idle"]
    assert (x["idle_time_out_client"], x["idle_time_out_server"]) == (
        truth["idle_timeout_requested_ms"], truth["remote_idle_timeout_ms"])
    # the server's heartbeats (truth: "empty" frames received) kept it within the client's demand
    assert truth["frame_counts_received"]["empty"] >= 1
    assert x["server"]["demand"] == truth["idle_timeout_requested_ms"] * 1_000_000
    assert not x["server"]["beyond_demand"] and x["server"]["longest"] < x["server"]["demand"]
    # the client sent nothing but its open, begin, end, close (truth): its longest silence is the
    # idle time between begin and end, within the server's 60 s
    assert truth["frames_sent"][1:] == ["open:0", "begin:0", "end:0", "close:0"]
    assert 3 * NS < x["client"]["longest"] < x["client"]["demand"]
    assert "expired" not in x


@pytest.mark.parametrize("silence", [0.9, 1.5])
def test_silence_below_and_beyond_the_idle_time_out(tmp_path, capsys, silence):
    """The client asks for a frame within 1000 ms; the server's last frame comes ``silence`` s
    before the client's close (which names the time-out when it is beyond)."""
    cv = _Conv()
    cv.open(idle_client=1000)
    cv.send(1, 0.5, HEARTBEAT)
    last = cv.send(1, 1.0, HEARTBEAT)
    beyond = silence > 1.0
    err = [_error("amqp:resource-limit-exceeded", "local-idle-timeout expired")] if beyond else []
    close = cv.send(0, 1.0 + silence, _frame(CLOSE, err))
    cv.send(1, 1.0 + silence + 0.01, _frame(CLOSE, []))
    rep = _json(capsys, cv.pcap(tmp_path))
    (x,) = rep["diagnoses"]["idle"]
    assert x["idle_time_out_client"] == 1000 and x["server"]["demand"] == NS
    # (its longest silence runs on to its own close, 0.01 s after the client's)
    assert x["server"]["longest"] == round((silence + 0.01) * NS)
    assert x["server"]["beyond_demand"] is beyond
    if not beyond:
        assert "expired" not in x
        return
    ex = x["expired"]
    assert (ex["closed_by"], ex["silent"], ex["silence"], ex["demand"]) == ("client", "server", round(silence * NS), NS)
    assert (ex["last_frame_packet"], ex["close_packet"]) == (last, close)
    assert (ex["condition"], ex["condition_type"], ex["names_idle"]) == (
        "amqp:resource-limit-exceeded", "amqp-error", True)
    text = _run(capsys, "report", cv.pcap(tmp_path, "t.pcap"))
    assert (f"idle time-out: the client closed 1.500 s after the server's last frame, beyond the 1.000 s it "
            f"asked for, with amqp:resource-limit-exceeded") in text


def test_a_silence_into_the_capture_end_is_unknown_beyond(tmp_path, capsys):
    cv = _Conv()
    cv.open(idle_client=1000)
    cv.send(1, 0.5, HEARTBEAT)
    cv.send(0, 3.0, HEARTBEAT)  # the capture goes on; the server says nothing more
    rep = _json(capsys, cv.pcap(tmp_path))
    (x,) = rep["diagnoses"]["idle"]
    tr = x["server"]["trailing"]
    assert tr["length"] == round(2.5 * NS) and tr["unknown_beyond"] == "capture end"


# --------------------------------------------------------------------------- packets of the tree (issue 27)


def _tshark_first(pcap: Path) -> dict:
    """(performative code, source port) -> first packet carrying it, by tshark."""
    r = subprocess.run(["tshark", "-r", str(pcap), "-Y", "amqp", "-T", "fields", "-e", "frame.number",
                        "-e", "tcp.srcport", "-e", "amqp.performative"], capture_output=True, text=True, check=True)
    out: dict = {}
    for line in r.stdout.splitlines():
        num, port, perfs = (line.split("\t") + ["", ""])[:3]
        for p in filter(None, perfs.split(",")):
            out.setdefault((int(p), int(port)), int(num))
    return out


@pytest.mark.parametrize("name", ["outcomes", "attach_errors", "heartbeat"])
def test_opened_and_closed_lines_name_tsharks_packets(capsys, name):
    pcap = SAMPLES / f"{name}.pcap"
    first = _tshark_first(pcap)
    text = _run(capsys, "report", pcap)
    rep = _json(capsys, pcap)
    c = rep["connections"][0]
    cport, sport = int(c["client"].rsplit(":", 1)[1]), int(c["server"].rsplit(":", 1)[1])
    for key, code in (("open_packets", OPEN), ("close_packets", CLOSE)):
        p = c[key]
        ports = (cport, sport) if p["side"] == "client" else (sport, cport)
        assert (p["packet"], p["answer_packet"]) == (first[(code, ports[0])], first.get((code, ports[1])))
    what = {OPEN: "open", CLOSE: "close"}
    line = next(x for x in text.splitlines() if x.startswith("  opened "))
    for code in (OPEN, CLOSE):
        p = c["open_packets" if code == OPEN else "close_packets"]
        assert f"[{what[code]} packet {p['packet']}, answered at packet {p['answer_packet']}]" in line
    # the first session's begin, in the text
    s0 = c["sessions"][0]["begin_packets"]
    assert s0["packet"] == first[(BEGIN, cport)] and s0["answer_packet"] == first[(BEGIN, sport)]
    assert re.search(rf"Session 0: .*begun by the client \[begin packet {s0['packet']}, answered at packet "
                     rf"{s0['answer_packet']}\]", text)


def test_the_parallel_report_has_the_same_diagnoses(capsys):
    pcaps = [SAMPLES / "attach_errors.pcap", SAMPLES / "credit_idle.pcap", SAMPLES / "heartbeat.pcap"]
    one = _json(capsys, *pcaps)
    two = _json(capsys, *pcaps, "-j", "2")
    assert two["diagnoses"] == one["diagnoses"]
    assert one["diagnoses"]["starved"] and one["diagnoses"]["ends"]


# --------------------------------------------------------------------------- samples/messages (issue 28's captures)

MESSAGES = SAMPLES / "messages"


def _messages_truth(name: str) -> dict:
    return json.loads((MESSAGES / f"{name}.truth.json").read_text())


def test_forced_endings_named_and_sided_as_the_clients_saw_them(capsys):
    """forced: three connections ended from the broker's side.  The clients' records: a session
    error (unauthorized-access) on connection 1; connections 0 and 2 lost their socket without a
    close frame (a transport error, no connection error)."""
    truth = _messages_truth("forced")
    rep = _json(capsys, MESSAGES / "forced.pcap")
    ends = rep["diagnoses"]["ends"]
    ids = [c["connection"] for c in rep["connections"]]
    assert len(ids) == truth["connection_count"]
    for i, tc in enumerate(truth["connections"]):
        mine = [e for e in ends if e["connection"] == ids[i]]
        conn = [e for e in mine if e["scope"] == "connection"]
        if tc["transport_error"] is not None and tc["connection_error"] is None:
            assert [e["how"] for e in conn] in (["transport rst"], ["transport fin"])  # no close frame
        else:
            assert conn == []  # closed without error
        sess = [(e["session"], e["side"], e["condition"], e["description"]) for e in mine if e["scope"] == "session"
                and e.get("condition")]
        assert sess == [(x["session"], "server", x["condition"], x["description"]) for x in tc["session_errors"]]
    # the links the clients saw end with a socket closed under them: no detach frame, no error made up
    aborted = {i for i, tc in enumerate(truth["connections"]) if tc["transport_error"] is not None}
    n = sum(1 for lk in truth["links"] if lk["detached_by"] == "connection-close" and lk["connection"] in aborted)
    clean = {(e["scope"], e["how"]): e["count"] for e in rep["diagnoses"]["ends_clean"]}
    assert clean[("link", "transport")] == n
    assert [e for e in ends if e["scope"] == "link"] == []


def test_idle_timeout_expiry_bracketed_by_the_clients_record(capsys):
    """idle_timeout: the client asked 1000 ms; the broker was paused (no frame after the pause);
    the client's idle timer fired and it closed with resource-limit-exceeded."""
    truth = _messages_truth("idle_timeout")
    tc = truth["connections"][0]
    when = {x["what"].split(" (")[0]: x for x in truth["timeline"]}
    paused = round(when["broker paused"]["t"] * NS)
    fired = round(when["transport error"]["t"] * NS)
    rep = _json(capsys, MESSAGES / "idle_timeout.pcap")
    (x,) = rep["diagnoses"]["idle"]
    assert x["idle_time_out_client"] == tc["idle_timeout_requested_ms"]
    ex = x["expired"]
    assert (ex["closed_by"], ex["silent"], ex["condition"], ex["description"]) == (
        "client", "server", tc["transport_error"]["condition"], tc["transport_error"]["description"])
    assert ex["names_idle"] and ex["demand"] == tc["idle_timeout_requested_ms"] * 1_000_000
    last = ex["close_time"] - ex["silence"]  # the server's last frame
    # the paused broker sent nothing after the pause, and had kept within the demand before it
    assert paused - ex["demand"] <= last <= paused
    # the close went out no sooner than the client's timer fired
    assert ex["close_time"] >= fired
    assert ex["silence"] > ex["demand"] and x["server"]["beyond_demand"]


def test_redelivery_loops_counted_as_the_client_settled_them():
    """redeliveries: the receivers' own records of each delivery's outcome, by message-id; a
    message released or modified twice or more is a loop (read with the message fields on)."""
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    from amqp_dissect.results.report import build_report

    truth = _messages_truth("redeliveries")
    n: dict = {}
    order: dict = {}
    for lk in truth["links"]:
        if lk["role"] != "receiver":
            continue
        for d in lk["deliveries"]:
            if d["outcome"] in ("released", "modified"):
                mid = d["message_id"]["value"]
                n[mid] = n.get(mid, 0) + 1
                order.setdefault(mid, []).append((lk["name"], d["outcome"]))
    want = {k: v for k, v in n.items() if v >= 2}
    assert want  # (the capture has loops: A released 3 times, B modified twice)
    rep = build_report(run_analysis(CaptureSource([str(MESSAGES / "redeliveries.pcap")]), rows=False,
                                    messages=True).analyzer)
    red = rep["diagnoses"]["redeliveries"]
    assert red["checked"]
    got = {x["id"]: x for x in red["loops"]}
    assert {k: x["released_or_modified"] for k, x in got.items()} == want
    for k, x in got.items():
        assert x["identity"] == "message-id" and x["id_type"] == "string"
        assert [(r["link"], r["outcome"]) for r in x["first"]] == order[k]
        assert all(r["outcome_packet"] > r["first_packet"] for r in x["first"])


def test_redelivery_loops_not_checked_without_the_messages(capsys):
    rep = _json(capsys, MESSAGES / "redeliveries.pcap")
    assert rep["diagnoses"]["redeliveries"] == {"checked": False, "loops": [], "messages_over": 0}
    assert "Redelivery loops: not checked (the messages were not read: report --messages reads them)" in _run(
        capsys, "report", MESSAGES / "redeliveries.pcap")


def test_the_html_page_has_the_diagnoses_of_the_text(tmp_path, capsys):
    from html import escape

    pcap = MESSAGES / "forced.pcap"
    text = _run(capsys, "report", pcap)
    page = tmp_path / "r.html"
    _run(capsys, "report", pcap, "-T", "html", "-o", page)
    html = page.read_text()
    head, rest = html.split('<h2 id="diagnoses">Diagnoses</h2>', 1)
    card = rest.split("</section>", 1)[0]
    lines = text.split("\nDiagnoses\n", 1)[1].splitlines()
    items = [x.strip() for x in lines if x.startswith("    ")]
    assert items and all(f"<li>{escape(x)}</li>" in card for x in items)


def test_the_docs_example_is_what_the_report_says(capsys):
    """docs/report.md's Diagnoses example: every line is a line of the two samples' reports."""
    doc = (SAMPLES.parent / "docs" / "report.md").read_text()
    block = doc.split("## Diagnoses", 1)[1].split("```", 2)[1].strip().splitlines()
    out = (_run(capsys, "report", MESSAGES / "forced.pcap")
           + _run(capsys, "report", MESSAGES / "idle_timeout.pcap")).splitlines()
    assert block[0] == "Diagnoses" and len(block) > 10
    assert [x for x in block if x not in out] == []


def test_the_text_shows_the_idle_lines_of_many_connections_only_where_there_is_something_to_say(tmp_path, capsys):
    """12 connections asked for an idle time-out; one went silent beyond it: the text gives that
    one in full and counts the 11 others (JSON lists all 12)."""
    from amqp_dissect.render.diagnoses import IDLE_SHOWN

    records = []
    for i in range(12):
        cv = _Conv(port=41000 + i)
        cv.open(idle_client=1000)
        for at in ((0.5, 1.0, 1.5, 2.0, 2.5) if i != 7 else (0.5, 2.5)):  # (the 8th: 2 s of silence)
            cv.send(1, at, HEARTBEAT)
        cv.send(0, 3.0, _frame(CLOSE, []))
        cv.send(1, 3.01, _frame(CLOSE, []))
        records += cv.c.records
    p = tmp_path / "many.pcap"
    p.write_bytes(write_pcap(sorted(records, key=lambda r: r[0])))
    rep = _json(capsys, p)
    assert len(rep["diagnoses"]["idle"]) == 12 > IDLE_SHOWN
    beyond = [x["connection"] for x in rep["diagnoses"]["idle"] if x["server"]["beyond_demand"]]
    assert beyond == ["10.0.0.1:41007-10.0.0.2:5672"]
    text = _run(capsys, "report", p)
    idle = text.split("  Idle time-out\n", 1)[1].split("\n  Redelivery", 1)[0].splitlines()
    assert [x for x in idle if x.startswith("    10.0.0.1")] == [
        "    10.0.0.1:41007-10.0.0.2:5672: idle-time-out asked by the client 1,000 ms, by the server none"]
    assert idle[-1] == "    … and 11 more connections whose silences all stayed within what was asked (--format json)"
