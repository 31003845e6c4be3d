"""The one exception family of the dissector, and expert notes.

Every problem caused by the *input* (a malformed capture record, a bad AMQP
encoding, a hostile length field) raises a subclass of :class:`DissectError`.
Layers catch it and turn it into an :class:`ExpertNote` attached to the frame
or packet, then carry on.  Any other exception escaping the dissector is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(slots=True)
class ExpertNote:
    """Something noteworthy about a frame, packet or stream (Wireshark: expert info)."""

    severity: str  # chat | note | warn | error
    group: str  # malformed | framing | sequence | protocol | capture | reassembly ...
    message: str

    def as_dict(self) -> dict:
        return {"severity": self.severity, "group": self.group, "message": self.message}

    def __str__(self) -> str:
        return f"[{self.severity}/{self.group}] {self.message}"
