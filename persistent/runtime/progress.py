"""What a running job shows: a line per micro-batch, and a progress bar while an
available-now run reads a bounded input.

The bar follows Spark's own offsets: each micro-batch's end offset says how far the
source has read, and the source's ``backlog`` says where the input ends
(``Source.backlog``). Its rate and time left count only micro-batches that finished
after the first one: what the first one read took Spark's start-up as well. Pure
Python: the runtime feeds it the offsets.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

from persistent.sources.base import Backlog

__all__ = ["Terminal", "ProgressBar", "stderr"]


class Terminal:
    """Lines with at most one progress bar below them, on ``stream`` (default: the
    current ``sys.stderr``). On a terminal the bar is redrawn in place and lines are
    printed above it; elsewhere, such as a log file, each new state of the bar is a
    line of its own. Safe to call from Spark's callback threads."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream
        self._bar = ""
        self._lock = threading.Lock()

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stderr

    def _in_place(self) -> bool:
        return self.stream.isatty()

    def line(self, text: str) -> None:
        with self._lock:
            out = self.stream
            if self._bar and self._in_place():
                out.write(f"\r\x1b[K{text}\n{self._bar}")
            else:
                out.write(f"{text}\n")
            out.flush()

    def bar(self, text: str) -> None:
        with self._lock:
            if text == self._bar:
                return
            self._bar = text
            out = self.stream
            out.write(f"\r\x1b[K{text}" if self._in_place() else f"{text}\n")
            out.flush()

    def end_bar(self) -> None:
        """Leaves the bar where it is; later lines go below it."""
        with self._lock:
            if self._bar and self._in_place():
                self.stream.write("\n")
                self.stream.flush()
            self._bar = ""


#: The process's standard error, shared by everything a job prints.
stderr = Terminal()


class ProgressBar:
    """``[#########.....................] 3/10 files  30%  1.5 files/s  5 s left``: how
    far an available-now run has read its ``Backlog``; the rate (and so the time left)
    from the second micro-batch that read something on, over the micro-batches since
    the first (``clock`` gives the time in seconds)."""

    WIDTH = 30

    def __init__(self, backlog: Backlog, terminal: Terminal = stderr, clock: Callable[[], float] = time.monotonic):
        self.backlog = backlog
        self.terminal = terminal
        self.clock = clock
        # When the first micro-batch that read something was shown, and how far it read:
        # the rate counts from there.
        self.first: tuple[float, int] | None = None
        # A restarted query (recovery path A) begins where Spark's checkpoint says:
        # its first micro-batch's start offset.
        self.begin: int | None = None
        self.end = backlog.end
        self.done = 0

    def update(self, start_offset: str | None, end_offset: str | None) -> None:
        """Shows the bar after a micro-batch that read from ``start_offset`` to
        ``end_offset`` (Spark's JSON offsets)."""
        position = self.backlog.position(end_offset)
        if position is None or (self.begin is not None and position - self.begin == self.done):
            return  # nothing new read: the rate and time left stay as they were
        if self.begin is None:
            start = self.backlog.position(start_offset)
            self.begin = self.backlog.begin if start is None else start
        # Input that arrived after the run started and before Spark fixed its target.
        self.end = max(self.end, position)
        self.done = position - self.begin
        if self.first is None:
            self.first = (self.clock(), self.done)
        self.terminal.bar(self.render())

    def render(self) -> str:
        begin = self.backlog.begin if self.begin is None else self.begin
        total = max(self.end - begin, 0)
        fraction = self.done / total if total else 1.0
        filled = round(fraction * self.WIDTH)
        unit = self.backlog.unit
        text = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done:,}/{total:,} {unit} {fraction:4.0%}"
        since, done_then = self.first or (0.0, self.done)
        elapsed = self.clock() - since
        if self.done > done_then and elapsed > 0:
            rate = (self.done - done_then) / elapsed
            text += f"  {_rate(rate)} {unit}/s"
            if self.done < total:
                text += f"  {_duration((total - self.done) / rate)} left"
        return text

    def close(self) -> None:
        self.terminal.end_bar()


def _rate(per_second: float) -> str:
    if per_second >= 100:
        return f"{per_second:,.0f}"
    return f"{per_second:.1f}" if per_second >= 1 else f"{per_second:.2g}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
