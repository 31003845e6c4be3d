"""The ``frames -V`` tree of a scanned performative and of a message read straight from their
encoding (render.frames._TreeWalk) against the tree of the decoded values (the codec's Reader, then
the renderer of decoded values, which the walk hands anything it does not read itself): the same
lines, the same error text, the same element budget spent; on hand-made edge cases, fuzzed
performatives and messages (valid and not), and the frames of every sample."""

from __future__ import annotations

import glob
import os

import pytest

import fuzzgen as F
from capture_frames import frames_of
from amqp_dissect.amqp import _spec
from amqp_dissect.amqp.framing import Delivery, Frame
from amqp_dissect.amqp.spec import BY_DESCRIPTOR
from amqp_dissect.errors import DissectError
from amqp_dissect.render.frames import frame_detail

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "**", "*.pcap*"), recursive=True))


def _frame(payload=None, perf_body=None, budget=None) -> Frame:
    fr = Frame.__new__(Frame)
    fr._init(None, 0, "10.0.0.1:5672", "10.0.0.2:40000", 1, 0, 1, 64, 2, 0, 0)
    if perf_body is not None:  # (as the scanner leaves a transfer, flow or disposition: its name known)
        fr._perf_body = perf_body
        spec = BY_DESCRIPTOR.get(perf_body[2]) if perf_body[:2] == b"\x00\x53" and len(perf_body) > 2 else None
        fr.pname = spec.name if spec is not None else None
    if payload is not None:
        dl = Delivery(0, 0, 0, b"t", 1, 0)
        dl.payload = payload
        dl.frames = 1
        dl.message_size = len(payload)
        dl.budget = budget
        fr.delivery = dl
    return fr


def _tree(fr):
    try:
        return frame_detail(fr)
    except DissectError as e:  # (a performative the Reader refuses: raised the same either way)
        return f"{type(e).__name__}: {e}"


def _walked_and_decoded(payload=None, perf_body=None, budget=None):
    """(lines, budget left, whether the walk showed the message) read from the bytes, and (lines,
    budget left) of the values decoded first."""
    walked = _frame(payload, perf_body, None if budget is None else [budget])
    left = walked.delivery.budget if payload is not None else None
    walked_lines = _tree(walked)
    walked_message = payload is not None and walked.delivery._sections is None and walked.delivery._error is None
    decoded = _frame(payload, perf_body, None if budget is None else [budget])
    if payload is not None:
        decoded.delivery.sections()  # (decoded and kept: the tree shows the decoded sections)
    if perf_body is not None:
        try:
            decoded.performative
        except DissectError:
            pass
    want_left = decoded.delivery.budget if payload is not None else None
    return (walked_lines, left, walked_message), (_tree(decoded), want_left)


def _same(payload=None, perf_body=None, budget=None) -> bool:
    (lines, left, walked), (want, want_left) = _walked_and_decoded(payload, perf_body, budget)
    assert lines == want, (payload, perf_body, budget)
    assert left == want_left, (payload, budget)
    return walked


def _enc(node) -> bytes:
    return bytes(F.encode(node))


_CODES = {spec.name: code for code, spec in BY_DESCRIPTOR.items() if type(code) is int}


def _section(name, body):
    return _enc(("described", (("ulong", _CODES[name], 0), body), 0))


S = lambda text, form=0: ("string", text, form)  # noqa: E731
SYM = lambda text, form=0: ("symbol", text, form)  # noqa: E731


@pytest.mark.parametrize("payload", [
    # what proton sends: header and properties as empty lists, a map of one, a string value
    _section("header", ("list", [], 0)) + _section("properties", ("list", [], 0))
    + _section("application-properties", ("map", [(S("seq"), ("long", 519, 0))], 0))
    + _section("amqp-value", S("payload 00000519 " + "x" * 60)),
    # every leaf type the walk reads, in a header and in properties, wide and narrow forms
    _section("header", ("list", [("boolean", True, 0), ("ubyte", 9, 0), ("uint", 70000, 0), ("null", None, 0),
                                 ("uint", 0, 0)], 1))
    + _section("properties", ("list", [("ulong", 2**64 - 1, 0), ("binary", b"\x00\xff" * 40, 1), S("to"),
                                       S("subj'ect"), S('re"ply'), ("null", None, 0), SYM("text/plain", 1),
                                       ("null", None, 0), ("timestamp", 1700000000123, 0),
                                       ("timestamp", -2**63, 0), S("g" * 200), ("uint", 3, 0), S("é\n\t")], 0)),
    # maps: keys of both string types, long keys, a key twice (one string, one symbol), values of any kind
    _section("application-properties", ("map", [(S("a"), ("int", -5, 0)), (SYM("a"), ("short", 300, 0)),
                                                (S("k" * 70), ("byte", -128, 0)),
                                                (S("m"), ("map", [(S("x"), ("null", None, 0))], 0)),
                                                (S("l"), ("list", [("ubyte", 1, 0)], 0)),
                                                (S("f"), ("double", 1.5, 0))], 1)),
    # keys that are not strings (the decoded map), sections in any order, a bare value, data sections
    _section("message-annotations", ("map", [(SYM("x-opt"), S("v")), (("ulong", 7, 0), ("uuid", bytes(16), 0))], 0))
    + _section("data", ("binary", b"abc", 0)) + _section("data", ("binary", b"", 1))
    + _section("header", ("list", [("null", None, 0)] * 5, 0)) + _enc(("string", "bare", 0)),
    # a composite as a field's value, extra fields, an undescribed list section, an unknown descriptor
    _section("properties", ("list", [("described", (("ulong", 0x24, 0), ("list", [], 0)), 0)], 0))
    + _section("header", ("list", [("null", None, 0)] * 7, 0))
    + _enc(("list", [("uint", 1, 0)], 0))
    + _enc(("described", (("ulong", 0x99, 0), S("what")), 0)),
    # strings and keys at the lengths the tree cuts at (120 and 60 characters), ASCII or not
    b"".join(_section("application-properties", ("map", [(S(c * n), S(c * m)) for n in (59, 60, 61)], 0))
             + _section("amqp-value", S(c * m)) for c in ("k", "é") for m in (119, 120, 121)),
    b"",
])
def test_a_message_reads_as_its_decoded_sections(payload):
    _same(payload)
    for budget in (0, 1, 2, 5, 100):  # the connection's element budget: spent alike, or the same error
        _same(payload, budget=budget)


def test_the_common_messages_are_walked_not_decoded():
    # (else the comparisons above would hold with the walk never used)
    payload = (_section("header", ("list", [("boolean", True, 0)], 0)) + _section("properties", ("list", [], 0))
               + _section("application-properties", ("map", [(S("seq"), ("long", 519, 0))], 0))
               + _section("amqp-value", S("payload")))
    assert _same(payload, budget=1000)
    (_, _, walked), _ = _walked_and_decoded(payload, budget=1000)
    assert walked


@pytest.mark.parametrize("payload", [
    b"\x00\x53",  # a descriptor cut short
    b"\x00\x53\x70\xc0\x05\x02\x41",  # a list whose count outruns its bytes
    b"\x00\x53\x70\xc0\x02\x01\x41\x41",  # a list whose size leaves bytes over
    b"\x00\x53\x74\xc1\x03\x01\xa1\x00",  # a map with an odd count
    b"\x00\x53\x77\xa1\x02\xff\xfe",  # a string that is not UTF-8
    b"\x00\x53\x77\xa3\x01\xe9",  # a symbol that is not ASCII
    b"\x00\x53\x70\xc0\x02\x01\x56\x02",  # a boolean byte that is neither 0 nor 1
    b"\x00\x53\x77\xb1\x00\x00\x00\x09abc",  # a string longer than the bytes left
    b"\x00\x53\x74\xc1\x05\x02\xa1\x01a\x70",  # a uint cut short in a map
    b"\x00\x53\x73\xd0\x00\x00\x00\x03\x00\x00\x00\x01",  # a list32 smaller than its count field
    b"\x00\x53\x73\xc0" + bytes([255, 255]) + b"\x40" * 255,  # a list of 255 nulls (a cap of a few elements)
])
def test_a_malformed_message_says_what_the_reader_says(payload):
    for budget in (None, 3, 1000):
        _same(payload, budget=budget)


@pytest.mark.parametrize("seed", range(6))
def test_fuzzed_messages_read_as_their_decoded_sections(seed):
    r = F.RandomSource(seed)
    for _ in range(150):
        payload = bytes(F.message(r))
        _same(payload, budget=r.choice((None, None, 0, 3, 40, 10**6)))
        if len(payload) > 2 and r.bool(0.3):  # cut short, or a byte changed
            cut = payload[:r.int(1, len(payload) - 1)]
            _same(cut)
            i = r.int(0, len(payload) - 1)
            _same(payload[:i] + bytes([r.int(0, 255)]) + payload[i + 1:])


@pytest.mark.parametrize("name", sorted(_spec.COMPOSITES))
def test_fuzzed_performatives_read_as_their_decoded_value(name):
    r = F.RandomSource(name)
    for _ in range(40):
        body = bytes(F.encode(F.composite(r, name)))
        _same(perf_body=body)
        _same(perf_body=body[:r.int(1, len(body))])


def test_the_scanned_performatives_are_walked():
    body = bytes(F.encode(F.performative("disposition", [("boolean", True, 0), ("uint", 3, 0), ("uint", 9, 0),
                                                   ("boolean", True, 0),
                                                   ("described", (("ulong", 0x24, 0), ("list", [], 0)), 0)])))
    fr = _frame(perf_body=body)
    lines = frame_detail(fr)
    assert fr._performative is None  # (not decoded: read from the bytes)
    assert "        role (boolean): receiver (true)" in lines
    assert "        state (accepted, descriptor 0x00000000:0x00000024)" in lines
    _same(perf_body=body)


@pytest.mark.parametrize("path", SAMPLES, ids=[os.path.relpath(p, ROOT) for p in SAMPLES])
def test_every_sample_frame_reads_as_its_decoded_values(path):
    seen = 0
    for fr in frames_of(path):
        dl = fr.delivery
        body = fr._perf_body if fr._performative is None else None
        if dl is None and body is None:
            continue
        payload = dl.payload if dl is not None and not dl.aborted and type(dl.payload) is bytes else None
        budget = dl.budget[0] if dl is not None and dl.budget is not None else None
        _same(payload, body, budget)
        seen += 1
    if os.path.basename(path) in ("plain_send_receive.pcap", "large_message.pcap", "azure_cbs.pcap"):
        assert seen  # (transfers: performatives and messages compared)


