"""The options and arguments of the commands, each declared once (typer ``Annotated`` aliases).

A command names a parameter's type by its alias (``port: Ports = None``); the names, limits and
help text live here only.  Where two commands say different things about the same option (the
``--port`` of ``compare`` also goes to tshark, the ``--keylog`` of ``archive`` is shipped to the
executors), the option is made by one function whose help text is the only argument.
"""

import inspect
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from amqp_dissect.pipelines.options import (  # noqa: F401  (MAX_PARTITIONS, MAX_SIZE: also this module's names)
    KEYLOG_HELP, MAX_PARTITIONS, MAX_PORT, MAX_SECONDS, MAX_SIZE, MIN_PORT, PORT_HELP,
    parse_size_option as parse_size_in_range,
)

from .option_values import (  # noqa: F401  (re-exported)
    AUTO_JOBS_MAX, AUTO_JOBS_MIN_BYTES, MAX_COUNT, MAX_JOBS, FrameFormat, ReportFormat, TableFormat, check_format_letter,
)
from .habits import TimeFormat


# --------------------------------------------------------------------------- the ranges of the numbers a user types

# MAX_COUNT, MAX_JOBS, AUTO_JOBS_MAX, AUTO_JOBS_MIN_BYTES: cli/option_values.py (a run of report or frames
# reads them without typer)
# MAX_SECONDS, MAX_PARTITIONS, MAX_SIZE: with the archive's options, which the spark-submit entry
# takes too (pipelines/options.py)


def a_number(value):
    """The callback of a float option: NaN is refused (a range lets it through: no comparison with
    it is true), one line and exit 2 as any value out of the range."""
    if value is not None and value != value:
        raise typer.BadParameter("not a number")
    return value


def seconds_option(default, *names: str, least: float, help: str):
    """A duration in seconds: at least ``least``, at most :data:`MAX_SECONDS`, a number."""
    return typer.Option(default, *names, min=least, max=MAX_SECONDS, callback=a_number, help=help)


def parse_size_option(option: str, text: str, least: int = 1) -> int:
    """A size typed as text (bytes, or with k/m/g/t) of ``option``: from ``least`` to :data:`MAX_SIZE`
    bytes, or one line and exit 2."""
    from .common import EXIT_USAGE, Fail

    try:
        return parse_size_in_range(option, text, least)
    except ValueError as e:
        raise Fail(EXIT_USAGE, str(e)) from None


# --------------------------------------------------------------------------- what every capture command reads

_INPUTS_HELP = ("capture files (pcap / pcapng, optionally gzip), read as one capture in the order given; "
                "- for standard input")
Captures = Annotated[Optional[List[str]], typer.Argument(help=_INPUTS_HELP, show_default=False)]
ReadFiles = Annotated[Optional[List[str]], typer.Option("-r", "--read-file", show_default=False,
                                                        help="read this capture (repeatable; before the arguments)")]
Count = Annotated[Optional[int], typer.Option("-c", "--count", min=1, max=MAX_COUNT,
                                              help="stop after reading this many packets (as tshark -c)")]

def port_option(help: str = PORT_HELP):
    """``--port`` / ``-p``: a TCP port decoded as AMQP besides the standard ones."""
    return typer.Option("--port", "-p", min=MIN_PORT, max=MAX_PORT, help=help)


Ports = Annotated[Optional[List[int]], port_option()]


def keylog_option(help: str = KEYLOG_HELP):
    """``--keylog FILE``: a TLS key log in the NSS format."""
    return typer.Option("--keylog", help=help)


KeyLogPath = Annotated[Optional[Path], keylog_option()]

# --------------------------------------------------------------------------- live capture (-i)

Interface = Annotated[Optional[str], typer.Option("-i", "--interface", show_default=False,
                                                  help="capture live on this interface (through dumpcap)")]
_BPF_HELP = "live capture: BPF capture filter, e.g. 'tcp port 5672'"
# one letter, one meaning, in every command (tshark's): -f the capture filter, -T the output format
CaptureFilter = Annotated[Optional[str], typer.Option("-f", "--capture-filter", show_default=False, help=_BPF_HELP)]
FramesCaptureFilter = CaptureFilter  # (the name frames used when -f meant --format elsewhere)
Autostop = Annotated[Optional[List[str]], typer.Option("-a", "--autostop", show_default=False,
                                                       help="live capture: duration:SECONDS")]
WriteRaw = Annotated[Optional[str], typer.Option("-w", "--write", show_default=False,
                                                 help="live capture: also write the raw packets to this pcap file")]

#: the declarations of CaptureInputs' fields (cli/inputs.py), in their order
INPUT_OPTIONS = {"captures": Captures, "read": ReadFiles, "count": Count, "port": Ports, "keylog": KeyLogPath,
                 "iface": Interface, "bpf": CaptureFilter, "autostop": Autostop, "write": WriteRaw}

# --------------------------------------------------------------------------- report and tables

Jobs = Annotated[int, typer.Option("-j", "--jobs", min=0, max=MAX_JOBS,
                                   help="analyse with this many processes (flows split between them; the output "
                                        "is the same as with one, but for the limits the manual lists); 0: one "
                                        f"per idle CPU (at most {AUTO_JOBS_MAX}) for capture files of "
                                        f"{AUTO_JOBS_MIN_BYTES >> 20} MiB or more, else one; "
                                        "standard input and live captures use one")]
ReportFormatOption = Annotated[ReportFormat, typer.Option("--format", "-T",
                                                          help="text, json, or html (one self-contained page "
                                                               "with plots)")]
ReportOutput = Annotated[Optional[Path], typer.Option("--output", "-o",
                                                      help="write to this file (default: stdout)")]
ReportMessages = Annotated[bool, typer.Option("--messages", help="also read every delivery's message: the "
                                                                 "report's requests section (request/reply, "
                                                                 "$management, $cbs put-tokens) and messages "
                                                                 "section (messages across connections); slower")]
TableMessages = Annotated[bool, typer.Option("--messages", help="deliveries: also read every delivery's message "
                                                                "(the message columns: message_id, subject, "
                                                                "application_properties, ...; null without it "
                                                                "unless --columns names one); slower")]
TableFormatOption = Annotated[TableFormat, typer.Option("--format", "-T", help="table, csv, jsonl or parquet")]
TableOutput = Annotated[Optional[Path], typer.Option("--output", "-o",
                                                     help="write to this file (required for parquet)")]
Columns = Annotated[Optional[str], typer.Option("--columns", help="these columns, in every format (a,b,c; +a,b "
                                                                  "adds to the default ones; all)")]

# --------------------------------------------------------------------------- frames

Verbose = Annotated[bool, typer.Option("-V", "--verbose", help="Wireshark-style detail tree per frame")]
FrameFormatOption = Annotated[FrameFormat, typer.Option("--format", "-T",
                                                        help="text, jsonl, or fields (with -e, as tshark -T "
                                                             "fields)")]
DisplayFilter = Annotated[Optional[str], typer.Option("-Y", "--display-filter",
                                                      help="show only the frames this filter matches, e.g. "
                                                           "'performative == \"transfer\" and delivery-id >= 10'")]
HexDump = Annotated[bool, typer.Option("-x", help="after each frame, its bytes in hex and ASCII (tshark's -x "
                                                  "layout; the AMQP frame's bytes, not the whole packet's)")]
OnlyProtocol = Annotated[Optional[str], typer.Option("-O", show_default=False,
                                                     help="amqp: with -V, the other layers as one line each "
                                                          "(as tshark -O amqp)")]
Glossary = Annotated[Optional[str], typer.Option("-G", show_default=False,
                                                help="fields: list the fields -Y and -e know, with their "
                                                     "Wireshark names, then exit (as tshark -G fields)")]
FieldOptionsOption = Annotated[Optional[List[str]], typer.Option(
    "-E", show_default=False, help="-T fields: header=y|n, separator=/t|/s|C, occurrence=f|l|a, aggregator=,|/s|C, "
                                   "quote=d|s|n, bom=y|n (repeatable; as tshark -E)")]
Fields = Annotated[Optional[List[str]], typer.Option("-e", "--field", help="a field -T fields prints (repeatable)")]
TimeFormatOption = Annotated[TimeFormat, typer.Option("-t", "--time-format", case_sensitive=False,
                                                      help="time column: r relative to the first packet, a / ad "
                                                           "local time (and date), u / ud UTC, e epoch, d delta "
                                                           "from the previous packet, dd from the previous line; "
                                                           "to the capture's resolution (9 digits for nanosecond "
                                                           "captures)")]


# --------------------------------------------------------------------------- commands whose parameters are declared elsewhere


def declared_parameter(option) -> inspect.Parameter:
    """An option declared as data (a :class:`~amqp_dissect.pipelines.options.Declared`) as the
    parameter of a typer command: its names, type, default, range and help."""
    kind = option.kind
    annotation = List[kind] if option.repeatable else kind
    if not option.required and option.default is None:
        annotation = Optional[annotation]
    settings: dict = {"help": option.help}
    if option.least is not None:
        settings.update(min=option.least, max=option.most)
    if kind is float:
        settings["callback"] = a_number
    default = inspect.Parameter.empty if option.required else option.default
    return inspect.Parameter(option.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             annotation=Annotated[annotation, typer.Option(*option.names, **settings)], default=default)


def with_parameters(command, parameters: list):
    """``command`` (a function taking its parameters by keyword) with the signature typer reads
    made of ``parameters`` (``inspect.Parameter``, annotations as objects, in the order ``--help``
    lists them)."""
    command.__signature__ = inspect.Signature(parameters)
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command


def capture_parameters(run):
    """``run``, a command of :func:`.inputs.capture_command`, with the signature typer reads: the
    capture parameters (:class:`~.inputs.CaptureInputs`'s) and the command's own, each declared by
    its annotation (a name of this module, or of the command's own module), in ``--help``'s order."""
    return with_parameters(run, _capture_parameters(run.command, run.layout))


def _capture_parameters(command, layout) -> list:
    """The parameters typer reads for a command of :func:`.inputs.capture_command`."""
    from .inputs import INPUT_NAMES, CaptureInputs

    # (the command's annotations are names: of this module, or of the command's own)
    own = list(inspect.signature(command, eval_str=True, globals=command.__globals__, locals=globals()).parameters.values())
    assert own[0].name == "inputs", f"{command.__name__}: its first parameter is the CaptureInputs"
    assert tuple(INPUT_OPTIONS) == INPUT_NAMES, "INPUT_OPTIONS: CaptureInputs' fields, in their order"
    given = {name: inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=INPUT_OPTIONS[name],
                                     default=CaptureInputs._field_defaults[name]) for name in INPUT_NAMES}
    after, order = layout
    rest = [given[n] for n in INPUT_NAMES if n not in _INPUTS_FIRST]
    parameters = [given[n] for n in _INPUTS_FIRST] + ([] if after else rest)
    for p in own[1:]:
        parameters += [p] + (rest if p.name == after else [])
    by_name = {p.name: p for p in parameters}
    assert len(by_name) == len(own) - 1 + len(INPUT_NAMES), f"{command.__name__}: no parameter {after}"
    if not order:
        return parameters
    assert sorted(order) == sorted(by_name), f"{command.__name__}: order names {sorted(by_name)}"
    return [by_name[n] for n in order]


_INPUTS_FIRST = ("captures", "read")  # (first in every command's --help)
