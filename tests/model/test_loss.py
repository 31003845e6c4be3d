"""Loss makes things unknown, never wrong.

* A real capture with kernel drops (``samples/loss/kernel_loss.pcap``: ``tcpdump -B 1`` under a
  flood of small messages; ``samples/generate.py --only kernel_loss`` makes it).  Oracles: the
  proton client's own record (the truth file: every delivery got an outcome, no error anywhere)
  and tshark's decode of the same capture (which dispositions are visible in it).
* Synthetic gaps (tests/support/pcapbuild.py): a segment is left out of the capture and the peer's ACKs
  do not reveal it (``late``), so the gap is only noticed at that side's next segment, as with
  a kernel drop where the ACKs went missing too; or they do (``ack``).  Each rule has a clean
  twin (the same conversation, nothing dropped) whose answer is the known one.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess

import pytest

from amqp_dissect.amqp.framing import StreamNote
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.model.serial import grant_left
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report
from fuzzgen import encode, frame_bytes, performative
from pcapbuild import ACK, PSH, TcpConversation, write_pcap

SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples", "loss")
TOP = 2**32
BIG = 2**31 - 1  # an incoming-window / link-credit of 2**31-1 (RabbitMQ, proton)
HEADER = b"AMQP\x00\x01\x00\x00"


# --------------------------------------------------------------------------- the real capture

def _truth():
    with open(os.path.join(SAMPLES, "kernel_loss.truth.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def real():
    return read_analysis(os.path.join(SAMPLES, "kernel_loss.pcap"))


def test_real_capture_lost_packets_in_the_kernel():
    t = _truth()
    st = t["capture_stats"]
    assert st["tcpdump_args"][:2] == ["-B", "1"]
    assert st["packets_dropped_by_kernel"] > 0
    # the client saw everything: 3000 sent and accepted by the broker, 3000 received and settled
    assert t["totals"]["messages_sent"] == t["totals"]["deliveries_received"] == 3000


def test_real_capture_loss_raises_no_violation_and_no_error(real):
    t = _truth()
    (conn,) = t["connections"]
    # the client met no error of any kind, so every violation or error row would come from the loss
    assert conn["connection_error"] is None and conn["session_errors"] == [] and conn["transport_error"] is None
    assert all(l["detach_error"] is None for l in t["links"])
    an = real.analyzer
    assert an.violation_rows() == []
    assert an.error_rows() == []
    (c,) = an.connection_rows()
    assert c["lossy"] and (c["gaps_client"] or c["gaps_server"])  # the capture did lose bytes


def _by_tag(t):
    """link name -> delivery tag (hex) -> the client's record of that delivery.  proton gives the
    receiver the tag as UTF-8 text, so RabbitMQ's 8-byte tags that are not valid UTF-8 are null in
    the truth: RabbitMQ numbers them 1, 2, ... in delivery order (checked on every tag proton did
    give), which restores them."""
    out = {}
    for l in t["links"]:
        m = out[l["name"]] = {}
        for i, d in enumerate(l["deliveries"]):
            tag = d["delivery_tag"]
            if l["role"] == "receiver":
                numbered = (i + 1).to_bytes(8, "big").hex()
                assert tag in (None, numbered), (i, tag)
                tag = numbered
            assert tag is not None and tag not in m
            m[tag] = d
    return out


def test_real_capture_outcomes_are_the_clients_or_lost(real):
    t = _truth()
    truth = _by_tag(t)
    for l in t["links"]:  # every delivery was settled with an outcome (the oracle of "lost")
        assert all(d["outcome"] is not None for d in l["deliveries"])
        if l["role"] == "sender":
            assert all(d["settled_by_broker"] for d in l["deliveries"])
    rows = real.analyzer.delivery_rows()
    assert rows
    lost = 0
    for r in rows:
        want = truth[r["link"]][r["delivery_tag"]]["outcome"]
        if r["outcome"]:
            assert r["outcome"] == want, r
        else:  # the settling disposition is not in the capture: unknown, not missing
            assert r["unsettled_at"] == "lost-in-capture", r
            lost += 1
    assert lost > 0  # the rule is exercised
    text = render_text(build_report(real.analyzer))
    assert "outcome unknown (lost in capture)" in text
    assert "unsettled at" not in text


def _tshark_dispositions(path):
    """(side whose deliveries are settled, delivery-id) of every disposition tshark decodes."""
    out = subprocess.run(["tshark", "-n", "-r", path, "-Y", "amqp.performative == 21", "-T", "json", "-J", "tcp amqp",
                          "--no-duplicate-keys"], capture_output=True, text=True, check=True).stdout
    seen = set()
    for pkt in json.loads(out):
        layers = pkt["_source"]["layers"]
        sender = 0 if layers["tcp"]["tcp.srcport"] == "5672" else 1  # the disposition settles the peer's
        pdus = layers["amqp"] if isinstance(layers["amqp"], list) else [layers["amqp"]]
        for pdu in pdus:
            if pdu.get("amqp.performative") != "21":
                continue
            args = pdu["amqp.method.arguments"]
            assert args["amqp.performative.arguments.role"] in ("1", "True")  # only receivers settle here
            first = int(args["amqp.performative.arguments.first"])
            last = int(args.get("amqp.performative.arguments.last", first))
            seen.update((sender, i) for i in range(first, last + 1))
    return seen


def test_real_capture_every_visible_disposition_gives_the_right_outcome(real):
    if shutil.which("tshark") is None:
        if os.environ.get("CI"):
            pytest.fail("tshark missing under CI (tests/install-deps.sh installs it)")
        pytest.skip("tshark is not installed: the Wireshark oracle is not run")
    seen = _tshark_dispositions(os.path.join(SAMPLES, "kernel_loss.pcap"))
    truth = _by_tag(_truth())
    rows = real.analyzer.delivery_rows()
    covered = 0
    for r in rows:
        key = (0 if r["sender_side"] == "client" else 1, r["delivery_id"])
        if key in seen:  # tshark sees its disposition: the outcome must be known and the client's
            covered += 1
            assert r["outcome"] == truth[r["link"]][r["delivery_tag"]]["outcome"], r
        # (tshark does not resynchronise inside a segment after a gap, the dissector does: the
        # outcomes it reads there are checked against the client's record by the test above)
    assert covered > 1000


# --------------------------------------------------------------------------- synthetic gaps

def F(name, fields, ch=0, payload=b""):
    return frame_bytes(encode(performative(name, fields)) + payload, ch)


def U(v):
    return ("uint", v, 0)


def B(v):
    return ("boolean", v, 0)


def S(v):
    return ("string", v, 0)


NULL = ("null", None, 0)
ACCEPTED = performative("accepted", [])


def open_(cid):
    return F("open", [S(cid)])


def begin(remote, noid, iw):
    return F("begin", [("ushort", remote, 0) if remote is not None else NULL, U(noid), U(iw), U(BIG)])


def attach(name, handle, receiver, idc=None):
    src = performative("source", [S("q")])
    tgt = performative("target", [S("q")])
    return F("attach", [S(name), U(handle), B(receiver), NULL, NULL, src, tgt, NULL, NULL,
                        U(idc) if idc is not None else NULL])


def flow(nii, iw, noid, handle=None, dc=None, lc=None):
    f = [U(nii) if nii is not None else NULL, U(iw), U(noid), U(BIG)]
    if handle is not None:
        f += [U(handle), U(dc) if dc is not None else NULL, U(lc)]
    return F("flow", f)


def transfer(did, handle=0):
    return F("transfer", [U(handle), U(did), ("binary", b"t%d" % did, 0), U(0), B(False)],
             payload=b"\x00\x53\x75\xa0\x01x")


def disposition(first, last, receiver=True):
    return F("disposition", [B(receiver), U(first), U(last), B(True), ACCEPTED])


def detach(handle):
    return F("detach", [U(handle), B(True)])


END = F("end", [])
CLOSE = F("close", [])


class Conv:
    """A conversation of (direction, bytes, dropped) parts, one TCP segment each."""

    def __init__(self):
        self.parts = []

    def add(self, d, *frames, drop=False):
        self.parts.append((d, b"".join(frames), drop))
        return self

    def start(self, client_iw=BIG, server_iw=BIG):
        """Headers, open, begin both ways; the client attaches a sender (handle 0, delivery-count 0)."""
        self.add(0, HEADER, open_("c"), begin(None, 0, client_iw), attach("l", 0, False, idc=0))
        self.add(1, HEADER, open_("s"), begin(0, 0, server_iw), attach("l", 0, True))
        return self

    def pcap(self, mode="late", drop=True):
        conv = TcpConversation()
        conv.handshake()
        seen = list(conv.next_seq)  # per side: the end of its last segment in the capture
        keep = []
        for d, data, dropped in self.parts:
            ack = seen[1 - d] if mode == "late" else conv.next_seq[1 - d]
            rec = conv.packet(d, PSH | ACK, data, ack=ack)
            if dropped and drop:
                continue
            seen[d] = conv.next_seq[d]
            keep.append(conv.records[-1])
            assert keep[-1][2] == rec
        n = len(conv.records)
        conv.packet(0, ACK | 0x01, ack=seen[1])  # FIN from the client, then the server's
        conv.packet(1, ACK | 0x01, ack=conv.next_seq[0])
        keep += conv.records[n:]
        return write_pcap(conv.records[:3] + keep)

    def analyze(self, **kw):
        return read_analysis(io.BytesIO(self.pcap(**kw))).analyzer


def kinds(an):
    return [v["kind"] for v in an.violation_rows()]


def test_grant_left_is_unsigned():
    base = TOP - 3
    assert grant_left((base + BIG) % TOP, BIG, base) == BIG
    assert grant_left((base + BIG) % TOP, BIG, (base + 5) % TOP) == BIG - 5
    assert grant_left((base + TOP - 1) % TOP, TOP - 1, (base + 1) % TOP) == TOP - 2  # never wrapped negative
    assert grant_left((base + 2) % TOP, 2, (base + 3) % TOP) == -1  # one beyond the grant
    assert grant_left((base + BIG) % TOP, BIG, (base - 2) % TOP) is None  # behind the grant: unknown


@pytest.mark.parametrize("mode", ["late", "ack"])
def test_window_of_2_31_minus_1_does_not_wrap_after_lost_transfers(mode):
    c = Conv().start(server_iw=BIG)
    c.add(1, flow(None, 100, 0, handle=0, dc=0, lc=100))
    c.add(0, transfer(0), transfer(1))
    c.add(0, transfer(2), transfer(3), drop=True)  # two transfers lost
    c.add(1, flow(4, BIG, 0, handle=0, dc=4, lc=100))  # the server counted 4: its window starts at 4
    c.add(0, transfer(4))
    c.add(1, disposition(0, 4))
    an = c.analyze(mode=mode)
    assert kinds(an) == []
    (s,) = an.session_rows()
    assert s["remote_incoming_window_client"] == BIG - 1  # 4 + 2**31-1, one transfer since
    # the clean twin: the same window, nothing lost, the same answer
    clean = c.analyze(mode=mode, drop=False)
    assert kinds(clean) == [] and clean.session_rows()[0]["remote_incoming_window_client"] == BIG - 1


def test_window_overrun_is_still_a_violation_on_a_clean_capture():
    c = Conv().start(server_iw=2)
    c.add(1, flow(None, 2, 0, handle=0, dc=0, lc=100))
    c.add(0, transfer(0), transfer(1), transfer(2))  # the third is beyond the server's window of 2
    c.add(1, disposition(0, 2))
    assert kinds(c.analyze()) == ["session-window"]


@pytest.mark.parametrize("mode", ["late", "ack"])
def test_credit_resynchronised_from_the_next_flow(mode):
    c = Conv().start()
    c.add(1, flow(None, BIG, 0, handle=0, dc=0, lc=2))
    c.add(0, transfer(0), transfer(1))
    c.add(1, flow(2, BIG, 0, handle=0, dc=2, lc=3), drop=True)  # the grant of 3 more is lost
    c.add(0, transfer(2), transfer(3), transfer(4))  # within the lost grant
    c.add(1, flow(5, BIG, 0, handle=0, dc=5, lc=0))  # the next flow: credit known again (0)
    c.add(0, transfer(5))  # now really beyond the credit
    c.add(1, disposition(0, 5))
    an = c.analyze(mode=mode)
    vs = an.violation_rows()
    assert [(v["kind"], v["delivery_id"]) for v in vs] == [("credit", 5)]
    (link,) = an.link_rows()
    assert link["link_credit"] == -1 and link["delivery_count"] == 6
    # the clean twin sees the grant, so the same single violation
    assert [(v["kind"], v["delivery_id"]) for v in c.analyze(mode=mode, drop=False).violation_rows()] == [
        ("credit", 5)]


def test_receiver_delivery_count_resynchronises_lost_transfers():
    c = Conv().start()
    c.add(1, flow(None, BIG, 0, handle=0, dc=0, lc=BIG))
    c.add(0, transfer(0))
    c.add(0, transfer(1), transfer(2), drop=True)  # lost: the sender's count lags by 2
    c.add(1, flow(3, BIG, 0, handle=0, dc=3, lc=BIG))  # a credit of 2**31-1 from 3
    c.add(0, transfer(3))
    c.add(1, disposition(0, 3))
    an = c.analyze()
    assert kinds(an) == []
    (link,) = an.link_rows()
    assert link["delivery_count"] == 4 and link["link_credit"] == BIG - 1


def _finish(c, *, lose, who):
    """Detach, end, close; ``lose`` names the client's frame left out of the capture."""
    frames = {"detach": detach(0), "end": END, "close": CLOSE}
    for what in ("detach", "end", "close"):
        c.add(0, frames[what], drop=lose == what)
        c.add(1, frames[what])
    return c


@pytest.mark.parametrize("what,field,table", [("close", "closed_by", "connection_rows"),
                                              ("end", "ended_by", "session_rows"),
                                              ("detach", "detached_by", "link_rows")])
def test_lost_close_end_detach_is_unknown(what, field, table):
    def conv():
        c = Conv().start()
        c.add(1, flow(None, BIG, 0, handle=0, dc=0, lc=10))
        c.add(0, transfer(0))
        c.add(1, disposition(0, 0))
        return _finish(c, lose=what, who=0)

    an = conv().analyze()
    (row,) = getattr(an, table)()
    assert row[field] == "unknown"  # not "server": the client's, sent first, was lost
    assert an.error_rows() == []
    assert an.violation_rows() == []
    clean = conv().analyze(drop=False)
    assert getattr(clean, table)()[0][field] == "client"


def test_lost_dispositions_are_outcome_unknown_not_errors():
    c = Conv().start()
    c.add(1, flow(None, BIG, 0, handle=0, dc=0, lc=10))
    c.add(0, transfer(0), transfer(1), transfer(2))
    c.add(1, disposition(0, 0))
    c.add(1, disposition(1, 2), drop=True)  # the settlement of 1 and 2 is lost
    c.add(0, transfer(3))  # sent after the gap, never settled: a known unsettled delivery
    _finish(c, lose=None, who=0)
    an = c.analyze(mode="ack")
    rows = {r["delivery_id"]: r for r in an.delivery_rows()}
    assert rows[0]["outcome"] == "accepted"
    assert [rows[i]["unsettled_at"] for i in (1, 2)] == ["lost-in-capture"] * 2
    assert rows[1]["outcome"] == "" and rows[2]["outcome"] == ""
    # 3 was transferred after the loss was noticed: its missing settlement is not in the lost bytes
    assert rows[3]["unsettled_at"] == "detach"
    errs = an.error_rows()
    assert [(e["condition"], e["count"]) for e in errs] == [("unsettled-at-detach", 1)]
    clean = c.analyze(mode="ack", drop=False)
    out = {r["delivery_id"]: (r["outcome"], r["unsettled_at"]) for r in clean.delivery_rows()}
    assert out == {0: ("accepted", None), 1: ("accepted", None), 2: ("accepted", None), 3: ("", "detach")}


def test_no_zero_byte_resync_note():
    c = Conv().start()
    c.add(1, flow(None, BIG, 0, handle=0, dc=0, lc=10))
    c.add(0, transfer(0))
    c.add(0, transfer(1), drop=True)  # whole frames lost: the next segment starts with a frame header
    c.add(0, transfer(2))
    c.add(1, disposition(0, 2))
    d = Dissector()
    notes = []
    for rec in open_capture(io.BytesIO(c.pcap())):
        notes += [ev.note.message for ev in d.feed(rec) if isinstance(ev, StreamNote)]
    for ev in d.finish() if hasattr(d, "finish") else ():
        if isinstance(ev, StreamNote):
            notes.append(ev.note.message)
    assert any("missing from the capture" in n for n in notes), notes
    assert not any("after skipping 0 bytes" in n for n in notes), notes
