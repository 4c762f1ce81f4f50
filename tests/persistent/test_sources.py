"""The sources' readers, driven directly as Spark's driver and executors would (no JVM)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, ReadMaxRows

from persistent.sources import FILE_SPAN_MS, FilesSource, GeneratorSource, _FilesReader, _GeneratorReader


def rows(reader, start, end):
    out = []
    for partition in reader.partitions(start, end):
        for item in reader.read(partition):
            out.extend(item.to_pylist() if isinstance(item, pa.RecordBatch) else [dict(zip(["key", "timestamp", "value"], item))])
    return out


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


def test_jsonl_values_are_whole_lines_and_bad_times_name_the_line(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"key": "a", "timestamp": 7, "x": 1}\n\n{"key": "b", "timestamp": "late"}\n')
    reader = files_reader(tmp_path, "jsonl")
    messages = reader.read(reader.partitions({"files": 0}, {"files": 1})[0])
    assert next(messages) == ("a", 7, '{"key": "a", "timestamp": 7, "x": 1}')
    with pytest.raises(ValueError, match=r"a\.jsonl line 3: no integer field 'timestamp'"):
        next(messages)


def test_parquet_rows_carry_key_time_and_the_record_as_json(tmp_path):
    frame = pd.DataFrame({"user": ["a", "b", "a"], "at": pd.to_datetime([1, 2, 3], unit="ms"), "n": [1.5, 2.0, 3.0]})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "part-0.parquet", row_group_size=2)
    reader = files_reader(tmp_path, "parquet", key_field="user", timestamp_field="at")
    out = rows(reader, {"files": 0}, {"files": 1})
    assert [(r["key"], r["timestamp"]) for r in out] == [("a", 1), ("b", 2), ("a", 3)]
    assert [json.loads(r["value"])["n"] for r in out] == [1.5, 2.0, 3.0]


def test_parquet_without_the_time_column_or_with_nulls_is_named(tmp_path):
    pq.write_table(pa.table({"key": ["a"], "t": [None]}, schema=pa.schema([("key", pa.string()), ("t", pa.int64())])),
                   tmp_path / "a.parquet")
    with pytest.raises(ValueError, match=r"a\.parquet has no column 'timestamp' \(columns: key, t\)"):
        rows(files_reader(tmp_path, "parquet"), {"files": 0}, {"files": 1})
    with pytest.raises(ValueError, match=r"a\.parquet row 0: column 't' is null"):
        rows(files_reader(tmp_path, "parquet", timestamp_field="t"), {"files": 0}, {"files": 1})


def test_files_source_rejects_unknown_formats():
    with pytest.raises(ValueError, match="'text', 'jsonl' or 'parquet'"):
        FilesSource("in", "csv")
