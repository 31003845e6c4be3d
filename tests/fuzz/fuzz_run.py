"""Run the fuzz generators of tests/support/fuzzgen.py for N inputs, in-process, optionally on several processes.

    python tests/fuzz/fuzz_run.py                       # 1,000,000 inputs, one process
    python tests/fuzz/fuzz_run.py -n 20000 -j 2 --seed 8 --out fuzz-failures --seconds 3600

Every input (a generated AMQP conversation, a capture of frames of any performative with fields of
any type, a mutated sample, a mutated generated conversation; with ``--kinds keylog``, a hostile key
log on a real TLS capture) is written as a capture file and fed through the paths of ``frames``,
``frames -V``, ``frames --format jsonl``, ``report``, ``report --format html`` and every table
(``fuzzgen.Checker``: one decode replayed through the -V and the jsonl printers, which decode with
the same options; the rows of ``--batch`` inputs written together, one write per table and format,
through the table commands' writers).  Each failure is saved as ``OUT/<kind>-<seed>-<i>.pcap`` with
the failure text beside it (``.txt``) and its key log (``.keys``, the keylog kind):
``amqp-dissect <command> [--keylog OUT/....keys] OUT/....pcap`` reproduces it.  Input
``i`` of seed ``s`` is the same on every run (``random.Random(f"{s}:{i}")``).  Prints the inputs
tried, inputs/s, failures and the workers' CPU time per input; exits 1 when any input failed.

The cost check (issue 29): each worker first measures the CPU per byte of an ordinary capture
(``ordinary_capture``: small messages each settled by its own disposition) through each path of
the same checker (``Checker.cpu``: frames, the decode for -V and jsonl and each printer, report,
deliveries); an input on which a path takes more than ``--cost-bound`` (default 20) times its
reference per byte, and more than COST_FLOOR CPU seconds, fails with a "cost:" line naming the
path (a CPU measure: a shared machine may flag a borderline input; its .pcap reproduces it).

``--journal FILE`` makes a long run resumable: each finished work unit is appended to FILE (one
JSON line: its inputs, failures, CPU seconds and the run's wall seconds so far), and a later run
with the same FILE and settings tries only the units not in it.  Its figures are the totals of
every run of the journal: wall seconds are the sum of each run's time to its last finished unit.
Each run also writes a line naming itself: its start time (UTC), processes and the git commit of
the code it ran.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), f) for f in ("support", "benchmarks")]  # fuzzgen, tlscap; bench_hostile


COST_FLOOR = 0.25  # CPU seconds below which an input's cost is not checked (fixed costs dominate)


def ordinary_capture() -> bytes:
    """The reference of the cost check: small messages, each settled by its own disposition (many
    frames per byte: the costly end of ordinary traffic)."""
    import bench_hostile as B

    conv = B.unsettled_conversation(1000, close=False)
    for i in range(0, 1000, 40):
        conv.send(1, b"".join(B.disposition_frame(j, j, settled=True) for j in range(i, i + 40)))
    conv.close()
    return conv.pcap()


_REFERENCE = {}  # (formats, batch) -> reference_cost, once per process


def reference_cost(checker, path) -> dict:
    """CPU seconds per byte of :func:`ordinary_capture` through each path of ``checker``
    (``Checker.cpu``: frames, the decode of frames -V / jsonl and each printer, report, deliveries;
    the least of 2 runs)."""
    key = (checker.formats, checker.batch)
    if key in _REFERENCE:
        return _REFERENCE[key]
    data = ordinary_capture()
    with open(path, "wb") as f:
        f.write(data)
    best = {}
    for _ in range(2):
        checker.check(path, None)
        checker.flush()
        for name, spent in checker.cpu.items():
            best[name] = min(best.get(name, spent), spent)
    _REFERENCE[key] = {name: spent / len(data) for name, spent in best.items()}
    return _REFERENCE[key]


def cost_problem(cpu: dict, size: int, ref: dict, bound: float) -> str | None:
    """The cost check: a path (a command) whose CPU per byte on this input is over ``bound`` times
    what it spends per byte of the ordinary capture (paths under COST_FLOOR seconds: not checked)."""
    if bound <= 0 or not size:
        return None
    for name, spent in cpu.items():
        per = ref.get(name)
        if per and spent >= COST_FLOOR and spent / size > bound * per:
            return (f"cost: {name}: {spent:.2f} s CPU for {size:,} bytes, {spent / size * 1e6:.2f} us per byte: "
                    f"over {bound:g} x the ordinary capture's {per * 1e6:.3f} us per byte "
                    f"(tests/fuzz/fuzz_run.py ordinary_capture)")
    return None


def worst_cost(cpu: dict, size: int, ref: dict):
    """(ratio, path) of this input's costliest path against the ordinary capture per byte (paths
    under COST_FLOOR seconds left out: fixed costs dominate them), or None."""
    worst = None
    for name, spent in cpu.items():
        per = ref.get(name)
        if per and size and spent >= COST_FLOOR:
            r = spent / size / per
            if worst is None or r > worst[0]:
                worst = (round(r, 2), name)
    return worst


def _worker(args):
    seed, start, stop, step, out, formats, kinds, deadline, batch, cost_bound = args
    import fuzzgen

    tmp = tempfile.mkdtemp(prefix="amqp-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    path = os.path.join(tmp, "input.pcap")
    tried, failed = 0, []
    checker = fuzzgen.Checker(formats, batch)
    keys_path = os.path.join(tmp, "input.keys")
    tls = []  # (capture bytes, key log lines) of the real TLS capture of the keylog kind, made once
    inputs = {}  # input number -> (kind, bytes, key log bytes or None) until its tables are written
    problems_of = {}
    kinds_tried: dict = {}  # kind -> inputs
    worst = None  # [ratio, path, kind, input number, bytes]: the costliest input per byte (see worst_cost)

    def save(i, problems):
        kind, data, keys = inputs[i]
        name = os.path.join(out, f"{kind}-{seed}-{i}")
        with open(name + ".pcap", "wb") as f:
            f.write(data)
        if keys is not None:  # amqp-dissect <command> --keylog NAME.keys NAME.pcap
            with open(name + ".keys", "wb") as f:
                f.write(keys)
        with open(name + ".txt", "w") as f:
            f.write("\n".join(problems) + "\n")
        failed.append((name + ".pcap", problems[0].splitlines()[0]))

    def flush():
        for i, late in checker.flush().items():
            problems_of.setdefault(i, []).extend(late)
        for i in sorted(inputs):
            if problems_of.get(i):
                save(i, problems_of[i])
        inputs.clear()
        problems_of.clear()

    ref = reference_cost(checker, path) if cost_bound > 0 else {}
    t0 = time.process_time()
    try:
        for i in range(start, stop, step):
            if deadline and time.time() > deadline:
                break
            r = fuzzgen.RandomSource(f"{seed}:{i}")
            kind = r.choice(kinds) if kinds else None
            keys = None
            if kind == fuzzgen.SPLIT_KIND:
                data = fuzzgen.split_input(r)
            elif kind == fuzzgen.IDLE_KIND:
                data = fuzzgen.idle_connections(r)
            elif kind == fuzzgen.GZIP_KIND:
                data = fuzzgen.gzip_damage(r)
            elif kind == fuzzgen.OPTION_KIND:  # a small sample; the input is the option's value
                data = fuzzgen.option_capture()
            elif kind == "keylog":  # a hostile key log on a real TLS capture, cut short or not
                if not tls:
                    tls.append(_tls_capture(tmp))
                data = fuzzgen.cut_capture(r, tls[0][0])
                keys = fuzzgen.keylog(r, tls[0][1])
                with open(keys_path, "wb") as f:
                    f.write(keys)
            else:
                kind, data = fuzzgen.generate(r, kind)
            checker.keylog = keys_path if keys is not None else None
            with open(path, "wb") as f:
                f.write(data)
            inputs[i] = (kind, data, keys)
            parts = os.path.join(tmp, "parts")
            if kind == fuzzgen.OPTION_KIND:  # (the command's own run is the check)
                problems = fuzzgen.check_option_value(r, path, parts)  # (its .txt names the command)
            else:
                problems = checker.check(path, i)
            if kind in (fuzzgen.SPLIT_KIND, fuzzgen.GZIP_KIND):
                problems = problems + fuzzgen.check_split(path, parts)
            if kind == fuzzgen.GZIP_KIND:
                problems = problems + fuzzgen.check_gzip_agreement(path, parts)
            costly = None if kind == fuzzgen.OPTION_KIND else cost_problem(checker.cpu, len(data), ref, cost_bound)
            if costly:
                problems = problems + [costly]
            kinds_tried[kind] = kinds_tried.get(kind, 0) + 1
            w = worst_cost(checker.cpu, len(data), ref)
            if w is not None and (worst is None or w[0] > worst[0]):
                worst = [w[0], w[1], kind, i, len(data)]
            if problems:
                problems_of[i] = problems
            tried += 1
            if checker.full:
                flush()
        flush()
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return tried, failed, time.process_time() - t0, start, kinds_tried, worst


def _tls_capture(tmp: str) -> tuple:
    """(capture bytes, key log lines) of a TLS 1.3 replay of a sample (tests/support/tlscap.py: needs
    tcpdump and root)."""
    import tlscap

    pcap, keys = os.path.join(tmp, "tls.pcap"), os.path.join(tmp, "tls.keys")
    tlscap.make_capture(os.path.join(os.path.dirname(os.path.dirname(HERE)), "samples", "outcomes.pcap"), pcap, keys, tls="1.3")
    with open(pcap, "rb") as f:
        data = f.read()
    with open(keys, "rb") as f:
        lines = [x for x in f.read().splitlines() if x and not x.startswith(b"#")]
    os.unlink(pcap)
    os.unlink(keys)
    return data, lines


def _commit() -> str | None:
    """The git commit of this checkout (None outside one)."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _read_journal(path, settings):
    """The finished units of a journal (start -> its line) and each earlier run's wall seconds."""
    done, runs = {}, {}
    if not os.path.exists(path):
        return done, runs
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:  # (a line cut by a kill)
                continue
            if "settings" in rec:
                if rec["settings"] != settings:
                    sys.exit(f"journal {path} was made with other settings: {rec['settings']}")
                continue
            if "start" not in rec:  # (a run's own line)
                runs.setdefault(rec["run"], 0.0)
                continue
            done[rec["start"]] = rec
            runs[rec["run"]] = max(runs.get(rec["run"], 0.0), rec["wall"])
    return done, runs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--inputs", type=int, default=1_000_000, help="inputs to try (default 1,000,000)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fuzz-failures", help="folder for the failing inputs (.pcap repros)")
    ap.add_argument("--formats", default="jsonl", help="table formats written per input (csv,jsonl,table)")
    ap.add_argument("--kinds", default="", help="input kinds, comma-separated (default all: "
                    "conversation,frame,mutation,mutated-conversation,state-scale,websocket; split: whole-file mutations of "
                    "plain, pcapng and gzip captures, also fed to the split command; keylog: hostile key "
                    "logs on a real TLS capture, which needs tcpdump and root; idle-connections: thousands "
                    "of connections without an AMQP frame; gzip-damage: a damaged gzip sample, also split, the "
                    "readers checked to agree on the damage; option-values: a hostile value of a numeric "
                    "option of a command, run on a sample)")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this many seconds (0: no limit)")
    ap.add_argument("--chunk", type=int, default=200, help="inputs per work unit")
    ap.add_argument("--batch", type=int, default=100, help="inputs whose tables are written together "
                    "(one write per table and format; 1: each input's at once)")
    ap.add_argument("--cost-bound", type=float, default=20.0, help="flag an input whose CPU per byte (above "
                    f"{COST_FLOOR} s) is over this many times that of an ordinary capture (default 20; 0: off)")
    ap.add_argument("--journal", default="", help="file of the finished work units: a run with the same file "
                    "and settings resumes where the last one stopped, and reports the totals of all runs")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    formats = tuple(x for x in a.formats.split(",") if x)
    kinds = tuple(x for x in a.kinds.split(",") if x)
    t0 = time.time()
    deadline = t0 + a.seconds if a.seconds else 0
    # work units: chunks of consecutive input numbers
    units = [(a.seed, s, min(s + a.chunk, a.inputs), 1, a.out, formats, kinds, deadline, a.batch, a.cost_bound)
             for s in range(0, a.inputs, a.chunk)]
    tried, failures, cpu = 0, [], 0.0
    kinds_all: dict = {}  # kind -> inputs tried
    worst_all = None  # the costliest input per byte (see worst_cost): [ratio, path, kind, input, bytes]
    last = t0
    before = 0.0  # wall seconds of the journal's earlier runs
    journal = None
    if a.journal:
        settings = {"seed": a.seed, "inputs": a.inputs, "chunk": a.chunk, "formats": list(formats),
                    "kinds": list(kinds), "batch": a.batch}
        if a.cost_bound != 20.0:
            settings["cost_bound"] = a.cost_bound
        done, runs = _read_journal(a.journal, settings)
        for unit in done.values():
            tried += unit["tried"]
            cpu += unit["cpu"]
            failures += [tuple(f) for f in unit["failures"]]
            for k, v in (unit.get("kinds") or {}).items():
                kinds_all[k] = kinds_all.get(k, 0) + v
            w = unit.get("worst_cost")
            if w is not None and (worst_all is None or w[0] > worst_all[0]):
                worst_all = w
        before = sum(runs.values())
        run_id = max(runs, default=-1) + 1
        units = [u for u in units if u[1] not in done]
        journal = open(a.journal, "a")
        if not done and not runs:
            journal.write(json.dumps({"settings": settings}) + "\n")
        journal.write(json.dumps({"run": run_id, "began": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                                  "jobs": a.jobs, "commit": _commit()}) + "\n")
        journal.flush()
        print(f"journal {a.journal}: {len(done)} units done in {len(runs)} earlier runs "
              f"({tried:,} inputs, {before:.0f} s), {len(units)} to go", flush=True)

    def progress(final=False):
        dt = max(time.time() - t0 + before, 1e-9)
        per = f"{cpu / tried * 1000:.2f} ms CPU per input" if tried else "no input"
        print(f"{'done' if final else 'progress'}: inputs tried {tried:,}, {tried / dt:.1f} inputs/s, "
              f"failures {len(failures)}, {dt:.0f} s, {cpu:.0f} s CPU in the workers, {per}", flush=True)
        if final and kinds_all:
            print("kinds: " + ", ".join(f"{k} {v:,}" for k, v in sorted(kinds_all.items())), flush=True)
        if final and worst_all is not None:
            r, name, kind, i, size = worst_all
            print(f"worst cost per byte: {r:g}x the ordinary capture's, {name} on {kind} input {i} ({size:,} bytes; "
                  f"bound {a.cost_bound:g}x)", flush=True)

    if a.jobs > 1:
        pool = multiprocessing.get_context("fork").Pool(a.jobs)
        results = pool.imap_unordered(_worker, units)
    else:
        pool, results = None, map(_worker, units)
    try:
        for n, failed, secs, start, kinds_n, worst in results:
            for k, v in kinds_n.items():
                kinds_all[k] = kinds_all.get(k, 0) + v
            if worst is not None and (worst_all is None or worst[0] > worst_all[0]):
                worst_all = worst
            if journal is not None:
                complete = n == min(start + a.chunk, a.inputs) - start  # (a unit cut by --seconds is tried again)
                if complete:
                    journal.write(json.dumps({"run": run_id, "start": start, "tried": n, "cpu": round(secs, 3),
                                              "failures": failed, "wall": round(time.time() - t0, 1),
                                              "kinds": kinds_n, "worst_cost": worst}) + "\n")
                    journal.flush()
                    os.fsync(journal.fileno())
            tried += n
            cpu += secs
            failures += failed
            for path, first in failed:
                print(f"FAIL {path}: {first}", flush=True)
            if time.time() - last > 60:
                last = time.time()
                progress()
            if deadline and time.time() > deadline:
                break
    finally:
        if pool is not None:
            pool.terminate()
        if journal is not None:
            journal.close()
    progress(final=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
