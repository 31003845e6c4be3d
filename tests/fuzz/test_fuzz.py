"""The fuzz suite (issue 8): no input makes the product fail.

Inputs come from tests/support/fuzzgen.py: AMQP values of every type (encoded by proton's codec, invalid
ones by a minimal encoder), captures of frames of every performative of the generated spec with
fields of any type, whole AMQP conversations in random orders, and damaged samples.  Each capture
goes through the paths of ``frames``, ``frames -V``, ``frames --format jsonl``, ``report`` and every
table (``fuzzgen.check``); the oracle is the CLI's exit-1 rule: no exception outside the
amqp_dissect.errors family, no internal-error row, no exit status 1.  The stateful tests drive
random valid and invalid frame sequences through the Dissector and the state model: only
violations and notes may come out.

Budget: about 2 minutes per mode (compiled / pure Python) on the CI machine, spread by the
``max_examples`` below.  ``AMQP_DISSECT_FUZZ_SCALE`` multiplies every count (e.g. 10 for a longer
local run; tests/fuzz/fuzz_run.py is the long run).  Hypothesis is derandomized and keeps no example
database, so every CI run tries the same inputs.
"""

from __future__ import annotations

import io
import os
import subprocess

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


@budget(30)
@given(fuzzgen.coherent_captures())
def test_structure_aware_conversations_through_every_command_and_html(tmp_path_factory, data):
    """Conversations that follow the protocol (links with credit, deliveries, dispositions,
    transactions), damaged now and then, through every command, ``report --format html`` (the
    time series and the ladder of its frames) included."""
    _check(tmp_path_factory.mktemp("coherent"), data)


@budget(30)
@given(fuzzgen.websocket_captures())
def test_amqp_over_websocket_framed_and_compressed_at_random(tmp_path_factory, data):
    """Conversations carried over WebSocket: frames cut at random, permessage-deflate with and
    without context takeover, pings, text and close frames, broken headers, compressed messages that
    are not DEFLATE, and deflate bombs (issue 29), through every command."""
    _check(tmp_path_factory.mktemp("ws"), data)


@pytest.fixture(scope="module")
def tls_capture(tmp_path_factory):
    """(capture bytes, key log lines) of a real TLS 1.3 capture (tests/support/tlscap.py; as test_tls.py:
    skipped without tcpdump / root, a failure on CI)."""
    import fuzz_run
    from test_tls import _need_tools

    _need_tools()
    return fuzz_run._tls_capture(str(tmp_path_factory.mktemp("tlscap")))


@budget(40)
@given(st.data())
def test_hostile_key_logs_on_a_tls_capture_cut_short_or_not(tmp_path_factory, tls_capture, data):
    """Key logs with damaged lines, wrong secrets, over-long lines, huge or ``/dev/zero``-like, on
    a real TLS capture, whole or cut at any byte: every command (``--keylog``) runs without an
    internal error."""
    pcap, lines = tls_capture
    keys, seed = data.draw(fuzzgen.keylogs(lines))
    tmp = tmp_path_factory.mktemp("keylog")
    cap = fuzzgen.cut_capture(fuzzgen.RandomSource(seed), pcap)
    (tmp / "input.pcap").write_bytes(cap)
    (tmp / "input.keys").write_bytes(keys)
    problems = fuzzgen.Checker(("jsonl",), keylog=str(tmp / "input.keys")).check(str(tmp / "input.pcap"))
    assert problems == [], f"repro: --keylog {tmp / 'input.keys'} {tmp / 'input.pcap'}\n" + "\n".join(problems)


def test_the_key_log_generator_makes_each_hostile_kind():
    """The key log fuzzer is not vacuous: over a fixed sample, its key logs hold damaged lines of
    each kind the scanner names, wrong secrets of the right size, real lines, over-long lines, a
    huge file and a ``/dev/zero``-like run."""
    from amqp_dissect.capture.keylog import MAX_RUN, KeyLog

    lines = [b"CLIENT_HANDSHAKE_TRAFFIC_SECRET " + b"ab" * 32 + b" " + b"cd" * 32,
             b"SERVER_TRAFFIC_SECRET_0 " + b"ab" * 32 + b" " + b"ef" * 32]
    real = KeyLog(b"\n".join(lines)).get(bytes.fromhex("ab" * 32))
    whys, wrong, right, huge, zero = set(), 0, 0, 0, 0
    for i in range(300):
        text = fuzzgen.keylog(fuzzgen.RandomSource(f"kl:{i}"), lines)
        kl = KeyLog(text)
        whys |= {n.split(": ")[1].split(" (")[0].split(",")[0] for n in kl.notes if n.startswith("line ")}
        got = kl.get(bytes.fromhex("ab" * 32)) or {}
        wrong += any(got.get(k) not in (None, v) for k, v in real.items())
        right += got == real
        huge += len(text) > 1_000_000 and b"\x00" * 1000 not in text
        zero += bytes(MAX_RUN) in text
    assert {"not hexadecimal", "longer than 1024 bytes", "1 field", "2 fields", "4 fields"} <= whys, whys
    assert any("client random of" in w for w in whys) and any("secret of" in w for w in whys)
    assert wrong and right and huge and zero


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
    tests/support/pcapbuild.py, fed packet by packet) and the state model (an Analyzer: StateTracker plus
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
            for ev in self.dissector.feed(self.Record(self.fed, round(ts * 1_000_000_000), lt, data, len(data))):
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


def test_fuzz_run_resumes_from_its_journal(tmp_path, capsys):
    """A run stopped part-way (here: the journal cut after its first unit) goes on with the units not
    in the journal and reports the totals of both runs."""
    import json

    import fuzz_run

    journal = tmp_path / "journal"
    args = ["-n", "6", "--chunk", "3", "--seed", "7", "--out", str(tmp_path / "fail"), "--journal", str(journal)]
    assert fuzz_run.main(args) == 0
    lines = journal.read_text().splitlines()
    run0 = json.loads(lines[1])
    units = [json.loads(x) for x in lines[2:]]
    assert json.loads(lines[0])["settings"]["seed"] == 7
    assert run0["run"] == 0 and run0["jobs"] == 1 and "start" not in run0
    assert run0["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(__file__),
                                            capture_output=True, text=True).stdout.strip()
    assert sorted(u["start"] for u in units) == [0, 3] and all(u["tried"] == 3 for u in units)
    journal.write_text("\n".join(lines[:3]) + "\n")  # as if killed after the first unit
    capsys.readouterr()
    assert fuzz_run.main(args) == 0
    out = capsys.readouterr().out
    assert "1 units done in 1 earlier runs (3 inputs" in out and "1 to go" in out
    assert "done: inputs tried 6," in out and "failures 0" in out
    again = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    assert [u["run"] for u in again if "start" not in u] == [0, 1]
    assert sorted((u["run"], u["start"]) for u in again if "start" in u) == [
        (0, units[0]["start"]), (1, 3 - units[0]["start"])]
    with pytest.raises(SystemExit, match="other settings"):
        fuzz_run.main(args[:1] + ["7"] + args[2:])


# --------------------------------------------------------------------------- the long run's shortcuts
# fuzz_run.py's inputs are cheap because of these; each must give what the slow way gives.


def test_packets_packed_by_hand_are_dpkts_byte_for_byte():
    """fuzzgen.tcp_ipv4_ethernet against pcapbuild (dpkt's IP and TCP classes fill lengths and
    checksums): random segments, odd and empty payloads, every flag, and the payloads whose TCP
    checksum comes out 0x0000 and 0xFFFF (the one's complement corner)."""
    import random

    rnd = random.Random(8)
    src, dst = pcapbuild._pton("10.0.0.1"), pcapbuild._pton("10.0.0.2")
    cases = []
    for i in range(600):
        payload = rnd.randbytes(rnd.choice((0, 1, 2, 3, 17, 1460, rnd.randint(0, 2000))))
        cases.append((rnd.randint(0, 65535), rnd.randint(0, 65535), rnd.getrandbits(32), rnd.getrandbits(32),
                      rnd.randint(0, 0x1FF), payload))
    # a 2-byte payload chosen so that the TCP checksum is 0 (its word makes the sum 0xFFFF)
    sp, dp, seq, ack, flags = 40000, 5672, 1000, 5000, pcapbuild.ACK
    base = fuzzgen.tcp_ipv4_ethernet(src, dst, sp, dp, seq, ack, flags, b"\x00\x00")
    word = int.from_bytes(base[50:52], "big")  # the checksum with a zero word: ~sum
    cases.append((sp, dp, seq, ack, flags, word.to_bytes(2, "big")))
    cases.append((sp, dp, seq, ack, flags, b"\x00\x00"))
    assert int.from_bytes(fuzzgen.tcp_ipv4_ethernet(src, dst, *cases[-2])[50:52], "big") in (0, 0xFFFF)
    for sp, dp, seq, ack, flags, payload in cases:
        want = pcapbuild.frame(1, pcapbuild.tcp_packet("10.0.0.1", "10.0.0.2", sp, dp, seq=seq, ack=ack,
                                                       flags=flags, payload=payload))
        assert fuzzgen.tcp_ipv4_ethernet(src, dst, sp, dp, seq, ack, flags, payload) == want


def test_capture_files_packed_by_hand_are_pcapbuilds_byte_for_byte():
    import random

    rnd = random.Random(9)
    for i in range(200):
        recs = [(rnd.choice((1.7e9 + rnd.random(), 0.0, 4e9 - 1, (rnd.randint(0, 2**32 - 1), rnd.randint(0, 999999)))),
                 1, rnd.randbytes(rnd.randint(0, 70))) for _ in range(rnd.randint(0, 5))]
        nano = bool(i & 1)
        assert fuzzgen.write_pcap(recs, nano=nano) == pcapbuild.write_pcap(recs, nano=nano)
        assert fuzzgen.write_pcap(recs, linktype=101) == pcapbuild.write_pcap(recs, linktype=101)
        res = rnd.choice((None, 6, 9, 0x80 | 20))
        recs2 = [(t if isinstance(t, float) else t[0] + 0.25, d) for t, _, d in recs] + [(1.8e12 + i, b"x")]
        if res in (9, 0x80 | 20):
            recs2 = recs2[:-1]
        assert fuzzgen.write_pcapng(recs2, res) == pcapbuild.write_pcapng([(t, 0, d) for t, d in recs2],
                                                                          interfaces=((1, res),))


def test_generated_conversations_are_the_packets_pcapbuild_makes():
    """The whole generator with the hand-packed packets and files against the same choices made
    with pcapbuild's dpkt classes and writers."""
    for i in range(40):
        got = fuzzgen.generate(fuzzgen.RandomSource(f"same:{i}"), "conversation")
        saved = fuzzgen._conversation_class, fuzzgen.write_pcap, fuzzgen.write_pcapng
        try:
            fuzzgen._conversation_class = lambda: pcapbuild.TcpConversation
            fuzzgen.write_pcap = pcapbuild.write_pcap
            fuzzgen.write_pcapng = lambda recs, res: pcapbuild.write_pcapng([(t, 0, d) for t, d in recs],
                                                                           interfaces=((1, res),))
            want = fuzzgen.generate(fuzzgen.RandomSource(f"same:{i}"), "conversation")
        finally:
            fuzzgen._conversation_class, fuzzgen.write_pcap, fuzzgen.write_pcapng = saved
        assert got == want


@pytest.mark.parametrize("kind", fuzzgen.KINDS)
def test_one_decode_gives_frames_v_and_jsonl_what_two_runs_give(tmp_path, kind):
    """fuzzgen.Checker replays one decode through the -V and the jsonl printers: their output is the
    output of two separate runs, as the CLI makes them (``main``)."""
    from amqp_dissect.cli.frames_command import _print_jsonl, _print_verbose
    from amqp_dissect.cli.run import CaptureRun
    from amqp_dissect.render.frames import event_json

    for i in range(6):
        _, data = fuzzgen.generate(fuzzgen.RandomSource(f"replay:{kind}:{i}"), kind)
        cap = tmp_path / f"{i}.pcap"
        cap.write_bytes(data)
        run = CaptureRun(cap, [], messages=True, tls_records=[])
        try:
            pairs = list(run.events())
        except Exception:  # (a capture the CLI refuses: nothing to compare)
            continue
        replay = fuzzgen._Replay(pairs, run.tls_records)
        v, j = io.StringIO(), io.StringIO()
        _print_verbose(replay, v)
        _print_jsonl(replay, j)
        v2, j2 = io.StringIO(), io.StringIO()
        _print_verbose(CaptureRun(cap, [], messages=True, tls_records=[]), v2)
        _print_jsonl(CaptureRun(cap, [], messages=True), j2)
        assert v.getvalue() == v2.getvalue() and j.getvalue() == j2.getvalue()
        # not empty by accident: as many lines as the decode had events with a JSON form (a capture
        # whose only event is a stream closing has none)
        # (lines end with "\n": a JSON string may hold other characters str.splitlines splits at)
        assert j.getvalue().count("\n") == sum(1 for _, ev in pairs if event_json(ev) is not None)


def test_tables_written_together_are_the_tables_written_one_by_one(tmp_path):
    """fuzz_run.py writes the rows of 100 inputs in one call per table: a row's text does not depend
    on the rows beside it, so jsonl is the concatenation and csv the same rows under one header."""
    checker = fuzzgen.Checker(("csv", "jsonl"), batch=1000)
    for i in range(30):
        _, data = fuzzgen.generate(fuzzgen.RandomSource(f"together:{i}"))
        cap = tmp_path / f"{i}.pcap"
        cap.write_bytes(data)
        assert checker.check(str(cap), i) == []
    pending = checker.pending
    assert len(pending) == 30 and not checker.full
    seen = 0
    for table in fuzzgen.TABLE_METHODS:
        for fmt in ("csv", "jsonl"):
            whole = _written(table, fmt, [r for _, t, _ in pending for r in t.get(table, ())])
            parts = [_written(table, fmt, t.get(table, ())) for _, t, _ in pending]
            if fmt == "csv":
                head = whole.split(b"\n", 1)[0] + b"\n"
                parts = [head] + [p[len(head):] for p in parts]
                assert all(_written(table, fmt, t.get(table, ())).startswith(head) for _, t, _ in pending)
            assert whole == b"".join(parts), table
            seen += bool(whole.strip())
    assert seen >= 6  # most tables have rows
    for fmt in ("csv", "jsonl"):  # the deliveries' batches of all inputs are joined, then written
        out = io.BytesIO()
        fuzzgen._write_deliveries(fmt, [b for _, _, d in pending for b in d], out)
        whole = out.getvalue()
        parts = [_written_deliveries(fmt, d) for _, _, d in pending]
        if fmt == "csv":
            head = whole.split(b"\n", 1)[0] + b"\n"
            parts = [head] + [p[len(head):] for p in parts]
        assert whole == b"".join(parts) and whole.count(b"\n") > 30
    assert checker.flush() == {} and checker.pending == []


def _written(table, fmt, rows) -> bytes:
    from amqp_dissect.pipelines.writers.tables import write_table

    out = io.BytesIO()
    write_table(list(rows), table, fmt, out)
    return out.getvalue()


def _written_deliveries(fmt, batches) -> bytes:
    from amqp_dissect.pipelines.writers.tables import write_batches

    out = io.BytesIO()
    write_batches(list(batches), "deliveries", fmt, out)
    return out.getvalue()


def test_a_table_that_fails_in_a_batch_names_its_inputs(tmp_path, monkeypatch):
    """A failure met writing the gathered tables is given to the inputs that fail alone (the others
    pass), and saved as their repro by fuzz_run.py."""
    import fuzz_run
    from amqp_dissect.pipelines.writers import tables as write

    real = write.write_table

    def failing(rows, table, fmt, out=None, batch_rows=write.BATCH_ROWS):
        rows = list(rows)
        if table == "connections" and any(str(r.get("server")).endswith(":5671") for r in rows):
            raise RuntimeError("a bug met writing a 5671 connection")
        return real(rows, table, fmt, out, batch_rows)

    monkeypatch.setattr(write, "write_table", failing)
    checker = fuzzgen.Checker(("jsonl",), batch=10)
    ports = {}
    for i in range(10):
        _, data = fuzzgen.generate(fuzzgen.RandomSource(f"blame:{i}"), "conversation")
        cap = tmp_path / f"{i}.pcap"
        cap.write_bytes(data)
        checker.check(str(cap), i)
        ports[i] = any(str(r.get("server")).endswith(":5671") for r in checker.pending[-1][1]["connections"])
    assert checker.full and 0 < sum(ports.values()) < 10
    late = checker.flush()
    assert sorted(late) == [i for i in ports if ports[i]]
    assert all("connections --format jsonl: RuntimeError: a bug met writing a 5671" in p[0] for p in late.values())

    out = tmp_path / "fail"
    # (the cost check off: this is about blame, and a CPU figure taken late in a long test process,
    # where a full collection of its heap can land in one small input's time, is not what it tests)
    rc = fuzz_run.main(["-n", "10", "--seed", "1", "--kinds", "conversation", "--batch", "4", "--chunk", "10",
                        "--cost-bound", "0", "--out", str(out)])
    saved = sorted(n for n in os.listdir(out) if n.endswith(".pcap"))
    assert rc == (1 if saved else 0)
    for n in saved:
        assert "RuntimeError: a bug met writing a 5671" in (out / n.replace(".pcap", ".txt")).read_text()


def test_the_oracle_sees_a_bug_in_each_printer_of_the_shared_decode(tmp_path, monkeypatch):
    """A printer that raises is a failure of its own command; the other printer of the same decode
    still runs."""
    from amqp_dissect.render import frames as printers  # (cli.main imports them when a run needs them)

    _, data = fuzzgen.generate(fuzzgen.RandomSource("printers"), "frame")
    cap = tmp_path / "in.pcap"
    cap.write_bytes(data)
    assert fuzzgen.check(str(cap), ("jsonl",)) == []

    def broken(ev):
        raise KeyError("a bug in the jsonl printer")

    monkeypatch.setattr(printers, "event_json", broken)
    problems = fuzzgen.check(str(cap), ("jsonl",))
    assert [p.split(":")[0] for p in problems] == ["frames --format jsonl"]
    assert "KeyError: 'a bug in the jsonl printer'" in problems[0]
    monkeypatch.undo()

    class Broken(printers.DetailLines):
        def add(self, chunk, record, ev):
            raise ValueError("a bug in the -V printer")

    monkeypatch.setattr(printers, "DetailLines", Broken)
    problems = fuzzgen.check(str(cap), ("jsonl",))
    assert [p.split(":")[0] for p in problems] == ["frames -V"]


# --------------------------------------------------------------------------- issue 40's shapes


@pytest.mark.parametrize("seed", range(max(1, int(12 * SCALE))))
def test_issue40_shapes(tmp_path, seed):
    """Idle connections through every path, damaged gzip read the same by every reader (and split),
    a hostile value of a numeric option used or refused in one line: no failure."""
    r = fuzzgen.RandomSource(f"issue40:{seed}")
    checker = fuzzgen.Checker(("jsonl",), 1)
    parts = str(tmp_path / "parts")
    for kind in (fuzzgen.IDLE_KIND, fuzzgen.GZIP_KIND):
        _, data = fuzzgen.generate(r, kind)
        cap = tmp_path / f"{kind}.pcap"
        cap.write_bytes(data)
        problems = checker.check(str(cap), 0) + list(checker.flush().get(0, []))
        if kind == fuzzgen.GZIP_KIND:
            problems += fuzzgen.check_split(str(cap), parts) + fuzzgen.check_gzip_agreement(str(cap), parts)
        assert not problems, (kind, problems)
    cap = tmp_path / "sample.pcap"
    cap.write_bytes(fuzzgen.option_capture())
    for _ in range(5):
        assert not fuzzgen.check_option_value(r, str(cap), parts)
