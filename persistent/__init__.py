"""Exactly-once, checkpointed monoid state for Python stream processing on Spark.

Users subclass ``PersistentTask``; ``Job`` runs it on Spark Structured Streaming.
"""

import importlib

from persistent.badrecords import BadRecord, BadRecordError, BadRecords, DeadLetters, LateRecords
from persistent.files_log import InputFileChangedError
from persistent.keygroup import KeyGroup
from persistent.task import Message, PersistentTask, TaskDefinitionError

__all__ = [
    "PersistentTask",
    "Message",
    "TaskDefinitionError",
    "KeyGroup",
    "BadRecords",
    "LateRecords",
    "BadRecord",
    "BadRecordError",
    "DeadLetters",
    "Job",
    "RunningJob",
    "BatchProgress",
    "Delivery",
    "GeneratorSource",
    "FilesSource",
    "InputFileChangedError",
    "RedisSource",
    "KafkaSource",
    "SQLiteSink",
    "PostgresSink",
    "ParquetSink",
    "ConsoleSink",
    "sink_from_uri",
    "spark_session",
]


# Where each Spark-side name lives: they import pyspark (or a database client), so
# `import persistent` stays light for pure-Python use.
_LAZY = {
    "Job": "persistent.runtime",
    "RunningJob": "persistent.runtime",
    "BatchProgress": "persistent.runtime",
    "Delivery": "persistent.delivery",
    "GeneratorSource": "persistent.sources",
    "FilesSource": "persistent.sources",
    "RedisSource": "persistent.redis_source",
    "KafkaSource": "persistent.kafka",
    "SQLiteSink": "persistent.sinks",
    "PostgresSink": "persistent.postgres",
    "ParquetSink": "persistent.sinks",
    "ConsoleSink": "persistent.sinks",
    "sink_from_uri": "persistent.sinks",
    "spark_session": "persistent.session",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'persistent' has no attribute {name!r}")
