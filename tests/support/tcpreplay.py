"""Replay the TCP streams of a capture over plain TCP on the loopback, on a port of your choice,
captured by tcpdump.

    python tests/support/tcpreplay.py SAMPLE.pcap OUT.pcap [--port 6000] [--client-port N]

Every TCP connection of SAMPLE (split into streams by wsreplay.tcp_streams, with dpkt) is
replayed, one after the other, through a real client socket (an ephemeral port the kernel picks)
(or ``--client-port``, bound before connecting) and a server socket listening on 127.0.0.1:PORT
(or [::1] for an IPv6 sample): each chunk of the
original payload (one segment) is sent by the side that sent it, in the original order across
both directions, and the replay waits until the other side has received it before sending the
next one, so the order on the wire is the original one.  ``tcpdump -i lo -U -w OUT port PORT``
records it all.  Used to make captures of AMQP on a port that is not 5672/5671 (cut with
``editcap`` to join a connection mid-stream: see tests/capture/test_tcp_roles.py).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wsreplay import Tcpdump, tcp_streams  # noqa: E402


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        b = sock.recv(n - len(got))
        if not b:
            raise RuntimeError("peer closed early")
        got += b
    return bytes(got)


def replay(sample: str, out: str, port: int = 6000, client_port: int = 0) -> int:
    """Replay ``sample`` into ``out``; returns the number of connections replayed."""
    streams = tcp_streams(sample)
    v6 = any(v == 6 for v, _ in streams)
    host = "::1" if v6 else "127.0.0.1"
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    dump = Tcpdump(out, port)
    try:
        lsock = socket.socket(fam, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((host, port))
        lsock.listen(1)
        for _, steps in streams:
            c = socket.socket(fam, socket.SOCK_STREAM)
            if client_port:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                c.bind((host, client_port))
            c.connect((host, port))
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s, _ = lsock.accept()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ends = (c, s)
            for d, data in steps:
                ends[d].sendall(data)
                _recv_exactly(ends[1 - d], len(data))
            c.close()
            s.recv(1)  # the client's FIN
            s.close()
        lsock.close()
    finally:
        dump.stop()
    return len(streams)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sample")
    ap.add_argument("out")
    ap.add_argument("--port", type=int, default=6000)
    ap.add_argument("--client-port", type=int, default=0, help="the client's port (default: the kernel's choice)")
    a = ap.parse_args()
    print(f"{replay(a.sample, a.out, a.port, a.client_port)} connection(s) replayed into {a.out}")
