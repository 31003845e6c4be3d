"""The message columns of a delivery (amqp/message.py) against python-qpid-proton's codec.

Messages with every properties and header field, typed ids (ulong, uuid, binary, string),
delivery and message annotations, application properties and each body kind are encoded by proton;
proton's own decoder (``proton.Data``) walks the encoded sections and gives the values every
column must hold: the section names and bytes (the body's size, the bare message's digest), the
properties, the header fields present, the maps.  The scan is fed the message whole, one byte at a
time and in random chunks: the same columns each time.  Through the pipeline: proton engines send
the messages split over many transfer frames, and the deliveries table says the same.
"""

from __future__ import annotations

import hashlib
import uuid

import proton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Data, Message

from amqp_dissect.amqp.message import MAX_KEYS, MAX_VALUE_CHARS, MESSAGE_COLUMNS, PREFIX_CAP, MessageScan

# the spec's section descriptors (AMQP 1.0, part 3.2) and field lists, written from the document:
# the oracle's side, not the generated tables the code reads
SECTIONS = {0x70: "header", 0x71: "delivery-annotations", 0x72: "message-annotations", 0x73: "properties",
            0x74: "application-properties", 0x75: "data", 0x76: "amqp-sequence", 0x77: "amqp-value",
            0x78: "footer"}
BARE = (0x73, 0x74, 0x75, 0x76, 0x77)
HEADER = ("durable", "priority", "ttl", "first-acquirer", "delivery-count")
HEADER_DEFAULTS = {"durable": False, "priority": 4, "first-acquirer": False, "delivery-count": 0}
PROPERTIES = ("message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
              "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
              "reply-to-group-id")


def proton_sections(encoded: bytes) -> list:
    """(descriptor code, bytes, value) of each section, as proton's decoder reads them."""
    out = []
    pos = 0
    while pos < len(encoded):
        d = Data()
        n = d.decode(encoded[pos:])
        d.rewind()
        d.next()
        o = d.get_object()
        out.append((int(o.descriptor), encoded[pos:pos + n], _own(o.value)))
        pos += n
    return out


def _own(v):
    """proton's value with its binary copied out of the decoder's memory (a memoryview there)."""
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, dict):
        return {_own(k): _own(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_own(x) for x in v]
    return v


def _id(v):
    if v is None:
        return None, None
    if isinstance(v, proton.ulong):
        return str(int(v)), "ulong"
    if isinstance(v, uuid.UUID):
        return str(v), "uuid"
    if isinstance(v, (bytes, memoryview)):
        return bytes(v).hex(), "binary"
    return str(v), "string"


def _jv(v):
    """A map value as the JSON columns write AMQP values (the oracle's own conversion)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, memoryview)):
        return bytes(v).hex()
    return str(v)


def expected(encoded: bytes) -> dict:
    """Every message column, from proton's decoding of ``encoded``."""
    secs = proton_sections(encoded)
    by = {code: value for code, _raw, value in secs}
    want = {c: None for c in MESSAGE_COLUMNS}
    want["message_read"] = "read"
    want["message_sections"] = [SECTIONS[c] for c, _r, _v in secs]
    body = [(c, raw) for c, raw, _v in secs if c in (0x75, 0x76, 0x77)]
    want["body_kind"] = SECTIONS[body[0][0]] if body else "none"
    want["body_size"] = sum(len(raw) for _c, raw in body)
    want["bare_digest"] = hashlib.blake2b(b"".join(raw for c, raw, _v in secs if c in BARE), digest_size=16).hexdigest()
    h = list(by.get(0x70) or [])
    defaults = []
    for i, name in enumerate(HEADER):
        v = h[i] if i < len(h) else None
        if v is None and name in HEADER_DEFAULTS:
            defaults.append(name)
            v = HEADER_DEFAULTS[name]
        col = {"delivery-count": "header_delivery_count"}.get(name, name.replace("-", "_"))
        want[col] = v if v is None or isinstance(v, bool) else int(v)
    want["header_defaults"] = defaults
    if 0x73 in by:
        p = dict(zip(PROPERTIES, list(by[0x73]) + [None] * len(PROPERTIES)))
        want["message_id"], want["message_id_type"] = _id(p["message-id"])
        want["correlation_id"], want["correlation_id_type"] = _id(p["correlation-id"])
        want["user_id"] = None if p["user-id"] is None else bytes(p["user-id"]).hex()
        for name in ("to", "subject", "reply-to", "content-type", "content-encoding", "group-id", "reply-to-group-id"):
            want[name.replace("-", "_")] = None if p[name] is None else str(p[name])
        for name in ("absolute-expiry-time", "creation-time"):
            want[name.replace("-", "_")] = None if p[name] is None else int(p[name]) * 1_000_000
        want["group_sequence"] = None if p["group-sequence"] is None else int(p["group-sequence"])
    for code, col in ((0x71, "delivery_annotations"), (0x72, "message_annotations"), (0x74, "application_properties")):
        if code in by and by[code] is not None:
            want[col] = {str(k): _jv(v) for k, v in by[code].items()}
    return want


def scan(encoded: bytes, chunks) -> dict:
    s = MessageScan()
    pos = 0
    for n in chunks:
        s.feed(encoded[pos:pos + n])
        pos += n
    s.feed(encoded[pos:])
    s.end()
    return dict(zip(MESSAGE_COLUMNS, s.cells()))


# --------------------------------------------------------------------------- strategies

_text = st.text(max_size=40)
_ascii = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)  # (symbols are ASCII)
_ids = st.one_of(
    st.none(),
    st.integers(0, 2**64 - 1).map(proton.ulong),
    st.uuids(),
    st.binary(max_size=24),
    st.text(max_size=40),
)
_values = st.one_of(st.integers(-2**31, 2**31 - 1), _text, st.booleans(), st.uuids(), st.binary(max_size=16))
_maps = st.none() | st.dictionaries(st.text(min_size=1, max_size=20), _values, max_size=8)
_annotations = st.none() | st.dictionaries(
    _ascii.map(lambda k: proton.symbol("x-opt-" + k)), _values, max_size=6)
_times = st.none() | st.integers(0, 4_000_000_000_000).map(lambda ms: ms / 1000)


@st.composite
def messages(draw):
    m = Message()
    m.id = draw(_ids)
    m.correlation_id = draw(_ids)
    uid = draw(st.none() | st.binary(max_size=16))
    if uid is not None:
        m.user_id = uid
    for attr in ("address", "subject", "reply_to", "content_type", "content_encoding", "group_id",
                 "reply_to_group_id"):
        v = draw(st.none() | (_ascii if attr.startswith("content") else _text))
        if v is not None:
            setattr(m, attr, v)
    for attr in ("expiry_time", "creation_time"):
        v = draw(_times)
        if v is not None:
            setattr(m, attr, v)
    gs = draw(st.none() | st.integers(0, 2**31 - 1))
    if gs is not None:
        m.group_sequence = gs
    m.durable = draw(st.booleans())
    m.priority = draw(st.integers(0, 255))
    ttl = draw(st.none() | st.integers(1, 2**31).map(lambda ms: ms / 1000))
    if ttl is not None:
        m.ttl = ttl
    m.first_acquirer = draw(st.booleans())
    m.delivery_count = draw(st.integers(0, 2**31))
    m.instructions = draw(_annotations)
    m.annotations = draw(_annotations)
    m.properties = draw(_maps)
    kind = draw(st.sampled_from(["value", "data", "sequence", "none"]))
    if kind == "value":
        m.body = draw(st.one_of(_text, st.integers(-100, 100), st.binary(max_size=50),
                                # (proton writes a Python int as an AMQP long: the long's range)
                                st.lists(st.integers(-2**63, 2**63 - 1), max_size=5)))
    elif kind == "data":
        m.body = draw(st.binary(max_size=300))
        m.inferred = True
    elif kind == "sequence":
        m.body = draw(st.lists(st.integers(-100, 100), max_size=10))
        m.inferred = True
    return m


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages(), st.lists(st.integers(1, 40), max_size=30))
def test_every_column_agrees_with_proton(m, chunks):
    encoded = m.encode()
    want = expected(encoded)
    assert scan(encoded, [len(encoded)]) == want
    assert scan(encoded, [1] * len(encoded)) == want
    assert scan(encoded, chunks) == want


def _footer() -> bytes:
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(0x78)
    d.put_map()
    d.enter()
    d.put_symbol("x-opt-checksum")
    d.put_string("abc")
    d.exit()
    d.exit()
    return d.encode()


def test_footer_is_named_and_not_digested():
    m = Message(body="hello", id="f-1", properties={"k": 1})
    encoded = m.encode() + _footer()
    want = expected(encoded)
    assert want["message_sections"][-1] == "footer"
    got = scan(encoded, [3] * (len(encoded) // 3))
    assert got == want
    assert got["bare_digest"] == dict(zip(MESSAGE_COLUMNS, _scan_cells(m.encode())))["bare_digest"]


def _scan_cells(b):
    s = MessageScan()
    s.feed(b)
    s.end()
    return s.cells()


def test_ids_keep_their_types_distinct():
    """The same digits as a ulong, a string and binary are three different ids."""
    got = []
    for v in (proton.ulong(42), "42", b"42", uuid.UUID(int=42)):
        c = dict(zip(MESSAGE_COLUMNS, _scan_cells(Message(id=v, correlation_id=v, body="x").encode())))
        got.append((c["message_id"], c["message_id_type"], c["correlation_id"], c["correlation_id_type"]))
    assert got == [("42", "ulong", "42", "ulong"), ("42", "string", "42", "string"),
                   ("3432", "binary", "3432", "binary"),
                   (str(uuid.UUID(int=42)), "uuid", str(uuid.UUID(int=42)), "uuid")]


def test_absent_null_and_value_stay_distinct():
    """No header section: every header field's default, named; a header that says the default value:
    the value, not named; a header field encoded as null: the default, named; no properties section:
    its columns null, the sections say so."""
    value = b"\x00\x53\x77\xa1\x01x"  # amqp-value "x"
    said = b"\x00\x53\x70\xc0\x05\x03\x41\x50\x04\x40" + value  # header [true, 4, null]
    for raw in (value, said):  # proton's decoder reads them as written
        assert [SECTIONS[c] for c, _r, _v in proton_sections(raw)] == (["amqp-value"] if raw is value
                                                                       else ["header", "amqp-value"])
    bare = dict(zip(MESSAGE_COLUMNS, _scan_cells(value)))
    c = dict(zip(MESSAGE_COLUMNS, _scan_cells(said)))
    assert bare["message_sections"] == ["amqp-value"]
    assert (bare["durable"], bare["priority"], bare["first_acquirer"], bare["header_delivery_count"]) == \
        (False, 4, False, 0)
    assert bare["header_defaults"] == ["durable", "priority", "first-acquirer", "delivery-count"]
    assert bare["ttl"] is None
    assert c["message_sections"] == ["header", "amqp-value"]
    assert (c["durable"], c["priority"], c["ttl"]) == (True, 4, None)
    assert c["header_defaults"] == ["first-acquirer", "delivery-count"]
    assert bare["message_id"] is None and bare["message_id_type"] is None and bare["message_read"] == "read"


def proton_sections_names(b):
    return [SECTIONS[c] for c, _r, _v in proton_sections(b)]


def test_maps_are_bounded_and_say_so():
    props = {f"k{i:03d}": "v" * (MAX_VALUE_CHARS + 10 if i == 0 else 3) for i in range(MAX_KEYS + 5)}
    c = dict(zip(MESSAGE_COLUMNS, _scan_cells(Message(body="x", properties=props).encode())))
    ap = c["application_properties"]
    assert ap["@cut"] == {"keys": 5, "values": ["k000"]}
    assert len(ap) == MAX_KEYS + 1
    assert ap["k000"] == "v" * MAX_VALUE_CHARS


def test_sections_beyond_the_prefix_are_sized_not_read():
    """Application properties that end beyond PREFIX_CAP: truncated, the properties before them read,
    the body still sized and the digest still made over every byte."""
    m = Message(id="big-1", subject="s", body=b"z" * 10, properties={"blob": "x" * PREFIX_CAP})
    encoded = m.encode()
    want = expected(encoded)
    got = scan(encoded, [1000] * (len(encoded) // 1000))
    assert got["message_read"] == "truncated"
    assert got["application_properties"] is None
    for col in ("message_id", "subject", "body_kind", "body_size", "message_sections", "bare_digest"):
        assert got[col] == want[col], col


def test_aborted_lost_incomplete_and_malformed():
    encoded = Message(id="m-1", subject="s", body="x" * 100).encode()
    s = MessageScan()
    s.feed(encoded[:40])
    c = dict(zip(MESSAGE_COLUMNS, s.cells()))
    assert c["message_read"] == "incomplete" and c["bare_digest"] is None
    s.end("lost")
    c = dict(zip(MESSAGE_COLUMNS, s.cells()))
    assert c["message_read"] == "lost" and c["message_id"] == "m-1" and c["bare_digest"] is None
    s = MessageScan()
    s.feed(encoded[:40])
    s.end("aborted")
    assert dict(zip(MESSAGE_COLUMNS, s.cells()))["message_read"] == "aborted"
    s = MessageScan()
    s.feed(encoded[:-3])
    s.end()
    c = dict(zip(MESSAGE_COLUMNS, s.cells()))
    assert c["message_read"].startswith("malformed: the message ends inside the amqp-value section")
    assert c["message_id"] == "m-1" and c["bare_digest"] is None
    for bad, why in ((b"\x40", "a section is a described value"), (b"\x00\x53\x99\x40", "unknown section"),
                     (b"\x00\x53\x77\xa1\x01x\x00\x53\x73\x45", "properties section after the amqp-value section"),
                     (b"\x00\x53\x77\xa1\x01x" * 2, "a second amqp-value")):
        s = MessageScan()
        s.feed(bad)
        s.end()
        assert why in dict(zip(MESSAGE_COLUMNS, s.cells()))["message_read"], bad


def test_a_hostile_section_head_is_bounded():
    """A symbolic descriptor longer than the head cap is malformed, not buffered without end."""
    s = MessageScan()
    head = b"\x00\xb3" + (100000).to_bytes(4, "big")
    s.feed(head)
    for _ in range(10):
        s.feed(b"a" * 1000)
    s.end()
    assert dict(zip(MESSAGE_COLUMNS, s.cells()))["message_read"].startswith("malformed")
    assert s.held is None


def test_memory_per_delivery_is_bounded():
    """A 60 KB application-properties section fed in 1 KB frames is held while it is read (never
    beyond PREFIX_CAP), a 1 MB body is only passed over (nothing held), and the end frees all."""
    m = Message(id="mem", properties={"big": "p" * 60000}, body=b"d" * 1_000_000, inferred=True)
    encoded = m.encode()
    s = MessageScan()
    held = []
    for i in range(0, len(encoded), 1024):
        s.feed(encoded[i:i + 1024])
        held.append(0 if s.held is None else len(s.held))
    s.end()
    body_start = len(encoded) - 1_000_000
    assert 0 < max(held) <= PREFIX_CAP
    assert all(h <= 1024 for i, h in enumerate(held) if i * 1024 > body_start)  # (a section head at most)
    assert s.held is None and type(s.digest) is str
    got, want = dict(zip(MESSAGE_COLUMNS, s.cells())), expected(encoded)
    assert got.pop("application_properties") == {"big": "p" * MAX_VALUE_CHARS, "@cut": {"keys": 0, "values": ["big"]}}
    want.pop("application_properties")
    assert got == want
