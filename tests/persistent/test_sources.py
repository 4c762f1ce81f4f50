"""The sources' readers, driven directly as Spark's driver and executors would (no JVM)."""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, ReadMaxRows

from persistent.badrecords import BadRecord
from persistent.sources import _FILES_COLUMNS, FILE_SPAN_MS, FilesSource, GeneratorSource, _FilesReader, _GeneratorReader


def rows(reader, start, end):
    out = []
    for partition in reader.partitions(start, end):
        for item in reader.read(partition):
            out.extend(item.to_pylist() if isinstance(item, pa.RecordBatch) else [dict(zip(_FILES_COLUMNS, item))])
    return out


def bad_records(rows_read):
    """``(position, reason)`` of the rows marked bad, with the path shortened to its name."""
    marked = [BadRecord.from_json(r["bad_record"]) for r in rows_read if r["bad_record"] is not None]
    return [(os.path.basename(b.position), b.record, b.reason) for b in marked]


def test_generator_messages_follow_the_sequence_and_batches_are_bounded():
    reader = _GeneratorReader(GeneratorSource(keys=3, total=10, step_ms=5, max_rows_per_batch=4).options(0))
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"index": 4}
    assert rows(reader, start, end) == [{"key": f"k{i % 3}", "timestamp": (i + 1) * 5, "value": i} for i in range(4)]
    assert reader.latestOffset({"index": 8}, ReadMaxRows(4)) == {"index": 10}


def test_generator_rewinds_to_the_first_message_at_or_after_the_start():
    reader = _GeneratorReader(GeneratorSource(keys=2, total=10, step_ms=10).options(35))
    start = reader.initialOffset()
    first = rows(reader, start, reader.latestOffset(start, ReadAllAvailable()))[0]
    assert first == {"key": "k1", "timestamp": 40, "value": 3}


def test_generator_available_now_stops_at_what_was_there():
    reader = _GeneratorReader(GeneratorSource(keys=2, total=7).options(0))
    reader.prepareForTriggerAvailableNow()
    assert reader.latestOffset({"index": 0}, ReadAllAvailable()) == {"index": 7}


def files_reader(directory, file_format, start_ms=0, **kwargs):
    return _FilesReader(FilesSource(str(directory), file_format, **kwargs).options(start_ms))


def test_text_lines_get_times_from_file_order_and_line_number(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("three\n")
    reader = files_reader(tmp_path, "text", max_files_per_batch=1)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"files": 1}
    assert [(r[1], r[2]) for r in reader.read(reader.partitions(start, end)[0])] == [(1, "one"), (2, "two")]
    second = reader.partitions(end, reader.latestOffset(end, ReadMaxFiles(1)))[0]
    assert [(r[1], r[2]) for r in reader.read(second)] == [(FILE_SPAN_MS + 1, "three")]


def test_text_start_skips_whole_files_before_it(tmp_path):
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text("x\n")
    assert files_reader(tmp_path, "text", start_ms=2 * FILE_SPAN_MS + 1).initialOffset() == {"files": 2}


def test_jsonl_values_are_whole_lines(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"key": "a", "timestamp": 7, "x": 1}\n\n{"key": 5, "timestamp": 1e3}\n')
    out = rows(files_reader(tmp_path, "jsonl"), {"files": 0}, {"files": 1})
    assert out == [
        {"key": "a", "timestamp": 7, "value": '{"key": "a", "timestamp": 7, "x": 1}', "bad_record": None},
        {"key": "5", "timestamp": 1000, "value": '{"key": 5, "timestamp": 1e3}', "bad_record": None},
    ]


def test_malformed_json_lines_are_marked_with_file_line_and_reason_and_reading_goes_on(tmp_path):
    lines = [
        b'{"key": "a", "timestamp": 1}',
        b'{"key": "b", "timestamp": "late"}',
        b"not json",
        b"[1, 2]",
        b'{"timestamp": 3}',
        b'{"key": null, "timestamp": 3}',
        b'{"key": "c", "timestamp": 7.5}',
        b'{"key": "c", "timestamp": true}',
        b'{"key": "\xff", "timestamp": 1}',
        b'{"key": "d", "timestamp": 4}',
    ]
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = rows(files_reader(tmp_path, "jsonl"), {"files": 0}, {"files": 1})
    assert [(r["key"], r["timestamp"]) for r in out if r["bad_record"] is None] == [("a", 1), ("d", 4)]
    assert all(r["key"] is r["timestamp"] is r["value"] is None for r in out if r["bad_record"] is not None)
    assert bad_records(out) == [
        ("a.jsonl line 2", '{"key": "b", "timestamp": "late"}',
         "field 'timestamp' is not an integer of milliseconds ('late')"),
        ("a.jsonl line 3", "not json", "not JSON (Expecting value: line 1 column 1 (char 0))"),
        ("a.jsonl line 4", "[1, 2]", "not a JSON object"),
        ("a.jsonl line 5", '{"timestamp": 3}', "no field 'key'"),
        ("a.jsonl line 6", '{"key": null, "timestamp": 3}', "field 'key' is null"),
        ("a.jsonl line 7", '{"key": "c", "timestamp": 7.5}',
         "field 'timestamp' is not an integer of milliseconds (7.5)"),
        ("a.jsonl line 8", '{"key": "c", "timestamp": true}',
         "field 'timestamp' is not an integer of milliseconds (True)"),
        ("a.jsonl line 9", '{"key": "\ufffd", "timestamp": 1}', "not valid UTF-8 (from character 10)"),
    ]


def test_every_text_line_is_a_message_even_one_that_is_not_utf8(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\ntw\xc3o\nthree\n")
    reader = files_reader(tmp_path, "text")
    lines = list(reader.read(reader.partitions({"files": 0}, {"files": 1})[0]))
    assert [(r[1], r[2]) for r in lines] == [(1, "one"), (2, "tw\ufffdo"), (3, "three")]


def test_parquet_rows_carry_key_time_and_the_record_as_json(tmp_path):
    frame = pd.DataFrame({"user": ["a", "b", "a"], "at": pd.to_datetime([1, 2, 3], unit="ms"), "n": [1.5, 2.0, 3.0]})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "part-0.parquet", row_group_size=2)
    reader = files_reader(tmp_path, "parquet", key_field="user", timestamp_field="at")
    out = rows(reader, {"files": 0}, {"files": 1})
    assert [(r["key"], r["timestamp"]) for r in out] == [("a", 1), ("b", 2), ("a", 3)]
    assert [json.loads(r["value"])["n"] for r in out] == [1.5, 2.0, 3.0]


def test_parquet_rows_with_null_key_or_time_are_marked_with_their_row(tmp_path):
    schema = pa.schema([("key", pa.string()), ("t", pa.int64())])
    table = pa.table({"key": ["a", None, "c", "d"], "t": [1, 2, None, 4]}, schema=schema)
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=2)
    out = rows(files_reader(tmp_path, "parquet", timestamp_field="t"), {"files": 0}, {"files": 1})
    assert [(r["key"], r["timestamp"]) for r in out if r["bad_record"] is None] == [("a", 1), ("d", 4)]
    assert bad_records(out) == [
        ("a.parquet row 1", '{"key":null,"t":2}', "column 'key' is null"),
        ("a.parquet row 2", '{"key":"c","t":null}', "column 't' is null"),
    ]


def test_every_row_of_a_parquet_file_without_the_time_column_is_marked(tmp_path):
    pq.write_table(pa.table({"key": ["a", "b"], "t": [1, 2]}), tmp_path / "a.parquet")
    out = rows(files_reader(tmp_path, "parquet"), {"files": 0}, {"files": 1})
    reason = "no column 'timestamp' (columns: key, t)"
    assert bad_records(out) == [("a.parquet row 0", '{"key":"a","t":1}', reason),
                                ("a.parquet row 1", '{"key":"b","t":2}', reason)]


def test_a_parquet_time_column_of_another_type_is_named(tmp_path):
    pq.write_table(pa.table({"key": ["a"], "timestamp": ["noon"]}), tmp_path / "a.parquet")
    out = rows(files_reader(tmp_path, "parquet"), {"files": 0}, {"files": 1})
    assert bad_records(out) == [
        ("a.parquet row 0", '{"key":"a","timestamp":"noon"}',
         "column 'timestamp' is string, not an integer (ms) or timestamp")
    ]


def test_files_source_rejects_unknown_formats():
    with pytest.raises(ValueError, match="'text', 'jsonl' or 'parquet'"):
        FilesSource("in", "csv")


@pytest.mark.parametrize("start_ms", [0, 35])
def test_generator_backlog_is_what_an_available_now_run_reads(start_ms):
    source = GeneratorSource(keys=2, total=10, step_ms=10)
    reader = _GeneratorReader(source.options(start_ms))
    reader.prepareForTriggerAvailableNow()
    begin = reader.initialOffset()
    backlog = source.backlog(start_ms)
    assert (backlog.begin, backlog.end, backlog.unit) == (begin["index"], 10, "messages")
    assert backlog.position(json.dumps(reader.latestOffset(begin, ReadAllAvailable()))) == backlog.end


def test_an_unbounded_or_rate_limited_generator_has_no_backlog():
    assert GeneratorSource(keys=2).backlog() is None
    assert GeneratorSource(keys=2, total=10, rows_per_second=5).backlog() is None


def test_files_backlog_is_what_an_available_now_run_reads(tmp_path):
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text("x\n")
    (tmp_path / "_SUCCESS").write_text("")
    source = FilesSource(str(tmp_path), "text")
    start_ms = FILE_SPAN_MS + 1
    reader = _FilesReader(source.options(start_ms))
    reader.prepareForTriggerAvailableNow()
    begin = reader.initialOffset()
    backlog = source.backlog(start_ms)
    assert (backlog.begin, backlog.end, backlog.unit) == (begin["files"], 3, "files") == (1, 3, "files")
    assert backlog.position(json.dumps(reader.latestOffset(begin, ReadAllAvailable()))) == backlog.end


def test_a_missing_input_directory_has_no_backlog_and_its_reader_names_it(tmp_path):
    source = FilesSource(str(tmp_path / "nothing"), "jsonl")
    assert source.backlog() is None
    with pytest.raises(FileNotFoundError, match=f"input directory {tmp_path / 'nothing'} does not exist"):
        _FilesReader(source.options(0)).prepareForTriggerAvailableNow()
