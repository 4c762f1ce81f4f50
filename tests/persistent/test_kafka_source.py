"""KafkaSource's options for Spark's Kafka source, and its record and check of where a
rewind starts, against the real broker (``kafka_broker``). The mapping of Kafka rows to
messages is tested on Spark in tests/spark/test_integrations.py, whole jobs on Kafka in
tests/spark/test_kafka.py."""

from __future__ import annotations

import glob
import os
from contextlib import closing

import pyspark
import pytest

from kafka_topics import Topic, spread
from persistent.core.errors import ConfigError, InputError
from persistent.runtime.running import RunningJob
from persistent.sources.kafka import KAFKA_PACKAGE, KafkaSource
from persistent.storage.filesystems import JobStorage
from persistent.storage.records import RewindPositions


def test_a_fresh_start_reads_from_the_earliest_offsets():
    options = KafkaSource("broker:9092", "events").options(0)
    assert options == {
        "kafka.bootstrap.servers": "broker:9092",
        "subscribe": "events",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "100000",
    }


def test_a_rewind_starts_every_partition_at_the_clock():
    options = KafkaSource("a:9092,b:9092", "events,audit", max_offsets_per_batch=500).options(1_700_000_000_123)
    assert options["startingTimestamp"] == "1700000000123"
    # A partition with no record at or after the clock starts at its end instead of failing.
    assert options["startingOffsetsByTimestampStrategy"] == "latest"
    assert "startingOffsets" not in options
    assert (options["subscribe"], options["maxOffsetsPerTrigger"]) == ("events,audit", "500")


def test_batches_are_unbounded_without_a_limit_and_extra_options_pass_through():
    source = KafkaSource("broker:9092", "events", None, {"kafka.security.protocol": "SSL", "failOnDataLoss": "true"})
    options = source.options(0)
    assert "maxOffsetsPerTrigger" not in options
    assert (options["kafka.security.protocol"], options["failOnDataLoss"]) == ("SSL", "true")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (("", "events"), "bootstrap_servers and topics must not be empty"),
        (("broker:9092", ""), "bootstrap_servers and topics must not be empty"),
        (("broker:9092", "events", 0), "max_offsets_per_batch must be > 0, got 0"),
        (("broker:9092", "events", 10, {"startingOffsets": "latest", "subscribe": "x"}),
         "kafka_options may not set startingOffsets, subscribe; the source sets them"),
    ],
)
def test_invalid_settings_are_refused(arguments, message):
    with pytest.raises(ConfigError, match=message):
        KafkaSource(*arguments)


def test_the_connector_package_matches_the_installed_spark_scala_version():
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    (spark_sql,) = glob.glob(os.path.join(jars, "spark-sql_*.jar"))
    scala = os.path.basename(spark_sql).split("_")[1].split("-")[0]
    assert KAFKA_PACKAGE == f"org.apache.spark:spark-sql-kafka-0-10_{scala}"


def test_a_rewind_starts_at_each_partitions_first_record_at_or_after_the_clock_or_at_its_end(kafka_broker):
    topic = Topic(kafka_broker.bootstrap)
    # Partition 0: times 10, 40, 70, ...; partition 1: 20, 50, ...; partition 2: 30, 60, ...
    # Out of order in partition 0 after that: a record at 5 behind one at 1,000.
    topic.write(spread(10, 30, 10) + [(0, "late", 1_000), (0, "early", 5)])
    with closing(KafkaSource(kafka_broker.bootstrap, topic.name).rewind_positions()) as positions:
        assert positions(1) == {topic.name: {"0": 0, "1": 0, "2": 0}}
        assert positions(45) == {topic.name: {"0": 2, "1": 1, "2": 1}}
        assert positions(300) == {topic.name: {"0": 10, "1": 10, "2": 9}}  # the end of 1
        assert positions(1_000) == {topic.name: {"0": 10, "1": 10, "2": 10}}
        assert positions(1_001) == {topic.name: {"0": 12, "1": 10, "2": 10}}


def test_a_restart_from_a_clock_whose_records_retention_deleted_is_refused_naming_them(kafka_broker, tmp_path):
    topic = Topic(kafka_broker.bootstrap)
    topic.write(spread(1, 60, 10))
    source, job = KafkaSource(kafka_broker.bootstrap, topic.name), JobStorage(str(tmp_path / "job"))
    with closing(source.rewind_positions()) as positions:
        job.directory().record_rewind_positions(RewindPositions(301, positions(301)))
    assert job.directory().read_rewind_positions(301).offsets == {topic.name: {"0": 10, "1": 10, "2": 10}}

    topic.delete_before(1, 10)  # what the rewind needs still there
    source.check(301, job)
    source.check(None, job)  # path A: Spark's checkpoint names its offsets
    topic.delete_before(2, 13)
    topic.delete_before(0, 11)
    with pytest.raises(InputError, match=(
            f"the restart from clock 301 ms needs records that Kafka deleted \\(retention\\): "
            f"topic {topic.name} partition 0 offsets 10 to 10; topic {topic.name} partition 2 offsets 10 to 12")):
        source.check(301, job)
    source.check(600, job)  # a clock with nothing recorded (an earlier version's) is not checked


def test_the_rewind_lookups_release_their_consumer_when_the_job_stops(kafka_broker):
    topic = Topic(kafka_broker.bootstrap)
    topic.write(spread(10, 3, 10))
    positions = KafkaSource(kafka_broker.bootstrap, topic.name).rewind_positions()
    stopped = []

    class Query:
        def stop(self):
            stopped.append("query")

    RunningJob(Query(), recovery=None, directory=None, closing=(positions,)).stop()
    assert stopped == ["query"]
    with pytest.raises(RuntimeError, match="[Cc]losed"):
        positions(1)
