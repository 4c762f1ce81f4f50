"""Sliding-window averages on Spark equal a pandas computation of the same windows."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from persistent.core.errors import RestartRefusedError

pytestmark = pytest.mark.spark


def assert_windows_equal_pandas(database, total: int, keys: int, size: int, step: int) -> None:
    """The sink's closed windows are exactly those pandas computes from the generator's
    messages (message i: key k{i % keys}, time i + 1, value i), with the same averages."""
    with sqlite3.connect(database) as db:
        got = pd.read_sql("SELECT key, window_start, window_end, average FROM window_average", db)
    i = np.arange(total)
    messages = pd.DataFrame({"key": [f"k{n % keys}" for n in i], "ts": i + 1, "value": i.astype(float)})
    rows = []
    for start in range(0, total + 1, step):
        inside = messages[(messages.ts >= start) & (messages.ts < start + size)]
        for key, values in inside.groupby("key")["value"]:
            rows.append((key, start, start + size, values.mean()))
    expected = pd.DataFrame(rows, columns=["key", "window_start", "window_end", "average"])

    assert len(got) > 0
    # Windows close when the watermark (the newest event time) reaches their end.
    closed = expected[expected.window_end <= total]
    merged = closed.merge(got, on=["key", "window_start", "window_end"], how="outer", suffixes=("", "_got"))
    assert merged["average_got"].notna().all() and merged["average"].notna().all()
    np.testing.assert_allclose(merged["average_got"], merged["average"])


def test_closed_window_averages_equal_pandas(spark, tmp_path):
    import window_average

    total, keys, size, step = 6_000, 3, 2_000, 500
    args = window_average.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}",
         "--total", str(total), "--keys", str(keys), "--window-ms", str(size), "--slide-ms", str(step),
         "--rows-per-batch", "1500", "--available-now", "--interval-ms", "500"]
    )
    job = window_average.build_job(args)
    job = replace(job, on_progress=None)
    job.run(spark)
    assert_windows_equal_pandas(tmp_path / "out.db", total, keys, size, step)

    # Restarted from the clock with a window twice as long (the same panes): refused
    # before the query starts, naming both windows.
    shutil.rmtree(tmp_path / "ck" / "spark")
    args.window_ms = 2 * size
    with pytest.raises(RestartRefusedError, match=rf"window {size} ms every {step} ms.*this job has .*window {2 * size} ms"):
        window_average.build_job(args).start(spark)
    assert not (tmp_path / "ck" / "spark").exists()
