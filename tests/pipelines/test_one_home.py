"""One home per idea in the runners (issue 42): one public ``analyze``, the key log through one
entry (:func:`~amqp_dissect.pipelines.keylogfile.open_keylog`), the idle time-out's default
written once (:data:`amqp_dissect.capture.tcp.IDLE_TIMEOUT`)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import amqp_dissect.pipelines
from amqp_dissect.capture.keylog import KeyLog
from amqp_dissect.pipelines import keylogfile

PIPELINES = Path(amqp_dissect.pipelines.__path__[0])
ROOT = PIPELINES.parent
LINE = "CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n"


def _defined(name: str) -> list[str]:
    """Where a module-level function ``name`` is defined in the given folders."""
    found = []
    for folder in ("pipelines", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            found += [f"{path.relative_to(ROOT)}" for node in tree.body
                      if isinstance(node, ast.FunctionDef) and node.name == name]
    return found


def test_one_public_analyze():
    assert _defined("analyze") == ["pipelines/api.py"]


def test_the_key_log_has_one_entry():
    """No runner opens a key log file but through open_keylog (KeyLogFile.from_path is what it
    reads a path with; the tests of the file reader itself are in tests/capture)."""
    for folder in ("pipelines", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "keylogfile.py":
                continue
            text = path.read_text()
            assert "KeyLogFile" not in text and "as_keylog" not in text and "read_keylog" not in text, path
    assert [n for n in ("as_keylog", "read_keylog") if hasattr(keylogfile, n)] == []


def test_open_keylog_takes_every_form(tmp_path, monkeypatch):
    path = tmp_path / "keys.log"
    path.write_text(LINE)
    monkeypatch.setenv("SSLKEYLOGFILE", str(path))
    assert keylogfile.open_keylog(None) is None  # (the API: no key log unless given)
    from_env = keylogfile.open_keylog(None, environment=True)  # (the CLI and spark-submit)
    assert from_env is not None and from_env.text() == LINE
    for given in (path, str(path)):
        assert keylogfile.open_keylog(given).text() == LINE
    kept = KeyLog(LINE)
    assert keylogfile.open_keylog(kept) is kept
    with pytest.raises(TypeError):
        keylogfile.open_keylog(LINE)  # key log text, not a path
    with pytest.raises(TypeError):
        keylogfile.open_keylog(LINE.encode())
    with pytest.raises(OSError):
        keylogfile.open_keylog(tmp_path / "absent")


def test_a_key_log_file_named_like_a_label_is_a_path(tmp_path, monkeypatch):
    """A file whose name starts as a key log line does (``RSA...``) is still a file: the check
    for key log text given as a path asks the file system first."""
    monkeypatch.chdir(tmp_path)
    Path("RSA-keys.log").write_text(LINE)
    assert keylogfile.open_keylog("RSA-keys.log").text() == LINE


def test_idle_timeout_default_written_once():
    from amqp_dissect.capture.tcp import IDLE_TIMEOUT, TcpReassembler
    from amqp_dissect.dissect import Dissector
    from amqp_dissect.pipelines.archive import FlowParams
    from amqp_dissect.times import ns

    assert TcpReassembler().idle_timeout == ns(IDLE_TIMEOUT)  # (kept in nanoseconds)
    assert Dissector().tcp.idle_timeout == ns(IDLE_TIMEOUT)
    assert FlowParams.__dataclass_fields__["idle_timeout"].default == IDLE_TIMEOUT
    pytest.importorskip("pyspark")
    from amqp_dissect.pipelines.spark import read_captures, run_archive

    for fn in (read_captures, run_archive):
        assert inspect.signature(fn).parameters["idle_timeout"].default == IDLE_TIMEOUT
    # and no other module writes the number
    for folder in ("dissector", "pipelines", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "tcp.py":
                assert "900.0" not in path.read_text(), path
