"""The command line with a JVM: ``status`` and ``inspect`` read the directory of a job
that really ran. (``persistent run``, which stops before spark-submit when the
application ends before it starts Spark, is tested in tests/persistent/test_cli.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory
from persistent.tools import cli

pytestmark = pytest.mark.spark


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


def test_a_job_stopped_by_ctrl_c_says_where_in_one_line_and_exits_quietly(spark_lock, tmp_path):
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group: here to
    ``persistent run``'s spark-submit, its JVM and the Python driver, as a terminal does.
    The job has more to read than it gets to (no --available-now) before then."""
    import os
    import subprocess
    import sys

    from crash_harness import interrupt_when

    checkpoint, log = tmp_path / "ck", tmp_path / "run.log"
    command = [os.path.join(os.path.dirname(sys.executable), "persistent"), "run", "--master", "local[2]", "count",
               "--checkpoint", str(checkpoint), "--output", f"sqlite://{tmp_path / 'out.db'}", "--keys", "5",
               "--total", "10000000", "--rows-per-batch", "500", "--key-groups", "2", "--interval-ms", "500"]
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(log, "wb") as out:
        job = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment, start_new_session=True)
    returncode = interrupt_when(job, log, lambda: "batch 0.2:" in log.read_text(errors="replace"))
    text = log.read_text(errors="replace")
    assert returncode == 130, text
    stopped = [line for line in text.splitlines() if line.startswith("[persistent] stopped by SIGINT")]
    assert len(stopped) == 1 and "after micro-batch 0." in stopped[0] and "clock" in stopped[0], text
    assert "Traceback" not in text and "stopped SparkContext" not in text, text
