"""A query that fails on a dead Python worker ends with one line naming the memory the
workers used (``persistent.runtime.failures``); any other failure is raised as it is.
``tests/spark/test_crash.py`` has the kernel's OOM killer kill the workers for real."""

from __future__ import annotations

import pytest
from test_job_directory import progress

from persistent.core.errors import PythonWorkerLostError
from persistent.runtime.running import RunningJob
from persistent.runtime.recovery import Recovery, RecoveryPath
from persistent.storage.fs import LocalFileSystem
from persistent.storage.job_directory import JobDirectory

#: What Spark's StreamingQueryException says, inside pages of stacks, when a task's
#: Python worker died at each try.
SPARK_SAYS = ("Job aborted due to stage failure: Task 0 in stage 13.0 failed 4 times, most recent failure: "
              "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed).")


class FailedQuery:
    """A streaming query that has failed with ``failure``."""

    def __init__(self, failure: Exception):
        self.failure = failure

    def awaitTermination(self, timeout_s):  # noqa: N802 (Spark's name)
        raise self.failure


@pytest.fixture
def directory(tmp_path):
    return JobDirectory(LocalFileSystem(), str(tmp_path / "job"))


def running(failure: Exception, directory: JobDirectory, generation: int = 1) -> RunningJob:
    """A job of ``generation`` whose query has failed with ``failure``."""
    return RunningJob(FailedQuery(failure), Recovery(RecoveryPath.FROM_CLOCK, generation, 0), directory)


def test_a_dead_worker_ends_the_job_with_one_line_naming_the_memory_of_the_last_micro_batch(directory):
    directory.record_progress(progress(4, keys={"group-00000": 75_096, "group-00001": 74_904},
                                       worker_peak_bytes=187 * 2**20))
    failure = RuntimeError(SPARK_SAYS)
    with pytest.raises(PythonWorkerLostError) as raised:
        running(failure, directory).wait()
    message = str(raised.value)
    assert "\n" not in message and raised.value.__cause__ is failure
    assert message.startswith("a Python worker died under micro-batch 1.5 at each of Spark's tries")
    assert ("in micro-batch 1.4 a Python worker held up to 187 MiB resident, with key groups of up to 75,096 keys"
            in message)
    assert "Nothing of micro-batch 1.5 is committed" in message and directory.root in message
    # The first micro-batch of a generation begun from the clock, after those of the one before.
    with pytest.raises(PythonWorkerLostError, match="under micro-batch 2.0 .* in micro-batch 1.4 a Python worker"):
        running(failure, directory, generation=2).wait()


def test_a_worker_dead_in_the_first_micro_batch_says_none_had_recorded_its_memory(directory):
    with pytest.raises(PythonWorkerLostError, match="under micro-batch 1.0 .* no micro-batch had recorded its "
                                                    "memory before it"):
        running(RuntimeError(SPARK_SAYS), directory).wait()


def test_any_other_failure_is_raised_as_it_is(directory):
    failure = RuntimeError("Job aborted due to stage failure: division by zero")
    with pytest.raises(RuntimeError) as raised:
        running(failure, directory).wait()
    assert raised.value is failure
