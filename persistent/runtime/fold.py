"""The fold before the shuffle: a ``MonoidTask``'s messages cross Spark's shuffle as
one partial value per key group, key, bucket of its table (checkpoint interval, or
window pane) and source partition.

The key groups' operator shuffles every row to its key group; native Spark's
aggregation first combines the rows of each key in the task that reads them. A
monoid's ``plus`` is associative, so a task whose message values Spark can compute
itself (``MonoidTask``: ``Count``, ``Averaged``) can be folded the same way, and each
key group folds the partials into its table as it folds messages. Spark's half is
``persistent/jvm/Fold.scala``, built with Maven into a jar per supported Spark minor
version (``build_jars.py``), which the wheel ships and the runtime loads into
the session (``load_extension``).

**The rule.** A job folds when its task is a ``MonoidTask`` (whose state is not
windowed, or windowed by a ``Window``: not sessions, whose bounds depend on the
messages), its value column is of an atomic type (Spark groups the rows that do not fold
by it) and the session took Spark's half (``load_extension``). A message row folds when
it is on time: at or after the micro-batch's watermark (``BatchWatermark``, which reads
what the driver sets for the micro-batch's jobs, ``WATERMARK_PROPERTY``) and the restore
point, and when its value is one the monoid takes (a finite number for ``Averaged``). A
partial never holds rows of two buckets of the key group's table
(``state.window.bucket_ms``: a checkpoint interval, or the pane of a window, which
divides it), so never of two sides of a checkpoint or of the restore point (a checkpoint
time), nor of two sets of windows; never late and on-time rows. Every other row (late
messages, messages before the restore point, values the monoid refuses, bad records,
heartbeats) crosses as it is, equal rows once with their ``count``, and the key group
handles it as without the fold. A ``MonoidTask``'s job says in its first lines which way
it runs (``fold_of``, ``load_extension``).

**Where it costs.** When a micro-batch's messages hardly share a key and bucket (a
million keys a batch), the fold combines nothing and its hash table costs more than it
saves. The driver counts the partials a batch's messages folded into (``Folding``); when
they were more than ``KEEPS`` of the messages, the next ``PASSES`` micro-batches pass
their rows through unfolded, then one folds again to see whether the keys changed:
Spark plans the node as a projection, each row standing for itself, while the query's
thread has ``FOLD_PROPERTY`` set to ``PASS``, and the driver gives those micro-batches'
tasks no watermark, so that no row is a partial. Both ways give the key groups the same
messages; only the time differs.

**The newest event time.** Spark's half also sends every key group, from each task
before the shuffle that read a message (one source partition), the newest event time
among its messages (``newest_per_group``: a ``Kind.NEWEST`` row per group after the
partition's rows): the job's watermark follows the least of them
(``persistent.runtime.rows.next_watermark_ms``), and every micro-batch with messages
runs every group.

**Packing.** The messages of a job that does not fold (its values come from Python)
still need not cross Spark's shuffle, its sort by key group and its conversion to Arrow
one row each: Spark's half packs each source partition's messages per key group into
an Arrow stream (``packed``: a ``Kind.PACKED`` row after the partition's other rows, or
once it holds ``ARROW_BATCH_ROWS`` messages) and the key group reads them from it
(``persistent.runtime.rows.decode``). The packed columns keep their types; a job packs
when its key and value are of a type pandas reads from Arrow as PySpark does
(``PACKS``: strings, integers, floating point numbers, booleans) and the session took
Spark's half, and says so in its first lines (``pack_of``). The packs hold the rows
after the watermark and the newest event times: Spark's watermark moves as before, and
no message is late or bad for having been packed.

**Order.** A key group folds its partials by their newest event time, then source
partition, as it folds messages, then a hash of their key, whatever order Spark emits
them in (``persistent.runtime.rows.decode``); within a source partition Spark folds a
key's rows in their order. A replayed micro-batch (the same offsets, the same
partitions) folds alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monoids import Averaged, Count
from persistent.core.badrecords import BAD_RECORD_COLUMN
from persistent.core.task import MESSAGE_COLUMNS, MonoidTask
from persistent.runtime import fold_wire as wire
from persistent.runtime.fold_wire import FOLD_PROPERTY, PASS, WATERMARK_PROPERTY
from persistent.runtime.rows import (ARROW_BATCH_ROWS, COUNT, EARLIEST, EVENT_TIME, FOLDED, GROUP, KEY, KIND, PACKED,
                                     PACKED_SEQ, PART, PARTIAL, TIMESTAMP, VALUE, Kind, no_message_columns)
from persistent.runtime.spark import minor_of
from persistent.storage.fs import LocalFileSystem

__all__ = ["Fold", "Folding", "fold_of", "load_extension", "folded", "newest_per_group", "pack_of", "packed",
           "jar_of", "PACKS", "WATERMARK_PROPERTY", "FOLD_PROPERTY", "PASS", "JARS"]

#: Where the jars of Spark's half of the fold are: one per Spark minor version,
#: ``persistent-fold-spark-X.Y.jar`` (``build_jars.py``).
JARS = Path(__file__).resolve().parent.parent / "jvm"
#: The column of a row's bucket (a message's time when it does not fold).
_BUCKET = "bucket"
#: The key and value types a pack carries: those pandas reads from an Arrow column as
#: PySpark converts a row's (``persistent.runtime.rows.decode``).
PACKS = ("string", "bigint", "int", "smallint", "tinyint", "double", "float", "boolean")
_ATOMIC = ("string", "bigint", "int", "smallint", "tinyint", "double", "float", "boolean", "binary", "date",
           "timestamp")


@dataclass(frozen=True)
class Fold:
    """How a monoid's values fold in Spark, besides the count of messages each partial
    holds: the aggregate ``functions`` of Spark's half, each over the message value cast
    to ``casts``' type, and which values fold (``finite``: finite numbers only)."""

    functions: tuple[str, ...]
    casts: tuple[str, ...]
    finite: bool

    @property
    def columns(self) -> tuple[str, ...]:
        """The partial values' columns, in the order of ``functions``."""
        return tuple(f"{PARTIAL}{i}" for i in range(len(self.functions)))

    def values(self, counts: np.ndarray, partial: dict) -> np.ndarray:
        """The monoid column of the partials' values, from the messages each holds
        (``counts``) and their columns (``columns``)."""
        if not self.functions:  # Count
            return counts
        out = np.zeros(len(counts), dtype=Averaged.dtype)
        out["count"], out["total"] = counts, partial[self.columns[0]]
        return out


class Folding:
    """Whether a job's next micro-batch folds before the shuffle or passes its rows
    through: after a micro-batch whose messages folded into more partials than ``KEEPS``
    times their number, the next ``PASSES`` pass, then one folds again."""

    #: In runs of the benchmark the fold was even with the unfolded job, or slower, at
    #: about 0.63 partials a message (100,000 keys a micro-batch of 200,000 messages, in
    #: two intervals or panes), and ahead at 0.01 (1,000 keys) and with skewed keys.
    KEEPS = 0.5
    PASSES = 10

    def __init__(self) -> None:
        self.passes = 0

    def passes_next(self, folded: int, partials: int) -> bool:
        """After a micro-batch that folded ``folded`` messages into ``partials`` partials
        (0 and 0 when it folded none): whether the next one passes its rows through."""
        if folded:
            self.passes = self.PASSES if partials > self.KEEPS * folded else 0
        elif self.passes:
            self.passes -= 1
        return self.passes > 0


_FOLDS = {
    Count: Fold((), (), finite=False),
    Averaged: Fold((wire.SUM,), ("double",), finite=True),
}


def fold_of(task, value_type: str) -> tuple[Fold | None, str]:
    """The fold of ``task``'s messages, whose value column is of Spark type
    ``value_type``, or None; and the sentence that says so (the job's first lines)."""
    if not isinstance(task, MonoidTask):
        return None, "every message crosses the shuffle (the task is no MonoidTask)"
    if value_type not in _ATOMIC:
        return None, f"every message crosses the shuffle (its value is a {value_type}, which Spark cannot group by)"
    return _FOLDS[type(task.state_spec().monoid)], "messages fold before the shuffle (a MonoidTask)"


def folded(rows, fold: Fold, floor_ms: int, bucket_ms: int):
    """The key groups' ``rows`` (``persistent.runtime.rows``, after the watermark),
    each source partition's on-time messages folded per key group, key and bucket of
    ``bucket_ms`` (``state.window.bucket_ms``): partials with ``folded`` true,
    ``count`` messages, ``timestamp`` the newest of them, the partial values in
    ``fold.columns`` and a null ``value``; every other row once per distinct row, with
    its ``count``."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.classic.column import Column

    spark = rows.sparkSession
    half = _half(spark)
    number = F.col(VALUE).try_cast("double")
    takes = (number.isNotNull() & ~F.isnan(number) & (F.abs(number) != float("inf"))) if fold.finite else F.lit(True)
    on_time = (F.col(KIND) == int(Kind.MESSAGE)) & (
        F.col(TIMESTAMP) >= F.greatest(Column(half.watermark()), F.lit(floor_ms)))
    prepared = rows.withColumn(FOLDED, on_time & takes)
    bucket = F.when(F.col(FOLDED), F.col(TIMESTAMP) - F.pmod(F.col(TIMESTAMP), F.lit(bucket_ms)))
    prepared = prepared.select(
        *(c for c in prepared.columns if c != VALUE),
        *(F.col(VALUE).try_cast(cast).alias(f"in_{name}") for cast, name in zip(fold.casts, fold.columns)),
        F.coalesce(bucket, F.col(TIMESTAMP)).alias(_BUCKET),
        F.when(~F.col(FOLDED), F.col(VALUE)).alias(VALUE),
    )
    grouping = [GROUP, KIND, KEY, PART, FOLDED, _BUCKET, VALUE, BAD_RECORD_COLUMN, EVENT_TIME]
    functions = [wire.COUNT, wire.MAX, wire.MIN, *fold.functions]
    inputs = [TIMESTAMP, TIMESTAMP, TIMESTAMP, *(f"in_{name}" for name in fold.columns)]
    names = [COUNT, TIMESTAMP, EARLIEST, *fold.columns]
    partial = half.partial(prepared._jdf, *(_array(spark, "java.lang.String", v)
                                            for v in (grouping, functions, inputs, names)))
    return DataFrame(partial, spark).drop(_BUCKET)


def newest_per_group(rows, key_groups: int):
    """The key groups' ``rows`` (``persistent.runtime.rows``, after the watermark) and,
    after the rows of each source partition that read a message, a ``Kind.NEWEST`` row
    for each of the ``key_groups`` whose ``timestamp`` is the newest event time of the
    partition's messages: those that move Spark's watermark (``rows.moving_time``). Every
    key group so learns the event time every partition reached, from which the next
    micro-batch's watermark follows (``rows.next_watermark_ms``)."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    spark = rows.sparkSession
    values = {**no_message_columns({c.name: c.dataType for c in rows.schema}, Kind.NEWEST),
              EVENT_TIME: F.lit(None).cast("timestamp")}
    names = [name for name in rows.columns if name not in (GROUP, TIMESTAMP)]
    frame = _half(spark).newest(rows._jdf, KIND, int(Kind.MESSAGE), GROUP, TIMESTAMP, key_groups,
                                _array(spark, "java.lang.String", names),
                                _array(spark, "org.apache.spark.sql.Column", [values[name]._jc for name in names]))
    return DataFrame(frame, spark)


def pack_of(key_type: str, value_type: str) -> tuple[bool, str]:
    """Whether a job whose messages do not fold, of key and value columns of Spark types
    ``key_type`` and ``value_type``, packs them; and the sentence that says so."""
    odd = [f"its {name} is a {kind}" for name, kind in (("key", key_type), ("value", value_type))
           if kind not in PACKS]
    if odd:
        return False, f"every message crosses the shuffle as a row ({' and '.join(odd)}, which no pack carries)"
    return True, "messages cross the shuffle packed per key group"


def packed(rows, most: int = ARROW_BATCH_ROWS):
    """The key groups' ``rows`` (``persistent.runtime.rows``, after the watermark and the
    newest event times) with each source partition's messages packed per key group, at
    most ``most`` a pack: ``Kind.PACKED`` rows, ``packed`` and ``packed_seq`` null in the
    others."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    spark = rows.sparkSession
    values = {**no_message_columns({c.name: c.dataType for c in rows.schema}, Kind.PACKED),
              EVENT_TIME: F.lit(None).cast("timestamp")}
    names = [name for name in rows.columns if name not in (GROUP, PART)]
    frame = _half(spark).pack(rows._jdf, KIND, int(Kind.MESSAGE), GROUP, PART,
                              _array(spark, "java.lang.String", list(MESSAGE_COLUMNS)), most, PACKED, PACKED_SEQ,
                              _array(spark, "java.lang.String", names),
                              _array(spark, "org.apache.spark.sql.Column", [values[name]._jc for name in names]))
    return DataFrame(frame, spark)


def _array(spark, java_class: str, values: list):
    """A Java array of ``java_class`` holding ``values``, for a call through Py4J."""
    gateway = spark.sparkContext._gateway
    array = gateway.new_array(functools.reduce(getattr, java_class.split("."), gateway.jvm), len(values))
    for i, each in enumerate(values):
        array[i] = each
    return array


#: The name of the jar of Spark minor version ``X.Y``: ``_JAR.format("X.Y")``.
_JAR = "persistent-fold-spark-{}.jar"


def jar_of(spark_version: str) -> Path:
    """The jar of Spark's half of the fold for Spark ``spark_version`` (its minor version's)."""
    return JARS / _JAR.format(minor_of(spark_version))


def load_extension(spark) -> str | None:
    """Loads Spark's half of the fold, the jar of ``spark``'s Spark version, into the
    session: the driver's class loader and the executors' jars (unless ``--jars`` or
    ``spark.jars`` put it there already), and the session's planner. Returns None, or
    why it could not (no fold then)."""
    jar = jar_of(spark.version)
    local = LocalFileSystem()
    if local.kind(str(jar)) != "file":
        prefix, suffix = _JAR.split("{}")
        built = ", ".join(name for name in local.list_names(str(JARS))
                          if name.startswith(prefix) and name.endswith(suffix)) or "none"
        return f"Spark's half of the fold is not loaded: no {jar.name} in {JARS} (built: {built})"
    jvm = spark.sparkContext._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        if not _loads(jvm, loader):
            loader.addURL(jvm.java.io.File(str(jar)).toURI().toURL())
            spark.sparkContext._jsc.sc().addJar(str(jar))
        _half(spark).register(spark._jsparkSession)
    except Exception as exc:  # Py4J: the class loader is not Spark's, or the class did not load
        return f"Spark's half of the fold is not loaded from {jar}: {type(exc).__name__}: {exc}"
    return None


def _loads(jvm, loader) -> bool:
    """Whether ``loader`` has Spark's half already (this session loaded it, or the
    application was given its jar)."""
    try:
        jvm.java.lang.Class.forName("org.apache.spark.sql.persistent.Fold", False, loader)
    except Exception:  # Py4J's error for the ClassNotFoundException
        return False
    return True


def _half(spark):
    """Spark's half of the fold (``Fold`` of ``persistent/jvm/Fold.scala``), through Py4J."""
    return spark.sparkContext._jvm.org.apache.spark.sql.persistent.Fold
