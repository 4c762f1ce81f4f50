"""What a key group tells the driver about one micro-batch: a ``GroupReport``.

The reports travel beside the results, not among them: each key group adds its
report to a Spark accumulator (``Reports``), which Spark merges on the driver from
the tasks that succeeded. The stateful function's rows are then the results and the
dead letters only, and the driver reads the reports without a Spark job of their
own. A report holds numbers, never state.

A task that Spark runs again (a lost executor's shuffle output recomputed) reports
its groups again; a micro-batch is deterministic, so the later report of a group
replaces the earlier one and says the same.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupReport", "Reports"]


@dataclass(frozen=True)
class GroupReport:
    """One key group's micro-batch."""

    grp: int
    #: Messages applied to the state.
    applied: int
    #: Messages not applied for being late, and updates the table refused as late.
    late: int
    #: Messages before the restore point, dropped as already inside the restored state.
    replayed: int
    #: Results emitted (elements of the group's result arrays, ``persistent.runtime.stateful.output_schema``).
    results: int
    #: The watermark the group ran with (ms).
    watermark_ms: int
    #: The newest event time of the group's messages, -1 without any.
    max_time_ms: int
    #: Bytes of the group's state in Spark's state store (0 when it carries none).
    state_bytes: int
    #: Bad records among the group's messages, in its dead letters (a job that fails on
    #: bad records fails in the group's task instead).
    bad_records: int = 0
    #: Late messages the group wrote out as dead letters (``late_records="output"``).
    late_records: int = 0
    #: The checkpoint the group wrote: its time (ms), size and CRC32; None without one.
    checkpoint_ms: int | None = None
    checkpoint_bytes: int = 0
    checkpoint_crc: int = 0
    #: The whole checkpoint its chain starts at (its own time when whole), which
    #: retention keeps with it (``CheckpointStore.retain``); None: not known.
    whole_ms: int | None = None
    #: Seconds the group spent writing its checkpoint file.
    checkpoint_seconds: float = 0.0
    #: The messages that reached the group folded before the shuffle, and the partials
    #: they were folded into (``persistent.runtime.fold``).
    folded: int = 0
    partials: int = 0
    #: The job's watermark in the next micro-batch, as the source partitions that read a
    #: message in this one set it (``persistent.runtime.rows.next_watermark_ms``); None
    #: where they did not say (no message, or a job that runs with Spark's watermark).
    next_watermark_ms: int | None = None
    #: Keys in the group's table after the micro-batch.
    keys: int = 0
    #: The peak resident memory of the Python worker that ran the group, so far (bytes).
    worker_peak_bytes: int = 0
    #: Whether the group decoded its table (``KeyGroup.decoded``): restored, or served
    #: by another Python worker than the one that served its last micro-batch.
    decoded: bool = False


class Reports:
    """The accumulator's algebra (``pyspark.AccumulatorParam``): dicts of reports by
    key group, merged by key group."""

    def zero(self, _value: dict[int, GroupReport]) -> dict[int, GroupReport]:
        return {}

    def addInPlace(self, into: dict[int, GroupReport], more: dict[int, GroupReport]) -> dict[int, GroupReport]:  # noqa: N802
        into.update(more)
        return into
