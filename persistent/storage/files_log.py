"""The files source's log: every input file it has taken, in the order taken.

A file's place in the log is its number for good: the ``f``-th file taken is file
``f``, and line ``n`` of a text file ``f`` has event time ``f * FILE_SPAN_MS + n + 1``
(``persistent.sources.files``). The position the files source gives Spark (``{"files": n}``)
counts files of the log, not of today's listing, so a read file that is deleted moves
nothing, and a new file whose name sorts before files already read is taken next.

The log keeps each file's size and modification time as taken. A file of the log that
shows another size or time (appended to, rewritten, touched, replaced) cannot be read
exactly: its old content is in the state already. The source refuses it on the
driver, naming it, before a micro-batch reads anything; so it refuses a file that a
replay needs again (path A's unfinished micro-batch, path B's files from the clock on)
and that is gone.

It lives in the job directory (``DIR/input/``, one record per micro-batch that took new
files, named by the number of its first file), so path B, which deletes Spark's
checkpoint, still knows every file's number. A fresh start empties it. Without a job
directory the log is kept in memory only.
"""

from __future__ import annotations

import json
import posixpath
from datetime import datetime, timezone
from typing import BinaryIO, Protocol

from persistent.core.errors import InputError
from persistent.storage.fs import FileStatus, FileSystem
from state.errors import CorruptCheckpointError

__all__ = ["InputFileSystem", "FilesLog", "InputFileChangedError", "listing"]


class InputFileChangedError(InputError):
    """A file the files source took has changed, or is gone when a replay needs it."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path

    def __reduce__(self):
        return type(self), (self.path, str(self)), self.__dict__


class InputFileSystem(Protocol):
    """What the files source needs of a file system (``persistent.storage.filesystems``' file
    systems have it)."""

    def list_files(self, path: str) -> list[FileStatus]: ...

    def open_input(self, path: str) -> BinaryIO: ...


def listing(fs: InputFileSystem, directory: str) -> dict[str, FileStatus]:
    """The input files of ``directory`` by name (names starting with ``.`` or ``_`` are
    not input)."""
    try:
        files = fs.list_files(directory)
    except FileNotFoundError:
        raise FileNotFoundError(f"files source: input directory {directory} does not exist") from None
    return {f.name: f for f in files if not f.name.startswith((".", "_"))}


def _input_path(directory: str, name: str) -> str:
    """The path (or URI) of file ``name`` of input ``directory``."""
    return posixpath.join(directory, name)


def _describe(taken: FileStatus) -> str:
    modified = datetime.fromtimestamp(taken.mtime_ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")
    return f"{taken.size} bytes, modified {modified}"


class FilesLog:
    """The files taken from ``directory``; durable in ``path`` through ``fs`` (both None:
    in memory only)."""

    def __init__(self, directory: str, fs: FileSystem | None = None, path: str | None = None):
        self.directory = directory
        self.fs = fs
        self.path = path
        self._records: list[int] = []  # the number of each record's first file
        self.files: list[FileStatus] = self._load()
        self._names = {f.name: i for i, f in enumerate(self.files)}

    def _load(self) -> list[FileStatus]:
        if self.fs is None:
            return []
        files: list[FileStatus] = []
        for name in self.fs.list_names(self.path):
            if not (name.endswith(".json") and name[:-5].isdigit()):
                continue  # a temporary file of an unfinished write
            record = self.fs.join(self.path, name)
            try:
                first = int(name[:-5])
                taken = [FileStatus(str(n), int(s), int(t)) for n, s, t in json.loads(self.fs.read_bytes(record))]
            except (ValueError, TypeError) as exc:
                raise CorruptCheckpointError(f"files source: {record} is corrupt ({exc})", record) from exc
            if first != len(files):
                raise CorruptCheckpointError(
                    f"files source: {record} starts at file {first}, but the records before it hold {len(files)} files",
                    record,
                )
            self._records.append(first)
            files.extend(taken)
        return files

    def __len__(self) -> int:
        return len(self.files)

    def knows(self, name: str) -> bool:
        return name in self._names

    def take(self, files: list[FileStatus]) -> None:
        """Appends ``files`` (durably first, when the log has a place)."""
        if not files:
            return
        first = len(self.files)
        self._write(first, files)
        self._records.append(first)
        for f in files:
            self._names[f.name] = len(self.files)
            self.files.append(f)

    def retake(self, index: int, now: FileStatus) -> None:
        """Takes file ``index`` again as ``now`` (durably first): for a file whose
        micro-batch failed before any of its effects, fixed before the replay."""
        first = max(start for start in self._records if start <= index)
        following = [start for start in self._records if start > index]
        files = [*self.files[first:index], now, *self.files[index + 1:following[0] if following else None]]
        self._write(first, files)
        self.files[index] = now

    def _write(self, first: int, files: list[FileStatus]) -> None:
        if self.fs is not None:
            record = self.fs.join(self.path, f"{first:010d}.json")
            self.fs.write_atomic(record, json.dumps([[f.name, f.size, f.mtime_ns] for f in files]).encode())

    def check(self, present: dict[str, FileStatus]) -> None:
        """Refuses a file of the log that ``present`` shows changed."""
        for name, now in present.items():
            index = self._names.get(name)
            if index is not None and now != self.files[index]:
                raise self._changed(index, now)

    def needed(self, first: int, end: int, present: dict[str, FileStatus]) -> list[tuple[int, str]]:
        """``(number, path)`` of files ``first`` to ``end`` (exclusive), each present as taken."""
        needed = []
        for index in range(first, end):
            taken = self.files[index]
            path = _input_path(self.directory, taken.name)
            now = present.get(taken.name)
            if now is None:
                raise InputFileChangedError(
                    path,
                    f"files source: {path} was read as file {index} and is needed again (a replay of its "
                    f"micro-batch, or a restart from the clock), but it is gone: put it back as it was, or start "
                    f"the job over with a new checkpoint directory",
                )
            if now != taken:
                raise self._changed(index, now)
            needed.append((index, path))
        return needed

    def _changed(self, index: int, now: FileStatus) -> InputFileChangedError:
        taken = self.files[index]
        path = _input_path(self.directory, taken.name)
        return InputFileChangedError(
            path,
            f"files source: {path} changed after it was read as file {index} ({_describe(taken)}; now "
            f"{_describe(now)}): what it held is in the state already, and its new content cannot be read "
            f"exactly. Put it back as it was, and write new input to a new file",
        )
