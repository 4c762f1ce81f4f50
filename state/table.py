"""``KeyedTable``: the states of many keys of one task, held in columns.

A task (on Spark, a key group) owns thousands of keys. Keeping one Python object
per key would make every micro-batch pay per-key interpreter cost; the table keeps
three aligned columns instead, one row per (key, bucket):

- ``keys``: the message keys, of one kind (strings, bytes or numbers; ``state.key_kinds``),
  beside the null key;
- ``buckets``: event-time buckets, ``ts // bucket_ms * bucket_ms``;
- ``values``: a monoid column (see ``monoids.base``), the fold of the bucket's messages.

A batch of messages is applied with one factorize and one ``reduce_by_key``.

Buckets never straddle a checkpoint boundary (``bucket_ms`` divides the checkpoint
interval), so the table can checkpoint at *any* boundary ``T``: the checkpoint is
the fold of the rows with ``bucket < T``. All tasks of a job therefore checkpoint
at the same boundary, the newest one the watermark has passed, which is what lets
the global minimum checkpoint clock advance in step.

Without a window, rows before the last checkpoint are merged into one *committed*
row per key (bucket ``COMMITTED``), which the table holds first, in the order in which
the checkpoint decodes them: a batch folds only the rows after them, and a checkpoint
only those and the committed rows of their keys (``_commit``). Such a table (without
``ttl_ms`` either) may checkpoint only the keys whose committed rows changed since its
last checkpoint (``checkpoint_changes``), which ``roll_forward`` applies to that
checkpoint. With a window, buckets are the window's panes; closed windows are emitted
by ``close_windows`` and panes no window can need again are pruned at each checkpoint,
so memory stays bounded.

Without a window a table may expire keys (``ttl_ms``, by the rules of
``state.expiry``): it then keeps a fourth column, ``times``, the newest message time
of each row. A message more than ``ttl_ms`` after its key's previous one starts the
key from ``zero()`` (``update``), and ``expire(watermark_ms)`` drops every key whose
newest message is more than ``ttl_ms`` behind the watermark.

Messages with a timestamp before ``sealed_ms`` (the last checkpoint, or the last
watermark that closed windows) are *late*: they are counted, never applied, because
the results they would change are already published.

A table is encoded in the format of ``state.table_format`` (``encode``,
``checkpoint``, ``checkpoint_changes``, ``encode_since_checkpoint``), which names its
monoid, window, checkpoint interval and ``ttl_ms``; ``recover`` reads a checkpoint
back into the table, and ``state.tables`` decodes bytes into a new table of the kind
they need (this module does not know the kinds built on ``KeyedTable``).

No operation writes into a row that a copy of the table holds, so ``copy`` is a
snapshot in constant time: a batch can be applied and undone. Columns grow in place
all the same: a batch leaves the committed rows where they are and writes the rows
after them into room at the end of each column's array, which no copy holds
(``state.rooms``; the keys' head, ``state.key_column``), so that it copies no column
of millions of rows, but for the values, where a checkpoint changes committed rows
that the snapshot of the batch before holds.

Hashing the keys is most of a batch's cost, so the table hashes only the keys a batch
brings: each key gets an id when first met (``state.key_codes.KeyIds``, shared by a
table, its copies and the tables rolled forward from them), and the table keeps its
rows' ids (``_ids``) and their key codes, the ids numbered by first appearance
(``_codes``, one per row). An update, a roll forward or rows followed look up the ids of
their new keys only. Folding rows, reading totals, sealing and expiring work on the
codes; an operation that drops or reorders rows renumbers them as integers, without
hashing. Ids and codes follow the rule of the columns.
Without a window the table also marks the rows that updates folded messages into
(``_touched``), so the totals of the keys a batch touched (``take_touched_totals``) need
no key hashed either. Neither is encoded: decoded bytes start without ids or codes
(computed when first needed) and with nothing touched.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from monoids import Monoid
from monoids.columns import join_columns
from state.boundaries import boundary_at_or_before, check_interval_ms, check_time_ms
from state.errors import CorruptCheckpointError, StateValueError
from state.expiry import check_ttl_ms, restarts
from state.key_codes import KeyIds, codes_on, distinct_below, first_appearance, first_rows, pair_codes
from state.key_column import KeyColumn
from state.key_kinds import dtype_kinds, kinds_of, not_held, other_kinds, refusal, unhashable, union
from state.rooms import Rooms
from state.table_format import TableBytes, encode_rows
from state.window import SessionWindow, Window, bucket_ms

__all__ = ["KeyedTable", "COMMITTED", "WindowResults"]

#: Bucket of the rows that fold everything before the last checkpoint (no window).
COMMITTED = -1
#: The columns a table keeps as arrays (``_ids``, ``_codes`` and ``times`` may be None).
_COLUMNS = ("_ids", "_codes", "buckets", "values", "times", "_touched")
#: No committed rows found by id yet (``KeyedTable._committed_row_of``).
_NO_COMMITTED_IDS = (np.empty(0, dtype=np.int32), 0)


@dataclass(frozen=True)
class WindowResults:
    """Values of closed windows: aligned arrays, one row per (key, window)."""

    keys: np.ndarray
    starts_ms: np.ndarray
    ends_ms: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


class KeyedTable:
    """Columnar monoid states of many keys; see the module docstring."""

    #: Whether the table keeps sessions (``state.sessions.SessionTable``).
    keeps_sessions = False

    def __init__(self, monoid: Monoid, interval_ms: int, window: Window | None = None, ttl_ms: int | None = None):
        if isinstance(window, SessionWindow) is not self.keeps_sessions:
            raise StateValueError(
                f"{type(self).__name__} cannot keep {window}: build tables with state.tables.table_for"
            )
        self.monoid = monoid
        self.interval_ms = check_interval_ms(interval_ms)
        self.window = window
        if ttl_ms is not None:
            check_ttl_ms(ttl_ms, "KeyedTable")
            if window is not None:
                raise StateValueError(
                    f"KeyedTable: ttl_ms={ttl_ms} with window {window}: windows close by themselves, "
                    "only a table without a window expires keys"
                )
        #: Keys whose newest message is more than this behind the watermark expire (None: never).
        self.ttl_ms = ttl_ms
        self.bucket_ms = bucket_ms(window, interval_ms)
        self.keys = np.empty(0, dtype=object)
        self.buckets = np.empty(0, dtype=np.int64)
        self.values = monoid.zeros(0)
        #: The newest message time of each row, only with a ``ttl_ms``.
        self.times = None if ttl_ms is None else np.empty(0, dtype=np.int64)
        #: The ids of the keys met (shared with copies), the ids of the rows' keys, and
        #: those numbered by first appearance (the rows' key codes); ids and codes are
        #: None until needed (``_row_ids``, ``_key_codes``).
        self._key_ids = KeyIds()
        self._ids = np.empty(0, dtype=np.intp)
        self._codes = np.empty(0, dtype=np.intp)
        #: Without a window, whether an update folded a message into each row since the
        #: last ``take_touched_totals``.
        self._touched = None if window is not None else np.empty(0, dtype=bool)
        #: Of a table decoded from changes to a checkpoint (``checkpoint_changes``), the
        #: rows there of the keys it held, its first rows (``roll_forward``; None: not
        #: known).
        self.held_rows = None
        #: The rooms the columns grow into (``state.rooms``), by the columns' names.
        self._rooms = Rooms()
        #: Time of the last checkpoint taken or recovered (0: none yet).
        self.checkpoint_ms = 0
        #: The chain of the last checkpoint (``checkpoint_changes``): the time of the whole
        #: checkpoint it starts at (the last one's own time when that is whole; 0: none
        #: known) and the rows of the changes after it, up to the last one.
        self.whole_ms = 0
        self.chain_rows = 0
        #: Watermark up to which closed windows have been emitted.
        self.emitted_ms = 0
        #: Messages refused as late since the table was created.
        self.late_count = 0

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def keys(self) -> np.ndarray:
        """The rows' keys (``state.key_column``: reading a few rows' keys is ``keys_at``)."""
        return self._keys.whole()

    @keys.setter
    def keys(self, keys: np.ndarray) -> None:
        self._keys = KeyColumn(keys)
        #: The kinds of the keys held (``state.key_kinds``), or more: a kind whose keys
        #: all went stays until keys of another kind come (``_admitted``); None: not known.
        self._key_kinds = () if not len(keys) else None

    def keys_at(self, rows: np.ndarray | slice) -> np.ndarray:
        """The keys of ``rows`` (a mask, indices or a slice), without the others'."""
        return self._keys.take(rows)

    @property
    def _ids(self) -> np.ndarray | None:
        return self._id_column

    @_ids.setter
    def _ids(self, ids: np.ndarray | None) -> None:
        """New ids of the rows. With them goes the committed row of each id found so far
        (``_committed_row_of``), which ``_set_ids`` keeps where the first rows stay."""
        self._id_column, self._committed_ids = ids, _NO_COMMITTED_IDS

    def _set_ids(self, ids: np.ndarray | None, kept: int) -> None:
        """``ids`` of the rows, the first ``kept`` of which hold the keys they held."""
        committed_ids = self._committed_ids
        self._ids = ids
        if committed_ids[1] <= kept:
            self._committed_ids = committed_ids

    @property
    def buckets(self) -> np.ndarray:
        """The rows' buckets (``COMMITTED`` for committed rows)."""
        return self._buckets

    @buckets.setter
    def buckets(self, buckets: np.ndarray) -> None:
        self._buckets, self._committed = buckets, None

    def _then_buckets(self, settled: int, more: np.ndarray) -> None:
        """The buckets of the first ``settled`` rows, committed ones, followed by ``more``
        (``_then``): the committed rows are counted in ``more`` alone."""
        self.buckets = self._then("buckets", settled, more)
        self._committed = settled + _leading_committed(more)

    def copy(self) -> KeyedTable:
        """A snapshot: shares the columns, which no operation writes into where a copy
        holds them (``state.rooms``)."""
        table = copy.copy(self)
        table._rooms, table._committed_ids = self._rooms.copied(len(self)), _NO_COMMITTED_IDS  # it writes its own
        return table

    def savepoint(self) -> Callable[[], KeyedTable]:
        """A way back to the table as it is now, for a caller that may give up the
        updates it makes next (a micro-batch that a bad record fails): a function that
        returns the table as it was. An update writes no row before the rows since the
        last checkpoint in place (only a checkpoint does), so the table as it was shares
        those rows with the table, and the rows after them are kept aside, written back
        by the function: updates go on growing the columns in place (``state.rooms``),
        and so does the checkpoint after them. There is no way back past a checkpoint
        (``RuntimeError``), and a copy taken in between sees the rows kept aside written
        back."""
        settled, checkpoint_ms = self._committed_rows(), self.checkpoint_ms
        table = copy.copy(self)
        table._committed_ids = _NO_COMMITTED_IDS  # the table may commit rows (absorb) after it
        aside = {name: column[settled:].copy() for name in _COLUMNS if (column := getattr(self, name)) is not None}

        def back() -> KeyedTable:
            if self.checkpoint_ms != checkpoint_ms:
                raise RuntimeError(f"no way back to the table before its checkpoint at {self.checkpoint_ms} ms")
            for name, rows in aside.items():
                getattr(table, name)[settled:] = rows
            table._rooms = self._rooms.handed_over()  # the table given up writes apart
            return table

        return back

    def handover(self) -> KeyedTable:
        """A copy that goes on from this table in place (``state.rooms``): it grows and
        rewrites the rows this table wrote, and this table, which writes apart from
        then on, holds its rows only until the copy changes. For a table handed on to
        be continued, where reading it afterwards is not needed (``persistent.runtime.kept``)."""
        table = copy.copy(self)
        table._rooms = self._rooms.handed_over()
        return table

    @property
    def sealed_ms(self) -> int:
        """Messages before this time are late."""
        return max(self.checkpoint_ms, self.emitted_ms)

    # -- updates -------------------------------------------------------------------

    def update(self, keys: np.ndarray, timestamps_ms: np.ndarray, values: np.ndarray,
               touched: bool = True) -> np.ndarray | None:
        """Applies messages given as aligned arrays; returns the keys touched, once each
        in order of appearance, as the table holds them (None and NaN are one key), or
        with ``touched=False`` None: without a window the table marks them all the same,
        for ``take_touched_totals``, and taking a batch's keys out of a table of
        millions costs a random read of each.

        ``values`` are monoid values (a column or any sequence ``monoid.column``
        accepts). A bad value raises before anything is applied, and so do keys new to
        the table of another kind than its keys (``state.key_kinds``). Late messages are
        counted in ``late_count`` and skipped.
        """
        timestamps_ms = np.asarray(timestamps_ms)
        if timestamps_ms.dtype.kind not in "iu":
            raise StateValueError(
                f"timestamps must be integers of milliseconds, got dtype {timestamps_ms.dtype}"
            )
        if len(timestamps_ms) and timestamps_ms.min() < 0:
            row = int(np.argmin(timestamps_ms))
            raise StateValueError(
                f"timestamp {int(timestamps_ms[row])} at row {row} (key {np.asarray(keys)[row]!r}) is negative"
            )
        column = self.monoid.column(values, "the table update")
        keys = np.asarray(keys, dtype=object) if not isinstance(keys, np.ndarray) else keys
        if not len(keys) == len(timestamps_ms) == len(column):
            raise StateValueError(
                f"keys, timestamps and values differ in length: {len(keys)}, {len(timestamps_ms)}, {len(column)}"
            )
        on_time = timestamps_ms >= self.sealed_ms
        late = int(len(on_time) - on_time.sum())
        if late:
            keys, timestamps_ms, column = keys[on_time], timestamps_ms[on_time], column[on_time]
        timestamps_ms = timestamps_ms.astype(np.int64)
        batch_ids = None
        if self.ttl_ms is not None and len(keys):
            fresh, batch_ids = self._restart(keys, timestamps_ms)
            keys, timestamps_ms, column, batch_ids = keys[fresh], timestamps_ms[fresh], column[fresh], batch_ids[fresh]
        taken = self._add(keys, timestamps_ms, column, touched, batch_ids) if len(keys) else np.empty(0, dtype=object)
        self.late_count += late
        return taken if touched else None

    def _add(self, keys: np.ndarray, timestamps_ms: np.ndarray, column: np.ndarray, touched: bool,
             batch_ids: np.ndarray | None = None) -> np.ndarray | None:
        """Folds messages that are not late (at least one) into the table (``_fold_tail``).
        Returns the keys touched, if ``touched``. ``batch_ids``: the keys' ids, where
        ``_restart`` found them, and their kinds, just before."""
        table_rows, settled = len(self), self._committed_rows()
        ids, codes = self._with(keys, settled, batch_ids)
        if batch_ids is None:
            self._take_kinds(keys)
        self._fold_tail(settled, ids, codes, keys.astype(object, copy=False),
                        timestamps_ms // self.bucket_ms * self.bucket_ms, column, timestamps_ms)
        taken = self.keys_at(self._first_rows_of(pd.unique(codes[table_rows - settled:]), settled)) if touched else None
        if not self.monoid.commutative:
            # Folding a key's buckets in time order is what a non-commutative monoid needs;
            # the settled rows are committed ones, the oldest.
            in_time_order = np.argsort(self.buckets[settled:], kind="stable")
            self._keep(np.concatenate([np.arange(settled), settled + in_time_order]))
        return taken

    def _committed_rows(self) -> int:
        """How many rows the table starts with that are committed rows (bucket
        ``COMMITTED``, one per key): the keys a checkpoint holds, which a batch leaves in
        place. Their keys are the first, so their codes are their rows. Counted once
        for each column of buckets (a batch asks several times)."""
        if self._committed is None:
            self._committed = _leading_committed(self._buckets)
        return self._committed

    def _one_row_a_key(self) -> bool:
        """Whether every row is a committed row: the keys are distinct, a row's code is its row."""
        return self._committed_rows() == len(self)

    def _restart(self, keys: np.ndarray, timestamps_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Starts from ``zero()`` each key that a message of the batch restarts
        (``state.expiry.restarts``): drops such a key's rows and returns which messages
        to apply, those from its last restart on, and the ids of ``keys``.

        A restart may drop rows the pending checkpoint would hold, but every replay from
        that checkpoint meets the restarting message again, and drops whatever it rebuilt
        of the key before it."""
        ids, codes = self._with(keys)
        self._take_kinds(keys)
        kept, fresh = restarts(codes, self.times, timestamps_ms, self.ttl_ms)
        if kept is not None:
            self._keep(kept)
        return fresh, ids[len(ids) - len(keys):]

    def _first_rows_of(self, codes: np.ndarray, settled: int) -> np.ndarray:
        """The first row of each key of ``codes`` (key codes), where the table starts
        with ``settled`` committed rows, whose codes are their rows: looks at the rows
        after them only."""
        tail = self._key_codes()[settled:]
        new = np.flatnonzero(tail >= settled)
        first_new = settled + new[first_rows(tail[new] - settled)]
        return np.where(codes < settled, codes, first_new[np.maximum(codes - settled, 0)]) if len(first_new) else codes

    @staticmethod
    def _distinct_keys(keys: np.ndarray, codes: np.ndarray, start: int) -> np.ndarray:
        """The keys of the rows from ``start`` on, once each in order of appearance, as
        ``keys`` first holds them; ``codes`` are their key codes, so no key is
        hashed again."""
        return keys[first_rows(codes)[pd.unique(codes[start:])]]

    def _fold_tail(self, settled: int, ids: np.ndarray, codes: np.ndarray, keys: np.ndarray, buckets: np.ndarray,
                   values: np.ndarray, times: np.ndarray) -> None:
        """Adds rows of ``keys``, ``buckets``, ``values`` and ``times`` after the table's,
        and folds the rows after the first ``settled`` into one a (key, bucket), older rows
        first; ``ids`` and ``codes`` are those of the rows after the first ``settled`` and
        of the new ones (``_with``).

        The settled rows are committed rows, a key each, which no new row shares a
        bucket with (messages are never committed rows): they stay as they are, and
        only the rows after them are folded. Each column is copied once."""
        tail = slice(settled, None)

        def after_tail(column: np.ndarray, more: np.ndarray) -> np.ndarray:
            return join_columns([column[tail], more])

        tail_keys, tail_buckets = np.concatenate([self.keys_at(tail), keys]), after_tail(self.buckets, buckets)
        tail_times = None if self.times is None else after_tail(self.times, times)
        tail_touched = None if self._touched is None else after_tail(self._touched, np.ones(len(keys), dtype=bool))
        first, folded, newest, marked = self._fold(codes, tail_buckets, after_tail(self.values, values),
                                                   tail_times, tail_touched)

        # Each key's first row is the first row of one of its pairs, and the first rows
        # keep their order: the codes stay numbered by first appearance.
        self._keys = self._keys.then(settled, tail_keys[:0], tail_keys[first])
        self._set_ids(self._then("_ids", settled, ids[first]), settled)
        self._codes = self._then("_codes", settled, codes[first])
        self._then_buckets(settled, tail_buckets[first])
        self.values = self._then("values", settled, folded)
        self.times, self._touched = self._then("times", settled, newest), self._then("_touched", settled, marked)

    def _then(self, name: str, n: int, more: np.ndarray | None, low: int | None = None) -> np.ndarray | None:
        """Column ``name``'s first ``n`` rows followed by ``more``, grown in place where no
        copy of the table holds its rows from ``low`` (default ``n``) on, which the caller
        may then write (``state.rooms``). None for a column the table does not keep."""
        column = getattr(self, name)
        return None if column is None else self._rooms.then(name, column, n, more, low)

    def _fold(self, codes: np.ndarray, buckets: np.ndarray, values: np.ndarray, times: np.ndarray | None,
              touched: np.ndarray | None) -> tuple:
        """Rows of equal (key code, bucket) folded into one, older rows first: the first
        row of each pair, numbered by first appearance, and each pair's value, newest
        time and whether a row of it was touched (None where the rows have no such
        column). ``first`` comes first; the others are aligned with it."""
        bucket_codes, unique_buckets = pd.factorize(buckets)
        pairs = pair_codes(codes, int(codes.max(initial=-1)) + 1, bucket_codes, len(unique_buckets))
        first = first_rows(pairs)
        newest = marked = None
        if times is not None:
            newest = np.full(len(first), np.iinfo(np.int64).min)
            np.maximum.at(newest, pairs, times)
        if touched is not None:
            marked = np.zeros(len(first), dtype=bool)
            marked[pairs[touched]] = True
        return first, self.monoid.reduce_by_key(pairs, len(first), values), newest, marked

    def _row_ids(self) -> np.ndarray:
        """The ids of the rows' keys, kept until the rows change."""
        if self._ids is None:
            self._ids = self._key_ids.of(self.keys, distinct=self._one_row_a_key())
        return self._ids

    def _key_codes(self) -> np.ndarray:
        """The rows' key codes (their ids numbered by first appearance), kept until the
        rows change."""
        if self._codes is None:
            if self._one_row_a_key():
                self._codes = np.arange(len(self))
            else:
                self._codes = first_appearance(self._row_ids(), len(self._key_ids))
        return self._codes

    def _codes_of(self, rows: np.ndarray | slice) -> np.ndarray:
        """The key codes of ``rows`` alone, numbered by their first appearance there."""
        return first_appearance(self._key_codes()[rows], len(self))

    def _with(self, keys: np.ndarray, start: int = 0,
              batch_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ids and key codes of the rows from ``start`` on (those before it are not
        copied), followed by those of ``keys``: hashes only ``keys``, and not even those
        where their ids are given (``batch_ids``).

        Ids are never taken back, so where the table dropped most keys it met (expired,
        or in windows that closed), it hashes the keys it holds into a fresh set of ids
        first: a stream of ever new keys keeps memory bounded. (Not where the batch's
        ids are given: they are of the set of ids it has.)"""
        if batch_ids is None and len(self._key_ids) > 2 * len(self) + 1024:
            self._key_ids, self._ids = KeyIds(), None
        ids, codes = self._row_ids(), self._key_codes()
        try:
            more = self._key_ids.of(keys, admit=self._admit) if batch_ids is None else batch_ids
        except TypeError as error:
            raise StateValueError(unhashable(keys, error)) from error
        settled = self._committed_rows()
        if settled:
            # A committed row's code is its row, found by its id; the other rows are few.
            more_codes = self._committed_row_of(settled)[more].astype(np.intp)
            rest = np.flatnonzero(more_codes < 0)
            if len(rest):
                more_codes[rest] = codes_on(codes[settled:], ids[settled:], more[rest], len(self._key_ids), settled)
        else:
            more_codes = codes_on(codes, ids, more, len(self._key_ids))
        return np.concatenate([ids[start:], more]), np.concatenate([codes[start:], more_codes])

    def _committed_row_of(self, settled: int) -> np.ndarray:
        """The row of each id among the ``settled`` committed rows, -1 for the other
        ids, by id. Kept between batches, which add committed rows only after those
        there are (``_set_ids``), and extended by those added: a batch finds its keys'
        rows without a pass over the table's. A copy, and the table a savepoint gives
        back, find their own (``copy``): their committed rows may hold other keys than
        this table's; one handed over shares it, as it takes the table's place."""
        row_of, covered = self._committed_ids
        if covered > settled:
            row_of, covered = _NO_COMMITTED_IDS
        if len(row_of) < len(self._key_ids):
            grown = np.full(max(len(self._key_ids), 2 * len(row_of)), -1, dtype=np.int32)
            grown[:len(row_of)] = row_of
            row_of = grown
        row_of[self._row_ids()[covered:settled]] = np.arange(covered, settled, dtype=np.int32)
        self._committed_ids = row_of, settled
        return row_of

    def _take_kinds(self, keys: np.ndarray) -> None:
        """Refuses the batch of ``keys`` (``StateValueError``) where they are of another
        kind than the table's keys or of two (``state.key_kinds``); else notes their kind.
        Keys held are looked at too: Python's equality makes keys of two kinds one key
        (``True`` and ``1``, ``Decimal(2)`` and ``2``), which the ids of a batch's keys
        would fold into the key held. A table whose ids are all of strings checks
        nothing (a string equals strings only), nor a batch of a numpy dtype of the
        table's kind."""
        if self._key_ids.strings_only:
            self._key_kinds = ("str",)
            return
        if self._key_kinds is not None and dtype_kinds(keys) == self._key_kinds:
            return
        self._key_kinds = self._admitted(kinds_of(keys), keys, "this update")

    def _admit(self, keys: np.ndarray) -> None:
        """Refuses ``keys`` (``StateValueError``), the first batch not all of strings a table
        whose ids are all of strings meets, where they are of two kinds, or of another
        than the table's: before they are hashed, so the ids stay those of strings, found
        by their strings' hashes. (Every key such a table holds is a string, so the
        batch's keys of other kinds are new, and its null keys and strings are welcome.)"""
        brought = kinds_of(keys)
        if brought != ("str",):
            self._admitted(brought, keys, "this update")

    def _admitted(self, brought: tuple[str, ...], keys: np.ndarray, what: str) -> tuple[str, ...]:
        """The kinds of the table's keys with ``keys``, new to it, of kinds ``brought``,
        which ``what`` brings; ``StateValueError`` if they are more than one. The kinds
        noted are looked up again (a pass over the keys) where they are not known or
        differ from ``brought``: keys of theirs may have gone. Null keys alone change nothing."""
        if not brought:
            return self._key_kinds
        held = self._key_kinds
        if held is None or not set(held) <= set(brought):
            held = self._key_kinds = kinds_of(self.keys)
        kinds = union(held, brought)
        if len(kinds) > 1:
            raise StateValueError(refusal(what, brought, held, keys))
        return kinds

    def _held_kinds(self) -> tuple[str, ...]:
        """The kinds of the table's keys: those noted, else looked up (a pass over the keys)
        and noted."""
        if self._key_kinds is None:
            self._key_kinds = kinds_of(self.keys)
        return self._key_kinds

    # -- reading -------------------------------------------------------------------

    def totals(self, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, values)``: each key's fold over all its rows (only ``keys``, if given),
        in the order the table first holds the keys."""
        if keys is None:
            return self._fold_per_key(slice(None), self._key_codes())
        return self._fold_per_key(self._rows_of(np.asarray(keys, dtype=object)))

    def _rows_of(self, keys: np.ndarray) -> np.ndarray:
        """Which rows hold one of ``keys``, a null key (None, NaN) being one key as in
        ``KeyIds``."""
        ids, wanted = self._row_ids(), self._ids_found(keys)
        picked = np.zeros(len(self._key_ids), dtype=bool)
        picked[wanted[wanted >= 0]] = True
        return picked[ids]

    def holds(self, keys: np.ndarray) -> np.ndarray:
        """Whether a row holds each of ``keys`` (an object array), as ``_rows_of`` finds them."""
        ids, wanted = self._row_ids(), self._ids_found(keys)
        present = np.zeros(len(self._key_ids), dtype=bool)
        present[ids] = True
        held = wanted >= 0
        held[held] = present[wanted[held]]
        return held

    def _ids_found(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys``, -1 for keys never met; the keys not held get no ids. A key
        of another kind than the table's is not held, even where Python's equality makes
        it one held (``True`` and ``1``: ``_take_kinds``)."""
        self._row_ids()  # the ids of the keys held, before any lookup
        try:
            wanted = self._key_ids.find(keys)
        except TypeError as error:
            raise StateValueError(unhashable(keys, error, "this lookup")) from error
        if not self._key_ids.strings_only:  # else only strings are found, which equal strings only
            held = self._held_kinds()
            if not set(kinds_of(keys)) <= set(held):
                wanted[other_kinds(keys, held)] = -1
        return wanted

    def take_touched_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """``totals`` of the keys that updates applied messages to since the last call (or
        since the table was made or decoded); the next call starts from none. Only for a
        table without a window."""
        if self._touched is None:
            raise StateValueError("a table with a window keeps no touched keys: its results are its windows")
        codes, settled = self._key_codes(), self._committed_rows()
        wanted = np.zeros(len(codes), dtype=bool)  # by code: codes are below the number of rows
        wanted[codes[self._touched]] = True
        wanted_codes = np.flatnonzero(wanted)
        # Every row of a wanted key: its committed row (whose code is its row), then its
        # rows after the committed ones, in the table's order; so a key's rank among the
        # wanted codes numbers the picked rows by first appearance.
        held = wanted_codes[wanted_codes < settled]
        after = settled + np.flatnonzero(wanted[codes[settled:]])
        self._touched = np.zeros(len(self), dtype=bool)
        ranks = np.concatenate([np.arange(len(held)), np.searchsorted(wanted_codes, codes[after])])
        return self._fold_per_key(np.concatenate([held, after]), ranks)

    def _fold_per_key(
        self, rows: np.ndarray | slice, codes: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, values)``: each key's fold over ``rows``, in the order the rows hold the
        keys; ``codes`` are the rows' key codes numbered by first appearance, if known."""
        if not isinstance(rows, slice) and rows.dtype == bool:
            rows = np.flatnonzero(rows)  # a few rows of many: each column read at those only
        codes = self._codes_of(rows) if codes is None else codes
        first = first_rows(codes)  # the keys as the table holds them (pandas makes None NaN)
        keys = self.keys_at(rows)[first] if isinstance(rows, slice) else self.keys_at(rows[first])
        keys = keys.astype(object, copy=False)
        return keys, self.monoid.reduce_by_key(codes, len(first), self.values[rows])

    def get(self, key) -> object:
        """The fold of one key's rows (``zero()`` for an unknown key)."""
        one = np.empty(1, dtype=object)
        one[0] = key
        keys, values = self._fold_per_key(self._rows_of(one))
        return self.monoid.values(values)[0] if len(keys) else self.monoid.zero()

    # -- windows -------------------------------------------------------------------

    def close_windows(self, watermark_ms: int) -> WindowResults:
        """Values of the windows that the watermark closes since the last call."""
        watermark_ms = check_time_ms(watermark_ms, "watermark_ms")
        window = self._require_window()
        if watermark_ms <= self.emitted_ms:
            return self._window_values(range(0))
        closing = window.starts_closing(self.emitted_ms, watermark_ms)
        self.emitted_ms = watermark_ms
        return self._window_values(closing)

    def open_windows(self) -> WindowResults:
        """Values so far of the windows not yet closed that hold data."""
        window = self._require_window()
        if not len(self.buckets):
            return self._window_values(range(0))
        first = max(window.oldest_open_start(self.emitted_ms), window.starts_containing(int(self.buckets.min()))[0])
        return self._window_values(range(first, int(self.buckets.max()) + 1, window.step_ms))

    def _window_values(self, starts: range) -> WindowResults:
        size = self.window.size_ms if self.window else 0
        parts = []
        for start in self._holding_rows(starts):
            keys, values = self._fold_per_key((self.buckets >= start) & (self.buckets < start + size))
            parts.append((keys, np.full(len(keys), start, dtype=np.int64), values))
        if not parts:
            return WindowResults(np.empty(0, object), np.empty(0, np.int64), np.empty(0, np.int64), self.monoid.zeros(0))
        starts_ms = np.concatenate([p[1] for p in parts])
        return WindowResults(
            keys=np.concatenate([p[0] for p in parts]),
            starts_ms=starts_ms,
            ends_ms=starts_ms + size,
            values=join_columns([p[2] for p in parts]),
        )

    def _holding_rows(self, starts: range) -> list[int]:
        """The window starts of ``starts`` whose windows hold a row, oldest first: found
        from the panes there are, since ``starts`` may span every window since 0 (a
        table that emitted nothing yet, and event times of today)."""
        if not len(starts):
            return []
        return sorted({start for pane in np.unique(self.buckets).tolist()
                       for start in self.window.starts_containing(pane) if start in starts})

    def _require_window(self) -> Window:
        if self.window is None:
            raise StateValueError("this table has no window: there are no windows to close")
        return self.window

    # -- checkpoints ---------------------------------------------------------------

    def due_checkpoint(self, watermark_ms: int) -> int | None:
        """The checkpoint to take at ``watermark_ms``: the newest boundary at or before
        it, if newer than the last checkpoint (also for a table without any message,
        so an idle task never holds the clock back)."""
        boundary = boundary_at_or_before(check_time_ms(watermark_ms, "watermark_ms"), self.interval_ms)
        return boundary if boundary > self.checkpoint_ms else None

    def checkpoint(self, timestamp_ms: int) -> bytes:
        """Encodes the state at ``timestamp_ms`` (rows before it) and seals it."""
        self.seal(timestamp_ms)
        self.whole_ms, self.chain_rows = timestamp_ms, 0
        return encode_rows(self, self.buckets < timestamp_ms, timestamp_ms, min(timestamp_ms, self.emitted_ms))

    @property
    def keeps_changes(self) -> bool:
        """Whether a checkpoint can be the changes to the last one (``checkpoint_changes``):
        without a window and without ``ttl_ms``, where a checkpoint holds one committed row
        per key and no key ever goes. A windowed table's checkpoint holds the panes of its
        open windows only, and expiry drops keys, which changed rows cannot say."""
        return self.window is None and self.ttl_ms is None

    def checkpoint_changes(self, timestamp_ms: int) -> bytes:
        """``checkpoint``, holding only the keys it changes: those with rows from the last
        checkpoint up to ``timestamp_ms``, with their new committed rows, in ``encode``'s
        format. Decoded, they make the last checkpoint this one (``roll_forward``), and
        their rows count in ``chain_rows``."""
        if not self.keeps_changes:
            raise StateValueError("a table with a window or a ttl_ms checkpoints whole")
        # The keys changed: those of the rows after the committed ones that the seal
        # commits. A key of a committed row keeps that row (its code), the others are
        # found by their ids among the committed rows that follow: no key of a table of
        # millions is hashed again, and only the rows after the committed ones are read.
        settled, codes, ids = self._committed_rows(), self._key_codes(), self._row_ids()
        buckets = self.buckets[settled:]
        sealed = np.flatnonzero((buckets != COMMITTED) & (buckets < timestamp_ms))
        changed = np.zeros(len(self._key_ids), dtype=bool)
        changed[ids[settled:][sealed]] = True
        kept = codes[settled:][sealed]
        kept = distinct_below(kept[kept < settled], settled)
        self.seal(timestamp_ms)
        after = self._row_ids()[settled:self._committed_rows()]
        rows = np.concatenate([kept, settled + np.flatnonzero(changed[after])])
        self.chain_rows += len(rows)
        return encode_rows(self, rows, timestamp_ms, min(timestamp_ms, self.emitted_ms), held_rows=kept)

    def roll_forward(self, *changes: KeyedTable) -> None:
        """Makes this table, a checkpoint, the one ``changes`` lead to: each is the
        decoded ``checkpoint_changes`` taken on the one before it, the first on this one.
        The rows of the keys they change take their last values, in their places; new
        keys follow, in the order they first appear. One pass however many there are: a
        restore reads a chain of changes in the time of its rows, not of its links times
        the table."""
        since_ms = self.checkpoint_ms
        live = not self.keeps_changes or bool((self.buckets != COMMITTED).any())  # no checkpoint
        for one in changes:
            if live or one.checkpoint_ms <= since_ms or bool((one.buckets != COMMITTED).any()):
                raise CorruptCheckpointError(
                    f"the changes of the checkpoint at {one.checkpoint_ms} ms do not follow the checkpoint at "
                    f"{since_ms} ms"
                )
            since_ms = one.checkpoint_ms
        for one in changes:
            self._take_kinds_of(one, f"the changes of the checkpoint at {one.checkpoint_ms} ms", "change")
        held = len(self)
        keys = np.concatenate([one.keys for one in changes])
        places, new_ids = self._places(changes, keys)
        # The last row of each place, the places in order: the held ones, then the new.
        reversed_places, backwards = np.unique(places[::-1], return_index=True)
        last = len(places) - 1 - backwards
        old = int(np.searchsorted(reversed_places, held))
        changed, changed_values = reversed_places[:old], join_columns([one.values for one in changes])
        # The held rows are committed rows, of codes 0 to held - 1, none touched.
        values = self._then("values", held, changed_values[last[old:]], int(changed.min(initial=held)))
        values[changed] = changed_values[last[:old]]
        n = held + len(last) - old
        self._keys = self._keys.then(held, keys[last[old:]], keys[:0])
        self._set_ids(self._then("_ids", held, new_ids), held)
        self.values = values
        self._codes = self._then("_codes", held, np.arange(held, n, dtype=np.intp))
        self._then_buckets(held, np.full(n - held, COMMITTED, dtype=np.int64))
        if self._touched is not None:
            self._touched = np.zeros(len(self), dtype=bool)
        newest = changes[-1]
        self.checkpoint_ms, self.emitted_ms = newest.checkpoint_ms, newest.emitted_ms
        self.late_count = newest.late_count
        self.chain_rows += sum(len(one) for one in changes)

    def _places(self, changes: tuple[KeyedTable, ...], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The row each of ``keys``, the rows of ``changes`` in order, takes in this
        checkpoint rolled forward by them (a held key's row; new keys the rows after, by
        first appearance), and the ids of the new keys (None while the table has no ids).

        Changes name the rows of the keys the checkpoint they change held
        (``held_rows``): only those keys are read there, to check them, and only new
        keys are hashed, where the table has ids. Changes of format 3 and before do not,
        and all their keys are found by their ids (``_with``)."""
        held = len(self)
        if any(one.held_rows is None for one in changes):
            ids, codes = self._with(keys, held)
            new = np.flatnonzero(codes >= held)
            return codes, ids[new[first_rows(codes[new] - held)]]
        places, named, n = [], [], held
        for one in changes:
            rows = one.held_rows
            if len(rows) and (rows.min() < 0 or rows.max() >= n):
                raise CorruptCheckpointError(
                    f"the changes of the checkpoint at {one.checkpoint_ms} ms name rows that the checkpoint "
                    "they change does not have")
            places += [rows, np.arange(n, n + len(one) - len(rows))]
            named.append(np.arange(len(one)) < len(rows))
            n += len(one) - len(rows)
        places, named = np.concatenate(places), np.concatenate(named)
        new_keys = keys[~named]
        held_before, new_before = named & (places < held), named & (places >= held)  # new in an earlier link
        if (_differ(self.keys_at(places[held_before]), keys[held_before])
                or _differ(new_keys[places[new_before] - held], keys[new_before])):
            raise CorruptCheckpointError(
                f"the changes of the checkpoint at {changes[-1].checkpoint_ms} ms name rows of other keys")
        return places, None if self._ids is None else self._key_ids.of(new_keys)

    def expire(self, watermark_ms: int) -> int:
        """Drops the keys whose newest message is more than ``ttl_ms`` behind
        ``watermark_ms``, all their rows; returns how many keys went. Nothing without a
        ``ttl_ms``."""
        watermark_ms = check_time_ms(watermark_ms, "watermark_ms")
        if self.ttl_ms is None:
            return 0
        stale = self.times < watermark_ms - self.ttl_ms
        if not stale.any():
            return 0
        # A key expires when all its rows are stale.
        codes = self._key_codes()
        n_keys = int(codes.max()) + 1
        fresh = np.zeros(n_keys, dtype=bool)
        fresh[codes[~stale]] = True
        self._keep(fresh[codes])
        return int(n_keys - fresh.sum())

    def seal(self, timestamp_ms: int) -> None:
        """What ``checkpoint`` does to the table, without encoding it: folds the rows
        before ``timestamp_ms`` (or prunes panes no open window needs) and makes
        messages before it late."""
        timestamp_ms = check_time_ms(timestamp_ms)
        if timestamp_ms % self.interval_ms or timestamp_ms <= self.checkpoint_ms:
            raise StateValueError(
                f"checkpoint time {timestamp_ms} must be a multiple of {self.interval_ms} ms "
                f"after the last checkpoint {self.checkpoint_ms}"
            )
        self._seal(timestamp_ms)
        self.checkpoint_ms = timestamp_ms

    def _seal(self, timestamp_ms: int) -> None:
        """Folds or prunes the rows a checkpoint at ``timestamp_ms`` lets go."""
        if self.window is None:
            self._commit(timestamp_ms)
        else:
            # Windows not emitted yet keep their panes, also in the checkpoint.
            self._keep(self.buckets >= self.window.oldest_open_start(min(timestamp_ms, self.emitted_ms)))

    def _commit(self, timestamp_ms: int) -> None:
        """Folds the rows before ``timestamp_ms`` into one committed row per key (no
        window). The committed rows the table starts with stay in place, those of new
        keys follow them, then the rows since ``timestamp_ms``, each in their order: the
        order in which the checkpoint and the rows since it are encoded and decoded.
        Only the rows after the first committed ones are folded, with the committed
        rows of their keys."""
        settled, codes, ids = self._committed_rows(), self._key_codes(), self._row_ids()
        tail = codes[settled:]
        buckets = np.where(self.buckets[settled:] < timestamp_ms, COMMITTED, self.buckets[settled:])
        # The committed rows that rows of the tail fold into: a settled key's code is its row.
        joined = distinct_below(tail[(buckets == COMMITTED) & (tail < settled)], settled)
        rows = np.concatenate([joined, np.arange(settled, len(codes))])
        row_buckets = np.concatenate([np.full(len(joined), COMMITTED, dtype=np.int64), buckets])
        first, folded, newest, marked = self._fold(
            codes[rows], row_buckets, self.values[rows],
            None if self.times is None else self.times[rows], None if self._touched is None else self._touched[rows])
        # The joined rows are the first of their pairs, and come first; the rows of the
        # tail follow, the committed ones first.
        n = len(joined)
        committed = row_buckets[first[n:]] == COMMITTED
        order = n + np.concatenate([np.flatnonzero(committed), np.flatnonzero(~committed)])

        low = int(joined.min()) if n else settled

        def joined_into(name: str, column_folded: np.ndarray | None) -> np.ndarray | None:
            if column_folded is None:
                return None
            joined_column = self._then(name, settled, column_folded[order], low)
            joined_column[joined] = column_folded[:n]
            return joined_column

        self.values, self.times, self._touched = (joined_into(name, column) for name, column in
                                                  (("values", folded), ("times", newest), ("_touched", marked)))
        moved = rows[first[order]]
        # The committed rows of new keys grow the column's head (``state.key_column``).
        moved_keys, new_committed = self.keys_at(moved), int(committed.sum())
        self._keys = self._keys.then(settled, moved_keys[:new_committed], moved_keys[new_committed:])
        self._set_ids(self._then("_ids", settled, ids[moved]), settled)
        self._then_buckets(settled, row_buckets[first[order]])
        # Keys of the tail that no settled row holds are numbered again, by their first
        # appearance in the new order.
        moved_codes = codes[moved]
        new = moved_codes >= settled
        moved_codes[new] = settled + first_appearance(moved_codes[new] - settled,
                                                      int(moved_codes.max(initial=settled)) + 1 - settled)
        self._codes = self._then("_codes", settled, moved_codes)

    def _keep(self, rows: np.ndarray | slice) -> None:
        """Keeps ``rows`` (a mask, indices, or the first rows: a slice from 0), in their
        order. The first rows keep their codes (numbered by first appearance, as all
        rows are) and share the columns, keys included (``KeyColumn.first``)."""
        first = isinstance(rows, slice)
        if self._codes is not None:
            self._codes = self._codes[rows] if first else self._codes_of(rows)
        if self._ids is not None:
            self._set_ids(self._ids[rows], rows.stop if first else 0)
        self._keys = self._keys.first(rows.stop) if first else KeyColumn(self.keys_at(rows))
        self.buckets, self.values = self.buckets[rows], self.values[rows]
        if self.times is not None:
            self.times = self.times[rows]
        if self._touched is not None:
            self._touched = self._touched[rows]

    def only(self, keys: np.ndarray) -> KeyedTable:
        """A copy holding only the rows of ``keys`` (for moving keys to other tables); its
        late count starts at 0, since the messages refused were this table's."""
        table = self.copy()
        table._keep(self._rows_of(np.asarray(keys, dtype=object)))
        # Ids of its own, not those of every key of this table (its codes stay).
        table._key_ids, table._ids = KeyIds(), None
        table.late_count = 0
        return table

    def absorb(self, other: KeyedTable) -> None:
        """Adds ``other``'s rows, whose keys this table does not hold, checkpointed at the
        same time (for moving keys from other tables); keys of another kind than this
        table's are refused (``state.key_kinds``) before anything is added."""
        if (other.checkpoint_ms, other.emitted_ms) != (self.checkpoint_ms, self.emitted_ms):
            raise StateValueError(
                f"cannot absorb a table checkpointed at {other.checkpoint_ms} ms (windows emitted to "
                f"{other.emitted_ms} ms) into one at {self.checkpoint_ms} ms ({self.emitted_ms} ms)"
            )
        kinds = self._admitted(kinds_of(other.keys), other.keys, "the table absorbed")
        self._append(other)
        self._key_kinds = kinds
        self.late_count += other.late_count

    def holding(self, keys: np.ndarray, values: np.ndarray) -> KeyedTable:
        """A table of this one's settings and counters, its late count 0, whose rows are
        committed rows of ``keys`` (distinct, an object array) with ``values`` (a column)."""
        table = type(self)(self.monoid, self.interval_ms, self.window, self.ttl_ms)
        table.keys, table.buckets, table.values = keys, np.full(len(keys), COMMITTED, dtype=np.int64), values
        table._ids, table._codes = None, None  # found when needed
        if table._touched is not None:
            table._touched = np.zeros(len(keys), dtype=bool)
        table.checkpoint_ms, table.emitted_ms = self.checkpoint_ms, self.emitted_ms
        return table

    def take_committed(self, keys: np.ndarray, values: np.ndarray, order: np.ndarray) -> None:
        """Adds committed rows of ``keys``, which the table does not hold (distinct), with
        ``values``, and orders the committed rows by ``order`` (indices of them, the new
        ones numbered after the others), before the rows since: the committed rows of keys
        that a checkpoint holds beside the table (``state.stored_table``). The rows since
        keep their marks of touched."""
        settled, n = self._committed_rows(), len(self)
        self.absorb(self.holding(keys, values))
        order = np.where(order < settled, order, order - settled + n)
        self._keep(np.concatenate([order, np.arange(settled, n)]))

    def shed_committed(self, kept: np.ndarray) -> np.ndarray:
        """Drops the committed rows of the keys without rows since them that no update
        touched since ``take_touched_totals``, but the committed rows ``kept``, and returns
        the committed rows that stay (in order, each as it was numbered)."""
        settled, codes = self._committed_rows(), self._key_codes()
        tail = codes[settled:]
        touched = np.flatnonzero(self._touched[:settled])
        staying = distinct_below(np.concatenate([tail[tail < settled], kept, touched]), settled)
        self._keep(np.concatenate([staying, np.arange(settled, len(self))]))
        return staying

    def _append(self, other: KeyedTable) -> None:
        """Adds ``other``'s rows after this table's, none of them touched."""
        n = len(self)
        ids, codes = self._with(other.keys, n)
        self._set_ids(self._then("_ids", n, ids), n)
        self._codes = self._then("_codes", n, codes)
        self._keys = self._keys.then(n, other.keys[:0], other.keys)
        self._key_kinds = union(self._key_kinds, other._key_kinds)
        self.buckets, self.values = self._then("buckets", n, other.buckets), self._then("values", n, other.values)
        self.times = self._then("times", n, other.times)
        if self._touched is not None:
            self._touched = self._then("_touched", n, np.zeros(len(other.keys), dtype=bool))

    # -- following a checkpoint ----------------------------------------------------

    @property
    def follows_checkpoints(self) -> bool:
        """Whether the rows before the last checkpoint are the ones it holds, so that the
        checkpoint and ``encode_since_checkpoint`` make the table again (``follow``).

        Updates never reach those rows (messages before the checkpoint are late), nor do
        closing windows; a checkpoint prunes them only as it is taken. Expiry
        (``ttl_ms``) drops keys of every time, those rows included: such a table is
        encoded whole."""
        return self.ttl_ms is None

    def encode_since_checkpoint(self) -> bytes:
        """The rows the last checkpoint does not hold (buckets from ``checkpoint_ms`` on)
        and the table's counters, in ``encode``'s format: with that checkpoint's bytes,
        ``follow`` makes this table again (``follows_checkpoints`` says when)."""
        settled = self._committed_rows()  # rows before any checkpoint
        since = settled + np.flatnonzero(self.buckets[settled:] >= self.checkpoint_ms)
        return encode_rows(self, since, self.checkpoint_ms, self.emitted_ms)

    def _checkpoint_rows(self) -> np.ndarray | slice:
        """The rows before the last checkpoint, those it holds: the first rows (a slice)
        where they come first, else a mask. The committed rows are among them, and only
        the rows after those are read."""
        settled = self._committed_rows()
        before = self.buckets[settled:] < self.checkpoint_ms
        held = int(before.sum())
        if before[:held].all():
            return slice(0, settled + held)
        return np.concatenate([np.ones(settled, dtype=bool), before])

    def decodes_as_held(self, following: bool) -> bool:
        """Whether decoding this table's ``encode`` bytes (``following``: its last
        checkpoint's, then its ``encode_since_checkpoint`` bytes, ``follow``) gives the
        table as it is: its rows in the order it holds them, none touched. Rows are
        decoded in the order they were encoded, those since the checkpoint after the
        checkpoint's, whose keys are in the order the table holds them (``_commit``,
        ``roll_forward``); so it holds where the rows before the checkpoint come first."""
        if self._touched is not None and self._touched.any():
            return False
        return not following or isinstance(self._checkpoint_rows(), slice)

    def checkpointed_rows(self, in_place: bool = False) -> KeyedTable:
        """A copy holding only the rows before the last checkpoint: the checkpoint, as
        decoding it gives it where ``decodes_as_held(following=True)``, but with this
        table's late count and the time to which it emitted windows. ``in_place``: a
        copy that takes this table's place (``handover``), for a caller done with it."""
        table = self.handover() if in_place else self.copy()
        # Where they come first (``decodes_as_held``), the copy's columns are theirs.
        table._keep(self._checkpoint_rows())
        return table

    def follow(self, since: KeyedTable) -> None:
        """Adds the rows of ``since`` (the decoded ``encode_since_checkpoint`` of a table
        whose checkpoint this table is) and takes its counters: this table becomes the
        one that encoded them, its rows after the checkpoint's."""
        if since.checkpoint_ms != self.checkpoint_ms or bool((since.buckets < self.checkpoint_ms).any()):
            raise CorruptCheckpointError(
                f"the rows since the checkpoint at {since.checkpoint_ms} ms do not follow the checkpoint at "
                f"{self.checkpoint_ms} ms"
            )
        self._take_kinds_of(since, f"the rows since the checkpoint at {since.checkpoint_ms} ms", "follow")
        self._append(since)
        self.emitted_ms, self.late_count = since.emitted_ms, since.late_count

    def _take_kinds_of(self, rows: KeyedTable, what: str, verb: str) -> None:
        """Notes the kinds of the keys of ``rows``, decoded, which this table, a checkpoint,
        takes (``what`` they are, and ``verb`` what they do to it); ``CorruptCheckpointError``
        where they are of another kind than its keys (bytes of another table: Python's
        equality may make keys of two kinds one, ``True`` and ``1``), or of two."""
        held = self._held_kinds()
        brought = kinds_of(rows.keys)
        kinds = union(held, brought)
        if len(kinds) > 1:
            raise CorruptCheckpointError(
                f"{what} hold {not_held(brought, held, rows.keys)}, the checkpoint they {verb} "
                f"{' and '.join(held) or 'no'} keys")
        self._key_kinds = kinds

    def recover(self, timestamp_ms: int, data: bytes) -> None:
        """Replaces the state with the checkpoint ``data`` taken at ``timestamp_ms``."""
        timestamp_ms = check_time_ms(timestamp_ms)
        # Filled into a copy, so that bad bytes leave this table as it was.
        restored = TableBytes.of(data, f"checkpoint at {timestamp_ms}").fill(self.copy())
        if restored.checkpoint_ms != timestamp_ms:
            raise CorruptCheckpointError(
                f"checkpoint at {timestamp_ms} holds the state at {restored.checkpoint_ms}"
            )
        self._keys, self.buckets, self.values = restored._keys, restored.buckets, restored.values
        self._key_kinds = restored._key_kinds
        self.times, self._touched = restored.times, restored._touched
        self._ids, self._codes = restored._ids, restored._codes
        self.checkpoint_ms, self.emitted_ms = timestamp_ms, restored.emitted_ms
        self.whole_ms, self.chain_rows = timestamp_ms, 0

    # -- encoding ------------------------------------------------------------------

    def encode(self) -> bytes:
        """The whole table, including rows after the last checkpoint and the counters."""
        return encode_rows(self, np.ones(len(self), dtype=bool), self.checkpoint_ms, self.emitted_ms)


def _leading_committed(buckets: np.ndarray) -> int:
    """How many of ``buckets`` are ``COMMITTED`` before the first that is not."""
    pending = buckets != COMMITTED
    return int(pending.argmax()) if pending.any() else len(pending)


def _differ(keys: np.ndarray, others: np.ndarray) -> bool:
    """Whether a key of ``keys`` is not the one of ``others`` in its place, a null key
    (None, NaN) being one key as in ``KeyIds``."""
    differ = keys != others
    if differ.any():
        differ[differ] = ~(pd.isna(keys[differ]) & pd.isna(others[differ]))
    return bool(differ.any())
