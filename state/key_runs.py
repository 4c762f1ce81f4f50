"""``KeyRuns``: a record of fixed width for each of millions of keys, on local disk, read
by memory-mapping, so that a process holds in its heap only the keys it works on.

A key group's table (``state.table``) holds every key as a Python object and an index
of them: about 190 bytes a key, most of a worker's memory at tens of millions of keys.
Between micro-batches most keys are not touched; here they wait on disk, looked up by
the keys a batch brings.

The store is a log-structured merge of *runs*: each run holds distinct keys and their
records, sorted by a 64-bit hash of the key, written once and never changed, in three
files of its own (the hashes, the keys as an Arrow IPC file, the records) where the
store's ``RunFiles`` keeps them (``persistent.storage.local_runs``, the package that
keeps every byte a job keeps). Writing a
batch's keys (``then``) adds a run; a key's record is that of the newest run holding
it. ``find`` looks the keys up by a binary search in each run's hashes, newest first,
and compares the keys of equal hashes (two keys of one hash, a chance of one in 2**64
for two keys, are told apart by key). ``merged`` folds runs into one, a range of hashes
at a time, so that a merge holds about ``_PART_ROWS`` rows of each run in memory
however large the runs are; ``items`` reads every key's newest record the same way.

A store is immutable: ``then`` and ``merged`` return a new store sharing the runs they
keep, so a store is a snapshot that a failed batch goes back to. Hashes are pandas' ``hash_array`` (SipHash of
a string's UTF-8 bytes, with a fixed key), the same in every process. Keys are not
null: a table keeps its null key's row itself.

The tables do not keep their rows here yet: this is the first part of the local store
that state larger than memory needs (docs/performance.md, "Memory").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["KeyRuns", "Run", "RunFiles", "key_hashes"]

#: The Arrow type of the keys of each kind a store holds.
_TYPES = {"str": pa.string(), "bytes": pa.binary(), "int": pa.int64()}
#: About how many rows of each run a merge holds at once.
_PART_ROWS = 1 << 20


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """The 64-bit hash of each of ``keys`` (strings, bytes or integers), as unsigned integers
    (each key hashed, not each distinct key once: a batch's keys are mostly distinct)."""
    return pd.util.hash_array(keys, categorize=False)


#: A part of a run: hashes (sorted, above those of the parts before), keys and records.
Part = tuple[np.ndarray, pa.Array, np.ndarray]


class Run:
    """A run's columns, read-only: distinct keys sorted by hash, and their records."""

    __slots__ = ("hashes", "keys", "records", "__weakref__")

    def __init__(self, hashes: np.ndarray, keys: pa.ChunkedArray, records: np.ndarray) -> None:
        self.hashes, self.keys, self.records = hashes, keys, records

    def __len__(self) -> int:
        return len(self.hashes)

    def rows_between(self, low: int, high: int | None) -> slice:
        """The rows whose hashes are from ``low`` on, below ``high`` (None: to the end)."""
        start = int(np.searchsorted(self.hashes, np.uint64(low), side="left"))
        stop = len(self) if high is None else int(np.searchsorted(self.hashes, np.uint64(high), side="left"))
        return slice(start, stop)


class RunFiles(Protocol):
    """Where a store keeps its runs (``persistent.storage.local_runs.LocalRuns``: files on
    local disk, memory-mapped, removed when no store holds the run)."""

    def write(self, parts: Iterator[Part], key_type: pa.DataType, dtype: np.dtype) -> Run:
        """Writes a run of ``parts``, its keys of ``key_type`` and records of ``dtype``."""


class KeyRuns:
    """Records of ``dtype`` by key (of ``kind``: ``"str"``, ``"bytes"`` or ``"int"``), in
    runs that ``files`` keeps; see the module docstring. ``hashing`` gives the keys'
    hashes (tests give one of few values, so that many keys share a hash)."""

    def __init__(self, files: RunFiles, dtype, kind: str,
                 hashing: Callable[[np.ndarray], np.ndarray] = key_hashes) -> None:
        if kind not in _TYPES:
            raise ValueError(f"KeyRuns: keys of kind {kind!r}; a store holds one of {', '.join(_TYPES)}")
        self.files, self.dtype, self.kind, self._hashing = files, np.dtype(dtype), kind, hashing
        self._runs: tuple[Run, ...] = ()

    def run_rows(self) -> list[int]:
        """The rows of each run, oldest first."""
        return [len(run) for run in self._runs]

    def _with_runs(self, runs: tuple[Run, ...]) -> KeyRuns:
        store = KeyRuns(self.files, self.dtype, self.kind, self._hashing)
        store._runs = runs
        return store

    def _arrow(self, keys: np.ndarray) -> pa.Array:
        return pa.array(keys, type=_TYPES[self.kind], from_pandas=False)

    def then(self, keys: np.ndarray, records: np.ndarray) -> KeyRuns:
        """The store with ``records`` as the records of ``keys``: a new run (of a key that
        comes more than once, its last record)."""
        if len(keys) != len(records):
            raise ValueError(f"KeyRuns.then: {len(keys)} keys and {len(records)} records")
        if not len(keys):
            return self
        part = _last_of_each_key(self._hashing(keys), self._arrow(keys), np.asarray(records, dtype=self.dtype))
        return self._with_runs(self._runs + (self.files.write(iter([part]), _TYPES[self.kind], self.dtype),))

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(found, records)``: whether each of ``keys`` is held, and its newest record
        (zeros where not held)."""
        found = np.zeros(len(keys), dtype=bool)
        records = np.zeros(len(keys), dtype=self.dtype)
        if not len(keys) or not self._runs:
            return found, records
        hashes = self._hashing(keys)
        queries = self._arrow(keys)
        by_hash = np.argsort(hashes)  # a search of sorted hashes reads each run's hashes in order
        for run in reversed(self._runs):
            wanted = by_hash[~found[by_hash]]
            if not len(wanted) or not len(run):
                continue
            rows = np.searchsorted(run.hashes, hashes[wanted], side="left")
            while True:
                inside = rows < len(run)
                same_hash = np.zeros(len(rows), dtype=bool)
                same_hash[inside] = run.hashes[rows[inside]] == hashes[wanted[inside]]
                if not same_hash.any():
                    break
                wanted, rows = wanted[same_hash], rows[same_hash]
                same_key = pc.equal(run.keys.take(pa.array(rows)), queries.take(pa.array(wanted)))
                same_key = same_key.to_numpy(zero_copy_only=False)
                found[wanted[same_key]] = True
                records[wanted[same_key]] = run.records[rows[same_key]]
                # A key whose hash another key of the run has: the next row of that hash.
                wanted, rows = wanted[~same_key], rows[~same_key] + 1
        return found, records

    def merged(self, first: int = 0) -> KeyRuns:
        """The store with its runs from the ``first`` on merged into one (newest record of
        each key), written a range of hashes at a time."""
        kept, merging = self._runs[:first], self._runs[first:]
        if len(merging) < 2:
            return self
        run = self.files.write(self._parts(merging), _TYPES[self.kind], self.dtype)
        return self._with_runs(kept + (run,))

    def items(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(keys, records)`` of every key held, its newest record, in parts of about
        ``_PART_ROWS`` rows of each run; keys as an object array (integers: int64)."""
        for _, keys, records in self._parts(self._runs):
            yield keys.to_numpy(zero_copy_only=False), records

    def _parts(self, runs: tuple[Run, ...]) -> Iterator[Part]:
        """The newest row of each key of ``runs``, sorted by hash, a range of hashes at a
        time: the ranges cut the largest run into parts of ``_PART_ROWS`` rows."""
        largest = max(runs, key=len, default=None)
        if largest is None or not len(largest):
            return
        # Ranges of hash values: the rows of one hash are in one range.
        bounds = sorted({int(largest.hashes[i]) for i in range(_PART_ROWS, len(largest), _PART_ROWS)})
        for low, high in zip([0] + bounds, bounds + [None]):
            part = [(run, run.rows_between(low, high)) for run in runs]
            yield self._newest(part)

    def _newest(self, part: list[tuple[Run, slice]]) -> Part:
        """Of the rows ``part`` takes of each run (oldest first), each key's newest one."""
        return _last_of_each_key(
            np.concatenate([run.hashes[rows] for run, rows in part]),
            pa.chunked_array([chunk for run, rows in part for chunk in run.keys[rows.start:rows.stop].chunks],
                             type=_TYPES[self.kind]),
            np.concatenate([run.records[rows] for run, rows in part]))


def _last_of_each_key(hashes: np.ndarray, keys: pa.Array | pa.ChunkedArray, records: np.ndarray) -> Part:
    """The last row of each key of the rows ``hashes``, ``keys`` and ``records``, sorted
    by hash: keys are compared only where rows share a hash."""
    order = np.argsort(hashes, kind="stable")  # of one hash, the rows in their order
    hashes, records = hashes[order], records[order]
    keys = keys.take(pa.array(order))
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    shared = np.zeros(len(hashes), dtype=bool)
    np.equal(hashes[1:], hashes[:-1], out=shared[1:])
    shared[:-1] |= shared[1:]  # every row of a hash that has more than one
    if shared.any():
        rows = np.flatnonzero(shared)
        by_key = pd.DataFrame({"hash": hashes[rows], "key": keys.take(pa.array(rows)).to_numpy(zero_copy_only=False)})
        keep = np.ones(len(hashes), dtype=bool)
        keep[rows[by_key.duplicated(keep="last").to_numpy()]] = False
        hashes, records, keys = hashes[keep], records[keep], keys.filter(pa.array(keep))
    return hashes, keys, records
