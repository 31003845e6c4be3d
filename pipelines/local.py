"""Single-process analysis of capture files: the shell around the sans-IO core.

For notebooks::

    from amqp_dissect.pipelines.local import analyze
    a = analyze("capture.pcap")          # or a list of files read as one continuous capture
    a.deliveries, a.links, a.stalls      # pandas DataFrames (columns and dtypes: amqp_dissect.results.schema)
    a.latency("address")                 # latency percentiles per link / address / connection
    a.report()                           # the JSON report of ``amqp-dissect report --format json``

This module opens files; ``dissector`` never does.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Iterator

from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.dissect import Dissector
from amqp_dissect.errors import CaptureError

if TYPE_CHECKING:  # pandas / pyarrow are imported when a table is asked for, not by the report
    import pandas as pd
    import pyarrow as pa



class CaptureSource:
    """Feeds one or more capture files, in order, through a Dissector as one capture.

    Packet numbers continue across files.  ``errors`` collects, per file, the
    damage found while reading it (truncated tail, corrupt block); opening
    problems raise (``OSError``, :class:`~amqp_dissect.errors.CaptureError`).
    """

    def __init__(self, paths, dissector: Dissector | None = None, ports: Iterable[int] = (), messages: bool = False,
                 keylog=None, tls_records: list | None = None):
        self.paths = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
        # messages: reassemble message bodies of multi-frame deliveries (only frame output shows them)
        # keylog: TLS key log text or KeyLog (see read_keylog); pcapng Decryption Secrets Blocks add to it
        self.dissector = dissector or Dissector(extra_ports=ports, messages=messages, keylog=keylog,
                                                tls_records=tls_records)
        self.errors: list[tuple[str, CaptureError]] = []
        self.packets = 0
        self.last_ts = None  # time of the last record that made an event (drive, drive_chunks)

    def _readers(self):
        """(capture reader, packet-number offset) of each file in turn; a file's read damage is
        collected once its reader is done."""
        d = self.dissector
        for path in self.paths:
            with open(path, "rb") as f:
                reader = open_capture(f)
                reader.on_secrets = d.add_secrets
                yield reader, self.packets
                if reader.error is not None:
                    self.errors.append((path, reader.error))

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
        for ev in d.finish():
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
                n, ts = d.pump(reader, sink, offset, chunk)
                self.packets += n
                if ts is not None:
                    self.last_ts = ts
                yield
                if not chunk or n < chunk:
                    break
        for ev in d.finish():
            sink(ev)
        yield


def read_keylog(path=None) -> str | None:
    """The text of TLS key log ``path``; without one, of the file ``$SSLKEYLOGFILE`` names
    (when set and present).  None when there is no key log."""
    if path is None:
        path = os.environ.get("SSLKEYLOGFILE") or None
        if path is None or not os.path.isfile(path):
            return None
    with open(path, "rb") as f:
        return f.read().decode("ascii", "replace")


def to_frame(rows, table: str) -> "pd.DataFrame":
    from amqp_dissect.results.tables import to_frame as _to_frame

    return _to_frame(rows, table)


class Analysis:
    """The results of one analysis, as DataFrames."""

    def __init__(self, analyzer: Analyzer, source: CaptureSource):
        self.analyzer = analyzer
        self.source = source

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


def run_analysis(source: CaptureSource, on_event=None, rows: bool = True, delivery_sink=None,
                 analyzer_class=Analyzer) -> Analysis:
    """Feed every event of ``source`` to an Analyzer (and to ``on_event`` if given).

    ``rows``/``delivery_sink``: see :class:`~amqp_dissect.results.analytics.Analyzer` (``rows=False``
    keeps memory flat: the report needs only aggregates).  ``analyzer_class``: an Analyzer
    subclass to use (the HTML report's :class:`~amqp_dissect.results.series.SeriesAnalyzer`)."""
    an = analyzer_class(rows=rows, delivery_sink=delivery_sink)
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

    def __init__(self, source: CaptureSource):
        self.source = source
        self.analyzer: Analyzer | None = None

    def __iter__(self) -> Iterator[dict]:
        ready: list = []
        an = self.analyzer = Analyzer(rows=False, delivery_sink=lambda row, key: ready.append(row))
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

    def batches(self, batch_rows: int = 8192) -> Iterator["pa.RecordBatch"]:
        """The same table as Arrow record batches of ``batch_rows`` rows (the last one shorter),
        built column by column from the folded delivery objects: no row dict, and memory holds
        one batch of deliveries."""
        from amqp_dissect.results.tables import columns_batch

        folded: list = []
        an = self.analyzer = Analyzer(rows=False, fold_out=folded)

        def batch(ds):
            return columns_batch("deliveries", *an.delivery_columns(ds))

        src = self.source
        # the dissector's loop, a chunk of records at a time: small beside a batch, so what waits for
        # its batch stays about one batch of deliveries (a packet may carry several)
        for _ in src.drive_chunks(an.feed, max(16, batch_rows // 8)):
            while len(folded) >= batch_rows:
                yield batch(folded[:batch_rows])
                del folded[:batch_rows]
        an.finish(src.last_ts)
        folded.extend(an.live())
        while folded:
            yield batch(folded[:batch_rows])
            del folded[:batch_rows]


def analyze(paths, ports: Iterable[int] = (), keylog=None) -> Analysis:
    """Analyse one capture file, or several read in order as one continuous capture.

    ``keylog``: TLS key log text (``read_keylog(path)``) to decrypt TLS streams."""
    return run_analysis(CaptureSource(paths, ports=ports, keylog=keylog))
