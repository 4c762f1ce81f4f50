"""The file systems a Python process reaches without a JVM: where key groups write and
read their checkpoints on the executors, and what the command line reads.

- local paths and ``file://`` URIs: ``persistent.storage.fs.LocalFileSystem`` (plain Python I/O);
- ``webhdfs://NAMENODE[:HTTP_PORT]/PATH`` and ``hdfs://NAMENODE[:RPC_PORT]/PATH``:
  ``persistent.storage.webhdfs.WebHdfsFileSystem``, HDFS over HTTP. For ``hdfs://`` the
  NameNode's HTTP address is ``http_address`` when given (a job's
  ``webhdfs_address``), else the NameNode's host on port 9870;
- ``s3://`` (``s3a://``) and ``gs://`` (``gcs://``) object stores:
  ``persistent.storage.arrow_fs.ArrowFileSystem``, through ``pyarrow.fs``.

A job's checkpoint directory must be on one of these, since every executor writes
there; ``filesystem_for`` refuses anything else with one sentence saying what works.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from persistent.core.errors import ConfigError
from persistent.storage.arrow_fs import ArrowFileSystem
from persistent.storage.arrow_fs import SCHEMES as ARROW_SCHEMES
from persistent.storage.fs import FileSystem, LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.storage.webhdfs import SCHEMES as WEBHDFS_SCHEMES
from persistent.storage.webhdfs import WebHdfsFileSystem

__all__ = ["UnsupportedFileSystemError", "filesystem_for", "cached_filesystem", "JobStorage"]


class UnsupportedFileSystemError(ConfigError):
    """A URI whose scheme no file system here serves."""


def filesystem_for(uri: str, http_address: str | None = None) -> FileSystem:
    """The file system of ``uri``; ``UnsupportedFileSystemError`` for a scheme none serves."""
    scheme = urlparse(uri).scheme
    if scheme in ("", "file"):
        return LocalFileSystem()
    if scheme in WEBHDFS_SCHEMES:
        return WebHdfsFileSystem(uri, http_address=http_address)
    if scheme in ARROW_SCHEMES:
        return ArrowFileSystem(uri)
    raise UnsupportedFileSystemError(
        f"{uri} cannot be reached without a JVM: give a local path or file:// URI (on a cluster, a "
        f"directory every node shares), an hdfs:// URI (reached over WebHDFS), webhdfs://NAMENODE:9870/PATH, or an "
        f"s3://, s3a://, gs:// or gcs:// URI"
    )


_cache: dict[tuple[str, str | None], FileSystem] = {}


def cached_filesystem(uri: str, http_address: str | None = None) -> FileSystem:
    """``filesystem_for``, made once per process and (scheme, authority): a Python worker
    runs many micro-batches, and a WebHDFS client keeps its connections."""
    parsed = urlparse(uri)
    key = (f"{parsed.scheme}://{parsed.netloc}", http_address)
    if key not in _cache:
        _cache[key] = filesystem_for(uri, http_address)
    return _cache[key]


@dataclass(frozen=True)
class JobStorage:
    """A job directory as the key groups open it on the executors: a URI (and the
    WebHDFS address for ``hdfs://``) that travels with Spark's function, not a file
    system object."""

    root: str
    webhdfs_address: str | None = None

    def directory(self) -> JobDirectory:
        return JobDirectory(cached_filesystem(self.root, self.webhdfs_address), self.root)
