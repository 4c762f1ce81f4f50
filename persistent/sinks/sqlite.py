"""An exactly-once SQLite sink (the standard library's ``sqlite3``): a
``TransactionalSink`` on a database file."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager

from persistent.sinks.base import TransactionalSink
from persistent.storage.fs import LocalFileSystem

__all__ = ["SQLiteSink"]


class SQLiteSink(TransactionalSink):
    """A ``TransactionalSink`` on a SQLite database file (``database`` is its path)."""

    DATABASE = "SQLite"
    PLACEHOLDER = "?"
    TYPES = {"i": "INTEGER", "u": "INTEGER", "f": "REAL", "b": "INTEGER"}

    @contextmanager
    def _transaction(self):
        LocalFileSystem().mkdirs(os.path.dirname(os.path.abspath(self.database)))
        db = sqlite3.connect(self.database, timeout=60, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db.cursor()
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.close()
