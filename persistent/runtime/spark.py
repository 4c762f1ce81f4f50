"""The Spark a job runs on: a classic session (not Spark Connect) of a supported minor
version, checked when the job starts, before anything is written."""

from __future__ import annotations

from persistent.core.errors import SetupError

__all__ = ["SPARK_MINORS", "PYSPARK", "UnsupportedSparkError", "check_spark", "minor_of"]

#: The Spark minor versions the project runs on: setup.cfg's pyspark range, and a jar
#: of Spark's half of the fold for each (``persistent/jvm/pom.xml``'s profiles). Not
#: before 4.0: the sources and the heartbeats are Python data sources
#: (``pyspark.sql.datasource``), which Spark 4.0 introduced; 4.0 and 4.1 bound their
#: micro-batches as ``persistent.sources.bounds`` says.
SPARK_MINORS = ("4.0", "4.1", "4.2")
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


#: The Spark minor versions whose ``applyInPandasWithState`` fails with pyarrow 26 and
#: later: they slice Arrow record batches at offsets held as floats, which pyarrow 26's
#: ``RecordBatch.slice`` refuses (25 accepted them).
_BEFORE_PYARROW_26 = ("4.0", "4.1")


def check_spark(spark, pyarrow_version: str | None = None) -> None:
    """Raises ``UnsupportedSparkError`` unless ``spark`` is a classic session of a
    supported Spark, beside a pyarrow (``pyarrow_version``: the installed one) it works with."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        raise UnsupportedSparkError(
            "Job: a Spark Connect session cannot run a job: its commit needs the driver's SparkContext "
            "(accumulators) and Spark's half of the fold the driver's JVM, which Connect does not expose; "
            "run the application with spark-submit or a classic SparkSession"
        )
    if minor_of(spark.version) not in SPARK_MINORS:
        raise UnsupportedSparkError(
            f"Job: Spark {spark.version} is not supported: jobs run on Spark {_RANGE} ({PYSPARK})")
    if pyarrow_version is None:
        import pyarrow

        pyarrow_version = pyarrow.__version__
    if minor_of(spark.version) in _BEFORE_PYARROW_26 and int(pyarrow_version.split(".")[0]) >= 26:
        raise UnsupportedSparkError(
            f"Job: Spark {spark.version}'s applyInPandasWithState fails with pyarrow {pyarrow_version} (it slices "
            f"Arrow batches at offsets held as floats, which pyarrow 26 refuses): install pyarrow<26 beside it")
