"""A job's checkpoint directory, read without a JVM, and rewound.

``open_job`` serves local paths and ``file://`` URIs directly and ``webhdfs://`` and
``hdfs://`` URIs over HTTP (``persistent.storage.filesystems``); the layout is
``persistent.storage.job_directory``'s.
``read_state`` reads the state of the tasks in their checkpoints at a time (decoded by
what the checkpoints name: no task class needed), and ``rewind`` prepares a restart
from an earlier checkpoint (path B). The progress records the runtime writes per
committed micro-batch are ``JobDirectory.read_progress``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from persistent.core.errors import JobDirectoryError, JobDirectoryInUseError
from persistent.storage.checkpoint_store import CheckpointStore, describe_times
from persistent.storage.clock_store import ClockRecord
from persistent.storage.filesystems import UnsupportedFileSystemError, filesystem_for
from persistent.storage.job_directory import JobDirectory, pipeline_stages, task_index, task_name
from persistent.storage.lease import JobLease
from state.errors import ClockError
from state.tables import chain_table, read_table

__all__ = [
    "JobDirectoryError",
    "StateRow",
    "Rewound",
    "open_job",
    "open_pipeline",
    "task_names",
    "times_held",
    "read_state",
    "rewind",
]

def open_job(uri: str) -> JobDirectory:
    """The job directory at ``uri``; ``JobDirectoryError`` unless it exists and looks like one."""
    try:
        fs = filesystem_for(uri)
    except UnsupportedFileSystemError as exc:
        raise JobDirectoryError(str(exc)) from None
    directory = JobDirectory(fs, uri)
    if not fs.exists(directory.root):
        raise JobDirectoryError(f"{uri} does not exist")
    if not directory.holds_a_job():
        raise JobDirectoryError(
            f"{uri} is not a job's checkpoint directory: it holds none of {', '.join(JobDirectory.MARKS)}"
        )
    return directory


def open_pipeline(uri: str) -> list[str]:
    """The stages' job directories of the pipeline at ``uri``
    (``persistent.runtime.pipeline``), in order; none when ``uri`` holds a job or no stage."""
    try:
        fs = filesystem_for(uri)
    except UnsupportedFileSystemError as exc:
        raise JobDirectoryError(str(exc)) from None
    if not fs.exists(uri) or JobDirectory(fs, uri).holds_a_job():
        return []
    return pipeline_stages(fs, uri)


def task_names(directory: JobDirectory) -> list[str]:
    """The tasks that have a checkpoint directory, sorted."""
    return [task_name(group) for group in directory.groups()]


def _store(directory: JobDirectory, task: str) -> CheckpointStore:
    return directory.store(task_index(task))


@dataclass(frozen=True)
class StateRow:
    """The state of one key (and window) in a checkpoint."""

    task: str
    key: object
    #: ``[window_start_ms, window_end_ms)`` of a windowed state, else ``None``.
    window_start_ms: int | None
    window_end_ms: int | None
    #: The monoid's value, and how the task's results present it.
    value: object
    presented: object


def read_state(directory: JobDirectory, at_ms: int, tasks: list[str]) -> Iterator[StateRow]:
    """The state of every key of ``tasks`` in their checkpoints at ``at_ms``.

    Rows come per task, by key (as text) and window. Windowed states give one row per
    window not yet closed that holds data: the fold of its panes before ``at_ms``.
    Raises ``MissingCheckpointError`` or ``CorruptCheckpointError`` for a task without
    a readable checkpoint there, ``StateValueError`` when its monoid is unknown.
    """
    for task in tasks:
        store = _store(directory, task)
        chain = store.recover(at_ms)
        table = chain_table(chain, [read_table(stored.data, f"checkpoint {store.path(stored.time_ms)}")
                                    for stored in chain])
        monoid = table.monoid
        if table.window is None:
            keys, column = table.totals()
            starts = ends = [None] * len(keys)
        else:
            windows = table.open_windows()
            keys, column = windows.keys, windows.values
            starts, ends = windows.starts_ms.tolist(), windows.ends_ms.tolist()
        keys, values, presented = keys.tolist(), monoid.values(column), monoid.present_column(column).tolist()
        for i in sorted(range(len(keys)), key=lambda i: (str(keys[i]), starts[i] or 0)):
            yield StateRow(task, keys[i], starts[i], ends[i], values[i], presented[i])


def times_held(directory: JobDirectory, tasks: list[str]) -> dict[str, list[int]]:
    """The checkpoint times (ms) each of ``tasks`` holds."""
    return {task: _store(directory, task).times() for task in tasks}


@dataclass(frozen=True)
class Rewound:
    """What ``rewind`` did."""

    #: The clock before (``None`` if it was corrupt).
    from_ms: int | None
    to_ms: int
    #: Tasks the next start restores at ``to_ms``.
    tasks: int
    #: Checkpoints after ``to_ms`` that were deleted.
    deleted_checkpoints: int
    #: Whether Spark's checkpoint location existed (and was deleted).
    deleted_spark: bool


def rewind(directory: JobDirectory, to_ms: int) -> Rewound:
    """Prepares a restart from the checkpoints at ``to_ms`` (recovery path B).

    ``to_ms`` must be a clock in the clock's history, and every task of that clock
    must hold a readable checkpoint at ``to_ms``: otherwise ``JobDirectoryError``
    (naming the tasks and the times they hold) and nothing changes. Then Spark's
    checkpoint location is deleted (so the next start takes path B), the clock is
    rewound (``ClockStore.rewind``) and the checkpoints after ``to_ms`` are deleted.
    Stop the job first: a running job would keep writing the old timeline. The rewind
    holds the directory's lease (``persistent.storage.lease``): while a job holds it,
    ``JobDirectoryInUseError`` naming the job, and nothing changes.
    """
    try:
        lease = JobLease.acquire(directory, "persistent rewind")
    except JobDirectoryInUseError as exc:
        raise JobDirectoryInUseError(f"cannot rewind while a job runs: {exc}") from None
    with lease:
        return _rewind(directory, to_ms)


def _rewind(directory: JobDirectory, to_ms: int) -> Rewound:
    clock = directory.clock
    try:
        current = clock.read()
    except ClockError:
        current = None  # a corrupt clock is what a rewind repairs
    past = clock.history()
    target = next((record for record in reversed(past) if record.clock_ms == to_ms), None)
    if target is None:
        held = ", ".join(str(ms) for ms in sorted({r.clock_ms for r in past})) or "none"
        raise JobDirectoryError(
            f"cannot rewind {directory.root} to {to_ms} ms: the clock's history does not hold it "
            f"(clocks in the history: {held} ms); the history names the tasks that must restart there"
        )
    _check_restorable(directory, target)
    deleted_spark = directory.spark_log.delete()
    clock.rewind(to_ms)
    deleted = 0
    for task in task_names(directory):
        store = _store(directory, task)
        deleted += sum(1 for ms in store.times() if ms > to_ms)
        store.delete_after(to_ms)
    return Rewound(
        from_ms=current.clock_ms if current else None,
        to_ms=to_ms,
        tasks=len(target.task_clocks),
        deleted_checkpoints=deleted,
        deleted_spark=deleted_spark,
    )


def _check_restorable(directory: JobDirectory, target: ClockRecord) -> None:
    """Raises unless every task of ``target`` holds a readable checkpoint at its clock."""
    at_ms = target.clock_ms
    held = times_held(directory, list(target.task_clocks))
    lacking = {task: times for task, times in held.items() if at_ms not in times}
    if lacking:
        described = "; ".join(f"{task} holds {describe_times(times)}" for task, times in lacking.items())
        raise JobDirectoryError(
            f"cannot rewind {directory.root} to {at_ms} ms: "
            f"{len(lacking)} task(s) lack a checkpoint there ({described})"
        )
    for task in target.task_clocks:
        _store(directory, task).recover(at_ms)  # raises for a torn, corrupt or missing checkpoint of its chain
