"""The message's filter and ``-e`` fields (``message-id``, ``properties.subject``,
``header.delivery-count``, ``application-properties.KEY`` ...) and their Wireshark names.

Oracles: tshark 4.0 on a capture of proton messages carrying every properties field, header fields
and ids of each type (ulong, uuid, binary, string), one transfer frame each: every Wireshark name
selects the packets tshark selects and prints tshark's values; the messages proton sent say what
our own names must select; the deliveries table's columns agree with the frames' fields.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import proton
import pytest
from proton import Message

from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main
from amqp_dissect.filter import ALIASES, FIELDS, lookup
from pcapbuild import TcpConversation
from protonpump import Pump

TSHARK = shutil.which("tshark")
MESSAGE_ALIASES = sorted(n for n in ALIASES if n.startswith("amqp.message."))
U = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _messages():
    return [
        Message(id="order-1", correlation_id=proton.ulong(77), subject="new order", address="orders",
                reply_to="replies", user_id=b"guest", content_type="application/json", content_encoding="gzip",
                group_id="g1", group_sequence=5, reply_to_group_id="rg", durable=True, priority=7, ttl=3.0,
                first_acquirer=True, delivery_count=2, creation_time=1700000000.5, expiry_time=1700000100.0,
                properties={"region": "eu", "key with spaces": 3, "n": 10}, annotations={proton.symbol("x-opt-t"): "a"},
                body="payload"),
        Message(id=proton.ulong(42), correlation_id=U, subject="second", body=b"raw", inferred=True),
        Message(id=U, correlation_id=b"\x01\x02", body=["a", "b"], inferred=True, properties={"region": "us"}),
        Message(id=b"\xca\xfe", correlation_id="order-1", subject="reply", body=None),
        Message(body="no properties"),
    ]


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    p = Pump(server_credit=20)
    snd = p.sender("orders")
    p.run()
    for m in _messages():
        p.send(snd, m)
        p.run()
    p.close()
    conv = TcpConversation.from_exchange(p.chunks, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.001)
    path = tmp_path_factory.mktemp("msg") / "messages.pcap"
    path.write_bytes(conv.pcap())
    return str(path)


def _ours(capsys, capture, *args):
    rc = main(["frames", capture, *args])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    return out


def _packets(capsys, capture, text):
    return [int(x) for x in _ours(capsys, capture, "-Y", text, "-T", "fields", "-e", "packet").split()]


def _transfers(capsys, capture):
    return _packets(capsys, capture, "performative == transfer")


def test_fields_select_what_proton_sent(capsys, capture):
    tr = _transfers(capsys, capture)
    assert len(tr) == 5
    cases = {
        'message-id == "order-1"': [0],
        "message-id == 42": [1],
        f'message-id == "{U}"': [2],
        "message-id-type == binary": [3],
        'correlation-id == "order-1"': [3],
        "correlation-id-type == ulong": [0],
        'properties.subject contains "order"': [0],
        'properties.to == "orders"': [0],
        "properties.group-sequence == 5": [0],
        "properties.user-id": [0],
        "header.delivery-count == 2": [0],
        "header.priority > 4": [0],
        "header.durable == true": [0],
        'application-properties.region == "eu"': [0],
        'application-properties.region': [0, 2],
        'application-properties."key with spaces" == 3': [0],
        "application-properties.n >= 10": [0],
        'message-annotations.x-opt-t == "a"': [0],
        "body-kind == data": [1],
        "body-kind == amqp-sequence": [2],
        "body-kind == none": [3],
        "not properties.subject and performative == transfer": [2, 4],
    }
    for text, which in cases.items():
        assert _packets(capsys, capture, text) == [tr[i] for i in which], text


def test_e_prints_the_message_fields(capsys, capture):
    out = _ours(capsys, capture, "-Y", "performative == transfer", "-T", "fields", "-e", "message-id", "-e",
                "message-id-type", "-e", "correlation-id", "-e", "properties.creation-time", "-e",
                "application-properties.region", "-e", "message-sections")
    lines = [line.split("\t") for line in out.splitlines()]
    assert lines[0] == ["order-1", "string", "77", "1700000000500", "eu",
                        "header,message-annotations,properties,application-properties,amqp-value"]
    assert lines[1][:3] == ["42", "ulong", str(U)]
    assert lines[3][:3] == ["cafe", "binary", "order-1"]
    assert lines[4][:2] == ["", ""]


def test_bad_names_are_errors(capsys, capture):
    rc = main(["frames", capture, "-Y", "application-properties. == 1"])
    capsys.readouterr()
    assert rc == EXIT_USAGE
    assert lookup("application_properties.a-b").name == "application-properties.a-b"
    assert lookup('message-annotations."x y"').name == "message-annotations.x y"


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize("name", MESSAGE_ALIASES)
def test_wireshark_names_agree_with_tshark(capsys, capture, name):
    """Every amqp.message.* alias, on messages of one frame each: the packets tshark selects and
    the values it prints."""
    def theirs(*args):
        return subprocess.run([TSHARK, "-r", capture, *args], capture_output=True, text=True, check=True).stdout

    want = [int(x) for x in theirs("-Y", f"amqp && ({name})", "-T", "fields", "-e", "frame.number").split()]
    assert want, f"{name}: the capture has no such field"  # (every alias has a value here)
    assert _packets(capsys, capture, name) == want, name
    their_vals = theirs("-Y", f"amqp && ({name})", "-T", "fields", "-e", name)
    mine = _ours(capsys, capture, "-Y", name, "-T", "fields", "-e", name)
    assert mine == their_vals, name


def test_columns_agree_with_the_frames_fields(capsys, capture, tmp_path):
    """The deliveries table and the frames' fields say the same of each message."""
    out = tmp_path / "d.jsonl"
    rc = main(["deliveries", capture, "--messages", "-T", "jsonl", "-o", str(out)])
    capsys.readouterr()
    assert rc == EXIT_OK
    rows = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["delivery_id"])
    fields = ["message-id", "message-id-type", "correlation-id", "correlation-id-type", "properties.subject",
              "properties.to", "header.priority", "body-kind"]
    args = ["-Y", "performative == transfer", "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    lines = [line.split("\t") for line in _ours(capsys, capture, *args).splitlines()]
    for r, line in zip(rows, lines):
        frame = dict(zip(fields, line))
        assert frame["message-id"] == (r["message_id"] or "")
        assert frame["message-id-type"] == (r["message_id_type"] or "")
        assert frame["correlation-id"] == (r["correlation_id"] or "")
        assert frame["properties.subject"] == (r["subject"] or "")
        assert frame["properties.to"] == (r["to"] or "")
        assert frame["body-kind"] == r["body_kind"]
        if frame["header.priority"]:  # (present in the header; the column applies the default otherwise)
            assert int(frame["header.priority"]) == r["priority"]
    # jsonl's decoded message says the same
    rc = main(["frames", capture, "-T", "jsonl"])
    objs = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    msgs = [o["message"] for o in objs if "message" in o]
    assert [m.get("properties", {}).get("message-id") for m in msgs][:1] == [rows[0]["message_id"]]
    assert [list(m) for m in msgs] == [r["message_sections"] for r in rows]


def test_G_fields_lists_the_message_fields(capsys):
    rc = main(["frames", "-G", "fields"])
    out = capsys.readouterr()[0]
    assert rc == EXIT_OK
    rows = {line.split("\t")[1]: line.split("\t") for line in out.splitlines()}
    assert "amqp.message.subject" in rows["properties.subject"][4]
    assert "amqp.message.messageId.string" in rows["message-id"][4]
    for n in ("header.delivery-count", "application-properties", "message-annotations", "body-kind"):
        assert n in rows and n in FIELDS
