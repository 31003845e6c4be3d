"""A run of the archive job that continues an earlier one (issue 43): the checks that it can
(:class:`~amqp_dissect.pipelines.archive.checkpoint.CannotContinue` otherwise), the set's facts
joined with the earlier runs', and the final and provisional rows of a run (:func:`row_chunks`,
:func:`chunk_rows`).  The job's steps themselves are in :mod:`.job` (``_Run``)."""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import urlparse

from amqp_dissect.pipelines.archive.checkpoint import CannotContinue, Checkpoint, SetFile


def _direct_dir(uri: str) -> str | None:
    """The local directory of ``uri`` (as the job's), or None."""
    u = urlparse(uri)
    return u.path if u.scheme in ("", "file") else None


def latest_record_time(cp: Checkpoint | None, summaries: list, offsets: dict) -> int | None:
    """The latest time of any record of the set so far (the earlier runs' and the ranges in ``offsets``)."""
    tops = [s["max_ts"] if s.get("max_ts") is not None else s["last_ts"] for s in summaries
            if s["rid"] in offsets and s.get("count")]
    if cp is not None and cp.top_ts is not None:
        tops.append(cp.top_ts)
    return max(tops) if tops else None


def check_new_files(cp: Checkpoint, spans: list, files: list) -> None:
    """:class:`CannotContinue` unless every new file comes after the files of ``cp`` in the set's
    order and outside their overlap (its first record at or after the latest record before: one run
    would otherwise merge it with them), and was not read before."""
    from amqp_dissect.pipelines.archive import set_key

    seen = {f.path for f in cp.files}
    for path in files:
        if path in seen:
            raise CannotContinue(f"{path} was read by an earlier run")
    olds = [set_key(f.path, f.first_ts, 0) for f in cp.files if f.first_ts is not None]
    top = max(olds) if olds else None
    for path, first, _last in spans:
        latest = cp.top_ts if cp.top_ts is not None else cp.last_ts
        if latest is not None and (first < latest or (top is not None and set_key(path, first, 0) < top)):
            raise CannotContinue(f"{path} starts before the last record of the files read before "
                                 "(the set's order and packet numbers would change)")


def check_reused_flows(cp: Checkpoint, flows: list) -> None:
    """:class:`CannotContinue` when a flow an earlier run finished (not carried) has new records: its
    connection ids and state would not be those of one run."""
    for f in flows:
        if f not in cp.flows and cp.was_closed(f):
            raise CannotContinue(f"the flow {f} ended in an earlier run and has records in the new files")


def set_files(files: list, summaries: list, lay) -> list:
    """:class:`SetFile` of the files of this run, in capture order."""
    counts: dict = {}
    for s in summaries:
        if s["rid"] not in lay.offsets:
            continue
        if s.get("group"):
            for fi, _first, _last, n in s["members"]:
                counts[files[fi]] = counts.get(files[fi], 0) + n
        else:
            counts[files[s["file"]]] = counts.get(files[s["file"]], 0) + s["count"]
    spans = {p: (a, b) for p, a, b in lay.spans}
    return [SetFile(p, counts.get(p, 0), *spans.get(p, (None, None))) for p in lay.order]


def whole_set_order(cp: Checkpoint, lay) -> tuple[list, list]:
    """The whole set's files in capture order (those with records by time: the earlier runs'
    first; then those without) and the spans of those with records."""
    old = [(f.path, f.first_ts, f.last_ts) for f in cp.files if f.first_ts is not None]
    spans = old + list(lay.spans)
    with_records = {p for p, _, _ in spans}
    empty = [f.path for f in cp.files if f.path not in with_records] + [p for p in lay.order
                                                                         if p not in with_records]
    return [p for p, _, _ in spans] + empty, spans


# --------------------------------------------------------------------------- final and provisional rows


class RowChunk(NamedTuple):
    """One stage-2 chunk of a table's rows in a run's work directory (:func:`row_chunks`)."""

    layer: int  # the stage-2 layer (0: stage 2; then its reruns)
    path: str  # the layer's Parquet file of the table's chunks
    index: int  # the chunk's row in that file
    rows: int
    provisional: bool  # rows a carried flow made at its finish (the next run makes them again)


def row_chunks(done, table: str) -> tuple[list, list]:
    """The chunks of ``table`` of ``done`` (a run with a local work directory), as ``(final,
    provisional)`` lists of :class:`RowChunk`.  Final rows are every run's own (a set cut into runs
    gives each final row once); provisional ones are made again by the next run (the last run's
    stand for the flows still open).  Rows of a flow a later layer ran again are in its chunks
    still: :func:`chunk_rows` drops them (``done.excluded``)."""
    import pyarrow.parquet as pq

    dirs = [_direct_dir(p) for p in done.layer_paths]
    if None in dirs:
        raise ValueError("row_chunks: the run's work directory is not local")
    from .tables import chunk_files

    final, prov = [], []
    for li, path in chunk_files(dirs, table):
        t = pq.read_table(path, columns=["n", "provisional"], use_threads=False)
        for i, (n, p) in enumerate(zip(t.column("n").to_pylist(), t.column("provisional").to_pylist())):
            (prov if p else final).append(RowChunk(li, path, i, n, bool(p)))
    return final, prov


def chunk_rows(done, table: str, chunks: list):
    """The rows of ``chunks`` (:func:`row_chunks`) of ``table`` as one Arrow table in output order
    (the registry's columns, Spark types), without the rows of flows a later layer ran again; None
    without rows.  Holds them all: for tests and small tables (the tables step writes large ones
    by ranges)."""
    import pyarrow.parquet as pq

    from amqp_dissect.pipelines.archive import sorted_range_table

    by_path: dict = {}
    for c in chunks:
        by_path.setdefault((c.layer, c.path), []).append(c.index)

    def blobs():
        for (li, path), idx in sorted(by_path.items()):
            col = pq.read_table(path, columns=["blob"], use_threads=False).column(0)
            for i in sorted(idx):
                yield li, 0, col[i].as_py()
    return sorted_range_table(blobs(), [], done.excluded)
