"""Under CI a run that skipped or deselected a test fails (``every_test_runs``), also when
pytest-xdist runs the tests in several processes, as ``make test`` does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))

SUITE = """
import pytest

def test_runs():
    pass

def test_deselected():
    pass

def test_skipped():
    pytest.skip("no mount here")
"""


def run(directory, ci: bool, *options: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": TESTS}
    environment.pop("CI", None)
    if ci:
        environment["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "every_test_runs", "-p", "no:cacheprovider",
                           "-k", "not deselected", *options, str(directory)],
                          cwd=directory, env=environment, capture_output=True, text=True)


XDIST = ["-n", "2", "--dist", "loadgroup"]


@pytest.mark.parametrize("ci, processes", [(True, []), (True, XDIST), (False, [])],
                         ids=["CI, one process", "CI, xdist", "local, one process"])
def test_a_skip_or_a_deselection_fails_the_run_under_ci_and_is_listed_in_any_run(tmp_path, ci, processes):
    (tmp_path / "test_suite.py").write_text(SUITE)

    done = run(tmp_path, ci, *processes)

    assert done.returncode == (pytest.ExitCode.TESTS_FAILED if ci else pytest.ExitCode.OK), done.stdout
    verdict = "each fails the run under CI" if ci else "under CI each would fail the run"
    summary = done.stdout[done.stdout.index(f"2 tests not run ({verdict})"):]
    assert "test_suite.py::test_deselected: deselected" in summary, done.stdout
    assert "test_suite.py::test_skipped: skipped (Skipped: no mount here)" in summary, done.stdout
