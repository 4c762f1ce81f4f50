"""``state.fs.FileSystem`` on Hadoop's FileSystem API, through the driver's JVM.

The same client Spark uses for its own checkpoint location, so ``hdfs://``,
``file://`` and every scheme configured in Hadoop work. Atomic replacement uses
``FileContext.rename(..., OVERWRITE)``, as Spark's checkpoint file manager does.
"""

from __future__ import annotations

import uuid

from state.fs import TEMP_PREFIX, FileSystem

__all__ = ["HadoopFileSystem"]


class HadoopFileSystem(FileSystem):
    """Files through ``org.apache.hadoop.fs`` in the JVM of a SparkSession."""

    def __init__(self, spark, uri: str):
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._path = jvm.org.apache.hadoop.fs.Path
        root = self._path(uri)
        self._fs = root.getFileSystem(self._conf)
        self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(root.toUri(), self._conf)
        rename = jvm.org.apache.hadoop.fs.Options.Rename
        self._overwrite = spark.sparkContext._gateway.new_array(rename, 1)
        self._overwrite[0] = rename.OVERWRITE

    def read_bytes(self, path: str) -> bytes:
        if not self._fs.exists(self._path(path)):
            raise FileNotFoundError(path)
        stream = self._fs.open(self._path(path))
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write_atomic(self, path: str, data: bytes) -> None:
        target = self._path(path)
        parent = target.getParent()
        self._fs.mkdirs(parent)
        temp = self._path(parent, f"{TEMP_PREFIX}{uuid.uuid4().hex}-{target.getName()}")
        out = self._fs.create(temp, True)
        try:
            out.write(bytearray(data))
            out.hsync()
        finally:
            out.close()
        self._context.rename(temp, target, self._overwrite)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list_names(self, path: str) -> list[str]:
        directory = self._path(path)
        if not self._fs.exists(directory):
            return []
        names = (status.getPath().getName() for status in self._fs.listStatus(directory))
        # Hadoop's local file system keeps a hidden ".NAME.crc" beside each file.
        return sorted(n for n in names if not (n.startswith(".") and n.endswith(".crc")))

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._path(path))
