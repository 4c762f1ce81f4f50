"""Topics on the test broker (``kafka_broker``), written with a real Kafka client
(``confluent-kafka``), every record with an explicit partition and timestamp; a Kafka
sink's micro-batches (``Results``) and what a ``read_committed`` consumer reads of them
(``committed``, ``newest_values``)."""

from __future__ import annotations

import uuid

import pandas as pd

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


class Results:
    """A micro-batch's results as the sink reads them (``toPandas``)."""

    def __init__(self, rows: list[tuple], windowed: bool = False):
        columns = ["key", "window_start", "window_end", "value"] if windowed else ["key", "value"]
        self.frame = pd.DataFrame(rows, columns=columns)

    def toPandas(self) -> pd.DataFrame:  # noqa: N802 (Spark's name)
        return self.frame


def committed(bootstrap: str, topic: str) -> list[tuple]:
    """Every record of ``topic`` a read_committed consumer sees until it has waited 2 s
    for more: key, value, timestamp, headers, partition; by generation, micro-batch and key."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records, idle = [], 0
        while idle < 4:
            message = consumer.poll(0.5)
            idle = idle + 1 if message is None else 0
            if message is not None:
                assert message.error() is None, message.error()
                records.append((message.key().decode(), message.value().decode(), message.timestamp()[1],
                                {k: v.decode() for k, v in message.headers() or []}, message.partition()))
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (int(r[3]["generation"]), int(r[3]["batch"]), r[0]))


def newest_values(records: list[tuple]) -> dict[str, int]:
    """Each key's newest value among the ``committed`` records of a count job's Kafka
    sink; no micro-batch's record may be there twice."""
    batches = [(headers["generation"], headers["batch"], key) for key, _, _, headers, _ in records]
    assert len(batches) == len(set(batches)), "a micro-batch's record read twice"
    return {key: int(value) for key, value, _, _, _ in records}  # by generation, micro-batch: the newest last
