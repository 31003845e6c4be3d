"""``-T fields -E ...`` (issue 27): tshark's field output options, with tshark as the oracle.

Byte for byte against ``tshark -T fields -E ...`` on packets that hold one protocol header or one
frame each (tshark writes a line per packet, this a line per frame: on those packets they are the
same lines).  ``occurrence`` and ``aggregator`` act on a field with several values in one frame,
which tshark 4.0 prints for no AMQP field (its arrays are presence-only fields): their oracle is
the values ``tshark -V`` lists (the SASL mechanisms of the sasl-mechanisms frame)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (tests/install-deps.sh installs it)")
FIELDS = ["frame.number", "ip.src", "tcp.srcport", "amqp.init.id", "amqp.sasl.method", "amqp.sasl.mechanism",
          "amqp.performative", "amqp.performative.arguments.first", "amqp.performative.arguments.settled",
          "amqp.performative.arguments.handle", "amqp.performative.arguments.linkCredit"]


@pytest.fixture(scope="module")
def one_per_packet() -> str:
    """A filter selecting the packets of outcomes.pcap that hold one protocol header or frame."""
    text = tshark_bytes("-r", OUTCOMES, "-Y", "amqp", "-T", "fields", "-E", "separator=,", "-e", "frame.number",
                        "-e", "amqp.init.id", "-e", "amqp.sasl.method", "-e", "amqp.performative",
                        "-e", "amqp.length").decode()
    # (a heartbeat has a length and no performative: counted by its length)
    single = [line.split(",")[0] for line in text.splitlines() if len([x for x in line.split(",")[1:] if x]) <= 2
              and not (line.split(",")[1] and line.split(",")[4])]
    assert len(single) > 10
    return "frame.number in {" + ", ".join(single) + "}"


def tshark_bytes(*args) -> bytes:
    r = subprocess.run([TSHARK, *args], capture_output=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def ours(capfdbinary, *args) -> bytes:
    rc = main(["frames", *args])
    out, err = capfdbinary.readouterr()
    assert rc == EXIT_OK, err
    return out


@pytest.mark.parametrize("opts", [
    [],
    ["header=y"],
    ["header=y", "quote=d"],
    ["quote=s", "separator=,"],
    ["separator=/s", "header=y"],
    ["separator=;x", "quote=d", "header=n"],  # (the first character only, as tshark)
    ["separator=/t", "quote=n", "aggregator=/s", "occurrence=f"],
    ["bom=y", "header=y", "occurrence=l"],
    ["bom=y"],
])
def test_E_options_as_tsharks_byte_for_byte(capfdbinary, one_per_packet, opts):
    args = ["-r", OUTCOMES, "-Y", one_per_packet, "-T", "fields"]
    for n in FIELDS:
        args += ["-e", n]
    for o in opts:
        args += ["-E", o]
    want = tshark_bytes(*args)
    assert want.count(b"\n") > 10
    assert ours(capfdbinary, *args) == want


def _mechanisms() -> list[str]:
    text = tshark_bytes("-r", OUTCOMES, "-Y", "amqp.sasl.method == 64", "-V").decode()
    found = re.findall(r"Mechanisms \(sym\d+\): (\S+)", text)
    assert len(found) == 3
    return found


@pytest.mark.parametrize("opts, pick", [([], lambda m: ",".join(m)),
                                        (["occurrence=f"], lambda m: m[0]),
                                        (["occurrence=l"], lambda m: m[-1]),
                                        (["occurrence=a", "aggregator=;"], lambda m: ";".join(m)),
                                        (["aggregator=/s", "quote=d"], lambda m: '"' + " ".join(m) + '"')])
def test_occurrence_and_aggregator_of_a_field_with_several_values(capfdbinary, opts, pick):
    mechs = _mechanisms()
    args = ["-r", OUTCOMES, "-Y", "amqp.sasl.method == 64", "-T", "fields", "-e", "sasl-server-mechanisms"]
    for o in opts:
        args += ["-E", o]
    assert ours(capfdbinary, *args) == (pick(mechs) + "\n").encode()


@pytest.mark.parametrize("opts, message", [
    (["-T", "fields", "-e", "packet", "-E", "foo=1"], "-E foo=1: not a field output option"),
    (["-T", "fields", "-e", "packet", "-E", "quote"], "-E quote: not a field output option"),
    (["-T", "fields", "-e", "packet", "-E", "quote=x"], "-E quote=x: quote is d or s or n"),
    (["-T", "fields", "-e", "packet", "-E", "occurrence=2"], "-E occurrence=2: occurrence is f or l or a"),
    (["-T", "fields", "-e", "packet", "-E", "separator="], "-E separator=: separator needs a character"),
    (["-E", "header=y"], "-E needs -T fields"),
])
def test_bad_E_is_one_line_and_exit_2(capsys, opts, message):
    rc = main(["frames", OUTCOMES, *opts])
    out, err = capsys.readouterr()
    assert rc == EXIT_USAGE and out == "" and err.startswith("amqp-dissect: " + message) and err.count("\n") == 1
