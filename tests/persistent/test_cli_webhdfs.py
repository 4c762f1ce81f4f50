"""``WebHdfsFileSystem`` and the command line on ``webhdfs://`` and ``hdfs://`` job
directories, on a real HDFS: the session's NameNode and DataNode (``hdfs_cluster``),
each test in a directory of its own (``hdfs_dir``). What the code under test wrote is
looked at with another WebHDFS client, and what it asked the NameNode for in the
NameNode's audit log. The contract every file system holds, read back through the
file system itself, is ``test_filesystems.py``.
"""

from __future__ import annotations

import threading
import types

import pytest

from persistent.core.errors import ConfigError
from persistent.examples.count import VectorizedCount
from persistent.runtime.recovery import RecoveryPath, plan
from persistent.storage import webhdfs
from persistent.storage.filesystems import JobStorage
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.webhdfs import WebHdfsFileSystem
from persistent.tools import cli

from jobwriter import JobWriter, four_batches, run_cli

# -- the file system ----------------------------------------------------------------


def test_files_are_written_read_listed_and_deleted_over_webhdfs(hdfs_dir):
    url = hdfs_dir.webhdfs_uri
    fs = WebHdfsFileSystem(url)
    fs.write_atomic(f"{url}/jobs/a/x/one", b"first")
    fs.write_atomic(f"{url}/jobs/a/two", b"\x00\xff" * 1000)
    assert hdfs_dir.read_bytes("jobs/a/x/one") == b"first"
    assert fs.read_bytes(f"{url}/jobs/a/two") == b"\x00\xff" * 1000
    assert fs.list_names(f"{url}/jobs/a") == ["two", "x"]
    assert fs.list_names(f"{url}/jobs/nothing") == []
    assert fs.exists(f"{url}/jobs/a/x") and fs.exists(f"{url}/jobs/a/two") and not fs.exists(f"{url}/jobs/b")
    fs.mkdirs(f"{url}/jobs/empty/deeper")
    assert hdfs_dir.status("jobs/empty/deeper")["type"] == "DIRECTORY"
    fs.delete(f"{url}/jobs/a/x")
    fs.delete(f"{url}/jobs/a/never")
    assert fs.list_names(f"{url}/jobs/a") == ["two"] == hdfs_dir.list_names("jobs/a")
    with pytest.raises(FileNotFoundError, match="/jobs/a/x/one does not exist"):
        fs.read_bytes(f"{url}/jobs/a/x/one")


def test_replacing_a_file_writes_a_temporary_file_and_renames_it_over_the_target(hdfs_dir):
    url, clock = hdfs_dir.webhdfs_uri, f"{hdfs_dir.path}/clock/clock"
    fs = WebHdfsFileSystem(url)
    fs.write_atomic(f"{url}/clock/clock", b"old")
    before = len(hdfs_dir.audit())
    fs.write_atomic(f"{url}/clock/clock", b"new")
    replacing = [entry for entry in hdfs_dir.audit()[before:] if entry[0] != "getfileinfo"]
    assert fs.read_bytes(f"{url}/clock/clock") == b"new" == hdfs_dir.read_bytes("clock/clock")
    assert hdfs_dir.list_names("clock") == ["clock"]
    assert len(replacing) == 2, replacing
    (create, temp, _), renamed = replacing
    assert create == "create" and temp.startswith(f"{hdfs_dir.path}/clock/{TEMP_PREFIX}")
    assert renamed == ("rename (options=[OVERWRITE])", temp, clock)


def test_a_reader_sees_the_old_or_the_new_bytes_while_a_file_is_replaced(hdfs_dir):
    url = hdfs_dir.webhdfs_uri
    fs = WebHdfsFileSystem(url)
    # Written in place, the file would be empty or short for a while: with these sizes
    # nearly every other replacement shows it to the reader.
    versions = [bytes([n]) * (256 << 10) for n in range(2)]
    fs.write_atomic(f"{url}/clock/clock", versions[0])
    read, broken, done = [], [], threading.Event()

    def reader():
        from urllib3.exceptions import ProtocolError

        while not done.is_set():
            try:
                read.append(hdfs_dir.read_bytes("clock/clock"))
            except ProtocolError as error:
                # The version being read was replaced and HDFS removed its blocks while the
                # DataNode sent them: the client sees the stream end early (no bytes taken),
                # and the next read opens the new version. Seen once under a full CI run.
                broken.append(error)
            except Exception as error:  # the file missing or unreadable: it fails the test below
                read.append(error)
                return

    reading = threading.Thread(target=reader)
    reading.start()
    replaced = 0
    try:
        while reading.is_alive() and (replaced < 20 or len(read) < 20) and replaced < 2_000:
            replaced += 1
            fs.write_atomic(f"{url}/clock/clock", versions[replaced % 2])
    finally:
        done.set()
        reading.join()
    assert [data if isinstance(data, Exception) else len(data) for data in read if data not in versions] == []
    assert len(read) >= 20 and len(broken) < len(read), broken
    assert hdfs_dir.list_names("clock") == ["clock"]


def test_a_temporary_file_of_the_same_name_is_neither_overwritten_nor_removed(hdfs_dir, monkeypatch):
    url = hdfs_dir.webhdfs_uri
    fs = WebHdfsFileSystem(url)
    same = types.SimpleNamespace(hex="0" * 32)  # every write picks the same temporary name
    monkeypatch.setattr(webhdfs, "uuid", types.SimpleNamespace(uuid4=lambda: same))
    fs.write_atomic(f"{url}/clock/clock", b"old")
    [temp] = [source.removeprefix(f"{hdfs_dir.path}/") for command, source, _ in hdfs_dir.audit()
              if command == "create"]
    hdfs_dir.write_bytes(temp, b"another writer's")
    with pytest.raises(OSError, match=f"WebHDFS could not write {url}/clock/clock: .*already exists") as refused:
        fs.write_atomic(f"{url}/clock/clock", b"new")
    assert "\n" not in str(refused.value)  # the NameNode's message, not its Java stack
    assert hdfs_dir.read_bytes(temp) == b"another writer's"
    assert hdfs_dir.read_bytes("clock/clock") == b"old"


def test_a_uri_of_another_namenode_is_refused():
    url = "webhdfs://namenode.example.org:9870"
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
def job_on_hdfs(hdfs_dir) -> str:
    """A counting job written over WebHDFS into ``jobs/count`` of ``hdfs_dir``: its webhdfs URI."""
    uri = f"{hdfs_dir.webhdfs_uri}/jobs/count"
    four_batches(JobWriter(uri, VectorizedCount(), fs=WebHdfsFileSystem(uri)))
    return uri


@pytest.mark.parametrize(
    "command",
    [["status"], ["clock"], ["inspect"], ["inspect", "--at", "100"], ["inspect", "--key", "k4"]],
)
def test_commands_print_the_same_over_webhdfs_as_on_a_local_copy(capsys, monkeypatch, tmp_path, hdfs_dir, job_on_hdfs,
                                                                  command):
    local = hdfs_dir.download("jobs/count", str(tmp_path / "count"))
    monkeypatch.setattr(cli, "_now_ms", lambda: 1_700_000_100_000)
    code, remote_out, _ = run_cli(capsys, command[0], job_on_hdfs, *command[1:])
    assert code == 0 and remote_out
    _, local_out, _ = run_cli(capsys, command[0], local, *command[1:])
    assert remote_out == local_out.replace(local, job_on_hdfs)


def test_rewind_over_webhdfs_prepares_recovery_path_b(capsys, tmp_path, hdfs_dir, job_on_hdfs):
    before = JobDirectory(LocalFileSystem(), hdfs_dir.download("jobs/count", str(tmp_path / "before")))
    at_100 = {g: before.store(g).recover(100) for g in range(3)}
    code, out, _ = run_cli(capsys, "rewind", job_on_hdfs, "--to", 100)
    assert code == 0 and f"rewound the clock of {job_on_hdfs} from 400 ms to 100 ms" in out
    assert hdfs_dir.status("jobs/count/spark") is None
    directory = JobDirectory(LocalFileSystem(), hdfs_dir.download("jobs/count", str(tmp_path / "after")))
    assert [directory.store(g).times() for g in range(3)] == [[100]] * 3
    start = plan(directory, 3)
    assert (start.path, start.floor_ms, start.restored) == (RecoveryPath.FROM_CLOCK, 100, set(at_100))
    assert {g: directory.restore(g, 100) for g in start.restored} == at_100


# -- hdfs:// on the executors ---------------------------------------------------------


def test_an_hdfs_uri_is_reached_over_webhdfs_as_the_key_groups_reach_it(hdfs_dir):
    assert WebHdfsFileSystem("hdfs://namenode.example.org:8020/jobs/count").url == "http://namenode.example.org:9870"
    # What a key group does on its executor: the runtime's storage opens the directory,
    # named with the NameNode's RPC port, at the job's webhdfs_address, writes its
    # checkpoint, and restores it.
    directory = JobStorage(f"{hdfs_dir.uri}/jobs/count", hdfs_dir.http).directory()
    size, _ = directory.store(3).persist(1000, b"state of key group 3")
    assert [c.data for c in directory.restore(3, 1000)] == [b"state of key group 3"]
    group = "jobs/count/checkpoints/group-00003"
    assert hdfs_dir.list_names(group) == ["0000000000000000001000.ckpt"]
    assert hdfs_dir.status(f"{group}/0000000000000000001000.ckpt")["length"] == size
    assert {command for command, _, _ in hdfs_dir.audit()} >= {"create", "rename (options=[OVERWRITE])", "open"}
    with pytest.raises(ConfigError, match=f"is not on {hdfs_dir.cluster.uri}"):
        directory.fs.read_bytes("hdfs://elsewhere:8020/x")
