"""A job's sink named by one string, as the command line and the examples take it."""

from __future__ import annotations

from urllib.parse import urlparse

from persistent.core.errors import ConfigError
from persistent.sinks.base import Sink
from persistent.sinks.console import ConsoleSink
from persistent.sinks.kafka import kafka_sink_from_uri
from persistent.sinks.parquet import ParquetSink
from persistent.sinks.postgres import PostgresSink
from persistent.sinks.sqlite import SQLiteSink

__all__ = ["sink_from_uri", "SPELLINGS", "DIRECTORY_SCHEMES"]

#: What ``sink_from_uri`` takes, as its errors and the command line's help name it.
SPELLINGS = ("sqlite:///PATH, postgresql://USER@HOST:PORT/DATABASE, kafka://HOST:PORT/TOPIC, a Parquet directory, "
             "or console")
#: The schemes of a Parquet directory: the file systems Spark writes it on (Hadoop's).
DIRECTORY_SCHEMES = ("file", "hdfs", "webhdfs", "viewfs", "s3", "s3a", "gs", "abfs", "abfss", "wasb", "wasbs")


def sink_from_uri(uri: str, table: str = "results", key_column: str = "key", value_column: str = "value") -> Sink:
    """``sqlite://PATH`` (``sqlite:///tmp/out.db`` is ``/tmp/out.db``), ``postgresql://...``
    or ``postgres://...`` (a libpq URI), ``kafka://HOST:PORT/TOPIC`` (producer options
    as a query: ``?kafka.security.protocol=SSL``), ``console``, or a directory (Parquet): a local
    path or a URI of one of ``DIRECTORY_SCHEMES``. Anything else is a ``ConfigError``
    naming it: a URI of another scheme is not taken for a directory."""
    scheme = urlparse(uri).scheme.lower()
    if scheme == "sqlite":
        path = uri[len("sqlite://") :] if uri.startswith("sqlite://") else ""
        if not path:
            raise ConfigError(
                f"output {uri!r}: a SQLite database is sqlite:// then its path, as in sqlite:///tmp/out.db"
            )
        return SQLiteSink(path, table, key_column, value_column)
    if scheme in ("postgresql", "postgres"):
        if not uri.lower().startswith(f"{scheme}://"):
            raise ConfigError(f"output {uri!r}: a PostgreSQL database is postgresql://USER@HOST:PORT/DATABASE")
        return PostgresSink(uri, table, key_column, value_column)
    if scheme == "kafka":
        return kafka_sink_from_uri(uri)
    if uri == "console":
        return ConsoleSink()
    if scheme and scheme not in DIRECTORY_SCHEMES:
        raise ConfigError(
            f"output {uri!r}: no sink has the scheme {scheme}:// (give {SPELLINGS}; a Parquet directory is a local "
            f"path or a {', '.join(s + '://' for s in DIRECTORY_SCHEMES)} URI)"
        )
    return ParquetSink(uri, key_column, value_column)
