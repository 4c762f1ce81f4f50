"""A count's key groups checkpoint at the next micro-batch's watermark, so the clock
reaches the last boundary with the last micro-batch that has messages and the job runs
no micro-batch without data; a state that the watermark alone changes (windows close,
keys expire) still runs one."""

from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

from monoids import Count
from persistent import FilesSource, GeneratorSource, Job, PersistentTask, SQLiteSink
from persistent.core.errors import RestartRefusedError
from persistent.runtime import planner
from state import NonWindowState, Window, WindowState

pytestmark = pytest.mark.spark

PER_BATCH, INTERVAL_MS = 100, 100


class Counts(PersistentTask):
    def __init__(self, state):
        self.state = state

    def persistent_state(self):
        return self.state

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


def run(spark, tmp_path, state, total):
    """The progress of one available-now run over ``total`` messages, key ``k{i % 7}``
    at event time ``i + 1``, and the sink's rows."""
    progress = []
    Job(task=Counts(state), source=GeneratorSource(keys=7, total=total, max_rows_per_batch=PER_BATCH),
        sink=SQLiteSink(str(tmp_path / "out.db"), table="counts", value_column="count"),
        checkpoint_dir=str(tmp_path / "ck"), checkpoint_interval_ms=INTERVAL_MS, key_groups=2,
        on_progress=progress.append).run(spark)
    with sqlite3.connect(tmp_path / "out.db") as db:
        return progress, sorted(db.execute("SELECT * FROM counts").fetchall())


def test_a_counts_clock_reaches_the_last_boundary_with_its_last_micro_batch(spark, tmp_path, capsys):
    progress, _ = run(spark, tmp_path, NonWindowState(Count()), 300)
    # Micro-batch n holds the messages at 100 n + 1 ... 100 n + 100 ms: its own newest
    # event time is the next one's watermark, and its checkpoint.
    assert [(p.rows, p.clock_ms) for p in progress] == [(100, 100), (100, 200), (100, 300)]
    assert "checkpoint at each micro-batch's own watermark" not in capsys.readouterr().err

    progress, counts = run(spark, tmp_path, NonWindowState(Count()), 400)
    assert [(p.rows, p.clock_ms) for p in progress] == [(100, 400)]
    assert counts == [(f"k{k}", len(range(k, 400, 7))) for k in range(7)]


@pytest.mark.parametrize("state", [NonWindowState(Count(), ttl_ms=1_000), WindowState(Count(), Window(100))],
                         ids=["ttl", "window"])
def test_a_state_the_watermark_alone_changes_runs_a_micro_batch_without_data(spark, tmp_path, state):
    progress, _ = run(spark, tmp_path, state, 300)
    assert [(p.rows, p.clock_ms) for p in progress] == [(100, None), (100, 100), (100, 200), (0, 300)]


def test_a_count_that_cannot_checkpoint_early_after_a_start_that_did_restarts_from_the_clock(
        spark, tmp_path, monkeypatch):
    """A query whose key groups checkpoint early sets no event-time timeouts, and Spark
    keeps none beside their state; a start that cannot checkpoint early (Spark's half
    not loaded) needs them to wake a group that gets no message, so it is refused on
    that Spark checkpoint and restarts from the clock, exactly."""
    inputs = tmp_path / "in"
    inputs.mkdir()

    def add(name, keys, times):
        lines = [json.dumps({"key": key, "timestamp": t, "value": "1"}) for key, t in zip(keys, times)]
        (inputs / f"{name}.jsonl").write_text("\n".join(lines) + "\n")

    def start():
        progress = []
        Job(task=Counts(NonWindowState(Count())), source=FilesSource(str(inputs), "jsonl"),
            sink=SQLiteSink(str(tmp_path / "out.db"), table="counts", value_column="count"),
            checkpoint_dir=str(tmp_path / "ck"), checkpoint_interval_ms=INTERVAL_MS, key_groups=2,
            on_progress=progress.append).run(spark)
        return progress

    add("0", [f"k{i % 7}" for i in range(100)], range(1, 101))
    assert [(p.rows, p.clock_ms) for p in start()] == [(100, 100)]

    monkeypatch.setattr(planner, "load_extension", lambda spark: "Spark's half of the fold is not loaded: a test")
    add("1", ["k0"] * 100, range(101, 201))  # one key: one of the two groups gets no message
    with pytest.raises(RestartRefusedError, match="without event-time timeouts.* cannot .Spark's half of the fold is "
                                                  "not loaded: a test.* delete .*spark to restart from"):
        start()
    shutil.rmtree(tmp_path / "ck" / "spark")
    # From the clock at 100 ms: the first file's message at 100 ms, the second file, then
    # the micro-batch without data whose timeouts wake both groups at 200 ms.
    assert [(p.rows, p.clock_ms) for p in start()] == [(1, 100), (100, 100), (0, 200)]
    with sqlite3.connect(tmp_path / "out.db") as db:
        assert db.execute("SELECT count FROM counts WHERE key = 'k0'").fetchall() == [(len(range(0, 100, 7)) + 100,)]
