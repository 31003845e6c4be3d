"""One direction only, joined mid-stream, on a port that is not AMQP's, without ``--port`` (issue 39
items 2 and 6 together).

Nothing but the frames says such a stream is AMQP: no SYN, no protocol header, no AMQP port.  The
variants are made from samples of several client stacks (proton, rhea, the Azure SDK) by tools we
did not write: ``editcap -r`` cuts the packets before the client's first flow or transfer (found by
tshark), ``tshark -Y`` keeps one direction, and the test helpers' writer moves the broker from 5672
to 6000.  The oracles: tshark, told the port is AMQP (``-d tcp.port==6000,amqp``), decodes the
two-way cut and gives the frames of the kept direction (the variant must hold the same ones); and the
same variant left on 5672 (an AMQP port: decoded whatever its bytes) gives the same report, ports
aside, saying the capture holds one direction and was joined mid-stream.  Streams of other protocols
sent one way, joined mid-stream on other ports, are not taken for AMQP.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess

import pytest

from pcapbuild import LINKTYPE_ETHERNET, TcpConversation, read_pcap_records, retarget_tcp, write_pcap

from amqp_dissect.amqp.spec import COMPOSITES
from amqp_dissect.cli.main import main
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PORT = 6000
# proton against RabbitMQ (small frames; a message of several frames; presettled), rhea, the Azure SDK (one
# connection; three, the others found by their protocol headers)
SAMPLES = ["outcomes.pcap", "large_message.pcap", "drain.pcap", "credit_one.pcap", "presettled.pcap",
           "messages/rhea_request_reply.pcap", "messages/azure_cbs_expiry.pcap", "messages/azure_cbs.pcap"]
# the direction kept -> tshark's filter of it (the broker is on 5672 in the samples)
KEPT = {"client": "tcp.dstport==5672", "server": "tcp.srcport==5672", "both": "tcp"}
# performative code (the spec's, as tshark shows it) -> name
NAMES = {c.descriptor_code: name for name, c in COMPOSITES.items() if "frame" in c.provides}

pytestmark = pytest.mark.skipif(not os.environ.get("CI") and (shutil.which("tshark") is None or shutil.which("editcap") is None),
                                reason="tshark/editcap not installed")


def _tshark(*args) -> str:
    return subprocess.run(["tshark", *args], check=True, capture_output=True, text=True).stdout


def _first_flow_or_transfer(path: str) -> int:
    """The frame number of the client's first flow or transfer, by tshark."""
    out = _tshark("-r", path, "-Y", "tcp.dstport==5672 && (amqp.performative==19 || amqp.performative==20)",
                  "-T", "fields", "-e", "frame.number")
    return int(out.split()[0])


def _variant(sample: str, out_dir, kept: str, port: int) -> str:
    """The sample cut before the client's first flow or transfer, ``kept`` direction(s), the broker on ``port``.
    Each step's file is made once in ``out_dir`` (the cut of a sample serves both directions and
    the two-way variant, a direction's packets both ports): a file there is that step done."""
    src = os.path.join(ROOT, "samples", sample)
    stem = os.path.join(str(out_dir), sample.replace("/", "_"))
    cut, one = stem + ".cut.pcap", f"{stem}.{kept}.one.pcap"
    path = f"{stem}.{kept}.{port}.pcap"
    if os.path.exists(path):
        return path
    if not os.path.exists(cut):
        subprocess.run(["editcap", "-F", "pcap", "-r", src, cut, f"{_first_flow_or_transfer(src)}-1000000000"],
                       check=True, capture_output=True)
    if not os.path.exists(one):
        _tshark("-r", cut, "-Y", KEPT[kept], "-w", one, "-F", "pcap")
    with open(one, "rb") as f:
        records = [(ts, lt, retarget_tcp(data, lt, {5672: port})) for ts, lt, data in read_pcap_records(f)]
    with open(path, "wb") as f:
        f.write(write_pcap(records))
    return path


@pytest.fixture(scope="module")
def variants_dir(tmp_path_factory):
    """One folder for the variants of every test of this file (see _variant)."""
    return tmp_path_factory.mktemp("one-way-variants")


def _tshark_frames(two_way: str, kept: str) -> list:
    """(time in µs, performative) of each AMQP frame of the ``kept`` direction that tshark decodes in
    the two-way cut on PORT, told that PORT is AMQP's."""
    side = "tcp.dstport==%d" % PORT if kept == "client" else "tcp.srcport==%d" % PORT
    out = _tshark("-r", two_way, "-d", f"tcp.port=={PORT},amqp", "-Y", f"amqp.performative && {side}",
                  "-T", "fields", "-e", "frame.time_epoch", "-e", "amqp.performative")
    frames = []
    for line in out.splitlines():
        t, codes = line.split("\t")
        us = round(float(t) * 1e6)
        frames += [(us, NAMES[int(c)]) for c in codes.split(",")]
    return sorted(frames)


def _our_frames(a, kept: str) -> list:
    f = a.frames
    f = f[(f["type"] == "amqp") & (f["dst" if kept == "client" else "src"].str.endswith(f":{PORT}"))]
    return sorted((round(t.timestamp() * 1e6), p) for t, p in zip(f["time"], f["performative"]))


def _text(a, port: int) -> str:
    # (the endpoints' port; an address in a message, "host:5672/entity", stays)
    text = re.sub(f":{port}(?![0-9/])", ":PORT", render_text(build_report(a.analyzer)))
    return "\n".join(line for line in text.splitlines() if not line.startswith("file: "))


@pytest.mark.parametrize("kept", ["client", "server"])
@pytest.mark.parametrize("sample", SAMPLES)
def test_one_direction_joined_midstream_on_another_port_is_amqp(variants_dir, sample, kept):
    one_way = read_analysis(_variant(sample, variants_dir, kept, PORT), frames=True)
    # tshark's frames of that direction, in the two-way cut, told the port is AMQP's
    expected = _tshark_frames(_variant(sample, variants_dir, "both", PORT), kept)
    assert len(expected) >= 3
    assert _our_frames(one_way, kept) == expected
    # the report of the same bytes on 5672 (decoded there whatever they are), ports aside
    on_5672 = read_analysis(_variant(sample, variants_dir, kept, 5672))
    text, plain = _text(one_way, PORT), _text(on_5672, 5672)
    if len(on_5672.analyzer.connection_rows()) == 1:
        assert text == plain
    else:  # (one joined mid-stream is listed once its bytes were found to be AMQP: another order)
        assert sorted(text.splitlines()) == sorted(plain.splitlines())
    missing = "server" if kept == "client" else "client"
    assert f"one direction captured: none of the {missing}'s packets is in the capture" in text
    assert "mid_connection" in text and "not visible in the capture: connection start" in text


@pytest.mark.parametrize("kept", ["client", "server"])
def test_the_same_with_two_workers(variants_dir, capsys, kept):
    path = _variant("messages/azure_cbs_expiry.pcap", variants_dir, kept, PORT)
    got = []
    for extra in ([], ["-j", "2"]):
        assert main(["report", "-T", "json", *extra, path]) == 0
        got.append(json.loads(capsys.readouterr().out))
    assert got[0] == got[1]
    assert [c["connection"] for c in got[0]["connections"]] == [f"127.0.0.1:{_client_port(path)}-127.0.0.2:{PORT}"]


def _client_port(path: str) -> int:
    out = _tshark("-r", path, "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport", "-c", "1").split()
    return int(out[0]) if int(out[1]) == PORT else int(out[1])


# -- not AMQP: other protocols sent one way, joined mid-stream on other ports --------------------------

def _one_way(tmp_path, name: str, chunks: list, port: int = 8080, skip: int = 1) -> str:
    """A capture of the client's segments only (``chunks``, one segment each), without the
    handshake nor the first ``skip`` segments."""
    conv = TcpConversation(client=("10.0.0.1", 40000), server=("10.0.0.2", port), linktype=LINKTYPE_ETHERNET,
                           t0=1_700_000_000.0, dt=0.001, mss=65000)
    for c in chunks:
        conv.send(0, c)
    path = os.path.join(str(tmp_path), name + ".pcap")
    with open(path, "wb") as f:
        f.write(write_pcap(conv.records[skip:]))
    return path


def _frame(body: bytes, channel: int = 0, doff: int = 2) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + bytes([doff, 0]) + channel.to_bytes(2, "big") + body


def _performative(code: int, fields: bytes = b"\x45") -> bytes:
    """A frame body: the descriptor (a smallulong) and an empty list (or ``fields``)."""
    return b"\x00\x53" + bytes([code]) + fields


def _not_amqp_cases() -> dict:
    rnd = random.Random(39)
    flow, transfer = COMPOSITES["flow"].descriptor_code, COMPOSITES["transfer"].descriptor_code
    header = COMPOSITES["header"].descriptor_code  # a message section, not a performative
    return {
        "http": [b"POST /q HTTP/1.1\r\nHost: b\r\nContent-Length: 5\r\n\r\nhello" for _ in range(12)],
        "tls": [b"\x17\x03\x03" + (200).to_bytes(2, "big") + rnd.randbytes(200) for _ in range(12)],
        "random": [rnd.randbytes(rnd.randrange(20, 400)) for _ in range(12)],
        # AMQP 0-9-1 method frames (type 1, channel 1, size, payload, frame end 0xCE)
        "amqp091": [b"\x01\x00\x01" + (12).to_bytes(4, "big") + rnd.randbytes(12) + b"\xce" for _ in range(12)],
        # well-formed AMQP 1.0 frame headers whose bodies are not performatives
        "frames_of_sections": [_frame(_performative(header)) for _ in range(12)],
        # frames whose sizes do not chain: each says 4 bytes more than it holds
        "unchained": [(len(_frame(_performative(flow))) + 4).to_bytes(4, "big") + _frame(_performative(flow))[4:]
                      for _ in range(12)],
        # two performatives only (fewer than a run needs), then nothing
        "too_few": [_frame(_performative(flow)), _frame(_performative(transfer))],
    }


@pytest.mark.parametrize("case", sorted(_not_amqp_cases()))
def test_other_protocols_one_way_midstream_are_not_amqp(tmp_path, case):
    a = read_analysis(_one_way(tmp_path, case, [b"x" * 10] + _not_amqp_cases()[case]))
    assert a.analyzer.connection_rows() == []


def test_the_0_9_1_sample_one_way_midstream_is_not_amqp(tmp_path):
    src = os.path.join(ROOT, "samples", "other-protocols", "amqp091.pcap")
    cut = os.path.join(str(tmp_path), "cut.pcap")
    one = os.path.join(str(tmp_path), "one.pcap")
    subprocess.run(["editcap", "-F", "pcap", "-r", src, cut, "4-1000000000"], check=True, capture_output=True)
    _tshark("-r", cut, "-Y", "tcp.dstport==5672", "-w", one, "-F", "pcap")
    path = os.path.join(str(tmp_path), "091.pcap")
    with open(one, "rb") as f:
        records = [(ts, lt, retarget_tcp(data, lt, {5672: PORT})) for ts, lt, data in read_pcap_records(f)]
    with open(path, "wb") as f:
        f.write(write_pcap(records))
    assert len(records) >= 3
    assert read_analysis(path).analyzer.connection_rows() == []


def test_a_run_of_client_frames_one_way_is_amqp(tmp_path):
    """The positive twin of the synthetic negatives: the same writer, three performatives chained
    over three segments, after a first segment the join cut inside a frame."""
    flow, disposition = COMPOSITES["flow"].descriptor_code, COMPOSITES["disposition"].descriptor_code
    chunks = [b"x" * 10, _frame(_performative(flow)), _frame(_performative(disposition)), _frame(_performative(flow))]
    a = read_analysis(_one_way(tmp_path, "run", chunks, skip=0))
    assert [r["connection"] for r in a.analyzer.connection_rows()] == ["10.0.0.1:40000-10.0.0.2:8080"]


@pytest.mark.parametrize("case", ["http", "tls", "random", "amqp091"])
def test_other_protocols_are_let_go_before_their_end(tmp_path, case):
    """A stream found not AMQP is not held by the probe until the capture ends: decided within the
    first segments (the bytes of a mid-stream join on another port are held only while they may
    still be a run of frames)."""
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector

    d = Dissector()
    with open(_one_way(tmp_path, case, [b"x" * 10] + _not_amqp_cases()[case]), "rb") as f:
        for record in open_capture(f):
            d.feed(record)
    assert not d._probes and not d.connections
