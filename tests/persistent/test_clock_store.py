"""``ClockStore``: monotone advances, history, rewinds, corruption, and ``verify_clock``."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from persistent.storage.checkpoint_store import CheckpointStore, decode_record, encode_record
from persistent.storage.clock_store import ClockRecord, ClockStore, verify_clock
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError, StateValueError


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "job")


def open_clock(root: str, keep: int = 10) -> ClockStore:
    wall_ms = itertools.count(1_000)
    return ClockStore(LocalFileSystem(), root, keep=keep, wall_clock_ms=lambda: next(wall_ms))


@pytest.fixture
def clock(root: str) -> ClockStore:
    return open_clock(root)


def corrupt_file(clock: ClockStore, path: str, change) -> None:
    clock.fs.write_atomic(path, change(clock.fs.read_bytes(path)))


def test_missing_clock_reads_as_none_for_a_fresh_job(clock: ClockStore) -> None:
    assert clock.read() is None
    assert clock.history() == []


def test_advanced_clock_reads_back_after_reopening(clock: ClockStore, root: str) -> None:
    written = clock.advance(20, {"group-0001": 30, "group-0000": 20})
    assert written == ClockRecord(
        clock_ms=20, task_clocks={"group-0000": 20, "group-0001": 30}, written_at_ms=1_000, sequence=1
    )
    assert open_clock(root).read() == written


def test_clock_moves_forward_monotonically(clock: ClockStore) -> None:
    for clock_ms in (10, 20, 50):
        clock.advance(clock_ms, {"a": clock_ms, "b": clock_ms + 10})
    assert clock.read().clock_ms == 50
    assert [r.sequence for r in clock.history()] == [1, 2, 3]


def test_clock_moving_backwards_raises_and_keeps_the_current_clock(clock: ClockStore) -> None:
    clock.advance(20, {"a": 20})
    with pytest.raises(ClockError, match="backwards from 20 to 10 ms.*rewind") as caught:
        clock.advance(10, {"a": 10})
    assert clock.path in str(caught.value)
    assert clock.read().clock_ms == 20


def test_advancing_to_the_current_clock_again_is_idempotent(clock: ClockStore) -> None:
    first = clock.advance(20, {"a": 20, "b": 30})
    assert clock.advance(20, {"b": 30, "a": 20}) == first
    assert clock.history() == [first]


def test_same_clock_with_newer_task_clocks_writes_a_new_record(clock: ClockStore) -> None:
    clock.advance(20, {"a": 20, "b": 30})
    second = clock.advance(20, {"a": 20, "b": 40})
    assert second.sequence == 2 and clock.read() == second


def test_clock_must_equal_the_lowest_task_clock(clock: ClockStore) -> None:
    with pytest.raises(ClockError, match="lowest task clock, 20 ms of task 'a'"):
        clock.advance(30, {"a": 20, "b": 30})
    assert clock.read() is None


def test_a_job_without_tasks_may_set_any_clock(clock: ClockStore) -> None:
    assert clock.advance(30, {}).task_clocks == {}


def test_task_clocks_never_move_backwards(clock: ClockStore) -> None:
    clock.advance(20, {"a": 20, "b": 40})
    with pytest.raises(ClockError, match=r"'b': \(40, 30\)"):
        clock.advance(20, {"a": 20, "b": 30})


@pytest.mark.parametrize(
    ("clock_ms", "task_clocks", "match"),
    [(-1, {}, "clock_ms must be"), (1.0, {}, "clock_ms must be"), (0, {"a": -5}, "task_clocks"),
     (0, {"": 0}, "task names")],
)
def test_bad_arguments_are_refused(clock: ClockStore, clock_ms, task_clocks, match: str) -> None:
    with pytest.raises(StateValueError, match=match):
        clock.advance(clock_ms, task_clocks)


@pytest.mark.parametrize("keep", [0, True, 1.0])
def test_keep_must_be_a_positive_int(root: str, keep) -> None:
    with pytest.raises(StateValueError, match="keep must be an int >= 1"):
        ClockStore(LocalFileSystem(), root, keep=keep)


def test_by_default_the_history_keeps_ten_records_and_may_keep_one(root: str) -> None:
    for keep, clock in ((10, ClockStore(LocalFileSystem(), root)), (1, open_clock(root + "-one", keep=1))):
        for clock_ms in range(10, 130, 10):
            clock.advance(clock_ms, {"a": clock_ms})
        assert [r.clock_ms for r in clock.history()] == list(range(130 - 10 * keep, 130, 10))


def test_the_clock_and_its_history_are_files_of_one_record_each(clock: ClockStore, root: str) -> None:
    clock.advance(20, {"b": 30, "a": 20})
    raw = clock.fs.read_bytes(clock.fs.join(root, "clock"))
    assert raw == clock.fs.read_bytes(clock.fs.join(root, "clock-history", f"{1:020d}.clock"))
    assert decode_record(raw, "clock") == (20, b'{"clock_ms":20,"sequence":1,"task_clocks":{"a":20,"b":30},'
                                               b'"written_at_ms":1000}')


def test_a_record_is_written_at_the_wall_clocks_time_in_milliseconds(root: str) -> None:
    before = time.time_ns() // 1_000_000
    written = ClockStore(LocalFileSystem(), root).advance(10, {"a": 10})
    assert before <= written.written_at_ms <= time.time_ns() // 1_000_000


def test_history_keeps_the_last_records_oldest_first(root: str) -> None:
    clock = open_clock(root, keep=3)
    for clock_ms in range(10, 70, 10):
        clock.advance(clock_ms, {"a": clock_ms})
    assert [(r.sequence, r.clock_ms) for r in clock.history()] == [(4, 40), (5, 50), (6, 60)]
    assert len(clock.fs.list_names(clock.history_directory)) == 3


def test_rewind_restores_a_clock_from_history_and_sets_every_task_to_it(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10, "b": 20})
    clock.advance(20, {"a": 20, "b": 30})
    rewound = clock.rewind(10)
    assert (rewound.clock_ms, dict(rewound.task_clocks), rewound.sequence) == (10, {"a": 10, "b": 10}, 3)
    assert clock.read() == rewound == clock.history()[-1]
    clock.advance(10, {"a": 10, "b": 10})  # replays after the rewind are accepted
    clock.advance(20, {"a": 20, "b": 20})


def test_rewind_to_a_clock_not_in_history_raises(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10})
    with pytest.raises(ClockError, match=r"not in its history \(clocks in history: \[10\] ms\)"):
        clock.rewind(15)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda raw: raw[:20], "torn"),
        (lambda raw: raw[:-3] + b"}}}", "checksum"),
        (lambda raw: b"not a record at all, clearly", "magic"),
        (lambda raw: encode_record(10, b"not json"), "Expecting value"),
        (lambda raw: encode_record(10, b'{"clock_ms": 10}'), "missing"),
        (lambda raw: encode_record(99, raw[26:]), "header says 99 ms, body says 10 ms"),
    ],
)
def test_corrupt_clock_file_raises_clock_error_naming_path_and_remedy(
    clock: ClockStore, damage, problem: str
) -> None:
    clock.advance(10, {"a": 10})
    corrupt_file(clock, clock.path, damage)
    with pytest.raises(ClockError, match=problem) as caught:
        clock.read()
    message = str(caught.value)
    assert clock.path in message and "rewind" in message
    with pytest.raises(ClockError):
        clock.advance(20, {"a": 20})


def test_rewind_repairs_a_corrupt_clock_file(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10})
    clock.advance(20, {"a": 20})
    corrupt_file(clock, clock.path, lambda raw: raw[:-1])
    repaired = clock.rewind(20)
    assert clock.read() == repaired and repaired.sequence == 3


def test_missing_clock_file_with_history_left_raises(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10})
    clock.fs.delete(clock.path)
    with pytest.raises(ClockError, match="missing.*rewind") as caught:
        clock.read()
    assert clock.path in str(caught.value)


def test_corrupt_history_entry_raises_naming_the_entry_and_how_to_drop_it(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10})
    entry = clock.fs.join(clock.history_directory, clock.fs.list_names(clock.history_directory)[0])
    corrupt_file(clock, entry, lambda raw: raw[:-1])
    with pytest.raises(ClockError, match=f"{entry}.*delete {entry}"):
        clock.history()


def test_temp_files_of_unfinished_clock_writes_are_ignored(clock: ClockStore, root: str) -> None:
    written = clock.advance(10, {"a": 10})
    entry = clock.fs.list_names(clock.history_directory)[0]
    for directory, name in ((root, "clock"), (clock.history_directory, entry)):
        clock.fs.write_atomic(clock.fs.join(directory, f"{TEMP_PREFIX}crash-{name}"), b"PCK")
    reopened = open_clock(root)
    assert reopened.read() == written and reopened.history() == [written]


def test_clock_record_is_immutable() -> None:
    record = ClockRecord(clock_ms=10, task_clocks={"a": 10}, written_at_ms=0, sequence=1)
    with pytest.raises(TypeError):
        record.task_clocks["a"] = 20  # type: ignore[index]


class TestVerifyClock:
    @pytest.fixture
    def stores(self, tmp_path) -> dict[str, CheckpointStore]:
        fs = LocalFileSystem()
        return {task: CheckpointStore(fs, str(tmp_path / "checkpoints"), task) for task in ("a", "b")}

    @pytest.fixture
    def record(self, clock: ClockStore, stores: dict[str, CheckpointStore]) -> ClockRecord:
        stores["a"].persist(20, b"a@20")
        stores["b"].persist(20, b"b@20")
        stores["b"].persist(30, b"b@30")
        return clock.advance(20, {"a": 20, "b": 30})

    def test_passes_when_every_task_holds_a_readable_checkpoint_at_the_clock(self, record, stores) -> None:
        verify_clock(record, stores.__getitem__)

    def test_raises_when_a_task_lacks_the_checkpoint_at_the_clock(self, record, stores) -> None:
        stores["b"].retain(30)
        with pytest.raises(MissingCheckpointError) as missing:
            verify_clock(record, stores.__getitem__)
        assert (missing.value.task, missing.value.timestamp_ms) == ("b", 20)

    def test_raises_when_the_checkpoint_at_the_clock_is_corrupt(self, record, stores) -> None:
        path = stores["a"].path(20)
        stores["a"].fs.write_atomic(path, b"PCKP")
        with pytest.raises(CorruptCheckpointError, match=path):
            verify_clock(record, stores.__getitem__)


@pytest.mark.parametrize("move", [lambda clock: clock.rewind(-1), lambda clock: clock.restart(-1, {})])
def test_a_clock_to_move_to_that_is_no_time_is_refused_naming_it(clock: ClockStore, move) -> None:
    clock.advance(10, {"a": 10})
    with pytest.raises(StateValueError, match="clock_ms must be"):
        move(clock)


def test_a_restart_starts_the_history_over(clock: ClockStore) -> None:
    for clock_ms in (10, 20, 30):
        clock.advance(clock_ms, {"a": clock_ms})
    restarted = clock.restart(30, {"a": 30, "b": 30})
    assert clock.history() == [restarted] and clock.read() == restarted


def test_a_restart_takes_a_clock_at_the_lowest_task_clock_only(clock: ClockStore) -> None:
    with pytest.raises(ClockError, match="must equal the lowest task clock"):
        clock.restart(20, {"a": 10, "b": 20})
    assert clock.read() is None


@pytest.mark.parametrize("move", [lambda clock: clock.advance(30, {"a": 30}),
                                  lambda clock: clock.restart(20, {"a": 20, "b": 20})])
def test_a_record_after_a_crash_that_lost_the_newest_history_entry_is_numbered_after_the_clock(
    clock: ClockStore, move
) -> None:
    clock.advance(10, {"a": 10})
    clock.advance(20, {"a": 20})
    newest = clock.fs.list_names(clock.history_directory)[-1]
    clock.fs.delete(clock.fs.join(clock.history_directory, newest))  # a crash between the clock and its entry
    assert move(clock).sequence == 3


@pytest.mark.parametrize("fields, message", [
    ({"clock_ms": -1}, "clock_ms must be"),
    ({"written_at_ms": -1}, "written_at_ms must be"),
    ({"sequence": 0}, "sequence must be an int >= 1, got 0"),
    ({"sequence": True}, "sequence must be an int >= 1, got True"),
    ({"sequence": 1.0}, "sequence must be an int >= 1, got 1.0"),
    ({"task_clocks": [("a", 1)]}, "task_clocks must map task names to ms, got list"),
])
def test_a_clock_record_refuses_bad_fields_naming_them(fields, message) -> None:
    with pytest.raises(StateValueError, match=message):
        ClockRecord(**{"clock_ms": 1, "task_clocks": {"a": 1}, "written_at_ms": 1, "sequence": 1, **fields})


def test_a_clock_record_takes_numpy_ints_as_ints() -> None:
    record = ClockRecord(clock_ms=np.int64(5), task_clocks={"a": np.int64(5)}, written_at_ms=np.int64(7), sequence=1)
    assert [type(value) for value in (record.clock_ms, record.task_clocks["a"], record.written_at_ms)] == [int] * 3
    assert ClockRecord.from_bytes(record.to_bytes(), "clock", "") == record


def test_a_clock_off_the_lowest_task_clock_names_the_slowest_task(clock: ClockStore) -> None:
    with pytest.raises(ClockError, match="the lowest task clock, 20 ms of task 'b'"):
        clock.advance(30, {"a": 30, "b": 20})


@pytest.mark.parametrize("clock_ms", [0, 10])
def test_a_new_task_joins_the_clock_at_its_first_checkpoint(clock: ClockStore, clock_ms: int) -> None:
    clock.advance(clock_ms, {"a": clock_ms})
    assert clock.advance(clock_ms, {"a": clock_ms, "b": clock_ms}).task_clocks == {"a": clock_ms, "b": clock_ms}


def test_a_history_entry_of_another_sequence_is_refused_naming_it(clock: ClockStore) -> None:
    clock.advance(10, {"a": 10})
    first = clock.fs.join(clock.history_directory, clock.fs.list_names(clock.history_directory)[0])
    second = clock.fs.join(clock.history_directory, f"{2:020d}.clock")
    clock.fs.write_atomic(second, clock.fs.read_bytes(first))
    with pytest.raises(ClockError, match=f"{second} holds sequence 1; delete {second} to drop this entry"):
        clock.history()


def test_a_fresh_job_has_no_clock_to_restore(clock: ClockStore) -> None:
    assert clock.oldest_restorable_ms() is None
