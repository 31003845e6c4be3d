"""The report's text: each line names the packet of what it reports (the transfer and, where it
is another packet, the disposition that settled it), lines that would say the same thing but for
the delivery id are folded with a count, and counts have one format (thousands separators).

Oracles: tshark's packet numbers of the transfers and dispositions of samples/outcomes.pcap, and
the sample's ground truth (outcomes.truth.json) for the counts of a capture of 60 replays."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from amqp_dissect.cli.main import main
from amqp_dissect.results.report import NOTABLE

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
OUTCOMES = SAMPLES / "outcomes.pcap"


def _report(capsys, *args) -> str:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _tshark(pcap: Path, display_filter: str, *fields) -> list[list[str]]:
    r = subprocess.run(["tshark", "-r", str(pcap), "-Y", display_filter, "-T", "fields",
                        *[a for f in fields for a in ("-e", f)]], capture_output=True, text=True, check=True)
    return [line.split("\t") for line in r.stdout.splitlines() if line]


def _section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    i = lines.index(title)
    out = []
    for line in lines[i + 1:]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def _transfer_packet(pcap: Path, sender_port: int, delivery_id: int) -> int:
    """The packet of the transfer of ``delivery_id`` that the peer on ``sender_port`` sent (tshark)."""
    for number, ids in _tshark(pcap, f"tcp.srcport == {sender_port} && amqp.performative == 20", "frame.number",
                               "amqp.performative.arguments.deliveryId"):
        if str(delivery_id) in ids.split(","):
            return int(number)
    raise AssertionError(f"no transfer of delivery {delivery_id}")


def test_not_accepted_lines_name_the_transfer_and_the_outcome_packets(capsys):
    """outcomes.pcap: deliveries 3 and 4 of the receiver link (sent by the broker, port 5672) were
    rejected by the client's disposition; tshark puts their transfers and that disposition in
    different packets, and the line names both; likewise the modified ones."""
    text = _report(capsys, "report", OUTCOMES)
    lines = _section(text, "Deliveries not accepted")
    rejected = int(_tshark(OUTCOMES, "amqp.delivery-state.rejected", "frame.number")[0][0])
    modified = int(_tshark(OUTCOMES, "amqp.modified.deliveryFailed", "frame.number")[0][0])
    t3, t4 = _transfer_packet(OUTCOMES, 5672, 3), _transfer_packet(OUTCOMES, 5672, 4)
    assert t3 == t4 != rejected
    (line,) = [x for x in lines if ": rejected" in x]
    assert line.endswith(f"[transfer packet {t3}, rejected at packet {rejected}]"), line
    assert "2 deliveries 3, 4 on 'outcomes-receiver'" in line
    t7 = _transfer_packet(OUTCOMES, 5672, 7)
    (line,) = [x for x in lines if ": modified" in x]
    assert line.endswith(f"[transfer packet {t7}, modified at packet {modified}]"), line


def test_slowest_settlements_folded_and_named(capsys):
    """No two lines of a notable list say the same thing but for the delivery id; the folded counts
    add up to the rows listed; '1 frame', never '1 frames'; each line names the settling packet."""
    text = _report(capsys, "report", OUTCOMES)
    doc = json.loads(_report(capsys, "report", OUTCOMES, "-T", "json"))
    rows = doc["notable_deliveries"]["slowest_settlement"]
    assert len(rows) == NOTABLE
    lines = _section(text, "Slowest settlements")
    assert len(lines) < len(rows)  # (the sample has deliveries settled together: folded)
    counts = [int(m.group(1)) if (m := re.search(r"  (\d+) deliveries ", x)) else 1 for x in lines]
    assert sum(counts) == len(rows)
    stripped = [re.sub(r"(\d+ deliveries [\d, to…]+|delivery \d+) on", "on", x) for x in lines]
    assert len(set(stripped)) == len(stripped)
    assert "1 frames" not in text and "(1 frame, " in text
    # delivery 1 of the sender link (the client, its port) is settled by the broker's disposition
    client_port = int(doc["connections"][0]["client"].rsplit(":", 1)[1])
    t1 = _transfer_packet(OUTCOMES, client_port, 1)
    settle = [int(n) for n, first, last in _tshark(
        OUTCOMES, "tcp.srcport == 5672 && amqp.performative == 21", "frame.number",
        "amqp.performative.arguments.first", "amqp.performative.arguments.last")
        if first and int(first.split(",")[0]) <= 1 <= int((last or first).split(",")[0])]
    (line,) = [x for x in lines if "'outcomes-sender'" in x]
    assert line.endswith(f"[transfer packet {t1}, settled at packet {settle[0]}]"), line


@pytest.fixture(scope="module")
def sixty(tmp_path_factory):
    """outcomes.pcap replayed 60 times, one after the other, on new client ports."""
    import pcapbuild

    dst = tmp_path_factory.mktemp("sixty") / "sixty.pcap"
    pcapbuild.repeat_pcap(str(OUTCOMES), str(dst), 60)
    return dst


def test_counts_have_thousands_separators(capsys, sixty):
    """60 replays: the summary's counts are the truth's times 60, written 1,200 (never 1200), and no
    count in the text is a bare run of four digits or more."""
    truth = json.loads((SAMPLES / "outcomes.truth.json").read_text())["totals"]
    deliveries = 60 * (truth["messages_sent"] + truth["deliveries_received"])
    outcomes = {k: 60 * (truth["sender_outcomes"][k] + truth["receiver_outcomes"][k])
                for k in ("accepted", "modified", "rejected", "released")}
    text = _report(capsys, "report", sixty)
    expected = (f"deliveries {deliveries:,} ("
                + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())) + ")")
    assert deliveries >= 1000 and expected in text, expected
    words = r"(?:connections|sessions|links|deliveries|accepted|rejected|released|modified|unsettled|stalls|" \
            r"idle periods|violations|errors|transactions|presettled|more)"
    bare = re.findall(rf"\b{words} \d{{4,}}\b", text)
    assert not bare, bare
