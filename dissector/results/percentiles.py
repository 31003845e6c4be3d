"""Percentiles and latency summaries: the one percentile of the project (the tables, the report, the
archive's summaries) and the summary of a latency list (count, min, mean, percentiles, max)."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from itertools import accumulate

# not compiled (dissector/_hot.py): the shim, not Cython's shadow module, whose import (about 27
# million instructions) every command would pay where Cython is installed
from .. import _cython_shim as cython

from ..model.stats import Latencies

__all__ = ["percentile", "summarize"]


def percentile(values, q: float, *, presorted: bool = False, spark_rounding: bool = False) -> float | None:
    """q-th percentile (0..100) of ``values`` with linear interpolation between the closest ranks
    (Hyndman & Fan type 7, numpy.percentile's default); None when there are none.  The one
    percentile of the project: the tables, the report and the archive's summaries.

    ``presorted``: ``values`` is a sorted sequence of numbers (a list, an array), read in place.
    ``spark_rounding``: round the interpolation as ``(hi - h) * x[lo] + (h - lo) * x[hi]`` (the
    formula of Spark SQL's ``percentile``) instead of numpy's ``x[lo] + (x[hi] - x[lo]) * g``:
    the same number but for the last bits.  The archive's summaries always rounded so (their
    numbers stay as they were); Spark SQL's own ``percentile`` gave other last bits on the
    samples, which is why the summaries no longer use it."""
    xs = values if presorted else sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        return None
    return _percentile_at(xs.__getitem__, n, q, spark_rounding)


def _percentile_sorted(xs, q: float) -> float | None:
    n = len(xs)
    if n == 0:
        return None
    return _percentile_at(xs.__getitem__, n, q)


def _percentile_at(at, n: int, q: float, spark_rounding: bool = False):
    """The q-th percentile of n sorted values, ``at(i)`` giving the i-th (from 0)."""
    h = (n - 1) * (q / 100)
    lo = math.floor(h)
    if lo < 0:
        return at(0)
    if lo >= n - 1:
        return at(n - 1)
    g = h - lo
    a, b = at(lo), at(lo + 1)
    if spark_rounding:
        return a if g == 0 else (lo + 1 - h) * a + g * b
    diff = b - a
    if g >= 0.5:
        return b - diff * (1 - g)
    return a + diff * g


def _summarize_counted(lat: Latencies) -> dict:
    """summarize() of a Latencies column: the same numbers from its distinct values and counts."""
    keys, counts = lat.distinct()
    n = lat.n
    ends = list(accumulate(counts))  # ends[k]: values up to and including keys[k]

    def at(i):
        return keys[bisect_right(ends, i)]

    # the mean: the exact sum of every value (each a binary fraction), rounded once, as math.fsum
    den = max((k.as_integer_ratio()[1] for k in keys), default=1)
    num = 0
    for k, c in zip(keys, counts):
        a, b = k.as_integer_ratio()
        num += a * (den // b) * c
    return {
        "count": n,
        "p50": float(_percentile_at(at, n, 50)),
        "p90": float(_percentile_at(at, n, 90)),
        "p99": float(_percentile_at(at, n, 99)),
        "max": float(keys[-1]),
        "min": float(keys[0]),
        "mean": (num / den) / n,
    }


def summarize(values) -> dict:
    """count, p50, p90, p99, max, min, mean of ``values`` (None entries skipped).  A typed
    ``array('d')`` is sorted as 8-byte floats, never as Python objects; a
    :class:`~amqp_dissect.model.state.Latencies` column is read from its values and counts."""
    if isinstance(values, Latencies):
        if values.counts:
            return _summarize_counted(values)
        values = values.values
    if isinstance(values, array):
        n = len(values)
        if n == 0:
            return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None, "min": None, "mean": None}
        if cython.compiled:
            xs = array("d", values)
            _heapsort(xs)  # in C, on the 8-byte floats
        else:
            xs = sorted(values)
        return {
            "count": n,
            "p50": float(_percentile_sorted(xs, 50)),
            "p90": float(_percentile_sorted(xs, 90)),
            "p99": float(_percentile_sorted(xs, 99)),
            "max": float(xs[-1]),
            "min": float(xs[0]),
            "mean": math.fsum(values) / n,
        }
    xs = sorted(float(v) for v in values if v is not None)
    if not xs:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "max": None, "min": None, "mean": None}
    return {
        "count": len(xs),
        "p50": _percentile_sorted(xs, 50),
        "p90": _percentile_sorted(xs, 90),
        "p99": _percentile_sorted(xs, 99),
        "max": xs[-1],
        "min": xs[0],
        "mean": math.fsum(xs) / len(xs),
    }


@cython.boundscheck(False)
@cython.wraparound(False)
def _heapsort(a) -> None:
    """Sort ``a`` (a typed buffer of doubles when compiled) in place: heapsort, O(n log n) on any
    input and no recursion.  Only the compiled build calls it (Python sorts with ``sorted``)."""
    n = len(a)
    start = n // 2
    end = n
    while end > 1:
        if start > 0:  # building the heap
            start -= 1
        else:  # the largest to the end
            end -= 1
            t = a[end]
            a[end] = a[0]
            a[0] = t
        root = start
        while True:  # sift down
            child = 2 * root + 1
            if child >= end:
                break
            if child + 1 < end and a[child] < a[child + 1]:
                child += 1
            if a[root] < a[child]:
                t = a[root]
                a[root] = a[child]
                a[child] = t
                root = child
            else:
                break
