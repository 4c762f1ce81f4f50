"""Bounded micro-batches from a Python data source, on every Spark of the range.

Spark 4.2 asks a Python stream reader where the next micro-batch ends with its start
and a read limit (``latestOffset(start, limit)``, ``pyspark.sql.streaming.datasource``)
and runs ``Trigger.AvailableNow`` on it. Spark 4.0 and 4.1 call ``latestOffset()`` with
neither, and run an available-now query over a Python source as one micro-batch of
everything. ``BoundedReader`` answers both:

- it keeps the start itself: the end of the range Spark planned last
  (``partitions(start, end)``), or its initial offset. On a restart Spark 4.0/4.1 hand it
  the end of the newest micro-batch in their offset log before they ask
  (``setLatestSeenOffset`` calls ``partitions(end, end)``), or replay that micro-batch
  (``partitions(start, end)``);
- an available-now run on those Sparks runs on the default trigger with the option
  ``available_now``: the reader fixes its end when it is first asked (as Spark 4.2's
  ``prepareForTriggerAvailableNow`` does), and the job stops the query once it has
  drained (``RunningJob``), so the micro-batches stay as bounded as on 4.2.
"""

from __future__ import annotations

from abc import abstractmethod

from pyspark.sql.datasource import DataSourceStreamReader

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxFiles,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # Spark 4.0 and 4.1: no read limits, no available-now for Python sources
    ReadAllAvailable = ReadMaxFiles = ReadMaxRows = SupportsTriggerAvailableNow = None

__all__ = ["BoundedReader", "SPARK_BOUNDS", "AVAILABLE_NOW"]

#: Whether the running Spark bounds a Python source's micro-batches and runs
#: available-now on it itself (Spark 4.2 on).
SPARK_BOUNDS = SupportsTriggerAvailableNow is not None
#: The option that runs a reader to the end it fixes when first asked (Spark 4.0/4.1).
AVAILABLE_NOW = "available_now"
#: Spark 4.2's read limit of a reader's ``unit``.
_LIMITS = {"rows": ReadMaxRows, "files": ReadMaxFiles}


class BoundedReader(DataSourceStreamReader, *((SupportsTriggerAvailableNow,) if SPARK_BOUNDS else ())):
    """A stream reader whose micro-batches read at most ``most()`` of its ``unit``
    (``"rows"`` or ``"files"``; None: all there is). Subclasses say where a micro-batch
    ends (``end``), which input partitions a range has (``ranges``) and fix an
    available-now run's end (``prepareForTriggerAvailableNow``)."""

    unit = "rows"

    def __init__(self, options: dict[str, str]):
        self.available_now = options.get(AVAILABLE_NOW) == "true"
        #: The end of the range Spark planned last: where the next micro-batch starts.
        self.planned: dict | None = None
        self._prepared = False

    @abstractmethod
    def most(self) -> int | None:
        """How much of ``unit`` a micro-batch reads at most (None: all there is)."""

    @abstractmethod
    def end(self, start: dict, most: int | None) -> dict:
        """Where a micro-batch from ``start`` that reads at most ``most`` ends."""

    @abstractmethod
    def ranges(self, start: dict, end: dict) -> list:
        """The input partitions of the range from ``start`` to ``end``."""

    def getDefaultReadLimit(self):
        most = self.most()
        return ReadAllAvailable() if most is None else _LIMITS[self.unit](most)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if start is None:  # Spark 4.0/4.1
            if self.available_now and not self._prepared:
                self.prepareForTriggerAvailableNow()
                self._prepared = True
            return self.end(self.planned or self.initialOffset(), self.most())
        most = None if isinstance(limit, ReadAllAvailable) else getattr(limit, f"max_{self.unit}")
        return self.end(start, most)

    def partitions(self, start: dict, end: dict):
        self.planned = end
        return self.ranges(start, end)
