"""A small framed binary layout shared by the encodings of states: a magic, a
version, then length-prefixed sections. Keys travel as Arrow arrays (compact for
strings and integers alike); numbers as big-endian numpy arrays."""

from __future__ import annotations

import struct
from collections.abc import Collection

import numpy as np
import pyarrow as pa

from state.errors import CorruptCheckpointError

__all__ = ["pack", "unpack", "keys_to_bytes", "keys_from_bytes", "ints_to_bytes", "ints_from_bytes"]

_FRAME = struct.Struct(">4sHI")  # magic, version, number of sections
_LENGTH = struct.Struct(">Q")


def pack(magic: bytes, version: int, sections: list[bytes]) -> bytes:
    """``sections`` framed under ``magic`` and ``version``."""
    parts = [_FRAME.pack(magic, version, len(sections))]
    for section in sections:
        parts.append(_LENGTH.pack(len(section)))
        parts.append(section)
    return b"".join(parts)


def unpack(magic: bytes, versions: Collection[int], data: bytes, what: str) -> tuple[int, list[bytes]]:
    """The version and sections of ``data`` framed by ``pack``; ``CorruptCheckpointError``
    naming ``what`` when the magic or lengths do not match or the version is not in ``versions``."""
    data = bytes(data)
    if len(data) < _FRAME.size:
        raise CorruptCheckpointError(f"{what}: {len(data)} bytes are too short to hold a state")
    found, found_version, count = _FRAME.unpack_from(data, 0)
    if found != magic:
        raise CorruptCheckpointError(f"{what}: not a {magic.decode()} state (starts with {found!r})")
    if found_version not in versions:
        readable = " or ".join(map(str, sorted(versions)))
        raise CorruptCheckpointError(
            f"{what}: state format version {found_version}, this code reads version {readable}"
        )
    sections, offset = [], _FRAME.size
    for _ in range(count):
        if offset + _LENGTH.size > len(data):
            raise CorruptCheckpointError(f"{what}: state is truncated")
        (length,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        if offset + length > len(data):
            raise CorruptCheckpointError(f"{what}: state is truncated")
        sections.append(data[offset : offset + length])
        offset += length
    if offset != len(data):
        raise CorruptCheckpointError(f"{what}: {len(data) - offset} unexpected bytes after the state")
    return found_version, sections


def keys_to_bytes(keys: np.ndarray) -> bytes:
    """An Arrow IPC stream holding ``keys``, of one kind (strings, bytes or numbers;
    ``state.key_kinds``) beside the null key, None or NaN, which becomes Arrow's null."""
    batch = pa.record_batch([pa.array(keys, from_pandas=True)], names=["key"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def keys_from_bytes(data: bytes) -> np.ndarray:
    """Inverse of ``keys_to_bytes``."""
    keys = pa.ipc.open_stream(data).read_all().column(0)
    if pa.types.is_integer(keys.type) and keys.null_count:
        # numpy would hold them as floats, a null as NaN: integers past 2**53 would merge.
        return np.array(keys.to_pylist(), dtype=object)
    return keys.to_numpy(zero_copy_only=False)


def ints_to_bytes(values: np.ndarray) -> bytes:
    """64-bit integers, big-endian."""
    return np.ascontiguousarray(values, dtype=">i8").tobytes()


def ints_from_bytes(data: bytes) -> np.ndarray:
    """Inverse of ``ints_to_bytes``."""
    return np.frombuffer(data, dtype=">i8").astype(np.int64)
