"""One key group's table without Spark: a ``KeyedTable`` against a ``StoredTable`` (its
committed rows in runs on local disk), batch time and memory.

    python bench/stored_table.py [--keys N] [--batch N] [--batches N] {keyed,stored}

The table starts as the checkpoint of ``--keys`` str keys, decoded; each batch brings
``--batch`` messages of keys drawn uniformly from 1.5 % more keys than that (so about
1.5 % of a batch's keys are new), and is followed by its totals and a checkpoint of
changes: what a key group does in a micro-batch. Prints each batch's time, the
process's resident memory (anonymous, and the files it maps) and the median.
One kind a process, so that neither counts the other's memory.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monoids import Sum  # noqa: E402
from persistent.storage.local_runs import LocalRuns  # noqa: E402
from state.stored_table import StoredTable  # noqa: E402
from state.table import KeyedTable  # noqa: E402

INTERVAL_MS = 1000


def resident_mb() -> str:
    """The process's resident memory: anonymous, and of the files it maps."""
    rss = {line.split(":")[0]: int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("Rss")}
    return f"{rss['RssAnon'] / 1e3:,.0f} MB anon, {rss['RssFile'] / 1e3:,.0f} MB files"


def keys_of(numbers: np.ndarray) -> np.ndarray:
    return np.array([f"user-{number:09d}" for number in numbers.tolist()], dtype=object)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=6_250_000)
    parser.add_argument("--batch", type=int, default=125_000)
    parser.add_argument("--batches", type=int, default=14)
    parser.add_argument("kind", choices=("keyed", "stored"))
    args = parser.parse_args()
    print(f"start: {resident_mb()}")
    table = KeyedTable(Sum(), INTERVAL_MS)
    for start in range(0, args.keys, 1 << 20):
        keys = keys_of(np.arange(start, min(args.keys, start + (1 << 20))))
        table.update(keys, np.zeros(len(keys), dtype=np.int64), np.ones(len(keys), dtype=np.int64), touched=False)
    table.take_touched_totals()
    table.recover(INTERVAL_MS, table.checkpoint(INTERVAL_MS))
    if args.kind == "stored":
        table = StoredTable.of(table, LocalRuns(tempfile.mkdtemp()))
    print(f"{args.keys:,} keys: {resident_mb()}")
    rng, times = np.random.default_rng(1), []
    for batch in range(args.batches):
        keys = keys_of(rng.integers(0, int(args.keys * 1.015), args.batch))
        at = INTERVAL_MS * (batch + 1)
        started = time.perf_counter()
        table.update(keys, np.full(len(keys), at, dtype=np.int64), np.ones(len(keys), dtype=np.int64), touched=False)
        touched, _ = table.take_touched_totals()
        changes = table.checkpoint_changes(at + INTERVAL_MS)
        times.append(time.perf_counter() - started)
        runs = f", runs {table.store.run_rows()}" if args.kind == "stored" else ""
        print(f"batch {batch}: {1e3 * times[-1]:,.0f} ms, {len(touched):,} keys, changes {len(changes) // 1000:,} KB"
              f"{runs}; {resident_mb()}")
    print(f"{args.kind}: median {1e3 * float(np.median(times)):,.0f} ms a batch")


if __name__ == "__main__":
    main()
