"""Checkpoint boundaries: the event times ``k * interval_ms`` at which states are checkpointed.

A checkpoint at boundary ``T`` holds exactly the effect of the messages with ``ts < T``;
it may be taken once the watermark has reached ``T`` (``KeyedTable.due_checkpoint``).
"""

from __future__ import annotations

from state.errors import StateValueError

__all__ = ["boundary_after", "boundary_at_or_before", "check_interval_ms"]


def check_interval_ms(interval_ms: object) -> int:
    """``interval_ms`` if it is a positive int of milliseconds, else ``StateValueError``."""
    if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms <= 0:
        raise StateValueError(f"checkpoint interval_ms must be an int > 0, got {interval_ms!r}")
    return interval_ms


def boundary_after(timestamp_ms: int, interval_ms: int) -> int:
    """The first checkpoint boundary strictly after ``timestamp_ms``."""
    return (timestamp_ms // interval_ms + 1) * interval_ms


def boundary_at_or_before(timestamp_ms: int, interval_ms: int) -> int:
    """The newest checkpoint boundary at or before ``timestamp_ms``."""
    return timestamp_ms // interval_ms * interval_ms
