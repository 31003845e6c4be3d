"""A session's delivery table (:class:`DeliveryTable`) against a plain dict of id -> latest delivery:
the run of consecutive ids and the ``by_id`` outside it must answer every question as the dict does,
whatever order the ids come in (in order, with gaps, far ahead, reused, backwards, wrapping past
2**32), and its memory follows the deliveries held, not the ids seen."""

from hypothesis import given, settings, strategies as st

from amqp_dissect.model import deliveries
from amqp_dissect.model.deliveries import DeliveryTable
from amqp_dissect.model import delivery
from amqp_dissect.model.delivery import LiveDeliveries, DeliveryRecord
from amqp_dissect.model.serial import SERIAL_MASK, serial_add


def _dlv(did, seq):
    x = DeliveryRecord("L", "S", 0, did, b"t", 1000 + seq, seq)
    x.seq = seq
    return x


class _Oracle:
    """What the table must answer: the latest delivery of each id."""

    def __init__(self):
        self.by_id = {}

    def add(self, did, x):
        self.by_id[did] = x

    def forget(self, x):
        if self.by_id.get(x.delivery_id) is x:
            del self.by_id[x.delivery_id]

    def ids(self, first, n):
        return [(first + i) & SERIAL_MASK for i in range(n)]

    def in_range(self, first, n):
        """In id order: the range's own sequence (a range is shorter than 2**31)."""
        return [self.by_id[i] for i in self.ids(first, n) if i in self.by_id]


# one step: ("next", gap) ids the sender numbers (gap 1: the usual case), ("back", k) an id k below the
# latest, ("far", k) an id k ahead, ("forget", i) fold the i-th held delivery, ("range", a, n) a
# disposition's range starting a ids below the latest
_STEP = st.one_of(
    st.tuples(st.just("next"), st.sampled_from([1, 1, 1, 1, 2, 3, 70])),
    st.tuples(st.just("back"), st.integers(0, 300)),
    st.tuples(st.just("far"), st.sampled_from([65, 200, 100_000, 2**31 - 5])),
    st.tuples(st.just("forget"), st.integers(0, 10**6)),
    st.tuples(st.just("forget"), st.integers(0, 10**6)),
    st.tuples(st.just("range"), st.integers(0, 400), st.integers(1, 600)),
)


def _check(table, oracle):
    assert len(table) == len(oracle.by_id)
    for did, x in oracle.by_id.items():
        assert table.get(did) is x
    assert all(table.run[i] is None for i in range(table.run_head))
    assert table.run_n == sum(1 for x in table.run if x is not None)
    in_run = {x.delivery_id for x in table.run if x is not None}
    assert not in_run & set(table.by_id)  # (an id is in one of the two)


@settings(max_examples=300, deadline=None)
@given(start=st.sampled_from([0, 5, 2**32 - 40, 2**31 - 3]), steps=st.lists(_STEP, max_size=160),
       spill=st.sampled_from([4096, 8]), trim=st.sampled_from([256, 2]))
def test_the_table_answers_as_a_dict_of_the_latest_delivery_by_id(start, steps, spill, trim):
    old = deliveries.RUN_SPILL, deliveries.RUN_TRIM
    deliveries.RUN_SPILL, deliveries.RUN_TRIM = spill, trim
    try:
        table, oracle = DeliveryTable(None, 0), _Oracle()
        held = []
        last = None
        seq = 0
        for step in steps:
            kind = step[0]
            if kind in ("next", "back", "far"):
                if last is None:
                    did = start
                elif kind == "next":
                    did = serial_add(last, step[1])
                elif kind == "back":
                    did = (last - step[1]) & SERIAL_MASK
                else:
                    did = serial_add(last, step[1])
                seq += 1
                x = _dlv(did, seq)
                table.add(did, x)
                oracle.add(did, x)
                held.append(x)
                last = did
                assert table.next_id == serial_add(did, 1)
            elif kind == "forget" and held:
                x = held.pop(step[1] % len(held))
                table.forget(x)
                oracle.forget(x)
            elif kind == "range" and last is not None:
                first = (last - step[1]) & SERIAL_MASK
                n = step[2]
                want = oracle.in_range(first, n)
                assert table.in_range(first, n) == want
                assert table.range_count(first, n) >= len(want)  # (at most: folded ones may count)
                if n <= 16:
                    assert table.find_each(first, n) == want
            _check(table, oracle)
    finally:
        deliveries.RUN_SPILL, deliveries.RUN_TRIM = old


def test_ids_in_order_are_list_slots_and_the_folded_head_is_given_back():
    table = DeliveryTable(None, 0)
    for i in range(100_000):
        x = _dlv(i, i)
        table.add(i, x)
        if i >= 10:  # settled ten deliveries behind, in order
            table.forget(table.get(i - 10))
        assert len(table.run) <= 2 * deliveries.RUN_TRIM + 12
    assert len(table) == 10 and not table.by_id and table.order is None


def test_an_old_delivery_never_settled_does_not_hold_the_ids_after_it():
    # the first delivery stays; the 200,000 after it are folded one by one: the run's empty slots would
    # grow without end, so its deliveries move to by_id and the run starts again
    table = DeliveryTable(None, 0)
    stuck = _dlv(0, 0)
    table.add(0, stuck)
    longest = 0
    for i in range(1, 200_000):
        x = _dlv(i, i)
        table.add(i, x)
        table.forget(x)
        longest = max(longest, len(table.run))
    assert longest <= deliveries.RUN_SPILL + 4 * 2 + 64 + 2
    assert len(table) == 1 and table.get(0) is stuck
    assert table.in_range(0, 300_000) == [stuck] and table.find_each(0, 1) == [stuck]
    table.forget(stuck)
    assert len(table) == 0 and not table.by_id and table.run == []


def test_an_id_held_outside_the_run_moves_into_it_when_the_run_starts_there():
    table = DeliveryTable(None, 0)
    a, b, far = _dlv(0, 1), _dlv(1, 2), _dlv(1000, 3)
    table.add(0, a)
    table.add(1, b)
    table.add(1000, far)  # (beyond the run: held by id)
    assert table.by_id == {1000: far}
    table.forget(a)
    table.forget(b)  # the run is empty: the next delivery starts it again
    again = _dlv(1000, 4)  # id 1000 used again: the latest delivery of that id
    table.add(1000, again)
    assert len(table) == 1 and table.get(1000) is again and not table.by_id
    assert table.in_range(990, 20) == [again]
    table.forget(far)  # (no longer the delivery of its id: nothing to forget)
    assert len(table) == 1
    table.forget(again)
    assert len(table) == 0


# --------------------------------------------------------------------------- a link's live deliveries


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.one_of(st.just(("add",)), st.tuples(st.just("drop"), st.integers(0, 10**6)),
                              st.tuples(st.just("again"), st.integers(0, 10**6))), max_size=300),
       trim=st.sampled_from([256, 1]), pack=st.sampled_from([4096, 0]))
def test_a_links_live_deliveries_are_those_added_and_not_dropped_in_their_order(ops, trim, pack):
    old = delivery.LIVE_TRIM, delivery.LIVE_PACK
    delivery.LIVE_TRIM, delivery.LIVE_PACK = trim, pack
    try:
        live, want, gone = LiveDeliveries(), [], []
        seq = 0
        for op in ops:
            if op[0] == "add":
                seq += 1
                x = _dlv(seq, seq)
                live.add(x)
                want.append(x)
            elif op[0] == "drop" and want:
                x = want.pop(op[1] % len(want))
                assert live.drop(x)
                gone.append(x)
            elif op[0] == "again" and gone:  # (dropped already, or never added: not there)
                assert not live.drop(gone[op[1] % len(gone)])
            assert live.values() == want and list(live) == want and len(live) == len(want)
            assert bool(live) == bool(want)
    finally:
        delivery.LIVE_TRIM, delivery.LIVE_PACK = old


def test_a_links_live_deliveries_stay_as_small_as_what_they_hold():
    # one delivery never folded holds the head; the 200,000 after it are folded one by one (slots of
    # their own: without packing the list would keep every one)
    live = LiveDeliveries()
    stuck = _dlv(0, 0)
    live.add(stuck)
    longest = 0
    for i in range(1, 200_000):
        x = _dlv(i, i)
        live.add(x)
        assert live.drop(x)
        longest = max(longest, len(live.slots))
    assert longest <= delivery.LIVE_PACK + 4 * 2 + 64 + 2
    assert live.values() == [stuck] and live.drop(stuck) and not live and live.slots == []
    # folded in order: the folded head is given back
    for i in range(100_000):
        live.add(_dlv(i, i))
        if i >= 10:
            assert live.drop(live.values()[0])
        assert len(live.slots) <= 2 * delivery.LIVE_TRIM + 12
