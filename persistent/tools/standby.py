"""A standby run for the crash tests: Spark started before the job looks at anything.

``PERSISTENT_STANDBY=FILE`` makes an application (``persistent.tools.options.run_app``)
start its Spark session and then wait until ``FILE`` exists before it makes its job:
the job's directory, source and sink are looked at only after that.

A crash test starts the next run this way while the current one runs, kills the current
one and then creates ``FILE``: the restart skips the seconds a cold start spends
starting the JVM and the SparkContext, and is still a new process that reads its state
from the disk. ``FILE`` holds the run's crash point (``PERSISTENT_CRASH_POINT=@FILE``,
``persistent.storage.faults``), which the test chooses only when it opens the gate.
"""

from __future__ import annotations

import os
import time

from persistent.runtime.progress import stderr
from persistent.storage.fs import LocalFileSystem

__all__ = ["standby_session"]

_VARIABLE = "PERSISTENT_STANDBY"
#: How often a standby looks for its file.
_POLL_S = 0.02


def standby_session(app_name: str, args):
    """Under ``PERSISTENT_STANDBY``, the Spark session ``spark_session(app_name,
    args.master)`` (``args``: the application's options) once the file exists;
    otherwise None, and nothing started."""
    gate = os.environ.get(_VARIABLE)
    if not gate:
        return None
    from persistent.tools.session import spark_session

    spark = spark_session(app_name, args.master)
    stderr.line(f"[persistent] standby: Spark started, waiting for {gate}")
    while not LocalFileSystem().exists(gate):
        time.sleep(_POLL_S)
    return spark
