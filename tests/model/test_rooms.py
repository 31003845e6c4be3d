"""The model's rule rooms as objects of their own (issue 25): how they are built and wired.

* Structure, read from the sources (an AST, so it holds compiled and pure alike): no rule room
  inherits another room or the tracker, none imports the tracker; the tracker is only the rooms'
  ``Hooks``; the size bounds of the issue (a module of the model at most 800 lines, a class of
  the package at most 700).
* Wiring: every room writes into the one ledger the tracker owns (a finding made by a room is in
  the tracker's ``violations``), and the hooks are heard for what the capture shows (oracle: the
  frames the Dissector produced and the sample's ground truth, not our own tables).
"""

from __future__ import annotations

import ast
import json
import os

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.model.findings import Recorder
from amqp_dissect.model.tracker import StateTracker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "dissector", "model")
SAMPLES = os.path.join(ROOT, "samples")

ROOMS = ("connection", "sessions", "links", "transfers", "settlement", "transactions", "stall_rules")
ROOM_CLASSES = {"connection": "ConnectionRules", "sessions": "SessionRules", "links": "LinkRules",
                "transfers": "TransferRules", "settlement": "SettlementRules",
                "transactions": "TransactionRules", "stall_rules": "StallRules"}


def _tree(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield (node.module or "").rsplit(".", 1)[-1]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.rsplit(".", 1)[-1]


def test_no_room_inherits_or_imports_another_room_class_or_the_tracker():
    for room in ROOMS + ("findings", "hooks", "steps"):
        tree = _tree(os.path.join(MODEL, room + ".py"))
        assert "tracker" not in set(_imported_modules(tree)), room
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                assert node.bases == [], f"{room}.{node.name} has a base class"
    for room, cls in ROOM_CLASSES.items():
        names = {n.name for n in _tree(os.path.join(MODEL, room + ".py")).body if isinstance(n, ast.ClassDef)}
        assert cls in names, (room, names)


def test_the_tracker_is_only_the_rooms_hooks_and_holds_one_of_each_room():
    tree = _tree(os.path.join(MODEL, "tracker.py"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StateTracker"]
    assert [b.id for b in cls.bases] == ["Hooks"]
    t = StateTracker()
    rooms = [t.connection_rules, t.session_rules, t.link_rules, t.transfer_rules, t.settlement_rules,
             t.transaction_rules, t.stall_rules]
    assert sorted(type(r).__name__ for r in rooms) == sorted(ROOM_CLASSES.values())
    assert type(t.ledger) is Recorder
    for r in rooms:
        if hasattr(r, "ledger"):  # (the stall room finds nothing: stalls are measurements)
            assert r.ledger is t.ledger, type(r).__name__
    # the readers' lists are the ledger's and the rooms' own
    assert t.violations is t.ledger.violations and t.frame_errors is t.ledger.frame_errors
    assert t.stalls is t.stall_rules.stalls and t.transactions is t.transaction_rules.transactions
    assert t._settling is t.settlement_rules.settling
    t.fold_lag = 7
    assert t.settlement_rules.fold_lag == 7


def test_the_issue_size_bounds():
    for name in sorted(os.listdir(MODEL)):
        if name.endswith(".py"):
            with open(os.path.join(MODEL, name), encoding="utf-8") as f:
                assert sum(1 for _ in f) <= 800, name
    for folder, _, files in os.walk(os.path.join(ROOT, "dissector")):
        for name in files:
            if name.endswith(".py"):
                for node in ast.walk(_tree(os.path.join(folder, name))):
                    if isinstance(node, ast.ClassDef):
                        assert node.end_lineno - node.lineno + 1 <= 700, (name, node.name)


class _Listening(StateTracker):
    def __init__(self):
        super().__init__()
        self.folded = []
        self.credit_packets = set()
        self.window_packets = set()

    def _on_fold(self, dlv):
        self.folded.append(dlv)

    def _on_credit(self, link, f):
        self.credit_packets.add(f.packet)

    def _on_window(self, s, sender, f):
        self.window_packets.add(f.packet)


def _events(path):
    d = Dissector()
    out = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            out.extend(d.feed(rec))
    out.extend(d.finish())
    return out


def test_the_rooms_tell_the_hooks_and_write_into_the_ledger():
    path = os.path.join(SAMPLES, "credit_one.pcap")
    with open(os.path.join(SAMPLES, "credit_one.truth.json")) as f:
        totals = json.load(f)["totals"]
    events = _events(path)
    t = _Listening()
    for ev in events:
        t.feed(ev)
    t.finish()
    frames = [ev for ev in events if type(ev) is Frame]
    transfers = {f.packet for f in frames if f.pname == "transfer"}
    begins = {f.packet for f in frames if f.pname == "begin"}
    assert transfers and begins
    assert transfers <= t.credit_packets  # every transfer checked against its link's credit
    assert begins <= t.window_packets  # every begin announces an incoming-window
    # each delivery of the ground truth folded once (sent by the client, received by it)
    assert len(t.folded) == len(set(map(id, t.folded))) == totals["messages_sent"] + totals["deliveries_received"]
    # a finding of a room lands in the tracker's ledger: a second open from the client (the
    # connection room's open rule; its machine step refuses it too)
    (opened,) = [f for f in frames if f.pname == "open" and f.direction == 0]
    n = len(t.violations)
    t.feed(opened)
    assert "second open from the client" in [v["message"] for v in t.violations[n:]]
    assert t.violations is t.ledger.violations
