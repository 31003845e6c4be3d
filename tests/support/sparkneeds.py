"""What a Spark test file needs before it imports anything of Spark's: pyspark and a java binary.
pyspark is a test dependency and CI has Java 17 (tests/install-deps.sh): there a missing one is a
failure; elsewhere the file is skipped with the reason."""

from __future__ import annotations

import os
import shutil

import pytest


def require_spark() -> None:
    """Call at module level, before the file's Spark imports."""
    if os.environ.get("CI"):
        import pyspark  # noqa: F401

        assert shutil.which("java") is not None, "Spark needs java, and CI must have it"
        return
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs java (not on this machine)", allow_module_level=True)


def cells(column) -> list:
    """A pandas column's values as Python objects, null as None (NaN and NaT alike)."""
    return column.astype(object).where(column.notna(), None).tolist()


def assert_archive_tables_are(out: str, local, tables) -> None:
    """Each of ``tables`` the archive wrote under ``out`` (Parquet) equals the single process's
    (``local``: an analysis with the tables as attributes): the same columns, rows and cells."""
    import pandas as pd

    for t in tables:
        sp = pd.read_parquet(os.path.join(out, t))
        lp = getattr(local, t)
        assert list(sp.columns) == list(lp.columns), t
        assert len(sp) == len(lp), t
        for c in lp.columns:
            assert cells(sp[c]) == cells(lp[c]), (t, c)
