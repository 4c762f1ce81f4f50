"""A job's sink named by one string, as the command line and the examples take it."""

from __future__ import annotations

from persistent.sinks.base import Sink
from persistent.sinks.console import ConsoleSink
from persistent.sinks.parquet import ParquetSink
from persistent.sinks.postgres import PostgresSink
from persistent.sinks.sqlite import SQLiteSink

__all__ = ["sink_from_uri"]


def sink_from_uri(uri: str, table: str = "results", key_column: str = "key", value_column: str = "value") -> Sink:
    """``sqlite:///PATH``, ``postgresql://...`` (a libpq URI), ``console`` or a directory (Parquet)."""
    if uri.startswith("sqlite://"):
        return SQLiteSink(uri[len("sqlite://") :], table, key_column, value_column)
    if uri.startswith(("postgresql://", "postgres://")):
        return PostgresSink(uri, table, key_column, value_column)
    if uri == "console":
        return ConsoleSink()
    return ParquetSink(uri, key_column, value_column)
