"""Errors raised by ``persistent``, under one root, ``PersistentError``.

As in ``state.errors``, each inherits the matching builtin as well, so callers may
catch ``ValueError``, ``TypeError`` or ``RuntimeError`` as usual; messages name what
was wrong, where, and what to do. Errors of the states and their stores (a torn
checkpoint, a clock that would move backwards, a full disk) are ``state.errors``'.
"""

from __future__ import annotations

__all__ = [
    "PersistentError",
    "ConfigError",
    "RestartRefusedError",
    "JobDirectoryError",
    "InputError",
    "SetupError",
    "OutputError",
    "JobDirectoryInUseError",
    "PythonWorkerLostError",
]


class PersistentError(Exception):
    """Root of the errors raised by ``persistent``."""


class ConfigError(PersistentError, ValueError):
    """A job, source, sink or URI given a setting that cannot work, refused before
    anything runs (a count that must be positive, a choice that is none of the choices)."""


class RestartRefusedError(PersistentError, ValueError):
    """A start that would mix what a job directory or a sink holds with another job's:
    another state, number of key groups or delivery, an unknown generation, a sink
    holding an earlier run's results, a rescale half done. Nothing has changed."""


class JobDirectoryError(PersistentError, ValueError):
    """A job directory, or a file in it, cannot be used; the message says which and why."""


class InputError(PersistentError, ValueError):
    """A source's input cannot be read exactly as before: changed, deleted or unreadable."""


class SetupError(PersistentError, RuntimeError):
    """The machine or the cluster lacks something a job needs (Java, a package, a connector)."""


class OutputError(PersistentError, RuntimeError):
    """A sink could not write a micro-batch's results (its brokers down, a transaction
    refused): nothing of the micro-batch is committed, and a restart replays it."""


class JobDirectoryInUseError(SetupError):
    """Another job (or ``persistent rewind``) holds the job directory's lease
    (``persistent.storage.lease``); the message names it. Nothing has been written."""


class PythonWorkerLostError(SetupError):
    """A Python worker died under a micro-batch (a SIGKILL, most often the OOM killer's)
    each time Spark tried it, and the query failed; the message names the memory the
    workers had used. Nothing of the micro-batch is committed, and a restart replays it."""
