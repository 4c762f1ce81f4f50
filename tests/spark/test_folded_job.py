"""A ``MonoidTask`` on Spark: its on-time messages fold before the shuffle
(``persistent.runtime.fold``), and its results, late messages and bad records are
those of the same task without the fold."""

from __future__ import annotations

import json
import sqlite3

import pytest

from monoids import Averaged
from persistent import BadRecords, FilesSource, Job, MonoidTask, SQLiteSink
from persistent.runtime.fold import FOLD_PROPERTY, PASS, WATERMARK_PROPERTY, Folding, fold_of, folded, load_extension
from state import NonWindowState

pytestmark = pytest.mark.spark

FIRST = [("a", 1, 1), ("b", 2, 2), ("a", 3, "x"), ("a", 4, 3), ("b", 1000, 4), ("c", 998, "NaN"), ("a", 4, 3)]
SECOND = [("a", 5, 100), ("c", 1100, 6), ("b", 1050, 5)]  # a at 5 ms is late: the watermark is at 1,000 ms


class Averages(MonoidTask):
    def persistent_state(self):
        return NonWindowState(Averaged())


def number_field(messages):
    """The messages' value: their JSON field ``n`` as text (``"x"``: no number)."""
    from pyspark.sql import functions as F

    return messages.withColumn("value", F.get_json_object("value", "$.n"))


def test_a_monoid_tasks_messages_fold_before_the_shuffle_and_average_exactly(spark, tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name, rows in (("a", FIRST), ("b", SECOND)):
        lines = [json.dumps({"key": k, "timestamp": t, "n": n}) for k, t, n in rows]
        (inputs / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    progress = []
    Job(task=Averages(), source=FilesSource(str(inputs), "jsonl"), prepare=number_field,
        sink=SQLiteSink(str(tmp_path / "out.db"), table="averages"), checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=100, key_groups=2, bad_records=BadRecords.DEAD_LETTER,
        on_progress=progress.append).run(spark)

    assert "[persistent] messages fold before the shuffle (a MonoidTask)" in capsys.readouterr().err
    with sqlite3.connect(tmp_path / "out.db") as db:
        averages = dict(db.execute("SELECT key, value FROM averages").fetchall())
    assert averages == {"a": (1 + 3 + 3) / 3, "b": (2 + 4 + 5) / 3, "c": 6.0}
    assert (sum(p.rows for p in progress), sum(p.late for p in progress)) == (7, 1)
    assert sum(p.dead_letters for p in progress) == 2  # "x" and NaN, which the monoid refuses


def test_while_the_fold_property_is_pass_spark_plans_each_row_a_partial_of_its_own(spark):
    assert load_extension(spark) is None
    fold, _ = fold_of(Averages(), "string")
    rows = spark.createDataFrame(
        [(0, 0, "a", 0, 10, "1.5", None, None), (0, 0, "a", 0, 20, "2", None, None),
         (0, 0, "b", 0, 30, "4", None, None), (0, 0, "b", 0, 130, "8", None, None)],
        "grp int, kind int, key string, part int, timestamp bigint, value string, bad_record string, "
        "event_time timestamp")
    context = spark.sparkContext
    context.setLocalProperty(WATERMARK_PROPERTY, "0")

    def partials(passing: bool):
        context.setLocalProperty(FOLD_PROPERTY, PASS if passing else None)
        frame = folded(rows, fold, 0, 100)
        plan = frame._jdf.queryExecution().executedPlan().toString()
        found = sorted((r.key, r["count"], r.timestamp, r.earliest, r.partial_0) for r in frame.collect())
        return "HashAggregate" in plan, found

    try:
        b = [("b", 1, 30, 30, 4.0), ("b", 1, 130, 130, 8.0)]  # in two intervals
        assert partials(passing=False) == (True, [("a", 2, 20, 10, 3.5), *b])
        assert partials(passing=True) == (False, [("a", 1, 10, 10, 1.5), ("a", 1, 20, 20, 2.0), *b])
    finally:
        context.setLocalProperty(WATERMARK_PROPERTY, None)
        context.setLocalProperty(FOLD_PROPERTY, None)


def test_a_job_whose_messages_hardly_share_a_key_passes_them_through_unfolded_then_folds_again(
        spark, tmp_path, monkeypatch):
    monkeypatch.setattr(Folding, "PASSES", 2)  # the driver's choice: fewer micro-batches to see it
    inputs = tmp_path / "in"
    inputs.mkdir()
    batches = Folding.PASSES + 2
    for batch in range(batches):  # a file a micro-batch: each message its own key, but in the last
        keys = [f"k{batch}-{i}" for i in range(4)] if batch < batches - 1 else ["z"] * 4
        lines = [json.dumps({"key": key, "timestamp": 100 * (batch + 1) + i, "n": i}) for i, key in enumerate(keys)]
        (inputs / f"{batch:02}.jsonl").write_text("\n".join(lines) + "\n")
    progress = []
    Job(task=Averages(), source=FilesSource(str(inputs), "jsonl"), prepare=number_field,
        sink=SQLiteSink(str(tmp_path / "out.db"), table="averages"), checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=100, key_groups=2, on_progress=progress.append).run(spark)

    # The first folds 4 messages into 4 partials, so the next PASSES pass theirs through; then one folds again.
    assert [(p.rows, p.folded, p.partials) for p in progress if p.rows] == [(4, 4, 4), (4, 0, 0), (4, 0, 0), (4, 4, 1)]
    assert [p.line() for p in progress if p.rows][-1].endswith(", 4 folded into 1 partials")
    with sqlite3.connect(tmp_path / "out.db") as db:
        averages = dict(db.execute("SELECT key, value FROM averages").fetchall())
    assert averages == {**{f"k{b}-{i}": float(i) for b in range(batches - 1) for i in range(4)}, "z": 1.5}
