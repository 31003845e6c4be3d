"""``amqp_dissect.spark``: the Spark API under its short name, an alias of
:mod:`amqp_dissect.pipelines.spark` (pyproject.toml maps this folder to that name; it only
re-exports, so the objects are the same).  The core, ``amqp_dissect`` itself, never imports Spark.

    from amqp_dissect.spark import read_captures, spark_session
    tables = read_captures(spark_session(), ["captures/"])
    tables["deliveries"].groupBy("outcome").count().show()
"""

from amqp_dissect.pipelines.spark import *  # noqa: F401,F403
from amqp_dissect.pipelines.spark import __all__  # noqa: F401
