"""What every source is: a time-replayable source of messages on Spark's Python Data
Source API.

A source can start at any event time ``T`` (recovery path B rewinds it to the
clock), reads deterministically between two offsets (so Spark's replay of a
micro-batch sees the same messages), bounds what one micro-batch reads, and
supports ``Trigger.AvailableNow``. Each produces raw messages with columns
``key``, ``timestamp`` (ms) and ``value``; a job's ``prepare`` step may reshape them.
A bounded source says how much an available-now run has to read (``Backlog``), for
the run's progress bar.

Event times start at 1 ms, not 0: the job's watermark starts at 1 ms (Spark's at 0),
and a message before it is late. (Later, the job's watermark is at most the newest
event time seen, so messages sharing the newest time are in order:
``persistent.runtime.stateful``.)
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from persistent.sources.bounds import AVAILABLE_NOW
from persistent.storage.filesystems import JobStorage

__all__ = ["Source", "Backlog", "python_data_source"]


@dataclass(frozen=True)
class Backlog:
    """What an available-now run reads from a bounded source: source positions from
    ``begin`` up to ``end``, counted in ``unit``. A position is the integer at
    ``field`` of the source's offset (the generator's ``{"index": n}``, the files
    source's ``{"files": n}``)."""

    field: str
    begin: int
    end: int
    unit: str

    def position(self, offset_json: str | None) -> int | None:
        """The position in an offset as Spark reports it (JSON text), or None."""
        try:
            offset = json.loads(offset_json or "null")
        except ValueError:
            return None
        position = offset.get(self.field) if isinstance(offset, dict) else None
        return position if isinstance(position, int) else None


class Source(ABC):
    """A time-replayable source of messages."""

    #: Spark type (DDL) of the ``key`` column.
    key_type = "string"
    #: Spark type (DDL) of the ``value`` column.
    value_type = "string"
    #: The stream reader of the Python data source that reads this source, made from
    #: the data source's options (``options``); None for a source whose ``stream``
    #: reads otherwise.
    reader: Callable[[dict[str, str]], DataSourceStreamReader] | None = None

    @classmethod
    def row_schema(cls, options: dict[str, str]) -> str:
        """The rows of the Python data source (Spark DDL) under its ``options``: messages."""
        return f"key {cls.key_type}, timestamp bigint, value {cls.value_type}"

    @abstractmethod
    def options(self, start_ms: int) -> dict[str, str]:
        """Options of the Spark data source, starting at event time ``start_ms``."""

    @property
    @abstractmethod
    def format(self) -> str:
        """Name of the registered Python data source."""

    def stream(self, spark, start_ms: int = 0, job: JobStorage | None = None, available_now: bool = False):
        """The streaming DataFrame of messages from event time ``start_ms`` on. ``job``
        is the job directory, where a source keeps what it must remember across
        restarts (the files source: the files it took). ``available_now``: the
        reader fixes its end when first asked, for an available-now run on a Spark
        that has none for Python sources (``persistent.sources.bounds``)."""
        spark.dataSource.register(self.data_source())
        options = self.options(start_ms)
        if job is not None:
            options |= {"job_directory": job.root, "webhdfs_address": job.webhdfs_address or ""}
        if available_now:
            options[AVAILABLE_NOW] = "true"
        return spark.readStream.format(self.format).options(**options).load()

    def data_source(self) -> type[DataSource]:
        """The Python data source that reads this source (for the default ``stream``):
        named ``format``, its rows ``row_schema``, read by ``reader``."""
        if self.reader is None:
            raise NotImplementedError(f"{type(self).__name__} names no Python data source")
        return python_data_source(self.format, type(self).row_schema, type(self).reader)

    def check(self, start_ms: int | None, job: JobStorage | None = None) -> None:
        """Refuses, before a run of job directory ``job`` starts, input that it could not
        read exactly. ``start_ms``: the event time the run rereads from (None: Spark's
        checkpoint says where it goes on)."""

    def rewind_positions(self):
        """``positions(clock_ms)``: where a rewind to ``clock_ms`` starts, as the input
        is now (JSON-ready: topic, then partition, then offset), for a source whose
        input may be deleted under it (Kafka's retention); the driver records it before
        the clock reaches ``clock_ms``, and ``check`` compares it with the input on a
        restart from the clock; ``positions.close()`` releases what it holds when the
        job stops. None for a source that needs no record."""
        return None

    def backlog(self, start_ms: int = 0, job: JobStorage | None = None) -> Backlog | None:
        """What an available-now run from event time ``start_ms`` (in job directory
        ``job``) has to read, for its progress bar; None when the source cannot say (an
        unbounded input)."""
        return None


#: The module Spark runs (``python -m``) for the driver's side of a Python data source's stream.
STREAM_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"


def _quiet_when_spark_hangs_up() -> None:
    """In a stream runner process (``STREAM_RUNNER``), ends the process without a
    traceback when it loses its connection to Spark. When a query stops, the runner's
    socket can close before Spark kills the process (``PythonStreamingSourceRunner.stop``
    kills it; a stopping query's thread may close the socket first); a runner waiting
    on the socket then printed the lost connection's traceback on the job's terminal
    (seen at a Ctrl-C).
    An error of the reader itself goes to Spark over the socket, and the runner exits
    without a traceback: a connection error that reaches the top means Spark hung up."""
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    if main is None or main.name != STREAM_RUNNER or sys.excepthook is not sys.__excepthook__:
        return

    def hook(kind, value, traceback):
        if not issubclass(kind, ConnectionError):
            sys.__excepthook__(kind, value, traceback)

    sys.excepthook = hook


def python_data_source(name: str, schema: Callable[[dict[str, str]], str],
                       reader: Callable[[dict[str, str]], DataSourceStreamReader]) -> type[DataSource]:
    """The Python data source ``name`` whose rows are ``schema(options)`` and whose stream
    ``reader(options)`` reads, for its options."""

    class _DataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return schema(self.options)

        def streamReader(self, schema):
            _quiet_when_spark_hangs_up()
            return reader(self.options)

    return _DataSource
