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
