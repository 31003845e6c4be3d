"""Every number a user can type on the command line is used or refused (issue 40, item 2).

The numeric options are not listed here: the test walks the click commands the typer app builds,
takes every parameter whose type reads a number (integer, float, and their ranges), and gives each
one hostile values (non-finite, huge, negative, zero, past 64 bits).  Each run ends in exit 0 (the
value was used) or exit 2 with exactly one line on stderr (refused); never exit 1, never a traceback.
The numbers typed as text (``split --bytes``, ``archive --split-size``, ``-a duration:S``) are
walked over the same values.

``archive`` never starts Spark here: an accepted value stops where the session would start
(exit 0), so every check of its options before the JVM is what runs.
"""

from __future__ import annotations

import os

import pytest
import typer

from amqp_dissect.cli import archive as archive_cli
from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main
from amqp_dissect.cli.typer_app import app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "credit_one.pcap")  # small, several records of several seconds

HOSTILE = ("inf", "-inf", "+inf", "nan", "-nan", "1e300", "-1e300", "1e-300", "-1", "0", "-0", str(2 ** 63),
           str(2 ** 64), "9" * 400, "-" + "9" * 400, "1e19", "0x10", "1_000")
NUMERIC_TYPES = {"IntParamType", "FloatParamType"}  # (and their ranges, subclasses of them)
TEXT_NUMBERS = {"split": ("--bytes",), "archive": ("--split-size",)}


def reads_a_number(param_type) -> bool:
    # (by class name: typer may bring its own copy of click)
    return any(cls.__name__ in NUMERIC_TYPES for cls in type(param_type).__mro__)


def numeric_options():
    """(command, option) of every numeric option of every command, from the click commands."""
    group = typer.main.get_command(app)
    found = []
    for name, command in sorted(group.commands.items()):
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option" and reads_a_number(param.type):
                found.append((name, max(param.opts, key=len)))
    return found


def _stop_before_spark(*_a, **_kw):
    raise typer.Exit(EXIT_OK)  # where the Spark session would start: the options were all taken


def _argv(command: str, option: str, value: str, tmp_path) -> list[str]:
    """A run of ``command`` on a small sample with ``option value``, and what else it needs."""
    given = [f"{option}={value}"]
    if command == "split":
        rotate = [] if option in ("--packets", "--seconds", "--bytes") else ["--packets", "5"]
        return ["split", SAMPLE, "--out", str(tmp_path / "parts"), "--force", *rotate, *given]
    if command == "archive":
        return ["archive", SAMPLE, "--out", str(tmp_path / "archive"), *given]
    if command == "compare":
        return ["compare", SAMPLE, *given]
    return [command, SAMPLE, *given]


def check(capsys, monkeypatch, tmp_path, command, option, value):
    monkeypatch.setattr(archive_cli, "_Starting", _stop_before_spark)
    rc = main(_argv(command, option, value, tmp_path))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, (command, option, value, err)
    assert rc in (EXIT_OK, EXIT_USAGE), (command, option, value, rc, err)
    if rc == EXIT_USAGE:
        assert err.count("\n") == 1 and err.startswith("amqp-dissect: "), (command, option, value, err)
    return rc, err


def test_the_walk_finds_the_numeric_options():
    found = set(numeric_options())
    # (a walk that found nothing would pass every test below)
    assert {("split", "--seconds"), ("frames", "--count"), ("report", "--jobs"), ("archive", "--window")} <= found
    assert len(found) >= 20


@pytest.mark.parametrize("command,option", numeric_options())
def test_every_numeric_option_uses_or_refuses_hostile_values(capsys, monkeypatch, tmp_path, command, option):
    for value in HOSTILE:
        check(capsys, monkeypatch, tmp_path, command, option, value)


@pytest.mark.parametrize("command,option", [(c, o) for c, opts in TEXT_NUMBERS.items() for o in opts])
def test_sizes_typed_as_text_use_or_refuse_hostile_values(capsys, monkeypatch, tmp_path, command, option):
    for value in HOSTILE + tuple(v + "k" for v in HOSTILE) + tuple(v + "g" for v in HOSTILE):
        check(capsys, monkeypatch, tmp_path, command, option, value)


@pytest.mark.parametrize("value", ["inf", "nan", "1e300", "9" * 400])
def test_split_seconds_past_any_capture_is_refused(capsys, monkeypatch, tmp_path, value):
    # the reproducer: inf, nan and 1e300 ended in an internal error once a second record arrived
    rc, err = check(capsys, monkeypatch, tmp_path, "split", "--seconds", value)
    assert rc == EXIT_USAGE and "--seconds" in err, err


def test_split_seconds_in_range_is_used(capsys, monkeypatch, tmp_path):
    rc, _ = check(capsys, monkeypatch, tmp_path, "split", "--seconds", "1e8")
    assert rc == EXIT_OK
    assert len(os.listdir(tmp_path / "parts")) == 1  # (the sample spans seconds: one part)


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e300", "0", "-5"])
def test_autostop_duration_refuses_what_it_cannot_use(value):
    from amqp_dissect.cli.common import Fail
    from amqp_dissect.cli.live import parse_autostop

    with pytest.raises(Fail) as failed:
        parse_autostop([f"duration:{value}"])
    assert failed.value.code == EXIT_USAGE and "\n" not in str(failed.value)
