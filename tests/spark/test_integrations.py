"""Integrations on Spark: Redis Streams in, PostgreSQL out, across a rewind to the
clock; and Kafka's records as messages."""

from __future__ import annotations

import datetime
import shutil

import pytest

from persistent.core.errors import SetupError
from persistent.runtime.recovery import RecoveryPath

pytestmark = pytest.mark.spark


def test_counts_from_redis_streams_into_postgres_are_exact_across_a_rewind_onto_streams_behind_unevenly(
        spark, tmp_path, redis_url, postgres_url):
    import psycopg
    import redis
    from count import MessageCount

    from persistent import Job, RedisSource, sink_from_uri

    written: dict[str, int] = {}

    def add(stream, first, last):
        with redis.Redis.from_url(redis_url) as client:
            for ms in range(first, last):
                client.xadd(stream, {"key": f"k{ms % 5}", "value": str(ms)}, id=f"{ms}-0")
                written[f"k{ms % 5}"] = written.get(f"k{ms % 5}", 0) + 1

    def run():
        job = Job(
            task=MessageCount(),
            source=RedisSource(redis_url, ("events-0", "events-1"), max_entries_per_batch=200),
            sink=sink_from_uri(postgres_url, table="counts", value_column="count"),
            checkpoint_dir=str(tmp_path / "ck"),
            checkpoint_interval_ms=50,
            watermark_delay_ms=100,  # the clock stays behind the input: a rewind reads some again
            key_groups=4,
        )
        return job.run(spark)

    add("events-0", 1, 301)
    add("events-1", 1, 301)
    assert run().recovery.path is RecoveryPath.FRESH
    # Uneven while the job is down: events-0 receives a second of entries, events-1 a
    # tenth of one.
    add("events-0", 301, 1_301)
    add("events-1", 301, 401)
    shutil.rmtree(tmp_path / "ck" / "spark")  # Spark's checkpoint is lost: path B
    rewound = run().recovery
    assert rewound.path is RecoveryPath.FROM_CLOCK
    assert 0 < rewound.floor_ms < 300  # the streams were read again from inside the first run's input
    with psycopg.connect(postgres_url) as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == written


def test_kafka_records_become_messages(spark):
    from pyspark.sql import Row

    from persistent.sources.kafka import messages

    at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    records = spark.createDataFrame(
        [
            Row(key=b"k1", value=b"hello", topic="t", partition=0, offset=7, timestamp=at, timestampType=0),
            Row(key=None, value="caf\u00e9".encode(), topic="t", partition=1, offset=0, timestamp=at, timestampType=1),
        ],
        "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
        "timestampType int",
    )
    out = messages(records)
    assert out.schema.simpleString() == "struct<key:string,timestamp:bigint,value:string>"
    millis = int(at.timestamp() * 1000)
    assert [tuple(r) for r in out.collect()] == [("k1", millis, "hello"), (None, millis, "caf\u00e9")]


def test_kafka_without_the_connector_names_the_package_to_add(spark):
    from persistent.sources.kafka import KafkaSource

    with pytest.raises(SetupError, match=f"--packages org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}"):
        KafkaSource("127.0.0.1:9", "events").stream(spark)
