"""The CLI's tshark habits (issue 9): inputs (-, -r, several files), -Y, -c, -t, -T fields, exits,
narrow tables, the report header and the pandas API, checked against tshark, mergecap, capinfos
and the state layer's own tables where those answer the same question."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_OPEN, EXIT_USAGE, main
from ptyrun import run_with_stderr_on_a_terminal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")
CREDIT = os.path.join(SAMPLES, "credit_one.pcap")
LARGE = os.path.join(SAMPLES, "large_message.pcap")
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)")
CLI = [sys.executable, "-m", "amqp_dissect.cli"]


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def cli(*args, stdin=None, env=None):
    return subprocess.run(CLI + [str(a) for a in args], input=stdin, capture_output=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def tshark(*args, env=None) -> str:
    r = subprocess.run([TSHARK, *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return r.stdout


def jsonl(capsys, *args):
    rc, out, err = run(capsys, "frames", "-T", "jsonl", *args)
    assert rc == EXIT_OK, err
    return [json.loads(x) for x in out.splitlines()]


@pytest.fixture(scope="module")
def late_start(tmp_path_factory):
    """outcomes.pcap after five UDP packets that start 5.5 s earlier: tshark's relative times
    count from the first packet of the file, not from the first AMQP packet."""
    import dpkt

    path = tmp_path_factory.mktemp("late") / "late.pcap"
    with open(OUTCOMES, "rb") as f:
        pkts = list(dpkt.pcap.Reader(f))
    t0 = float(pkts[0][0])
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i in range(5):
            udp = dpkt.udp.UDP(sport=5353, dport=5353, data=b"not amqp %d" % i)
            udp.ulen = len(bytes(udp))
            ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", p=dpkt.ip.IP_PROTO_UDP, data=udp)
            ip.len = len(bytes(ip))
            eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            w.writepkt(bytes(eth), t0 - 5.5 + i * 0.25)
        for ts, buf in pkts:
            w.writepkt(buf, ts)
    return str(path)


# --------------------------------------------------------------------------- inputs


def test_stdin_through_a_pipe_gives_the_same_frames_as_the_file():
    """`-` reads a non-seekable pipe, fed in small pieces (as a live capture arrives)."""
    whole = cli("frames", "-T", "jsonl", OUTCOMES)
    assert whole.returncode == 0
    p = subprocess.Popen(CLI + ["frames", "-T", "jsonl", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    data = open(OUTCOMES, "rb").read()
    for i in range(0, len(data), 1000):
        p.stdin.write(data[i:i + 1000])
        p.stdin.flush()
    p.stdin.close()
    out = p.stdout.read()
    assert p.wait() == 0, p.stderr.read()
    assert out == whole.stdout
    assert not os.path.exists(os.path.join(ROOT, "-"))


def test_stdin_gzip_and_pcapng(tmp_path):
    import gzip

    ng = tmp_path / "o.pcapng"
    subprocess.run(["editcap", "-F", "pcapng", OUTCOMES, str(ng)], check=True)
    want = cli("frames", OUTCOMES).stdout
    assert cli("frames", "-", stdin=gzip.compress(open(OUTCOMES, "rb").read())).stdout == want
    assert cli("frames", "-", stdin=ng.read_bytes()).stdout == want


def test_read_option_and_several_files_as_one_capture(tmp_path, capsys):
    """Two files that do not overlap in time (outcomes before credit_one) read as one capture, in time
    order: the capture mergecap -a (concatenate) makes of them."""
    merged = tmp_path / "m.pcap"
    subprocess.run(["mergecap", "-a", "-F", "pcap", "-w", str(merged), OUTCOMES, CREDIT], check=True)
    want = jsonl(capsys, merged)
    assert jsonl(capsys, OUTCOMES, CREDIT) == want
    assert jsonl(capsys, "-r", OUTCOMES, "-r", CREDIT) == want
    assert jsonl(capsys, "-r", OUTCOMES, CREDIT) == want
    rc, out, err = run(capsys, "report", OUTCOMES, CREDIT)
    rc2, out2, _ = run(capsys, "report", merged)
    assert rc == rc2 == 0
    # all but the file names and the bytes (two file headers, not one)
    assert "packets 109," in out and out.split("\nconnections", 1)[1] == out2.split("\nconnections", 1)[1]


def test_analyze_takes_paths_file_objects_and_lists():
    from amqp_dissect.pipelines.runs.local import read_analysis

    by_path = read_analysis(OUTCOMES).deliveries
    by_file = read_analysis(open(OUTCOMES, "rb")).deliveries
    by_bytes = read_analysis(io.BytesIO(open(OUTCOMES, "rb").read())).deliveries
    assert by_path.equals(by_file) and by_path.equals(by_bytes)
    two = read_analysis([OUTCOMES, open(CREDIT, "rb")]).deliveries
    assert two.equals(read_analysis([OUTCOMES, CREDIT]).deliveries)
    assert len(two) == len(by_path) + len(read_analysis(CREDIT).deliveries)


def test_no_capture_and_stdin_twice_are_usage_errors(capsys):
    rc, out, err = run(capsys, "frames")
    assert rc == EXIT_USAGE and err.count("\n") == 1 and "no capture" in err
    rc, out, err = run(capsys, "frames", "-", "-")
    assert rc == EXIT_USAGE and err.count("\n") == 1


def test_missing_second_file_is_named(capsys):
    rc, out, err = run(capsys, "report", OUTCOMES, "/nonexistent/b.pcap")
    assert rc == EXIT_OPEN and err.count("\n") == 1 and "/nonexistent/b.pcap" in err


# --------------------------------------------------------------------------- -Y


def _packets(out: str) -> list[int]:
    return [int(line.split()[0]) for line in out.splitlines() if line.strip()]


@needs_tshark
@pytest.mark.parametrize("ours, theirs", [
    ('performative == "disposition"', "amqp.performative == 21"),
    ('performative == "transfer" and delivery-id >= 3', "amqp.performative == 20 && amqp.performative.arguments.deliveryId >= 3"),
    ("delivery-id >= 10", "amqp.performative.arguments.deliveryId >= 10"),
    ("link-credit > 5 or performative == attach", "amqp.performative.arguments.linkCredit > 5 || amqp.performative == 18"),
    ('name contains "receiver"', 'amqp.performative.arguments.name contains "receiver"'),
])
def test_display_filter_selects_the_packets_tshark_selects(capsys, ours, theirs):
    for cap in (OUTCOMES, CREDIT):
        rc, out, err = run(capsys, "frames", cap, "-Y", ours)
        assert rc == EXIT_OK, err
        want = [int(x) for x in tshark("-r", cap, "-Y", theirs, "-T", "fields", "-e", "frame.number").split()]
        assert sorted(set(_packets(out))) == want, (cap, ours)


def test_link_filter_selects_the_transfers_of_that_link(capsys):
    """`link ==` by handle agrees with the state layer's deliveries table (its own link tracking)."""
    from amqp_dissect.pipelines.runs.local import read_analysis

    dl = read_analysis(OUTCOMES).deliveries
    for link in dl["link"].unique():
        rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", f'link == "{link}" and performative == "transfer"',
                           "-T", "fields", "-e", "delivery-id")
        assert rc == EXIT_OK
        assert sorted(int(x) for x in out.split()) == sorted(int(x) for x in dl[dl["link"] == link]["delivery_id"])


@needs_tshark
def test_display_filter_values_and_operators(capsys):
    def packets(flt):
        rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", flt, "-T", "fields", "-e", "packet")
        assert rc == EXIT_OK, err
        return [int(x) for x in out.split()]

    from amqp_dissect.pipelines.runs.local import read_analysis

    dl = read_analysis(OUTCOMES).deliveries
    rejected = sorted(dl[dl["outcome"] == "rejected"]["settled_packet"].astype(int))
    assert packets("outcome == rejected") == rejected
    assert packets('outcome == "rejected" and performative == disposition') == rejected
    assert packets("role == receiver and performative == attach") == packets("role == 1 and performative == attach")
    assert packets("not (performative == transfer)") == [
        p for p in packets("packet >= 1") if p not in set(packets("performative == transfer"))
    ] or set(packets("performative == transfer")) & set(packets("not (performative == transfer)"))
    assert packets("performative in {attach detach}") == packets("performative == attach || performative == detach")
    assert packets("error") == packets("error.condition contains amqp:") == [
        # (tshark's field also holds the error of a rejected state: ours is the performative's own field)
        int(x) for x in tshark("-r", OUTCOMES, "-Y", "amqp.performative.arguments.error && amqp.performative != 21",
                               "-T", "fields",
                               "-e", "frame.number").split()]
    assert packets("type == header") == packets("protocol")
    # matches: case-insensitive regular expression; contains: case-sensitive (both as in Wireshark)
    assert packets('container-id matches "^AMQP-DISSECT-(outcomes|samples)$"') == packets("performative == open")
    assert packets('container-id contains "AMQP"') == []
    assert packets('container-id contains "outcomes"') == packets("performative == open")[:1]


@pytest.mark.parametrize("flt, col, what", [
    ('performative == "dispositon"', 17, "did you mean 'disposition'"),
    ('lnk == "x"', 1, "unknown field 'lnk'"),
    ('delivery-id >= "x"', 16, "is a number"),
    ("(channel == 0", 14, "expected ')'"),
    ("channel == 0 )", 14, "without a matching"),
    ("channel ==", 11, "expected a value"),
    ('name == "abc', 9, "not closed"),
    ("settled > 1", 9, "boolean"),
    ("role == foo", 9, "sender, receiver"),
    ("channel = 0", 9, "'=='"),
    ("", 1, "empty"),
])
def test_a_bad_filter_is_one_line_with_its_column_and_exit_2(capsys, flt, col, what):
    rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", flt)
    assert rc == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and f"column {col}:" in err and what in err, err


def test_filter_whole_vs_byte_by_byte_pipe(capsys):
    """The filter sees the same events whether the capture arrives whole or through stdin."""
    r = cli("frames", "-Y", "performative == transfer", "-", stdin=open(LARGE, "rb").read())
    assert r.returncode == 0
    assert r.stdout.decode() == run(capsys, "frames", LARGE, "-Y", "performative == transfer")[1]


# --------------------------------------------------------------------------- -c, -t, -T fields


@needs_tshark
@pytest.mark.parametrize("n", [1, 5, 13, 30])
def test_count_stops_after_n_packets_as_tshark(capsys, n):
    rc, out, err = run(capsys, "frames", OUTCOMES, "-c", n, "-T", "fields", "-e", "packet")
    assert rc == EXIT_OK
    want = tshark("-r", OUTCOMES, "-c", n, "-Y", "amqp", "-T", "fields", "-e", "frame.number").split()
    assert sorted(set(out.split()), key=int) == want
    rc, rep, _ = run(capsys, "report", OUTCOMES, "-c", n)
    assert f"packets {n}," in rep


@needs_tshark
@pytest.mark.parametrize("fmt", ["r", "a", "ad", "u", "ud", "e", "d", "dd"])
def test_time_formats_match_tshark_on_a_capture_that_starts_with_other_packets(capsys, late_start, fmt):
    env = {"TZ": "America/New_York"}
    r = cli("frames", "-t", fmt, late_start, env=env)
    assert r.returncode == 0
    ours: dict = {}
    width = 2 if fmt in ("ad", "ud") else 1
    for line in r.stdout.decode().splitlines():
        parts = line.split()
        ours.setdefault(int(parts[0]), " ".join(parts[1:1 + width]))
    theirs = {}
    for line in tshark("-r", late_start, "-Y", "amqp", "-t", fmt, env=env).splitlines():
        parts = line.split()
        theirs[int(parts[0])] = " ".join(parts[1:1 + width])
    assert ours == theirs
    if fmt == "r":
        assert float(ours[min(ours)]) > 5.0  # counted from the first (UDP) packet of the file


@needs_tshark
def test_fields_output_agrees_with_tshark_fields(capsys):
    """-T fields prints a line per frame; joined per packet (tshark's aggregator ',') they are
    tshark's -T fields lines."""
    for cap in (OUTCOMES, CREDIT):
        rc, out, err = run(capsys, "frames", cap, "-T", "fields", "-e", "frame.number", "-e", "channel",
                           "-e", "delivery-id", "-e", "handle", "-e", "link-credit", "-e", "settled")
        assert rc == EXIT_OK
        assert "\t" in out and '"' not in out
        ours: dict = {}
        for line in out.splitlines():
            pk, *vals = line.split("\t")
            cols = ours.setdefault(pk, [[] for _ in vals])
            for c, v in zip(cols, vals):
                if v:
                    c.append(v)
        ours_lines = {pk: [",".join(c) for c in cols] for pk, cols in ours.items()}
        a = "amqp.performative.arguments."
        theirs = {}
        for line in tshark("-r", cap, "-Y", "amqp", "-T", "fields", "-e", "frame.number", "-e", "amqp.channel",
                           "-e", a + "deliveryId", "-e", a + "handle", "-e", a + "linkCredit",
                           "-e", a + "settled").splitlines():
            pk, *vals = line.split("\t")
            theirs[pk] = vals
        assert ours_lines == theirs


def test_fields_usage(capsys):
    assert run(capsys, "frames", OUTCOMES, "-T", "fields")[0] == EXIT_USAGE
    assert run(capsys, "frames", OUTCOMES, "-e", "packet")[0] == EXIT_USAGE
    rc, out, err = run(capsys, "frames", OUTCOMES, "-T", "fields", "-e", "nosuch")
    assert rc == EXIT_USAGE and err.count("\n") == 1 and "nosuch" in err


# --------------------------------------------------------------------------- exits


def test_version_and_completion():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.decode().startswith("amqp-dissect ")
    r = cli(env={"_AMQP_DISSECT_COMPLETE": "complete_bash", "COMP_WORDS": "amqp-dissect fra", "COMP_CWORD": "1"})
    r = subprocess.run([sys.executable, "-c", "import sys; from amqp_dissect.cli.main import entry; "
                        "sys.argv[0] = 'amqp-dissect'; entry()"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "_AMQP_DISSECT_COMPLETE": "complete_bash",
                            "COMP_WORDS": "amqp-dissect fra", "COMP_CWORD": "1"})
    assert "frames" in r.stdout
    r = cli("--help")
    assert b"--install-completion" in r.stdout


@pytest.mark.parametrize("args", [
    ["frames", "-V", LARGE],
    ["frames", OUTCOMES, CREDIT, LARGE, OUTCOMES, CREDIT, LARGE],
    ["deliveries", "-T", "csv", OUTCOMES, CREDIT, LARGE, OUTCOMES],
])
def test_broken_pipe_exits_0_quietly(args):
    p = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout.readline()
    p.stdout.close()
    assert p.wait() == 0
    assert p.stderr.read() == b""


def test_bad_output_paths_are_one_line_and_exit_3(capsys, tmp_path):
    for fmt in ("csv", "parquet", "table"):
        rc, out, err = run(capsys, "deliveries", OUTCOMES, "-T", fmt, "-o", "/nonexistent/dir/x.out")
        assert rc == EXIT_OPEN and err.count("\n") == 1 and "/nonexistent/dir/x.out" in err
        assert "internal" not in err
    rc, out, err = run(capsys, "links", OUTCOMES, "-o", str(tmp_path))
    assert rc == EXIT_OPEN and "is a directory" in err
    rc, out, err = run(capsys, "split", OUTCOMES, "--out", "/dev/null/x", "--packets", "10")
    assert rc == EXIT_OPEN and err.count("\n") == 1 and "--out /dev/null/x" in err and "outcomes.pcap" not in err


@pytest.mark.parametrize("args", [
    ["frames", "--port", "99999", OUTCOMES],
    ["report", "--port", "0", OUTCOMES],
    ["frames", "--bogus", OUTCOMES],
    ["frames", "-c", "0", OUTCOMES],
    ["frames", "-t", "x", OUTCOMES],
    ["links", "--columns", "nosuch", OUTCOMES],
    ["links", "-T", "csv", "--columns", "nosuch", OUTCOMES],  # (--columns: every format)
])
def test_usage_errors_are_one_line(capsys, args):
    rc, out, err = run(capsys, *args)
    assert rc == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("amqp-dissect: "), err


# --------------------------------------------------------------------------- readable output


def test_table_format_is_narrow_and_columns_pick_others(capsys):
    from amqp_dissect.results.schema import names

    rc, out, err = run(capsys, "deliveries", OUTCOMES)
    header = out.splitlines()[0].split()
    assert rc == 0 and len(header) < len(names("deliveries")) and max(map(len, out.splitlines())) < 200
    rc, out, err = run(capsys, "deliveries", OUTCOMES, "--columns", "delivery_id,outcome,delivery_tag")
    assert out.splitlines()[0].split() == ["delivery_id", "outcome", "delivery_tag"]
    rc, out, err = run(capsys, "deliveries", OUTCOMES, "--columns", "all")
    assert out.splitlines()[0].split() == names("deliveries")
    rc, out, err = run(capsys, "links", OUTCOMES, "--columns", "+transfers")
    assert out.splitlines()[0].split()[-1] == "transfers"


@pytest.mark.parametrize("table", ["errors", "violations", "deliveries", "stalls", "connections", "sessions",
                                   "links"])
def test_every_time_column_is_formatted(capsys, table):
    from amqp_dissect.results.schema import time_columns

    for cap in (os.path.join(SAMPLES, "attach_errors.pcap"), OUTCOMES):
        rc, out, err = run(capsys, table, cap, "--columns", "all")
        assert rc == 0
        assert not re.search(r"\d\.\d+e[+-]\d", out), out[:500]
        for col in time_columns(table):
            assert col in out.splitlines()[0] or out.startswith("(no rows)")
        if not out.startswith("(no rows)") and time_columns(table):
            assert re.search(r"20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", out)


def _capinfos(path) -> dict:
    out = subprocess.run(["capinfos", "-M", "-T", "-a", "-e", "-c", "-s", "-r", "-u", "-S", path], capture_output=True,
                         text=True, check=True).stdout.split("\t")
    # -T: one tab-separated line: file, packets, size, duration, start, end (epoch seconds with -S)
    return {"packets": int(out[1]), "bytes": int(out[2]), "duration": float(out[3]), "start": out[4].strip(),
            "end": out[5].strip()}


def _epoch_ns(text: str) -> int:
    from decimal import Decimal

    return int(Decimal(text) * 1_000_000_000)


def _utc_text(text: str) -> str:
    """capinfos' epoch seconds as the report writes a date: the digits as they are, no float."""
    import datetime as dt

    sec, _, frac = text.partition(".")
    day = dt.datetime.fromtimestamp(int(sec), dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"{day}.{(frac + '000000')[:6]} UTC"


@pytest.mark.skipif(shutil.which("capinfos") is None, reason="capinfos is not installed (comes with tshark)")
def test_report_header_agrees_with_capinfos(capsys, late_start):
    import datetime as dt

    ci = _capinfos(late_start)
    rc, out, err = run(capsys, "report", late_start)
    head = "\n".join(out.splitlines()[:6])
    start = _utc_text(ci["start"])
    end = _utc_text(ci["end"])
    assert f"file: {late_start}" in head
    assert f"capture: {start} to {end} ({ci['duration']:.6f} s)" in head
    assert f"packets {ci['packets']:,}, bytes {ci['bytes']:,}" in head
    rc, out, err = run(capsys, "report", "-T", "json", late_start)
    cap = json.loads(out)["capture"]
    assert cap["packets"] == ci["packets"] and cap["bytes"] == ci["bytes"] and cap["files"] == [late_start]
    assert cap["start"] == _epoch_ns(ci["start"]) and cap["end"] == _epoch_ns(ci["end"])  # (exact, integer ns)


# --------------------------------------------------------------------------- pandas


@needs_tshark
def test_analysis_frames_is_a_typed_frame_table(capsys):
    import pandas as pd

    from amqp_dissect.pipelines.runs.local import read_analysis
    from amqp_dissect.results.schema import names

    a = read_analysis(OUTCOMES)
    df = a.frames
    assert list(df.columns) == names("frames")
    assert str(df["time"].dtype) == "datetime64[ns, UTC]"
    assert str(df["packet"].dtype) == "Int64"
    # the performatives tshark decodes, packet by packet
    theirs = {}
    for line in tshark("-r", OUTCOMES, "-Y", "amqp.performative", "-T", "fields", "-e", "frame.number",
                       "-e", "amqp.performative").splitlines():
        pk, codes = line.split("\t")
        theirs[int(pk)] = len(codes.split(","))
    perf = df[df["performative"].notna() & (df["type"] == "amqp")]  # (tshark: SASL frames have no amqp.performative)
    ours = perf.groupby("packet").size().to_dict()
    assert {int(k): v for k, v in ours.items()} == theirs
    # times are the capture's
    import dpkt

    import struct

    with open(OUTCOMES, "rb") as f:  # (a little-endian microsecond pcap: its record headers, read here)
        raw = f.read()
    ts, pos = {}, 24
    while pos < len(raw):
        sec, usec, caplen, _orig = struct.unpack_from("<IIII", raw, pos)
        ts[len(ts) + 1] = sec * 1_000_000_000 + usec * 1000
        pos += 16 + caplen
    for pk, t in zip(df["packet"], df["time"]):
        assert t.value == ts[int(pk)]  # (exact: integer nanoseconds)
    kept = read_analysis(open(OUTCOMES, "rb"), frames=True).frames
    pd.testing.assert_frame_equal(kept, df)
    with pytest.raises(ValueError):
        read_analysis(io.BytesIO(open(OUTCOMES, "rb").read())).frames


def test_analysis_repr_summarises(capsys):
    from amqp_dissect.pipelines.runs.local import read_analysis

    a = read_analysis(OUTCOMES)
    text = repr(a)
    dl = a.deliveries
    assert "outcomes.pcap" in text and f"deliveries {len(dl)}" in text
    for outcome, n in dl["outcome"].value_counts().items():
        assert f"{outcome} {n}" in text
    assert f"links {len(a.links)}" in text and f"{a.capture['packets']} packets" in text


# --------------------------------------------------------------------------- live capture


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _replay_over_loopback(port: int, messages: int = 20) -> int:
    """Real proton traffic (tests/support/protonpump.py: a client sends ``messages`` messages, the server
    settles them) replayed chunk by chunk over a real TCP connection on the loopback."""
    import socket
    import threading
    import time

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
    from protonpump import Pump
    from proton import Message

    p = Pump(server_max_frame=512)
    snd = p.sender("live-q", name="live-sender")
    p.run()
    for i in range(messages):
        p.send(snd, Message(body=b"m%03d" % i * 50))
        p.run()
    p.close()
    lst = socket.socket()
    lst.bind(("127.0.0.1", port))
    lst.listen(1)
    cli_sock = socket.create_connection(("127.0.0.1", port))
    srv_sock, _ = lst.accept()
    socks = (cli_sock, srv_sock)
    stop = threading.Event()

    def drain(s):
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                if not s.recv(65536):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    readers = [threading.Thread(target=drain, args=(s,), daemon=True) for s in socks]
    for t in readers:
        t.start()
    for direction, data in p.chunks:
        socks[direction].sendall(data)
        time.sleep(0.002)
    time.sleep(0.3)
    stop.set()
    for s in socks:
        s.close()
    lst.close()
    return messages


def _start_live(args):
    import time

    proc = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    line = proc.stderr.readline().decode()  # dumpcap's "Capturing on 'Loopback: lo'", as tshark says it
    assert line.startswith("Capturing on"), line + proc.stderr.read().decode()
    time.sleep(0.3)
    return proc


needs_dumpcap = pytest.mark.skipif(shutil.which("dumpcap") is None or os.geteuid() != 0,
                                   reason="live capture needs dumpcap and the right to capture on lo")


@needs_dumpcap
def test_live_capture_on_the_loopback_with_real_amqp_traffic(tmp_path, capsys):
    """frames -i lo: the frames of real proton traffic as it arrives; Ctrl-C ends it; -w keeps
    the packets, which tshark and a second run over the file agree with."""
    import signal

    port = _free_port()
    kept = tmp_path / "live.pcap"
    proc = _start_live(["frames", "-i", "lo", "-f", f"tcp port {port}", "-w", kept, "-T", "jsonl"])
    sent = _replay_over_loopback(port)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    live = [json.loads(x) for x in out.decode().splitlines()]
    transfers = [o for o in live if o["performative"] == "transfer"]
    assert len(transfers) == sent
    assert {o["fields"]["delivery-id"] for o in transfers} == set(range(sent))
    assert live == jsonl(capsys, kept)  # the kept file gives the same frames
    theirs = tshark("-r", kept, "-d", f"tcp.port=={port},amqp", "-Y", "amqp.performative == 20", "-T", "fields",
                    "-e", "amqp.performative.arguments.deliveryId").split()
    assert sorted(int(x) for v in theirs for x in v.split(",")) == list(range(sent))


@needs_dumpcap
def test_live_report_ends_with_the_duration(tmp_path):
    port = _free_port()
    proc = _start_live(["report", "-i", "lo", "--capture-filter", f"tcp port {port}", "-a", "duration:3",
                        "-T", "json"])
    sent = _replay_over_loopback(port, messages=7)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    rep = json.loads(out)
    assert rep["summary"]["deliveries"] == sent and rep["summary"]["outcomes"].get("accepted") == sent
    assert rep["capture"]["files"] == ["lo (live)"]


def test_live_options_need_an_interface(capsys):
    for args in (["-f", "tcp"], ["-w", "x.pcap"], ["-a", "duration:1"]):
        rc, out, err = run(capsys, "frames", OUTCOMES, *args)
        assert rc == EXIT_USAGE and err.count("\n") == 1 and "-i" in err
    rc, out, err = run(capsys, "frames", "-i", "lo", OUTCOMES)
    assert rc == EXIT_USAGE
    rc, out, err = run(capsys, "frames", "-i", "lo", "-a", "packets:3")
    assert rc == EXIT_USAGE and "duration" in err


# --------------------------------------------------------------------------- progress


def _with_stderr_on_a_terminal(args, env):
    """Run the CLI with stderr on a pseudo-terminal (stdout piped); what the terminal got."""
    return run_with_stderr_on_a_terminal(CLI + args, ROOT, env)


def test_progress_shows_on_a_terminal_only(tmp_path):
    """The progress line (bytes of the total, packets/s) goes to stderr when it is a terminal;
    the output is the same, and a piped stderr gets nothing (every other test)."""
    big = tmp_path / "big.pcap"
    subprocess.run(["mergecap", "-a", "-F", "pcap", "-w", str(big)] + [LARGE] * 20, check=True)
    rc, out, tty = _with_stderr_on_a_terminal(["report", str(big)], {"AMQP_DISSECT_PROGRESS_AFTER": "0"})
    assert rc == 0
    assert "packets/s" in tty and "reading" in tty
    assert f"{os.path.getsize(big) / 1e6:.1f}"[:2] in tty  # the total, in MB
    piped = cli("report", big, env={"AMQP_DISSECT_PROGRESS_AFTER": "0"})
    assert piped.stderr == b"" and piped.stdout == out
    # a run shorter than the threshold: nothing
    rc, out2, tty = _with_stderr_on_a_terminal(["report", str(big)], {"AMQP_DISSECT_PROGRESS_AFTER": "3600"})
    assert "packets/s" not in tty and out2 == out
