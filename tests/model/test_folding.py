"""Folding settled deliveries into aggregates changes no result, and keeps memory flat.

The oracle is the same analysis with folding switched off (``fold_lag=None``: every delivery
stays an object to the end, as before folding existed).
"""

from __future__ import annotations

import glob
import os
import tracemalloc

import pytest
from proton import Message

from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.results.report import build_report
from pcapbuild import TcpConversation
from protonpump import Pump

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
TABLES = ("connection_rows", "session_rows", "link_rows", "delivery_rows", "stall_rows", "error_rows",
          "violation_rows", "transaction_rows")
# a delivery settled by one peer and later by the other: folded after the first settlement, the
# late one is counted on the session (late_dispositions) instead of on the delivery's row
SECOND_SETTLEMENT = ("settled_by", "sender_settled_time", "receiver_settled_time", "dispositions_sender",
                     "dispositions_receiver")


def _events(path):
    d = Dissector()
    with open(path, "rb") as f:
        for rec in open_capture(f):
            yield from d.feed(rec)
    yield from d.finish()


def _analyze(events, fold_lag, rows=True):
    an = Analyzer(rows=rows)
    an.fold_lag = fold_lag
    for ev in events:
        an.feed(ev)
    an.finish()
    return an


@pytest.mark.parametrize("path", SAMPLES, ids=os.path.basename)
@pytest.mark.parametrize("lag", [0, 3])
def test_folding_changes_no_table(path, lag):
    events = list(_events(path))
    ref = _analyze(events, None)
    got = _analyze(events, lag)
    for method in TABLES:
        a, b = getattr(ref, method)(), getattr(got, method)()
        if method == "delivery_rows":
            a = [{k: v for k, v in r.items() if k not in SECOND_SETTLEMENT} for r in a]
            b = [{k: v for k, v in r.items() if k not in SECOND_SETTLEMENT} for r in b]
        if method == "session_rows":
            for r in a + b:
                r.pop("late_dispositions", None)
        assert a == b, (os.path.basename(path), method)
    for by in ("link", "address", "connection"):
        for metric in ("settlement", "outcome"):
            assert ref.latency_summary(by, metric) == got.latency_summary(by, metric)
    assert build_report(_analyze(events, lag, rows=False)) == build_report(ref)


def _stream(messages: int, credit: int = 200):
    """Real proton traffic: one sender link, ``messages`` deliveries settled by the receiver."""
    p = Pump(server_credit=credit, server_max_frame=16384)
    snd = p.sender("q")
    p.run()
    for i in range(messages):
        p.send(snd, Message(body=f"m{i}"))
        if i % 50 == 49:
            p.run()
    p.run()
    p.close()
    conv = TcpConversation.from_exchange(p.chunks, client=("10.0.0.1", 40000), server=("10.0.0.2", 5672),
                                         t0=1_700_000_000.0, dt=0.0001, acks=False)
    d = Dissector()
    from amqp_dissect.events import CaptureRecord

    for i, (ts, lt, data) in enumerate(conv.records, 1):
        yield from d.feed(CaptureRecord(i, round(ts * 1_000_000_000), lt, data, len(data)))  # (integer ns)
    yield from d.finish()


def test_settled_deliveries_cost_a_few_bytes_each():
    small = list(_stream(1000))
    big = list(_stream(11000))

    def peak_after(events):
        an = Analyzer(rows=False)
        an.fold_lag = 500  # the default (16384) is larger than these streams
        tracemalloc.start()
        for ev in events:
            an.feed(ev)
        an.finish()
        cur, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        n = an.delivery_totals()["deliveries"]
        return cur, n, an

    m1, n1, _ = peak_after(small)
    m2, n2, an = peak_after(big)
    assert (n1, n2) == (1000, 11000)
    # two float64 latencies per settled delivery, plus the few still inside the fold lag
    per_delivery = (m2 - m1) / (n2 - n1)
    assert per_delivery < 48, per_delivery
    assert sum(len(link.live) for c in an.connections.values() for link in c.links) <= an.fold_lag


# --------------------------------------------------------------------------- latency columns


def _oracle(values):
    """numpy's percentiles and the correctly rounded mean of the plain list of values."""
    import math

    import numpy as np

    xs = np.array(values, dtype=np.float64)
    return {"count": len(values), "p50": float(np.percentile(xs, 50)), "p90": float(np.percentile(xs, 90)),
            "p99": float(np.percentile(xs, 99)), "max": float(xs.max()), "min": float(xs.min()),
            "mean": math.fsum(values) / len(values)}


@pytest.mark.parametrize("distinct", [7, 300, 5000])
def test_latencies_fold_repeated_values_and_percentiles_stay_exact(distinct):
    import random

    from amqp_dissect.model.stats import Latencies
    from amqp_dissect.results.analytics import summarize

    rnd = random.Random(distinct)
    base = 1_795_000_000.0
    # latencies as the tracker makes them: differences of capture times (microseconds) near "now"
    values = []
    for _ in range(20_000):
        t0 = base + rnd.randrange(10**6) / 1e6
        values.append((t0 + rnd.randrange(distinct) / 1e6) - t0)
    lat = Latencies(fold_at=512)
    for v in values:
        lat.append(v)
    assert len(lat) == len(values)
    if distinct * 12 * 4 < len(values):  # values repeat: most are counts of distinct values now
        assert lat.counts and len(lat.values) < len(values) // 2
        assert sum(lat.counts.values()) + len(lat.values) == len(values)
    else:  # mostly distinct: they stay in the array
        assert not lat.counts and len(lat.values) == len(values)
    assert summarize(lat) == _oracle(values)
    # copies and merged groups read the same
    both = lat.copy()
    both.extend(lat)
    assert summarize(both) == _oracle(values + values)


@pytest.mark.parametrize("seed", range(6))
def test_latencies_hashed_fold_counts_as_a_dict_does(seed):
    """The compiled build folds with an open-addressing table over the values' bytes
    (``_fold_hashed``); Python counts with a dict.  Both are run here on the same columns (both
    methods exist in either build) and must give the same counts: signed zeros count as one value
    (as in a dict), negative and denormal values, heavy and light repetition; a NaN leaves the
    column to the dict fold, which keeps each NaN apart."""
    import math
    import random
    from array import array

    from amqp_dissect.model.stats import Latencies

    rnd = random.Random(seed)
    pool = [0.0, -0.0, 5e-324, -1e-6, 1e-6, 2.5e-5, 1e300] + [rnd.random() for _ in range(rnd.choice([3, 40, 900]))]
    values = [rnd.choice(pool) if rnd.random() < 0.8 else rnd.uniform(-1, 10) for _ in range(rnd.randrange(1, 5000))]

    def fresh(counts):
        lat = Latencies(fold_at=10**9)
        lat.values = array("d", values)
        lat.n = len(values) + sum(counts.values())
        lat.counts = dict(counts)
        return lat

    prior = {v: rnd.randrange(1, 5) for v in rnd.sample(pool, 3)}  # counts from an earlier fold
    hashed = fresh(prior)
    assert hashed._fold_hashed() is True
    expect = dict(prior)
    for v in values:
        expect[v] = expect.get(v, 0) + 1
    distinct = len(expect)
    if distinct * 12 <= hashed.n:  # folded: counts hold everything, the array is empty
        assert len(hashed.values) == 0 and hashed.counts == expect
    else:  # not worth it: nothing moved, the next try is at twice the size
        assert list(hashed.values) == values and hashed.counts == prior and hashed.fold_at == 2 * len(values)
    assert sum(hashed.counts.values()) + len(hashed.values) == hashed.n
    # a NaN anywhere: nothing changes, and the dict fold is left to do it
    with_nan = fresh({})
    with_nan.values.append(math.nan)
    before = list(with_nan.values)
    assert with_nan._fold_hashed() is False
    assert with_nan.counts == {} and [repr(v) for v in with_nan.values] == [repr(v) for v in before]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_settle_queue_behaves_as_a_deque(seed):
    # the lag queue (a list and a head index, compiled) against collections.deque, the oracle: the
    # same appends and pops in a random mix, across the compactions of its list
    import collections
    import random

    from amqp_dissect.model.settlement import SettleQueue

    rnd = random.Random(seed)
    q, oracle = SettleQueue(), collections.deque()
    n = 0
    for _ in range(20_000):
        if rnd.random() < 0.55 or not oracle:
            q.append(n)
            oracle.append(n)
            n += 1
        else:
            assert q.popleft() == oracle.popleft()
        assert len(q) == len(oracle) == q.size()
        assert bool(q) == bool(oracle)
    assert list(q) == list(oracle)
    while oracle:
        assert q.popleft() == oracle.popleft()
    assert not q and list(q) == []
    with pytest.raises(IndexError):
        q.popleft()
    assert len(q.items) == 0  # (emptied: its list keeps no slots)
