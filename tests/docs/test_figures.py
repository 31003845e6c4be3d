"""The figures the pages of docs/ and the README give for the command line (exit codes, defaults,
the limits of ``-j 0``, the options of the spark-submit entry) are the code's (issue 42: "figures
in the docs generated or checked by a test").

Each figure is found in its page by a pattern (:data:`FIGURES`); the pattern must still find it
(a page rewritten without it fails here: drop the entry or say the figure again), and every
place it finds must say what the code defines.  The compiled-module count has its own test
(tests/docs/test_docs.py).
"""

from __future__ import annotations

import os
import re
from typing import Callable, NamedTuple

import pytest

from test_docs import ROOT

# the docs against the code's registries and sources: no hot module runs (CI's pure pass leaves them out)
pytestmark = pytest.mark.no_twin


class Figure(NamedTuple):
    """A figure of a page: ``pattern``'s groups give it, ``expected()`` what the code says."""
    page: str
    what: str
    pattern: str
    expected: Callable[[], tuple]


def _exits():
    from amqp_dissect.pipelines import exits

    return exits


def _options():
    from amqp_dissect.pipelines import options

    return options


def _exit_codes() -> tuple:
    e = _exits()
    return tuple(str(c) for c in (e.EXIT_OK, e.EXIT_INTERNAL, e.EXIT_USAGE, e.EXIT_OPEN, e.EXIT_FORMAT,
                                  e.EXIT_DAMAGED, e.EXIT_EXTRA))


def _jobs_limits() -> tuple:
    from amqp_dissect.cli.options import AUTO_JOBS_MAX, AUTO_JOBS_MIN_BYTES

    assert AUTO_JOBS_MIN_BYTES % (1 << 20) == 0
    return str(AUTO_JOBS_MAX), str(AUTO_JOBS_MIN_BYTES >> 20)


def _seconds(value: float) -> str:
    return f"{value:g}"


def _progress_after() -> str:
    from amqp_dissect.cli.progress import _AFTER  # (the module's own default, read here only)

    return _seconds(_AFTER)


def _archive_call_defaults() -> tuple:
    from amqp_dissect.capture.tcp import IDLE_TIMEOUT

    o = _options()
    return _seconds(o.DEFAULT_WINDOW), str(o.DEFAULT_SPLIT_SIZE >> 20), _seconds(IDLE_TIMEOUT)


def _input_exits() -> tuple:
    e = _exits()
    assert e.input_error_exit("missing") == e.input_error_exit("connector")
    return str(e.input_error_exit("missing")), str(e.input_error_exit("no capture")), str(e.EXIT_DAMAGED)


FIGURES = (
    Figure("docs/manual.md", "the exit status table: one row per exit code, in order",
           r"(?si)## exit status.*?\n((?:\| \d \|.*\n)+)", lambda: ("\n".join(_exit_codes()),)),
    Figure("README.md", "the exit codes line",
           r"(?s)(\d) success, (\d) internal error.*?(\d) usage error, (\d) cannot open a capture.*?(\d) not a "
           r"readable\s+capture, (\d) capture damaged", lambda: _exit_codes()[:6]),
    Figure("docs/manual.md", "-j 0: at most this many processes, for files of this many MiB or more",
           r"at\s+most (\d+): each process reads the whole capture\) when the capture's files hold\s+(\d+) MiB",
           _jobs_limits),
    Figure("docs/manual.md", "archive --master's default", r"The Spark master \(default `([^`]+)`\)",
           lambda: (_options().DEFAULT_MASTER,)),
    Figure("docs/manual.md", "archive --split-size's default", r"default (\w+); 0 never\) as byte ranges",
           lambda: (_options().size_text(_options().DEFAULT_SPLIT_SIZE),)),
    Figure("docs/manual.md", "archive --window's default", r"Seconds per row of `latency_by_window` \(default ([\d.]+)\)",
           lambda: (_seconds(_options().DEFAULT_WINDOW),)),
    Figure("docs/manual.md", "the progress display's wait", r"\*\*AMQP_DISSECT_PROGRESS_AFTER\*\*=\*s\*:\s+seconds "
           r"before the progress display shows \(default ([\d.]+)\)", lambda: (_progress_after(),)),
    Figure("docs/archives-spark.md", "--split-size's default", r"larger than `--split-size` \(default `(\w+)`",
           lambda: (_options().size_text(_options().DEFAULT_SPLIT_SIZE),)),
    Figure("docs/archives-spark.md", "read_captures' defaults",
           r"window=([\d.]+), split_size=(\d+) MiB, partitions=None, idle_timeout=([\d.]+)", _archive_call_defaults),
    Figure("docs/archives-spark.md", "the digested bytes a checkpoint keeps per message",
           r"`HELD_DIGEST_CAP` \((\d+) MiB\)", lambda: (str(_held_digest_cap() >> 20),)),
    Figure("docs/archives-spark.md", "the exit codes of archive's inputs",
           r"Exit codes as the other commands'.*?: (\d) for a path\s+that does not exist or a file system without its "
           r"connector, (\d) for no capture found; a damaged\s+file gives exit code (\d)", _input_exits),
)


def _held_digest_cap() -> int:
    from amqp_dissect.amqp.message import HELD_DIGEST_CAP

    return HELD_DIGEST_CAP


def _page(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def said(figure: Figure, text: str) -> list:
    """Every place of ``text`` where ``figure`` is said: its groups, the exit table's rows as the
    column of their codes."""
    found = []
    for m in re.finditer(figure.pattern, text):
        groups = m.groups()
        if figure.what.startswith("the exit status table"):
            groups = ("\n".join(re.findall(r"^\| (\d) \|", groups[0], re.MULTILINE)),)
        found.append(groups)
    return found


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.page}: {f.what}")
def test_each_figure_of_the_pages_is_the_codes(figure):
    found = said(figure, _page(figure.page))
    assert found, f"{figure.page} no longer says {figure.what} (or says it otherwise: update FIGURES)"
    want = figure.expected()
    assert [g for g in found if g != want] == [], f"{figure.page}: {figure.what} should say {want}"


def test_the_spark_submit_options_the_page_lists_are_the_entrys():
    """archives-spark.md lists the options of the spark-submit entry; the entry takes those, and
    spark-submit's own --master and --conf too (the page says they configure Spark)."""
    from amqp_dissect.pipelines.options import ARCHIVE_OPTIONS

    text = _page("docs/archives-spark.md")
    m = re.search(r"\(it takes the options ((?:`--[\w-]+`,?\s+)+)", text)
    assert m, "archives-spark.md no longer lists the spark-submit entry's options"
    listed = set(re.findall(r"`(--[\w-]+)`", m.group(1)))
    entry = {o.names[0] for o in ARCHIVE_OPTIONS if o.submit}
    assert listed | {"--master", "--conf"} == entry


def test_a_wrong_figure_is_found():
    """The check itself: a page that says another figure, or no longer says it, fails."""
    figure = next(f for f in FIGURES if f.what == "archive --window's default")
    assert said(figure, "Seconds per row of `latency_by_window` (default 60).") == [("60",)]
    assert said(figure, "Seconds per row of `latency_by_window` (default 30).") != [figure.expected()]
    assert said(figure, "Seconds per row of latency_by_window.") == []
    table = FIGURES[0]
    rows = "## Exit status\n\n| code | meaning |\n|---|---|\n| 0 | ok |\n| 2 | usage |\n\nmore\n"
    assert said(table, rows) == [("0\n2",)]
