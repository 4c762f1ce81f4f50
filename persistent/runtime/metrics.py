"""A running job's figures per micro-batch, served to Prometheus.

``Job(metrics_port=PORT)`` (the examples' ``--metrics-port``) starts ``JobMetrics`` on
the driver: an HTTP server that answers ``GET /metrics`` on ``PORT`` of
``Job.metrics_host`` (the loopback interface unless told otherwise), from a registry
of the job's own (two jobs in one process do not share figures). From the start it
serves the job's settings (``persistent_job_info``) and zeros; after each committed
micro-batch the driver publishes the batch's ``BatchProgress``, the record
``persistent status`` reads from the job directory: gauges hold the last micro-batch's
figures, counters the totals since the job started. Every metric carries the label
``app``, the Spark application's name.

Times are Prometheus' base unit, seconds: event times (the watermark, the clock) in
seconds since the epoch, so ``time() - persistent_clock_seconds`` is the clock's
lag behind wall time.

The server is ``prometheus_client``'s (``pip install 'persistent-state[metrics]'``),
imported only when a job asks for a port.
"""

from __future__ import annotations

from collections.abc import Callable

from persistent.core.errors import SetupError
from persistent.storage.records import BatchProgress

__all__ = ["JobMetrics", "GAUGES", "COUNTERS", "TIMES", "INFO", "SPARK_HALF", "DEFAULT_HOST", "MetricsClientMissing",
           "prometheus_client"]

#: Where a job serves its metrics unless told otherwise: this host only.
DEFAULT_HOST = "127.0.0.1"


class MetricsClientMissing(SetupError, ImportError):
    """A job asks for metrics and ``prometheus_client`` is not installed."""


def prometheus_client(port: int):
    """The ``prometheus_client`` module, or ``MetricsClientMissing`` naming the extra
    that installs it (``port``: the port asked for, for the message)."""
    try:
        import prometheus_client as client
    except ImportError:
        raise MetricsClientMissing(
            f"metrics port {port} needs prometheus_client, which is not installed: "
            "pip install 'persistent-state[metrics]'"
        ) from None
    return client

#: What a metric takes of a micro-batch's progress record; None where the record lacks it.
Figure = Callable[["BatchProgress"], "float | None"]


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


#: The last committed micro-batch's figures: ``(name, help, figure of its progress)``.
#: A figure the progress lacks (``None``: no clock yet) leaves its gauge as it was.
GAUGES: tuple[tuple[str, str, Figure], ...] = (
    ("persistent_batch_rows", "Messages the last micro-batch applied to the state.", lambda p: p.rows),
    ("persistent_batch_results", "Results the last micro-batch wrote to the sink.", lambda p: p.results),
    ("persistent_batch_late_rows", "Messages of the last micro-batch not applied for being late: behind the "
     "watermark, or before their key group's last checkpoint.", lambda p: p.late),
    ("persistent_batch_replayed_rows", "Messages of the last micro-batch before the restore point of a restart "
     "from the clock, already in the restored state.", lambda p: p.replayed),
    ("persistent_batch_dead_letters", "Bad (and, when output, late) records the last micro-batch wrote to the "
     "dead-letter output.",
     lambda p: p.dead_letters),
    ("persistent_batch_duration_seconds", "How long the last micro-batch took on the driver: computing it, then "
     "committing it.", lambda p: p.seconds),
    ("persistent_batch_commit_seconds", "How long the last micro-batch's commit took once it was computed: dead "
     "letters, sink (unless its write computed the batch), clock.", lambda p: p.commit_seconds),
    ("persistent_batch_checkpoints", "Checkpoints the key groups wrote in the last micro-batch.",
     lambda p: p.checkpoints),
    ("persistent_batch_checkpoint_bytes", "Bytes of the checkpoints the key groups wrote in the last micro-batch.",
     lambda p: p.checkpoint_bytes),
    ("persistent_batch_checkpoint_seconds", "Time the key groups spent writing checkpoints in the last "
     "micro-batch, summed over the groups.", lambda p: p.checkpoint_seconds),
    ("persistent_batch_state_keys", "Keys in the state of the key groups that ran in the last micro-batch.",
     lambda p: sum(p.keys.values()) if p.keys else None),
    ("persistent_batch_worker_peak_bytes", "The largest peak resident memory of the Python workers that ran the "
     "last micro-batch's key groups.", lambda p: p.worker_peak_bytes),
    ("persistent_batch_groups_decoded", "Key groups of the last micro-batch that decoded their table from their "
     "state or checkpoint, not going on from the one their Python worker held.", lambda p: p.decoded_groups),
    ("persistent_watermark_seconds", "The watermark after the last micro-batch: event time, seconds since the "
     "epoch.", lambda p: _seconds(p.watermark_ms)),
    ("persistent_clock_seconds", "The global minimum checkpoint clock: event time, seconds since the epoch.",
     lambda p: _seconds(p.clock_ms)),
    ("persistent_clock_lag_seconds", "How far the global minimum checkpoint clock is behind the watermark.",
     lambda p: _seconds(p.clock_lag_ms)),
    ("persistent_last_commit_timestamp_seconds", "When the last micro-batch was committed: wall time, seconds "
     "since the epoch.", lambda p: _seconds(p.finished_at_ms)),
)

#: Gauges of times, served from the first micro-batch that has them on; the others
#: are served from the start, at 0 (a time of 0 would read as 1970).
TIMES = frozenset({"persistent_watermark_seconds", "persistent_clock_seconds", "persistent_clock_lag_seconds",
                   "persistent_last_commit_timestamp_seconds"})

#: Totals since the job started: ``(name, help, figure of one micro-batch's progress)``;
#: Prometheus' client adds the suffix ``_total``.
COUNTERS: tuple[tuple[str, str, Figure], ...] = (
    ("persistent_batches", "Micro-batches committed.", lambda p: 1),
    ("persistent_rows", "Messages applied to the state.", lambda p: p.rows),
    ("persistent_results", "Results written to the sink.", lambda p: p.results),
    ("persistent_late_rows", "Messages not applied for being late.", lambda p: p.late),
    ("persistent_dead_letters", "Bad (and, when output, late) records written to the dead-letter output.",
     lambda p: p.dead_letters),
    ("persistent_checkpoints", "Checkpoints the key groups wrote.", lambda p: p.checkpoints),
    ("persistent_checkpoint_bytes", "Bytes of the checkpoints the key groups wrote.", lambda p: p.checkpoint_bytes),
)


#: Set when the job has started: 1 when Spark's half of the fold runs, 0 when not.
SPARK_HALF = "persistent_spark_half_loaded"

#: The job's settings, served from the start with the value 1 as ``persistent_job_info``
#: (Prometheus' client adds the suffix ``_info``).
INFO = "persistent_job"


class JobMetrics:
    """Serves one job's metrics on ``address:port`` (``/metrics``) until ``close``;
    ``settings`` are served from the start as ``persistent_job_info``."""

    def __init__(self, port: int, app: str, address: str = DEFAULT_HOST, settings: dict[str, str] | None = None):
        prometheus = prometheus_client(port)
        registry = prometheus.CollectorRegistry()
        self.app = app
        self._gauges = [(prometheus.Gauge(name, text, ["app"], registry=registry), figure)
                        for name, text, figure in GAUGES]
        for (gauge, _), (name, _, _) in zip(self._gauges, GAUGES):
            if name not in TIMES:
                gauge.labels(app=app)  # served from now on, at 0
        self._counters = [(prometheus.Counter(name, text, ["app"], registry=registry).labels(app=app), figure)
                          for name, text, figure in COUNTERS]
        self._spark_half = prometheus.Gauge(
            SPARK_HALF, "1 when Spark's half of the fold runs (the fold before the shuffle, the packs, the job's "
            "watermark), 0 when the job runs without it (its first lines say why).", ["app"], registry=registry)
        if settings is not None:
            prometheus.Info(INFO, "The job's settings.", ["app"], registry=registry).labels(
                app=app).info(settings)
        try:
            self._server, self._thread = prometheus.start_http_server(port, address, registry)
        except OSError as exc:
            raise OSError(exc.errno, f"Job: cannot serve metrics on {address} port {port}: {exc.strerror}") from exc
        self.address = f"{address}:{port}"

    def started(self, spark_half: bool) -> None:
        """Serves whether the started job runs with Spark's half of the fold."""
        self._spark_half.labels(app=self.app).set(int(spark_half))

    def publish(self, progress: BatchProgress) -> None:
        """Sets the gauges to a committed micro-batch's figures and adds them to the totals."""
        for gauge, figure in self._gauges:
            value = figure(progress)
            if value is not None:
                gauge.labels(app=self.app).set(value)
        for counter, figure in self._counters:
            counter.inc(figure(progress))

    def close(self) -> None:
        """Stops the server and frees its port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
