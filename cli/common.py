"""What every command of the CLI shares: exit codes and the user-facing failure."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_OPEN = 3
EXIT_FORMAT = 4
EXIT_DAMAGED = 5

EXIT_CODES_HELP = """Exit codes: 0 success; 1 internal error (a bug); 2 usage error;
3 capture cannot be opened; 4 not a readable capture / no supported link type;
5 capture damaged partway (what was readable is reported)."""


class Fail(Exception):
    """A user-facing failure: one line on stderr and an exit code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
