"""The key groups' input: the rows ``applyInPandasWithState`` hands ``GroupFunction``.

One schema, both ends. The planner builds a key group's rows with the Spark
expressions below, and ``GroupFunction`` (``persistent.runtime.stateful``) reads them
back with ``decode``, which hands ``KeyGroup.apply`` the group's messages, in the
order it folds them, and the bad records among its rows. Each row says what it is
in its ``kind`` (``Kind``):

- a **message**: ``key``, ``timestamp`` (ms), ``value``, and ``part``, the source
  partition it was read in;
- a **bad record**, marked by its source or by the check of its event time
  (``time_check``): its ``bad_record`` (``persistent.core.badrecords``), and its
  event time if it has one; ``key`` and ``value`` are fillers of their columns'
  types;
- a **heartbeat** (``persistent.runtime.heartbeats``): it only wakes its group.

A job that packs its messages before the shuffle (``persistent.runtime.fold.packed``)
adds ``packed`` and ``packed_seq``: a **pack** holds messages of one key group read in
one source partition (``part``), in their order there, as an Arrow stream (``packed``;
its ``key``, ``timestamp`` and ``value`` are fillers), and ``packed_seq`` is its place
among that partition's packs for the group; ``decode`` reads its messages as if each
had crossed the shuffle as a row.

A job that folds its messages before the shuffle (``persistent.runtime.fold``) adds
``folded``, ``count`` and the partial values' columns (``PARTIAL``): a **partial** is
a message row with ``folded`` true, the fold of ``count`` on-time messages of one key
and bucket of the group's table (a checkpoint interval, or a window's pane) read in one
source partition, ``timestamp`` the newest of them and ``earliest`` the oldest; any
other row stands for ``count`` equal rows.

``grp`` holds the key group's slot, which Spark groups the rows by
(``persistent.runtime.layout``), and ``event_time`` a message's event time for
Spark's watermark, nulled before the grouping (``watermarked``).

The watermark (``docs/concepts.md``, "Late messages"): the job's follows the least of
the source partitions' newest event times, less the delay: a partition behind the
others holds it back, so the order in which a restart reads the partitions makes no
message late. Spark's, which follows the newest event time of any partition, only
wakes the key groups (event-time timeouts, micro-batches without data); without
Spark's half of the fold (``persistent.runtime.fold``) the groups run with it, which
trails the newest event time read by ``WATERMARK_LAG_MS`` more than the job's delay, so
that a message at that time is in order. ``spark_delay`` sets Spark's,
``next_watermark_ms`` gives the job's next one, ``JOB_WATERMARK_PROPERTY`` carries it
to the micro-batch's tasks, ``group_watermark_ms`` is the one a key group runs with,
and ``timeout_ms`` wakes a group once the job's reaches a time.

The Spark side imports pyspark inside its functions: a test of a task
(``persistent.tools.testing``) needs none of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pandas as pd
import pyarrow as pa

from persistent.core.badrecords import BAD_RECORD_COLUMN
from persistent.core.task import MESSAGE_COLUMNS

__all__ = ["Kind", "KEY", "TIMESTAMP", "VALUE", "KIND", "PART", "GROUP", "EVENT_TIME", "ARROW_BATCH_ROWS",
           "MAX_EVENT_TIME_MS", "WATERMARK_LAG_MS", "JOB_WATERMARK_PROPERTY", "message_columns", "kind", "group",
           "marked_columns", "heartbeat_columns", "no_message_columns", "moving_time", "no_mark", "watermarked",
           "spark_delay", "job_watermark_ms", "next_watermark_ms", "given_watermark_ms", "group_watermark_ms",
           "timeout_ms", "FOLDED", "COUNT",
           "EARLIEST", "PARTIAL", "PACKED", "PACKED_SEQ", "Marked", "Partials", "GroupRows", "decode"]

KEY, TIMESTAMP, VALUE = MESSAGE_COLUMNS
#: The column of a row's ``Kind``.
KIND = "kind"
#: The column of the source partition a message was read in.
PART = "part"
#: The column of the key group (its slot once grouped). Spark keeps its state by it:
#: a Spark checkpoint names it.
GROUP = "grp"
#: The column of a message's event time that carries Spark's watermark.
EVENT_TIME = "event_time"

#: The columns of a folded job's rows (``persistent.runtime.fold``): whether a row is a
#: partial, how many rows it stands for, and the prefix of its partial values' columns.
FOLDED = "folded"
COUNT = "count"
EARLIEST = "earliest"
PARTIAL = "partial_"
#: The columns of a packing job's rows (``persistent.runtime.fold.packed``): a pack's
#: messages as an Arrow stream, and its place among its source partition's packs.
PACKED = "packed"
PACKED_SEQ = "packed_seq"

#: Rows per Arrow batch between the JVM and the key groups' Python workers: a key
#: group's rows in one chunk (Spark hands a group's state to Python again with each).
ARROW_BATCH_ROWS = 100_000
#: The latest event time Spark's timestamps hold: 9999-12-31T23:59:59.999Z.
MAX_EVENT_TIME_MS = 253_402_300_799_999
#: How far Spark's watermark trails the newest event time read, beyond the job's delay.
WATERMARK_LAG_MS = 1
#: The local property of a micro-batch's jobs that carries the job's watermark to the
#: key groups' tasks (``given_watermark_ms``).
JOB_WATERMARK_PROPERTY = "persistent.job_watermark_ms"


class Kind(IntEnum):
    """What a key group's row is."""

    MESSAGE = 0
    BAD_RECORD = 1
    HEARTBEAT = 2
    #: The newest event time among the messages one task before the shuffle (one source
    #: partition) read, for each key group (``persistent.runtime.fold.newest_per_group``).
    NEWEST = 3
    #: Messages packed before the shuffle (``persistent.runtime.fold.packed``).
    PACKED = 4


# -- the Spark side: the planner's expressions --------------------------------------
# pragma: no mutate start (Spark builds these: make mutants runs no Spark, the Spark tests do)


def time_check(skew_ms: int | None):
    """A message's event time as ms (``bigint``), and its ``bad_record`` when that
    time is unusable, else null: no integer, negative, after Spark's last timestamp,
    or more than ``skew_ms`` after the micro-batch's time. It runs before the
    watermark, which such a time would otherwise move."""
    from pyspark.sql import functions as F

    millis = F.col(TIMESTAMP).try_cast("bigint")

    def bad(reason):
        return F.to_json(F.struct(F.to_json(F.struct(*MESSAGE_COLUMNS)).alias("record"), reason.alias("reason")))

    check = (
        F.when(millis.isNull(), bad(F.lit("no event time: the timestamp is null or not an integer of ms")))
        .when(millis < 0, bad(F.format_string("event time %d ms is negative", millis)))
        .when(millis > MAX_EVENT_TIME_MS, bad(F.format_string("event time %d ms is after the year 9999", millis)))
    )
    if skew_ms is not None:
        # In a streaming query current_timestamp() is the micro-batch's time, kept in
        # Spark's offset log: a replayed batch decides the same.
        batch_ms = F.unix_millis(F.current_timestamp())
        check = check.when(millis > batch_ms + skew_ms, bad(F.format_string(
            "event time %d ms is more than %d ms after the micro-batch's time %d ms",
            millis, F.lit(skew_ms), batch_ms,
        )))
    return millis, check


def message_columns(skew_ms: int | None) -> list:
    """The columns of a message's row, over the prepared messages (``key``,
    ``timestamp``, ``value``, ``bad_record``): its time in ms, its mark (the source's,
    else ``time_check``'s), and ``part``: the source partition it was read in, the
    same when a micro-batch is replayed from the same offsets."""
    from pyspark.sql import functions as F

    millis, check = time_check(skew_ms)
    return [F.col(KEY), millis.alias(TIMESTAMP), F.col(VALUE),
            F.coalesce(BAD_RECORD_COLUMN, check).alias(BAD_RECORD_COLUMN), F.spark_partition_id().alias(PART)]


def _kind(of: Kind):
    from pyspark.sql import functions as F

    return F.lit(int(of)).cast("tinyint")


def kind():
    """``kind`` of a row of ``message_columns``: a bad record when it carries a mark."""
    from pyspark.sql import functions as F

    return F.when(F.col(BAD_RECORD_COLUMN).isNull(), _kind(Kind.MESSAGE)).otherwise(_kind(Kind.BAD_RECORD))


def _is_message():
    from pyspark.sql import functions as F

    return F.col(KIND) == int(Kind.MESSAGE)


def group(key_groups: int):
    """``grp`` of a row with a ``kind``: its key group, ``pmod(hash(key), key_groups)``.
    Bad records spread over the groups by their text."""
    from pyspark.sql import functions as F

    return (F.when(_is_message(), F.expr(f"pmod(hash({KEY}), {key_groups})"))
            .otherwise(F.expr(f"pmod(hash({BAD_RECORD_COLUMN}), {key_groups})")))


def _filler(data_type):
    """A value of ``data_type`` for the key or value of a row that is no message: null,
    except for numbers, whose nulls pandas would turn the whole column to floats for."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, NumericType

    if isinstance(data_type, (NumericType, BooleanType)):
        return F.lit(0).cast(data_type)
    return F.lit(None).cast(data_type)


def no_mark():
    """The ``bad_record`` column of rows that carry none."""
    from pyspark.sql import functions as F

    return F.lit(None).cast("string").alias(BAD_RECORD_COLUMN)


def marked_columns(types: dict) -> list:
    """The prepared columns of a row its source marked bad, which ``prepare`` never
    sees, over the source's rows: fillers of the prepared ``types`` (by column name)
    for key and value, the source's time as the prepared type."""
    from pyspark.sql import functions as F

    return [_filler(types[KEY]).alias(KEY), F.col(TIMESTAMP).cast(types[TIMESTAMP]),
            _filler(types[VALUE]).alias(VALUE), BAD_RECORD_COLUMN]


def no_message_columns(types: dict, of: Kind) -> dict:
    """The columns of a row of kind ``of`` that is no message (a heartbeat, a newest
    event time) but its ``grp``, by name, over rows of ``types`` (by column name): no
    event time, no mark, no source partition (-1)."""
    from pyspark.sql import functions as F

    return {KEY: _filler(types[KEY]), TIMESTAMP: F.lit(None).cast("bigint"), VALUE: _filler(types[VALUE]),
            BAD_RECORD_COLUMN: no_mark(), KIND: _kind(of), PART: F.lit(-1)}


def heartbeat_columns(types: dict) -> list:
    """The columns of a heartbeat's row over the heartbeats (``grp``), those of the
    messages' rows of ``types`` (by column name; ``no_message_columns``)."""
    from pyspark.sql import functions as F

    return [column.alias(name) for name, column in no_message_columns(types, Kind.HEARTBEAT).items()] + [F.col(GROUP)]


def moving_time():
    """A row's event time if it moves Spark's watermark (a message's: ``watermarked``), else null."""
    from pyspark.sql import functions as F

    return F.when(_is_message(), F.col(TIMESTAMP))


def watermarked(rows, delay_ms: int):
    """``rows`` with ``event_time``, which carries Spark's watermark (``spark_delay``)
    and is null: the messages' event times move the watermark, and the column then
    drops no late row.

    The key groups decide what is late, against the micro-batch's watermark, and count
    or output it. Spark's operator would drop late rows first, by its column that
    carries the watermark's mark; nulled, the column drops none, and the mark keeps the
    watermark (``getCurrentWatermarkMs``, event-time timeouts) working. Rows that are
    no message have no event time: they neither move the watermark nor are late."""
    from pyspark.sql import functions as F

    timed = rows.withColumn(EVENT_TIME, F.timestamp_millis(moving_time())).withWatermark(
        EVENT_TIME, spark_delay(delay_ms))
    mark = timed.schema[EVENT_TIME].metadata
    return timed.withColumn(EVENT_TIME, F.lit(None).cast("timestamp").alias(EVENT_TIME, metadata=mark))
# pragma: no mutate end


# -- the watermark ----------------------------------------------------------------


def spark_delay(delay_ms: int) -> str:
    """Spark's watermark delay (``withWatermark``) for the job's ``delay_ms``."""
    return f"{delay_ms + WATERMARK_LAG_MS} milliseconds"


def job_watermark_ms(spark_watermark_ms: int) -> int:
    """The watermark a message is late behind, of which Spark's is ``spark_watermark_ms``,
    where the job runs with Spark's: a message older than it is late, one at it in order."""
    return spark_watermark_ms + WATERMARK_LAG_MS


def next_watermark_ms(watermark_ms: int, reached_ms: int, delay_ms: int) -> int:
    """The job's watermark in the micro-batch after one that runs with ``watermark_ms``
    and in which every source partition that read a message reached event time
    ``reached_ms`` (the least of their newest event times), for the job's ``delay_ms``;
    never back. A partition that read nothing holds nothing back: it has nothing more
    to read, or its records are not yet written."""
    return max(watermark_ms, reached_ms - delay_ms)


def given_watermark_ms() -> int | None:
    """The job's watermark the driver gave the micro-batch of this Spark task
    (``JOB_WATERMARK_PROPERTY``); None outside a task, or where the job runs with Spark's."""
    from pyspark import TaskContext

    context = TaskContext.get()
    given = context.getLocalProperty(JOB_WATERMARK_PROPERTY) if context is not None else None
    return int(given) if given is not None else None


def group_watermark_ms(spark_watermark_ms: int, floor_ms: int, given_ms: int | None = None) -> int:
    """The watermark a key group runs with in a generation restored at ``floor_ms``: the
    job's the driver gave (``given_ms``), else Spark's (``spark_watermark_ms``), never
    before the restore point. A folded job's tasks before the shuffle take the same
    (``persistent.runtime.fold``)."""
    return max(job_watermark_ms(spark_watermark_ms) if given_ms is None else given_ms, floor_ms)


def timeout_ms(watermark_ms: int) -> int:
    """The event-time timeout (``GroupState.setTimeoutTimestamp``) that wakes a group
    once the job's watermark reaches ``watermark_ms``: Spark fires it when its own
    watermark passes it, and a timeout is at least 1 ms."""
    return max(watermark_ms - WATERMARK_LAG_MS - 1, 1)


# -- the pandas side: GroupFunction's decoder --------------------------------------


@dataclass(frozen=True)
class Marked:
    """The bad records among a key group's rows, in the order the group folds its rows:
    their event times (``float64`` ms, NaN for none) and their ``bad_record`` JSON."""

    times_ms: np.ndarray
    records: np.ndarray


@dataclass(frozen=True)
class Partials:
    """A key group's partials (``persistent.runtime.fold``), in the order the group folds
    them: keys, newest (``int64``) and oldest event times (ms) of their messages, their
    folded monoid values (a column of the monoid's) and the messages each holds."""

    keys: np.ndarray
    timestamps: np.ndarray
    earliest: np.ndarray
    values: np.ndarray
    counts: np.ndarray

    @property
    def messages(self) -> int:
        return int(self.counts.sum())


@dataclass(frozen=True)
class GroupRows:
    """A key group's rows of a micro-batch, decoded (``decode``)."""

    #: The messages (``key``, ``timestamp`` as ``int64`` ms, ``value``), in the order
    #: the group folds them.
    messages: pd.DataFrame
    marked: Marked
    #: The messages folded before the shuffle, if the job folds.
    partials: Partials | None = None
    #: The event time every source partition that read a message in this micro-batch
    #: reached: the least of their newest event times (``Kind.NEWEST``), if the job sends
    #: them and the micro-batch has messages.
    batch_reached_ms: int | None = None

    @property
    def folded(self) -> int:
        """The messages folded before the shuffle."""
        return self.partials.messages if self.partials is not None else 0

    @property
    def partial_count(self) -> int:
        """The partials the folded messages came in."""
        return len(self.partials.counts) if self.partials is not None else 0

    @property
    def count(self) -> int:
        """Messages (folded ones included) and bad records."""
        return len(self.messages) + len(self.marked.records) + self.folded

    @property
    def newest_ms(self) -> int:
        """The newest event time of the messages, folded ones included; -1 without any."""
        times = self.messages[TIMESTAMP].to_numpy()
        if self.partials is not None:
            times = np.concatenate([times, self.partials.timestamps])
        return int(times.max()) if len(times) else -1


#: The columns ``decode`` reads (not ``grp``, the group's key, nor the null ``event_time``).
_READ = (KIND, *MESSAGE_COLUMNS, BAD_RECORD_COLUMN, PART)


def decode(frames: Iterable[pd.DataFrame], values=None) -> GroupRows:
    """A key group's rows from Spark's chunks of them (``applyInPandasWithState``),
    without heartbeats, by kind, and the event time the micro-batch's source partitions
    all reached from its ``Kind.NEWEST`` rows (one per partition); with ``values`` (``persistent.runtime.fold.Fold.values``:
    the partial values' columns to a monoid column), the rows of a folded job, whose
    partials it returns apart and whose other rows it repeats as often as they count.

    Both messages and bad records are in the order the group folds them: by event
    time, then source partition, then their order in it, the same in every run of a
    micro-batch, whatever order Spark's shuffle fetched the source partitions' rows in
    (which matters for ``Last`` on tied times, float sums, ...). The shuffle keeps the
    rows of one source partition in their order; the sort is stable.

    Joined column by column: ``pd.concat`` of the chunks would first scan their
    all-null columns for a common type, a sixth of a group's Python time. A bigint
    column with nulls (a heartbeat's or bad record's time) arrives as floats."""
    chunks = list(frames)
    columns = {name: _joined([chunk[name].to_numpy() for chunk in chunks]) for name in _READ}
    if chunks and PACKED in chunks[0].columns:
        columns = _unpacked(columns, chunks)
    partials = None
    if values is not None:
        columns, partials = _unfolded(columns, chunks, values)
    kinds = columns[KIND]
    messages = kinds == Kind.MESSAGE
    bad = kinds == Kind.BAD_RECORD
    taken = {name: column[messages] if not messages.all() else column for name, column in columns.items()}
    times = taken[TIMESTAMP]
    if times.dtype.kind != "i":
        times = times.astype(np.int64)
    order = _fold_order(times, taken[PART])
    frame = {KEY: taken[KEY], TIMESTAMP: times, VALUE: taken[VALUE]}
    if order is not None:
        frame = {name: column[order] for name, column in frame.items()}
    marked = Marked(np.empty(0, dtype=np.float64), np.empty(0, dtype=object))
    if bad.any():
        bad_times = columns[TIMESTAMP][bad].astype(np.float64)
        order = _fold_order(bad_times, columns[PART][bad])
        marked = Marked(bad_times, columns[BAD_RECORD_COLUMN][bad])
        if order is not None:
            marked = Marked(bad_times[order], marked.records[order])
    newest = kinds == Kind.NEWEST
    batch_reached_ms = int(columns[TIMESTAMP][newest].min()) if newest.any() else None
    return GroupRows(pd.DataFrame(frame, copy=False), marked, partials, batch_reached_ms)


def _unfolded(columns: dict, chunks: list[pd.DataFrame], values) -> tuple[dict, Partials]:
    """A folded job's rows (``columns``, read from ``chunks``) as its partials, in the
    order the group folds them (newest event time, source partition, a hash of the
    key), and its other rows, each repeated ``count`` times."""
    folded = _joined([chunk[FOLDED].to_numpy() for chunk in chunks]).astype(bool)
    counts = _joined([chunk[COUNT].to_numpy() for chunk in chunks]).astype(np.int64)
    names = [name for name in chunks[0].columns if name.startswith(PARTIAL)] if chunks else []
    partial = {name: _joined([chunk[name].to_numpy() for chunk in chunks])[folded] for name in names}
    times = columns[TIMESTAMP][folded].astype(np.int64)
    earliest = _joined([chunk[EARLIEST].to_numpy() for chunk in chunks])[folded]
    fields = [columns[KEY][folded], times, earliest, values(counts[folded], partial), counts[folded]]
    # Spark emits a partition's partials in its hash table's order: by key too (a hash of
    # it, whose value is the same in every process), so that the table takes new keys in
    # the same order in every run of a micro-batch (the same checkpoint bytes).
    order = np.lexsort((pd.util.hash_array(fields[0]), columns[PART][folded], times))
    fields = [field[order] for field in fields]
    repeat = np.repeat(np.flatnonzero(~folded), counts[~folded])
    return {name: column[repeat] for name, column in columns.items()}, Partials(*fields)


def _unpacked(columns: dict, chunks: list[pd.DataFrame]) -> dict:
    """A packing job's rows (``columns``, read from ``chunks``) with the packs' messages in
    place of the packs: the other rows first, then the packs' messages, each pack's in
    their order, the packs by source partition and place (``PACKED_SEQ``), so that the
    messages of a source partition come in their order there."""
    packs = columns[KIND] == Kind.PACKED
    if not packs.any():
        return columns
    blobs = _joined([chunk[PACKED].to_numpy() for chunk in chunks])[packs]
    seqs = _joined([chunk[PACKED_SEQ].to_numpy() for chunk in chunks])[packs]
    parts = columns[PART][packs]
    order = np.lexsort((seqs, parts))
    tables = [pa.ipc.open_stream(blobs[i]).read_all() for i in order]
    table = pa.concat_tables(tables)
    # pandas reads the packed columns' types (``fold.PACKS``) as PySpark converts a row's.
    messages = {name: table.column(name).to_pandas().to_numpy() for name in MESSAGE_COLUMNS}
    messages[KIND] = np.full(table.num_rows, Kind.MESSAGE)
    messages[BAD_RECORD_COLUMN] = np.full(table.num_rows, None)
    messages[PART] = np.repeat(parts[order], [t.num_rows for t in tables])
    others = ~packs
    return {name: np.concatenate([column[others], messages[name]]) for name, column in columns.items()}


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=object)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _fold_order(times: np.ndarray, parts: np.ndarray) -> np.ndarray | None:
    """The order that sorts rows by ``times`` then ``parts``, stably; None when they are
    in it already (NaN times sort last)."""
    if len(times) > 1:
        steps, moves = np.diff(times), np.diff(parts)
        if not np.all((steps > 0) | ((steps == 0) & (moves >= 0))):
            return np.lexsort((parts, times))
    return None
