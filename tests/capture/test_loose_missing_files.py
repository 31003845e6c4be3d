"""Files missing from a numbered capture set (issue 24, "missing files of a numbered set").

A whole capture (proton conversations, tests/support/pcapbuild.py; and the real kernel-loss capture) is
cut with ``editcap -c`` into files named as ``tcpdump -C`` names them, and files are left out.
The oracles are the capture itself: the TCP payload bytes each direction of each connection sent
in the left-out file (read from that file's raw packets, not through our decoder), the whole
capture's own report, and the kernel loss the whole capture already has.  The bytes of a missing
file are still a gap (never filled, the state after it unknown), but named "in the missing file",
not loss; real loss in the files that are there stays loss; a pause between files with no file
missing is no gap at all.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))

import test_capture_sets as sets  # noqa: E402  (the set builders: proton conversations, editcap -c)

from amqp_dissect.capture.pcap import open_capture  # noqa: E402
from amqp_dissect.cli.main import main  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
EDITCAP = shutil.which("editcap")
needs_editcap = pytest.mark.skipif(EDITCAP is None and not os.environ.get("CI"),
                                   reason="editcap is not installed (tests/install-deps.sh)")


def _payload_by_direction(path) -> dict:
    """{(client "ip:port", server "ip:port", direction): TCP payload bytes} of the raw Ethernet
    IPv4 packets of ``path``; the client is the side whose port is not 5672."""
    out: dict = {}
    with open(path, "rb") as f:
        for r in open_capture(f):
            d = bytes(r.data)
            if d[12:14] != b"\x08\x00" or d[23] != 6:
                continue
            ip = 14
            t = ip + (d[ip] & 15) * 4
            total = struct.unpack("!H", d[ip + 2:ip + 4])[0]
            n = ip + total - (t + (d[t + 12] >> 4) * 4)
            if n <= 0:
                continue
            src = ".".join(map(str, d[ip + 12:ip + 16])) + ":" + str(struct.unpack("!H", d[t:t + 2])[0])
            dst = ".".join(map(str, d[ip + 16:ip + 20])) + ":" + str(struct.unpack("!H", d[t + 2:t + 4])[0])
            if src.endswith(":5672"):
                key = (dst, src, 1)
            else:
                key = (src, dst, 0)
            out[key] = out.get(key, 0) + n
    return out


def _json(tmp_path, args) -> dict:
    out = tmp_path / f"r{len(os.listdir(tmp_path))}.json"
    assert main(["report", "-T", "json", "-o", str(out), *args]) == 0
    return json.loads(out.read_text())


def _text(tmp_path, args) -> str:
    out = tmp_path / f"r{len(os.listdir(tmp_path))}.txt"
    assert main(["report", "-o", str(out), *args]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    d = tmp_path_factory.mktemp("missing")
    whole = str(d / "whole.pcap")
    with open(whole, "wb") as f:
        w = sets.pb.PcapWriter(f, sets.pb.LINKTYPE_ETHERNET)
        for ts, _lt, data in sets._whole(sets._conversations()):
            w.write(ts, data)
    if EDITCAP is None and not os.environ.get("CI"):  # (under CI it runs and fails: install-deps.sh installs it)
        pytest.skip("editcap is not installed (tests/install-deps.sh)")
    return whole, sets._rotated(whole, d / "set", 14, "pcap")


@needs_editcap
def test_the_gaps_of_a_missing_file_are_that_file_not_loss(tmp_path, rotated, capsys):
    whole, names = rotated
    kept = [n for n in names if not n.endswith("cap.pcap1")]
    rep = _json(tmp_path, kept[::-1])  # (any argument order)
    (g,) = rep["capture"]["gaps"]
    assert g["missing"] == [os.path.join(os.path.dirname(names[0]), "cap.pcap1")]
    # the oracle: what each direction sent in the file that is missing, from its raw packets
    sent = _payload_by_direction(names[1])
    want = {}
    for (client, server, d), n in sent.items():
        v = want.setdefault(f"{client}-{server}", [0, 0, 0, 0])
        v[2 * d] += 1
        v[2 * d + 1] += n
    assert want and g["connections"] == want
    for c in rep["connections"]:
        cid = c["connection"]
        (m,) = c["missing_files"]
        assert [m["gaps_client"], m["gap_bytes_client"], m["gaps_server"], m["gap_bytes_server"]] == want[cid]
        # still gaps (the connections table counts them), and nothing else was lost
        assert [c["gaps_client"], c["gap_bytes_client"], c["gaps_server"], c["gap_bytes_server"]] == want[cid]
        assert c["lossy"]
    text = _text(tmp_path, kept)
    head = [line for line in text.splitlines() if "of the set is missing" in line]
    n = sum(v[0] + v[2] for v in want.values())
    size = sum(v[1] + v[3] for v in want.values())
    assert head == [f"file {g['missing'][0]} of the set is missing (between {_date(g['from'])} and {_date(g['to'])}, "
                    f"after {names[0]}, before {names[2]}): {n} TCP gaps ({size:,} bytes) of {len(want)} "
                    f"connections fall in it, not loss on the wire"]
    assert "lost in the capture" not in text
    assert text.count("  in the missing file ") == len(want)
    # the gap notes say so too
    capsys.readouterr()
    assert main(["frames", "-T", "jsonl", *kept]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "(TCP gap)" in line]
    assert len(notes) == n and all("in the missing file" in x and "not lost on the wire" in x for x in notes)


def _date(x) -> str:
    from amqp_dissect.render.report import _date as d

    return d(x)


@needs_editcap
def test_the_same_with_two_processes_and_in_html(tmp_path, rotated):
    _whole, names = rotated
    kept = [n for n in names if not n.endswith(("cap.pcap5", "cap.pcap9", "cap.pcap10"))]
    one = _json(tmp_path, kept)
    two = _json(tmp_path, ["-j", "2", *kept])
    assert one["capture"] == two["capture"] and one["connections"] == two["connections"]
    assert [g["missing"][-1].rsplit("/", 1)[-1] for g in one["capture"]["gaps"]] == ["cap.pcap5", "cap.pcap10"]
    assert all(g["connections"] for g in one["capture"]["gaps"])
    out = tmp_path / "r.html"
    assert main(["report", "-T", "html", "-o", str(out), *kept]) == 0
    page = out.read_text()
    assert page.count("of the set is missing (between") >= 2  # (the header; the text report inside repeats it)
    assert "files " in page and "of the set are missing" in page


@needs_editcap
def test_a_pause_between_files_with_none_missing_is_no_gap(tmp_path, rotated):
    """The later files shifted 5 s later (editcap -t): a pause in the capture, no byte missing."""
    whole, names = rotated
    shifted = []
    for i, n in enumerate(names):
        if i >= 7:
            dst = str(tmp_path / os.path.basename(n))
            subprocess.run([EDITCAP, "-t", "5", n, dst], check=True, capture_output=True)
            n = dst
        shifted.append(n)
    rep = _json(tmp_path, shifted)
    want = _json(tmp_path, [whole])
    assert "gaps" not in rep["capture"]
    for c in rep["connections"]:
        assert not c["lossy"] and not c["gaps_client"] and not c["gaps_server"]
        assert "missing_files" not in c
    assert rep["summary"]["deliveries"] == want["summary"]["deliveries"]
    assert rep["summary"]["outcomes"] == want["summary"]["outcomes"]
    assert rep["summary"]["violations"] == 0


@needs_editcap
def test_real_loss_in_the_files_there_stays_loss(tmp_path):
    """The kernel-loss capture (tcpdump -B 1 under a flood) cut into a tcpdump -C set, one file
    left out: the gaps spanning the missing file are that file; the kernel's gaps elsewhere stay
    "lost in the capture"."""
    src = os.path.join(ROOT, "samples", "loss", "kernel_loss.pcap")
    whole = _json(tmp_path, [src])
    (wc,) = whole["connections"]
    folder = tmp_path / "set"
    folder.mkdir()
    subprocess.run([EDITCAP, "-c", "20", src, str(folder / "x.pcap")], check=True, capture_output=True)
    parts = sorted(glob.glob(str(folder / "x_*.pcap")))
    names = []
    for i, p in enumerate(parts):
        name = str(folder / ("cap.pcap" + (str(i) if i else "")))
        os.rename(p, name)
        names.append(name)
    gone = names[1]  # packets 21-40: the flood, before the kernel's drops
    rep = _json(tmp_path, [n for n in names if n != gone])
    (c,) = rep["connections"]
    (m,) = c["missing_files"]
    sent = _payload_by_direction(gone)
    for d, side in enumerate(("client", "server")):
        n = sum(v for (_c, _s, dd), v in sent.items() if dd == d)
        # the gap spanning the missing file holds its bytes (and, where a kernel drop touches it, those too)
        assert m[f"gap_bytes_{side}"] >= n
        assert m[f"gaps_{side}"] == (1 if n else 0)
        # the others are the whole capture's own loss: never more than it had
        assert c[f"gaps_{side}"] - m[f"gaps_{side}"] <= wc[f"gaps_{side}"]
    assert c["gaps_server"] - m["gaps_server"] >= 1  # (the kernel's drops after the missing file)
    text = _text(tmp_path, [n for n in names if n != gone])
    assert "  in the missing file " in text and "  lost in the capture: " in text
    assert rep["summary"]["violations"] == 0
