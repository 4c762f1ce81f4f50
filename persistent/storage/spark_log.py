"""Spark's checkpoint location (``DIR/spark/``) as the framework reads it: Spark writes
and owns it, the framework only asks its offset and commit logs what they hold, adds
the heartbeat rows of a generation's first micro-batch, and deletes the whole of it.

::

    DIR/spark/offsets/<N>      micro-batch N's offsets: a version line, the batch's
                               metadata, then one line per source of the query
    DIR/spark/commits/<N>      written once micro-batch N is committed
    DIR/spark/heartbeats/      the heartbeat rows (``SparkLog.write_heartbeats``)
"""

from __future__ import annotations

import json

from persistent.storage.fs import FileSystem
from state.errors import CorruptCheckpointError

__all__ = ["SparkLog", "literal_path"]


def literal_path(path: str) -> str:
    """``path`` as Spark's file source reads it literally: it takes a path with any of
    ``{}[]*?\\`` for a glob pattern, which a directory named ``run[1]`` would not match
    (no files, and no error); a backslash makes each such character itself."""
    return "".join("\\" + c if c in "{}[]*?\\" else c for c in path)


class SparkLog:
    """Spark's checkpoint location at ``path``, through ``fs``."""

    def __init__(self, fs: FileSystem, path: str):
        self.fs = fs
        self.path = path
        self.heartbeats = fs.join(path, "heartbeats")
        self._offsets = fs.join(path, "offsets")
        self._commits = fs.join(path, "commits")

    def started(self) -> bool:
        """Whether it holds a started micro-batch (``newest_batch``)."""
        return self.newest_batch() is not None

    def newest_batch(self) -> int | None:
        """The newest micro-batch of the offset log, None before the first. The log names
        its entries by batch id; anything else there (a temporary file of an unfinished
        write) is none."""
        return max((int(n) for n in self.fs.list_names(self._offsets) if n.isdigit()), default=None)

    def committed(self, batch: int) -> bool:
        """Whether Spark committed micro-batch ``batch``."""
        return self.fs.exists(self.fs.join(self._commits, str(batch)))

    def source_offsets(self, batch: int) -> list[str]:
        """The end offsets (JSON, one per source of the query) of micro-batch ``batch``:
        the lines of its offset log entry after the version and the batch's metadata."""
        return self._entry(batch)[2:]

    def watermark_ms(self, batch: int) -> int:
        """Spark's watermark in micro-batch ``batch`` (``GroupState.getCurrentWatermarkMs()``
        in it), from the batch's metadata."""
        entry = self._entry(batch)
        try:
            return int(json.loads(entry[1])["batchWatermarkMs"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCheckpointError(f"micro-batch {batch}'s offset log entry has no watermark: {exc}",
                                         self.fs.join(self._offsets, str(batch))) from None

    def _entry(self, batch: int) -> list[str]:
        entry = self.fs.join(self._offsets, str(batch))
        lines = self.fs.read_bytes(entry).decode().splitlines()
        if len(lines) < 3:
            raise CorruptCheckpointError(f"{entry} holds {len(lines)} lines, not a version, metadata and offsets",
                                         entry)
        return lines

    def write_heartbeats(self, column: str, key_groups: int) -> str:
        """``DIR/spark/heartbeats/``, holding a file of one row per key group (JSON lines
        ``{column: g}``) for Spark's file source (``persistent.runtime.heartbeats``): the
        generation's first micro-batch takes it, and a replay of that micro-batch reads
        it again by the path in the source's log. Written once per Spark checkpoint, so
        it goes when that goes (path B); a path A start writes it only if it is missing,
        with the same rows (path A keeps the key groups), and the file source, which
        knows the path, does not take it as a new file. The log holds the path in full:
        a job directory moved elsewhere, or named by another URI, restarts from the
        clock (delete ``DIR/spark/``)."""
        rows = self.fs.join(self.heartbeats, "rows.json")
        if not self.fs.exists(rows):
            self.fs.write_atomic(rows, "".join(json.dumps({column: g}) + "\n" for g in range(key_groups)).encode())
        return self.heartbeats

    def delete(self) -> bool:
        """Deletes Spark's checkpoint, so that the next start begins a new one (path B, or
        a fresh start); returns whether there was one."""
        existed = self.fs.exists(self.path)
        self.fs.delete(self.path)
        return existed
