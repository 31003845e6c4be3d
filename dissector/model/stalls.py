"""Credit and window stalls: :class:`Stall`, an interval in which a sender had to wait for its peer.

The kinds, how each begins and ends, and how waiting / idle are told apart are described under
"Stalls" in :mod:`amqp_dissect.model.state`.
"""

from __future__ import annotations

#: a transfer of the sender at most this long (nanoseconds: 10 ms) after the frame that ended a
#: stall shows that the sender was waiting to send (when no available says so)
AT_ONCE = 10_000_000
#: how a stall ends that, with nothing else to go by, makes it an idle period
IDLE_ENDS = ("detach", "end", "close", "transport")


class Stall:
    """An interval in which a sender could not send (see "Stalls" in the module docstring).

    ``exhausted`` / ``exhausted_packet``: the frame that used up the credit (or window).
    ``start`` / ``start_packet``: when the stall began: the last frame of the delivery that used
    up the credit (None while that delivery is still being sent: ``busy`` is it), or later, the
    sender's flow that first showed a message waiting after it had shown none.
    ``avail``: True / False when the sender's available showed messages waiting / none (None: it
    never said), ``next_ts``: time of the sender's first transfer after the end (link, or
    session for a session-window stall); ``avail_seen``: (available, time, packet, left) of the first
    report of messages waiting during the stall (the diagnoses' evidence; ``left``: what was left of
    the sender's last report when the stall began, at the frame that began it)."""
    __slots__ = (
        "conn", "session", "link", "direction", "kind", "start", "start_packet",
        "end", "end_packet", "ended_by", "exhausted", "exhausted_packet", "busy", "avail", "next_ts",
        "avail_seen",
    )

    def __init__(self, conn, session, link, direction, kind, ts, packet, busy=None):
        self.conn = conn
        self.session = session
        self.link = link  # Link or None (session-window stall without a transfer)
        self.direction = direction  # the sending peer
        self.kind = kind
        self.exhausted = ts
        self.exhausted_packet = packet
        self.busy = busy
        self.start = ts if busy is None else None
        self.start_packet = packet if busy is None else None
        self.end = None
        self.end_packet = None
        self.ended_by = None
        self.avail = None
        self.next_ts = None
        self.avail_seen = None  # (available, time, packet, left) of the first report of messages waiting

    def close(self, ts, packet, ended_by):
        if self.end is None:
            self.end = ts
            self.end_packet = packet
            self.ended_by = ended_by
            if self.start is not None:  # (a busy one never began: it is dropped)
                if self.kind == "session-window":
                    self.session.after_win[self.direction] = self
                elif self.link is not None:
                    self.link.after_stall = self

    def saw_available(self, av, ts, packet, left=False):
        """The sender's available (reported in a flow, or ``left`` of its last report at the start)
        during the stall."""
        if self.end is not None:
            return
        if av > 0:
            if self.avail_seen is None:
                self.avail_seen = (av, ts, packet, left)
            if self.avail is False and self.start is not None and ts > self.start:
                # it had shown nothing waiting: the stall begins when a message is known to wait
                self.start = ts
                self.start_packet = packet
            self.avail = True
        elif self.avail is None:
            self.avail = False

    def waiting(self):
        """(waiting, evidence): True / False from the sender's available ("available"); True when
        its first transfer after the end came within AT_ONCE ("transfer"; AT_ONCE is below the clock
        steps' minimum, amqp_dissect.clock); else (None, "none")."""
        if self.avail is not None:
            return self.avail, "available"
        # (a transfer "before" the end is a step back of the capture clock between them: no evidence)
        if self.next_ts is not None and self.end is not None and 0 <= self.next_ts - self.end <= AT_ONCE:
            return True, "transfer"
        return None, "none"

    def idle(self) -> bool:
        """An idle period, not a stall: the sender showed nothing waiting, or (nothing showing either
        way) it ended at detach / end / close / transport end / the end of the capture with no
        transfer after it.  A drain stall is never idle."""
        if self.kind == "drain":
            return False
        w = self.waiting()[0]
        if w is not None:
            return not w
        return self.next_ts is None and (self.end is None or self.ended_by in IDLE_ENDS)
