"""The frames of one packet set their connection's last time and packet once (issue 41, the ninth round).

``StateTracker._frame_conn`` skips ``ConnectionBase._seen`` when the call would change nothing: the
same connection as the last call, given the same time and packet objects, its two fields still what
that call left and no value kept aside.  The oracle is the event itself: after every frame, its
connection's ``last_ts`` and ``last_packet`` are the frame's time and packet, whatever wrote the fields
between two frames of one packet (the properties, a value of more than 64 bits kept aside, a frame of
another connection).
"""

from __future__ import annotations

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.model.tracker import StateTracker

from test_state import CLIENT, SERVER, Script

# (objects the tests hand to several frames: neither is one of the interpreter's cached small ints)
TS = 1_700_000_000_123_456_789
PACKET = 100_000


def _frame(conn, d, ts, packet):
    """A heartbeat of peer ``d`` on ``conn`` with these time and packet objects."""
    src, dst = (CLIENT, SERVER) if d == 0 else (SERVER, CLIENT)
    f = Frame(conn, d, src, dst, packet, ts, packet, 8, 2, 0, 0)
    f.size = 8
    return f


def _open(conn="c1"):
    s = Script(tracker=StateTracker, conn=conn)
    s.open_both()
    return s


def _times(c):
    return c.last_ts, c.last_packet


def test_the_frames_of_one_packet_leave_its_time_and_packet():
    s = _open()
    t = s.a
    c = t.connections["c1"]
    ts, packet = TS + 0, PACKET + 0
    for d in (0, 1, 0, 0):
        t.feed(_frame("c1", d, ts, packet))
        assert _times(c) == (ts, packet)
    assert t.last_ts == ts


def test_a_write_between_two_frames_of_one_packet_is_overwritten():
    s = _open()
    t = s.a
    c = t.connections["c1"]
    ts, packet = TS + 1, PACKET + 1
    t.feed(_frame("c1", 0, ts, packet))
    c.last_ts = 5  # (another writer of the fields, through the properties)
    t.feed(_frame("c1", 0, ts, packet))
    assert _times(c) == (ts, packet)
    c.last_packet = 6
    t.feed(_frame("c1", 1, ts, packet))
    assert _times(c) == (ts, packet)
    c.last_ts = None  # (None: NO_INT in the field)
    c.last_packet = None
    t.feed(_frame("c1", 1, ts, packet))
    assert _times(c) == (ts, packet)


def test_a_value_kept_aside_between_two_frames_of_one_packet():
    s = _open()
    t = s.a
    c = t.connections["c1"]
    ts, packet = TS + 2, PACKET + 2
    t.feed(_frame("c1", 0, ts, packet))
    c.last_ts = 2**70  # (more than 64 bits: kept in _big)
    t.feed(_frame("c1", 0, ts, packet))
    assert _times(c) == (ts, packet)
    c.seq = 2**80  # (another field kept aside: the connection's times still set)
    t.feed(_frame("c1", 1, ts, packet))
    assert _times(c) == (ts, packet) and c.seq == 2**80
    big_ts = 2**65 + 3  # (a frame time beyond 64 bits, twice: kept aside and read back both times)
    t.feed(_frame("c1", 0, big_ts, packet))
    assert _times(c) == (big_ts, packet)
    t.feed(_frame("c1", 1, big_ts, packet))
    assert _times(c) == (big_ts, packet)
    t.feed(_frame("c1", 1, ts + 7, packet + 1))
    assert _times(c) == (ts + 7, packet + 1)


def test_two_connections_given_the_same_objects():
    s1 = _open("c1")
    t = s1.a
    s2 = Script(tracker=lambda: t, conn="c2")
    s2.open_both()
    c1, c2 = t.connections["c1"], t.connections["c2"]
    ts, packet = TS + 3, PACKET + 3
    t.feed(_frame("c1", 0, ts, packet))
    c2_before = _times(c2)
    t.feed(_frame("c2", 0, ts + 1, packet + 1))
    assert _times(c1) == (ts, packet) and _times(c2) == (ts + 1, packet + 1) != c2_before
    c1.last_ts = 9
    t.feed(_frame("c1", 1, ts, packet))  # (the last call was c2's: c1's fields set again)
    assert _times(c1) == (ts, packet) and _times(c2) == (ts + 1, packet + 1)
