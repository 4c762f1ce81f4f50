"""The transactional SQL sinks against real databases: a SQLite file and a PostgreSQL
server on loopback (``postgres_url`` in tests/conftest.py). Results arrive as pandas
frames, as ``TransactionalSink.write`` hands them on from Spark."""

from __future__ import annotations

import sqlite3
import threading

import pandas as pd
import pytest

from persistent.core.errors import ConfigError, RestartRefusedError
from persistent.sinks.base import BatchId, TransactionalSink
from persistent.sinks.postgres import PostgresSink
from persistent.sinks.sqlite import SQLiteSink
from persistent.sinks.uri import sink_from_uri


class Database:
    """A sink's database, and a way to look inside it."""

    def __init__(self, kind: str, location: str):
        self.kind, self.location = kind, location

    def sink(self, table: str = "results", key_column: str = "key", value_column: str = "value") -> TransactionalSink:
        if self.kind == "sqlite":
            return SQLiteSink(self.location, table, key_column, value_column)
        return PostgresSink(self.location, table, key_column, value_column)

    def query(self, sql: str) -> list[tuple]:
        if self.kind == "sqlite":
            with sqlite3.connect(self.location) as db:
                return sorted(db.execute(sql).fetchall())
        import psycopg

        with psycopg.connect(self.location) as db:
            return sorted(db.execute(sql).fetchall())


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path):
    if request.param == "sqlite":
        return Database("sqlite", str(tmp_path / "out.db"))
    return Database("postgres", request.getfixturevalue("postgres_url"))


def counts(pairs: dict) -> pd.DataFrame:
    return pd.DataFrame({"key": list(pairs), "value": pd.array(list(pairs.values()), dtype="int64")})


def windows(rows: list[tuple]) -> pd.DataFrame:
    key, start, end, value = zip(*rows)
    return pd.DataFrame({"key": key, "window_start": start, "window_end": end, "value": value})


def test_replayed_batch_changes_nothing(database):
    sink = database.sink()
    sink.write_frame(counts({"a": 1, "b": 2}), BatchId(0, 0), windowed=False)
    # A replay carries the same values; different ones here would show any rewrite.
    sink.write_frame(counts({"a": 100, "c": 300}), BatchId(0, 0), windowed=False)
    assert database.query("SELECT key, value FROM results") == [("a", 1), ("b", 2)]
    assert database.query("SELECT sink, generation, batch FROM persistent_batches") == [("results", 0, 0)]


def test_later_batches_and_generations_upsert_by_key(database):
    sink = database.sink("counts", key_column="word", value_column="count")
    sink.write_frame(counts({"a": 1, "b": 2}), BatchId(0, 0), windowed=False)
    sink.write_frame(counts({"b": 5, "c": 1}), BatchId(0, 1), windowed=False)
    # After a restart from the clock, a new generation numbers its batches from 0 again.
    sink.write_frame(counts({"a": 7}), BatchId(1, 0), windowed=False)
    assert database.query("SELECT word, count FROM counts") == [("a", 7), ("b", 5), ("c", 1)]
    assert database.query("SELECT generation, batch FROM persistent_batches") == [(0, 0), (0, 1), (1, 0)]


def test_windowed_results_are_keyed_by_key_and_window_start(database):
    sink = database.sink("averages", value_column="average")
    first = windows([("a", 0, 10, 1.5), ("a", 10, 20, 2.0), ("b", 0, 10, 3.25)])
    sink.write_frame(first, BatchId(0, 0), windowed=True)
    sink.write_frame(windows([("a", 10, 20, 9.0)]), BatchId(0, 0), windowed=True)  # replay: ignored
    sink.write_frame(windows([("a", 10, 20, 2.5), ("b", 10, 20, 4.0)]), BatchId(0, 1), windowed=True)
    assert database.query("SELECT key, window_start, window_end, average FROM averages") == [
        ("a", 0, 10, 1.5),
        ("a", 10, 20, 2.5),
        ("b", 0, 10, 3.25),
        ("b", 10, 20, 4.0),
    ]


def test_a_failure_mid_transaction_leaves_nothing_half_written(database):
    sink = database.sink()
    sink.write_frame(counts({"a": 1}), BatchId(0, 0), windowed=False)
    # The first rows are written inside the transaction; the third cannot be sent.
    broken = pd.DataFrame({"key": ["a", "b", "c"], "value": [10, 20, object()]})
    with pytest.raises(Exception, match="object"):
        sink.write_frame(broken, BatchId(0, 1), windowed=False)
    assert database.query("SELECT key, value FROM results") == [("a", 1)]
    assert database.query("SELECT batch FROM persistent_batches") == [(0,)]
    # No marker was left behind: the batch's retry writes it.
    sink.write_frame(counts({"a": 10, "b": 20, "c": 30}), BatchId(0, 1), windowed=False)
    assert database.query("SELECT key, value FROM results") == [("a", 10), ("b", 20), ("c", 30)]


def test_a_value_the_server_rejects_rolls_back_the_whole_batch(postgres_url):
    database = Database("postgres", postgres_url)
    sink = database.sink()
    sink.write_frame(counts({"a": 1}), BatchId(0, 0), windowed=False)
    # The table's value column is BIGINT: the server refuses the third row.
    rejected = pd.DataFrame({"key": ["a", "b", "c"], "value": ["10", "20", "thirty"]})
    import psycopg

    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        sink.write_frame(rejected, BatchId(0, 1), windowed=False)
    assert database.query("SELECT key, value FROM results") == [("a", 1)]
    assert database.query("SELECT batch FROM persistent_batches") == [(0,)]


def test_concurrent_writers_of_one_batch_write_it_once(database):
    database.sink().write_frame(counts({}), BatchId(0, 0), windowed=False)  # an empty batch: only its marker
    frames = [counts({f"k{i}": writer for i in range(200)}) for writer in (1, 2)]
    errors = []

    def write(frame):
        try:
            database.sink().write_frame(frame, BatchId(0, 1), windowed=False)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(frame,)) for frame in frames]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    values = {value for _, value in database.query("SELECT key, value FROM results")}
    assert len(database.query("SELECT key FROM results")) == 200
    assert values in ({1}, {2})  # one writer's whole batch, never a mix
    assert database.query("SELECT batch FROM persistent_batches") == [(0,), (1,)]


def test_sinks_sharing_a_database_keep_their_own_markers(database):
    database.sink("first").write_frame(counts({"a": 1}), BatchId(0, 0), windowed=False)
    database.sink("second").write_frame(counts({"b": 2}), BatchId(0, 0), windowed=False)
    assert database.query("SELECT key, value FROM first") == [("a", 1)]
    assert database.query("SELECT key, value FROM second") == [("b", 2)]


def test_integer_keys_and_float_values_keep_their_types(database):
    sink = database.sink()
    frame = pd.DataFrame({"key": [3, 1], "value": [0.5, 2.25]})
    sink.write_frame(frame, BatchId(0, 0), windowed=False)
    assert database.query("SELECT key, value FROM results") == [(1, 2.25), (3, 0.5)]


@pytest.mark.parametrize("name", ["drop table", "x;y", "1abc"])
def test_invalid_table_or_column_names_are_refused(name):
    with pytest.raises(ConfigError, match="PostgreSQL sink: .* not a valid table or column name"):
        PostgresSink("postgresql://localhost/db", table=name)
    with pytest.raises(ConfigError, match="PostgreSQL sink"):
        PostgresSink("postgresql://localhost/db", value_column=name)


def test_sink_from_uri_builds_a_postgres_sink():
    sink = sink_from_uri("postgresql://user@db.example:5432/jobs", table="counts", key_column="word")
    assert isinstance(sink, PostgresSink)
    assert (sink.database, sink.table, sink.key_column) == ("postgresql://user@db.example:5432/jobs", "counts", "word")
    assert isinstance(sink_from_uri("postgres://db/jobs"), PostgresSink)


def test_the_last_row_of_a_key_in_a_batch_wins(database):
    sink = database.sink()
    sink.write_frame(pd.DataFrame({"key": ["a", "b", "a"], "value": [1, 2, 3]}), BatchId(0, 0), windowed=False)
    assert database.query("SELECT key, value FROM results") == [("a", 3), ("b", 2)]


def test_a_fresh_start_into_a_table_of_an_earlier_run_is_refused(database):
    database.sink().check_fresh_start(None)  # nothing written yet: fine
    database.sink().write_frame(counts({"a": 1}), BatchId(0, 0), windowed=False)
    with pytest.raises(RestartRefusedError, match="table results holds results of an earlier run"):
        database.sink().check_fresh_start(None)
    database.sink("other").check_fresh_start(None)  # another table of the same database is free
    assert database.query("SELECT key, value FROM results") == [("a", 1)]


def test_the_newest_generation_is_read_from_the_tables_markers(database):
    assert database.sink().newest_generation(None) is None
    for generation, batch in [(0, 0), (0, 1), (2, 0)]:
        database.sink().write_frame(counts({"a": 1}), BatchId(generation, batch), windowed=False)
    database.sink("other").write_frame(counts({"a": 1}), BatchId(5, 0), windowed=False)
    assert database.sink().newest_generation(None) == 2


def test_appended_batches_add_rows_and_a_replay_adds_them_again(database):
    sink = database.sink("counts", key_column="word", value_column="count")
    sink.append_frame(counts({"a": 1, "b": 2}), BatchId(0, 0), windowed=False)
    sink.append_frame(counts({"a": 3}), BatchId(0, 1), windowed=False)
    sink.append_frame(counts({"a": 3}), BatchId(0, 1), windowed=False)  # a replay: no marker stops it
    sink.append_frame(counts({}), BatchId(0, 2), windowed=False)
    assert database.query("SELECT word, count, generation, batch FROM counts") == [
        ("a", 1, 0, 0), ("a", 3, 0, 1), ("a", 3, 0, 1), ("b", 2, 0, 0),
    ]
    assert database.query("SELECT word, SUM(count) FROM counts GROUP BY word") == [("a", 7), ("b", 2)]


def test_appended_windows_keep_their_bounds(database):
    sink = database.sink("averages", value_column="average")
    sink.append_frame(windows([("a", 0, 10, 1.5), ("b", 0, 10, 3.25)]), BatchId(2, 7), windowed=True)
    assert database.query("SELECT key, window_start, window_end, average, generation, batch FROM averages") == [
        ("a", 0, 10, 1.5, 2, 7), ("b", 0, 10, 3.25, 2, 7),
    ]
