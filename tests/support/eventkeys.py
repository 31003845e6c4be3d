"""Shared test helpers: run captures through the pipeline and compare decoded frames."""

from __future__ import annotations

import io

from amqp_dissect.amqp.framing import Frame, ProtocolHeader
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.render.frames import event_json


def frame_keys(events, direction=None) -> list[dict]:
    """A comparable summary of the headers and frames: everything decoded, no packet numbers or times."""
    keys = []
    for e in events:
        if direction is not None and getattr(e, "direction", None) != direction:
            continue
        if isinstance(e, (Frame, ProtocolHeader)):
            j = event_json(e)
            for k in ("packet", "time", "time_ns", "first_packet", "delivery_first_packet"):
                j.pop(k, None)
            keys.append(j)
    return keys


def run_pipeline(data: bytes) -> list:
    """All events of a capture given as bytes, through a fresh Dissector."""
    d = Dissector()
    ev = []
    for r in open_capture(io.BytesIO(data)):
        ev += d.feed(r)
    return ev + d.finish()


def analyze_file(path, analyzer=None, dissector=None):
    """Every event of the capture at ``path`` fed to ``analyzer`` (a new Analyzer by default)
    through ``dissector`` (a new Dissector by default), then finished; the analyzer."""
    from amqp_dissect.results.analytics import Analyzer

    an = Analyzer() if analyzer is None else analyzer
    d = Dissector() if dissector is None else dissector
    with open(path, "rb") as f:
        for rec in open_capture(f):
            for ev in d.feed(rec):
                an.feed(ev)
    for ev in d.finish():
        an.feed(ev)
    an.finish()
    return an
