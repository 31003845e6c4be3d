"""Issue 40: what a connection without frames holds, made smaller without changing what it says.

* A connection's times, packet numbers and ordinal are C integers in the compiled build; every value
  given is read back as it was given (the oracle: the value itself), including those that are not a
  64-bit integer (None, an ordinal of more than 64 bits as ``-j N``'s workers make, another type).
* The connections the TCP layer notes one-way at the same time share one loss record; a later write to
  one of them (a gap, a cut of the snap length) goes to a copy of its own, the others' unchanged (the
  oracle: a record of its own given the same calls, and the records before the write).
"""

from __future__ import annotations

import pickle

import pytest

from amqp_dissect.model.entities import ConnectionBase, ConnectionHeaders
from amqp_dissect.model.loss import LossRecord, one_way_record

FIELDS = ("first_ts", "first_packet", "last_ts", "last_packet", "seq")
START = {"first_ts": None, "first_packet": None, "last_ts": None, "last_packet": None, "seq": 0}
VALUES = [None, 0, 1, -1, 1_700_000_000_123_456_789, 2**63 - 1, -(2**63) + 1, -(2**63), 2**63, 2**64 + 5,
          -(2**70), (1 << 100) + 3, True, 1.5, "x"]


@pytest.mark.parametrize("field", FIELDS)
def test_every_value_reads_back_as_given(field):
    c = ConnectionBase("a:1-b:2", "a:1", "b:2", True)
    assert {f: getattr(c, f) for f in FIELDS} == START
    for v in VALUES:
        setattr(c, field, v)
        got = getattr(c, field)
        assert got == v and type(got) is type(v), (field, v, got)
        assert {f: getattr(c, f) for f in FIELDS if f != field} == {f: v for f, v in START.items() if f != field}
    setattr(c, field, 7)
    assert getattr(c, field) == 7


def test_the_fields_are_independent_and_survive_a_copy_and_a_pickle():
    c = ConnectionBase("a:1-b:2", "a:1", "b:2", True)
    want = {"first_ts": 2**64, "first_packet": 3, "last_ts": None, "last_packet": 2**63, "seq": (1 << 80) + 1}
    for k, v in want.items():
        setattr(c, k, v)
    assert {k: getattr(c, k) for k in FIELDS} == want
    h = ConnectionHeaders(c)
    assert {k: getattr(h, k) for k in FIELDS} == want
    h.last_ts = 5
    assert c.last_ts is None and h.last_ts == 5  # (the copy's values are its own)
    back = pickle.loads(pickle.dumps(h))
    assert {k: getattr(back, k) for k in FIELDS} == {**want, "last_ts": 5}
    for k in FIELDS:  # (back to C integers: nothing left of the big values)
        setattr(back, k, 1)
    assert [getattr(back, k) for k in FIELDS] == [1] * 5


def _own(d, ts):
    """What the one-direction note made before issue 40's shared record: a record of its own."""
    rec = LossRecord()
    rec.note(d, 0, 0, ts, False)
    rec.note_absent(d)
    return rec


def _state(rec):
    return (list(rec.gaps), list(rec.missing), list(rec.skipped), list(rec.last), list(rec.before),
            list(rec.absent), list(rec.cut), list(rec.hidden), rec.snap_length, list(rec.gap_last))


@pytest.mark.parametrize("d", [0, 1])
def test_one_way_records_at_the_same_time_are_one_and_say_what_a_record_of_its_own_says(d):
    ts = 1_700_000_000_000_000_000 + 12345
    a, b = one_way_record(d, ts), one_way_record(d, ts)
    assert a is b and a.shared
    assert _state(a) == _state(_own(d, ts))
    for e in (0, 1):
        assert a.lost(e) == _own(d, ts).lost(e)
        assert a.lost_after(e, ts - 1) == _own(d, ts).lost_after(e, ts - 1)
        assert a.missing_how(e) == _own(d, ts).missing_how(e)
    later = one_way_record(d, ts + 1)  # (another time: another record)
    assert later is not a and _state(later) == _state(_own(d, ts + 1))


def test_a_write_to_a_shared_record_goes_to_a_copy_of_its_own():
    ts = 1_700_000_000_000_000_000 + 999
    conns = [ConnectionBase(f"c{i}", f"a:{i}", "b:2", True) for i in range(3)]
    for c in conns:
        c.loss = one_way_record(1, ts)
    shared = conns[0].loss
    before = _state(shared)
    conns[1].note_loss(0, 100, 0, ts + 7)  # a gap of the client's bytes
    conns[2].own_loss().note_cut(0, 40, True, 96, ts + 8)  # a cut of the snap length
    assert conns[0].loss is shared and _state(shared) == before
    assert conns[1].loss is not shared and not conns[1].loss.shared
    want = _own(1, ts)
    want.note(0, 100, 0, ts + 7, False)
    assert _state(conns[1].loss) == _state(want)
    want = _own(1, ts)
    want.note_cut(0, 40, True, 96, ts + 8)
    assert _state(conns[2].loss) == _state(want)
    assert conns[1].own_loss() is conns[1].loss  # (its own from then on)
