"""Event types passed between the layers of the sans-IO core.

capture  (file object in)      -> CaptureRecord
netparse (CaptureRecord bytes) -> Segment
tcp      (Segment)             -> StreamOpened / StreamData / StreamGap / StreamClosed
amqp     (StreamData/StreamGap)-> amqp.* frame events (see dissector/amqp/framing.py)

All are small slotted classes (extension types when compiled: see events.pxd) or named
tuples: picklable, comparable, cheap, no IO.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import ExpertNote

# TCP flag bits
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10

# Directions inside a TCP connection
CLIENT_TO_SERVER = 0
SERVER_TO_CLIENT = 1


class _Event:
    """Equality and repr over ``__slots__`` (what a dataclass would give)."""

    __slots__ = ()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class CaptureRecord(_Event):
    """One packet record of a capture file.

    index: 1-based position in the capture; ts: integer nanoseconds since the epoch; linktype: LINKTYPE_* value
    (pcap numbering), per interface for pcapng; data: captured bytes (caplen); orig_len:
    length on the wire; interface: pcapng interface id."""

    __slots__ = ("index", "ts", "linktype", "data", "orig_len", "interface")

    def __init__(self, index, ts, linktype, data, orig_len, interface=0):
        self.index = index
        self.ts = ts
        self.linktype = linktype
        self.data = data
        self.orig_len = orig_len
        self.interface = interface


class Segment(NamedTuple):
    """A TCP segment extracted from a packet by the fast path."""

    src_ip: str  # dotted IPv4 or compressed IPv6 text
    dst_ip: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    ip_version: int  # 4 or 6


def endpoint(ip: str, port: int) -> str:
    """'ip:port', with IPv6 addresses in brackets: '[::1]:5672'."""
    if ":" in ip:
        return f"[{ip}]:{port}"
    return f"{ip}:{port}"


class StreamOpened(_Event):
    """First sight of a TCP connection (SYN, or mid-connection data).

    conn: stable connection id (see tcp.py); client / server: "ip:port" of the initiator (or
    best guess without SYN) and of the other side."""

    __slots__ = ("conn", "client", "server", "ts", "packet", "syn_seen")

    def __init__(self, conn, client, server, ts, packet, syn_seen):
        self.conn = conn
        self.client = client
        self.server = server
        self.ts = ts
        self.packet = packet
        self.syn_seen = syn_seen


class StreamData(_Event):
    """In-order bytes of one direction of a connection, delivered exactly once.

    direction: CLIENT_TO_SERVER or SERVER_TO_CLIENT; ts / packet: time and index of the
    packet whose arrival made these bytes deliverable."""

    __slots__ = ("conn", "direction", "data", "ts", "packet")

    def __init__(self, conn, direction, data, ts, packet):
        self.conn = conn
        self.direction = direction
        self.data = data
        self.ts = ts
        self.packet = packet


class StreamGap(_Event):
    """Bytes missing from the capture in one direction; never zero-filled.

    size: number of missing bytes (sequence-space distance); cause: None for bytes the capture
    lacks, else why an outer layer held them back (a WebSocket inflation cap, say)."""

    __slots__ = ("conn", "direction", "size", "ts", "packet", "cause")

    def __init__(self, conn, direction, size, ts, packet, cause=None):
        self.conn = conn
        self.direction = direction
        self.size = size
        self.ts = ts
        self.packet = packet
        self.cause = cause


class NotCaptured:
    """The cause of a StreamGap of bytes that were on the wire but that the capture's snap length
    cut off (``tcpdump -s N``): not lost, not captured.  ``snap_length``: the capture length of
    the cut packets (None until the dissector, which sees the capture records, says it)."""

    __slots__ = ("snap_length",)

    def __init__(self, snap_length=None):
        self.snap_length = snap_length

    def __str__(self):
        n = self.snap_length
        return "not captured (snap length " + ("unknown" if n is None else str(n)) + ")"

    def __repr__(self):
        return f"NotCaptured({self.snap_length!r})"


# the cause of the StreamGaps the TCP reassembler makes of cut payloads (the dissector replaces it
# with one that holds the snap length)
SNAP_CUT = NotCaptured()


class StreamClosed(_Event):
    """A direction (fin) or the whole connection (rst, idle, end) ended.

    direction: of the FIN/RST sender, -1 for idle/end; kind: "fin" | "rst" | "idle" | "end"."""

    __slots__ = ("conn", "direction", "kind", "ts", "packet")

    def __init__(self, conn, direction, kind, ts, packet):
        self.conn = conn
        self.direction = direction
        self.kind = kind
        self.ts = ts
        self.packet = packet


class PacketNote(_Event):
    """An expert note about a packet that belongs to no frame (capture / IP / TCP level)."""

    __slots__ = ("packet", "ts", "note", "conn", "extra")

    def __init__(self, packet, ts, note: ExpertNote, conn=None, extra=None):
        self.packet = packet
        self.ts = ts
        self.note = note
        self.conn = conn
        self.extra = {} if extra is None else extra
