"""Wireshark's own field names as aliases (issue 27): every alias of ``amqp_dissect.filter.ALIASES``
is checked against tshark's own filter and ``-T fields`` with the *same text* on both sides: the
packets ``-Y NAME`` and ``-Y 'NAME OP VALUE'`` select are the packets tshark selects, and the
values ``-e NAME`` prints, per packet, are tshark's.  The samples are joined into one capture
(the fixtures of test_filter_fields_tshark.py)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from test_filter_fields_tshark import (  # noqa: F401  (fixtures)
    OUTCOMES, TSHARK, _isnum, _pick, merged, our_packets, our_values, ours, tshark,
)
from test_filter_fields_tshark import our_packets as _our_packets


from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.filter import ALIASES, FIELDS, WS_NOT_THE_SAME

# dissector/filter.py (the aliases) is not a hot module: CI runs these in its compiled pass only (no_twin)
pytestmark = [pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)"),
              pytest.mark.no_twin]
NAMES = sorted(ALIASES)
FRAME_LEVEL = {"frame.number", "frame.time_epoch", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport",
               "tcp.dstport"}  # one value per packet in tshark, one per frame line here


@pytest.fixture(scope="module")
def ws_types():
    """tshark's field name -> its type (FT_NONE: presence only, no value to compare or print)."""
    out = {}
    for line in tshark("-G", "fields").splitlines():
        parts = line.split("\t")
        if parts[0] == "F" and len(parts) > 3:
            out[parts[2]] = parts[3]
    return out


@pytest.fixture(scope="module")
def ws_values(merged):
    """packet -> tshark field -> its values (every occurrence), for every alias."""
    args = ["-r", merged, "-Y", "amqp", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=\x1f",
            "-E", "header=y", "-e", "frame.number"]
    for n in NAMES:
        args += ["-e", n]
    head, *rest = tshark(*args).split("\n")
    cols = head.split("\t")
    lines: list = []
    for line in rest:  # (a value with a newline is written as it is: joined back)
        if lines and lines[-1].count("\t") < len(cols) - 1:
            lines[-1] += "\n" + line
        else:
            lines.append(line)
    out = {}
    for line in lines:
        if line:
            row = dict(zip(cols, line.split("\t")))
            out[int(row["frame.number"])] = {n: [x for x in row[n].split("\x1f") if x != ""] for n in NAMES}
    return out


def their_packets(merged, text) -> list[int]:
    return [int(x) for x in tshark("-r", merged, "-Y", f"amqp && ({text})", "-T", "fields", "-e",
                                   "frame.number").split()]


_their_packets = their_packets


def test_every_alias_is_a_tshark_field_and_names_one_of_ours(ws_types):
    assert len(ALIASES) > 60
    for name, f in ALIASES.items():
        assert name in ws_types, name
        assert f.alias_of in FIELDS or f.alias_of == "source.address", name
    # the three spec fields whose Wireshark field means more, or less, than ours have none
    assert not {f.alias_of for f in ALIASES.values()} & set(WS_NOT_THE_SAME)


@pytest.fixture(scope="module")
def multi_frame(ours):
    """Packets carrying a transfer of a delivery of several frames: tshark 4.0 shows a message's
    fields on its first transfer frame (what it decodes of the sections there), ours are on the
    frame that completes it (test_message_fields_where_tshark_shows_them compares those)."""
    events, _t0 = ours
    out = set()
    for ev in events:
        if getattr(ev, "pname", None) == "transfer":
            dl = ev.delivery
            if dl is None or dl.frames > 1:
                out.add(ev.packet)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_alias_selects_and_prints_what_tshark_does(merged, ours, ws_types, ws_values, multi_frame, name):
    f = ALIASES[name]
    skip = multi_frame if name.startswith("amqp.message.") else set()

    def our_packets(ours, text):  # (a message's fields: the messages of one frame)
        return [p for p in _our_packets(ours, text) if p not in skip]

    def their_packets(merged, text):
        return [p for p in _their_packets(merged, text) if p not in skip]

    want = their_packets(merged, name)
    assert our_packets(ours, name) == want, name
    if ws_types[name] == "FT_NONE":
        return  # (presence only: tshark has no value to compare or print)
    theirs = {pk: row[name] for pk, row in ws_values.items() if row[name] and pk not in skip}
    mine = {pk: v for pk, v in our_values(ours, name).items() if pk not in skip}
    if name in FRAME_LEVEL:
        mine = {pk: vs[:1] for pk, vs in mine.items()}
    if f.kind == "any":  # (a multiple field: ours joins a frame's values with ',')
        mine = {pk: [x for v in vs for x in v.split(",")] for pk, vs in mine.items()}
    assert mine == theirs, name
    values = [v for vs in theirs.values() for v in vs]
    if not values:
        return
    v = _pick(values)
    if f.kind == "number":
        tests = [(f"{name} {op} {v}", f"{name} {op} {v}") for op in ("==", ">=", "<")]
        tests.append((f"{name} != {v}", f"{name} !== {v}"))  # (ours is per frame: tshark's "any differs")
    elif f.kind == "boolean":
        tests = [(f"{name} == {v}", f"{name} == {v}")]
    elif f.kind == "bytes":
        colons = ":".join(v[i:i + 2] for i in range(0, len(v), 2))
        tests = [(f"{name} == {colons}", f"{name} == {colons}")]
    elif f.kind == "address":
        tests = [(f"{name} == {v}", f"{name} == {v}"), (f"{name} != {v}", f"{name} != {v}")]
    else:
        q, part = json.dumps(v), json.dumps(v[1:4])
        tests = [(f"{name} == {q}", f"{name} == {q}"), (f"{name} contains {part}", f"{name} contains {part}")]
    for mine_t, their_t in tests:
        got = their_packets(merged, their_t)
        assert our_packets(ours, mine_t) == got, mine_t


def test_addresses_compare_as_tshark_compares_them(merged, ours):
    for text in ("ip.src == 127.0.0.0/8", "ip.dst == 10.0.0.0/8", "ipv6.src == ::1", "ipv6.dst == 0:0::1",
                 "ip.src == 127.0.0.1 && tcp.dstport == 5672", "tcp.srcport == 5672 || ipv6.dst == ::1"):
        want = their_packets(merged, text)
        assert our_packets(ours, text) == want, text


@pytest.mark.parametrize("perf, code", [("open", 16), ("transfer", 20), ("close", 24), ("sasl-init", 65)])
def test_performative_by_tsharks_number_or_our_name(merged, ours, perf, code):
    t = "amqp.sasl.method" if perf.startswith("sasl") else "amqp.performative"
    want = their_packets(merged, f"{t} == {code}")
    assert want and our_packets(ours, f"{t} == {code}") == want == our_packets(ours, f"performative == {perf}")


@pytest.mark.parametrize("text", [
    "amqp.performative == transfer", 'amqp.performative == "disposition"', "amqp.performative in {16, 24}",
    "amqp.sasl.method == sasl.mechanisms", "amqp.sasl.method == sasl.outcome",
    "amqp.performative.arguments.role == receiver", "amqp.performative.arguments.role == sender",
    "amqp.performative.arguments.sndSettleMode == mixed", "amqp.performative.arguments.sndSettleMode == unsettled",
    "amqp.performative.arguments.rcvSettleMode == first", "amqp.sasl.saslCode == ok",
])
def test_values_by_wiresharks_names(merged, ours, text):
    want = their_packets(merged, text)
    assert want and our_packets(ours, text) == want


def test_aliases_through_the_cli(capsys):
    # (packets of one protocol header each: a line per packet in both)
    text = "amqp.init.id == 3 || (ip.src == 127.0.0.1 && amqp.init.version_major == 1 && tcp.srcport == 5672)"
    fields = ["-e", "frame.number", "-e", "ip.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "tcp.dstport",
              "-e", "amqp.init.id", "-e", "amqp.init.protocol", "-e", "amqp.init.version_major"]
    rc = main(["frames", OUTCOMES, "-Y", f"amqp.init.protocol && ({text})", "-T", "fields", *fields])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    want = tshark("-r", OUTCOMES, "-Y", f"amqp.init.protocol && ({text})", "-T", "fields", *fields)
    assert len(out.splitlines()) == 3 and out == want


def test_G_fields_lists_ours_with_their_wireshark_names(capsys):
    rc = main(["frames", "-G", "fields"])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    rows = [line.split("\t") for line in out.splitlines()]
    assert all(len(r) == 5 and r[0] == "F" for r in rows)
    by_name = {r[1]: r for r in rows}
    assert set(by_name) == {n for n, f in FIELDS.items() if f.alias_of is None}
    listed = defaultdict(set)
    for r in rows:
        for a in filter(None, r[4].split(",")):
            listed[a].add(r[1])
    assert set(listed) == set(ALIASES)
    assert by_name["delivery-id"][4] == "amqp.performative.arguments.deliveryId"
    assert set(by_name["performative"][4].split(",")) == {"amqp.performative", "amqp.sasl.method"}
    assert "frame.number" in by_name["packet"][4].split(",")


def test_message_fields_where_tshark_shows_them(merged, ours, multi_frame):
    """A message of several transfer frames: tshark 4.0 shows its message-id on the first frame,
    ours is on the last; the ids, in order, are the same; on messages of one frame, the same
    packets (test_alias_selects_and_prints_what_tshark_does)."""
    name = "amqp.message.messageId.string"
    theirs = tshark("-r", merged, "-Y", f"amqp && {name}", "-T", "fields", "-E", "occurrence=a",
                    "-e", "frame.number", "-e", name).splitlines()
    theirs = [v for line in theirs for v in line.split("\t")[1].split(",") if int(line.split("\t")[0]) in multi_frame]
    mine = [v for pk, vs in sorted(our_values(ours, "message-id").items()) if pk in multi_frame for v in vs]
    assert theirs and [v for line in mine for v in line.split(",")] == theirs
