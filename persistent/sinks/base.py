"""What every sink of a job's results is: ``Sink`` and the SQL ``TransactionalSink``.

Each micro-batch's results arrive with a ``BatchId``: the Spark checkpoint
generation and the micro-batch number. Spark replays an unfinished micro-batch with
the same id and the same results (recovery path A), so a sink must make a replayed
batch change nothing. After a restart from the clock (path B) a new generation
starts, and batches after the clock are recomputed with the same values: results are
keyed (by key, and window start for windows), so writing them again is harmless.

Result columns: ``key``, ``window_start`` and ``window_end`` (ms; windows only) and
``value``.

With at-least-once or at-most-once delivery (``persistent.runtime.delivery``) results are
appended instead (``Sink.append``): no marker, a replayed batch's rows are added again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass

from persistent.core.errors import ConfigError, RestartRefusedError
from persistent.storage.faults import CrashPoint, crash_point

__all__ = ["BatchId", "result_columns", "earlier_run", "Sink", "TransactionalSink"]


@dataclass(frozen=True)
class BatchId:
    """Identifies one micro-batch across restarts."""

    generation: int
    batch: int


def result_columns(windowed: bool) -> list[str]:
    """The result columns a sink writes: the window bounds only for windowed tasks."""
    return ["key", "window_start", "window_end", "value"] if windowed else ["key", "value"]


def earlier_run(holder: str, marks: str, remedy: str) -> RestartRefusedError:
    """The refusal of a start without a checkpoint on a sink (``holder``) that holds an
    earlier run's results, which its markers (``marks``) name: ``remedy`` says what to do."""
    return RestartRefusedError(
        f"{holder} holds results of an earlier run ({marks}), and this job starts without a checkpoint, so its "
        f"batch ids would be taken for replays and skipped: {remedy}"
    )


class Sink(ABC):
    """Where results go; ``write`` must be idempotent per ``BatchId``."""

    #: True for a sink whose ``write`` and ``append`` read every row of their results,
    #: in one Spark job, whatever the sink already holds, and write nothing when that
    #: job fails: a Spark writer (it commits the job's files once all its tasks
    #: succeeded), a sink that collects the results to the driver before it writes.
    #: Its write then computes the micro-batch: one Spark job per batch. Otherwise the
    #: runtime computes the batch first, in a job of its own, and the sink reads it
    #: from Spark's cache. A subclass that overrides ``write`` or ``append`` keeps it
    #: True only if they still read every row, a replayed batch's too: a batch nobody
    #: computed leaves Spark's state store without its version.
    reads_once: bool = False

    @abstractmethod
    def write(self, results, batch: BatchId, windowed: bool) -> None:
        """Writes one micro-batch of results (a Spark DataFrame)."""

    def check_fresh_start(self, spark) -> None:
        """Called before a job starts with no checkpoint: raises ``ValueError`` when the
        sink holds batches of an earlier run, whose batch ids this run would reuse."""

    def newest_generation(self, spark) -> int | None:
        """The newest generation the sink holds batches of; ``None`` when it holds none
        or cannot tell. A restart checks the job directory's generation against it."""
        return None

    def append(self, results, batch: BatchId, windowed: bool) -> None:
        """Adds one micro-batch's results to what is there, each row with its
        ``generation`` and ``batch``, and no marker: a replayed batch adds its rows
        again. At-least-once and at-most-once delivery write this way
        (``persistent.runtime.delivery``); a sink without it supports exactly-once only."""
        raise NotImplementedError(f"{type(self).__name__} cannot append results")


class TransactionalSink(Sink):
    """Upserts results into ``table`` of a SQL database, keyed by key (and window start
    for windows), and records the batch's marker ``(table, generation, batch)`` in the
    same transaction: a replayed batch finds its marker and changes nothing, and a
    failed write leaves neither rows nor marker behind.

    ``database`` names the database (a file path, a connection URI). A subclass opens
    the transaction (``_transaction``) and names its placeholder and column types; the
    statements are shared.
    """

    MARKERS = "persistent_batches"
    reads_once = True  # the results come to the driver (``toPandas``) before the transaction
    #: Name of the database in error messages.
    DATABASE: str
    #: Query parameter placeholder.
    PLACEHOLDER: str
    #: Column type by numpy dtype kind; other kinds are stored as ``TEXT``.
    TYPES: dict[str, str]

    def __init__(self, database: str, table: str = "results", key_column: str = "key", value_column: str = "value"):
        for name in (table, key_column, value_column):
            if not name.isidentifier():
                raise ConfigError(f"{self.DATABASE} sink: {name!r} is not a valid table or column name")
        self.database, self.table, self.key_column, self.value_column = database, table, key_column, value_column

    @abstractmethod
    def _transaction(self) -> AbstractContextManager:
        """A context manager giving a DB-API cursor in a transaction that commits when
        the block ends and rolls back when it raises."""

    def write(self, results, batch: BatchId, windowed: bool) -> None:
        self.write_frame(results.toPandas(), batch, windowed)

    def append(self, results, batch: BatchId, windowed: bool) -> None:
        self.append_frame(results.toPandas(), batch, windowed)

    def write_frame(self, frame, batch: BatchId, windowed: bool) -> None:
        """Writes one micro-batch of results given as a pandas DataFrame."""
        types = self._type(frame["key"]), self._type(frame["value"])
        # The last row of a key wins.
        keyed = ["key", "window_start"] if windowed else ["key"]
        rows = _rows(frame[result_columns(windowed)].drop_duplicates(keyed, keep="last"))
        with self._transaction() as db:
            self._create_markers(db)
            db.execute(
                f"INSERT INTO {self.MARKERS} (sink, generation, batch) VALUES ({self._placeholders(3)}) "
                "ON CONFLICT DO NOTHING",
                (self.table, batch.generation, batch.batch),
            )
            if db.rowcount == 1 and rows:  # no marker yet: this batch was never written
                # The table is created with the first results: an empty frame's types say nothing.
                db.execute(self._create(windowed, *types))
                self._upsert(db, rows, windowed)
            crash_point(CrashPoint.SINK)

    def check_fresh_start(self, spark) -> None:
        with self._transaction() as db:
            self._create_markers(db)
            db.execute(f"SELECT 1 FROM {self.MARKERS} WHERE sink = {self.PLACEHOLDER} LIMIT 1", (self.table,))
            if db.fetchone():
                raise earlier_run(f"{self.DATABASE} sink {self.database}: table {self.table}",
                                  f"rows with sink = '{self.table}' in {self.MARKERS}",
                                  f"drop table {self.table} and delete those rows, or write to another table")

    def newest_generation(self, spark) -> int | None:
        with self._transaction() as db:
            self._create_markers(db)
            db.execute(f"SELECT MAX(generation) FROM {self.MARKERS} WHERE sink = {self.PLACEHOLDER}", (self.table,))
            (newest,) = db.fetchone()
        return newest

    def _create_markers(self, db) -> None:
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.MARKERS} (sink TEXT, generation {self.TYPES['i']}, "
            f"batch {self.TYPES['i']}, PRIMARY KEY (sink, generation, batch))"
        )

    def append_frame(self, frame, batch: BatchId, windowed: bool) -> None:
        """Appends one micro-batch of results given as a pandas DataFrame (``Sink.append``)
        to ``TABLE(key, [window_start, window_end,] value, generation, batch)``, a table
        without a primary key."""
        types = self._type(frame["key"]), self._type(frame["value"])
        rows = _rows(frame[result_columns(windowed)].assign(generation=batch.generation, batch=batch.batch))
        names = [*self._names(windowed), "generation", "batch"]
        with self._transaction() as db:
            if rows:
                db.execute(self._create(windowed, *types, appended=True))
                db.executemany(
                    f"INSERT INTO {self.table} ({', '.join(names)}) VALUES ({self._placeholders(len(names))})", rows
                )
            crash_point(CrashPoint.SINK)

    def _upsert(self, db, rows: list[tuple], windowed: bool) -> None:
        values = f"VALUES ({self._placeholders(len(self._names(windowed)))})"
        db.executemany(self._upsert_statement(windowed, values), rows)

    def _names(self, windowed: bool) -> list[str]:
        k, v = self.key_column, self.value_column
        return [k, "window_start", "window_end", v] if windowed else [k, v]

    def _upsert_statement(self, windowed: bool, rows: str) -> str:
        """Inserts ``rows`` (``VALUES ...`` or a ``SELECT``), replacing the values of keys
        that are already there."""
        k, v = self.key_column, self.value_column
        conflict = f"{k}, window_start" if windowed else k
        return (
            f"INSERT INTO {self.table} ({', '.join(self._names(windowed))}) {rows} "
            f"ON CONFLICT ({conflict}) DO UPDATE SET {v} = excluded.{v}"
        )

    def _type(self, column) -> str:
        return self.TYPES.get(column.dtype.kind, "TEXT")

    def _placeholders(self, n: int) -> str:
        return ", ".join([self.PLACEHOLDER] * n)

    def _create(self, windowed: bool, key_type: str, value_type: str, appended: bool = False) -> str:
        k, v, integer = self.key_column, self.value_column, self.TYPES["i"]
        columns = f"{k} {key_type}, window_start {integer}, window_end {integer}" if windowed else f"{k} {key_type}"
        key = f"{k}, window_start" if windowed else k
        last = f"generation {integer}, batch {integer}" if appended else f"PRIMARY KEY ({key})"
        return f"CREATE TABLE IF NOT EXISTS {self.table} ({columns}, {v} {value_type}, {last})"


def _rows(frame) -> list[tuple]:
    """The frame's rows as tuples of plain Python values (numpy's are not adaptable)."""
    return list(frame.astype(object).itertuples(index=False, name=None))
