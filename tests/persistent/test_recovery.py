"""Choosing the recovery path from a job directory's files (no Spark needed)."""

from __future__ import annotations

import pytest

from persistent.runtime.recovery import RecoveryPath, plan
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError


@pytest.fixture
def directory(tmp_path):
    return JobDirectory(LocalFileSystem(), str(tmp_path / "job"))


def checkpoint_all(directory, time_ms, groups=(0, 1)):
    for group in groups:
        directory.store(group).persist(time_ms, f"group {group} at {time_ms}".encode())
    directory.clock.advance(time_ms, {f"group-{g:05d}": time_ms for g in groups})


def spark_has_a_query(directory):
    directory.fs.write_atomic(directory.fs.join(directory.spark, "offsets", "0"), b"v1")


def test_fresh_then_path_a_then_path_b(directory):
    assert plan(directory, 2).path is RecoveryPath.FRESH
    checkpoint_all(directory, 1000)
    spark_has_a_query(directory)
    again = plan(directory, 2)
    assert (again.path, again.generation, again.floor_ms) == (RecoveryPath.SAME_CHECKPOINT, 0, 0)

    checkpoint_all(directory, 2000)
    directory.fs.delete(directory.spark)
    restart = plan(directory, 2)
    assert (restart.path, restart.generation, restart.floor_ms) == (RecoveryPath.FROM_CLOCK, 1, 2000)
    # Restore by reference: the plan names the groups; each reads its own checkpoint.
    assert restart.restored == {0, 1}
    assert [directory.restore(g, 2000)[0].data for g in (0, 1)] == [b"group 0 at 2000", b"group 1 at 2000"]
    # Path A after that restart continues generation 1 and remembers its restore point
    # and restored groups, however often it restarts.
    spark_has_a_query(directory)
    for _ in range(2):
        again = plan(directory, 2)
        assert (again.generation, again.floor_ms, again.restored, again.heartbeats) == (1, 2000, {0, 1}, True)


def test_the_files_log_lives_through_restarts_and_a_fresh_start_empties_it(directory):
    record = directory.fs.join(directory.input_log, "0000000000.json")
    directory.fs.write_atomic(record, b'[["a.txt", 3, 1]]')  # taken before a crash, nothing committed
    assert plan(directory, 2).path is RecoveryPath.FRESH
    assert not directory.fs.exists(record)

    directory.fs.write_atomic(record, b'[["a.txt", 3, 1]]')
    checkpoint_all(directory, 1000)
    spark_has_a_query(directory)
    assert plan(directory, 2).path is RecoveryPath.SAME_CHECKPOINT
    directory.fs.delete(directory.spark)
    assert plan(directory, 2).path is RecoveryPath.FROM_CLOCK
    assert directory.fs.exists(record)


def test_another_number_of_key_groups_is_refused(directory):
    plan(directory, 2)
    with pytest.raises(ValueError, match=r"written with key_groups=2, this job has key_groups=3"):
        plan(directory, 3)


def test_without_a_number_a_fresh_start_takes_the_default_and_later_starts_the_recorded_one(directory, tmp_path):
    assert plan(directory, None, 8).key_groups == 8
    checkpoint_all(directory, 1000, groups=range(8))
    spark_has_a_query(directory)
    assert plan(directory, None, 12).key_groups == 8  # path A
    directory.fs.delete(directory.spark)
    assert (plan(directory, None, 12).path, directory.read_generation().key_groups) == (RecoveryPath.FROM_CLOCK, 8)
    with pytest.raises(ValueError, match="records no number of key groups: give the job's key_groups"):
        plan(JobDirectory(LocalFileSystem(), str(tmp_path / "other")), None)


def test_a_missing_checkpoint_at_the_clock_is_an_error_not_an_empty_state(directory):
    checkpoint_all(directory, 1000)
    directory.fs.delete(directory.store(1).path(1000))
    with pytest.raises(MissingCheckpointError, match="group-00001"):
        plan(directory, 2)


def test_a_torn_checkpoint_at_the_clock_is_an_error_when_its_group_restores_it(directory):
    checkpoint_all(directory, 500)
    checkpoint_all(directory, 1000)
    path = directory.store(0).path(1000)
    raw = directory.fs.read_bytes(path)
    directory.fs.write_atomic(path, raw[:-3])
    assert plan(directory, 2).restored == {0, 1}  # the plan reads no checkpoint
    with pytest.raises(CorruptCheckpointError, match="group-00000") as raised:
        directory.restore(0, 1000)
    assert "persistent rewind" in "".join(raised.value.__notes__) and "--to 500" in "".join(raised.value.__notes__)


def test_a_directory_recorded_before_heartbeats_continues_without_them_on_path_a(directory):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              b'{"generation": 2, "floor_ms": 700, "key_groups": 2}')
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    again = plan(directory, 2)
    assert (again.generation, again.floor_ms, again.restored, again.heartbeats) == (2, 700, frozenset(), False)
    assert again.heartbeat_files is False


def test_a_generation_whose_query_reads_python_heartbeats_keeps_them_on_path_a_and_the_next_reads_files(directory):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              b'{"generation": 2, "floor_ms": 700, "key_groups": 2, "heartbeats": true}')
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    again = plan(directory, 2)  # Spark's checkpoint names the Python data source
    assert (again.path, again.heartbeats, again.heartbeat_files) == (RecoveryPath.SAME_CHECKPOINT, True, False)
    assert directory.read_generation().heartbeat_files is False
    directory.fs.delete(directory.spark)
    restart = plan(directory, 2)
    assert (restart.path, restart.generation, restart.heartbeats, restart.heartbeat_files) == (
        RecoveryPath.FROM_CLOCK, 3, True, True)


def test_a_record_an_earlier_version_rewrote_keeps_the_heartbeat_file_its_spark_checkpoint_reads(directory):
    plan(directory, 2)
    directory.spark_log.write_heartbeats("grp", 2)
    spark_has_a_query(directory)
    # The earlier version ran path A and wrote the record without the field.
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              b'{"generation": 0, "floor_ms": 0, "key_groups": 2, "heartbeats": true, "partitions": 2}')
    again = plan(directory, 2)
    assert (again.path, again.heartbeat_files) == (RecoveryPath.SAME_CHECKPOINT, True)
    assert directory.read_generation().heartbeat_files is True


def test_a_generation_keeps_whether_its_query_sets_event_time_timeouts(directory):
    assert plan(directory, 2, timeouts=False).timeouts is False
    assert directory.read_generation().timeouts is False
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    assert plan(directory, 2, timeouts=True).timeouts is False  # path A: Spark keeps no timeout beside the state
    directory.fs.delete(directory.spark)
    assert plan(directory, 2, timeouts=False).timeouts is False  # path B: a new Spark checkpoint, the start's choice
    directory.fs.delete(directory.spark)
    assert plan(directory, 2, timeouts=True).timeouts is True


def test_a_generation_recorded_before_the_choice_keeps_the_timeouts_its_query_set(directory):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              b'{"generation": 2, "floor_ms": 700, "key_groups": 2, "heartbeats": true}')
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    assert (plan(directory, 2, timeouts=False).timeouts, directory.read_generation().timeouts) == (True, True)


def test_a_corrupt_clock_names_its_file(directory):
    checkpoint_all(directory, 1000)
    directory.fs.write_atomic(directory.clock.path, b"not a clock")
    with pytest.raises(ClockError, match=r"clock/clock"):
        plan(directory, 2)


def test_a_corrupt_generation_record_says_what_to_do(directory):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"), b"{")
    with pytest.raises(CorruptCheckpointError, match="delete .*spark to restart from the clock"):
        plan(directory, 2)


WINDOW_4S = {"monoid": {"name": "sum", "version": 1, "params": {"kind": "float"}},
             "window": {"size_ms": 4000, "step_ms": 1000}, "interval_ms": 1000}


@pytest.mark.parametrize("change, named", [
    ({"window": {"size_ms": 8000, "step_ms": 1000}}, "window 8000 ms every 1000 ms"),  # the same panes
    ({"interval_ms": 2000}, "checkpoint interval 2000 ms"),
    ({"monoid": {"name": "max", "version": 1, "params": {"kind": "float"}}}, '"name": "max"'),
    ({"ttl_ms": 60000}, "keys expiring 60000 ms behind the watermark"),
])
@pytest.mark.parametrize("spark_checkpoint", [True, False], ids=["path A", "path B"])
def test_a_restart_with_another_window_interval_monoid_or_ttl_is_refused_naming_both(
        directory, change, named, spark_checkpoint):
    plan(directory, 2, description=WINDOW_4S)
    checkpoint_all(directory, 1000)
    if spark_checkpoint:
        spark_has_a_query(directory)
    with pytest.raises(ValueError) as refused:
        plan(directory, 2, description={**WINDOW_4S, **change})
    message = str(refused.value)
    assert "window 4000 ms every 1000 ms, checkpoint interval 1000 ms" in message and named in message
    assert "new checkpoint directory" in message
    # Nothing changed: the job with its own settings still restarts.
    assert plan(directory, 2, description=WINDOW_4S).path is (
        RecoveryPath.SAME_CHECKPOINT if spark_checkpoint else RecoveryPath.FROM_CLOCK)


def test_spark_offsets_holding_only_a_temporary_file_are_no_started_query(directory):
    # Spark writes offsets/0 as a hidden temporary file, then renames it: a crash in
    # between leaves a query that never started a micro-batch.
    plan(directory, 2)
    checkpoint_all(directory, 1000)
    directory.fs.write_atomic(directory.fs.join(directory.spark, "offsets", ".0.5d3c1f2e.tmp"), b"v1")
    restart = plan(directory, 2)
    assert (restart.path, restart.floor_ms) == (RecoveryPath.FROM_CLOCK, 1000)


def test_a_copy_without_its_generation_file_restarts_after_the_sinks_newest_generation(directory):
    plan(directory, 2)
    checkpoint_all(directory, 1000)
    directory.fs.delete(directory.fs.join(directory.root, "generation"))  # copied: clock/ and checkpoints/ only
    restart = plan(directory, 2, sink_generation=3)
    assert (restart.path, restart.generation, restart.floor_ms) == (RecoveryPath.FROM_CLOCK, 4, 1000)
    # A generation file older than the sink's results is overtaken the same way.
    directory.fs.delete(directory.spark)
    assert plan(directory, 2, sink_generation=6).generation == 7


def test_a_copy_without_its_generation_file_takes_its_key_groups_from_the_clock(directory):
    plan(directory, 3)
    checkpoint_all(directory, 1000, groups=(0, 1, 2))
    directory.fs.delete(directory.fs.join(directory.root, "generation"))  # copied: clock/ and checkpoints/ only
    # Not the default from the cluster's cores: the clock's tasks name every key group.
    restart = plan(directory, None, 8)
    assert (restart.path, restart.key_groups, restart.restored) == (RecoveryPath.FROM_CLOCK, 3, {0, 1, 2})
    assert directory.read_generation().key_groups == 3


def test_a_copy_without_its_generation_file_refuses_another_number_of_key_groups(directory):
    plan(directory, 3)
    checkpoint_all(directory, 1000, groups=(0, 1, 2))
    directory.fs.delete(directory.fs.join(directory.root, "generation"))
    for started in (False, True):  # path B, then path A
        if started:
            spark_has_a_query(directory)
        with pytest.raises(ValueError, match=r"clock names 3 key groups .* this job has key_groups=5: run it with "
                                             r"key_groups=3 \(or without key_groups\)"):
            plan(directory, 5, 8)
        assert not directory.fs.exists(directory.fs.join(directory.root, "generation"))
    directory.fs.delete(directory.spark)
    assert plan(directory, 3, 8).key_groups == 3


def test_spark_checkpoint_of_an_unknown_generation_is_refused(directory):
    plan(directory, 2)
    checkpoint_all(directory, 1000)
    spark_has_a_query(directory)
    directory.fs.delete(directory.fs.join(directory.root, "generation"))
    with pytest.raises(ValueError, match=r"holds results of generation 2, but .* records generation 0 \(its "
                                         r"generation file is missing\).*Delete .*spark to restart from the clock"):
        plan(directory, 2, sink_generation=2)


def test_spark_checkpoint_without_its_generation_file_is_refused_since_its_key_layout_is_unknown(directory):
    """Which value Spark's state is keyed by (a group's number, or its slot) is recorded in
    the generation file only: continuing without it could give a key group no state."""
    plan(directory, 8, cores=2)
    checkpoint_all(directory, 1000, groups=range(8))
    spark_has_a_query(directory)
    directory.fs.delete(directory.fs.join(directory.root, "generation"))
    with pytest.raises(ValueError, match=r"generation file is missing.*how Spark's checkpoint .* keys its state "
                                         r".* cannot be told.*Delete .*spark to restart from the clock"):
        plan(directory, 8, cores=2, sink_generation=0)
    assert not directory.fs.exists(directory.fs.join(directory.root, "generation"))
    directory.fs.delete(directory.spark)
    assert plan(directory, 8, cores=2).path is RecoveryPath.FROM_CLOCK


def test_a_new_spark_checkpoint_spreads_the_groups_over_the_cores_and_path_a_keeps_its_spread(directory):
    assert plan(directory, 8, cores=2).partitions == 2
    assert directory.read_generation().partitions == 2
    checkpoint_all(directory, 1000)
    spark_has_a_query(directory)
    # Spark's checkpoint holds its state in 2 partitions, whatever the cluster has now.
    assert plan(directory, 8, cores=4).partitions == 2
    directory.fs.delete(directory.spark)
    assert (plan(directory, 8, cores=4).path, directory.read_generation().partitions) == (RecoveryPath.FROM_CLOCK, 4)
    spark_has_a_query(directory)
    assert plan(directory, 8, cores=1).partitions == 4


def test_no_more_partitions_than_key_groups(directory):
    assert plan(directory, 2, cores=8).partitions == 2


def test_a_spark_checkpoint_started_before_the_spread_stays_keyed_by_group_numbers(directory):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              b'{"generation": 2, "floor_ms": 700, "key_groups": 2, "heartbeats": true}')
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    assert plan(directory, 2, cores=2).partitions is None
    directory.fs.delete(directory.spark)
    assert plan(directory, 2, cores=2).partitions == 2


@pytest.mark.parametrize("partitions", [0, -1, 3])
def test_recorded_partitions_outside_the_key_groups_are_a_corrupt_generation_file(directory, partitions):
    directory.fs.write_atomic(directory.fs.join(directory.root, "generation"),
                              f'{{"generation": 0, "floor_ms": 0, "key_groups": 2, "partitions": {partitions}}}'.encode())
    spark_has_a_query(directory)
    checkpoint_all(directory, 1000)
    with pytest.raises(CorruptCheckpointError, match=rf"generation is corrupt: its {partitions} partitions are not "
                                                     r"between 1 and its 2 key groups.*restart from the clock"):
        plan(directory, 2, cores=2)
