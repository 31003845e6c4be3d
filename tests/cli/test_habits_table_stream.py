"""The text table streams (issue 27): its first rows are written once LOOKAHEAD_ROWS + 1 rows are
made, the rest chunk by chunk, in the column widths of the first rows (a wider cell later widens
its column from its chunk on); a table of at most LOOKAHEAD_ROWS rows is laid out whole, as before.
The oracle: the whole table laid out by pandas (``text_table`` of every row)."""

from __future__ import annotations

import os

import pytest

from amqp_dissect.cli import habits
from amqp_dissect.cli.main import EXIT_OK, main
from amqp_dissect.pipelines.writers.tables import raw_times
from amqp_dissect.results.tables import to_frame

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUTCOMES = os.path.join(ROOT, "samples", "outcomes.pcap")


@pytest.fixture(scope="module")
def rows():
    from amqp_dissect.pipelines.runs.local import CaptureSource, DeliveryStream

    return list(DeliveryStream(CaptureSource(OUTCOMES)))


def whole(rows, cols):
    return habits.text_table(to_frame(rows, "deliveries"), "deliveries", cols, raw_times(rows, "deliveries"))


def test_a_short_table_is_laid_out_whole(rows):
    cols = habits.default_columns("deliveries")
    assert len(rows) == 20
    assert list(habits.text_table_chunks(iter(rows), "deliveries", cols)) == [whole(rows, cols)]


@pytest.mark.parametrize("lookahead, chunk", [(3, 2), (5, 4), (19, 100), (1, 1)])
def test_a_long_table_streams_in_the_widths_of_its_first_rows(monkeypatch, rows, lookahead, chunk):
    monkeypatch.setattr(habits, "LOOKAHEAD_ROWS", lookahead)
    monkeypatch.setattr(habits, "STREAM_CHUNK", chunk)
    cols = habits.default_columns("deliveries") + ["delivery_tag", "outcome_error", "outcome_description"]
    texts = list(habits.text_table_chunks(iter(rows), "deliveries", cols))
    assert len(texts) == 1 + -(-(len(rows) - lookahead) // chunk)
    want = whole(rows, cols).splitlines()
    got = "".join(texts).splitlines()
    assert len(got) == len(want) == len(rows) + 1
    # the same cells in the same order; the first rows' layout is the whole table's where those
    # rows hold each column's widest cell, and every later line is at least as wide
    assert [line.split() for line in got] == [line.split() for line in want]
    first = whole(rows[:lookahead], cols).splitlines()
    assert got[:lookahead + 1] == first
    assert all(len(line) >= len(first[0]) for line in got)


def test_the_first_rows_come_before_the_rest_is_made(rows, monkeypatch):
    """Counted, not timed: the first text is ready once LOOKAHEAD_ROWS + 1 rows were taken."""
    monkeypatch.setattr(habits, "LOOKAHEAD_ROWS", 4)
    monkeypatch.setattr(habits, "STREAM_CHUNK", 3)
    taken = []

    def made():
        for r in rows:
            taken.append(r)
            yield r
    texts = habits.text_table_chunks(made(), "deliveries", habits.default_columns("deliveries"))
    first = next(texts)
    assert len(taken) == 5 and first.count("\n") == 5
    next(texts)
    assert len(taken) == 4 + 3  # (one chunk more)


def test_the_cli_writes_the_streamed_table(capsys, monkeypatch, rows, tmp_path):
    monkeypatch.setattr(habits, "LOOKAHEAD_ROWS", 6)
    monkeypatch.setattr(habits, "STREAM_CHUNK", 5)
    cols = habits.default_columns("deliveries")
    want = "".join(habits.text_table_chunks(iter(rows), "deliveries", cols))
    assert main(["deliveries", OUTCOMES]) == EXIT_OK
    assert capsys.readouterr().out == want
    out = tmp_path / "t.txt"
    assert main(["deliveries", OUTCOMES, "-o", str(out)]) == EXIT_OK
    assert out.read_text() == want
