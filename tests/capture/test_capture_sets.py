"""Capture sets (issue 24 item 1): several files read as one capture in time order.

The sets are cut from one whole capture with ``editcap -c`` and named as ``tcpdump -C`` names
its files (``cap.pcap``, ``cap.pcap1`` ... ``cap.pcap13``), so the whole capture is the oracle:
the set given in glob order (where ``cap.pcap10`` comes before ``cap.pcap2``), reversed or
shuffled reports what the whole file reports.  Files that overlap in time are merged record by
record; ``mergecap -w`` is the oracle of that order and of the packet numbers.
"""

from __future__ import annotations

import glob
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))

import pcapbuild as pb  # noqa: E402
from protonpump import Pump  # noqa: E402

from amqp_dissect.cli.main import main  # noqa: E402
from amqp_dissect.pipelines.runs.local import CaptureSource  # noqa: E402

EDITCAP = shutil.which("editcap")
MERGECAP = shutil.which("mergecap")
# without editcap / mergecap these tests are skipped, with the reason printed (pytest -ra); under
# CI they run and fail: tests/install-deps.sh installs the tools there
needs_wireshark_tools = pytest.mark.skipif(
    (EDITCAP is None or MERGECAP is None) and not os.environ.get("CI"),
    reason="editcap / mergecap are not installed (tests/install-deps.sh)")

CONNECTIONS = 4
MESSAGES = 600  # per connection: the deliveries of the whole capture are CONNECTIONS * MESSAGES


def _conversations(linktypes=(pb.LINKTYPE_ETHERNET,), jitter: float = 0.0):
    """One proton conversation per connection (``MESSAGES`` small messages each, all accepted),
    as (ts, linktype, frame) records per connection; the connections start 0.3 ms apart and
    run side by side.  ``jitter``: a connection's times are shifted by that much times its number
    (no two connections then share a time)."""
    from proton import Message

    out = []
    for c in range(CONNECTIONS):
        p = Pump(server_credit=100, server_max_frame=16384)
        snd = p.sender(f"queue-{c}")
        p.run()
        for i in range(MESSAGES):
            p.send(snd, Message(body=f"payload {i:06d} " + "x" * 40, properties={"seq": i}))
            if i % 10 == 9:
                p.run()
        p.run()
        p.close()
        conv = pb.TcpConversation.from_exchange(
            p.chunks, client=("10.0.0.1", 40000 + c), server=("10.0.0.2", 5672),
            t0=1_700_000_000.0 + c * (0.0003 + jitter), dt=0.0001, acks=True,
            linktype=linktypes[c % len(linktypes)])
        out.append(conv.records)
    return out


def _whole(records) -> list:
    return sorted((r for conn in records for r in conn), key=lambda r: r[0])


def _rotated(whole: str, folder, files: int, fmt: str) -> list[str]:
    """``whole`` cut by ``editcap -c`` into ``files`` files, renamed as tcpdump -C names them."""
    os.makedirs(folder, exist_ok=True)
    per_file = -(-sum(1 for _ in CaptureSource(whole).records()) // files)
    subprocess.run([EDITCAP, "-F", fmt, "-c", str(per_file), whole, os.path.join(folder, "x.cap")], check=True,
                   capture_output=True)
    parts = sorted(glob.glob(os.path.join(folder, "x_*.cap")))  # editcap: x_00000_<time>.cap, ...
    names = []
    for i, part in enumerate(parts):
        name = os.path.join(folder, "cap.pcap" + (str(i) if i else ""))
        os.rename(part, name)
        names.append(name)
    return names


def _run(tmp_path, args) -> tuple[int, bytes]:
    out = tmp_path / f"out-{len(os.listdir(tmp_path))}"
    rc = main(args + ["-o", str(out)])
    return rc, out.read_bytes()


def _frames(capsysbinary, paths) -> bytes:
    """``frames -T jsonl``: every AMQP frame with its packet number and time."""
    capsysbinary.readouterr()
    assert main(["frames", "-T", "jsonl", *paths]) == 0
    return capsysbinary.readouterr().out


def _report(tmp_path, paths, *opts) -> dict:
    rc, out = _run(tmp_path, ["report", "-T", "json", *opts, *paths])
    assert rc == 0
    rep = json.loads(out)
    cap = rep["capture"]
    for k in ("files", "order", "bytes"):  # what a set's header says of its files
        cap.pop(k, None)
    return rep


def _orders(names: list[str]) -> dict:
    """The set in glob order (as a shell expands ``cap.pcap*``), reversed, and shuffled."""
    globbed = sorted(names)
    shuffled = list(names)
    random.Random(24).shuffle(shuffled)
    return {"glob": globbed, "reversed": globbed[::-1], "shuffled": shuffled}


@pytest.fixture(scope="module")
def whole_capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("sets")
    path = str(d / "whole.pcap")
    with open(path, "wb") as f:
        w = pb.PcapWriter(f, pb.LINKTYPE_ETHERNET)
        for ts, _lt, data in _whole(_conversations()):
            w.write(ts, data)
    return path


@needs_wireshark_tools
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_a_rotated_set_in_any_order_reports_as_the_whole_capture(tmp_path, whole_capture, fmt, capsysbinary):
    names = _rotated(whole_capture, tmp_path / "set", 14, fmt)
    assert len(names) == 14 and names[-1].endswith("cap.pcap13")
    orders = _orders(names)
    assert orders["glob"] != names  # (cap.pcap10 before cap.pcap2: the order of the arguments is not time order)
    want = _report(tmp_path, [whole_capture])
    assert want["summary"]["deliveries"] == CONNECTIONS * MESSAGES  # (the ground truth of the capture)
    assert want["summary"]["violations"] == 0
    frames_whole = _frames(capsysbinary, [whole_capture])
    for how, paths in orders.items():
        got = _report(tmp_path, paths)
        assert got == want, how
        assert _frames(capsysbinary, paths) == frames_whole, how  # the same packet numbers and times, frame by frame
    # the header names the files in the order read, and says the order
    rc, text = _run(tmp_path, ["report", *orders["shuffled"]])
    assert rc == 0
    head = text.decode().splitlines()[:4]
    assert head[2] == "files: " + ", ".join(names)
    assert head[3].startswith("order: merged by time")


@needs_wireshark_tools
def test_a_count_limit_and_standard_input_in_a_set(tmp_path, whole_capture, monkeypatch):
    names = _rotated(whole_capture, tmp_path / "set", 14, "pcap")
    shuffled = _orders(names)["shuffled"]
    assert _report(tmp_path, shuffled, "-c", "1000") == _report(tmp_path, [whole_capture], "-c", "1000")
    # one file of the set from standard input (a stream: read once, kept open while merged)
    import io

    with open(names[3], "rb") as f:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f.read())))
    mixed = [("-" if p == names[3] else p) for p in shuffled]
    assert _report(tmp_path, mixed) == _report(tmp_path, [whole_capture])


def _per_connection_files(tmp_path, records, write) -> list[str]:
    paths = []
    for c, recs in enumerate(records):
        path = str(tmp_path / f"conn{c}.{'pcapng' if write is pb.write_pcapng else 'pcap'}")
        with open(path, "wb") as f:
            f.write(write(recs))
        paths.append(path)
    return paths


@needs_wireshark_tools
def test_overlapping_files_are_merged_and_numbered_as_mergecap_does(tmp_path, capsysbinary):
    # one file per connection: they overlap over the whole capture; jittered times, so that no two
    # files have a record at the same time (see the next test for equal times)
    records = _conversations(jitter=0.000013)
    paths = _per_connection_files(tmp_path, records, lambda recs: pb.write_pcap(recs))
    merged = str(tmp_path / "merged.pcap")
    subprocess.run([MERGECAP, "-F", "pcap", "-w", merged, *paths], check=True, capture_output=True)
    want_records = [(r.index, r.ts, r.data) for r in CaptureSource(merged).records()]
    assert len(want_records) == sum(map(len, records))
    for how, order in _orders(paths).items():
        got = [(r.index, r.ts, r.data) for r in CaptureSource(order).records()]
        assert got == want_records, how
    assert _frames(capsysbinary, _orders(paths)["reversed"]) == _frames(capsysbinary, [merged])
    assert _report(tmp_path, paths) == _report(tmp_path, [merged])


def test_equal_times_go_to_the_file_first_in_the_set(tmp_path):
    """On equal times the record of the file first in the set's order comes first (earlier first
    record, then the name with its numbers by value): a rotated set whose files meet at one time
    reads back in its own order.  (mergecap 4.0 puts the later file's record first.)"""
    frame = pb.frame(pb.LINKTYPE_ETHERNET, pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x"))
    t = 1_700_000_000.0

    def write(name, times, tag):
        path = str(tmp_path / name)
        with open(path, "wb") as f:
            f.write(pb.write_pcap([(ts, pb.LINKTYPE_ETHERNET, frame + tag + str(i).encode()) for i, ts in enumerate(times)]))
        return path

    a = write("cap.pcap9", [t, t + 1, t + 2], b"a")  # the same first time as b: by name, 9 before 10
    b = write("cap.pcap10", [t, t + 2, t + 3], b"b")
    c = write("cap.pcap2", [t + 2, t + 2], b"c")  # a later first time: after a and b on equal times
    want = [b"a0", b"b0", b"a1", b"a2", b"b1", b"c0", b"c1", b"b2"]
    for order in ([a, b, c], [c, b, a], [b, c, a]):
        src = CaptureSource(order)
        got = [(r.index, r.data[-2:]) for r in src.records()]
        assert got == list(enumerate(want, 1)), order
        assert src.capture_info()["files"] == [a, b, c]


def test_a_file_without_records_and_a_damaged_file_in_a_set(tmp_path):
    frame = pb.frame(pb.LINKTYPE_ETHERNET, pb.tcp_packet("10.0.0.1", "10.0.0.2", 1, 2, payload=b"x"))
    t = 1_700_000_000.0
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(pb.write_pcap([], linktype=pb.LINKTYPE_ETHERNET))
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(pb.write_pcap([(t + i, pb.LINKTYPE_ETHERNET, frame) for i in range(0, 10, 2)])[:-5])
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(pb.write_pcap([(t + i, pb.LINKTYPE_ETHERNET, frame) for i in range(1, 10, 2)]))
    src = CaptureSource([str(empty), str(cut), str(whole)])
    got = [(r.index, (r.ts - round(t * 1_000_000_000)) // 1_000_000_000) for r in src.records()]  # (whole seconds)
    assert got == [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4), (6, 5), (7, 6), (8, 7), (9, 9)]  # cut's last record is gone
    assert [p for p, _ in src.errors] == [str(cut)]
    assert "truncated" in str(src.errors[0][1])
    assert src.capture_info()["files"] == [str(cut), str(whole), str(empty)]


@pytest.fixture
def runs(parallel_runs):
    """Counts the runs that went through the workers (tests/conftest.py)."""
    return parallel_runs


@needs_wireshark_tools
def test_a_set_of_pcapng_files_with_two_interfaces_is_the_same_with_two_processes(tmp_path, runs):
    # connections on an Ethernet interface (microseconds) and on a Linux cooked one (nanoseconds)
    records = _conversations(linktypes=(pb.LINKTYPE_ETHERNET, pb.LINKTYPE_LINUX_SLL), jitter=0.000007)
    lts = {pb.LINKTYPE_ETHERNET: 0, pb.LINKTYPE_LINUX_SLL: 1}
    whole = str(tmp_path / "whole.pcapng")
    with open(whole, "wb") as f:
        f.write(pb.write_pcapng([(ts, lts[lt], data) for ts, lt, data in _whole(records)],
                                interfaces=((pb.LINKTYPE_ETHERNET, None), (pb.LINKTYPE_LINUX_SLL, 9))))
    names = _rotated(whole, tmp_path / "set", 6, "pcapng")
    shuffled = _orders(names)["shuffled"]
    want = _report(tmp_path, [whole])
    assert want["summary"]["deliveries"] == CONNECTIONS * MESSAGES
    for jobs in ("1", "2"):
        assert _report(tmp_path, shuffled, "-j", jobs) == want, jobs
    one = _run(tmp_path, ["deliveries", "-T", "csv", "-j", "1", *shuffled])
    two = _run(tmp_path, ["deliveries", "-T", "csv", "-j", "2", *shuffled])
    assert one == two and one[0] == 0
    assert one == _run(tmp_path, ["deliveries", "-T", "csv", whole])
    assert runs


@needs_wireshark_tools
def test_files_missing_from_a_numbered_set_are_reported_as_gaps_in_the_set(tmp_path, whole_capture):
    names = _rotated(whole_capture, tmp_path / "set", 14, "pcap")
    full = _run(tmp_path, ["report", "-T", "json", *names])[1]
    assert "gaps" not in json.loads(full)["capture"]  # (a whole set has none)
    kept = [n for n in names if not n.endswith(("cap.pcap5", "cap.pcap9", "cap.pcap10"))]
    random.Random(5).shuffle(kept)
    rc, out = _run(tmp_path, ["report", "-T", "json", *kept])
    assert rc == 0
    gaps = json.loads(out)["capture"]["gaps"]
    for g in gaps:  # (the TCP gaps that fall in the missing files: tests/capture/test_loose_missing_files.py)
        g.pop("connections", None)

    def ends(path):
        ts = [r.ts for r in CaptureSource(path).records()]
        return ts[0], ts[-1]

    folder = os.path.dirname(names[0])
    want = []
    for missing, after, before in ((["cap.pcap5"], 4, 6), (["cap.pcap9", "cap.pcap10"], 8, 11)):
        want.append({"missing": [os.path.join(folder, m) for m in missing], "after": names[after],
                     "before": names[before], "from": ends(names[after])[1], "to": ends(names[before])[0]})
    assert gaps == want
    rc, text = _run(tmp_path, ["report", *kept])
    lines = [line for line in text.decode().splitlines() if " of the set " in line and " missing (" in line]
    assert len(lines) == 2 and lines[0].startswith(f"file {want[0]['missing'][0]} of the set is missing (between ")
    assert f"after {names[4]}, before {names[6]})" in lines[0]
