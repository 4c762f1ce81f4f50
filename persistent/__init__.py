"""Exactly-once, checkpointed monoid state for Python stream processing on Spark.

Users subclass ``PersistentTask``; ``Job`` runs it on Spark Structured Streaming.
"""

import importlib

from persistent.core.badrecords import BadRecord, BadRecordError, BadRecords, LateRecords
from persistent.core.errors import PersistentError
from persistent.core.task import KeyState, Message, PersistentTask, TaskDefinitionError
from persistent.runtime.keygroup import KeyGroup
from persistent.storage.dead_letters import DeadLetters
from persistent.storage.files_log import InputFileChangedError

__all__ = [
    "PersistentError",
    "PersistentTask",
    "KeyState",
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
    "FileFormat",
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
    "Job": "persistent.runtime.job",
    "RunningJob": "persistent.runtime.planner",
    "BatchProgress": "persistent.storage.records",
    "Delivery": "persistent.runtime.delivery",
    "GeneratorSource": "persistent.sources.generator",
    "FilesSource": "persistent.sources.files",
    "FileFormat": "persistent.sources.files",
    "RedisSource": "persistent.sources.redis",
    "KafkaSource": "persistent.sources.kafka",
    "SQLiteSink": "persistent.sinks.sqlite",
    "PostgresSink": "persistent.sinks.postgres",
    "ParquetSink": "persistent.sinks.parquet",
    "ConsoleSink": "persistent.sinks.console",
    "sink_from_uri": "persistent.sinks.uri",
    "spark_session": "persistent.tools.session",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'persistent' has no attribute {name!r}")
