"""Capture times as integers.

Every time the core carries (``ts`` of every event, the model's and the tables' times) is an
integer count of nanoseconds since the Unix epoch, as the capture reader read it: a pcap
record's seconds and micro- or nanoseconds, a pcapng interface's ticks at its resolution
(``if_tsresol``) plus its offset (``if_tsoffset``).  A Python int holds any of them exactly
(a pcapng time may lie beyond the years a 64-bit count of nanoseconds holds: it stays exact
here, and the typed tables write it null; see :mod:`amqp_dissect.results.tables`).

Differences are taken on the integers; a duration or latency becomes float seconds once, at
the end (:func:`seconds`: the double nearest the exact quotient), so a latency of 796 µs is
``0.000796``, never ``0.0007960796...``.  Text writes a time with the decimal digits of the
capture's resolution (:func:`decimal`: 6 for microseconds, 9 for nanoseconds), as tshark does.

Parameters a user gives in seconds (idle timeouts, windows) become nanoseconds with :func:`ns`.
"""

from __future__ import annotations

NS = 1_000_000_000  # nanoseconds per second


def ns(seconds) -> int:
    """Nanoseconds of a duration given in seconds (an int, float or decimal text's float),
    rounded to the nearest nanosecond."""
    if isinstance(seconds, int):
        return seconds * NS
    return round(seconds * NS)


def seconds(nanoseconds):
    """Float seconds of a duration or time in nanoseconds (None stays None): the double
    nearest the exact value (Python's int true division is correctly rounded)."""
    if nanoseconds is None:
        return None
    return nanoseconds / NS


def decimal(nanoseconds: int, digits: int = 6) -> str:
    """``nanoseconds`` as decimal seconds with ``digits`` digits after the point (0 to 9),
    exactly: truncated toward the past as tshark writes ``frame.time_epoch`` (a capture's own
    resolution loses nothing)."""
    whole, frac = divmod(nanoseconds, NS)
    if digits <= 0:
        return f"{whole}"
    frac //= 10 ** (9 - digits)
    if whole < 0 and frac:  # -1.5 s: divmod gives (-2, 0.5); write -1.500000000
        whole += 1
        frac = 10**digits - frac
        return f"-{-whole}.{frac:0{digits}d}" if whole == 0 else f"{whole}.{frac:0{digits}d}"
    return f"{whole}.{frac:0{digits}d}"


def delta(nanoseconds: int, digits: int = 6) -> str:
    """A (possibly negative) duration as decimal seconds with ``digits`` digits, exactly."""
    if nanoseconds < 0:
        return "-" + decimal(-nanoseconds, digits)
    return decimal(nanoseconds, digits)


def _civil(nanoseconds: int):
    """(datetime to the second, nanoseconds within it) of a time, or None beyond the years
    1 to 9999."""
    import datetime as _dt

    sec, frac = divmod(nanoseconds, NS)
    try:
        return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(seconds=sec), frac
    except OverflowError:
        return None


def clock(nanoseconds: int, digits: int = 6) -> str:
    """UTC time of day ``HH:MM:SS.ffffff`` (``digits`` decimals, truncated); a time beyond the
    years a datetime holds as its epoch seconds, said so."""
    return _civil_text(nanoseconds, digits, "%H:%M:%S", "")


def date(nanoseconds: int, digits: int = 6) -> str:
    """UTC date and time ``YYYY-MM-DD HH:MM:SS.ffffff UTC`` (``digits`` decimals, truncated);
    beyond the years a datetime holds, its epoch seconds, said so."""
    return _civil_text(nanoseconds, digits, "%Y-%m-%d %H:%M:%S", " UTC")


def _civil_text(nanoseconds: int, digits: int, fmt: str, tail: str) -> str:
    got = _civil(nanoseconds)
    if got is None:
        return f"{decimal(nanoseconds, digits)} (epoch s, beyond the years a datetime holds)"
    dt, frac = got
    head = dt.strftime(fmt)
    if digits <= 0:
        return head + tail
    return f"{head}.{frac // 10 ** (9 - digits):0{digits}d}{tail}"
