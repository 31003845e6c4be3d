"""The specialised scanner (:mod:`amqp_dissect.amqp.scan`) against the generic decoder and proton.

Oracles:

* performatives are built from proton-encoded field values (python-qpid-proton's
  ``Data``), wrapped in a list and a descriptor of a randomly chosen form; proton
  decodes the whole body and must agree with the generic decoder, and the generic
  decoder's reading, together with the field types read from the XML here with
  ElementTree, gives what the scanner must return (or that it must decline);
* every transfer/flow/disposition of the sample captures, whose numbers are checked
  against the ground truth the client wrote (frame counts, delivery tags).
"""

from __future__ import annotations

import collections
import glob
import json
import os
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventkeys import analyze_file
from amqp_dissect.amqp import framing as amqp, codec
from amqp_dissect.amqp._spec import (DISPOSITION_STATE, FLOW_PROPERTIES, TRANSFER_DELIVERY_TAG, TRANSFER_HANDLE,
                                     TRANSFER_MORE)
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.amqp.codec import ABSENT, Composite, Reader, amqp_type_of
from amqp_dissect.dissect import Dissector
from amqp_dissect.errors import DissectError
from amqp_dissect.amqp.scan import ScanResult, Span, field_names, scan_into, scan_performative

from test_codec_proton import (
    INT_TYPES,
    SCALAR_NODES,
    SCALARS,
    XML_CODE_OF,
    XML_COMPOSITES,
    XML_PROVIDERS,
    XML_SYMBOL_OF,
    composite_node,
    constructors_used,
    maps_of,
    our_node,
    pn_decode_all,
    proton_encode,
    scalar_of,
    transcode,
    xml_fields,
    xml_primitive,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(REPO, "samples")
SCANNED = ("transfer", "flow", "disposition")
PLAIN = INT_TYPES | {"boolean", "binary", "string", "symbol", "timestamp"}
DELIVERY_STATES = [p for p in XML_PROVIDERS["delivery-state"] if p in XML_COMPOSITES]

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------- the oracle


def _mandatory(name: str) -> list[int]:
    return [i for i, f in enumerate(xml_fields(name)) if f.get("mandatory") == "true"]


def _plain(x, prim: str):
    if prim == "boolean":
        return ("plain", "bool", x)
    if prim == "binary":
        return ("plain", "bytes", bytes(x))
    if prim in ("string", "symbol"):
        return ("plain", "str", str(x))
    return ("plain", "int", int(x))


def expected_scan(buf, pos: int, end: int):
    """What the scanner must return, worked out from the generic decoder and the XML."""
    r = Reader(buf, pos, end)
    try:
        v = r.value()
    except DissectError:
        return None
    if not isinstance(v, Composite) or v.spec.name not in SCANNED:
        return None
    name = v.spec.name
    fields = xml_fields(name)
    items = v.value
    if len(items) > len(fields):
        return None
    for i in _mandatory(name):
        if i >= len(items) or items[i] is None:
            return None
    out = []
    for i, f in enumerate(fields):
        if i >= len(items):
            out.append(("absent",))
            continue
        x = items[i]
        if x is None:
            out.append(("null",))
            continue
        ftype = f.get("type")
        if ftype == "*":
            if f.get("requires") == "delivery-state":
                if not (isinstance(x, Composite) and x.spec.name in DELIVERY_STATES):
                    return None
                if x.value == [] and not _mandatory(x.spec.name):
                    out.append(("name", x.spec.name))
                else:
                    out.append(("span", our_node(x)))
            else:
                out.append(("span", our_node(x)))
            continue
        prim = xml_primitive(ftype)
        t = amqp_type_of(x)
        if t == prim:
            out.append(_plain(x, prim) if prim in PLAIN else ("span", our_node(x)))
        elif f.get("multiple") == "true" and t == "array" and x.element_type == prim:
            out.append(("span", our_node(x)))
        else:
            return None
    return XML_CODE_OF[name], tuple(out), r.pos


def normalize(buf, res):
    """The scanner's result in the oracle's form (checking the Python types on the way)."""
    if res is None:
        return None
    code, values, perf_end = res
    assert type(code) is int and type(values) is tuple and type(perf_end) is int
    name = next(n for n in SCANNED if XML_CODE_OF[n] == code)
    fields = xml_fields(name)
    assert len(values) == len(fields)
    assert field_names(code) == tuple(f.get("name") for f in fields)
    out = []
    for f, x in zip(fields, values):
        if x is ABSENT:
            out.append(("absent",))
        elif x is None:
            out.append(("null",))
        elif isinstance(x, Span):
            assert type(x.start) is int and type(x.stop) is int and x.start < x.stop
            r = Reader(buf, x.start, x.stop)
            decoded = r.value()
            assert r.pos == x.stop, "a span holds exactly one value"
            assert our_node(x.decode(buf)) == our_node(decoded)
            out.append(("span", our_node(decoded)))
        elif f.get("type") == "*":
            assert type(x) is str, x
            out.append(("name", x))
        else:
            assert type(x) in (int, bool, bytes, str), (f.get("name"), type(x))
            out.append(("plain", type(x).__name__, x))
    return code, tuple(out), perf_end


_RES = ScanResult()  # one result object for every scan_into below, as the framing layer reuses its own


def check(buf, pos: int = 0, end: int | None = None):
    """Scanner result == oracle; returns the oracle's expectation.  The framing layer's entry
    (scan_into, the rest of the result in a reused ScanResult) gives the same."""
    if end is None:
        end = len(buf)
    exp = expected_scan(buf, pos, end)
    res = scan_performative(buf, pos, end)
    assert normalize(buf, res) == exp
    values = scan_into(bytearray(buf), pos, end, [codec.DEFAULT_MAX_ELEMENTS], _RES)
    if res is None:
        assert values is None
    else:
        code, want, perf_end = res
        assert type(values) is tuple and values == want
        assert (_RES.code, _RES.perf_end) == (code, perf_end)
        assert _RES.name == next(n for n in SCANNED if XML_CODE_OF[n] == code)
        assert _RES.spans == any(type(x) is Span for x in values)
        # the fields the list encodes, as the generic decoder reads the list
        assert _RES.count == len(Reader(buf, pos, end).value().value)
    return exp


# --------------------------------------------------------------------------- building performatives


def _empty_state(name: str, symbolic: bool):
    desc = ("symbol", XML_SYMBOL_OF[name]) if symbolic else ("ulong", XML_CODE_OF[name])
    return ("described", (desc, ("list", [])))


def _symbolic(node):
    """The same composite with its descriptor as a symbol."""
    (_, code), value = node[1]
    name = next(n for n, c in XML_CODE_OF.items() if c == code)
    return ("described", (("symbol", XML_SYMBOL_OF[name]), value))


def good_value(f):
    """A value of the field's declared type (never null)."""
    ftype = f.get("type")
    if ftype == "*":
        assert f.get("requires") == "delivery-state"
        full = st.sampled_from(DELIVERY_STATES).flatmap(lambda n: composite_node(n, 1))
        return st.one_of(
            st.tuples(st.sampled_from(DELIVERY_STATES), st.booleans()).map(lambda t: _empty_state(*t)),
            full,
            full.map(_symbolic),
        )
    prim = xml_primitive(ftype)
    if prim in SCALARS:
        return scalar_of(prim)
    assert prim == "map", prim
    return maps_of(SCALAR_NODES)


# values that are not of a field's type (the oracle decides, e.g. a uint in a uint field is fine)
ODD_VALUES = st.one_of(
    SCALAR_NODES,
    maps_of(SCALAR_NODES),
    st.lists(SCALAR_NODES, max_size=2).map(lambda xs: ("list", xs)),
    st.tuples(st.sampled_from(sorted(XML_CODE_OF.values())), SCALAR_NODES).map(
        lambda t: ("described", (("ulong", t[0]), t[1]))
    ),
    st.sampled_from(sorted(XML_CODE_OF.values())).map(lambda c: ("described", (("ulong", c), ("list", [])))),
)

MODES = st.sampled_from(["keep", "narrow", "wide"])


def _list_header(count: int, content: bytes, form: str) -> bytes:
    if form == "list0" and count == 0:
        return b"\x45"
    if form in ("list0", "list8") and count < 256 and len(content) + 1 < 256:
        return bytes([0xC0, len(content) + 1, count])
    return b"\xd0" + struct.pack(">II", len(content) + 4, count)


def _descriptor(name: str, form: str) -> bytes:
    code = XML_CODE_OF[name]
    sym = XML_SYMBOL_OF[name].encode("ascii")
    if form == "smallulong":
        return bytes([0x00, 0x53, code])
    if form == "ulong":
        return b"\x00\x80" + code.to_bytes(8, "big")
    if form == "sym8":
        return b"\x00\xa3" + bytes([len(sym)]) + sym
    return b"\x00\xb3" + struct.pack(">I", len(sym)) + sym


@st.composite
def performatives(draw, names=SCANNED):
    """(name, encoded performative, field nodes) with mixed encodings of every width."""
    name = draw(st.sampled_from(names))
    fields = xml_fields(name)
    count = draw(st.one_of(st.just(len(fields)), st.integers(0, len(fields))))
    odd = draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, len(fields) - 1)))
    nodes = []
    for i, f in enumerate(fields[:count]):
        if i == odd:
            nodes.append(draw(ODD_VALUES))
        elif draw(st.integers(0, 19 if f.get("mandatory") == "true" else 4)) == 0:
            nodes.append(("null", None))
        else:
            nodes.append(draw(good_value(f)))
    # each field encoded by proton, then re-encoded in a mode of its own
    content = b"".join(transcode(proton_encode(n), draw(MODES)) for n in nodes)
    header = _list_header(count, content, draw(st.sampled_from(["list0", "list8", "list32"])))
    data = _descriptor(name, draw(st.sampled_from(["smallulong", "ulong", "sym8", "sym32"]))) + header + content
    return name, data, nodes


def _proton_agrees(data: bytes) -> None:
    """Proton reads the body as the generic decoder does (so the generic decoder is a fair oracle)."""
    [pn] = pn_decode_all(data)
    assert our_node(codec.decode(data)) == pn


# --------------------------------------------------------------------------- proton-built performatives


@SETTINGS
@given(performatives())
def test_scanner_agrees_with_the_generic_decoder(case):
    name, data, nodes = case
    _proton_agrees(data)
    exp = check(data)
    # the scanner declines only for a reason the oracle can name
    if exp is None:
        v = codec.decode(data)
        assert isinstance(v, Composite) and v.spec.name == name
    # a payload after a transfer, an offset into a larger buffer, other buffer types
    payload = b"\x00\x53\x75\xa0\x03abc"
    buf = b"\xff" * 5 + data + payload
    for b in (buf, bytearray(buf), memoryview(buf)):
        again = check(b, 5, len(buf))
        if exp is not None:
            assert again[2] == 5 + len(data)
            assert again[1] == exp[1]


@SETTINGS
@given(performatives())
def test_a_well_typed_performative_is_always_scanned(case):
    """Only nulls in mandatory fields or odd values make the scanner decline."""
    name, data, nodes = case
    fields = xml_fields(name)
    mandatory_ok = all(i < len(nodes) and nodes[i][0] != "null" for i in _mandatory(name))
    exp = check(data)
    if exp is None:
        v = codec.decode(data).value
        odd = [
            i for i, (f, x) in enumerate(zip(fields, v))
            if x is not None and f.get("type") != "*" and amqp_type_of(x) != xml_primitive(f.get("type"))
            or f.get("type") == "*" and x is not None and not (
                isinstance(x, Composite) and x.spec.name in DELIVERY_STATES)
        ]  # fmt: skip
        assert odd or not mandatory_ok


def test_every_width_and_form_of_a_transfer():
    fields = xml_fields("transfer")
    values = [("uint", 7), ("uint", 70000), ("binary", b"tag"), ("uint", 0), ("boolean", True),
              ("boolean", False), ("ubyte", 1), _empty_state("released", False), ("boolean", True),
              ("boolean", False), ("boolean", True)]  # fmt: skip
    assert len(values) == len(fields)
    seen = set()
    for mode in ("keep", "narrow", "wide"):
        content = b"".join(transcode(proton_encode(n), mode) for n in values)
        for lform in ("list8", "list32"):
            for dform in ("smallulong", "ulong", "sym8", "sym32"):
                data = _descriptor("transfer", dform) + _list_header(len(values), content, lform) + content
                _proton_agrees(data)
                exp = check(data)
                assert exp is not None
                seen.add(data[len(_descriptor("transfer", dform))])
                seen |= constructors_used(content)
                code, vals, end = scan_performative(data, 0, len(data))
                assert code == XML_CODE_OF["transfer"] and end == len(data)
                assert vals == (7, 70000, b"tag", 0, True, False, 1, "released", True, False, True)
    # list8/list32; uint0/smalluint/uint; true/false/boolean; vbin8/vbin32; ubyte; list0/list8/list32 states
    assert {0xC0, 0xD0, 0x43, 0x52, 0x70, 0x41, 0x42, 0x56, 0xA0, 0xB0, 0x50, 0x45} <= seen


def test_states_name_span_and_decline():
    head = [("boolean", True), ("uint", 3), ("uint", 9), ("boolean", True)]  # role, first, last, settled
    assert len(head) == DISPOSITION_STATE

    def disposition(state_node, mode="keep"):
        nodes = head + [state_node]
        content = b"".join(transcode(proton_encode(n), mode) for n in nodes)
        return _descriptor("disposition", "smallulong") + _list_header(len(nodes), content, "list8") + content

    for name in DELIVERY_STATES:
        for symbolic in (False, True):
            for mode in ("keep", "narrow", "wide"):
                data = disposition(_empty_state(name, symbolic), mode)
                _proton_agrees(data)
                exp = check(data)
                res = scan_performative(data, 0, len(data))
                state = res[1][DISPOSITION_STATE]
                if _mandatory(name):  # an empty received/declared/...: handed over as a span
                    assert isinstance(state, Span)
                    assert state.decode(data).spec.name == name
                else:
                    assert state == name
                assert exp[1][DISPOSITION_STATE][0] == ("span" if _mandatory(name) else "name")
    rejected = ("described", (("ulong", XML_CODE_OF["rejected"]), ("list", [
        ("described", (("ulong", XML_CODE_OF["error"]), ("list", [("symbol", "amqp:precondition-failed")])))])))
    data = disposition(rejected)
    check(data)
    state = scan_performative(data, 0, len(data))[1][DISPOSITION_STATE]
    assert isinstance(state, Span)
    v = state.decode(data)
    assert v.spec.name == "rejected" and v.field("error").field("condition") == "amqp:precondition-failed"
    # not a delivery state: declined
    for odd in [("uint", 1), ("described", (("ulong", XML_CODE_OF["error"]), ("list", []))),
                ("described", (("ulong", XML_CODE_OF["accepted"]), ("null", None))),
                ("described", (("ulong", 0x7777), ("list", [])))]:  # fmt: skip
        data = disposition(odd)
        assert check(data) is None
        assert scan_performative(data, 0, len(data)) is None


def test_flow_properties_are_a_span():
    nodes = [("uint", 1), ("uint", 2047), ("uint", 1), ("uint", 2047), ("uint", 0), ("uint", 0), ("uint", 5),
             ("null", None), ("boolean", False), ("boolean", False),
             ("map", [(("symbol", "k"), ("string", "v")), (("symbol", "n"), ("long", -1))])]  # fmt: skip
    content = b"".join(proton_encode(n) for n in nodes)
    data = _descriptor("flow", "smallulong") + _list_header(len(nodes), content, "list32") + content
    _proton_agrees(data)
    check(data)
    code, vals, end = scan_performative(data, 0, len(data))
    assert vals[:FLOW_PROPERTIES] == (1, 2047, 1, 2047, 0, 0, 5, None, False, False)
    props = vals[FLOW_PROPERTIES]
    assert isinstance(props, Span) and dict(props.decode(data)) == {"k": "v", "n": -1}


def test_absent_null_and_more_fields_than_the_spec():
    content = proton_encode(("boolean", False)) + proton_encode(("uint", 4))
    data = _descriptor("disposition", "smallulong") + _list_header(2, content, "list8") + content
    assert scan_performative(data, 0, len(data))[1] == (False, 4, ABSENT, ABSENT, ABSENT, ABSENT)
    content += proton_encode(("null", None))
    data = _descriptor("disposition", "smallulong") + _list_header(3, content, "list8") + content
    assert scan_performative(data, 0, len(data))[1] == (False, 4, None, ABSENT, ABSENT, ABSENT)
    content = b"".join(proton_encode(("null", None)) for _ in range(7))
    content = proton_encode(("boolean", False)) + proton_encode(("uint", 4)) + content[2:]
    data = _descriptor("disposition", "smallulong") + _list_header(7, content, "list8") + content
    assert len(codec.decode(data).value) == 7
    assert check(data) is None  # a seventh element: declined
    # a mandatory field null or absent: declined (the generic path reports it)
    for content, count in [(b"", 0), (proton_encode(("boolean", False)), 1), (b"\x40\x52\x04", 2)]:
        data = _descriptor("disposition", "smallulong") + _list_header(count, content, "list0") + content
        assert isinstance(codec.decode(data), Composite)
        assert check(data) is None


def test_other_performatives_and_values_are_declined():
    for name in XML_COMPOSITES:
        if name in SCANNED:
            continue
        data = proton_encode(("described", (("ulong", XML_CODE_OF[name]), ("list", []))))
        assert scan_performative(data, 0, len(data)) is None
    for node in [("uint", 0x14), ("list", []), ("described", (("ulong", 0x14), ("null", None))),
                 ("described", (("uint", 0x14), ("list", []))),
                 ("described", (("string", "amqp:transfer:list"), ("list", [])))]:  # fmt: skip
        data = proton_encode(node)
        assert check(data) is None


# --------------------------------------------------------------------------- truncation and garbage


@settings(SETTINGS, max_examples=80)
@given(performatives())
def test_truncation_at_every_byte(case):
    _, data, _ = case
    data = data + b"\x00\x53\x77\x45"
    for cut in range(len(data) + 1):
        check(data, 0, cut)
        check(data[:cut])


@settings(SETTINGS, max_examples=150)
@given(performatives(), st.data())
def test_corrupted_bytes(case, draw):
    _, data, _ = case
    buf = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 3))):
        i = draw.draw(st.integers(0, len(buf) - 1))
        buf[i] = draw.draw(st.integers(0, 255))
    check(bytes(buf))


PREFIXES = [bytes([0x00, 0x53, c]) for c in (0x13, 0x14, 0x15)] + [
    b"\x00\x80" + (0x14).to_bytes(8, "big"), b"\x00\xa3\x12amqp:transfer:list"]


@SETTINGS
@given(st.sampled_from(PREFIXES + [b""]), st.binary(max_size=64))
def test_random_garbage_never_raises(prefix, tail):
    data = prefix + tail
    check(data)
    for end in (-1, 0, 1, len(data) + 10):
        assert scan_performative(data, 0, end) is None or check(data, 0, end) is not None


def test_hostile_sizes_and_nesting():
    head = proton_encode(("boolean", True)) + proton_encode(("uint", 1))

    def disposition(state: bytes, count=5):
        content = head + b"\x40\x40" + state
        return _descriptor("disposition", "smallulong") + _list_header(count, content, "list32") + content

    accepted = b"\x00\x53\x24"
    released = b"\x00\x53\x26"
    cases = [
        accepted + b"\xd0\xff\xff\xff\xff\x00\x00\x00\x00",  # size beyond the frame
        accepted + b"\xc0\x00",  # size smaller than the count field
        accepted + b"\xc0\x03\x00\x40\x40",  # zero count, bytes left over
        accepted + b"\xd0\x00\x00\x00\x05\x00\x00\x00\x00\x40",  # the same in a list32
        accepted + b"\xc0\x02\x05\x40",  # count beyond the bytes
        released + b"\xc0\x05\x01\xe0\x02\x00\x40",  # an empty array of nulls: fine
        released + b"\xc0\x06\x01\xf0\x00\x01\x00\x01",  # truncated array32
        released + b"\xc0\x04\x01\xa1\x01\xff",  # invalid UTF-8 inside the state
        released + b"\xc0\x04\x01\xa3\x01\x80",  # non-ASCII symbol
        released + b"\xc0\x03\x01\x56\x02",  # boolean byte 2
        released + b"\xc0\x06\x01\x73\x00\x00\xd8\x00",  # a surrogate as char
        released + b"\xc0\x05\x01\xc1\x02\x01\x40",  # a map with an odd count
        released + b"\xc0\x02\x01\x0f",  # invalid constructor
        released + b"\xc0\x07\x01\xe0\x05\x01\x00\x53\x01\x00",  # nested described element constructor
    ]
    for state in cases:
        check(disposition(state))
    assert check(disposition(cases[5])) is not None
    assert all(check(disposition(state)) is None for state in cases[:5] + cases[6:])
    # nesting around the depth cap of the generic decoder
    results = set()
    for depth in range(40, 52):
        results.add(check(disposition(released + _nest(depth))) is None)
    assert results == {True, False}
    # zero-width arrays: one beyond the cap, and many at the cap beyond the element cap
    def zero_array(n):
        return b"\xf0" + struct.pack(">II", 5, n) + b"\x40"
    cap = codec.MAX_ZERO_WIDTH_ELEMENTS
    assert check(disposition(released + _list32([zero_array(cap)]))) is not None
    assert check(disposition(released + _list32([zero_array(cap + 1)]))) is None
    n = codec.DEFAULT_MAX_ELEMENTS // cap
    assert check(disposition(released + _list32([zero_array(cap)] * n))) is not None
    assert check(disposition(released + _list32([zero_array(cap)] * (n + 1)))) is None


def test_bad_bytes_in_the_performative_list():
    def transfer(content: bytes, count: int, size_extra: int = 0, tail: bytes = b""):
        return (_descriptor("transfer", "smallulong") + bytes([0xC0, len(content) + 1 + size_extra, count])
                + content + tail)  # fmt: skip

    good = b"\x52\x01\x52\x02\xa0\x01t\x43\x56\x01"
    assert check(transfer(good, 5)) is not None
    assert check(transfer(good, 5, 1, b"\x40")) is None  # a byte left inside the list
    assert check(transfer(good, 5, 0, b"\x40")) is not None  # a byte after it: the payload
    assert check(transfer(good[:-1] + b"\x02", 5)) is None  # boolean byte 2
    assert check(transfer(good[:-1] + b"\x01", 5, -1)) is None  # boolean cut by the list size
    assert check(transfer(b"\x52\x01\x52\x02\xa1\x01t", 3)) is None  # a string as delivery-tag
    assert check(transfer(b"\x53\x01", 1)) is None  # a ulong as handle
    assert check(transfer(b"\x70\x00\x00\x01\x00", 1)) is not None


def _list32(items: list[bytes]) -> bytes:
    content = b"".join(items)
    return b"\xd0" + struct.pack(">II", len(content) + 4, len(items)) + content


def _nest(depth: int) -> bytes:
    v = b"\x45"
    for _ in range(depth):
        v = _list32([v])
    return _list32([v])


# --------------------------------------------------------------------------- the sample captures


SAMPLE_PCAPS = sorted(glob.glob(os.path.join(SAMPLES, "*.pcap")))


def _frames_and_bodies(path, monkeypatch):
    """The Frame events of a capture, each with the raw body bytes its performative was read from."""
    bodies = []

    class Recording(Reader):
        __slots__ = ()

        def __init__(self, buf, pos=0, end=None, **kw):
            super().__init__(buf, pos, end, **kw)
            bodies.append(bytes(buf[pos:end]))

    monkeypatch.setattr(amqp, "Reader", Recording)
    # the framing layer scans the hot performatives first: make it decline, so that every
    # body goes through the (recording) generic decoder here
    monkeypatch.setattr(amqp, "SCAN_HOT", False)
    d = Dissector()
    events = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            events.extend(d.feed(rec))
    events.extend(d.finish())
    monkeypatch.undo()
    frames = [e for e in events if isinstance(e, amqp.Frame) and e.size > e.doff * 4]
    assert len(frames) == len(bodies)
    for fr, body in zip(frames, bodies):
        if fr.performative is not None:  # the body is the one this frame was read from
            assert our_node(codec.decode_one(body)[0]) == our_node(fr.performative)
    return list(zip(frames, bodies))


def test_every_sample_frame_scans_as_the_generic_decoder_reads_it(monkeypatch):
    assert len(SAMPLE_PCAPS) >= 8
    total = collections.Counter()
    for path in SAMPLE_PCAPS:
        truth = json.load(open(path[:-5] + ".truth.json"))
        counts = collections.Counter()
        tags = collections.Counter()
        started = {}
        for fr, body in _frames_and_bodies(path, monkeypatch):
            res = scan_performative(body, 0, len(body))
            check(body)  # the generic decoder agrees
            if fr.name not in SCANNED:
                assert res is None
                continue
            assert res is not None, (path, fr)
            counts[fr.name] += 1
            code, values, perf_end = res
            assert code == fr.performative.spec.descriptor_code
            if fr.name == "transfer":
                assert body[perf_end:] == fr.payload
                # one delivery = transfers on a link up to one without more=true; its tag is the first's
                key = (fr.conn, fr.direction, fr.channel, values[TRANSFER_HANDLE])
                started.setdefault(key, values[TRANSFER_DELIVERY_TAG])
                if values[TRANSFER_MORE] is not True:
                    tags[started.pop(key).hex()] += 1
            else:
                assert perf_end == len(body)
            for i, fname in enumerate(field_names(code)):
                want = fr.performative.field(fname)
                got = values[i]
                if isinstance(got, Span):
                    assert our_node(got.decode(body)) == our_node(want)
                elif isinstance(got, str) and fname == "state":
                    assert want.spec.name == got and want.value == []
                else:
                    assert got is want if want is None or want is ABSENT else got == want
        expected = collections.Counter()
        for c in truth["connections"]:
            for side in ("frame_counts_sent", "frame_counts_received"):
                for name in SCANNED:
                    expected[name] += c[side].get(name, 0)
        assert counts == +expected, path
        truth_tags = collections.Counter(
            dl["delivery_tag"] for link in truth["links"] for dl in link["deliveries"]
        )
        assert tags == truth_tags, path
        total += counts
    assert all(total[n] > 0 for n in SCANNED)


def _rendered(path):
    from amqp_dissect.render.frames import event_json, frame_detail, frame_summary

    d = Dissector()
    out = []
    with open(path, "rb") as f:
        for rec in open_capture(f):
            for ev in d.feed(rec):
                if isinstance(ev, amqp.Frame):
                    out.append((frame_summary(ev), frame_detail(ev), json.dumps(event_json(ev), sort_keys=True),
                                [str(n) for n in ev.notes], ev.name))
    return out


def _tables(path):
    from amqp_dissect.results.analytics import Analyzer

    an = analyze_file(path, Analyzer(), Dissector(messages=False))
    return [getattr(an, m)() for m in ("connection_rows", "session_rows", "link_rows", "delivery_rows",
                                       "stall_rows", "violation_rows", "error_rows", "transaction_rows")]


def test_frames_render_and_analyse_the_same_scanned_or_decoded(monkeypatch):
    # the generic decoder is the oracle: with the scanner switched off, every frame of every
    # sample renders (summary, -V tree, jsonl) to the same text and carries the same notes
    for path in SAMPLE_PCAPS:
        scanned = _rendered(path), _tables(path)
        monkeypatch.setattr(amqp, "SCAN_HOT", False)
        decoded = _rendered(path), _tables(path)
        monkeypatch.undo()
        assert scanned[0] == decoded[0], os.path.basename(path)
        assert scanned[1] == decoded[1], os.path.basename(path)  # and the analysis reads the same values
