"""Sessions (spec 2.5): begin / end, the channel a frame belongs to, placeholders for channels seen
without begin, the session window's announcements, and the session machine's steps.

:class:`SessionRules` is a room of its own: it writes what it finds into the ledger the tracker gave
it, opens session-window stalls through the stall room it was given, and tells the tracker's hooks
of each window announcement.  The link, transfer and settlement rooms find a frame's session here."""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .entities import Session
from .findings import Recorder, strict
from .hooks import Hooks
from .stall_rules import StallRules
from .steps import lossy_step, missing_how
from .state import PLACEHOLDERS_MAX, SIDES, UNKNOWN_SESSIONS_MAX
from .transitions import SESSION_CHANNEL_ASSIGNED as _SESSION_CHANNEL_ASSIGNED
# the value readers (amqp/values.py), under the names this room calls them by
from ..amqp.values import error_info, read_plain as _plain, read_symbols as _symbols, read_ushort as _ushort

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from ..amqp.values import read_uint as _uint


class SessionRules:
    """Begin, end, the channel of a frame, the session window (see the module docstring)."""

    def __init__(self, ledger: Recorder, stall_rules: StallRules, hooks: Hooks):
        self.ledger = ledger
        self.stall_rules = stall_rules
        self.hooks = hooks
        # placeholder sessions and links made (see PLACEHOLDERS_MAX; the link room counts its own here)
        self.placeholders = 0

    def session_step(self, s, d, x, f, what):
        c = s.conn
        if c.loss is not None:
            msgs = lossy_step(c, s.state, d, "S:" + x, "R:" + ("END" if x == "END(error)" else x), what,
                                    f"session {s.index}")
        elif x == "FRAME":
            msgs = s.state.frame(d)
        else:
            msgs = s.state.advance(d, "S:" + x, "R:" + ("END" if x == "END(error)" else x))
        if msgs:
            self.ledger.violation(c, d, f, "state", "warn", f"{what} from the {SIDES[d]} on session {s.index}: "
                            + "; ".join(msgs))

    def new_session(self, c, initiator, known) -> Session:
        s = Session(c, len(c.sessions), initiator, known)
        c.sessions.append(s)
        return s

    def session_for(self, c, d, f, what) -> Session:
        ch = f.channel
        s = c.session_on(d, ch)  # (chan[d].get(ch), the last one remembered: see Connection.session_on)
        if s is not None:
            return s
        ph = c.placeholders
        if ph is None:
            ph = c.placeholders = [0, 0, None, {}]
        if ph[0] >= UNKNOWN_SESSIONS_MAX or self.placeholders >= PLACEHOLDERS_MAX:
            return self.overflow_session(c, d, f, what, ph)
        if strict(c):
            self.ledger.violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on channel {ch}: no begin from the {SIDES[d]} on that channel")
        pend = c.pending[1 - d]
        if pend:
            # the peer's begin is waiting for its answer: d's begin that answered it was lost (the one on
            # the same channel number, else the only one waiting)
            s = pend.get(ch)
            if s is None and len(pend) == 1:
                s = next(iter(pend.values()))
            if s is not None:
                del pend[s.channel[1 - d]]
                s.channel[d] = ch
                c.map_channel(d, ch, s)
                s.note_unknown(f"begin ({SIDES[d]})")
                c.note_inferred(f"session {s.index}: the {SIDES[d]}'s begin on channel {ch} (from its {what}), "
                                f"answering the {SIDES[1 - d]}'s begin on channel {s.channel[1 - d]}")
                self.session_step(s, d, "BEGIN", f, what)
                return s
        s = self.new_session(c, None, False)
        ph[0] += 1
        self.placeholders += 1
        s.note_unknown("begin")
        s.channel[d] = ch
        c.map_channel(d, ch, s)
        if ch not in c.chan[1 - d] and ch not in c.pending[1 - d]:
            s.channel[1 - d] = ch
            c.map_channel(1 - d, ch, s)
            s.guessed[1 - d] = True
            s.note_unknown("channel-mapping-guessed")
        return s

    def overflow_session(self, c, d, f, what, ph) -> Session:
        """A frame on a channel without begin past the cap of placeholder sessions: the connection's
        one overflow session (not mapped to any channel number), made with a note."""
        s = ph[2]
        if s is None:
            s = ph[2] = self.new_session(c, None, False)
            s.note_unknown("begin")
            s.note_unknown("channel")
            cap = (f"{UNKNOWN_SESSIONS_MAX} per connection" if ph[0] >= UNKNOWN_SESSIONS_MAX
                   else f"{PLACEHOLDERS_MAX} sessions and links in all")
            c.note_unknown(f"sessions on channels without begin beyond the cap ({cap}): merged into session "
                           f"{s.index}")
            self.ledger.violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on channel {f.channel}: more channels without begin than "
                            f"the cap ({cap}); frames on such channels from now on go to session {s.index}, "
                            f"which stands for them all")
        elif strict(c):
            self.ledger.violation(c, d, f, "unknown-channel", "warn",
                            f"{what} from the {SIDES[d]} on a channel without begin, beyond the cap (counted in "
                            f"session {s.index})")
        return s

    def check_channel_max(self, c, d, f):
        peer = c.open[1 - d]
        if peer is not None and isinstance(peer["channel_max"], int) and f.channel > peer["channel_max"]:
            self.ledger.violation(c, d, f, "channel-max", "warn",
                            f"channel {f.channel} beyond the {SIDES[1 - d]}'s channel-max {peer['channel_max']}")

    def begin(self, c, d, f, p):
        ch = f.channel
        rc = p.field("remote-channel")
        rc = _ushort(rc)
        self.check_channel_max(c, d, f)
        self.channel_reused(c, d, f, ch)
        if rc is None:
            s = self.new_session(c, d, True)
            c.pending[d][ch] = s
        else:
            s = self.begin_answered(c, d, f, ch, rc)
        s.channel[d] = ch
        c.map_channel(d, ch, s)
        noid = _uint(p.field("next-outgoing-id"))
        iw = _uint(p.field("incoming-window"))
        ow = _uint(p.field("outgoing-window"))
        s.begin[d] = {
            "time": f.ts,
            "packet": f.packet,
            "remote_channel": rc,
            "next_outgoing_id": noid,
            "incoming_window": iw,
            "outgoing_window": ow,
            "handle_max": _plain(p.effective("handle-max")),
            "handle_max_default": p.is_default("handle-max"),
            "offered_capabilities": _symbols(p.field("offered-capabilities")),
            "desired_capabilities": _symbols(p.field("desired-capabilities")),
            "properties": _plain(p.field("properties")),
        }
        s.window.begin(d, noid, iw, ow)
        if iw is not None:
            self.window(s, 1 - d, None, iw, f, True)
        self.session_step(s, d, "BEGIN", f, "begin")

    def channel_reused(self, c, d, f, ch):
        """d's begin on channel ``ch``: the session that had that channel (if any) must have ended."""
        old = c.chan[d].get(ch)
        if old is None:
            return
        assigned = old.state[d] in _SESSION_CHANNEL_ASSIGNED and not (old.guessed[d] and old.begin[d] is None)
        if assigned and c.lost(d):
            # d lost bytes: its end of the old session was among them
            before = old.state[d]
            old.state.advance(d, "S:END", "R:END")
            if old.state[d] != before:
                c.note_inferred(f"the {SIDES[d]}'s end of session {old.index} was {missing_how(c, d)} "
                                f"(from its begin on the same channel {ch})")
                if old.terminated is None:
                    old.terminated = "end (lost)"
        if old.state[d] in _SESSION_CHANNEL_ASSIGNED and not (old.guessed[d] and old.begin[d] is None):
            self.ledger.violation(c, d, f, "channel-in-use", "warn",
                            f"begin from the {SIDES[d]} on channel {ch}, which is still in use by session {old.index}")
        if old.guessed[d]:
            old.channel[d] = None

    def begin_answered(self, c, d, f, ch, rc) -> Session:
        """d's begin on ``ch`` answers the peer's begin on remote-channel ``rc``: that session (waiting,
        or a placeholder), else a new one whose peer begin the capture did not show."""
        s = c.pending[1 - d].pop(rc, None)
        if s is None:
            cand = c.chan[1 - d].get(rc)
            if cand is not None and cand.begin[d] is None and cand.channel[d] in (None, ch) and (
                    not cand.known or cand.guessed[d]):
                s = cand
                if s.channel[d] is not None and c.chan[d].get(s.channel[d]) is s and s.channel[d] != ch:
                    c.unmap_channel(d, s.channel[d])
            else:
                if strict(c):
                    self.ledger.violation(c, d, f, "unknown-channel", "warn",
                                    f"begin from the {SIDES[d]} answers remote-channel {rc}: "
                                    f"no begin from the {SIDES[1 - d]} on that channel is waiting")
                s = self.new_session(c, 1 - d, False)
                s.channel[1 - d] = rc
                c.map_channel(1 - d, rc, s)
                s.note_unknown(f"begin ({SIDES[1 - d]})")
        s.guessed[d] = False
        if s.initiator is None:
            s.initiator = 1 - d
        return s

    def end(self, c, d, f, p):
        s = self.session_for(c, d, f, "end")
        err = error_info(p.field("error"))
        first = s.end[0] is None and s.end[1] is None
        if s.end[d] is None:
            s.end[d] = {"time": f.ts, "packet": f.packet, "error": err}
        self.session_step(s, d, "END(error)" if err else "END", f, "end")
        if err:
            self.ledger.error(c, d, f, "session", err, s=s)
        if first:
            for st in c.stalls:
                if st.session is s:
                    st.close(f.ts, f.packet, "end")
            if s.terminated is None:
                s.terminated = "end"
            for link in s.links:
                if link.terminated is None:
                    link.terminated = "end"
        for e in (0, 1):
            if c.pending[e].get(s.channel[e]) is s:
                del c.pending[e][s.channel[e]]  # ended before the begin was answered

    def window(self, s, sender, nii, iw, f, from_begin=False):
        """The receiving peer (1-sender) announced next-incoming-id / incoming-window: the window
        rule, then the tracker's hook."""
        self.window_grant(s, sender, nii, iw, f, from_begin)
        self.hooks._on_window(s, sender, f)

    def window_grant(self, s, sender, nii, iw, f, from_begin):
        """The window (:meth:`SessionWindow.grant`) and the session-window stall of ``sender``."""
        w = s.window
        if not w.grant(sender, nii, iw):
            return
        riw = w.riw(sender)
        st = s.win_stall[sender]
        if riw is None:
            return
        if st is not None and riw > 0:
            st.close(f.ts, f.packet, "flow")
            s.win_stall[sender] = None
        elif st is None and riw <= 0 and not from_begin and s.transfers[sender] > 0:
            self.stall_rules.open_stall(s.conn, s, None, sender, "session-window", f)
