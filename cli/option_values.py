"""What the commands' options take, without typer: the output formats (``-T``) and the check they
share, the limits of the numbers.  The commands (cli/report_command.py, cli/frames_command.py) and
:mod:`.quick` use them in a run that never loads typer; cli/options.py declares the options."""

from enum import Enum

#: the most a count may say (``-c``, ``split --packets``): what the reader's 64-bit counters and
#: ``itertools.islice`` hold; more packets than any capture has
MAX_COUNT = 2 ** 63 - 1
AUTO_JOBS_MAX = 4  # -j 0: every process reads the whole capture: beyond a few, the reading outweighs the gain
AUTO_JOBS_MIN_BYTES = 8 << 20  # -j 0: below this a run takes a fraction of a second: a fork is not worth it
MAX_JOBS = 64


class FrameFormat(str, Enum):
    text = "text"
    jsonl = "jsonl"
    fields = "fields"


class ReportFormat(str, Enum):
    text = "text"
    json = "json"
    html = "html"


class TableFormat(str, Enum):
    table = "table"
    csv = "csv"
    jsonl = "jsonl"
    parquet = "parquet"


def check_format_letter(bpf: str | None, formats: type[Enum]) -> None:
    """``-f FORMAT``: the letter the report and table commands once used for the output format,
    which is now the capture filter (as tshark's): one line saying to use ``-T`` (exit 2)."""
    if bpf is not None and bpf in {m.value for m in formats}:
        from .common import EXIT_USAGE, Fail

        raise Fail(EXIT_USAGE, f"-f is the capture filter (as in tshark); the output format is -T {bpf} "
                               f"(or --format {bpf})")
