"""How a job starts on what its directory holds: the choice of recovery path.

A job starts in one of three ways (``plan``):

- **fresh**: no clock and no checkpoints yet; everything starts empty. Checkpoints
  without a clock (the clock lost) are an error, not a fresh start.
- **path A**: ``spark/`` holds a query: Spark restores its own state and replays the
  unfinished micro-batch; the framework continues its generation. The clock must be
  readable, since every micro-batch advances it.
- **path B**: ``spark/`` is gone (lost, or a new version of the job) but the clock
  names time ``T``: every task is restored from its checkpoint at exactly ``T``, the
  sources start at ``T``, and messages before ``T`` are dropped (they are inside the
  restored state). A missing or torn checkpoint is an error, never an empty state.

Restore is by reference: the plan checks that every task's checkpoint at ``T`` exists
and records ``T`` and the restored key groups in ``DIR/generation``; each key group
reads its own checkpoint on the executor that runs it (``JobDirectory.restore``),
whenever it has no state in Spark's state store, in any micro-batch of the
generation and after any number of path-A restarts of it. No checkpoint's bytes pass
through the driver.

At-most-once starts its own way, after its position taken
(``persistent.runtime.delivery``); the files and records are the job directory's
(``persistent.storage.job_directory``).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from persistent.core.errors import RestartRefusedError
from persistent.storage.clock_store import ClockRecord
from persistent.storage.job_directory import JobDirectory, task_index, task_name
from persistent.storage.records import Generation
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError

__all__ = ["RecoveryPath", "Recovery", "plan", "state_partitions", "describe_state"]


class RecoveryPath(enum.Enum):
    """How a job (re)starts."""

    FRESH = "fresh"
    SAME_CHECKPOINT = "A"
    FROM_CLOCK = "B"
    #: At-most-once (``persistent.runtime.delivery``): empty state, sources after the position taken.
    AFTER_POSITION = "position"


def state_partitions(key_groups: int, cores: int | None) -> int | None:
    """The state partitions a start with a new Spark checkpoint (fresh, path B, at-most-once's
    restart) spreads ``key_groups`` over: one per core, at most one per group
    (``Recovery.partitions``). None without ``cores``: the groups keyed by their numbers."""
    return min(key_groups, cores) if cores else None


@dataclass(frozen=True)
class Recovery:
    """The plan for one start of a job."""

    path: RecoveryPath
    #: Counts Spark checkpoint generations: a new one starts with each path B.
    generation: int
    #: Restore point: messages before it are inside the restored state (0: none).
    floor_ms: int
    #: Key groups whose state starts from their checkpoint at ``floor_ms`` (a generation
    #: begun by path B).
    restored: frozenset[int] = frozenset()
    #: Whether the generation's query wakes every key group in its first micro-batch
    #: (``persistent.runtime.heartbeats``); generations recorded before that existed do not.
    heartbeats: bool = True
    #: The number of key groups keys hash to in this start.
    key_groups: int = 1
    #: Spark's state partitions the generation's query spreads the key groups over
    #: (``persistent.runtime.layout``); None for a generation recorded before, whose
    #: Spark state is keyed by the groups' numbers.
    partitions: int | None = None
    #: Whether the heartbeats are a file under Spark's checkpoint that Spark's file
    #: source reads (``SparkLog.write_heartbeats``); False for a generation recorded
    #: before, whose query reads them from a Python data source.
    heartbeat_files: bool = True
    #: Whether the generation's query wakes key groups by event-time timeouts
    #: (``persistent.runtime.planner.Plan.wakes_idle_groups``). Spark keeps a timeout
    #: beside each group's state only in a query with them, and refuses a checkpoint of
    #: the other kind: path A keeps what its generation began with.
    timeouts: bool = True

    def describe(self) -> str:
        """One line for the job's log."""
        if self.path is RecoveryPath.FRESH:
            return "fresh start: no checkpoint clock yet"
        if self.path is RecoveryPath.SAME_CHECKPOINT:
            return f"recovery path A: continuing Spark's checkpoint (generation {self.generation})"
        if self.path is RecoveryPath.AFTER_POSITION:
            return (
                f"at-most-once restart: state starts empty and the sources start at {self.floor_ms}, "
                f"after every message taken before (generation {self.generation})"
            )
        return (
            f"recovery path B: Spark's checkpoint is gone; {len(self.restored)} task(s) restore their "
            f"checkpoints at clock {self.floor_ms} and the sources rewind to it (generation {self.generation})"
        )

    def record(self, state: dict | None) -> Generation:
        """The job directory's record of this start, with what the state means."""
        return Generation(self.generation, self.floor_ms, self.key_groups, self.restored, self.heartbeats, state,
                          self.partitions, self.heartbeat_files, self.timeouts)


def describe_state(description: dict) -> str:
    """``state.table_format.describe``'s record in words, for messages."""
    window = description.get("window")
    if not window:
        shape = "no window"
    elif "gap_ms" in window:
        shape = f"session window with a {window['gap_ms']} ms gap"
    else:
        shape = f"window {window['size_ms']} ms every {window['step_ms']} ms"
    ttl = f", keys expiring {description['ttl_ms']} ms behind the watermark" if "ttl_ms" in description else ""
    return (f"monoid {json.dumps(description.get('monoid'), sort_keys=True)}, {shape}, "
            f"checkpoint interval {description.get('interval_ms')} ms{ttl}")


def plan(directory: JobDirectory, key_groups: int | None, default_key_groups: int | None = None,
         description: dict | None = None, sink_generation: int | None = None,
         cores: int | None = None, timeouts: bool = True) -> Recovery:
    """Chooses the recovery path of a start on ``directory``, records it there and, for
    path B, checks that every task of the clock holds its checkpoint at it. Fresh and
    path B delete Spark's checkpoint (a fresh start the files source's log as well).

    The number of key groups is the one the directory was written with; a fresh
    start takes ``key_groups``, or ``default_key_groups`` when that is ``None``. An
    explicit ``key_groups`` must equal the recorded number: keys hash to groups by
    it, so another number would put a key's messages beside another group's state.
    Without the generation file (a directory copied with ``clock/`` and
    ``checkpoints/`` only), the number is the one the clock's tasks name.

    ``description`` says what the job's state means (``state.table_format.describe``:
    monoid, window, checkpoint interval). The directory records it, and a restart
    with another one is refused before anything runs: a checkpoint's buckets and
    windows mean something else under another window or interval.

    ``sink_generation`` is the newest generation the sink holds batches of. Batch
    ids repeat across generations, so a restart must not reuse one the sink holds:
    path B starts the generation after both the recorded one and the sink's (a job
    directory copied without its generation file starts after the sink's); path A
    refuses when the sink holds a newer generation than the one recorded, since
    which generation Spark's checkpoint belongs to cannot be told then.

    A start with a new Spark checkpoint (fresh, path B) spreads the key groups over
    ``state_partitions(key_groups, cores)`` (``Recovery.partitions``); path A keeps
    the recorded ones, which Spark's checkpoint holds its state in, and is refused
    without the generation file, since how Spark keys that state cannot be told then.
    Likewise a new Spark checkpoint's query sets event-time timeouts if ``timeouts``
    (``Recovery.timeouts``), and path A keeps what its generation recorded.
    """
    current = directory.read_generation()
    state = _state(directory, current, description)
    recorded = _recorded_key_groups(directory, current, key_groups)
    same_checkpoint = directory.spark_log.started()
    # Path A needs a readable clock as well: every micro-batch advances it.
    record = _read_clock(directory, check=not same_checkpoint)
    if current is None and record is not None and record.task_clocks:
        recorded = _clock_key_groups(directory, record, key_groups)
    key_groups = key_groups or recorded or default_key_groups
    if key_groups is None:
        raise RestartRefusedError(f"{directory.root} records no number of key groups: give the job's key_groups")
    partitions = state_partitions(key_groups, cores)
    if same_checkpoint:
        start = _same_checkpoint(directory, current, key_groups, sink_generation)
    elif record is None:
        start = _fresh(directory, key_groups, partitions, timeouts)
    else:
        generation = max(current.generation if current else 0, sink_generation or 0) + 1
        start = _from_clock(directory, record, generation, key_groups, partitions, timeouts)
    directory.record_generation(start.record(state))
    return start


def _state(directory: JobDirectory, current: Generation | None, description: dict | None) -> dict | None:
    """What the job's state means, as the start records it: ``description``, else the
    meaning ``current`` records. A ``description`` other than the recorded one is
    refused: a checkpoint's buckets and windows mean something else under another
    window or interval."""
    recorded = current.state if current else None
    if description is not None:
        description = json.loads(json.dumps(description))  # as recorded: tuples become lists
    if description is not None and recorded not in (None, description):
        raise RestartRefusedError(
            f"{directory.root} holds the state of a job with {describe_state(recorded)}; this job has "
            f"{describe_state(description)}. Restart it with the recorded settings, or give it a new "
            f"checkpoint directory (and a new output) to start over"
        )
    return description or recorded


def _recorded_key_groups(directory: JobDirectory, current: Generation | None, key_groups: int | None) -> int | None:
    """The number of key groups ``current`` records (None: none); an explicit
    ``key_groups`` must equal it."""
    recorded = current.key_groups if current else None
    if key_groups is not None and recorded not in (None, key_groups):
        raise RestartRefusedError(
            f"{directory.root} was written with key_groups={recorded}, this job has "
            f"key_groups={key_groups}: run it with key_groups={recorded} (or without key_groups); to "
            f"change the number, delete {directory.spark} and start the job with key_groups={key_groups}: it "
            f"restarts from the clock and re-splits every checkpoint into the new groups "
            f"(persistent.runtime.rescale)"
        )
    return recorded


def _same_checkpoint(directory: JobDirectory, current: Generation | None, key_groups: int,
                     sink_generation: int | None) -> Recovery:
    """Path A: the recorded generation goes on in Spark's checkpoint, with the state
    partitions, heartbeats and timeouts it began with. Refused when which generation
    the checkpoint belongs to cannot be told (the sink holds a newer one), or how it
    keys its state (no generation file)."""
    root, spark = directory.root, directory.spark
    recorded_generation = current.generation if current else 0
    if sink_generation is not None and sink_generation > recorded_generation:
        raise RestartRefusedError(
            f"the sink holds results of generation {sink_generation}, but {root} records generation "
            f"{recorded_generation}{'' if current else ' (its generation file is missing)'}: which generation "
            f"{spark} belongs to cannot be told. Delete {spark} to restart from the clock, in a "
            f"generation after {sink_generation}"
        )
    if current is None:
        raise RestartRefusedError(
            f"{root}: the generation file is missing, and with it how Spark's checkpoint {spark} "
            f"keys its state (by key group or by slot, persistent.runtime.layout) cannot be told. Delete "
            f"{spark} to restart from the clock (path B)"
        )
    if current.partitions is not None and not 1 <= current.partitions <= key_groups:
        raise CorruptCheckpointError(
            f"{directory.generation_file} is corrupt: its {current.partitions} partitions are not between 1 and "
            f"its {key_groups} key groups; delete it and {spark} to restart from the clock",
            directory.generation_file,
        )
    # The heartbeats the Spark checkpoint's query reads: also a file when an earlier
    # version rewrote the record without the field, since only this one writes it.
    heartbeat_files = current.heartbeat_files or directory.fs.exists(directory.spark_log.heartbeats)
    return Recovery(RecoveryPath.SAME_CHECKPOINT, current.generation, current.floor_ms, current.restored,
                    current.heartbeats, key_groups, current.partitions, heartbeat_files, current.timeouts)


def _fresh(directory: JobDirectory, key_groups: int, partitions: int | None, timeouts: bool) -> Recovery:
    """A fresh start, without a clock: Spark's checkpoint and the files source's log are
    deleted and everything starts empty. Checkpoints without the clock are refused."""
    _refuse_checkpoints_without_clock(directory)
    directory.spark_log.delete()
    directory.delete_input_log()
    return Recovery(RecoveryPath.FRESH, 0, 0, key_groups=key_groups, partitions=partitions, timeouts=timeouts)


def _from_clock(directory: JobDirectory, record: ClockRecord, generation: int, key_groups: int,
                partitions: int | None, timeouts: bool) -> Recovery:
    """Path B: Spark's checkpoint is deleted, and ``generation`` restores every task of
    the clock ``record`` from its checkpoint at the clock (``_read_clock`` checked that
    each exists)."""
    directory.spark_log.delete()
    restored = frozenset(map(task_index, record.task_clocks))
    return Recovery(RecoveryPath.FROM_CLOCK, generation, record.clock_ms, restored, key_groups=key_groups,
                    partitions=partitions, timeouts=timeouts)


def _clock_key_groups(directory: JobDirectory, record: ClockRecord, key_groups: int | None) -> int:
    """The number of key groups of a directory without its generation file (copied
    with its ``clock/`` and ``checkpoints/`` only): the clock's task clocks name every
    key group. An explicit ``key_groups`` must equal it."""
    named = max(map(task_index, record.task_clocks)) + 1
    if key_groups not in (None, named):
        raise RestartRefusedError(
            f"{directory.root} has no generation file, and its clock names {named} key groups (tasks "
            f"{task_name(0)} to {task_name(named - 1)}); this job has key_groups={key_groups}: run it with "
            f"key_groups={named} (or without key_groups). To change the number, start it once that way, "
            f"then stop it, delete {directory.spark} and start it with key_groups={key_groups}: it restarts "
            f"from the clock and re-splits every checkpoint into the new groups (persistent.runtime.rescale)"
        )
    return named


def _refuse_checkpoints_without_clock(directory: JobDirectory) -> None:
    # Starting empty beside checkpoints would silently drop the state they hold.
    held = {group: set(times) for group in directory.groups() if (times := directory.store(group).times())}
    if not held:
        return
    checkpoints = directory.checkpoints
    common = set.intersection(*held.values())
    if common:
        newest = max(common)
        remedy = (
            f"the newest time every task holds is {newest} ms: to restart there, set the clock with "
            f"ClockStore.advance({newest}, {{task: {newest} for each task directory in {checkpoints}}})"
        )
    else:
        remedy = "no time is held by every task"
    raise ClockError(
        f"{directory.clock.path} is missing but {checkpoints} holds checkpoints of {len(held)} task(s); "
        f"{remedy}; or delete {checkpoints} to start with empty state"
    )


def _read_clock(directory: JobDirectory, check: bool) -> ClockRecord | None:
    """The clock; if ``check``, every task's checkpoint at it must exist.

    A damaged clock or a missing checkpoint raises (never an empty state), with a
    note naming the command that restarts from the newest intact clock in the history.
    """
    try:
        record = directory.clock.read()
        if check and record:
            for task in record.task_clocks:
                directory.store(task_index(task)).require(record.clock_ms)
        return record
    except (ClockError, CorruptCheckpointError, MissingCheckpointError) as exc:
        exc.add_note(directory.rewind_advice())
        raise
