"""MessageCount: counts per key from the generator or a files source, exactly once by default.

    spark-submit examples/count.py --checkpoint DIR --output sqlite:///PATH [--total N] [--available-now]

The counts are ``SELECT key, SUM(count) FROM counts GROUP BY key`` with every
``--delivery``: one row per key with exactly-once, one per key and micro-batch with
at-least-once and at-most-once (docs/delivery.md).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from monoids import Count  # noqa: E402
from persistent import BadRecords, Delivery, FilesSource, GeneratorSource, Job, PersistentTask, sink_from_uri, spark_session  # noqa: E402
from state import NonWindowState  # noqa: E402


class MessageCount(PersistentTask):
    """Gearpump's CountProcessor: one message adds one to its key's count."""

    def persistent_state(self):
        return NonWindowState(Count())

    def process_message(self, state, message):
        state.update(message.timestamp, 1)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (local path, file:// or hdfs://)")
    p.add_argument("--output", required=True, help="sqlite:///PATH, a Parquet directory, or console")
    p.add_argument("--input", help="directory of files with key and timestamp fields (default: the generator)")
    p.add_argument("--input-format", choices=["jsonl", "parquet"], default="jsonl", help="format of --input files")
    p.add_argument("--keys", type=int, default=100, help="generator: number of keys")
    p.add_argument("--total", type=int, default=100_000, help="generator: number of messages")
    p.add_argument("--rows-per-batch", type=int, default=20_000, help="generator: messages per micro-batch")
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    p.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval in event-time ms")
    p.add_argument("--watermark-delay-ms", type=int, default=0, help="how late (event-time ms) a message may be")
    p.add_argument("--key-groups", type=int, default=16, help="number of key groups (tasks)")
    p.add_argument("--bad-records", choices=[m.value for m in BadRecords], default="dead-letter",
                   help="what a bad input record does: fail the job, or go to CHECKPOINT/dead-letters")
    p.add_argument("--delivery", choices=[d.value for d in Delivery], default=Delivery.EXACTLY_ONCE.value,
                   help="delivery guarantee (default: %(default)s); see docs/delivery.md")
    return p


def build_job(args) -> Job:
    if args.input:
        source = FilesSource(args.input, args.input_format)
    else:
        source = GeneratorSource(keys=args.keys, total=args.total, max_rows_per_batch=args.rows_per_batch)
    return Job(
        task=MessageCount(),
        source=source,
        sink=sink_from_uri(args.output, table="counts", key_column="key", value_column="count"),
        checkpoint_dir=args.checkpoint,
        checkpoint_interval_ms=args.interval_ms,
        watermark_delay_ms=args.watermark_delay_ms,
        key_groups=args.key_groups,
        bad_records=args.bad_records,
        delivery=args.delivery,
    )


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    build_job(args).run(spark_session("count", args.master), available_now=args.available_now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
