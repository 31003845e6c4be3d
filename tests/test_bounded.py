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
