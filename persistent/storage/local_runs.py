"""``LocalRuns``: the runs of a local store (``state.key_runs``) in files on local disk.

A run is three files, written once: its hashes (unsigned 64-bit integers), its keys (an
Arrow IPC file, a record batch a part) and its records (``dtype``'s bytes), read back
memory-mapped, so that a process holds in its heap only the rows it reads. The files
go when no store holds the run any more (a mapping still open outlives them).
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from state.key_runs import Part, Run

__all__ = ["LocalRuns"]

#: Numbers the runs of this process, for their files' names.
_NAMES = itertools.count()


class LocalRuns:
    """Runs in files under ``directory`` (a local one: it is memory-mapped)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def write(self, parts: Iterator[Part], key_type: pa.DataType, dtype: np.dtype) -> Run:
        """Writes ``parts`` into a run's files, and maps them."""
        stem = os.path.join(self.directory, f"run-{os.getpid()}-{next(_NAMES)}")
        paths = [stem + ".h", stem + ".k", stem + ".v"]
        schema = pa.schema([("key", key_type)])
        try:
            with open(paths[0], "wb") as hashes, pa.OSFile(paths[1], "wb") as keys, \
                    pa.ipc.new_file(keys, schema) as writer, open(paths[2], "wb") as records:
                for part_hashes, part_keys, part_records in parts:
                    part_hashes.tofile(hashes)
                    writer.write_batch(pa.record_batch([part_keys], schema=schema))
                    part_records.tofile(records)
            run = Run(_mapped(paths[0], np.dtype(np.uint64)),
                      pa.ipc.open_file(pa.memory_map(paths[1])).read_all().column(0), _mapped(paths[2], dtype))
        except BaseException:
            _remove(paths)
            raise
        weakref.finalize(run, _remove, paths)
        return run


def _mapped(path: str, dtype: np.dtype) -> np.ndarray:
    """The file at ``path`` as a read-only array of ``dtype`` (an empty one: no mapping)."""
    if not os.path.getsize(path):
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _remove(paths: list[str]) -> None:
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
