"""``-j N``: a capture analysed by N processes gives exactly the output of one process.

The oracle is the single-process run of the same command (``-j 1``), byte for byte, on every
sample and on captures whose results depend on the whole capture: several connections at
once, 4-tuples reused, connections expired together by the idle sweep that other traffic
drives, a stall and deliveries still open at the end, a malformed packet, non-AMQP TCP, and
deliveries folded by the settlement lag across workers."""

from __future__ import annotations

import glob
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples")

from amqp_dissect.cli.main import main  # noqa: E402
from amqp_dissect.pipelines.runs import parallel  # noqa: E402

TABLES = ("connections", "sessions", "links", "stalls", "transactions", "violations", "errors", "deliveries")


def _records(path):
    from pcapbuild import read_pcap_records

    out = []
    with open(path, "rb") as f:
        for (sec, frac), lt, data in read_pcap_records(f):
            out.append((sec + frac / 1e6, lt, data))
    return out


@pytest.fixture
def runs(parallel_runs):
    """Counts the runs that went through the workers (tests/conftest.py)."""
    return parallel_runs


def _out(tmp_path, args, jobs, suffix):
    out = tmp_path / f"out-{jobs}-{len(os.listdir(tmp_path))}.{suffix}"
    rc = main(args + ["-j", str(jobs), "-o", str(out)])
    return rc, out.read_bytes()


def _same(tmp_path, paths, command, fmt, jobs=(2,)):
    suffix = {"text": "txt", "table": "txt"}.get(fmt, fmt)
    args = [command, "-T", fmt, *paths]
    rc1, one = _out(tmp_path, args, 1, suffix)
    for j in jobs:
        rcj, many = _out(tmp_path, args, j, suffix)
        assert (rcj, many) == (rc1, one), (command, fmt, j)
    return one


SAMPLE_FILES = sorted(glob.glob(os.path.join(SAMPLES, "*.pcap*")))


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=os.path.basename)
def test_every_sample_is_the_same_with_two_processes(tmp_path, path, runs):
    _same(tmp_path, [path], "report", "text")
    _same(tmp_path, [path], "report", "json")
    for table in ("deliveries", "errors", "stalls", "violations", "links"):
        _same(tmp_path, [path], table, "jsonl")
    assert runs and set(runs) == {2}


def _together(path, cut: float | None = None, gap: float = 0.0005):
    """Every sample at once: each shifted to start within a few ms of the others, records merged
    by time (several connections interleaved packet by packet), then two of them again on the
    same 4-tuples (reused: ``#2``); ``cut``: keep that share of the records (open deliveries, stalls, frames)."""
    from pcapbuild import write_pcap

    recs = []
    for i, p in enumerate(f for f in SAMPLE_FILES if f.endswith(".pcap")):
        r = _records(p)
        if not r:
            continue
        shift = 1_700_000_000.0 + i * gap - r[0][0]
        recs += [(ts + shift, lt, data) for ts, lt, data in r]
    recs.sort(key=lambda x: x[0])
    end = recs[-1][0]
    for i, name in enumerate(("outcomes.pcap", "drain.pcap")):  # their 4-tuples again: reused
        r = _records(os.path.join(SAMPLES, name))
        recs += [(ts - r[0][0] + end + 100.0 + i * 0.0007, lt, data) for ts, lt, data in r]
    recs.sort(key=lambda x: x[0])
    if cut is not None:
        recs = recs[:int(len(recs) * cut)]
    with open(path, "wb") as f:
        f.write(write_pcap(recs))


def _idle_capture(path):
    """Two samples side by side, left open (cut), then a third sample 1000 s later: its traffic
    drives the idle sweep that expires both first connections at one tick (they belong to
    different workers); then a malformed packet and non-AMQP TCP, so the end of the analysis is
    not the last record's time."""
    from pcapbuild import ethernet_frame, tcp_packet, write_pcap

    a = _records(os.path.join(SAMPLES, "credit_one.pcap"))[:28]
    b = _records(os.path.join(SAMPLES, "outcomes.pcap"))
    b = b[:len(b) * 2 // 3]
    c = _records(os.path.join(SAMPLES, "heartbeat.pcap"))
    t0 = 1_700_000_000.0
    a = [(ts - a[0][0] + t0, lt, d) for ts, lt, d in a]
    b = [(ts - b[0][0] + t0 + 0.0003, lt, d) for ts, lt, d in b]
    end = max(a[-1][0], b[-1][0])
    c = [(ts - c[0][0] + end + 1000.0, lt, d) for ts, lt, d in c]
    t = c[-1][0]
    tail = [(t + 3.0, 1, ethernet_frame(b"\x45\x00\x00\x14"))]  # an IPv4 header cut short
    for i in range(4):
        pkt = tcp_packet("10.9.9.9", "10.9.9.8", 33000, 80, seq=1 + i * 10, payload=b"GET /abc\r\n")
        tail.append((t + 5.0 + i * 0.5, 1, ethernet_frame(pkt)))
    with open(path, "wb") as f:
        f.write(write_pcap(sorted(a + b, key=lambda x: x[0]) + c + tail))


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("parallel")
    out = {}
    for name, make in (("together", lambda p: _together(p)), ("cut", lambda p: _together(p, cut=0.6)),
                       ("idle", _idle_capture)):
        p = str(d / f"{name}.pcap")
        make(p)
        out[name] = p
    return out


@pytest.mark.parametrize("name", ["together", "cut", "idle"])
def test_multi_connection_captures_are_the_same_in_every_format(tmp_path, captures, name, runs):
    path = captures[name]
    for fmt in ("text", "json"):
        _same(tmp_path, [path], "report", fmt, jobs=(2, 3))
    for table in TABLES:
        for fmt in ("csv", "jsonl", "parquet"):
            _same(tmp_path, [path], table, fmt, jobs=(2, 3))
        if table != "deliveries":
            _same(tmp_path, [path], table, "table", jobs=(3,))
    assert runs


def test_the_captures_exercise_what_ties_flows_together(tmp_path, captures):
    """The multi-connection captures are not trivial: many connections on both workers, reused
    4-tuples, idle expiry, open stalls and unsettled deliveries at the end."""
    import json

    rc, rep = _out(tmp_path, ["report", "-T", "json", captures["together"]], 1, "json")
    doc = json.loads(rep)
    assert doc["summary"]["connections"] >= 10 and doc["summary"]["deliveries"] > 50
    assert any("#" in c["connection"] for c in doc["connections"])  # a 4-tuple reused
    rc, rep = _out(tmp_path, ["report", "-T", "json", captures["idle"]], 1, "json")
    doc = json.loads(rep)
    ends = [c["transport_end"] for c in doc["connections"]]
    assert ends.count("idle") >= 2
    rc, rep = _out(tmp_path, ["report", "-T", "json", captures["cut"]], 1, "json")
    assert json.loads(rep)["summary"]["unsettled"] > 0


def test_deliveries_folded_by_the_settlement_lag_across_workers(tmp_path, captures, monkeypatch, runs):
    """A delivery settled by one peer is folded ``fold_lag`` settlements later, counting every
    connection; with a short lag the deliveries of one worker are placed by the other's
    settlements."""
    from amqp_dissect.pipelines.runs import local
    from amqp_dissect.results.analytics import Analyzer

    def short_lag(*a, **kw):
        an = Analyzer(*a, **kw)
        an.fold_lag = 5
        return an

    monkeypatch.setattr(local, "Analyzer", short_lag)
    monkeypatch.setattr(parallel, "Analyzer", short_lag)
    for name in ("together", "cut"):
        for fmt in ("csv", "parquet"):
            _same(tmp_path, [captures[name]], "deliveries", fmt, jobs=(2, 3))
    assert runs


def test_several_files_and_count_limit(tmp_path, runs):
    paths = [os.path.join(SAMPLES, n) for n in ("outcomes.pcap", "drain.pcap", "multi_session.pcap")]
    _same(tmp_path, paths, "report", "json", jobs=(2,))
    _same(tmp_path, paths + ["-c", "40"], "deliveries", "jsonl", jobs=(2,))
    assert runs


def test_standard_input_falls_back_to_one_process(tmp_path, monkeypatch, capsysbinary, runs):
    import io

    path = os.path.join(SAMPLES, "outcomes.pcap")
    rc1, one = _out(tmp_path, ["report", path], 1, "txt")
    with open(path, "rb") as f:
        data = f.read()

    class Stdin:
        buffer = io.BytesIO(data)

    monkeypatch.setattr(sys, "stdin", Stdin())
    out = tmp_path / "stdin.txt"
    rc = main(["report", "-j", "2", "-o", str(out), "-"])
    assert rc == rc1 == 0

    def body(text):  # (the header names the input)
        return [x for x in text.splitlines() if not x.startswith(b"file")]

    assert body(out.read_bytes()) == body(one) and len(body(one)) > 10
    assert runs == []


@pytest.mark.parametrize("args", [["report"], ["report", "-T", "json"], ["stalls", "-T", "csv"],
                                  ["deliveries", "-T", "jsonl"], ["links", "-T", "table"]])
@pytest.mark.parametrize("where", [0, 1])
def test_a_failing_worker_is_an_internal_error_with_the_output_finished(tmp_path, monkeypatch, capsys, args, where):
    """A bug in a worker (the parent's own share or a child's): exit 1 and one line on stderr,
    and the output is the whole one-process output."""
    path = os.path.join(SAMPLES, "outcomes.pcap")
    rc1, one = _out(tmp_path, args + [path], 1, "out")
    real = parallel.FlowWorker.read

    def fail(self):
        if self.w == where:
            raise ZeroDivisionError("boom")
        return real(self)

    monkeypatch.setattr(parallel.FlowWorker, "read", fail)
    capsys.readouterr()
    out_path = tmp_path / "failed.out"
    rc = main(args + ["-j", "2", "-o", str(out_path), path])
    err = capsys.readouterr().err
    assert rc1 == 0 and rc == 1
    assert len(err.strip().splitlines()) == 1 and "internal error" in err and "boom" in err
    assert out_path.read_bytes() == one


def test_a_missing_file_is_the_same_failure(tmp_path, capsys):
    missing = str(tmp_path / "nope.pcap")
    assert main(["report", missing]) == main(["report", "-j", "2", missing]) == 3


def _ip_options(data: bytes) -> bytes:
    """An Ethernet IPv4 frame with 4 bytes of IP options (NOPs) added: the parser, not the quick
    look at fixed offsets, finds its flow."""
    import struct

    ip = data[14:]
    ihl = (ip[0] & 15) * 4
    head = bytearray(bytes([ip[0] + 1]) + ip[1:ihl] + b"\x01\x01\x01\x01")
    struct.pack_into("!H", head, 2, struct.unpack_from("!H", ip, 2)[0] + 4)
    head[10:12] = b"\0\0"
    s = sum(struct.unpack(f"!{len(head) // 2}H", bytes(head)))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into("!H", head, 10, ~s & 0xFFFF)
    return data[:14] + bytes(head) + ip[ihl:]


def _cooked(data: bytes) -> bytes:
    """An Ethernet frame as a Linux cooked (SLL, link type 113) record."""
    return b"\x00\x00\x00\x01\x00\x06" + data[6:12] + b"\x00\x00" + data[12:]


def test_records_the_quick_look_cannot_read_join_their_flow(tmp_path, captures, runs):
    """The worker's loop reads a record's flow at fixed offsets (Ethernet or Linux cooked, IPv4
    without options) or asks the parser: every other IPv4 record with IP options (one flow then
    takes both ways), IPv6 flows among them, and the same capture as Linux cooked records: the
    output of every command is the single process'."""
    from pcapbuild import write_pcap

    recs = _records(captures["together"])
    assert any(d[12:14] == b"\x86\xdd" for _, _, d in recs)  # (IPv6 flows: the parser's)
    mixed = [(ts, lt, _ip_options(d) if i % 2 and d[12:14] == b"\x08\x00" and d[23] == 6 else d)
             for i, (ts, lt, d) in enumerate(recs)]
    cooked = [(ts, 113, _cooked(d)) for ts, lt, d in recs]
    for name, rs in (("mixed", mixed), ("cooked", cooked)):
        p = str(tmp_path / f"{name}.pcap")
        with open(p, "wb") as f:
            f.write(write_pcap(rs))
        _same(tmp_path, [p], "report", "json")
        for table in ("deliveries", "connections", "errors"):
            _same(tmp_path, [p], table, "jsonl", jobs=(2, 3))
        # (the records still carry the same connections: the deliveries are the original capture's)
        assert (_out(tmp_path, ["deliveries", "-T", "jsonl", p], 1, "jsonl")
                == _out(tmp_path, ["deliveries", "-T", "jsonl", captures["together"]], 1, "jsonl"))
    assert runs


# --------------------------------------------------------------------------- the reader's gate


def _quick_flow(lt: int, data: bytes):
    """The test's own reading of a record's 4-tuple where the gate may read it: an Ethernet or
    Linux cooked IPv4 TCP record, IHL 5, neither more fragments nor a fragment offset, at least
    a TCP header long; the 4-tuple as its bytes (addresses, then ports), else None."""
    base = {1: 12, 113: 14}.get(lt)
    if base is None or len(data) < base + 42 or data[base:base + 2] != b"\x08\x00":
        return None
    ip = data[base + 2:]
    if ip[0] != 0x45 or int.from_bytes(ip[6:8], "big") & 0x3FFF or ip[9] != 6:
        return None
    return ip[12:24]


def _gate_capture(seed: int, n_flows: int = 300):
    """(records, owner map) with many more flows than the gate's cache has slots: IPv4 flows
    (some with equal addresses, as on loopback, some with DF set), each given to one of three
    workers or to none (unknown: the worker's loop places it); among them IPv6, UDP, an IPv4
    packet with options and a fragment, all records the gate must leave to the loop."""
    import random

    from pcapbuild import ethernet_frame, tcp_packet, udp_packet

    rng = random.Random(seed)
    flows = []
    for i in range(n_flows):
        a = "127.0.0.1" if i % 3 == 0 else f"10.{i // 200}.{i % 200}.1"
        b = "127.0.0.1" if i % 3 == 0 else f"10.99.{i % 7}.2"
        flows.append((a, b, 40000 + i, 5672))
    owner = {}
    for a, b, sp, dp in flows:
        w = rng.choice([0, 1, 2, None])
        if w is None:
            continue
        key = _quick_flow(1, ethernet_frame(tcp_packet(a, b, sp, dp)))
        ent = [w, 0]
        owner[key] = ent
        owner[key[4:8] + key[0:4] + key[10:12] + key[8:10]] = ent
    recs = []
    t = 1_700_000_000.0
    for k in range(3000):
        t += rng.choice([0.000001, 0.0001, 0.01])
        a, b, sp, dp = flows[rng.randrange(n_flows)]
        if rng.random() < 0.5:
            a, b, sp, dp = b, a, dp, sp
        kind = rng.random()
        if kind < 0.9:
            pkt = tcp_packet(a, b, sp, dp, seq=k, payload=bytes(rng.randrange(0, 60)), frag=0x4000 * (k % 2))
        elif kind < 0.93:
            pkt = tcp_packet("fd00::1", "fd00::2", sp, dp, seq=k, payload=b"x")
        elif kind < 0.96:
            pkt = udp_packet(a, b, sp, dp, b"u")
        elif kind < 0.98:
            pkt = tcp_packet(a, b, sp, dp, seq=k, payload=b"y", frag=0x2000)  # more fragments
        else:
            pkt = _ip_options(ethernet_frame(tcp_packet(a, b, sp, dp, seq=k, payload=b"z")))[14:]
        recs.append((t, 1, ethernet_frame(pkt)))
    return recs, owner


@pytest.mark.parametrize("little_endian,nano,cooked", [(True, False, False), (False, True, False), (True, False, True)])
def test_the_reader_drops_exactly_the_other_workers_records_it_can_place(little_endian, nano, cooked):
    """A pcap reader given a FlowGate drops a record only if its quick look reads an IPv4 TCP
    flow (see ``_quick_flow``) that the gate knows for another worker while the sweep is armed
    and not due; it adds the dropped records' sizes to that worker's load and counts them.  The
    expectation is computed here from the records as written, over both byte orders, both time
    resolutions, Linux cooked records and more flows than the gate's cache has slots."""
    import io

    from pcapbuild import write_pcap

    from amqp_dissect.capture.pcap import FlowGate, open_capture

    recs, owner = _gate_capture(7)
    if cooked:
        recs = [(ts, 113, _cooked(d)) for ts, lt, d in recs]
    w = 1
    due = recs[2400][0]  # from here on the sweep may tick: every record goes to the loop
    blob = write_pcap(recs, little_endian=little_endian, nano=nano)
    every = list(open_capture(io.BytesIO(blob)))  # (no gate: every record, as read)
    assert len(every) == len(recs)
    reader = open_capture(io.BytesIO(blob))
    it = iter(reader)
    first = next(it)
    gate = FlowGate(owner, [5, 6, 7], w)
    due = every[2400].ts  # (the record's time as read: integer nanoseconds)
    gate.armed, gate.nxt = True, due
    reader.set_gate(gate)
    got = [first] + list(it)

    kept, loads, dropped, last = [1], [5, 6, 7], 0, None
    for i, (ts, lt, data) in enumerate(recs[1:], start=2):
        key = _quick_flow(lt, data)
        ent = owner.get(key) if key is not None else None
        if ent is not None and ent[0] != w and every[i - 1].ts < due:
            loads[ent[0]] += len(data)
            dropped += 1
            last = i
        else:
            kept.append(i)
    assert [(r.index, r.ts, r.data, r.orig_len) for r in got] == [
        (i, every[i - 1].ts, recs[i - 1][2], len(recs[i - 1][2])) for i in kept]
    assert gate.skipped == dropped and dropped > len(recs) // 4
    assert gate.loads == loads
    assert gate.seen and gate.ts == every[last - 1].ts  # (the last record it dropped: the loop sets the others')
    assert reader.error is None and reader.bytes_read == len(blob)
    # a gate not armed drops nothing
    reader = open_capture(io.BytesIO(blob))
    idle = FlowGate(owner, [0, 0, 0], w)
    reader.set_gate(idle)
    assert len(list(reader)) == len(recs) and idle.skipped == 0 and not idle.seen


def test_the_workers_drop_records_in_the_reader_and_a_pcapng_is_read_whole(tmp_path, captures, monkeypatch, runs):
    """In a ``-j 2`` run on a pcap file the worker's reader drops the other worker's records (so
    the identity tests above go through the gate); a pcapng file has no gate, and gives the
    single process' output too."""
    from pcapbuild import write_pcapng

    skipped = []
    real = parallel.FlowWorker.read

    def read(self):
        real(self)
        skipped.append((self.w, self.gate.skipped, self.source.packets))

    monkeypatch.setattr(parallel.FlowWorker, "read", read)
    path = captures["together"]
    _same(tmp_path, [path], "report", "json")
    n = len(_records(path))
    assert [(w, p) for w, _, p in skipped] == [(0, n)]  # (worker 0 runs here; it counts every record)
    assert n // 4 < skipped[0][1] < n
    skipped.clear()
    recs = _records(path)
    p = str(tmp_path / "together.pcapng")
    with open(p, "wb") as f:
        f.write(write_pcapng([(ts, 0, d) for ts, _, d in recs]))
    _same(tmp_path, [p], "report", "json")
    _same(tmp_path, [p], "deliveries", "jsonl")
    assert skipped and all(s == 0 for _, s, _ in skipped)
    assert runs
