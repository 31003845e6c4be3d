"""Writes cli/_quick_table.py, the table :mod:`.quick` parses command lines with, from the typer app:
``python -m amqp_dissect.cli.quickgen`` after a change to the options of a command it lists
(tests/cli/test_quick.py fails until then).

For each command of :data:`QUICK_COMMANDS`, its click command (as typer builds it) gives every
option's names and type, and the values typer passes when nothing is given.  A parameter the parser
does not reproduce (a callback, an environment variable, a count, a float, an option with an
optional value...) stops the generator with its name: extend :mod:`.quick` (and its test) first.
"""

from __future__ import annotations

import inspect
import os
import sys
from enum import Enum
from pathlib import Path

from .tables import TABLES

#: the commands :mod:`.quick` parses: those that read a capture and print, where typer's import is a
#: share of a run worth saving
QUICK_COMMANDS = ("report", "frames", *(table for table, _, _ in TABLES))

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_quick_table.py")

_HEADER = '''"""The commands cli/quick.py parses without typer, their options as click reads them: generated from the
typer app by cli/quickgen.py (``python -m amqp_dissect.cli.quickgen``).  Do not edit.

COMMANDS: command name -> {"command": (module, function, None) or (module, dict, key), "argument": (parameter, default),
"options": rows of QuickOption (dest, names, kind, multiple, detail, default)}."""

'''


class NotQuick(Exception):
    """A parameter :mod:`.quick` does not parse as click would."""


def table() -> dict:
    """The table of :data:`QUICK_COMMANDS`, read from the typer app."""
    import typer.main

    from .typer_app import app

    group = typer.main.get_command(app)
    return {name: _command_table(name, group.commands[name]) for name in QUICK_COMMANDS}


def table_source() -> str:
    """cli/_quick_table.py's text: each set of options once (the table commands share theirs), then
    the commands."""
    commands = table()
    sets: list = []  # (the distinct option sets, in the order of their first command)
    for command in commands.values():
        if command["options"] not in sets:
            sets.append(command["options"])
    # the options every command has (the capture's), once
    shared = [option for option in sets[0] if all(option in options for options in sets)]
    rows = ["_SHARED = ("]
    rows.extend(f"    {option!r}," for option in shared)
    rows.append(")")
    for n, options in enumerate(sets, 1):
        rows.append(f"_OPTIONS_{n} = _SHARED + (")
        rows.extend(f"    {option!r}," for option in options if option not in shared)
        rows.append(")")
    rows.append("")
    rows.append("COMMANDS = {")
    # the commands a function makes, held in a dict by their names (the tables'), with the same
    # argument and options: one line for them all
    groups: dict = {}
    for name, command in commands.items():
        module, holder, key = command["command"]
        if key == name:
            groups.setdefault((module, holder, command["argument"], command["options"]), []).append(name)
    for name, command in commands.items():
        if command["command"][2] == name:
            continue
        rows.append(f"    {name!r}: {{")
        rows.append(f"        'command': {command['command']!r},")
        rows.append(f"        'argument': {command['argument']!r},")
        rows.append(f"        'options': _OPTIONS_{sets.index(command['options']) + 1},")
        rows.append("    },")
    for (module, holder, argument, options), names in groups.items():
        rows.append(f"    **{{name: {{'command': ({module!r}, {holder!r}, name), 'argument': {argument!r}, "
                    f"'options': _OPTIONS_{sets.index(options) + 1}}}")
        rows.append(f"       for name in {tuple(names)!r}}},")
    rows.append("}")
    return _HEADER + "\n".join(rows) + "\n"


def _command_table(name: str, click_command) -> dict:
    """One command's entry: the function typer calls, its argument and its options."""
    import typer.main
    import typer.utils

    run = inspect.unwrap(click_command.callback)  # (typer's wrapper and the app's, around the command)
    location = _found(run, sys.modules[run.__module__])
    if location is None:
        raise NotQuick(f"{name}: {run.__module__} names not the function typer calls")
    settings = (click_command.context_settings, click_command.allow_interspersed_args,
                click_command.ignore_unknown_options, click_command.allow_extra_args, click_command.no_args_is_help)
    if settings != ({}, True, False, False, False):
        raise NotQuick(f"{name}: its context settings {settings}")
    _, convertors, _ = typer.main.get_params_convertors_ctx_param_name_from_function(click_command.callback)
    annotations = typer.utils.get_params_from_function(click_command.callback)
    # the values typer passes when the line gives nothing (click's defaults, through typer's conversions)
    with click_command.make_context(name, []) as ctx:
        defaults = {k: convertors[k](v) if k in convertors else v for k, v in ctx.params.items()}
    argument, options = None, []
    for param in click_command.params:
        where = f"{name} {param.name}"
        common = (param.envvar, param.callback, param.is_eager, param.expose_value, param.required,
                  bool(getattr(param, "deprecated", False)))
        if common != (None, None, False, True, False, False):
            raise NotQuick(f"{where}: envvar, callback, eager, exposed, required, deprecated: {common}")
        default = defaults[param.name]
        if param.param_type_name == "argument":
            if argument is not None or param.nargs != -1 or _type_name(param.type) != "STRING":
                raise NotQuick(f"{where}: one argument, of any number of texts")
            argument = (param.name, default)
            continue
        options.append(_option_row(where, param, default, annotations))
    if argument is None:
        raise NotQuick(f"{name}: no argument")
    return {"command": (run.__module__, *location), "argument": argument, "options": tuple(options)}


def _found(run, module) -> tuple | None:
    """Where ``module`` holds ``run``: (its name, None), or (a dict's name, the key) for a command
    made by a function (the tables'); None when it does not."""
    if getattr(module, run.__name__, None) is run:
        return run.__name__, None
    for name, value in vars(module).items():
        if isinstance(value, dict) and not name.startswith("_"):
            for key, item in value.items():
                if item is run:
                    return name, key
    return None


def _option_row(where: str, param, default, annotations: dict) -> tuple:
    """One option as a row of QuickOption."""
    if param.secondary_opts or param.count or param.nargs != 1 or param.prompt is not None:
        raise NotQuick(f"{where}: secondary names, a count, nargs or a prompt")
    for opt in param.opts:
        if not (len(opt) == 2 and opt[0] == "-" and opt[1] != "-") and not (opt.startswith("--") and len(opt) > 2):
            raise NotQuick(f"{where}: the name {opt}")
        if "=" in opt:
            raise NotQuick(f"{where}: the name {opt}")
    names = tuple(param.opts)
    type_name = _type_name(param.type)
    if param.is_flag:
        if (param.multiple, param.is_bool_flag, param._depr_flag_value, default) != (False, True, True, False):
            raise NotQuick(f"{where}: a flag other than on/off")
        return (param.name, names, "flag", False, None, False)
    if param.multiple and default is not None:
        raise NotQuick(f"{where}: a repeatable option with a default")
    if type_name == "STRING":
        kind, detail = "str", None
    elif type_name in ("INT", "IntRange"):
        if type_name == "IntRange" and (param.type.min_open or param.type.max_open or param.type.clamp):
            raise NotQuick(f"{where}: an open or clamped range")
        kind = "int"
        detail = (param.type.min, param.type.max) if type_name == "IntRange" else (None, None)
    elif type_name == "TyperPath":
        t = param.type
        settings = (t.exists, t.file_okay, t.dir_okay, t.readable, t.writable, t.resolve_path, t.allow_dash,
                    t.type)
        if settings != (False, True, True, True, False, False, False, None):
            raise NotQuick(f"{where}: a path type with settings {settings}")
        kind, detail = "path", None
    elif type_name == "TyperChoice":
        enum = _enum_of(where, param, annotations)
        t = param.type
        texts = [m.value if t.case_sensitive else m.value.casefold() for m in enum]
        if [str(c) for c in t.choices] != [m.value for m in enum] or len(set(texts)) != len(texts):
            raise NotQuick(f"{where}: choices other than {enum.__name__}'s distinct values")
        kind, detail = "choice", (enum.__module__, enum.__qualname__, bool(t.case_sensitive))
        if default is not None:
            default = default.value
    else:
        raise NotQuick(f"{where}: the type {type_name}")
    if default is not None and kind != "choice" and not isinstance(default, (str, int)):
        raise NotQuick(f"{where}: the default {default!r}")
    if kind == "path" and default is not None:
        raise NotQuick(f"{where}: a path with a default")
    return (param.name, names, kind, bool(param.multiple), detail, default)


def _type_name(param_type) -> str:
    return "STRING" if repr(param_type) == "STRING" else "INT" if repr(param_type) == "INT" else type(param_type).__name__


def _enum_of(where: str, param, annotations: dict) -> type[Enum]:
    """The enum whose values a choice option takes: its annotation's type (the command's parameter
    as typer reads it, Optional and List taken off)."""
    import typing

    kind = annotations[param.name].annotation
    while typing.get_origin(kind) in (typing.Union, list) or typing.get_origin(kind) is getattr(typing, "List", None):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if not (isinstance(kind, type) and issubclass(kind, Enum)):
        raise NotQuick(f"{where}: a choice of {kind!r}, not an enum")
    return kind


def main() -> None:
    text = table_source()
    with open(TABLE_PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {Path(TABLE_PATH).name}: {', '.join(QUICK_COMMANDS)}")


if __name__ == "__main__":
    main()
