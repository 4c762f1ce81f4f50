"""Under CI every collected test runs: a skipped, expected-to-fail or deselected test fails
the run, and the summary lists each with its reason (a local run lists them too, and
passes). A pytest plugin, registered by ``tests/conftest.py``.

Under pytest-xdist (``make test`` runs the tests in two processes) each worker collects
the tests and deselects its own; it hands its deselections to the controlling process,
which judges the run. Skips reach the controlling process as the tests' reports do.
"""

from __future__ import annotations

import pytest

from profiles import CI

#: Tests this run did not run, each with its reason, in the order they were found.
_NOT_RUN: dict[str, None] = {}
#: The deselected tests of ``_NOT_RUN``, which a pytest-xdist worker hands over.
_DESELECTED: list[str] = []


def pytest_deselected(items):
    lines = [f"{item.nodeid}: deselected" for item in items]
    _DESELECTED.extend(lines)
    _NOT_RUN.update(dict.fromkeys(lines))


def pytest_runtest_logreport(report):
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        kind = "expected to fail" if hasattr(report, "wasxfail") else "skipped"
        _NOT_RUN[f"{report.nodeid}: {kind} ({reason})"] = None


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_testnodedown(node, error):
    """A worker's deselections (every worker deselects the same tests: listed once)."""
    _NOT_RUN.update(dict.fromkeys(getattr(node, "workeroutput", {}).get("deselected", [])))


def pytest_sessionfinish(session, exitstatus):
    """Under CI every test runs: a skip or a deselection fails the run."""
    handed_over = getattr(session.config, "workeroutput", None)
    if handed_over is not None:  # an xdist worker: its skips went with its reports
        handed_over["deselected"] = _DESELECTED
    elif CI and _NOT_RUN and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _NOT_RUN:
        verdict = "each fails the run under CI" if CI else "under CI each would fail the run"
        terminalreporter.section(f"{len(_NOT_RUN)} tests not run ({verdict})")
        for line in _NOT_RUN:
            terminalreporter.write_line(line)
