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
