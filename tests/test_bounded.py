"""Bounded cost under hostile input (issue 8, goal 3), asserted at small scale.

The captures are the ones tests/bench_hostile.py builds at hostile scale (frames encoded by hand
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
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
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
    from amqp_dissect.pipelines.local import CaptureSource, run_analysis
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
    for cap in sorted((HERE.parent / "samples").glob("*.pcap")):
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
    from amqp_dissect.model.state import StateTracker
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
            s.deliveries = (_CountingDict(), _CountingDict())
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
    assert s.did_order == [None, None]
    assert link.stats.deliveries == n and link.stats.outcomes["accepted"] == n
    assert not tracker._settling  # (settled by the receiver only: folded at the latest at the end)
    assert tracker.violations == [] or all(v["kind"] == "unknown-delivery" for v in tracker.violations)
