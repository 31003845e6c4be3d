"""What every command of the CLI shares: exit codes, the user-facing failure, the key log of ``--keylog``."""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import contextmanager

# the exit codes, defined where the spark-submit entry (pipelines/) may import them too
from amqp_dissect.pipelines.exits import (  # noqa: F401  (re-exported: every command imports them from here)
    EXIT_DAMAGED, EXIT_EXTRA, EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE,
)

EXIT_CODES_HELP = f"""Exit codes: {EXIT_OK} success; {EXIT_INTERNAL} internal error (a bug); {EXIT_USAGE} usage error;
{EXIT_OPEN} capture cannot be opened; {EXIT_FORMAT} not a readable capture / no supported link type;
{EXIT_DAMAGED} capture damaged partway (what was readable is reported); {EXIT_EXTRA} the command needs an extra
that is not installed (archive: spark, compare: wireshark)."""

#: the extras of the install (pyproject.toml) a command may need: extra -> the modules it brings
EXTRAS = {"spark": ("pyspark", "pyarrow", "pandas"), "wireshark": ("pyshark",), "parquet": ("pyarrow",),
          "pandas": ("pandas", "pyarrow")}


class Fail(Exception):
    """A user-facing failure: one line on stderr and an exit code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class OutputClosed(Exception):
    """The reader of our output went away (``| head``): not an error."""


def version_line() -> str:
    """``amqp-dissect <version>, compiled (N modules)`` or ``..., pure Python``."""
    import amqp_dissect as dissector

    n = len(dissector.compiled_modules())
    return f"amqp-dissect {dissector.__version__}, " + (f"compiled ({n} modules)" if n else "pure Python")


def need_extra(command: str, extra: str, modules=None, imported: bool = True) -> None:
    """Before ``command`` does any work: the packages of ``extra`` (or only ``modules`` of them)
    import, or one line on stderr
    (``amqp-dissect archive: needs the spark extra: pip install 'amqp-dissect[spark]'``) and exit
    :data:`EXIT_EXTRA`.  They are imported here for real (a package present but broken is as
    missing); a light install has neither pyspark nor pyshark and no other command imports them.
    ``imported=False``: only found here (not loaded yet: the command imports them when it needs
    them, and calls this again where that import fails)."""
    if missing_extra(extra, modules, imported):
        import typer

        print(f"amqp-dissect {command}: needs the {extra} extra: pip install 'amqp-dissect[{extra}]'",
              file=sys.stderr)
        raise typer.Exit(EXIT_EXTRA) from None


def missing_extra(extra: str, modules=None, imported: bool = True) -> bool:
    """Does one of the packages of ``extra`` (or of ``modules``) fail to import?  (Imports them;
    ``imported=False``: is one of them not found?)"""
    import importlib
    import importlib.util

    for module in modules or EXTRAS[extra]:
        try:
            if imported:
                importlib.import_module(module)
            elif importlib.util.find_spec(module) is None:
                return True
        except (ImportError, ValueError):  # (ValueError: find_spec of a module without a spec)
            return True
    return False


_QUICK_EXIT: list = []  # set by exit_quickly: entry() ends the process without the interpreter's teardown


def exit_quickly() -> None:
    """The command asks :func:`quick_exit` of the console entry: its process holds pyspark, pandas and
    pyarrow, whose modules the interpreter's teardown frees one by one (about 0.1 to 0.3 s after
    the command's last line, on the command's wall time) for a process that ends anyway."""
    _QUICK_EXIT[:] = [True]


def quick_exit(code: int) -> None:
    """When a command asked for it (:func:`exit_quickly`): flush stdout and stderr, run the atexit
    handlers, then end the process with ``code`` at once (``os._exit``).  Returns (the caller
    exits as usual) when not asked, or when a flush fails (the usual exit reports it)."""
    import atexit

    run = getattr(atexit, "_run_exitfuncs", None)
    if not _QUICK_EXIT or run is None:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    run()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def load_keylog(path, notes: bool = True):
    """The KeyLog of ``--keylog FILE`` (default: the file ``$SSLKEYLOGFILE`` names; None without
    one), made here once (through the key log's one entry,
    :func:`~amqp_dissect.pipelines.keylogfile.open_keylog`) and handed to the pipelines: a key log
    file read as a stream (only the secrets of
    the capture's ClientHello randoms are kept).  A file that cannot be read is an open failure
    (exit 3).  ``notes``: its damaged lines are warnings on stderr (line numbers), not failures."""
    from amqp_dissect.pipelines.keylogfile import open_keylog

    try:
        kl = open_keylog(path, environment=True)
    except OSError as e:
        raise Fail(EXIT_OPEN, f"{path}: cannot read the key log: {e.strerror or e}") from None
    if kl is not None and notes:
        for note in kl.notes:
            print(f"amqp-dissect: {kl.path}: key log {note}", file=sys.stderr)
    return kl


def filter_notes(option: str, notes) -> None:
    """The notes of a compiled filter (a regular expression a future Python reads otherwise): one
    line each on stderr, each said once."""
    for note in dict.fromkeys(notes):
        print(f"amqp-dissect: {option}: note: {note}", file=sys.stderr)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning no part of the tool turned into a note: one line on stderr that says what it
    is, never Python's two-line warning with its source line."""
    text = " ".join(str(message).split())
    if len(text) > 300:
        text = text[:300] + "..."
    where = f"{os.path.basename(str(filename))}:{lineno}"
    try:
        print(f"amqp-dissect: note: Python said ({category.__name__} at {where}): {text}", file=sys.stderr)
    except (OSError, ValueError):
        pass


@contextmanager
def warnings_as_notes():
    """While a command runs: every warning Python shows is one line (:func:`_warning_line`).  The
    filters stay as they are (``-W error`` still makes a warning an error)."""
    with warnings.catch_warnings():
        warnings.showwarning = _warning_line
        yield
