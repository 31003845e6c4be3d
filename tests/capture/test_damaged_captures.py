"""Damaged captures made from the real samples: lost, duplicated and cut packets cost only
what they carried, and the report says what was lost and what was inferred (issue 8).

Each test damages a sample with dpkt (whole packets dropped, duplicated, or the capture started
late) and compares the analysis with the undamaged one.  The oracles:

* the undamaged sample's own violations (none but the drain sample's one);
* what the dropped packet carried, read from the undamaged capture's frames (which
  ``test_samples.py`` checks against the proton clients' own traces): a delivery may go missing
  only if one of its transfers was in the packet, and an outcome may change only for a delivery
  transferred in it or covered by a disposition in it;
* the dropped packet's TCP payload length, which the connection's ``gap_bytes`` must equal.
"""

from __future__ import annotations

import glob
import os
from collections import Counter

import dpkt
import pytest

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples")
NAMES = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(SAMPLES, "*.pcap")))


def _packets(name):
    with open(os.path.join(SAMPLES, name + ".pcap"), "rb") as f:
        r = dpkt.pcap.Reader(f)
        return list(r), r.datalink()


def _write(path, packets, linktype):
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=linktype)
        for ts, buf in packets:
            w.writepkt(buf, ts)


def _tcp(buf, linktype):
    pkt = dpkt.ethernet.Ethernet(buf) if linktype == dpkt.pcap.DLT_EN10MB else dpkt.loopback.Loopback(buf)
    ip = pkt.data
    return ip.data if isinstance(getattr(ip, "data", None), dpkt.tcp.TCP) else None


def _frames_by_packet(name):
    """packet number -> the AMQP frames it completed (undamaged capture)."""
    d = Dissector()
    out: dict[int, list] = {}
    with open(os.path.join(SAMPLES, name + ".pcap"), "rb") as f:
        for rec in open_capture(f):
            for ev in d.feed(rec):
                if isinstance(ev, Frame):
                    out.setdefault(ev.packet, []).append(ev)
    return out


def _touched(frames):
    """(sending direction, channel, delivery-id) of transfers, and (direction of the transfers,
    channel, id) covered by dispositions, in ``frames``."""
    sent, settled = set(), set()
    for f in frames:
        if f.pname == "transfer":
            p = f.performative
            did = p.field("delivery-id")
            if isinstance(did, int):
                sent.add((f.direction, f.channel, did))
        elif f.pname == "disposition":
            p = f.performative
            first, last = p.field("first"), p.field("last")
            last = first if last is None else last
            role = p.field("role")  # true: the receiver settles the sender's (the peer's) deliveries
            d = 1 - f.direction if role else f.direction
            for i in range(first, last + 1):
                settled.add((d, f.channel, i))
    return sent, settled


def _key_rows(a):
    """(sending side, channel, delivery-id, link) -> outcome, of every row of the deliveries table.
    (The table's rows as the Analyzer gives them: the hundreds of damaged variants a test reads
    need no DataFrame each: the rows into DataFrames is tested in tests/results/test_schema.py and
    tests/pipelines/test_api.py.)"""
    side = {"client": 0, "server": 1}
    return {(side[r["sender_side"]], r["channel"], r["delivery_id"], r["link"]): (r["outcome"] or "")
            for r in a.analyzer.delivery_rows()}


def _violations(a) -> list[str]:
    """The messages of the violations table's rows."""
    return [r["message"] for r in a.analyzer.violation_rows()]


@pytest.fixture(scope="module")
def base():
    return {n: read_analysis(os.path.join(SAMPLES, n + ".pcap")) for n in NAMES}


@pytest.mark.parametrize("name", NAMES)
def test_each_lost_packet_costs_only_what_it_carried(name, base, tmp_path):
    packets, lt = _packets(name)
    frames = _frames_by_packet(name)
    b = base[name]
    b_rows = _key_rows(b)
    b_violations = len(_violations(b))
    checked = 0
    for i, (_, buf) in enumerate(packets, 1):
        tcp = _tcp(buf, lt)
        if tcp is None or not tcp.data:
            continue
        path = tmp_path / f"drop{i}.pcap"
        _write(path, packets[: i - 1] + packets[i:], lt)
        a = read_analysis(str(path))
        # no violation that the loss made up
        violations = _violations(a)
        assert len(violations) <= b_violations, (i, violations)
        # the gap is declared, with the dropped segment's size, on the side that sent it
        lost = {side: sum(c[side] for c in a.analyzer.connection_rows())
                for side in ("gap_bytes_client", "gap_bytes_server")}
        assert sum(lost.values()) == len(tcp.data), (i, lost)
        # deliveries and outcomes change only where the packet's frames were
        sent, settled = _touched(frames.get(i, []))
        rows = _key_rows(a)
        gone = [k for k in b_rows if k not in rows]
        assert all(k[:3] in sent for k in gone), (i, gone)
        changed = [k for k in b_rows if k in rows and rows[k] != b_rows[k]]
        assert all(k[:3] in sent or k[:3] in settled for k in changed), (i, changed)
        assert set(rows) <= set(b_rows), i  # nothing invented
        checked += 1
    assert checked or name == "sasl_auth_failure" or not frames


@pytest.mark.parametrize("name", NAMES)
def test_duplicated_packets_change_nothing(name, base, tmp_path):
    packets, lt = _packets(name)
    b = base[name]
    b_rows, b_violations = _key_rows(b), len(_violations(b))
    for i in range(1, len(packets) + 1, 3):
        path = tmp_path / f"dup{i}.pcap"
        _write(path, packets[:i] + [packets[i - 1]] + packets[i:], lt)
        a = read_analysis(str(path))
        assert _key_rows(a) == b_rows, i
        assert len(_violations(a)) == b_violations, i


@pytest.mark.parametrize("name", NAMES)
def test_capture_joined_mid_stream_invents_no_violation(name, base, tmp_path):
    """Started at any packet: no credit, window, state or handle violation that the frames before
    the capture would have answered; every delivery seen whole is still counted."""
    packets, lt = _packets(name)
    b = base[name]
    b_rows, b_violations = _key_rows(b), len(_violations(b))
    for cut in range(1, len(packets) - 2):
        path = tmp_path / f"cut{cut}.pcap"
        _write(path, packets[cut:], lt)
        a = read_analysis(str(path))
        violations = _violations(a)
        assert len(violations) <= b_violations, (cut, violations)
        rows = _key_rows(a)
        assert all(v == "" or v == b_rows.get(k, v) for k, v in rows.items()), cut


def test_lost_begin_answer_is_inferred_and_said(tmp_path):
    """plain_send_receive without the broker's begin (packet 16): the client's transfers and the
    broker's dispositions still meet in one session, all 20 deliveries accepted as the proton
    clients recorded, and the report names the gap and the inferred begin."""
    packets, lt = _packets("plain_send_receive")
    tcp = _tcp(packets[15][1], lt)
    assert b"\x00\x53\x11" in bytes(tcp.data)  # the begin performative's descriptor
    path = tmp_path / "nobegin.pcap"
    _write(path, packets[:15] + packets[16:], lt)
    a = read_analysis(str(path))
    assert len(a.violations) == 0
    assert Counter(a.deliveries["outcome"]) == {"accepted": 20}
    assert len(a.sessions) == 1
    c = a.connections.iloc[0]
    assert (c["gaps_server"], c["gap_bytes_server"], c["gaps_client"]) == (1, len(tcp.data), 0)
    assert "the server's begin on channel 0" in c["inferred"]  # (JSON text)
    text = render_text(build_report(a.analyzer))
    assert f"from the server 1 gap ({len(tcp.data)} bytes)" in text
    assert "inferred: session 0: the server's begin on channel 0" in text


def test_a_frame_header_beyond_max_frame_size_is_a_violation_and_framing_resynchronises(tmp_path, capsys):
    """A client frame header declaring 64 MiB, on a connection whose server accepts 512-byte
    frames, then 50 flows: the header is a frame-size violation (said in the report with its size),
    the decoder resynchronises at once, and all 50 flows are decoded."""
    from proton import uint, ushort

    from amqp_dissect.cli.main import main
    from pcapbuild import TcpConversation, write_pcapng
    from test_hostile_values import _perf

    c = TcpConversation(t0=1_700_000_000.0, dt=0.25)
    c.handshake()
    c.send(0, b"AMQP\x00\x01\x00\x00")
    c.send(1, b"AMQP\x00\x01\x00\x00")
    c.send(0, _perf(0x10, ["client"]))
    c.send(1, _perf(0x10, ["server", None, uint(512)]))  # max-frame-size 512
    c.send(0, _perf(0x11, [None, uint(0), uint(100), uint(100)]))
    c.send(1, _perf(0x11, [ushort(0), uint(0), uint(100), uint(100)]))
    bogus = (64 << 20).to_bytes(4, "big") + b"\x02\x00\x00\x00"
    flows = b"".join(_perf(0x13, [uint(0), uint(100), uint(i), uint(100)]) for i in range(50))
    c.send(0, bogus + flows)
    c.close()
    cap = tmp_path / "big.pcapng"
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    a = read_analysis(str(cap))
    v = a.violations
    assert list(v["kind"]) == ["frame-size"]
    assert "frame size 67108864 exceeds the peer's max-frame-size 512" in v["message"].iloc[0]
    conn = a.connections.iloc[0]
    assert conn["frame_counts_client"].count("flow") == 1 and '"flow": 50' in conn["frame_counts_client"]
    assert conn["undecoded_bytes_client"] == len(bogus)
    assert main(["report", str(cap)]) == 0
    out = capsys.readouterr().out
    assert "[frame-size] frame size 67108864 exceeds the peer's max-frame-size 512" in out
    assert f"from the client 0 gaps (0 bytes), {len(bogus)} bytes not decoded" in out


def test_a_frame_never_completed_is_reported_with_its_bytes(tmp_path, capsys):
    from proton import uint

    from amqp_dissect.cli.main import main
    from pcapbuild import TcpConversation, write_pcapng
    from test_hostile_values import _perf

    c = TcpConversation(t0=1_700_000_000.0, dt=0.25)
    c.handshake()
    c.send(0, b"AMQP\x00\x01\x00\x00")
    c.send(1, b"AMQP\x00\x01\x00\x00")
    c.send(0, _perf(0x10, ["client"]))
    c.send(1, _perf(0x10, ["server"]))
    frame = _perf(0x11, [None, uint(0), uint(100), uint(100)])
    c.send(0, frame[:-3])  # the capture ends before the frame does
    c.close()
    cap = tmp_path / "cut.pcapng"
    cap.write_bytes(write_pcapng([(ts, 0, data) for ts, _, data in c.records]))
    a = read_analysis(str(cap))
    assert a.connections.iloc[0]["undecoded_bytes_client"] == len(frame) - 3
    assert main(["report", str(cap)]) == 0
    out = capsys.readouterr().out
    assert f"from the client 0 gaps (0 bytes), {len(frame) - 3} bytes not decoded" in out
