"""The requests table of the real captures of samples/messages/, against the clients' own records.

Oracle: ``<name>.truth.json``, written by the proton clients that made the traffic (the message
and correlation ids they sent and received, typed, and their own clock: ``t_sent`` before a
send, ``t_received`` when a message was handed to them).  Which request is answered is worked
out from the truth alone (a reply the requester received whose correlation-id is the request's
message-id, of the same type); the capture's times must lie between the clients' times.
"""

from __future__ import annotations

import json
import os

import pytest

from amqp_dissect.pipelines.runs.local import CaptureSource
from amqp_dissect.pipelines.runs.requests import request_table
from amqp_dissect.results.tables import check_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESSAGES = os.path.join(ROOT, "samples", "messages")
US = 1_000  # ns: the truth's times have six digits, the capture's microseconds


def _truth(name):
    with open(os.path.join(MESSAGES, name + ".truth.json"), encoding="utf-8") as f:
        return json.load(f)


def _ns(t: float) -> int:
    return round(t * 1_000_000) * 1000


def _key(typed: dict | None):
    return None if typed is None else (typed["type"], str(typed["value"]))


def _rows_of(name):
    path = os.path.join(MESSAGES, name + ".pcap")
    if not os.path.exists(path):
        pytest.fail(f"samples/messages/{name}.pcap is missing (python samples/generate.py --messages)")
    rows, _ = request_table(CaptureSource([path]))
    return rows, _truth(name)


# (capture, the requester's sending link, its reply link): a proton requester and a rhea one
@pytest.mark.parametrize("name, requests_link, replies_link", [
    ("request_reply", "rr-requests", "rr-replies-named"),
    ("rhea_request_reply", "rhea-client-requests", "rhea-client-replies"),
])
def test_every_request_its_reply_and_the_unanswered(name, requests_link, replies_link):
    rows, truth = _rows_of(name)
    check_rows(rows, "requests")
    links = {lk["name"]: lk for lk in truth["links"]}
    sent = links[requests_link]["deliveries"]      # the requester's own sends
    got_back = links[replies_link]["deliveries"]   # what the requester received
    replies = {}
    for d in got_back:
        if d["correlation_id"] is not None:
            replies.setdefault(_key(d["correlation_id"]), []).append(d)
    ours = {(r["request_id_type"], r["request_id"]): r for r in rows}
    assert len(rows) == len(sent) == len(ours)  # one row per request: the broker's copy folded in
    for d in sent:
        r = ours[_key(d["message_id"])]
        answers = replies.get(_key(d["message_id"]), [])
        assert r["reply_to"] == d["reply_to"]
        assert r["request_address"] == d["to"]
        # the capture's time of the request is at or after the client's send call
        assert r["request_time"] >= _ns(d["t_sent"]) - US
        if not answers:
            assert r["status"] == "no reply in the capture" and r["round_trip"] is None, r
            continue
        assert r["status"] == ("answered" if len(answers) == 1 else "answered twice"), r
        assert r["replies"] == len(answers) and r["matched_by"] == "message-id", r
        assert (r["correlation_id_type"], r["correlation_id"]) == _key(answers[0]["correlation_id"])
        # the first reply reached the requester's connection before its client had it
        first = min(a["t_received"] for a in answers)
        assert r["reply_time"] <= _ns(first) + US
        assert 0 < r["round_trip"] <= first - d["t_sent"] + 2e-6
        assert r["reply_connection"] == r["request_connection"] != r["responder_connection"]
    answered = sum(1 for r in rows if r["status"] != "no reply in the capture")
    assert answered == sum(1 for d in sent if replies.get(_key(d["message_id"])))


def test_the_notes_of_the_truth():
    rows, _ = _rows_of("request_reply")
    # "request 7 (message-id ulong 7007) was ... deliberately never answered"
    assert {(r["request_id_type"], r["request_id"]): r["status"] for r in rows}[("ulong", "7007")] == (
        "no reply in the capture")
    rows, _ = _rows_of("rhea_request_reply")
    # "request 4 was answered twice", "request 5 ... deliberately never answered"
    assert [r["status"] for r in rows][3:5] == ["answered twice", "no reply in the capture"]


@pytest.fixture(scope="module")
def azure_cbs():
    path = os.path.join(MESSAGES, "azure_cbs.pcap")
    if not os.path.exists(path):
        pytest.fail("samples/messages/azure_cbs.pcap is missing (python samples/generate.py --messages)")
    from amqp_dissect.pipelines.runs.requests import analyze_with_requests

    analysis, watch = analyze_with_requests(CaptureSource([path]))
    rows = watch.rows()
    return path, rows, watch.matcher.cbs_links, _truth("azure_cbs")


def test_the_azure_sdks_put_tokens_as_its_responder_recorded_them(azure_cbs):
    _, rows, _, truth = azure_cbs
    check_rows(rows, "requests")
    put = truth["responder"]["put_tokens"]
    assert [(r["request_id_type"], r["request_id"]) for r in rows] == [
        (p["message_id_type"].lower(), p["message_id"]) for p in put]
    tokens = {c["index"]: c["token"] for c in truth["connections"]}
    for r, p in zip(rows, put):
        assert (r["service"], r["operation"], r["token_type"], r["token_audience"]) == (
            "$cbs", p["operation"], p["type"], p["name"])
        # the expiration the SDK sent: an AMQP timestamp (ms); the client's own token says seconds
        assert r["token_expiry_time"] == p["expiration"] * 1_000_000
        assert any(t["expires_on"] * 1_000_000_000 == r["token_expiry_time"] for t in tokens.values())
        # the body: an amqp-value section (descriptor 0x00 0x53 0x77) of a str8 (0xa1, length): 5 bytes more
        assert r["token_size"] == p["token_length"] + 5
        assert (r["status_code"], r["status_description"], r["status"]) == (
            p["status_code"], p["status_description"], "answered")
        assert r["token_refused"] is (p["status_code"] >= 400)
        # the responder received the request after the capture saw it, and answered before the reply was seen
        assert r["request_time"] <= _ns(p["t_request"]) + US
        assert r["reply_time"] >= _ns(p["t_response"]) - US
        assert 0 < r["round_trip"]


def test_the_put_token_rabbitmq_never_answered(azure_cbs):
    _, _, cbs_links, truth = azure_cbs
    c0 = truth["connections"][0]
    assert c0["put_token"] is None and "attach" not in c0["frames_received"]  # (the truth: no attach came back)
    assert len(cbs_links) == 1
    line = cbs_links[0]
    assert line["connection"].endswith("-" + c0["server"]) and line["why"].startswith("never attached by the peer")
    assert sorted(line["links"]) == sorted(lk["name"] for lk in c0["links"])


def test_no_token_in_any_output(azure_cbs, tmp_path, capsys):
    from amqp_dissect.cli.main import main

    path, _, _, truth = azure_cbs
    secrets = [c["token"]["token"] for c in truth["connections"]]
    with open(path, "rb") as f:
        data = f.read()
    assert sum(s.encode() in data for s in secrets) == 2  # (the two put-tokens' bodies are in the capture)
    html = tmp_path / "r.html"
    outs = []
    for args in (["requests", path, "-T", "jsonl"], ["requests", path, "-T", "csv"], ["report", path, "--messages"],
                 ["report", path, "--messages", "-T", "json"], ["report", path, "--messages", "-T", "html", "-o", html]):
        assert main([str(a) for a in args]) == 0
        outs.append(capsys.readouterr().out)
    outs.append(html.read_text())
    for text in outs:
        assert not any(s in text for s in secrets)
    assert "no put-token on" in outs[2] and "refused: status 401" in outs[2]


def test_a_link_that_outlives_its_token():
    path = os.path.join(MESSAGES, "azure_cbs_expiry.pcap")
    if not os.path.exists(path):
        pytest.fail("samples/messages/azure_cbs_expiry.pcap is missing (python samples/generate.py --messages)")
    rows, an = request_table(CaptureSource([path]))
    truth = _truth("azure_cbs_expiry")
    (put,) = truth["responder"]["put_tokens"]
    (forced,) = truth["responder"]["forced_detaches"]
    (r,) = rows
    assert (r["request_id"], r["token_audience"], r["status_code"]) == (put["message_id"], put["name"], 202)
    assert r["token_expiry_time"] == put["expiration"] * 1_000_000
    assert r["token_refused"] is False and r["token_outlived"] is True
    assert [x["link"] for x in r["token_links"]] == [forced["link"]]
    assert r["token_links"][0]["evidence"].startswith("detached ")
    # the links table: that link's detach came after the expiry, and before the client read its
    # socket again (1 s after the expiry, by its own clock)
    (lk,) = [x for x in an.link_rows() if x["name"] == forced["link"]]
    assert r["token_expiry_time"] < lk["detach_time"] <= _ns(truth["connections"][0]["t_read_after_expiry"]) + US
    assert lk["detach_error"] == forced["condition"]
