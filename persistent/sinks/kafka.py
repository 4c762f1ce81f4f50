"""A Kafka topic as an exactly-once sink: one Kafka transaction per micro-batch
(``pip install 'persistent-state[kafka]'``).

The driver writes each micro-batch's results to the topic in one transaction of a
producer whose ``transactional.id`` is the sink's (``persistent-TOPIC`` unless given):
the same for every run of the job, so a writer left over from an earlier run is fenced
(Kafka aborts its open transaction) when this one starts. The same transaction commits
the micro-batch's **marker**: the offset of the sink's consumer group (its
``transactional.id``) on the topic's partition 0, whose metadata names the generation
and micro-batch. A micro-batch Spark replays after a restart (path A) finds its marker
and writes nothing again if its transaction committed; if it did not, Kafka aborted it,
and the replay writes the batch once. A consumer with ``isolation.level=read_committed``
sees every micro-batch's records once.

A record's key is the result's key and its value the result's value, as text (a
monoid with JSON results, JSON); a windowed task's record has its window's end as its
timestamp and ``window_start`` and ``window_end`` headers (ms); every record has the
headers ``job`` (the sink's ``transactional.id``), ``generation`` and ``batch``. A state
value's record (no windows) has the time it was written as its timestamp: the value
holds every message applied so far, those after the micro-batch's checkpoint time too,
so no event time names what it holds; its generation and batch order it.

A topic between two stages of a pipeline (``one_partition_per_batch``) takes each
micro-batch's records in one partition, the micro-batch's number modulo the topic's
partitions: Kafka makes a committed transaction visible to ``read_committed`` readers
partition by partition, so a stage reading two partitions could see one partition's
part of a micro-batch, move its watermark past the other part, and then find those
records late. One transaction in one partition is seen whole or not at all, and the
next transaction of the writer begins only once the last is visible everywhere.

After a restart from the clock (path B) the micro-batches after the clock are
computed again in a new generation: a windowed task's windows that a committed
transaction already holds (the marker records the newest window end it published)
are not written again; a state value's record of a key updated after the clock is
written again, as the micro-batches after the clock compute it again, so a consumer
that keeps each key's newest value ends with the values of a run without the failure
(docs/delivery.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlparse

from persistent.core.errors import ConfigError, OutputError, SetupError
from persistent.storage.faults import CrashPoint, crash_point
from persistent.sources.kafka_client import check_brokers, client, client_settings, reason
from persistent.sinks.base import BatchId, Sink, earlier_run, result_columns

__all__ = ["KafkaSink", "kafka_sink_from_uri"]

#: Seconds the driver waits for the brokers (metadata, a transaction's commit).
_TIMEOUT_S = 30
#: Records handed to the producer between two calls that serve its delivery reports.
_POLL_EVERY = 10_000


class KafkaSink(Sink):
    """Writes results to ``topic`` on the brokers ``bootstrap_servers`` in one transaction
    per micro-batch; see the module docstring. ``kafka_options`` are options of the
    producer in Spark's Kafka spelling (``kafka.security.protocol``, ...), as the Kafka
    source takes them, translated for the driver's client as the source's are
    (``persistent.sources.kafka_client``)."""

    reads_once = True  # the results come to the driver (``toPandas``) before the transaction

    def __init__(self, bootstrap_servers: str, topic: str, kafka_options: Mapping[str, str] | None = None,
                 transactional_id: str | None = None, one_partition_per_batch: bool = False):
        if not bootstrap_servers or not topic:
            raise ConfigError("kafka sink: bootstrap_servers and topic must not be empty")
        options = dict(kafka_options or {})
        odd = sorted(name for name in options if not name.startswith("kafka."))
        if odd:
            raise ConfigError(f"kafka sink: options {', '.join(odd)} are not producer options (kafka.NAME)")
        self.bootstrap_servers, self.topic, self.kafka_options = bootstrap_servers, topic, options
        self.transactional_id = transactional_id or f"persistent-{topic}"
        self.one_partition_per_batch = one_partition_per_batch
        #: The topic's partitions, as its metadata says when this run starts.
        self._partitions = 0
        #: This run's producer, and the metadata of the sink's consumer group (for the marker).
        self._producer = self._group = None
        #: The newest marker committed: generation, micro-batch, newest window end published.
        self._marker: tuple[int, int, int] | None = None

    def check_fresh_start(self, spark) -> None:
        if self._read_marker() is not None:
            raise earlier_run(f"kafka sink: topic {self.topic} on {self.bootstrap_servers}",
                              f"committed by transactional.id {self.transactional_id}",
                              "write to another topic, or give the sink another transactional_id")

    def newest_generation(self, spark) -> int | None:
        """Called as the job starts: the producer's transactions start here (fencing an
        earlier writer), so a broker that refuses them stops the job before it runs."""
        self._transactions()
        return None if self._marker is None else self._marker[0]

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        from confluent_kafka import KafkaException

        frame = results.toPandas()[result_columns(windowed)]
        producer = self._transactions()
        marker = self._marker
        if marker is not None and (marker[0], marker[1]) >= (batch.generation, batch.batch):
            return  # a replay of a micro-batch whose transaction committed
        published_ms = marker[2] if marker is not None else -1
        if windowed and len(frame):
            # Not the windows a path-B replay closes again; the others in the order of their
            # ends, so each partition's timestamps never go back for the stage reading it.
            frame = frame[frame["window_end"] > published_ms].sort_values("window_end", kind="stable")
        newest_ms = max(published_ms, int(frame["window_end"].max())) if windowed and len(frame) else published_ms
        headers = [("job", self.transactional_id.encode()), ("generation", str(batch.generation).encode()),
                   ("batch", str(batch.batch).encode())]
        try:
            producer.begin_transaction()
            try:
                partition = batch.batch % self._partitions if self.one_partition_per_batch else None
                self._produce(producer, frame, windowed, headers, partition)
                self._commit_marker(producer, batch, newest_ms)
                crash_point(CrashPoint.SINK)
                producer.commit_transaction(_TIMEOUT_S)
            except BaseException:
                self._abort(producer)
                raise
        except KafkaException as exc:
            # A fenced or failed producer takes no more transactions: the next write makes another.
            self._producer = self._group = None
            raise OutputError(
                f"kafka sink: topic {self.topic} on {self.bootstrap_servers}: micro-batch {batch.generation}."
                f"{batch.batch} is not written ({reason(exc)}); start the job again once the brokers take it: "
                f"it replays the micro-batch (path A)") from None
        self._marker = (batch.generation, batch.batch, newest_ms)

    def _produce(self, producer, frame, windowed: bool, headers: list, partition: int | None) -> None:
        from confluent_kafka import KafkaException

        produce, topic = producer.produce, self.topic
        keys, values = _texts(frame["key"]), _texts(frame["value"])
        where = {"headers": headers}
        if partition is not None:
            where["partition"] = partition
        if windowed:
            starts, ends = frame["window_start"].tolist(), frame["window_end"].tolist()
        for i, (key, value) in enumerate(zip(keys, values)):
            if windowed:
                where.update(timestamp=ends[i], headers=[*headers, ("window_start", str(starts[i]).encode()),
                                                         ("window_end", str(ends[i]).encode())])
            while True:
                try:
                    produce(topic, value, key, **where)
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.05)
            if i % _POLL_EVERY == 0:
                producer.poll(0)
        if producer.flush(_TIMEOUT_S) > 0:
            raise KafkaException(f"records not delivered within {_TIMEOUT_S} s")

    def _commit_marker(self, producer, batch: BatchId, newest_ms: int) -> None:
        from confluent_kafka import TopicPartition

        metadata = json.dumps({"generation": batch.generation, "batch": batch.batch, "published_ms": newest_ms})
        producer.send_offsets_to_transaction([TopicPartition(self.topic, 0, batch.batch + 1, metadata=metadata)],
                                             self._group, _TIMEOUT_S)

    @staticmethod
    def _abort(producer) -> None:
        from confluent_kafka import KafkaException

        try:
            producer.abort_transaction(_TIMEOUT_S)
        except KafkaException:
            pass  # fenced, or the broker is gone: Kafka aborts the transaction itself

    def _transactions(self):
        """The producer, its transactions initialised (which fences an earlier writer of
        the sink's ``transactional.id`` and ends its open transaction), and the marker as
        Kafka holds it then; made once a run."""
        if self._producer is None:
            producer = client("Producer", "kafka sink", {**self._settings(), "transactional.id": self.transactional_id})
            from confluent_kafka import KafkaException

            try:
                producer.init_transactions(_TIMEOUT_S)
            except KafkaException as exc:
                raise SetupError(f"kafka sink: topic {self.topic} on {self.bootstrap_servers}: the producer's "
                                 f"transactions did not start: {reason(exc)}") from None
            self._marker = self._read_marker()
            group = self._consumer()  # only for its metadata, which outlives it: no connection stays open
            self._producer, self._group = producer, group.consumer_group_metadata()
            group.close()
        return self._producer

    def _read_marker(self) -> tuple[int, int, int] | None:
        """The sink's newest committed marker: generation, micro-batch and newest window
        end published; None when it has committed none. Checks the topic exists and
        records its number of partitions (``_partitions``)."""
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._consumer()
        try:
            topics = consumer.list_topics(self.topic, timeout=_TIMEOUT_S).topics
            error = topics[self.topic].error if self.topic in topics else None
            if error is not None:
                raise ConfigError(f"kafka sink: topic {self.topic} on {self.bootstrap_servers}: {error.str()} "
                                  f"(create it first)")
            self._partitions = len(topics[self.topic].partitions)
            (committed,) = consumer.committed([TopicPartition(self.topic, 0)], timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise SetupError(f"kafka sink: topic {self.topic} on {self.bootstrap_servers}: {reason(exc)}") from None
        finally:
            consumer.close()
        if committed.offset < 0 or not committed.metadata:
            return None
        marker = json.loads(committed.metadata)
        return marker["generation"], marker["batch"], marker["published_ms"]

    def check_brokers(self) -> None:
        """Refuses, as the job starts, brokers that do not take the sink's options: a
        failed login, an untrusted certificate, no answer (``kafka_client.check_brokers``)."""
        check_brokers("kafka sink", self._settings())

    def _consumer(self):
        return client("Consumer", "kafka sink", {**self._settings(), "group.id": self.transactional_id,
                                                 "enable.auto.commit": False, "isolation.level": "read_committed"})

    def _settings(self) -> dict[str, str]:
        return client_settings("kafka sink", self.bootstrap_servers, self.kafka_options)


def _texts(column) -> list[bytes | None]:
    """A column's values as the bytes of their text (None stays None)."""
    return [None if value is None else str(value).encode() for value in column.tolist()]


def kafka_sink_from_uri(uri: str) -> KafkaSink:
    """``kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?kafka.OPTION=VALUE&...]``."""
    parsed = urlparse(uri)
    topic = parsed.path.strip("/")
    if not parsed.netloc or not topic or "/" in topic:
        raise ConfigError(f"output {uri!r}: a Kafka topic is kafka://HOST:PORT/TOPIC")
    return KafkaSink(parsed.netloc, topic, dict(parse_qsl(parsed.query)))
