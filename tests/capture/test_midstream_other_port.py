"""Joined mid-stream on a port that is not AMQP's, without ``--port`` (issue 39 item 6).

A sample (a broker on 5672) is rewritten so that the broker listens on 6000, as ``tcprewrite
--portmap`` would, and cut at the server's AMQP protocol header, found in the raw TCP payloads
(not by our decoder): the client's header, open, begin and attach are before the cut, the
server's header and open after it.  On 6000 nothing but that header says the stream is AMQP, so
the connection's bytes are held until it is seen; they must then reach the decoder in the order
they came, as on an AMQP port.  The oracle is the same cut left on 5672: the capture on 6000 gives
exactly its report (the server's header and open are no violation there; what the lost frames set
up is said as inferred), ports aside.
"""

from __future__ import annotations

import os

import dpkt
import pytest

from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tcp(linktype: int, buf: bytes):
    """(the frame parsed by dpkt, its TCP segment or None)."""
    frame = dpkt.ethernet.Ethernet(buf) if linktype == dpkt.pcap.DLT_EN10MB else dpkt.sll.SLL(buf)
    ip = frame.data
    return frame, (ip.data if isinstance(getattr(ip, "data", None), dpkt.tcp.TCP) else None)


def _moved(linktype: int, buf: bytes, port: int) -> bytes:
    """The frame with port 5672 replaced by ``port`` (checksums recomputed by dpkt)."""
    frame, tcp = _tcp(linktype, buf)
    if tcp is None:
        return buf
    tcp.sport = port if tcp.sport == 5672 else tcp.sport
    tcp.dport = port if tcp.dport == 5672 else tcp.dport
    tcp.sum = 0
    if hasattr(frame.data, "sum"):
        frame.data.sum = 0
    return bytes(frame)


def _cut_at_server_header(sample: str, out_dir, port: int) -> str:
    with open(os.path.join(ROOT, "samples", sample), "rb") as f:
        r = dpkt.pcap.Reader(f)
        linktype = r.datalink()
        pkts = list(r)
    assert linktype in (dpkt.pcap.DLT_EN10MB, dpkt.pcap.DLT_LINUX_SLL)
    headers = [i for i, (_, buf) in enumerate(pkts)
               if (lambda t: t is not None and t.sport == 5672 and t.data.startswith(b"AMQP\x00\x01\x00\x00"))(
                   _tcp(linktype, buf)[1])]
    first = headers[0]  # the first connection's server header (after SASL's)
    path = os.path.join(str(out_dir), f"{port}_{sample.replace('/', '_')}")
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=linktype)
        for ts, buf in pkts[first:]:
            w.writepkt(_moved(linktype, buf, port), ts)
    return path


def _per_connection(a, port: int) -> dict:
    """connection (named as on 6000) -> (its violations, its deliveries' ids and outcomes, what was inferred)."""
    v, d = a.violations, a.deliveries
    out = {}
    for row in a.analyzer.connection_rows():
        conn = row["connection"]
        vs = sorted(v[v["connection"] == conn]["message"]) if len(v) else []
        ds = sorted((r.channel, r.link, r.delivery_id, r.outcome or "") for r in d[d["connection"] == conn].itertuples())
        out[conn.replace(f":{port}", ":6000")] = (vs, ds, row["inferred"])
    return out


# drain: the case (1 violation on 5672, the drain answer; 3 on 6000 before: the server's
# header and open raised too); the others: proton, rhea, the Azure SDK, one and several connections
@pytest.mark.parametrize("sample", ["drain.pcap", "outcomes.pcap", "credit_one.pcap", "messages/rhea_request_reply.pcap",
                                    "messages/azure_cbs_expiry.pcap", "messages/idle_timeout.pcap",
                                    "messages/topic_fanout.pcap"])
def test_midstream_on_6000_gives_the_report_of_5672(tmp_path, sample):
    a5672 = read_analysis(_cut_at_server_header(sample, tmp_path, 5672))
    a6000 = read_analysis(_cut_at_server_header(sample, tmp_path, 6000))
    on_5672, on_6000 = _per_connection(a5672, 5672), _per_connection(a6000, 6000)
    assert on_6000 and all(c.endswith(":6000") for c in on_6000)
    # each connection the server's header marks as AMQP on 6000 (one joined after both headers is
    # not decoded without --port): the same violations, deliveries and inferred set-up as on 5672
    for conn, got in on_6000.items():
        assert got == on_5672[conn]
        assert not any("HDR not allowed" in m or "OPEN not allowed" in m for m in got[0])
    if len(on_6000) == len(on_5672):  # the whole report, ports aside (and the order of the connections:
        # one on 6000 is listed once its bytes were found to be AMQP)
        texts = [render_text(build_report(a.analyzer)).replace(":6000", ":PORT").replace(":5672", ":PORT")
                 for a in (a5672, a6000)]
        assert texts[0] == texts[1] or len(on_6000) > 1
        assert sorted(texts[0].splitlines()) == sorted(texts[1].splitlines())


def test_the_drain_sample_cut_on_6000_has_the_one_violation_of_5672(tmp_path):
    """The figures of the issue: 1 violation on 5672 (the server's drain answer), the same 1 on 6000."""
    for port in (5672, 6000):
        v = read_analysis(_cut_at_server_header("drain.pcap", tmp_path, port)).violations
        assert len(v) == 1 and v["message"].iloc[0].startswith("drain answer from the server"), list(v["message"])


def test_the_same_with_two_workers(tmp_path, capsys):
    from amqp_dissect.cli.main import main
    import json

    path = _cut_at_server_header("drain.pcap", tmp_path, 6000)
    got = []
    for extra in ([], ["-j", "2"]):
        assert main(["report", "-T", "json", *extra, path]) == 0
        got.append(json.loads(capsys.readouterr().out)["violations"])
    assert got[0] == got[1] and len(got[0]) == 1 and got[0][0]["kind"] == "drain"
