"""Spark batch analysis of capture archives, on the same sans-IO core as ``amqp_dissect.pipelines.runs.local``.

    from amqp_dissect.spark import read_captures    # (the short name of this package's API)
    tables = read_captures(spark, ["hdfs:///captures/"])   # name -> Spark DataFrame
    tables["deliveries"].where("outcome = 'rejected'").show()

    from amqp_dissect.pipelines.spark import spark_session, run_archive
    spark = spark_session()                       # local[*] unless master= / spark-submit says otherwise
    result = run_archive(spark, ["captures/"], "out/")   # parquet tables under out/
    result["counts"]["deliveries"]

or ``spark-submit pipelines/spark/__main__.py PATH... --out DIR`` (the project's code is
shipped to the executors as a zip), or ``amqp-dissect archive PATH... --out DIR``.

Modules: :mod:`.job` (the stages below, in order), :mod:`.stages` (what the tasks run),
:mod:`.tables` and :mod:`.summaries` (the outputs), :mod:`.api` (the DataFrame API),
:mod:`.submit` (spark-submit's arguments).  The runtime they run in is
:mod:`amqp_dissect.pipelines.spark_runtime`: the Spark session and the code shipped to executors,
the file systems, the local executors' Python workers (daemon, zygote, preload).
Stages (details
in :mod:`amqp_dissect.pipelines.archive`):

1. one task per file or pcap byte range: executors open the files, emit one
   row per TCP record (range id, index in range, time, raw record, flow key)
   and a summary per range; written to ``DIR/_work/seg`` (parquet).
2. driver: from the summaries only, check that the ranges of split files
   chain, order the files as ``CaptureSource`` orders a capture set (first
   record time, then name with its numbers by value), and prefix-sum the
   record counts into packet numbers.  Files whose times overlap form overlap
   groups: each is read again by one stage-1 task that merges its files record
   by record (``archive.MergeScan``) and numbers them in that order, as
   ``CaptureSource`` merges a set; the other files stay parallel.
3. rows of TCP records with their global packet number, ``repartition`` by
   flow key (unordered endpoint pair), ``sortWithinPartitions(flow, packet)``,
   ``mapInArrow``: a Dissector + Analyzer per flow, streaming over the sorted
   rows; rows of the result tables go to ``DIR/_work/rows`` (with a local
   work directory each task writes its files there itself, pyarrow).  With a
   local work directory and record rows small enough (pcap records travel as
   offsets) the stage-2 tasks read their flows' records from the stage-1
   files themselves and sort them (``stages.task_record_batches``): one Spark job of
   plain Python tasks, no shuffle, no JVM between the stages; stage 1, the
   sweep ticks, the tables and the summaries are such jobs too.
4. the few flows whose result depends on the rest of the capture (asked of the flows' facts:
   read by the driver from a local work directory, else by Spark jobs) are run
   again with the missing facts: flows idle longer than the idle timeout
   (the single-process reassembler expires them at its once-a-second sweep,
   which runs on any record: the sweep times are computed in one task from
   the records' times), and flows whose rows depend on the analyzer's end
   time (open stalls, idle-time-out checks) when that time (the last record
   that produced an event) differs from the time they were run with.
5. tables ``connections``, ``sessions``, ``links``, ``deliveries``, ``stalls``,
   ``transactions``, ``violations``, ``errors`` (and ``frames`` with ``frames=True``), each cut
   into ranges of its output order,
   and the summaries ``latency_by_link``, ``latency_by_address``,
   ``latency_by_window``, ``outcomes``, ``stalls_by_link``,
   ``stalls_by_address``.  With a local output directory Python tasks do both
   from the files (each range's task reads the stage-2 chunks it needs, small ranges
   share a task; the summaries' tasks, one per slot, read the written tables), one
   Spark job each; otherwise Spark
   moves the chunks to the range tasks, and the columns each summary reads to
   one task (:func:`summary_frame`); either way the tasks make the Parquet files
   (the CLI's schema and pandas metadata), and for a remote output the driver
   copies each through Hadoop's FileSystem (:func:`.fs.write_files`).  A summary
   is one function, :func:`summary_rows`.

Each step's Python tasks count their CPU seconds (``stats["cpu"]``, :class:`.stages.Meter`);
with ``AMQP_DISSECT_SPARK_PROFILE=DIR`` each task writes a cProfile file to DIR.
"""

# the names below are imported when first used (PEP 562), from this package's modules and from the
# session's runtime (..spark_runtime: the session, the file systems, the workers' daemon and zygote)
_LAZY = {
    'CaptureTables': '.api',
    'read_captures': '.api',
    'read_archive': '.api',
    'run_archive_dir': '.archive_dir',
    'check_output': '..spark_runtime.fs',
    'check_uri': '..spark_runtime.fs',
    'CONNECTORS': '..spark_runtime.fs',
    'resolve_inputs': '..spark_runtime.fs',
    'run_archive': '.job',
    'set_order': '.job',
    'table_frames': '.job',
    'TABLES': '.job',
    'executors_share_install': '..spark_runtime.session',
    'JVM_OPTIONS': '..spark_runtime.session',
    'ship_code': '..spark_runtime.session',
    'spark_session': '..spark_runtime.session',
    'stop_session': '..spark_runtime.session',
    'finish_spark_log': '..spark_runtime.session',
    'pa_batch': '.stages',
    'partition_keys': '.stages',
    'ROWS_FILE': '.stages',
    'rows_schema': '.stages',
    'SEG_FILE': '.stages',
    'stage1_schema': '.stages',
    'STAGE2_COLUMNS': '.stages',
    'table_schema': '.stages',
    'main': '.submit',
    'parse_size': '..spark_runtime.fs',
    'DEFAULT_WINDOW': '.summaries',
    'PERCENTILES': '.summaries',
    'SUMMARIES': '.summaries',
    'summaries_frames': '.summaries',
    'SUMMARY_COLUMNS': '.summaries',
    'summary_frame': '.summaries',
    'SUMMARY_READS': '.summaries',
    'summary_rows': '.summaries',
    'summary_schema': '.summaries',
    'summary_spark_schema': '.summaries',
    'write_summaries_local': '.summaries',
    'write_summary_file': '.summaries',
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    'CaptureTables', 'check_output', 'check_uri', 'CONNECTORS', 'read_archive', 'read_captures', 'resolve_inputs',
    'run_archive_dir', 'table_frames',
    'DEFAULT_WINDOW', 'executors_share_install', 'JVM_OPTIONS', 'main', 'pa_batch', 'parse_size',
    'partition_keys', 'PERCENTILES', 'ROWS_FILE', 'rows_schema', 'run_archive', 'SEG_FILE', 'set_order',
    'finish_spark_log', 'ship_code', 'spark_session', 'stage1_schema', 'stop_session', 'STAGE2_COLUMNS', 'SUMMARIES', 'summaries_frames',
    'SUMMARY_COLUMNS', 'summary_frame', 'SUMMARY_READS', 'summary_rows', 'summary_schema',
    'summary_spark_schema', 'table_schema', 'TABLES', 'write_summaries_local',
    'write_summary_file',
]
