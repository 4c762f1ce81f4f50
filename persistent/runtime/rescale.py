"""Rescaling: a restart from the clock with another number of key groups.

Keys hash to key groups by the number of groups (``pmod(hash(key), key_groups)``),
and Spark's own state cannot change its partitioning, so a new number needs the
clock's checkpoints split again, Flink's key-group redistribution. A job does it when
it starts with an explicit ``key_groups`` that differs from the one its directory
records, and Spark's checkpoint is gone (path B); with Spark's checkpoint there it
refuses and says to delete it. At the clock ``T``, before the query starts:

1. **Split and merge, on the executors.** One Spark task per old key group reads its
   checkpoint at ``T`` and lists its keys; Spark gives each key its new group with
   the job's own expression, so keys land exactly where the new query's messages
   will; one task per new group then reads the old checkpoints that hold its keys,
   keeps their rows (``KeyedTable.only``, ``KeyedTable.absorb``) and writes its
   checkpoint at ``T`` under ``DIR/rescale/checkpoints/``. The driver collects one
   row of numbers per new group, never state.
2. **Install, on the driver (metadata only).** ``DIR/rescale/plan`` records ``T`` and
   the numbers of groups; each staged file is renamed over
   ``DIR/checkpoints/group-h/T``; the clock starts over at ``T`` with the new tasks
   (``ClockStore.restart``: the old layout's history goes, so a later rewind cannot
   reach back before the rescale); the old layout's other checkpoints go, and
   ``DIR/generation`` records the new number. The job then starts on path B.

A crash before the plan record leaves the old checkpoints as they were, and the next
start splits again. After it, every step is idempotent and the next start finishes
the install; until then the directory refuses any other number of key groups.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from persistent.core.errors import RestartRefusedError
from persistent.storage.filesystems import JobStorage
from persistent.storage.job_directory import JobDirectory, task_index, task_name
from persistent.storage.records import RescalePlan
from state.errors import ClockError
from state.persistent_state import PersistentState
from state.table import KeyedTable

__all__ = ["rescale_if_asked", "install"]

def rescale_if_asked(spark, directory: JobDirectory, key_groups: int | None, storage: JobStorage,
                     spec: PersistentState, interval_ms: int, key_type: Callable[[], str]) -> RescalePlan | None:
    """Re-splits the checkpoints at the clock into ``key_groups`` groups when the job
    asks for another number than the directory's, or finishes a rescale whose install
    a crash interrupted (see the module docstring); returns what it did, or None.
    ``storage`` opens the job directory on the executors; ``key_type()`` is the Spark
    type of the job's keys."""
    unfinished = directory.read_rescale_plan()
    if unfinished is not None:
        if key_groups not in (None, unfinished.to_groups):
            raise RestartRefusedError(
                f"a rescale of {directory.root} to {unfinished.to_groups} key groups is half done: start the job "
                f"with key_groups={unfinished.to_groups} to finish it"
            )
        install(directory, unfinished)
        return unfinished
    current = directory.read_generation()
    recorded = current.key_groups if current else None
    if key_groups is None or recorded in (None, key_groups):
        return None
    if directory.spark_log.started():
        return None  # path A: the plan refuses, saying how to rescale
    record = directory.clock.read()
    if record is None:  # nothing checkpointed yet: nothing to split
        directory.record_key_groups(key_groups)
        return None
    old = sorted(map(task_index, record.task_clocks))
    for group in old:
        directory.store(group).require(record.clock_ms)
    plan = RescalePlan(record.clock_ms, recorded, key_groups)
    directory.delete_rescale()
    reports = _split_and_merge(spark, plan, old, storage, spec, interval_ms, key_type())
    missing = sorted(set(range(key_groups)) - {row.h for row in reports})
    if missing:
        raise ClockError(f"rescale of {directory.root}: new key groups {missing} wrote no checkpoint")
    directory.record_rescale_plan(plan)
    install(directory, plan)
    return plan


def _split_and_merge(spark, plan: RescalePlan, old: list[int], storage: JobStorage, spec: PersistentState,
                     interval_ms: int, key_type: str) -> list:
    """Steps 1: the new groups' checkpoints at the clock, staged; one report row per new group."""
    from pyspark.sql import functions as F

    clock_ms, to_groups = plan.clock_ms, plan.to_groups

    def restore(directory: JobDirectory, group: int) -> KeyedTable:
        return spec.restore(interval_ms, directory.restore(group, clock_ms))

    def keys_of(frames):
        directory = storage.directory()
        for frame in frames:
            for group in frame["g"].tolist():
                keys = pd.unique(restore(directory, group).keys)
                yield pd.DataFrame({"key": keys, "g": np.full(len(keys), group, dtype=np.int32)})

    def merge(frame: pd.DataFrame) -> pd.DataFrame:
        directory = storage.directory()
        new_group = int(frame["h"].iloc[0])
        parts = [restore(directory, int(group)).only(rows["key"].to_numpy())
                 for group, rows in frame.dropna(subset=["g"]).groupby("g")]
        if parts:
            table = parts[0]
            for part in parts[1:]:
                table.absorb(part)
        else:
            table = spec.build(interval_ms, checkpoint_ms=clock_ms)
        written = directory.staged_store(new_group).persist(clock_ms, table.encode())
        return pd.DataFrame({"h": [new_group], "keys": [len(pd.unique(table.keys))], "bytes": [written.size]})

    groups = spark.createDataFrame([(g,) for g in old], "g int").repartition(len(old))
    keyed = groups.mapInPandas(keys_of, f"key {key_type}, g int").withColumn(
        "h", F.expr(f"pmod(hash(key), {to_groups})")
    )
    # Every new group runs, also one that gets no key.
    every = spark.range(to_groups).select(
        F.lit(None).cast(key_type).alias("key"), F.lit(None).cast("int").alias("g"), F.col("id").cast("int").alias("h")
    )
    merged = keyed.unionByName(every).groupBy("h").applyInPandas(merge, "h int, keys bigint, bytes bigint")
    return merged.collect()


def install(directory: JobDirectory, plan: RescalePlan) -> None:
    """Step 2: the staged checkpoints replace the old layout (see the module docstring).
    Idempotent: a crash anywhere leaves what the next call finishes."""
    fs, clock_ms = directory.fs, plan.clock_ms
    for group in range(plan.to_groups):
        staged = directory.staged_store(group).path(clock_ms)
        if fs.exists(staged):
            fs.replace(staged, directory.store(group).path(clock_ms))
        else:  # renamed before a crash
            directory.store(group).require(clock_ms)
    directory.clock.restart(clock_ms, {task_name(group): clock_ms for group in range(plan.to_groups)})
    for group in directory.groups():
        if group >= plan.to_groups:
            directory.delete_group(group)
        else:
            directory.store(group).delete_after(clock_ms)
            directory.store(group).retain(clock_ms)
    directory.spark_log.delete()
    directory.record_key_groups(plan.to_groups)
    directory.delete_rescale()
