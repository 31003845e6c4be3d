"""A command line parsed without typer, for the commands that read a capture and print (``report``,
``frames``, the tables): importing typer and building its click command costs about 115 million instructions,
6% of a `report` on a frame-dense capture of 75,000 deliveries, more than the frames of a small
capture.

What each command takes is a table, cli/_quick_table.py, generated from the typer app itself by
cli/quickgen.py (a test checks that it is current): every option's names, the value it takes
(a flag, text, an integer in a range, a path, one of an enum's values), and the value typer passes
when it is not given.  :func:`quick_call` reads a line as click would and accepts it only when every
token is one of those, with a value click would take; then the command is called with the values
typer would pass it (tests/cli/test_quick.py holds the two against each other, click as the oracle).
Anything else (``--help``, ``--version``, an unknown option, a value out of range, shell
completion) is left to typer, which says what is wrong: this parser never reports an error.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import NamedTuple


class QuickOption(NamedTuple):
    """One option of a command as :func:`quick_call` parses it (a row of cli/_quick_table.py)."""

    dest: str  #: the command's parameter
    names: tuple  #: ``--long`` and ``-s`` names
    kind: str  #: flag, str, int, path or choice
    multiple: bool  #: repeatable: the values in order (typer: a list; None when none is given)
    detail: tuple | None  #: int: (least, most), either None; choice: (module, enum class, case-sensitive)
    default: object  #: what typer passes when the option is not given (choice: the enum's value)


class QuickCall(NamedTuple):
    """A command line :func:`quick_call` parsed: the command (the function typer registers) and the
    value of each of its parameters, as typer would pass them."""

    command: object
    values: dict

    def __call__(self):
        try:
            return self.command(**self.values)
        except EOFError:  # (as under typer: a newline on stderr, then click's Abort, exit 130)
            print(file=sys.stderr)
            return 130


_REFUSED = object()  # (a value click would refuse: typer says why)


def quick_call(args: list[str]) -> QuickCall | None:
    """The command of ``args`` (``COMMAND [ARGUMENT | OPTION]...``) and its values, or None where
    typer is to parse the line."""
    if not args or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return None
    from ._quick_table import COMMANDS

    command = COMMANDS.get(args[0])
    if command is None:
        return None
    values = _parse(command, args[1:])
    if values is None:
        return None
    module, name, key = command["command"]
    function = getattr(importlib.import_module(module), name)
    return QuickCall(function if key is None else function[key], values)


def _parse(command: dict, tokens: list[str]) -> dict | None:
    """The values of ``tokens`` (the line after the command's name), read as click's parser reads
    them, or None."""
    options = [QuickOption(*row) for row in command["options"]]
    by_name = {name: option for option in options for name in option.names}
    given: dict = {}
    arguments: list[str] = []
    rest = tokens[::-1]  # (the tokens not read yet, the next one last; a value given in a token goes back)
    while rest:
        token = rest.pop()
        if token == "--":  # (the rest are arguments)
            arguments.extend(reversed(rest))
            break
        if token[:1] != "-" or len(token) == 1:  # (an argument: "-" is standard input)
            arguments.append(token)
            continue
        if token[:2] == "--":  # --name, --name=value
            name, equals, text = token.partition("=")
            option = by_name.get(name)
            if option is None or (equals and option.kind == "flag"):  # (a flag takes no value)
                return None
            if equals:
                rest.append(text)
            if not _take(given, option, rest):
                return None
            continue
        # -abc: flags one after the other; the first that takes a value takes the rest of the token
        # (-Tjson, -Y=x: "=x"), or the next token
        for at in range(1, len(token)):
            option = by_name.get("-" + token[at])
            if option is None:
                return None
            if option.kind != "flag" and at + 1 < len(token):
                rest.append(token[at + 1:])
            if not _take(given, option, rest):
                return None
            if option.kind != "flag":
                break
    values = {}
    for option in options:
        values[option.dest] = given.get(option.dest, _default(option))
    dest, default = command["argument"]
    values[dest] = arguments if arguments else default
    return values


def _take(given: dict, option: QuickOption, rest: list[str]) -> bool:
    """``option`` met on the line: a flag is set; another takes the next token (``rest``'s last) as
    its value, kept (a repeatable option's added to the others).  False when click would refuse the
    value, or there is none."""
    if option.kind == "flag":
        given[option.dest] = True
        return True
    if not rest:
        return False
    value = _value(option, rest.pop())
    if value is _REFUSED:
        return False
    if option.multiple:
        given.setdefault(option.dest, []).append(value)
    else:
        given[option.dest] = value
    return True


def _value(option: QuickOption, text: str):
    """The value of ``text`` for ``option`` as click's type and typer's conversion make it, or _REFUSED."""
    kind = option.kind
    if kind == "str":
        return text
    if kind == "int":
        try:
            value = int(text)
        except ValueError:
            return _REFUSED
        least, most = option.detail
        if (least is not None and value < least) or (most is not None and value > most):
            return _REFUSED
        return value
    if kind == "path":  # (typer's path: one that exists must be readable)
        try:
            os.stat(text)
        except OSError:
            return Path(text)
        except ValueError:  # (a NUL in it: typer's path type meets the same)
            return _REFUSED
        return Path(text) if os.access(text, os.R_OK) else _REFUSED
    if kind == "choice":
        return _choices(option).get(text if option.detail[2] else text.casefold(), _REFUSED)
    return _REFUSED


def _choices(option: QuickOption) -> dict:
    """A choice option's enum members by the text that names them (casefolded where the option
    ignores case)."""
    module, name, case_sensitive = option.detail
    members = getattr(importlib.import_module(module), name)
    return {(m.value if case_sensitive else m.value.casefold()): m for m in members}


def _default(option: QuickOption):
    """What typer passes for ``option`` when the line does not give it."""
    if option.kind == "choice" and option.default is not None:
        module, name, _ = option.detail
        return getattr(importlib.import_module(module), name)(option.default)
    return option.default
