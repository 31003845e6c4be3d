"""The table commands (``deliveries``, ``links``, ``stalls``, ``connections``, ``sessions``,
``transactions``, ``violations``, ``errors``, ``requests``, ``messages``) and their one output writer, :class:`TableWriter`.

Without typer: cli/typer_app.py registers the commands of :data:`TABLE_COMMANDS`, :mod:`.quick` calls
them too.  The parameters' annotations name their declarations in cli/options.py (read by typer only).
"""

from __future__ import annotations

import gc
import os
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING

# (the rows' modules, pipelines.runs.local's DeliveryStream and pipelines.writers.tables, are
# imported by the table command that runs: registering the commands, on every run of every
# command, loads neither)
from .common import EXIT_USAGE, Fail, need_extra
from .habits import check_output, pick_columns, text_table_chunks, write_failure
from .inputs import CaptureInputs, capture_command
from .option_values import TableFormat
from .run import CaptureRun, Checked, ParallelAttempt, jobs_for, parallel_ok, run_status

if TYPE_CHECKING:  # (typer's declarations: evaluated by cli/options.py)
    from .options import Columns, Jobs, TableFormatOption, TableMessages, TableOutput

#: the table commands: (table, the Analyzer's method giving its rows, the command's help)
TABLES = (
    ("deliveries", "delivery_rows", "One row per delivery: outcome, settlement, latency."),
    ("links", "link_rows", "One row per link: peers, addresses, settle modes, outcomes, latency, stalls."),
    ("stalls", "stall_rows", "One row per credit / session-window / drain stall, idle periods included (idle)."),
    ("connections", "connection_rows", "One row per connection: negotiation, open/close, counts."),
    ("sessions", "session_rows", "One row per session: channel mapping, windows, end."),
    ("transactions", "transaction_rows", "One row per transaction: declare, discharge, enlisted deliveries."),
    ("violations", "violation_rows", "Protocol violations found by the state layer."),
    ("errors", "error_rows", "Errors: close/end/detach errors and unsettled deliveries."),
    ("requests", None, "One row per request: its reply, round trip, $management and $cbs operations."),
)


def arrow_ready() -> bool:
    """:func:`amqp_dissect.pipelines.writers.tables.arrow_ready` (its module loaded by the call)."""
    from amqp_dissect.pipelines.writers.tables import arrow_ready as ready

    return ready()


class TableWriter:
    """The output of a table command: ``--format``, ``--columns`` and ``-o`` checked before any
    work (one line and exit 2 or 3), then the rows written in that format: the text table (the
    chosen columns), or csv / jsonl / parquet (every column) streamed."""

    def __init__(self, table: str, fmt: TableFormat, output, columns: str | None, messages: bool = False):
        if fmt is TableFormat.parquet and output is None:
            raise Fail(EXIT_USAGE, "--format parquet needs --output FILE")
        if messages and table != "deliveries":
            raise Fail(EXIT_USAGE, f"--messages: the {table} table has no message columns (deliveries has)")
        self.table = table
        self.fmt = fmt
        self.parquet_command = f"{table} --format parquet"
        self.text = fmt is TableFormat.table
        # the text table: the default columns or --columns; csv / jsonl / parquet: every column, or
        # --columns (then written by _Projected)
        self.cols = pick_columns(table, columns) if self.text or columns is not None else None
        if fmt is TableFormat.parquet:  # (pyarrow: the parquet extra; one line and exit 6 without it)
            # found here, imported once the first rows are written (see writing)
            need_extra(self.parquet_command, "parquet", imported=False)
        check_output(output)
        self.output = output
        # the message columns are read when asked (--messages) or when --columns names one of them
        # (else they are null: reading them costs several times the analysis)
        from amqp_dissect.amqp.message import MESSAGE_COLUMNS

        self.messages = table == "deliveries" and (messages or (columns is not None and any(
            c in MESSAGE_COLUMNS for c in self.cols)))
        # csv / jsonl made by Arrow from record batches, when pyarrow and numpy are installed; else
        # (the light install) by the standard library from the rows; the text table: no Arrow
        self.arrow = not self.text and (fmt is TableFormat.parquet or arrow_ready())

    @contextmanager
    def writing(self):
        """Around the work whose rows are written (csv / jsonl / parquet are written as the rows
        come): pyarrow kept from loading pandas, which these formats do not need (time and
        memory), and a failure to write ``-o`` told as one (exit 3)."""
        if not self.arrow:
            with _write_errors(self.output) if not self.text else _nothing():
                yield
            return
        from amqp_dissect.pipelines.writers.tables import lean_arrow

        with _write_errors(self.output), lean_arrow(), self._broken_extra():
            yield

    @contextmanager
    def _broken_extra(self):
        """pyarrow found at the start (:class:`TableWriter`) but failing to import when the first
        rows are written: parquet's one line and exit 6, as if it were not installed."""
        try:
            yield
        except ImportError:
            if self.fmt is TableFormat.parquet:  # (imported for real: when it fails, its line and exit)
                need_extra(self.parquet_command, "parquet")
            raise

    def rows(self, rows) -> None:
        """Row dicts: a list, or an iterator (csv / jsonl / parquet: rows made as they are written)."""
        if not self.text and not self.arrow:
            from amqp_dissect.pipelines.writers.tables import write_rows

            write_rows(rows, self.table, self.fmt.value, self.output, self.cols)
            return
        if not self.text and self.cols is not None:
            _Projected(self).rows(rows)
            return
        if not self.text:
            from amqp_dissect.pipelines.writers.tables import write_table

            write_table(rows, self.table, self.fmt.value, self.output)
            return
        _write_text(text_table_chunks(rows, self.table, self.cols), self.output)

    def batches(self, batches) -> None:
        """Arrow record batches of the table (the deliveries: csv / jsonl / parquet)."""
        if self.cols is not None:
            _Projected(self).batches(batches)
            return
        from amqp_dissect.pipelines.writers.tables import write_batches

        write_batches(batches, self.table, self.fmt.value, self.output)


class _Projected:
    """``--columns`` with csv, jsonl or parquet: the chosen columns of the registry's, in the order
    given, each written as the whole table writes it (:func:`amqp_dissect.results.tables.csv_cells`,
    ``json_cells``, the registry's Arrow types); row dicts are converted ROW_DICTS at a time into
    batches of BATCH_ROWS rows (parquet's row groups), whose text (csv, jsonl) is made TEXT_ROWS
    rows at a time, as the whole table's is (pipelines.writers.tables)."""

    def __init__(self, out: TableWriter):
        from amqp_dissect.results.schema import columns

        self.table, self.fmt, self.output, self.cols = out.table, out.fmt, out.output, out.cols
        self.types = {c.name: c.type for c in columns(out.table)}

    def rows(self, rows) -> None:
        from amqp_dissect.pipelines.writers.tables import BATCH_ROWS, TEXT_ROWS, converted

        # (each part of ROW_DICTS rows cut to the chosen columns as it is made)
        size = BATCH_ROWS if self.fmt is TableFormat.parquet else TEXT_ROWS
        self._write(batch for batch, _ in converted(rows, self.table, size, [], cols=self.cols))

    def batches(self, batches) -> None:
        from amqp_dissect.pipelines.writers.tables import pulled

        batches = pulled(batches)  # (pyarrow loaded after the first batch is made)
        import pyarrow as pa

        from amqp_dissect.results.tables import arrow_schema

        full = arrow_schema(self.table)
        schema = pa.schema([full.field(c) for c in self.cols])  # (no pandas metadata: it lists every column)
        self._write(pa.RecordBatch.from_arrays([b.column(full.get_field_index(c)) for c in self.cols], schema=schema)
                    for b in batches)

    def _write(self, picked) -> None:
        """Batches of the chosen columns to the output."""
        from amqp_dissect.pipelines.writers.tables import BATCH_ROWS, TEXT_ROWS, pulled

        picked = pulled(picked)  # (pyarrow loaded after the first batch is made)
        import pyarrow as pa

        from amqp_dissect.results.tables import arrow_schema

        full = arrow_schema(self.table)
        schema = pa.schema([full.field(c) for c in self.cols])
        if self.fmt is TableFormat.parquet:
            import pyarrow.parquet as pq

            with pq.ParquetWriter(os.fspath(self.output), schema) as w:
                pending, n = [], 0
                for b in picked:
                    pending.append(b)
                    n += len(b)
                    if n >= BATCH_ROWS:
                        w.write_table(pa.Table.from_batches(pending, schema=schema))
                        pending, n = [], 0
                if n or not pending:
                    w.write_table(pa.Table.from_batches(pending, schema=schema))
            return
        sys.stdout.flush()
        f = open(self.output, "wb") if self.output is not None else sys.stdout.buffer
        try:
            if self.fmt is TableFormat.csv:
                f.write((",".join(self.cols) + "\n").encode())
            for b in picked:
                for at in range(0, len(b), TEXT_ROWS):
                    f.write(self._lines(b.slice(at, TEXT_ROWS)).encode("utf-8"))
        finally:
            if self.output is not None:
                f.close()
            else:
                f.flush()

    def _lines(self, b) -> str:
        import json

        import pyarrow as pa
        import pyarrow.compute as pc

        from amqp_dissect.results.tables import csv_cells, json_cells

        def lit(text):
            return pa.scalar(text, pa.large_string())
        if self.fmt is TableFormat.csv:
            memo: list = []
            parts = []
            for i, c in enumerate(self.cols):
                parts += [lit(",") if i else lit(""), csv_cells(b.column(i), self.types[c], memo)]
        else:
            enc = json.JSONEncoder(ensure_ascii=False).encode
            parts = []
            for i, c in enumerate(self.cols):
                parts += [lit(("{" if i == 0 else ", ") + enc(c) + ": "), json_cells(b.column(i), self.types[c])]
            parts.append(lit("}"))
        parts.append(lit("\n"))
        return "".join(pc.binary_join_element_wise(*parts, lit("")).to_pylist())


@contextmanager
def _nothing():
    yield


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


def _write_text(texts, output) -> None:
    """The texts (the text table's chunks, made as they are written) to stdout or ``-o``."""
    if output is None:
        for text in texts:
            sys.stdout.write(text)
            sys.stdout.flush()  # (the first rows at once: | head shows them while the rest is made)
        return
    try:
        f = open(output, "w", encoding="utf-8")
    except OSError as e:
        raise write_failure(output, e) from None
    with f:  # (an OSError of the work making the rows is not a write failure)
        for text in texts:
            try:
                f.write(text)
            except OSError as e:
                raise write_failure(output, e) from None


def _in_one_process(run: CaptureRun, out: TableWriter, rows_method: str):
    """The table of ``run`` made by this process and written by ``out``; returns the Analyzer (its
    internal errors make the exit status)."""
    with out.writing():
        if out.table == "requests":  # (the deliveries' message fields, matched once the capture is read)
            from amqp_dissect.pipelines.runs.requests import request_table

            rows, analyzer = request_table(Checked(run))
            out.rows(rows)
            return analyzer
        if out.table == "deliveries":  # row by row as each delivery becomes final
            from amqp_dissect.pipelines.runs.local import DeliveryStream
            from amqp_dissect.pipelines.writers.tables import STREAM_ROWS

            stream = DeliveryStream(Checked(run), messages=out.messages)
            if out.text or not out.arrow:
                out.rows(iter(stream))  # (streamed: the text table is written as the rows come)
            else:  # batches written once their deliveries are final
                out.batches(stream.batches(STREAM_ROWS, keep_connections=False))
            return stream.analyzer
        analyzer = run.analyze(rows=False).analyzer
        # (the capture is read: what the TCP layer keeps of its ended connections is not written)
        run.dissector.tcp.forget_ended()
        if out.table == "connections":  # each connection let go once its row is made
            out.rows(drained_connection_rows(analyzer))
            return analyzer
        # (made as they are written, where the Analyzer can: the text table streams them too)
        lazy = getattr(analyzer, "iter_" + rows_method, None)
        out.rows((lazy or getattr(analyzer, rows_method))())
        return analyzer


def drained_connection_rows(analyzer):
    """The connections table's rows, in the Analyzer's order, each connection taken out of
    ``analyzer.connections`` as its row is made: what a row group of them costs to write is not
    on top of the records of every connection (200,000 header-only connections: about 140 MB).
    For a caller that reads only the Analyzer's internal errors afterwards (the exit status).  A
    row reads only its own connection (its links' counts, its violations and errors by id)."""
    connections = analyzer.connections
    for cid in list(connections):
        yield analyzer.connection_row(connections.pop(cid))


def _in_parallel(run: CaptureRun, jobs: int, out: TableWriter) -> ParallelAttempt:
    """The table of ``run`` made by ``jobs`` processes (see amqp_dissect.pipelines.runs.parallel) and
    written by ``out``, with its exit status; or the exception -j met (a bug) before writing anything,
    for the command to run in one process."""
    from amqp_dissect.pipelines.runs import parallel

    with out.writing():
        try:
            with run._reading():
                if out.table == "deliveries":  # (not as a text table: that is made by one process)
                    made, bugs = parallel.parallel_deliveries(run.source, jobs, messages=out.messages)
                else:
                    made, bugs = parallel.parallel_rows(run.source, jobs, out.table)
        except (Fail, OSError):
            raise
        except Exception as e:
            return ParallelAttempt(failure=e)
        if out.table == "deliveries":
            out.batches(made)
        else:
            out.rows(made)
    return ParallelAttempt(status=run.finish_status(bugs))


def table_command(table: str, rows_method: str):
    """The command writing ``table`` (the Analyzer's ``rows_method`` gives its rows)."""

    @capture_command(after="columns")
    def command(
        inputs: CaptureInputs,
        fmt: TableFormatOption = TableFormat.table,
        output: TableOutput = None,
        columns: Columns = None,
        jobs: Jobs = 1,
        messages: TableMessages = False,
    ):
        inputs.check_format_letter(TableFormat)
        out = TableWriter(table, fmt, output, columns, messages)
        opened = inputs.open()
        # the objects of the modules imported so far live as long as the process: full
        # collections, which the streamed deliveries make more frequent, skip them (pyarrow is
        # loaded later, when the first rows are written: not on top of the analysis' memory)
        gc.freeze()
        run = inputs.run(opened)
        failed = None
        jobs = jobs_for(run, jobs)
        # (-j needs Arrow and numpy: without them, and for the deliveries as a text table, one process)
        if (jobs > 1 and parallel_ok(run) and arrow_ready() and not (table == "deliveries" and out.text)
                and table != "requests"):  # (requests pair messages across connections: one process)
            attempt = _in_parallel(run, jobs, out)
            if attempt.failure is None:
                return attempt.status
            failed = attempt.failure
            run = run.again()
        analyzer = _in_one_process(run, out, rows_method)
        return run_status(run, analyzer, failed, jobs)

    return command


def _table_commands() -> dict:
    """Each table's command (capture_command's function, its help as its doc), by the table's name."""
    commands = {}
    for table, rows_method, help_text in TABLES:
        command = table_command(table, rows_method)
        command.__doc__ = help_text
        commands[table] = command
    return commands


#: the table commands by name, as typer registers them (cli/typer_app.py) and :mod:`.quick` calls them
TABLE_COMMANDS = _table_commands()
