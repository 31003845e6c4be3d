"""The ``messages`` command: one row per message across connections (the messages table), with
``-Y`` on its columns.  Registered by cli/tables.py's ``register``."""

from __future__ import annotations

import gc
from typing import Annotated, Optional

import typer

from .common import EXIT_USAGE, Fail, filter_notes
from .inputs import CaptureInputs, capture_command
from .options import Columns, TableFormat, TableFormatOption, TableOutput
from .run import Checked, run_status

RowFilter = Annotated[Optional[str], typer.Option(
    "-Y", "--display-filter", help="show only the messages this filter matches, on the table's columns, e.g. "
                                   "'state == \"delivered twice\" or residence > 0.5'")]


@capture_command(after="display_filter")
def messages(
    inputs: CaptureInputs,
    fmt: TableFormatOption = TableFormat.table,
    output: TableOutput = None,
    columns: Columns = None,
    display_filter: RowFilter = None,
):
    """One row per message, matched across connections by message-id (or the bare message's digest):
    producer, consumers (fan-out), redeliveries, residence, end to end, state."""
    from amqp_dissect.filter import FilterError
    from amqp_dissect.results.row_filter import compile_row_filter

    from .tables import TableWriter

    inputs.check_format_letter(TableFormat)
    out = TableWriter("messages", fmt, output, columns)
    keep = None
    if display_filter is not None:
        try:
            keep = compile_row_filter(display_filter, "messages")
        except FilterError as e:
            raise Fail(EXIT_USAGE, e.one_line()) from None
        filter_notes("-Y", keep.notes)
    opened = inputs.open()
    import amqp_dissect.pipelines.writers.tables  # noqa: F401  (pyarrow: loaded before the freeze below)

    gc.freeze()
    run = inputs.run(opened)
    from amqp_dissect.pipelines.runs.messages import message_table

    with out.writing():
        rows, analyzer, _ = message_table(Checked(run))
        if keep is not None:
            rows = [r for r in rows if keep(r)]
        out.rows(rows)
    raise typer.Exit(run_status(run, analyzer, None, 1))
