"""The wire format of a ``KeyedTable``: ``encode_rows`` writes it (``KeyedTable.encode``,
``checkpoint`` and the others), ``TableBytes`` reads it.

The bytes are ``state.codec`` sections under the magic ``PKTB``. Format 4 holds the
counters (checkpoint time, emitted time, late count, bucket width), the keys, the
buckets, the values (``Monoid.encode_column``), the description (``describe``: the
monoid by ``Monoid.identity()``, the window, the checkpoint interval and the
``ttl_ms``), the times (empty without a ``ttl_ms``) and, in the changes to a checkpoint
(``KeyedTable.checkpoint_changes``), the rows that the keys it held hold in it (empty
in other bytes); so ``state.tables.read_table`` decodes a checkpoint without the task
that wrote it. Format 3 had no such rows: its changes are rolled forward by their
keys. ``state.tables.decode_table`` still reads format 2, which had no times (a table
without ``ttl_ms`` only), and format 1, which named nothing.

Bytes are read in two steps: ``TableBytes`` splits and checks them and names their
settings, then fills a new table that the caller chose for those settings
(``state.tables.table_for``: neither this module nor ``state.table`` knows the kinds of
tables built on ``KeyedTable``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import pyarrow as pa

from monoids import Monoid, MonoidError, from_identity
from state import codec
from state.boundaries import check_interval_ms
from state.errors import CorruptCheckpointError, StateValueError
from state.expiry import check_ttl_ms
from state.window import SessionWindow, Window, window_from

__all__ = ["describe", "encode_rows", "naming_held_rows", "Table", "TableBytes"]

_MAGIC = b"PKTB"
_VERSION = 4
#: Sections per readable format version: meta, keys, buckets, values (from 2 the
#: description, from 3 the times, from 4 the rows held in the checkpoint changed).
_SECTIONS = {1: 4, 2: 5, 3: 6, 4: 7}


class Table(Protocol):
    """A table as its bytes hold it: what ``encode_rows`` reads and ``TableBytes.fill``
    sets of a ``state.table.KeyedTable`` (which imports this module)."""

    #: The settings: read, and checked against the bytes.
    monoid: Monoid
    interval_ms: int
    window: Window | SessionWindow | None
    ttl_ms: int | None
    bucket_ms: int
    #: The columns, one row each; ``times`` only with a ``ttl_ms``.
    keys: np.ndarray
    buckets: np.ndarray
    values: np.ndarray
    times: np.ndarray | None
    #: The counters.
    checkpoint_ms: int
    emitted_ms: int
    late_count: int
    #: What the table derives from its rows, which filling drops (ids, codes) or clears
    #: (the rows touched, without a window).
    _ids: np.ndarray | None
    _codes: np.ndarray | None
    _touched: np.ndarray | None
    #: Of changes to a checkpoint, the rows there of the keys it held, which come first
    #: (None: bytes of format 3 and before, which do not say).
    held_rows: np.ndarray | None

    def keys_at(self, rows: np.ndarray) -> np.ndarray:
        """The keys of ``rows``."""


#: The table ``TableBytes.fill`` fills and returns.
T = TypeVar("T", bound=Table)


def describe(
    monoid: Monoid, interval_ms: int, window: Window | SessionWindow | None, ttl_ms: int | None = None
) -> dict:
    """What a table's bytes mean, as JSON data: the monoid (``Monoid.identity``), the
    window, the checkpoint interval and, for a table that expires keys, ``ttl_ms``.
    Tables encode it (from format 2), and a job directory records it, so a job with other
    settings does not read its state. Without a ``ttl_ms`` the record has no such entry
    and equals those written before keys could expire."""
    description = {"monoid": monoid.identity(), "window": window and window.describe(), "interval_ms": interval_ms}
    if ttl_ms is not None:
        description["ttl_ms"] = ttl_ms
    return description


def encode_rows(table: Table, rows: np.ndarray, checkpoint_ms: int, emitted_ms: int,
                held_rows: np.ndarray | None = None) -> bytes:
    """The bytes of ``table``'s ``rows`` (a mask, or indices in order), its late count and settings, with the
    times ``checkpoint_ms`` and ``emitted_ms`` (a checkpoint's, which may be older than the
    table's own). Changes to a checkpoint give ``held_rows``: the rows there of the keys
    of their first rows, the keys it held."""
    if rows.dtype == bool:
        rows = np.flatnonzero(rows)  # a few rows of many: each column read at those only
    meta = np.array([checkpoint_ms, emitted_ms, table.late_count, table.bucket_ms], dtype=np.int64)
    description = describe(table.monoid, table.interval_ms, table.window, table.ttl_ms)
    times = table.times[rows] if table.times is not None else np.empty(0, np.int64)
    return codec.pack(
        _MAGIC,
        _VERSION,
        [
            codec.ints_to_bytes(meta),
            codec.keys_to_bytes(table.keys_at(rows)),
            codec.ints_to_bytes(table.buckets[rows]),
            table.monoid.encode_column(table.values[rows]),
            json.dumps(description, sort_keys=True).encode(),
            codec.ints_to_bytes(times),
            codec.ints_to_bytes(np.empty(0, np.int64) if held_rows is None else held_rows),
        ],
    )


def naming_held_rows(data: bytes, held_rows: np.ndarray) -> bytes:
    """The changes to a checkpoint ``data`` (``encode_rows`` bytes with held rows) naming
    ``held_rows`` as the rows there of the keys of their first rows instead."""
    _, sections = codec.unpack(_MAGIC, (_VERSION,), data, "changes to a checkpoint")
    return codec.pack(_MAGIC, _VERSION, sections[:-1] + [codec.ints_to_bytes(held_rows)])


@dataclass(frozen=True)
class TableBytes:
    """The bytes of ``KeyedTable.encode`` (or ``checkpoint``) split into their sections
    and checked, not yet decoded: what they name (``settings``) and how they ``fill`` a
    new table."""

    version: int
    sections: list[bytes]
    #: What the bytes are, for messages ("checkpoint at 200").
    what: str

    @classmethod
    def of(cls, data: bytes, what: str = "table") -> TableBytes:
        """The sections of ``data``; ``CorruptCheckpointError`` naming ``what`` if damaged."""
        version, sections = codec.unpack(_MAGIC, _SECTIONS, data, what)
        if (len(sections) != _SECTIONS[version] or len(sections[0]) != 32 or len(sections[2]) % 8
                or any(len(section) % 8 for section in sections[5:])):
            raise CorruptCheckpointError(f"{what}: the sections of the table are malformed")
        return cls(version, sections, what)

    def settings(self) -> tuple[Monoid, int, Window | SessionWindow | None, int | None]:
        """``(monoid, interval_ms, window, ttl_ms)``, as the bytes name them.

        The monoid is rebuilt with ``monoids.from_identity``: one defined outside
        ``monoids`` must be imported first. Raises ``CorruptCheckpointError`` for an
        unreadable description and ``StateValueError`` when the monoid cannot be rebuilt
        or the bytes are of format 1, which does not name its monoid.
        """
        what = self.what
        if self.version == 1:
            raise StateValueError(
                f"{what} is in table format 1, which does not name its monoid; decode it with the "
                "task's monoid and window (state.tables.decode_table)"
            )
        try:
            description = json.loads(self.sections[4])
            identity, interval_ms = description["monoid"], check_interval_ms(description["interval_ms"])
            window = window_from(description["window"])
            ttl_ms = description.get("ttl_ms")
            if ttl_ms is not None:
                check_ttl_ms(ttl_ms, "the description")
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCheckpointError(f"{what}: the description of the table is unreadable ({exc!r})") from exc
        try:
            monoid = from_identity(identity)
        except MonoidError as exc:
            raise StateValueError(f"{what}: {exc}") from exc
        return monoid, interval_ms, window, ttl_ms

    def fill(self, table: T) -> T:
        """``table`` holding the rows and counters of the bytes; returns it.

        ``table`` is new, of the monoid, window, interval and ``ttl_ms`` to read the
        bytes with (its ``ttl_ms`` needs bytes that hold times: see
        ``state.tables.decode_table``)."""
        what, sections = self.what, self.sections
        meta, keys, buckets, values = sections[:4]
        checkpoint_ms, emitted_ms, late_count, bucket_ms = codec.ints_from_bytes(meta).tolist()
        if bucket_ms != table.bucket_ms:
            raise CorruptCheckpointError(
                f"{what}: written with {bucket_ms} ms buckets, this task uses {table.bucket_ms} ms "
                "(the window or checkpoint interval changed)"
            )
        try:
            table.keys = np.asarray(codec.keys_from_bytes(keys), dtype=object)
        except (ValueError, pa.ArrowException) as exc:
            raise CorruptCheckpointError(f"{what}: the keys are unreadable ({exc})") from exc
        table.buckets = codec.ints_from_bytes(buckets)
        try:
            table.values = table.monoid.decode_column(values)
        except MonoidError as exc:
            raise CorruptCheckpointError(f"{what}: {exc}") from exc
        if not len(table.keys) == len(table.buckets) == len(table.values):
            raise CorruptCheckpointError(f"{what}: columns differ in length")
        if table.times is not None:
            table.times = codec.ints_from_bytes(sections[5]) if len(sections) > 5 else np.empty(0, np.int64)
            if len(table.times) != len(table.keys) and not len(table.times) and table.ttl_ms is not None:
                raise StateValueError(
                    f"{what} holds no message times for its {len(table.keys)} rows: it was written without "
                    f"ttl_ms, and cannot be read with ttl_ms={table.ttl_ms}"
                )
            if len(table.times) != len(table.keys):
                raise CorruptCheckpointError(f"{what}: columns differ in length")
        table._ids, table._codes = None, None
        table.held_rows = codec.ints_from_bytes(sections[6]) if len(sections) > 6 else None
        if table.held_rows is not None and len(table.held_rows) > len(table.keys):
            raise CorruptCheckpointError(f"{what}: more rows held than keys")
        if table._touched is not None:
            table._touched = np.zeros(len(table.keys), dtype=bool)
        table.checkpoint_ms, table.emitted_ms, table.late_count = checkpoint_ms, emitted_ms, late_count
        return table
