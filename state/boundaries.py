"""Checkpoint boundaries: the event times ``k * interval_ms`` at which states are checkpointed.

A checkpoint at boundary ``T`` holds exactly the effect of the messages with ``ts < T``;
it may be taken once the watermark has reached ``T`` (``KeyedTable.due_checkpoint``).
"""

from __future__ import annotations

import numbers

from state.errors import StateValueError

__all__ = ["boundary_after", "boundary_at_or_before", "check_interval_ms", "check_time_ms"]

_MAX_TIME_MS = 2**63 - 1


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


def check_time_ms(timestamp_ms: object, what: str = "timestamp_ms") -> int:
    """``timestamp_ms`` as an ``int`` if it is an integer in ``[0, 2**63)`` ms, else ``StateValueError``."""
    if type(timestamp_ms) is int and 0 <= timestamp_ms <= _MAX_TIME_MS:
        return timestamp_ms  # the common case, without the costlier checks below
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, numbers.Integral):
        raise StateValueError(
            f"{what} must be an int of milliseconds, got {type(timestamp_ms).__name__} {timestamp_ms!r}"
        )
    if not 0 <= timestamp_ms <= _MAX_TIME_MS:
        raise StateValueError(f"{what} must be in [0, 2**63) ms, got {timestamp_ms}")
    return int(timestamp_ms)
