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

from amqp_dissect.pipelines.local import CaptureSource
from amqp_dissect.pipelines.requests import request_table
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


@pytest.fixture(scope="module")
def request_reply():
    path = os.path.join(MESSAGES, "request_reply.pcap")
    if not os.path.exists(path):
        pytest.fail("samples/messages/request_reply.pcap is missing (python samples/generate.py --messages)")
    rows, _ = request_table(CaptureSource([path]))
    return rows, _truth("request_reply")


def test_every_request_its_reply_and_the_unanswered(request_reply):
    rows, truth = request_reply
    check_rows(rows, "requests")
    links = {lk["name"]: lk for lk in truth["links"]}
    sent = links["rr-requests"]["deliveries"]            # the requester's own sends
    got_back = links["rr-replies-named"]["deliveries"]   # what the requester received
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
        assert len(answers) == 1 and r["status"] == "answered" and r["matched_by"] == "message-id", r
        assert (r["correlation_id_type"], r["correlation_id"]) == _key(answers[0]["correlation_id"])
        # the reply reached the requester's connection before its client had it
        assert r["reply_time"] <= _ns(answers[0]["t_received"]) + US
        assert 0 < r["round_trip"] <= answers[0]["t_received"] - d["t_sent"] + 2e-6
        assert r["reply_connection"] == r["request_connection"] != r["responder_connection"]
    # the truth's note: request 7 (ulong 7007) was never answered
    assert ours[("ulong", "7007")]["status"] == "no reply in the capture"
    answered = sum(1 for r in rows if r["status"] == "answered")
    assert answered == sum(1 for d in sent if replies.get(_key(d["message_id"])))
