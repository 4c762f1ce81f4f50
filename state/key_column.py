"""``KeyColumn``: the keys of a table's rows, a column that grows at its head's end
without copying what it holds.

Without a window a table holds one committed row per key first, then the rows since
its last checkpoint (``state.table``). A batch leaves the committed rows as they are
and a checkpoint adds those of new keys after them, so their keys only ever grow at
their end; copying them at every batch would cost a refcount of every key, scattered
in memory, which is most of a batch's time in a table of millions of keys. The column
holds them as its *head*, the first rows of an array with room to spare, and the other
rows as its *tail*, an array of their own.

Tables share heads (``KeyedTable.copy`` is a snapshot). An array's room
(``state.rooms.Room``) is written only past the rows any head of it has held (its
``used``): a head that ends there grows into the room; one that ends before (a
snapshot, or a table whose copy grew first) is copied into a new array. So no column
is ever changed where a table can see it, and the usual table grows its keys in
place, in the time of its new keys.
"""

from __future__ import annotations

import numpy as np

from state.rooms import Room

__all__ = ["KeyColumn"]


class KeyColumn:
    """An immutable column of keys: a head (the first ``_n`` keys of ``_room``) and a
    tail; see the module docstring."""

    __slots__ = ("_room", "_n", "_tail")

    _NONE = np.empty(0, dtype=object)

    def __init__(self, keys: np.ndarray) -> None:
        """The column of ``keys`` (an object array, not copied), all in its head."""
        self._room, self._n, self._tail = Room(keys, len(keys)), len(keys), self._NONE

    def __len__(self) -> int:
        return self._n + len(self._tail)

    def _head(self) -> np.ndarray:
        return self._room.array[:self._n]

    def whole(self) -> np.ndarray:
        """The keys as one array: copied only where both head and tail hold keys."""
        if not len(self._tail):
            return self._head()
        return np.concatenate([self._head(), self._tail]) if self._n else self._tail

    def take(self, rows: np.ndarray | slice) -> np.ndarray:
        """The keys of ``rows``: a mask, indices (not negative) or a slice of step 1."""
        if not len(self._tail):
            return self._head()[rows]
        n = self._n
        if isinstance(rows, slice):
            start, stop, _ = rows.indices(len(self))
            if stop <= n or start >= n:  # a view of the head or of the tail
                return self._head()[start:stop] if stop <= n else self._tail[start - n:stop - n]
            return np.concatenate([self._head()[start:], self._tail[:stop - n]])
        rows = np.asarray(rows)
        if rows.dtype == bool:
            return np.concatenate([self._head()[rows[:n]], self._tail[rows[n:]]])
        if not len(rows) or rows.min() >= n:
            return self._tail[rows - n]
        if rows.max() < n:
            return self._room.array[rows]
        keys = np.empty(len(rows), dtype=object)
        in_head = rows < n
        keys[in_head] = self._room.array[rows[in_head]]
        keys[~in_head] = self._tail[rows[~in_head] - n]
        return keys

    def first(self, n: int) -> KeyColumn:
        """The column of the first ``n`` keys, sharing this one's head."""
        return self.then(n, self._NONE, self._NONE)

    def then(self, settled: int, head: np.ndarray, tail: np.ndarray) -> KeyColumn:
        """The column of the first ``settled`` keys, then ``head`` and ``tail``: the first
        ones and ``head`` as its head, grown in place where no head of its array has
        gone past them."""
        column = KeyColumn.__new__(KeyColumn)
        if settled > self._n:
            head = np.concatenate([self._tail[:settled - self._n], head])
            settled = self._n
        column._room, column._n = self._grown(settled, head)
        column._tail = tail
        return column

    def _grown(self, n: int, more: np.ndarray) -> tuple[Room, int]:
        """The room and length of the first ``n`` keys of the head followed by ``more``."""
        if not len(more):
            return self._room, n
        room, _ = self._room.then(self._room.array, n, more)
        return room, n + len(more)
