"""Bad input on Spark: malformed lines, unusable event times and values the monoid
refuses go to the dead-letter output with their position and reason, or fail the
query naming them; the good records are counted exactly and no state is lost."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from monoids import Sum
from persistent import BadRecords, ConsoleSink, FilesSource, Job, ParquetSink, PersistentTask, SQLiteSink
from state import NonWindowState

pytestmark = pytest.mark.spark

GOOD = [
    '{"key": "a", "timestamp": 1, "n": 1}',
    '{"key": "b", "timestamp": 2, "n": 2}',
]
BAD = [  # (line, reason)
    ("not json", "not JSON (Expecting value: line 1 column 1 (char 0))"),
    ('{"key": "a", "timestamp": "soon", "n": 5}', "field 'timestamp' is not an integer of milliseconds ('soon')"),
    ('{"key": "a", "timestamp": 3, "n": "x"}', "Sum(kind='int') takes int values, got 'x'"),
    ('{"key": "b", "timestamp": 4}', "FieldSum.process_batch raised KeyError: 'n'"),
    ('{"key": "a", "timestamp": 4000000000000, "n": 7}', "event time 4000000000000 ms is more than 0 ms after"),
    ('{"key": "c", "timestamp": -5, "n": 1}', "event time -5 ms is negative"),
]
LATER = ['{"key": "a", "timestamp": 10, "n": 10}', '{"key": "c", "timestamp": 11, "n": 3}']


class FieldSum(PersistentTask):
    """Sums the field ``n`` of each JSON record, as the monoid takes it."""

    def persistent_state(self):
        return NonWindowState(Sum())

    def process_batch(self, messages):
        values = np.empty(len(messages), dtype=object)
        values[:] = [json.loads(v)["n"] for v in messages["value"]]
        return values


def field_sum_job(inputs, tmp_path, bad_records, progress) -> Job:
    return Job(
        task=FieldSum(),
        source=FilesSource(str(inputs), "jsonl"),
        sink=SQLiteSink(str(tmp_path / "out.db"), table="sums"),
        checkpoint_dir=str(tmp_path / "ck"),
        checkpoint_interval_ms=5,
        key_groups=2,
        bad_records=bad_records,
        max_event_time_skew_ms=0,
        on_progress=progress.append,
    )


def sums(tmp_path) -> dict:
    with sqlite3.connect(tmp_path / "out.db") as db:
        return dict(db.execute("SELECT key, value FROM sums").fetchall())


def test_bad_records_go_to_dead_letters_with_position_and_reason(spark, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("\n".join(GOOD + [line for line, _ in BAD]) + "\n")
    (inputs / "b.jsonl").write_text("\n".join(LATER) + "\n")
    progress = []
    job = field_sum_job(inputs, tmp_path, BadRecords.DEAD_LETTER, progress)
    job.run(spark)

    assert sums(tmp_path) == {"a": 11, "b": 2, "c": 3}
    assert sum(p.rows for p in progress) == 4
    assert sum(p.dead_letters for p in progress) == len(BAD)
    # The far-future record neither moved the watermark nor closed anything early.
    assert max(p.watermark_ms for p in progress) <= 11

    letters = job.dead_letters.read().sort_values("record", ignore_index=True)
    assert set(letters["generation"]) == {0}
    by_record = {}
    for row in letters.itertuples():
        by_record[row.record] = (row.position, row.reason)
    source = str(inputs / "a.jsonl")
    assert by_record["not json"] == (f"{source} line 3", BAD[0][1])
    assert by_record[BAD[1][0]] == (f"{source} line 4", BAD[1][1])
    # Messages the source could read carry no position: the record is the message.
    message = '{"key":"a","timestamp":3,"value":' + json.dumps(BAD[2][0]) + "}"
    assert by_record[message] == (None, BAD[2][1])
    message = '{"key":"b","timestamp":4,"value":' + json.dumps(BAD[3][0]) + "}"
    assert by_record[message] == (None, BAD[3][1])
    future = [r for r in by_record if r.startswith('{"key":"a","timestamp":4000000000000')]
    assert len(future) == 1 and by_record[future[0]][1].startswith(BAD[4][1])
    assert by_record['{"key":"c","timestamp":-5,"value":' + json.dumps(BAD[5][0]) + "}"] == (None, BAD[5][1])
    assert len(letters) == len(BAD)


def committed(tmp_path) -> dict:
    """The checkpoints and the clock on disk, file by file."""
    root = tmp_path / "ck"
    return {str(f.relative_to(root)): f.read_bytes()
            for part in ("checkpoints", "clock") for f in sorted((root / part).rglob("*")) if f.is_file()}


def test_fail_mode_names_file_and_line_and_keeps_what_was_committed(spark, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("\n".join(GOOD) + "\n")
    (inputs / "a2.jsonl").write_text('{"key": "b", "timestamp": 8, "n": 0}\n')
    progress = []
    field_sum_job(inputs, tmp_path, BadRecords.FAIL, progress).run(spark)
    assert sums(tmp_path) == {"a": 1, "b": 2}
    before = committed(tmp_path)
    assert any(name.startswith("clock") for name in before)

    (inputs / "b.jsonl").write_text(LATER[0] + "\nnot json\n" + LATER[1] + "\n")
    with pytest.raises(Exception, match=r"bad record in micro-batch 0\.\d+ at .*b\.jsonl line 2: not JSON") as failure:
        field_sum_job(inputs, tmp_path, BadRecords.FAIL, progress).run(spark)
    assert "BadRecordError" in str(failure.value)
    # The driver read the record from the key group's failed task, and recorded the failed batch.
    failed = json.loads((tmp_path / "ck" / "failed-batch").read_text())
    assert failed["generation"] == 0 and failed["batch"] >= 1
    assert sums(tmp_path) == {"a": 1, "b": 2}
    # The clock and the checkpoints it names are as they were; the failed micro-batch's
    # other key groups may have written checkpoints that no clock names (its replay
    # writes them again).
    after = committed(tmp_path)
    assert {name: after[name] for name in before} == before
    assert all(name.startswith("checkpoints/") for name in set(after) - set(before))

    # Fix the line and run again: Spark replays the failed batch, nothing was lost.
    (inputs / "b.jsonl").write_text("\n".join(LATER) + "\n")
    field_sum_job(inputs, tmp_path, BadRecords.FAIL, progress).run(spark)
    assert sums(tmp_path) == {"a": 11, "b": 2, "c": 3}
    assert not (tmp_path / "ck" / "dead-letters").exists()


@pytest.mark.parametrize("sink", ["parquet", "console"])
def test_fail_mode_fails_before_the_sink_writes_whether_or_not_its_write_computes_the_batch(spark, tmp_path, capfd,
                                                                                            sink):
    # The Parquet sink's write computes the batch (Sink.reads_once); the console's reads
    # some rows only, so the batch is computed before it.
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("\n".join(GOOD + ["not json"]) + "\n")
    parquet = ParquetSink(str(tmp_path / "out"))
    chosen = parquet if sink == "parquet" else ConsoleSink()
    job = replace(field_sum_job(inputs, tmp_path, BadRecords.FAIL, []), sink=chosen)
    with pytest.raises(Exception, match=r"bad record in micro-batch 0\.0 at .*a\.jsonl line 3: not JSON"):
        job.run(spark)
    assert json.loads((tmp_path / "ck" / "failed-batch").read_text()) == {"generation": 0, "batch": 0}
    assert not list((tmp_path / "out").rglob("*.parquet")) and "-- batch" not in capfd.readouterr().out


def test_records_the_source_cannot_read_go_around_prepare(spark, tmp_path):
    from pyspark.sql import functions as F

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("\n".join(GOOD + ["{oops", LATER[0]]) + "\n")
    progress = []
    job = field_sum_job(inputs, tmp_path, BadRecords.DEAD_LETTER, progress)
    # prepare keeps only the field n, as a number: values reach the task as bigint.
    job = replace(job, task=PlainSum(), prepare=lambda rows: rows.select(
        "key", "timestamp", F.get_json_object("value", "$.n").cast("bigint").alias("value")
    ))
    job.run(spark)
    assert sums(tmp_path) == {"a": 11, "b": 2}
    letters = job.dead_letters.read()
    assert letters[["position", "record"]].values.tolist() == [[f"{inputs / 'a.jsonl'} line 3", "{oops"]]


class PlainSum(PersistentTask):
    def persistent_state(self):
        return NonWindowState(Sum())

    def process_batch(self, messages):
        return messages["value"].to_numpy()
