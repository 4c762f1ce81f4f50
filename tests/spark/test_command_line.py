"""The command line with a JVM: ``persistent run`` starts spark-submit, and ``status``
and ``inspect`` read the directory of a job that really ran."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from persistent.storage.job_directory import JobDirectory
from persistent.tools import cli
from state.fs import LocalFileSystem
from tests.spark.conftest import EXAMPLES

pytestmark = pytest.mark.spark

PERSISTENT = os.path.join(os.path.dirname(sys.executable), "persistent")


def test_run_hands_the_arguments_after_the_application_to_it(spark_lock):
    # spark-submit starts a JVM, but count.py prints its help before it creates a session.
    result = subprocess.run([PERSISTENT, "run", os.path.join(EXAMPLES, "count.py"), "--help"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: count.py") and "MessageCount: counts per key" in result.stdout


def test_status_and_inspect_read_the_directory_of_a_job_that_ran(spark, tmp_path, capsys):
    import count

    total, keys = 3_000, 5
    checkpoint = str(tmp_path / "ck")
    args = count.parser().parse_args(
        ["--checkpoint", checkpoint, "--output", f"sqlite://{tmp_path / 'out.db'}", "--total", str(total),
         "--keys", str(keys), "--rows-per-batch", "1000", "--available-now", "--key-groups", "2",
         "--interval-ms", "500"]
    )
    job = count.build_job(args)
    job = replace(job, on_progress=None)
    job.run(spark)
    clock_ms = JobDirectory(LocalFileSystem(), checkpoint).clock.read().clock_ms
    assert clock_ms > 0

    assert cli.main(["status", checkpoint, "--batches", "100"]) == 0
    out = capsys.readouterr().out
    assert "generation     0, started fresh, 2 key groups" in out
    assert f"throughput     {total:,} rows in" in out and "last batch     0." in out and "watermark      " in out
    assert f"clock          {clock_ms} ms" in out
    assert all(f"  group-0000{g}  " in out and "state " in out for g in range(2))

    assert cli.main(["inspect", checkpoint]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    counted = {key: int(value) for _, key, value in (row.split("\t") for row in rows)}
    # Generator message i has key k{i % keys} and event time i + 1 ms.
    expected = {f"k{k}": sum(1 for i in range(k, total, keys) if i + 1 < clock_ms) for k in range(keys)}
    assert header == "task\tkey\tvalue" and counted == {k: n for k, n in expected.items() if n}
