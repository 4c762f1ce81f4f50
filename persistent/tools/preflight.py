"""The checks a job passes before its Spark session is built: what can be seen in a
second without a JVM, refused with one sentence naming what and where, before
anything is created.

``check_job`` looks at a job as ``Job`` made it: its local checkpoint directory (and
whether another job holds its lease, ``persistent.storage.lease``), its SQLite database
or local Parquet directory, the local input directory of a files
source, the brokers of a Kafka source or sink (one metadata request with the driver's
Kafka options: a failed login or an untrusted certificate is refused, naming the
brokers; ``persistent.sources.kafka_client``), the metrics client when it serves metrics,
and the Spark master. Directories on other file systems are left to the job's start:
reaching them takes longer than a check should.
"""

from __future__ import annotations

import os
import re
import socket
from typing import TYPE_CHECKING

from persistent.core.errors import ConfigError, SetupError
from persistent.runtime.metrics import prometheus_client
from persistent.sinks.kafka import KafkaSink
from persistent.sinks.parquet import ParquetSink
from persistent.sinks.sqlite import SQLiteSink
from persistent.sources.files import FilesSource
from persistent.sources.kafka import KafkaSource
from persistent.storage.fs import LocalFileSystem, local_path
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import check_free

if TYPE_CHECKING:
    from persistent.runtime.job import Job

__all__ = ["check_job", "check_master", "MASTER_TIMEOUT_SECONDS"]

#: How long ``check_master`` waits for a standalone master to accept a connection.
MASTER_TIMEOUT_SECONDS = 2.0

#: Spark's master URLs: local[N|*[,F]], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://...
_MASTER = re.compile(
    r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://[^/,:]+:\d+(,[^/,:]+:\d+)*|yarn|k8s://.+"
)


def check_job(job: Job, master: str | None) -> None:
    """Refuses (``ConfigError``, ``SetupError``) what would fail ``job`` on ``master``
    (None: spark-submit's or the session's default) once Spark had started; creates
    nothing."""
    _check_directory_path(job.checkpoint_dir, "checkpoint directory")
    if _local(job.checkpoint_dir) is not None:
        check_free(JobDirectory(_LOCAL, job.checkpoint_dir))
    if isinstance(job.sink, SQLiteSink):
        _check_file_path(job.sink.database, "SQLite database")
    elif isinstance(job.sink, ParquetSink):
        _check_directory_path(job.sink.directory, "Parquet output directory")
    if isinstance(job.source, FilesSource):
        _check_input_directory(job.source.directory)
    for kafka in (job.source, job.sink):
        if isinstance(kafka, (KafkaSource, KafkaSink)):
            kafka.check_brokers()
    if job.metrics_port is not None:
        prometheus_client(job.metrics_port)
    if master:
        check_master(master)


def check_master(master: str, option: str = "--master") -> None:
    """Refuses a ``master`` (given as ``option``) that is no Spark master URL, and a
    ``spark://`` master none of whose hosts accepts a connection within
    ``MASTER_TIMEOUT_SECONDS``."""
    if not _MASTER.fullmatch(master):
        raise ConfigError(
            f"{option} {master!r} is not a Spark master: give local[N], local[*], spark://HOST:PORT, yarn or "
            "k8s://HOST:PORT"
        )
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=MASTER_TIMEOUT_SECONDS):
                return
        except OSError as exc:
            problems.append(f"{address}: {exc.strerror or exc}")
    raise SetupError(f"{option} {master}: no Spark master answers ({'; '.join(problems)})")


#: Where the local paths a job names are looked at.
_LOCAL = LocalFileSystem()


def _local(uri: str) -> str | None:
    """The local path of ``uri``, None when it is on another file system."""
    try:
        return os.path.abspath(local_path(uri))
    except ValueError:
        return None


def _file_on_the_way(path: str) -> str | None:
    """The nearest existing ancestor of ``path`` when it is not a directory."""
    parent = os.path.dirname(path)
    while parent != os.path.dirname(parent) and not _LOCAL.exists(parent):
        parent = os.path.dirname(parent)
    return None if _LOCAL.kind(parent) == "directory" else parent


def _check_directory_path(uri: str, what: str) -> None:
    """A directory the job makes or uses: not a file, and not under one."""
    path = _local(uri)
    if path is None:
        return
    if _LOCAL.kind(path) == "file":
        raise ConfigError(f"{what} {uri} is a file, not a directory")
    _check_parents(uri, path, what)


def _check_file_path(uri: str, what: str) -> None:
    """A file the job makes or uses: not a directory, and not under a file."""
    path = _local(uri)
    if path is None:
        return
    if _LOCAL.kind(path) == "directory":
        raise ConfigError(f"{what} {uri} is a directory, not a file")
    _check_parents(uri, path, what)


def _check_parents(uri: str, path: str, what: str) -> None:
    blocker = _file_on_the_way(path)
    if blocker is not None:
        raise ConfigError(f"{what} {uri} cannot be made: {blocker} is a file, not a directory")


def _check_input_directory(uri: str) -> None:
    path = _local(uri)
    if path is None:
        return
    kind = _LOCAL.kind(path)
    if kind is None:
        raise ConfigError(f"input directory {uri} does not exist")
    if kind != "directory":
        raise ConfigError(f"input directory {uri} is a file, not a directory")
