"""A full disk and a directory that refuses writes, under the checkpoint and clock stores.

Each ends in an error naming the file and what to do; the previous checkpoints and
the clock stay as they were and durable, and once the storage is fixed the same
writes succeed. Torn and corrupt records are in ``test_checkpoint_store.py`` and
``test_clock_store.py``; what a job does with them is in
``tests/persistent/test_recovery_faults.py``.
"""

from __future__ import annotations

import os

import pytest

from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore, verify_clock
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem, storage_error
from state.errors import NoSpaceError, NotWritableError, StorageError

TASKS = ("group-00000", "group-00001")


class Job:
    """The checkpoints and the clock of two tasks under ``root``, written in the runtime's order."""

    def __init__(self, root: str) -> None:
        self.fs = LocalFileSystem()
        self.checkpoints = os.path.join(root, "checkpoints")
        self.clock = ClockStore(self.fs, os.path.join(root, "clock"))

    def store(self, task: str) -> CheckpointStore:
        return CheckpointStore(self.fs, self.checkpoints, task)

    def commit(self, time_ms: int) -> None:
        """Every task's checkpoint at ``time_ms`` made durable, then the clock advanced to it."""
        for task in TASKS:
            self.store(task).persist(time_ms, state(task, time_ms))
        self.clock.advance(time_ms, dict.fromkeys(TASKS, time_ms))

    def assert_intact_at(self, time_ms: int) -> None:
        """The clock is at ``time_ms``, and every task's checkpoint there reads back."""
        record = self.clock.read()
        assert record.clock_ms == time_ms
        verify_clock(record, self.store)
        assert {task: self.store(task).read(time_ms).data for task in TASKS} == {
            task: state(task, time_ms) for task in TASKS
        }

    def temp_files(self) -> list[str]:
        return [
            os.path.join(directory, name)
            for directory, _, names in os.walk(os.path.dirname(self.checkpoints))
            for name in names
            if name.startswith(TEMP_PREFIX)
        ]


def state(task: str, time_ms: int) -> bytes:
    return f"{task} at {time_ms} ms ".encode() * 40


@pytest.fixture
def small_disk(tmp_path, mounts) -> Job:
    """A job on its own 64 KiB tmpfs, with a durable clock at 1000 ms."""
    job = Job(mounts.tmpfs(str(tmp_path / "job"), size="64k"))
    job.commit(1000)
    return job


@pytest.fixture
def job(tmp_path) -> Job:
    made = Job(str(tmp_path / "job"))
    made.commit(1000)
    return made


def test_a_full_disk_fails_the_checkpoint_naming_it_and_keeps_the_durable_clock(small_disk, mounts) -> None:
    filler = mounts.fill(os.path.dirname(small_disk.checkpoints))
    store = small_disk.store(TASKS[0])
    with pytest.raises(NoSpaceError) as raised:
        store.persist(2000, state(TASKS[0], 2000))
    assert raised.value.path == store.path(2000)
    assert "no space left on the file system holding" in str(raised.value)
    assert "free space there" in str(raised.value)
    assert store.times() == [1000] and small_disk.temp_files() == []
    small_disk.assert_intact_at(1000)

    os.unlink(filler)
    small_disk.commit(2000)
    small_disk.assert_intact_at(2000)


def test_a_full_disk_fails_the_clock_naming_it_and_keeps_the_previous_clock(small_disk, mounts) -> None:
    for task in TASKS:
        small_disk.store(task).persist(2000, state(task, 2000))
    history = small_disk.clock.history()
    filler = mounts.fill(os.path.dirname(small_disk.checkpoints))
    with pytest.raises(NoSpaceError) as raised:
        small_disk.clock.advance(2000, dict.fromkeys(TASKS, 2000))
    assert raised.value.path == small_disk.clock.path
    assert small_disk.clock.history() == history and small_disk.temp_files() == []
    small_disk.assert_intact_at(1000)

    os.unlink(filler)
    small_disk.clock.advance(2000, dict.fromkeys(TASKS, 2000))
    small_disk.assert_intact_at(2000)


def test_a_read_only_checkpoint_directory_fails_the_write_and_the_clock_stays(job, mounts) -> None:
    mounts.read_only(job.checkpoints)
    with pytest.raises(NotWritableError) as raised:
        job.commit(2000)
    store = job.store(TASKS[0])
    assert raised.value.path == store.path(2000)
    assert f"{store.directory} is not writable" in str(raised.value)
    assert "make it writable" in str(raised.value)
    # A task's first checkpoint must create its directory: refused as well.
    new_task = job.store("group-00002")
    with pytest.raises(NotWritableError) as raised:
        new_task.persist(2000, b"new")
    assert (raised.value.action, raised.value.path) == ("write", new_task.path(2000))
    with pytest.raises(NotWritableError) as raised:
        job.fs.delete(store.path(1000))
    assert (raised.value.action, raised.value.path) == ("delete", store.path(1000))
    job.assert_intact_at(1000)

    mounts.writable(job.checkpoints)
    job.commit(2000)
    job.assert_intact_at(2000)


def test_a_read_only_clock_directory_fails_the_advance_and_the_clock_stays(job, mounts) -> None:
    mounts.read_only(os.path.dirname(job.clock.path))
    with pytest.raises(NotWritableError) as raised:
        job.commit(2000)
    assert raised.value.path == job.clock.path
    # The checkpoints at 2000 are durable; the clock still names those at 1000.
    job.assert_intact_at(1000)
    assert job.store(TASKS[0]).times() == [1000, 2000]

    mounts.writable(os.path.dirname(job.clock.path))
    job.clock.advance(2000, dict.fromkeys(TASKS, 2000))
    job.assert_intact_at(2000)


@pytest.mark.parametrize(
    ("action", "detail", "kind"),
    [
        ("write", "org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: The DiskSpace quota of /jobs is "
         "exceeded", NoSpaceError),
        ("write", "org.apache.hadoop.security.AccessControlException: Permission denied: user=etl, access=WRITE",
         NotWritableError),
        ("delete", "org.apache.hadoop.hdfs.server.namenode.SafeModeException: Cannot delete /jobs/a. Name node "
         "is in safe mode.", NotWritableError),
        ("create directory", "Disk quota exceeded", NoSpaceError),
        ("write", "java.io.IOException: Input/output error", StorageError),
        ("read", "java.io.FileNotFoundException: /jobs/a/clock/clock (Permission denied)", StorageError),
    ],
)
def test_the_kind_of_storage_error_follows_the_file_systems_words(action, detail, kind) -> None:
    error = storage_error(action, "/jobs/a/clock/clock", detail)
    assert type(error) is kind and (error.action, error.directory) == (action, "/jobs/a/clock")
    assert str(error).startswith(f"cannot {action} /jobs/a/clock/clock: ") and detail in str(error)


def test_storage_errors_are_os_errors_that_survive_pickling() -> None:
    import pickle

    error = NoSpaceError("write", "/jobs/a/clock/clock", "No space left on device")
    assert isinstance(error, OSError) and isinstance(error, StorageError)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.path, str(again)) == (NoSpaceError, error.path, str(error))
