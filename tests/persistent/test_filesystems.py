"""The ``FileSystem`` contract every byte a job keeps relies on, held by each file system
a job directory can be on: the local one (``file://``), HDFS over WebHDFS (``hdfs://``,
the ``hdfs_dir`` fixture's MiniDFSCluster) and an object store (``s3://``, moto's S3
server on loopback); and the checkpoint and clock stores over each."""

from __future__ import annotations

import re

import pytest

from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore
from persistent.storage.filesystems import filesystem_for
from persistent.storage.fs import FileSystem


@pytest.fixture(params=["file", "hdfs", "s3"])
def place(request, tmp_path) -> tuple[FileSystem, str]:
    """A file system and a new, empty directory on it."""
    if request.param == "file":
        return filesystem_for(tmp_path.as_uri()), tmp_path.as_uri()
    if request.param == "hdfs":
        hdfs_dir = request.getfixturevalue("hdfs_dir")
        return filesystem_for(hdfs_dir.uri, hdfs_dir.http), hdfs_dir.uri
    s3 = request.getfixturevalue("s3")
    return filesystem_for(s3), s3


def test_files_are_written_read_listed_replaced_and_deleted(place):
    fs, root = place
    fs.write_atomic(f"{root}/jobs/a/x/one", b"first")
    fs.write_atomic(f"{root}/jobs/a/two", b"\x00\xff" * 1000)
    assert fs.read_bytes(f"{root}/jobs/a/x/one") == b"first"
    assert fs.read_bytes(f"{root}/jobs/a/two") == b"\x00\xff" * 1000
    assert fs.list_names(f"{root}/jobs/a") == ["two", "x"]
    assert [(f.name, f.size) for f in fs.list_files(f"{root}/jobs/a")] == [("two", 2000)]
    assert fs.list_names(f"{root}/jobs/nothing") == []
    assert fs.exists(f"{root}/jobs/a/x") and fs.exists(f"{root}/jobs/a/two") and not fs.exists(f"{root}/jobs/b")
    fs.mkdirs(f"{root}/jobs/empty/deeper")
    assert fs.exists(f"{root}/jobs/empty/deeper")
    fs.replace(f"{root}/jobs/a/two", f"{root}/jobs/b/two")
    assert fs.list_names(f"{root}/jobs/a") == ["x"] and fs.read_bytes(f"{root}/jobs/b/two") == b"\x00\xff" * 1000
    fs.delete(f"{root}/jobs/a/x")
    fs.delete(f"{root}/jobs/a/never")
    assert not fs.exists(f"{root}/jobs/a/x")
    with pytest.raises(FileNotFoundError, match=re.escape(f"{root}/jobs/a/x/one".split("://", 1)[1])):
        fs.read_bytes(f"{root}/jobs/a/x/one")  # the error names the path, less its scheme


def test_a_files_status_is_what_its_directorys_listing_shows(place):
    fs, root = place
    fs.write_atomic(f"{root}/generated/0001.parquet", b"rows" * 10)
    (listed,) = fs.list_files(f"{root}/generated")
    assert fs.status(f"{root}/generated/0001.parquet") == listed and (listed.name, listed.size) == ("0001.parquet", 40)
    with pytest.raises(FileNotFoundError):
        fs.status(f"{root}/generated/0002.parquet")


def test_a_write_replaces_the_file_whole_and_create_new_refuses_one_that_exists(place):
    fs, root = place
    fs.write_atomic(f"{root}/clock/clock", b"old" * 1000)
    fs.write_atomic(f"{root}/clock/clock", b"new")
    assert fs.read_bytes(f"{root}/clock/clock") == b"new"
    assert fs.list_names(f"{root}/clock") == ["clock"]  # nothing temporary beside it
    fs.create_new(f"{root}/lease/holder", b"first")
    with pytest.raises(FileExistsError):
        fs.create_new(f"{root}/lease/holder", b"second")
    assert fs.read_bytes(f"{root}/lease/holder") == b"first"


def test_the_checkpoint_and_clock_stores_keep_their_records_on_each(place):
    fs, root = place
    store = CheckpointStore(fs, f"{root}/checkpoints", "group-00003")
    whole = store.persist(1000, b"state at 1000")
    # A retried attempt of the task writes the same bytes to the same file: one intact checkpoint.
    assert store.persist(1000, b"state at 1000") == whole
    store.persist(2000, b"changes after 1000", base=(1000, whole.crc))
    assert store.times() == [1000, 2000] and store.latest() == 2000
    assert [c.data for c in store.recover(2000)] == [b"state at 1000", b"changes after 1000"]
    clock = ClockStore(fs, f"{root}/clock")
    clock.advance(1000, {"group-00003": 1000})
    clock.advance(2000, {"group-00003": 2000})
    assert clock.read().clock_ms == 2000
