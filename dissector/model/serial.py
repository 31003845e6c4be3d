"""Serial-number arithmetic (RFC 1982, 32 bits) and what is left of an unsigned 32-bit grant.

delivery-id, delivery-count and transfer-id are RFC 1982 serial numbers with 32 bits:
:func:`serial_add`, :func:`serial_diff`, :func:`serial_lt`, :func:`serial_in_range`.
``serial_diff(a, b)`` is ``a - b`` as a signed number in ``[-2**31, 2**31)``; RFC 1982 leaves
the comparison of numbers exactly 2**31 apart undefined, here it counts as "less than".
Link-credit and incoming-window are unsigned 32-bit amounts: what is left of one is measured
from the start of the grant (:func:`grant_left`), so a window of 2**31-1 or more never wraps
negative.

Compiled, these are C functions on 64-bit integers (``serial.pxd``) that the other rooms of the
model call through ``cimport``; the model passes them only values the readers accepted as uint.
"""

from __future__ import annotations

SERIAL_BITS = 32
SERIAL_MOD = 1 << SERIAL_BITS
SERIAL_MASK = SERIAL_MOD - 1
#: half of the serial space: distances of this much or more are "behind"
SERIAL_HALF = 1 << (SERIAL_BITS - 1)


# the same three numbers for the serial functions: C constants when compiled (see serial.pxd)
_M32 = SERIAL_MASK
_MOD32 = SERIAL_MOD
_HALF32 = SERIAL_HALF


def serial_add(s: int, n: int = 1) -> int:
    """``s + n`` in 32-bit serial-number space."""
    return (s + n) & _M32


def serial_diff(a: int, b: int) -> int:
    """``a - b`` as a signed distance in ``[-2**31, 2**31)`` (RFC 1982)."""
    d = (a - b) & _M32
    return d - _MOD32 if d >= _HALF32 else d


def serial_lt(a: int, b: int) -> bool:
    """``a < b`` in serial-number arithmetic."""
    return serial_diff(a, b) < 0


def serial_range_len(first: int, last: int) -> int:
    """Number of serial numbers in ``first..last`` (inclusive, wrapping)."""
    return ((last - first) & _M32) + 1


def serial_in_range(x: int, first: int, last: int) -> bool:
    """Is ``x`` within ``first..last`` (inclusive, wrapping at 2**32)?"""
    return ((x - first) & _M32) <= ((last - first) & _M32)


def grant_left(limit: int, size: int, count: int):
    """What is left of a grant of ``size`` (an unsigned 32-bit link-credit or incoming-window)
    ending at the serial number ``limit``, once the counter has reached ``count``: ``size`` minus
    how far ``count`` went past the grant's start ``limit - size``, as a plain integer (never
    wrapped: a window of 2**31-1 or more stays positive; negative: ``count`` went beyond the grant).
    None when ``count`` is behind the grant's start: the receiver counted frames the capture lost,
    so what is left is unknown."""
    used = serial_diff(count, (limit - size) & _M32)
    if used < 0:
        return None
    return size - used
