"""The one line a query that failed on a dead Python worker ends with.

When the kernel's OOM killer (or anything else) SIGKILLs a Python worker in the middle
of a micro-batch, Spark retries its task, and after ``spark.task.maxFailures``
attempts fails the query with pages of Java and Python stacks. The job ends instead
with one ``PythonWorkerLostError`` that names the memory the workers needed: the
largest peak resident memory of a worker and the largest key group, both from the
last micro-batch the job directory recorded (``BatchProgress``).
"""

from __future__ import annotations

from persistent.core.errors import PythonWorkerLostError
from persistent.storage.job_directory import JobDirectory

__all__ = ["WORKER_DIED", "worker_lost"]

#: What Spark says of a task whose Python worker died under it.
WORKER_DIED = "Python worker exited unexpectedly"


def worker_lost(failure: BaseException, directory: JobDirectory, generation: int) -> PythonWorkerLostError | None:
    """The error to end with for the query's ``failure``, which names a dead Python
    worker, in the running ``generation``; None for any other failure."""
    if WORKER_DIED not in str(failure):
        return None
    last = next(iter(directory.read_progress(1)), None)
    which = f"micro-batch {generation}.{last.batch + 1 if last and last.generation == generation else 0}"
    if last is None or last.worker_peak_bytes is None:
        used = "no micro-batch had recorded its memory before it"
    else:
        used = (f"in micro-batch {last.generation}.{last.batch} a Python worker held up to "
                f"{last.worker_peak_bytes / 2**20:,.0f} MiB resident, with key groups of up to "
                f"{max(last.keys.values(), default=0):,} keys (new keys add to that)")
    return PythonWorkerLostError(
        f"a Python worker died under {which} at each of Spark's tries (Spark: \"{WORKER_DIED}\"), most likely "
        f"killed for memory by the OOM killer: {used}. Nothing of {which} is committed. Give the Python "
        f"workers more memory (spark.executor.memoryOverhead, or the container's limit) or the job more key "
        f"groups, then start it again on {directory.root}: it replays the micro-batch.")
