"""Word count on Spark: exact counts, and both recovery paths change nothing."""

from __future__ import annotations

import collections
import re
import shutil
import sqlite3
from dataclasses import replace

import pytest

from persistent.runtime.recovery import RecoveryPath
from persistent.sources.files import FILE_SPAN_MS
from persistent.storage.clock_store import ClockStore
from persistent.storage.files_log import InputFileChangedError
from persistent.storage.fs import LocalFileSystem

pytestmark = pytest.mark.spark

LINES = [
    # Words are Unicode words, as Python's \w has them: not split at accents or in other scripts.
    ["the quick brown fox", "jumps over the lazy dog", "The End", "Café naïve Straße, café!",
     "Привет мир — привет", "ελληνικά λέξεις", "日本語 テキスト 日本語", "don't stop"],
    ["a stateful task keeps its state as a monoid", "the monoid is associative"],
    ["every message updates the state exactly once", "once and only once"],
    ["the clock names durable checkpoints", "", "the end"],
]


def write_corpus(directory, files):
    directory.mkdir(exist_ok=True)
    for number, lines in files:
        (directory / f"{number:03d}.txt").write_text("\n".join(lines) + "\n")


def expected_counts(files):
    counts = collections.Counter()
    for lines in files:
        for line in lines:
            counts.update(w for w in re.split(r"[^\w']+", line.lower()) if w)
    return dict(counts)


def run(spark, tmp_path, *options):
    import wordcount

    args = wordcount.parser().parse_args(
        ["--input", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"),
         "--output", f"sqlite://{tmp_path / 'out.db'}", "--available-now", "--key-groups", "8",
         "--files-per-batch", "1", *options]
    )
    job = wordcount.build_job(args)
    job = replace(job, on_progress=None)
    return job.run(spark)


def restart_from_clock(spark, tmp_path, new_file):
    """Path B: Spark's checkpoint is lost, and ``new_file`` arrives meanwhile."""
    shutil.rmtree(tmp_path / "ck" / "spark")
    write_corpus(tmp_path / "in", [new_file])
    restarted = run(spark, tmp_path)
    assert restarted.recovery.path is RecoveryPath.FROM_CLOCK
    return restarted


def sink_counts(tmp_path):
    with sqlite3.connect(tmp_path / "out.db") as db:
        return dict(db.execute("SELECT word, count FROM wordcount").fetchall())


def clock(tmp_path):
    return ClockStore(LocalFileSystem(), str(tmp_path / "ck" / "clock")).read()


def test_counts_equal_an_independent_count_and_both_restart_paths_change_nothing(spark, tmp_path, capsys):
    write_corpus(tmp_path / "in", enumerate(LINES[:3]))
    first = run(spark, tmp_path)
    assert "] 3/3 files 100%" in capsys.readouterr().err
    assert first.recovery.path is RecoveryPath.FRESH
    assert sink_counts(tmp_path) == expected_counts(LINES[:3])
    record = clock(tmp_path)
    assert record is not None and record.clock_ms == min(record.task_clocks.values())

    # Path A: the same Spark checkpoint, nothing new to read: no count changes.
    again = run(spark, tmp_path)
    assert again.recovery.path is RecoveryPath.SAME_CHECKPOINT
    assert sink_counts(tmp_path) == expected_counts(LINES[:3])

    # Path B: Spark's checkpoint is lost; a new file arrives meanwhile.
    restarted = restart_from_clock(spark, tmp_path, new_file=(3, LINES[3]))
    # The bar counts from the file the clock rewound to, to the new one.
    first_file = (restarted.recovery.floor_ms - 1) // FILE_SPAN_MS
    assert f"] {4 - first_file}/{4 - first_file} files 100%" in capsys.readouterr().err
    assert restarted.recovery.floor_ms == record.clock_ms > 0
    assert sink_counts(tmp_path) == expected_counts(LINES)
    after = clock(tmp_path)
    assert after.clock_ms >= record.clock_ms
    assert after.clock_ms == min(after.task_clocks.values())


def test_deleting_a_read_file_and_adding_another_counts_every_word_once(spark, tmp_path):
    write_corpus(tmp_path / "in", enumerate(LINES[:2]))
    run(spark, tmp_path)
    (tmp_path / "in" / "000.txt").unlink()  # read already
    write_corpus(tmp_path / "in", [(2, LINES[2])])
    again = run(spark, tmp_path)
    assert again.recovery.path is RecoveryPath.SAME_CHECKPOINT
    assert sink_counts(tmp_path) == expected_counts(LINES[:3])

    # Path B rereads from the clock, which lies in the newest file read: the deleted
    # file's absence moves no time.
    restart_from_clock(spark, tmp_path, new_file=(3, LINES[3]))
    assert sink_counts(tmp_path) == expected_counts(LINES)


def test_a_read_file_that_grows_is_refused_before_the_query_starts_naming_it(spark, tmp_path):
    write_corpus(tmp_path / "in", enumerate(LINES[:2]))
    run(spark, tmp_path)
    with open(tmp_path / "in" / "000.txt", "a") as grown:
        grown.write("the end again\n")
    with pytest.raises(InputFileChangedError, match=r"000\.txt changed after it was read as file 0") as refused:
        run(spark, tmp_path)
    assert refused.value.path == str(tmp_path / "in" / "000.txt")
    assert sink_counts(tmp_path) == expected_counts(LINES[:2])


def test_input_on_hdfs_is_counted_exactly_on_both_restart_paths(spark, tmp_path, hdfs_dir):
    def write_corpus_on_hdfs(files):  # written here, then copied up by a client of the test's own
        write_corpus(tmp_path / "corpus", files)
        for number, _ in files:
            hdfs_dir.write_bytes(f"in/{number:03d}.txt", (tmp_path / "corpus" / f"{number:03d}.txt").read_bytes())

    on_hdfs = ("--input", f"{hdfs_dir.uri}/in", "--webhdfs-address", hdfs_dir.http)
    write_corpus_on_hdfs(list(enumerate(LINES[:2])))
    run(spark, tmp_path, *on_hdfs)
    assert sink_counts(tmp_path) == expected_counts(LINES[:2])

    write_corpus_on_hdfs([(2, LINES[2])])  # path A reads on from Spark's checkpoint
    assert run(spark, tmp_path, *on_hdfs).recovery.path is RecoveryPath.SAME_CHECKPOINT
    assert sink_counts(tmp_path) == expected_counts(LINES[:3])

    shutil.rmtree(tmp_path / "ck" / "spark")  # path B rereads from the clock
    write_corpus_on_hdfs([(3, LINES[3])])
    assert run(spark, tmp_path, *on_hdfs).recovery.path is RecoveryPath.FROM_CLOCK
    assert sink_counts(tmp_path) == expected_counts(LINES)
