"""``SessionTable``: session windows of many keys, in the columns of a ``KeyedTable``.

A key's messages belong to one session while each follows the one before by less
than the gap (``SessionWindow.gap_ms``); the session is ``[first, last + gap)``. The
table keeps *segments*: each row folds the messages of one key that belong to one
session **and** one checkpoint interval, with

- ``buckets``: the time of the segment's first message,
- ``times``: the time of its last message,
- ``values``: the fold of its messages: in time order within a micro-batch; a
  message that arrives later between two messages of the segment is folded after
  them (as in a pane of a fixed window), which only a non-commutative monoid sees.

A session is a chain of segments, each starting less than the gap after the newest
message before it; a message that falls within the gap of two sessions chains them
into one, and the monoid's ``plus`` makes the merged value exact. Because a segment
never crosses a checkpoint boundary, a checkpoint at ``T`` holds exactly the
messages before ``T``: the segments that start before it. A session that spans
``T`` is split there and chained again after a restore.

A session closes when the watermark reaches its end: no message on time can join it
then (one would have to be less than the gap after its last message, so before the
watermark). ``close_windows`` emits each closed session once, and each checkpoint
prunes the segments of sessions emitted before it, so memory holds the open sessions
and those closed since the last checkpoint.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from monoids.base import Monoid
from monoids.columns import join_columns
from state.boundaries import check_time_ms
from state.table import KeyedTable, WindowResults
from state.window import SessionWindow

__all__ = ["SessionTable"]


class SessionTable(KeyedTable):
    """Session windows of many keys; see the module docstring."""

    keeps_sessions = True

    def __init__(self, monoid: Monoid, interval_ms: int, window: SessionWindow, ttl_ms: int | None = None):
        super().__init__(monoid, interval_ms, window, ttl_ms)
        self.gap_ms = window.gap_ms
        self.times = np.empty(0, dtype=np.int64)

    def _add(self, keys: np.ndarray, timestamps_ms: np.ndarray, column: np.ndarray, touched: bool,
             batch_ids: np.ndarray | None = None) -> np.ndarray | None:
        """Adds each message as a segment of its own, then joins the segments of one key
        and one checkpoint interval that chain. Returns the keys touched, if ``touched``."""
        table_rows = len(self.keys)
        keys = np.concatenate([self.keys, keys.astype(object, copy=False)])
        starts = np.concatenate([self.buckets, timestamps_ms])
        ids, key_codes = self._with(keys[table_rows:], batch_ids=batch_ids)
        self._take_kinds(keys[table_rows:])
        order, _, first, self.values, self.times = self._fold_chains(
            (key_codes, starts // self.interval_ms), starts, np.concatenate([self.times, timestamps_ms]),
            join_columns([self.values, column]),
        )
        kinds = self._key_kinds  # of the keys held and the new ones (``_take_kinds``)
        self.keys, self.buckets = keys[order][first], starts[order][first]
        self._key_kinds = kinds
        # The segments are sorted by key code first, so their codes, rising, are numbered
        # by first appearance.
        self._ids, self._codes = ids[order][first], key_codes[order][first]
        return self._distinct_keys(keys, key_codes, table_rows) if touched else None

    def sessions(self) -> tuple[WindowResults, np.ndarray]:
        """Every session of the table, by key and start, and the index of each row's session."""
        key_codes = self._key_codes()
        order, session, first, values, lasts = self._fold_chains((key_codes,), self.buckets, self.times, self.values)
        of_row = np.empty(len(order), dtype=np.int64)
        of_row[order] = session
        keys, starts = self.keys[order][first], self.buckets[order][first]
        return WindowResults(keys, starts, lasts + self.gap_ms, values), of_row

    def _fold_chains(self, groups: tuple[np.ndarray, ...], starts: np.ndarray, lasts: np.ndarray, values: np.ndarray):
        """Sorts rows by ``groups``, then start, and folds each chain of them (``_chains``):
        returns the order, each sorted row's chain, the first row of each chain, and the
        chains' values and last message times."""
        order = np.lexsort((starts, *groups[::-1]))
        chain, first = _chains(_group_starts(*(g[order] for g in groups)), starts[order], lasts[order], self.gap_ms)
        newest = np.maximum.reduceat(lasts[order], first) if len(first) else np.empty(0, np.int64)
        return order, chain, first, self.monoid.reduce_by_key(chain, len(first), values[order]), newest

    # -- windows -------------------------------------------------------------------

    def close_windows(self, watermark_ms: int) -> WindowResults:
        """The sessions that the watermark closes since the last call."""
        watermark_ms = check_time_ms(watermark_ms, "watermark_ms")
        sessions, _ = self.sessions()
        closing = (sessions.ends_ms > self.emitted_ms) & (sessions.ends_ms <= watermark_ms)
        self.emitted_ms = max(self.emitted_ms, watermark_ms)
        return _rows(sessions, closing)

    def open_windows(self) -> WindowResults:
        """The sessions not yet closed, with their values so far."""
        sessions, _ = self.sessions()
        return _rows(sessions, sessions.ends_ms > self.emitted_ms)

    def _seal(self, timestamp_ms: int) -> None:
        """Prunes the segments of sessions closed by ``timestamp_ms`` (or by the last
        close, if earlier): emitted sessions, which no later message can join."""
        sessions, of_row = self.sessions()
        self._keep(sessions.ends_ms[of_row] > min(timestamp_ms, self.emitted_ms))


def _group_starts(*codes: np.ndarray) -> np.ndarray:
    """Which rows, sorted by ``codes``, start a group of equal codes."""
    starts = np.zeros(len(codes[0]), dtype=bool)
    starts[:1] = True
    for column in codes:
        starts[1:] |= column[1:] != column[:-1]
    return starts


def _rows(results: WindowResults, which: np.ndarray) -> WindowResults:
    return WindowResults(results.keys[which], results.starts_ms[which], results.ends_ms[which], results.values[which])


def _chains(group_starts: np.ndarray, starts: np.ndarray, lasts: np.ndarray, gap_ms: int):
    """Numbers the chains of rows sorted by start within groups (``group_starts`` marks
    each group's first row): a row starts a new chain when it starts a group or starts
    ``gap_ms`` or more after the newest message of the rows before it in its group.
    Returns each row's chain and the first row of each chain."""
    if not len(starts):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    newest = pd.Series(lasts).groupby(np.cumsum(group_starts)).cummax().to_numpy()
    new = group_starts.copy()
    new[1:] |= starts[1:] >= newest[:-1] + gap_ms
    return np.cumsum(new) - 1, np.flatnonzero(new)
