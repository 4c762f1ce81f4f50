"""Exactly-once for windows under real failures: ``spark-submit examples/window_average.py``
killed with SIGKILL at every crash point, restarted on Spark's checkpoint (path A) or
from the clock (path B), and its closed windows compared with pandas' computation of
the same windows."""

from __future__ import annotations

import pytest

from crash_harness import Crasher
from persistent.core.faults import CrashPoint
from test_crash import assert_clock_names_durable_checkpoints
from test_window_average import assert_windows_equal_pandas

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("spark_lock")]

TOTAL, KEYS, SIZE, STEP = 6_000, 3, 2_000, 500
POINTS = [CrashPoint.GROUP, CrashPoint.BATCH, CrashPoint.SINK, CrashPoint.CHECKPOINTS, CrashPoint.CLOCK,
          CrashPoint.COMMITTED]


def window_args(workdir) -> list[str]:
    return ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
            "--total", str(TOTAL), "--keys", str(KEYS), "--window-ms", str(SIZE), "--slide-ms", str(STEP),
            "--rows-per-batch", "1000", "--interval-ms", "500", "--key-groups", "3"]


def test_windows_killed_at_every_crash_point_then_path_a(tmp_path):
    crasher = Crasher("window_average", window_args(tmp_path), tmp_path)
    for point in POINTS:
        crasher.crash_at(point, 2)
    final = crasher.run()
    assert final.returncode == 0 and "recovery path A" in final.log, final.log
    assert_windows_equal_pandas(tmp_path / "out.db", TOTAL, KEYS, SIZE, STEP)
    assert_clock_names_durable_checkpoints(tmp_path)


def test_windows_killed_at_every_crash_point_then_path_b(tmp_path):
    crasher = Crasher("window_average", window_args(tmp_path), tmp_path)
    from_clock = crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck", [(point, 2) for point in POINTS])
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert from_clock >= 4 and "recovery path B" in final.log, f"seed {crasher.seed}"
    assert_windows_equal_pandas(tmp_path / "out.db", TOTAL, KEYS, SIZE, STEP)
    assert_clock_names_durable_checkpoints(tmp_path)
