"""Transactions (spec 4): the coordinator link's declare / discharge and the deliveries enlisted.

:class:`TransactionRules` is a room of its own: it keeps the run's transactions and writes what it
finds into the ledger the tracker gave it; the settlement and transfer rooms call it."""

from __future__ import annotations

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..amqp.codec import ELEMENT_BUDGET_BASE, ELEMENTS_PER_BYTE, Described, decode_all
from ..errors import DissectError
from .findings import Recorder, strict
# the value readers (amqp/values.py), under the names this room calls them by
from ..amqp.values import read_composite as _composite, read_hex as _hex, read_plain as _plain

if not cython.compiled:  # (compiled: C functions and constants, cimported in the .pxd)
    from ..amqp.values import read_bool as _bool


class _Txn:
    __slots__ = (
        "conn", "link", "txn_id", "global_id", "declare", "declare_outcome", "declare_error",
        "declared", "discharge", "fail", "discharge_outcome", "discharge_error", "discharged",
        "enlisted", "merged_into",
    )

    def __init__(self, conn, link):
        self.conn = conn
        self.link = link
        self.txn_id = None
        self.global_id = None
        self.declare = None  # DeliveryRecord
        self.declare_outcome = None
        self.declare_error = None
        self.declared = None  # (ts, packet)
        self.discharge = None
        self.fail = None
        self.discharge_outcome = None
        self.discharge_error = None
        self.discharged = None
        # (link, delivery-id, how) of each delivery enlisted: ids, not the deliveries (they are folded
        # and forgotten when settled, whatever their transaction)
        self.enlisted: list = []
        self.merged_into = None  # the _Txn this one's enlisted deliveries went to (see coordinator_outcome)


class TransactionRules:
    """Declare, discharge, enlisting (see the module docstring)."""

    def __init__(self, ledger: Recorder):
        self.ledger = ledger
        self.transactions: list = []  # _Txn

    def enlist(self, dlv, txn_id, by, f):
        key = _hex(txn_id)
        if key is None:
            return
        dlv.txn_id = key
        c = dlv.link.conn
        t = c.txns.get(key)
        if t is None:
            t = _Txn(c, None)
            t.txn_id = key
            c.txns[key] = t
            self.transactions.append(t)
        e = dlv.enlisted_in
        while e is not None and e.merged_into is not None:
            e = e.merged_into
        if e is not t:
            dlv.enlisted_in = t
            t.enlisted.append((dlv.link, dlv.delivery_id, "transfer" if by == "sender" else "disposition"))

    def coordinator_message(self, c, link, dlv, f):
        if dlv.payload is None:  # no bytes kept (the delivery was already complete): nothing to decode
            return
        try:
            data = b"".join(dlv.payload)
            # (elements in proportion to the message's bytes, as the framing layer budgets a connection)
            sections = decode_all(data, max_elements=ELEMENT_BUDGET_BASE + ELEMENTS_PER_BYTE * len(data))
        except DissectError as e:
            self.ledger.violation(c, dlv.direction, f, "malformed", "warn",
                            f"coordinator message on link {link.name!r} does not decode: {e}", link=link.name)
            return
        body = None
        for sec in sections:
            if isinstance(sec, Described) and sec.name == "amqp-value":
                body = sec.value
        body = _composite(body, "declare", "discharge")
        if body is None:
            self.ledger.violation(c, dlv.direction, f, "protocol", "warn",
                            f"message on coordinator link {link.name!r} is neither declare nor discharge",
                            link=link.name, delivery_id=dlv.delivery_id)
            return
        if body.spec.name == "declare":
            t = _Txn(c, link)
            t.declare = dlv
            t.global_id = _plain(body.field("global-id"))
            self.transactions.append(t)
            dlv.sender_state = "declare"
            dlv.txn = t
        else:
            key = _hex(body.field("txn-id"))
            t = c.txns.get(key)
            if t is None:
                t = _Txn(c, link)
                t.txn_id = key
                c.txns[key] = t
                self.transactions.append(t)
                if strict(c, link.session):
                    self.ledger.violation(c, dlv.direction, f, "unknown-transaction", "warn",
                                    f"discharge of txn-id {key}, which was never declared", link=link.name,
                                    delivery_id=dlv.delivery_id)
            t.link = t.link or link
            t.discharge = dlv
            t.fail = _bool(body.effective("fail"))
            dlv.txn_id = key
            dlv.txn = t
            dlv.sender_state = "discharge"

    def coordinator_outcome(self, dlv, name, state, f):
        c = dlv.link.conn
        t = dlv.txn
        if t is None:
            return
        if t.declare is dlv:
            t.declare_outcome = name
            t.declared = (f.ts, f.packet)
            if name == "declared":
                key = dlv.txn_id
                t.txn_id = key
                old = c.txns.get(key)
                if old is not None and old is not t and old.declare is None:
                    # deliveries enlisted before the declared outcome was seen
                    t.enlisted.extend(old.enlisted)
                    old.merged_into = t  # (its deliveries are enlisted in t now)
                    if old in self.transactions:
                        self.transactions.remove(old)
                c.txns[key] = t
            elif name == "rejected":
                t.declare_error = dlv.outcome_error
            return
        if t.discharge is dlv:
            t.discharge_outcome = name
            t.discharged = (f.ts, f.packet)
            if name == "rejected":
                t.discharge_error = dlv.outcome_error
