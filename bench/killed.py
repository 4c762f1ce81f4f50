"""Restarts after a SIGKILL: the seconds from killing a job's process in the middle of a
micro-batch to the end of the first micro-batch its restart commits.

The bench's other restarts start again in the process that ran the job, its JVM and
Python workers warm. Here the job runs in processes of its own (``python -m
bench.killed``): the first runs it over one more file of input than it has read and
is killed with its whole process group (SIGKILL) as soon as Spark has written the
offsets of a micro-batch it has not committed; the second starts it again, as a
supervisor would, and the figure runs from the kill to the end of the first
micro-batch the second commits, a JVM and a Spark session started included. The second
writes that time to a file; once it has exited, whatever is left of its process group
is killed too (a JVM left behind by its Python, as one was at 50 million keys, would
otherwise keep the bench waiting).

Path B loses Spark's checkpoint: it is deleted before the first process (which then
replays from the checkpoint clock, so it has a micro-batch to be killed in) and again
after the kill, so the second process restores every key group at the clock.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.data import Dataset
from bench.spark_runs import delete_spark_checkpoint, run_directory

__all__ = ["killed_restart", "IMPLEMENTATIONS"]

#: What each implementation's process runs (``_run``), by the name of its runs.
IMPLEMENTATIONS = ("native-rocksdb-scale", "vectorized-scale")
#: How long the first process may take to start a micro-batch, and the second to end.
TIMEOUT_S = 3600


def killed_restart(work: Path, name: str, dataset: Dataset, master: str, lose: bool = False,
                   log: Path | None = None) -> float:
    """Kills the run ``name`` (one of ``IMPLEMENTATIONS``) over ``dataset`` in ``work``
    in the middle of a micro-batch and starts it again (path B: without Spark's
    checkpoint, ``lose``); returns the seconds from the kill to the end
    of the first micro-batch the restart commits. The processes' output goes to ``log``."""
    result = work / f"killed-{name}.json"
    command = [sys.executable, "-m", "bench.killed", name, str(work), master, json.dumps(asdict(dataset)),
               str(result)]
    job_checkpoint = run_directory(work, name, dataset) / "checkpoint"
    # Where Spark checkpoints: the query's checkpoint location (native) or the job
    # directory's ``spark`` (``JobDirectory.spark``).
    spark_checkpoint = job_checkpoint if name.startswith("native") else job_checkpoint / "spark"
    if lose:
        delete_spark_checkpoint(job_checkpoint)
    result.unlink(missing_ok=True)
    with open(log or os.devnull, "ab") as output:
        first = _start(command, output)
        batch = _wait_for_uncommitted_batch(first, spark_checkpoint)
        killed_at = time.time()
        _kill(first)
        if (spark_checkpoint / "commits" / str(batch)).exists():
            raise RuntimeError(f"bench: {name} committed micro-batch {batch} before it was killed")
        if lose:
            delete_spark_checkpoint(job_checkpoint)
        second = _start(command, output)
        try:
            exit_code = second.wait(TIMEOUT_S)
        finally:
            _kill(second)
    if exit_code:
        raise RuntimeError(f"bench: the restart of {name} after its kill exited {exit_code}; see {log}")
    return json.loads(result.read_text())["first_batch_end_s"] - killed_at


def _start(command: list[str], output) -> subprocess.Popen:
    """``command`` in a process group of its own (its JVM and Python workers join it)."""
    return subprocess.Popen(command, stdout=output, stderr=output, start_new_session=True,
                            cwd=Path(__file__).resolve().parent.parent)


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL to ``process``'s group, whatever of it is left."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone
    process.wait()


def _wait_for_uncommitted_batch(process: subprocess.Popen, spark_checkpoint: Path) -> int:
    """The micro-batch whose offsets Spark wrote and which it has not committed, once
    there is one."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"bench: the run to be killed ended first (exit {process.returncode})")
        started = _batches(spark_checkpoint / "offsets") - _batches(spark_checkpoint / "commits")
        if started:
            return max(started)
        time.sleep(0.05)
    raise RuntimeError(f"bench: no micro-batch started in {spark_checkpoint} within {TIMEOUT_S} s")


def _batches(log: Path) -> set[int]:
    try:
        return {int(entry.name) for entry in log.iterdir() if entry.name.isdigit()}
    except FileNotFoundError:
        return set()


def _run(name: str, work: Path, master: str, dataset: Dataset) -> float:
    """Runs ``name`` over ``dataset`` with one more file of input, on the directory of its
    last run; returns when its first micro-batch ended."""
    from persistent import spark_session

    from bench.spark_runs import ROCKSDB, CountSumVectorized, SparkRuns

    spark = spark_session("bench-killed", master, **{"spark.driver.memory": "6g"})
    try:
        runs = SparkRuns(spark, work)
        if name == "native-rocksdb-scale":
            return runs.native_again(dataset, name, ROCKSDB)
        return runs.run_again(runs.job(name, dataset, CountSumVectorized(), fresh=False), dataset)
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.killed", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=IMPLEMENTATIONS)
    parser.add_argument("work", type=Path)
    parser.add_argument("master")
    parser.add_argument("dataset", help="the data set, as JSON of bench.data.Dataset")
    parser.add_argument("result", type=Path, help="where to write when the first micro-batch ended, as JSON")
    args = parser.parse_args(argv)
    fields = json.loads(args.dataset)
    dataset = Dataset(**{**fields, "files": tuple(fields["files"])})
    ended_s = _run(args.name, args.work, args.master, dataset)
    args.result.write_text(json.dumps({"first_batch_end_s": ended_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
