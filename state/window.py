"""Event-time windows: tumbling (``step_ms == size_ms``) and sliding (``step_ms < size_ms``).

A window is the half-open interval ``[start, start + size_ms)`` with ``start`` a
multiple of ``step_ms``. Windowed states keep per-*pane* partial aggregates, a pane
being ``[p, p + pane_ms)`` with ``pane_ms`` the greatest common divisor of the size,
the step and the checkpoint interval: every window and every checkpoint boundary is
then a union of whole panes, so a window's value is the merge of its panes (no
``minus`` needed) and a checkpoint never splits a pane.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from state.errors import StateValueError

__all__ = ["Window"]


@dataclass(frozen=True)
class Window:
    """Windows of ``size_ms`` starting every ``step_ms`` (milliseconds, event time)."""

    size_ms: int
    step_ms: int

    def __init__(self, size_ms: int, step_ms: int | None = None):
        step_ms = size_ms if step_ms is None else step_ms
        for name, value in (("size_ms", size_ms), ("step_ms", step_ms)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise StateValueError(f"Window {name} must be an int of milliseconds, got {value!r}")
            if value <= 0:
                raise StateValueError(f"Window {name} must be > 0 ms, got {value}")
        if step_ms > size_ms:
            raise StateValueError(
                f"Window step_ms={step_ms} is larger than size_ms={size_ms}: messages between "
                "windows would belong to none; use step_ms <= size_ms"
            )
        object.__setattr__(self, "size_ms", size_ms)
        object.__setattr__(self, "step_ms", step_ms)

    @property
    def tumbling(self) -> bool:
        """Whether windows do not overlap (step equals size)."""
        return self.step_ms == self.size_ms

    def pane_ms(self, checkpoint_interval_ms: int | None = None) -> int:
        """Width of the panes that tile every window (and checkpoint boundary, if given)."""
        widths = [self.size_ms, self.step_ms]
        if checkpoint_interval_ms is not None:
            widths.append(checkpoint_interval_ms)
        return math.gcd(*widths)

    def starts_containing(self, timestamp_ms: int) -> range:
        """Starts of the windows that contain ``timestamp_ms``, oldest first."""
        last = timestamp_ms // self.step_ms * self.step_ms
        first = (timestamp_ms - self.size_ms) // self.step_ms * self.step_ms + self.step_ms
        return range(max(first, 0), last + 1, self.step_ms)

    def starts_closing(self, after_ms: int, until_ms: int) -> range:
        """Starts of the windows whose end lies in ``(after_ms, until_ms]``, oldest first.

        A window closes when the watermark reaches its end: these are the windows that
        a watermark advance from ``after_ms`` to ``until_ms`` closes.
        """
        first = max(0, -((self.size_ms - after_ms - 1) // self.step_ms) * self.step_ms)
        last = (until_ms - self.size_ms) // self.step_ms * self.step_ms
        return range(first, last + 1, self.step_ms)

    def oldest_open_start(self, watermark_ms: int) -> int:
        """Start of the oldest window not yet closed at ``watermark_ms``.

        Data before it belongs only to closed windows and can be pruned.
        """
        return max(0, (watermark_ms - self.size_ms) // self.step_ms * self.step_ms + self.step_ms)
