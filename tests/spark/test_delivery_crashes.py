"""The three delivery settings under the same crashes, and without failures.

The count example runs over the same generated input (4,500 messages, 40 keys, three
micro-batches) once per setting, killed with SIGKILL at the same crash points. Effects
are compared with the counts of one clean pass: lost = the sum of the shortfalls per
key, duplicated = the sum of the excesses. Each setting must keep its promise, and the
kills must cost what the weaker settings allow: one micro-batch of 1,500 messages
written twice (at-least-once) or skipped (at-most-once).

Without failures, every example gives the same results with every setting.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from crash_harness import Crasher
from persistent.storage.faults import CrashPoint
from persistent.runtime.delivery import Delivery, Effects
from persistent.runtime.recovery import RecoveryPath
from test_crash import count_args

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS, ROWS_PER_BATCH = 4_500, 40, 1_500
EXPECTED = {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}
#: Inside the sink's write of the second micro-batch, then after the whole first
#: micro-batch of the next run is written but before Spark commits it.
KILLS = [(CrashPoint.SINK, 2), (CrashPoint.COMMITTED, 1)]


def sink_totals(workdir) -> dict[str, int]:
    # One row per key (exactly-once) or per key and micro-batch (the others): one query.
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, SUM(count) FROM counts GROUP BY key").fetchall())


def test_each_setting_keeps_its_promise_under_the_same_crashes(tmp_path):
    effects = {}
    for delivery in Delivery:
        workdir = tmp_path / delivery.value
        workdir.mkdir()
        args = count_args(workdir, "--total", str(TOTAL), "--keys", str(KEYS), "--rows-per-batch", str(ROWS_PER_BATCH),
                          "--delivery", delivery.value)
        crasher = Crasher("count", args, workdir)
        for point, arrival in KILLS:
            crasher.crash_at(point, arrival)
        final = crasher.run()
        assert final.returncode == 0, final.log
        effects[delivery] = Effects(EXPECTED, sink_totals(workdir))
    table = "\n".join(f"  {d.value:>13}: {e.line()}" for d, e in effects.items())
    print(f"\nsame input, kills at {KILLS}:\n{table}")

    exactly, at_least, at_most = (effects[d] for d in
                                  (Delivery.EXACTLY_ONCE, Delivery.AT_LEAST_ONCE, Delivery.AT_MOST_ONCE))
    assert (exactly.lost, exactly.duplicated) == (0, 0), table
    assert at_least.lost == 0, table
    assert at_most.duplicated == 0, table
    # The batch killed after its effects were written is replayed and written again...
    assert at_least.duplicated == ROWS_PER_BATCH, table
    # ...and the batch killed inside its write was taken already: it is skipped.
    assert at_most.lost == ROWS_PER_BATCH, table


# -- every example with every setting, without failures: the same results --------------


@pytest.mark.parametrize("delivery", ["at-least-once", "at-most-once"])
def test_count_appends_per_batch_counts_that_sum_to_the_exact_counts(spark, tmp_path, delivery):
    import count

    args = count.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}", "--total", "4000",
         "--keys", "7", "--rows-per-batch", "1000", "--available-now", "--key-groups", "4", "--delivery", delivery]
    )
    job = count.build_job(args)
    job = replace(job, on_progress=None)
    first = job.run(spark)
    again = job.run(spark)
    expected = {f"k{k}": len(range(k, 4000, 7)) for k in range(7)}
    assert sink_totals(tmp_path) == expected
    with sqlite3.connect(tmp_path / "out.db") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT batch) FROM counts").fetchone() == (4 * 7, 4)
    # Neither setting checkpoints tasks or keeps a clock; at-most-once keeps its position.
    stored = {p.name for p in (tmp_path / "ck").iterdir() if not p.name.startswith(".")}
    assert not stored & {"checkpoints", "clock"}
    assert first.recovery.path is RecoveryPath.FRESH
    if delivery == "at-least-once":
        assert again.recovery.path is RecoveryPath.SAME_CHECKPOINT
    else:
        assert (again.recovery.path, again.recovery.floor_ms) == (RecoveryPath.AFTER_POSITION, 4001)
        assert "position" in stored


@pytest.mark.parametrize("delivery, output", [("at-least-once", "sqlite"), ("at-most-once", "parquet")])
def test_wordcount_totals_are_exact_in_sqlite_and_parquet(spark, tmp_path, delivery, output):
    import wordcount
    from test_wordcount import LINES, expected_counts, write_corpus

    write_corpus(tmp_path / "in", enumerate(LINES))
    target = f"sqlite://{tmp_path / 'out.db'}" if output == "sqlite" else str(tmp_path / "out")
    args = wordcount.parser().parse_args(
        ["--input", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"), "--output", target,
         "--available-now", "--key-groups", "8", "--delivery", delivery]
    )
    job = wordcount.build_job(args)
    job = replace(job, on_progress=None)
    job.run(spark)
    if output == "sqlite":
        with sqlite3.connect(tmp_path / "out.db") as db:
            got = dict(db.execute("SELECT word, SUM(count) FROM wordcount GROUP BY word").fetchall())
    else:
        rows = job.sink.rows()
        assert rows["batch"].nunique() == len(LINES)
        got = rows.groupby("word")["count"].sum().to_dict()
    assert got == expected_counts(LINES)


def test_window_averages_are_the_same_with_every_setting(spark, tmp_path):
    import window_average

    results = {}
    for delivery in Delivery:
        workdir = tmp_path / delivery.value
        args = window_average.parser().parse_args(
            ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--total", "4000",
             "--keys", "3", "--window-ms", "1000", "--slide-ms", "500", "--rows-per-batch", "1000",
             "--available-now", "--interval-ms", "500", "--delivery", delivery.value]
        )
        job = window_average.build_job(args)
        job = replace(job, on_progress=None)
        job.run(spark)
        with sqlite3.connect(workdir / "out.db") as db:
            results[delivery] = db.execute(
                "SELECT key, window_start, window_end, average FROM window_average ORDER BY 1, 2").fetchall()
    exactly = results[Delivery.EXACTLY_ONCE]
    assert len(exactly) == 3 * (4000 // 500 - 1)  # every window that closed, each once
    assert results[Delivery.AT_LEAST_ONCE] == exactly == results[Delivery.AT_MOST_ONCE]
