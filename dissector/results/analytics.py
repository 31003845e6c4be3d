"""Tables and statistics on top of the protocol state of :mod:`amqp_dissect.model.state`.

    a = Analyzer()
    for ev in events:                 # everything a Dissector yields (feed() and finish())
        a.feed(ev)
    a.finish()                        # end of capture (optionally end_ts=...)
    a.delivery_rows()                 # list of plain dicts, one per delivery
    a.latency_summary(by="link")      # percentiles per link

Every row is a plain dict of JSON-able values (str, int, float, bool, None, list,
dict): picklable, ready for ``pandas.DataFrame(rows)`` or ``json.dumps``.  Times
are capture timestamps (integer nanoseconds since the epoch), durations/latencies float seconds,
packets 1-based capture record indices, ``side`` is "client" (TCP initiator) or
"server", endpoints are "ip:port".  Rows can be read before :meth:`finish`
(then "open" means "so far").

Definitions
-----------
* ``settled_time``: time of the first frame in which either peer announced
  settlement of the delivery (a transfer with settled=true, a disposition with
  settled=true covering it).  Once one peer has settled, the other forgets the
  delivery without a frame (spec 2.6.12), so that frame ends the delivery.
  ``settlement_latency = settled_time - first_time`` (first_time: the first
  transfer frame).  Pre-settled deliveries get the time of the settling
  transfer frame (0 for a single-frame message).
* ``outcome_time``: time of the receiver's first disposition carrying a terminal
  outcome (accepted, rejected, released, modified, declared; also inside a
  transactional-state); ``outcome_latency = outcome_time - first_time``.
* Percentiles (p50/p90/p99): linear interpolation between closest ranks, the
  method numpy.percentile uses by default (Hyndman & Fan type 7): sorted values
  x[0..n-1], h = (n-1)*q/100, result x[floor(h)] + (h-floor(h)) *
  (x[floor(h)+1] - x[floor(h)]) (computed the same way numpy does, so results
  agree to the bit).  ``None`` for an empty group.
* Stalls: see :mod:`amqp_dissect.model.state` (kinds initial-credit, link-credit, drain,
  session-window; when a stall begins, waiting, idle periods).  ``duration`` of an open stall
  runs to the end of the capture (``finish(end_ts)``, default the last event's time).  Idle
  periods are rows of the stalls table (``idle`` true) but are not counted in the ``stalls`` /
  ``stalled_seconds`` of connections, links and the summary.

Columns
-------
connection_rows():
    connection (id), client, server ("ip:port"), syn_seen (the TCP handshake was
    captured), mid_connection (the capture did not see the connection start),
    lossy (a TCP gap / resync lost bytes), tls, protocol_headers_client /
    protocol_headers_server (names of the protocol headers each side sent, e.g.
    ["SASL 1.0.0", "AMQP 1.0.0"]), negotiation (text when the two sides' headers
    differed, else None), sasl (SASL layer used), sasl_mechanisms (offered by
    the server), sasl_mechanism (chosen in sasl-init), sasl_hostname,
    sasl_outcome (code name: "ok", "auth", "sys", "sys-perm", "sys-temp"),
    sasl_outcome_code (int), sasl_frames_client / sasl_frames_server (SASL
    frames each side sent), container_id_client / container_id_server,
    hostname (in the client's open), max_frame_size_client / _server,
    max_frame_size_client_default / _server_default (True: field absent, spec
    default 4294967295 applied), channel_max_client / _server (+ _default),
    idle_time_out_client / _server (milliseconds, None when absent),
    open_time (first open), open_time_client / open_time_server, close_time
    (first close), close_time_client / close_time_server, closed_by (side of the
    first close, "" if none), close_error / close_description (condition and
    description of the first close carrying an error), errors (list of
    {condition, description, scope, side, channel, link} of every
    close/end/detach error on this connection), sessions, links, deliveries
    (counts), frames_client / frames_server (AMQP frames, heartbeats included),
    frame_counts_client / frame_counts_server ({performative: frames} of every
    frame each side sent, SASL included; "empty" for heartbeats),
    heartbeats_client / heartbeats_server, state ({"client": s, "server": s}),
    state_client / state_server (final connection endpoint states, spec names or
    UNKNOWN), transport_end ("fin" both FINs, "rst", "idle", or None),
    transport_end_time, first_time, last_time, first_packet, last_packet,
    violations, stalls (counts; idle periods not counted), unknown (what the
    capture could not show).
session_rows():
    connection, session (0-based index in the connection, in order of first
    sight), channel (the client's outgoing channel, or the server's if the
    client's is unknown), channel_client / channel_server (each peer's outgoing
    channel: the local <-> remote mapping), initiator (side whose begin had no
    remote-channel), begin_time / begin_packet (first begin),
    begin_time_client / begin_time_server, next_outgoing_id_client / _server,
    incoming_window_client / _server, outgoing_window_client / _server (from
    each begin), handle_max_client / _server (default applied) and
    handle_max_client_default / _server_default, next_outgoing_id_final_client /
    _server (tracked to the end), incoming_window_last_client / _server and
    outgoing_window_last_client / _server (last begin/flow), remote_incoming_window_client /
    _server (final remote-incoming-window of each sending side, None unknown),
    transfers_client / _server (transfer frames), flows_client / _server,
    end_time (first end), end_time_client / end_time_server, ended_by, end_error
    / end_description (first end with an error), terminated ("end", "close",
    "transport" or None), state_client / state_server, links, deliveries,
    unsettled (deliveries never settled), unseen_dispositions (delivery-ids in
    dispositions whose transfer was before the capture), unknown.
link_rows():
    connection, session, channel, link_index (0-based per connection), name,
    handle (the sending side's handle, i.e. the one on transfers),
    handle_client / handle_server, role (role of the *client's* endpoint:
    "sender" when the client sends the transfers, "receiver" when it receives
    them; None unknown), sender_side ("client"/"server"), sender / receiver
    ("ip:port" of the peers sending / receiving the transfers), address (the
    target address when the client sends, the source address when the client
    receives, i.e. the node at the server; falls back to the other terminus),
    source / target (addresses: source as described by the sender, target as by
    the receiver, spec 2.6.3; the other attach when that one is missing),
    source_terminus / target_terminus (dicts: type, address, durable,
    expiry_policy, timeout, dynamic, filter, capabilities, ...; None if null),
    coordinator (target is a coordinator), refused (the answering attach had a
    null terminus: the link was refused), snd_settle_mode (sender's attach,
    choice name, default "mixed" applied) and snd_settle_mode_default,
    rcv_settle_mode (receiver's attach, default "first") and
    rcv_settle_mode_default, initial_delivery_count, delivery_count (final),
    link_credit (final sender credit), available, drain, echo (last flow
    values), max_message_size, attach_time (first attach), attached_time (both
    attached), detach_time (first detach), detached_by, detach_closed, detach_error
    / detach_description, terminated ("detach", "end", "close", "transport",
    None), state_client / state_server, transfers (frames), deliveries,
    messages_bytes, accepted, rejected, released, modified, declared, no_outcome,
    unsettled, presettled, aborted, resumed, latency_p50 / latency_p90 /
    latency_p99 / latency_max (settlement latency), outcome_latency_p50 /
    _p90 / _p99 / _max, stalls, stalled_seconds (sum of stall durations, open
    ones to the capture end; idle periods not counted), unknown (e.g. ["attach", "name", "address"]).
delivery_rows():
    connection, session, channel, link, link_index, handle, delivery_id,
    delivery_tag (hex), sender / receiver ("ip:port"), sender_side, address,
    first_time, last_time, first_packet, last_packet (first / last transfer
    frame), frames, message_size (payload bytes of all transfer frames),
    complete (last frame seen with more=false, not aborted), presettled (settled
    by a transfer frame), aborted, resumed, settled_by ("sender", "receiver",
    "both", ""), settled_time, settled_packet, sender_settled_time,
    receiver_settled_time, outcome ("accepted", "rejected", "released",
    "modified", "declared" or ""), outcome_by ("receiver"/"sender"/""),
    outcome_time, outcome_packet, outcome_error / outcome_description (rejected),
    delivery_failed, undeliverable_here (modified; defaults applied), received_state
    ("section N offset M" or None), txn_id (hex or None), rcv_settle_mode
    (per-transfer override), dispositions_sender / dispositions_receiver,
    settlement_latency, outcome_latency (seconds or None), unsettled_at (None when
    settled, else "detach", "end", "close", "transport", "capture-end").
stall_rows():
    connection, session, channel (client channel of the session), link (name),
    link_index, handle (the sender's), kind ("initial-credit", "link-credit",
    "drain", "session-window"), sender_side, sender, start, end, duration,
    start_packet, end_packet, ended_by ("flow", "transfer", "attach", "cancelled",
    "detach", "end", "close", "transport"; None open), waiting (True / False /
    None), waiting_evidence ("available", "transfer", "none"), idle,
    credit_exhausted_at, credit_exhausted_packet (the frame that used up the
    credit or window), open.
transaction_rows():
    connection, session, channel, coordinator (link name), txn_id (hex),
    global_id, declare_delivery_id, declare_time, declare_packet,
    declare_outcome, declared_time, declared_packet, declare_error,
    discharge_delivery_id, discharge_time, discharge_packet, fail (True:
    rollback requested), discharge_outcome, discharge_error, discharged_time,
    state ("declaring", "declared", "declare-failed", "discharging", "committed",
    "rolled-back", "discharge-failed", "unknown" for a txn-id only seen in
    transactional-states), deliveries (count enlisted), enlisted (list of
    {link, delivery_id, how: "transfer"/"disposition"}).
violation_rows():
    connection, packet, time, channel, kind, severity, message, side (peer that
    sent the offending frame), link, handle, delivery_id, origin ("state": this
    layer; "framing": an expert note of the framing layer taken over;
    "analyzer": an internal error).  Kinds: state (a frame the state table does
    not allow), credit (transfer beyond link-credit), session-window (transfer
    beyond the peer's incoming-window), unknown-channel, unknown-handle,
    unknown-delivery, unknown-transaction, channel-in-use, handle-in-use,
    channel-max, handle-max, role, idle-timeout (a side sent no frame for longer
    than the idle-time-out the other side announced), frame-size (over the
    peer's max-frame-size), protocol, malformed, protocol-header.
error_rows():
    connection, session, channel, link, handle, delivery_id, scope
    ("connection", "session", "link", "delivery"), condition, description, info,
    packet, time, side, source ("frame": the error field of a close / end /
    detach; "analysis": derived here), count.  Derived conditions:
    "unsettled-at-detach" (link scope: deliveries of a detached link never
    settled), "unsettled-at-end" (session), "unsettled-at-close" /
    "unsettled-at-transport-end" (connection), "unsettled-at-capture-end"
    (delivery scope, one row per delivery whose link was still up).
latency_summary(by, metric):
    the group columns (link: connection, session, channel, link, link_index,
    address; address: address; connection: connection, client, server), then
    count, p50, p90, p99, max, min, mean (seconds).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right
from itertools import chain

try:
    import cython
except ImportError:
    from .. import _cython_shim as cython

from ..times import NS
from ..amqp.framing import StreamNote
from ..events import PacketNote
from ..amqp.message import MESSAGE_COLUMNS, MessageReader, delivery_cells
from ..model.deliveries import STORE_COLUMNS, compact_rows, link_deliveries, store_columns, store_delivery, store_values
from ..model.tracker import StateTracker
from ..model.stats import FIRST_NS, SETTLED_NS, DeliveryStats, Latencies, add_link_stats
from ..model.transitions import SIDES
from . import rows as _rows
from .diagnoses import FoldWatch
from .percentiles import percentile, summarize  # (the one percentile: re-exported, others import it from here)
from .rows import connection_lost_after, packet_of, time_of, unknown_by_cut

__all__ = ["Analyzer", "percentile", "summarize"]


def _first(t):
    return t[0]


def _by_seq(d):
    return d.seq


def _merged_runs(streams):
    """Streams ``(items, seqs)`` (each in first-transfer order; ``items`` a list of delivery objects
    or a store run ``(link, peer, store, rows)``) merged by seq, as runs: the segments of one stream
    that no other stream's seq falls in, in order (as ``heapq.merge`` orders them: equal seqs by
    stream)."""
    streams = [s for s in streams if s[1]]
    pos = [0] * len(streams)
    while True:
        j = -1
        head = None
        for k in range(len(streams)):
            p = pos[k]
            if p < len(streams[k][1]):
                h = streams[k][1][p]
                if j < 0 or h < head:
                    j, head = k, h
        if j < 0:
            return
        items, seqs = streams[j]
        start = pos[j]
        end = len(seqs)
        for k in range(len(streams)):
            p = pos[k]
            if k != j and p < len(streams[k][1]):
                h = streams[k][1][p]
                end = min(end, bisect_left(seqs, h, start) if k < j else bisect_right(seqs, h, start))
        pos[j] = end
        if type(items) is list:
            yield items[start:end]
        else:
            yield (items[0], items[1], items[2], items[3][start:end])


def _sub(a, b):
    """The duration from time ``b`` to time ``a`` (nanoseconds) in float seconds, or None."""
    return None if a is None or b is None else (a - b) / NS


# deliveries-table columns that depend only on the link and the sending side (Analyzer._delivery_context)
_DELIVERY_CTX = ("connection", "session", "channel", "link", "link_index", "handle", "sender", "receiver",
                 "sender_side", "address")
_DELIVERY_OWN = (
    "delivery_id", "delivery_tag", "first_time", "last_time", "first_packet", "last_packet", "frames",
    "message_size", "complete", "presettled", "aborted", "resumed", "settled_by", "settled_time", "settled_packet",
    "sender_settled_time", "receiver_settled_time", "outcome", "outcome_by", "outcome_time", "outcome_packet",
    "outcome_error", "outcome_description", "delivery_failed", "undeliverable_here", "received_state", "txn_id",
    "rcv_settle_mode", "dispositions_sender", "dispositions_receiver", "settlement_latency", "outcome_latency",
    "unsettled_at") + MESSAGE_COLUMNS

NOTABLE = 10  # slowest settlements kept for the report
NOT_ACCEPTED = 50  # first deliveries (in table order) that expected an outcome and got no accepted one, for the report
_SLOW_BATCH = 1024  # candidates for the slowest settlements ranked at a time


def _table_order(d) -> tuple:
    """Table order of a delivery object: connection, link, then first transfer (:meth:`Analyzer._order`;
    typed when compiled)."""
    link = d.link
    conn = link.conn
    return (conn.seq, link.index, d.seq)


def _before(d, o) -> bool:
    """``_table_order(d) < o`` without making the tuple (``o``: a table order, or ``()`` before
    any): the notable-deliveries step asks it of most deliveries where latencies tie."""
    if not o:
        return False
    link = d.link
    conn = link.conn
    a = conn.seq
    b = o[0]
    if a != b:
        return a < b
    a = link.index
    b = o[1]
    if a != b:
        return a < b
    return d.seq < o[2]


def _no_delivery_columns() -> tuple:
    """:meth:`Analyzer.delivery_columns` of no delivery."""
    return {name: [] for name in _DELIVERY_OWN}, [], {name: [] for name in _DELIVERY_CTX}


def _by_column(names, rows: list) -> dict:
    """Rows (tuples in the order of ``names``) as columns: name -> its cells."""
    return dict(zip(names, [list(c) for c in zip(*rows)]))


def _slowest_ranked(cands: list, order) -> list:
    """The NOTABLE slowest of ``cands`` ((latency, delivery) pairs), slowest first; equal latencies
    in table order.  Only candidates at or above the NOTABLE-th latency get an order key."""
    if len(cands) > NOTABLE:
        cut = heapq.nlargest(NOTABLE, [x[0] for x in cands])[-1]
        cands = [x for x in cands if x[0] >= cut]
    ranked = sorted(cands, key=lambda x: (-x[0], order(x[1])))
    return ranked[:NOTABLE]


#: ``unsettled_at`` of a delivery whose settlement may have been in bytes the capture lost: its
#: outcome is unknown, not missing (no error row counts it)
LOST_IN_CAPTURE = "lost-in-capture"
#: ``unsettled_at`` of a delivery on a connection of which one direction only was captured: its
#: outcome is unknown (the peer that would settle it is not in the capture), not missing
ONE_DIRECTION_CAPTURED = "one-direction-captured"
#: ``unsettled_at`` of a delivery whose outcome is unknown because the capture's snap length cut off
#: bytes after its first transfer that may have held frames (no gap after it): not loss
NOT_CAPTURED = "not-captured"


def unknown_at(c, ts=None) -> str:
    """``unsettled_at`` of a delivery of ``c`` (first transfer at ``ts``) whose outcome is unknown: why
    (one direction captured; bytes lost in a gap after ``ts``; else a cut of the snap length)."""
    if c.one_way >= 0:
        return ONE_DIRECTION_CAPTURED
    return NOT_CAPTURED if unknown_by_cut(c, ts) else LOST_IN_CAPTURE




def delivery_row(an, c, link, addr, d) -> dict:
    """The deliveries-table row (a dict) of delivery ``d`` of ``link`` (sender's address ``addr``) of
    connection ``c``, as Analyzer ``an`` gives it."""
    s = link.session
    sb = [d.snd_settled is not None, d.rcv_settled is not None]
    settled_by = "both" if all(sb) else "sender" if sb[0] else "receiver" if sb[1] else ""
    err = d.outcome_error or {}
    return {
        "connection": c.id,
        "session": s.index,
        "channel": an._session_channel(s),
        "link": link.name,
        "link_index": link.index,
        "handle": link.handle[d.direction],
        "delivery_id": d.delivery_id,
        "delivery_tag": d.tag.hex() if d.tag is not None else None,
        "sender": c.peer(d.direction),
        "receiver": c.peer(1 - d.direction),
        "sender_side": SIDES[d.direction],
        "address": addr,
        "first_time": d.first_ts,
        "last_time": d.last_ts,
        "first_packet": d.first_packet,
        "last_packet": d.last_packet,
        "frames": d.frames,
        "message_size": d.size,
        "complete": d.complete,
        "presettled": d.presettled,
        "aborted": d.aborted,
        "resumed": d.resumed,
        "settled_by": settled_by,
        "settled_time": time_of(d.settled),
        "settled_packet": packet_of(d.settled),
        "sender_settled_time": time_of(d.snd_settled),
        "receiver_settled_time": time_of(d.rcv_settled),
        "outcome": d.outcome or "",
        "outcome_by": d.outcome_by or "",
        "outcome_time": d.outcome_ts,
        "outcome_packet": d.outcome_packet,
        "outcome_error": err.get("condition"),
        "outcome_description": err.get("description"),
        "delivery_failed": d.delivery_failed,
        "undeliverable_here": d.undeliverable_here,
        "received_state": d.received_state,
        "txn_id": d.txn_id,
        "rcv_settle_mode": d.rcv_settle_mode,
        "dispositions_sender": d.dispositions[d.direction],
        "dispositions_receiver": d.dispositions[1 - d.direction],
        "settlement_latency": an._span(time_of(d.settled), packet_of(d.settled), d.first_ts, d.first_packet),
        "outcome_latency": an._span(d.outcome_ts, d.outcome_packet, d.first_ts, d.first_packet),
        "unsettled_at": an._unsettled_at(d),
        **dict(zip(MESSAGE_COLUMNS, delivery_cells(d))),
    }


class Analyzer(StateTracker):
    """Feed Dissector events, then read tables (see the module docstring for every column).

    Settled deliveries are folded into per-link :class:`DeliveryStats` as they complete (see
    :meth:`StateTracker._fold`).  ``rows=True`` (the default) also keeps each folded delivery's
    table row, for :meth:`delivery_rows`; ``delivery_sink(row, key)`` receives each folded row as
    it is made, with its table-order key (connection, link, first transfer), for streaming writers; with ``rows=False`` and no sink, memory per settled
    delivery is two floats (its latencies) and the report is built from aggregates.

    ``fold_out``: a list the Analyzer appends each folded delivery object to, in fold order, for a
    columnar writer (:meth:`delivery_columns`; no row dict is made).  The owner empties it as it
    converts them; a folded delivery is final (the state layer never touches it again).
    """

    def __init__(self, rows: bool = True, delivery_sink=None, fold_out: list | None = None,
                 messages: bool = False, redeliveries: bool | None = None):
        StateTracker.__init__(self)
        # messages=True: the message of every delivery is read (the deliveries table's message
        # columns; the frames need their payloads: Dissector(payloads=True))
        self.messages = messages
        if messages:
            self.transfer_rules.messages = MessageReader()
        self.keep_rows = rows
        self.delivery_sink = delivery_sink
        self.fold_out = fold_out
        self._rows: list = []  # (order key, row) of folded deliveries
        self._slowest: list = []  # (latency, delivery): candidates for the NOTABLE slowest settlements
        self._slow_min = float("-inf")  # latency of the NOTABLE-th slowest ranked so far ...
        self._slow_cut_order = ()  # ... and its table order (equal latencies rank in table order)
        self._slow_min_c = False  # _slow_min is an integer within 62 bits, also held in _slow_min_ns
        self._slow_min_ns = 0
        self._slow_cut_link, self._slow_cut_seq = None, 0  # the cut's link and place: a tie on it (_below_cut)
        self._not_accepted: list = []  # max-heap (negated order key, delivery): the first NOT_ACCEPTED in order
        self.not_accepted_count = 0
        self._stats_cache: dict = {}  # link -> DeliveryStats with the live deliveries added (valid until fed)
        self.layer_facts: dict = {}  # connection id -> what its TLS / WebSocket layers said (rows.layer_fact)
        # what the report's diagnoses keep of folded deliveries (results.diagnoses); the redelivery
        # loops (messages read) unless the owner makes a table only (redeliveries=False)
        self.watch = FoldWatch(messages if redeliveries is None else redeliveries)
        # the capture's clock steps (a ClockWatch, set by whoever feeds the Analyzer; None: none known):
        # a duration across a step is unknown (see amqp_dissect.clock)
        self.clock = None

    def feed(self, event) -> None:
        if self._stats_cache:
            self._stats_cache = {}
        cls = type(event)
        if cls is PacketNote or cls is StreamNote:  # (a few per connection: the layers' notes)
            if event.conn is not None and event.note.group in _rows.LAYER_GROUPS:
                _rows.layer_fact(self.layer_facts, event.conn, event.note.message)
        StateTracker.feed(self, event)

    # -- folded deliveries ----------------------------------------------------------

    @staticmethod
    def _order(d) -> tuple:
        """Table order of a delivery: connection, link, then first transfer."""
        return (d.link.conn.seq, d.link.index, d.seq)

    def _on_fold(self, d) -> None:
        self._notable(d)
        self.watch.fold(d)
        if self.fold_out is not None:
            self.fold_out.append(d)
        if self.keep_rows or self.delivery_sink is not None:
            row = self._row(d)
            if self.keep_rows:
                self._rows.append((self._order(d), row))
            if self.delivery_sink is not None:
                self.delivery_sink(row, self._order(d))

    def _notable(self, dlv, heaps=None) -> None:
        d = dlv
        if heaps is None:  # (no tuple made per delivery)
            slowest = self._slowest
            not_acc = self._not_accepted
        else:
            slowest, not_acc = heaps
        if d.settled is not None:
            self._notable_slow(d, heaps, slowest)
        if d.outcome not in ("accepted", "declared") and not d.presettled:
            # (a presettled delivery expects no outcome: at-most-once)
            if heaps is None:
                self.not_accepted_count += 1
            o = _table_order(d)
            item = ((-o[0], -o[1], -o[2]), d)
            if len(not_acc) < NOT_ACCEPTED:
                heapq.heappush(not_acc, item)
            elif item[0] > not_acc[0][0]:
                heapq.heapreplace(not_acc, item)

    def _notable_slow(self, d, heaps, slowest) -> None:
        """Settled delivery ``d``: a candidate for the NOTABLE slowest when it beats the cut (kept
        unranked in ``slowest``, ranked a batch at a time)."""
        t1 = d.settled[0]
        t0 = d.first_ts
        # (compiled: the usual delivery, below the cut, is ruled out on C integers)
        below = (heaps is None and self._slow_min_c and type(t1) is int and type(t0) is int
                 and self._below_cut(d, t1, t0))
        if below:
            return
        lat = t1 - t0
        cut = self._slow_min
        if heaps is not None or lat > cut or (lat == cut and _before(d, self._slow_cut_order)):
            slowest.append((lat, d))
            if heaps is None and len(slowest) >= _SLOW_BATCH:
                self._rank_slowest()

    def _below_cut(self, d, t1, t0) -> bool:
        """Latency ``t1 - t0`` of ``d`` below the cut of the slowest, on C integers; False when it
        cannot say (beyond 62 bits).  The times are read through the folds' caches
        (:class:`~amqp_dissect.model.stats.NsCache`): the fold's statistics read the same two next."""
        at = SETTLED_NS
        first = FIRST_NS
        if at.read(t1) and first.read(t0):
            lat_c = at.ns - first.ns  # (no overflow: both within +-2**62)
            cut_c = self._slow_min_ns
            if lat_c != cut_c:  # (else a tie: on the cut's link, the usual one, its place decides)
                return lat_c < cut_c
            return d.seq >= self._slow_cut_seq if d.link is self._slow_cut_link else not _before(d, self._slow_cut_order)
        return False

    def _rank_slowest(self) -> None:
        """Rank the candidates for the slowest; what a later delivery must beat becomes the cut."""
        self._slowest = slowest = _slowest_ranked(self._slowest, self._order)
        if len(slowest) >= NOTABLE:  # what a later delivery must beat
            self._slow_min = cut = slowest[-1][0]
            last = slowest[-1][1]
            self._slow_cut_order, self._slow_cut_link, self._slow_cut_seq = self._order(last), last.link, last.seq
            self._slow_min_c = type(cut) is int and -(1 << 62) <= cut < (1 << 62)
            self._slow_min_ns = cut if self._slow_min_c else 0

    def _row(self, d) -> dict:
        """The deliveries-table row of ``d``."""
        link = d.link
        return delivery_row(self, link.conn, link, self._link_address(link), d)

    def _live(self):
        """Deliveries not folded yet (unsettled, or settled within the fold lag), in table order."""
        for c in self.connections.values():
            for link in c.links:
                yield from link_deliveries(link)

    def link_stats(self, link) -> DeliveryStats:
        """The link's deliveries, folded and live, added up (latencies left out, unknown, when the
        capture clock stepped during the link's connection: :meth:`spans_step`)."""
        stepped = self.clock is not None and self.clock.steps and self.conn_spans_step(link.conn)
        if not link.live and not link.compacted and not stepped:
            return link.stats
        st = self._stats_cache.get(link)
        if st is None:
            st = link.stats.copy()
            add_link_stats(st, link)
            if stepped:
                st.latency = Latencies()
                st.outcome_latency = Latencies()
            self._stats_cache[link] = st
        return st

    def spans_step(self, start_packet, end_packet) -> bool:
        """Whether the capture clock stepped between two packets (see amqp_dissect.clock)."""
        clock = self.clock
        return clock is not None and bool(clock.steps) and clock.spans(start_packet, end_packet)

    def time_key(self, rec):
        """The order key of a record (a dict with "time" and "packet": an open, a begin, an end...)
        in time: its time; after a step back of the capture clock, the clock's epoch first (the
        steps at or before its packet), so records on either side of a step keep the capture's order."""
        clock = self.clock
        if clock is None or not clock.steps:
            return rec["time"]
        return clock.epoch(rec.get("packet")), rec["time"]

    def conn_spans_step(self, c) -> bool:
        """Whether the capture clock stepped during connection ``c`` (its first to its last packet)."""
        return self.spans_step(getattr(c, "first_packet", None), getattr(c, "last_packet", None))

    def _span(self, a, pa, b, pb):
        """The duration from time ``b`` (packet ``pb``) to time ``a`` (packet ``pa``) in float
        seconds; None when either is absent, when the capture clock stepped between them, or when
        it would be negative (times out of order): never a made-up number."""
        if a is None or b is None:
            return None
        if self.clock is not None and self.clock.steps and self.clock.spans(pb, pa):
            return None
        if a < b:
            return None
        return (a - b) / NS

    def notable_deliveries(self) -> dict:
        """Rows of the slowest settlements and of the first deliveries not accepted (presettled ones are
        not: they expect no outcome), and the count of those."""
        slowest, not_acc = list(self._slowest), list(self._not_accepted)
        count = self.not_accepted_count
        heaps = (slowest, not_acc)
        for c in self.connections.values():
            for link in c.links:
                for d in link.live.values():  # (any order: the lists are ranked)
                    self._notable(d, heaps)
                    if d.outcome not in ("accepted", "declared") and not d.presettled:
                        count += 1
                # compacted deliveries (unsettled, no outcome), read from the columns: an object is
                # made for one that ranks among the first NOT_ACCEPTED only
                for sender, st, rows in compact_rows(link):
                    count += len(rows)
                    seqs = st.seq
                    for i in rows:  # (in first-transfer order: the first that does not rank ends it)
                        key = (-c.seq, -link.index, -seqs[i])
                        if len(not_acc) < NOT_ACCEPTED:
                            heapq.heappush(not_acc, (key, store_delivery(link, sender, st, i)))
                        elif key > not_acc[0][0]:
                            heapq.heapreplace(not_acc, (key, store_delivery(link, sender, st, i)))
                        else:
                            break

        row = self._row
        known = self._span
        return {
            # (a latency across a clock step or negative is unknown: not ranked)
            "slowest_settlement": [row(x[1]) for x in _slowest_ranked(slowest, self._order)
                                   if known(x[1].settled[0], x[1].settled[1], x[1].first_ts, x[1].first_packet)
                                   is not None],
            "not_accepted": [row(x[1]) for x in sorted(not_acc, key=lambda x: x[0], reverse=True)],
            "not_accepted_count": count,
        }

    def delivery_totals(self) -> dict:
        """Deliveries, by outcome ("none" for no outcome), unsettled, over the whole capture."""
        total = DeliveryStats()
        for c in self.connections.values():
            for link in c.links:
                st = self.link_stats(link)
                total.deliveries += st.deliveries
                total.no_outcome += st.no_outcome
                total.unsettled += st.unsettled
                for k, n in st.outcomes.items():
                    total.outcomes[k] += n
        outcomes = {k: n for k, n in total.outcomes.items() if n}
        if total.no_outcome:
            outcomes["none"] = total.no_outcome
        return {"deliveries": total.deliveries, "outcomes": outcomes, "unsettled": total.unsettled}

    # -- helpers ------------------------------------------------------------------

    def _end(self):
        return self.end_ts if self.end_ts is not None else self.last_ts

    @staticmethod
    def _session_channel(s):
        return s.channel[0] if s.channel[0] is not None else s.channel[1]

    @staticmethod
    def _link_address(link):
        src, tgt = Analyzer._termini(link)
        sd = link.sender_dir
        first = tgt if sd == 0 else src if sd == 1 else (tgt or src)
        second = src if first is tgt else tgt
        for t in (first, second):
            if t is not None and t.get("address") is not None:
                return t["address"]
        return None

    @staticmethod
    def _termini(link):
        """(source, target): source as the sender describes it, target as the receiver does."""
        sd = link.sender_dir
        a = link.attach
        order_src = (sd, 1 - sd) if sd is not None else (0, 1)
        order_tgt = (1 - sd, sd) if sd is not None else (0, 1)
        src = tgt = None
        for e in order_src:
            if a[e] is not None and a[e]["source"] is not None:
                src = a[e]["source"]
                break
        for e in order_tgt:
            if a[e] is not None and a[e]["target"] is not None:
                tgt = a[e]["target"]
                break
        return src, tgt

    def _unsettled_at(self, dlv):
        if dlv.settled is not None:
            return None
        link, s, c = dlv.link, dlv.session, dlv.link.conn
        if c.loss is not None and connection_lost_after(c, dlv.first_ts):
            return unknown_at(c, dlv.first_ts)
        return self._unsettled_place(link)

    def _unsettled_place(self, link):
        """Where an unsettled delivery of ``link`` was left: detach, end, close, transport, capture-end."""
        s, c = link.session, link.conn
        if link.terminated is not None:
            return link.terminated
        if s.terminated is not None:
            return s.terminated
        if c.close[0] is not None or c.close[1] is not None:
            return "close"
        return "capture-end"

    def _stall_duration(self, st):
        if st.end is not None:
            return self._span(st.end, st.end_packet, st.start, st.start_packet)
        # (open: to the end of the capture, across any step after its start)
        return self._span(self._end(), float("inf"), st.start, st.start_packet)

    # -- connections (the table rows other than the deliveries' are built in rows.py) ------------

    def connection_rows(self) -> list[dict]:
        """The connections table (:func:`amqp_dissect.results.rows.connection_rows`)."""
        return _rows.connection_rows(self)

    def other_rows(self, limit: int | None = None) -> list[dict]:
        """The connections of another protocol than AMQP 1.0 (:func:`~amqp_dissect.results.rows.other_rows`)."""
        return _rows.other_rows(self, limit)

    def iter_connection_rows(self):
        """:meth:`connection_rows` one at a time."""
        return _rows.iter_connection_rows(self)

    def connection_row(self, c) -> dict:
        """The connections-table row of one connection (a ``self.connections`` value)."""
        return _rows.connection_row(self, c)

    # -- sessions, links (rows.py) ------------------------------------------------------------

    def session_rows(self) -> list[dict]:
        """The sessions table."""
        return _rows.session_rows(self)

    def connection_session_rows(self, c) -> list[dict]:
        """The sessions-table rows of one connection."""
        return _rows.connection_session_rows(self, c)

    def link_rows(self) -> list[dict]:
        """The links table."""
        return _rows.link_rows(self)

    def connection_link_rows(self, c) -> list[dict]:
        """The links-table rows of one connection."""
        return _rows.connection_link_rows(self, c)

    # -- deliveries ------------------------------------------------------------------------

    def delivery_rows(self) -> list[dict]:
        """One row per delivery, in table order (connection, link, first transfer).

        Needs ``rows=True`` (the default): with ``rows=False`` the rows of folded deliveries were
        not kept (they went to ``delivery_sink``, if any) and only the live ones are returned."""
        rows = list(self._rows)
        rows.extend(self.live_deliveries())
        rows.sort(key=lambda r: r[0])
        return [r for _, r in rows]

    def live(self) -> list:
        """The delivery objects not folded yet, in table order (for :meth:`delivery_columns`)."""
        return list(self._live())

    def live_iter(self):
        """:meth:`live` one at a time (a capture with many unsettled deliveries holds them compacted:
        their objects are made as they are read)."""
        return self._live()

    def live_deliveries(self):
        """``(key, row)`` of the deliveries not folded yet (for a streaming writer, after the folded
        ones), with the table-order key given to ``delivery_sink``.  The rows of compacted deliveries
        are made from the store's columns (no delivery object)."""
        for c in self.connections.values():
            for link in c.links:
                if not link.compacted:
                    for d in link_deliveries(link):
                        yield self._order(d), self._row(d)
                    continue
                streams = [[(d.seq, d) for d in sorted(link.live.values(), key=_by_seq)]]
                for sender, st, rows in compact_rows(link):
                    streams.append(self._compact_rows(c, link, sender, st, rows))
                for seq, x in heapq.merge(*streams, key=_first):
                    yield (c.seq, link.index, seq), (x if type(x) is dict else self._row(x))

    def _compact_rows(self, c, link, sender, st, rows):
        """(seq, row) of the compacted deliveries at ``rows`` of ``st``: the rows :func:`delivery_row`
        gives for them, made from the columns."""
        template = delivery_row(self, c, link, self._link_address(link), store_delivery(link, sender, st, rows[0]))
        seqs = st.seq
        lossy = c.loss is not None  # (unsettled_at differs by row only after a loss)
        plain = self._unsettled_place(link)
        for i in rows:
            (did, tag, ft, lt, fp, lp, frames, size, complete, resumed, rsm) = store_values(link, sender, st, i)
            row = dict(template)  # (the link's cells and those every compacted delivery shares)
            row["delivery_id"] = did
            row["delivery_tag"] = tag.hex() if tag is not None else None
            row["first_time"] = ft
            row["last_time"] = lt
            row["first_packet"] = fp
            row["last_packet"] = lp
            row["frames"] = frames
            row["message_size"] = size
            row["complete"] = complete
            row["resumed"] = resumed
            row["rcv_settle_mode"] = rsm
            if lossy:
                row["unsettled_at"] = unknown_at(c, ft) if connection_lost_after(c, ft) else plain
            yield seqs[i], row

    def _message_columns(self, ds: list) -> list:
        """The message columns of deliveries ``ds`` (MESSAGE_COLUMNS' order), each a list of
        cells; all None when the messages are not read."""
        if self.messages:
            return [list(c) for c in zip(*[delivery_cells(x) for x in ds])]
        return [[None] * len(ds) for _ in MESSAGE_COLUMNS]

    def delivery_columns(self, ds) -> tuple:
        """The deliveries-table cells of the delivery objects ``ds`` by column, not by row: the
        values :func:`delivery_row` gives, without a dict per delivery.

        Returns ``(cols, ctx_index, ctx_cols)``: ``cols`` maps a column name to its list of cells
        (one per delivery); the columns that depend only on the delivery's link and sender
        (connection, session, channel, link, link_index, handle, sender, receiver, sender_side,
        address) are given once per distinct (link, sender): ``ctx_cols`` maps each of those names
        to its values, ``ctx_index`` gives each delivery's position in them."""
        ds = ds if isinstance(ds, list) else list(ds)
        if not ds:
            return _no_delivery_columns()
        span = self._span
        ctx_pos: dict = {}
        ctx_rows: list = []
        ctx_index = []
        (delivery_id, tag, first_time, last_time, first_packet, last_packet, frames, size, complete, presettled,
         aborted, resumed, settled_by, settled_time, settled_packet, snd_time, rcv_time, outcome, outcome_by,
         outcome_time, outcome_packet, errs, descs, delivery_failed, undeliverable_here, received_state, txn_id,
         rcv_settle_mode, disp_snd, disp_rcv, latency, outcome_latency, unsettled_at) = [[] for _ in range(33)]
        # one pass over the delivery objects (their C structs when compiled), every column at once
        for d in ds:
            key = (d.link, d.direction)
            i = ctx_pos.get(key)
            if i is None:
                i = ctx_pos[key] = len(ctx_rows)
                ctx_rows.append(self._delivery_context(d.link, d.direction))
            ctx_index.append(i)
            delivery_id.append(d.delivery_id)
            t = d.tag
            tag.append(None if t is None else t.hex())
            ft = d.first_ts
            first_time.append(ft)
            last_time.append(d.last_ts)
            first_packet.append(d.first_packet)
            last_packet.append(d.last_packet)
            frames.append(d.frames)
            size.append(d.size)
            complete.append(d.complete)
            presettled.append(d.presettled)
            aborted.append(d.aborted)
            resumed.append(d.resumed)
            snd = d.snd_settled
            rcv = d.rcv_settled
            if snd is not None:
                settled_by.append("both" if rcv is not None else "sender")
                snd_time.append(snd[0])
            else:
                settled_by.append("receiver" if rcv is not None else "")
                snd_time.append(None)
            rcv_time.append(None if rcv is None else rcv[0])
            st = d.settled
            if st is None:
                settled_time.append(None)
                settled_packet.append(None)
                latency.append(None)
                unsettled_at.append(self._unsettled_at(d))
            else:
                settled_time.append(st[0])
                settled_packet.append(st[1])
                latency.append(span(st[0], st[1], ft, d.first_packet))
                unsettled_at.append(None)
            outcome.append(d.outcome or "")
            outcome_by.append(d.outcome_by or "")
            ot = d.outcome_ts
            outcome_time.append(ot)
            outcome_packet.append(d.outcome_packet)
            outcome_latency.append(span(ot, d.outcome_packet, ft, d.first_packet))
            e = d.outcome_error
            errs.append(e.get("condition") if e else None)
            descs.append(e.get("description") if e else None)
            delivery_failed.append(d.delivery_failed)
            undeliverable_here.append(d.undeliverable_here)
            received_state.append(d.received_state)
            txn_id.append(d.txn_id)
            rcv_settle_mode.append(d.rcv_settle_mode)
            disp = d.dispositions
            disp_snd.append(disp[d.direction])
            disp_rcv.append(disp[1 - d.direction])
        ctx_cols = _by_column(_DELIVERY_CTX, ctx_rows)
        msg = self._message_columns(ds)
        cols = {
            "delivery_id": delivery_id,
            "delivery_tag": tag,
            "first_time": first_time,
            "last_time": last_time,
            "first_packet": first_packet,
            "last_packet": last_packet,
            "frames": frames,
            "message_size": size,
            "complete": complete,
            "presettled": presettled,
            "aborted": aborted,
            "resumed": resumed,
            "settled_by": settled_by,
            "settled_time": settled_time,
            "settled_packet": settled_packet,
            "sender_settled_time": snd_time,
            "receiver_settled_time": rcv_time,
            "outcome": outcome,
            "outcome_by": outcome_by,
            "outcome_time": outcome_time,
            "outcome_packet": outcome_packet,
            "outcome_error": errs,
            "outcome_description": descs,
            "delivery_failed": delivery_failed,
            "undeliverable_here": undeliverable_here,
            "received_state": received_state,
            "txn_id": txn_id,
            "rcv_settle_mode": rcv_settle_mode,
            "dispositions_sender": disp_snd,
            "dispositions_receiver": disp_rcv,
            "settlement_latency": latency,
            "outcome_latency": outcome_latency,
            "unsettled_at": unsettled_at,
        }
        cols.update(zip(MESSAGE_COLUMNS, msg))
        return cols, ctx_index, ctx_cols

    def live_columns(self, batch_rows: int = 8192, head=None):
        """The deliveries not folded yet, in table order, by column: one :meth:`delivery_columns`
        triple per ``batch_rows`` deliveries (the last one shorter), the same cells as those of
        :meth:`live` would give.  ``head``: delivery objects to put first (a stream's folded ones
        still waiting for their batch).  Compacted deliveries are read from the store's arrays
        (:func:`store_columns`): no object per delivery."""
        pending: list = []  # segments: a list of delivery objects, or (link, peer, store, rows)
        n = 0
        for seg in chain([list(head)] if head else [], self._live_segments()):
            m = len(seg) if type(seg) is list else len(seg[3])
            k = 0
            while k < m:
                take = min(batch_rows - n, m - k)
                if k == 0 and take == m:
                    pending.append(seg)
                elif type(seg) is list:
                    pending.append(seg[k:k + take])
                else:
                    pending.append((seg[0], seg[1], seg[2], seg[3][k:k + take]))
                k += take
                n += take
                if n >= batch_rows:
                    yield self._segments_columns(pending)
                    pending, n = [], 0
        if n:
            yield self._segments_columns(pending)

    def _live_segments(self):
        """The deliveries not folded yet in table order, as segments: lists of delivery objects and
        runs of a compacted store ``(link, peer, store, rows)``."""
        for c in self.connections.values():
            for link in c.links:
                if not link.compacted:
                    objs = list(link_deliveries(link))
                    if objs:
                        yield objs
                    continue
                live = sorted(link.live.values(), key=_by_seq)
                streams = [(live, [x.seq for x in live])]
                for sender, st, rows in compact_rows(link):  # (their seqs as an array: 8 bytes apiece)
                    streams.append(((link, sender, st, rows), array("q", map(st.seq.__getitem__, rows))))
                yield from _merged_runs(streams)

    def _segments_columns(self, segs) -> tuple:
        """:meth:`delivery_columns` of the deliveries of ``segs`` (see :meth:`_live_segments`)."""
        if all(type(s) is list for s in segs):
            return self.delivery_columns([x for s in segs for x in s])
        cols = {name: [] for name in _DELIVERY_OWN}
        ctx_index: list = []
        ctx_cols = {name: [] for name in _DELIVERY_CTX}
        for seg in segs:
            if type(seg) is list:
                c, ci, cc = self.delivery_columns(seg)
            else:
                c, ci, cc = self._store_columns(*seg)
            base = len(ctx_cols["connection"])
            ctx_index.extend([base + i for i in ci] if base else ci)
            for name in _DELIVERY_CTX:
                ctx_cols[name].extend(cc[name])
            for name in _DELIVERY_OWN:
                cols[name].extend(c[name])
        return cols, ctx_index, ctx_cols

    def _store_columns(self, link, sender, st, rows) -> tuple:
        """:meth:`delivery_columns` of the compacted deliveries at ``rows`` of ``st``: the cells every
        compacted delivery of the link shares from one delivery object (made of the first row), the
        others from the store's arrays."""
        n = len(rows)
        one, _ci, cc = self.delivery_columns([store_delivery(link, sender, st, rows[0])])
        cols = dict(zip(STORE_COLUMNS, store_columns(link, sender, st, rows)))
        for name in _DELIVERY_OWN:
            if name not in cols:
                cols[name] = one[name] * n
        c = link.conn
        if c.loss is not None:  # (unsettled_at differs by row only after a loss)
            plain = self._unsettled_place(link)
            cols["unsettled_at"] = [unknown_at(c, ft) if connection_lost_after(c, ft) else plain for ft in cols["first_time"]]
        return cols, [0] * n, cc

    def _delivery_context(self, link, direction) -> tuple:
        """The cells of the :data:`_DELIVERY_CTX` columns for deliveries sent by ``direction`` on ``link``."""
        c, s = link.conn, link.session
        return (c.id, s.index, self._session_channel(s), link.name, link.index, link.handle[direction],
                c.peer(direction), c.peer(1 - direction), SIDES[direction], self._link_address(link))

    # -- stalls ------------------------------------------------------------------------------

    def stall_rows(self) -> list[dict]:
        """The stalls table."""
        return _rows.stall_rows(self)

    def stall_duration(self, st) -> float | None:
        """A stall's duration (an open one: to the end of the capture), seconds."""
        return self._stall_duration(st)

    def stall_seconds(self, st) -> float | None:
        """A stall's duration for the sums: 0.0 for a stall without a start, None when unknown (the
        capture clock stepped during it)."""
        if st.start is None:
            return 0.0
        return self._stall_duration(st)

    def stall_row(self, st) -> dict:
        """The stalls-table row of one Stall (of :attr:`stalls`)."""
        return _rows.stall_row(self, st)

    # -- transactions, violations, errors (rows.py) ---------------------------------------------

    def transaction_rows(self) -> list[dict]:
        """The transactions table."""
        return _rows.transaction_rows(self)

    def violation_rows(self) -> list[dict]:
        """The violations table."""
        return _rows.violation_rows(self)

    def error_rows(self) -> list[dict]:
        """The errors table."""
        return _rows.error_rows(self)

    # -- summaries ---------------------------------------------------------------------------

    def latency_summary(self, by: str = "link", metric: str = "settlement") -> list[dict]:
        """Latency percentiles per link / address / connection (metric "settlement" or "outcome")."""
        if by not in ("link", "address", "connection"):
            raise ValueError(f"by must be link, address or connection, not {by!r}")
        if metric not in ("settlement", "outcome"):
            raise ValueError(f"metric must be settlement or outcome, not {metric!r}")
        groups: dict = {}
        keys: dict = {}
        for c in self.connections.values():
            for link in c.links:
                addr = self._link_address(link)
                if by == "link":
                    k = (c.id, link.index)
                    keys.setdefault(k, {"connection": c.id, "session": link.session.index,
                                        "channel": self._session_channel(link.session), "link": link.name,
                                        "link_index": link.index, "address": addr})
                elif by == "address":
                    k = addr
                    keys.setdefault(k, {"address": addr})
                else:
                    k = c.id
                    keys.setdefault(k, {"connection": c.id, "client": c.client, "server": c.server})
                vals = groups.get(k)
                if vals is None:
                    vals = groups[k] = Latencies()
                st = self.link_stats(link)
                vals.extend(st.latency if metric == "settlement" else st.outcome_latency)
        out = []
        for k, vals in groups.items():
            out.append({**keys[k], **summarize(vals)})
        return out

    def summary(self) -> dict:
        """A few totals (counts) over the whole capture."""
        totals = self.delivery_totals()
        return {
            "connections": len(self.connections),
            "sessions": sum(len(c.sessions) for c in self.connections.values()),
            "links": sum(len(c.links) for c in self.connections.values()),
            "deliveries": totals["deliveries"],
            "unsettled": totals["unsettled"],
            "stalls": sum(1 for st in self.stalls if not st.idle()),
            "violations": sum(v.get("count") or 1 for v in self.violations),
            "errors": len(self.frame_errors),
        }


