"""Exactly-once, checkpointed monoid state for Python stream processing on Spark.

Users subclass ``PersistentTask``; ``Job`` runs it on Spark Structured Streaming.
"""

import importlib

from persistent.core.errors import PersistentError

__all__ = [
    "PersistentError",
    "PersistentTask",
    "MonoidTask",
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
    "Pipeline",
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
    "KafkaSink",
    "ConsoleSink",
    "sink_from_uri",
    "spark_session",
]


# Where each name lives: they import pandas, pyspark or a database client, so
# `import persistent` stays light (the `persistent` command's help answers at once).
_LAZY = {
    "PersistentTask": "persistent.core.task",
    "MonoidTask": "persistent.core.task",
    "KeyState": "persistent.core.task",
    "Message": "persistent.core.task",
    "TaskDefinitionError": "persistent.core.task",
    "KeyGroup": "persistent.runtime.keygroup",
    "BadRecords": "persistent.core.badrecords",
    "LateRecords": "persistent.core.badrecords",
    "BadRecord": "persistent.core.badrecords",
    "BadRecordError": "persistent.core.badrecords",
    "DeadLetters": "persistent.storage.dead_letters",
    "InputFileChangedError": "persistent.storage.files_log",
    "Job": "persistent.runtime.job",
    "RunningJob": "persistent.runtime.running",
    "Pipeline": "persistent.runtime.pipeline",
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
    "KafkaSink": "persistent.sinks.kafka",
    "ConsoleSink": "persistent.sinks.console",
    "sink_from_uri": "persistent.sinks.uri",
    "spark_session": "persistent.tools.session",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'persistent' has no attribute {name!r}")
