"""Spark batch jobs over capture archives (see issue: Spark batch analysis).

The jobs run the same sans-IO core as the CLI (``dissector``) inside Spark
executors; this package holds only the thin Spark shell around it.
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
