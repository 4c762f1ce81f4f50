"""Crash points for the failure tests: inert unless ``PERSISTENT_CRASH_POINT`` is set.

``PERSISTENT_CRASH_POINT=NAME:N:FILE`` makes the ``N``-th arrival (from 1, counted in
each process) at the ``CrashPoint`` whose value is ``NAME`` create ``FILE``, write the
waiting process's id into it, and then wait, so a test can kill the whole job (or the
executor that runs the waiting process) with SIGKILL at exactly that moment. ``FILE``
is created exclusively: one process waits, the others go on. A value of another
shape, or a ``NAME`` that is no crash point, is a ``ConfigError`` at the first
arrival at any point: a test that names a point wrongly fails instead of never
crashing.

``PERSISTENT_CRASH_POINT=@FILE`` takes the value from ``FILE``, read at each arrival
(an empty ``FILE``: no point): a job started before its test chose the point, a
standby (``persistent.tools.standby``), learns it there, in each of its processes.
"""

from __future__ import annotations

import enum
import os
import time

from persistent.core.choices import Choice
from persistent.core.errors import ConfigError
from persistent.storage.fs import LocalFileSystem

__all__ = ["CrashPoint", "crash_point"]

_VARIABLE = "PERSISTENT_CRASH_POINT"


class CrashPoint(Choice, enum.StrEnum):
    """The crash points, in the order a micro-batch reaches them (with a sink that
    reads its results once, ``sink`` comes before ``batch``: its write computes the
    batch). A member is its value, the ``NAME`` of ``PERSISTENT_CRASH_POINT``."""

    #: On an executor, a key group's checkpoint durable, its task not finished (the
    #: micro-batch's other checkpoints may not be written yet).
    CHECKPOINTS = "checkpoints"
    #: On an executor, a key group's new state handed to Spark's state store.
    GROUP = "group"
    #: On the driver, the micro-batch computed, nothing committed but Spark's state
    #: store and, with a sink that reads its results once, the sink.
    BATCH = "batch"
    #: Inside the sink's transaction, the results written but not committed.
    SINK = "sink"
    #: Every checkpoint durable, the clock not yet advanced.
    CLOCK = "clock"
    #: On the driver, all of the micro-batch written (sink, checkpoints, clock,
    #: progress), Spark's commit of it not yet.
    COMMITTED = "committed"


_arrivals: dict[CrashPoint, int] = {}


def crash_point(point: CrashPoint) -> None:
    """Waits forever here when ``PERSISTENT_CRASH_POINT`` names this arrival."""
    spec = os.environ.get(_VARIABLE)
    if spec and spec.startswith("@"):
        spec = _read(spec[1:])
    if not spec:
        return
    armed, count, path = _parse(spec)
    if armed != point:
        return
    _arrivals[armed] = _arrivals.get(armed, 0) + 1
    if _arrivals[armed] != count:
        return
    try:  # the id of the process that waits, for a test to kill its parents
        LocalFileSystem().create_new(path, str(os.getpid()).encode())
    except FileExistsError:
        return
    while True:
        time.sleep(60)


def _read(path: str) -> str:
    """The value ``@path`` stands for: the file's content."""
    try:
        return LocalFileSystem().read_bytes(path).decode().strip()
    except OSError as error:
        raise ConfigError(f"{_VARIABLE}=@{path}: cannot read the file: {error}") from None


def _parse(spec: str) -> tuple[CrashPoint, int, str]:
    """The point, the arrival and the file of ``PERSISTENT_CRASH_POINT``'s value ``spec``."""
    name, count, path = (spec.split(":", 2) + ["", ""])[:3]
    point = CrashPoint.of(name, f"{_VARIABLE}'s NAME (in NAME:N:FILE)")
    if not (count.isdecimal() and int(count) >= 1 and path):
        raise ConfigError(f"{_VARIABLE} must be NAME:N:FILE, N an arrival counted from 1, got {spec!r}")
    return point, int(count), path
