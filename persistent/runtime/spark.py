"""The Spark a job runs on: a classic session (not Spark Connect) of a supported minor
version, checked when the job starts, before anything is written."""

from __future__ import annotations

from persistent.core.errors import SetupError

__all__ = ["SPARK_MINORS", "PYSPARK", "UnsupportedSparkError", "check_spark", "minor_of"]

#: The Spark minor versions the project runs on: setup.cfg's pyspark range, and a jar
#: of Spark's half of the fold for each (``persistent/jvm/pom.xml``'s profiles). Not
#: before 4.2: the sources and the heartbeats are Python data sources that bound their
#: micro-batches (``latestOffset(start, limit)``, ``pyspark.sql.streaming.datasource``),
#: which Spark 4.2 introduced.
SPARK_MINORS = ("4.2",)
_MAJOR, _LAST = SPARK_MINORS[-1].split(".")
#: The pyspark requirement of the supported minor versions (setup.cfg's).
PYSPARK = f"pyspark>={SPARK_MINORS[0]},<{_MAJOR}.{int(_LAST) + 1}"
#: The supported minor versions, as a refusal names them.
_RANGE = SPARK_MINORS[0] if len(SPARK_MINORS) == 1 else f"{SPARK_MINORS[0]} to {SPARK_MINORS[-1]}"


class UnsupportedSparkError(SetupError):
    """The session is of a Spark the project does not run on, or a Spark Connect session."""


def minor_of(spark_version: str) -> str:
    """``"4.2"`` of ``"4.2.0"``."""
    return ".".join(spark_version.split(".")[:2])


def check_spark(spark) -> None:
    """Raises ``UnsupportedSparkError`` unless ``spark`` is a classic session of a
    supported Spark."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        raise UnsupportedSparkError(
            "Job: a Spark Connect session cannot run a job: its commit needs the driver's SparkContext "
            "(accumulators) and Spark's half of the fold the driver's JVM, which Connect does not expose; "
            "run the application with spark-submit or a classic SparkSession"
        )
    if minor_of(spark.version) not in SPARK_MINORS:
        raise UnsupportedSparkError(
            f"Job: Spark {spark.version} is not supported: jobs run on Spark {_RANGE} ({PYSPARK})")
