"""``persistent.storage.fs.FileSystem`` on Hadoop's FileSystem API, through the driver's JVM.

The same client Spark uses for its own checkpoint location, so ``hdfs://``,
``file://`` and every scheme configured in Hadoop work. Atomic replacement uses
``FileContext.rename(..., OVERWRITE)``, as Spark's checkpoint file manager does, or
on the local file system POSIX rename, which replaces atomically; ``create_new``
renames without ``OVERWRITE`` (on the local file system: links), which refuses an
existing target.

Hadoop's checksummed local file system (``file://``) is bypassed for its raw one:
the records carry their own CRC32, so a damaged file is reported by the store that
reads it, and the checksummed stream keeps its file open (and the space it holds)
when a write fails on a full disk.

An exception from the JVM is raised as the ``state.errors.StorageError`` for the
path (``NoSpaceError``, ``NotWritableError``), with the Java exceptions' classes and
messages in one line instead of Py4J's Java stack trace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from py4j.java_gateway import is_instance_of
from py4j.protocol import Py4JJavaError

from persistent.storage.fs import TEMP_PREFIX, FileSystem, storage_error, sync_directory
from state.errors import NotWritableError

__all__ = ["HadoopFileSystem"]


def _java_detail(java_exception) -> str:
    """The classes and messages of a Java exception and its causes, on one line."""
    parts, seen = [], java_exception
    while seen is not None and len(parts) < 5:
        part = f"{seen.getClass().getName()}: {seen.getMessage()}"
        if not any(part in earlier for earlier in parts):  # a wrapper often repeats its cause
            parts.append(part)
        seen = seen.getCause()
    return " <- ".join(parts)


@contextmanager
def _refusals(action: str, path: str) -> Iterator[None]:
    """Raises a Java exception from the block as the ``StorageError`` for ``action`` on ``path``."""
    try:
        yield
    except Py4JJavaError as exc:
        raise storage_error(action, path, _java_detail(exc.java_exception)) from None


class HadoopFileSystem(FileSystem):
    """Files through ``org.apache.hadoop.fs`` in the JVM of a SparkSession."""

    def __init__(self, spark, uri: str):
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._path = jvm.org.apache.hadoop.fs.Path
        with _refusals("open the file system of", uri):
            root = self._path(uri)
            self._fs = root.getFileSystem(self._conf)
            self._local = is_instance_of(spark.sparkContext._gateway, self._fs, "org.apache.hadoop.fs.ChecksumFileSystem")
            if self._local:
                self._fs = self._fs.getRawFileSystem()
            self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(root.toUri(), self._conf)
        rename, self._gateway = jvm.org.apache.hadoop.fs.Options.Rename, spark.sparkContext._gateway
        self._overwrite = self._gateway.new_array(rename, 1)
        self._overwrite[0] = rename.OVERWRITE
        self._no_overwrite = self._gateway.new_array(rename, 0)

    def read_bytes(self, path: str) -> bytes:
        with _refusals("read", path):
            if not self._fs.exists(self._path(path)):
                raise FileNotFoundError(path)
            stream = self._fs.open(self._path(path))
            try:
                return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()

    def write_atomic(self, path: str, data: bytes) -> None:
        self._write_whole(path, data, self._replace)

    def create_new(self, path: str, data: bytes) -> None:
        self._write_whole(path, data, self._create)

    def _write_whole(self, path: str, data: bytes, place) -> None:
        """Writes ``data`` durably to a temporary file beside ``path``, then ``place(temp,
        target, path)``s it (``_replace``, ``_create``)."""
        with _refusals("write", path):
            target = self._path(path)
            parent = target.getParent()
            self._mkdirs(parent, "write", path)
            temp = self._path(parent, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{target.getName()}")
            out = self._fs.create(temp, True)
            try:
                try:
                    out.write(bytearray(data))
                    out.hsync()
                finally:
                    out.close()
                place(temp, target, path)
            except (Py4JJavaError, NotWritableError, FileExistsError):
                # The write's error is the one to report; readers ignore a temporary file left behind.
                with suppress(Py4JJavaError):
                    self._fs.delete(temp, False)
                raise

    def _replace(self, temp, target, path: str) -> None:
        """Renames ``temp`` to ``target`` atomically, replacing what is there."""
        if not self._local:
            self._context.rename(temp, target, self._overwrite)
        # On the local file system, rename(2) replaces atomically. FileContext's rename
        # would stat both paths first, forking `stat` for each (pyspark has no Hadoop
        # native library): three times the cost of the write. The raw file system's own
        # rename falls back to copying when rename(2) fails, which is not atomic.
        elif not self._fs.pathToFile(temp).renameTo(self._fs.pathToFile(target)):
            raise NotWritableError("write", path, "the file system refused to rename its temporary file")
        else:
            # The new directory entry is durable only once the directory is synced.
            sync_directory(self._fs.pathToFile(target.getParent()).getPath())

    def _create(self, temp, target, path: str) -> None:
        """Renames ``temp`` to ``target`` unless ``target`` exists (``FileExistsError``)."""
        if self._local:  # link(2) refuses an existing target; the raw file system's rename replaces it
            try:
                os.link(self._fs.pathToFile(temp).getPath(), self._fs.pathToFile(target).getPath())
            except FileExistsError:
                raise FileExistsError(f"{path} exists") from None
            self._fs.delete(temp, False)
            sync_directory(self._fs.pathToFile(target.getParent()).getPath())
            return
        try:
            self._context.rename(temp, target, self._no_overwrite)
        except Py4JJavaError as exc:
            if is_instance_of(self._gateway, exc.java_exception, "org.apache.hadoop.fs.FileAlreadyExistsException"):
                raise FileExistsError(f"{path} exists") from None
            raise

    def replace(self, source: str, target: str) -> None:
        with _refusals("write", target):
            destination = self._path(target)
            self._mkdirs(destination.getParent(), "write", target)
            self._replace(self._path(source), destination, target)

    def exists(self, path: str) -> bool:
        with _refusals("look up", path):
            return bool(self._fs.exists(self._path(path)))

    def list_names(self, path: str) -> list[str]:
        with _refusals("list", path):
            directory = self._path(path)
            if not self._fs.exists(directory):
                return []
            names = (status.getPath().getName() for status in self._fs.listStatus(directory))
            # Files written through Hadoop's checksummed local file system have a hidden ".NAME.crc".
            return sorted(n for n in names if not (n.startswith(".") and n.endswith(".crc")))

    def delete(self, path: str) -> None:
        with _refusals("delete", path):
            target = self._path(path)
            # The raw local file system answers False instead of raising when it may not delete.
            if not self._fs.delete(target, True) and self._fs.exists(target):
                raise NotWritableError("delete", path, "the file system refused to delete it")

    def mkdirs(self, path: str) -> None:
        with _refusals("create directory", path):
            self._mkdirs(self._path(path), "create directory", path)

    def _mkdirs(self, directory, action: str, path: str) -> None:
        # The raw local file system answers False instead of raising when it may not create.
        if not self._fs.mkdirs(directory):
            raise NotWritableError(action, path, f"the file system refused to create {directory.toString()}")
