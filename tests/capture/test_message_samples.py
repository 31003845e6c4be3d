"""The message-layer sample captures (``samples/messages/``) against their clients' own records.

Oracles: the truth files written by the clients themselves while the capture ran (proton, rhea,
the Azure SDK's ``_pyamqp`` and the ``$cbs`` responder: what they sent, received, settled and which
errors they saw, never derived from the capture), and tshark, an independent dissector, for the
frames.  These tests check what today's tool already knows (connections, links and addresses,
deliveries per link, delivery tags, outcomes, detach/end/close errors, exit codes); the
message-level checks (ids, pairing, residence times) build on the same truth files.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter

import pandas as pd
import pytest

import amqp_dissect
from amqp_dissect.amqp.framing import Frame
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.cli.main import main
from amqp_dissect.dissect import Dissector

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESSAGES = os.path.join(ROOT, "samples", "messages")
NAMES = ["azure_cbs", "azure_cbs_expiry", "forced", "idle_timeout", "redeliveries", "request_reply", "rhea_request_reply", "topic_fanout"]
OUTCOMES = ("accepted", "rejected", "released", "modified")


def _truth(name):
    with open(os.path.join(MESSAGES, f"{name}.truth.json")) as f:
        return json.load(f)


def _pcap(name):
    return os.path.join(MESSAGES, f"{name}.pcap")


_TABLES: dict = {}


def _tables(name):
    if name not in _TABLES:
        _TABLES[name] = amqp_dissect.analyze(_pcap(name))
    return _TABLES[name]


def _conn_of(tables, container_id):
    """The tool's connection row whose client open carried this container-id (exactly one)."""
    c = tables["connections"]
    rows = c[c["container_id_client"] == container_id]
    assert len(rows) == 1, (container_id, list(c["container_id_client"]))
    return rows.iloc[0]


def _links_of(truth):
    """Every link the truth knows, as (container-id, link record); the Azure truth keeps links per connection."""
    if "links" in truth:
        cids = {c["index"]: c["container_id"] for c in truth["connections"]}
        return [(cids[lk["connection"]], lk) for lk in truth["links"]]
    return [(c["container_id"], lk) for c in truth["connections"] for lk in c.get("links", [])]


def test_the_folder_holds_exactly_these_captures_each_with_its_truth():
    pcaps = sorted(f[:-5] for f in os.listdir(MESSAGES) if f.endswith(".pcap"))
    truths = sorted(f[: -len(".truth.json")] for f in os.listdir(MESSAGES) if f.endswith(".truth.json"))
    assert pcaps == truths == NAMES
    for n in NAMES:
        assert os.path.getsize(_pcap(n)) < 400_000  # "a few hundred KB at most"
        assert _truth(n)["capture"] == f"{n}.pcap"


@pytest.mark.parametrize("name", NAMES)
def test_report_and_errors_exit_0_without_an_internal_error(name, tmp_path, capsys):
    for cmd in ("report", "errors", "deliveries"):
        out = tmp_path / f"{cmd}.txt"
        assert main([cmd, _pcap(name), "-o", str(out)]) == 0, cmd
        assert out.stat().st_size > 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err.lower()


@pytest.mark.parametrize("name", NAMES)
def test_connections_and_container_ids_equal_the_clients(name):
    truth, t = _truth(name), _tables(name)
    conns = t["connections"]
    assert len(conns) == truth["connection_count"] == len(truth["connections"])
    assert sorted(conns["container_id_client"]) == sorted(c["container_id"] for c in truth["connections"])
    for tc in truth["connections"]:
        row = _conn_of(t, tc["container_id"])
        if tc.get("server"):
            assert row["server"] == tc["server"]
        if tc.get("sasl_mechanism"):
            assert row["sasl_mechanism"] == tc["sasl_mechanism"]
        if tc.get("remote_container_id"):
            assert row["container_id_server"] == tc["remote_container_id"]
        if tc.get("idle_timeout_requested_ms") is not None:
            assert row["idle_time_out_client"] == tc["idle_timeout_requested_ms"]


# ---------------------------------------------------------------------------------------------
# frames: tshark is the oracle; the clients' own frame logs agree, except what they cannot know
# ---------------------------------------------------------------------------------------------


def _tshark_frames(pcap):
    sys.path.insert(0, os.path.join(ROOT, "samples"))
    try:
        import check_with_tshark
    finally:
        sys.path.pop(0)
    return check_with_tshark.tshark_frames(__import__("pathlib").Path(pcap))


def _our_frames(pcap):
    """(client port, server 'ip:port') -> {0: [(time, name)], 1: [...]} from the dissector's own frames."""
    d = Dissector()
    out: dict = {}
    with open(pcap, "rb") as f:
        reader = open_capture(f)
        events = [e for rec in reader for e in d.feed(rec)]
    events += d.finish()
    for e in events:
        if isinstance(e, Frame):
            name = "empty" if e.kind == "heartbeat" else e.name
            out.setdefault(e.conn, {0: [], 1: []})[e.direction].append((e.ts / 1e9, f"{name}:{e.channel or 0}"))
    return out


@pytest.mark.skipif(not shutil.which("tshark"), reason="tshark is not installed (apt-get install -y tshark)")
@pytest.mark.parametrize("name", NAMES)
def test_every_frame_equals_tsharks_in_order(name):
    ours = _our_frames(_pcap(name))
    theirs = _tshark_frames(_pcap(name))
    assert len(ours) == len(theirs) == _truth(name)["connection_count"]
    by_client = {}
    for st in theirs.values():
        (cip, cport), (sip, sport) = st["client"], st["server"]
        by_client[cport] = st
    for conn, dirs in ours.items():
        cport = int(str(conn).split("-")[0].rsplit(":", 1)[1])
        st = by_client[cport]
        assert [n for _, n in dirs[0]] == st["c2s"], conn
        assert [n for _, n in dirs[1]] == st["s2c"], conn


@pytest.mark.parametrize("name", NAMES)
def test_frames_in_order_equal_the_clients_own_frame_logs(name):
    """Each client logged every frame its engine wrote and read.  The wire holds exactly those, in
    that order, except what a client cannot have seen: frames it read after its socket was reset
    are not on the wire, and frames that reached its socket after it stopped reading (it closed,
    or raised) were never logged; both only where the connection ended with a reset."""
    truth, t = _truth(name), _tables(name)
    ours = _our_frames(_pcap(name))
    for tc in truth["connections"]:
        row = _conn_of(t, tc["container_id"])
        counts = (json.loads(row["frame_counts_client"]), json.loads(row["frame_counts_server"]))
        wire = [[n.split(":")[0] for _, n in ours[row["connection"]][k]] for k in (0, 1)]
        assert tuple(dict(Counter(w)) for w in wire) == counts  # the tables count the frames the dissector read
        if tc.get("frames_logged", "").startswith("AMQP frames only"):
            # the Azure SDK's network trace logs no SASL frames
            wire = [[n for n in w if not n.startswith("sasl-")] for w in wire]
        sent = [n.split(":")[0] for n in tc["frames_sent"]]
        received = [n.split(":")[0] for n in tc["frames_received"]]
        transport = tc.get("transport_error") or {}
        if transport.get("description") == "connection aborted":
            # the broker reset the socket: proton's engine still wrote its close, which never reached the wire
            assert sent[-1] == "close" and row["transport_end"] == "rst"
            sent = sent[:-1]
        assert wire[0] == sent, (tc["container_id"], "sent")
        assert wire[1][: len(received)] == received, (tc["container_id"], "received")
        if len(wire[1]) > len(received):
            assert row["transport_end"] == "rst", (tc["container_id"], wire[1][len(received):])


def test_idle_timeout_the_broker_was_silent_longer_than_the_idle_time_out_then_the_client_closed():
    truth, t = _truth("idle_timeout"), _tables("idle_timeout")
    tc = truth["connections"][0]
    row = _conn_of(t, tc["container_id"])
    assert tc["idle_timeout_requested_ms"] == row["idle_time_out_client"] == 1000
    assert row["closed_by"] == "client" and row["close_error"] == tc["close_reason"]["condition"]
    assert row["close_description"] == tc["close_reason"]["description"] == "local-idle-timeout expired"
    frames = _our_frames(_pcap("idle_timeout"))[row["connection"]]
    close_t = next(ts for ts, n in frames[0] if n.startswith("close"))
    before = [ts for ts, _ in frames[1] if ts < close_t]
    pause = next(e["t"] for e in truth["timeline"] if e["what"].startswith("broker paused"))
    silence = close_t - max(before)
    # the broker's last frame before the pause is the client's last read; the silence is longer than
    # proton's local timeout (twice the idle-time-out it advertised) and started before the pause
    assert abs(max(before) - tc["t_last_frame_received"]) < 0.05
    assert max(before) <= pause
    assert silence > 2 * tc["idle_timeout_requested_ms"] / 1000


# ---------------------------------------------------------------------------------------------
# links, deliveries, outcomes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_links_addresses_and_deliveries_per_link_equal_the_clients(name):
    truth, t = _truth(name), _tables(name)
    links = t["links"]
    checked = 0
    for cid, lk in _links_of(truth):
        conn = _conn_of(t, cid)["connection"]
        rows = links[(links["connection"] == conn) & (links["name"] == lk["name"])]
        assert len(rows) == 1, (cid, lk["name"])
        row = rows.iloc[0]
        assert row["role"] == lk["role"]
        address = lk.get("address", lk.get("target") if lk["role"] == "sender" else lk.get("source"))
        assert (None if pd.isna(row["address"]) else row["address"]) == address, lk["name"]
        if "attached" in lk:
            assert pd.notna(row["attached_time"]) == lk["attached"], lk["name"]
        if "messages_sent" in lk:
            n = lk["messages_sent"] if lk["role"] == "sender" else lk["deliveries_received"]
            assert row["deliveries"] == n, lk["name"]
            for k in OUTCOMES:
                assert row[k] == lk["outcomes"][k], (lk["name"], k)
        if lk.get("detach_error"):
            assert row["detach_error"] == lk["detach_error"]["condition"]
        checked += 1
    assert checked == sum(1 for _ in _links_of(truth)) > 0


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("azure_cbs")])
def test_every_delivery_tag_outcome_and_client_time(name):
    """Per link, the deliveries in order: tag, outcome (and modified's flags), and the time the client
    sent or received it against the capture's time of its transfer (the same clock)."""
    truth, t = _truth(name), _tables(name)
    dl = t["deliveries"]
    for cid, lk in _links_of(truth):
        conn = _conn_of(t, cid)["connection"]
        rows = dl[(dl["connection"] == conn) & (dl["link"] == lk["name"])].sort_values("delivery_id")
        assert len(rows) == len(lk["deliveries"]), lk["name"]
        for d, (_, row) in zip(lk["deliveries"], rows.iterrows()):
            assert row["delivery_tag"] == d["delivery_tag"], lk["name"]
            want = d["outcome"]
            got = None if pd.isna(row["outcome"]) else row["outcome"]
            if want is not None or got is not None:
                assert got == want, (lk["name"], d["message_id"])
            if want == "modified" and "delivery_failed" in d:
                assert bool(row["delivery_failed"]) == d["delivery_failed"]
                assert bool(row["undeliverable_here"]) == d["undeliverable_here"]
            t_client = d.get("t_sent", d.get("t_received"))
            if t_client is not None:
                assert abs(row["first_time"].timestamp() - t_client) < 0.25, (lk["name"], d["message_id"])


def test_fanout_three_consumers_each_got_all_twenty_and_the_producer_sent_twenty():
    truth, t = _truth("topic_fanout"), _tables("topic_fanout")
    dl = t["deliveries"]
    per_link = dl.groupby("link", observed=False).size().to_dict()  # (pandas 2.3 warns of its default changing)
    assert per_link == {lk["name"]: len(lk["deliveries"]) for lk in truth["links"]}
    assert per_link == {"fanout-producer": 20, "fanout-consumer-1": 20, "fanout-consumer-2": 20, "fanout-consumer-3": 20}
    kinds = Counter((d["message_id"] or {"type": None})["type"] for d in truth["links"][-1]["deliveries"])
    assert kinds == {"string": 4, "ulong": 4, "uuid": 5, "binary": 4, None: 3}


def test_redeliveries_the_released_and_modified_messages_come_back_as_the_client_saw():
    truth, t = _truth("redeliveries"), _tables("redeliveries")
    rcv = [d for lk in truth["links"] if lk["role"] == "receiver" for d in lk["deliveries"]]
    seen = Counter(d["message_id"]["value"] for d in rcv)
    assert seen == {"redeliver-A": 4, "redeliver-B": 3, "redeliver-C": 2}
    dl = t["deliveries"]
    got = dl[dl["link"].str.startswith("redeliver-receiver")]
    assert Counter(got["outcome"]) == Counter(d["outcome"] for d in rcv)
    # RabbitMQ 3.10 ends the session on each 'modified': three session errors, by name, from the server
    err = t["errors"]
    sess = err[err["scope"] == "session"]
    assert list(sess["condition"]) == [e["condition"] for e in truth["connections"][0]["session_errors"]]
    assert set(sess["side"]) == {"server"}


# ---------------------------------------------------------------------------------------------
# why links, sessions and connections ended
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_end_and_close_errors_by_name_equal_what_the_clients_saw(name):
    truth, t = _truth(name), _tables(name)
    err = t["errors"]
    for tc in truth["connections"]:
        row = _conn_of(t, tc["container_id"])
        mine = err[err["connection"] == row["connection"]]
        sess = mine[(mine["scope"] == "session") & (mine["side"] == "server")]
        want = [(e["condition"], e["description"]) for e in tc.get("session_errors", [])]
        assert list(zip(sess["condition"], sess["description"])) == want, tc["container_id"]
        if tc.get("connection_error"):
            assert row["closed_by"] == "server" and row["close_error"] == tc["connection_error"]["condition"]
        for e in tc.get("detach_errors", []):  # the Azure SDK's log of detach frames it read, by handle
            lk = t["links"][(t["links"]["connection"] == row["connection"]) & (t["links"]["handle_server"] == e["handle"])]
            assert list(lk["detach_error"]) == [e["condition"]] and list(lk["detach_description"]) == [e["description"]]
            assert list(lk["detached_by"]) == ["server"]
        transport = tc.get("transport_error") or {}
        if transport.get("description") == "connection aborted":
            # the broker dropped the socket without a close frame (RabbitMQ 3.10: queue or vhost deleted)
            assert row["transport_end"] == "rst" and pd.isna(row["close_error"])
    if name == "forced":
        by = {c["container_id"]: c for c in truth["connections"]}
        assert by["amqp-dissect-forced-unauthorized"]["session_errors"][0]["condition"] == "amqp:unauthorized-access"
        assert by["amqp-dissect-forced-detach"]["transport_error"]["description"] == "connection aborted"
        assert by["amqp-dissect-forced-vhost"]["transport_error"]["description"] == "connection aborted"


def test_azure_cbs_put_tokens_two_answered_one_refused_rabbitmq_ended_the_session():
    truth, t = _truth("azure_cbs"), _tables("azure_cbs")
    by = {c["container_id"]: c for c in truth["connections"]}
    assert by["amqp-dissect-azure-cbs-accepted"]["put_token"]["status_code"] == 202
    assert by["amqp-dissect-azure-cbs-refused"]["put_token"]["status_code"] == 401
    assert by["amqp-dissect-azure-cbs-refused"]["exception"]["type"] == "TokenAuthFailure"
    assert by["amqp-dissect-azure-cbs-rabbitmq"]["put_token"] is None
    # the responder's records: two put-tokens, each answered
    pts = truth["responder"]["put_tokens"]
    assert [(p["operation"], p["type"], p["status_code"]) for p in pts] == [("put-token", "jwt", 202),
                                                                            ("put-token", "jwt", 401)]
    dl = t["deliveries"]
    for cid, n_requests in (("amqp-dissect-azure-cbs-accepted", 1), ("amqp-dissect-azure-cbs-refused", 1)):
        conn = _conn_of(t, cid)["connection"]
        cbs = t["links"][(t["links"]["connection"] == conn) & (t["links"]["address"] == "$cbs")]
        assert sorted(cbs["role"]) == ["receiver", "sender"]
        assert list(cbs["deliveries"]) == [n_requests, n_requests]
        assert len(dl[dl["connection"] == conn]) == 2 + (2 if cid.endswith("accepted") else 0)
    rabbit = _conn_of(t, "amqp-dissect-azure-cbs-rabbitmq")
    sess = t["errors"][(t["errors"]["connection"] == rabbit["connection"]) & (t["errors"]["scope"] == "session")]
    assert list(sess["condition"]) == ["amqp:internal-error"] and list(sess["side"]) == ["server"]


def test_azure_cbs_expiry_the_link_that_outlived_its_token_was_force_detached_at_the_expiry():
    truth, t = _truth("azure_cbs_expiry"), _tables("azure_cbs_expiry")
    (tc,) = truth["connections"]
    assert tc["put_token"]["status_code"] == 202
    assert tc["exception"]["type"] == "TokenExpired"
    (pt,) = truth["responder"]["put_tokens"]
    assert pt["expiration"] == tc["token"]["expires_on"] * 1000  # the SDK sends the expiry in ms
    (forced,) = truth["responder"]["forced_detaches"]
    assert forced["condition"] == "amqp:link:detach-forced"
    row = _conn_of(t, tc["container_id"])
    links = t["links"][t["links"]["connection"] == row["connection"]]
    entity = links[links["address"] == "amqpdissect-entity"].iloc[0]
    assert entity["name"] == forced["link"]
    assert entity["detach_error"] == "amqp:link:detach-forced" and entity["detached_by"] == "server"
    # the detach came at the token's expiry (the responder's clock and the capture's are the same)
    detach_t = entity["detach_time"].timestamp()
    assert abs(detach_t - forced["t"]) < 0.25
    assert tc["token"]["expires_on"] - 0.25 <= detach_t < tc["token"]["expires_on"] + 1.0
    assert entity["deliveries"] == len(tc["messages_sent"]) == 1
