"""KafkaSource's options for Spark's Kafka source (there is no Kafka broker here; the
mapping of Kafka rows to messages is tested on Spark in tests/spark/test_integrations.py)."""

from __future__ import annotations

import glob
import os

import pyspark
import pytest

from persistent.core.errors import ConfigError
from persistent.sources.kafka import KAFKA_PACKAGE, KafkaSource


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
