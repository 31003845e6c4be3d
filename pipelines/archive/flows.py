"""Archive stage 2: the flows of a partition, each through its own Dissector and Analyzer
(:class:`FlowRunner`), with what a flow needs to know of the rest of the capture
(:class:`FlowParams`: the capture's end, the sharding contract's sweep ticks)."""

from __future__ import annotations

import pickle
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Iterable, Iterator

from amqp_dissect.amqp.message import keep_digested_bytes
from amqp_dissect.capture.keylog import KeyLog
from amqp_dissect.capture.tcp import IDLE_TIMEOUT
from amqp_dissect.clock import ClockWatch
from amqp_dissect.dissect import Dissector
from amqp_dissect.render.frames import event_json
from amqp_dissect.results.analytics import Analyzer
from amqp_dissect.shard import FLOW_PAUSE, pump_flow
from amqp_dissect.times import ns

from .checkpoint import CannotContinue, StateNotSaved, carried as _carried, dump_state, load_state
from .tables import batch_ipc, frame_row, rows_batch


# --------------------------------------------------------------------------- stage 2: one flow


@dataclass(frozen=True)
class FlowParams:
    """What a flow needs to know about the rest of the capture."""

    ports: tuple = ()
    last_ts: float | None = None  # time of the capture's last record (the Dissector's last_ts at finish)
    last_tcp_packet: int = 0  # index of the capture's last record fed to TCP reassembly
    end_ts: float | None = None  # end time the Analyzer is finished with (see amqp_dissect.pipelines.spark)
    ticks: tuple | None = None  # ((packet, ts), ...) of the global idle sweeps, or None when not computed
    frames: bool = False
    messages: bool = False  # the deliveries table's message columns are read (else null)
    idle_timeout: float = IDLE_TIMEOUT
    keylog: str | None = None  # TLS key log text, shipped to the executors with the params
    files: tuple = ()  # the input paths, by file index: where stage 2 reads records given by offset
    # the steps back of the capture's clock (ClockStep tuples: archive.clock_steps): a duration
    # across one is unknown, as in the single process (a flow's own records cannot tell)
    clock_steps: tuple = ()
    # flow -> its pickled state left by an earlier run over the files before these (a
    # Checkpoint's carried flows): the flow starts from it instead of a fresh Dissector/Analyzer
    carried: dict | None = None
    # keep the state of the flows whose rows could still change with later records ("_state"
    # rows), their rows made at the finish marked provisional
    checkpoint: bool = False


# the tables stage 2 makes rows of: the registry's eight and frames
ROW_TABLES = ("connections", "sessions", "links", "deliveries", "stalls", "transactions", "violations", "errors",
              "frames")
_TABLE_METHODS = (  # by connection (deliveries stream out as they become final: FlowRunner._folded_deliveries)
    ("connections", "connection_rows"),
    ("sessions", "session_rows"),
    ("links", "link_rows"),
)
# Rows of the tables the single process lists in the order they were made (violations, frame
# errors, transactions: appended to the Analyzer's lists as events come) get as first key the
# packet number being analysed when they appeared (:meth:`FlowRunner._stamp`); those made at the
# capture's end (no packet) FINISH_K1; the errors the analysis derives per connection after
# every frame error (error_rows) DERIVED_K1 plus their connection's first packet.
FINISH_K1 = 1 << 60
DERIVED_K1 = 1 << 61
_STAMPED = (("violations", "violations"), ("errors", "frame_errors"), ("transactions", "transactions"))


def _delivery_k2(key: tuple) -> int:
    """A delivery's order within its connection (link, then first transfer) as one integer."""
    _, link_index, seq = key
    return (link_index << 40) | seq


_CHUNK_SCHEMAS: dict = {}


def _chunk_schema(table: str):
    s = _CHUNK_SCHEMAS.get(table)
    if s is None:
        from .tables import arrow_schema

        s = _CHUNK_SCHEMAS[table] = arrow_schema(table)
    return s


def _tick_packets(ticks):
    return [t[0] for t in ticks] if ticks else []


def _key_span(k1, k2, flow: str) -> tuple:
    """((k1, flow, k2) smallest, (k1, flow, k2) largest) of the keys of a batch of one flow's rows
    (``k1``, ``k2``: numpy int64 arrays, with rows)."""
    lo1, hi1 = int(k1.min()), int(k1.max())
    return (lo1, flow, int(k2[k1 == lo1].min())), (hi1, flow, int(k2[k1 == hi1].max()))


class FlowRunner:
    """Runs the flows of a partition sorted by (flow, packet); see :meth:`run`."""

    # rows per Arrow chunk of a table made of row dicts (an IPC blob of a few hundred KB); the deliveries,
    # made by column, are a chunk per FOLD_ROWS at most
    CHUNK_ROWS = 1024
    # folded deliveries made into columns at once, then cut into chunks: Arrow's cost per column
    # and call, paid per 1,024 rows, was a third of the column work (a flow holds at most this many
    # final deliveries besides its open ones)
    FOLD_ROWS = 8192

    def __init__(self, params: FlowParams):
        self.p = params
        self._keylog = KeyLog(params.keylog) if params.keylog else None  # parsed once per runner
        self._tick_pk = _tick_packets(params.ticks)
        self._idle_ns = ns(params.idle_timeout)  # (once: compared at every record)
        self.frames_json = event_json if params.frames else None  # (pump_flow: the frames table's rows)
        self._clock = ClockWatch.of(params.clock_steps)  # (the capture's steps, shared by the flows: read only)
        # table -> (row dicts, their flows, k1s, k2s, [Arrow batches of rows made by column], [their
        # smallest and largest keys, a pair per batch], [rows in those batches]): final rows, and
        # (``_prov``) the provisional rows a carried flow makes at its finish
        self._bufs: dict[bool, dict[str, tuple[list, list, list, list, list, list, list]]] = {False: {}, True: {}}
        self._prov = False
        # what the flows' states share with the runner (left out of a carried state, by name)
        self._shared = {"keylog": self._keylog, "clock": self._clock}
        # a run that keeps a checkpoint: message digests keep the bytes they took, so a flow with a
        # message in progress at the end can be saved (HeldDigest); otherwise hashlib's alone
        keep_digested_bytes(bool(params.checkpoint and params.messages))

    def run(self, rows: Iterable[tuple]) -> Iterator[tuple]:
        """``rows``: ``(flow, packet, ts, linktype, data, orig_len)`` sorted by flow then
        packet.  Yields ``(table, flow, k1, k2, n, hk1, hflow, hk2, blob)``: ``blob`` an Arrow
        IPC chunk of ``n`` rows of ``table`` (columns of :func:`arrow_schema`: the rows with
        their output-order keys ``_flow``, ``_k1``, ``_k2``), ``(k1, flow, k2)`` its smallest
        key, ``(hk1, hflow, hk2)`` its largest, then ``provisional``: the chunk holds rows a
        carried flow made at its finish (a later run makes them again; see
        :mod:`.checkpoint`);
        table "_flow" carries one flow's facts, pickled (see :meth:`_flow_meta`), table
        "_state" the state of a flow carried to a later run (with ``params.checkpoint``).  A row
        with ``data`` None and packet 0 only names a flow to run (a carried flow without new
        records).  Rows are consumed one at a time: nothing of a flow is held but its protocol
        state."""
        cur = None
        state = None
        frames = self.p.frames
        fold_rows = self.FOLD_ROWS
        # (a flow's records go through pump_flow, compiled: the idle gap and the global sweeps
        # between a record and the flow's record before, the dissector, the analyzer, the stamps,
        # the frames, in that order; it hands back when rows are due or the flow changes)
        rows = iter(rows)
        row = next(rows, None)
        while row is not None:
            flow = row[0]
            if flow != cur:
                if state is not None:
                    yield from self._finish(cur, state)
                cur = flow
                state = self._start(flow)
            while True:
                stop = pump_flow(state, cur, row, rows, self)
                row = stop.row
                if len(state["folded"]) >= fold_rows:
                    yield from self._folded_deliveries(cur, state)
                if frames and state["frames"]:
                    yield from self._frame_rows(cur, state)
                if stop.why != FLOW_PAUSE:
                    break
        if state is not None:
            yield from self._finish(cur, state)
        for prov in (False, True):
            for table in list(self._bufs[prov]):
                yield from self._flush(table, prov)

    def _add(self, table: str, flow: str, row: dict, k1: int, k2: int) -> Iterator[tuple]:
        buf = self._bufs[self._prov]
        b = buf.get(table)
        if b is None:
            b = buf[table] = ([], [], [], [], [], [], [0])
        b[0].append(row)
        b[1].append(flow)
        b[2].append(k1)
        b[3].append(k2)
        if len(b[0]) + b[6][0] >= self.CHUNK_ROWS:
            yield from self._flush(table, self._prov)

    def _add_batch(self, table: str, flow: str, batch, k1: list, k2: list) -> Iterator[tuple]:
        """Rows already made by column (``batch``: the table's registry columns, Spark types), with
        their order keys."""
        import pyarrow as pa

        buf = self._bufs[self._prov]
        b = buf.get(table)
        if b is None:
            b = buf[table] = ([], [], [], [], [], [], [0])
        n = batch.num_rows
        if not n:
            return
        k1, k2 = pa.array(k1, pa.int64()), pa.array(k2, pa.int64())
        b[4].append(pa.RecordBatch.from_arrays(batch.columns + [pa.array([flow] * n, pa.string()), k1, k2],
                                               schema=_chunk_schema(table)))
        # (the batch's smallest and largest keys, its one flow put in between: no key tuple kept per row)
        b[5].append(_key_span(k1.to_numpy(), k2.to_numpy(), flow))
        b[6][0] += n
        if len(b[0]) + b[6][0] >= self.CHUNK_ROWS:
            yield from self._flush(table, self._prov)

    def _flush(self, table: str, prov: bool = False) -> Iterator[tuple]:
        b = self._bufs[prov].pop(table, None)
        if b and (b[0] or b[4]):
            # the chunk's smallest and largest output-order keys and its size: the job places
            # the range boundaries of the sorted tables from these (see range_bounds) and sends
            # the chunk to the ranges it overlaps
            # (the made-by-column batches give their smallest and largest keys: b[5])
            keys = list(zip(b[2], b[1], b[3]))
            k1, flow, k2 = min(keys + [lo for lo, _ in b[5]])
            hk1, hflow, hk2 = max(keys + [hi for _, hi in b[5]])
            batches = ([rows_batch(table, *b[:4])] if b[0] else []) + b[4]
            yield (table, flow, k1, k2, len(keys) + b[6][0], hk1, hflow, hk2, batch_ipc(batches), prov)

    def _folded_deliveries(self, flow: str, st: dict) -> Iterator[tuple]:
        """The deliveries folded so far (final), made into rows by column (as the CLI's
        ``deliveries --format parquet`` makes them: no row dict), each with its single-process
        order key."""
        ds = st["folded"]
        if not ds:
            return
        ds = list(ds)
        st["folded"].clear()
        from amqp_dissect.results.tables import columns_batch

        batch = columns_batch("deliveries", *st["an"].delivery_columns(ds), spark=True, checked=True)
        k1 = []
        k2 = []
        last = None
        for d in ds:
            link = d.link
            if link is not last:  # (a run of one link's deliveries: its keys looked up once)
                last = link
                conn_key = link.conn.first_packet or 0
                link_key = link.index << 40
            k1.append(conn_key)
            k2.append(link_key | d.seq)
        st["rows"]["deliveries"] += len(ds)
        # (one chunk of the FOLD_ROWS deliveries at most: a chunk's cost, to make and to route, is per chunk)
        yield from self._add_batch("deliveries", flow, batch, k1, k2)

    def _frame_rows(self, flow: str, st: dict) -> Iterator[tuple]:
        n = st["nframes"]
        st["rows"]["frames"] += len(st["frames"])
        for fj in st["frames"]:
            yield from self._add("frames", flow, frame_row(fj), fj["packet"] if fj["packet"] is not None else (1 << 62),
                                 n)
            n += 1
        st["nframes"] = n
        st["frames"] = []

    # -- one flow ---------------------------------------------------------------------

    def _start(self, flow: str) -> dict:
        """A flow's state: a fresh one, or the one an earlier run left (``params.carried``)."""
        carried = self.p.carried
        if carried and flow in carried:
            try:
                st = load_state(carried[flow], self._shared)
            except Exception as e:  # (Checkpoint.load read them all: a state that still fails says why)
                raise CannotContinue(f"the carried state of {flow} could not be read ({type(e).__name__}: {e})") \
                    from None
            st["rows"] = dict.fromkeys(ROW_TABLES, 0)  # (this run's)
            st["packets"] = 0
            return st
        folded: list = []
        d = Dissector(extra_ports=self.p.ports, idle_timeout=self.p.idle_timeout, messages=self.p.frames,
                      keylog=self._keylog, payloads=self.p.messages)
        d.clock = None  # (the capture's steps are known: FlowParams.clock_steps)
        # deliveries stream out as they become final: a flow holds only open ones
        an = Analyzer(rows=False, fold_out=folded, messages=self.p.messages, redeliveries=False)
        an.clock = self._clock
        return {
            "d": d,
            "an": an,
            "folded": folded,
            "last_ev": None,  # (packet, ts) of the last record that produced events
            "prev": None,  # (packet, ts) of the previous record of the flow
            "gap": False,  # an idle gap longer than idle_timeout: the global sweep may matter
            "frames": [],  # frames-table rows not yet yielded
            "nframes": 0,
            "packets": 0,
            "rows": dict.fromkeys(ROW_TABLES, 0),  # rows yielded per table
            "stamps": {t: [0, {}] for t, _ in _STAMPED},  # (list length seen, id -> (k1, object))
        }

    def _events(self, st: dict, events: list, packet, ts) -> None:
        if not events:
            return
        if packet is not None:
            st["last_ev"] = (packet, ts)
        an = st["an"]
        for ev in events:
            an.feed(ev)
        self._stamp(st, FINISH_K1 if packet is None else packet)
        if self.p.frames:
            fr = st["frames"]
            for ev in events:
                d = event_json(ev)
                if d is not None:
                    fr.append(d)

    @staticmethod
    def _stamp(st: dict, k1: int) -> None:
        """Give the rows new in the Analyzer's violations, frame_errors and transactions lists the
        order key ``k1`` (by identity: a held violation is appended when it is released; a
        transaction may be removed)."""
        an = st["an"]
        stamps = st["stamps"]
        for table, attr in _STAMPED:
            lst = getattr(an, attr)
            seen = stamps[table]
            n = len(lst)
            if n == seen[0] and (not n or id(lst[-1]) in seen[1]):
                continue
            keys = seen[1]
            for x in (lst if n < seen[0] or table == "transactions" else lst[max(0, seen[0] - 1):]):
                if id(x) not in keys:
                    keys[id(x)] = (k1, x)  # (the object kept: its id stays its own)
            seen[0] = n

    def _sweeps(self, st: dict, after: int, before: int | None) -> None:
        """The global idle sweeps that ran at other flows' records between two of ours."""
        pk = self._tick_pk
        if not pk:
            return
        ticks = self.p.ticks
        d = st["d"]
        i = bisect_right(pk, after)
        j = len(pk) if before is None else bisect_left(pk, before)
        for t in range(i, j):
            tp, tts = ticks[t]
            evs = d.sweep_idle(tts, tp)
            if evs:
                self._events(st, evs, tp, tts)
            if not d.tcp.has_open_connections:
                break

    def _finish(self, flow: str, st: dict) -> Iterator[tuple]:
        st["carried"] = self.p.checkpoint and _carried(st)
        if not st["carried"]:
            yield from self._end(flow, st)
            return
        # a flow whose rows could still change with later records: what it made so far is final,
        # its state kept, the rows of its finish provisional
        yield from self._folded_deliveries(flow, st)
        yield from self._frame_rows(flow, st)
        try:
            state = dump_state(st, self._shared)
        except StateNotSaved as e:  # (the next run cannot go on from this run: it says why)
            state = b""
            st["unsaved"] = e.reason
        yield ("_state", flow, 0, 0, 1, 0, flow, 0, state, False)
        before = dict(st["rows"])
        self._prov = True
        try:
            yield from self._end(flow, st, before)
        finally:
            self._prov = False

    def _end(self, flow: str, st: dict, before: dict | None = None) -> Iterator[tuple]:
        """The flow finished at the capture's end (``before``: its rows per table before the
        provisional ones), its facts row last."""
        p = self.p
        d, an = st["d"], st["an"]
        prev = st["prev"]
        if prev is not None and p.last_ts is not None and p.last_ts - prev[1] > self._idle_ns:
            st["gap"] = True
            self._sweeps(st, prev[0], None)
        # the end of the capture as the single-process run sees it
        self._events(st, d.finish(p.last_ts, p.last_tcp_packet), None, None)
        an.finish(p.end_ts)
        firsts = {cid: c.first_packet for cid, c in an.connections.items()}
        yield from self._folded_deliveries(flow, st)
        counts = st["rows"]
        for key, row in an.live_deliveries():
            k1 = firsts.get(row["connection"])
            counts["deliveries"] += 1
            yield from self._add("deliveries", flow, row, k1 if k1 is not None else 0, _delivery_k2(key))
        for table, method in _TABLE_METHODS:
            for i, row in enumerate(getattr(an, method)()):
                k1 = firsts.get(row["connection"])
                counts[table] += 1
                yield from self._add(table, flow, row, k1 if k1 is not None else 0, i)
        for i, row in enumerate(an.stall_rows()):
            k1 = row["start_packet"]
            counts["stalls"] += 1
            yield from self._add("stalls", flow, row, k1 if k1 is not None else 0, i)
        stamps = st["stamps"]
        for table, attr in _STAMPED:
            keys = stamps[table][1]
            objs = getattr(an, attr)
            rows = getattr(an, {"errors": "error_rows", "violations": "violation_rows",
                                "transactions": "transaction_rows"}[table])()
            for i, row in enumerate(rows):
                if i < len(objs):
                    k1 = keys.get(id(objs[i]), (FINISH_K1,))[0]
                else:  # (errors: the rows derived per connection, after every frame error)
                    k1 = DERIVED_K1 + (firsts.get(row["connection"]) or 0)
                counts[table] += 1
                yield from self._add(table, flow, row, k1, i)
        yield from self._frame_rows(flow, st)
        meta = self._flow_meta(st)
        if before is not None:
            meta["provisional"] = {t: n - before[t] for t, n in st["rows"].items()}
        if st.get("unsaved"):
            meta["unsaved"] = st["unsaved"]
        yield ("_flow", flow, 0, 0, 1, 0, flow, 0, pickle.dumps(meta, 5), False)

    def _flow_meta(self, st: dict) -> dict:
        """Facts the driver needs after the run: the last record that produced events
        (the single-process run finishes its Analyzer at that record's time), whether
        the result depends on the global idle sweep, and on the analyzer's end time
        (open stalls; idle-time-out checks at the end: (reference, timeout) pairs), and
        the rows it gave each table (the job's row counts)."""
        an = st["an"]
        idle = []
        for c in an.connections.values():
            if c.transport_time is not None:
                continue
            for e in (0, 1):
                t, ref = c.idle[e], c.idle_ref[e]
                if t and ref is not None and c.close[e] is None:
                    idle.append((ref, t))
        return {
            "last_packet": st["last_ev"][0] if st["last_ev"] else None,
            "last_ts": st["last_ev"][1] if st["last_ev"] else None,
            "needs_ticks": st["gap"],
            "open_stalls": sum(1 for s in an.stalls if s.end is None),
            "idle": idle,
            "packets": st["packets"],
            "connections": len(an.connections),
            "rows": dict(st["rows"]),
            "carried": bool(st.get("carried")),
            "prev_packet": st["prev"][0] if st["prev"] else None,
        }


def end_sensitive(meta: dict, a: float | None, b: float | None) -> bool:
    """Would the flow's rows differ between Analyzer.finish(a) and finish(b)?"""
    if a == b:
        return False
    if meta["open_stalls"]:
        return True
    if a is None or b is None:
        return bool(meta["idle"])
    return any((a - ref > t) != (b - ref > t) for ref, t in meta["idle"])
