"""``ArrowFileSystem`` (``s3://``, ``gs://`` through ``pyarrow.fs``) and a job directory
on an object store, against an S3 server on loopback (the ``s3`` fixture); the
contract every file system holds is ``test_filesystems.py``."""

from __future__ import annotations

import pytest

from persistent.core.errors import ConfigError
from persistent.examples.count import VectorizedCount
from persistent.storage.arrow_fs import ArrowFileSystem
from persistent.storage.filesystems import JobStorage, filesystem_for
from persistent.runtime.recovery import RecoveryPath, plan
from persistent.tools import cli
from state.errors import StorageError

from jobwriter import JobWriter, four_batches, run_cli


def test_a_missing_bucket_is_a_storage_error_naming_the_uri(s3_server):
    fs = ArrowFileSystem("s3://no-such-bucket")
    with pytest.raises(StorageError, match="bucket does not exist") as refused:
        fs.write_atomic("s3://no-such-bucket/job/x", b"data")
    assert (refused.value.action, refused.value.path) == ("write", "s3://no-such-bucket/job/x")


def test_a_uri_of_another_bucket_or_scheme_is_refused(s3):
    with pytest.raises(ConfigError, match=f"is not in {s3}"):
        ArrowFileSystem(s3).read_bytes("s3://elsewhere/x")
    with pytest.raises(ConfigError, match="not an s3://, s3a://, gs:// or gcs:// URI"):
        ArrowFileSystem("http://127.0.0.1/x")


def test_key_groups_write_and_restore_their_checkpoints_in_the_bucket(s3):
    # Spark's Hadoop connector names the bucket s3a://; the key groups reach the same objects.
    uri = s3.replace("s3://", "s3a://") + "/jobs/count"
    assert isinstance(filesystem_for(uri), ArrowFileSystem)
    directory = JobStorage(uri).directory()
    written = directory.store(3).persist(1000, b"state of key group 3")
    # A retried attempt of the task writes the same bytes to the same object: one intact checkpoint.
    assert directory.store(3).persist(1000, b"state of key group 3") == written
    assert [c.data for c in directory.restore(3, 1000)] == [b"state of key group 3"]
    assert directory.store(3).times() == [1000]
    assert len(ArrowFileSystem(s3).read_bytes(f"{s3}/jobs/count/checkpoints/group-00003/"
                                              f"0000000000000000001000.ckpt")) == written.size


@pytest.mark.parametrize("command", [["status"], ["clock"], ["inspect", "--key", "k4"]])
def test_commands_print_the_same_on_a_bucket_as_on_a_local_directory(capsys, monkeypatch, tmp_path, s3, command):
    monkeypatch.setattr(cli, "_now_ms", lambda: 1_700_000_100_000)
    local, remote = str(tmp_path / "count"), f"{s3}/jobs/count"
    four_batches(JobWriter(local, VectorizedCount()))
    four_batches(JobWriter(remote, VectorizedCount(), fs=ArrowFileSystem(s3)))
    code, remote_out, _ = run_cli(capsys, command[0], remote, *command[1:])
    assert code == 0 and remote_out
    _, local_out, _ = run_cli(capsys, command[0], local, *command[1:])
    assert remote_out == local_out.replace(local, remote)


def test_a_rewound_job_in_a_bucket_restarts_from_the_clock(capsys, s3):
    remote = f"{s3}/jobs/count"
    four_batches(JobWriter(remote, VectorizedCount(), fs=ArrowFileSystem(s3)))
    code, out, _ = run_cli(capsys, "rewind", remote, "--to", 100)
    assert code == 0 and f"rewound the clock of {remote} from 400 ms to 100 ms" in out
    directory = JobStorage(remote).directory()
    start = plan(directory, 3)
    assert (start.path, start.floor_ms, start.restored) == (RecoveryPath.FROM_CLOCK, 100, {0, 1, 2})
    assert all(directory.restore(g, 100) for g in start.restored)
