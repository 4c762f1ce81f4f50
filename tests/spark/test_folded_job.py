"""A ``MonoidTask`` on Spark: its on-time messages fold before the shuffle
(``persistent.runtime.fold``), and its results, late messages and bad records are
those of the same task without the fold."""

from __future__ import annotations

import json
import sqlite3

import pytest

from monoids import Averaged
from persistent import BadRecords, FilesSource, Job, MonoidTask, SQLiteSink
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
