"""Each key group folds a micro-batch's messages in one order, event time then source
position, whatever order Spark's shuffle hands them over in: order-sensitive monoids
(``Last`` on tied times, float sums) give the results of that order, and a replayed
micro-batch gives the state its first run gave (``tests/spark/apps/latest_readings.py``)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from crash_harness import Crasher

pytestmark = pytest.mark.spark

APP = Path(__file__).parent / "apps" / "latest_readings.py"


def app_args(workdir: Path) -> list[str]:
    return ["--input", str(workdir / "in"), "--checkpoint", str(workdir / "ck"),
            "--output", f"sqlite://{workdir / 'out.db'}", "--available-now", "--key-groups", "2",
            "--interval-ms", "100"]


def latest(workdir: Path) -> dict[str, str]:
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, latest FROM latest").fetchall())


def test_messages_of_a_batch_are_folded_by_event_time_then_source_position(spark, tmp_path):
    from apps.latest_readings import job, parser, write_readings

    expected = write_readings(tmp_path / "in", batches=8)
    built = replace(job(parser().parse_args(app_args(tmp_path))), on_progress=None)
    built.run(spark)
    assert latest(tmp_path) == expected


@pytest.mark.usefixtures("spark_lock")
def test_a_batch_replayed_after_a_kill_at_committed_folds_as_its_first_run(tmp_path):
    from apps.latest_readings import write_readings

    expected = write_readings(tmp_path / "in", batches=6)
    crasher = Crasher(APP, app_args(tmp_path), tmp_path, master="local-cluster[2,1,1024]")
    for arrival in (2, 3):
        crasher.crash_at("committed", arrival)
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert latest(tmp_path) == expected, f"seed {crasher.seed}"
