"""The hot modules built without Cython's generated pickling (``NOT_PICKLED`` in dissector/_hot.py,
``auto_pickle=False`` set per module by setup.py): nothing the archive pickles may come from them,
neither the checkpoint's carried states nor what Spark ships between the driver and its executors.

Oracles: the opcodes of a real checkpoint's pickles (the module of every GLOBAL / STACK_GLOBAL,
counted with ``pickletools.genops``), and a guard installed in every Python process of an ``archive`` run (the
driver and Spark's workers, through ``sitecustomize``) that records and refuses any pickling of an
object of one of those modules' classes.  In a compiled build the modules' cdef classes have no
``__reduce_cython__`` (the directive took effect)."""

from __future__ import annotations

import glob
import importlib
import inspect
import os
import pickle
import pickletools
import subprocess
import sys

import pytest

from archive_sets import ROOT, first_time, rotated_set  # noqa: E402
from sparkneeds import require_spark  # noqa: E402

from amqp_dissect import compiled_modules  # noqa: E402
from amqp_dissect._hot import HOT_MODULES, NOT_PICKLED  # noqa: E402

# What the checkpoint does pickle (docs/performance.md, the audit of auto_pickle): a state without
# the dissector's and the analyzer's classes would mean the walk below saw nothing.
MUST_SEE = ("amqp_dissect.dissect", "amqp_dissect.results.analytics")


def _own_classes(module_name: str) -> list:
    module = importlib.import_module(module_name)
    return [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module_name]


def test_the_unpickled_modules_are_hot_modules_that_define_classes():
    assert NOT_PICKLED, "nothing is built without pickling: this file would test nothing"
    for name in NOT_PICKLED:
        assert name in HOT_MODULES
        assert _own_classes(name), name
    assert not set(NOT_PICKLED) & set(MUST_SEE)


@pytest.mark.parametrize("name", NOT_PICKLED)
def test_a_compiled_unpickled_module_has_no_generated_pickling(name):
    """The directive reached the build: no class of the module has ``__reduce_cython__`` nor
    ``__setstate_cython__``; a module that pickles (dissect) keeps them, so the check can tell the
    two apart.  (Without them, an object whose fields Python sees through ``__slots__``, as the
    events' records, still pickles by Python's default: that the archive never pickles one is the
    guard's test, below, in either build.)"""
    if name not in compiled_modules():
        pytest.skip(f"{name} runs as Python here: no compiled build to look at")
    for cls in _own_classes(name):
        assert not hasattr(cls, "__reduce_cython__") and not hasattr(cls, "__setstate_cython__"), cls
    from amqp_dissect.dissect import Dissector

    assert hasattr(Dissector, "__reduce_cython__")


class _Recorder(pickle.Unpickler):
    """Unpickles and records the module of every global the pickle names (find_class is called
    once per GLOBAL or STACK_GLOBAL opcode); the runner's shared objects (persistent ids) as None."""

    def __init__(self, data: bytes):
        import io

        super().__init__(io.BytesIO(data))
        self.modules: list = []

    def find_class(self, module, name):
        self.modules.append(module)
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return None


def _walk(data: bytes, seen: set) -> None:
    """The modules of ``data``'s pickle and of every pickle held in it as bytes (the checkpoint's
    flows files hold each flow's state as a pickle of its own).  Each pickle's opcodes
    (pickletools.genops) must name as many globals as the unpickler was asked for."""
    recorder = _Recorder(data)
    value = recorder.load()
    ops = [op.name for op, _arg, _pos in pickletools.genops(data)]
    assert ops.count("GLOBAL") + ops.count("STACK_GLOBAL") == len(recorder.modules)
    seen |= set(recorder.modules)
    for v in _values(value):
        if isinstance(v, bytes) and v[:1] == b"\x80":
            _walk(v, seen)


def _values(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _values(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _values(v)
    else:
        yield obj


_GUARD = '''
import copyreg, importlib, inspect, os
_LOG = os.environ["AMQP_DISSECT_TEST_PICKLE_LOG"]
with open(_LOG + ".loaded", "a") as _f:
    _f.write(f"{os.getpid()}\\n")
def _refuse(obj):
    with open(_LOG, "a") as f:
        f.write(f"{os.getpid()} {type(obj).__module__}.{type(obj).__qualname__}\\n")
    raise RuntimeError(f"an object of {type(obj).__module__}.{type(obj).__qualname__} was pickled")
for _name in os.environ["AMQP_DISSECT_TEST_NOT_PICKLED"].split(","):
    _m = importlib.import_module(_name)
    for _, _c in inspect.getmembers(_m, inspect.isclass):
        if _c.__module__ == _name:
            copyreg.pickle(_c, _refuse)
'''


def _archive(paths: list, out: str, guard_dir: str, log: str) -> None:
    tmp = os.path.join(os.path.dirname(out), "tmp")
    os.makedirs(tmp, exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "TMPDIR": tmp,
           "PYTHONPATH": os.pathsep.join(filter(None, [guard_dir, os.environ.get("PYTHONPATH")])),
           "AMQP_DISSECT_TEST_PICKLE_LOG": log, "AMQP_DISSECT_TEST_NOT_PICKLED": ",".join(NOT_PICKLED)}
    got = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "archive", "--master", "local[2]",
                          "--partitions", "3", *paths, "--out", out], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    assert got.returncode == 0, got.stderr[-3000:]


def test_nothing_the_archive_pickles_comes_from_the_unpickled_modules(tmp_path):
    """Two runs of ``archive`` (the first files of a rotated set, then the rest, continued from the
    first run's checkpoint) with the guard in every process, and the first run's checkpoint walked
    opcode by opcode."""
    require_spark()
    (tmp_path / "rotated").mkdir()
    files = sorted(rotated_set(tmp_path / "rotated"), key=first_time)
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(_GUARD)
    log = str(tmp_path / "pickled.log")
    out = str(tmp_path / "archive")
    _archive(files[:4], out, str(guard_dir), log)
    # the guard was in every process: the driver's and Spark's Python workers (a daemon of its own)
    with open(log + ".loaded") as f:
        assert len(set(f.read().split())) >= 2
    # (the archive keeps it under _archive/, in the run's version: pipelines/spark/archive_dir.py)
    pickles = sorted(glob.glob(os.path.join(out, "**", "checkpoint", "*.pkl"), recursive=True))
    assert any(os.path.basename(p).startswith("flows-") for p in pickles), pickles
    seen: set = set()
    for path in pickles:
        with open(path, "rb") as f:
            _walk(f.read(), seen)
    assert set(MUST_SEE) <= seen, sorted(seen)
    assert not seen & set(NOT_PICKLED), sorted(seen & set(NOT_PICKLED))
    _archive(files, out, str(guard_dir), log)  # (every file: the run reads only the new ones)
    assert not os.path.exists(log) or open(log).read() == ""


def test_the_guard_refuses_an_object_of_an_unpickled_module(tmp_path):
    """The guard itself, in a process of its own: pickling a CaptureRecord (events) fails and is
    recorded, pickling a Dissector (dissect: not in the list) does not."""
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(_GUARD)
    log = str(tmp_path / "pickled.log")
    name = NOT_PICKLED[0]
    code = ("import importlib, inspect, pickle, sys\n"
            "from amqp_dissect.dissect import Dissector\n"
            "pickle.dumps(Dissector(), 5)\n"
            f"m = importlib.import_module({name!r})\n"
            "cls = [c for _, c in inspect.getmembers(m, inspect.isclass) if c.__module__ == m.__name__][0]\n"
            "obj = cls.__new__(cls)\n"
            "try:\n    pickle.dumps(obj, 5)\nexcept RuntimeError:\n    sys.exit(3)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(guard_dir), os.environ.get("PYTHONPATH")])),
           "AMQP_DISSECT_TEST_PICKLE_LOG": log, "AMQP_DISSECT_TEST_NOT_PICKLED": ",".join(NOT_PICKLED)}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert got.returncode == 3, got.stderr[-3000:]
    assert f" {name}." in open(log).read()
