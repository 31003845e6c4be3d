"""The requests table from synthetic deliveries rows: the corner cases the captures do not hold.

Oracle: the rows are written here by hand, with the ids, addresses and times a client would have
sent (the expected request/reply pairs, statuses and round trips follow from the rules of
docs/definitions.md, "Requests and replies", not from our output).
"""

from __future__ import annotations

import json

import pytest

from amqp_dissect.results import schema
from amqp_dissect.results.requests import (MAX_CANDIDATES, RequestMatcher, covers, expiry_ns, request_rows,
                                           service_of)
from amqp_dissect.results.tables import check_rows, record_batch, to_frame

NS = 1_000_000_000
T0 = 1_790_000_000 * NS  # 2026-09-21, a round capture time

C1 = "10.0.0.1:40000-10.0.0.9:5672"   # the requester
C2 = "10.0.0.2:40001-10.0.0.9:5672"   # the responder


def d(conn, link_index, side, t, packet, *, link=None, address=None, mid=None, mid_type="string", cid=None,
      cid_type="string", reply_to=None, to=None, props=None, body_size=None, outcome="accepted"):
    """A deliveries row with the message fields the requests table reads."""
    return {"connection": conn, "link": link or f"link-{link_index}", "link_index": link_index,
            "sender_side": side, "address": address, "first_time": t, "last_time": t,
            "first_packet": packet, "last_packet": packet, "outcome": outcome,
            "message_id": mid, "message_id_type": mid_type if mid is not None else None,
            "correlation_id": cid, "correlation_id_type": cid_type if cid is not None else None,
            "reply_to": reply_to, "to": to,
            "application_properties": json.dumps(props) if props is not None else None,
            "body_size": body_size, "body_kind": "amqp-value" if body_size is not None else None}


def link(conn, idx, name, *, source=None, target=None, address=None, attach=T0, detach=None, refused=False):
    return {"connection": conn, "link_index": idx, "name": name, "source": source, "target": target,
            "address": address if address is not None else (target or source), "attach_time": attach,
            "detach_time": detach, "refused": refused}


def typed(rows):
    """The rows fit the registry, and make a typed Arrow batch and DataFrame."""
    check_rows(rows, "requests")
    assert record_batch(rows, "requests").num_rows == len(rows)
    df = to_frame(rows, "requests")
    assert list(df.columns) == schema.names("requests")
    return df


# --------------------------------------------------------------------------- request / reply


def test_both_correlation_conventions_and_the_broker_hops():
    links = [link(C1, 0, "req", target="/queues/service"), link(C1, 1, "rep", source="/queues/replies"),
             link(C2, 0, "in", source="/queues/service"), link(C2, 1, "out", target="/queues/replies")]
    rows = [
        # convention 1: the reply's correlation-id is the request's message-id
        d(C1, 0, "client", T0, 10, address="/queues/service", mid="m-1", reply_to="/queues/replies"),
        d(C2, 0, "server", T0 + 1_000_000, 12, address="/queues/service", mid="m-1", reply_to="/queues/replies"),
        d(C2, 1, "client", T0 + 2_000_000, 14, address="/queues/replies", mid="r-1", cid="m-1"),
        d(C1, 1, "server", T0 + 3_000_000, 16, address="/queues/replies", mid="r-1", cid="m-1"),
        # convention 2: the request's own correlation-id, copied by the service
        d(C1, 0, "client", T0 + 10_000_000, 20, address="/queues/service", mid="m-2", cid="job-7",
          reply_to="/queues/replies"),
        d(C2, 0, "server", T0 + 11_000_000, 22, address="/queues/service", mid="m-2", cid="job-7",
          reply_to="/queues/replies"),
        d(C2, 1, "client", T0 + 12_000_000, 24, address="/queues/replies", mid="r-2", cid="job-7"),
        d(C1, 1, "server", T0 + 13_500_000, 26, address="/queues/replies", mid="r-2", cid="job-7"),
    ]
    out = request_rows(reversed(rows), links, T0 + NS)  # (fed in any order: the fold order is not time order)
    typed(out)
    assert [r["request_id"] for r in out] == ["m-1", "m-2"]
    first, second = out
    assert first["matched_by"] == "message-id" and second["matched_by"] == "correlation-id"
    for r, sent, back, pkt in ((first, T0, T0 + 3_000_000, 16), (second, T0 + 10_000_000, T0 + 13_500_000, 26)):
        assert r["status"] == "answered" and r["replies"] == 1
        assert r["request_time"] == sent and r["reply_time"] == back and r["reply_packet"] == pkt
        assert r["round_trip"] == (back - sent) / NS
        assert r["request_connection"] == C1 and r["reply_connection"] == C1 and r["responder_connection"] == C2
        assert r["request_address"] == "/queues/service" and r["reply_address"] == "/queues/replies"
    assert second["round_trip"] == 0.0035
    assert second["request_correlation_id"] == "job-7" and second["correlation_id"] == "job-7"


def test_a_reply_to_another_address_is_not_the_reply():
    links = [link(C1, 0, "req", target="svc"), link(C1, 1, "rep", source="mine"), link(C1, 2, "x", source="other")]
    out = request_rows([
        d(C1, 0, "client", T0, 1, address="svc", mid="a", reply_to="mine"),
        d(C1, 2, "server", T0 + 5, 2, address="other", mid="z", cid="a"),
    ], links)
    assert [r["status"] for r in out] == ["no reply in the capture"]
    assert out[0]["reply_time"] is None and out[0]["round_trip"] is None and out[0]["matched_by"] is None


def test_dynamic_reply_node_is_the_address_the_broker_gave():
    # the client attached a receiver with a dynamic source; the broker's attach named it: the links
    # table's source is that address, and the request's reply-to names it
    links = [link(C1, 0, "req", target="svc"), link(C1, 1, "dyn", source="amq.gen-Xy12")]
    out = request_rows([
        d(C1, 0, "client", T0, 1, address="svc", mid=7, mid_type="ulong", reply_to="amq.gen-Xy12"),
        d(C1, 1, "server", T0 + 40_000, 3, address="amq.gen-Xy12", mid=None, cid=7, cid_type="ulong"),
    ], links)
    assert out[0]["status"] == "answered" and out[0]["round_trip"] == 0.00004
    assert out[0]["request_id"] == "7" and out[0]["request_id_type"] == "ulong"


def test_typed_ids_stay_distinct():
    links = [link(C1, 0, "req", target="svc"), link(C1, 1, "rep", source="r")]
    out = request_rows([
        d(C1, 0, "client", T0, 1, address="svc", mid=1, mid_type="ulong", reply_to="r"),
        d(C1, 0, "client", T0 + 1, 2, address="svc", mid="1", mid_type="string", reply_to="r"),
        d(C1, 1, "server", T0 + 9, 3, address="r", cid="1", cid_type="string"),
    ], links)
    ulong, string = out
    assert (ulong["request_id"], ulong["request_id_type"], ulong["status"]) == ("1", "ulong", "no reply in the capture")
    assert (string["request_id"], string["request_id_type"], string["status"]) == ("1", "string", "answered")
    assert string["correlation_id_type"] == "string"


def test_reply_without_request_and_answered_twice():
    links = [link(C1, 0, "req", target="svc"), link(C1, 1, "rep", source="r")]
    out = request_rows([
        d(C1, 1, "server", T0, 1, address="r", cid="before-the-capture", props={"statusCode": 200}),
        d(C1, 0, "client", T0 + 10, 2, address="svc", mid="q", reply_to="r"),
        d(C1, 1, "server", T0 + 20, 3, address="r", cid="q"),
        d(C1, 1, "server", T0 + 30, 4, address="r", cid="q"),
        # a message with a correlation-id on an ordinary queue is no reply
        d(C2, 0, "server", T0 + 40, 5, address="/queues/orders", cid="order-1"),
    ], links)
    typed(out)
    assert [r["status"] for r in out] == ["reply without request", "answered twice"]
    orphan, twice = out
    assert orphan["request_id"] is None and orphan["correlation_id"] == "before-the-capture"
    assert orphan["reply_time"] == T0 and orphan["status_code"] == 200
    assert twice["replies"] == 2 and twice["reply_packets"] == [3, 4]
    assert twice["reply_time"] == T0 + 20 and twice["round_trip"] == 10 / NS


def test_publisher_not_in_the_capture_is_said():
    links = [link(C2, 0, "in", source="svc"), link(C2, 1, "out", target="r")]
    out = request_rows([
        d(C2, 0, "server", T0, 1, address="svc", mid="m", reply_to="r"),
        d(C2, 1, "client", T0 + 100, 2, address="r", cid="m"),
    ], links)
    assert out[0]["status"] == "answered" and out[0]["responder_connection"] is None
    assert "publisher's transfer is not in the capture" in out[0]["note"]


# --------------------------------------------------------------------------- $management and $cbs


def test_management_operation_named_with_its_status():
    links = [link(C1, 0, "mgmt-s", target="$management"), link(C1, 1, "mgmt-r", source="$management",
                                                                 target="client-reply")]
    out = request_rows([
        d(C1, 0, "client", T0, 1, address="$management", mid="op-1",
          reply_to="client-reply", props={"operation": "READ", "type": "com.microsoft:queue", "name": "q1",
                                          "locales": "en-US"}),
        d(C1, 1, "server", T0 + 2_000_000, 2, address="$management", cid="op-1",
          props={"status-code": 404, "status-description": "not found"}),
    ], links)
    r = out[0]
    assert (r["service"], r["operation"], r["operation_type"], r["operation_name"], r["locales"]) == (
        "$management", "READ", "com.microsoft:queue", "q1", "en-US")
    assert (r["status_code"], r["status_description"], r["status"]) == (404, "not found", "answered")
    assert r["reply_address"] == "client-reply" and r["token_type"] is None


def _cbs(conn, t, packet, mid, audience, expiration, *, idx=0):
    return d(conn, idx, "client", t, packet, address="$cbs", mid=mid, mid_type="ulong", reply_to="cbs-reply",
             props={"operation": "put-token", "type": "jwt", "name": audience, "expiration": expiration},
             body_size=412)


def _cbs_links(conn, *, refused=False):
    return [link(conn, 0, "cbs-s", target="$cbs", refused=refused),
            link(conn, 1, "cbs-r", source="$cbs", target="cbs-reply")]


def test_put_token_named_and_the_token_never_kept():
    exp = 1_790_000_600  # seconds since the epoch, as the Azure SDK sends it
    out = request_rows([
        _cbs(C1, T0, 1, 1, "sb://ns.example/queue1", exp),
        d(C1, 1, "server", T0 + 5_000_000, 2, address="$cbs", cid=1, cid_type="ulong",
          props={"statusCode": 202, "statusDescription": "Accepted"}),
    ], _cbs_links(C1), T0 + NS)
    r = out[0]
    assert (r["service"], r["operation"], r["token_type"], r["token_audience"]) == (
        "$cbs", "put-token", "jwt", "sb://ns.example/queue1")
    assert r["token_expiry_time"] == exp * NS and r["token_size"] == 412
    assert (r["status_code"], r["token_refused"], r["token_outlived"]) == (202, False, False)


def test_refused_put_token_by_status_by_silence_and_by_its_link():
    out = request_rows([
        _cbs(C1, T0, 1, 1, "sb://ns.example/q", 1_790_000_600),
        d(C1, 1, "server", T0 + 9, 2, address="$cbs", cid=1, cid_type="ulong",
          props={"status-code": 401, "status-description": "InvalidSignature"}),
        _cbs(C1, T0 + 100, 3, 2, "sb://ns.example/q", 1_790_000_600),
    ], _cbs_links(C1), T0 + NS)
    status, silence = out
    assert status["token_refused"] is True and "status 401 InvalidSignature" in status["token_note"]
    assert silence["token_refused"] is True and silence["status"] == "no reply in the capture"
    assert "no reply" in silence["token_note"]
    refused = request_rows([_cbs(C2, T0, 1, 1, "q", 1_790_000_600)], _cbs_links(C2, refused=True))
    assert refused[0]["token_refused"] is True and "$cbs link was refused" in refused[0]["token_note"]


def test_token_expiring_under_an_attached_link():
    exp_s = 1_790_000_010  # T0 + 10 s
    links = _cbs_links(C1) + [
        link(C1, 2, "sender-q1", target="q1", attach=T0 + NS),                       # never detached
        link(C1, 3, "recv-q1-sub", source="q1/Subscriptions/s", attach=T0 + NS, detach=T0 + 5 * NS),
        link(C1, 4, "other", target="q2", attach=T0 + NS),                           # another node
        link(C1, 5, "late", target="q1", attach=T0 + 11 * NS, detach=T0 + 12 * NS),  # attached after
    ]
    ok = {"statusCode": 200}
    rows = [_cbs(C1, T0, 1, 1, "amqp://broker.example/q1", exp_s),
            d(C1, 1, "server", T0 + 1000, 2, address="$cbs", cid=1, cid_type="ulong", props=ok),
            d(C1, 2, "client", T0 + 2 * NS, 3, address="q1")]
    out = request_rows(rows, links, T0 + 20 * NS)
    assert out[0]["token_outlived"] is True
    assert [x["link"] for x in out[0]["token_links"]] == ["sender-q1"]
    assert out[0]["token_links"][0]["evidence"] == "still attached at the end of the capture"
    assert "outlived by 1 link(s): sender-q1" in out[0]["token_note"]
    # the capture ends before the expiry: nothing shows it outlived
    assert request_rows(rows, links, T0 + 9 * NS)[0]["token_outlived"] is False
    # a transfer after the expiry is evidence too
    moved = rows + [d(C1, 2, "client", T0 + 15 * NS, 9, address="q1")]
    got = request_rows(moved, links, T0 + 9 * NS)[0]
    assert got["token_outlived"] is True and got["token_links"][0]["evidence"].startswith("transfer 5.000000 s after")
    # renewed before the expiry: the old token is not outlived
    renewed = rows + [_cbs(C1, T0 + 8 * NS, 5, 2, "amqp://broker.example/q1", exp_s + 3600),
                      d(C1, 1, "server", T0 + 8 * NS + 1000, 6, address="$cbs", cid=2, cid_type="ulong", props=ok)]
    first, second = request_rows(renewed, links, T0 + 20 * NS)
    assert first["token_outlived"] is False and second["token_outlived"] is False


# --------------------------------------------------------------------------- helpers and bounds


def test_expiry_units_and_service_nodes():
    assert expiry_ns(1_790_000_000) == (1_790_000_000 * NS, None)          # seconds
    assert expiry_ns(1_790_000_000_123) == (1_790_000_000_123 * 1_000_000, None)  # milliseconds
    assert expiry_ns({"type": "timestamp", "value": 5}) == (5_000_000, None)
    assert expiry_ns("2026-09-21T14:13:20Z") == (1_790_000_000 * NS, None)
    assert expiry_ns("soon")[0] is None and "not understood" in expiry_ns("soon")[1]
    assert service_of("$cbs") == "$cbs" and service_of("myqueue/$management") == "$management"
    assert service_of("/queues/cbs") is None and service_of(None) is None
    assert covers("sb://ns/q1", "q1") and covers("sb://ns/q1", "/q1/Subscriptions/a")
    assert not covers("sb://ns/q1", "q10") and not covers("sb://ns/", "$cbs") and covers("sb://ns/", "q9")


def test_ordinary_messages_are_not_kept_and_the_cap_counts():
    m = RequestMatcher(max_candidates=2)
    for i in range(5):
        m.add(d(C1, 0, "client", T0 + i, i, address="/queues/work", mid=f"m{i}"))  # no reply-to: not kept
    assert m.rows() == [] and m.dropped == 0
    for i in range(5):
        m.add(d(C1, 0, "client", T0 + i, i, address="svc", mid=f"q{i}", reply_to="r"))
    assert len(m.rows()) == 2 and m.dropped == 3
    assert MAX_CANDIDATES >= 100_000


@pytest.mark.parametrize("props", [None, "not json", "[1, 2]"])
def test_odd_application_properties_are_no_failure(props):
    row = d(C1, 0, "client", T0, 1, address="$management", mid="x", reply_to="r")
    row["application_properties"] = props
    out = request_rows([row])
    assert out[0]["operation"] is None and out[0]["request_properties"] is None


# --------------------------------------------------------------------------- the report's section


def test_report_section_per_address_unanswered_and_tokens():
    import numpy as np

    from amqp_dissect.render.requests import request_html, request_lines
    from amqp_dissect.results.requests import requests_summary

    links = [link(C1, 0, "req", target="svc"), link(C1, 1, "rep", source="r")] + [
        link(C2, 0, "cbs-s", target="$cbs"), link(C2, 1, "cbs-r", source="$cbs", target="cbs-reply")]
    trips_ns = [1_000_000, 3_000_000, 2_000_000, 10_000_000]
    rows = []
    for i, trip in enumerate(trips_ns):
        t = T0 + i * NS
        rows += [d(C1, 0, "client", t, 10 * i + 1, address="svc", mid=f"m{i}", reply_to="r"),
                 d(C1, 1, "server", t + trip, 10 * i + 2, address="r", cid=f"m{i}")]
    rows.append(d(C1, 0, "client", T0 + 9 * NS, 99, address="svc", mid="lost", reply_to="r"))
    rows.append(_cbs(C2, T0, 5, 1, "sb://ns.example/q", 1_790_000_600))
    rows.append(d(C2, 1, "server", T0 + 7, 6, address="$cbs", cid=1, cid_type="ulong",
                  props={"statusCode": 401, "statusDescription": "expired"}))
    sec = requests_summary(request_rows(rows, links, T0 + 20 * NS))
    assert (sec["requests"], sec["answered"], sec["no_reply"]) == (6, 5, 1)
    svc = next(a for a in sec["by_address"] if a["address"] == "svc")
    assert (svc["requests"], svc["answered"]) == (5, 4)
    secs = [x / NS for x in trips_ns]
    assert svc["round_trip_p50"] == pytest.approx(float(np.percentile(secs, 50)), abs=1e-12)
    assert svc["round_trip_p90"] == pytest.approx(float(np.percentile(secs, 90)), abs=1e-12)
    assert svc["round_trip_max"] == 0.01
    assert [(u["request_id"], u["request_packet"]) for u in sec["unanswered"]] == [("lost", 99)]
    assert [t["kind"] for t in sec["tokens"]] == ["refused"]
    text = "\n".join(request_lines(sec))
    assert "no reply in the capture: 'lost' to svc" in text and "[packet 99]" in text
    assert "svc: 5 requests, 4 answered; round trip p50 2.500 ms" in text
    assert "put-token for sb://ns.example/q (jwt, 412 bytes, expires 2026-09-21" in text
    assert "refused: status 401 expired" in text
    page = request_html(sec)
    assert page.startswith('<h2 id="requests">') and "sb://ns.example/q" in page
    assert request_lines(requests_summary([])) == [] and request_html(None) == ""


# --------------------------------------------------------------------------- any rows


def _any_rows():
    from hypothesis import strategies as st

    ids = st.one_of(st.none(), st.sampled_from(["a", "b", "1", "$x"]))
    types = st.sampled_from(["string", "ulong", "uuid", "binary"])
    addr = st.one_of(st.none(), st.sampled_from(["svc", "r", "$cbs", "$management", "q1", "x/$management"]))
    props = st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["operation", "type", "name", "expiration", "statusCode", "status-code", "locales"]),
        st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                  st.text(max_size=8), st.lists(st.integers(), max_size=2)), max_size=5))
    row = st.builds(
        lambda conn, idx, side, t, dur, pkt, a, mid, mt, cid, ct, rt, to, pr, size: {
            **d(conn, idx, side, t, pkt, address=a, mid=mid, mid_type=mt, cid=cid, cid_type=ct, reply_to=rt, to=to,
                props=pr, body_size=size), "last_time": t + dur},
        st.sampled_from([C1, C2]), st.integers(0, 3), st.sampled_from(["client", "server"]),
        st.integers(T0, T0 + 10 * NS), st.integers(0, NS), st.integers(1, 50), addr, ids, types, ids, types,
        addr, addr, props, st.one_of(st.none(), st.integers(0, 100)))
    lnk = st.builds(lambda conn, idx, src, tgt, att, det, ref: link(conn, idx, f"l{idx}", source=src, target=tgt,
                                                                     attach=att, detach=det, refused=ref),
                    st.sampled_from([C1, C2]), st.integers(0, 3), addr, addr, st.integers(T0 - NS, T0 + 5 * NS),
                    st.one_of(st.none(), st.integers(T0, T0 + 20 * NS)), st.booleans())
    return st.lists(row, max_size=25), st.lists(lnk, max_size=8), st.one_of(st.none(), st.integers(T0, T0 + 30 * NS))


def test_any_rows_make_a_table_that_fits():
    from hypothesis import HealthCheck, given, settings

    rows_s, links_s, end_s = _any_rows()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(rows_s, links_s, end_s)
    def check(rows, links, end):
        out = request_rows(rows, links, end)
        typed(out)
        for r in out:
            assert r["status"] in ("answered", "no reply in the capture", "reply without request", "answered twice")
            assert r["replies"] == len(r["reply_packets"])
            assert (r["status"] == "answered") == (r["replies"] == 1 and r["request_time"] is not None)
            if r["round_trip"] is not None:
                assert r["round_trip"] >= 0  # (a reply is matched only to a request sent before it)
        # a request's row comes from a message that is a request (copies fold into it, never add one)
        def is_request(x):
            p = json.loads(x["application_properties"]) if x["application_properties"] else None
            return x["reply_to"] is not None or (
                isinstance(p, dict) and "operation" in p and bool(service_of(x["address"]) or service_of(x["to"])))
        assert len([r for r in out if r["status"] != "reply without request"]) <= sum(map(is_request, rows))

    check()
