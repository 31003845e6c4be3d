"""Single-process analysis of capture files: the shell around the sans-IO core.

For notebooks::

    from amqp_dissect.pipelines.runs.local import read_analysis
    a = read_analysis("capture.pcap")          # or a list of files read as one continuous capture
    a.deliveries, a.links, a.stalls      # pandas DataFrames (columns and dtypes: amqp_dissect.results.schema)
    a.latency("address")                 # latency percentiles per link / address / connection
    a.report()                           # the JSON report of ``amqp-dissect report --format json``

This module opens files; ``dissector`` never does.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Iterator

from amqp_dissect.clock import CLOCK_STEP
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.times import NS, date
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.errors import CaptureError
from amqp_dissect.pipelines.capture_set import natural_key, set_gaps, set_holes

if TYPE_CHECKING:  # pandas / pyarrow are imported when a table is asked for, not by the report
    import pandas as pd
    import pyarrow as pa



STDIN = "-"  # the name that stands for standard input


def input_name(src) -> str:
    """How a capture input is named in messages: its path, ``-`` for standard input, or the
    ``name`` of a file object (``<stream>`` when it has none)."""
    if isinstance(src, (str, os.PathLike)):
        return os.fspath(src)
    name = getattr(src, "name", None)
    return name if isinstance(name, str) else "<stream>"


def _stdin():
    """Standard input as a binary stream whose ``read`` returns what a pipe has (``read1``): a
    live capture written to the pipe is read as it arrives, not a megabyte at a time."""
    import sys

    return _Read1(sys.stdin.buffer)


class _Read1:
    """A binary stream read with ``read1`` (short reads: the capture reader asks again)."""

    def __init__(self, f):
        self._f = f
        self.name = STDIN

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            return self._f.read()
        return self._f.read1(n)


_EXACT_KEPT = 4096  # records whose exact times CaptureSource keeps (exact_times)


class _Part:
    """One file of a capture set being merged (see :meth:`CaptureSource._merged`)."""

    __slots__ = ("src", "name", "pos", "stream", "f", "own", "reader", "records", "head", "exact", "first_ts",
                 "last_ts", "count", "done")

    def __init__(self, src, name: str, pos: int):
        self.src = src
        self.name = name
        self.pos = pos  # argument position
        self.stream = hasattr(src, "read") or os.fspath(src) == STDIN
        self.f = self.reader = self.records = self.head = self.exact = self.first_ts = self.last_ts = None
        self.count = 0  # records merged
        self.own = False
        self.done = False

    def open(self, source: "CaptureSource", dissector=None) -> None:
        """Open the file and its reader (``dissector``: hear of its key logs)."""
        self.f, self.own = source._open(self.src)
        try:
            reader = open_capture(self.f)
        except BaseException:
            self.close(source, counted=False)
            raise
        if dissector is not None:
            reader.on_secrets = dissector.add_secrets
        source.digits = max(source.digits, reader.digits())
        if source.exact_times and reader.digits() != 6:
            reader.exact = self.exact = collections.deque(maxlen=2)
            source.fine = True
        self.reader = reader
        self.records = iter(reader)

    def advance(self):
        """Its next record (kept as ``head``), or None at its end."""
        self.head = next(self.records, None)
        return self.head

    def position(self) -> int:
        try:
            return os.lseek(self.f.fileno(), 0, os.SEEK_CUR) if self.f is not None else 0
        except (OSError, AttributeError, ValueError):
            return 0

    def close(self, source: "CaptureSource", counted: bool = True) -> None:
        """Close it; ``counted``: it was read to its end (its bytes and damage go to ``source``)."""
        f, self.f = self.f, None
        reader, self.reader, self.records, self.exact = self.reader, None, None, None
        if counted and reader is not None and not self.done:
            self.done = True
            source.bytes += reader.bytes_read
            if reader.error is not None:
                source.errors.append((self.name, reader.error))
        if f is not None and self.own:
            if counted:
                try:
                    source._done += os.fstat(f.fileno()).st_size
                except (OSError, ValueError):
                    pass
            f.close()


class CaptureSource:
    """Feeds one or more captures, in order, through a Dissector as one capture.

    ``paths``: a path, an open binary file object (a pipe works: nothing seeks), ``"-"`` for
    standard input, or a list of these.  Packet numbers continue across files.  ``errors``
    collects, per file, the damage found while reading it (truncated tail, corrupt block);
    opening problems raise (``OSError``, :class:`~amqp_dissect.errors.CaptureError`).
    ``limit``: stop after that many packets (tshark ``-c``).

    After (or while) reading: ``packets`` records read, ``bytes`` capture bytes read
    (uncompressed, file headers included), ``first_ts`` / ``end_ts`` the times of the first and
    last records, ``prev_ts`` (with ``track_prev``) the time of the record before the one being
    fed (tshark's ``-t d``).
    """

    def __init__(self, paths, dissector: Dissector | None = None, ports: Iterable[int] = (), messages: bool = False,
                 keylog=None, tls_records: list | None = None, limit: int | None = None):
        single = isinstance(paths, (str, os.PathLike)) or hasattr(paths, "read")
        self.inputs = [paths] if single else list(paths)
        self.paths = [input_name(p) for p in self.inputs]
        # messages: reassemble message bodies of multi-frame deliveries (only frame output shows them)
        # keylog: a KeyLog (open_keylog) or key log text; pcapng Decryption Secrets Blocks add to it
        self.dissector = dissector or Dissector(extra_ports=ports, messages=messages, keylog=keylog,
                                                tls_records=tls_records)
        self.ports = tuple(ports)
        self.keylog = keylog
        self.errors: list[tuple[str, CaptureError]] = []
        self.packets = 0
        self.limit = limit
        self.bytes = 0
        self.first_ts = None
        self.prev_ts = None
        self.track_prev = False
        # a -j worker's FlowGate: each pcap file's reader drops other workers' records with it
        # (from its second record on; not with a limit, whose count is of records read)
        self.gate = None
        self.current = None  # the name of the input being read
        self._file = None  # the file being read (progress: its position)
        self._done = 0  # bytes of the files read before it
        self.last_ts = None  # time of the last record that made an event (drive, drive_chunks)
        # exact_times (set before reading): keep the recent records' times to the nanosecond
        # (exact_time) and their resolution, for tshark's -t at the capture's precision
        self.exact_times = False
        self.first_exact = None  # (ns, digits) of the first record, with exact_times
        self.fine = False  # with exact_times: an input's timestamps (its leading interfaces) are not in us
        self.digits = 6  # decimal digits of the finest time resolution of the inputs opened (6: µs, 9: ns)
        self._exact: list = []  # (packet-number offset, deque of (index, ns, digits)): the last two files
        # a capture set (several inputs): the file names in the order read (see _merged), and the
        # files being merged
        self.order: list | None = None
        self._parts: list = []
        self._set: list = []
        self._holes_before: dict = {}

    @property
    def end_ts(self):
        """Time of the last record read (None before any)."""
        return self.dissector.last_ts

    def _open(self, src):
        if hasattr(src, "read"):
            return src, False
        path = os.fspath(src)
        if path == STDIN:
            return _stdin(), False
        return open(path, "rb"), True

    def _readers(self):
        """(record iterator, packet-number offset) of each file in turn; a file's read damage is
        collected once its reader is done.  Several inputs are one capture set, read as one
        capture in time order (:meth:`_merged`): one iterator, numbered already (offset 0)."""
        if len(self.inputs) > 1:
            yield from self._merged()
            return
        d = self.dissector
        for src, name in zip(self.inputs, self.paths):
            if self.limit is not None and self.packets >= self.limit:
                break
            self.current = name
            f, own = self._open(src)
            self._file = f
            try:
                reader = open_capture(f)
                reader.on_secrets = d.add_secrets
                self.digits = max(self.digits, reader.digits())
                if self.exact_times and reader.digits() != 6:  # (a microsecond time is exact as a float)
                    reader.exact = collections.deque(maxlen=_EXACT_KEPT)
                    self._exact = self._exact[-1:] + [(self.packets, reader.exact)]
                    self.fine = True
                records = iter(reader)
                first = next(records, None)  # the capture's first time, before any event
                if first is not None:
                    if self.first_ts is None:
                        self.first_ts = first.ts
                        if reader.exact:
                            self.first_exact = reader.exact[0][1:]
                    if self.gate is not None and self.limit is None and not self.track_prev:
                        reader.set_gate(self.gate)  # (after the first record: it sets first_ts)
                    records = itertools.chain((first,), records)
                if self.limit is not None:
                    records = itertools.islice(records, max(0, self.limit - self.packets))
                if self.track_prev:
                    records = self._prev_tracked(records)
                yield records, self.packets
                self.bytes += reader.bytes_read
                if reader.error is not None:
                    self.errors.append((name, reader.error))
            finally:
                self._file = None
                if own:
                    self._done += os.fstat(f.fileno()).st_size
                    f.close()

    # -- capture sets --------------------------------------------------------------------

    def _merged(self):
        """The one record iterator of a capture set (as ``mergecap`` merges one): the files
        ordered by their first record's time (then by name, numbers in it by value, then by
        argument position: the same set in any order reads the same), and merged record by
        record where their times overlap (the earliest next record first; on equal times the
        file first in that order).  Packets are numbered in that merged order.

        Memory stays flat: each file is first opened for its first record only and closed
        again; it is opened for good when the merge reaches that record, and closed at its
        end, so files that follow one another (a rotated set) are read one at a time, and
        overlapping ones hold one record (and one read buffer) each.  A stream (``-``, a file
        object) cannot be opened twice: it stays open from its first record on."""
        parts = []
        try:
            for pos, (src, name) in enumerate(zip(self.inputs, self.paths)):
                part = _Part(src, name, pos)
                self.current = name
                part.open(self, self.dissector if part.stream else None)
                first = part.advance()
                if first is None:  # no record: nothing to merge; its damage (if any) is reported
                    part.close(self)
                    continue
                part.first_ts = first.ts
                if not part.stream:
                    part.close(self, counted=False)  # (opened again when the merge reaches it)
                    part.head = None
                parts.append(part)
        except BaseException:
            for part in parts:
                part.close(self, counted=False)
            raise
        parts.sort(key=lambda p: (p.first_ts, natural_key(p.name), p.pos))
        self.order = [p.name for p in parts] + [n for n in self.paths if n not in {p.name for p in parts}]
        self._parts = parts
        self._set = list(parts)  # (kept after reading: the set's gaps)
        # the files missing before a part (by the set's numbering): the dissector hears of them when
        # the merge reaches that part's first record
        self._holes_before = {id(after): (missing, before) for missing, before, after in set_holes(parts)}
        heap = [(p.first_ts, rank, p) for rank, p in enumerate(parts)]  # (already a heap: sorted)
        records = self._merge(heap)
        if self.limit is not None:
            records = itertools.islice(records, max(0, self.limit - self.packets))
        if self.track_prev:
            records = self._prev_tracked(records)
        try:
            yield records, 0
        finally:
            for part in parts:
                part.close(self, counted=False)
            self._parts = []

    def _merge(self, heap):
        """The records of the parts on ``heap`` ((next time, rank, part)), earliest first, numbered."""
        ring = None
        if self.exact_times:
            ring = collections.deque(maxlen=_EXACT_KEPT)
            self._exact = [(0, ring)]
        index = self.packets
        d = self.dissector
        while heap:
            _, rank, part = heap[0]
            if part.reader is None:  # its first record: open it for good
                self.current = part.name
                part.open(self, d)
                rec = part.advance()
                if rec is None:  # (it changed since: read what there is)
                    part.close(self)
                    heapq.heappop(heap)
                    continue
            else:
                rec = part.head
            index += 1
            rec.index = index
            if part.count == 0 and self._holes_before:
                hole = self._holes_before.get(id(part))
                if hole is not None and d is not None:
                    d.missing_files(hole[0], hole[1].last_ts, rec.ts, index)
            part.last_ts = rec.ts
            part.count += 1
            exact = part.exact
            if ring is not None and exact:
                ring.append((index,) + exact[-1][1:])
            if self.first_ts is None:
                self.first_ts = rec.ts
                if ring:
                    self.first_exact = ring[-1][1:]
            nxt = part.advance()
            if nxt is None:
                part.close(self)
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (nxt.ts, rank, part))
            yield rec

    def exact_time(self, packet) -> tuple[int, int] | None:
        """(time in nanoseconds, decimal digits of its resolution) of packet number ``packet``
        when ``exact_times`` kept it (the last few thousand records), else None."""
        if packet is None:
            return None
        for offset, ring in reversed(self._exact):
            local = packet - offset
            for i in range(len(ring) - 1, -1, -1):  # the newest first: the packet being fed
                index, ns, digits = ring[i]
                if index == local:
                    return ns, digits
                if index < local:
                    break
        return None

    def _prev_tracked(self, records):
        prev = self.dissector.last_ts  # the last record of the files before
        for record in records:
            self.prev_ts = prev
            prev = record.ts
            yield record

    def records(self) -> Iterator[object]:
        """The capture's records in the order read, numbered (a capture set's merged, see
        :meth:`_merged`), without dissecting them."""
        for reader, offset in self._readers():
            for record in reader:
                if offset:
                    record.index += offset
                self.packets += 1
                yield record

    def events(self) -> Iterator[tuple[object, object]]:
        """(record, event) pairs; record is None for the events of the final flush."""
        d = self.dissector
        for reader, offset in self._readers():
            for record in reader:
                if offset:
                    record.index += offset
                for ev in d.feed(record):
                    yield record, ev
                self.packets += 1
        for evs in d.finishing():  # (a connection at a time: issue 40)
            for ev in evs:
                yield None, ev

    def drive(self, sink) -> float | None:
        """The events of :meth:`events` handed to ``sink(event)`` one by one, without the pairs,
        by the dissector's own loop (:meth:`~amqp_dissect.dissect.Dissector.pump`).  Returns the
        time of the last record that made an event (None for none), the end :meth:`events` gives."""
        for _ in self.drive_chunks(sink):
            pass
        return self.last_ts

    def drive_chunks(self, sink, chunk: int = 0) -> Iterator[None]:
        """:meth:`drive`, pausing (a ``yield``) after every ``chunk`` records (0: after each file)
        and once more at the end, so a consumer can act between chunks (write a batch, say);
        :attr:`last_ts` is the end of the capture so far."""
        d = self.dissector
        self.last_ts = None
        for reader, offset in self._readers():
            while True:
                pumped = d.pump(reader, sink, offset, chunk)
                self.packets += pumped.records
                if pumped.last_ts is not None:
                    self.last_ts = pumped.last_ts
                yield
                if not chunk or pumped.records < chunk:
                    break
        for evs in d.finishing():  # (a connection at a time: issue 40)
            for ev in evs:
                sink(ev)
        yield

    def total_bytes(self) -> int | None:
        """Bytes of all the input files (None when one is a stream): the progress display's total."""
        total = 0
        for src in self.inputs:
            if hasattr(src, "read") or os.fspath(src) == STDIN:
                return None
            try:
                total += os.path.getsize(src)
            except OSError:
                return None
        return total

    def position(self) -> int:
        """Bytes of the input files read so far (the read-ahead of the file being read included)."""
        f = self._file
        pos = sum(p.position() for p in self._parts)
        if f is not None:
            try:
                pos = os.lseek(f.fileno(), 0, os.SEEK_CUR)
            except (OSError, AttributeError, ValueError):
                pos = 0
        return self._done + pos

    def capture_info(self) -> dict:
        """The capture as the report's header names it: inputs, first and last packet times,
        packets, bytes and duration (call after reading)."""
        start, end = self.first_ts, self.end_ts
        info = {
            "files": list(self.order if self.order is not None else self.paths),
            "start": start,
            "end": end,
            "duration": (end - start) / NS if start is not None and end is not None else None,
            "digits": self.digits,
            "packets": self.packets,
            "bytes": self.bytes,
        }
        clock = getattr(self, "clock_watch", None) or getattr(self.dissector, "clock", None)
        if clock is not None and clock.steps:  # the capture clock stepped back: its duration is unknown
            info["duration"] = None
            info["duration_unknown"] = CLOCK_STEP
            info["clock_steps"] = [s.as_dict() for s in clock.steps]
        if len(self.paths) > 1:  # a capture set: the order the files were read in
            info["order"] = "merged by time: files by their first packet's time, packets interleaved where they overlap"
            gaps = set_gaps(self._set, self.dissector.holes)
            if gaps:
                info["gaps"] = gaps
        d = self.dissector
        if getattr(d, "tls_unseen_count", 0):  # TLS on other ports, not decrypted: AMQP or not is unknown
            info["tls_not_decrypted"] = {"streams": d.tls_unseen_count, "first": [dict(x) for x in d.tls_unseen]}
        if getattr(d, "unread_tunnels", None):  # packets in tunnels the parser does not read
            from amqp_dissect.results.report import tunnels_not_read

            info["tunnels_not_read"] = tunnels_not_read([d.unread_tunnels])
        return info




def to_frame(rows, table: str) -> "pd.DataFrame":
    from amqp_dissect.results.tables import to_frame as _to_frame

    return _to_frame(rows, table)


class Analysis:
    """The results of one analysis, as DataFrames (columns and dtypes: the column registry,
    :mod:`amqp_dissect.results.schema`; times are ``datetime64[us, UTC]``).

    ``capture``: the inputs, first and last packet times, packets, bytes and duration.
    ``frames``: one row per frame (the ``frames`` table of the registry); kept when
    :func:`analyze` was asked for ``frames=True``, else read again from the capture files
    (a stream cannot be read twice)."""

    def __init__(self, analyzer: Analyzer, source: CaptureSource, frame_rows: list | None = None):
        self.analyzer = analyzer
        self.source = source
        self._frame_rows = frame_rows
        self.capture = source.capture_info() if hasattr(source, "capture_info") else None

    def __repr__(self) -> str:
        from amqp_dissect.results.report import lost_totals, summary_outcomes

        an = self.analyzer
        totals = an.delivery_totals()
        lost = lost_totals(an)  # (outcome unknown: not "none", not unsettled)
        outcomes = ", ".join([f"{k} {v}" for k, v in sorted(summary_outcomes(totals["outcomes"], lost).items()) if v]
                             + ([f"outcome unknown (lost in capture) {lost.unknown}"] if lost.unknown else []))
        cap = self.capture or {}
        files = cap.get("files") or []
        where = (files[0] if len(files) == 1 else f"{len(files)} files") if files else "a capture"
        span = ""
        if cap.get("start") is not None:
            span = f", {date(cap['start'], cap['digits'])} to {date(cap['end'], cap['digits'])} ({cap['duration']:.3f} s)"
        lines = [
            f"<Analysis of {where}: {cap.get('packets', '?')} packets{span}>",
            f"  connections {len(an.connection_rows())}, sessions {len(an.session_rows())}, "
            f"links {len(an.link_rows())}",
            f"  deliveries {totals['deliveries']}" + (f" ({outcomes})" if outcomes else "")
            + f", unsettled {totals['unsettled'] - lost[0]}",
            f"  stalls {len(an.stalls)}, violations {len(an.violation_rows())}, errors {len(an.error_rows())}"
            + (f", capture damaged ({len(self.source.errors)} file(s))" if self.source.errors else ""),
            "  tables: " + ", ".join(_table_names()) + ", frames; latency(by=...), report()",
        ]
        return "\n".join(lines)

    @cached_property
    def frames(self) -> pd.DataFrame:
        rows = self._frame_rows
        if rows is None:
            inputs = self.source.inputs
            if any(hasattr(i, "read") or os.fspath(i) == STDIN for i in inputs):
                raise ValueError("the frames of a stream cannot be read again: read_analysis(..., frames=True) keeps them")
            src = self.source
            again = CaptureSource(inputs, ports=src.ports, messages=True, keylog=src.keylog, limit=src.limit)
            rows = frame_rows(again.events())
        return to_frame(rows, "frames")

    @property
    def capture_errors(self) -> list[str]:
        return [f"{p}: {e}" for p, e in self.source.errors]

    @cached_property
    def connections(self) -> pd.DataFrame:
        return to_frame(self.analyzer.connection_rows(), "connections")

    @cached_property
    def sessions(self) -> pd.DataFrame:
        return to_frame(self.analyzer.session_rows(), "sessions")

    @cached_property
    def links(self) -> pd.DataFrame:
        return to_frame(self.analyzer.link_rows(), "links")

    @cached_property
    def deliveries(self) -> pd.DataFrame:
        return to_frame(self.analyzer.delivery_rows(), "deliveries")

    @cached_property
    def stalls(self) -> pd.DataFrame:
        return to_frame(self.analyzer.stall_rows(), "stalls")

    @cached_property
    def transactions(self) -> pd.DataFrame:
        return to_frame(self.analyzer.transaction_rows(), "transactions")

    @cached_property
    def violations(self) -> pd.DataFrame:
        return to_frame(self.analyzer.violation_rows(), "violations")

    @cached_property
    def errors(self) -> pd.DataFrame:
        return to_frame(self.analyzer.error_rows(), "errors")

    def latency(self, by: str = "link", metric: str = "settlement") -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.analyzer.latency_summary(by=by, metric=metric))

    def report(self) -> dict:
        from amqp_dissect.results.report import build_report

        return build_report(self.analyzer, capture_errors=self.capture_errors)


def frame_rows(events) -> list[dict]:
    """Rows of the ``frames`` table from (record, event) pairs."""
    from amqp_dissect.pipelines.archive.tables import frame_row
    from amqp_dissect.render.frames import event_json

    out = []
    for _, ev in events:
        d = event_json(ev)
        if d is not None:
            out.append(frame_row(d))
    return out


def read_messages(source) -> None:
    """The switch of the message fields, on the reading side: ``source``'s transfer frames keep
    their payloads (call it before reading), for an ``Analyzer(messages=True)`` to read the
    message of every delivery (the deliveries table's message columns, ``DeliveryRecord.message``)."""
    source.dissector.payloads = True


def watch_clock(an, source):
    """``an`` (an Analyzer) told of ``source``'s capture clock steps (its Dissector's watch), so a
    duration across a step is unknown; returns ``an``."""
    an.clock = getattr(getattr(source, "dissector", None), "clock", None)
    return an


def run_analysis(source: CaptureSource, on_event=None, rows: bool = True, delivery_sink=None,
                 analyzer_class=Analyzer, messages: bool = False) -> Analysis:
    """Feed every event of ``source`` to an Analyzer (and to ``on_event`` if given).

    ``rows``/``delivery_sink``: see :class:`~amqp_dissect.results.analytics.Analyzer` (``rows=False``
    keeps memory flat: the report needs only aggregates).  ``analyzer_class``: an Analyzer
    subclass to use (the HTML report's :class:`~amqp_dissect.results.series.SeriesAnalyzer`)."""
    if messages:
        read_messages(source)
        an = analyzer_class(rows=rows, delivery_sink=delivery_sink, messages=True)
    else:
        an = analyzer_class(rows=rows, delivery_sink=delivery_sink)
    watch_clock(an, source)
    last_ts = None
    if on_event is None and hasattr(source, "drive"):
        last_ts = source.drive(an.feed)
    else:
        for record, ev in source.events():
            an.feed(ev)
            if on_event is not None:
                on_event(record, ev)
            if record is not None:
                last_ts = record.ts
    an.finish(last_ts)
    return Analysis(an, source)


class DeliveryStream:
    """The deliveries table of a source, row by row as each delivery becomes final (folded),
    then the deliveries still open at the end: memory stays flat however long the capture.
    ``analyzer`` is the Analyzer that made the rows (once iteration has started)."""

    def __init__(self, source: CaptureSource, messages: bool = False):
        self.source = source
        self.analyzer: Analyzer | None = None
        # messages: the message columns are read (see read_messages)
        self.messages = messages
        if messages:
            read_messages(source)

    def __iter__(self) -> Iterator[dict]:
        ready: list = []
        an = self.analyzer = Analyzer(rows=False, delivery_sink=lambda row, key: ready.append(row),
                                      messages=self.messages)
        watch_clock(an, self.source)
        last_ts = None
        for record, ev in self.source.events():
            an.feed(ev)
            if record is not None:
                last_ts = record.ts
            if ready:
                yield from ready
                ready.clear()
        an.finish(last_ts)
        yield from ready
        for _, row in an.live_deliveries():
            yield row

    def batches(self, batch_rows: int = 8192, keep_connections: bool = True) -> Iterator["pa.RecordBatch"]:
        """The same table as Arrow record batches of ``batch_rows`` rows (the last one shorter),
        built column by column from the folded delivery objects: no row dict, and memory holds
        one batch of deliveries.  pyarrow is loaded when the first batch is made (at the end of
        the analysis when every delivery stays open till then, or there are none), not on top of
        the analysis' memory from its start.  ``keep_connections=False``: once the last batch is
        made, the Analyzer lets go of its connections (they have nothing more for this table), so
        what is written after the last batch (the file's end) has their memory; for a caller that
        reads only :attr:`analyzer`'s internal errors afterwards (the CLI's exit status)."""
        folded: list = []
        an = self.analyzer = Analyzer(rows=False, fold_out=folded, messages=self.messages, redeliveries=False)
        watch_clock(an, self.source)

        def batch(ds):  # the times and latencies are the capture's float timestamps: checked
            return _columns_batch("deliveries", *an.delivery_columns(ds), checked=True)

        src = self.source
        # the dissector's loop, a chunk of records at a time: small beside a batch, so what waits for
        # its batch stays about one batch of deliveries (a packet may carry several)
        for _ in src.drive_chunks(an.feed, max(16, batch_rows // 8)):
            while len(folded) >= batch_rows:
                yield batch(folded[:batch_rows])
                del folded[:batch_rows]
        an.finish(src.last_ts)
        # then the deliveries still open, a batch at a time (compacted ones read from their store's arrays)
        for cols in an.live_columns(batch_rows, folded):
            yield _columns_batch("deliveries", *cols, checked=True)
        if not keep_connections:
            an.connections.clear()


def _columns_batch(*args, **kw):
    """:func:`amqp_dissect.results.tables.columns_batch`, pyarrow loaded at its first call."""
    from amqp_dissect.results.tables import columns_batch

    return columns_batch(*args, **kw)


def read_analysis(paths, ports: Iterable[int] = (), keylog=None, frames: bool = False, limit: int | None = None,
            messages: bool = False) -> Analysis:
    """Analyse one capture, or several read in order as one continuous capture.

    ``paths``: a path, an open binary file object (``sys.stdin.buffer``, ``io.BytesIO``, a pipe:
    nothing seeks), ``"-"`` for standard input, or a list of these.  ``keylog``: a key log path
    or a KeyLog (``KeyLog.from_text(text)`` for text), to decrypt TLS streams (see
    :func:`~amqp_dissect.pipelines.keylogfile.open_keylog`).  ``frames``: keep a row per frame for
    :attr:`Analysis.frames` while reading (without it, ``frames`` reads the files again).
    ``limit``: read only that many packets.  ``messages``: read every delivery's message (the
    deliveries' message columns; null without it).

    Not the package's ``analyze``: the one public :func:`amqp_dissect.analyze` gives the tables
    as DataFrames (from Arrow batches, Arrow-backed strings, ``columns=``); this reads a capture
    into an :class:`Analysis` (``frames``, ``latency``) for the tests and notebooks that want it."""
    from amqp_dissect.pipelines.keylogfile import open_keylog

    source = CaptureSource(paths, ports=ports, keylog=open_keylog(keylog), messages=True if frames else False,
                           limit=limit)
    if not frames:
        return run_analysis(source, messages=messages)
    kept: list = []
    from amqp_dissect.render.frames import event_json
    from amqp_dissect.pipelines.archive.tables import frame_row

    def keep(record, ev):
        d = event_json(ev)
        if d is not None:
            kept.append(frame_row(d))
    a = run_analysis(source, on_event=keep, messages=messages)
    a._frame_rows = kept
    return a


def _table_names() -> tuple:
    """The tables' names (the registry's module, loaded here only: a command's run needs none of it)."""
    from amqp_dissect.results.schema import TABLES

    return TABLES
