"""The typer app of the ``amqp-dissect`` command line: every command's parameters as typer reads
them (declared in cli/options.py), ``--help``, ``--version``, shell completion and click's usage
errors.  cli/main.py runs it for every command line :mod:`.quick` leaves to it."""

from __future__ import annotations

import functools
import os

import typer

from .common import EXIT_CODES_HELP, EXIT_OK, OutputClosed, version_line, warnings_as_notes

# a warning while the analysis modules load (a compiled module older than its edited source, in a
# checkout) is one line too, as while a command runs
with warnings_as_notes():
    from .archive import register as _register_archive
    from .frames_command import frames
    from .messages import messages
    from .options import capture_parameters
    from .report_command import report
    from .tables import TABLE_COMMANDS


def _guarded(fn):
    """A command whose broken pipe reaches :func:`.main.main` (click would turn it into exit 1)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            raise OutputClosed() from None
    return run


class _App(typer.Typer):
    """A Typer whose commands all get :func:`_guarded`."""

    def command(self, *args, **kwargs):
        register = super().command(*args, **kwargs)
        return lambda fn: register(_guarded(fn))


_APP_SETTINGS = dict(
    add_completion=True,
    no_args_is_help=True,
    help=f"AMQP 1.0 packet-capture analyzer and protocol dissector.\n\n{EXIT_CODES_HELP}",
    pretty_exceptions_enable=False,
)
app = _App(**_APP_SETTINGS)


def _app_for(argv: list[str]) -> typer.Typer:
    """The app that runs ``argv``: for ``amqp-dissect COMMAND ...``, one holding the root options and
    COMMAND alone (typer turns every registered command into a click command on each run, reading
    every signature and type hint: a fixed cost a run of one command need not pay); otherwise the
    whole app (top-level help, ``--version``, an unknown command's error, shell completion)."""
    if not argv or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return app
    for info in app.registered_commands:
        if argv[0] == (info.name or typer.main.get_command_name(info.callback.__name__)):
            one = typer.Typer(**_APP_SETTINGS)
            one.registered_callback = app.registered_callback
            one.registered_commands = [info]
            return one
    return app


def run_app(args: list[str]):
    """The command line ``args`` run by typer, without its standalone mode: the command's exit
    status (or None), or click's exception (a usage error, ``Exit``) raised."""
    return _app_for(args)(args=args, standalone_mode=False, prog_name="amqp-dissect")


def _show_version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                 help="Show the version and whether the core runs compiled, then exit."),
) -> None:
    """AMQP 1.0 packet-capture analyzer and protocol dissector."""


# --------------------------------------------------------------------------- the commands, in --help's order

app.command()(capture_parameters(frames))
app.command()(capture_parameters(report))
for _table, _command in TABLE_COMMANDS.items():
    app.command(name=_table)(capture_parameters(_command))
app.command(name="messages")(capture_parameters(messages))  # (its own command: -Y on the table's columns)
_register_archive(app)
from .compare import register as _register_compare; _register_compare(app)  # noqa: E402,E702
