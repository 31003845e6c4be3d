"""``amqp-dissect compare CAPTURE``: our frames cross-checked against Wireshark's (tshark through
pyshark), frame by frame (see :mod:`amqp_dissect.pipelines.wireshark.compare`)."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
import subprocess
import sys
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from amqp_dissect.errors import CaptureError

from .common import EXIT_FORMAT, EXIT_INTERNAL, EXIT_OK, EXIT_OPEN, EXIT_USAGE, Fail, load_keylog, need_extra
from .options import keylog_option, port_option

# (--port and --keylog of compare also go to tshark)
ComparePorts = Annotated[Optional[List[int]], port_option("also decode this TCP port as AMQP, here and in tshark "
                                                          "(repeatable)")]
CompareKeyLog = Annotated[Optional[Path], keylog_option("TLS key log (NSS format), given to tshark too")]

EXIT_DISAGREE = 1  # a disagreement no known Wireshark defect explains


def _short(v, n: int = 100) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 1] + "…"


def tshark_version() -> str:
    try:
        out = subprocess.run(["tshark", "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "tshark"
    m = re.search(r"\b(\d+\.\d+\.\d+)\b", out.splitlines()[0] if out else "")
    return f"tshark {m.group(1)}" if m else "tshark"


def render_compare(report, known: list, capture: str, tshark: str, quiet: bool = False) -> tuple[str, int]:
    """The text of ``compare`` for a :class:`~amqp_dissect.pipelines.wireshark.compare.Report`, and its exit code."""
    dis = report.disagreements
    lines = _counts(report, capture, tshark) + _not_compared(report)
    shown = report.unknown if quiet else dis
    if shown:
        lines.append("")
    for d in shown:
        lines += _disagreement(d)
    met: dict = {}  # known Wireshark defect -> disagreements it explains
    for d in dis:
        for k in d.known:
            met[k] = met.get(k, 0) + 1
    if met:
        lines += [""] + _defects(met, {e["id"]: e["why"] for e in known})
    lines.append("")
    result, rc = _result(report, met)
    lines.append(result)
    return "\n".join(lines) + "\n", rc


def _plural(n: int, word: str) -> str:
    return f"{word}{'s' if n != 1 else ''}"


def _counts(report, capture: str, tshark: str) -> list[str]:
    """The head: what was compared, what agrees, the disagreements known and not explained."""
    dis, unknown = report.disagreements, report.unknown
    frames_with = {(d.packet, d.index) for d in dis if d.path != "@frames"}
    frames_unknown = {(d.packet, d.index) for d in unknown if d.path != "@frames"}
    count_packets = [d for d in dis if d.path == "@frames"]
    return [
        f"compare {capture} against Wireshark ({tshark}, through pyshark)",
        f"frames: ours {report.ours_count}, Wireshark {report.ws_count}; {report.frames_compared} compared, "
        f"{report.frames_agreeing} agree in every value"
        + (f"; {len(count_packets)} packets with a different number of frames" if count_packets else ""),
        f"values: {report.values_compared} agree",
        f"disagreements: {len(dis)} in {len(frames_with)} frames: {len(dis) - len(unknown)} known Wireshark defects, "
        f"{len(unknown)} not explained ({len(frames_unknown)} frames)",
    ]


def _not_compared(report) -> list[str]:
    """The connections of other protocols and the AMQP over WebSocket, said as what was (not) compared."""
    lines = []
    others = getattr(report, "other_protocols", None)
    if others:
        n = sum(others.values())
        lines.append(f"not compared: {n} {_plural(n, 'connection')} of another protocol ("
                     + ", ".join(f"{k} {v}" for k, v in others.items())
                     + f"; amqp-dissect names them and does not decode them), "
                     f"{report.other_layers} AMQP layers Wireshark shows on them")
    unwrapped = getattr(report, "websocket_unwrapped", (0, 0))
    if unwrapped[0]:
        n = unwrapped[0]
        lines.append(f"AMQP over WebSocket: the AMQP stream of {n} WebSocket {_plural(n, 'connection')}, as we "
                     f"unwrapped it, given to tshark as plain TCP ({unwrapped[1]} AMQP layers; Wireshark 4.0 does "
                     "not decode AMQP inside WebSocket)")
    if getattr(report, "websocket_connections", 0):
        n = report.websocket_connections
        lines.append(f"not compared: {report.websocket_frames} AMQP frames on {n} WebSocket {_plural(n, 'connection')}"
                     " (Wireshark 4.0 does not decode AMQP inside WebSocket: it shows the WebSocket frames only)")
    return lines


def _disagreement(d) -> list[str]:
    where = f"packet {d.packet} #{d.index} {d.performative or ''}".rstrip()
    lines = [f"{where}: {d.path}: ours={_short(d.ours)} wireshark={_short(d.ws)}"]
    if d.known:
        lines.append(f"    known Wireshark defect: {', '.join(d.known)}")
    else:
        lines.append("    NOT EXPLAINED: a bug of amqp-dissect, or a Wireshark defect not known yet"
                     + (f" (Wireshark: {'; '.join(d.ws_errors)})" if d.ws_errors and d.path == "@errors" else ""))
    return lines


def _defects(met: dict, why: dict) -> list[str]:
    lines = ["Known Wireshark defects met:"]
    for k, n in met.items():
        lines.append(f"  {k} ({n} {_plural(n, 'disagreement')}):")
        lines.extend(textwrap.wrap(why.get(k, ""), 100, initial_indent="    ", subsequent_indent="    "))
    return lines


def _result(report, met: dict) -> tuple[str, int]:
    """The last line, and the exit code."""
    unknown = report.unknown
    if unknown:
        return (f"result: {len(unknown)} {_plural(len(unknown), 'disagreement')} not explained by a known "
                f"Wireshark defect (exit {EXIT_DISAGREE})"), EXIT_DISAGREE
    if report.disagreements:
        return (f"result: agrees with Wireshark apart from {len(met)} known Wireshark "
                f"{_plural(len(met), 'defect')} (exit 0)"), EXIT_OK
    if report.frames_compared:
        return "result: agrees with Wireshark on every frame (exit 0)", EXIT_OK
    if getattr(report, "websocket_frames", 0):
        return "result: no AMQP frame Wireshark decodes to compare (exit 0)", EXIT_OK
    return "result: no AMQP 1.0 frame to compare (exit 0)", EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        capture: Path = typer.Argument(..., help="pcap or pcapng file, optionally gzip-compressed"),
        port: ComparePorts = None,
        keylog: CompareKeyLog = None,
        quiet: bool = typer.Option(False, "--quiet", "-q", help="list only the disagreements not explained"),
    ):
        """Cross-check every AMQP frame against Wireshark (tshark through pyshark): kind, channel,
        performative, fields, message sections.  Exit 0 when only known Wireshark defects remain,
        1 when a disagreement is not explained."""
        need_extra("compare", "wireshark")  # (pyshark: the wireshark extra; one line and exit 6 without it)
        from amqp_dissect.pipelines.wireshark.compare import KNOWN, compare_capture

        if os.path.isdir(capture):
            raise Fail(EXIT_OPEN, f"{capture}: is a directory, not a capture file")
        if not os.path.exists(capture):
            raise Fail(EXIT_OPEN, f"{capture}: no such file")
        if keylog is not None and not os.path.isfile(keylog):
            raise Fail(EXIT_OPEN, f"{keylog}: cannot read the key log: no such file")
        if shutil.which("tshark") is None:
            raise Fail(EXIT_USAGE, "compare needs tshark (Wireshark's command line; apt-get install tshark)")
        secrets = load_keylog(keylog, notes=False) if keylog is not None else None  # (no $SSLKEYLOGFILE here)
        try:
            report = compare_capture(capture, ports=port or (), keylog_file=keylog, keylog=secrets)
        except CaptureError as e:
            raise Fail(EXIT_FORMAT, f"{capture}: {e}") from None
        except Exception as e:  # tshark failed (pyshark's TSharkCrashException): its last words
            if type(e).__name__ != "TSharkCrashException":
                raise
            last = [x for x in str(e).splitlines() if x.startswith("Last error line:")]
            raise Fail(EXIT_INTERNAL, "tshark failed on the capture" + (f": {last[0][16:].strip()}" if last else "")) from None
        except OSError as e:
            raise Fail(EXIT_OPEN, f"{capture}: cannot open: {e.strerror or e}") from None
        text, rc = render_compare(report, KNOWN, str(capture), tshark_version(), quiet=quiet)
        sys.stdout.write(text)
        raise typer.Exit(rc)
