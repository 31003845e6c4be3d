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


def report_options(analyzer_class=None) -> tuple[dict, MessageMatcher]:
    """(the ``run_analysis`` options that read the messages and feed a bounded matcher, the matcher)
    for a report: ``analyzer_class`` (the HTML page's SeriesAnalyzer) gets the message reading too."""
    from amqp_dissect.results.messages_report import report_matcher

    matcher = report_matcher()
    opts = {"messages": True, "delivery_sink": lambda row, key: matcher.add(row)}
    if analyzer_class is not None:
        opts["analyzer_class"] = _reading_messages(analyzer_class)
    return opts, matcher


def _reading_messages(cls):
    """``cls`` (an Analyzer subclass whose ``__init__`` does not take ``messages``) reading them."""
    from amqp_dissect.results.analytics import Analyzer

    class Reading(cls):
        def __init__(self, *args, messages: bool = False, **kwargs):
            cls.__init__(self, *args, **kwargs)
            if messages:  # (what Analyzer(messages=True) sets up)
                probe = Analyzer(rows=False, messages=True)
                self.messages = True
                self.transfer_rules.messages = probe.transfer_rules.messages

    Reading.__name__ = cls.__name__
    return Reading


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


def worker_analyzer(source, analyzer_class=None):
    """(an Analyzer of a ``-j`` report worker reading the messages, the matcher it feeds)."""
    from amqp_dissect.pipelines.local import read_messages
    from amqp_dissect.results.analytics import Analyzer

    opts, matcher = report_options()
    read_messages(source)
    return (analyzer_class or Analyzer)(rows=False, messages=True, delivery_sink=opts["delivery_sink"]), matcher


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
