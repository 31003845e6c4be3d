"""The messages table of a capture source: its deliveries (message fields read) fed to the core's
:class:`~amqp_dissect.results.messages.MessageMatcher` as they become final, then the links and
connections tables (the sides, broker-to-broker connections).

Used by the ``messages`` command, ``amqp_dissect.analyze(..., tables="messages")`` (with the
requests table from the same reading) and the report."""

from __future__ import annotations

from amqp_dissect.results.messages import MessageMatcher

from .local import DeliveryStream


def message_table(source, matcher: MessageMatcher | None = None):
    """(the messages table's rows, the Analyzer that read ``source``, the matcher: its ``unkeyed``
    and ``dropped`` counts)."""
    matcher = matcher or MessageMatcher()
    stream = DeliveryStream(source, messages=True)
    for row in stream:
        matcher.add(row)
    an = stream.analyzer
    matcher.clock = an.clock  # (the capture's clock steps: a residence across one is unknown)
    return matcher.rows(an.link_rows(), an.connection_rows()), an, matcher


def message_tables_of_stream(stream: DeliveryStream, want, keep_deliveries: bool = False):
    """({table: rows} of the message tables in ``want`` (messages, requests), the deliveries rows
    when ``keep_deliveries`` else None) of a message stream, read once (``stream.analyzer`` is
    then the Analyzer that read it)."""
    from amqp_dissect.results.requests import RequestMatcher

    from .requests import capture_end

    messages = MessageMatcher() if "messages" in want else None
    requests = RequestMatcher() if "requests" in want else None
    kept = [] if keep_deliveries else None
    for row in stream:
        if messages is not None:
            messages.add(row)
        if requests is not None:
            requests.add(row)
        if kept is not None:
            kept.append(row)
    an = stream.analyzer
    out = {}
    if messages is not None:
        messages.clock = an.clock
        out["messages"] = messages.rows(an.link_rows(), an.connection_rows())
    if requests is not None:
        requests.clock = an.clock  # (requests meet their replies in the capture's order across a step)
        out["requests"] = requests.rows(an.link_rows(), capture_end(an))
    return out, kept


# --------------------------------------------------------------------------- the report's section


class MessageWatch:
    """The messages of a report's reading, at little cost: on the Analyzer's ``fold_out`` (each
    folded delivery object handed over), a small row of the dozen columns the matcher reads, made
    only for a delivery whose message has a key (a message-id or a digest)."""

    def __init__(self, analyzer, matcher: MessageMatcher):
        from amqp_dissect.amqp.message import MESSAGE_COLUMNS, delivery_cells

        self.analyzer = analyzer
        self.matcher = matcher
        self._cells = delivery_cells
        self._at = tuple((c, MESSAGE_COLUMNS.index(c)) for c in _MESSAGE_KEEP)
        self._mid, self._digest = MESSAGE_COLUMNS.index("message_id"), MESSAGE_COLUMNS.index("bare_digest")
        self._addr: dict = {}  # link -> its address (once known)

    def append(self, d) -> None:
        link = d.link
        if link is None:
            return
        cells = self._cells(d)
        if cells[self._mid] is None and cells[self._digest] is None:
            self.matcher.unkeyed += 1
            return
        addr = self._addr.get(link)
        if addr is None:
            addr = self.analyzer._link_address(link)
            if addr is not None:
                self._addr[link] = addr
        row = {"connection": link.conn.id, "link": link.name, "link_index": link.index, "address": addr,
               "sender_side": _SIDES[d.direction], "first_time": d.first_ts, "first_packet": d.first_packet,
               "outcome": d.outcome or "", "outcome_time": d.outcome_ts, "outcome_packet": d.outcome_packet}
        for name, i in self._at:
            row[name] = cells[i]
        self.matcher.add(row)


class _Both:
    """Two ``fold_out`` watchers as one."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def append(self, d) -> None:
        self.a.append(d)
        self.b.append(d)


_MESSAGE_KEEP = ("message_id", "message_id_type", "bare_digest", "header_delivery_count", "message_annotations",
                 "application_properties")
_SIDES = ("client", "server")


def watch_messages(analyzer) -> MessageMatcher:
    """A bounded matcher fed every folded delivery of ``analyzer`` (an Analyzer reading the
    messages: :func:`amqp_dissect.pipelines.runs.requests.watched_analyzer`; its ``fold_out`` watcher
    kept), for the report."""
    from amqp_dissect.results.messages_report import report_matcher

    matcher = report_matcher()
    watch = MessageWatch(analyzer, matcher)
    other = analyzer.fold_out
    if other is None:
        analyzer.fold_out = watch
        return matcher
    analyzer.fold_out = _Both(other, watch)
    return matcher


def analyze_for_sections(source, analyzer_class=None):
    """The report's reading: the messages read, the requests watched and the message matcher fed;
    (the Analysis, the ReportRequests, the MessageMatcher)."""
    from .local import Analysis
    from .requests import watched_analyzer

    an, watch = watched_analyzer(source, analyzer_class)
    matcher = watch_messages(an)
    last_ts = source.drive(an.feed)
    an.finish(last_ts)
    return Analysis(an, source), watch, matcher


def add_messages_section(rep: dict, analyzer, matcher: MessageMatcher) -> dict:
    """``rep["messages"]``: the messages section of the deliveries ``matcher`` was fed (the ones
    still open at the end added here)."""
    from amqp_dissect.results.messages_report import messages_section

    for _, row in analyzer.live_deliveries():
        matcher.add(row)
    matcher.clock = analyzer.clock
    rows = matcher.rows(analyzer.link_rows(), analyzer.connection_rows())
    rep["messages"] = messages_section(rows, matcher)
    return rep


# --------------------------------------------------------------------------- the report with -j


_LINK_KEEP = ("connection", "link_index", "sender_side", "role")
_CONN_KEEP = ("connection", "container_id_client", "container_id_server")


def worker_part(analyzer, matcher: MessageMatcher) -> dict:
    """A ``-j`` report worker's share of the messages section (picklable): its matcher (the
    deliveries still open added) and the few link and connection columns the matching reads."""
    for _, row in analyzer.live_deliveries():
        matcher.add(row)
    part = matcher.part()
    part["links"] = [{k: r.get(k) for k in _LINK_KEEP} for r in analyzer.link_rows()]
    part["connections"] = [{k: r.get(k) for k in _CONN_KEEP} for r in analyzer.connection_rows()]
    return part


def add_merged_messages_section(rep: dict, parts: list) -> dict:
    """``rep["messages"]`` of the ``-j`` workers' parts: the section the single process makes."""
    from amqp_dissect.results.messages_report import messages_section, report_matcher

    matcher = report_matcher()
    steps = (rep.get("capture") or {}).get("clock_steps")
    if steps:  # (the capture's clock steps, as the workers found them)
        from amqp_dissect.clock import ClockWatch

        matcher.clock = ClockWatch.of(steps)
    links, conns = [], []
    for p in parts:
        matcher.merge(p)
        links += p["links"]
        conns += p["connections"]
    rep["messages"] = messages_section(matcher.rows(links, conns), matcher)
    return rep
