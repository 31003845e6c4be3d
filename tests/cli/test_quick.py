"""cli/quick.py: ``report``, ``frames`` and the table commands parsed without typer.  The oracle is click itself, as typer
builds the command: for every line the quick parser takes, click takes it too and typer would pass
the command the same values (hand-picked lines and hypothesis' lines made of the options' names,
glued and ``=`` forms, values in and out of range, ``--``, ``--help``, unknown options).  And the
same output, byte for byte, from both ways of running a command."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqp_dissect.cli import quick, quickgen
from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.cli.typer_app import app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
REFUSED = "refused by click"


def test_the_table_is_what_the_typer_app_makes():
    with open(quickgen.TABLE_PATH, encoding="utf-8") as f:
        assert f.read() == quickgen.table_source(), "run: python -m amqp_dissect.cli.quickgen"


def _click_values(args: list[str]):
    """What typer would call the command of ``args`` with (click's parse, then typer's conversions),
    or REFUSED."""
    command = typer.main.get_command(app).commands[args[0]]
    try:
        with command.make_context(args[0], list(args[1:])) as ctx:
            params = dict(ctx.params)
    except Exception as e:  # (typer vendors click: its exceptions by name)
        names = {c.__name__ for c in type(e).__mro__}
        if names & {"ClickException", "Exit", "Abort"}:
            return REFUSED
        raise
    _, convertors, _ = typer.main.get_params_convertors_ctx_param_name_from_function(command.callback)
    return {k: convertors[k](v) if k in convertors else v for k, v in params.items()}


def _typed(values: dict) -> dict:
    return {k: (type(v), [(type(x), x) for x in v] if isinstance(v, list) else v) for k, v in values.items()}


def _check(args: list[str]) -> bool:
    """The quick parse of ``args`` agrees with click's; True when the quick parser took the line."""
    call = quick.quick_call(args)
    if call is None:
        return False
    expected = _click_values(args)
    assert expected is not REFUSED, f"quick took {args}, click refuses it"
    assert _typed(call.values) == _typed(expected), args
    command = typer.main.get_command(app).commands[args[0]]
    assert call.command is inspect.unwrap(command.callback)
    return True


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """An existing file, an existing directory, and a path that does not exist."""
    d = tmp_path_factory.mktemp("quick")
    (d / "there.txt").write_text("x")
    return [str(d / "there.txt"), str(d), str(d / "missing" / "out.txt")]


TAKEN = [
    ["report", "a.pcap"],
    ["report", "a.pcap", "b.pcap", "-T", "json"],
    ["report", "-Tjson", "a.pcap"],
    ["report", "--format=html", "-o", "out.html", "a.pcap"],
    ["report", "-j", "0", "a.pcap"],
    ["report", "-j2", "--messages", "a.pcap", "-p", "6000", "--port=7000"],
    ["report", "-c", "10", "-r", "a.pcap", "-r", "b.pcap"],
    ["report", "--", "-a.pcap", "--format"],
    ["report", "-", "-j", " 3"],
    ["report"],
    ["frames", "a.pcap"],
    ["frames", "-V", "a.pcap"],
    ["frames", "-Vx", "a.pcap"],
    ["frames", "-T", "jsonl", "a.pcap"],
    ["frames", "-T", "fields", "-e", "frame.number", "-e", "amqp.performative", "-E", "header=y", "a.pcap"],
    ["frames", "-Y", "--help", "a.pcap"],  # (-Y's value)
    ["frames", "-t", "UD", "a.pcap"],  # (-t ignores case)
    ["frames", "-tad", "-O", "amqp", "-V", "a.pcap"],
    ["frames", "-G", "fields"],
    ["frames", "-Y=x", "a.pcap"],  # (-Y's value is "=x", as click reads it)
    ["frames", "-c", "1_000", "a.pcap"],
    ["deliveries", "a.pcap"],
    ["deliveries", "-T", "parquet", "-o", "d.parquet", "--messages", "-j", "2", "a.pcap"],
    ["links", "--columns", "+link,role", "-Tcsv", "a.pcap"],
    ["requests", "-T", "jsonl", "a.pcap"],
]

REFUSED_OR_TYPERS = [
    ["report", "--help"],
    ["report", "a.pcap", "--help"],
    ["report", "-h"],
    ["report", "--format", "JSON", "a.pcap"],  # (-T is case-sensitive)
    ["report", "-j", "65", "a.pcap"],
    ["report", "-j", "-1", "a.pcap"],
    ["report", "-j", "x", "a.pcap"],
    ["report", "-j"],
    ["report", "--messages=1", "a.pcap"],
    ["report", "--mess", "a.pcap"],
    ["report", "-p", "0", "a.pcap"],
    ["report", "-5", "a.pcap"],
    ["frames", "-V", "-Z", "a.pcap"],
    ["frames", "-T"],
    ["frames", "-t", "q", "a.pcap"],
    ["frames", "---V", "a.pcap"],
    ["reprot", "a.pcap"],
    ["deliveries", "-T", "Parquet", "a.pcap"],
    ["stalls", "--columns"],
    ["messages", "a.pcap"],  # (its -Y filters the table's rows: typer's)
    ["archive", "a.pcap"],
    ["--version"],
    [],
]


@pytest.mark.parametrize("args", TAKEN, ids=" ".join)
def test_the_lines_quick_takes(args):
    assert _check(args)


@pytest.mark.parametrize("args", REFUSED_OR_TYPERS, ids=lambda a: " ".join(a) or "(none)")
def test_the_lines_left_to_typer(args):
    assert quick.quick_call(args) is None


def test_paths_as_typers(paths):
    for path in paths:
        assert _check(["report", "-o", path, "a.pcap"]) and _check(["frames", "--keylog", path, "a.pcap"])


def test_shell_completion_is_typers(monkeypatch):
    monkeypatch.setenv("_AMQP_DISSECT_COMPLETE", "bash_complete")
    assert quick.quick_call(["report", "a.pcap"]) is None


def _tokens(command: str, paths: list[str]):
    """Pieces of a command line for ``command``: its options' names (and their glued and ``=``
    forms with values), values good and bad, arguments, and what the parser must leave alone."""
    from amqp_dissect.cli._quick_table import COMMANDS

    names = [name for row in COMMANDS[command]["options"] for name in row[1]]
    values = ["text", "json", "html", "jsonl", "fields", "table", "csv", "parquet", "JSON", "r", "UD", "ad", "e", "0", "1", "2", "64", "65",
              "-1", "1_0", " 3", "+4", "0x10", "65535", "65536", "9223372036854775807", "9223372036854775808",
              "1.5", "nan", "amqp", "a.pcap", "x y", "=", "", "-", "--", *paths]
    glued = st.builds(lambda n, v: n + v, st.sampled_from([n for n in names if len(n) == 2]), st.sampled_from(values))
    equals = st.builds(lambda n, v: f"{n}={v}", st.sampled_from([n for n in names if n.startswith("--")]),
                       st.sampled_from(values))
    flags = st.builds(lambda a, b: "-" + a + b, st.sampled_from("VxTjco"), st.sampled_from("VxTjco"))
    other = st.sampled_from(["--help", "-h", "--nope", "-Z", "--", "-", "b.pcap"])
    return st.lists(st.one_of(st.sampled_from(names), st.sampled_from(values), glued, equals, flags, other),
                    max_size=7)


@pytest.mark.parametrize("command", sorted(quickgen.QUICK_COMMANDS))
def test_any_line_quick_takes_is_read_as_click_reads_it(command, paths):
    taken = []

    @settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_tokens(command, paths))
    def check(tokens):
        if _check([command, *tokens]):
            taken.append(tokens)

    check()
    assert len(taken) > 50  # (the lines are not all refused: the check above compared values)


RUNS = [
    ["report", OUTCOMES],
    ["report", "-T", "json", OUTCOMES],
    ["report", "-j", "2", OUTCOMES],
    ["frames", OUTCOMES],
    ["frames", "-V", "-x", OUTCOMES],
    ["frames", "-T", "jsonl", OUTCOMES],
    ["frames", "-T", "fields", "-e", "frame.number", "-e", "amqp.performative", "-Y", "amqp.performative", OUTCOMES],
    ["frames", "-G", "fields"],
    ["report", os.path.join(ROOT, "no-such.pcap")],
    ["frames", "-T", "fields", OUTCOMES],
    ["deliveries", OUTCOMES],
    ["deliveries", "-T", "csv", "-j", "2", OUTCOMES],
    ["links", "-T", "jsonl", "--columns", "all", OUTCOMES],
    ["stalls", OUTCOMES],
    ["requests", "-T", "csv", OUTCOMES],
    ["deliveries", "-T", "parquet", OUTCOMES],
]


@pytest.mark.parametrize("args", RUNS, ids=lambda a: " ".join(os.path.basename(x) for x in a))
def test_the_same_output_either_way(args, capfd, monkeypatch):
    assert quick.quick_call(args) is not None
    quick_rc = main(list(args))
    quick_out = capfd.readouterr()
    monkeypatch.setattr(quick, "quick_call", lambda a: None)
    typer_rc = main(list(args))
    typer_out = capfd.readouterr()
    assert (quick_rc, quick_out.out, quick_out.err) == (typer_rc, typer_out.out, typer_out.err)
    assert quick_out.out or quick_out.err


def test_report_frames_and_tables_never_load_typer(tmp_path, monkeypatch):
    script = ("import sys\n"
              "from amqp_dissect.cli.main import main\n"
              f"assert main(['report', {OUTCOMES!r}, '-o', {str(tmp_path / 'quick.txt')!r}]) == 0\n"
              f"assert main(['frames', '-V', {OUTCOMES!r}]) == 0\n"
              f"assert main(['deliveries', '-T', 'csv', {OUTCOMES!r}]) == 0\n"
              "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich'))\n"
              "print(loaded, file=sys.stderr)\n"
              "assert not loaded\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.setattr(quick, "quick_call", lambda a: None)
    assert main(["report", OUTCOMES, "-o", str(tmp_path / "typer.txt")]) == EXIT_OK
    assert (tmp_path / "quick.txt").read_bytes() == (tmp_path / "typer.txt").read_bytes()
