"""The ``frames`` command (one line per AMQP frame, a detail tree with ``-V``, JSON lines, or ``-T
fields``) and its output loop, without typer: cli/typer_app.py registers it, :mod:`.quick` calls it
too.  The parameters' annotations name their declarations in cli/options.py (read by typer only)."""

from __future__ import annotations

import codecs
import functools
import json
import os
import sys
from typing import TYPE_CHECKING, NamedTuple

from .common import EXIT_OK, EXIT_USAGE, Fail, filter_notes
from .option_values import FrameFormat
from .habits import TimeFormat, resolve_time_text, time_text
from .inputs import CaptureInputs, capture_command
from .run import CaptureRun

if TYPE_CHECKING:  # (typer's declarations: evaluated by cli/options.py)
    from amqp_dissect.render.frames import DetailLines

    from .options import (DisplayFilter, FieldOptionsOption, Fields, FrameFormatOption, Glossary, HexDump,
                          OnlyProtocol, TimeFormatOption, Verbose)

#: the order frames --help lists its parameters in (the capture's among the others)
_FRAMES_ORDER = ("captures", "read", "verbose", "fmt", "display_filter", "field", "count", "iface", "bpf", "autostop",
                 "write", "time_format", "port", "keylog", "glossary", "field_opts", "hex_dump", "only")


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
        return _print_glossary(glossary)
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
    return run.finish_status(bugs)


def _print_glossary(what: str) -> int:
    """-G fields: our fields and their Wireshark names (tab-separated, as tshark -G fields); the exit status."""
    if what != "fields":
        raise Fail(EXIT_USAGE, f"-G {what}: the glossary here is -G fields")
    from amqp_dissect.filter import field_list

    sys.stdout.write("\n".join(field_list()) + "\n")
    return EXIT_OK


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
