"""The Python daemon of the job's local executors (``spark.python.daemon.module``, set by
:func:`~amqp_dissect.pipelines.spark.spark_session` for a ``local`` master).

pyspark's daemon forks every Python worker from itself, so what it imported before forking,
each worker has without importing it.  The modules every task imports (:data:`PRELOAD`: pyspark's
worker, pyarrow, pandas (which pyarrow imports), the dissector, the analyzer, the archive stages;
about 1.3 s on a two-core machine) are imported once, by one of two processes:

* the session's zygote (:mod:`.zygote`): a process :func:`spark_session` starts beside the JVM,
  which imports them while the JVM starts.  When the JVM runs this module (at the first Python
  task), it hands its stdin, stdout and stderr and its environment to the zygote, which forks
  the real daemon with everything imported already; this process stays as the JVM's handle on
  it (a SIGTERM is passed on; it exits with the daemon);
* this process itself, when there is no zygote (another master, or the zygote is gone): it
  imports them, then runs pyspark's daemon, as before.
"""

import importlib
import os
import sys

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
        from amqp_dissect.results.tables import _pandas_version

        _pandas_version()
    except Exception:
        pass


def main() -> None:
    from .zygote import ENV, hand_over

    path = os.environ.get(ENV)
    if path:
        code = hand_over(path)
        if code is not None:
            sys.exit(code)
    preload()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
