"""Storage faults through Hadoop's FileSystem API, the way the Spark runtime writes
checkpoints and the clock: the same clear errors as the local file system (no Java
stack), and a job whose checkpoints hit a full disk keeps a durable clock and, once
space is freed, continues with exact counts."""

from __future__ import annotations

import collections
import json
import os
import sqlite3
from dataclasses import replace

import pytest

from persistent.runtime.recovery import RecoveryPath, plan
from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore, verify_clock
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem
from persistent.storage.hadoop_fs import HadoopFileSystem
from persistent.storage.job_directory import JobDirectory
from state.errors import ClockError, CorruptCheckpointError, NoSpaceError, NotWritableError, StorageError

pytestmark = pytest.mark.spark

GROUPS = (0, 1)


def commit(directory: JobDirectory, time_ms: int) -> None:
    """Each group's checkpoint at ``time_ms`` made durable, then the clock: the runtime's order."""
    for group in GROUPS:
        directory.store(group).persist(time_ms, f"group {group} at {time_ms} ".encode() * 40)
    directory.clock.advance(time_ms, {f"group-{g:05d}": time_ms for g in GROUPS})


def assert_durable_clock(directory: JobDirectory, clock_ms: int) -> None:
    record = directory.clock.read()
    assert record.clock_ms == clock_ms
    verify_clock(record, lambda task: CheckpointStore(directory.fs, directory.checkpoints, task))


def temp_files(root) -> list[str]:
    return [name for _, _, names in os.walk(root) for name in names if name.startswith(TEMP_PREFIX)]


@pytest.fixture
def hadoop(spark):
    return lambda root: JobDirectory(HadoopFileSystem(spark, str(root)), str(root))


def test_a_full_disk_under_hadoop_fails_naming_the_file_and_keeps_the_clock(hadoop, tmp_path, mounts):
    directory = hadoop(mounts.tmpfs(str(tmp_path / "job"), size="64k"))
    commit(directory, 1000)
    filler = mounts.fill(directory.root)
    with pytest.raises(NoSpaceError) as raised:
        commit(directory, 2000)
    assert raised.value.path == directory.store(0).path(2000)
    assert "no space left on the file system holding" in str(raised.value)
    assert "Py4J" not in str(raised.value) and "\tat " not in str(raised.value)
    assert temp_files(directory.root) == [] and directory.store(0).times() == [1000]
    assert_durable_clock(directory, 1000)

    os.unlink(filler)
    for group in GROUPS:
        directory.store(group).persist(2000, b"x" * 100)
    mounts.fill(directory.root)
    with pytest.raises(NoSpaceError) as raised:
        directory.clock.advance(2000, {f"group-{g:05d}": 2000 for g in GROUPS})
    assert raised.value.path == directory.clock.path and temp_files(directory.root) == []
    assert_durable_clock(directory, 1000)

    os.unlink(filler)
    commit(directory, 2000)
    assert_durable_clock(directory, 2000)
    # The mount's teardown fails if a failed write left a file open.


def test_a_read_only_checkpoint_directory_under_hadoop_fails_naming_it(hadoop, tmp_path, mounts):
    directory = hadoop(tmp_path / "job")
    commit(directory, 1000)
    mounts.read_only(directory.checkpoints)
    with pytest.raises(NotWritableError) as raised:
        commit(directory, 2000)
    assert raised.value.path == directory.store(0).path(2000)
    assert f"{directory.store(0).directory} is not writable" in str(raised.value)
    with pytest.raises(NotWritableError, match=f"cannot write {directory.store(2).path(2000)}: .* not writable"):
        directory.store(2).persist(2000, b"a new task")
    with pytest.raises(NotWritableError, match=f"cannot delete {directory.store(0).path(1000)}"):
        directory.fs.delete(directory.store(0).path(1000))
    assert_durable_clock(directory, 1000)

    mounts.writable(directory.checkpoints)
    commit(directory, 2000)
    assert_durable_clock(directory, 2000)


def test_damaged_records_read_through_hadoop_are_named_with_the_remedy(hadoop, tmp_path):
    directory = hadoop(tmp_path / "job")
    commit(directory, 1000)
    commit(directory, 2000)
    path = directory.store(1).path(2000)
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\xff")
    with pytest.raises(CorruptCheckpointError, match=f"corrupt record {path}: checksum mismatch.*rewind the clock"):
        directory.restore(1, 2000)
    with open(path, "r+b") as f:
        f.truncate(20)
    with pytest.raises(CorruptCheckpointError, match=rf"corrupt record {path}: 20 bytes .*\(torn write\?\)"):
        directory.restore(1, 2000)

    os.unlink(directory.clock.path)
    with pytest.raises(ClockError, match=f"clock file {directory.clock.path} is missing.*ClockStore.rewind"):
        plan(directory, 2)
    directory.clock.rewind(1000)
    for group in GROUPS:
        directory.store(group).delete_after(1000)
    restart = plan(directory, 2)
    assert (restart.path, restart.floor_ms) == (RecoveryPath.FROM_CLOCK, 1000)


@pytest.mark.parametrize("local_rename", [True, False], ids=["local-rename", "file-context-rename"])
def test_a_write_replaces_the_file_atomically_or_fails_naming_it(spark, tmp_path, local_rename):
    fs = HadoopFileSystem(spark, str(tmp_path))
    # file:// renames with the local file system's rename; hdfs:// and the rest with
    # FileContext's: both run here on the local file system.
    fs._local = local_rename
    path = str(tmp_path / "clock")
    fs.write_atomic(path, b"one")
    fs.write_atomic(path, b"two")
    assert fs.read_bytes(path) == b"two"
    (tmp_path / "taken" / "inside").mkdir(parents=True)
    with pytest.raises(StorageError, match=f"cannot write {tmp_path / 'taken'}"):
        fs.write_atomic(str(tmp_path / "taken"), b"three")
    assert temp_files(tmp_path) == []


def test_a_local_rename_makes_its_directory_entry_durable(spark, tmp_path, fsyncs):
    fs = HadoopFileSystem(spark, str(tmp_path))
    fs.write_atomic(str(tmp_path / "clock" / "clock"), b"one")
    assert fsyncs == [str(tmp_path / "clock")]  # the file itself: hsync in the JVM
    fs.replace(str(tmp_path / "clock" / "clock"), str(tmp_path / "moved" / "clock"))
    assert fsyncs[-1] == str(tmp_path / "moved")


def test_other_java_errors_are_storage_errors_naming_the_path_not_py4j_errors(spark, tmp_path):
    fs = HadoopFileSystem(spark, str(tmp_path))
    with pytest.raises(StorageError) as raised:
        fs.read_bytes(str(tmp_path))  # a directory
    assert str(raised.value).startswith(f"cannot read {tmp_path}: java.io.FileNotFoundException")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(StorageError, match="cannot open the file system of nosuchscheme://x/y: .*nosuchscheme"):
        HadoopFileSystem(spark, "nosuchscheme://x/y")


def test_a_job_on_a_full_disk_stops_with_a_durable_clock_and_continues_exactly(spark, tmp_path, mounts):
    import count
    from pyspark.errors import StreamingQueryException

    checkpoint, inputs = tmp_path / "ck", tmp_path / "in"
    inputs.mkdir()
    keys = [("a", "b", "c", "a", "b", "a")[i % 6] for i in range(400)]

    def add_input(part: int) -> None:
        lines = (json.dumps({"key": keys[i], "timestamp": i + 1}) for i in range(part * 100, (part + 1) * 100))
        (inputs / f"part-{part}.jsonl").write_text("\n".join(lines) + "\n")

    def run():
        args = count.parser().parse_args(
            ["--checkpoint", str(checkpoint), "--output", f"sqlite://{tmp_path / 'out.db'}", "--input",
             str(inputs), "--available-now", "--key-groups", "2", "--interval-ms", "50"]
        )
        job = count.build_job(args)
        job = replace(job, on_progress=None)
        return job.run(spark)

    def durable_clock() -> int:
        fs = LocalFileSystem()
        record = ClockStore(fs, str(checkpoint / "clock")).read()
        verify_clock(record, lambda task: CheckpointStore(fs, str(checkpoint / "checkpoints"), task))
        return record.clock_ms

    checkpoints = mounts.tmpfs(str(checkpoint / "checkpoints"), size="1m")
    add_input(0)
    run()
    clock_before = durable_clock()

    filler = mounts.fill(checkpoints)
    add_input(1)
    with pytest.raises(StreamingQueryException) as raised:
        run()
    message = str(raised.value)
    assert "NoSpaceError: cannot write " + checkpoints in message and "no space left on the file system" in message
    assert "the clock names durable checkpoints only" in message and "(path A)" in message
    assert durable_clock() == clock_before and temp_files(checkpoints) == []

    os.unlink(filler)
    add_input(2)
    assert run().recovery.path is RecoveryPath.SAME_CHECKPOINT
    assert durable_clock() > clock_before
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == collections.Counter(keys[:300])
