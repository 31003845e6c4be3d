"""The output directory of ``amqp-dissect archive --out DIR`` as an archive that grows run by run
(issue 43): its layout, its manifest, the identity of its input files and the atomic publication
of a run.  Light (no Spark, no Arrow): ``--dry-run`` plans without starting Spark.

Layout (a local file system)::

    DIR/TABLE -> _archive/current/TABLE          (a symbolic link per table and summary, made once)
    DIR/_archive/current -> versions/RUN         (the one link a run's publication swaps)
    DIR/_archive/versions/RUN/TABLE/date=YYYY-MM-DD/part-RUN-R.parquet
    DIR/_archive/versions/RUN/SUMMARY/part-00000.parquet
    DIR/_archive/versions/RUN/manifest.json      (the committed runs, the input files, the options)
    DIR/_archive/versions/RUN/checkpoint/        (the flows open at the end of the run, when kept)
    DIR/_archive/staging/RUN/                    (the run being made; removed once published)

A run writes everything aside (``staging/RUN``), moves it to ``versions/RUN`` and publishes it by
replacing the link ``current`` (one ``rename``: atomic on a POSIX file system), so that a reader of
``DIR/TABLE`` sees the last published run whole, and a run killed at any point leaves ``DIR`` as
the last published run left it (what a killed run left aside is removed by the next run).  The
files a run keeps of the run before it are hard links (no copy).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
from dataclasses import dataclass, field

META = "_archive"
MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint"
FORMAT = 1  # the manifest's layout version
HASH_BYTES = 64 << 10  # a file's identity hashes its first and its last HASH_BYTES bytes
#: the partition of a row whose time is unknown, and its connection's too (Hive's name for a null
#: partition value)
NULL_DATE = "__HIVE_DEFAULT_PARTITION__"
#: per table, the columns that say when its row happened, first non-null one wins: the row's
#: partition is that time's day in UTC; a row with none of them (a link only inferred after a
#: loss) goes to the day its connection began (documented in docs/archives-spark.md)
DATE_COLUMNS = {
    "connections": ("first_time",),
    "sessions": ("begin_time", "end_time"),
    "links": ("attach_time", "attached_time", "detach_time"),
    "deliveries": ("first_time",),
    "stalls": ("start",),
    "transactions": ("declare_time", "discharge_time"),
    "violations": ("time",),
    "errors": ("time",),
    "frames": ("time",),
}
#: why a run is a full run when the last one kept no checkpoint of the flows open at its end
NO_CHECKPOINT = "the last run kept no checkpoint of its open flows: every file analysed again"
#: the options whose change makes the committed rows wrong: a run with other values needs --full
COMPARED_OPTIONS = ("ports", "frames", "messages", "window", "idle_timeout")
#: a test-only environment variable: the name of the step at which the process kills itself
#: (SIGKILL), to test that a run killed there leaves the archive as the last published run
KILL_AT = "AMQP_DISSECT_ARCHIVE_KILL_AT"


def reach(step: str) -> None:
    """A step of a run is done (the test hook :data:`KILL_AT` kills the process here)."""
    if os.environ.get(KILL_AT) == step:
        os.kill(os.getpid(), signal.SIGKILL)


class Refused(Exception):
    """The run cannot go on with this archive (a file changed or vanished, other options): one line."""


@dataclass(frozen=True)
class FileId:
    """What says that an input file is the one a run read: its path, size, modification time
    (nanoseconds) and a hash of its first and last :data:`HASH_BYTES` bytes."""

    path: str
    size: int
    mtime_ns: int
    digest: str

    def as_dict(self) -> dict:
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns, "digest": self.digest}

    def differs(self, other: "FileId") -> str | None:
        """What differs from ``other`` (the same path), or None."""
        for name in ("size", "mtime_ns", "digest"):
            if getattr(self, name) != getattr(other, name):
                return {"size": "size", "mtime_ns": "modification time", "digest": "content"}[name]
        return None


def identify(path: str) -> FileId:
    """The :class:`FileId` of the file ``path`` now."""
    path = os.path.abspath(path)
    st = os.stat(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(HASH_BYTES))
        if st.st_size > HASH_BYTES:
            f.seek(max(HASH_BYTES, st.st_size - HASH_BYTES))
            h.update(f.read(HASH_BYTES))
    return FileId(path, st.st_size, st.st_mtime_ns, h.hexdigest())


def _file_of(d: dict) -> FileId:
    return FileId(d["path"], d["size"], d["mtime_ns"], d["digest"])


@dataclass
class Plan:
    """What a run finds: its input files by kind against the committed manifest, and what it does."""

    new: list = field(default_factory=list)  # FileId of the files no committed run read
    unchanged: list = field(default_factory=list)  # FileId
    changed: list = field(default_factory=list)  # (path, what differs)
    vanished: list = field(default_factory=list)  # paths a committed run read, not among the inputs now
    options_changed: list = field(default_factory=list)  # (option, committed value, value now)
    manifest: dict | None = None  # the committed manifest (None: no run yet)
    remote: list = field(default_factory=list)  # input URIs on a Hadoop file system (no identity: a full run)
    all_files: list = field(default_factory=list)  # FileId of every local input now, in the order given
    full: bool = False  # the run recomputes from nothing
    why_full: str | None = None  # why (None: not a full run)

    def refusal(self) -> str | None:
        """The one line that refuses the run, or None (a full run is refused nothing)."""
        if self.full and (self.why_full == "--full" or self.remote):  # (reads every file as it is now)
            return None
        if self.changed:
            path, what = self.changed[0]
            more = f" (and {len(self.changed) - 1} more)" if len(self.changed) > 1 else ""
            return (f"{path}: changed since the archive's last run ({what} differs){more}: "
                    "give --full to recompute from nothing")
        if self.vanished:
            more = f" (and {len(self.vanished) - 1} more)" if len(self.vanished) > 1 else ""
            return (f"{self.vanished[0]}: read by the archive's last run, not among the inputs now{more}: "
                    "give every file of the archive, or --full to recompute from these")
        if self.options_changed:
            said = ", ".join(f"{k} {old!r} -> {new!r}" for k, old, new in self.options_changed)
            return f"options differ from the archive's last run ({said}): give --full to recompute with them"
        return None

    @property
    def files(self) -> list:
        """The input files the archive holds after the run (FileId): every one now for a full
        run, else the unchanged then the new."""
        return list(self.all_files) if self.full else self.unchanged + self.new

    @property
    def paths(self) -> list:
        """What the analysis of a full run reads: every local file, then the remote URIs."""
        return [f.path for f in self.files] + list(self.remote)

    @property
    def nothing_new(self) -> bool:
        return self.manifest is not None and not self.full and not self.new

    def lines(self) -> list[str]:
        """What the plan found and does, as the command prints it."""
        out = [f"files: {len(self.new)} new, {len(self.unchanged)} unchanged, {len(self.changed)} changed, "
               f"{len(self.vanished)} vanished"]
        out += [f"  changed: {p} ({what} differs)" for p, what in self.changed]
        out += [f"  vanished: {p}" for p in self.vanished]
        out += [f"  remote: {uri}" for uri in self.remote]
        if self.refusal():
            return out
        if self.nothing_new:
            out.append(f"run: nothing new since run {last_run(self.manifest)}: the archive stays as it is")
        elif self.full:
            out.append(f"run: full, over all {len(self.files)} file(s) ({self.why_full})")
        else:
            out.append(f"run: incremental, the {len(self.new)} new file(s) from the checkpoint of run "
                       f"{last_run(self.manifest)}")
        return out


def last_run(manifest: dict | None) -> int:
    """The number of the last committed run (0: none)."""
    return manifest["runs"][-1]["run"] if manifest and manifest.get("runs") else 0


def plan_run(archive: "ArchiveDir", paths: list, options: dict, full: bool, remote=()) -> Plan:
    """The :class:`Plan` of a run over the local capture files ``paths`` and the input URIs
    ``remote`` (the whole set) with ``options`` (those of :data:`COMPARED_OPTIONS`) into
    ``archive``.  Inputs on a Hadoop file system (now or in the committed run) make a full run."""
    try:
        manifest = archive.manifest()
    except Refused:
        if not full:
            raise
        manifest = None  # (--full: a damaged archive is made again from nothing)
    plan = Plan(manifest=manifest, remote=list(remote))
    now = {os.path.abspath(p): identify(p) for p in paths}
    plan.all_files = list(now.values())
    if manifest is None:
        plan.new = list(now.values())
    else:
        _classify(plan, now, manifest, options)
    why = ("--full" if full else "the archive's first run" if manifest is None else
           "inputs on a Hadoop file system: every run reads all" if remote or manifest.get("remote") else
           NO_CHECKPOINT if plan.new and not manifest.get("checkpoint") else None)
    if not why and plan.new and manifest is not None:
        why = _checkpoint_refusal(archive, manifest["checkpoint"])
    if why:
        plan.full, plan.why_full = True, why
    return plan


def _checkpoint_refusal(archive: "ArchiveDir", where: str) -> str | None:
    """Why the committed run's checkpoint cannot be continued from (another format or build, facts
    that do not read), from its facts alone; None when they allow it (its carried states are
    checked when the run loads them)."""
    from .checkpoint import CannotContinue, read_facts
    from .inputs import InputError

    try:
        read_facts(os.path.join(archive.current_version(), where))
    except (CannotContinue, InputError) as e:
        return f"cannot continue from the checkpoint: {e}"
    return None


def _classify(plan: Plan, now: dict, manifest: dict, options: dict) -> None:
    """The files of ``now`` (path -> FileId) new, unchanged or changed against ``manifest``, the
    files it names that are not among them, the options that differ."""
    before = {f["path"]: _file_of(f) for f in manifest["files"]}
    for path, fid in now.items():
        if path not in before:
            plan.new.append(fid)
            continue
        what = fid.differs(before[path])
        if what:
            plan.changed.append((path, what))
        else:
            plan.unchanged.append(fid)
    plan.vanished = sorted(p for p in before if p not in now)
    committed = manifest.get("options", {})
    plan.options_changed = [(k, committed.get(k), options.get(k)) for k in COMPARED_OPTIONS
                            if _option(committed.get(k)) != _option(options.get(k))]


def _option(value):
    """An option's value as the manifest keeps it (JSON: lists, not tuples; ports in order)."""
    if isinstance(value, (list, tuple)):
        return sorted(value)
    return value


def option_values(*, ports, frames, window, idle_timeout, messages=False) -> dict:
    """The options a manifest records (:data:`COMPARED_OPTIONS`) as JSON values."""
    return {"ports": sorted(int(p) for p in ports or ()), "frames": bool(frames), "messages": bool(messages),
            "window": float(window), "idle_timeout": float(idle_timeout)}


class ArchiveDir:
    """The archive directory ``root`` (a local path): its committed manifest, the staging of a run
    and its publication (see the module's docstring)."""

    def __init__(self, root: str):
        self.root = os.path.abspath(root)
        self.meta = os.path.join(self.root, META)
        self.current = os.path.join(self.meta, "current")
        self.versions = os.path.join(self.meta, "versions")
        self.staging_root = os.path.join(self.meta, "staging")
        self._lock = None

    # ---- reading

    def current_version(self) -> str | None:
        """The directory of the last published run, or None."""
        if not os.path.islink(self.current):
            return None
        return os.path.join(self.meta, os.readlink(self.current))

    def manifest(self) -> dict | None:
        """The committed manifest, or None (no run published yet)."""
        v = self.current_version()
        if v is None:
            return None
        try:
            with open(os.path.join(v, MANIFEST), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError) as e:  # (a directory damaged by hand: never what a run leaves)
            raise Refused(f"{self.root}: the archive's manifest cannot be read ({e}): remove {self.meta} "
                          "and its tables to start again") from None

    def next_run(self, manifest: dict | None) -> int:
        """The number of the next run: past the last committed one and every version kept."""
        kept = [int(n.split("-")[1]) for n in (os.listdir(self.versions) if os.path.isdir(self.versions) else ())
                if n.startswith("run-") and n.split("-")[1].isdigit()]
        return max([last_run(manifest)] + kept) + 1

    def version_of(self, run: int) -> str:
        return os.path.join(self.versions, run_name(run))

    # ---- a run

    def lock(self) -> None:
        """Hold the archive for this process (another run into it waits: a Refused if it cannot)."""
        os.makedirs(self.meta, exist_ok=True)
        self._lock = open(os.path.join(self.meta, "lock"), "a")  # (not "w": the archive untouched)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise Refused(f"{self.root}: another run is writing this archive") from None

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def clean_stale(self) -> None:
        """Remove what runs that did not publish left (staging, versions not current)."""
        shutil.rmtree(self.staging_root, ignore_errors=True)
        current = self.current_version()
        if os.path.isdir(self.versions):
            for name in os.listdir(self.versions):
                path = os.path.join(self.versions, name)
                if current is None or os.path.realpath(path) != os.path.realpath(current):
                    shutil.rmtree(path, ignore_errors=True)
        for name in os.listdir(self.meta):
            if name.startswith(".current."):
                os.unlink(os.path.join(self.meta, name))

    def staging(self, run: int) -> str:
        """The empty staging directory of run ``run``."""
        path = os.path.join(self.staging_root, run_name(run))
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def publish(self, made: str, run: int, manifest: dict, names: list) -> str:
        """Publish the version directory ``made`` (in the staging area) as run ``run``: its
        manifest written, moved to ``versions/``, the tables' links made, then ``current``
        swapped (the commit); the versions before it and the staging area removed.  Returns the
        published version's directory."""
        _write_json(os.path.join(made, MANIFEST), manifest)
        _sync_tree(made)
        version = self.version_of(run)
        os.makedirs(self.versions, exist_ok=True)
        os.rename(made, version)
        reach("versioned")
        self._table_links(names)
        tmp = os.path.join(self.meta, f".current.{os.getpid()}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.join("versions", run_name(run)), tmp)
        os.replace(tmp, self.current)  # the commit
        _sync_dir(self.meta)
        reach("published")
        self.clean_stale()
        return version

    def _table_links(self, names: list) -> None:
        """``DIR/NAME -> _archive/current/NAME`` for every table and summary (a directory an
        earlier layout left there is replaced)."""
        for name in names:
            link = os.path.join(self.root, name)
            target = os.path.join(META, "current", name)
            if os.path.islink(link):
                if os.readlink(link) == target:
                    continue
                os.unlink(link)
            elif os.path.isdir(link):  # (a table of the flat layout: no manifest said it)
                shutil.rmtree(link)
            tmp = link + f".{os.getpid()}.link"
            os.symlink(target, tmp)
            os.replace(tmp, link)


def run_name(run: int) -> str:
    return f"run-{run:06d}"


def manifest_of(plan: Plan, run: int, options: dict, stats: dict, checkpoint: str | None) -> dict:
    """The manifest of run ``run`` (the committed runs before it, every file read so far)."""
    runs = list((plan.manifest or {}).get("runs", []))
    runs.append({"run": run, "full": plan.full, "new_files": [f.path for f in plan.new], **stats})
    return {"format": FORMAT, "runs": runs, "files": [f.as_dict() for f in plan.files], "remote": plan.remote,
            "options": options, "checkpoint": checkpoint}


def _write_json(path: str, value: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(root: str) -> None:
    """The files and directories under ``root`` on disk (a publication survives a power cut).  A
    file with other links is a file kept from the version before (a hard link: keep_final_files),
    on disk since that version's publication: not synced again (a run costs its own files, not
    the archive's)."""
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            if os.lstat(path).st_nlink > 1:
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _sync_dir(d)


# --------------------------------------------------------------------------- readers


def published_folder(root: str, name: str) -> str:
    """The folder of table or summary ``name`` in the archive ``root``'s published run, resolved
    once (a reader that lists it reads one run whole, even while the next one is published)."""
    archive = ArchiveDir(root)
    version = archive.current_version()
    if version is None:
        raise FileNotFoundError(f"{root}: no archive run published here (no {META}/current)")
    path = os.path.join(os.path.realpath(version), name)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{root}: the archive has no table {name}")
    return path


def archive_dataset(root: str, name: str):
    """Table or summary ``name`` of the archive ``root`` as a ``pyarrow.dataset.Dataset`` (a
    table's ``date`` column from its folders, a ``date32``; null for the rows of unknown time).
    Filters on ``date`` read only those days' folders::

        import pyarrow.dataset as ds
        d = archive_dataset("DIR", "deliveries")
        d.to_table(filter=ds.field("date") == datetime.date(2026, 11, 22)).to_pandas()
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    folder = published_folder(root, name)
    partitioning = ds.partitioning(pa.schema([("date", pa.date32())]), flavor="hive")
    return ds.dataset(folder, format="parquet", partitioning=partitioning)


def read_archive_pandas(root: str, name: str, columns=None, filter=None):
    """Table or summary ``name`` of the archive ``root`` as a pandas DataFrame (``columns``: the
    columns wanted; ``filter``: a ``pyarrow.dataset`` expression, e.g. on ``date``)."""
    return archive_dataset(root, name).to_table(columns=columns, filter=filter).to_pandas()
