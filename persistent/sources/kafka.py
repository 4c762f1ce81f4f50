"""Kafka topics through Spark's own Kafka source.

Spark's Kafka connector is not part of pyspark: run the job with it, matching the
Spark version::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 job.py

A message's event time is its Kafka record timestamp (ms), its key and value are the
record's key and value as UTF-8 text. A job starts at the earliest offsets; after a
rewind to clock ``T`` (recovery path B) every partition starts at its first record
with timestamp ``>= T`` (Kafka's offsets-for-times lookup), and at the end of a
partition that has none. Every record at or after ``T`` lies after that offset, and
the runtime drops the later records before ``T``, so the rewind is exact. Path A
continues from the offsets in Spark's checkpoint, as Spark's Kafka source always does
(and fails, naming them, when retention deleted records it has not read yet).

Retention may delete records a rewind needs. Before the clock reaches ``T`` the driver
records each partition's first offset at or after ``T`` (``rewind_positions``, with
``confluent-kafka``: ``pip install 'persistent-state[kafka]'``), and a restart from the
clock first checks that every partition still begins at or before it (``check``): a
rewind that would skip records fails, naming topic, partition and offsets, before
anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from persistent.core.errors import ConfigError, InputError, SetupError
from persistent.sources.kafka_client import check_brokers, client, client_settings
from persistent.sources.base import Source
from persistent.storage.filesystems import JobStorage

__all__ = ["KafkaSource", "KAFKA_PACKAGE"]

#: Maven coordinates of Spark's Kafka connector, without the version (Spark's own).
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13"

#: Seconds the driver waits for a broker's answer to an offset lookup.
_LOOKUP_TIMEOUT_S = 30

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
    ``kafka.security.protocol`` or ``failOnDataLoss``; the driver's offset lookups take
    the ``kafka.*`` ones, translated for its client (``persistent.sources.kafka_client``).
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
            # The connector missing: Spark 4.2 still names it by a legacy condition.
            if exc.getCondition() not in ("_LEGACY_ERROR_TEMP_1140", "KAFKA_DATA_SOURCE_NOT_ENABLED"):
                raise
            raise SetupError(
                "kafka source: Spark's Kafka connector is not on the classpath; run with "
                f"--packages {KAFKA_PACKAGE}:{spark.version}"
            ) from exc
        return messages(records)


    def rewind_positions(self) -> _RewindLookups:
        """``positions(clock_ms)``: each partition's first offset with a timestamp at or
        after ``clock_ms``, or its end offset when it has none, by topic and partition.
        Its consumer is made now, when the job starts: a missing client fails it before
        anything runs."""
        return _RewindLookups(self, self._consumer())

    def check(self, start_ms: int | None, job: JobStorage | None = None) -> None:
        """Refuses a restart from the clock ``start_ms`` when retention deleted records the
        rewind needs: a partition now begins after the offset recorded for the clock."""
        recorded = job.directory().read_rewind_positions(start_ms) if start_ms and job is not None else None
        if recorded is None:
            return  # a fresh start, path A, or a clock of a version that recorded none
        consumer = self._consumer()
        from confluent_kafka import TopicPartition

        try:
            gone = []
            for topic, partitions in sorted(recorded.offsets.items()):
                for partition, needed in sorted(partitions.items(), key=lambda item: int(item[0])):
                    begins, _ = consumer.get_watermark_offsets(TopicPartition(topic, int(partition)),
                                                               timeout=_LOOKUP_TIMEOUT_S)
                    if begins > needed:
                        gone.append(f"topic {topic} partition {partition} offsets {needed} to {begins - 1}")
        finally:
            consumer.close()
        if gone:
            raise InputError(
                f"kafka source: the restart from clock {start_ms} ms needs records that Kafka deleted "
                f"(retention): {'; '.join(gone)}. Nothing has run. Restore those records, or start the job "
                f"over with a new checkpoint directory and output"
            )

    def check_brokers(self) -> None:
        """Refuses, as the job starts, brokers that do not take the source's options: a
        failed login, an untrusted certificate, no answer (``kafka_client.check_brokers``)."""
        check_brokers("kafka source", self._settings())

    def _consumer(self):
        """A Kafka consumer for offset lookups on the driver, with the source's
        ``kafka.*`` options (``kafka_client.client_settings``)."""
        return client("Consumer", "kafka source", {"group.id": "persistent-state-offsets",
                                                   "enable.auto.commit": False, **self._settings()})

    def _settings(self) -> dict[str, str]:
        return client_settings("kafka source", self.bootstrap_servers, self.kafka_options)

    def _partitions(self, consumer) -> list[tuple[str, int]]:
        """The (topic, partition) pairs of the source's topics, as the brokers list them now."""
        pairs = []
        for topic in (name.strip() for name in self.topics.split(",")):
            listed = consumer.list_topics(topic, timeout=_LOOKUP_TIMEOUT_S).topics[topic]
            if listed.error is not None:
                raise InputError(f"kafka source: topic {topic} on {self.bootstrap_servers}: {listed.error}")
            pairs += [(topic, partition) for partition in sorted(listed.partitions)]
        return pairs


class _RewindLookups:
    """``KafkaSource.rewind_positions``: offset lookups on one consumer of the driver,
    closed when the job stops."""

    def __init__(self, source: KafkaSource, consumer):
        self.source, self.consumer = source, consumer

    def __call__(self, clock_ms: int) -> dict[str, dict[str, int]]:
        from confluent_kafka import TopicPartition

        consumer = self.consumer
        wanted = [TopicPartition(topic, partition, clock_ms) for topic, partition in self.source._partitions(consumer)]
        found: dict[str, dict[str, int]] = {}
        for each in consumer.offsets_for_times(wanted, timeout=_LOOKUP_TIMEOUT_S):
            offset = each.offset
            if offset < 0:  # no record at or after the time: a rewind starts at the end
                offset = consumer.get_watermark_offsets(each, timeout=_LOOKUP_TIMEOUT_S)[1]
            found.setdefault(each.topic, {})[str(each.partition)] = offset
        return found

    def close(self) -> None:
        self.consumer.close()


def messages(records):
    """Spark's Kafka records as messages: ``key``, ``timestamp`` (ms) and ``value``."""
    from pyspark.sql import functions as F

    return records.select(
        F.col("key").cast("string").alias("key"),
        F.unix_millis(F.col("timestamp")).alias("timestamp"),
        F.col("value").cast("string").alias("value"),
    )
