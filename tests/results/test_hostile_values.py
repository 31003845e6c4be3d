"""Values no broker sends (issue 8): times outside what a datetime holds, termini whose address
is not a string.  Shown as they are (raw, said so), never an internal error.

The captures are built here: AMQP frames encoded by python-qpid-proton's codec, TCP/IP and the
capture file by dpkt (tests/support/pcapbuild.py).  The oracle is what was encoded: the raw values the
output must show.
"""

from __future__ import annotations

import json
import struct

import pytest
from proton import Data, uint

from amqp_dissect.cli.main import EXIT_OK, main
from pcapbuild import TcpConversation, write_pcapng

TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "errors", "violations", "transactions")


def _perf(code: int, fields: list, tail: bytes = b"") -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    for f in fields:
        if f is None:
            d.put_null()
        else:
            d.put_object(f)
    d.exit()
    d.exit()
    body = d.encode() + tail
    return struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body


def _message_with_timestamp(ms: int) -> bytes:
    """A properties section whose absolute-expiry-time is ``ms``, and an amqp-value."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x73)
    d.put_list()
    d.enter()
    for _ in range(8):  # message-id ... content-encoding
        d.put_null()
    d.put_timestamp(ms)  # absolute-expiry-time
    d.exit()
    d.exit()
    d.put_described()
    d.enter()
    d.put_ulong(0x77)
    d.put_string("x")
    d.exit()
    return d.encode()


def _attach(name: str, termini) -> bytes:
    """An attach (sender) named ``name`` whose source and target are ``termini``: (descriptor code,
    field values) pairs, the values any proton encodes."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x12)
    d.put_list()
    d.enter()
    d.put_string(name)
    d.put_uint(0)
    d.put_bool(False)
    d.put_null()
    d.put_null()
    for code, fields in termini:
        d.put_described()
        d.enter()
        d.put_ulong(code)
        d.put_list()
        d.enter()
        for f in fields:
            d.put_object(f)
        d.exit()
        d.exit()
    d.exit()
    d.exit()
    body = d.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body


def _conversation(t0: float, tail: bytes = b"", attach: bytes | None = None) -> TcpConversation:
    c = TcpConversation(t0=t0, dt=0.25)  # (quarter seconds: exact in a float and in microseconds)
    c.handshake()
    c.send(0, b"AMQP\x00\x01\x00\x00")
    c.send(1, b"AMQP\x00\x01\x00\x00")
    c.send(0, _perf(0x10, ["client"]))
    c.send(1, _perf(0x10, ["server"]))
    c.send(0, _perf(0x11, [None, uint(0), uint(100), uint(100)]))
    c.send(1, _perf(0x11, [0, uint(0), uint(100), uint(100)]))
    c.send(0, attach or _perf(0x12, ["link", uint(0), False, None, None, None, None]))
    c.send(0, _perf(0x14, [uint(0), uint(0), b"t", uint(0), False, False], tail))
    c.close()
    return c


def _run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("ms", [2**62, -(2**62), 2**63 - 1])
def test_an_amqp_timestamp_beyond_the_years_a_datetime_holds_is_shown_raw(tmp_path, capsys, ms):
    cap = tmp_path / "ts.pcapng"
    c = _conversation(1_700_000_000.0, _message_with_timestamp(ms))
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    rc, out, err = _run(capsys, "frames", "-V", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    line = next(x for x in out.splitlines() if "absolute-expiry-time" in x)
    assert line.split(": ", 1)[1] == f"{ms} (beyond the years 1-9999 a datetime holds)"
    for args in (("frames",), ("frames", "--format", "jsonl"), ("report",), ("deliveries",)):
        rc, out, err = _run(capsys, *args, str(cap))
        assert (rc, err) == (EXIT_OK, ""), args


def test_capture_times_beyond_the_year_9999_are_shown_raw(tmp_path, capsys):
    t0 = 1.8e12  # year 59009: a pcapng timestamp can say so, a datetime cannot
    c = _conversation(t0)
    cap = tmp_path / "far.pcapng"
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    opened = c.records[5][0]  # the client's open: after the handshake and both protocol headers
    rc, out, err = _run(capsys, "report", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    line = next(x for x in out.splitlines() if x.strip().startswith("opened "))
    # (record 5 is packet 6, the client's open; the server's answers it in the next record)
    assert line.strip().startswith(f"opened {opened:.6f} (epoch s, beyond the years a datetime holds) "
                                   f"[open packet 6, answered at packet 7], ")
    for table in TABLES:
        for fmt in ("table", "csv", "jsonl"):
            rc, out, err = _run(capsys, table, "--format", fmt, str(cap))
            assert (rc, err) == (EXIT_OK, ""), (table, fmt)
    rc, out, err = _run(capsys, "connections", str(cap))
    assert f"{opened:.6f} (epoch s, beyond the years a datetime holds)" in out


@pytest.mark.parametrize("address, text", [([1, 2], "[1, 2]"), ({"a": 1}, '{"a": 1}'), (7, "7")])
def test_a_terminus_address_that_is_not_a_string_is_shown_as_text(tmp_path, capsys, address, text):
    cap = tmp_path / "addr.pcapng"
    c = _conversation(1_700_000_000.0, attach=_attach("link", [(0x28, [address]), (0x29, [address])]))
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    rc, out, err = _run(capsys, "report", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert f"  address {text}" in out
    rc, out, err = _run(capsys, "links", "--format", "jsonl", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert json.loads(out.splitlines()[0])["address"] == text


def test_a_coordinator_transfer_without_a_payload_is_a_violation_not_an_internal_error(tmp_path, capsys):
    cap = tmp_path / "coord.pcapng"
    # source, and a coordinator as the target; the transfer carries no payload
    c = _conversation(1_700_000_000.0, attach=_attach("txn", [(0x28, []), (0x30, [])]))
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    rc, out, err = _run(capsys, "violations", "--format", "jsonl", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    rows = [json.loads(x) for x in out.splitlines()]
    assert any(r["message"] == "message on coordinator link 'txn' is neither declare nor discharge" for r in rows)
    assert not any(r["kind"] == "internal-error" for r in rows)
    rc, out, err = _run(capsys, "report", str(cap))
    assert (rc, err) == (EXIT_OK, "")


def test_a_capture_joined_after_an_earlier_link_on_the_same_handle_starts_a_new_link(tmp_path, capsys):
    """samples/large_message.pcap from packet 20: the sender link's transfers arrive without its
    attach (a placeholder link on handle 0, the client sending), then the receiver link attaches on
    handle 0 too.  The attach must not adopt the placeholder (its frames went the other way)."""
    import os
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    truth = json.load(open(os.path.join(root, "samples", "large_message.truth.json")))
    cut = tmp_path / "cut.pcap"
    subprocess.run(["editcap", "-r", os.path.join(root, "samples", "large_message.pcap"), str(cut), "20-9999"],
                   check=True, capture_output=True)
    rc, out, err = _run(capsys, "violations", "--format", "jsonl", str(cut))
    assert (rc, err) == (EXIT_OK, "")
    assert [json.loads(x)["message"] for x in out.splitlines()] == []
    rc, out, err = _run(capsys, "links", "--format", "jsonl", str(cut))
    links = {r["name"]: r for r in map(json.loads, out.splitlines())}
    receiver = next(lk for lk in truth["links"] if lk["name"] == "large-receiver")
    got = links["large-receiver"]
    assert got["sender"] == truth["server"]  # the broker sends on the receiver link
    assert got["deliveries"] == receiver["deliveries_received"]
    assert got["accepted"] == receiver["outcomes"]["accepted"]
