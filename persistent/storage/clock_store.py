"""The global minimum checkpoint clock, the per-task clocks, and a short history.

The clock ``T`` (ms of event time) is the newest time at which every task holds a
durable checkpoint; a restarted job restores every task's checkpoint at exactly
``T``. It is written only after those checkpoints are durable, and it never moves
backwards except by a deliberate ``rewind``.

Layout under ``root`` (each file one record of ``persistent.storage.checkpoint_store``'s format,
stamped with the clock, holding the ``ClockRecord`` as JSON)::

    clock                                         the current record
    clock-history/00000000000000000007.clock      the last ``keep`` records, by sequence

The current record is written before its history entry: after a crash between
the two, history merely lacks the newest entry. One writer (the driver) is assumed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from types import MappingProxyType

from persistent.storage.checkpoint_store import CheckpointStore, decode_record, encode_record
from persistent.storage.fs import FileSystem
from state.boundaries import check_time_ms
from state.errors import ClockError, CorruptCheckpointError, StateValueError

__all__ = ["ClockRecord", "ClockStore", "verify_clock"]

_SEQUENCE_DIGITS = 20
_HISTORY_NAME = re.compile(rf"(\d{{{_SEQUENCE_DIGITS}}})\.clock")
_RESTORE_FROM_HISTORY = (
    "list earlier clocks with ClockStore.history() and restore one with ClockStore.rewind(clock_ms)"
)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_task_clocks(task_clocks: Mapping[str, int]) -> dict[str, int]:
    """``task_clocks`` as a dict sorted by task; ``StateValueError`` unless it maps names to ms."""
    if not isinstance(task_clocks, Mapping):
        raise StateValueError(f"task_clocks must map task names to ms, got {type(task_clocks).__name__}")
    for task in task_clocks:
        if not isinstance(task, str) or not task:
            raise StateValueError(f"task names must be non-empty strings, got {task!r}")
    return {task: check_time_ms(task_clocks[task], f"task_clocks[{task!r}]") for task in sorted(task_clocks)}


@dataclass(frozen=True)
class ClockRecord:
    """One written clock.

    ``clock_ms`` is the global minimum checkpoint clock, ``task_clocks`` each task's
    newest durable checkpoint time (ms), ``written_at_ms`` the wall time of writing
    and ``sequence`` counts the records written, from 1.
    """

    clock_ms: int
    task_clocks: Mapping[str, int] = field(hash=False)
    written_at_ms: int
    sequence: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock_ms", check_time_ms(self.clock_ms, "clock_ms"))
        object.__setattr__(self, "written_at_ms", check_time_ms(self.written_at_ms, "written_at_ms"))
        if isinstance(self.sequence, bool) or not isinstance(self.sequence, int) or self.sequence < 1:
            raise StateValueError(f"sequence must be an int >= 1, got {self.sequence!r}")
        object.__setattr__(self, "task_clocks", MappingProxyType(_check_task_clocks(self.task_clocks)))

    def to_bytes(self) -> bytes:
        """The stored form: a record stamped with ``clock_ms`` holding the fields as JSON."""
        fields = {f.name: getattr(self, f.name) for f in dataclass_fields(self)}
        fields["task_clocks"] = dict(self.task_clocks)
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return encode_record(self.clock_ms, body.encode())

    @classmethod
    def from_bytes(cls, raw: bytes, where: str, remedy: str) -> ClockRecord:
        """The record in ``raw``, read from ``where``; ``ClockError`` naming ``remedy`` if corrupt."""
        try:
            stamp_ms, payload = decode_record(raw, where, remedy)
        except CorruptCheckpointError as exc:
            raise ClockError(str(exc)) from exc
        try:
            record = cls(**json.loads(payload))
        except (ValueError, TypeError) as exc:
            raise ClockError(f"corrupt clock record {where}: {exc}; {remedy}") from exc
        if record.clock_ms != stamp_ms:
            raise ClockError(
                f"corrupt clock record {where}: header says {stamp_ms} ms, "
                f"body says {record.clock_ms} ms; {remedy}"
            )
        return record


class ClockStore:
    """The clock of one job under ``root``, with the last ``keep`` records as history."""

    def __init__(
        self,
        fs: FileSystem,
        root: str,
        keep: int = 10,
        wall_clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise StateValueError(f"keep must be an int >= 1 (history records to keep), got {keep!r}")
        self.fs = fs
        self.keep = keep
        self.wall_clock_ms = wall_clock_ms
        self.path = fs.join(root, "clock")
        self.history_directory = fs.join(root, "clock-history")

    def __repr__(self) -> str:
        return f"ClockStore({self.path!r}, keep={self.keep})"

    def read(self) -> ClockRecord | None:
        """The current record; ``None`` only for a fresh job that never wrote a clock.

        Raises ``ClockError`` when the clock file is corrupt, or missing while history exists.
        """
        try:
            raw = self.fs.read_bytes(self.path)
        except FileNotFoundError:
            if self._history_sequences():
                raise ClockError(
                    f"clock file {self.path} is missing but {self.history_directory} holds history; "
                    f"{_RESTORE_FROM_HISTORY}"
                ) from None
            return None
        return ClockRecord.from_bytes(raw, self.path, _RESTORE_FROM_HISTORY)

    def advance(self, clock_ms: int, task_clocks: Mapping[str, int]) -> ClockRecord:
        """Durably sets the clock to ``clock_ms`` with ``task_clocks``; returns the current record.

        ``clock_ms`` must equal ``min(task_clocks.values())`` (when there are tasks), and
        neither it nor any task clock may be lower than the current one: ``ClockError``
        otherwise. Advancing to the current values again writes nothing (replays).
        Call it only once every task's checkpoint at ``clock_ms`` is durable.
        """
        clock_ms = check_time_ms(clock_ms, "clock_ms")
        task_clocks = _check_task_clocks(task_clocks)
        if task_clocks and clock_ms != min(task_clocks.values()):
            slowest = min(task_clocks, key=task_clocks.__getitem__)
            raise ClockError(
                f"clock_ms {clock_ms} must equal the lowest task clock, {task_clocks[slowest]} ms of task "
                f"{slowest!r}: the clock is the newest time at which every task has a checkpoint"
            )
        current = self.read()
        if current is not None:
            if clock_ms < current.clock_ms:
                raise ClockError(
                    f"clock {self.path} would move backwards from {current.clock_ms} to {clock_ms} ms; "
                    f"only rewind(clock_ms) moves it back, deliberately"
                )
            behind = {
                task: (current.task_clocks[task], task_ms)
                for task, task_ms in task_clocks.items()
                if task_ms < current.task_clocks.get(task, 0)
            }
            if behind:
                raise ClockError(
                    f"task clocks in {self.path} would move backwards (task: (current, new) ms): {behind}; "
                    f"pass each task's newest durable checkpoint time"
                )
            if clock_ms == current.clock_ms and task_clocks == current.task_clocks:
                return current
        return self._write(clock_ms, task_clocks, current)

    def history(self) -> list[ClockRecord]:
        """The last ``keep`` records written, oldest first; ``ClockError`` if one is corrupt."""
        records = []
        for sequence in self._history_sequences():
            path = self._history_path(sequence)
            remedy = f"delete {path} to drop this entry from the history"
            record = ClockRecord.from_bytes(self.fs.read_bytes(path), path, remedy)
            if record.sequence != sequence:
                raise ClockError(f"clock history entry {path} holds sequence {record.sequence}; {remedy}")
            records.append(record)
        return records

    def oldest_restorable_ms(self) -> int | None:
        """The oldest clock a restart may restore: the lowest of the current clock and
        those in the history (after a rewind, not the oldest written); ``None`` before
        the first. A job keeps every checkpoint from it on."""
        current = self.read()
        clocks = [record.clock_ms for record in self.history()] + ([current.clock_ms] if current else [])
        return min(clocks, default=None)

    def rewind(self, clock_ms: int) -> ClockRecord:
        """Deliberately moves the clock to ``clock_ms`` of a record in ``history()``; returns the new record.

        This works when the current clock file is corrupt. Every task clock is set to
        ``clock_ms``, since every task restarts there. The history records after the
        one rewound to go first: they name the abandoned timeline, whose checkpoints
        the caller deletes next with ``CheckpointStore.delete_after(clock_ms)`` for
        every task, so they are not mistaken for progress.
        """
        clock_ms = check_time_ms(clock_ms, "clock_ms")
        past = self.history()
        target = next((r for r in reversed(past) if r.clock_ms == clock_ms), None)
        if target is None:
            raise ClockError(
                f"cannot rewind {self.path} to {clock_ms} ms: not in its history "
                f"(clocks in history: {sorted({r.clock_ms for r in past})} ms)"
            )
        try:
            current = self.read()
        except ClockError:
            current = None  # a corrupt clock is what rewinds repair
        for sequence in self._history_sequences():
            if sequence > target.sequence:
                self.fs.delete(self._history_path(sequence))
        return self._write(clock_ms, dict.fromkeys(target.task_clocks, clock_ms), current)

    def restart(self, clock_ms: int, task_clocks: Mapping[str, int]) -> ClockRecord:
        """Starts the clock over at ``clock_ms`` with ``task_clocks`` (at most ``clock_ms``
        each), dropping the history: for a new set of tasks (a rescale), which no earlier
        clock names. The new record is written before the history goes, so a crash in
        between leaves a readable clock."""
        clock_ms = check_time_ms(clock_ms, "clock_ms")
        task_clocks = _check_task_clocks(task_clocks)
        if task_clocks and clock_ms != min(task_clocks.values()):
            raise ClockError(f"clock_ms {clock_ms} must equal the lowest task clock of {task_clocks}")
        try:
            current = self.read()
        except ClockError:
            current = None
        record = self._write(clock_ms, task_clocks, current)
        for sequence in self._history_sequences()[:-1]:
            self.fs.delete(self._history_path(sequence))
        return record

    def _write(
        self, clock_ms: int, task_clocks: Mapping[str, int], current: ClockRecord | None
    ) -> ClockRecord:
        known = [*self._history_sequences(), *([current.sequence] if current else [])]
        record = ClockRecord(
            clock_ms=clock_ms,
            task_clocks=task_clocks,
            written_at_ms=self.wall_clock_ms(),
            sequence=max(known, default=0) + 1,
        )
        raw = record.to_bytes()
        self.fs.write_atomic(self.path, raw)
        self.fs.write_atomic(self._history_path(record.sequence), raw)
        for sequence in self._history_sequences()[: -self.keep]:
            self.fs.delete(self._history_path(sequence))
        return record

    def _history_sequences(self) -> list[int]:
        names = map(_HISTORY_NAME.fullmatch, self.fs.list_names(self.history_directory))
        return [int(m.group(1)) for m in names if m]

    def _history_path(self, sequence: int) -> str:
        return self.fs.join(self.history_directory, f"{sequence:0{_SEQUENCE_DIGITS}d}.clock")


def verify_clock(record: ClockRecord, checkpoint_store_factory: Callable[[str], CheckpointStore]) -> None:
    """Checks that every task of ``record`` has a readable checkpoint at ``record.clock_ms``.

    Raises ``MissingCheckpointError`` or ``CorruptCheckpointError`` (from
    ``CheckpointStore.recover``) for the first task, by name, that does not.
    """
    for task in record.task_clocks:
        checkpoint_store_factory(task).recover(record.clock_ms)
