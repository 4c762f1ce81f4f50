"""An exactly-once Parquet sink: one directory per micro-batch, written by Spark and
swapped in whole."""

from __future__ import annotations

import os
import re

from persistent.core.errors import RestartRefusedError
from persistent.sinks.base import BatchId, Sink, result_columns
from persistent.storage.fs import LocalFileSystem, local_path

__all__ = ["ParquetSink"]


class ParquetSink(Sink):
    """Writes each micro-batch to ``DIR/generation=G/batch=N`` with overwrite semantics:
    a replayed batch replaces its own files. The final value of a key (or of a key and
    window) is the one in its newest batch, by generation then batch: ``read`` returns
    exactly those.

    A batch is written beside its place (``DIR/_staging/``, which readers of Parquet
    datasets skip), then swapped in: its directory appears with all its files and
    Spark's ``_SUCCESS`` marker. A directory without ``_SUCCESS`` (a write that died
    midway) is no batch: ``rows`` and ``read`` skip it, and its replay rewrites it."""

    reads_once = True  # Spark's Parquet writer: a job that fails commits no file

    def __init__(self, directory: str, key_column: str = "key", value_column: str = "value"):
        self.directory = directory.rstrip("/")
        self.key_column, self.value_column = key_column, value_column

    def check_fresh_start(self, spark) -> None:
        from persistent.storage.hadoop_fs import HadoopFileSystem

        if HadoopFileSystem(spark, self.directory).list_names(self.directory):
            raise RestartRefusedError(
                f"Parquet sink: {self.directory} holds results of an earlier run, and this job starts "
                f"without a checkpoint, so its batches would mix with them: empty it or write to another directory"
            )

    def newest_generation(self, spark) -> int | None:
        from persistent.storage.hadoop_fs import HadoopFileSystem

        names = HadoopFileSystem(spark, self.directory).list_names(self.directory)
        generations = [int(name.split("=", 1)[1]) for name in names if re.fullmatch(r"generation=\d+", name)]
        return max(generations, default=None)

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        from persistent.storage.hadoop_fs import HadoopFileSystem

        staging = f"{self.directory}/_staging/generation={batch.generation}-batch={batch.batch:010d}"
        self._write(results, staging, windowed, "overwrite")
        fs = HadoopFileSystem(results.sparkSession, self.directory)
        target = self._target(batch)
        fs.delete(target)
        fs.replace(staging, target)

    def append(self, results, batch: BatchId, windowed: bool) -> None:
        """Adds files to ``DIR/generation=G/batch=N``: a replayed batch's rows are there twice."""
        self._write(results, self._target(batch), windowed, "append")

    def _target(self, batch: BatchId) -> str:
        return f"{self.directory}/generation={batch.generation}/batch={batch.batch:010d}"

    def _write(self, results, target: str, windowed: bool, mode: str) -> None:
        renamed = results.withColumnsRenamed({"key": self.key_column, "value": self.value_column})
        renamed.select(*self._columns(windowed)).write.mode(mode).parquet(target)

    def _columns(self, windowed: bool) -> list[str]:
        names = {"key": self.key_column, "value": self.value_column}
        return [names.get(c, c) for c in result_columns(windowed)]

    def rows(self):
        """Every row in a local directory with its ``generation`` and ``batch``, as pandas,
        without Spark: with at-least-once and at-most-once delivery, the appended effects."""
        import pyarrow.dataset as ds

        root = local_path(self.directory)
        files = ds.dataset(root, format="parquet", partitioning="hive").files
        local = LocalFileSystem()
        complete = [f for f in files if local.exists(os.path.join(os.path.dirname(f), "_SUCCESS"))]
        dataset = ds.dataset(complete, format="parquet", partitioning="hive", partition_base_dir=root)
        return dataset.to_table().to_pandas()

    def read(self, windowed: bool = False):
        """The final results in a local directory, as pandas, without Spark."""
        frame = self.rows()
        columns = self._columns(windowed)
        latest = frame.sort_values(["generation", "batch"], kind="stable")
        latest = latest.drop_duplicates(columns[:2] if windowed else columns[:1], keep="last")
        return latest[columns].sort_values(columns[:-1], ignore_index=True)
