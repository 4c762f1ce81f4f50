"""Exactly-once sinks for a job's results.

Each micro-batch's results arrive with a ``BatchId``: the Spark checkpoint
generation and the micro-batch number. Spark replays an unfinished micro-batch with
the same id and the same results (recovery path A), so a sink must make a replayed
batch change nothing. After a restart from the clock (path B) a new generation
starts, and batches after the clock are recomputed with the same values: results are
keyed (by key, and window start for windows), so writing them again is harmless.

Result columns: ``key``, ``window_start`` and ``window_end`` (ms; windows only) and
``value``.
"""

from __future__ import annotations

import os
import sqlite3
from abc import ABC, abstractmethod
from dataclasses import dataclass

from persistent.faults import crash_point
from state.fs import local_path

__all__ = ["BatchId", "result_columns", "Sink", "SQLiteSink", "ParquetSink", "ConsoleSink", "sink_from_uri"]


@dataclass(frozen=True)
class BatchId:
    """Identifies one micro-batch across restarts."""

    generation: int
    batch: int


def result_columns(windowed: bool) -> list[str]:
    """The result columns a sink writes: the window bounds only for windowed tasks."""
    return ["key", "window_start", "window_end", "value"] if windowed else ["key", "value"]


class Sink(ABC):
    """Where results go; ``write`` must be idempotent per ``BatchId``."""

    @abstractmethod
    def write(self, results, batch: BatchId, windowed: bool) -> None:
        """Writes one micro-batch of results (a Spark DataFrame)."""


class SQLiteSink(Sink):
    """Upserts results into ``table`` of a SQLite database, with the batch marker in the
    same transaction, so a replayed batch changes nothing."""

    MARKERS = "persistent_batches"

    def __init__(self, path: str, table: str = "results", key_column: str = "key", value_column: str = "value"):
        for name in (table, key_column, value_column):
            if not name.isidentifier():
                raise ValueError(f"SQLite sink: {name!r} is not a valid table or column name")
        self.path, self.table, self.key_column, self.value_column = path, table, key_column, value_column

    def _connect(self) -> sqlite3.Connection:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        return sqlite3.connect(self.path, timeout=60, isolation_level=None)

    def _create(self, db: sqlite3.Connection, windowed: bool, value_type: str) -> None:
        k, v = self.key_column, self.value_column
        columns = f"{k}, window_start INTEGER, window_end INTEGER" if windowed else k
        key = f"{k}, window_start" if windowed else k
        db.execute(f"CREATE TABLE IF NOT EXISTS {self.table} ({columns}, {v} {value_type}, PRIMARY KEY ({key}))")
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.MARKERS} (generation INTEGER, batch INTEGER, "
            "PRIMARY KEY (generation, batch))"
        )

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        frame = results.toPandas()
        value_type = "INTEGER" if frame["value"].dtype.kind in "iu" else "REAL" if frame["value"].dtype.kind == "f" else "TEXT"
        columns = result_columns(windowed)
        rows = list(frame[columns].itertuples(index=False, name=None))
        k, v = self.key_column, self.value_column
        names = ", ".join([k, "window_start", "window_end", v] if windowed else [k, v])
        conflict = f"{k}, window_start" if windowed else k
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            self._create(db, windowed, value_type)
            done = db.execute(
                f"SELECT 1 FROM {self.MARKERS} WHERE generation = ? AND batch = ?", (batch.generation, batch.batch)
            ).fetchone()
            if not done:
                db.executemany(
                    f"INSERT INTO {self.table} ({names}) VALUES ({', '.join('?' * len(columns))}) "
                    f"ON CONFLICT ({conflict}) DO UPDATE SET {v} = excluded.{v}",
                    [tuple(x.item() if hasattr(x, "item") else x for x in row) for row in rows],
                )
                db.execute(f"INSERT INTO {self.MARKERS} VALUES (?, ?)", (batch.generation, batch.batch))
                crash_point("sink")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.close()


class ParquetSink(Sink):
    """Writes each micro-batch to ``DIR/generation=G/batch=N`` with overwrite semantics:
    a replayed batch replaces its own files. The final value of a key (or of a key and
    window) is the one in its newest batch, by generation then batch: ``read`` returns
    exactly those."""

    def __init__(self, directory: str, key_column: str = "key", value_column: str = "value"):
        self.directory = directory.rstrip("/")
        self.key_column, self.value_column = key_column, value_column

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        target = f"{self.directory}/generation={batch.generation}/batch={batch.batch:010d}"
        renamed = results.withColumnsRenamed({"key": self.key_column, "value": self.value_column})
        renamed.select(*self._columns(windowed)).write.mode("overwrite").parquet(target)

    def _columns(self, windowed: bool) -> list[str]:
        names = {"key": self.key_column, "value": self.value_column}
        return [names.get(c, c) for c in result_columns(windowed)]

    def read(self, windowed: bool = False):
        """The final results in a local directory, as pandas, without Spark."""
        import pyarrow.dataset as ds

        frame = ds.dataset(local_path(self.directory), format="parquet", partitioning="hive").to_table().to_pandas()
        columns = self._columns(windowed)
        latest = frame.sort_values(["generation", "batch"], kind="stable")
        latest = latest.drop_duplicates(columns[:2] if windowed else columns[:1], keep="last")
        return latest[columns].sort_values(columns[:-1], ignore_index=True)


class ConsoleSink(Sink):
    """Prints each micro-batch's results (for demos; not exactly-once)."""

    def __init__(self, rows: int = 20):
        self.rows = rows

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        columns = result_columns(windowed)
        frame = results.select(*columns).limit(self.rows).toPandas()
        if len(frame):
            print(f"-- batch {batch.generation}.{batch.batch}")
            print(frame.to_string(index=False))


def sink_from_uri(uri: str, table: str = "results", key_column: str = "key", value_column: str = "value") -> Sink:
    """``sqlite:///PATH``, ``console`` or a directory (Parquet)."""
    if uri.startswith("sqlite://"):
        return SQLiteSink(uri[len("sqlite://") :], table, key_column, value_column)
    if uri == "console":
        return ConsoleSink()
    return ParquetSink(uri, key_column, value_column)
