"""MessageCount from the generator, per-message task form, against counts computed here;
the clock checked after every micro-batch."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace

import pytest

from persistent.core.errors import RestartRefusedError
from persistent.storage.checkpoint_store import CheckpointStore, decode_record
from persistent.storage.clock_store import ClockStore, verify_clock
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import PROGRESS_KEPT

pytestmark = pytest.mark.spark


def test_generated_message_counts_are_exact_and_the_clock_is_monotone(spark, tmp_path, capsys):
    import count

    total, keys = 5_000, 7
    checkpoint = str(tmp_path / "ck")
    args = count.parser().parse_args(
        ["--checkpoint", checkpoint, "--output", f"sqlite://{tmp_path / 'out.db'}",
         "--total", str(total), "--keys", str(keys), "--rows-per-batch", "1000", "--available-now",
         "--key-groups", "4", "--interval-ms", "400"]
    )
    job = count.build_job(args)
    fs = LocalFileSystem()
    clocks, progress = [], []

    def after_batch(batch):
        # Runs on the driver right after the batch committed: the clock on disk must equal
        # the minimum task clock and name checkpoints that exist for every task.
        record = ClockStore(fs, f"{checkpoint}/clock").read()
        if record is not None:
            assert record.clock_ms == min(record.task_clocks.values()) == batch.clock_ms
            verify_clock(record, lambda task: CheckpointStore(fs, f"{checkpoint}/checkpoints", task))
            clocks.append(record.clock_ms)
        # The key groups report each checkpoint they wrote by its size and CRC: those of the file.
        assert len(batch.checkpoint_crcs) == batch.checkpoints
        for task, crc in batch.checkpoint_crcs.items():
            path = CheckpointStore(fs, f"{checkpoint}/checkpoints", task).path(record.task_clocks[task])
            raw = fs.read_bytes(path)
            end = len(raw) - len(decode_record(raw, path)[1])  # the CRC closes the header
            assert int.from_bytes(raw[end - 4:end], "big") == crc
        progress.append(batch)

    job = replace(job, on_progress=after_batch)
    job.run(spark)
    # The progress bar follows Spark's offsets to the generator's end: its five files.
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"[{'#' * 30}] 5/5 micro-batches 100%")
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    expected = {f"k{k}": len(range(k, total, keys)) for k in range(keys)}
    assert counted == expected

    assert len(clocks) >= 4 and clocks == sorted(clocks) and clocks[-1] > clocks[0]
    assert sum(p.rows for p in progress) == total
    records = sorted((tmp_path / "ck" / "progress").glob("*.json"))
    assert len(records) == min(len(progress), PROGRESS_KEPT)
    last = json.loads(records[-1].read_text())
    assert last["batch"] == progress[-1].batch and last["clock_ms"] == clocks[-1]
    assert set(last["state_bytes"]) <= {f"group-{g:05d}" for g in range(4)} and all(last["state_bytes"].values())


def test_parquet_files_in_parquet_results_out(spark, tmp_path):
    import count
    import pandas as pd

    inputs = tmp_path / "in"
    inputs.mkdir()
    keys = ["a", "b", "c", "a", "a", "b"] * 50
    for part in range(3):
        rows = range(part * 100, (part + 1) * 100)
        frame = pd.DataFrame({"key": [keys[i] for i in rows], "timestamp": [i + 1 for i in rows]})
        frame.to_parquet(inputs / f"part-{part}.parquet")
    args = count.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out"), "--input", str(inputs),
         "--input-format", "parquet", "--available-now", "--key-groups", "2", "--interval-ms", "50"]
    )
    job = count.build_job(args)
    job = replace(job, on_progress=None)
    job.run(spark)
    final = job.sink.read()
    # Every batch was written beside its place and swapped in whole.
    assert not list((tmp_path / "out" / "_staging").iterdir())
    assert all((batch / "_SUCCESS").exists() for batch in (tmp_path / "out").glob("generation=*/batch=*"))
    assert job.sink.newest_generation(spark) == 0
    assert list(final.columns) == ["key", "count"]
    assert dict(zip(final["key"], final["count"])) == dict(pd.Series(keys).value_counts())

    # A new checkpoint directory into the same output would reuse its batch ids: refused.
    args.checkpoint = str(tmp_path / "another-ck")
    with pytest.raises(RestartRefusedError, match="holds results of an earlier run"):
        count.build_job(args).start(spark)


def test_a_job_directory_copied_without_its_generation_file_writes_every_batch(spark, tmp_path):
    import count

    def run(checkpoint, total):
        args = count.parser().parse_args(
            ["--checkpoint", str(checkpoint), "--output", f"sqlite://{tmp_path / 'out.db'}", "--total", str(total),
             "--keys", "5", "--rows-per-batch", "500", "--available-now", "--key-groups", "2", "--interval-ms", "100"]
        )
        job = count.build_job(args)
        job = replace(job, on_progress=None)
        return job.run(spark).recovery

    run(tmp_path / "ck", 1_000)
    shutil.rmtree(tmp_path / "ck" / "spark")
    assert run(tmp_path / "ck", 2_000).generation == 1  # path B: the sink holds generations 0 and 1
    # A new version of the job in a new directory, with the clock and checkpoints only.
    for part in ("clock", "checkpoints"):
        shutil.copytree(tmp_path / "ck" / part, tmp_path / "copy" / part)
    assert run(tmp_path / "copy", 3_000).generation == 2  # not 1 again: its batches would be taken for replays
    with sqlite3.connect(tmp_path / "out.db") as db:
        counted = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counted == {f"k{k}": 600 for k in range(5)}
