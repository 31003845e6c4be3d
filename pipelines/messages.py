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
