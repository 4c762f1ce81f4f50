"""State declarations, windows, the keyed tables that hold state, their bytes and
checkpoint boundaries (depends on ``monoids`` only). Where the bytes are kept, the
checkpoint and clock stores, is ``persistent.storage``."""

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
