"""The files source's log: every input file it has taken, in the order taken.

A file's place in the log is its number for good: the ``f``-th file taken is file
``f``, and line ``n`` of a text file ``f`` has event time ``f * FILE_SPAN_MS + n + 1``
(``persistent.sources``). The position the files source gives Spark (``{"files": n}``)
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
import os
from dataclasses import dataclass
from datetime import datetime, timezone

from state.errors import CorruptCheckpointError
from state.fs import FileSystem

__all__ = ["InputFile", "FilesLog", "InputFileChangedError", "listing"]


class InputFileChangedError(ValueError):
    """A file the files source took has changed, or is gone when a replay needs it."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class InputFile:
    """A file as the source took it."""

    name: str
    size: int
    mtime_ns: int

    def json(self) -> list:
        return [self.name, self.size, self.mtime_ns]

    def describe(self) -> str:
        modified = datetime.fromtimestamp(self.mtime_ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")
        return f"{self.size} bytes, modified {modified}"


def listing(directory: str) -> dict[str, InputFile]:
    """The input files of ``directory`` by name (names starting with ``.`` or ``_`` are
    not input)."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        raise FileNotFoundError(f"files source: input directory {directory} does not exist") from None
    files = {}
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        try:
            stat = entry.stat()
        except FileNotFoundError:  # deleted since the listing
            continue
        files[entry.name] = InputFile(entry.name, stat.st_size, stat.st_mtime_ns)
    return files


class FilesLog:
    """The files taken from ``directory``; durable in ``path`` through ``fs`` (both None:
    in memory only)."""

    def __init__(self, directory: str, fs: FileSystem | None = None, path: str | None = None):
        self.directory = directory
        self.fs = fs
        self.path = path
        self.files: list[InputFile] = self._load()
        self._names = {f.name: i for i, f in enumerate(self.files)}

    def _load(self) -> list[InputFile]:
        if self.fs is None:
            return []
        files: list[InputFile] = []
        for name in self.fs.list_names(self.path):
            if not (name.endswith(".json") and name[:-5].isdigit()):
                continue  # a temporary file of an unfinished write
            record = self.fs.join(self.path, name)
            try:
                first = int(name[:-5])
                taken = [InputFile(str(n), int(s), int(t)) for n, s, t in json.loads(self.fs.read_bytes(record))]
            except (ValueError, TypeError) as exc:
                raise CorruptCheckpointError(f"files source: {record} is corrupt ({exc})") from exc
            if first != len(files):
                raise CorruptCheckpointError(
                    f"files source: {record} starts at file {first}, but the records before it hold {len(files)} files"
                )
            files.extend(taken)
        return files

    def __len__(self) -> int:
        return len(self.files)

    def knows(self, name: str) -> bool:
        return name in self._names

    def take(self, files: list[InputFile]) -> None:
        """Appends ``files`` (durably first, when the log has a place)."""
        if not files:
            return
        if self.fs is not None:
            record = self.fs.join(self.path, f"{len(self.files):010d}.json")
            self.fs.write_atomic(record, json.dumps([f.json() for f in files]).encode())
        for f in files:
            self._names[f.name] = len(self.files)
            self.files.append(f)

    def check(self, present: dict[str, InputFile]) -> None:
        """Refuses a file of the log that ``present`` shows changed."""
        for name, now in present.items():
            index = self._names.get(name)
            if index is not None and now != self.files[index]:
                raise self._changed(index, now)

    def needed(self, first: int, end: int, present: dict[str, InputFile]) -> list[tuple[int, str]]:
        """``(number, path)`` of files ``first`` to ``end`` (exclusive), each present as taken."""
        needed = []
        for index in range(first, end):
            taken = self.files[index]
            path = os.path.join(self.directory, taken.name)
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

    def _changed(self, index: int, now: InputFile) -> InputFileChangedError:
        taken = self.files[index]
        path = os.path.join(self.directory, taken.name)
        return InputFileChangedError(
            path,
            f"files source: {path} changed after it was read as file {index} ({taken.describe()}; now "
            f"{now.describe()}): what it held is in the state already, and its new content cannot be read "
            f"exactly. Put it back as it was, and write new input to a new file",
        )
