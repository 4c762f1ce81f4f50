"""A count whose keys expire (``NonWindowState(ttl_ms=...)``) over a stream of always-new
keys: every count is right and the key groups' state stays bounded."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from monoids import Count
from persistent import GeneratorSource, Job, PersistentTask, SQLiteSink
from state import NonWindowState

pytestmark = pytest.mark.spark

TOTAL, PER_BATCH, TTL_MS = 3_000, 300, 100


class ExpiringCount(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Count(), ttl_ms=TTL_MS)

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


def test_expiring_keys_keep_the_state_of_always_new_keys_bounded_and_counts_right(spark, tmp_path):
    progress = []
    job = Job(
        task=ExpiringCount(),
        # Message i has key k{i} at event time i + 1: every message is a new key.
        source=GeneratorSource(keys=TOTAL, total=TOTAL, max_rows_per_batch=PER_BATCH),
        sink=SQLiteSink(str(tmp_path / "out.db"), table="counts", value_column="count"),
        checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=100,
        key_groups=2,
        on_progress=progress.append,
    )
    job.run(spark)
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{i}": 1 for i in range(TOTAL)}

    state = [sum(p.state_bytes.values()) for p in progress if p.rows]
    checkpoints = [p.checkpoint_bytes for p in progress if p.rows]
    assert len(state) == TOTAL // PER_BATCH
    # From the second batch on a group holds the keys of the last TTL_MS and of its batch,
    # not every key so far (the last batch would then hold ten times the first).
    assert max(state[1:]) <= 1.3 * state[1] and state[-1] < 2 * state[0]
    assert max(checkpoints[2:]) <= 1.3 * checkpoints[2]
