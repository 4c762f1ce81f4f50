"""The Kafka case: the benchmark's events in a real topic, read through Spark's Kafka
source by native Spark and by the vectorized task, so that the table shows what the
source costs each of them next to the same events read from Parquet; and both writing
their results to a topic (``-kafka-out``): native through Spark's Kafka sink
(at-least-once), the vectorized task through this project's (``persistent.sinks.kafka``,
a transaction per micro-batch).

The broker is the tests' (``tests/jvm_servers.py``: a single-node KRaft broker on
loopback, fetched from Maven Central with Spark's Kafka connector). Each data set is
written once to a topic of ``PARTITIONS`` partitions, partitioned by key, each record's
timestamp its event time and its value the event's value as text.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from bench.data import Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import jvm_servers  # noqa: E402

__all__ = ["broker", "new_topic", "write_topic", "PARTITIONS"]

PARTITIONS = 3


@contextlib.contextmanager
def broker():
    """A running Kafka broker; its ``bootstrap`` is the address of a client. Fetches the
    servers and Spark's Kafka connector first (``jvm_servers.fetch``: cached once)."""
    try:
        jvm_servers.fetch()
    except jvm_servers.ServersUnavailable as exc:
        raise SystemExit(f"bench: {exc}") from None
    with jvm_servers.KafkaBroker() as server:
        yield server


def new_topic(bootstrap: str, prefix: str) -> str:
    """The name of a new topic of ``PARTITIONS`` partitions, named from ``prefix``."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until its answer came
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    return topic


def write_topic(bootstrap: str, dataset: Dataset) -> str:
    """Writes the events of ``dataset`` (its files, in order) to a new topic; returns its name."""
    from confluent_kafka import Producer

    topic = new_topic(bootstrap, f"bench-{dataset.name}")
    # Idempotent, so that every partition keeps its records in event-time order.
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "lz4"})
    failures = []

    def delivered(error, _):
        if error:
            failures.append(error)

    for path in dataset.files:
        table = pq.read_table(path)
        for key, timestamp, value in zip(*(table.column(c).to_pylist() for c in ("key", "timestamp", "value"))):
            while True:
                try:
                    producer.produce(topic, key=key.encode(), value=str(value).encode(), timestamp=timestamp,
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    left = producer.flush(120)
    if left or failures:
        raise RuntimeError(f"bench: writing topic {topic} failed: {left} records undelivered, {failures[:3]}")
    return topic
