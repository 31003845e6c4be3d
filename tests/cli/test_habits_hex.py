"""``frames -x`` and ``frames -V -O amqp`` (issue 27), with tshark as the oracle.

-x: each AMQP protocol header and frame is followed by its bytes in tshark's ``-x`` layout.  The
bytes: on a packet that carries one header or frame, they are the packet's TCP payload as tshark
shows it (``tcp.payload``).  The layout: the same bytes written as the packets of a capture
(link type USER0: no header to decode) are dumped by ``tshark -x`` exactly as ours.
-O amqp: the packet's other layers as their title lines only, the AMQP tree as with -V."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main
from amqp_dissect.render.hexdump import hex_lines

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")
TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)")


def tshark(*args) -> str:
    r = subprocess.run([TSHARK, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def run(capsys, *args) -> str:
    rc = main(["frames", *args])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    return out


def dumps(text: str) -> list[tuple[str, bytes]]:
    """(the line before a dump, the dump's bytes) for each dump in ``frames -x`` output."""
    out = []
    for block in text.split("\n\n"):
        lines = block.strip("\n").splitlines()
        if len(lines) < 2:
            continue
        data = b"".join(bytes.fromhex(line[6:53].replace(" ", "")) for line in lines[1:])
        out.append((lines[0], data))
    return out


@pytest.mark.parametrize("sample", ["outcomes.pcap", "large_message.pcap", "ipv6.pcap"])
def test_x_dumps_each_frames_bytes(capsys, sample):
    cap = os.path.join(SAMPLES, sample)
    got = dumps(run(capsys, cap, "-x"))
    lines = run(capsys, cap).splitlines()
    assert [head for head, _ in got] == lines  # a dump after every header and frame
    per_packet: dict = {}
    for head, data in got:
        per_packet.setdefault(int(head.split()[0]), []).append(data)
    payloads = {}
    for line in tshark("-r", cap, "-Y", "tcp.len > 0", "-T", "fields", "-e", "frame.number",
                       "-e", "tcp.payload").splitlines():
        pk, hexes = line.split("\t")
        payloads[int(pk)] = bytes.fromhex(hexes)
    checked = 0
    for pk, datas in per_packet.items():
        if len(datas) == 1 and pk in payloads and len(payloads[pk]) == len(datas[0]):
            assert datas[0] == payloads[pk], pk  # (a packet carrying one frame: its whole payload)
            checked += 1
        elif pk in payloads and len(b"".join(datas)) == len(payloads[pk]):
            assert b"".join(datas) == payloads[pk], pk  # (several frames that fill the packet)
    assert checked >= 5


def _user0_capture(path, blobs: list[bytes]) -> None:
    parts = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 147)]
    for i, b in enumerate(blobs):
        parts.append(struct.pack("<IIII", 1_700_000_000 + i, 0, len(b), len(b)) + b)
    path.write_bytes(b"".join(parts))


def test_x_layout_is_tsharks(capsys, tmp_path):
    blobs = [data for _, data in dumps(run(capsys, OUTCOMES, "-x"))]
    blobs += [bytes(range(256)) * 3, b"\x7f\x80 ~", b"x" * 16, b"y" * 17]  # every byte value, edges of a line
    cap = tmp_path / "frames.pcap"
    _user0_capture(cap, blobs)
    theirs = tshark("-r", str(cap), "-x")
    ours = "".join("\n".join(hex_lines(b)) + "\n\n" for b in blobs)
    assert ours == theirs


def test_x_with_V_puts_the_dump_after_each_tree(capsys):
    text = run(capsys, OUTCOMES, "-V", "-x", "-c", "12")
    plain = run(capsys, OUTCOMES, "-V", "-c", "12")
    hexline = re.compile(r"^[0-9a-f]{4}  ([0-9a-f]{2} )")
    assert [line for line in text.splitlines() if line and not hexline.match(line)] == \
        [line for line in plain.splitlines() if line]
    assert len([line for line in text.splitlines() if hexline.match(line)]) > 20
    assert "0000  41 4d 51 50 03 01 00 00                           AMQP...." in text


def test_O_amqp_shows_the_other_layers_as_one_line(capsys):
    detail = run(capsys, OUTCOMES, "-V")
    only = run(capsys, OUTCOMES, "-V", "-O", "amqp")
    theirs = set(tshark("-r", OUTCOMES, "-O", "amqp").splitlines())
    amqp = False
    kept = []
    for line in detail.splitlines():  # -V without the indented lines of the layers before AMQP's
        if line and not line.startswith(" "):
            amqp = line.startswith("Advanced Message Queuing Protocol") or line.startswith("[")
        if amqp or not line.startswith(" "):
            kept.append(line)
    assert only.splitlines() == kept
    titles = [line for line in only.splitlines() if line.startswith(("Frame ", "Internet Protocol"))]
    assert titles and all(t in theirs for t in titles)  # (tshark -O amqp's own lines)


@pytest.mark.parametrize("args, message", [
    (["-x", "-T", "jsonl"], "-x goes with the text output"),
    (["-O", "amqp"], "-O amqp goes with -V"),
    (["-V", "-O", "tcp"], "-O tcp: the protocol shown in detail here is amqp"),
])
def test_bad_x_and_O_are_usage_errors(capsys, args, message):
    rc = main(["frames", OUTCOMES, *args])
    out, err = capsys.readouterr()
    assert rc == EXIT_USAGE and out == "" and message in err
