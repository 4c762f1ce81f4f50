"""The Kafka sink (``persistent.sinks.kafka``) against the real broker (``kafka_broker``),
read as a consumer with ``isolation.level=read_committed`` reads it.

The sink's ``write`` takes the micro-batch's results as Spark hands them over; these
tests hand it a frame without Spark (``Results``). They run with the Spark tests, whose
process holds the broker."""

from __future__ import annotations

import re
import uuid

import pytest

from kafka_topics import Results, committed, new_topic
from persistent.core.errors import ConfigError, OutputError, RestartRefusedError, SetupError
from persistent.sinks import kafka as kafka_sink
from persistent.sinks.base import BatchId
from persistent.sinks.kafka import KafkaSink
from persistent.sinks.uri import sink_from_uri

pytestmark = pytest.mark.spark


@pytest.fixture
def topic(kafka_broker) -> str:
    return new_topic(kafka_broker.bootstrap, "results", 2)


def test_each_micro_batch_is_read_once_and_a_replay_of_a_committed_one_writes_nothing(kafka_broker, topic):
    sink = sink_from_uri(f"kafka://{kafka_broker.bootstrap}/{topic}")
    assert isinstance(sink, KafkaSink) and sink.newest_generation(None) is None
    sink.write(Results([("a", 1), ("b", 2)]), BatchId(0, 0), False)
    sink.write(Results([("a", 3)]), BatchId(0, 1), False)
    restarted = KafkaSink(kafka_broker.bootstrap, topic)  # path A: Spark replays micro-batch 1, then runs 2
    restarted.write(Results([("a", 3)]), BatchId(0, 1), False)
    restarted.write(Results([("b", 5)]), BatchId(0, 2), False)
    records = committed(kafka_broker.bootstrap, topic)

    def made(generation, batch):  # the headers of the job's micro-batch
        return {"job": f"persistent-{topic}", "generation": str(generation), "batch": str(batch)}

    assert [(key, value, headers) for key, value, _, headers, _ in records] == [
        ("a", "1", made(0, 0)), ("b", "2", made(0, 0)), ("a", "3", made(0, 1)), ("b", "5", made(0, 2))]
    assert restarted.newest_generation(None) == 0
    with pytest.raises(RestartRefusedError, match=f"topic {topic} .* holds results of an earlier run"):
        restarted.check_fresh_start(None)


def test_a_transaction_killed_before_its_commit_is_aborted_and_the_replay_writes_the_batch_once(
        kafka_broker, topic, monkeypatch):
    sink = KafkaSink(kafka_broker.bootstrap, topic)
    sink.write(Results([("a", 1)]), BatchId(0, 0), False)

    def killed(point):
        raise SystemExit(f"killed at {point}")

    monkeypatch.setattr(kafka_sink, "crash_point", killed)
    with pytest.raises(SystemExit):
        sink.write(Results([("a", 2), ("b", 1)]), BatchId(0, 1), False)
    monkeypatch.undo()
    KafkaSink(kafka_broker.bootstrap, topic).write(Results([("a", 2), ("b", 1)]), BatchId(0, 1), False)
    assert [(key, value) for key, value, _, _, _ in committed(kafka_broker.bootstrap, topic)] == [
        ("a", "1"), ("a", "2"), ("b", "1")]


def test_a_topic_between_stages_takes_each_micro_batch_whole_in_one_partition_in_turn(kafka_broker, topic):
    sink = KafkaSink(kafka_broker.bootstrap, topic, one_partition_per_batch=True)
    for batch in range(3):
        sink.write(Results([(key, batch) for key in "abcdef"]), BatchId(0, batch), False)
    records = committed(kafka_broker.bootstrap, topic)
    assert {(headers["batch"], partition) for _, _, _, headers, partition in records} == {("0", 0), ("1", 1), ("2", 0)}


def test_a_stale_writer_is_fenced_and_its_open_transaction_never_becomes_visible(kafka_broker, topic):
    from confluent_kafka import KafkaException

    stale = KafkaSink(kafka_broker.bootstrap, topic)
    stale.write(Results([("a", 1)]), BatchId(0, 0), False)
    producer = stale._transactions()
    producer.begin_transaction()  # a writer that hangs inside a transaction: a driver thought dead
    producer.produce(topic, key=b"a", value=b"stale")
    producer.flush(30)
    KafkaSink(kafka_broker.bootstrap, topic).write(Results([("a", 2)]), BatchId(1, 0), False)
    with pytest.raises(KafkaException, match="(?i)fenced"):
        producer.commit_transaction(30)
    assert [(key, value) for key, value, _, _, _ in committed(kafka_broker.bootstrap, topic)] == [("a", "1"), ("a", "2")]


def test_a_broker_killed_inside_a_transaction_fails_the_batch_in_one_line_and_the_replay_after_it_returns_is_exact(
        kafka_broker, topic, monkeypatch):
    sink = KafkaSink(kafka_broker.bootstrap, topic)
    sink.write(Results([("a", 1)]), BatchId(0, 0), False)
    monkeypatch.setattr(kafka_sink, "_TIMEOUT_S", 5)
    monkeypatch.setattr(kafka_sink, "crash_point", lambda point: kafka_broker.kill())  # records sent, no commit
    try:
        with pytest.raises(OutputError) as failed:
            sink.write(Results([("a", 2), ("b", 1)]), BatchId(0, 1), False)
    finally:
        monkeypatch.undo()
        kafka_broker.start_again()
    assert re.fullmatch(rf"kafka sink: topic {topic} on 127\.0\.0\.1:\d+: micro-batch 0\.1 is not written \(.+\); "
                        r"start the job again once the brokers take it: it replays the micro-batch \(path A\)",
                        str(failed.value)), failed.value
    KafkaSink(kafka_broker.bootstrap, topic).write(Results([("a", 2), ("b", 1)]), BatchId(0, 1), False)
    assert [(key, value) for key, value, _, _, _ in committed(kafka_broker.bootstrap, topic)] == [
        ("a", "1"), ("a", "2"), ("b", "1")]


def test_windows_carry_their_end_as_timestamp_and_a_path_b_replay_does_not_publish_a_window_twice(
        kafka_broker, topic):
    sink = KafkaSink(kafka_broker.bootstrap, topic)
    sink.write(Results([("a", 0, 1_000, 4), ("b", 0, 1_000, 1)], windowed=True), BatchId(0, 0), True)
    sink.write(Results([("a", 1_000, 2_000, 2)], windowed=True), BatchId(0, 1), True)
    # Path B from a clock of 1,000 ms: generation 1 closes the window ending at 2,000 again, then a new one.
    rewound = KafkaSink(kafka_broker.bootstrap, topic)
    rewound.write(Results([("a", 1_000, 2_000, 2)], windowed=True), BatchId(1, 0), True)
    rewound.write(Results([("a", 2_000, 3_000, 7)], windowed=True), BatchId(1, 1), True)
    records = committed(kafka_broker.bootstrap, topic)
    assert [(key, value, timestamp, headers["window_start"], headers["window_end"])
            for key, value, timestamp, headers, _ in records] == [
        ("a", "4", 1_000, "0", "1000"), ("b", "1", 1_000, "0", "1000"), ("a", "2", 2_000, "1000", "2000"),
        ("a", "7", 3_000, "2000", "3000")]


def test_an_unknown_topic_an_unreachable_broker_and_a_bad_uri_are_refused_in_one_line(kafka_broker, monkeypatch):
    with pytest.raises(ConfigError, match=r"^kafka sink: topic nowhere-\w+ on 127\.0\.0\.1:\d+: .*create it first"):
        KafkaSink(kafka_broker.bootstrap, f"nowhere-{uuid.uuid4().hex[:6]}").newest_generation(None)
    monkeypatch.setattr(kafka_sink, "_TIMEOUT_S", 2)
    with pytest.raises(SetupError, match=r"^kafka sink: topic t on 127\.0\.0\.1:9: "):
        KafkaSink("127.0.0.1:9", "t").newest_generation(None)
    for uri in ("kafka://127.0.0.1:9092", "kafka:///t", "kafka://127.0.0.1:9092/a/b"):
        with pytest.raises(ConfigError, match="a Kafka topic is kafka://HOST:PORT/TOPIC"):
            sink_from_uri(uri)
    with pytest.raises(ConfigError, match="acks are not producer options"):
        sink_from_uri("kafka://127.0.0.1:9092/t?acks=all")

