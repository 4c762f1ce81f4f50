"""``WebHdfsFileSystem`` and the command line on ``webhdfs://`` job directories.

No HDFS server can be had on these machines, so these tests run a test double at
the protocol level: two stdlib HTTP servers over a temporary directory. The
"NameNode" answers GETFILESTATUS, LISTSTATUS, MKDIRS, RENAME (including
``renameoptions=OVERWRITE``) and DELETE itself and answers OPEN and CREATE with a
307 redirect to the "DataNode" on another port, which serves and stores the bytes,
as HDFS does and as the ``hdfs`` package's client expects. Errors carry HDFS's
``RemoteException`` JSON. Everything above the HTTP requests is the real code.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest

from persistent import cli
from persistent.recovery import JobDirectory, RecoveryPath
from persistent.filesystems import JobStorage
from persistent.webhdfs import WebHdfsFileSystem
from state.fs import TEMP_PREFIX, LocalFileSystem

from jobwriter import Counting, JobWriter, run_cli, three_batches

_PREFIX = "/webhdfs/v1"


class _Handler(BaseHTTPRequestHandler):
    role: str
    root: Path
    log: list

    def log_message(self, *args):  # keep the test output clean
        pass

    def _request(self) -> tuple[Path, dict[str, str], str]:
        url = urlparse(self.path)
        assert url.path.startswith(_PREFIX)
        params = {k: v[0] for k, v in parse_qs(url.query).items()}
        hdfs_path = unquote(url.path[len(_PREFIX):]) or "/"
        self.log.append((self.role, self.command, params.get("op", "").upper(), hdfs_path, params))
        return self.root / hdfs_path.lstrip("/"), params, hdfs_path

    def _reply(self, status: int, body: object = None, headers: dict | None = None) -> None:
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/octet-stream" if isinstance(body, bytes) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, exception: str, message: str) -> None:
        self._reply(status, {"RemoteException": {"exception": exception, "javaClassName": f"java.io.{exception}",
                                                 "message": message}})


class _NameNode(_Handler):
    datanode: str

    @staticmethod
    def _status(path: Path, suffix: str) -> dict:
        return {"pathSuffix": suffix, "type": "DIRECTORY" if path.is_dir() else "FILE",
                "length": 0 if path.is_dir() else path.stat().st_size, "owner": "test", "group": "test",
                "permission": "755", "replication": 1, "blockSize": 134217728, "accessTime": 0,
                "modificationTime": int(path.stat().st_mtime * 1000)}

    def _redirect(self) -> None:
        self._reply(307, headers={"Location": f"{self.datanode}{self.path}"})

    def do_GET(self):
        path, params, name = self._request()
        if not path.exists():
            return self._error(404, "FileNotFoundException", f"File does not exist: {name}")
        op = params["op"].upper()
        if op == "GETFILESTATUS":
            return self._reply(200, {"FileStatus": self._status(path, "")})
        if op == "LISTSTATUS":
            children = sorted(path.iterdir()) if path.is_dir() else []
            entries = [self._status(c, c.name) for c in children] if path.is_dir() else [self._status(path, "")]
            return self._reply(200, {"FileStatuses": {"FileStatus": entries}})
        if op == "OPEN" and path.is_file():
            return self._redirect()
        return self._error(400, "IllegalArgumentException", f"unsupported GET {op} on {name}")

    def do_PUT(self):
        path, params, name = self._request()
        op = params["op"].upper()
        if op == "CREATE":
            if path.exists() and params.get("overwrite", "false").lower() != "true":
                return self._error(403, "FileAlreadyExistsException", f"{name} already exists")
            return self._redirect()
        if op == "MKDIRS":
            path.mkdir(parents=True, exist_ok=True)
            return self._reply(200, {"boolean": True})
        if op == "RENAME":
            target = self.root / params["destination"].lstrip("/")
            if params.get("renameoptions", "").upper() == "OVERWRITE":
                if not path.exists():
                    return self._error(404, "FileNotFoundException", f"rename source {name} does not exist")
                os.replace(path, target)
                return self._reply(200)
            if not path.exists() or target.exists() or not target.parent.is_dir():
                return self._reply(200, {"boolean": False})
            path.rename(target)
            return self._reply(200, {"boolean": True})
        return self._error(400, "IllegalArgumentException", f"unsupported PUT {op} on {name}")

    def do_DELETE(self):
        path, params, name = self._request()
        if not path.exists():
            return self._reply(200, {"boolean": False})
        if path.is_dir():
            if any(path.iterdir()) and params.get("recursive", "false").lower() != "true":
                return self._error(403, "PathIsNotEmptyDirectoryException", f"{name} is non empty")
            shutil.rmtree(path)
        else:
            path.unlink()
        return self._reply(200, {"boolean": True})


class _DataNode(_Handler):
    def do_GET(self):
        path, _, _ = self._request()
        self._reply(200, path.read_bytes())

    def do_PUT(self):
        path, _, name = self._request()
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self._reply(201, headers={"Location": f"hdfs://namenode{name}"})


def _serve(handler: type, **attributes) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), type(handler.__name__, (handler,), attributes))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


@pytest.fixture
def hdfs(tmp_path):
    """``(webhdfs://127.0.0.1:PORT, local root, request log)`` of a WebHDFS test double."""
    root, log = tmp_path / "hdfs", []
    root.mkdir()
    datanode = _serve(_DataNode, role="datanode", root=root, log=log)
    namenode = _serve(_NameNode, role="namenode", root=root, log=log,
                      datanode=f"http://127.0.0.1:{datanode.server_port}")
    yield f"webhdfs://127.0.0.1:{namenode.server_port}", root, log
    for server in (namenode, datanode):
        server.shutdown()
        server.server_close()


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
    with pytest.raises(ValueError, match="is not on webhdfs://"):
        WebHdfsFileSystem(url).read_bytes("webhdfs://elsewhere:9870/x")
    with pytest.raises(ValueError, match="not a webhdfs://NAMENODE"):
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
    size = directory.store(3).persist(1000, b"state of key group 3")
    assert directory.restore(3, 1000) == b"state of key group 3"
    stored = root / "jobs" / "count" / "checkpoints" / "group-00003" / "0000000000000000001000.ckpt"
    assert stored.stat().st_size == size
    assert {op for role, _, op, _, _ in log if role == "namenode"} >= {"CREATE", "RENAME", "OPEN"}
    with pytest.raises(ValueError, match="is not on hdfs://namenode.example.org:8020"):
        directory.fs.read_bytes("hdfs://elsewhere:8020/x")
