"""Every TCP stream of every sample: fed whole, one byte at a time, or re-segmented into
1-byte TCP packets through the whole pipeline, the AMQP frames are the same."""

from __future__ import annotations

import glob
import io
import os

import dpkt
import pytest

from amqp_dissect.amqp.framing import AmqpConnection
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.events import StreamData, StreamOpened
from amqp_dissect.capture.netparse import parse_segment
from amqp_dissect.capture.tcp import TcpReassembler
from eventkeys import frame_keys, run_pipeline

SAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples", "*.pcap")))
IDS = [os.path.basename(s)[:-5] for s in SAMPLES]


def streams(path):
    """{conn: (client, server, [bytes dir0], [bytes dir1])} from our reassembler."""
    tcp = TcpReassembler()
    out = {}
    with open(path, "rb") as f:
        for r in open_capture(f):
            seg = parse_segment(r.linktype, r.data)
            if seg is None:
                continue
            for ev in tcp.feed(seg, r.ts, r.index):
                if isinstance(ev, StreamOpened):
                    out[ev.conn] = (ev.client, ev.server, bytearray(), bytearray())
                elif isinstance(ev, StreamData):
                    out[ev.conn][2 + ev.direction].extend(ev.data)
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_stream_whole_equals_one_byte_at_a_time(path):
    compared = 0
    for conn, (client, server, s0, s1) in streams(path).items():
        for d, s in ((0, bytes(s0)), (1, bytes(s1))):
            whole = AmqpConnection(conn, client, server)
            a = whole.feed(d, s, 1.0, 1) + whole.finish()
            single = AmqpConnection(conn, client, server)
            b = []
            for i in range(len(s)):
                b += single.feed(d, s[i : i + 1], 1.0, 1)
            b += single.finish()
            assert frame_keys(b) == frame_keys(a)
            compared += len(frame_keys(a))
    assert compared > 0


def _resegment(path) -> bytes:
    """Rewrite the capture so that every TCP payload byte travels in its own packet."""
    out = io.BytesIO()
    w = dpkt.pcap.Writer(out, snaplen=65535)
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            l3 = eth.data
            tcp = l3.data
            payload = bytes(tcp.data)
            if not isinstance(tcp, dpkt.tcp.TCP) or len(payload) <= 1:
                w.writepkt(buf, ts)
                continue
            for i in range(len(payload)):
                t = dpkt.tcp.TCP(bytes(tcp))
                t.seq = (tcp.seq + i) & 0xFFFFFFFF
                t.data = payload[i : i + 1]
                t.sum = 0
                l3.data = t
                if isinstance(l3, dpkt.ip.IP):
                    l3.len = 0
                    l3.sum = 0
                else:
                    l3.plen = 0
                w.writepkt(bytes(eth), ts)
    return out.getvalue()


@pytest.mark.parametrize("path", [p for p in SAMPLES if os.path.getsize(p) < 20000], ids=lambda p: os.path.basename(p)[:-5])
def test_one_byte_tcp_segments_through_the_wholerun_pipeline(path):
    whole = frame_keys(run_pipeline(open(path, "rb").read()))
    single = frame_keys(run_pipeline(_resegment(path)))
    assert single == whole and len(whole) > 0
