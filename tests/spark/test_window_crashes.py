"""Exactly-once for windows under real failures: ``spark-submit examples/window_average.py``
killed with SIGKILL at every crash point, restarted on Spark's checkpoint (path A) and
from the clock (path B) in turn, and its closed windows compared with pandas'
computation of the same windows."""

from __future__ import annotations

import shutil

import pytest

from crash_harness import Crasher
from persistent.storage.faults import CrashPoint
from test_crash import FOLDS, assert_clock_names_durable_checkpoints, kill_on_paths_a_and_b_then_rescale
from test_window_average import assert_windows_equal_pandas

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS, SIZE, STEP = 6_000, 3, 2_000, 500
POINTS = [CrashPoint.GROUP, CrashPoint.BATCH, CrashPoint.SINK, CrashPoint.CHECKPOINTS, CrashPoint.CLOCK,
          CrashPoint.COMMITTED]


def window_args(workdir) -> list[str]:
    return ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
            "--total", str(TOTAL), "--keys", str(KEYS), "--window-ms", str(SIZE), "--slide-ms", str(STEP),
            "--rows-per-batch", "1000", "--interval-ms", "500", "--key-groups", "3"]


def test_windows_killed_at_every_crash_point_restarting_on_paths_a_and_b_in_turn(tmp_path):
    # Each point once; after every second kill Spark's checkpoint goes, so the restarts
    # take path A and path B in turn: a path-B generation killed and restarted on its
    # own Spark checkpoint, and the other way round. Path A follows the kills at group,
    # batch and sink, path B those at committed (the first, once the clock exists),
    # clock and checkpoints. The count example meets every point on path A (over
    # Kafka, test_kafka.py), the windows on HDFS checkpoints and committed on path A,
    # clock and group on path B (test_hdfs.py).
    crasher = Crasher("window_average", window_args(tmp_path), tmp_path)
    order = [CrashPoint.GROUP, CrashPoint.COMMITTED, CrashPoint.BATCH, CrashPoint.CLOCK, CrashPoint.SINK,
             CrashPoint.CHECKPOINTS]
    assert sorted(order) == sorted(POINTS)
    starts = []
    for n, point in enumerate(order):
        starts.append(recovery_path(crasher.crash_at(point, 2).log))
        if n % 2:
            shutil.rmtree(tmp_path / "ck" / "spark")
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert [*starts, recovery_path(final.log)] == ["fresh", "A", "B", "A", "B", "A", "B"], f"seed {crasher.seed}"
    assert_windows_equal_pandas(tmp_path / "out.db", TOTAL, KEYS, SIZE, STEP)
    assert_clock_names_durable_checkpoints(tmp_path)


def recovery_path(log: str) -> str:
    """How a run's job started, by its recovery line: ``fresh``, ``A`` or ``B``."""
    for start, line in (("fresh", "fresh start:"), ("A", "recovery path A:"), ("B", "recovery path B:")):
        if line in log:
            return start
    raise AssertionError(f"no recovery line in the run's log:\n{log}")


def test_folded_windows_across_kills_on_path_a_path_b_and_a_rescale_are_exact(tmp_path):
    """``window_average --fold``: each key's on-time messages fold per window pane
    before the shuffle (panes of 500 ms: the step and the checkpoint interval)."""

    def crasher(key_groups):
        args = [*window_args(tmp_path), "--fold"]
        args[args.index("--key-groups") + 1] = str(key_groups)
        return Crasher("window_average", args, tmp_path, standby=False)

    kill_on_paths_a_and_b_then_rescale(crasher, 3, 2, tmp_path, FOLDS)
    assert_windows_equal_pandas(tmp_path / "out.db", TOTAL, KEYS, SIZE, STEP)
    assert_clock_names_durable_checkpoints(tmp_path)
