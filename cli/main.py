"""The ``amqp-dissect`` command line: a thin shell over the sans-IO core.

Exit codes (also in ``amqp-dissect --help`` and the README):

    0  success
    1  internal error (a bug: please report it; AMQP_DISSECT_DEBUG=1 shows the traceback)
    2  usage error (bad option or argument)
    3  the capture file cannot be opened (missing, unreadable)
    4  not a capture this tool reads (unknown format, bad file header), or no packet of a
       supported link type in it
    5  the capture is damaged partway (truncated last record, corrupt block, broken gzip
       tail): everything readable before the damage was reported
"""

from __future__ import annotations

import codecs
import functools
import json
import os
import sys
from typing import NamedTuple

import typer

from .common import (  # noqa: F401  (re-exported: the exit codes are part of this module's API)
    EXIT_CODES_HELP, EXIT_DAMAGED, EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Fail, filter_notes,
    load_keylog, warnings_as_notes,
)

# a warning while the analysis modules load (a compiled module older than its edited source, in a
# checkout) is one line too, as while a command runs
with warnings_as_notes():
    from amqp_dissect.render.report import render_text

    from .archive import register as _register_archive
    from .tables import register as _register_tables
    from .options import (  # noqa: F401  (TableFormat: re-exported)
        Autostop, CaptureFilter, Captures, Count, DisplayFilter, Fields, FrameFormat, FrameFormatOption,
        FieldOptionsOption, FramesCaptureFilter, Glossary, HexDump, OnlyProtocol, Interface, Jobs, KeyLogPath, Ports,
        ReadFiles, ReportFormat, ReportFormatOption, ReportMessages, ReportOutput, TableFormat, TimeFormatOption, Verbose,
        WriteRaw, check_format_letter,
    )
    from .habits import TimeFormat, resolve_time_text, time_text
    from .inputs import CaptureInputs, capture_command, start_run
    # (CaptureRun and Checked: also the tests' way into a run)
    from .run import CaptureRun, Checked, capture_or_live, jobs_for, parallel_ok, run_status  # noqa: F401

class _BrokenPipe(Exception):
    """The reader of our output went away (``| head``): not an error."""


def _guarded(fn):
    """A command whose broken pipe reaches :func:`main` (click would turn it into exit 1)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            raise _BrokenPipe() from None
    return run


class _App(typer.Typer):
    """A Typer whose commands all get :func:`_guarded`."""

    def command(self, *args, **kwargs):
        register = super().command(*args, **kwargs)
        return lambda fn: register(_guarded(fn))


_APP_SETTINGS = dict(
    add_completion=True,
    no_args_is_help=True,
    help=f"AMQP 1.0 packet-capture analyzer and protocol dissector.\n\n{EXIT_CODES_HELP}",
    pretty_exceptions_enable=False,
)
app = _App(**_APP_SETTINGS)


def _app_for(argv: list[str]) -> typer.Typer:
    """The app that runs ``argv``: for ``amqp-dissect COMMAND ...``, one holding the root options and
    COMMAND alone (typer turns every registered command into a click command on each run, reading
    every signature and type hint: a fixed cost a run of one command need not pay); otherwise the
    whole app (top-level help, ``--version``, an unknown command's error, shell completion)."""
    if not argv or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return app
    for info in app.registered_commands:
        if argv[0] == (info.name or typer.main.get_command_name(info.callback.__name__)):
            one = typer.Typer(**_APP_SETTINGS)
            one.registered_callback = app.registered_callback
            one.registered_commands = [info]
            return one
    return app


# --------------------------------------------------------------------------- commands


def version_line() -> str:
    """``amqp-dissect <version>, compiled (N modules)`` or ``..., pure Python``."""
    import amqp_dissect as dissector

    n = len(dissector.compiled_modules())
    return f"amqp-dissect {dissector.__version__}, " + (f"compiled ({n} modules)" if n else "pure Python")


def _show_version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                 help="Show the version and whether the core runs compiled, then exit."),
) -> None:
    """AMQP 1.0 packet-capture analyzer and protocol dissector."""


#: the order frames --help lists its parameters in (the capture's among the others)
_FRAMES_ORDER = ("captures", "read", "verbose", "fmt", "display_filter", "field", "count", "iface", "bpf", "autostop",
                 "write", "time_format", "port", "keylog", "glossary", "field_opts", "hex_dump", "only")


@app.command()
@capture_command(order=_FRAMES_ORDER)
def frames(
    inputs: CaptureInputs,
    verbose: Verbose = False,
    fmt: FrameFormatOption = FrameFormat.text,
    display_filter: DisplayFilter = None,
    field: Fields = None,
    time_format: TimeFormatOption = TimeFormat.r,
    glossary: Glossary = None,
    field_opts: FieldOptionsOption = None,
    hex_dump: HexDump = False,
    only: OnlyProtocol = None,
):
    """One line per AMQP frame (or a detail tree with -V, JSON lines, or -T fields -e NAME ...)."""
    if glossary is not None:
        _print_glossary(glossary)
    inputs.check_format_letter(FrameFormat)
    opened = inputs.open()
    _check_frame_options(fmt, field, verbose, field_opts)
    _check_layout_options(fmt, verbose, hex_dump, only)
    context, flt, printer = _filters(display_filter, field, field_opts)
    records = [] if verbose and fmt is FrameFormat.text else None  # TLS records for -V
    # -V and jsonl decode every frame and message in full; summaries need a delivery's frames and size
    # only; -x keeps each frame's bytes
    full = verbose or fmt is FrameFormat.jsonl
    messages = "raw" if hex_dump else True if full or _message_fields(display_filter, field) else "summary"
    run = inputs.run(opened, messages=messages, tls_records=records)
    tt = time_text(time_format, run.source)
    if context is not None:  # frame.time_*: the reader's exact times, from the capture's first packet (tshark's)
        context.first_time = lambda: run.source.first_ts
        context.exact_time, context.first_exact = tt.exact, tt.first
    out = sys.stdout
    bugs = None  # what met internal errors (-V: describing packets), for the exit status
    if fmt is FrameFormat.jsonl:
        _print_jsonl(run, out, flt)
    elif fmt is FrameFormat.fields:
        head = printer.header()
        if head:
            out.write(head)
        _write_frames(run, out, _FieldLines(run, printer, context, tt, flt is None), flt)
    elif verbose:
        bugs = _print_verbose(run, out, flt, hex_dump, only is not None)
    elif hex_dump:
        _write_frames(run, out, _WithHex(_SummaryLines(run, tt)), flt)
    else:
        _print_summary(run, out, tt, flt)
    raise typer.Exit(run.finish_status(bugs))


def _print_glossary(what: str) -> None:
    """-G fields: our fields and their Wireshark names (tab-separated, as tshark -G fields), then exit."""
    if what != "fields":
        raise Fail(EXIT_USAGE, f"-G {what}: the glossary here is -G fields")
    from amqp_dissect.filter import field_list

    sys.stdout.write("\n".join(field_list()) + "\n")
    raise typer.Exit(EXIT_OK)


def _check_frame_options(fmt: FrameFormat, field, verbose: bool, field_opts=None) -> None:
    """-T fields, -e, -E and -V: the combinations that make sense."""
    if fmt is FrameFormat.fields and not field:
        raise Fail(EXIT_USAGE, "-T fields needs at least one -e FIELD")
    if field and fmt is not FrameFormat.fields:
        raise Fail(EXIT_USAGE, "-e FIELD needs -T fields")
    if field_opts and fmt is not FrameFormat.fields:
        raise Fail(EXIT_USAGE, "-E needs -T fields")
    if fmt is FrameFormat.fields and verbose:
        raise Fail(EXIT_USAGE, "-V and -T fields exclude each other")


def _check_layout_options(fmt: FrameFormat, verbose: bool, hex_dump: bool, only: str | None) -> None:
    """-x and -O: with the text output (-O with -V), -O amqp only."""
    if hex_dump and fmt is not FrameFormat.text:
        raise Fail(EXIT_USAGE, f"-x goes with the text output (the lines or -V), not -T {fmt.value}")
    if only is not None:
        if only.lower() != "amqp":
            raise Fail(EXIT_USAGE, f"-O {only}: the protocol shown in detail here is amqp")
        if not verbose or fmt is not FrameFormat.text:
            raise Fail(EXIT_USAGE, "-O amqp goes with -V")


def _message_fields(display_filter: str | None, fields) -> bool:
    """-Y or -e names a field of the message: the summaries decode messages too."""
    if display_filter is None and not fields:
        return False
    from amqp_dissect.filter import names_message_field

    return names_message_field(display_filter, fields)


def _filters(display_filter: str | None, fields, field_opts=None):
    """(FrameContext, compiled ``-Y`` filter, ``-e`` FieldPrinter with the ``-E`` options), each None
    when not asked for (the filter module is loaded only for them); a filter, field or ``-E`` that
    does not compile is a usage failure."""
    if display_filter is None and not fields:
        return None, None, None
    from amqp_dissect.filter import FilterError, FieldPrinter, FrameContext, compile_filter, field_options

    try:
        opts = field_options(field_opts)
    except ValueError as e:
        raise Fail(EXIT_USAGE, str(e)) from None
    context = FrameContext()
    flt = None
    try:
        if display_filter is not None:
            flt = compile_filter(display_filter, context)
            filter_notes("-Y", flt.notes)
        return context, flt, FieldPrinter(fields, context, **opts) if fields else None
    except FilterError as e:
        if display_filter is not None and flt is None:
            raise Fail(EXIT_USAGE, e.one_line()) from None
        raise Fail(EXIT_USAGE, f"-e {e.text}: {e.message}") from None


# --------------------------------------------------------------------------- the output of frames

_CHUNK = 8192  # lines written to the output at a time
_RECORDS = 256  # records the dissector's own loop reads between two looks at the lines made


def _flush(out, chunk: list, live: bool = False) -> None:
    """Write the lines in ``chunk`` (each followed by a newline) and empty it (``live``: now)."""
    if chunk:
        chunk.append("")
        out.write("\n".join(chunk))
        chunk.clear()
        if live:
            out.flush()


def _flush_utf8(buffer, chunk: list, live: bool = False) -> None:
    """Write the bytes in ``chunk`` (the lines and their newlines) to ``buffer`` and empty it."""
    if chunk:
        buffer.write(b"".join(chunk))
        chunk.clear()
        if live:
            buffer.flush()


class Utf8Output(NamedTuple):
    """The binary stream under a text output that writes UTF-8, and the output's error handler:
    lines made as UTF-8 go there, the same bytes the text output would write."""

    buffer: object
    errors: str


def utf8_output(out) -> Utf8Output | None:
    """:class:`Utf8Output` of the text output ``out`` (its pending text written first), or None
    when it has no binary stream, writes another encoding or turns newlines into others."""
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if buffer is None or not isinstance(encoding, str) or os.linesep != "\n":
        return None
    try:
        if codecs.lookup(encoding).name != "utf-8":
            return None
    except LookupError:
        return None
    out.flush()
    return Utf8Output(buffer, getattr(out, "errors", None) or "strict")


def _write_frames(run: CaptureRun, out, lines, flt=None, binary: Utf8Output | None = None) -> None:
    """The one output loop of ``frames``: each event of ``run`` (each one ``flt`` matches) goes to
    the renderer ``lines.start()`` returns once reading started (the capture's first time is known
    then): ``render(event)``, the event's line or None, or with ``lines.many``
    ``render(chunk, record, event)``, which appends the event's lines (a detail tree); with
    ``binary``, ``lines.start_utf8(errors)`` returns ``render(chunk, event)``, which appends the
    event's line and newline as UTF-8 bytes, and the bytes go to ``binary.buffer``.  The lines
    are written 8192 at a time, a live capture's as they come; those rendered before a failure are
    written too."""
    chunk: list = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    if binary is not None and not live:
        limit = 3 * _CHUNK  # (three pieces a line)
    write = functools.partial(_flush, out) if binary is None else functools.partial(_flush_utf8, binary.buffer)
    match = flt.match if flt is not None else None
    many = lines.many
    render = None
    try:
        for record, ev in run.events():
            if render is None:
                render = lines.start() if binary is None else lines.start_utf8(binary.errors)
            if match is not None and not match(ev):
                continue
            if binary is not None:
                render(chunk, ev)
            elif many:
                render(chunk, record, ev)
            else:  # (the common case, one call per event)
                text = render(ev)
                if text is None:
                    continue
                chunk.append(text)
            if len(chunk) >= limit:
                write(chunk, live)
    finally:
        write(chunk, live)


class _SummaryLines:
    """One line per frame (tshark's summary line), times as ``-t`` says."""

    many = False

    def __init__(self, run: CaptureRun, tt=None):
        self.run, self.tt = run, tt

    def start(self):
        return self._lines().line

    def start_utf8(self, errors: str):
        """``add(chunk, event)``: the event's line as UTF-8 (``errors``: the output's handler)."""
        return self._lines(errors).add_utf8

    def _lines(self, errors: str = "strict"):
        from amqp_dissect.render.frames import SummaryLines

        lines = SummaryLines(0, None, errors)
        self.begin(lines)
        return lines

    def begin(self, lines) -> None:
        """Set the times of SummaryLines ``lines`` once reading started: relative to the capture's
        first packet (tshark -t r), or as ``-t`` says."""
        source = self.run.source
        lines.t0 = source.first_ts or 0
        lines.time_text = resolve_time_text(self.tt, source)

    def write_utf8(self, binary: Utf8Output) -> None:
        """Every event's line to ``binary`` as UTF-8, each event handed to the lines by the
        dissector's own loop (no -Y, not live); what was made before a failure is written too."""
        from amqp_dissect.render.frames import SummaryLines

        lines = SummaryLines(0, None, binary.errors)
        lines.begin = self.begin
        chunk = lines.chunk
        try:
            for _ in self.run.drive_chunks(lines.add_line, _RECORDS):
                if len(chunk) >= 3 * _CHUNK:
                    _flush_utf8(binary.buffer, chunk)
        finally:
            _flush_utf8(binary.buffer, chunk)


class _JsonLines:
    """One JSON object per event that has a JSON form."""

    many = False

    def start(self):
        from amqp_dissect.render.frames import event_json as as_json

        encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # json.dumps(d, **the same options)

        def render(ev):
            d = as_json(ev)
            return encode(d) if d is not None else None
        return render


class _FieldLines:
    """-T fields: one line per frame line the text output would show, the -e fields tab-separated."""

    many = False

    def __init__(self, run: CaptureRun, printer, context, tt, observe: bool):
        self.run, self.printer, self.context = run, printer, context
        self.observe = observe  # (without -Y, what the fields need of the links is observed here; -Y does it)
        printer.time_text = lambda e: tt(e.ts, getattr(e, "packet", None)).strip()

    def start(self):
        from amqp_dissect.amqp.framing import Frame, ProtocolHeader, StreamNote
        from amqp_dissect.events import PacketNote

        shown = (Frame, ProtocolHeader, StreamNote, PacketNote)  # the events a frames line shows
        self.context.t0 = self.run.source.first_ts
        line = self.printer.line
        observe = self.context.observe if self.observe and self.context.needs_links else None

        def render(ev):
            if observe is not None:
                observe(ev)
            return line(ev) if isinstance(ev, shown) and ev.ts is not None else None
        return render


class _DetailLines:
    """-V: the detail tree of each frame under its packet's layers (a :class:`DetailLines`); -O amqp:
    the layers' titles only."""

    many = True

    def __init__(self, run: CaptureRun, only_amqp: bool = False):
        from amqp_dissect.render.frames import DetailLines  # (the frames command's: a report need not load it)

        self.detail = DetailLines(layer_records=run.tls_records)  # TLS records shown under their packet
        self.detail.only_amqp = only_amqp

    def start(self):
        return self.detail.add


class _WithHex:
    """-x: what ``lines`` renders for an event, then the event's bytes in hex and ASCII (tshark's
    -x layout) and an empty line."""

    many = True

    def __init__(self, lines):
        self.lines = lines

    def start(self):
        from amqp_dissect.render.hexdump import event_bytes, hex_lines

        inner = self.lines.start()
        many = self.lines.many

        def render(chunk, record, ev):
            if many:
                inner(chunk, record, ev)
            else:
                text = inner(ev)
                if text is None:
                    return
                chunk.append(text)
            data = event_bytes(ev)
            if data:
                chunk.extend(hex_lines(data))
                chunk.append("")
        return render


def _print_summary(run: CaptureRun, out, tt=None, flt=None) -> None:
    """The summary lines (of the events ``flt`` matches), as UTF-8 bytes where the output takes them."""
    lines = _SummaryLines(run, tt)
    binary = utf8_output(out)
    if binary is not None and flt is None and run.live is None:
        lines.write_utf8(binary)
    else:
        _write_frames(run, out, lines, flt, binary)


def _print_jsonl(run: CaptureRun, out, flt=None) -> None:
    _write_frames(run, out, _JsonLines(), flt)


def _print_verbose(run: CaptureRun, out, flt=None, hex_dump: bool = False, only_amqp: bool = False) -> DetailLines:
    """The -V text (-x: each frame's bytes after its tree; -O amqp: the other layers one line each);
    returns the DetailLines (its ``internal_errors``: bugs met, each shown in place)."""
    lines = _DetailLines(run, only_amqp)
    _write_frames(run, out, _WithHex(lines) if hex_dump else lines, flt)
    return lines.detail


@app.command()
@capture_command(after="output")
def report(
    inputs: CaptureInputs,
    fmt: ReportFormatOption = ReportFormat.text,
    output: ReportOutput = None,
    jobs: Jobs = 1,
    messages: ReportMessages = False,
):
    """Connections, sessions, links, delivery outcomes, settlement latency, stalls, errors.
    With -j N the HTML page is made by one process.  --messages: the requests and messages sections too."""
    from .report_html import analyze_for_report

    run = start_run(inputs, ReportFormat)
    failed = None
    jobs = 1 if fmt is ReportFormat.html else jobs_for(run, jobs)
    if jobs > 1 and parallel_ok(run):
        failed = _report_in_parallel(run, jobs, fmt, output, messages)  # (exits unless -j failed)
        run = run.again()
    html = fmt is ReportFormat.html  # (the page names the version; its line imports every compiled module)
    analysis, rep, page = analyze_for_report(run, html=html, version=version_line() if html else "",
                                             messages=messages)
    _write_report(output, fmt, rep, page)
    raise typer.Exit(run_status(run, analysis.analyzer, failed, jobs))


def _report_in_parallel(run: CaptureRun, jobs: int, fmt: ReportFormat, output, messages: bool = False):
    """The text or JSON report made by ``jobs`` processes (amqp_dissect.pipelines.runs.parallel) and
    written: exits, or returns the exception -j met (a bug), for the report to be made again by
    one process."""
    from amqp_dissect.pipelines.runs.parallel import parallel_report

    try:
        with run._reading():
            rep, bugs = parallel_report(run.source, jobs, messages=messages)
    except Fail:
        raise
    except Exception as e:
        return e
    _write_report(output, fmt, rep)
    raise typer.Exit(run.finish_status(bugs))


def _write_report(output, fmt: ReportFormat, rep: dict, page: str | None = None) -> None:
    """The report document ``rep`` (or the HTML ``page`` made of it) to stdout or ``-o FILE``."""
    from .report_html import write_output

    if fmt is ReportFormat.json:
        text = json.dumps(rep, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"
    else:
        text = page if fmt is ReportFormat.html else render_text(rep)
    write_output(output, text)


_register_tables(app)
from .messages import messages as _messages_command  # noqa: E402  (its own command: -Y on the table's columns)

app.command(name="messages")(_messages_command)
_register_archive(app)
from .compare import register as _register_compare; _register_compare(app)  # noqa: E402,E702


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run typer, turn failures into one line and an exit code."""
    # a capture's analysis allocates millions of short-lived objects and keeps the open deliveries:
    # collect cycles less often, and never walk the modules loaded so far
    from amqp_dissect.pipelines import analysis_gc

    analysis_gc()
    # numpy (under pyarrow) starts OpenBLAS threads that spin on the other cores; nothing here
    # does linear algebra
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        args = sys.argv[1:] if argv is None else argv
        with warnings_as_notes():
            rc = _app_for(args)(args=args, standalone_mode=False, prog_name="amqp-dissect")
        return rc if isinstance(rc, int) else EXIT_OK
    except typer.Exit as e:
        return e.exit_code
    except Fail as e:
        print(f"amqp-dissect: {e}", file=sys.stderr)
        return e.code
    except (BrokenPipeError, _BrokenPipe):
        _quiet_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        # typer may vendor its own click: recognise its exceptions by class name
        bases = {c.__name__ for c in type(e).__mro__}
        if "Abort" in bases:
            return 130
        if "NoArgsIsHelpError" in bases:
            e.show()
            return EXIT_USAGE
        if "ClickException" in bases:
            print(f"amqp-dissect: {_usage_line(e)}", file=sys.stderr)
            return EXIT_USAGE
        if os.environ.get("AMQP_DISSECT_DEBUG"):
            raise
        print(f"amqp-dissect: internal error: {type(e).__name__}: {e} (a bug; AMQP_DISSECT_DEBUG=1 shows details)",
              file=sys.stderr)
        return EXIT_INTERNAL


def _usage_line(e) -> str:
    """A click usage error as one line: what is wrong, and where to look."""
    msg = " ".join(str(e.format_message()).split())
    ctx = getattr(e, "ctx", None)
    where = getattr(ctx, "command_path", None) if ctx is not None else None
    return f"{msg} (see '{where} --help')" if where else msg


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def entry() -> None:
    code = main()
    from .common import quick_exit

    quick_exit(code)  # (only for a command that asked: archive)
    sys.exit(code)


if __name__ == "__main__":
    entry()
