"""Tables of every kind: the one place that picks the class of a table for a window.

A ``state.table.KeyedTable`` keeps no window, fixed windows, or a time to live; a
``state.sessions.SessionTable``, which builds on it, keeps session windows. This
module sits above both: it builds an empty table of the right class (``table_for``)
and decodes bytes into one (``decode_table`` with the task's settings, ``read_table``
with those the bytes name), so the generic table never needs to know its kinds. A
checkpoint stored as changes to an earlier one is decoded from its chain
(``chain_table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from monoids.base import Monoid
from state.errors import CorruptCheckpointError, StateValueError
from state.sessions import SessionTable
from state.table import KeyedTable
from state.table_format import TableBytes
from state.window import SessionWindow, Window

__all__ = ["Stored", "table_for", "decode_table", "read_table", "chain_table"]


class Stored(NamedTuple):
    """One checkpoint as its file holds it (``CheckpointStore.read``)."""

    time_ms: int
    #: The CRC32 of its record (``Written.crc``).
    crc: int
    #: The state at ``time_ms``: whole, or with a ``base``, the changes to that one.
    data: bytes
    #: ``(time_ms, crc)`` of the checkpoint whose state ``data`` changes; None: whole.
    base: tuple[int, int] | None = None


def table_for(
    monoid: Monoid, interval_ms: int, window: Window | SessionWindow | None = None, ttl_ms: int | None = None
) -> KeyedTable:
    """An empty table for ``window``: a ``SessionTable`` for sessions, else a ``KeyedTable``."""
    if isinstance(window, SessionWindow):
        return SessionTable(monoid, interval_ms, window, ttl_ms)
    return KeyedTable(monoid, interval_ms, window, ttl_ms)


def decode_table(
    data: bytes,
    monoid: Monoid,
    interval_ms: int,
    window: Window | SessionWindow | None = None,
    what: str = "table",
    *,
    ttl_ms: int | None = None,
) -> KeyedTable:
    """A table from ``encode`` (or ``checkpoint``) bytes of an equal monoid and window.

    With a ``ttl_ms`` the bytes must hold the rows' times (a table written with a
    ``ttl_ms``); without one their times, if any, are left out. Damaged bytes, or bytes
    of another monoid or bucket width, raise ``CorruptCheckpointError`` naming ``what``."""
    encoded = TableBytes.of(data, what)
    return encoded.fill(table_for(monoid, interval_ms, window, ttl_ms))


def read_table(data: bytes, what: str = "table") -> KeyedTable:
    """A table from ``encode`` or ``checkpoint`` bytes alone, with the monoid, window,
    checkpoint interval and ``ttl_ms`` they name (``TableBytes.settings``).

    The monoid is rebuilt with ``monoids.from_identity``: one defined outside
    ``monoids`` must be imported first. Raises ``CorruptCheckpointError`` for damaged
    bytes and ``StateValueError`` when the monoid cannot be rebuilt or the bytes are of
    format 1, which does not name its monoid (use ``decode_table``).
    """
    encoded = TableBytes.of(data, what)
    return encoded.fill(table_for(*encoded.settings()))


def chain_table(
    chain: Sequence[Stored], tables: Sequence[KeyedTable], start: KeyedTable | None = None
) -> KeyedTable:
    """The checkpoint a chain (``CheckpointStore.recover``) ends with: its whole checkpoint
    decoded, or when the chain starts with changes, ``start`` (the checkpoint they
    change) rolled forward in place by each changes after it
    (``KeyedTable.roll_forward``), which counts their rows in its ``chain_rows``.
    ``tables`` are the chain's checkpoints, each decoded from its data."""
    (first, *rest), (whole, *changes) = chain, tables
    if first.base is None:
        table = whole
        _check_time(table, first)
        table.whole_ms, table.chain_rows = first.time_ms, 0
    elif start is not None and start.checkpoint_ms == first.base[0]:
        table, rest, changes = start, chain, tables
    else:
        raise StateValueError(f"the checkpoint at {first.time_ms} ms changes the one at {first.base[0]} ms, "
                              "which the chain does not hold")
    for one, stored in zip(changes, rest):
        _check_time(one, stored)
    if changes:
        table.roll_forward(*changes)
    return table


def _check_time(table: KeyedTable, stored: Stored) -> None:
    if table.checkpoint_ms != stored.time_ms:
        raise CorruptCheckpointError(f"checkpoint at {stored.time_ms} holds the state at {table.checkpoint_ms}")
