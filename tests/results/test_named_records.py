"""Records that cross modules are named (issue 42): the longest silence of each side of a
connection (written by the connection's rules, read by the idle-time-out diagnosis), a message's
deliveries (kept by the messages matcher, read by the report's messages section and carried
between ``-j`` processes).

Oracles: tshark's AMQP frames (the time and packet of each frame of each side: the longest gap
between two of them is the longest silence), and the matcher fed in one process (its rows are
what the parts of two processes, carried as a worker's part is, must give).
"""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import pytest

from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.results.messages import MessageDelivery, MessageMatcher

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CAPTURES = sorted(SAMPLES.glob("*.pcap")) + sorted((SAMPLES / "messages").glob("*.pcap"))


def _port(peer: str) -> int:
    return int(peer.rsplit(":", 1)[1])


def _tshark_amqp_frames(pcap: Path) -> dict:
    """(source port, destination port) -> [(time ns, packet)] of the packets carrying an AMQP
    frame (type 0: not a SASL frame, not a protocol header), by tshark."""
    r = subprocess.run(["tshark", "-r", str(pcap), "-Y", "amqp", "-T", "fields", "-e", "frame.number",
                        "-e", "frame.time_epoch", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "amqp.type"],
                       capture_output=True, text=True, check=True)
    out: dict = {}
    for line in r.stdout.splitlines():
        num, epoch, sport, dport, types = (line.split("\t") + [""] * 5)[:5]
        if "0" not in types.split(","):
            continue
        secs, frac = epoch.split(".")
        out.setdefault((int(sport), int(dport)), []).append((int(secs) * 10**9 + int(frac[:9].ljust(9, "0")),
                                                             int(num)))
    return out


def _longest_gap(frames: list) -> tuple:
    """(length, start, end, packet that ended it) of the longest gap between consecutive frames."""
    best = (0, None, None, None)
    for (a, _), (b, nb) in zip(frames, frames[1:]):
        if b - a > best[0]:
            best = (b - a, a, b, nb)
    return best


@pytest.mark.parametrize("pcap", CAPTURES, ids=lambda p: p.name)
def test_longest_silence_of_each_side_is_tsharks_longest_gap_between_its_frames(pcap):
    frames = _tshark_amqp_frames(pcap)
    conns = [c for c in read_analysis(pcap).analyzer.connections.values() if hasattr(c, "silence")]
    assert conns
    for c in conns:
        assert c.loss is None  # (a loss makes silences unknown: these captures have none)
        for d, (src, dst) in enumerate(((c.client, c.server), (c.server, c.client))):
            sil = c.silence[d]
            got = (sil.longest, sil.start, sil.end, sil.end_packet)
            assert got == _longest_gap(frames.get((_port(src), _port(dst)), [])), (c.id, d)
            assert sil.unknown == 0


def _delivery_rows(pcap: Path) -> list:
    return read_analysis(pcap, messages=True).analyzer.delivery_rows()


@pytest.mark.parametrize("name", ["topic_fanout", "redeliveries", "request_reply"])
def test_messages_matched_in_two_parts_carried_between_processes_as_in_one(name):
    rows = _delivery_rows(SAMPLES / "messages" / f"{name}.pcap")
    one = MessageMatcher().add_all(rows)
    kept = [d for m in one.messages.values() for d in m.deliveries]
    assert kept and all(type(d) is MessageDelivery for d in kept)
    # the deliveries by name: each is a row of the deliveries table
    named = ("connection", "link", "link_index", "address", "sender_side", "first_time", "first_packet",
             "outcome_time", "outcome_packet")
    table = {tuple(r[k] for k in named) for r in rows}
    assert all(tuple(getattr(d, k) for k in named) in table for d in kept)
    # two workers (odd and even rows), their parts pickled as -j carries them, merged
    merged = MessageMatcher()
    for part in (MessageMatcher().add_all(rows[0::2]).part(), MessageMatcher().add_all(rows[1::2]).part()):
        merged.merge(pickle.loads(pickle.dumps(part)))
    assert merged.rows() == one.rows()
