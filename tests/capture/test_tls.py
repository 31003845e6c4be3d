"""TLS decryption with a key log, on real TLS captures made here (tests/support/tlscap.py).

Each capture is a plain sample's AMQP connection replayed over TLS on the
loopback by Python's ``ssl`` (OpenSSL), captured by tcpdump, with the session
keys OpenSSL logged.  Oracles:

- the AMQP frames decoded from the decrypted stream equal, one for one, those of
  the plain sample (same performatives, same directions, same order);
- tshark, given the same key log, shows the same performatives in every packet;
- without keys, the bytes not decrypted equal tshark's sum of encrypted record
  lengths, and the client random is tshark's ClientHello random.
"""

from __future__ import annotations

import collections
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from amqp_dissect.amqp.framing import Frame, OtherProtocolNote, ProtocolHeader, StreamNote
from amqp_dissect.capture.keylog import KeyLog
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.capture.tls import TlsLayer
from amqp_dissect.dissect import Dissector
from amqp_dissect.events import PacketNote
import tlscap

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# performative descriptor codes as tshark's amqp.performative / amqp.sasl.method show them
CODES = {0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer", 0x15: "disposition",
         0x16: "detach", 0x17: "end", 0x18: "close", 0x40: "sasl-mechanisms", 0x41: "sasl-init",
         0x42: "sasl-challenge", 0x43: "sasl-response", 0x44: "sasl-outcome"}

CONFIGS = {
    # name: (sample, make_capture keyword arguments)
    "tls13-aes128gcm": ("outcomes", dict(tls="1.3", suite="TLS_AES_128_GCM_SHA256")),
    "tls13-aes256gcm": ("large_message", dict(tls="1.3", suite="TLS_AES_256_GCM_SHA384")),
    "tls13-chacha20": ("outcomes", dict(tls="1.3", suite="TLS_CHACHA20_POLY1305_SHA256")),
    "tls13-aes128ccm": ("outcomes", dict(tls="1.3", suite="TLS_AES_128_CCM_SHA256")),
    "tls12-ecdhe-aes128gcm": ("outcomes", dict(tls="1.2", cipher="ECDHE-RSA-AES128-GCM-SHA256")),
    "tls12-ecdhe-aes256gcm": ("large_message", dict(tls="1.2", cipher="ECDHE-RSA-AES256-GCM-SHA384")),
    "tls12-rsa-aes128gcm": ("outcomes", dict(tls="1.2", cipher="AES128-GCM-SHA256")),
    "tls12-ecdhe-chacha20": ("outcomes", dict(tls="1.2", cipher="ECDHE-RSA-CHACHA20-POLY1305")),
    "tls12-ecdhe-cbc-sha1-etm": ("outcomes", dict(tls="1.2", cipher="ECDHE-RSA-AES128-SHA")),
    "tls12-ecdhe-cbc-sha384-etm": ("outcomes", dict(tls="1.2", cipher="ECDHE-RSA-AES256-SHA384")),
    "tls12-rsa-cbc-sha256-mte": ("outcomes", dict(tls="1.2", cipher="AES128-SHA256", no_etm=True)),
    "tls12-ecdhe-cbc-sha1-mte": ("large_message", dict(tls="1.2", cipher="ECDHE-RSA-AES256-SHA", no_etm=True)),
    "tls13-hello-retry": ("outcomes", dict(tls="1.3", server_curve="prime256v1")),
    "amqp-tls-header": ("outcomes", dict(tls="1.3", amqp_tls_header=True)),
}

# suite names tshark shows in the ServerHello, per config (the capture really used that suite)
SUITE_IDS = {"tls13-aes128gcm": 0x1301, "tls13-aes256gcm": 0x1302, "tls13-chacha20": 0x1303,
             "tls13-aes128ccm": 0x1304, "tls12-ecdhe-aes128gcm": 0xC02F, "tls12-ecdhe-aes256gcm": 0xC030,
             "tls12-rsa-aes128gcm": 0x009C, "tls12-ecdhe-chacha20": 0xCCA8, "tls12-ecdhe-cbc-sha1-etm": 0xC013,
             "tls12-ecdhe-cbc-sha384-etm": 0xC028, "tls12-rsa-cbc-sha256-mte": 0x003C,
             "tls12-ecdhe-cbc-sha1-mte": 0xC014, "tls13-hello-retry": 0x1302}


def _need_tools():
    missing = [t for t in ("tcpdump", "tshark", "editcap") if shutil.which(t) is None]
    problem = f"{', '.join(missing)} not installed" if missing else None
    if problem is None and os.geteuid() != 0:
        problem = "tcpdump needs root"
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {problem}; tests/install-deps.sh installs the tools", pytrace=False)
    pytest.skip(f"TLS captures not made: {problem}")


class Capture:
    def __init__(self, name: str, pcap: Path, keys: Path, sample: Path):
        self.name = name
        self.pcap = pcap
        self.keys = keys
        self.sample = sample
        self.port = _server_port(pcap)


def _server_port(pcap: Path) -> int:
    from amqp_dissect.capture.netparse import parse_segment

    with open(pcap, "rb") as f:
        for rec in open_capture(f):
            seg = parse_segment(rec.linktype, rec.data)
            if seg is not None:
                return seg.dport
    raise AssertionError("empty capture")


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    _need_tools()
    made: dict[str, Capture] = {}
    base = tmp_path_factory.mktemp("tls")

    def get(name: str) -> Capture:
        if name not in made:
            sample, kw = CONFIGS[name]
            pcap, keys = base / f"{name}.pcap", base / f"{name}.keys"
            tlscap.make_capture(str(SAMPLES / f"{sample}.pcap"), str(pcap), str(keys), **kw)
            made[name] = Capture(name, pcap, keys, SAMPLES / f"{sample}.pcap")
        return made[name]

    return get


# --------------------------------------------------------------------------- our side

def run(pcap: Path, keylog=None, ports=()) -> list:
    d = Dissector(keylog=keylog, extra_ports=ports)
    events = []
    with open(pcap, "rb") as f:
        reader = open_capture(f)
        reader.on_secrets = d.add_secrets
        for rec in reader:
            events += d.feed(rec)
    return events + d.finish()


def frame_sequence(events) -> list:
    """(direction, performative or protocol header) in stream order."""
    out = []
    for e in events:
        if type(e) is Frame and e.name is not None:
            out.append((e.direction, e.name))
        elif type(e) is ProtocolHeader:
            out.append((e.direction, f"header {e.protocol_id}"))
    return out


def per_packet(events) -> dict:
    out = collections.defaultdict(list)
    for e in events:
        if type(e) is Frame and e.name is not None:
            out[e.packet].append(e.name)
    return dict(out)


def notes(events) -> list:
    return [e for e in events if type(e) in (StreamNote, PacketNote)]


# --------------------------------------------------------------------------- tshark side

def tshark_fields(pcap: Path, fields: list, keys: Path | None = None, port: int | None = None,
                  filt: str | None = None) -> list[list[str]]:
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "occurrence=a", "-E", "separator=/t"]
    if keys is not None:
        cmd += ["-o", f"tls.keylog_file:{keys}"]
    if port is not None:
        cmd += ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},amqp"]
    if filt:
        cmd += ["-Y", filt]
    for f in fields:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return [line.split("\t") for line in res.stdout.splitlines()]


def tshark_summary(cap: Capture, count: int = 12) -> str:
    """tshark's one-line view of the capture's first packets (said when a check of tshark's view fails)."""
    res = subprocess.run(["tshark", "-r", str(cap.pcap), "-c", str(count), "-d", f"tcp.port=={cap.port},tls"],
                         capture_output=True, text=True, timeout=120)
    return f"server port {cap.port}; tshark:\n{res.stdout}{res.stderr}"


def tshark_per_packet(cap: Capture, pcap: Path | None = None, malformed: set | None = None) -> dict:
    """Performatives per packet as tshark decodes them; ``malformed`` collects the packets tshark
    flags as malformed (tshark 4.0 fails on some large multi-frame transfers, in plain captures too)."""
    out = {}
    for num, perf, sasl, bad in tshark_fields(pcap or cap.pcap, ["frame.number", "amqp.performative",
                                                                 "amqp.sasl.method", "_ws.malformed"],
                                              keys=cap.keys, port=cap.port):
        names = [CODES[int(x, 0)] for x in (perf + "," + sasl).split(",") if x]
        if names:
            out[int(num)] = names
        if bad and malformed is not None:
            malformed.add(int(num))
    return out


def assert_agrees_with_tshark(ours: dict, cap: Capture, pcap: Path | None = None) -> None:
    malformed: set = set()
    theirs = tshark_per_packet(cap, pcap, malformed)
    if not malformed:
        assert ours == theirs
        return
    # where tshark decoded a packet cleanly, it agrees; before its first failure, everything agrees
    for k, names in theirs.items():
        if k not in malformed:
            assert ours.get(k) == names, k
    first = min(malformed)
    assert {k: v for k, v in ours.items() if k < first} == {k: v for k, v in theirs.items() if k < first}


def tshark_order(names_by_packet: dict) -> list:
    return [n for k in sorted(names_by_packet) for n in names_by_packet[k]]


# --------------------------------------------------------------------------- tests

@pytest.mark.parametrize("name", [n for n in CONFIGS if n != "amqp-tls-header"])
def test_decrypted_frames_match_plain_sample_and_tshark(captures, name):
    cap = captures(name)
    # the capture really negotiated the suite under test (tshark reads the ServerHello)
    # (told the server's port is TLS: tshark's own guess by port and heuristics can go elsewhere when
    # an ephemeral port of the capture is one another dissector claims)
    rows = tshark_fields(cap.pcap, ["tls.handshake.ciphersuite"], filt="tls.handshake.type == 2", port=cap.port)
    # (a HelloRetryRequest is a ServerHello too: two of them)
    assert [int(r[0], 0) for r in rows] == [SUITE_IDS[name]] * (2 if name == "tls13-hello-retry" else 1), \
        tshark_summary(cap)
    keylog = KeyLog(cap.keys.read_text())
    ours = run(cap.pcap, keylog)  # any port: found by its ClientHello random
    plain = run(cap.sample)
    # oracle 1: the very frames of the plain sample, in order, directions included
    seq = frame_sequence(ours)
    assert seq == frame_sequence(plain)
    assert len(seq) > 10
    # oracle 2: tshark with the same key log, packet by packet
    assert_agrees_with_tshark(per_packet(ours), cap)
    assert not [n for n in notes(ours) if n.note.severity in ("warn", "error")]
    hs = [n.note.message for n in notes(ours) if n.note.group == "tls"]
    assert hs[0].startswith("TLS handshake: ") and hs[0].endswith("; keys in the key log")
    assert hs[1:] == ["TLS alert: warning close_notify"] * 2  # both peers close cleanly


def test_amqp_tls_header_then_inband_tls(captures):
    cap = captures("amqp-tls-header")
    ours = run(cap.pcap, KeyLog(cap.keys.read_text()), ports=(cap.port,))
    seq = frame_sequence(ours)
    # both peers' TLS headers, in the clear, then the sample's stream decrypted
    assert seq[:2] == [(0, "header 2"), (1, "header 2")]
    assert seq[2:] == frame_sequence(run(cap.sample))
    assert frame_sequence(run(cap.pcap, KeyLog(cap.keys.read_text()))) == seq  # any port: the AMQP header
    # tshark shows the two TLS protocol headers in the same packets (it does not go on into the in-band TLS)
    rows = subprocess.run(
        ["tshark", "-r", str(cap.pcap), "-d", f"tcp.port=={cap.port},amqp", "-Y", "amqp.init.id == 2",
         "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, check=True, timeout=60).stdout.split()
    assert [e.packet for e in ours if type(e) is ProtocolHeader and e.protocol_id == 2] == [int(x) for x in rows]
    hs = [n.note.message for n in notes(ours) if n.note.message.startswith("TLS handshake")]
    assert hs == ["TLS handshake: TLS 1.3, TLS_AES_256_GCM_SHA384; keys in the key log"]


def test_missing_keys_note_counts_bytes(captures):
    cap = captures("tls13-chacha20")
    ours = run(cap.pcap, KeyLog(), ports=(cap.port,))
    assert frame_sequence(ours) == []
    tls_notes = [n.note.message for n in notes(ours) if n.note.group == "tls"]
    (random,) = [r[0].replace(":", "") for r in tshark_fields(cap.pcap, ["tls.handshake.random"],
                                                              filt="tls.handshake.type == 1", port=cap.port)]
    # tshark without keys: a TLS 1.3 record is either plaintext (tls.record.content_type: the hellos and
    # ChangeCipherSpec, which come first in a packet) or encrypted (tls.record.opaque_type)
    rows = tshark_fields(cap.pcap, ["tls.record.content_type", "tls.record.opaque_type", "tls.record.length"],
                         port=cap.port)
    encrypted = 0
    for plain_types, opaque_types, lens in rows:
        n_plain = len([t for t in plain_types.split(",") if t])
        sizes = [int(n) for n in lens.split(",") if n]
        assert len(sizes) == n_plain + len([t for t in opaque_types.split(",") if t])
        encrypted += sum(sizes[n_plain:])
    assert f"TLS, no keys for client random {random}: {encrypted} bytes not decrypted" in tls_notes
    # the connections table (and the report) count them too
    from amqp_dissect.pipelines.runs.local import read_analysis
    from amqp_dissect.render.report import render_text
    from amqp_dissect.results.report import build_report

    a = read_analysis(cap.pcap, ports=(cap.port,), keylog=KeyLog())
    (row,) = a.connections.to_dict("records")
    assert row["tls"] and row["tls_undecrypted_bytes"] == encrypted
    assert row["tls_note"].startswith(f"TLS, no keys for client random {random}")
    assert f"({encrypted:,} bytes not decrypted in all)" in render_text(build_report(a.analyzer))
    # without any key log every TLS byte after the first is counted: each record's 5-byte header and body
    whole = sum(5 * len(lens) + sum(lens) for lens in
                ([int(n) for n in r[2].split(",") if n] for r in rows))
    (row,) = read_analysis(cap.pcap, ports=(cap.port,)).connections.to_dict("records")
    assert row["tls"] and row["tls_undecrypted_bytes"] == whole
    assert "no key log" in row["tls_note"]
    # on a port that is not AMQP, a TLS stream without keys is not taken for AMQP at all
    assert [e for e in run(cap.pcap, KeyLog()) if type(e) is not PacketNote] == []


def test_keys_from_pcapng_decryption_secrets_block(captures, tmp_path):
    cap = captures("tls12-ecdhe-aes128gcm")
    ng = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{cap.keys}", str(cap.pcap), str(ng)], check=True,
                   capture_output=True, timeout=60)
    with open(ng, "rb") as f:
        reader = open_capture(f)
        list(reader)
        assert [t for t, _ in reader.secrets] == [0x544C534B]
    ours = run(ng)  # no key log given: the secrets come from the capture
    assert frame_sequence(ours) == frame_sequence(run(cap.sample))
    assert per_packet(ours) == tshark_per_packet(cap)


def _rewrite_pcap(src: Path, dst: Path, packet: int, edit) -> None:
    """Copy a classic pcap, passing record number ``packet`` (1-based) through ``edit(data) -> data``;
    the record keeps its original wire length (a shorter result is a snaplen cut)."""
    raw = src.read_bytes()
    out = bytearray(raw[:24])
    pos, index = 24, 0
    while pos < len(raw):
        sec, usec, incl, orig = struct.unpack_from("<IIII", raw, pos)
        data = raw[pos + 16 : pos + 16 + incl]
        pos += 16 + incl
        index += 1
        if index == packet:
            data = edit(data)
        out += struct.pack("<IIII", sec, usec, len(data), orig) + data
    dst.write_bytes(bytes(out))


def _data_packets(cap: Capture) -> list[int]:
    """Packets whose AMQP frames tshark decodes, past the SASL exchange."""
    return sorted(k for k, v in tshark_per_packet(cap).items() if not v[0].startswith("sasl"))


@pytest.mark.parametrize("name", ["tls13-aes128gcm", "tls12-ecdhe-cbc-sha1-etm", "tls12-ecdhe-chacha20"])
def test_truncated_record_is_a_gap_then_resync(captures, tmp_path, name):
    cap = captures(name)
    intact = tshark_per_packet(cap)
    victim = _data_packets(cap)[3]
    cut = tmp_path / "cut.pcap"
    _rewrite_pcap(cap.pcap, cut, victim, lambda data: data[: len(data) - 40])
    ours = run(cut, KeyLog(cap.keys.read_text()))
    got = per_packet(ours)
    expected = {k: v for k, v in intact.items() if k != victim}
    assert victim not in got
    # every other packet decodes as tshark decodes the intact capture: the layer resynchronised
    assert got == expected
    msgs = [n.note.message for n in notes(ours)]
    assert any("missing from the capture" in m and "TLS" in m for m in msgs)


@pytest.mark.parametrize("name", ["tls13-chacha20", "tls12-ecdhe-aes128gcm", "tls12-rsa-cbc-sha256-mte"])
def test_corrupted_record_fails_authentication(captures, tmp_path, name):
    cap = captures(name)
    intact = tshark_per_packet(cap)
    victim = _data_packets(cap)[2]
    bad = tmp_path / "bad.pcap"

    def flip(data: bytes) -> bytes:
        b = bytearray(data)
        b[-20] ^= 0x5A  # inside the last record's ciphertext / tag
        return bytes(b)

    _rewrite_pcap(cap.pcap, bad, victim, flip)
    ours = run(bad, KeyLog(cap.keys.read_text()))
    failed = [n for n in notes(ours) if "failed authentication" in n.note.message]
    assert len(failed) == 1 and failed[0].packet == victim and failed[0].note.severity == "error"
    got = per_packet(ours)
    # the frames of all other packets survive (packet sequence numbers continue after the bad record)
    assert {k: v for k, v in got.items() if k != victim} == {k: v for k, v in intact.items() if k != victim}


def test_dissector_pickles_midway_through_a_tls_stream(captures):
    import pickle

    cap = captures("tls13-chacha20")
    with open(cap.pcap, "rb") as f:
        records = list(open_capture(f))
    d = Dissector(keylog=KeyLog(cap.keys.read_text()), extra_ports=(cap.port,))
    events = []
    for i, rec in enumerate(records):
        events += d.feed(rec)
        if i == len(records) // 2:
            d = pickle.loads(pickle.dumps(d))
    events += d.finish()
    assert frame_sequence(events) == frame_sequence(run(cap.sample))


def test_no_keylog_keeps_the_old_opaque_note(captures):
    cap = captures("tls13-aes128gcm")
    ours = run(cap.pcap, None, ports=(cap.port,))
    assert frame_sequence(ours) == []
    assert any("TLS record without AMQP header" in n.note.message for n in notes(ours))


def test_layer_interface_split_feeding(captures):
    """Byte-at-a-time feeding gives the same inner stream as whole records (the record parser's
    buffering), checked against the plain sample's client bytes."""
    cap = captures("tls12-ecdhe-cbc-sha384-etm")
    from amqp_dissect.capture.netparse import parse_segment
    from amqp_dissect.capture.tcp import TcpReassembler
    from amqp_dissect.events import StreamData, StreamGap

    tcp = TcpReassembler(server_ports=frozenset({cap.port}))
    layer = TlsLayer("c", KeyLog(cap.keys.read_text()))
    inner = {0: bytearray(), 1: bytearray()}
    with open(cap.pcap, "rb") as f:
        for rec in open_capture(f):
            seg = parse_segment(rec.linktype, rec.data)
            if seg is None:  # the capture helper's closing UDP marker
                continue
            for ev in tcp.feed(seg, rec.ts, rec.index):
                if type(ev) is StreamData:
                    for i in range(len(ev.data)):
                        for out in layer.feed(ev.direction, ev.data[i : i + 1], rec.ts, rec.index):
                            assert type(out) is not StreamGap
                            if type(out) is StreamData:
                                inner[out.direction] += out.data
    chunks = tlscap.sample_streams(str(cap.sample))
    for direction in (0, 1):
        assert bytes(inner[direction]) == b"".join(c for d, c in chunks if d == direction)


def test_tls13_key_update(tmp_path):
    """openssl s_client's KeyUpdate commands (k: update, K: update and request the peer's): the
    plaintext after each update is decrypted with the next traffic secret."""
    _need_tools()
    from amqp_dissect.capture.netparse import parse_segment
    from amqp_dissect.capture.tcp import TcpReassembler
    from amqp_dissect.events import StreamData

    pcap, keys = tmp_path / "ku.pcap", tmp_path / "ku.keys"
    lines = [b"hello one", b"k", b"hello two", b"K", b"hello three"]
    port = tlscap.make_keyupdate_capture(str(pcap), str(keys), lines)
    # tshark's view: the KeyUpdate handshake messages (type 24) are in the capture
    updates = tshark_fields(pcap, ["frame.number"], keys=keys, filt="tls.handshake.type == 24")
    assert len(updates) >= 2
    tcp = TcpReassembler(server_ports=frozenset({port}))
    layer = TlsLayer("c", KeyLog(keys.read_text()))
    inner = {0: b"", 1: b""}
    out = []
    with open(pcap, "rb") as f:
        for rec in open_capture(f):
            seg = parse_segment(rec.linktype, rec.data)
            if seg is None:
                continue
            for ev in tcp.feed(seg, rec.ts, rec.index):
                if type(ev) is StreamData:
                    for o in layer.feed(ev.direction, ev.data, ev.ts, ev.packet):
                        if type(o) is StreamData:
                            inner[o.direction] += o.data
                        else:
                            out.append(o)
    out += layer.finish(None, None)
    assert inner[0] == b"hello one\nhello two\nhello three\n"
    msgs = [o.note.message for o in out]
    assert [o.packet for o in out if o.note.message == "TLS 1.3 KeyUpdate"] == [int(r[0]) for r in updates]
    assert not [m for m in msgs if "failed" in m or "not decrypted" in m]
    assert msgs.count("TLS alert: warning close_notify") == 2  # both directions still in step at the end


def test_damaged_streams_never_raise(captures):
    """Random byte flips, cuts and gaps in both directions, fed in random chunks: the layer only
    ever returns events (notes, gaps, data), and pickles midway (like the Dissector's state)."""
    import pickle
    import random

    from amqp_dissect.events import StreamData, StreamGap

    cap = captures("tls12-ecdhe-cbc-sha1-mte")
    streams = {0: bytearray(), 1: bytearray()}
    order = []
    from amqp_dissect.capture.netparse import parse_segment
    from amqp_dissect.capture.tcp import TcpReassembler

    tcp = TcpReassembler(server_ports=frozenset({cap.port}))
    with open(cap.pcap, "rb") as f:
        for rec in open_capture(f):
            seg = parse_segment(rec.linktype, rec.data)
            if seg is not None:
                for ev in tcp.feed(seg, rec.ts, rec.index):
                    if type(ev) is StreamData:
                        order.append((ev.direction, len(streams[ev.direction]), len(ev.data)))
                        streams[ev.direction] += ev.data
    keylog = KeyLog(cap.keys.read_text())
    rng = random.Random(1234)
    for trial in range(40):
        data = {d: bytearray(b) for d, b in streams.items()}
        for _ in range(rng.randrange(1, 6)):
            d = rng.randrange(2)
            data[d][rng.randrange(len(data[d]))] ^= 1 << rng.randrange(8)
        layer = TlsLayer("c", keylog, records=[])
        for i, (d, start, n) in enumerate(order):
            chunk = bytes(data[d][start : start + n])
            if rng.random() < 0.1:
                cut = rng.randrange(n + 1)
                out = layer.feed(d, chunk[:cut], 0.0, i) + layer.gap(d, n - cut, 0.0, i)
            else:
                out = []
                p = 0
                while p < n:
                    k = rng.randrange(1, 200)
                    out += layer.feed(d, chunk[p : p + k], 0.0, i)
                    p += k
            assert all(type(e) in (StreamData, StreamGap, PacketNote) for e in out)
            if i == len(order) // 2 and trial % 10 == 0:
                layer = pickle.loads(pickle.dumps(layer))
        assert all(type(e) is PacketNote for e in layer.finish(None, None))


def test_keylog_parsing():
    r = "ab" * 32
    text = (f"# comment\nCLIENT_RANDOM {r} {'11' * 48}\nCLIENT_TRAFFIC_SECRET_0 {r} {'22' * 32}\n"
            f"EXPORTER_SECRET {r} {'33' * 32}\nCLIENT_RANDOM zz 00\nCLIENT_RANDOM {'ab' * 31} {'11' * 48}\n")
    kl = KeyLog(text)
    assert kl.get(bytes.fromhex(r)) == {"CLIENT_RANDOM": bytes.fromhex("11" * 48),
                                        "CLIENT_TRAFFIC_SECRET_0": bytes.fromhex("22" * 32)}
    assert kl.lines_ignored == 3
    assert KeyLog(kl.text()).secrets == kl.secrets


# --------------------------------------------------------------------------- shells

def _cli(*args, env=None):
    import sys

    res = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", *map(str, args)], capture_output=True, text=True,
                         timeout=300, env=env)
    return res


def test_cli_keylog_option_env_default_and_verbose_records(captures, tmp_path):
    cap = captures("tls12-ecdhe-chacha20")
    plain = _cli("report", "--format", "json", cap.sample)
    assert plain.returncode == 0, plain.stderr
    import json

    res = _cli("report", "--format", "json", "--keylog", cap.keys, cap.pcap)
    assert res.returncode == 0, res.stderr
    without = _cli("report", "--format", "json", cap.pcap)
    env = dict(os.environ, SSLKEYLOGFILE=str(cap.keys))
    from_env = _cli("report", "--format", "json", cap.pcap, env=env)
    untimed = lambda text: {k: v for k, v in json.loads(text)["summary"].items() if "seconds" not in k}  # noqa: E731
    assert untimed(res.stdout) == untimed(plain.stdout)  # the replay keeps the frames, not the pauses
    assert json.loads(res.stdout)["connections"] and not json.loads(without.stdout)["connections"]
    assert from_env.stdout == res.stdout
    # the deliveries table of the decrypted capture has the plain sample's outcomes, in order
    got = _cli("deliveries", "--format", "csv", "--keylog", cap.keys, cap.pcap)
    want = _cli("deliveries", "--format", "csv", cap.sample)
    col = lambda text, name: [r[name] for r in __import__("csv").DictReader(text.splitlines())]  # noqa: E731
    assert col(got.stdout, "outcome") == col(want.stdout, "outcome") and len(col(want.stdout, "outcome")) > 5
    # -V: a "Transport Layer Security" block with one line per record the packet completed
    v = _cli("frames", "-V", "--keylog", cap.keys, "--port", cap.port, cap.pcap)
    assert v.returncode == 0, v.stderr
    tls_lines = [line.strip() for line in v.stdout.splitlines() if line.startswith("    TLS record: ")]
    # the ServerHello packet (it carries the handshake note) shows the plaintext handshake records, the
    # packets with AMQP frames show the records they completed, decrypted
    assert any(line.startswith("TLS record: Handshake, ") for line in tls_lines)
    app = [line for line in tls_lines if line.endswith(" bytes)") and "-> Application Data (" in line]
    assert len(app) >= len(per_packet(run(cap.pcap, KeyLog(cap.keys.read_text()))))
    missing = _cli("report", "--keylog", tmp_path / "nope.txt", cap.pcap)
    assert missing.returncode == 3 and "nope.txt" in missing.stderr


def test_spark_job_ships_the_keylog(captures, tmp_path, spark):
    """pipelines/spark.py: the key log text travels to the executors in the flow parameters, and
    the key logs a pcapng carries (Decryption Secrets Blocks) are used too."""
    import pandas as pd

    from amqp_dissect.pipelines.runs.local import read_analysis
    from amqp_dissect.pipelines.spark import run_archive

    cap = captures("tls13-aes256gcm")
    keys = cap.keys.read_text()
    local = read_analysis(str(cap.pcap), keylog=KeyLog.from_text(keys))  # (a str is a path)
    ng = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{cap.keys}", str(cap.pcap), str(ng)], check=True,
                   capture_output=True, timeout=60)
    res = run_archive(spark, [str(cap.pcap)], str(tmp_path / "out"), partitions=2, keylog=keys)
    res_plain = run_archive(spark, [str(cap.pcap)], str(tmp_path / "out2"), partitions=2)
    res_ng = run_archive(spark, [str(ng)], str(tmp_path / "out3"), partitions=2)  # no key log given
    deliveries = pd.read_parquet(tmp_path / "out" / "deliveries")
    assert res["counts"]["deliveries"] == len(local.deliveries) == len(deliveries) > 0
    assert sorted(deliveries.outcome.astype(str)) == sorted(local.deliveries.outcome.astype(str))
    assert res_plain["counts"]["deliveries"] == 0
    embedded = pd.read_parquet(tmp_path / "out3" / "deliveries")
    assert sorted(embedded.outcome.astype(str)) == sorted(local.deliveries.outcome.astype(str))


def test_tls_on_other_port_shown_only_when_the_decrypted_stream_is_amqp(captures, tmp_path):
    """A key log from SSLKEYLOGFILE holds every TLS session of the machine: a decrypted stream that
    does not start with an AMQP header (here HTTP) on a port that is not AMQP's is not shown."""
    cap = captures("tls13-aes128gcm")
    http = tmp_path / "http.pcap"
    sample = tmp_path / "http-sample.pcap"
    # a plain "sample" with one HTTP request and response, replayed over TLS like the AMQP samples
    import dpkt

    with open(sample, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for i, (sport, dport, seq, ack, flags, payload) in enumerate([
            (40000, 8080, 1000, 0, dpkt.tcp.TH_SYN, b""),
            (8080, 40000, 5000, 1001, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, b""),
            (40000, 8080, 1001, 5001, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            (8080, 40000, 5001, 1028, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        ]):
            t = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, data=payload)
            ip = dpkt.ip.IP(src=bytes([127, 0, 0, 1]), dst=bytes([127, 0, 0, 1]), p=6, data=t)
            ip.len = len(ip)
            eth = dpkt.ethernet.Ethernet(src=b"\0" * 6, dst=b"\0" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            w.writepkt(bytes(eth), ts=1.0 + i)
    keys = tmp_path / "http.keys"
    tlscap.make_capture(str(sample), str(http), str(keys), tls="1.3")
    both = KeyLog(keys.read_text() + cap.keys.read_text())
    events = run(http, both)
    assert [e for e in events if type(e) is not PacketNote] == []
    # forced with --port, the same stream is decrypted and the AMQP decoder finds no AMQP header in it:
    # it names the protocol the decrypted bytes start with (HTTP)
    port = _server_port(http)
    forced_events = run(http, both, ports=(port,))
    forced = [n.note.message for n in notes(forced_events)]
    assert any("keys in the key log" in m for m in forced)
    assert [e.protocol for e in forced_events if type(e) is OtherProtocolNote] == ["HTTP"]
    # the same key log still shows the AMQP one
    assert frame_sequence(run(cap.pcap, both)) == frame_sequence(run(cap.sample))
