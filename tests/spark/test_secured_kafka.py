"""The count example on secured Kafka: the SASL_SSL listener of ``secured_kafka``
(SCRAM-SHA-512 over TLS, a JKS truststore), given as a Spark user writes it
(``--kafka-option kafka.security.protocol=SASL_SSL``, ``kafka.sasl.jaas.config``,
``kafka.ssl.truststore.*``; the Kafka sink's the same options in its URI's query).

Spark's executors read the topic with Kafka's Java client, the driver looks up where a
rewind starts and writes the sink's transactions with librdkafka, from the same
options (``persistent.sources.kafka_client``). The topics are made and written on the
broker's PLAINTEXT listener, as in tests/spark/test_kafka.py, whose helpers these
tests share; the refusals of a wrong password and of an untrusted certificate are
tested without Spark (tests/persistent/test_kafka_security.py, test_preflight.py)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from crash_harness import Crasher
from kafka_topics import Topic, committed, new_topic, newest_values, spread
from persistent.storage.faults import CrashPoint
from test_kafka import SUBMIT, finish, kafka_args

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]


@pytest.fixture
def topic(secured_kafka) -> Topic:
    return Topic(secured_kafka.bootstrap)


def secured_args(workdir, topic: Topic, secured_kafka) -> list[str]:
    """``kafka_args`` with the SASL_SSL listener and its options instead of the PLAINTEXT one."""
    args = kafka_args(workdir, topic)
    args[args.index("--kafka") + 1] = secured_kafka.secured
    return [*args, *(f"--kafka-option={name}={value}" for name, value in secured_kafka.options().items())]


def test_a_count_job_on_the_secured_listener_rewinds_on_path_b_with_exact_counts(tmp_path, topic, secured_kafka):
    topic.write(spread(1, 1_500, 4))
    crasher = Crasher("count", secured_args(tmp_path, topic, secured_kafka), tmp_path, submit=SUBMIT)
    assert crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(CrashPoint.COMMITTED, 4)]) == 1
    # The driver looked up where a rewind starts on the secured listener before the clock moved.
    assert list((tmp_path / "ck" / "rewind").iterdir())
    finish(crasher, tmp_path, topic, "B")


def test_the_kafka_sink_writes_each_micro_batch_once_to_the_secured_listener(tmp_path, topic, secured_kafka):
    topic.write(spread(1, 1_500, 4))
    results = new_topic(secured_kafka.bootstrap, "results", 1)
    args = secured_args(tmp_path, topic, secured_kafka)
    args[args.index("--output") + 1] = f"kafka://{secured_kafka.secured}/{results}?{urlencode(secured_kafka.options())}"
    crasher = Crasher("count", args, tmp_path, submit=SUBMIT)
    crasher.crash_at(CrashPoint.SINK, 2)
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert newest_values(committed(secured_kafka.bootstrap, results)) == topic.written, f"seed {crasher.seed}"
