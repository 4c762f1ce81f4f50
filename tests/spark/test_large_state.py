"""State larger than the driver may hold: over 200 MB of Count-Min sketches on a
``local-cluster`` whose driver has 512 MB and may collect at most 64 MB, checkpointed
and restored from the clock (path B). It works because no state passes through the
driver: key groups write and read their own checkpoints on the executors."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from crash_harness import Crasher

from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore
from persistent.storage.fs import LocalFileSystem
from state.tables import chain_table, read_table

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

APP = Path(__file__).resolve().parent / "apps" / "item_frequencies.py"
KEYS = 2_500
SMALL_DRIVER = ("--driver-memory", "512m", "--conf", "spark.driver.maxResultSize=64m")


def weights(workdir) -> dict[str, float]:
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, weight FROM frequencies").fetchall())


def test_state_larger_than_the_driver_may_collect_checkpoints_and_restores_exactly(tmp_path):
    def crasher(total: int) -> Crasher:
        args = ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}",
                "--available-now", "--keys", str(KEYS), "--total", str(total), "--interval-ms", "1000",
                "--key-groups", "8", "--rows-per-batch", "1000"]
        return Crasher(APP, args, tmp_path, master="local-cluster[2,1,1024]", submit=SMALL_DRIVER)

    first = crasher(2 * KEYS).run(timeout_s=600)
    assert first.returncode == 0, first.log
    clock = ClockStore(LocalFileSystem(), str(tmp_path / "ck" / "clock")).read()
    stores = [CheckpointStore(LocalFileSystem(), str(tmp_path / "ck" / "checkpoints"), task)
              for task in clock.task_clocks]
    # The state's own size: its files hold it compressed (zeros of sketches are most of it).
    chains = [store.recover(clock.clock_ms) for store in stores]
    tables = [chain_table(chain, [read_table(stored.data) for stored in chain]) for chain in chains]
    assert sum(len(table.encode()) for table in tables) > 200_000_000

    shutil.rmtree(tmp_path / "ck" / "spark")
    second = crasher(3 * KEYS).run(timeout_s=600)
    assert second.returncode == 0 and "recovery path B" in second.log, second.log
    assert weights(tmp_path) == {f"k{k}": 3.0 for k in range(KEYS)}
