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
import sys

from monoids import Averaged
from persistent import GeneratorSource, Job, MonoidTask, PersistentTask
from persistent.tools.options import add_job_options, job_settings, run_app
from state import Window, WindowState


class WindowAverage(PersistentTask):
    """Averages each key's values over sliding windows."""

    def __init__(self, size_ms: int, step_ms: int):
        self.window = Window(size_ms, step_ms)

    def persistent_state(self):
        return WindowState(Averaged(), self.window)

    def process_batch(self, messages):
        return Averaged().prepare_column(messages["value"].to_numpy(dtype=float))


class FoldedWindowAverage(MonoidTask):
    """The same averages as a MonoidTask: Spark folds each key's messages per window pane before the shuffle."""

    def __init__(self, size_ms: int, step_ms: int):
        self.window = Window(size_ms, step_ms)

    def persistent_state(self):
        return WindowState(Averaged(), self.window)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="The generator's message i (from 0) has key k{i % keys}, value i and event time (i + 1) * step-ms "
               "ms; each window of window-ms, every slide-ms, averages the values of its key.",
    )
    p.add_argument("--keys", type=int, default=4, help="number of keys")
    p.add_argument("--total", type=int, default=20_000, help="number of generated messages")
    p.add_argument("--step-ms", type=int, default=1, help="event time between two generated messages")
    p.add_argument("--window-ms", type=int, default=4_000, help="window size")
    p.add_argument("--slide-ms", type=int, default=1_000, help="window step")
    p.add_argument("--rows-per-batch", type=int, default=5_000, help="messages per micro-batch")
    p.add_argument("--fold", action="store_true",
                   help="average with a MonoidTask, whose messages fold before Spark's shuffle (the same averages)")
    add_job_options(p)
    return p


def build_job(args) -> Job:
    return Job(
        task=(FoldedWindowAverage if args.fold else WindowAverage)(args.window_ms, args.slide_ms),
        source=GeneratorSource(keys=args.keys, total=args.total, step_ms=args.step_ms,
                               max_rows_per_batch=args.rows_per_batch),
        **job_settings(args, table="window_average", key_column="key", value_column="average"),
    )


def main(argv=None) -> int:
    return run_app(parser(), build_job, "window-average", argv)


if __name__ == "__main__":
    sys.exit(main())
