"""The benchmark's input: Parquet files of events, one file per micro-batch.

Each event has a string ``key``, an event ``timestamp`` (ms) and an integer
``value``. Keys are drawn uniformly from ``keys`` distinct keys, or with Zipf-like
skew (the key of rank ``r`` has weight ``r ** -ZIPF_EXPONENT``, ranks shuffled over
the keys). Event time grows with the row number: one file spans ``BATCH_SPAN_MS``
of event time, so every micro-batch passes checkpoint boundaries.

A Spark query reads a *view* of the files (hard links in its own directory, see
``ParquetInput``), so queries never see each other's files and a restarted query
sees the files it saw before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["Dataset", "ParquetInput", "generate", "first_timestamp", "BATCH_SPAN_MS", "ZIPF_EXPONENT", "SCHEMA_DDL"]

#: Event time one file (one micro-batch) spans: two checkpoint intervals of 1 s.
BATCH_SPAN_MS = 2_000
#: Exponent of the skewed key distribution.
ZIPF_EXPONENT = 1.1
#: Spark schema of the files.
SCHEMA_DDL = "key string, timestamp bigint, value bigint"


@dataclass(frozen=True)
class Dataset:
    """Generated files of one key distribution and key count."""

    distribution: str
    keys: int
    batch_rows: int
    files: tuple[str, ...]
    #: One more batch after ``files``, for restarts that need new input.
    extra: str

    @property
    def name(self) -> str:
        return f"{self.distribution}-{self.keys}"

    def first_files(self, n: int) -> tuple[str, ...]:
        """The first ``n`` files (all when ``n`` is larger)."""
        return self.files[:n]


def _key_ids(rng: np.random.Generator, distribution: str, keys: int, n: int) -> np.ndarray:
    if distribution == "uniform":
        return rng.integers(0, keys, n)
    if distribution == "skewed":
        weights = np.arange(1, keys + 1, dtype=np.float64) ** -ZIPF_EXPONENT
        cdf = np.cumsum(weights)
        ranks = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        return rng.permutation(keys)[np.minimum(ranks, keys - 1)]
    raise ValueError(f"bench data: distribution must be 'uniform' or 'skewed', got {distribution!r}")


def generate(directory: str | Path, distribution: str, keys: int, events: int, batch_rows: int,
             seed: int = 1) -> Dataset:
    """Writes ``ceil(events / batch_rows)`` files of ``batch_rows`` events (plus the
    extra file) to ``directory`` and returns them."""
    if keys <= 0 or events <= 0 or batch_rows <= 0:
        raise ValueError(f"bench data: keys, events and batch_rows must be > 0, got {keys}, {events}, {batch_rows}")
    directory = Path(directory) / f"{distribution}-{keys}"
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, keys, distribution == "skewed"])
    vocabulary = pc.binary_join_element_wise("k", pc.cast(pa.array(np.arange(keys)), pa.string()), "")
    n_files = -(-events // batch_rows)
    paths = []
    for f in range(n_files + 1):
        rows = np.arange(f * batch_rows, (f + 1) * batch_rows, dtype=np.int64)
        table = pa.table(
            {
                "key": vocabulary.take(_key_ids(rng, distribution, keys, batch_rows)),
                "timestamp": 1 + rows * BATCH_SPAN_MS // batch_rows,
                "value": rng.integers(0, 1_000, batch_rows),
            }
        )
        path = directory / f"part-{f:05d}.parquet"
        pq.write_table(table, path)
        # Spark's file source takes files in modification-time order.
        os.utime(path, (1_000_000_000 + f, 1_000_000_000 + f))
        paths.append(str(path))
    return Dataset(distribution, keys, batch_rows, tuple(paths[:-1]), paths[-1])


def first_timestamp(path: str) -> int:
    """The smallest event time in a file."""
    return int(pq.read_metadata(path).row_group(0).column(1).statistics.min)


class ParquetInput:
    """Spark's file source over a view of ``files``: one file per micro-batch.

    Also a time-replayable source for ``persistent.Job``: started at event time
    ``start_ms`` (recovery path B), the view holds only the files with events at or
    after it, and earlier events are filtered out.
    """

    def __init__(self, files: tuple[str, ...], view_root: str | Path):
        self.files = files
        self.view_root = Path(view_root)

    def stream(self, spark, start_ms: int = 0):
        from pyspark.sql import functions as F

        view = self.view_root / f"from-{start_ms}"
        view.mkdir(parents=True, exist_ok=True)
        starts = [first_timestamp(p) for p in self.files] + [2**62]
        for path, next_start in zip(self.files, starts[1:]):
            link = view / os.path.basename(path)
            if next_start > start_ms and not link.exists():
                os.link(path, link)
        frame = spark.readStream.schema(SCHEMA_DDL).option("maxFilesPerTrigger", 1).parquet(str(view))
        return frame.where(F.col("timestamp") >= start_ms) if start_ms else frame
