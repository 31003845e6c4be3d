"""Client and server when both ports are AMQP ports (issue 24, "roles from evidence").

A real proton conversation (``samples/outcomes.pcap``: a proton client against the broker on
5672, SASL then AMQP) is rewritten, as ``tcprewrite --portmap`` would, so that both of its ports
are AMQP ports (5671 <-> 5672, either way round, or two ``--port`` ports), then cut: with its
SYN, without it, and joined mid-stream at the server's protocol header, at the server's open,
and after both opens.  The oracle is the capture itself: the SYN of the uncut capture and the
sample's truth file name the client; the packets to cut at are found from the raw TCP payloads
(the server's ``AMQP`` header, the server's next segment), not from our decoder.

Evidence, in order: the SYN; the side that sent its protocol header first (a header answered by
other bytes is the server's); the side that sent the first open (an open answered by other
frames is the server's, the other's open being before the capture).  The initiator of the first
attach pair is not used: either peer may attach first (a broker attaches to a client's dynamic
node, a router to its peer), so it says who started a link, not who connected.  With none of
these the roles are unknown and said so.
"""

from __future__ import annotations

import json
import os
import struct

import pytest

from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report
from pcapbuild import PcapWriter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "outcomes.pcap")


def _records(path):
    with open(path, "rb") as f:
        return [(r.ts / 1_000_000_000, r.linktype, bytes(r.data)) for r in open_capture(f)]  # (seconds, for the writer)


def _tcp(data: bytes):
    """(offset of the TCP header, its length) in an Ethernet IPv4 frame."""
    assert data[12:14] == b"\x08\x00"
    ip = 14
    t = ip + (data[ip] & 15) * 4
    return t, (data[t + 12] >> 4) * 4


def _checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _portmap(data: bytes, ports: dict) -> bytes:
    """The frame with its TCP ports mapped (tcprewrite --portmap), TCP checksum recomputed."""
    d = bytearray(data)
    t, _ = _tcp(d)
    sp, dp = struct.unpack("!HH", d[t:t + 4])
    d[t:t + 4] = struct.pack("!HH", ports.get(sp, sp), ports.get(dp, dp))
    ip = 14
    total = struct.unpack("!H", d[ip + 2:ip + 4])[0]
    seg = bytearray(d[t:ip + total])
    seg[16:18] = b"\0\0"
    pseudo = bytes(d[ip + 12:ip + 20]) + struct.pack("!BBH", 0, 6, len(seg))
    d[t + 16:t + 18] = struct.pack("!H", _checksum(pseudo + bytes(seg)))
    return bytes(d)


def _ports(data: bytes):
    t, _ = _tcp(data)
    return struct.unpack("!HH", data[t:t + 4])


def _payload(data: bytes) -> bytes:
    t, hl = _tcp(data)
    ip = 14
    total = struct.unpack("!H", data[ip + 2:ip + 4])[0]
    return data[t + hl:ip + total]


def _flags(data: bytes) -> int:
    t, _ = _tcp(data)
    return data[t + 13]


@pytest.fixture(scope="module")
def original():
    recs = _records(SAMPLE)
    syn = next(d for _, _, d in recs if _flags(d) & 0x12 == 0x02)  # SYN without ACK: the client's
    client_port, server_port = _ports(syn)
    with open(os.path.join(ROOT, "samples", "outcomes.truth.json")) as f:
        assert json.load(f)["server"].endswith(f":{server_port}")  # the truth agrees with the SYN
    # where to cut: the server's AMQP protocol header (its second header: SASL's comes first), and
    # the server's next segment with data (its open)
    server_data = [i for i, (_, _, d) in enumerate(recs) if _ports(d)[0] == server_port and _payload(d)]
    headers = [i for i in server_data if _payload(recs[i][2]).startswith(b"AMQP\x00\x01\x00\x00")]
    assert len(headers) == 1
    at_header = headers[0]
    at_open = server_data[server_data.index(at_header) + 1]
    # after both opens: the server's segment after its open
    after_opens = server_data[server_data.index(at_open) + 1]
    first_data = next(i for i, (_, _, d) in enumerate(recs) if _payload(d))
    return {"records": recs, "client": client_port, "server": server_port,
            "cuts": {"syn": 0, "no-syn": first_data, "server-header": at_header, "server-open": at_open,
                     "after-opens": after_opens}}


def _write(path, original, new_client: int, new_server: int, start: int):
    ports = {original["client"]: new_client, original["server"]: new_server}
    recs = original["records"][start:]
    with open(path, "wb") as f:
        w = PcapWriter(f, recs[0][1])
        for ts, _lt, data in recs:
            w.write(ts, _portmap(data, ports))
    return str(path)


CASES = [  # (client port, server port, --port)
    (5671, 5672, []),
    (5672, 5671, []),  # the server on the lower port: no port rule can say it
    (20000, 6000, [6000, 20000]),  # both given with --port, neither ephemeral
]

EXPECT = {  # cut -> (evidence said in "inferred", roles known)
    "syn": (None, True),
    "no-syn": ("client and server from the protocol headers (no SYN captured, both ports are AMQP ports)", True),
    "server-header": ("client and server from the protocol headers (no SYN captured, both ports are AMQP ports)",
                      True),
    "server-open": ("client and server from the first open (no SYN captured, both ports are AMQP ports)", True),
    "after-opens": (None, False),
}


@pytest.mark.parametrize("client,server,extra", CASES)
@pytest.mark.parametrize("cut", list(EXPECT))
def test_roles_on_two_amqp_ports_come_from_evidence(tmp_path, original, client, server, extra, cut):
    start = original["cuts"][cut]
    path = _write(tmp_path / f"{cut}.pcap", original, client, server, start)
    first_sender = _ports(original["records"][start][2])[0]
    if cut in ("server-header", "server-open"):
        assert first_sender == original["server"]  # the first packet captured is the server's
    a = read_analysis(path, ports=extra)
    (row,) = a.analyzer.connection_rows()
    evidence, known = EXPECT[cut]
    inferred = [x for x in row["inferred"] if x.startswith("client and server")]
    if known:
        assert row["client"] == f"127.0.0.1:{client}" and row["server"] == f"127.0.0.1:{server}"
        assert row["connection"] == f"127.0.0.1:{client}-127.0.0.1:{server}"
        assert "client/server roles" not in row["unknown"]
        assert inferred == ([evidence] if evidence else [])
        assert row["syn_seen"] == (cut == "syn")
    else:  # nothing says: the first sender is kept as the client, and that is said
        assert "client/server roles" in row["unknown"]
        assert inferred == []
        assert row["client"].endswith(f":{ {original['client']: client, original['server']: server}[first_sender]}")
        text = render_text(build_report(a.analyzer))
        assert "not visible in the capture: client/server roles" in text


@pytest.mark.parametrize("cut", ["no-syn", "server-header", "server-open"])
def test_settled_roles_decode_as_the_whole_capture(tmp_path, original, cut):
    """Once the roles are settled, the deliveries and their outcomes are the uncut capture's."""
    whole = read_analysis(_write(tmp_path / "whole.pcap", original, 5672, 5671, 0))
    part = read_analysis(_write(tmp_path / f"{cut}.pcap", original, 5672, 5671, original["cuts"][cut]))
    keys = ("link", "delivery_id", "outcome", "settled_by", "sender")
    want = [tuple(r[k] for k in keys) for r in whole.analyzer.delivery_rows()]
    got = [tuple(r[k] for k in keys) for r in part.analyzer.delivery_rows()]
    assert got == want and len(want) == 20
    assert part.analyzer.violation_rows() == []


def test_the_evidence_is_a_note_in_frames(tmp_path, original, capsys):
    from amqp_dissect.cli.main import main

    path = _write(tmp_path / "open.pcap", original, 5672, 5671, original["cuts"]["server-open"])
    assert main(["frames", "-T", "jsonl", path]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    notes = [x for x in lines if "client and server from the first open" in json.dumps(x)]
    assert len(notes) == 1


def _bytewise(data: bytes) -> list:
    """The frame's TCP payload cut into one-byte segments (sequence numbers, lengths and
    checksums fixed): the same stream, a byte per packet."""
    t, hl = _tcp(data)
    payload = _payload(data)
    if len(payload) < 2:
        return [data]
    ip = 14
    seq = struct.unpack("!I", data[t + 4:t + 8])[0]
    out = []
    for k, b in enumerate(payload):
        d = bytearray(data[:t + hl]) + bytes([b])
        d[ip + 2:ip + 4] = struct.pack("!H", len(d) - ip)
        d[ip + 10:ip + 12] = b"\0\0"
        d[ip + 10:ip + 12] = struct.pack("!H", _checksum(bytes(d[ip:t])))
        d[t + 4:t + 8] = struct.pack("!I", (seq + k) & 0xFFFFFFFF)
        out.append(_portmap(bytes(d), {}))
    return out


def _write_bytewise(path, recs) -> None:
    """``recs`` as a pcap whose every TCP segment is cut into one-byte segments (``_bytewise``)."""
    with open(path, "wb") as f:
        w = PcapWriter(f, recs[0][1])
        for ts, _lt, data in recs:
            for d in _bytewise(data):
                w.write(ts, d)


@pytest.mark.parametrize("cut", ["no-syn", "server-header", "server-open", "after-opens"])
def test_the_same_roles_byte_by_byte(tmp_path, original, cut):
    """The bytes fed one per packet reach the same roles and the same evidence as whole segments
    (the decision waits for enough of both sides' first bytes, bounded) and decode the same."""
    whole = _write(tmp_path / "whole.pcap", original, 5672, 5671, original["cuts"][cut])
    recs = _records(whole)
    path = tmp_path / "bytewise.pcap"
    _write_bytewise(path, recs)
    a, b = read_analysis(whole), read_analysis(str(path))
    ra, rb = a.analyzer.connection_rows()[0], b.analyzer.connection_rows()[0]
    for k in ("connection", "client", "server", "unknown", "inferred"):
        assert ra[k] == rb[k], k
    keys = ("link", "delivery_id", "outcome", "settled_by", "sender")
    assert [tuple(r[k] for k in keys) for r in a.analyzer.delivery_rows()] == \
        [tuple(r[k] for k in keys) for r in b.analyzer.delivery_rows()]


def test_the_wait_for_the_other_side_is_bounded(tmp_path, original, monkeypatch):
    """Only the server's segments captured, a byte per packet: the connection is not held past
    the bound of segments (4096; 500 here, for a sample of 2,000 bytes), so memory stays bounded:
    its roles are then unknown, and it is decoded."""
    from amqp_dissect import dissect
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.events import StreamOpened

    monkeypatch.setattr(dissect, "_ROLE_HOLD_EVENTS", 500)

    whole = _write(tmp_path / "w.pcap", original, 5672, 5671, original["cuts"]["server-open"])
    recs = [r for r in _records(whole) if _ports(r[2])[0] == 5671]
    path = tmp_path / "server-only.pcap"
    _write_bytewise(path, recs)
    d = Dissector()
    with open(path, "rb") as f:
        records = list(open_capture(f))
    assert len(records) > 500 + 100
    at = None
    for i, r in enumerate(records):
        if any(type(ev) is StreamOpened for ev in d.feed(r)):
            at = i
            break
    assert at is not None and at <= 500 + 1
    a = read_analysis(str(path))
    (row,) = a.analyzer.connection_rows()
    assert "client/server roles" in row["unknown"]
    assert row["frames_client"] + row["frames_server"] > 0
