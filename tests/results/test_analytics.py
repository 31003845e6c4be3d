"""Analytics on real AMQP traffic whose truth the test knows.

Oracles:
* proton pump traffic (tests/support/protonpump.py): the pump's server decides the
  outcome, the credit and whether it settles; proton's client engine reports
  the outcome it received (``Pump.client_outcomes``) and the server what it
  received (``Pump.received``); proton encodes the messages (``Message.encode``).
* numpy.percentile for the percentiles.
* samples/*.pcap with samples/*.truth.json: what the proton client did and saw,
  recorded by samples/generate.py, never derived from the capture.
"""

from __future__ import annotations

import glob
import json
import os

import numpy
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from proton import Disposition, Message

from eventkeys import analyze_file
from amqp_dissect.amqp.framing import AmqpConnection, Frame
from amqp_dissect.results.analytics import Analyzer, percentile
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from protonpump import Pump

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")

OUTCOME_NAMES = {
    Disposition.ACCEPTED: "accepted",
    Disposition.REJECTED: "rejected",
    Disposition.RELEASED: "released",
    Disposition.MODIFIED: "modified",
}


def analyze_pump(p: Pump):
    """Feed the pump's chunks (one packet each, irregular times) through framing and the analyzer."""
    c = AmqpConnection("conn", "10.0.0.1:40000", "10.0.0.2:5672")
    a = Analyzer()
    events = []
    t = 1000.0
    for i, (d, b) in enumerate(p.chunks):
        t += 0.001 * (1 + (i * 7) % 5)
        for ev in c.feed(d, b, t, i + 1):
            events.append(ev)
            a.feed(ev)
    for ev in c.finish():
        a.feed(ev)
    a.finish()
    return a, [e for e in events if isinstance(e, Frame)]


def _no_violations(a):
    assert a.violation_rows() == []


@pytest.mark.parametrize("outcome", ["accept", "reject", "release", "modify"])
def test_outcomes_equal_what_the_client_engine_saw(outcome):
    p = Pump(server_outcome=outcome)
    snd = p.sender("q")
    p.run()
    n = 6
    for i in range(n):
        p.send(snd, Message(body=f"m{i}"))
    p.run()
    p.close()
    a, _ = analyze_pump(p)
    _no_violations(a)
    assert len(p.received) == n
    truth = [OUTCOME_NAMES[s] for s in p.client_outcomes]
    assert len(truth) == n
    rows = [r for r in a.delivery_rows() if r["link"] == "sender-q"]
    assert [r["outcome"] for r in rows] == truth
    assert all(r["settled_by"] == "receiver" and r["outcome_by"] == "receiver" for r in rows)
    assert all(r["settlement_latency"] >= 0 and r["outcome_latency"] == r["settlement_latency"] for r in rows)
    link = next(x for x in a.link_rows() if x["name"] == "sender-q")
    assert link["deliveries"] == n and link[truth[0]] == n and link["unsettled"] == 0
    assert link["role"] == "sender" and link["address"] == "q" and link["sender_side"] == "client"
    assert [r["message_size"] for r in rows] == [len(m) for m in p.received]


def test_presettled_sends():
    p = Pump()
    snd = p.sender("q", settled=True)
    p.run()
    n = 5
    for i in range(n):
        p.send(snd, Message(body=i), settle=True)
    p.run()
    p.close()
    a, _ = analyze_pump(p)
    _no_violations(a)
    assert p.client_outcomes == []  # nothing came back
    rows = a.delivery_rows()
    assert len(rows) == n == len(p.received)
    assert all(r["presettled"] and r["settled_by"] == "sender" and r["outcome"] == "" for r in rows)
    assert all(r["settlement_latency"] == 0 and r["outcome_latency"] is None for r in rows)
    link = a.link_rows()[0]
    assert link["presettled"] == n and link["snd_settle_mode"] == "settled" and link["unsettled"] == 0


def test_receiver_that_does_not_settle():
    p = Pump(server_settle=False)
    snd = p.sender("q")
    p.run()
    for i in range(3):
        p.send(snd, Message(body=i))
    p.run()
    p.close()
    a, frames = analyze_pump(p)
    _no_violations(a)
    rows = a.delivery_rows()
    assert [r["outcome"] for r in rows] == [OUTCOME_NAMES[s] for s in p.client_outcomes] == ["accepted"] * 3
    # the server never settles; the client settles once it has the outcome
    for r in rows:
        assert r["settled_by"] == "sender" and r["outcome_time"] <= r["settled_time"]
        assert r["outcome_latency"] <= r["settlement_latency"]
    settling = [f for f in frames if f.name == "disposition" and f.direction == 0]
    assert {r["settled_packet"] for r in rows} <= {f.packet for f in settling}


def test_credit_one_gives_a_stall_per_message():
    p = Pump(server_credit=1)
    snd = p.sender("q")
    p.run()
    n = 4
    for i in range(n):
        p.send(snd, Message(body=f"m{i}"))
    p.run()
    p.close()
    a, frames = analyze_pump(p)
    _no_violations(a)
    assert len(p.received) == n
    # expected from the frames: each client transfer uses the only credit; the server's next flow
    # on the link restores it (the pump grants 1 after every message)
    transfers = [f for f in frames if f.name == "transfer" and f.direction == 0]
    assert len(transfers) == n
    flows = [f for f in frames if f.name == "flow" and f.direction == 1 and f.performative.field("handle") == 0]
    expect = []
    for tr in transfers:
        nxt = next(f for f in flows if frames.index(f) > frames.index(tr))
        expect.append((tr.packet, nxt.packet))
    stalls = [s for s in a.stall_rows() if s["kind"] == "link-credit"]
    assert [(s["start_packet"], s["end_packet"]) for s in stalls] == expect
    assert all(s["link"] == "sender-q" and not s["open"] and s["ended_by"] == "flow" for s in stalls)
    init = [s for s in a.stall_rows() if s["kind"] == "initial-credit"]
    assert len(init) == 1 and init[0]["end_packet"] == flows[0].packet
    link = a.link_rows()[0]
    assert link["stalls"] == n + 1
    assert link["stalled_seconds"] == pytest.approx(sum(s["duration"] for s in a.stall_rows()))


def test_multi_frame_message_size_and_frames():
    p = Pump(server_max_frame=512, client_max_frame=512)
    snd = p.sender("big")
    p.run()
    msg = Message(body=bytes(range(256)) * 20)
    p.send(snd, msg)
    p.run()
    p.close()
    a, frames = analyze_pump(p)
    _no_violations(a)
    encoded = msg.encode()
    (row,) = a.delivery_rows()
    assert row["message_size"] == len(encoded) == len(p.received[0])
    transfers = [f for f in frames if f.name == "transfer"]
    assert row["frames"] == len(transfers) > 1
    assert all(f.size <= 512 for f in transfers)
    assert row["first_packet"] == transfers[0].first_packet and row["last_packet"] == transfers[-1].packet
    assert row["outcome"] == "accepted"


def test_receiver_link_on_the_client():
    p = Pump()
    p.receiver("back", credit=5)
    p.run()
    p.server_send("back", [Message(body=f"b{i}").encode() for i in range(3)])
    p.close()
    a, _ = analyze_pump(p)
    _no_violations(a)
    link = a.link_rows()[0]
    assert link["role"] == "receiver" and link["sender_side"] == "server" and link["address"] == "back"
    assert link["deliveries"] == len(p.client_received) == 3 and link["accepted"] == 3
    assert [r["delivery_tag"] for r in a.delivery_rows()] == [f"srv-{i}".encode().hex() for i in range(3)]


def _latency_pump():
    p = Pump(server_credit=2)
    snd = p.sender("a")
    snd2 = p.sender("b", name="other")
    p.run()
    for i in range(9):
        p.send(snd if i % 3 else snd2, Message(body="x" * (i * 50)))
        if i % 2:
            p.run()
    p.run()
    p.close()
    return p


def test_latency_summary_matches_numpy():
    a, _ = analyze_pump(_latency_pump())
    rows = a.delivery_rows()
    for by, key in (("link", "link"), ("address", "address"), ("connection", "connection")):
        summ = a.latency_summary(by=by)
        assert summ
        for s in summ:
            lat = [r["settlement_latency"] for r in rows if r[key] == s[key] and r["settlement_latency"] is not None]
            assert s["count"] == len(lat) > 0
            for q in (50, 90, 99):
                assert s[f"p{q}"] == float(numpy.percentile(lat, q))
            assert s["max"] == max(lat)
    for link in a.link_rows():
        lat = [r["settlement_latency"] for r in rows if r["link_index"] == link["link_index"]]
        assert link["latency_p90"] == float(numpy.percentile(lat, 90))
    out = a.latency_summary(by="link", metric="outcome")
    assert all(s["count"] > 0 for s in out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=60),
       st.one_of(st.sampled_from([0, 1, 25, 50, 90, 99, 99.9, 100]), st.floats(0, 100)))
def test_percentile_equals_numpy(values, q):
    assert percentile(values, q) == float(numpy.percentile(values, q))


_FUZZ_PUMP = None


def _fuzz_chunks():
    global _FUZZ_PUMP
    if _FUZZ_PUMP is None:
        p = Pump(server_max_frame=512, client_max_frame=512, server_credit=2)
        snd = p.sender("q")
        p.run()
        for i in range(4):
            p.send(snd, Message(body=b"y" * (300 * i)))
        p.run()
        p.receiver("r", credit=2)
        p.run()
        p.server_send("r", [Message(body="z").encode()] * 2)
        p.close()
        _FUZZ_PUMP = p.chunks
    return _FUZZ_PUMP


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8), st.integers(0, 5))
@example(flips=[(0, 0), (233, 1)], drop=0)  # a header realigned after a gap: its note named a header by index
def test_corrupted_real_streams_are_survived(flips, drop):
    chunks = [bytearray(b) for _, b in _fuzz_chunks()]
    dirs = [d for d, _ in _fuzz_chunks()]
    total = sum(len(b) for b in chunks)
    for pos, val in flips:
        pos %= total
        for b in chunks:
            if pos < len(b):
                b[pos] = val
                break
            pos -= len(b)
    if drop:
        del chunks[drop * 3 % len(chunks)]
        del dirs[drop * 3 % len(dirs)]
    c = AmqpConnection("conn", "10.0.0.1:40000", "10.0.0.2:5672")
    a = Analyzer()
    for i, (d, b) in enumerate(zip(dirs, chunks)):
        for ev in c.feed(d, bytes(b), 1000.0 + i, i + 1):
            a.feed(ev)
    for ev in c.finish():
        a.feed(ev)
    a.finish()
    assert not [v for v in a.violation_rows() if v["kind"] == "internal-error"]
    for name in ("connection_rows", "session_rows", "link_rows", "delivery_rows", "stall_rows",
                 "transaction_rows", "violation_rows", "error_rows"):
        json.dumps(getattr(a, name)())


def test_percentile_of_nothing():
    assert percentile([], 50) is None
    assert Analyzer().latency_summary() == []


# --------------------------------------------------------------------------- real captures

TRUTHS = sorted(glob.glob(os.path.join(SAMPLES, "*.truth.json")))


def analyze_capture(path: str) -> Analyzer:
    return analyze_file(path)


def test_samples_are_present():
    """The samples are committed: a missing one is a failure, not a reason to skip."""
    assert len(TRUTHS) >= 8
    for t in TRUTHS:
        with open(t, encoding="utf-8") as fh:
            assert os.path.exists(os.path.join(SAMPLES, json.load(fh)["capture"]))


@pytest.fixture(scope="module", params=TRUTHS, ids=[os.path.basename(t).split(".")[0] for t in TRUTHS])
def sample(request):
    with open(request.param, encoding="utf-8") as fh:
        truth = json.load(fh)
    return truth, analyze_capture(os.path.join(SAMPLES, truth["capture"]))


def _conns(a):
    return sorted(a.connection_rows(), key=lambda c: c["first_time"])


def test_sample_connections(sample):
    truth, a = sample
    conns = _conns(a)
    assert len(conns) == truth["connection_count"] == len(truth["connections"])
    for tc, c in zip(truth["connections"], conns):
        assert c["server"] == tc["server"]
        assert c["sasl_mechanism"] == tc["sasl_mechanism"]
        assert c["sasl_outcome_code"] == tc["sasl_outcome"]
        assert [h.split()[0] for h in c["protocol_headers_client"]] == tc["protocol_headers_sent"]
        assert [h.split()[0] for h in c["protocol_headers_server"]] == tc["protocol_headers_received"]
        assert c["frame_counts_client"] == tc["frame_counts_sent"]
        assert c["frame_counts_server"] == tc["frame_counts_received"]
        assert c["heartbeats_server"] == tc["frame_counts_received"].get("empty", 0)
        if tc["opened"]:
            assert c["container_id_client"] == tc["container_id"]
            assert c["container_id_server"] == tc["remote_container_id"]
            assert c["max_frame_size_server"] == tc["remote_max_frame_size"]
            assert c["idle_time_out_server"] == tc["remote_idle_timeout_ms"]
            if tc["max_frame_size_requested"] is not None:
                assert c["max_frame_size_client"] == tc["max_frame_size_requested"]
            assert c["idle_time_out_client"] == tc["idle_timeout_requested_ms"]
        else:
            assert c["open_time_server"] is None
        assert sum(1 for s in a.session_rows() if s["connection"] == c["connection"]
                   and s["begin_time_client"] is not None) == tc["sessions_begun"]
        err = tc["connection_error"]
        assert c["close_error"] == (err["condition"] if err else None)
        sess_errs = sorted((e["session"], e["condition"], e["description"]) for e in a.error_rows()
                           if e["connection"] == c["connection"] and e["scope"] == "session" and e["source"] == "frame")
        assert sess_errs == sorted((e["session"], e["condition"], e["description"]) for e in tc["session_errors"])


def _link(a, conns, tl):
    conn = conns[tl["connection"]]["connection"]
    found = [x for x in a.link_rows() if x["connection"] == conn and x["name"] == tl["name"]
             and x["session"] == tl["session"]]
    assert len(found) == 1, (tl["name"], found)
    return found[0]


def test_sample_links(sample):
    truth, a = sample
    conns = _conns(a)
    dl = a.delivery_rows()
    for tl in truth["links"]:
        link = _link(a, conns, tl)
        is_sender = tl["role"] == "sender"
        assert link["role"] == tl["role"]
        assert link["address"] == tl["address"]
        assert link["deliveries"] == (tl["messages_sent"] if is_sender else tl["deliveries_received"])
        assert link["presettled"] == tl["presettled"]
        for k in ("accepted", "rejected", "released", "modified"):
            assert link[k] == tl["outcomes"][k], (tl["name"], k)
        assert link["unsettled"] == tl["unsettled_at_end"]
        err = tl["detach_error"]
        assert link["detach_error"] == (err["condition"] if err else None)
        if tl["attached"]:
            # sender settle mode: as the sender's attach says; receiver settle mode: as the receiver's
            assert link["snd_settle_mode"] == (tl["snd_settle_mode"] if is_sender else tl["remote_snd_settle_mode"])
            assert link["rcv_settle_mode"] == (tl["remote_rcv_settle_mode"] if is_sender else tl["rcv_settle_mode"])
        mine = [r for r in dl if r["connection"] == link["connection"] and r["link_index"] == link["link_index"]]
        assert [r["message_size"] for r in mine] == tl["encoded_sizes"]
        assert [r["delivery_tag"] for r in mine] == [d["delivery_tag"] for d in tl["deliveries"]]
        assert [r["presettled"] for r in mine] == [d["presettled"] for d in tl["deliveries"]]
        assert [r["outcome"] or None for r in mine] == [d["outcome"] for d in tl["deliveries"]]
        stalls = [s for s in a.stall_rows() if s["connection"] == link["connection"]
                  and s["link_index"] == link["link_index"]]
        for r, size in zip(mine, tl["encoded_sizes"]):
            max_frame = truth["connections"][tl["connection"]]["max_frame_size_requested"] or 2**32 - 1
            if size > max_frame:  # a large message: split over several transfer frames
                assert r["frames"] > size // max_frame and r["complete"]
        grants = tl["credit_grants"]
        if not is_sender and grants and all(g == 1 for g in grants):
            # the credit-1 consumer: every message uses the only credit
            assert len([s for s in stalls if s["kind"] == "link-credit"]) == tl["deliveries_received"] == len(grants)
        assert len([s for s in stalls if s["kind"] == "drain"]) == tl["drain_requests"]


def test_sample_totals_and_violations(sample):
    truth, a = sample
    tot = truth["totals"]
    dl = a.delivery_rows()
    assert sum(r["frames"] for r in dl if r["sender_side"] == "client") == tot["transfer_frames_sent"]
    assert sum(r["frames"] for r in dl if r["sender_side"] == "server") == tot["transfer_frames_received"]
    assert sum(1 for r in dl if r["sender_side"] == "client") == tot["messages_sent"]
    assert sum(1 for r in dl if r["sender_side"] == "server") == tot["deliveries_received"]
    assert sum(1 for r in dl if r["sender_side"] == "client" and r["presettled"]) == tot["presettled_sent"]
    assert sum(1 for r in dl if r["sender_side"] == "server" and r["presettled"]) == tot["presettled_received"]
    # a real client and broker: no state / credit / window / unknown-id violations; the one expected
    # exception is a drain answer that kept its credit (the truth records the credit after it)
    expected = set()
    for tl in truth["links"]:
        if (tl.get("extra") or {}).get("credit_after_drain_response", 0) > 0:
            expected.add(("drain", tl["name"]))
    got = {(v["kind"], v["link"]) for v in a.violation_rows()}
    assert got == expected, a.violation_rows()


@pytest.mark.parametrize("batch", [2, 4, 1024])
def test_slowest_settlements_match_the_deliveries_table(monkeypatch, batch):
    """The report's slowest settlements, ranked a batch of candidates at a time, are the first
    rows of the deliveries table sorted by settlement latency (slowest first, then table order)."""
    from amqp_dissect.pipelines.runs.local import CaptureSource, run_analysis
    from amqp_dissect.results import analytics

    monkeypatch.setattr(analytics, "_SLOW_BATCH", batch)
    checked = 0
    for path in sorted(glob.glob(os.path.join(SAMPLES, "*.pcap*"))):
        an = run_analysis(CaptureSource([path]), rows=True).analyzer
        rows = an.delivery_rows()  # table order
        timed = [(r["settlement_latency"], i, r) for i, r in enumerate(rows) if r["settlement_latency"] is not None]
        expected = [(r["connection"], r["link"], r["delivery_id"])
                    for _, _, r in sorted(timed, key=lambda x: (-x[0], x[1]))[: analytics.NOTABLE]]
        got = [(r["connection"], r["link"], r["delivery_id"]) for r in an.notable_deliveries()["slowest_settlement"]]
        assert got == expected, path
        checked += len(got)
    assert checked > 30


@pytest.mark.parametrize("batch", [2, 1024])
def test_slowest_settlements_tied_latencies_folded_out_of_order(monkeypatch, batch):
    """Equal latencies rank in table order whatever order the deliveries are folded in: on two
    links, deliveries settled last-sent-first, most with one latency, leave the slowest first and
    then the first in table order (a tie on the cut's link must not hide an earlier delivery)."""
    from amqp_dissect.model.delivery import DeliveryRecord
    from amqp_dissect.model.entities import ConnectionBase, Link
    from amqp_dissect.results import analytics

    monkeypatch.setattr(analytics, "_SLOW_BATCH", batch)
    a = Analyzer()
    conn = ConnectionBase("conn", "10.0.0.1:40000", "10.0.0.2:5672", True)
    links = [Link(conn, None, i, f"link-{i}", True) for i in range(2)]
    deliveries = []
    for seq in range(60):
        t0 = 1_000_000_000_000 + 1_000 * seq  # integer nanoseconds, as captures give them
        d = DeliveryRecord(links[seq % 2], None, 0, seq, b"%d" % seq, t0, seq + 1)
        d.seq = seq
        lat = 9_000 if seq in (41, 50) else 5_000  # two slower ones, the rest tie
        d.settle("receiver", t0 + lat, 100 + seq)
        d.outcome = "accepted"
        deliveries.append(d)
    for d in reversed(deliveries):  # folded last first
        a._notable(d)
    got = [(x[1].link.index, x[1].seq) for x in analytics._slowest_ranked(a._slowest, a._order)]
    # the oracle: every delivery sorted by latency (slowest first), then table order (link, seq)
    ranked = sorted(deliveries, key=lambda d: (-(d.settled[0] - d.first_ts), d.link.index, d.seq))
    expected = [(d.link.index, d.seq) for d in ranked[: analytics.NOTABLE]]
    assert expected[:3] == [(0, 50), (1, 41), (0, 0)]
    assert got == expected
