"""A TLS key log file read as a stream: memory bounded by the capture's TLS connections, not by
the file's size.

:class:`KeyLogFile` reads the file once, in chunks, through
:class:`~amqp_dissect.capture.keylog.LineScanner` (damaged lines noted with their number, a line
over ``MAX_LINE`` bytes skipped, ``/dev/zero`` given up after ``MAX_RUN`` bytes) and keeps no
secret: only a :class:`~amqp_dissect.capture.keylog.RegionIndex` (Bloom filters of the client
randoms of each region of the file, 8 MiB at most).  When the TLS layer asks for the secrets of a
ClientHello random, the regions that may hold it are read again and only that random's secrets are
kept.  A key log that cannot be read twice (a pipe, a device) is copied on that first reading, its
valid lines only, to an unnamed temporary file, which is read again instead.  A file that grows
while the capture is read (a live capture with ``SSLKEYLOGFILE``) is indexed further at the next
look-up of a random that is not found.
"""

from __future__ import annotations

import os
import stat

from amqp_dissect.capture.keylog import KeyLog, LineScanner, RegionIndex, parse_line

CHUNK = 1 << 20  # bytes read at a time


class KeyLogFile(KeyLog):
    """The :class:`~amqp_dissect.capture.keylog.KeyLog` of a key log file (see the module
    docstring).  ``secrets`` holds the secrets of the client randoms looked up (and of pcapng
    Decryption Secrets Blocks), ``absent`` the randoms looked up and not in the file; ``notes`` the
    damaged lines.  Opening problems raise ``OSError``."""

    def __init__(self, path):
        KeyLog.__init__(self)
        self.path = os.fspath(path)
        self.absent: set = set()
        self.index = RegionIndex()
        self.scanner = LineScanner()
        self.lookups = 0  # regions read again, in all (a cost count for the tests)
        self._fd = None
        self._regular = False
        self._spool = None
        self._open()

    # -- reading ----------------------------------------------------------------------------

    def _open(self) -> None:
        f = open(self.path, "rb")
        try:
            self._regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            if self._regular:
                self._fd = os.dup(f.fileno())
                self._index_more()
            else:
                self._copy(f)
        finally:
            f.close()
        self.notes = self.scanner.summary()
        self.lines_ignored = self.scanner.damaged + self.scanner.unused

    def _index_more(self) -> None:
        """Index the regular file from where the last reading stopped to its end."""
        sc, ix = self.scanner, self.index
        while not sc.stopped:
            data = os.pread(self._fd, CHUNK, sc.offset)
            if not data:
                break
            for off, _, random, _ in sc.feed(data):
                ix.add(off, random)
        ix.end = sc.offset

    def _copy(self, f) -> None:
        """A key log that cannot be read twice: its valid lines to a temporary file, indexed there."""
        import tempfile  # (only for a key log read from a pipe: a run without one need not load it)

        spool = tempfile.TemporaryFile(prefix="amqp-dissect-keylog-")
        sc, ix = self.scanner, self.index
        at = 0
        while not sc.stopped:
            data = f.read(CHUNK)
            if not data:
                break
            at = self._spool_lines(spool, sc.feed(data), at)
        at = self._spool_lines(spool, sc.end(), at)
        spool.flush()
        ix.end = at
        self._spool = spool
        self._fd = spool.fileno()

    def _spool_lines(self, spool, lines, at: int) -> int:
        for _, label, random, secret in lines:
            text = f"{label} {random.hex()} {secret.hex()}\n".encode("ascii")
            self.index.add(at, random)
            spool.write(text)
            at += len(text)
        return at

    def _grown(self) -> bool:
        """A regular file that grew since it was indexed: index the new part (True if it grew)."""
        if not self._regular or self.scanner.stopped:
            return False
        if os.fstat(self._fd).st_size <= self.scanner.offset:
            return False
        self._index_more()
        self.notes = self.scanner.summary()
        self.lines_ignored = self.scanner.damaged + self.scanner.unused
        return True

    def _find(self, random: bytes) -> dict | None:
        found: dict = {}
        for start, end in self.index.regions(random):
            self.lookups += 1
            sc = LineScanner()
            at = start
            while at < end:
                data = os.pread(self._fd, min(CHUNK, end - at), at)
                if not data:
                    break
                at += len(data)
                for _, label, r, secret in sc.feed(data):
                    if r == random:
                        found[label] = secret
            for _, label, r, secret in sc.end():
                if r == random:
                    found[label] = secret
        if self._regular and self.scanner.long:  # a last line without its line end (yet)
            got = parse_line(bytes(self.scanner.partial)) if self.scanner.long <= len(self.scanner.partial) else None
            if isinstance(got, tuple) and got[1] == random:
                found[got[0]] = got[2]
        return found or None

    # -- the KeyLog interface ------------------------------------------------------------------

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        got = self.secrets.get(client_random)
        if got is not None:
            return got
        if self._fd is None or not isinstance(client_random, (bytes, bytearray)) or len(client_random) != 32:
            return None
        random = bytes(client_random)
        if random in self.absent:
            if not self._grown():
                return None
            self.absent.discard(random)
        else:
            self._grown()
        found = self._find(random)
        if found is None:
            self.absent.add(random)
            return None
        self.secrets.setdefault(random, {}).update(found)
        return self.secrets[random]

    def __contains__(self, client_random) -> bool:
        return self.get(client_random) is not None

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
        elif self._fd is not None:
            os.close(self._fd)
        self._fd = self._spool = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def plain(self) -> KeyLog:
        """A plain :class:`~amqp_dissect.capture.keylog.KeyLog` of the secrets of every valid line
        (and of the ones added since: pcapng Decryption Secrets Blocks), read again from the file."""
        kl = KeyLog()
        kl.secrets = {r: dict(s) for r, s in self.secrets.items()}
        if self._fd is not None:
            sc = LineScanner()
            at = 0
            while at < self.index.end:
                data = os.pread(self._fd, min(CHUNK, self.index.end - at), at)
                if not data:
                    break
                at += len(data)
                for _, label, r, secret in sc.feed(data):
                    kl.secrets.setdefault(r, {})[label] = secret
            for _, label, r, secret in sc.end():
                kl.secrets.setdefault(r, {})[label] = secret
        kl.notes = list(self.notes)
        kl.lines_ignored = self.lines_ignored
        return kl

    def text(self) -> str:
        """Every secret of the file as key log text (what the Spark job ships to its executors)."""
        return self.plain().text()

    def __reduce__(self):
        # (a Dissector pickled midway, the Spark job): a plain KeyLog of the secrets of every valid line
        kl = self.plain()
        return (_plain_keylog, (kl.secrets, kl.notes, kl.lines_ignored))

    @classmethod
    def from_path(cls, path=None) -> "KeyLogFile | None":
        """The key log file ``path`` (what :func:`open_keylog`, the one entry, reads a path with);
        without one, the file ``$SSLKEYLOGFILE`` names (when set and present).
        None when there is no key log.  Opening problems raise ``OSError``."""
        if path is None:
            path = os.environ.get("SSLKEYLOGFILE") or None
            if path is None or not os.path.isfile(path):
                return None
        return cls(path)


# the first word of a key log line (NSS format): a "path" holding one is key log text given by mistake
_LABELS = ("CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
           "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0", "EXPORTER_SECRET", "EARLY_EXPORTER_SECRET",
           "CLIENT_EARLY_TRAFFIC_SECRET", "RSA")


def open_keylog(keylog=None, *, environment: bool = False) -> KeyLog | None:
    """The one entry through which every runner (the CLI's ``--keylog``, the Python API's
    ``keylog=``, ``compare``, the Spark job) takes a TLS key log.  ``keylog``: None, no key log
    (with ``environment``: the file ``$SSLKEYLOGFILE`` names, when set and present, as the CLI
    reads it); a :class:`~amqp_dissect.capture.keylog.KeyLog` (or a :class:`KeyLogFile`), kept;
    a path (``str`` or ``os.PathLike``), read as a stream (:class:`KeyLogFile`; a file that cannot
    be opened raises ``OSError``).  Key log text is taken only as ``KeyLog.from_text(text)``: a
    string that reads as key log lines and names no file, or ``bytes``, raises ``TypeError``
    saying so (a path string was once taken as key log text, and found nothing).  The Spark job
    ships the result's ``text()`` to its executors."""
    if keylog is None:
        return KeyLogFile.from_path(None) if environment else None
    if isinstance(keylog, KeyLog):
        return keylog
    if isinstance(keylog, (bytes, bytearray, memoryview)):
        raise TypeError("keylog: key log text goes through KeyLog.from_text(text); a path is a str or os.PathLike")
    if isinstance(keylog, (str, os.PathLike)):
        path = os.fspath(keylog)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if ("\n" in path or path.lstrip().startswith(_LABELS)) and not os.path.exists(path):
            raise TypeError("keylog: this looks like key log text, not a path: give KeyLog.from_text(text)")
        return KeyLogFile.from_path(path)
    raise TypeError(f"keylog: a path or a KeyLog, not {type(keylog).__name__}")


def _plain_keylog(secrets, notes, ignored) -> KeyLog:
    kl = KeyLog()
    kl.secrets = secrets
    kl.notes = notes
    kl.lines_ignored = ignored
    return kl
