"""What was left of issue 9: -t at the capture's resolution (checked against tshark on nanosecond
pcap and pcapng), ``split -`` (standard input), ``frames -V``'s network layers decoded with dpkt
(checked against tshark -V), and the archive command's progress on a terminal only."""

from __future__ import annotations

import glob
import gzip
import os
import shutil
import subprocess
import sys

import pytest
from pcapbuild import nanosecond_captures

from amqp_dissect.cli.main import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")
TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)")
CLI = [sys.executable, "-m", "amqp_dissect.cli"]


def cli(*args, stdin=None, env=None):
    return subprocess.run(CLI + [str(a) for a in args], input=stdin, capture_output=True, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def tshark(*args, env=None) -> str:
    r = subprocess.run([TSHARK, *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return r.stdout


# --------------------------------------------------------------------------- -t precision


@pytest.fixture(scope="module")
def ns_captures(tmp_path_factory):
    """outcomes.pcap as a nanosecond pcap whose times have nanoseconds a float of epoch seconds
    cannot hold (the microseconds plus 0..999 ns), and the same as pcapng (editcap: an
    interface with if_tsresol 10^-9)."""
    pcap, pcapng = nanosecond_captures(OUTCOMES, tmp_path_factory.mktemp("ns"), lambda i: (i * 137 + 1) % 1000)
    return {"pcap": str(pcap), "pcapng": str(pcapng)}


def _time_columns(text: str, width: int) -> dict:
    cols = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            cols.setdefault(int(parts[0]), " ".join(parts[1:1 + width]))
    return cols


@needs_tshark
@pytest.mark.parametrize("kind,fmt", [("pcap", f) for f in ("r", "a", "ad", "u", "ud", "e", "d", "dd")]
                         + [("pcapng", f) for f in ("r", "ud", "e", "d")])
def test_time_formats_have_tshark_precision_on_nanosecond_captures(ns_captures, kind, fmt):
    cap = ns_captures[kind]
    env = {"TZ": "Asia/Kolkata"}
    r = cli("frames", "-t", fmt, cap, env=env)
    assert r.returncode == 0, r.stderr
    width = 2 if fmt in ("ad", "ud") else 1
    ours = _time_columns(r.stdout.decode(), width)
    theirs = _time_columns(tshark("-r", cap, "-Y", "amqp", "-t", fmt, env=env), width)
    assert ours == theirs
    # nine digits, and the last three are not zeros: the nanoseconds came through
    assert all(len(t.rsplit(".", 1)[1]) == 9 for t in ours.values())
    assert any(not t.endswith("000") for t in ours.values())


@needs_tshark
def test_fields_time_has_the_capture_precision(ns_captures):
    r = cli("frames", "-T", "fields", "-e", "packet", "-e", "time", "-t", "e", ns_captures["pcap"])
    assert r.returncode == 0, r.stderr
    ours = dict(line.split("\t") for line in r.stdout.decode().splitlines())
    theirs = dict(line.split("\t") for line in tshark("-r", ns_captures["pcap"], "-Y", "amqp", "-T", "fields",
                                                      "-e", "frame.number", "-e", "frame.time_epoch").splitlines())
    assert ours == theirs


@needs_tshark
def test_microsecond_captures_keep_six_digits():
    r = cli("frames", "-t", "e", OUTCOMES)
    ours = _time_columns(r.stdout.decode(), 1)
    assert ours == _time_columns(tshark("-r", OUTCOMES, "-Y", "amqp", "-t", "e"), 1)
    assert all(len(t.rsplit(".", 1)[1]) == 6 for t in ours.values())


# --------------------------------------------------------------------------- split -


def _records(path: str) -> list[tuple[int, int, bytes]]:
    """(whole seconds, bytes) of each record of a pcap file, read with dpkt."""
    import dpkt

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        r = dpkt.pcap.Reader(f)
        return [(int(ts), buf) for ts, buf in r]


def test_split_reads_standard_input_as_the_file(tmp_path):
    a, b = tmp_path / "file", tmp_path / "stdin"
    ra = cli("split", OUTCOMES, "-o", a, "--packets", "10")
    with open(OUTCOMES, "rb") as f:
        rb = cli("split", "-", "-o", b, "--packets", "10", stdin=f.read())
    assert ra.returncode == 0 and rb.returncode == 0, rb.stderr
    files_a, files_b = sorted(os.listdir(a)), sorted(os.listdir(b))
    assert files_b == [n.replace("outcomes_", "stdin_") for n in files_a] and len(files_a) == 5
    for x, y in zip(files_a, files_b):  # byte for byte
        assert (a / x).read_bytes() == (b / y).read_bytes()


def test_split_reads_gzip_pcapng_from_standard_input(tmp_path, ns_captures):
    with open(ns_captures["pcapng"], "rb") as f:
        data = gzip.compress(f.read())
    r = cli("split", "-", "-o", tmp_path, "--packets", "20", "--name", "piped", stdin=data)
    assert r.returncode == 0, r.stderr
    parts = sorted(os.listdir(tmp_path))
    assert parts == ["piped_00000.pcap", "piped_00001.pcap", "piped_00002.pcap"]
    got = [rec for p in parts for rec in _records(str(tmp_path / p))]
    assert [buf for _, buf in got] == [buf for _, buf in _records(OUTCOMES)]
    # the nanoseconds survive (tshark reads the parts)
    if TSHARK:
        first = tshark("-r", tmp_path / parts[0], "-T", "fields", "-e", "frame.time_epoch", "-c", "3").split()
        want = tshark("-r", ns_captures["pcap"], "-T", "fields", "-e", "frame.time_epoch", "-c", "3").split()
        assert first == want


def test_split_stdin_errors_name_the_input(tmp_path):
    r = cli("split", "-", "-o", tmp_path, "--packets", "5", stdin=b"not a capture at all")
    assert r.returncode == 4 and r.stderr.decode().startswith("amqp-dissect: -: ")


# --------------------------------------------------------------------------- -V network layers (dpkt)

_NET_LAYERS = ("Ethernet II", "Internet Protocol Version 4", "Internet Protocol Version 6",
               "Transmission Control Protocol")


def _layer_blocks(text: str) -> dict:
    """{frame number: {layer name: [its lines, title first]}} of a -V text (ours or tshark's)."""
    frames: dict = {}
    cur = head = None
    for line in text.splitlines():
        if line.startswith("Frame "):
            cur = frames.setdefault(int(line.split()[1].rstrip(":")), {})
        if not line.strip() or cur is None:
            continue
        if not line.startswith(" "):
            head = line.split(",", 1)[0]
            if head not in cur:  # (tshark: a packet's layers once; ours: the same)
                cur[head] = [line]
            else:
                head = None
        elif head is not None:
            cur[head].append(line)
    return frames


def _tshark_v(cap) -> dict:
    r = subprocess.run([TSHARK, "-n", "-V", "-r", str(cap)], capture_output=True)
    assert r.returncode == 0
    return _layer_blocks(r.stdout.decode("utf-8", "replace"))


def _in_order(ours: list[str], theirs: list[str]) -> str | None:
    """The first of ``ours`` that is not in ``theirs`` in the same order (None: all are)."""
    it = iter(theirs)
    for line in ours:
        if not any(line == t for t in it):
            return line
    return None


@needs_tshark
@pytest.mark.parametrize("sample", ["outcomes.pcap", "ipv6.pcap", "large_message.pcap"])
def test_verbose_network_layers_are_tsharks_lines(sample):
    """Every line frames -V shows under Ethernet II, IPv4 / IPv6 and TCP is a line of tshark -V's
    same layer of the same packet, in the same order (tshark has more: relative sequence numbers
    and its analysis lines); the TCP title keeps the raw numbers."""
    cap = os.path.join(SAMPLES, sample)
    r = cli("frames", "-V", cap)
    assert r.returncode == 0, r.stderr
    ours = _layer_blocks(r.stdout.decode())
    theirs = _tshark_v(cap)
    checked = 0
    for number, layers in ours.items():
        for name in _NET_LAYERS:
            if name not in layers:
                continue
            mine = layers[name] if name != "Transmission Control Protocol" else layers[name][1:]
            assert _in_order(mine, theirs[number][name]) is None, (number, name, _in_order(mine, theirs[number][name]))
            checked += len(mine)
    assert checked > 1000 and any("Options: (" in line for ls in ours.values() for line in ls.get(
        "Transmission Control Protocol", []))


@needs_tshark
def test_network_layers_of_crafted_packets_are_tsharks(tmp_path):
    """Packets with what the samples lack: every DSCP class and ECN value, IPv6 traffic classes
    and flow labels, all TCP flags, SYN options (MSS, SACK permitted, timestamps, window scale),
    group and locally administered MAC addresses, malformed options (tshark's notes, a fuzzed capture's
    crash); packet_layers against tshark -V."""
    import dpkt

    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.render.netdetail import packet_layers

    def tcp(flags, opts=b"", data=b""):
        t = dpkt.tcp.TCP(sport=40000, dport=5672, seq=1000, ack=2000, flags=flags & 0xFF, win=512, opts=opts,
                         data=data)
        t.off = (20 + len(opts)) // 4
        t._off_flags = (t._off_flags & 0xF000) | flags
        return t

    def ip4(t, tos, df=1):
        i = dpkt.ip.IP(src=b"\x0a\x00\x00\x01", dst=b"\xc0\xa8\x01\x02", p=6, tos=tos, df=df, ttl=64, id=0x1234,
                       data=t)
        i.len = len(bytes(i))
        return i

    def eth(p, src, dst, et=dpkt.ethernet.ETH_TYPE_IP):
        return bytes(dpkt.ethernet.Ethernet(src=src, dst=dst, type=et, data=p))

    syn_opts = (b"\x02\x04\x05\xb4" + b"\x04\x02" + b"\x08\x0a\x00\x00\x00\x01\x00\x00\x00\x00" + b"\x01"
                + b"\x03\x03\x07")
    pkts = [eth(ip4(tcp(0x002, syn_opts), 0xB8), b"\x02\x11\x22\x33\x44\x55", b"\x01\x00\x5e\x00\x00\x01")]
    for i, tos in enumerate(range(0, 256, 3)):  # DSCP and ECN values, named and unknown
        flags = (0x001, 0x0FF, 0x010, 0x018, 0x1C0, 0x004, 0x011)[i % 7]
        pkts.append(eth(ip4(tcp(flags, b"\x01\x01\x08\x0a\x00\x00\x00\x07\x00\x00\x00\x09", b"x" * (i % 3)), tos),
                        b"\x00\x11\x22\x33\x44\x55", b"\xff" * 6))
    for opts in (b"\x01\x01\x01\x08", b"\x08\x0a\x00\x00", b"\x01\x01\x05\x00",
                 b"\x02\x04\x05\xb4\x13\x12\x00\x00"):  # malformed options: no length byte, too long, too short
        pkts.append(eth(ip4(tcp(0x018, opts, b"y"), 0), b"\x00\x11\x22\x33\x44\x55", b"\xff" * 6))
    for fc in (0x00, 0xB9, 0x2A, 0xFF):
        t6 = tcp(0x018, data=b"AMQP\x00\x01\x00\x00")
        i6 = dpkt.ip6.IP6(src=b"\xfe\x80" + b"\x00" * 13 + b"\x01", dst=b"\x20\x01\x0d\xb8" + b"\x00" * 11 + b"\x02",
                          nxt=6, hlim=5, data=t6)
        i6.v, i6.fc, i6.flow, i6.plen = 6, fc, 0x12345 + fc, len(bytes(t6))
        pkts.append(eth(i6, b"\x00\x11\x22\x33\x44\x55", b"\x33\x33\x00\x00\x00\x01", dpkt.ethernet.ETH_TYPE_IP6))
    cap = tmp_path / "crafted.pcap"
    with open(cap, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, p in enumerate(pkts):
            w.writepkt(p, 1000.0 + i)
    theirs = _tshark_v(cap)
    checked = notes = 0
    with open(cap, "rb") as f:
        for rec in open_capture(f):
            for title, lines in packet_layers(rec):
                name = title.split(",", 1)[0]
                if name not in _NET_LAYERS:
                    continue
                mine = ([title] if name != "Transmission Control Protocol" else []) + ["    " + x for x in lines]
                if any(x.startswith("    TCP payload") for x in mine) and rec.data[47] & 0x04:
                    mine = [x for x in mine if not x.startswith("    TCP payload")]  # (tshark: "Reset cause")
                missing = _in_order(mine, theirs[rec.index][name])
                assert missing is None, (rec.index, missing)
                checked += len(mine)
                notes += sum("past end of options" in x or "too-short" in x for x in mine)
    assert checked > 2000 and notes == 8


# --------------------------------------------------------------------------- archive progress


def test_spark_archive_progress_on_a_terminal_only(tmp_path, capsys, monkeypatch, spark):
    """archive (in this process, on the test run's Spark session): with stderr on a pseudo-
    terminal the progress shows the Spark steps and their tasks done / total, stage 1 its
    bytes; with stderr piped (captured), stderr gets nothing and stdout is the same."""
    import re

    from ptyrun import stderr_on_a_terminal

    monkeypatch.setenv("AMQP_DISSECT_PROGRESS_AFTER", "0")
    monkeypatch.setenv("COLUMNS", "200")  # (rich's width on a terminal that gives none)
    # (sampled every 10 ms, not every 0.25 s: on the samples a step such as stage 2 can last less than
    # a quarter of a second on a busy machine, and a step the display never sampled it never showed;
    # it still gives up after 5 s of failed samples, as it does at its own pace)
    monkeypatch.setattr("amqp_dissect.cli.progress._EVERY", 0.01)
    monkeypatch.setattr("amqp_dissect.cli.progress._GIVE_UP", 500)
    args = ["archive", *sorted(glob.glob(os.path.join(SAMPLES, "*.pcap"))), "--partitions", "2", "--split-size", "20k"]
    with stderr_on_a_terminal(monkeypatch) as shown:
        rc = main(args + ["--out", str(tmp_path / "tty")])
    monkeypatch.undo()
    out_tty = capsys.readouterr().out
    assert rc == 0
    text = shown.text
    assert "stage 1: reading the captures" in text and "stage 2: per-flow analysis" in text
    assert re.search(r"\d+/\d+ tasks", text)
    total = sum(os.path.getsize(os.path.join(SAMPLES, f)) for f in os.listdir(SAMPLES) if f.endswith(".pcap"))
    assert f"of {total / 1000:.1f} kB" in text  # stage 1: bytes of the total

    monkeypatch.setenv("AMQP_DISSECT_PROGRESS_AFTER", "0")
    rc = main(args + ["--out", str(tmp_path / "piped")])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    strip = lambda s: re.sub(r"in [0-9.]+ s|-> \S+", "", s)  # noqa: E731 (the time and the out directory)
    assert strip(out) == strip(out_tty)


# --------------------------------------------------------------------------- the manual (docs/manual.md)


def _manual_sections() -> dict:
    """{## heading: its text, ### subsections included} of the manual, docs/manual.md."""
    import re

    with open(os.path.join(ROOT, "docs", "manual.md"), encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _documented(text: str) -> set:
    import re

    return set(re.findall(r"\*\*(--?[A-Za-z][\w-]*)\*\*", text))


def test_manual_names_exactly_the_options_of_help():
    """Each command's options in the manual (docs/manual.md) are the ones its --help lists (click's own
    definitions), with their choices; every command has its section."""
    import typer.main

    from amqp_dissect.cli.typer_app import app

    root = typer.main.get_command(app)
    sections = _manual_sections()
    shared = sections["CAPTURE INPUT OPTIONS (frames, report and the table commands)"]

    def opts(command) -> set:
        return {o for p in command.params if p.param_type_name == "option"
                for o in p.opts + p.secondary_opts} - {"--help"}

    assert _documented(sections["GLOBAL OPTIONS"]) == opts(root)
    seen = set()
    for heading, text in sections.items():
        if not heading.startswith("amqp-dissect "):
            continue
        for name in heading[len("amqp-dissect "):].split(" | "):
            command = root.commands[name]
            seen.add(name)
            documented = _documented(text)
            reads_captures = any(p.name == "captures" for p in command.params)
            if reads_captures:
                documented |= _documented(shared)
            assert documented == opts(command), (name, documented ^ opts(command))
            for p in command.params:
                if p.param_type_name == "option" and type(p.type).__name__ == "Choice":  # (typer may vendor click)
                    assert "|".join(p.type.choices) in text + shared, (name, p.opts)
    assert seen == set(root.commands)


@pytest.mark.parametrize("args", [["archive", SAMPLES, "--out", "/tmp/never", "--port", "99999"],
                                  ["compare", OUTCOMES, "--port", "0"]])
def test_archive_and_compare_check_ports(capsys, args):
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "--port" in err and "65535" in err
