"""Crash points for the failure tests: inert unless ``PERSISTENT_CRASH_POINT`` is set.

``PERSISTENT_CRASH_POINT=NAME:N:FILE`` makes the ``N``-th arrival (from 1, counted in
each process) at point ``NAME`` create ``FILE``, write the waiting process's id into
it, and then wait, so a test can kill the whole job (or the executor that runs the
waiting process) with SIGKILL at exactly that moment. ``FILE`` is created
exclusively: one process waits, the others go on. The points, in the order a
micro-batch reaches them:

- ``checkpoints``: on an executor, a key group's checkpoint durable, its task not
  finished (the micro-batch's other checkpoints may not be written yet);
- ``group``: on an executor, a key group's new state handed to Spark's state store;
- ``batch``: on the driver, the micro-batch's results computed, nothing committed;
- ``sink``: inside the sink's transaction, the results written but not committed;
- ``clock``: every checkpoint durable, the clock not yet advanced;
- ``committed``: on the driver, all of the micro-batch written (sink, checkpoints,
  clock, progress), Spark's commit of it not yet.
"""

from __future__ import annotations

import os
import time

__all__ = ["POINTS", "crash_point"]

POINTS = ("checkpoints", "group", "batch", "sink", "clock", "committed")

_arrivals: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Waits forever here when ``PERSISTENT_CRASH_POINT`` names this arrival."""
    spec = os.environ.get("PERSISTENT_CRASH_POINT")
    if not spec:
        return
    point, count, path = spec.split(":", 2)
    if point != name:
        return
    _arrivals[name] = _arrivals.get(name, 0) + 1
    if _arrivals[name] != int(count):
        return
    try:
        marker = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(marker, str(os.getpid()).encode())  # which process waits, for a test to kill its parents
    os.close(marker)
    while True:
        time.sleep(60)
