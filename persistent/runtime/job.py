"""``Job``: a stateful streaming job as a frozen, validated spec.

A job is its description (``persistent.runtime.description.JobDescription``: the
task, source, sink and job directory, and the settings of its checkpoints, event
time, bad records and delivery) planned: making one checks every setting, each on
its own and then together (``Plan.of``); nothing changes it afterwards. ``Job.start``
and ``Job.run`` hand it to the planner, ``persistent.runtime.planner``, which plans
recovery, builds the Spark query and starts it; the key groups run in
``persistent.runtime.stateful`` and each micro-batch commits in
``persistent.runtime.commit``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from persistent.runtime.description import JobDescription
from persistent.runtime.metrics import JobMetrics
from persistent.runtime.planner import Plan
from persistent.runtime.running import RunningJob

__all__ = ["Job"]


@dataclass(frozen=True)
class Job(JobDescription):
    """A stateful streaming job: source -> prepare -> task (key groups) -> sink.

    Its settings, what they mean and the checks of their own values are those of
    ``persistent.runtime.description.JobDescription``; making a job also plans it
    (``plan``), which checks the settings that need more than their own value.

    A job is a frozen spec: it checks its settings when it is made (``ConfigError``
    naming the setting) and holds them as given; ``dataclasses.replace`` makes a
    changed copy. ``start`` and ``run`` hand it to the planner
    (``persistent.runtime.planner.Plan``).
    """

    #: The job as the planner runs it (``Plan.of``), made with the job: making it checks
    #: the settings that need more than their own value.
    plan: Plan = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        super().__post_init__()
        # The choices, the sink, the checkpoint directory, the task.
        object.__setattr__(self, "plan", Plan.of(self))

    def serve_metrics(self, app: str) -> JobMetrics:
        """Serves the metrics of application ``app``'s run of the job on ``metrics_port``
        (``metrics_host``), with its settings from the start (``Plan.settings``)."""
        return self.plan.serve_metrics(app)

    def start(self, spark, available_now: bool = False, trigger_ms: int | None = None) -> RunningJob:
        """Plans recovery, builds the query and starts it; with ``metrics_port``, first
        serves the metrics (until ``RunningJob.stop``). Wait for an ``available_now``
        run with ``RunningJob.wait``: on Spark 4.0 and 4.1 it is that which ends the
        query once drained (``persistent.sources.bounds``)."""
        return self.plan.start(spark, available_now, trigger_ms)

    def run(self, spark, available_now: bool = True) -> RunningJob:
        """Starts the job and waits until it ends (with ``available_now``: input consumed)."""
        return self.plan.run(spark, available_now)
