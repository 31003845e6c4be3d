"""The light install: the project installed by pip in a fresh venv without extras (no pyarrow, no
pandas, no numpy, no pyspark, no pyshark) runs ``report`` and the table commands (text, csv, jsonl),
imports neither pyspark nor pyshark, and stays small (at most 200 MB: LIMIT_MB); ``-T parquet``,
``archive``, ``compare`` and the Python API say in one line which extra they need (exit 6; the API:
the exception MissingExtra).  With the parquet extra added (pyarrow, still no numpy), ``-T parquet``
writes the development install's file.

Oracles: pip itself (a venv with no site packages but what ``pip install .`` put there), the
import system (a meta-path hook in ``sitecustomize`` records every attempt to import pyspark or
pyshark, and refuses it), and the development install's own output for the same commands (its
csv and jsonl made by Arrow, the light install's by the standard library).

The install needs pip's index (the build requirements, then typer, cryptography ...): as
``tests/install-deps.sh`` does.  The hot modules are not compiled here
(``AMQP_DISSECT_NO_COMPILE=1``: tests/cli/test_compiled.py covers the compiled build).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from amqp_dissect.cli.common import EXIT_EXTRA

# the venvs it builds are its own (no_twin: CI runs it in its compiled pass only)
pytestmark = [pytest.mark.install, pytest.mark.no_twin]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "samples", "outcomes.pcap")
# Issue 27: a CLI-only venv of at most 200 MB (a cost bound the issue demands).  pyarrow alone
# installs 170 MB (26.0) and a venv's pip and setuptools 26 MB, so pyarrow is the parquet extra;
# measured: 60 MB (du) for the light venv (Python 3.11, pip 23.2), 230 MB with pyarrow, 388 MB with
# pandas and numpy too.
LIMIT_MB = 200

# sitecustomize.py for a folder on PYTHONPATH: pyspark and pyshark are not installed, and any
# attempt to import them is written to the file $AMQP_DISSECT_TEST_IMPORTS
_BLOCKER = '''
import os, sys

class _NoExtras:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "pyshark"):
            with open(os.environ["AMQP_DISSECT_TEST_IMPORTS"], "a") as f:
                f.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoExtras())
'''

MESSAGES = {
    "archive": "amqp-dissect archive: needs the spark extra: pip install 'amqp-dissect[spark]'\n",
    "compare": "amqp-dissect compare: needs the wireshark extra: pip install 'amqp-dissect[wireshark]'\n",
    "parquet": "amqp-dissect deliveries --format parquet: needs the parquet extra: "
               "pip install 'amqp-dissect[parquet]'\n",
}
API_MESSAGE = ("MissingExtra: amqp_dissect.analyze needs the pandas extra (pandas and pyarrow are not installed): "
               "pip install 'amqp-dissect[pandas]'")
# what the light install leaves out: the extras' packages (their import names)
HEAVY = ("pyarrow", "pandas", "numpy", "pyspark", "pyshark")


def _blocked_env(tmp_path) -> dict:
    folder = tmp_path / "no-extras"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(_BLOCKER)
    log = tmp_path / "extra-imports.txt"
    log.write_text("")
    return dict(os.environ, PYTHONPATH=str(folder), AMQP_DISSECT_TEST_IMPORTS=str(log))


def _du(path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(folder, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_blocks * 512
    return total


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    """A fresh venv (no system site packages) with ``pip install SOURCE`` and no extras: its folder."""
    base = tmp_path_factory.mktemp("light-install")
    src = base / "src"
    # the source as a fresh clone has it (the files pip builds from), nothing built
    os.makedirs(src)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(os.path.join(ROOT, name), src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.pyc")
    for name in ("dissector", "pipelines", "cli"):
        shutil.copytree(os.path.join(ROOT, name), src / name, ignore=ignore)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = dict(os.environ, AMQP_DISSECT_NO_COMPILE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(src)],
                         capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return venv


def _run(venv, args, env=None, cwd=None):
    return subprocess.run([str(venv / "bin" / "amqp-dissect"), *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


def _dev(args):
    return subprocess.run([sys.executable, "-m", "amqp_dissect.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_a_light_install_runs_report_and_the_tables_without_the_extras(light, tmp_path):
    py = str(light / "bin" / "python")
    # pip installed no extra, and says they are extras
    for module in HEAVY:
        probe = subprocess.run([py, "-c", f"import {module}"], capture_output=True, text=True, timeout=120,
                               cwd=str(tmp_path))
        assert probe.returncode != 0 and "No module named" in probe.stderr, module
    requires = subprocess.run([py, "-c", "from importlib.metadata import requires; print('\\n'.join(requires("
                               "'amqp-dissect')))"], capture_output=True, text=True, timeout=120,
                              cwd=str(tmp_path)).stdout.splitlines()
    for module, extra in (("pyspark", "spark"), ("pyshark", "wireshark"), ("pyarrow", "parquet"),
                          ("pandas", "pandas")):
        lines = [r for r in requires if r.startswith(module)]
        assert lines and all(f'extra == "{extra}"' in r for r in lines), requires
    env = _blocked_env(tmp_path)
    log = tmp_path / "extra-imports.txt"
    commands = [
        ["report", SAMPLE],
        ["report", SAMPLE, "-T", "json"],
        ["deliveries", SAMPLE],
        ["deliveries", SAMPLE, "--columns", "all"],
        ["links", SAMPLE],
        ["deliveries", SAMPLE, "-T", "csv"],
        ["deliveries", SAMPLE, "-T", "jsonl", "--columns", "link,outcome,first_time,settlement_latency"],
        ["links", SAMPLE, "-T", "csv"],
        ["connections", SAMPLE, "-T", "jsonl"],
        ["stalls", SAMPLE, "-T", "jsonl"],
        ["frames", SAMPLE, "-c", "5"],
    ]
    for args in commands:
        got = _run(light, args, env=env, cwd=str(tmp_path))
        want = _dev(args)
        assert got.returncode == 0, (args, got.stderr)
        assert got.stdout == want.stdout and got.stdout, args
    assert log.read_text() == "", "pyspark or pyshark was imported"
    size = _du(light)
    assert size <= LIMIT_MB * 1024 * 1024, f"the light venv holds {size / 1e6:.0f} MB"


def test_parquet_and_the_api_say_which_extra_in_one_line(light, tmp_path):
    out = tmp_path / "d.parquet"
    got = _run(light, ["deliveries", SAMPLE, "-T", "parquet", "-o", str(out)], cwd=str(tmp_path))
    assert (got.returncode, got.stdout, got.stderr) == (EXIT_EXTRA, "", MESSAGES["parquet"])
    assert not out.exists()
    api = subprocess.run([str(light / "bin" / "python"), "-c", f"import amqp_dissect; amqp_dissect.analyze({SAMPLE!r})"],
                         capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert api.returncode == 1 and api.stderr.splitlines()[-1].endswith(API_MESSAGE), api.stderr


@pytest.mark.parametrize("command", ["archive", "compare"])
def test_a_command_needing_a_missing_extra_says_which_in_one_line(light, tmp_path, command):
    args = [command, SAMPLE] + (["--out", str(tmp_path / "out")] if command == "archive" else [])
    # in the light install, where the package is not installed
    got = _run(light, args, cwd=str(tmp_path))
    assert (got.returncode, got.stdout, got.stderr) == (EXIT_EXTRA, "", MESSAGES[command])
    assert not (tmp_path / "out").exists()
    # and in this install, with the package made unimportable
    env = _blocked_env(tmp_path)
    dev = subprocess.run([sys.executable, "-m", "amqp_dissect.cli", *args], capture_output=True, text=True,
                         env=env, timeout=600, cwd=ROOT)
    assert (dev.returncode, dev.stdout, dev.stderr) == (EXIT_EXTRA, "", MESSAGES[command])


def test_the_exit_code_is_documented():
    from amqp_dissect.cli.common import EXIT_CODES_HELP

    with open(os.path.join(ROOT, "docs", "manual.md"), encoding="utf-8") as f:
        manual = f.read()
    assert f"| {EXIT_EXTRA} | " in manual and "extra" in manual.split(f"| {EXIT_EXTRA} | ", 1)[1].splitlines()[0]
    assert f"{EXIT_EXTRA} the command needs an extra" in " ".join(EXIT_CODES_HELP.split())


def test_the_parquet_extra_writes_parquet_without_numpy(light, tmp_path):
    """The parquet extra added to the light venv (last: the venv grows): pyarrow, without numpy,
    writes the development install's Parquet file: the same schema, rows and metadata, but for the
    pandas version the metadata names (none there)."""
    import json

    import pyarrow.parquet as pq

    env = dict(os.environ, AMQP_DISSECT_NO_COMPILE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    pyproject = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    wanted = pyproject.split("\nparquet = [", 1)[1].split("]", 1)[0]  # (the extra's requirements)
    reqs = [r.strip().strip('"') for r in wanted.split(",") if r.strip()]
    out = subprocess.run([str(light / "bin" / "python"), "-m", "pip", "install", "-q", *reqs],
                         capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    py = str(light / "bin" / "python")
    probe = subprocess.run([py, "-c", "import numpy"], capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert probe.returncode != 0 and "No module named" in probe.stderr
    for table in ("deliveries", "links"):
        got, want = tmp_path / f"light-{table}.parquet", tmp_path / f"dev-{table}.parquet"
        run = _run(light, [table, SAMPLE, "-T", "parquet", "-o", str(got)], cwd=str(tmp_path))
        assert run.returncode == 0, run.stderr
        assert _dev([table, SAMPLE, "-T", "parquet", "-o", str(want)]).returncode == 0
        a, b = pq.read_table(got), pq.read_table(want)
        assert a.equals(b) and len(a) > 0, table
        meta_a, meta_b = (json.loads(t.schema.metadata[b"pandas"]) for t in (a, b))
        assert meta_a.pop("pandas_version") is None and meta_b.pop("pandas_version")
        assert meta_a == meta_b


def test_install_sh_from_a_fresh_clone_installs_a_working_cli(tmp_path):
    """README's first command on the files a fresh clone has (nothing built, no venv), the compile
    skipped (AMQP_DISSECT_NO_COMPILE=1: the build still runs, in place, beside pip's install):
    install.sh says the version and `pure Python`, the venv's report of a sample is the development
    install's, the build's log is kept (build/compile.log), and the venv keeps neither Cython (only
    the build needed it: run as Python, the hot modules would import its shadow module) nor a
    setuptools older than pyproject's build requirement (the venv is made without ensurepip's).

    The clone's pyproject also lists a dependency that exists only as a source tree whose build needs
    a package the venv does not have (cffi, as python-qpid-proton's does): install.sh builds the
    dependencies with pip's build isolation, so its build finds cffi (built in the venv, it failed
    here, and python-qpid-proton's own build quietly left its C extension out: the proton codec the
    tests use as an oracle did not import)."""
    src = tmp_path / "clone"
    os.makedirs(src)
    for name in ("pyproject.toml", "setup.py", "README.md", "install.sh"):
        shutil.copy2(os.path.join(ROOT, name), src / name)
    source_only = _source_only_dependency(tmp_path / "needs-cffi-to-build")
    with open(src / "pyproject.toml") as f:
        project = f.read()
    assert '"dpkt>=1.9.8",' in project
    with open(src / "pyproject.toml", "w") as f:
        f.write(project.replace('"dpkt>=1.9.8",', f'"dpkt>=1.9.8", "needs-cffi-to-build @ {source_only.as_uri()}",', 1))
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.pyc")
    for name in ("dissector", "pipelines", "cli"):
        shutil.copytree(os.path.join(ROOT, name), src / name, ignore=ignore)
    env = dict(os.environ, AMQP_DISSECT_NO_COMPILE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "AMQP_DISSECT_PURE_PYTHON"):
        env.pop(name, None)
    out = subprocess.run(["bash", str(src / "install.sh")], capture_output=True, text=True, env=env,
                         timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "amqp-dissect 0.1.0, pure Python", out.stdout
    assert (src / "build" / "compile.log").is_file()
    venv = src / ".venv"
    mine = _run(venv, ["report", SAMPLE], env=env)
    dev = _dev(["report", SAMPLE])
    assert mine.returncode == 0 and dev.returncode == 0, mine.stderr + dev.stderr
    assert mine.stdout == dev.stdout and "AMQP 1.0 capture report" in mine.stdout
    probe = ("import importlib.metadata as m, importlib.util as u; "
             "print(u.find_spec('Cython') is None, m.version('setuptools'))")
    found = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                           timeout=120, cwd=str(tmp_path))
    no_cython, setuptools = found.stdout.split()
    assert no_cython == "True"
    assert int(setuptools.split(".")[0]) >= 68
    built = subprocess.run([str(venv / "bin" / "python"), "-c", "import needs_cffi_to_build as m; print(m.BUILT_WITH)"],
                           capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert built.returncode == 0 and built.stdout.strip() == "cffi", built.stdout + built.stderr


def _source_only_dependency(folder):
    """A package that exists only as a source tree, whose build requires cffi (its pyproject says so)
    and fails without it; the module it installs says it was built with cffi."""
    os.makedirs(folder)
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68", "cffi"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "needs-cffi-to-build"\nversion = "1.0"\n')
    (folder / "setup.py").write_text(
        "import cffi  # (the build requirement: without it the build fails)\n"
        "from setuptools import setup\n"
        "setup(py_modules=['needs_cffi_to_build'])\n")
    (folder / "needs_cffi_to_build.py").write_text('BUILT_WITH = "cffi"\n')
    return folder
