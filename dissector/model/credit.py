"""Link credit (spec 2.6.7): one object per link, unsigned 32-bit arithmetic.

A :class:`LinkCredit` keeps the sender's delivery-count and the *delivery-limit* the receiver set
(``delivery-count_rcv + link-credit_rcv``; with no delivery-count in the receiver's flow, the
initial-delivery-count of the sender's attach).  The sender's link-credit is what is left of the
receiver's latest grant (:func:`~amqp_dissect.model.state.grant_left`).  Its rules are
``(state, input) -> next state``: an attach, a flow of either peer, a delivery sent; each returns
what it found (True: a value was assumed or re-synchronised) and the caller records it (the
tracker's notes); stalls and violations are the caller's.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .serial import SERIAL_MASK

_M32C = SERIAL_MASK  # (a C constant when compiled: see credit.pxd)

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from .serial import grant_left, serial_add, serial_diff


class LinkCredit:
    __slots__ = ("initial", "count", "limit", "prev", "pending", "granted", "lost", "grants", "count_low", "last_count", "guessed", "lowered")

    def __init__(self):
        self.initial = None  # the sender's initial-delivery-count (its attach)
        self.count = None  # the sender's delivery-count
        self.limit = None  # the delivery-limit the receiver set
        self.prev = None  # the delivery-limit before the receiver's latest flow (it may be in flight)
        self.pending = None  # link-credit granted before the sender's delivery-count was known
        self.granted = False  # the sender had credit once
        self.lost = False  # bytes of the receiver were lost since its last flow: credit unknown
        self.grants = [None, None]  # per peer: the link-credit of its last flow
        # the sender's delivery-count is only a lower bound (and left() an upper bound): deliveries
        # lost whole in a gap may have been this link's (the delivery-ids did not say which link);
        # exact again at the sender's next flow
        self.count_low = False
        # the delivery-count right after the link's latest delivery in the capture (None: not known
        # from the sender's own numbers); guessed: the delivery-count was last set from the receiver's
        self.last_count = None
        self.guessed = False
        self.lowered = 0  # flows of the receiver that set a lower delivery-limit than the one before

    def left(self, r):
        """link-credit ``limit - count``: unsigned 32-bit, measured from receiver ``r``'s last grant
        (``r`` -1: not known); negative when the sender went beyond it; None when unknown (the
        sender's delivery-count is behind the receiver's: transfers the capture lost).  With
        :attr:`count_low` the delivery-count is a lower bound, so this is an upper bound."""
        if self.count is None or self.limit is None:
            return None
        lc = self.grants[r] if r >= 0 else None
        if lc is None:
            return serial_diff(self.limit, self.count)
        return grant_left(self.limit, lc, self.count)

    def left_sign(self, r) -> int:
        """What :meth:`left` says, without the number: 1 credit left, 0 none (or beyond it), -1 unknown
        (None).  C integers when compiled: no int object per transfer."""
        count = self.count
        limit = self.limit
        if count is None or limit is None:
            return -1
        lc = self.grants[r] if r >= 0 else None
        lim = limit
        cnt = count
        if lc is None:
            return 1 if serial_diff(lim, cnt) > 0 else 0
        size = lc  # (grant_left, inline)
        used = serial_diff(cnt, (lim - size) & _M32C)
        if used < 0:
            return -1
        return 1 if size - used > 0 else 0

    def beyond(self, r) -> bool:
        """No credit under the receiver's latest *and* previous limit (the latest may be in flight)."""
        if self.left_sign(r) != 0:  # (unknown, or credit left)
            return False
        return self.prev is None or serial_diff(self.prev, self.count) <= 0

    def sender_attach(self, idc) -> None:
        """The sender's attach said its initial-delivery-count ``idc``."""
        self.initial = idc
        if self.count is None:
            self.count = idc
            self.guessed = False
        if self.pending is not None:
            self.limit = serial_add(idc, self.pending)
            self.pending = None
        elif self.limit is None:
            self.limit = idc

    def sender_flow(self, dc, lc) -> bool:
        """A flow of the sender (delivery-count ``dc``, link-credit ``lc``).  True: its
        delivery-count was not known before (the capture joined mid-link)."""
        first = False
        if dc is not None:
            first = self.count is None
            self.count = dc
            self.guessed = False
            self.count_low = False
        if self.limit is None and lc is not None and self.count is not None:
            self.limit = serial_add(self.count, lc)
        return first

    def receiver_flow(self, dc, lc, known) -> bool:
        """A flow of the receiver granting ``lc`` from its delivery-count ``dc`` (None: from the
        initial-delivery-count).  True: the sender's delivery-count was assumed to be ``dc`` (a
        link joined mid-way, ``known`` False)."""
        if lc is None:
            return False
        base = dc if dc is not None else self.initial
        if base is None:
            self.pending = lc
            return False
        self.prev = self.limit
        self.limit = serial_add(base, lc)
        if self.prev is not None and serial_diff(self.limit, self.prev) < 0:
            self.lowered += 1  # (a sender that had not seen this flow yet may use the higher limit)
        self.lost = False
        if self.count is None and dc is not None and not known:
            self.count = dc
            self.guessed = True
            return True
        return False

    def resync_count(self, dc) -> bool:
        """After a gap of the sender: the receiver's delivery-count ``dc`` is ahead of the sender's
        (it counted deliveries the capture lost): taken.  True when it was."""
        if dc is not None and self.count is not None and serial_diff(self.count, dc) < 0:
            self.count = dc
            self.guessed = True
            return True
        return False

    def resync_from_grant(self, r, g) -> bool:
        """After a gap: the sender's delivery-count is behind the start of the grant of receiver
        ``r`` (:meth:`left` unknown); it is re-synchronised to the start of peer ``g``'s last grant
        (``g`` is ``r`` unless the link's roles conflict).  True when it was."""
        if self.limit is None or self.count_low or self.left(r) is not None:
            return False
        lc = self.grants[g]
        if lc is None:
            return False
        self.count = (self.limit - lc) & SERIAL_MASK
        self.guessed = True
        return True

    def lost_whole(self, n, known) -> None:
        """``n`` deliveries were lost whole in a gap of the sender (their delivery-ids were skipped)
        since the link's latest delivery; ``known``: they were this link's (its delivery-count is
        ``n`` past what it was after that delivery, unless a flow since put it further), else they
        may have been (its delivery-count is only a lower bound from now on)."""
        if self.count is None:
            return
        if not known:
            self.count_low = True
        elif self.last_count is not None:
            inferred = serial_add(self.last_count, n)
            if serial_diff(inferred, self.count) >= 0:  # (a guess from the receiver's flow may be behind it)
                self.count = inferred
                self.guessed = False

    def delivered(self) -> None:
        """A delivery of the link's sender: its delivery-count advances by one."""
        self.count = serial_add(self.count, 1)
        self.last_count = None if self.guessed else self.count

    def replay(self, rdc, rlc, sdc) -> bool:
        """The sender became known late: use the receiver's last flow (``rdc``, ``rlc``) and the
        sender's (``sdc``).  True: the delivery-count was assumed from the receiver's."""
        assumed = False
        if self.limit is None and rdc is not None and rlc is not None:
            self.limit = serial_add(rdc, rlc)
            if self.count is None:
                self.count = rdc
                self.guessed = True
                assumed = True
        if sdc is not None and self.count is None:
            self.count = sdc
            self.guessed = False
        return assumed
