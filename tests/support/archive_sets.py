"""Rotated capture sets and archive directories for the tests of ``amqp-dissect archive --out DIR``
(tests/spark/test_archive_dir.py, tests/cli/test_archive_growth.py): a set of real captures cut
with ``editcap`` (connections and deliveries span the cuts), and the comparison of two archive
directories row by row."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pandas as pd
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLES = os.path.join(ROOT, "samples")
# multiframe_credit_one.pcap starts 2026-11-23 03:23:36.356 and lasts 0.38 s, its six deliveries
# first sent from 36.395 to 36.427: shifted by this, UTC midnight falls at 36.400, between its
# third and its fourth delivery (the connection, session and links open on the 23rd)
SHIFT_SECONDS = "74183.6"


def editcap(*args) -> None:
    subprocess.run(["editcap", *args], check=True, capture_output=True)


def rotated_set(d) -> list:
    """Eight rotated files of two real captures (proton clients) made under the folder ``d``: 5 cut
    from a shifted multi-frame capture across midnight, 3 from the outcomes capture, in name order.
    Without editcap: a failure under CI (tests/install-deps.sh installs it), a skip elsewhere."""
    if shutil.which("editcap") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but editcap is missing; tests/install-deps.sh installs it", pytrace=False)
        pytest.skip("editcap (wireshark's tools) is needed to rotate the captures")
    editcap("-t", SHIFT_SECONDS, os.path.join(SAMPLES, "multiframe_credit_one.pcap"), str(d / "shifted.pcap"))
    os.makedirs(d / "set")
    editcap("-c", "30", str(d / "shifted.pcap"), str(d / "set" / "mf.pcap"))
    editcap("-c", "20", os.path.join(SAMPLES, "outcomes.pcap"), str(d / "set" / "oc.pcap"))
    files = sorted(glob.glob(str(d / "set" / "*.pcap")))
    assert len(files) == 8
    return files


def copy_set(files: list, folder) -> list:
    """The files copied to ``folder`` (their own paths: the manifest names them)."""
    os.makedirs(folder, exist_ok=True)
    out = []
    for f in files:
        shutil.copy2(f, folder)
        out.append(os.path.join(str(folder), os.path.basename(f)))
    return out


def first_time(path: str) -> int:
    """The time of a capture file's first record (ns; editcap writes pcapng)."""
    from amqp_dissect.pipelines.runs.local import CaptureSource

    return next(iter(CaptureSource([path]).records())).ts


def dataset(out: str, name: str) -> pd.DataFrame:
    import pyarrow.dataset as ds

    return ds.dataset(os.path.join(out, name), partitioning="hive").to_table().to_pandas()


def as_set(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` in an order of their own (an archive's row order is by day, then run)."""
    text = df.astype(str)
    return df.loc[text.sort_values(list(text.columns), kind="stable").index].reset_index(drop=True)


def assert_same_archive(a: str, b: str) -> None:
    """Archives ``a`` and ``b`` hold the same rows (and days) in every table and summary."""
    from amqp_dissect.pipelines.spark.summaries import SUMMARIES
    from amqp_dissect.results.schema import TABLES

    for name in TABLES + SUMMARIES:
        if os.path.exists(os.path.join(b, name)) or os.path.exists(os.path.join(a, name)):
            pd.testing.assert_frame_equal(as_set(dataset(a, name)), as_set(dataset(b, name)), obj=name)
