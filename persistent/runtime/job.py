"""``Job``: a stateful streaming job as a frozen, validated spec.

A job names its task, source, sink and job directory, and the settings of its
checkpoints, event time, bad records and delivery. Making one checks every setting
(``Plan.of``); nothing changes it afterwards. ``Job.start`` and ``Job.run`` hand it
to the planner, ``persistent.runtime.planner``, which plans recovery, builds the
Spark query and starts it; the key groups run in ``persistent.runtime.stateful`` and
each micro-batch commits in ``persistent.runtime.commit``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from persistent.core.badrecords import BadRecords, LateRecords
from persistent.core.errors import ConfigError
from persistent.core.task import PersistentTask
from persistent.runtime.delivery import Delivery
from persistent.runtime.metrics import DEFAULT_HOST, JobMetrics
from persistent.runtime.planner import Plan
from persistent.runtime.progress import stderr
from persistent.runtime.running import RunningJob
from persistent.sinks.base import Sink
from persistent.sources.base import Source
from persistent.storage.dead_letters import DeadLetters
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import BatchProgress

__all__ = ["Job"]


@dataclass(frozen=True)
class Job:
    """A stateful streaming job: source -> prepare -> task (key groups) -> sink.

    ``prepare`` maps the source's DataFrame to one with columns ``key``,
    ``timestamp`` (ms, bigint) and ``value`` using Spark SQL (for example splitting
    lines into words); by default the source's messages are used as they are. It
    sees only the records the source could read; the others go around it.

    A message is late, counted and not applied, when its event time is more than
    ``watermark_delay_ms`` older than the newest event time of the earlier
    micro-batches; a message at the newest time seen is never late. ``late_records``
    says what else happens to it: nothing (``"drop"``, the default), or it goes to
    the dead-letter output with reason ``late``, its event time and the watermark it
    missed (``"output"``; ``persistent.core.badrecords``).

    ``bad_records`` says what a bad record does (``persistent.core.badrecords``): fail
    the query (``"fail"``, the default) or go to the dead-letter output in
    ``dead_letter_dir`` (``"dead-letter"``; by default ``CHECKPOINT_DIR/dead-letters``).
    With ``max_event_time_skew_ms``, a message whose event time is more than that
    after its micro-batch's processing time is a bad record too.

    ``delivery`` is the guarantee (``persistent.runtime.delivery.Delivery`` or its value):
    ``"exactly-once"`` (the default), ``"at-least-once"`` or ``"at-most-once"``.

    The key groups write and read their checkpoints on the executors, so
    ``checkpoint_dir`` must be reachable from every executor's Python worker
    (``persistent.storage.filesystems``): a shared local path or ``file://``, ``hdfs://``
    (over WebHDFS, at ``webhdfs_address``, by default the NameNode's host on port
    9870), ``webhdfs://``, or an object store: ``s3a://`` (``s3://``), ``gs://``.

    A job is a frozen spec: it checks its settings when it is made (``ConfigError``
    naming the setting) and holds them as given; ``dataclasses.replace`` makes a
    changed copy. ``start`` and ``run`` hand it to the planner
    (``persistent.runtime.planner.Plan``).
    """

    task: PersistentTask
    source: Source
    sink: Sink
    checkpoint_dir: str
    checkpoint_interval_ms: int = 1000
    watermark_delay_ms: int = 0
    #: Key groups (tasks) keys are hashed to; ``None``: the number the checkpoint
    #: directory was written with, on a fresh start ``KEY_GROUPS_PER_CORE`` per core.
    key_groups: int | None = None
    prepare: Callable | None = None
    on_progress: Callable[[BatchProgress], None] | None = field(default=lambda p: stderr.line(p.line()))
    #: ``run`` shows a progress bar on standard error while an available-now run reads
    #: a bounded source (``Source.backlog``).
    progress_bar: bool = True
    bad_records: BadRecords | str = BadRecords.FAIL
    dead_letter_dir: str | None = None
    late_records: LateRecords | str = LateRecords.DROP
    max_event_time_skew_ms: int | None = None
    delivery: Delivery | str = Delivery.EXACTLY_ONCE
    #: The NameNode's WebHDFS address (``http://HOST:PORT``) for an ``hdfs://`` ``checkpoint_dir``.
    webhdfs_address: str | None = None
    #: A port of the driver to serve the job's metrics on, for Prometheus (``persistent.runtime.metrics``,
    #: the ``metrics`` extra): ``http://DRIVER:PORT/metrics``, from the start until the job stops.
    metrics_port: int | None = None
    #: The driver's address the metrics are served on: the loopback interface by default,
    #: ``"0.0.0.0"`` for every interface (docs/deploy.md#metrics).
    metrics_host: str = DEFAULT_HOST
    #: The job as the planner runs it (``Plan.of``), made with the job: making it checks
    #: the settings that need more than their own value.
    plan: Plan = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        for name in ("checkpoint_interval_ms", "key_groups"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"Job: {name} must be > 0, got {getattr(self, name)}")
        for name in ("watermark_delay_ms", "max_event_time_skew_ms"):
            if (getattr(self, name) or 0) < 0:
                raise ConfigError(f"Job: {name} must be >= 0, got {getattr(self, name)}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError(f"Job: metrics_port must be a TCP port, 1 to 65535, got {self.metrics_port}")
        # The choices, the sink, the checkpoint directory, the task.
        object.__setattr__(self, "plan", Plan.of(self))

    def serve_metrics(self, app: str) -> JobMetrics:
        """Serves the metrics of application ``app``'s run of the job on ``metrics_port``
        (``metrics_host``), with its settings from the start (``settings``)."""
        return JobMetrics(self.metrics_port, app, self.metrics_host, self.settings())

    def settings(self) -> dict[str, str]:
        """The settings its metrics serve as ``persistent_job_info``: its task, source and
        sink by class (a sink's URI may hold a password), its job directory, delivery,
        checkpoint interval, watermark delay, key groups and record handling."""
        return {
            "task": type(self.task).__name__,
            "source": type(self.source).__name__,
            "sink": type(self.sink).__name__,
            "checkpoint_dir": self.checkpoint_dir,
            "delivery": self.plan.delivery.value,
            "checkpoint_interval_ms": str(self.checkpoint_interval_ms),
            "watermark_delay_ms": str(self.watermark_delay_ms),
            "key_groups": "as the job directory has them" if self.key_groups is None else str(self.key_groups),
            "bad_records": self.plan.bad_records.value,
            "late_records": self.plan.late_records.value,
        }

    @property
    def dead_letters(self) -> DeadLetters:
        """Where bad records go with ``bad_records="dead-letter"``, and late messages
        with ``late_records="output"``."""
        return DeadLetters(self.dead_letter_dir or JobDirectory.default_dead_letters(self.checkpoint_dir))

    def start(self, spark, available_now: bool = False, trigger_ms: int | None = None) -> RunningJob:
        """Plans recovery, builds the query and starts it; with ``metrics_port``, first
        serves the metrics (until ``RunningJob.stop``). Wait for an ``available_now``
        run with ``RunningJob.wait``: on Spark 4.0 and 4.1 it is that which ends the
        query once drained (``persistent.sources.bounds``)."""
        return self.plan.start(spark, available_now, trigger_ms)

    def run(self, spark, available_now: bool = True) -> RunningJob:
        """Starts the job and waits until it ends (with ``available_now``: input consumed)."""
        return self.plan.run(spark, available_now)
