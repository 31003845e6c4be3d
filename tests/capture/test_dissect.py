"""The Dissector pipeline on damaged captures: snaplen truncation, lost packets, pickling."""

from __future__ import annotations

import io
import os
import pickle
import struct

import dpkt

from amqp_dissect.amqp.framing import Frame, StreamNote
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.events import PacketNote
from eventkeys import run_pipeline

SAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples", "plain_send_receive.pcap")


def _records():
    with open(SAMPLE, "rb") as f:
        return [(ts, bytes(buf)) for ts, buf in dpkt.pcap.Reader(f)]


def _write(records, snaplen=65535) -> bytes:
    """pcap with explicit (ts, captured bytes, original length) records."""
    out = io.BytesIO()
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1))
    for ts, data, orig in records:
        sec = int(ts)
        usec = int(round((ts - sec) * 1e6))
        out.write(struct.pack("<IIII", sec, usec, len(data), orig))
        out.write(data)
    return out.getvalue()


def _payload_packets(recs):
    return [i for i, (ts, buf) in enumerate(recs) if len(dpkt.ethernet.Ethernet(buf).data.data.data) > 100]


def test_snaplen_truncated_packet_is_not_captured_not_a_gap_and_decoding_goes_on():
    recs = _records()
    victim = _payload_packets(recs)[2]
    rows = []
    for i, (ts, buf) in enumerate(recs):
        rows.append((ts, buf[:120] if i == victim else buf, len(buf)))
    full = [e for e in run_pipeline(_write([(ts, b, len(b)) for ts, b in recs])) if isinstance(e, Frame)]
    ev = run_pipeline(_write(rows))
    notes = [e for e in ev if isinstance(e, PacketNote) and e.packet == victim + 1]
    assert len(notes) == 1
    msg = notes[0].note.message.lower()
    assert "snaplen" in msg or "truncat" in msg
    cut = len(recs[victim][1]) - 120
    # the bytes the snap length cut off were on the wire: "not captured", never a gap (issue 39)
    assert not any(isinstance(e, StreamNote) and "bytes missing" in e.note.message for e in ev)
    said = [e for e in ev if isinstance(e, StreamNote) and "not captured (snap length 120)" in e.note.message]
    assert len(said) == 1 and said[0].note.message.startswith(f"{cut} bytes not captured") and said[0].skipped == cut
    frames = [e for e in ev if isinstance(e, Frame)]
    # frames completed after the damaged packet still decode; the last is the close
    assert frames[-1].name == full[-1].name == "close"
    assert [f.packet for f in frames if f.packet > victim + 2] == [f.packet for f in full if f.packet > victim + 2]


def test_lost_packet_reports_gap_and_resynchronises():
    recs = _records()
    victim = _payload_packets(recs)[3]
    rows = [(ts, b, len(b)) for i, (ts, b) in enumerate(recs) if i != victim]
    ev = run_pipeline(_write(rows))
    gaps = [e for e in ev if isinstance(e, StreamNote) and "bytes missing" in e.note.message]
    assert len(gaps) == 1
    # the lost packet held whole frames: decoding goes on at the next frame header, with nothing
    # skipped, so no resynchronisation note (issue 24: no "after skipping 0 bytes")
    assert not any(isinstance(e, StreamNote) and "skipping 0 bytes" in e.note.message for e in ev)
    assert [e for e in ev if isinstance(e, Frame)][-1].name == "close"


def test_dissector_state_pickles_midway():
    """Spark executors need the core picklable, also in the middle of a capture."""
    recs = list(open_capture(open(SAMPLE, "rb")))
    d = Dissector()
    first = []
    for r in recs[:20]:
        first += d.feed(r)
    d2 = pickle.loads(pickle.dumps(d))
    rest_a = []
    rest_b = []
    for r in recs[20:]:
        rest_a += d.feed(r)
        rest_b += d2.feed(r)
    key = lambda evs: [(type(e).__name__, getattr(e, "name", None), getattr(e, "packet", None)) for e in evs]  # noqa: E731
    assert key(rest_a + d.finish()) == key(rest_b + d2.finish())
    assert any(isinstance(e, Frame) for e in rest_a)


def test_connection_state_is_freed_when_connections_close():
    """Many short connections closed by FIN/FIN: nothing stays behind in the pipeline."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
    from pcapbuild import TcpConversation, write_pcap

    records = []
    for i in range(50):
        conv = TcpConversation.from_exchange(
            [(0, b"AMQP\x00\x01\x00\x00"), (1, b"AMQP\x00\x01\x00\x00"), (0, b"\x00\x00\x00\x08\x02\x00\x00\x00")],
            client=("10.0.0.1", 30000 + i), server=("10.0.0.2", 5672), t0=1000.0 + i, dt=0.001,
        )
        records.extend(conv.records)
    d = Dissector()
    frames = 0
    for r in open_capture(io.BytesIO(write_pcap(records))):
        frames += sum(1 for e in d.feed(r) if isinstance(e, Frame))
    assert frames == 50
    assert d.connections == {} and d._opened == {} and d._fins == {} and d._probes == {}
