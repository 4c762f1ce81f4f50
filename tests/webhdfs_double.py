"""A WebHDFS test double: no HDFS server can be had on these machines, so tests run
one at the protocol level. Two stdlib HTTP servers over a directory: the "NameNode"
answers GETFILESTATUS, LISTSTATUS, MKDIRS, RENAME (including
``renameoptions=OVERWRITE``) and DELETE itself and answers OPEN and CREATE with a 307
redirect to the "DataNode" on another port, which serves and stores the bytes, as
HDFS does and as the ``hdfs`` package's client expects. Errors carry HDFS's
``RemoteException`` JSON. ``serve(root)`` runs one; the ``hdfs`` fixture
(``tests/conftest.py``) gives each test its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

__all__ = ["serve"]

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


@contextlib.contextmanager
def serve(root: Path) -> Iterator[tuple[str, list]]:
    """``(webhdfs://127.0.0.1:PORT, request log)`` of a double serving the files under ``root``."""
    log: list = []
    datanode = _serve(_DataNode, role="datanode", root=root, log=log)
    namenode = _serve(_NameNode, role="namenode", root=root, log=log,
                      datanode=f"http://127.0.0.1:{datanode.server_port}")
    try:
        yield f"webhdfs://127.0.0.1:{namenode.server_port}", log
    finally:
        for server in (namenode, datanode):
            server.shutdown()
            server.server_close()
