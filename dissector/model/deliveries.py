"""Delivery storage: one :class:`DeliveryTable` per session and sending peer.

A table holds the deliveries of one session sent by one peer that are not folded yet, by
delivery-id (the latest delivery of an id), and what finding them needs:

* the run: a list of the deliveries at consecutive ids, as a peer numbers them, one slot an id
  (empty once folded; the folded head is given back): adding, finding, forgetting and a range of
  ids are list operations; the deliveries of an id outside it (out of order, far ahead, wrapped)
  are held by id in ``by_id``;
* the ids of ``by_id`` in order (``order``, offsets from the first id the peer used), kept only once a wide
  disposition range asked for them: a range finds its deliveries by bisection, at a cost in
  proportion to those it touches (folded ids are dropped lazily, ``stale`` counts them);
* the first id and the next id the peer uses (ids between were seen; a disposition of one that
  is not in the table any more names a delivery settled earlier);
* a :class:`CompactStore` of the plain deliveries beyond :data:`COMPACT_AT` (single state: complete
  or still one frame, unsettled, no disposition, no outcome, no transaction): struct-of-arrays,
  60-odd bytes each instead of 500; a delivery comes back as an object when a disposition names
  it, or as a short-lived copy for reading (:func:`link_deliveries`, :func:`compact_rows`).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .delivery import DeliveryRecord
from .serial import SERIAL_HALF, SERIAL_MASK, SERIAL_MOD, serial_add, serial_diff, serial_range_len
from .store import (FLAG_COMPLETE, FLAG_DEAD, FLAG_HIDDEN, FLAG_NO_TAG, FLAG_RESUMED, FLAG_RSM_SHIFT, RSM_NAMES,
                    CompactStore, compactable)

_M32 = SERIAL_MASK  # (a C constant when compiled: see deliveries.pxd)

# A table holds objects up to COMPACT_AT deliveries; beyond, the plain ones but the newest
# COMPACT_KEEP move to its CompactStore (read at run time: tests set them on this module)
COMPACT_AT = 4096
COMPACT_KEEP = 1024  # the newest deliveries of the table stay objects (the ones a disposition names next)
# the run of consecutive ids (DeliveryTable.run): an id at most RUN_GAP beyond its end extends it; its
# folded head is given back once RUN_TRIM slots long; its deliveries move to by_id when its empty slots
# outnumber them by more than RUN_SPILL + 4 per delivery (memory stays in proportion to deliveries)
RUN_GAP = 64
RUN_TRIM = 256
RUN_SPILL = 4096


# --------------------------------------------------------------------------- the table


def _offset(row):
    """Sort key of (id offset, ...) rows."""
    return row[0]



class DeliveryTable:
    """The deliveries of one session sent by one peer that are not folded yet (see the module)."""

    __slots__ = ("session", "direction", "run", "run_off", "run_head", "run_n", "by_id", "order", "stale", "first_id",
                 "last_id", "store", "compact_at")

    def __init__(self, session, direction: int):
        self.session = session
        self.direction = direction  # the sending peer
        # the run: deliveries at consecutive ids (a peer numbers its deliveries one by one): run[i] is
        # the delivery of id offset run_off + i (offsets from first_id), or None (folded, or never
        # sent); slots before run_head are None; run_n deliveries in it
        self.run = []
        self.run_off = 0
        self.run_head = 0
        self.run_n = 0
        # delivery-id -> DeliveryRecord (the latest of that id) of the deliveries not in the run (an id
        # outside it when it came: out of order, far ahead, wrapped); an id is in one of the two
        self.by_id = {}
        # the ids of by_id in order, as offsets from first_id (array "q"; None until a wide disposition
        # range needs it and again once by_id is empty); stale: ids folded since, not removed yet
        self.order = None
        self.stale = 0
        self.first_id = None  # first delivery-id seen (ids from it to below next_id were seen)
        self.last_id = None  # the latest delivery-id added (next_id follows it)
        self.store = None  # CompactStore of the deliveries compacted out of the table (None while none)
        self.compact_at = COMPACT_AT  # the deliveries held at which the next compaction runs

    def __len__(self) -> int:
        return self.run_n + len(self.by_id)

    @property
    def next_id(self):
        """The id after the latest added (None before any)."""
        return None if self.last_id is None else serial_add(self.last_id, 1)

    def _run_slot(self, did) -> int:
        """The run's slot of id ``did`` (-1: outside the run)."""
        if self.first_id is None:
            return -1
        i = serial_diff(did, self.first_id) - self.run_off
        return i if 0 <= i < len(self.run) else -1

    def get(self, did):
        """The delivery of id ``did`` held as an object, or None."""
        i = self._run_slot(did)
        if i >= 0:
            x = self.run[i]
            if x is not None:
                return x
        return self.by_id.get(did) if self.by_id else None

    def add(self, did, dlv) -> None:
        """``dlv`` is a new delivery with id ``did``: from now on the delivery of that id."""
        if self.first_id is None:
            self.first_id = did
        self.last_id = did  # (next_id is made when asked: no int object per delivery)
        run = self.run
        k = len(run)
        if self.run_n == 0:  # an empty run starts again at this id
            if k:
                run.clear()
                k = 0
            self.run_off = serial_diff(did, self.first_id)
            self.run_head = 0
        i = serial_diff(did, self.first_id) - self.run_off
        if i == k:  # the next id: the usual case
            run.append(dlv)
            known = False
        elif 0 <= i < k:
            known = run[i] is not None
            run[i] = dlv
            if i < self.run_head:
                self.run_head = i
        elif k < i <= k + RUN_GAP:  # a few ids ahead: the ids between stay empty
            run.extend([None] * (i - k))
            run.append(dlv)
            known = False
        else:  # outside the run
            self._add_other(did, dlv)
            return
        if not known:
            self.run_n += 1
            if self.by_id and self._pop_other(did):  # (the id's previous delivery was held outside the run)
                known = True
        if not known and self.store is not None:
            self._store_hide(did)
        if k - self.run_head > 4 * self.run_n + 64 and k - self.run_head > RUN_SPILL + 4 * self.run_n:
            self._spill()  # (mostly empty slots behind an old delivery)

    def _add_other(self, did, dlv) -> None:
        """:meth:`add` of an id outside the run: into ``by_id``."""
        by_id = self.by_id
        if cython.compiled and type(by_id) is dict:  # (C dict calls; a test may put a counting mapping here)
            tbl = by_id
            known = did in tbl
            tbl[did] = dlv
        else:
            known = did in by_id
            by_id[did] = dlv
        if not known:
            if self.order is not None:
                self._order_add(did)
            if self.store is not None:
                self._store_hide(did)

    def _pop_other(self, did) -> bool:
        """Drop the delivery of ``did`` from ``by_id`` (the run holds that id now): True if there was one."""
        if self.by_id.pop(did, None) is None:
            return False
        self._other_dropped()
        return True

    def _other_dropped(self) -> None:
        """A delivery left ``by_id``: the ordered ids forget it (now, or lazily)."""
        if not self.by_id:
            self.by_id.clear()
            self.order = None
            self.stale = 0
        elif self.order is not None:
            self.stale += 1
            if self.stale > len(self.by_id) + 32:
                self._order_rebuild()

    def _spill(self) -> None:
        """The run's deliveries move to ``by_id`` (empty slots outnumber them: an old delivery holds
        the run's head while later ones are folded); the next delivery starts a run again."""
        run = self.run
        by_id = self.by_id
        for i in range(self.run_head, len(run)):
            x = run[i]
            if x is not None:
                by_id[x.delivery_id] = x
                if self.order is not None:
                    self._order_add(x.delivery_id)
        run.clear()
        self.run_n = 0
        self.run_head = 0

    def _run_drop(self, i) -> None:
        """Slot ``i`` of the run is emptied (its delivery folded or compacted)."""
        run = self.run
        run[i] = None
        self.run_n -= 1
        if self.run_n == 0:
            run.clear()
            self.run_head = 0
            return
        h = self.run_head
        if i == h:
            k = len(run)
            while h < k and run[h] is None:
                h += 1
            if 2 * h >= k and h >= RUN_TRIM:  # the folded head given back
                del run[:h]
                self.run_off += h
                h = 0
            self.run_head = h

    def forget(self, dlv) -> None:
        """``dlv`` was folded: out of the table if it is still the delivery of its id."""
        did = dlv.delivery_id
        if did is None:
            return
        if self.run_n:
            i = self._run_slot(did)
            if i >= 0 and self.run[i] is dlv:
                self._run_drop(i)
                return
        table = self.by_id
        if not table:
            return
        if cython.compiled and type(table) is dict:  # (C dict calls; a test may put a counting mapping here)
            tbl = table
            mine = tbl.get(did) is dlv
            if mine:
                del tbl[did]
                self._other_dropped()
            return
        if table.get(did) is dlv:
            del table[did]
            self._other_dropped()

    def find_each(self, first, n) -> list:
        """The deliveries with ids ``first .. first+n-1`` (a few), looked up one by one; a compacted
        one becomes an object again."""
        hits = []
        st = self.store
        for i in range(n):
            x = self.get((first + i) & _M32)
            if x is not None:
                hits.append(x)
            elif st is not None:  # compacted?  An object again
                j = st.find(serial_diff((first + i) & _M32, self.first_id))
                if j >= 0:
                    hits.append(self._expand(j))
                    st = self.store
        return hits

    def folded_in_range(self, first, last) -> int:
        """How many ids of ``first..last`` were delivery-ids the sender used (first_id..next_id-1)."""
        lo, nxt = self.first_id, self.next_id
        if lo is None or nxt is None:
            return 0
        hi = serial_diff(nxt, lo)  # ids lo .. lo+hi-1 were seen
        a = serial_diff(first, lo)
        b = a + serial_range_len(first, last) - 1
        return max(0, min(b, hi - 1) - max(a, 0) + 1)

    def due(self) -> bool:
        """Holds more objects than the compaction threshold."""
        return self.run_n + len(self.by_id) > self.compact_at

    # -- the ordered ids (a wide disposition range) ----------------------------------------

    def _order_add(self, did) -> None:
        """``did`` is new in the table: add it to the ordered ids (kept only once a wide range asked)."""
        order = self.order
        if order is None:
            return
        off = serial_diff(did, self.first_id)
        if cython.compiled:  # (the array's buffer read and grown in C: no int objects, no method call)
            k = len(order)
            if k == 0 or off > order.data.as_longlongs[k - 1]:
                _carray.resize_smart(order, k + 1)
                order.data.as_longlongs[k] = off
                return
        elif not order or off > order[-1]:
            order.append(off)  # ids come in order: the usual case
            return
        i = bisect_left(order, off)
        if i == len(order) or order[i] != off:
            order.insert(i, off)

    def _order_rebuild(self) -> None:
        """Drop the folded ids from the ordered ids (they outnumber the live ones)."""
        base = self.first_id
        if cython.compiled and type(self.by_id) is dict:
            # the offsets written straight into the array's buffer; the table's ids come in order
            # (the usual case: no sort) unless a delivery-id was used again or ids wrapped
            tbl = self.by_id
            n = len(tbl)
            order = array("q")
            _carray.resize(order, n)
            sorted_ = True
            i = 0
            for k in tbl:
                off = serial_diff(k, base)
                if i and off <= order.data.as_longlongs[i - 1]:
                    sorted_ = False
                order.data.as_longlongs[i] = off
                i += 1
            if not sorted_:
                order = array("q", sorted(order))
            self.order = order
            self.stale = 0
            return
        offs = [serial_diff(k, base) for k in self.by_id]
        offs.sort()
        self.order = array("q", offs)
        self.stale = 0

    def _pieces(self, first, n) -> list:
        """The offset ranges of ids ``first .. first+n-1``: two when they wrap past the serial
        half-range from the first id."""
        a = serial_diff(first, self.first_id)
        b = a + n - 1
        return [(a, SERIAL_HALF - 1), (-SERIAL_HALF, b - SERIAL_MOD)] if b >= SERIAL_HALF else [(a, b)]

    def in_range(self, first, n) -> list:
        """The deliveries whose ids are ``first .. first+n-1``, in id order (compacted ones made
        objects again).  Slices the run; bisects the ordered ids of ``by_id`` and drops the folded
        ones it meets: the cost is in proportion to the deliveries touched (each folded id is met
        once)."""
        if self.store is not None:
            return self._in_range_compact(first, n)
        hits = []
        if not self.run_n and not self.by_id:
            return hits
        for lo, hi in self._pieces(first, n):
            self._objects_in(lo, hi, hits)
        return hits

    def _objects_in(self, lo, hi, hits) -> None:
        """Append the table's deliveries at id offsets ``lo .. hi`` to ``hits``, in id order."""
        other = None
        if self.by_id:
            if self.order is None:  # the first wide range since by_id was last empty: order its ids now
                self._order_rebuild()
            other = []
            dead = _collect(self.order, self.by_id, self.first_id, lo, hi, other)
            if dead:
                self.stale = max(0, self.stale - dead)
        if not self.run_n:
            if other:
                hits.extend(other)
            return
        run = self.run
        a = max(lo - self.run_off, self.run_head)
        b = min(hi - self.run_off, len(run) - 1)
        if not other:
            for i in range(a, b + 1):
                x = run[i]
                if x is not None:
                    hits.append(x)
            return
        for i in range(a, b + 1):
            x = run[i]
            if x is not None:
                other.append(x)
        base = self.first_id
        both = [(serial_diff(y.delivery_id, base), y) for y in other]  # (an id is in the run or in by_id)
        both.sort(key=_offset)
        for t in both:
            hits.append(t[1])

    def range_count(self, first, n) -> int:
        """At most how many deliveries of the table and its store have ids ``first .. first+n-1``
        (the run's slots, empty ones too, and bisections of the ordered ids: folded ones not dropped
        yet count too)."""
        table = self.by_id
        st = self.store
        if not table and not self.run_n and st is None:
            return 0
        if table and self.order is None:
            self._order_rebuild()
        order = self.order if table else None
        k = 0
        for lo, hi in self._pieces(first, n):
            if order is not None:
                k += _bisect_right_q(order, hi) - _bisect_left_q(order, lo)
            if self.run_n:
                a = max(lo - self.run_off, self.run_head)
                b = min(hi - self.run_off, len(self.run) - 1)
                if b >= a:
                    k += b - a + 1
            if st is not None:
                k += _bisect_right_q(st.offs, hi) - _bisect_left_q(st.offs, lo)
        return k

    def _in_range_compact(self, first, n) -> list:
        """:meth:`in_range` of a table with compacted deliveries: those of the table and those of the
        store (made objects again), merged in id order."""
        base = self.first_id
        hits = []
        for lo, hi in self._pieces(first, n):
            got = []
            self._objects_in(lo, hi, got)
            rows = self._store_range(lo, hi)
            if not rows:
                hits.extend(got)
                continue
            merged = [(serial_diff(x.delivery_id, base), x.seq, x) for x in got]
            for off, _i in rows:
                j = self.store.find(off)  # (positions move when an expansion rebuilds the store)
                if j >= 0:
                    x = self._expand(j)
                    merged.append((off, x.seq, x))
            merged.sort(key=lambda t: (t[0], t[1]))
            hits.extend(t[2] for t in merged)
        return hits

    # -- the compact store -----------------------------------------------------------------

    def compact(self) -> None:
        """Move the plain deliveries of the table but the newest COMPACT_KEEP to the store."""
        table = self.by_id
        total = len(self)
        moving = self._compactable(total - COMPACT_KEEP)
        self.compact_at = max(COMPACT_AT, 2 * (total - len(moving)))
        if not moving:  # (deliveries with dispositions or outcomes, waiting for settlement: no store)
            return
        self._store_moved(moving)
        run = self.run
        for _o, x in moving:
            i = self._run_slot(x.delivery_id) if self.run_n else -1
            if i >= 0 and run[i] is x:
                self._run_drop(i)
            else:
                del table[x.delivery_id]
            link = x.link
            link.live.drop(x)
            link.compacted += 1
            link.reordered = True
        if not table:
            table.clear()
        self.order = None  # (ordered again by the next wide range)
        self.stale = 0

    def _compactable(self, keep) -> list:
        """(offset from first_id, delivery) of each delivery that may go to the store among the
        oldest ``keep`` of the table (by_id's first, then the run's in id order)."""
        base = self.first_id
        moving = []
        for did, x in self.by_id.items():
            if keep <= 0:
                break
            keep -= 1
            if compactable(x, x.link):
                moving.append((serial_diff(did, base), x))
        run = self.run
        if keep > 0 and self.run_n:
            for i in range(self.run_head, len(run)):
                x = run[i]
                if x is None:
                    continue
                if keep <= 0:
                    break
                keep -= 1
                if compactable(x, x.link):
                    moving.append((serial_diff(x.delivery_id, base), x))
        return moving

    def _store_moved(self, moving: list) -> None:
        """The rows of ``moving`` (offset, delivery) into the store, in id order: appended when
        beyond the store's last id (the usual case), else the store rebuilt."""
        st = self.store
        if st is None:
            st = self.store = CompactStore()
        moving.sort(key=_offset)
        if len(st.offs) and moving[0][0] <= st.offs[-1]:
            self._store_rebuild([(st.offs[i], i) for i in range(len(st.offs))] + [(o, x) for o, x in moving])
        else:
            for o, x in moving:
                st.append(o, x)

    def _store_rebuild(self, rows) -> None:
        """The store made again from ``rows``: (offset, position in the old store or a delivery), in
        id order; dead rows dropped."""
        old = self.store
        st = self.store = CompactStore()
        rows.sort(key=_offset)
        for o, r in rows:
            if type(r) is int:
                if not old.flags[r] & FLAG_DEAD:
                    st.copy_row(old, r)
            else:
                st.append(o, r)
        if not len(st.offs):
            self.store = None

    def delivery_at(self, st, i):
        """The delivery at row ``i`` of the store ``st`` as a fresh object (not in any table)."""
        link = self.session.conn.links[st.link[i]]
        fl = st.flags[i]
        x = DeliveryRecord.__new__(DeliveryRecord)
        x._init(link, self.session, self.direction, (self.first_id + st.offs[i]) & SERIAL_MASK, st.tag(i),
                st.first_ts[i], st.first_packet[i])
        x.last_ts = st.last_ts[i]
        x.last_packet = st.last_packet[i]
        x.frames = st.frames[i]
        x.size = st.size[i]
        x.complete = bool(fl & FLAG_COMPLETE)
        x.resumed = bool(fl & FLAG_RESUMED)
        x.rcv_settle_mode = RSM_NAMES[(fl >> FLAG_RSM_SHIFT) & 3]
        x.seq = st.seq[i]
        return x

    def row_values(self, st, i) -> tuple:
        """What row ``i`` of the store ``st`` holds, without an object: (delivery-id, tag, first_ts,
        last_ts, first_packet, last_packet, frames, size, complete, resumed, rcv_settle_mode)."""
        fl = st.flags[i]
        return ((self.first_id + st.offs[i]) & SERIAL_MASK, st.tag(i), st.first_ts[i], st.last_ts[i],
                st.first_packet[i], st.last_packet[i], st.frames[i], st.size[i], bool(fl & FLAG_COMPLETE),
                bool(fl & FLAG_RESUMED), RSM_NAMES[(fl >> FLAG_RSM_SHIFT) & 3])

    def _expand(self, i):
        """Row ``i`` of the store becomes an object again, back in the table and its link's live
        deliveries (a disposition names it)."""
        st = self.store
        x = self.delivery_at(st, i)
        st.flags[i] |= FLAG_DEAD
        st.dead += 1
        st.by_link = None
        link = x.link
        link.compacted -= 1
        link.reordered = True
        link.live.add(x)  # (out of seq order: readers sort a link that was compacted)
        did = x.delivery_id
        j = self._run_slot(did) if self.run_n else -1
        if j >= 0 and self.run[j] is None:  # (back in its slot of the run)
            self.run[j] = x
            self.run_n += 1
            if j < self.run_head:
                self.run_head = j
        else:
            self.by_id[did] = x
            self._order_add(did)
        if st.dead * 2 > len(st.offs):
            self._store_rebuild([(st.offs[k], k) for k in range(len(st.offs))])
        return x

    def _store_hide(self, did) -> None:
        """A new delivery took ``did``: the compacted one with that id is no longer found by it."""
        st = self.store
        i = st.find(serial_diff(did, self.first_id))
        if i >= 0:
            st.flags[i] |= FLAG_HIDDEN

    def _store_range(self, a, b) -> list:
        """Rows (offset, i) of the findable compacted deliveries at offsets a..b whose ids are not in
        the table (the table holds the latest delivery of an id)."""
        st = self.store
        offs = st.offs
        flags = st.flags
        base = self.first_id
        out = []
        for i in range(bisect_left(offs, a), bisect_right(offs, b)):
            if not flags[i] & (FLAG_DEAD | FLAG_HIDDEN) and self.get((base + offs[i]) & SERIAL_MASK) is None:
                out.append((offs[i], i))
        return out


def _bisect_left_q(order, x) -> int:
    """``bisect_left(order, x)`` on an array "q" (compiled: on its buffer, no int objects)."""
    if not cython.compiled:
        return bisect_left(order, x)
    lo = 0
    hi = len(order)
    while lo < hi:
        mid = (lo + hi) >> 1
        if order.data.as_longlongs[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _bisect_right_q(order, x) -> int:
    """``bisect_right(order, x)`` on an array "q" (compiled: on its buffer, no int objects)."""
    if not cython.compiled:
        return bisect_right(order, x)
    lo = 0
    hi = len(order)
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < order.data.as_longlongs[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _collect(order, table, base, a, b, hits) -> int:
    """Append the deliveries at offsets ``a .. b`` of ``order`` to ``hits``; drop (and count) the
    offsets whose delivery was folded."""
    lo = _bisect_left_q(order, a)
    hi = _bisect_right_q(order, b)
    dead = 0
    tbl = table if cython.compiled and type(table) is dict else None  # (C look-ups; tests count a mapping's)
    for i in range(lo, hi):
        if cython.compiled:  # (the offset read from the array's buffer: a C integer)
            k = (base + order.data.as_longlongs[i]) & _M32
            x = tbl.get(k) if tbl is not None else table.get(k)
        else:
            x = table.get((base + order[i]) & SERIAL_MASK)
        if x is None:
            dead += 1
        else:
            hits.append(x)
    if dead:
        order[lo:hi] = array("q", [order[i] for i in range(lo, hi) if (base + order[i]) & SERIAL_MASK in table])
    return dead


# --------------------------------------------------------------------------- reading a link's deliveries


def by_seq(x):
    """Sort key: first-transfer order."""
    return x.seq


def link_deliveries(link):
    """The link's deliveries not folded yet, in first-transfer order (an iterator): its objects, and
    copies of those compacted (made one at a time, for reading: changing them changes nothing)."""
    if not link.compacted and not link.reordered:
        return iter(list(link.live.values()))
    streams = [sorted(link.live.values(), key=by_seq)]
    for d, st, rows in compact_rows(link):
        streams.append(_store_rows(link.session.deliveries[d], st, rows))
    return heapq.merge(*streams, key=by_seq)


def _store_rows(table, st, rows):
    for i in rows:
        yield table.delivery_at(st, i)


def _rows_by_link(st) -> dict:
    """Link index -> rows of its live deliveries in the store ``st`` (one walk for all its links)."""
    by_link = {}
    li = st.link
    flags = st.flags
    for i in range(len(st.offs)):
        if not flags[i] & FLAG_DEAD:
            r = by_link.get(li[i])
            if r is None:
                r = by_link[li[i]] = array("l")
            r.append(i)
    return by_link


def compact_rows(link) -> list:
    """The link's compacted deliveries, read from the columns: ``[(d, store, rows)]`` per sending
    peer ``d`` with any, ``rows`` their positions in ``store`` (the :class:`CompactStore` of the
    session's table of ``d``) in first-transfer order.  The one walk of the stores: readers take
    what they need from the columns, and make a delivery object (:func:`store_delivery`) only for
    one they keep."""
    out = []
    if not link.compacted:
        return out
    idx = link.index
    for d, table in enumerate(link.session.deliveries):
        st = table.store
        if st is None:
            continue
        if st.by_link is None:  # one walk of the store for all its links (a session may have many)
            st.by_link = _rows_by_link(st)
        rows = st.by_link.get(idx)
        if rows:
            seq = st.seq
            if any(seq[rows[k - 1]] > seq[rows[k]] for k in range(1, len(rows))):
                rows = array("l", sorted(rows, key=seq.__getitem__))
            else:
                rows = array("l", rows)  # (a copy: the caller's)
            out.append((d, st, rows))
    return out


def store_delivery(link, d, st, i):
    """Row ``i`` of the store ``st`` of ``link``'s session and peer ``d`` as a fresh delivery object."""
    return link.session.deliveries[d].delivery_at(st, i)


def store_values(link, d, st, i) -> tuple:
    """What row ``i`` of the store ``st`` (``link``'s session, peer ``d``) holds, without an object:
    (delivery-id, tag, first_ts, last_ts, first_packet, last_packet, frames, size, complete, resumed,
    rcv_settle_mode); the rest of a compacted delivery is as :meth:`DeliveryRecord._init` leaves it."""
    return link.session.deliveries[d].row_values(st, i)


#: the columns :func:`store_columns` gives (what a compacted delivery holds of its own; the rest of
#: it is as :meth:`DeliveryRecord._init` leaves it, the same for every compacted delivery of a link)
STORE_COLUMNS = ("delivery_id", "delivery_tag", "first_time", "last_time", "first_packet", "last_packet", "frames",
                 "message_size", "complete", "resumed", "rcv_settle_mode")


def store_columns(link, d, st, rows) -> list:
    """The cells of the compacted deliveries at ``rows`` of the store ``st`` (``link``'s session, peer
    ``d``) by column, in the order of :data:`STORE_COLUMNS`, read from the store's arrays (no object
    per delivery): the values :func:`store_values` gives row by row, the tag as hex text."""
    n = len(rows)
    if n and rows[n - 1] - rows[0] == n - 1 and rows == array("l", range(rows[0], rows[0] + n)):
        a, b = rows[0], rows[0] + n  # a run of the store (the usual case): slices
        offs = st.offs[a:b]
        first_ts = st.first_ts[a:b].tolist()
        last_ts = st.last_ts[a:b].tolist()
        first_packet = st.first_packet[a:b].tolist()
        last_packet = st.last_packet[a:b].tolist()
        frames = st.frames[a:b].tolist()
        size = st.size[a:b].tolist()
        flags = st.flags[a:b]
    else:
        o, ft, lt, fp, lp, fr, sz, fl = (st.offs, st.first_ts, st.last_ts, st.first_packet, st.last_packet, st.frames,
                                         st.size, st.flags)
        offs = [o[i] for i in rows]
        first_ts = [ft[i] for i in rows]
        last_ts = [lt[i] for i in rows]
        first_packet = [fp[i] for i in rows]
        last_packet = [lp[i] for i in rows]
        frames = [fr[i] for i in rows]
        size = [sz[i] for i in rows]
        flags = [fl[i] for i in rows]
    base = link.session.deliveries[d].first_id
    ids = [(base + off) & SERIAL_MASK for off in offs]
    tag_end = st.tag_end
    tags = st.tags
    tag_col = []
    for k in range(n):
        if flags[k] & FLAG_NO_TAG:
            tag_col.append(None)
        else:
            i = rows[k]
            tag_col.append(tags[tag_end[i - 1] if i else 0:tag_end[i]].hex())
    complete = [(f & FLAG_COMPLETE) != 0 for f in flags]
    resumed = [(f & FLAG_RESUMED) != 0 for f in flags]
    rsm = [RSM_NAMES[(f >> FLAG_RSM_SHIFT) & 3] for f in flags]
    return [ids, tag_col, first_ts, last_ts, first_packet, last_packet, frames, size, complete, resumed, rsm]
