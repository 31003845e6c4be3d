"""A step of an endpoint machine on a connection that lost bytes (shared by the connection,
session and link rooms): a step the table refuses is first explained by frames the capture lost."""

from __future__ import annotations

from .transitions import SIDES


def missing_how(c, p) -> str:
    """How frames of peer ``p`` of connection ``c`` may have gone missing, for an inferred line:
    "not captured (one direction captured)", "not captured (snap length N)" (a cut, not loss),
    "lost" (a gap), or both (:meth:`LossRecord.missing_how`)."""
    if c.one_way == p:
        return "not captured (one direction captured)"
    loss = c.loss
    return "lost" if loss is None else loss.missing_how(p)


def after_missing(c, p) -> str:
    """What a count of peer ``p`` was re-synchronised after, for an inferred line: "a gap" (loss),
    or the bytes as :func:`missing_how` names them ("bytes not captured (snap length N)", "bytes
    lost or not captured (snap length N)"): a cut of the snap length is not a gap."""
    how = missing_how(c, p)
    return "a gap" if how == "lost" else "bytes " + how


def lossy_step(c, ep, d, s_in, r_in, what, where):
    """``ep.advance(d, s_in, r_in)`` on a connection that lost bytes: a step the table refuses is
    first explained by frames the capture lost (from a direction with a gap), which are taken
    and said ("inferred"); only what no lost frame explains is a violation (the messages returned)."""
    saved = (list(ep.codes), list(ep.queue[0]), list(ep.queue[1]))
    msgs = ep.advance(d, s_in, r_in)
    if not msgs:
        return msgs
    senders = [p for p in (0, 1) if c.lost(p)]
    ep.codes[0], ep.codes[1] = saved[0]
    if saved[1] or saved[2] or ep.queue[0] or ep.queue[1]:  # (else nothing waits: the queue may be the shared one)
        ep.queue[0][:] = saved[1]
        ep.queue[1][:] = saved[2]
    path = ep.recover(d, s_in, r_in, senders) if senders else None
    if path:
        for p, name in path:
            c.note_inferred(f"the {SIDES[p]}'s {name} of {where} was {missing_how(c, p)} "
                            f"(from the {SIDES[d]}'s {what})")
    return ep.advance(d, s_in, r_in)
