"""Errors raised by persistent states and their stores.

Each inherits the matching builtin as well, so callers may catch ``ValueError``,
``TypeError`` or ``OSError`` as usual; messages name what was wrong, where, and what to do.
"""

from __future__ import annotations

__all__ = [
    "StateError",
    "StateValueError",
    "StateTypeError",
    "CheckpointError",
    "CorruptCheckpointError",
    "MissingCheckpointError",
    "ClockError",
    "StorageError",
    "NoSpaceError",
    "NotWritableError",
]


class StateError(Exception):
    """Root of the errors raised by ``state``."""


class StateValueError(StateError, ValueError):
    """Bad input to a state: a negative timestamp, a bad window, a value the monoid refuses."""


class StateTypeError(StateError, TypeError):
    """Input of the wrong type to a store: checkpoint data that is not bytes."""


class CheckpointError(StateError, OSError):
    """A checkpoint or clock cannot be read or written."""


class CorruptCheckpointError(CheckpointError):
    """A stored record is torn or corrupt (bad magic, version, length or checksum; a
    JSON record that is no JSON, lacks a field or holds a wrong type). ``path`` is its
    file, when the raiser names it."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class MissingCheckpointError(CheckpointError):
    """A checkpoint that must exist (for example one named by the clock) does not:
    task ``task`` has none at ``timestamp_ms``."""

    def __init__(self, task: str, timestamp_ms: int, message: str) -> None:
        super().__init__(message)
        self.task, self.timestamp_ms = task, timestamp_ms

    def __reduce__(self):
        return type(self), (self.task, self.timestamp_ms, str(self)), self.__dict__


class ClockError(CheckpointError):
    """The clock would move backwards, names checkpoints that are not durable, or is corrupt."""


class StorageError(CheckpointError):
    """The storage refused to ``action`` (read, write, delete, ...) ``path``.

    ``detail`` holds the file system's own words. A failed write leaves ``path``
    as it was: writes are atomic, and their temporary file is removed.
    """

    def __init__(self, action: str, path: str, detail: str) -> None:
        self.action, self.path, self.detail = action, path, detail
        head, slash, _ = path.rstrip("/").rpartition("/")
        self.directory = head or slash or "."
        unchanged = f"; {path} is unchanged" if action == "write" else ""
        super().__init__(f"cannot {action} {path}: {self._problem()}; {self._remedy()}{unchanged}")

    def __reduce__(self):
        return type(self), (self.action, self.path, self.detail)

    def _problem(self) -> str:
        return self.detail

    def _remedy(self) -> str:
        return f"check the file system holding {self.directory}, then retry"


class NoSpaceError(StorageError):
    """The file system holding ``path`` is full (or a quota is exhausted)."""

    def _problem(self) -> str:
        return f"no space left on the file system holding {self.directory} ({self.detail})"

    def _remedy(self) -> str:
        return "free space there (or move the checkpoint directory to a larger file system), then retry"


class NotWritableError(StorageError):
    """The directory of ``path`` is not writable: read-only, permissions, immutable."""

    def _problem(self) -> str:
        return f"{self.directory} is not writable ({self.detail})"

    def _remedy(self) -> str:
        return (
            "make it writable for the user running the job (remount it read-write, or fix its "
            "permissions, owner or immutable attribute), then retry"
        )
