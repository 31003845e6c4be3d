"""The fuzz suite (issue 8): no input makes the product fail.

Inputs come from tests/fuzzgen.py: AMQP values of every type (encoded by proton's codec, invalid
ones by a minimal encoder), captures of frames of every performative of the generated spec with
fields of any type, whole AMQP conversations in random orders, and damaged samples.  Each capture
goes through the paths of ``frames``, ``frames -V``, ``frames --format jsonl``, ``report`` and every
table (``fuzzgen.check``); the oracle is the CLI's exit-1 rule: no exception outside the
amqp_dissect.errors family, no internal-error row, no exit status 1.  The stateful tests drive
random valid and invalid frame sequences through the Dissector and the state model: only
violations and notes may come out.

Budget: about 2 minutes per mode (compiled / pure Python) on the CI machine, spread by the
``max_examples`` below.  ``AMQP_DISSECT_FUZZ_SCALE`` multiplies every count (e.g. 10 for a longer
local run; tests/fuzz_run.py is the long run).  Hypothesis is derandomized and keeps no example
database, so every CI run tries the same inputs.
"""

from __future__ import annotations

import io
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import fuzzgen
import pcapbuild
from amqp_dissect.errors import DissectError

SCALE = float(os.environ.get("AMQP_DISSECT_FUZZ_SCALE", "1"))


def budget(n: int, **kw):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), **kw)


def _check(tmp_path, data: bytes, formats=("csv", "jsonl")):
    path = tmp_path / "input.pcap"
    path.write_bytes(data)
    problems = fuzzgen.check(str(path), formats)
    if problems:
        keep = tmp_path / "failing.pcap"
        keep.write_bytes(data)
    assert problems == [], f"repro: {tmp_path / 'failing.pcap'}\n" + "\n".join(problems)


# --------------------------------------------------------------------------- values


@budget(300)
@given(fuzzgen.values())
def test_any_value_decodes_or_is_a_dissect_error(node):
    from amqp_dissect.amqp.codec import decode_all

    data = fuzzgen.encode(node)
    try:
        decode_all(data)
    except DissectError:
        pass


def _same(node, got) -> bool:
    """Our decoding ``got`` holds what value tree ``node`` says proton encoded."""
    import math
    import struct

    from amqp_dissect.amqp.codec import Composite, Described

    kind, v, _ = node
    if kind == "null":
        return got is None
    if kind in ("float", "double"):
        fmt = ">f" if kind == "float" else ">d"
        a, b = struct.unpack(fmt, struct.pack(fmt, v))[0], float(got)
        return (math.isnan(a) and math.isnan(b)) or a == b
    if kind in ("decimal32", "decimal64"):
        return bytes(got) == struct.pack(">I" if kind == "decimal32" else ">Q", v)
    if kind == "decimal128":
        return bytes(got) == v
    if kind == "uuid":
        return got.bytes == v
    if kind == "char":
        return ord(got) == v
    if kind in ("list", "array"):
        items = v if kind == "list" else v[2]
        if kind == "array" and v[1] is not None:  # described elements: each carries the descriptor
            return len(got) == len(items) and all(
                _same(("described", (v[1], x), 0), g) for x, g in zip(items, got))
        return len(got) == len(items) and all(_same(x, g) for x, g in zip(items, got))
    if kind == "map":
        pairs = list(got.items())
        if len(pairs) != len(v):  # duplicate keys: one entry (checked by the other test)
            return len(pairs) < len(v)
        return all(_same(a, ga) and _same(b, gb) for (a, b), (ga, gb) in zip(v, pairs))
    if kind == "described":
        if not isinstance(got, Described):
            return False
        desc, body = v
        if isinstance(got, Composite):
            return desc[1] in (got.spec.descriptor_code, got.spec.descriptor_symbol) and _same(body, got.value)
        return _same(desc, got.descriptor) and _same(body, got.value)
    return got == v and (kind != "boolean" or isinstance(got, bool))


@budget(150)
@given(fuzzgen.values())
def test_a_valid_value_decodes_to_what_proton_encoded(node):
    """Proton is the oracle: what the tree says proton encoded is what our codec reads."""
    from amqp_dissect.amqp.codec import decode_all

    try:
        data = fuzzgen.proton_encode(node)
    except Exception:  # trees proton cannot encode: the test above
        return
    try:
        values = decode_all(data)
    except DissectError:  # caps (depth, elements) only
        return
    assert len(values) == 1 and _same(node, values[0]), (node, values)


# --------------------------------------------------------------------------- whole captures


@budget(45)
@given(fuzzgen.frames())
def test_frames_of_every_performative_with_fields_of_any_type(tmp_path_factory, data):
    _check(tmp_path_factory.mktemp("frame"), data)


@budget(45)
@given(fuzzgen.conversations())
def test_conversations_in_random_orders(tmp_path_factory, data):
    _check(tmp_path_factory.mktemp("conv"), data)


@budget(45)
@given(fuzzgen.mutations())
def test_damaged_samples(tmp_path_factory, data):
    _check(tmp_path_factory.mktemp("mut"), data)


@pytest.mark.parametrize("seed", range(3))
def test_every_command_of_the_cli_on_generated_captures(tmp_path, capsys, seed):
    """The commands themselves (``main``), every table in every text format, on a few inputs."""
    from amqp_dissect.cli.main import EXIT_INTERNAL, main

    for kind in fuzzgen.KINDS:
        _, data = fuzzgen.generate(fuzzgen.RandomSource(f"cli:{seed}:{kind}"), kind)
        cap = tmp_path / f"{kind}.pcap"
        cap.write_bytes(data)
        runs = [["frames"], ["frames", "-V"], ["frames", "--format", "jsonl"], ["report"],
                ["report", "--format", "json"]]
        runs += [[t, "--format", f] for t in fuzzgen.TABLES for f in ("table", "csv", "jsonl")]
        runs += [[t, "--format", "parquet", "-o", str(tmp_path / f"{t}.parquet")] for t in ("deliveries", "links")]
        for args in runs:
            rc = main(args + [str(cap)])
            _, err = capsys.readouterr()
            assert rc != EXIT_INTERNAL and "internal error" not in err, (kind, args, err)


def test_the_generators_cover_every_performative_and_type():
    """The fuzz inputs are not vacuous: over a fixed sample they hold every performative of the
    spec tables and every constructor of the type system."""
    from amqp_dissect.amqp import _spec

    seen_types, seen_perf = set(), set()

    def walk(node):
        kind, v, _ = node
        seen_types.add(kind)
        if kind == "described":
            walk(v[0]), walk(v[1])
        elif kind == "list":
            for x in v:
                walk(x)
        elif kind == "map":
            for a, b in v:
                walk(a), walk(b)
        elif kind == "array":
            seen_types.add(v[0])
            for x in v[2]:
                walk(x)

    r = fuzzgen.RandomSource("coverage")
    for _ in range(400):
        walk(fuzzgen.value(r, 3))
        name = r.choice(fuzzgen.PERFORMATIVES + fuzzgen.SASL_FRAMES)
        node = fuzzgen.composite(r, name)
        seen_perf.add(fuzzgen.CODE[name])
        walk(node)
    assert set(_spec.PRIMITIVE_CODES) <= seen_types
    assert {"described", "raw", "lying", "badutf8", "badchar", "truncated"} <= seen_types
    assert seen_perf == {fuzzgen.CODE[n] for n in fuzzgen.PERFORMATIVES + fuzzgen.SASL_FRAMES}


# --------------------------------------------------------------------------- stateful: the model


class ModelMachine(RuleBasedStateMachine):
    """Frames, valid and invalid, in any order, through the Dissector (one TCP connection built by
    tests/pcapbuild.py, fed packet by packet) and the state model (an Analyzer: StateTracker plus
    the tables).  After every step: no internal error; at the end, every table and the report."""

    def __init__(self):
        super().__init__()
        from amqp_dissect.dissect import Dissector
        from amqp_dissect.events import CaptureRecord
        from amqp_dissect.results.analytics import Analyzer

        self.Record = CaptureRecord
        self.dissector = Dissector(messages=True)
        self.analyzer = Analyzer(rows=True)
        self.conv = pcapbuild.TcpConversation(t0=1_700_000_000.0, dt=0.001)
        self.fed = 0
        self.tag = 0

    def _feed(self):
        recs = self.conv.records
        while self.fed < len(recs):
            ts, lt, data = recs[self.fed]
            self.fed += 1
            for ev in self.dissector.feed(self.Record(self.fed, ts, lt, data, len(data))):
                self.analyzer.feed(ev)

    def _send(self, frames):
        for d, b in frames:
            self.conv.send(d, b)
        self._feed()

    @initialize(sasl=st.booleans(), opens=st.sampled_from(((0, 1), (0,), (1,), ())))
    def start(self, sasl, opens):
        self.conv.handshake()
        streams = []
        if sasl:
            streams += [(0, fuzzgen.HEADER_SASL), (1, fuzzgen.HEADER_SASL),
                        (1, fuzzgen.frame_bytes(fuzzgen.encode(fuzzgen.performative("sasl-outcome", [
                            ("ubyte", 0, 0)])), 0, 1))]
        streams += [(0, fuzzgen.HEADER_AMQP), (1, fuzzgen.HEADER_AMQP)]
        for d in opens:
            streams.append((d, fuzzgen.frame_bytes(fuzzgen.encode(fuzzgen.performative("open", [
                ("string", f"c{d}", 0)])))))
        self._send(streams)

    @rule(data=st.data(), op=st.sampled_from(fuzzgen.OPS), d=st.integers(0, 1),
          ch=st.sampled_from(fuzzgen.CHANNELS))
    def frame(self, data, op, d, ch):
        self.tag += 1
        self._send(fuzzgen.step(fuzzgen.HypothesisSource(data.draw), op, d, ch, self.tag))

    @rule(d=st.integers(0, 1), n=st.integers(1, 3000))
    def lose_bytes(self, d, n):
        """A hole in one direction: the next n bytes are sent but not captured."""
        self.conv.next_seq[d] = (self.conv.next_seq[d] + n) & 0xFFFFFFFF

    @rule(d=st.integers(0, 1))
    def reset(self, d):
        self.conv.rst(d)
        self._feed()

    @invariant()
    def no_internal_error(self):
        assert self.analyzer.internal_errors == []

    def teardown(self):
        from amqp_dissect.results.report import build_report
        from amqp_dissect.render.report import render_text

        self.conv.close()
        self._feed()
        for ev in self.dissector.finish():
            self.analyzer.feed(ev)
        an = self.analyzer
        an.finish(self.conv.t)
        assert an.internal_errors == []
        render_text(build_report(an))
        for method in fuzzgen.TABLE_METHODS.values():
            list(getattr(an, method)())
        list(an.delivery_rows())
        assert not [v for v in an.violations if v["kind"] == "internal-error"]


TestModelMachine = ModelMachine.TestCase
TestModelMachine.settings = budget(60, stateful_step_count=30)


# --------------------------------------------------------------------------- the runner


def test_fuzz_run_reports_inputs_rate_and_failures(tmp_path, capsys):
    import fuzz_run

    rc = fuzz_run.main(["-n", "6", "--chunk", "3", "--seed", "7", "--out", str(tmp_path / "fail")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "done: inputs tried 6," in out and " inputs/s, failures 0" in out
    assert os.listdir(tmp_path / "fail") == []
