"""Event types passed between the layers of the sans-IO core.

capture  (file object in)      -> CaptureRecord
netparse (CaptureRecord bytes) -> Segment
tcp      (Segment)             -> StreamOpened / StreamData / StreamGap / StreamClosed
amqp     (StreamData/StreamGap)-> amqp.* frame events (see dissector/amqp/framing.py)

All are plain slotted dataclasses / named tuples: picklable, cheap, no IO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


@dataclass(slots=True)
class CaptureRecord:
    """One packet record of a capture file."""

    index: int  # 1-based position in the capture
    ts: float  # epoch seconds
    linktype: int  # LINKTYPE_* value (pcap numbering), per interface for pcapng
    data: bytes  # captured bytes (caplen)
    orig_len: int  # length on the wire
    interface: int = 0  # pcapng interface id


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


@dataclass(slots=True)
class StreamOpened:
    """First sight of a TCP connection (SYN, or mid-connection data)."""

    conn: str  # stable connection id, see tcp.py
    client: str  # "ip:port" of the initiator (or best guess without SYN)
    server: str  # "ip:port" of the other side
    ts: float
    packet: int
    syn_seen: bool


@dataclass(slots=True)
class StreamData:
    """In-order bytes of one direction of a connection, delivered exactly once."""

    conn: str
    direction: int  # CLIENT_TO_SERVER or SERVER_TO_CLIENT
    data: bytes
    ts: float  # time of the packet whose arrival made these bytes deliverable
    packet: int  # index of that packet


@dataclass(slots=True)
class StreamGap:
    """Bytes missing from the capture in one direction; never zero-filled."""

    conn: str
    direction: int
    size: int  # number of missing bytes (sequence-space distance)
    ts: float
    packet: int


@dataclass(slots=True)
class StreamClosed:
    """A direction (fin) or the whole connection (rst, idle, end) ended."""

    conn: str
    direction: int  # direction of the FIN/RST sender; -1 for idle/end
    kind: str  # "fin" | "rst" | "idle" | "end"
    ts: float
    packet: int


@dataclass(slots=True)
class PacketNote:
    """An expert note about a packet that belongs to no frame (capture / IP / TCP level)."""

    packet: int
    ts: float
    note: ExpertNote
    conn: str | None = None
    extra: dict = field(default_factory=dict)
