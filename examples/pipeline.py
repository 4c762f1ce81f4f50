"""UserTotals: two stateful stages chained through a Kafka topic, each exactly once.

Stage 1 counts each user's messages per 10 s window and writes every closed window to
the topic ``--between`` (a Kafka transaction per micro-batch, the window's end as the
record's timestamp); stage 2 reads that topic and keeps each user's total and largest
window count, which go to the sink:

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 examples/pipeline.py \\
        --kafka HOST:PORT --between TOPIC --checkpoint DIR --output sqlite:///PATH [--available-now]

The stages' checkpoint directories are ``DIR/stage-1`` and ``DIR/stage-2``; ``persistent
status DIR`` shows both. With SQLite output the totals are in table
``user_totals(user, totals)``, each a JSON ``[total, largest window count]``. Without
``--topic`` the users' messages are the generator's.
"""

from __future__ import annotations

import argparse
import sys

from monoids import Count, Max, Product, Sum
from persistent import GeneratorSource, PersistentTask, Pipeline
from persistent.core.errors import ConfigError
from persistent.tools.options import add_job_options, add_kafka_options, job_settings, kafka_source, run_app
from state import NonWindowState, Window, WindowState

#: The windows stage 1 counts in.
WINDOW_MS = 10_000


class UserWindowCounts(PersistentTask):
    """Stage 1: each user's messages per window of ``WINDOW_MS``."""

    def persistent_state(self):
        return WindowState(Count(), Window(WINDOW_MS))

    def process_message(self, state, message):
        state.update(message.timestamp, 1)


class UserTotals(PersistentTask):
    """Stage 2: each user's total and largest window count, from stage 1's windows."""

    def persistent_state(self):
        return NonWindowState(Product(Sum(), Max()))

    def process_message(self, state, message):
        count = int(message.value)
        state.update(message.timestamp, (count, count))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Without --topic the generator's message i (from 0) has user k{i % keys} and event time "
               "(i + 1) * step-ms ms.",
    )
    p.add_argument("--between", required=True, help="the Kafka topic between the stages (it must exist)")
    p.add_argument("--keys", type=int, default=100, help="generator: number of users")
    p.add_argument("--total", type=int, default=100_000, help="generator: number of messages")
    p.add_argument("--step-ms", type=int, default=1, help="generator: event time between two messages")
    p.add_argument("--rows-per-batch", type=int, default=20_000, help="generator: messages per micro-batch")
    p.add_argument("--watermark-delay-ms", type=int, default=0, help="how late (event-time ms) a message may be")
    add_kafka_options(p)
    add_job_options(p)
    return p


def build_pipeline(args) -> Pipeline:
    if not args.kafka:
        raise ConfigError("--kafka names the brokers of the topic between the stages")
    if args.topic:
        source = kafka_source(args)
    else:
        source = GeneratorSource(keys=args.keys, total=args.total, step_ms=args.step_ms,
                                 max_rows_per_batch=args.rows_per_batch)
    settings = job_settings(args, table="user_totals", key_column="user", value_column="totals")
    return Pipeline.of(source, UserWindowCounts(), args.between, UserTotals(), bootstrap_servers=args.kafka,
                       watermark_delay_ms=args.watermark_delay_ms, **settings)


def main(argv=None) -> int:
    return run_app(parser(), build_pipeline, "pipeline", argv)


if __name__ == "__main__":
    sys.exit(main())
