"""A connection's frame counts per peer and performative (``Connection.frame_counts``), kept as a run of
the last name in a C count and added to the dict when read.

Oracles: ``collections.Counter`` over the same names (and the order of their first frames, the
dict's order before the runs), and on samples the frames the Dissector produced, counted apart
from the tracker.
"""

from __future__ import annotations

import os
import random
from collections import Counter

from amqp_dissect.amqp.framing import FRAME_SASL, Frame
from amqp_dissect.model.entities import Connection, ConnectionBase
from amqp_dissect.model.tracker import StateTracker
from eventkeys import run_pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")


def _conn():
    c = Connection(ConnectionBase(("a", 1, "b", 2), "a:1", "b:2", True))
    c.framed()  # (what the tracker does at a connection's first frame)
    return c


def _first_order(names):
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def test_runs_interleaved_with_reads_count_as_a_counter_in_first_frame_order():
    rnd = random.Random(24)
    names = ["transfer", "disposition", "flow", "empty", "(undecoded)", "attach"]
    for _ in range(200):
        c = _conn()
        sent = ([], [])
        for _ in range(rnd.randrange(0, 60)):
            d = rnd.randrange(2)
            # runs of one name, as proton's batches make them, and equal names that are other objects
            key = rnd.choice(names[:2]) if rnd.random() < 0.7 else rnd.choice(names)
            if rnd.random() < 0.2:
                key = "".join(list(key))  # (an equal string, not the same object)
            c.count_frame(d, key)
            sent[d].append(key)
            if rnd.random() < 0.1:  # a reader in the middle of the capture (-j, a live report)
                for e in (0, 1):
                    assert c.frame_counts[e] == Counter(sent[e])
        for e in (0, 1):
            fc = c.frame_counts[e]
            assert fc == Counter(sent[e])
            assert list(fc) == _first_order(sent[e])
            assert c.frame_counts[e] == fc  # (reading twice adds nothing)


def _key(f):
    if f.pname is not None:
        return f.pname
    return "empty" if f.type != FRAME_SASL and f.size == f.doff * 4 else "(undecoded)"


def test_frame_counts_are_the_frames_the_dissector_produced():
    for name in ("outcomes.pcap", "credit_one.pcap", "multiframe_credit_one.pcap", "heartbeat.pcap",
                 "sasl_auth_failure.pcap", "multi_session.pcap"):
        with open(os.path.join(SAMPLES, name), "rb") as f:
            events = run_pipeline(f.read())
        want: dict = {}
        for ev in events:
            if type(ev) is Frame:
                want.setdefault(ev.conn, (Counter(), Counter()))[ev.direction][_key(ev)] += 1
        t = StateTracker()
        for ev in events:
            t.feed(ev)
        t.finish()
        got = {cid: c for cid, c in t.connections.items() if hasattr(c, "frame_counts")}
        assert want, name
        assert set(got) >= set(want), name
        for cid, (c0, c1) in want.items():
            assert got[cid].frame_counts == (c0, c1), (name, cid)
