"""The sources' readers, driven directly as Spark's driver and executors would (no JVM)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles, ReadMaxRows

from persistent.core.badrecords import BadRecord
from persistent.core.errors import ConfigError, RestartRefusedError
from persistent.sources.bounds import AVAILABLE_NOW
from persistent.sources.files import _FILES_COLUMNS, FILE_SPAN_MS, FileFormat, FilesSource, _FilesReader
from persistent.sources.generator import MOST_FILES, GeneratorSource, _GeneratorReader, _Range
from persistent.storage.files_log import FilesLog, InputFileChangedError
from persistent.storage.filesystems import JobStorage
from persistent.storage.fs import TEMP_PREFIX, FileStatus, LocalFileSystem, local_path
from persistent.storage.job_directory import JobDirectory
from state.errors import CorruptCheckpointError


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


@pytest.mark.parametrize(("source", "schema", "reader"), [
    (GeneratorSource(keys=2, total=7), "key string, timestamp bigint, value bigint", _GeneratorReader),
    (FilesSource("in", "text"), "key string, timestamp bigint, value string", _FilesReader),
    (FilesSource("in", "jsonl"), "key string, timestamp bigint, value string, bad_record string", _FilesReader),
], ids=["generator", "text files", "json lines"])
def test_a_source_builds_the_python_data_source_that_reads_it(tmp_path, source, schema, reader):
    data_source = source.data_source()
    assert data_source.name() == source.format
    built = data_source(source.options(0) | {"directory": str(tmp_path)})
    assert built.schema() == schema
    assert type(built.streamReader(schema)) is reader


def files_reader(directory, file_format, start_ms=0, job=None, **kwargs):
    """The reader Spark makes on the driver; with ``job``, the files log is kept there."""
    options = FilesSource(str(directory), file_format, **kwargs).options(start_ms)
    if job is not None:
        options |= {"job_directory": str(job), "webhdfs_address": ""}
    return _FilesReader(options)


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


def test_asked_without_a_start_a_reader_goes_on_from_the_range_spark_planned_last():
    # Spark 4.0 and 4.1 call latestOffset() alone (persistent.sources.bounds).
    options = GeneratorSource(keys=3, total=10, max_rows_per_batch=4).options(0)
    reader = _GeneratorReader(options)
    assert reader.latestOffset() == {"index": 4}
    assert reader.latestOffset() == {"index": 4}  # nothing planned yet: the same micro-batch
    assert rows(reader, {"index": 0}, {"index": 4})[-1]["value"] == 3
    assert reader.latestOffset() == {"index": 8}
    restarted = _GeneratorReader(options)  # told the newest logged end, as Spark 4.0 does on a restart
    assert restarted.partitions({"index": 8}, {"index": 8}) == [_Range(8, 8)]
    assert restarted.latestOffset() == {"index": 10}


@pytest.mark.parametrize("available_now, ends", [(True, [2, 3, 3]), (False, [2, 4, 4])])
def test_an_available_now_reader_without_sparks_trigger_stops_at_the_files_there_when_first_asked(
        tmp_path, available_now, ends):
    for name in "abc":
        (tmp_path / f"{name}.txt").write_text(f"{name}\n")
    options = FilesSource(str(tmp_path), "text", max_files_per_batch=2).options(0)
    reader = _FilesReader(options | ({AVAILABLE_NOW: "true"} if available_now else {}))
    seen = [reader.latestOffset()]
    (tmp_path / "d.txt").write_text("d\n")
    for _ in range(2):
        reader.partitions(reader.planned or reader.initialOffset(), {"files": seen[-1]["files"]})
        seen.append(reader.latestOffset())
    assert [end["files"] for end in seen] == ends


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


def test_files_source_takes_a_format_or_its_name():
    assert FilesSource("in", "jsonl").options(0)["file_format"] == FileFormat.JSONL.value
    assert FilesSource("in", FileFormat.PARQUET).options(0)["file_format"] == "parquet"
    assert FilesSource("in").file_format is FileFormat.TEXT
    assert FilesSource("in", "jsonl") == FilesSource("in", FileFormat.JSONL)


def test_files_source_rejects_unknown_formats_naming_the_choices():
    with pytest.raises(ConfigError, match="file_format") as refused:
        FilesSource("in", "csv")
    assert "'csv'" in str(refused.value) and all(repr(f.value) in str(refused.value) for f in FileFormat)


@pytest.mark.parametrize("start_ms", [0, 35])
def test_generator_backlog_is_what_an_available_now_run_reads(start_ms):
    source = GeneratorSource(keys=2, total=10, step_ms=10)
    reader = _GeneratorReader(source.options(start_ms))
    reader.prepareForTriggerAvailableNow()
    begin = reader.initialOffset()
    backlog = source.backlog(start_ms)
    assert (backlog.begin, backlog.end, backlog.unit) == (begin["index"], 10, "messages")
    assert backlog.position(json.dumps(reader.latestOffset(begin, ReadAllAvailable()))) == backlog.end


def test_a_bounded_generator_in_a_job_writes_its_micro_batches_as_files_oldest_first_before_its_query(tmp_path):
    source = GeneratorSource(keys=3, total=10, step_ms=5, max_rows_per_batch=4)
    job = JobStorage(str(tmp_path / "job"))
    generated = tmp_path / "job" / "generated"
    generated.mkdir(parents=True)
    (generated / f"{5:020d}.parquet").write_bytes(b"of an earlier start")
    assert source._write(12, job)  # from message 2, at 15 ms
    files = sorted(generated.glob("*.parquet"))
    assert [f.name for f in files] == [f"{2:020d}.parquet", f"{6:020d}.parquet"]
    assert [pq.read_table(f).to_pylist() for f in files] == [
        [{"key": f"k{i % 3}", "timestamp": (i + 1) * 5, "value": i} for i in batch] for batch in (range(2, 6),
                                                                                                 range(6, 10))]
    times = [f.stat().st_mtime_ns // 1_000_000 for f in files]
    assert times[0] < times[1]  # Spark's file source takes them by time of modification, in ms
    backlog = source.backlog(12, job)
    assert (backlog.begin, backlog.end, backlog.unit) == (-1, 1, "micro-batches")
    assert backlog.position('{"logOffset":1}') - backlog.begin == len(files)


class _CoarseClockFileSystem(LocalFileSystem):
    """A local file system whose times of modification step by 50 ms, as a kernel's
    coarse clock makes them."""

    STEP_NS = 50_000_000

    def write_atomic(self, path: str, data: bytes) -> None:
        super().write_atomic(path, data)
        now = time.time_ns() // self.STEP_NS * self.STEP_NS
        os.utime(local_path(path), ns=(now, now))


@dataclass(frozen=True)
class _CoarseClockJob:
    root: str

    def directory(self) -> JobDirectory:
        return JobDirectory(_CoarseClockFileSystem(), self.root)


def test_the_generators_files_are_modified_in_their_order_also_where_the_file_systems_clock_is_coarse(tmp_path):
    # Spark's file source takes files by their time of modification in ms: two of the
    # same time may come in either order, and the later messages make the earlier late.
    job = _CoarseClockJob(str(tmp_path / "job"))
    source = GeneratorSource(keys=3, total=12, max_rows_per_batch=2)
    assert source._write(0, job)
    (tmp_path / "job" / "spark" / "offsets").mkdir(parents=True)  # a restart on Spark's checkpoint
    assert replace(source, total=16)._write(0, job)
    files = sorted((tmp_path / "job" / "generated").glob("*.parquet"))
    times = [f.stat().st_mtime_ns // 1_000_000 for f in files]
    assert len(files) == 8 and times == sorted(set(times))


def test_a_restart_on_sparks_checkpoint_reads_the_generators_files_again_with_new_ones_for_a_higher_total(tmp_path):
    job = JobStorage(str(tmp_path / "job"))
    generated = tmp_path / "job" / "generated"
    source = GeneratorSource(keys=3, total=10, step_ms=5, max_rows_per_batch=4)
    source._write(12, job)  # messages 2-5 and 6-9
    files = {f.name: f.stat().st_mtime_ns for f in generated.glob("*.parquet")}
    (tmp_path / "job" / "spark" / "offsets").mkdir(parents=True)
    (tmp_path / "job" / "spark" / "offsets" / "0").write_text("v1\n{}\n{}\n")
    assert source._write(12, job)
    assert {f.name: f.stat().st_mtime_ns for f in generated.glob("*.parquet")} == files
    # More messages: new files after the ones read, as the Python data source would go on.
    # A start that wrote some of them and died before its record and its query left
    # files that go, and a temporary file that Spark's file source does not read.
    (generated / f"{10:020d}.parquet").write_bytes(b"of a higher total, cut short")
    (generated / f"{18:020d}.parquet").write_bytes(b"of a higher total, cut short")
    (generated / f".tmp-0-{14:020d}.parquet").write_bytes(b"a write a crash cut short")
    assert replace(source, total=15)._write(12, job)
    assert sorted(f.name for f in generated.glob("[0-9]*.parquet"))[2:] == [f"{10:020d}.parquet", f"{14:020d}.parquet"]
    assert [pq.read_table(generated / f"{low:020d}.parquet").column("value").to_pylist()
            for low in (10, 14)] == [[10, 11, 12, 13], [14]]
    assert replace(source, total=15).backlog(12, job).end == 3  # four files, logOffset 0 to 3
    for other, change in [(replace(source, total=12), "'total': 12"), (replace(source, keys=4, total=15), "'keys': 4"),
                          (source, "'first': 5")]:
        with pytest.raises(RestartRefusedError, match=f"the generator's messages in .*, not .*{change}.*a total may "
                                                      "only grow.*delete .*spark to restart from the clock"):
            other._write(12 if change != "'first': 5" else 30, job)
    # A Spark checkpoint of a query that read the generator's Python data source goes on with it.
    (generated / "_generator.json").unlink()
    assert not source._write(12, job)
    assert source.backlog(12, job).unit == "messages"


def test_a_generator_of_more_micro_batches_than_it_writes_as_files_is_read_by_its_python_data_source(tmp_path):
    job = JobStorage(str(tmp_path / "job"))
    source = GeneratorSource(keys=3, total=MOST_FILES * 4 + 1, max_rows_per_batch=4)
    assert not source._write(0, job)
    assert not (tmp_path / "job" / "generated").exists() and source.backlog(0, job).unit == "messages"
    assert replace(source, total=MOST_FILES * 4)._write(0, job)


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


# -- files that change after they were read -----------------------------------------
#
# Input in tmp_path/"in", the job directory (with the files log) in tmp_path/"job".


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "in").mkdir()
    return tmp_path / "in"


@pytest.fixture
def reader(tmp_path, inputs):
    """A files reader of the job in tmp_path/"job": every call is a new one, as after a restart."""
    return lambda file_format="text", start_ms=0: files_reader(inputs, file_format, start_ms, job=tmp_path / "job")

def write_lines(directory, name, *lines):
    (directory / name).write_text("".join(f"{line}\n" for line in lines))


def read_all(reader, start):
    """``(end offset, [(file name, time, line)])`` of reading everything after ``start``."""
    end = reader.latestOffset(start, ReadAllAvailable())
    return end, [(os.path.basename(r["key"]), r["timestamp"], r["value"]) for r in rows(reader, start, end)]


def test_deleting_a_read_file_neither_skips_a_new_file_nor_moves_later_times(inputs, reader):
    write_lines(inputs, "a.txt", "a1", "a2")
    write_lines(inputs, "b.txt", "b1")
    going_on = reader()
    read, _ = read_all(going_on, {"files": 0})
    (inputs / "a.txt").unlink()
    write_lines(inputs, "c.txt", "c1")
    # The same query going on, and one restarted from Spark's checkpoint, read the same.
    end, lines = read_all(going_on, read)
    assert lines == [("c.txt", 2 * FILE_SPAN_MS + 1, "c1")]
    restarted = reader()
    assert rows(restarted, read, end) == rows(going_on, read, end)
    restarted.prepareForTriggerAvailableNow()
    assert restarted.latestOffset(read, ReadMaxFiles(5)) == {"files": 3}


def test_a_new_file_sorting_before_read_files_is_read_after_them(inputs, reader):
    write_lines(inputs, "b.txt", "b1")
    write_lines(inputs, "c.txt", "c1")
    read, _ = read_all(reader(), {"files": 0})
    write_lines(inputs, "a.txt", "a1", "a2")
    end, lines = read_all(reader(), read)
    assert lines == [("a.txt", 2 * FILE_SPAN_MS + 1, "a1"), ("a.txt", 2 * FILE_SPAN_MS + 2, "a2")]
    assert read_all(reader(), end)[1] == []


def test_a_rewind_after_deleting_a_read_file_gives_every_line_its_first_time(inputs, reader):
    for name in "abc":
        write_lines(inputs, f"{name}.txt", f"{name}1")
    read_all(reader(), {"files": 0})
    (inputs / "a.txt").unlink()
    rewound = reader(start_ms=FILE_SPAN_MS + 1)  # path B, in b.txt
    assert read_all(rewound, rewound.initialOffset())[1] == [
        ("b.txt", FILE_SPAN_MS + 1, "b1"), ("c.txt", 2 * FILE_SPAN_MS + 1, "c1")
    ]


def test_jsonl_files_deleted_after_reading_are_not_read_again_and_new_ones_are(inputs, reader):
    for name, t in (("a", 1), ("b", 2)):
        (inputs / f"{name}.jsonl").write_text(f'{{"key": "{name}", "timestamp": {t}}}\n')
    read, _ = read_all(reader("jsonl"), {"files": 0})
    (inputs / "a.jsonl").unlink()
    (inputs / "c.jsonl").write_text('{"key": "c", "timestamp": 3}\n')
    assert read_all(reader("jsonl"), read)[1] == [("c", 3, '{"key": "c", "timestamp": 3}')]


@pytest.mark.parametrize("change", ["append", "rewrite", "touch", "replace"])
def test_a_read_file_that_changes_is_refused_naming_it(inputs, reader, change):
    write_lines(inputs, "a.txt", "one", "two")
    write_lines(inputs, "b.txt", "three")
    read, _ = read_all(reader(), {"files": 0})
    path = inputs / "a.txt"
    before = path.stat()
    if change == "append":
        with open(path, "a") as f:
            f.write("four\n")
    elif change == "rewrite":  # same size, new content
        path.write_text("ONE\nTWO\n")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000))
    elif change == "touch":
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 5_000_000))
    else:  # deleted, and a file of another size written under its name
        path.unlink()
        write_lines(inputs, "a.txt", "new")
    write_lines(inputs, "c.txt", "five")
    with pytest.raises(InputFileChangedError) as refused:
        reader().latestOffset(read, ReadAllAvailable())
    assert refused.value.path == str(path)
    assert "a.txt" in str(refused.value) and "new file" in str(refused.value)



def test_a_changed_file_is_named_with_its_size_and_utc_time_as_read_and_now(inputs, reader):
    write_lines(inputs, "a.txt", "one")
    os.utime(inputs / "a.txt", ns=(0, 1_700_000_000_000_000_000))
    read, _ = read_all(reader(), {"files": 0})
    os.utime(inputs / "a.txt", ns=(0, 1_700_000_000_005_000_000))
    with pytest.raises(InputFileChangedError, match=r"\(4 bytes, modified 2023-11-14T22:13:20.000\+00:00; now "
                                                    r"4 bytes, modified 2023-11-14T22:13:20.005\+00:00\)"):
        reader().latestOffset(read, ReadAllAvailable())


def test_files_whose_names_start_with_a_dot_or_an_underscore_are_not_input(inputs, reader):
    for name in (".a.txt", "_SUCCESS", "b.txt"):
        write_lines(inputs, name, name)
    assert read_all(reader(), {"files": 0})[1] == [("b.txt", 1, "b.txt")]


def files(*names: str, size: int = 1) -> list[FileStatus]:
    return [FileStatus(name, size, 1_000) for name in names]


def test_a_file_taken_again_is_rewritten_in_its_own_record_of_the_log(tmp_path):
    log = FilesLog("in", LocalFileSystem(), str(tmp_path / "input"))
    for taken in (files("a", "b"), files("c", "d", "e"), files("f")):  # records from files 0, 2 and 5
        log.take(taken)
    expected = files("a", "b", "c", "d", "e", "f")
    # The first of a record, one inside it, and the only one of the last record.
    for index, now in zip((2, 3, 5), files("c", "d", "f", size=2)):
        log.retake(index, now)
        expected[index] = now
        assert log.files == expected
        assert FilesLog("in", LocalFileSystem(), str(tmp_path / "input")).files == expected


def test_the_log_ignores_what_is_no_record_of_it_and_refuses_a_gap_between_records(tmp_path):
    fs, path = LocalFileSystem(), str(tmp_path / "input")
    log = FilesLog("in", fs, path)
    log.take(files("a", "b"))
    for other in (f"{TEMP_PREFIX}0000000002.json", "0000000002.json.partial", "12345-notes.json"):
        fs.write_atomic(fs.join(path, other), b"[")
    assert FilesLog("in", fs, path).files == files("a", "b")
    gap = fs.join(path, "0000000005.json")
    fs.write_atomic(gap, b'[["f", 1, 1000]]')
    with pytest.raises(CorruptCheckpointError, match="0000000005.json starts at file 5, but the records before it "
                                                     "hold 2 files") as raised:
        FilesLog("in", fs, path)
    assert raised.value.path == gap


def test_a_log_refuses_a_file_it_took_that_shows_another_size_naming_its_number(tmp_path):
    log = FilesLog("in")
    log.take(files("a", "b"))
    changed = {"b": files("b", size=2)[0]}
    with pytest.raises(InputFileChangedError, match="in/b changed after it was read as file 1 "):
        log.check(changed)
    with pytest.raises(InputFileChangedError, match="in/b changed after it was read as file 1 "):
        log.needed(0, 2, {"a": files("a")[0], **changed})


def spark_checkpoint(job, ends: list[int], committed: int):
    """Spark's checkpoint in ``job``: micro-batch ``n`` read files up to ``ends[n]`` (and
    the heartbeat source a beat), and the batches up to ``committed`` are committed."""
    spark = job / "spark"
    (spark / "offsets").mkdir(parents=True)
    (spark / "commits").mkdir()
    for batch, end in enumerate(ends):
        (spark / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"files":{end}}}\n{{"beat":{batch}}}')
        if batch <= committed:
            (spark / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_file_of_a_micro_batch_that_failed_on_a_bad_record_may_be_fixed_before_its_replay(tmp_path, inputs, reader):
    job = tmp_path / "job"
    for name in "ab":
        write_lines(inputs, f"{name}.txt", f"{name}1")
    read_all(reader(), {"files": 0})
    spark_checkpoint(job, ends=[1, 2], committed=0)  # micro-batch 1 read b.txt and failed
    directory = JobStorage(str(job)).directory()
    directory.record_key_groups(2)
    directory.record_failed_batch(generation=0, batch=1)
    write_lines(inputs, "b.txt", "b1 fixed")
    source = FilesSource(str(inputs), "text")
    source.check(None, JobStorage(str(job)))  # the replay of micro-batch 1 takes the fixed file
    assert rows(reader(), {"files": 1}, {"files": 2})[0]["value"] == "b1 fixed"

    write_lines(inputs, "a.txt", "a1 changed")  # micro-batch 0 is committed: its file is in the state
    with pytest.raises(InputFileChangedError, match="changed after it was read as file 0") as refused:
        source.check(None, JobStorage(str(job)))
    assert refused.value.path == str(inputs / "a.txt")


def test_a_file_of_an_uncommitted_micro_batch_that_did_not_fail_on_a_bad_record_is_refused(tmp_path, inputs, reader):
    # It may have reached the sink before the failure: its old content may be in the results.
    job = tmp_path / "job"
    for name in "ab":
        write_lines(inputs, f"{name}.txt", f"{name}1")
    read_all(reader(), {"files": 0})
    spark_checkpoint(job, ends=[1, 2], committed=0)
    JobStorage(str(job)).directory().record_key_groups(2)
    write_lines(inputs, "b.txt", "b1 fixed")
    with pytest.raises(InputFileChangedError, match="changed after it was read as file 1") as refused:
        FilesSource(str(inputs), "text").check(None, JobStorage(str(job)))
    assert refused.value.path == str(inputs / "b.txt")


def test_a_rewind_that_needs_a_deleted_file_is_refused_naming_it(inputs, reader):
    write_lines(inputs, "a.txt", "a1")
    write_lines(inputs, "b.txt", "b1")
    read_all(reader(), {"files": 0})
    (inputs / "b.txt").unlink()
    rewound = reader(start_ms=FILE_SPAN_MS + 1)  # path B, in b.txt
    with pytest.raises(InputFileChangedError) as refused:
        read_all(rewound, rewound.initialOffset())
    assert refused.value.path == str(inputs / "b.txt")
    assert "gone" in str(refused.value)


def test_files_backlog_counts_read_files_that_were_deleted(tmp_path, inputs, reader):
    write_lines(inputs, "a.txt", "a1")
    write_lines(inputs, "b.txt", "b1")
    read_all(reader(), {"files": 0})
    (inputs / "a.txt").unlink()
    write_lines(inputs, "c.txt", "c1")
    backlog = FilesSource(str(inputs), "text").backlog(FILE_SPAN_MS + 1, JobStorage(str(tmp_path / "job")))
    assert (backlog.begin, backlog.end) == (1, 3)


def test_a_job_directory_without_a_log_keeps_the_positions_of_the_sorted_listing(inputs, reader):
    for name in "abc":
        write_lines(inputs, f"{name}.txt", f"{name}1")
    # Spark's checkpoint says two files are read; the directory predates the log.
    end, lines = read_all(reader(), {"files": 2})
    assert (end, lines) == ({"files": 3}, [("c.txt", 2 * FILE_SPAN_MS + 1, "c1")])
    assert rows(reader(), {"files": 1}, {"files": 2})[0]["value"] == "b1"


def test_available_now_takes_only_the_files_there_when_it_began(inputs, reader):
    write_lines(inputs, "a.txt", "a1")
    bounded = reader()
    bounded.prepareForTriggerAvailableNow()
    write_lines(inputs, "b.txt", "b1")
    assert read_all(bounded, {"files": 0}) == ({"files": 1}, [("a.txt", 1, "a1")])
    assert read_all(reader(), {"files": 1})[1] == [("b.txt", FILE_SPAN_MS + 1, "b1")]


def test_a_damaged_log_record_is_refused_naming_it(tmp_path, inputs, reader):
    write_lines(inputs, "a.txt", "a1")
    read_all(reader(), {"files": 0})
    (record,) = (tmp_path / "job" / "input").iterdir()
    record.write_text("[[")
    with pytest.raises(CorruptCheckpointError, match=f"{record} is corrupt") as refused:
        read_all(reader(), {"files": 1})
    assert refused.value.path == str(record)


def test_check_before_a_run_refuses_what_the_reader_would(tmp_path, inputs, reader):
    job = JobStorage(str(tmp_path / "job"))
    for name in "ab":
        write_lines(inputs, f"{name}.txt", f"{name}1")
    read_all(reader(), {"files": 0})
    source = FilesSource(str(inputs), "text")
    (inputs / "a.txt").unlink()
    source.check(None, job)  # going on from Spark's checkpoint needs no read file
    source.check(FILE_SPAN_MS + 1, job)  # a reread from b.txt needs only b.txt
    with pytest.raises(InputFileChangedError, match="a.txt was read as file 0 and is needed again"):
        source.check(1, job)
    (inputs / "b.txt").write_text("b1 and more\n")
    with pytest.raises(InputFileChangedError, match="b.txt changed after it was read as file 1"):
        source.check(None, job)


# -- input on other file systems ----------------------------------------------------


def write_inputs(directory):
    """A text, a JSON-lines and a Parquet file in ``directory``."""
    write_lines(directory, "a.txt", "one", "two")
    write_lines(directory, "b.jsonl", json.dumps({"key": "k", "timestamp": 7}), "not json")
    pq.write_table(pa.table({"key": ["p", None], "timestamp": [9, 10]}), directory / "c.parquet")


def rows_of(reader, partition):
    return [r for item in reader.read(partition)
            for r in (item.to_pylist() if isinstance(item, pa.RecordBatch) else [dict(zip(_FILES_COLUMNS, item))])]


def read_as(directory, file_format, **kwargs):
    """``(name, time, value, bad reason)`` of the files of ``file_format`` read from ``directory``."""
    reader = files_reader(directory, file_format, **kwargs)
    end = reader.latestOffset({"files": 0}, ReadAllAvailable())
    read = [r for partition in reader.partitions({"files": 0}, end)
            if partition.paths[0].endswith(read_as.names[file_format]) for r in rows_of(reader, partition)]
    return [(r["key"] if file_format != "text" else os.path.basename(r["key"]), r["timestamp"], r["value"],
             r.get("bad_record") and BadRecord.from_json(r["bad_record"]).reason) for r in read]


read_as.names = {"text": "a.txt", "jsonl": "b.jsonl", "parquet": "c.parquet"}


@pytest.mark.parametrize("file_format", ["text", "jsonl", "parquet"])
def test_input_on_hdfs_reads_as_the_same_files_on_local_disk(tmp_path, hdfs_dir, file_format):
    write_inputs(tmp_path)
    for name in read_as.names.values():
        hdfs_dir.write_bytes(f"in/{name}", (tmp_path / name).read_bytes())
    on_hdfs = read_as(f"{hdfs_dir.uri}/in", file_format, webhdfs_address=hdfs_dir.http)
    assert on_hdfs == read_as(tmp_path, file_format) and len(on_hdfs) == 2


@pytest.mark.parametrize("file_format", ["text", "jsonl", "parquet"])
def test_input_on_s3_reads_as_the_same_files_on_local_disk(tmp_path, s3, file_format):
    import pyarrow.fs as pafs

    write_inputs(tmp_path)
    store, bucket = pafs.FileSystem.from_uri(s3)
    for name in read_as.names.values():
        with store.open_output_stream(f"{bucket}/in/{name}") as out:
            out.write((tmp_path / name).read_bytes())
    on_s3 = read_as(f"{s3}/in", file_format)
    assert on_s3 == read_as(tmp_path, file_format) and len(on_s3) == 2
