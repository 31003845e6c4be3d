"""The ``messages`` command: one row per message across connections (the messages table), with
``-Y`` on its columns.  Registered by cli/tables.py's ``register``."""

from __future__ import annotations

import gc
from typing import Annotated, Optional

import typer

from .common import EXIT_USAGE, Fail, filter_notes, load_keylog
from .options import (Autostop, CaptureFilter, Captures, Columns, Count, Interface, KeyLogPath, Ports, ReadFiles,
                      TableFormat, TableFormatOption, TableOutput, WriteRaw, check_format_letter)
from .run import CaptureRun, Checked, capture_or_live, run_status

RowFilter = Annotated[Optional[str], typer.Option(
    "-Y", "--display-filter", help="show only the messages this filter matches, on the table's columns, e.g. "
                                   "'state == \"delivered twice\" or residence > 0.5'")]


def messages(
    captures: Captures = None,
    read: ReadFiles = None,
    fmt: TableFormatOption = TableFormat.table,
    output: TableOutput = None,
    columns: Columns = None,
    display_filter: RowFilter = None,
    count: Count = None,
    port: Ports = None,
    keylog: KeyLogPath = None,
    iface: Interface = None,
    bpf: CaptureFilter = None,
    autostop: Autostop = None,
    write: WriteRaw = None,
):
    """One row per message, matched across connections by message-id (or the bare message's digest):
    producer, consumers (fan-out), redeliveries, residence, end to end, state."""
    from amqp_dissect.filter import FilterError
    from amqp_dissect.results.row_filter import compile_row_filter

    from .tables import TableWriter

    check_format_letter(bpf, TableFormat)
    out = TableWriter("messages", fmt, output, columns)
    keep = None
    if display_filter is not None:
        try:
            keep = compile_row_filter(display_filter, "messages")
        except FilterError as e:
            raise Fail(EXIT_USAGE, e.one_line()) from None
        filter_notes("-Y", keep.notes)
    inputs = capture_or_live(captures, read, iface, bpf, count, autostop, write)
    import amqp_dissect.pipelines.writers.tables  # noqa: F401  (pyarrow: loaded before the freeze below)

    gc.freeze()
    run = CaptureRun(inputs, port or [], keylog=load_keylog(keylog), limit=count)
    from amqp_dissect.pipelines.runs.messages import message_table

    with out.writing():
        rows, analyzer, _ = message_table(Checked(run))
        if keep is not None:
            rows = [r for r in rows if keep(r)]
        out.rows(rows)
    raise typer.Exit(run_status(run, analyzer, None, 1))
