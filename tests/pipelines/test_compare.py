"""``amqp-dissect compare``: the command on the samples, on captures with performatives Wireshark
mis-decodes (a known defect) and on a capture with a deliberate disagreement (exit 1).

Oracles: tshark run here on its own (the frame counts), the bytes tests/support/comparecaps.py wrote
(which frames have which descriptor form, the wrong-typed field), and the samples' ground truth.
The comparison on every sample is tests/pipelines/test_wireshark.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import comparecaps
from capture_frames import frames_of
from amqp_dissect.cli.main import EXIT_FORMAT, EXIT_OK, EXIT_OPEN, main
from amqp_dissect.pipelines.wireshark.compare import descriptor_form, our_frames
from test_wireshark import require_tshark

ROOT = Path(__file__).resolve().parents[2]


def sample(name: str) -> Path:
    return ROOT / "samples" / f"{name}.pcap"


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cmp")
    caps = comparecaps.build_all(folder)
    caps["echo_wrong_type"] = comparecaps.build_wrong_type(folder)
    return caps




@pytest.mark.parametrize("form", ["ulong", "symbol"])
def test_descriptor_form_tells_the_encodings_apart(made, form):
    """comparecaps re-encoded the attach descriptors only: every attach is ``form``, the rest small."""
    frames = frames_of(made[f"descriptor_{form}"])
    forms = {(f.name, descriptor_form(f)) for f in frames if f.kind != "heartbeat"}
    assert ("attach", form) in forms
    assert {x for n, x in forms if n == "attach"} == {form}
    assert {x for n, x in forms if n != "attach"} == {"smallulong"}
    # and on a sample as proton / RabbitMQ wrote it: all small
    assert {descriptor_form(f) for f in frames_of(sample("outcomes")) if f.kind != "heartbeat"} == {"smallulong"}
    tagged = [f for fs in our_frames(made[f"descriptor_{form}"]).values() for f in fs if "long-descriptor" in f.tags]
    assert [f.record["performative"] for f in tagged] == ["attach", "attach"]


def _tshark_layers(pcap: Path) -> int:
    """AMQP layers (protocol headers and frames) tshark shows, counted from its own field output."""
    out = subprocess.run(["tshark", "-r", str(pcap), "-Y", "amqp", "-T", "fields", "-e", "amqp.length",
                          "-e", "amqp.init.protocol", "-E", "occurrence=a", "-E", "aggregator=|"],
                         capture_output=True, text=True, check=True).stdout
    return sum(len([v for v in cell.split("|") if v]) for line in out.splitlines() for cell in line.split("\t"))


@pytest.mark.parametrize("name", ["outcomes", "credit_one", "large_message"])
def test_compare_samples_exit_0(capsys, name):
    require_tshark()
    rc, out, err = run(capsys, "compare", sample(name))
    assert rc == EXIT_OK, out + err
    m = out.splitlines()[1]
    ours, ws = map(int, __import__("re").match(r"frames: ours (\d+), Wireshark (\d+);", m).groups())
    assert ws == _tshark_layers(sample(name))
    # ours: every frame and header of the client's own log (ground truth), both ways
    t = json.loads((ROOT / "samples" / f"{name}.truth.json").read_text())
    assert ours == sum(len(c["frames_sent"]) + len(c["frames_received"]) + len(c["protocol_headers_sent"])
                       + len(c["protocol_headers_received"]) for c in t["connections"])
    assert "not explained" in out and "NOT EXPLAINED" not in out
    if name == "large_message":  # 66 + 67 transfer frames: Wireshark does not reassemble them
        assert "known Wireshark defect: ws-first-fragment-cut-section" in out
        assert "known Wireshark defect: ws-continuation-fragment-as-message" in out
        assert "result: agrees with Wireshark apart from 2 known Wireshark defects (exit 0)" in out
    else:
        assert "result: agrees with Wireshark on every frame (exit 0)" in out


@pytest.mark.parametrize("form", ["ulong", "symbol"])
def test_compare_names_the_descriptor_defect(capsys, made, form):
    require_tshark()
    rc, out, err = run(capsys, "compare", made[f"descriptor_{form}"])
    assert rc == EXIT_OK, out
    flagged = [line for line in out.splitlines() if line.startswith("packet ")]
    assert flagged and all(" attach:" in line or "@" in line for line in flagged), flagged
    assert "ws-descriptor-not-smallulong" in out and "NOT EXPLAINED" not in out


def test_compare_deliberate_disagreement_exit_1(capsys, made):
    require_tshark()
    rc, out, err = run(capsys, "compare", made["echo_wrong_type"])
    assert rc == 1, out
    assert "flow: fields.echo: ours=7 wireshark=True" in out
    assert "NOT EXPLAINED" in out and "1 not explained" in out
    rc, quiet, _ = run(capsys, "compare", "-q", made["echo_wrong_type"])
    assert rc == 1 and quiet.count("NOT EXPLAINED") == 1


def test_compare_errors(capsys, tmp_path):
    rc, out, err = run(capsys, "compare", tmp_path / "missing.pcap")
    assert rc == EXIT_OPEN and "no such file" in err
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture file at all")
    require_tshark()
    rc, out, err = run(capsys, "compare", junk)
    assert rc == EXIT_FORMAT, (out, err)


# --------------------------------------------------------------------------- other protocols (issue 24, item 7)

OTHER = ROOT / "samples" / "other-protocols" / "amqp091.pcap"


def _tshark_fields(pcap: Path, *fields: str, flt: str = "") -> list[list[str]]:
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]
    if flt:
        cmd += ["-Y", flt]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def test_amqp091_report_has_no_amqp10_connection(capsys):
    """RabbitMQ's 0-9-1 port with pika (and a 0-10 header the broker refuses): no AMQP 1.0 connection,
    violation or gap; each connection named by the header its client sent (the generator's truth), with
    the bytes each side sent (tshark's TCP payload lengths)."""
    truth = json.loads(OTHER.with_suffix(".truth.json").read_text())
    rc, out, err = run(capsys, "report", "-T", "json", OTHER)
    assert rc == EXIT_OK, err
    rep = json.loads(out)
    s = rep["summary"]
    assert (s["connections"], s["sessions"], s["links"], s["violations"], s["errors"]) == (0, 0, 0, 0, 0)
    assert rep["connections"] == [] and rep["violations"] == []
    assert s["other_connections"] == truth["connection_count"] == 2
    rows = rep["other_protocols"]
    assert [r["protocol"] for r in rows] == [c["protocol_header_sent"] for c in truth["connections"]]
    assert [int(r["client"].rsplit(":", 1)[1]) for r in rows] == [c["client_port"] for c in truth["connections"]]
    assert rows[1]["protocol_headers_server"] == ["AMQP 0-9-1"]  # RabbitMQ answers 0-10 with its own version
    assert bytes.fromhex(truth["connections"][1]["answer_hex"]) == b"AMQP\x00\x00\x09\x01"
    assert (rows[1]["bytes_client"], rows[1]["bytes_server"]) == (truth["connections"][1]["bytes_sent"],
                                                                  truth["connections"][1]["bytes_received"])
    if shutil.which("tshark"):
        sent: dict = {}
        for src, length in _tshark_fields(OTHER, "tcp.srcport", "tcp.len"):
            sent[int(src)] = sent.get(int(src), 0) + int(length)
        for r in rows:
            assert r["bytes_client"] == sent[int(r["client"].rsplit(":", 1)[1])]
        assert sum(r["bytes_server"] for r in rows) == sent[5672]
    rc, text, _ = run(capsys, "report", OTHER)
    assert "not AMQP 1.0 (not decoded): 2 connections (AMQP 0-9-1 1, AMQP 0-10 1)" in text
    assert "AMQP 0-9-1 (not decoded)" in text and "lost in the capture" not in text
    rc, table, _ = run(capsys, "connections", "-T", "jsonl", OTHER)
    assert rc == EXIT_OK and table.strip() == ""
    rc, frames, _ = run(capsys, "frames", OTHER)
    notes = [line for line in frames.splitlines() if "[note]" in line or "[warn" in line]
    assert len(notes) == 2 and all("(not decoded)" in n for n in notes), notes


def test_amqp091_compare_exit_0(capsys):
    require_tshark()
    rc, out, err = run(capsys, "compare", OTHER)
    assert rc == EXIT_OK, out + err
    assert "internal error" not in out + err and "NOT EXPLAINED" not in out
    layers = sum(len([v for v in cells[0].split("|") if v]) for cells in _tshark_fields(OTHER, "amqp.type")) \
        + sum(len([v for v in cells[0].split("|") if v]) for cells in _tshark_fields(OTHER, "amqp.init.protocol"))
    assert f"not compared: 2 connections of another protocol (AMQP 0-9-1 1, AMQP 0-10 1; " in out
    assert f"{layers} AMQP layers Wireshark shows on them" in out and layers > 40


# --------------------------------------------------------------------------- values written differently (item 8)


def _node(showname: str):
    from amqp_dissect.pipelines.wireshark.pdml import WsNode
    return WsNode("amqp.list", showname, "", "", 0, 1)


def _item(showname: str):
    from amqp_dissect.pipelines.wireshark.pdml import _parse_item
    return _parse_item(_node(showname))


@pytest.mark.parametrize("showname, ours", [
    ("x (float): inf", "Infinity"), ("x (double): -inf", "-Infinity"), ("x (double): nan", "NaN"),
    ("x (float): nan", "NaN"), ("x (double): 1.5", 1.5),
    ("x (uuid): 0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    ("x (char): é", "é"),
    ("x (timestamp): Jan  1, 1970 00:00:00.000000000", 0),
    ("x (timestamp): Nov 14, 2023 22:13:20.123000000", 1_700_000_000_123),
    ("x (timestamp): Dec 31, 1969 00:00:00.000000000", -86_400_000),
    ("x (timestamp): Dec 31, 9999 23:59:59.000000000", 253_402_300_799_000),
    # PDML cuts a showname at 240 characters and says so: the value is a prefix of Wireshark's text
    (" [truncated]x (double): 1797693134862315708145274237317043567980705675258449965989174768031572607800",
     comparecaps.DBL_MAX),
    (" [truncated]x (double): -179769313486231570814527423731704356798070567525844996598917476803157",
     -comparecaps.DBL_MAX),
    (" [truncated]x (str32-utf8): ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH", "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH" + "IJ" * 300),
    ("x (str8-utf8): ABCDEFGHIJ…", "ABCDEFGHIJKLMNOP"),
])
def test_value_spellings_normalised(showname, ours):
    """Each way Wireshark writes a value we write otherwise (our JSON: Infinity / NaN, uuid text,
    milliseconds since the epoch, the whole value) compares equal; and a different value does not."""
    from amqp_dissect.pipelines.wireshark.compare import _same
    label, ws = _item(showname)
    assert label == "x"
    assert _same(ours, ws), (ours, ws)
    other = {str: lambda v: "Z" + v, int: lambda v: v + 1, float: lambda v: -v if v else 1.0}[type(ours)](ours)
    assert not _same(other, ws), (other, ws)


def test_value_spellings_do_not_hide_differences():
    from amqp_dissect.pipelines.wireshark.compare import _same
    assert not _same("Infinity", _item("x (double): -inf")[1])
    assert not _same("NaN", _item("x (double): inf")[1])
    assert not _same(1.5, _item("x (double): nan")[1])
    assert not _same(1, _item("x (timestamp): Jan  1, 1970 00:00:00.000000000")[1])
    assert not _same(True, _item(" [truncated]x (double): 1")[1])


def test_compare_types_capture_exit_0(capsys, made):
    """A value of every type (tests/support/comparecaps.py): the spellings agree; what Wireshark 4.0 cannot show
    (decimals; a zero-length binary, after which it stops decoding the packet) are known defects."""
    require_tshark()
    rc, out, err = run(capsys, "compare", made["types"])
    assert rc == EXIT_OK, out
    assert "NOT EXPLAINED" not in out and "internal error" not in out + err
    assert "ws-zero-length-binary-assertion" in out and "ws-decimal-not-supported" in out
    m = __import__("re").search(r"frames: ours (\d+), Wireshark (\d+); (\d+) compared, (\d+) agree", out)
    ours, ws, compared, agree = map(int, m.groups())
    assert ours == ws == compared == _tshark_layers(made["types"])
    flagged = {int(line.split()[1]) for line in out.splitlines() if line.startswith("packet ")}
    assert compared - agree == len(flagged) == 5  # 3 decimals, 2 empty binaries: every other frame agrees


# --------------------------------------------------------------------------- AMQP over WebSocket (item 8)


def test_compare_websocket_exit_0(capsys, tmp_path):
    """outcomes.pcap replayed over a real WebSocket (tests/support/wsreplay.py, tcpdump on the loopback): tshark
    4.0 shows WebSocket frames and no AMQP inside them, so compare gives tshark the AMQP stream we
    unwrapped, as plain TCP, and compares its frames with ours: every frame of the sample's ground
    truth, all agreeing (exit 0)."""
    require_tshark()
    import wsreplay

    dst = tmp_path / "ws_outcomes.pcap"
    counts = wsreplay.replay(str(sample("outcomes")), str(dst))
    assert counts["connections"] == 1 and counts["messages"] > 0
    assert _tshark_layers(dst) == 0  # Wireshark decodes no AMQP there (the reason for the unwrapped stream)
    assert len(_tshark_fields(dst, "frame.number", flt="websocket")) > 0
    rc, out, err = run(capsys, "compare", dst)
    assert rc == EXIT_OK, out + err
    t = json.loads((ROOT / "samples" / "outcomes.truth.json").read_text())
    frames = sum(len(c["frames_sent"]) + len(c["frames_received"]) + len(c["protocol_headers_sent"])
                 + len(c["protocol_headers_received"]) for c in t["connections"])
    assert f"frames: ours {frames}, Wireshark {frames}; {frames} compared, {frames} agree in every value" in out
    assert f"given to tshark as plain TCP ({frames} AMQP layers;" in out
    assert "NOT EXPLAINED" not in out and "internal error" not in out + err and "not compared" not in out
    assert "result: agrees with Wireshark on every frame (exit 0)" in out
    # each of Wireshark's frames was put back at the packet that brought its last byte, as ours
    ours = our_frames(dst)
    from amqp_dissect.pipelines.wireshark.compare import compare_capture
    packets = sorted(p for p in ours if p >= 0)
    rep = compare_capture(dst)
    assert sorted({p for p, _, _ in rep.frames}) == packets


def _exchange_pcap(path: Path, streams) -> Path:
    from pcapbuild import TcpConversation
    path.write_bytes(TcpConversation.from_exchange(streams).pcap())
    return path


def test_amqp10_header_refused_by_another_protocol(capsys, tmp_path):
    """An AMQP 1.0 client on a port that speaks 0-9-1 only: the server answers with its own header
    (the spec's version negotiation) and the connection is that protocol's, both headers listed."""
    pcap = _exchange_pcap(tmp_path / "refused.pcap", [(0, b"AMQP\x00\x01\x00\x00"), (1, b"AMQP\x00\x00\x09\x01")])
    rc, out, _ = run(capsys, "report", "-T", "json", pcap)
    rep = json.loads(out)
    assert rep["summary"]["connections"] == 0 and rep["violations"] == []
    (row,) = rep["other_protocols"]
    assert (row["protocol"], row["protocol_headers_client"], row["protocol_headers_server"]) == (
        "AMQP 0-9-1", ["AMQP 1.0.0"], ["AMQP 0-9-1"])
    assert (row["bytes_client"], row["bytes_server"]) == (8, 8)


def test_other_protocol_header_after_amqp10_frames_is_a_violation(capsys, tmp_path):
    """A 0-9-1 header in the middle of an AMQP 1.0 connection that already sent frames: it stays an
    AMQP 1.0 connection (its open is kept), with a protocol-header violation, and nothing is moved."""
    import fuzzgen as f
    streams = [(0, f.HEADER_AMQP), (1, f.HEADER_AMQP)]
    streams += [(d, f.frame_bytes(f.encode(f.performative("open", [("string", f"c{d}", 0)])))) for d in (0, 1)]
    streams.append((0, b"AMQP\x00\x00\x09\x01" + b"\x01\x00\x00\x00\x00\x00\x05hello\xce"))
    pcap = _exchange_pcap(tmp_path / "mid.pcap", streams)
    rc, out, _ = run(capsys, "report", "-T", "json", pcap)
    rep = json.loads(out)
    assert rep["summary"]["connections"] == 1 and rep["summary"]["other_connections"] == 0
    assert rep["connections"][0]["container_id_client"] == "c0"
    assert [v["message"] for v in rep["violations"]] == [
        "AMQP 0-9-1 protocol header after AMQP 1.0 frames: the rest of the connection is not decoded"]


def test_other_protocol_fed_byte_by_byte():
    """The 0-9-1 sample's streams fed to the framing layer whole and one byte at a time: the same events."""
    from amqp_dissect.amqp.framing import AmqpConnection
    import wsreplay
    for _, steps in wsreplay.tcp_streams(str(OTHER)):
        results = []
        for bytewise in (False, True):
            c = AmqpConnection("c", "a:1", "b:5672")
            ev = []
            for n, (d, data) in enumerate(steps):
                parts = [data[i:i + 1] for i in range(len(data))] if bytewise else [data]
                for part in parts:
                    ev.extend(c.feed(d, part, float(n), n))
            ev.extend(c.finish(99.0, 99))
            results.append([(type(e).__name__, getattr(e, "name", None), e.packet, getattr(e, "bytes", None))
                            for e in ev])
        assert results[0] == results[1]
        assert results[0][-1][0] == "OtherProtocolNote"
        assert results[0][-1][3] == (sum(len(x) for d, x in steps if d == 0), sum(len(x) for d, x in steps if d == 1))
