"""``amqp-dissect report``: the analysis behind its three formats, and writing the result to
stdout or ``-o FILE`` (the HTML page: :mod:`amqp_dissect.render.html`)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from amqp_dissect.results.report import build_report

from .common import EXIT_OPEN, Fail


def analyze_for_report(run, html: bool = False, version: str = "", messages: bool = False):
    """(analysis, report document, HTML page or None) of a CaptureRun.  The HTML page needs the
    time series only a SeriesAnalyzer keeps; text and JSON use the plain Analyzer (no cost).
    ``messages``: the messages are read too, for the requests and messages sections
    (``rep["requests"]``, ``rep["messages"]``)."""
    def analyzed(analyzer_class=None):
        if not messages:
            return run.analyze(rows=False, **({"analyzer_class": analyzer_class} if analyzer_class else {})), None, None
        from amqp_dissect.pipelines.runs.messages import analyze_for_sections

        from .run import Checked

        return analyze_for_sections(Checked(run), analyzer_class)

    if not html:
        analysis, requests, matcher = analyzed()
        rep = build_report(analysis.analyzer, capture_errors=analysis.capture_errors,
                           capture=run.source.capture_info())
        if requests is not None:
            from amqp_dissect.pipelines.runs.messages import add_messages_section

            rep["requests"] = requests.section()
            add_messages_section(rep, analysis.analyzer, matcher)
        return analysis, rep, None
    from amqp_dissect.render.html import render_html
    from amqp_dissect.results.plots import plot_data
    from amqp_dissect.results.series import SeriesAnalyzer

    analysis, requests, matcher = analyzed(SeriesAnalyzer)
    info = run.source.capture_info()
    rep = build_report(analysis.analyzer, capture_errors=analysis.capture_errors, capture=info)
    if requests is not None:
        from amqp_dissect.pipelines.runs.messages import add_messages_section

        rep["requests"] = requests.section()
        add_messages_section(rep, analysis.analyzer, matcher)
    names = [str(x) for x in info["files"]] or [str(run.path)]
    page = render_html(rep, plot_data(analysis.analyzer),
                       title=f"AMQP 1.0 report: {', '.join(os.path.basename(x) for x in names)}",
                       source=", ".join(names), version=version)
    return analysis, rep, page


@contextmanager
def _writing(path: Path):
    try:
        yield
    except IsADirectoryError:
        raise Fail(EXIT_OPEN, f"{path}: is a directory") from None
    except OSError as e:
        raise Fail(EXIT_OPEN, f"{path}: cannot write: {e.strerror or e}") from None


def write_output(path: Path | None, text: str) -> None:
    """``text`` to stdout, or to the file ``path`` (a failure is one line and exit 3)."""
    if path is None:
        sys.stdout.write(text)
        return
    with _writing(path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
