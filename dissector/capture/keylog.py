"""TLS session secrets: the NSS key log format (``SSLKEYLOGFILE``) and pcapng Decryption Secrets Blocks.

Sans-IO: :class:`KeyLog` takes text or bytes, :class:`LineScanner` takes the bytes of a key log
chunk by chunk and :class:`RegionIndex` remembers which part of a key log may hold a client
random; the shells read the files (``amqp_dissect.pipelines.keylogfile``).

A key log line is ``LABEL <client random, hex> <secret, hex>``.  TLS 1.2 uses
``CLIENT_RANDOM`` (the 48-byte master secret); TLS 1.3 uses one line per
traffic secret (``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``: 32 or 48 bytes, the size of the suite's
hash).  Other labels of the format (exporter, early data, ``RSA``), comments and blank lines are
ignored.  A damaged line (not three fields, not hex, a client random that is not 32 bytes, a
secret of a size its label cannot have, bytes that are not text, longer than :data:`MAX_LINE`)
is skipped and noted with its line number.  Hostile input is bounded: a line running past
:data:`MAX_RUN` bytes (``/dev/zero``) or :data:`MAX_DAMAGED_RUN` damaged lines in a row (a file
that is not a key log) end the reading, with a note.
"""

from __future__ import annotations

import re
from binascii import Error as _HexError
from binascii import unhexlify

# pcapng Decryption Secrets Block: block type and the secrets type of a TLS key log
DSB_BLOCK_TYPE = 0x0000000A
DSB_TLS_KEY_LOG = 0x544C534B  # "TLSK"

MASTER_SECRET = "CLIENT_RANDOM"
CLIENT_HS = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HS = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_AP = "CLIENT_TRAFFIC_SECRET_0"
SERVER_AP = "SERVER_TRAFFIC_SECRET_0"

LABELS = frozenset({MASTER_SECRET, CLIENT_HS, SERVER_HS, CLIENT_AP, SERVER_AP})
# secret sizes each label can have: the TLS 1.2 master secret; TLS 1.3 secrets are Hash.length
SECRET_SIZES = {MASTER_SECRET: (48,), CLIENT_HS: (32, 48), SERVER_HS: (32, 48), CLIENT_AP: (32, 48),
                SERVER_AP: (32, 48)}

MAX_LINE = 1024  # bytes of a line (a real one has under 250): a longer line is skipped, noted
MAX_RUN = 1 << 20  # bytes of one line after which the rest of the input is not read (not a key log)
MAX_DAMAGED_RUN = 10_000  # damaged lines in a row after which the rest is not read
NOTED_LINES = 20  # damaged lines noted one by one; the others are counted

_LABEL = re.compile(rb"[A-Z][A-Z0-9_]*\Z")
_LABEL_NAMES = {name.encode("ascii"): name for name in LABELS}


class LineScanner:
    """The valid lines of a key log fed as byte chunks, in bounded memory.

    ``feed(chunk)`` / ``end()`` return ``[(offset, label, client random, secret)]`` (``offset``:
    where the line starts in the input); at most :data:`MAX_LINE` bytes of a line are held.
    ``notes``: the first :data:`NOTED_LINES` damaged lines (``"line N: why"``) and why the
    reading stopped; ``damaged``: damaged lines in all; ``stopped``: True once the input was given
    up (:data:`MAX_RUN`, :data:`MAX_DAMAGED_RUN`): later chunks are ignored."""

    __slots__ = ("line", "offset", "partial", "start", "long", "damaged", "run", "notes", "stopped", "valid",
                 "unused")

    def __init__(self):
        self.line = 0  # lines begun
        self.offset = 0  # bytes consumed
        self.partial = bytearray()  # the line being read (at most MAX_LINE bytes kept)
        self.start = 0  # its offset
        self.long = 0  # its length so far
        self.damaged = 0
        self.run = 0  # damaged lines in a row
        self.valid = 0
        self.unused = 0  # lines of labels this tool does not use (exporter, early data, RSA)
        self.notes: list[str] = []
        self.stopped = False

    def feed(self, chunk) -> list:
        out: list = []
        if self.stopped or not chunk:
            return out
        chunk = bytes(chunk)
        pos = 0
        n = len(chunk)
        while pos < n and not self.stopped:
            if self.long == 0:  # whole lines up to the chunk's last line end, in one go
                last = chunk.rfind(b"\n", pos)
                if last >= pos:
                    at = self.offset + pos
                    for raw in chunk[pos:last].split(b"\n"):
                        self.line += 1
                        self.start = at
                        at += len(raw) + 1
                        self._judge(raw, len(raw), out)
                        if self.stopped:
                            break
                    pos = last + 1
                    continue
            nl = chunk.find(b"\n", pos)
            end = n if nl < 0 else nl
            if self.long == 0:
                self.start = self.offset + pos
                self.line += 1
            take = end - pos
            if self.long + take <= MAX_LINE:
                self.partial += chunk[pos:end]
            elif len(self.partial) < MAX_LINE:
                self.partial += chunk[pos:pos + MAX_LINE - len(self.partial)]
            self.long += take
            if nl < 0:
                if self.long > MAX_RUN:
                    self._stop(f"line {self.line}: longer than {MAX_RUN:,} bytes without a line end: "
                               "not a key log; the rest is not read")
                break
            self._line(out)
            pos = nl + 1
        self.offset += n
        return out

    def end(self) -> list:
        """The last line (without a line end)."""
        out: list = []
        if self.long and not self.stopped:
            self._line(out)
        return out

    def _line(self, out: list) -> None:
        long, raw = self.long, bytes(self.partial)
        self.partial.clear()
        self.long = 0
        self._judge(raw, long, out)

    def _judge(self, raw: bytes, long: int, out: list) -> None:
        if long > MAX_LINE:
            return self._bad(f"longer than {MAX_LINE} bytes ({long:,})")
        got = parse_line(raw)
        if got is None:
            self.run = 0
            if raw.strip() and not raw.lstrip().startswith(b"#"):
                self.unused += 1
            return
        if type(got) is tuple:
            self.run = 0
            self.valid += 1
            out.append((self.start, got[0], got[1], got[2]))
            return
        self._bad(got)

    def _bad(self, why: str) -> None:
        self.damaged += 1
        self.run += 1
        if len(self.notes) < NOTED_LINES:
            self.notes.append(f"line {self.line}: {why}: skipped")
        if self.run >= MAX_DAMAGED_RUN:
            self._stop(f"line {self.line}: {MAX_DAMAGED_RUN:,} damaged lines in a row: not a key log; "
                       "the rest is not read")

    def _stop(self, why: str) -> None:
        self.stopped = True
        self.partial.clear()
        self.notes.append(why)

    def summary(self) -> list[str]:
        """The notes, and how many damaged lines were not noted one by one."""
        more = self.damaged - sum(1 for x in self.notes if x.endswith(": skipped"))
        return self.notes + ([f"{more:,} more damaged lines skipped"] if more > 0 else [])


def parse_line(raw: bytes):
    """``(label, client random, secret)`` of a key log line; None for a line to ignore (blank,
    comment, a label this tool does not use); a text saying why for a damaged line."""
    parts = raw.split()
    if not parts or parts[0][:1] == b"#":
        return None
    if len(parts) != 3:
        return f"{len(parts)} field{'s' if len(parts) != 1 else ''}, not 3 (label, client random, secret)"
    name = _LABEL_NAMES.get(parts[0])
    if name is None:
        # (exporter, early data, RSA: not needed to decrypt)
        return None if _LABEL.match(parts[0]) else "not a key log label"
    try:
        random = unhexlify(parts[1])
        secret = unhexlify(parts[2])
    except (_HexError, ValueError):
        return "not hexadecimal"
    if len(random) != 32:
        return f"client random of {len(random)} bytes, not 32"
    if len(secret) not in SECRET_SIZES[name]:
        return f"{name} secret of {len(secret)} bytes, not {' or '.join(map(str, SECRET_SIZES[name]))}"
    return name, random, secret


class KeyLog:
    """Secrets by client random: ``keylog.get(client_random) -> {label: secret}`` or None.

    Picklable (plain dicts of bytes), so the Spark job can ship it to executors;
    ``text()`` gives it back as key log text.  ``notes``: damaged lines (see :class:`LineScanner`);
    ``lines_ignored``: damaged lines and lines of labels not used, in all."""

    def __init__(self, text: str | bytes | None = None):
        self.secrets: dict[bytes, dict[str, bytes]] = {}
        self.lines_ignored = 0
        self.notes: list[str] = []
        if text:
            self.add_text(text)

    @classmethod
    def from_text(cls, text: str | bytes) -> "KeyLog":
        """The key log of key log ``text`` (NSS format lines); the Python API takes a ``str`` as a
        path, so text at hand is given as ``KeyLog.from_text(text)``."""
        return cls(text)

    def add_text(self, text: str | bytes) -> int:
        """Add the secrets of key log ``text``; returns how many secrets were added."""
        if isinstance(text, str):
            text = text.encode("utf-8", "replace")
        sc = LineScanner()
        lines = sc.feed(text) + sc.end()
        for _, label, random, secret in lines:
            self.secrets.setdefault(random, {})[label] = secret
        self.lines_ignored += sc.damaged + sc.unused
        self.notes += sc.summary()
        return len(lines)

    def add_dsb(self, secrets_type: int, data: bytes) -> int:
        """Add the payload of a pcapng Decryption Secrets Block (only TLS key logs are understood)."""
        if secrets_type != DSB_TLS_KEY_LOG:
            return 0
        return self.add_text(data)

    def update(self, other: "KeyLog") -> None:
        for random, secrets in other.secrets.items():
            self.secrets.setdefault(random, {}).update(secrets)

    def get(self, client_random: bytes) -> dict[str, bytes] | None:
        return self.secrets.get(client_random)

    def __contains__(self, client_random) -> bool:
        return client_random in self.secrets

    def __len__(self) -> int:
        return len(self.secrets)

    def __bool__(self) -> bool:
        return True  # an empty key log still means "decrypt when keys arrive" (pcapng secrets)

    def text(self) -> str:
        lines = []
        for random, secrets in self.secrets.items():
            for label, secret in secrets.items():
                lines.append(f"{label} {random.hex()} {secret.hex()}")
        return "\n".join(lines) + ("\n" if lines else "")


# --------------------------------------------------------------------------- an index of a large key log

REGION_BYTES = 4 << 20  # a region of the key log (at least; regions are merged past MAX_REGIONS)
REGION_BITS = 1 << 17  # Bloom filter bits per region (16 KiB)
MAX_REGIONS = 512  # regions kept: at most 8 MiB of filters whatever the key log's size


class RegionIndex:
    """Which regions of a key log may hold the lines of a client random, in bounded memory.

    The key log is cut into regions of :data:`REGION_BYTES` (line starts); each keeps a Bloom
    filter of the client randoms of its lines (:data:`REGION_BITS` bits, 4 probes taken from the
    random itself: client randoms are uniformly random).  Past :data:`MAX_REGIONS`, neighbouring
    regions are merged two by two (filters OR-ed), so the index never takes more than
    ``MAX_REGIONS * REGION_BITS / 8`` bytes however large the key log.  ``regions(random)``: the
    ``(start, end)`` byte spans to read again for that random (a false positive costs one read)."""

    __slots__ = ("starts", "filters", "span", "end")

    def __init__(self):
        self.starts: list[int] = []  # region start offsets
        self.filters: list[bytearray] = []
        self.span = REGION_BYTES  # bytes per region
        self.end = 0  # bytes indexed

    @staticmethod
    def _bits(random: bytes):
        m = REGION_BITS - 1
        x = int.from_bytes(random[:16], "little")
        return (x & m, (x >> 32) & m, (x >> 64) & m, (x >> 96) & m)

    def add(self, offset: int, random: bytes) -> None:
        if not self.starts or offset >= self.starts[-1] + self.span:
            self.starts.append(offset)
            self.filters.append(bytearray(REGION_BITS // 8))
            if len(self.starts) > MAX_REGIONS:
                self._merge()
        f = self.filters[-1]
        for b in self._bits(random):
            f[b >> 3] |= 1 << (b & 7)

    def _merge(self) -> None:
        starts, filters = self.starts, self.filters
        self.starts = starts[0::2]
        merged = []
        for i in range(0, len(filters), 2):
            a = filters[i]
            if i + 1 < len(filters):
                both = int.from_bytes(a, "little") | int.from_bytes(filters[i + 1], "little")
                a = bytearray(both.to_bytes(len(a), "little"))
            merged.append(a)
        self.filters = merged
        self.span *= 2

    def regions(self, random: bytes) -> list:
        bits = self._bits(random)
        out = []
        for i, f in enumerate(self.filters):
            if all(f[b >> 3] & (1 << (b & 7)) for b in bits):
                end = self.starts[i + 1] if i + 1 < len(self.starts) else self.end
                if out and out[-1][1] == self.starts[i]:
                    out[-1] = (out[-1][0], end)
                else:
                    out.append((self.starts[i], end))
        return out

    def nbytes(self) -> int:
        return sum(len(f) for f in self.filters)
