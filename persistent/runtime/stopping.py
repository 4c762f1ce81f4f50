"""A job stopped by a signal: Ctrl-C's SIGINT, or SIGTERM (a service manager's stop).

``Job.run`` (``Plan.run``) stops its query on a ``KeyboardInterrupt`` and raises
``JobStopped`` (``RunningJob.stopped_by``), which says in one line where the job stopped: the last micro-batch
committed (``DIR/progress/``, written last in a commit) and the clock. The micro-batch
that was running is not committed; the next start on the same directory replays it.
``persistent.tools.options.run_app`` prints that line and exits with ``128 +`` the
signal's number (130 for SIGINT), as Unix programs do.

``on_signals`` makes SIGINT and SIGTERM such interrupts while a job runs: the signal
is noted, and the job's wait between two looks at its query (``RunningJob.wait``)
raises ``Interrupted`` (``check``), never a call into Spark half done. The job then
stops its query with Spark's log turned off: the micro-batch it interrupts, which the
next start replays, is no error of the job's. Under
``spark-submit`` the driver's JVM is the Python program's parent and gets Ctrl-C's
SIGINT as well; it would stop the SparkContext under the running query. So it ignores
SIGINT as the JVM pyspark starts itself does, and the Python program stops the query.
"""

from __future__ import annotations

import contextlib
import datetime
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from persistent.storage.job_directory import JobDirectory

__all__ = ["Interrupted", "JobStopped", "on_signals", "where", "check"]

#: The signals that stop a running job.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: The signal ``on_signals`` noted, not yet raised as ``Interrupted``.
_noted: list[int] = []


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by the handler ``on_signals`` installs."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class JobStopped(KeyboardInterrupt):
    """A running job stopped by a signal, its query stopped. ``str``: where it stopped,
    one line; ``exit_status``: ``128 +`` the signal's number."""

    def __init__(self, signum: int, where: str):
        super().__init__(f"[persistent] stopped by {signal.Signals(signum).name} {where}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def check() -> None:
    """Raises ``Interrupted`` when ``on_signals`` noted a signal since the last check."""
    if _noted:
        raise Interrupted(_noted.pop())


def where(directory: JobDirectory) -> str:
    """``after micro-batch G.N (committed TIME), clock T ms; ...``: what ``directory``
    records as committed."""
    try:
        progress = directory.read_progress(1)
        clock = directory.clock.read()
    except Exception as exc:  # noqa: BLE001 - the stop is done; say why where is unknown
        return f"(its job directory {directory.root} could not be read: {exc})"
    if progress:
        last = progress[-1]
        committed = datetime.datetime.fromtimestamp(last.finished_at_ms / 1000, tz=datetime.timezone.utc)
        batch = f"after micro-batch {last.generation}.{last.batch} (committed {committed:%Y-%m-%dT%H:%M:%S}Z)"
    else:
        batch = "before its first micro-batch committed"
    at = f"clock {clock.clock_ms} ms" if clock else "no clock yet"
    return f"{batch}, {at}; a start on {directory.root} continues from there"


@contextlib.contextmanager
def on_signals(spark) -> Iterator[None]:
    """While the block runs in the main thread, SIGINT and SIGTERM are noted, for
    ``check`` to raise ``Interrupted`` (so ``Plan.run`` stops the job), and the driver's
    JVM ignores SIGINT; a second signal, while the job stops, ends the program at once,
    as the signal's default does. The previous Python handlers come back after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _jvm_ignores_sigint(spark)
    previous = {each: signal.signal(each, _note) for each in STOP_SIGNALS}
    try:
        yield
    finally:
        _noted.clear()
        for each, handler in previous.items():
            signal.signal(each, handler)


def _note(signum: int, frame) -> None:
    for each in STOP_SIGNALS:
        signal.signal(each, signal.SIG_DFL)
    _noted.append(signum)


def _jvm_ignores_sigint(spark) -> None:
    """Tells the driver's JVM to ignore SIGINT (``sun.misc.Signal``): a JVM pyspark
    started already does; one that does not let it be (an option such as ``-Xrs``) keeps its
    own handling."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("INT"), jvm.sun.misc.SignalHandler.SIG_IGN)
    except Exception:  # noqa: BLE001 - py4j raises its own errors for a refusal
        pass
