"""TCP reassembly: ordering, retransmission, wraparound, gaps, closes, limits."""

from __future__ import annotations

import io
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.events import (
    ACK,
    FIN,
    PSH,
    RST,
    SYN,
    PacketNote,
    Segment,
    StreamClosed,
    StreamData,
    StreamGap,
    StreamOpened,
)
from amqp_dissect.capture.netparse import TruncatedPacket, parse_segment

NS = 1_000_000_000  # capture times are integer nanoseconds
from amqp_dissect.capture.tcp import TcpReassembler

import pcapbuild as pb  # tests/support (conftest.py puts it on sys.path)

MASK = 0xFFFFFFFF
C = ("10.0.0.1", 40000)
S = ("10.0.0.2", 5672)
CONN = "10.0.0.1:40000-10.0.0.2:5672"


def seg(d, seq, flags=ACK, payload=b"", ends=(C, S), ack=None):
    """A segment; without ``ack`` it says nothing of what the peer received (the ACK flag is
    dropped, except on a SYN, where it marks the SYN/ACK)."""
    (sip, sp), (dip, dp) = (ends[0], ends[1]) if d == 0 else (ends[1], ends[0])
    v = 6 if ":" in sip else 4
    if ack is None:
        ack = 0
        if not flags & SYN:
            flags &= ~ACK
    return Segment(sip, dip, sp, dp, seq & MASK, ack & MASK, flags, payload, v)


def run(tr, segs, t0=100.0, dt=0.001, first_packet=1):
    events = []
    for i, s in enumerate(segs):
        events += tr.feed(s, t0 + i * dt, first_packet + i)
    return events


def streams(events):
    """(conn, direction) -> list of bytes / ('gap', n) items, merged."""
    out: dict = {}
    for e in events:
        if isinstance(e, StreamData):
            items = out.setdefault((e.conn, e.direction), [])
            if items and isinstance(items[-1], bytes):
                items[-1] += e.data
            else:
                items.append(e.data)
        elif isinstance(e, StreamGap):
            out.setdefault((e.conn, e.direction), []).append(("gap", e.size))
    return out


def kinds(events):
    return [type(e).__name__ for e in events]


def handshake(cisn=1000, sisn=5000, ends=(C, S)):
    return [seg(0, cisn, SYN, ends=ends), seg(1, sisn, SYN | ACK, ends=ends, ack=cisn + 1),
            seg(0, cisn + 1, ACK, ends=ends, ack=sisn + 1)]


# ----------------------------------------------------------------------------- basics
def test_in_order_conversation():
    tr = TcpReassembler()
    segs = handshake() + [
        seg(0, 1001, PSH | ACK, b"AMQP\0\1\0\0"),
        seg(1, 5001, PSH | ACK, b"AMQP\0\1\0\0"),
        seg(1, 5009, PSH | ACK, b"open"),
        seg(0, 1009, ACK),
        seg(0, 1009, FIN | ACK),
        seg(1, 5013, FIN | ACK),
        seg(0, 1010, ACK),
    ]
    ev = run(tr, segs)
    assert kinds(ev) == ["StreamOpened", "StreamData", "StreamData", "StreamData", "StreamClosed", "StreamClosed"]
    opened = ev[0]
    assert (opened.conn, opened.client, opened.server, opened.syn_seen, opened.packet) == (
        CONN, "10.0.0.1:40000", "10.0.0.2:5672", True, 1)
    assert [(e.direction, e.data, e.packet) for e in ev[1:4]] == [
        (0, b"AMQP\0\1\0\0", 4), (1, b"AMQP\0\1\0\0", 5), (1, b"open", 6)]
    assert [(e.direction, e.kind, e.packet) for e in ev[4:]] == [(0, "fin", 8), (1, "fin", 9)]
    assert tr.open_connections == 0
    assert tr.finish() == []


def test_conn_id_ipv6():
    ends = (("::1", 40000), ("::1", 5672))
    ev = run(TcpReassembler(), handshake(ends=ends))
    assert ev[0].conn == "[::1]:40000-[::1]:5672"
    assert ev[0].client == "[::1]:40000"


def test_zero_length_acks_and_keepalives_produce_nothing():
    tr = TcpReassembler()
    ev = run(tr, handshake() + [seg(0, 1001, PSH | ACK, b"abc")])
    assert streams(ev) == {(CONN, 0): [b"abc"]}
    more = run(tr, [
        seg(1, 5001, ACK),  # pure ACK
        seg(0, 1003, ACK, b"c"),  # keep-alive with the last byte (1 below next)
        seg(0, 1003, ACK),  # keep-alive without data
        seg(0, 1004, ACK),  # pure ACK
    ], first_packet=10)
    assert more == []


def test_pure_ack_on_unknown_tuple_opens_nothing():
    tr = TcpReassembler()
    assert run(tr, [seg(0, 5, ACK), seg(1, 9, FIN | ACK), seg(0, 5, RST)]) == []
    assert tr.open_connections == 0


# -------------------------------------------------------------------- reordering (property)
def _cut(data, cuts):
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [(a, data[a:b]) for a, b in zip(points, points[1:]) if b > a]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    c2s=st.binary(min_size=0, max_size=400),
    s2c=st.binary(min_size=0, max_size=400),
    cuts=st.lists(st.integers(0, 10_000), max_size=30),
    cisn=st.one_of(st.integers(0, MASK), st.integers(MASK - 300, MASK)),
    sisn=st.one_of(st.integers(0, MASK), st.integers(MASK - 300, MASK)),
    seed=st.integers(0, 2**32),
    dup=st.integers(0, 10),
)
def test_shuffled_duplicated_segments_deliver_original_bytes(c2s, s2c, cuts, cisn, sisn, seed, dup):
    rng = random.Random(seed)
    body = []
    for d, data, isn in ((0, c2s, cisn), (1, s2c, sisn)):
        pieces = _cut(data, cuts[d::2])
        body += [seg(d, isn + 1 + off, PSH | ACK, chunk) for off, chunk in pieces]
        # retransmissions with other boundaries (same bytes)
        for _ in range(dup):
            if data:
                a = rng.randrange(len(data))
                b = rng.randrange(a, len(data)) + 1
                body.append(seg(d, isn + 1 + a, ACK, data[a:b]))
    rng.shuffle(body)
    segs = handshake(cisn, sisn)[:2] + body + [
        seg(0, cisn + 1 + len(c2s), FIN | ACK),
        seg(1, sisn + 1 + len(s2c), FIN | ACK),
    ]
    tr = TcpReassembler()
    ev = run(tr, segs)
    got = streams(ev)
    assert got.get((CONN, 0), []) == ([c2s] if c2s else [])
    assert got.get((CONN, 1), []) == ([s2c] if s2c else [])
    assert [e.kind for e in ev if isinstance(e, StreamClosed)] == ["fin", "fin"]
    assert not any(isinstance(e, StreamGap) for e in ev)
    assert tr.open_connections == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.binary(min_size=1, max_size=500),
    cuts=st.lists(st.integers(0, 10_000), max_size=25),
    drop=st.lists(st.booleans(), min_size=26, max_size=26),
    isn=st.one_of(st.integers(0, MASK), st.integers(MASK - 600, MASK)),
    seed=st.integers(0, 2**32),
)
def test_dropped_segments_become_exact_gaps(data, cuts, drop, isn, seed):
    pieces = _cut(data, cuts)
    kept = [(off, chunk) for i, (off, chunk) in enumerate(pieces) if not drop[i]]
    body = [seg(0, isn + 1 + off, ACK, chunk) for off, chunk in kept]
    random.Random(seed).shuffle(body)
    # without a reorder window the FIN declares the holes at once; with one (the default), a FIN
    # captured before bytes it follows waits for them, and the end of the capture declares them
    window = seed % 2
    tr = TcpReassembler() if window else TcpReassembler(reorder_packets=0)
    ev = run(tr, [seg(0, isn, SYN)] + body + [seg(0, isn + 1 + len(data), FIN | ACK)])
    if window:
        ev += tr.finish()
    covered = set()
    for off, chunk in kept:
        covered.update(range(off, off + len(chunk)))
    pos = 0
    for item in streams(ev).get((CONN, 0), []):
        if isinstance(item, tuple):
            size = item[1]
            assert size > 0
            assert not covered & set(range(pos, pos + size)), "a gap hides bytes that were captured"
            pos += size
        else:
            assert item == data[pos : pos + len(item)]
            assert set(range(pos, pos + len(item))) <= covered
            pos += len(item)
    assert pos == len(data)
    fins = [e for e in ev if isinstance(e, StreamClosed) and e.kind == "fin"]
    assert fins == [StreamClosed(CONN, 0, "fin", pytest.approx(100.0 + (len(body) + 1) * 0.001), len(body) + 2)]
    assert ev.index(fins[0]) == len(ev) - 1 - window  # (then the end of the capture)


def test_overlaps_first_copy_wins_in_order_and_buffered():
    tr = TcpReassembler()
    ev = run(tr, handshake(0, 0) + [
        seg(0, 1, ACK, b"aaaaaaaaaa"),  # [0,10) in order
        seg(0, 6, ACK, b"BBBBBBBBBB"),  # [5,15): only [10,15) is new
        seg(0, 21, ACK, b"cccccccccc"),  # [20,30) buffered
        seg(0, 26, ACK, b"DDDDDDDDDD"),  # [25,35): [30,35) buffered
        seg(0, 16, ACK, b"EEEEEEEEEEEEEEEEEEEE"),  # [15,35): fills [15,20), the rest is old
    ])
    assert streams(ev)[(CONN, 0)] == [b"aaaaaaaaaa" + b"BBBBB" + b"EEEEE" + b"cccccccccc" + b"DDDDD"]


def test_buffered_bytes_keep_the_packet_that_carried_them():
    """Bytes held behind a hole are delivered with the time and number of their own packet, not
    of the late segment that released them (a frame is reported at its last byte's packet)."""
    tr = TcpReassembler()
    ev = run(tr, handshake(0, 0) + [
        seg(0, 1, ACK, b"11"),  # packet 4
        seg(0, 5, ACK, b"33"),  # packet 5: buffered
        seg(0, 7, ACK, b"44"),  # packet 6: buffered
        seg(0, 3, ACK, b"22"),  # packet 7: fills the hole
    ])
    data = [(e.data, e.packet) for e in ev if isinstance(e, StreamData)]
    assert data == [(b"11", 4), (b"22", 7), (b"33", 5), (b"44", 6)]
    stamps = {e.packet: e.ts for e in ev if isinstance(e, StreamData)}
    assert stamps == pytest.approx({4: 100.003, 5: 100.004, 6: 100.005, 7: 100.006})


def test_sequence_wraparound():
    isn = MASK - 4
    tr = TcpReassembler()
    data = bytes(range(40))
    segs = handshake(isn, MASK) + [seg(0, isn + 1 + i, PSH | ACK, data[i:i + 7]) for i in range(0, 40, 7)]
    segs[4], segs[6] = segs[6], segs[4]  # reorder across the wrap
    segs.append(seg(0, isn + 41, FIN | ACK))
    ev = run(tr, segs)
    assert streams(ev) == {(CONN, 0): [data]}
    assert isinstance(ev[-1], StreamClosed) and ev[-1].kind == "fin"


def test_gap_across_wraparound_has_exact_size():
    isn = MASK - 10
    tr = TcpReassembler()
    ev = run(tr, handshake(isn, 1) + [
        seg(0, isn + 1, ACK, b"x" * 5),
        seg(0, isn + 1 + 5 + 20, ACK, b"y" * 5),  # 20 bytes missing, spanning 2**32
        seg(0, isn + 1 + 30, FIN | ACK),  # waits (reorder window) for the bytes before it
    ])
    ev += tr.finish()  # which never came
    assert streams(ev)[(CONN, 0)] == [b"x" * 5, ("gap", 20), b"y" * 5]


# -------------------------------------------------------------------------- gaps
def test_dropped_segment_reported_at_fin_with_exact_size():
    """Without a reorder window, the FIN past a hole declares it."""
    tr = TcpReassembler(reorder_packets=0)
    segs = handshake() + [
        seg(0, 1001, ACK, b"a" * 100),
        # 1101..1201 dropped
        seg(0, 1201, ACK, b"c" * 100),
        seg(0, 1301, ACK, b"d" * 50),
        seg(0, 1351, FIN | ACK),
    ]
    ev = run(tr, segs)
    tail = ev[-4:]
    assert kinds(tail) == ["StreamGap", "StreamData", "StreamData", "StreamClosed"]
    # declared at the FIN (packet 7), stamped where the first byte after the hole came (packet 5)
    assert tail[0].size == 100 and tail[0].packet == 5
    assert [e.packet for e in tail[1:]] == [5, 6, 7]
    assert streams(ev)[(CONN, 0)] == [b"a" * 100, ("gap", 100), b"c" * 100 + b"d" * 50]
    assert tail[-1].kind == "fin" and tail[-1].direction == 0


def test_peer_ack_past_a_hole_declares_the_gap_at_once_without_a_reorder_window():
    """The server acknowledges bytes the capture never saw: they were sent; with no reorder window
    (reorder_packets=0) the gap is reported at that ACK with its exact size, and the bytes
    buffered behind it go on then, before anything the ACK's own packet carries (both directions
    stay in capture order)."""
    tr = TcpReassembler(reorder_packets=0)
    segs = handshake() + [
        seg(0, 1001, ACK, b"a" * 100, ack=5001),
        # 1101..1201 lost
        seg(0, 1201, ACK, b"c" * 100, ack=5001),  # buffered behind the hole
        seg(1, 5001, ACK | PSH, b"reply", ack=1101),  # acknowledges only what was seen: nothing yet
        seg(1, 5006, ACK | PSH, b"more", ack=1301),  # acknowledges past the hole
    ]
    ev = run(tr, segs)
    assert streams(ev)[(CONN, 0)] == [b"a" * 100, ("gap", 100), b"c" * 100]
    gap = next(e for e in ev if isinstance(e, StreamGap))
    # stamped at the first byte after the hole (packet 5), where tshark says "previous segment
    # not captured"; the bytes behind it keep their packet
    assert (gap.direction, gap.size, gap.packet) == (0, 100, 5)
    # order: the client's released bytes, then the server's bytes of the ACK's packet
    tail = [(type(e).__name__, e.direction, e.packet) for e in ev if type(e) in (StreamGap, StreamData)][-3:]
    assert tail == [("StreamGap", 0, 5), ("StreamData", 0, 5), ("StreamData", 1, 7)]


def test_peer_ack_of_bytes_never_seen_is_a_gap_before_the_next_byte():
    tr = TcpReassembler(reorder_packets=0)
    segs = handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),
        # 1011..1061 lost; nothing of the client buffered when the server acknowledges it
        seg(1, 5001, ACK, ack=1061),
        seg(0, 1061, ACK, b"b" * 10, ack=5001),  # in order once the gap is declared
    ]
    ev = run(tr, segs)
    assert streams(ev)[(CONN, 0)] == [b"a" * 10, ("gap", 50), b"b" * 10]
    gap = next(e for e in ev if isinstance(e, StreamGap))
    assert gap.packet == 5 and gap.size == 50


def test_reordering_before_the_ack_is_not_a_gap():
    tr = TcpReassembler()
    segs = handshake() + [
        seg(0, 1101, ACK, b"b" * 100, ack=5001),  # captured before the segment it follows
        seg(1, 5001, ACK, ack=1001),  # an old ACK: says nothing of a loss
        seg(0, 1001, ACK, b"a" * 100, ack=5001),
        seg(1, 5001, ACK, ack=1201),
    ]
    ev = run(tr, segs)
    assert streams(ev)[(CONN, 0)] == [b"a" * 100 + b"b" * 100]
    assert not any(isinstance(e, StreamGap) for e in ev)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 300), min_size=2, max_size=12), lost=st.data(), isn=st.integers(0, MASK))
def test_every_acknowledged_loss_is_one_exact_gap(sizes, lost, isn):
    """Client segments, each acknowledged by the server right after it: dropping any of them gives
    one gap of exactly its size (adjacent losses make one hole: one gap of their sizes' sum), and
    every other byte, in order, with the server's ACKs queued behind the hole."""
    drop = lost.draw(st.sets(st.integers(0, len(sizes) - 2)))  # the last one is never lost
    data = bytes(range(256)) * (sum(sizes) // 256 + 1)
    segs = handshake(cisn=isn)
    off = 0
    want = []
    for i, n in enumerate(sizes):
        chunk = data[off:off + n]
        if i in drop:
            want.append(("gap", n))
        else:
            segs.append(seg(0, isn + 1 + off, ACK, chunk, ack=5001))
            want.append(chunk)
        off += n
        segs.append(seg(1, 5001, ACK, ack=isn + 1 + off))
    for window in (0, 3, 16):
        tr = TcpReassembler(reorder_packets=window)
        ev = run(tr, segs)
        ev += tr.finish()
        got = streams(ev).get((CONN, 0), [])
        if window == 0:  # each loss is found by its own ACK, at once: one gap each
            merged: list = []
            for x in want:
                if isinstance(x, bytes) and merged and isinstance(merged[-1], bytes):
                    merged[-1] += x
                else:
                    merged.append(x)
            assert got == merged
        else:  # a window may declare adjacent losses as one hole: compare byte by byte
            def flat(items):
                return [b for x in items for b in (x if isinstance(x, bytes) else [None] * x[1])]
            assert flat(got) == flat(want)
        assert tr.buffered_bytes() == 0


def _request_response(rounds, lost_c, lost_s, size=10):
    """A request/response conversation: in round i the client sends ``size`` bytes acknowledging
    the server's bytes so far, then the server answers ``size`` bytes acknowledging them.  The
    segments of rounds ``lost_c`` (client) and ``lost_s`` (server) are not captured.  Returns the
    segments and, per direction, the bytes and gaps the reassembler must deliver."""
    segs = handshake()
    want: dict = {0: [], 1: []}
    for i in range(rounds):
        c = bytes([65 + i % 26]) * size
        s = bytes([97 + i % 26]) * size
        if i in lost_c:
            want[0].append(("gap", size))
        else:
            segs.append(seg(0, 1001 + size * i, ACK | PSH, c, ack=5001 + size * i))
            want[0].append(c)
        if i in lost_s:
            want[1].append(("gap", size))
        else:
            segs.append(seg(1, 5001 + size * i, ACK | PSH, s, ack=1001 + size * (i + 1)))
            want[1].append(s)
    return segs, want


def _flat(items):
    return [b for x in items for b in (x if isinstance(x, bytes) else [None] * x[1])]


def test_holes_in_both_directions_release_their_bytes_in_capture_order():
    """Both directions lose a segment in the same round (the twins' case: a client's answers behind
    its own hole, the server's transfers behind another): when the window declares the holes, the
    bytes held behind them come out merged by packet, so an answer never precedes what it answers."""
    segs, want = _request_response(12, {4}, {4})
    tr = TcpReassembler()
    ev = run(tr, segs) + tr.finish()
    got = streams(ev)
    assert _flat(got[(CONN, 0)]) == _flat(want[0])
    assert _flat(got[(CONN, 1)]) == _flat(want[1])
    packets = [e.packet for e in ev if isinstance(e, (StreamData, StreamGap))]
    assert packets == sorted(packets)
    # the client's round-5 request (packet 12) comes before the server's round-5 answer (packet 13)
    order = [(e.direction, e.packet) for e in ev if isinstance(e, StreamData)]
    assert order.index((0, 12)) < order.index((1, 13))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.integers(3, 30), lost=st.data(), window=st.sampled_from([0, 2, 16]))
def test_losses_in_both_directions_keep_capture_order_and_exact_bytes(rounds, lost, window):
    """Any losses in either direction of a request/response conversation: every byte and every gap
    exactly, and the bytes of both directions in the order of the packets that carried them
    (nothing here is retransmitted).  (A gap no later byte of its direction was captured behind is
    stamped with the packet that proved it, which may come after later bytes of the other side.)"""
    rng = st.sets(st.integers(0, rounds - 2))  # (the last round is never lost: its bytes prove the holes)
    lost_c, lost_s = lost.draw(rng), lost.draw(rng)
    segs, want = _request_response(rounds, lost_c, lost_s)
    tr = TcpReassembler(reorder_packets=window)
    ev = run(tr, segs) + tr.finish()
    got = streams(ev)
    assert _flat(got.get((CONN, 0), [])) == _flat(want[0])
    assert _flat(got.get((CONN, 1), [])) == _flat(want[1])
    packets = [e.packet for e in ev if type(e) is StreamData]
    assert packets == sorted(packets)
    assert tr.buffered_bytes() == 0


def test_fin_with_data_beyond_hole():
    tr = TcpReassembler(reorder_packets=0)
    ev = run(tr, handshake() + [seg(0, 1001, ACK, b"a"), seg(0, 1011, FIN | PSH | ACK, b"tail")])
    assert streams(ev)[(CONN, 0)] == [b"a", ("gap", 9), b"tail"]
    assert isinstance(ev[-1], StreamClosed)


def test_gap_reported_by_finish():
    tr = TcpReassembler()
    ev = run(tr, handshake() + [seg(0, 1001, ACK, b"a" * 10), seg(0, 1031, ACK, b"b" * 10)])
    assert streams(ev)[(CONN, 0)] == [b"a" * 10]
    end = tr.finish(ts=500.0)
    assert kinds(end) == ["StreamGap", "StreamData", "StreamClosed"]
    assert end[0].size == 20
    assert (end[-1].kind, end[-1].direction, end[-1].ts) == ("end", -1, 500.0)
    assert tr.open_connections == 0


def test_buffer_bound_forces_gap():
    tr = TcpReassembler(max_buffered=1000)
    segs = handshake() + [seg(0, 1001, ACK, b"a" * 10)]
    # hole of 5 bytes, then 300-byte segments beyond it
    segs += [seg(0, 1016 + 300 * i, ACK, bytes([65 + i]) * 300) for i in range(4)]
    ev = run(tr, segs)
    got = streams(ev)[(CONN, 0)]
    assert got[:2] == [b"a" * 10, ("gap", 5)]
    assert got[2] == b"A" * 300 + b"B" * 300 + b"C" * 300 + b"D" * 300
    gap = next(e for e in ev if isinstance(e, StreamGap))
    assert gap.packet == 8  # the 4th buffered segment pushed the buffer over 1000 bytes
    assert tr.buffered_bytes() == 0


def test_buffer_bound_keeps_memory_bounded_with_many_holes():
    tr = TcpReassembler(max_buffered=4096)
    segs = handshake()
    # every other 100-byte block missing, 2000 blocks
    segs += [seg(0, 1001 + 200 * i + 100, ACK, b"z" * 100) for i in range(2000)]
    peak = 0
    ev = []
    for i, s in enumerate(segs):
        ev += tr.feed(s, 1.0 + i * 1e-3, i + 1)
        peak = max(peak, tr.buffered_bytes())
    assert peak <= 4096 + 100
    assert tr.buffered_bytes() > 3000  # the bound, not the end, forced the gaps so far
    ev += tr.finish()
    gaps = [e.size for e in ev if isinstance(e, StreamGap)]
    assert gaps == [100] * 2000  # every hole exactly once, exact size
    assert sum(len(e.data) for e in ev if isinstance(e, StreamData)) == 2000 * 100


def test_flood_of_tiny_out_of_order_segments_is_bounded():
    from amqp_dissect.capture.tcp import MAX_PIECES

    tr = TcpReassembler()
    segs = handshake()
    n = MAX_PIECES + 500
    order = list(range(n))
    random.Random(7).shuffle(order)
    # 1-byte segments at every other position after a 1-byte hole, in random order
    segs += [seg(0, 1002 + 2 * i, ACK, b"x") for i in order]
    ev = run(tr, segs)
    assert tr.buffered_bytes() <= MAX_PIECES
    assert any(isinstance(e, StreamGap) for e in ev)
    ev += tr.finish()
    gaps = sum(e.size for e in ev if isinstance(e, StreamGap))
    data = sum(len(e.data) for e in ev if isinstance(e, StreamData))
    assert n - 100 < data <= n  # a few late bytes fell into holes already given up
    assert gaps + data == 2 * n  # every byte position accounted for exactly once


def test_truncated_payload_wire_len_reports_gap():
    tr = TcpReassembler()
    ev = run(tr, handshake())
    ev += tr.feed(seg(0, 1001, ACK, b"abc"), 1.0, 10, wire_len=10)  # 7 bytes not captured
    ev += tr.feed(seg(0, 1011, ACK, b"next"), 1.1, 11)
    assert streams(ev)[(CONN, 0)] == [b"abc", ("gap", 7), b"next"]


def test_truncated_packet_from_netparse_end_to_end():
    conv = pb.TcpConversation()
    conv.handshake()
    conv.send(0, b"A" * 200)
    conv.send(0, b"B" * 10)
    tr = TcpReassembler()
    ev = []
    for i, (ts, lt, data) in enumerate(conv.records):
        data = data[:96]  # snaplen 96
        try:
            s = parse_segment(lt, data)
            ev += tr.feed(s, ts, i + 1)
        except TruncatedPacket as exc:
            ev += tr.feed(exc.segment, ts, i + 1, wire_len=exc.wire_len)
    assert streams(ev)[(conv.conn_id, 0)] == [b"A" * 42, ("gap", 158), b"B" * 10]


# ---------------------------------------------------------------------- mid-connection
def test_mid_connection_start_server_port():
    tr = TcpReassembler()
    ev = run(tr, [
        seg(1, 777, PSH | ACK, b"from server"),  # first packet is from the server (port 5672)
        seg(0, 123, PSH | ACK, b"from client"),
        seg(1, 788, PSH | ACK, b"!"),
    ])
    assert ev[0] == StreamOpened(CONN, "10.0.0.1:40000", "10.0.0.2:5672", 100.0, 1, False)
    assert streams(ev) == {(CONN, 1): [b"from server!"], (CONN, 0): [b"from client"]}


@pytest.mark.parametrize(
    "a,b,client",
    [
        (("10.0.0.1", 50000), ("10.0.0.2", 443), "10.0.0.1:50000"),  # low port < 1024 is the server
        (("10.0.0.1", 22), ("10.0.0.2", 50000), "10.0.0.2:50000"),
        (("10.0.0.1", 50000), ("10.0.0.2", 60000), "10.0.0.1:50000"),  # first sender is the client
        (("10.0.0.1", 60000), ("10.0.0.2", 50000), "10.0.0.1:60000"),
    ],
)
def test_mid_connection_direction_heuristics(a, b, client):
    ev = TcpReassembler().feed(seg(0, 1, ACK, b"x", ends=(a, b)), 1.0, 1)
    assert ev[0].client == client
    assert not ev[0].syn_seen
    assert ev[1].direction == (0 if client == f"{a[0]}:{a[1]}" else 1)


def test_syn_ack_first_makes_receiver_the_client():
    tr = TcpReassembler()
    ev = run(tr, [seg(1, 5000, SYN | ACK), seg(0, 1001, ACK, b"hi"), seg(1, 5001, ACK, b"yo")])
    assert (ev[0].client, ev[0].syn_seen) == ("10.0.0.1:40000", True)
    assert streams(ev) == {(CONN, 0): [b"hi"], (CONN, 1): [b"yo"]}


def test_server_data_without_syn_ack():
    tr = TcpReassembler()
    ev = run(tr, [seg(0, 1000, SYN), seg(1, 7000, PSH | ACK, b"banner"), seg(0, 1001, ACK, b"req")])
    assert streams(ev) == {(CONN, 1): [b"banner"], (CONN, 0): [b"req"]}


def test_mid_connection_earlier_bytes_are_not_a_gap():
    tr = TcpReassembler()
    ev = run(tr, [seg(0, 5000, ACK, b"x"), seg(0, 4990, ACK, b"old-bytes!"), seg(0, 5001, ACK, b"y")])
    assert streams(ev) == {(CONN, 0): [b"xy"]}
    assert tr.finish() == [StreamClosed(CONN, -1, "end", 100.002, 3)]


# ----------------------------------------------------------------------- close / reuse
def test_rst_closes_and_frees_state():
    tr = TcpReassembler()
    ev = run(tr, handshake() + [seg(0, 1001, ACK, b"a"), seg(0, 1005, ACK, b"e"), seg(1, 5001, RST | ACK)])
    assert streams(ev)[(CONN, 0)] == [b"a", ("gap", 3), b"e"]
    assert ev[-1] == StreamClosed(CONN, 1, "rst", pytest.approx(100.005), 6)
    assert tr.open_connections == 0
    # late packets of the dead connection are dropped
    assert run(tr, [seg(0, 1006, ACK, b"late"), seg(1, 5001, RST)], t0=101.0) == []


def test_half_close_then_other_side_keeps_sending():
    tr = TcpReassembler()
    ev = run(tr, handshake() + [
        seg(0, 1001, FIN | ACK),
        seg(1, 5001, ACK, b"still"),
        seg(0, 1002, ACK, b"ignored after FIN"),
        seg(1, 5006, FIN | ACK, b"!"),
    ])
    assert [(e.direction, e.kind) for e in ev if isinstance(e, StreamClosed)] == [(0, "fin"), (1, "fin")]
    assert streams(ev) == {(CONN, 1): [b"still!"]}


@pytest.mark.parametrize("closer", ["fin", "rst"])
def test_reused_tuple_gets_suffix(closer):
    tr = TcpReassembler()
    first = handshake(1000, 5000) + [seg(0, 1001, ACK, b"one")]
    if closer == "fin":
        first += [seg(0, 1004, FIN | ACK), seg(1, 5001, FIN | ACK), seg(0, 1005, ACK)]
    else:
        first += [seg(0, 1004, RST)]
    second = handshake(90000, 70000) + [seg(0, 90001, ACK, b"two")]
    third = [seg(0, 90004, RST)] + handshake(123, 456) + [seg(1, 457, ACK, b"three")]
    ev = run(tr, first + second + third)
    opened = [e.conn for e in ev if isinstance(e, StreamOpened)]
    assert opened == [CONN, CONN + "#2", CONN + "#3"]
    assert streams(ev) == {(CONN, 0): [b"one"], (CONN + "#2", 0): [b"two"], (CONN + "#3", 1): [b"three"]}


def test_ids_deterministic_across_runs():
    # a SYN with the ISN of the closed connection is a late retransmission, not a new connection
    same = (handshake() + [seg(0, 1001, RST)]) * 3
    assert [e.conn for e in run(TcpReassembler(), same) if isinstance(e, StreamOpened)] == [CONN]
    fresh = [x for i in range(3) for x in handshake(1000 * (i + 1), 7) + [seg(0, 1000 * (i + 1) + 1, RST)]]
    a = [e.conn for e in run(TcpReassembler(), fresh) if isinstance(e, StreamOpened)]
    b = [e.conn for e in run(TcpReassembler(), fresh) if isinstance(e, StreamOpened)]
    assert a == b == [CONN, CONN + "#2", CONN + "#3"]


def test_new_syn_on_open_connection_starts_new_one():
    tr = TcpReassembler()
    ev = run(tr, handshake(1, 2) + [seg(0, 2, ACK, b"x"), seg(0, 10, ACK, b"q")]
             + handshake(500, 600) + [seg(0, 501, ACK, b"new")])
    closed = [e for e in ev if isinstance(e, StreamClosed)]
    assert closed == [StreamClosed(CONN, -1, "end", pytest.approx(100.005), 6)]
    assert any(isinstance(e, PacketNote) for e in ev)
    assert streams(ev) == {(CONN, 0): [b"x", ("gap", 7), b"q"], (CONN + "#2", 0): [b"new"]}


def test_retransmitted_syn_is_not_a_new_connection():
    tr = TcpReassembler()
    ev = run(tr, [seg(0, 1000, SYN), seg(0, 1000, SYN), seg(1, 5000, SYN | ACK), seg(0, 1001, ACK, b"x")])
    assert [e.conn for e in ev if isinstance(e, StreamOpened)] == [CONN]


# ------------------------------------------------------------------------ idle / limits
def test_idle_timeout_closes_and_frees():
    tr = TcpReassembler(idle_timeout=10.0)
    ends_b = (("10.0.0.3", 40001), S)
    ev = tr.feed(seg(0, 1, ACK, b"a"), 0, 1)
    ev += tr.feed(seg(0, 2, ACK, b"c"), 1 * NS, 2)  # leaves a... no hole: in order
    ev += tr.feed(seg(0, 10, ACK, b"z"), 2 * NS, 3)  # hole of 7 bytes
    assert tr.open_connections == 1
    ev += tr.feed(seg(0, 1, ACK, b"other", ends=ends_b), 20 * NS, 4)
    idle = [e for e in ev if isinstance(e, StreamClosed)]
    assert idle == [StreamClosed(CONN, -1, "idle", 20 * NS, 4)]
    assert streams(ev)[(CONN, 0)] == [b"ac", ("gap", 7), b"z"]
    assert tr.open_connections == 1  # only the new one
    # the old tuple comes back: a new connection
    ev2 = tr.feed(seg(0, 11, ACK, b"back"), 21 * NS, 5)
    assert isinstance(ev2[0], StreamOpened) and ev2[0].conn == CONN + "#2"


def test_idle_connection_expires_on_its_own_next_packet():
    tr = TcpReassembler(idle_timeout=10.0, sweep_interval=1000.0)
    tr.feed(seg(0, 1, ACK, b"a"), 0, 1)
    ev = tr.feed(seg(0, 2, ACK, b"b"), 50 * NS, 2)
    assert kinds(ev) == ["StreamClosed", "StreamOpened", "StreamData"]
    assert ev[1].conn == CONN + "#2"


def test_many_short_connections_state_is_freed():
    tr = TcpReassembler(close_grace=5.0)
    t = 0
    for i in range(500):
        ends = (("10.0.0.1", 20000 + i), S)
        for s in handshake(ends=ends) + [seg(0, 1001, ACK, b"x", ends=ends), seg(1, 5001, RST, ends=ends)]:
            tr.feed(s, t, 1)
            t += NS // 10
    assert tr.open_connections == 0
    assert tr.tracked_tuples <= 2 * 60  # only those closed within the last 5 s remain


def test_max_connections_evicts_least_recently_active():
    tr = TcpReassembler(max_connections=3)
    ev = []
    for i in range(3):
        ev += tr.feed(seg(0, 1, ACK, b"x", ends=(("10.0.0.1", 30000 + i), S)), float(i), i + 1)
    ev += tr.feed(seg(0, 2, ACK, b"y", ends=(("10.0.0.1", 30000), S)), 3.0, 4)  # first one active again
    ev += tr.feed(seg(0, 1, ACK, b"z", ends=(("10.0.0.1", 30099), S)), 4.0, 5)
    notes = [e for e in ev if isinstance(e, PacketNote)]
    assert len(notes) == 1 and notes[0].conn == "10.0.0.1:30001-10.0.0.2:5672"
    assert StreamClosed("10.0.0.1:30001-10.0.0.2:5672", -1, "idle", 4.0, 5) in ev
    assert tr.open_connections == 3


def test_the_order_of_activity_is_kept_by_a_pickle_and_evicts_as_a_plain_list_says():
    """The least recently active connection is evicted (issue 40: the order is kept in the connections'
    own fields, not an ordered dict): 300 connections, packets on them in a random order, a reassembler
    pickled midway (flat: 3,000 connections pickle within the recursion limit), then new connections on
    both: each evicts the one a plain list of the connections, in order of their last packet, names."""
    rng = random.Random(40)
    n = 300
    ends = [(("10.0.0.1", 20000 + i), S) for i in range(n)]
    cid = [f"10.0.0.1:{20000 + i}-10.0.0.2:5672" for i in range(n)]
    tr = TcpReassembler(max_connections=n)
    order: list = []  # (the oracle: ids, least recently active first)
    nxt = [1] * n
    t = 1.0
    for i in list(range(n)) + [rng.randrange(n) for _ in range(2000)]:
        tr.feed(seg(0, nxt[i], ACK, b"x", ends=ends[i]), t, int(t * 1000))
        nxt[i] += 1
        t += 0.001
        if cid[i] in order:
            order.remove(cid[i])
        order.append(cid[i])
    again = pickle.loads(pickle.dumps(tr))
    for r in (tr, again):
        got = []
        for k in range(50):
            evs = r.feed(seg(0, 1, ACK, b"y", ends=(("10.0.0.3", 30000 + k), S)), t + k * 0.001, 5000 + k)
            got += [e.conn for e in evs if isinstance(e, PacketNote)]
        assert got == order[:50]
        assert r.open_connections == n
    big = TcpReassembler()
    for i in range(3000):
        big.feed(seg(0, 1, ACK, b"x", ends=(("10.0.%d.%d" % (i >> 8, i & 255), 40000), S)), 1.0 + i * 1e-6, i)
    assert pickle.loads(pickle.dumps(big)).open_connections == 3000


# ------------------------------------------------------------------------------ ignore
def test_ignore_drops_packets_until_reuse():
    tr = TcpReassembler()
    run(tr, handshake() + [seg(0, 1001, ACK, b"GET / HTTP/1.1"), seg(0, 1030, ACK, b"buffered")])
    assert tr.buffered_bytes() == 8
    tr.ignore(CONN)
    assert tr.buffered_bytes() == 0
    more = run(tr, [seg(1, 5001, ACK, b"HTTP/1.1 200"), seg(0, 1015, ACK, b"x" * 15),
                    seg(0, 1038, FIN | ACK), seg(1, 5013, FIN | ACK)], t0=101.0)
    assert more == []
    assert tr.open_connections == 0
    again = run(tr, handshake(42, 43) + [seg(0, 43, ACK, b"AMQP")], t0=102.0)
    assert again[0].conn == CONN + "#2"
    assert streams(again) == {(CONN + "#2", 0): [b"AMQP"]}
    assert tr.finish() == [StreamClosed(CONN + "#2", -1, "end", pytest.approx(102.003), 4)]


def test_ignored_connection_closed_by_rst_and_no_end_event():
    tr = TcpReassembler()
    run(tr, handshake())
    tr.ignore(CONN)
    assert run(tr, [seg(1, 5001, RST)]) == []
    assert tr.finish() == []


# ----------------------------------------------------------------------- pickle / e2e
def test_state_is_picklable_mid_stream():
    segs = handshake() + [seg(0, 1001, ACK, b"abc"), seg(0, 1010, ACK, b"later"), seg(1, 5001, ACK, b"s")]
    tail = [seg(0, 1004, ACK, b"defghi"), seg(0, 1015, FIN | ACK), seg(1, 5002, FIN | ACK)]
    tr = TcpReassembler()
    run(tr, segs)
    clone = pickle.loads(pickle.dumps(tr))
    a = run(tr, tail, t0=200.0)
    b = run(clone, tail, t0=200.0)
    assert a == b
    assert streams(a)[(CONN, 0)] == [b"defghilater"]


@pytest.mark.parametrize("linktype", [pb.LINKTYPE_ETHERNET, pb.LINKTYPE_LINUX_SLL2, pb.LINKTYPE_NULL])
def test_end_to_end_capture_netparse_tcp(linktype):
    msgs = [(0, b"AMQP\x00\x01\x00\x00"), (1, b"AMQP\x00\x01\x00\x00"), (0, b"x" * 5000), (1, b"y" * 3)]
    conv = pb.TcpConversation.from_exchange(msgs, linktype=linktype, client_isn=MASK - 100, acks=True)
    reader = open_capture(io.BytesIO(pb.gzip_bytes(conv.pcapng())))
    tr = TcpReassembler()
    ev = []
    for rec in reader:
        ev += tr.feed(parse_segment(rec.linktype, rec.data), rec.ts, rec.index)
    ev += tr.finish()
    assert reader.error is None
    got = streams(ev)
    assert got[(conv.conn_id, 0)] == [b"AMQP\x00\x01\x00\x00" + b"x" * 5000]
    assert got[(conv.conn_id, 1)] == [b"AMQP\x00\x01\x00\x00" + b"y" * 3]
    assert [e.kind for e in ev if isinstance(e, StreamClosed)] == ["fin", "fin"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # direction
            st.sampled_from([40000, 40001]),  # client port: two 4-tuples
            st.integers(0, 60),  # seq (small range: many overlaps)
            st.sampled_from([ACK, SYN, SYN | ACK, FIN | ACK, RST, PSH | ACK, 0]),
            st.binary(max_size=12),
            st.floats(0, 3),  # time step
            st.one_of(st.none(), st.integers(0, 80), st.integers(0, MASK)),  # ack
        ),
        max_size=60,
    )
)
def test_random_segments_keep_event_invariants(items):
    tr = TcpReassembler(max_buffered=16, idle_timeout=5.0, max_connections=2, close_grace=2.0)
    t = 0.0
    ev = []
    for i, (d, cport, sq, fl, payload, step, ack) in enumerate(items):
        t += step
        ev += tr.feed(seg(d, sq, fl, payload, ends=(("10.0.0.1", cport), S), ack=ack), t, i + 1)
        assert tr.buffered_bytes() <= 2 * 2 * 16  # max_buffered per direction, 2 connections
    ev += tr.finish()
    state: dict = {}
    for e in ev:
        if isinstance(e, PacketNote):
            continue
        if isinstance(e, StreamOpened):
            assert e.conn not in state, "connection ids are unique"
            state[e.conn] = {"open": True, "dirs": set()}
            continue
        st_ = state[e.conn]
        assert st_["open"], f"event after close: {e}"
        if isinstance(e, (StreamData, StreamGap)):
            assert e.direction in (0, 1) and e.direction not in st_["dirs"]
            assert (len(e.data) if isinstance(e, StreamData) else e.size) > 0
        elif isinstance(e, StreamClosed):
            if e.kind == "fin":
                st_["dirs"].add(e.direction)
                if st_["dirs"] == {0, 1}:
                    st_["open"] = False
            else:
                st_["open"] = False
    assert all(not s["open"] for s in state.values()), "finish() closes everything"
    assert tr.open_connections == 0 and tr.tracked_tuples == 0


# ------------------------------------------------------------------ reorder window (issue 24)
def test_ack_captured_before_the_segment_it_acknowledges_is_not_a_gap():
    """A multi-queue NIC swaps two adjacent packets: the server's reply (acknowledging the
    client's bytes) is captured before those bytes.  Inside the reorder window the late segment
    fills the hole; the reply is queued behind it, and every event keeps its own packet."""
    tr = TcpReassembler()
    segs = handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(1, 5001, ACK | PSH, b"reply", ack=1021),  # 5: acknowledges 1011..1021, not captured yet
        seg(0, 1011, ACK, b"b" * 10, ack=5001),  # 6: the late segment
        seg(0, 1021, ACK, b"c" * 10, ack=5006),  # 7
    ]
    ev = run(tr, segs)
    assert not any(isinstance(e, StreamGap) for e in ev)
    assert streams(ev) == {(CONN, 0): [b"a" * 10 + b"b" * 10 + b"c" * 10], (CONN, 1): [b"reply"]}
    data = [(e.direction, e.data[:1], e.packet, e.ts) for e in ev if isinstance(e, StreamData)]
    assert data == [(0, b"a", 4, 100.003), (0, b"b", 6, 100.005), (1, b"r", 5, 100.004), (0, b"c", 7, 100.006)]


def test_hole_waits_for_the_window_then_is_declared_with_its_exact_size():
    """A lost segment: the ACK past it opens the window; the hole is declared after
    reorder_packets more packets of the connection, the bytes behind it keep their packets, and a
    copy arriving later is a retransmission (dropped)."""
    tr = TcpReassembler(reorder_packets=3, reorder_seconds=60.0)
    segs = handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(0, 1021, ACK, b"c" * 10, ack=5001),  # 5: behind the hole 1011..1021
        seg(1, 5001, ACK, b"r1", ack=1031),  # 6: acknowledges past the hole: window opens
        seg(1, 5003, ACK, b"r2", ack=1031),  # 7
        seg(1, 5005, ACK, b"r3", ack=1031),  # 8
        seg(1, 5007, ACK, b"r4", ack=1031),  # 9: third packet after the ACK: declared
        seg(0, 1011, ACK, b"b" * 10, ack=5009),  # 10: too late
    ]
    ev = run(tr, segs)
    assert streams(ev)[(CONN, 0)] == [b"a" * 10, ("gap", 10), b"c" * 10]
    assert streams(ev)[(CONN, 1)] == [b"r1r2r3r4"]
    gap = next(e for e in ev if isinstance(e, StreamGap))
    assert (gap.packet, gap.size) == (5, 10)
    # declared while packet 9 was fed: gap and buffered bytes first, then the queued replies
    order = [(type(e).__name__, e.direction, e.packet) for e in ev if type(e) in (StreamGap, StreamData)]
    assert order[1:] == [("StreamGap", 0, 5), ("StreamData", 0, 5), ("StreamData", 1, 6), ("StreamData", 1, 7),
                         ("StreamData", 1, 8), ("StreamData", 1, 9)]
    assert tr.buffered_bytes() == 0
    assert kinds(tr.finish()) == ["StreamClosed"]  # nothing was left pending


def test_window_also_closes_on_capture_time():
    tr = TcpReassembler(reorder_packets=100, reorder_seconds=0.5)
    ev = []
    for i, (s_, t) in enumerate([
        (seg(0, 1001, ACK, b"a" * 10, ack=5001), 0.0),
        (seg(1, 5001, ACK, b"r1", ack=1021), 0.1),  # acknowledges 1011..1021, never captured
        (seg(1, 5003, ACK, b"r2", ack=1021), 0.3),  # inside the window: queued
        (seg(1, 5005, ACK, b"r3", ack=1021), 0.7),  # 0.6 s after the ACK: declared
    ]):
        ev += tr.feed(s_, round((100.0 + t) * NS), i + 1)
    assert streams(ev) == {(CONN, 0): [b"a" * 10, ("gap", 10)], (CONN, 1): [b"r1r2r3"]}
    gap = next(e for e in ev if isinstance(e, StreamGap))
    # no byte after it was captured, and packet 2's ACK proved it (Wireshark: "ACKed segment that
    # wasn't captured" there): stamped at packet 2, before the events it precedes in time too
    assert (gap.packet, gap.ts, gap.size) == (2, round(100.1 * NS), 10)


def test_fin_captured_before_the_bytes_it_follows_waits_for_them():
    """[close frame, FIN] captured as [FIN, close frame]: the FIN waits in the window, the bytes
    come, then the FIN, each with its own packet."""
    tr = TcpReassembler()
    ev = run(tr, handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(0, 1021, FIN | ACK, ack=5001),  # 5: FIN after 1011..1021, not captured yet
        seg(0, 1011, ACK, b"b" * 10, ack=5001),  # 6
        seg(1, 5001, FIN | ACK, ack=1022),  # 7
    ])
    assert streams(ev) == {(CONN, 0): [b"a" * 10 + b"b" * 10]}
    closes = [(e.direction, e.kind, e.packet) for e in ev if isinstance(e, StreamClosed)]
    assert closes == [(0, "fin", 5), (1, "fin", 7)]
    assert tr.open_connections == 0


def test_fin_of_the_acknowledging_side_waits_behind_the_hole():
    """The server's FIN acknowledges the client's last bytes before they are captured (a swap):
    the client's bytes, then the server's FIN; no gap."""
    tr = TcpReassembler()
    ev = run(tr, handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(1, 5001, FIN | ACK, ack=1021),  # 5: acknowledges 1011..1021
        seg(0, 1011, ACK, b"b" * 10, ack=5001),  # 6
        seg(0, 1021, FIN | ACK, ack=5002),  # 7
    ])
    assert not any(isinstance(e, StreamGap) for e in ev)
    order = [(type(e).__name__, e.direction, e.packet) for e in ev if type(e) in (StreamData, StreamClosed)]
    assert order == [("StreamData", 0, 4), ("StreamData", 0, 6), ("StreamClosed", 1, 5), ("StreamClosed", 0, 7)]
    assert tr.open_connections == 0


def test_a_fin_in_the_window_that_never_gets_its_bytes_declares_them_at_the_end():
    tr = TcpReassembler(reorder_packets=2)
    ev = run(tr, handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(1, 5001, ACK, b"r", ack=1021),  # 5: acknowledges 1011..1021, lost
        seg(1, 5002, FIN | ACK, ack=1021),  # 6: queued
        seg(1, 5002, FIN | ACK, ack=1021),  # 7: (retransmitted) the window closes: declared
    ])
    assert streams(ev) == {(CONN, 0): [b"a" * 10, ("gap", 10)], (CONN, 1): [b"r"]}
    order = [(type(e).__name__, e.direction, e.packet) for e in ev if type(e) in (StreamGap, StreamData, StreamClosed)]
    # the gap at packet 5, whose ACK proved it (the lost bytes were sent before it), not at 7
    assert order[-3:] == [("StreamGap", 0, 5), ("StreamData", 1, 5), ("StreamClosed", 1, 6)]


def test_a_rst_in_the_window_comes_after_what_it_overtook():
    """[FIN, RST] captured as [RST, FIN] (the RST acknowledges the FIN): the FIN, then the RST;
    no gap.  A RST whose hole never fills closes the connection once the window ends."""
    tr = TcpReassembler()
    ev = run(tr, handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(1, 5001, RST | ACK, ack=1012),  # 5: acknowledges the client's FIN, not captured yet
        seg(0, 1011, FIN | ACK, ack=5001),  # 6
    ])
    assert not any(isinstance(e, StreamGap) for e in ev)
    assert [(e.direction, e.kind, e.packet) for e in ev if isinstance(e, StreamClosed)] == [(0, "fin", 6), (1, "rst", 5)]
    assert tr.open_connections == 0
    tr = TcpReassembler(reorder_packets=2)
    ev = run(tr, handshake() + [
        seg(0, 1001, ACK, b"a" * 10, ack=5001),  # 4
        seg(1, 5001, ACK, b"bye", ack=1021),  # 5: acknowledges 1011..1021, lost; "bye" queued
        seg(1, 5004, RST | ACK, ack=1021),  # 6: waits in the window
        seg(0, 1021, ACK, ack=5001),  # 7: the window closes
    ])
    tail = [(type(e).__name__, e.direction, e.packet) for e in ev if type(e) in (StreamGap, StreamData, StreamClosed)]
    assert tail[-3:] == [("StreamGap", 0, 5), ("StreamData", 1, 5), ("StreamClosed", 1, 6)]
    assert ev[-1].kind == "rst" and tr.open_connections == 0


def _conversation(n, isn_c=1000, isn_s=5000):
    """A request/response conversation: client segment, then the server's reply acknowledging it."""
    segs = handshake(isn_c, isn_s)
    c, s = isn_c + 1, isn_s + 1
    for i in range(n):
        req = bytes([65 + i % 26]) * (5 + i % 7)
        segs.append(seg(0, c, ACK | PSH, req, ack=s))
        c += len(req)
        rep = bytes([97 + i % 26]) * (3 + i % 5)
        segs.append(seg(1, s, ACK | PSH, rep, ack=c))
        s += len(rep)
    return segs


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 20), swaps=st.data())
def test_adjacent_swaps_change_no_byte_and_no_stamp(n, swaps):
    """Swapping adjacent packets (each keeping its time, as multi-queue NICs do) is never taken for
    loss: the same bytes, no gap, and every byte stamped with the packet that carried it."""
    segs = _conversation(n)
    stamps = [(100.0 + i * 0.001, i + 1) for i in range(len(segs))]
    base = run(TcpReassembler(), segs)
    order = list(range(len(segs)))
    k = 3  # after the handshake
    while k < len(order) - 1:
        if swaps.draw(st.booleans()):
            order[k], order[k + 1] = order[k + 1], order[k]
            k += 2
        else:
            k += 1
    tr = TcpReassembler()
    ev = []
    for j in order:
        ev += tr.feed(segs[j], *stamps[j])
    ev += tr.finish()
    assert not any(isinstance(e, StreamGap) for e in ev)
    assert streams(ev) == streams(base)

    def per_byte(events, d):
        return [(b, e.packet, e.ts) for e in events if isinstance(e, StreamData) and e.direction == d
                for b in e.data]
    assert per_byte(ev, 0) == per_byte(base, 0) and per_byte(ev, 1) == per_byte(base, 1)
