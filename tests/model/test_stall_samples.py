"""Stalls, idle periods and the report's lines on the two captures of issue 11, against the wire.

Oracles: Wireshark's dissection of the capture (tshark -T json: each frame's time, direction,
performative and fields; nothing of ours), and the ground truth the proton client wrote while the
capture was made (samples/*.truth.json).  From tshark's frames the test finds, on its own, the
frame that used up the receiver link's credit, the last frame of that delivery, the flow that gave
credit back, the broker's available, and how the interval ended; our stalls table and report must
say the same.

* ``multiframe_credit_one``: 3 deliveries of many frames each at credit 1, credit given back as soon
  as each is complete; after the last one, no more credit and a detach.
* ``credit_idle``: credit 2 with 2 more messages waiting (a 100 ms pause), then the queue is empty:
  credit 0 with nothing waiting until a flow of 1 credit (the broker answers available 0); a late
  message uses that credit, then the client closes the connection.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pandas as pd
import pytest

from amqp_dissect.pipelines.runs.local import read_analysis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
PERF = {16: "open", 17: "begin", 18: "attach", 19: "flow", 20: "transfer", 21: "disposition", 22: "detach",
        23: "end", 24: "close"}


def _require_tshark():
    if shutil.which("tshark") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but tshark is missing; tests/install-deps.sh installs it", pytrace=False)
        pytest.skip("tshark is not installed (the oracle of these tests)")


def _pairs(pairs):
    return pairs  # keep duplicate keys: one "amqp" layer per AMQP frame


def _get(pairs, key, default=None):
    for k, v in pairs:
        if k == key:
            return v
    return default


def wire(name: str) -> list[dict]:
    """Every AMQP frame of the capture as tshark dissects it, in capture order:
    {packet, ts, server (sent by the broker), perf, args (field -> text)}."""
    _require_tshark()
    out = subprocess.run(["tshark", "-r", os.path.join(SAMPLES, name + ".pcap"), "-T", "json",
                          "-J", "frame tcp amqp"], capture_output=True, text=True, check=True).stdout
    frames = []
    for pkt in json.loads(out, object_pairs_hook=_pairs):
        layers = _get(_get(pkt, "_source"), "layers")
        fr, tcp = _get(layers, "frame"), _get(layers, "tcp")
        packet, ts = int(_get(fr, "frame.number")), float(_get(fr, "frame.time_epoch"))
        server = int(_get(tcp, "tcp.srcport")) == 5672
        for k, amqp in layers:
            if k != "amqp" or _get(amqp, "amqp.performative") is None:
                continue
            args = _get(amqp, "amqp.method.arguments") or []
            frames.append({"packet": packet, "ts": ts, "server": server,
                           "perf": PERF.get(int(_get(amqp, "amqp.performative"))),
                           "args": {k2.rsplit(".", 1)[1]: v for k2, v in args if isinstance(v, str)}})
    return frames


def truth(name: str) -> dict:
    with open(os.path.join(SAMPLES, name + ".truth.json"), encoding="utf-8") as f:
        return json.load(f)


def _int(x):
    return None if x is None else int(x)


def receiver_view(name: str, link_name: str) -> dict:
    """From tshark's frames: the broker->client link ``link_name`` (its handles from the attaches),
    its deliveries (first / last frame), the client's flows and the broker's availables on it."""
    frames = wire(name)
    att = [f for f in frames if f["perf"] == "attach" and f["args"].get("name") == link_name]
    h_client = _int(next(f for f in att if not f["server"])["args"]["handle"])
    h_server = _int(next(f for f in att if f["server"])["args"]["handle"])
    since = min(f["packet"] for f in att)  # (an earlier link may have used the same handles)
    deliveries, cur = [], None
    flows, avail = [], []
    end = None
    for f in frames:
        a = f["args"]
        if f["packet"] < since:
            continue
        if f["server"] and f["perf"] == "transfer" and _int(a.get("handle")) == h_server:
            if cur is None:
                cur = {"first": f, "last": None}
                deliveries.append(cur)
            if a.get("more") in (None, "0") or a.get("aborted") == "1":
                cur["last"] = f
                cur = None
        elif f["perf"] == "flow" and _int(a.get("handle")) == (h_server if f["server"] else h_client):
            if f["server"]:
                if a.get("available") is not None:
                    avail.append((f, int(a["available"]), len(deliveries)))
            else:
                flows.append((f, int(a["deliveryCount"]) + int(a["linkCredit"])))  # the delivery-limit it grants
        elif end is None and ((f["perf"] == "detach" and _int(a.get("handle")) in (h_client, h_server))
                              or f["perf"] in ("end", "close")) and deliveries:
            end = f
    return {"deliveries": deliveries, "flows": flows, "avail": avail, "end": end, "frames": frames}


def expected_credit_stalls(view: dict) -> list[dict]:
    """Each time a delivery's first frame reaches the delivery-limit the client granted: the stall,
    worked out from the wire alone."""
    out = []
    flows = view["flows"]
    for k, d in enumerate(view["deliveries"]):
        first = d["first"]
        granted = [lim for f, lim in flows if f["packet"] <= first["packet"]]
        if not granted or k + 1 < granted[-1]:
            continue  # credit left after this delivery
        restore = next(((f, lim) for f, lim in flows if f["packet"] > first["packet"] and lim > k + 1), None)
        stop = restore[0] if restore is not None else view["end"]
        # what the broker said it had available, minus the deliveries it began since
        rep = [(int(av), n) for f, av, n in view["avail"] if f["packet"] <= first["packet"]]
        left = rep[-1][0] - (k + 1 - rep[-1][1]) if rep else None
        nxt = next((x["first"] for x in view["deliveries"][k + 1:]), None)
        out.append({"exhausted": first, "start": d["last"], "end": stop, "ended_by_flow": restore is not None,
                    "left": left if left is None or left >= 0 else None, "next": nxt})
    return out


def _stalls(a, link):
    st = a.stalls
    return st[(st["link"] == link) & (st["kind"] == "link-credit")].sort_values("credit_exhausted_packet")


def _epoch(ts) -> float:
    return ts.timestamp()


@pytest.fixture(scope="module")
def multiframe():
    t = truth("multiframe_credit_one")
    rl = next(link for link in t["links"] if link["role"] == "receiver")
    return t, rl, receiver_view("multiframe_credit_one", rl["name"]), read_analysis(
        os.path.join(SAMPLES, "multiframe_credit_one.pcap"))


@pytest.fixture(scope="module")
def credit_idle():
    t = truth("credit_idle")
    rl = next(link for link in t["links"] if link["role"] == "receiver")
    return t, rl, receiver_view("credit_idle", rl["name"]), read_analysis(os.path.join(SAMPLES, "credit_idle.pcap"))


def test_multiframe_capture_is_what_the_issue_describes(multiframe):
    t, rl, view, _ = multiframe
    # the client's record: credit 1 at a time, and messages of many frames
    assert set(rl["credit_grants"]) == {1} and rl["deliveries_received"] == len(view["deliveries"]) == 3
    assert t["connections"][0]["max_frame_size_requested"] == 512
    for d in view["deliveries"]:
        assert d["last"]["packet"] > d["first"]["packet"]  # many frames: sent over several packets
    frames_per = t["totals"]["transfer_frames_received"] / rl["deliveries_received"]
    assert frames_per > 50


def test_multiframe_stalls_start_at_the_last_frame(multiframe):
    _, rl, view, a = multiframe
    exp = expected_credit_stalls(view)
    got = _stalls(a, rl["name"])
    assert len(got) == len(exp) == 3
    for (_, row), e in zip(got.iterrows(), exp):
        assert row["credit_exhausted_packet"] == e["exhausted"]["packet"]
        assert _epoch(row["credit_exhausted_at"]) == pytest.approx(e["exhausted"]["ts"], abs=1e-6)
        assert row["start_packet"] == e["start"]["packet"]
        assert _epoch(row["start"]) == pytest.approx(e["start"]["ts"], abs=1e-6)
        assert row["end_packet"] == e["end"]["packet"]
        assert row["duration"] == pytest.approx(e["end"]["ts"] - e["start"]["ts"], abs=2e-6)
        # the broker was still sending the delivery between the two
        assert e["start"]["ts"] > e["exhausted"]["ts"]


def test_multiframe_waiting_and_the_final_idle_period(multiframe):
    _, rl, view, a = multiframe
    exp = expected_credit_stalls(view)
    got = list(_stalls(a, rl["name"]).itertuples())
    for row, e in zip(got[:-1], exp[:-1]):
        assert e["left"] and e["left"] > 0 and e["ended_by_flow"]  # messages were waiting
        assert (row.waiting, row.waiting_evidence, row.idle) == (True, "available", False)
    last, e = got[-1], exp[-1]
    # after the last message nothing was left, no credit came back, the link was detached
    assert e["left"] == 0 and not e["ended_by_flow"] and e["end"]["perf"] == "detach" and e["next"] is None
    assert (last.waiting, last.waiting_evidence, last.idle, last.ended_by) == (False, "available", True, "detach")
    links = a.links.set_index("name")
    assert links.loc[rl["name"], "stalls"] == len(exp) - 1
    assert links.loc[rl["name"], "stalled_seconds"] == pytest.approx(
        sum(x["end"]["ts"] - x["start"]["ts"] for x in exp[:-1]), abs=1e-5)


def test_credit_idle_stalls_waiting_and_idle_periods(credit_idle):
    _, rl, view, a = credit_idle
    exp = expected_credit_stalls(view)
    got = list(_stalls(a, rl["name"]).itertuples())
    assert len(got) == len(exp) == 3
    for row, e in zip(got, exp):
        assert row.credit_exhausted_packet == e["exhausted"]["packet"]
        assert row.start_packet == e["start"]["packet"] == e["exhausted"]["packet"]  # one-frame messages
        assert row.end_packet == e["end"]["packet"]
        assert row.duration == pytest.approx(e["end"]["ts"] - e["start"]["ts"], abs=2e-6)
    pause, empty, late = zip(got, exp)
    # 1: two messages left in the queue (the broker's available), the receiver paused ~100 ms
    assert pause[1]["left"] > 0 and pause[1]["ended_by_flow"]
    assert (pause[0].waiting, pause[0].waiting_evidence, pause[0].idle) == (True, "available", False)
    assert pause[0].duration == pytest.approx(0.1, abs=0.03)
    # 2: the queue empty (available 0 left), credit came back by a flow, the broker answered available 0
    assert empty[1]["left"] == 0 and empty[1]["ended_by_flow"]
    answer = [(f, av) for f, av, _ in view["avail"] if f["packet"] > empty[1]["end"]["packet"]]
    assert answer and answer[0][1] == 0
    assert (empty[0].waiting, empty[0].waiting_evidence, empty[0].idle) == (False, "available", True)
    # 3: the broker's last available (0) is out of date (a delivery came after it): nothing known;
    # it ended at the client's close with no transfer after it
    assert late[1]["left"] is None and late[1]["end"]["perf"] == "close" and late[1]["next"] is None
    assert pd.isna(late[0].waiting)
    assert (late[0].waiting_evidence, late[0].idle, late[0].ended_by) == ("none", True, "close")


def _report_lines(path) -> list[str]:
    from amqp_dissect.cli.main import main
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["report", path]) == 0
    return buf.getvalue().splitlines()


def _initial_credit(view) -> list[tuple[dict, dict]]:
    """Sender links of the client: (its attach, the broker's first flow on it) from tshark."""
    out = []
    for f in view["frames"]:
        if f["perf"] == "attach" and not f["server"] and f["args"].get("role") in ("0", "False", "false"):
            h = _int(f["args"]["handle"])
            srv = next(x for x in view["frames"] if x["perf"] == "attach" and x["server"]
                       and x["args"].get("name") == f["args"].get("name"))
            hs = _int(srv["args"]["handle"])
            flow = next(x for x in view["frames"] if x["server"] and x["perf"] == "flow"
                        and _int(x["args"].get("handle")) == hs and x["packet"] >= f["packet"])
            out.append((f, flow))
            assert h is not None
    return out


def test_credit_idle_report_lines(credit_idle):
    _, rl, view, _ = credit_idle
    exp = expected_credit_stalls(view)
    lines = _report_lines(os.path.join(SAMPLES, "credit_idle.pcap"))
    init = _initial_credit(view)
    assert len(init) == 1
    stalled = (init[0][1]["ts"] - init[0][0]["ts"]) + (exp[0]["end"]["ts"] - exp[0]["start"]["ts"])
    idle = sum(e["end"]["ts"] - e["start"]["ts"] for e in exp[1:])
    summary = next(ln for ln in lines if ln.startswith("stalls "))
    assert summary.startswith(f"stalls 2 ({stalled:.3f} s stalled), idle periods 2 ({idle:.3f} s), ")
    longest = lines[lines.index("Longest stalls") + 1:]
    longest = longest[:longest.index("")] if "" in longest else longest  # (the section, not the diagnoses after it)
    assert len(longest) == 2
    pause = next(ln for ln in longest if "link-credit" in ln)
    assert (f"link '{rl['name']}' ch 0 from packet {exp[0]['start']['packet']} to {exp[0]['end']['packet']}, "
            "messages waiting: yes (the sender's available)") in pause
    assert f"{(exp[0]['end']['ts'] - exp[0]['start']['ts']) * 1000:.3f} ms" in pause
    # the idle periods are not among them
    assert not any(f"from packet {e['start']['packet']} " in ln for e in exp[1:] for ln in longest)


def test_multiframe_report_lines(multiframe):
    _, rl, view, _ = multiframe
    exp = expected_credit_stalls(view)
    lines = _report_lines(os.path.join(SAMPLES, "multiframe_credit_one.pcap"))
    idle = exp[-1]["end"]["ts"] - exp[-1]["start"]["ts"]
    summary = next(ln for ln in lines if ln.startswith("stalls "))
    assert f"idle periods 1 ({idle:.3f} s)" in summary
    longest = lines[lines.index("Longest stalls") + 1:]
    for e in exp[:-1]:
        line = next(ln for ln in longest if f"from packet {e['start']['packet']} to {e['end']['packet']}" in ln)
        assert f"(credit ran out at packet {e['exhausted']['packet']})" in line
        assert "messages waiting: yes" in line
    assert not any(f"from packet {exp[-1]['start']['packet']} " in ln for ln in longest)


def test_presettled_sample_report_counts_them_apart():
    t = truth("presettled")
    lines = _report_lines(os.path.join(SAMPLES, "presettled.pcap"))
    sec = lines[lines.index("Deliveries not accepted") + 1:]
    sec = sec[:sec.index("")] if "" in sec else sec
    n = t["totals"]["presettled_sent"] + t["totals"]["presettled_received"]
    assert sec == ["  none", f"  presettled (at-most-once): {n}"]
