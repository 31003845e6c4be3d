"""Bounded time series for the plots of the HTML report: link credit and session window over
time, and the first frames of a few connections (for a ladder diagram).

The plain :class:`~amqp_dissect.results.analytics.Analyzer` keeps none of this (``report`` in
text or JSON does not need it, and pays nothing for it).  :class:`SeriesAnalyzer` is an Analyzer
that also records, from the protocol state after each frame:

* per link, the sender's link-credit (``link-credit`` of the state layer: the receiver's
  delivery-limit minus the sender's delivery-count) after every attach, flow and transfer;
* per session and sending peer, the remote-incoming-window after every begin, flow and
  transfer of that session;
* per connection, its first :data:`LADDER_FRAMES` frames and protocol headers (time, side,
  channel, performative and a few fields).

Memory is bounded: :class:`Series` keeps at most :data:`SERIES_POINTS` buckets however many
points it is given (consecutive buckets are merged two by two, each keeping its min, max and
last value, so a dip to zero never disappears), at most :data:`SERIES_LINKS` links and
:data:`SERIES_SESSIONS` sessions get a series (the first ones seen), and at most
:data:`LADDER_CONNECTIONS` connections keep frames.  What was cut is counted, so the report can
say so.
"""

from __future__ import annotations

from array import array

from ..amqp.codec import ABSENT, Composite, Described
from ..amqp.framing import Frame, ProtocolHeader
from ..amqp.values import short_value
from ..model.transitions import SIDES
from ..times import NS
from .analytics import Analyzer

SERIES_POINTS = 512  # buckets kept per series (merged two by two when full)
RATE_WIDTH = 100_000  # nanoseconds: the first width of a RateSeries' buckets (doubled as needed)
SERIES_LINKS = 64  # links with a credit series
SERIES_SESSIONS = 64  # (session, sending peer) pairs with a window series
LADDER_FRAMES = 60  # frames kept per connection for the ladder diagram
LADDER_CONNECTIONS = 8  # connections whose first frames are kept

# performative fields kept with a ladder frame (those the diagram's labels use)
LADDER_FIELDS = ("handle", "delivery-id", "link-credit", "delivery-count", "incoming-window", "settled", "more",
                 "role", "first", "last", "remote-channel", "name", "drain", "aborted", "mechanism", "code")


class Series:
    """A time series of numbers in bounded room: change points, merged when there are too many.

    Each bucket holds the time of its first point and the min, max and last value of its points.
    While fewer than ``cap`` changes were added, every bucket is one point (exact); after that,
    neighbouring buckets are merged two by two and later points go ``width`` to a bucket."""

    __slots__ = ("cap", "t", "lo", "hi", "end", "width", "_n", "_t", "_lo", "_hi", "_end", "last", "points")

    def __init__(self, cap: int = SERIES_POINTS):
        if cap < 2:
            raise ValueError("a series needs room for 2 buckets at least")
        self.cap = cap - cap % 2
        self.t = array("d")
        self.lo = array("d")
        self.hi = array("d")
        self.end = array("d")
        self.width = 1  # points per bucket
        self._n = 0  # points in the bucket being filled
        self._t = self._lo = self._hi = self._end = 0.0
        self.last = None  # the last value added (a repeat is not a change point)
        self.points = 0  # change points added

    def add(self, t: int, v) -> None:
        """A value ``v`` at capture time ``t`` (nanoseconds; kept as float seconds, for drawing)."""
        if v == self.last:
            return
        self.last = v
        self.points += 1
        v = float(v)
        t = t / NS
        if self._n == 0:
            self._t = t
            self._lo = self._hi = v
        else:
            if v < self._lo:
                self._lo = v
            if v > self._hi:
                self._hi = v
        self._end = v
        self._n += 1
        if self._n >= self.width:
            self._push()

    def _push(self) -> None:
        self.t.append(self._t)
        self.lo.append(self._lo)
        self.hi.append(self._hi)
        self.end.append(self._end)
        self._n = 0
        if len(self.t) >= self.cap:
            self._halve()

    def _halve(self) -> None:
        t, lo, hi, end = self.t, self.lo, self.hi, self.end
        n = len(t)
        self.t = array("d", t[0:n:2])
        self.lo = array("d", map(min, lo[0:n:2], lo[1:n:2]))
        self.hi = array("d", map(max, hi[0:n:2], hi[1:n:2]))
        self.end = array("d", end[1:n:2])
        self.width *= 2

    @property
    def exact(self) -> bool:
        """Every change point is its own bucket (nothing was merged)."""
        return self.width == 1

    def buckets(self) -> list:
        """[(time, min, max, last), ...] in time order, the bucket being filled included."""
        out = list(zip(self.t, self.lo, self.hi, self.end))
        if self._n:
            out.append((self._t, self._lo, self._hi, self._end))
        return out

    def to_dict(self) -> dict:
        return {"buckets": [list(b) for b in self.buckets()], "points": self.points, "exact": self.exact,
                "per_bucket": self.width}


class RateSeries:
    """Deliveries settled per time bucket, and their settlement latency (sum and max), in bounded
    room: buckets of ``width`` nanoseconds from ``t0`` (the first settlement seen); when a
    settlement falls beyond ``cap`` buckets, neighbouring buckets are merged two by two and the
    width doubles.  A settlement before ``t0`` (capture times out of order) counts in the first."""

    __slots__ = ("cap", "t0", "width", "count", "lat_sum", "lat_max", "total")

    def __init__(self, t0: int, cap: int = SERIES_POINTS, width: int = RATE_WIDTH):
        self.cap = max(2, cap - cap % 2)
        self.t0 = t0
        self.width = width
        self.count = array("q")
        self.lat_sum = array("d")
        self.lat_max = array("d")
        self.total = 0

    def add(self, t: int, latency: float) -> None:
        i = max(0, (t - self.t0) // self.width)
        while i >= self.cap:
            self._halve()
            i = max(0, (t - self.t0) // self.width)
        n = len(self.count)
        if i >= n:
            grow = i + 1 - n
            self.count.extend([0] * grow)
            self.lat_sum.extend([0.0] * grow)
            self.lat_max.extend([0.0] * grow)
        self.count[i] += 1
        self.lat_sum[i] += latency
        if latency > self.lat_max[i]:
            self.lat_max[i] = latency
        self.total += 1

    def _halve(self) -> None:
        n = len(self.count)
        self.count = array("q", [sum(self.count[j:j + 2]) for j in range(0, n, 2)])
        self.lat_sum = array("d", [sum(self.lat_sum[j:j + 2]) for j in range(0, n, 2)])
        self.lat_max = array("d", [max(self.lat_max[j:j + 2]) for j in range(0, n, 2)])
        self.width *= 2

    def to_dict(self) -> dict:
        """``t0`` (epoch seconds), ``width`` (seconds), ``total``, and per bucket ``count``,
        ``mean`` and ``max`` latency (seconds; null for a bucket without settlements)."""
        return {"t0": self.t0 / NS, "width": self.width / NS, "total": self.total, "count": list(self.count),
                "mean": [s / c if c else None for s, c in zip(self.lat_sum, self.count)],
                "max": [m if c else None for m, c in zip(self.lat_max, self.count)]}


class SeriesAnalyzer(Analyzer):
    """An :class:`Analyzer` that also keeps the bounded series of this module (see the module
    docstring).  Read them with :meth:`credit_series`, :meth:`window_series` and
    :meth:`ladder`."""

    def __init__(self, rows: bool = False, delivery_sink=None, fold_out=None, series_points: int = SERIES_POINTS,
                 series_links: int = SERIES_LINKS, series_sessions: int = SERIES_SESSIONS,
                 ladder_frames: int = LADDER_FRAMES, ladder_connections: int = LADDER_CONNECTIONS,
                 messages: bool = False):
        Analyzer.__init__(self, rows=rows, delivery_sink=delivery_sink, fold_out=fold_out, messages=messages)
        self.series_points = series_points
        self.series_links = series_links
        self.series_sessions = series_sessions
        self.ladder_frames = ladder_frames
        self.ladder_connections = ladder_connections
        self._credit: dict = {}  # Link -> Series
        self._pairs: dict = {}  # Link -> (credit Series, window Series, session, sender), for the hot path
        self._window_s: dict = {}  # (Session, sending peer) -> Series
        self.links_without_series = 0
        self.sessions_without_series = 0
        self._untracked: set = set()  # links / sessions refused a series (counted once)
        self._ladder: dict = {}  # connection id -> [frame records]
        self._ladder_total: dict = {}  # connection id -> frames and headers seen in all
        self._rates: dict = {}  # Link -> RateSeries (settlements over time), the first series_links links

    # -- hooks into the state layer ------------------------------------------------------

    def feed(self, event) -> None:
        cls = type(event)
        if cls is Frame or cls is ProtocolHeader:
            cid = event.conn
            total = self._ladder_total.get(cid)
            if total is None:
                if len(self._ladder_total) < self.ladder_connections:
                    self._ladder_total[cid] = 0
                    self._ladder[cid] = []
                    total = 0
            if total is not None:
                self._ladder_total[cid] = total + 1
                if total < self.ladder_frames:
                    self._ladder[cid].append(_ladder_record(event))
        Analyzer.feed(self, event)

    def _on_fold(self, d) -> None:
        Analyzer._on_fold(self, d)
        st = d.settled
        if st is None or st[0] is None or d.first_ts is None:
            return
        link = d.link
        rs = self._rates.get(link)
        if rs is None:
            if len(self._rates) >= self.series_links:
                return
            rs = self._rates[link] = RateSeries(st[0], self.series_points)
        lat = self._span(st[0], st[1], d.first_ts, d.first_packet)
        if lat is None:  # (across a clock step, or times out of order: unknown, not drawn)
            return
        rs.add(st[0], lat)

    def _on_credit(self, link, f):
        ts = f.ts
        pair = self._pairs.get(link)
        if pair is None:
            if link.sender_dir is None or ts is None:
                return
            pair = self._pair(link)
        cs, ws, s, sd = pair
        if sd != link.sender_dir or ts is None:  # (the sender changed: a role violation)
            return
        if cs is not None and not link.credit_lost and not link.link_credit.count_low:  # (count_low: a bound)
            cr = link.credit()
            if cr is not None and cr != cs.last:
                cs.add(ts, cr)
        if ws is not None:
            riw = s.riw(sd)
            if riw is not None and riw != ws.last:
                ws.add(ts, riw)

    def _pair(self, link) -> tuple:
        """(credit series, window series, session, sender) of a link whose sender is known."""
        sd = link.sender_dir
        s = link.session
        cs = self._credit.get(link)
        if cs is None:
            cs = self._new(self._credit, link, self.series_links)
        key = (s, sd)
        ws = self._window_s.get(key)
        if ws is None:
            ws = self._new(self._window_s, key, self.series_sessions)
        pair = self._pairs[link] = (cs, ws, s, sd)
        return pair

    def _on_window(self, s, sender, f):
        if f is not None and f.ts is not None:
            self._record_window(s, sender, f.ts)

    def _record_window(self, s, sender, ts) -> None:
        riw = s.riw(sender)
        if riw is None:
            return
        key = (s, sender)
        ser = self._window_s.get(key)
        if ser is None:
            ser = self._new(self._window_s, key, self.series_sessions)
        if ser is not None:
            ser.add(ts, riw)

    def _new(self, table: dict, key, limit: int):
        if len(table) >= limit:
            if key not in self._untracked:
                self._untracked.add(key)
                if table is self._credit:
                    self.links_without_series += 1
                else:
                    self.sessions_without_series += 1
            return None
        s = table[key] = Series(self.series_points)
        return s

    # -- reading ---------------------------------------------------------------------------

    def credit_series(self, link) -> Series | None:
        """The link-credit series of a link (a state-layer ``Link``), None when none was kept."""
        return self._credit.get(link)

    def window_series(self, session, sender) -> Series | None:
        """The remote-incoming-window series of ``sender``'s transfers on a session."""
        return self._window_s.get((session, sender))

    def rate_series(self, link) -> RateSeries | None:
        """Settlements over time of a link (a state-layer ``Link``), None when none was kept."""
        return self._rates.get(link)

    def ladder(self) -> list:
        """[{connection, frames: [records], total}] of the connections whose frames were kept."""
        return [{"connection": cid, "frames": self._ladder[cid], "total": self._ladder_total[cid]}
                for cid in self._ladder]


LADDER_TEXT = 120  # characters of a text field kept with a ladder frame


def _field(c, name):
    """Field ``name`` of composite ``c``, ABSENT when ``c`` is not a composite whose spec has it:
    any field can hold a value of any type (a close's error may be a delivery state, a string,
    an unknown descriptor), so nothing here assumes one."""
    if isinstance(c, Composite) and name in c.spec.index:
        return c.field(name)
    return ABSENT


def _plain(v):
    """A field value as JSON (numbers, text, booleans; choices and the rest as text), bounded in
    size; None for a value of another kind (not kept)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return float(v)
        if v is None:
            return None
        v = str(v)
        return v if len(v) <= LADDER_TEXT else v[:LADDER_TEXT] + "…"
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return b.hex() if len(b) <= LADDER_TEXT // 2 else b[: LADDER_TEXT // 2].hex() + "…"
    if isinstance(v, Described) and isinstance(v.name, str):  # a described value (a delivery state): its name
        return v.name
    return None


def _error_text(err):
    """What a frame's ``error`` field shows: the condition of an ``error`` composite; a value of
    another type as what it is (None for absent / null)."""
    if err is None or err is ABSENT:
        return None
    if isinstance(err, Composite) and err.spec.name == "error":
        cond = _field(err, "condition")
        if cond is None or cond is ABSENT:
            return "(no condition)"
        return str(cond) if isinstance(cond, str) else f"(condition {short_value(None, cond, 40)})"
    return f"(not an error: {short_value(None, err, 40)})"


def _ladder_record(ev) -> dict:
    rec = {"packet": ev.packet, "time": None if ev.ts is None else ev.ts / NS, "side": SIDES[ev.direction] if ev.direction in (0, 1) else None,
           "channel": None, "kind": "header", "performative": None, "fields": {}}
    if type(ev) is ProtocolHeader:
        rec["performative"] = ev.name
        return rec
    rec["channel"] = ev.channel
    rec["kind"] = ev.kind
    rec["performative"] = ev.name
    p = ev.performative if ev.kind != "heartbeat" else None
    fields = {}
    if isinstance(p, Composite):
        for name in LADDER_FIELDS:
            v = _plain(_field(p, name))
            if v is not None:
                fields[name] = v
        if ev.name == "disposition" or ev.name == "transfer":
            st = _field(p, "state")
            if isinstance(st, Described) and isinstance(st.name, str):
                fields["state"] = st.name
        err = _error_text(_field(p, "error"))
        if err is not None:
            fields["error"] = err
    rec["fields"] = fields
    return rec
