"""``PersistentTask``: what a user writes.

A task declares its state (``persistent_state``) and how messages update it, in one
of two forms:

- ``process_message(state, message)``, Gearpump's API: called once per message with
  the state of the message's key, a ``KeyState``; the task calls
  ``state.update(message.timestamp, value)`` and may read ``state.get()``.
- ``process_batch(messages)``, the vectorized form: called with a pandas DataFrame of
  messages (columns ``key``, ``timestamp``, ``value``) and returns the monoid value
  of each message, as an array aligned with the rows, or a DataFrame with columns
  ``key``, ``timestamp`` and ``value`` (to drop or split messages). It is many times
  faster because no Python code runs per message.

A ``MonoidTask`` writes neither: each message is its monoid's value of the message's
``value`` (``Count``: 1; ``Averaged``: one observation). Spark computes those values
itself, so the runtime folds such a task's messages before the shuffle
(``persistent.runtime.fold``).

Everything else (key groups, checkpoints, the clock, recovery) is the framework's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd

from monoids import Averaged, Count
from persistent.core.errors import PersistentError
from state.persistent_state import NonWindowState, PersistentState, WindowState
from state.window import Window

__all__ = ["PersistentTask", "MonoidTask", "KeyState", "Message", "MESSAGE_COLUMNS", "TaskDefinitionError"]


class TaskDefinitionError(PersistentError, TypeError):
    """A task class or its state declaration is not usable."""


class Message(NamedTuple):
    """One input record: its key, event time in milliseconds and value."""

    key: Any
    timestamp: int
    value: Any


#: The columns of messages in a frame (a source's, ``process_batch``'s): ``Message``'s fields.
MESSAGE_COLUMNS = Message._fields


class KeyState(Protocol):
    """The state of one key, as ``PersistentTask.process_message`` sees it.

    The runtime hands one to each call; it is valid only during that call. Values are
    values of the task's monoid (``PersistentTask.persistent_state().monoid``).
    """

    def update(self, timestamp_ms: int, value: Any) -> bool:
        """Folds ``value`` into the key's state at event time ``timestamp_ms``.

        A time that is not an int of milliseconds >= 0, or a value the monoid refuses,
        raises (``StateValueError``, ``MonoidError``) and the message is a bad record.
        Returns ``True`` once the update is taken; an update behind the last checkpoint
        or a closed window is counted as late when applied and changes nothing. If the
        call of ``process_message`` raises, its updates are dropped.
        """

    def get(self) -> Any:
        """The key's monoid value: all its messages so far, this call's updates
        included (for a window state, folded over all its open panes)."""


class PersistentTask(ABC):
    """Base class of stateful tasks; override ``persistent_state`` and one of
    ``process_message`` or ``process_batch``.

    ``persistent_state()`` returns the state's declaration, a frozen spec:
    ``NonWindowState(monoid, ttl_ms=None)`` or ``WindowState(monoid, window)``. The
    runtime builds the live state of the task's keys from it (``PersistentState.build``).
    ``process_message(state, message)`` gets the state of ``message.key`` as a
    ``KeyState``: ``state.update(timestamp_ms, value)`` and ``state.get()``.
    """

    @abstractmethod
    def persistent_state(self) -> PersistentState:
        """The state declaration: ``NonWindowState(monoid)`` or ``WindowState(monoid, window)``."""

    def process_message(self, state: KeyState, message: Message) -> None:
        """Updates ``state`` (the ``KeyState`` of ``message.key``) with one message."""
        raise NotImplementedError

    def process_batch(self, messages: pd.DataFrame) -> np.ndarray | pd.DataFrame:
        """The vectorized form: the monoid values of a batch of messages (a DataFrame
        with columns ``key``, ``timestamp`` and ``value``), one per message in order, or
        a DataFrame of updates with columns ``key``, ``timestamp`` and ``value`` (a message
        may then update other keys, or none). A task that overrides it is ``vectorized``
        and its ``process_message`` is never called; one that does not has
        ``process_message`` called per message instead."""
        raise NotImplementedError

    @property
    def vectorized(self) -> bool:
        """Whether the task overrides ``process_batch``."""
        return type(self).process_batch is not PersistentTask.process_batch

    def state_spec(self) -> PersistentState:
        """``persistent_state()``, checked (with the task's methods) before anything runs."""
        if type(self).process_message is PersistentTask.process_message and not self.vectorized:
            raise TaskDefinitionError(
                f"{type(self).__name__} must override process_message(state, message) or process_batch(messages)"
            )
        spec = self.persistent_state()
        if not isinstance(spec, (NonWindowState, WindowState)):
            raise TaskDefinitionError(
                f"{type(self).__name__}.persistent_state() must return a NonWindowState or a "
                f"WindowState, got {spec!r}"
            )
        return spec


class MonoidTask(PersistentTask):
    """A task whose every message is its monoid's value of the message's ``value``:
    override ``persistent_state`` only, with a ``NonWindowState`` or a ``WindowState``
    of fixed windows (tumbling or sliding, not sessions) of ``Count()`` (each message
    counts one, whatever its value) or ``Averaged()`` (each value, a finite number, is
    one observation).

    The runtime folds such a task's on-time messages per key and checkpoint interval
    (window pane, when windowed) in Spark, in the task that reads them, so that one
    partial value per key and interval crosses Spark's shuffle instead of every message
    (``persistent.runtime.fold``, where the rule is); a message it does not fold (late,
    before the restore point, a value the monoid refuses) reaches ``process_batch``
    below, which gives every message the value the fold gives it."""

    def process_batch(self, messages: pd.DataFrame) -> np.ndarray:
        monoid, values = self.state_spec().monoid, messages["value"].to_numpy()
        if type(monoid) is Count:
            return np.ones(len(values), dtype=np.int64)
        return monoid.prepare_column(values)  # Averaged(): state_spec allows no other

    def state_spec(self) -> PersistentState:
        spec = super().state_spec()
        fixed = isinstance(spec, NonWindowState) or (isinstance(spec, WindowState) and isinstance(spec.window, Window))
        if not fixed or type(spec.monoid) not in (Count, Averaged):
            raise TaskDefinitionError(
                f"{type(self).__name__} is a MonoidTask: its state must be a NonWindowState or a WindowState of "
                f"a Window (not a SessionWindow) of Count() or Averaged(), got {spec!r}"
            )
        return spec
