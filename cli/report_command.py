"""The ``report`` command (connections, sessions, links, delivery outcomes, settlement latency,
stalls, errors: text, JSON or one HTML page), without typer: cli/typer_app.py registers it,
:mod:`.quick` calls it too.  The parameters' annotations name their declarations in cli/options.py
(read by typer only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqp_dissect.render.report import render_text

from .common import Fail, version_line
from .option_values import ReportFormat
from .inputs import CaptureInputs, capture_command, start_run
from .run import CaptureRun, ParallelAttempt, jobs_for, parallel_ok, run_status

if TYPE_CHECKING:  # (typer's declarations: evaluated by cli/options.py)
    from .options import Jobs, ReportFormatOption, ReportMessages, ReportOutput

@capture_command(after="output")
def report(
    inputs: CaptureInputs,
    fmt: ReportFormatOption = ReportFormat.text,
    output: ReportOutput = None,
    jobs: Jobs = 1,
    messages: ReportMessages = False,
):
    """Connections, sessions, links, delivery outcomes, settlement latency, stalls, errors.
    With -j N the HTML page is made by one process.  --messages: the requests and messages sections too."""
    from .report_html import analyze_for_report

    run = start_run(inputs, ReportFormat)
    failed = None
    jobs = 1 if fmt is ReportFormat.html else jobs_for(run, jobs)
    if jobs > 1 and parallel_ok(run):
        attempt = _report_in_parallel(run, jobs, fmt, output, messages)
        if attempt.failure is None:
            return attempt.status
        failed = attempt.failure
        run = run.again()
    html = fmt is ReportFormat.html  # (the page names the version; its line imports every compiled module)
    analysis, rep, page = analyze_for_report(run, html=html, version=version_line() if html else "",
                                             messages=messages)
    _write_report(output, fmt, rep, page)
    return run_status(run, analysis.analyzer, failed, jobs)


def _report_in_parallel(run: CaptureRun, jobs: int, fmt: ReportFormat, output, messages: bool = False) -> ParallelAttempt:
    """The text or JSON report made by ``jobs`` processes (amqp_dissect.pipelines.runs.parallel) and
    written, or the exception -j met."""
    from amqp_dissect.pipelines.runs.parallel import parallel_report

    try:
        with run._reading():
            rep, bugs = parallel_report(run.source, jobs, messages=messages)
    except Fail:
        raise
    except Exception as e:
        return ParallelAttempt(failure=e)
    _write_report(output, fmt, rep)
    return ParallelAttempt(status=run.finish_status(bugs))


def _write_report(output, fmt: ReportFormat, rep: dict, page: str | None = None) -> None:
    """The report document ``rep`` (or the HTML ``page`` made of it) to stdout or ``-o FILE``."""
    from .report_html import write_output

    if fmt is ReportFormat.json:
        import json

        text = json.dumps(rep, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"
    else:
        text = page if fmt is ReportFormat.html else render_text(rep)
    write_output(output, text)
