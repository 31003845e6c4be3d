"""Spark as its users expect it (issue 26): ``read_captures`` gives a DataFrame per table equal to
the single-process table row for row; ``archive`` takes ``file://`` URIs in and out, writes Parquet
whose pandas dtypes are the CLI's own, and refuses a scheme without its connector in one line,
before any work.  The Spark session is the suite's one (the ``spark`` fixture of tests/conftest.py,
local[2]).  The capture: eight AMQP conversations of the fuzzer's coherent generator
(tests/support/fuzzgen.py: transactions, damage that makes violations and errors) interleaved in
time, cut into rotated files."""

from __future__ import annotations

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkneeds import require_spark  # noqa: E402

require_spark()  # (a failure on CI without pyspark or java; elsewhere a skip with the reason)

import fuzzgen  # noqa: E402

from amqp_dissect.pipelines.runs.local import read_analysis  # noqa: E402
from amqp_dissect.pipelines.archive.split import split_capture  # noqa: E402
from amqp_dissect.results.schema import TABLES  # noqa: E402


def _conversations(path, seed: int = 1, n: int = 8) -> str:
    conv_cls = fuzzgen._conversation_class()
    recs = []
    for i in range(n):
        r = fuzzgen.RandomSource(seed * 100 + i)
        c = conv_cls(client=("10.0.0.1", 40000 + i), server=("10.0.0.2", 5672), t0=1_700_000_000.0 + i * 0.0007,
                     dt=0.001, mss=1460)
        c.handshake()
        for d, b in fuzzgen.coherent(r):
            c.send(d, b)
        if i % 3:
            c.close(i % 2)
        recs += c.records
    recs.sort(key=lambda x: x[0])
    with open(path, "wb") as f:
        f.write(fuzzgen.write_pcap(recs))
    return str(path)


@pytest.fixture(scope="module")
def archive_set(tmp_path_factory):
    """(the whole capture, its rotated parts, the single-process Analysis of the whole)."""
    d = tmp_path_factory.mktemp("conv")
    whole = _conversations(d / "conv.pcap")
    parts = split_capture(whole, str(d / "parts"), packets=120)
    a = read_analysis(whole)
    assert all(len(getattr(a, t)) for t in TABLES), {t: len(getattr(a, t)) for t in TABLES}  # (every table has rows)
    return whole, list(parts), a


def _cells(s: pd.Series) -> list:
    return s.astype(object).where(s.notna(), None).tolist()


def _same_rows(sp: pd.DataFrame, lp: pd.DataFrame, what) -> None:
    assert list(sp.columns) == list(lp.columns), what
    assert len(sp) == len(lp), what
    for c in lp.columns:
        x = sp[c]
        if str(lp[c].dtype).startswith("datetime64"):  # (Spark's timestamps: microseconds, as the capture's)
            x = pd.to_datetime(x, utc=True).astype(lp[c].dtype)
        assert _cells(x) == _cells(lp[c]), (what, c)


def _in_one_order(sp: pd.DataFrame, lp: pd.DataFrame) -> tuple:
    """``sp`` (read from Spark's files) and ``lp`` (the single process's), each in the order of its
    rows' text (their times in ``lp``'s unit first): for tables whose files hold the rows in
    another order than one run's."""
    sp = sp.copy()
    for c in lp.columns:
        if str(lp[c].dtype).startswith("datetime64"):
            sp[c] = pd.to_datetime(sp[c], utc=True).astype(lp[c].dtype)

    def ordered(df):
        text = df.astype(str)
        return df.loc[text.sort_values(list(text.columns), kind="stable").index].reset_index(drop=True)
    return ordered(sp), ordered(lp)


def test_read_captures_gives_every_table_as_the_single_process(spark, archive_set):
    from amqp_dissect.pipelines.spark import table_schema
    from amqp_dissect.spark import read_captures

    whole, parts, a = archive_set
    t = read_captures(spark, list(reversed(parts)), partitions=3)  # (any order: one capture set)
    try:
        assert set(t) == set(TABLES) | {"latency_by_link", "latency_by_address", "latency_by_window", "outcomes",
                                        "stalls_by_link", "stalls_by_address"}
        for name in TABLES:
            assert t[name].schema == table_schema(name), name  # the registry's Spark types
            _same_rows(t[name].toPandas(), getattr(a, name), name)  # row for row, in order
            assert t.counts[name] == len(getattr(a, name))
        # the DataFrames join and aggregate in Spark SQL without files
        t["deliveries"].createOrReplaceTempView("d")
        t["links"].createOrReplaceTempView("l")
        got = {(r.address, r.n) for r in spark.sql(
            "select l.address, count(*) n from d join l using (connection, link_index) group by l.address").collect()}
        j = a.deliveries.merge(a.links[["connection", "link_index"]], on=["connection", "link_index"])
        assert got == {(k if not pd.isna(k) else None, n)
                       for k, n in j.groupby(j.address.astype(object).where(j.address.notna(), None),
                                             dropna=False).size().items()}
        # a summary equals the one archive writes (one definition, summary_rows)
        lbl = t["latency_by_link"].toPandas()
        assert len(lbl) == len(a.links) and lbl["count"].sum() == a.deliveries.settlement_latency.notna().sum()
    finally:
        t.close()
    assert not os.path.exists(t.work[len("file://"):])


def test_remote_inputs_are_read_through_hadoop(spark, archive_set, monkeypatch):
    """A URI that is not local goes through the Hadoop FileSystem layer (checked, then copied by
    Spark's binary-file reader); here file:// URIs taken that way give the same tables."""
    from amqp_dissect.pipelines.spark_runtime import fs
    from amqp_dissect.spark import read_captures

    whole, parts, a = archive_set
    real = fs.is_local
    monkeypatch.setattr(fs, "is_local", lambda u: not str(u).startswith("file://") and real(u))
    folder = os.path.dirname(parts[0])
    t = read_captures(spark, ["file://" + folder], tables=["violations", "transactions"], summaries=False,
                      partitions=2)
    try:
        assert t.files == ["file:" + p for p in parts]  # named by their URIs (Hadoop's file:/ form)
        for name in ("violations", "transactions"):
            _same_rows(t[name].toPandas(), getattr(a, name), name)
    finally:
        t.close()


@pytest.mark.parametrize("writer", ["tasks", "hadoop"])
def test_archive_file_uris_and_the_clis_parquet_dtypes(spark, archive_set, tmp_path, capsys, monkeypatch, writer):
    """Both ways the files reach the output: the tasks write a local directory themselves;
    "hadoop" takes file:// as any other Hadoop URI (hdfs://, s3a://, ...: the job's work directory
    and the tables go through Hadoop's FileSystem, the driver writing the files the tasks made)."""
    from amqp_dissect.cli import main as m
    from amqp_dissect.pipelines.spark import job

    if writer == "hadoop":
        from amqp_dissect.pipelines.spark_runtime import fs

        real = fs.is_local
        monkeypatch.setattr(fs, "is_local", lambda u: not str(u).startswith("file://") and real(u))
        monkeypatch.setattr(job, "_direct_dir", lambda uri: None)
    whole, parts, a = archive_set
    out = tmp_path / "out"
    rc = m.main(["archive", *("file://" + p for p in parts), "--out", "file://" + str(out), "--partitions", "2"])
    o, e = capsys.readouterr()
    assert rc == 0, e
    for name in TABLES:
        cli = tmp_path / f"{name}.parquet"
        assert m.main([name, whole, "--format", "parquet", "--output", str(cli)]) == 0
        # (a local --out is an archive directory: its tables partitioned by day, the date column of
        # their folders read back too; one day here, so the rows in order)
        mine, theirs = pd.read_parquet(out / name).drop(columns="date", errors="ignore"), pd.read_parquet(cli)
        assert mine.dtypes.to_dict() == theirs.dtypes.to_dict(), name  # pandas: exactly the CLI's dtypes
        assert len(mine) == len(theirs) == len(getattr(a, name)), name
        if writer == "tasks":  # (an archive directory: a run's final and provisional rows in files of their own)
            _same_rows(*_in_one_order(mine, getattr(a, name)), name)
        else:
            _same_rows(mine, getattr(a, name), name)
        # pyarrow: the CLI's schema, but for the times' unit (Spark's TimestampType: microseconds)
        s_mine, s_cli = pq.read_schema(next((out / name).rglob("*.parquet"))), pq.read_schema(cli)
        assert s_mine.names == s_cli.names
        for f in s_cli:
            want = pa.timestamp("us", tz="UTC") if pa.types.is_timestamp(f.type) else f.type
            assert s_mine.field(f.name).type == want, (name, f.name)
        assert pq.read_table(out / name).to_pandas().drop(columns="date", errors="ignore").dtypes.to_dict() \
            == theirs.dtypes.to_dict(), name
        assert s_mine.metadata[b"pandas"] and pq.read_schema(cli).metadata[b"pandas"]
    from amqp_dissect.pipelines.spark import summaries as S

    for name in S.SUMMARIES:  # the summaries: their own schema and pandas metadata, whoever wrote them
        got = pq.read_schema(next((out / name).glob("*.parquet")))
        assert got.equals(S.summary_schema(name), check_metadata=False) and got.metadata[b"pandas"], name
        assert pq.read_schema(next((out / name).glob("*.parquet"))).metadata == S.summary_schema(name).metadata
    capsys.readouterr()


@pytest.mark.parametrize("where", ["out", "in"])
def test_a_scheme_without_its_connector_is_one_line_before_any_work(spark, tmp_path, capsys, where):
    from amqp_dissect.cli import main as m

    sample = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "samples", "drain.pcap")
    out = tmp_path / "out"
    args = ([sample, "--out", "s3a://no-such-bucket/archive"] if where == "out"
            else ["gs://no-such-bucket/captures/", "--out", str(out)])
    assert m.main(["archive", *args]) == m.EXIT_OPEN  # (documented: 3, a path or file system that cannot be read)
    o, e = capsys.readouterr()
    lines = e.strip().splitlines()
    assert len(lines) == 1, e
    scheme = "s3a" if where == "out" else "gs"
    assert lines[0].startswith("amqp-dissect: ") and f"{scheme}://" in lines[0]
    assert ("hadoop-aws" if scheme == "s3a" else "gcs-connector") in lines[0]
    assert "Traceback" not in e and "\tat " not in e
    assert not out.exists()  # nothing written


def test_the_summary_columns_page_is_the_registry():
    """docs/archives-spark.md's summary tables are SUMMARY_COLUMNS rendered (``python -m
    amqp_dissect.pipelines.spark.summaries``), and the Arrow and Spark schemas have those columns."""
    from amqp_dissect.pipelines.spark import summaries as S

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "archives-spark.md"), encoding="utf-8") as f:
        page = f.read()
    part = page.split("<!-- summaries:begin -->")[1].split("<!-- summaries:end -->")[0]
    assert part.strip() == S.markdown().strip()
    for name in S.SUMMARIES:
        cols = [c for c, *_ in S.SUMMARY_COLUMNS[name]]
        assert f"**{name}** ({len(cols)} columns)" in part
        assert S.summary_schema(name).names == cols == [f.name for f in S.summary_spark_schema(name)]
