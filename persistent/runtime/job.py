"""The Spark runtime: a ``PersistentTask`` on ``applyInPandasWithState``.

Messages are grouped by **key group** (``pmod(hash(key), key_groups)``), not by key:
one Python call per group and micro-batch updates all of the group's keys with
vectorized monoid folds (``persistent.runtime.keygroup``). Each key group is a task with its
own checkpoints and checkpoint clock. A fresh start sizes the key groups to the
cluster (``KEY_GROUPS_PER_CORE`` per core Spark offers) unless the job names a
number; the job directory records it, and the query runs as many shuffle partitions
as there are cores (at most one per key group).

Per micro-batch, inside Spark:

1. each key group with messages (or whose event-time timeout fired because the
   watermark passed its next checkpoint boundary: idle groups checkpoint too) applies
   its messages, emits results, and, when the watermark has passed a boundary ``T``,
   writes its checkpoint at ``T`` itself, on the executor, to the job directory
   (``persistent.storage.filesystems``: atomic, durable), and reports ``(group, T, size, CRC32)``
   and its counts through a Spark accumulator (``persistent.runtime.reports``); its
   whole state goes to Spark's state store;
2. on the driver (``foreachBatch``, which hands the reports to the plain-Python
   ``persistent.runtime.commit.Commit``): the results go to the sink (idempotent per
   batch); then, once every key group known to the clock has reported its checkpoint
   at ``T``, the global minimum checkpoint clock advances to the minimum of the tasks'
   clocks. The clock never names a checkpoint that is not durable, and no state
   bytes reach the driver: it collects reports of a few numbers per key group.

A key group with no state in Spark's state store in a generation begun by path B
reads its own checkpoint at the restore point (restore by reference), and every
generation's first micro-batch wakes every key group (``persistent.runtime.heartbeats``), so
a restored group that gets no message still checkpoints and never pins the clock.

Bad records (``persistent.core.badrecords``) travel through the same query: the source
marks the records it cannot read, a check before the watermark marks unusable event
times (so they never move the watermark), and the key groups isolate the messages
the task or its monoid refuses. Marked rows change no state; the driver fails the
micro-batch on them or writes them to the dead-letter output, as the job says.

See ``persistent.storage.job_directory`` for the restart paths A and B, and ``persistent.runtime.delivery``
for what changes with at-least-once and at-most-once delivery.
"""

from __future__ import annotations

import enum
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from persistent.core.badrecords import (
    BAD_RECORD_COLUMN, BadRecordError, BadRecords, DeadLetters, LateRecords, late_messages
)
from persistent.core.errors import ConfigError
from persistent.core.faults import CrashPoint, crash_point
from persistent.core.task import PersistentTask
from persistent.runtime.commit import Commit
from persistent.runtime.delivery import Delivery, plan
from persistent.runtime.heartbeats import heartbeats
from persistent.runtime.keygroup import KeyGroup
from persistent.runtime.metrics import JobMetrics
from persistent.runtime.progress import ProgressBar, stderr
from persistent.runtime.reports import GroupReport, Reports
from persistent.runtime.rescale import rescale_if_asked
from persistent.sinks.base import BatchId, Sink
from persistent.sources.base import Source
from persistent.storage.filesystems import JobStorage, UnsupportedFileSystemError, filesystem_for
from persistent.storage.hadoop_fs import HadoopFileSystem
from persistent.storage.job_directory import BatchProgress, JobDirectory, Recovery, RecoveryPath
from state.boundaries import boundary_after
from state.checkpoint_store import Written
from state.errors import StorageError
from state.fs import FileSystem
from state.table import describe

__all__ = ["Job", "RunningJob", "BatchProgress"]

#: How often ``Job.run`` looks at the query's progress for its progress bar.
_PROGRESS_POLL_SECONDS = 0.5

_NUMPY_TO_SPARK = {"i": "bigint", "u": "bigint", "f": "double", "b": "boolean"}
#: Key groups per core of the cluster (``defaultParallelism``) on a fresh start without
#: ``Job.key_groups``: enough to even out uneven groups, few enough that a group's
#: fixed cost per micro-batch stays small.
KEY_GROUPS_PER_CORE = 4
#: Rows per Arrow batch between the JVM and the key groups' Python workers.
ARROW_BATCH_ROWS = 100_000
#: The latest event time Spark's timestamps hold: 9999-12-31T23:59:59.999Z.
MAX_EVENT_TIME_MS = 253_402_300_799_999


@dataclass
class Job:
    """A stateful streaming job: source -> prepare -> task (key groups) -> sink.

    ``prepare`` maps the source's DataFrame to one with columns ``key``,
    ``timestamp`` (ms, bigint) and ``value`` using Spark SQL (for example splitting
    lines into words); by default the source's messages are used as they are. It
    sees only the records the source could read; the others go around it.

    A message is late, counted and not applied, when its event time is more than
    ``watermark_delay_ms`` older than the newest event time of the earlier
    micro-batches; a message at the newest time seen is never late. ``late_records``
    says what else happens to it: nothing (``"drop"``, the default), or it goes to
    the dead-letter output with reason ``late``, its event time and the watermark it
    missed (``"output"``; ``persistent.core.badrecords``).

    ``bad_records`` says what a bad record does (``persistent.core.badrecords``): fail
    the query (``"fail"``, the default) or go to the dead-letter output in
    ``dead_letter_dir`` (``"dead-letter"``; by default ``CHECKPOINT_DIR/dead-letters``).
    With ``max_event_time_skew_ms``, a message whose event time is more than that
    after its micro-batch's processing time is a bad record too.

    ``delivery`` is the guarantee (``persistent.runtime.delivery.Delivery`` or its value):
    ``"exactly-once"`` (the default), ``"at-least-once"`` or ``"at-most-once"``.

    The key groups write and read their checkpoints on the executors, so
    ``checkpoint_dir`` must be reachable from every executor's Python worker
    (``persistent.storage.filesystems``): a shared local path or ``file://``, ``hdfs://``
    (over WebHDFS, at ``webhdfs_address``, by default the NameNode's host on port
    9870), ``webhdfs://``, or an object store: ``s3a://`` (``s3://``), ``gs://``.
    """

    task: PersistentTask
    source: Source
    sink: Sink
    checkpoint_dir: str
    checkpoint_interval_ms: int = 1000
    watermark_delay_ms: int = 0
    #: Key groups (tasks) keys are hashed to; ``None``: the number the checkpoint
    #: directory was written with, on a fresh start ``KEY_GROUPS_PER_CORE`` per core.
    key_groups: int | None = None
    prepare: Callable | None = None
    #: Off, key groups take no checkpoints and the driver keeps no clock: only Spark's
    #: checkpoint location holds the state (recovery path A only; without it the job
    #: starts over from the beginning of its source). For measuring what checkpoints cost.
    checkpoints: bool = True
    on_progress: Callable[[BatchProgress], None] | None = field(default=lambda p: stderr.line(p.line()))
    #: ``run`` shows a progress bar on standard error while an available-now run reads
    #: a bounded source (``Source.backlog``).
    progress_bar: bool = True
    bad_records: BadRecords | str = BadRecords.FAIL
    dead_letter_dir: str | None = None
    late_records: LateRecords | str = LateRecords.DROP
    max_event_time_skew_ms: int | None = None
    delivery: Delivery | str = Delivery.EXACTLY_ONCE
    #: The NameNode's WebHDFS address (``http://HOST:PORT``) for an ``hdfs://`` ``checkpoint_dir``.
    webhdfs_address: str | None = None
    #: A port of the driver to serve the job's metrics on, for Prometheus (``persistent.runtime.metrics``,
    #: the ``metrics`` extra): ``http://DRIVER:PORT/metrics``, from the start until the job stops.
    metrics_port: int | None = None

    def __post_init__(self):
        for name in ("checkpoint_interval_ms", "key_groups"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"Job: {name} must be > 0, got {getattr(self, name)}")
        for name in ("watermark_delay_ms", "max_event_time_skew_ms"):
            if (getattr(self, name) or 0) < 0:
                raise ConfigError(f"Job: {name} must be >= 0, got {getattr(self, name)}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError(f"Job: metrics_port must be a TCP port, 1 to 65535, got {self.metrics_port}")
        self.bad_records = _choice(BadRecords, self.bad_records, "bad_records")
        self.late_records = _choice(LateRecords, self.late_records, "late_records")
        self.delivery = Delivery.of(self.delivery, "Job: delivery")
        self.delivery.check_sink(self.sink)
        # Only exactly-once checkpoints its tasks and keeps a clock.
        self.checkpoints = self.checkpoints and self.delivery.checkpoints
        if self.checkpoints:
            filesystem_for(self.checkpoint_dir, self.webhdfs_address)  # the executors write there
        self.spec = self.task.state_spec()

    @property
    def dead_letters(self) -> DeadLetters:
        """Where bad records go with ``bad_records="dead-letter"``, and late messages
        with ``late_records="output"``."""
        return DeadLetters(self.dead_letter_dir or f"{self.checkpoint_dir.rstrip('/')}/dead-letters")

    @property
    def windowed(self) -> bool:
        return self.spec.window is not None

    def start(self, spark, available_now: bool = False, trigger_ms: int | None = None) -> RunningJob:
        """Plans recovery, builds the query and starts it; with ``metrics_port``, first
        serves the metrics (until ``RunningJob.stop``)."""
        metrics = None
        if self.metrics_port is not None:
            metrics = JobMetrics(self.metrics_port, spark.sparkContext.appName)
            stderr.line(f"[persistent] metrics on http://{metrics.address}/metrics")
        try:
            return self._start(spark, available_now, trigger_ms, metrics)
        except BaseException:
            if metrics:
                metrics.close()
            raise

    def _start(self, spark, available_now: bool, trigger_ms: int | None, metrics: JobMetrics | None) -> RunningJob:
        _ship_by_value(type(self.task))
        directory = JobDirectory(self._filesystem(spark), self.checkpoint_dir)
        storage = JobStorage(self.checkpoint_dir, self.webhdfs_address)
        if self.checkpoints:  # also finishes a rescale a crash interrupted
            rescaled = rescale_if_asked(spark, directory, self.key_groups, storage, self.spec,
                                        self.checkpoint_interval_ms,
                                        lambda: self._messages(spark, 0).schema["key"].dataType.simpleString())
            if rescaled:
                stderr.line(f"[persistent] rescaled the checkpoints at clock {rescaled.clock_ms} from "
                            f"{rescaled.from_groups} to {rescaled.to_groups} key groups")
        cores = spark.sparkContext.defaultParallelism
        recovery = plan(self.delivery, directory, self.key_groups, KEY_GROUPS_PER_CORE * cores,
                        describe(self.spec.monoid, self.checkpoint_interval_ms, self.spec.window, self.spec.ttl_ms),
                        self.sink.newest_generation(spark))
        stderr.line(f"[persistent] {recovery.describe()}")
        if recovery.path is RecoveryPath.FRESH and self.delivery is Delivery.EXACTLY_ONCE:
            # Appended batches carry no marker that a reused batch id could hit.
            self.sink.check_fresh_start(spark)
        if isinstance(self.source, Source):
            self.source.check(None if recovery.path is RecoveryPath.SAME_CHECKPOINT else recovery.floor_ms, storage)
        reports = spark.sparkContext.accumulator({}, Reports())
        results = self._stateful(self._messages(spark, recovery.floor_ms, storage), recovery, storage, reports)
        listeners = tuple(f for f in (metrics.publish if metrics else None, self.on_progress) if f)
        commit = Commit(directory, recovery, self.sink, self.windowed, self.delivery, self.bad_records,
                        self.checkpoints, listeners)
        name = f"persistent-{type(self.task).__name__}-{uuid.uuid4().hex[:8]}"
        writer = results.writeStream.queryName(name).foreachBatch(_ForeachBatch(commit, reports, self.dead_letters))
        writer = writer.option("checkpointLocation", directory.spark).outputMode("update")
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger_ms:
            writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
        # A query takes the session's settings when it starts (and keeps its number of
        # state partitions in its checkpoint): one shuffle partition per core, and Arrow
        # batches that hold a key group's messages in one chunk, not ten thousand rows at a
        # time (Spark hands a group's state to Python again with each chunk).
        settings = {"spark.sql.shuffle.partitions": str(min(recovery.key_groups, cores)),
                    "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS)}
        previous = {name: spark.conf.get(name) for name in settings}
        for name, value in settings.items():
            spark.conf.set(name, value)
        try:
            query = writer.start()
        finally:
            for name, value in previous.items():
                spark.conf.set(name, value)
        return RunningJob(query, recovery, directory, metrics)

    def _filesystem(self, spark) -> FileSystem:
        """The driver's file system for the job directory: the one the executors use
        (``persistent.storage.filesystems``: no JVM round trip per file), or Hadoop's FileSystem
        API for a scheme only Hadoop serves (possible without checkpoints)."""
        try:
            return filesystem_for(self.checkpoint_dir, self.webhdfs_address)
        except UnsupportedFileSystemError:
            return HadoopFileSystem(spark, self.checkpoint_dir)

    def run(self, spark, available_now: bool = True) -> RunningJob:
        """Starts the job and waits until it ends (with ``available_now``: input consumed)."""
        running = self.start(spark, available_now=available_now)
        try:
            # A source of its own (anything with ``stream``) may have no backlog: no bar then.
            backlog_of = getattr(self.source, "backlog", None) if available_now and self.progress_bar else None
            job = _job_of(self.source, JobStorage(self.checkpoint_dir, self.webhdfs_address))
            backlog = backlog_of(running.recovery.floor_ms, **job) if backlog_of else None
            if backlog is None:
                running.query.awaitTermination()
            else:
                running.show_progress(ProgressBar(backlog))
        finally:
            running.stop()
        return running

    def _messages(self, spark, start_ms: int, storage: JobStorage | None = None):
        """Source from event time ``start_ms`` (keeping its records in ``storage``),
        then ``prepare``: columns ``key``, ``timestamp``, ``value`` and ``bad_record``.
        Rows the source marked bad go around ``prepare``."""
        from pyspark.sql import functions as F

        raw = self.source.stream(spark, start_ms, **_job_of(self.source, storage))
        marks = BAD_RECORD_COLUMN in raw.columns
        if self.prepare is None:
            return raw if marks else raw.withColumn(BAD_RECORD_COLUMN, F.lit(None).cast("string"))
        good = raw.where(F.col(BAD_RECORD_COLUMN).isNull()).drop(BAD_RECORD_COLUMN) if marks else raw
        no_mark = F.lit(None).cast("string").alias(BAD_RECORD_COLUMN)
        prepared = self.prepare(good).select("key", "timestamp", "value", no_mark)
        if not marks:
            return prepared
        types = {c.name: c.dataType for c in prepared.schema}
        bad = raw.where(F.col(BAD_RECORD_COLUMN).isNotNull()).select(
            _placeholder(types["key"]).alias("key"), F.col("timestamp").cast(types["timestamp"]),
            _placeholder(types["value"]).alias("value"), BAD_RECORD_COLUMN,
        )
        return prepared.unionByName(bad)

    def _time_check(self):
        """``bad_record`` of a message whose event time is unusable, else null. It runs
        before the watermark, which such a time would otherwise move."""
        from pyspark.sql import functions as F

        millis = F.col("timestamp").try_cast("bigint")

        def bad(reason):
            return F.to_json(F.struct(F.to_json(F.struct("key", "timestamp", "value")).alias("record"),
                                      reason.alias("reason")))

        check = (
            F.when(millis.isNull(), bad(F.lit("no event time: the timestamp is null or not an integer of ms")))
            .when(millis < 0, bad(F.format_string("event time %d ms is negative", millis)))
            .when(millis > MAX_EVENT_TIME_MS, bad(F.format_string("event time %d ms is after the year 9999", millis)))
        )
        if self.max_event_time_skew_ms is not None:
            # In a streaming query current_timestamp() is the micro-batch's time, kept in
            # Spark's offset log: a replayed batch decides the same.
            batch_ms = F.unix_millis(F.current_timestamp())
            check = check.when(millis > batch_ms + self.max_event_time_skew_ms, bad(F.format_string(
                "event time %d ms is more than %d ms after the micro-batch's time %d ms",
                millis, F.lit(self.max_event_time_skew_ms), batch_ms,
            )))
        return millis, check

    def _stateful(self, messages, recovery: Recovery, storage: JobStorage, reports):
        """The key groups' rows: results, and dead letters (``bad_record`` not null); each
        group adds its ``GroupReport`` to the accumulator ``reports``."""
        from pyspark.sql import functions as F
        from pyspark.sql.streaming.state import GroupStateTimeout

        key_type = messages.schema["key"].dataType.simpleString()
        monoid = self.spec.monoid
        value_type = "string" if monoid.json_results else _NUMPY_TO_SPARK[monoid.result_dtype.kind]
        output = (f"key {key_type}, window_start bigint, window_end bigint, value {value_type}, "
                  f"{BAD_RECORD_COLUMN} string")
        millis, time_check = self._time_check()
        good = F.col(BAD_RECORD_COLUMN).isNull()
        rows = (
            messages.select("key", millis.alias("timestamp"), "value",
                            F.coalesce(BAD_RECORD_COLUMN, time_check).alias(BAD_RECORD_COLUMN),
                            # The source partition the row was read in: the same when a
                            # micro-batch is replayed from the same offsets.
                            F.spark_partition_id().alias("part"))
            # Bad records spread over the groups by their text; their null event time
            # neither moves the watermark nor makes them late.
            .withColumn("grp", F.when(good, F.expr(f"pmod(hash(key), {recovery.key_groups})"))
                        .otherwise(F.expr(f"pmod(hash({BAD_RECORD_COLUMN}), {recovery.key_groups})")))
        )
        if self.checkpoints and recovery.heartbeats:
            types = {c.name: c.dataType for c in rows.schema}
            rows = rows.unionByName(heartbeats(messages.sparkSession, recovery.key_groups).select(
                _placeholder(types["key"]).alias("key"), F.lit(None).cast("bigint").alias("timestamp"),
                _placeholder(types["value"]).alias("value"), F.lit(None).cast("string").alias(BAD_RECORD_COLUMN),
                F.lit(-1).alias("part"), "grp",
            ))
        # Spark's watermark trails ours by a millisecond (``_watermark_ms``), so a row
        # at the newest event time seen is in order.
        timed = rows.withColumn("event_time", F.when(good, F.timestamp_millis("timestamp"))).withWatermark(
            "event_time", f"{self.watermark_delay_ms + 1} milliseconds")
        # The key groups decide what is late, against the micro-batch's watermark, and count
        # or output it. Spark's operator would drop late rows first, by its column that
        # carries the watermark's mark; nulled here, the column drops none, and the mark
        # keeps the watermark (getCurrentWatermarkMs, event-time timeouts) working.
        mark = timed.schema["event_time"].metadata
        grouped = timed.withColumn(
            "event_time", F.lit(None).cast("timestamp").alias("event_time", metadata=mark)
        ).groupBy("grp")
        function = _group_function(
            self.task, self.checkpoint_interval_ms, recovery, self.checkpoints, self.bad_records,
            self.late_records, self.delivery.carries_state(self.windowed), storage, reports,
        )
        return grouped.applyInPandasWithState(
            function, output, "table binary", "Update", GroupStateTimeout.EventTimeTimeout
        )


def _choice(kind: type[enum.Enum], value, name: str):
    """``value`` as a member of the enum ``kind``, or a ``ValueError`` naming the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in kind)
        raise ConfigError(f"Job: {name} must be one of {choices}, got {value!r}") from None


def _job_of(source, storage: JobStorage | None) -> dict:
    """The job directory argument of ``source``'s ``stream`` and ``backlog``: a source
    of its own (anything with ``stream``) takes none."""
    return {"job": storage} if isinstance(source, Source) else {}


def _placeholder(data_type):
    """A value of ``data_type`` for a bad record's row: null, except for numbers, whose
    nulls pandas would turn the whole column to floats for."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, NumericType

    if isinstance(data_type, (NumericType, BooleanType)):
        return F.lit(0).cast(data_type)
    return F.lit(None).cast(data_type)


def _ship_by_value(task_class: type) -> None:
    """Lets executors unpickle the task even when its module (an example script, a
    notebook module) is not installed on them: its code travels with the query."""
    from pyspark import cloudpickle

    module = sys.modules.get(task_class.__module__)
    if module is not None and module.__name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)


def _group_function(
    task: PersistentTask,
    interval_ms: int,
    recovery: Recovery,
    checkpoints: bool,
    mode: BadRecords,
    late_records: LateRecords,
    carries: bool,
    storage: JobStorage,
    reports,
):
    floor_ms, restored = recovery.floor_ms, recovery.restored

    def run_group(key, frames, state):
        grp = int(key[0])
        if state.exists and carries:
            group = KeyGroup.decode(task, interval_ms, floor_ms, state.get[0])
        elif grp in restored:
            # Restore by reference: this group's own checkpoint at its generation's floor.
            group = KeyGroup.restore(task, interval_ms, floor_ms, storage.directory().restore(grp, floor_ms))
        else:
            group = KeyGroup(task, interval_ms, floor_ms)
        applied = replayed = late = 0
        max_time_ms = -1
        bad: list[str] = []
        late_output: list[str] = []
        watermark_ms = max(_watermark_ms(state), floor_ms)
        messages = _messages_of(frames)
        if len(messages):
            max_time_ms = _newest_ms(messages)
            try:
                outcome = group.apply(messages, mode, watermark_ms)
                applied, replayed, late = outcome.applied, outcome.replayed, outcome.late_count
                bad = [record.json() for record in outcome.bad]
                if late_records is LateRecords.OUTPUT:
                    late_output = [record.json() for record in late_messages(outcome.late, watermark_ms)]
            except BadRecordError as exc:
                bad = [exc.record.json()]  # the group is as before; the driver fails the micro-batch
        results, checkpoint = group.advance(watermark_ms, checkpoints)
        written, writing_s = Written(0, 0), 0.0
        if checkpoint:
            began = time.monotonic()
            written = _persist(storage.directory(), grp, *checkpoint)
            writing_s = time.monotonic() - began
            crash_point(CrashPoint.CHECKPOINTS)
        encoded = b""
        if carries:
            encoded = group.encode()
            state.update((encoded,))
            crash_point(CrashPoint.GROUP)
            # Wake this group when the watermark reaches its next boundary, even with no input.
            # Spark's watermark trails ours by 1 ms and fires the timeout once it passes it.
            state.setTimeoutTimestamp(max(boundary_after(watermark_ms, interval_ms) - 2, 1))
        reports.add({grp: GroupReport(
            grp=grp, applied=applied, late=late, replayed=replayed, results=len(results),
            watermark_ms=watermark_ms, max_time_ms=max_time_ms, state_bytes=len(encoded),
            bad_records=len(bad), first_bad=min(bad, default=None), late_records=len(late_output),
            checkpoint_ms=checkpoint[0] if checkpoint else None, checkpoint_bytes=written.size,
            checkpoint_crc=written.crc, checkpoint_seconds=writing_s,
        )})
        # A job that fails on bad records needs only the report's first one.
        dead_letters = (bad if mode is BadRecords.DEAD_LETTER else []) + late_output
        yield _output(results, group.monoid, dead_letters)

    return run_group


def _persist(directory: JobDirectory, grp: int, time_ms: int, data: bytes) -> Written:
    """Writes key group ``grp``'s checkpoint at ``time_ms``; returns its file's size and CRC32.

    A retried or speculative attempt of the task writes the same state to the same
    path, atomically: whichever rename comes last leaves one intact file.
    """
    try:
        return directory.store(grp).persist(time_ms, data)
    except StorageError as exc:
        exc.add_note(
            f"key group {grp}'s checkpoint at {time_ms} ms is not durable, and the micro-batch is not "
            f"committed; the clock names durable checkpoints only. Once the storage is fixed, start the "
            f"job again on the same checkpoint directory {directory.root}: it replays this micro-batch (path A)."
        )
        raise


def _watermark_ms(state) -> int:
    """The job's watermark in a micro-batch: a message older than it is late.

    Spark's watermark is the newest event time of the earlier micro-batches minus the
    job's delay and 1 ms; the job's is 1 ms later, so a message at the newest event
    time seen is in order."""
    return state.getCurrentWatermarkMs() + 1


#: What a key group reads of Spark's rows: the message, its bad-record mark and the
#: source partition it was read in (not ``grp``, the group's key, nor the null ``event_time``).
_INPUT_COLUMNS = ("key", "timestamp", "value", BAD_RECORD_COLUMN, "part")


def _messages_of(frames) -> pd.DataFrame:
    """The group's messages from Spark's chunks of rows, without heartbeats, in order.

    Joined column by column: ``pd.concat`` of the chunks would first scan their
    all-null columns for a common type, a sixth of a group's Python time."""
    chunks = [_without_heartbeats(frame) for frame in frames]
    if not chunks:
        return pd.DataFrame({name: np.empty(0, dtype=object) for name in _INPUT_COLUMNS})
    columns = {name: [chunk[name].to_numpy() for chunk in chunks] for name in _INPUT_COLUMNS}
    return _in_order(pd.DataFrame(
        {name: parts[0] if len(parts) == 1 else np.concatenate(parts) for name, parts in columns.items()},
        copy=False,
    ))


def _in_order(messages: pd.DataFrame) -> pd.DataFrame:
    """The group's messages by event time, then source partition, then their order in
    it: the order it folds them in, the same in every run of a micro-batch, whatever
    order Spark's shuffle fetched the source partitions' rows in (which matters for
    ``Last`` on tied times, float sums, ...). The shuffle keeps the rows of one source
    partition in their order; the sort is stable."""
    times, parts = messages["timestamp"].to_numpy(), messages["part"].to_numpy()
    if len(messages) > 1:
        steps, moves = np.diff(times), np.diff(parts)
        if not np.all((steps > 0) | ((steps == 0) & (moves >= 0))):
            messages = messages.iloc[np.lexsort((parts, times))]
    return messages


def _without_heartbeats(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without heartbeat rows (``persistent.runtime.heartbeats``): no event time, no bad-record mark."""
    times = frame["timestamp"]
    if times.dtype.kind != "f":  # Spark hands over a bigint column with nulls as floats
        return frame
    beats = times.isna() & frame[BAD_RECORD_COLUMN].isna()
    if not beats.any():
        return frame
    frame = frame[~beats.to_numpy()]
    if frame["timestamp"].notna().all():
        frame = frame.assign(timestamp=frame["timestamp"].astype(np.int64))
    return frame


def _newest_ms(frame: pd.DataFrame) -> int:
    """The newest event time of the frame's unmarked messages; -1 without any."""
    times = frame.loc[frame[BAD_RECORD_COLUMN].isna(), "timestamp"]
    return int(times.max()) if len(times) else -1


def _output(results: pd.DataFrame, monoid, dead_letters: list[str]) -> pd.DataFrame:
    """A group's rows: its results (``bad_record`` null), then its dead letters
    (``BadRecord`` JSON), whose value is a zero of the results' type, which keeps a
    numeric column numeric. Built from numpy columns."""
    values = results["value"].to_numpy()
    if monoid.json_results:
        values = np.array([monoid.present_json(v) for v in values.tolist()], dtype=object)
    columns = {"key": results["key"].to_numpy(), "window_start": results["window_start"].to_numpy(),
               "window_end": results["window_end"].to_numpy(), "value": values,
               BAD_RECORD_COLUMN: np.full(len(results), None, dtype=object)}
    if dead_letters:
        count = len(dead_letters)
        value = None if values.dtype.kind == "O" else np.zeros(1, dtype=values.dtype)[0]
        more = {"key": np.full(count, None, dtype=object), "window_start": np.full(count, -1),
                "window_end": np.full(count, -1), "value": np.full(count, value, dtype=values.dtype),
                BAD_RECORD_COLUMN: np.array(dead_letters, dtype=object)}
        columns = {name: np.concatenate([column, more[name]]) for name, column in columns.items()}
    return pd.DataFrame(columns, copy=False)


class _ForeachBatch:
    """Spark's ``foreachBatch``: computes the micro-batch once, into Spark's cache, and
    hands the key groups' reports, its results and its dead letters to ``Commit``."""

    def __init__(self, commit: Commit, reports, dead_letters: DeadLetters):
        self.commit, self.dead_letters = commit, dead_letters
        #: The accumulator the key groups add their ``GroupReport`` to.
        self.reports = reports

    def __call__(self, frame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        started = time.monotonic()
        self.reports.value = {}
        frame.persist()
        try:
            # The first action computes the micro-batch, into the cache, and the key groups'
            # reports; the dead letters and the sink read the cache.
            frame.count()
            reports = list(self.reports.value.values())
            computing_s = time.monotonic() - started

            def write_dead_letters(batch: BatchId) -> None:
                bad = frame.where(F.col(BAD_RECORD_COLUMN).isNotNull()).select(BAD_RECORD_COLUMN)
                self.dead_letters.write(bad, batch)

            results = frame.where(F.col(BAD_RECORD_COLUMN).isNull()).drop(BAD_RECORD_COLUMN)
            self.commit(batch_id, reports, results, write_dead_letters, computing_s)
        except StorageError as exc:
            exc.add_note(
                f"micro-batch {self.commit.recovery.generation}.{batch_id} of {self.commit.directory.root} is not "
                f"committed; the clock names durable checkpoints only. Once the storage is fixed, start "
                f"the job again on the same checkpoint directory: it replays this micro-batch (path A)."
            )
            raise
        finally:
            frame.unpersist()


@dataclass
class RunningJob:
    """A started job: its Spark query and how it started."""

    query: object
    recovery: Recovery
    directory: JobDirectory
    #: Serves the job's metrics (``Job.metrics_port``) until ``stop``.
    metrics: JobMetrics | None = None

    def stop(self) -> None:
        """Stops the query, and the metrics server."""
        self.query.stop()
        if self.metrics:
            self.metrics.close()

    def show_progress(self, bar: ProgressBar) -> None:
        """Waits until the query ends, updating ``bar`` from Spark's progress reports."""
        try:
            while not self.query.awaitTermination(_PROGRESS_POLL_SECONDS):
                self._update(bar)
            self._update(bar)
        finally:
            bar.close()

    def _update(self, bar: ProgressBar) -> None:
        # The run's first report says where it began; later, only the newest matters.
        reports = self.query.recentProgress if bar.begin is None else [self.query.lastProgress]
        reports = [r for r in reports if r is not None and r.sources]
        if reports:
            bar.update(reports[0].sources[0].startOffset, reports[-1].sources[0].endOffset)
