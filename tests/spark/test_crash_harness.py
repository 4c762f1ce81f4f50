"""The crash harness itself, on a stand-in job (a Python script, no Spark): a kill
happens only at the named point, a run that never gets there fails the test, a
standby runs only once its gate opens, with the crash point written there, and the
temporary files a killed run's JVM leaves go with it."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from crash_harness import _STANDBYS, Crasher, session_processes, stop_standbys
from persistent.storage.faults import CrashPoint

#: Waits at the crash point the harness names, as the runtime's ``crash_point`` does.
REACHES_THE_POINT = """
    import os, time
    point, arrival, marker = os.environ["PERSISTENT_CRASH_POINT"].split(":", 2)
    with open(marker, "x") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
"""


#: Waits for its gate as a standby (``persistent.tools.standby``), then reads its crash
#: point from the file as ``persistent.storage.faults`` does, and writes how it started.
STANDS_BY = """
    import os, time
    gate = os.environ.get("PERSISTENT_STANDBY")
    while gate and not os.path.exists(gate):
        time.sleep(0.01)
    spec = os.environ.get("PERSISTENT_CRASH_POINT", "")
    if spec.startswith("@"):
        spec = open(spec[1:]).read()
    print("standby" if gate else "cold", "at", repr(spec.split(":")[0]), flush=True)
    if spec:
        point, arrival, marker = spec.split(":", 2)
        with open(marker, "x") as f:
            f.write(str(os.getpid()))
        time.sleep(600)
"""


#: Writes a file into the ``java.io.tmpdir`` its JVM would have (``SPARK_SUBMIT_OPTS``,
#: the last one given wins) before it reaches its point, as Spark's local directories do.
FILLS_ITS_TEMPORARY_DIRECTORY = """
    import os, shlex
    temporary = [option.split("=", 1)[1] for option in shlex.split(os.environ["SPARK_SUBMIT_OPTS"])
                 if option.startswith("-Djava.io.tmpdir=")][-1]
    with open(os.path.join(temporary, "spark-jars"), "wb") as f:
        f.write(bytes(1000))
    print(temporary, flush=True)
""" + STANDS_BY


def stand_in(tmp_path, body: str, standby: bool = False) -> Crasher:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    crasher = Crasher(script, [], tmp_path, seed=1, standby=standby)
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


def test_the_run_after_a_kill_is_its_standby_which_waits_for_its_gate_and_learns_its_crash_point_there(tmp_path):
    crasher = stand_in(tmp_path, STANDS_BY, standby=True)
    first = crasher.crash_at(CrashPoint.SINK, 1, timeout_s=30)
    assert first.killed and first.log == "cold at 'sink'\n"
    standby, = _STANDBYS
    assert standby.poll() is None and not (tmp_path / "run-02.log").read_text()  # waiting at its gate

    second = crasher.crash_at(CrashPoint.CLOCK, 1, timeout_s=30)
    assert second.killed and second.log == "standby at 'clock'\n"
    third = crasher.run(timeout_s=30)
    assert third.returncode == 0 and third.log == "standby at ''\n" and not _STANDBYS  # no kill follows a run


def test_a_disturbed_run_or_a_whole_one_that_a_restart_follows_can_have_it_start_as_its_standby(tmp_path):
    crasher = stand_in(tmp_path, STANDS_BY + "    time.sleep(1)\n", standby=True)
    disturbed = []
    first = crasher.disturb_after("cold at", disturbed.append, timeout_s=30, standby_next=True)
    assert first.returncode == 0 and first.log == "cold at ''\n" and len(disturbed) == 1
    second = crasher.run(timeout_s=30, standby_next=True)
    assert second.returncode == 0 and second.log == "standby at ''\n"
    third = crasher.run(timeout_s=30)
    assert third.returncode == 0 and third.log == "standby at ''\n" and not _STANDBYS


def test_a_standby_no_run_took_is_killed_after_its_test(tmp_path):
    crasher = stand_in(tmp_path, STANDS_BY, standby=True)
    crasher.crash_at(CrashPoint.SINK, 1, timeout_s=30)
    standby, = _STANDBYS
    stop_standbys()
    assert standby.wait(5) == -9 and not session_processes(standby.pid)


def test_a_standby_that_ends_before_its_gate_opens_fails_the_test(tmp_path):
    crasher = stand_in(tmp_path, REACHES_THE_POINT, standby=True)  # knows no gate: reads no crash point
    crasher.crash_at(CrashPoint.SINK, 1, timeout_s=30)
    crasher._next[0].wait(30)
    with pytest.raises(AssertionError, match="the standby of run 2 ended .exit 1. before its gate opened"):
        crasher.run(timeout_s=30)


def test_the_temporary_files_of_a_killed_run_and_of_a_standby_no_run_took_go_with_them(tmp_path):
    crasher = stand_in(tmp_path, FILLS_ITS_TEMPORARY_DIRECTORY, standby=True)
    killed = crasher.crash_at(CrashPoint.SINK, 1, timeout_s=30)
    temporary = Path(killed.log.splitlines()[0])
    assert killed.killed and temporary.is_relative_to(tmp_path) and not temporary.exists()

    standby, = _STANDBYS
    standby_temporary = _wait_for_first_line(tmp_path / "run-02.log")
    assert standby_temporary != temporary and (standby_temporary / "spark-jars").stat().st_size == 1000
    stop_standbys()
    assert not standby_temporary.exists()


def _wait_for_first_line(log: Path) -> Path:
    for _ in range(300):
        if log.read_text().endswith("\n"):
            return Path(log.read_text().splitlines()[0])
        time.sleep(0.1)
    raise AssertionError(f"{log} shows no line")


def _processes() -> list[str]:
    lines = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                lines.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return lines
