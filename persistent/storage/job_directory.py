"""The layout of a job's checkpoint directory: every path under it is named here.

::

    DIR/spark/                 Spark's checkpoint location (offsets, commits, state store;
                               ``persistent.storage.spark_log``)
    DIR/spark/heartbeats/      the heartbeat rows of the generation's first micro-batch
                               (``SparkLog.write_heartbeats``)
    DIR/checkpoints/<task>/    each key group's checkpoints, one file per checkpoint time;
                               the task of key group ``g`` is ``task_name(g)``
    DIR/clock/                 the global minimum checkpoint clock and per-task clocks
    DIR/generation             which Spark checkpoint generation runs, its restore point, the
                               restored key groups and the number of key groups (``Generation``)
    DIR/progress/              one JSON record per committed micro-batch, the newest 100
                               (``BatchProgress``)
    DIR/input/                 the files source's log of the files it took
                               (``persistent.storage.files_log``)
    DIR/generated/             a bounded generator's messages as Parquet files
                               (``persistent.sources.generator``)
    DIR/failed-batch           the micro-batch that last failed on a bad record, before
                               any of its effects (its input may be fixed for the replay;
                               ``FailedBatch``)
    DIR/failing/<task>         the bad record a key group met, which fails its Spark task
                               (``BadRecords.FAIL``), until the driver takes it
                               (``JobDirectory.take_failing_records``)
    DIR/delivery               the delivery setting the directory was written with
                               (``persistent.runtime.delivery``)
    DIR/position               at-most-once's position taken (``DeliveryPosition``)
    DIR/rewind/<T>             where a source that records it (Kafka) rewinds to for clock
                               ``T``, written before the clock reaches ``T`` (``RewindPositions``)
    DIR/rescale/               only while key groups are re-split (``persistent.runtime.rescale``):
                               the staged checkpoints, then the plan (``RescalePlan``)
    DIR/dead-letters/          the dead-letter output, unless the job names another directory
                               (``JobDirectory.default_dead_letters``)
    DIR/lease/<term>           which process holds the directory: the newest term's ``Lease``
                               (``persistent.storage.lease``)

A pipeline's directory (``persistent.runtime.pipeline``) holds one job directory per
stage, ``DIR/stage-1``, ``DIR/stage-2``, ... (``stage_directory``, ``pipeline_stages``).

The small JSON records are ``persistent.storage.records``'s. Which way a job starts
on what the directory holds (fresh, path A, path B) is the runtime's decision
(``persistent.runtime.recovery``); the directory only reads and writes.
"""

from __future__ import annotations

import re
from typing import TypeVar

from persistent.core.badrecords import BadRecord
from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore
from persistent.storage.fs import FileSystem
from persistent.storage.records import (
    BatchProgress,
    DeliveryPosition,
    FailedBatch,
    Generation,
    Lease,
    Record,
    RescalePlan,
    RewindPositions,
)
from persistent.storage.spark_log import SparkLog
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError
from state.tables import Stored

__all__ = ["JobDirectory", "task_name", "task_index", "stage_directory", "pipeline_stages", "PROGRESS_KEPT"]

#: How many micro-batch progress records a job directory keeps.
PROGRESS_KEPT = 100
#: What to do with a progress record that cannot be read: it only reports its micro-batch
#: (and the watermark of the next, which then runs with Spark's).
_PROGRESS_REMEDY = "it only reports its micro-batch: delete it"
#: A pipeline stage's job directory in the pipeline's: ``stage-N``, from 1.
_STAGE = re.compile(r"stage-(\d+)")
#: A progress record's name: ``<generation:06d>-<batch:012d>.json``.
_PROGRESS_NAME = re.compile(r"\d{6}-\d{12}\.json")
#: A key group's task name (``task_name``).
_TASK_NAME = re.compile(r"group-(\d+)")

_R = TypeVar("_R", bound=Record)


def task_name(group: int) -> str:
    """The task (checkpoint store) name of key group ``group``."""
    return f"group-{group:05d}"


def task_index(name: str) -> int:
    """Inverse of ``task_name``."""
    return int(name.rsplit("-", 1)[1])


class JobDirectory:
    """The files of one job under ``root``, through ``fs``."""

    #: What a job's directory holds once the job has started: any of these marks one.
    MARKS = ("spark", "checkpoints", "clock", "generation", "progress")

    def __init__(self, fs: FileSystem, root: str):
        self.fs = fs
        self.root = root.rstrip("/")
        #: Spark's checkpoint location, the query's ``checkpointLocation``.
        self.spark = fs.join(self.root, "spark")
        self.spark_log = SparkLog(fs, self.spark)
        self.checkpoints = fs.join(self.root, "checkpoints")
        self.clock = ClockStore(fs, fs.join(self.root, "clock"))
        #: The ``Generation`` record's file.
        self.generation_file = fs.join(self.root, "generation")
        self.progress = fs.join(self.root, "progress")
        self.input_log = fs.join(self.root, "input")
        self._failed_batch = fs.join(self.root, "failed-batch")
        self._failing = fs.join(self.root, "failing")
        self._delivery = fs.join(self.root, "delivery")
        self._position = fs.join(self.root, "position")
        self._rewind = fs.join(self.root, "rewind")
        self._rescale = fs.join(self.root, "rescale")
        self._rescale_checkpoints = fs.join(self._rescale, "checkpoints")
        self._rescale_plan = fs.join(self._rescale, "plan")
        self._lease = fs.join(self.root, "lease")

    @staticmethod
    def default_dead_letters(root: str) -> str:
        """``DIR/dead-letters``: where the job at ``root`` writes its dead letters unless it
        names another directory. Spark writes them, so naming it needs no file system."""
        return f"{root.rstrip('/')}/dead-letters"

    def holds_a_job(self) -> bool:
        """Whether the directory holds any of what a started job writes (``MARKS``)."""
        return bool(set(self.fs.list_names(self.root)) & set(self.MARKS))

    def is_empty(self) -> bool:
        """Whether the directory holds nothing but its lease (or does not exist)."""
        return not set(self.fs.list_names(self.root)) - {"lease"}

    def store(self, group: int) -> CheckpointStore:
        """The checkpoint store of key group ``group``."""
        return CheckpointStore(self.fs, self.checkpoints, task_name(group))

    def staged_store(self, group: int) -> CheckpointStore:
        """The checkpoint store a rescale stages new key group ``group``'s checkpoint in."""
        return CheckpointStore(self.fs, self._rescale_checkpoints, task_name(group))

    def groups(self) -> list[int]:
        """The key groups that have a checkpoint directory, sorted."""
        return sorted(task_index(n) for n in self.fs.list_names(self.checkpoints) if _TASK_NAME.fullmatch(n))

    def delete_group(self, group: int) -> None:
        """Deletes key group ``group``'s checkpoints, all of them."""
        self.fs.delete(self.store(group).directory)

    def delete_input_log(self) -> None:
        """Deletes the files source's log: a fresh start takes its files again."""
        self.fs.delete(self.input_log)

    def delete_rescale(self) -> None:
        """Deletes what a rescale staged, and its plan."""
        self.fs.delete(self._rescale)

    def _read(self, kind: type[_R], path: str, remedy: str = "") -> _R | None:
        """The record of ``kind`` at ``path``, None without the file (``Record.from_json``)."""
        try:
            raw = self.fs.read_bytes(path)
        except FileNotFoundError:
            return None
        return kind.from_json(raw, path, remedy)

    def _write(self, path: str, record: Record) -> None:
        self.fs.write_atomic(path, record.to_json())

    def read_delivery(self) -> tuple[str, str] | None:
        """The delivery setting the directory was written with, as a word, and the file
        it is in; None when unrecorded."""
        try:
            return self.fs.read_bytes(self._delivery).decode("utf-8", "replace").strip(), self._delivery
        except FileNotFoundError:
            return None

    def record_delivery(self, word: str) -> None:
        """Records the delivery setting (``persistent.runtime.delivery.Delivery``)."""
        self.fs.write_atomic(self._delivery, word.encode())

    def record_progress(self, progress: BatchProgress) -> None:
        """Writes one micro-batch's progress record and keeps the newest ``PROGRESS_KEPT``."""
        self._write(self._progress_of(progress.generation, progress.batch), progress)
        for old in self.fs.list_names(self.progress)[:-PROGRESS_KEPT]:
            self.fs.delete(self.fs.join(self.progress, old))

    def read_batch_progress(self, generation: int, batch: int) -> BatchProgress | None:
        """The progress record of micro-batch ``batch`` of ``generation``; None when there is none."""
        return self._read(BatchProgress, self._progress_of(generation, batch), _PROGRESS_REMEDY)

    def _progress_of(self, generation: int, batch: int) -> str:
        return self.fs.join(self.progress, f"{generation:06d}-{batch:012d}.json")

    def read_progress(self, last: int) -> list[BatchProgress]:
        """The ``last`` newest progress records, oldest first."""
        names = [n for n in self.fs.list_names(self.progress) if _PROGRESS_NAME.fullmatch(n)][-last:]
        records = [self._read(BatchProgress, self.fs.join(self.progress, name), _PROGRESS_REMEDY) for name in names]
        return [r for r in records if r is not None]  # None: the running job pruned it after the listing

    def record_failed_batch(self, generation: int, batch: int) -> None:
        """Records that Spark's micro-batch ``batch`` of ``generation`` failed before any of
        its effects (on a bad record, with ``BadRecords.FAIL``): its input may be fixed
        before the replay."""
        self._write(self._failed_batch, FailedBatch(generation, batch))

    def record_failing_record(self, group: int, record: BadRecord) -> None:
        """Key group ``group`` met ``record`` and fails its Spark task on it (with
        ``BadRecords.FAIL``): Spark hands the driver a failed task's error only as text,
        so the record travels here, written before the task fails."""
        self.fs.write_atomic(self.fs.join(self._failing, task_name(group)), record.json().encode())

    def take_failing_records(self) -> list[BadRecord]:
        """The records ``record_failing_record`` wrote, by key group, and deletes them."""
        names = [name for name in self.fs.list_names(self._failing) if _TASK_NAME.fullmatch(name)]
        records = [BadRecord.from_json(self.fs.read_bytes(self.fs.join(self._failing, name)).decode())
                   for name in sorted(names, key=task_index)]
        self.fs.delete(self._failing)
        return records

    def read_position(self) -> DeliveryPosition | None:
        """At-most-once's position taken, or None before the first run."""
        return self._read(DeliveryPosition, self._position, "delete it to start the sources from the beginning")

    def record_position(self, position: DeliveryPosition) -> None:
        """Writes at-most-once's position taken."""
        self._write(self._position, position)

    def record_rewind_positions(self, positions: RewindPositions) -> None:
        """Records where the source rewinds to for clock ``positions.clock_ms``."""
        self._write(self.fs.join(self._rewind, f"{positions.clock_ms:015d}"), positions)

    def read_rewind_positions(self, clock_ms: int) -> RewindPositions | None:
        """Where the source rewinds to for clock ``clock_ms``; None when unrecorded."""
        return self._read(RewindPositions, self.fs.join(self._rewind, f"{clock_ms:015d}"),
                          f"delete it to restart from clock {clock_ms} ms without checking the source's retention")

    def retain_rewind_positions(self, oldest_ms: int) -> None:
        """Drops the rewind positions of clocks before ``oldest_ms``, where no restart goes."""
        for name in self.fs.list_names(self._rewind):
            if name.isdigit() and int(name) < oldest_ms:
                self.fs.delete(self.fs.join(self._rewind, name))

    def lease_terms(self) -> list[int]:
        """The terms of the lease records present, oldest first."""
        return sorted(int(name) for name in self.fs.list_names(self._lease) if name.isdigit())

    def _lease_path(self, term: int) -> str:
        return self.fs.join(self._lease, f"{term:012d}")

    def read_lease(self, term: int) -> Lease | None:
        """The lease record of ``term``; None when it is gone."""
        return self._read(Lease, self._lease_path(term), f"delete it once no job runs on {self.root}")

    def create_lease(self, term: int, lease: Lease) -> None:
        """Writes the record of the new ``term``; ``FileExistsError`` when another wrote it first."""
        self.fs.create_new(self._lease_path(term), lease.to_json())

    def record_lease(self, term: int, lease: Lease) -> None:
        """Replaces the record of ``term`` (renewed, released)."""
        self._write(self._lease_path(term), lease)

    def delete_lease(self, term: int) -> None:
        self.fs.delete(self._lease_path(term))

    def read_rescale_plan(self) -> RescalePlan | None:
        """The rescale whose install has begun but not finished, if any."""
        return self._read(RescalePlan, self._rescale_plan)

    def record_rescale_plan(self, plan: RescalePlan) -> None:
        """Records that the install of ``plan`` begins: every new key group's checkpoint is staged."""
        self._write(self._rescale_plan, plan)

    def failed_batch_offsets(self) -> tuple[list[str], list[str]] | None:
        """The offsets (JSON, one per source of the query) where the micro-batch recorded
        by ``record_failed_batch`` starts and ends, while Spark's checkpoint is to replay
        it: it is of the current generation, Spark's newest and not committed. None
        otherwise, and for a generation's first micro-batch (its start is in no log)."""
        failed = self._read(FailedBatch, self._failed_batch,
                            "delete it (changed input of the failed micro-batch is then refused)")
        if failed is None:
            return None
        current = self.read_generation()
        batch, log = failed.batch, self.spark_log
        if (current is None or failed.generation != current.generation or batch != log.newest_batch() or batch == 0
                or log.committed(batch)):
            return None
        return log.source_offsets(batch - 1), log.source_offsets(batch)

    def read_generation(self) -> Generation | None:
        """The current start, or None before the first start."""
        # Without it and Spark's checkpoint, a start restarts from the clock, as a copy of
        # the directory without them does.
        return self._read(Generation, self.generation_file, f"delete it and {self.spark} to restart from the clock")

    def record_key_groups(self, key_groups: int) -> None:
        """Records that the directory's checkpoints are split into ``key_groups`` groups
        now (after a rescale, with Spark's checkpoint gone): the next start takes path B
        with them."""
        current = self.read_generation() or Generation(0, 0)
        self._write(self.generation_file, Generation(current.generation, current.floor_ms, key_groups,
                                                 heartbeats=True, state=current.state, heartbeat_files=True))

    def record_generation(self, generation: Generation) -> None:
        """Records the generation that starts."""
        self._write(self.generation_file, generation)

    def restore(self, group: int, time_ms: int, crc: int | None = None,
                known: tuple[int, int] | None = None) -> list[Stored]:
        """The chain of key group ``group``'s checkpoint at ``time_ms``
        (``CheckpointStore.recover``, after ``known`` if it passes that one): its
        generation's restore point, or with ``crc``, the CRC32 it was written with, the
        checkpoint its state in Spark follows (``persistent.runtime.keygroup.KeyGroup.encode``).
        A missing, damaged or other checkpoint raises, with a note naming the command that
        restarts from the newest intact clock in the history."""
        try:
            return self.store(group).recover(time_ms, crc, known)
        except (CorruptCheckpointError, MissingCheckpointError) as exc:
            exc.add_note(self.rewind_advice())
            raise

    def rewind_advice(self) -> str:
        """What to do when a checkpoint the clock names is damaged or missing: the command
        that restarts from the newest clock in the history whose checkpoints all read."""
        try:
            past = self.clock.history()
        except ClockError as exc:
            return f"The clock's history cannot be read either: {exc}"
        for record in reversed(past):
            try:
                for task in record.task_clocks:
                    self.store(task_index(task)).recover(record.clock_ms)
            except (CorruptCheckpointError, MissingCheckpointError):
                continue
            return (
                f"The newest clock in the history whose checkpoints are all intact is {record.clock_ms} ms: "
                f"stop the job, run `persistent rewind {self.root} --to {record.clock_ms}`, then start it "
                f"again (recovery path B)."
            )
        return (
            f"No clock in the history ({self.clock.history_directory}) has intact checkpoints of every "
            f"task: start the job on a new checkpoint directory."
        )


def stage_directory(root: str, stage: int) -> str:
    """The job directory of ``stage`` (from 1) of the pipeline whose directory is ``root``."""
    return f"{root.rstrip('/')}/stage-{stage}"


def pipeline_stages(fs: FileSystem, root: str) -> list[str]:
    """The stages' job directories of the pipeline whose directory is ``root``, in order;
    none when ``root`` holds no stage."""
    stages = sorted(int(m.group(1)) for m in map(_STAGE.fullmatch, fs.list_names(root)) if m)
    return [stage_directory(root, stage) for stage in stages]
