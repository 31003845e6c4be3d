"""Two rules of part 2, 2.6.12 (issue 39 item 8), on hand-built frame streams.

The oracle is the spec's text and how each stream is built: a delivery the sender settled at send
time (settled=true on its transfer) is forgotten by the sender, so a receiver's disposition range
that also names it says nothing about it; and a delivery-tag is unique among the deliveries either
end could consider unsettled on a link.
"""

from __future__ import annotations

from test_state import Script, comp

import json

from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report


def _link():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=100)
    return s


# ------------------------------------------------------------------ presettled deliveries in a range

def test_a_range_gives_no_outcome_to_presettled_deliveries():
    s = _link()
    s.transfer(did=0)
    pre = s.transfer(did=1, settled=True)  # settled at send time: the sender forgets it
    s.transfer(did=2)
    disp = s.disposition(first=0, last=2, state="accepted", settled=True)
    a = s.done()
    rows = {r["delivery_id"]: r for r in a.delivery_rows()}
    for i in (0, 2):
        assert rows[i]["outcome"] == "accepted" and rows[i]["settled_by"] == "receiver"
        assert rows[i]["settled_packet"] == disp.packet
    r = rows[1]
    assert r["presettled"] is True and r["outcome"] == "" and r["outcome_by"] == ""
    assert r["settled_by"] == "sender" and r["settled_packet"] == pre.packet and r["receiver_settled_time"] is None
    assert r["dispositions_receiver"] == 1  # the range named it
    assert a.violation_rows() == []
    (conn,) = a.connection_rows()
    notes = [x for x in conn["inferred"] if "settled at send time" in x]
    assert notes == [f"the server's disposition ranges named deliveries the client settled at send time (first: "
                     f"delivery-ids 0..2 at packet {disp.packet}, 1 presettled): they keep no outcome from a range "
                     f"(the sender forgot them when it settled them, part 2, 2.6.12)"]
    link = a.link_rows()[0]
    assert link["accepted"] == 2 and link["presettled"] == 1 and link["no_outcome"] == 1
    rep = build_report(a)
    assert notes[0] in render_text(rep) and notes[0] in json.dumps(rep)
    from amqp_dissect.render import escape
    from amqp_dissect.render.html import render_html
    from amqp_dissect.results.plots import plot_data

    assert f"c1: inferred: {escape(notes[0])}</p>" in render_html(rep, plot_data(a))


def test_the_note_is_said_once_and_a_single_id_disposition_is_a_range_too():
    s = _link()
    for i in range(6):
        s.transfer(did=i, settled=True)
    first = s.disposition(first=0, last=2, state="released")
    s.disposition(first=3, state="accepted")
    s.disposition(first=4, last=5, state="accepted")
    a = s.done()
    assert all(r["outcome"] == "" and r["settled_by"] == "sender" for r in a.delivery_rows())
    notes = [x for x in a.connection_rows()[0]["inferred"] if "settled at send time" in x]
    assert len(notes) == 1 and f"at packet {first.packet}, 3 presettled" in notes[0]


def test_the_senders_own_state_on_a_presettled_transfer_stays():
    """A sender may give a presettled delivery its outcome on the transfer (state field): that one is
    the sender's and stays; a receiver's range after it takes nothing."""
    s = _link()
    s.transfer(did=0, settled=True, state=comp("accepted"))
    s.disposition(first=0, state="rejected")
    a = s.done()
    (r,) = a.delivery_rows()
    assert r["outcome"] == "accepted" and r["outcome_by"] == "sender"


# ------------------------------------------------------------------ a delivery-tag repeated while unsettled

def _tag_rows(a):
    return [v for v in a.violation_rows() if v["kind"] == "delivery-tag"]


def test_a_hundred_unsettled_deliveries_sharing_the_empty_tag_are_one_violation():
    s = _link()
    s.flow(1, dc=0, credit=500)
    sent = [s.transfer(did=i, tag=b"") for i in range(100)]
    s.transfer(did=100, tag=b"other")  # a tag of its own: nothing
    a = s.done()
    (row,) = _tag_rows(a)
    assert row["side"] == "client" and row["link"] == "L" and row["count"] == 99
    assert row["packet"] == sent[1].packet and row["delivery_id"] == 1  # the first repeat
    assert row["message"] == (
        "delivery-tag empty of the client on link 'L' repeated among its unsettled deliveries (part 2, 2.6.12: "
        "unique among the deliveries either end could consider unsettled): delivery-ids 0, 1, 2, 3, 4, …; "
        "99 deliveries gave it while an earlier one with it was unsettled")
    assert [v["kind"] for v in a.violation_rows()] == ["delivery-tag"]
    rep = build_report(a)
    assert rep["summary"]["violations"] == 99  # (added up as the ledger adds up a flood)
    assert f"packet {row['packet']} c1 ch 0: [delivery-tag] {row['message'][:100]}" in render_text(rep)
    assert row in rep["violations"]


def test_a_tag_is_free_again_once_its_delivery_is_settled_or_aborted():
    s = _link()
    s.transfer(did=0, tag=b"a")
    s.disposition(first=0, state="accepted", settled=True)  # settled: "a" may be used again
    s.transfer(did=1, tag=b"a")
    s.transfer(did=2, tag=b"b", settled=True)  # presettled: never unsettled at the sender
    s.transfer(did=3, tag=b"b", settled=True)
    s.transfer(did=4, tag=b"c", more=True)
    s.transfer(did=4, tag=b"c", aborted=True)  # an aborted delivery is settled (2.7.5)
    s.transfer(did=5, tag=b"c")
    s.disposition(first=1, last=5, state="accepted", settled=True)
    a = s.done()
    assert a.violation_rows() == []


def test_two_tags_repeated_are_two_rows_and_unsettled_ones_still_count():
    s = _link()
    s.transfer(did=0, tag=b"x")
    s.transfer(did=1, tag=b"y")
    s.disposition(first=0, settled=False, state="accepted")  # an outcome, not settled: still unsettled
    s.transfer(did=2, tag=b"x")
    s.transfer(did=3, tag=b"y")
    s.transfer(did=4, tag=b"y")
    a = s.done()
    rows = {r["message"].split()[1]: r for r in _tag_rows(a)}
    assert set(rows) == {b"x".hex(), b"y".hex()}
    assert rows[b"x".hex()]["count"] == 1 and "delivery-ids 0, 2;" in rows[b"x".hex()]["message"]
    assert rows[b"y".hex()]["count"] == 2 and "delivery-ids 1, 3, 4;" in rows[b"y".hex()]["message"]


def test_no_violation_when_a_gap_may_have_hidden_the_earlier_settlement():
    """Real TCP segments (tests/support/pcapbuild.py): the broker's disposition settling delivery 0
    is left out of the capture, and its ACKs do not reveal it (the gap is only seen at the broker's
    next segment, after the repeat).  The clean twin (nothing dropped) sees the settlement: no
    violation either; without the disposition at all, the repeat is one."""
    from test_loss import ACCEPTED, B, Conv, F, U, flow

    def transfer(did, tag):
        return F("transfer", [U(0), U(did), ("binary", tag, 0), U(0), B(False)], payload=b"\x00\x53\x75\xa0\x01x")

    def settle(first, last):
        return F("disposition", [B(True), U(first), U(last), B(True), ACCEPTED])

    def conv(with_disposition=True):
        c = Conv().start()
        c.add(1, flow(None, 100, 0, handle=0, dc=0, lc=100))
        c.add(0, transfer(0, b"same"))
        if with_disposition:
            c.add(1, settle(0, 0), drop=True)
        c.add(0, transfer(1, b"same"))
        c.add(1, settle(1, 1))
        return c

    for mode in ("late", "ack"):
        assert _tag_rows(conv().analyze(mode=mode)) == []  # lossy: unknown, not a violation
        assert _tag_rows(conv().analyze(mode=mode, drop=False)) == []  # clean: settled before the repeat
        (row,) = _tag_rows(conv(with_disposition=False).analyze(mode=mode))  # never settled: a repeat
        assert row["delivery_id"] == 1 and row["count"] == 1


def test_the_repeated_tag_is_the_same_with_two_workers(tmp_path, capsys):
    """A capture of real TCP segments (a transfer repeating an unsettled one's tag, nothing lost)
    read with one process and with -j 2: the same violation row."""
    import json as _json

    from test_loss import B, Conv, F, U, flow

    from amqp_dissect.cli.main import main

    c = Conv().start()
    c.add(1, flow(None, 100, 0, handle=0, dc=0, lc=100))
    for i in range(3):
        c.add(0, F("transfer", [U(0), U(i), ("binary", b"", 0), U(0), B(False)], payload=b"\x00\x53\x75\xa0\x01x"))
    path = tmp_path / "tags.pcap"
    path.write_bytes(c.pcap())
    got = []
    for extra in ([], ["-j", "2"]):
        assert main(["report", "-T", "json", *extra, str(path)]) == 0
        got.append(_json.loads(capsys.readouterr().out)["violations"])
    assert got[0] == got[1]
    (row,) = got[0]
    assert row["kind"] == "delivery-tag" and row["count"] == 2 and "delivery-ids 0, 1, 2;" in row["message"]
