"""What the folded deliveries of a link add up to: :class:`DeliveryStats` (counts, bytes) and
:class:`Latencies` (settlement and outcome latencies with exact percentiles in bounded room).
"""

from __future__ import annotations

from array import array

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.spec import OUTCOMES
from ..times import NS
from .deliveries import by_seq, compact_rows
from .store import FLAG_RESUMED

TERMINAL_OUTCOMES_ORDER = OUTCOMES  # accepted, rejected, released, modified, declared (from the spec)
TERMINAL_OUTCOMES = frozenset(OUTCOMES)

# values a Latencies column keeps in its array before it folds the repeated ones into counts
LATENCY_FOLD = 4096


class Latencies:
    """A column of latencies (seconds) with exact percentiles in bounded room.

    Values go to a typed array (8 bytes each).  When it holds ``fold_at`` values, they are
    folded into counts of distinct values, if that is smaller: latencies are differences of
    capture timestamps (microseconds, mostly), so a long capture repeats the same few thousand
    values, and memory follows the distinct values, not the deliveries.  Where values rarely
    repeat, they stay in the array (and the next try is at twice the size).  Percentiles and
    the mean read values and counts alike: the same numbers as from the plain list of values.
    """

    __slots__ = ("values", "counts", "n", "fold_at")

    def __init__(self, fold_at: int = LATENCY_FOLD):
        self.values = array("d")
        self.counts: dict = {}  # value -> how many times (the folded part)
        self.n = 0
        self.fold_at = fold_at

    def __len__(self) -> int:
        return self.n

    def append(self, x: float) -> None:
        if cython.compiled:  # straight into the array's buffer: no float object, no argument parsing
            k = len(self.values)
            _carray.resize_smart(self.values, k + 1)
            self.values.data.as_doubles[k] = x
        else:
            self.values.append(x)
        self.n += 1
        if len(self.values) >= self.fold_at:
            self._fold()

    def extend(self, other: "Latencies") -> None:
        self.values.extend(other.values)
        counts = self.counts
        for v, c in other.counts.items():
            counts[v] = counts.get(v, 0) + c
        self.n += other.n

    def copy(self) -> "Latencies":
        c = Latencies(self.fold_at)
        c.extend(self)
        return c

    def _fold(self) -> None:
        if cython.compiled and self._fold_hashed():
            return
        fresh: dict = {}
        for v in self.values:
            fresh[v] = fresh.get(v, 0) + 1
        counts = self.counts
        distinct = len(counts)
        for v in fresh:
            if v not in counts:
                distinct += 1
        # a distinct value costs about 100 bytes in the dict, a value 8 in the array
        if distinct * 12 <= self.n:
            for v, c in fresh.items():
                counts[v] = counts.get(v, 0) + c
            self.values = array("d")
        else:  # mostly distinct: keep the array
            self.fold_at = 2 * len(self.values)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def _fold_hashed(self) -> bool:
        """:meth:`_fold` without a Python object per value (what the compiled build runs): the
        values are counted in an open-addressing table of typed arrays keyed by their 8 bytes, and
        only the distinct values become floats, for the counts.  The same counts as the dict fold,
        in another order (every reader sorts them).  False, having changed nothing, when a value is
        NaN: the dict fold keeps each NaN apart, so it does that one."""
        values = self.values
        m = len(values)
        size = 16
        while size < 2 * m:
            size <<= 1
        mask = size - 1
        vals = values
        bits = memoryview(values).cast("B").cast("q")  # the same 8 bytes as integers, for the hash
        at = array("q", bytes(8 * size))  # slot -> 1 + index of the value's first occurrence (0: empty)
        cnt = array("q", bytes(8 * size))  # slot -> how many times
        for i in range(m):
            v = vals[i]
            if v != v:
                return False
            b = bits[i] if v != 0.0 else 0  # -0.0 == 0.0, as in a dict
            u = b ^ (b >> 29)
            u = u * 0x5BD1E995
            h = (u ^ (u >> 32)) & mask
            while True:
                a = at[h]
                if a == 0:
                    at[h] = i + 1
                    cnt[h] = 1
                    break
                if vals[a - 1] == v:
                    cnt[h] += 1
                    break
                h = (h + 1) & mask
        counts = self.counts
        distinct = len(counts)
        for h in range(size):
            if at[h] and vals[at[h] - 1] not in counts:
                distinct += 1
        if distinct * 12 <= self.n:  # as in _fold
            for h in range(size):
                if at[h]:
                    v = vals[at[h] - 1]
                    counts[v] = counts.get(v, 0) + cnt[h]
            self.values = array("d")
        else:
            self.fold_at = 2 * m
        return True

    def distinct(self) -> tuple:
        """(sorted distinct values, how many of each)."""
        counts = dict(self.counts)
        for v in self.values:
            counts[v] = counts.get(v, 0) + 1
        keys = sorted(counts)
        return keys, [counts[k] for k in keys]


def seconds_between(t, t0) -> float:
    """``(t - t0) / NS``: seconds between two integer-nanosecond times.  Compiled, on C integers
    when both fit in 63 bits (no int object, no division call per latency): Python divides two
    integers below 2**53 as doubles, one correctly rounded division, so the float is the same."""
    if cython.compiled and type(t) is int and type(t0) is int:
        try:
            a = t
            b = t0
        except OverflowError:  # (beyond 64 bits)
            return (t - t0) / NS
        # (shifts, not literals: the comparisons stay in C)
        if ((a >> 62) == 0 or (a >> 62) == -1) and ((b >> 62) == 0 or (b >> 62) == -1):
            d = a - b  # (no overflow: both within +-2**62)
            if (d >> 53) == 0 or (d >> 53) == -1:  # within +-2**53: exact as a double
                return cython.cast(cython.double, d) / 1e9
    return (t - t0) / NS


class NsCache:
    """An integer-nanosecond time as a C integer, the last one read kept by identity.

    A delivery's latency subtracts two capture times that are the same objects for many deliveries
    (the frames of one packet share its time; a disposition's range shares its frame's), and
    reading an int of 62 bits into a C integer is a call into the interpreter each time.  So
    :meth:`read` keeps the last time it read (a reference: the identity stays that object's) and
    its value: the same object again is a pointer compare.  The value is the int's, so what is
    computed from it is what the Python integers give."""

    __slots__ = ("obj", "ns")

    def __init__(self):
        self.obj = _UNREAD  # (never an int: nothing read yet)
        self.ns = 0

    def read(self, t) -> bool:
        """Is ``t`` an int within +-2**62?  Then its value is in ``ns``."""
        if t is self.obj:
            return True
        if type(t) is not int:
            return False
        try:
            a = t
        except OverflowError:  # (beyond 64 bits)
            return False
        if (a >> 62) == 0 or (a >> 62) == -1:  # (shifts, not literals: the comparisons stay in C)
            self.obj = t
            self.ns = a
            return True
        return False


_UNREAD = object()

# the two times of a delivery's latency, read once for the folds that share them (the Analyzer's
# slowest deliveries read them too: the same objects, see Analyzer._below_cut)
SETTLED_NS = NsCache()  # when it was settled (or got its outcome)
FIRST_NS = NsCache()  # its first transfer


def latency_seconds(t, t0) -> float:
    """:func:`seconds_between` (the same float), the times read through ``SETTLED_NS`` and ``FIRST_NS``
    when compiled: a time shared with the previous delivery is not read again."""
    if cython.compiled:
        at = SETTLED_NS
        first = FIRST_NS
        if at.read(t) and first.read(t0):
            d = at.ns - first.ns  # (no overflow: both within +-2**62)
            if (d >> 53) == 0 or (d >> 53) == -1:  # within +-2**53: exact as a double
                return cython.cast(cython.double, d) / 1e9
    return seconds_between(t, t0)


class DeliveryStats:
    """What the deliveries of one link add up to: counts by outcome and flag, bytes, and the
    settlement / outcome latencies (:class:`Latencies`: percentiles stay exact, room bounded).

    Settled deliveries are folded in here and forgotten (see :meth:`StateTracker._fold`); the
    deliveries still open are added on top when a table is read (:meth:`copy` then :meth:`add`).

    ``outcomes`` (outcome name -> count) is read through a property: the deliveries of a run with
    the same outcome (most are "accepted") are counted in a C integer and written into the dict
    when it is read, not one dict update per delivery.
    """

    __slots__ = ("deliveries", "bytes", "_outcomes", "_run_outcome", "_run", "no_outcome", "unsettled", "presettled",
                 "aborted", "resumed", "latency", "outcome_latency")

    def __init__(self):
        self.deliveries = 0
        self.bytes = 0
        self._outcomes = dict.fromkeys(TERMINAL_OUTCOMES_ORDER, 0)
        self._run_outcome = None  # the outcome of the run not written into _outcomes yet
        self._run = 0  # its deliveries
        self.no_outcome = 0
        self.unsettled = 0
        self.presettled = 0
        self.aborted = 0
        self.resumed = 0
        self.latency = Latencies()  # settled time - first transfer time, seconds
        self.outcome_latency = Latencies()  # receiver's terminal outcome time - first transfer time

    @property
    def outcomes(self) -> dict:
        """Outcome name -> deliveries (the terminal outcomes of the spec, in its order)."""
        if self._run:
            self._end_run()
        return self._outcomes

    def _end_run(self) -> None:
        """Write the pending run of one outcome into the dict."""
        o = self._run_outcome
        self._outcomes[o] += self._run
        self._run = 0
        self._run_outcome = None

    def add(self, d: "DeliveryRecord") -> None:
        self.deliveries += 1
        size = d.size  # (a C integer when compiled: the sum made on C integers, no int object)
        self.bytes += size
        o = d.outcome
        if o is None:
            self.no_outcome += 1
        elif o is self._run_outcome:  # (the same object as the run's: the usual case)
            self._run += 1
        elif o in self._outcomes:  # (a terminal outcome: the others are not counted here)
            if self._run:
                self._end_run()
            self._run_outcome = o
            self._run = 1
        st = d.settled
        t = d.outcome_ts
        if st is None:
            self.unsettled += 1
        else:
            lat = latency_seconds(st[0], d.first_ts)  # (the integers' difference, then seconds)
            self.latency.append(lat)
            if t is st[0]:  # settled by the frame that gave the outcome (the same time object): the same latency
                self.outcome_latency.append(lat)
                t = None
        if t is not None:
            self.outcome_latency.append(latency_seconds(t, d.first_ts))
        if d.presettled:
            self.presettled += 1
        if d.aborted:
            self.aborted += 1
        if d.resumed:
            self.resumed += 1

    def copy(self) -> "DeliveryStats":
        c = DeliveryStats()
        c.deliveries = self.deliveries
        c.bytes = self.bytes
        c._outcomes = dict(self.outcomes)
        c.no_outcome = self.no_outcome
        c.unsettled = self.unsettled
        c.presettled = self.presettled
        c.aborted = self.aborted
        c.resumed = self.resumed
        c.latency = self.latency.copy()
        c.outcome_latency = self.outcome_latency.copy()
        return c


def add_link_stats(stats, link) -> None:
    """Add the link's deliveries not folded yet to ``stats`` (a copy of ``link.stats``): its objects
    in first-transfer order, and its compacted ones from their columns (a compacted delivery is
    unsettled, without outcome, latency, abort or presettlement: counts and bytes only)."""
    live = link.live.values()
    for x in (sorted(live, key=by_seq) if link.reordered else live):
        stats.add(x)
    for _d, st, rows in compact_rows(link):
        size = st.size
        flags = st.flags
        n = len(rows)
        stats.deliveries += n
        stats.no_outcome += n
        stats.unsettled += n
        stats.bytes += sum([size[i] for i in rows])
        stats.resumed += sum([1 for i in rows if flags[i] & FLAG_RESUMED])
