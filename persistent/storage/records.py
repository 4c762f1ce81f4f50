"""The small JSON records of a job directory (``persistent.storage.job_directory``).

Each record is a frozen dataclass (``Record``) whose fields are the keys of one JSON
object; reading one that is no JSON, lacks a field or holds a wrong type raises
``CorruptCheckpointError`` naming its file.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Self

from state.errors import CorruptCheckpointError

__all__ = [
    "Record",
    "Generation",
    "BatchProgress",
    "FailedBatch",
    "DeliveryPosition",
    "RescalePlan",
    "RewindPositions",
    "Lease",
]


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


@dataclass(frozen=True)
class Generation(Record):
    """``DIR/generation``: the current start of the job, as its plan
    (``persistent.runtime.recovery.Recovery``) chose it."""

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
    #: What the state means (``state.table_format.describe``); None if unrecorded.
    state: dict | None = None
    #: ``Recovery.partitions``; None in records written before it existed.
    partitions: int | None = None
    #: ``Recovery.heartbeat_files``; False in records written before it existed.
    heartbeat_files: bool = False
    #: ``Recovery.timeouts``; True in records written before it existed, whose queries all set them.
    timeouts: bool = True


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
class Lease(Record):
    """``DIR/lease/<term>``: which process holds the job directory
    (``persistent.storage.lease``). Times are the holder's wall clock, in ms."""

    #: Random, per acquisition: tells the holder's own record from another's.
    token: str
    host: str
    #: The holder's machine and pid namespace (``persistent.storage.lease.machine``):
    #: where its ``pid`` can be looked up.
    machine: str
    pid: int
    #: When the process ``pid`` started (``persistent.storage.lease.process_start``), which
    #: tells it from a later process given the same pid; None where it cannot be looked up.
    pid_started: int | None
    #: The Spark application id of the job, or the command that holds the lease.
    holder: str
    started_at_ms: int
    renewed_at_ms: int
    renew_every_ms: int
    #: Unrenewed for this long, the lease is free.
    expires_after_ms: int
    #: When the holder released it; None while held.
    released_at_ms: int | None = None


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
    #: The messages that crossed the shuffle folded (``persistent.runtime.fold``), and
    #: the partials they were folded into.
    folded: int = 0
    partials: int = 0
    #: The job's watermark in the next micro-batch (``persistent.runtime.commit``); None
    #: in older records, and where the job runs with Spark's watermark.
    next_watermark_ms: int | None = None
    #: Whether the run had Spark's half of the fold loaded (``persistent.runtime.fold``:
    #: the fold, the packs and the job's watermark); None in older records.
    spark_half: bool | None = None
    #: Messages not applied for being late in this micro-batch and every one the job
    #: directory recorded before it since it counts them (a restart from the clock
    #: reads some input again, and counts its late messages again); None in older records.
    late_total: int | None = None
    #: Keys in the table of each task (key group) that ran in this batch; empty in older records.
    keys: dict[str, int] = field(default_factory=dict)
    #: The peak resident memory of the Python workers that ran the key groups, the
    #: largest (bytes); None in older records.
    worker_peak_bytes: int | None = None
    #: Key groups that decoded their table from their state or checkpoint, not going on
    #: from the table their Python worker handed Spark last: every group of a restart,
    #: then those another worker served last; None in older records.
    decoded_groups: int | None = None

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
            + (f", {self.folded} folded into {self.partials} partials" if self.folded else "")
        )
