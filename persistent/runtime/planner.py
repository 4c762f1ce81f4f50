"""The planner: a ``Job`` on Spark, a ``PersistentTask`` on ``applyInPandasWithState``.

``Plan.of(job)`` reads the job's description (``persistent.runtime.description``) once
(choices parsed, the task's state spec computed); ``Plan.start`` plans recovery, builds
the query and starts it.

Messages are grouped by **key group** (``pmod(hash(key), key_groups)``), not by key:
one Python call per group and micro-batch updates all of the group's keys with
vectorized monoid folds (``persistent.runtime.keygroup``; the function Spark
calls is ``persistent.runtime.stateful``). Each key group is a task with its
own checkpoints and checkpoint clock. A fresh start sizes the key groups to the
cluster (``KEY_GROUPS_PER_CORE`` per core Spark offers) unless the job names a
number; the job directory records it, and the query runs as many shuffle partitions
as there are cores (at most one per key group), which the groups take in turn: Spark
groups the rows by each group's slot (``persistent.runtime.layout``).

Per micro-batch, inside Spark:

1. each key group with messages (or whose event-time timeout fired because the
   watermark passed its next checkpoint boundary: idle groups checkpoint too) applies
   its messages, emits results, and, when the watermark has passed a boundary ``T``,
   writes its checkpoint at ``T`` itself, on the executor, to the job directory
   (``persistent.storage.filesystems``: atomic, durable), and reports ``(group, T, size, CRC32)``
   and its counts through a Spark accumulator (``persistent.runtime.reports``); its
   state goes to Spark's state store: the rows since its last checkpoint and a
   reference to that checkpoint (``KeyGroup.encode``);
2. on the driver (``foreachBatch``, which hands the micro-batch to the plain-Python
   ``persistent.runtime.commit.Commit``): the results go to the sink (idempotent per
   batch; a sink that reads its results once computes the batch as it writes them,
   so a micro-batch is one Spark job); then, once every key group known to the clock
   has reported its checkpoint at ``T``, the global minimum checkpoint clock advances
   to the minimum of the tasks' clocks. The clock never names a checkpoint that is not
   durable, and no state bytes reach the driver: it collects reports of a few numbers
   per key group.

The job's watermark is the least of the source partitions' newest event times, less
the delay, never back: every task before the shuffle (one source partition) sends
every group the newest event time it read (``persistent.runtime.fold.newest_per_group``),
each group works out the next micro-batch's watermark from them and reports it, and
the driver hands it to that micro-batch's tasks, recording it with the progress so
that a replay runs with it again (``persistent.runtime.commit.Commit.watermark_ms``).
A partition behind the others (after a restart, one that holds less to catch up on)
so holds the watermark back, and no message of it is late for the order in which
Spark reads the partitions. Spark's own watermark, the newest event time less the
delay, only wakes the groups (event-time timeouts, micro-batches without data).
Where the watermark alone changes no state (no windows, no ``ttl_ms``), a key group
checkpoints at the next micro-batch's watermark instead of its own. The last
micro-batch with messages then takes the checkpoint a micro-batch without data would,
and the query runs none (``Plan.watermark_acts_alone``).

A key group with no state in Spark's state store in a generation begun by path B
reads its own checkpoint at the restore point (restore by reference), and every
generation's first micro-batch wakes every key group (``persistent.runtime.heartbeats``), so
a restored group that gets no message still checkpoints and never pins the clock.

Bad records (``persistent.core.badrecords``) travel through the same query: the source
marks the records it cannot read, a check before the watermark marks unusable event
times (so they never move the watermark), and the key groups isolate the messages
the task or its monoid refuses. Marked rows change no state; a key group fails its
Spark task on them, and so the micro-batch, or the driver writes them to the
dead-letter output, as the job says.

See ``persistent.runtime.recovery`` for the restart paths A and B, and ``persistent.runtime.delivery``
for what changes with at-least-once and at-most-once delivery.
"""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from persistent.core.badrecords import BAD_RECORD_COLUMN, BadRecords, LateRecords
from persistent.core.errors import RestartRefusedError
from persistent.runtime.commit import Commit
from persistent.runtime.delivery import Delivery, plan
from persistent.runtime.description import JobDescription
from persistent.runtime.fold import (FOLD_PROPERTY, PASS, WATERMARK_PROPERTY, Fold, Folding, fold_of, folded,
                                     load_extension, newest_per_group, pack_of, packed)
from persistent.runtime.heartbeats import heartbeats
from persistent.runtime.keygroup import whole_every_ms
from persistent.runtime.layout import group_slots
from persistent.runtime.metrics import JobMetrics
from persistent.runtime.progress import ProgressBar, stderr
from persistent.runtime.recovery import Recovery, RecoveryPath, state_partitions
from persistent.runtime.reports import Reports
from persistent.runtime.rescale import rescale_if_asked
from persistent.runtime.rows import (ARROW_BATCH_ROWS, GROUP, JOB_WATERMARK_PROPERTY, KEY, KIND, TIMESTAMP, VALUE, group,
                                     heartbeat_columns, kind, marked_columns, message_columns, no_mark, watermarked)
from persistent.runtime.running import RunningJob
from persistent.runtime.spark import check_spark, minor_of
from persistent.runtime.stateful import DEAD_LETTERS, RESULT_COLUMNS, GroupFunction, output_schema
from persistent.sinks.base import BatchId
from persistent.sources.base import Source
from persistent.sources.bounds import SPARK_BOUNDS
from persistent.storage.dead_letters import DeadLetters
from persistent.storage.filesystems import JobStorage, UnsupportedFileSystemError, filesystem_for
from persistent.storage.fs import FileSystem
from persistent.storage.hadoop_fs import HadoopFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import JobLease
from state.errors import StorageError
from state.persistent_state import PersistentState
from state.table_format import describe
from state.window import bucket_ms

__all__ = ["Plan", "KEY_GROUPS_PER_CORE"]

#: Whether a query runs a micro-batch when its watermark moved and no data came.
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"

_NUMPY_TO_SPARK = {"i": "bigint", "u": "bigint", "f": "double", "b": "boolean"}
#: Key groups per core of the cluster (``defaultParallelism``) on a fresh start without
#: ``Job.key_groups``: enough to even out uneven groups, few enough that a group's
#: fixed cost per micro-batch stays small.
KEY_GROUPS_PER_CORE = 4

@dataclass(frozen=True)
class Plan:
    """A job's settings as the runtime uses them: the choices parsed, the task's state
    spec computed once, checkpoints on only where the delivery keeps them.

    ``Plan.of`` checks what ``Job`` cannot see in its numbers alone: the choices, the
    sink against the delivery, the checkpoint directory against the executors' file
    systems, the task's declaration. ``checkpoints=False`` turns the key groups'
    checkpoints and the clock off (Spark's checkpoint location alone holds the state,
    recovery path A only): the benchmark measures what checkpoints cost with it.
    """

    #: What it plans: a ``Job``'s settings (the ``Job`` itself, whose ``plan`` this is).
    job: JobDescription
    spec: PersistentState
    delivery: Delivery
    bad_records: BadRecords
    late_records: LateRecords
    checkpoints: bool

    @classmethod
    def of(cls, job: JobDescription, checkpoints: bool = True) -> Plan:
        delivery = Delivery.of(job.delivery, "Job: delivery")
        delivery.check_sink(job.sink)
        # Only exactly-once checkpoints its tasks and keeps a clock.
        checkpoints = checkpoints and delivery.checkpoints
        if checkpoints:
            filesystem_for(job.checkpoint_dir, job.webhdfs_address)  # the executors write there
        return cls(job, job.task.state_spec(), delivery, BadRecords.of(job.bad_records, "Job: bad_records"),
                   LateRecords.of(job.late_records, "Job: late_records"), checkpoints)

    @property
    def windowed(self) -> bool:
        return self.spec.window is not None

    @property
    def watermark_acts_alone(self) -> bool:
        """Whether the watermark's passing changes the state without a message: windows
        close, keys expire (``ttl_ms``)."""
        return self.windowed or self.spec.ttl_ms is not None

    def wakes_idle_groups(self, early: bool) -> bool:
        """Whether a key group without rows must still run once the watermark passes its
        next boundary: its windows close, its keys expire, or a checkpoint falls due that
        no micro-batch with messages took (without ``early``, ``_checkpoints_early``).
        Only such a query runs micro-batches without data and has its groups set
        event-time timeouts: a task of the stateful stage calls Python twice with them,
        once for its groups' rows and once for the timeouts due, even when none is."""
        return self.watermark_acts_alone or (self.checkpoints and not early)

    def settings(self) -> dict[str, str]:
        """The settings the job's metrics serve as ``persistent_job_info``: its task, source
        and sink by class (a sink's URI may hold a password), its job directory, delivery,
        checkpoint interval, watermark delay, key groups and record handling."""
        job = self.job
        return {
            "task": type(job.task).__name__,
            "source": type(job.source).__name__,
            "sink": type(job.sink).__name__,
            "checkpoint_dir": job.checkpoint_dir,
            "delivery": self.delivery.value,
            "checkpoint_interval_ms": str(job.checkpoint_interval_ms),
            "watermark_delay_ms": str(job.watermark_delay_ms),
            "key_groups": "as the job directory has them" if job.key_groups is None else str(job.key_groups),
            "bad_records": self.bad_records.value,
            "late_records": self.late_records.value,
        }

    def serve_metrics(self, app: str) -> JobMetrics:
        """Serves the metrics of application ``app``'s run of the job on ``Job.metrics_port``
        (``Job.metrics_host``), with its settings from the start (``settings``)."""
        return JobMetrics(self.job.metrics_port, app, self.job.metrics_host, self.settings())

    def start(self, spark, available_now: bool = False, trigger_ms: int | None = None) -> RunningJob:
        """Takes the job directory's lease (``persistent.storage.lease``: a directory
        another job runs on is refused here, before anything is written), plans
        recovery, builds the query and starts it; with ``Job.metrics_port``, first
        serves the metrics (until ``RunningJob.stop``). A session of a Spark the project
        does not run on is refused first."""
        check_spark(spark)
        directory = JobDirectory(self._filesystem(spark), self.job.checkpoint_dir)
        lease = JobLease.acquire(directory, f"Spark application {spark.sparkContext.applicationId}",
                                 report=lambda message: stderr.line(f"[persistent] {message}"))
        metrics, closing = None, []
        try:
            if self.job.metrics_port is not None:
                metrics = self.serve_metrics(spark.sparkContext.appName)
                closing.append(metrics)
                stderr.line(f"[persistent] metrics on http://{metrics.address}/metrics")
            return self._start(spark, directory, lease, available_now, trigger_ms, metrics, closing)
        except BaseException:
            for each in closing:
                each.close()
            lease.close()
            raise

    def run(self, spark, available_now: bool = True) -> RunningJob:
        """Starts the job and waits until it ends (with ``available_now``: input consumed)."""
        job = self.job
        running = self.start(spark, available_now=available_now)
        try:
            # A source of its own (anything with ``stream``) may have no backlog: no bar then.
            backlog_of = getattr(job.source, "backlog", None) if available_now and job.progress_bar else None
            storage = JobStorage(job.checkpoint_dir, job.webhdfs_address)
            backlog = backlog_of(running.recovery.floor_ms, **_job_of(job.source, storage)) if backlog_of else None
            running.wait(ProgressBar(backlog) if backlog is not None else None)
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or a signal of persistent.runtime.stopping.on_signals
            raise running.stopped_by(interrupt) from None
        except BaseException:
            running.stop()
            raise
        running.stop()
        return running

    def _start(self, spark, directory: JobDirectory, lease: JobLease, available_now: bool, trigger_ms: int | None,
               metrics: JobMetrics | None, closing: list) -> RunningJob:
        """Starts the query on ``directory`` (whose ``lease`` the job holds); ``closing``
        gathers what the job holds open until it stops."""
        job = self.job
        _ship_by_value(type(job.task))
        storage = JobStorage(job.checkpoint_dir, job.webhdfs_address)
        if self.checkpoints:  # also finishes a rescale a crash interrupted
            self._rescale(spark, directory, storage)
        directory.take_failing_records()  # of a job that stopped before it took them
        cores = spark.sparkContext.defaultParallelism
        unloaded = _load_spark_half(spark, metrics)
        early = self._checkpoints_early(unloaded)
        wakes = self.wakes_idle_groups(early)
        recovery = self._plan_recovery(spark, directory, storage, cores, unloaded, wakes)
        reports = spark.sparkContext.accumulator({}, Reports())
        drains = available_now and not SPARK_BOUNDS and _reads_python(job.source)
        messages = self._messages(spark, recovery.floor_ms, storage, drains)
        fold, packs = self._crossing(messages, unloaded)
        results = self._stateful(messages, recovery, directory, storage, reports, fold, early, packs,
                                 reaches=unloaded is None)
        commit = self._commit(directory, recovery, metrics, closing, job_watermark=unloaded is None)
        writer = self._writer(results, commit, reports, directory, fold is not None, available_now and not drains,
                              trigger_ms)
        with _session_settings(spark, _query_settings(spark, directory, recovery, cores, wakes)):
            query = writer.start()
            _wait_for_sources(query)
        lease.when_lost(lambda reason: _stop_on_lost(query, reason))
        return RunningJob(query, recovery, directory, tuple(closing), lease, drains)

    def _rescale(self, spark, directory: JobDirectory, storage: JobStorage) -> None:
        """Re-splits the checkpoints into the job's number of key groups if it asks for
        another than the directory's, or finishes a rescale a crash interrupted
        (``persistent.runtime.rescale``), and says so in the log."""
        job = self.job
        rescaled = rescale_if_asked(spark, directory, job.key_groups, storage, self.spec, job.checkpoint_interval_ms,
                                    lambda: self._messages(spark, 0).schema[KEY].dataType.simpleString())
        if rescaled:
            stderr.line(f"[persistent] rescaled the checkpoints at clock {rescaled.clock_ms} from "
                        f"{rescaled.from_groups} to {rescaled.to_groups} key groups")

    def _plan_recovery(self, spark, directory: JobDirectory, storage: JobStorage, cores: int, unloaded: str | None,
                       wakes: bool) -> Recovery:
        """Plans the start on ``directory`` (``persistent.runtime.delivery.plan``), its key
        groups spread over ``cores``, with event-time timeouts if the query ``wakes``
        idle groups, and checks it: a Spark checkpoint of a query without the timeouts
        this one needs is refused (``unloaded``, when Spark's half is not loaded, is why
        it needs them), a fresh exactly-once start has its sink checked, and the source
        checks the start's restore point."""
        job = self.job
        recovery = plan(self.delivery, directory, job.key_groups, KEY_GROUPS_PER_CORE * cores,
                        describe(self.spec.monoid, job.checkpoint_interval_ms, self.spec.window, self.spec.ttl_ms),
                        job.sink.newest_generation(spark), cores, timeouts=wakes)
        stderr.line(f"[persistent] {recovery.describe()}")
        if wakes and not recovery.timeouts:
            why = unloaded or "its state changes with the watermark alone"
            raise RestartRefusedError(
                f"{directory.spark} holds the state of a query without event-time timeouts, whose key groups "
                f"checkpointed a micro-batch early; this start cannot ({why}) and needs them. Mend that and "
                f"start again, or delete {directory.spark} to restart from the clock (path B)")
        if recovery.path is RecoveryPath.FRESH and self.delivery is Delivery.EXACTLY_ONCE:
            # Appended batches carry no marker that a reused batch id could hit.
            job.sink.check_fresh_start(spark)
        if isinstance(job.source, Source):
            job.source.check(None if recovery.path is RecoveryPath.SAME_CHECKPOINT else recovery.floor_ms, storage)
        return recovery

    def _commit(self, directory: JobDirectory, recovery: Recovery, metrics: JobMetrics | None, closing: list,
                job_watermark: bool) -> Commit:
        """What commits each micro-batch on the driver (``persistent.runtime.commit``),
        handing its progress to the ``metrics`` and ``Job.on_progress``; the source's
        rewind positions it opens join ``closing``. With ``job_watermark`` (Spark's half
        loaded), the key groups run with the job's watermark (``Commit.job_watermark``)."""
        job = self.job
        listeners = tuple(f for f in (metrics.publish if metrics else None, job.on_progress) if f)
        # Only a clock needs rewind positions: a run without checkpoints opens no lookups.
        rewind_positions = (job.source.rewind_positions() if self.checkpoints and isinstance(job.source, Source)
                            else None)
        if rewind_positions is not None:
            closing.append(rewind_positions)
        return Commit(directory, recovery, job.sink, self.windowed, self.delivery, self.bad_records,
                      self.checkpoints, listeners, rewind_positions=rewind_positions,
                      whole_every_ms=whole_every_ms(job.checkpoint_interval_ms), job_watermark=job_watermark)

    def _writer(self, results, commit: Commit, reports, directory: JobDirectory, folds: bool, available_now: bool,
                trigger_ms: int | None):
        """The query's writer: each micro-batch of the key groups' ``results`` to
        ``commit`` (``_ForeachBatch``, whose ``folds`` says whether the job folds its
        messages), Spark's checkpoint in ``directory``; with ``available_now``, Spark's
        available-now trigger, else one every ``trigger_ms`` (Spark's default without)."""
        job = self.job
        name = f"persistent-{type(job.task).__name__}-{uuid.uuid4().hex[:8]}"
        writer = results.writeStream.queryName(name).foreachBatch(
            _ForeachBatch(commit, reports, job.dead_letters, folds=folds))
        writer = writer.option("checkpointLocation", directory.spark).outputMode("update")
        if available_now:
            writer = writer.trigger(availableNow=True)
        elif trigger_ms:
            writer = writer.trigger(processingTime=f"{trigger_ms} milliseconds")
        return writer

    def _filesystem(self, spark) -> FileSystem:
        """The driver's file system for the job directory: the one the executors use
        (``persistent.storage.filesystems``: no JVM round trip per file), or Hadoop's FileSystem
        API for a scheme only Hadoop serves (possible without checkpoints)."""
        try:
            return filesystem_for(self.job.checkpoint_dir, self.job.webhdfs_address)
        except UnsupportedFileSystemError:
            return HadoopFileSystem(spark, self.job.checkpoint_dir)

    def _messages(self, spark, start_ms: int, storage: JobStorage | None = None, available_now: bool = False):
        """Source from event time ``start_ms`` (keeping its records in ``storage``; up
        to the end it fixes when first asked, with ``available_now``), then ``prepare``:
        columns ``key``, ``timestamp``, ``value`` and ``bad_record``. Rows the source
        marked bad go around ``prepare``."""
        from pyspark.sql import functions as F

        job = self.job
        fixed_end = {"available_now": True} if available_now else {}
        raw = job.source.stream(spark, start_ms, **_job_of(job.source, storage), **fixed_end)
        marks = BAD_RECORD_COLUMN in raw.columns
        if job.prepare is None:
            return raw if marks else raw.withColumn(BAD_RECORD_COLUMN, no_mark())
        good = raw.where(F.col(BAD_RECORD_COLUMN).isNull()).drop(BAD_RECORD_COLUMN) if marks else raw
        prepared = job.prepare(good).select(KEY, TIMESTAMP, VALUE, no_mark())
        if not marks:
            return prepared
        types = {c.name: c.dataType for c in prepared.schema}
        return prepared.unionByName(raw.where(F.col(BAD_RECORD_COLUMN).isNotNull()).select(*marked_columns(types)))

    def _crossing(self, messages, unloaded: str | None) -> tuple[Fold | None, bool]:
        """How the job's messages cross the shuffle (``persistent.runtime.fold``): folded
        (the fold), else packed per key group (True), else each as a row; folded or packed
        with Spark's half loaded (else ``unloaded`` says why not). The job says which way."""
        key_type, value_type = (messages.schema[name].dataType.simpleString() for name in (KEY, VALUE))
        fold, why = fold_of(self.job.task, value_type)
        packs = False
        if fold is None:
            packs, why = pack_of(key_type, value_type)
        if unloaded and (fold is not None or packs):
            fold, packs, why = None, False, f"every message crosses the shuffle as a row: {unloaded}"
        stderr.line(f"[persistent] {why}")
        return fold, packs

    def _checkpoints_early(self, unloaded: str | None) -> bool:
        """Whether the key groups checkpoint at the next micro-batch's watermark
        (``persistent.runtime.stateful.GroupFunction.early``): a job with checkpoints whose
        state the watermark alone does not change, with Spark's half loaded (else
        ``unloaded`` says why not; it sends the groups the micro-batch's newest event time)."""
        if not self.checkpoints or self.watermark_acts_alone:
            return False
        if unloaded:
            stderr.line(f"[persistent] key groups checkpoint at each micro-batch's own watermark: {unloaded}")
        return unloaded is None

    def _stateful(self, messages, recovery: Recovery, directory: JobDirectory, storage: JobStorage, reports,
                  fold: Fold | None = None, early: bool = False, packs: bool = False, reaches: bool = False):
        """The key groups' rows, one per group with results or dead letters
        (``persistent.runtime.stateful.output_schema``); each group adds its
        ``GroupReport`` to the accumulator ``reports``. The groups' input is
        ``persistent.runtime.rows``: each message's row, a heartbeat's per group in
        a generation's first micro-batch, and, where Spark's half ``reaches`` them, the
        newest event time of each source partition's messages per group, from which
        the groups follow the job's watermark (``early``: checkpoint at the next
        micro-batch's); the messages folded (``fold``) or packed (``packs``) before the
        shuffle. Event-time timeouts wake the groups without rows if the generation's
        query has them (``Recovery.timeouts``)."""
        from pyspark.sql.streaming.state import GroupStateTimeout

        job = self.job
        key_type = messages.schema[KEY].dataType.simpleString()
        monoid = self.spec.monoid
        value_type = "string" if monoid.json_results else _NUMPY_TO_SPARK[monoid.result_dtype.kind]
        rows = (messages.select(*message_columns(job.max_event_time_skew_ms)).withColumn(KIND, kind())
                .withColumn(GROUP, group(recovery.key_groups)))
        if self.checkpoints and recovery.heartbeats:
            types = {c.name: c.dataType for c in rows.schema}
            rows = rows.unionByName(heartbeats(messages.sparkSession, recovery, directory).select(
                *heartbeat_columns(types)))
        rows = watermarked(rows, job.watermark_delay_ms)
        if reaches:
            rows = newest_per_group(rows, recovery.key_groups)
        if fold is not None:
            rows = folded(rows, fold, recovery.floor_ms, bucket_ms(self.spec.window, job.checkpoint_interval_ms))
        elif packs:
            rows = packed(rows)
        grouped = rows.withColumn(GROUP, _slot(recovery)).groupBy(GROUP)
        function = GroupFunction(
            task=job.task, interval_ms=job.checkpoint_interval_ms, recovery=recovery, checkpoints=self.checkpoints,
            bad_records=self.bad_records, late_records=self.late_records,
            carries=self.delivery.carries_state(self.windowed), storage=storage, reports=reports, fold=fold,
            delay_ms=job.watermark_delay_ms if reaches else None, early=early,
        )
        timeout = GroupStateTimeout.EventTimeTimeout if recovery.timeouts else GroupStateTimeout.NoTimeout
        return grouped.applyInPandasWithState(
            function, output_schema(key_type, value_type), "table binary", "Update", timeout)


def _slot(recovery: Recovery):
    """What Spark groups the key groups' rows by, in place of the group's number in the
    column ``grp``: each group's slot (``persistent.runtime.layout``), which spreads the
    groups evenly over the state partitions. The column keeps its name, so a Spark
    checkpoint of an earlier version (grouped by the number) meets the same key schema."""
    from pyspark.sql import functions as F

    if recovery.partitions is None:
        return F.col(GROUP)
    slots = group_slots(recovery.key_groups, recovery.partitions)
    return F.array(*(F.lit(slot) for slot in slots))[F.col(GROUP)]


def _stop_on_lost(query, reason: str) -> None:
    """Stops a job that lost its directory's lease: another job may write there now."""
    stderr.line(f"[persistent] {reason}: stopping this job")
    query.stop()


def _reads_python(source) -> bool:
    """Whether ``source`` is read by a Python data source of the project's
    (``persistent.sources.bounds``)."""
    return isinstance(source, Source) and source.reader is not None


def _job_of(source, storage: JobStorage | None) -> dict:
    """The job directory argument of ``source``'s ``stream`` and ``backlog``: a source
    of its own (anything with ``stream``) takes none."""
    return {"job": storage} if isinstance(source, Source) else {}


#: The setting naming the class that writes Spark's checkpoint location (its logs and state store files).
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def _local_checkpoint_files(spark_version: str) -> str:
    """The class for a checkpoint location on a local disk: Hadoop's ``FileSystem``, which
    renames with one ``rename(2)`` (atomic, replacing the target, on a local disk). Spark's
    default goes through Hadoop's ``FileContext``, which without Hadoop's native library
    (pip's pyspark has none) starts a ``readlink`` process for each file it renames: the
    count example's driver started 499 processes in nine micro-batches, 114 with this
    (a ``chmod`` for each new file). Spark 4.1 moved it into a package of its own."""
    package = "org.apache.spark.sql.execution.streaming"
    if minor_of(spark_version) != "4.0":
        package += ".checkpointing"
    return f"{package}.FileSystemBasedCheckpointFileManager"


def _query_settings(spark, directory: JobDirectory, recovery: Recovery, cores: int, wakes: bool) -> dict[str, str]:
    """The session's settings for the query, which takes them when it starts (and keeps
    its number of state partitions in its checkpoint): one shuffle partition per core,
    at most one per key group (``Recovery.partitions``, or ``state_partitions`` for a
    generation that recorded none), Arrow batches that hold a key group's messages in
    one chunk, not ten thousand rows at a time (Spark hands a group's state to Python
    again with each chunk), a micro-batch without data only where it changes something
    (``wakes``: ``Plan.wakes_idle_groups``), and for a Spark checkpoint on a local
    disk, Hadoop's ``FileSystem`` (``_local_checkpoint_files``)."""
    partitions = recovery.partitions or state_partitions(recovery.key_groups, cores)
    settings = {"spark.sql.shuffle.partitions": str(partitions),
                "spark.sql.execution.arrow.maxRecordsPerBatch": str(ARROW_BATCH_ROWS),
                NO_DATA_BATCHES: str(wakes).lower()}
    if _on_local_disk(spark, directory.spark):
        settings[CHECKPOINT_FILE_MANAGER] = _local_checkpoint_files(spark.version)
    return settings


@contextlib.contextmanager
def _session_settings(spark, settings: dict[str, str]) -> Iterator[None]:
    """Sets ``settings`` in ``spark``'s session for the block; after it, each is again
    what it was, or unset."""
    previous = {name: spark.conf.get(name, None) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


def _load_spark_half(spark, metrics: JobMetrics | None) -> str | None:
    """Loads Spark's half of the fold into the session (``persistent.runtime.fold.load_extension``)
    and serves whether it did with the ``metrics``; returns None, or why it could not,
    which the log says with what that costs."""
    unloaded = load_extension(spark)
    if metrics:
        metrics.started(spark_half=unloaded is None)
    if unloaded:
        stderr.line(f"[persistent] the watermark is Spark's, which a source partition behind the others does "
                    f"not hold back: {unloaded}")
    return unloaded


#: A query's status while it has not made its sources yet (Spark's ``StreamExecution``).
_INITIALIZING = ("Initializing StreamExecution", "Initializing sources")


def _wait_for_sources(query, timeout_s: float = 60) -> None:
    """Returns once ``query`` has made its sources, or has ended: a source reads the
    session's settings when it is made (a file source, for the log of the files it
    read), after ``start`` has returned."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["message"] in _INITIALIZING and time.monotonic() < deadline:
        time.sleep(0.01)


def _on_local_disk(spark, location: str) -> bool:
    """Whether Hadoop, with the session's settings, finds ``location`` on the local file system."""
    from py4j.java_gateway import is_instance_of

    context = spark.sparkContext
    path = context._jvm.org.apache.hadoop.fs.Path(location)
    return is_instance_of(context._gateway, path.getFileSystem(context._jsc.hadoopConfiguration()),
                          "org.apache.hadoop.fs.LocalFileSystem")


def _ship_by_value(task_class: type) -> None:
    """Lets executors unpickle the task even when its module (an example script, a
    notebook module) is not installed on them: its code travels with the query."""
    from pyspark import cloudpickle

    module = sys.modules.get(task_class.__module__)
    if module is not None and module.__name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)


class _ForeachBatch:
    """Spark's ``foreachBatch``: hands each micro-batch (``_SparkBatch``) to ``Commit``."""

    def __init__(self, commit: Commit, reports, dead_letters: DeadLetters, folds: bool = False):
        self.commit, self.dead_letters = commit, dead_letters
        #: The accumulator the key groups add their ``GroupReport`` to.
        self.reports = reports
        #: Whether the job folds its messages before the shuffle (``persistent.runtime.fold``):
        #: its tasks read the micro-batch's watermark from a local property, and whether
        #: the next micro-batch folds or passes its rows through is ``folding``'s choice,
        #: which Spark's planner reads from the query's thread.
        self.folding = Folding() if folds else None

    def __call__(self, frame, batch_id: int) -> None:
        self.reports.value = {}
        context = frame.sparkSession.sparkContext
        # What each key group takes for its watermark (GroupFunction), for the tasks of the batch.
        watermark_ms = self.commit.watermark_ms(batch_id)
        if watermark_ms is not None:
            context.setLocalProperty(JOB_WATERMARK_PROPERTY, str(watermark_ms))
        # Without the watermark no row folds: as Spark planned a micro-batch that passes its rows through.
        folds = self.folding is not None and context.getLocalProperty(FOLD_PROPERTY) != PASS
        if folds:
            context.setLocalProperty(WATERMARK_PROPERTY, str(watermark_ms))
        # The computing job fills Spark's cache (a row per key group): the dead letters,
        # and the sink when it did not compute the batch itself, read it.
        frame.persist()
        try:
            progress = self.commit(batch_id, _SparkBatch(frame, self.reports, self.dead_letters))
        except StorageError as exc:
            exc.add_note(
                f"micro-batch {self.commit.recovery.generation}.{batch_id} of {self.commit.directory.root} is not "
                f"committed; the clock names durable checkpoints only. Once the storage is fixed, start "
                f"the job again on the same checkpoint directory: it replays this micro-batch (path A)."
            )
            raise
        finally:
            frame.unpersist()
            context.setLocalProperty(JOB_WATERMARK_PROPERTY, None)
            if folds:
                context.setLocalProperty(WATERMARK_PROPERTY, None)
        if self.folding is not None:
            passes = self.folding.passes_next(progress.folded, progress.partials)
            context.setLocalProperty(FOLD_PROPERTY, PASS if passes else None)


class _SparkBatch:
    """A micro-batch of the key groups' rows (``persistent.runtime.commit.MicroBatch``)."""

    def __init__(self, frame, reports, dead_letters: DeadLetters):
        from pyspark.sql import functions as F

        self.frame, self.accumulator, self.dead_letters = frame, reports, dead_letters
        self.results = frame.select(F.inline(F.arrays_zip(*RESULT_COLUMNS)))

    def compute(self) -> None:
        # Spark's no-op writer computes the batch without the shuffle and the stage a count adds.
        self.frame.write.format("noop").mode("overwrite").save()

    def reports(self) -> list:
        return list(self.accumulator.value.values())

    def write_dead_letters(self, batch: BatchId) -> None:
        from pyspark.sql import functions as F

        self.dead_letters.write(self.frame.select(F.explode(DEAD_LETTERS).alias(BAD_RECORD_COLUMN)), batch)
