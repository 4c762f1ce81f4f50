"""What the tests' server and archive set-up says when a run fails."""

from __future__ import annotations

from jvm_servers import failure

TRACEBACK = """Traceback (most recent call last):
  File "examples/count.py", line 1, in <module>
    from monoids import Count
ModuleNotFoundError: No module named 'monoids'"""


def test_a_failed_runs_python_traceback_is_its_failure_without_sparks_lines_around_it():
    stderr = ("26/11/27 WARN Utils: Your hostname resolves to a loopback address\n" * 100 + TRACEBACK
              + "\n26/11/27 INFO ShutdownHookManager: Shutdown hook called\n" * 100)
    assert failure(stderr) == TRACEBACK


def test_without_a_traceback_the_failure_is_the_end_of_stderr():
    stderr = "x" * 5_000 + "Error: Missing application resource."
    assert failure(stderr) == stderr[-2_000:]
