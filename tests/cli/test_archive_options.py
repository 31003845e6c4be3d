"""``amqp-dissect archive`` and the spark-submit entry of the archive job take the options of
one declaration (pipelines/options.py: ARCHIVE_OPTIONS), and the entry exits as the CLI does
(issue 42: "spark-submit options from the same declarations as the CLI's").  Nothing here
starts Spark: the failures checked come before the session."""

from __future__ import annotations

import pytest

from amqp_dissect.cli import common
from amqp_dissect.pipelines.options import ARCHIVE_OPTIONS, DEFAULT_SPLIT_SIZE, DEFAULT_WINDOW, size_text

pytest.importorskip("pyspark")
from amqp_dissect.pipelines.spark import submit  # noqa: E402

# options and refusals before any work (cli/, pipelines/options.py): no hot module runs, CI's pure
# pass leaves these out (no_twin)
pytestmark = pytest.mark.no_twin


def _click_options():
    import typer

    from amqp_dissect.cli.typer_app import app

    command = typer.main.get_command(app).commands["archive"]
    return {p.name: p for p in command.params}


def test_the_cli_and_the_entry_take_the_declared_options():
    cli = _click_options()
    entry = {a.dest: a for a in submit.parser()._actions if a.dest != "help"}
    assert set(cli) == {"paths"} | {o.dest for o in ARCHIVE_OPTIONS}
    assert set(entry) == {"paths"} | {o.dest for o in ARCHIVE_OPTIONS if o.submit}
    for o in ARCHIVE_OPTIONS:
        assert cli[o.dest].opts[0] == o.names[0] and set(cli[o.dest].opts) == set(o.names)
        assert cli[o.dest].help == o.help
        if o.submit:
            assert set(entry[o.dest].option_strings) == set(o.names)
            assert entry[o.dest].help == o.help
            assert entry[o.dest].required == o.required == cli[o.dest].required


def test_the_defaults_are_the_jobs():
    """The defaults the two command lines give the job are the job's own (one definition each)."""
    import inspect

    from amqp_dissect.pipelines.spark_runtime.fs import parse_size
    from amqp_dissect.pipelines.spark.job import run_archive

    job = inspect.signature(run_archive).parameters
    cli = _click_options()
    a = submit.parser().parse_args(["x.pcap", "--out", "out"])
    assert parse_size(cli["split_size"].default) == parse_size(a.split_size) == job["split_size"].default \
        == DEFAULT_SPLIT_SIZE
    assert cli["window"].default == a.window == job["window"].default == DEFAULT_WINDOW
    assert size_text(DEFAULT_SPLIT_SIZE) == "64m" and size_text(1000) == "1000" and size_text(3 << 30) == "3g"


def test_the_entry_exits_as_the_cli(tmp_path, capsys):
    """A path that does not exist: exit 3; a file that is not a capture: exit 4; a bad --conf,
    --split-size or --window: exit 2 (each before any Spark session)."""
    out = str(tmp_path / "out")
    assert submit.main([str(tmp_path / "absent.pcap"), "--out", out]) == common.EXIT_OPEN
    empty = tmp_path / "empty"
    empty.mkdir()
    assert submit.main([str(empty), "--out", out]) == common.EXIT_FORMAT
    assert submit.main([str(empty), "--out", out, "--conf", "novalue"]) == common.EXIT_USAGE
    assert submit.main([str(empty), "--out", out, "--split-size", "lots"]) == common.EXIT_USAGE
    with pytest.raises(SystemExit) as e:
        submit.main([str(empty), "--out", out, "--window", "nan"])
    assert e.value.code == common.EXIT_USAGE
    err = capsys.readouterr().err
    assert "absent.pcap" in err and "--conf 'novalue': expected KEY=VALUE" in err
