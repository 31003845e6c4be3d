"""The files of a numbered capture set (``tcpdump -C`` / ``-W``, ``editcap -c``, ``split``): their order
by name (numbers by value) and the holes between them.  Used by the single-process runs
(:mod:`amqp_dissect.pipelines.runs.local`) and by the archive's layout
(:mod:`amqp_dissect.pipelines.archive.layout`), so neither imports the other."""

from __future__ import annotations

import os
import re
from typing import NamedTuple


def natural_key(name: str) -> list:
    """A sort key of a file name with its numbers by value (``cap.pcap2`` before ``cap.pcap10``)."""
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


class SetHole(NamedTuple):
    """Files missing from a numbered capture set (:func:`set_holes`)."""

    missing: list  # their names (a long run: the first, "... (N more)", the last)
    before: object  # the :class:`_Part` before the hole
    after: object  # the :class:`_Part` after it


def set_holes(parts) -> list[SetHole]:
    """The files missing from a numbered capture set (``tcpdump -C`` / ``-W``: ``cap.pcap``,
    ``cap.pcap1``, ...; ``editcap -c``: ``x_00000_<time>.pcap``, ...; ``split``: ``NAME_00000.pcap``):
    among the files of a folder whose names differ only in their numbers, the first number that
    differs is the file's place in the set, and a number missing between two files of the set
    is a hole (:class:`SetHole`: the missing names, the file before, the file after), from the
    names alone (known before reading).  ``tcpdump -G`` names (strftime times) have no numbering
    to miss: a hole there is not told.  With a stream in the set (``-``) no hole is told: the
    stream may hold what the names miss."""
    if any(part.stream for part in parts):
        return []
    holes = []
    for (folder, _skel), members in _numbered_groups(parts).items():
        holes += _group_holes(folder, members)
    return holes


def _numbered_groups(parts) -> dict:
    """The files of each folder whose names differ only in their numbers: (folder, the name's
    parts between numbers) -> [(the name split at its numbers, the part), ...]."""
    groups: dict = {}
    for part in parts:
        if part.stream or part.first_ts is None:
            continue
        folder, base = os.path.split(part.name)
        tokens = re.split(r"(\d+)", base)
        groups.setdefault((folder, tuple(tokens[0::2])), []).append((tokens, part))
    # tcpdump -C: the first file has no number ("cap.pcap" beside "cap.pcap1"): it is number 0
    for (folder, skel), members in list(groups.items()):
        if len(skel) == 1:
            numbered = groups.get((folder, (skel[0], "")))
            if numbered is not None:
                del groups[(folder, skel)]
                numbered += [([skel[0], "0", ""], part) for _, part in members]
    return {key: members for key, members in groups.items() if len(members) >= 2 and len(key[1]) >= 2}


def _group_holes(folder: str, members: list) -> list[SetHole]:
    """The holes of one numbered group: the first number that differs between its files is their
    place in the set."""
    numbers = [[int(x) for x in tokens[1::2]] for tokens, _ in members]
    k = next((i for i in range(len(numbers[0])) if len({n[i] for n in numbers}) > 1), None)
    if k is None:
        return []
    placed = sorted(((n[k], tokens, part) for n, (tokens, part) in zip(numbers, members)), key=lambda x: x[0])
    # the other numbers that differ between the files (editcap's times): unknown in a missing name
    vary = {i for i in range(len(numbers[0])) if i != k and len({n[i] for n in numbers}) > 1}
    holes = []
    for (a, ta, before), (b, _tb, after) in zip(placed, placed[1:]):
        if b - a < 2:
            continue
        missing = [_missing_name(folder, ta, k, vary, i) for i in range(a + 1, b)]
        if len(missing) > 3:
            missing = [missing[0], f"... ({len(missing) - 2} more)", missing[-1]]
        holes.append(SetHole(missing, before, after))
    return holes


def _missing_name(folder: str, tokens: list, k: int, vary: set, i: int) -> str:
    """The name of file number ``i`` of a set, from a neighbour's name split at its numbers
    (``k``: the number that places a file; ``vary``: numbers unknown in a missing name, "*")."""
    digits = tokens[2 * k + 1]
    width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0  # (zero-padded numbers)
    t = list(tokens)
    t[2 * k + 1] = str(i).zfill(width)
    for j in vary:
        t[2 * j + 1] = "*"
    if i == 0 and len(t) == 3 and t[2] == "" and not width:  # (tcpdump's first file: no number)
        return os.path.join(folder, t[0])
    return os.path.join(folder, "".join(t))


def set_gaps(parts, holes: list | None = None) -> list[dict]:
    """The holes of a numbered capture set (:func:`set_holes`) once read: ``{"missing": [names],
    "after": file, "before": file, "from": last time of the one, "to": first time of the
    other}``.  The packets of that time are not in the set: the TCP gaps of the connections then
    are this gap, not loss on the wire.  ``parts``: the :class:`_Part` of the files read, each
    with a record.  ``holes``: the dissector's (``Dissector.holes``, whose ``connections`` are
    added: connection id -> [gaps, bytes] from the client, then from the server)."""
    gaps = []
    for missing, before, after in set_holes(parts):
        g = {"missing": missing, "after": before.name, "before": after.name, "from": before.last_ts,
             "to": after.first_ts}
        for h in holes or ():
            if h["missing"] == missing:
                g["connections"] = {cid: list(v) for cid, v in h["connections"].items()}
        gaps.append(g)
    gaps.sort(key=lambda g: (g["from"] is None, g["from"] or 0.0, g["after"]))
    return gaps
