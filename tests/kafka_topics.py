"""Topics on the test broker (``kafka_broker``), written with a real Kafka client
(``confluent-kafka``), every record with an explicit partition and timestamp."""

from __future__ import annotations

import uuid

PARTITIONS, KEYS = 3, 10


def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """The name of a new topic of ``partitions`` partitions on the broker, named from ``prefix``."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


class Topic:
    """A new topic of ``PARTITIONS`` partitions on the broker, and what was written to it."""

    def __init__(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient, NewTopic

        self.bootstrap, self.name = bootstrap, f"events-{uuid.uuid4().hex[:8]}"
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.admin.create_topics([NewTopic(self.name, PARTITIONS, 1)])[self.name].result(30)
        self.written: dict[str, int] = {}

    def write(self, records: list[tuple[int, str, int]]) -> None:
        """Writes ``(partition, key, timestamp_ms)`` records, in order."""
        from confluent_kafka import Producer

        # Idempotent: a retried request (the new topic's leaders not known yet) keeps its
        # place, and each partition holds its records in the order written.
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        failures = []
        for partition, key, timestamp in records:
            producer.produce(self.name, value=b"1", key=key.encode(), partition=partition, timestamp=timestamp,
                             on_delivery=lambda error, _: error and failures.append(error))
            self.written[key] = self.written.get(key, 0) + 1
        assert producer.flush(30) == 0 and not failures, failures

    def add_partition(self) -> int:
        """Adds a partition; returns its number."""
        from confluent_kafka.admin import NewPartitions

        count = len(self.admin.list_topics(self.name, timeout=30).topics[self.name].partitions) + 1
        self.admin.create_partitions([NewPartitions(self.name, count)])[self.name].result(30)
        return count - 1

    def delete_before(self, partition: int, offset: int) -> None:
        """Deletes the partition's records before ``offset``, as retention does."""
        from confluent_kafka import TopicPartition

        (future,) = self.admin.delete_records([TopicPartition(self.name, partition, offset)]).values()
        assert future.result(30).low_watermark == offset


def spread(first_ms: int, count: int, step_ms: int, partitions=range(PARTITIONS)) -> list[tuple[int, str, int]]:
    """``count`` records ``step_ms`` apart from ``first_ms``, keys and partitions in turn."""
    partitions = list(partitions)
    return [(partitions[i % len(partitions)], f"k{i % KEYS}", first_ms + i * step_ms) for i in range(count)]
