"""The key groups' function inside ``applyInPandasWithState``: it runs on the executors.

For each key group with messages in a micro-batch (or whose event-time timeout
fired), Spark calls ``GroupFunction`` with the group's rows (``persistent.runtime.rows``,
which decodes them) and its state in Spark's state store. The group's ``KeyGroup``
(``persistent.runtime.keygroup``) is decoded from that state, restored from its own
checkpoint (restore by reference, in a generation begun by path B) or started empty;
it applies the messages, emits its results, writes its checkpoint when the watermark
has passed a boundary, hands its new state back to Spark and adds its ``GroupReport``
to the job's accumulator. Once the group has written a checkpoint, its state in
Spark holds the rows since then and the checkpoint's time and CRC32, and the next
micro-batch reads the rest from the checkpoint (``KeyGroup.encode``). The one row it
yields holds its results and dead letters (``output_schema``); no state bytes reach
the driver.
"""

from __future__ import annotations

import gc
import resource
import time
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from persistent.core.badrecords import BadRecordError, BadRecords, LateRecords, late_messages
from persistent.storage.faults import CrashPoint, crash_point
from persistent.core.task import PersistentTask
from persistent.runtime.fold import Fold
from persistent.runtime.group_state import Base
from persistent.runtime.kept import kept_checkpoint
from persistent.runtime.keygroup import KeyGroup, Taken
from persistent.runtime.layout import slot_group
from persistent.runtime.recovery import Recovery
from persistent.runtime.reports import GroupReport
from persistent.runtime.rows import (GroupRows, decode, given_watermark_ms, group_watermark_ms, next_watermark_ms,
                                     timeout_ms)
from persistent.storage.checkpoint_store import Written
from persistent.storage.filesystems import JobStorage
from persistent.storage.job_directory import JobDirectory
from state.boundaries import boundary_after
from state.errors import StateValueError, StorageError

if TYPE_CHECKING:
    from pyspark import Accumulator

__all__ = ["GroupFunction", "output_schema", "RESULT_COLUMNS", "DEAD_LETTERS"]

#: The columns of a result, each an array in a key group's row.
RESULT_COLUMNS = ("key", "window_start", "window_end", "value")
#: The column of a key group's row holding its dead letters.
DEAD_LETTERS = "dead_letters"


def output_schema(key_type: str, value_type: str) -> str:
    """The key groups' rows, one per group and micro-batch: the results as arrays, one
    element per result, and the dead letters.

    One row per group, not one per result: PySpark pads the state it sends back with
    a group's output to as many rows as the output has, and joins the padding with
    ``pd.concat``, which looks at every padded null in Python. Spark unpacks the
    arrays in the JVM (``inline(arrays_zip(...))``) when the sink reads them. A group's
    results of one micro-batch are one Spark row, so they must fit in one (2 GB)."""
    return (f"key array<{key_type}>, window_start array<bigint>, window_end array<bigint>, "
            f"value array<{value_type}>, {DEAD_LETTERS} array<string>")


@dataclass(frozen=True, kw_only=True)
class GroupFunction:
    """The function ``applyInPandasWithState`` calls per key group, with what it takes
    to the executors: only this travels there, not the job (its source and sink stay on
    the driver). Spark pickles it with the query, and each Python worker calls it with
    a key group's rows of a micro-batch and the group's state in Spark's state store."""

    #: The job's task, whose key groups these are.
    task: PersistentTask
    #: The checkpoint interval: the boundaries a group checkpoints at.
    interval_ms: int
    #: The start of the job: the generation's floor, the key groups restored from their
    #: checkpoint at it, their number, and whether its query sets event-time timeouts.
    recovery: Recovery
    #: Whether the groups write checkpoints (``Plan.checkpoints``).
    checkpoints: bool
    #: What a group does with a bad record, and with a late message.
    bad_records: BadRecords
    late_records: LateRecords
    #: Whether a group's state carries over to the next micro-batch in Spark's state store.
    carries: bool
    #: The job directory the groups write their checkpoints to and restore them from.
    storage: JobStorage
    #: The accumulator each group adds its ``GroupReport`` to.
    reports: Accumulator
    #: The fold of a job that folds its messages before the shuffle (``persistent.runtime.fold``).
    fold: Fold | None = None
    #: The job's watermark delay, where the rows carry each source partition's newest event
    #: time (``persistent.runtime.fold.newest_per_group``): a group then runs with the
    #: job's watermark the driver gives the micro-batch (``rows.given_watermark_ms``) and
    #: reports the next micro-batch's (``rows.next_watermark_ms``).
    delay_ms: int | None = None
    #: Whether a group checkpoints at the next micro-batch's watermark: every message
    #: before it is in this micro-batch or late in the next.
    early: bool = False

    def __call__(self, key, frames, state):
        """Runs key group ``key`` (its slot, ``persistent.runtime.layout``) on its rows
        ``frames`` with its ``state`` in Spark's state store: the group applies the rows,
        checkpoints if a boundary is due, hands its new state back to Spark and reports.
        Yields the group's one row, if it has results or dead letters."""
        _freeze_the_libraries()
        grp = slot_group(int(key[0]), self.recovery.key_groups)
        group = self._group(grp, state)
        spark_ms = state.getCurrentWatermarkMs()
        watermark_ms = self._watermark_ms(grp, group, spark_ms)
        rows = decode(frames, self.fold.values if self.fold is not None else None)
        applied = self._apply(grp, group, rows, watermark_ms)
        next_ms = None
        if self.delay_ms is not None and rows.batch_reached_ms is not None:
            next_ms = next_watermark_ms(watermark_ms, rows.batch_reached_ms, self.delay_ms)
        advance_ms = next_ms if self.early and next_ms is not None else watermark_ms
        results, checkpoint = group.advance(advance_ms, self.checkpoints)
        written, writing_s = self._checkpoint(grp, group, checkpoint)
        encoded = self._hand_to_spark(grp, group, state, advance_ms, spark_ms)
        self.reports.add({grp: GroupReport(
            grp=grp, applied=applied.applied, late=applied.late, replayed=applied.replayed, results=len(results),
            watermark_ms=watermark_ms, max_time_ms=rows.newest_ms if rows.count else -1, state_bytes=len(encoded),
            bad_records=len(applied.bad), late_records=len(applied.late_output),
            checkpoint_ms=checkpoint.time_ms if checkpoint else None, checkpoint_bytes=written.size,
            checkpoint_crc=written.crc, whole_ms=group.table.whole_ms if checkpoint else None,
            checkpoint_seconds=writing_s, folded=rows.folded,
            partials=rows.partial_count, next_watermark_ms=next_ms,
            keys=len(group.table), worker_peak_bytes=peak_resident_bytes(), decoded=group.decoded,
        )})
        dead_letters = applied.bad + applied.late_output
        if len(results) or dead_letters:
            yield _output(results, group.monoid, dead_letters)

    def _group(self, grp: int, state) -> KeyGroup:
        """Key group ``grp`` as the micro-batch finds it: decoded from its ``state`` in
        Spark's state store where it carries over, else restored from its own checkpoint
        at the generation's floor if the generation restored it, else empty."""
        floor_ms = self.recovery.floor_ms
        if state.exists and self.carries:
            read_checkpoint = partial(self.storage.directory().restore, grp)  # the one the state follows, if any
            return KeyGroup.decode(self.task, self.interval_ms, floor_ms, state.get[0], read_checkpoint,
                                   kept_checkpoint(self.storage.root, grp))
        if grp in self.recovery.restored:
            # Restore by reference: this group's own checkpoint at its generation's floor.
            return KeyGroup.recover(self.task, self.interval_ms, self.storage.directory().restore(grp, floor_ms))
        return KeyGroup(self.task, self.interval_ms, floor_ms)

    def _watermark_ms(self, grp: int, group: KeyGroup, spark_ms: int) -> int:
        """The job's watermark key group ``grp`` runs with, from Spark's ``spark_ms``
        (``rows.group_watermark_ms``); a group checkpointed after it is refused."""
        watermark_ms = group_watermark_ms(spark_ms, self.recovery.floor_ms, given_watermark_ms())
        if group.table.sealed_ms > watermark_ms:
            # A checkpoint taken a micro-batch early at a watermark Spark did not then give:
            # messages between the two are on time here but missing from the checkpoint.
            raise StateValueError(
                f"key group {grp} checkpointed at {group.table.sealed_ms} ms, after this micro-batch's watermark "
                f"{watermark_ms} ms: stop the job, run persistent rewind {self.storage.root} --to a clock before "
                f"{group.table.sealed_ms} ms, then start it again (recovery path B)")
        return watermark_ms

    def _apply(self, grp: int, group: KeyGroup, rows: GroupRows, watermark_ms: int) -> _Applied:
        """Applies the micro-batch's ``rows`` to key group ``grp`` at ``watermark_ms``;
        a bad record with ``BadRecords.FAIL`` fails the task, written to the job
        directory for the driver to read."""
        if not rows.count:
            return _Applied(0, 0, 0, [], [])
        try:
            outcome = group.apply(rows.messages, self.bad_records, watermark_ms, rows.marked, rows.partials)
        except BadRecordError as exc:
            # The task fails, and with it the Spark job computing the micro-batch, so no
            # sink writes any of its results; the driver reads the record from the directory.
            self.storage.directory().record_failing_record(grp, exc.record)
            raise
        bad = [record.json() for record in outcome.bad]
        late_output = []
        if self.late_records is LateRecords.OUTPUT:
            late_output = [record.json() for record in late_messages(outcome.late, watermark_ms)]
        return _Applied(outcome.applied, outcome.replayed, outcome.late_count, bad, late_output)

    def _checkpoint(self, grp: int, group: KeyGroup, checkpoint: Taken | None) -> tuple[Written, float]:
        """Writes the ``checkpoint`` key group ``grp`` took, if any, and has the group's
        state follow it; returns the file's size and CRC32 and the seconds the writing took."""
        if not checkpoint:
            return Written(0, 0), 0.0
        began = time.monotonic()
        written = _persist(self.storage.directory(), grp, checkpoint)
        writing_s = time.monotonic() - began
        group.checkpointed(Base(checkpoint.time_ms, written.crc))
        crash_point(CrashPoint.CHECKPOINTS)
        return written, writing_s

    def _hand_to_spark(self, grp: int, group: KeyGroup, state, advance_ms: int, spark_ms: int) -> bytes:
        """Hands key group ``grp``'s state to Spark's state store where it carries over
        (keeping the table, should Spark hand the state back to this process), and sets
        the event-time timeout that wakes the group at its next boundary after
        ``advance_ms`` (in a query with them, ``Recovery.timeouts``); returns the state's
        bytes (none where it does not carry over)."""
        if not self.carries:
            return b""
        encoded = group.encode(kept_checkpoint(self.storage.root, grp))
        state.update((encoded,))
        crash_point(CrashPoint.GROUP)
        if self.recovery.timeouts:  # wake this group when the watermark reaches its next boundary, even with no input
            # Spark's watermark, ahead of the job's while a partition is behind, fires it
            # early, and takes no timeout before it: the group then wakes as it moves on.
            state.setTimeoutTimestamp(max(timeout_ms(boundary_after(advance_ms, self.interval_ms)), spark_ms))
        return encoded


class _Applied(NamedTuple):
    """What a key group did with its rows of a micro-batch (``GroupFunction._apply``):
    its counts, and its bad records and late messages as dead letters (``BadRecord`` JSON)."""

    applied: int
    replayed: int
    #: Late messages and late updates (``Applied.late_count``).
    late: int
    bad: list[str]
    #: The late messages written out (``LateRecords.OUTPUT``).
    late_output: list[str]


def _freeze_the_libraries() -> None:
    """Moves what this Python worker holds so far (the objects of pandas, pyarrow,
    PySpark, the job's task) out of the garbage collector's sight, once per process.

    PySpark's worker runs a full ``gc.collect()`` after each task it is reused for,
    walking some 100,000 objects of the libraries that never become garbage: 40 % of
    the workers' CPU time at 100,000 keys. ``gc.freeze`` leaves them to reference
    counting alone; the collection before it frees what is already garbage, so no
    cycle is kept forever. (A flag, not ``gc.get_freeze_count()``, which counts the
    frozen objects one by one.)"""
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN.append(True)


#: Whether this process has frozen its libraries' objects (``_freeze_the_libraries``).
_FROZEN: list[bool] = []


def peak_resident_bytes() -> int:
    """The most memory this process has held resident so far, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux counts in KiB


def _persist(directory: JobDirectory, grp: int, checkpoint: Taken) -> Written:
    """Writes key group ``grp``'s checkpoint; returns its file's size and CRC32.

    A retried or speculative attempt of the task writes the same state to the same
    path, atomically: whichever rename comes last leaves one intact file (of a monoid
    that folds alike in every process: see ``docs/concepts.md``, "Checkpoints, on the
    executors").
    """
    time_ms = checkpoint.time_ms
    try:
        return directory.store(grp).persist(time_ms, checkpoint.data, checkpoint.base)
    except StorageError as exc:
        exc.add_note(
            f"key group {grp}'s checkpoint at {time_ms} ms is not durable, and the micro-batch is not "
            f"committed; the clock names durable checkpoints only. Once the storage is fixed, start the "
            f"job again on the same checkpoint directory {directory.root}: it replays this micro-batch (path A)."
        )
        raise


def _output(results: pd.DataFrame, monoid, dead_letters: list[str]) -> pd.DataFrame:
    """The group's one row: its results column by column, each an array with an element
    per result (``output_schema``), and its dead letters (``BadRecord`` JSON)."""
    values = results["value"].to_numpy()
    if monoid.json_results:
        values = np.array([monoid.present_json(v) for v in values.tolist()], dtype=object)
    columns = {"key": results["key"].to_numpy(), "window_start": results["window_start"].to_numpy(),
               "window_end": results["window_end"].to_numpy(), "value": values,
               DEAD_LETTERS: np.array(dead_letters, dtype=object)}
    return pd.DataFrame({name: [column] for name, column in columns.items()})
