"""A checkpoint the run cannot read back (issue 43): one written by another build (another version,
compiled instead of pure or the other way, other hot-module sources: its carried states are that
build's pickles), one of another format, or one with a corrupt carried state.  The run does not
try to continue from it: it runs over every file and says why, and the archive equals a fresh run.

Oracles: a fresh run over the whole set (the archive), and the fingerprint of this process's
build against one changed by hand."""

from __future__ import annotations

import os
import pickle

import pytest

from archive_sets import assert_same_archive, copy_set, first_time, rotated_set  # noqa: E402
from sparkneeds import require_spark  # noqa: E402

from amqp_dissect.pipelines.archive import checkpoint as C  # noqa: E402
from amqp_dissect.pipelines.archive.directory import CHECKPOINT  # noqa: E402

JOB = dict(partitions=3)


# --------------------------------------------------------------------------- without Spark


def _saved(tmp_path, **changes) -> str:
    cp = C.Checkpoint(options={}, files=[], flows={"flow-a": C.dump_state({"stamps": {}}, {})}, **changes)
    d = str(tmp_path / "cp")
    cp.save(d)
    return d


def _rewrite_meta(d: str, change) -> None:
    path = os.path.join(d, C.META_FILE)
    with open(path, "rb") as f:
        meta = pickle.load(f)
    change(meta)
    with open(path, "wb") as f:
        pickle.dump(meta, f, 5)


def test_a_checkpoint_of_this_build_loads_and_says_what_wrote_it(tmp_path):
    cp = C.Checkpoint.load(_saved(tmp_path))
    assert cp.build == dict(C.build_fingerprint())
    assert set(cp.build) == {"version", "modules", "sources"}
    assert list(cp.flows) == ["flow-a"]


@pytest.mark.parametrize("key,value,says", [("version", "0.0.1", "version 0.0.1 here"),
                                             ("modules", "somewhere else", "modules somewhere else here"),
                                             ("sources", "0" * 16, "the hot modules' sources")])
def test_a_checkpoint_of_another_build_cannot_be_continued_from(tmp_path, key, value, says):
    d = _saved(tmp_path)
    _rewrite_meta(d, lambda m: m["build"].__setitem__(key, value))
    with pytest.raises(C.CannotContinue) as e:
        C.Checkpoint.load(d)
    assert "written by another build" in e.value.reason and says in e.value.reason


def test_a_checkpoint_saved_by_the_other_build_of_this_checkout_cannot_be_continued_from(tmp_path):
    """The other build: a process run pure when this one runs compiled, or the other way (what
    ``AMQP_DISSECT_PURE_PYTHON`` switches); its checkpoint holds a real Dissector's state."""
    import subprocess
    import sys

    from amqp_dissect import compiled_modules, pure_python_forced

    if not compiled_modules() and not pure_python_forced():
        pytest.skip("no compiled build here: there is no other build to write the checkpoint")
    env = dict(os.environ)
    env.pop("AMQP_DISSECT_PURE_PYTHON", None)
    if not pure_python_forced():
        env["AMQP_DISSECT_PURE_PYTHON"] = "1"
    d = str(tmp_path / "cp")
    code = ("import sys\nfrom amqp_dissect.dissect import Dissector\n"
            "from amqp_dissect.pipelines.archive import checkpoint as C\n"
            "st = {'d': Dissector(), 'stamps': {}}\n"
            "C.Checkpoint(options={}, files=[], flows={'f': C.dump_state(st, {})}).save(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, d], env=env, check=True)
    with pytest.raises(C.CannotContinue) as e:
        C.Checkpoint.load(d)
    assert "written by another build (modules " in e.value.reason


def test_a_checkpoint_without_a_build_or_of_another_format_or_unreadable_cannot_be_continued_from(tmp_path):
    d = _saved(tmp_path)
    _rewrite_meta(d, lambda m: m.pop("build"))
    with pytest.raises(C.CannotContinue, match="another build"):
        C.Checkpoint.load(d)
    _rewrite_meta(d, lambda m: m.__setitem__("format", 1))
    with pytest.raises(C.CannotContinue, match="another layout"):
        C.Checkpoint.load(d)
    with open(os.path.join(d, C.META_FILE), "wb") as f:
        f.write(b"\x80\x05not a pickle")
    with pytest.raises(C.CannotContinue, match="its facts could not be read"):
        C.Checkpoint.load(d)


def test_a_corrupt_carried_state_is_found_when_the_checkpoint_is_loaded(tmp_path):
    d = _saved(tmp_path)
    path = os.path.join(d, C.FLOWS_FILE.format(0))
    with open(path, "wb") as f:
        pickle.dump([("flow-a", b"\x80\x05\x95garbage")], f, 5)
    with pytest.raises(C.CannotContinue, match="the carried state of flow-a could not be read"):
        C.Checkpoint.load(d)


# --------------------------------------------------------------------------- an archive run


@pytest.fixture(scope="module")
def spark_session(spark):
    require_spark()
    return spark


@pytest.fixture(scope="module")
def rotated(tmp_path_factory) -> list:
    return rotated_set(tmp_path_factory.mktemp("rotated"))


@pytest.fixture(scope="module")
def fresh(spark_session, rotated, tmp_path_factory) -> str:
    from amqp_dissect.pipelines.spark.archive_dir import run_archive_dir

    out = str(tmp_path_factory.mktemp("fresh") / "archive")
    run_archive_dir(spark_session, rotated, out, **JOB)
    return out


def _corrupt_a_state(cp_dir: str) -> None:
    for name in sorted(os.listdir(cp_dir)):
        if name.startswith("flows-"):
            path = os.path.join(cp_dir, name)
            with open(path, "rb") as f:
                part = pickle.load(f)
            if part:
                part[0] = (part[0][0], part[0][1][:len(part[0][1]) // 2])
                with open(path, "wb") as f:
                    pickle.dump(part, f, 5)
                return
    raise AssertionError("no carried state to corrupt")


def _other_build(cp_dir: str) -> None:
    _rewrite_meta(cp_dir, lambda m: m["build"].__setitem__("modules", "pure" if m["build"]["modules"] != "pure"
                                                           else "compiled"))


@pytest.mark.parametrize("tamper,says", [
    (_other_build, "cannot continue from the checkpoint: it was written by another build (modules "),
    (_corrupt_a_state, "cannot continue from the checkpoint: the carried state of "),
    ("slipped", "cannot continue from the checkpoint: the carried state of "),
])
def test_a_run_given_a_checkpoint_it_cannot_read_runs_over_every_file_and_equals_a_fresh_run(
        spark_session, rotated, fresh, tmp_path, monkeypatch, capsys, tamper, says):
    """``slipped``: a corrupt state the driver's check does not see (it is switched off): the Spark
    task that loads it fails, and the run falls back all the same."""
    from amqp_dissect.pipelines.spark.archive_dir import run_archive_dir

    files = sorted(copy_set(rotated, tmp_path / "set"), key=first_time)  # (the set grows in time)
    out = str(tmp_path / "archive")
    first = run_archive_dir(spark_session, files[:4], out, **JOB)
    assert first["carried"] > 0  # (a state to carry: the tampering has something to break)
    cp_dir = os.path.join(out, "_archive", "versions", "run-000001", CHECKPOINT)
    if tamper == "slipped":
        _corrupt_a_state(cp_dir)
        monkeypatch.setattr(C, "check_states", lambda flows: None)
    else:
        tamper(cp_dir)
    if tamper is _other_build:  # (--dry-run, before any Spark, says so too: the plan reads the checkpoint's facts)
        from amqp_dissect.cli import main as m

        assert m.main(["archive", *files, "--out", out, "--dry-run"]) == m.EXIT_OK
        o = capsys.readouterr().out
        assert f"run: full, over all {len(files)} file(s) ({says}" in o, o
    second = run_archive_dir(spark_session, files, out, **JOB)
    assert not second["resumed"] and second["plan"].full
    assert second["plan"].why_full.startswith(says), second["plan"].why_full
    assert len(second["plan"].new) == len(files) - 4
    assert_same_archive(out, fresh)
