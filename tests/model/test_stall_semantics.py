"""When a stall begins, whether the sender was waiting, and idle periods, on hand-built frame streams.

Oracle: each stream is written here frame by frame (tests/model/test_state.py's ``Script``: one packet per
frame, 10 ms apart unless told), so the frame that used up the credit, the last frame of that
delivery, the flows and the transfers that follow are known from the construction, not from our
output.
"""

from __future__ import annotations

import pytest

from amqp_dissect.amqp.codec import UInt
from amqp_dissect.model.state import AT_ONCE
from amqp_dissect.results.report import build_report
from amqp_dissect.render.report import render_text
from test_state import NS, Script


def _flow(s, *args, dt=None, **kw):
    """Script.flow, ``dt`` after the previous frame (default: the script's 10 ms)."""
    if dt is not None:
        s.t += round(dt * NS) - s.dt
    return s.flow(*args, **kw)


def _link_credit(a):
    return [r for r in a.stall_rows() if r["kind"] == "link-credit"]


def _start(s, credit=1, available=None):
    s.open_both()
    s.begin_both()
    s.attach_sender()
    if available is not None:
        s.flow(0, dc=0, credit=0, available=available)
    return s.flow(1, dc=0, credit=credit)


def test_multi_frame_delivery_at_credit_one_stalls_from_its_last_frame():
    s = Script()
    _start(s)
    first = s.transfer(did=0, more=True)  # uses the only credit
    s.transfer(did=0, more=True)
    last = s.transfer(did=0, more=False)  # the sender is done with it only here
    grant = _flow(s, 1, dc=1, credit=1, dt=0.003)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["credit_exhausted_packet"] == first.packet and st["credit_exhausted_at"] == first.ts
    assert st["start_packet"] == last.packet and st["start"] == last.ts
    assert st["end_packet"] == grant.packet
    assert st["duration"] == (grant.ts - last.ts) / NS == pytest.approx(0.003)
    # the old measure, from the first frame, would have been 23 ms
    assert grant.ts - first.ts == 23_000_000  # (nanoseconds)


def test_aborted_delivery_ends_the_busy_time():
    s = Script()
    _start(s)
    first = s.transfer(did=0, more=True)
    abort = s.transfer(did=0, more=True, aborted=True)
    grant = s.flow(1, dc=1, credit=1)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["credit_exhausted_packet"] == first.packet
    assert st["start_packet"] == abort.packet and st["end_packet"] == grant.packet


def test_credit_back_before_the_last_frame_is_no_stall():
    s = Script()
    _start(s)
    s.transfer(did=0, more=True)  # credit 0 ...
    s.flow(1, dc=1, credit=5)  # ... but back while the delivery is still being sent
    s.transfer(did=0, more=False)
    s.transfer(did=1)
    a = s.done()
    assert _link_credit(a) == []
    assert a.link_rows()[0]["stalls"] == 1  # the initial-credit stall only


def test_receiver_lowering_credit_mid_delivery_waits_for_its_last_frame():
    s = Script()
    _start(s, credit=5)
    s.transfer(did=0, more=True)
    lower = s.flow(1, dc=1, credit=0)  # credit 0 while delivery 0 is still being sent
    last = s.transfer(did=0, more=False)
    grant = s.flow(1, dc=1, credit=1)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["credit_exhausted_packet"] == lower.packet
    assert st["start_packet"] == last.packet and st["end_packet"] == grant.packet


def test_link_detached_while_the_delivery_is_being_sent_is_no_stall():
    s = Script()
    _start(s)
    s.transfer(did=0, more=True)
    s.frame(0, "detach", handle=UInt(0), closed=True)
    a = s.done()
    assert _link_credit(a) == []


def test_waiting_from_available_and_a_later_available_moves_the_start():
    s = Script()
    _start(s, available=1)
    t = s.transfer(did=0)  # 1 available - 1 sent: nothing left
    zero = s.flow(0, dc=1, credit=0, available=0)
    more = s.flow(0, dc=1, credit=0, available=2)  # now a message is known to wait
    grant = s.flow(1, dc=1, credit=1)
    s.transfer(did=1, dt=0.001)  # (uses the new credit: a second stall, open at the end)
    a = s.done()
    st = _link_credit(a)[0]
    assert zero.packet < more.packet
    assert st["credit_exhausted_packet"] == t.packet
    assert st["start_packet"] == more.packet and st["start"] == more.ts
    assert st["end_packet"] == grant.packet
    assert st["waiting"] is True and st["waiting_evidence"] == "available" and st["idle"] is False


def test_nothing_available_is_an_idle_period_even_when_credit_comes_back():
    s = Script()
    _start(s, available=1)
    s.transfer(did=0)  # 1 - 1 = 0 left: nothing waiting
    grant = _flow(s, 1, dc=1, credit=1, dt=0.5)
    answer = s.flow(0, dc=1, credit=1, available=0)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["end_packet"] == grant.packet and st["ended_by"] == "flow"
    assert st["waiting"] is False and st["waiting_evidence"] == "available" and st["idle"] is True
    assert answer.packet > grant.packet
    link = a.link_rows()[0]
    assert link["stalls"] == 1  # the initial-credit stall; the idle period is not counted
    assert link["stalled_seconds"] == pytest.approx(sum(r["duration"] for r in a.stall_rows() if not r["idle"]))
    rep = build_report(a)
    assert rep["summary"]["stalls"] == 1 and rep["summary"]["idle_periods"] == 1
    assert rep["summary"]["idle_seconds"] == (grant.ts - st["start"]) / NS
    assert all(not r["idle"] for r in rep["longest_stalls"])


def test_an_out_of_date_available_says_nothing():
    s = Script()
    _start(s, credit=3, available=0)  # the sender said 0 ... then sent 3 anyway
    s.transfer(did=0)
    s.transfer(did=1)
    s.transfer(did=2)
    s.frame(1, "detach", handle=UInt(0), closed=True, dt=0.2)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["waiting"] is None and st["waiting_evidence"] == "none"
    # nothing shows it either way, and it ended at a detach with no transfer after it: idle
    assert st["idle"] is True and st["ended_by"] == "detach"


def test_a_transfer_at_once_after_the_flow_shows_waiting():
    s = Script()
    _start(s)
    s.transfer(did=0)
    grant = _flow(s, 1, dc=1, credit=1, dt=0.2)
    nxt = s.transfer(did=1, dt=AT_ONCE / 4 / NS)
    _flow(s, 1, dc=2, credit=1, dt=0.2)
    s.transfer(did=2, dt=AT_ONCE * 5 / NS)  # long after the flow: says nothing
    a = s.done()
    first, second, third = _link_credit(a)
    assert first["end_packet"] == grant.packet and nxt.ts - grant.ts < AT_ONCE  # (nanoseconds)
    assert (first["waiting"], first["waiting_evidence"], first["idle"]) == (True, "transfer", False)
    assert (second["waiting"], second["waiting_evidence"], second["idle"]) == (None, "none", False)
    # the third (open at the end of the capture, nothing after it) is an idle period
    assert third["open"] is True and third["idle"] is True


def test_ended_by_close_with_a_transfer_waiting_is_not_idle():
    s = Script()
    _start(s, available=5)
    s.transfer(did=0)  # 4 still available: waiting
    s.frame(0, "close", dt=0.3)
    a = s.done()
    (st,) = _link_credit(a)
    assert st["ended_by"] == "close" and st["waiting"] is True and st["idle"] is False


def test_session_window_stall_starts_at_the_frame_that_used_the_window():
    s = Script()
    s.open_both()
    s.begin_both(window=(1000, 2))  # the server takes 2 transfer frames
    s.attach_sender()
    s.flow(1, dc=0, credit=10, iw=2)
    s.transfer(did=0, more=True)
    used = s.transfer(did=0, more=True)  # window 0 with the delivery unfinished
    reopen = s.flow(1, dc=0, credit=10, nii=UInt(2), iw=2)
    nxt = s.transfer(did=0, more=False, dt=0.001)
    a = s.done()
    (st,) = [r for r in a.stall_rows() if r["kind"] == "session-window"]
    assert st["credit_exhausted_packet"] == st["start_packet"] == used.packet
    assert st["end_packet"] == reopen.packet
    # its next transfer frame came at once
    assert nxt.ts - reopen.ts < AT_ONCE
    assert (st["waiting"], st["waiting_evidence"], st["idle"]) == (True, "transfer", False)


def test_report_not_accepted_skips_presettled_and_says_how_many_more():
    s = Script()
    s.open_both()
    s.begin_both()
    s.attach_sender()
    s.flow(1, dc=0, credit=200)
    n_rejected, n_presettled = 57, 7
    for i in range(n_rejected):
        s.transfer(did=i)
    s.disposition(first=0, last=n_rejected - 1, state="rejected")
    for i in range(n_rejected, n_rejected + n_presettled):
        s.transfer(did=i, settled=True)
    unsettled = s.transfer(did=n_rejected + n_presettled)
    a = s.done()
    text = render_text(build_report(a))
    section = text.split("Deliveries not accepted\n")[1].split("\n\n")[0].splitlines()
    listed = [ln for ln in section if ln.startswith("  delivery ")]
    # 57 rejected + 1 unsettled expected an outcome; the presettled ones did not
    shown = 50
    assert len(listed) == shown
    assert f"  … and {n_rejected + 1 - shown} more (see `deliveries`)" in section
    assert f"  presettled (at-most-once): {n_presettled}" in section
    assert not any(f"delivery {i} " in ln for ln in listed for i in range(n_rejected, n_rejected + n_presettled))
    # the unsettled one is among those left for the deliveries table
    assert unsettled.packet not in [int(ln.rsplit("packet ", 1)[1].rstrip("]")) for ln in listed]


def test_longest_stalls_says_how_many_more():
    s = Script()
    _start(s)
    n = 12
    for i in range(n):
        s.transfer(did=i, dt=0.001)  # at once after the grant: the sender was waiting
        _flow(s, 1, dc=i + 1, credit=1, dt=0.02 + i * 0.001)
    last = s.transfer(did=n, dt=0.001)  # its stall stays open to the end, nothing after: idle
    a = s.done()
    real = [r for r in a.stall_rows() if not r["idle"]]
    assert len(real) == 1 + n  # the initial-credit stall and one per granted delivery
    assert [r for r in a.stall_rows() if r["idle"]][0]["credit_exhausted_packet"] == last.packet
    text = render_text(build_report(a))
    section = text.split("Longest stalls\n")[1].splitlines()
    assert len([ln for ln in section if "from packet" in ln]) == 10
    assert section[10] == f"  … and {1 + n - 10} more (see `stalls`)"
    # the longest first: the last grant waited longest
    assert "to " + str(real[-1]["end_packet"]) in section[0]
