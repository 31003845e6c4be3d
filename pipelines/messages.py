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
        out["messages"] = messages.rows(an.link_rows(), an.connection_rows())
    if requests is not None:
        out["requests"] = requests.rows(an.link_rows(), capture_end(an))
    return out, kept


# --------------------------------------------------------------------------- the report's section


def watch_messages(analyzer) -> MessageMatcher:
    """A bounded matcher fed every folded delivery of ``analyzer`` (an Analyzer reading the
    messages: :func:`amqp_dissect.pipelines.requests.watched_analyzer`), for the report."""
    from amqp_dissect.results.messages_report import report_matcher

    matcher = report_matcher()
    analyzer.delivery_sink = lambda row, key: matcher.add(row)
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
    links, conns = [], []
    for p in parts:
        matcher.merge(p)
        links += p["links"]
        conns += p["connections"]
    rep["messages"] = messages_section(matcher.rows(links, conns), matcher)
    return rep
