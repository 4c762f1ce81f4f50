"""Kafka as a time-replayable source, against a real broker (``kafka_broker``).

Every run is the command ``docs/deploy.md`` shows: ``spark-submit --packages
org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION examples/count.py --kafka ... --topic
...``. Each test writes its own topic of three partitions with a real client
(``confluent-kafka``), every record with an explicit partition and timestamp, then
compares the sink with the counts of the records it wrote.

Spark reads a topic's partitions at their own paces (``--max-offsets-per-batch`` is
split among them by what each holds), so a partition's records may reach a
micro-batch after newer ones of another: the jobs allow for that with a watermark
delay of 2 s, as a job on a real topic must, and the topics' partitions hold records
of the same times at the same rates, so that every record counts.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from crash_harness import Crasher
from jvm_servers import kafka_connector
from kafka_topics import Topic, committed, new_topic, newest_values, spread
from persistent.storage.faults import CrashPoint
from persistent.storage.clock_store import ClockStore
from persistent.storage.fs import LocalFileSystem
from test_crash import assert_clock_names_durable_checkpoints

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

#: spark-submit's options for Spark's Kafka connector, as docs/deploy.md gives them.
SUBMIT = ("--packages", kafka_connector())


def kafka_args(workdir, topic: Topic, delay_ms: int = 2_000) -> list[str]:
    return ["--kafka", topic.bootstrap, "--topic", topic.name, "--checkpoint", str(workdir / "ck"),
            "--output", f"sqlite://{workdir / 'out.db'}", "--available-now", "--key-groups", "4",
            "--interval-ms", "1000", "--max-offsets-per-batch", "300", "--watermark-delay-ms", str(delay_ms)]


def sink_counts(workdir) -> dict[str, int]:
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, count FROM counts").fetchall())


def finish(crasher: Crasher, workdir, topic: Topic, path: str, standby_next: bool = False) -> str:
    """Runs the job to its end (``Crasher.run``); checks the counts and the clock; returns the run's log."""
    final = crasher.run(standby_next=standby_next)
    assert final.returncode == 0, final.log
    assert f"recovery path {path}" in final.log, final.log
    assert sink_counts(workdir) == topic.written, f"seed {crasher.seed}"
    assert_clock_names_durable_checkpoints(workdir)
    return final.log


@pytest.fixture
def topic(kafka_broker) -> Topic:
    return Topic(kafka_broker.bootstrap)


def test_killed_at_every_crash_point_then_path_a_writes_each_count_once_to_kafka(tmp_path, topic, kafka_broker):
    """Kafka in and out: the results topic, read committed, holds each key's count once."""
    topic.write(spread(1, 3_000, 4))
    results = new_topic(kafka_broker.bootstrap, "results", 2)
    args = kafka_args(tmp_path, topic)
    args[args.index("--output") + 1] = f"kafka://{kafka_broker.bootstrap}/{results}"
    crasher = Crasher("count", args, tmp_path, submit=SUBMIT)
    for point in CrashPoint:
        crasher.crash_at(point, 2)
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert "recovery path A" in final.log, final.log
    assert newest_values(committed(kafka_broker.bootstrap, results)) == topic.written, f"seed {crasher.seed}"
    assert_clock_names_durable_checkpoints(tmp_path)


def test_path_b_rewinds_every_partition_by_timestamp_even_one_without_records_after_the_clock(tmp_path, topic):
    # Partition 2 holds records of the first 1.2 s only, read by a first run: once the
    # clock passes that, a rewind finds no record of it at or after the clock, and
    # starts at its end.
    topic.write(spread(1, 300, 4))
    crasher = Crasher("count", kafka_args(tmp_path, topic), tmp_path, submit=SUBMIT)
    assert crasher.run(standby_next=True).returncode == 0
    topic.write(spread(1_201, 2_400, 4, partitions=(0, 1)))
    from_clock = crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(CrashPoint.COMMITTED, 4),
                                                                             (CrashPoint.SINK, 3)])
    assert from_clock == 2
    positions = [json.loads(path.read_text()) for path in sorted((tmp_path / "ck" / "rewind").iterdir())]
    after_partition_2 = [p for p in positions if p["clock_ms"] >= 2_000]
    assert after_partition_2 and all(p["offsets"][topic.name]["2"] == 100 for p in after_partition_2), positions
    finish(crasher, tmp_path, topic, "B")


def test_path_b_catching_up_on_partitions_behind_unevenly_drops_no_record_as_late(tmp_path, topic):
    # After the rewind partitions 0 and 1 hold 14 s of records and partition 2 the last
    # 2 s of the first run's: Spark splits a micro-batch's offsets by what each holds, so
    # it reads partition 2's few records a few at a time, while 0 and 1 run seconds ahead.
    topic.write(spread(1, 3_000, 4))
    crasher = Crasher("count", kafka_args(tmp_path, topic), tmp_path, submit=SUBMIT)
    assert crasher.run(standby_next=True).returncode == 0
    topic.write(spread(12_001, 3_000, 4, partitions=(0, 1)))
    shutil.rmtree(tmp_path / "ck" / "spark")
    finish(crasher, tmp_path, topic, "B")


def test_path_a_after_a_stop_in_which_partitions_received_unequal_amounts_drops_no_record_as_late(tmp_path, topic):
    # While the job is stopped, partitions 0 and 1 receive 12 s of records and partition 2
    # the first 3 s of the same times: read in proportion to what each holds, partition 2
    # falls seconds behind the others. The counts fold before the shuffle, where Spark's
    # half judges which messages are on time, with the watermark the key groups take.
    topic.write(spread(1, 1_500, 4))
    crasher = Crasher("count", [*kafka_args(tmp_path, topic), "--fold"], tmp_path, submit=SUBMIT)
    assert crasher.run(standby_next=True).returncode == 0
    topic.write(spread(6_001, 3_000, 4, partitions=(0, 1)) + spread(6_001, 250, 12, partitions=(2,)))
    finish(crasher, tmp_path, topic, "A")


def test_records_of_one_millisecond_cut_across_micro_batches_are_all_counted(tmp_path, topic):
    # 900 records at 2,000 ms, a checkpoint time, read 300 a micro-batch from one partition
    # in order, without a watermark delay: the clock reaches 2,000 between them, the ones
    # after it are on time, and a rewind to it rereads them all.
    topic.write([(0, key, ms) for _, key, ms in spread(1, 300, 5) + spread(2_000, 900, 0) + spread(2_001, 900, 3)])
    crasher = Crasher("count", kafka_args(tmp_path, topic, delay_ms=0), tmp_path, submit=SUBMIT)
    assert crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(CrashPoint.COMMITTED, 3)]) == 1
    assert ClockStore(LocalFileSystem(), str(tmp_path / "ck" / "clock")).read().clock_ms == 2_000
    finish(crasher, tmp_path, topic, "B")


def test_records_the_clock_needs_deleted_by_retention_fail_the_restart_before_it_writes(tmp_path, topic):
    topic.write(spread(1, 3_000, 4))
    crasher = Crasher("count", kafka_args(tmp_path, topic), tmp_path, submit=SUBMIT)
    assert crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(CrashPoint.COMMITTED, 4)]) == 1
    clock_ms = ClockStore(LocalFileSystem(), str(tmp_path / "ck" / "clock")).read().clock_ms
    needed = json.loads((tmp_path / "ck" / "rewind" / f"{clock_ms:015d}").read_text())["offsets"][topic.name]["1"]
    topic.delete_before(1, needed + 7)
    before = sink_counts(tmp_path)

    refused = crasher.run()

    assert refused.returncode != 0
    assert (f"the restart from clock {clock_ms} ms needs records that Kafka deleted (retention): "
            f"topic {topic.name} partition 1 offsets {needed} to {needed + 6}") in refused.log, refused.log
    assert sink_counts(tmp_path) == before
    assert not (tmp_path / "ck" / "spark").exists()


def test_counts_are_exact_a_rerun_changes_nothing_and_a_partition_added_between_runs_is_read_once(tmp_path, topic):
    topic.write(spread(1, 1_500, 4))
    crasher = Crasher("count", kafka_args(tmp_path, topic), tmp_path, submit=SUBMIT)
    first = crasher.run(standby_next=True)
    assert first.returncode == 0, first.log
    assert sink_counts(tmp_path) == topic.written
    finish(crasher, tmp_path, topic, "A", standby_next=True)  # nothing new: nothing changes
    added = topic.add_partition()
    topic.write(spread(6_001, 900, 4, partitions=(added, 0)))
    finish(crasher, tmp_path, topic, "A", standby_next=True)
    shutil.rmtree(tmp_path / "ck" / "spark")  # and from the clock, with the new partition
    finish(crasher, tmp_path, topic, "B")
