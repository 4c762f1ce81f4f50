"""One key group: the unit of state, checkpoint and clock (Gearpump's task).

A key group owns the states of every key hashed to it, in one ``KeyedTable``. For
each micro-batch it runs the user's task over the group's messages, emits results
(the new totals of the keys it touched, or the windows the watermark closed), and,
when the watermark has passed a checkpoint boundary, the checkpoint of its state at
that boundary. This module is pure Python: the Spark runtime calls it from
``applyInPandasWithState`` and ``persistent.tools.testing`` calls it directly, so a task
behaves the same in a unit test as on a cluster.

Bad records (``persistent.core.badrecords``) never reach the state: a batch is applied to
the table in one vectorized update, and only when that fails (or the task raises)
are the culprits looked for, by halving the batch. The table is a snapshot away
from its state before the batch (``KeyedTable.copy``), so a batch that fails as a
whole leaves the group as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from monoids.base import MonoidError
from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords
from persistent.core.task import MESSAGE_COLUMNS, KeyState, Message, PersistentTask, TaskDefinitionError
from persistent.runtime.group_state import CHECKPOINT, STATE, Base, decode_state, encode_state
from persistent.runtime.rows import Marked, Partials
from state.boundaries import check_time_ms
from state.errors import CorruptCheckpointError, MissingCheckpointError, StateValueError
from state.table import KeyedTable
from state.tables import Stored

if TYPE_CHECKING:
    from persistent.runtime.kept import KeptCheckpoint

__all__ = ["KeyGroup", "Taken", "Applied", "WHOLE_EVERY", "whole_every_ms"]

#: A key group's checkpoint holds only the keys changed since its last one
#: (``KeyedTable.checkpoint_changes``) when that one is durable, the changes since the
#: whole checkpoint before it hold fewer rows than the table (``KeyedTable.chain_rows``:
#: a restore reads at most about three times the table's rows, in one pass,
#: ``KeyedTable.roll_forward``), and both are in the same span of ``WHOLE_EVERY``
#: checkpoint intervals, counted from time 0; else it is whole. So a growing state
#: writes the rows it changes, not itself again; a chain is at most ``WHOLE_EVERY``
#: files and never reaches back past a multiple of ``whole_every_ms``, which is what
#: lets the job keep a chain it has no record of without reading it
#: (``CheckpointStore.retain``).
WHOLE_EVERY = 100


def whole_every_ms(interval_ms: int) -> int:
    """The span, in ms of event time, that no chain of a key group's checkpoints crosses."""
    return WHOLE_EVERY * interval_ms

class Taken(NamedTuple):
    """The checkpoint ``KeyGroup.advance`` took."""

    time_ms: int
    #: The state at ``time_ms``: whole, or with a ``base``, the changes to it.
    data: bytes
    #: The durable checkpoint ``data`` changes; None: ``data`` is whole.
    base: Base | None


class Applied(NamedTuple):
    """What ``KeyGroup.apply`` did with a batch of messages."""

    applied: int
    replayed: int
    #: Late messages (columns ``key``, ``timestamp``, ``value``), which changed nothing.
    late: pd.DataFrame
    #: Bad records, which changed nothing (only with ``BadRecords.DEAD_LETTER``).
    bad: list[BadRecord]
    #: Updates the task made at a time of their own that the table refused as late.
    late_updates: int = 0

    @property
    def late_count(self) -> int:
        """Late messages and late updates."""
        return len(self.late) + self.late_updates


class _Updates(NamedTuple):
    """Monoid values to apply, aligned; ``origins`` is each one's message row, or -1
    when the task made it up (a DataFrame from ``process_batch``)."""

    keys: np.ndarray
    timestamps: np.ndarray
    values: np.ndarray
    origins: np.ndarray

    def rows(self, which) -> _Updates:
        return _Updates(*(column[which] for column in self))

    @classmethod
    def concat(cls, parts: list[_Updates]) -> _Updates:
        return parts[0] if len(parts) == 1 else cls(*(np.concatenate(columns) for columns in zip(*parts)))


class _KeyState(KeyState):
    """The ``KeyState`` a ``process_message`` call sees: the state of one key of the group.

    Updates wait in a buffer until ``flush``; those of the message being processed
    can be discarded when the task raises on it.
    """

    __slots__ = ("group", "messages", "mode", "key", "origin", "mark", "keys", "timestamps", "values", "origins", "bad")

    def __init__(self, group: KeyGroup, messages: pd.DataFrame, mode: BadRecords):
        self.group, self.messages, self.mode = group, messages, mode
        self.key, self.origin = None, -1
        #: Where the updates of the current message start in the buffer.
        self.mark = 0
        self.keys: list = []
        self.timestamps: list[int] = []
        self.values: list = []
        self.origins: list[int] = []
        self.bad: list[BadRecord] = []

    def update(self, timestamp_ms: int, value) -> bool:
        monoid = self.group.monoid
        try:
            timestamp_ms, value = check_time_ms(timestamp_ms), monoid.validate(value)
        except (StateValueError, MonoidError):
            # The same checks again, to raise with the key and time in the message; the
            # text is built only for an update that fails.
            where = f"key {self.key!r} at timestamp {timestamp_ms}"
            timestamp_ms = check_time_ms(timestamp_ms, f"timestamp of {where}")
            value = monoid.validate(value, where)
        self.timestamps.append(timestamp_ms)
        self.values.append(value)
        self.keys.append(self.key)
        self.origins.append(self.origin)
        return True

    def get(self):
        """The key's value, including this batch's updates so far."""
        self.flush(self.mark)
        table = self.group.table
        if self.keys:
            # The current message's own updates count, but only in a copy: the task
            # may still raise on this message.
            table = table.copy()
            table.update(np.array(self.keys, dtype=object), np.array(self.timestamps, dtype=np.int64),
                         self.group.monoid.column(self.values))
        return table.get(self.key)

    def discard(self) -> None:
        """Drops the updates of the current message."""
        for column in (self.keys, self.timestamps, self.values, self.origins):
            del column[self.mark:]

    def flush(self, upto: int | None = None) -> None:
        """Applies the first ``upto`` buffered updates (all by default)."""
        n = len(self.keys) if upto is None else upto
        if not n:
            return
        updates = _Updates(
            np.array(self.keys[:n], dtype=object), np.array(self.timestamps[:n], dtype=np.int64),
            self.group.monoid.column(self.values[:n]), np.array(self.origins[:n], dtype=np.int64),
        )
        for column in (self.keys, self.timestamps, self.values, self.origins):
            del column[:n]
        self.mark -= n
        self.bad += self.group._update(updates, self.messages, self.mode)


class KeyGroup:
    """The states of one key group and the task that updates them."""

    def __init__(self, task: PersistentTask, interval_ms: int, floor_ms: int = 0, table: KeyedTable | None = None):
        spec = task.state_spec()
        self.task = task
        self.spec = spec
        self.monoid = spec.monoid
        self.window = spec.window
        #: Messages before this time are inside the restored checkpoint: dropped, not applied.
        self.floor_ms = floor_ms
        self.table = spec.build(interval_ms, checkpoint_ms=floor_ms) if table is None else table
        #: The durable checkpoint the table's rows before its last checkpoint come from, if known.
        self.base: Base | None = None
        #: Whether the table was decoded, from the group's state in Spark or its checkpoint
        #: (``decode``, ``recover``), rather than new or the one this process handed Spark last.
        self.decoded = False

    # -- construction --------------------------------------------------------------

    @classmethod
    def restore(cls, task: PersistentTask, interval_ms: int, timestamp_ms: int, data: bytes) -> KeyGroup:
        """A group restored from its whole checkpoint at ``timestamp_ms``."""
        group = cls(task, interval_ms, timestamp_ms)
        group.table = group.spec.build(interval_ms, data, timestamp_ms)
        return group

    @classmethod
    def recover(cls, task: PersistentTask, interval_ms: int, chain: Sequence[Stored]) -> KeyGroup:
        """A group restored from its durable checkpoint, the last of ``chain``
        (``CheckpointStore.recover``), which its next checkpoint may change."""
        checkpoint = chain[-1]
        group = cls(task, interval_ms, checkpoint.time_ms)
        group.table = group.spec.restore(interval_ms, chain, what=CHECKPOINT)
        group.checkpointed(Base(checkpoint.time_ms, checkpoint.crc))
        group.decoded = True
        return group

    @classmethod
    def decode(
        cls, task: PersistentTask, interval_ms: int, floor_ms: int, data: bytes,
        checkpoints: Callable[[int, int, Base | None], Sequence[Stored]] | None = None,
        kept: KeptCheckpoint | None = None,
    ) -> KeyGroup:
        """A group from ``encode`` bytes (the runtime's per-batch state), or from the
        state of an earlier version (``decode_state``). A state that follows a
        checkpoint reads it with ``checkpoints(time_ms, crc, known)``, which returns the
        chain of the group's checkpoint at ``time_ms`` when its record's CRC32 is ``crc``
        (after ``known``, a checkpoint held decoded), and raises
        ``MissingCheckpointError`` or ``CorruptCheckpointError`` saying what to do
        otherwise (``persistent.storage.job_directory.JobDirectory.restore``); with
        ``kept``, only when that does not hold the checkpoint decoded already, and not
        at all when ``data`` are the bytes ``encode(kept)`` made last: the group then
        continues from the table that made them."""
        group = cls(task, interval_ms, floor_ms)
        handed = kept.continued(data, group.spec, interval_ms) if kept is not None else None
        if handed is not None:
            group.table, group.base = handed
            return group
        group.decoded = True
        base, table = decode_state(data)
        if base is None:
            group.table = group.spec.build(interval_ms, table, what=STATE)
            return group
        if checkpoints is None:
            raise StateValueError(f"the {STATE} follows its checkpoint at {base.time_ms} ms: "
                                  "decoding it needs the group's checkpoints")

        def read(known: Base | None) -> Sequence[Stored]:
            return checkpoints(*base, known)

        try:
            if kept is None:
                checkpoint = group.spec.restore(interval_ms, read(None), what=CHECKPOINT)
            else:
                checkpoint = kept.table(group.spec, interval_ms, base, read)
            group.table = group.spec.follow(checkpoint, interval_ms, table, what=STATE)
        except (CorruptCheckpointError, MissingCheckpointError) as exc:
            exc.add_note(f"The {STATE} in Spark's state store follows the checkpoint at {base.time_ms} ms.")
            raise
        group.base = base
        return group

    def encode(self, kept: KeptCheckpoint | None = None) -> bytes:
        """The state of the group, the bytes Spark's state store keeps
        (``persistent.runtime.group_state.encode_state``); ``kept`` keeps the table, to
        continue from it when Spark hands these bytes back (``KeptCheckpoint.continued``).

        When the table's rows before its last checkpoint are those of a durable
        checkpoint (``checkpointed``), the state follows it: only the rows since then
        (``KeyedTable.encode_since_checkpoint``) and the checkpoint's time and CRC32,
        so a micro-batch hands Spark what changed since the group's last checkpoint,
        not every key it holds. Else the whole table.

        A replayed micro-batch decodes the state of the one before, whose checkpoint
        the job keeps: the clock's history (``ClockStore.keep`` records) keeps the
        checkpoints of the clocks before the current one."""
        base = self.base
        if base is not None and base.time_ms == self.table.checkpoint_ms and self.table.follows_checkpoints:
            data = encode_state(self.table.encode_since_checkpoint(), base)
        else:
            base, data = None, encode_state(self.table.encode())
        if kept is not None:
            kept.handed(data, self.spec, self.table, base)
        return data

    def checkpointed(self, base: Base) -> None:
        """Takes note that the checkpoint ``advance`` took at ``base.time_ms`` is durable,
        its record's CRC32 ``base.crc``: ``encode`` may follow it, and the next
        checkpoint may hold the changes to it."""
        if base.time_ms != self.table.checkpoint_ms or not base.time_ms:
            raise StateValueError(f"the group's last checkpoint is at {self.table.checkpoint_ms} ms "
                                  f"(0: none), not {base.time_ms} ms")
        self.base = base

    # -- processing ----------------------------------------------------------------

    def apply_values(self, keys: np.ndarray, timestamps_ms: np.ndarray, values) -> None:
        """Applies monoid values to the table (used by both task forms); the table marks
        the keys touched, whose totals are the results (``KeyedTable.take_touched_totals``)."""
        self.table.update(keys, timestamps_ms, values, touched=False)

    def apply(
        self, messages: pd.DataFrame, bad_records: BadRecords = BadRecords.FAIL, watermark_ms: int = 0,
        marked: Marked | None = None, partials: Partials | None = None,
    ) -> Applied:
        """Runs the task over ``messages`` (columns ``key``, ``timestamp`` in integer ms
        and ``value``; the task sees only these), after the bad records ``marked`` by
        their source or the check of their event time (``persistent.runtime.rows``).

        A bad record (a marked one, or a message the task raises on or whose value the
        monoid refuses) changes no state. With ``BadRecords.FAIL`` the first one
        raises ``BadRecordError`` and the group is left as it was before the call;
        with ``BadRecords.DEAD_LETTER`` they are returned and the other messages are
        applied. Messages and marked records before the restore point are dropped
        (``replayed``): they were handled before it. Messages behind ``watermark_ms``
        (the job's watermark in this micro-batch) or the last checkpoint are late:
        returned, not applied, since what they would change may be published.

        ``partials`` are messages folded before the shuffle (``persistent.runtime.fold``):
        their values, which the task does not see, fold into the table after the
        messages'; a partial the monoid refuses (a sum that overflows) is one bad record
        of its own, and the count of applied messages one less.
        """
        times = messages["timestamp"].to_numpy()
        before = self._before(times)
        replayed, bad = int(before.sum()), []
        if marked is not None and len(marked.records):
            marked_before = self._before(marked.times_ms)
            replayed += int(marked_before.sum())
            bad = [self._reject(BadRecord.from_json(text), bad_records) for text in marked.records[~marked_before]]
        late = ~before & (times < max(watermark_ms, self.table.sealed_ms))
        dropped = before | late
        late = messages.loc[late, list(MESSAGE_COLUMNS)]
        if dropped.any():
            messages = messages.loc[~dropped, list(MESSAGE_COLUMNS)]
        elif list(messages.columns) != list(MESSAGE_COLUMNS):
            messages = messages[list(MESSAGE_COLUMNS)]
        folded = partials.messages if partials is not None else 0
        if folded and (partials.earliest < max(watermark_ms, self.table.sealed_ms, self.floor_ms)).any():
            raise StateValueError(
                f"messages folded before the shuffle include some before the watermark {watermark_ms} ms, the "
                f"last checkpoint {self.table.sealed_ms} ms or the restore point {self.floor_ms} ms: the "
                "micro-batch's watermark did not reach Spark's tasks as the key groups see it")
        if not len(messages) and not folded:
            return Applied(0, replayed, late, bad)
        late_before = self.table.late_count
        back = self.table.savepoint()
        try:
            refused = []
            if len(messages):
                refused = self._apply_batch(messages, bad_records) if self.task.vectorized else \
                    self._apply_messages(messages, bad_records)
            if folded:
                refused += self._update(
                    _Updates(partials.keys, partials.timestamps, partials.values, np.full(len(partials.keys), -1)),
                    messages, bad_records)
        except BaseException:
            self.table = back()
            raise
        late_updates = self.table.late_count - late_before
        return Applied(len(messages) + folded - len(refused) - late_updates, replayed, late, bad + refused,
                       late_updates)

    def _before(self, times_ms: np.ndarray) -> np.ndarray:
        """Which times are before the restore point (a NaN, no time, is not)."""
        if not self.floor_ms:
            return np.zeros(len(times_ms), dtype=bool)
        return (times_ms >= 0) & (times_ms < self.floor_ms)

    def _apply_batch(self, messages: pd.DataFrame, mode: BadRecords) -> list[BadRecord]:
        parts, bad = self._batch_updates(messages, 0, mode)
        return bad + (self._update(_Updates.concat(parts), messages, mode) if parts else [])

    def _batch_updates(
        self, messages: pd.DataFrame, first_row: int, mode: BadRecords
    ) -> tuple[list[_Updates], list[BadRecord]]:
        """``process_batch`` over ``messages`` (rows from ``first_row`` on of the
        batch); where it raises, over halves, down to the single messages it raises on
        (which are bad records)."""
        try:
            return [self._batch_output(messages, first_row)], []
        except (TaskDefinitionError, BadRecordError):
            raise
        except Exception as exc:
            if len(messages) == 1:
                return [], [self._raised("process_batch", exc, *messages.iloc[0].tolist(), mode)]
            half = len(messages) // 2
            first, first_bad = self._batch_updates(messages.iloc[:half], first_row, mode)
            second, second_bad = self._batch_updates(messages.iloc[half:], first_row + half, mode)
            return first + second, first_bad + second_bad

    def _batch_output(self, messages: pd.DataFrame, first_row: int) -> _Updates:
        out = self.task.process_batch(messages)
        name = type(self.task).__name__
        if isinstance(out, pd.DataFrame):
            missing = set(MESSAGE_COLUMNS) - set(out.columns)
            if missing:
                raise TaskDefinitionError(
                    f"{name}.process_batch returned a DataFrame without columns {sorted(missing)}"
                )
            timestamps = out["timestamp"].to_numpy()
            if timestamps.dtype.kind not in "iu":
                raise TaskDefinitionError(
                    f"{name}.process_batch returned timestamps of dtype {timestamps.dtype}, not integer milliseconds"
                )
            return _Updates(out["key"].to_numpy(), timestamps, out["value"].to_numpy(), np.full(len(out), -1))
        values = np.asarray(out)
        if len(values) != len(messages):
            raise TaskDefinitionError(
                f"{name}.process_batch returned {len(values)} values for "
                f"{len(messages)} messages; return one value per message or a DataFrame"
            )
        origins = np.arange(first_row, first_row + len(messages))
        return _Updates(messages["key"].to_numpy(), messages["timestamp"].to_numpy(), values, origins)

    def _apply_messages(self, messages: pd.DataFrame, mode: BadRecords) -> list[BadRecord]:
        state = _KeyState(self, messages, mode)
        process = self.task.process_message
        for origin, (key, timestamp, value) in enumerate(
            zip(messages["key"].tolist(), messages["timestamp"].tolist(), messages["value"].tolist())
        ):
            # The next message: its key, its row, and where its updates start.
            state.key, state.origin, state.mark = key, origin, len(state.keys)
            try:
                process(state, Message(key, timestamp, value))
            except (TaskDefinitionError, BadRecordError):
                raise
            except Exception as exc:
                state.discard()
                state.bad.append(self._raised("process_message", exc, key, timestamp, value, mode))
        state.flush()
        return state.bad

    def _update(self, updates: _Updates, messages: pd.DataFrame, mode: BadRecords) -> list[BadRecord]:
        """Applies ``updates``; when the table refuses them, applies all but the bad ones."""
        try:
            self.apply_values(updates.keys, updates.timestamps, updates.values)
            return []
        except (MonoidError, StateValueError):
            pass
        # Values the monoid refuses, one by one; then what fails only together (a sum
        # that would overflow) by halves.
        bad, accepted = [], np.ones(len(updates.keys), dtype=bool)
        for row in range(len(updates.keys)):
            try:
                self.monoid.column(updates.values[row:row + 1])
            except MonoidError as exc:
                accepted[row] = False
                bad.append(self._reject(self._bad_update(updates, row, messages, str(exc)), mode))
        return bad + self._update_halves(updates.rows(accepted), messages, mode)

    def _update_halves(self, updates: _Updates, messages: pd.DataFrame, mode: BadRecords) -> list[BadRecord]:
        if not len(updates.keys):
            return []
        try:
            self.apply_values(updates.keys, updates.timestamps, updates.values)
            return []
        except (MonoidError, StateValueError) as exc:
            if len(updates.keys) == 1:
                return [self._reject(self._bad_update(updates, 0, messages, str(exc)), mode)]
        half = len(updates.keys) // 2
        return (self._update_halves(updates.rows(slice(None, half)), messages, mode)
                + self._update_halves(updates.rows(slice(half, None)), messages, mode))

    @staticmethod
    def _bad_update(updates: _Updates, row: int, messages: pd.DataFrame, reason: str) -> BadRecord:
        """The message behind an update, or the update itself when the task made it up."""
        origin = int(updates.origins[row])
        if origin >= 0:
            key, timestamp, value = messages.iloc[origin].tolist()
            return BadRecord.of_message(key, timestamp, value, reason)
        return BadRecord.of_message(updates.keys[row], updates.timestamps[row], updates.values[row], reason)

    def _raised(self, method: str, exc: Exception, key, timestamp, value, mode: BadRecords) -> BadRecord:
        """The bad record of a message the task's ``method`` raised ``exc`` on."""
        reason = f"{type(self.task).__name__}.{method} raised {type(exc).__name__}: {exc}"
        return self._reject(BadRecord.of_message(key, timestamp, value, reason), mode)

    @staticmethod
    def _reject(record: BadRecord, mode: BadRecords) -> BadRecord:
        if mode is BadRecords.FAIL:
            raise BadRecordError(record)
        return record

    def advance(self, watermark_ms: int, checkpoint: bool = True) -> tuple[pd.DataFrame, Taken | None]:
        """Results of this batch and, if one is due at ``watermark_ms``, a checkpoint;
        then, with a ``ttl_ms``, the keys the watermark leaves too far behind expire.

        The checkpoint holds only the keys changed since the group's last one when that
        one is durable (``checkpointed``) and the table keeps changes, unless the chain
        already holds as many rows as the table or a multiple of ``whole_every_ms`` lies
        between them (``WHOLE_EVERY``). With
        ``checkpoint=False`` the state moves past the boundary due as if it had been
        checkpointed (``KeyedTable.seal``), but no checkpoint bytes are made.

        Expiry comes last, so the checkpoint at ``T`` holds the keys that no watermark
        before ``T`` expired: a group restored from it (its watermark starts at ``T``)
        holds every key that an uninterrupted run folded the messages from ``T`` on
        into, and the replay expires them as that run did.
        """
        watermark_ms = max(check_time_ms(watermark_ms, "watermark_ms"), self.floor_ms)
        results = self._results(watermark_ms)
        due = self.table.due_checkpoint(watermark_ms)
        taken = None
        if due is not None and checkpoint:
            base = self._changed_from(due)
            data = self.table.checkpoint_changes(due) if base else self.table.checkpoint(due)
            taken = Taken(due, data, base)
        elif due is not None:
            self.table.seal(due)
        self.table.expire(watermark_ms)
        return results, taken

    def _changed_from(self, due_ms: int) -> Base | None:
        """The durable checkpoint the one due at ``due_ms`` can hold the changes to, if any."""
        base, span = self.base, whole_every_ms(self.table.interval_ms)
        if (base is None or base.time_ms != self.table.checkpoint_ms or not self.table.keeps_changes
                or base.time_ms // span != due_ms // span or self.table.chain_rows >= len(self.table)):
            return None
        return base

    def _results(self, watermark_ms: int) -> pd.DataFrame:
        if self.window is not None:
            closed = self.table.close_windows(watermark_ms)
            keys, starts, ends, values = closed.keys, closed.starts_ms, closed.ends_ms, closed.values
        else:
            keys, values = self.table.take_touched_totals()
            starts = ends = np.full(len(keys), -1, dtype=np.int64)
        return pd.DataFrame(
            {
                "key": keys,
                "window_start": starts,
                "window_end": ends,
                "value": self.monoid.present_column(values),
            }
        )
