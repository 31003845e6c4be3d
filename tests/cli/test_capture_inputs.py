"""The capture inputs of the CLI are one declared value (issue 42: "the CLI's capture inputs as
one shared value"): :class:`~amqp_dissect.cli.inputs.CaptureInputs` declares the files, ``-r``,
``-c``, ``--port``, ``--keylog`` and the live capture's options once; every command that reads a
capture takes them through it, and one prelude makes the run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer

import amqp_dissect.cli
from amqp_dissect.cli.common import EXIT_OPEN, EXIT_USAGE, Fail
from amqp_dissect.cli.inputs import INPUT_NAMES, CaptureInputs

CLI = Path(amqp_dissect.cli.__path__[0])
SAMPLE = Path(__file__).resolve().parents[2] / "samples"


def _commands():
    from amqp_dissect.cli.typer_app import app

    return typer.main.get_command(app).commands


def test_every_command_reading_a_capture_takes_the_one_value():
    """Each command with capture arguments has all of CaptureInputs' parameters, each the same
    click parameter (names, help, default) in every command."""
    seen = {}
    readers = []
    for name, command in _commands().items():
        params = {p.name: p for p in command.params}
        if "captures" not in params:
            continue
        readers.append(name)
        assert set(INPUT_NAMES) <= set(params), name
        for n in INPUT_NAMES:
            p = params[n]
            said = (tuple(p.opts), p.help, p.default, p.multiple)
            assert seen.setdefault(n, said) == said, (name, n)
    assert {"frames", "report", "deliveries", "links", "requests", "messages"} <= set(readers)


def test_the_capture_parameters_are_declared_once():
    """No module of cli/ but inputs.py declares a capture parameter (``captures: Captures``), opens
    the capture (``capture_or_live``) or makes a CaptureRun (but the run's own ``again``)."""
    declared, opened, made = [], [], []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.arg == "captures":
                declared.append(path.name)
            if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "captures":
                declared.append(path.name)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id == "capture_or_live":
                    opened.append(path.name)
                elif node.func.id == "CaptureRun":
                    made.append(path.name)
    assert sorted(set(declared)) == ["inputs.py", "run.py"]  # (run.py: capture_or_live's own parameter)
    assert opened == ["inputs.py"]
    assert sorted(made) == ["inputs.py", "run.py"]


def test_the_prelude_checks_as_before(tmp_path):
    with pytest.raises(Fail) as e:
        CaptureInputs().open()
    assert e.value.code == EXIT_USAGE and "no capture given" in str(e.value)
    with pytest.raises(Fail) as e:
        CaptureInputs(captures=[str(tmp_path)]).open()
    assert e.value.code == EXIT_OPEN
    with pytest.raises(Fail) as e:
        CaptureInputs(captures=["x.pcap"], iface="lo").open()
    assert e.value.code == EXIT_USAGE and "-i captures live" in str(e.value)
    capture = str(next(SAMPLE.glob("*.pcap*")))
    inputs = CaptureInputs(read=[capture], port=[6000], count=3)
    run = inputs.run(inputs.open())
    assert run.inputs == [capture] and 6000 in run.source.ports
    assert run.source.limit == 3
    assert list(CaptureInputs._fields) == list(INPUT_NAMES)
