"""The archive driver's plan, from the range summaries only: the files in capture-set order
and their packet numbers (:func:`layout`), overlap groups read again merged
(:func:`group_ranges`), the capture's ends (:func:`capture_ends`), the steps of its clock
(:func:`clock_steps`), the flows spread over the
stage-2 tasks (:func:`balance_flows`) and the tables' output ranges (:func:`range_bounds`)."""

from __future__ import annotations

import heapq
import json
import os
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from amqp_dissect.pipelines.capture_set import natural_key, set_gaps

from .inputs import Range


# --------------------------------------------------------------------------- driver-side planning


@dataclass
class Layout:
    """File order and packet numbering decided from the range summaries."""

    order: list[str]  # files in capture order
    offsets: dict[int, int]  # rid -> packets before its first record (global index = offset + idx + 1)
    valid: set[int]  # rids whose records are part of the capture
    redo: list[int]  # file indices whose ranges disagree: to be read again as one range
    errors: list[tuple[str, str]]  # (path, damage) in capture order, like CaptureSource.errors
    fatal: list[tuple[str, str]]  # (kind "open"/"format", message)
    records: int
    last_ts: int | None  # time of the last record of the capture (nanoseconds)
    ranges_used: int
    rejected: int  # false boundary candidates seen
    tcp_records: int
    packet_errors: int
    unsupported: dict
    # files whose times overlap, not read merged yet: [[(file, first time), ...], ...] in the set's
    # order (group_ranges reads each group as one range); while any is left, offsets number them
    # one after the other, which is not the capture's numbering
    groups: list = None
    merged: list = None  # [[file, ...], ...]: the overlap groups read merged (group summaries)
    spans: list = None  # [(path, first time, last time), ...] of the files with records, in capture order


def set_key(path: str, first, position: int) -> tuple:
    """A file's place in a capture set, as the single-process reader orders one: files with
    records by their first record's time, then by name (its numbers by value), then by
    position; files without records last."""
    return (first is None, first if first is not None else 0, natural_key(path), position)


def layout(files: list[str], summaries: list[dict]) -> Layout:
    """Order the files as one capture and number the records like
    :class:`amqp_dissect.pipelines.runs.local.CaptureSource` reads a set: files by their first
    record's time (:func:`set_key`), records merged where files overlap in time.

    Files that follow one another (each file's latest time at or before the next one's first
    time: a rotated set) are concatenated, their ranges numbered by prefix sums.  A run of
    files whose times overlap (a file's first time before the latest time of the files
    before it) is an overlap group: its packet numbers need a merged read, so it is listed in
    ``groups`` until a group summary (:class:`MergeScan`, range made by
    :func:`group_ranges`) stands for its files.

    The ranges of a split file must chain: the offset where range k stopped (the
    first header at or after its end, found by walking records from its own
    first record) must be the first record offset found by the next non-empty
    range; otherwise the file is listed in ``redo``.  After a range reports
    damage, later ranges of that file are not part of the capture (a sequential
    reader stops there too).
    """
    by_file, merged_sums = _by_file(summaries)
    plan = _plan_files(by_file, {f for g in merged_sums for f in g["group"]})
    units = _units(files, plan, merged_sums)
    pending = _pending(_overlap_groups(units, plan.times), plan.times)
    count = _Count()
    listing = _Listing()
    for unit in units:
        for s in plan.ranges[unit.item] if unit.kind == "file" else [unit.item]:
            count.add(s)
        listing.add(files, plan, unit)
    return Layout(listing.order, count.offsets, plan.valid, plan.redo, listing.errors, plan.fatal, count.total,
                  count.last_ts, len(plan.valid), plan.rejected, count.tcp, count.packet_errors,
                  count.unsupported, pending, listing.merged, listing.spans)


def _by_file(summaries: list[dict]) -> tuple[dict[int, list[dict]], list[dict]]:
    """The range summaries by file index, and the overlap groups' summaries (read merged)."""
    by_file: dict[int, list[dict]] = {}
    merged_sums: list[dict] = []
    for s in summaries:
        if s.get("group"):
            merged_sums.append(s)
        else:
            by_file.setdefault(s["file"], []).append(s)
    return by_file, merged_sums


def _chained(ss: list[dict]) -> list[dict] | None:
    """The ranges of a file (sorted by part) whose records are the file's: a whole file's one
    range; of a split file, the ranges that chain (each starts where the one before stopped), up
    to the first that reports damage.  None when they do not chain: the file is read again."""
    first = ss[0]
    if first["whole"] or len(ss) == 1:
        return [first]
    used = []
    expect = None  # offset the previous range stopped at
    for s in ss:
        if s.get("open_error") or s.get("format_error"):
            return None
        if s["first_offset"] is None:
            if s["part"] == 0:
                expect = s["end_offset"]  # a file without any complete record
                if s["error"]:
                    used.append(s)
                    break
                continue
            stop = s["end"] if s["end"] is not None else s["size"]
            if expect is None or expect < stop:
                return None  # the previous range stopped inside this one, which found no record
            continue
        if expect is not None and s["first_offset"] != expect:
            return None
        used.append(s)
        if s["error"]:
            break
        expect = s["end_offset"]
    return used


class FileTimes(NamedTuple):
    """The times of a file's records (nanoseconds; None without records)."""

    first: int | None  # its first record's
    last: int | None  # its last record's
    top: int | None  # the latest of any of its records (a file need not be in time order)


def _file_times(used: list[dict]) -> FileTimes:
    counted = [s for s in used if s["count"]]
    tops = [s["max_ts"] if s.get("max_ts") is not None else s["last_ts"] for s in counted]
    return FileTimes(counted[0]["first_ts"] if counted else None, counted[-1]["last_ts"] if counted else None,
                     max(tops) if tops else None)


@dataclass
class _FilePlan:
    """What the range summaries say of each file read by ranges."""

    valid: set = field(default_factory=set)  # rids whose records are part of the capture
    redo: list = field(default_factory=list)  # file indices whose ranges do not chain
    fatal: list = field(default_factory=list)  # (kind "open"/"format", message)
    errors: dict = field(default_factory=dict)  # file index -> its first damage
    times: dict = field(default_factory=dict)  # file index -> FileTimes
    ranges: dict = field(default_factory=dict)  # file index -> its ranges used, in order
    rejected: int = 0  # false boundary candidates seen

    def add_file(self, fi: int, used: list[dict]) -> None:
        self.ranges[fi] = used
        for s in used:
            self.valid.add(s["rid"])
            if s["error"] and fi not in self.errors:
                self.errors[fi] = s["error"]
        self.times[fi] = _file_times(used)


def _plan_files(by_file: dict[int, list[dict]], in_group: set) -> _FilePlan:
    plan = _FilePlan()
    for fi, ss in by_file.items():
        if fi in in_group:
            continue  # read merged: its group's summary stands for it
        ss.sort(key=lambda s: s["part"])
        plan.rejected += sum(s.get("rejected", 0) for s in ss)
        first = ss[0]
        if "open_error" in first or "format_error" in first:
            plan.fatal.append(("open" if "open_error" in first else "format",
                               first.get("open_error") or first.get("format_error")))
            continue
        used = _chained(ss)
        if used is None:
            plan.redo.append(fi)
        else:
            plan.add_file(fi, used)
    return plan


class Unit(NamedTuple):
    """A unit of the capture's order: a file read by ranges (``item`` its index) or an overlap
    group read merged (``item`` its summary)."""

    key: tuple  # set_key
    kind: str  # "file" or "group"
    item: object


def _units(files: list[str], plan: _FilePlan, merged_sums: list[dict]) -> list[Unit]:
    """The units in capture order (the groups' summaries that could not be read: ``plan.fatal``)."""
    units = [Unit(set_key(files[fi], plan.times[fi].first, fi), "file", fi) for fi in plan.ranges]
    for g in merged_sums:
        if g.get("open_error") or g.get("format_error"):
            plan.fatal.append(("open" if g.get("open_error") else "format", g.get("open_error") or g.get("format_error")))
            continue
        plan.valid.add(g["rid"])
        head = g["group"][0]
        units.append(Unit(set_key(files[head], g["first_ts"], head), "group", g))
    units.sort(key=lambda u: u.key)
    return units


def _overlap_groups(units: list[Unit], times: dict) -> list[list[Unit]]:
    """Runs of units each starting before the latest time of those before it (a record at that
    very time comes after theirs in the merge too: concatenation is exact)."""
    groups: list = []
    run: list = []
    run_max = None
    for unit in units:
        if unit.key[0]:
            break  # files without records: last, in no group
        u = unit.item
        first, top = (times[u].first, times[u].top) if unit.kind == "file" else (u["first_ts"], u["max_ts"])
        if run and run_max is not None and first < run_max:
            run.append(unit)
        else:
            if len(run) > 1:
                groups.append(run)
            run = [unit]
            run_max = None
        if top is not None and (run_max is None or top > run_max):
            run_max = top
    if len(run) > 1:
        groups.append(run)
    return groups


def _pending(groups: list[list[Unit]], times: dict) -> list:
    """:attr:`Layout.groups`: each overlap group's files with their first times."""
    pending = []
    for run in groups:
        members = []
        for unit in run:
            if unit.kind == "file":
                members.append((unit.item, times[unit.item].first))
            else:  # (a group read merged overlapping another file: not expected; read it again with it)
                members += [(fi, first) for fi, first, _last, _n in unit.item["members"]]
        pending.append(members)
    return pending


@dataclass
class _Count:
    """The records numbered range by range in capture order, and the counts the summaries add."""

    offsets: dict = field(default_factory=dict)  # rid -> packets before its first record
    total: int = 0
    last_ts: int | None = None
    tcp: int = 0
    packet_errors: int = 0
    unsupported: dict = field(default_factory=dict)

    def add(self, s: dict) -> None:
        self.offsets[s["rid"]] = self.total
        self.total += s["count"]
        if s["count"]:
            self.last_ts = s["last_ts"]
        self.tcp += s.get("tcp", 0)
        self.packet_errors += s.get("packet_errors", 0)
        for k, v in (s.get("unsupported") or {}).items():
            self.unsupported[k] = self.unsupported.get(k, 0) + v


@dataclass
class _Listing:
    """The files in capture order, their spans, their damage and the groups read merged."""

    order: list = field(default_factory=list)
    spans: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    merged: list = field(default_factory=list)

    def add(self, files: list[str], plan: _FilePlan, unit: Unit) -> None:
        u = unit.item
        if unit.kind == "file":
            self.order.append(files[u])
            if plan.times[u].first is not None:
                self.spans.append((files[u], plan.times[u].first, plan.times[u].last))
            if u in plan.errors:
                self.errors.append((files[u], plan.errors[u]))
            return
        self.merged.append(list(u["group"]))
        for fi, first, last, n in u["members"]:
            self.order.append(files[fi])
            if n:
                self.spans.append((files[fi], first, last))
        self.errors += [(files[fi], err) for fi, err in u.get("errors") or ()]


def group_ranges(files: list[str], groups: list, first_rid: int) -> list[Range]:
    """One :class:`Range` per overlap group of :attr:`Layout.groups`: its files read whole and
    merged record by record by one task (:class:`MergeScan`)."""
    out = []
    for i, members in enumerate(groups):
        head = members[0][0]
        size = sum(os.path.getsize(files[fi]) for fi, _ in members)
        out.append(Range(first_rid + i, head, files[head], 0, 0, None, size,
                         json.dumps([[fi, files[fi], first] for fi, first in members])))
    return out


def clock_steps(summaries: list[dict], offsets: dict[int, int], watch=None, prev: int | None = None) -> list:
    """The steps back of the capture's clock (:class:`~amqp_dissect.clock.ClockStep` each), as the
    single-process reader's watch finds them over every record: the ranges' kept records
    (their summaries' ``clock``) replayed to one :class:`~amqp_dissect.clock.ClockWatch` in the
    capture's order (``offsets``: :attr:`Layout.offsets`, the ranges in the capture only).
    ``watch``: a watch over the records before these to go on with (an earlier run's, given
    back fed; ``prev``: the time of the last of those records)."""
    from amqp_dissect.clock import ClockWatch

    if watch is None:
        watch = ClockWatch()
    for s in sorted((s for s in summaries if s["rid"] in offsets and s.get("count")),
                    key=lambda s: offsets[s["rid"]]):
        off = offsets[s["rid"]] + 1
        watch.replay([(off + idx, ts, before) for idx, ts, before in s.get("clock") or ()], prev)
        prev = s["last_ts"]
    return watch.steps


def set_gaps_of(spans: list) -> list[dict]:
    """The files missing from a numbered capture set (:func:`amqp_dissect.pipelines.capture_set.set_gaps`),
    from :attr:`Layout.spans`."""
    from types import SimpleNamespace

    return set_gaps([SimpleNamespace(stream=False, name=p, first_ts=a, last_ts=b) for p, a, b in spans])


def capture_ends(summaries: list[dict], offsets: dict[int, int]) -> tuple[int, tuple | None]:
    """From the summaries of the ranges in the capture (``offsets``: :attr:`Layout.offsets`):
    the packet number of the last TCP record (0 without any), and ``(packet, time)`` of
    the last record outside the flows that produces an event (a record the parser
    rejected, or the first record of each unsupported link type), or None."""
    last_tcp = 0
    note = None
    unsupported: dict[str, tuple] = {}
    for s in summaries:
        off = offsets.get(s["rid"])
        if off is None:
            continue
        if s.get("last_tcp") is not None:
            last_tcp = max(last_tcp, off + s["last_tcp"] + 1)
        if s.get("last_error"):
            idx, ts = s["last_error"]
            if note is None or off + idx + 1 > note[0]:
                note = (off + idx + 1, ts)
        for lt, (idx, ts) in (s.get("first_unsupported") or {}).items():
            if lt not in unsupported or off + idx + 1 < unsupported[lt][0]:
                unsupported[lt] = (off + idx + 1, ts)
    for cand in unsupported.values():
        if note is None or cand[0] > note[0]:
            note = cand
    return last_tcp, note


def balance_flows(summaries: list[dict], offsets: dict[int, int], parts: int, total: int,
                  top: int = 4096) -> dict[str, int]:
    """Stage-2 task (0 .. parts-1) of the largest flows, so that the tasks get about the same
    number of TCP records: the flows the range summaries count (``flows``; at most ``top``,
    largest first) go one by one to the least loaded task (longest processing time
    first); the ``total`` records minus theirs (flows no summary counts, hashed over
    the tasks by Spark) are taken as spread evenly.  Hash partitioning alone can put
    several large flows in one task, and the job waits for its slowest task."""
    sizes: dict[str, int] = {}
    for s in summaries:
        if s["rid"] not in offsets:
            continue
        for flow, n in s.get("flows") or ():
            sizes[flow] = sizes.get(flow, 0) + n
    known = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    rest = max(0, total - sum(n for _, n in known))
    loads = [(rest / parts, i) for i in range(parts)]
    heapq.heapify(loads)
    out = {}
    for flow, n in known:
        load, i = heapq.heappop(loads)
        out[flow] = i
        heapq.heappush(loads, (load + n, i))
    return out


def range_bounds(chunks: Iterable[tuple[tuple, int]], parts: int) -> list[tuple]:
    """Boundaries that cut rows sorted by key into at most ``parts`` ranges of about the same
    number of rows, from ``(smallest key, rows)`` of the chunks that hold them (each chunk's
    rows counted at its smallest key).  A row goes to range ``bisect_right(bounds, key)``;
    the result is sorted and without repeats (fewer ranges when keys repeat)."""
    chunks = sorted(chunks)
    total = sum(n for _, n in chunks)
    if parts <= 1 or total == 0:
        return []
    bounds: list[tuple] = []
    acc = 0
    k = 1
    for key, n in chunks:
        if acc >= total * k / parts and key > (bounds[-1] if bounds else chunks[0][0]):
            bounds.append(key)
            while k < parts and acc >= total * k / parts:
                k += 1
            if len(bounds) >= parts - 1:
                break
        acc += n
    return bounds
