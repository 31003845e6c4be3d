"""``amqp-dissect COMMAND ...`` runs an app holding only COMMAND (typer would otherwise build every
command's click object on each run); what a user sees must be what the whole app gives."""

from __future__ import annotations

import pytest

from amqp_dissect.cli import main as cli_main
from amqp_dissect.cli import typer_app

NAMES = sorted(typer_app.typer.main.get_command_name(i.name or i.callback.__name__)
               for i in typer_app.app.registered_commands)


def _run(app, args, capsys):
    try:
        app(args=args, standalone_mode=False, prog_name="amqp-dissect")
    except SystemExit:
        pass
    except Exception as e:  # usage errors: their one line, as main() prints it
        return "error: " + cli_main._usage_line(e)
    return capsys.readouterr().out


def test_every_command_is_found():
    assert len(NAMES) >= 15 and "report" in NAMES and "frames" in NAMES
    for name in NAMES:
        one = typer_app._app_for([name, "x.pcap"])
        assert one is not typer_app.app
        assert [i.callback for i in one.registered_commands] == [
            i.callback for i in typer_app.app.registered_commands
            if typer_app.typer.main.get_command_name(i.name or i.callback.__name__) == name]


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["reprot", "x.pcap"], ["-V", "report"]])
def test_other_arguments_get_the_whole_app(args):
    assert typer_app._app_for(args) is typer_app.app


def test_shell_completion_gets_the_whole_app(monkeypatch):
    monkeypatch.setenv("_AMQP_DISSECT_COMPLETE", "bash_complete")
    assert typer_app._app_for(["report", "x.pcap"]) is typer_app.app


@pytest.mark.parametrize("name", NAMES)
def test_help_is_the_whole_apps(name, capsys):
    whole = _run(typer_app.app, [name, "--help"], capsys)
    one = _run(typer_app._app_for([name, "--help"]), [name, "--help"], capsys)
    assert "Usage: amqp-dissect " + name in whole
    assert one == whole


@pytest.mark.parametrize("args", [["report", "--no-such-option"], ["deliveries", "-T", "nope", "x.pcap"],
                                  ["frames", "-c"]])
def test_usage_errors_are_the_whole_apps(args, capsys):
    whole = _run(typer_app.app, args, capsys)
    one = _run(typer_app._app_for(args), args, capsys)
    assert whole.startswith("error: ")
    assert one == whole
