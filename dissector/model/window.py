"""The session window (spec 2.5.6): one object per session, unsigned 32-bit arithmetic.

Per sending peer ``d`` a :class:`SessionWindow` keeps next-outgoing-id (incremented per transfer
*frame*) and the window limit ``next-incoming-id_peer + incoming-window_peer`` from the receiving
peer's last begin / flow (the peer's begin, and a flow without next-incoming-id, use d's
initial-outgoing-id); remote-incoming-window is what is left of that grant
(:func:`~amqp_dissect.model.state.grant_left`).  Its rules are ``(state, input) -> next state``:
a begin, a flow, a transfer frame; each returns what it found (a count re-synchronised after a
gap, a frame beyond the window) and the caller records it; stalls are the caller's.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .serial import SERIAL_MASK

# what :meth:`SessionWindow.send` found (bits of ``SessionWindow.found``)
RESYNCED = 1  # the sender's count was behind the receiver's: re-synchronised
BEYOND = 2  # the frame went beyond the window (under the latest and the previous grant)
_MASK = SERIAL_MASK  # (a C constant when compiled: see window.pxd)
# SessionWindow.send_left's "unknown" (send's None): no window left is that far below zero
UNKNOWN_LEFT = -(1 << 62)

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from .serial import grant_left, serial_add, serial_diff


class SessionWindow:
    __slots__ = ("init_noid", "noid", "limit", "prev", "pending", "last_iw", "last_ow", "found")

    def __init__(self):
        # all per sending peer d
        self.init_noid = [None, None]  # initial-outgoing-id (d's begin)
        self.noid = [None, None]  # next-outgoing-id
        self.limit = [None, None]  # window limit for transfers sent by d
        self.prev = [None, None]  # the window limit before the receiving peer's latest begin/flow
        self.pending = [None, None]  # incoming-window granted to d before d's count was known
        self.last_iw = [None, None]  # incoming-window of d's last begin / flow
        self.last_ow = [None, None]  # outgoing-window of d's last begin / flow
        self.found = 0  # what the last send found (RESYNCED, BEYOND)

    def riw(self, d):
        """remote-incoming-window of sending peer d (None if unknown): unsigned 32-bit, from the
        receiving peer's last incoming-window (:func:`grant_left`)."""
        if self.limit[d] is None or self.noid[d] is None:
            return None
        iw = self.last_iw[1 - d]
        if iw is None:
            return serial_diff(self.limit[d], self.noid[d])
        return grant_left(self.limit[d], iw, self.noid[d])

    def beyond(self, d) -> bool:
        """No window under the peer's latest *and* previous announcement (the latest may be in flight)."""
        riw = self.riw(d)
        if riw is None or riw > 0:
            return False
        return self.prev[d] is None or serial_diff(self.prev[d], self.noid[d]) <= 0

    def begin(self, d, noid, iw, ow) -> None:
        """d's begin: its initial-outgoing-id and windows."""
        self.last_iw[d] = iw
        self.last_ow[d] = ow
        if noid is not None:
            self.init_noid[d] = noid
            self.noid[d] = noid
            if self.pending[d] is not None and self.limit[d] is None:
                self.limit[d] = serial_add(noid, self.pending[d])

    def grant(self, sender, nii, iw) -> bool:
        """The receiving peer (1-sender) announced next-incoming-id ``nii`` (None: from the
        sender's initial-outgoing-id) and incoming-window ``iw``.  False: kept for later (the
        sender's count is not known yet)."""
        base = nii if nii is not None else self.init_noid[sender]
        if base is None:
            self.pending[sender] = iw
            return False
        self.prev[sender] = self.limit[sender]
        self.limit[sender] = serial_add(base, iw)
        return True

    def forget(self, sender) -> bool:
        """The receiving peer's bytes were lost (a flow among them may have granted more): the
        window of ``sender`` is unknown until its next flow.  True when one was known."""
        if self.limit[sender] is None:
            return False
        self.limit[sender] = None
        self.prev[sender] = None
        return True

    def own_count(self, d, noid, lost) -> int:
        """d's flow said its next-outgoing-id ``noid``: 1 when d's count was not known (taken),
        2 when it differed after a loss of d's (``lost``: taken, re-synchronised), else 0."""
        if noid is None:
            return 0
        if self.noid[d] is None:
            self.noid[d] = noid
            return 1
        if lost and self.noid[d] != noid:
            self.noid[d] = noid
            return 2
        return 0

    def peer_count(self, sender, nii) -> bool:
        """After a loss of ``sender``'s: the receiver's next-incoming-id ``nii`` is ahead of the
        sender's count (it counted transfers the capture lost): taken.  True when it was."""
        sn = self.noid[sender]
        if nii is not None and sn is not None and serial_diff(sn, nii) < 0:
            self.noid[sender] = nii
            return True
        return False

    def send(self, d, lossy):
        """A transfer frame of d: counts it (next-outgoing-id + 1) and returns the window left after
        it (None: unknown).  ``found`` says what it found: RESYNCED (d's count was behind the
        receiver's after a loss, ``lossy``: re-synchronised first), BEYOND (the frame went beyond
        the window: left < 0)."""
        left = self.send_left(d, lossy)
        return None if left == UNKNOWN_LEFT else left

    def send_left(self, d, lossy):
        """:meth:`send`, the window left a C integer when compiled (no int object per frame):
        UNKNOWN_LEFT when unknown."""
        self.found = 0
        noid = self.noid[d]
        if noid is None:
            return UNKNOWN_LEFT
        wl = self.limit[d]
        n = noid  # (C integers when compiled: one int object made per frame, the count's)
        if wl is None:
            self.noid[d] = serial_add(n, 1)
            return UNKNOWN_LEFT
        iw = self.last_iw[1 - d]
        lim = wl
        size = 0
        left = 0
        known = True
        if iw is None:
            left = serial_diff(lim, n)
        else:  # (grant_left, inline: what is left of the grant iw ending at lim)
            size = iw
            used = serial_diff(n, (lim - size) & _MASK)
            if used < 0:
                known = False
            else:
                left = size - used
        if not known:
            if not lossy:
                self.noid[d] = serial_add(n, 1)
                return UNKNOWN_LEFT
            # d's count is behind the receiver's: its transfers were lost; re-synchronised
            n = (lim - size) & _MASK
            left = size
            self.found = RESYNCED
        # (unsigned: a window of 2**31-1 or more never wraps negative)
        if left <= 0 and (self.prev[d] is None or serial_diff(self.prev[d], n) <= 0):
            self.found |= BEYOND
        self.noid[d] = serial_add(n, 1)
        return left - 1
