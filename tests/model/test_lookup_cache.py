"""The remembered look-ups of the frame path (issue 41, the eighth round): the tracker's connection by
id (``ConnectionRules.frame_connection``), a connection's session by channel (``Connection.session_on``)
and a session's link by handle (``Session.link_on``) each keep the last answer, which every change of
the dict behind it clears (``put_connection`` / ``drop_connection``, ``map_channel`` /
``unmap_channel``, ``map_handle`` / ``unmap_handle``: the one way each dict changes).

The oracle is the dict itself: after every event, each remembered answer must be what the dict holds
for its key now (``check_caches``), on hand-built streams that change the dicts under a frame run (a
frame after an end, a detach and a close, a channel and a handle number used again, a new connection
on the same addresses) and on every bundled sample; and what the frames are counted to is checked
against the stream as written (which session and link each transfer was sent on), not our own output.
"""

from __future__ import annotations

import glob
import os

import pytest

from amqp_dissect.model.entities import Connection
from amqp_dissect.model.tracker import StateTracker
from amqp_dissect.events import StreamOpened

from eventkeys import analyze_file
from test_state import CLIENT, SERVER, Script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "**", "*.pcap"), recursive=True))


def check_caches(t) -> int:
    """Every remembered answer of tracker ``t`` is its dict's answer now; returns how many were held."""
    held = 0
    cr = t.connection_rules
    if cr._cid is not None:
        assert t.connections.get(cr._cid) is cr._cconn
        assert type(cr._cconn) is Connection
        held += 1
    for c in t.connections.values():
        if type(c) is not Connection:
            continue
        for d, (ck, cs) in enumerate(((c._ck0, c._cs0), (c._ck1, c._cs1))):
            if ck == -1:
                assert cs is None
            else:
                assert cs is not None and c.chan[d].get(ck) is cs
                held += 1
        for s in c.sessions:
            for d, (hk, hl) in enumerate(((s._hk0, s._hl0), (s._hk1, s._hl1))):
                if hk is None:
                    assert hl is None
                else:
                    assert hl is not None and s.handles[d].get(hk) is hl
                    held += 1
    return held


class Checked(StateTracker):
    """A tracker that checks its remembered look-ups after every event."""

    def __init__(self):
        super().__init__()
        self.held = 0

    def feed(self, event) -> None:
        super().feed(event)
        self.held += check_caches(self)


def _link(t, name):
    (link,) = [x for c in t.connections.values() for x in c.links if x.name == name]
    return link


def _link_a_sending():
    """A script on the checked tracker: open, begin, link "A" attached with credit, delivery 0 sent."""
    s = Script(tracker=Checked)
    s.open_both()
    s.begin_both()
    s.attach_sender(name="A")
    s.flow(1, dc=0, credit=10)
    s.transfer(did=0)
    return s


def test_a_channel_used_again_after_end_finds_the_new_session():
    s = _link_a_sending()
    s.transfer(did=1)
    s.frame(0, "end")
    s.frame(1, "end")
    s.flow(1, dc=2, credit=10)  # a frame after the end, on the ended session's channel
    s.begin_both(noid=(5, 5))  # channel 0 again: another session
    s.attach_sender(name="B")
    s.flow(1, dc=0, credit=10)
    s.transfer(did=5)
    t = s.done()
    c = next(iter(t.connections.values()))
    assert len(c.sessions) == 2
    first, second = c.sessions
    assert c.chan[0][0] is second and c.chan[1][0] is second
    assert (first.transfers0, second.transfers0) == (2, 1)
    assert _link(t, "A").transfers == 2 and _link(t, "B").transfers == 1
    assert _link(t, "A").session is first and _link(t, "B").session is second
    assert t.held > 0


def test_a_handle_used_again_after_detach_finds_the_new_link():
    s = Script(tracker=Checked)
    s.open_both()
    s.begin_both()
    s.attach_sender(name="A", handle=0)
    s.flow(1, handle=0, dc=0, credit=10)
    s.transfer(handle=0, did=0)
    s.frame(0, "detach", handle=s_uint(0), closed=True)
    s.frame(1, "detach", handle=s_uint(0), closed=True)
    s.attach_sender(name="B", handle=0)  # handle 0 again: another link
    s.flow(1, handle=0, dc=0, credit=10)
    s.transfer(handle=0, did=1)
    s.transfer(handle=0, did=2)
    t = s.done()
    assert _link(t, "A").transfers == 1 and _link(t, "B").transfers == 2
    sess = next(iter(t.connections.values())).sessions[0]
    assert sess.handles[0][0] is _link(t, "B") and sess.handles[1][0] is _link(t, "B")


def test_two_sessions_and_links_interleaved():
    s = Script(tracker=Checked)
    s.open_both()
    s.begin_both(ch_client=3, ch_server=7)
    s.begin_both(ch_client=7, ch_server=3)
    s.attach_sender(name="A", handle=0, ch=(3, 7), address="qa")
    s.attach_sender(name="A2", handle=1, ch=(3, 7), address="qa2")
    s.attach_sender(name="B", handle=0, ch=(7, 3), address="qb")
    s.flow(1, ch=7, handle=0, dc=0, credit=10)
    s.flow(1, ch=7, handle=1, dc=0, credit=10)
    s.flow(1, ch=3, handle=0, dc=0, credit=10)
    sent = {"A": 0, "A2": 0, "B": 0}
    did = {3: 0, 7: 0}
    for name, ch, h in [("A", 3, 0), ("B", 7, 0), ("A", 3, 0), ("A2", 3, 1), ("A2", 3, 1), ("B", 7, 0), ("A", 3, 0)]:
        s.transfer(ch=ch, handle=h, did=did[ch])
        did[ch] += 1
        sent[name] += 1
    t = s.done()
    assert {n: _link(t, n).transfers for n in sent} == sent
    c = next(iter(t.connections.values()))
    assert [x.transfers0 for x in c.sessions] == [did[3], did[7]]


def test_a_frame_after_close_and_a_new_connection_on_the_same_addresses():
    s = _link_a_sending()
    s.frame(0, "close")
    s.frame(1, "close")
    s.transfer(did=1)  # a frame after the close: still this connection's session and link
    t = s.a
    first = t.connections["c1"]
    # the next connection of the same client port: another id from the framing layer, the same addresses
    s.conn = "c1#2"
    t.feed(StreamOpened("c1#2", CLIENT, SERVER, s.t + 1, s.packet + 1, True))
    s.packet += 1
    s.header(0)
    s.header(1)
    s.open_both()
    s.begin_both()
    s.attach_sender(name="A")
    s.flow(1, dc=0, credit=10)
    s.transfer(did=0)
    s.transfer(did=1)
    s.transfer(did=2)
    s.done()
    second = t.connections["c1#2"]
    assert first is not second and type(second) is Connection
    assert first.sessions[0].transfers0 == 2 and second.sessions[0].transfers0 == 3
    assert first.links[0].transfers == 2 and second.links[0].transfers == 3
    assert t.held > 0


def s_uint(n):
    from amqp_dissect.amqp.codec import UInt
    return UInt(n)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_sample_keeps_the_caches_true(path):
    t = analyze_file(path, Checked())
    assert not t.internal_errors
    # (what each frame was counted to: the dicts' answers, checked after every event above)
    if any(type(c) is Connection and c.sessions for c in t.connections.values()):
        assert t.held > 0
