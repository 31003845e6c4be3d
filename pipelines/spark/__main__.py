"""``spark-submit pipelines/spark/__main__.py PATH... --out DIR`` (or ``python -m
amqp_dissect.pipelines.spark``): the archive job with its arguments (:mod:`.submit`)."""

import os
import sys

if __package__ in (None, ""):  # spark-submit of this file: import the installed package, not its siblings
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # no top-level 'job', 'tables'...

from amqp_dissect.pipelines.spark.submit import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
