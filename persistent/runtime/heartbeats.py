"""Heartbeats: one row per key group in a generation's first micro-batch.

``applyInPandasWithState`` calls a key group only when it has messages or state in
Spark's state store (whose event-time timeout wakes it). After a restart from the
clock (path B) no group has state in Spark yet: a restored group that receives no
message would never run, never checkpoint again, and pin the global clock at the
restore point. So every generation's query reads a second, tiny source beside the
messages: offsets ``{"beat": 0}`` to ``{"beat": 1}``, one row per key group, read by
the first micro-batch only (and by its replay after a path-A restart, since the
offsets are in Spark's offset log like any source's). Each group then runs once,
restores its checkpoint if it has one, and from then on holds state in Spark and an
event-time timeout at its next checkpoint boundary.

A heartbeat row carries its key group and no event time, so it neither moves the
watermark nor is late; the key groups drop it before the task sees any message.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

__all__ = ["heartbeats", "FORMAT"]

FORMAT = "persistent_heartbeats"


@dataclass(frozen=True)
class _Beat(InputPartition):
    groups: int


class _HeartbeatReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]):
        self.groups = int(options["key_groups"])

    def initialOffset(self) -> dict:
        return {"beat": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def getDefaultReadLimit(self):
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        return {"beat": 1}

    def partitions(self, start: dict, end: dict):
        return [_Beat(self.groups)] if start["beat"] < end["beat"] else []

    def read(self, partition: _Beat):
        for group in range(partition.groups):
            yield (group,)

    def commit(self, end: dict) -> None:
        pass


class _HeartbeatDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "grp int"

    def streamReader(self, schema):
        return _HeartbeatReader(self.options)


def heartbeats(spark, key_groups: int):
    """The streaming DataFrame of heartbeats (column ``grp``) for ``key_groups`` groups."""
    spark.dataSource.register(_HeartbeatDataSource)
    return spark.readStream.format(FORMAT).option("key_groups", str(key_groups)).load()
