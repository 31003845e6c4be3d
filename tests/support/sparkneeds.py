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
