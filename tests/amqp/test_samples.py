"""Every real sample capture against the ground truth its generating script recorded.

The truth (``samples/*.truth.json``) comes from the proton *clients* — their own
frame trace, what they sent, received and negotiated — never from the capture.
"""

from __future__ import annotations

import glob
import json
import os
from collections import Counter

import pytest

from amqp_dissect.amqp.framing import Frame, ProtocolHeader, StreamNote
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples")
TRUTHS = sorted(glob.glob(os.path.join(SAMPLES, "*.truth.json")))


def dissect(path, feed_bytes=None):
    d = Dissector()
    events = []
    with open(path, "rb") as f:
        reader = open_capture(f)
        for rec in reader:
            events += d.feed(rec)
        assert reader.error is None
    events += d.finish()
    return events


@pytest.fixture(scope="module", params=TRUTHS, ids=[os.path.basename(t).split(".")[0] for t in TRUTHS])
def sample(request):
    truth = json.load(open(request.param))
    events = dissect(os.path.join(SAMPLES, truth["capture"]))
    return truth, events


def test_every_sample_has_truth():
    pcaps = sorted(glob.glob(os.path.join(SAMPLES, "*.pcap")))
    assert len(pcaps) >= 8
    assert [p[:-5] for p in pcaps] == [t[: -len(".truth.json")] for t in TRUTHS]


def _connections(events):
    """Our connections, each: {'open': client open fields, 'frames': [Frame], 'headers': [...]}."""
    conns: dict = {}
    for e in events:
        if isinstance(e, (Frame, ProtocolHeader)):
            c = conns.setdefault(e.conn, {"frames": [], "headers": [], "client_open": None, "server_open": None})
            if isinstance(e, Frame):
                c["frames"].append(e)
                if e.name == "open":
                    c["client_open" if e.direction == 0 else "server_open"] = e.performative
            else:
                c["headers"].append(e)
    return conns


def _match(truth_conn, conns):
    for cid, c in conns.items():
        op = c["client_open"]
        if op is not None and op.field("container-id") == truth_conn["container_id"]:
            return c
    # no open (e.g. SASL failure): match by order among connections without an open
    without = [c for c in conns.values() if c["client_open"] is None]
    assert without, f"no connection matches {truth_conn['container_id']}"
    return without[0]


def _counts(frames, direction):
    out = Counter()
    for f in frames:
        if f.direction != direction:
            continue
        out["empty" if f.kind == "heartbeat" else f.name] += 1
    return dict(out)


def test_no_decode_problems(sample):
    truth, events = sample
    bad = [
        (e.packet, n.message)
        for e in events
        if isinstance(e, Frame)
        for n in e.notes
        if n.severity in ("warn", "error")
    ]
    assert bad == []
    notes = [e.note.message for e in events if isinstance(e, StreamNote)]
    assert notes == []
    assert all(e.performative is not None for e in events if isinstance(e, Frame) and e.kind != "heartbeat")


def test_connections_and_frame_counts_equal_truth(sample):
    truth, events = sample
    conns = _connections(events)
    assert len(conns) == truth["connection_count"]
    for tc in truth["connections"]:
        c = _match(tc, conns)
        assert _counts(c["frames"], 0) == tc["frame_counts_sent"]
        assert _counts(c["frames"], 1) == tc["frame_counts_received"]
        hdr = {0: [], 1: []}
        for h in c["headers"]:
            hdr[h.direction].append(h.name.split()[0])
        assert hdr[0] == tc["protocol_headers_sent"]
        assert hdr[1] == tc["protocol_headers_received"]


def test_negotiation_equals_truth(sample):
    truth, events = sample
    conns = _connections(events)
    for tc in truth["connections"]:
        c = _match(tc, conns)
        init = [f for f in c["frames"] if f.name == "sasl-init"]
        outcome = [f for f in c["frames"] if f.name == "sasl-outcome"]
        if tc["sasl_mechanism"]:
            assert [str(f.performative.field("mechanism")) for f in init] == [tc["sasl_mechanism"]]
        if tc["sasl_outcome"] is not None:
            assert [f.performative.field("code") for f in outcome] == [tc["sasl_outcome"]]
        op, sop = c["client_open"], c["server_open"]
        if op is not None:
            assert op.effective("max-frame-size") == tc["max_frame_size_requested"]
            idle = op.field("idle-time-out")
            assert (None if idle in (None,) or idle.__class__.__name__ == "_Absent" else idle) == tc[
                "idle_timeout_requested_ms"
            ]
        if sop is not None:
            assert sop.field("container-id") == tc["remote_container_id"]
            assert sop.effective("max-frame-size") == tc["remote_max_frame_size"]
            assert sop.field("idle-time-out") == tc["remote_idle_timeout_ms"]


def test_messages_sizes_and_multi_frame_deliveries(sample):
    """Encoded message sizes the clients know equal our reassembled message sizes, link by link."""
    truth, events = sample
    conns = _connections(events)
    for link in truth["links"]:
        tc = truth["connections"][link["connection"]]
        c = _match(tc, conns)
        # handles of this link: from the attach frames carrying its name
        direction = 0 if link["role"] == "sender" else 1
        attaches = [f for f in c["frames"] if f.name == "attach" and f.performative.field("name") == link["name"]]
        # handles are per session: identify the link by (channel, handle) on the sending side
        keys = {(f.channel, f.performative.field("handle")) for f in attaches if f.direction == direction}
        assert len(keys) <= 1, (link["name"], keys)
        if not keys:  # the sending side never attached (e.g. the broker refused the link)
            assert link["encoded_sizes"] == [] and not link["attached"], link["name"]
            continue
        done = [
            f
            for f in c["frames"]
            if f.direction == direction
            and f.delivery is not None
            and (f.delivery.channel, f.delivery.handle) in keys
        ]
        expected = link["encoded_sizes"]
        got = [f.delivery.message_size for f in done if not f.delivery.aborted]
        assert got == expected, link["name"]
        for f in done:
            assert f.delivery.sections() is not None
        presettled = [f for f in done if f.performative.field("settled") is True]
        if link["role"] == "sender":
            assert len(presettled) == link["presettled"]


def test_large_message_split_over_many_frames():
    truth = json.load(open(os.path.join(SAMPLES, "large_message.truth.json")))
    events = dissect(os.path.join(SAMPLES, "large_message.pcap"))
    done = [e for e in events if isinstance(e, Frame) and e.delivery is not None]
    # both directions: the client's transfer and the broker's, each split (max-frame-size 1024)
    assert [d.delivery.frames for d in done] == [
        truth["totals"]["transfer_frames_sent"],
        truth["totals"]["transfer_frames_received"],
    ]
    for d in done:
        sections = d.delivery.sections()
        # proton sends a bytes body as an amqp-value section holding binary
        body = [s for s in sections if s.name in ("data", "amqp-value")]
        assert len(body[0].value) == truth["links"][0]["body_sizes"][0]
        assert body[0].value == bytes(((i * 31 + 7) & 0xFF) for i in range(65536))
