"""``persistent.storage.fs.FileSystem`` over WebHDFS, HDFS's HTTP interface: no JVM needed.

Paths are ``webhdfs://NAMENODE[:PORT]/PATH`` URIs, with the NameNode's HTTP port
(9870 when omitted, Hadoop 3's default), or ``hdfs://NAMENODE[:PORT]/PATH`` URIs, with
the NameNode's RPC port, whose files are reached on the NameNode's HTTP address
(``http_address``; by default the same host on port 9870). Hadoop's own FileSystem
understands both schemes, so a job's checkpoint directory is read with the very URI
it was started with. Requests go through the ``hdfs`` package's
``InsecureClient`` as user ``$HADOOP_USER_NAME`` (default: the login name), so
clusters secured with Kerberos are not supported.

``write_atomic`` creates a temporary file beside the target, then renames it over
the target with ``renameoptions=OVERWRITE``: the NameNode's atomic replacing rename,
which Hadoop's ``FileContext.rename(..., OVERWRITE)`` uses too. ``create_new`` renames
with ``renameoptions=NONE``, which the NameNode refuses when the target exists.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import BinaryIO
from urllib.parse import urlparse

from hdfs import InsecureClient
from hdfs.util import HdfsError

from persistent.core.errors import ConfigError
from persistent.storage.fs import TEMP_PREFIX, FileStatus, FileSystem

__all__ = ["WebHdfsFileSystem", "DEFAULT_PORT", "SCHEMES"]

#: The NameNode's HTTP port in Hadoop 3, used when a URI names none.
DEFAULT_PORT = 9870
#: The URI schemes served: HDFS over HTTP, and HDFS's own (reached over HTTP).
SCHEMES = ("webhdfs", "hdfs")
#: ``open_input`` keeps a file up to this size in memory, a larger one in a temporary file.
_SPOOL_BYTES = 64 << 20


class WebHdfsFileSystem(FileSystem):
    """The files of one NameNode, named by ``webhdfs://`` or ``hdfs://`` URIs."""

    def __init__(self, uri: str, user: str | None = None, timeout_s: float = 60, http_address: str | None = None):
        parsed = urlparse(uri)
        if parsed.scheme not in SCHEMES or not parsed.hostname:
            raise ConfigError(f"{uri!r} is not a webhdfs://NAMENODE[:PORT]/PATH or hdfs://NAMENODE[:PORT]/PATH URI")
        self.scheme, self.authority = parsed.scheme, parsed.netloc
        if http_address:
            self.url = http_address.rstrip("/")
        elif parsed.scheme == "webhdfs":
            self.url = f"http://{parsed.hostname}:{parsed.port or DEFAULT_PORT}"
        else:
            self.url = f"http://{parsed.hostname}:{DEFAULT_PORT}"
        self.client = InsecureClient(self.url, user=user or os.environ.get("HADOOP_USER_NAME"), timeout=timeout_s)

    def __repr__(self) -> str:
        return f"WebHdfsFileSystem({self.url!r})"

    def _path(self, uri: str) -> str:
        parsed = urlparse(uri)
        if parsed.scheme != self.scheme or parsed.netloc != self.authority:
            raise ConfigError(f"{uri!r} is not on {self.scheme}://{self.authority}")
        return parsed.path or "/"

    @contextlib.contextmanager
    def _errors(self, action: str, uri: str) -> Iterator[None]:
        """Turns the client's errors into ``OSError``s naming the action and the URI."""
        try:
            yield
        except FileExistsError:  # create_new's answer, not a failure
            raise
        except HdfsError as exc:
            if exc.exception == "FileNotFoundException":
                raise FileNotFoundError(f"{uri} does not exist") from None
            # An error the DataNode relays holds the NameNode's Java stack after its message.
            raise OSError(f"WebHDFS could not {action} {uri}: {exc.message.splitlines()[0]}") from None
        except OSError as exc:  # requests' connection errors and timeouts
            raise OSError(f"WebHDFS at {self.url} could not {action} {uri}: {exc}") from None

    def read_bytes(self, path: str) -> bytes:
        with self._errors("read", path), self.client.read(self._path(path)) as reader:
            return reader.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        self._write_whole(path, data, "OVERWRITE")

    def create_new(self, path: str, data: bytes) -> None:
        self._write_whole(path, data, "NONE")

    def _write_whole(self, path: str, data: bytes, rename: str) -> None:
        """Writes ``data`` to a temporary file beside ``path``, then renames it to
        ``path`` with ``renameoptions=rename``: ``OVERWRITE`` replaces what is there,
        ``NONE`` raises ``FileExistsError`` when ``path`` exists (the NameNode's rename
        refuses atomically); a failed rename deletes the temporary file."""
        target = self._path(path)
        directory, name = posixpath.split(target)
        temp = posixpath.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{name}")
        with self._errors("write", path):
            self.client.write(temp, data=bytes(data), overwrite=False)
            try:
                # The client's rename() takes no options; the raw call passes them.
                self.client._rename(temp, destination=target, renameoptions=rename)
            except BaseException as exc:
                self.client.delete(temp)
                if isinstance(exc, HdfsError) and exc.exception == "FileAlreadyExistsException":
                    raise FileExistsError(f"{path} exists") from None
                raise

    def replace(self, source: str, target: str) -> None:
        with self._errors("write", target):
            self.client.makedirs(posixpath.dirname(self._path(target)))
            self.client._rename(self._path(source), destination=self._path(target), renameoptions="OVERWRITE")

    def exists(self, path: str) -> bool:
        try:
            with self._errors("look up", path):
                self.client.status(self._path(path))
        except FileNotFoundError:
            return False
        return True

    def list_names(self, path: str) -> list[str]:
        try:
            with self._errors("list", path):
                return sorted(self.client.list(self._path(path)))
        except FileNotFoundError:
            return []

    def status(self, path: str) -> FileStatus:
        """File ``path`` as a listing of its directory shows it; ``FileNotFoundError``
        when it does not exist."""
        with self._errors("look up", path):
            return _status(posixpath.basename(self._path(path)), self.client.status(self._path(path)))

    def list_files(self, path: str) -> list[FileStatus]:
        """The files (not directories) in directory ``path``, by name;
        ``FileNotFoundError`` when it does not exist."""
        with self._errors("list", path):
            entries = self.client.list(self._path(path), status=True)
        return sorted((_status(name, status) for name, status in entries if status["type"] == "FILE"),
                      key=lambda f: f.name)

    def open_input(self, path: str) -> BinaryIO:
        """File ``path``, downloaded whole and opened for reading, seekable."""
        copy = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)
        try:
            with self._errors("read", path), self.client.read(self._path(path)) as reader:
                shutil.copyfileobj(reader, copy)
        except BaseException:
            copy.close()
            raise
        copy.seek(0)
        return copy

    def delete(self, path: str) -> None:
        with self._errors("delete", path):
            self.client.delete(self._path(path), recursive=True)

    def mkdirs(self, path: str) -> None:
        with self._errors("create directory", path):
            self.client.makedirs(self._path(path))


def _status(name: str, status: dict) -> FileStatus:
    """A file as WebHDFS's ``FileStatus`` of it shows it."""
    return FileStatus(name, status["length"], status["modificationTime"] * 1_000_000)
