"""The requests table of a capture source: its deliveries (message fields read) fed to the core's
:class:`~amqp_dissect.results.requests.RequestMatcher` as they become final, then the links table.

Used by the ``requests`` command, ``amqp_dissect.analyze(..., tables="requests")`` and the report."""

from __future__ import annotations

from amqp_dissect.results.requests import RequestMatcher

from .local import DeliveryStream


def message_stream(source) -> DeliveryStream:
    """A DeliveryStream of ``source`` whose rows carry the message fields."""
    return DeliveryStream(source, messages=True)


def capture_end(analyzer):
    """The time of the capture's last packet as the analyzer saw it (integer nanoseconds)."""
    end = getattr(analyzer, "end_ts", None)
    return end if end is not None else getattr(analyzer, "last_ts", None)


def requests_of_stream(stream: DeliveryStream, keep_deliveries: bool = False, matcher: RequestMatcher | None = None):
    """(the requests table's rows, the deliveries rows when ``keep_deliveries`` else None) of a
    message stream, read once (``stream.analyzer`` is then the Analyzer that read it)."""
    matcher = matcher or RequestMatcher()
    kept = [] if keep_deliveries else None
    for row in stream:
        matcher.add(row)
        if kept is not None:
            kept.append(row)
    an = stream.analyzer
    return matcher.rows(an.link_rows(), capture_end(an)), kept


def request_table(source, matcher: RequestMatcher | None = None):
    """(the requests table's rows, the Analyzer that read ``source``)."""
    stream = message_stream(source)
    matcher = matcher or RequestMatcher()
    matcher.clock = getattr(getattr(source, "dissector", None), "clock", None)
    rows, _ = requests_of_stream(stream, matcher=matcher)
    return rows, stream.analyzer


def _can_be_request_or_reply(scan, reply_to: int, correlation_id: int) -> bool:
    """The scan of a delivery's message (amqp.message's) shows a reply-to, a correlation-id or an
    application property ``operation``: read from the sections it kept, no cell made."""
    if scan is None:
        return False
    p = scan.props
    if p is not None:
        n = len(p)
        if (reply_to < n and p[reply_to] is not None) or (correlation_id < n and p[correlation_id] is not None):
            return True
    ap = scan.ap
    return type(ap) is dict and "operation" in ap


class ReportRequests:
    """The requests of a report's reading, at little cost: the Analyzer's ``fold_out`` (each folded
    delivery handed over, no list kept): the last transfer time of its link noted, and a row made
    only for a delivery whose message can be a request or a reply."""

    def __init__(self, matcher: RequestMatcher | None = None):
        from amqp_dissect.amqp import _spec

        self.matcher = matcher or RequestMatcher()
        self.analyzer = None
        self._last: dict = {}  # link object -> the last transfer time of its folded deliveries
        # (the properties' field indices, generated from the spec)
        self._fields = (_spec.PROPERTIES_REPLY_TO, _spec.PROPERTIES_CORRELATION_ID)

    def append(self, d) -> None:
        link = d.link
        t = d.last_ts
        if t is not None:
            last = self._last
            old = last.get(link)
            if old is None or t > old:
                last[link] = t
        scan = d.message
        if scan is None or link is None:
            return
        p = scan.props  # (_can_be_request_or_reply, inline: once per delivery)
        if p is not None:
            reply_to, correlation_id = self._fields
            n = len(p)
            if (reply_to < n and p[reply_to] is not None) or (correlation_id < n and p[correlation_id] is not None):
                self.matcher.add(self.analyzer._row(d))
                return
        ap = scan.ap
        if type(ap) is dict and "operation" in ap:
            self.matcher.add(self.analyzer._row(d))

    def _links_seen(self) -> None:
        """The links' last transfers handed to the matcher (by connection id and link index)."""
        for link, t in self._last.items():
            if link is not None:
                self.matcher.transfer(link.conn.id, link.index, t)
        self._last = {}

    def rows(self) -> list[dict]:
        """After the reading: the deliveries still open added, then the requests table."""
        an = self.analyzer
        self._links_seen()
        for _, row in an.live_deliveries():
            self.matcher.add(row)
        return self.matcher.rows(an.link_rows(), capture_end(an))

    def section(self) -> dict:
        """The report's requests section."""
        from amqp_dissect.results.requests import requests_summary

        rows = self.rows()
        return requests_summary(rows, self.matcher.dropped, self.matcher.cbs_links)

    def part(self) -> dict:
        """A ``-j`` worker's share, after its reading (plain data, merged by :func:`merged_section`):
        its candidates, its links' last transfers, its links and the end it saw."""
        an = self.analyzer
        self._links_seen()
        for _, row in an.live_deliveries():
            self.matcher.add(row)
        links = [{k: r.get(k) for k in LINK_KEYS} for r in an.link_rows()]
        return {**self.matcher.part(), "links": links, "end": capture_end(an)}


#: the links table's columns the matcher reads
LINK_KEYS = ("connection", "link_index", "name", "source", "target", "address", "attach_time", "attached_time",
              "detach_time", "refused", "terminated")


def merged_section(parts: list, clock=None) -> dict:
    """The report's requests section of the ``-j`` workers' :meth:`ReportRequests.part`."""
    from amqp_dissect.results.requests import requests_summary

    m = RequestMatcher()
    m.clock = clock
    links, ends = [], []
    for p in parts:
        m.merge(p)
        links += p["links"]
        if p["end"] is not None:
            ends.append(p["end"])
    rows = m.rows(links, max(ends) if ends else None)
    return requests_summary(rows, m.dropped, m.cbs_links)


def watched_analyzer(source, analyzer_class=None):
    """(an Analyzer reading the messages of ``source``, its ReportRequests)."""
    from .local import Analyzer, read_messages, watch_clock

    read_messages(source)
    watch = ReportRequests()
    watch.analyzer = (analyzer_class or Analyzer)(rows=False, fold_out=watch, messages=True)
    watch_clock(watch.analyzer, source)
    watch.matcher.clock = watch.analyzer.clock
    return watch.analyzer, watch


def analyze_with_requests(source, analyzer_class=None):
    """``run_analysis(source, rows=False, messages=True)`` with a :class:`ReportRequests` watching
    the folded deliveries: (the Analysis, the ReportRequests)."""
    from .local import Analysis

    an, watch = watched_analyzer(source, analyzer_class)
    last_ts = source.drive(an.feed)
    an.finish(last_ts)
    return Analysis(an, source), watch
