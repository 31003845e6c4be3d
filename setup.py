"""Build script: compiles the hot modules with Cython, falls back to pure Python.

Everything declarative lives in pyproject.toml; this file only adds the optional
extension modules.  The modules to compile are listed once, in dissector/_hot.py.

- With Cython and a C compiler (the normal case: Cython is a build requirement),
  ``pip install .``, ``pip install -e .`` and ``pip wheel .`` compile each hot
  module (pure-Python mode: the ``.py`` file is the source) to an extension module.
- If Cython is missing or a module fails to translate or compile, the build warns
  and goes on: that module is installed as its ``.py`` file only and runs as Python.
- Development: ``python setup.py build_ext --inplace`` puts the compiled modules
  beside their sources (after editing a hot module, rebuild or delete the ``.so``:
  an extension module beside a ``.py`` of the same name is imported first).
- ``AMQP_DISSECT_NO_COMPILE=1`` at build time skips compilation altogether.
"""

import os
import runpy
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# the one list of compiled modules (dotted import names); see dissector/_hot.py
_HOT = runpy.run_path(os.path.join(HERE, "dissector", "_hot.py"))
HOT_MODULES = _HOT["HOT_MODULES"]
# gcc's optimisation level per module: HOT_LEVEL for the modules where a command spends its compiled
# instructions, COLD_LEVEL for the others (see dissector/_hot.py: measured, not guessed)
FULLY_OPTIMIZED = frozenset(_HOT["FULLY_OPTIMIZED"])
HOT_LEVEL = _HOT["HOT_LEVEL"]
COLD_LEVEL = _HOT["COLD_LEVEL"]
# modules whose cdef classes get no generated pickling (see dissector/_hot.py: nothing pickles them)
NOT_PICKLED = frozenset(_HOT.get("NOT_PICKLED", ()))


def _package_dirs() -> dict:
    """[tool.setuptools.package-dir] of pyproject.toml: import name -> folder."""
    import tomllib

    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f).get("tool", {}).get("setuptools", {}).get("package-dir", {})


def _source(module: str) -> str:
    """The .py file of a dotted module name, honouring the package-dir mapping."""
    dirs = _package_dirs()
    package, _, leaf = module.rpartition(".")
    parts = package.split(".")
    for i in range(len(parts), 0, -1):  # the longest mapped prefix wins
        prefix = ".".join(parts[:i])
        if prefix in dirs:
            return "/".join([dirs[prefix].strip("/"), *parts[i:], leaf + ".py"]).lstrip("/")
    root = dirs.get("", "").strip("/")
    return "/".join([root, *module.split(".")]).lstrip("/") + ".py"


# annotation_typing off: the hot modules' type hints stay hints, as in Python.  With it
# on, Cython turns `ts: float` into a C double (an int argument comes back a float,
# None raises) and `payload: bytes` into an exact type check (a bytearray raises).
# Typing for speed is explicit: @cython.locals(...) / cython.declare or a .pxd beside
# the module.
CYTHON_DIRECTIVES = {"language_level": 3, "annotation_typing": False}
# a module's own directives on top of those (set here, per module, not in the module's source)
NOT_PICKLED_DIRECTIVES = {"auto_pickle": False}


def _directives(module: str) -> dict:
    """The Cython directives of one hot module."""
    if module in NOT_PICKLED:
        return {**CYTHON_DIRECTIVES, **NOT_PICKLED_DIRECTIVES}
    return CYTHON_DIRECTIVES


def _pxd_mirror() -> str:
    """A folder where each hot module's .pxd sits under its import name (build/pxd/amqp_dissect/...).

    Cython finds the augmenting .pxd of a module by its dotted name; with the package-dir
    mapping (``amqp_dissect`` -> ``dissector/``) it would not find ``dissector/amqp/scan.pxd``
    for ``amqp_dissect.amqp.scan``, so the .pxd files are copied here (fresh at every build)."""
    import shutil

    root = os.path.join(HERE, "build", "pxd")
    shutil.rmtree(root, ignore_errors=True)
    for module in HOT_MODULES:
        pxd = os.path.join(HERE, _source(module)[:-3] + ".pxd")
        if os.path.exists(pxd):
            dest = os.path.join(root, *module.split(".")) + ".pxd"
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(pxd, dest)
    return root


def _jobs() -> int:
    """How many modules are translated and compiled at once: one per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # (no sched_getaffinity: macOS, Windows)
        return os.cpu_count() or 1


def _warn(message: str) -> None:
    print(f"WARNING (amqp-dissect): {message}", file=sys.stderr)


def _compile_weight(ext) -> float:
    """About how long a module takes to translate and compile, to start the longest first: its .c
    file's size, or before there is one its .py's (about a third of the .c, unevenly), doubled at
    HOT_LEVEL (gcc's -O2 takes about twice -O1's time per line)."""
    size = 0
    for path in (ext.sources[0], _source(ext.name)):
        try:
            size = os.path.getsize(os.path.join(HERE, path)) * (1 if path.endswith(".c") else 3)
            break
        except OSError:
            pass
    return size * (2 if ext.name in FULLY_OPTIMIZED else 1)


def _cython_available() -> bool:
    try:
        import Cython.Build  # noqa: F401
    except ImportError:
        return False
    return True


def _can_fork() -> bool:
    """Whether the workers can be forked (they inherit the build command); not on Windows nor on
    macOS (spawn is its default): there Cython translates every module first and setuptools
    compiles them after."""
    import multiprocessing

    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


_OPTIONS = {}


def _cython_options() -> dict:
    """cythonize's options, made once: the .pxd mirror, and force when the directives or Cython's
    version changed since the last build (cythonize regenerates a .c only when its .py is newer)."""
    if not _OPTIONS:
        import Cython

        stamp = (f"Cython {Cython.__version__} {sorted(CYTHON_DIRECTIVES.items())} "
                 f"{sorted(NOT_PICKLED_DIRECTIVES.items())} for {sorted(NOT_PICKLED)}")
        try:
            with open(_STAMP_FILE) as f:
                force = f.read() != stamp
        except OSError:
            force = True
        _OPTIONS.update(quiet=True, force=force,
                        include_path=[_pxd_mirror()])
        _OPTIONS["_stamp"] = stamp
    return {k: v for k, v in _OPTIONS.items() if not k.startswith("_")}


_SCHEDULE_FILE = os.path.join(HERE, "build", "schedule.log")


def _log_time(what: str, **fields) -> None:
    """One line of the build's schedule in build/schedule.log: the wall clock (seconds since the
    epoch), the process, what it starts or ends (which module, on which core, for how long).  Never
    fails the build."""
    import time

    extra = "".join(f" {k}={v}" for k, v in fields.items())
    try:
        with open(_SCHEDULE_FILE, "a") as f:
            f.write(f"{time.time():.3f} pid={os.getpid()} {what}{extra}\n")
    except OSError:
        pass


_STAMP_FILE = os.path.join(HERE, "build", "cython-options.txt")


def _write_cython_stamp() -> None:
    try:
        os.makedirs(os.path.dirname(_STAMP_FILE), exist_ok=True)
        with open(_STAMP_FILE, "w") as f:
            f.write(_OPTIONS["_stamp"])
    except (OSError, KeyError):
        pass


def _with_c_source(ext):
    """The extension with the .c file Cython will write beside its .py as its source."""
    ext.sources = [ext.sources[0][:-3] + ".c" if ext.sources[0].endswith(".py") else ext.sources[0]]
    return ext


_BUILD = None  # the build_ext command, for the forked workers


def _worker(tasks, results) -> None:
    """A forked worker: builds the extensions whose numbers it takes from ``tasks`` until None."""
    while True:
        index = tasks.get()
        if index is None:
            return
        results.put(_translate_and_compile(index))


def _run_forked_workers(count: int, processes: int):
    """Yields (name, None or why it stays Python) for the build's ``count`` extensions, built by
    ``processes`` forked workers in the list's order.  Plain processes and queues of numbers and
    strings: setup.py runs inside pip's build backend (not as __main__), where a Pool could not
    send its functions by name.  A worker that dies leaves its module to Python."""
    import multiprocessing
    import queue

    context = multiprocessing.get_context("fork")
    tasks, results = context.Queue(), context.Queue()
    for index in range(count):
        tasks.put(index)
    workers = [context.Process(target=_worker, args=(tasks, results), daemon=True)
               for _ in range(max(1, min(processes, count)))]
    for worker in workers:
        worker.start()
        tasks.put(None)
    done = set()
    while len(done) < count:
        try:
            name, message = results.get(timeout=1.0)
        except queue.Empty:
            if any(worker.is_alive() for worker in workers):
                continue
            break
        done.add(name)
        yield name, message
    for worker in workers:
        worker.join()
    for ext in _BUILD.extensions:
        if ext.name not in done:
            yield ext.name, f"the worker building {ext.name} stopped; it stays pure Python"


def _translate_and_compile(index: int):
    """In a worker: translate the build's extension number ``index`` with Cython, then compile it.
    Returns (its name, None) or (its name, why it stays pure Python)."""
    from Cython.Build import cythonize

    ext = _BUILD.extensions[index]
    source = _source(ext.name)
    _log_time("cython", module=ext.name)
    try:
        cythonize([Extension(ext.name, [source])], compiler_directives=_directives(ext.name), **_cython_options())
    except BaseException as e:  # noqa: B036 (Cython exits on a syntax error; the pool must go on)
        return ext.name, f"Cython failed on {ext.name} ({type(e).__name__}: {e}); it stays pure Python"
    _log_time("gcc", module=ext.name)
    try:
        _BUILD.build_extension_unguarded(ext)
    except Exception as e:  # CompileError, LinkError, ...
        return ext.name, f"compiling {ext.name} failed ({type(e).__name__}: {e}); it stays pure Python"
    finally:
        _log_time("done", module=ext.name)
    return ext.name, None


def _remove_retired_extensions() -> None:
    """Delete a compiled module (and its .c) beside a .py that is no longer in HOT_MODULES.

    Python imports an extension module before the .py of the same name, and the hot-module finder
    of amqp_dissect (which makes an edited .py win over an older build) looks only at the listed
    modules: a module taken off the list would otherwise keep running its last build, edits and
    AMQP_DISSECT_PURE_PYTHON=1 notwithstanding, in every checkout built before."""
    import importlib.machinery

    listed = {os.path.join(HERE, _source(m)[:-3]) for m in HOT_MODULES}
    for folder in set(_package_dirs().values()) | {"dissector"}:
        for root, _dirs, files in os.walk(os.path.join(HERE, folder)):
            for name in files:
                for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                    stem = os.path.join(root, name[: -len(suffix)])
                    if name.endswith(suffix) and os.path.isfile(stem + ".py") and stem not in listed:
                        _warn(f"{os.path.relpath(stem, HERE)} is no longer compiled: removing its old build")
                        for old in (stem + suffix, stem + ".c"):
                            if os.path.exists(old):
                                os.remove(old)


class OptionalCythonBuild(build_ext):
    """build_ext whose extensions are optional: any failure leaves the module as Python."""

    def finalize_options(self):
        # translate before the base class looks at the extensions (it annotates them)
        dist = self.distribution
        if getattr(dist, "_amqp_dissect_cythonized", False) is False:
            dist._amqp_dissect_cythonized = True
            if os.environ.get("AMQP_DISSECT_NO_COMPILE", "").strip().lower() in ("1", "true", "yes"):
                _warn("AMQP_DISSECT_NO_COMPILE is set: the hot modules stay pure Python")
                dist.ext_modules = []
            elif _can_fork() and _cython_available():
                # translated and compiled module by module in build_extensions (see there)
                dist.ext_modules = [_with_c_source(ext) for ext in dist.ext_modules or []]
                self._translate_in_workers = True
            else:
                dist.ext_modules = self._cythonize(dist.ext_modules or [])
        if self.parallel is None:
            self.parallel = _jobs()
        super().finalize_options()
        self._failed = set()

    def run(self):
        # (setuptools builds in build/ with inplace off, then copies: ask here, before that)
        if self.inplace or getattr(self, "editable_mode", False):
            _remove_retired_extensions()
        try:
            super().run()
        except Exception as e:  # no compiler at all, broken toolchain, ...
            _warn(f"cannot build the compiled modules ({type(e).__name__}: {e}); "
                  "amqp-dissect will run as pure Python")
            self.extensions = []

    def _cythonize(self, extensions):
        if not extensions:
            return extensions
        try:
            from Cython.Build import cythonize
        except ImportError:
            _warn("Cython is not installed: the hot modules stay pure Python")
            return []
        options = _cython_options()
        kept = []
        # the modules that share their directives in one call each, translated on every core
        # (serial, translation alone took about 28 s of CPU for the 40 modules)
        groups = {}
        for ext in extensions:
            groups.setdefault(ext.name in NOT_PICKLED, []).append(ext)
        for group in groups.values():
            directives = _directives(group[0].name)
            try:
                kept += cythonize(group, nthreads=_jobs(), compiler_directives=directives, **options)
            except Exception:  # one module Cython cannot translate: find it, keep the others
                for ext in group:
                    try:
                        kept += cythonize([ext], compiler_directives=directives, **options)
                    except Exception as e:
                        _warn(f"Cython failed on {ext.name} ({type(e).__name__}: {e}); it stays pure Python")
        _write_cython_stamp()
        return kept

    def build_extension_unguarded(self, ext):
        super().build_extension(ext)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # CompileError, LinkError, ...
            _warn(f"compiling {ext.name} failed ({type(e).__name__}: {e}); it stays pure Python")
            self._failed.add(ext.name)

    def build_extensions(self):
        # the largest first: with one module per core, the last to finish is then a small one (in the
        # list's order the largest, amqp/framing.c, could start last and run alone)
        self.extensions.sort(key=_compile_weight, reverse=True)
        if getattr(self, "_translate_in_workers", False):
            self._translate_and_compile_in_workers()
        else:
            super().build_extensions()
        # what failed is neither copied in place nor listed among the outputs
        self.extensions = [e for e in self.extensions if e.name not in self._failed]

    def _translate_and_compile_in_workers(self):
        """Each worker process translates one module with Cython and then compiles it, the largest
        first: gcc on the big modules starts while Cython still translates the small ones, and no core
        waits for the last translation before the compile begins (one pool, no stage boundary)."""
        global _BUILD
        _BUILD = self
        _cython_options()  # the .pxd mirror and the stamp decision, once, before the workers fork
        try:
            os.remove(_SCHEDULE_FILE)
        except OSError:
            pass
        _log_time("workers", count=len(self.extensions), processes=self.parallel or 1)
        try:
            for name, message in _run_forked_workers(len(self.extensions), self.parallel or 1):
                if message:
                    _warn(message)
                    self._failed.add(name)
        finally:
            _BUILD = None
        _log_time("workers done")
        _write_cython_stamp()


# the extension modules are large mostly with debug information: leave it out on Linux
_LINK_ARGS = ["-Wl,--strip-debug"] if sys.platform.startswith("linux") else []
# nor make it: Python's own CFLAGS say -g, and writing the debug information the link then strips
# was a quarter of the compile (gcc 12, framing.c at -O3: 35.2 s of CPU with -g, 25.8 s with -g0;
# the same machine code, so the same speed).  GCC and Clang take -g0 (last -g wins); MSVC does not.
_COMPILE_ARGS = [] if sys.platform == "win32" else ["-g0"]



def _level(module: str) -> list:
    if sys.platform == "win32":
        return []
    # after Python's own -O3 in the command line: the last -O wins
    return [HOT_LEVEL if module in FULLY_OPTIMIZED else COLD_LEVEL]


setup(
    ext_modules=[Extension(m, [_source(m)], extra_compile_args=_COMPILE_ARGS + _level(m),
                           extra_link_args=_LINK_ARGS)
                 for m in HOT_MODULES],
    cmdclass={"build_ext": OptionalCythonBuild},
)
