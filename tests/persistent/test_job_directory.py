"""The small JSON records of a job directory (``persistent.storage.job_directory``):
each reads back what it writes, reads the files earlier versions wrote, and a damaged
file is a ``CorruptCheckpointError`` naming it."""

from __future__ import annotations

import json

import pytest
from test_recovery import directory  # noqa: F401 (a fixture)

from persistent.core.badrecords import BadRecord
from persistent.runtime.recovery import plan, state_partitions
from persistent.storage.job_directory import JobDirectory, PROGRESS_KEPT
from persistent.storage.records import BatchProgress, DeliveryPosition, FailedBatch, Generation, RescalePlan
from state.errors import CorruptCheckpointError


def progress(batch: int = 0, **changes) -> BatchProgress:
    fields = dict(generation=1, batch=batch, rows=10, late=1, replayed=2, results=3, checkpoints=2, clock_ms=900,
                  seconds=0.5, watermark_ms=1000, finished_at_ms=1_700_000_000_000,
                  state_bytes={"group-00000": 40}, dead_letters=1, checkpoint_bytes=15,
                  checkpoint_crcs={"group-00000": 11}, checkpoint_seconds=0.25, commit_seconds=None)
    return BatchProgress(**fields | changes)


def spark_replays(directory, batch: int) -> None:
    """Spark's checkpoint holds micro-batches up to ``batch``, the last one uncommitted."""
    for entry in range(batch + 1):
        directory.fs.write_atomic(directory.fs.join(directory.spark, "offsets", str(entry)),
                                  f'v1\n{{}}\n{{"files": {entry}}}'.encode())


# Each kind of record: where it is, how the directory reads it, a field every record holds.
KINDS = {
    Generation: (lambda d: d.fs.join(d.root, "generation"), JobDirectory.read_generation, "floor_ms"),
    FailedBatch: (lambda d: d.fs.join(d.root, "failed-batch"), JobDirectory.failed_batch_offsets, "batch"),
    DeliveryPosition: (lambda d: d.fs.join(d.root, "position"), JobDirectory.read_position, "next_ms"),
    RescalePlan: (lambda d: d.fs.join(d.root, "rescale", "plan"), JobDirectory.read_rescale_plan, "to_groups"),
    BatchProgress: (lambda d: d.fs.join(d.progress, "000001-000000000000.json"),
                    lambda d: d.read_progress(1), "watermark_ms"),
}

RECORDS = [
    Generation(3, 2000, 4, frozenset({2, 0}), True, {"monoid": {"name": "count"}, "interval_ms": 100}),
    Generation(0, 0),
    FailedBatch(1, 7),
    DeliveryPosition(2, 1500),
    RescalePlan(2000, 3, 2),
    progress(),
    progress(clock_ms=None, seconds=2, checkpoint_seconds=None, commit_seconds=0.1),
]


@pytest.mark.parametrize(("key_groups", "cores", "partitions"), [(8, 2, 2), (2, 8, 2), (1, 1, 1), (8, None, None)])
def test_a_new_spark_checkpoint_takes_a_state_partition_per_core_and_at_most_one_per_group(key_groups, cores,
                                                                                         partitions):
    assert state_partitions(key_groups, cores) == partitions


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_a_record_reads_back_what_it_writes(record):
    assert type(record).from_json(record.to_json(), "P") == record


def test_the_directory_reads_back_each_record_it_writes(directory):
    plan(directory, 4)
    assert directory.read_generation() == Generation(0, 0, 4, heartbeats=True, heartbeat_files=True)
    directory.record_position(DeliveryPosition(2, 1500))
    assert directory.read_position() == DeliveryPosition(2, 1500)
    directory.record_rescale_plan(RescalePlan(2000, 3, 2))
    assert directory.read_rescale_plan() == RescalePlan(2000, 3, 2)
    directory.record_progress(progress(0))
    directory.record_progress(progress(1, rows=4))
    assert directory.read_progress(10) == [progress(0), progress(1, rows=4)]
    spark_replays(directory, 1)
    directory.record_failed_batch(0, 1)
    assert directory.failed_batch_offsets() == (['{"files": 0}'], ['{"files": 1}'])


def test_progress_keeps_the_newest_records(directory):
    for batch in range(PROGRESS_KEPT + 3):
        directory.record_progress(progress(batch))
    assert len(directory.fs.list_names(directory.progress)) == PROGRESS_KEPT
    assert [p.batch for p in directory.read_progress(2)] == [PROGRESS_KEPT + 1, PROGRESS_KEPT + 2]


def test_before_they_are_written_there_are_no_records(directory):
    assert directory.read_generation() is None and directory.failed_batch_offsets() is None
    assert directory.read_progress(10) == []
    assert directory.read_position() is None
    assert directory.read_rescale_plan() is None


@pytest.mark.parametrize(
    ("stored", "record"),
    [
        ('{"floor_ms": 2000, "generation": 3, "heartbeat_files": true, "heartbeats": true, "key_groups": 4, '
         '"partitions": 2, "restored": [0, 2], "state": null, "timeouts": false}',
         Generation(3, 2000, 4, frozenset({0, 2}), True, partitions=2, heartbeat_files=True, timeouts=False)),
        ('{"generation": 1, "batch": 7}', FailedBatch(1, 7)),
        ('{"generation": 2, "next_ms": 1500}', DeliveryPosition(2, 1500)),
        ('{"clock_ms": 2000, "from_groups": 3, "to_groups": 2}', RescalePlan(2000, 3, 2)),
    ],
)
def test_a_record_is_stored_as_before(stored, record):
    assert json.loads(record.to_json()) == json.loads(stored)
    assert type(record).from_json(stored.encode(), "P") == record


def test_records_of_earlier_versions_lack_the_fields_added_since():
    assert Generation.from_json(b'{"generation": 1, "floor_ms": 5}', "P") == Generation(
        1, 5, key_groups=None, restored=frozenset(), heartbeats=False, state=None, partitions=None,
        heartbeat_files=False, timeouts=True)
    older = {name: value for name, value in json.loads(progress().to_json()).items()
             if name not in ("dead_letters", "checkpoint_bytes", "checkpoint_crcs", "checkpoint_seconds",
                             "commit_seconds")}
    assert BatchProgress.from_json(json.dumps(older).encode(), "P") == progress(
        dead_letters=0, checkpoint_bytes=0, checkpoint_crcs={}, checkpoint_seconds=None)


def damaged(record, field: str, damage: str) -> bytes:
    """``record`` stored, then not JSON, without ``field``, or with ``field`` of a wrong type."""
    if damage == "not JSON":
        return record.to_json()[:-1]
    stored = json.loads(record.to_json())
    if damage == "missing field":
        del stored[field]
    else:
        stored[field] = "one"
    return json.dumps(stored).encode()


@pytest.mark.parametrize("damage", ["not JSON", "missing field", "wrong type"])
@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_a_damaged_record_is_a_corrupt_checkpoint_naming_its_file(directory, record, damage):
    where, read, field = KINDS[type(record)]
    plan(directory, 4)
    spark_replays(directory, 1)
    path = where(directory)
    directory.fs.write_atomic(path, damaged(record, field, damage))
    with pytest.raises(CorruptCheckpointError) as raised:
        read(directory)
    assert raised.value.path == path and path in str(raised.value)


@pytest.mark.parametrize("stored", [
    b"[1, 2]",
    b"\xff",
    b'{"generation": 1.5, "floor_ms": 5}',
    b'{"generation": 1, "floor_ms": 5, "restored": [0, true]}',
    b'{"generation": 1, "floor_ms": 5, "state": 7}',
])
def test_a_generation_of_wrong_shape_is_corrupt(stored):
    with pytest.raises(CorruptCheckpointError) as raised:
        Generation.from_json(stored, "DIR/generation")
    assert raised.value.path == "DIR/generation"


def test_the_dead_letters_default_to_the_job_directory():
    assert JobDirectory.default_dead_letters("hdfs://nn/jobs/count/") == "hdfs://nn/jobs/count/dead-letters"


def test_the_heartbeat_rows_are_written_once_per_spark_checkpoint_one_per_key_group(directory):
    where = directory.spark_log.write_heartbeats("group", 3)
    rows = directory.fs.join(where, "rows.json")
    assert where == directory.fs.join(directory.spark, "heartbeats")
    assert [json.loads(line) for line in directory.fs.read_bytes(rows).splitlines()] == [
        {"group": 0}, {"group": 1}, {"group": 2}]
    written = directory.fs.read_bytes(rows)
    directory.spark_log.write_heartbeats("group", 5)  # a path A start: Spark's file source knows the file already
    assert directory.fs.read_bytes(rows) == written
    assert [n for n in directory.fs.list_names(where) if n != "rows.json"] == []  # no temporary file left


def test_a_micro_batchs_watermark_is_read_from_sparks_offset_log_and_a_torn_entry_is_named(directory):
    entry = directory.fs.join(directory.spark, "offsets", "7")
    directory.fs.write_atomic(entry, b'v1\n{"batchWatermarkMs":2999,"batchTimestampMs":5}\n{"files": 7}')
    assert directory.spark_log.watermark_ms(7) == 2999
    directory.fs.write_atomic(entry, b'v1\n{"batchTimestampMs":5}\n{"files": 7}')
    with pytest.raises(CorruptCheckpointError, match="micro-batch 7's offset log entry has no watermark"):
        directory.spark_log.watermark_ms(7)


def test_the_bad_records_failing_key_groups_wrote_are_taken_once_by_key_group(directory):
    assert directory.take_failing_records() == []
    first, second = BadRecord("f line 9", "{", "not JSON"), BadRecord("g line 1", "}", "not JSON")
    directory.record_failing_record(12, second)
    directory.record_failing_record(3, first)
    directory.record_failing_record(12, second)  # the retried task
    assert directory.take_failing_records() == [first, second]
    assert directory.take_failing_records() == []
