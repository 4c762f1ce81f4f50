"""Delivery guarantees: what a failure may cost a job, chosen per job.

A job's ``delivery`` (``Delivery``) decides what is checkpointed, where the sources
start after a restart, and how the sink writes each micro-batch's *effects* (for a
count: how many of a key's messages reached the sink).

- **exactly-once** (the default): Spark's checkpoint, every task's checkpoints, the
  global minimum checkpoint clock, and a marker per micro-batch in the sink's
  transaction. A restart replays the unfinished micro-batch on its state (path A) or
  restores every task at the clock and rewinds the sources to it (path B); a replayed
  batch changes nothing in the sink. No effect is lost or repeated.
- **at-least-once**: only Spark's checkpoint (source offsets, commit log, and the
  windows of windowed tasks). A restart replays the unfinished micro-batch from its
  committed offsets; the sink *appends* each batch's effects without a marker, so a
  batch whose effects were written before the failure writes them again. When Spark's
  checkpoint is gone, the sources start from the beginning. Nothing is lost; effects
  may repeat.
- **at-most-once**: only the *position taken*: an event time after every message
  read so far, recorded before a batch's effects are written. State is kept for one
  run only; a restart starts it empty and the sources after the position, so the
  batch that was being written is skipped, and so are the messages inside the open
  windows. Nothing is repeated; effects may be lost.

With at-least-once and at-most-once a task without windows keeps no state between
micro-batches: each batch writes, per key, the fold of its own messages, and the sink
holds the sum (``SELECT key, SUM(count) FROM counts GROUP BY key``; with exactly-once
the same query reads the one row per key). Windowed tasks keep their windows between
micro-batches and append each window once it closes.
"""

from __future__ import annotations


from persistent.core.choices import Choice
from persistent.core.errors import ConfigError, RestartRefusedError
from persistent.sinks.base import BatchId, Sink
from persistent.runtime import recovery
from persistent.runtime.recovery import Recovery, RecoveryPath, state_partitions
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import DeliveryPosition

__all__ = ["Delivery", "Position", "Effects", "plan", "write_effects"]


class Delivery(Choice):
    """A job's delivery guarantee; see the module docstring."""

    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"

    @property
    def checkpoints(self) -> bool:
        """Whether tasks checkpoint their state and the clock advances."""
        return self is Delivery.EXACTLY_ONCE

    def carries_state(self, windowed: bool) -> bool:
        """Whether a key group's state carries over to its next micro-batch. Without
        windows, at-least-once and at-most-once keep the values in the sink instead."""
        return windowed or self is Delivery.EXACTLY_ONCE

    def check_sink(self, sink: Sink) -> None:
        """Refuses a sink that cannot append, for the settings that append."""
        if self is not Delivery.EXACTLY_ONCE and type(sink).append is Sink.append:
            raise ConfigError(
                f"delivery {self.value!r} appends each micro-batch's effects, and {type(sink).__name__} "
                f"has no append: use a sink that has one, or delivery 'exactly-once'"
            )


def plan(delivery: Delivery, directory: JobDirectory, key_groups: int | None, default_key_groups: int,
         description: dict | None = None, sink_generation: int | None = None, cores: int | None = None,
         timeouts: bool = True) -> Recovery:
    """How the job starts with ``delivery`` on ``cores``, a new Spark checkpoint's query
    with event-time timeouts if ``timeouts``: at-most-once after its position, the others
    as ``persistent.runtime.recovery.plan`` says. A directory keeps the setting it was
    written with."""
    _keep_setting(directory, delivery)
    if delivery is Delivery.AT_MOST_ONCE:
        return Position(directory).restart(key_groups or default_key_groups, cores, timeouts)
    return recovery.plan(directory, key_groups, default_key_groups, description, sink_generation, cores, timeouts)


def _keep_setting(directory: JobDirectory, delivery: Delivery) -> None:
    stored = directory.read_delivery()
    if stored is not None:
        word, path = stored
        recorded = Delivery.of(word, f"{path} holds a delivery that")
    else:
        # A directory written before the setting existed holds exactly-once state.
        recorded = None if directory.is_empty() else Delivery.EXACTLY_ONCE
    if recorded is None:
        directory.record_delivery(delivery.value)
    elif recorded is not delivery:
        raise RestartRefusedError(
            f"{directory.root} was written with delivery={recorded.value!r}, this job has "
            f"delivery={delivery.value!r}: run it with delivery={recorded.value!r}, or start a new "
            f"checkpoint directory (what each setting stores differs)"
        )


class Position:
    """Keeps at-most-once's only durable record, the position taken (``DeliveryPosition``):
    the run's generation and the event time after every message taken so far."""

    def __init__(self, directory: JobDirectory):
        self.directory = directory

    def restart(self, key_groups: int, cores: int | None = None, timeouts: bool = True) -> Recovery:
        """Starts a run with ``key_groups`` (state starts empty, so any number does) spread
        over ``state_partitions(key_groups, cores)``, with event-time timeouts if
        ``timeouts``: Spark's checkpoint of the last run is dropped (its state and its
        unfinished micro-batch with it), the sources start at the position."""
        taken = self.directory.read_position()
        self.directory.spark_log.delete()
        partitions = state_partitions(key_groups, cores)
        if taken is None:
            self.directory.record_position(DeliveryPosition(0, 0))
            return Recovery(RecoveryPath.FRESH, 0, 0, key_groups=key_groups, partitions=partitions, timeouts=timeouts)
        position = DeliveryPosition(taken.generation + 1, taken.next_ms)
        self.directory.record_position(position)
        return Recovery(RecoveryPath.AFTER_POSITION, position.generation, position.next_ms, key_groups=key_groups,
                        partitions=partitions, timeouts=timeouts)

    def take(self, generation: int, next_ms: int) -> None:
        """Records that every message before ``next_ms`` is taken (the position never
        moves back)."""
        taken = self.directory.read_position()
        if taken is None or next_ms > taken.next_ms:
            self.directory.record_position(DeliveryPosition(generation, next_ms))


def write_effects(delivery: Delivery, directory: JobDirectory, sink: Sink, results, batch: BatchId, windowed: bool,
                  next_ms: int | None = None) -> None:
    """Writes one micro-batch's results as ``delivery`` says. At-most-once first takes
    its position at ``next_ms``, the event time after every message the batch read."""
    if delivery is Delivery.EXACTLY_ONCE:
        sink.write(results, batch, windowed)
        return
    if delivery is Delivery.AT_MOST_ONCE:
        Position(directory).take(batch.generation, next_ms)
    sink.append(results, batch, windowed)


class Effects:
    """A sink's values per key against the values one clean pass gives."""

    def __init__(self, expected: dict, got: dict):
        keys = set(expected) | set(got)
        #: Effects missing from the sink: the sum of the shortfalls per key.
        self.lost = sum(max(0, expected.get(k, 0) - got.get(k, 0)) for k in keys)
        #: Effects the sink holds more than once: the sum of the excesses per key.
        self.duplicated = sum(max(0, got.get(k, 0) - expected.get(k, 0)) for k in keys)
        self.total = sum(expected.values())

    @property
    def accuracy(self) -> float:
        """1 - (lost + duplicated) / expected total: 1.0 is exact."""
        return 1 - (self.lost + self.duplicated) / self.total if self.total else 1.0

    def line(self) -> str:
        return f"{self.lost} lost, {self.duplicated} duplicated, accuracy {self.accuracy:.2%}"

