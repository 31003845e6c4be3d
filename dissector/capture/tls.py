"""TLS record layer: decrypts a TLS stream with the secrets of a key log (sans-IO).

One :class:`TlsLayer` per TCP connection (the stream-layer interface of the
Dissector: ``feed`` / ``gap`` / ``finish`` return StreamData / StreamGap /
PacketNote events of the inner stream).  It parses the records of both
directions, the plaintext handshake (ClientHello and ServerHello randoms, the
negotiated version and cipher suite), looks the client random up in the
:class:`~amqp_dissect.capture.keylog.KeyLog`, derives the traffic keys and
decrypts:

- TLS 1.3: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
  TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_CCM_SHA256, TLS_AES_128_CCM_8_SHA256;
  handshake then application traffic secrets, KeyUpdate;
- TLS 1.2 (any key exchange: the key log gives the master secret): AES-GCM,
  ChaCha20-Poly1305 and AES-CBC with HMAC-SHA1/SHA256/SHA384 (MAC-then-encrypt
  or encrypt_then_mac).

The ciphers, HMAC and HKDF come from the ``cryptography`` package.

Damage: a record that fails authentication becomes a note and a StreamGap of its
size; a capture gap inside or before a record becomes a StreamGap, then the
layer looks for the next plausible record header and finds the record sequence
number again by trying the next ones.  Without keys the layer counts the bytes it
could not read and reports them in one note per connection at the end.
"""

from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, hmac
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from ..errors import ExpertNote
from ..events import PacketNote, StreamData, StreamGap
from .keylog import CLIENT_AP, CLIENT_HS, MASTER_SECRET, SERVER_AP, SERVER_HS

NOTE = "note"
WARN = "warn"
ERROR = "error"

# record content types
CT_CCS = 20
CT_ALERT = 21
CT_HANDSHAKE = 22
CT_APPDATA = 23
CT_HEARTBEAT = 24
CONTENT_TYPES = {CT_CCS: "Change Cipher Spec", CT_ALERT: "Alert", CT_HANDSHAKE: "Handshake",
                 CT_APPDATA: "Application Data", CT_HEARTBEAT: "Heartbeat"}

# handshake message types
HS_CLIENT_HELLO = 1
HS_SERVER_HELLO = 2
HS_FINISHED = 20
HS_KEY_UPDATE = 24

TLS12 = 0x0303
TLS13 = 0x0304
VERSION_NAMES = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}

MAX_RECORD = (1 << 14) + 2048  # largest TLSCiphertext.length a peer may send
_HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
_RESYNC_TRIES = 256  # record sequence numbers tried after a gap

ALERT_DESCRIPTIONS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 40: "handshake_failure",
                      42: "bad_certificate", 46: "certificate_unknown", 48: "unknown_ca", 50: "decode_error",
                      51: "decrypt_error", 70: "protocol_version", 80: "internal_error", 90: "user_canceled",
                      109: "missing_extension", 112: "unrecognized_name", 116: "certificate_required",
                      120: "no_application_protocol"}


class Suite:
    """What a cipher suite needs: cipher kind ("gcm" | "chacha" | "ccm" | "cbc"), key and IV
    lengths (fixed IV for TLS 1.2 AEAD), the MAC hash of CBC suites, the PRF / HKDF hash."""

    __slots__ = ("name", "kind", "key_len", "iv_len", "mac", "hash", "tag_len")

    def __init__(self, name, kind, key_len, iv_len, mac, hash_, tag_len=16):
        self.name = name
        self.kind = kind
        self.key_len = key_len
        self.iv_len = iv_len
        self.mac = mac
        self.hash = hash_
        self.tag_len = tag_len


_S256, _S384, _S1 = hashes.SHA256, hashes.SHA384, hashes.SHA1

TLS13_SUITES = {
    0x1301: Suite("TLS_AES_128_GCM_SHA256", "gcm", 16, 12, None, _S256),
    0x1302: Suite("TLS_AES_256_GCM_SHA384", "gcm", 32, 12, None, _S384),
    0x1303: Suite("TLS_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, None, _S256),
    0x1304: Suite("TLS_AES_128_CCM_SHA256", "ccm", 16, 12, None, _S256),
    0x1305: Suite("TLS_AES_128_CCM_8_SHA256", "ccm", 16, 12, None, _S256, 8),
}


def _tls12_suites() -> dict:
    out = {}
    # AEAD: (id, name, kind, key_len, fixed iv, prf hash)
    for sid, name, kind, klen, ivlen, h in (
        (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, _S256),
        (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, _S384),
        (0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, _S256),
        (0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, _S384),
        (0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, _S256),
        (0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, _S384),
        (0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", "gcm", 16, 4, _S256),
        (0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", "gcm", 32, 4, _S384),
        (0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, _S256),
        (0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, _S256),
        (0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "chacha", 32, 12, _S256),
        (0xC09C, "TLS_RSA_WITH_AES_128_CCM", "ccm", 16, 4, _S256),
        (0xC09D, "TLS_RSA_WITH_AES_256_CCM", "ccm", 32, 4, _S256),
        (0xC0AC, "TLS_ECDHE_ECDSA_WITH_AES_128_CCM", "ccm", 16, 4, _S256),
        (0xC0AD, "TLS_ECDHE_ECDSA_WITH_AES_256_CCM", "ccm", 32, 4, _S256),
    ):
        out[sid] = Suite(name, kind, klen, ivlen, None, h)
    # CBC: (id, name, key_len, mac hash, prf hash)
    for sid, name, klen, mac, h in (
        (0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 16, _S1, _S256),
        (0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 32, _S1, _S256),
        (0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 16, _S1, _S256),
        (0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 32, _S1, _S256),
        (0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 16, _S256, _S256),
        (0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", 32, _S384, _S384),
        (0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 16, _S256, _S256),
        (0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", 32, _S384, _S384),
        (0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", 16, _S1, _S256),
        (0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", 32, _S1, _S256),
        (0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", 16, _S256, _S256),
        (0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", 32, _S256, _S256),
        (0x0033, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", 16, _S1, _S256),
        (0x0039, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", 32, _S1, _S256),
        (0x0067, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", 16, _S256, _S256),
        (0x006B, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", 32, _S256, _S256),
    ):
        out[sid] = Suite(name, "cbc", klen, 16, mac, h)
    return out


TLS12_SUITES = _tls12_suites()


# --------------------------------------------------------------------------- key derivation

def hkdf_expand_label(hash_cls, secret: bytes, label: bytes, context: bytes, length: int) -> bytes:
    """TLS 1.3 HKDF-Expand-Label (RFC 8446 section 7.1)."""
    full = b"tls13 " + label
    info = struct.pack("!HB", length, len(full)) + full + bytes([len(context)]) + context
    return HKDFExpand(hash_cls(), length, info).derive(secret)


def tls12_prf(hash_cls, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2 PRF: P_<hash>(secret, label + seed) (RFC 5246 section 5), HMAC from ``cryptography``."""
    seed = label + seed

    def mac(data: bytes) -> bytes:
        h = hmac.HMAC(secret, hash_cls())
        h.update(data)
        return h.finalize()

    out = b""
    a = seed
    while len(out) < length:
        a = mac(a)
        out += mac(a + seed)
    return out[:length]


class _Keys:
    """The read state of one direction: cipher, IV / MAC key, record sequence number."""

    __slots__ = ("suite", "aead", "key", "iv", "mac_key", "seq", "secret", "tls13", "etm")

    def __init__(self, suite: Suite, key: bytes, iv: bytes, mac_key: bytes = b"", secret: bytes = b"",
                 tls13: bool = False, etm: bool = False):
        self.suite = suite
        self.key = key
        self.iv = iv
        self.mac_key = mac_key
        self.secret = secret
        self.tls13 = tls13
        self.etm = etm
        self.seq = 0
        kind = suite.kind
        if kind == "gcm":
            self.aead = AESGCM(key)
        elif kind == "chacha":
            self.aead = ChaCha20Poly1305(key)
        elif kind == "ccm":
            self.aead = AESCCM(key, tag_length=suite.tag_len)
        else:
            self.aead = None

    def __reduce__(self):  # the cipher objects do not pickle: rebuilt from the key
        return (_restore_keys, (self.suite, self.key, self.iv, self.mac_key, self.secret, self.tls13, self.etm,
                                self.seq))

    @classmethod
    def tls13_from_secret(cls, suite: Suite, secret: bytes) -> "_Keys":
        key = hkdf_expand_label(suite.hash, secret, b"key", b"", suite.key_len)
        iv = hkdf_expand_label(suite.hash, secret, b"iv", b"", 12)
        return cls(suite, key, iv, secret=secret, tls13=True)

    def updated(self) -> "_Keys":
        """The keys after a TLS 1.3 KeyUpdate."""
        h = self.suite.hash
        nxt = hkdf_expand_label(h, self.secret, b"traffic upd", b"", h.digest_size)
        return _Keys.tls13_from_secret(self.suite, nxt)

    def decrypt(self, ctype: int, version: int, header: bytes, body: bytes, seq: int):
        """(content type, plaintext) or None when the record does not authenticate."""
        suite = self.suite
        if self.tls13:
            nonce = (int.from_bytes(self.iv, "big") ^ seq).to_bytes(12, "big")
            try:
                inner = self.aead.decrypt(nonce, body, header)
            except (InvalidTag, ValueError):
                return None
            # TLSInnerPlaintext: content, content type, zero padding
            end = len(inner)
            while end and inner[end - 1] == 0:
                end -= 1
            if not end:
                return None
            return inner[end - 1], inner[: end - 1]
        kind = suite.kind
        if kind == "gcm" or kind == "ccm":
            if len(body) < 8 + suite.tag_len:
                return None
            nonce = self.iv + body[:8]
            ct = body[8:]
            aad = struct.pack("!QBHH", seq, ctype, version, len(ct) - suite.tag_len)
            try:
                return ctype, self.aead.decrypt(nonce, ct, aad)
            except (InvalidTag, ValueError):
                return None
        if kind == "chacha":
            if len(body) < 16:
                return None
            nonce = (int.from_bytes(self.iv, "big") ^ seq).to_bytes(12, "big")
            aad = struct.pack("!QBHH", seq, ctype, version, len(body) - 16)
            try:
                return ctype, self.aead.decrypt(nonce, body, aad)
            except (InvalidTag, ValueError):
                return None
        return self._decrypt_cbc(ctype, version, body, seq)

    def _mac(self, data: bytes) -> bytes:
        h = hmac.HMAC(self.mac_key, self.suite.mac())
        h.update(data)
        return h.finalize()

    def _decrypt_cbc(self, ctype: int, version: int, body: bytes, seq: int):
        maclen = self.suite.mac.digest_size
        if self.etm:
            if len(body) < 32 + maclen or (len(body) - maclen) % 16:
                return None
            enc, tag = body[:-maclen], body[-maclen:]
            if self._mac(struct.pack("!QBHH", seq, ctype, version, len(enc)) + enc) != tag:
                return None
            dec = Cipher(algorithms.AES(self.key), modes.CBC(enc[:16])).decryptor()
            plain = dec.update(enc[16:]) + dec.finalize()
            pad = plain[-1]
            if pad + 1 > len(plain):
                return None
            return ctype, plain[: len(plain) - pad - 1]
        if len(body) < 32 or len(body) % 16:
            return None
        dec = Cipher(algorithms.AES(self.key), modes.CBC(body[:16])).decryptor()
        plain = dec.update(body[16:]) + dec.finalize()
        pad = plain[-1]
        if pad + 1 + maclen > len(plain) or plain[len(plain) - pad - 1 : -1] != bytes([pad]) * pad:
            return None
        content = plain[: len(plain) - pad - 1 - maclen]
        tag = plain[len(plain) - pad - 1 - maclen : len(plain) - pad - 1]
        if self._mac(struct.pack("!QBHH", seq, ctype, version, len(content)) + content) != tag:
            return None
        return ctype, content


def _restore_keys(suite, key, iv, mac_key, secret, tls13, etm, seq) -> _Keys:
    k = _Keys(suite, key, iv, mac_key=mac_key, secret=secret, tls13=tls13, etm=etm)
    k.seq = seq
    return k


# --------------------------------------------------------------------------- the layer

class _Dir:
    __slots__ = ("index", "buf", "keys", "pending_keys", "hs", "resync", "seq_unknown", "records",
                 "encrypted_hs", "lost_hint", "ok_keys")

    def __init__(self, index: int):
        self.index = index
        self.buf = bytearray()
        self.keys: _Keys | None = None  # read keys in use (None: plaintext)
        self.pending_keys: _Keys | None = None  # TLS 1.2: keys that a ChangeCipherSpec activates
        self.hs = bytearray()  # handshake message bytes not parsed yet
        self.resync = False  # looking for a record header after a gap
        self.seq_unknown = False  # records were lost: the next sequence number must be searched
        self.records = 0
        self.encrypted_hs = False  # TLS 1.3: records after ServerHello are protected
        self.lost_hint = 0
        self.ok_keys = None  # the last keys a record authenticated with


class TlsRecord:
    """One record as -V shows it: direction, content type, version, length, what it carried."""

    __slots__ = ("direction", "ctype", "version", "length", "inner_type", "inner_len", "packet", "info")

    def __init__(self, direction, ctype, version, length, packet, inner_type=None, inner_len=None, info=""):
        self.direction = direction
        self.ctype = ctype
        self.version = version
        self.length = length
        self.packet = packet
        self.inner_type = inner_type
        self.inner_len = inner_len
        self.info = info

    def describe(self) -> str:
        ver = VERSION_NAMES.get(self.version, f"0x{self.version:04x}")
        ct = CONTENT_TYPES.get(self.ctype, f"type {self.ctype}")
        s = f"TLS record: {ct}, {ver}, length {self.length}"
        if self.inner_type is not None:
            s += f" -> {CONTENT_TYPES.get(self.inner_type, self.inner_type)} ({self.inner_len} bytes)"
        if self.info:
            s += f" [{self.info}]"
        return s


class TlsLayer:
    """Decrypts the TLS stream of one TCP connection (direction 0: client -> server).

    ``keylog``: a :class:`~amqp_dissect.capture.keylog.KeyLog` (looked up when keys are
    needed, so secrets added later, e.g. from pcapng blocks, still count).
    ``records``: a list to append a :class:`TlsRecord` per record to (for -V), or None."""

    name = "tls"

    def __init__(self, conn: str, keylog, records: list | None = None):
        self.conn = conn
        self.keylog = keylog
        self.dirs = (_Dir(0), _Dir(1))
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version: int | None = None
        self.suite_id: int | None = None
        self.suite: Suite | None = None
        self.etm = False
        self.secrets: dict | None = None
        self.undecrypted = 0  # record bytes that could not be read (no keys / unsupported)
        self.undecrypted_packet = None
        self.undecrypted_ts = None
        self.why_not: str | None = None  # why records are not decrypted
        self.record_log = records
        self.failed = 0
        self.wrong_keys = False  # the key log's secrets did not decrypt the first record: not used

    # -- interface -------------------------------------------------------------

    def feed(self, direction: int, data: bytes, ts: float, packet: int) -> list:
        d = self.dirs[direction]
        d.buf += data
        out: list = []
        self._process(d, ts, packet, out)
        return out

    def gap(self, direction: int, size: int, ts: float, packet: int, cause=None) -> list:
        d = self.dirs[direction]
        lost = size
        if d.buf and not d.resync and len(d.buf) >= 5:
            # a record was cut: its inner bytes are lost
            (length,) = struct.unpack_from("!H", d.buf, 3)
            lost = max(length - (len(d.buf) - 5), size)
        d.buf.clear()
        d.hs.clear()  # a handshake message cut by the gap cannot be parsed
        d.resync = True
        d.lost_hint += size
        if d.keys is not None:
            d.seq_unknown = True
        out = [self._note(packet, ts, NOTE, f"TLS: {size} bytes missing from the capture; "
                                            "looking for the next record")]
        if d.keys is not None or d.encrypted_hs:
            out.append(StreamGap(self.conn, direction, lost, ts, packet))
        return out

    def finish(self, ts: float | None, packet: int | None) -> list:
        out: list = []
        for d in self.dirs:
            if d.buf and not d.resync:
                out.append(self._note(packet, ts, WARN,
                                      f"TLS: stream ends inside a record ({len(d.buf)} bytes)"))
                self._undecrypted(len(d.buf), packet, ts)
            d.buf.clear()
        if self.undecrypted:
            why = self.why_not or "records not decrypted"
            note = self._note(self.undecrypted_packet, self.undecrypted_ts, WARN,
                              f"{why}: {self.undecrypted} bytes not decrypted")
            note.extra["undecrypted"] = self.undecrypted  # the connection's count in the tables
            out.append(note)
        return out

    # -- records -----------------------------------------------------------------

    def _note(self, packet, ts, severity: str, message: str) -> PacketNote:
        return PacketNote(packet, ts, ExpertNote(severity, "tls", message), conn=self.conn)

    def _undecrypted(self, n: int, packet, ts) -> None:
        if not self.undecrypted:
            self.undecrypted_packet = packet
            self.undecrypted_ts = ts
        self.undecrypted += n

    def _process(self, d: _Dir, ts: float, packet: int, out: list) -> None:
        buf = d.buf
        pos = 0
        n = len(buf)
        plain: list = []  # consecutive application data, emitted as one StreamData
        while True:
            if d.resync:
                found = _find_record(buf, pos, n)
                if found is None:
                    keep = min(n - pos, 4)
                    pos = n - keep
                    break
                if found < 0:
                    pos = -found - 1
                    break
                if found > pos:
                    d.lost_hint += found - pos
                pos = found
                d.resync = False
            if n - pos < 5:
                break
            ctype = buf[pos]
            version = (buf[pos + 1] << 8) | buf[pos + 2]
            length = (buf[pos + 3] << 8) | buf[pos + 4]
            if not (20 <= ctype <= 24) or buf[pos + 1] != 3 or length > MAX_RECORD:
                out.append(self._note(packet, ts, WARN,
                                      f"TLS: not a record header (type {ctype}, version 0x{version:04x}, "
                                      f"length {length}): looking for the next record"))
                if d.keys is not None or d.encrypted_hs:
                    d.seq_unknown = True
                d.resync = True
                pos += 1
                continue
            if n - pos < 5 + length:
                break
            header = bytes(buf[pos : pos + 5])
            body = bytes(buf[pos + 5 : pos + 5 + length])
            pos += 5 + length
            d.records += 1
            self._record(d, ctype, version, header, body, ts, packet, out, plain)
        if plain:
            out.append(StreamData(self.conn, d.index, b"".join(plain), ts, packet))
        if pos:
            del buf[:pos]

    def _flush(self, d: _Dir, plain: list, ts, packet, out: list) -> None:
        if plain:
            out.append(StreamData(self.conn, d.index, b"".join(plain), ts, packet))
            plain.clear()

    def _record(self, d: _Dir, ctype: int, version: int, header: bytes, body: bytes, ts, packet,
                out: list, plain: list) -> None:
        rec = None
        if self.record_log is not None:
            rec = TlsRecord(d.index, ctype, version, len(body), packet)
            self.record_log.append(rec)
        keys = d.keys
        if ctype == CT_CCS:
            self._change_cipher_spec(d, ts, packet, out)
            return
        if keys is None:
            self._clear_record(d, ctype, body, ts, packet, out, plain)
            return
        res = self._decrypt(d, keys, ctype, version, header, body)
        if res is None:
            self._auth_failed(d, keys, len(body), rec, ts, packet, out, plain)
            return
        d.seq_unknown = False
        d.ok_keys = keys
        keys.seq += 1
        inner_type, content = res
        if rec is not None:
            rec.inner_type = inner_type
            rec.inner_len = len(content)
        if inner_type == CT_APPDATA:
            plain.append(content)
        elif inner_type == CT_HANDSHAKE:
            d.hs += content
            self._handshake(d, ts, packet, out, plain)
        elif inner_type == CT_ALERT and len(content) >= 2:
            self._flush(d, plain, ts, packet, out)
            self._alert(content, ts, packet, out)

    def _change_cipher_spec(self, d: _Dir, ts, packet, out: list) -> None:
        # TLS 1.2: this direction is encrypted from the next record on.  TLS 1.3 sends one for
        # middlebox compatibility only (also before the ServerHello, after a HelloRetryRequest)
        if self.version is not None and self.version != TLS13:
            if d.pending_keys is None:
                self._prepare_keys(d, packet, ts, out)
            d.keys = d.pending_keys
            d.pending_keys = None
            if d.keys is None:
                d.encrypted_hs = True  # encrypted from here on, without keys

    def _clear_record(self, d: _Dir, ctype: int, body: bytes, ts, packet, out: list, plain: list) -> None:
        """A record of a direction without keys: the handshake and alerts in the clear, or bytes
        not decrypted."""
        if d.encrypted_hs or (self.version == TLS13 and ctype == CT_APPDATA):
            self._undecrypted(len(body), packet, ts)
            if ctype == CT_APPDATA and self.why_not is None:
                self._why(d)
            return
        if ctype == CT_HANDSHAKE:
            d.hs += body
            self._handshake(d, ts, packet, out, plain)
        elif ctype == CT_ALERT and len(body) >= 2:
            self._alert(body, ts, packet, out)
        elif ctype == CT_APPDATA:
            self._undecrypted(len(body), packet, ts)
            if self.why_not is None:
                self._why(d)

    @staticmethod
    def _decrypt(d: _Dir, keys, ctype: int, version: int, header: bytes, body: bytes):
        """(inner type, content) of a protected record, None when it does not authenticate (after a
        gap, at each of the next _RESYNC_TRIES sequence numbers)."""
        if not d.seq_unknown:
            return keys.decrypt(ctype, version, header, body, keys.seq)
        for k in range(_RESYNC_TRIES):
            res = keys.decrypt(ctype, version, header, body, keys.seq + k)
            if res is not None:
                keys.seq += k
                return res
        return None

    def _auth_failed(self, d: _Dir, keys, size: int, rec, ts, packet, out: list, plain: list) -> None:
        self.failed += 1
        if not d.seq_unknown and keys.seq == 0 and d.ok_keys is not keys:
            # the first record protected with these keys (handshake or application secrets)
            # does not authenticate: the key log's secrets are wrong (or damaged), not the
            # record; the rest of the direction is counted as not decrypted, as without keys
            self._wrong_keys(d, size, ts, packet, out, plain)
            if rec is not None:
                rec.info = "authentication failed (wrong keys)"
            return
        keys.seq += 1
        self._flush(d, plain, ts, packet, out)
        out.append(self._note(packet, ts, ERROR,
                              f"TLS: record of {size} bytes failed authentication "
                              "(corrupted, or wrong keys): skipped"))
        out.append(StreamGap(self.conn, d.index, max(size - 17, 0), ts, packet))
        if rec is not None:
            rec.info = "authentication failed"

    def _wrong_keys(self, d: _Dir, size: int, ts, packet, out: list, plain: list) -> None:
        first = not self.wrong_keys
        self.wrong_keys = True
        d.keys = None
        d.pending_keys = None
        d.encrypted_hs = True
        self._flush(d, plain, ts, packet, out)
        self._undecrypted(size, packet, ts)
        if self.version != TLS13:  # TLS 1.2: both directions' keys come from the one master secret
            other = self.dirs[1 - d.index]
            other.pending_keys = None
            if other.keys is not None and other.ok_keys is None:
                other.keys = None
                other.encrypted_hs = True
        if not first:
            return
        side = "client" if d.index == 0 else "server"
        random = self.client_random.hex() if self.client_random is not None else "unknown"
        self.why_not = f"TLS, wrong secrets in the key log for client random {random}"
        out.append(self._note(packet, ts, ERROR,
                              f"TLS: the {side}'s first record protected with the key log's secrets ({size} bytes) "
                              "failed authentication: wrong secrets; the connection is not decrypted"))

    def _why(self, d: _Dir) -> None:
        if self.client_random is None:
            self.why_not = "TLS, no ClientHello seen (capture joined mid-connection)"
        elif self.secrets is None:
            self.why_not = f"TLS, no keys for client random {self.client_random.hex()}"
        else:
            self.why_not = "TLS, records not decrypted"

    def _alert(self, body: bytes, ts, packet, out: list) -> None:
        level, desc = body[0], body[1]
        name = ALERT_DESCRIPTIONS.get(desc, str(desc))
        sev = NOTE if desc == 0 else WARN
        out.append(self._note(packet, ts, sev, f"TLS alert: {'fatal' if level == 2 else 'warning'} {name}"))

    # -- handshake ---------------------------------------------------------------

    def _handshake(self, d: _Dir, ts, packet, out: list, plain: list) -> None:
        hs = d.hs
        pos = 0
        while len(hs) - pos >= 4:
            mtype = hs[pos]
            mlen = int.from_bytes(hs[pos + 1 : pos + 4], "big")
            if len(hs) - pos - 4 < mlen:
                break
            body = bytes(hs[pos + 4 : pos + 4 + mlen])
            pos += 4 + mlen
            if mtype == HS_CLIENT_HELLO and d.index == 0 and len(body) >= 34:
                self.client_random = body[2:34]
            elif mtype == HS_SERVER_HELLO and d.index == 1 and len(body) >= 38:
                self._server_hello(body, ts, packet, out)
            elif mtype == HS_FINISHED and self.version == TLS13 and d.keys is not None:
                # the next records of this direction use the application traffic secret
                label = CLIENT_AP if d.index == 0 else SERVER_AP
                secret = self.secrets.get(label) if self.secrets else None
                if secret is None:
                    d.keys = None
                    d.encrypted_hs = True
                    self.why_not = self.why_not or (f"TLS, no {label} for client random "
                                                    f"{self.client_random.hex()}")
                else:
                    d.keys = _Keys.tls13_from_secret(self.suite, secret)
            elif mtype == HS_KEY_UPDATE and self.version == TLS13 and d.keys is not None:
                d.keys = d.keys.updated()
                out.append(self._note(packet, ts, NOTE, "TLS 1.3 KeyUpdate"))
        if pos:
            del hs[:pos]

    def _server_hello(self, body: bytes, ts, packet, out: list) -> None:
        random = body[2:34]
        if random == _HRR_RANDOM:
            return  # HelloRetryRequest: the real ServerHello follows
        self.server_random = random
        version = (body[0] << 8) | body[1]
        p = 34
        sid_len = body[p]
        p += 1 + sid_len
        if len(body) < p + 3:
            return
        suite_id = (body[p] << 8) | body[p + 1]
        p += 3  # cipher suite, compression method
        etm = False
        if len(body) >= p + 2:
            ext_end = min(len(body), p + 2 + ((body[p] << 8) | body[p + 1]))
            p += 2
            while p + 4 <= ext_end:
                etype = (body[p] << 8) | body[p + 1]
                elen = (body[p + 2] << 8) | body[p + 3]
                edata = body[p + 4 : p + 4 + elen]
                if etype == 43 and len(edata) >= 2:  # supported_versions
                    version = (edata[0] << 8) | edata[1]
                elif etype == 22:  # encrypt_then_mac
                    etm = True
                p += 4 + elen
        self.version = version
        self.suite_id = suite_id
        self.etm = etm
        suite = (TLS13_SUITES if version == TLS13 else TLS12_SUITES).get(suite_id)
        name = suite.name if suite else f"cipher suite 0x{suite_id:04x}"
        keys = "keys in the key log" if self._lookup() else "no keys in the key log"
        out.append(self._note(packet, ts, NOTE, f"TLS handshake: {VERSION_NAMES.get(version, hex(version))}, "
                                                f"{name}{', encrypt-then-MAC' if etm and suite and suite.kind == 'cbc' else ''}"
                                                f"; {keys}"))
        if version == TLS13:
            self.suite = TLS13_SUITES.get(suite_id)
            client, server = self.dirs
            client.encrypted_hs = server.encrypted_hs = True
            self._prepare_keys13(packet, ts, out)
        else:
            self.suite = TLS12_SUITES.get(suite_id)
            if self.suite is None:
                self.why_not = f"TLS, cipher suite 0x{suite_id:04x} not supported for decryption"

    def _lookup(self) -> dict | None:
        if self.client_random is None or self.keylog is None:
            return None
        self.secrets = self.keylog.get(self.client_random)
        return self.secrets

    def _prepare_keys13(self, packet, ts, out: list) -> None:
        if self.suite is None:
            self.why_not = f"TLS, cipher suite 0x{self.suite_id:04x} not supported for decryption"
            return
        secrets = self._lookup()
        if not secrets or CLIENT_HS not in secrets or SERVER_HS not in secrets:
            self.secrets = secrets
            self._why(self.dirs[0])
            if secrets:
                self.why_not = f"TLS, no handshake traffic secrets for client random {self.client_random.hex()}"
            return
        for d, label in zip(self.dirs, (CLIENT_HS, SERVER_HS)):
            d.keys = _Keys.tls13_from_secret(self.suite, secrets[label])

    def _prepare_keys(self, d: _Dir, packet, ts, out: list) -> None:
        """TLS 1.2: derive both directions' keys from the master secret (at the first ChangeCipherSpec)."""
        if self.suite is None or self.server_random is None or self.wrong_keys:
            return
        secrets = self._lookup()
        master = secrets.get(MASTER_SECRET) if secrets else None
        if master is None:
            self._why(d)
            return
        s = self.suite
        mac_len = s.mac.digest_size if s.mac else 0
        iv_len = s.iv_len if s.kind != "cbc" else 0
        size = 2 * (mac_len + s.key_len + iv_len)
        block = tls12_prf(s.hash, master, b"key expansion", self.server_random + self.client_random, size)
        p = 0
        parts = []
        for n in (mac_len, mac_len, s.key_len, s.key_len, iv_len, iv_len):
            parts.append(block[p : p + n])
            p += n
        cmac, smac, ckey, skey, civ, siv = parts
        for dd, key, iv, mac in ((self.dirs[0], ckey, civ, cmac), (self.dirs[1], skey, siv, smac)):
            if dd.keys is None:
                dd.pending_keys = _Keys(s, key, iv, mac_key=mac, etm=self.etm)


def _find_record(buf, pos: int, n: int):
    """Offset of the next plausible record header at or after ``pos``; None if there is none
    (all of buf scanned), ``-(i+1)`` when a candidate at i needs more bytes to be confirmed."""
    i = pos
    while i + 5 <= n:
        c = buf[i]
        if 20 <= c <= 24 and buf[i + 1] == 3 and buf[i + 2] <= 4:
            length = (buf[i + 3] << 8) | buf[i + 4]
            if 0 < length <= MAX_RECORD:
                nxt = i + 5 + length
                if nxt + 3 <= n:
                    if 20 <= buf[nxt] <= 24 and buf[nxt + 1] == 3 and buf[nxt + 2] <= 4:
                        return i
                elif c == CT_APPDATA and buf[i + 2] == 3:
                    return -(i + 1) if nxt > n else i
        i += 1
    return None if i >= n - 4 else -(i + 1)
