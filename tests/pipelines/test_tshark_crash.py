"""A tshark that dies under pyshark (exit 255, or an exit status asyncio's child watcher lost) is
run again by the Wireshark cross-check, and leaves nothing on the user's screen: no
"Exception ignored in Capture.__del__" traceback when pyshark's capture object is collected, and
no asyncio "Unknown child process pid" warning.  pyshark's own Capture class is used, with a
tshark process that is already dead when it is closed."""
from __future__ import annotations

import gc
import logging
import sys

import pyshark
import pytest
from pyshark.capture.capture import Capture, TSharkCrashException

from amqp_dissect.pipelines.wireshark import pdml


class DeadTshark(Capture):
    """pyshark's Capture with one tshark process that crashed: pyshark's close raises."""
    made = 0

    def __init__(self, *args, **kwargs):
        super().__init__()
        DeadTshark.made += 1
        self._running_processes.add(object())

    def __iter__(self):
        logging.getLogger("asyncio").warning("Unknown child process pid %d, will report returncode 255", 4242)
        return iter(())

    async def _cleanup_subprocess(self, process):
        raise TSharkCrashException("TShark (pid 4242) seems to have crashed (retcode: 255).")


def test_a_dead_tshark_is_retried_and_leaves_no_traceback(monkeypatch, capsys, caplog, tmp_path):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    monkeypatch.setattr(pyshark, "FileCapture", DeadTshark)
    DeadTshark.made = 0
    with pytest.raises(TSharkCrashException):
        pdml.wireshark_frames(tmp_path / "none.pcap", attempts=3)
    gc.collect()
    assert DeadTshark.made == 3  # run again, up to the attempts
    assert unraisable == []  # pyshark's __del__ found nothing left to close
    assert not [r for r in caplog.records if "Unknown child process" in r.getMessage()]
    err = capsys.readouterr().err
    assert "Traceback" not in err
