"""The ``amqp-dissect`` command line: a thin shell over the sans-IO core.

The command line is parsed by :mod:`.quick` where it can (the commands that read a capture and
print: report, frames), without loading typer; by typer otherwise (cli/typer_app.py: every
command, ``--help``, ``--version``, completion, every usage error).  Both call the same command.

Exit codes (also in ``amqp-dissect --help`` and the README):

    0  success
    1  internal error (a bug: please report it; AMQP_DISSECT_DEBUG=1 shows the traceback)
    2  usage error (bad option or argument)
    3  the capture file cannot be opened (missing, unreadable)
    4  not a capture this tool reads (unknown format, bad file header), or no packet of a
       supported link type in it
    5  the capture is damaged partway (truncated last record, corrupt block, broken gzip
       tail): everything readable before the damage was reported
"""

from __future__ import annotations

import functools
import os
import sys

from .common import (  # noqa: F401  (re-exported: the exit codes are part of this module's API)
    EXIT_CODES_HELP, EXIT_DAMAGED, EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Fail, OutputClosed,
    warnings_as_notes,
)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run the command line (parsed by cli/quick.py or by typer), turn failures into
    one line and an exit code."""
    # numpy (under pyarrow) starts OpenBLAS threads that spin on the other cores; nothing here
    # does linear algebra
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        args = sys.argv[1:] if argv is None else argv
        with warnings_as_notes():
            rc = _command_for(args)()
        return rc if isinstance(rc, int) else EXIT_OK
    except Fail as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return e.code
    except (BrokenPipeError, OutputClosed):
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # typer may vendor its own click: recognise its exceptions by class name
        bases = {c.__name__ for c in type(e).__mro__}
        if "Exit" in bases and isinstance(getattr(e, "exit_code", None), int):  # (typer.Exit)
            return e.exit_code
        if "Abort" in bases:
            return 130
        if "NoArgsIsHelpError" in bases:
            e.show()
            return EXIT_USAGE
        if "ClickException" in bases:
            print(f"amqp-dissect: {_usage_line(e)}", file=sys.stderr)
            return EXIT_USAGE
        if os.environ.get("AMQP_DISSECT_DEBUG"):
            raise
        print(f"amqp-dissect: internal error: {type(e).__name__}: {e} (a bug; AMQP_DISSECT_DEBUG=1 shows details)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _command_for(args: list[str]):
    """What runs the command line ``args`` (called without arguments: the exit status, or None): the
    command itself when :mod:`.quick` parses the line, typer's app otherwise (typer is loaded then
    only).  The modules the command needs are loaded first: the garbage collector, set for the
    analysis, never walks them."""
    from .quick import quick_call

    call = quick_call(args)
    if call is None:
        from .typer_app import run_app

        call = functools.partial(run_app, args)
    # a capture's analysis allocates millions of short-lived objects and keeps the open deliveries:
    # collect cycles less often, and never walk the modules loaded so far
    from amqp_dissect.pipelines import analysis_gc

    analysis_gc()
    return call


def _usage_line(e) -> str:
    """A click usage error as one line: what is wrong, and where to look."""
    msg = " ".join(str(e.format_message()).split())
    ctx = getattr(e, "ctx", None)
    where = getattr(ctx, "command_path", None) if ctx is not None else None
    return f"{msg} (see '{where} --help')" if where else msg


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def entry() -> None:
    code = main()
    from .common import quick_exit

    quick_exit(code)  # (only for a command that asked: archive)
    sys.exit(code)


if __name__ == "__main__":
    entry()
