"""Exactly-once, checkpointed monoid state for Python stream processing on Spark.

Users subclass ``PersistentTask``; ``Job`` runs it on Spark Structured Streaming.
"""

from persistent.keygroup import KeyGroup
from persistent.task import Message, PersistentTask, TaskDefinitionError

__all__ = [
    "PersistentTask",
    "Message",
    "TaskDefinitionError",
    "KeyGroup",
    "Job",
    "RunningJob",
    "BatchProgress",
    "GeneratorSource",
    "FilesSource",
    "SQLiteSink",
    "PostgresSink",
    "ParquetSink",
    "ConsoleSink",
    "sink_from_uri",
    "spark_session",
]


def __getattr__(name):
    # The Spark parts import pyspark; keep `import persistent` light for pure-Python use.
    if name in ("Job", "RunningJob", "BatchProgress"):
        from persistent import runtime

        return getattr(runtime, name)
    if name in ("GeneratorSource", "FilesSource"):
        from persistent import sources

        return getattr(sources, name)
    if name in ("SQLiteSink", "ParquetSink", "ConsoleSink", "sink_from_uri"):
        from persistent import sinks

        return getattr(sinks, name)
    if name == "PostgresSink":
        from persistent.postgres import PostgresSink

        return PostgresSink
    if name == "spark_session":
        from persistent.session import spark_session

        return spark_session
    raise AttributeError(f"module 'persistent' has no attribute {name!r}")
