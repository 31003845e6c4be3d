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
    rows, _ = requests_of_stream(stream, matcher=matcher)
    return rows, stream.analyzer
