"""Every documented display filter and ``-e`` field against tshark's own field (issue 24 item 9).

The samples are joined into one capture (``mergecap -a``: their client ports differ, so every
connection stays its own).  For each field of the "Display filter fields" table (docs/filters.md) with a
tshark equivalent (tshark 4.0's ``amqp.*`` names, ``frame.*``, ``ip``/``tcp``): the packets our
filter selects are the packets tshark's filter selects (the field alone, and compared with a value
tshark shows for it), and our ``-T fields`` values, joined per packet, are tshark's ``-T fields``
values.  Fields tshark has no equivalent for (connection, link, payload-size, type note, notes)
are checked against the samples' ground truth (``samples/*.truth.json``, written by the client,
not from the capture) instead.

Where tshark's field means more than ours, the tshark side says so in its filter (e.g.
``amqp.error.condition`` is also the error of a rejected delivery state, which is not a
performative's ``error``): those restrictions are listed with the field.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from collections import defaultdict

import pytest

from amqp_dissect.amqp.framing import Frame, ProtocolHeader, StreamNote
from amqp_dissect.amqp.spec import CHOICES, COMPOSITES
from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.events import PacketNote
from amqp_dissect.filter import FIELDS, MESSAGE_FIELDS, FieldPrinter, FrameContext, compile_filter
from amqp_dissect.pipelines.runs.local import CaptureSource

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
TSHARK = shutil.which("tshark")
MERGECAP = shutil.which("mergecap")
# without tshark / mergecap (the oracle) these tests are skipped, with the reason printed (pytest
# -ra); under CI they run and fail: tests/install-deps.sh installs the tools there
pytestmark = pytest.mark.skipif((TSHARK is None or MERGECAP is None) and not os.environ.get("CI"),
                                reason="tshark / mergecap are not installed (tests/install-deps.sh installs them)")
SHOWN = (Frame, ProtocolHeader, StreamNote, PacketNote)  # the events a frames line shows
A = "amqp.performative.arguments."
# The tests against tshark's fields check dissector/filter.py (not a hot module) on the frames the
# module fixture ``ours`` made once: the hot modules only make that input, and tests/cli/test_compiled.py
# proves it byte-identical in both modes (frames -V and jsonl of every sample).  CI runs them in its
# compiled pass only (no_twin); the tests below that run a command on a capture run in both.
NO_TWIN = pytest.mark.no_twin
# but for the fields whose comparison runs a hot module's code (amqp/codec.py's Described.__eq__, on
# a traced pure run: the terminus, delivery state and error fields), and the derived fields (the
# outcome compares delivery states): those run in both passes
TWIN_COMPARED = {"source", "target", "state", "error"}


def tshark(*args) -> str:
    r = subprocess.run([TSHARK, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def merged(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("merged") / "samples.pcap")
    subprocess.run([MERGECAP, "-a", "-F", "pcap", "-w", path, *SAMPLES], check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def ours(merged):
    src = CaptureSource(merged, messages=True)
    events = [ev for _, ev in src.events() if isinstance(ev, SHOWN) and ev.ts is not None]
    return events, src.first_ts


def our_packets(ours, text) -> list[int]:
    events, t0 = ours
    flt = compile_filter(text, FrameContext(first_time=lambda: t0))
    return sorted({ev.packet for ev in events if flt.match(ev)})


def their_packets(merged, text, name=None) -> list[int]:
    if name is not None and name in NARROW:
        text = f"({text}) && {NARROW[name]}"
    return [int(x) for x in tshark("-r", merged, "-Y", f"amqp && ({text})", "-T", "fields", "-e",
                                   "frame.number").split()]


def our_values(ours, name, conv=None) -> dict:
    """packet -> the field's values of the packet's frames, in order (empty ones left out)."""
    events, t0 = ours
    printer = FieldPrinter([name], FrameContext(first_time=lambda: t0))
    printer.context.needs_links = True
    out: dict = defaultdict(list)
    for ev in events:
        printer.context.observe(ev)
        v = printer.line(ev)
        if v != "":
            out[ev.packet].append(conv(v) if conv else v)
    return dict(out)


@pytest.fixture(scope="module")
def theirs_fields(merged):
    """packet -> tshark field -> its values (every occurrence), for every tshark field below."""
    names = sorted({t for _o, t, *_ in TABLE if t} | {"ip.src", "ipv6.src", "tcp.srcport", "ip.dst", "ipv6.dst",
                                                      "tcp.dstport", A + "address.string"})
    # (header=y: tshark 4.0 does not always print many -e columns in the order given)
    args = ["-r", merged, "-Y", "amqp", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=\x1f",
            "-E", "header=y", "-e", "frame.number"]
    for n in names:
        args += ["-e", n]
    out = {}
    head, *rest = tshark(*args).split("\n")
    cols = head.split("\t")
    width = len(cols)
    lines: list = []
    for line in rest:  # a value with a newline (an error description) is written as it is: join
        if lines and lines[-1].count("\t") < width - 1:
            lines[-1] += "\n" + line
        else:
            lines.append(line)
    for line in lines:
        if not line:
            continue
        assert line.count("\t") == width - 1, line
        row = dict(zip(cols, line.split("\t")))
        out[int(row["frame.number"])] = {n: [x for x in row[n].split("\x1f") if x != ""] for n in names}
    return out


def their_values(theirs_fields, tname, conv=None) -> dict:
    out = {}
    for pk, row in theirs_fields.items():
        vs = row[tname]
        if vs:
            out[pk] = [conv(v) if conv else v for v in vs]
    return out


# --------------------------------------------------------------------------- the table

def _camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(w.capitalize() for w in rest)


def _choice_code(choice_type):
    names = {v: k for k, v in CHOICES[choice_type].items()}

    def conv(v):
        code = names[v]
        return str(int(code))  # booleans (role) as tshark's 0 / 1
    return conv


SASL = {"sasl-server-mechanisms": "amqp.sasl.mechanisms", "mechanism": "amqp.sasl.mechanism",
        "initial-response": "amqp.sasl.initResponse", "challenge": "amqp.sasl.challenge",
        "response": "amqp.sasl.response", "code": "amqp.sasl.saslCode", "additional-data": "amqp.sasl.addData"}
RENAMED = {"idle-time-out": A + "idleTimeout", "initial-delivery-count": A + "initDeliveryCount",
           "offered-capabilities": "amqp.arguments.offeredCapabilities"}
# tshark has no value for these (a compound: FT_NONE), only their presence
PRESENCE_ONLY = {"outgoing-locales", "incoming-locales", "offered-capabilities", "desired-capabilities",
                 "properties", "source", "target", "unsettled", "state", "error", "sasl-server-mechanisms"}
# the tshark field is shared with other places (a delivery state's, a message's): where ours is
# the performative's own field, tshark's filter is narrowed to the performatives that carry it
_ERROR_PERFS = "amqp.performative in {22, 23, 24}"  # detach, end, close (not a rejected state's error)
NARROW = {
    "error": _ERROR_PERFS,
    "error.condition": _ERROR_PERFS,
    "error.description": _ERROR_PERFS,
    "state": "amqp.performative in {20, 21}",  # a transfer's or disposition's (not an unsettled map's)
}
# tshark names a value by its type where ours names the field
OR_ALSO = {
    # tshark: no arguments.state item, the delivery state's own
    "state": "amqp.delivery-state.accepted || amqp.delivery-state.rejected || amqp.delivery-state.released"
             " || amqp.delivery-state.modified || amqp.delivery-state.received",
    "target": "amqp.tx.coordinator",  # a coordinator target (attach_errors.pcap)
}
FRAME_LEVEL = {"packet", "frame.number", "time", "frame.time_epoch", "frame.time_relative"}  # one per packet


def _spec_table():
    rows = []
    for name, f in FIELDS.items():
        if not f.doc.startswith(f"the {name} field ("):
            continue  # the frame's own fields: below
        t = SASL.get(name) or RENAMED.get(name) or A + _camel(name)
        conv = _choice_code(f.choices) if f.choices else None
        rows.append((name, t, f.kind, conv))
    return rows


TABLE = [
    ("packet", "frame.number", "number", None),
    ("frame.number", "frame.number", "number", None),
    ("time", "frame.time_epoch", "time", None),
    ("frame.time_epoch", "frame.time_epoch", "time", None),
    ("frame.time_relative", "frame.time_relative", "time", None),
    ("channel", "amqp.channel", "number", None),
    ("size", "amqp.length", "number", None),
    ("doff", "amqp.doff", "number", None),
    *_spec_table(),
    ("error.condition", "amqp.error.condition", "string", None),
    ("error.description", "amqp.error.description", "string", None),
]
IDS = [row[0] for row in TABLE]


@NO_TWIN
def test_the_table_covers_every_field():
    ours = {n for n, f in FIELDS.items() if f.alias_of is None or not n.startswith("amqp.") and "." in n
            and n.split(".")[0] == "frame"}  # (Wireshark's other names: test_fields_aliases.py)
    ours -= MESSAGE_FIELDS  # (the message's fields: tests/cli/test_message_filter.py, against tshark too)
    assert ours - set(IDS) == {"src", "dst", "connection", "type", "performative", "payload-size", "link",
                                      "outcome", "note", "severity", "protocol"}  # (each tested below)


def _narrowed(name, tfilter):
    also = OR_ALSO.get(name)
    if also:
        tfilter = f"{tfilter} || {also}"
    extra = NARROW.get(name)
    return f"({tfilter}) && {extra}" if extra else tfilter


def _pick(values: list):
    """A value in the middle of what tshark shows (a comparison that selects some, not all)."""
    vs = sorted(set(values), key=lambda v: (float(v) if _isnum(v) else 0, v))
    return vs[len(vs) // 2]


def _isnum(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("name, tname, kind, conv", [
    pytest.param(*row, id=row[0], marks=() if row[0] in TWIN_COMPARED else NO_TWIN) for row in TABLE])
def test_field_matches_tshark(merged, ours, theirs_fields, name, tname, kind, conv):
    # the field alone: present (tshark: present at all; ours: present and not null)
    assert our_packets(ours, name) == their_packets(merged, _narrowed(name, tname)), name
    if name in PRESENCE_ONLY:
        return
    theirs = their_values(theirs_fields, tname)
    if name in NARROW:
        keep = set(their_packets(merged, _narrowed(name, tname)))
        theirs = {pk: v for pk, v in theirs.items() if pk in keep}
    mine = our_values(ours, name, conv)
    if name in FRAME_LEVEL:  # ours: one line per frame; tshark's: one per packet
        mine = {pk: vs[:1] for pk, vs in mine.items()}
    assert mine == theirs, name
    values = [v for vs in theirs.values() for v in vs]
    if not values:
        return  # (no sample has it: the presence test above is all there is)
    v = _pick(values)
    if kind in ("number", "time"):  # (times: exact, as tshark's nanosecond times)
        for op in ("==", ">=", "<", "!="):
            top = "!==" if op == "!=" else op
            assert our_packets(ours, f"{name} {op} {v}") == their_packets(merged, f"{tname} {top} {v}", name), (name, op, v)
    elif kind == "boolean":
        ours_v = "true" if v == "1" else "false"
        assert our_packets(ours, f"{name} == {ours_v}") == their_packets(merged, f"{tname} == {v}", name), name
    elif kind == "choice":
        ours_v = next(n for n in CHOICES[FIELDS[name].choices].values() if conv(n) == v)
        assert our_packets(ours, f"{name} == {ours_v}") == their_packets(merged, f"{tname} == {v}", name), name
        # (tshark 4.0's != is "no occurrence equals"; ours is per frame, "a frame's value differs":
        # per packet that is tshark's !==, "some occurrence differs")
        assert our_packets(ours, f"{name} != {ours_v}") == their_packets(merged, f"{tname} !== {v}", name), name
    elif kind == "bytes":
        colons = ":".join(v[i:i + 2] for i in range(0, len(v), 2))
        assert our_packets(ours, f"{name} == 0x{v}") == their_packets(merged, f"{tname} == {colons}", name), name
    else:
        q = json.dumps(v)
        assert our_packets(ours, f"{name} == {q}") == their_packets(merged, f"{tname} == {q}", name), name
        part = json.dumps(v[1:4])
        assert our_packets(ours, f"{name} contains {part}") == their_packets(merged, f"{tname} contains {part}", name), name


@NO_TWIN
def test_source_and_target_address_are_tsharks_address(merged, ours, theirs_fields):
    """tshark has one field for both addresses (``arguments.address.string``): ours together."""
    t = A + "address.string"
    assert our_packets(ours, "source.address or target.address") == their_packets(merged, t)
    mine: dict = defaultdict(list)
    for name in ("source.address", "target.address"):
        for pk, vs in our_values(ours, name).items():
            mine[pk] += vs
    assert {pk: sorted(v) for pk, v in mine.items()} == {pk: sorted(v) for pk, v in
                                                         their_values(theirs_fields, t).items()}
    q = '"/queue/amqpdissect.outcomes"'
    want = their_packets(merged, f"{t} == {q}")
    assert want and our_packets(ours, f"source.address == {q} or target.address == {q}") == want


# --------------------------------------------------------------------------- the frame's own fields


@NO_TWIN
@pytest.mark.parametrize("end", ["src", "dst"])
def test_src_and_dst_are_tsharks_address_and_port(merged, ours, theirs_fields, end):
    theirs = {}
    for pk, row in theirs_fields.items():
        ip4, ip6, port = row[f"ip.{end}"], row[f"ipv6.{end}"], row[f"tcp.{end}port"]
        theirs[pk] = f"{ip4[0]}:{port[0]}" if ip4 else f"[{ip6[0]}]:{port[0]}"
    mine = our_values(ours, end)
    assert {pk: set(v) for pk, v in mine.items()} == {pk: {theirs[pk]} for pk in mine}
    assert our_packets(ours, f'{end} == "127.0.0.1:5672"') == their_packets(merged, f"ip.{end} == 127.0.0.1 && "
                                                                                   f"tcp.{end}port == 5672")
    assert our_packets(ours, f'{end} == "[::1]:5672"') == their_packets(merged, f"ipv6.{end} == ::1 && "
                                                                               f"tcp.{end}port == 5672")


@NO_TWIN
@pytest.mark.parametrize("perf", ["open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end",
                                  "close", "sasl-mechanisms", "sasl-init", "sasl-outcome"])
def test_performative_is_tsharks_performative_code(merged, ours, perf):
    code = COMPOSITES[perf].descriptor_code & 0xFFFFFFFF  # the descriptor code of the spec XML (0x00000000:0x00000014)
    tfield = "amqp.sasl.method" if perf.startswith("sasl") else "amqp.performative"
    assert our_packets(ours, f"performative == {perf}") == their_packets(merged, f"{tfield} == {code}")


@pytest.mark.parametrize("ours_f, theirs_f", [
    ("type == header", "amqp.init.protocol"),
    ("type == amqp", "amqp.type == 0 && amqp.length > 8"),  # (a heartbeat is an empty AMQP frame)
    ("type == sasl", "amqp.type == 1"),
    ("type == heartbeat", "amqp.type == 0 && amqp.length == 8"),
    ("protocol", "amqp.init.protocol"),
    ("protocol == AMQP", "amqp.init.id == 0"),
    ("protocol == SASL", "amqp.init.id == 3"),  # (issue 24 item 9: selected nothing)
    ("protocol == TLS", "amqp.init.id == 2"),
    ("frame.time_relative > 0.3", "frame.time_relative > 0.3"),  # (issue 24 item 9: selected nothing)
    ("outcome == accepted", "amqp.delivery-state.accepted && amqp.performative in {20, 21}"),
    ("outcome == rejected", "amqp.delivery-state.rejected && amqp.performative in {20, 21}"),
    ("outcome == released", "amqp.delivery-state.released && amqp.performative in {20, 21}"),
    ("outcome == modified", "amqp.delivery-state.modified && amqp.performative in {20, 21}"),
    ("outcome", f"({OR_ALSO['state']}) && amqp.performative in {{20, 21}}"),
])
def test_derived_fields_select_what_tshark_selects(merged, ours, ours_f, theirs_f):
    want = their_packets(merged, theirs_f)
    assert our_packets(ours, ours_f) == want
    if "protocol ==" in ours_f or "time_relative" in ours_f or "outcome ==" in ours_f:
        # (SASL, the time, three outcomes are in the samples; TLS is not)
        assert want or ours_f in ("protocol == TLS",), ours_f


class _Fixed:
    """fuzzgen's source answering the same every time: one plain pcap conversation."""

    def int(self, lo, hi):
        return lo

    def bool(self, p=0.5):
        return p >= 0.5

    def choice(self, seq):
        return seq[0]


def test_control_characters_in_fields_are_written_as_tshark_writes_them(tmp_path, capsys):
    """A container-id with a newline, carriage return, tab, backslash, quote and other control
    characters: tshark's -T fields writes \\n \\r \\t and the rest as they are; so does ours."""
    import fuzzgen

    cid = 'a\\b\tc\x01d\ne"f\x7fg\rz\x1b'
    streams = [(0, fuzzgen.HEADER_AMQP), (1, fuzzgen.HEADER_AMQP),
               (0, fuzzgen.frame_bytes(fuzzgen.encode(fuzzgen.performative("open", [("string", cid, 0)]))))]
    cap = tmp_path / "control.pcap"
    cap.write_bytes(fuzzgen.capture(_Fixed(), streams))
    want = tshark("-r", cap, "-Y", "amqp.performative == 16", "-T", "fields", "-e", A + "containerId")
    rc = main(["frames", str(cap), "-Y", "performative == open", "-T", "fields", "-e", "container-id"])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    assert out == want == 'a\\b\\tc\x01d\\ne"f\x7fg\\rz\x1b\n'
    # the filter compares the value itself (a newline is a newline, "\\n" in a filter string)
    selected = []
    for flt, tflt in [('container-id contains "d\\ne"', 'contains "d\\ne"'),
                      ('container-id contains "d\\\\ne"', 'contains "d\\\\ne"'),
                      ('container-id matches "c.d"', 'matches "c.d"')]:
        rc = main(["frames", str(cap), "-Y", flt, "-T", "fields", "-e", "packet"])
        out, err = capsys.readouterr()
        assert rc == EXIT_OK, err
        theirs = tshark("-r", cap, "-Y", f"{A}containerId {tflt}", "-T", "fields", "-e", "frame.number").split()
        assert out.split() == theirs, flt
        selected.append(bool(theirs))
    assert selected == [True, False, True]


def _nanosecond_copy(path, out):
    """``path`` (a little-endian microsecond pcap) as a nanosecond pcap whose times have
    nanoseconds a float of epoch seconds cannot hold (each record's + 1..999 ns)."""
    import struct

    with open(path, "rb") as f:
        src = f.read()
    magic, _a, _b, _z, _s, _snap, link = struct.unpack_from("<IHHiIII", src, 0)
    assert magic == 0xA1B2C3D4
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, link)]
    pos, i = 24, 0
    while pos < len(src):
        sec, usec, caplen, orig = struct.unpack_from("<IIII", src, pos)
        parts.append(struct.pack("<IIII", sec, usec * 1000 + 1 + (i * 389) % 999, caplen, orig))
        parts.append(src[pos + 16: pos + 16 + caplen])
        pos += 16 + caplen
        i += 1
    out.write_bytes(b"".join(parts))
    return str(out)


def test_times_are_exact_on_a_nanosecond_capture(tmp_path, capsys):
    """frame.time_epoch / frame.time_relative to the nanosecond, printed and compared (== too)
    as tshark does (the CLI hands the reader's exact times to the filter)."""
    cap = _nanosecond_copy(OUTCOMES, tmp_path / "ns.pcap")
    rc = main(["frames", cap, "-T", "fields", "-e", "packet", "-e", "frame.time_epoch", "-e", "frame.time_relative"])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    mine = sorted(set(out.splitlines()), key=lambda line: int(line.split("\t")[0]))
    theirs = tshark("-r", cap, "-Y", "amqp", "-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch",
                    "-e", "frame.time_relative").splitlines()
    assert mine == theirs and len({line.split("\t")[1][-3:] for line in theirs}) > 3  # (nanoseconds)
    for line in theirs[::7]:
        pk, epoch, rel = line.split("\t")
        for flt in (f"frame.time_epoch == {epoch}", f"frame.time_relative == {rel}",
                    f"frame.time_relative >= {rel}", f"frame.time_epoch < {epoch}"):
            rc = main(["frames", cap, "-Y", flt, "-T", "fields", "-e", "packet"])
            out, err = capsys.readouterr()
            assert rc == EXIT_OK, err
            want = tshark("-r", cap, "-Y", f"amqp && {flt}", "-T", "fields", "-e", "frame.number").split()
            assert sorted(set(out.split()), key=int) == want, flt
            if "==" in flt:
                assert want == [pk]


def test_time_relative_and_protocol_through_the_cli(capsys):
    """The CLI's filter counts frame.time_relative from the capture's first packet (it had no start)."""
    for flt, tflt in [("frame.time_relative > 0.3", "frame.time_relative > 0.3"),
                      ("protocol == SASL", "amqp.init.id == 3")]:
        rc = main(["frames", OUTCOMES, "-Y", flt, "-T", "fields", "-e", "packet"])
        out, err = capsys.readouterr()
        assert rc == EXIT_OK, err
        want = tshark("-r", OUTCOMES, "-Y", f"amqp && {tflt}", "-T", "fields", "-e", "frame.number").split()
        assert sorted(set(out.split()), key=int) == want and want, flt


# --------------------------------------------------------------------------- against ground truth


def _truth(path):
    with open(path[: -len(".pcap")] + ".truth.json") as f:
        return json.load(f)


def _run_fields(capsys, cap, flt, *fields):
    args = ["frames", cap, "-T", "fields"] + [a for f in fields for a in ("-e", f)]
    if flt:
        args += ["-Y", flt]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    return [line.split("\t") for line in out.splitlines()]


@pytest.mark.parametrize("cap", SAMPLES, ids=[os.path.basename(s) for s in SAMPLES])
def test_connection_performative_channel_protocol_against_ground_truth(capsys, cap):
    """Per connection, in order: the client's frames (performative:channel) and protocol headers
    are the ones the client's own engine logged as sent, and the server's as received."""
    truth = _truth(cap)
    rows = _run_fields(capsys, cap, None, "connection", "src", "type", "performative", "channel", "protocol")
    conns = list(dict.fromkeys(r[0] for r in rows))
    assert len(conns) == truth["connection_count"]
    for conn, tc in zip(conns, truth["connections"]):
        client, server = conn.split("-")[0], conn.split("-")[1].split("#")[0]
        assert server == tc["server"]
        for side, frames_key, headers_key in ((client, "frames_sent", "protocol_headers_sent"),
                                              (server, "frames_received", "protocol_headers_received")):
            mine = [r for r in rows if r[0] == conn and r[1] == side]
            logged = [f"{r[3] or 'empty'}:{r[4]}" for r in mine if r[2] in ("amqp", "sasl", "heartbeat")]
            assert logged == tc[frames_key], (conn, side)  # (the engine logs a heartbeat as "empty")
            assert [r[5] for r in mine if r[2] == "header"] == tc[headers_key], (conn, side)


@pytest.mark.parametrize("cap", SAMPLES, ids=[os.path.basename(s) for s in SAMPLES])
def test_link_and_payload_size_against_ground_truth(capsys, cap):
    """``link == name``'s transfers are the deliveries the client logged on that link: as many
    (with a delivery-id) and, summed over a delivery's frames, payload-size is each message's
    encoded size."""
    truth = _truth(cap)
    for link in truth["links"]:
        rows = _run_fields(capsys, cap, f'link == {json.dumps(link["name"])} and performative == transfer',
                           "delivery-id", "payload-size")
        sizes: dict = {}
        last = None
        for did, size in rows:
            last = did or last  # (a continuation frame may carry no delivery-id)
            sizes[last] = sizes.get(last, 0) + int(size)
        deliveries = link["deliveries"]
        assert len(sizes) == len(deliveries), link["name"]
        assert sorted(sizes.values()) == sorted(d["encoded_size"] for d in deliveries), link["name"]


def test_notes_against_ground_truth(capsys):
    """The samples' only notes are the reassembly notes of deliveries longer than one frame: one per
    such delivery, with its encoded size (the client's log), and chat severity."""
    for cap in SAMPLES:
        truth = _truth(cap)
        limit = min(min(c["remote_max_frame_size"] or 1 << 32, c["max_frame_size_requested"] or 1 << 32)
                    for c in truth["connections"])
        want = sorted(d["encoded_size"] for link in truth["links"] for d in link["deliveries"]
                      if d["encoded_size"] > limit)
        rows = _run_fields(capsys, cap, "note", "note", "severity")
        sizes = []
        for note, severity in rows:
            assert note.startswith("message reassembled from ") and severity == "chat", (cap, note, severity)
            sizes.append(int(note.rsplit("(", 1)[1].split()[0]))
        assert sorted(sizes) == want, cap
        assert len(_run_fields(capsys, cap, "severity", "packet")) == len(want), cap
