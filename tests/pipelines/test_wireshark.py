"""Wireshark's AMQP 1.0 dissector as an oracle, through pyshark, on every sample capture.

For every ``samples/*.pcap`` (globbed at collection time, so new samples are covered
automatically) tshark is run once through :class:`pyshark.FileCapture` (PDML output,
display filter ``amqp``).  Every AMQP layer Wireshark shows (protocol headers, SASL
frames, AMQP frames, heartbeats; several per packet, in stream order) is matched to
our frame by packet number and order within the packet, and compared:

* frame kind, channel, size, doff, performative (name and descriptor code);
* every argument Wireshark shows, nested composites (source, target, coordinator,
  delivery states, error) and compound values (arrays, maps) included, with its
  value normalised (numbers as decimal, booleans, binary as hex, settle modes /
  role / terminus durability / SASL code by their choice name);
* the message sections of a transfer (header, annotations, properties,
  application-properties, body);
* and, the other way round, every field we decode with a non-null value must be
  shown by Wireshark.
* Malformed: Wireshark's error-level expert items and "[Malformed Packet]" on a frame
  against our error notes on it.

pyshark flattens the PDML tree of a layer into fields by name; each field keeps its
byte offset and size, so the tree is rebuilt from byte ranges (a field is inside the
nearest earlier field whose range contains it).

The comparison itself is the product's (``amqp-dissect compare``:
:mod:`amqp_dissect.pipelines.wireshark.compare`).  Every disagreement must be one of its known Wireshark
defects (``KNOWN``, each with the reason) or the test fails; every entry there must actually
occur, on the samples or on the captures of ``tests/support/comparecaps.py`` (hand-made frames that
Wireshark mis-decodes and the samples do not contain).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

import pytest

import comparecaps
from amqp_dissect.pipelines.wireshark.compare import FRAME_CONDITIONS, KNOWN, Report, compare_capture

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*.pcap"))


def compare_sample(pcap: Path) -> Report:
    return compare_capture(pcap)


# --------------------------------------------------------------------------- tshark available?


def _tshark_missing() -> str | None:
    if shutil.which("tshark") is None:
        return "tshark is not installed (apt-get install -y tshark, or bash tests/install-deps.sh)"
    try:
        import pyshark  # noqa: F401
    except ImportError as exc:  # pragma: no cover - pyshark is a project dependency
        return f"pyshark cannot be imported: {exc}"
    return None


def require_tshark() -> None:
    """Fail under CI (tests/install-deps.sh installs tshark there), skip elsewhere."""
    reason = _tshark_missing()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {reason}; tests/install-deps.sh installs it", pytrace=False)
    print(f"\nskipping the Wireshark oracle: {reason}")
    pytest.skip(f"Wireshark oracle not run: {reason}")


# --------------------------------------------------------------------------- Wireshark side

def test_known_list_is_well_formed():
    ids = [e["id"] for e in KNOWN]
    assert len(ids) == len(set(ids)), "duplicate ids in amqp_dissect.pipelines.wireshark.compare.KNOWN"
    for e in KNOWN:
        assert set(e) <= {"id", "samples", "packets", "frames", "paths", "ws_errors", "ws_errors_all_paths",
                          "ws_values", "every_frame", "why"}, e["id"]
        assert e["frames"] in FRAME_CONDITIONS, e["id"]
        assert e["paths"] and e["why"].strip(), e["id"]
        assert e["packets"] is None or (e["packets"] and all(isinstance(p, int) for p in e["packets"])), e["id"]


# --------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def reports():
    """Report per capture, computed on first use: tshark reads each capture once per module."""
    cache: dict[str, Report] = {}

    def get(pcap: Path) -> Report:
        if pcap.name not in cache:
            cache[pcap.name] = compare_sample(pcap)
        return cache[pcap.name]

    return get


def test_there_are_samples():
    assert SAMPLES, "no samples/*.pcap found"


@pytest.mark.parametrize("pcap", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_agrees_with_wireshark(pcap, reports):
    require_tshark()
    r = reports(pcap)
    unknown = [d for d in r.disagreements if not d.known]
    print(f"\n{r.sample}: frames ours={r.ours_count} wireshark={r.ws_count}; {r.frames_compared} frames and "
          f"{r.values_compared} values compared; {len(r.disagreements)} disagreements "
          f"({len(r.disagreements) - len(unknown)} known)")
    # no vacuous pass: something was compared, and more than the frame header of a protocol header
    assert r.frames_compared > 0 and r.values_compared > 0, f"{r.sample}: nothing compared"
    assert any(p.startswith("fields.") for p in r.paths), f"{r.sample}: no performative argument compared"
    assert not unknown, (
        f"{len(unknown)} disagreement(s) with Wireshark not listed in amqp_dissect.pipelines.wireshark.compare.KNOWN:\n  "
        + "\n  ".join(str(d) for d in unknown[:40]))
    # frame counts: the same, apart from packets where a known entry explains a different count
    excused = [d for d in r.disagreements if d.path == "@frames"]
    assert (r.ours_count - sum(len(d.ours) for d in excused)
            == r.ws_count - sum(len(d.ws) for d in excused)), (r.ours_count, r.ws_count)


@pytest.fixture(scope="module")
def made_captures(tmp_path_factory):
    """The captures of tests/support/comparecaps.py (Wireshark defects the samples do not show)."""
    return comparecaps.build_all(tmp_path_factory.mktemp("comparecaps"))


def test_every_known_disagreement_occurs(reports, made_captures):
    require_tshark()
    reports = [reports(p) for p in SAMPLES] + [reports(p) for p in made_captures.values()]
    problems = []
    for entry in KNOWN:
        hits = [d for r in reports for d in r.disagreements if entry["id"] in d.known]
        if not hits:
            problems.append(f"{entry['id']}: never occurs (stale entry)")
            continue
        if entry["packets"] is not None:
            for p in entry["packets"]:
                if not any(d.packet == p for d in hits):
                    problems.append(f"{entry['id']}: nothing in packet {p}")
        if entry.get("every_frame"):
            cond = FRAME_CONDITIONS[entry["frames"]]
            hit_frames = {(d.sample, d.packet, d.index) for d in hits}
            for r in reports:
                if not fnmatch.fnmatchcase(r.sample, entry["samples"]):
                    continue
                for packet, index, tags in r.frames:
                    if entry["packets"] is not None and packet not in entry["packets"]:
                        continue
                    if cond(tags) and (r.sample, packet, index) not in hit_frames:
                        problems.append(f"{entry['id']}: {r.sample} packet {packet} #{index} matches the rule "
                                        f"but Wireshark agrees with us there")
    assert not problems, "\n".join(problems)
