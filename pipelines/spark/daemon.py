"""The Python daemon of the job's local executors (``spark.python.daemon.module``, set by
:func:`~amqp_dissect.pipelines.spark.spark_session` for a ``local`` master): it imports, once,
what every task imports (pyspark's worker and Arrow serializers, pyarrow, pandas, the dissector,
the analyzer, the archive stages), then runs pyspark's own daemon, which forks each Python
worker from it: a worker starts with those modules loaded (about 2.5 s of imports each on a busy
two-core machine) instead of importing them itself."""

import importlib

for _name in ("pyspark.worker", "pyarrow", "pyarrow.parquet", "amqp_dissect.dissect", "amqp_dissect.results.analytics", "amqp_dissect.pipelines.archive",
              "amqp_dissect.pipelines.spark.stages", "amqp_dissect.pipelines.spark.summaries"):
    try:
        importlib.import_module(_name)
    except Exception:  # (a worker imports what it needs itself: nothing lost but the head start)
        pass

from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    daemon.manager()
