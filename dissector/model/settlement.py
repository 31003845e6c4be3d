"""Settlement and outcomes (spec 2.6.12, 3.4): dispositions, delivery states, and folding settled
deliveries into their link's statistics.

:class:`SettlementRules` is a room of its own: it writes what it finds into the ledger the tracker
gave it, finds a disposition's session through the session room, hands transactional states to the
transaction room, and tells the tracker's hooks of each delivery it folds."""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.values import error_info, read_hex as _hex, read_ulong as _ulong
from .serial import SERIAL_HALF as _HALF, SERIAL_MASK
from .state import DISPOSITION_TOUCH_BASE, DISPOSITION_TOUCHES_PER_DELIVERY, FOLD_LAG
from .transitions import SIDES
from .findings import Recorder, strict
from .hooks import Hooks
from .sessions import SessionRules
from .transactions import TransactionRules

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from ..amqp.values import (delivery_state_plan as _state_plan, read_bool as _bool,
                               read_delivery_state as _delivery_state_value, read_uint as _uint)
    from .serial import serial_diff, serial_range_len
    from .state import D_FIRST, D_LAST, D_ROLE, D_SETTLED, D_STATE, KIND_DECLARED, KIND_MODIFIED, KIND_RECEIVED, KIND_REJECTED


class SettleQueue:
    """The lag queue of :class:`SettlementRules` (first in, first out): what a ``deque`` offers its
    readers (``append``, ``popleft``, ``len``, iteration, truth), as C calls when compiled (a
    ``deque``'s methods are Python calls, with an int object for every length compared).  A list
    and the index of its head; the taken slots are dropped once they are half the list."""

    def __init__(self):
        self.items = []
        self.head = 0

    def __len__(self):
        return len(self.items) - self.head

    def size(self):
        """``len(self)`` (a C call when compiled)."""
        return len(self.items) - self.head

    def __iter__(self):
        return iter(self.items[self.head:])

    def append(self, x) -> None:
        self.items.append(x)

    def popleft(self):
        items = self.items
        head = self.head
        if head >= len(items):
            raise IndexError("pop from an empty queue")
        x = items[head]
        items[head] = None
        head += 1
        if head >= 1024 and head * 2 >= len(items):
            del items[:head]
            head = 0
        elif head == len(items):
            items.clear()
            head = 0
        self.head = head
        return x


class SettlementRules:
    """Dispositions, outcomes, folding (see the module docstring)."""

    def __init__(self, ledger: Recorder, session_rules: SessionRules, transaction_rules: TransactionRules,
                 hooks: Hooks):
        self.ledger = ledger
        self.session_rules = session_rules
        self.transaction_rules = transaction_rules
        self.hooks = hooks
        self.settling = SettleQueue()  # deliveries settled by one peer, folded FOLD_LAG settlements later
        self.fold_lag = FOLD_LAG

    def settled(self, dlv) -> None:
        """``dlv`` was settled by a peer.  Once complete and settled by both peers it is folded at
        once; settled by one, it is folded ``fold_lag`` settlements later, so a disposition of the
        other peer that crossed on the wire still finds it (memory stays bounded either way)."""
        link = dlv.link
        if link.tags is not None:  # (its delivery-tag is free again: see TransferRules.tag_check)
            link.untag(dlv.tag, dlv.delivery_id)
        if dlv.folded or link.partial is dlv or self.fold_lag is None:  # None: never fold (tests' oracle)
            return
        if dlv.snd_settled is not None and dlv.rcv_settled is not None:
            self.fold(dlv)
            return
        q = self.settling
        q.append(dlv)
        lag = self.fold_lag
        while q.size() > lag:
            x = q.popleft()
            if not x.folded:
                self.fold(x)

    def fold_lagged(self, lag: int, popped: int, k_hi, k_mid, k_lo) -> int:
        """(``-j``: see :meth:`~amqp_dissect.pipelines.runs.parallel.FlowWorker._folds`) Take what the
        lag queue holds beyond ``lag`` settlements, oldest first, folding each delivery not
        folded yet; each fold gets the key ``(-1, 0, its settlement's position)`` appended to
        ``k_hi``, ``k_mid``, ``k_lo``, the position counting from ``popped`` (settlements taken
        before).  Returns ``popped`` plus the settlements taken."""
        q = self.settling
        while q.size() > lag:
            x = q.popleft()
            if not x.folded:
                self.fold(x)
                k_hi.append(-1)
                k_mid.append(0)
                k_lo.append(popped)
            popped += 1
        return popped

    def fold(self, dlv) -> None:
        """Count ``dlv`` into its link's :class:`DeliveryStats` and forget it (the hooks hear of it first)."""
        dlv.folded = True
        link = dlv.link
        link.live.drop(dlv)
        s = dlv.session
        sender = dlv.direction
        table = s.deliveries[sender]
        table.forget(dlv)
        self.hooks._on_fold(dlv)
        link.stats.add(dlv)
        dlv.payload = None

    def disposition(self, c, d, f, p):
        s = self.session_rules.session_for(c, d, f, "disposition")
        self.session_rules.session_step(s, d, "FRAME", f, "disposition")
        v = f.fields
        role = _bool(v[D_ROLE])
        first = _uint(v[D_FIRST])
        if role is None or first is None:
            return
        last = _uint(v[D_LAST])
        if last is None:
            last = first
        by = "receiver" if role else "sender"
        sender = 1 - d if role else d
        table = s.deliveries[sender]
        n = serial_range_len(first, last)
        if n > _HALF:
            self.ledger.violation(c, d, f, "protocol", "warn",
                            f"disposition from the {SIDES[d]}: last {last} precedes first {first}")
            n, last = 1, first
        if n <= 16:
            hits = table.find_each(first, n)
        else:  # a wide range: the deliveries in it, found by bisection (cost: those it touches)
            hits = self.wide_range(c, d, f, s, table, first, n, by)
            if hits is None:
                return
        missing = n - len(hits)
        if missing:
            missing = self.not_found(c, s, table, sender, first, last, n, missing, len(hits))
        settled = v[D_SETTLED] is True
        state = _delivery_state_value(v[D_STATE])
        plan = None if state is None else _state_plan(state)  # (once for the range)
        named = 0  # presettled deliveries in a receiver's range: the sender forgot them (2.6.12)
        for dlv in hits:
            if d:
                dlv.disp1 += 1
            else:
                dlv.disp0 += 1
            if role and dlv.presettled:
                named += 1
                continue
            if plan is not None:
                self.apply_state(dlv, by, plan, f)
            if settled:
                dlv.settle(by, f.ts, f.packet)
                self.settled(dlv)
        if named:
            self.presettled_named(c, d, f, first, last, named)
        if missing:
            self.unknown_deliveries(c, d, f, s, by, sender, first, last, n, missing, settled, plan)

    def wide_range(self, c, d, f, s, table, first, n, by):
        """The deliveries of a wide disposition range (found by bisection), or None when they are
        more than the session's disposition budget has left (then not applied: said so)."""
        most = table.range_count(first, n)
        if most > s.touch_budget:
            self.ledger.violation(c, d, f, "budget", "warn",
                            f"disposition ({by}) from the {SIDES[d]} not applied: the deliveries it covers are "
                            f"more than the session's disposition budget has left ({DISPOSITION_TOUCH_BASE:,} "
                            f"+ {DISPOSITION_TOUCHES_PER_DELIVERY} per delivery transferred, spent by earlier "
                            f"ranges)", delivery_id=first)
            s.note_unknown("dispositions past the session's budget (not applied)")
            return None
        hits = table.in_range(first, n)
        s.touch_budget -= most
        return hits

    def not_found(self, c, s, table, sender, first, last, n, missing, found):
        """Of the ``missing`` deliveries of a disposition range (``found`` were there), those not
        known at all: less the ones folded already (late dispositions, counted) and the ones the
        capture lost (:meth:`count_lost_beyond`)."""
        late = table.folded_in_range(first, last) - found
        if late > 0:
            s.late_dispositions += late
            missing -= late
        if missing and c.loss is not None:
            missing -= self.count_lost_beyond(c, s, sender, first, last, n)
        return missing

    def unknown_deliveries(self, c, d, f, s, by, sender, first, last, n, missing, settled, plan):
        """A disposition of ``d`` for ``missing`` deliveries never transferred: a violation when the
        capture shows the session from its start, else counted as deliveries before the capture
        (or cut off by the snap length)."""
        rng = f"{first}" if first == last else f"{first}..{last}"
        if strict(c, s):
            self.ledger.violation(c, d, f, "unknown-delivery", "warn",
                            f"disposition ({by}) from the {SIDES[d]} for delivery-id {rng}: "
                            f"{missing} of {n} never transferred by the {SIDES[sender]}",
                            delivery_id=first)
            return
        s.unseen_dispositions += missing
        if c.loss is not None and c.loss.hidden[sender]:  # (transfers the snap length may have cut off)
            self.cut_outcome(s, by, settled, plan, missing)
        else:
            s.note_unknown("deliveries before the capture")

    @staticmethod
    def cut_outcome(s, by, settled, plan, missing):
        """A disposition of session ``s`` names ``missing`` delivery-ids never transferred in the
        capture, whose sender's bytes the snap length cut (frames hidden in the cuts): deliveries
        whose transfers were not captured.  The receiver's settling disposition with a terminal
        outcome gives theirs (counted once: a receiver settles a delivery once)."""
        s.note_unknown("deliveries whose transfers the snap length cut off (their outcomes from the dispositions)")
        if by != "receiver" or not settled or plan is None or not plan[4]:
            return
        oc = s.cut_outcomes
        if oc is None:
            oc = s.cut_outcomes = {}
        oc[plan[0]] = oc.get(plan[0], 0) + missing

    def presettled_named(self, c, d, f, first, last, named) -> None:
        """A receiver's disposition (of peer ``d``, frame ``f``) whose range ``first``..``last``
        also named ``named`` deliveries the sender settled at send time: the sender had forgotten
        them (spec part 2, 2.6.12), so the range says nothing about them and they keep no outcome
        from it.  Said once per connection and sender (the first range, its packet), in the
        connection's notes; each such delivery counts the disposition in dispositions_receiver."""
        said = f"the {SIDES[d]}'s disposition ranges named deliveries the {SIDES[1 - d]} settled at send time"
        for x in c.inferred or ():
            if x.startswith(said):
                return
        rng = f"{first}" if first == last else f"{first}..{last}"
        c.note_inferred(f"{said} (first: delivery-ids {rng} at packet {f.packet}, {named} presettled): they keep "
                        f"no outcome from a range (the sender forgot them when it settled them, part 2, 2.6.12)")

    def count_lost_beyond(self, c, s, sender, first, last, n) -> int:
        """A disposition names delivery-ids ``first..last`` (``n`` of them) of ``sender``, on a
        connection that lost bytes: the ids beyond the sender's latest delivery seen were sent, so
        when bytes of the sender were lost since that delivery they are deliveries lost whole
        (:meth:`Session.count_lost_whole`), the ids between included, each counted once
        (``Session.lost_upto``); a count, never an object per id.  Returns how many of the range
        were counted lost (not deliveries before the capture).  When only a cut of the snap length
        that may hide frames came since that delivery, the ids beyond it are deliveries not captured
        (:meth:`Session.count_not_captured`), counted the same way; they stay in the range's
        missing ids (returns 0), whose outcomes the disposition gives (:meth:`cut_outcome`)."""
        seen = s.deliveries[sender].last_id
        if seen is None:
            return 0  # nothing says how many came before
        lost = c.loss.mark(sender) != s.loss_mark[sender]
        if not lost and c.loss.cut_mark(sender) == s.cut_mark[sender]:
            return 0  # no gap, no cut: an unknown delivery
        upto = s.lost_upto[sender]  # (None, or beyond seen: reset at each delivery)
        if upto is None or serial_diff(last, upto) > 0:
            beyond = serial_diff(last, seen if upto is None else upto)
            if beyond <= 0:
                return 0
            s.lost_upto[sender] = last
            if lost:
                s.count_lost_whole(sender, s.last_sender[sender], beyond, serial_diff(last, seen))
            else:
                s.count_not_captured(sender, s.last_sender[sender], beyond, serial_diff(last, seen))
        k = serial_diff(last, seen)
        return 0 if k <= 0 or not lost else min(k, n)

    def delivery_state(self, dlv, by, state: Composite, f):
        """``state`` (a delivery-state Composite) sent by ``by`` ("sender" / "receiver") in frame ``f``,
        applied to ``dlv``."""
        self.apply_state(dlv, by, _state_plan(state), f)

    def apply_state(self, dlv, by, plan: tuple, f):
        """A delivery state's :func:`_state_plan` applied to ``dlv`` (a disposition's range shares one plan)."""
        name, transactional, txn, state, terminal, kind = plan
        if transactional:
            self.transaction_rules.enlist(dlv, txn, by, f)
        if not terminal:
            if kind == KIND_RECEIVED:
                sn = _uint(state.field("section-number"))
                so = _ulong(state.field("section-offset"))
                dlv.received_state = f"section {sn} offset {so}"
            return
        rcv = by == "receiver"  # (by: "sender" or "receiver")
        if not rcv:
            dlv.sender_state = name
            if dlv.outcome is not None:
                return
        elif dlv.outcome is not None and dlv.outcome_by == "receiver":
            return
        dlv.outcome = name
        dlv.outcome_by = by
        if rcv:
            dlv.outcome_ts = f.ts
            dlv.outcome_packet = f.packet
        if kind == KIND_REJECTED:
            dlv.outcome_error = error_info(state.field("error"))
        elif kind == KIND_MODIFIED:
            dlv.delivery_failed = _bool(state.effective("delivery-failed"))
            dlv.undeliverable_here = _bool(state.effective("undeliverable-here"))
        elif kind == KIND_DECLARED:
            tid = state.field("txn-id")
            dlv.txn_id = _hex(tid)
        link = dlv.link
        if link.coordinator and rcv:
            self.transaction_rules.coordinator_outcome(dlv, name, state, f)
