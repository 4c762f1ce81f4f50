"""The layout of a job's checkpoint directory and the choice of recovery path.

::

    DIR/spark/                 Spark's checkpoint location (offsets, commits, state store)
    DIR/spark/heartbeats/      the heartbeat rows of the generation's first micro-batch
                               (``JobDirectory.write_heartbeats``)
    DIR/checkpoints/<task>/    each key group's checkpoints, one file per checkpoint time
    DIR/clock/                 the global minimum checkpoint clock and per-task clocks
    DIR/generation             which Spark checkpoint generation runs, its restore point, the
                               restored key groups and the number of key groups (``Generation``)
    DIR/progress/              one JSON record per committed micro-batch, the newest 100
                               (``BatchProgress``)
    DIR/input/                 the files source's log of the files it took
                               (``persistent.storage.files_log``)
    DIR/failed-batch           the micro-batch that last failed on a bad record, before
                               any of its effects (its input may be fixed for the replay;
                               ``FailedBatch``)
    DIR/delivery               the delivery setting the directory was written with
                               (``persistent.runtime.delivery``)
    DIR/position               at-most-once's position taken (``DeliveryPosition``)
    DIR/rewind/<T>             where a source that records it (Kafka) rewinds to for clock
                               ``T``, written before the clock reaches ``T`` (``RewindPositions``)
    DIR/rescale/               only while key groups are re-split (``persistent.runtime.rescale``):
                               the staged checkpoints, then the plan (``RescalePlan``)
    DIR/dead-letters/          the dead-letter output, unless the job names another directory
                               (``JobDirectory.default_dead_letters``)

Each small JSON record is a frozen dataclass (``Record``); reading one that is no
JSON, lacks a field or holds a wrong type raises ``CorruptCheckpointError`` naming
its file.

A job starts in one of three ways:

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
"""

from __future__ import annotations

import enum
import json
import re
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Self, TypeVar

from persistent.core.errors import RestartRefusedError
from state.checkpoint_store import CheckpointStore
from state.clock_store import ClockRecord, ClockStore, verify_clock
from state.errors import ClockError, CorruptCheckpointError, MissingCheckpointError
from state.fs import FileSystem

__all__ = [
    "JobDirectory",
    "state_partitions",
    "RecoveryPath",
    "Recovery",
    "Record",
    "Generation",
    "BatchProgress",
    "FailedBatch",
    "DeliveryPosition",
    "RescalePlan",
    "RewindPositions",
    "task_name",
    "task_index",
    "PROGRESS_KEPT",
]

#: How many micro-batch progress records a job directory keeps.
PROGRESS_KEPT = 100
#: A progress record's name: ``<generation:06d>-<batch:012d>.json``.
_PROGRESS_NAME = re.compile(r"\d{6}-\d{12}\.json")


def task_name(group: int) -> str:
    """The task (checkpoint store) name of key group ``group``."""
    return f"group-{group:05d}"


def task_index(name: str) -> int:
    """Inverse of ``task_name``."""
    return int(name.rsplit("-", 1)[1])


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
    #: source reads (``JobDirectory.write_heartbeats``); False for a generation recorded
    #: before, whose query reads them from a Python data source.
    heartbeat_files: bool = True

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


class Record:
    """A small JSON record of the job directory: a frozen dataclass whose fields are the
    keys of one JSON object. ``from_json`` checks each field against its annotation; a
    field with a default may be missing (records written by earlier versions lack it).
    A ``frozenset`` field is stored as a sorted list."""

    def to_json(self) -> bytes:
        """The stored form: the fields as one JSON object, keys sorted."""
        # The only values JSON has no form for are the frozensets.
        return json.dumps(asdict(self), sort_keys=True, default=sorted).encode()

    @classmethod
    def from_json(cls, raw: bytes, path: str, remedy: str = "") -> Self:
        """The record in ``raw``, read from ``path``. Unless it is one, raises
        ``CorruptCheckpointError`` naming ``path``, what is wrong and ``remedy`` (what to do)."""

        def corrupt(problem: str) -> CorruptCheckpointError:
            return CorruptCheckpointError(f"{path} is corrupt: {problem}" + (f"; {remedy}" if remedy else ""), path)

        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise corrupt(f"not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise corrupt(f"holds {type(record).__name__}, not an object")
        hints = typing.get_type_hints(cls)
        values = {}
        for each in fields(cls):
            if each.name not in record:
                if each.default is MISSING and each.default_factory is MISSING:
                    raise corrupt(f"lacks the field {each.name!r}")
                continue
            value, hint = record[each.name], hints[each.name]
            if not _fits(value, hint):
                raise corrupt(f"field {each.name!r} must be {_kind(hint)}, got {value!r}")
            values[each.name] = frozenset(value) if typing.get_origin(hint) is frozenset else value
        return cls(**values)


def _fits(value: object, hint) -> bool:
    """Whether the JSON ``value`` may be a field annotated ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:
        return any(_fits(value, arg) for arg in args)
    if origin is dict:  # JSON's keys are strings
        return isinstance(value, dict) and all(_fits(item, args[1]) for item in value.values())
    if origin is frozenset:
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    if hint in (int, float):  # true and false are no numbers; an int is a float's value as well
        return not isinstance(value, bool) and isinstance(value, int if hint is int else (int, float))
    return isinstance(value, hint)


_KINDS = {bool: "true or false", int: "an int", float: "a number", str: "a string", dict: "an object",
          type(None): "null"}


def _kind(hint) -> str:
    """``hint`` in JSON's words, for messages."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType:
        return " or ".join(map(_kind, args))
    if origin is dict:
        return f"an object whose values are each {_kind(args[1])}"
    if origin is frozenset:
        return f"a list whose items are each {_kind(args[0])}"
    return _KINDS[hint]


_R = TypeVar("_R", bound=Record)


@dataclass(frozen=True)
class Generation(Record):
    """``DIR/generation``: the current start of the job."""

    #: Counts Spark checkpoint generations (``Recovery.generation``).
    generation: int
    #: The generation's restore point (``Recovery.floor_ms``).
    floor_ms: int
    #: The number of key groups; None in records written before it was recorded.
    key_groups: int | None = None
    #: Key groups restored from their checkpoint at ``floor_ms`` (``Recovery.restored``).
    restored: frozenset[int] = frozenset()
    #: ``Recovery.heartbeats``; False in records written before heartbeats existed.
    heartbeats: bool = False
    #: What the state means (``state.table.describe``); None if unrecorded.
    state: dict | None = None
    #: ``Recovery.partitions``; None in records written before it existed.
    partitions: int | None = None
    #: ``Recovery.heartbeat_files``; False in records written before it existed.
    heartbeat_files: bool = False


@dataclass(frozen=True)
class FailedBatch(Record):
    """``DIR/failed-batch``: Spark's micro-batch ``batch`` of ``generation`` failed on a bad
    record before any of its effects (``JobDirectory.record_failed_batch``)."""

    generation: int
    batch: int


@dataclass(frozen=True)
class DeliveryPosition(Record):
    """``DIR/position``, at-most-once's only durable record (``persistent.runtime.delivery``):
    the run's generation and the event time after every message taken so far."""

    generation: int
    next_ms: int


@dataclass(frozen=True)
class RescalePlan(Record):
    """``DIR/rescale/plan``: a rescale at clock ``clock_ms`` from ``from_groups`` to
    ``to_groups`` key groups whose install has begun (``persistent.runtime.rescale``)."""

    clock_ms: int
    from_groups: int
    to_groups: int


@dataclass(frozen=True)
class RewindPositions(Record):
    """``DIR/rewind/<T>``: where the source starts a rewind to clock ``clock_ms`` (path
    B), as the source was when the clock reached it: for Kafka, each topic's partitions'
    first offsets with a timestamp at or after ``clock_ms`` (``offsets[topic][partition]``).
    A restart from the clock checks that the source still holds them."""

    clock_ms: int
    offsets: dict[str, dict[str, int]]


@dataclass(frozen=True)
class BatchProgress(Record):
    """What one micro-batch did, as reported by the driver: the record
    ``record_progress`` keeps in ``DIR/progress/`` and ``persistent status`` reads."""

    generation: int
    batch: int
    rows: int
    #: Messages not applied for being late: behind the micro-batch's watermark or
    #: before their key group's last checkpoint (``Job.late_records``).
    late: int
    replayed: int
    results: int
    checkpoints: int
    clock_ms: int | None
    #: How long the driver's ``foreachBatch`` took: computing the micro-batch, then committing it.
    seconds: float
    watermark_ms: int
    finished_at_ms: int
    #: Encoded state size per task (key group) that ran in this batch.
    state_bytes: dict[str, int]
    #: Records written to the dead-letter output: bad records, and late messages
    #: with ``Job.late_records="output"``.
    dead_letters: int = 0
    #: Bytes of the checkpoint files the key groups wrote in this batch.
    checkpoint_bytes: int = 0
    #: The CRC32 of each checkpoint written in this batch (its record's), by task.
    checkpoint_crcs: dict[str, int] = field(default_factory=dict)
    #: Seconds the key groups spent writing this batch's checkpoint files, summed over
    #: the groups (they write on the executors, in parallel). None in older records.
    checkpoint_seconds: float | None = None
    #: The part of ``seconds`` after the micro-batch was computed: the driver's commit
    #: (the dead letters, the sink unless its write computed the batch, the clock).
    #: None in older records.
    commit_seconds: float | None = None

    @property
    def clock_lag_ms(self) -> int | None:
        """How far the global minimum checkpoint clock is behind the watermark."""
        return None if self.clock_ms is None else self.watermark_ms - self.clock_ms

    def line(self) -> str:
        rate = self.rows / self.seconds if self.seconds > 0 else 0.0
        clock = "-" if self.clock_ms is None else str(self.clock_ms)
        return (
            f"batch {self.generation}.{self.batch}: {self.rows} rows ({rate:,.0f} rows/s), "
            f"{self.results} results, {self.checkpoints} checkpoints, clock {clock}"
            + (f", {self.late} late" if self.late else "")
            + (f", {self.replayed} before the restore point" if self.replayed else "")
            + (f", {self.dead_letters} dead letters" if self.dead_letters else "")
        )


def describe_state(description: dict) -> str:
    """``state.table.describe``'s record in words, for messages."""
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


class JobDirectory:
    """The files of one job under ``root``, through ``fs``."""

    def __init__(self, fs: FileSystem, root: str):
        self.fs = fs
        self.root = root.rstrip("/")
        self.spark = fs.join(self.root, "spark")
        self.heartbeats = fs.join(self.spark, "heartbeats")
        self.checkpoints = fs.join(self.root, "checkpoints")
        self.clock = ClockStore(fs, fs.join(self.root, "clock"))
        self._generation = fs.join(self.root, "generation")
        self.progress = fs.join(self.root, "progress")
        self.input_log = fs.join(self.root, "input")
        self._failed_batch = fs.join(self.root, "failed-batch")
        #: The delivery setting, a word (``persistent.runtime.delivery.Delivery``).
        self.delivery = fs.join(self.root, "delivery")
        self._position = fs.join(self.root, "position")
        self._rewind = fs.join(self.root, "rewind")
        self.rescale = fs.join(self.root, "rescale")
        #: Where a rescale stages the new key groups' checkpoints.
        self.rescale_checkpoints = fs.join(self.rescale, "checkpoints")
        self._rescale_plan = fs.join(self.rescale, "plan")

    def write_heartbeats(self, key_groups: int) -> str:
        """``DIR/spark/heartbeats/``, holding a file of one row per key group (JSON lines
        ``{"grp": g}``) for Spark's file source (``persistent.runtime.heartbeats``): the
        generation's first micro-batch takes it, and a replay of that micro-batch reads
        it again by the path in the source's log. Written once per Spark checkpoint, so
        it goes when that goes (path B); a path A start writes it only if it is missing,
        with the same rows (path A keeps the key groups), and the file source, which
        knows the path, does not take it as a new file. The log holds the path in full:
        a job directory moved elsewhere, or named by another URI, restarts from the
        clock (delete ``DIR/spark/``)."""
        rows = self.fs.join(self.heartbeats, "rows.json")
        if not self.fs.exists(rows):
            self.fs.write_atomic(rows, "".join(f'{{"grp": {g}}}\n' for g in range(key_groups)).encode())
        return self.heartbeats

    @staticmethod
    def default_dead_letters(root: str) -> str:
        """``DIR/dead-letters``: where the job at ``root`` writes its dead letters unless it
        names another directory. Spark writes them, so naming it needs no file system."""
        return f"{root.rstrip('/')}/dead-letters"

    def store(self, group: int) -> CheckpointStore:
        """The checkpoint store of key group ``group``."""
        return CheckpointStore(self.fs, self.checkpoints, task_name(group))

    def _read(self, kind: type[_R], path: str, remedy: str = "") -> _R | None:
        """The record of ``kind`` at ``path``, None without the file (``Record.from_json``)."""
        try:
            raw = self.fs.read_bytes(path)
        except FileNotFoundError:
            return None
        return kind.from_json(raw, path, remedy)

    def _write(self, path: str, record: Record) -> None:
        self.fs.write_atomic(path, record.to_json())

    def record_progress(self, progress: BatchProgress) -> None:
        """Writes one micro-batch's progress record and keeps the newest ``PROGRESS_KEPT``."""
        self._write(self.fs.join(self.progress, f"{progress.generation:06d}-{progress.batch:012d}.json"), progress)
        for old in self.fs.list_names(self.progress)[:-PROGRESS_KEPT]:
            self.fs.delete(self.fs.join(self.progress, old))

    def read_progress(self, last: int) -> list[BatchProgress]:
        """The ``last`` newest progress records, oldest first."""
        names = [n for n in self.fs.list_names(self.progress) if _PROGRESS_NAME.fullmatch(n)][-last:]
        records = [self._read(BatchProgress, self.fs.join(self.progress, name),
                              "it only reports its micro-batch: delete it") for name in names]
        return [r for r in records if r is not None]  # None: the running job pruned it after the listing

    def record_failed_batch(self, generation: int, batch: int) -> None:
        """Records that Spark's micro-batch ``batch`` of ``generation`` failed before any of
        its effects (on a bad record, with ``BadRecords.FAIL``): its input may be fixed
        before the replay."""
        self._write(self._failed_batch, FailedBatch(generation, batch))

    def read_position(self) -> DeliveryPosition | None:
        """At-most-once's position taken, or None before the first run."""
        return self._read(DeliveryPosition, self._position, "delete it to start the sources from the beginning")

    def record_position(self, position: DeliveryPosition) -> None:
        """Writes at-most-once's position taken."""
        self._write(self._position, position)

    def record_rewind_positions(self, positions: RewindPositions) -> None:
        """Records where the source rewinds to for clock ``positions.clock_ms``."""
        self._write(self.fs.join(self._rewind, f"{positions.clock_ms:015d}"), positions)

    def read_rewind_positions(self, clock_ms: int) -> RewindPositions | None:
        """Where the source rewinds to for clock ``clock_ms``; None when unrecorded."""
        return self._read(RewindPositions, self.fs.join(self._rewind, f"{clock_ms:015d}"),
                          f"delete it to restart from clock {clock_ms} ms without checking the source's retention")

    def retain_rewind_positions(self, oldest_ms: int) -> None:
        """Drops the rewind positions of clocks before ``oldest_ms``, where no restart goes."""
        for name in self.fs.list_names(self._rewind):
            if name.isdigit() and int(name) < oldest_ms:
                self.fs.delete(self.fs.join(self._rewind, name))

    def read_rescale_plan(self) -> RescalePlan | None:
        """The rescale whose install has begun but not finished, if any."""
        return self._read(RescalePlan, self._rescale_plan)

    def record_rescale_plan(self, plan: RescalePlan) -> None:
        """Records that the install of ``plan`` begins: every new key group's checkpoint is staged."""
        self._write(self._rescale_plan, plan)

    def failed_batch_offsets(self) -> tuple[list[str], list[str]] | None:
        """The offsets (JSON, one per source of the query) where the micro-batch recorded
        by ``record_failed_batch`` starts and ends, while Spark's checkpoint is to replay
        it: it is of the current generation, Spark's newest and not committed. None
        otherwise, and for a generation's first micro-batch (its start is in no log)."""
        failed = self._read(FailedBatch, self._failed_batch,
                            "delete it (changed input of the failed micro-batch is then refused)")
        if failed is None:
            return None
        current = self.read_generation()
        batch = failed.batch
        offsets = self.fs.join(self.spark, "offsets")
        newest = max((int(n) for n in self.fs.list_names(offsets) if n.isdigit()), default=None)
        if (current is None or failed.generation != current.generation or batch != newest or batch == 0
                or self.fs.exists(self.fs.join(self.spark, "commits", str(batch)))):
            return None
        return self._source_offsets(batch - 1), self._source_offsets(batch)

    def _source_offsets(self, batch: int) -> list[str]:
        """The end offsets of the query's sources in Spark's offset log entry ``batch``:
        its lines are a version, the batch's metadata, then one offset per source."""
        entry = self.fs.join(self.spark, "offsets", str(batch))
        lines = self.fs.read_bytes(entry).decode().splitlines()
        if len(lines) < 3:
            raise CorruptCheckpointError(f"{entry} holds {len(lines)} lines, not a version, metadata and offsets",
                                         entry)
        return lines[2:]

    def read_generation(self) -> Generation | None:
        """The current start, or None before the first start."""
        # Without it and Spark's checkpoint, a start restarts from the clock, as a copy of
        # the directory without them does.
        return self._read(Generation, self._generation, f"delete it and {self.spark} to restart from the clock")

    def record_key_groups(self, key_groups: int) -> None:
        """Records that the directory's checkpoints are split into ``key_groups`` groups
        now (after a rescale, with Spark's checkpoint gone): the next start takes path B
        with them."""
        current = self.read_generation() or Generation(0, 0)
        self._write(self._generation, Generation(current.generation, current.floor_ms, key_groups,
                                                 heartbeats=True, state=current.state, heartbeat_files=True))

    def _start(self, path: RecoveryPath, key_groups: int, state: dict | None, partitions: int | None,
               generation: int = 0, floor_ms: int = 0, restored: frozenset[int] = frozenset(),
               heartbeats: bool = True, heartbeat_files: bool = True) -> Recovery:
        """Records the generation that starts, and returns its plan."""
        self._write(self._generation, Generation(generation, floor_ms, key_groups, restored, heartbeats, state,
                                                 partitions, heartbeat_files))
        return Recovery(path, generation, floor_ms, restored, heartbeats, key_groups, partitions, heartbeat_files)

    def plan(self, key_groups: int | None, default_key_groups: int | None = None,
             description: dict | None = None, sink_generation: int | None = None,
             cores: int | None = None) -> Recovery:
        """Chooses the recovery path and, for path B, checks that every task of the clock
        holds its checkpoint at it.

        The number of key groups is the one the directory was written with; a fresh
        start takes ``key_groups``, or ``default_key_groups`` when that is ``None``. An
        explicit ``key_groups`` must equal the recorded number: keys hash to groups by
        it, so another number would put a key's messages beside another group's state.
        Without the generation file (a directory copied with ``clock/`` and
        ``checkpoints/`` only), the number is the one the clock's tasks name.

        ``description`` says what the job's state means (``state.table.describe``:
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
        """
        current = self.read_generation()
        recorded_state = current.state if current else None
        if description is not None:
            description = json.loads(json.dumps(description))  # as recorded: tuples become lists
        if description is not None and recorded_state not in (None, description):
            raise RestartRefusedError(
                f"{self.root} holds the state of a job with {describe_state(recorded_state)}; this job has "
                f"{describe_state(description)}. Restart it with the recorded settings, or give it a new "
                f"checkpoint directory (and a new output) to start over"
            )
        state = description or recorded_state

        recorded = current.key_groups if current else None
        if key_groups is not None and recorded not in (None, key_groups):
            raise RestartRefusedError(
                f"{self.root} was written with key_groups={recorded}, this job has "
                f"key_groups={key_groups}: run it with key_groups={recorded} (or without key_groups); to "
                f"change the number, delete {self.spark} and start the job with key_groups={key_groups}: it "
                f"restarts from the clock and re-splits every checkpoint into the new groups "
                f"(persistent.runtime.rescale)"
            )
        same_checkpoint = self.spark_started()
        # Path A needs a readable clock as well: every micro-batch advances it.
        record = self._read_clock(check=not same_checkpoint)
        if current is None and record is not None and record.task_clocks:
            recorded = self._clock_key_groups(record, key_groups)
        key_groups = key_groups or recorded or default_key_groups
        if key_groups is None:
            raise RestartRefusedError(f"{self.root} records no number of key groups: give the job's key_groups")
        recorded_generation = current.generation if current else 0
        partitions = state_partitions(key_groups, cores)
        if same_checkpoint and sink_generation is not None and sink_generation > recorded_generation:
            raise RestartRefusedError(
                f"the sink holds results of generation {sink_generation}, but {self.root} records generation "
                f"{recorded_generation}{'' if current else ' (its generation file is missing)'}: which generation "
                f"{self.spark} belongs to cannot be told. Delete {self.spark} to restart from the clock, in a "
                f"generation after {sink_generation}"
            )
        if same_checkpoint:
            if current is None:
                raise RestartRefusedError(
                    f"{self.root}: the generation file is missing, and with it how Spark's checkpoint {self.spark} "
                    f"keys its state (by key group or by slot, persistent.runtime.layout) cannot be told. Delete "
                    f"{self.spark} to restart from the clock (path B)"
                )
            if current.partitions is not None and not 1 <= current.partitions <= key_groups:
                raise CorruptCheckpointError(
                    f"{self._generation} is corrupt: its {current.partitions} partitions are not between 1 and its "
                    f"{key_groups} key groups; delete it and {self.spark} to restart from the clock",
                    self._generation,
                )
            # The heartbeats the Spark checkpoint's query reads: also a file when an earlier
            # version rewrote the record without the field, since only this one writes it.
            heartbeat_files = current.heartbeat_files or self.fs.exists(self.heartbeats)
            return self._start(RecoveryPath.SAME_CHECKPOINT, key_groups, state, current.partitions, current.generation,
                               current.floor_ms, current.restored, current.heartbeats, heartbeat_files)
        if record is None:
            self._refuse_checkpoints_without_clock()
            self.fs.delete(self.spark)
            self.fs.delete(self.input_log)
            return self._start(RecoveryPath.FRESH, key_groups, state, partitions)
        generation = max(recorded_generation, sink_generation or 0) + 1
        self.fs.delete(self.spark)
        restored = frozenset(map(task_index, record.task_clocks))
        return self._start(RecoveryPath.FROM_CLOCK, key_groups, state, partitions, generation, record.clock_ms,
                           restored)

    def _clock_key_groups(self, record: ClockRecord, key_groups: int | None) -> int:
        """The number of key groups of a directory without its generation file (copied
        with its ``clock/`` and ``checkpoints/`` only): the clock's task clocks name every
        key group. An explicit ``key_groups`` must equal it."""
        named = max(map(task_index, record.task_clocks)) + 1
        if key_groups not in (None, named):
            raise RestartRefusedError(
                f"{self.root} has no generation file, and its clock names {named} key groups (tasks "
                f"{task_name(0)} to {task_name(named - 1)}); this job has key_groups={key_groups}: run it with "
                f"key_groups={named} (or without key_groups). To change the number, start it once that way, "
                f"then stop it, delete {self.spark} and start it with key_groups={key_groups}: it restarts "
                f"from the clock and re-splits every checkpoint into the new groups (persistent.runtime.rescale)"
            )
        return named

    def spark_started(self) -> bool:
        """Whether Spark's checkpoint holds a started micro-batch: its offset log names
        entries by batch id; anything else there (a temporary file of an unfinished
        write) is none."""
        return any(name.isdigit() for name in self.fs.list_names(self.fs.join(self.spark, "offsets")))

    def restore(self, group: int, time_ms: int, crc: int | None = None) -> bytes:
        """The data of key group ``group``'s checkpoint at ``time_ms``: its generation's
        restore point, or with ``crc``, the CRC32 it was written with, the checkpoint its
        state in Spark follows (``persistent.runtime.keygroup.KeyGroup.encode``). A
        missing, damaged or other checkpoint raises, with a note naming the command that
        restarts from the newest intact clock in the history."""
        try:
            return self.store(group).recover(time_ms, crc)
        except (CorruptCheckpointError, MissingCheckpointError) as exc:
            exc.add_note(self._rewind_advice())
            raise

    def _refuse_checkpoints_without_clock(self) -> None:
        # Starting empty beside checkpoints would silently drop the state they hold.
        held = {}
        for task in self.fs.list_names(self.checkpoints):
            times = CheckpointStore(self.fs, self.checkpoints, task).times()
            if times:
                held[task] = set(times)
        if not held:
            return
        common = set.intersection(*held.values())
        if common:
            newest = max(common)
            remedy = (
                f"the newest time every task holds is {newest} ms: to restart there, set the clock with "
                f"ClockStore.advance({newest}, {{task: {newest} for each task directory in {self.checkpoints}}})"
            )
        else:
            remedy = "no time is held by every task"
        raise ClockError(
            f"{self.clock.path} is missing but {self.checkpoints} holds checkpoints of {len(held)} task(s); "
            f"{remedy}; or delete {self.checkpoints} to start with empty state"
        )

    def _read_clock(self, check: bool) -> ClockRecord | None:
        """The clock; if ``check``, every task's checkpoint at it must exist.

        A damaged clock or a missing checkpoint raises (never an empty state), with a
        note naming the command that restarts from the newest intact clock in the history.
        """
        try:
            record = self.clock.read()
            if check and record:
                for task in record.task_clocks:
                    self.store(task_index(task)).require(record.clock_ms)
            return record
        except (ClockError, CorruptCheckpointError, MissingCheckpointError) as exc:
            exc.add_note(self._rewind_advice())
            raise

    def _rewind_advice(self) -> str:
        try:
            past = self.clock.history()
        except ClockError as exc:
            return f"The clock's history cannot be read either: {exc}"
        for record in reversed(past):
            try:
                verify_clock(record, lambda task: CheckpointStore(self.fs, self.checkpoints, task))
            except (CorruptCheckpointError, MissingCheckpointError):
                continue
            return (
                f"The newest clock in the history whose checkpoints are all intact is {record.clock_ms} ms: "
                f"stop the job, run `persistent rewind {self.root} --to {record.clock_ms}`, then start it "
                f"again (recovery path B)."
            )
        return (
            f"No clock in the history ({self.clock.history_directory}) has intact checkpoints of every "
            f"task: start the job on a new checkpoint directory."
        )
