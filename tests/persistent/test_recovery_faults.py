"""A damaged checkpoint or clock stops a job with the file and the remedy in the
message, and doing what it says (``persistent rewind``) restarts the job from an
intact clock (no Spark needed; ``tests/spark/test_storage_faults.py`` runs the same
through Hadoop). A missing checkpoint or a damaged clock stops the start; a damaged
checkpoint stops its key group when it restores it (restore by reference: the plan
reads no checkpoint)."""

from __future__ import annotations

import pytest
from jobwriter import run_cli
from test_recovery import checkpoint_all, directory, spark_has_a_query  # noqa: F401 (directory: fixture)

from persistent.runtime.recovery import RecoveryPath, plan
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError


def truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def flip_a_bit(raw: bytes) -> bytes:
    return raw[:30] + bytes([raw[30] ^ 0x10]) + raw[31:]


def damage(fs, path: str, how) -> None:
    fs.write_atomic(path, how(fs.read_bytes(path)))


def assert_restores_at(directory, restart, time_ms: int) -> None:
    """``restart`` is path B at ``time_ms``, and both groups restore their checkpoints there."""
    assert (restart.path, restart.floor_ms, restart.restored) == (RecoveryPath.FROM_CLOCK, time_ms, {0, 1})
    held = [directory.restore(g, time_ms)[0].data for g in (0, 1)]
    assert held == [f"group {g} at {time_ms}".encode() for g in (0, 1)]


def assert_advised_rewind_restarts(capsys, directory, to_ms: int) -> None:
    """``persistent rewind DIR --to T`` succeeds and the next start is path B at ``T``."""
    assert run_cli(capsys, "rewind", directory.root, "--to", to_ms)[0] == 0
    assert_restores_at(directory, plan(directory, 2), to_ms)


def advice(directory, to_ms: int) -> list[str]:
    return [
        f"The newest clock in the history whose checkpoints are all intact is {to_ms} ms: stop the job, "
        f"run `persistent rewind {directory.root} --to {to_ms}`, then start it again (recovery path B)."
    ]


@pytest.mark.parametrize("how", [truncate, flip_a_bit])
def test_a_damaged_checkpoint_at_the_clock_stops_its_restore_and_the_advised_rewind_restarts(capsys, directory, how):
    checkpoint_all(directory, 1000)
    checkpoint_all(directory, 2000)
    path = directory.store(1).path(2000)
    damage(directory.fs, path, how)
    plan(directory, 2)
    with pytest.raises(CorruptCheckpointError) as raised:
        directory.restore(1, 2000)
    assert f"corrupt record {path}: " in str(raised.value)
    assert "rewind the clock (ClockStore.rewind) to an older clock" in str(raised.value)
    assert raised.value.__notes__ == advice(directory, 1000)
    assert directory.clock.read().clock_ms == 2000

    assert_advised_rewind_restarts(capsys, directory, 1000)


def test_a_missing_checkpoint_at_the_clock_is_named_with_the_advice(directory):
    checkpoint_all(directory, 1000)
    checkpoint_all(directory, 2000)
    directory.fs.delete(directory.store(0).path(2000))
    with pytest.raises(MissingCheckpointError, match="task 'group-00000' has no checkpoint at 2000 ms") as raised:
        plan(directory, 2)
    assert raised.value.__notes__ == advice(directory, 1000)


def test_a_missing_clock_beside_its_history_stops_the_start_and_the_advised_rewind_restores_it(capsys, directory):
    checkpoint_all(directory, 1000)
    checkpoint_all(directory, 2000)
    directory.fs.delete(directory.clock.path)
    with pytest.raises(ClockError) as raised:
        plan(directory, 2)
    assert f"clock file {directory.clock.path} is missing" in str(raised.value)
    assert "ClockStore.history()" in str(raised.value) and "ClockStore.rewind(clock_ms)" in str(raised.value)
    assert raised.value.__notes__ == advice(directory, 2000)

    assert_advised_rewind_restarts(capsys, directory, 2000)


def test_a_corrupt_clock_stops_path_a_too_and_a_rewind_repairs_it(directory):
    plan(directory, 2)
    checkpoint_all(directory, 1000)
    checkpoint_all(directory, 2000)
    spark_has_a_query(directory)
    damage(directory.fs, directory.clock.path, flip_a_bit)
    with pytest.raises(ClockError, match=f"corrupt record {directory.clock.path}: checksum mismatch") as raised:
        plan(directory, 2)
    assert raised.value.__notes__ == advice(directory, 2000)

    directory.clock.rewind(2000)  # the library's rewind keeps Spark's checkpoint: path A goes on
    assert plan(directory, 2).path is RecoveryPath.SAME_CHECKPOINT
    assert directory.clock.read().clock_ms == 2000


def test_without_an_intact_clock_in_the_history_the_advice_is_a_new_directory(directory):
    checkpoint_all(directory, 1000)
    directory.fs.delete(directory.store(1).path(1000))
    with pytest.raises(MissingCheckpointError) as raised:
        plan(directory, 2)
    assert raised.value.__notes__ == [
        f"No clock in the history ({directory.clock.history_directory}) has intact checkpoints of every "
        f"task: start the job on a new checkpoint directory."
    ]


def test_checkpoints_without_any_clock_are_not_a_fresh_start(directory):
    checkpoint_all(directory, 1000)
    checkpoint_all(directory, 2000)
    directory.store(0).persist(3000, b"only group 0 got here")
    directory.fs.delete(directory.fs.join(directory.root, "clock"))
    with pytest.raises(ClockError) as raised:
        plan(directory, 2)
    message = str(raised.value)
    assert f"{directory.clock.path} is missing but {directory.checkpoints} holds checkpoints of 2 task(s)" in message
    assert "the newest time every task holds is 2000 ms" in message
    assert f"delete {directory.checkpoints} to start with empty state" in message

    directory.clock.advance(2000, {"group-00000": 2000, "group-00001": 2000})
    assert_restores_at(directory, plan(directory, 2), 2000)
