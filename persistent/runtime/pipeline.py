"""Pipelines: stateful tasks chained through Kafka topics, each its own query.

``Pipeline.of(source, task_a, "topic-a", task_b, sink=..., ...)`` makes one ``Job`` a
stage: the first reads the pipeline's source, each later one the topic the stage
before it writes, and the last writes the pipeline's sink. A stage writes its topic
with the Kafka sink, in one transaction per micro-batch, each in one partition of the
topic (``persistent.sinks.kafka``), and the next reads it with
``isolation.level=read_committed``, so it reads every committed micro-batch once,
whole, and nothing of one that was aborted. Each stage has its own
checkpoint directory (``DIR/stage-N``), clock and recovery path (A or B), as any job.

Event time crosses a topic as the record's timestamp: a window's end, or the time a
state value was written. A later stage's watermark follows the least of its
partitions' newest times (``persistent.runtime.rows``): a partition of the topic that
a micro-batch of the stage before left without records holds nothing back, so an idle
partition does not stall the next stage, and its restart from its clock rewinds the
topic by timestamp as any Kafka source does.

``run`` with ``available_now`` runs the stages one after another, each to the end of
the input there is then; without, it starts them all and runs them until one stops.
``persistent status DIR`` shows every stage.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from persistent.core.errors import ConfigError
from persistent.core.task import PersistentTask
from persistent.runtime import stopping
from persistent.runtime.job import Job
from persistent.runtime.running import RunningJob
from persistent.sinks.base import Sink
from persistent.sinks.kafka import KafkaSink
from persistent.sources.base import Source
from persistent.sources.kafka import KafkaSource
from persistent.storage.job_directory import stage_directory

__all__ = ["Pipeline"]

#: Seconds between two looks at the stages' queries while they run.
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Pipeline:
    """The stages of a pipeline, in order: jobs whose topics chain them (``Pipeline.of``)."""

    jobs: tuple[Job, ...]

    @classmethod
    def of(cls, source: Source, *chain: PersistentTask | str, sink: Sink, checkpoint_dir: str,
           bootstrap_servers: str, kafka_options: Mapping[str, str] | None = None, **settings) -> Pipeline:
        """A pipeline of the tasks in ``chain``, each followed by the topic it writes
        (``task, topic, task, ..., task``) on the brokers ``bootstrap_servers``, from
        ``source`` to ``sink``; ``kafka_options`` go to the topics' readers and writers
        (``kafka.security.protocol``, ...), ``settings`` to every stage's ``Job`` (with a
        ``metrics_port``, stage N serves its metrics on the port N - 1 above it)."""
        tasks, topics = chain[::2], chain[1::2]
        if not tasks or len(tasks) != len(topics) + 1:
            raise ConfigError("pipeline: give task, topic, task, ..., task: a topic between every two tasks")
        for at, task in enumerate(tasks, 1):
            if not isinstance(task, PersistentTask):
                raise ConfigError(f"pipeline: stage {at} is {task!r}, not a PersistentTask")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise ConfigError(f"pipeline: {topic!r} between two tasks is no topic name")
        options = dict(kafka_options or {})
        reading = {**options, "kafka.isolation.level": "read_committed"}
        jobs = []
        for at, task in enumerate(tasks, 1):
            stage_source = source if at == 1 else KafkaSource(bootstrap_servers, topics[at - 2], kafka_options=reading)
            stage_sink = sink if at == len(tasks) else KafkaSink(bootstrap_servers, topics[at - 1], options,
                                                                 one_partition_per_batch=True)
            port = settings.get("metrics_port")
            jobs.append(Job(task=task, source=stage_source, sink=stage_sink,
                            checkpoint_dir=stage_directory(checkpoint_dir, at),
                            **{**settings, "metrics_port": None if port is None else port + at - 1}))
        return cls(tuple(jobs))

    def run(self, spark, available_now: bool = True) -> list[RunningJob]:
        """Runs the stages: with ``available_now`` one after another, each to the end of
        its input there is then; without, all at once until one stops (the others are
        stopped then, and its error raised)."""
        if available_now:
            return [job.run(spark, available_now=True) for job in self.jobs]
        running: list[RunningJob] = []
        try:
            for job in self.jobs:
                running.append(job.start(spark))
            while all(each.query.isActive for each in running):
                stopping.check()  # a signal ``stopping.on_signals`` noted
                time.sleep(_POLL_SECONDS)
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or a signal: say where the last stage stopped
            for each in running[:-1]:
                each.stop(quietly=True)
            if not running:
                raise
            raise running[-1].stopped_by(interrupt) from None
        except BaseException:
            for each in running:
                each.stop(quietly=True)
            raise
        for each in running:
            each.stop(quietly=True)
        for each in running:
            error = each.query.exception()
            if error is not None:
                raise error
        return running
