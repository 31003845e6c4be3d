"""gzip decompression that loses as little as possible before damage, and says where it is.

:class:`GunzipStream` reads a gzip stream (one or more members) through ``read(n)`` and gives
the decompressed bytes through its own ``read(n)``.  It feeds the decompressor small pieces of
the compressed stream (:data:`PIECE` bytes), so when a block is corrupt, or the stream ends
early, everything decompressed before the piece that holds the damage has been given out, and
the error says which compressed bytes hold it.  (:class:`gzip.GzipFile` decompresses up to a
megabyte per call here, and a corrupt block threw all of it away: a damaged block deep in the
stream was reported at byte 4.)

Every capture reader goes through it (the capture reader, ``split``, ``-j``, the archive path's
file reader), so each one sees the same bytes and stops at the same decompressed offset.

Errors: :class:`EOFError` when the stream ends inside a member, :class:`zlib.error` when the
data is corrupt (a bad block, the trailer's CRC or size wrong, bytes after a member that are not
gzip); the message ends with ``(compressed bytes A to B)``.  Output per call is bounded
(:data:`MAX_OUT`): a deflate bomb costs time, not memory.
"""

from __future__ import annotations

import zlib

PIECE = 2048  # compressed bytes fed to the decompressor per step: what a corrupt block can cost
MAX_OUT = 1 << 16  # most decompressed bytes per step
MAX_HEADER = 1 << 16  # the longest gzip member header taken (a name, a comment, extra fields)
_MAGIC = b"\x1f\x8b"
_DEFLATE = 8
_FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 2, 4, 8, 16
_FRESERVED = 0xE0


def gzip_header_length(head: bytes) -> int | None:
    """The length of the gzip member header ``head`` starts with; None when more bytes are needed to
    say; :class:`zlib.error` when it is not a gzip header (zlib's words)."""
    if head[:2] != _MAGIC[: len(head[:2])]:
        raise zlib.error("Error -3 while decompressing data: incorrect header check")
    if len(head) < 10:
        return None
    if head[2] != _DEFLATE:
        raise zlib.error("Error -3 while decompressing data: unknown compression method")
    flags = head[3]
    if flags & _FRESERVED:
        raise zlib.error("Error -3 while decompressing data: unknown header flags set")
    pos = 10
    if flags & _FEXTRA:
        if len(head) < pos + 2:
            return None
        pos += 2 + int.from_bytes(head[pos:pos + 2], "little")
    for flag in (_FNAME, _FCOMMENT):
        if flags & flag:
            end = head.find(b"\x00", pos)
            if end < 0:
                return None
            pos = end + 1
    if flags & _FHCRC:
        pos += 2
    return pos if len(head) >= pos else None


class GunzipStream:
    """The decompressed bytes of the gzip stream ``read`` gives (``read(n)``, like a file).

    Each member: its header (parsed here), its deflate data (zlib, raw), its trailer (CRC-32 and
    size, checked here once the data before it was given out: a wrong trailer loses nothing)."""

    def __init__(self, read):
        self._read = read
        self._z = None  # the member's raw deflate decompressor, once its header is read
        self._head = b""  # the bytes of a member's header read so far (between members: nothing)
        self._tail = b""  # the bytes of a member's trailer read so far
        self._left = b""  # compressed bytes read but not fed yet (after a header or a trailer)
        self._crc = 0
        self._size = 0
        self._members = 0  # members read whole
        self._out = b""  # decompressed bytes not given out yet
        self._done = False
        self._piece_start = 0  # compressed offset of the piece being decompressed
        self.compressed = 0  # compressed bytes read so far
        self.offset = 0  # decompressed bytes given out so far

    def read(self, n: int = -1) -> bytes:
        """At most ``n`` decompressed bytes (``n`` < 0: what one step gives); b"" at the end."""
        if n is not None and n == 0:
            return b""
        out = self._out
        if not out:
            while not self._done and not out:
                out = self._step()  # (the same steps whatever ``n`` is: every reader meets the
            if not out:             # damage at the same byte)
                return b""
        if n is None or n < 0 or n >= len(out):
            self._out = b""
        else:
            self._out = out[n:]
            out = out[:n]
        self.offset += len(out)
        return out

    def _step(self) -> bytes:
        """One step: at most :data:`MAX_OUT` bytes (often none: a header, a trailer, padding)."""
        z = self._z
        if z is not None and z.unconsumed_tail:
            return self._inflate(z.unconsumed_tail)
        data = self._next_input()
        if not data:
            return b""
        if z is None:
            self._header(data)
        elif z.eof:
            self._trailer(data)
        else:
            return self._inflate(data)
        return b""

    def _next_input(self) -> bytes:
        """Compressed bytes not fed yet: what was left after a header or trailer, else the next
        piece of the stream; at its end, the stream is done (a member cut short is an EOFError)."""
        if self._left:
            data, self._left = self._left, b""
            return data
        piece = self._read(PIECE)
        if not piece:
            self._done = True
            if self._z is not None or self._head:
                raise EOFError(f"Compressed file ended before the end-of-stream marker was reached "
                               f"(compressed bytes {self.compressed} and on are missing)")
            return b""
        self._piece_start = self.compressed
        self.compressed += len(piece)
        return piece

    def _fail(self, message: str):
        self._done = True
        last = max(self._piece_start, self.compressed - 1)
        return zlib.error(f"{message} (compressed bytes {self._piece_start} to {last})")

    def _header(self, data: bytes) -> None:
        head = self._head + data
        if not self._head:
            head = head.lstrip(b"\x00")  # (NUL padding between or after members, as gzip allows)
        try:
            length = gzip_header_length(head)
        except zlib.error as e:
            raise self._fail(f"{'bytes after a gzip member are not gzip: ' if self._members else ''}{e}") from None
        if length is None:
            if len(head) > MAX_HEADER:
                raise self._fail(f"a gzip member header longer than {MAX_HEADER} bytes")
            self._head = head
            return
        self._head = b""
        self._z = zlib.decompressobj(-15)
        self._crc = self._size = 0
        self._left = head[length:]

    def _inflate(self, data: bytes) -> bytes:
        z = self._z
        try:
            out = z.decompress(data, MAX_OUT)
        except zlib.error as e:
            raise self._fail(str(e)) from None
        self._crc = zlib.crc32(out, self._crc)
        self._size += len(out)
        if z.eof:  # (the trailer is checked at the next step: this data is given out first)
            self._tail = b""
            self._left = z.unused_data
        return out

    def _trailer(self, data: bytes) -> None:
        """The member's 8-byte trailer (what follows it is the next member's)."""
        tail = self._tail + data
        if len(tail) < 8:
            self._tail = tail
            return
        if int.from_bytes(tail[:4], "little") != self._crc:
            raise self._fail("Error -3 while decompressing data: incorrect data check")
        if int.from_bytes(tail[4:8], "little") != self._size & 0xFFFFFFFF:
            raise self._fail("Error -3 while decompressing data: incorrect length check")
        self._z = None
        self._tail = b""
        self._members += 1
        rest = tail[8:].lstrip(b"\x00")
        if rest:
            self._header(rest)
