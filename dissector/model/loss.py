"""Loss records: what a connection's capture lost, per peer (principle 7: gaps are events).

A :class:`LossRecord` is made at a connection's first loss (``ConnectionBase.loss`` is None until
then) and keeps, per sending peer ``d`` (0 the client, 1 the server), named fields where there
was a 10-slot list: TCP gaps and the bytes missing in them, bytes skipped to resynchronise the
framing, the time of the latest loss, and whether bytes were sent before the capture began.
"""

from __future__ import annotations


# the shared pairs of a record's defaults (immutable: a write goes to the record's own list, _own)
_ZEROS = (0, 0)
_NONES = (None, None)
_FALSES = (False, False)


def _own(pair):
    """``pair`` as a list of the record's own: ``pair`` itself when it is one, else a new list of it."""
    if type(pair) is list:
        return pair
    return [pair[0], pair[1]]


# per direction: the last pair _set_pair made of _NONES, (ts, None) or (None, ts), handed to the next record
# given the same time object (immutable as every tuple pair: issue 40, the one-direction note of many
# connections at the capture's end, one pair for all of them, not one each)
_ONE_TIMES = [_NONES, _NONES]


def _set_pair(pair, d, value):
    """The tuple ``pair`` with direction ``d``'s item ``value`` (a new tuple, or a shared one: the pair is
    never written)."""
    if pair is _NONES:
        return _one_time(d, value)
    return (value, pair[1]) if d == 0 else (pair[0], value)


def _one_time(d, value):
    """``(value, None)`` (d 0) or ``(None, value)`` (d 1): the one made last when ``value`` is its time."""
    recent = _ONE_TIMES[d]
    if recent[d] is value:
        return recent
    recent = (value, None) if d == 0 else (None, value)
    _ONE_TIMES[d] = recent
    return recent


def _copied(pair):
    """A record's pair for a copy of the record: a new list of a list (the record's own), a tuple as it is."""
    return [pair[0], pair[1]] if type(pair) is list else pair


# per direction: the record one_way_record made last, handed to the next connection given the same time object
_ONE_WAY = [None, None]


def one_way_record(d, ts):
    """The loss record of a connection whose first loss is the note that none of peer ``d``'s packets is in the
    capture, at ``ts``: what ``note(d, 0, 0, ts, False)`` and ``note_absent(d)`` make of a new record.  One
    record (``shared``) for every connection given the same time object, as the connections noted at the capture's
    end are (issue 40: about 120 bytes each); a connection that writes to it takes a copy first
    (ConnectionBase.own_loss)."""
    rec = _ONE_WAY[d]
    if rec is not None and rec.last[d] is ts:
        return rec
    rec = LossRecord()
    rec.note(d, 0, 0, ts, False)
    rec.note_absent(d)
    rec.shared = True
    _ONE_WAY[d] = rec
    return rec


def _with_true(pair, d):
    """Flag pair ``pair`` with direction ``d``'s set: one of the shared, immutable pairs."""
    return (True, True) if pair[1 - d] else ((True, False) if d == 0 else (False, True))


class LossRecord:
    __slots__ = ("gaps", "missing", "skipped", "last", "before", "absent", "cut", "hidden", "snap_length", "gap_last",
                 "shared")

    def __init__(self):
        # per peer d, each a pair: the shared immutable pair of its defaults until its first write (the
        # record's own list from then on, see _own): a connection that loses one direction's bytes
        # once (a one-direction note, a single gap) owns only the pairs it wrote
        self.gaps = _ZEROS  # TCP gaps in the bytes peer d sent
        self.missing = _ZEROS  # bytes missing in those gaps
        self.skipped = _ZEROS  # bytes skipped to resynchronise (or held by a frame never completed)
        self.last = _NONES  # time of the latest loss
        # (flags: always a shared pair, see _with_true)
        self.before = _FALSES  # peer d sent bytes before the capture started
        self.absent = _FALSES  # none of peer d's packets is in the capture (one direction captured)
        # bytes of peer d the capture's snap length cut off (on the wire, not captured: not loss), and
        # how many of those cuts may hold whole frames (frames of d may be missing: "unknown")
        self.cut = _ZEROS
        self.hidden = _ZEROS
        self.snap_length = None  # the capture length of the cut packets
        self.gap_last = _NONES  # time of the latest loss of peer d's bytes (not a cut)
        # the record of many connections (one_way_record): never written, a connection that writes to it
        # takes a copy of its own first (ConnectionBase.own_loss)
        self.shared = False

    def copy(self):
        """A record of its own with the same losses (its lists copied, its tuples shared as they are)."""
        x = LossRecord()
        x.gaps = _copied(self.gaps)
        x.missing = _copied(self.missing)
        x.skipped = _copied(self.skipped)
        x.last = _copied(self.last)
        x.before = self.before
        x.absent = self.absent
        x.cut = _copied(self.cut)
        x.hidden = _copied(self.hidden)
        x.snap_length = self.snap_length
        x.gap_last = _copied(self.gap_last)
        return x

    def note(self, d, missing, skipped, ts, before) -> None:
        """Bytes peer d sent were lost: ``missing`` in a gap, ``skipped`` to resynchronise, or
        (``before``) sent before the capture started."""
        if missing:
            gaps = self.gaps = _own(self.gaps)
            gaps[d] += 1
            lost = self.missing = _own(self.missing)
            lost[d] += missing
        if skipped:
            sk = self.skipped = _own(self.skipped)
            sk[d] += skipped
        # (the times: a tuple of the record's own while the pair is not a list yet, and one tuple for both while
        # they are equal, as at a connection's one loss: issue 40, a one-direction note per connection)
        last = self.last
        if type(last) is list:
            last[d] = ts
        else:
            last = self.last = _set_pair(last, d, ts)
        gap_last = self.gap_last
        if type(gap_last) is list:
            gap_last[d] = ts
        else:
            gap_last = _set_pair(gap_last, d, ts)
            self.gap_last = last if type(last) is tuple and gap_last == last else gap_last
        if before and not self.before[d]:
            self.before = _with_true(self.before, d)

    def note_cut(self, d, nbytes, hidden, snap_length, ts) -> None:
        """``nbytes`` bytes peer d sent were cut off by the snap length; ``hidden``: frames may be
        among them (their headers were cut too)."""
        if nbytes:
            cut = self.cut = _own(self.cut)
            cut[d] += nbytes
        if snap_length is not None:
            self.snap_length = snap_length
        if hidden:
            hid = self.hidden = _own(self.hidden)
            hid[d] += 1
            last = self.last = _own(self.last)
            last[d] = ts

    def note_absent(self, d) -> None:
        """None of peer d's packets is in the capture (one direction captured)."""
        if not self.absent[d]:
            self.absent = _with_true(self.absent, d)

    def forget_last(self, d) -> None:
        """No loss of peer d's bytes to date (the record made for a cut of the snap length)."""
        if self.last[d] is not None:
            last = self.last = _own(self.last)
            last[d] = None

    def hides(self) -> bool:
        """Cuts of the snap length may hide frames of either peer."""
        return bool(self.hidden[0] or self.hidden[1])

    def lost(self, d) -> bool:
        """Frames peer d sent may be missing (a gap, bytes skipped, bytes before the capture, none of
        its packets captured, or a cut of the snap length that may hold frames)."""
        return bool(self.gaps[d] or self.skipped[d] or self.before[d] or self.absent[d] or self.hidden[d])

    def mark(self, d) -> int:
        """A number that grows with every loss of peer d's bytes (a gap, bytes skipped): two marks
        differ when bytes of d were lost between them."""
        return self.gaps[d] + self.skipped[d]

    def cut_mark(self, d) -> int:
        """A number that grows with every cut of the snap length that may hide frames of peer d
        (not loss): two marks differ when such a cut came between them."""
        return self.hidden[d]

    def missing_how(self, d) -> str:
        """How frames of peer d may have gone missing, for an inferred line: "lost" (gaps, bytes
        skipped or sent before the capture), "not captured (snap length N)" (cuts of the snap
        length only), or both named when both occurred."""
        lost = self.gaps[d] or self.skipped[d] or self.before[d]
        if not self.hidden[d]:
            return "lost"
        cut = "not captured (snap length " + (str(self.snap_length) if self.snap_length is not None else "?") + ")"
        return "lost or " + cut if lost else cut

    def lost_in_gap_after(self, d, ts) -> bool:
        """Peer d lost bytes (a gap, a resynchronisation: not a cut of the snap length) noticed after
        ``ts`` (None: at any time); always, when none of d's packets was captured."""
        if self.absent[d]:
            return True
        if not (self.gaps[d] or self.skipped[d]) or self.gap_last[d] is None:
            return False
        return ts is None or self.gap_last[d] > ts

    def lost_after(self, d, ts) -> bool:
        """Peer d lost bytes (a gap, a resynchronisation, or a cut that may hold frames) noticed after
        ``ts`` (None: at any time); always, when none of d's packets was captured."""
        if self.absent[d]:
            return True
        if not (self.gaps[d] or self.skipped[d] or self.hidden[d]) or self.last[d] is None:
            return False
        return ts is None or self.last[d] > ts
