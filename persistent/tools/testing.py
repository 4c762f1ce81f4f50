"""Test a ``PersistentTask`` in plain pytest, with the code that runs it on Spark.

``TaskTester`` runs the task in one key group (``persistent.runtime.keygroup``), the same
code the Spark runtime calls per key group, so what a test sees is what the job
does: feed messages, advance the watermark (which emits results and takes the
checkpoints due), peek at a key's state, and restore from a checkpoint as recovery
path B would.

Bad records behave as in a job: with ``bad_records=BadRecords.FAIL`` (the default)
``send`` raises ``BadRecordError`` on the first one and changes nothing; with
``BadRecords.DEAD_LETTER`` they are collected in ``dead_letters`` and the other
messages are applied.

Messages behind the watermark of the last ``advance_watermark`` are late, as in a
job: not applied, and kept in ``late`` (what a job with ``late_records="output"``
writes to its dead-letter output). Not simulated: several key groups, and sinks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from persistent.core.badrecords import BadRecord, BadRecords, late_messages
from persistent.core.task import PersistentTask
from persistent.runtime.keygroup import MESSAGE_COLUMNS, KeyGroup

__all__ = ["TaskTester"]


class TaskTester:
    """Drives one task by hand; see the module docstring."""

    def __init__(
        self,
        task: PersistentTask,
        checkpoint_interval_ms: int = 1000,
        group: KeyGroup | None = None,
        bad_records: BadRecords = BadRecords.FAIL,
    ):
        self.task = task
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.group = group or KeyGroup(task, checkpoint_interval_ms)
        self.bad_records = BadRecords.of(bad_records, "TaskTester: bad_records")
        #: Bad records sent so far (``BadRecords.DEAD_LETTER``).
        self.dead_letters: list[BadRecord] = []
        #: Checkpoint bytes taken so far, by checkpoint time.
        self.checkpoints: dict[int, bytes] = {}
        #: Every result emitted so far, in order.
        self.results: list[pd.DataFrame] = []
        #: Late messages sent so far, each with the watermark it missed.
        self.late: list[BadRecord] = []
        self.late_updates = 0
        self.watermark_ms = self.group.floor_ms

    def send(self, messages: Iterable[tuple[Any, int, Any]] | pd.DataFrame) -> int:
        """Applies ``(key, timestamp_ms, value)`` messages; returns how many were applied."""
        frame = messages if isinstance(messages, pd.DataFrame) else pd.DataFrame(list(messages), columns=list(MESSAGE_COLUMNS))
        outcome = self.group.apply(frame, self.bad_records, self.watermark_ms)
        self.late_updates += outcome.late_updates
        self.dead_letters.extend(outcome.bad)
        self.late.extend(late_messages(outcome.late, self.watermark_ms))
        return outcome.applied

    def advance_watermark(self, watermark_ms: int) -> pd.DataFrame:
        """Emits the results of everything sent since the last call and takes the checkpoint due."""
        results, checkpoint = self.group.advance(watermark_ms)
        self.watermark_ms = max(self.watermark_ms, watermark_ms)
        if checkpoint is not None:
            self.checkpoints[checkpoint.time_ms] = checkpoint.data
        self.results.append(results)
        return results

    def peek(self, key: Any) -> Any:
        """The state of ``key`` (its monoid value, all buckets folded)."""
        return self.group.table.get(key)

    def restore(self, timestamp_ms: int) -> TaskTester:
        """A new tester restored from this one's checkpoint at ``timestamp_ms`` (path B):
        messages before it are dropped when sent again."""
        group = KeyGroup.restore(self.task, self.checkpoint_interval_ms, timestamp_ms, self.checkpoints[timestamp_ms])
        return TaskTester(self.task, self.checkpoint_interval_ms, group, self.bad_records)

    @property
    def late_count(self) -> int:
        """Messages refused as late, and updates the task made at a late time of their own."""
        return len(self.late) + self.late_updates
