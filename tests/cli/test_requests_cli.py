"""``amqp-dissect requests`` on real proton traffic: a request/reply service, an unanswered
request, and a $cbs put-token answered with a status, as one capture.

Oracles: python-qpid-proton encodes the messages and runs both engines (tests/support/protonpump.py);
dpkt finds, in the pcap's own records, the packet that carries each encoded message and its
capture time (request_packet, reply_packet and round_trip are checked against those); the ids,
addresses and properties are the ones the test's client set.  The token the client sent must
never appear in any output.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import dpkt
import pyarrow.parquet as pq
import pytest
from proton import Message, timestamp, ulong

from amqp_dissect.cli.main import main
from amqp_dissect.results import schema
from pcapbuild import TcpConversation, write_pcap
from protonpump import Pump

TOKEN = "SharedAccessSignature sr=secret-audience&sig=NEVER-PRINT-THIS-TOKEN&se=1700000600"
AUDIENCE = "amqp://broker.example/q1"
EXPIRY_MS = 1_700_000_600_000


def _server_reply(p: Pump, address: str, msg: Message) -> bytes:
    body = msg.encode()
    p.server_send(address, [body])
    return body


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    p = Pump(server_credit=20)
    svc = p.sender("svc", name="requests")
    rep = p.receiver("replies", name="replies", credit=10)
    cbs = p.sender("$cbs", name="cbs-requests")
    cbs_rep = p.session.receiver("cbs-replies")
    cbs_rep.source.address = "$cbs"
    cbs_rep.target.address = "cbs-reply-to"
    cbs_rep.open()
    cbs_rep.flow(10)
    p.run()
    sent = {}
    m1 = Message(id="m-1", reply_to="replies", body="what time is it")
    sent["m-1"] = m1.encode()
    p.send(svc, m1)
    p.run()
    reply1 = Message(correlation_id="m-1", body="noon")
    sent["reply m-1"] = _server_reply(p, "replies", reply1)
    m2 = Message(id=ulong(2), reply_to="replies", body="never answered")
    sent["m-2"] = m2.encode()
    p.send(svc, m2)
    p.run()
    put = Message(id=ulong(1), reply_to="cbs-reply-to", body=TOKEN,
                  properties={"operation": "put-token", "type": "servicebus.windows.net:sastoken",
                              "name": AUDIENCE, "expiration": timestamp(EXPIRY_MS)})
    sent["put-token"] = put.encode()
    p.send(cbs, put)
    p.run()
    status = Message(correlation_id=ulong(1), properties={"status-code": 401, "status-description": "bad signature"})
    sent["put-token reply"] = _server_reply(p, "$cbs", status)
    p.close()
    conv = TcpConversation.from_exchange(p.chunks, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.00125, acks=False)
    path = tmp_path_factory.mktemp("requests") / "requests.pcap"
    path.write_bytes(conv.pcap())
    # dpkt: the packet number (1-based) and time (ns) of the packet carrying each encoded message
    where = {}
    with open(path, "rb") as f:
        for n, (ts, buf) in enumerate(dpkt.pcap.Reader(f), 1):
            payload = bytes(dpkt.ethernet.Ethernet(buf).data.data.data)
            for k, body in sent.items():
                if body in payload and k not in where:
                    where[k] = (n, round(ts * 1_000_000) * 1000)
    assert set(where) == set(sent)
    return path, where


def _cli(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_requests_jsonl_against_the_packets(capture, capsys):
    path, where = capture
    rc, out, err = _cli(capsys, "requests", path, "-T", "jsonl")
    assert rc == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert [list(r) for r in rows] == [schema.names("requests")] * 3
    by_id = {r["request_id"]: r for r in rows}
    assert set(by_id) == {"m-1", "2", "1"}
    m1, m2, put = by_id["m-1"], by_id["2"], by_id["1"]
    # m-1: answered on the reply-to, matched by its message-id, times of the packets dpkt found
    assert (m1["status"], m1["matched_by"], m1["request_id_type"], m1["correlation_id"]) == (
        "answered", "message-id", "string", "m-1")
    assert m1["request_packet"] == where["m-1"][0] and m1["reply_packet"] == where["reply m-1"][0]
    assert m1["round_trip"] == (where["reply m-1"][1] - where["m-1"][1]) / 1e9 > 0
    assert (m1["request_address"], m1["reply_to"], m1["reply_address"]) == ("svc", "replies", "replies")
    # m-2 (a ulong id): no reply
    assert (m2["status"], m2["request_id_type"], m2["reply_time"], m2["round_trip"]) == (
        "no reply in the capture", "ulong", None, None)
    assert m2["request_packet"] == where["m-2"][0]
    # the put-token: named, refused by its status, the token never written
    assert (put["service"], put["operation"], put["token_type"], put["token_audience"]) == (
        "$cbs", "put-token", "servicebus.windows.net:sastoken", AUDIENCE)
    # EXPIRY_MS: an AMQP timestamp, milliseconds since the epoch
    expiry = datetime.fromisoformat(put["token_expiry_time"].replace("Z", "+00:00"))
    assert expiry == datetime.fromtimestamp(EXPIRY_MS / 1000, timezone.utc)
    assert (put["status_code"], put["status_description"], put["token_refused"]) == (401, "bad signature", True)
    assert put["token_size"] > len(TOKEN) and "refused: status 401 bad signature" in put["token_note"]
    assert put["reply_packet"] == where["put-token reply"][0]


def test_the_token_is_in_no_output(capture, capsys, tmp_path):
    path, _ = capture
    with open(path, "rb") as f:
        assert TOKEN.encode() in f.read()  # (it is in the capture)
    outs = []
    for args in (["requests", path], ["requests", path, "--columns", "all"], ["requests", path, "-T", "csv"],
                 ["requests", path, "-T", "jsonl"], ["report", path, "--messages"], ["report", path, "--messages", "-T", "json"]):
        rc, out, err = _cli(capsys, *args)
        assert rc == 0, (args, err)
        outs.append(out)
    html = tmp_path / "r.html"
    assert _cli(capsys, "report", path, "--messages", "-T", "html", "-o", html)[0] == 0
    outs.append(html.read_text())
    pq_path = tmp_path / "r.parquet"
    assert _cli(capsys, "requests", path, "-T", "parquet", "-o", pq_path)[0] == 0
    outs.append(json.dumps(pq.read_table(pq_path).to_pylist(), default=str))
    for text in outs:
        assert "NEVER-PRINT-THIS-TOKEN" not in text


def test_text_table_columns_and_parquet_types(capture, capsys, tmp_path):
    path, _ = capture
    rc, out, _ = _cli(capsys, "requests", path)
    assert rc == 0
    head = out.splitlines()[0].split()
    assert head[:4] == ["request_time", "request_address", "request_id", "status"]
    assert "no reply in the capture" in out
    rc, out, _ = _cli(capsys, "requests", path, "--columns", "request_id,round_trip", "-T", "csv")
    assert out.splitlines()[0] == "request_id,round_trip"
    dest = tmp_path / "r.parquet"
    assert _cli(capsys, "requests", path, "-T", "parquet", "-o", dest)[0] == 0
    from amqp_dissect.results.tables import arrow_schema

    got = pq.read_schema(dest)
    assert got.names == schema.names("requests")
    assert [f.type for f in got] == [f.type for f in arrow_schema("requests")]
    df = pq.read_table(dest).to_pandas()
    assert len(df) == 3


def test_report_requests_section(capture, capsys):
    path, where = capture
    rc, out, err = _cli(capsys, "report", path, "--messages")
    assert rc == 0, err
    sec = out.split("\nRequests (", 1)[1]
    # (the put-token's reply, a 401, is an answer: the refusal is the token's line)
    assert sec.startswith("3: 2 answered, 1 with no reply in the capture)")
    assert f"no reply in the capture: 2 (ulong) to svc" in sec and f"[packet {where['m-2'][0]}]" in sec
    assert f"token: put-token for {AUDIENCE} (servicebus.windows.net:sastoken" in sec
    rc, out, _ = _cli(capsys, "report", path, "--messages", "-T", "json")
    rep = json.loads(out)["requests"]
    assert (rep["requests"], rep["answered"], rep["no_reply"]) == (3, 2, 1)
    assert [u["request_packet"] for u in rep["unanswered"]] == [where["m-2"][0]]
    assert [t["kind"] for t in rep["tokens"]] == ["refused"]


def test_analyze_api_is_the_clis_parquet(capture, capsys, tmp_path):
    import pandas as pd

    import amqp_dissect

    dest = tmp_path / "r.parquet"
    assert _cli(capsys, "requests", capture[0], "-T", "parquet", "-o", dest)[0] == 0
    t = amqp_dissect.analyze(str(capture[0]), tables=["requests", "deliveries"])
    df = t.requests
    pd.testing.assert_frame_equal(df, pd.read_parquet(dest))
    assert sorted(df["request_id"].tolist()) == ["1", "2", "m-1"]
    assert t.deliveries["reply_to"].notna().sum() == 3
    batches = list(amqp_dissect.iter_batches(str(capture[0]), "requests"))
    assert sum(len(b) for b in batches) == 3


# --------------------------------------------------------------------------- through a broker, two connections


@pytest.fixture(scope="module")
def brokered(tmp_path_factory):
    """A requester's connection and a responder's, as a broker sees them: the request published by
    the requester, delivered to the responder; the reply published by the responder, delivered
    to the requester.  Both connections' packets in one capture, in time order."""
    req = Pump(server_credit=20)
    svc = req.sender("svc", name="requests")
    req.receiver("replies", name="replies", credit=10)
    req.run()
    ask = Message(id="job-1", correlation_id="conv-9", reply_to="replies", body="please")
    req.send(svc, ask)
    req.run()
    a1 = len(req.chunks)
    res = Pump(server_credit=20)
    res.receiver("svc", name="work", credit=10)
    out = res.sender("replies", name="answers")
    res.run()
    res.server_send("svc", [ask.encode()])           # the broker passes the request on
    res.send(out, Message(correlation_id="conv-9", body="done"))  # the service copies the correlation-id
    res.run()
    res.close()
    req.server_send("replies", [Message(correlation_id="conv-9", body="done").encode()])
    req.close()
    a = TcpConversation(client=("10.0.0.1", 40000), server=("10.0.0.9", 5672), t0=1_700_000_000.0, dt=0.001)
    a.handshake()
    for d, data in req.chunks[:a1]:
        a.send(d, data)
    b = TcpConversation(client=("10.0.0.2", 40001), server=("10.0.0.9", 5672), t0=a.t + 0.0005, dt=0.001)
    b.handshake()
    for d, data in res.chunks:
        b.send(d, data)
    b.close()
    a.t = b.t + 0.0005
    for d, data in req.chunks[a1:]:
        a.send(d, data)
    a.close()
    path = tmp_path_factory.mktemp("brokered") / "brokered.pcap"
    path.write_bytes(write_pcap(sorted(a.records + b.records, key=lambda r: r[0])))
    return path, ask.encode()


def test_a_request_through_a_broker(brokered, capsys):
    path, ask = brokered
    rc, out, err = _cli(capsys, "requests", path, "-T", "jsonl")
    assert rc == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert len(rows) == 1  # (the request seen twice, the reply twice: one row)
    r = rows[0]
    assert (r["request_id"], r["status"], r["matched_by"], r["correlation_id"]) == (
        "job-1", "answered", "correlation-id", "conv-9")
    assert r["request_connection"] == "10.0.0.1:40000-10.0.0.9:5672"
    assert r["responder_connection"] == "10.0.0.2:40001-10.0.0.9:5672"
    assert r["reply_connection"] == r["request_connection"] and r["replies"] == 1
    # dpkt: the request's first packet on the requester's connection, the reply's on the same
    # connection after the responder's (its sport 40000 and the server's)
    times = {}
    with open(path, "rb") as f:
        for n, (ts, buf) in enumerate(dpkt.pcap.Reader(f), 1):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if bytes(tcp.data) and ask in bytes(tcp.data) and tcp.sport == 40000:
                times["request"] = (n, round(ts * 1e6) * 1000)
            if b"done" in bytes(tcp.data) and tcp.sport == 5672 and tcp.dport == 40000:
                times["reply"] = (n, round(ts * 1e6) * 1000)
    assert r["request_packet"] == times["request"][0] and r["reply_packet"] == times["reply"][0]
    assert r["round_trip"] == (times["reply"][1] - times["request"][1]) / 1e9


def test_report_with_jobs_has_the_same_requests(brokered, capture, capsys):
    for path in (brokered[0], capture[0]):
        rc, one, _ = _cli(capsys, "report", path, "-T", "json", "--messages")
        rc2, two, _ = _cli(capsys, "report", path, "-T", "json", "-j", "2", "--messages")
        assert rc == rc2 == 0
        assert json.loads(one)["requests"] == json.loads(two)["requests"]
        assert json.loads(one)["requests"]["requests"] >= 1


def test_the_report_reads_no_message_unless_asked(capture, capsys):
    path, _ = capture
    rc, out, _ = _cli(capsys, "report", path, "-T", "json")
    assert rc == 0 and "requests" not in json.loads(out)
    rc, out, _ = _cli(capsys, "report", path)
    assert rc == 0 and "\nRequests (" not in out
