"""Links (spec 2.6): attach / detach, the link a frame belongs to, placeholders for handles seen
without attach, and flow (link credit, drain, available).

:class:`LinkRules` is a room of its own: it writes what it finds into the ledger the tracker gave
it, finds a frame's session through the session room (and counts its placeholders in that room's
count, the cap being shared), opens and closes credit stalls through the stall room, hands a
detached link's last delivery to the settlement room, and tells the tracker's hooks of each credit
check.  The transfer room finds a transfer's link here."""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.codec import ABSENT
from .entities import Link
from .state import PLACEHOLDERS_MAX, SIDES, UNKNOWN_LINKS_MAX
from .transitions import LINK_HANDLE_ASSIGNED as _LINK_HANDLE_ASSIGNED
# the value readers (amqp/values.py), under the names this room calls them by
from ..amqp.values import (error_info, read_choice as _choice, read_composite as _composite, read_plain as _plain,
                           read_str as _str, read_symbols as _symbols, read_ulong as _ulong, terminus_info)
from .findings import Recorder, strict
from .hooks import Hooks
from .sessions import SessionRules
from .settlement import SettlementRules
from .stall_rules import StallRules, sender_active
from .steps import after_missing, lossy_step, missing_how

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from .state import (F_AVAILABLE, F_DC, F_DRAIN, F_ECHO, F_HANDLE, F_IW, F_LC, F_NII, F_NOID, F_OW)
    from ..amqp.values import read_bool as _bool, read_uint as _uint


class LinkRules:
    """Attach, detach, flow, the link of a frame, link credit (see the module docstring)."""

    def __init__(self, ledger: Recorder, session_rules: SessionRules, settlement_rules: SettlementRules,
                 stall_rules: StallRules, hooks: Hooks):
        self.ledger = ledger
        self.session_rules = session_rules
        self.settlement_rules = settlement_rules
        self.stall_rules = stall_rules
        self.hooks = hooks

    def link_step(self, link, d, x, f, what):
        c = link.conn
        if c.loss is not None:
            msgs = lossy_step(c, link.state, d, "S:" + x, "R:" + x, what,
                                    f"link {link.name!r}" if link.name is not None else f"link {link.index}")
        else:
            msgs = link.state.frame(d) if x == "FRAME" else link.state.advance(d, "S:" + x, "R:" + x)
        if msgs:
            self.ledger.violation(c, d, f, "state", "warn",
                            f"{what} from the {SIDES[d]} on link {link.name!r}: " + "; ".join(msgs),
                            link=link.name, handle=link.handle[d])

    def new_link(self, c, s, name, known) -> Link:
        link = Link(c, s, len(c.links), name, known)
        if c.one_way >= 0:  # one direction captured: the grants of the peer not captured are unknown
            link.link_credit.lost = True
            link.note_unknown("link-credit (one direction captured)")
        s.links.append(link)
        c.links.append(link)
        return link

    def link_for(self, c, s, d, h, f, what) -> Link:
        link = s.link_on(d, h)  # (handles[d].get(h), the last one remembered: see Session.link_on)
        if link is not None:
            if c.loss is None or link.detach[d] is None or not c.lost(d):
                return link
            # d detached that link and lost bytes since: the handle is a new link's, whose attach was lost
        ph = c.placeholders
        if ph is None:
            ph = c.placeholders = [0, 0, None, {}]
        if ph[1] >= UNKNOWN_LINKS_MAX or self.session_rules.placeholders >= PLACEHOLDERS_MAX or s is ph[2]:
            # past the cap (before the search for a lost attach below: a walk of the session's links)
            return self.overflow_link(c, s, d, h, f, what, ph)
        if strict(c, s):
            self.ledger.violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on handle {h}: no attach from the {SIDES[d]} with that handle",
                            handle=h)
        if c.lost(d):
            link = self.lost_attach(s, d, h, what)
            if link is not None:
                return link  # the caller's step infers the lost attach, and says so
        ph[1] += 1
        self.session_rules.placeholders += 1
        link = self.new_link(c, s, None, False)
        link.note_unknown("attach")
        link.note_unknown("name")
        link.note_unknown("address")
        link.handle[d] = h
        s.map_handle(d, h, link)
        if h is not None and h not in s.handles[1 - d]:
            link.handle[1 - d] = h
            s.map_handle(1 - d, h, link)
            link.guessed[1 - d] = True
            link.note_unknown("handle-mapping-guessed")
        return link

    @staticmethod
    def lost_attach(s, d, h, what):
        """d's attach was lost: the link whose peer attach was still waiting for it (the one on the
        same handle number, else the only one waiting), now on handle ``h``; None if none or many."""
        cands = [x for x in s.links if x.attach[1 - d] is not None and x.attach[d] is None
                 and x.handle[d] is None and x.detach[1 - d] is None
                 and (what != "transfer" or x.sender_dir is None or x.sender_dir == d)]
        pick = [x for x in cands if x.handle[1 - d] == h]
        if len(pick) != 1 and len(cands) != 1:
            return None
        link = pick[0] if len(pick) == 1 else cands[0]
        link.handle[d] = h
        s.map_handle(d, h, link)
        link.note_unknown(f"attach ({SIDES[d]})")
        return link

    def overflow_link(self, c, s, d, h, f, what, ph) -> Link:
        """A frame on a handle without attach past the cap of placeholder links (or in the overflow
        session): the session's one overflow link (not mapped to any handle), made with a note."""
        link = ph[3].get(s.index)
        if link is None:
            link = ph[3][s.index] = self.new_link(c, s, None, False)
            for what_not in ("attach", "name", "address", "handle"):
                link.note_unknown(what_not)
            cap = (f"{UNKNOWN_LINKS_MAX} per connection" if ph[1] >= UNKNOWN_LINKS_MAX
                   else f"{PLACEHOLDERS_MAX} sessions and links in all" if self.session_rules.placeholders >= PLACEHOLDERS_MAX
                   else "a session standing for channels beyond the cap")
            s.note_unknown(f"links on handles without attach beyond the cap ({cap}): merged into link {link.index}")
            self.ledger.violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on handle {h}: more handles without attach than the cap "
                            f"({cap}); frames on such handles of this session from now on go to link {link.index}, "
                            f"which stands for them all")
        elif strict(c, s):
            self.ledger.violation(c, d, f, "unknown-handle", "warn",
                            f"{what} from the {SIDES[d]} on a handle without attach, beyond the cap (counted in link "
                            f"{link.index})")
        return link

    def attach(self, c, d, f, p):
        s = self.session_rules.session_for(c, d, f, "attach")
        self.session_rules.session_step(s, d, "FRAME", f, "attach")
        name = _str(p.field("name"))
        h = _uint(p.field("handle"))
        role = _bool(p.field("role"))
        link = self.attach_link(c, s, d, name, h, role)
        self.handle_reused(c, s, d, f, link, name, h)
        hb = s.begin[1 - d]
        if hb is not None and h is not None and isinstance(hb["handle_max"], int) and h > hb["handle_max"]:
            self.ledger.violation(c, d, f, "handle-max", "warn",
                            f"handle {h} beyond the {SIDES[1 - d]}'s handle-max {hb['handle_max']}", link=name,
                            handle=h)
        s.map_handle(d, h, link)
        link.handle[d] = h
        link.guessed[d] = False
        info = _attach_info(p, f, role)
        if link.attach[d] is not None:
            self.ledger.violation(c, d, f, "state", "warn", f"second attach of link {name!r} from the {SIDES[d]}",
                            link=name, handle=h)
        link.attach[d] = info
        if _composite(p.field("target"), "coordinator") is not None:
            link.coordinator = True
        sdir = None if role is None else (d if role is False else 1 - d)
        if link.sender_dir is None:
            link.sender_dir = sdir
        elif sdir is not None and sdir != link.sender_dir:
            self.ledger.violation(c, d, f, "role", "warn",
                            f"attach {name!r} from the {SIDES[d]}: role {'receiver' if role else 'sender'} "
                            f"conflicts with the peer's attach", link=name, handle=h)
        self.link_step(link, d, "ATTACH", f, "attach")
        if sdir == d:
            self.sender_attach(c, d, f, link, info["initial_delivery_count"])

    def attach_link(self, c, s, d, name, h, role) -> Link:
        """The link d's attach belongs to: the one whose peer attach it answers, a placeholder made
        from frames seen before it on its handle, or a new link."""
        for cand in reversed(s.links):
            if (cand.name == name and cand.attach[d] is None and cand.attach[1 - d] is not None
                    and cand.state[d] in ("ATTACH_RCVD", "DETACH_RCVD")  # answered, maybe after a pipelined detach
                    and (role is None or cand.attach[1 - d]["role"] is None or cand.attach[1 - d]["role"] != role)):
                return cand
        old = s.handles[d].get(h)
        sdir = None if role is None else (d if role is False else 1 - d)
        if (old is not None and not old.known and old.attach[d] is None and old.name is None
                and old.detach[d] is None
                and (sdir is None or old.sender_dir is None or old.sender_dir == sdir)):
            # a placeholder made from frames seen before this attach (mid-connection join); one
            # whose frames went the other way was an earlier link on the same handle, whose detach
            # fell before the capture (or was captured: a placeholder d detached is finished): this
            # attach starts a new link
            old.name = name
            return old
        return self.new_link(c, s, name, True)

    def handle_reused(self, c, s, d, f, link, name, h):
        """d's attach of ``link`` on handle ``h``: the link that had that handle (if any) must have
        been detached."""
        old = s.handles[d].get(h)
        if old is None or old is link:
            return
        if old.state[d] in _LINK_HANDLE_ASSIGNED and not old.guessed[d] and c.lost(d):
            # d lost bytes: its detach of the old link was among them
            before = old.state[d]
            old.state.advance(d, "S:DETACH", "R:DETACH")
            if old.state[d] != before:
                c.note_inferred(f"the {SIDES[d]}'s detach of link {old.name!r} was {missing_how(c, d)} "
                                f"(from its attach {name!r} on the same handle {h})")
                if old.terminated is None:
                    old.terminated = "detach (lost)"
        if old.state[d] in _LINK_HANDLE_ASSIGNED and not old.guessed[d]:
            self.ledger.violation(c, d, f, "handle-in-use", "warn",
                            f"attach {name!r} from the {SIDES[d]} uses handle {h}, still attached to "
                            f"link {old.name!r}", link=name, handle=h)
        if old.guessed[d]:
            old.handle[d] = None

    def sender_attach(self, c, d, f, link, idc):
        """The sender's attach: its initial-delivery-count starts the link credit."""
        if idc is None:
            self.ledger.violation(c, d, f, "protocol", "warn",
                            f"attach {link.name!r} from the sender without initial-delivery-count", link=link.name,
                            handle=link.handle[d])
        else:
            link.link_credit.sender_attach(idc)
            if link.attach[1 - d] is None and c.lost(1 - d):
                # the receiver's attach, and perhaps its flow, were lost: its credit is not known
                link.link_credit.lost = True
                link.note_unknown("link-credit after " + after_missing(c, 1 - d))
        self.credit_check(link, f)

    def detach(self, c, d, f, p):
        s = self.session_rules.session_for(c, d, f, "detach")
        self.session_rules.session_step(s, d, "FRAME", f, "detach")
        h = _uint(p.field("handle"))
        link = self.link_for(c, s, d, h, f, "detach")
        err = error_info(p.field("error"))
        first = link.detach[0] is None and link.detach[1] is None
        if link.detach[d] is None:
            link.detach[d] = {"time": f.ts, "packet": f.packet, "closed": p.effective("closed") is True, "error": err}
        self.link_step(link, d, "DETACH", f, "detach")
        if err:
            self.ledger.error(c, d, f, "link", err, s=s, link=link)
        if first:
            for st in (link.stall, link.drain_stall):
                if st is not None:
                    st.close(f.ts, f.packet, "detach")
            link.stall = link.drain_stall = None
            if link.terminated is None:
                link.terminated = "detach"
            link.tags = None  # (its unsettled deliveries' tags: a resumed one says resume=true)
            dlv = link.partial
            link.partial = None
            if dlv is not None and dlv.settled is not None:
                self.settlement_rules.settled(dlv)

    def credit_check(self, link, f):
        """A frame that may have changed the link's credit: the stall rule, then the tracker's hook."""
        self.credit_stalls(link, f)
        self.hooks._on_credit(link, f)

    def credit_stalls(self, link, f):
        """The link-credit stalls after a frame that changed the credit: one ends when credit
        came, one opens when it ran out."""
        lcr = link.link_credit
        sign = lcr.left_sign(1 - link.sender_dir if link.sender_dir is not None else -1)  # (link.credit()'s sign)
        if sign < 0 or lcr.lost:  # (lost: a flow granting credit may have been lost)
            return
        if sign > 0:
            link.link_credit.granted = True
            if link.stall is not None:
                link.stall.close(f.ts, f.packet, "flow" if f.pname == "flow" else (f.name or "frame"))
                link.stall = None
            return
        if link.drain_stall is not None and f.pname == "transfer":
            link.drain_stall.close(f.ts, f.packet, "transfer")
            link.drain_stall = None
        if link.stall is None and sender_active(link) and link.sender_dir is not None:
            kind = "initial-credit" if not link.link_credit.granted and link.n_deliveries == 0 else "link-credit"
            self.stall_rules.open_stall(link.conn, link.session, link, link.sender_dir, kind, f)

    def replay_flows(self, link):
        """A link whose sender became known late (mid-connection): use the receiver's last flow."""
        rf = link.last_flow[1 - link.sender_dir]
        sf = link.last_flow[link.sender_dir]
        if link.link_credit.replay(rf[0] if rf is not None else None, rf[1] if rf is not None else None,
                                   sf[0] if sf is not None else None):
            link.note_unknown("delivery-count")
        if sf is not None and sf[2] is not None:
            link.available = sf[2]
            link.avail_base = link.n_deliveries

    def flow(self, c, d, f, p):
        s = self.session_rules.session_for(c, d, f, "flow")
        self.session_rules.session_step(s, d, "FRAME", f, "flow")
        s.flows[d] += 1
        v = f.fields
        nii = _uint(v[F_NII])
        iw = _uint(v[F_IW])
        self.flow_window(c, s, d, nii, iw, _uint(v[F_NOID]), _uint(v[F_OW]))
        if iw is not None:
            self.session_rules.window(s, 1 - d, nii, iw, f)
        h = _uint(v[F_HANDLE])
        if h is None:
            return
        link = self.link_for(c, s, d, h, f, "flow")
        self.link_step(link, d, "FRAME", f, "flow")
        dc = _uint(v[F_DC])
        lc = _uint(v[F_LC])
        av = _uint(v[F_AVAILABLE])
        drain = v[F_DRAIN] is True  # default false
        link.echo = v[F_ECHO] is True
        link.last_flow[d] = (dc, lc, av, drain)
        link.link_credit.grants[d] = lc
        link.flows[d] += 1
        if link.sender_dir is None:
            return
        if d == link.sender_dir:
            self.sender_flow(c, d, f, link, h, dc, lc, av)
        else:
            self.receiver_flow(c, s, d, f, link, dc, lc, drain)
        self.credit_check(link, f)

    def flow_window(self, c, s, d, nii, iw, noid, ow):
        """d's flow: its next-outgoing-id (and, after a loss, the peer's from d's next-incoming-id)."""
        w = s.window
        w.last_iw[d] = iw
        w.last_ow[d] = ow
        lossy = c.loss is not None
        found = w.own_count(d, noid, lossy and c.lost(d))
        if found == 1 and s.begin[d] is None:
            s.note_unknown("next-outgoing-id")
        elif found == 2:  # d's transfers lost in a gap: its own count says where it is
            c.note_inferred(f"the {SIDES[d]}'s next-outgoing-id re-synchronised from its flow after "
                            f"{after_missing(c, d)}")
        if lossy and nii is not None and c.lost(1 - d) and w.peer_count(1 - d, nii):
            # the receiver counted transfers the capture lost
            c.note_inferred(f"the {SIDES[1 - d]}'s next-outgoing-id re-synchronised from the {SIDES[d]}'s "
                            f"next-incoming-id after {after_missing(c, 1 - d)}")

    def sender_flow(self, c, d, f, link, h, dc, lc, av):
        """A flow of the link's sender: its delivery-count, available, its answer to a drain."""
        if link.link_credit.sender_flow(dc, lc):
            link.note_unknown("delivery-count")
        if av is not None:
            link.available = av
            link.avail_base = link.n_deliveries
            for st in (link.stall, link.drain_stall):
                if st is not None:
                    st.saw_available(av, f.ts, f.packet)
        if link.drain_stall is not None:
            link.drain_stall.close(f.ts, f.packet, "flow")
            link.drain_stall = None
            cr = link.credit()
            if av == 0 and cr is not None and cr > 0:
                self.ledger.violation(c, d, f, "drain", "warn",
                                f"drain answer from the {SIDES[d]} on link {link.name!r} with available 0 leaves "
                                f"link-credit {cr}: delivery-count not advanced to consume the credit",
                                link=link.name, handle=h)

    def receiver_flow(self, c, s, d, f, link, dc, lc, drain):
        """A flow of the link's receiver: the credit it grants, drain."""
        lcr = link.link_credit
        if c.loss is not None and c.lost(link.sender_dir) and lcr.resync_count(dc):
            # the receiver counted deliveries whose transfers the capture lost
            c.note_inferred(f"the {SIDES[link.sender_dir]}'s delivery-count re-synchronised from the "
                            f"{SIDES[d]}'s flow after {after_missing(c, link.sender_dir)}")
        if lcr.receiver_flow(dc, lc, link.known):
            # joined mid-link: the sender is assumed to be where the receiver thinks it is
            link.note_unknown("delivery-count")
        link.drain = drain
        if drain and link.drain_stall is None and sender_active(link):
            self.stall_rules.open_stall(c, s, link, link.sender_dir, "drain", f)
        elif not drain and link.drain_stall is not None:
            link.drain_stall.close(f.ts, f.packet, "cancelled")
            link.drain_stall = None

def _attach_info(p, f, role) -> dict:
    """What an attach said (the links table's columns)."""
    src = p.field("source")
    tgt = p.field("target")
    unsettled = p.field("unsettled")
    return {
        "time": f.ts,
        "packet": f.packet,
        "role": role,
        "snd_settle_mode": _choice(p, "snd-settle-mode", "sender-settle-mode"),
        "snd_settle_mode_default": p.is_default("snd-settle-mode"),
        "rcv_settle_mode": _choice(p, "rcv-settle-mode", "receiver-settle-mode"),
        "rcv_settle_mode_default": p.is_default("rcv-settle-mode"),
        "source": terminus_info(src),
        "target": terminus_info(tgt),
        "source_null": src is None or src is ABSENT,
        "target_null": tgt is None or tgt is ABSENT,
        "unsettled": len(unsettled) if isinstance(unsettled, dict) else None,
        "incomplete_unsettled": p.effective("incomplete-unsettled") is True,
        "initial_delivery_count": _uint(p.field("initial-delivery-count")),
        "max_message_size": _ulong(p.field("max-message-size")),
        "offered_capabilities": _symbols(p.field("offered-capabilities")),
        "desired_capabilities": _symbols(p.field("desired-capabilities")),
        "properties": _plain(p.field("properties")),
    }
