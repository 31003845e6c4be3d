"""The one exception family of the dissector, and expert notes.

Every problem caused by the *input* (a malformed capture record, a bad AMQP
encoding, a hostile length field) raises a subclass of :class:`DissectError`.
Layers catch it and turn it into an :class:`ExpertNote` attached to the frame
or packet, then carry on.  Any other exception escaping the dissector is a bug.
"""

from __future__ import annotations


class DissectError(Exception):
    """Base class: bad input, reported as an expert note, never a traceback."""

    group = "malformed"


class DecodeError(DissectError):
    """An AMQP type encoding that cannot be decoded (bad constructor, short read, caps)."""


class LimitExceeded(DecodeError):
    """A cap on nesting depth, element count or size was hit."""


class FramingError(DissectError):
    """An AMQP frame header that is not valid."""

    group = "framing"


class CaptureError(DissectError):
    """A capture file that cannot be read (unknown format, bad header, truncated)."""

    group = "capture"


class UnsupportedLinkType(CaptureError):
    """A capture whose link-layer type is not supported."""


# Severities, as in Wireshark's expert info.
CHAT = "chat"
NOTE = "note"
WARN = "warn"
ERROR = "error"


class ExpertNote:
    """Something noteworthy about a frame, packet or stream (Wireshark: expert info).

    A plain class with the behaviour of a ``@dataclass(slots=True)`` (keyword or positional
    arguments, equality by value, unhashable, the same repr): making a dataclass runs generated
    code through ``exec`` at import, a cost every run paid before reading a packet."""

    __slots__ = ("severity", "group", "message")
    __match_args__ = ("severity", "group", "message")
    __hash__ = None  # (mutable and compared by value, as a dataclass with eq and not frozen)

    def __init__(self, severity: str, group: str, message: str) -> None:
        self.severity = severity  # chat | note | warn | error
        self.group = group  # malformed | framing | sequence | protocol | capture | reassembly ...
        self.message = message

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.severity, self.group, self.message) == (other.severity, other.group, other.message)

    def __repr__(self) -> str:
        return f"ExpertNote(severity={self.severity!r}, group={self.group!r}, message={self.message!r})"

    def as_dict(self) -> dict:
        return {"severity": self.severity, "group": self.group, "message": self.message}

    def __str__(self) -> str:
        return f"[{self.severity}/{self.group}] {self.message}"
