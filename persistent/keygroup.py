"""One key group: the unit of state, checkpoint and clock (Gearpump's task).

A key group owns the states of every key hashed to it, in one ``KeyedTable``. For
each micro-batch it runs the user's task over the group's messages, emits results
(the new totals of the keys it touched, or the windows the watermark closed), and,
when the watermark has passed a checkpoint boundary, the checkpoint of its state at
that boundary. This module is pure Python: the Spark runtime calls it from
``applyInPandasWithState`` and ``persistent.testing`` calls it directly, so a task
behaves the same in a unit test as on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from persistent.task import Message, PersistentTask, TaskDefinitionError
from state.checkpoint_store import check_time_ms
from state.persistent_state import WindowState
from state.table import KeyedTable

__all__ = ["KeyGroup", "GroupOutput", "MESSAGE_COLUMNS"]

#: Columns of the messages a key group takes.
MESSAGE_COLUMNS = ("key", "timestamp", "value")


@dataclass
class GroupOutput:
    """What one call of ``KeyGroup.process`` produced."""

    #: Result rows: ``key``, ``window_start``, ``window_end`` (windows only; else -1) and ``value``.
    results: pd.DataFrame
    #: ``(time_ms, bytes)`` of the checkpoint taken, if one was due.
    checkpoint: tuple[int, bytes] | None = None
    #: Messages dropped because they are older than the restore point (replayed on purpose).
    replayed: int = 0
    #: Messages refused as late in this call.
    late: int = 0
    #: Messages applied in this call.
    applied: int = field(default=0)


class _KeyState:
    """The state a ``process_message`` call sees: the state of one key of the group."""

    __slots__ = ("group", "key", "keys", "timestamps", "values")

    def __init__(self, group: KeyGroup):
        self.group = group
        self.key = None
        self.keys: list = []
        self.timestamps: list[int] = []
        self.values: list = []

    def update(self, timestamp_ms: int, value) -> bool:
        where = f"key {self.key!r} at timestamp {timestamp_ms}"
        self.timestamps.append(check_time_ms(timestamp_ms, f"timestamp of {where}"))
        self.values.append(self.group.monoid.validate(value, where))
        self.keys.append(self.key)
        return True

    def get(self):
        """The key's value, including this batch's updates so far."""
        self.flush()
        return self.group.table.get(self.key)

    def flush(self) -> None:
        if self.keys:
            self.group.apply_values(
                np.array(self.keys, dtype=object), np.array(self.timestamps, dtype=np.int64),
                self.group.monoid.column(self.values),
            )
            self.keys, self.timestamps, self.values = [], [], []


class KeyGroup:
    """The states of one key group and the task that updates them."""

    def __init__(self, task: PersistentTask, interval_ms: int, floor_ms: int = 0, table: KeyedTable | None = None):
        spec = task.state_spec()
        self.task = task
        self.monoid = spec.monoid
        self.window = spec.window if isinstance(spec, WindowState) else None
        #: Messages before this time are inside the restored checkpoint: dropped, not applied.
        self.floor_ms = floor_ms
        if table is None:
            table = KeyedTable(self.monoid, interval_ms, self.window)
            table.checkpoint_ms = table.emitted_ms = floor_ms
        self.table = table
        self._touched: list[np.ndarray] = []

    # -- construction --------------------------------------------------------------

    @classmethod
    def restore(cls, task: PersistentTask, interval_ms: int, timestamp_ms: int, data: bytes) -> KeyGroup:
        """A group restored from its checkpoint at ``timestamp_ms``."""
        group = cls(task, interval_ms, floor_ms=timestamp_ms)
        group.table.recover(timestamp_ms, data)
        return group

    @classmethod
    def decode(cls, task: PersistentTask, interval_ms: int, floor_ms: int, data: bytes) -> KeyGroup:
        """A group from ``encode`` bytes (the runtime's per-batch state)."""
        group = cls(task, interval_ms, floor_ms)
        group.table = KeyedTable.decode(data, group.monoid, interval_ms, group.window, "key group state")
        return group

    def encode(self) -> bytes:
        """The whole state of the group."""
        return self.table.encode()

    # -- processing ----------------------------------------------------------------

    def apply_values(self, keys: np.ndarray, timestamps_ms: np.ndarray, values) -> None:
        """Applies monoid values to the table (used by both task forms)."""
        self._touched.append(self.table.update(keys, timestamps_ms, values))

    def apply(self, messages: pd.DataFrame) -> tuple[int, int, int]:
        """Runs the task over ``messages``; returns (applied, replayed, late) counts."""
        replayed = 0
        if self.floor_ms and len(messages):
            keep = messages["timestamp"].to_numpy() >= self.floor_ms
            replayed = int(len(keep) - keep.sum())
            messages = messages[keep]
        if not len(messages):
            return 0, replayed, 0
        late_before = self.table.late_count
        if self.task.vectorized:
            self._apply_batch(messages)
        else:
            self._apply_messages(messages)
        late = self.table.late_count - late_before
        return len(messages) - late, replayed, late

    def _apply_batch(self, messages: pd.DataFrame) -> None:
        out = self.task.process_batch(messages)
        if isinstance(out, pd.DataFrame):
            missing = set(MESSAGE_COLUMNS) - set(out.columns)
            if missing:
                raise TaskDefinitionError(
                    f"{type(self.task).__name__}.process_batch returned a DataFrame without columns {sorted(missing)}"
                )
            self.apply_values(out["key"].to_numpy(), out["timestamp"].to_numpy(), out["value"].to_numpy())
            return
        values = np.asarray(out)
        if len(values) != len(messages):
            raise TaskDefinitionError(
                f"{type(self.task).__name__}.process_batch returned {len(values)} values for "
                f"{len(messages)} messages; return one value per message or a DataFrame"
            )
        self.apply_values(messages["key"].to_numpy(), messages["timestamp"].to_numpy(), values)

    def _apply_messages(self, messages: pd.DataFrame) -> None:
        state = _KeyState(self)
        process = self.task.process_message
        for key, timestamp, value in zip(
            messages["key"].tolist(), messages["timestamp"].tolist(), messages["value"].tolist()
        ):
            state.key = key
            process(state, Message(key, timestamp, value))
        state.flush()

    def advance(self, watermark_ms: int, checkpoint: bool = True) -> tuple[pd.DataFrame, tuple[int, bytes] | None]:
        """Results of this batch and, if one is due at ``watermark_ms``, a checkpoint.

        With ``checkpoint=False`` the state moves past the boundary due as if it had
        been checkpointed (``KeyedTable.seal``), but no checkpoint bytes are made.
        """
        watermark_ms = max(check_time_ms(watermark_ms, "watermark_ms"), self.floor_ms)
        results = self._results(watermark_ms)
        due = self.table.due_checkpoint(watermark_ms)
        if due is None:
            return results, None
        if not checkpoint:
            self.table.seal(due)
            return results, None
        return results, (due, self.table.checkpoint(due))

    def process(self, messages: pd.DataFrame, watermark_ms: int) -> GroupOutput:
        """``apply`` then ``advance``: one micro-batch of this group."""
        applied, replayed, late = self.apply(messages)
        results, checkpoint = self.advance(watermark_ms)
        return GroupOutput(results, checkpoint, replayed=replayed, late=late, applied=applied)

    def _results(self, watermark_ms: int) -> pd.DataFrame:
        if self.window is not None:
            self._touched = []
            closed = self.table.close_windows(watermark_ms)
            keys, starts, ends, values = closed.keys, closed.starts_ms, closed.ends_ms, closed.values
        else:
            touched = pd.unique(np.concatenate(self._touched)) if self._touched else np.empty(0, object)
            self._touched = []
            keys, values = self.table.totals(touched) if len(touched) else (np.empty(0, object), self.monoid.zeros(0))
            starts = ends = np.full(len(keys), -1, dtype=np.int64)
        return pd.DataFrame(
            {
                "key": keys,
                "window_start": starts,
                "window_end": ends,
                "value": self.monoid.present_column(values),
            }
        )
