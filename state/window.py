"""Event-time windows: tumbling (``step_ms == size_ms``), sliding (``step_ms < size_ms``)
and sessions (``SessionWindow``).

A window is the half-open interval ``[start, start + size_ms)`` with ``start`` a
multiple of ``step_ms``. Windowed states keep per-*pane* partial aggregates, a pane
being ``[p, p + pane_ms)`` with ``pane_ms`` the greatest common divisor of the size,
the step and the checkpoint interval: every window and every checkpoint boundary is
then a union of whole panes, so a window's value is the merge of its panes (no
``minus`` needed) and a checkpoint never splits a pane.

A session window has no fixed bounds: a key's messages belong to one session while
each follows the one before by less than ``gap_ms``, and the session is
``[first message, last message + gap_ms)``. A message that falls within the gap of
two sessions joins them into one (``state.sessions``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from state.errors import StateValueError

__all__ = ["Window", "SessionWindow", "window_from", "bucket_ms"]


@dataclass(frozen=True)
class Window:
    """Windows of ``size_ms`` starting every ``step_ms`` (milliseconds, event time)."""

    size_ms: int
    step_ms: int

    def __init__(self, size_ms: int, step_ms: int | None = None):
        step_ms = size_ms if step_ms is None else step_ms
        for name, value in (("size_ms", size_ms), ("step_ms", step_ms)):
            _check_ms("Window", name, value)
        if step_ms > size_ms:
            raise StateValueError(
                f"Window step_ms={step_ms} is larger than size_ms={size_ms}: messages between "
                "windows would belong to none; use step_ms <= size_ms"
            )
        object.__setattr__(self, "size_ms", size_ms)
        object.__setattr__(self, "step_ms", step_ms)

    def describe(self) -> dict:
        """The window as JSON data (``window_from`` reads it back)."""
        return {"size_ms": self.size_ms, "step_ms": self.step_ms}

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


@dataclass(frozen=True)
class SessionWindow:
    """Sessions of each key: its messages while each follows the one before by less
    than ``gap_ms`` (event time). A session ``[start, end)`` runs from its first message
    to its last one plus ``gap_ms``, and closes when the watermark reaches its end."""

    gap_ms: int

    def __init__(self, gap_ms: int):
        object.__setattr__(self, "gap_ms", _check_ms("SessionWindow", "gap_ms", gap_ms))

    def describe(self) -> dict:
        """The window as JSON data (``window_from`` reads it back)."""
        return {"gap_ms": self.gap_ms}

    def pane_ms(self, checkpoint_interval_ms: int | None = None) -> int:
        """The width of a table's buckets: the checkpoint interval (the gap without one);
        a session's messages are kept per interval, so a checkpoint splits none."""
        return checkpoint_interval_ms or self.gap_ms


def bucket_ms(window: Window | SessionWindow | None, interval_ms: int) -> int:
    """The width of a table's buckets, for ``window`` (None: none) and a checkpoint
    interval ``interval_ms``: no bucket holds messages of two checkpoint intervals, nor
    of two panes of a window."""
    return window.pane_ms(interval_ms) if window else interval_ms


def window_from(description: dict | None) -> Window | SessionWindow | None:
    """The window of ``describe``'s data (``None`` for none)."""
    if description is None:
        return None
    if "gap_ms" in description:
        return SessionWindow(description["gap_ms"])
    return Window(description["size_ms"], description["step_ms"])


def _check_ms(what: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateValueError(f"{what} {name} must be an int of milliseconds, got {value!r}")
    if value <= 0:
        raise StateValueError(f"{what} {name} must be > 0 ms, got {value}")
    return value
