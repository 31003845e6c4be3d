"""The state machines run: :class:`Machine` (a transition table on integer codes) and
:class:`Endpoints` (the two endpoint states of one connection, session or link, with receive
buffers).  The tables themselves are data, in :mod:`amqp_dissect.model.transitions`.
"""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from .transitions import (CONNECTION_INPUTS, CONNECTION_STATES, CONNECTION_TRANSITIONS, LINK_INPUTS, LINK_STATES,
                          LINK_TRANSITIONS, SESSION_INPUTS, SESSION_STATES, SESSION_TRANSITIONS, SIDES, UNKNOWN)

EXPLAIN_MEMO_MAX = 4096  # answers Machine.explain keeps


def _steady_state(states: tuple, transitions: dict):
    """The one state of a machine in which any other frame, sent or received, changes nothing
    (None when there is not exactly one)."""
    steady = [st for st in states if transitions.get((st, "S:FRAME")) == (None, st)
              and transitions.get((st, "R:FRAME")) == (None, st)]
    return steady[0] if len(steady) == 1 else None


def _code_table(transitions: dict, codes: dict, in_codes: dict, n_states: int, ni: int) -> tuple:
    """The transitions by integer codes (``n_states`` states, ``ni`` inputs): at state code * ni
    + input code, (action, next state code), None where the table has no transition."""
    table = [None] * (n_states * ni)
    for (st, inp), (action, nxt) in transitions.items():
        table[codes[st] * ni + in_codes[inp]] = (action, codes[nxt])
    return tuple(table)


def _lost_moves(inputs: tuple, in_codes: dict) -> tuple:
    """The frames a capture can lose that change states: (name, S: input code, R: input code),
    derived from the inputs (an "S:x" whose receiving side is "R:x", "(error)" not told apart)."""
    return tuple(
        (inp[2:].lower(), in_codes[inp], in_codes["R:" + inp[2:].replace("(error)", "")])
        for inp in inputs
        if inp.startswith("S:") and inp != "S:FRAME" and "!=" not in inp
        and "R:" + inp[2:].replace("(error)", "") in in_codes
    )


class Machine:
    """A state machine given as data: ``(state, input) -> (action, next_state)``.

    The table is written with names (the spec's); it runs on integers: every state (and
    ``UNKNOWN``) and every input gets a code, and ``table[state * len(inputs) + input]`` is
    ``(action, next state code)`` or None.  :meth:`step` takes and gives names (for people and
    tests), :meth:`step_code` codes (for :class:`Endpoints`).

    ``deferrable`` is derived from the table: the ``(state, R:input)`` pairs not in
    the table for which some state reachable by the endpoint's own sends
    (``S:`` transitions only) accepts the input.  The capture sees a received
    frame *before* the endpoint processes it (never after), so such an input
    may simply still wait in the endpoint's receive buffer: see :class:`Endpoints`.
    """

    __slots__ = ("name", "states", "inputs", "transitions", "initial", "deferrable", "steady",
                 "names", "codes", "in_codes", "table", "defer", "steady_code", "s_frame", "r_frame", "moves",
                 "explained")

    def __init__(self, name: str, states: tuple, inputs: tuple, transitions: dict, initial: str):
        self.name = name
        self.states = states
        self.inputs = inputs
        self.transitions = transitions
        self.initial = initial
        # the state in which any other frame, sent or received, changes nothing (OPENED, MAPPED,
        # ATTACHED): derived from the table, it lets the hot path skip the lookups
        self.steady = _steady_state(states, transitions)
        self.deferrable = frozenset(
            (st, inp)
            for st in (*states, UNKNOWN)
            for inp in inputs
            if inp.startswith("R:") and (st, inp) not in transitions
            and any((t, inp) in transitions for t in self._send_reachable(st))
        )
        # the integer form
        self.names = (*states, UNKNOWN)
        self.codes = {n: i for i, n in enumerate(self.names)}
        self.in_codes = {n: i for i, n in enumerate(inputs)}
        ni = len(inputs)
        self.table = _code_table(transitions, self.codes, self.in_codes, len(self.names), ni)
        self.defer = tuple((self.names[k // ni], inputs[k % ni]) in self.deferrable for k in range(len(self.table)))
        self.steady_code = -1 if self.steady is None else self.codes[self.steady]
        self.s_frame = self.in_codes["S:FRAME"]
        self.r_frame = self.in_codes["R:FRAME"]
        self.explained: dict = {}  # explain's answers (see there)
        self.moves = _lost_moves(inputs, self.in_codes)

    def _send_reachable(self, state: str) -> set:
        seen = {state}
        todo = [state]
        while todo:
            st = todo.pop()
            for (a, inp), (_, b) in self.transitions.items():
                if a == st and inp.startswith("S:") and b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    def step(self, state: str, inp: str) -> tuple[str | None, str, str | None]:
        """``(action, next_state, violation)``; on a violation the state is kept."""
        action, nxt, bad = self.step_code(self.codes[state], self.in_codes.get(inp, -1), inp)
        return action, self.names[nxt], bad

    def explain(self, codes, d: int, s_ic: int, r_ic: int, senders, depth: int = 3):
        """:meth:`_explain`, remembered: it depends on the endpoint states and the inputs only, and a
        flood of one frame on a connection with a gap asks the same question at every frame."""
        key = (codes[0], codes[1], d, s_ic, r_ic, tuple(senders), depth)
        memo = self.explained
        path = memo.get(key, memo)
        if path is memo:
            path = self._explain(codes, d, s_ic, r_ic, senders, depth)
            if len(memo) >= EXPLAIN_MEMO_MAX:  # (bounded: the states and inputs are few anyway)
                memo.clear()
            memo[key] = path
        return None if path is None else list(path)

    def _explain(self, codes, d: int, s_ic: int, r_ic: int, senders, depth: int = 3):
        """The shortest sequence (at most ``depth``) of frames sent by the peers in ``senders`` and
        not captured that makes peer ``d`` sending ``s_ic`` (and peer ``1-d`` receiving ``r_ic``)
        legal from the endpoint states ``codes``: ``[(peer, frame name), ...]`` (empty when
        already legal), or None.  A lost frame is one the table allows at its sender, and at its
        receiver too, or that the receiver would keep waiting (a frame it cannot take before it sends
        something, ``Machine.deferrable``: a client's open pipelined before the server's header);
        once an endpoint keeps a frame waiting, what it receives next waits behind it."""
        ni = len(self.inputs)
        table = self.table
        defer = self.defer

        def ok(cs, waits) -> bool:
            if s_ic < 0 or waits[d] or table[cs[d] * ni + s_ic] is None:
                return False
            if r_ic < 0 or waits[1 - d]:
                return True
            t = table[cs[d] * ni + s_ic]
            mine = list(cs)
            mine[d] = t[1]
            k = mine[1 - d] * ni + r_ic
            return table[k] is not None or defer[k]

        start = (codes[0], codes[1], False, False)
        if ok(start, start[2:]):
            return []
        seen = {start}
        level = [(start, [])]
        for _ in range(depth):
            nxt_level = []
            for cs, path in level:
                for p in senders:
                    for name, si, ri in self.moves:
                        t = self._lost_move(cs, p, si, ri)
                        if t is None or t in seen:
                            continue
                        seen.add(t)
                        way = path + [(p, name)]
                        if ok(t, t[2:]):
                            return way
                        nxt_level.append((t, way))
            level = nxt_level
        return None

    def _lost_move(self, cs, p: int, si: int, ri: int):
        """The search state ``(code 0, code 1, waits 0, waits 1)`` after peer ``p`` sent a frame
        (inputs ``si`` / ``ri``) the capture did not keep; None when the table refuses it."""
        ni = len(self.inputs)
        table = self.table
        if cs[2 + p]:  # (an endpoint with frames waiting: not followed further)
            return None
        a = table[cs[p] * ni + si]
        if a is None:
            return None
        n = [cs[0], cs[1], cs[2], cs[3]]
        n[p] = a[1]
        if not cs[3 - p]:  # (the receiver 1 - p: cs[2 + 1 - p])
            k = cs[1 - p] * ni + ri
            b = table[k]
            if b is not None:
                n[1 - p] = b[1]
            elif self.defer[k]:
                n[3 - p] = True
            else:
                return None
        return (n[0], n[1], n[2], n[3])

    def step_code(self, sc: int, ic: int, inp=None) -> tuple:
        """:meth:`step` on codes: ``(action, next state code, violation text or None)``; ``ic`` -1
        is an input outside the machine's (named ``inp``)."""
        t = self.table[sc * len(self.inputs) + ic] if ic >= 0 else None
        if t is None:
            return None, sc, f"{self.inputs[ic] if ic >= 0 else inp} not allowed in {self.name} state {self.names[sc]}"
        return t[0], t[1], None


_NO_MSGS: list = []  # (what a frame between steady endpoints returns: no messages)

# field indices of the hot performatives, from the generated spec tables (frame.fields is the
# performative's field values in spec order, ABSENT beyond the encoded list)


# the queues of endpoints where no input waits (shared, always empty: only a pair of an endpoint's own is
# written, see Endpoints.advance_codes)
_NO_QUEUE = ([], [])


class Endpoints:
    """The two endpoint states of one connection / session / link, with receive buffers.

    ``advance(d, x)``: peer ``d`` sent ``x``.  Endpoint ``d`` takes ``S:x`` at once
    (what it sent shows the state it was in).  Endpoint ``1-d`` takes ``R:x``: if
    the table allows it now it is applied; if not, but the endpoint's own later
    sends can make it legal (``Machine.deferrable``), it waits in a FIFO receive
    buffer, like bytes not read yet, and is retried after each ``S:`` transition
    of that endpoint; inputs behind a waiting one wait too.  Everything else is
    a violation (returned as messages; the state is kept).

    States and inputs are held as the machine's integer codes; indexing (``ep[0]``),
    :attr:`state` and :meth:`waiting` give names.
    """

    __slots__ = ("machine", "codes", "queue")

    def __init__(self, machine: Machine, state: str):
        self.machine = machine
        c = machine.codes[state]
        self.codes = [c, c]
        # input codes received and not processable yet, per endpoint: the shared empty pair until the
        # first (an endpoint's own pair from then on: see advance_codes)
        self.queue = _NO_QUEUE

    @property
    def state(self) -> list[str]:
        names = self.machine.names
        return [names[self.codes[0]], names[self.codes[1]]]

    def __getitem__(self, e):
        return self.machine.names[self.codes[e]]

    def __setitem__(self, e, value):
        self.codes[e] = self.machine.codes[value]

    def __eq__(self, other):
        return self.state == list(other)

    def advance(self, d: int, s_in: str, r_in: str) -> list[str]:
        ic = self.machine.in_codes
        return self.advance_codes(d, ic.get(s_in, -1), ic.get(r_in, -1), s_in, r_in)

    def advance_codes(self, d: int, s_ic: int, r_ic: int, s_in=None, r_in=None) -> list[str]:
        """:meth:`advance` with input codes (-1: an input outside the machine's, named by
        ``s_in`` / ``r_in``: a violation, never queued)."""
        m = self.machine
        codes = self.codes
        msgs: list[str] = []
        _, nxt, bad = m.step_code(codes[d], s_ic, s_in)
        if bad:
            msgs.append(f"{SIDES[d]} endpoint: {bad}")
        else:
            codes[d] = nxt
            self._drain(d, msgs)
        e = 1 - d
        q = self.queue[e]
        if q and r_ic >= 0:
            q.append(r_ic)
            return msgs
        _, nxt, bad = m.step_code(codes[e], r_ic, r_in)
        if not bad:
            codes[e] = nxt
        elif r_ic >= 0 and m.defer[codes[e] * len(m.inputs) + r_ic]:
            if self.queue is _NO_QUEUE:  # the first input that waits: the endpoints' own pair
                self.queue = ([], [])
                q = self.queue[e]
            q.append(r_ic)
        else:
            msgs.append(f"{SIDES[e]} endpoint: {bad}")
        return msgs

    @cython.boundscheck(False)  # (codes and queue are pairs: compiled, each index a plain C access)
    @cython.wraparound(False)
    def frame(self, d: int) -> list[str]:
        """``advance(d, "S:FRAME", "R:FRAME")``, without the lookups when both endpoints are steady."""
        codes = self.codes
        m = self.machine
        steady = m.steady_code
        c0 = codes[0]  # (C integers when compiled, see machine.pxd: no int object per frame)
        c1 = codes[1]
        if c0 == steady and c1 == steady:
            q = self.queue
            q0 = q[0]
            q1 = q[1]
            if not q0 and not q1:
                return _NO_MSGS
        return self.advance_codes(d, m.s_frame, m.r_frame)

    def _drain(self, e: int, msgs: list) -> None:
        q = self.queue[e]
        m = self.machine
        codes = self.codes
        while q:
            ic = q[0]
            _, nxt, bad = m.step_code(codes[e], ic)
            if not bad:
                codes[e] = nxt
            elif m.defer[codes[e] * len(m.inputs) + ic]:
                return
            else:
                msgs.append(f"{SIDES[e]} endpoint: {bad} (received earlier, not processable)")
            q.pop(0)

    def recover(self, d: int, s_in: str, r_in: str, senders) -> list | None:
        """Frames of the peers in ``senders`` were lost from the capture: if some lost frames
        (:meth:`Machine.explain`) make ``advance(d, s_in, r_in)`` legal, take them  as if they had
        been captured) and return them as ``[(peer, frame name), ...]``; else None and nothing changes."""
        m = self.machine
        path = m.explain(self.codes, d, m.in_codes.get(s_in, -1), m.in_codes.get(r_in, -1), senders)
        if not path:
            return None
        for p, name in path:
            for mv, si, ri in m.moves:
                if mv == name:
                    self.advance_codes(p, si, ri)  # as if captured (inputs waiting are taken up as usual)
                    break
        return path

    def waiting(self, e: int) -> list[str]:
        """Received inputs endpoint e has not been able to process (yet)."""
        inputs = self.machine.inputs
        return [inputs[i] for i in self.queue[e]]


CONNECTION_MACHINE = Machine("connection", CONNECTION_STATES, CONNECTION_INPUTS, CONNECTION_TRANSITIONS, "START")
SESSION_MACHINE = Machine("session", SESSION_STATES, SESSION_INPUTS, SESSION_TRANSITIONS, "UNMAPPED")
LINK_MACHINE = Machine("link", LINK_STATES, LINK_INPUTS, LINK_TRANSITIONS, "DETACHED")
MACHINES = (CONNECTION_MACHINE, SESSION_MACHINE, LINK_MACHINE)
