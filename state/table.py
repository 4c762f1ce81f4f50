"""``KeyedTable``: the states of many keys of one task, held in columns.

A task (on Spark, a key group) owns thousands of keys. Keeping one Python object
per key would make every micro-batch pay per-key interpreter cost; the table keeps
three aligned columns instead, one row per (key, bucket):

- ``keys``: the message keys (strings or integers);
- ``buckets``: event-time buckets, ``ts // bucket_ms * bucket_ms``;
- ``values``: a monoid column (see ``monoids.base``), the fold of the bucket's messages.

A batch of messages is applied with one factorize and one ``reduce_by_key``.

Buckets never straddle a checkpoint boundary (``bucket_ms`` divides the checkpoint
interval), so the table can checkpoint at *any* boundary ``T``: the checkpoint is
the fold of the rows with ``bucket < T``. All tasks of a job therefore checkpoint
at the same boundary, the newest one the watermark has passed, which is what lets
the global minimum checkpoint clock advance in step.

Without a window, rows before the last checkpoint are merged into one *committed*
row per key (bucket ``COMMITTED``). With a window, buckets are the window's panes;
closed windows are emitted by ``close_windows`` and panes no window can need again
are pruned at each checkpoint, so memory stays bounded.

Messages with a timestamp before ``sealed_ms`` (the last checkpoint, or the last
watermark that closed windows) are *late*: they are counted, never applied, because
the results they would change are already published.

The encoding (format 2) also names the monoid (``Monoid.identity()``), the window
and the checkpoint interval, so ``KeyedTable.read`` decodes a checkpoint without the
task that wrote it. ``decode`` still reads format 1, which named none of them.

Every operation replaces the columns with new arrays and never writes into them, so
``copy`` is a snapshot in constant time: a batch can be applied and undone.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from monoids.base import Monoid, MonoidError, from_identity
from state import codec
from state.checkpoint_manager import boundary_at_or_before, check_interval_ms
from state.checkpoint_store import check_time_ms
from state.errors import CorruptCheckpointError, StateValueError
from state.window import Window

__all__ = ["KeyedTable", "COMMITTED", "WindowResults", "describe"]

#: Bucket of the rows that fold everything before the last checkpoint (no window).
COMMITTED = -1

_MAGIC = b"PKTB"
_VERSION = 2
#: Sections per readable format version: meta, keys, buckets, values (and, from 2, the description).
_SECTIONS = {1: 4, 2: 5}


@dataclass(frozen=True)
class WindowResults:
    """Values of closed windows: aligned arrays, one row per (key, window)."""

    keys: np.ndarray
    starts_ms: np.ndarray
    ends_ms: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """Index of the first row of each code, for codes numbered by first appearance."""
    _, first = np.unique(codes, return_index=True)
    return first


def describe(monoid: Monoid, interval_ms: int, window: Window | None) -> dict:
    """What a table's bytes mean, as JSON data: the monoid (``Monoid.identity``), the
    window and the checkpoint interval. Tables encode it (format 2), and a job directory
    records it, so a job with other settings does not read its state."""
    window_ = window and {"size_ms": window.size_ms, "step_ms": window.step_ms}
    return {"monoid": monoid.identity(), "window": window_, "interval_ms": interval_ms}


class KeyedTable:
    """Columnar monoid states of many keys; see the module docstring."""

    def __init__(self, monoid: Monoid, interval_ms: int, window: Window | None = None):
        self.monoid = monoid
        self.interval_ms = check_interval_ms(interval_ms)
        self.window = window
        self.bucket_ms = window.pane_ms(interval_ms) if window else interval_ms
        self.keys = np.empty(0, dtype=object)
        self.buckets = np.empty(0, dtype=np.int64)
        self.values = monoid.zeros(0)
        #: Time of the last checkpoint taken or recovered (0: none yet).
        self.checkpoint_ms = 0
        #: Watermark up to which closed windows have been emitted.
        self.emitted_ms = 0
        #: Messages refused as late since the table was created.
        self.late_count = 0

    def __len__(self) -> int:
        return len(self.keys)

    def copy(self) -> KeyedTable:
        """A snapshot: shares the columns, which no operation writes into."""
        return copy.copy(self)

    @property
    def sealed_ms(self) -> int:
        """Messages before this time are late."""
        return max(self.checkpoint_ms, self.emitted_ms)

    # -- updates -------------------------------------------------------------------

    def update_frame(self, frame: pd.DataFrame) -> np.ndarray:
        """``update`` from a DataFrame with columns ``key``, ``timestamp`` (ms) and ``value``."""
        return self.update(frame["key"].to_numpy(), frame["timestamp"].to_numpy(), frame["value"].to_numpy())

    def update(self, keys: np.ndarray, timestamps_ms: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Applies messages given as aligned arrays; returns the keys touched.

        ``values`` are monoid values (a column or any sequence ``monoid.column``
        accepts). A bad value raises before anything is applied. Late messages are
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
        buckets = timestamps_ms.astype(np.int64) // self.bucket_ms * self.bucket_ms
        self._merge(keys, buckets, column)
        self.late_count += late
        return pd.unique(keys)

    def _merge(self, keys: np.ndarray, buckets: np.ndarray, column: np.ndarray) -> None:
        """Adds rows and folds rows of equal (key, bucket), older rows first."""
        if not len(keys):
            return
        all_keys = np.concatenate([self.keys, keys.astype(object, copy=False)])
        all_buckets = np.concatenate([self.buckets, buckets])
        all_values = np.concatenate([self.values, column])
        key_codes, unique_keys = pd.factorize(all_keys, use_na_sentinel=False)
        bucket_codes, unique_buckets = pd.factorize(all_buckets)
        pair_codes, _ = pd.factorize(key_codes.astype(np.int64) * len(unique_buckets) + bucket_codes)
        first = _first_rows(pair_codes)
        self.values = self.monoid.reduce_by_key(pair_codes, len(first), all_values)
        self.keys = all_keys[first]
        self.buckets = all_buckets[first]
        if not self.monoid.commutative:
            self._sort_by_bucket()

    def _sort_by_bucket(self) -> None:
        # Folding a key's buckets in time order is what a non-commutative monoid needs.
        order = np.argsort(self.buckets, kind="stable")
        self.keys, self.buckets, self.values = self.keys[order], self.buckets[order], self.values[order]

    # -- reading -------------------------------------------------------------------

    def totals(self, keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, values)``: each key's fold over all its rows (only ``keys``, if given)."""
        if keys is None:
            return self._fold_per_key(np.ones(len(self.keys), dtype=bool))
        return self._fold_per_key(pd.Series(self.keys, dtype=object).isin(keys).to_numpy())

    def _fold_per_key(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = self.keys[rows]
        codes, unique_keys = pd.factorize(keys, use_na_sentinel=False)
        return np.asarray(unique_keys, dtype=object), self.monoid.reduce_by_key(
            codes, len(unique_keys), self.values[rows]
        )

    def get(self, key) -> object:
        """The fold of one key's rows (``zero()`` for an unknown key)."""
        keys, values = self._fold_per_key(self.keys == key)
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
        for start in starts:
            rows = (self.buckets >= start) & (self.buckets < start + size)
            if rows.any():
                keys, values = self._fold_per_key(rows)
                parts.append((keys, np.full(len(keys), start, dtype=np.int64), values))
        if not parts:
            return WindowResults(np.empty(0, object), np.empty(0, np.int64), np.empty(0, np.int64), self.monoid.zeros(0))
        starts_ms = np.concatenate([p[1] for p in parts])
        return WindowResults(
            keys=np.concatenate([p[0] for p in parts]),
            starts_ms=starts_ms,
            ends_ms=starts_ms + size,
            values=np.concatenate([p[2] for p in parts]),
        )

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
        return self._encode(self.buckets < timestamp_ms, timestamp_ms, min(timestamp_ms, self.emitted_ms))

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
        if self.window is None:
            before = self.buckets < timestamp_ms
            self.buckets = np.where(before, COMMITTED, self.buckets)
            self._refold()
        else:
            # Windows not emitted yet keep their panes, also in the checkpoint.
            self._keep(self.buckets >= self.window.oldest_open_start(min(timestamp_ms, self.emitted_ms)))
        self.checkpoint_ms = timestamp_ms

    def _refold(self) -> None:
        """Folds rows that share (key, bucket) after buckets were rewritten."""
        keys, buckets, values = self.keys, self.buckets, self.values
        self.keys, self.buckets, self.values = np.empty(0, object), np.empty(0, np.int64), self.monoid.zeros(0)
        self._merge(keys, buckets, values)

    def _keep(self, rows: np.ndarray) -> None:
        self.keys, self.buckets, self.values = self.keys[rows], self.buckets[rows], self.values[rows]

    def only(self, keys: np.ndarray) -> KeyedTable:
        """A copy holding only the rows of ``keys`` (for moving keys to other tables); its
        late count starts at 0, since the messages refused were this table's."""
        table = self.copy()
        table._keep(np.isin(self.keys, keys))
        table.late_count = 0
        return table

    def absorb(self, other: KeyedTable) -> None:
        """Adds ``other``'s rows, whose keys this table does not hold, checkpointed at the
        same time (for moving keys from other tables)."""
        if (other.checkpoint_ms, other.emitted_ms) != (self.checkpoint_ms, self.emitted_ms):
            raise StateValueError(
                f"cannot absorb a table checkpointed at {other.checkpoint_ms} ms (windows emitted to "
                f"{other.emitted_ms} ms) into one at {self.checkpoint_ms} ms ({self.emitted_ms} ms)"
            )
        self.keys = np.concatenate([self.keys, other.keys])
        self.buckets = np.concatenate([self.buckets, other.buckets])
        self.values = np.concatenate([self.values, other.values])
        self.late_count += other.late_count

    def recover(self, timestamp_ms: int, data: bytes) -> None:
        """Replaces the state with the checkpoint ``data`` taken at ``timestamp_ms``."""
        timestamp_ms = check_time_ms(timestamp_ms)
        restored = self.decode(data, self.monoid, self.interval_ms, self.window, f"checkpoint at {timestamp_ms}")
        if restored.checkpoint_ms != timestamp_ms:
            raise CorruptCheckpointError(
                f"checkpoint at {timestamp_ms} holds the state at {restored.checkpoint_ms}"
            )
        self.keys, self.buckets, self.values = restored.keys, restored.buckets, restored.values
        self.checkpoint_ms, self.emitted_ms = timestamp_ms, restored.emitted_ms

    # -- encoding ------------------------------------------------------------------

    def encode(self) -> bytes:
        """The whole table, including rows after the last checkpoint and the counters."""
        return self._encode(np.ones(len(self.keys), dtype=bool), self.checkpoint_ms, self.emitted_ms)

    def _encode(self, rows: np.ndarray, checkpoint_ms: int, emitted_ms: int) -> bytes:
        meta = np.array([checkpoint_ms, emitted_ms, self.late_count, self.bucket_ms], dtype=np.int64)
        description = describe(self.monoid, self.interval_ms, self.window)
        return codec.pack(
            _MAGIC,
            _VERSION,
            [
                codec.ints_to_bytes(meta),
                codec.keys_to_bytes(self.keys[rows]),
                codec.ints_to_bytes(self.buckets[rows]),
                self.monoid.encode_column(self.values[rows]),
                json.dumps(description, sort_keys=True).encode(),
            ],
        )

    @staticmethod
    def _unpack(data: bytes, what: str) -> tuple[int, list[bytes]]:
        version, sections = codec.unpack(_MAGIC, _SECTIONS, data, what)
        if len(sections) != _SECTIONS[version] or len(sections[0]) != 32 or len(sections[2]) % 8:
            raise CorruptCheckpointError(f"{what}: the sections of the table are malformed")
        return version, sections

    @classmethod
    def decode(
        cls, data: bytes, monoid: Monoid, interval_ms: int, window: Window | None = None, what: str = "table"
    ) -> KeyedTable:
        """A table from ``encode`` (or ``checkpoint``) bytes of an equal monoid and window."""
        _, sections = cls._unpack(data, what)
        return cls._from_sections(sections, monoid, interval_ms, window, what)

    @classmethod
    def read(cls, data: bytes, what: str = "table") -> KeyedTable:
        """A table from ``encode`` or ``checkpoint`` bytes alone, with the monoid, window
        and checkpoint interval they name.

        The monoid is rebuilt with ``monoids.from_identity``: one defined outside
        ``monoids`` must be imported first. Raises ``CorruptCheckpointError`` for
        damaged bytes and ``StateValueError`` when the monoid cannot be rebuilt or the
        bytes are of format 1, which does not name its monoid (use ``decode``).
        """
        version, sections = cls._unpack(data, what)
        if version == 1:
            raise StateValueError(
                f"{what} is in table format 1, which does not name its monoid; decode it with the "
                "task's monoid and window (KeyedTable.decode)"
            )
        try:
            description = json.loads(sections[4])
            identity, interval_ms = description["monoid"], check_interval_ms(description["interval_ms"])
            window = description["window"] and Window(**description["window"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCheckpointError(f"{what}: the description of the table is unreadable ({exc!r})") from exc
        try:
            monoid = from_identity(identity)
        except MonoidError as exc:
            raise StateValueError(f"{what}: {exc}") from exc
        return cls._from_sections(sections, monoid, interval_ms, window, what)

    @classmethod
    def _from_sections(
        cls, sections: list[bytes], monoid: Monoid, interval_ms: int, window: Window | None, what: str
    ) -> KeyedTable:
        table = cls(monoid, interval_ms, window)
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
            table.values = monoid.decode_column(values)
        except MonoidError as exc:
            raise CorruptCheckpointError(f"{what}: {exc}") from exc
        if not len(table.keys) == len(table.buckets) == len(table.values):
            raise CorruptCheckpointError(f"{what}: columns differ in length")
        table.checkpoint_ms, table.emitted_ms, table.late_count = checkpoint_ms, emitted_ms, late_count
        return table
