"""The Spark runtime: a ``PersistentTask`` on ``applyInPandasWithState``.

Messages are grouped by **key group** (``pmod(hash(key), key_groups)``), not by key:
one Python call per group and micro-batch updates all of the group's keys with
vectorized monoid folds (``persistent.keygroup``). Each key group is a task with its
own checkpoints and checkpoint clock.

Per micro-batch, inside Spark:

1. each key group with messages (or whose event-time timeout fired because the
   watermark passed its next checkpoint boundary: idle groups checkpoint too) applies
   its messages, emits results, and, when the watermark has passed a boundary ``T``,
   emits its checkpoint at ``T``; its whole state goes to Spark's state store;
2. on the driver (``foreachBatch``): the results go to the sink (idempotent per
   batch), then the checkpoints are made durable through Hadoop's FileSystem API,
   then the global minimum checkpoint clock advances to the minimum of the tasks'
   clocks. The clock never names a checkpoint that is not durable.

See ``persistent.recovery`` for the restart paths A and B.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from persistent.faults import crash_point
from persistent.hadoop_fs import HadoopFileSystem
from persistent.keygroup import KeyGroup
from persistent.recovery import JobDirectory, Recovery, RecoveryPath, task_name
from persistent.sinks import BatchId, Sink
from persistent.sources import Source
from persistent.task import PersistentTask
from state.checkpoint_manager import boundary_after
from state.errors import StorageError
from state.persistent_state import WindowState

__all__ = ["Job", "RunningJob", "BatchProgress"]

_NUMPY_TO_SPARK = {"i": "bigint", "u": "bigint", "f": "double", "b": "boolean"}
#: Checkpoint files written at once: each write mostly waits on the file system.
_CHECKPOINT_WRITERS = 8


@dataclass(frozen=True)
class BatchProgress:
    """What one micro-batch did, as reported by the driver."""

    generation: int
    batch: int
    rows: int
    late: int
    replayed: int
    results: int
    checkpoints: int
    clock_ms: int | None
    seconds: float
    watermark_ms: int
    finished_at_ms: int
    #: Encoded state size per task (key group) that ran in this batch.
    state_bytes: dict[str, int]
    dead_letters: int = 0

    def line(self) -> str:
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        clock = "-" if self.clock_ms is None else str(self.clock_ms)
        return (
            f"batch {self.generation}.{self.batch}: {self.rows} rows ({rate:,.0f} rows/s), "
            f"{self.results} results, {self.checkpoints} checkpoints, clock {clock}"
            + (f", {self.late} late" if self.late else "")
            + (f", {self.replayed} before the restore point" if self.replayed else "")
        )


@dataclass
class Job:
    """A stateful streaming job: source -> prepare -> task (key groups) -> sink.

    ``prepare`` maps the source's DataFrame to one with columns ``key``,
    ``timestamp`` (ms, bigint) and ``value`` using Spark SQL (for example splitting
    lines into words); by default the source's messages are used as they are.
    """

    task: PersistentTask
    source: Source
    sink: Sink
    checkpoint_dir: str
    checkpoint_interval_ms: int = 1000
    watermark_delay_ms: int = 0
    key_groups: int = 64
    prepare: Callable | None = None
    #: Off, key groups take no checkpoints and the driver keeps no clock: only Spark's
    #: checkpoint location holds the state (recovery path A only; without it the job
    #: starts over from the beginning of its source). For measuring what checkpoints cost.
    checkpoints: bool = True
    on_progress: Callable[[BatchProgress], None] | None = field(default=lambda p: print(p.line(), file=sys.stderr))

    def __post_init__(self):
        for name in ("checkpoint_interval_ms", "key_groups"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Job: {name} must be > 0, got {getattr(self, name)}")
        if self.watermark_delay_ms < 0:
            raise ValueError(f"Job: watermark_delay_ms must be >= 0, got {self.watermark_delay_ms}")
        self.spec = self.task.state_spec()

    @property
    def windowed(self) -> bool:
        return isinstance(self.spec, WindowState)

    def start(self, spark, available_now: bool = False, trigger_ms: int | None = None) -> RunningJob:
        """Plans recovery, builds the query and starts it."""
        _ship_by_value(type(self.task))
        directory = JobDirectory(HadoopFileSystem(spark, self.checkpoint_dir), self.checkpoint_dir)
        recovery = directory.plan(self.key_groups)
        print(f"[persistent] {recovery.describe()}", file=sys.stderr)
        if recovery.path is RecoveryPath.FRESH:
            self.sink.check_fresh_start(spark)
        messages = self.source.stream(spark, recovery.floor_ms)
        if self.prepare is not None:
            messages = self.prepare(messages)
        results = self._stateful(messages, recovery)
        writer = results.writeStream.foreachBatch(_Committer(self, directory, recovery))
        writer = writer.option("checkpointLocation", directory.spark).outputMode("update")
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger_ms:
            writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
        return RunningJob(writer.start(), recovery, directory)

    def run(self, spark, available_now: bool = True) -> RunningJob:
        """Starts the job and waits until it ends (with ``available_now``: input consumed)."""
        running = self.start(spark, available_now=available_now)
        running.query.awaitTermination()
        return running

    def _stateful(self, messages, recovery: Recovery):
        from pyspark.sql import functions as F
        from pyspark.sql.streaming.state import GroupStateTimeout

        key_type = messages.schema["key"].dataType.simpleString()
        value_dtype = self.spec.monoid.result_dtype
        value_type = _NUMPY_TO_SPARK.get(value_dtype.kind, "string")
        output = (
            f"kind string, grp int, time_ms bigint, key {key_type}, window_end bigint, value {value_type}, "
            "data binary, applied bigint, late bigint, replayed bigint, watermark_ms bigint, state_bytes bigint"
        )
        grouped = (
            messages.select("key", F.col("timestamp").cast("bigint").alias("timestamp"), "value")
            .withColumn("grp", F.expr(f"pmod(hash(key), {self.key_groups})"))
            .withColumn("event_time", F.timestamp_millis("timestamp"))
            .withWatermark("event_time", f"{self.watermark_delay_ms} milliseconds")
            .groupBy("grp")
        )
        function = _group_function(
            self.task, self.checkpoint_interval_ms, recovery, value_type == "string", self.checkpoints
        )
        return grouped.applyInPandasWithState(
            function, output, "table binary", "Update", GroupStateTimeout.EventTimeTimeout
        )


def _ship_by_value(task_class: type) -> None:
    """Lets executors unpickle the task even when its module (an example script, a
    notebook module) is not installed on them: its code travels with the query."""
    from pyspark import cloudpickle

    module = sys.modules.get(task_class.__module__)
    if module is not None and module.__name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)


def _group_function(
    task: PersistentTask, interval_ms: int, recovery: Recovery, values_as_text: bool, checkpoints: bool
):
    floor_ms, restored = recovery.floor_ms, recovery.restored

    def run_group(key, frames, state):
        grp = int(key[0])
        if state.exists:
            group = KeyGroup.decode(task, interval_ms, floor_ms, state.get[0])
        elif grp in restored:
            group = KeyGroup.restore(task, interval_ms, floor_ms, restored[grp])
        else:
            group = KeyGroup(task, interval_ms, floor_ms)
        applied = late = replayed = 0
        for frame in frames:
            a, r, lt = group.apply(frame[["key", "timestamp", "value"]])
            applied, replayed, late = applied + a, replayed + r, late + lt
        watermark_ms = max(state.getCurrentWatermarkMs(), floor_ms)
        results, checkpoint = group.advance(watermark_ms, checkpoints)
        encoded = group.encode()
        state.update((encoded,))
        crash_point("group")
        # Wake this group when the watermark passes its next boundary, even with no input.
        state.setTimeoutTimestamp(max(boundary_after(watermark_ms, interval_ms) - 1, watermark_ms, 1))
        n = len(results)
        values = results["value"].astype(str) if values_as_text else results["value"]
        out = pd.DataFrame(
            {
                "kind": ["result"] * n + ["group"],
                "grp": [grp] * (n + 1),
                "time_ms": list(results["window_start"]) + [checkpoint[0] if checkpoint else -1],
                "key": list(results["key"]) + [None],
                "window_end": list(results["window_end"]) + [-1],
                "value": list(values) + [None],
                "data": [None] * n + [checkpoint[1] if checkpoint else None],
                "applied": [0] * n + [applied],
                "late": [0] * n + [late],
                "replayed": [0] * n + [replayed],
                "watermark_ms": [0] * n + [watermark_ms],
                "state_bytes": [0] * n + [len(encoded)],
            }
        )
        yield out

    return run_group


class _Committer:
    """``foreachBatch``: sink, then durable checkpoints, then the clock."""

    def __init__(self, job: Job, directory: JobDirectory, recovery: Recovery):
        self.job, self.directory, self.recovery = job, directory, recovery

    def __call__(self, frame, batch_id: int) -> None:
        try:
            self._commit(frame, batch_id)
        except StorageError as exc:
            exc.add_note(
                f"micro-batch {self.recovery.generation}.{batch_id} of {self.directory.root} is not "
                f"committed; the clock names durable checkpoints only. Once the storage is fixed, start "
                f"the job again on the same checkpoint directory: it replays this micro-batch (path A)."
            )
            raise

    def _commit(self, frame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        frame.persist()
        try:
            results = frame.where(F.col("kind") == "result").select(
                "key", F.col("time_ms").alias("window_start"), "window_end", "value"
            )
            n_results = results.count()  # the first action computes the micro-batch, into the cache
            crash_point("batch")
            batch = BatchId(self.recovery.generation, batch_id)
            self.job.sink.write(results, batch, self.job.windowed)
            groups = frame.where(F.col("kind") == "group").select(
                "grp", "time_ms", "data", "applied", "late", "replayed", "watermark_ms", "state_bytes"
            ).collect()
        finally:
            frame.unpersist()
        due = [row for row in groups if row.time_ms >= 0]
        checkpoints = {row.grp: row.time_ms for row in due}
        if due:
            with ThreadPoolExecutor(min(len(due), _CHECKPOINT_WRITERS)) as writers:
                # Waits for every write and raises the first failure: no clock without them.
                for _ in writers.map(lambda row: self.directory.store(row.grp).persist(row.time_ms, bytes(row.data)), due):
                    crash_point("checkpoints")
        crash_point("clock")
        clock_ms = self._advance_clock(checkpoints) if self.job.checkpoints else None
        if checkpoints:
            # Keep what the clock's history may still rewind to, drop the rest.
            oldest_ms = self.directory.clock.history()[0].clock_ms
            for grp in checkpoints:
                self.directory.store(grp).retain(oldest_ms)
        progress = BatchProgress(
            generation=batch.generation,
            batch=batch_id,
            rows=sum(r.applied for r in groups),
            late=sum(r.late for r in groups),
            replayed=sum(r.replayed for r in groups),
            results=n_results,
            checkpoints=len(checkpoints),
            clock_ms=clock_ms,
            seconds=time.monotonic() - started,
            watermark_ms=max((r.watermark_ms for r in groups), default=0),
            finished_at_ms=int(time.time() * 1000),
            state_bytes={task_name(r.grp): r.state_bytes for r in groups},
        )
        self.directory.record_progress(dataclasses.asdict(progress))
        if self.job.on_progress:
            self.job.on_progress(progress)

    def _advance_clock(self, checkpoints: dict[int, int]) -> int | None:
        clock = self.directory.clock
        record = clock.read()
        task_clocks = dict(record.task_clocks) if record else {}
        for grp, time_ms in checkpoints.items():
            name = task_name(grp)
            task_clocks[name] = max(time_ms, task_clocks.get(name, 0))
        if not task_clocks:
            return None
        if record is None or task_clocks != record.task_clocks:
            # Task clocks only grow, and a new task's first checkpoint is at the current
            # boundary, so the minimum never moves backwards.
            record = clock.advance(min(task_clocks.values()), task_clocks)
        return record.clock_ms


@dataclass
class RunningJob:
    """A started job: its Spark query and how it started."""

    query: object
    recovery: Recovery
    directory: JobDirectory

    def stop(self) -> None:
        self.query.stop()
