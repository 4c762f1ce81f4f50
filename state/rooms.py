"""``Room``: an array that columns are the first rows of, with room to spare after
them, so that a column can grow, and a table rewrite the rows only it holds, without
copying the rows before.

A table's columns are shared with its copies (``KeyedTable.copy`` is a snapshot), and
no column may change where a copy can see it. A room knows how far its array has been
written (``used``), how far any copy of a table sees into it (``seen``, which ``copy``
raises with ``Rooms.copied``) and which table wrote it last (``writer``). A column's
first ``n`` rows followed by more (``then``) are written in place from a row ``low``
on (``low <= n``) where no copy sees that far and either nothing has been written
there or the writer is the table writing now; else the rows are copied into a new
room half again as large. Pages of the room past what is written are never touched,
so the room costs no resident memory until rows fill it.

A table handed on to a holder that continues it in place (``KeyedTable.handover``)
takes the writer's place instead: the table it came from then writes apart, and may
no longer read its rows once the holder rewrites them.

``state.key_column`` keeps its keys' head in rooms without a writer: a head grows in
place only past every row written.
"""

from __future__ import annotations

import numpy as np

from monoids.columns import records_as_bytes

__all__ = ["Room", "Rooms"]


class Room:
    """An array whose first ``used`` rows have been written; see the module docstring."""

    __slots__ = ("array", "used", "seen", "writer")

    def __init__(self, array: np.ndarray, used: int, seen: int = 0, writer: object = None) -> None:
        self.array, self.used, self.seen, self.writer = array, used, seen, writer

    @classmethod
    def of(cls, column: np.ndarray) -> Room:
        """A room that is ``column``, every row of it written and seen."""
        return cls(column, len(column), len(column))

    def holds(self, column: np.ndarray) -> bool:
        """Whether ``column`` is the first rows of this room's array."""
        array = self.array
        return (column is array or column.base is array) and column.strides == array.strides and (
            column.__array_interface__["data"][0] == array.__array_interface__["data"][0])

    def then(self, column: np.ndarray, n: int, more: np.ndarray, writer: object = None,
             low: int | None = None) -> tuple[Room, np.ndarray]:
        """The room and the column of ``column[:n]`` (the first rows of this room)
        followed by ``more``: written in place where ``writer`` may write from row
        ``low`` (default ``n``) on, else copied into a new room. With ``low < n`` the
        caller writes rows from ``low`` on into the column returned."""
        end, low = n + len(more), n if low is None else low
        if (more.dtype == self.array.dtype and end <= len(self.array) and self.seen <= low
                and (self.used <= low or (writer is not None and self.writer is writer))):
            room = self
        else:
            dtype = column.dtype if column.dtype == more.dtype else np.result_type(column.dtype, more.dtype)
            room = Room(np.empty(end + end // 2, dtype=dtype), 0)
            _put(room.array[:n], column[:n])
        _put(room.array[n:end], more)
        room.used, room.writer = end, writer
        return room, room.array[:end]


def _put(into: np.ndarray, rows: np.ndarray) -> None:
    """Writes ``rows`` into ``into``: records as their bytes (``records_as_bytes``)."""
    raw = records_as_bytes(into.dtype) if rows.dtype == into.dtype else None
    if raw is not None:
        into, rows = into.view(raw), rows.view(raw)
    into[...] = rows


class Rooms:
    """The rooms of a table's columns, by the column's name, and the table's token as
    their writer. ``copied`` gives a copy of the table rooms of its own."""

    __slots__ = ("_rooms", "_writer")

    def __init__(self) -> None:
        self._rooms: dict[str, Room] = {}
        self._writer = object()

    def then(self, name: str, column: np.ndarray, n: int, more: np.ndarray, low: int | None = None) -> np.ndarray:
        """Column ``name``, whose rows are ``column``: its first ``n`` rows followed by
        ``more`` (``Room.then``), in place where this table may write from ``low`` on."""
        room = self._rooms.get(name)
        if room is None or not room.holds(column):
            room = Room.of(column)
        self._rooms[name], grown = room.then(column, n, more, self._writer, low)
        return grown

    def copied(self, rows: int) -> Rooms:
        """The rooms of a copy of a table of ``rows`` rows: both see them now, and the
        copy is another writer."""
        for room in self._rooms.values():
            room.seen = max(room.seen, rows)
        twin = Rooms()
        twin._rooms.update(self._rooms)
        return twin

    def handed_over(self) -> Rooms:
        """The rooms of a table that takes this one's place: it writes as this table
        did, and this one becomes another writer."""
        twin = Rooms()
        twin._rooms.update(self._rooms)
        twin._writer, self._writer = self._writer, twin._writer
        return twin
