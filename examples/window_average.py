"""WindowAverage: sliding-window average over generated numbers (Gearpump's WindowAverageApp).

Each closed window's average goes to the sink:

    spark-submit examples/window_average.py --checkpoint DIR --output sqlite:///PATH [--available-now]

With SQLite output the averages are in table ``window_average(key, window_start,
window_end, average)``. With ``--delivery at-least-once`` or ``at-most-once`` each
closed window is appended with its ``generation`` and ``batch``: after a failure a
window may appear twice (at-least-once) or lack messages (at-most-once; docs/delivery.md).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from monoids import Averaged  # noqa: E402
from persistent import BadRecords, Delivery, GeneratorSource, Job, PersistentTask, sink_from_uri, spark_session  # noqa: E402
from state import Window, WindowState  # noqa: E402


class WindowAverage(PersistentTask):
    """Averages each key's values over sliding windows."""

    def __init__(self, size_ms: int, step_ms: int):
        self.window = Window(size_ms, step_ms)

    def persistent_state(self):
        return WindowState(Averaged(), self.window)

    def process_batch(self, messages):
        return Averaged().prepare_column(messages["value"].to_numpy(dtype=float))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (local path, file:// or hdfs://)")
    p.add_argument("--output", required=True, help="sqlite:///PATH, a Parquet directory, or console")
    p.add_argument("--keys", type=int, default=4, help="number of keys")
    p.add_argument("--total", type=int, default=20_000, help="number of generated messages")
    p.add_argument("--step-ms", type=int, default=1, help="event time between two generated messages")
    p.add_argument("--window-ms", type=int, default=4_000, help="window size")
    p.add_argument("--slide-ms", type=int, default=1_000, help="window step")
    p.add_argument("--rows-per-batch", type=int, default=5_000, help="messages per micro-batch")
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    p.add_argument("--interval-ms", type=int, default=1000, help="checkpoint interval in event-time ms")
    p.add_argument("--key-groups", type=int, default=4, help="number of key groups (tasks)")
    p.add_argument("--bad-records", choices=[m.value for m in BadRecords], default="dead-letter",
                   help="what a bad input record does: fail the job, or go to CHECKPOINT/dead-letters")
    p.add_argument("--delivery", choices=[d.value for d in Delivery], default=Delivery.EXACTLY_ONCE.value,
                   help="delivery guarantee (default: %(default)s); see docs/delivery.md")
    return p


def build_job(args) -> Job:
    return Job(
        task=WindowAverage(args.window_ms, args.slide_ms),
        source=GeneratorSource(keys=args.keys, total=args.total, step_ms=args.step_ms,
                               max_rows_per_batch=args.rows_per_batch),
        sink=sink_from_uri(args.output, table="window_average", key_column="key", value_column="average"),
        checkpoint_dir=args.checkpoint,
        checkpoint_interval_ms=args.interval_ms,
        key_groups=args.key_groups,
        bad_records=args.bad_records,
        delivery=args.delivery,
    )


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    build_job(args).run(spark_session("window-average", args.master), available_now=args.available_now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
