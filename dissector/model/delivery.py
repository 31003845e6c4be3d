"""One delivery as the model follows it: :class:`DeliveryRecord` (its frames, settlement and outcome).

The deliveries not folded yet are held by their link (``Link.live``) and, by delivery-id, by the
:class:`~amqp_dissect.model.deliveries.DeliveryTable` of their session and sending peer.
Settlement (spec 2.6.12) is described in :mod:`amqp_dissect.model.state`.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython


class DeliveryRecord:
    __slots__ = (
        "link", "session", "direction", "delivery_id", "tag", "first_ts", "first_packet", "last_ts",
        "last_packet", "frames", "size", "complete", "presettled", "aborted", "resumed",
        "snd_settled", "rcv_settled", "outcome", "outcome_by", "outcome_ts", "outcome_packet",
        "outcome_error", "delivery_failed", "undeliverable_here", "received_state", "txn_id",
        "disp0", "disp1", "rcv_settle_mode", "payload", "sender_state", "settled", "txn", "enlisted_in",
        "seq", "folded", "message", "live_at",
    )

    def __init__(self, link, session, direction, delivery_id, tag, ts, packet):
        self._init(link, session, direction, delivery_id, tag, ts, packet)

    def _init(self, link, session, direction, delivery_id, tag, ts, packet):
        # (the transfer path makes deliveries with DeliveryRecord.__new__ and this: a C call when compiled;
        # only ever on a new object)
        self.link = link
        self.session = session
        self.direction = direction  # the sending peer
        self.delivery_id = delivery_id
        self.tag = tag
        self.first_ts = ts
        self.first_packet = packet
        self.last_ts = ts
        self.last_packet = packet
        self.size = 0
        self.complete = False
        self.presettled = False
        self.aborted = False
        self.resumed = False
        self.folded = False  # counted into its link's DeliveryStats and forgotten
        if cython.compiled:  # (a new extension object holds None in every object field, 0 in the C ones)
            return
        self.frames = 0
        self.snd_settled = None  # (ts, packet)
        self.rcv_settled = None
        self.outcome = None
        self.outcome_by = None
        self.outcome_ts = None
        self.outcome_packet = None
        self.outcome_error = None  # error dict of a rejected outcome
        self.delivery_failed = None
        self.undeliverable_here = None
        self.received_state = None
        self.txn_id = None
        self.disp0 = 0  # dispositions covering it sent by peer 0 (the client) and by peer 1
        self.disp1 = 0  # (two integers, not a list per delivery: see ``dispositions``)
        self.rcv_settle_mode = None
        self.payload = None  # list of bytes, kept for coordinator links only
        self.sender_state = None
        self.settled = None  # (ts, packet) of the first settling frame of either peer
        self.txn = None  # _Txn of a declare / discharge on a coordinator link
        self.enlisted_in = None  # _Txn whose work this delivery is part of
        self.seq = 0  # order of first transfers over the whole capture
        self.message = None  # the scan of its message (amqp.message.MessageScan) when messages are read
        self.live_at = 0  # its place in its link's LiveDeliveries

    @property
    def dispositions(self) -> list:
        """The dispositions covering it, per sending peer: ``[disp0, disp1]`` (a new list: read only)."""
        return [self.disp0, self.disp1]

    def settle(self, by: str, ts, packet):
        """``by`` ("sender"/"receiver") announced settlement in the frame at ts/packet."""
        global _last_at
        at = _last_at  # (one tuple for every field it sets, and for every delivery one frame settles)
        if at is None or at[0] is not ts or at[1] is not packet:
            at = _last_at = (ts, packet)
        if by == "sender":
            if self.snd_settled is None:
                self.snd_settled = at
        elif self.rcv_settled is None:
            self.rcv_settled = at
        if self.settled is None:
            self.settled = at


# the (time, packet) of the last settlement (DeliveryRecord.settle): the deliveries of a disposition's
# range share it
_last_at = None

# a link's live deliveries give back their folded head once LIVE_TRIM slots long and half the list;
# they are packed again when empty slots outnumber them by more than LIVE_PACK + 4 per delivery
LIVE_TRIM = 256
LIVE_PACK = 4096


class LiveDeliveries:
    """The deliveries of a link not folded yet (``Link.live``), in the order they were added (first
    transfers; one made an object again by a disposition comes last): a list with a slot each, the
    slot of a folded one emptied.  Each delivery knows its slot (``DeliveryRecord.live_at``, counted from
    the first slot ever), so adding and dropping one are list operations, not a dict's."""

    __slots__ = ("slots", "off", "head", "n")

    def __init__(self):
        self.slots = []
        self.off = 0  # slots given back before slots[0]
        self.head = 0  # slots before it are empty
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def add(self, x) -> None:
        x.live_at = self.off + len(self.slots)
        self.slots.append(x)
        self.n += 1

    def drop(self, x) -> bool:
        """``x`` leaves (folded or compacted); False if it was not here."""
        slots = self.slots
        i = x.live_at - self.off
        if i < 0 or i >= len(slots) or slots[i] is not x:
            return False
        slots[i] = None
        self.n -= 1
        if self.n == 0:
            self.off += len(slots)
            slots.clear()
            self.head = 0
            return True
        h = self.head
        k = len(slots)
        if i == h:
            while h < k and slots[h] is None:
                h += 1
            if 2 * h >= k and h >= LIVE_TRIM:
                del slots[:h]
                self.off += h
                h = 0
            self.head = h
        elif k - h > 4 * self.n + 64 and k - h > LIVE_PACK + 4 * self.n:
            self._pack()
        return True

    def _pack(self) -> None:
        """Only the deliveries, in their order, in new slots (an old one held the head)."""
        off = self.off + len(self.slots)
        kept = [x for x in self.slots if x is not None]
        for j in range(len(kept)):
            kept[j].live_at = off + j
        self.slots = kept
        self.off = off
        self.head = 0

    def values(self) -> list:
        """The deliveries, in their order (a new list)."""
        return [x for x in self.slots if x is not None]

    def __iter__(self):
        return iter(self.values())

