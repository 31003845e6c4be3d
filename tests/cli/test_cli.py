"""The amqp-dissect CLI: output formats, and bad input -> one line on stderr + exit code."""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys


from amqp_dissect.cli.main import EXIT_DAMAGED, EXIT_FORMAT, EXIT_OK, EXIT_OPEN, EXIT_USAGE, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "plain_send_receive.pcap")
PERFORMATIVES = {
    "open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close",
    "sasl-mechanisms", "sasl-init", "sasl-challenge", "sasl-response", "sasl-outcome",
}


def run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def jsonl(capsys, path, *extra):
    rc, out, err = run(capsys, "frames", str(path), "--format", "jsonl", *extra)
    return rc, [json.loads(line) for line in out.splitlines()], err


def test_jsonl_objects_have_the_documented_keys(capsys):
    rc, objs, err = jsonl(capsys, SAMPLE)
    assert rc == EXIT_OK and err == ""
    frames = [o for o in objs if o["type"] in ("amqp", "sasl", "heartbeat")]
    headers = [o for o in objs if o["type"] == "header"]
    assert len(headers) == 4  # SASL + AMQP headers, each direction
    assert frames
    for o in objs:
        for key in ("packet", "time", "src", "dst", "connection", "channel", "type", "performative", "fields"):
            assert key in o
        assert isinstance(o["packet"], int) and o["packet"] >= 1
        assert ":" in o["src"] and ":" in o["dst"]
    for f in frames:
        if f["type"] != "heartbeat":
            assert f["performative"] in PERFORMATIVES
        assert (f["type"] == "sasl") == f["performative"].startswith("sasl")
    attach = next(f for f in frames if f["performative"] == "attach")
    assert set(attach["fields"]) >= {"name", "handle", "role"}
    assert attach["fields"]["role"] in ("sender", "receiver")
    transfers = [f for f in frames if f["performative"] == "transfer" and "message" in f]
    assert transfers and all(t["message_size"] > 0 for t in transfers)
    assert len({o["connection"] for o in objs}) == 1


def test_packet_numbers_agree_with_tshark_numbering(capsys):
    """'packet' is the 1-based index in the capture (checked against dpkt's own reading)."""
    import dpkt

    with open(SAMPLE, "rb") as f:
        pkts = list(dpkt.pcap.Reader(f))
    rc, objs, _ = jsonl(capsys, SAMPLE)
    for o in objs:
        ts, buf = pkts[o["packet"] - 1]
        assert abs(float(ts) - o["time"]) < 1e-6
        eth = dpkt.ethernet.Ethernet(buf)
        assert len(eth.data.data.data) > 0  # the packet carries TCP payload


def test_text_and_verbose_outputs(capsys):
    rc, out, err = run(capsys, "frames", SAMPLE)
    assert rc == EXIT_OK
    lines = out.splitlines()
    assert any(" attach(" in l and "role=sender" in l for l in lines)
    assert any("sasl-init(mechanism='PLAIN')" in l for l in lines)
    rc, out, err = run(capsys, "frames", SAMPLE, "-V")
    assert rc == EXIT_OK
    assert "Internet Protocol Version 4, Src: 127.0.0.1" in out
    assert "Transmission Control Protocol, Src Port:" in out
    assert "Performative: attach (descriptor 0x00000000:0x00000012)" in out
    assert "[default]" in out
    assert "container-id (string):" in out


def test_gzip_capture_gives_the_same_frames(tmp_path, capsys):
    gz = tmp_path / "s.pcap.gz"
    gz.write_bytes(gzip.compress(open(SAMPLE, "rb").read()))
    a = jsonl(capsys, SAMPLE)[1]
    b = jsonl(capsys, gz)[1]
    assert a == b


def test_missing_file(capsys):
    rc, out, err = run(capsys, "frames", "/nonexistent/x.pcap")
    assert rc == EXIT_OPEN
    assert err.count("\n") == 1 and "no such file" in err


def test_directory(capsys, tmp_path):
    rc, out, err = run(capsys, "frames", str(tmp_path))
    assert rc == EXIT_OPEN and err.count("\n") == 1


def test_not_a_capture(capsys, tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes(b"this is not a capture file at all\n" * 10)
    rc, out, err = run(capsys, "frames", str(p))
    assert rc == EXIT_FORMAT and err.count("\n") == 1 and "not a pcap" in err


def test_truncated_last_record_reports_what_was_readable(capsys, tmp_path):
    data = open(SAMPLE, "rb").read()
    p = tmp_path / "t.pcap"
    p.write_bytes(data[:-30])
    rc, objs, err = jsonl(capsys, p)
    full = jsonl(capsys, SAMPLE)[1]
    assert rc == EXIT_DAMAGED and err.count("\n") == 1 and "truncated" in err
    assert len(objs) >= len(full) - 3
    assert objs[:10] == full[:10]


def test_unsupported_link_type(capsys, tmp_path):
    data = bytearray(open(SAMPLE, "rb").read())
    struct.pack_into("<I", data, 20, 147)  # LINKTYPE_USER0
    p = tmp_path / "u.pcap"
    p.write_bytes(bytes(data))
    rc, out, err = run(capsys, "frames", str(p))
    assert rc == EXIT_FORMAT and err.count("\n") == 1 and "link type 147" in err


def test_garbage_inside_a_stream_is_reported_and_survived(capsys, tmp_path):
    """Overwrite the middle of one TCP payload: notes appear, later frames still decode."""
    import dpkt

    with open(SAMPLE, "rb") as f:
        pkts = list(dpkt.pcap.Reader(f))
    out = tmp_path / "g.pcap"
    with open(out, "wb") as f:
        w = dpkt.pcap.Writer(f)
        hit = None
        for i, (ts, buf) in enumerate(pkts):
            eth = dpkt.ethernet.Ethernet(buf)
            tcp = eth.data.data
            if hit is None and len(tcp.data) > 60 and i > 12:
                tcp.data = tcp.data[:4] + b"\xee" * 40 + tcp.data[44:]
                hit = i + 1
                eth.data.sum = 0
                tcp.sum = 0
                buf = bytes(eth)
            w.writepkt(buf, ts)
    rc, objs, err = jsonl(capsys, out)
    assert rc == EXIT_OK and err == ""
    full = jsonl(capsys, SAMPLE)[1]
    noted = [o for o in objs if o.get("notes") and any(n["severity"] in ("warn", "error") for n in o["notes"])]
    assert noted, "the damage must be reported"
    last_full = [o for o in full if o["type"] != "note"][-1]
    last = [o for o in objs if o["type"] != "note"][-1]
    assert last["packet"] == last_full["packet"] and last["performative"] == last_full["performative"]


def test_usage_error(capsys):
    rc, out, err = run(capsys, "frames")
    assert rc == EXIT_USAGE
    rc, out, err = run(capsys, "nosuchcommand")
    assert rc == EXIT_USAGE


def test_console_script_never_prints_a_traceback(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\x00" * 10)  # pcap magic, header cut short
    r = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "frames", str(p)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode in (EXIT_FORMAT, EXIT_DAMAGED)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def _moved_to_port_15672(pkts, path) -> None:
    import dpkt

    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for ts, buf in pkts:
            eth = dpkt.ethernet.Ethernet(buf)
            tcp = eth.data.data
            if tcp.sport == 5672:
                tcp.sport = 15672
            if tcp.dport == 5672:
                tcp.dport = 15672
            tcp.sum = 0
            w.writepkt(bytes(eth), ts)


def test_port_option_decodes_a_non_standard_port(capsys, tmp_path):
    """AMQP on port 15672 mid-stream (no protocol header seen): a run of performatives whose sizes
    chain is found to be AMQP without --port (issue 39), the same frames --port gives; a stream too
    short to tell (the close of each side alone) is decoded only with --port."""
    import dpkt

    with open(SAMPLE, "rb") as f:
        pkts = list(dpkt.pcap.Reader(f))
    last_header = max(
        i for i, (ts, buf) in enumerate(pkts) if b"AMQP\x00\x01\x00\x00" in dpkt.ethernet.Ethernet(buf).data.data.data
    )
    joined = tmp_path / "p.pcap"
    _moved_to_port_15672(pkts[last_header + 1 :], joined)  # join after the protocol headers
    rc, given, _ = jsonl(capsys, joined, "--port", "15672")
    assert rc == EXIT_OK
    assert [o["performative"] for o in given if o["type"] == "amqp"][-1] == "close"
    rc, found, _ = jsonl(capsys, joined)
    assert rc == EXIT_OK and found == given

    closes = [i for i, (ts, buf) in enumerate(pkts) if b"\x00\x53\x18" in dpkt.ethernet.Ethernet(buf).data.data.data]
    assert len(closes) == 2  # the client's close and the server's
    short = tmp_path / "close.pcap"
    _moved_to_port_15672(pkts[closes[0]:], short)
    rc, objs, _ = jsonl(capsys, short)
    assert rc == EXIT_OK and [o for o in objs if o["type"] == "amqp"] == []
    rc, objs, _ = jsonl(capsys, short, "--port", "15672")
    assert rc == EXIT_OK and [o["performative"] for o in objs if o["type"] == "amqp"] == ["close", "close"]


def test_a_bug_in_the_analysis_is_reported_after_the_output_with_exit_1(monkeypatch, capsys):
    # a bug met on some frames: the run goes on, writes the whole report, then says so and exits 1
    from amqp_dissect.cli.main import EXIT_INTERNAL, main
    from amqp_dissect.model import tracker

    calls = []

    def broken(self, c, d, f, p):
        calls.append(f.packet)
        raise RuntimeError("boom")

    monkeypatch.setitem(tracker._HANDLERS, "flow", broken)
    rc = main(["report", os.path.join(ROOT, "samples", "credit_one.pcap")])
    out, err = capsys.readouterr()
    assert calls, "the flow handler was never reached"
    assert rc == EXIT_INTERNAL
    assert "AMQP 1.0 capture report" in out and "deliveries 10" in out
    assert err.count("\n") == 1 and "internal error" in err and "boom" in err


# --------------------------------------------------------------------------- options declared once


def _click_params():
    """{command: {option name: click parameter}} of the amqp-dissect app."""
    import typer

    from amqp_dissect.cli.typer_app import app

    group = typer.main.get_command(app)
    return {name: {p.name: p for p in cmd.params} for name, cmd in group.commands.items()}


def test_a_shared_option_means_the_same_in_every_command():
    """The capture options (cli/options.py) are declared once: in every command that takes one,
    its names, limits, default and help agree with the same option of ``report`` (compare's and
    archive's --port / --keylog say more in their help: what tshark and the executors get)."""
    params = _click_params()
    shared = ("captures", "read", "count", "port", "keylog", "iface", "autostop", "write", "jobs")
    checked = 0
    for name, ps in params.items():
        for opt in shared:
            if opt not in ps or name == "report":
                continue
            mine, ref = ps[opt], params["report"][opt]
            assert (sorted(mine.opts), mine.multiple, mine.default, getattr(mine.type, "min", None),
                    getattr(mine.type, "max", None)) == (sorted(ref.opts), ref.multiple, ref.default,
                                                         getattr(ref.type, "min", None), getattr(ref.type, "max", None)), (name, opt)
            if name not in ("compare", "archive"):
                assert getattr(mine, "help", None) == getattr(ref, "help", None), (name, opt)
            checked += 1
    # frames (all but -j), the eight tables and requests, messages (all but -j), archive (--port,
    # --keylog), compare (--port, --keylog)
    assert checked == 8 + 9 * 9 + 8 + 2 + 2
    # one letter, one meaning: -f the capture filter, -T the output format, in every command (tshark's)
    for name in ("frames", "report", "links", "deliveries"):
        assert params[name]["bpf"].opts == ["-f", "--capture-filter"], name
        assert sorted(params[name]["fmt"].opts) == ["--format", "-T"], name


# --------------------------------------------------------------------------- the key log, made once


def test_a_failing_j_run_is_made_again_with_its_key_log(tmp_path, monkeypatch, capsys):
    """-j 2 whose worker fails: the one-process run that replaces it opens the key log again and
    decrypts as a run without -j does (the oracle), its damaged lines told once per opening."""
    import tlscap
    from amqp_dissect.pipelines.runs import parallel
    from test_tls import _need_tools

    _need_tools()  # (tcpdump as root: skipped without, a failure under CI)
    pcap, keys = tmp_path / "tls.pcap", tmp_path / "keys"
    tlscap.make_capture(os.path.join(ROOT, "samples", "outcomes.pcap"), str(pcap), str(keys), tls="1.3")
    damaged = tmp_path / "damaged-keys"
    damaged.write_text(keys.read_text() + "not a key log line\n")
    args = ["deliveries", "-T", "csv", "--keylog", str(damaged), str(pcap)]
    rc1, one, err1 = run(capsys, *args)
    assert rc1 == EXIT_OK and one.count("\n") > 10  # (decrypted: the deliveries are there)
    assert err1.count("key log line") == 1 and f"line {keys.read_text().count(chr(10)) + 1}:" in err1
    real = parallel.FlowWorker.read

    def fail(self):
        if self.w == 0:
            raise ZeroDivisionError("boom")
        return real(self)

    monkeypatch.setattr(parallel.FlowWorker, "read", fail)
    rc, out, err = run(capsys, *args, "-j", "2")
    assert rc == 1 and out == one
    assert err.count("key log line") == 2 and "internal error: -j 2" in err and "boom" in err
