"""Issue 8, goal 2: internal errors are never hidden.  A bug met on some packets or frames does not
stop the run: everything is written, then one line on stderr and exit 1.

The captures are built here with tests/support/pcapbuild.py (dpkt) and frames encoded by proton's codec
(tests/support/fuzzgen.py); the bug is injected, since no input is known to cause one (the fuzz suite
looks for them).
"""

from __future__ import annotations

import json

import fuzzgen
import pcapbuild
from amqp_dissect.cli.main import EXIT_INTERNAL, main
from amqp_dissect.render import frames as printers  # (cli.main imports the printers when a run needs them)


def _capture(tmp_path, transfers: int = 3):
    """Headers, opens, begin, attach both ways, credit, ``transfers`` settled-by-receiver
    deliveries, close: a capture whose frames and deliveries the output must all show."""
    f = fuzzgen
    streams = [(0, f.HEADER_AMQP), (1, f.HEADER_AMQP)]
    for d in (0, 1):
        streams.append((d, f.frame_bytes(f.encode(f.performative("open", [("string", f"c{d}", 0)])))))
    streams.append((0, f.frame_bytes(f.encode(f.performative("begin", [None, ("uint", 0, 0), ("uint", 100, 0),
                                                                       ("uint", 100, 0)])))))
    streams.append((1, f.frame_bytes(f.encode(f.performative("begin", [("ushort", 0, 0), ("uint", 0, 0),
                                                                       ("uint", 100, 0), ("uint", 100, 0)])))))
    for d in (0, 1):
        streams.append((d, f.frame_bytes(f.encode(f.performative("attach", [
            ("string", "q", 0), ("uint", 0, 0), ("boolean", d == 1, 0), None, None,
            f.performative("source", [("string", "q", 0)]), f.performative("target", [("string", "q", 0)]),
            None, None, ("uint", 0, 0) if d == 0 else None])))))
    streams.append((1, f.frame_bytes(f.encode(f.performative("flow", [
        ("uint", 0, 0), ("uint", 100, 0), ("uint", 0, 0), ("uint", 100, 0), ("uint", 0, 0), ("uint", 0, 0),
        ("uint", 100, 0)])))))
    value = f.encode(("described", (("ulong", 0x77, 0), ("string", "hello", 0)), 0))
    for i in range(transfers):
        streams.append((0, f.frame_bytes(f.encode(f.performative("transfer", [
            ("uint", 0, 0), ("uint", i, 0), ("binary", b"t%d" % i, 0), ("uint", 0, 0)])) + value)))
        streams.append((1, f.frame_bytes(f.encode(f.performative("disposition", [
            ("boolean", True, 0), ("uint", i, 0), None, ("boolean", True, 0), f.performative("accepted", [])])))))
    for d in (0, 1):
        streams.append((d, f.frame_bytes(f.encode(f.performative("close", [])))))
    conv = pcapbuild.TcpConversation.from_exchange(streams)
    path = tmp_path / "gen.pcap"
    path.write_bytes(conv.pcap())
    return path, len(conv.records)


def test_a_packet_frames_v_cannot_describe_is_shown_the_rest_written_and_the_run_exits_1(tmp_path, capsys,
                                                                                           monkeypatch):
    """frames -V used to print "(could not describe ...)" and exit 0: a hidden bug."""
    from amqp_dissect.events import CaptureRecord

    path, packets = _capture(tmp_path)

    class Broken(printers.DetailLines):
        def add(self, out, record, ev):
            if record is not None and record.index == 4:  # the client's protocol header packet
                record = CaptureRecord(record.index, record.ts, record.linktype, None, record.orig_len)
            return super().add(out, record, ev)

    monkeypatch.setattr(printers, "DetailLines", Broken)
    rc = main(["frames", "-V", str(path)])
    out, err = capsys.readouterr()
    assert rc == EXIT_INTERNAL
    assert err.count("\n") == 1 and "internal error: describing packet 4: TypeError" in err
    assert "Frame 4: (could not describe: TypeError" in out
    # every other packet that carries AMQP is still described, and every frame shown
    assert out.count("Advanced Message Queuing Protocol") >= 2 + 2 + 2 + 2 + 1 + 6 + 2
    assert out.count("Performative: close") == 2  # the last frames too
    monkeypatch.undo()
    rc = main(["frames", "-V", str(path)])
    out, err = capsys.readouterr()
    assert (rc, err) == (0, "") and "could not describe" not in out


def test_a_bug_in_the_analysis_still_writes_every_table_row_then_exits_1(tmp_path, capsys, monkeypatch):
    """Tables (not only the report): the deliveries and the violations (with the internal-error rows)
    are all written, then one line and exit 1."""
    from amqp_dissect.model import tracker

    path, _ = _capture(tmp_path, transfers=5)
    rc = main(["deliveries", "--format", "jsonl", str(path)])
    out, err = capsys.readouterr()
    assert (rc, err) == (0, "")
    clean = [json.loads(x) for x in out.splitlines()]
    assert len(clean) == 5 and {d["outcome"] for d in clean} == {"accepted"}

    def broken(self, c, d, f, p):
        raise RuntimeError("boom")

    monkeypatch.setitem(tracker._HANDLERS, "flow", broken)
    rc = main(["deliveries", "--format", "jsonl", str(path)])
    out, err = capsys.readouterr()
    assert rc == EXIT_INTERNAL
    assert err.count("\n") == 1 and "internal error" in err and "boom" in err
    assert [json.loads(x)["delivery_id"] for x in out.splitlines()] == [d["delivery_id"] for d in clean]
    rc = main(["violations", "--format", "jsonl", str(path)])
    out, err = capsys.readouterr()
    assert rc == EXIT_INTERNAL and err.count("\n") == 1
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["kind"] for r in rows if r["kind"] == "internal-error"] == ["internal-error"]
    assert "boom" in next(r["message"] for r in rows if r["kind"] == "internal-error")


def test_a_coordinator_transfer_after_its_delivery_completed_is_no_internal_error(tmp_path):
    """fuzz_run.py seed 2027 input 211,122 (a damaged coordinator conversation): a transfer frame of a
    delivery already complete on a coordinator link made the analyzer join no payload
    (``TypeError: can only join an iterable``, exit 1).  The capture is regenerated from its seed."""
    import fuzzgen

    r = fuzzgen.RandomSource("2027:211122")
    kind, data = fuzzgen.generate(r, r.choice(fuzzgen.FIRST_KINDS))  # (a default run's draw of its time)
    assert kind == "mutated-conversation"
    cap = tmp_path / "in.pcap"
    cap.write_bytes(data)
    assert fuzzgen.check(str(cap), ("jsonl",)) == []
