"""The generator source: message ``i`` (from 0) has key ``k{i % keys}``, value ``i``
and event time ``(i + 1) * step_ms`` (like Gearpump's number generator: time follows
the sequence), so rewinding to any event time is arithmetic. Bounded (``total``)
or endless, at a rate or as fast as Spark reads.

A bounded generator read as fast as Spark reads, in a job, writes its messages into
the job directory before the query starts, from the first one at or after the start
time: Parquet files of ``max_rows_per_batch`` messages each (``DIR/generated/``),
which Spark's own file source reads, a file a micro-batch. The micro-batches are
those the generator's Python data source makes, and no Python process reads them: a
run starts about two seconds sooner. More than ``MOST_FILES`` micro-batches are read
by the Python data source, as writing them would cost more time than it saves. A
restart on Spark's checkpoint (path A) reads the same files (and new ones after them
for a higher ``total``); a fresh start or one from the clock (path B) writes them anew.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from persistent.core.errors import ConfigError, RestartRefusedError
from persistent.core.task import MESSAGE_COLUMNS
from persistent.sources.base import Backlog, Source
from persistent.sources.bounds import BoundedReader
from persistent.storage.filesystems import JobStorage
from persistent.storage.spark_log import literal_path

__all__ = ["GeneratorSource"]

#: Rows per Arrow record batch the reader yields.
_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class GeneratorSource(Source):
    """Deterministic numbered messages; see the module docstring."""

    keys: int = 10
    total: int | None = None
    rows_per_second: float | None = None
    step_ms: int = 1
    max_rows_per_batch: int = 100_000
    key_type = "string"
    value_type = "bigint"
    format = "persistent_generator"

    @staticmethod
    def reader(options: dict[str, str]) -> DataSourceStreamReader:
        return _GeneratorReader(options)

    def __post_init__(self):
        for name in ("keys", "step_ms", "max_rows_per_batch"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"generator source: {name} must be > 0, got {getattr(self, name)}")

    def options(self, start_ms: int) -> dict[str, str]:
        return {
            "keys": str(self.keys),
            "total": "" if self.total is None else str(self.total),
            "rows_per_second": "" if self.rows_per_second is None else str(self.rows_per_second),
            "step_ms": str(self.step_ms),
            "max_rows_per_batch": str(self.max_rows_per_batch),
            "start_ms": str(start_ms),
        }

    @property
    def written(self) -> bool:
        """Whether a job writes the messages into its directory as files (the module's
        docstring): bounded, and read as fast as Spark reads."""
        return self.total is not None and self.rows_per_second is None

    def stream(self, spark, start_ms: int = 0, job: JobStorage | None = None, available_now: bool = False):
        if job is None or not self.written or not self._write(start_ms, job):
            return super().stream(spark, start_ms, job, available_now)
        return (spark.readStream.schema(self.row_schema({})).option("maxFilesPerTrigger", 1)
                .parquet(literal_path(job.directory().fs.join(job.root, GENERATED))))

    def _write(self, start_ms: int, job: JobStorage) -> bool:
        """Writes the messages from ``start_ms`` on into ``DIR/generated/`` before a query
        of the job directory starts (a fresh start, path B), unless they make more than
        ``MOST_FILES`` micro-batches (then False: the Python data source reads them, as
        writing them would take longer than it saves). A restart on Spark's
        checkpoint (path A) reads the files written before it, which must be of this
        generator from this time, and of a ``total`` it may raise (the messages after
        the old one are new files). False for a Spark checkpoint of a query that read
        the generator's Python data source (written before its messages were files).

        The files, named by their first message, are written oldest first, and their
        record (``_generator.json``, which Spark's file source skips, as it does the
        temporary files) last."""
        directory = job.directory()
        fs = directory.fs
        generated = fs.join(job.root, GENERATED)
        record = fs.join(generated, _RECORD)
        settings = {"keys": self.keys, "step_ms": self.step_ms, "max_rows_per_batch": self.max_rows_per_batch,
                    "first": _first_index(start_ms, self.step_ms), "total": self.total}
        if directory.spark_log.started():
            if not fs.exists(record):
                return False
            written = json.loads(fs.read_bytes(record))
            if {**written, "total": self.total} != settings or written["total"] > self.total:
                raise RestartRefusedError(
                    f"the generator's messages in {generated} are {written}, not {settings} (a total may only "
                    f"grow): a restart on Spark's checkpoint reads them again. Restart with those settings, or "
                    f"delete {directory.spark} to restart from the clock (path B) with these"
                )
            if written["total"] == self.total:
                return True
            # Files after the recorded total are of a start that ended before its query began.
            low = max(settings["first"], written["total"])
            for name in _files(fs, generated):
                if int(name.split(".")[0]) >= low:
                    fs.delete(fs.join(generated, name))
        else:
            fs.delete(generated)
            low = settings["first"]
            if -(-(self.total - low) // self.max_rows_per_batch) > MOST_FILES:
                return False
        # Spark's file source takes files in the order of their times of modification,
        # which it reads in milliseconds: each file's must be after the one before.
        kept = fs.list_files(generated) if fs.exists(generated) else []
        modified_ms = max((_modified_ms(f) for f in kept if _holds_messages(f.name)), default=-1)
        for start in range(low, self.total, self.max_rows_per_batch):
            modified_ms = _write_after(fs, generated, f"{start:020d}.parquet", _parquet(
                _messages(self.keys, self.step_ms, start, min(start + self.max_rows_per_batch, self.total))),
                modified_ms)
        fs.write_atomic(record, json.dumps(settings).encode())
        return True

    def backlog(self, start_ms: int = 0, job: JobStorage | None = None) -> Backlog | None:
        if not self.written:
            return None
        fs = None if job is None else job.directory().fs
        generated = None if job is None else fs.join(job.root, GENERATED)
        if fs is None or not fs.exists(fs.join(generated, _RECORD)):
            return Backlog("index", _first_index(start_ms, self.step_ms), self.total, "messages")
        # Spark's file source numbers its micro-batches from 0 (``logOffset``): a file each.
        return Backlog("logOffset", -1, len(_files(fs, generated)) - 1, "micro-batches")


#: The most micro-batches a generator writes as files at a start (``GeneratorSource._write``).
MOST_FILES = 100
#: The directory, in a job directory, of a generator's messages as files.
GENERATED = "generated"
#: The record of what the files hold, written after them.
_RECORD = "_generator.json"
#: The pause before writing a file again whose time of modification is not yet later.
_FILE_TIME_STEP_S = 0.002


def _modified_ms(status) -> int:
    """A file's time of modification as Spark's file source reads it, in milliseconds."""
    return status.mtime_ns // 1_000_000


def _write_after(fs, directory: str, name: str, data: bytes, after_ms: int) -> int:
    """Writes file ``name`` of ``directory`` until its time of modification is after
    ``after_ms`` (a file system's clock may step by several milliseconds); returns it."""
    path = fs.join(directory, name)
    while True:
        fs.write_atomic(path, data)
        modified_ms = _modified_ms(fs.status(path))
        if modified_ms > after_ms:
            return modified_ms
        time.sleep(_FILE_TIME_STEP_S)


def _files(fs, generated: str) -> list[str]:
    """The names of the generator's files in ``generated`` (not temporary ones, which are hidden)."""
    names = fs.list_names(generated) if fs.exists(generated) else []
    return [name for name in names if _holds_messages(name)]


def _holds_messages(name: str) -> bool:
    """Whether a file of ``DIR/generated/`` is one of messages (not a temporary one)."""
    return name.endswith(".parquet") and not name.startswith(".")


def _messages(keys: int, step_ms: int, low: int, high: int):
    """The messages ``low`` to ``high`` (excluded), as an Arrow record batch."""
    import numpy as np
    import pyarrow as pa

    index = np.arange(low, high, dtype=np.int64)
    names = pa.array([f"k{k}" for k in range(keys)])
    return pa.RecordBatch.from_arrays([names.take(index % keys), (index + 1) * step_ms, index],
                                      names=MESSAGE_COLUMNS)


def _parquet(batch) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), out)
    return out.getvalue()


def _first_index(start_ms: int, step_ms: int) -> int:
    """The first generated message at or after ``start_ms``: rewinding is arithmetic."""
    return max(0, -(-start_ms // step_ms) - 1)


@dataclass(frozen=True)
class _Range(InputPartition):
    start: int
    end: int


class _GeneratorReader(BoundedReader):
    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.keys = int(options["keys"])
        self.total = int(options["total"]) if options.get("total") else None
        self.rate = float(options["rows_per_second"]) if options.get("rows_per_second") else None
        self.step_ms = int(options["step_ms"])
        self.max_rows = int(options["max_rows_per_batch"])
        self.first = _first_index(int(options.get("start_ms", "0")), self.step_ms)
        self.started = time.monotonic()
        self.target: int | None = None

    def initialOffset(self) -> dict:
        return {"index": self.first}

    def _available(self) -> int:
        end = self.total if self.total is not None else 2**62
        if self.rate is not None:
            end = min(end, self.first + int((time.monotonic() - self.started) * self.rate))
        return end if self.target is None else min(end, self.target)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._available()

    def most(self) -> int:
        return self.max_rows

    def end(self, start: dict, most: int | None) -> dict:
        end = self._available()
        if most is not None:
            end = min(end, start["index"] + most)
        return {"index": max(end, start["index"])}

    def ranges(self, start: dict, end: dict):
        return [_Range(start["index"], end["index"])]

    def read(self, partition: _Range):
        for low in range(partition.start, partition.end, _BATCH_ROWS):
            yield _messages(self.keys, self.step_ms, low, min(low + _BATCH_ROWS, partition.end))

