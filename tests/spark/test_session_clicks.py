"""Session windows on Spark (``examples/sessions.py``) equal pandas' sessions of the
same clicks, in one run and under SIGKILL at crash points with restarts on both paths."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from crash_harness import Crasher
from persistent.storage.faults import CrashPoint
from test_crash import assert_clock_names_durable_checkpoints
from test_window_crashes import recovery_path

pytestmark = pytest.mark.spark

TOTAL, USERS, PERIOD, GAP = 6_000, 3, 200, 50


def session_args(workdir, rows_per_batch: int = 1_000) -> list[str]:
    return ["--checkpoint", str(workdir / "ck"), "--output", f"sqlite://{workdir / 'out.db'}", "--available-now",
            "--total", str(TOTAL), "--users", str(USERS), "--period-ms", str(PERIOD), "--gap-ms", str(GAP),
            "--rows-per-batch", str(rows_per_batch), "--interval-ms", "500", "--key-groups", "3"]


def expected_sessions() -> pd.DataFrame:
    """pandas' sessions of the example's clicks that the last watermark (the newest click) closes."""
    from sessions import quiet

    i = np.arange(TOTAL)
    user, ts = i % USERS, i + 1
    clicks = pd.DataFrame({"user": user, "ts": ts})[~quiet(ts // PERIOD, user)]
    clicks = clicks.assign(user="u" + clicks.user.astype(str)).sort_values(["user", "ts"])
    gaps = clicks.groupby("user").ts.diff()
    clicks["session"] = (gaps.isna() | (gaps >= GAP)).cumsum()
    sessions = clicks.groupby(["user", "session"]).agg(window_start=("ts", "min"), last=("ts", "max"),
                                                       clicks=("ts", "size")).reset_index()
    sessions["window_end"] = sessions["last"] + GAP
    return sessions[sessions.window_end <= clicks.ts.max()][["user", "window_start", "window_end", "clicks"]]


def assert_sessions_equal_pandas(database) -> None:
    with sqlite3.connect(database) as db:
        got = pd.read_sql("SELECT user, window_start, window_end, clicks FROM sessions", db)
    expected = expected_sessions()
    assert len(expected) > 3 * USERS  # several sessions per user, most spanning checkpoints and batches
    key = ["user", "window_start"]
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  expected.sort_values(key).reset_index(drop=True), check_dtype=False)


def test_sessions_equal_pandas(spark, tmp_path):
    import sessions

    args = sessions.parser().parse_args(session_args(tmp_path, rows_per_batch=1_500))
    job = sessions.build_job(args)
    job = replace(job, on_progress=None)
    job.run(spark)
    assert_sessions_equal_pandas(tmp_path / "out.db")


@pytest.mark.usefixtures("spark_lock")
def test_sessions_killed_at_crash_points_restarting_on_path_a_then_path_b(tmp_path):
    crasher = Crasher("sessions", session_args(tmp_path), tmp_path)
    starts = [recovery_path(crasher.crash_at(point, 2).log) for point in (CrashPoint.GROUP, CrashPoint.SINK,
                                                                          CrashPoint.COMMITTED)]
    # Spark's checkpoint goes after each of the next kills: path B follows them.
    from_clock = crasher.crash_and_lose_sparks_checkpoint(tmp_path / "ck",
                                                          [(CrashPoint.CHECKPOINTS, 2), (CrashPoint.CLOCK, 2)])
    final = crasher.run()
    assert final.returncode == 0, final.log
    assert (starts, from_clock, recovery_path(final.log)) == (["fresh", "A", "A"], 2, "B"), f"seed {crasher.seed}"
    assert_sessions_equal_pandas(tmp_path / "out.db")
    assert_clock_names_durable_checkpoints(tmp_path)
