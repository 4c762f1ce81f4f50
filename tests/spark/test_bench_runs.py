"""The benchmark's Spark runs on the tests' session, with a few small batches: what
``make bench`` runs must run."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bench.data import generate  # noqa: E402
from bench.spark_runs import SparkRuns  # noqa: E402

pytestmark = pytest.mark.spark


def test_the_recovery_case_restarts_the_job_on_path_a_then_on_path_b(spark, tmp_path):
    dataset = generate(tmp_path / "input", "uniform", 20, 2_000, 1_000)
    runs = SparkRuns(spark, tmp_path / "work")
    job = runs.vectorized(dataset)[1]
    # Each restart reads one more file from where the job stopped; the second finds the
    # first's lease on the job directory released.
    assert [runs.restart(job, dataset, lose_spark_checkpoint=lose) > 0 for lose in (False, True)] == [True, True]


def test_the_delivery_benchmarks_run_that_fails_twice_is_restarted_after_each_failure(spark, tmp_path):
    from bench import delivery
    from persistent.runtime.delivery import Delivery

    args = delivery.parser().parse_args(["--total", "6000", "--keys", "10", "--rows-per-batch", "1000",
                                         "--key-groups", "4"])
    outcome = delivery.failing_run(spark, args, tmp_path, Delivery.EXACTLY_ONCE, lose_spark_checkpoint=False)
    assert (len(outcome["restarts"]), outcome["lost"], outcome["duplicated"], outcome["late"]) == (2, 0, 0, 0), outcome
