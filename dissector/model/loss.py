"""Loss records: what a connection's capture lost, per peer (principle 7: gaps are events).

A :class:`LossRecord` is made at a connection's first loss (``_ConnBase.loss`` is None until
then) and keeps, per sending peer ``d`` (0 the client, 1 the server), named fields where there
was a 10-slot list: TCP gaps and the bytes missing in them, bytes skipped to resynchronise the
framing, the time of the latest loss, and whether bytes were sent before the capture began.
"""

from __future__ import annotations


class LossRecord:
    __slots__ = ("gaps", "missing", "skipped", "last", "before", "absent")

    def __init__(self):
        self.gaps = [0, 0]  # TCP gaps in the bytes peer d sent
        self.missing = [0, 0]  # bytes missing in those gaps
        self.skipped = [0, 0]  # bytes skipped to resynchronise (or held by a frame never completed)
        self.last = [None, None]  # time of the latest loss
        self.before = [False, False]  # peer d sent bytes before the capture started
        self.absent = [False, False]  # none of peer d's packets is in the capture (one direction captured)

    def note(self, d, missing, skipped, ts, before) -> None:
        """Bytes peer d sent were lost: ``missing`` in a gap, ``skipped`` to resynchronise, or
        (``before``) sent before the capture started."""
        if missing:
            self.gaps[d] += 1
            self.missing[d] += missing
        self.skipped[d] += skipped
        self.last[d] = ts
        if before:
            self.before[d] = True

    def lost(self, d) -> bool:
        """Frames peer d sent may be missing (a gap, bytes skipped, or bytes before the capture)."""
        return bool(self.gaps[d] or self.skipped[d] or self.before[d] or self.absent[d])

    def mark(self, d) -> int:
        """A number that grows with every loss of peer d's bytes (a gap, bytes skipped): two marks
        differ when bytes of d were lost between them."""
        return self.gaps[d] + self.skipped[d]

    def lost_after(self, d, ts) -> bool:
        """Peer d lost bytes (a gap or a resynchronisation) noticed after ``ts`` (None: at any time);
        always, when none of d's packets was captured."""
        if self.absent[d]:
            return True
        if not (self.gaps[d] or self.skipped[d]) or self.last[d] is None:
            return False
        return ts is None or self.last[d] > ts
