"""The checkpoint schedule (after Gearpump's CheckpointManagerSpec), with the idle-task fix,
on a real ``CheckpointStore`` over the local file system."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state.boundaries import boundary_after, boundary_at_or_before
from state.checkpoint_manager import CheckpointManager
from state.checkpoint_store import CheckpointStore
from state.errors import MissingCheckpointError, StateValueError
from state.fs import LocalFileSystem

INTERVAL = 100


@pytest.fixture
def store(tmp_path):
    return CheckpointStore(LocalFileSystem(), str(tmp_path), "task-0")


@pytest.fixture
def manager(store):
    return CheckpointManager(INTERVAL, store)


# -- helpers -------------------------------------------------------------------------


def test_message_times_and_watermarks_may_be_numpy_integers(manager):
    assert manager.update(np.int64(150)) == 200
    assert manager.due(np.uint32(200)) == 200


@pytest.mark.parametrize("bad", [-1, 1.0, "5", None, True, np.bool_(False), np.float64(3)])
def test_a_bad_message_time_raises_and_leaves_the_schedule_unchanged(manager, bad):
    manager.update(150)
    with pytest.raises(StateValueError, match="timestamp_ms"):
        manager.update(bad)
    assert (manager.checkpoint_time, manager.max_message_ms) == (200, 150)


@pytest.mark.parametrize("bad", [-1, 1.0, "5", None, True])
def test_a_bad_watermark_raises_naming_it(manager, bad):
    with pytest.raises(StateValueError, match="watermark_ms"):
        manager.due(bad)


# -- construction --------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -100, 1.5, "100", None, True])
def test_a_bad_interval_raises(store, bad):
    with pytest.raises(StateValueError, match="interval_ms"):
        CheckpointManager(bad, store)


def test_a_new_manager_is_unarmed(manager):
    assert manager.checkpoint_time is None
    assert manager.last_checkpoint_ms is None


# -- Gearpump's rule -----------------------------------------------------------------


@pytest.mark.parametrize(("ts", "first"), [(0, 100), (1, 100), (99, 100), (100, 200), (1234, 1300)])
def test_the_first_checkpoint_is_at_the_boundary_after_the_first_message(manager, ts, first):
    assert manager.update(ts) == first == (1 + ts // INTERVAL) * INTERVAL


def test_later_messages_do_not_move_an_armed_checkpoint(manager):
    manager.update(150)
    assert manager.update(999) == 200
    assert manager.update(10) == 200


def test_the_armed_checkpoint_is_due_once_the_watermark_reaches_it(manager):
    manager.update(150)
    assert manager.due(150) is None
    assert manager.due(199) is None
    assert manager.due(200) == 200
    # an armed task takes its armed time, even when the watermark passed newer boundaries
    assert manager.due(750) == 200


def test_the_next_checkpoint_is_at_the_first_boundary_above_the_newest_message(manager):
    for ts in (150, 420, 380):
        manager.update(ts)
    assert manager.checkpoint(200, b"state@200") == 500
    assert manager.checkpoint_time == 500
    assert manager.due(499) is None
    assert manager.due(500) == 500


def test_a_message_exactly_on_the_checkpoint_time_arms_the_next_boundary(manager):
    manager.update(150)
    manager.update(200)
    assert manager.checkpoint(200, b"x") == 300


def test_the_manager_is_unarmed_after_a_checkpoint_when_no_newer_message_came(manager):
    manager.update(150)
    assert manager.checkpoint(200, b"x") is None
    assert manager.checkpoint_time is None
    assert manager.last_checkpoint_ms == 200


def test_a_message_after_an_unarmed_checkpoint_arms_the_boundary_after_it(manager):
    manager.update(150)
    manager.checkpoint(200, b"x")
    assert manager.update(310) == 400


def test_a_late_message_rearms_after_the_last_checkpoint_not_before(manager):
    manager.update(150)
    manager.checkpoint(200, b"x")
    assert manager.update(120) == 300


# -- the idle fix --------------------------------------------------------------------


def test_a_task_without_messages_checkpoints_at_the_newest_boundary_the_watermark_passed(manager):
    assert manager.due(0) is None
    assert manager.due(99) is None
    assert manager.due(100) == 100
    assert manager.due(450) == 400


def test_an_idle_task_checkpoints_from_the_watermark_alone_and_never_pins_the_clock(manager, store):
    manager.update(150)
    manager.checkpoint(manager.due(250), b"a")  # at 200, then unarmed
    assert manager.due(250) is None  # 200 is already taken
    assert manager.due(299) is None
    assert manager.due(300) == 300
    manager.checkpoint(300, b"b")
    assert manager.due(1250) == 1200
    manager.checkpoint(1200, b"c")
    assert manager.due(1299) is None
    assert store.times() == [200, 300, 1200]


def test_an_idle_task_that_receives_a_message_returns_to_gearpumps_rule(manager):
    manager.checkpoint(manager.due(250), b"idle")
    assert manager.update(260) == 300
    assert manager.due(299) is None
    assert manager.due(520) == 300


# -- persistence ---------------------------------------------------------------------


def test_a_checkpoint_is_persisted_in_the_store_at_its_time(manager, store):
    manager.update(150)
    manager.checkpoint(200, b"state@200")
    assert store.times() == [200]
    assert store.recover(200) == b"state@200"


def test_persist_then_recover_round_trips_and_restarts_the_schedule(store):
    first = CheckpointManager(INTERVAL, store)
    first.update(150)
    first.update(260)
    first.checkpoint(200, b"\x00state at 200\xff")

    root = store.directory.rsplit("/", 1)[0]
    restarted = CheckpointManager(INTERVAL, CheckpointStore(LocalFileSystem(), root, "task-0"))
    assert restarted.recover(200) == b"\x00state at 200\xff"
    assert restarted.last_checkpoint_ms == 200
    assert restarted.checkpoint_time is None
    assert restarted.due(250) is None  # nothing newer than the recovered checkpoint is due
    # replaying the message at 260 arms the boundary after it, like the first run did
    assert restarted.update(260) == 300


def test_recovering_a_time_without_checkpoint_raises(manager):
    manager.checkpoint(100, b"x")
    with pytest.raises(MissingCheckpointError):
        manager.recover(200)


def test_a_replayed_checkpoint_overwrites_the_stored_one(manager, store):
    manager.checkpoint(100, b"old")
    manager.recover(100)
    manager.update(120)
    manager.checkpoint(200, b"first")
    manager.recover(100)
    manager.update(120)
    manager.checkpoint(200, b"second")
    assert store.times() == [100, 200]
    assert store.recover(200) == b"second"


# -- the schedule as a property ------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("msg"), st.integers(-150, 400)),
            st.tuples(st.just("wm"), st.integers(0, 300)),
        ),
        max_size=60,
    )
)
def test_every_checkpoint_is_a_new_boundary_the_watermark_passed(tmp_path_factory, events):
    """Checkpoints are multiples of the interval, strictly increasing and never ahead of
    the watermark; an unarmed task has caught up with the newest boundary the watermark
    passed, an armed one waits for a boundary above its newest message (Gearpump)."""
    store = CheckpointStore(LocalFileSystem(), str(tmp_path_factory.mktemp("ckpt")), "t")
    manager = CheckpointManager(INTERVAL, store)
    watermark, taken = 0, []
    for kind, amount in events:
        if kind == "msg":
            manager.update(max(0, watermark + amount))
        else:
            watermark += amount
        while (due := manager.due(watermark)) is not None:
            assert due % INTERVAL == 0 and 0 < due <= watermark
            assert not taken or due > taken[-1]
            taken.append(due)
            manager.checkpoint(due, str(due).encode())
    assert store.times() == taken
    newest = boundary_at_or_before(watermark, INTERVAL)
    if manager.checkpoint_time is None:
        assert newest == 0 or taken[-1] == newest
    else:
        assert manager.checkpoint_time > watermark
        newest_seen = max(manager.max_message_ms, taken[-1] if taken else 0)
        assert manager.checkpoint_time <= boundary_after(newest_seen, INTERVAL)
