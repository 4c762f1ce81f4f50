"""``StoredTable``: a table without a window whose committed rows wait on local disk
(``state.key_runs``) until a batch brings their keys.

A ``KeyedTable`` holds one committed row per key of its last checkpoint, every one
decoded in memory. A stored table holds them in a ``KeyRuns`` store: each key's record
is its committed value and its *place*, its row in the checkpoint (the order in which
a checkpoint and its changes, ``KeyedTable.checkpoint_changes``, name keys). In memory
it keeps a ``KeyedTable``, the *hot* table: the committed rows of the keys brought, in
order of place, then the rows since the checkpoint. Before an update, a lookup or rows
since a checkpoint followed, the keys the hot table does not hold are looked up in the
store and those found brought in as committed rows (``_bring``); so the hot table
folds, totals and checkpoints its keys as the whole table would, and its checkpoint's
changes, its committed rows renamed to their places, are the whole table's bytes.

After a checkpoint the changed rows go to the store, new keys at the places after the
checkpoint's, and the hot table sheds the committed rows of the keys without rows
since (``KeyedTable.shed_committed``). A whole checkpoint reads every record from the
store and orders them by place.

Keys are strings or bytes (``KeyRuns`` compares them as Arrow does, which only for
those is Python's equality); the null key, which the store does not hold, stays in
the hot table. Values are of a fixed width (a numpy dtype other than object).

The key groups do not keep their state in stored tables yet (docs/performance.md,
"Memory").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from state.errors import CorruptCheckpointError, StateValueError
from state.key_kinds import kinds_of, not_held
from state.key_runs import KeyRuns, RunFiles
from state.table import COMMITTED, KeyedTable
from state.table_format import encode_rows, naming_held_rows
from state.tables import read_table

__all__ = ["StoredTable"]

#: How many runs a store keeps after its first before merging them (``_compacted``).
_NEWER_RUNS = 3
#: The kinds of keys a stored table holds.
KINDS = ("str", "bytes")
#: What the hot table says or does for the whole table: its settings and counters, and
#: what reads only the keys brought (the keys touched, the rows since the checkpoint).
_SHARED = frozenset({
    "monoid", "interval_ms", "window", "ttl_ms", "keeps_changes", "follows_checkpoints", "checkpoint_ms",
    "emitted_ms", "sealed_ms", "late_count", "whole_ms", "chain_rows", "due_checkpoint", "take_touched_totals",
    "encode_since_checkpoint", "expire",
})


class StoredTable:
    """A table without a window or ``ttl_ms`` whose committed rows are in a ``KeyRuns``
    store, its runs kept by ``files``; see the module docstring."""

    def __init__(self, hot: KeyedTable, store: KeyRuns | None, places: np.ndarray, count: int,
                 files: RunFiles) -> None:
        #: The committed rows of the keys brought, then the rows since the checkpoint.
        self.hot = hot
        #: The records of the checkpoint's keys (None until it holds one; its kind is theirs).
        self.store = store
        #: The place of each committed row of the hot table in the checkpoint.
        self.places = places
        #: How many keys the checkpoint holds: the places taken.
        self.count = count
        self.files = files

    @classmethod
    def of(cls, checkpoint: KeyedTable, files: RunFiles) -> StoredTable:
        """The stored table of ``checkpoint``, a table of committed rows only (a decoded
        checkpoint rolled forward, or an empty table), written into a store whose runs
        ``files`` keeps."""
        if not checkpoint.keeps_changes or (checkpoint.buckets != COMMITTED).any():
            raise StateValueError("a stored table starts from a checkpoint of a table without a window or ttl_ms")
        if checkpoint.values.dtype == object:
            raise StateValueError(f"the values of {checkpoint.monoid.identity()} are objects: a stored table holds "
                                  "values of a fixed width")
        keys, values = checkpoint.keys, checkpoint.values
        nulls = np.flatnonzero(pd.isna(keys))
        hot = checkpoint.holding(keys[nulls], values[nulls])
        hot.late_count, hot.chain_rows, hot.whole_ms = checkpoint.late_count, checkpoint.chain_rows, checkpoint.whole_ms
        table = cls(hot, None, nulls, len(keys), files)
        table._check_kinds(keys, "the checkpoint")
        table._write(keys, values, np.arange(len(keys)))
        return table

    # -- what the hot table says ----------------------------------------------------

    def __len__(self) -> int:
        """The keys of the checkpoint and the rows since it."""
        return self.count + len(self.hot) - len(self.places)

    def __getattr__(self, name: str):
        """What the hot table says for the whole table (``_SHARED``)."""
        if name not in _SHARED:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return getattr(self.hot, name)

    # -- bringing keys --------------------------------------------------------------

    def _check_kinds(self, keys: np.ndarray, what: str, error: type[Exception] = StateValueError) -> None:
        """Refuses ``keys`` (``error``) of another kind than the store's keys, or of any
        but str and bytes, or of two."""
        brought = kinds_of(keys)
        held = (self.store.kind,) if self.store is not None else KINDS
        if not set(brought) <= set(held) or len(brought) > 1:
            raise error(f"a stored table holds keys of one kind, str or bytes: {what} brings "
                        f"{not_held(brought, held if len(held) == 1 else (), keys)}"
                        + (f" to a table of {held[0]} keys" if len(held) == 1 else ""))

    def _bring(self, keys: np.ndarray, what: str) -> None:
        """Brings the keys of ``keys`` (an object array) that the hot table does not hold
        and the store does into the hot table, as committed rows in order of place."""
        self._check_kinds(keys, what)
        if self.store is None or not len(keys):
            return
        missing = pd.unique(keys[~self.hot.holds(keys)])
        missing = missing[~pd.isna(missing)]
        if not len(missing):
            return
        found, records = self.store.find(missing)
        if found.any():
            places = np.concatenate([self.places, records["place"][found]])
            order = np.argsort(places, kind="stable")
            self.hot.take_committed(missing[found], self.hot.monoid.column(records["value"][found]), order)
            self.places = places[order]

    def update(self, keys: np.ndarray, timestamps_ms: np.ndarray, values, touched: bool = True):
        """``KeyedTable.update``, its keys' committed rows brought first."""
        keys = np.asarray(keys, dtype=object)
        self._bring(keys, "this update")
        return self.hot.update(keys, timestamps_ms, values, touched)

    def get(self, key) -> object:
        """``KeyedTable.get``."""
        one = np.empty(1, dtype=object)
        one[0] = key
        self._bring(one, "this lookup")
        return self.hot.get(key)

    def follow(self, since: KeyedTable) -> None:
        """``KeyedTable.follow``: the rows ``since`` the checkpoint, their keys brought."""
        self._bring(np.asarray(since.keys, dtype=object), "the rows since the checkpoint")
        self.hot.follow(since)

    def copy(self) -> StoredTable:
        """A snapshot (the store is one already)."""
        return StoredTable(self.hot.copy(), self.store, self.places, self.count, self.files)

    def savepoint(self) -> Callable[[], StoredTable]:
        """``KeyedTable.savepoint``: a way back to the table as it is now."""
        back, store, places, count = self.hot.savepoint(), self.store, self.places, self.count

        def undo() -> StoredTable:
            return StoredTable(back(), store, places, count, self.files)

        return undo

    # -- checkpoints ----------------------------------------------------------------

    def checkpoint_changes(self, timestamp_ms: int) -> bytes:
        """``KeyedTable.checkpoint_changes`` of the whole table: the hot table's, naming
        its committed rows by their places. The changed rows then go to the store, and
        the hot table keeps the committed rows of the keys with rows since."""
        data = self.hot.checkpoint_changes(timestamp_ms)
        changes = read_table(data, f"the changes of the checkpoint at {timestamp_ms} ms")
        new = len(changes) - len(changes.held_rows)
        places = np.concatenate([self.places, self.count + np.arange(new)])
        held = places[changes.held_rows]
        self._write(changes.keys, changes.values, np.concatenate([held, places[len(self.places):]]))
        self.count += new
        nulls = np.flatnonzero(pd.isna(self.hot.keys_at(np.arange(len(places)))))  # the store holds none
        self.places = places[self.hot.shed_committed(nulls)]
        return naming_held_rows(data, held)

    def seal(self, timestamp_ms: int) -> None:
        """``KeyedTable.seal``: the checkpoint's changes go to the store, not written."""
        self.checkpoint_changes(timestamp_ms)

    def checkpoint(self, timestamp_ms: int) -> bytes:
        """``KeyedTable.checkpoint``: every key's committed row, in order of place."""
        self.checkpoint_changes(timestamp_ms)
        self.hot.whole_ms, self.hot.chain_rows = timestamp_ms, 0
        whole = self.committed()
        return encode_rows(whole, np.arange(len(whole)), timestamp_ms, min(timestamp_ms, whole.emitted_ms))

    def encode(self) -> bytes:
        """``KeyedTable.encode``: the checkpoint's rows, in order of place, then the rows since."""
        whole = self.committed()
        whole.follow(read_table(self.hot.encode_since_checkpoint()))
        return whole.encode()

    def roll_forward(self, *changes: KeyedTable) -> None:
        """``KeyedTable.roll_forward`` of this table, a checkpoint (no rows since): the
        rows of each of ``changes`` go to the store, those of the keys the checkpoint
        held at the places the changes name, checked there, the new keys at the places
        after. The keys brought are dropped: their rows may have changed."""
        since_ms = self.checkpoint_ms
        for one in changes:
            if (len(self.hot) > len(self.places) or one.checkpoint_ms <= since_ms or one.held_rows is None
                    or (one.buckets != COMMITTED).any()):
                raise CorruptCheckpointError(f"the changes of the checkpoint at {one.checkpoint_ms} ms do not follow "
                                             f"the checkpoint at {since_ms} ms")
            since_ms = one.checkpoint_ms
        nulls = np.flatnonzero(pd.isna(self.hot.keys_at(np.arange(len(self.places)))))
        null_row = (self.hot.keys_at(nulls), self.hot.values[nulls], self.places[nulls])
        store, count = self.store, self.count
        try:
            null_row = self._roll(changes, null_row)
        except BaseException:
            self.store, self.count = store, count  # changes that fail part way change nothing
            raise
        newest = changes[-1] if changes else self.hot
        hot = self.hot.holding(null_row[0], null_row[1])
        hot.checkpoint_ms, hot.emitted_ms, hot.late_count = newest.checkpoint_ms, newest.emitted_ms, newest.late_count
        hot.whole_ms, hot.chain_rows = self.hot.whole_ms, self.hot.chain_rows + sum(len(one) for one in changes)
        self.hot, self.places = hot, null_row[2]

    def _roll(self, changes: tuple[KeyedTable, ...], null_row: tuple) -> tuple:
        """Writes the rows of ``changes`` into the store (``roll_forward``); returns the
        null key's row, as ``null_row`` gives it before them."""
        for one in changes:
            what = f"the changes of the checkpoint at {one.checkpoint_ms} ms"
            self._check_kinds(one.keys, what, CorruptCheckpointError)
            places = np.concatenate([one.held_rows, self.count + np.arange(len(one) - len(one.held_rows))])
            self._check_held(one.keys[:len(one.held_rows)], one.held_rows, null_row[2], what)
            self._write(one.keys, one.values, places)
            self.count += len(one) - len(one.held_rows)
            null = np.flatnonzero(pd.isna(one.keys))
            if len(null):
                null_row = (one.keys[null], one.values[null], places[null])
        return null_row

    def _check_held(self, keys: np.ndarray, places: np.ndarray, null_places: np.ndarray, what: str) -> None:
        """``CorruptCheckpointError`` unless ``keys`` are held at ``places`` (the null key
        in the hot table, at ``null_places``)."""
        if len(places) and (places.min() < 0 or places.max() >= self.count):
            raise CorruptCheckpointError(f"{what} name rows that the checkpoint they change does not have")
        nulls = pd.isna(keys)
        found, records = (self.store.find(keys[~nulls]) if self.store is not None
                          else (np.zeros((~nulls).sum(), dtype=bool), None))
        if (not found.all() or (found.any() and (records["place"] != places[~nulls]).any())
                or not np.isin(places[nulls], null_places).all()):
            raise CorruptCheckpointError(f"{what} name rows of other keys")

    def committed(self) -> KeyedTable:
        """A table of the committed row of every key of the checkpoint, in order of
        place: the checkpoint decoded."""
        keys, values, places = [], [], []
        for part_keys, records in (self.store.items() if self.store is not None else ()):
            keys.append(part_keys)
            values.append(records["value"])
            places.append(records["place"])
        nulls = np.flatnonzero(pd.isna(self.hot.keys_at(np.arange(len(self.places)))))
        keys.append(self.hot.keys_at(nulls))
        values.append(self.hot.values[nulls])
        places.append(self.places[nulls])
        order = np.argsort(np.concatenate(places), kind="stable")
        table = self.hot.holding(np.concatenate(keys).astype(object)[order],
                                 self.hot.monoid.column(np.concatenate(values)[order]))
        table.late_count = self.hot.late_count
        return table

    def _write(self, keys: np.ndarray, values: np.ndarray, places: np.ndarray) -> None:
        """Writes the records of ``keys`` into the store (of the null key none: its row
        stays in the hot table)."""
        nulls = pd.isna(keys)
        if nulls.all():
            return
        if self.store is None:
            record = np.dtype([("value", values.dtype), ("place", np.int64)])
            self.store = KeyRuns(self.files, record, kinds_of(keys)[0])
        records = np.empty(len(keys), dtype=self.store.dtype)
        records["value"], records["place"] = values, places
        self.store = _compacted(self.store.then(keys[~nulls], records[~nulls]))


def _compacted(store: KeyRuns) -> KeyRuns:
    """``store`` with its runs merged where they are many: a lookup searches each run.
    The runs after the first (the largest) are merged into one when they are more than
    ``_NEWER_RUNS``; all are when that one holds an eighth of the first's rows. So
    the first run is written again once for about every eighth of its rows changed."""
    rows = store.run_rows()
    if len(rows) <= 1 + _NEWER_RUNS:
        return store
    store = store.merged(1)
    first, newer = store.run_rows()
    return store.merged() if 8 * newer >= first else store
