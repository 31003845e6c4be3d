"""The runners over files around the sans-IO core (``dissector``), one sub-package each by what
it is for: :mod:`.runs` (one process and ``-j`` workers), :mod:`.writers` (tables to files),
:mod:`.wireshark` (``compare``), :mod:`.archive` (capture sets, byte ranges, flows; no Spark),
:mod:`.spark` (the Spark archive job and its DataFrame API) and :mod:`.spark_runtime` (the Spark
session it runs in).  :mod:`.api` is the package's one façade (``amqp_dissect.analyze``) and
:mod:`.keylogfile` the TLS key log files every runner reads.
"""


ANALYSIS_GC = (20_000, 20, 20)  # the garbage collector's thresholds for an analysis (see analysis_gc)


def analysis_gc() -> None:
    """The garbage collector as an analysis wants it: an analysis allocates millions of
    short-lived objects and keeps the open deliveries, so cycles are collected less often, and
    what is loaded so far (modules, the process's start) is never walked again (``gc.freeze``).
    The CLI's processes and the Spark job's Python workers (once each) set it."""
    import gc

    gc.freeze()
    gc.set_threshold(*ANALYSIS_GC)
