"""The key groups' function (``persistent.runtime.stateful``) without Spark, with the
fakes of ``spark_groups``; and its care of its Python worker."""

from __future__ import annotations

import dataclasses
import gc
import os
import tempfile
import time

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_groups import Accumulator, GroupState, frame, given_watermark, marked, rows, spark_rows

from monoids import Last, Timestamped
from persistent import PersistentTask
from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords, LateRecords
from persistent.storage.faults import CrashPoint
from persistent.examples.count import VectorizedCount
from persistent.runtime import kept, stateful
from persistent.runtime.recovery import Recovery, RecoveryPath
from persistent.runtime.reports import GroupReport
from persistent.runtime.rows import Kind
from persistent.runtime.stateful import DEAD_LETTERS, GroupFunction, peak_resident_bytes
from persistent.storage.checkpoint_store import CheckpointStore, decode_record
from persistent.storage.filesystems import JobStorage
from persistent.storage.job_directory import JobDirectory
from state import NonWindowState
from state.errors import MissingCheckpointError, StateValueError, StorageError
from state.tables import read_table


@pytest.fixture
def unfrozen():
    """A process whose objects the collector sees, as a fresh Python worker's; as it was after."""
    gc.unfreeze()
    stateful._FROZEN.clear()
    yield
    gc.unfreeze()
    stateful._FROZEN.clear()


def seen_by_the_collector(obj) -> bool:
    return any(tracked is obj for tracked in gc.get_objects())


def test_a_worker_freezes_what_it_holds_once_so_the_collections_after_its_tasks_skip_it(unfrozen):
    held = [[n] for n in range(1000)]
    assert seen_by_the_collector(held[0])
    stateful._freeze_the_libraries()
    frozen = gc.get_freeze_count()
    assert frozen >= len(held)
    assert not seen_by_the_collector(held[0])

    later = [[n] for n in range(1000)]
    stateful._freeze_the_libraries()
    assert gc.get_freeze_count() <= frozen  # none frozen again; a frozen one may have been freed since
    assert seen_by_the_collector(later[0])


def totals(out: pd.DataFrame) -> dict:
    """The results of a key group's output row, by key."""
    return dict(zip(out["key"][0], out["value"][0]))


#: A fresh job of one key group.
FRESH = Recovery(RecoveryPath.FRESH, 0, 0, key_groups=1)


def key_group(storage: JobStorage, task: PersistentTask | None = None, recovery: Recovery = FRESH,
              mode: BadRecords = BadRecords.FAIL, late_records: LateRecords = LateRecords.DROP,
              carries: bool = True, interval_ms: int = 100, checkpoints: bool = True, delay_ms: int | None = None):
    """The key groups' function (``GroupFunction``) of a job of one key group (counting
    its messages unless ``task`` is given), checkpointed every ``interval_ms`` into
    ``storage`` (with ``checkpoints``; with ``delay_ms``, at the next micro-batch's
    watermark), woken by event-time timeouts if ``recovery`` says; and the accumulator
    of its reports."""
    reports = Accumulator()
    run_group = GroupFunction(task=task or VectorizedCount(), interval_ms=interval_ms, recovery=recovery,
                              checkpoints=checkpoints, bad_records=mode, late_records=late_records, carries=carries,
                              storage=storage, reports=reports, delay_ms=delay_ms, early=delay_ms is not None)
    return run_group, reports


def test_a_groups_state_in_spark_follows_the_checkpoint_it_wrote_and_decodes_from_it(tmp_path, monkeypatch):
    storage = JobStorage(str(tmp_path / "job"))
    reads = []
    restore = JobDirectory.restore
    monkeypatch.setattr(JobDirectory, "restore", lambda self, *args: reads.append(args) or restore(self, *args))
    run_group, reports = key_group(storage)
    state = GroupState(watermark_ms=0)
    list(run_group((0,), iter([rows([f"k{i}" for i in range(500)], 50)]), state))
    assert decode_record(state.value, "state")[0] == 0  # no checkpoint yet: the whole table
    whole = len(state.value)

    state.watermark_ms = 120
    (out,) = run_group((0,), iter([rows(["k0", "new"], 150)]), state)
    written = storage.directory().store(0)
    assert written.times() == [100] and reports.value[0].checkpoint_ms == 100
    assert decode_record(state.value, "state")[0] == 100  # follows the checkpoint at 100
    assert reports.value[0].state_bytes == len(state.value) < whole / 5
    assert sorted(out["key"][0]) == ["k0", "new"]

    state.watermark_ms = 160
    (out,) = run_group((0,), iter([rows(["k0", "k1"], 170)]), state)  # the worker goes on from its table
    assert dict(zip(out["key"][0], out["value"][0])) == {"k0": 3, "k1": 2} and reads == []
    assert not reports.value[0].decoded
    monkeypatch.setattr(kept, "_KEPT", {})  # another Python worker, which keeps nothing
    (out,) = run_group((0,), iter([rows(["k0"], 172)]), state)
    assert totals(out) == {"k0": 4} and reports.value[0].decoded
    assert [args[:2] for args in reads] == [(0, 100)]
    (tmp_path / "job" / "checkpoints" / "group-00000").joinpath(written.path(100).rsplit("/", 1)[1]).unlink()
    state.watermark_ms = 175
    before = state.value
    (out,) = run_group((0,), iter([rows(["k1"], 178)]), state)
    assert totals(out) == {"k1": 3} and len(reads) == 1
    state.value = before  # the micro-batch again, in the worker that served it: the checkpoint is kept
    (out,) = run_group((0,), iter([rows(["k1"], 178)]), state)
    assert totals(out) == {"k1": 3} and len(reads) == 1
    state.watermark_ms = 180
    monkeypatch.setattr(kept, "_KEPT", {})  # another Python worker, which keeps no checkpoint
    with pytest.raises(MissingCheckpointError, match="no checkpoint at 100 ms") as raised:
        list(run_group((0,), iter([rows(["k2"], 190)]), state))
    assert "follows the checkpoint at 100 ms" in "\n".join(raised.value.__notes__)


def test_a_worker_reads_no_groups_checkpoint_while_it_serves_groups_of_two_jobs_in_turn(tmp_path, monkeypatch):
    monkeypatch.setattr(kept, "_KEPT", {})
    reads = []
    restore = JobDirectory.restore
    monkeypatch.setattr(JobDirectory, "restore",
                        lambda self, group, *args: reads.append((self.root, group)) or restore(self, group, *args))
    two_groups = Recovery(RecoveryPath.FRESH, 0, 0, key_groups=2)
    jobs = [key_group(JobStorage(str(tmp_path / name)), recovery=two_groups)[0] for name in ("a", "b")]
    states = {(job, slot): GroupState(watermark_ms=0) for job in range(2) for slot in range(2)}
    befores = {}
    for batch, time_ms in enumerate((50, 150, 170, 190)):  # the second writes each group's checkpoint at 100
        for (job, slot), state in states.items():
            state.watermark_ms = time_ms - 20 if batch else 0
            befores[job, slot] = state.value
            list(jobs[job]((slot,), iter([rows([f"k{slot}", "x"], time_ms)]), state))
    # The worker goes on from each group's table; replaying the last micro-batch, it
    # decodes the state before it from the checkpoint it keeps of each group of each job.
    for (job, slot), state in states.items():
        state.value = befores[job, slot]
        (out,) = jobs[job]((slot,), iter([rows([f"k{slot}", "x"], 190)]), state)
        assert totals(out) == {f"k{slot}": 4, "x": 4}
    assert reads == []


def test_a_worker_keeps_the_checkpoints_of_the_two_job_directories_it_served_last(monkeypatch):
    monkeypatch.setattr(kept, "_KEPT", {})
    first = kept.kept_checkpoint("dir-1", 0)
    assert kept.kept_checkpoint("dir-1", 0) is first and kept.kept_checkpoint("dir-1", 1) is not first
    kept.kept_checkpoint("dir-2", 0)
    assert kept.kept_checkpoint("dir-1", 0) is first  # dir-1 served last now
    kept.kept_checkpoint("dir-3", 0)
    assert kept.kept_checkpoint("dir-1", 0) is first
    assert list(kept._KEPT) == ["dir-3", "dir-1"]  # dir-2 is forgotten


def test_a_message_at_the_watermark_is_applied_and_one_before_it_is_late(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, reports = key_group(storage)
    state = GroupState(watermark_ms=99)  # Spark's watermark: 98
    list(run_group((0,), iter([rows(["a"], 98), rows(["a"], 99)]), state))
    assert (reports.value[0].late, reports.value[0].applied, reports.value[0].checkpoint_ms) == (1, 1, None)

    state.watermark_ms = 100  # reaches the boundary at 100: its checkpoint is due
    (out,) = run_group((0,), iter([rows(["a", "b"], 99), rows(["b"], 100)]), state)
    report = reports.value[0]
    assert (report.late, report.applied, report.watermark_ms, report.checkpoint_ms) == (2, 1, 100, 100)
    assert totals(out) == {"b": 1}
    checkpoint = read_table(storage.directory().store(0).read(100).data, "checkpoint at 100")
    assert dict(zip(*checkpoint.totals())) == {"a": 1}  # the messages before 100, not the one at 100


class LastValue(PersistentTask):
    """The value of each key's newest message, the later one on tied times: it sees the
    order the group folds its messages in."""

    def persistent_state(self):
        return NonWindowState(Last())

    def process_batch(self, messages):
        return [Timestamped(int(t), int(v)) for t, v in zip(messages["timestamp"], messages["value"])]


def _micro_batches(draw):
    """Micro-batches of one key group: their watermarks, their messages in one frame in
    the order the group folds them (by time, then source partition, then their order in
    it) and as Spark may hand them over: the partitions' rows in any order (each
    partition's in its own), cut into chunks with heartbeats among them."""
    messages = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(range(0, 400, 25)), st.integers(-9, 9),
                                  st.integers(0, 2)), min_size=1, max_size=40)
    batches = draw(st.lists(st.tuples(st.integers(0, 400), messages), min_size=1, max_size=3))
    watermarks = sorted(watermark for watermark, _ in batches)
    for watermark_ms, (_, batch) in zip(watermarks, batches):
        parts = draw(st.permutations(range(3)))
        shuffled = sorted(batch, key=lambda message: parts.index(message[3]))  # stable: each part in order
        cuts = sorted(draw(st.sets(st.integers(1, len(batch) - 1))) if len(batch) > 1 else set())
        edges = [0, *cuts, len(batch)]
        beats = draw(st.lists(st.integers(0, 2), min_size=len(edges) - 1, max_size=len(edges) - 1))
        chunks = [frame(shuffled[start:end], n) for start, end, n in zip(edges, edges[1:], beats)]
        yield watermark_ms, frame(sorted(batch, key=lambda message: (message[1], message[3]))), chunks


def outputs(rows) -> list[dict[str, list]]:
    """A key group's output rows (``stateful.output_schema``), each column a list."""
    return [{name: column[0].tolist() for name, column in row.items()} for row in rows]


@given(st.data())
def test_a_groups_rows_in_chunks_and_any_order_of_partitions_give_what_they_give_in_one_frame(data):
    """Spark hands a key group's rows over in Arrow batches of at most
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, the source partitions' rows
    in the order its shuffle fetched them: the group joins them, and folds them in one
    order whatever the order they came in."""
    with tempfile.TemporaryDirectory() as root:
        whole, chunked = JobStorage(f"{root}/whole"), JobStorage(f"{root}/chunked")
        (run_whole, whole_reports), (run_chunked, chunked_reports) = (
            key_group(storage, LastValue()) for storage in (whole, chunked))
        whole_state, chunked_state = GroupState(0), GroupState(0)
        for watermark_ms, one_frame, chunks in _micro_batches(data.draw):
            whole_state.watermark_ms = chunked_state.watermark_ms = watermark_ms
            expected = outputs(run_whole((0,), iter([one_frame]), whole_state))
            assert outputs(run_chunked((0,), iter(chunks), chunked_state)) == expected
            assert (dataclasses.replace(chunked_reports.value[0], checkpoint_seconds=0, worker_peak_bytes=0)
                    == dataclasses.replace(whole_reports.value[0], checkpoint_seconds=0, worker_peak_bytes=0))
            assert chunked_state.value == whole_state.value
        stores = whole.directory().store(0), chunked.directory().store(0)
        assert stores[1].times() == stores[0].times()
        assert [stores[1].recover(t) for t in stores[1].times()] == [stores[0].recover(t) for t in stores[0].times()]


def test_a_report_says_what_the_group_did_and_a_timeout_without_rows_checkpoints(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, reports = key_group(storage)
    state = GroupState(watermark_ms=50)
    list(run_group((0,), iter([rows(["a", "b"], 60), rows(["a"], 40)]), state))
    report = reports.value[0]
    assert 0 < report.worker_peak_bytes <= peak_resident_bytes()  # this process's, so far
    assert report == GroupReport(grp=0, applied=2, late=1, replayed=0, results=2, watermark_ms=50, max_time_ms=60,
                                 state_bytes=len(state.value), keys=2, worker_peak_bytes=report.worker_peak_bytes)

    state.watermark_ms = 200
    began = time.monotonic()
    assert list(run_group((0,), iter([]), state)) == []
    report = reports.value[0]
    store = storage.directory().store(0)
    assert dataclasses.replace(report, checkpoint_seconds=0, worker_peak_bytes=0) == GroupReport(
        grp=0, applied=0, late=0, replayed=0, results=0, watermark_ms=200, max_time_ms=-1,
        state_bytes=len(state.value), checkpoint_ms=200, checkpoint_bytes=os.path.getsize(store.path(200)),
        checkpoint_crc=report.checkpoint_crc, whole_ms=200, keys=2)  # its first: whole
    store.recover(200, crc=report.checkpoint_crc)  # the CRC32 of the checkpoint written
    assert 0 < report.checkpoint_seconds <= time.monotonic() - began


@pytest.mark.parametrize("interval_ms, watermark_ms, timeout_ms", [(100, 100, 198), (100, 0, 98), (2, 0, 1)])
def test_a_groups_timeout_is_where_sparks_watermark_passes_the_next_boundary(tmp_path, interval_ms, watermark_ms,
                                                                             timeout_ms):
    run_group, _ = key_group(JobStorage(str(tmp_path / "job")), interval_ms=interval_ms)
    state = GroupState(watermark_ms)
    list(run_group((0,), iter([rows(["a"], watermark_ms)]), state))
    assert state.timeout_ms == timeout_ms  # Spark's watermark is ours less 1 ms, and a timeout is at least 1 ms


def test_a_group_told_the_newest_event_time_checkpoints_at_the_next_micro_batchs_watermark(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, reports = key_group(storage, delay_ms=10)
    state = GroupState(watermark_ms=50)
    newest = spark_rows([Kind.NEWEST], [None], [270], [0], [None], [-1])
    (out,) = run_group((0,), iter([rows(["a", "b"], 60), rows(["a"], 255), newest]), state)
    assert totals(out) == {"a": 2, "b": 1}
    # The next micro-batch's watermark is 270 - 10 ms: every message before 200 ms is in
    # this one or late in the next.
    assert (reports.value[0].watermark_ms, reports.value[0].checkpoint_ms) == (50, 200)
    table = VectorizedCount().state_spec().restore(100, storage.directory().store(0).recover(200))
    assert dict(zip(*(part.tolist() for part in table.totals()))) == {"a": 1, "b": 1}  # not a at 255 ms
    assert state.timeout_ms == 298

    state.watermark_ms = 260  # Spark's, as computed from the same newest event time
    (out,) = run_group((0,), iter([rows(["b"], 260)]), state)
    assert totals(out) == {"b": 2} and reports.value[0].checkpoint_ms is None
    state.watermark_ms = 199  # a watermark before the checkpoint: its messages would be missing from it
    with pytest.raises(StateValueError, match=r"checkpointed at 200 ms, after this micro-batch's watermark 199 ms"):
        list(run_group((0,), iter([rows(["b"], 230)]), state))


def test_a_group_runs_with_the_watermark_the_driver_gave_and_reports_the_next_from_the_partition_behind(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, reports = key_group(storage, delay_ms=10)
    state = GroupState(watermark_ms=500)  # Spark's, ahead: one source partition read up to 510 ms
    newest = spark_rows([Kind.NEWEST] * 2, [None] * 2, [510, 180], [0] * 2, [None] * 2, [-1] * 2)
    with given_watermark(100):
        (out,) = run_group((0,), iter([rows(["a"], 150), rows(["b"], 99), newest]), state)
    assert totals(out) == {"a": 1}  # on time for the job, though behind Spark's watermark; b is late
    report = reports.value[0]
    assert (report.watermark_ms, report.late, report.next_watermark_ms, report.checkpoint_ms) == (100, 1, 170, 100)
    assert state.timeout_ms == 499  # the next boundary (200 ms) is behind Spark's watermark: it wakes as that moves


def test_a_group_of_a_query_without_timeouts_sets_none_and_checkpoints_as_one_with_them(tmp_path):
    newest = spark_rows([Kind.NEWEST], [None], [270], [0], [None], [-1])
    seen = []
    for timeouts in (True, False):
        storage = JobStorage(str(tmp_path / f"job-{timeouts}"))
        run_group, reports = key_group(storage, recovery=dataclasses.replace(FRESH, timeouts=timeouts), delay_ms=10)
        state = GroupState(watermark_ms=50, timeouts=timeouts)
        (out,) = run_group((0,), iter([rows(["a", "b"], 60), newest]), state)
        seen.append((totals(out), reports.value[0].checkpoint_ms, state.timeout_ms is not None))
    assert seen == [({"a": 1, "b": 1}, 200, True), ({"a": 1, "b": 1}, 200, False)]


def test_a_group_that_carries_no_state_leaves_sparks_state_alone(tmp_path):
    run_group, reports = key_group(JobStorage(str(tmp_path / "job")), carries=False)
    state = GroupState(watermark_ms=100)
    (out,) = run_group((0,), iter([rows(["a"], 150)]), state)
    assert totals(out) == {"a": 1}
    assert (state.value, state.timeout_ms, reports.value[0].state_bytes) == (None, None, 0)


def test_a_group_restored_from_the_clock_holds_its_checkpoint_and_drops_the_messages_before_it(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    first_run, _ = key_group(storage)
    state = GroupState(watermark_ms=0)
    list(first_run((0,), iter([rows(["a", "a"], 50), rows(["b"], 150)]), state))
    state.watermark_ms = 100
    list(first_run((0,), iter([]), state))  # the checkpoint at 100: a's two messages

    restored, reports = key_group(storage, recovery=Recovery(RecoveryPath.FROM_CLOCK, 1, 100, frozenset({0}),
                                                             key_groups=1))
    (out,) = restored((0,), iter([rows(["a"], 50), rows(["a", "b"], 150)]), GroupState(watermark_ms=100))
    assert totals(out) == {"a": 3, "b": 1}  # b's first message is after the checkpoint: replayed again
    assert (reports.value[0].replayed, reports.value[0].applied, reports.value[0].late) == (1, 2, 0)


def test_a_group_without_a_checkpoint_to_restore_starts_empty_at_the_restore_point(tmp_path):
    run_group, reports = key_group(JobStorage(str(tmp_path / "job")),
                                   recovery=Recovery(RecoveryPath.FROM_CLOCK, 1, 100, key_groups=1))
    (out,) = run_group((0,), iter([rows(["a"], 50), rows(["a"], 150)]), GroupState(watermark_ms=0))
    assert totals(out) == {"a": 1}
    report = reports.value[0]
    assert (report.replayed, report.applied, report.late, report.watermark_ms) == (1, 1, 0, 100)


def test_bad_records_and_late_messages_are_the_groups_dead_letters(tmp_path):
    bad = BadRecord("in/a.jsonl line 2", "{", "not JSON")
    run_group, reports = key_group(JobStorage(str(tmp_path / "job")), mode=BadRecords.DEAD_LETTER,
                                   late_records=LateRecords.OUTPUT)
    (out,) = run_group((0,), iter([rows(["a"], 99), marked(bad), rows(["b"], 100)]), GroupState(watermark_ms=100))
    assert totals(out) == {"b": 1}
    assert [BadRecord.from_json(text) for text in out[DEAD_LETTERS][0]] == [bad, BadRecord.late("a", 99, 1, 100)]
    report = reports.value[0]
    assert (report.bad_records, report.late_records, report.late, report.applied) == (1, 1, 1, 1)
    assert report.max_time_ms == 100

    list(run_group((0,), iter([marked(bad)]), GroupState(watermark_ms=100)))
    assert reports.value[0].max_time_ms == -1  # a bad record has no event time


def test_a_bad_record_fails_the_groups_task_with_the_record_written_for_the_driver_to_read(tmp_path):
    bad = BadRecord("in/a.jsonl line 2", "{", "not JSON")
    storage = JobStorage(str(tmp_path / "job"))
    run_group, _ = key_group(storage)
    with pytest.raises(BadRecordError) as raised:
        list(run_group((0,), iter([rows(["a"], 150), marked(bad)]), GroupState(watermark_ms=100)))
    assert raised.value.record == bad
    assert storage.directory().take_failing_records() == [bad]


def test_a_group_crashes_at_its_points_once_its_checkpoint_is_durable_then_once_spark_has_its_state(tmp_path,
                                                                                                   monkeypatch):
    storage, state, reached = JobStorage(str(tmp_path / "job")), GroupState(watermark_ms=100), []
    monkeypatch.setattr(stateful, "crash_point",
                        lambda point: reached.append((point, storage.directory().store(0).times(), state.exists)))
    run_group, _ = key_group(storage)
    list(run_group((0,), iter([rows(["a"], 150)]), state))
    assert reached == [(CrashPoint.CHECKPOINTS, [100], False), (CrashPoint.GROUP, [100], True)]


def test_a_groups_checkpoints_after_its_first_hold_changes_and_read_back_as_its_state_at_their_times(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, _ = key_group(storage)
    state, sent = GroupState(watermark_ms=0), []
    for watermark_ms, keys, time_ms in [(0, ["a", "b"], 50), (120, ["a", "c"], 150), (220, ["c"], 250),
                                        (320, ["d"], 330)]:
        state.watermark_ms = watermark_ms
        list(run_group((0,), iter([rows(keys, time_ms)]), state))
        sent += [(key, time_ms) for key in keys]
    store = storage.directory().store(0)
    stored = [store.read(time_ms) for time_ms in store.times()]
    assert [s.time_ms for s in stored] == [100, 200, 300]
    assert [s.base for s in stored] == [None, (100, stored[0].crc), (200, stored[1].crc)]
    for checkpoint in stored:
        table = VectorizedCount().state_spec().restore(100, store.recover(checkpoint.time_ms))
        counted = {key: sum(1 for k, t in sent if k == key and t < checkpoint.time_ms) for key, _ in sent}
        assert dict(zip(*(part.tolist() for part in table.totals()))) == {k: n for k, n in counted.items() if n}


def test_a_checkpoint_that_cannot_be_written_fails_the_task_saying_how_to_go_on(tmp_path, monkeypatch):
    def refuse(store, time_ms, data, base=None):
        raise StorageError("write", store.path(time_ms), "No space left on device")

    monkeypatch.setattr(CheckpointStore, "persist", refuse)
    storage = JobStorage(str(tmp_path / "job"))
    run_group, _ = key_group(storage)
    with pytest.raises(StorageError) as raised:
        list(run_group((0,), iter([rows(["a"], 150)]), GroupState(watermark_ms=100)))
    (note,) = raised.value.__notes__
    assert "key group 0's checkpoint at 100 ms is not durable" in note and storage.directory().root in note


def test_a_group_folds_tied_messages_by_source_partition_and_sends_json_results_as_text(tmp_path):
    run_group, _ = key_group(JobStorage(str(tmp_path / "job")), LastValue())
    # The shuffle fetched partition 1's rows first; partition 0's come first in time order.
    (out,) = run_group((0,), iter([frame([("a", 50, 1, 1)]), frame([("a", 50, 2, 0)])]), GroupState(watermark_ms=0))
    assert list(out.columns) == ["key", "window_start", "window_end", "value", DEAD_LETTERS]
    assert totals(out) == {"a": "1"}  # partition 1's message is the later one


def test_a_job_without_checkpoints_writes_none_and_its_groups_state_is_whole(tmp_path):
    storage = JobStorage(str(tmp_path / "job"))
    run_group, reports = key_group(storage, checkpoints=False)
    state = GroupState(watermark_ms=0)
    list(run_group((0,), iter([rows(["a"], 50)]), state))
    state.watermark_ms = 150
    (out,) = run_group((0,), iter([rows(["a"], 150)]), state)
    assert totals(out) == {"a": 2}
    assert (reports.value[0].checkpoint_ms, storage.directory().store(0).times()) == (None, [])
    assert decode_record(state.value, "state")[0] == 0  # no checkpoint to follow
