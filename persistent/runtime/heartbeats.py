"""Heartbeats: one row per key group in a generation's first micro-batch.

``applyInPandasWithState`` calls a key group only when it has messages or state in
Spark's state store (whose event-time timeout wakes it). After a restart from the
clock (path B) no group has state in Spark yet: a restored group that receives no
message would never run, never checkpoint again, and pin the global clock at the
restore point. So every generation's query reads, beside the messages, a second
source of one row per key group that has rows in its first micro-batch only: Spark's
file source over ``DIR/spark/heartbeats/`` (``SparkLog.write_heartbeats``), which
takes the file once, records it in its log like any source's offsets, and reads it
again when a path-A restart replays that micro-batch (it lists the directory at each
trigger, one small listing). Each group then runs once,
restores its checkpoint if it has one, and from then on holds state in Spark and an
event-time timeout at its next checkpoint boundary.

Generations recorded before (``Recovery.heartbeat_files`` False) read the rows from
a Python data source whose offsets go from ``{"beat": 0}`` to ``{"beat": 1}`` once,
since Spark's checkpoint of their query names that source. It cost every micro-batch
a call to a Python process on the driver, and each query one more Python process.

A heartbeat's row (``persistent.runtime.rows``, kind ``HEARTBEAT``) carries its key
group and no event time, so it neither moves the watermark nor is late; the key
groups drop it before the task sees any message.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from persistent.runtime.recovery import Recovery
from persistent.runtime.rows import GROUP
from persistent.sources.base import python_data_source
from persistent.sources.bounds import BoundedReader
from persistent.storage.job_directory import JobDirectory
from persistent.storage.spark_log import literal_path

__all__ = ["heartbeats", "FORMAT"]

FORMAT = "persistent_heartbeats"
_SCHEMA = f"{GROUP} int"


@dataclass(frozen=True)
class _Beat(InputPartition):
    groups: int


class _HeartbeatReader(BoundedReader):
    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.groups = int(options["key_groups"])

    def initialOffset(self) -> dict:
        return {"beat": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def most(self) -> None:
        return None

    def end(self, start: dict, most: int | None) -> dict:
        return {"beat": 1}

    def ranges(self, start: dict, end: dict):
        return [_Beat(self.groups)] if start["beat"] < end["beat"] else []

    def read(self, partition: _Beat):
        for group in range(partition.groups):
            yield (group,)


def heartbeats(spark, recovery: Recovery, directory: JobDirectory):
    """The streaming DataFrame of heartbeats (column ``grp``) of the generation
    ``recovery`` starts or continues, for its key groups."""
    if recovery.heartbeat_files:
        rows = directory.spark_log.write_heartbeats(GROUP, recovery.key_groups)
        return spark.readStream.schema(_SCHEMA).json(literal_path(rows))
    spark.dataSource.register(python_data_source(FORMAT, lambda options: _SCHEMA, _HeartbeatReader))
    return spark.readStream.format(FORMAT).option("key_groups", str(recovery.key_groups)).load()

