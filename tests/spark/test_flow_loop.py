"""Stage 2's loop over a flow's records (``amqp_dissect.shard.pump_flow``, compiled) hands back to
``FlowRunner.run`` whenever rows are due: every FOLD_ROWS folded deliveries, and after every record
that made frames rows.  Where it stops must not change a row: runs of the same records that stop
after every folded delivery (FOLD_ROWS 1) and after every 8,192 give the same tables, and their
deliveries are the single process's (``read_analysis``, the compiled ``Dissector.pump`` and one
Analyzer over the whole capture).  No Spark session: the runner is driven here as a stage-2 task
drives it, over every TCP record of a sample sorted by flow then packet."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest

from amqp_dissect.capture.netparse import parse_segment
from amqp_dissect.capture.pcap import open_capture
from amqp_dissect.errors import DissectError
from amqp_dissect.pipelines.archive.flows import FlowParams, FlowRunner
from amqp_dissect.pipelines.archive.tables import ipc_batches
from amqp_dissect.pipelines.runs.local import read_analysis
from amqp_dissect.shard import flow_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
KEYS = [("_k1", "ascending"), ("_flow", "ascending"), ("_k2", "ascending")]


def _rows(cap: str):
    """The capture's TCP records as stage 2 gets them, ``(flow, packet, ts, linktype, data,
    orig_len)`` sorted by flow then packet, and the capture's end (last record's time, last TCP
    record's number)."""
    rows = []
    last_ts = last_tcp = None
    with open(cap, "rb") as f:
        for r in open_capture(f):
            last_ts = r.ts
            try:
                seg = parse_segment(r.linktype, r.data)
            except DissectError:
                continue
            if seg is None:
                continue
            last_tcp = r.index
            rows.append((flow_name(seg), r.index, r.ts, r.linktype, r.data, r.orig_len))
    rows.sort(key=lambda x: (x[0], x[1]))
    return rows, last_ts, last_tcp


def _tables(rows, params: FlowParams, fold_rows: int) -> dict:
    class Runner(FlowRunner):
        FOLD_ROWS = fold_rows

    got: dict = {}
    for chunk in Runner(params).run(iter(rows)):
        if not chunk[0].startswith("_"):
            got.setdefault(chunk[0], []).extend(ipc_batches(chunk[8]))
    return {t: pa.Table.from_batches(b).sort_by(KEYS) for t, b in got.items()}


@pytest.mark.parametrize("cap", SAMPLES, ids=[os.path.basename(c) for c in SAMPLES])
@pytest.mark.parametrize("frames", [False, True], ids=["tables", "frames"])
def test_where_the_flow_loop_stops_changes_no_row(cap, frames):
    rows, last_ts, last_tcp = _rows(cap)
    params = FlowParams(last_ts=last_ts, last_tcp_packet=last_tcp, frames=frames)
    every = _tables(rows, params, 1)
    once = _tables(rows, params, 8192)
    assert every.keys() == once.keys()
    for t in every:
        assert every[t].equals(once[t]), t
    if not frames:
        assert "frames" not in every
    # the deliveries: the single process's, delivery by delivery
    single = read_analysis(cap).deliveries
    want = sorted(zip(single.connection, single.link, single.delivery_id.astype(object)), key=repr)
    d = every.get("deliveries")
    got = [] if d is None else sorted(zip(d["connection"].to_pylist(), d["link"].to_pylist(),
                                          d["delivery_id"].to_pylist()), key=repr)
    assert [(c, l, int(i) if i == i and i is not None else None) for c, l, i in got] == \
        [(c, l, int(i) if i == i and i is not None else None) for c, l, i in want]
