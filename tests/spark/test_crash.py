"""Exactly-once under real failures: the count example, killed with SIGKILL again and again.

Every scenario runs ``spark-submit examples/count.py``, kills the whole job at chosen
crash points (``persistent.storage.faults``) and at random moments, restarts it, and at the end
compares the sink with the counts of one clean pass over the same input: no message
may be lost and none counted twice. The clock must still name durable checkpoints.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from crash_harness import Crasher, checkpoints_of_changes, python_workers
from persistent.storage.faults import CrashPoint
from persistent.storage.checkpoint_store import CheckpointStore
from persistent.storage.clock_store import ClockStore, verify_clock
from persistent.storage.fs import LocalFileSystem

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS = 12_000, 40


def count_args(workdir, *more):
    return ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}",
            "--available-now", "--key-groups", "4", "--interval-ms", "1000", *more]


def generated(workdir):
    return count_args(workdir, "--total", str(TOTAL), "--keys", str(KEYS), "--rows-per-batch", "1500")


def sink_counts(workdir):
    with sqlite3.connect(workdir / "out.db") as db:
        return dict(db.execute("SELECT key, count FROM counts").fetchall())


def assert_clock_names_durable_checkpoints(workdir):
    fs, root = LocalFileSystem(), str(workdir / "ck")
    record = ClockStore(fs, f"{root}/clock").read()
    assert record is not None and record.clock_ms == min(record.task_clocks.values())
    verify_clock(record, lambda task: CheckpointStore(fs, f"{root}/checkpoints", task))


EXPECTED = {f"k{k}": len(range(k, TOTAL, KEYS)) for k in range(KEYS)}


def files(directory):
    return {path: (path.stat().st_size, path.stat().st_mtime_ns) for path in directory.rglob("*") if path.is_file()}


def test_killed_at_every_crash_point_and_at_random_then_path_a(tmp_path):
    crasher = Crasher("count", generated(tmp_path), tmp_path)
    crasher.crash_at(CrashPoint.GROUP, 3)
    left = files(tmp_path / "ck")
    standby = crasher.standby_waiting()  # the restart, Spark started, has not looked at the job
    assert files(tmp_path / "ck") == left and "[persistent]" not in standby.replace("[persistent] standby", "")
    for point, arrival in [(CrashPoint.BATCH, 2), (CrashPoint.SINK, 2), (CrashPoint.CHECKPOINTS, 2),
                           (CrashPoint.CLOCK, 2)]:
        crasher.crash_at(point, arrival)
    for _ in range(2):
        crasher.crash_after_random_delay(2, 7)
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert "recovery path A" in final.log
    assert sink_counts(tmp_path) == EXPECTED, f"seed {crasher.seed}"
    assert_clock_names_durable_checkpoints(tmp_path)
    assert checkpoints_of_changes(tmp_path / "ck")


def test_killed_then_restarted_from_the_clock_path_b(tmp_path):
    crasher = Crasher("count", generated(tmp_path), tmp_path)
    restarts_from_clock = crasher.crash_and_lose_sparks_checkpoint(
        tmp_path / "ck",
        [(CrashPoint.CLOCK, 2), (CrashPoint.CHECKPOINTS, 2), (CrashPoint.SINK, 3), (CrashPoint.GROUP, 5)])
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert restarts_from_clock >= 2 and "recovery path B" in final.log, f"seed {crasher.seed}"
    assert sink_counts(tmp_path) == EXPECTED, f"seed {crasher.seed}"
    assert_clock_names_durable_checkpoints(tmp_path)
    assert checkpoints_of_changes(tmp_path / "ck")


def test_losing_an_executor_mid_query_on_a_local_cluster(tmp_path):
    crasher = Crasher("count", generated(tmp_path), tmp_path, master="local-cluster[2,1,1024]")
    outcome = crasher.kill_one_executor_after("batch 0.1:")
    assert outcome.returncode == 0, outcome.log
    assert sink_counts(tmp_path) == EXPECTED
    assert_clock_names_durable_checkpoints(tmp_path)



#: How many bytes the Python workers may grow by, confined (``test_python_workers_killed_by_the_oom_killer...``).
GROWTH = 48 << 20


def test_python_workers_killed_by_the_oom_killer_lose_and_double_nothing(tmp_path, memory_cgroup):
    """Every message a new key, so each key group's state grows with each micro-batch.
    After the second, the job's Python workers are confined to a memory cgroup that
    lets them grow by ``GROWTH`` bytes: the kernel's OOM killer SIGKILLs a worker in the
    middle of a micro-batch (their executors live on), and Spark retries no task (a
    retry may fit in what the killed worker left): the job fails with one line naming
    the memory the workers used. A run after it without the limit ends with every key
    counted once."""
    total = 600_000
    args = count_args(tmp_path, "--total", str(total), "--keys", str(total), "--rows-per-batch", "50000")
    crasher = Crasher("count", args, tmp_path, master="local-cluster[2,1,1024]", standby=False,
                      submit=("--conf", "spark.task.maxFailures=1"))

    def confine(job: int) -> None:
        memory_cgroup.limit(GROWTH)
        for pid in python_workers(job):
            memory_cgroup.add(pid)

    failed = crasher.disturb_after("batch 0.1:", confine)
    assert memory_cgroup.oom_kills() >= 1
    assert failed.returncode == 1, failed.log
    line = next(line for line in failed.log.splitlines() if line.startswith("count.py: error: "))
    assert re.search(r"a Python worker died under micro-batch 0\.\d+ .* the OOM killer: in micro-batch 0\.\d+ "
                     r"a Python worker held up to [\d,]+ MiB resident, with key groups of up to [\d,]+ keys", line), line
    final = crasher.run()
    assert final.returncode == 0, final.log
    counts = sink_counts(tmp_path)
    assert len(counts) == total and set(counts.values()) == {1}, f"seed {crasher.seed}"
    assert_clock_names_durable_checkpoints(tmp_path)


def write_out_of_order_input(directory):
    """Six files of JSON lines whose times go back and forth by up to 1.9 s behind the
    newest time of the files before (within a 2 s watermark delay); from the third file
    on, five messages arrive 2.9 s behind it (late: not applied). Each of the five keys
    counts 12 messages of each of the first two files and 11 of each later one."""
    directory.mkdir()
    for f in range(6):
        base = 1_000 + f * 1_500
        times = [base + (i * 7_919) % 2_000 - 700 * (i % 3) for i in range(55)]
        times += [base - 2_900 if f >= 2 else base] * 5
        lines = [json.dumps({"key": f"k{i % 5}", "timestamp": max(t, 1)}) for i, t in enumerate(times)]
        (directory / f"{f:03d}.jsonl").write_text("\n".join(lines) + "\n")


def test_folded_counts_across_kills_on_path_a_path_b_and_a_rescale_are_exact(tmp_path):
    """The count example with ``--fold``: on-time messages fold before the shuffle, late
    ones (dropped) and those before the restore point cross as they are."""
    write_out_of_order_input(tmp_path / "in")

    def crasher(key_groups):
        args = count_args(tmp_path, "--input", str(tmp_path / "in"), "--watermark-delay-ms", "2000", "--fold")
        args[args.index("--key-groups") + 1] = str(key_groups)
        return Crasher("count", args, tmp_path, standby=False)

    seed = kill_on_paths_a_and_b_then_rescale(crasher, 4, 2, tmp_path, FOLDS)
    assert sink_counts(tmp_path) == {f"k{k}": 2 * 12 + 4 * 11 for k in range(5)}, f"seed {seed}"
    assert_clock_names_durable_checkpoints(tmp_path)


def test_packed_counts_across_kills_on_path_a_path_b_and_a_rescale_are_exact(tmp_path):
    """The count example: each partition's messages cross the shuffle packed per key
    group, late ones (dropped) and those before the restore point among them."""
    write_out_of_order_input(tmp_path / "in")

    def crasher(key_groups):
        args = count_args(tmp_path, "--input", str(tmp_path / "in"), "--watermark-delay-ms", "2000")
        args[args.index("--key-groups") + 1] = str(key_groups)
        return Crasher("count", args, tmp_path, standby=False)

    seed = kill_on_paths_a_and_b_then_rescale(crasher, 4, 2, tmp_path, PACKS)
    assert sink_counts(tmp_path) == {f"k{k}": 2 * 12 + 4 * 11 for k in range(5)}, f"seed {seed}"
    assert_clock_names_durable_checkpoints(tmp_path)


#: How a job's messages cross the shuffle, in its first lines.
FOLDS = "[persistent] messages fold before the shuffle (a MonoidTask)"
PACKS = "[persistent] messages cross the shuffle packed per key group"


def kill_on_paths_a_and_b_then_rescale(crasher, key_groups: int, fewer: int, tmp_path, way: str) -> int:
    """Runs a job (``crasher(key_groups)``, a ``Crasher``) killed at ``sink`` and at
    ``group`` (path A), then at ``clock`` and ``sink`` with Spark's checkpoint lost each
    time (path B), then to its end with ``fewer`` key groups (a rescale, path B); checks
    that each run crossed the shuffle the ``way`` it says (``FOLDS``, ``PACKS``) and
    took its path. Returns the crasher's seed."""
    first = crasher(key_groups)
    logs = [first.crash_at(CrashPoint.SINK, 2).log, first.crash_at(CrashPoint.GROUP, key_groups).log]
    assert first.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(CrashPoint.CLOCK, 2), (CrashPoint.SINK, 1)]) == 2
    final = crasher(fewer).run()
    assert final.returncode == 0, final.log
    logs.append(final.log)
    assert all(way in log for log in logs)
    assert "recovery path A" in logs[1] and "recovery path B" in final.log, f"seed {first.seed}"
    assert f"from {key_groups} to {fewer} key groups" in final.log
    return first.seed
