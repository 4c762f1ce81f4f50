"""``RunningJob``: a started job, its Spark query and how it started, until it stops."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass

from persistent.core.errors import JobDirectoryInUseError
from persistent.runtime import stopping
from persistent.runtime.failures import worker_lost
from persistent.runtime.progress import ProgressBar
from persistent.runtime.recovery import Recovery
from persistent.storage.job_directory import JobDirectory
from persistent.storage.lease import JobLease

__all__ = ["RunningJob"]

#: How often ``RunningJob.wait`` looks at the query's progress for its progress bar.
_PROGRESS_POLL_SECONDS = 0.5


@dataclass
class RunningJob:
    """A started job: its Spark query and how it started."""

    query: object
    recovery: Recovery
    directory: JobDirectory
    #: What the job holds open until ``stop`` closes it: the metrics server
    #: (``Job.metrics_port``), the source's offset lookups (``Source.rewind_positions``).
    closing: tuple = ()
    #: The job directory's lease, renewed until ``stop`` releases it.
    lease: JobLease | None = None
    #: An available-now run on a Spark without available-now for Python sources
    #: (``persistent.sources.bounds``): ``wait`` stops the query once it has drained.
    drains: bool = False

    def stop(self, quietly: bool = False) -> None:
        """Stops the query, closes what the job held open and releases the directory's
        lease; ``quietly`` (after a signal), with Spark's log off, and a query that cannot
        be reached (Spark shutting down) counts as stopped. Raises ``JobDirectoryInUseError`` when the job had lost
        its lease (and so stopped)."""
        try:
            if quietly:
                # The micro-batch the stop interrupts fails in Spark's log: no error of the job's.
                from pyspark import SparkContext

                context = SparkContext._active_spark_context  # never one made here
                with contextlib.suppress(Exception):
                    if context is not None:
                        context.setLogLevel("OFF")
            self.query.stop()
        except Exception:
            if not quietly:
                raise
        finally:
            for each in self.closing:
                each.close()
            if self.lease is not None:
                self.lease.close()
        if self.lease is not None and self.lease.lost is not None:
            raise JobDirectoryInUseError(self.lease.lost)

    def stopped_by(self, interrupt: KeyboardInterrupt) -> stopping.JobStopped:
        """Stops the job after ``interrupt`` (Ctrl-C, or a signal ``stopping.on_signals``
        noted), Spark's log off (errors of a Spark already shutting down ignored), and
        says where it stopped."""
        self.stop(quietly=True)
        return stopping.JobStopped(getattr(interrupt, "signum", signal.SIGINT), stopping.where(self.directory))

    def wait(self, bar: ProgressBar | None = None) -> None:
        """Waits until the query ends, updating ``bar`` (if any) from Spark's progress
        reports; a signal ``stopping.on_signals`` noted raises ``Interrupted`` here,
        between two looks at the query. A query that fails raises its failure here; one
        whose Python worker died at each try, ``PythonWorkerLostError``."""
        drained = self._drained() if self.drains else None
        try:
            while not self._ended():
                stopping.check()
                if bar is not None:
                    self._update(bar)
                if drained is not None and drained.is_set():
                    self.query.stop()
            if bar is not None:
                self._update(bar)
        finally:
            if bar is not None:
                bar.close()

    def _ended(self) -> bool:
        """Whether the query has ended, after waiting a while for it; raises its failure,
        or ``PythonWorkerLostError`` for one on a dead Python worker (``failures``)."""
        try:
            return self.query.awaitTermination(_PROGRESS_POLL_SECONDS)
        except Exception as failure:
            lost = worker_lost(failure, self.directory, self.recovery.generation)
            if lost is None:
                raise
            raise lost from failure

    def _drained(self) -> threading.Event:
        """Set once the query has processed all there is and has no micro-batch due
        (``processAllAvailable``; ended by a failure too, which ``awaitTermination``
        raises)."""
        drained = threading.Event()

        def drain():
            with contextlib.suppress(Exception):
                self.query.processAllAvailable()
            drained.set()

        threading.Thread(target=drain, name="persistent-drain", daemon=True).start()
        return drained

    def _update(self, bar: ProgressBar) -> None:
        # The run's first report says where it began; later, only the newest matters.
        reports = self.query.recentProgress if bar.begin is None else [self.query.lastProgress]
        reports = [r for r in reports if r is not None and r.sources]
        if reports:
            bar.update(reports[0].sources[0].startOffset, reports[-1].sources[0].endOffset)
