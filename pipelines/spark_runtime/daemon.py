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

import os
import sys

from .preload import PRELOAD, freeze, preload  # noqa: F401 (PRELOAD: named here for the daemon's readers)


def main() -> None:
    from .zygote import ENV, hand_over

    path = os.environ.get(ENV)
    if path:
        code = hand_over(path)
        if code is not None:
            sys.exit(code)
    preload()
    from pyspark import daemon

    freeze()  # (the workers forked from here: see .preload)
    daemon.manager()


if __name__ == "__main__":
    main()
