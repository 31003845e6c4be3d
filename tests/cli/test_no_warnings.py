"""No Python warning text reaches the user (issue 40, item 3).

* The CLI runs as a process with warnings turned into errors (``-W error`` and
  ``PYTHONWARNINGS=error``) over a set of commands, output forms and filters: a warning anywhere in
  the run would end it in an internal error; every run ends in exit 0 and its stderr holds no
  warning text (only the notes asked for).
* A regular expression Python warns about (``[[:alpha:]]``: "possible nested set") is one note of
  the filter, in ``frames -Y`` and ``messages -Y``, and the filter still runs.
* A stray warning inside a command (none is known: one is made here) is one line on stderr, not
  Python's two lines with the source line.

Runs in the build the tests run in (``AMQP_DISSECT_PURE_PYTHON`` reaches the processes).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import pytest

from amqp_dissect.cli.main import EXIT_OK, main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
OUTCOMES = os.path.join(SAMPLES, "outcomes.pcap")
REQUEST_REPLY = os.path.join(SAMPLES, "messages", "request_reply.pcap")
TWIN = os.path.join(SAMPLES, "twins", "rhea_protonc.lossy.pcap.gz")

WARNING_TEXT = re.compile(r"Warning\b|warnings\.warn|\.py:\d+:|Traceback")
NESTED_SET = "[[:alpha:]]"  # (Python: FutureWarning: Possible nested set at position 1)


def run_cli(*args, tmp_path=None):
    env = dict(os.environ, PYTHONWARNINGS="error")
    proc = subprocess.run([sys.executable, "-W", "error", "-m", "amqp_dissect.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=tmp_path or ROOT, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


RUNS = [
    ("frames", OUTCOMES),
    ("frames", "-V", OUTCOMES),
    ("frames", "-T", "jsonl", TWIN),
    ("frames", "-T", "fields", "-e", "performative", "-e", "delivery-id", OUTCOMES),
    ("frames", "-Y", 'performative == "transfer" and delivery-id >= 1', OUTCOMES),
    ("frames", "-Y", 'name matches "^[a-z]"', OUTCOMES),
    ("report", TWIN),
    ("report", "-T", "json", "--messages", REQUEST_REPLY),
    ("report", "-T", "html", OUTCOMES),
    ("report", "-j", "2", TWIN),
    ("deliveries", "-T", "csv", TWIN),
    ("links", "-T", "jsonl", "-j", "2", TWIN),
    ("messages", "-Y", 'state matches "deliv"', REQUEST_REPLY),
]


@pytest.mark.parametrize("args", RUNS, ids=lambda a: " ".join(os.path.basename(x) for x in a))
def test_no_warning_text_under_warnings_as_errors(args):
    rc, out, err = run_cli(*args)
    assert rc == EXIT_OK, err
    assert out
    assert not WARNING_TEXT.search(err), err


def test_split_under_warnings_as_errors(tmp_path):
    rc, out, err = run_cli("split", TWIN, "--out", tmp_path, "--seconds", "1", "--gzip")
    assert rc == EXIT_OK and "files in" in out, err
    assert not WARNING_TEXT.search(err), err


@pytest.mark.parametrize("command,capture,column", [("frames", OUTCOMES, "name"),
                                                     ("messages", REQUEST_REPLY, "address")])
def test_a_regex_python_warns_about_is_one_note_of_the_filter(command, capture, column):
    flt = f'{column} matches "{NESTED_SET}" or {column} matches "{NESTED_SET}"'
    rc, out, err = run_cli(command, "-Y", flt, capture)
    assert rc == EXIT_OK, err
    assert not WARNING_TEXT.search(err), err
    lines = err.splitlines()
    assert len(lines) == 1, err  # (the same regex twice: one note)
    assert lines[0].startswith("amqp-dissect: -Y: note: the regular expression '[[:alpha:]]' may be read "
                               "differently by a future Python"), err


def test_the_note_comes_each_time_the_filter_is_compiled():
    # (re caches what it compiled: the second compile of a pattern must not lose the note)
    from amqp_dissect.filter import compile_filter

    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            flt = compile_filter(f'name matches "{NESTED_SET}"')
        assert len(flt.notes) == 1 and "future Python" in flt.notes[0]
    assert compile_filter('name matches "[a-z]"').notes == []


def test_a_stray_warning_in_a_command_is_one_line(capsys, monkeypatch):
    from amqp_dissect.cli import report_command

    real = report_command.render_text

    def warns(rep):
        warnings.warn("something a library said\nover two lines", DeprecationWarning, stacklevel=1)
        return real(rep)

    monkeypatch.setattr(report_command, "render_text", warns)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        rc = main(["report", OUTCOMES])
    out, err = capsys.readouterr()
    assert rc == EXIT_OK and out
    assert err.count("\n") == 1, err
    assert err.startswith("amqp-dissect: note: Python said (DeprecationWarning at test_no_warnings.py:"), err
    assert err.rstrip().endswith("something a library said over two lines"), err
