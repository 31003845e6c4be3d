"""Transfers (spec 2.6.12, 2.7.5): the frames of a delivery, the credit and window they use.

:class:`TransferRules` is a room of its own: it writes what it finds into the ledger the tracker gave
it; it finds a transfer's session and link through the session and link rooms, hands a settled
delivery to the settlement room, a coordinator's message to the transaction room, and a stall that
opens or begins to the stall room (the references it was given)."""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.codec import ABSENT
from ..amqp.spec import choice_name
from .delivery import DeliveryRecord
from .serial import SERIAL_MASK
from .state import DISPOSITION_TOUCHES_PER_DELIVERY, TAGS_MAX, TAG_IDS_MAX
from .transitions import SIDES
from .findings import Recorder, strict
from .links import LinkRules
from .sessions import SessionRules
from .settlement import SettlementRules
from .stall_rules import StallRules
from .steps import after_missing
from .transactions import TransactionRules

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from .window import BEYOND, RESYNCED, UNKNOWN_LEFT
    from ..amqp.values import read_binary as _bin, read_delivery_state as _delivery_state_value, read_uint as _uint
    from .serial import serial_diff
    from .state import (T_ABORTED, T_DELIVERY_ID, T_DELIVERY_TAG, T_HANDLE, T_MORE, T_RCV_SETTLE_MODE, T_RESUME, T_SETTLED,
                        T_STATE)


_TAGS_MAX = TAGS_MAX  # (a C integer when compiled)

#: said in a link's unknown list once its unsettled deliveries' tags are past TAGS_MAX
_TAGS_PAST = f"delivery-tag uniqueness past {TAGS_MAX:,} unsettled deliveries"


def _serial_number(x):
    """A handle or delivery-id field as a serial number: an int in range as it is, else read
    (:func:`read_uint`: None when absent)."""
    if type(x) is not int or not 0 <= x <= SERIAL_MASK:
        return _uint(x)
    return x


def _continues(dlv, did) -> bool:
    """May a transfer of delivery ``did`` continue the link's unfinished delivery ``dlv`` (it does
    not when both ids are known and differ)?"""
    return did is None or dlv.delivery_id is None or did == dlv.delivery_id


class TransferRules:
    """A transfer frame's rules (see the module docstring)."""

    def __init__(self, ledger: Recorder, session_rules: SessionRules, link_rules: LinkRules,
                 settlement_rules: SettlementRules, stall_rules: StallRules, transaction_rules: TransactionRules):
        self.ledger = ledger
        self.session_rules = session_rules
        self.link_rules = link_rules
        self.settlement_rules = settlement_rules
        self.stall_rules = stall_rules
        self.transaction_rules = transaction_rules
        self.seq = 0  # deliveries seen (each delivery's place in the table order)
        self.messages = None  # an amqp.message.MessageReader when the message fields are asked for

    def transfer(self, c, d, f, p):
        s = self.session_rules.session_for(c, d, f, "transfer")
        self.session_rules.session_step(s, d, "FRAME", f, "transfer")
        fields = f.fields  # (the scanner's tuple, or a decoded list: a tuple too, so that compiled, each
        v = fields if type(fields) is tuple else tuple(fields)  # field is a C tuple access, not a generic call)
        h = _serial_number(v[T_HANDLE])
        link = self.transfer_link(c, s, d, f, h)
        riw = self.transfer_window(c, s, d, f, link, h)
        if d:  # (two C counters when compiled: no int object per frame)
            s.transfers1 += 1
        else:
            s.transfers0 += 1
        link.transfers += 1
        if link.after_stall is not None:  # the first transfer after a stall of this link ended
            link.after_stall.next_ts = f.ts
            link.after_stall = None
        if s.after_win[d] is not None:
            s.after_win[d].next_ts = f.ts
            s.after_win[d] = None
        did = _serial_number(v[T_DELIVERY_ID])
        dlv = link.partial
        if dlv is not None and not _continues(dlv, did):
            dlv = None  # a new delivery although the previous one said more=true (noted by the framing layer)
        if dlv is None:
            dlv = self.new_delivery(c, s, d, f, link, h, did, v)
        dlv.frames += 1
        dlv.size += f.payload_size
        dlv.last_ts = f.ts
        dlv.last_packet = f.packet
        if dlv.payload is not None:
            dlv.payload.append(f.payload)
        if self.messages is not None:
            self.messages.transfer(c, d, f, dlv)
        self.sender_says(dlv, v, f)
        aborted = v[T_ABORTED] is True
        if aborted or v[T_MORE] is not True:
            self.delivery_sent(c, f, link, dlv, aborted)
        else:
            link.partial = dlv
        # session window exhausted by this transfer?
        if riw != UNKNOWN_LEFT and riw <= 0 and s.win_stall[d] is None:
            self.stall_rules.open_stall(c, s, link, d, "session-window", f)
        self.link_rules.credit_check(link, f)
        table = s.deliveries[d]
        if table.due():  # many unsettled: the plain ones to the compact store
            table.compact()

    def sender_says(self, dlv, v, f):
        """What a transfer frame's fields ``v`` (a tuple) say of its delivery ``dlv``: settled by the sender
        (pre-settled), resumed, its delivery state."""
        if v[T_SETTLED] is True and dlv.snd_settled is None:
            dlv.settle("sender", f.ts, f.packet)
            dlv.presettled = True
        if v[T_RESUME] is True:
            dlv.resumed = True
        state = v[T_STATE]
        if state is not None and state is not ABSENT:
            state = _delivery_state_value(state)
            if state is not None:
                self.settlement_rules.delivery_state(dlv, "sender", state, f)

    def transfer_link(self, c, s, d, f, h):
        """The link a transfer of d on handle ``h`` belongs to; d is its sender."""
        link = self.link_rules.link_for(c, s, d, h, f, "transfer")
        self.link_rules.link_step(link, d, "FRAME", f, "transfer")
        # the sender's direction, -1 while unknown (compiled, a C integer: compared with d, no int object)
        sdir = -1 if link.sender_dir is None else link.sender_dir
        if sdir != -1 and sdir != d and link.guessed[d] and h is not None:
            # d's handle was guessed to be this link (it was the peer's with the same number): it is
            # another link, whose attach the capture did not show
            link.guessed[d] = False
            link.handle[d] = None
            s.unmap_handle(d, h)
            link = self.link_rules.link_for(c, s, d, h, f, "transfer")
            sdir = -1 if link.sender_dir is None else link.sender_dir
        if sdir == -1:
            link.sender_dir = d
            self.link_rules.replay_flows(link)
        elif sdir != d:
            self.ledger.violation(c, d, f, "role", "warn",
                            f"transfer from the {SIDES[d]} on link {link.name!r}, whose sender is the "
                            f"{SIDES[link.sender_dir]}", link=link.name, handle=h)
        return link

    def transfer_window(self, c, s, d, f, link, h):
        """A transfer frame uses the session window (:meth:`SessionWindow.send_left`): what it found is
        recorded; returns the window left (UNKNOWN_LEFT: unknown)."""
        w = s.window
        riw = w.send_left(d, c.loss is not None)  # (UNKNOWN_LEFT: unknown; a C integer when compiled)
        if w.found:
            if w.found & RESYNCED:
                c.note_inferred(f"the {SIDES[d]}'s next-outgoing-id re-synchronised from the "
                                f"{SIDES[1 - d]}'s next-incoming-id after {after_missing(c, d)}")
            if w.found & BEYOND:
                self.ledger.hold(c, 1 - d, d, f, "session-window",
                           f"transfer from the {SIDES[d]} beyond the {SIDES[1 - d]}'s incoming-window "
                           f"(remote-incoming-window {riw + 1})", link=link.name, handle=h)
        return riw

    def new_delivery(self, c, s, d, f, link, h, did, v):
        """The first transfer of a delivery: the delivery, in its session's table; it uses a link credit
        (``v``: the transfer's fields, a tuple)."""
        if did is None:
            did = s.deliveries[d].next_id
            if strict(c, s) and link.known:
                self.ledger.violation(c, d, f, "protocol", "warn",
                                "first transfer of a delivery without delivery-id", link=link.name, handle=h)
        if c.loss is not None and did is not None:
            self.count_lost_whole(c, s, d, link, did)
        else:
            s.last_sender[d] = link
        dlv = DeliveryRecord.__new__(DeliveryRecord)
        dlv._init(link, s, d, did, _bin(v[T_DELIVERY_TAG]), f.ts, f.first_packet)
        self.seq += 1
        dlv.seq = self.seq
        link.live.add(dlv)  # (in first-transfer order)
        if did is not None:
            table = s.deliveries[d]
            table.add(did, dlv)
            touches = DISPOSITION_TOUCHES_PER_DELIVERY  # (a C integer when compiled: no int object per delivery)
            s.touch_budget += touches
        if did is not None and dlv.tag is not None and v[T_RESUME] is not True:
            self.tag_check(c, d, f, link, h, dlv.tag, did)
        rsm = v[T_RCV_SETTLE_MODE]
        if rsm is not None and rsm is not ABSENT:
            dlv.rcv_settle_mode = choice_name("receiver-settle-mode", rsm)
        if link.coordinator:
            dlv.payload = []
        self.use_credit(c, d, f, link, h, did)
        link.n_deliveries += 1
        return dlv

    def count_lost_whole(self, c, s, d, link, did):
        """A new delivery of d, id ``did``, on a connection that lost bytes: the delivery-ids its
        session's previous delivery skipped (or the last id a disposition already counted lost
        beyond it: :meth:`SettlementRules.count_lost_beyond`), when bytes of d were lost between
        the two, are deliveries lost whole (:meth:`Session.count_lost_whole`: the link's when the
        previous delivery was the link's too).  When no bytes of d were lost between the two but a
        cut of the snap length that may hide frames came between, they are deliveries not captured
        (:meth:`Session.count_not_captured`): a cut is not loss."""
        mark = c.loss.mark(d)
        cmark = c.loss.cut_mark(d)
        prev_link = s.last_sender[d]
        lost = mark != s.loss_mark[d]
        cut = cmark != s.cut_mark[d]
        upto = s.lost_upto[d]
        s.last_sender[d] = link
        s.loss_mark[d] = mark
        s.cut_mark[d] = cmark
        s.lost_upto[d] = None
        seen = s.deliveries[d].last_id
        if not (lost or cut) or seen is None:
            return
        last = upto if upto is not None and serial_diff(upto, seen) > 0 else seen
        n = serial_diff(did, last) - 1
        if n <= 0:
            return
        prev = prev_link if prev_link is link else None
        if lost:
            s.count_lost_whole(d, prev, n, serial_diff(did, seen) - 1)
        else:
            s.count_not_captured(d, prev, n, serial_diff(did, seen) - 1)

    def tag_check(self, c, d, f, link, h, tag, did):
        """A new delivery ``did`` with delivery-tag ``tag``: the tag must be unique among the link's
        deliveries either end could consider unsettled (part 2, 2.6.12).  The link keeps the tags of
        its unsettled deliveries (bounded: TAGS_MAX tags, TAG_IDS_MAX ids a tag)."""
        tags = link.tags
        if tags is None:
            tags = link.tags = {}
        n = len(tags)
        if n < _TAGS_MAX:  # (one look-up for a new tag, the usual one: added unless held)
            held = tags.setdefault(tag, did)
            if len(tags) > n:
                return
        else:
            held = tags.get(tag)
            if held is None:
                link.note_unknown(_TAGS_PAST)
                return
        if type(held) is list:
            earlier = held
            if len(held) < TAG_IDS_MAX:
                held.append(did)
        else:
            earlier = [held]
            tags[tag] = [held, did]
        self.tag_repeated(c, d, f, link, h, tag, earlier[0], did)

    def tag_repeated(self, c, d, f, link, h, tag, earlier, did):
        """Delivery ``did`` repeats the delivery-tag of the unsettled delivery ``earlier``: a
        violation, one row per link and tag (later repeats added up in it), unless loss may have
        hidden the earlier one's settlement (a gap of either peer: the receiver's is held until its
        next frame, see :meth:`Recorder.hold`)."""
        loss = c.loss
        if loss is not None and (loss.lost_after(0, None) or loss.lost_after(1, None)):
            link.note_unknown("delivery-tag uniqueness after " + after_missing(c, 0 if loss.lost_after(0, None) else 1))
            return
        reps = link.tag_repeats
        if reps is None:
            reps = link.tag_repeats = {}
        rec = reps.get(tag)
        if rec is None:
            ids = [earlier, did]
            rec = reps[tag] = [None, ids, 1]
            rec[0] = self.ledger.held_row(c, 1 - d, d, f, "delivery-tag", _tag_message(d, link, tag, ids, 1),
                                          link=link.name, handle=h, delivery_id=did)
            return
        rec[2] += 1
        ids = rec[1]
        if len(ids) < 6:
            ids.append(did)
        row = rec[0]
        if row is not None:
            row["count"] = rec[2]
            row["message"] = _tag_message(d, link, tag, ids, rec[2])

    def use_credit(self, c, d, f, link, h, did):
        """A delivery's first transfer uses a link credit (:class:`LinkCredit`): what it found is recorded."""
        lcr = link.link_credit
        if lcr.count is None:
            return
        if c.loss is not None and lcr.resync_from_grant(1 - link.sender_dir, 1 - d):
            # d's delivery-count is behind the receiver's: deliveries the capture lost
            c.note_inferred(f"the {SIDES[d]}'s delivery-count re-synchronised from the {SIDES[1 - d]}'s "
                            f"flow after {after_missing(c, d)}")
        if not lcr.lost and lcr.beyond(1 - link.sender_dir) and not self.grants_missing(c, link):
            numbers = (f"delivery-count at least {lcr.count}, credit at most {link.credit()}: deliveries lost "
                       f"whole in a gap may have been this link's" if lcr.count_low
                       else f"delivery-count {lcr.count}, credit {link.credit()}")
            self.ledger.hold(c, 1 - d, d, f, "credit",
                       f"transfer from the {SIDES[d]} on link {link.name!r} beyond its link-credit ({numbers})",
                       link=link.name, handle=h, delivery_id=did)
        lcr.delivered()

    @staticmethod
    def grants_missing(c, link) -> bool:
        """The receiver of ``link`` granted nothing on it in the capture and frames of the receiver
        may be missing (a gap, a cut of the snap length that may hold frames): its grants (perhaps
        on this link's attach and flows, not captured) are unknown, so no credit finding can be
        made; said in the link's unknowns."""
        r = 1 - link.sender_dir
        if c.loss is None or link.link_credit.grants[r] is not None or not c.loss.lost(r):
            return False
        link.note_unknown(f"link-credit (no grant of the {SIDES[r]} captured)")
        return True

    def delivery_sent(self, c, f, link, dlv, aborted):
        """The last frame of a delivery (more=false) or its abort: complete, its stall may begin, a
        coordinator message is read, a settled one may be folded."""
        if aborted:
            dlv.aborted = True
            if link.tags is not None:  # (an aborted delivery is settled: 2.7.5)
                link.untag(dlv.tag, dlv.delivery_id)
        link.partial = None
        dlv.complete = not aborted
        if link.stall is not None and link.stall.busy is dlv:
            self.stall_rules.stall_begins(link, link.stall, f)
        if link.coordinator and not aborted:
            self.transaction_rules.coordinator_message(c, link, dlv, f)
        dlv.payload = None
        if dlv.settled is not None:
            self.settlement_rules.settled(dlv)


def _tag_message(d, link, tag, ids, count) -> str:
    """The violation of a delivery-tag repeated among a link's unsettled deliveries (``ids``: the
    first few deliveries with it; ``count``: the deliveries that repeated it)."""
    text = "empty" if not tag else tag[:32].hex() + ("…" if len(tag) > 32 else "")
    listed = ", ".join(str(x) for x in ids[:5]) + (", …" if count + 1 > 5 else "")
    return (f"delivery-tag {text} of the {SIDES[d]} on link {link.name!r} repeated among its unsettled deliveries "
            f"(part 2, 2.6.12: unique among the deliveries either end could consider unsettled): delivery-ids "
            f"{listed}; {count:,} {'delivery' if count == 1 else 'deliveries'} gave it while an earlier one "
            f"with it was unsettled")
