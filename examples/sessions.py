"""Sessions: clicks per user session, over generated clicks with quiet periods.

Each closed session (a user's clicks while each follows the one before by less than
the gap) goes to the sink:

    spark-submit examples/sessions.py --checkpoint DIR --output sqlite:///PATH [--available-now]

The generator's message ``i`` is a click of user ``u{i % users}`` at ``(i + 1) *
step`` ms; a user is quiet (its clicks are dropped) in every fifth period of
``--period-ms``, at a phase of its own, so its clicks form sessions. With SQLite
output the sessions are in table ``sessions(user, window_start, window_end, clicks)``:
a session starts at its first click and ends at its last click plus the gap.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from monoids import Count
from persistent import GeneratorSource, Job, PersistentTask
from persistent.tools.options import add_job_options, job_settings, run_app
from state import SessionWindow, WindowState


class SessionClicks(PersistentTask):
    """Counts each user's clicks per session."""

    def __init__(self, gap_ms: int):
        self.window = SessionWindow(gap_ms)

    def persistent_state(self):
        return WindowState(Count(), self.window)

    def process_batch(self, messages):
        return np.ones(len(messages), dtype=np.int64)


def quiet(period, user):
    """Whether ``user`` (its number) is quiet in ``period`` (its number): one period in
    five, at a phase that depends on the user. Works on numbers and on Spark columns."""
    return (period * (user + 1) + user) % 5 == 0


def with_quiet_periods(period_ms: int):
    """The job's ``prepare``: the generator's messages as clicks ``u{n}``, without those
    of quiet periods."""

    def prepare(messages):
        from pyspark.sql import functions as F

        user = F.substring("key", 2, 10).cast("int")
        period = F.floor(F.col("timestamp") / period_ms)
        clicks = messages.where(~quiet(period, user))
        return clicks.withColumn("key", F.concat(F.lit("u"), user.cast("string")))

    return prepare


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="The generator's message i (from 0) is a click of user u{i % users} at (i + 1) * step-ms ms; a user "
               "is quiet (its clicks are dropped) in every fifth period of period-ms, at a phase of its own, so its "
               "clicks form sessions that end gap-ms after their last click.",
    )
    p.add_argument("--users", type=int, default=4, help="number of users")
    p.add_argument("--total", type=int, default=20_000, help="number of generated clicks (before quiet periods)")
    p.add_argument("--step-ms", type=int, default=1, help="event time between two generated clicks")
    p.add_argument("--period-ms", type=int, default=500, help="length of the periods a user is quiet in")
    p.add_argument("--gap-ms", type=int, default=100, help="the session gap")
    p.add_argument("--rows-per-batch", type=int, default=5_000, help="generated clicks per micro-batch")
    add_job_options(p)
    return p


def build_job(args) -> Job:
    return Job(
        task=SessionClicks(args.gap_ms),
        source=GeneratorSource(keys=args.users, total=args.total, step_ms=args.step_ms,
                               max_rows_per_batch=args.rows_per_batch),
        prepare=with_quiet_periods(args.period_ms),
        **job_settings(args, table="sessions", key_column="user", value_column="clicks"),
    )


def main(argv=None) -> int:
    return run_app(parser(), build_job, "sessions", argv)


if __name__ == "__main__":
    sys.exit(main())
