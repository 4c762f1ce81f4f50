"""When to checkpoint: event-time boundaries ``k * interval_ms`` passed by the watermark.

A checkpoint at time ``T`` holds exactly the effect of the messages with ``ts < T``;
it may be taken once the watermark has reached ``T`` (no more messages before ``T``
are expected).
"""

from __future__ import annotations

from state.boundaries import boundary_after, boundary_at_or_before, check_interval_ms
from state.checkpoint_store import CheckpointStore, check_time_ms

__all__ = ["CheckpointManager"]


class CheckpointManager:
    """Gearpump's checkpoint schedule for one task, with the fix for idle tasks.

    - ``update(ts)`` for every message: the first message arms the next checkpoint at
      ``boundary_after(ts)``; after a checkpoint at ``t`` the next one is armed at the
      first boundary above the newest message, or not at all if no message at or
      after ``t`` has been seen (Gearpump's rule).
    - ``due(watermark_ms)``: the checkpoint time to take now, or ``None``. Unlike
      Gearpump, a task that is not armed (idle, or without any message yet) still
      checkpoints at the newest boundary the watermark has passed, so it never pins
      the global clock: its state at that boundary is the state it already holds.
    - ``checkpoint(t, data)`` persists ``data`` at ``t`` in the store, then arms the next.
    """

    def __init__(self, interval_ms: int, store: CheckpointStore):
        self.interval_ms = check_interval_ms(interval_ms)
        self.store = store
        self.checkpoint_time: int | None = None
        self.last_checkpoint_ms: int | None = None
        self.max_message_ms: int | None = None

    def update(self, timestamp_ms: int) -> int | None:
        """Records a message time; returns the armed checkpoint time."""
        timestamp_ms = check_time_ms(timestamp_ms)
        if self.max_message_ms is None or timestamp_ms > self.max_message_ms:
            self.max_message_ms = timestamp_ms
        if self.checkpoint_time is None:
            self.checkpoint_time = boundary_after(
                max(timestamp_ms, self.last_checkpoint_ms or 0), self.interval_ms
            )
        return self.checkpoint_time

    def due(self, watermark_ms: int) -> int | None:
        """The checkpoint time to take at ``watermark_ms``, or ``None``."""
        watermark_ms = check_time_ms(watermark_ms, "watermark_ms")
        if self.checkpoint_time is not None:
            return self.checkpoint_time if watermark_ms >= self.checkpoint_time else None
        idle = boundary_at_or_before(watermark_ms, self.interval_ms)
        if idle > 0 and (self.last_checkpoint_ms is None or idle > self.last_checkpoint_ms):
            return idle
        return None

    def checkpoint(self, timestamp_ms: int, data: bytes) -> int | None:
        """Persists ``data`` as the checkpoint at ``timestamp_ms``; returns the next armed time."""
        self.store.persist(timestamp_ms, data)
        self.last_checkpoint_ms = timestamp_ms
        if self.max_message_ms is not None and self.max_message_ms >= timestamp_ms:
            self.checkpoint_time = boundary_after(self.max_message_ms, self.interval_ms)
        else:
            self.checkpoint_time = None
        return self.checkpoint_time

    def recover(self, timestamp_ms: int) -> bytes:
        """The checkpoint at exactly ``timestamp_ms``; the schedule restarts from it."""
        data = self.store.recover(timestamp_ms)
        self.last_checkpoint_ms = timestamp_ms
        self.checkpoint_time = None
        self.max_message_ms = None
        return data
