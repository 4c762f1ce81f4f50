"""The Spark implementations: native Spark, a hand-written per-key
``applyInPandasWithState``, and this project's tasks, each a streaming query over
a ``ParquetInput`` with Spark's checkpoint location and a no-op sink."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd

from bench.data import BATCH_SPAN_MS, Dataset, ParquetInput
from bench.measure import MemorySampler, RunResult, batches_of, directory_bytes, summarize
from monoids import Averaged, AveragedValue
from persistent import Job, MonoidTask, PersistentTask
from persistent.runtime.planner import Plan
from persistent.sinks.base import Sink
from persistent.storage.filesystems import JobStorage
from persistent.storage.records import BatchProgress
from state import NonWindowState, Window, WindowState

__all__ = ["SparkRuns", "run_directory", "delete_spark_checkpoint", "WINDOW_STEP_MS", "WINDOW_SIZE_MS",
           "CHECKPOINT_INTERVAL_MS", "ROCKSDB"]

CHECKPOINT_INTERVAL_MS = 1_000
#: Spark's state store in RocksDB with changelog checkpointing, for a native query
#: (``SparkRuns.native``): the state off the heap and on local disk, and a micro-batch's
#: checkpoint the changes it made.
ROCKSDB = {"spark.sql.streaming.stateStore.providerClass":
           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
           "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
WINDOW_STEP_MS = 1_000
WINDOW_SIZE_MS = 4 * WINDOW_STEP_MS


class NoopSink(Sink):
    """Computes the results and drops them (Spark's ``noop`` format)."""

    reads_once = True

    def write(self, results, batch, windowed: bool) -> None:
        results.write.format("noop").mode("overwrite").save()


class CountSumPerMessage(PersistentTask):
    """Count and sum of values per key, one message at a time (Gearpump's API)."""

    def persistent_state(self):
        return NonWindowState(Averaged())

    def process_message(self, state, message):
        state.update(message.timestamp, AveragedValue(1, float(message.value)))


class CountSumVectorized(PersistentTask):
    """Count and sum of values per key, a batch of messages at a time."""

    def persistent_state(self):
        return NonWindowState(Averaged())

    def process_batch(self, messages):
        return Averaged().prepare_column(messages["value"].to_numpy(dtype=float))


class CountSumFolded(MonoidTask):
    """Count and sum of values per key, folded before the shuffle (``persistent.runtime.fold``)."""

    def persistent_state(self):
        return NonWindowState(Averaged())


class WindowedCountSum(CountSumVectorized):
    """Count and sum per key over sliding windows."""

    def persistent_state(self):
        return WindowState(Averaged(), Window(WINDOW_SIZE_MS, WINDOW_STEP_MS))


class WindowedCountSumFolded(MonoidTask):
    """Count and sum per key over sliding windows, folded per window pane before the shuffle."""

    def persistent_state(self):
        return WindowState(Averaged(), Window(WINDOW_SIZE_MS, WINDOW_STEP_MS))


def count_sum_per_key(key, frames, state):
    """What a PySpark user writes today: one call per key and micro-batch."""
    count, total = state.get if state.exists else (0, 0)
    for frame in frames:
        count += len(frame)
        total += int(frame["value"].sum())
    state.update((count, total))
    yield pd.DataFrame({"key": [key[0]], "count": [count], "sum": [total]})


class SparkRuns:
    """Runs the implementations in one SparkSession; each run gets its own directory."""

    def __init__(self, spark, work: Path):
        from pyspark import cloudpickle

        import bench.spark_runs

        # Executors do not have the bench folder on their path: ship its code.
        cloudpickle.register_pickle_by_value(bench.spark_runs)
        self.spark = spark
        self.work = work

    def _directory(self, name: str, dataset: Dataset, fresh: bool = True) -> Path:
        """The directory of the runs of ``name`` over ``dataset``: emptied, if ``fresh``."""
        directory = run_directory(self.work, name, dataset)
        if fresh:
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
        return directory

    def _query(self, name: str, dataset: Dataset, files, build, output_mode: str, source=None,
               to: tuple[str, str] | None = None, conf: dict[str, str] | None = None,
               fresh: bool = True) -> RunResult:
        """A native query over ``files`` (or ``source``, a ``Source``): ``build(messages)``
        is the result DataFrame, dropped, or with ``to`` (brokers, topic) written to that
        topic by Spark's Kafka sink (at-least-once), each row's key the record's key and
        the row as JSON its value. The query starts with the SQL settings ``conf``, and
        unless ``fresh`` goes on from the checkpoint of the last run of ``name``."""
        from pyspark.sql import functions as F

        directory = self._directory(name, dataset, fresh)
        messages = (source or ParquetInput(files, directory / "input")).stream(self.spark)
        checkpoint = directory / "checkpoint"
        result = RunResult(name, dataset.distribution, dataset.keys, dataset.batch_rows)
        results = build(messages)
        if to is None:
            writer = results.writeStream.format("noop")
        else:
            records = results.select(F.col("key").cast("string").alias("key"),
                                     F.to_json(F.struct(*[c for c in results.columns if c != "key"])).alias("value"))
            writer = (records.writeStream.format("kafka").option("kafka.bootstrap.servers", to[0])
                      .option("topic", to[1]))
        with MemorySampler(self.spark) as memory, self._settings(conf or {}):
            started = time.monotonic()
            query = (
                writer.outputMode(output_mode)
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
            )
            query.awaitTermination()
            result.wall_s = time.monotonic() - started
        return self._finish(result, batches_of(query), memory, str(checkpoint))

    @contextlib.contextmanager
    def _settings(self, conf: dict[str, str]) -> Iterator[None]:
        """The session's SQL settings ``conf`` while a query starts and runs, then those before."""
        before = {name: self.spark.conf.get(name, None) for name in conf}
        for name, value in conf.items():
            self.spark.conf.set(name, value)
        try:
            yield
        finally:
            for name, value in before.items():
                if value is None:
                    self.spark.conf.unset(name)
                else:
                    self.spark.conf.set(name, value)

    def _finish(self, result: RunResult, batches, memory: MemorySampler, checkpoint: str,
                written: int | None = None) -> RunResult:
        """With ``written``, the bytes of the key groups' checkpoints a job wrote: its
        retention deletes older ones, while Spark keeps its state store's files of every
        batch of a run (``minBatchesToRetain``, 100)."""
        summarize(result, batches)
        result.peak_driver_mb, result.peak_worker_mb = memory.driver_mb, memory.workers_mb
        result.peak_jvm_rss_mb = memory.jvm_rss_mb
        result.cpu_s = memory.cpu_s
        result.checkpoint_bytes = directory_bytes(checkpoint)
        if written is not None:
            result.checkpoint_bytes["checkpoints"] = written
        with_rows = sum(1 for b in batches if b.rows)
        result.checkpoint_bytes_per_batch = sum(result.checkpoint_bytes.values()) / max(with_rows, 1)
        return result

    # -- native Spark ------------------------------------------------------------------

    def native(self, dataset: Dataset, name: str = "native", source=None, to: tuple[str, str] | None = None,
               conf: dict[str, str] | None = None, restart: bool = False) -> RunResult:
        """``groupBy(key).agg(count, sum)`` over the data set's files or ``source`` (whose
        values may be text, as Kafka's are), to ``to``, with the SQL settings ``conf``
        (``_query``). A ``restart`` goes on from the last run of ``name`` over one more
        file (``native_restart``)."""
        from pyspark.sql import functions as F

        return self._query(
            name, dataset, dataset.files + (dataset.extra,) if restart else dataset.files,
            lambda m: m.groupBy("key").agg(F.count("*").alias("count"), F.sum(F.col("value").cast("long")).alias("sum")),
            "update", source, to, conf, fresh=not restart,
        )

    def native_restart(self, dataset: Dataset, name: str, conf: dict[str, str] | None = None) -> float:
        """Restarts the last native run of ``name`` over ``dataset`` with one more file of
        input; returns the seconds from the restart to the end of its first micro-batch
        (Spark's checkpoint is there: this project's path A)."""
        started = time.time()
        return self.native_again(dataset, name, conf) - started

    def native_again(self, dataset: Dataset, name: str, conf: dict[str, str] | None = None) -> float:
        """Runs the last native run of ``name`` over ``dataset`` again with one more file of
        input; returns when its first micro-batch ended (seconds since the epoch)."""
        return _first_batch_end(self.native(dataset, name, conf=conf, restart=True).batches, name, dataset)

    def native_window(self, dataset: Dataset) -> RunResult:
        from pyspark.sql import functions as F

        def build(messages):
            return (
                messages.withColumn("event_time", F.timestamp_millis("timestamp"))
                .withWatermark("event_time", "0 milliseconds")
                .groupBy(F.window("event_time", f"{WINDOW_SIZE_MS} milliseconds", f"{WINDOW_STEP_MS} milliseconds"), "key")
                .agg(F.count("*").alias("count"), F.sum("value").alias("sum"))
            )

        return self._query("native-window", dataset, dataset.files, build, "append")

    def per_key(self, dataset: Dataset, max_batches: int) -> RunResult:
        from pyspark.sql.streaming.state import GroupStateTimeout

        def build(messages):
            return messages.groupBy("key").applyInPandasWithState(
                count_sum_per_key, "key string, count long, sum long", "count long, sum long",
                "Update", GroupStateTimeout.NoTimeout,
            )

        result = self._query("per-key", dataset, dataset.first_files(max_batches), build, "update")
        if max_batches < len(dataset.files):
            result.note = f"first {max_batches} batches only"
        return result

    # -- this project ------------------------------------------------------------------

    def job(self, name: str, dataset: Dataset, task: PersistentTask, files: int | None = None,
            source=None, watermark_delay_ms: int = 0, sink: Sink | None = None, fresh: bool = True) -> Job:
        """A job of ``task`` over ``dataset`` (its first ``files`` files), or over ``source``,
        in a directory emptied first unless not ``fresh``; its results dropped, or written
        to ``sink``."""
        directory = self._directory(name, dataset, fresh)
        return Job(
            task=task,
            source=source or ParquetInput(dataset.first_files(files) if files else dataset.files, directory / "input"),
            watermark_delay_ms=watermark_delay_ms,
            sink=sink or NoopSink(),
            checkpoint_dir=str(directory / "checkpoint"),
            checkpoint_interval_ms=CHECKPOINT_INTERVAL_MS,
            on_progress=None,
        )

    def run_job(self, name: str, dataset: Dataset, job: Job, checkpoints: bool = True) -> RunResult:
        """Runs ``job``; without ``checkpoints``, its key groups take none and no clock
        is kept (``Plan``): what checkpoints cost is the difference."""
        result = RunResult(name, dataset.distribution, dataset.keys, dataset.batch_rows)
        progresses: list[BatchProgress] = []
        job = replace(job, on_progress=progresses.append)
        with MemorySampler(self.spark) as memory:
            started = time.monotonic()
            running = Plan.of(job, checkpoints).run(self.spark)
            result.wall_s = time.monotonic() - started
        result.decoded_groups = sum(p.decoded_groups for p in progresses)
        return self._finish(result, batches_of(running.query), memory, job.checkpoint_dir,
                            sum(p.checkpoint_bytes for p in progresses))

    def warm_up(self, dataset: Dataset, files: int = 4) -> None:
        """Runs the vectorized job over the first ``files`` files, unrecorded. The first
        Python query of a session runs its first few micro-batches slower (Python
        workers start, the JVM compiles the stateful operator's code): without this,
        whichever Python query runs first pays for it."""
        self.job("warm-up", dataset, CountSumVectorized(), files=files).run(self.spark)

    def per_message(self, dataset: Dataset) -> RunResult:
        return self.run_job("per-message", dataset, self.job("per-message", dataset, CountSumPerMessage()))

    def vectorized(self, dataset: Dataset, name: str = "vectorized", checkpoints: bool = True,
                   source=None, sink: Sink | None = None) -> tuple[RunResult, Job]:
        """The vectorized task, with or without its checkpoints and clock, over the data
        set's files or ``source``, its results dropped or written to ``sink``. A source of
        several partitions is read at slightly different event times in each: a
        micro-batch's span of event time is allowed as the watermark's delay."""
        job = self.job(name, dataset, CountSumVectorized(), source=source,
                       watermark_delay_ms=BATCH_SPAN_MS if source else 0, sink=sink)
        return self.run_job(name, dataset, job, checkpoints), job

    def folded(self, dataset: Dataset, name: str = "folded") -> RunResult:
        """The count and sum as a ``MonoidTask``, whose messages fold before the shuffle."""
        return self.run_job(name, dataset, self.job(name, dataset, CountSumFolded()))

    def window(self, dataset: Dataset) -> RunResult:
        return self.run_job("window", dataset, self.job("window", dataset, WindowedCountSum()))

    def folded_window(self, dataset: Dataset) -> RunResult:
        """The windowed count and sum as a ``MonoidTask``, folded per pane before the shuffle."""
        return self.run_job("folded-window", dataset, self.job("folded-window", dataset, WindowedCountSumFolded()))

    # -- recovery ----------------------------------------------------------------------

    def restart(self, job: Job, dataset: Dataset, lose_spark_checkpoint: bool) -> float:
        """Restarts a finished job with one more batch of input; returns the seconds from
        the restart to the end of its first micro-batch (path A: Spark's checkpoint is
        there; path B: it is lost, so the job restores every task at the clock)."""
        if lose_spark_checkpoint:
            delete_spark_checkpoint(job.checkpoint_dir)
        started = time.time()
        return self.run_again(job, dataset) - started

    def run_again(self, job: Job, dataset: Dataset) -> float:
        """Runs ``job`` again over one more file of input; returns when its first
        micro-batch ended (seconds since the epoch)."""
        job = replace(job, source=ParquetInput(dataset.files + (dataset.extra,), job.source.view_root))
        running = job.run(self.spark)  # which stops the job: the next restart takes its lease
        return _first_batch_end(batches_of(running.query), job.checkpoint_dir, dataset)


def run_directory(work: Path, name: str, dataset: Dataset) -> Path:
    """Where the runs of ``name`` over ``dataset`` keep their input view and checkpoints."""
    return work / "runs" / f"{name}-{dataset.name}"


def delete_spark_checkpoint(checkpoint_dir: str | Path) -> None:
    """Deletes the Spark checkpoint of the job directory ``checkpoint_dir``: its restart
    takes path B."""
    JobStorage(str(checkpoint_dir)).directory().spark_log.delete()


def _first_batch_end(batches, what: str, dataset: Dataset) -> float:
    if not batches:
        raise RuntimeError(f"the restart of {what} over {dataset.name} ran no micro-batch")
    return batches[0].end_s
