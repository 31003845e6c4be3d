"""The compiled hot loop and its pure-Python twin.

(a) The hot modules (dissector/_hot.py) are compiled when built with a compiler, and
    AMQP_DISSECT_PURE_PYTHON=1 loads their .py sources instead.  Under CI=true the
    build must have compiled every one of them, so a silently broken build fails CI.
(b) Both modes print byte-identical output for every command on every sample.
"""

from __future__ import annotations

import glob
import importlib
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest

import amqp_dissect as dissector
from amqp_dissect._hot import HOT_MODULES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "samples", "*.pcap")))
IN_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")
EXT = tuple(importlib.machinery.EXTENSION_SUFFIXES)
# Every test but the first sets the mode of what it runs itself (a child's environment, a build in a
# copy of the tree, the finder with the variable removed), so it runs the same in CI's two passes:
# marked no_twin, it runs in the compiled pass only (.ci/run).  The first checks the mode of the
# process the suite runs in, so it runs in both.
NO_TWIN = pytest.mark.no_twin
COMMANDS = {
    "frames": ["frames"],
    "frames-V": ["frames", "-V"],
    "frames-jsonl": ["frames", "--format", "jsonl"],
    "report": ["report"],
    "report-json": ["report", "--format", "json"],
    "deliveries-csv": ["deliveries", "--format", "csv"],
}


def _env(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != dissector.PURE_PYTHON_ENV}
    if pure:
        env[dissector.PURE_PYTHON_ENV] = "1"
    return env


def _python(code: str, pure: bool, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=_env(pure),
                          capture_output=True, timeout=900)


_PROBE = """
import importlib, json
import amqp_dissect as dissector
from amqp_dissect._hot import HOT_MODULES
print(json.dumps({m: importlib.import_module(m).__file__ for m in HOT_MODULES}))
"""


def _probe(pure: bool) -> dict:
    proc = _python(_PROBE, pure)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- (a) compiled or not


def _fresh_extension_beside(source: str) -> bool:
    stem = source[: -len(".py")]
    return any(os.path.isfile(stem + s) and os.stat(stem + s).st_mtime >= os.stat(source).st_mtime for s in EXT)


def test_hot_modules_in_this_process_follow_the_mode():
    for name in HOT_MODULES:
        mod = importlib.import_module(name)
        source = os.path.join(os.path.dirname(mod.__file__), name.rpartition(".")[2] + ".py")
        assert os.path.isfile(source), f"{name}: the pure-Python twin {source} is missing"
        if dissector.pure_python_forced():
            assert mod.__file__.endswith(".py"), f"{name} is compiled under {dissector.PURE_PYTHON_ENV}=1"
        elif IN_CI:
            assert mod.__file__.endswith(EXT), f"{name} is not compiled: the Cython build failed in CI"
        else:
            # outside CI a build is optional, but what is on disk decides what runs
            assert mod.__file__.endswith(EXT) == _fresh_extension_beside(source), mod.__file__


@NO_TWIN
def test_the_environment_variable_forces_every_hot_module_to_python():
    files = _probe(pure=True)
    assert sorted(files) == sorted(HOT_MODULES)
    assert all(f.endswith(".py") for f in files.values()), files
    version = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "--version"], cwd=ROOT, env=_env(True),
                             capture_output=True, text=True)
    assert version.returncode == 0
    assert version.stdout == f"amqp-dissect {dissector.__version__}, pure Python\n"


@NO_TWIN
def test_without_the_variable_the_compiled_modules_run():
    files = _probe(pure=False)
    compiled = [m for m, f in files.items() if f.endswith(EXT)]
    if IN_CI:
        assert compiled == list(HOT_MODULES), files
    version = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "--version"], cwd=ROOT, env=_env(False),
                             capture_output=True, text=True)
    assert version.returncode == 0
    expected = f"compiled ({len(compiled)} modules)" if compiled else "pure Python"
    assert version.stdout == f"amqp-dissect {dissector.__version__}, {expected}\n"


def _fake_tree(tmp_path, with_setup: bool, extension_newer: bool):
    root = tmp_path / "proj"
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    source = pkg / "hot.py"
    extension = pkg / ("hot" + EXT[0])
    source.write_text("X = 1\n")
    extension.write_bytes(b"not really an extension module")
    older, newer = 1_000_000_000, 1_000_000_100
    os.utime(source, (older, newer if not extension_newer else older))
    os.utime(extension, (older, older if not extension_newer else newer))
    if with_setup:
        (root / "setup.py").write_text("")
    return str(pkg), str(source)


@NO_TWIN
def test_a_stale_extension_in_a_source_checkout_yields_to_its_edited_source(tmp_path, monkeypatch):
    monkeypatch.delenv(dissector.PURE_PYTHON_ENV, raising=False)
    finder = dissector._HotModuleFinder(["pkg.hot"])
    pkg, source = _fake_tree(tmp_path, with_setup=True, extension_newer=False)
    with pytest.warns(dissector.StaleCompiledModuleWarning):
        spec = finder.find_spec("pkg.hot", [pkg])
    assert spec.origin == source
    assert finder.find_spec("pkg.other", [pkg]) is None


@NO_TWIN
def test_one_stale_extension_sends_every_hot_module_to_its_source(tmp_path, monkeypatch):
    """A compiled module is built against the others' declarations (the dissector's against the
    reader's gate class, say): one edited module loaded from its source beside a compiled one
    built against the old declarations would fail to import, so then all of them run their
    source.  The fresh module asked for first still goes to its source, with one warning that
    names the stale one; a module that is not hot is left alone."""
    monkeypatch.delenv(dissector.PURE_PYTHON_ENV, raising=False)
    pkg, stale_source = _fake_tree(tmp_path, with_setup=True, extension_newer=False)
    sub = os.path.join(pkg, "sub")
    os.mkdir(sub)
    open(os.path.join(sub, "__init__.py"), "w").close()
    fresh_source = os.path.join(sub, "fresh.py")
    with open(fresh_source, "w") as f:
        f.write("Y = 2\n")
    with open(os.path.join(sub, "fresh" + EXT[0]), "wb") as f:
        f.write(b"not really an extension module")
    os.utime(fresh_source, (1_000_000_000, 1_000_000_000))
    finder = dissector._HotModuleFinder(["pkg.hot", "pkg.sub.fresh"])
    with pytest.warns(dissector.StaleCompiledModuleWarning) as caught:
        assert finder.find_spec("pkg.sub.fresh", [sub]).origin == fresh_source
    assert len(caught) == 1 and "hot" + EXT[0] in str(caught[0].message)
    assert "fresh" + EXT[0] not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert finder.find_spec("pkg.hot", [pkg]).origin == stale_source
    assert finder.find_spec("pkg.other", [pkg]) is None
    # with both fresh, both stay compiled
    os.utime(stale_source, (1_000_000_000, 1_000_000_000))
    finder = dissector._HotModuleFinder(["pkg.hot", "pkg.sub.fresh"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert finder.find_spec("pkg.sub.fresh", [sub]) is None
        assert finder.find_spec("pkg.hot", [pkg]) is None


@NO_TWIN
def test_a_fresh_extension_or_an_installed_one_is_left_to_the_normal_import(tmp_path, monkeypatch):
    monkeypatch.delenv(dissector.PURE_PYTHON_ENV, raising=False)
    finder = dissector._HotModuleFinder(["pkg.hot"])
    fresh, _ = _fake_tree(tmp_path / "a", with_setup=True, extension_newer=True)
    installed, _ = _fake_tree(tmp_path / "b", with_setup=False, extension_newer=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert finder.find_spec("pkg.hot", [fresh]) is None
        assert finder.find_spec("pkg.hot", [installed]) is None
    monkeypatch.setenv(dissector.PURE_PYTHON_ENV, "1")
    assert finder.find_spec("pkg.hot", [fresh]).origin.endswith("hot.py")


@NO_TWIN
def test_the_cython_shim_only_defines_names_cython_has():
    import Cython.Shadow as shadow

    from amqp_dissect import _cython_shim

    public = [n for n in vars(_cython_shim) if not n.startswith("_")]
    assert public
    assert [n for n in public if not hasattr(shadow, n)] == []
    assert _cython_shim.compiled is False


@NO_TWIN
def test_the_hot_modules_run_without_cython_installed():
    # `import cython` fails: the modules must fall back to dissector/_cython_shim.py
    code = ("import sys; sys.modules['cython'] = None; sys.modules['Cython'] = None\n"
            "import runpy; sys.argv = ['amqp-dissect', 'frames', sys.argv[1]]\n"
            "runpy.run_module('amqp_dissect.cli', run_name='__main__')")
    sample = os.path.join(ROOT, "samples", "outcomes.pcap")
    without = _python(code, True, sample)
    normal = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", "frames", sample], cwd=ROOT, env=_env(True),
                            capture_output=True)
    assert without.returncode == normal.returncode == 0, without.stderr.decode()
    assert without.stdout == normal.stdout and normal.stdout


def _setup_namespace(monkeypatch):
    """setup.py's globals and the keyword arguments it passes to setup(), without building."""
    import runpy

    import setuptools

    seen = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: seen.update(kwargs))
    namespace = runpy.run_path(os.path.join(ROOT, "setup.py"), run_name="amqp_dissect_setup")
    return namespace, seen


@NO_TWIN
def test_each_compiled_module_gets_its_measured_gcc_level(monkeypatch):
    """The hot list's FULLY_OPTIMIZED modules get HOT_LEVEL, every other one COLD_LEVEL, last on
    gcc's line (the last -O wins: Python's own CFLAGS come first and say -O3)."""
    import runpy

    hot = runpy.run_path(os.path.join(ROOT, "dissector", "_hot.py"))
    assert set(hot["FULLY_OPTIMIZED"]) < set(HOT_MODULES)
    assert len(set(hot["FULLY_OPTIMIZED"])) == len(hot["FULLY_OPTIMIZED"])
    _namespace, seen = _setup_namespace(monkeypatch)
    levels = {e.name: [a for a in e.extra_compile_args if a.startswith("-O")] for e in seen["ext_modules"]}
    assert sorted(levels) == sorted(HOT_MODULES)
    if sys.platform == "win32":
        return
    for name, args in levels.items():
        assert args == [hot["HOT_LEVEL"] if name in hot["FULLY_OPTIMIZED"] else hot["COLD_LEVEL"]], name
    # the shared utility module (added by the build command, ahead of them) gets SHARED_LEVEL
    assert hot["SHARED_UTILITY"] not in HOT_MODULES and set(hot["NOT_SHARED"]) <= set(HOT_MODULES)
    assert _namespace["_level"](hot["SHARED_UTILITY"]) == [hot["SHARED_LEVEL"]]


@NO_TWIN
def test_a_module_taken_off_the_hot_list_loses_its_old_build(tmp_path, monkeypatch):
    """An extension module left from an older build beside a .py that is no longer compiled would
    be imported instead of the .py (and the hot-module finder looks at the listed ones only)."""
    namespace, _seen = _setup_namespace(monkeypatch)
    remove = namespace["_remove_retired_extensions"]
    root = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "dissector"), root / "dissector",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    shutil.copy2(os.path.join(ROOT, "pyproject.toml"), root / "pyproject.toml")
    for folder in ("pipelines", "cli"):
        (root / folder).mkdir()
    listed = root / "dissector" / "amqp" / ("scan" + EXT[0])
    retired = root / "dissector" / "model" / ("steps" + EXT[0])
    retired_c = root / "dissector" / "model" / "steps.c"
    no_twin = root / "dissector" / "model" / ("helper" + EXT[0])
    for path in (listed, retired, retired_c, no_twin):
        path.write_bytes(b"old build")
    assert "amqp_dissect.amqp.scan" in HOT_MODULES and "amqp_dissect.model.steps" not in HOT_MODULES
    monkeypatch.setitem(remove.__globals__, "HERE", str(root))
    remove()
    assert listed.exists() and no_twin.exists()
    assert not retired.exists() and not retired_c.exists()


# --------------------------------------------------------------------------- (b) identical output

# One interpreter per mode runs `python -m amqp_dissect.cli` (runpy on the cli package, exactly what
# `python -m` does) once per sample and command, with stdout and stderr redirected at
# the file-descriptor level to one file each; the exit code goes in a JSON index.
_DRIVER = r"""
import json, os, runpy, sys
out_dir, cases = sys.argv[1], json.loads(sys.argv[2])
codes = {}
for key, argv in cases.items():
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.path.join(out_dir, key + ".out"), "wb") as o, open(os.path.join(out_dir, key + ".err"), "wb") as e:
        os.dup2(o.fileno(), 1); os.dup2(e.fileno(), 2)
        sys.argv = ["amqp-dissect", *argv]
        try:
            runpy.run_module("amqp_dissect.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
    codes[key] = code
import amqp_dissect as dissector
with open(os.path.join(out_dir, "index.json"), "w") as f:
    json.dump({"codes": codes, "compiled": dissector.compiled_modules()}, f)
"""

CASES = {
    f"{os.path.basename(s)[:-5]}.{name}": [*argv, s] for s in SAMPLES for name, argv in COMMANDS.items()
}


@pytest.fixture(scope="module")
def both_modes(tmp_path_factory):
    assert SAMPLES, "samples/*.pcap are missing"
    runs = {}
    for mode in ("compiled", "pure"):
        out = tmp_path_factory.mktemp(mode)
        proc = _python(_DRIVER, mode == "pure", str(out), json.dumps(CASES))
        assert proc.returncode == 0, proc.stderr.decode()
        with open(out / "index.json") as f:
            runs[mode] = (out, json.load(f))
    return runs


@NO_TWIN
def test_the_two_runs_really_are_in_different_modes(both_modes):
    assert both_modes["pure"][1]["compiled"] == []
    compiled = both_modes["compiled"][1]["compiled"]
    if IN_CI:
        assert compiled == list(HOT_MODULES)


@NO_TWIN
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_and_pure_output_are_byte_identical(both_modes, case):
    (c_dir, c_index), (p_dir, p_index) = both_modes["compiled"], both_modes["pure"]
    assert c_index["codes"][case] == p_index["codes"][case] == 0
    for stream in ("out", "err"):
        compiled = (c_dir / f"{case}.{stream}").read_bytes()
        pure = (p_dir / f"{case}.{stream}").read_bytes()
        assert compiled == pure, f"{case}: std{stream} differs between compiled and pure Python"
    assert (c_dir / f"{case}.out").stat().st_size > 0


def _small_checkout(tmp_path, built, broken=None):
    """A copy of the sources whose hot list is ``built`` (and ``broken``), the first at HOT_LEVEL."""
    root = tmp_path / "checkout"
    shutil.copytree(os.path.join(ROOT, "dissector"), root / "dissector",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(os.path.join(ROOT, name), root / name)
    for folder in ("pipelines", "cli"):
        shutil.copytree(os.path.join(ROOT, folder), root / folder, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    listed = (*built, broken) if broken else tuple(built)
    assert set(listed) <= set(HOT_MODULES)
    hot = (root / "dissector" / "_hot.py").read_text()
    shared = hot[hot.index("# Cython's shared utility module"):]  # (its settings, kept)
    hot = hot[:hot.index("HOT_MODULES = (")] + (
        f"HOT_MODULES = {listed!r}\nFULLY_OPTIMIZED = {built[:1]!r}\n"
        "HOT_LEVEL = '-O1'\nCOLD_LEVEL = '-O0'\n") + shared.replace('SHARED_LEVEL = "-O2"', 'SHARED_LEVEL = "-O0"')
    (root / "dissector" / "_hot.py").write_text(hot)
    return root


# run as pip's build backend runs it: exec'd in a namespace named __main__ that is not the __main__
# module (so nothing of setup.py can be sent to a worker by name)
_BACKEND = ("import sys; sys.argv = ['setup.py', 'build_ext', '--inplace', '-q']\n"
            "exec(compile(open('setup.py').read(), 'setup.py', 'exec'), {'__name__': '__main__', '__file__': 'setup.py'})")


def _extensions(folder, leaf):
    return [p for p in folder.iterdir() if p.name.startswith(leaf + ".") and p.name.endswith(EXT)]


@NO_TWIN
@pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="the forked build is Linux's")
def test_when_the_shared_utility_module_fails_every_hot_module_stays_python(tmp_path):
    """The compiled modules import Cython's shared utility module: when it does not build (here its
    .c is not Cython's, so Cython leaves it and gcc stops at its #error), the build says so, warns
    once for each hot module that it stays Python (install.sh counts those lines), leaves no extension
    module of any of them, and succeeds.  Oracles: gcc's own failure and the files on disk."""
    built = ("amqp_dissect.model.serial", "amqp_dissect.model.stall_rules", "amqp_dissect.model.hooks")
    root = _small_checkout(tmp_path, built)
    (root / "dissector" / "_cyutility.c").write_text("#error not the shared utility module\n")
    out = subprocess.run([sys.executable, "-c", _BACKEND], cwd=root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "compiling amqp_dissect._cyutility failed" in out.stderr, out.stderr[-3000:]
    stays = [line for line in out.stderr.splitlines()
             if line.startswith("WARNING (amqp-dissect)") and "stays pure Python" in line]
    assert sorted(m for m in built if any(f" {m} " in f" {line} " for line in stays)) == sorted(built), stays
    assert len(stays) == len(built), stays
    assert _extensions(root / "dissector", "_cyutility") == []
    for module in built:
        assert _extensions(root / "dissector" / "model", module.rpartition(".")[2]) == [], module


@NO_TWIN
@pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="the forked build is Linux's")
def test_the_build_translates_and_compiles_module_by_module_and_one_failure_stays_python(tmp_path):
    """setup.py's build on Linux, run as pip runs it: each worker translates a module with Cython and
    then compiles it (no stage boundary between Cython and gcc).  A module Cython rejects stays Python with a
    warning, the others are built, and the build succeeds.  Oracles: the files the build leaves
    (an extension module or not, beside each .py), Cython's own rejection of a broken .pxd, and
    the import system (the built modules load as extension modules)."""
    built = ("amqp_dissect.model.serial", "amqp_dissect.model.stall_rules")
    broken = "amqp_dissect.model.hooks"
    root = _small_checkout(tmp_path, built, broken)
    (root / "dissector" / "model" / "hooks.pxd").write_text("cdef class Broken(\n")  # Cython: a syntax error
    out = subprocess.run([sys.executable, "-c", _BACKEND], cwd=root, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Cython failed on {broken}" in out.stderr
    assert "cannot build the compiled modules" not in out.stderr
    model = root / "dissector" / "model"
    assert [p.name for p in model.iterdir() if p.name.startswith("hooks") and p.name.endswith(EXT)] == []
    [shared] = _extensions(root / "dissector", "_cyutility")
    for module in built:
        [so] = _extensions(model, module.rpartition(".")[2])
        probe = subprocess.run([sys.executable, "-c", f"import importlib.util as u; s = u.spec_from_file_location("
                                f"{module!r}, {str(so)!r}); print(type(s.loader).__name__)"],
                               capture_output=True, text=True)
        assert probe.stdout.strip() == "ExtensionFileLoader", probe.stderr
    # the built modules import the shared utility module, and run with it: the checkout's package
    # under its import name (a folder of one link), its hot modules compiled, the module loaded
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "amqp_dissect").symlink_to(root / "dissector")
    probe = ("import json, sys, amqp_dissect, amqp_dissect.model.serial as s\n"
             "print(json.dumps([amqp_dissect.compiled_modules(), sys.modules['amqp_dissect._cyutility'].__file__]))")
    env = dict(_env(False), PYTHONPATH=str(tmp_path / "path"))
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    compiled, loaded = json.loads(ran.stdout)
    assert compiled == list(built) and os.path.samefile(loaded, shared)
