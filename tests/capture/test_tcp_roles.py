"""Client and server from evidence, never from which packet was captured first (issue 24 item 6).

The captures in tests/data are real TCP traffic: a sample's streams replayed through real
sockets on the loopback, the server listening on port 6000, recorded by tcpdump
(``python tests/support/tcpreplay.py samples/outcomes.pcap tests/data/outcomes_port6000.pcap --port
6000``; ``python tests/support/tcpreplay.py samples/multi_session.pcap
tests/data/multi_session_port6000_client20000.pcap --port 6000 --client-port 20000``), and cut
with ``editcap -F pcap -r FULL.pcap FULL_midstream.pcap 5-N`` (N: the last packet) so the capture
joins after the client's protocol header: its first packets are the server's ACK and the
server's protocol header, so the first sender captured is the server.

The oracles: the replay's own ground truth (the server listened on 6000; the client's port is the
one its SYN came from in the full capture), and the full capture read with ``--port 6000``
(handshake seen: roles from the SYN), whose deliveries and outcomes the cut one must repeat.

How a connection on a port that is not 5672/5671 is found to be AMQP without ``--port``: a
direction's stream starts with an ``AMQP`` protocol header (dissect.py's probe; or TLS with a
key log, or a WebSocket upgrade).  A capture that joins after both protocol headers on such a
port is not decoded without ``--port`` (nothing marks it as AMQP).
"""

from __future__ import annotations

import json
import os

import dpkt
import pytest

from amqp_dissect.capture.tcp import TcpReassembler, role_evidence
from amqp_dissect.events import ACK, PSH, Segment, StreamData, StreamOpened
from amqp_dissect.pipelines.runs.local import read_analysis

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _path(name):
    return os.path.join(DATA, name + ".pcap")


def _syn_client(name):
    """The client endpoint of the full capture, from its SYN (read with dpkt)."""
    with open(_path(name), "rb") as f:
        r = dpkt.pcap.Reader(f)
        assert r.datalink() == dpkt.pcap.DLT_EN10MB  # (tcpdump -i lo)
        for _, buf in r:
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK:
                return f"127.0.0.1:{tcp.sport}"
    raise AssertionError("no SYN")


def _unknown(c):
    """The connection's ``unknown`` list (JSON text in the table, or a list)."""
    v = c["unknown"].iloc[0]
    return json.loads(v) if isinstance(v, str) else list(v)


def _rows(a):
    d = a.deliveries
    return sorted((r.sender_side, r.link, r.channel, r.delivery_id, r.outcome or "") for r in d.itertuples())


@pytest.mark.parametrize("name,evidence", [
    ("outcomes_port6000", "ephemeral port"),  # the client's port is the kernel's pick (>= 32768)
    ("multi_session_port6000_client20000", "protocol header"),  # 20000 and 6000: the ports say nothing
])
def test_midstream_on_another_port_gets_the_roles_right(name, evidence):
    full = read_analysis(_path(name), ports=[6000])
    cut = read_analysis(_path(name + "_midstream"))  # without --port
    client = _syn_client(name)
    assert full.connections["client"].tolist() == [client]
    c = cut.connections
    assert c["client"].tolist() == [client] and c["server"].tolist() == ["127.0.0.1:6000"]
    assert c["connection"].tolist() == [f"{client}-127.0.0.1:6000"]
    assert not c["syn_seen"].iloc[0]
    assert "client/server roles" not in _unknown(c)
    port = int(client.rsplit(":", 1)[1])
    assert role_evidence(port, 6000, frozenset({5672, 5671})) == (
        "ephemeral port" if evidence == "ephemeral port" else "unknown")
    # the same conversation: no violation, the same deliveries, sides and outcomes
    assert len(full.violations) == 0 and len(cut.violations) == 0, list(cut.violations["message"])
    assert _rows(cut) == _rows(full)
    assert cut.links["sender"].tolist() == full.links["sender"].tolist()


def _cut(src, dst, first):
    with open(src, "rb") as f:
        r = dpkt.pcap.Reader(f)
        pkts = list(r)
        lt = r.datalink()
    with open(dst, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=lt)
        for ts, buf in pkts[first - 1:]:
            w.writepkt(buf, ts)


def test_without_evidence_the_roles_are_unknown_and_said(tmp_path):
    """Joined after both protocol headers and both opens, with both ports given as AMQP ports (20000
    and 6000: no ephemeral port either): nothing says which side is the client (the headers and
    opens would: tests/capture/test_loose_roles.py).  The first sender is kept as the client, and the
    connection lists the roles as unknown (the report's "not visible in the capture"), with a
    note in the frames."""
    name = "multi_session_port6000_client20000"
    p = tmp_path / "late.pcap"
    _cut(_path(name), p, 16)  # packet 16: the server's answering begin (headers and opens before it)
    a = read_analysis(str(p), ports=[6000, 20000], frames=True)
    c = a.connections
    assert _unknown(c) == ["client/server roles", "sasl"]  # (the SASL exchange is before the cut too)
    f = a.frames
    notes = f[(f["type"] == "note") & f["json"].str.contains("client and server unknown")]
    assert notes["packet"].tolist() == [1]
    from amqp_dissect.render.report import render_text
    from amqp_dissect.results.report import build_report
    assert "not visible in the capture: client/server roles" in render_text(build_report(a.analyzer))


@pytest.mark.parametrize("client,server,want", [
    (43480, 6000, "ephemeral port"),
    (50000, 443, "well-known port"),
    (40000, 5672, "port"),
    (20000, 6000, "unknown"),  # neither is ephemeral: the ports say nothing
    (50000, 60000, "unknown"),  # both are
])
def test_role_evidence(client, server, want):
    assert role_evidence(client, server, frozenset({5672, 5671})) == want


def test_mid_stream_server_first_on_another_port_the_ephemeral_side_is_the_client():
    """The reassembler alone: the first segment captured comes from port 6000."""
    seg = Segment("10.0.0.2", "10.0.0.1", 6000, 43480, 1, 1, ACK | PSH, b"x", 4)
    ev = TcpReassembler().feed(seg, 1.0, 1)
    assert ev[0] == StreamOpened("10.0.0.1:43480-10.0.0.2:6000", "10.0.0.1:43480", "10.0.0.2:6000", 1.0, 1, False)
    assert isinstance(ev[1], StreamData) and ev[1].direction == 1


def test_swap_roles_renames_the_connection_and_its_held_events():
    tr = TcpReassembler()
    mk = lambda d, seq, ack, data: Segment(*(("10.0.0.1", "10.0.0.2", 20000, 6000) if d == 0 else
                                              ("10.0.0.2", "10.0.0.1", 6000, 20000)), seq, ack, ACK, data, 4)
    ev = tr.feed(mk(0, 100, 500, b"aaaa"), 1.0, 1)  # 20000 first: taken as the client (unknown)
    assert ev[0].client == "10.0.0.1:20000"
    ev += tr.feed(mk(1, 500, 108, b"bb"), 1.1, 2)  # acknowledges 104..108, not captured yet: queued
    cid = tr.swap_roles("10.0.0.1:20000-10.0.0.2:6000")
    assert cid == "10.0.0.2:6000-10.0.0.1:20000"
    ev2 = tr.feed(mk(0, 104, 502, b"cccc"), 1.2, 3)  # the late segment: the window releases
    got = [(e.conn, e.direction, e.data, e.packet) for e in ev2 if isinstance(e, StreamData)]
    assert got == [(cid, 1, b"cccc", 3), (cid, 0, b"bb", 2)]
    assert [(e.conn, e.direction) for e in tr.finish()] == [(cid, -1)]


def test_midstream_on_another_port_is_unknown_where_the_same_cut_on_5672_is(tmp_path):
    """What is unknown of a connection joined after the client's protocol header does not depend on
    how it was found to be AMQP: the sample on port 5672 cut at the same place (``editcap -r 5-``:
    from the server's ACK and protocol header on) is the oracle for its replay on port 6000 found by
    the probe.  (A connection whose server header was seen before its first frame is told by that
    header: no "connection start" line; one whose first AMQP byte is a frame has one.)"""
    import shutil
    import subprocess

    if shutil.which("editcap") is None and not os.environ.get("CI"):
        pytest.skip("editcap (Wireshark's) is not installed")
    samples = os.path.join(os.path.dirname(DATA), "..", "samples")
    unknown = {}
    for first in (5, 8):
        cut = tmp_path / f"outcomes_from_{first}.pcap"
        subprocess.run(["editcap", "-F", "pcap", "-r", os.path.join(samples, "outcomes.pcap"), str(cut),
                        f"{first}-100000"], check=True, capture_output=True)
        unknown[first] = _unknown(read_analysis(str(cut)).connections)
    assert "connection start" not in unknown[5] and "connection start" in unknown[8]
    assert _unknown(read_analysis(_path("outcomes_port6000_midstream")).connections) == unknown[5]
