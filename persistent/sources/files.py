"""The files source: a directory of text, JSON-lines or Parquet files, on any file
system of ``persistent.storage.filesystems`` (a local path, ``file://``, ``hdfs://``
over WebHDFS, ``webhdfs://``, ``s3://``, ``gs://``).

The driver lists the directory, the executors read the files (names starting with
``.`` or ``_`` are not input). New files are taken into the job's log of files
(``persistent.storage.files_log``) in the order they were written (modification time,
then name), as a run that kept up with them would have read them, so a backlog of
several producers' files after a stop is read as they were written, not one producer's
after another's: a file read is never read again, whatever sorts before it later, and
a read file that changes is refused. Line ``n``
(from 0) of the ``f``-th text file taken has event time ``f * FILE_SPAN_MS + n + 1``;
JSON lines and Parquet rows carry their time in a field. Every text line is a
message (bytes that are not UTF-8 read as U+FFFD). A JSON line or Parquet row that
cannot be read (a line that is not UTF-8 or not a JSON object, a missing, null or
non-integer key or time, a file without the key or time column) is not an error of
the reader: its row has a ``bad_record`` column (``persistent.core.badrecords``)
naming the file and line or row, the record and the reason, and the job decides
what to do with it.
"""

from __future__ import annotations

import enum
import io
import json
import os
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urlparse

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from persistent.core.badrecords import BAD_RECORD_COLUMN, BadRecord
from persistent.core.choices import Choice
from persistent.core.errors import ConfigError, InputError
from persistent.core.task import MESSAGE_COLUMNS
from persistent.sources.base import Backlog, Source
from persistent.sources.bounds import BoundedReader
from persistent.storage.files_log import FilesLog, InputFileSystem, listing
from persistent.storage.filesystems import JobStorage, cached_filesystem
from persistent.storage.fs import FileStatus

__all__ = ["FilesSource", "FileFormat", "FILE_SPAN_MS"]

#: Event-time span of one text file: line n of file f is at f * FILE_SPAN_MS + n + 1.
FILE_SPAN_MS = 1_000_000

#: Columns of the files source: a message, or a bad record (``persistent.core.badrecords``).
_FILES_COLUMNS = [*MESSAGE_COLUMNS, BAD_RECORD_COLUMN]


class FileFormat(Choice, enum.StrEnum):
    """The format of a files source's files."""

    #: Lines of text, each a message timed by its place (``FILE_SPAN_MS``).
    TEXT = "text"
    #: JSON lines, each an object holding the key and the time.
    JSONL = "jsonl"
    #: Parquet files, each row holding the key and the time.
    PARQUET = "parquet"


@dataclass(frozen=True)
class FilesSource(Source):
    """Text, JSON-lines or Parquet files in ``directory``; see the module docstring.

    ``file_format`` is a ``FileFormat`` or its value (``"text"``, ``"jsonl"``, ``"parquet"``).

    For JSON lines and Parquet, ``timestamp_field`` holds the event time (ms, or a
    Parquet timestamp), ``key_field`` the key, and the whole record (as JSON) is the value.
    For an ``hdfs://`` directory, ``webhdfs_address`` is the NameNode's HTTP address
    (default: its host, port 9870).
    """

    directory: str
    file_format: FileFormat | str = FileFormat.TEXT
    max_files_per_batch: int = 1
    timestamp_field: str = "timestamp"
    key_field: str = "key"
    webhdfs_address: str | None = None
    key_type = "string"
    value_type = "string"
    format = "persistent_files"

    @staticmethod
    def reader(options: dict[str, str]) -> DataSourceStreamReader:
        return _FilesReader(options)

    @classmethod
    def row_schema(cls, options: dict[str, str]) -> str:
        # Text lines are all messages; JSON lines and Parquet rows may be bad records.
        text = FileFormat(options.get("file_format", FileFormat.TEXT.value)) is FileFormat.TEXT
        return super().row_schema(options) + ("" if text else f", {BAD_RECORD_COLUMN} string")

    def __post_init__(self):
        self._format  # refuses a value that names no FileFormat
        if self.max_files_per_batch <= 0:
            raise ConfigError(f"files source: max_files_per_batch must be > 0, got {self.max_files_per_batch}")

    @property
    def _format(self) -> FileFormat:
        return FileFormat.of(self.file_format, "files source: file_format")

    def options(self, start_ms: int) -> dict[str, str]:
        return {
            "directory": _input_directory(self.directory),
            "input_webhdfs_address": self.webhdfs_address or "",
            "file_format": self._format.value,
            "max_files_per_batch": str(self.max_files_per_batch),
            "timestamp_field": self.timestamp_field,
            "key_field": self.key_field,
            "start_ms": str(start_ms),
        }

    def check(self, start_ms: int | None, job: JobStorage | None = None) -> None:
        """Refuses a read file that changed, and a file a reread from ``start_ms`` needs
        that is gone (``persistent.storage.files_log``)."""
        present = self._present()
        if present is None:
            return  # the query fails, naming the directory
        log = _files_log(_input_directory(self.directory), job)
        if start_ms is None and job is not None:
            _retake_fixed_files(log, present, job)
        log.check(present)
        if start_ms is not None:
            log.needed(_first_file(start_ms, self._format), len(log), present)

    def backlog(self, start_ms: int = 0, job: JobStorage | None = None) -> Backlog | None:
        present = self._present()
        if present is None:
            return None  # the query fails, naming the directory
        log = _files_log(_input_directory(self.directory), job)
        total = len(log) + sum(not log.knows(name) for name in present)
        return Backlog("files", _first_file(start_ms, self._format), total, "files")

    def _present(self) -> dict[str, FileStatus] | None:
        """The input files by name; None when the directory does not exist."""
        try:
            return listing(_input_fs(self.options(0)), _input_directory(self.directory))
        except FileNotFoundError:
            return None


def _retake_fixed_files(log: FilesLog, present: dict[str, FileStatus], job: JobStorage) -> None:
    """Takes again the changed files of the micro-batch that failed on a bad record, if
    Spark is to replay it: nothing of it reached the state or the sink, so its input may
    be fixed (``JobDirectory.failed_batch_offsets``)."""
    offsets = job.directory().failed_batch_offsets()
    if offsets is None:
        return
    start, end = (_files_position(sources) for sources in offsets)
    for index in range(start, min(end, len(log))):
        now = present.get(log.files[index].name)
        if now is not None and now != log.files[index]:
            log.retake(index, now)


def _files_position(offsets: list[str]) -> int:
    """The files source's position among the offsets of a query's sources."""
    (position,) = (offset["files"] for offset in map(json.loads, offsets) if isinstance(offset, dict) and "files" in offset)
    return position


def _input_directory(directory: str) -> str:
    """``directory`` as the source's option: a URI as given, a local path made absolute."""
    return directory if urlparse(directory).scheme else os.path.abspath(directory)


def _input_fs(options: dict[str, str]) -> InputFileSystem:
    """The file system of the input directory in a files source's ``options``."""
    return cached_filesystem(options["directory"], options.get("input_webhdfs_address") or None)


def _files_log(directory: str, job: JobStorage | None) -> FilesLog:
    if job is None:
        return FilesLog(directory)
    job_directory = job.directory()
    return FilesLog(directory, job_directory.fs, job_directory.input_log)


def _first_file(start_ms: int, file_format: FileFormat) -> int:
    """Text files before ``start_ms`` hold no message at or after it; other files may."""
    return max(0, start_ms - 1) // FILE_SPAN_MS if file_format is FileFormat.TEXT else 0


@dataclass(frozen=True)
class _Files(InputPartition):
    first_index: int
    paths: tuple[str, ...]


class _FilesReader(BoundedReader):
    """Takes files into the log (``persistent.storage.files_log``) on the driver; positions are
    numbers of the log. Spark ships the reader to the executors, which only ``read``."""

    unit = "files"

    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.options = options
        self.directory = options["directory"]
        self.max_files = int(options["max_files_per_batch"])
        self.first = _first_file(int(options.get("start_ms", "0")), FileFormat(options["file_format"]))
        root = options.get("job_directory")
        self.job = JobStorage(root, options.get("webhdfs_address") or None) if root else None
        self.target: set[str] | None = None
        self._log: FilesLog | None = None

    def __getstate__(self):
        return {**self.__dict__, "_log": None}

    def log(self) -> FilesLog:
        if self._log is None:
            self._log = _files_log(self.directory, self.job)
        return self._log

    def _listing(self) -> dict[str, FileStatus]:
        return listing(_input_fs(self.options), self.directory)

    def initialOffset(self) -> dict:
        return {"files": self.first}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = set(self._listing())

    def most(self) -> int:
        return self.max_files

    def end(self, start: dict, most: int | None) -> dict:
        log, present = self.log(), self._listing()
        log.check(present)
        end = None if most is None else start["files"] + most
        self._take(log, present, end)
        return {"files": max(start["files"], len(log) if end is None else min(end, len(log)))}

    def ranges(self, start: dict, end: dict):
        log, present = self.log(), self._listing()
        self._take(log, present, end["files"])
        return [_Files(index, (path,)) for index, path in log.needed(start["files"], end["files"], present)]

    def _take(self, log: FilesLog, present: dict[str, FileStatus], upto: int | None) -> None:
        """Takes files of ``present`` the log does not know, in the order they were
        written (``_written``), until it holds ``upto`` files (None: all). (A job
        directory written before the log existed has positions in today's listing: this
        takes its files as they are.)"""
        new = sorted((f for n, f in present.items() if not log.knows(n) and (self.target is None or n in self.target)),
                     key=_written)
        log.take(new[: None if upto is None else max(0, upto - len(log))])

    def read(self, partition: _Files):
        file_format = FileFormat(self.options["file_format"])
        key_field, time_field = self.options["key_field"], self.options["timestamp_field"]
        fs = _input_fs(self.options)
        for offset, path in enumerate(partition.paths):
            with fs.open_input(path) as file:
                if file_format is FileFormat.TEXT:
                    yield from _text_messages(path, file, (partition.first_index + offset) * FILE_SPAN_MS)
                elif file_format is FileFormat.JSONL:
                    yield from _jsonl_messages(path, file, key_field, time_field)
                else:
                    yield from _parquet_messages(path, file, key_field, time_field)


def _written(file: FileStatus) -> tuple[int, str]:
    """The order files were written in: by modification time, then name."""
    return file.mtime_ns, file.name


def _text(file: BinaryIO, errors: str) -> io.TextIOWrapper:
    """The lines of binary ``file`` as UTF-8 text; ``errors`` says what undecodable bytes become."""
    return io.TextIOWrapper(file, encoding="utf-8", errors=errors)


def _lines(file: BinaryIO):
    """``(number from 1, line, reason)``: ``reason`` says why a line is not UTF-8, else None."""
    # surrogateescape keeps undecodable bytes, so one bad line spoils only itself.
    with _text(file, "surrogateescape") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if line.isascii():
                yield number, line, None
                continue
            try:
                line.encode("utf-8")
                yield number, line, None
            except UnicodeEncodeError as exc:
                shown = line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                yield number, shown, f"not valid UTF-8 (from character {exc.start + 1})"


def _bad(path: str, where: str, record: str, reason: str) -> tuple:
    """The row of a record that cannot be read: no key, time or value, and the reason."""
    return (None, None, None, BadRecord(f"{path} {where}", record, reason).json())


def _text_messages(path: str, file: BinaryIO, base_ms: int):
    # Every line of text is a message: bytes that are not UTF-8 read as U+FFFD.
    with _text(file, "replace") as lines:
        for number, line in enumerate(lines):
            if number >= FILE_SPAN_MS - 1:
                raise InputError(f"files source: {path} has more than {FILE_SPAN_MS} lines")
            yield (path, base_ms + number + 1, line.rstrip("\n"))


def _jsonl_messages(path: str, file: BinaryIO, key_field: str, time_field: str):
    for number, line, reason in _lines(file):
        if reason is None and not line.strip():
            continue
        if reason is None:
            key, timestamp, reason = _jsonl_fields(line, key_field, time_field)
        if reason is None:
            yield (key, timestamp, line, None)
        else:
            yield _bad(path, f"line {number}", line, reason)


def _jsonl_fields(line: str, key_field: str, time_field: str) -> tuple[str | None, int | None, str | None]:
    """``(key, timestamp, None)`` of a JSON line, or ``(None, None, reason)``."""
    try:
        record = json.loads(line)
    except ValueError as exc:
        return None, None, f"not JSON ({exc})"
    if not isinstance(record, dict):
        return None, None, "not a JSON object"
    if record.get(key_field) is None:
        return None, None, f"no field {key_field!r}" if key_field not in record else f"field {key_field!r} is null"
    timestamp = _integer(record.get(time_field))
    if timestamp is None:
        shown = "missing" if time_field not in record else repr(record[time_field])
        return None, None, f"field {time_field!r} is not an integer of milliseconds ({shown})"
    return str(record[key_field]), timestamp, None


def _integer(value) -> int | None:
    """``value`` as an int when it is an integer (or an integral float or numeric string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _parquet_messages(path: str, file: BinaryIO, key_field: str, time_field: str):
    """One Arrow batch per row group: the key and time columns, and each row as JSON."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(file)
    schema = parquet.schema_arrow
    problem = _parquet_schema_problem(schema, key_field, time_field)
    rows_before = 0
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group)
        records = pa.array(table.to_pandas().to_json(orient="records", lines=True).splitlines(), pa.string())
        if problem:
            bad = pc.is_valid(records)
            keys, times = pa.nulls(len(records), pa.string()), pa.nulls(len(records), pa.int64())
        else:
            keys = table[key_field].cast(pa.string()).combine_chunks()
            times = table[time_field]
            if pa.types.is_timestamp(times.type):
                times = times.cast(pa.timestamp("ms")).cast(pa.int64())
            times = times.cast(pa.int64()).combine_chunks()
            bad = pc.or_(keys.is_null(), times.is_null())
        marks = [None] * len(records)
        for row in pc.indices_nonzero(bad).to_pylist():
            reason = problem or f"column {key_field if keys[row].as_py() is None else time_field!r} is null"
            marks[row] = BadRecord(f"{path} row {rows_before + row}", records[row].as_py(), reason).json()
        good = pc.invert(bad)
        yield pa.RecordBatch.from_arrays(
            [pc.if_else(good, keys, None), pc.if_else(good, times, None), pc.if_else(good, records, None),
             pa.array(marks, pa.string())],
            names=_FILES_COLUMNS,
        )
        rows_before += table.num_rows


def _parquet_schema_problem(schema, key_field: str, time_field: str) -> str | None:
    """Why no row of a Parquet file with ``schema`` can be a message, or None."""
    import pyarrow as pa

    for field in (key_field, time_field):
        if field not in schema.names:
            return f"no column {field!r} (columns: {', '.join(schema.names)})"
    time_type = schema.field(time_field).type
    if not (pa.types.is_integer(time_type) or pa.types.is_timestamp(time_type)):
        return f"column {time_field!r} is {time_type}, not an integer (ms) or timestamp"
    key_type = schema.field(key_field).type
    try:
        pa.array([], key_type).cast(pa.string())
    except pa.ArrowException:
        return f"column {key_field!r} is {key_type}, which has no text form"
    return None


