"""``persistent.storage.fs.FileSystem`` over object stores, through ``pyarrow.fs``: no JVM needed.

Paths are ``s3://BUCKET/KEY`` (or ``s3a://BUCKET/KEY``, the name Spark's Hadoop
connector gives the same object) and ``gs://BUCKET/KEY`` (or ``gcs://``) URIs.
pyarrow finds credentials and endpoints where the stores' own tools do: for S3 the
``AWS_*`` environment variables (``AWS_ENDPOINT_URL`` for a store other than AWS's),
``~/.aws``, or the instance's role; for GCS the application default credentials. On
a cluster, set them for the executors too (``spark.executorEnv.NAME``).

An object store has no rename, but a PUT is atomic: an object appears whole, with its
new bytes, or not at all. So ``write_atomic`` writes the target itself, and a reader
sees the old bytes or the new bytes, never a torn file. ``create_new`` cannot be atomic
without a conditional PUT, which pyarrow lacks: it looks, then writes (a job's lease
on an object store catches two starts at the same moment only by re-reading what it
wrote, ``persistent.storage.lease``). ``replace`` is a copy, then a
delete of the source: the target appears whole too, and a crash between the two
leaves the source behind (a rescale's staging directory, which it removes again).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import BinaryIO
from urllib.parse import urlparse

import pyarrow.fs as pafs

from persistent.core.errors import ConfigError
from persistent.storage.fs import FileStatus, FileSystem, storage_error

__all__ = ["ArrowFileSystem", "SCHEMES"]

#: The URI schemes served, and pyarrow's name for each.
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs"}


class ArrowFileSystem(FileSystem):
    """The objects of one bucket, named by URIs of one scheme."""

    def __init__(self, uri: str):
        parsed = urlparse(uri)
        if parsed.scheme not in SCHEMES or not parsed.netloc:
            raise ConfigError(f"{uri!r} is not an s3://, s3a://, gs:// or gcs:// URI naming a bucket")
        self.scheme, self.bucket = parsed.scheme, parsed.netloc
        self.arrow, _ = pafs.FileSystem.from_uri(f"{SCHEMES[parsed.scheme]}://{parsed.netloc}")

    def __repr__(self) -> str:
        return f"ArrowFileSystem({self.scheme}://{self.bucket})"

    def _path(self, uri: str) -> str:
        parsed = urlparse(uri)
        if parsed.scheme != self.scheme or parsed.netloc != self.bucket:
            raise ConfigError(f"{uri!r} is not in {self.scheme}://{self.bucket}")
        return f"{self.bucket}/{parsed.path.strip('/')}".rstrip("/")

    @contextlib.contextmanager
    def _errors(self, action: str, uri: str) -> Iterator[None]:
        """Turns pyarrow's errors into ``OSError``s naming the action and the URI."""
        try:
            yield
        except FileNotFoundError:
            raise FileNotFoundError(f"{uri} does not exist") from None
        except OSError as exc:
            raise storage_error(action, uri, str(exc)) from None

    def _type(self, uri: str) -> pafs.FileType:
        with self._errors("look up", uri):
            return self.arrow.get_file_info(self._path(uri)).type

    def read_bytes(self, path: str) -> bytes:
        with self._errors("read", path), self.arrow.open_input_stream(self._path(path)) as stream:
            return stream.read()

    def write_atomic(self, path: str, data: bytes) -> None:
        with self._errors("write", path), self.arrow.open_output_stream(self._path(path)) as stream:
            stream.write(data)

    def create_new(self, path: str, data: bytes) -> None:
        # Not atomic: pyarrow offers no conditional PUT, so two writers at the same
        # moment may both find no object, and the later PUT's bytes win.
        if self.exists(path):
            raise FileExistsError(f"{path} exists")
        self.write_atomic(path, data)

    def replace(self, source: str, target: str) -> None:
        with self._errors("write", target):
            self.arrow.move(self._path(source), self._path(target))

    def exists(self, path: str) -> bool:
        return self._type(path) != pafs.FileType.NotFound

    def list_names(self, path: str) -> list[str]:
        selector = pafs.FileSelector(self._path(path), allow_not_found=True)
        with self._errors("list", path):
            return sorted(info.base_name for info in self.arrow.get_file_info(selector))

    def status(self, path: str) -> FileStatus:
        """File ``path`` as a listing of its directory shows it; ``FileNotFoundError``
        when it does not exist."""
        with self._errors("look up", path):
            info = self.arrow.get_file_info(self._path(path))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{path} does not exist")
        return _status(info)

    def list_files(self, path: str) -> list[FileStatus]:
        """The files (not directories) in directory ``path``, by name;
        ``FileNotFoundError`` when it does not exist."""
        with self._errors("list", path):
            infos = self.arrow.get_file_info(pafs.FileSelector(self._path(path)))
        return sorted((_status(info) for info in infos if info.type == pafs.FileType.File), key=lambda f: f.name)

    def open_input(self, path: str) -> BinaryIO:
        """File ``path`` opened for reading, seekable."""
        with self._errors("read", path):
            return self.arrow.open_input_file(self._path(path))

    def delete(self, path: str) -> None:
        kind = self._type(path)
        with self._errors("delete", path):
            if kind == pafs.FileType.Directory:
                self.arrow.delete_dir(self._path(path))
            elif kind == pafs.FileType.File:
                self.arrow.delete_file(self._path(path))

    def mkdirs(self, path: str) -> None:
        with self._errors("create directory", path):
            self.arrow.create_dir(self._path(path), recursive=True)


def _status(info: pafs.FileInfo) -> FileStatus:
    return FileStatus(info.base_name, info.size, info.mtime_ns or 0)
