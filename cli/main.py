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

import functools
import gc
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import typer

from amqp_dissect.errors import CaptureError

from amqp_dissect.render.frames import DetailLines, SummaryLines, event_json
from amqp_dissect.pipelines.local import CaptureSource, DeliveryStream, run_analysis
from amqp_dissect.render.report import render_text
from amqp_dissect.results.report import build_report

from .archive import register as _register_archive
from .options import (  # noqa: F401  (the formats are re-exported)
    Autostop, CaptureFilter, Captures, Columns, Count, DisplayFilter, Fields, FrameFormat, FrameFormatOption,
    FramesCaptureFilter, Interface, Jobs, KeyLogPath, Ports, ReadFiles, ReportFormat, ReportFormatOption,
    ReportOutput, TableFormat, TableFormatOption, TableOutput, TimeFormatOption, Verbose, WriteRaw,
)
from .habits import (TimeFormat, capture_inputs, check_output, pick_columns, resolve_time_text, text_table, time_text,
                     write_failure)
from .common import (  # noqa: F401  (re-exported: the exit codes are part of this module's API)
    EXIT_CODES_HELP, EXIT_DAMAGED, EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Fail,
)

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


app = _App(
    add_completion=True,
    no_args_is_help=True,
    help=f"AMQP 1.0 packet-capture analyzer and protocol dissector.\n\n{EXIT_CODES_HELP}",
    pretty_exceptions_enable=False,
)


def _inputs(captures, read, iface, bpf, count, autostop, write):
    """The files (or stdin) to read, or the live capture of -i."""
    from .live import open_live

    if iface is None:
        if bpf or autostop or write:
            open_live(iface, bpf, count, autostop, write)  # (says which option needs -i)
        return capture_inputs(captures, read)
    if captures or read:
        raise Fail(EXIT_USAGE, "-i captures live: give no capture file with it")
    check_output(write)
    return open_live(iface, bpf, count, autostop, write)


# --------------------------------------------------------------------------- capture input


class CaptureRun:
    """A CaptureSource whose failures become one line on stderr and an exit code."""

    def __init__(self, inputs, ports: list[int], messages: bool = False, keylog: Path | None = None,
                 tls_records: list | None = None, limit: int | None = None):
        if isinstance(inputs, (str, Path)):
            inputs = [str(inputs)]
        from .live import LiveCapture

        self.live = inputs if isinstance(inputs, LiveCapture) else None  # -i: dumpcap's pipe
        inputs = [inputs] if self.live is not None else inputs
        self.inputs = list(inputs)
        self.path = self.live.name if self.live is not None else self.inputs[0]
        self.source = CaptureSource(self.inputs, ports=ports, messages=messages, keylog=load_keylog(keylog),
                                    tls_records=tls_records, limit=limit)
        self.tls_records = tls_records
        self.dissector = self.source.dissector

    @contextmanager
    def _reading(self):
        """Failures to open or read the capture, as one line and an exit code."""
        for p in self.inputs:
            if isinstance(p, str) and p != "-" and os.path.isdir(p):
                raise Fail(EXIT_OPEN, f"{p}: is a directory, not a capture file")
        from .progress import Progress

        try:
            with Progress(self.source):
                yield
        except FileNotFoundError:
            raise Fail(EXIT_OPEN, f"{self._current}: no such file") from None
        except CaptureError as e:
            raise Fail(EXIT_FORMAT, f"{self._current}: {e}") from None
        except OSError as e:
            raise Fail(EXIT_OPEN, f"{self._current}: cannot open: {e.strerror or e}") from None

    @property
    def _current(self) -> str:
        return self.source.current or self.path

    def events(self) -> Iterator[tuple[object, object]]:
        """(record, event) pairs; record is the packet that produced the event (None at the end)."""
        with self._reading():
            yield from self.source.events()

    def drive(self, sink):
        """Every event to ``sink(event)`` (see CaptureSource.drive); the last record's time."""
        with self._reading():
            return self.source.drive(sink)

    def drive_chunks(self, sink, chunk: int = 0):
        """CaptureSource.drive_chunks, with the same failures as :meth:`events`."""
        with self._reading():
            yield from self.source.drive_chunks(sink, chunk)

    @property
    def last_ts(self):
        return self.source.last_ts

    def finish_status(self, analyzer=None) -> int:
        """The exit code once everything is written: internal errors (bugs) first, then damage."""
        if self.live is not None:
            self.live.close()
            why = self.live.failure()
            if why is not None:
                print(f"amqp-dissect: -i: {why}", file=sys.stderr)
                return EXIT_OPEN
        bugs = analyzer.internal_errors if analyzer is not None else ()
        if bugs:
            more = f" (and {len(bugs) - 1} more: see the internal-error violations)" if len(bugs) > 1 else ""
            print(f"amqp-dissect: internal error: {bugs[0]}{more} (a bug; the output above is complete otherwise)",
                  file=sys.stderr)
            return EXIT_INTERNAL
        d = self.dissector
        if self.source.errors:
            path, err = self.source.errors[0]
            print(f"amqp-dissect: {path}: {err}", file=sys.stderr)
            return EXIT_DAMAGED
        if d.packets and d.unsupported_linktypes and d.tcp_packets == 0 and sum(d.unsupported_linktypes.values()) == d.packets:
            lts = ", ".join(str(x) for x in sorted(d.unsupported_linktypes))
            print(f"amqp-dissect: {', '.join(map(str, self.source.paths))}: unsupported link type {lts}: no packet could be decoded",
                  file=sys.stderr)
            return EXIT_FORMAT
        return EXIT_OK

    def analyze(self, **options):
        """Run the capture through the state/analytics layer (options: see ``run_analysis``)."""
        return run_analysis(_Checked(self), **options)


def load_keylog(path: Path | None):
    """``--keylog FILE`` (default: the file ``$SSLKEYLOGFILE`` names), read as a stream (a
    :class:`~amqp_dissect.pipelines.keylogfile.KeyLogFile`: only the secrets of the capture's
    ClientHello randoms are kept); a missing ``--keylog`` file is a usage failure.  Its damaged
    lines are warnings on stderr (line numbers), not failures."""
    from amqp_dissect.pipelines.keylogfile import open_keylog

    try:
        kl = open_keylog(path)
    except OSError as e:
        raise Fail(EXIT_OPEN, f"{path}: cannot read the key log: {e.strerror or e}") from None
    if kl is not None:
        for note in kl.notes:
            print(f"amqp-dissect: {kl.path}: key log {note}", file=sys.stderr)
    return kl


class _Checked:
    """Adapter: a CaptureRun seen as a CaptureSource (events with exit-code mapping)."""

    def __init__(self, run: CaptureRun):
        self.run = run
        self.errors = run.source.errors

    def events(self):
        return self.run.events()

    def drive(self, sink):
        return self.run.drive(sink)

    def drive_chunks(self, sink, chunk: int = 0):
        return self.run.drive_chunks(sink, chunk)

    @property
    def last_ts(self):
        return self.run.last_ts


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


@app.command()
def frames(
    captures: Captures = None,
    read: ReadFiles = None,
    verbose: Verbose = False,
    fmt: FrameFormatOption = FrameFormat.text,
    display_filter: DisplayFilter = None,
    field: Fields = None,
    count: Count = None,
    iface: Interface = None,
    bpf: FramesCaptureFilter = None,
    autostop: Autostop = None,
    write: WriteRaw = None,
    time_format: TimeFormatOption = TimeFormat.r,
    port: Ports = None,
    keylog: KeyLogPath = None,
):
    """One line per AMQP frame (or a detail tree with -V, JSON lines, or -T fields -e NAME ...)."""
    inputs = _inputs(captures, read, iface, bpf, count, autostop, write)
    if fmt is FrameFormat.fields and not field:
        raise Fail(EXIT_USAGE, "-T fields needs at least one -e FIELD")
    if field and fmt is not FrameFormat.fields:
        raise Fail(EXIT_USAGE, "-e FIELD needs -T fields")
    if fmt is FrameFormat.fields and verbose:
        raise Fail(EXIT_USAGE, "-V and -T fields exclude each other")
    context = flt = printer = None
    if display_filter is not None or field:  # (the filter module is loaded only for them)
        from amqp_dissect.filter import FilterError, FieldPrinter, FrameContext, compile_filter

        context = FrameContext()
        try:
            if display_filter is not None:
                flt = compile_filter(display_filter, context)
            if field:
                printer = FieldPrinter(field, context)
        except FilterError as e:
            if display_filter is not None and flt is None:
                raise Fail(EXIT_USAGE, e.one_line()) from None
            raise Fail(EXIT_USAGE, f"-e {e.text}: {e.message}") from None
    records = [] if verbose and fmt is FrameFormat.text else None  # TLS records for -V
    # -V and jsonl decode every frame and message in full; summaries need a delivery's frames and size only
    full = verbose or fmt is FrameFormat.jsonl
    run = CaptureRun(inputs, port or [], messages=True if full else "summary", keylog=keylog, tls_records=records,
                     limit=count)
    tt = time_text(time_format, run.source)
    if context is not None:  # frame.time_*: the reader's exact times, from the capture's first packet (tshark's)
        context.first_time = lambda: run.source.first_ts
        context.exact_time, context.first_exact = tt.exact, tt.first
    out = sys.stdout
    bugs = None  # what met internal errors (-V: describing packets), for the exit status
    if fmt is FrameFormat.jsonl:
        _print_jsonl(run, out, flt)
    elif fmt is FrameFormat.fields:
        _print_fields(run, out, flt, printer, context, tt)
    elif verbose:
        bugs = _print_verbose(run, out, flt)
    elif flt is not None:
        _print_filtered(run, out, flt, tt)
    else:
        _print_summary(run, out, tt)
    raise typer.Exit(run.finish_status(bugs))


_CHUNK = 8192  # lines written to the output at a time


def _flush(out, chunk: list, live: bool = False) -> None:
    """Write the lines in ``chunk`` (each followed by a newline) and empty it (``live``: now)."""
    if chunk:
        chunk.append("")
        out.write("\n".join(chunk))
        chunk.clear()
        if live:
            out.flush()


def _print_jsonl(run: CaptureRun, out, flt=None) -> None:
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode  # json.dumps(d, **the same options)
    chunk: list[str] = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    try:
        for _, ev in run.events():
            if flt is not None and not flt.match(ev):
                continue
            d = event_json(ev)
            if d is not None:
                chunk.append(encode(d))
                if len(chunk) >= limit:
                    _flush(out, chunk, live)
    finally:  # what was rendered before a failure is written too
        _flush(out, chunk, live)


def _print_summary(run: CaptureRun, out, tt=None) -> None:
    lines = None
    chunk: list[str] = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    try:
        for record, ev in run.events():
            if lines is None:  # times relative to the capture's first packet (tshark -t r)
                lines = SummaryLines(run.source.first_ts or 0, resolve_time_text(tt, run.source))
            line = lines.line(ev)
            if line is not None:
                chunk.append(line)
                if len(chunk) >= limit:
                    _flush(out, chunk, live)
    finally:
        _flush(out, chunk, live)


def _print_filtered(run: CaptureRun, out, flt, tt=None) -> None:
    """:func:`_print_summary` of the events ``flt`` matches (the unfiltered loop stays as it is)."""
    lines = None
    chunk: list[str] = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    match = flt.match
    try:
        for record, ev in run.events():
            if lines is None:
                lines = SummaryLines(run.source.first_ts or 0, resolve_time_text(tt, run.source))
            if not match(ev):
                continue
            line = lines.line(ev)
            if line is not None:
                chunk.append(line)
                if len(chunk) >= limit:
                    _flush(out, chunk, live)
    finally:
        _flush(out, chunk, live)


def _print_fields(run: CaptureRun, out, flt, printer, context, tt=None) -> None:
    """-T fields: one line per frame line the text output would show, the -e fields tab-separated."""
    from amqp_dissect.amqp.framing import Frame, ProtocolHeader, StreamNote
    from amqp_dissect.events import PacketNote

    shown = (Frame, ProtocolHeader, StreamNote, PacketNote)  # the events a frames line shows
    chunk: list[str] = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    first = True
    printer.time_text = lambda e: tt(e.ts, getattr(e, "packet", None)).strip()
    try:
        for record, ev in run.events():
            if first:
                context.t0 = run.source.first_ts
                first = False
            if flt is not None:
                if not flt.match(ev):
                    continue
            elif context.needs_links:
                context.observe(ev)
            if not isinstance(ev, shown) or ev.ts is None:
                continue
            chunk.append(printer.line(ev))
            if len(chunk) >= limit:
                _flush(out, chunk, live)
    finally:
        _flush(out, chunk, live)


def _print_verbose(run: CaptureRun, out, flt=None) -> DetailLines:
    """The -V text; returns the DetailLines (its ``internal_errors``: bugs met, each shown in place)."""
    detail = DetailLines(layer_records=run.tls_records)  # TLS records shown under their packet
    chunk: list[str] = []
    limit, live = (1, True) if run.live is not None else (_CHUNK, False)  # live: each line as it comes
    try:
        for record, ev in run.events():
            if flt is not None and not flt.match(ev):
                continue
            detail.add(chunk, record, ev)
            if len(chunk) >= limit:
                _flush(out, chunk, live)
    finally:
        _flush(out, chunk, live)
    return detail


@app.command()
def report(
    captures: Captures = None,
    read: ReadFiles = None,
    fmt: ReportFormatOption = ReportFormat.text,
    output: ReportOutput = None,
    count: Count = None,
    port: Ports = None,
    keylog: KeyLogPath = None,
    iface: Interface = None,
    bpf: CaptureFilter = None,
    autostop: Autostop = None,
    write: WriteRaw = None,
    jobs: Jobs = 1,
):
    """Connections, sessions, links, delivery outcomes, settlement latency, stalls, errors.
    With -j N the HTML page is made by one process."""
    from .report_html import analyze_for_report, write_output

    run = CaptureRun(_inputs(captures, read, iface, bpf, count, autostop, write), port or [], keylog=keylog,
                     limit=count)
    failed = None
    if jobs > 1 and fmt is not ReportFormat.html and _parallel_ok(run):
        from amqp_dissect.pipelines.parallel import parallel_report

        try:
            with run._reading():
                rep, bugs = parallel_report(run.source, jobs)
        except Fail:
            raise
        except Exception as e:  # a bug of -j: the report is made again by one process
            failed = e
            run = CaptureRun(run.inputs, port or [], keylog=keylog, limit=count)
        else:
            if fmt is ReportFormat.json:
                write_output(output, json.dumps(rep, indent=2, ensure_ascii=False, allow_nan=False, default=str)
                             + "\n")
            else:
                write_output(output, render_text(rep))
            raise typer.Exit(run.finish_status(bugs))
    analysis, rep, page = analyze_for_report(run, html=fmt is ReportFormat.html, version=version_line())
    if fmt is ReportFormat.json:
        write_output(output, json.dumps(rep, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n")
    else:
        write_output(output, page if fmt is ReportFormat.html else render_text(rep))
    raise typer.Exit(_status(run, analysis.analyzer, failed, jobs))


def _status(run: CaptureRun, analyzer, failed, jobs: int) -> int:
    """``run.finish_status``; after a failure of ``-j`` (``failed``: its exception; the output was
    then made by one process) an internal error, exit 1."""
    status = run.finish_status(analyzer)
    if failed is None:
        return status
    print(f"amqp-dissect: internal error: -j {jobs}: {type(failed).__name__}: {failed} (a bug; the output "
          f"was made by one process and is complete)", file=sys.stderr)
    return EXIT_INTERNAL


def _parallel_ok(run: CaptureRun) -> bool:
    """Whether -j N can split this run: files read again by each process (not stdin, not -i)."""
    from amqp_dissect.pipelines.parallel import splittable

    return run.live is None and splittable(run.inputs)


def _table_command(table: str, rows_method: str, help_text: str):
    def command(
        captures: Captures = None,
        read: ReadFiles = None,
        fmt: TableFormatOption = TableFormat.table,
        output: TableOutput = None,
        columns: Columns = None,
        count: Count = None,
        port: Ports = None,
        keylog: KeyLogPath = None,
        iface: Interface = None,
        bpf: CaptureFilter = None,
        autostop: Autostop = None,
        write: WriteRaw = None,
        jobs: Jobs = 1,
    ):
        if fmt is TableFormat.parquet and output is None:
            raise Fail(EXIT_USAGE, "--format parquet needs --output FILE")
        if columns is not None and fmt is not TableFormat.table:
            raise Fail(EXIT_USAGE, "--columns applies to --format table (csv, jsonl and parquet have every column)")
        cols = pick_columns(table, columns) if fmt is TableFormat.table else None
        check_output(output)
        inputs = _inputs(captures, read, iface, bpf, count, autostop, write)
        from amqp_dissect.pipelines.write import STREAM_ROWS, lean_arrow, write_batches, write_table

        # the objects of the modules imported so far (pyarrow's are many) live as long as the
        # process: full collections, which the streamed deliveries make more frequent, skip them
        gc.freeze()
        run = CaptureRun(inputs, port or [], keylog=keylog, limit=count)
        failed = None
        if jobs > 1 and _parallel_ok(run) and not (table == "deliveries" and fmt is TableFormat.table):
            failed = _parallel_table(run, jobs, table, fmt, output, cols)  # (exits unless -j failed)
            run = CaptureRun(inputs, port or [], keylog=keylog, limit=count)
        if fmt is TableFormat.table:
            from amqp_dissect.results.tables import to_frame

            if table == "deliveries":
                stream = DeliveryStream(_Checked(run))
                rows = list(stream)
                analyzer = stream.analyzer
            else:
                analyzer = run.analyze(rows=False).analyzer
                rows = getattr(analyzer, rows_method)()
            from amqp_dissect.pipelines.write import raw_times

            rows = rows if isinstance(rows, list) else list(rows)
            text = text_table(to_frame(rows, table), table, cols, raw_times(rows, table))
            _write_text_output(text, output)
            raise typer.Exit(_status(run, analyzer, failed, jobs))
        # csv / jsonl / parquet need no pandas: keep pyarrow from loading it (time and memory)
        with _write_errors(output), lean_arrow():
            if table == "deliveries":  # streamed: batches of deliveries written once they are final
                stream = DeliveryStream(_Checked(run))
                write_batches(stream.batches(STREAM_ROWS), table, fmt.value, output)
                analyzer = stream.analyzer
            else:
                analyzer = run.analyze(rows=False).analyzer
                rows = getattr(analyzer, "iter_" + rows_method, None) or getattr(analyzer, rows_method)
                write_table(rows(), table, fmt.value, output)  # (iter_*: rows made as they are written)
        raise typer.Exit(_status(run, analyzer, failed, jobs))

    command.__doc__ = help_text
    app.command(name=table)(command)


def _parallel_table(run: CaptureRun, jobs: int, table: str, fmt: TableFormat, output, cols):
    """A table command with ``-j N`` (see amqp_dissect.pipelines.parallel): exits, or returns the
    exception -j met (a bug) before writing anything, for the command to run in one process."""
    from amqp_dissect.pipelines import parallel
    from amqp_dissect.pipelines.write import lean_arrow, write_batches, write_table

    if fmt is TableFormat.table:  # (deliveries: one process)
        from amqp_dissect.results.tables import to_frame

        try:
            with run._reading():
                rows, bugs = parallel.parallel_rows(run.source, jobs, table)
        except Fail:
            raise
        except Exception as e:
            return e
        from amqp_dissect.pipelines.write import raw_times

        rows = rows if isinstance(rows, list) else list(rows)
        _write_text_output(text_table(to_frame(rows, table), table, cols, raw_times(rows, table)), output)
        raise typer.Exit(run.finish_status(bugs))
    with _write_errors(output), lean_arrow():
        try:
            with run._reading():
                if table == "deliveries":
                    batches, bugs = parallel.parallel_deliveries(run.source, jobs)
                else:
                    rows, bugs = parallel.parallel_rows(run.source, jobs, table)
        except (Fail, OSError):
            raise
        except Exception as e:
            return e
        if table == "deliveries":
            write_batches(batches, table, fmt.value, output)
        else:
            write_table(rows, table, fmt.value, output)
    raise typer.Exit(run.finish_status(bugs))


@contextmanager
def _write_errors(output):
    """An OSError about ``output`` (or about no file) while writing a table there is a write
    failure (its user-facing message and exit status); a broken pipe is left to the caller."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        if output is not None and getattr(e, "filename", None) in (None, str(output), os.fspath(output)):
            raise write_failure(output, e) from None
        raise


def _write_text_output(text: str, output) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise write_failure(output, e) from None


_table_command("deliveries", "delivery_rows", "One row per delivery: outcome, settlement, latency.")
_table_command("links", "link_rows", "One row per link: peers, addresses, settle modes, outcomes, latency, stalls.")
_table_command("stalls", "stall_rows",
               "One row per credit / session-window / drain stall, idle periods included (idle).")
_table_command("connections", "connection_rows", "One row per connection: negotiation, open/close, counts.")
_table_command("sessions", "session_rows", "One row per session: channel mapping, windows, end.")
_table_command("transactions", "transaction_rows", "One row per transaction: declare, discharge, enlisted deliveries.")
_table_command("violations", "violation_rows", "Protocol violations found by the state layer.")
_table_command("errors", "error_rows", "Errors: close/end/detach errors and unsettled deliveries.")


_register_archive(app)
from .compare import register as _register_compare; _register_compare(app)  # noqa: E402,E702


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """Console-script entry: run typer, turn failures into one line and an exit code."""
    # a capture's analysis allocates millions of short-lived objects and keeps the open deliveries:
    # collect cycles less often, and never walk the modules loaded so far
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    # numpy (under pyarrow) starts OpenBLAS threads that spin on the other cores; nothing here
    # does linear algebra
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        rc = app(args=argv, standalone_mode=False, prog_name="amqp-dissect")
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
    sys.exit(main())


if __name__ == "__main__":
    entry()
