"""MessageCount: counts per key from the generator or a files source, exactly once by default.

    spark-submit examples/count.py --checkpoint DIR --output sqlite:///PATH [--total N] [--available-now]
    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 examples/count.py \
        --kafka HOST:PORT --topic TOPIC --checkpoint DIR --output sqlite:///PATH [--available-now]

A Kafka record counts for its key, at its timestamp.

The counts are ``SELECT key, SUM(count) FROM counts GROUP BY key`` with every
``--delivery``: one row per key with exactly-once, one per key and micro-batch with
at-least-once and at-most-once (docs/delivery.md).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from monoids import Count
from persistent import FilesSource, GeneratorSource, Job, MonoidTask, PersistentTask
from persistent.tools.options import (
    add_job_options,
    add_kafka_options,
    job_settings,
    kafka_source,
    run_app,
)
from state import NonWindowState


class MessageCount(PersistentTask):
    """Gearpump's CountProcessor: one message adds one to its key's count."""

    def persistent_state(self):
        return NonWindowState(Count())

    def process_message(self, state, message):
        state.update(message.timestamp, 1)


class VectorizedCount(PersistentTask):
    """The same counts a batch of messages at a time: every message of the batch adds one."""

    def persistent_state(self):
        return NonWindowState(Count())

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


class FoldedCount(MonoidTask):
    """The same counts as a MonoidTask: Spark folds each key's messages before the shuffle."""

    def persistent_state(self):
        return NonWindowState(Count())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Without --input or --kafka the messages are the generator's: message i (from 0) has key "
               "k{i % keys}, value i and event time i + 1 ms; --rows-per-batch messages make a micro-batch.",
    )
    p.add_argument("--input", help="directory of files with key and timestamp fields (default: the generator)")
    p.add_argument("--input-format", choices=["jsonl", "parquet"], default="jsonl", help="format of --input files")
    p.add_argument("--keys", type=int, default=100, help="generator: number of keys")
    p.add_argument("--total", type=int, default=100_000, help="generator: number of messages")
    p.add_argument("--rows-per-batch", type=int, default=20_000, help="generator: messages per micro-batch")
    p.add_argument("--watermark-delay-ms", type=int, default=0, help="how late (event-time ms) a message may be")
    p.add_argument("--fold", action="store_true",
                   help="count with a MonoidTask, whose messages fold before Spark's shuffle (the same counts)")
    add_kafka_options(p)
    add_job_options(p)
    return p


def build_job(args) -> Job:
    if args.kafka or args.topic:
        source = kafka_source(args)
    elif args.input:
        source = FilesSource(args.input, args.input_format, webhdfs_address=args.webhdfs_address)
    else:
        source = GeneratorSource(keys=args.keys, total=args.total, max_rows_per_batch=args.rows_per_batch)
    return Job(
        task=FoldedCount() if args.fold else MessageCount(),
        source=source,
        watermark_delay_ms=args.watermark_delay_ms,
        **job_settings(args, table="counts", key_column="key", value_column="count"),
    )


def main(argv=None) -> int:
    return run_app(parser(), build_job, "count", argv)


if __name__ == "__main__":
    sys.exit(main())
