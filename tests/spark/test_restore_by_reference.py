"""State stays where the key groups run: restarts from the clock (path B) restore by
reference, crash or no crash, and no state reaches the driver.

- a path-B generation killed during its first micro-batch and continued on Spark's
  checkpoint (path A) restores every key group from its own checkpoint again: exact
  word counts and window averages;
- after path B, key groups that get no message still checkpoint (the generation's
  heartbeats), so the clock equals a clean run's, and the next restart restores them;
- a checkpoint written by a task attempt that dies with its executor is rewritten by
  the retry: one intact file, exact counts;
- the driver collects reports of numbers per key group, never bytes of state.
"""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import pytest
from crash_harness import Crasher
from test_crash import EXPECTED, assert_clock_names_durable_checkpoints, generated, sink_counts
from test_window_average import assert_windows_equal_pandas
from test_wordcount import expected_counts

from persistent.storage.faults import CrashPoint
from persistent.runtime.recovery import RecoveryPath
from persistent.storage.checkpoint_store import decode_record
from persistent.storage.clock_store import ClockStore
from persistent.storage.fs import TEMP_PREFIX, LocalFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

WORDS = [f"w{i:02d}" for i in range(30)]


def corpus_file(number: int) -> list[str]:
    """Lines of text file ``number``: five words each, a different mix per file; file 9 has every word."""
    if number == 9:
        return [" ".join(WORDS[i:i + 5]) for i in range(0, len(WORDS), 5)]
    return [" ".join(WORDS[(number * 7 + line * 3 + j) % len(WORDS)] for j in range(5)) for line in range(6)]


def write_files(directory, numbers) -> None:
    directory.mkdir(exist_ok=True)
    for number in numbers:
        (directory / f"{number:03d}.txt").write_text("\n".join(corpus_file(number)) + "\n")


def wordcount_sink(workdir) -> dict[str, int]:
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT word, count FROM wordcount").fetchall())


def test_wordcount_killed_in_the_first_micro_batch_after_path_b_restores_by_reference_again(tmp_path):
    write_files(tmp_path / "in", range(6))
    args = ["--input", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck"),
            "--output", f"sqlite://{tmp_path / 'out.db'}", "--available-now", "--key-groups", "4",
            "--files-per-batch", "2"]
    crasher = Crasher("wordcount", args, tmp_path)
    assert crasher.run(standby_next=True).returncode == 0

    shutil.rmtree(tmp_path / "ck" / "spark")
    write_files(tmp_path / "in", range(6, 9))
    killed = crasher.crash_at(CrashPoint.GROUP, 1)  # the path-B generation's first micro-batch
    assert "recovery path B" in killed.log, killed.log
    resumed = crasher.run(standby_next=True)
    assert resumed.returncode == 0 and "recovery path A" in resumed.log, resumed.log
    assert wordcount_sink(tmp_path) == expected_counts(corpus_file(n) for n in range(9))

    # New input touching every word: a state lost at the floor would show in every count.
    write_files(tmp_path / "in", [9])
    assert crasher.run().returncode == 0
    assert wordcount_sink(tmp_path) == expected_counts(corpus_file(n) for n in range(10))


def window_args(workdir, total: int) -> list[str]:
    return ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
            "--total", str(total), "--rows-per-batch", "2500", "--keys", "5"]


def windows(workdir) -> list[tuple]:
    with sqlite3.connect(workdir / "out.db") as db:
        return sorted(db.execute("SELECT key, window_start, window_end, average FROM window_average").fetchall())


def test_window_average_killed_in_the_first_micro_batch_after_path_b_equals_pandas(tmp_path):
    assert Crasher("window_average", window_args(tmp_path, 6_000), tmp_path).run().returncode == 0
    shutil.rmtree(tmp_path / "ck" / "spark")
    crasher = Crasher("window_average", window_args(tmp_path, 12_000), tmp_path)
    killed = crasher.crash_at(CrashPoint.GROUP, 1)
    assert "recovery path B" in killed.log, killed.log
    resumed = crasher.run()
    assert resumed.returncode == 0 and "recovery path A" in resumed.log, resumed.log
    assert len(windows(tmp_path)) > 30
    assert_windows_equal_pandas(tmp_path / "out.db", 12_000, keys=5, size=4_000, step=1_000)


def count_job(tmp_path, name: str, total: int):
    """The count example, 8 key groups, a boundary every 100 ms, over ``total`` messages
    of the generator with 40 keys and one message every 100 ms (each crosses a boundary)."""
    import dataclasses

    import count

    from persistent import GeneratorSource

    workdir = tmp_path / name
    args = count.parser().parse_args(
        ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
         "--key-groups", "8", "--interval-ms", "100"]
    )
    job = count.build_job(args)
    job = replace(job, on_progress=None)
    return dataclasses.replace(job, source=GeneratorSource(keys=40, total=total, step_ms=100, max_rows_per_batch=200))


def test_key_groups_without_messages_after_path_b_checkpoint_and_the_clock_equals_a_clean_run(spark, tmp_path):
    # 400 messages reach every key group; the next 4 (keys k0..k3) only a few of the 8,
    # while the watermark passes 4 more boundaries.
    count_job(tmp_path, "clean", 404).run(spark)
    clean_clock = ClockStore(LocalFileSystem(), str(tmp_path / "clean" / "ck" / "clock")).read()

    count_job(tmp_path, "restarted", 400).run(spark)
    shutil.rmtree(tmp_path / "restarted" / "ck" / "spark")
    assert count_job(tmp_path, "restarted", 404).run(spark).recovery.path is RecoveryPath.FROM_CLOCK
    clock = ClockStore(LocalFileSystem(), str(tmp_path / "restarted" / "ck" / "clock")).read()
    assert clock.clock_ms == clean_clock.clock_ms > 40_000
    assert dict(clock.task_clocks) == dict(clean_clock.task_clocks) and len(clock.task_clocks) == 8

    # Once more from the clock: the groups that got no message restore exactly.
    shutil.rmtree(tmp_path / "restarted" / "ck" / "spark")
    assert count_job(tmp_path, "restarted", 600).run(spark).recovery.path is RecoveryPath.FROM_CLOCK
    with sqlite3.connect(tmp_path / "restarted" / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": len(range(k, 600, 40)) for k in range(40)}


def test_a_checkpoint_of_an_attempt_killed_with_its_executor_is_rewritten_by_the_retry(tmp_path):
    crasher = Crasher("count", generated(tmp_path), tmp_path, master="local-cluster[2,1,1024]")
    outcome = crasher.kill_executor_at(CrashPoint.CHECKPOINTS, 1)
    assert outcome.returncode == 0, outcome.log
    assert sink_counts(tmp_path) == EXPECTED
    assert_clock_names_durable_checkpoints(tmp_path)
    files = sorted((tmp_path / "ck" / "checkpoints").rglob("*"))
    assert not [f for f in files if f.name.startswith(TEMP_PREFIX)]
    for path in (f for f in files if f.is_file()):
        decode_record(path.read_bytes(), str(path))  # every file intact


def test_the_driver_collects_numbers_per_key_group_never_state(spark, tmp_path):
    from dataclasses import fields

    from pyspark.sql.types import BinaryType

    from persistent.runtime.planner import Plan
    from persistent.runtime.reports import GroupReport, Reports
    from persistent.storage.filesystems import JobStorage

    job = count_job(tmp_path, "schema", 10)
    recovery = job.run(spark).recovery
    reports = spark.sparkContext.accumulator({}, Reports())
    plan = Plan.of(job)
    storage = JobStorage(job.checkpoint_dir, None)
    frame = plan._stateful(plan._messages(spark, recovery.floor_ms), recovery, storage.directory(), storage, reports)
    assert frame.schema.names == ["key", "window_start", "window_end", "value", "dead_letters"]
    assert not any(isinstance(f.dataType, BinaryType) for f in frame.schema)
    assert {f.type for f in fields(GroupReport)} == {"int", "float", "int | None", "bool"}
