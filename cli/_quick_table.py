"""The commands cli/quick.py parses without typer, their options as click reads them: generated from the
typer app by cli/quickgen.py (``python -m amqp_dissect.cli.quickgen``).  Do not edit.

COMMANDS: command name -> {"command": (module, function, None) or (module, dict, key), "argument": (parameter, default),
"options": rows of QuickOption (dest, names, kind, multiple, detail, default)}."""

_SHARED = (
    ('read', ('-r', '--read-file'), 'str', True, None, None),
    ('count', ('-c', '--count'), 'int', False, (1, 9223372036854775807), None),
    ('port', ('--port', '-p'), 'int', True, (1, 65535), None),
    ('keylog', ('--keylog',), 'path', False, None, None),
    ('iface', ('-i', '--interface'), 'str', False, None, None),
    ('bpf', ('-f', '--capture-filter'), 'str', False, None, None),
    ('autostop', ('-a', '--autostop'), 'str', True, None, None),
    ('write', ('-w', '--write'), 'str', False, None, None),
)
_OPTIONS_1 = _SHARED + (
    ('fmt', ('--format', '-T'), 'choice', False, ('amqp_dissect.cli.option_values', 'ReportFormat', True), 'text'),
    ('output', ('--output', '-o'), 'path', False, None, None),
    ('jobs', ('-j', '--jobs'), 'int', False, (0, 64), 1),
    ('messages', ('--messages',), 'flag', False, None, False),
)
_OPTIONS_2 = _SHARED + (
    ('verbose', ('-V', '--verbose'), 'flag', False, None, False),
    ('fmt', ('--format', '-T'), 'choice', False, ('amqp_dissect.cli.option_values', 'FrameFormat', True), 'text'),
    ('display_filter', ('-Y', '--display-filter'), 'str', False, None, None),
    ('field', ('-e', '--field'), 'str', True, None, None),
    ('time_format', ('-t', '--time-format'), 'choice', False, ('amqp_dissect.cli.habits', 'TimeFormat', False), 'r'),
    ('glossary', ('-G',), 'str', False, None, None),
    ('field_opts', ('-E',), 'str', True, None, None),
    ('hex_dump', ('-x',), 'flag', False, None, False),
    ('only', ('-O',), 'str', False, None, None),
)
_OPTIONS_3 = _SHARED + (
    ('fmt', ('--format', '-T'), 'choice', False, ('amqp_dissect.cli.option_values', 'TableFormat', True), 'table'),
    ('output', ('--output', '-o'), 'path', False, None, None),
    ('columns', ('--columns',), 'str', False, None, None),
    ('jobs', ('-j', '--jobs'), 'int', False, (0, 64), 1),
    ('messages', ('--messages',), 'flag', False, None, False),
)

COMMANDS = {
    'report': {
        'command': ('amqp_dissect.cli.report_command', 'report', None),
        'argument': ('captures', None),
        'options': _OPTIONS_1,
    },
    'frames': {
        'command': ('amqp_dissect.cli.frames_command', 'frames', None),
        'argument': ('captures', None),
        'options': _OPTIONS_2,
    },
    **{name: {'command': ('amqp_dissect.cli.tables', 'TABLE_COMMANDS', name), 'argument': ('captures', None), 'options': _OPTIONS_3}
       for name in ('deliveries', 'links', 'stalls', 'connections', 'sessions', 'transactions', 'violations', 'errors', 'requests')},
}
