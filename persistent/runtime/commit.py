"""The driver's commit of one micro-batch: ``Commit``, plain Python.

Spark's ``foreachBatch`` (``persistent.runtime.planner``) hands the micro-batch to a
``Commit`` as a ``MicroBatch``: its results, which the commit passes to the sink
without looking into them, the key groups' reports (``persistent.runtime.reports.GroupReport``)
once it is computed, and a function that writes its dead letters. The commit then, in
this order:

1. **computing**: a sink that ``reads_once`` computes the micro-batch as it writes
   its results (step 3 comes first: one Spark job per batch); for the others, and for
   at-most-once, whose position needs the batch's event times before the sink
   writes, the batch is computed on its own and the sink reads Spark's cache. With
   ``BadRecords.FAIL`` a key group that meets a bad record fails its Spark task, so
   the job computing the batch fails before any of its effects. The group wrote the
   record to the job directory first (Spark hands the driver a failed task's error as
   text only): the commit takes it (``JobDirectory.take_failing_records``; the one of
   the lowest key group, when several groups meet one), the job directory records the
   failed batch (``JobDirectory.record_failed_batch``), and the commit raises
   ``BadRecordError`` naming the record;
2. **dead letters**: the bad records (``BadRecords.DEAD_LETTER``) and the late
   messages the groups output, before the clock: a replay writes them again;
3. **sink**: ``persistent.runtime.delivery.write_effects``, idempotent per ``BatchId``
   with exactly-once;
4. **clock**: once every task the clock knows has reported a checkpoint at the newest
   time ``T`` of the batch, it advances to the minimum of the task clocks; a task that
   did not would pin it, so that is a ``ClockError`` and the clock stays. Before a new
   clock, the source's rewind positions for it are recorded, where it records them
   (``Commit.rewind_positions``);
5. **retention**: the reporting groups drop the checkpoints no clock may rewind to, and
   the job directory the rewind positions;
6. **progress**: the batch's ``BatchProgress`` goes to ``DIR/progress/``, then to the
   listeners (the metrics, ``Job.on_progress``). It holds the job's watermark for the
   next micro-batch, as the key groups report it (``GroupReport.next_watermark_ms``),
   which ``watermark_ms`` hands that micro-batch, also when Spark replays it after a
   restart (path A), and the messages dropped as late so far (``late_total``).

The key groups wrote their checkpoints before they reported them, so the clock names
durable checkpoints only, and everything it covers has reached the sink. The crash
points of the failure tests (``persistent.storage.faults``) are ``batch`` after 1,
``clock`` before 4 and ``committed`` after 6.

Nothing here imports Spark: ``tests/persistent/test_commit.py`` drives the commit
with a job directory on the local file system, as ``tests/persistent/jobwriter.py``
does for the command line's tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from persistent.core.badrecords import BadRecordError, BadRecords
from persistent.storage.faults import CrashPoint, crash_point
from persistent.runtime.delivery import Delivery, write_effects
from persistent.runtime.recovery import Recovery
from persistent.runtime.reports import GroupReport
from persistent.runtime.rows import group_watermark_ms
from persistent.sinks.base import BatchId, Sink
from persistent.storage.job_directory import JobDirectory, task_index, task_name
from persistent.storage.records import BatchProgress, RewindPositions
from state.errors import ClockError

__all__ = ["Commit", "MicroBatch", "Timer"]


class Timer(Protocol):
    """Where a commit reads the time: the ``time`` module, or a test's stand-in."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...


class MicroBatch(Protocol):
    """One micro-batch as the runtime computes it (``persistent.runtime.planner``):
    once, by ``compute`` or by the sink's read of ``results``."""

    #: The results, for the sink (a Spark DataFrame); reading them computes the batch.
    results: Any

    def compute(self) -> None:
        """Computes the batch, writing nothing (a Spark job of its own)."""

    def reports(self) -> list[GroupReport]:
        """The key groups' reports, once the batch is computed."""

    def write_dead_letters(self, batch: BatchId) -> None:
        """Writes the bad records and late messages the key groups output."""


@dataclass(frozen=True)
class Commit:
    """Commits the micro-batches of one run of a job; see the module docstring."""

    directory: JobDirectory
    #: How the run started: its generation, and the restore point of path B.
    recovery: Recovery
    sink: Sink
    windowed: bool
    delivery: Delivery = Delivery.EXACTLY_ONCE
    bad_records: BadRecords = BadRecords.FAIL
    #: Off (``Job.checkpoints``), the groups report no checkpoints and no clock is kept.
    checkpoints: bool = True
    #: Called in order with each batch's progress, once it is recorded.
    listeners: tuple[Callable[[BatchProgress], Any], ...] = ()
    timer: Timer = time
    #: Where the source rewinds to for a clock (``Source.rewind_positions``), or None
    #: for a source that needs no record of it.
    rewind_positions: Callable[[int], dict[str, dict[str, int]]] | None = None
    #: No chain of a key group's checkpoints crosses a multiple of this
    #: (``persistent.runtime.keygroup.whole_every_ms``), which retention keeps; None:
    #: every checkpoint is whole. Always named: retention that is not told would break
    #: the chains it keeps.
    whole_every_ms: int | None = field(kw_only=True)
    #: Whether the key groups run with the job's watermark (``watermark_ms``), which they
    #: compute from every source partition's newest event time, else with Spark's: whether
    #: Spark's half of the fold is loaded, which sends them those times.
    job_watermark: bool = field(default=False, kw_only=True)
    #: Per key group, the whole checkpoint each checkpoint it wrote in this run starts its
    #: chain at (``GroupReport.whole_ms``), from the oldest one retention may keep on;
    #: ``dataclasses.replace`` hands the same record on.
    wholes: dict[int, dict[int, int]] = field(default_factory=dict, kw_only=True, repr=False, compare=False)
    #: The progress record before the micro-batch to commit next, by its id (``_before``).
    befores: dict[int, BatchProgress | None] = field(default_factory=dict, kw_only=True, repr=False, compare=False)

    @property
    def sink_computes(self) -> bool:
        """Whether the sink's write computes each micro-batch (step 1 of the module docstring)."""
        return self.sink.reads_once and self.delivery is not Delivery.AT_MOST_ONCE

    def watermark_ms(self, batch_id: int) -> int | None:
        """The job's watermark in Spark's micro-batch ``batch_id``, for its tasks; None for
        a job whose groups run with Spark's. It follows from the micro-batch before it
        (its progress record); the first of a generation, and one whose predecessor ran
        with Spark's watermark, run with Spark's (its offset log's)."""
        if not self.job_watermark:
            return None
        before = self._before(batch_id)
        if before is not None and before.generation == self.recovery.generation and before.next_watermark_ms is not None:
            return before.next_watermark_ms
        return group_watermark_ms(self.directory.spark_log.watermark_ms(batch_id), self.recovery.floor_ms)

    def _before(self, batch_id: int) -> BatchProgress | None:
        """The progress record of the micro-batch before ``batch_id``: of the one before it
        in the generation, or, for its first, the newest of an earlier generation; None
        without one."""
        if batch_id not in self.befores:
            generation = self.recovery.generation
            if batch_id:
                before = self.directory.read_batch_progress(generation, batch_id - 1)
            else:
                before = next((p for p in reversed(self.directory.read_progress(2)) if p.generation < generation), None)
            self.befores[batch_id] = before
        return self.befores[batch_id]

    def __call__(self, batch_id: int, micro_batch: MicroBatch) -> BatchProgress:
        """Computes and commits Spark's micro-batch ``batch_id``; returns its progress."""
        watermark_ms = self.watermark_ms(batch_id)
        started = self.timer.monotonic()
        batch = BatchId(self.recovery.generation, batch_id)
        with self._failing_on_bad_records(batch):
            if self.sink_computes:
                write_effects(self.delivery, self.directory, self.sink, micro_batch.results, batch, self.windowed)
            else:
                micro_batch.compute()
        reports = micro_batch.reports()
        computed = self.timer.monotonic()
        crash_point(CrashPoint.BATCH)
        dead_letters = self._dead_letters(batch, reports, micro_batch.write_dead_letters)
        if not self.sink_computes:
            next_ms = max((r.max_time_ms for r in reports), default=-1) + 1
            write_effects(self.delivery, self.directory, self.sink, micro_batch.results, batch, self.windowed, next_ms)
        checkpoints = {r.grp: r.checkpoint_ms for r in reports if r.checkpoint_ms is not None}
        for report in reports:
            if report.checkpoint_ms is not None and report.whole_ms is not None:
                self.wholes.setdefault(report.grp, {})[report.checkpoint_ms] = report.whole_ms
        crash_point(CrashPoint.CLOCK)
        clock_ms = self._advance_clock(checkpoints, batch) if self.checkpoints else None
        if checkpoints:
            self._retain(checkpoints)
        next_ms = None
        if watermark_ms is not None:
            next_ms = max([watermark_ms] + [r.next_watermark_ms for r in reports if r.next_watermark_ms is not None])
        late = sum(r.late for r in reports)
        before = self._before(batch_id)
        late_before = before.late_total if before is not None and before.late_total is not None else 0
        ended = self.timer.monotonic()
        progress = BatchProgress(
            generation=batch.generation,
            batch=batch_id,
            rows=sum(r.applied for r in reports),
            late=late,
            replayed=sum(r.replayed for r in reports),
            results=sum(r.results for r in reports),
            checkpoints=len(checkpoints),
            clock_ms=clock_ms,
            seconds=ended - started,
            watermark_ms=max((r.watermark_ms for r in reports), default=0) if watermark_ms is None else watermark_ms,
            next_watermark_ms=next_ms,
            late_total=late_before + late,
            finished_at_ms=int(self.timer.time() * 1000),
            state_bytes={task_name(r.grp): r.state_bytes for r in reports},
            dead_letters=dead_letters,
            checkpoint_bytes=sum(r.checkpoint_bytes for r in reports),
            checkpoint_crcs={task_name(r.grp): r.checkpoint_crc for r in reports if r.checkpoint_ms is not None},
            checkpoint_seconds=sum(r.checkpoint_seconds for r in reports),
            commit_seconds=ended - computed,
            folded=sum(r.folded for r in reports),
            partials=sum(r.partials for r in reports),
            spark_half=self.job_watermark,
            keys={task_name(r.grp): r.keys for r in reports},
            worker_peak_bytes=max((r.worker_peak_bytes for r in reports), default=None),
            decoded_groups=sum(r.decoded for r in reports),
        )
        self.directory.record_progress(progress)
        self.befores.clear()
        self.befores[batch_id + 1] = progress
        for listener in self.listeners:
            listener(progress)
        crash_point(CrashPoint.COMMITTED)
        return progress

    @contextmanager
    def _failing_on_bad_records(self, batch: BatchId):
        """Turns a failure of the micro-batch's computing on a bad record (a key group's
        task failed with ``BadRecordError``, under ``BadRecords.FAIL``) into a
        ``BadRecordError`` naming it, once the job directory has recorded the failed batch."""
        try:
            yield
        except Exception:
            records = self.directory.take_failing_records() if self.bad_records is BadRecords.FAIL else []
            if not records:
                raise
            self.directory.record_failed_batch(batch.generation, batch.batch)
            # Spark's error holds the task's trace: the record is what it has to say.
            raise BadRecordError(records[0], where=f"micro-batch {batch.generation}.{batch.batch}") from None

    @staticmethod
    def _dead_letters(batch: BatchId, reports: Sequence[GroupReport], write: Callable[[BatchId], Any]) -> int:
        """Writes the bad records and late messages the key groups output to the
        dead-letter output; returns how many were written."""
        written = sum(r.bad_records + r.late_records for r in reports)
        if written:
            write(batch)
        return written

    def _advance_clock(self, checkpoints: dict[int, int], batch: BatchId) -> int | None:
        """Advances the clock over the checkpoints the key groups reported, once every
        task the clock knows has reported the newest of them."""
        clock = self.directory.clock
        record = clock.read()
        # The clock names its tasks; the commit counts in key groups, as the reports do.
        known = {task_index(task): ms for task, ms in record.task_clocks.items()} if record else {}
        group_clocks = dict(known)
        if checkpoints:
            newest = max(checkpoints.values())
            silent = [grp for grp, ms in sorted(known.items()) if ms < newest and grp not in checkpoints]
            if silent:
                raise ClockError(
                    f"micro-batch {batch.generation}.{batch.batch} of {self.directory.root}: the watermark passed "
                    f"the checkpoint boundary {newest} ms but task(s) {', '.join(map(task_name, silent))} reported "
                    f"no checkpoint there; the clock stays at {record.clock_ms} ms"
                )
        for grp, time_ms in checkpoints.items():
            group_clocks[grp] = max(time_ms, group_clocks.get(grp, 0))
        if not group_clocks:
            return None
        if record is None or group_clocks != known:
            # Task clocks only grow, and a new task's first checkpoint is at the current
            # boundary, so the minimum never moves backwards.
            clock_ms = min(group_clocks.values())
            if self.rewind_positions is not None and (record is None or clock_ms != record.clock_ms):
                self.directory.record_rewind_positions(RewindPositions(clock_ms, self.rewind_positions(clock_ms)))
            record = clock.advance(clock_ms, {task_name(grp): ms for grp, ms in sorted(group_clocks.items())})
        return record.clock_ms

    def _retain(self, checkpoints: dict[int, int]) -> None:
        """Keeps the checkpoints the clock's history may still rewind to, and those at the
        restore point of a generation begun by path B (its groups read them when they
        have no state in Spark), with their chains; drops the rest."""
        oldest_ms = self.directory.clock.oldest_restorable_ms()
        if oldest_ms is None:
            return  # no clock yet
        if self.recovery.restored:
            oldest_ms = min(oldest_ms, self.recovery.floor_ms)
        for grp in checkpoints:
            wholes = self.wholes.get(grp, {})
            self.directory.store(grp).retain(oldest_ms, self.whole_every_ms, wholes)
            for time_ms in [time_ms for time_ms in wholes if time_ms < oldest_ms]:
                del wholes[time_ms]
        if self.rewind_positions is not None:
            self.directory.retain_rewind_positions(oldest_ms)
