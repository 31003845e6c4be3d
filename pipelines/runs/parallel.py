"""``-j N``: one capture analysed by N processes, with the output of one.

The sharding contract (the flow, the capture clock, the output order) is
:mod:`amqp_dissect.shard`'s, the Spark job's too.  Every worker (the parent is worker 0;
workers 1..N-1 are forked children) reads the whole capture (the OS caches it; a pcap reader
drops the records of flows it already knows for other workers without making them:
:class:`~amqp_dissect.capture.pcap.FlowGate`), computes each TCP record's flow and gives each
new flow, in order of first appearance, to the worker with the fewest captured bytes so far:
every worker computes the same assignment, with no pre-pass.  A worker feeds only its own
flows to its Dissector and Analyzer (the loop: :func:`~amqp_dissect.shard.pump_shard`).  Every
worker ticks the idle sweep over all TCP records and sweeps its own connections at a tick; the
end of the capture (the last record's time and the last TCP record's number) closes the
reassembly, and the Analyzer is finished at the time of the last record that made an event in
any worker (one exchange with the parent).

Records outside any flow (other link types, packets the parser rejects) and the capture-wide
counts come from worker 0.

Ordering.  What a worker's Analyzer lists gets the contract's key ``(packet, phase, block, n)``
(block: at a sweep, the expired connection's flow's last packet (the reassembler's
least-recently-active order); at the close, the connection's first packet); ``n`` counts in the
worker.  The parent merges the workers' items by key.

Settled deliveries that wait for the other peer's disposition are folded ``FOLD_LAG``
settlements later in one process, counting every connection: a worker counts its own, so it
folds them later, never earlier.  Their table position is computed from the merged sequence of
all workers' settlements (:func:`_resolve_lag`); the row is the same unless a disposition
comes for a delivery more than ``FOLD_LAG`` settlements of the whole capture after it was
settled (the single process counts it late; a worker still applies it).  Other limits of the
identity: more than the reassembler's 100,000 open connections at once (a worker evicts by its
own count); more than the state model's caps over the whole capture, which a worker counts over
its own connections: 16,384 placeholder sessions and links (``PLACEHOLDERS_MAX``; the caps per
connection are the same in every worker) and 50,000 distinct violations listed
(``VIOLATIONS_LISTED``; the rows repeated word for word are per connection: the same).

Inputs that cannot be read twice (standard input, a live capture) are analysed by one process.
"""

from __future__ import annotations

import heapq
import os
import sys
import traceback
from array import array
from itertools import islice

from amqp_dissect.capture.netparse import TruncatedPacket, parse_segment
from amqp_dissect.capture.pcap import FlowGate
from amqp_dissect.errors import DissectError, UnsupportedLinkType
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.shard import (END, LIVE, PHASE_CLOSE, PHASE_FINISH, PHASE_PACKET, PHASE_SWEEP, conn_rank,
                                pump_shard, reverse_key, segment_key)


def splittable(inputs) -> bool:
    """Whether ``inputs`` (paths) can be read by several processes: files, not streams."""
    for src in inputs:
        if hasattr(src, "read"):
            return False
        p = os.fspath(src)
        if p == "-" or not os.path.isfile(p):
            return False
    return True


class FlowWorker:
    """Worker ``w`` of ``n``: reads ``source`` (a CaptureSource; its dissector is used), feeds
    its flows to ``an`` and keys what the Analyzer lists (see the module docstring).

    ``fold_keys``: also key the folded deliveries (the deliveries table), each in ``an.fold_out``
    order: ``fold_order`` gets the key of a fold made at an event of this worker, or ``(-1, 0, j)`` for
    the fold of the delivery this worker's ``j``-th lag settlement queued
    (placed by :func:`_resolve_lag`); ``settle_order`` gets the key of each lag settlement."""

    def __init__(self, w: int, n: int, source, an, fold_keys: bool = False):
        self.w, self.n = w, n
        self.source = source
        self.an = an
        self.d = source.dissector
        self.seq = 0
        self.k_stall: list = []
        self.k_viol: list = []
        self.k_ferr: list = []
        self.k_txn: list = []
        self.k_bug: list = []
        self.k_conn: dict = {}  # connection id -> key
        self._nconn = 0
        self.items_keyed = 0
        self.conn_flow: dict = {}  # connection id -> its flow's [worker, last packet fed]
        self._popped = 0
        self.fold_out = None  # (deliveries) the Analyzer's fold_out, drained by drain() a batch at a time
        self.fold_batch = 2048
        self.conn_open: dict = {}  # connection id -> packet it opened at
        self.last_ev = None  # (packet, ts) of the last record that made an event here
        self.last_tcp = None
        self.last_ts = None
        self.cur = (0, PHASE_PACKET, 0)
        self.fold_keys = fold_keys
        self.queued: dict = {}  # id(delivery) -> its lag settlement index, while queued
        self.popping = None
        # per folded delivery (in fold_out order) its key as (hi, mid, lo) int64s ((packet << 2 | phase, block, n << 1)), or
        # (-1, 0, j) for the fold of the delivery this worker's j-th lag settlement queued; and the
        # key of each lag settlement of this worker
        self.fold_order = (array("q"), array("q"), array("q"))
        self.settle_order = (array("q"), array("q"), array("q"))
        self.settling_keyed = self.folds_keyed = 0
        if fold_keys:
            # the lag queue of settled deliveries is kept here (see key_folds): the state layer only appends
            self.lag = an.fold_lag
            an.fold_lag = 1 << 62
            self._nfold = 0  # folds keyed so far (an.fold_out grows by the state layer's folds)
            self._nsettle = 0  # lag settlements keyed so far (the state layer appends to an._settling)

    # -- keys ------------------------------------------------------------------------

    def key_items(self) -> None:
        an = self.an
        stalls, viol, ferr, txn, bugs = an.stalls, an.violations, an.frame_errors, an.transactions, an.internal_errors
        total = len(stalls) + len(viol) + len(ferr) + len(txn) + len(bugs) + len(an.connections)
        if total == self.items_keyed:
            return
        self.items_keyed = total
        cur = self.cur
        for lst, keys in ((an.stalls, self.k_stall), (viol, self.k_viol), (ferr, self.k_ferr), (txn, self.k_txn),
                          (bugs, self.k_bug)):
            while len(keys) < len(lst):
                keys.append(cur + (self.seq,))
                self.seq += 1
        conns = an.connections
        if len(conns) > self._nconn:
            # the new ones, read from the end (the tracker only adds connections: a walk from the start
            # would make a capture of many connections quadratic)
            new = list(islice(reversed(conns), len(conns) - self._nconn))
            new.reverse()
            for cid in new:
                self.k_conn[cid] = cur + (self.seq,)
                # the connection's table order over the whole capture (deliveries order by it)
                conns[cid].seq = conn_rank(cur, self.seq)
                self.seq += 1
            self._nconn = len(conns)

    # -- reading ---------------------------------------------------------------------

    def _sweep(self, d, ts, packet) -> None:
        evs = d.sweep_idle(ts, packet)
        if not evs:
            return
        self.last_ev = (packet, ts)
        an = self.an
        conn_flow = self.conn_flow
        for ev in evs:
            ent = conn_flow.get(getattr(ev, "conn", None))
            self.cur = (packet, PHASE_SWEEP, ent[1] if ent is not None else 0)
            an.feed(ev)
            self.key_items()
            if self.fold_out is not None:
                self.key_folds()

    def read(self) -> None:
        """Read the whole capture, feeding this worker's flows (the loop is
        :func:`~amqp_dissect.shard.pump_shard`, which calls back the methods below)."""
        src, d = self.source, self.d
        self.clock = d.clock  # (watched here over every worker's records, not by the Dissector: see shard._watch)
        d.clock = None
        self.an.clock = self.clock
        src.clock_watch = self.clock  # (the capture's steps, for capture_info)
        d.tcp.drive_sweeps_externally()  # the sweeps are driven here, on every flow's records
        owner: dict = {}  # directed 4-tuple bytes (both directions) -> [worker, last packet fed]
        loads = [0] * self.n
        self.gate = FlowGate(owner, loads, self.w)  # (the pcap reader drops the other workers' records with it)
        self.own_last_tcp = self.last_pk = self.last_ets = None
        self._owner = owner
        src.gate = self.gate
        try:
            for reader, offset in src._readers():
                src.packets += pump_shard(d, reader, self, offset, owner, loads, self.w)
        finally:
            src.gate = None
        last_pk = self.last_pk
        if last_pk is not None and (self.last_ev is None or last_pk > self.last_ev[0]):
            self.last_ev = (last_pk, self.last_ets)
        self.last_tcp = self.own_last_tcp  # (of this worker's records: the capture's is the largest, see run_workers)
        if self.gate.seen:
            d.last_ts = self.gate.ts
        self.last_ts = d.last_ts

    # (the callbacks of shard.pump_shard)

    def slow_key(self, rec):
        """The flow of a record the quick look could not read, from the parser: ``(key, True)``,
        or None for a record of no flow (worker 0 feeds it: its note, the capture's counts)."""
        try:
            seg = parse_segment(rec.linktype, rec.data)
        except TruncatedPacket as exc:
            seg = exc.segment
        except (UnsupportedLinkType, DissectError):
            if self.w == 0:
                evs = self.d.feed(rec)
                if evs:
                    self.cur = (rec.index, PHASE_PACKET, 0)
                    self.last_ev = (rec.index, rec.ts)
                    afeed = self.an.feed
                    for ev in evs:
                        afeed(ev)
                    self.key_items()
            return None
        if seg is None:  # not TCP: no event
            if self.w == 0:
                self.d.feed(rec)
            return None
        return segment_key(seg), True

    def tick(self, ts, packet) -> None:
        self._sweep(self.d, ts, packet)

    def new_flow(self, key: bytes, loads: list) -> list:
        """A flow met for the first time: to the worker with the fewest bytes so far."""
        ent = [loads.index(min(loads)), 0]  # (worker, last packet fed: the LRU order of sweeps)
        self._owner[key] = ent
        self._owner[reverse_key(key)] = ent
        return ent

    def opened(self, ev, ent) -> None:
        self.conn_flow[ev.conn] = ent
        self.conn_open[ev.conn] = ev.packet

    def close(self, last_tcp=None) -> None:
        """The end of the capture for the reassembly (the Analyzer waits for :meth:`finish`);
        ``last_tcp``: the capture's last TCP record (every worker's largest ``last_tcp``)."""
        d = self.d
        an = self.an
        conn_open = self.conn_open
        # (a TCP connection at a time: issue 40)
        for evs in d.finishing(self.last_ts, last_tcp if last_tcp is not None else self.last_tcp):
            for ev in evs:
                self.cur = (END, PHASE_CLOSE, conn_open.get(getattr(ev, "conn", None), 0))
                an.feed(ev)
                self.key_items()
                if self.fold_out is not None:
                    self.key_folds()

    def finish(self, end_ts, last_tcp=None) -> None:
        """The end of the capture: the reassembly's (:meth:`close`), then the Analyzer's at
        ``end_ts`` (the whole capture's, see :func:`last_event`)."""
        self.close(last_tcp)
        an = self.an
        self.cur = (END, PHASE_FINISH, 0)
        if self.fold_out is not None:
            # the end of the capture folds what waits in the lag queue, in order
            waiting = [(self._popped + i) for i, x in enumerate(an._settling) if not x.folded]
            n0 = len(self.fold_out)
            an.fold_lag = self.lag
            an.finish(end_ts)
            self.fold_order[0].extend([-1] * len(waiting))
            self.fold_order[1].extend([0] * len(waiting))
            self.fold_order[2].extend(waiting)
            if len(self.fold_order[0]) != len(self.fold_out):
                raise RuntimeError(f"-j: {len(self.fold_out) - n0} deliveries folded at the end, {len(waiting)} expected")
        else:
            an.finish(end_ts)
        k_conn = self.k_conn
        viol = an.violations
        while len(self.k_viol) < len(viol):  # (the idle checks, in connection order)
            v = viol[len(self.k_viol)]
            self.k_viol.append((END, PHASE_FINISH, k_conn.get(v.get("connection"), ()), self.seq))
            self.seq += 1
        self.items_keyed = -1
        self.key_items()

    def key_folds(self) -> None:
        """Key the folds and lag settlements of the event just fed (at ``cur``), then fold what
        the lag queue holds beyond ``lag`` (the single process folds a delivery ``lag`` settlements
        after its own, counting every connection: :func:`_resolve_lag` places it).  (An event
        that both folds deliveries settled by both peers and queues others is taken as doing the
        folds first.)"""
        fo = self.fold_out
        f_hi, f_mid, f_lo = self.fold_order
        cur = self.cur
        hi = (cur[0] << 2) | cur[1]
        mid = cur[2] if type(cur[2]) is int else 0
        k = len(fo) - len(f_hi)
        if k > 0:  # (folds made while fed: deliveries settled by both peers)
            f_hi.extend([hi] * k)
            f_mid.extend([mid] * k)
            f_lo.extend(range(self.seq << 1, (self.seq + k) << 1, 2))
            self.seq += k
        q = self.an._settling
        n_new = len(q) - (self._nsettle - self._popped)
        if n_new > 0:
            s_hi, s_mid, s_lo = self.settle_order
            s_hi.extend([hi] * n_new)
            s_mid.extend([mid] * n_new)
            s_lo.extend(range(self.seq << 1, (self.seq + n_new) << 1, 2))
            self.seq += n_new
            self._nsettle += n_new
            lag = self.lag
            if lag is not None and len(q) > lag:
                self._popped = self.an.fold_lagged(lag, self._popped, f_hi, f_mid, f_lo)
        self.settling_keyed = len(q)
        self.folds_keyed = len(fo)

    def drain(self, rows: int) -> None:
        """Hand full batches of folded deliveries to ``on_batch`` (deliveries; see DeliveriesJob)."""
        fo = self.fold_out
        fold_order = self.fold_order
        while len(fo) >= rows:
            self.on_batch(fo[:rows], [x[:rows] for x in fold_order])
            del fo[:rows]
            for x in fold_order:
                del x[:rows]
        self.folds_keyed = len(fo)


def last_event(reports) -> float | None:
    """The time of the last record that made an event, from the workers' ``last_ev``."""
    best = None
    for r in reports:
        if r is not None and (best is None or r[0] > best[0]):
            best = r
    return best[1] if best is not None else None


# --------------------------------------------------------------------------- processes


class WorkerFailed(Exception):
    """A worker process met an exception (its text is the message)."""


def run_workers(n: int, make_source, job):
    """Run ``job(worker)`` in ``n`` workers: worker 0 in this process, the others forked.

    ``make_source()`` builds a fresh CaptureSource (called in each worker), ``job(w, source)``
    returns a FlowWorker after reading and closing (the reading part), then
    ``job.finish(fw, (end_ts, last_tcp))`` returns the picklable result (the end of the capture
    from every worker: see :meth:`FlowWorker.finish`).  Returns (worker 0's FlowWorker,
    [result of each worker]).  A child that fails raises :class:`WorkerFailed` here."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()
    chans = []
    procs = []
    for w in range(1, n):
        parent_end, child_end = ctx.Pipe()
        p = ctx.Process(target=_child, args=(w, n, make_source, job, child_end), daemon=True)
        p.start()
        child_end.close()
        chans.append(parent_end)
        procs.append(p)
    times = os.environ.get("AMQP_DISSECT_JOBS_TIMES")  # (benchmarking: CPU seconds of each step, on stderr)
    t0 = _cpu()
    try:
        fw = job.read(0, n, make_source())
        lasts = [fw.last_ev]
        last_tcp = fw.last_tcp
        for ch in chans:
            ev, tcp = _recv(ch)
            lasts.append(ev)
            if tcp is not None and (last_tcp is None or tcp > last_tcp):
                last_tcp = tcp
        end = (last_event(lasts), last_tcp)
        for ch in chans:
            ch.send(end)
        results = [job.finish(fw, end)]
        if times:
            print(f"jobs: worker 0 {_cpu() - t0:.3f} s", file=sys.stderr)
        for ch in chans:
            results.append(_recv(ch))
        for p in procs:
            p.join()
        return fw, results
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()


def _cpu() -> float:
    import time

    return time.process_time()


def _recv(ch):
    try:
        kind, value = ch.recv()
    except EOFError:
        raise WorkerFailed("a worker process ended without its result") from None
    if kind == "error":
        raise WorkerFailed(value)
    return value


def _child(w, n, make_source, job, ch) -> None:
    code = 0
    try:
        import gc

        gc.freeze()
        fw = job.read(w, n, make_source())
        ch.send(("ok", (fw.last_ev, fw.last_tcp)))
        end = ch.recv()
        res = job.finish(fw, end)
        if os.environ.get("AMQP_DISSECT_JOBS_TIMES"):
            print(f"jobs: worker {w} {_cpu():.3f} s", file=sys.stderr)
        ch.send(("ok", res))
    except BaseException as e:  # noqa: BLE001 (whatever it is, the parent reports it)
        try:
            if os.environ.get("AMQP_DISSECT_DEBUG"):
                traceback.print_exc()
            ch.send(("error", f"worker {w}: {type(e).__name__}: {e}"))
        except Exception:
            pass
        code = 1
    finally:
        try:
            ch.close()
        finally:
            sys.stdout.flush()
            os._exit(code)


# --------------------------------------------------------------------------- the report


class _Bugs:
    """What ``CaptureRun.finish_status`` reads of an Analyzer: its internal errors."""

    def __init__(self, internal_errors):
        self.internal_errors = internal_errors


def _keyed_bugs(fw) -> list:
    """A worker's internal errors with their keys (merged by :func:`_merged_bugs`)."""
    return list(zip(fw.k_bug, fw.an.internal_errors))


def _merged_bugs(results) -> _Bugs:
    return _Bugs([b for _, b in heapq.merge(*[r["bugs"] for r in results], key=lambda kb: kb[0])])


class _AnalysisJob:
    """A worker that reads its flows into an Analyzer without rows (the report, the small tables)."""

    def read(self, w: int, n: int, source):
        fw = FlowWorker(w, n, source, Analyzer(rows=False))
        fw.read()
        return fw


class ReportJob(_AnalysisJob):
    """The report's part of one worker (:func:`~amqp_dissect.results.report.partial_report`), and
    with ``messages`` its share of the requests section (pipelines/runs/requests.py: the messages read)
    and of the messages section (:func:`amqp_dissect.pipelines.runs.messages.worker_part`)."""

    def __init__(self, messages: bool = False):
        self.messages = messages
        self.watch = None

    def read(self, w: int, n: int, source):
        if not self.messages:
            return _AnalysisJob.read(self, w, n, source)
        from .messages import watch_messages
        from .requests import watched_analyzer

        an, self.watch = watched_analyzer(source)
        self.matcher = watch_messages(an)
        fw = FlowWorker(w, n, source, an)
        fw.read()
        return fw

    def finish(self, fw, end):
        from amqp_dissect.results.report import partial_report

        fw.finish(*end)
        from .messages import worker_part

        return {"report": partial_report(fw.an, fw), "bugs": _keyed_bugs(fw),
                "requests": self.watch.part() if self.watch is not None else None,
                "messages": worker_part(fw.an, self.matcher) if self.watch is not None else None}


def parallel_report(source, jobs: int, capture_errors=None, messages: bool = False):
    """(report document, analyzer-like object with the merged ``internal_errors``) of ``source``
    (a CaptureSource over files) analysed by ``jobs`` processes (``messages``: the requests
    and messages sections too)."""
    from amqp_dissect.results.report import merge_reports

    fw, results = run_workers(jobs, lambda: source, ReportJob(messages))
    errors = [f"{p}: {e}" for p, e in source.errors] if capture_errors is None else capture_errors
    rep = merge_reports([r["report"] for r in results], capture_errors=errors, capture=source.capture_info())
    if messages:
        from .requests import merged_section

        rep["requests"] = merged_section([r["requests"] for r in results], getattr(source, "clock_watch", None))
        from .messages import add_merged_messages_section

        add_merged_messages_section(rep, [r["messages"] for r in results])
    return rep, _merged_bugs(results)


# --------------------------------------------------------------------------- the tables


def keyed_rows(an, fw, table: str):
    """``(key, row)`` of one of the small tables of this worker in key order (an iterable: the
    rows per connection are made as they are asked for), ``key`` its place in the single-process
    table (rows of a connection, in its order, follow its key)."""
    k_conn = fw.k_conn
    if table == "connections":
        return (((k_conn[c.id], 0), an.connection_row(c)) for c in an.connections.values())
    if table == "sessions":
        return (((k_conn[c.id], i), r) for c in an.connections.values()
                for i, r in enumerate(an.connection_session_rows(c)))
    if table == "links":
        return (((k_conn[c.id], i), r) for c in an.connections.values()
                for i, r in enumerate(an.connection_link_rows(c)))
    if table == "stalls":
        return list(zip(fw.k_stall, an.stall_rows()))
    if table == "transactions":
        return list(zip(fw.k_txn, an.transaction_rows()))
    if table == "violations":
        return list(zip(fw.k_viol, an.violation_rows()))
    if table == "errors":  # the frames' errors in capture order, then the analysis' per connection
        rows = an.error_rows()
        nfe = len(an.frame_errors)
        return ([((0, k), r) for k, r in zip(fw.k_ferr, rows[:nfe])]
                + [((1, k_conn[r["connection"]], i), r) for i, r in enumerate(rows[nfe:])])
    raise ValueError(f"no table {table!r}")


class TableJob(_AnalysisJob):
    """The rows of one small table (not deliveries) of one worker, written to a temporary file
    in chunks of ROW_DICTS rows (:func:`_write_keyed`): the parent merges them chunk by chunk,
    not holding every worker's rows at once (200,000 connection rows were about 1 GB)."""

    def __init__(self, table: str, directory: str):
        self.table = table
        self.directory = directory

    def finish(self, fw, end):
        fw.finish(*end)
        path = os.path.join(self.directory, f"rows-{fw.w}.pickle")
        _write_keyed(keyed_rows(fw.an, fw, self.table), path)
        return {"path": path, "bugs": _keyed_bugs(fw)}


def _write_keyed(pairs, path: str) -> None:
    """``(key, row)`` pairs to ``path``: one pickle per chunk of ROW_DICTS pairs."""
    import pickle

    from amqp_dissect.pipelines.writers.tables import ROW_DICTS

    it = iter(pairs)
    with open(path, "wb") as f:
        while True:
            chunk = list(islice(it, ROW_DICTS))
            if not chunk:
                return
            pickle.dump(chunk, f, protocol=pickle.HIGHEST_PROTOCOL)
            del chunk


def _read_keyed(path: str):
    """The ``(key, row)`` pairs :func:`_write_keyed` wrote, a chunk in memory at a time."""
    import pickle

    with open(path, "rb") as f:
        while True:
            try:
                chunk = pickle.load(f)
            except EOFError:
                return
            yield from chunk
            del chunk


def parallel_rows(source, jobs: int, table: str):
    """(rows of ``table`` in the single process' order, analyzer-like object with the internal
    errors) of ``source`` analysed by ``jobs`` processes.  The rows are an iterator, a streamed
    merge of the workers' files (memory: a chunk of rows per worker)."""
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="amqp-dissect-j")
    try:
        _, results = run_workers(jobs, lambda: source, TableJob(table, directory))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise

    def rows():
        try:
            merged = heapq.merge(*[_read_keyed(r["path"]) for r in results], key=lambda kr: kr[0])
            for _, row in merged:
                yield row
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    return rows(), _merged_bugs(results)


# --------------------------------------------------------------------------- the deliveries table

_KEY_COLUMNS = ("_khi", "_kmid", "_klo")


class DeliveriesJob:
    """One worker's deliveries: Arrow batches with their keys in two temporary IPC files, each
    sorted by key: the folds made at this worker's events (then the deliveries still open), and
    the folds of the lag queue (keys resolved by the parent, in the order of the settlements)."""

    def __init__(self, directory: str, batch_rows: int, messages: bool = False):
        self.directory = directory
        self.batch_rows = batch_rows
        self.messages = messages  # the message columns are read (pipelines.runs.local.read_messages)

    def read(self, w: int, n: int, source):
        folded: list = []
        if self.messages:
            source.dissector.payloads = True
        an = Analyzer(rows=False, fold_out=folded, messages=self.messages, redeliveries=False)
        fw = FlowWorker(w, n, source, an, fold_keys=True)
        fw.fold_out = folded
        fw.fold_batch = self.batch_rows
        files = fw.ipc = _DeliveryFiles(self.directory, w)

        def on_batch(ds, keys):
            import numpy as np
            import pyarrow as pa

            from amqp_dissect.results.tables import columns_batch

            b = columns_batch("deliveries", *an.delivery_columns(ds), checked=True)
            arrays = b.columns + [pa.array(np.frombuffer(k, dtype=np.int64) if len(k) else [], pa.int64())
                                  for k in keys]
            batch = pa.RecordBatch.from_arrays(arrays, schema=files.schema())
            lagged = np.frombuffer(keys[0], dtype=np.int64) < 0 if len(keys[0]) else np.zeros(0, bool)
            if lagged.any():
                files.write(1, batch.filter(pa.array(lagged)))
                batch = batch.filter(pa.array(~lagged))
            if batch.num_rows:
                files.write(0, batch)

        fw.on_batch = on_batch
        fw.read()
        return fw

    def finish(self, fw, end):
        from array import array

        fw.finish(*end)
        an = fw.an
        fw.drain(self.batch_rows)
        if fw.fold_out:
            fw.on_batch(list(fw.fold_out), fw.fold_order)
        # the deliveries still open, in table order (connection, link, first transfer)
        live_hi = (END << 2) | LIVE
        ds: list = []
        ks = (array("q"), array("q"), array("q"))
        for d in an.live_iter():
            link = d.link
            ck = fw.k_conn.get(link.conn.id, (0, 0))
            ds.append(d)
            ks[0].append(live_hi)
            ks[1].append((ck[0] << 2) | ck[1])
            ks[2].append((link.index << 40) | d.seq)
            if len(ds) >= self.batch_rows:
                fw.on_batch(ds, ks)
                ds, ks = [], (array("q"), array("q"), array("q"))
        if ds:
            fw.on_batch(ds, ks)
        return {"paths": fw.ipc.close(), "settled": fw.settle_order, "lag": fw.lag, "bugs": _keyed_bugs(fw)}


class _DeliveryFiles:
    """A worker's two temporary IPC files of keyed delivery batches (0: its own folds and open
    deliveries, 1: the folds of its lag queue), created at the first batch written: a worker
    without deliveries makes no file and does not load pyarrow (or numpy) at all."""

    KINDS = ("own", "lag")

    def __init__(self, directory: str, w: int):
        self.paths = [os.path.join(directory, f"deliveries-{w}-{kind}.arrow") for kind in self.KINDS]
        self._schema = None
        self._files: list = []  # (sink, IPC writer) per path, once a batch is written

    def schema(self):
        """The deliveries table's Arrow schema and the key columns."""
        if self._schema is None:
            import pyarrow as pa

            from amqp_dissect.results.tables import arrow_schema

            schema = arrow_schema("deliveries")
            for name in _KEY_COLUMNS:
                schema = schema.append(pa.field(name, pa.int64()))
            self._schema = schema
        return self._schema

    def write(self, which: int, batch) -> None:
        if not self._files:
            import pyarrow as pa

            for path in self.paths:
                sink = pa.OSFile(path, "wb")
                self._files.append((sink, pa.ipc.new_file(sink, self.schema())))
        self._files[which][1].write_batch(batch)

    def close(self) -> list | None:
        """The two paths, or None when no batch was written (no file)."""
        for sink, writer in self._files:
            writer.close()
            sink.close()
        return self.paths if self._files else None


def _resolve_lag(settled: list, lag: int | None):
    """Per worker, (hi, mid, lo) numpy arrays of the fold key of the delivery its ``j``-th lag
    settlement queued (see :meth:`FlowWorker.key_folds`)."""
    import numpy as np

    his = [np.frombuffer(s[0], dtype=np.int64) if len(s[0]) else np.zeros(0, np.int64) for s in settled]
    mids = [np.frombuffer(s[1], dtype=np.int64) if len(s[1]) else np.zeros(0, np.int64) for s in settled]
    los = [np.frombuffer(s[2], dtype=np.int64) if len(s[2]) else np.zeros(0, np.int64) for s in settled]
    hi, mid, lo = np.concatenate(his), np.concatenate(mids), np.concatenate(los)
    total = len(hi)
    order = np.lexsort((lo, mid, hi))  # global position -> settlement
    r_hi = np.empty(total, np.int64)
    r_mid = np.empty(total, np.int64)
    r_lo = np.empty(total, np.int64)
    g = np.arange(total)
    h = g + (lag or 0)
    inside = h < total
    # the fold of settlement order[g] happens just after settlement order[g + lag]
    r_hi[order[inside]] = hi[order[h[inside]]]
    r_mid[order[inside]] = mid[order[h[inside]]]
    r_lo[order[inside]] = lo[order[h[inside]]] | 1
    # ... or at the end of the capture, in queue order
    r_hi[order[~inside]] = (END << 2) | PHASE_FINISH
    r_mid[order[~inside]] = -1
    r_lo[order[~inside]] = g[~inside] << 1
    out = []
    start = 0
    for x in his:
        out.append((r_hi[start:start + len(x)], r_mid[start:start + len(x)], r_lo[start:start + len(x)]))
        start += len(x)
    return out


def _key_le(hi, mid, lo, b):
    """Mask of the keys (arrays) at or below key ``b`` (hi, mid, lo)."""
    bh, bm, bl = b
    return (hi < bh) | ((hi == bh) & ((mid < bm) | ((mid == bm) & (lo <= bl))))


class _Sorted:
    """One sorted stream of rows: an IPC file's batches, with their keys (``resolve``: the lag
    file's (hi, mid, lo) arrays by settlement index, to replace its keys)."""

    def __init__(self, path: str, resolve=None):
        import pyarrow as pa

        self._mm = pa.OSFile(path, "rb")  # (read a batch at a time: a memory map would count whole in RSS)
        self._reader = pa.ipc.open_file(self._mm)
        self._next = 0
        self.resolve = resolve
        self.table = None  # the rows read and not yet merged, and their keys
        self.keys = None

    def fill(self) -> bool:
        """Read the next batch (when the buffer is empty); False when the file is done."""
        import numpy as np
        import pyarrow as pa

        while self.table is None or self.table.num_rows == 0:
            if self._next >= self._reader.num_record_batches:
                self.table = None
                return False
            b = self._reader.get_batch(self._next)
            self._next += 1
            hi = b.column("_khi").to_numpy()
            mid = b.column("_kmid").to_numpy()
            lo = b.column("_klo").to_numpy()
            if self.resolve is not None:
                r_hi, r_mid, r_lo = self.resolve
                hi, mid, lo = r_hi[lo], r_mid[lo], r_lo[lo]
            self.table = pa.Table.from_batches([b]).drop_columns(list(_KEY_COLUMNS))
            self.keys = (np.asarray(hi), np.asarray(mid), np.asarray(lo))
        return True

    def last(self) -> tuple:
        hi, mid, lo = self.keys
        return (hi[-1], mid[-1], lo[-1])

    def take_upto(self, bound):
        """The buffered rows at or below ``bound`` (a prefix: the stream is sorted), and their keys."""
        hi, mid, lo = self.keys
        n = int(_key_le(hi, mid, lo, bound).sum()) if bound is not None else len(hi)
        t = self.table.slice(0, n)
        k = (hi[:n], mid[:n], lo[:n])
        self.table = self.table.slice(n)
        self.keys = (hi[n:], mid[n:], lo[n:])
        return t, k

    def close(self) -> None:
        self._mm.close()


def merge_sorted(streams: list, batch_rows: int):
    """The rows of sorted ``streams`` (:class:`_Sorted`) in key order, as record batches of
    exactly ``batch_rows`` rows (the last one shorter): a k-way merge holding about a batch per
    stream (rows up to the smallest of the streams' last buffered keys go out at each step)."""
    import numpy as np
    import pyarrow as pa

    live = [s for s in streams if s.fill()]
    pending: list = []
    npending = 0
    while live:
        # every later row of a stream comes after its last buffered row
        bound = min(s.last() for s in live)
        parts, keys = [], []
        for s in live:
            t, k = s.take_upto(bound)
            if t.num_rows:
                parts.append(t)
                keys.append(k)
        if parts:
            t = pa.concat_tables(parts)
            hi, mid, lo = (np.concatenate([k[i] for k in keys]) for i in range(3))
            if len(parts) > 1:
                t = t.take(pa.array(np.lexsort((lo, mid, hi))))
            pending.append(t)
            npending += t.num_rows
            while npending >= batch_rows:
                whole = pa.concat_tables(pending).combine_chunks()
                yield whole.slice(0, batch_rows).to_batches()[0]
                rest = whole.slice(batch_rows)
                pending = [rest] if rest.num_rows else []
                npending = rest.num_rows
        live = [s for s in live if s.fill()]
    if npending:
        whole = pa.concat_tables(pending).combine_chunks()
        yield from whole.to_batches(max_chunksize=batch_rows)


def parallel_deliveries(source, jobs: int, batch_rows: int | None = None, messages: bool = False):
    """(Arrow record batches of the deliveries table in the single process' order, analyzer-like
    object with the internal errors) of ``source`` analysed by ``jobs`` processes.  The batches
    are a streamed merge of the workers' sorted files (memory: a batch per file, and three
    integers per delivery settled by one peer, to place its fold)."""
    import shutil
    import tempfile

    from amqp_dissect.pipelines.writers.tables import STREAM_ROWS

    batch_rows = batch_rows or STREAM_ROWS
    directory = tempfile.mkdtemp(prefix="amqp-dissect-j")
    try:
        _, results = run_workers(jobs, lambda: source, DeliveriesJob(directory, batch_rows, messages))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    bugs = _merged_bugs(results)
    resolved = _resolve_lag([r["settled"] for r in results], results[0]["lag"])

    def batches():
        streams = []
        try:
            for r, res in zip(results, resolved):
                if r["paths"] is None:  # (a worker without deliveries: no file)
                    continue
                own, lag = r["paths"]
                streams.append(_Sorted(own))
                streams.append(_Sorted(lag, res))
            yield from merge_sorted(streams, batch_rows)
        finally:
            for st in streams:
                st.close()
            shutil.rmtree(directory, ignore_errors=True)

    return batches(), bugs
