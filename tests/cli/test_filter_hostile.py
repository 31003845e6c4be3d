"""Hostile display filters (issue 29): no filter text makes ``frames -Y`` fail with anything but
its one-line error and exit 2, and no parsed filter raises on any frame.

* reproducers of the crashes the issue names (3,000 parentheses, a 5,000-digit integer, a regular
  expression whose repeat count ``re`` cannot hold) and of their relatives (deep ``not``, long
  ``or`` chains, undecodable bytes, a newline in the filter), through the CLI;
* a fuzzer of filter texts (token soup: real and made-up field names, every operator, numbers of
  any length, strings holding regular expressions, stray punctuation): each one parses or is a
  :class:`FilterError` whose error line is one line, never another exception;
* a fuzzer of well-formed filters (a field, an operator, a value of any kind) evaluated on every
  event of the samples and of damaged / wrong-typed captures made by tests/support/fuzzgen.py (two of
  each kind of event: alike in type and in every field's value class): evaluation never raises, ``not
  F`` selects exactly the events ``F`` leaves, and ``-e`` prints every field of every event.

``AMQP_DISSECT_FUZZ_SCALE`` multiplies the example counts, as in tests/fuzz/test_fuzz.py.
"""

from __future__ import annotations

import io
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzgen
from amqp_dissect.amqp.spec import CHOICES
from amqp_dissect.cli.main import EXIT_OK, EXIT_USAGE, main
from amqp_dissect.filter import (FIELDS, MAX_DEPTH, DisplayFilter, FieldPrinter, FilterError, FrameContext,
                                 compile_filter)
from amqp_dissect.pipelines.runs.local import CaptureSource

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")
SCALE = float(os.environ.get("AMQP_DISSECT_FUZZ_SCALE", "1"))


def budget(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_bad_filter(capsys, flt, what=""):
    rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", flt)
    assert rc == EXIT_USAGE and out == "", err
    assert err.startswith("amqp-dissect: bad display filter ") and err.count("\n") == 1, err
    assert what in err, err
    assert len(err) < 1000  # the filter text is quoted, cut short


# --------------------------------------------------------------------------- the named crashes


@pytest.mark.parametrize("flt, what", [
    ("(" * 3000 + "packet" + ")" * 3000, f"nested more than {MAX_DEPTH} deep"),  # was RecursionError
    ("not " * 3000 + "packet", f"nested more than {MAX_DEPTH} deep"),
    ("! " * 3000 + "packet", f"nested more than {MAX_DEPTH} deep"),
    ("packet == " + "9" * 5000, "a number of 5000 characters"),  # was ValueError: Exceeds the limit (4300 digits)
    ("packet == -0x" + "f" * 5000, "a number of 5003 characters"),
    ("packet == " + "9" * 200, "out of range"),
    ("packet in {1 " + "9" * 30 + "}", "out of range"),
    ('note matches "a{4294967295}"', "beyond the limits of Python's re"),  # was OverflowError
    ('container-id ~ "a{4294967296}"', ""),
    ('name matches "' + "(" * 5000 + "a" + ")" * 5000 + '"', ""),  # re: too deep or too many groups
    ('name matches "(?P<x>a)(?P<x>b)"', "bad regular expression"),
    ("packet == 1 or " * 20000 + "packet == 1", "at most 65536"),
    ('delivery-id == "a\nb"', "'delivery-id' is a number"),  # a newline in the filter: still one line
    ("packet\n==\n\x00", "unexpected character"),
    ("x" * 100000, "at most 65536"),
    ("y" * 60000, "unknown field"),
    ('name == "\udcff\udcfe" and packet == \udcff', ""),  # undecodable bytes of a command line
])
def test_each_named_crash_is_one_line_and_exit_2(capsys, flt, what):
    assert_bad_filter(capsys, flt, what)


@pytest.mark.parametrize("name", ["no\nsuch", "x" * 100000, "\udcff", "a.b.c.d", "", "source.", "(", "packet "])
def test_a_bad_field_name_is_one_line_and_exit_2(capsys, name):
    rc, out, err = run(capsys, "frames", OUTCOMES, "-T", "fields", "-e", name)
    assert rc == EXIT_USAGE and out == "", err
    assert err.count("\n") == 1 and len(err) < 1000 and "unknown field" in err, err


def test_fuzzed_field_names_are_known_or_a_filter_error():
    rnd = random.Random(24)
    pool = _NAMES + _PIECES + ["-", "_", ".", "address", "condition"]
    known = 0
    for _ in range(int(2000 * SCALE)):
        name = "".join(rnd.choice(pool) for _ in range(rnd.randint(1, 3)))
        try:
            FieldPrinter([name])
            known += 1
        except FilterError as e:
            assert "\n" not in e.one_line()
    assert known > 100


def test_nesting_up_to_the_bound_parses_and_evaluates(capsys):
    deep = "(" * (MAX_DEPTH - 1) + "not performative == transfer" + ")" * (MAX_DEPTH - 1)
    rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", deep, "-T", "fields", "-e", "performative")
    assert rc == EXIT_OK, err
    assert out and "transfer" not in out
    assert_bad_filter(capsys, "(" * (MAX_DEPTH + 1) + "packet" + ")" * (MAX_DEPTH + 1), "nested")


def test_a_long_or_chain_evaluates_without_recursion(capsys):
    """2,000 alternatives (was: one closure nested in the next, RecursionError at the first frame)."""
    chain = " or ".join(f"delivery-id == {i}" for i in range(2000, 0, -1))
    chain_and = " and ".join(["packet"] * 1200)
    rc, out, err = run(capsys, "frames", OUTCOMES, "-Y", f"({chain}) and {chain_and}", "-T", "fields",
                       "-e", "delivery-id")
    assert rc == EXIT_OK, err
    # delivery ids 1..10 of the capture (the sender's and the receiver's transfers, the redeliveries)
    rc, want, _ = run(capsys, "frames", OUTCOMES, "-Y", "delivery-id >= 1 and performative == transfer",
                      "-T", "fields", "-e", "delivery-id")
    assert out == want and out


# --------------------------------------------------------------------------- parse fuzzing

_NAMES = sorted(FIELDS) + ["source.address", "error.condition", "target.address", "delivery_id", "x", "lnk",
                           "frame.", "a.b.c", "source.nosuch", "0x", "1e", "_"]
_CHOICE_WORDS = sorted({n for c in CHOICES.values() for n in c.values()})
_PIECES = ["==", "!=", "<", ">", "<=", ">=", "eq", "ne", "lt", "gt", "le", "ge", "contains", "matches", "~",
           "and", "or", "not", "&&", "||", "!", "in", "{", "}", ",", "(", ")", "true", "false", "null", "=",
           '"', "\\", "'", "[", "]", ":", ".", "-", "+", "0x", "e", "\n", "\x00", "\t", " "]
_REGEX = ["a{4294967295}", "a{1,4294967296}", "(", ")", "[", "(?P<a>", "(?<=a+)", "\\", "*", "+?", "{2,1}",
          "(?i)", "(?", "a{65535}", "\\1", "[z-a]", "(a|b)*", "\\p{L}", "(?#"]


@st.composite
def _number_text(draw):
    k = draw(st.integers(0, 5))
    if k == 0:
        return str(draw(st.integers(-(2**70), 2**70)))
    if k == 1:
        return draw(st.sampled_from(["-", "+", ""])) + "9" * draw(st.integers(1, 6000))
    if k == 2:
        return draw(st.sampled_from(["0x", "-0x", "0X"])) + "f" * draw(st.integers(0, 300))
    if k == 3:
        return repr(draw(st.floats(allow_nan=True, allow_infinity=True)))
    if k == 4:
        return draw(st.sampled_from(["1e999", "1e-999", ".5", "5.", "1e", "0x", "1.2.3", "--1", "1_000"]))
    return "1" + "0" * draw(st.integers(15, 25))


@st.composite
def _string_text(draw):
    body = draw(st.one_of(st.text(max_size=20), st.lists(st.sampled_from(_REGEX), max_size=4).map("".join)))
    body = body.replace("\\", "\\\\").replace('"', '\\"') if draw(st.booleans()) else body
    return '"' + body + ('"' if draw(st.integers(0, 9)) else "")


_piece = st.one_of(st.sampled_from(_NAMES), st.sampled_from(_PIECES), st.sampled_from(_CHOICE_WORDS),
                   _number_text(), _string_text(), st.text(max_size=3))


@st.composite
def filter_texts(draw):
    """Token soup, with runs of '(' or 'not' now and then."""
    parts = draw(st.lists(_piece, max_size=14))
    if draw(st.integers(0, 9)) == 0:
        n = draw(st.integers(MAX_DEPTH - 2, 3 * MAX_DEPTH))
        opener = draw(st.sampled_from(["(", "not ", "!"]))
        parts = [opener * n] + parts + [")" * n if opener == "(" else ""]
    return " ".join(parts) if draw(st.booleans()) else "".join(parts)


def _parse(text):
    """A DisplayFilter, or None after a proper FilterError; anything else fails the test."""
    try:
        return compile_filter(text)
    except FilterError as e:
        line = e.one_line()
        assert "\n" not in line and "\r" not in line, line
        assert 1 <= e.column <= len(text) + 1 or e.column == len(text) + 1
        return None


@budget(1500)
@given(filter_texts())
def test_fuzzed_filter_text_parses_or_is_one_line(text):
    flt = _parse(text)
    assert flt is None or isinstance(flt, DisplayFilter)


def test_random_filter_texts_from_a_plain_generator():
    """The same soup from random.Random, 8,000 texts (tests/fuzz/fuzz_run.py style): seconds, not minutes."""
    rnd = random.Random(29)
    pool = _NAMES + _PIECES + _CHOICE_WORDS + ["1", "-1", "0x1f", "1.5", '"x"', '"a{4294967295}"', '"("',
                                               "9" * 5000, "(" * 200, "not " * 100]
    parsed = 0
    for _ in range(int(8000 * SCALE)):
        parts = [rnd.choice(pool) for _ in range(rnd.randint(1, 12))]
        text = (" " if rnd.random() < 0.7 else "").join(parts)
        if _parse(text) is not None:
            parsed += 1
    assert parsed > 100  # the soup reaches the evaluator too, not only the error paths


# --------------------------------------------------------------------------- evaluation fuzzing


def _events_of(data) -> list:
    src = CaptureSource(io.BytesIO(data) if isinstance(data, bytes) else data, messages=True)
    out = []
    try:
        for _, ev in src.events():
            out.append(ev)
    except Exception as e:  # a capture reader's own error ends that capture (the CLI's exit 4/5)
        from amqp_dissect.errors import DissectError

        if not isinstance(e, DissectError):
            raise
    return out


@pytest.fixture(scope="module")
def events():
    """Every event of the samples, then of 60 captures with damaged bytes or wrong-typed fields."""
    evs = []
    for path in fuzzgen.samples():
        if path.endswith(".pcap"):
            evs += _events_of(path)
    for seed in range(30):
        evs += _events_of(fuzzgen.frame_capture(fuzzgen.RandomSource(seed)))
        evs += _events_of(fuzzgen.mutation(fuzzgen.RandomSource(1000 + seed)))
    kinds = {type(e).__name__ for e in evs}
    assert {"Frame", "ProtocolHeader"} <= kinds and ({"StreamNote", "PacketNote"} & kinds), kinds
    return evs


def _value_class(v):
    """What of a field's value decides how a comparison runs on it: its type, and for a number its
    sign and whether it is 1, for a text or bytes whether it is empty, for a list its item types."""
    if isinstance(v, bool):
        return "bool", v
    if isinstance(v, int):
        return "int", (v > 0) - (v < 0), v == 1
    if isinstance(v, (str, bytes)):
        return type(v).__name__, not v
    if isinstance(v, (list, tuple)):
        return "list", not v, tuple(sorted({type(x).__name__ for x in v}))
    return type(v).__name__


@pytest.fixture(scope="module")
def representatives(events):
    """The events that differ in what the comparisons run on: two of each class of events alike in
    their type and in every field's value class (_value_class; 3,152 events, 238 classes).  Every
    field is read from every event here, so a field that raises on one event still fails the test;
    the operators then run on each class's two (the time of every operator on every event was
    most of this file's)."""
    context = FrameContext(t0=events[0].ts)
    fields = [FIELDS[name] for name in sorted(FIELDS)]
    kept, seen = [], {}
    for ev in events:
        context.observe(ev)
        key = (type(ev).__name__, *(_value_class(f.get(ev, context)) for f in fields))
        if seen.get(key, 0) < 2:
            seen[key] = seen.get(key, 0) + 1
            kept.append(ev)
    assert len(seen) > 100 and len(kept) < len(events)
    return kept


_OPS = ["==", "!=", "<", ">", "<=", ">=", "contains", "matches", "in"]


@st.composite
def _value(draw):
    k = draw(st.integers(0, 7))
    if k == 0:
        return str(draw(st.integers(-(2**64) + 1, 2**64 - 1)))
    if k == 1:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    if k == 2:
        return draw(st.sampled_from(["true", "false", "null", "0x00", "0x31", "-0x10"]))
    if k == 3:
        return draw(st.sampled_from(_CHOICE_WORDS))
    if k == 4:
        return draw(st.sampled_from(["transfer", "attach", "accepted", "rejected", "AMQP", "SASL", "amqp:",
                                     "sender", "header", "note", "amqp", "sasl", "heartbeat"]))
    if k == 5:
        return '"' + draw(st.sampled_from(["", ".*", "^amqp", "a|b", "(?i)X", "\\\\d+", "[0-9]", "1", "31",
                                           "127.0.0.1:5672", "queue"])) + '"'
    if k == 6:
        return '"' + draw(st.text(alphabet=st.characters(blacklist_characters='"\\'), max_size=8)) + '"'
    return draw(st.sampled_from(["0", "1", "2", "65536", "4294967295", "18446744073709551615", "-1"]))


@st.composite
def well_formed(draw, depth=0):
    """A filter the grammar accepts (its values may still not suit the field: a FilterError then)."""
    k = draw(st.integers(0, 9 if depth < 3 else 5))
    if k <= 5:
        name = draw(st.sampled_from(_NAMES[:-12] + ["source.address", "error.condition", "error.description",
                                                    "target.address"]))
        op = draw(st.sampled_from(_OPS + [""]))
        if op == "":
            return name
        if op == "in":
            return f"{name} in {{{' '.join(draw(st.lists(_value(), min_size=1, max_size=3)))}}}"
        return f"{name} {op} {draw(_value())}"
    if k == 6:
        return f"not ({draw(well_formed(depth + 1))})"
    joiner = draw(st.sampled_from([" and ", " or ", " && ", " || "]))
    return "(" + joiner.join(draw(st.lists(well_formed(depth + 1), min_size=2, max_size=3))) + ")"


def _check_on(events, text):
    try:
        flt = compile_filter(text, FrameContext(t0=events[0].ts))
        neg = compile_filter(f"not ({text})", FrameContext(t0=events[0].ts))
    except FilterError:
        return 0
    for ev in events:
        m = flt.match(ev)
        assert type(m) is bool
        assert neg.match(ev) is (not m), (text, ev)
    return 1


@budget(400)
@given(st.lists(well_formed(), min_size=1, max_size=8))
def test_parsed_filters_evaluate_on_every_kind_of_frame(representatives, texts):
    for text in texts:
        _check_on(representatives, text)


def test_every_field_alone_and_compared_evaluates(representatives):
    """Each field (and the composite sub-fields) with each operator and a value of each kind."""
    values = ["0", "1", "-1", "1.5", "true", "null", '"a"', '".*"', "0x31", "sender", "accepted", "AMQP"]
    names = sorted(FIELDS) + ["source.address", "target.address", "error.condition", "error.description"]
    evaluated = 0
    for name in names:
        evaluated += _check_on(representatives, name)
        for op in _OPS[:-1]:
            for v in values:
                evaluated += _check_on(representatives, f"{name} {op} {v}")
    assert evaluated > 1000


def test_fields_print_every_field_of_every_frame(events):
    names = sorted(FIELDS) + ["source.address", "target.address", "error.condition", "error.description"]
    printer = FieldPrinter(names, FrameContext(t0=events[0].ts))
    for ev in events:
        printer.context.observe(ev)
        assert isinstance(printer.line(ev), str)  # (the oracle: no exception on any frame)
