"""State declarations, windows, the keyed tables that hold state, checkpoint boundaries,
and the checkpoint and clock stores (depends on ``monoids`` only)."""

from state.checkpoint_store import CheckpointStore
from state.clock_store import ClockRecord, ClockStore
from state.errors import (
    CheckpointError,
    ClockError,
    CorruptCheckpointError,
    MissingCheckpointError,
    NoSpaceError,
    NotWritableError,
    StateError,
    StateTypeError,
    StateValueError,
    StorageError,
)
from state.fs import FileSystem, LocalFileSystem
from state.persistent_state import NonWindowState, PersistentState, WindowState
from state.table import KeyedTable, WindowResults
from state.window import SessionWindow, Window

__all__ = [
    "PersistentState",
    "NonWindowState",
    "WindowState",
    "Window",
    "SessionWindow",
    "KeyedTable",
    "WindowResults",
    "CheckpointStore",
    "ClockStore",
    "ClockRecord",
    "FileSystem",
    "LocalFileSystem",
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
