"""Results that are not numbers reach the sinks as JSON text: a ``TopK`` task's frequent
words, in SQLite, in PostgreSQL (where the text casts to ``jsonb``) and in Parquet (a
string column)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from monoids import TopK
from persistent import GeneratorSource, Job, PersistentTask, sink_from_uri
from state import NonWindowState

pytestmark = pytest.mark.spark

KEYS, TOTAL = 3, 300
#: Words that JSON must escape, most frequent first: message ``i`` takes the word of
#: ``i % 10`` (4, 3, 2 and 1 of every 10), and every key gets each ``i % 10`` equally often.
WORDS = ["naïve", 'say "hi"', "back\\slash", "tab\there"]
WORD_OF = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3]
TOP = TopK(lg_max_k=4)  # 12 counters: the 4 words are counted exactly


class FrequentWords(PersistentTask):
    def persistent_state(self):
        return NonWindowState(TOP)

    def process_batch(self, messages):
        return TOP.prepare_column([WORDS[WORD_OF[i % 10]] for i in messages["value"].tolist()])


def stored_sqlite(uri: str) -> dict[str, str]:
    with sqlite3.connect(uri.removeprefix("sqlite://")) as db:
        return dict(db.execute("SELECT key, words FROM top_words").fetchall())


def stored_postgres(uri: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(uri) as db:
        texts = dict(db.execute("SELECT key, words FROM top_words").fetchall())
        # jsonb takes the text as it is; psycopg hands the parsed value back.
        parsed = dict(db.execute("SELECT key, words::jsonb FROM top_words").fetchall())
    assert parsed == {key: json.loads(text) for key, text in texts.items()}
    return texts


def stored_parquet(uri: str) -> dict[str, str]:
    from persistent.sinks.parquet import ParquetSink

    final = ParquetSink(uri, value_column="words").read()
    assert str(final["words"].dtype) in ("object", "string")
    return dict(zip(final["key"], final["words"]))


@pytest.mark.parametrize("database", ["sqlite", "postgres", "parquet"])
def test_top_k_results_are_stored_as_json_arrays_of_the_frequent_words(spark, tmp_path, request, database):
    uri = {"sqlite": f"sqlite://{tmp_path / 'out.db'}", "parquet": str(tmp_path / "out")}.get(database) or \
        request.getfixturevalue("postgres_url")
    job = Job(
        task=FrequentWords(),
        source=GeneratorSource(keys=KEYS, total=TOTAL, max_rows_per_batch=100),
        sink=sink_from_uri(uri, table="top_words", value_column="words"),
        checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=50,
        key_groups=2,
    )
    job.run(spark)
    stored = {"sqlite": stored_sqlite, "postgres": stored_postgres, "parquet": stored_parquet}[database](uri)
    assert {key: json.loads(text) for key, text in stored.items()} == {f"k{k}": WORDS for k in range(KEYS)}
    assert set(stored.values()) == {json.dumps(WORDS, ensure_ascii=False, separators=(",", ":"))}
