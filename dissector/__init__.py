"""amqp-dissect's sans-IO core: bytes and timestamps in, AMQP 1.0 events out.

Layers: :mod:`~amqp_dissect.capture.pcap` (pcap/pcapng records from a file object),
:mod:`~amqp_dissect.capture.netparse` (link/IP/TCP fast path), :mod:`~amqp_dissect.capture.tcp`
(stream reassembly), :mod:`~amqp_dissect.amqp.framing` (framing), :mod:`~amqp_dissect.amqp.codec`
(type system), tied together by :class:`~amqp_dissect.dissect.Dissector`.

The hot modules (listed in :mod:`amqp_dissect._hot`) are compiled by Cython when the
package is built with a C compiler; the ``.py`` files are their pure-Python twins.
``AMQP_DISSECT_PURE_PYTHON=1`` in the environment makes Python load the ``.py``
files even when compiled modules sit beside them (read when a hot module is first
imported); :func:`compiled_modules` tells which hot modules run compiled in this
process.

The Python API (:func:`analyze`, :func:`iter_batches`: the tables as DataFrames or Arrow batches)
is reached from here, ``amqp_dissect.analyze(...)``, and lives in the pipelines, imported when
first asked for.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

from ._hot import HOT_MODULES

__version__ = "0.1.0"

PURE_PYTHON_ENV = "AMQP_DISSECT_PURE_PYTHON"


def pure_python_forced() -> bool:
    """True when ``AMQP_DISSECT_PURE_PYTHON`` asks for the pure-Python modules."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() not in ("", "0", "false", "no")


class StaleCompiledModuleWarning(UserWarning):
    """A compiled hot module in a source checkout is older than its ``.py``: the ``.py`` runs."""


def _source_checkout(directory: str) -> bool:
    """True when ``directory`` (a package directory) lies in a source tree with setup.py."""
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory = os.path.dirname(directory)
    return os.path.isfile(os.path.join(directory, "setup.py"))


def _stale(extension: str, source: str) -> bool:
    try:
        return os.stat(extension).st_mtime < os.stat(source).st_mtime
    except OSError:
        return False


class _HotModuleFinder:
    """A meta-path finder that can load the hot modules from their ``.py`` files.

    Python's path finder tries extension modules before source files in each
    directory, so a compiled ``codec.cpython-*.so`` always shadows ``codec.py``.
    Placed first on ``sys.meta_path``, this finder answers for the hot modules only,
    with a spec for the ``.py`` file, when

    - ``AMQP_DISSECT_PURE_PYTHON`` is set, or
    - a compiled hot module sits in a source checkout (editable or in-place build) and
      is older than its ``.py``: an edit made since the last build then takes effect
      (with a :class:`StaleCompiledModuleWarning`) instead of being silently ignored, and
      then every hot module runs its source, since the compiled ones are built against the
      others' declarations (a compiled dissector meeting an edited reader's class would fail
      to import).  The check is made once, when the first hot module is imported.

    Otherwise it returns None and the normal machinery loads the compiled module.
    """

    def __init__(self, names):
        self.names = frozenset(names)
        self._stale = None  # (the first time a hot module is asked for) the stale ones, sorted

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for entry in path:
            source = os.path.join(entry, leaf + ".py")
            if not os.path.isfile(source):
                continue
            if pure_python_forced():
                return importlib.util.spec_from_file_location(fullname, source)
            if self._stale is None:
                self._stale = self._find_stale(fullname, entry)
                if self._stale:
                    import warnings

                    warnings.warn(
                        f"{len(self._stale)} compiled module{'s' if len(self._stale) > 1 else ''} older than "
                        "the source: every hot module runs its Python source (a compiled module must not meet "
                        "an edited one it is built against); rebuild with `python setup.py build_ext "
                        f"--inplace` or `pip install -e .` ({', '.join(self._stale)})",
                        StaleCompiledModuleWarning,
                        stacklevel=2,
                    )
            if self._stale:
                return importlib.util.spec_from_file_location(fullname, source)
            return None
        return None

    def _find_stale(self, fullname: str, entry: str) -> list:
        """The hot modules' compiled files older than their ``.py`` in this source checkout
        (none outside one): ``fullname`` was found in folder ``entry``, which places the others."""
        root = entry
        for _ in range(fullname.count(".") - 1):
            root = os.path.dirname(root)
        if not _source_checkout(root):
            return []
        stale = []
        for name in sorted(self.names):
            base = os.path.join(root, *name.split(".")[1:])
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                if os.path.isfile(base + suffix):
                    if _stale(base + suffix, base + ".py"):
                        stale.append(base + suffix)
                    break
        return stale

    def invalidate_caches(self):
        pass


if not any(isinstance(f, _HotModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _HotModuleFinder(HOT_MODULES))


# The Python API, the package's one façade for notebooks and scripts (PEP 562): the core never
# imports the pipelines; asking for one of these names imports amqp_dissect.pipelines.api then.
_API = {"analyze": "amqp_dissect.pipelines.api", "iter_batches": "amqp_dissect.pipelines.api",
        "Tables": "amqp_dissect.pipelines.api", "KeyLog": "amqp_dissect.capture.keylog"}


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))


def is_compiled(module) -> bool:
    """True when ``module`` (a module object) was loaded from an extension module."""
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), importlib.machinery.ExtensionFileLoader)


def compiled_modules() -> list[str]:
    """The hot modules that run compiled in this process (imports them all)."""
    return [name for name in HOT_MODULES if is_compiled(importlib.import_module(name))]
