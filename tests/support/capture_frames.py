"""The AMQP frames the Dissector decodes from a capture file, in order (shared by the tests that
compare frames one by one with another reading of the same capture)."""

from __future__ import annotations

from amqp_dissect.amqp.framing import Frame
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector


def frames_of(path) -> list:
    """Every :class:`Frame` event of the capture at ``path``."""
    d = Dissector()
    out = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            out.extend(ev for ev in d.feed(rec) if type(ev) is Frame)
    return out
