"""Archive analysis, the parts that need no Spark: inputs, byte ranges, per-flow runs, row schemas.

:mod:`amqp_dissect.pipelines.spark` wires these into Spark stages; everything here is plain
Python (files are opened here, never in ``dissector``), so it is tested
without a Spark session and runs unchanged inside executors.  One module per stage:
:mod:`.inputs` (files and byte ranges planned), :mod:`.ranges` (a range's records),
:mod:`.records` (stage-1 rows, records read again by offset), :mod:`.layout` (the driver's plan
from the range summaries), :mod:`.flows` (stage 2), :mod:`.tables` (output rows and ranges).
The flow, the idle-sweep clock and the output order are the sharding contract's
(:mod:`amqp_dissect.shard`), shared with ``-j``.

Stage 1 (:func:`.records.decode_range`), one task per file or byte range
    Opens the file itself, reads its records (pcap byte ranges start on a
    record boundary found by :func:`find_boundary`), runs
    ``netparse.parse_segment`` on each record and emits one row per TCP
    record ``(range id, index in range, ts, linktype, data, orig_len, flow
    key)`` plus one summary row per range (record count, first/last
    timestamp, offsets reached, damage).  The flow key is the unordered pair
    of endpoints, so every connection that ever used a 4-tuple (``#n``
    reuse included) lands in one flow.  Records of uncompressed pcap files
    travel as their offset in the file instead of their bytes: stage 2 reads
    them again (:class:`RecordReader`, which checks that the record there is
    still the one stage 1 read); gzip and pcapng records travel whole.
    Files whose times overlap are read again as one range per overlap group
    (:func:`layout`, :func:`group_ranges`): one task merges them record by
    record (:class:`MergeScan`); each row names its file.

Stage 2 (:class:`.flows.FlowRunner`), rows of one flow in global packet order
    A :class:`~amqp_dissect.dissect.Dissector` (TCP reassembly + AMQP framing
    routing) and an :class:`~amqp_dissect.results.analytics.Analyzer` for that flow
    alone, fed record by record; the few values that come from the rest of
    the capture (time and number of the last record, the end time the
    analyzer is finished with, the idle-sweep clock, the steps back of the capture's clock
    found from the ranges' summaries: :func:`clock_steps`) are passed in.

Only paths and byte offsets travel through the driver.
"""

from .checkpoint import CannotContinue, Checkpoint
from .flows import end_sensitive, FlowParams, FlowRunner, ROW_TABLES
from .inputs import CAPTURE_NAME, DEFAULT_SPLIT_SIZE, expand_inputs, InputError, plan_ranges, Range
from .layout import balance_flows, capture_ends, clock_steps, group_ranges, Layout, layout, range_bounds, set_gaps_of, set_key
from .ranges import CHAIN, find_boundary, MergeScan, pcap_header, RangeScan
from .records import (CaptureChanged, decode_range, fill_batches, FLOW_TOP, FLOW_TRACK, KIND_NOTE, KIND_SUMMARY,
                      KIND_TCP, RecordReader, STAGE1_COLUMNS)
from .tables import (archive_schema, arrow_schema, pandas_metadata, to_archive, batch_ipc, frame_row, ipc_batches, parquet_bytes, range_file, RANGE_FILE, ROW_GROUP_ROWS, rows_batch,
                     sorted_range, sorted_range_table, table_columns, write_range)
from amqp_dissect.shard import flow_name, sweep_ticks

__all__ = [
    'CannotContinue', 'Checkpoint',
    'archive_schema', 'arrow_schema', 'balance_flows', 'pandas_metadata', 'to_archive', 'batch_ipc', 'capture_ends', 'CAPTURE_NAME', 'clock_steps', 'CaptureChanged', 'CHAIN',
    'decode_range', 'DEFAULT_SPLIT_SIZE', 'end_sensitive', 'expand_inputs', 'fill_batches', 'find_boundary',
    'flow_name', 'FLOW_TOP', 'FLOW_TRACK', 'FlowParams', 'FlowRunner', 'frame_row', 'group_ranges',
    'InputError', 'ipc_batches', 'KIND_NOTE', 'KIND_SUMMARY', 'KIND_TCP', 'Layout', 'layout', 'MergeScan',
    'pcap_header', 'plan_ranges', 'Range', 'range_bounds', 'RANGE_FILE', 'RangeScan', 'RecordReader',
    'parquet_bytes', 'range_file', 'ROW_GROUP_ROWS', 'ROW_TABLES', 'rows_batch', 'set_gaps_of', 'set_key', 'sorted_range',
    'sorted_range_table', 'STAGE1_COLUMNS', 'sweep_ticks', 'table_columns', 'write_range',
]
