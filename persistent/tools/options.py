"""Command-line options every job takes, for applications run with ``spark-submit``.

    parser = argparse.ArgumentParser()
    parser.add_argument("--input", ...)            # the application's own options
    add_job_options(parser)

    def build_job(args):
        return Job(task=..., source=..., **job_settings(args, table="counts", key_column="key", value_column="count"))

    def main(argv=None):
        return run_app(parser, build_job, "my-app", argv)

``run_app`` checks the job before Spark starts (``persistent.tools.preflight``): an
argument it cannot work with ends the program with one line naming it.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable

from persistent.core.badrecords import BadRecords, LateRecords
from persistent.core.errors import ConfigError, SetupError
from persistent.runtime.delivery import Delivery
from persistent.runtime.metrics import DEFAULT_HOST
from persistent.sinks.uri import SPELLINGS

__all__ = ["add_job_options", "add_kafka_options", "kafka_source", "job_settings", "run", "run_app"]


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--checkpoint``, ``--webhdfs-address``, ``--output``, ``--available-now``,
    ``--master``, ``--interval-ms``, ``--key-groups``, ``--bad-records``,
    ``--late-records``, ``--delivery``, ``--metrics-port`` and ``--metrics-host``."""
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (local path, file:// or hdfs://)")
    parser.add_argument("--webhdfs-address",
                        help="the HDFS NameNode's HTTP address (http://HOST:PORT) for hdfs:// checkpoint and input "
                             "directories (default: the NameNode's host, port 9870)")
    parser.add_argument("--output", required=True, help=SPELLINGS)
    parser.add_argument("--available-now", action="store_true",
                        help="process the input there is now, then stop (a progress bar shows how far it is)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    parser.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval in event-time ms")
    parser.add_argument("--key-groups", type=int,
                        help="number of key groups (tasks); default: the checkpoint directory's, or on a fresh "
                             "start 4 per core of the cluster")
    parser.add_argument("--bad-records", choices=[m.value for m in BadRecords], default=BadRecords.DEAD_LETTER.value,
                        help="what a bad input record does: fail the job, or go to CHECKPOINT/dead-letters")
    parser.add_argument("--late-records", choices=[m.value for m in LateRecords], default=LateRecords.DROP.value,
                        help="what a message behind the watermark does besides being counted: nothing, or go to "
                             "CHECKPOINT/dead-letters with reason late (default: %(default)s)")
    parser.add_argument("--delivery", choices=[d.value for d in Delivery], default=Delivery.EXACTLY_ONCE.value,
                        help="delivery guarantee (default: %(default)s); see docs/delivery.md")
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve the job's metrics for Prometheus at http://DRIVER:PORT/metrics "
                             "(needs persistent-state[metrics]); see docs/deploy.md")
    parser.add_argument("--metrics-host", default=DEFAULT_HOST, metavar="HOST",
                        help="the driver's address to serve the metrics on (default: %(default)s, this host only; "
                             "0.0.0.0: every interface)")


def add_kafka_options(parser: argparse.ArgumentParser) -> None:
    """Adds ``--kafka BOOTSTRAP``, ``--topic``, ``--max-offsets-per-batch`` and
    ``--kafka-option``: with either of the first two, the application reads a Kafka
    topic instead of its other input (``kafka_source``)."""
    kafka = parser.add_argument_group(
        "Kafka input", "read a topic through Spark's Kafka connector: spark-submit --packages "
                       "org.apache.spark:spark-sql-kafka-0-10_2.13:SPARK_VERSION (docs/deploy.md)")
    kafka.add_argument("--kafka", metavar="BOOTSTRAP", help="the brokers' addresses, HOST:PORT[,HOST:PORT...]")
    kafka.add_argument("--topic", help="the topic to read (several: comma-separated)")
    kafka.add_argument("--max-offsets-per-batch", type=int, default=100_000, metavar="N",
                       help="records per micro-batch at most, over all partitions (default: %(default)s)")
    kafka.add_argument("--kafka-option", action="append", default=[], metavar="kafka.NAME=VALUE",
                       help="an option of Kafka's client as Spark's Kafka source takes it, such as "
                            "kafka.security.protocol=SASL_SSL or kafka.sasl.jaas.config=...; once per option "
                            "(docs/integrations.md#secured-kafka)")


def kafka_source(args: argparse.Namespace):
    """The ``KafkaSource`` of the options of ``add_kafka_options``; a ``ConfigError``
    when only one of ``--kafka`` and ``--topic`` is given, ``--input`` as well, or a
    ``--kafka-option`` that is no ``kafka.NAME=VALUE``."""
    from persistent.sources.kafka import KafkaSource

    if not args.kafka or not args.topic:
        raise ConfigError("--kafka and --topic go together: the brokers and the topic to read")
    if getattr(args, "input", None):
        raise ConfigError("--input and --kafka name two inputs: give one")
    odd = next((option for option in args.kafka_option if not option.startswith("kafka.") or "=" not in option), None)
    if odd is not None:  # named without its value, which may be a password
        raise ConfigError(f"--kafka-option {odd.partition('=')[0]}: give kafka.NAME=VALUE, an option of Kafka's client")
    return KafkaSource(args.kafka, args.topic, max_offsets_per_batch=args.max_offsets_per_batch,
                       kafka_options=dict(option.split("=", 1) for option in args.kafka_option))


def job_settings(args: argparse.Namespace, table: str, key_column: str, value_column: str) -> dict:
    """``Job`` keyword arguments from the options of ``add_job_options``; the sink's
    results go to ``table`` (SQL) with the key and value in the named columns."""
    from persistent.sinks.uri import sink_from_uri

    return dict(
        sink=sink_from_uri(args.output, table=table, key_column=key_column, value_column=value_column),
        checkpoint_dir=args.checkpoint,
        webhdfs_address=args.webhdfs_address,
        checkpoint_interval_ms=args.interval_ms,
        key_groups=args.key_groups,
        bad_records=args.bad_records,
        late_records=args.late_records,
        delivery=args.delivery,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )


def run(job, args: argparse.Namespace, app_name: str, spark=None):
    """Checks ``job`` (or each stage of a ``Pipeline``) on ``--master``
    (``persistent.tools.preflight.check_job``), then
    runs it in ``spark`` (by default a new Spark session named ``app_name``) until it ends; with
    ``--available-now``, once the input there is now has been read. SIGINT (Ctrl-C) and
    SIGTERM stop it: ``persistent.runtime.stopping.JobStopped`` says where."""
    from persistent.runtime.stopping import JobStopped, on_signals
    from persistent.tools.preflight import check_job
    from persistent.tools.session import spark_session

    from persistent.runtime.pipeline import Pipeline

    for stage in job.jobs if isinstance(job, Pipeline) else (job,):
        check_job(stage, args.master)
    spark = spark or spark_session(app_name, args.master)
    with on_signals(spark):
        try:
            return job.run(spark, available_now=args.available_now)
        except JobStopped:
            raise
        except KeyboardInterrupt as interrupt:  # before the query started
            raise JobStopped(getattr(interrupt, "signum", signal.SIGINT), "before the job started") from None


def run_app(parser: argparse.ArgumentParser, build_job: Callable, app_name: str, argv: list[str] | None = None) -> int:
    """An application's ``main``: parses ``argv`` with ``parser``, makes the job with
    ``build_job(args)`` and ``run``s it. A setting the job cannot work with
    (``ConfigError``) ends it with one line on stderr and exit status 2, before Spark
    starts when the checks can see it; something the machine lacks (``SetupError``)
    with exit status 1; a signal (``JobStopped``) with one line saying where the job
    stopped and ``128 +`` the signal's number (130 for Ctrl-C). A standby
    (``persistent.tools.standby``) makes its job only once its gate opens."""
    from persistent.runtime.stopping import JobStopped
    from persistent.tools.standby import standby_session

    args = parser.parse_args(argv)
    try:
        spark = standby_session(app_name, args)
        run(build_job(args), args, app_name, spark)
    except JobStopped as stop:
        print(stop, file=sys.stderr)
        return stop.exit_status
    except ConfigError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")
    except SetupError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    return 0
