"""A job stopped by SIGINT (Ctrl-C) or SIGTERM (``persistent.runtime.stopping``): its query
is stopped, what it held open is closed, one line says after which committed micro-batch
and at which clock it stopped, and the application exits with 128 + the signal's number.

The running job is a ``RunningJob`` of a fake query on a real job directory (``JobWriter``);
``tests/spark`` runs the same with Spark.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import pytest

from persistent.examples.count import VectorizedCount
from persistent.runtime.running import RunningJob
from persistent.runtime.stopping import Interrupted, JobStopped, check, on_signals
from persistent.tools import options

from jobwriter import JobWriter


class Query:
    """A streaming query whose ``stop`` fails as one does once Spark has shut down, or not."""

    def __init__(self, fails: bool = True):
        self.fails, self.stops = fails, 0

    def stop(self):
        self.stops += 1
        if self.fails:
            raise RuntimeError("Cannot call methods on a stopped SparkContext")


class Held:
    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def where(counting_job: JobWriter) -> str:
    return (f"after micro-batch 0.3 (committed 2023-11-14T22:13:23Z), clock 400 ms; "
            f"a start on {counting_job.directory.root} continues from there")


@pytest.mark.parametrize("interrupt, name, status", [(KeyboardInterrupt(), "SIGINT", 130),
                                                     (Interrupted(signal.SIGTERM), "SIGTERM", 143)])
def test_a_stopped_job_says_in_one_line_after_which_batch_and_at_which_clock(counting_job, interrupt, name, status):
    query, held = Query(), Held()
    stop = RunningJob(query, None, counting_job.directory, (held,)).stopped_by(interrupt)
    assert str(stop) == f"[persistent] stopped by {name} {where(counting_job)}"
    assert (stop.exit_status, query.stops, held.closed) == (status, 1, True)
    assert isinstance(stop, KeyboardInterrupt)  # a program that does not catch it still ends as on Ctrl-C


def test_stopping_a_job_starts_no_spark_of_its_own(counting_job):
    from pyspark import SparkContext

    RunningJob(Query(), None, counting_job.directory).stopped_by(KeyboardInterrupt())
    assert SparkContext._jvm is None and SparkContext._active_spark_context is None


def test_the_line_names_the_last_committed_batch_and_claims_none_after_it(counting_job):
    counting_job.batch([("a", 450, 1)], finished_at_ms=1_700_000_004_000)
    stop = RunningJob(Query(), None, counting_job.directory).stopped_by(KeyboardInterrupt())
    assert "after micro-batch 0.4 (committed 2023-11-14T22:13:24Z), clock 400 ms;" in str(stop)


def test_a_job_stopped_before_its_first_batch_committed_says_so(tmp_path):
    writer = JobWriter(str(tmp_path / "job"), VectorizedCount())
    stop = RunningJob(Query(), None, writer.directory).stopped_by(KeyboardInterrupt())
    assert str(stop) == (f"[persistent] stopped by SIGINT before its first micro-batch committed, no clock yet; "
                         f"a start on {writer.directory.root} continues from there")


def test_a_stop_that_is_not_after_a_signal_reports_the_querys_failure_and_still_closes(counting_job):
    held = Held()
    with pytest.raises(RuntimeError, match="stopped SparkContext"):
        RunningJob(Query(), None, counting_job.directory, (held,)).stop()
    assert held.closed


@pytest.fixture
def handlers():
    """Puts SIGINT's and SIGTERM's handlers back after the test."""
    before = {each: signal.getsignal(each) for each in (signal.SIGINT, signal.SIGTERM)}
    yield before
    for each, handler in before.items():
        signal.signal(each, handler)


class NoSpark:
    """A session whose JVM cannot be reached (``on_signals`` leaves it be)."""

    class sparkContext:
        _jvm = None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_job_runs_interrupts_its_wait_and_a_second_one_ends_the_program(handlers, signum):
    with pytest.raises(Interrupted) as raised:
        with on_signals(NoSpark()):
            os.kill(os.getpid(), signum)
            time.sleep(0.5)  # the handler notes it, and raises nothing inside a call into Spark
            check()
    assert raised.value.signum == signum
    assert {each: signal.getsignal(each) for each in handlers} == handlers  # restored after the block


def test_while_the_job_stops_a_second_signal_takes_the_default_action(handlers):
    seen = {}
    with pytest.raises(Interrupted):
        with on_signals(NoSpark()):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)
                check()
            finally:
                seen = {each: signal.getsignal(each) for each in handlers}
    assert seen == {signal.SIGINT: signal.SIG_DFL, signal.SIGTERM: signal.SIG_DFL}


def test_an_application_stopped_by_a_signal_prints_the_line_and_exits_128_plus_the_signal(
        counting_job, monkeypatch, capsys):
    line = f"[persistent] stopped by SIGTERM {where(counting_job)}"

    def run(job, args, app_name, spark):
        raise JobStopped(signal.SIGTERM, where(counting_job))

    monkeypatch.setattr(options, "run", run)
    parser = argparse.ArgumentParser(prog="app.py")
    assert options.run_app(parser, lambda args: None, "app", []) == 143
    assert capsys.readouterr() == ("", line + "\n")
