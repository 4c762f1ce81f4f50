"""The delivery setting without Spark: parsing, what each setting keeps, how a job
directory starts under each, and counting lost and duplicated effects."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest

from monoids import Count
from persistent.core.errors import ConfigError
from persistent.examples.count import MessageCount
from persistent.runtime import recovery
from persistent.runtime.delivery import Delivery, Effects, Position, plan, write_effects
from persistent.runtime.job import Job
from persistent.runtime.planner import Plan
from persistent.runtime.recovery import RecoveryPath
from persistent.sinks.base import BatchId, Sink
from persistent.sinks.sqlite import SQLiteSink
from persistent.sources.generator import GeneratorSource
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import DeliveryPosition
from state import Window, WindowState
from state.errors import CorruptCheckpointError

AT_MOST, AT_LEAST, EXACTLY = Delivery.AT_MOST_ONCE, Delivery.AT_LEAST_ONCE, Delivery.EXACTLY_ONCE


@pytest.fixture
def directory(tmp_path):
    return JobDirectory(LocalFileSystem(), str(tmp_path / "job"))


def spark_has_a_query(directory):
    directory.fs.write_atomic(directory.fs.join(directory.spark, "offsets", "0"), b"v1")


class WriteOnly(Sink):
    def write(self, results, batch, windowed):
        pass


def job(tmp_path, **settings):
    return Job(task=MessageCount(), source=GeneratorSource(),
               sink=settings.pop("sink", SQLiteSink(str(tmp_path / "o.db"))), checkpoint_dir=str(tmp_path / "ck"),
               **settings)


class WindowCounter(MessageCount):
    def persistent_state(self):
        return WindowState(Count(), Window(100))


def test_a_query_sets_timeouts_only_where_the_watermark_alone_must_wake_a_key_group(tmp_path):
    """Windows close and keys expire without a message; a checkpoint falls due without one
    unless the groups take it a micro-batch early (``Plan.wakes_idle_groups``)."""
    exactly, windowed = Plan.of(job(tmp_path)), Plan.of(replace(job(tmp_path), task=WindowCounter()))
    assert [exactly.wakes_idle_groups(early) for early in (False, True)] == [True, False]
    assert [windowed.wakes_idle_groups(early) for early in (False, True)] == [True, True]
    # Without checkpoints nothing falls due: the state changes only with a message.
    assert not any(Plan.of(job(tmp_path, delivery=d)).wakes_idle_groups(False) for d in (AT_MOST, AT_LEAST))


def test_a_setting_is_its_value_or_the_enum_and_exactly_once_is_the_default(tmp_path):
    assert [d.value for d in Delivery] == ["at-most-once", "at-least-once", "exactly-once"]
    assert Delivery.of("at-least-once", "delivery") is AT_LEAST and Delivery.of(AT_MOST, "delivery") is AT_MOST
    assert Plan.of(job(tmp_path)).delivery is EXACTLY
    assert Plan.of(job(tmp_path, delivery="at-most-once")).delivery is AT_MOST


def test_a_job_is_a_frozen_spec_that_holds_its_settings_as_given(tmp_path):
    made = job(tmp_path, delivery="at-least-once")
    with pytest.raises(FrozenInstanceError):
        made.delivery = "exactly-once"
    changed = replace(made, delivery=EXACTLY)
    assert made.delivery == "at-least-once" and changed.plan.delivery is EXACTLY
    assert made.plan.job is made and changed.plan.job is changed
    with pytest.raises(ConfigError, match="delivery"):
        replace(made, delivery="twice")


def test_a_job_asks_its_task_for_its_state_once_and_plans_with_that(tmp_path):
    class Asked(MessageCount):
        calls = 0

        def persistent_state(self):
            Asked.calls += 1
            return super().persistent_state()

    made = Job(task=Asked(), source=GeneratorSource(), sink=WriteOnly(), checkpoint_dir=str(tmp_path / "ck"))
    assert Asked.calls == 1 and made.plan.spec.monoid == Count()


def test_an_unknown_setting_names_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="Job: delivery must be one of 'at-most-once', 'at-least-once', "
                                         "'exactly-once', got 'twice'"):
        job(tmp_path, delivery="twice")


def test_a_sink_that_cannot_append_serves_exactly_once_only(tmp_path):
    assert Plan.of(job(tmp_path, sink=WriteOnly())).delivery is EXACTLY
    with pytest.raises(ConfigError, match="delivery 'at-least-once' appends .* WriteOnly has no append"):
        job(tmp_path, sink=WriteOnly(), delivery="at-least-once")


def test_only_exactly_once_checkpoints_and_only_it_keeps_unwindowed_state(tmp_path):
    assert [d.checkpoints for d in (AT_MOST, AT_LEAST, EXACTLY)] == [False, False, True]
    assert [Plan.of(job(tmp_path, delivery=d)).checkpoints for d in (AT_MOST, AT_LEAST, EXACTLY)] == [False, False, True]
    assert not Plan.of(job(tmp_path), checkpoints=False).checkpoints
    assert [d.carries_state(False) for d in (AT_MOST, AT_LEAST, EXACTLY)] == [False, False, True]
    assert all(d.carries_state(True) for d in Delivery)


def test_at_least_once_starts_fresh_then_continues_spark_s_checkpoint(directory):
    assert plan(AT_LEAST, directory, 4, 8).path is RecoveryPath.FRESH
    spark_has_a_query(directory)
    again = plan(AT_LEAST, directory, 4, 8)
    assert (again.path, again.floor_ms, again.restored) == (RecoveryPath.SAME_CHECKPOINT, 0, set())
    # Spark's checkpoint lost: with no clock, the sources start from the beginning.
    directory.fs.delete(directory.spark)
    assert (plan(AT_LEAST, directory, 4, 8).path, directory.clock.read()) == (RecoveryPath.FRESH, None)


def test_at_most_once_restarts_after_its_position_on_empty_state(directory):
    first = plan(AT_MOST, directory, 4, 8)
    assert (first.path, first.generation, first.floor_ms) == (RecoveryPath.FRESH, 0, 0)
    position = Position(directory)
    position.take(0, 1_500)
    position.take(0, 900)  # a batch whose newest message is older: the position stays
    assert directory.read_position() == DeliveryPosition(0, 1_500)
    spark_has_a_query(directory)
    restart = plan(AT_MOST, directory, 4, 8)
    assert (restart.path, restart.generation, restart.floor_ms, restart.restored) == (
        RecoveryPath.AFTER_POSITION, 1, 1_500, set())
    assert not directory.fs.exists(directory.spark)  # the last run's unfinished batch is not replayed
    assert "sources start at 1500" in restart.describe()
    assert plan(AT_MOST, directory, 4, 8).generation == 2


def test_every_delivery_spreads_a_new_spark_checkpoint_s_groups_over_the_cores(directory):
    for delivery in (AT_MOST, AT_LEAST):
        assert plan(delivery, directory, 4, 8, cores=2).partitions == 2
        spark_has_a_query(directory)
        # At-most-once drops Spark's checkpoint at each restart; at-least-once continues it.
        assert plan(delivery, directory, 4, 8, cores=3).partitions == (3 if delivery is AT_MOST else 2)
        directory.fs.delete(directory.root)


def test_a_directory_keeps_the_setting_it_was_written_with(directory):
    plan(AT_LEAST, directory, 4, 8)
    with pytest.raises(ValueError, match="written with delivery='at-least-once', this job has "
                                         "delivery='exactly-once'"):
        plan(EXACTLY, directory, 4, 8)


def test_a_directory_from_before_the_setting_is_exactly_once(directory):
    recovery.plan(directory, 4)  # written without a delivery record
    with pytest.raises(ValueError, match="written with delivery='exactly-once'"):
        plan(AT_MOST, directory, 4, 8)
    assert plan(EXACTLY, directory, 4, 8).path is RecoveryPath.FRESH


def test_a_corrupt_position_is_an_error_naming_the_file(directory):
    plan(AT_MOST, directory, 4, 8)
    path = directory.fs.join(directory.root, "position")
    directory.fs.write_atomic(path, b"{")
    with pytest.raises(CorruptCheckpointError, match="delete it to start the sources from the beginning") as raised:
        plan(AT_MOST, directory, 4, 8)
    assert raised.value.path == path


class Recorder(Sink):
    def __init__(self, directory):
        self.directory, self.calls = directory, []

    def write(self, results, batch, windowed):
        self.calls.append(("write", batch, self.directory.read_position()))

    def append(self, results, batch, windowed):
        self.calls.append(("append", batch, self.directory.read_position()))


def test_at_most_once_records_the_position_before_the_effects(directory):
    sink, batch = Recorder(directory), BatchId(3, 5)
    write_effects(AT_MOST, directory, sink, None, batch, False, 7_000)
    write_effects(AT_LEAST, directory, sink, None, batch, False, 9_000)
    write_effects(EXACTLY, directory, sink, None, batch, False, 9_000)
    taken = DeliveryPosition(3, 7_000)
    assert sink.calls == [("append", batch, taken), ("append", batch, taken), ("write", batch, taken)]


def test_effects_count_shortfalls_as_lost_and_excesses_as_duplicated():
    effects = Effects({"a": 10, "b": 5, "c": 5}, {"a": 12, "b": 1, "d": 1})
    assert (effects.lost, effects.duplicated, effects.total) == (4 + 5, 2 + 1, 20)
    assert effects.accuracy == pytest.approx(1 - 12 / 20)
    assert Effects({"a": 3}, {"a": 3}).line() == "0 lost, 0 duplicated, accuracy 100.00%"
