"""``PersistentTask``: what a user writes.

A task declares its state (``persistent_state``) and how messages update it, in one
of two forms:

- ``process_message(state, message)``, Gearpump's API: called once per message with
  the state of the message's key; the task calls ``state.update(message.timestamp,
  value)``.
- ``process_batch(messages)``, the vectorized form: called with a pandas DataFrame of
  messages (columns ``key``, ``timestamp``, ``value``) and returns the monoid value
  of each message, as an array aligned with the rows, or a DataFrame with columns
  ``key``, ``timestamp`` and ``value`` (to drop or split messages). It is many times
  faster because no Python code runs per message.

Everything else (key groups, checkpoints, the clock, recovery) is the framework's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from persistent.core.errors import PersistentError
from state.persistent_state import NonWindowState, PersistentState, WindowState

__all__ = ["PersistentTask", "Message", "TaskDefinitionError"]


class TaskDefinitionError(PersistentError, TypeError):
    """A task class or its state declaration is not usable."""


class Message(NamedTuple):
    """One input record: its key, event time in milliseconds and value."""

    key: Any
    timestamp: int
    value: Any


class PersistentTask(ABC):
    """Base class of stateful tasks; override ``persistent_state`` and one of
    ``process_message`` or ``process_batch``."""

    @abstractmethod
    def persistent_state(self) -> PersistentState:
        """A fresh state declaration: ``NonWindowState(monoid)`` or ``WindowState(monoid, window)``."""

    def process_message(self, state: PersistentState, message: Message) -> None:
        """Updates ``state`` (the state of ``message.key``) with one message."""
        raise NotImplementedError

    def process_batch(self, messages: pd.DataFrame) -> np.ndarray | pd.DataFrame:
        """Monoid values of a batch of messages; by default calls ``process_message`` per row."""
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
