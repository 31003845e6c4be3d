"""The deliveries table's message columns through the whole pipeline.

Oracles: python-qpid-proton (engines wired back to back send the messages, split over many transfer
frames and TCP segments; proton's decoder gives every column, tests/amqp/test_message_fields.py's
``expected``), the samples' ground truth (the clients' own records of the message ids they sent
and received, and RabbitMQ's redeliveries), and a capture with a segment removed (the loss).
"""

from __future__ import annotations

import glob
import json
import os
import sys

import proton
import pytest
from proton import Message

from amqp_dissect.amqp.message import MESSAGE_COLUMNS
from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream
from pcapbuild import ACK, PSH, TcpConversation
from protonpump import Pump

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "amqp"))
from test_message_fields import expected  # noqa: E402  (proton's decoding of each column)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _messages():
    return [
        Message(id=proton.ulong(7), correlation_id="c-1", subject="first", address="q", reply_to="replies",
                durable=True, priority=9, ttl=2.5, properties={"k": 1, "s": "v"},
                annotations={proton.symbol("x-opt-a"): "b"},
                body="short"),
        Message(id="big", user_id=b"guest", content_type="application/octet-stream", body=b"B" * 5000, inferred=True,
                properties={"n": "x" * 200, "m": "y" * 200, "o": "z" * 200}),
        Message(body=list(range(200)), inferred=True, group_id="g", group_sequence=3, first_acquirer=True,
                delivery_count=2),
    ]


def _capture(tmp_path, *, mss=1460, drop=None, name="msg.pcap"):
    """The messages sent by a proton client over frames of at most 512 bytes, as a pcap; ``drop``:
    (chunk index, segment index) of a client segment left out of the capture (the server's ACK
    shows it lost)."""
    p = Pump(server_credit=20, server_max_frame=512)
    snd = p.sender("q")
    p.run()
    for m in _messages():
        p.send(snd, m)
        p.run()
    p.close()
    conv = TcpConversation.from_exchange([], close=False, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.0001, acks=True, mss=mss)
    big = [i for i, (d, data) in enumerate(p.chunks) if d == 0 and len(data) > 2 * mss]
    for i, (d, data) in enumerate(p.chunks):
        for k, j in enumerate(range(0, len(data), mss)):
            conv.packet(d, PSH | ACK, data[j:j + mss])
            if drop is not None and big and i == big[drop[0]] and k == drop[1]:
                conv.records.pop()  # (its sequence numbers still advance: a gap)
            conv.packet(1 - d, ACK)
    conv.close()
    path = tmp_path / name
    path.write_bytes(conv.pcap())
    return path


def _rows(path, batches=False):
    stream = DeliveryStream(CaptureSource(str(path)), messages=True)
    if batches:
        import pyarrow as pa

        t = pa.Table.from_batches(list(stream.batches(2)))
        return t.to_pylist()
    return list(stream)


@pytest.mark.parametrize("mss", [1460, 7, 1])
def test_columns_agree_with_proton_over_many_frames(tmp_path, mss):
    """Each delivery's message columns are proton's values (several frames each, TCP segments of
    ``mss`` bytes: the stream fed one byte at a time with mss=1)."""
    path = _capture(tmp_path, mss=mss)
    rows = sorted(_rows(path), key=lambda r: r["delivery_id"])
    assert len(rows) == 3
    assert [r["frames"] > 1 for r in rows] == [False, True, True]
    for r, m in zip(rows, _messages()):
        want = expected(m.encode())
        assert {c: r[c] for c in MESSAGE_COLUMNS} == want


def test_batches_say_what_rows_say(tmp_path):
    """The Arrow path (deliveries -T parquet) holds the same cells, JSON columns as JSON text."""
    path = _capture(tmp_path)
    rows = sorted(_rows(path), key=lambda r: r["delivery_id"])
    cols = sorted(_rows(path, batches=True), key=lambda r: r["delivery_id"])
    from amqp_dissect.results.schema import columns

    types = {c.name: c.type for c in columns("deliveries")}
    for r, b in zip(rows, cols):
        for c in MESSAGE_COLUMNS:
            if types[c] == "json":
                assert (json.loads(b[c]) if b[c] is not None else None) == r[c], c
            elif types[c].startswith("timestamp"):
                assert (None if b[c] is None else b[c].value) == r[c], c
            else:
                assert b[c] == r[c], c


def test_not_asked_not_read(tmp_path):
    """Without the switch every message cell is null and the frames keep no payload."""
    path = _capture(tmp_path)
    src = CaptureSource(str(path))
    rows = list(DeliveryStream(src))
    assert rows and all(r[c] is None for r in rows for c in MESSAGE_COLUMNS)
    assert not src.dissector.payloads


def test_a_gap_inside_a_delivery_says_lost_and_keeps_what_was_read(tmp_path):
    path = _capture(tmp_path, drop=(0, 1))
    rows = sorted(_rows(path), key=lambda r: r["delivery_id"])
    lost = [r for r in rows if r["message_read"] == "lost"]
    assert len(lost) == 1
    r = lost[0]
    assert r["message_id"] == "big" and r["message_id_type"] == "string" and r["user_id"] == b"guest".hex()
    assert r["bare_digest"] is None
    for other in rows:
        if other is not r:
            assert other["message_read"] == "read"


# --------------------------------------------------------------------------- the samples

def _sample_truth():
    for tpath in sorted(glob.glob(os.path.join(ROOT, "samples", "*.truth.json"))):
        t = json.load(open(tpath))
        if any(link.get("deliveries") for link in t["links"]):
            yield os.path.basename(tpath).split(".")[0], t


@pytest.mark.parametrize("name,truth", list(_sample_truth()), ids=lambda x: x if isinstance(x, str) else "")
def test_samples_message_ids_and_digests(name, truth):
    """Every delivery the clients recorded, in order per link: its message-id (a string), read
    whole; a redelivery RabbitMQ made says first-acquirer false; a message has one digest on the
    producer's and on each consumer's connection (RabbitMQ keeps the bare message)."""
    rows = _rows(os.path.join(ROOT, "samples", truth["capture"]))
    by_link: dict = {}
    for r in sorted(rows, key=lambda r: r["first_packet"]):
        by_link.setdefault(r["link"], []).append(r)
    for link in truth["links"]:
        want = link.get("deliveries") or []
        if not want:
            continue
        got = by_link.get(link["name"], [])
        assert [r["message_id"] for r in got] == [d["message_id"] for d in want], link["name"]
        for r, d in zip(got, want):
            assert r["message_id_type"] == "string"
            assert r["message_read"] == "read", r
            assert r["message_size"] == d["encoded_size"]
            assert r["body_size"] - d["body_size"] in (5, 8)  # the body section's descriptor and size field
            if d.get("redelivered"):
                assert r["first_acquirer"] is False
    digests: dict = {}
    for r in rows:
        if r["message_id"] is not None:
            digests.setdefault(r["message_id"], set()).add(r["bare_digest"])
    assert digests and all(len(v) == 1 and None not in v for v in digests.values())


def test_parallel_gives_the_same_message_columns(tmp_path, capsys):
    """deliveries -j 2 reads the messages as one process does (the workers' dissectors keep the
    payloads too)."""
    from amqp_dissect.cli.main import EXIT_OK, main

    path = _capture(tmp_path)
    outs = []
    for j in ("1", "2"):
        out = tmp_path / f"j{j}.jsonl"
        rc = main(["deliveries", str(path), "--messages", "-T", "jsonl", "-j", j, "-o", str(out)])
        capsys.readouterr()
        assert rc == EXIT_OK
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert [json.loads(line)["message_read"] for line in outs[0].splitlines()] == ["read"] * 3


def test_the_deliveries_command_reads_only_when_a_message_column_is_asked():
    from amqp_dissect.cli.main import EXIT_USAGE
    from amqp_dissect.cli.options import TableFormat
    from amqp_dissect.cli.tables import Fail, TableWriter

    assert not TableWriter("deliveries", TableFormat.csv, None, None).messages  # (every column: not asked)
    assert TableWriter("deliveries", TableFormat.csv, None, None, messages=True).messages
    assert TableWriter("deliveries", TableFormat.table, None, None, messages=True).messages
    assert TableWriter("deliveries", TableFormat.csv, None, "delivery_id,subject").messages
    assert not TableWriter("deliveries", TableFormat.csv, None, "delivery_id,outcome").messages
    assert not TableWriter("deliveries", TableFormat.table, None, None).messages  # (the text table's defaults)
    assert not TableWriter("links", TableFormat.csv, None, None).messages


def test_messages_is_refused_on_a_table_without_message_columns():
    import pytest as _pytest

    from amqp_dissect.cli.common import EXIT_USAGE, Fail
    from amqp_dissect.cli.options import TableFormat
    from amqp_dissect.cli.tables import TableWriter

    with _pytest.raises(Fail) as e:
        TableWriter("links", TableFormat.csv, None, None, messages=True)
    assert e.value.code == EXIT_USAGE


def test_every_column_without_messages_leaves_the_message_cells_null(tmp_path):
    """Not asked, the message columns are there (one schema) and null, message_read too; asked,
    the same rows carry them (the other columns unchanged)."""
    import json

    from amqp_dissect.cli.main import EXIT_OK, main

    cap = os.path.join(ROOT, "samples", "messages", "topic_fanout.pcap")
    rows = {}
    for flag in ((), ("--messages",)):
        out = tmp_path / f"d{len(flag)}.jsonl"
        assert main(["deliveries", cap, *flag, "-T", "jsonl", "-o", str(out)]) == EXIT_OK
        rows[flag] = [json.loads(x) for x in out.read_text().splitlines()]
    plain, read = rows[()], rows[("--messages",)]
    with open(os.path.join(ROOT, "samples", "messages", "topic_fanout.truth.json")) as f:
        totals = json.load(f)["totals"]
    assert len(plain) == len(read) == totals["messages_sent"] + totals["deliveries_received"]
    assert all(r["message_read"] is None and r["message_id"] is None for r in plain)
    assert all(r["message_read"] == "read" for r in read)
    msg = set(MESSAGE_COLUMNS)
    assert [{k: v for k, v in r.items() if k not in msg} for r in plain] == \
        [{k: v for k, v in r.items() if k not in msg} for r in read]
