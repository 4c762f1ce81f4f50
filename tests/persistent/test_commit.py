"""The driver's commit of a micro-batch (``persistent.runtime.commit.Commit``) without
Spark: a real job directory on the local file system, the key groups' reports as
``GroupReport``s, and small fakes for the sink and the dead-letter output."""

from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import pytest

from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords
from persistent.storage.faults import CrashPoint
from persistent.examples.count import VectorizedCount
from persistent.runtime import commit as commit_module
from persistent.runtime import kept
from persistent.runtime.commit import Commit
from persistent.runtime.delivery import Delivery
from persistent.runtime.recovery import Recovery, RecoveryPath
from persistent.runtime.reports import GroupReport
from persistent.sinks.base import BatchId, Sink
from persistent.storage.clock_store import verify_clock
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory, task_index, task_name
from persistent.storage.records import DeliveryPosition, RewindPositions
from state.errors import ClockError

from jobwriter import CommitTime, JobWriter

FRESH = Recovery(RecoveryPath.FRESH, 0, 0, key_groups=2)


class Events(list):
    """What the fakes saw, in order."""


class Batch:
    """A micro-batch (``persistent.runtime.commit.MicroBatch``) whose computing, by
    ``compute`` or by the sink's read of its ``results``, is an event; it fails with
    ``fails`` when given one."""

    def __init__(self, events: Events, reports: list[GroupReport], fails: Exception | None = None):
        self.events, self.computed, self.fails = events, reports, fails
        self.results = self

    def compute(self) -> None:
        self._compute("compute")

    def read(self) -> None:
        self._compute("read")

    def _compute(self, how: str) -> None:
        self.events.append((how,))
        if self.fails:
            raise self.fails

    def reports(self) -> list[GroupReport]:
        return self.computed

    def write_dead_letters(self, batch: BatchId) -> None:
        self.events.append(("dead letters", batch))


class RecordingSink(Sink):
    """Notes each write and append, with the clock and the position as they were then;
    ``reads_once``, it reads its results first."""

    def __init__(self, events: Events, directory: JobDirectory, reads_once: bool):
        self.events, self.directory, self.reads_once = events, directory, reads_once

    def write(self, results, batch, windowed):
        self._read(results)
        self.events.append(("sink", batch, self.directory.clock.read()))

    def append(self, results, batch, windowed):
        self._read(results)
        self.events.append(("append", batch, self.directory.read_position()))

    def _read(self, results) -> None:
        if self.reads_once:
            results.read()


@pytest.fixture
def directory(tmp_path):
    return JobDirectory(LocalFileSystem(), str(tmp_path / "job"))


@pytest.fixture
def events():
    return Events()


@pytest.fixture
def make_commit(directory, events):
    def make(reads_once: bool = False, **settings) -> Commit:
        sink = RecordingSink(events, directory, reads_once)
        return Commit(directory, settings.pop("recovery", FRESH), sink, False, **{"whole_every_ms": None, **settings})

    return make


@pytest.fixture
def batch(events):
    def make(*reports: GroupReport, fails: Exception | None = None) -> Batch:
        return Batch(events, list(reports), fails)

    return make


def report(grp: int, checkpoint_ms: int | None = None, **figures) -> GroupReport:
    return GroupReport(**{"grp": grp, "applied": 0, "late": 0, "replayed": 0, "results": 0, "watermark_ms": 0,
                          "max_time_ms": -1, "state_bytes": 0, "checkpoint_ms": checkpoint_ms, **figures})


def checkpointed(directory: JobDirectory, grp: int, time_ms: int) -> GroupReport:
    """Key group ``grp``'s report of its durable checkpoint at ``time_ms``, written as a group writes it."""
    written = directory.store(grp).persist(time_ms, f"{grp}@{time_ms}".encode())
    return report(grp, time_ms, checkpoint_bytes=written.size, checkpoint_crc=written.crc)


def bad_record(position: str) -> BadRecord:
    return BadRecord(position, "not a number", "the value is not a number")


def test_the_sink_is_written_before_the_clock_advances(directory, events, make_commit, batch):
    progress = make_commit()(0, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))
    assert events == [("compute",), ("sink", BatchId(0, 0), None)]
    assert directory.clock.read().clock_ms == progress.clock_ms == 100


@pytest.mark.parametrize("reads_once, effects", [
    (False, [("compute",), ("crash", CrashPoint.BATCH), ("dead letters", BatchId(0, 0)), ("sink", BatchId(0, 0))]),
    # The sink's write computes the batch: one Spark job.
    (True, [("read",), ("sink", BatchId(0, 0)), ("crash", CrashPoint.BATCH), ("dead letters", BatchId(0, 0))]),
])
def test_the_crash_points_stand_between_the_effects_in_their_order(directory, events, make_commit, batch,
                                                                   monkeypatch, reads_once, effects):
    monkeypatch.setattr(commit_module, "crash_point", lambda point: events.append(("crash", point,
                                                                                   directory.clock.read())))
    commit = make_commit(reads_once, bad_records=BadRecords.DEAD_LETTER,
                         listeners=(lambda p: events.append(("progress",)),))
    commit(0, batch(checkpointed(directory, 0, 100), report(1, bad_records=1)))
    assert [event[:2] for event in events] == [*effects, ("crash", CrashPoint.CLOCK), ("progress",),
                                               ("crash", CrashPoint.COMMITTED)]
    clocks = {event[1]: event[2] for event in events if event[0] == "crash"}
    assert all(type(point) is CrashPoint for point in clocks)
    assert clocks[CrashPoint.CLOCK] is None and clocks[CrashPoint.COMMITTED].clock_ms == 100


def test_the_clock_waits_for_every_task_it_knows_to_report_the_newest_checkpoint(directory, events, make_commit,
                                                                                  batch):
    commit = make_commit(reads_once=True)
    commit(0, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))
    before = directory.clock.read()
    with pytest.raises(ClockError):
        commit(1, batch(checkpointed(directory, 0, 200), report(1)))
    assert directory.clock.read() == before
    assert [event[:2] for event in events if event[0] == "sink"] == [("sink", BatchId(0, 0)), ("sink", BatchId(0, 1))]
    assert [p.batch for p in directory.read_progress(10)] == [0]


def test_the_clock_is_the_lowest_task_clock_and_a_new_task_joins_at_its_first_checkpoint(directory, make_commit,
                                                                                          batch):
    commit = make_commit()
    commit(0, batch(checkpointed(directory, 0, 100)))
    progress = commit(1, batch(checkpointed(directory, 0, 200), checkpointed(directory, 1, 200)))
    record = directory.clock.read()
    assert progress.clock_ms == record.clock_ms == 200
    assert record.task_clocks == {task_name(0): 200, task_name(1): 200}


def test_a_replayed_batch_leaves_the_clock_unchanged(directory, events, make_commit, batch):
    commit = make_commit()
    reports = [checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)]
    commit(0, batch(*reports))
    before, history = directory.clock.read(), directory.clock.history()
    assert commit(0, batch(*reports)).clock_ms == 100
    assert directory.clock.read() == before and directory.clock.history() == history
    assert [event[:2] for event in events if event[0] == "sink"] == [("sink", BatchId(0, 0))] * 2


class SparkJobFailed(Exception):
    """Spark's error for a job whose task failed: the task's error as text."""


def failed_on(directory, group: int, record: BadRecord) -> SparkJobFailed:
    """Spark's error for a job whose key group ``group`` failed its task on ``record``,
    which the group wrote to ``directory`` first."""
    directory.record_failing_record(group, record)
    return SparkJobFailed(f"Task 1 failed: BadRecordError: {BadRecordError(record)}\n\tat ...")


@pytest.mark.parametrize("reads_once", [False, True])
def test_a_batch_whose_computing_fails_on_a_bad_record_raises_it_and_writes_nothing(directory, events, make_commit,
                                                                                     batch, reads_once):
    record = bad_record("f:3")
    failed_on(directory, 2, bad_record("f:9"))  # a second group failing in the same micro-batch
    failing = batch(checkpointed(directory, 0, 100), fails=failed_on(directory, 1, record))
    with pytest.raises(BadRecordError) as raised:
        make_commit(reads_once)(4, failing)
    assert raised.value.record == record and raised.value.where == "micro-batch 0.4"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    failed = json.loads(directory.fs.read_bytes(directory.fs.join(directory.root, "failed-batch")))
    assert failed == {"generation": 0, "batch": 4}
    assert directory.take_failing_records() == []  # taken: a later failure names its own
    assert events == [("read",) if reads_once else ("compute",)]
    assert directory.clock.read() is None and directory.read_progress(10) == []


@pytest.mark.parametrize("bad_records, fails_on_a_record", [
    (BadRecords.FAIL, False),
    # Only a job that fails on bad records reads them.
    (BadRecords.DEAD_LETTER, True),
])
def test_a_batch_whose_computing_fails_otherwise_raises_that_error_and_records_no_failed_batch(directory, make_commit,
                                                                                              batch, bad_records,
                                                                                              fails_on_a_record):
    failure = failed_on(directory, 0, bad_record("f:3")) if fails_on_a_record else SparkJobFailed("disk full")
    with pytest.raises(SparkJobFailed) as raised:
        make_commit(reads_once=True, bad_records=bad_records)(4, batch(fails=failure))
    assert raised.value is failure
    assert not directory.fs.exists(directory.fs.join(directory.root, "failed-batch"))
    assert directory.clock.read() is None and directory.read_progress(10) == []


def test_dead_letters_are_written_before_the_sink_that_did_not_compute_the_batch(events, make_commit, batch):
    progress = make_commit(bad_records=BadRecords.DEAD_LETTER)(0, batch(report(0, bad_records=2),
                                                                        report(1, late_records=1)))
    assert [event[:2] for event in events] == [("compute",), ("dead letters", BatchId(0, 0)), ("sink", BatchId(0, 0))]
    assert progress.dead_letters == 3


def test_late_messages_go_to_the_dead_letters_in_a_job_that_fails_on_bad_records(events, make_commit, batch):
    progress = make_commit(reads_once=True)(0, batch(report(0, late_records=2)))
    assert [event[:2] for event in events] == [("read",), ("sink", BatchId(0, 0)), ("dead letters", BatchId(0, 0))]
    assert progress.dead_letters == 2


def test_a_batch_without_bad_or_late_records_writes_no_dead_letters(events, make_commit, batch):
    make_commit(bad_records=BadRecords.DEAD_LETTER)(0, batch(report(0, late=3)))
    assert [event[0] for event in events] == ["compute", "sink"]


def checkpoint_every_boundary(directory: JobDirectory, commit: Commit, batch, boundaries: int) -> None:
    for number in range(boundaries):
        commit(number, batch(checkpointed(directory, 0, 100 * (number + 1))))


def test_retention_keeps_the_checkpoints_the_clock_may_rewind_to(directory, make_commit, batch):
    checkpoint_every_boundary(directory, make_commit(), batch, 15)
    oldest_ms = directory.clock.oldest_restorable_ms()
    assert oldest_ms > 100
    assert directory.store(0).times() == list(range(oldest_ms, 1501, 100))
    assert {record.clock_ms for record in directory.clock.history()} <= set(directory.store(0).times())


def test_retention_keeps_the_chain_of_the_oldest_checkpoint_it_keeps_from_the_whole_one_its_group_reported(
        directory, make_commit, batch):
    commit = make_commit(whole_every_ms=1_000)
    for number in range(15):
        time_ms = 100 * (number + 1)
        whole_ms = max(whole for whole in (100, 500, 1_200) if whole <= time_ms)
        commit(number, batch(replace(checkpointed(directory, 0, time_ms), whole_ms=whole_ms)))
    assert directory.clock.oldest_restorable_ms() == 600
    assert directory.store(0).times() == list(range(500, 1501, 100))  # 600's chain from 500 on
    assert commit.wholes == {0: {time_ms: 500 if time_ms < 1_200 else 1_200 for time_ms in range(600, 1501, 100)}}
    # Restarted, the commit has no record of the chains before it: the writer's promise
    # that no chain crosses a multiple of 1,000 ms keeps the one the oldest is in.
    for number in range(15, 21):
        restarted = make_commit(whole_every_ms=1_000)
        restarted(number, batch(checkpointed(directory, 0, 100 * (number + 1))))
    assert directory.clock.oldest_restorable_ms() == 1_200
    assert directory.store(0).times() == list(range(1_000, 2_101, 100))


def test_retention_keeps_the_checkpoint_the_state_of_a_replayed_batch_follows(directory, make_commit, batch):
    """Spark replays its last micro-batch from the state of the one before, which follows
    the checkpoint that one wrote (``KeyGroup.encode``): after each commit it is kept."""
    commit = make_commit()
    for number in range(15):
        commit(number, batch(checkpointed(directory, 0, 100 * (number + 1))))
        if number:
            assert directory.store(0).read(100 * number).data == f"0@{100 * number}".encode()


def test_retention_keeps_the_checkpoints_from_the_restore_point_of_a_generation_begun_by_path_b(directory, make_commit,
                                                                                                batch):
    directory.store(0).persist(50, b"restored")
    restored = Recovery(RecoveryPath.FROM_CLOCK, 1, 50, restored=frozenset({0}), key_groups=1)
    checkpoint_every_boundary(directory, make_commit(recovery=restored), batch, 15)
    assert directory.clock.oldest_restorable_ms() > 100
    assert directory.store(0).times() == [50, *range(100, 1501, 100)]


def test_without_checkpoints_the_commit_keeps_no_clock(directory, make_commit, batch):
    progress = make_commit(checkpoints=False)(0, batch(report(0, applied=5)))
    assert progress.clock_ms is None and directory.clock.read() is None
    assert [p.rows for p in directory.read_progress(10)] == [5]


@pytest.mark.parametrize("reads_once", [False, True])
def test_at_most_once_computes_the_batch_and_takes_the_position_before_the_sink_appends(events, make_commit, batch,
                                                                                         reads_once):
    commit = make_commit(reads_once, delivery=Delivery.AT_MOST_ONCE, checkpoints=False)
    commit(0, batch(report(0, max_time_ms=250), report(1, max_time_ms=180)))
    assert events == [("compute",), *[("read",)] * reads_once, ("append", BatchId(0, 0), DeliveryPosition(0, 251))]


def test_the_progress_record_sums_the_reports_and_reaches_the_listeners_in_order(directory, make_commit, batch):
    heard = []
    commit = make_commit(listeners=(lambda p: heard.append(("metrics", p)), lambda p: heard.append(("job", p))),
                         timer=CommitTime(1.5, 0.25, 1_700_000_000_000))
    reports = [
        report(0, 100, applied=7, late=1, replayed=2, results=3, watermark_ms=150, state_bytes=40,
               checkpoint_bytes=10, checkpoint_crc=11, checkpoint_seconds=0.5),
        report(1, 100, applied=4, results=1, watermark_ms=140, state_bytes=20, checkpoint_bytes=5,
               checkpoint_crc=12, checkpoint_seconds=0.25, folded=4, partials=2),
        report(2, applied=1, watermark_ms=120, state_bytes=8, folded=1, partials=1),
    ]
    progress = commit(3, batch(*reports))
    assert (progress.rows, progress.late, progress.replayed, progress.results) == (12, 1, 2, 4)
    assert (progress.checkpoints, progress.checkpoint_bytes, progress.checkpoint_seconds) == (2, 15, 0.75)
    assert progress.checkpoint_crcs == {task_name(0): 11, task_name(1): 12}
    assert progress.state_bytes == {task_name(0): 40, task_name(1): 20, task_name(2): 8}
    assert (progress.watermark_ms, progress.clock_ms) == (150, 100)
    assert (progress.folded, progress.partials) == (5, 3)
    assert (progress.seconds, progress.commit_seconds, progress.finished_at_ms) == (1.75, 0.25, 1_700_000_000_000)
    assert directory.read_progress(10) == [progress]
    assert heard == [("metrics", progress), ("job", progress)]


def test_the_commit_module_imports_nothing_of_spark():
    path = Path(commit_module.__file__)
    tree = ast.parse(path.read_text(), str(path))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.split(".")[0] == "pyspark"]


def test_a_batch_without_reports_commits_zeros_and_at_most_once_takes_the_position_at_zero(directory, events,
                                                                                            make_commit, batch):
    progress = make_commit(delivery=Delivery.AT_MOST_ONCE)(0, batch())
    assert (progress.rows, progress.watermark_ms, progress.clock_ms, progress.checkpoints) == (0, 0, None, 0)
    assert events[-1] == ("append", BatchId(0, 0), DeliveryPosition(0, 0))


@pytest.mark.parametrize("reads_once, delivery", [(True, Delivery.EXACTLY_ONCE), (False, Delivery.EXACTLY_ONCE),
                                                  (True, Delivery.AT_LEAST_ONCE), (False, Delivery.AT_MOST_ONCE)])
def test_the_sink_is_told_that_the_results_are_windows(directory, events, batch, reads_once, delivery):
    told = []

    class WindowsSink(RecordingSink):
        def write(self, results, batch, windowed):
            told.append(windowed)

        def append(self, results, batch, windowed):
            told.append(windowed)

    commit = Commit(directory, FRESH, WindowsSink(events, directory, reads_once), True, delivery=delivery,
                    whole_every_ms=None)
    commit(0, batch(report(0)))
    assert told == [True]


def test_the_seconds_of_a_commit_are_from_its_start_to_its_end(make_commit, batch):
    class Later(CommitTime):
        def monotonic(self) -> float:
            return 1000 + super().monotonic()

    progress = make_commit(timer=Later(1.5, 0.25, 1_700_000_000_000))(0, batch(report(0)))
    assert (progress.seconds, progress.commit_seconds) == (1.75, 0.25)


def test_a_commit_without_checkpoints_reports_no_clock_though_an_earlier_run_kept_one(directory, make_commit, batch):
    make_commit()(0, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))
    assert make_commit(checkpoints=False)(1, batch(report(0), report(1))).clock_ms is None


def test_a_task_that_holds_the_newest_checkpoint_already_need_not_report_it_again(directory, make_commit, batch):
    commit = make_commit()
    commit(0, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))
    assert commit(1, batch(checkpointed(directory, 0, 100), report(1))).clock_ms == 100


def test_the_clock_names_every_task_that_did_not_report_the_newest_checkpoint(directory, make_commit, batch):
    commit = make_commit(recovery=Recovery(RecoveryPath.FRESH, 0, 0, key_groups=3))
    commit(0, batch(*(checkpointed(directory, grp, 100) for grp in range(3))))
    with pytest.raises(ClockError, match=f"boundary 200 ms but task\\(s\\) {task_name(1)}, {task_name(2)} reported no "
                                         "checkpoint there; the clock stays at 100 ms"):
        commit(1, batch(checkpointed(directory, 0, 200), report(1), report(2)))


def test_a_report_of_a_checkpoint_older_than_its_tasks_clock_moves_no_clock(directory, make_commit, batch):
    commit = make_commit()
    commit(0, batch(checkpointed(directory, 0, 200), checkpointed(directory, 1, 200)))
    assert commit(1, batch(checkpointed(directory, 0, 100))).clock_ms == 200
    assert directory.clock.read().task_clocks == {task_name(0): 200, task_name(1): 200}


def test_the_rewind_positions_of_each_new_clock_are_recorded_before_it_and_kept_while_a_restart_may_need_them(
        directory, make_commit, batch):
    asked = []

    def positions(clock_ms: int) -> dict[str, dict[str, int]]:
        record = directory.clock.read()
        asked.append((clock_ms, record and record.clock_ms))  # the clock before it moves
        return {"topic": {"0": clock_ms // 10}}

    commit = make_commit(rewind_positions=positions)
    commit(0, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))
    commit(1, batch(checkpointed(directory, 0, 100), checkpointed(directory, 1, 100)))  # the same clock again
    commit(2, batch(checkpointed(directory, 0, 200), checkpointed(directory, 1, 200)))
    assert asked == [(100, None), (200, 100)]
    assert directory.read_rewind_positions(200) == RewindPositions(200, {"topic": {"0": 20}})
    for number in range(3, 15):
        boundary = 100 * number
        commit(number, batch(checkpointed(directory, 0, boundary), checkpointed(directory, 1, boundary)))
    oldest_ms = directory.clock.oldest_restorable_ms()
    assert oldest_ms > 200
    assert directory.read_rewind_positions(oldest_ms - 100) is None
    assert directory.read_rewind_positions(oldest_ms).offsets == {"topic": {"0": oldest_ms // 10}}


def test_retention_keeps_the_chain_of_every_clock_a_rewind_may_choose(tmp_path):
    """Twenty-five micro-batches, each past a checkpoint boundary: most checkpoints hold
    the changes to the one before, and every clock in the history still restores."""
    writer = JobWriter(str(tmp_path / "job"), VectorizedCount())
    for step in range(25):
        writer.batch([(f"k{step % 7}", step * 100 + 50, 1), ("every", step * 100 + 60, 1)])
    directory = writer.directory
    history = directory.clock.history()
    assert len(history) == 10 and history[0].clock_ms == 1400
    for record in history:
        verify_clock(record, lambda task: directory.store(task_index(task)))
    changes = [directory.store(g).read(t).base is not None for g in directory.groups() for t in directory.store(g).times()]
    assert sum(changes) > len(changes) / 2
    # Retention kept each group's files from the whole one the oldest clock's chain starts at.
    for grp in directory.groups():
        store = directory.store(grp)
        assert store.read(store.times()[0]).base is None
        assert [s.time_ms for s in store.recover(1400)] == [t for t in store.times() if t <= 1400]


def test_a_batch_counts_the_key_groups_that_decoded_their_table(tmp_path, monkeypatch):
    writer = JobWriter(str(tmp_path / "job"), VectorizedCount())
    messages = [(f"k{i}", 50 + i, 1) for i in range(12)]  # every one of the three groups
    assert {writer.group_of(key) for key, _, _ in messages} == {0, 1, 2}
    assert writer.batch(messages).decoded_groups == 0  # new
    assert writer.batch(messages).decoded_groups == 0  # each goes on from the table it handed
    monkeypatch.setattr(kept, "_KEPT", {})  # another Python worker, which keeps nothing
    assert writer.batch(messages).decoded_groups == 3
    assert [p.decoded_groups for p in writer.directory.read_progress(3)] == [0, 0, 3]


def _offset_log_entry(directory: JobDirectory, batch_id: int, spark_watermark_ms: int) -> None:
    """Spark's offset log entry of micro-batch ``batch_id``, run with ``spark_watermark_ms``."""
    entry = directory.fs.join(directory.spark, "offsets", str(batch_id))
    directory.fs.write_atomic(entry, f'v1\n{{"batchWatermarkMs":{spark_watermark_ms}}}\n{{"files": 1}}'.encode())


def test_the_jobs_watermark_follows_the_partition_behind_never_back_and_a_replay_after_a_restart_runs_with_it(
        make_commit, batch, directory):
    recovery = Recovery(RecoveryPath.FROM_CLOCK, 1, 1_000, key_groups=2)
    commit = make_commit(recovery=recovery, job_watermark=True)
    _offset_log_entry(directory, 0, 0)
    assert commit.watermark_ms(0) == 1_000  # a generation's first: Spark's, never before the restore point
    commit(0, batch(report(0, next_watermark_ms=1_400), report(1, next_watermark_ms=1_400), report(1)))
    assert commit.watermark_ms(1) == 1_400
    progress = commit(1, batch(report(0, next_watermark_ms=1_200)))  # behind: the watermark stays
    assert (progress.watermark_ms, progress.next_watermark_ms) == (1_400, 1_400)
    commit(2, batch(report(0, next_watermark_ms=2_000)))
    # Spark replays micro-batch 2 after a restart (path A), then runs 3.
    restarted = make_commit(recovery=recovery, job_watermark=True)
    assert (restarted.watermark_ms(2), restarted.watermark_ms(3)) == (1_400, 2_000)


def test_a_job_whose_groups_run_with_sparks_watermark_gives_none():
    commit = Commit(None, FRESH, None, False, whole_every_ms=None)
    assert commit.watermark_ms(7) is None


def test_the_late_total_runs_on_across_replays_restarts_and_generations(make_commit, batch):
    commit = make_commit()
    assert [commit(b, batch(report(0, late=late))).late_total for b, late in enumerate([2, 0, 3])] == [2, 2, 5]
    assert make_commit()(2, batch(report(0, late=3))).late_total == 5  # a replay after a restart (path A)
    rewound = make_commit(recovery=Recovery(RecoveryPath.FROM_CLOCK, 1, 0, key_groups=2))
    assert rewound(0, batch(report(1, late=1))).late_total == 6  # the new generation's first batch
