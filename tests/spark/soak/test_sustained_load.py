"""Sustained load: ``make soak`` (CI runs it after ``make test``, which leaves this
directory out: ``norecursedirs`` in ``setup.cfg``).

The generator feeds the window-average task at a fixed rate for several minutes
(``PERSISTENT_SOAK_SECONDS``, default 300). Sampled as it runs: the driver JVM's
resident memory and the key groups' checkpoints (their whole tables) stay bounded
(closed windows are pruned), and the checkpoint clock keeps advancing. At the end every
closed window's average equals pandas'.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest

from persistent import GeneratorSource
from test_window_average import assert_windows_equal_pandas

pytestmark = pytest.mark.spark


def resident_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def newest_progress(directory):
    records = sorted(directory.glob("*.json"))
    return json.loads(records[-1].read_text()) if records else None


def test_memory_and_state_stay_bounded_and_the_clock_advances(spark, tmp_path):
    import window_average

    seconds = int(os.environ.get("PERSISTENT_SOAK_SECONDS", "300"))
    rate, keys, size, step = 2_000, 50, 4_000, 1_000
    total = rate * seconds
    args = window_average.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}",
         "--keys", str(keys), "--total", str(total), "--window-ms", str(size), "--slide-ms", str(step)]
    )
    job = window_average.build_job(args)
    # Event time follows the sequence at 1 ms per message; messages arrive at `rate` per second.
    job = replace(job, source=GeneratorSource(keys=keys, total=total, rows_per_second=rate, max_rows_per_batch=rate * 10))
    job = replace(job, on_progress=None)
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    running = job.start(spark, trigger_ms=2_000)
    samples = []  # (seconds, driver MB, checkpoint bytes, clock ms)
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds + 120:
            time.sleep(10)
            progress = newest_progress(tmp_path / "ck" / "progress")
            if progress:
                samples.append((time.monotonic() - started, resident_mb(jvm),
                                progress["checkpoint_bytes"], progress["clock_ms"] or 0))
                if progress["watermark_ms"] >= total:
                    break
    finally:
        running.stop()
    for sample in samples:
        print("soak: %5.0f s  driver %6.0f MB  checkpoints %8d B  clock %9d ms" % sample)
    assert samples and samples[-1][3] >= total - 2 * step, "the job did not keep up with the input"
    early, late = samples[: len(samples) // 4], samples[len(samples) // 2 :]
    assert max(s[2] for s in late) <= 1.5 * max(s[2] for s in early), "checkpoints grow: closed windows not pruned"
    # The JVM heap settles within the first minutes; a leak keeps growing past that.
    assert max(s[1] for s in late) <= 1.5 * max(s[1] for s in early), "driver memory grows"
    clocks = [s[3] for s in samples]
    assert clocks == sorted(clocks) and len(set(clocks)) >= len(clocks) // 2, "the clock stalls"
    assert_windows_equal_pandas(tmp_path / "out.db", total, keys, size, step)
