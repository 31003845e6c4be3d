"""``amqp-dissect compare``: the command on the samples, on captures with performatives Wireshark
mis-decodes (a known defect) and on a capture with a deliberate disagreement (exit 1).

Oracles: tshark run here on its own (the frame counts), the bytes tests/comparecaps.py wrote
(which frames have which descriptor form, the wrong-typed field), and the samples' ground truth.
The comparison on every sample is tests/test_wireshark.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import comparecaps
from amqp_dissect.cli.main import EXIT_FORMAT, EXIT_OK, EXIT_OPEN, main
from amqp_dissect.pipelines.compare import descriptor_form, our_frames
from amqp_dissect.amqp.framing import Frame
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from test_wireshark import require_tshark

ROOT = Path(__file__).resolve().parent.parent


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


def _frames(pcap):
    d = Dissector()
    out = []
    with open(pcap, "rb") as f:
        for rec in open_capture(f):
            out.extend(e for e in d.feed(rec) if type(e) is Frame)
    return out


@pytest.mark.parametrize("form", ["ulong", "symbol"])
def test_descriptor_form_tells_the_encodings_apart(made, form):
    """comparecaps re-encoded the attach descriptors only: every attach is ``form``, the rest small."""
    frames = _frames(made[f"descriptor_{form}"])
    forms = {(f.name, descriptor_form(f)) for f in frames if f.kind != "heartbeat"}
    assert ("attach", form) in forms
    assert {x for n, x in forms if n == "attach"} == {form}
    assert {x for n, x in forms if n != "attach"} == {"smallulong"}
    # and on a sample as proton / RabbitMQ wrote it: all small
    assert {descriptor_form(f) for f in _frames(sample("outcomes")) if f.kind != "heartbeat"} == {"smallulong"}
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
