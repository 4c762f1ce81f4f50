"""The key groups' function (``persistent.runtime.stateful``) without Spark: fakes of
Spark's ``GroupState`` and of the job's accumulator, and Spark's rows of a key group
(``persistent.runtime.rows``) as ``applyInPandasWithState`` hands them over."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyarrow as pa

from persistent.core.badrecords import BAD_RECORD_COLUMN, BadRecord
from persistent.core.task import MESSAGE_COLUMNS
from persistent.runtime.reports import Reports
from persistent.runtime.rows import (EVENT_TIME, GROUP, JOB_WATERMARK_PROPERTY, KEY, KIND, PACKED, PACKED_SEQ, PART,
                                     TIMESTAMP, VALUE, WATERMARK_LAG_MS, Kind)


class GroupState:
    """What ``GroupFunction`` uses of Spark's ``GroupState``: the state's one value, the
    watermark (``watermark_ms``, the job's), the timeout; without ``timeouts`` (a query
    of ``GroupStateTimeout.NoTimeout``), setting one raises, as Spark's does."""

    def __init__(self, watermark_ms: int, timeouts: bool = True):
        self.value, self.watermark_ms, self.timeout_ms = None, watermark_ms, None
        self.timeouts = timeouts

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return (self.value,)

    def update(self, value: tuple) -> None:
        (self.value,) = value

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 (Spark's name)
        return self.watermark_ms - WATERMARK_LAG_MS  # Spark's trails the job's

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 (Spark's name)
        if not self.timeouts:
            raise RuntimeError("Cannot set timeout timestamp without enabling event time timeout")
        self.timeout_ms = ms

    @property
    def timed_out(self) -> bool:
        """Whether Spark fires the group's event-time timeout: its watermark has passed it."""
        return self.timeout_ms is not None and self.timeout_ms < self.getCurrentWatermarkMs()


@contextmanager
def given_watermark(watermark_ms: int) -> Iterator[None]:
    """Runs the block as a Spark task of a micro-batch whose job's watermark the driver
    gave as ``watermark_ms`` (``rows.JOB_WATERMARK_PROPERTY``)."""
    from pyspark import TaskContext

    TaskContext._setTaskContext(TaskContext(localProperties={JOB_WATERMARK_PROPERTY: str(watermark_ms)}))
    try:
        yield
    finally:
        TaskContext._setTaskContext(None)


class Accumulator:
    """The job's accumulator of reports on one process: the reports by key group, the latest of each."""

    def __init__(self):
        self.value = Reports().zero({})

    def add(self, more: dict) -> None:
        self.value = Reports().addInPlace(self.value, more)


def spark_rows(kinds: list[Kind], keys: list, times: list, values: list, marks: list, parts: list) -> pd.DataFrame:
    """A key group's rows as ``applyInPandasWithState`` hands them over: with a null,
    Spark's bigint column arrives as floats."""
    n = len(kinds)
    return pd.DataFrame({
        KEY: keys, TIMESTAMP: pd.Series(times, dtype=np.float64 if None in times else np.int64),
        VALUE: values, BAD_RECORD_COLUMN: pd.Series(marks, dtype=object), PART: np.array(parts, dtype=np.int32),
        KIND: np.array(kinds, dtype=np.int8), GROUP: np.zeros(n, dtype=np.int32),
        EVENT_TIME: pd.Series([pd.NaT] * n, dtype="datetime64[ns]"),
    })


def frame(messages: list[tuple[str, int, int, int]], beats: int = 0) -> pd.DataFrame:
    """Spark's rows of ``(key, timestamp, value, part)`` messages for a key group, then
    ``beats`` heartbeat rows: no event time, fillers for key and value."""
    keys, times, values, parts = (list(column) for column in zip(*messages)) if messages else ([], [], [], [])
    n = len(messages)
    return spark_rows([Kind.MESSAGE] * n + [Kind.HEARTBEAT] * beats, keys + [None] * beats,
                      times + [None] * beats, values + [0] * beats, [None] * (n + beats), parts + [-1] * beats)


def rows(keys: list[str], timestamp_ms: int) -> pd.DataFrame:
    """Spark's rows of messages of value 1, all at ``timestamp_ms``."""
    return frame([(key, timestamp_ms, 1, 0) for key in keys])


def marked(record: BadRecord, timestamp_ms: int | None = None, part: int = 0) -> pd.DataFrame:
    """Spark's row of a record marked bad: fillers for key and value, its event time if any."""
    return spark_rows([Kind.BAD_RECORD], [None], [timestamp_ms], [0], [record.json()], [part])


def packed(messages: list[tuple[str, int, int, int]], seq: int) -> pd.DataFrame:
    """Spark's row of a pack (``persistent.runtime.fold.packed``) of ``(key, timestamp,
    value, part)`` messages of one source partition, the ``seq``-th of its packs there:
    fillers for key, time and value, the messages' ``MESSAGE_COLUMNS`` (those
    ``fold.packed`` has Spark's half pack) as an Arrow stream."""
    keys, times, values, parts = (list(column) for column in zip(*messages))
    table = pa.table([pa.array(keys, pa.string()), pa.array(times, pa.int64()), pa.array(values, pa.int64())],
                     names=list(MESSAGE_COLUMNS))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    row = spark_rows([Kind.PACKED], [None], [None], [0], [None], [parts[0]])
    return row.assign(**{PACKED: [sink.getvalue().to_pybytes()], PACKED_SEQ: [seq]})


def unpacked(chunk: pd.DataFrame) -> pd.DataFrame:
    """A packing job's ``chunk`` of rows that holds no pack: its packs' columns null."""
    return chunk.assign(**{PACKED: pd.Series([None] * len(chunk), dtype=object),
                           PACKED_SEQ: np.full(len(chunk), np.nan)})
