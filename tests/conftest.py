import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (HERE, ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (local[2]), for every test that needs Spark."""
    from amqp_dissect.pipelines.spark import spark_session

    s = spark_session(master="local[2]", conf=[("spark.sql.shuffle.partitions", "4"),
                                               ("spark.default.parallelism", "4")])
    yield s
    s.stop()
