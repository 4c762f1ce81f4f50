"""Persistent states: monoid values that a task updates and the framework checkpoints.

The contract is Gearpump's, in Python names. The framework calls
``set_next_checkpoint_time(t)`` and, once the watermark has passed ``t``,
``checkpoint()``, which returns the bytes of the state at ``t``: the effect of
exactly the messages with ``ts < t``. After a failure it calls ``recover(t, data)``
with those bytes and replays the messages from ``t`` on. The task calls
``update(timestamp_ms, value)`` and ``get()``.

A message older than the last checkpoint (or, for windows, older than the last
watermark that closed windows) is *late*: its effect is already published, so it
is counted in ``late_count`` and ``update`` returns ``False`` instead of applying it.

A ``NonWindowState`` may declare a ``ttl_ms``: the table that holds it for many keys
(``new_table``, a key group's) then drops a key whose newest message is more than
``ttl_ms`` behind the watermark (``KeyedTable.expire``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from monoids.base import Monoid, MonoidError
from state.checkpoint_store import check_time_ms
from state.errors import CorruptCheckpointError, StateValueError
from state.table import KeyedTable, check_ttl_ms, table_for
from state.window import SessionWindow, Window

__all__ = ["PersistentState", "NonWindowState", "WindowState", "WindowResult"]

V = TypeVar("V")


@dataclass(frozen=True)
class WindowResult(Generic[V]):
    """The value of one closed window ``[start_ms, end_ms)``."""

    start_ms: int
    end_ms: int
    value: V


class PersistentState(ABC, Generic[V]):
    """A monoid state that can be checkpointed at event-time boundaries and recovered.

    ``late_count`` counts the messages refused as late.
    """

    late_count: int
    #: A key whose newest message is more than this many ms behind the watermark
    #: expires; ``None``: never (only a ``NonWindowState`` takes one).
    ttl_ms: int | None = None

    def __init__(self, monoid: Monoid[V]):
        if not isinstance(monoid, Monoid):
            raise StateValueError(f"a persistent state needs a Monoid, got {monoid!r}")
        self.monoid = monoid
        self.checkpoint_time: int | None = None

    @abstractmethod
    def update(self, timestamp_ms: int, value: V) -> bool:
        """Applies one message's value at its event time; ``False`` if it was late."""

    @abstractmethod
    def get(self) -> Any:
        """The current value."""

    @abstractmethod
    def checkpoint(self) -> bytes:
        """Bytes of the state at the next checkpoint time; the state then moves past it."""

    @abstractmethod
    def recover(self, timestamp_ms: int, data: bytes) -> None:
        """Replaces the state with the checkpoint ``data`` taken at ``timestamp_ms``."""

    def set_next_checkpoint_time(self, timestamp_ms: int) -> None:
        """The time of the next checkpoint: messages before it belong to it."""
        self.checkpoint_time = check_time_ms(timestamp_ms)

    def on_watermark(self, watermark_ms: int) -> list[WindowResult[V]]:
        """Results that the watermark makes final (closed windows); none by default."""
        return []

    @abstractmethod
    def new_table(self, interval_ms: int) -> KeyedTable:
        """An empty table that holds this state for many keys, checkpointed every ``interval_ms``."""

    def _checked(self, timestamp_ms: int, value: V) -> tuple[int, V]:
        timestamp_ms = check_time_ms(timestamp_ms)
        return timestamp_ms, self.monoid.validate(value, f"timestamp {timestamp_ms}")

    def _next_checkpoint_time(self) -> int:
        if self.checkpoint_time is None:
            raise StateValueError("checkpoint() before set_next_checkpoint_time(): no checkpoint time")
        return self.checkpoint_time


class NonWindowState(PersistentState[V]):
    """One monoid value, split at the next checkpoint time into ``left`` (messages
    before it) and ``right`` (messages at or after it).

    ``checkpoint()`` returns the encoding of ``left``, then folds ``right`` into
    ``left``. Until the first ``set_next_checkpoint_time`` everything goes to ``left``.

    With ``ttl_ms`` (a positive int) a key expires once its newest message is more than
    ``ttl_ms`` of event time behind the watermark: its key group drops it (all its
    values, also from later checkpoints), emits nothing for it, and a later message
    for it starts from ``zero()``, as for a new key. Expiry is a matter of the table
    that holds many keys (``new_table``); this object alone, one key's value, never
    expires.
    """

    def __init__(self, monoid: Monoid[V], ttl_ms: int | None = None):
        super().__init__(monoid)
        if ttl_ms is not None:
            self.ttl_ms = check_ttl_ms(ttl_ms, f"NonWindowState({monoid!r})")
        self.late_count = 0
        self.left: V = monoid.zero()
        self.right: V = monoid.zero()
        self.sealed_ms = 0
        #: Newest message times in ``left`` and ``right`` (a checkpoint time must be after left's).
        self.left_max_ms: int | None = None
        self.right_max_ms: int | None = None

    def update(self, timestamp_ms: int, value: V) -> bool:
        timestamp_ms, value = self._checked(timestamp_ms, value)
        if timestamp_ms < self.sealed_ms:
            self.late_count += 1
            return False
        if self.checkpoint_time is None or timestamp_ms < self.checkpoint_time:
            self.left = self.monoid.plus(self.left, value)
            self.left_max_ms = max(timestamp_ms, self.left_max_ms or 0)
        else:
            self.right = self.monoid.plus(self.right, value)
            self.right_max_ms = max(timestamp_ms, self.right_max_ms or 0)
        return True

    def set_next_checkpoint_time(self, timestamp_ms: int) -> None:
        timestamp_ms = check_time_ms(timestamp_ms)
        if self.left_max_ms is not None and timestamp_ms <= self.left_max_ms:
            raise StateValueError(
                f"checkpoint time {timestamp_ms} is not after the message at {self.left_max_ms} already in "
                "the state before it: the checkpoint would hold a message it must not"
            )
        super().set_next_checkpoint_time(timestamp_ms)

    def get(self) -> V:
        return self.monoid.plus(self.left, self.right)

    def new_table(self, interval_ms: int) -> KeyedTable:
        return KeyedTable(self.monoid, interval_ms, ttl_ms=self.ttl_ms)

    def checkpoint(self) -> bytes:
        checkpoint_time = self._next_checkpoint_time()
        data = self.monoid.encode(self.left)
        self.left = self.monoid.plus(self.left, self.right)
        self.right = self.monoid.zero()
        if self.right_max_ms is not None:
            self.left_max_ms = max(self.right_max_ms, self.left_max_ms or 0)
            self.right_max_ms = None
        self.sealed_ms = max(self.sealed_ms, checkpoint_time)
        return data

    def recover(self, timestamp_ms: int, data: bytes) -> None:
        timestamp_ms = check_time_ms(timestamp_ms)
        try:
            self.left = self.monoid.decode(data)
        except MonoidError as exc:
            raise CorruptCheckpointError(f"checkpoint at {timestamp_ms}: {exc}") from exc
        self.right = self.monoid.zero()
        self.checkpoint_time = self.left_max_ms = self.right_max_ms = None
        self.sealed_ms = timestamp_ms


class WindowState(PersistentState[V]):
    """Aggregates per window, for one key: tumbling or sliding (``Window``), or
    sessions (``SessionWindow``).

    Messages are folded into panes (see ``state.window``) or session segments (see
    ``state.sessions``); ``on_watermark`` returns the windows the watermark closes,
    each the merge of its panes or segments (no ``Group`` needed), and what no window
    can need again is pruned at each checkpoint. ``get()`` maps the start of each
    window still open to its value so far.

    Checkpoint times must be multiples of ``checkpoint_interval_ms`` (default: the
    pane width, or a session window's gap).
    """

    _KEY = np.array([None], dtype=object)

    def __init__(self, monoid: Monoid[V], window: Window | SessionWindow, checkpoint_interval_ms: int | None = None):
        super().__init__(monoid)
        if not isinstance(window, (Window, SessionWindow)):
            raise StateValueError(f"WindowState needs a Window or a SessionWindow, got {window!r}")
        self.window = window
        self.table = self.new_table(checkpoint_interval_ms or window.pane_ms())

    @property
    def late_count(self) -> int:
        return self.table.late_count

    def update(self, timestamp_ms: int, value: V) -> bool:
        timestamp_ms, value = self._checked(timestamp_ms, value)
        late = self.table.late_count
        self.table.update(self._KEY, np.array([timestamp_ms], dtype=np.int64), [value])
        return self.table.late_count == late

    def new_table(self, interval_ms: int) -> KeyedTable:
        return table_for(self.monoid, interval_ms, self.window)

    def get(self) -> dict[int, V]:
        open_windows = self.table.open_windows()
        return dict(zip(open_windows.starts_ms.tolist(), self.monoid.values(open_windows.values)))

    def on_watermark(self, watermark_ms: int) -> list[WindowResult[V]]:
        closed = self.table.close_windows(watermark_ms)
        return [
            WindowResult(start, end, value)
            for start, end, value in zip(
                closed.starts_ms.tolist(), closed.ends_ms.tolist(), self.monoid.values(closed.values)
            )
        ]

    def checkpoint(self) -> bytes:
        return self.table.checkpoint(self._next_checkpoint_time())

    def recover(self, timestamp_ms: int, data: bytes) -> None:
        self.table.recover(timestamp_ms, data)
        self.checkpoint_time = None
