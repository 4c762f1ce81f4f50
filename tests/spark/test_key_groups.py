"""Key groups sized to the cluster on a fresh start, kept for the directory's life,
and changed by a restart from the clock (a rescale)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import replace
from functools import partial

import pytest

from crash_harness import checkpoints_of_changes
from persistent.core.errors import RestartRefusedError
from persistent.runtime import recovery
from persistent.runtime.layout import group_slots, slot_group
from persistent.runtime.planner import CHECKPOINT_FILE_MANAGER, KEY_GROUPS_PER_CORE
from persistent.runtime.recovery import RecoveryPath
from persistent.storage.clock_store import ClockStore
from persistent.storage.fs import LocalFileSystem

pytestmark = pytest.mark.spark


def count_job(workdir, total: int, *more: str):
    import count

    args = count.parser().parse_args(
        ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
         "--total", str(total), "--keys", "50", "--rows-per-batch", "500", "--interval-ms", "100", *more]
    )
    job = count.build_job(args)
    job = replace(job, on_progress=None)
    return job


def test_a_fresh_start_sizes_key_groups_to_the_cluster_and_restarts_keep_them(spark, tmp_path):
    cores = spark.sparkContext.defaultParallelism
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    first = count_job(tmp_path, 1_000).run(spark)
    assert first.recovery.key_groups == KEY_GROUPS_PER_CORE * cores
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions  # the session's settings are back
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER, None) is None
    # One state partition per core, each holding several key groups.
    assert sorted(os.listdir(tmp_path / "ck" / "spark" / "state" / "0")) == [str(p) for p in range(cores)] + ["_metadata"]
    assert len(first.directory.clock.read().task_clocks) == KEY_GROUPS_PER_CORE * cores
    assert first.recovery.partitions == cores

    again = count_job(tmp_path, 2_000).run(spark)
    assert (again.recovery.path, again.recovery.key_groups) == (RecoveryPath.SAME_CHECKPOINT, first.recovery.key_groups)
    with pytest.raises(RestartRefusedError, match=f"written with key_groups={first.recovery.key_groups}, this job has key_groups=3"):
        count_job(tmp_path, 2_000, "--key-groups", "3").run(spark)


def test_spark_puts_each_key_group_in_the_state_partition_of_its_turn(spark):
    """Spark's shuffle by the slot column, as the stateful operator's: group ``g`` lands in
    partition ``g % partitions``, which ``persistent.runtime.layout`` computes without Spark."""
    from pyspark.sql import functions as F

    for key_groups, partitions in ((8, 2), (16, 4), (7, 3)):
        slots = spark.createDataFrame([(slot,) for slot in group_slots(key_groups, partitions)], "slot int")
        rows = slots.repartition(partitions, "slot").select("slot", F.spark_partition_id().alias("partition")).collect()
        assert {slot_group(row.slot, key_groups): row.partition for row in rows} == {
            group: group % partitions for group in range(key_groups)}


def test_a_spark_checkpoint_keyed_by_group_numbers_continues_on_path_a_until_path_b_spreads_it(
        spark, tmp_path, monkeypatch):
    """A generation an earlier version started (``partitions`` unrecorded, Spark's state
    keyed by the groups' numbers) continues keyed by them on path A; path B spreads the
    groups over the partitions. The counts stay exact throughout."""
    from persistent.runtime import delivery, planner

    def as_before(*args, timeouts):  # the plan of a version before the slots: no cores, no partitions, timeouts
        return delivery.plan(*args[:-1])

    monkeypatch.setattr(planner, "plan", as_before)
    assert count_job(tmp_path, 1_000, "--key-groups", "8").run(spark).recovery.partitions is None
    monkeypatch.undo()
    again = count_job(tmp_path, 2_000, "--key-groups", "8").run(spark)
    assert (again.recovery.path, again.recovery.partitions) == (RecoveryPath.SAME_CHECKPOINT, None)
    shutil.rmtree(tmp_path / "ck" / "spark")
    restarted = count_job(tmp_path, 3_000, "--key-groups", "8").run(spark)
    assert (restarted.recovery.path, restarted.recovery.partitions) == (
        RecoveryPath.FROM_CLOCK, spark.sparkContext.defaultParallelism)
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, 3_000, 50)) for k in range(50)}


def test_a_query_that_reads_python_heartbeats_keeps_them_on_path_a_and_path_b_reads_a_file(spark, tmp_path, monkeypatch):
    """A generation an earlier version started reads its heartbeats from a Python data
    source, which its Spark checkpoint names: path A continues with it, path B starts a
    generation whose heartbeats are a file, which Spark's file source takes although the
    directory's name would be a glob pattern to it. The counts stay exact throughout."""
    workdir = tmp_path / "run[1]"
    workdir.mkdir()
    # The first start is fresh, whose plan names every field but the heartbeats' by keyword.
    monkeypatch.setattr(recovery, "Recovery", partial(recovery.Recovery, heartbeat_files=False))
    assert count_job(workdir, 1_000).run(spark).recovery.heartbeat_files is False
    monkeypatch.undo()
    assert not (workdir / "ck" / "spark" / "heartbeats").exists()
    again = count_job(workdir, 2_000).run(spark)
    assert (again.recovery.path, again.recovery.heartbeat_files) == (RecoveryPath.SAME_CHECKPOINT, False)
    shutil.rmtree(workdir / "ck" / "spark")
    restarted = count_job(workdir, 3_000).run(spark)
    assert (restarted.recovery.path, restarted.recovery.heartbeat_files) == (RecoveryPath.FROM_CLOCK, True)
    assert (workdir / "ck" / "spark" / "heartbeats" / "rows.json").read_text().count("grp") == (
        restarted.recovery.key_groups)
    # The heartbeats are the query's second source: its log names the file it took.
    assert "rows.json" in (workdir / "ck" / "spark" / "sources" / "1" / "0").read_text()
    with sqlite3.connect(workdir / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, 3_000, 50)) for k in range(50)}


def window_job(workdir, total: int, *more: str):
    import window_average

    args = window_average.parser().parse_args(
        ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
         "--total", str(total), "--rows-per-batch", "2500", "--keys", "5", *more]
    )
    job = window_average.build_job(args)
    job = replace(job, on_progress=None)
    return job


def layout(workdir) -> tuple[int, int]:
    """(key groups with a checkpoint directory, tasks of the clock)."""
    clock = ClockStore(LocalFileSystem(), str(workdir / "ck" / "clock")).read()
    return len(os.listdir(workdir / "ck" / "checkpoints")), len(clock.task_clocks)


def test_rescaling_16_to_5_to_32_key_groups_across_two_path_b_restarts_keeps_counts_and_windows_exact(spark, tmp_path):
    counts, windows, clean = tmp_path / "counts", tmp_path / "windows", tmp_path / "clean"
    first = count_job(counts, 2_500, "--key-groups", "16").run(spark)
    window_job(windows, 6_000, "--key-groups", "16").run(spark)
    # The first rescale reads chains: checkpoints at the clock hold changes (those of a
    # group whose changes since its last whole one added up to its table are whole).
    assert checkpoints_of_changes(counts / "ck", first.directory.clock.read().clock_ms) > 8
    for total, groups in [(4_000, 5), (6_000, 32)]:
        for workdir in (counts, windows):
            shutil.rmtree(workdir / "ck" / "spark")
        restarted = count_job(counts, total, "--key-groups", str(groups)).run(spark)
        assert (restarted.recovery.path, restarted.recovery.key_groups) == (RecoveryPath.FROM_CLOCK, groups)
        assert layout(counts) == (groups, groups)
        window_job(windows, 3 * total, "--key-groups", str(groups)).run(spark)
        assert layout(windows) == (groups, groups)

    with sqlite3.connect(counts / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, 6_000, 50)) for k in range(50)}
    window_job(clean, 18_000).run(spark)
    assert window_rows(windows) == window_rows(clean) and len(window_rows(clean)) > 50


def window_rows(workdir) -> list[tuple]:
    with sqlite3.connect(workdir / "out.db") as db:
        return sorted(db.execute("SELECT key, window_start, window_end, average FROM window_average").fetchall())
