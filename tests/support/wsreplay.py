"""Replay the TCP streams of a capture as AMQP over WebSocket on the loopback, captured by tcpdump.

    python tests/support/wsreplay.py SAMPLE.pcap OUT.pcap [--deflate]

Every TCP connection of SAMPLE (split into streams with dpkt, not with amqp-dissect) is
replayed, one after the other, through a real WebSocket client and server (the
``websockets`` package, subprotocol ``amqp``) on 127.0.0.1, or ::1 when the sample is
IPv6: each chunk of the original TCP payload (one segment) is sent, in the original order
across both directions, as one binary message by the side that sent it, and the replay
waits until the other side has received it before sending the next one, so the order on
the wire is the original order.  Every third message is sent fragmented (three frames),
every fifth is preceded by a ping (answered by a pong); the client closes with
1000 'replay done'.  ``--deflate`` negotiates permessage-deflate (the package's default).
``tcpdump -i lo -U -w OUT port P`` records it all; the function returns how many TCP
connections, messages and pings were replayed.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time

import dpkt


def tcp_streams(path: str) -> list[tuple[int, list[tuple[int, bytes]]]]:
    """Per TCP connection of a classic pcap, in order of first sight: (IP version,
    [(direction, payload), ...]) with direction 0 from the SYN's sender; retransmitted
    bytes are dropped."""
    conns: dict = {}
    order = []
    with open(path, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        linktype = reader.datalink()
        for _, buf in reader:
            if linktype == dpkt.pcap.DLT_EN10MB:
                pkt = dpkt.ethernet.Ethernet(buf).data
            elif linktype in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
                pkt = dpkt.loopback.Loopback(buf).data
            elif linktype == dpkt.pcap.DLT_LINUX_SLL:
                pkt = dpkt.sll.SLL(buf).data
            else:
                raise ValueError(f"link type {linktype} not handled")
            if not isinstance(pkt, (dpkt.ip.IP, dpkt.ip6.IP6)) or not isinstance(pkt.data, dpkt.tcp.TCP):
                continue
            tcp = pkt.data
            a = (pkt.src, tcp.sport)
            b = (pkt.dst, tcp.dport)
            key = (a, b) if (a, b) in conns else (b, a) if (b, a) in conns else None
            if key is None:
                if not tcp.flags & dpkt.tcp.TH_SYN or tcp.flags & dpkt.tcp.TH_ACK:
                    continue  # joined mid-connection: the samples never do
                key = (a, b)
                conns[key] = {"v": 6 if isinstance(pkt, dpkt.ip6.IP6) else 4, "next": [tcp.seq + 1, None],
                              "steps": []}
                order.append(key)
                continue
            c = conns[key]
            d = 0 if (a, b) == key else 1
            if tcp.flags & dpkt.tcp.TH_SYN:
                c["next"][d] = tcp.seq + 1
                continue
            data = bytes(tcp.data)
            if not data:
                continue
            nxt = c["next"][d]
            if nxt is not None:
                off = (nxt - tcp.seq) & 0xFFFFFFFF
                if off >= len(data) and off < 1 << 31:
                    continue  # a retransmission
                if off < 1 << 31:
                    data = data[off:]
            c["next"][d] = (tcp.seq + len(bytes(tcp.data))) & 0xFFFFFFFF
            c["steps"].append((d, data))
    return [(conns[k]["v"], conns[k]["steps"]) for k in order]


def wrap(steps):
    """The same chunks as WebSocket messages, in memory (the websockets package's sans-IO
    protocol objects, client frames masked): [(direction, wire bytes)], the handshake first."""
    from websockets.client import ClientProtocol
    from websockets.server import ServerProtocol
    from websockets.typing import Subprotocol
    from websockets.uri import parse_uri

    client = ClientProtocol(parse_uri("ws://broker.example/amqp"), subprotocols=[Subprotocol("amqp")])
    server = ServerProtocol(subprotocols=[Subprotocol("amqp")])
    client.send_request(client.connect())
    req = b"".join(client.data_to_send())
    server.receive_data(req)
    (r,) = server.events_received()
    server.send_response(server.accept(r))
    resp = b"".join(server.data_to_send())
    client.receive_data(resp)
    out = [(0, req), (1, resp)]
    for d, chunk in steps:
        side = client if d == 0 else server
        side.send_binary(chunk)
        out.append((d, b"".join(side.data_to_send())))
    return out


class PacketsLost(RuntimeError):
    """tcpdump reported packets dropped by the kernel: the capture is incomplete."""


class Tcpdump:
    """``tcpdump -i lo -U -w path port P``, started and stopped by its pid."""

    def __init__(self, path: str, port: int):
        self.path = path
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-B", "65536", "-s", "0", "-w", path, "port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        line = self.proc.stderr.readline().decode()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(f"tcpdump did not start: {line}{self.proc.stderr.read().decode()}")

    def stop(self) -> str:
        # -U writes each packet as it comes: wait until the file has stopped growing for half a second
        last, stable = -1, 0
        for _ in range(400):
            time.sleep(0.05)
            size = os.path.getsize(self.path)
            stable = stable + 1 if size == last else 0
            if stable >= 10:
                break
            last = size
        os.kill(self.proc.pid, signal.SIGINT)
        _, err = self.proc.communicate(timeout=20)
        err = err.decode()
        m = re.search(r"(\d+) packets? dropped by kernel", err)
        if m is None or int(m.group(1)):
            raise PacketsLost(f"tcpdump lost packets: {err}")
        return err


async def _replay(streams, deflate: bool, path: str, tls=None) -> dict:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    compression = "deflate" if deflate else None
    host = "::1" if streams and streams[0][0] == 6 else "127.0.0.1"
    accepted: asyncio.Queue = asyncio.Queue()

    async def handler(ws):
        done = asyncio.get_running_loop().create_future()
        await accepted.put((ws, done))
        await done  # the replay drives this connection
        await ws.wait_closed()

    counts = {"connections": 0, "messages": 0, "fragmented": 0, "pings": 0}
    srv_ctx, cli_ctx = tls if tls is not None else (None, None)
    async with serve(handler, host, 0, subprotocols=["amqp"], compression=compression, max_size=None,
                     ping_interval=None, ssl=srv_ctx) as server:
        port = server.sockets[0].getsockname()[1]
        dump = Tcpdump(path, port)
        try:
            for version, steps in streams:
                scheme = "wss" if cli_ctx is not None else "ws"
                url = f"{scheme}://[{host}]:{port}/amqp" if ":" in host else f"{scheme}://{host}:{port}/amqp"
                async with connect(url, subprotocols=["amqp"], compression=compression, max_size=None,
                                   ping_interval=None, ssl=cli_ctx) as client:
                    srv, done = await accepted.get()
                    ends = (client, srv)
                    for k, (direction, chunk) in enumerate(steps):
                        sender, receiver = ends[direction], ends[1 - direction]
                        if k % 5 == 4:
                            pong = await sender.ping(b"replay-%d" % k)
                            await pong
                            counts["pings"] += 1
                        if k % 3 == 2 and len(chunk) >= 3:
                            third = len(chunk) // 3
                            await sender.send([chunk[:third], chunk[third : 2 * third], chunk[2 * third :]])
                            counts["fragmented"] += 1
                        else:
                            await sender.send(chunk)
                        got = await receiver.recv()
                        assert got == chunk
                        counts["messages"] += 1
                    await client.close(1000, "replay done")
                    done.set_result(None)
                counts["connections"] += 1
        finally:
            dump.stop()
    return counts


def replay(sample: str, out: str, deflate: bool = False, tls=None) -> dict:
    """Replay ``sample``'s TCP streams over WebSocket into the capture ``out`` (see the module docstring).
    ``tls``: (server, client) ``ssl.SSLContext`` pair: over ``wss`` (TLS outside the WebSocket).

    A capture that tcpdump reports incomplete (packets dropped by the kernel on a busy
    machine) is made again, up to three times."""
    streams = tcp_streams(sample)
    for attempt in range(3):
        try:
            return asyncio.run(_replay(streams, deflate, out, tls))
        except PacketsLost:
            if attempt == 2:
                raise
        finally:
            # asyncio.run leaves no event loop set: code that asks for the current one afterwards
            # (pyshark, in the same test session) would fail
            asyncio.set_event_loop(asyncio.new_event_loop())


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(replay(args[0], args[1], deflate="--deflate" in sys.argv))
