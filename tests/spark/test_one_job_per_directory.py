"""One job at a time on a checkpoint directory (``persistent.storage.lease``), with
``spark-submit``: a second job on a running job's directory is refused at once, naming
the running job, and the first runs on to exact counts."""

from __future__ import annotations

import sqlite3
import time

import pytest

from crash_harness import Crasher

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS = 60_000, 20


def test_a_second_job_on_a_running_jobs_directory_is_refused_at_once_and_the_first_counts_exactly(tmp_path):
    args = ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}", "--available-now",
            "--key-groups", "4", "--interval-ms", "1000", "--total", str(TOTAL), "--keys", str(KEYS),
            "--rows-per-batch", "1000"]
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = Crasher("count", args, tmp_path / "first")
    process, log = first._start({})
    committed = lambda: any((tmp_path / "ck" / "progress").glob("*.json"))  # noqa: E731
    assert first._wait(process, log, committed, 300), f"the first job ended before it committed a batch; log: {log}"

    began = time.monotonic()
    second = Crasher("count", args, tmp_path / "second").run(timeout_s=60)
    took = time.monotonic() - began
    # Refused once its Spark driver has started, well before the lease's 60 s would run out.
    assert second.returncode != 0 and took < 30, (took, second.log)
    assert f"{tmp_path / 'ck'} is in use by another job: Spark application " in second.log
    assert "pid " in second.log and "running since" in second.log and "every 10 s" in second.log

    ended = first._to_the_end(process, log, 600)
    assert ended.returncode == 0, ended.log
    with sqlite3.connect(tmp_path / "out.db") as db:
        counts = dict(db.execute("SELECT key, count FROM counts").fetchall())
    assert counts == {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}
