"""The one file-system interface every byte a job keeps goes through: checkpoints, the
clock, the job directory's records, the lease, the logs and the dead letters.

``LocalFileSystem`` serves local paths and ``file://`` URIs in plain Python; the
others implement the same interface: ``webhdfs.WebHdfsFileSystem`` (HDFS over HTTP),
``arrow_fs.ArrowFileSystem`` (object stores, through ``pyarrow.fs``) and, on the
driver, ``hadoop_fs.HadoopFileSystem`` (Hadoop's API through Spark's JVM). pyarrow's
file systems serve the object stores only: its local one has no ``fsync`` and no
exclusive create, which durable writes and the lease need, and its HDFS one needs
libhdfs and a JVM in every Python process.

Paths are strings joined with ``/``. Writes are atomic: ``write_atomic`` writes to a
temporary name in the same directory, makes it durable, then renames it over the
target, so a reader sees the old bytes or the new bytes, never a torn file.

When the storage refuses a write or a delete, the file system raises an ``OSError``
naming the path, and a failed write leaves the target as it was. ``LocalFileSystem``
(and the Spark runtime's ``persistent.storage.hadoop_fs.HadoopFileSystem``) raise
``StorageError`` for it: ``NoSpaceError`` when the file system is full,
``NotWritableError`` when the directory is read-only or not permitted; and a failed
write removes its temporary file.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urlparse

from state.errors import NoSpaceError, NotWritableError, StorageError

__all__ = [
    "FileStatus",
    "FileSystem",
    "LocalFileSystem",
    "local_path",
    "TEMP_PREFIX",
    "storage_error",
    "sync_directory",
]

#: Names starting with this are temporary files of unfinished atomic writes.
TEMP_PREFIX = ".tmp-"


def local_path(uri: str) -> str:
    """The local path of a plain path or ``file://`` URI; raises ``ValueError`` otherwise."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else uri
    raise ValueError(f"{uri!r} is not a local path or file:// URI")


@dataclass(frozen=True)
class FileStatus:
    """A file as its directory's listing shows it."""

    name: str
    size: int
    mtime_ns: int


class FileSystem(ABC):
    """Byte files in directories, with atomic replacement."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path``; ``FileNotFoundError`` when it does not exist."""

    @abstractmethod
    def write_atomic(self, path: str, data: bytes) -> None:
        """Replaces ``path`` with ``data`` atomically and durably; creates parent directories.

        Raises an ``OSError`` naming ``path`` when the storage refuses; ``path`` is then unchanged.
        """

    @abstractmethod
    def create_new(self, path: str, data: bytes) -> None:
        """Writes ``data`` to ``path`` unless ``path`` exists, atomically and durably: of
        two writers of one path at the same moment, one makes it and the other gets
        ``FileExistsError``, and a reader sees the whole file or none. Creates parent
        directories. Raises another ``OSError`` naming ``path`` when the storage refuses."""

    @abstractmethod
    def replace(self, source: str, target: str) -> None:
        """Renames file ``source`` to ``target`` atomically, replacing what is there;
        creates ``target``'s parent directories. Raises an ``OSError`` naming ``target``
        when the storage refuses."""

    @abstractmethod
    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (file or directory)."""

    @abstractmethod
    def list_names(self, path: str) -> list[str]:
        """Sorted names (not paths) in directory ``path``; empty when it does not exist."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Removes the file or directory tree ``path``; nothing happens when it does not exist.

        Raises an ``OSError`` naming ``path`` when the storage refuses.
        """

    @abstractmethod
    def mkdirs(self, path: str) -> None:
        """Creates directory ``path`` and its parents; an ``OSError`` naming it when the storage refuses."""

    def join(self, *parts: str) -> str:
        """``parts`` joined with ``/``."""
        return "/".join([parts[0].rstrip("/"), *(p.strip("/") for p in parts[1:])])


# How the OS (its messages, also inside Java's) and Hadoop (its exception classes) say
# that a file system is full, or that it refuses writes.
_NO_SPACE = [os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT), "QuotaExceededException"]
_NOT_WRITABLE = [
    *(os.strerror(code) for code in (errno.EROFS, errno.EACCES, errno.EPERM)),
    "AccessControlException",
    "SafeModeException",
]


# Only refusals to change files can mean a full or read-only file system.
_CHANGES = ("write", "delete", "create directory")


def storage_error(action: str, path: str, detail: str) -> StorageError:
    """The error for the storage refusing to ``action`` ``path``, in the file system's words ``detail``.

    For an action that changes files (write, delete, create directory): ``NoSpaceError``
    or ``NotWritableError`` when ``detail`` says so. Otherwise ``StorageError``.
    """
    if action in _CHANGES:
        if any(sign in detail for sign in _NO_SPACE):
            return NoSpaceError(action, path, detail)
        if any(sign in detail for sign in _NOT_WRITABLE):
            return NotWritableError(action, path, detail)
    return StorageError(action, path, detail)


@contextmanager
def _refusals(action: str, path: str) -> Iterator[None]:
    """Raises an ``OSError`` of the block as the ``StorageError`` for ``action`` on ``path``."""
    try:
        yield
    except OSError as exc:
        raise storage_error(action, path, exc.strerror or str(exc)) from exc


def sync_directory(directory: str) -> None:
    """Makes the directory's entries (a rename into it) durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class _Taken(Exception):
    """``create_new``'s target exists: no ``OSError``, so ``_refusals`` lets it pass."""


def _link(temp: str, target: str) -> None:
    # link(2), unlike rename(2), fails on an existing target (on NFS as well).
    try:
        os.link(temp, target)
    except FileExistsError:
        raise _Taken from None


class LocalFileSystem(FileSystem):
    """The local file system, for plain paths and ``file://`` URIs."""

    def read_bytes(self, path: str) -> bytes:
        with open(local_path(path), "rb") as f:
            return f.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        self._write_whole(path, data, os.replace)

    def create_new(self, path: str, data: bytes) -> None:
        try:
            self._write_whole(path, data, _link)
        except _Taken:
            raise FileExistsError(f"{path} exists") from None

    def _write_whole(self, path: str, data: bytes, place) -> None:
        """Writes ``data`` durably to a temporary file beside ``path``, then ``place(temp,
        target)``s it (replacing or linking) and syncs the directory; the temporary
        file is gone afterwards."""
        target = local_path(path)
        directory = os.path.dirname(target) or "."
        with _refusals("write", path):
            os.makedirs(directory, exist_ok=True)
            temp = os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{os.path.basename(target)}")
            try:
                with open(temp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                place(temp, target)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
            sync_directory(directory)

    def replace(self, source: str, target: str) -> None:
        directory = os.path.dirname(local_path(target)) or "."
        with _refusals("write", target):
            os.makedirs(directory, exist_ok=True)
            os.replace(local_path(source), local_path(target))
            sync_directory(directory)

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def kind(self, path: str) -> str | None:
        """What ``path`` is (following links): ``"directory"``, ``"file"``, or None
        when nothing is there."""
        target = local_path(path)
        return "directory" if os.path.isdir(target) else "file" if os.path.exists(target) else None

    def list_names(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(local_path(path)))
        except FileNotFoundError:
            return []

    def status(self, path: str) -> FileStatus:
        """File ``path`` as a listing of its directory shows it; ``FileNotFoundError``
        when it does not exist."""
        target = local_path(path)
        return _status(os.path.basename(target), os.stat(target))

    def list_files(self, path: str) -> list[FileStatus]:
        """The files (not directories) in directory ``path``, by name;
        ``FileNotFoundError`` when it does not exist."""
        files = []
        for entry in os.scandir(local_path(path)):
            try:
                if entry.is_file():
                    files.append(_status(entry.name, entry.stat()))
            except FileNotFoundError:  # deleted since the listing
                continue
        return sorted(files, key=lambda f: f.name)

    def open_input(self, path: str) -> BinaryIO:
        """File ``path`` opened for reading, seekable."""
        return open(local_path(path), "rb")

    def delete(self, path: str) -> None:
        target = local_path(path)
        with _refusals("delete", path):
            if os.path.isdir(target):
                shutil.rmtree(target)
            elif os.path.lexists(target):
                os.unlink(target)

    def mkdirs(self, path: str) -> None:
        with _refusals("create directory", path):
            os.makedirs(local_path(path), exist_ok=True)


def _status(name: str, stat: os.stat_result) -> FileStatus:
    return FileStatus(name, stat.st_size, stat.st_mtime_ns)
