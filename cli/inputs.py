"""What a command reads a capture from, as one value: :class:`CaptureInputs` (the files, ``-r``,
``-c``, ``--port``, ``--keylog``, and the live capture's ``-i``, ``-f``, ``-a``, ``-w``), declared once
for every command that takes a capture (:func:`capture_command` gives a command those
parameters), and the one prelude that makes a :class:`~.run.CaptureRun` of it.

Without typer: each parameter's declaration for typer is in cli/options.py (INPUT_OPTIONS), read
when typer builds a command (:func:`.options.capture_parameters`); a run that :mod:`.quick` parses
never loads it."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import NamedTuple

from .common import load_keylog
from .option_values import check_format_letter
from .run import CaptureRun, capture_or_live


class CaptureInputs(NamedTuple):
    """The capture parameters of a command, each a typer parameter of the same name (declared in
    cli/options.py, INPUT_OPTIONS)."""

    captures: list[str] | None = None
    read: list[str] | None = None
    count: int | None = None
    port: list[int] | None = None
    keylog: Path | None = None
    iface: str | None = None
    bpf: str | None = None
    autostop: list[str] | None = None
    write: str | None = None

    def check_format_letter(self, formats: type[Enum]) -> None:
        """``-f FORMAT``: the output format given with the capture filter's letter (one line, exit 2)."""
        check_format_letter(self.bpf, formats)

    def open(self):
        """The files (or standard input) to read, or the live capture of ``-i`` (started here):
        what :meth:`run` reads; one line and exit 2 or 3 when they do not go together."""
        return capture_or_live(self.captures, self.read, self.iface, self.bpf, self.count, self.autostop, self.write)

    def run(self, opened, **options) -> CaptureRun:
        """The run of ``opened`` (:meth:`open`'s) with these ports, key log and packet limit
        (``options``: CaptureRun's ``messages`` and ``tls_records``)."""
        return CaptureRun(opened, self.port or [], keylog=load_keylog(self.keylog), limit=self.count, **options)


#: the parameters of CaptureInputs, in the order a command's ``--help`` lists them by default
INPUT_NAMES = CaptureInputs._fields


def start_run(inputs: CaptureInputs, formats: type[Enum], **options) -> CaptureRun:
    """The prelude of a command that checks nothing of its own between: ``-f`` checked, the
    capture opened, its run made."""
    inputs.check_format_letter(formats)
    return inputs.run(inputs.open(), **options)


class CaptureLayout(NamedTuple):
    """Where a capture command's ``--help`` lists the capture parameters among its own: after the one
    named ``after`` (first when none), or in the ``order`` that lists every parameter by name."""

    after: str = ""
    order: tuple = ()


def capture_command(command=None, *, after: str = "", order: tuple = ()):
    """A command taking a :class:`CaptureInputs` (its first parameter, ``inputs``) as a function
    taking the capture parameters by name instead, with the command's own (``run(**values)``, as
    typer and :mod:`.quick` call it).  The parameters' declarations and their order in ``--help``
    (the files and ``-r`` first, then the command's own, with the other capture parameters after
    the one named ``after``, or as ``order`` lists them) are given to typer by
    :func:`.options.capture_parameters`; the function keeps them as ``command`` and ``layout``."""
    if command is None:
        return lambda fn: capture_command(fn, after=after, order=order)

    def run(**values):
        inputs = CaptureInputs(**{n: values.pop(n) for n in INPUT_NAMES})
        return command(inputs, **values)

    run.__name__, run.__qualname__, run.__doc__ = command.__name__, command.__qualname__, command.__doc__
    run.__module__ = command.__module__
    run.command, run.layout = command, CaptureLayout(after, order)
    return run
