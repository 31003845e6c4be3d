"""``amqp-dissect compare`` on captures like those other projects publish (issue 39, item 7): an AMQP 0-9-1
conversation whose content bodies Wireshark hands to its "data" dissector, a Qpid-style type test (a value of
every type; several transfers in one TCP segment after a zero-length binary) and a qpidd-style attach whose
source holds filters with described values.  The captures are in tests/data/compare/ (README.md there says
how each was made).

Oracles: tshark run here on its own (its layers and errors per packet), the client's own record of what it
sent (tests/data/compare/README.md: 17 transfers on the type capture; two receivers with a selector filter
each), and our decoding changed on purpose (a wrong value in those packets must still be NOT EXPLAINED)."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest

import comparecaps

from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.pipelines.wireshark.compare import (KNOWN, Report, align_described, compare_capture, our_frames,
                                            stopped_by_assertion)
from amqp_dissect.pipelines.wireshark.pdml import WsFrame, _build_tree, wireshark_frames
from test_wireshark import require_tshark

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
AMQP091 = DATA / "amqp091_fields.pcap"
TYPES = DATA / "qpid_types.pcap"
SELECTOR = DATA / "qpid_selector.pcap"

TRANSFERS_SENT = 17  # the client of qpid_types.pcap sent 13 values, the all-types message and 3 more
SELECTOR_FILTERS = {"selector": ("apache.org:selector-filter:string", "colour = 'red'"),
                    "jms-selector": (0x0000468C00000004, "price > 10")}


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def tshark_per_packet(pcap: Path, *fields: str) -> dict[int, list[list[str]]]:
    """tshark's own field output per packet with an AMQP layer: packet -> one list of values per field."""
    cmd = ["tshark", "-r", str(pcap), "-Y", "amqp", "-T", "fields", "-e", "frame.number", "-E", "occurrence=a",
           "-E", "aggregator=|"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = line.split("\t")
        rows[int(cells[0])] = [[v for v in c.split("|") if v] for c in cells[1:]]
    return rows


@pytest.fixture(scope="module")
def reports():
    cache: dict = {}

    def get(pcap: Path) -> Report:
        if pcap not in cache:
            cache[pcap] = compare_capture(pcap)
        return cache[pcap]

    return get


# --------------------------------------------------------------------------- (a) AMQP 0-9-1: a field without position


class _Field:
    def __init__(self, name, pos, size, showname=""):
        self.name, self.pos, self.size, self.showname, self.show, self.raw_value = name, pos, size, showname, "", ""


def test_tree_builder_takes_a_field_without_position():
    """PDML writes Wireshark's "data" dissector as ``<field name="data" value=...>`` with no pos and no size;
    its children have both.  The tree is built from the others, the positioned children in their place."""
    fields = [_Field("amqp.payload", "10", "20"), _Field("data", None, None), _Field("data.data", "12", "5"),
              _Field("data.len", "12", "0")]
    roots = _build_tree(fields)
    assert [n.name for n in roots] == ["amqp.payload"]
    assert [c.name for c in roots[0].children] == ["data.data"]
    assert [c.name for c in roots[0].children[0].children] == ["data.len"]


def test_amqp091_data_field_in_pdml():
    """The capture shows what made compare fail: tshark writes fields with no position in its AMQP layers."""
    require_tshark()
    pdml = subprocess.run(["tshark", "-r", str(AMQP091), "-T", "pdml"], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r'<field name="data" value="[0-9a-f]+">', pdml)


def test_amqp091_compare_exit_0(capsys):
    require_tshark()
    rc, out, err = run(capsys, "compare", AMQP091)
    assert rc == EXIT_OK, out + err
    assert "internal error" not in out + err and "NOT EXPLAINED" not in out
    rows = tshark_per_packet(AMQP091, "amqp.type", "amqp.init.protocol")
    layers = sum(len(cells[0]) + len(cells[1]) for cells in rows.values())
    assert "not compared: 1 connection of another protocol (AMQP 0-9-1 1;" in out
    assert f"{layers} AMQP layers Wireshark shows on them" in out and layers > 30


# --------------------------------------------------------------------------- (b) frames after the assertion


def test_types_compare_exit_0_names_the_defects(capsys):
    require_tshark()
    rc, out, err = run(capsys, "compare", TYPES)
    assert rc == EXIT_OK, out + err
    assert "NOT EXPLAINED" not in out and "internal error" not in out + err
    for name in ("ws-zero-length-binary-assertion", "ws-assertion-stops-packet", "ws-described-body-unknown-type",
                 "ws-decimal-not-supported"):
        assert f"  {name} (" in out, name


def test_types_frames_after_the_assertion(reports):
    """In each packet where tshark reports the assertion, the frames before the one it stopped at are compared
    value by value, and each frame after it is one ws-assertion-stops-packet disagreement; the counts come
    from tshark's own output and from what the client sent."""
    require_tshark()
    rep = reports(TYPES)
    ours = our_frames(TYPES)
    transfers = sum(1 for fs in ours.values() if isinstance(fs, list) for f in fs
                    if f.record.get("performative") == "transfer")
    assert transfers == TRANSFERS_SENT
    rows = tshark_per_packet(TYPES, "amqp.length", "amqp.init.protocol", "_ws.malformed")
    asserted = [p for p, cells in rows.items() if cells[2]]
    assert asserted, "tshark reports no dissector bug on this capture"
    stopped = 0
    for packet in asserted:
        shown = len(rows[packet][0]) + len(rows[packet][1])
        mine = ours[packet]
        assert 0 < shown <= len(mine)
        compared = sorted(i for p, i, _ in rep.frames if p == packet)
        assert compared == list(range(shown))  # every frame Wireshark decoded is compared
        left_out = [d for d in rep.disagreements if d.packet == packet and d.path == "@not-decoded"]
        assert sorted(d.index for d in left_out) == list(range(shown, len(mine)))
        assert all(d.known == ["ws-assertion-stops-packet"] for d in left_out)
        # the asserted frame itself: what Wireshark did not show is its defect, decimals theirs, the rest agrees
        for d in rep.disagreements:
            if d.packet == packet and d.index == shown - 1:
                assert d.known in (["ws-zero-length-binary-assertion"], ["ws-decimal-not-supported"]), d
        stopped += len(mine) - shown
    assert stopped > 0
    assert rep.ours_count - stopped == rep.ws_count == rep.frames_compared
    # values before the empty binary in the all-types message were compared one by one
    assert {"message.application-properties.string", "message.application-properties.uuid",
            "message.application-properties.timestamp", "message.application-properties.char"} <= rep.paths


def test_assertion_rule_needs_the_assertion():
    """Fewer frames from Wireshark without its assertion on the last one is still a frame-count disagreement."""
    def ws(errors):
        return WsFrame(1, 0, {}, errors)
    ours = [object(), object(), object()]
    assert stopped_by_assertion(ours, [ws(['./epan/tvbuff.c:4469: failed assertion "len > 0"'])])
    assert not stopped_by_assertion(ours, [ws(["Malformed Packet (Exception occurred)"])])
    assert not stopped_by_assertion(ours, [ws([]), ws(["x failed assertion y"]), ws([])])
    assert not stopped_by_assertion(ours[:1], [ws(["failed assertion"])])


# --------------------------------------------------------------------------- (c) described values in a filter set


def test_selector_compare_exit_0_names_the_defect(capsys):
    require_tshark()
    rc, out, err = run(capsys, "compare", SELECTOR)
    assert rc == EXIT_OK, out + err
    assert "NOT EXPLAINED" not in out and "internal error" not in out + err
    assert "  ws-described-value-bare (" in out


def test_selector_filters_compared_value_by_value(reports):
    """Both filters of each attach (ours against the client's own filter set): the symbol descriptor and both
    values agree with Wireshark; only the ulong descriptor, which Wireshark does not show, is the defect."""
    require_tshark()
    rep = reports(SELECTOR)
    ours = our_frames(SELECTOR)
    attaches = [f for fs in ours.values() if isinstance(fs, list) for f in fs
                if f.record.get("performative") == "attach" and f.record["fields"].get("source")]
    filters = [f.record["fields"]["source"].get("filter") for f in attaches]
    seen = {k: (v["@descriptor"], v["@value"]) for fl in filters if fl for k, v in fl.items()}
    assert seen == SELECTOR_FILTERS
    base = "fields.source.filter."
    assert {base + "selector.@descriptor", base + "selector.@value", base + "jms-selector.@value"} <= rep.paths
    for d in rep.disagreements:
        assert d.path == base + "jms-selector.@descriptor" and d.known == ["ws-described-value-bare"], d
        assert d.ours == SELECTOR_FILTERS["jms-selector"][0] and d.ws == "<not shown>"
    assert len(rep.disagreements) == 2  # the receiver's attach and the peer's answer


def test_align_described_forms():
    ws = {"m.k : x:y": "v", "m.j": "w", "m.l : x:list[0]": 1}
    ours = {"m.k.@descriptor": "x:y", "m.k.@value": "v", "m.j.@descriptor": 5, "m.j.@value": "w",
            "m.l.@descriptor": "x:list", "m.l.@value[0]": 1}
    align_described(ours, ws)
    assert ws == {"m.k.@value": "v", "m.k.@descriptor": "x:y", "m.j.@value": "w", "m.l.@value[0]": 1,
                  "m.l.@descriptor": "x:list"}
    # a descriptor that is not Wireshark's label is not taken from ours: the disagreement stays
    ws = {"m.k : x:other": "v"}
    align_described({"m.k.@descriptor": "x:y", "m.k.@value": "v"}, ws)
    assert ws == {"m.k : x:other": "v", "m.k.@descriptor": "<in the label: x:other>"}


# --------------------------------------------------------------------------- a wrong value is still caught


def _wrong(ours: dict, packet: int, index: int, edit) -> dict:
    changed = copy.deepcopy(ours)
    edit(changed[packet][index].record)
    return changed


_WS: dict = {}


def _unknown_paths(pcap: Path, ours: dict) -> list[str]:
    if pcap not in _WS:
        _WS[pcap] = wireshark_frames(pcap)
    return [d.path for d in compare_capture(pcap, ours=ours, ws=_WS[pcap]).unknown]


def _frame_with(ours: dict, pred) -> tuple[int, int]:
    for packet, fs in sorted((p, fs) for p, fs in ours.items() if isinstance(fs, list)):
        for f in fs:
            if pred(f.record):
                return packet, f.index
    raise AssertionError("no such frame")


def test_wrong_values_caught_in_the_asserted_packets():
    """A value we decode wrongly, in a frame before the assertion in the same packet and in the asserted frame
    before its empty binary, is NOT EXPLAINED: the new rules cannot hide a real mismatch."""
    require_tshark()
    ours = our_frames(TYPES)
    rows = tshark_per_packet(TYPES, "_ws.malformed")
    packet = min(p for p, cells in rows.items() if cells[0])
    assert len(ours[packet]) > 1

    def props(rec):
        return rec["message"]["application-properties"]

    all_types = _frame_with(ours, lambda r: "empty-binary" in r.get("message", {}).get("application-properties", {}))
    assert all_types[0] == packet
    edit = lambda r: props(r).__setitem__("string", "hellx")  # noqa: E731
    assert _unknown_paths(TYPES, _wrong(ours, *all_types, edit)) == ["message.application-properties.string"]
    before = (packet, all_types[1] - 1)
    assert before[1] >= 0
    edit = lambda r: props(r).__setitem__("i", props(r)["i"] + 1)  # noqa: E731
    assert _unknown_paths(TYPES, _wrong(ours, *before, edit)) == ["message.application-properties.i"]
    # and a frame Wireshark did not decode never counts as agreeing: it is listed, known, not compared
    rep = compare_capture(TYPES, ours=ours, ws=_WS[TYPES])
    assert not any((p, i) == (packet, all_types[1] + 1) for p, i, _ in rep.frames)


def test_wrong_values_caught_in_the_filter_set():
    require_tshark()
    ours = our_frames(SELECTOR)

    def attach_with(key):
        return _frame_with(ours, lambda r: r.get("performative") == "attach"
                           and key in ((r["fields"].get("source") or {}).get("filter") or {}))

    def edit_filter(key, part, value):
        return lambda r: r["fields"]["source"]["filter"][key].__setitem__(part, value)

    base = "fields.source.filter."
    where = attach_with("selector")
    assert _unknown_paths(SELECTOR, _wrong(ours, *where, edit_filter("selector", "@value", "colour = 'blue'"))) \
        == [base + "selector.@value"]
    got = _unknown_paths(SELECTOR, _wrong(ours, *where, edit_filter("selector", "@descriptor", "x:other")))
    assert base + "selector.@descriptor" in got  # Wireshark's label names another descriptor
    where = attach_with("jms-selector")
    assert _unknown_paths(SELECTOR, _wrong(ours, *where, edit_filter("jms-selector", "@value", "price > 11"))) \
        == [base + "jms-selector.@value"]


def test_new_entries_listed():
    ids = {e["id"] for e in KNOWN}
    assert {"ws-assertion-stops-packet", "ws-described-value-bare", "ws-described-body-unknown-type"} <= ids


# --------------------------------------------------------------------------- 8-byte ulong message ids (samples/messages)

@pytest.fixture(scope="module")
def ulong_ids(tmp_path_factory):
    """Real proton bytes: message-id and correlation-id as ulong 5, 7005 and 2^40+3 (comparecaps)."""
    return comparecaps.build_ulong_ids(tmp_path_factory.mktemp("ids"))


def test_ulong_ids_high_half(capsys, ulong_ids):
    """tshark shows the upper 32 bits of an 8-byte ulong id (its own field output says so); ours is the number
    proton sent, and a wrong one is still NOT EXPLAINED."""
    require_tshark()
    shown = [int(c[0][0]) for c in tshark_per_packet(ulong_ids, "amqp.message.messageId.uint").values() if c[0]]
    assert shown == [5, 7005 >> 32, (2**40 + 3) >> 32] == [5, 0, 256]
    rc, out, err = run(capsys, "compare", ulong_ids)
    assert rc == EXIT_OK, out + err
    assert "NOT EXPLAINED" not in out and "  ws-ulong-id-high-32-bits (4 disagreements)" in out
    ours = our_frames(ulong_ids)
    ids = [f.record["message"]["properties"]["message-id"] for fs in ours.values() for f in fs
           if f.record.get("performative") == "transfer"]
    assert ids == list(comparecaps.ULONG_IDS)
    where = _frame_with(ours, lambda r: r.get("message", {}).get("properties", {}).get("message-id") == 7005)
    edit = lambda r: r["message"]["properties"].__setitem__("message-id", 7006)  # noqa: E731
    assert _unknown_paths(ulong_ids, _wrong(ours, *where, edit)) == ["message.properties.message-id"]


# --------------------------------------------------------------------------- after a gap (samples/loss)

KERNEL_LOSS = Path(__file__).resolve().parents[2] / "samples" / "loss" / "kernel_loss.pcap"


def _tshark_numbers(pcap: Path, flt: str) -> list[int]:
    out = subprocess.run(["tshark", "-r", str(pcap), "-Y", flt, "-T", "fields", "-e", "frame.number"],
                         capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


def test_reassembly_stuck_after_gap(capsys, reports):
    """The packets the rule explains are exactly those tshark itself leaves without an AMQP layer after its
    last 'previous segment not captured' in the server's direction; every other frame is compared."""
    require_tshark()
    rc, out, err = run(capsys, "compare", KERNEL_LOSS)
    assert rc == EXIT_OK, out + err
    assert "NOT EXPLAINED" not in out and "  ws-reassembly-stuck-after-gap (" in out
    last_lost = max(_tshark_numbers(KERNEL_LOSS, "tcp.analysis.lost_segment && tcp.srcport==5672"))
    silent = [n for n in _tshark_numbers(KERNEL_LOSS, "tcp.srcport==5672 && tcp.len>0 && !amqp") if n > last_lost]
    rep = reports(KERNEL_LOSS)
    excused = sorted(d.packet for d in rep.disagreements if d.known == ["ws-reassembly-stuck-after-gap"])
    assert excused == silent and silent
    assert all(d.path == "@frames" and d.ws == [] for d in rep.disagreements)
    assert rep.frames_compared == rep.ws_count  # every frame Wireshark shows is compared


# --------------------------------------------------------------------------- the samples outside samples/*.pcap

ROOT = Path(__file__).resolve().parents[2]
OTHER_SAMPLES = sorted([*ROOT.glob("samples/messages/*.pcap"), *ROOT.glob("samples/loss/*.pcap"),
                        *ROOT.glob("samples/other-protocols/*.pcap")])


@pytest.mark.parametrize("pcap", OTHER_SAMPLES, ids=[p.stem for p in OTHER_SAMPLES])
def test_other_samples_explained(pcap, reports):
    """samples/*.pcap are compared by test_wireshark.py; these too: every disagreement a named defect."""
    require_tshark()
    rep = reports(pcap)
    assert not rep.unknown, "\n".join(str(d) for d in rep.unknown[:20])
    assert rep.frames_compared > 0 or rep.other_protocols
