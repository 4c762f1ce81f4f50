"""The driver's commit of one micro-batch: ``Commit``, plain Python.

Spark's ``foreachBatch`` (``persistent.runtime.planner``) computes the micro-batch, reads
the key groups' reports (``persistent.runtime.reports.GroupReport``) and hands them to
a ``Commit`` with the batch's results, which the commit passes to the sink without
looking into them, and a function that writes its dead letters. The commit then, in
this order:

1. **bad records**: with ``BadRecords.FAIL`` a bad record fails the micro-batch before
   any of its effects (``BadRecordError`` names the smallest of the groups'
   ``first_bad``, so the same one however the groups ran), and the job directory
   records the failed batch (``JobDirectory.record_failed_batch``);
2. **dead letters**: the bad records (``BadRecords.DEAD_LETTER``) and the late
   messages the groups output, before the sink and the clock: a replay writes them again;
3. **sink**: ``persistent.runtime.delivery.write_effects``, idempotent per ``BatchId``
   with exactly-once;
4. **clock**: once every task the clock knows has reported a checkpoint at the newest
   time ``T`` of the batch, it advances to the minimum of the task clocks; a task that
   did not would pin it, so that is a ``ClockError`` and the clock stays;
5. **retention**: the reporting groups drop the checkpoints no clock may rewind to;
6. **progress**: the batch's ``BatchProgress`` goes to ``DIR/progress/``, then to the
   listeners (the metrics, ``Job.on_progress``).

The key groups wrote their checkpoints before they reported them, so the clock names
durable checkpoints only, and everything it covers has reached the sink. The crash
points of the failure tests (``persistent.core.faults``) are ``batch`` before 1,
``clock`` before 4 and ``committed`` after 6.

Nothing here imports Spark: ``tests/persistent/test_commit.py`` drives the commit
with a job directory on the local file system, as ``tests/persistent/jobwriter.py``
does for the command line's tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords
from persistent.core.faults import CrashPoint, crash_point
from persistent.runtime.delivery import Delivery, write_effects
from persistent.runtime.reports import GroupReport
from persistent.sinks.base import BatchId, Sink
from persistent.storage.job_directory import BatchProgress, JobDirectory, Recovery, task_index, task_name
from state.errors import ClockError

__all__ = ["Commit", "Timer"]


class Timer(Protocol):
    """Where a commit reads the time: the ``time`` module, or a test's stand-in."""

    def monotonic(self) -> float: ...

    def time(self) -> float: ...


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

    def __call__(
        self,
        batch_id: int,
        reports: Sequence[GroupReport],
        results,
        write_dead_letters: Callable[[BatchId], Any],
        computing_seconds: float = 0.0,
    ) -> BatchProgress:
        """Commits Spark's micro-batch ``batch_id`` from the key groups' ``reports``:
        ``results`` go to the sink, ``write_dead_letters(batch)`` is called when the
        groups report bad records or late messages to write. ``computing_seconds`` is
        how long computing the batch took before the commit. Returns the batch's progress."""
        computed = self.timer.monotonic()
        crash_point(CrashPoint.BATCH)
        batch = BatchId(self.recovery.generation, batch_id)
        dead_letters = self._dead_letters(batch, reports, write_dead_letters)
        next_ms = max((r.max_time_ms for r in reports), default=-1) + 1
        write_effects(self.delivery, self.directory, self.sink, results, batch, self.windowed, next_ms)
        checkpoints = {r.grp: r.checkpoint_ms for r in reports if r.checkpoint_ms is not None}
        crash_point(CrashPoint.CLOCK)
        clock_ms = self._advance_clock(checkpoints, batch) if self.checkpoints else None
        if checkpoints:
            self._retain(checkpoints)
        commit_seconds = self.timer.monotonic() - computed
        progress = BatchProgress(
            generation=batch.generation,
            batch=batch_id,
            rows=sum(r.applied for r in reports),
            late=sum(r.late for r in reports),
            replayed=sum(r.replayed for r in reports),
            results=sum(r.results for r in reports),
            checkpoints=len(checkpoints),
            clock_ms=clock_ms,
            seconds=computing_seconds + commit_seconds,
            watermark_ms=max((r.watermark_ms for r in reports), default=0),
            finished_at_ms=int(self.timer.time() * 1000),
            state_bytes={task_name(r.grp): r.state_bytes for r in reports},
            dead_letters=dead_letters,
            checkpoint_bytes=sum(r.checkpoint_bytes for r in reports),
            checkpoint_crcs={task_name(r.grp): r.checkpoint_crc for r in reports if r.checkpoint_ms is not None},
            checkpoint_seconds=sum(r.checkpoint_seconds for r in reports),
            commit_seconds=commit_seconds,
        )
        self.directory.record_progress(progress)
        for listener in self.listeners:
            listener(progress)
        crash_point(CrashPoint.COMMITTED)
        return progress

    def _dead_letters(self, batch: BatchId, reports: Sequence[GroupReport],
                      write: Callable[[BatchId], Any]) -> int:
        """Fails the micro-batch on its bad records, or writes them to the dead-letter
        output with the late records the key groups output; returns how many were written."""
        bad, late = sum(r.bad_records for r in reports), sum(r.late_records for r in reports)
        if bad and self.bad_records is BadRecords.FAIL:
            first = min(r.first_bad for r in reports if r.first_bad is not None)
            self.directory.record_failed_batch(batch.generation, batch.batch)
            raise BadRecordError(BadRecord.from_json(first), bad, f"micro-batch {batch.generation}.{batch.batch}")
        if bad or late:
            write(batch)
        return bad + late

    def _advance_clock(self, checkpoints: dict[int, int], batch: BatchId) -> int | None:
        """Advances the clock over the checkpoints the key groups reported, once every
        task the clock knows has reported the newest of them."""
        clock = self.directory.clock
        record = clock.read()
        task_clocks = dict(record.task_clocks) if record else {}
        if checkpoints:
            newest = max(checkpoints.values())
            silent = [task for task, ms in task_clocks.items() if ms < newest and task_index(task) not in checkpoints]
            if silent:
                raise ClockError(
                    f"micro-batch {batch.generation}.{batch.batch} of {self.directory.root}: the watermark passed "
                    f"the checkpoint boundary {newest} ms but task(s) {', '.join(silent)} reported no checkpoint "
                    f"there; the clock stays at {record.clock_ms} ms"
                )
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

    def _retain(self, checkpoints: dict[int, int]) -> None:
        """Keeps the checkpoints the clock's history may still rewind to, and those at the
        restore point of a generation begun by path B (its groups read them when they
        have no state in Spark); drops the rest."""
        oldest_ms = self.directory.clock.oldest_restorable_ms()
        if oldest_ms is None:
            return  # no clock yet
        if self.recovery.restored:
            oldest_ms = min(oldest_ms, self.recovery.floor_ms)
        for grp in checkpoints:
            self.directory.store(grp).retain(oldest_ms)
