"""The messages table of the real captures of samples/messages against their clients' own records
(the truth files): every message id with its type, the fan-out to each consumer link by name,
redeliveries, the states, and the times: the clients ran on the capturing host, so a client's
time brackets the capture's (a send is recorded before its transfer frame leaves, a receipt after
the frame arrived, a settlement before its disposition leaves): inequalities that fail if a time
is taken from the wrong frame or delivery."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict

import pytest

import amqp_dissect
from amqp_dissect.cli.main import EXIT_OK, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESSAGES = os.path.join(ROOT, "samples", "messages")
US = 2e-6  # the truth's float seconds against the capture's microseconds


def capture(name):
    return os.path.join(MESSAGES, f"{name}.pcap")


def truth(name):
    with open(os.path.join(MESSAGES, f"{name}.truth.json"), encoding="utf-8") as f:
        return json.load(f)


def ident(mid):
    """(type, text) of a truth message-id, as the table writes it; None without one."""
    if mid is None:
        return None
    return mid["type"], str(mid["value"])


def rows_of(name):
    df = amqp_dissect.analyze(capture(name), tables="messages").messages
    rows = []
    for r in df.astype(object).where(df.notna(), None).to_dict("records"):
        r["consumer_deliveries"] = json.loads(r["consumer_deliveries"])
        for c in ("producer_time", "first_consumer_time", "first_time"):
            r[c] = None if r[c] is None else r[c].value / 1e9
        rows.append(r)
    return rows


def sent_and_received(t):
    """(message key -> the sender's truth delivery, message key -> [(link name, delivery)] received)."""
    sent, got = {}, defaultdict(list)
    for lk in t["links"]:
        for d in lk["deliveries"]:
            k = ident(d["message_id"])
            if lk["role"] == "sender":
                sent.setdefault(k, d) if k is not None else None
            else:
                got[k].append((lk["name"], d))
    return sent, got


def test_topic_fan_out_to_three_consumers():
    t = truth("topic_fanout")
    rows = rows_of("topic_fanout")
    sender = next(lk for lk in t["links"] if lk["role"] == "sender")
    consumers = sorted(lk["name"] for lk in t["links"] if lk["role"] == "receiver")
    assert len(consumers) == 3
    by_id = {(r["message_id_type"], r["message_id"]): r for r in rows if r["matched_by"] == "message-id"}
    with_id = [d for d in sender["deliveries"] if d["message_id"] is not None]
    without = [d for d in sender["deliveries"] if d["message_id"] is None]
    assert set(by_id) == {ident(d["message_id"]) for d in with_id}
    assert {k[0] for k in by_id} == {"string", "ulong", "uuid", "binary"}
    digests = [r for r in rows if r["matched_by"] == "digest"]
    assert len(digests) == len(without) == 3 and len({r["bare_digest"] for r in digests}) == 3
    received = defaultdict(dict)  # key -> consumer link -> its truth delivery
    for lk in t["links"]:
        if lk["role"] == "receiver":
            for d in lk["deliveries"]:
                if d["message_id"] is not None:
                    received[ident(d["message_id"])][lk["name"]] = d
    for d in with_id:
        k = ident(d["message_id"])
        r = by_id[k]
        assert r["state"] == "delivered" and r["publishes"] == 1 and r["producer_link"] == sender["name"]
        assert r["producer_outcome"] == d["outcome"]
        assert (r["consumers"], r["deliveries"]) == (3, 3)
        assert sorted(c["link"] for c in r["consumer_deliveries"]) == consumers == sorted(received[k])
        assert all(c["outcome"] == received[k][c["link"]]["outcome"] for c in r["consumer_deliveries"])
        # times: the client's send before the capture's transfer, each receipt after the broker's
        assert d["t_sent"] - US <= r["producer_time"] <= d["t_outcome"] + US
        first_receipt = min(x["t_received"] for x in received[k].values())
        assert 0 < r["residence"] <= r["residence_max"] <= max(x["t_received"] for x in received[k].values()) \
            - d["t_sent"] + US
        assert r["residence"] <= first_receipt - d["t_sent"] + US
        # end to end: each consumer's settlement is recorded before its disposition leaves
        assert r["end_to_end_max"] >= max(x["t_settled"] for x in received[k].values()) - d["t_outcome"] - US
        assert r["end_to_end"] >= r["residence"]
    for r in digests:
        assert (r["state"], r["publishes"], r["consumers"], r["deliveries"]) == ("delivered", 1, 3, 3)


def test_redeliveries_released_and_modified():
    t = truth("redeliveries")
    rows = {(r["message_id_type"], r["message_id"]): r for r in rows_of("redeliveries")}
    sent, got = sent_and_received(t)
    assert set(rows) == set(sent) == set(got)
    for k, d in sent.items():
        r = rows[k]
        deliveries = got[k]
        links = Counter(name for name, _ in deliveries)
        assert r["deliveries"] == len(deliveries) and r["consumers"] == len(links)
        assert r["redeliveries_by_repeat"] == sum(n - 1 for n in links.values())
        assert r["released_or_modified"] == sum(x["outcome"] in ("released", "modified") for _, x in deliveries)
        redelivered = any(x["redelivered"] for _, x in deliveries)
        assert redelivered and r["state"] == "delivered twice"  # (each was delivered again: the truth says so)
        assert r["redeliveries_by_count"] == max(x["header"]["delivery_count"] or 0 for _, x in deliveries)
        # the last consumer outcome (the accept) is the largest end to end
        assert r["end_to_end_max"] >= max(x["t_settled"] for _, x in deliveries) - d["t_outcome"] - US
        last = max(deliveries, key=lambda nx: nx[1]["t_received"])[1]
        assert last["outcome"] == "accepted"
        assert [c["outcome"] for c in r["consumer_deliveries"] if c["link"] == max(links, key=lambda n: n)] \
            == ["accepted"]


def test_forced_detach_leaves_published_never_delivered():
    t = truth("forced")
    rows = {(r["message_id_type"], r["message_id"]): r for r in rows_of("forced")}
    sent, got = sent_and_received(t)
    assert set(rows) == set(sent)
    for k in sent:
        want = "delivered" if k in got else "published, never delivered in the capture"
        assert rows[k]["state"] == want, k
        assert rows[k]["consumers"] == len({n for n, _ in got.get(k, ())})


def test_rhea_request_reply_another_stack():
    t = truth("rhea_request_reply")
    rows = {(r["message_id_type"], r["message_id"]): r for r in rows_of("rhea_request_reply")}
    sent, got = sent_and_received(t)
    assert set(rows) == set(sent) == set(got)
    for k, d in sent.items():
        r = rows[k]
        [(name, x)] = got[k]
        assert (r["state"], r["consumers"]) == ("delivered", 1)
        assert r["consumer_deliveries"][0]["link"] == name and r["consumer_deliveries"][0]["outcome"] == x["outcome"]
        if d.get("t_sent") is not None:
            assert 0 < r["residence"] <= x["t_received"] - d["t_sent"] + US


def test_report_section_on_a_capture_set(capsys):
    paths = [capture(n) for n in ("topic_fanout", "redeliveries", "forced")]
    rc = main(["report", "--messages", "-T", "json", *paths])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK, err
    sec = json.loads(out)["messages"]
    rows = amqp_dissect.analyze(paths, tables="messages").messages
    assert sec["messages"] == len(rows)
    assert sec["states"] == {k: v for k, v in rows["state"].value_counts().items()} | (
        {"delivered": 0} if "delivered" not in set(rows["state"]) else {})
    fan = next(a for a in sec["addresses"] if a["address"] == "/topic/amqpdissect.fanout")
    assert fan["messages"] == 20 and fan["fan_out_max"] == 3 and fan["fan_out_mean"] == 3.0
    sub = rows[rows["address"] == "/topic/amqpdissect.fanout"]
    assert fan["residence"]["max"] == sub["residence"].max() and fan["end_to_end"]["max"] == sub["end_to_end"].max()
    assert sub["residence"].min() <= fan["residence"]["p50"] <= fan["residence"]["p90"] <= fan["residence"]["max"]
    never = sec["unmatched"]["published, never delivered in the capture"]
    assert {u["message_id"] for u in never} == {"forced-2", "forced-3"} and all(u["packets"] for u in never)
    rc = main(["report", "--messages", *paths])
    text, _ = capsys.readouterr()
    assert "Messages (matched across connections" in text and "forced-2" in text
    rc = main(["report", "-T", "json", *paths])  # (without --messages: no message read, no section)
    assert "messages" not in json.loads(capsys.readouterr()[0])
