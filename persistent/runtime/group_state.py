"""The bytes of a key group's state in Spark's state store, between micro-batches
(``KeyGroup.encode`` and ``KeyGroup.decode``): a whole table, or the rows since the
group's durable checkpoint (``Base``), which the state then follows.

Spark hands these bytes to Python through its pickler, which copies a binary value one
byte at a time: they are compressed, and a record's CRC32 checks them before zstd reads
them.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import pyarrow as pa

from persistent.storage.checkpoint_store import MAGIC as RECORD_MAGIC
from persistent.storage.checkpoint_store import decode_record, encode_record
from state.errors import CorruptCheckpointError

__all__ = ["Base", "decode_state", "encode_state", "STATE", "CHECKPOINT"]

#: A key group's state is a record of ``encode_record``: magic
#: ``PCKP``, version, time, length and a CRC32 over them and the payload, which checks
#: the compressed bytes before zstd reads them. The record's time is 0 for a whole
#: state: its payload is the size of the table's bytes (``_STATE_SIZE``, which
#: ``pa.decompress`` needs), then the table's bytes compressed with ``_STATE_CODEC``.
#: A state that follows the group's checkpoint at ``T`` (``T`` > 0: no checkpoint is at
#: 0) has the time ``T``; its payload is the CRC32 of that checkpoint's record and the
#: size (``_FOLLOWING``), then compressed the bytes of the rows since the checkpoint
#: (``KeyedTable.encode_since_checkpoint``).
_STATE_SIZE = struct.Struct(">Q")
_FOLLOWING = struct.Struct(">IQ")
_STATE_CODEC = "zstd"
#: What the errors name.
STATE = "key group state"
CHECKPOINT = "key group checkpoint"
_STATE_REMEDY = "delete DIR/spark/ to restart the job from the clock (path B)"
#: The frame of the versions before the record: a magic, the size and the CRC32 of the
#: table's bytes, then the table's bytes compressed with ``_STATE_CODEC``.
_EARLIER_FRAME = struct.Struct(">4sQI")
_EARLIER_MAGIC = b"PKGZ"


class Base(NamedTuple):
    """A durable checkpoint of a key group, which its state can follow (``encode_state``)."""

    time_ms: int
    #: The CRC32 of the checkpoint's record (``persistent.storage.checkpoint_store.Written.crc``).
    crc: int


def decode_state(data: bytes) -> tuple[Base | None, bytes]:
    """The checkpoint a key group's state (``encode_state``) follows, if any, and its
    table's bytes (whole, or since that checkpoint); or the table's bytes in the state
    of an earlier version: the ``_EARLIER_FRAME``, or the table's bytes as they are.

    The state is read through a memoryview, without copies: the CRC32 of the record
    checks the compressed bytes before zstd reads them (zstd's frames carry no checksum
    here: a flipped bit could decompress to other bytes)."""
    view = memoryview(data)
    if view[:len(RECORD_MAGIC)] == RECORD_MAGIC:
        time_ms, payload = decode_record(view, STATE, _STATE_REMEDY)
        frame = _FOLLOWING if time_ms else _STATE_SIZE
        if len(payload) < frame.size:
            raise CorruptCheckpointError(f"{STATE}: {len(payload)} bytes are too short for its size")
        *crc, size = frame.unpack_from(payload)
        return Base(time_ms, *crc) if time_ms else None, _decompress(payload[frame.size:], size)
    if view[:len(_EARLIER_MAGIC)] == _EARLIER_MAGIC:
        if len(view) < _EARLIER_FRAME.size:
            raise CorruptCheckpointError(f"{STATE}: {len(view)} bytes are too short for its frame")
        _, size, crc = _EARLIER_FRAME.unpack_from(view)
        table = _decompress(view[_EARLIER_FRAME.size:], size)
        if zlib.crc32(table) != crc:
            raise CorruptCheckpointError(f"{STATE}: its bytes do not match their CRC32")
        return None, table
    return None, data  # the table's bytes, as the earliest versions kept them (or damaged: decode_table says)


def encode_state(table: bytes, base: Base | None = None) -> bytes:
    """A key group's state: its ``table``'s bytes, whole or, with ``base``, the rows since
    that checkpoint (``KeyedTable.encode_since_checkpoint``), compressed in a record."""
    if base is not None:
        return encode_record(base.time_ms, _FOLLOWING.pack(base.crc, len(table)) + _compress(table))
    return encode_record(0, _STATE_SIZE.pack(len(table)) + _compress(table))


def _compress(data: bytes) -> bytes:
    return pa.compress(data, codec=_STATE_CODEC, asbytes=True)


def _decompress(compressed: memoryview, size: int) -> bytes:
    """The ``size`` bytes ``compressed`` holds; ``CorruptCheckpointError`` when they do not decompress."""
    try:
        return pa.decompress(compressed, decompressed_size=size, codec=_STATE_CODEC, asbytes=True)
    except (OSError, ValueError, OverflowError, MemoryError) as exc:  # the last two: a damaged size
        raise CorruptCheckpointError(f"{STATE}: its {_STATE_CODEC} bytes do not decompress: {exc}") from exc
