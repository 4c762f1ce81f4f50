"""The install step of a rescale (``persistent.runtime.rescale``), without Spark: the staged
checkpoints replace the old layout, and a start after a crash in the middle finishes
it. ``tests/spark/test_key_groups.py`` runs whole rescales."""

from __future__ import annotations

import json

import pytest
from test_recovery import checkpoint_all, directory  # noqa: F401 (directory: fixture)

from persistent.runtime.rescale import install, rescale_if_asked
from persistent.runtime.recovery import RecoveryPath, plan
from persistent.storage.records import RescalePlan

PLAN = RescalePlan(clock_ms=2000, from_groups=3, to_groups=2)


def staged_rescale(directory) -> None:
    """Three groups checkpointed at 1000 and 2000, then split and merged into two, staged."""
    for time_ms in (1000, 2000):
        checkpoint_all(directory, time_ms, groups=(0, 1, 2))
    for group in range(PLAN.to_groups):
        directory.staged_store(group).persist(2000, f"new group {group}".encode())
    record = {"clock_ms": PLAN.clock_ms, "from_groups": PLAN.from_groups, "to_groups": PLAN.to_groups}
    directory.fs.write_atomic(directory.fs.join(directory.root, "rescale", "plan"), json.dumps(record).encode())


def assert_installed(directory) -> None:
    assert directory.fs.list_names(directory.checkpoints) == ["group-00000", "group-00001"]
    assert [directory.store(g).times() for g in (0, 1)] == [[2000], [2000]]
    assert [directory.restore(g, 2000)[0].data for g in (0, 1)] == [b"new group 0", b"new group 1"]
    record = directory.clock.read()
    assert (record.clock_ms, dict(record.task_clocks)) == (2000, {"group-00000": 2000, "group-00001": 2000})
    assert directory.clock.history() == [record]  # no rewind reaches the old layout
    assert directory.read_generation().key_groups == 2
    assert directory.read_rescale_plan() is None and not directory.fs.exists(directory.fs.join(directory.root, "rescale"))


def test_a_start_after_a_crash_in_the_install_finishes_it(directory):
    staged_rescale(directory)
    # The crash came after the first staged file was renamed into place.
    directory.fs.replace(directory.staged_store(0).path(2000), directory.store(0).path(2000))
    assert directory.read_rescale_plan() == PLAN

    # A start without a number of key groups finishes it too.
    assert rescale_if_asked(None, directory, None, None, None, 100, str) == PLAN
    assert_installed(directory)
    install(directory, PLAN)  # again: nothing changes
    assert_installed(directory)
    restart = plan(directory, None)
    assert (restart.path, restart.restored, restart.key_groups) == (RecoveryPath.FROM_CLOCK, {0, 1}, 2)


def test_a_half_done_rescale_refuses_another_number(directory):
    staged_rescale(directory)
    with pytest.raises(ValueError, match="rescale of .* to 2 key groups is half done: start the job with key_groups=2"):
        rescale_if_asked(None, directory, 3, None, None, 100, str)
    assert directory.read_rescale_plan() == PLAN and directory.store(2).times() == [1000, 2000]


def test_with_spark_s_checkpoint_there_the_plan_refuses_and_says_how_to_rescale(directory):
    plan(directory, 3)
    checkpoint_all(directory, 1000, groups=(0, 1, 2))
    directory.fs.write_atomic(directory.fs.join(directory.spark, "offsets", "0"), b"v1")
    assert rescale_if_asked(None, directory, 5, None, None, 100, str) is None
    with pytest.raises(ValueError, match="delete .*spark and start the job with key_groups=5: it restarts from the clock"):
        plan(directory, 5)
