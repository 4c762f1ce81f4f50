"""Kafka topics through Spark's own Kafka source.

Spark's Kafka connector is not part of pyspark: run the job with it, matching the
Spark version::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0 job.py

A message's event time is its Kafka record timestamp (ms), its key and value are the
record's key and value as UTF-8 text. A job starts at the earliest offsets; after a
rewind to clock ``T`` (recovery path B) every partition starts at its first record
with timestamp ``>= T`` (Kafka's offsets-for-times lookup), and at the end of a
partition that has none. Every record at or after ``T`` lies after that offset, and
the runtime drops the later records before ``T``, so the rewind is exact. Path A
continues from the offsets in Spark's checkpoint, as Spark's Kafka source always does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from persistent.core.errors import ConfigError, SetupError
from persistent.sources.base import Source
from persistent.storage.filesystems import JobStorage

__all__ = ["KafkaSource", "KAFKA_PACKAGE"]

#: Maven coordinates of Spark's Kafka connector, without the version (Spark's own).
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13"

#: Options this source sets itself.
_MANAGED = (
    "kafka.bootstrap.servers",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
)


@dataclass(frozen=True)
class KafkaSource(Source):
    """Records of ``topics`` (a comma-separated list, or one topic) on the brokers
    ``bootstrap_servers``; see the module docstring.

    ``max_offsets_per_batch`` bounds a micro-batch (Spark's ``maxOffsetsPerTrigger``);
    ``kafka_options`` passes further options to Spark's Kafka source, such as
    ``kafka.security.protocol`` or ``failOnDataLoss``.
    """

    bootstrap_servers: str
    topics: str
    max_offsets_per_batch: int | None = 100_000
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    key_type = "string"
    value_type = "string"
    format = "kafka"

    def __post_init__(self):
        if not self.bootstrap_servers or not self.topics:
            raise ConfigError("kafka source: bootstrap_servers and topics must not be empty")
        if self.max_offsets_per_batch is not None and self.max_offsets_per_batch <= 0:
            raise ConfigError(f"kafka source: max_offsets_per_batch must be > 0, got {self.max_offsets_per_batch}")
        managed = sorted(set(self.kafka_options) & set(_MANAGED))
        if managed:
            raise ConfigError(f"kafka source: kafka_options may not set {', '.join(managed)}; the source sets them")

    def options(self, start_ms: int) -> dict[str, str]:
        options = {"kafka.bootstrap.servers": self.bootstrap_servers, "subscribe": self.topics, **self.kafka_options}
        if start_ms > 0:
            options["startingTimestamp"] = str(start_ms)
            # A partition without records at or after the clock starts at its end.
            options["startingOffsetsByTimestampStrategy"] = "latest"
        else:
            options["startingOffsets"] = "earliest"
        if self.max_offsets_per_batch is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_batch)
        return options

    def stream(self, spark, start_ms: int = 0, job: JobStorage | None = None):
        from pyspark.errors import AnalysisException

        try:
            records = spark.readStream.format(self.format).options(**self.options(start_ms)).load()
        except AnalysisException as exc:
            if exc.getCondition() != "KAFKA_DATA_SOURCE_NOT_ENABLED":
                raise
            raise SetupError(
                "kafka source: Spark's Kafka connector is not on the classpath; run with "
                f"--packages {KAFKA_PACKAGE}:{spark.version}"
            ) from exc
        return messages(records)


def messages(records):
    """Spark's Kafka records as messages: ``key``, ``timestamp`` (ms) and ``value``."""
    from pyspark.sql import functions as F

    return records.select(
        F.col("key").cast("string").alias("key"),
        F.unix_millis(F.col("timestamp")).alias("timestamp"),
        F.col("value").cast("string").alias("value"),
    )
