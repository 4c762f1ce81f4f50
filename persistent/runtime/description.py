"""``JobDescription``: what a job asks for, its settings as given, each checked on its own.

A job is cut where it changes: its description (this module: the task, source, sink
and job directory, and the settings of checkpoints, event time, bad records, delivery
and metrics), its plan (``persistent.runtime.planner.Plan``: what Spark will run,
made from the description) and the running job (``persistent.runtime.running``).
``persistent.runtime.job.Job``, the class users make, is a description that plans
itself when made; the planner reads the description alone, so no import goes back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from persistent.core.badrecords import BadRecords, LateRecords
from persistent.core.errors import ConfigError
from persistent.core.task import PersistentTask
from persistent.runtime.delivery import Delivery
from persistent.runtime.metrics import DEFAULT_HOST
from persistent.runtime.progress import stderr
from persistent.sinks.base import Sink
from persistent.sources.base import Source
from persistent.storage.dead_letters import DeadLetters
from persistent.storage.job_directory import JobDirectory
from persistent.storage.records import BatchProgress

__all__ = ["JobDescription"]


@dataclass(frozen=True)
class JobDescription:
    """A stateful streaming job's settings: source -> prepare -> task (key groups) -> sink.

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

    A description is frozen: it checks each setting's own value when it is made
    (``ConfigError`` naming the setting) and holds the settings as given; the planner
    checks what needs more than one value (``persistent.runtime.planner.Plan.of``).
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

    def __post_init__(self):
        for name in ("checkpoint_interval_ms", "key_groups"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"Job: {name} must be > 0, got {getattr(self, name)}")
        for name in ("watermark_delay_ms", "max_event_time_skew_ms"):
            if (getattr(self, name) or 0) < 0:
                raise ConfigError(f"Job: {name} must be >= 0, got {getattr(self, name)}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError(f"Job: metrics_port must be a TCP port, 1 to 65535, got {self.metrics_port}")

    @property
    def dead_letters(self) -> DeadLetters:
        """Where bad records go with ``bad_records="dead-letter"``, and late messages
        with ``late_records="output"``."""
        return DeadLetters(self.dead_letter_dir or JobDirectory.default_dead_letters(self.checkpoint_dir))
