"""The frames lines made as UTF-8 bytes (the fast path, when the output writes UTF-8) against the
same lines made as text (the path any other output takes), and the time column's fast path
against :func:`amqp_dissect.times.delta`.

The fast path builds a line's head and peers once per packet and direction as bytes and the rest
as ASCII text, and the dissector's own loop hands it the events; the text path joins each line as
one string and the CLI's loop hands them over.  Both must write the same characters: an output
whose encoding is not UTF-8 (``PYTHONIOENCODING=utf-16``) takes the text path, so its text is
the oracle for the UTF-8 output's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from amqp_dissect.errors import WARN, ExpertNote
from amqp_dissect.events import PacketNote
from amqp_dissect.render.frames import summary_line
from amqp_dissect.times import delta

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# several client stacks and shapes: notes and gaps, IPv6, heartbeats, multi-frame messages, rhea,
# the Azure SDK, a capture with another protocol, many connections
CAPTURES = [
    "samples/loss/kernel_loss.pcap",
    "samples/ipv6.pcap",
    "samples/heartbeat.pcap",
    "samples/large_message.pcap",
    "samples/messages/rhea_request_reply.pcap",
    "samples/messages/azure_cbs.pcap",
    "samples/other-protocols/amqp091.pcap",
    "samples/twins/proton_rabbitmq_burst.lossy.pcap.gz",
    "tests/data/multi_session_port6000_client20000_midstream.pcap",
]


def _frames(args: list[str], encoding: str | None = None) -> tuple[int, str, bytes]:
    env = dict(os.environ)
    env.pop("PYTHONIOENCODING", None)
    if encoding is not None:
        env["PYTHONIOENCODING"] = encoding
    p = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "frames", *args], capture_output=True,
                       cwd=ROOT, env=env)
    return p.returncode, p.stdout.decode(encoding or "utf-8"), p.stderr


@pytest.mark.parametrize("capture", CAPTURES)
def test_utf8_lines_are_the_text_lines(capture):
    fast = _frames([capture])
    text = _frames([capture], "utf-16")
    assert fast[1], "no lines"
    assert "→" in fast[1]  # (the peers' arrow: the one character beyond ASCII the lines always have)
    assert fast == text


@pytest.mark.parametrize("args", [
    ["-Y", "amqp.performative == \"transfer\" || frame.number < 40"],  # a filter: the CLI's loop, as bytes
    ["-t", "ad"],  # another time column
    ["-c", "25"],  # a packet limit
])
def test_utf8_lines_are_the_text_lines_with_options(args):
    capture = "samples/messages/rhea_request_reply.pcap"
    fast = _frames([*args, capture])
    text = _frames([*args, capture], "utf-16")
    assert fast[1]
    assert fast == text


def test_text_already_written_comes_first():
    """-T fields writes its header as text before the lines: with -T fields the lines stay text,
    and the plain lines after a text write keep their order (the text is flushed first)."""
    capture = "samples/outcomes.pcap"
    rc, out, _ = _frames(["-T", "fields", "-e", "frame.number", "-e", "amqp.performative", "-E", "header=y", capture])
    assert rc == 0
    assert out.splitlines()[0] == "frame.number\tamqp.performative"


@pytest.mark.parametrize("ns", [0, 1, 999, 1000, 999_999, 1_000_000, 999_999_999, 1_000_000_000, 1_000_000_999,
                                9_999_999_999_999, 10_000_000_000_000, 123_456_789_012_345_678, -1, -1000,
                                -999_999_999, -1_000_000_000, -1_500_000_000, -12_345_678_901_234])
def test_time_column_is_delta(ns):
    """The relative time column: the whole seconds right-aligned before six decimals, truncated,
    as ``times.delta`` writes them (the fast path for times at or after the first packet)."""
    t0 = 1_700_000_000_123_456_789
    line = summary_line(PacketNote(7, t0 + ns, ExpertNote(WARN, "capture", "x")), t0)
    assert line == f"     7 {'%11s' % delta(ns, 6)} [warn] x"
