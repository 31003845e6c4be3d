"""What an archive run leaves for the next one to continue a growing capture set
(:class:`Checkpoint`), and how a flow's state crosses runs (:func:`dump_state`,
:func:`load_state`).

A run over the files F1..Fk keeps every flow whose rows could still change with later records
(:func:`carried`) as its stage-2 state, taken after its last record and before the capture's end
is applied to it; the next run, given only the new files Fk+1..Fn, numbers their packets after
the old ones, continues the idle-sweep clock, the clock watch and the set's facts, starts each
carried flow from its state and finishes it at the new end.  The rows a carried flow makes at
its finish are provisional (the next run makes them again); every other row is final.  So the
final rows of every run plus the provisional rows of the last equal the rows of one run over
F1..Fn.  A run that cannot continue exactly raises :class:`CannotContinue` before it writes
anything: the caller runs the whole set again."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.resources
import io
import os
import pickle
from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlparse

from .inputs import InputError

FORMAT = 2  # the layout of a saved checkpoint (a different one is not continued from; 2: its build)
META_FILE = "checkpoint.pkl"
FLOWS_FILE = "flows-{:05d}.pkl"
FLOWS_FILE_BYTES = 64 << 20  # carried flows' states per file, about (a few files, never one per flow)


class CannotContinue(Exception):
    """A run given a checkpoint that cannot continue it exactly (``reason`` says why): the set
    has to be analysed again from its first file."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class SetFile:
    """A file read by an earlier run, in capture order."""

    path: str
    records: int
    first_ts: int | None  # its first record's time (ns; None without records)
    last_ts: int | None  # its last record's time


@dataclass
class Checkpoint:
    """Everything a run leaves for the next to continue as if it had read the whole set at once.

    ``flows``: flow key -> the flow's pickled stage-2 state (:func:`dump_state`).  ``closed``:
    a sorted list of 64-bit digests of the flows seen and not carried (a later record of one of
    them: :class:`CannotContinue`); 8 bytes a flow."""

    options: dict  # what must match in the next run (:func:`run_options`)
    files: list  # [SetFile, ...] in capture order
    records: int = 0  # records of the set so far (the next run's packet numbers follow)
    tcp_records: int = 0
    last_ts: int | None = None  # time of the set's last record (ns)
    top_ts: int | None = None  # the latest time of any record of the set (a file starting before it overlaps)
    last_tcp_packet: int = 0  # packet number of the set's last record fed to TCP reassembly
    last_event: tuple | None = None  # (packet, ts) of the last record that produced an event
    tick_due: int | None = None  # the idle-sweep clock's next tick time (SweepClock.due)
    ticks: tuple = ()  # ((packet, ts), ...): the ticks after the earliest carried flow's last record
    clock_watch: object = None  # the ClockWatch over every record so far (its steps: the set's)
    errors: list = field(default_factory=list)  # (path, damage) pairs, capture order
    merged: list = field(default_factory=list)  # [[path, ...], ...] overlap groups read merged
    keylog: str = ""  # key log text embedded in the files read (pcapng Decryption Secrets)
    final_counts: dict = field(default_factory=dict)  # table -> final rows made so far
    flows: dict = field(default_factory=dict)  # flow -> pickled state
    closed: list = field(default_factory=list)  # sorted digests of the flows not carried
    runs: int = 1  # runs that made it
    # why a next run cannot continue from it (a carried flow whose state could not be saved:
    # StateNotSaved), or None
    unsaved: str | None = None
    # what wrote it (:func:`build_fingerprint`): the carried states are pickles of that build's classes
    build: dict = field(default_factory=lambda: dict(build_fingerprint()))

    # ---- the flows

    @property
    def carried(self) -> frozenset:
        return frozenset(self.flows)

    def was_closed(self, flow: str) -> bool:
        """Whether ``flow`` was seen and not carried (by its digest)."""
        from bisect import bisect_left

        d = flow_digest(flow)
        i = bisect_left(self.closed, d)
        return i < len(self.closed) and self.closed[i] == d

    def size_bytes(self) -> int:
        """The bytes :meth:`save` writes (about: the carried states and the set's facts)."""
        return len(self._meta_bytes()) + sum(len(b) + len(f) + 16 for f, b in self.flows.items())

    # ---- files

    def _meta_bytes(self) -> bytes:
        meta = {k: v for k, v in self.__dict__.items() if k != "flows"}
        return pickle.dumps({"format": FORMAT, **meta}, 5)

    def save(self, directory: str) -> list[str]:
        """Write the checkpoint into ``directory`` (a local path; created): the set's facts in one
        file, the carried states in a few (each about :data:`FLOWS_FILE_BYTES`).  Returns the
        names written."""
        d = _local_dir(directory)
        os.makedirs(d, exist_ok=True)
        names = []
        part: list = []
        size = 0
        for flow in sorted(self.flows):
            blob = self.flows[flow]
            part.append((flow, blob))
            size += len(blob)
            if size >= FLOWS_FILE_BYTES:
                names.append(_write(d, FLOWS_FILE.format(len(names)), pickle.dumps(part, 5)))
                part, size = [], 0
        if part or not names:
            names.append(_write(d, FLOWS_FILE.format(len(names)), pickle.dumps(part, 5)))
        meta = self._meta_bytes()
        return [_write(d, META_FILE, meta)] + names

    @classmethod
    def load(cls, directory: str) -> "Checkpoint":
        """The checkpoint :meth:`save` wrote in ``directory``.  Raises :class:`InputError`
        ("missing") without one; :class:`CannotContinue` for one of another format, one written by
        another build (:func:`build_fingerprint`: its carried states are that build's pickles), or
        one that cannot be read back (a file unpickled with an error, or a carried state that
        does not unpickle: :func:`check_states`)."""
        d = _local_dir(directory)
        meta = read_facts(directory)
        flows: dict = {}
        for name in sorted(os.listdir(d)):
            if name.startswith("flows-") and name.endswith(".pkl"):
                flows.update(_unpickle_file(os.path.join(d, name), "the carried flows' states"))
        try:
            cp = cls(flows=flows, **meta)
        except TypeError as e:
            raise CannotContinue(f"its facts could not be read ({e})") from None
        check_states(cp.flows)
        return cp


def read_facts(directory: str) -> dict:
    """The facts of the checkpoint in ``directory`` (its carried states left unread): what
    :meth:`Checkpoint.load` checks first, and what a run's plan checks before any Spark (so
    ``--dry-run`` says a run will be full when the checkpoint cannot be continued from).  Raises
    :class:`InputError` ("missing") without one; :class:`CannotContinue` for another format,
    another build, or facts that cannot be read."""
    path = os.path.join(_local_dir(directory), META_FILE)
    if not os.path.isfile(path):
        raise InputError("missing", f"{directory}: no checkpoint there")
    meta = _unpickle_file(path, "its facts")
    if not isinstance(meta, dict) or meta.pop("format", None) != FORMAT:
        raise CannotContinue(f"it was saved in another layout (not format {FORMAT})")
    other = build_differs(meta.get("build"))
    if other:
        raise CannotContinue(f"it was written by another build ({other})")
    return meta


def _unpickle_file(path: str, what: str):
    """A checkpoint file unpickled; any error reading it: :class:`CannotContinue` saying what."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception as e:  # (a truncated, corrupt or foreign file: the set is analysed again)
        raise CannotContinue(f"{what} could not be read ({type(e).__name__}: {e})") from None


# --------------------------------------------------------------------------- what wrote it


@functools.lru_cache(maxsize=1)
def build_fingerprint() -> tuple:
    """What a checkpoint's pickles depend on, as ((name, value), ...): the package's version,
    which hot modules run compiled (a compiled class pickles through functions its pure twin
    lacks, and with a digest of its fields), and a digest of the hot modules' ``.py`` and
    ``.pxd`` files as installed (the classes the carried states are made of)."""
    from amqp_dissect import compiled_modules
    from amqp_dissect._hot import HOT_MODULES

    try:
        version = importlib.metadata.version("amqp-dissect")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    root = importlib.resources.files("amqp_dissect")
    h = hashlib.sha256()
    for name in HOT_MODULES:
        rel = name.split(".")[1:]
        for ext in (".py", ".pxd"):
            f = root.joinpath(*rel[:-1], rel[-1] + ext)
            h.update(f"{name}{ext}\0".encode())
            if f.is_file():
                h.update(f.read_bytes())
    compiled = compiled_modules()
    mode = "compiled" if compiled else "pure"
    if compiled and len(compiled) < len(HOT_MODULES):
        mode = "compiled " + ",".join(compiled)
    return (("version", version), ("modules", mode), ("sources", h.hexdigest()[:16]))


def build_differs(build) -> str | None:
    """What of a checkpoint's ``build`` (as saved) differs from this process's build, or None."""
    if not isinstance(build, dict):
        return "it does not say which"
    now = dict(build_fingerprint())
    differ = [f"{k} {build.get(k)} here {v}" if k != "sources" else "the hot modules' sources"
              for k, v in now.items() if build.get(k) != v]
    return ", ".join(differ) or None


def check_states(flows: dict) -> None:
    """Every carried state unpickled once (then dropped), so that one that cannot be read back is
    found here, before the run writes anything: :class:`CannotContinue` naming the flow."""
    for flow in sorted(flows):
        try:
            _StateUnpickler(io.BytesIO(flows[flow]), _AnyShared()).load()
        except Exception as e:
            raise CannotContinue(f"the carried state of {flow} could not be read ({type(e).__name__}: {e})") from None


class _AnyShared(dict):
    """The runner's shared objects, when only checking that states unpickle: None for each."""

    def __missing__(self, key):
        return None


def _local_dir(directory: str) -> str:
    u = urlparse(directory)
    if u.scheme in ("", "file"):
        return u.path if u.scheme else directory
    raise InputError("format", f"{directory}: a checkpoint is kept on the local file system only")


def _write(d: str, name: str, data: bytes) -> str:
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(d, name))
    return name


def flow_digest(flow: str) -> int:
    return int.from_bytes(hashlib.blake2b(flow.encode("utf-8"), digest_size=8).digest(), "big")


def run_options(*, ports, idle_timeout, frames, messages, keylog: str | None) -> dict:
    """The options a continued run must share with the runs before it (the rows depend on them;
    the split size does not).  The key log given (not the one embedded in the files) by its
    digest."""
    return {"ports": tuple(sorted(int(p) for p in ports or ())), "idle_timeout": float(idle_timeout),
            "frames": bool(frames), "messages": bool(messages),
            "keylog": hashlib.sha256(keylog.encode("utf-8")).hexdigest() if keylog else None}


def merge_closed(old: Iterable[int], flows: Iterable[str]) -> list:
    """The sorted digests of ``old`` and of ``flows``."""
    return sorted(set(old).union(flow_digest(f) for f in flows))


# --------------------------------------------------------------------------- a flow's state


def carried(st: dict) -> bool:
    """Whether a flow's rows could still change with later records of the set: its Dissector still
    tracks a TCP connection, an AMQP connection or a probe, or its Analyzer has a connection whose
    transport has not ended, an open stall, or a connection whose idle time-out check waits for
    the capture's end."""
    d, an = st["d"], st["an"]
    if d.tcp.has_open_connections or d.connections or d._probes:
        return True
    for c in an.connections.values():
        if c.transport_time is None:
            return True
    return any(s.end is None for s in an.stalls)


class _StatePickler(pickle.Pickler):
    """Pickles a flow's state without the objects its runner shares between flows (the key log,
    the capture's clock watch): by name, given back by the runner that loads it."""

    def __init__(self, f, shared: dict):
        super().__init__(f, 5)
        self._ids = {id(v): k for k, v in shared.items() if v is not None}

    def persistent_id(self, obj):
        return self._ids.get(id(obj))


class _StateUnpickler(pickle.Unpickler):
    def __init__(self, f, shared: dict):
        super().__init__(f)
        self._shared = shared

    def persistent_load(self, pid):
        return self._shared[pid]


class StateNotSaved(Exception):
    """A flow's state that cannot be kept for a later run (``reason``: what the object that
    refused said, e.g. a message digest in progress)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def dump_state(st: dict, shared: dict) -> bytes:
    """A flow's stage-2 state (FlowRunner's ``st``) pickled, the runner's ``shared`` objects
    (name -> object) left out by name.  Raises :class:`StateNotSaved` when an object of the
    state refuses to be pickled (pickle.PicklingError: the dissector's objects say so)."""
    buf = io.BytesIO()
    try:
        _StatePickler(buf, shared).dump(st)
    except pickle.PicklingError as e:
        raise StateNotSaved(str(e)) from None
    return buf.getvalue()


def load_state(blob: bytes, shared: dict) -> dict:
    """:func:`dump_state` read back, the ``shared`` objects those of the runner loading it; the
    stamps' object ids (FlowRunner._stamp keys by identity) made again for the new objects."""
    st = _StateUnpickler(io.BytesIO(blob), shared).load()
    for seen in st["stamps"].values():
        seen[1] = {id(x): (k1, x) for k1, x in seen[1].values()}
    return st
