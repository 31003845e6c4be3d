"""Say what cannot be seen: TLS without keys on a port that is not AMQP's, and the TLS and
WebSocket layers of a connection, in the report (text, JSON, HTML) and the connections table.

The captures are real, made here: a sample's AMQP connection replayed over TLS by Python's
``ssl`` (OpenSSL, ``keylog_filename``) on an ephemeral port (tests/support/tlscap.py), and over a
``websockets`` WebSocket (tests/support/wsreplay.py), both captured by tcpdump on the loopback.
Oracles: tshark's view of the same packets (the ClientHello's frame number and TCP ports, the
ServerHello's version and cipher suite, the upgrade request's URI) and the sample's ground truth.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from amqp_dissect.cli.main import main

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _need_tools():
    missing = [t for t in ("tcpdump", "tshark") if shutil.which(t) is None]
    problem = f"{', '.join(missing)} not installed" if missing else None
    if problem is None and os.geteuid() != 0:
        problem = "tcpdump needs root"
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {problem}; tests/install-deps.sh installs the tools", pytrace=False)
    pytest.skip(f"captures not made: {problem}")


@pytest.fixture(scope="module")
def caps(tmp_path_factory):
    _need_tools()
    import tlscap
    import wsreplay

    tmp = tmp_path_factory.mktemp("layers")
    tls, keys, ws = tmp / "tls.pcap", tmp / "keys.txt", tmp / "ws.pcap"
    tlscap.make_capture(str(SAMPLES / "outcomes.pcap"), str(tls), str(keys), tls="1.3",
                        suite="TLS_AES_256_GCM_SHA384")
    wsreplay.replay(str(SAMPLES / "outcomes.pcap"), str(ws))
    return {"tls": tls, "keys": keys, "ws": ws, "tmp": tmp}


def _tshark_v(pcap: Path, *args) -> str:
    r = subprocess.run(["tshark", "-r", str(pcap), "-V", *args], capture_output=True, text=True, check=True)
    return r.stdout


def _client_hello(pcap: Path) -> tuple:
    """(frame number, client port, server port) of the ClientHello, as tshark decodes it."""
    r = subprocess.run(["tshark", "-r", str(pcap), "-Y", "tls.handshake.type == 1", "-T", "fields",
                        "-e", "frame.number", "-e", "tcp.srcport", "-e", "tcp.dstport"],
                       capture_output=True, text=True, check=True)
    (line,) = r.stdout.split("\n")[:1]
    n, sport, dport = line.split("\t")
    return int(n), int(sport), int(dport)


def _report(capsys, *args) -> str:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def test_tls_without_keys_on_another_port_is_named(caps, capsys):
    """Read without a key log, the TLS stream on an ephemeral port is no AMQP connection, and the
    report says it was there: the stream (tshark's ClientHello frame and ports), that whether it
    carries AMQP is unknown, and the --keylog hint; text, JSON and HTML alike."""
    frame, sport, dport = _client_hello(caps["tls"])
    text = _report(capsys, "report", caps["tls"])
    assert "connections 0," in text
    (line,) = [ln for ln in text.splitlines() if ln.startswith("TLS not decrypted:")]
    assert line.startswith("TLS not decrypted: 1 stream on ports that are not AMQP ports (no key log;")
    assert f"127.0.0.1:{sport}-127.0.0.1:{dport} at packet {frame})" in line
    assert "whether it carries AMQP is unknown" in line and "--keylog FILE" in line
    doc = json.loads(_report(capsys, "report", caps["tls"], "-T", "json"))
    t = doc["capture"]["tls_not_decrypted"]
    assert t["streams"] == 1
    (first,) = t["first"]
    assert (first["packet"], first["client"], first["server"], first["why"]) == (
        frame, f"127.0.0.1:{sport}", f"127.0.0.1:{dport}", "no key log")
    page = caps["tmp"] / "tls.html"
    _report(capsys, "report", caps["tls"], "-T", "html", "-o", page)
    html = page.read_text()
    assert 'id="tls-not-decrypted"' in html and "--keylog FILE" in html
    # a key log without this stream's keys: the same, saying why
    other = caps["tmp"] / "other-keys.txt"
    other.write_text("CLIENT_RANDOM " + "00" * 32 + " " + "11" * 48 + "\n")
    text = _report(capsys, "report", caps["tls"], "--keylog", other)
    assert "(its ClientHello random is not in the key log; first" in text


def test_tls_version_and_cipher_with_the_key_log(caps, capsys):
    """With the key log: the connection is decoded, and its row and report line carry the TLS
    version and cipher suite tshark reads in the ServerHello; no 'not decrypted' line."""
    v = _tshark_v(caps["tls"], "-Y", "tls.handshake.type == 2", "-d", f"tcp.port=={_client_hello(caps['tls'])[2]},tls")
    version = re.search(r"Supported Version: (TLS 1\.\d) \(0x", v).group(1)
    cipher = re.search(r"Cipher Suite: (\S+) \(0x", v).group(1)
    assert (version, cipher) == ("TLS 1.3", "TLS_AES_256_GCM_SHA384")  # what tlscap was asked for
    text = _report(capsys, "report", caps["tls"], "--keylog", caps["keys"])
    assert "TLS not decrypted" not in text and "connections 1," in text
    assert f"  over TLS {version.split()[1]}, {cipher}\n" in text
    rows = [json.loads(x) for x in _report(capsys, "connections", caps["tls"], "--keylog", caps["keys"],
                                           "-T", "jsonl").splitlines()]
    (row,) = rows
    assert (row["tls"], row["tls_version"], row["tls_cipher"], row["websocket"], row["ws_path"]) == (
        True, version, cipher, False, None)


def test_websocket_named_with_its_path(caps, capsys):
    """Over a WebSocket: ``websocket`` true and ``ws_path`` the URI of tshark's upgrade request,
    in the table and the report text and HTML."""
    r = subprocess.run(["tshark", "-r", str(caps["ws"]), "-Y", "http.request", "-T", "fields",
                        "-e", "http.request.uri"], capture_output=True, text=True, check=True)
    (uri,) = r.stdout.split()
    rows = [json.loads(x) for x in _report(capsys, "connections", caps["ws"], "-T", "jsonl").splitlines()]
    (row,) = rows
    assert (row["websocket"], row["ws_path"], row["tls"], row["tls_version"]) == (True, uri, False, None)
    text = _report(capsys, "report", caps["ws"])
    assert f"  over WebSocket GET {uri}\n" in text
    page = caps["tmp"] / "ws.html"
    _report(capsys, "report", caps["ws"], "-T", "html", "-o", page)
    assert f"over WebSocket GET {uri}" in page.read_text()


def test_plain_connections_say_nothing_of_layers(capsys):
    """A plain sample: no layer line, the columns say so (websocket false, the rest null)."""
    text = _report(capsys, "report", SAMPLES / "outcomes.pcap")
    assert "  over " not in text and "TLS not decrypted" not in text
    (row,) = [json.loads(x) for x in _report(capsys, "connections", SAMPLES / "outcomes.pcap",
                                             "-T", "jsonl").splitlines()]
    assert (row["tls"], row["tls_version"], row["tls_cipher"], row["websocket"], row["ws_path"]) == (
        False, None, None, False, None)


def test_tls_not_decrypted_counted_by_every_worker(caps, capsys, tmp_path):
    """Two TLS streams (two replays, on two ephemeral ports) and a plain sample in one capture:
    the report names as many streams as tshark finds ClientHellos, with -j 2 as without (each
    worker's dissector sees its own flows only; the parts are added up)."""
    import tlscap

    second, keys2 = tmp_path / "tls2.pcap", tmp_path / "keys2.txt"
    tlscap.make_capture(str(SAMPLES / "outcomes.pcap"), str(second), str(keys2), tls="1.2",
                        cipher="ECDHE-RSA-AES128-GCM-SHA256")
    both = tmp_path / "both.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(both), str(caps["tls"]), str(second),
                    str(SAMPLES / "outcomes.pcap")], check=True)
    hellos = subprocess.run(["tshark", "-r", str(both), "-Y", "tls.handshake.type == 1", "-T", "fields",
                             "-e", "frame.number"], capture_output=True, text=True, check=True).stdout.split()
    assert len(hellos) == 2
    one = json.loads(_report(capsys, "report", both, "-T", "json"))["capture"]["tls_not_decrypted"]
    two = json.loads(_report(capsys, "report", both, "-T", "json", "-j", "2"))["capture"]["tls_not_decrypted"]
    assert one == two
    assert one["streams"] == 2 and [x["packet"] for x in one["first"]] == [int(n) for n in hellos]
