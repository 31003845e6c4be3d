"""What a command reads a capture from, as one value: :class:`CaptureInputs` (the files, ``-r``,
``-c``, ``--port``, ``--keylog``, and the live capture's ``-i``, ``-f``, ``-a``, ``-w``), declared once
for every command that takes a capture (:func:`capture_command` gives a command those
parameters), and the one prelude that makes a :class:`~.run.CaptureRun` of it."""

import inspect
from dataclasses import dataclass, fields
from enum import Enum
from typing import get_type_hints

from .common import load_keylog
from .options import (Autostop, CaptureFilter, Captures, Count, Interface, KeyLogPath, Ports, ReadFiles, WriteRaw,
                      check_format_letter, with_parameters)
from .run import CaptureRun, capture_or_live


@dataclass(frozen=True)
class CaptureInputs:
    """The capture parameters of a command, each a typer parameter of the same name (the
    annotations are the options' declarations, cli/options.py)."""

    captures: Captures = None
    read: ReadFiles = None
    count: Count = None
    port: Ports = None
    keylog: KeyLogPath = None
    iface: Interface = None
    bpf: CaptureFilter = None
    autostop: Autostop = None
    write: WriteRaw = None

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
INPUT_NAMES = tuple(f.name for f in fields(CaptureInputs))
_HEAD = ("captures", "read")  # (first in every command)


def start_run(inputs: CaptureInputs, formats: type[Enum], **options) -> CaptureRun:
    """The prelude of a command that checks nothing of its own between: ``-f`` checked, the
    capture opened, its run made."""
    inputs.check_format_letter(formats)
    return inputs.run(inputs.open(), **options)


def capture_command(command=None, *, after: str = "", order: tuple = ()):
    """A command taking a :class:`CaptureInputs` (its first parameter, ``inputs``) with, as typer
    sees it, the capture parameters instead: the files and ``-r`` first, then the command's own
    parameters, with the other capture parameters after the one named ``after`` (first when
    none); or in the ``order`` that lists every parameter by name (where a command's ``--help``
    mixes them otherwise)."""
    if command is None:
        return lambda fn: capture_command(fn, after=after, order=order)

    def run(**values):
        inputs = CaptureInputs(**{n: values.pop(n) for n in INPUT_NAMES})
        return command(inputs, **values)

    run.__name__, run.__qualname__, run.__doc__ = command.__name__, command.__qualname__, command.__doc__
    run.__module__ = command.__module__
    return with_parameters(run, _parameters(command, after, order))


def _parameters(command, after: str, order: tuple) -> list:
    """The parameters typer reads for a command of :func:`capture_command`."""
    own = list(inspect.signature(command, eval_str=True).parameters.values())
    assert own[0].name == "inputs", f"{command.__name__}: its first parameter is the CaptureInputs"
    hints = get_type_hints(CaptureInputs, include_extras=True)
    given = {f.name: inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=hints[f.name],
                                       default=f.default) for f in fields(CaptureInputs)}
    rest = [given[n] for n in INPUT_NAMES if n not in _HEAD]
    parameters = [given[n] for n in _HEAD] + ([] if after else rest)
    for p in own[1:]:
        parameters += [p] + (rest if p.name == after else [])
    by_name = {p.name: p for p in parameters}
    assert len(by_name) == len(own) - 1 + len(INPUT_NAMES), f"{command.__name__}: no parameter {after}"
    if not order:
        return parameters
    assert sorted(order) == sorted(by_name), f"{command.__name__}: order names {sorted(by_name)}"
    return [by_name[n] for n in order]
