"""Key groups sized to the cluster on a fresh start, kept for the directory's life."""

from __future__ import annotations

import os

import pytest

from persistent.recovery import RecoveryPath
from persistent.runtime import KEY_GROUPS_PER_CORE

pytestmark = pytest.mark.spark


def count_job(tmp_path, total: int, *more: str):
    import count

    args = count.parser().parse_args(
        ["--checkpoint", str(tmp_path / "ck"), "--output", f"sqlite://{tmp_path / 'out.db'}", "--available-now",
         "--total", str(total), "--keys", "50", "--rows-per-batch", "500", "--interval-ms", "100", *more]
    )
    job = count.build_job(args)
    job.on_progress = None
    return job


def test_a_fresh_start_sizes_key_groups_to_the_cluster_and_restarts_keep_them(spark, tmp_path):
    cores = spark.sparkContext.defaultParallelism
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    first = count_job(tmp_path, 1_000).run(spark)
    assert first.recovery.key_groups == KEY_GROUPS_PER_CORE * cores
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions  # the session's setting is back
    # One state partition per core, each holding several key groups.
    assert sorted(os.listdir(tmp_path / "ck" / "spark" / "state" / "0")) == [str(p) for p in range(cores)] + ["_metadata"]
    assert len(first.directory.clock.read().task_clocks) == KEY_GROUPS_PER_CORE * cores

    again = count_job(tmp_path, 2_000).run(spark)
    assert (again.recovery.path, again.recovery.key_groups) == (RecoveryPath.SAME_CHECKPOINT, first.recovery.key_groups)
    with pytest.raises(ValueError, match=f"written with key_groups={first.recovery.key_groups}, this job has key_groups=3"):
        count_job(tmp_path, 2_000, "--key-groups", "3").run(spark)
