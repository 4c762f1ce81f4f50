"""One task's durable checkpoints, one atomic file per checkpoint time.

A checkpoint at time ``T`` (ms of event time) holds exactly the effect of the
messages with ``ts < T``. The store keeps them under ``<root>/<task>/`` as files
named by the zero-padded time (``0000000001700000000000.ckpt``), so a listing is
sorted by time. Each file is one *record*::

    magic b"PCKP" | format version u16 | timestamp ms i64 | payload length u64 | crc32 u32 | payload

all big-endian. The CRC32 covers the header fields before it as well as the
payload, so a flipped bit anywhere is detected. ``encode_record`` and
``decode_record`` expose the format for other stores (the clock uses it too).

A checkpoint's payload is the state at ``T`` whole, or its *changes*: what a
checkpoint before it (its *base*) needs to become this one, framed as::

    magic b"PCHG" | frame version u16 | base timestamp ms i64 | base record's crc32 u32 | data

so a checkpoint is read as a chain (``recover``): a whole one, then the changes of
each checkpoint after it, every link checked against the CRC32 its successor names.
``retain`` keeps the chains of the checkpoints it keeps. The data are compressed with
zstd, framed as::

    magic b"PZST" | frame version u16 | data length u64 | compressed data

(the record's CRC32 checks the compressed bytes before zstd reads them; the data of
records written before compression are read as they are).

The store only talks to a ``FileSystem``, so it works on any scheme the runtime's
file system serves. A torn, corrupt or missing checkpoint raises; it is never read
as empty state.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping
from typing import NamedTuple

import pyarrow as pa

from persistent.storage.fs import FileSystem
from state.boundaries import check_time_ms
from state.errors import CorruptCheckpointError, MissingCheckpointError, StateTypeError, StateValueError
from state.tables import Stored

__all__ = [
    "CheckpointStore",
    "Written",
    "encode_record",
    "decode_record",
    "describe_times",
    "MAGIC",
    "FORMAT_VERSION",
]

MAGIC = b"PCKP"
FORMAT_VERSION = 1

_RESTORE_OLDER = "rewind the clock (ClockStore.rewind) to an older clock whose checkpoints are intact"

_HEADER = struct.Struct(">4sHqQI")  # magic, version, timestamp ms, payload length, crc32
_CRC_OFFSET = _HEADER.size - 4
_TIME_DIGITS = 22
_SUFFIX = ".ckpt"
_NAME = re.compile(rf"(\d{{{_TIME_DIGITS}}}){re.escape(_SUFFIX)}")
_BYTES_LIKE = (bytes, bytearray, memoryview)
_CHANGES_MAGIC = b"PCHG"
_CHANGES_VERSION = 1
_CHANGES = struct.Struct(">4sHqI")  # magic, version, base timestamp ms, base record's crc32
_COMPRESSED_MAGIC = b"PZST"
_COMPRESSED_VERSION = 1
_COMPRESSED = struct.Struct(">4sHQ")  # magic, version, length of the data
_CODEC = "zstd"


def _crc(header_prefix: bytes, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(header_prefix))


def _check_bytes(data: object) -> bytes:
    if not isinstance(data, _BYTES_LIKE):
        raise StateTypeError(f"checkpoint data must be bytes, got {type(data).__name__}")
    return data


def encode_record(timestamp_ms: int, data: bytes) -> bytes:
    """The record holding ``data`` stamped with ``timestamp_ms``."""
    timestamp_ms = check_time_ms(timestamp_ms)
    payload = bytes(_check_bytes(data))
    prefix = _HEADER.pack(MAGIC, FORMAT_VERSION, timestamp_ms, len(payload), 0)[:_CRC_OFFSET]
    return prefix + struct.pack(">I", _crc(prefix, payload)) + payload


def decode_record(raw: bytes, where: str, remedy: str = _RESTORE_OLDER) -> tuple[int, bytes]:
    """``(timestamp_ms, data)`` of a record read from ``where`` (a path, used in errors).

    Raises ``CorruptCheckpointError`` naming ``where``, the problem and ``remedy``
    (what to do) when the record is torn or corrupt.
    """

    def corrupt(problem: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"corrupt record {where}: {problem}; {remedy}", where)

    if len(raw) < _HEADER.size:
        raise corrupt(f"{len(raw)} bytes is shorter than the {_HEADER.size}-byte header (torn write?)")
    magic, version, timestamp_ms, length, crc = _HEADER.unpack_from(raw, 0)
    if magic != MAGIC:
        raise corrupt(f"magic is {magic!r}, expected {MAGIC!r} (not a checkpoint record)")
    if version != FORMAT_VERSION:
        raise corrupt(
            f"format version {version}, this code reads version {FORMAT_VERSION} "
            f"(written by another release?)"
        )
    payload = raw[_HEADER.size :]
    if len(payload) != length:
        raise corrupt(f"header announces {length} payload bytes, file holds {len(payload)} (torn write?)")
    if _crc(raw[:_CRC_OFFSET], payload) != crc:
        raise corrupt("checksum mismatch (bytes changed after writing)")
    return timestamp_ms, payload


def _decompressed(view: memoryview, path: str) -> bytes:
    """The data a checkpoint's payload holds (after its changes frame, if any):
    decompressed, or as they are in a record written before compression."""
    if view[:len(_COMPRESSED_MAGIC)] != _COMPRESSED_MAGIC:
        return bytes(view)
    if len(view) <= _COMPRESSED.size:
        raise CorruptCheckpointError(f"corrupt record {path}: its compressed frame is torn; {_RESTORE_OLDER}", path)
    _, version, size = _COMPRESSED.unpack_from(view)
    if version != _COMPRESSED_VERSION:
        raise CorruptCheckpointError(
            f"corrupt record {path}: compressed data of format {version} (this code reads format "
            f"{_COMPRESSED_VERSION}); {_RESTORE_OLDER}", path
        )
    try:
        return pa.decompress(view[_COMPRESSED.size:], decompressed_size=size, codec=_CODEC, asbytes=True)
    except (OSError, ValueError, OverflowError, MemoryError) as exc:  # the last two: a damaged size
        raise CorruptCheckpointError(
            f"corrupt record {path}: its {_CODEC} data do not decompress ({exc}); {_RESTORE_OLDER}", path
        ) from exc


def _record_crc(record: bytes) -> int:
    """The CRC32 a record's header holds."""
    (crc,) = struct.unpack_from(">I", record, _CRC_OFFSET)
    return crc


class Written(NamedTuple):
    """What ``CheckpointStore.persist`` wrote: the file's size in bytes and its record's CRC32."""

    size: int
    crc: int


class CheckpointStore:
    """The checkpoints of task ``task`` under ``<root>/<task>/``, keyed by time in ms.

    One writer per task is assumed. Writes are atomic (``FileSystem.write_atomic``),
    so a crash leaves either the old file, the new file or a temporary file that
    ``times`` ignores.
    """

    def __init__(self, fs: FileSystem, root: str, task: str) -> None:
        if not isinstance(task, str) or not task or task in (".", "..") or "/" in task or "\\" in task:
            raise StateValueError(f"task name must be a non-empty string without '/' or '\\', got {task!r}")
        self.fs = fs
        self.task = task
        self.directory = fs.join(root, task)

    def __repr__(self) -> str:
        return f"CheckpointStore({self.directory!r})"

    def path(self, timestamp_ms: int) -> str:
        """The file of the checkpoint at ``timestamp_ms``."""
        return self.fs.join(self.directory, f"{check_time_ms(timestamp_ms):0{_TIME_DIGITS}d}{_SUFFIX}")

    def persist(self, timestamp_ms: int, data: bytes, base: tuple[int, int] | None = None) -> Written:
        """Durably stores ``data`` as the checkpoint at ``timestamp_ms``, replacing any there;
        returns its file's size and CRC32. With ``base``, ``(time_ms, crc)`` of an older
        checkpoint of this store, ``data`` are the changes that make that one this one.
        The file holds ``data`` compressed (zstd); ``read`` returns them as given.

        Replays after a restart persist the same times again; they overwrite.
        """
        if base is not None:
            base_ms, base_crc = base
            if check_time_ms(base_ms, "base time") >= timestamp_ms:
                raise StateValueError(f"the checkpoint at {timestamp_ms} ms cannot change a later one ({base_ms} ms)")
        data = _check_bytes(data)
        framed = _COMPRESSED.pack(_COMPRESSED_MAGIC, _COMPRESSED_VERSION, len(data)) + pa.compress(
            data, codec=_CODEC, asbytes=True)
        if base is not None:
            framed = _CHANGES.pack(_CHANGES_MAGIC, _CHANGES_VERSION, base_ms, base_crc) + framed
        record = encode_record(timestamp_ms, framed)
        self.fs.write_atomic(self.path(timestamp_ms), record)
        return Written(len(record), _record_crc(record))

    def require(self, timestamp_ms: int) -> None:
        """Raises ``MissingCheckpointError`` unless a checkpoint file at ``timestamp_ms``
        exists; reads nothing of it (``recover`` checks what it holds)."""
        if not self.fs.exists(self.path(timestamp_ms)):
            raise self._missing(timestamp_ms)

    def read(self, timestamp_ms: int, crc: int | None = None) -> Stored:
        """The checkpoint at exactly ``timestamp_ms``, as its file holds it; with ``crc``,
        the one ``persist`` wrote with that CRC32 (``Written.crc``).

        Raises ``MissingCheckpointError`` when there is none and
        ``CorruptCheckpointError`` when its file is torn or corrupt, or holds another record.
        """
        path = self.path(timestamp_ms)
        try:
            raw = self.fs.read_bytes(path)
        except FileNotFoundError:
            raise self._missing(timestamp_ms) from None
        found_ms, data = decode_record(raw, path)
        if found_ms != timestamp_ms:
            raise CorruptCheckpointError(
                f"corrupt record {path}: header says {found_ms} ms, file name says {timestamp_ms} ms "
                f"(file copied or renamed?); {_RESTORE_OLDER}", path
            )
        found_crc = _record_crc(raw)
        if crc is not None and found_crc != crc:
            raise CorruptCheckpointError(
                f"{path} holds another checkpoint than the one expected: its CRC32 is {found_crc}, "
                f"not {crc} (written again since?)", path
            )
        view, base = memoryview(data), None
        if view[:len(_CHANGES_MAGIC)] == _CHANGES_MAGIC:
            if len(view) <= _CHANGES.size:
                raise CorruptCheckpointError(f"corrupt record {path}: its changes frame is torn; {_RESTORE_OLDER}",
                                             path)
            _, version, base_ms, base_crc = _CHANGES.unpack_from(view)
            if version != _CHANGES_VERSION or not 0 <= base_ms < timestamp_ms:
                raise CorruptCheckpointError(
                    f"corrupt record {path}: changes of format {version} on a checkpoint at {base_ms} ms "
                    f"(this code reads format {_CHANGES_VERSION}, on an earlier checkpoint); {_RESTORE_OLDER}", path
                )
            view, base = view[_CHANGES.size:], (base_ms, base_crc)
        return Stored(timestamp_ms, found_crc, _decompressed(view, path), base)

    def recover(self, timestamp_ms: int, crc: int | None = None, known: tuple[int, int] | None = None) -> list[Stored]:
        """The chain of the checkpoint at exactly ``timestamp_ms`` (with ``crc``, the one
        written with that CRC32), oldest first: a whole checkpoint and the changes after
        it, or with ``known``, ``(time_ms, crc)`` of a checkpoint the caller holds, the
        changes after that one when the chain passes it.

        Raises ``MissingCheckpointError`` when a checkpoint of the chain is missing, and
        ``CorruptCheckpointError`` when one is torn or corrupt, or is not the one its
        successor changes (written again since).
        """
        chain = [self.read(timestamp_ms, crc)]
        while chain[-1].base is not None and chain[-1].base != known:
            base_ms, base_crc = chain[-1].base
            try:
                chain.append(self.read(base_ms, base_crc))
            except (CorruptCheckpointError, MissingCheckpointError) as exc:
                exc.add_note(f"The checkpoint at {chain[-1].time_ms} ms holds the changes to the one at {base_ms} ms.")
                raise
        return chain[::-1]

    def _missing(self, timestamp_ms: int) -> MissingCheckpointError:
        return MissingCheckpointError(
            self.task,
            timestamp_ms,
            f"task {self.task!r} has no checkpoint at {timestamp_ms} ms: {self.path(timestamp_ms)} does not "
            f"exist (held: {describe_times(self.times())}); {_RESTORE_OLDER}"
        )

    def times(self) -> list[int]:
        """Sorted times (ms) of the stored checkpoints; temporary and unrelated files are ignored."""
        return [int(m.group(1)) for m in map(_NAME.fullmatch, self.fs.list_names(self.directory)) if m]

    def latest(self) -> int | None:
        """The newest checkpoint time (ms), or ``None`` when there is none."""
        held = self.times()
        return held[-1] if held else None

    def retain(self, oldest_ms: int, whole_every_ms: int | None = None,
               wholes: Mapping[int, int] | None = None) -> None:
        """Deletes the checkpoints older than ``oldest_ms``, always keeping the newest one,
        and the chain of each one kept: those from the whole checkpoint the oldest one
        kept starts at, when ``wholes`` (checkpoint time to that whole's time, as the
        writer recorded them) says which; else, with ``whole_every_ms``, the writer's
        promise that a chain never reaches back past a multiple of it, those from the
        last multiple at or before the oldest one kept. (A chain's links are the
        checkpoints between its ends: each one's base is the one before it.)

        Pass the oldest clock that may still be restored (the current clock, or the
        oldest in ``ClockStore.history()`` to keep rewinds possible).
        """
        oldest_ms = check_time_ms(oldest_ms, "oldest_ms")
        held = self.times()
        kept = [timestamp_ms for timestamp_ms in held if timestamp_ms >= oldest_ms] or held[-1:]
        if not kept:
            return
        if wholes and kept[0] in wholes:
            first_ms = wholes[kept[0]]
        elif whole_every_ms:
            first_ms = kept[0] - kept[0] % whole_every_ms
        else:
            first_ms = kept[0]
        for timestamp_ms in held:
            if timestamp_ms >= first_ms:
                break
            self.fs.delete(self.path(timestamp_ms))

    def delete_after(self, timestamp_ms: int) -> None:
        """Deletes the checkpoints newer than ``timestamp_ms`` (after rewinding to it), newest first."""
        timestamp_ms = check_time_ms(timestamp_ms)
        for held_ms in reversed(self.times()):
            if held_ms <= timestamp_ms:
                break
            self.fs.delete(self.path(held_ms))


def describe_times(times_ms: list[int]) -> str:
    """Checkpoint times for a message: all of them when few, else how many and the range."""
    if not times_ms:
        return "none"
    if len(times_ms) <= 5:
        return ", ".join(map(str, times_ms)) + " ms"
    return f"{len(times_ms)} checkpoints from {times_ms[0]} to {times_ms[-1]} ms"
