"""The crash harness itself, on a stand-in job (a Python script, no Spark): a kill
happens only at the named point, and a run that never gets there fails the test."""

from __future__ import annotations

import sys
import textwrap

import pytest

from crash_harness import Crasher
from persistent.core.faults import CrashPoint

#: Waits at the crash point the harness names, as the runtime's ``crash_point`` does.
REACHES_THE_POINT = """
    import os, time
    point, arrival, marker = os.environ["PERSISTENT_CRASH_POINT"].split(":", 2)
    with open(marker, "x") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
"""


def stand_in(tmp_path, body: str) -> Crasher:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    crasher = Crasher(script, [], tmp_path, seed=1)
    crasher.command = [sys.executable, str(script)]
    return crasher


def test_a_run_that_reaches_the_point_is_killed_there(tmp_path):
    outcome = stand_in(tmp_path, REACHES_THE_POINT).crash_at(CrashPoint.SINK, 1, timeout_s=30)
    assert outcome.killed and outcome.returncode == -9


def test_a_run_that_ends_before_the_point_fails_the_test(tmp_path):
    with pytest.raises(AssertionError, match="ended .exit 3. before crash point sink:2"):
        stand_in(tmp_path, "raise SystemExit(3)").crash_at(CrashPoint.SINK, 2, timeout_s=30)


def test_a_run_that_hangs_short_of_the_point_fails_the_test_and_is_killed(tmp_path):
    crasher = stand_in(tmp_path, "import time; time.sleep(600)")
    with pytest.raises(AssertionError, match="neither ended nor got there in 1 s"):
        crasher.crash_at(CrashPoint.CLOCK, 1, timeout_s=1)
    assert not any("job.py" in line for line in _processes())


def _processes() -> list[str]:
    from pathlib import Path

    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return lines
