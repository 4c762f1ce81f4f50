"""The generator source: message ``i`` (from 0) has key ``k{i % keys}``, value ``i``
and event time ``(i + 1) * step_ms`` (like Gearpump's number generator: time follows
the sequence), so rewinding to any event time is arithmetic. Bounded (``total``)
or endless, at a rate or as fast as Spark reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from persistent.core.errors import ConfigError
from persistent.core.task import MESSAGE_COLUMNS
from persistent.sources.base import Backlog, Source
from persistent.storage.filesystems import JobStorage

__all__ = ["GeneratorSource"]

#: Rows per Arrow record batch the reader yields.
_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class GeneratorSource(Source):
    """Deterministic numbered messages; see the module docstring."""

    keys: int = 10
    total: int | None = None
    rows_per_second: float | None = None
    step_ms: int = 1
    max_rows_per_batch: int = 100_000
    key_type = "string"
    value_type = "bigint"
    format = "persistent_generator"

    @staticmethod
    def reader(options: dict[str, str]) -> DataSourceStreamReader:
        return _GeneratorReader(options)

    def __post_init__(self):
        for name in ("keys", "step_ms", "max_rows_per_batch"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"generator source: {name} must be > 0, got {getattr(self, name)}")

    def options(self, start_ms: int) -> dict[str, str]:
        return {
            "keys": str(self.keys),
            "total": "" if self.total is None else str(self.total),
            "rows_per_second": "" if self.rows_per_second is None else str(self.rows_per_second),
            "step_ms": str(self.step_ms),
            "max_rows_per_batch": str(self.max_rows_per_batch),
            "start_ms": str(start_ms),
        }

    def backlog(self, start_ms: int = 0, job: JobStorage | None = None) -> Backlog | None:
        if self.total is None or self.rows_per_second is not None:
            return None
        return Backlog("index", _first_index(start_ms, self.step_ms), self.total, "messages")


def _first_index(start_ms: int, step_ms: int) -> int:
    """The first generated message at or after ``start_ms``: rewinding is arithmetic."""
    return max(0, -(-start_ms // step_ms) - 1)


@dataclass(frozen=True)
class _Range(InputPartition):
    start: int
    end: int


class _GeneratorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]):
        self.keys = int(options["keys"])
        self.total = int(options["total"]) if options.get("total") else None
        self.rate = float(options["rows_per_second"]) if options.get("rows_per_second") else None
        self.step_ms = int(options["step_ms"])
        self.max_rows = int(options["max_rows_per_batch"])
        self.first = _first_index(int(options.get("start_ms", "0")), self.step_ms)
        self.started = time.monotonic()
        self.target: int | None = None

    def initialOffset(self) -> dict:
        return {"index": self.first}

    def _available(self) -> int:
        end = self.total if self.total is not None else 2**62
        if self.rate is not None:
            end = min(end, self.first + int((time.monotonic() - self.started) * self.rate))
        return end if self.target is None else min(end, self.target)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._available()

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict, limit) -> dict:
        end = self._available()
        if not isinstance(limit, ReadAllAvailable):
            end = min(end, start["index"] + limit.max_rows)
        return {"index": max(end, start["index"])}

    def partitions(self, start: dict, end: dict):
        return [_Range(start["index"], end["index"])]

    def read(self, partition: _Range):
        import numpy as np
        import pyarrow as pa

        names = pa.array([f"k{k}" for k in range(self.keys)])
        for low in range(partition.start, partition.end, _BATCH_ROWS):
            index = np.arange(low, min(low + _BATCH_ROWS, partition.end), dtype=np.int64)
            yield pa.RecordBatch.from_arrays(
                [names.take(index % self.keys), (index + 1) * self.step_ms, index], names=MESSAGE_COLUMNS
            )

