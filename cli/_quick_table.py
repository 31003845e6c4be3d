"""The commands cli/quick.py parses without typer, their options as click reads them: generated from the
typer app by cli/quickgen.py (``python -m amqp_dissect.cli.quickgen``).  Do not edit.

COMMANDS: command name -> {"command": (module, function), "argument": (parameter, default),
"options": rows of QuickOption (dest, names, kind, multiple, detail, default)}."""

COMMANDS = {
    'report': {
        'command': ('amqp_dissect.cli.report_command', 'report'),
        'argument': ('captures', None),
        'options': (
            ('read', ('-r', '--read-file'), 'str', True, None, None),
            ('fmt', ('--format', '-T'), 'choice', False, ('amqp_dissect.cli.option_values', 'ReportFormat', True), 'text'),
            ('output', ('--output', '-o'), 'path', False, None, None),
            ('count', ('-c', '--count'), 'int', False, (1, 9223372036854775807), None),
            ('port', ('--port', '-p'), 'int', True, (1, 65535), None),
            ('keylog', ('--keylog',), 'path', False, None, None),
            ('iface', ('-i', '--interface'), 'str', False, None, None),
            ('bpf', ('-f', '--capture-filter'), 'str', False, None, None),
            ('autostop', ('-a', '--autostop'), 'str', True, None, None),
            ('write', ('-w', '--write'), 'str', False, None, None),
            ('jobs', ('-j', '--jobs'), 'int', False, (0, 64), 1),
            ('messages', ('--messages',), 'flag', False, None, False),
        ),
    },
    'frames': {
        'command': ('amqp_dissect.cli.frames_command', 'frames'),
        'argument': ('captures', None),
        'options': (
            ('read', ('-r', '--read-file'), 'str', True, None, None),
            ('verbose', ('-V', '--verbose'), 'flag', False, None, False),
            ('fmt', ('--format', '-T'), 'choice', False, ('amqp_dissect.cli.option_values', 'FrameFormat', True), 'text'),
            ('display_filter', ('-Y', '--display-filter'), 'str', False, None, None),
            ('field', ('-e', '--field'), 'str', True, None, None),
            ('count', ('-c', '--count'), 'int', False, (1, 9223372036854775807), None),
            ('iface', ('-i', '--interface'), 'str', False, None, None),
            ('bpf', ('-f', '--capture-filter'), 'str', False, None, None),
            ('autostop', ('-a', '--autostop'), 'str', True, None, None),
            ('write', ('-w', '--write'), 'str', False, None, None),
            ('time_format', ('-t', '--time-format'), 'choice', False, ('amqp_dissect.cli.habits', 'TimeFormat', False), 'r'),
            ('port', ('--port', '-p'), 'int', True, (1, 65535), None),
            ('keylog', ('--keylog',), 'path', False, None, None),
            ('glossary', ('-G',), 'str', False, None, None),
            ('field_opts', ('-E',), 'str', True, None, None),
            ('hex_dump', ('-x',), 'flag', False, None, False),
            ('only', ('-O',), 'str', False, None, None),
        ),
    },
}
