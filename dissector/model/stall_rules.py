"""When a stall (a sender waiting for its peer) opens and begins: the rules over :class:`Stall`.

:class:`StallRules` is a room of its own: it keeps the run's stalls; the session, link and transfer
rooms that see a stall open or begin call it through the reference the tracker gave them.  Stalls
are no findings (they are measurements), so this room records nothing in the ledger.
"""

from __future__ import annotations

from .state import Stall


class StallRules:
    """The stalls of the run, opened and begun here (see the module docstring)."""

    def __init__(self):
        self.stalls: list = []  # Stall

    def open_stall(self, c, s, link, d, kind, f) -> Stall:
        # a delivery still being sent when the link-credit ran out (it used the last credit, or the
        # receiver lowered it meanwhile): the sender is busy, the stall begins at its last frame
        busy = link.partial if kind == "link-credit" else None
        st = Stall(c, s, link, d, kind, f.ts, f.packet, busy)
        if busy is None:
            self.stalls.append(st)
            c.stalls.append(st)
        if kind == "session-window":
            s.win_stall[d] = st
        elif kind == "drain":
            link.drain_stall = st
        else:
            link.stall = st
        if link is not None and kind != "session-window" and link.available is not None:
            # what is left of the sender's last available; less than 0: that report is out of date
            left = link.available - (link.n_deliveries - link.avail_base)
            if left >= 0:
                st.saw_available(left, f.ts, f.packet, True)
        return st

    def stall_begins(self, link, st, f):
        """The delivery that used up the credit is complete (or aborted): the stall begins."""
        st.busy = None
        if st.end is None and sender_active(link):
            st.start = f.ts
            st.start_packet = f.packet
            self.stalls.append(st)
            link.conn.stalls.append(st)
        else:
            link.stall = None


def sender_active(link) -> bool:
    """Neither the link, its session nor its connection has begun to end: its sender may send."""
    s = link.session
    c = link.conn
    return (link.detach[0] is None and link.detach[1] is None and s.end[0] is None and s.end[1] is None
            and c.close[0] is None and c.close[1] is None and link.terminated is None)
