"""The fold's C shortcuts against Python's own arithmetic (both modes: compiled, the C paths;
AMQP_DISSECT_PURE_PYTHON=1, the Python ones)."""

import itertools
import os

from eventkeys import analyze_file

from amqp_dissect.model.stats import seconds_between
from amqp_dissect.results.analytics import Analyzer, _before, _table_order
from amqp_dissect.times import NS

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples")

# integer-nanosecond times around every boundary of the C path: 2**53 (a double's exact integers),
# 2**62 (the subtraction's range), 2**63 and 2**64 (beyond a C integer), negatives, a real capture time
EDGES = [0, 1, -1, 999_999_999, 1_000_000_001, 1_795_332_659_930_830_002,
         2**53 - 1, 2**53, 2**53 + 1, -(2**53), -(2**53) - 1,
         2**62 - 1, 2**62, -(2**62), -(2**62) - 1, 2**63 - 1, 2**63, -(2**63), 2**64 + 7, -(2**70)]


def test_seconds_is_pythons_true_division():
    base = 1_795_332_659_930_830_002
    pairs = list(itertools.product(EDGES, repeat=2))
    pairs += [(base + d, base) for d in (0, 1, 796_079, 123_456_789_012, 2**53 - 1, 2**53, 2**53 + 3, -5)]
    for t, t0 in pairs:
        got = seconds_between(t, t0)
        want = (t - t0) / NS
        assert type(got) is float
        assert got == want and str(got) == str(want), (t, t0, got, want)


def _folded(paths):
    """Every delivery object folded while analysing ``paths`` (several connections, links, ids)."""
    out = []
    for path in paths:
        analyze_file(path, Analyzer(rows=False, fold_out=out))
    return out


def test_before_is_tuple_order():
    folded = _folded([os.path.join(SAMPLES, n) for n in ("multi_session.pcap", "outcomes.pcap", "presettled.pcap")])
    assert len(folded) > 20
    orders = sorted({_table_order(d) for d in folded})
    assert len({o[1] for o in orders}) > 1  # (several links; the probes below differ at each position)
    probes = orders + [(o[0], o[1], o[2] + 1) for o in orders] + [(o[0], o[1] + 1, -1) for o in orders] + \
        [(o[0] + 1, -1, -1) for o in orders] + [(o[0] - 1, 99, 99) for o in orders]
    for d in folded:
        mine = _table_order(d)
        assert not _before(d, ())  # (() before any cut is set: nothing ranks before it)
        for o in probes:
            assert bool(_before(d, o)) == (mine < o), (mine, o)


def test_outcome_counts_and_latencies_are_the_plain_counts():
    """DeliveryStats counts a run of one outcome in a C integer and writes it into ``outcomes`` when
    read, and reuses the settlement latency for an outcome given by the settling frame: read at
    any point and copied, it holds what counting every delivery and dividing every time gives."""
    import random

    from amqp_dissect.model.delivery import DeliveryRecord
    from amqp_dissect.model.stats import TERMINAL_OUTCOMES_ORDER, DeliveryStats

    rng = random.Random(7)
    names = list(TERMINAL_OUTCOMES_ORDER) + ["received", None]  # (a non-terminal name is not counted)
    st = DeliveryStats()
    want = dict.fromkeys(TERMINAL_OUTCOMES_ORDER, 0)
    lat, olat = [], []
    nones = 0
    t0 = 1_795_332_659_930_830_002
    for i in range(3000):
        o = rng.choice(names[:2] * 6 + names)  # long runs of accepted and rejected, the rest mixed in
        if o is not None and rng.random() < 0.2:
            o = "".join(list(o))  # an equal name that is another object
        d = DeliveryRecord(None, None, 0, i, b"t", t0 + i, i)
        d.outcome = o
        settle = t0 + i + rng.randrange(1, 10**6)
        if rng.random() < 0.9:
            d.settle("receiver", settle, i + 1)
            lat.append((settle - (t0 + i)) / NS)
        if o is not None:
            r = rng.random()
            if r < 0.5 and d.settled is not None:
                d.outcome_ts = d.settled[0]  # the settling frame's own time object
            elif r < 0.8:
                d.outcome_ts = int(str(settle + rng.randrange(0, 3)))  # an equal or later time, another object
            if d.outcome_ts is not None:
                olat.append((d.outcome_ts - (t0 + i)) / NS)
        if o in want:
            want[o] += 1
        nones += o is None
        st.add(d)
        if rng.random() < 0.01:
            assert st.outcomes == want  # read in the middle of a run
            assert st.copy().outcomes == want
    assert st.outcomes == want and list(st.outcomes) == list(TERMINAL_OUTCOMES_ORDER)
    c = st.copy()
    c.outcomes["accepted"] += 5  # a copy's dict is its own, and the dict read is the one counted into
    assert st.outcomes == want and c.outcomes["accepted"] == want["accepted"] + 5
    assert st.deliveries == 3000 and st.no_outcome == nones
    assert sorted(st.latency.values) == sorted(lat) and len(st.latency) == len(lat)
    assert sorted(st.outcome_latency.values) == sorted(olat) and len(st.outcome_latency) == len(olat)


def test_latency_seconds_reads_shared_times_by_identity():
    """latency_seconds keeps the last time it read by identity (NsCache): the same objects again,
    equal values that are other objects, times beyond the C path and non-integers in between all give
    Python's own (t - t0) / NS; a fresh cache says nothing of None or a bool."""
    from amqp_dissect.model.stats import NsCache, latency_seconds

    fresh = NsCache()
    assert not fresh.read(None) and not fresh.read(True) and not fresh.read(1.5)
    assert not fresh.read(2**62) and not fresh.read(-(2**62) - 1)
    assert fresh.read(2**62 - 1) and fresh.ns == 2**62 - 1
    assert fresh.read(-(2**62)) and fresh.ns == -(2**62)
    assert not fresh.read(None)  # (after a read: still no)
    base = 1_795_332_659_930_830_002
    times = EDGES + [base + k for k in (0, 1, 796_079, 2**53 - 1, 2**53, 2**53 + 3, -5)] + [0.25, 7.0, True]
    seq = []
    for t, t0 in itertools.product(times, repeat=2):
        seq += [(t, t0), (t, t0)]  # the same objects twice in a row
        if type(t) is int and type(t0) is int:
            seq.append((int(str(t)), t0))  # an equal time, another object
            seq.append((t, int(str(t0))))
    for t, t0 in seq:
        got = latency_seconds(t, t0)
        want = (t - t0) / NS
        assert type(got) is float
        assert got == want and str(got) == str(want), (t, t0, got, want)


def test_fold_watch_intervals_are_the_plain_merge():
    """FoldWatch.fold merges a link's first-transfer times into intervals on C integers (each time
    read once, NsCache); times beyond 62 bits and equal times that are other objects among them give
    the intervals the rule gives on Python's integers: a time within MERGE of the last interval
    widens it, another starts a new one."""
    import random

    from amqp_dissect.model.delivery import DeliveryRecord
    from amqp_dissect.results.diagnoses import INTERVALS_MAX, MERGE, FoldWatch

    rng = random.Random(11)
    links = [object(), object()]
    for big in (0, 2**62 - 3 * MERGE, 2**63, -(2**62) - MERGE):
        watch = FoldWatch(False)
        want = {link: [] for link in links}
        t = big + 10**18 if big == 0 else big
        for i in range(4000):
            link = links[0] if rng.random() < 0.8 else links[1]
            t += rng.choice([0, 0, 1, 1000, MERGE // 2, MERGE, MERGE + 1, 3 * MERGE, -MERGE, -2 * MERGE])
            ft = t if rng.random() < 0.7 else int(str(t))  # the same object or an equal one
            d = DeliveryRecord(link, None, 0, i, b"t", ft, i)
            watch.fold(d)
            iv = want[link]
            if iv and iv[-1][0] - MERGE <= ft <= iv[-1][1] + MERGE:
                iv[-1][0] = min(iv[-1][0], ft)
                iv[-1][1] = max(iv[-1][1], ft)
            elif len(iv) < INTERVALS_MAX:
                iv.append([ft, ft])
        for link in links:
            got = watch.activity.get(link, [])
            assert [list(x) for x in got] == want[link][:len(got)], big
            assert len(got) == len(want[link]) or link in watch.full
