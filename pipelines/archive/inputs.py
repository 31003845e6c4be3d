"""Archive inputs: the capture files of the paths given (:func:`expand_inputs`) and the byte
ranges they are read in (:func:`plan_ranges`; a :class:`Range` per file, or per part of a large
uncompressed pcap file)."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import Iterable

# DEFAULT_SPLIT_SIZE: uncompressed pcap files larger than this are split into ranges (declared with
# the archive job's options)
from amqp_dissect.pipelines.options import DEFAULT_SPLIT_SIZE  # noqa: F401  (also this module's name)

# file names picked up when a directory is given (tcpdump -C appends digits: x.pcap, x.pcap1, ...)
CAPTURE_NAME = re.compile(r"\.(pcap|pcapng|cap|dmp)\d*(\.gz)?$|\.gz$", re.IGNORECASE)


class InputError(Exception):
    """Bad input paths: ``code`` is "missing" (a path does not exist) or "empty" (no capture found)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- inputs


def expand_inputs(paths: Iterable[str]) -> list[str]:
    """Files named by ``paths``: files as given, directories searched recursively for
    capture names (:data:`CAPTURE_NAME`), globs (``*``, ``?``, ``[``, ``**``) expanded.
    Duplicates (same real path) are dropped.  Raises :class:`InputError`."""
    out: list[str] = []
    seen: set[str] = set()

    def add(p: str) -> None:
        rp = os.path.realpath(p)
        if rp not in seen:
            seen.add(rp)
            out.append(os.path.abspath(p))

    def walk(d: str) -> None:
        for root, dirs, files in os.walk(d, followlinks=True):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and CAPTURE_NAME.search(name):
                    add(os.path.join(root, name))

    for p in paths:
        p = os.fspath(p)
        if any(ch in p for ch in "*?["):
            hits = sorted(glob.glob(p, recursive=True))
            if not hits:
                raise InputError("missing", f"{p}: no file matches")
            for h in hits:
                if os.path.isdir(h):
                    walk(h)
                else:
                    add(h)
        elif os.path.isdir(p):
            walk(p)
        elif os.path.exists(p):
            if not os.access(p, os.R_OK):
                raise InputError("missing", f"{p}: cannot open: permission denied")
            add(p)
        else:
            raise InputError("missing", f"{p}: no such file or directory")
    if not out:
        raise InputError("empty", "no capture files found in " + ", ".join(os.fspath(p) for p in paths))
    return out


@dataclass(frozen=True)
class Range:
    """A unit of stage-1 work: a whole file (``end`` None) or the records whose header
    starts in ``[start, end)`` of an uncompressed pcap."""

    rid: int
    file: int  # index in the expanded file list
    path: str
    part: int  # 0-based range number in the file
    start: int
    end: int | None
    size: int
    # an overlap group (see group_ranges): JSON [[file, path, first time], ...] of the files read
    # merged, in the set's order ("" for a file or a byte range of one)
    group: str = ""

    def as_tuple(self) -> tuple:
        return (self.rid, self.file, self.path, self.part, self.start, self.end, self.size, self.group)


def plan_ranges(files: list[str], split_size: int = DEFAULT_SPLIT_SIZE, first_rid: int = 0,
                whole: Iterable[int] = ()) -> list[Range]:
    """Ranges for ``files``: files larger than ``split_size`` whose name does not end in
    ``.gz`` are cut into ``split_size`` byte ranges (a range task that finds gzip or
    pcapng content processes the whole file in part 0 and nothing in the others);
    files whose index is in ``whole`` are never cut."""
    whole = set(whole)
    out: list[Range] = []
    rid = first_rid
    for i, path in enumerate(files):
        size = os.path.getsize(path)
        if split_size > 0 and size > split_size and i not in whole and not path.lower().endswith(".gz"):
            n = -(-size // split_size)
            for part in range(n):
                start = part * split_size
                end = min(size, start + split_size)
                out.append(Range(rid, i, path, part, start, end if part < n - 1 else None, size))
                rid += 1
        else:
            out.append(Range(rid, i, path, 0, 0, None, size))
            rid += 1
    return out
