"""The compact store of a delivery table (:class:`~amqp_dissect.model.deliveries.DeliveryTable`):
the plain deliveries of one session and sending peer as struct-of-arrays rows, and which deliveries
may move there (:func:`compactable`)."""

from __future__ import annotations

from array import array
from bisect import bisect_left

_RSM_CODES = {None: 0, "first": 1, "second": 2}
RSM_NAMES = (None, "first", "second")
# a compacted delivery's flags
FLAG_COMPLETE = 1
FLAG_RESUMED = 2
FLAG_NO_TAG = 4
FLAG_DEAD = 8  # expanded (an object again) or superseded: not a delivery of the store any more
FLAG_HIDDEN = 16  # a later delivery took its delivery-id: still a row, no longer found by id
FLAG_RSM_SHIFT = 5  # bits 5-6: receiver-settle-mode code
TAG_MAX = 64  # the longest delivery-tag a compacted delivery keeps
_TS_CAP = 1 << 63  # the times a store's int64 columns hold (nanoseconds: the years 1677 to 2262)


class CompactStore:
    """Struct-of-arrays of one session's compacted deliveries of one sending peer, in id order:
    offsets of their delivery-ids from the table's first id (``DeliveryTable.first_id``),
    first-transfer order (``seq``), times, packets, frames, bytes, flags, link, tag."""

    __slots__ = ("offs", "seq", "first_ts", "last_ts", "first_packet", "last_packet", "frames", "size",
                 "flags", "link", "tag_end", "tags", "dead", "by_link")

    def __init__(self):
        self.offs = array("q")
        self.seq = array("q")
        self.first_ts = array("q")  # (nanoseconds: a time beyond the 64-bit range stays an object)
        self.last_ts = array("q")
        self.first_packet = array("q")
        self.last_packet = array("q")
        self.frames = array("i")
        self.size = array("q")
        self.flags = array("B")
        self.link = array("i")  # the link's index in its connection (Connection.links)
        self.tag_end = array("q")  # each tag is tags[tag_end[i-1]:tag_end[i]] (tags may be out of order)
        self.tags = bytearray()
        self.dead = 0
        # link index -> rows of its live deliveries (made by compact_rows in one walk of the store for
        # every link; None again when the store changes)
        self.by_link = None

    def __len__(self) -> int:
        return len(self.offs)

    def find(self, off) -> int:
        """Position of the live, findable delivery at id offset ``off``, or -1."""
        offs = self.offs
        n = len(offs)
        i = bisect_left(offs, off)
        while i < n and offs[i] == off:
            if not self.flags[i] & (FLAG_DEAD | FLAG_HIDDEN):
                return i
            i += 1
        return -1

    def tag(self, i):
        if self.flags[i] & FLAG_NO_TAG:
            return None
        a = self.tag_end[i - 1] if i else 0
        return bytes(self.tags[a:self.tag_end[i]])

    def append(self, o, x) -> None:
        """Delivery ``x`` (at id offset ``o``, beyond the store's last) as a row."""
        self.by_link = None
        self.offs.append(o)
        self.seq.append(x.seq)
        self.first_ts.append(x.first_ts)
        self.last_ts.append(x.last_ts)
        self.first_packet.append(x.first_packet)
        self.last_packet.append(x.last_packet)
        self.frames.append(x.frames)
        self.size.append(x.size)
        fl = _RSM_CODES[x.rcv_settle_mode] << FLAG_RSM_SHIFT
        if x.complete:
            fl |= FLAG_COMPLETE
        if x.resumed:
            fl |= FLAG_RESUMED
        if x.tag is None:
            fl |= FLAG_NO_TAG
        else:
            self.tags += x.tag
        self.flags.append(fl)
        self.link.append(x.link.index)
        self.tag_end.append(len(self.tags))

    def copy_row(self, old, r) -> None:
        """Row ``r`` of the store ``old`` as a row of this one (a rebuild)."""
        self.offs.append(old.offs[r])
        for name in ("seq", "first_ts", "last_ts", "first_packet", "last_packet", "frames", "size", "flags", "link"):
            getattr(self, name).append(getattr(old, name)[r])
        if not old.flags[r] & FLAG_NO_TAG:
            self.tags += old.tag(r)
        self.tag_end.append(len(self.tags))


# --------------------------------------------------------------------------- which deliveries compact

def _unsettled_plain(x) -> bool:
    """No settlement, outcome, state, transaction, disposition, payload or abort: nothing but counts."""
    return (x.settled is None and x.outcome is None and x.outcome_by is None and x.outcome_error is None
            and x.received_state is None and x.txn_id is None and x.sender_state is None and x.txn is None
            and x.enlisted_in is None and x.payload is None and not x.aborted and not x.folded
            and x.delivery_failed is None and x.undeliverable_here is None and x.disp0 == 0
            and x.disp1 == 0 and x.message is None)


def _fits_columns(x, link) -> bool:
    """Every value the store keeps fits its column (int64 times and packets, int32 frames, ...)."""
    return (x.rcv_settle_mode in _RSM_CODES and type(x.first_ts) is int and type(x.last_ts) is int
            and -_TS_CAP <= x.first_ts < _TS_CAP and -_TS_CAP <= x.last_ts < _TS_CAP
            and type(x.first_packet) is int and type(x.last_packet) is int and 0 <= x.frames < 2**31
            and 0 <= x.size < 2**62 and link.index < 2**31 and (x.tag is None or len(x.tag) <= TAG_MAX))


def compactable(x, link) -> bool:
    """Delivery ``x`` of ``link`` may move to the store: plain, not the link's partial one, not on a
    transaction coordinator link, and its values fit the columns."""
    return (_unsettled_plain(x) and link.partial is not x and not link.coordinator and _fits_columns(x, link))
