"""An exactly-once PostgreSQL sink (``psycopg`` 3: ``pip install persistent-state[postgres]``).

Results are upserted into a table and the batch's marker is written in the same
transaction (``persistent.sinks.base.TransactionalSink``): a replayed micro-batch changes
nothing, and a write that fails leaves nothing behind. Tables are created on first
use: ``TABLE(key, [window_start, window_end,] value)`` with the key (and window start)
as primary key, and ``persistent_batches(sink, generation, batch)``.
"""

from __future__ import annotations

from contextlib import contextmanager

from persistent.sinks.base import TransactionalSink

__all__ = ["PostgresSink"]


class PostgresSink(TransactionalSink):
    """A ``TransactionalSink`` on a PostgreSQL database: ``database`` is a libpq
    connection string or URI, e.g. ``postgresql://user:password@host:5432/dbname``."""

    DATABASE = "PostgreSQL"
    PLACEHOLDER = "%s"
    TYPES = {"i": "BIGINT", "u": "BIGINT", "f": "DOUBLE PRECISION", "b": "BOOLEAN"}

    @contextmanager
    def _transaction(self):
        try:
            import psycopg
        except ImportError:
            raise ImportError(
                "PostgreSQL sink: psycopg is not installed; install persistent-state[postgres]"
            ) from None
        # Leaving the connection block commits, or rolls back if the block raised.
        with psycopg.connect(self.database) as db, db.cursor() as cursor:
            yield cursor

    def _upsert(self, db, rows: list[tuple], windowed: bool) -> None:
        # COPY into a staging table, then one upsert: many times faster than a row per statement.
        names = ", ".join(self._names(windowed))
        db.execute(f"CREATE TEMPORARY TABLE persistent_staging (LIKE {self.table}) ON COMMIT DROP")
        with db.copy(f"COPY persistent_staging ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        db.execute(self._upsert_statement(windowed, f"SELECT {names} FROM persistent_staging"))
