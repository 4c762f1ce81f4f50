"""``WebHdfsFileSystem`` and the command line on ``webhdfs://`` job directories.

No HDFS server can be had on these machines, so these tests run a test double at
the protocol level (``tests/webhdfs_double.py``, the ``hdfs`` fixture). Everything
above the HTTP requests is the real code.
"""

from __future__ import annotations

import os

import pytest

from persistent.core.errors import ConfigError
from persistent.storage.filesystems import JobStorage
from persistent.storage.job_directory import JobDirectory, RecoveryPath
from persistent.storage.webhdfs import WebHdfsFileSystem
from persistent.tools import cli
from state.fs import TEMP_PREFIX, LocalFileSystem

from jobwriter import Counting, JobWriter, run_cli, three_batches

# -- the file system ----------------------------------------------------------------


def test_files_are_written_read_listed_and_deleted_over_webhdfs(hdfs):
    url, root, _ = hdfs
    fs = WebHdfsFileSystem(url)
    fs.write_atomic(f"{url}/jobs/a/x/one", b"first")
    fs.write_atomic(f"{url}/jobs/a/two", b"\x00\xff" * 1000)
    assert (root / "jobs/a/x/one").read_bytes() == b"first"
    assert fs.read_bytes(f"{url}/jobs/a/two") == b"\x00\xff" * 1000
    assert fs.list_names(f"{url}/jobs/a") == ["two", "x"]
    assert fs.list_names(f"{url}/jobs/nothing") == []
    assert fs.exists(f"{url}/jobs/a/x") and fs.exists(f"{url}/jobs/a/two") and not fs.exists(f"{url}/jobs/b")
    fs.mkdirs(f"{url}/jobs/empty/deeper")
    assert (root / "jobs/empty/deeper").is_dir()
    fs.delete(f"{url}/jobs/a/x")
    fs.delete(f"{url}/jobs/a/never")
    assert fs.list_names(f"{url}/jobs/a") == ["two"]
    with pytest.raises(FileNotFoundError, match="/jobs/a/x/one does not exist"):
        fs.read_bytes(f"{url}/jobs/a/x/one")


def test_replacing_a_file_writes_a_temporary_file_and_renames_it_over_the_target(hdfs):
    url, root, log = hdfs
    fs = WebHdfsFileSystem(url)
    fs.write_atomic(f"{url}/clock/clock", b"old")
    log.clear()
    fs.write_atomic(f"{url}/clock/clock", b"new")
    assert fs.read_bytes(f"{url}/clock/clock") == b"new"
    assert os.listdir(root / "clock") == ["clock"]
    (create, temp, created), (rename, source, renamed) = [
        (op, path, params) for role, method, op, path, params in log if role == "namenode" and method == "PUT"
    ]
    assert (create, rename, source) == ("CREATE", "RENAME", temp)
    assert temp.startswith(f"/clock/{TEMP_PREFIX}") and created["overwrite"].lower() == "false"
    assert renamed["destination"] == "/clock/clock" and renamed["renameoptions"] == "OVERWRITE"
    served = [(method, op, path) for role, method, op, path, _ in log if role == "datanode"]
    assert served == [("PUT", "CREATE", temp), ("GET", "OPEN", "/clock/clock")]


def test_a_uri_of_another_namenode_is_refused(hdfs):
    url, _, _ = hdfs
    with pytest.raises(ConfigError, match="is not on webhdfs://"):
        WebHdfsFileSystem(url).read_bytes("webhdfs://elsewhere:9870/x")
    with pytest.raises(ConfigError, match="not a webhdfs://NAMENODE"):
        WebHdfsFileSystem("http://127.0.0.1:9870/x")


def test_a_namenode_that_does_not_answer_is_an_os_error_naming_it(capsys):
    with socket_bound() as port:
        code, _, err = run_cli(capsys, "status", f"webhdfs://127.0.0.1:{port}/jobs/x")
    assert code == 1 and f"WebHDFS at http://127.0.0.1:{port} could not look up" in err


class socket_bound:
    """A local port that nothing listens on, for as long as the block lasts."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


# -- the command line ---------------------------------------------------------------


@pytest.fixture
def job_on_hdfs(hdfs):
    """A counting job written over WebHDFS: ``(its webhdfs URI, its local path)``."""
    url, root, _ = hdfs
    writer = JobWriter(f"{url}/jobs/count", Counting(), fs=WebHdfsFileSystem(url))
    three_batches(writer)
    return f"{url}/jobs/count", str(root / "jobs" / "count")


@pytest.mark.parametrize(
    "command",
    [["status"], ["clock"], ["inspect"], ["inspect", "--at", "100"], ["inspect", "--key", "k4"]],
)
def test_commands_print_the_same_over_webhdfs_as_on_the_local_directory(capsys, monkeypatch, job_on_hdfs, command):
    uri, local = job_on_hdfs
    monkeypatch.setattr(cli, "_now_ms", lambda: 1_700_000_100_000)
    code, remote_out, _ = run_cli(capsys, command[0], uri, *command[1:])
    assert code == 0 and remote_out
    _, local_out, _ = run_cli(capsys, command[0], local, *command[1:])
    assert remote_out == local_out.replace(local, uri)


def test_rewind_over_webhdfs_prepares_recovery_path_b(capsys, job_on_hdfs):
    uri, local = job_on_hdfs
    directory = JobDirectory(LocalFileSystem(), local)
    at_100 = {g: directory.store(g).recover(100) for g in range(3)}
    code, out, _ = run_cli(capsys, "rewind", uri, "--to", 100)
    assert code == 0 and f"rewound the clock of {uri} from 400 ms to 100 ms" in out
    assert not os.path.exists(directory.spark)
    assert [directory.store(g).times() for g in range(3)] == [[100]] * 3
    plan = directory.plan(3)
    assert (plan.path, plan.floor_ms, plan.restored) == (RecoveryPath.FROM_CLOCK, 100, set(at_100))
    assert {g: directory.restore(g, 100) for g in plan.restored} == at_100


# -- hdfs:// on the executors ---------------------------------------------------------


def test_an_hdfs_uri_is_reached_over_webhdfs_as_the_key_groups_reach_it(hdfs):
    url, root, log = hdfs
    uri = "hdfs://namenode.example.org:8020/jobs/count"
    assert WebHdfsFileSystem(uri).url == "http://namenode.example.org:9870"  # the NameNode's HTTP port
    # What a key group does on its executor: the runtime's storage opens the directory
    # with the job's webhdfs_address, writes its checkpoint, and restores it.
    directory = JobStorage(uri, url.replace("webhdfs://", "http://")).directory()
    size, _ = directory.store(3).persist(1000, b"state of key group 3")
    assert directory.restore(3, 1000) == b"state of key group 3"
    stored = root / "jobs" / "count" / "checkpoints" / "group-00003" / "0000000000000000001000.ckpt"
    assert stored.stat().st_size == size
    assert {op for role, _, op, _, _ in log if role == "namenode"} >= {"CREATE", "RENAME", "OPEN"}
    with pytest.raises(ConfigError, match="is not on hdfs://namenode.example.org:8020"):
        directory.fs.read_bytes("hdfs://elsewhere:8020/x")
