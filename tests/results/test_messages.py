"""The messages table's matcher on synthetic deliveries rows: typed ids, no id (digest), publish
missing, never delivered, delivered twice (repeat, delivery-count, after a release), dead-lettered,
unknown roles, bounds, and the registry's types (pandas and Parquet)."""

from __future__ import annotations

import json

import pytest

from amqp_dissect.results import schema
from amqp_dissect.results.messages import (DEAD, DELIVERED, PUBLISH_MISSING, PUBLISHED, TWICE, UNKNOWN,
                                           MessageMatcher, message_rows)
from amqp_dissect.results.tables import check_rows, misfits

S = 1_000_000_000
T0 = 1_700_000_000 * S

_seq = iter(range(1, 1_000_000))


def delivery(conn, side, *, mid=None, mtype="string", digest=None, t=0, outcome="accepted", otime=None, link=None,
             link_index=0, address="topic/a", dc=None, ma=None, ap=None):
    """One deliveries row (only the columns the matcher reads; times in ns from T0)."""
    p = next(_seq)
    return {"connection": conn, "link": link or f"{conn}-{link_index}", "link_index": link_index, "address": address,
            "sender_side": side, "first_time": T0 + t, "first_packet": p, "outcome": outcome,
            "outcome_time": None if otime is None else T0 + otime, "outcome_packet": None if otime is None else p + 1,
            "message_id": mid, "message_id_type": mtype if mid is not None else None, "bare_digest": digest,
            "header_delivery_count": dc, "message_annotations": ma, "application_properties": ap}


def links_of(rows):
    return [{"connection": r["connection"], "link_index": r["link_index"], "sender_side": r["sender_side"]}
            for r in rows]


def by_id(rows):
    return {(r["message_id_type"], r["message_id"]) if r["matched_by"] == "message-id" else r["bare_digest"]: r
            for r in rows}


def test_fan_out_times_and_registry_columns():
    ds = [delivery("P", "client", mid="m1", t=0, otime=2_000),
          delivery("C1", "server", mid="m1", t=1_000_000, otime=1_500_000),
          delivery("C2", "server", mid="m1", t=3_000_000, otime=9_000_000),
          delivery("C3", "server", mid="m1", t=2_000_000, otime=2_500_000)]
    rows = message_rows(ds[::-1], links_of(ds))  # (any order)
    check_rows(rows, "messages")
    assert not misfits(rows, "messages")
    [r] = rows
    assert r["state"] == DELIVERED and r["state_evidence"] is None
    assert (r["producer_connection"], r["producer_time"], r["publishes"]) == ("P", T0, 1)
    assert (r["consumers"], r["deliveries"]) == (3, 3)
    # residence: first consumer (C1) 1 ms, largest (C2) 3 ms; end to end: C1's outcome 1.5 ms, largest C2's 9 ms
    assert r["residence"] == 0.001 and r["residence_max"] == 0.003
    assert r["end_to_end"] == 0.0015 and r["end_to_end_max"] == 0.009
    assert r["first_consumer_time"] == T0 + 1_000_000
    assert [c["connection"] for c in r["consumer_deliveries"]] == ["C1", "C3", "C2"]
    # the packets of the deliveries in time order
    assert r["packets"] == [ds[i]["first_packet"] for i in (0, 1, 3, 2)] and r["first_packet"] == ds[0]["first_packet"]


def test_typed_ids_are_distinct():
    ds = [delivery("P", "client", mid="5", mtype="string", t=0),
          delivery("P", "client", mid="5", mtype="ulong", t=10),
          delivery("C", "server", mid="5", mtype="ulong", t=20, otime=30)]
    rows = by_id(message_rows(ds, links_of(ds)))
    assert set(rows) == {("string", "5"), ("ulong", "5")}
    assert rows[("string", "5")]["state"] == PUBLISHED and rows[("string", "5")]["consumers"] == 0
    assert rows[("ulong", "5")]["state"] == DELIVERED and rows[("ulong", "5")]["residence"] == 10 / S


def test_no_id_matches_by_digest():
    ds = [delivery("P", "client", digest="d1", t=0), delivery("C", "server", digest="d1", t=50, otime=60),
          delivery("C", "server", digest="d2", t=70)]
    rows = by_id(message_rows(ds, links_of(ds)))
    assert rows["d1"]["matched_by"] == "digest" and rows["d1"]["message_id"] is None
    assert rows["d1"]["state"] == DELIVERED and rows["d1"]["end_to_end"] == 60 / S
    assert rows["d2"]["state"] == PUBLISH_MISSING and rows["d2"]["residence"] is None
    # a delivery whose message was not read has no key: counted, not a row
    m = MessageMatcher().add_all(ds + [delivery("C", "server")])
    assert m.unkeyed == 1 and len(m.rows(links_of(ds))) == 2


def test_identical_bare_messages_published_twice_are_not_delivered_twice():
    ds = [delivery("P", "client", digest="d", t=0), delivery("P", "client", digest="d", t=5),
          delivery("C", "server", digest="d", t=10), delivery("C", "server", digest="d", t=15)]
    [r] = message_rows(ds, links_of(ds))
    assert r["publishes"] == 2 and r["redeliveries_by_repeat"] == 0 and r["state"] == DELIVERED
    assert "published 2 times" in r["note"]


@pytest.mark.parametrize("case", ["repeat", "count", "after-release"])
def test_delivered_twice(case):
    p = delivery("P", "client", mid=7, mtype="ulong", t=0)
    if case == "repeat":
        cs = [delivery("C", "server", mid=7, mtype="ulong", t=10, outcome="released", otime=11),
              delivery("C", "server", mid=7, mtype="ulong", t=20, otime=25)]
    elif case == "count":
        cs = [delivery("C", "server", mid=7, mtype="ulong", t=10, dc=2, otime=11)]
    else:  # released by C1, then delivered to C2
        cs = [delivery("C1", "server", mid=7, mtype="ulong", t=10, outcome="released", otime=11),
              delivery("C2", "server", mid=7, mtype="ulong", t=20, otime=25)]
    ds = [p] + cs
    [r] = message_rows(ds, links_of(ds))
    assert r["state"] == TWICE, r
    want = {"repeat": "repeat", "count": "delivery-count 2", "after-release": "after a released"}[case]
    assert want in r["state_evidence"]
    if case == "repeat":
        assert (r["consumers"], r["deliveries"], r["redeliveries_by_repeat"]) == (1, 2, 1)
        # end to end: to the consumer's last outcome (the accept after the release)
        assert r["end_to_end"] == 25 / S and r["consumer_deliveries"][0]["deliveries"] == 2
    if case == "count":
        assert r["redeliveries_by_count"] == 2


def test_dead_lettered_and_expired_say_which_annotation():
    ds = [delivery("P", "client", mid="x", t=0),
          delivery("C", "server", mid="x", t=10, ma=json.dumps({"x-first-death-reason": "expired"}))]
    [r] = message_rows(ds, links_of(ds))
    assert r["state"] == DEAD
    assert r["state_evidence"].startswith("expired: message annotation x-first-death-reason")
    ds = [delivery("C", "server", mid="y", t=10, ap={"DeadLetterReason": "MaxDeliveryCountExceeded"})]
    [r] = message_rows(ds, links_of(ds))
    assert r["state"] == DEAD and "dead-lettered: application property DeadLetterReason" in r["state_evidence"]
    # an annotation that says nothing of it
    ds = [delivery("C", "server", mid="z", t=10, ma={"x-opt-enqueued-time": 5})]
    assert message_rows(ds, links_of(ds))[0]["state"] == PUBLISH_MISSING


def test_unknown_roles_say_why():
    ds = [delivery("R", None, mid="u", t=0)]
    [r] = message_rows(ds, [])
    assert r["state"] == UNKNOWN and r["unknown_role"] == 1 and "sending side is not known" in r["role_evidence"]
    # a broker's client connection to another broker: neither producer nor consumer
    ds = [delivery("P", "client", mid="b", t=0), delivery("B2B", "client", mid="b", t=5),
          delivery("C", "server", mid="b", t=9, otime=10)]
    conns = [{"connection": "P", "container_id_client": "app", "container_id_server": "broker-1"},
             {"connection": "C", "container_id_client": "app2", "container_id_server": "broker-1"},
             {"connection": "B2B", "container_id_client": "broker-1", "container_id_server": "broker-2"}]
    [r] = message_rows(ds, links_of(ds), conns)
    assert r["state"] == DELIVERED and r["publishes"] == 1 and r["unknown_role"] == 1
    assert "broker to broker" in r["role_evidence"] and "'broker-1'" in r["role_evidence"]


def test_links_table_decides_the_side():
    d = delivery("X", None, mid="s", t=0)
    [r] = message_rows([d], [{"connection": "X", "link_index": 0, "role": "sender", "sender_side": None}])
    assert r["state"] == PUBLISHED and r["unknown_role"] == 0


def test_bounds():
    m = MessageMatcher(max_messages=2, max_deliveries=3)
    for i in range(3):
        m.add(delivery("P", "client", mid=f"k{i}", t=i))
    assert m.dropped == 1 and len(m.messages) == 2
    for i in range(5):
        m.add(delivery(f"C{i}", "server", mid="k0", t=10 + i))
    [r, _] = m.rows([])
    assert r["untracked"] == 3 and "3 more deliveries" in r["note"]
    many = [delivery("P", "client", mid="f", t=0)] + [delivery(f"C{i}", "server", mid="f", t=1 + i)
                                                        for i in range(20)]
    [r] = MessageMatcher().add_all(many).rows(links_of(many))
    assert r["consumers"] == 20 and len(r["consumer_deliveries"]) == 17
    assert r["consumer_deliveries"][-1] == {"more": 4}


def test_pandas_and_parquet_dtypes(tmp_path):
    import pyarrow.parquet as pq

    from amqp_dissect.pipelines.writers.tables import write_table
    from amqp_dissect.results.tables import arrow_schema, pandas_dtypes, to_frame

    ds = [delivery("P", "client", mid="m", t=0), delivery("C", "server", mid="m", t=10, otime=20)]
    rows = message_rows(ds, links_of(ds))
    df = to_frame(rows, "messages")
    assert list(df.columns) == schema.names("messages")
    assert dict(df.dtypes) == pandas_dtypes("messages")
    assert str(df["producer_time"].dtype) == "datetime64[ns, UTC]" and df["residence"][0] == 1e-8
    out = tmp_path / "m.parquet"
    write_table(rows, "messages", "parquet", out)
    got = pq.read_schema(out)
    assert got.remove_metadata() == arrow_schema("messages").remove_metadata()
    back = pq.read_table(out).to_pandas()
    assert dict(back.dtypes) == pandas_dtypes("messages")
