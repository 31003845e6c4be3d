"""TLS session secrets: the NSS key log format (``SSLKEYLOGFILE``) and pcapng Decryption Secrets Blocks.

Sans-IO: :class:`KeyLog` takes text or bytes; the shells read the files.

A key log line is ``LABEL <client random, hex> <secret, hex>``.  TLS 1.2 uses
``CLIENT_RANDOM`` (the 48-byte master secret); TLS 1.3 uses one line per
traffic secret (``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``,
``CLIENT_TRAFFIC_SECRET_0``, ``SERVER_TRAFFIC_SECRET_0``).  Other labels (exporter,
early data, ``RSA``) are ignored, as are comments and malformed lines.
"""

from __future__ import annotations

# pcapng Decryption Secrets Block: block type and the secrets type of a TLS key log
DSB_BLOCK_TYPE = 0x0000000A
DSB_TLS_KEY_LOG = 0x544C534B  # "TLSK"

MASTER_SECRET = "CLIENT_RANDOM"
CLIENT_HS = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HS = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_AP = "CLIENT_TRAFFIC_SECRET_0"
SERVER_AP = "SERVER_TRAFFIC_SECRET_0"

LABELS = frozenset({MASTER_SECRET, CLIENT_HS, SERVER_HS, CLIENT_AP, SERVER_AP})


class KeyLog:
    """Secrets by client random: ``keylog.get(client_random) -> {label: secret}`` or None.

    Picklable (plain dicts of bytes), so the Spark job can ship it to executors;
    ``text()`` gives it back as key log text."""

    def __init__(self, text: str | bytes | None = None):
        self.secrets: dict[bytes, dict[str, bytes]] = {}
        self.lines_ignored = 0
        if text:
            self.add_text(text)

    def add_text(self, text: str | bytes) -> int:
        """Add the secrets of key log ``text``; returns how many secrets were added."""
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("ascii", "replace")
        added = 0
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3 or parts[0] not in LABELS:
                self.lines_ignored += 1
                continue
            try:
                random = bytes.fromhex(parts[1])
                secret = bytes.fromhex(parts[2])
            except ValueError:
                self.lines_ignored += 1
                continue
            if len(random) != 32 or not secret:
                self.lines_ignored += 1
                continue
            self.secrets.setdefault(random, {})[parts[0]] = secret
            added += 1
        return added

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

