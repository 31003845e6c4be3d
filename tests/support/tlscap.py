"""Make a real TLS capture on the loopback: the AMQP streams of a plain sample replayed over TLS.

    python tests/support/tlscap.py SAMPLE.pcap OUT.pcap KEYS.txt [--tls 1.2|1.3] [--cipher OPENSSL-NAME]
                           [--suite TLS13-SUITE] [--amqp-tls-header] [--no-etm] [--port P]

tcpdump captures port P on ``lo`` while a Python ``ssl`` (OpenSSL) server and
client, both writing ``keylog_filename``, replay the sample's first AMQP
connection: each direction's TCP payload (read with the project's own reader) is
sent by its side, in the original order, the other side reading exactly those
bytes before the next chunk.  ``--amqp-tls-header``: the client and server first
exchange the AMQP TLS protocol header (``AMQP 2 1 0 0``) in clear, then run TLS on
the same socket.  TLS 1.3 suites are chosen through an OpenSSL config file
(Python's ``ssl`` has no call for them), so this runs in its own process.

Needs root (tcpdump).  Prints nothing; exits non-zero on failure.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))


def sample_streams(path: str) -> list[tuple[int, bytes]]:
    """The (direction, payload) chunks of the sample's first TCP connection, in capture order."""
    from amqp_dissect.capture.netparse import parse_segment
    from amqp_dissect.capture.pcap import open_capture
    from amqp_dissect.capture.tcp import TcpReassembler
    from amqp_dissect.events import StreamData, StreamOpened

    tcp = TcpReassembler(server_ports=frozenset({5672}))
    first = None
    chunks: list[tuple[int, bytes]] = []

    def take(events):
        nonlocal first
        for ev in events:
            if type(ev) is StreamOpened and first is None:
                first = ev.conn
            elif type(ev) is StreamData and ev.conn == first:
                if chunks and chunks[-1][0] == ev.direction:
                    chunks[-1] = (ev.direction, chunks[-1][1] + ev.data)
                else:
                    chunks.append((ev.direction, ev.data))

    with open(path, "rb") as f:
        last = None
        for rec in open_capture(f):
            seg = parse_segment(rec.linktype, rec.data)
            if seg is not None:
                take(tcp.feed(seg, rec.ts, rec.index))
            last = rec
        take(tcp.finish(last.ts if last else 0.0, None))
    return chunks


def make_cert(directory: str) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
    cpath = os.path.join(directory, "cert.pem")
    kpath = os.path.join(directory, "key.pem")
    with open(cpath, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(kpath, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    return cpath, kpath


def _recv_exact(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        got = sock.recv(n - len(buf))
        if not got:
            raise EOFError(f"peer closed after {len(buf)} of {n} bytes")
        buf += got
    return bytes(buf)


def _replay(sock, side: int, chunks) -> None:
    for direction, data in chunks:
        if direction == side:
            sock.sendall(data)
        else:
            _recv_exact(sock, len(data))


def _contexts(args, keys: str, tmp: str):
    cert, key = make_cert(tmp)
    srv = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv.load_cert_chain(cert, key)
    cli = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cli.check_hostname = False
    cli.verify_mode = ssl.CERT_NONE
    cli.keylog_filename = keys
    for ctx in (srv, cli):
        ver = ssl.TLSVersion.TLSv1_3 if args.tls == "1.3" else ssl.TLSVersion.TLSv1_2
        ctx.minimum_version = ctx.maximum_version = ver
        if args.cipher:
            ctx.set_ciphers(args.cipher)
        if args.no_etm:
            ctx.options |= 0x00080000  # SSL_OP_NO_ENCRYPT_THEN_MAC
        ctx.options |= ssl.OP_NO_TICKET
    if args.server_curve:  # the client's default key share (X25519) is refused: HelloRetryRequest
        srv.set_ecdh_curve(args.server_curve)
    return srv, cli


class Dropped(RuntimeError):
    pass


def run(args, attempts: int = 4) -> None:
    """Make the capture; again when tcpdump reports packets dropped by the kernel (a loaded machine)."""
    for attempt in range(attempts):
        try:
            return run_once(args)
        except Dropped:
            if attempt == attempts - 1:
                raise
            for path in (args.out, args.keys):
                if os.path.exists(path):
                    os.unlink(path)


def run_once(args) -> None:
    chunks = sample_streams(args.sample)
    with tempfile.TemporaryDirectory() as tmp:
        srv_ctx, cli_ctx = _contexts(args, args.keys, tmp)
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", args.port))
        lsock.listen(1)
        port = lsock.getsockname()[1]
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-w", args.out, "-U", "--immediate-mode", "-B", "16384", "-s", "0", f"port {port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            line = dump.stderr.readline()  # "listening on lo, ..." once the capture runs
            if b"listening" not in line:
                raise RuntimeError(f"tcpdump did not start: {line!r}")
            errors: list = []

            def server():
                try:
                    conn, _ = lsock.accept()
                    if args.amqp_tls_header:
                        _recv_exact(conn, 8)
                        conn.sendall(b"AMQP\x02\x01\x00\x00")
                    with srv_ctx.wrap_socket(conn, server_side=True) as s:
                        _replay(s, 1, chunks)
                        try:
                            s.recv(1)  # the client's close_notify
                            s.unwrap()
                        except (OSError, ssl.SSLError):
                            pass
                except Exception as e:  # noqa: BLE001 -- reported by the main thread
                    errors.append(e)

            t = threading.Thread(target=server)
            t.start()
            raw = socket.create_connection(("127.0.0.1", port))
            if args.amqp_tls_header:
                raw.sendall(b"AMQP\x02\x01\x00\x00")
                _recv_exact(raw, 8)
            with cli_ctx.wrap_socket(raw, server_hostname="localhost") as s:
                _replay(s, 0, chunks)
                try:
                    s.unwrap()  # close_notify, then the server's
                except (OSError, ssl.SSLError):
                    pass
            t.join(30)
            if errors:
                raise errors[0]
            _wait_for_marker(args.out, port)
        finally:
            dump.send_signal(signal.SIGINT)
            _, err = dump.communicate(timeout=30)
            lsock.close()
        dropped = [line for line in err.decode().splitlines() if "dropped" in line and not line.startswith("0 ")]
        if dropped:
            raise Dropped(f"tcpdump lost packets: {dropped}")


_MARKER = b"tlscap: end of the replay"


def _wait_for_marker(path: str, port: int) -> None:
    """Send a UDP datagram to the port and wait until tcpdump has written it: everything
    before it is in the file then (-U writes each packet as it comes).  Readers of the
    capture see one UDP packet at the end, which is not TCP."""
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(600):
            u.sendto(_MARKER, ("127.0.0.1", port))
            time.sleep(0.05)
            with open(path, "rb") as f:
                if _MARKER in f.read():
                    return
        raise RuntimeError("tcpdump did not write the end marker")
    finally:
        u.close()


def make_keyupdate_capture(out: str, keys: str, lines: list[bytes]) -> int:
    """TLS 1.3 with KeyUpdate messages: ``openssl s_client`` sends ``lines`` to ``openssl s_server``;
    a line ``k`` (update) or ``K`` (update, and ask the peer to update too) is a command to
    s_client, not data.  Returns the server port.  (Python's ssl cannot send a KeyUpdate.)"""
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = make_cert(tmp)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-w", out, "-U", "--immediate-mode", "-B", "16384", "-s", "0",
                                 f"port {port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        server = client = None
        try:
            if b"listening" not in dump.stderr.readline():
                raise RuntimeError("tcpdump did not start")
            server = subprocess.Popen(["openssl", "s_server", "-accept", str(port), "-cert", cert, "-key", key,
                                       "-tls1_3", "-naccept", "1"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if b"ACCEPT" not in server.stdout.readline() + server.stdout.readline():
                raise RuntimeError("s_server did not start")
            client = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_3",
                                       "-keylogfile", keys], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            for line in lines:
                time.sleep(0.3)  # s_client reads a command only at the start of a read from stdin
                client.stdin.write(line + b"\n")
                client.stdin.flush()
            time.sleep(0.3)
            client.stdin.close()
            client.wait(30)
            server.stdin.close()
            server.wait(30)
            _wait_for_marker(out, port)
        finally:
            for p in (client, server):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
            dump.send_signal(signal.SIGINT)
            dump.communicate(timeout=30)
    return port


def openssl_conf(suite: str, directory: str) -> str:
    """An OpenSSL config that limits the TLS 1.3 suites to ``suite``."""
    path = os.path.join(directory, "openssl.cnf")
    with open(path, "w") as f:
        f.write("openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\n"
                "system_default = sys_sect\n[sys_sect]\nCiphersuites = " + suite + "\n")
    return path


def make_capture(sample: str, out: str, keys: str, tls: str = "1.3", cipher: str | None = None,
                 suite: str | None = None, amqp_tls_header: bool = False, no_etm: bool = False,
                 server_curve: str | None = None) -> None:
    """Run this script in a subprocess (the TLS 1.3 suite needs its own OpenSSL config)."""
    cmd = [sys.executable, os.path.abspath(__file__), sample, out, keys, "--tls", tls]
    if cipher:
        cmd += ["--cipher", cipher]
    if amqp_tls_header:
        cmd.append("--amqp-tls-header")
    if no_etm:
        cmd.append("--no-etm")
    if server_curve:
        cmd += ["--server-curve", server_curve]
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if suite:
            env["OPENSSL_CONF"] = openssl_conf(suite, tmp)
        subprocess.run(cmd, env=env, check=True, timeout=120)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sample")
    p.add_argument("out")
    p.add_argument("keys")
    p.add_argument("--tls", choices=("1.2", "1.3"), default="1.3")
    p.add_argument("--cipher", help="OpenSSL cipher string for TLS 1.2")
    p.add_argument("--suite", help="TLS 1.3 suite (sets OPENSSL_CONF for a child process)")
    p.add_argument("--amqp-tls-header", action="store_true")
    p.add_argument("--no-etm", action="store_true")
    p.add_argument("--server-curve", help="the server's only ECDH group (prime256v1: a TLS 1.3 HelloRetryRequest)")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    if args.suite and "OPENSSL_CONF" not in os.environ:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, OPENSSL_CONF=openssl_conf(args.suite, tmp))
            argv2 = [a for a in (argv or sys.argv[1:])]
            sys.exit(subprocess.run([sys.executable, os.path.abspath(__file__)] + argv2, env=env).returncode)
    run(args)


if __name__ == "__main__":
    main()
