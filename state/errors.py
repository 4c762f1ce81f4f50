"""Errors raised by persistent states and their stores.

Each inherits the matching builtin as well, so callers may catch ``ValueError`` or
``OSError`` as usual; messages name what was wrong, where, and what to do.
"""

from __future__ import annotations

__all__ = [
    "StateError",
    "StateValueError",
    "CheckpointError",
    "CorruptCheckpointError",
    "MissingCheckpointError",
    "ClockError",
]


class StateError(Exception):
    """Root of the errors raised by ``state``."""


class StateValueError(StateError, ValueError):
    """Bad input to a state: a negative timestamp, a bad window, a value the monoid refuses."""


class CheckpointError(StateError, OSError):
    """A checkpoint or clock cannot be read or written."""


class CorruptCheckpointError(CheckpointError):
    """A stored record is torn or corrupt (bad magic, version, length or checksum)."""


class MissingCheckpointError(CheckpointError):
    """A checkpoint that must exist (for example one named by the clock) does not."""


class ClockError(CheckpointError):
    """The clock would move backwards, names checkpoints that are not durable, or is corrupt."""
