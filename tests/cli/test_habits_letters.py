"""Option letters mean one thing in every command (issue 27): ``-f`` is the capture filter (tshark's
``-f``), ``-T`` the output format (tshark's ``-T``); an old ``-f FORMAT`` says to use ``-T``."""

from __future__ import annotations

import os

import pytest

from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")


@pytest.mark.parametrize("command, fmt", [("report", "json"), ("report", "html"), ("links", "csv"),
                                          ("deliveries", "jsonl"), ("errors", "table"), ("frames", "jsonl")])
def test_old_f_for_a_format_says_to_use_T(capsys, command, fmt):
    rc = main([command, "-f", fmt, OUTCOMES])
    out, err = capsys.readouterr()
    assert rc == EXIT_USAGE and out == ""
    assert err == (f"amqp-dissect: -f is the capture filter (as in tshark); the output format is -T {fmt} "
                   f"(or --format {fmt})\n")


@pytest.mark.parametrize("command", ["report", "links", "frames"])
def test_f_is_the_capture_filter_everywhere(capsys, command):
    rc = main([command, "-f", "tcp port 5672", OUTCOMES])
    _out, err = capsys.readouterr()
    assert rc == EXIT_USAGE and "a capture filter (-f / --capture-filter) needs -i IFACE" in err


def test_T_is_the_format_everywhere(capsys):
    assert main(["report", "-T", "json", OUTCOMES]) == EXIT_OK
    assert capsys.readouterr().out.startswith("{")
    assert main(["links", "-T", "csv", OUTCOMES]) == EXIT_OK
    assert capsys.readouterr().out.startswith("connection,")
    assert main(["links", "--format", "jsonl", OUTCOMES]) == EXIT_OK
    assert capsys.readouterr().out.startswith("{")
