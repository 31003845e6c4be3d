"""The report's messages section (results/messages_report.py) and its text and HTML
(render/messages.py) on synthetic deliveries: counts per state, per-address percentiles against
numpy's, the unmatched named with their packets, the journeys' arrows, bounds."""

from __future__ import annotations

import re

import numpy as np
from test_messages import delivery, links_of

from amqp_dissect.render import html as H
from amqp_dissect.render.messages import html_section, text_lines
from amqp_dissect.results.messages import MessageMatcher
from amqp_dissect.results.messages_report import UNMATCHED, messages_section

MS = 1_000_000


def section(ds, matcher=None):
    m = (matcher or MessageMatcher()).add_all(ds)
    return messages_section(m.rows(links_of(ds)), m), m


def fan_out():
    ds = []
    for i in range(10):  # 10 messages to 2 consumers, residences i+1 and 2(i+1) ms
        ds.append(delivery("P", "client", mid=f"m{i}", t=i * MS, address="topic/a"))
        ds.append(delivery("C1", "server", mid=f"m{i}", t=(2 * i + 1) * MS, otime=(2 * i + 2) * MS, address="topic/a"))
        ds.append(delivery("C2", "server", mid=f"m{i}", t=(3 * i + 2) * MS, otime=(3 * i + 9) * MS, link_index=1,
                           address="topic/a"))
    ds.append(delivery("P", "client", mid="lost", t=50 * MS, address="queue/b"))
    ds.append(delivery("C1", "server", mid="orphan", t=60 * MS, address="queue/b"))
    return ds


def test_counts_percentiles_and_unmatched():
    sec, m = section(fan_out())
    assert sec["messages"] == 12
    assert sec["states"] == {"delivered": 10, "published, never delivered in the capture": 1,
                             "delivered, publish not in the capture": 1}
    a = next(x for x in sec["addresses"] if x["address"] == "topic/a")
    assert (a["messages"], a["fan_out_mean"], a["fan_out_max"]) == (10, 2.0, 2)
    res = [(i + 1) / 1000 for i in range(10)]  # the first consumer's (C1)
    e2e = [(i + 2) / 1000 for i in range(10)]
    for got, want in ((a["residence"], res), (a["end_to_end"], e2e)):
        assert got["count"] == 10 and got["max"] == max(want)
        assert np.isclose(got["p50"], np.percentile(want, 50)) and np.isclose(got["p90"], np.percentile(want, 90))
        assert sum(got["histogram"]["counts"]) == 10 and got["histogram"]["log"]
    never = sec["unmatched"]["published, never delivered in the capture"]
    assert [u["message_id"] for u in never] == ["lost"] and never[0]["packets"]
    assert [u["message_id"] for u in sec["unmatched"]["delivered, publish not in the capture"]] == ["orphan"]
    text = "\n".join(text_lines({"messages": sec}))
    assert "12 messages" in text and "'lost'" in text and f"packet {never[0]['packets'][0]}" in text
    assert text_lines({}) == [] and html_section({}, H) == ""


def test_journeys_draw_every_hop():
    sec, _ = section(fan_out())
    slow = sec["journeys"][0]
    assert slow["why"] == "slowest end to end" and slow["message_id"] == "m9"
    assert [h["role"] for h in slow["hops"]] == ["producer", "consumer", "consumer"]
    assert any(j["why"] == "never delivered" and j["message_id"] == "lost" for j in sec["journeys"])
    assert len({(j["message_id"], j["bare_digest"]) for j in sec["journeys"]}) == len(sec["journeys"])
    page = html_section({"messages": sec}, H)
    svg = re.search(r'<svg [^>]*id="journey-0".*?</svg>', page, re.S).group(0)
    # a transfer per hop and an outcome per hop that has one (the synthetic producer has none)
    assert svg.count('class="arrow"') == len(slow["hops"]) + sum(h["outcome_time"] is not None for h in slow["hops"]) == 5
    assert re.findall(r'data-plot="msg"', page) and page.count('id="msg-residence-') == 2


def test_section_bounds():
    ds = [delivery("P", "client", mid=f"x{i}", t=i) for i in range(UNMATCHED + 5)]
    sec, _ = section(ds)
    state = "published, never delivered in the capture"
    assert len(sec["unmatched"][state]) == UNMATCHED and sec["unmatched_counts"][state] == UNMATCHED + 5
    assert "… and 5 more" in "\n".join(text_lines({"messages": sec}))
    sec, m = section(ds, MessageMatcher(max_messages=3))
    assert sec["messages"] == 3 and sec["dropped_deliveries"] == UNMATCHED + 2
    assert "not matched" in "\n".join(text_lines({"messages": sec}))
