"""Clock steps: the capture's time going backwards (see docs/definitions.md, "Clock steps").

A capture's records are numbered in the order they were written; their times normally go up.  A
record earlier than the record before it by more than :data:`STEP_MIN_NS` whose next record is
also earlier than that record before it is a **step back** of the capture clock (an NTP step,
files of two hosts with different clocks): from the step on, the times run on a different
clock.  A single record behind its neighbours, the next one back in time order (a packet a
capture queue wrote late, two interfaces' jitter), is not a step: each packet keeps its own time.
Backward moves of :data:`STEP_MIN_NS` or less are never steps.  A step at the last record
cannot be told from a late record: it is not claimed.

A step forward (the clock jumps ahead) cannot be told from a pause of the traffic: it is not
detected, and times that span one are the capture's.

:class:`ClockWatch` is fed the records that may matter (only a record behind its predecessor,
and the one after a candidate, need to reach it: ``pending`` says when the next one must) and
keeps the steps found, :class:`ClockStep` each.  A duration between two packets is *unknown
(clock step)* when a step lies between them (:meth:`ClockWatch.spans`).

A reader that splits the capture (the archive's byte ranges and files) keeps the few records the
watch may need of each part (:class:`ClockPoints`) and replays them, part after part in the
capture's order, to one watch (:meth:`ClockWatch.replay`): the same steps; the parts' tasks are
then told the steps (:meth:`ClockWatch.of`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from .times import NS

#: a record earlier than its predecessor by at most this is jitter, never a clock step (ns)
STEP_MIN_NS = NS // 10
#: the reason a duration across a clock step is null, as tables and the report say it
CLOCK_STEP = "unknown (clock step)"


class ClockStep(NamedTuple):
    """The capture clock stepped back at ``packet`` (a capture record number): its time ``ts``
    is ``size`` nanoseconds (negative) after ``before``, the time of the record just before it."""

    packet: int
    ts: int
    before: int
    size: int

    def as_dict(self) -> dict:
        return {"packet": self.packet, "time": self.ts, "before": self.before, "size": self.size / NS}


class ClockWatch:
    """Finds the steps back of a capture's clock (module docstring), fed in record order."""

    __slots__ = ("steps", "pending", "_cand", "_packets")

    def __init__(self):
        self.steps: list[ClockStep] = []
        self.pending = False  # a candidate waits for the next record to confirm or drop it
        self._cand: ClockStep | None = None
        self._packets: list[int] = []  # the steps' packets, sorted (record order)

    @classmethod
    def of(cls, steps) -> "ClockWatch":
        """A watch that knows ``steps`` already (:class:`ClockStep` or their :meth:`ClockStep.as_dict`,
        in record order): what a part of the work that did not read every record is told of the
        capture's steps (an archive's flow task, a ``-j`` report's merge)."""
        w = cls()
        for s in steps:
            if isinstance(s, dict):
                s = ClockStep(s["packet"], s["time"], s["before"], s["time"] - s["before"])
            w.steps.append(ClockStep(*s))
            w._packets.append(s[0])
        return w

    def replay(self, points, prev: int | None) -> int | None:
        """Feed the watch the records of one part of the capture (a file's byte range, in record
        order after the parts before it) as :func:`clock_points` kept them: ``(packet, ts, prev)``
        with ``prev`` None for the part's first record, whose predecessor is ``prev`` here (the
        time of the last record before the part, None at the capture's start).  Returns ``prev``
        for the next part: the time of this part's last point (pass :attr:`ClockPoints.last` on
        instead when the part's last record was not kept)."""
        for packet, ts, before in points:
            before = prev if before is None else before
            if before is not None and (ts < before or self.pending):
                self.see(packet, ts, before)
            prev = ts
        return prev

    def see(self, packet: int, ts: int, prev: int) -> None:
        """A record (``packet``, ``ts``) whose predecessor's time is ``prev``, called when
        ``ts < prev`` or while :attr:`pending`."""
        cand = self._cand
        if cand is not None:
            self._cand = None
            self.pending = False
            if ts < cand.before:  # the clock stayed back: a step at the candidate
                self.steps.append(cand)
                self._packets.append(cand.packet)
        if ts < prev and prev - ts > STEP_MIN_NS:
            self._cand = ClockStep(packet, ts, prev, ts - prev)
            self.pending = True

    def spans(self, start_packet, end_packet) -> bool:
        """Whether a step lies between two packets (a step at ``end_packet`` counts, one at
        ``start_packet`` does not); False when either is None."""
        ps = self._packets
        if not ps or start_packet is None or end_packet is None:
            return False
        if end_packet < start_packet:
            start_packet, end_packet = end_packet, start_packet
        i = bisect_right(ps, start_packet)
        return i < len(ps) and ps[i] <= end_packet

    def epoch(self, packet) -> int:
        """How many steps came at or before ``packet`` (0 for None): times compare within an epoch;
        a later epoch is later, whatever its times say."""
        return bisect_right(self._packets, packet) if packet is not None else 0

    def steps_within(self, start_packet, end_packet) -> list[ClockStep]:
        """The steps between two packets (as :meth:`spans` counts them)."""
        if start_packet is None or end_packet is None:
            return []
        return [s for s in self.steps if start_packet < s.packet <= end_packet]


class ClockPoints:
    """The records of one part of a capture a :class:`ClockWatch` may need, kept while the part is
    read in record order (:meth:`add` at every record, cheap): its first record (its predecessor is
    in another part) and the one after it, every record more than :data:`STEP_MIN_NS` behind its
    predecessor (a candidate step) with the record after it, but a candidate the record after it
    shows is no step is let go (with that record, unless it is a candidate itself): what is kept
    grows with the steps, as the watch's list does, not with the records.  ``points``:
    ``(index, ts, prev)``, ``prev`` None for the first record; ``last``: the last record's time.
    :meth:`ClockWatch.replay` feeds them to a watch in the capture's order (each part's first
    record after the last record of the part before), which then finds what a watch fed every
    record finds: a record left out would have changed nothing in it."""

    __slots__ = ("points", "last", "_next", "_pinned")

    def __init__(self):
        self.points: list = []
        self.last = None
        self._next = False  # the last point waits for the next record (the first record, a candidate)
        self._pinned = False  # the last point is kept whatever comes next (it decides the one before it)

    def add(self, index: int, ts: int) -> None:
        prev = self.last
        self.last = ts
        pts = self.points
        if prev is None:
            pts.append((index, ts, None))
            self._next = True
            self._pinned = True
            return
        cand = prev - ts > STEP_MIN_NS
        if self._next:
            before = pts[-1][2]
            if self._pinned or before is None or ts < before:  # (a step there, or it must stay: this decides)
                pts.append((index, ts, prev))
                self._pinned = True
                self._next = cand
                return
            pts.pop()  # a candidate the clock did not stay behind: no step, nothing the watch needs
        if cand:
            pts.append((index, ts, prev))
            self._pinned = False
        self._next = cand
