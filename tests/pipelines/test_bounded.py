"""Bounded cost under hostile input (issue 8, goal 3), asserted at small scale.

The captures are the ones tests/benchmarks/bench_hostile.py builds at hostile scale (frames encoded by hand
from the spec's encoding rules there, TCP/IP and the capture file by dpkt): the same traffic,
fewer frames.  Costs are counted as operations (decoded elements, deliveries a disposition
touches, bytes allocated per connection or delivery), never timed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

from amqp_dissect.amqp.codec import ELEMENT_BUDGET_BASE, ELEMENTS_PER_BYTE
from amqp_dissect.cli.main import EXIT_OK, main

HERE = Path(__file__).parent


def _sibling(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, next(HERE.parent.glob(f"*/{name}.py")))  # any tests/ folder
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


B = _sibling("bench_hostile")


def _run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def _write(path: Path, conv) -> Path:
    path.write_bytes(conv.pcap())
    return path


def _violations(capsys, cap) -> list[dict]:
    rc, out, err = _run(capsys, "violations", "--format", "jsonl", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    return [json.loads(x) for x in out.splitlines()]


# --------------------------------------------------------------------------- element budget
def _zero_width_flow_in_properties() -> bytes:
    """A flow whose properties map holds the array of arrays of nulls: the scanner reads the map as
    a Span and validates it (spending budget) before the generic decoder sees it."""
    arr = B.zero_width_array_of_arrays(18)
    key = b"\xa3\x01k"
    body = struct.pack(">I", 2) + key + arr
    props = b"\xd1" + struct.pack(">I", len(body)) + body
    fields = [B._uint(0), B._uint(100), B._uint(0), B._uint(100), B.NULL, B.NULL, B.NULL, B.NULL, B.NULL, B.NULL,
              props]
    return B.frame(B._described(0x13, fields))


def test_zero_width_arrays_spend_the_connections_element_budget_and_say_so(tmp_path, capsys):
    """Each 200-byte flow of arrays of nulls would decode 1M elements (the per-frame cap); the
    connection's budget stops it, and every such frame gets a 'budget' expert note and violation."""
    frames = 30
    cap = _write(tmp_path / "zw.pcap", B.zero_width_conversation(frames))
    rows = _violations(capsys, cap)
    budget = [r for r in rows if r["kind"] == "budget"]
    assert len(budget) == frames
    assert all(r["side"] == "client" and r["origin"] == "framing" for r in budget)
    assert all("decoding budget" in r["message"] for r in budget)
    rc, out, err = _run(capsys, "frames", "-V", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert out.count("frame body not decoded: it holds more than") == frames
    rc, out, err = _run(capsys, "report", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert f"violations {frames}" in out


def test_the_scanner_spends_the_same_budget(tmp_path, capsys):
    conv = B.TcpConversation()
    conv.handshake()
    for d, data in B.setup_exchange()[:6]:
        conv.send(d, data)
    flow = _zero_width_flow_in_properties()
    for _ in range(10):
        conv.send(0, flow)
    conv.close()
    rows = _violations(capsys, _write(tmp_path / "zwp.pcap", conv))
    assert sum(r["kind"] == "budget" for r in rows) == 10


def test_a_message_of_zero_width_arrays_is_not_decoded_for_frames_V(tmp_path, capsys):
    conv = B.TcpConversation()
    conv.handshake()
    for d, data in B.setup_exchange():
        conv.send(d, data)
    value = b"\x00\x53\x77" + B.zero_width_array_of_arrays(18)  # amqp-value: the array of arrays
    transfer = B.transfer_frame(0)
    transfer = transfer[: -len(B._MSG)] + value
    transfer = struct.pack(">I", len(transfer)) + transfer[4:]
    for _ in range(5):
        conv.send(0, transfer)
    conv.close()
    cap = _write(tmp_path / "zwm.pcap", conv)
    for args in (("frames", "-V"), ("frames", "--format", "jsonl")):
        rc, out, err = _run(capsys, *args, str(cap))
        assert (rc, err) == (EXIT_OK, ""), args
        assert out.count("message not decoded: it holds more than") == 5, args


_COUNTING = textwrap.dedent("""
    import json, sys
    from amqp_dissect.amqp import codec, framing
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    assert codec.__file__.endswith(".py"), codec.__file__  # the pure-Python twin (patchable)
    counted = [0]
    real = codec.Reader._count
    def _count(self, n):
        real(self, n)  # raises (LimitExceeded) before the elements are decoded: not counted
        counted[0] += n
    codec.Reader._count = _count
    framing.SCAN_HOT = False  # every body through the generic decoder: every element counted here
    run_analysis(CaptureSource([sys.argv[1]]), rows=False)
    print(json.dumps(counted[0]))
""")


def test_decoded_elements_stay_within_the_budget_of_the_connections_bytes(tmp_path):
    """Counted in the decoder itself (its pure-Python twin, in a child process: the compiled
    Reader's counting is a C method): every element decoded over the whole capture, against
    ELEMENT_BUDGET_BASE + ELEMENTS_PER_BYTE x the bytes of the connection's frames."""
    frames = 40
    cap = _write(tmp_path / "zw.pcap", B.zero_width_conversation(frames))
    frame_bytes = sum(len(x) for _d, x in B.setup_exchange()[:6] if not x.startswith(b"AMQP"))
    frame_bytes += frames * len(B.zero_width_flow())
    env = dict(os.environ, AMQP_DISSECT_PURE_PYTHON="1")
    out = subprocess.run([sys.executable, "-c", _COUNTING, str(cap)], env=env, capture_output=True, text=True,
                         check=True).stdout
    counted = json.loads(out)
    allowed = ELEMENT_BUDGET_BASE + ELEMENTS_PER_BYTE * frame_bytes
    assert 0 < counted <= allowed
    # without a per-connection budget each frame could decode up to the 1M per-frame cap
    assert allowed < 1_000_000


def test_real_traffic_never_meets_the_budget(capsys):
    """Every sample capture: no budget note anywhere (they decode as before)."""
    for cap in sorted((HERE.parent.parent / "samples").glob("*.pcap")):
        rc, out, err = _run(capsys, "frames", "--format", "jsonl", str(cap))
        assert rc == EXIT_OK, cap
        assert "decoding budget" not in out, cap


# --------------------------------------------------------------------------- dispositions
def _disposition(first: int, last: int, settled: bool = True) -> bytes:
    """From the receiver: first..last accepted (settled or not)."""
    return B.frame(B._described(0x15, [B.TRUE, B._uint(first), B._uint(last), B.TRUE if settled else B.FALSE,
                                       b"\x00\x53\x24\x45"]))


class _CountingDict(dict):
    """A delivery table that counts the lookups and the entries iterated."""

    ops = 0

    def get(self, k, default=None):
        _CountingDict.ops += 1
        return dict.get(self, k, default)

    def __contains__(self, k):
        _CountingDict.ops += 1
        return dict.__contains__(self, k)

    def items(self):
        for kv in dict.items(self):
            _CountingDict.ops += 1
            yield kv

    def __iter__(self):
        for k in dict.__iter__(self):
            _CountingDict.ops += 1
            yield k


def _track(records):
    """Dissector -> StateTracker, the session's delivery tables replaced by counting ones before the
    first transfer; yields (tracker, event) after each event is fed."""
    from amqp_dissect.amqp.framing import Frame
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.model.tracker import StateTracker
    import io

    from pcapbuild import write_pcap

    d, t = Dissector(), StateTracker()
    swapped = False
    events = []
    for rec in open_capture(io.BytesIO(write_pcap(records))):
        events.extend(d.feed(rec))
    events.extend(d.finish())
    for ev in events:
        if not swapped and type(ev) is Frame and ev.pname == "transfer":
            (c,) = t.connections.values()
            (s,) = c.sessions
            for table in s.deliveries:
                table.by_id = _CountingDict()
            swapped = True
        t.feed(ev)
        yield t, ev
    t.finish()


def test_a_wide_disposition_costs_what_it_touches_and_settled_deliveries_leave_the_tables():
    n, wide = 3000, 200
    conv = B.TcpConversation()
    conv.handshake()
    for d, data in B.setup_exchange():
        conv.send(d, data)
    for i in range(0, n, 50):
        conv.send(0, b"".join(B.transfer_frame(j) for j in range(i, i + 50)), mss=65000)
    # wide ranges that touch no delivery (ids beyond those sent), then ranges of 100 ids that settle them
    for k in range(wide):
        conv.send(1, _disposition(n + 10 + k, n + 10 + k + 2**20))
    for i in range(0, n, 100):
        conv.send(1, _disposition(i, i + 99))
    conv.close()
    ops = []
    tracker = None
    for tracker, ev in _track(conv.records):
        if getattr(ev, "pname", None) == "disposition":
            ops.append(_CountingDict.ops)
        _CountingDict.ops = 0
    assert len(ops) == wide + n // 100
    # ranges of a million ids, none of them sent: the first orders the ids of the 3000 unsettled once
    # (the order is kept from then on, so each delivery is met once), the others cost a few lookups
    assert ops[0] <= n + 4, ops[0]
    assert max(ops[1:wide]) <= 4, ops[1:wide]
    # a range of 100 unsettled deliveries: about one lookup per delivery, plus their folding
    assert all(x <= 3 * 100 + 8 for x in ops[wide:]), ops[wide:]
    (c,) = tracker.connections.values()
    (s,) = c.sessions
    (link,) = s.links
    assert sum(len(x) for x in s.deliveries) == 0 and not link.live
    assert [table.order for table in s.deliveries] == [None, None]
    assert link.stats.deliveries == n and link.stats.outcomes["accepted"] == n
    assert not tracker._settling  # (settled by the receiver only: folded at the latest at the end)
    assert tracker.violations == [] or all(v["kind"] == "unknown-delivery" for v in tracker.violations)


# --------------------------------------------------------------------------- memory per connection / delivery
# Measured with tracemalloc (every allocation of the interpreter, the compiled modules' included) over
# many objects, after a warm-up, in whatever mode the suite runs (compiled, or AMQP_DISSECT_PURE_PYTHON=1).
CONN_BUDGET = 512  # bytes an idle connection (the TCP layer has let it go) keeps for the rest of the run
# bytes a half-open connection costs in all while the TCP layer still tracks it: 1,016 B before issue 39,
# 1,040 B (compiled) / 1,052 B (pure) with the state for one-direction detection (the ACK watch of a
# connection, its missing side) and snap-length cuts (a direction's cuts); issue 40 won it back (the
# server's address text shared by the TCP layer's keys)
HALF_OPEN_BUDGET = 1024
# bytes a connection that sent only its protocol header costs in all while the TCP layer tracks it (issue 40:
# 5,269 B compiled / 5,429 B pure before its frames' state was shared until its first frame; 2,319 B / 2,367 B
# before its header state was a ConnectionHeaders; 1,857 B / 1,913 B before the TCP layer's directions held C
# integers, the decoder its directions in two fields and a shared empty buffer, and the dissector shared the
# client text); 1,569 B / 1,669 B before such a connection kept no decoder (an int in the dissector's table
# until its next byte), the TCP layer's key was one text and its one-direction ACK watch fields of its entry
# (1,132 B / 1,224 B after); 938 B / 1,010 B since connections without frames share their connection state, the
# TCP layer keeps its order of activity in two fields of each connection and one dict entry per open id; 926 B /
# 1,018 B with its times, packets and ordinal C integers (their int objects are the records' here, so the
# saving does not show; pure Python holds one field more): the budget stays 1,024 for pure Python
HEADER_ONLY_BUDGET = 1024
# bytes such a connection keeps once the TCP layer let it go (with the note that the server's direction
# is not in the capture): 2,042 B / 2,092 B (compiled / pure) before issue 40's ConnectionHeaders and shared loss pairs
HEADER_ONLY_IDLE_BUDGET = 1024
TCP_FLOW_BUDGET = 700  # bytes the TCP layer holds for one half-open connection (its entry, key, id, direction)
REPORT_CONN_BUDGET = 512  # bytes the report document adds per connection it does not list
DELIVERY_BUDGET = 100  # bytes an unsettled delivery costs in compact form


def _pipeline(records):
    import io

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.results.analytics import Analyzer

    from pcapbuild import write_pcap

    return list(open_capture(io.BytesIO(write_pcap(records)))), Dissector(), Analyzer(rows=False)


def _retained(before, after) -> int:
    """Bytes allocated by ``after`` and not freed, ``before`` run first.  Traced from before
    ``before``: what ``after`` frees of what ``before`` made counts too."""
    import gc
    import tracemalloc

    tracemalloc.start()
    try:
        before()
        gc.collect()
        b0 = tracemalloc.get_traced_memory()[0]
        after()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - b0
    finally:
        tracemalloc.stop()


def _syn_cost(n: int, max_tcp: int | None) -> float:
    warm = 2000
    recs, d, a = _pipeline(B.syn_records(warm + n))
    if max_tcp is not None:
        d.tcp.max_connections = max_tcp

    def feed(rs):
        for r in rs:
            for ev in d.feed(r):
                a.feed(ev)

    used = _retained(lambda: feed(recs[:warm]), lambda: feed(recs[warm:]))
    assert len(a.connections) == warm + n
    return used / n


def _header_only_cost(n: int, max_tcp: int | None = None) -> float:
    """Bytes per connection that sent a SYN and then only the AMQP protocol header, tracked by the
    TCP layer (all of it: the TCP entry, the decoder, the analysis' connection), or let go by it
    (``max_tcp``: at most that many tracked)."""
    warm = 2000
    recs, d, a = _pipeline(B.header_records(warm + n))
    if max_tcp is not None:
        d.tcp.max_connections = max_tcp

    def feed(rs):
        for r in rs:
            for ev in d.feed(r):
                a.feed(ev)

    used = _retained(lambda: feed(recs[:2 * warm]), lambda: feed(recs[2 * warm:]))
    assert len(a.connections) == warm + n
    assert all(c.headers[0] and not c.frames[0] for c in a.connections.values())  # (a header each, no frame)
    return used / n


def test_a_connection_that_sent_only_its_protocol_header_costs_at_most_header_only_budget():
    """Issue 40: a connection whose only AMQP bytes are its protocol header keeps the state of the
    frames it never sent shared (the analysis' lists and maps, the decoder's budgets, the scanner's
    result, the direction that sent nothing): 5.3 KB before (compiled; 5.4 KB pure)."""
    per = _header_only_cost(6000)
    assert 0 < per <= HEADER_ONLY_BUDGET, per


def test_a_connection_that_sent_only_its_protocol_header_keeps_at_most_1_kb_once_let_go():
    """Issue 40: let go by the TCP layer (at most 100 tracked here), which notes that the server's
    direction is not in the capture, a header-only connection keeps its header state (a ConnectionHeaders:
    the frames' state shared, its header pair and its one unknown line shared tuples) and a loss
    record whose untouched per-peer pairs are shared."""
    per = _header_only_cost(6000, max_tcp=100)
    assert 0 < per <= HEADER_ONLY_IDLE_BUDGET, per


def test_a_header_only_connection_is_headers_state_until_its_first_frame(tmp_path, capsys):
    """The connection of a header alone is a ConnectionHeaders (no Connection), its one-direction loss noted as
    before, its header pair one shared object; its row lists the header the client sent (the
    capture's bytes, as tshark reads them, are the oracle)."""
    import shutil

    from amqp_dissect.model.entities import ConnectionHeaders

    recs, d, a = _pipeline(B.header_records(50))
    d.tcp.max_connections = 10
    for r in recs:
        for ev in d.feed(r):
            a.feed(ev)
    for ev in d.finish():
        a.feed(ev)
    conns = list(a.connections.values())
    assert {type(c) for c in conns} == {ConnectionHeaders}
    assert all(c.loss is not None and c.loss.absent[1] and not c.loss.absent[0] for c in conns)
    assert all(list(c.unknown) == ["the server's frames (one direction captured)"] for c in conns)
    assert len({id(c.headers) for c in conns}) == 1 and list(conns[0].headers[0]) == ["AMQP 1.0.0"]
    cap = tmp_path / "hdr.pcap"
    B._write(str(cap), list(B.header_records(3)))
    rc, out, err = _run(capsys, "connections", "--format", "jsonl", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["protocol_headers_client"] for r in rows] == [["AMQP 1.0.0"]] * 3
    assert [r["protocol_headers_server"] for r in rows] == [[]] * 3
    if shutil.which("tshark"):  # the oracle: the 8 bytes each client sent, as tshark reads them
        tsh = subprocess.run(["tshark", "-r", str(cap), "-d", "tcp.port==5672,amqp", "-T", "fields", "-e",
                              "tcp.payload"], capture_output=True, text=True, check=True).stdout.split()
        assert tsh == [b"AMQP\x00\x01\x00\x00".hex()] * 3, tsh


def test_the_shared_defaults_of_connections_without_frames_stay_empty(capsys):
    """What connections without frames share (a machine's queue of waiting inputs, the analysis'
    lists and maps) is never written: empty after every sample capture."""
    from amqp_dissect.amqp import framing
    from amqp_dissect.model import machine, state

    for cap in sorted((HERE.parent.parent / "samples").glob("*.pcap")):
        rc, _out, _err = _run(capsys, "report", str(cap))
        assert rc == EXIT_OK, cap
    assert machine._NO_QUEUE == ([], [])
    assert state.EMPTY_MAP == {} and state.EMPTY_PAIR == ((), ())
    assert framing._NO_PARTIALS == {}
    assert framing._NO_BYTES == bytearray()
    # (the connection states shared by connections without frames: each still the pair of states it is kept for)
    assert state._SHARED_ENDPOINTS and all(
        tuple(ep.codes) == key and ep.queue is machine._NO_QUEUE for key, ep in state._SHARED_ENDPOINTS.items())


def test_an_idle_connection_keeps_at_most_half_a_kb():
    """SYN-only connections the TCP layer stopped tracking (evicted: at most 100 open here) leave
    the analysis its connection row's state and nothing else (a connection without AMQP bytes is
    the small object it was at its first TCP packet)."""
    per = _syn_cost(6000, max_tcp=100)
    assert 0 < per <= CONN_BUDGET, per


def test_a_half_open_connection_costs_at_most_1_kb_while_tracked():
    """Everything a SYN-only connection keeps while the TCP layer tracks it: the TCP entry, the
    dissector's pending entry, the analysis' connection (the small one a connection is until its
    first AMQP byte), the address texts."""
    per = _syn_cost(6000, max_tcp=None)
    assert 0 < per <= HALF_OPEN_BUDGET, per


def test_the_tcp_layer_keeps_at_most_700_bytes_per_half_open_connection():
    """The reassembler alone, fed the SYNs' segments: one table entry in least-recently-active
    order, one key for both directions, the connection's id and one direction (the other is made
    at its first segment)."""
    import io

    from amqp_dissect.capture.netparse import parse_segment
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.capture.tcp import TcpReassembler

    from pcapbuild import write_pcap

    warm, n = 2000, 6000
    segs = [parse_segment(r.linktype, r.data) for r in open_capture(io.BytesIO(write_pcap(B.syn_records(warm + n))))]
    tr = TcpReassembler()
    opened = []

    def feed(part):
        for i, seg in enumerate(part):
            opened.extend(tr.feed(seg, 1.0 + i * 1e-6, i))

    used = _retained(lambda: feed(segs[:warm]), lambda: (feed(segs[warm:]), opened.clear()))
    assert tr.open_connections == warm + n
    per = used / n
    assert 0 < per <= TCP_FLOW_BUDGET, per


def test_the_report_lists_at_most_100_connections_and_adds_up_the_others(tmp_path, capsys):
    """4,000 SYN-only connections, 5 of which carry AMQP (the setup exchange, unsettled transfers):
    the report describes those 5 and 95 others, in capture order, and one line adds up the rest; its
    document grows by less than REPORT_CONN_BUDGET per connection it does not list (tracemalloc:
    the peak while building and rendering it, against the same capture's analysis)."""
    import gc
    import tracemalloc

    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    from amqp_dissect.render.report import render_text
    from amqp_dissect.results.report import LISTED_CONNECTIONS, build_report

    from pcapbuild import PcapWriter

    n, amqp_at = 4000, (7, 1500, 2222, 3001, 3999)
    recs = list(B.syn_records(n))
    for k, i in enumerate(amqp_at):  # connection i carries AMQP instead of its SYN
        conv = B.unsettled_conversation(k + 2, client=(f"10.200.0.{k + 1}", 40000), t0=recs[i][0], dt=1e-8)
        recs[i:i + 1] = conv.records
    cap = tmp_path / "many.pcap"
    with open(cap, "wb") as f:
        w = PcapWriter(f, 1)
        for ts, _lt, data in recs:
            w.write(ts, data)
    an = run_analysis(CaptureSource([str(cap)]), rows=False).analyzer
    assert len(an.connections) == n
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        text = render_text(build_report(an))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak / (n - LISTED_CONNECTIONS) <= REPORT_CONN_BUDGET, peak / n
    listed = [line.split()[1] for line in text.splitlines() if line.startswith("Connection ")]
    assert len(listed) == LISTED_CONNECTIONS == 100
    amqp = [cid for cid in listed if cid.startswith("10.200.0.")]
    assert amqp == [f"10.200.0.{k + 1}:{40000}-10.0.0.2:5672" for k in range(5)], amqp  # (capture order)
    all_ids = list(an.connections)
    assert listed == [cid for cid in all_ids if cid in set(listed)]  # capture order
    assert (f"... and {n - 100:,} more connections (see `amqp-dissect connections`): sessions 0, links 0, "
            f"deliveries 0, violations 0, errors 0; {n - 100:,} carried no AMQP frame") in text
    assert f"connections {n:,}, sessions 5, links 5, deliveries {sum(k + 2 for k in range(5))}" in text
    # the CLI says the same, and its JSON document holds the listed connections and the sums
    rc, out, err = _run(capsys, "report", "--format", "json", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    doc = json.loads(out)
    assert [c["connection"] for c in doc["connections"]] == listed
    assert doc["connections_more"]["connections"] == n - 100 and doc["summary"]["connections"] == n


def test_a_report_of_few_connections_lists_them_all(tmp_path, capsys):
    """Up to 100 connections: every one, nothing added up (the report as before)."""
    recs = list(B.syn_records(100))
    cap = tmp_path / "hundred.pcap"
    B._write(str(cap), recs)
    rc, out, err = _run(capsys, "report", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert out.count("\nConnection ") == 100 and "more connections" not in out
    rc, out, err = _run(capsys, "report", "--format", "json", str(cap))
    assert "connections_more" not in json.loads(out)


def test_a_connection_without_bytes_gets_no_decoder():
    recs, d, a = _pipeline(B.syn_records(5))
    for r in recs:
        for ev in d.feed(r):
            a.feed(ev)
    # (pending: the client text of its StreamOpened, the very object the analysis holds, not a copy)
    assert len(d.connections) == 5 and all(type(c) is str for c in d.connections.values())
    assert all(d.connections[cid] is a.connections[cid].client for cid in d.connections)
    assert d._opened == {}  # (nor its event: its decoder's endpoints are those in its id)
    assert all(not c.sessions and c.state.state == ["START", "START"] for c in a.connections.values())
    events = d.finish()
    assert [type(e).__name__ for e in events] == ["StreamClosed"] * 5  # what a fresh decoder says: nothing
    assert not d.connections



def test_a_connection_of_protocol_headers_alone_keeps_no_decoder():
    """Issue 40: a connection whose bytes are its protocol header alone keeps an int (what the header
    said: framing.headers_only) in place of a decoder; one is made again at its next byte, and says at
    the end what a decoder fed the same bytes says (its one-direction loss, nothing of frames).  The
    dissector pickles mid-capture (a checkpoint)."""
    import pickle

    from amqp_dissect.amqp.framing import HEADER_AMQP, AmqpConnection, ProtocolHeader

    recs, d, a = _pipeline(B.header_records(5))
    events = [ev for r in recs for ev in d.feed(r)]
    assert [type(e) for e in events].count(ProtocolHeader) == 5
    assert list(d.connections.values()) == [HEADER_AMQP] * 5  # (small ints: no object per connection)
    again = pickle.loads(pickle.dumps(d))
    assert again.connections == d.connections
    # (the TCP layer's one-direction note and the end; a decoder of a header alone has nothing to say)
    for ends in (d.finish(), again.finish()):
        assert [type(e).__name__ for e in ends] == ["PacketNote", "StreamClosed"] * 5
        assert {e.note.group for e in ends[::2]} == {"one-direction"}
    # the next byte makes the decoder again, past the header: an open frame then decodes as a frame
    recs, d, a = _pipeline(B.header_records(1))
    for r in recs:
        d.feed(r)
    (cid, code), = d.connections.items()
    assert code == HEADER_AMQP
    c = d._materialize(cid, code)
    assert type(c) is AmqpConnection and d.connections[cid] is c and c.dir1 is None
    assert (c.dir0.mode, c.dir0.protocol, len(c.dir0.buf)) == (1, 0, 0)  # (_M_FRAMES, PROTO_AMQP, nothing held)


# samples whose connections send a protocol header alone (then fold to an int) from several client stacks
_FOLDING_SAMPLES = ["plain_send_receive.pcap", "sasl_auth_failure.pcap", "messages/rhea_request_reply.pcap",
                    "messages/azure_cbs.pcap", "twins/rhea_rabbitmq.lossy.pcap.gz", "loss/kernel_loss.pcap"]


def test_connections_of_headers_alone_folded_change_no_output(capsys, monkeypatch):
    """The twin of each sample's output without the fold (the decoder kept, as before issue 40): every
    frame and the report are the same, on captures of proton, rhea and the Azure SDK whose connections
    sent their headers alone (the fold did happen: counted)."""
    from amqp_dissect import dissect

    samples = HERE.parent.parent / "samples"
    folds = []
    real = dissect.headers_only

    def counted(c):
        code = real(c)
        folds.append(code)
        return code

    for name in _FOLDING_SAMPLES:
        outs = []
        for fold in (counted, lambda c: 0):
            monkeypatch.setattr(dissect, "headers_only", fold)
            got = []
            for args in (["frames", "--format", "jsonl"], ["report", "--format", "json"], ["frames", "-V"]):
                rc, out, err = _run(capsys, *args, str(samples / name))
                assert rc in (EXIT_OK, 5) and err == "", (name, args, err)  # (5: a capture with loss)
                got.append(out)
            outs.append(got)
        assert outs[0] == outs[1], name
        assert any(folds), name
        folds.clear()


def test_connections_without_frames_share_one_state_and_a_checkpoint_keeps_it_shared():
    """Issue 40: connections that sent a header alone (tracked by the TCP layer, and let go by it with their
    one-direction note) hold one connection state object, in the states the spec gives a client's header
    (HDR_SENT at the client, HDR_RCVD at the server: part 2, 2.4.1); the analysis pickled mid-capture (a
    checkpoint) gives them back the one object (never a copy shared among them that a step would write for all),
    and goes on to the same rows."""
    import pickle

    from amqp_dissect.model.state import SharedEndpoints

    recs, d, a = _pipeline(B.header_records(40))
    d.tcp.max_connections = 10  # (30 let go with their note, at most 10 tracked)
    half = len(recs) // 2
    for r in recs[:half]:
        for ev in d.feed(r):
            a.feed(ev)
    again = pickle.loads(pickle.dumps(a))
    for an in (a, again):
        conns = list(an.connections.values())
        assert len(conns) == 20 and len({id(c.state) for c in conns}) == 1
        assert type(conns[0].state) is SharedEndpoints and conns[0].state.state == ["HDR_SENT", "HDR_RCVD"]
    assert again.connections[next(iter(a.connections))].state is next(iter(a.connections.values())).state
    rest = [ev for r in recs[half:] for ev in d.feed(r)] + d.finish()
    for an in (a, again):
        for ev in rest:
            an.feed(ev)
        assert len({id(c.state) for c in an.connections.values()}) == 1
    assert again.connection_rows() == a.connection_rows()


def test_connection_states_shared_change_no_output(tmp_path, capsys, monkeypatch):
    """The twin of each capture's output with every connection holding a state of its own (as before issue 40):
    the report and the connections table are the same, on the samples where connections share a state (rhea
    and proton-c, plain and lossy: a connection whose AMQP header step came before its first frame) and on
    300 connections that sent a header alone."""
    from amqp_dissect.model import connection

    samples = HERE.parent.parent / "samples"
    hdr = tmp_path / "hdr.pcap"
    B._write(str(hdr), list(B.header_records(300)))
    shared = []
    real = connection.shared_again

    def counted(ep):
        got = real(ep)
        shared.append(got is not ep)
        return got

    for name in ("twins/rhea_protonc.pcap.gz", "twins/rhea_protonc.lossy.pcap.gz", hdr):
        outs = []
        for share in (counted, lambda ep: ep):
            monkeypatch.setattr(connection, "shared_again", share)
            got = []
            for args in (["report", "--format", "json"], ["connections", "--format", "jsonl"]):
                rc, out, err = _run(capsys, *args, str(samples / name))
                assert rc in (EXIT_OK, 5) and err == "", (name, args, err)  # (5: a capture with loss)
                got.append(out)
            outs.append(got)
        assert outs[0] == outs[1], name
        assert any(shared), name
        shared.clear()


def _unsettled_feed(n: int):
    """A pipeline fed an unsettled-delivery conversation one event at a time: (analyzer, events)."""
    conv = B.unsettled_conversation(n)
    recs, d, a = _pipeline(conv.records[:-3])  # (without the FIN exchange)
    events = []
    for r in recs:
        events.extend(d.feed(r))
    return a, events


def test_an_unsettled_delivery_costs_at_most_100_bytes_in_compact_form():
    """1 connection, 1 link, deliveries never settled: measured between two compactions (the table
    of objects is then the same size), so what grows is the compact store alone."""
    from amqp_dissect.amqp.framing import Frame

    a, events = _unsettled_feed(30000)
    transfers = [i for i, ev in enumerate(events) if type(ev) is Frame and ev.pname == "transfer"]
    state = {"i": 0, "marks": []}

    def table_len():
        for c in a.connections.values():
            return len(c.sessions[0].deliveries[0]) if c.sessions else 0
        return 0

    def run_to_compaction():
        """Feed events until just after the next compaction (the table shrinks)."""
        while state["i"] < len(events):
            before = table_len()
            a.feed(events[state["i"]])
            state["i"] += 1
            if table_len() < before:
                state["marks"].append(sum(1 for t in transfers if t < state["i"]))
                return
        raise AssertionError("no compaction")

    def after():
        for _ in range(8):
            run_to_compaction()

    used = _retained(run_to_compaction, after)
    deliveries = state["marks"][-1] - state["marks"][0]
    assert deliveries > 20000
    per = used / deliveries
    assert 0 < per <= DELIVERY_BUDGET, per
    (c,) = a.connections.values()
    (link,) = c.links
    assert link.compacted > 20000


def _tables(an) -> dict:
    from amqp_dissect.results.report import build_report

    return {
        "deliveries": an.delivery_rows(), "links": an.link_rows(), "errors": an.error_rows(),
        "transactions": an.transaction_rows(), "violations": an.violation_rows(), "report": build_report(an),
    }


def _analyse(cap) -> dict:
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    return _tables(run_analysis(CaptureSource([str(cap)])).analyzer)


def _mixed_capture(path: Path) -> Path:
    """3,000 unsettled transfers, then dispositions: single ids, narrow and wide ranges, settled or
    not, accepted / rejected / released, and a delivery-id used twice."""
    conv = B.TcpConversation()
    conv.handshake()
    for d, data in B.setup_exchange():
        conv.send(d, data)
    for i in range(0, 3000, 50):
        conv.send(0, b"".join(B.transfer_frame(j) for j in range(i, i + 50)), mss=65000)
    acc, rej, rel = b"\x00\x53\x24\x45", b"\x00\x53\x25\x45", b"\x00\x53\x26\x45"
    conv.send(1, _disposition(5, 5))
    conv.send(1, B.frame(B._described(0x15, [B.TRUE, B._uint(10), B._uint(14), B.FALSE, acc])))
    conv.send(1, _disposition(100, 600))
    conv.send(1, B.frame(B._described(0x15, [B.TRUE, B._uint(1000), B._uint(1000), B.TRUE, rej])))
    conv.send(1, B.frame(B._described(0x15, [B.TRUE, B._uint(700), B._uint(800), B.FALSE, rel])))
    conv.send(0, B.transfer_frame(20))  # delivery-id 20 again
    conv.send(1, _disposition(20, 20))
    conv.send(1, _disposition(2500, 2990))
    conv.close()
    return _write(path, conv)


def test_compacted_deliveries_change_no_output(tmp_path, monkeypatch):
    """Whole vs compacted: every table and the report of every sample capture and of a capture of
    many unsettled deliveries and dispositions of every shape are the same when deliveries are
    compacted after 8 (so that the samples compact too) as when they never are (a threshold no
    capture here reaches)."""
    from amqp_dissect.model import deliveries

    caps = sorted((HERE.parent.parent / "samples").glob("*.pcap")) + [_mixed_capture(tmp_path / "mixed.pcap")]
    monkeypatch.setattr(deliveries, "COMPACT_AT", 10**9)
    whole = {cap: _analyse(cap) for cap in caps}
    monkeypatch.setattr(deliveries, "COMPACT_AT", 8)
    monkeypatch.setattr(deliveries, "COMPACT_KEEP", 2)
    compacted = 0
    for cap in caps:
        from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

        an = run_analysis(CaptureSource([str(cap)])).analyzer
        compacted += sum(link.compacted + link.reordered for c in an.connections.values() for link in c.links)
        assert _tables(an) == whole[cap], cap
    assert compacted > 0
    mixed = whole[caps[-1]]
    assert mixed["report"]["summary"]["deliveries"] == 3001


def _csv(write, rows_or_batches) -> bytes:
    import io

    buf = io.BytesIO()
    write(rows_or_batches, "deliveries", "csv", buf)
    return buf.getvalue()


def test_the_streamed_deliveries_csv_reads_compacted_deliveries_from_the_store(tmp_path, monkeypatch):
    """The deliveries csv as the CLI streams it (DeliveryStream.batches: the deliveries still open at
    the end read by column, compacted ones straight from their store's arrays) is byte for byte the
    one of the same capture never compacted (every delivery an object, read attribute by attribute),
    for batches that cut across links, stores and objects, and holds the lines of the row dicts
    (delivery_row; the stream writes folded deliveries first); and the compacted deliveries are read
    without a delivery object apiece."""
    from amqp_dissect.model import deliveries
    from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream, run_analysis
    from amqp_dissect.pipelines.writers.tables import write_batches, write_table
    from amqp_dissect.results import analytics

    many = _write(tmp_path / "unsettled.pcap", B.unsettled_conversation(3000))
    caps = sorted((HERE.parent.parent / "samples").glob("*.pcap")) + [_mixed_capture(tmp_path / "mixed.pcap"), many]
    monkeypatch.setattr(deliveries, "COMPACT_AT", 10**9)
    whole = {cap: _csv(write_batches, DeliveryStream(CaptureSource([str(cap)])).batches(2048)) for cap in caps}
    for cap in caps:
        rows = _csv(write_table, run_analysis(CaptureSource([str(cap)])).analyzer.delivery_rows())
        assert sorted(rows.splitlines()) == sorted(whole[cap].splitlines()), cap
    monkeypatch.setattr(deliveries, "COMPACT_AT", 8)
    monkeypatch.setattr(deliveries, "COMPACT_KEEP", 2)
    made = []
    real = analytics.store_delivery
    monkeypatch.setattr(analytics, "store_delivery", lambda *a: made.append(a) or real(*a))
    for cap in caps:
        for batch_rows in (7, 2048):
            made.clear()
            stream = DeliveryStream(CaptureSource([str(cap)]))
            got = _csv(write_batches, stream.batches(batch_rows))
            assert got == whole[cap], (cap, batch_rows)
            if cap == many:
                compacted = sum(link.compacted for c in stream.analyzer.connections.values() for link in c.links)
                assert compacted > 2900
                assert 0 < len(made) <= compacted // batch_rows + 2, (len(made), compacted)
    assert whole[many].count(b"\n") == 3001


def _syn_capture(path: Path, n: int) -> Path:
    B._write(str(path), B.syn_records(n))
    return path


def test_connections_csv_and_jsonl_stream_their_rows(tmp_path, monkeypatch, capsys):
    """connections --format csv|jsonl hand the writer rows made as it writes them: written 20 at a
    time, the Python memory the writing allocates at its peak is under a quarter of what the list of
    every connection's row holds (tracemalloc, 2,000 SYN-only connections)."""
    import tracemalloc

    from amqp_dissect.pipelines.writers import tables as W
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis

    n = 2000
    cap = _syn_capture(tmp_path / "syn.pcap", n)
    an = run_analysis(CaptureSource([str(cap)]), rows=False).analyzer
    tracemalloc.start()
    try:
        b0 = tracemalloc.get_traced_memory()[0]
        rows = an.connection_rows()
        listed = tracemalloc.get_traced_memory()[0] - b0
        del rows
    finally:
        tracemalloc.stop()
    real = W.write_table
    peaks = []

    def measured(rows, table, fmt, out=None, batch_rows=W.BATCH_ROWS):
        tracemalloc.start()
        try:
            b = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            written = real(rows, table, fmt, out, batch_rows=20)
            peaks.append((table, written, tracemalloc.get_traced_memory()[1] - b))
        finally:
            tracemalloc.stop()
        return written

    monkeypatch.setattr(W, "write_table", measured)
    for fmt in ("csv", "jsonl"):
        dest = tmp_path / f"connections.{fmt}"  # (a file: captured stdout would hold the text in memory)
        rc, out, err = _run(capsys, "connections", "--format", fmt, "--output", str(dest), str(cap))
        assert (rc, out, err) == (EXIT_OK, "", "")
        assert len(dest.read_bytes().splitlines()) == n + (fmt == "csv")
    assert [(t, w) for t, w, _ in peaks] == [("connections", n)] * 2
    assert listed > 1000 * n  # (each row: some 70 cells, lists and dicts among them)
    for _t, _w, peak in peaks:
        assert peak < listed / 4, (peaks, listed)  # (built whole: the list itself, and more)


def test_a_transaction_holds_ids_of_its_deliveries_not_the_deliveries():
    """test_state's declare / enlist / discharge conversation: the transaction's rows name the
    enlisted deliveries, and the transaction holds (link, delivery-id, how), never a delivery."""
    from amqp_dissect.model.delivery import DeliveryRecord

    T = _sibling("test_state")
    T.test_transactions_declare_enlist_discharge()  # (its own checks of the transaction rows)
    s = T.Script()
    s.open_both()
    s.begin_both()
    s.attach_sender(name="work", handle=1)
    s.flow(1, handle=1, dc=0, credit=10)
    s.transfer(handle=1, did=1, state=T.comp("transactional-state", txn_id=b"tx-1"))
    s.disposition(first=1, last=1, state=T.comp("transactional-state", txn_id=b"tx-1", outcome=T.comp("accepted")))
    a = s.done()
    (t,) = a.transactions
    assert [(link.name, did, how) for link, did, how in t.enlisted] == [("work", 1, "transfer")]
    assert not any(isinstance(x, DeliveryRecord) for item in t.enlisted for x in item)
    (row,) = a.transaction_rows()
    assert row["enlisted"] == [{"link": "work", "delivery_id": 1, "how": "transfer"}]


def test_shared_defaults_of_a_connection_refuse_writes_and_pickle():
    import pickle

    from amqp_dissect.model import state

    recs, d, a = _pipeline(B.syn_records(3))
    for r in recs:
        for ev in d.feed(r):
            a.feed(ev)
    c = next(iter(a.connections.values()))
    for bad in (lambda: c.txns.__setitem__("k", 1), lambda: c.chan[0].update(k=1), lambda: c.open.append(1)):
        try:
            bad()
        except (TypeError, AttributeError):
            pass
        else:
            raise AssertionError("a shared default took a write")
    assert state.EMPTY_MAP == {} and state.NONE_PAIR == (None, None)
    again = pickle.loads(pickle.dumps(a))
    assert len(again.connections) == 3


# --------------------------------------------------------------------------- issue 29: unknown handles and channels,
# wide dispositions, floods of one finding (the reproducers are tests/benchmarks/bench_hostile.py's builders, small)
def _analyzer(conv):
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "c.pcap"
        cap.write_bytes(conv.pcap())
        return run_analysis(CaptureSource([str(cap)])).analyzer


def _placeholder_counts(n_handles: int) -> tuple:
    from amqp_dissect.model.state import UNKNOWN_LINKS_MAX

    an = _analyzer(B.unknown_handles_conversation(n_handles))
    (c,) = an.connections.values()
    (s,) = c.sessions
    rows = an.violation_rows()
    kinds = {}
    for r in rows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    assert sum(link.n_deliveries for link in c.links) == n_handles  # every transfer still counted
    over = c.links[-1]
    assert over.handle == [None, None] and "handle" in over.unknown
    assert over.n_deliveries == n_handles - UNKNOWN_LINKS_MAX
    assert [link.handle[0] for link in c.links[:-1]] == list(range(1, UNKNOWN_LINKS_MAX + 1))
    assert any("beyond the cap" in u for u in s.unknown)
    return len(c.links), kinds.get("unknown-handle", 0), len(rows)


def test_unknown_handles_make_at_most_the_cap_of_links_and_rows():
    """Transfers on handles never attached: one placeholder link each up to UNKNOWN_LINKS_MAX per
    connection, then one overflow link (no handle) for all the others, made with a note; the
    "unknown-handle" rows past the cap are one finding, listed REPEAT_KEEP times and then added up in
    one row.  The links and rows are the same for 300 and for 1,500 handles past the cap."""
    from amqp_dissect.model.state import REPEAT_KEEP, UNKNOWN_LINKS_MAX

    small = _placeholder_counts(UNKNOWN_LINKS_MAX + 300)
    large = _placeholder_counts(UNKNOWN_LINKS_MAX + 1500)
    assert small == large
    links, unknown_handle, _rows = large
    assert links == UNKNOWN_LINKS_MAX + 1
    # one per placeholder, the cap's note, REPEAT_KEEP of the others, one adding up the rest
    assert unknown_handle == UNKNOWN_LINKS_MAX + 1 + REPEAT_KEEP + 1


def test_partial_deliveries_on_unknown_handles_keep_a_bounded_number_of_objects(monkeypatch):
    """The issue's 100,000 transfers with more=true on 100,000 handles: each a delivery that never
    ends, on its own placeholder link up to the cap, then all on the overflow link (a new delivery-id
    ends the one before: compactable).  Counted: delivery objects retained (the links' live ones) stay
    under the cap plus what the compaction keeps, whatever the number of handles."""
    from amqp_dissect.model import deliveries, links

    monkeypatch.setattr(links, "UNKNOWN_LINKS_MAX", 64)  # (read by the room that uses it)
    monkeypatch.setattr(deliveries, "COMPACT_AT", 256)
    monkeypatch.setattr(deliveries, "COMPACT_KEEP", 64)
    kept = []
    for n in (2000, 6000):
        an = _analyzer(B.unknown_handles_conversation(n, more=True))
        (c,) = an.connections.values()
        assert len(c.links) == 64 + 1
        assert sum(link.n_deliveries for link in c.links) == n
        live = sum(len(link.live) for link in c.links)
        compacted = sum(link.compacted for link in c.links)
        assert live + compacted == n
        kept.append(live)
    assert all(0 < k <= 64 + 2 * 256 for k in kept), kept


def test_unknown_channels_make_at_most_the_cap_of_sessions():
    """Transfers on channels never begun: a placeholder session (and link) each up to
    UNKNOWN_SESSIONS_MAX per connection, then one overflow session, with one overflow link."""
    from amqp_dissect.model.state import REPEAT_KEEP, UNKNOWN_SESSIONS_MAX

    got = []
    for extra in (300, 900):
        n = UNKNOWN_SESSIONS_MAX + extra
        an = _analyzer(B.unknown_channels_conversation(n))
        (c,) = an.connections.values()
        rows = an.violation_rows()
        assert sum(link.n_deliveries for link in c.links) == n
        over = c.sessions[-1]
        assert over.channel == [None, None] and "channel" in over.unknown
        assert sum(link.n_deliveries for link in over.links) == extra
        assert any("beyond the cap" in u for u in c.unknown)
        unknown_channel = sum(r["kind"] == "unknown-channel" for r in rows)
        got.append((len(c.sessions), len(c.links), unknown_channel, len(rows)))
    assert got[0] == got[1], got
    sessions, links, unknown_channel, _rows = got[0]
    assert sessions == 1 + UNKNOWN_SESSIONS_MAX + 1 and links == UNKNOWN_SESSIONS_MAX + 1
    assert unknown_channel == UNKNOWN_SESSIONS_MAX + 1 + REPEAT_KEEP + 1


def test_repeated_wide_dispositions_cost_at_most_the_sessions_budget():
    """The issue's 18,000 unsettled deliveries and 19,000 dispositions of 0..2**31-1 (not settling),
    small: 2,000 and 2,100.  Counted: the lookups and entries iterated of the session's delivery
    tables over all dispositions stay within the budget (DISPOSITION_TOUCH_BASE +
    DISPOSITION_TOUCHES_PER_DELIVERY per delivery, each touch a few operations) plus a few per frame;
    the ranges past the budget are "budget" rows (one finding: added up past REPEAT_KEEP) and the
    session says that dispositions were not applied.  The deliveries' outcomes are those of the first
    ranges (applied)."""
    from amqp_dissect.model.state import DISPOSITION_TOUCH_BASE, DISPOSITION_TOUCHES_PER_DELIVERY, REPEAT_KEEP

    n, wide = 2000, 2100
    conv = B.wide_dispositions_conversation(n, wide)
    ops = []
    tracker = None
    for tracker, ev in _track(conv.records):
        if getattr(ev, "pname", None) == "disposition":
            ops.append(_CountingDict.ops)
        _CountingDict.ops = 0
    assert len(ops) == wide
    budget = DISPOSITION_TOUCH_BASE + DISPOSITION_TOUCHES_PER_DELIVERY * n
    applied = budget // n
    assert sum(ops) <= 3 * budget + 8 * wide, sum(ops)
    assert max(ops[applied + 1:]) <= 4, max(ops[applied + 1:])  # past the budget: bisections only
    (c,) = tracker.connections.values()
    (s,) = c.sessions
    (link,) = s.links
    assert any("budget" in u for u in s.unknown)
    budget_rows = [v for v in tracker.violations if v["kind"] == "budget"]
    assert len(budget_rows) == REPEAT_KEEP + 1
    skipped = wide - applied
    assert f"[{skipped - REPEAT_KEEP:,} more like it" in budget_rows[-1]["message"]
    dl = list(link.live.values())
    assert len(dl) + link.compacted == n and link.compacted == 0  # (a disposition makes them objects again)
    assert all(x.outcome == "accepted" and x.dispositions[1] == applied for x in dl)


def test_a_flood_of_one_violation_is_added_up_past_the_bound(tmp_path, capsys):
    """The issue's empty frames before any open, 3,000: one "state" violation each, listed
    REPEAT_KEEP times, then one row for the rest: its packet the first of them, its message the count
    and the last packet.  The same with two processes (-j 2)."""
    from amqp_dissect.model.state import REPEAT_KEEP

    n = 3000
    conv = B.preopen_empty_conversation(n, per_segment=500)
    cap = _write(tmp_path / "empty.pcap", conv)
    rows = _violations(capsys, cap)
    assert len(rows) == REPEAT_KEEP + 1
    assert all(r["kind"] == "state" and r["message"].startswith("empty frame from the client") for r in rows)
    assert len({r["message"] for r in rows[:-1]}) == 1
    first_pkt = rows[REPEAT_KEEP - 1]["packet"]
    last = rows[-1]
    assert last["packet"] >= first_pkt
    last_packet = len(conv.records) - 3  # (the segment before the FIN exchange)
    assert last["message"].endswith(f"[{n - REPEAT_KEEP:,} more like it after the first {REPEAT_KEEP} "
                                    f"(this packet to packet {last_packet}), added up in this row]"), last["message"]
    rc, out, err = _run(capsys, "violations", "--format", "jsonl", "-j", "2", str(cap))
    assert (rc, err) == (EXIT_OK, "")
    assert [json.loads(x) for x in out.splitlines()] == rows


def test_distinct_findings_are_not_added_up(tmp_path, capsys):
    """Up to REPEAT_KEEP of a finding, and distinct findings (another message), are rows each."""
    from amqp_dissect.model.state import REPEAT_KEEP

    cap = _write(tmp_path / "few.pcap", B.preopen_empty_conversation(REPEAT_KEEP))
    rows = _violations(capsys, cap)
    assert len(rows) == REPEAT_KEEP and "more like it" not in "".join(r["message"] for r in rows)
    cap = _write(tmp_path / "handles.pcap", B.unknown_handles_conversation(300))
    rows = _violations(capsys, cap)
    assert sum(r["kind"] == "unknown-handle" for r in rows) == 300


def test_the_fuzzers_state_scale_inputs_pass_the_oracle():
    """fuzzgen's "state-scale" kind (unknown handles and channels at scale, wide disposition ranges,
    floods before open): a few inputs of each shape through every command's path, no failure."""
    fuzzgen = _sibling("fuzzgen")

    import tempfile

    checked = 0
    for i in range(40):
        r = fuzzgen.RandomSource(f"29:{i}")
        kind, data = fuzzgen.generate(r, "state-scale")
        assert kind == "state-scale" and "state-scale" in fuzzgen.KINDS
        if len(data) > 40_000:
            continue  # (the large ones: fuzz_run.py's business)
        checked += 1
        with tempfile.TemporaryDirectory() as tmp:
            cap = Path(tmp) / "in.pcap"
            cap.write_bytes(data)
            assert fuzzgen.check(str(cap), ("jsonl",)) == [], i
    assert checked >= 10


def test_the_cost_check_flags_cpu_per_byte_over_the_bound():
    """fuzz_run's cost check: a path over the bound times its reference per byte, above the floor."""
    fuzz_run = _sibling("fuzz_run")

    ref = {"report": 1e-6, "frames": 2e-6}  # us per byte
    assert fuzz_run.cost_problem({"frames": 0.3, "report": 0.5}, 10_000, ref, 20.0).startswith(
        "cost: report: 0.50 s CPU for 10,000 bytes, 50.00 us")
    assert fuzz_run.cost_problem({"frames": 0.5, "report": 0.5}, 100_000, ref, 20.0) is None  # 5 us/B: under
    assert fuzz_run.cost_problem({"report": 0.1}, 1_000, ref, 20.0) is None  # under the floor
    assert fuzz_run.cost_problem({"report": 5.0}, 1_000, ref, 0) is None  # off


def test_the_checker_times_each_path():
    fuzzgen = _sibling("fuzzgen")

    checker = fuzzgen.Checker(("jsonl",))
    assert checker.check(str(HERE.parent.parent / "samples" / "outcomes.pcap")) == []
    assert set(checker.cpu) == {"frames", "frames decode", "frames -V", "frames --format jsonl", "report",
                                "report --format html", "deliveries"}
    assert all(x >= 0 for x in checker.cpu.values())


class _CountingConns(dict):
    """An Analyzer's connections that count the keys iterated (from either end)."""

    steps = 0

    def __iter__(self):
        for k in dict.__iter__(self):
            _CountingConns.steps += 1
            yield k

    def __reversed__(self):
        for k in dict.__reversed__(self):
            _CountingConns.steps += 1
            yield k


def test_a_worker_of_j_keys_each_new_connection_once():
    """-j N on many SYN-only connections (the issue's 200,000: 17.4 s with -j 2 against 2.6 s in one
    process): a worker keys the connections its Analyzer made since the last event by reading them
    from the end of the table, not by walking it from the start at every event.  Counted: keys
    iterated over 3,000 connections made one event at a time."""
    from types import SimpleNamespace

    from amqp_dissect.pipelines.runs.parallel import FlowWorker

    an = SimpleNamespace(stalls=[], violations=[], frame_errors=[], transactions=[], internal_errors=[],
                         connections=_CountingConns(), fold_lag=0)
    w = FlowWorker(0, 2, SimpleNamespace(dissector=None), an)
    n = 3000
    _CountingConns.steps = 0
    for i in range(n):
        w.cur = (i, 1, 0)
        an.connections[f"c{i}"] = SimpleNamespace(seq=None)
        w.key_items()
    assert _CountingConns.steps <= 2 * n, _CountingConns.steps
    assert list(w.k_conn) == [f"c{i}" for i in range(n)]
    assert [k[0] for k in w.k_conn.values()] == list(range(n))  # each keyed at the event that made it
    assert len({c.seq for c in an.connections.values()}) == n


def test_past_the_listed_bound_differing_findings_are_added_up_per_kind(monkeypatch):
    """Findings that all differ (300 unknown handles, each its own message) once VIOLATIONS_LISTED
    distinct ones are listed: one row per connection, kind, side and origin adds up the rest, and
    the tracker keeps no more per finding (counted: its table of findings and its rows)."""
    from amqp_dissect.model import findings

    monkeypatch.setattr(findings, "VIOLATIONS_LISTED", 40)  # (read by the room that uses it)
    n = 300
    an = _analyzer(B.unknown_handles_conversation(n))
    rows = an.violation_rows()
    assert len(rows) == 40 + 1
    assert len(an._repeats) == 40 + 1
    last = rows[-1]
    assert last["kind"] == "unknown-handle" and last["side"] == "client"
    assert last["message"].startswith(f"{n - 40:,} unknown-handle findings from this packet to packet ")
    assert last["message"].endswith(f"the first of them: transfer from the client on handle 41: no attach from "
                                    f"the client with that handle")
    assert [r["handle"] for r in rows[:40]] == list(range(1, 41))


class _CountingList(list):
    steps = 0

    def __iter__(self):
        for x in list.__iter__(self):
            _CountingList.steps += 1
            yield x


def test_unknown_handles_of_a_capture_joined_midway_do_not_walk_the_links_past_the_cap(monkeypatch):
    """A connection whose start the capture missed (no SYN): a handle without attach may be the
    answer to a peer's attach whose reply was lost, found by a walk of the session's links; past
    the cap the frame goes to the overflow link without that walk.  Counted: links visited over
    2,000 transfers on new handles, the cap 20."""
    import io

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.model import links
    from amqp_dissect.model.tracker import StateTracker

    from pcapbuild import write_pcap

    monkeypatch.setattr(links, "UNKNOWN_LINKS_MAX", 20)  # (read by the room that uses it)
    conv = B.unknown_handles_conversation(2000)
    records = conv.records[5:]  # (without the handshake and the protocol headers)
    d, t = Dissector(), StateTracker()
    events = []
    for rec in open_capture(io.BytesIO(write_pcap(records))):
        events.extend(d.feed(rec))
    events.extend(d.finish())
    swapped = False
    _CountingList.steps = 0
    for ev in events:
        t.feed(ev)
        if not swapped and t.connections:
            c = next(iter(t.connections.values()))
            if getattr(c, "sessions", None):
                c.sessions[0].links = _CountingList(c.sessions[0].links)
                swapped = True
    t.finish()
    (c,) = t.connections.values()
    assert not c.known_start and len(c.links) == 20 + 1
    assert sum(link.n_deliveries for link in c.links) == 2000
    assert _CountingList.steps <= 20 * 21, _CountingList.steps


def test_rows_that_add_up_findings_count_them_everywhere():
    """A row that adds up a flood stands for its count: the violations table's ``count`` column,
    the connection's and the report's violation counts all say how many findings there were, not
    how many rows (1,500 transfers on handles never attached, each one finding, past the cap)."""
    from amqp_dissect.model.state import UNKNOWN_LINKS_MAX
    from amqp_dissect.results.report import build_report

    n = UNKNOWN_LINKS_MAX + 1500
    an = _analyzer(B.unknown_handles_conversation(n))
    rows = an.violation_rows()
    findings = [r for r in rows if r["kind"] == "unknown-handle"]
    from amqp_dissect.model.state import REPEAT_KEEP

    assert len(findings) == UNKNOWN_LINKS_MAX + 1 + REPEAT_KEEP + 1  # past the cap: listed, then added up
    # one finding per transfer on a handle never attached (the first past the cap is the overflow
    # link's note)
    assert sum(r["count"] for r in findings) == n
    total = sum(r["count"] for r in rows)
    (row,) = list(an.connection_rows())
    assert row["violations"] == total
    rep = build_report(an)
    assert rep["summary"]["violations"] == total
