"""What the local executors' Python worker daemon imports before it forks its workers
(:data:`PRELOAD`, :func:`preload`): run by the session's zygote (:mod:`.zygote`) while the JVM
starts, or by the daemon's launcher (:mod:`.daemon`) when there is no zygote.  A module of its own
so that neither of those two imports the other's module for it.

Then that process freezes its heap (:func:`freeze`) before it forks the daemon and the daemon its
workers: pyspark's daemon runs ``gc.collect()`` in a reused worker after every task, a full
collection that walked every object the preload made (about 85,000: pyarrow, pandas, pyspark,
the dissector), some 40 to 60 ms of a worker's CPU per task, and wrote to each of them (the
collector's own fields), copying the forked worker's shared pages one by one.  Frozen, those
objects are never looked at again by the collector (they live as long as the process anyway);
what a task allocates is collected as before.
"""

import gc
import importlib

# pandas too: no task uses it, but pyarrow imports it at a worker's first ``pa.array`` of a Python
# list (to ask whether the list is a pandas object), which every stage-1 task makes: without it in
# the preload, each Python worker paid pandas' import (about 0.3 to 0.45 CPU s) inside its first
# stage-1 task, on the job's critical path; imported once here, the workers are forked with it
# (and pyarrow.dataset, which pq.read_table uses: the stage-2 and tables tasks read Parquet files)
PRELOAD = ("pyspark.worker", "pyarrow", "pyarrow.parquet", "pyarrow.dataset", "pandas", "amqp_dissect.dissect",
           "amqp_dissect.results.analytics", "amqp_dissect.pipelines.archive", "amqp_dissect.pipelines.spark.stages",
           "amqp_dissect.pipelines.spark.summaries")


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # (a worker imports what it needs itself: nothing lost but the head start)
            pass
    try:
        # pyarrow's first pa.array of a Python list sets up its pandas shim (pyarrow.pandas_compat,
        # pandas' extension types), and the writers ask for pandas' version (their metadata):
        # done once here rather than in each worker's first task
        import pyarrow as pa

        pa.array([0])
        from amqp_dissect.results.tables import installed_pandas_version

        installed_pandas_version()
    except Exception:
        pass


def freeze() -> None:
    """Move every object this process holds now into the collector's permanent generation
    (``gc.freeze``), after a collection (what is garbage now is not kept): called by the
    process that forks the daemon and its workers, once its imports are done."""
    gc.collect()
    gc.freeze()
