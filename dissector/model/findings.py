"""Findings: the violations, frame errors and internal errors a run records (the tracker's ledger).

:class:`Recorder` is the ledger: one object, owned by the tracker, which hands it to each rule room
when it makes them.  A room writes what it finds into it (a violation row, repeated ones added up,
credit / window violations held until the granting peer's next frame shows no gap before it, frame
errors); the tracker tells it when a peer's frame, a gap, a FIN or the capture's end decides the
held ones.  It imports no room and no tracker.
"""

from __future__ import annotations

from .state import HOLD_MAX, REPEAT_KEEP, SIDES, VIOLATIONS_LISTED


class Recorder:
    """The ledger of findings (see the module docstring)."""

    def __init__(self):
        self.violations: list[dict] = []
        self.frame_errors: list[dict] = []
        self.internal_errors: list[str] = []  # bugs met while analysing (each also a violation row)
        # (connection id, granting peer) -> credit / window violations waiting for that peer's next
        # frame: a gap before it means the grant they rest on may have been lost (see hold)
        self._held: dict = {}
        # (connection, kind, side, message, origin) -> [rows like it, the row adding up those past
        # REPEAT_KEEP or None, its last packet]
        self._repeats: dict = {}

    def violation(self, c, d, f, kind, severity, message, channel=None, link=None, handle=None,
                   delivery_id=None, ts=None, packet=None, origin="state"):
        key = (c.id, kind, d, message, origin)
        rep = self._repeats.get(key)
        if rep is None:
            if len(self._repeats) >= VIOLATIONS_LISTED:
                self._violation_past_listed(c, d, f, kind, severity, message, channel, ts, packet, origin)
                return
            self._repeats[key] = [1, None, None]
        elif rep[0] < REPEAT_KEEP:
            rep[0] += 1
        else:  # a flood of this finding: one row adds up those past REPEAT_KEEP
            rep[0] += 1
            row = rep[1]
            last = packet if packet is not None else (f.packet if f is not None else None)
            rep[2] = last
            if row is None:
                self._violation_row(c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts,
                                    packet, origin)
                row = rep[1] = self.violations[-1]
            row["count"] = rep[0] - REPEAT_KEEP
            row["message"] = (f"{message} [{rep[0] - REPEAT_KEEP:,} more like it after the first {REPEAT_KEEP} "
                              f"(this packet to packet {last}), added up in this row]")
            return
        self._violation_row(c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts, packet, origin)

    def _violation_past_listed(self, c, d, f, kind, severity, message, channel, ts, packet, origin):
        """A new finding once VIOLATIONS_LISTED are listed: added up in the row of its connection,
        kind, side and origin (made by the first such finding, whose message it quotes)."""
        key = (c.id, kind, d, origin)
        rep = self._repeats.get(key)
        last = packet if packet is not None else (f.packet if f is not None else None)
        if rep is None:
            self._violation_row(c, d, f, kind, severity, message, channel, None, None, None, ts, packet, origin)
            rep = self._repeats[key] = [0, self.violations[-1], message]
        rep[0] += 1
        rep[1]["count"] = rep[0]
        rep[1]["message"] = (f"{rep[0]:,} {kind} findings from this packet to packet {last}, not listed one by one: "
                             f"the capture's first {VIOLATIONS_LISTED:,} distinct findings are; the first of them: "
                             f"{rep[2]}")

    def _violation_row(self, c, d, f, kind, severity, message, channel, link, handle, delivery_id, ts, packet,
                       origin):
        self.violations.append({
            "connection": c.id,
            "packet": packet if packet is not None else (f.packet if f is not None else None),
            "time": ts if ts is not None else (f.ts if f is not None else None),
            "channel": channel if channel is not None else (f.channel if f is not None else None),
            "kind": kind,
            "severity": severity,
            "message": message,
            "side": SIDES[d] if d in (0, 1) else None,
            "link": link,
            "handle": handle,
            "delivery_id": delivery_id,
            "origin": origin,
            "count": 1,
        })

    def hold(self, c, g, d, f, kind, message, link=None, handle=None, delivery_id=None):
        """A credit / window violation of sender ``d``: it rests on the latest grant of peer ``g``,
        so it waits for ``g``'s next frame (or FIN, or the capture's end).  A TCP gap of ``g``
        noticed before that (the gap is only seen at the next segment) may have held a flow granting
        more: then the violation came from state the gap made unknown and is dropped (:meth:`drop`).
        With one direction captured (``c.one_way``) the grants are unknown: nothing is held."""
        if c.one_way >= 0:
            return
        n = len(self.violations)
        self.violation(c, d, f, kind, "warn", message, link=link, handle=handle, delivery_id=delivery_id)
        if len(self.violations) != n + 1:  # (not a new row of its own: nothing to hold)
            return
        key = (c.id, g)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = []
        if len(held) < HOLD_MAX:
            held.append(self.violations.pop())

    def held_row(self, c, g, d, f, kind, message, link=None, handle=None, delivery_id=None):
        """:meth:`hold`, giving back the row (held, or listed when HOLD_MAX are held) for its
        finder to add later repeats into; None when the finding was added up in another row."""
        n = len(self.violations)
        self.hold(c, g, d, f, kind, message, link=link, handle=handle, delivery_id=delivery_id)
        if len(self.violations) == n + 1:
            return self.violations[-1]
        held = self._held.get((c.id, g))
        if held and held[-1]["kind"] == kind and held[-1]["message"] == message:
            return held[-1]
        return None

    def forget(self, c) -> None:
        """Connection ``c`` was found to have one direction only in the capture: the state findings
        it had are taken back (they rested on the other peer's frames, which were not captured),
        with the held ones and its repeat counts.  Framing findings stay (they are about bytes
        that were captured)."""
        cid = c.id
        self.violations[:] = [v for v in self.violations if v["connection"] != cid or v["origin"] != "state"]
        for g in (0, 1):
            self._held.pop((cid, g), None)
        for key in [k for k in self._repeats if k[0] == cid]:
            del self._repeats[key]

    def release(self, c, g) -> None:
        held = self._held.pop((c.id, g), None)
        if held:
            self.violations.extend(held)

    def drop(self, c, g) -> None:
        held = self._held.pop((c.id, g), None)
        if held:
            c.note_unknown(f"credit / window checks before a gap of the {SIDES[g]}")

    def error(self, c, d, f, scope, err, s=None, link=None):
        row = {
            "connection": c.id,
            "session": s.index if s is not None else None,
            "channel": f.channel if scope != "connection" else None,
            "link": link.name if link is not None else None,
            "handle": link.handle[d] if link is not None else None,
            "delivery_id": None,
            "scope": scope,
            "condition": err["condition"],
            "description": err["description"],
            "info": err["info"],
            "packet": f.packet,
            "time": f.ts,
            "side": SIDES[d],
            "source": "frame",
            "count": None,
        }
        self.frame_errors.append(row)


def strict(c, s=None) -> bool:
    """May an unknown channel / handle / delivery be called a violation here?"""
    if c.lossy or not c.known_start or (c.loss is not None and c.loss.hides()):  # (hides: a cut of the snap length)
        return False
    return s is None or s.known
